/* A stub CUDA driver (libcuda.so.1) for measuring the CPU-side cost of Python bindings.
 *
 * Built at run time by bench/bench_launch_cpu.py against the toolkit's real cuda.h, so every function
 * below has the exact prototype (and, through cuda.h's #define renames, the exact exported symbol:
 * cuMemAlloc -> cuMemAlloc_v2) of the real driver.  Every function returns at once: no GPU, no
 * threads, no locks.  Handles are small heap objects or counters; device "memory" is a range of
 * addresses that is never dereferenced.  What it does compute is what a binding can observe:
 * device attributes of an H200-like device, kernels looked up by name in a PTX image, and each
 * kernel's parameter sizes and offsets parsed from its `.entry name(...)` list (cuFuncGetParamInfo,
 * cuKernelGetParamInfo).
 *
 * Entry points resolve by name through cuGetProcAddress(_v2), as cuda-bindings and our trampolines do.
 * A name this stub does not implement resolves to a placeholder that returns CUDA_ERROR_NOT_SUPPORTED;
 * with STUB_CUDA_LOG=1 each placeholder prints its name the first time it is called (STUB_CUDA_LOG=2
 * also prints every name resolved), so one can see what a binding needs.  stub_cuda_counters() exposes
 * how many launches, allocations and frees reached the stub (a benchmark checks that every variant
 * really calls the driver), and how often the primary context was retained and released, and how many
 * calls on it came after its last release (a test of a binding's context lifetime: the real driver
 * destroys the primary context, with everything in it, when its last retain is released).  The list of unknown names is not guarded by a lock: resolve from one thread.
 */

#include <cuda.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STUB_EXPORT __attribute__((visibility("default")))
#define IA_STUB_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ------------------------------------------------------------------------------- counters, logging */

typedef struct {
    unsigned long long launches, allocs, frees, unknown_calls;
    /* cuDevicePrimaryCtxRetain / Release calls, and calls that use the context (allocate, free, copy, launch,
       create or destroy a stream, event, module or pool) made while no retain was held */
    unsigned long long ctx_retains, ctx_releases, ctx_used_after_release;
} stub_counters_t;

static stub_counters_t counters;

STUB_EXPORT stub_counters_t *stub_cuda_counters(void) { return &counters; }

static int log_level = -1;

static int stub_log(void)
{
    if (log_level < 0) {
        const char *v = getenv("STUB_CUDA_LOG");
        log_level = v != NULL ? atoi(v) : 0;
    }
    return log_level;
}

#define BUMP(field) __atomic_fetch_add(&counters.field, 1ULL, __ATOMIC_RELAXED)

static long primary_refs = 0;  /* retains of the primary context not yet released */

/* A call that needs the context: counted if none is held (the real driver would have destroyed it).  Only
   counted once something retained it, so a caller that never retains (none of ours) is not reported. */
static void ctx_use(void)
{
    if (__atomic_load_n(&primary_refs, __ATOMIC_RELAXED) == 0 &&
        __atomic_load_n(&counters.ctx_retains, __ATOMIC_RELAXED) > 0)
        BUMP(ctx_used_after_release);
}

/* ------------------------------------------------------------------------------------ handles */

struct CUctx_st { int device; };
/* A graph (CUgraph) or its instantiation (CUgraphExec): how many kernel launches were captured into it. */
struct CUgraph_st { unsigned long long launches; };
struct CUgraphExec_st { unsigned long long launches; };
/* capture: the graph being captured on the stream (cuStreamBeginCapture .. cuStreamEndCapture), or NULL */
struct CUstream_st { unsigned int flags; int priority; unsigned long long id; struct CUgraph_st *capture; };
struct CUevent_st { unsigned int flags; };
struct CUmemPoolHandle_st { int device; };

#define STUB_MAX_PARAMS 64

/* A module (CUmodule) or library (CUlibrary): the image, kept if it is PTX text. */
/* kernels: those looked up so far (lookup_kernel), found again by name, as the real driver returns one handle per
   kernel of a module; they are never freed, not even by the unload, so that a binding that launches a kernel of
   an unloaded module (a mistake the tests make on purpose) reaches this stub's record, not freed memory. */
struct stub_kernel;
struct CUmod_st { char *ptx; struct stub_kernel *kernels; };
struct CUlib_st { char *ptx; struct stub_kernel *kernels; };

/* One kernel, used both as CUfunction and CUkernel. */
typedef struct stub_kernel {
    char name[256];
    int nparams;
    size_t size[STUB_MAX_PARAMS];
    size_t offset[STUB_MAX_PARAMS];
    struct stub_kernel *next;  /* the module's or library's list */
} stub_kernel;

static struct CUctx_st primary_ctx = {0};
static struct CUmemPoolHandle_st default_pool = {0};
static __thread CUcontext current_ctx = NULL;
static unsigned long long next_stream_id = 1;
static uintptr_t next_address = 0x7f0000000000ULL;  /* fake device addresses, 256-byte aligned */

static CUdeviceptr fake_address(size_t bytes)
{
    size_t step = (bytes + 255) & ~(size_t)255;
    if (step == 0)
        step = 256;
    return (CUdeviceptr)__atomic_fetch_add(&next_address, step, __ATOMIC_RELAXED);
}

/* --------------------------------------------------------------------------- PTX parameter lists */

static char *ptx_copy(const void *image)
{
    const char *s = (const char *)image;
    if (s == NULL || (unsigned char)s[0] == 0x7f)  /* an ELF cubin: kernels are not parsed */
        return NULL;
    return strdup(s);
}

static size_t type_size(const char *t, size_t n)
{
    /* t points after '.', ex) "u64 name", "f32 name", "b8 name[16]" */
    if (n >= 2 && (t[0] == 'u' || t[0] == 's' || t[0] == 'b' || t[0] == 'f')) {
        int bits = atoi(t + 1);
        if (bits >= 8)
            return (size_t)bits / 8;
    }
    if (n >= 4 && strncmp(t, "pred", 4) == 0)
        return 1;
    return 0;
}

/* Fill k from ".entry <name>(...)" in ptx; 0 if found. */
static int ptx_find_kernel(const char *ptx, const char *name, stub_kernel *k)
{
    size_t nlen = strlen(name);
    const char *p = ptx;
    if (ptx == NULL)
        return 1;
    while ((p = strstr(p, ".entry")) != NULL) {
        const char *q = p + 6;
        while (*q == ' ' || *q == '\t')
            q++;
        if (strncmp(q, name, nlen) == 0 && (q[nlen] == '(' || q[nlen] == ' ' || q[nlen] == '\n' ||
                                              q[nlen] == '\r' || q[nlen] == '\t')) {
            const char *open = strchr(q + nlen, '(');
            const char *close = open ? strchr(open, ')') : NULL;
            const char *brace = strchr(q + nlen, '{');
            size_t end = 0;
            k->nparams = 0;
            if (open == NULL || close == NULL || (brace != NULL && brace < open))
                return 0;  /* no parameter list */
            for (const char *s = open + 1; s < close && k->nparams < STUB_MAX_PARAMS;) {
                const char *comma = memchr(s, ',', (size_t)(close - s));
                const char *stop = comma ? comma : close;
                size_t size = 0, align = 0;
                const char *t = s;
                int is_param = 0;
                while (t < stop) {
                    const char *dot = memchr(t, '.', (size_t)(stop - t));
                    if (dot == NULL)
                        break;
                    if (strncmp(dot, ".param", 6) == 0) {
                        is_param = 1;
                    } else if (strncmp(dot, ".align", 6) == 0) {
                        align = (size_t)atoi(dot + 6);
                    } else if (size == 0) {
                        size = type_size(dot + 1, (size_t)(stop - dot - 1));
                    }
                    t = dot + 1;
                }
                if (is_param) {
                    const char *bracket = memchr(s, '[', (size_t)(stop - s));
                    if (bracket != NULL)
                        size *= (size_t)atoi(bracket + 1);
                    if (align == 0)
                        align = size ? size : 1;
                    end = (end + align - 1) / align * align;
                    k->offset[k->nparams] = end;
                    k->size[k->nparams] = size;
                    end += size;
                    k->nparams++;
                }
                s = stop + 1;
            }
            return 0;
        }
        p = q;
    }
    return 1;
}

/* The kernel `name` of a module's or library's PTX: the one found before (*kernels, a list that only grows,
   prepended to without a lock), else parsed from the image and added.  Without a module (ptx NULL: a NULL
   handle or a non-PTX image) every name is found, uncached. */
static CUresult lookup_kernel(const char *ptx, stub_kernel **kernels, const char *name, stub_kernel **out)
{
    stub_kernel *k;
    if (out == NULL || name == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    for (k = kernels != NULL ? __atomic_load_n(kernels, __ATOMIC_ACQUIRE) : NULL; k != NULL; k = k->next) {
        if (strcmp(k->name, name) == 0) {
            *out = k;
            return CUDA_SUCCESS;
        }
    }
    k = (stub_kernel *)calloc(1, sizeof *k);
    if (k == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (ptx != NULL && ptx_find_kernel(ptx, name, k) != 0) {
        free(k);
        return CUDA_ERROR_NOT_FOUND;
    }
    strncpy(k->name, name, sizeof k->name - 1);
    if (kernels != NULL && strlen(name) < sizeof k->name) {  /* (a longer name is kept cut: not found again) */
        k->next = __atomic_load_n(kernels, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(kernels, &k->next, k, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
            ;
    }
    *out = k;
    return CUDA_SUCCESS;
}

static CUresult param_info(const stub_kernel *k, size_t i, size_t *offset, size_t *size)
{
    if (k == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if (i >= (size_t)k->nparams)
        return CUDA_ERROR_INVALID_VALUE;
    if (offset != NULL)
        *offset = k->offset[i];
    if (size != NULL)
        *size = k->size[i];
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------- initialisation, errors */

STUB_EXPORT CUresult CUDAAPI cuInit(unsigned int flags) { (void)flags; return CUDA_SUCCESS; }

/* The version of the cuda.h this stub was built with, or STUB_CUDA_DRIVER_VERSION (ex. 13050: a driver
 * at least as new as the NVRTC in use, so that cuda.core does not warn that its PTX will not load). */
STUB_EXPORT CUresult CUDAAPI cuDriverGetVersion(int *v)
{
    const char *env = getenv("STUB_CUDA_DRIVER_VERSION");
    if (v == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *v = env != NULL && atoi(env) > 0 ? atoi(env) : CUDA_VERSION;
    return CUDA_SUCCESS;
}

/* The driver's private tables (NVRTC dlopens libcuda.so.1 and asks for one): none here. */
STUB_EXPORT CUresult CUDAAPI cuGetExportTable(const void **table, const CUuuid *id)
{
    (void)id;
    if (table != NULL)
        *table = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}

STUB_EXPORT CUresult CUDAAPI cuGetErrorName(CUresult error, const char **s)
{
    if (s == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    switch (error) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case CUDA_ERROR_INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_NOT_READY: *s = "CUDA_ERROR_NOT_READY"; break;
    default: *s = "CUDA_ERROR_UNKNOWN"; return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuGetErrorString(CUresult error, const char **s)
{
    return cuGetErrorName(error, s);
}

/* ------------------------------------------------------------------------------------- devices */

STUB_EXPORT CUresult CUDAAPI cuDeviceGetCount(int *count) { *count = 1; return CUDA_SUCCESS; }

STUB_EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice *dev, int ordinal)
{
    if (ordinal != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = 0;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    (void)dev;
    snprintf(name, (size_t)len, "%s", "Stub H200 (no GPU: CPU-side binding cost only)");
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    (void)dev;
    memset(uuid, 0, sizeof *uuid);
    uuid->bytes[0] = 0x5a;
    return CUDA_SUCCESS;
}

#define STUB_TOTAL_MEM ((size_t)141 << 30)  /* the device's memory: more in one allocation is out of memory */

STUB_EXPORT CUresult CUDAAPI cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
    (void)dev;
    *bytes = STUB_TOTAL_MEM;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    (void)dev;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *pi = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *pi = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *pi = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *pi = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = 48 << 10; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = 227 << 10; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *pi = 228 << 10; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *pi = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *pi = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *pi = 65536; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *pi = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *pi = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *pi = 6144; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *pi = 50 << 20; break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: *pi = 64 << 10; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: *pi = CU_COMPUTEMODE_DEFAULT; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *pi = 0x19; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID: *pi = -1; break;
    case CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID: *pi = 0x233510de; break;
    case CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *pi = 2; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX: *pi = 0; return CUDA_ERROR_INVALID_VALUE;
    default:  /* every capability flag: supported */
        *pi = 1;
        break;
    }
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuDeviceGetPCIBusId(char *id, int len, CUdevice dev)
{
    (void)dev;
    snprintf(id, (size_t)len, "%s", "0000:19:00.0");
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------- contexts */

STUB_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    (void)dev;
    __atomic_fetch_add(&primary_refs, 1L, __ATOMIC_RELAXED);
    BUMP(ctx_retains);
    *ctx = &primary_ctx;
    return CUDA_SUCCESS;
}

/* A release without a retain is refused, as the real driver does (CUDA_ERROR_INVALID_CONTEXT). */
STUB_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
    long refs = __atomic_load_n(&primary_refs, __ATOMIC_RELAXED);
    (void)dev;
    do {
        if (refs == 0)
            return CUDA_ERROR_INVALID_CONTEXT;
    } while (!__atomic_compare_exchange_n(&primary_refs, &refs, refs - 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    BUMP(ctx_releases);
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    (void)dev;
    *flags = 0;
    *active = __atomic_load_n(&primary_refs, __ATOMIC_RELAXED) > 0;  /* as the driver: while retained */
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    (void)dev; (void)flags;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) { current_ctx = ctx; return CUDA_SUCCESS; }
STUB_EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext *ctx) { *ctx = current_ctx; return CUDA_SUCCESS; }
STUB_EXPORT CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) { current_ctx = ctx; return CUDA_SUCCESS; }

STUB_EXPORT CUresult CUDAAPI cuCtxPopCurrent(CUcontext *ctx)
{
    if (ctx != NULL)
        *ctx = current_ctx;
    current_ctx = NULL;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuCtxGetDevice(CUdevice *dev)
{
    if (current_ctx == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = 0;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *dev, CUcontext ctx)
{
    (void)ctx;
    *dev = 0;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long *id)
{
    (void)ctx;
    *id = 1;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags) { *flags = 0; return CUDA_SUCCESS; }
STUB_EXPORT CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int *v)
{
    (void)ctx;
    *v = 3020;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
    if (least != NULL)
        *least = 0;
    if (greatest != NULL)
        *greatest = -5;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuCtxSynchronize(void) { return CUDA_SUCCESS; }
STUB_EXPORT CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) { (void)ctx; return CUDA_SUCCESS; }

/* ------------------------------------------------------------------------------------- streams */

STUB_EXPORT CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *s, unsigned int flags, int priority)
{
    struct CUstream_st *st = (struct CUstream_st *)calloc(1, sizeof *st);
    ctx_use();
    if (st == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    st->flags = flags;
    st->priority = priority;
    st->id = __atomic_fetch_add(&next_stream_id, 1ULL, __ATOMIC_RELAXED);
    *s = st;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuStreamCreate(CUstream *s, unsigned int flags)
{
    return cuStreamCreateWithPriority(s, flags, 0);
}

STUB_EXPORT CUresult CUDAAPI cuStreamDestroy(CUstream s) { ctx_use(); free(s); return CUDA_SUCCESS; }
STUB_EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream s) { (void)s; return CUDA_SUCCESS; }

/* Work that completes later: with STUB_CUDA_RECORD=1, the next `busy_queries` calls of cuStreamQuery or
   cuEventQuery answer CUDA_ERROR_NOT_READY (set from a test through stub_cuda_busy()); synchronising
   succeeds at once, as ever.  Not thread-safe. */
static int busy_queries = 0;
static int recording(void);

STUB_EXPORT int *stub_cuda_busy(void) { return &busy_queries; }

static CUresult stub_query(void)
{
    if (recording() && busy_queries > 0) {
        busy_queries--;
        return CUDA_ERROR_NOT_READY;
    }
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuStreamQuery(CUstream s) { (void)s; return stub_query(); }

static void stub_record_wait(CUstream s);

STUB_EXPORT CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
    (void)e; (void)flags;
    stub_record_wait(s);
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuStreamGetFlags(CUstream s, unsigned int *flags)
{
    *flags = s != NULL ? s->flags : 0;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuStreamGetPriority(CUstream s, int *priority)
{
    *priority = s != NULL ? s->priority : 0;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuStreamGetId(CUstream s, unsigned long long *id)
{
    *id = s != NULL ? s->id : 0;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuStreamGetCtx(CUstream s, CUcontext *ctx)
{
    (void)s;
    *ctx = &primary_ctx;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuStreamGetDevice(CUstream s, CUdevice *dev)
{
    (void)s;
    *dev = 0;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
    *status = s != NULL && s->capture != NULL ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------ capture and graphs */
/* A capturing stream's kernel launches are counted into its graph instead of `launches`; each cuGraphLaunch
   adds the graph's count to `launches` (the replayed launches reach the "device").  Copies and fills are not
   recorded (nothing runs here anyway). */

STUB_EXPORT CUresult CUDAAPI cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode)
{
    (void)mode;
    ctx_use();
    if (s == NULL)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  /* (the legacy default stream cannot capture) */
    if (s->capture != NULL)
        return CUDA_ERROR_ILLEGAL_STATE;
    if ((s->capture = (struct CUgraph_st *)calloc(1, sizeof *s->capture)) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph *graph)
{
    ctx_use();
    if (s == NULL || s->capture == NULL)
        return CUDA_ERROR_ILLEGAL_STATE;
    *graph = s->capture;
    s->capture = NULL;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *exec, CUgraph graph, unsigned long long flags)
{
    (void)flags;
    if (graph == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((*exec = (struct CUgraphExec_st *)calloc(1, sizeof **exec)) == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    (*exec)->launches = graph->launches;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuGraphLaunch(CUgraphExec exec, CUstream s)
{
    (void)s;
    ctx_use();
    if (exec == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    __atomic_fetch_add(&counters.launches, exec->launches, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuGraphDestroy(CUgraph graph) { free(graph); return CUDA_SUCCESS; }
STUB_EXPORT CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec exec) { free(exec); return CUDA_SUCCESS; }

/* -------------------------------------------------------------------------------------- events */

STUB_EXPORT CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned int flags)
{
    struct CUevent_st *ev = (struct CUevent_st *)calloc(1, sizeof *ev);
    ctx_use();
    if (ev == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ev->flags = flags;
    *e = ev;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuEventDestroy(CUevent e) { ctx_use(); free(e); return CUDA_SUCCESS; }
STUB_EXPORT CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) { (void)e; (void)s; return CUDA_SUCCESS; }

STUB_EXPORT CUresult CUDAAPI cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags)
{
    (void)e; (void)s; (void)flags;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent e) { (void)e; return CUDA_SUCCESS; }
STUB_EXPORT CUresult CUDAAPI cuEventQuery(CUevent e) { (void)e; return stub_query(); }

STUB_EXPORT CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
    (void)a; (void)b;
    *ms = 0.001f;
    return CUDA_SUCCESS;
}

/* -------------------------------------------------------------------------------------- memory */

/* With STUB_CUDA_RECORD=1, cuMemAlloc and cuMemFree keep what they were last given and the context current
   when they were called, and answer the next `fail_*_count` calls with `fail_*_status` instead (for tests of
   a binding's device memory; set from the test through stub_cuda_memory()).  Only the counts are thread-safe. */
typedef struct {
    size_t alloc_bytes;
    CUdeviceptr alloc_ptr, free_ptr;
    CUcontext alloc_ctx, free_ctx;
    int fail_alloc_count, fail_free_count;
    CUresult fail_alloc_status, fail_free_status;
} stub_memory_t;

static stub_memory_t memory_record;

STUB_EXPORT stub_memory_t *stub_cuda_memory(void) { return &memory_record; }

/* device memory, or managed memory (which, as the driver's, may be more than the device has) */
static CUresult stub_alloc(CUdeviceptr *p, size_t bytes, int managed)
{
    if (recording()) {
        memory_record.alloc_bytes = bytes;
        memory_record.alloc_ctx = current_ctx;
        if (memory_record.fail_alloc_count > 0) {
            memory_record.fail_alloc_count--;
            return memory_record.fail_alloc_status;
        }
    }
    if (!managed && bytes > STUB_TOTAL_MEM)
        return CUDA_ERROR_OUT_OF_MEMORY;
    BUMP(allocs);
    ctx_use();
    *p = fake_address(bytes);
    if (recording())
        memory_record.alloc_ptr = *p;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr *p, size_t bytes) { return stub_alloc(p, bytes, 0); }

STUB_EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *p, size_t bytes, unsigned int flags)
{
    (void)flags;
    return stub_alloc(p, bytes, 1);
}

STUB_EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr p)
{
    if (recording()) {
        memory_record.free_ptr = p;
        memory_record.free_ctx = current_ctx;
        if (memory_record.fail_free_count > 0) {
            memory_record.fail_free_count--;
            return memory_record.fail_free_status;
        }
    }
    BUMP(frees);
    ctx_use();
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *p, size_t bytes, CUstream s)
{
    (void)s;
    return cuMemAlloc(p, bytes);
}

/* With STUB_CUDA_RECORD=1, the stream-ordered allocator keeps what it was last given and the context current
   when it was called, counts pool trims, and answers the next `fail_*_count` calls with `fail_*_status`
   instead (for tests of a binding's pool; set from the test through stub_cuda_pool()).  Only the counts are
   thread-safe. */
typedef struct {
    unsigned long long allocs, frees, trims;
    size_t alloc_bytes;
    CUmemoryPool alloc_pool;
    CUstream alloc_stream, free_stream;
    CUdeviceptr alloc_ptr, free_ptr;
    CUcontext alloc_ctx, free_ctx;
    int fail_alloc_count, fail_free_count;
    CUresult fail_alloc_status, fail_free_status;
    unsigned long long waits, waits_at_free;  /* cuStreamWaitEvent calls, and their count at the last free */
    CUstream wait_stream;                     /* the stream of the last cuStreamWaitEvent */
} stub_pool_t;

static stub_pool_t pool_record;

STUB_EXPORT stub_pool_t *stub_cuda_pool(void) { return &pool_record; }

static void stub_record_wait(CUstream s)
{
    if (recording()) {
        __atomic_fetch_add(&pool_record.waits, 1ULL, __ATOMIC_RELAXED);
        pool_record.wait_stream = s;
    }
}

STUB_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t bytes, CUmemoryPool pool, CUstream s)
{
    CUresult r;
    if (recording()) {
        __atomic_fetch_add(&pool_record.allocs, 1ULL, __ATOMIC_RELAXED);
        pool_record.alloc_bytes = bytes;
        pool_record.alloc_pool = pool;
        pool_record.alloc_stream = s;
        pool_record.alloc_ctx = current_ctx;
        if (pool_record.fail_alloc_count > 0) {
            pool_record.fail_alloc_count--;
            return pool_record.fail_alloc_status;
        }
    }
    r = cuMemAlloc(p, bytes);
    pool_record.alloc_ptr = *p;
    return r;
}

STUB_EXPORT CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
    if (recording()) {
        __atomic_fetch_add(&pool_record.frees, 1ULL, __ATOMIC_RELAXED);
        pool_record.waits_at_free = pool_record.waits;
        pool_record.free_ptr = p;
        pool_record.free_stream = s;
        pool_record.free_ctx = current_ctx;
        if (pool_record.fail_free_count > 0) {
            pool_record.fail_free_count--;
            return pool_record.fail_free_status;
        }
    }
    return cuMemFree(p);
}

STUB_EXPORT CUresult CUDAAPI cuMemHostAlloc(void **p, size_t bytes, unsigned int flags)
{
    (void)flags;
    BUMP(allocs);
    *p = malloc(bytes ? bytes : 1);  /* host memory is real: a caller may write to it */
    return *p != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

STUB_EXPORT CUresult CUDAAPI cuMemAllocHost(void **p, size_t bytes) { return cuMemHostAlloc(p, bytes, 0); }
STUB_EXPORT CUresult CUDAAPI cuMemFreeHost(void *p) { BUMP(frees); free(p); return CUDA_SUCCESS; }

STUB_EXPORT CUresult CUDAAPI cuMemGetInfo(size_t *free_bytes, size_t *total)
{
    *free_bytes = (size_t)140 << 30;
    *total = STUB_TOTAL_MEM;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    (void)dev;
    *pool = &default_pool;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    if (props == NULL || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    *pool = (CUmemoryPool)malloc(16);  /* a handle of its own; nothing in it is read */
    return *pool ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

STUB_EXPORT CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
    ctx_use();
    if (pool != &default_pool)
        free((void *)pool);
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return cuDeviceGetDefaultMemPool(pool, dev);
}

STUB_EXPORT CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    (void)pool; (void)attr; (void)value;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    (void)pool;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *(int *)value = 1;
        break;
    default:
        *(cuuint64_t *)value = 0;
        break;
    }
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    (void)pool; (void)keep;
    if (recording())
        pool_record.trims++;
    return CUDA_SUCCESS;
}

/* the last copy or fill, as the driver received it (a test checks offsets and counts: no memory is touched) */
typedef struct {
    char what[24];                       /* "htod", "dtoh", "dtod", "memset8", "memset16", "memset32" */
    unsigned long long dst, src, count;  /* addresses (host or device), bytes (copies) or elements (fills) */
    unsigned long long value;            /* a fill's value */
} stub_transfer_t;

static stub_transfer_t last_transfer;

STUB_EXPORT stub_transfer_t *stub_cuda_last_transfer(void) { return &last_transfer; }

static void transfer(const char *what, unsigned long long dst, unsigned long long src, size_t count,
                     unsigned long long value)
{
    snprintf(last_transfer.what, sizeof last_transfer.what, "%s", what);
    last_transfer.dst = dst;
    last_transfer.src = src;
    last_transfer.count = count;
    last_transfer.value = value;
}

STUB_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    (void)s;
    ctx_use();
    transfer("htod", dst, (unsigned long long)(uintptr_t)src, n, 0);
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    (void)s;
    ctx_use();
    transfer("dtoh", (unsigned long long)(uintptr_t)dst, src, n, 0);
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    (void)s;
    transfer("dtod", dst, src, n, 0);
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s)
{
    (void)s;
    ctx_use();
    transfer("memset8", dst, 0, n, v);
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n, CUstream s)
{
    (void)s;
    ctx_use();
    transfer("memset16", dst, 0, n, v);
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s)
{
    (void)s;
    ctx_use();
    transfer("memset32", dst, 0, n, v);
    return CUDA_SUCCESS;
}

/* strided copies: what "2d h>d" (the source's memory type, then the destination's: h host, d device, ? other),
 * dst/src the pointers of those types, count the bytes of the region, value the pitches (src << 32 | dst); a 3-D
 * copy's what also names each side's rows per slice ("3d h>d 3,4": srcHeight 3, dstHeight 4) */
static char memory_type(CUmemorytype t) { return t == CU_MEMORYTYPE_HOST ? 'h' : t == CU_MEMORYTYPE_DEVICE ? 'd' : '?'; }

STUB_EXPORT CUresult CUDAAPI cuMemcpy2DAsync(const CUDA_MEMCPY2D *p, CUstream s)
{
    char what[24];
    (void)s;
    ctx_use();
    if (p->srcXInBytes || p->srcY || p->dstXInBytes || p->dstY || p->srcPitch < p->WidthInBytes ||
        p->dstPitch < p->WidthInBytes)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(what, sizeof what, "2d %c>%c", memory_type(p->srcMemoryType), memory_type(p->dstMemoryType));
    transfer(what, p->dstMemoryType == CU_MEMORYTYPE_HOST ? (unsigned long long)(uintptr_t)p->dstHost : p->dstDevice,
             p->srcMemoryType == CU_MEMORYTYPE_HOST ? (unsigned long long)(uintptr_t)p->srcHost : p->srcDevice,
             p->WidthInBytes * p->Height, (unsigned long long)p->srcPitch << 32 | p->dstPitch);
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuMemcpy3DAsync(const CUDA_MEMCPY3D *p, CUstream s)
{
    char what[24];
    (void)s;
    ctx_use();
    if (p->srcXInBytes || p->srcY || p->srcZ || p->dstXInBytes || p->dstY || p->dstZ || p->srcLOD || p->dstLOD ||
        p->reserved0 || p->reserved1 || p->srcPitch < p->WidthInBytes || p->dstPitch < p->WidthInBytes)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(what, sizeof what, "3d %c>%c %zu,%zu", memory_type(p->srcMemoryType), memory_type(p->dstMemoryType),
             p->srcHeight, p->dstHeight);
    transfer(what, p->dstMemoryType == CU_MEMORYTYPE_HOST ? (unsigned long long)(uintptr_t)p->dstHost : p->dstDevice,
             p->srcMemoryType == CU_MEMORYTYPE_HOST ? (unsigned long long)(uintptr_t)p->srcHost : p->srcDevice,
             p->WidthInBytes * p->Height * p->Depth, (unsigned long long)p->srcPitch << 32 | p->dstPitch);
    return CUDA_SUCCESS;
}

/* prefetch: dst the pointer, src the location (type << 32 | id), value the flags */
STUB_EXPORT CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr p, size_t n, CUmemLocation location, unsigned int flags,
                                                CUstream s)
{
    (void)s;
    ctx_use();
    transfer("prefetch", p, (unsigned long long)location.type << 32 | (unsigned int)location.id, n, flags);
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    (void)dst; (void)src; (void)n; (void)s;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------- modules and libraries */

STUB_EXPORT CUresult CUDAAPI cuModuleLoadData(CUmodule *m, const void *image)
{
    struct CUmod_st *mod = (struct CUmod_st *)calloc(1, sizeof *mod);
    ctx_use();
    if (mod == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    mod->ptx = ptx_copy(image);
    *m = mod;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned int n,
                                                CUjit_option *options, void **values)
{
    (void)n; (void)options; (void)values;
    return cuModuleLoadData(m, image);
}

STUB_EXPORT CUresult CUDAAPI cuModuleUnload(CUmodule m)
{
    ctx_use();
    if (m != NULL) {
        free(m->ptx);
        free(m);
    }
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
    return lookup_kernel(m != NULL ? m->ptx : NULL, m != NULL && m->ptx != NULL ? &m->kernels : NULL, name,
                         (stub_kernel **)f);
}

STUB_EXPORT CUresult CUDAAPI cuFuncGetParamInfo(CUfunction f, size_t i, size_t *offset, size_t *size)
{
    return param_info((const stub_kernel *)f, i, offset, size);
}

STUB_EXPORT CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction f)
{
    (void)f;
    *pi = attrib == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute attrib, int value)
{
    (void)f; (void)attrib; (void)value;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction f)
{
    *name = ((const stub_kernel *)f)->name;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuLibraryLoadData(CUlibrary *lib, const void *code, CUjit_option *jit_options,
                                               void **jit_values, unsigned int n_jit, CUlibraryOption *options,
                                               void **values, unsigned int n)
{
    struct CUlib_st *l = (struct CUlib_st *)calloc(1, sizeof *l);
    (void)jit_options; (void)jit_values; (void)n_jit; (void)options; (void)values; (void)n;
    if (l == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    l->ptx = ptx_copy(code);
    *lib = l;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuLibraryUnload(CUlibrary lib)
{
    if (lib != NULL) {
        free(lib->ptx);
        free(lib);
    }
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuLibraryGetKernel(CUkernel *k, CUlibrary lib, const char *name)
{
    return lookup_kernel(lib != NULL ? lib->ptx : NULL, lib != NULL && lib->ptx != NULL ? &lib->kernels : NULL, name,
                         (stub_kernel **)k);
}

STUB_EXPORT CUresult CUDAAPI cuKernelGetFunction(CUfunction *f, CUkernel k)
{
    *f = (CUfunction)(void *)k;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuKernelGetParamInfo(CUkernel k, size_t i, size_t *offset, size_t *size)
{
    return param_info((const stub_kernel *)(void *)k, i, offset, size);
}

STUB_EXPORT CUresult CUDAAPI cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel k, CUdevice dev)
{
    (void)k; (void)dev;
    *pi = attrib == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuKernelGetName(const char **name, CUkernel k)
{
    *name = ((const stub_kernel *)(void *)k)->name;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------- launches */

/* With STUB_CUDA_RECORD=1, cuLaunchKernel keeps what it was given (for tests of a binding's argument
   packing): the dimensions, and each parameter's bytes (as many as the kernel's PTX declares) back to
   back in `data`.  Off by default, so benchmarks pay nothing for it; not thread-safe. */
typedef struct {
    unsigned long long launches;
    unsigned int grid[3], block[3], shared;
    int nparams;            /* -1: params was NULL */
    size_t size[STUB_MAX_PARAMS];
    unsigned char data[4096];
    /* cuLaunchKernelEx: how many, and the last one's stream, attribute count, cooperative flag (-1: not given)
       and cluster dimensions (0: not given) */
    unsigned long long ex_launches;
    void *ex_stream;
    unsigned int ex_num_attrs;
    int ex_cooperative;
    unsigned int ex_cluster[3];
    /* IPC: handles made, opened and closed; the last pointer opened and closed */
    unsigned long long ipc_gets, ipc_opens, ipc_closes;
    unsigned long long ipc_opened, ipc_closed;
    unsigned int ipc_flags;
} stub_launch_t;

static stub_launch_t last_launch;
static int record = -1;

STUB_EXPORT stub_launch_t *stub_cuda_last_launch(void) { return &last_launch; }

static int recording(void)
{
    if (record < 0) {
        const char *v = getenv("STUB_CUDA_RECORD");
        record = v != NULL && atoi(v) != 0;
    }
    return record;
}

static void record_launch(const stub_kernel *k, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                          unsigned int by, unsigned int bz, unsigned int shm, void **params)
{
    size_t at = 0;
    if (!recording())
        return;
    last_launch.launches++;
    last_launch.grid[0] = gx; last_launch.grid[1] = gy; last_launch.grid[2] = gz;
    last_launch.block[0] = bx; last_launch.block[1] = by; last_launch.block[2] = bz;
    last_launch.shared = shm;
    last_launch.nparams = params == NULL ? -1 : k->nparams;
    for (int i = 0; params != NULL && i < k->nparams; i++) {
        last_launch.size[i] = k->size[i];
        if (at + k->size[i] <= sizeof last_launch.data)
            memcpy(last_launch.data + at, params[i], k->size[i]);
        at += k->size[i];
    }
}

STUB_EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                            unsigned int bx, unsigned int by, unsigned int bz, unsigned int shm,
                                            CUstream s, void **params, void **extra)
{
    (void)extra;
    if (IA_STUB_UNLIKELY(s != NULL && s->capture != NULL))
        s->capture->launches++;  /* recorded into the graph, not run */
    else
        BUMP(launches);
    ctx_use();
    record_launch((const stub_kernel *)(void *)f, gx, gy, gz, bx, by, bz, shm, params);
    return bx * by * bz > 1024 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
    (void)extra;
    BUMP(launches);
    if (recording()) {
        record_launch((const stub_kernel *)(void *)f, config->gridDimX, config->gridDimY, config->gridDimZ,
                      config->blockDimX, config->blockDimY, config->blockDimZ, config->sharedMemBytes, params);
        last_launch.ex_launches++;
        last_launch.ex_stream = config->hStream;
        last_launch.ex_num_attrs = config->numAttrs;
        last_launch.ex_cooperative = -1;
        memset(last_launch.ex_cluster, 0, sizeof last_launch.ex_cluster);
        for (unsigned int i = 0; i < config->numAttrs; i++) {
            const CUlaunchAttribute *a = &config->attrs[i];
            if (a->id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
                last_launch.ex_cooperative = a->value.cooperative;
            } else if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
                last_launch.ex_cluster[0] = a->value.clusterDim.x;
                last_launch.ex_cluster[1] = a->value.clusterDim.y;
                last_launch.ex_cluster[2] = a->value.clusterDim.z;
            }
        }
    }
    return config->blockDimX * config->blockDimY * config->blockDimZ > 1024 ? CUDA_ERROR_INVALID_VALUE
                                                                             : CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------- IPC */

/* A handle is "stubipc\0" then the device pointer; opening one answers that pointer (the same memory). */
STUB_EXPORT CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p)
{
    if (h == NULL || p == 0)
        return CUDA_ERROR_INVALID_VALUE;
    memset(h, 0, sizeof *h);
    memcpy(h->reserved, "stubipc", 8);
    memcpy(h->reserved + 8, &p, sizeof p);
    last_launch.ipc_gets++;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle h, unsigned int flags)
{
    if (p == NULL || memcmp(h.reserved, "stubipc", 8) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(p, h.reserved + 8, sizeof *p);
    last_launch.ipc_opens++;
    last_launch.ipc_opened = *p;
    last_launch.ipc_flags = flags;
    return CUDA_SUCCESS;
}

STUB_EXPORT CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr p)
{
    last_launch.ipc_closes++;
    last_launch.ipc_closed = p;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------------------- pointers */

STUB_EXPORT CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    (void)ptr;
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned int *)data = CU_MEMORYTYPE_DEVICE; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = &primary_ctx; break;
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------- unknown names: placeholders that say so */

#define STUB_UNKNOWN_MAX 1000
static const char *unknown_names[STUB_UNKNOWN_MAX];
static int unknown_count = 0;
static unsigned char unknown_reported[STUB_UNKNOWN_MAX];

static CUresult unknown_called(int i)
{
    BUMP(unknown_calls);
    if (stub_log() >= 1 && !unknown_reported[i]) {
        unknown_reported[i] = 1;
        fprintf(stderr, "stub_cuda: %s called: not implemented (CUDA_ERROR_NOT_SUPPORTED)\n",
                i < unknown_count ? unknown_names[i] : "?");
    }
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* 1000 distinct placeholder functions, so each one knows which name it stands for.  The callers pass
 * whatever arguments the real prototype has; on the SysV and Windows x64 ABIs the caller cleans up, so
 * a function that ignores its arguments and returns an int is safe to call with any of them. */
#define U1(id) static CUresult u_##id(void) { return unknown_called(1##id - 1000); }
#define U10(p) U1(p##0) U1(p##1) U1(p##2) U1(p##3) U1(p##4) U1(p##5) U1(p##6) U1(p##7) U1(p##8) U1(p##9)
#define U100(p) U10(p##0) U10(p##1) U10(p##2) U10(p##3) U10(p##4) U10(p##5) U10(p##6) U10(p##7) U10(p##8) U10(p##9)
U100(0) U100(1) U100(2) U100(3) U100(4) U100(5) U100(6) U100(7) U100(8) U100(9)
#define P1(id) (void *)u_##id,
#define P10(p) P1(p##0) P1(p##1) P1(p##2) P1(p##3) P1(p##4) P1(p##5) P1(p##6) P1(p##7) P1(p##8) P1(p##9)
#define P100(p) P10(p##0) P10(p##1) P10(p##2) P10(p##3) P10(p##4) P10(p##5) P10(p##6) P10(p##7) P10(p##8) P10(p##9)
static void *const unknown_fns[STUB_UNKNOWN_MAX] = {
    P100(0) P100(1) P100(2) P100(3) P100(4) P100(5) P100(6) P100(7) P100(8) P100(9)
};

/* ------------------------------------------------------------------------------ cuGetProcAddress */

STUB_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                              CUdriverProcAddressQueryResult *status);

/* The public (unversioned) name -> this stub's function of the prototype cuda.h declares for it.  The
 * identifiers go through cuda.h's renames (cuMemAlloc is cuMemAlloc_v2); the strings do not. */
#define E(name) {#name, (void *)name}
static const struct { const char *name; void *fn; } entries[] = {
    E(cuInit), E(cuDriverGetVersion), E(cuGetErrorName), E(cuGetErrorString), E(cuGetProcAddress), E(cuGetExportTable),
    E(cuDeviceGetCount), E(cuDeviceGet), E(cuDeviceGetName), E(cuDeviceGetUuid), E(cuDeviceTotalMem),
    E(cuDeviceGetAttribute), E(cuDeviceGetPCIBusId),
    E(cuDevicePrimaryCtxRetain), E(cuDevicePrimaryCtxRelease), E(cuDevicePrimaryCtxGetState),
    E(cuDevicePrimaryCtxSetFlags),
    E(cuCtxSetCurrent), E(cuCtxGetCurrent), E(cuCtxPushCurrent), E(cuCtxPopCurrent), E(cuCtxGetDevice),
    E(cuCtxGetDevice_v2), E(cuCtxGetId), E(cuCtxGetFlags), E(cuCtxGetApiVersion), E(cuCtxGetStreamPriorityRange),
    E(cuCtxSynchronize), E(cuCtxSynchronize_v2),
    E(cuStreamCreate), E(cuStreamCreateWithPriority), E(cuStreamDestroy), E(cuStreamSynchronize),
    E(cuStreamQuery), E(cuStreamWaitEvent), E(cuStreamGetFlags), E(cuStreamGetPriority), E(cuStreamGetId),
    E(cuStreamGetCtx), E(cuStreamGetDevice), E(cuStreamIsCapturing), E(cuStreamBeginCapture), E(cuStreamEndCapture),
    E(cuGraphInstantiate), E(cuGraphLaunch), E(cuGraphDestroy), E(cuGraphExecDestroy),
    E(cuEventCreate), E(cuEventDestroy), E(cuEventRecord), E(cuEventRecordWithFlags), E(cuEventSynchronize),
    E(cuEventQuery), E(cuEventElapsedTime),
    E(cuMemAlloc), E(cuMemAllocManaged), E(cuMemFree), E(cuMemAllocAsync), E(cuMemAllocFromPoolAsync),
    E(cuMemFreeAsync), E(cuMemHostAlloc), E(cuMemAllocHost), E(cuMemFreeHost), E(cuMemGetInfo),
    E(cuDeviceGetDefaultMemPool), E(cuDeviceGetMemPool), E(cuMemPoolCreate), E(cuMemPoolDestroy), E(cuMemPoolSetAttribute), E(cuMemPoolGetAttribute),
    E(cuMemPoolTrimTo),
    E(cuMemcpyHtoDAsync), E(cuMemcpyDtoHAsync), E(cuMemcpyDtoDAsync), E(cuMemcpyAsync),
    E(cuMemsetD8Async), E(cuMemsetD16Async), E(cuMemsetD32Async), E(cuMemcpy2DAsync), E(cuMemcpy3DAsync),
    E(cuMemPrefetchAsync),
    E(cuModuleLoadData), E(cuModuleLoadDataEx), E(cuModuleUnload), E(cuModuleGetFunction), E(cuFuncGetParamInfo),
    E(cuFuncGetAttribute), E(cuFuncSetAttribute), E(cuFuncGetName),
    E(cuLibraryLoadData), E(cuLibraryUnload), E(cuLibraryGetKernel), E(cuKernelGetFunction),
    E(cuKernelGetParamInfo), E(cuKernelGetAttribute), E(cuKernelGetName),
    E(cuLaunchKernel), E(cuLaunchKernelEx),
    E(cuIpcGetMemHandle), E(cuIpcOpenMemHandle), E(cuIpcCloseMemHandle),
    E(cuPointerGetAttribute),
};
#undef E

STUB_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                              CUdriverProcAddressQueryResult *status)
{
    size_t i;
    int j;
    if (symbol == NULL || pfn == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (stub_log() >= 2)
        fprintf(stderr, "stub_cuda: resolve %s (version %d, flags %llu)\n", symbol, cudaVersion,
                (unsigned long long)flags);
    for (i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        if (strcmp(entries[i].name, symbol) == 0) {
            *pfn = entries[i].fn;
            if (status != NULL)
                *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    }
    /* not implemented: a placeholder of its own (the same one each time the name is asked for) */
    for (j = 0; j < unknown_count; j++)
        if (strcmp(unknown_names[j], symbol) == 0)
            break;
    if (j == unknown_count) {
        if (unknown_count == STUB_UNKNOWN_MAX) {
            *pfn = NULL;
            if (status != NULL)
                *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
            return CUDA_ERROR_NOT_FOUND;
        }
        unknown_names[unknown_count++] = strdup(symbol);
    }
    *pfn = unknown_fns[j];
    if (status != NULL)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

/* cuda.h renames cuGetProcAddress to cuGetProcAddress_v2 (above); the 4-argument original, for old callers. */
STUB_EXPORT CUresult CUDAAPI cuGetProcAddress_v1(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
    __asm__("cuGetProcAddress");
STUB_EXPORT CUresult CUDAAPI cuGetProcAddress_v1(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
