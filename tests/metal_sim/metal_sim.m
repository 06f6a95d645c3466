/* IA Simulated Metal Device: a test fixture, NOT Apple Metal.
 *
 * An Objective-C library (GNU runtime + GNUstep Foundation) that answers Metal's public selectors with Metal's
 * prototypes, on the CPU, so that a binding generated for Metal can be run on Linux.  Written for this project
 * from Apple's public documentation of the API (selector strings, argument and return types, enum values); no
 * Apple or GNUstep code is copied.  Behaviour worth knowing (the rest follows Metal's documentation):
 *
 * - One device, "IA Simulated Metal Device".  MTLCreateSystemDefaultDevice returns it +1, the same object for as
 *   long as anything holds it; MTLCopyAllDevices returns +1 an NSArray holding it.  GPU families: Common1-3
 *   (supportsFamily:), unless IA_METAL_SIM_FAMILIES (decimal MTLGPUFamily values, comma-separated) is set when a
 *   device is created.
 * - Buffers are host memory (page-aligned, zero-filled); contents is NULL for private storage, as in Metal;
 *   memoryless, length 0 or above maxBufferLength give nil.  newBufferWithBytesNoCopy needs a page-aligned
 *   pointer and a length that is a multiple of the page size (4096), else nil; its deallocator, when not nil, is
 *   called through the Block ABI (invoke(block, pointer, length)) when the buffer goes; it is not copied.
 * - "Compiling" a library looks for `kernel void NAME(` (or `[[kernel]] void NAME(`) in the source and knows
 *   only the kernels built in here: vector_add, saxpy, lcg (the semantics of tests/test_conformance.py's
 *   KernelSources, Metal argument order, one argument per [[buffer(i)]] index).  Any other kernel name, or no
 *   kernel at all, fails: nil and an autoreleased NSError (MTLLibraryErrorDomain, MTLLibraryErrorCompileFailure,
 *   a compiler-like "program_source:LINE:COL: error: ..." description).
 * - Each command queue has a worker thread (started at its first commit) that runs committed command buffers in
 *   order: compute dispatches call the kernel's C function for each thread position of the grid; blits are
 *   memcpy/memset; encodeWaitForEvent:value: blocks the worker until the shared event reaches the value, for at
 *   most IA_METAL_SIM_WAIT_TIMEOUT seconds (default 10; or ia_metal_sim_set_wait_timeout), then fails the
 *   command buffer with MTLCommandBufferErrorTimeout.  commandBuffer and the encoders are autoreleased (+0), as in Metal; the queue
 *   holds each committed command buffer until it completes.  GPUStartTime/GPUEndTime are the host's
 *   CLOCK_MONOTONIC in seconds (Metal uses the same timebase as CACurrentMediaTime).
 * - Misuse that real Metal's validation layer would stop (dispatch without a pipeline or with an argument
 *   unbound, a threadgroup larger than the pipeline allows, a blit out of range, a second encoder or a commit
 *   while an encoder is open, committing twice, waiting before commit) never crashes here: it is counted and
 *   described (ia_metal_sim_validation_errors / ia_metal_sim_last_validation_error), and a command buffer that
 *   holds such a command ends with MTLCommandBufferStatusError and an NSError (MTLCommandBufferErrorDomain,
 *   MTLCommandBufferErrorInternal).  A kernel that would touch memory past the end of a bound buffer stops and
 *   fails its command buffer with MTLCommandBufferErrorPageFault.
 * - Reference counting is observable: every object of a class of this library (and the NSErrors it makes) is
 *   counted from alloc to dealloc (ia_metal_sim_live_objects); a deallocated object becomes a zombie (its memory
 *   is kept, its class swapped) for the next 65,536 deallocations, and a retain/release/autorelease sent to a
 *   zombie is counted (ia_metal_sim_zombie_messages) instead of touching freed memory.
 */

#import <Foundation/Foundation.h>
#include <objc/runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>

/* ------------------------------------------------------------------ Metal's public types (values from the docs) */

typedef struct { NSUInteger width, height, depth; } MTLSize;
typedef NSUInteger MTLResourceOptions;
typedef NSInteger MTLGPUFamily;
typedef NSUInteger MTLCommandBufferStatus;
typedef double CFTimeInterval;

enum {
    MTLCommandBufferStatusNotEnqueued = 0, MTLCommandBufferStatusEnqueued = 1, MTLCommandBufferStatusCommitted = 2,
    MTLCommandBufferStatusScheduled = 3, MTLCommandBufferStatusCompleted = 4, MTLCommandBufferStatusError = 5,
};
enum { MTLStorageModeShared = 0, MTLStorageModeManaged = 1, MTLStorageModePrivate = 2, MTLStorageModeMemoryless = 3 };
enum { MTLResourceStorageModeShift = 4, MTLResourceStorageModeMask = 0xf << 4 };
enum { MTLLibraryErrorUnsupported = 1, MTLLibraryErrorInternal = 2, MTLLibraryErrorCompileFailure = 3 };
enum { MTLCommandBufferErrorInternal = 1, MTLCommandBufferErrorTimeout = 2, MTLCommandBufferErrorPageFault = 3 };
enum { MTLGPUFamilyCommon1 = 3001, MTLGPUFamilyCommon2 = 3002, MTLGPUFamilyCommon3 = 3003 };

NSString *const MTLLibraryErrorDomain = @"MTLLibraryErrorDomain";
NSString *const MTLCommandBufferErrorDomain = @"MTLCommandBufferErrorDomain";

#define SIM_DEVICE_NAME "IA Simulated Metal Device"
#define SIM_REGISTRY_ID 0x1A51A0000001ULL
#define SIM_MAX_BUFFER_LENGTH ((NSUInteger)1 << 30)
#define SIM_WORKING_SET ((uint64_t)4 << 30)
#define SIM_MAX_THREADS_PER_GROUP 1024
#define SIM_EXECUTION_WIDTH 32
#define SIM_MAX_BUFFER_INDEX 31
#define SIM_MAX_SET_BYTES 4096
#define SIM_PAGE 4096
#define SIM_MAX_FAMILIES 32

/* ------------------------------------------------------------------ live-object counts, zombies, validation */

enum {
    K_DEVICE, K_BUFFER, K_QUEUE, K_COMMAND_BUFFER, K_COMPUTE_ENCODER, K_BLIT_ENCODER, K_LIBRARY, K_FUNCTION,
    K_PIPELINE, K_SHARED_EVENT, K_COMPILE_OPTIONS, K_ERROR, K_COUNT
};
static const char *const kClassNames[K_COUNT] = {
    "IASimDevice", "IASimBuffer", "IASimCommandQueue", "IASimCommandBuffer", "IASimComputeCommandEncoder",
    "IASimBlitCommandEncoder", "IASimLibrary", "IASimFunction", "IASimComputePipelineState", "IASimSharedEvent",
    "MTLCompileOptions", "IASimError",
};
static long g_live[K_COUNT];
static long g_zombie_messages;
static long g_validation_errors;
static char g_last_validation[512];
static pthread_mutex_t g_sim_mu = PTHREAD_MUTEX_INITIALIZER; /* the validation message, the zombie ring */

static void sim_live_add(int kind, long d) { __atomic_add_fetch(&g_live[kind], d, __ATOMIC_SEQ_CST); }

/* Live objects of one class of this library by name, or of all of them for NULL; -1 for a name it does not have. */
long ia_metal_sim_live_objects(const char *class_name)
{
    long total = 0;
    for (int k = 0; k < K_COUNT; ++k) {
        long n = __atomic_load_n(&g_live[k], __ATOMIC_SEQ_CST);
        if (class_name == NULL)
            total += n;
        else if (strcmp(class_name, kClassNames[k]) == 0)
            return n;
    }
    return class_name == NULL ? total : -1;
}

int ia_metal_sim_class_count(void) { return K_COUNT; }
const char *ia_metal_sim_class_name(int i) { return i >= 0 && i < K_COUNT ? kClassNames[i] : NULL; }
long ia_metal_sim_zombie_messages(void) { return __atomic_load_n(&g_zombie_messages, __ATOMIC_SEQ_CST); }
long ia_metal_sim_validation_errors(void) { return __atomic_load_n(&g_validation_errors, __ATOMIC_SEQ_CST); }

/* The last validation message (copied into buf, NUL-terminated); returns its full length. */
size_t ia_metal_sim_last_validation_error(char *buf, size_t size)
{
    pthread_mutex_lock(&g_sim_mu);
    size_t n = strlen(g_last_validation);
    if (buf != NULL && size > 0) {
        size_t m = n < size - 1 ? n : size - 1;
        memcpy(buf, g_last_validation, m);
        buf[m] = 0;
    }
    pthread_mutex_unlock(&g_sim_mu);
    return n;
}

static void sim_validation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sim_validation(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&g_sim_mu);
    vsnprintf(g_last_validation, sizeof g_last_validation, fmt, ap);
    pthread_mutex_unlock(&g_sim_mu);
    va_end(ap);
    __atomic_add_fetch(&g_validation_errors, 1, __ATOMIC_SEQ_CST);
}

static double sim_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* What a deallocated object of this library becomes: messages that manage its references are counted. */
@interface IASimZombie : NSObject
@end
@implementation IASimZombie
- (id)retain { __atomic_add_fetch(&g_zombie_messages, 1, __ATOMIC_SEQ_CST); return self; }
- (oneway void)release { __atomic_add_fetch(&g_zombie_messages, 1, __ATOMIC_SEQ_CST); }
- (id)autorelease { __atomic_add_fetch(&g_zombie_messages, 1, __ATOMIC_SEQ_CST); return self; }
- (NSUInteger)retainCount { return 0; }
- (void)dealloc
{
    __atomic_add_fetch(&g_zombie_messages, 1, __ATOMIC_SEQ_CST);
    if (0)
        [super dealloc]; /* never: gcc warns about a dealloc without this call, and a zombie is freed elsewhere */
}
@end

#define SIM_ZOMBIE_RING 65536
static id g_zombies[SIM_ZOMBIE_RING];
static size_t g_zombie_next;

static void sim_zombify(id obj)
{
    static Class zombie;
    if (zombie == Nil)
        zombie = [IASimZombie class];
    object_setClass(obj, zombie);
    pthread_mutex_lock(&g_sim_mu);
    id old = g_zombies[g_zombie_next];
    g_zombies[g_zombie_next] = obj;
    g_zombie_next = (g_zombie_next + 1) % SIM_ZOMBIE_RING;
    pthread_mutex_unlock(&g_sim_mu);
    if (old != nil)
        NSDeallocateObject(old);
}

/* Base of every class here (but IASimError): counted from alloc to dealloc, a zombie after. */
@interface IASimObject : NSObject
+ (int)simKind;
@end
@implementation IASimObject
+ (int)simKind { return -1; }
+ (id)allocWithZone:(NSZone *)zone
{
    id o = [super allocWithZone:zone];
    if (o != nil)
        sim_live_add([self simKind], 1);
    return o;
}
- (void)dealloc
{
    sim_live_add([[self class] simKind], -1);
    sim_zombify(self); /* instead of [super dealloc]: the memory is kept for a while, see sim_zombify */
    if (0)
        [super dealloc]; /* never (gcc warns about a dealloc without this call) */
}
@end

/* The NSErrors this library makes (a subclass, so that they are counted too). */
@interface IASimError : NSError
@end
@implementation IASimError
+ (id)allocWithZone:(NSZone *)zone
{
    id o = [super allocWithZone:zone];
    if (o != nil)
        sim_live_add(K_ERROR, 1);
    return o;
}
- (void)dealloc
{
    sim_live_add(K_ERROR, -1);
    [super dealloc];
}
@end

static NSError *sim_error(NSString *domain, NSInteger code, NSString *message)
{
    NSDictionary *info = [NSDictionary dictionaryWithObject:message forKey:NSLocalizedDescriptionKey];
    return [[[IASimError alloc] initWithDomain:domain code:code userInfo:info] autorelease];
}

/* ------------------------------------------------------------------ the built-in kernels */

typedef struct { NSUInteger x, y, z; } sim_pos;
typedef struct {
    char *ptr[SIM_MAX_BUFFER_INDEX];   /* the argument's first byte (buffer contents + offset, or setBytes' copy) */
    size_t len[SIM_MAX_BUFFER_INDEX];  /* bytes from ptr to the end of its buffer */
    int fault;                         /* set by a kernel that would go past len */
} sim_args;
typedef void (*sim_kernel_fn)(sim_args *a, sim_pos gid);
typedef struct { const char *name; int nargs; sim_kernel_fn fn; } sim_kernel;

#define SIM_IN(a, i, bytes) ((a)->len[i] >= (bytes) || ((a)->fault = 1, 0))

/* vector_add(device const float *a [[buffer(0)]], device const float *b [[buffer(1)]], device float *c
 * [[buffer(2)]], constant uint &n [[buffer(3)]]): c[i] = a[i] + b[i] for i < n */
static void k_vector_add(sim_args *a, sim_pos gid)
{
    if (!SIM_IN(a, 3, 4)) return;
    uint32_t n = *(uint32_t *)a->ptr[3];
    size_t i = gid.x, end = (i + 1) * sizeof(float);
    if (i >= n) return;
    if (!SIM_IN(a, 0, end) || !SIM_IN(a, 1, end) || !SIM_IN(a, 2, end)) return;
    ((float *)a->ptr[2])[i] = ((float *)a->ptr[0])[i] + ((float *)a->ptr[1])[i];
}

/* saxpy(constant float &a [[buffer(0)]], device const float *x [[buffer(1)]], device float *y [[buffer(2)]],
 * constant uint &n [[buffer(3)]]): y[i] = a * x[i] + y[i] for i < n */
static void k_saxpy(sim_args *a, sim_pos gid)
{
    if (!SIM_IN(a, 0, 4) || !SIM_IN(a, 3, 4)) return;
    float s = *(float *)a->ptr[0];
    uint32_t n = *(uint32_t *)a->ptr[3];
    size_t i = gid.x, end = (i + 1) * sizeof(float);
    if (i >= n) return;
    if (!SIM_IN(a, 1, end) || !SIM_IN(a, 2, end)) return;
    ((float *)a->ptr[2])[i] = s * ((float *)a->ptr[1])[i] + ((float *)a->ptr[2])[i];
}

/* lcg(device uint *x [[buffer(0)]], constant uint &n [[buffer(1)]], constant uint &rounds [[buffer(2)]]):
 * rounds times x[i] = x[i] * 1664525 + 1013904223, for i < n */
static void k_lcg(sim_args *a, sim_pos gid)
{
    if (!SIM_IN(a, 1, 4) || !SIM_IN(a, 2, 4)) return;
    uint32_t n = *(uint32_t *)a->ptr[1], rounds = *(uint32_t *)a->ptr[2];
    size_t i = gid.x;
    if (i >= n) return;
    if (!SIM_IN(a, 0, (i + 1) * sizeof(uint32_t))) return;
    uint32_t v = ((uint32_t *)a->ptr[0])[i];
    for (uint32_t r = 0; r < rounds; ++r)
        v = v * 1664525u + 1013904223u;
    ((uint32_t *)a->ptr[0])[i] = v;
}

static const sim_kernel kKernels[] = {
    {"vector_add", 4, k_vector_add},
    {"saxpy", 4, k_saxpy},
    {"lcg", 3, k_lcg},
};
#define SIM_NKERNELS (sizeof kKernels / sizeof kKernels[0])

static const sim_kernel *sim_find_kernel(const char *name, size_t len)
{
    for (size_t k = 0; k < SIM_NKERNELS; ++k)
        if (strlen(kKernels[k].name) == len && strncmp(kKernels[k].name, name, len) == 0)
            return &kKernels[k];
    return NULL;
}

/* ------------------------------------------------------------------ classes */

@class IASimDevice, IASimCommandQueue, IASimCommandBuffer;

@interface MTLCompileOptions : IASimObject {
    BOOL _fastMathEnabled;
    NSUInteger _languageVersion;
}
- (BOOL)fastMathEnabled;
- (void)setFastMathEnabled:(BOOL)v;
- (NSUInteger)languageVersion;
- (void)setLanguageVersion:(NSUInteger)v;
@end
@implementation MTLCompileOptions
+ (int)simKind { return K_COMPILE_OPTIONS; }
- (id)init { if ((self = [super init]) != nil) _fastMathEnabled = YES; return self; }
- (BOOL)fastMathEnabled { return _fastMathEnabled; }
- (void)setFastMathEnabled:(BOOL)v { _fastMathEnabled = v; }
- (NSUInteger)languageVersion { return _languageVersion; }
- (void)setLanguageVersion:(NSUInteger)v { _languageVersion = v; }
@end

/* -------- buffers */

typedef struct {
    size_t size;
    size_t flags;
    void (*invoke)(void *block, void *pointer, NSUInteger length);
} sim_block_literal; /* the Block ABI's literal, as far as calling it goes (isa, flags+reserved, invoke) */

@interface IASimBuffer : IASimObject {
@public
    IASimDevice *_device;
    char *_mem;
    NSUInteger _length;
    MTLResourceOptions _options;
    BOOL _owned;
    void *_deallocator;
    NSRange _lastModified;
}
@end
@implementation IASimBuffer
+ (int)simKind { return K_BUFFER; }
- (id)initWithDevice:(IASimDevice *)device memory:(void *)mem length:(NSUInteger)length
             options:(MTLResourceOptions)options owned:(BOOL)owned deallocator:(void *)deallocator
{
    if ((self = [super init]) != nil) {
        _device = [(id)device retain];
        _mem = mem;
        _length = length;
        _options = options;
        _owned = owned;
        _deallocator = deallocator;
        _lastModified = NSMakeRange(NSNotFound, 0);
    }
    return self;
}
- (void)dealloc
{
    if (_owned)
        free(_mem);
    else if (_deallocator != NULL) {
        sim_block_literal *b = _deallocator;
        b->invoke(b, _mem, _length);
    }
    [(id)_device release];
    [super dealloc];
}
- (void *)contents
{
    return ((_options & MTLResourceStorageModeMask) >> MTLResourceStorageModeShift) == MTLStorageModePrivate
               ? NULL : _mem;
}
- (NSUInteger)length { return _length; }
- (NSUInteger)storageMode { return (_options & MTLResourceStorageModeMask) >> MTLResourceStorageModeShift; }
- (MTLResourceOptions)resourceOptions { return _options; }
- (id)device { return (id)_device; }
- (void)didModifyRange:(NSRange)range
{
    if (range.location > _length || range.length > _length - range.location)
        sim_validation("didModifyRange: {%lu, %lu} is outside the buffer (length %lu)",
                       (unsigned long)range.location, (unsigned long)range.length, (unsigned long)_length);
    _lastModified = range;
}
/* Not Metal: the last range given to didModifyRange: ({NSNotFound, 0} before any), for tests of NSRange args. */
- (NSRange)iaSimLastModifiedRange { return _lastModified; }
@end

/* -------- shared events */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t value;
} sim_event;

@interface IASimSharedEvent : IASimObject {
@public
    IASimDevice *_device;
    sim_event _ev;
}
@end
@implementation IASimSharedEvent
+ (int)simKind { return K_SHARED_EVENT; }
- (id)initWithDevice:(IASimDevice *)device
{
    if ((self = [super init]) != nil) {
        _device = [(id)device retain];
        pthread_mutex_init(&_ev.mu, NULL);
        pthread_cond_init(&_ev.cv, NULL);
    }
    return self;
}
- (void)dealloc
{
    pthread_cond_destroy(&_ev.cv);
    pthread_mutex_destroy(&_ev.mu);
    [(id)_device release];
    [super dealloc];
}
- (uint64_t)signaledValue
{
    pthread_mutex_lock(&_ev.mu);
    uint64_t v = _ev.value;
    pthread_mutex_unlock(&_ev.mu);
    return v;
}
- (void)setSignaledValue:(uint64_t)value
{
    pthread_mutex_lock(&_ev.mu);
    _ev.value = value;
    pthread_cond_broadcast(&_ev.cv);
    pthread_mutex_unlock(&_ev.mu);
}
- (id)device { return (id)_device; }
@end

/* -------- library, function, pipeline */

@interface IASimFunction : IASimObject {
@public
    IASimDevice *_device;
    const sim_kernel *_kernel;
    NSString *_name;
}
@end
@implementation IASimFunction
+ (int)simKind { return K_FUNCTION; }
- (id)initWithDevice:(IASimDevice *)device kernel:(const sim_kernel *)kernel
{
    if ((self = [super init]) != nil) {
        _device = [(id)device retain];
        _kernel = kernel;
        _name = [[NSString alloc] initWithUTF8String:kernel->name];
    }
    return self;
}
- (void)dealloc
{
    [_name release];
    [(id)_device release];
    [super dealloc];
}
- (NSString *)name { return _name; }
- (id)device { return (id)_device; }
@end

@interface IASimLibrary : IASimObject {
    IASimDevice *_device;
    const sim_kernel *_kernels[SIM_NKERNELS];
    size_t _nkernels;
    NSArray *_names;
}
@end
@implementation IASimLibrary
+ (int)simKind { return K_LIBRARY; }
- (id)initWithDevice:(IASimDevice *)device kernels:(const sim_kernel **)kernels count:(size_t)n
{
    if ((self = [super init]) != nil) {
        _device = [(id)device retain];
        NSMutableArray *names = [[NSMutableArray alloc] init];
        for (size_t i = 0; i < n; ++i) {
            _kernels[i] = kernels[i];
            NSString *s = [[NSString alloc] initWithUTF8String:kernels[i]->name];
            [names addObject:s];
            [s release];
        }
        _nkernels = n;
        _names = names;
    }
    return self;
}
- (void)dealloc
{
    [_names release];
    [(id)_device release];
    [super dealloc];
}
- (NSArray *)functionNames { return _names; }
- (id)device { return (id)_device; }
- (id)newFunctionWithName:(NSString *)name
{
    const char *s = [name UTF8String];
    if (s == NULL)
        return nil;
    for (size_t i = 0; i < _nkernels; ++i)
        if (strcmp(_kernels[i]->name, s) == 0)
            return [[IASimFunction alloc] initWithDevice:_device kernel:_kernels[i]];
    return nil;
}
@end

@interface IASimComputePipelineState : IASimObject {
@public
    IASimDevice *_device;
    const sim_kernel *_kernel;
}
@end
@implementation IASimComputePipelineState
+ (int)simKind { return K_PIPELINE; }
- (id)initWithDevice:(IASimDevice *)device kernel:(const sim_kernel *)kernel
{
    if ((self = [super init]) != nil) {
        _device = [(id)device retain];
        _kernel = kernel;
    }
    return self;
}
- (void)dealloc
{
    [(id)_device release];
    [super dealloc];
}
- (NSUInteger)maxTotalThreadsPerThreadgroup { return SIM_MAX_THREADS_PER_GROUP; }
- (NSUInteger)threadExecutionWidth { return SIM_EXECUTION_WIDTH; }
- (NSUInteger)staticThreadgroupMemoryLength { return 0; }
- (id)device { return (id)_device; }
@end

/* -------- command buffers */

enum { CMD_DISPATCH, CMD_COPY, CMD_FILL, CMD_SIGNAL, CMD_WAIT, CMD_INVALID };

typedef struct {
    int kind;
    /* CMD_DISPATCH */
    const sim_kernel *kernel;
    MTLSize grid;
    char *ptr[SIM_MAX_BUFFER_INDEX];
    size_t len[SIM_MAX_BUFFER_INDEX];
    /* CMD_COPY / CMD_FILL */
    char *dst;
    const char *src;
    size_t size;
    uint8_t value;
    /* CMD_SIGNAL / CMD_WAIT */
    sim_event *event;
    uint64_t event_value;
    /* CMD_INVALID */
    char what[200];
} sim_cmd;

/* A command buffer's completion, shared by the command buffer and the queue's worker (each holds a reference),
 * so that waitUntilCompleted returns only after the queue has let go of the command buffer. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    MTLCommandBufferStatus status;
    int released_by_queue;
    NSInteger error_code;
    char error_message[300];
    double start, end;
} sim_completion;

static void sim_completion_unref(sim_completion *c)
{
    pthread_mutex_lock(&c->mu);
    int left = --c->refs;
    pthread_mutex_unlock(&c->mu);
    if (left == 0) {
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        free(c);
    }
}

@interface IASimCommandBuffer : IASimObject {
@public
    IASimCommandQueue *_queue; /* not retained: the queue outlives the work it runs (its dealloc joins) */
    sim_cmd *_cmds;
    size_t _ncmds, _capcmds;
    id *_held; /* objects the commands use, retained until this command buffer goes */
    size_t _nheld, _capheld;
    void **_bytes; /* setBytes: copies */
    size_t _nbytes, _capbytes;
    BOOL _encoding;
    BOOL _committed;
    sim_completion *_done;
    NSError *_error;
}
- (void)hold:(id)obj;
- (void *)keepBytes:(const void *)bytes length:(NSUInteger)length;
- (sim_cmd *)appendCommand:(int)kind;
- (id)initWithQueue:(IASimCommandQueue *)queue;
- (void)invalid:(const char *)what;
@end
@interface IASimCommandBuffer (Encoders) /* below, after the encoder classes */
- (id)computeCommandEncoder;
- (id)blitCommandEncoder;
@end

@interface IASimCommandQueue : IASimObject {
@public
    IASimDevice *_device;
    pthread_mutex_t _mu;
    pthread_cond_t _cv;
    pthread_t _thread;
    BOOL _started, _stopping;
    IASimCommandBuffer **_pending; /* FIFO of committed command buffers, each retained by the queue */
    size_t _head, _npending, _cap;
}
- (void)enqueue:(IASimCommandBuffer *)cb;
@end

static double g_wait_timeout = -1; /* seconds; below 0: not yet read from IA_METAL_SIM_WAIT_TIMEOUT (g_sim_mu) */

/* How long a command buffer's encodeWaitForEvent:value: may block its queue (seconds, > 0) before the command
 * buffer fails with MTLCommandBufferErrorTimeout; applies to waits that start afterwards. */
void ia_metal_sim_set_wait_timeout(double seconds)
{
    pthread_mutex_lock(&g_sim_mu);
    if (seconds > 0)
        g_wait_timeout = seconds;
    pthread_mutex_unlock(&g_sim_mu);
}

static double sim_wait_timeout(void)
{
    pthread_mutex_lock(&g_sim_mu);
    if (g_wait_timeout < 0) {
        const char *t = getenv("IA_METAL_SIM_WAIT_TIMEOUT");
        g_wait_timeout = t != NULL && atof(t) > 0 ? atof(t) : 10.0;
    }
    double t = g_wait_timeout;
    pthread_mutex_unlock(&g_sim_mu);
    return t;
}

static void sim_execute_dispatch(const sim_cmd *c, sim_completion *done)
{
    sim_args args;
    memcpy(args.ptr, c->ptr, sizeof args.ptr);
    memcpy(args.len, c->len, sizeof args.len);
    args.fault = 0;
    for (NSUInteger z = 0; z < c->grid.depth && !args.fault; ++z)
        for (NSUInteger y = 0; y < c->grid.height && !args.fault; ++y)
            for (NSUInteger x = 0; x < c->grid.width && !args.fault; ++x) {
                sim_pos p = {x, y, z};
                c->kernel->fn(&args, p);
            }
    if (args.fault && done->error_code == 0) {
        done->error_code = MTLCommandBufferErrorPageFault;
        snprintf(done->error_message, sizeof done->error_message,
                 "IA simulated Metal device: kernel %s accessed memory past the end of a bound buffer",
                 c->kernel->name);
    }
}

static void sim_execute(IASimCommandBuffer *cb)
{
    sim_completion *done = cb->_done;
    for (size_t i = 0; i < cb->_ncmds && done->error_code == 0; ++i) {
        sim_cmd *c = &cb->_cmds[i];
        switch (c->kind) {
        case CMD_DISPATCH:
            sim_execute_dispatch(c, done);
            break;
        case CMD_COPY:
            memmove(c->dst, c->src, c->size);
            break;
        case CMD_FILL:
            memset(c->dst, c->value, c->size);
            break;
        case CMD_SIGNAL:
            pthread_mutex_lock(&c->event->mu);
            c->event->value = c->event_value;
            pthread_cond_broadcast(&c->event->cv);
            pthread_mutex_unlock(&c->event->mu);
            break;
        case CMD_WAIT: {
            struct timespec deadline;
            clock_gettime(CLOCK_REALTIME, &deadline);
            double t = sim_wait_timeout();
            deadline.tv_sec += (time_t)t;
            deadline.tv_nsec += (long)((t - (double)(time_t)t) * 1e9);
            if (deadline.tv_nsec >= 1000000000L) {
                deadline.tv_sec += 1;
                deadline.tv_nsec -= 1000000000L;
            }
            int rc = 0;
            pthread_mutex_lock(&c->event->mu);
            while (c->event->value < c->event_value && rc != ETIMEDOUT)
                rc = pthread_cond_timedwait(&c->event->cv, &c->event->mu, &deadline);
            int timed_out = c->event->value < c->event_value;
            pthread_mutex_unlock(&c->event->mu);
            if (timed_out) {
                done->error_code = MTLCommandBufferErrorTimeout;
                snprintf(done->error_message, sizeof done->error_message,
                         "IA simulated Metal device: waited %g s for a shared event to reach %llu", t,
                         (unsigned long long)c->event_value);
            }
            break;
        }
        case CMD_INVALID:
            done->error_code = MTLCommandBufferErrorInternal;
            snprintf(done->error_message, sizeof done->error_message, "IA simulated Metal device: %s", c->what);
            break;
        }
    }
}

static void *sim_worker(void *arg)
{
    IASimCommandQueue *q = arg;
    GSRegisterCurrentThread();
    NSAutoreleasePool *outer = [[NSAutoreleasePool alloc] init];
    for (;;) {
        pthread_mutex_lock(&q->_mu);
        while (q->_npending == 0 && !q->_stopping)
            pthread_cond_wait(&q->_cv, &q->_mu);
        if (q->_npending == 0) {
            pthread_mutex_unlock(&q->_mu);
            break;
        }
        IASimCommandBuffer *cb = q->_pending[q->_head];
        q->_head = (q->_head + 1) % q->_cap;
        q->_npending--;
        pthread_mutex_unlock(&q->_mu);

        sim_completion *done = cb->_done;
        pthread_mutex_lock(&done->mu);
        done->refs++;
        done->status = MTLCommandBufferStatusScheduled;
        done->start = sim_now();
        pthread_mutex_unlock(&done->mu);
        sim_execute(cb);
        pthread_mutex_lock(&done->mu);
        done->end = sim_now();
        done->status = done->error_code ? MTLCommandBufferStatusError : MTLCommandBufferStatusCompleted;
        pthread_mutex_unlock(&done->mu);
        NSAutoreleasePool *pool = [[NSAutoreleasePool alloc] init];
        [cb release]; /* the queue's reference */
        [pool release];
        pthread_mutex_lock(&done->mu);
        done->released_by_queue = 1;
        pthread_cond_broadcast(&done->cv);
        pthread_mutex_unlock(&done->mu);
        sim_completion_unref(done);
    }
    [outer release];
    GSUnregisterCurrentThread();
    return NULL;
}

@implementation IASimCommandQueue
+ (int)simKind { return K_QUEUE; }
- (id)initWithDevice:(IASimDevice *)device
{
    if ((self = [super init]) != nil) {
        _device = [(id)device retain];
        pthread_mutex_init(&_mu, NULL);
        pthread_cond_init(&_cv, NULL);
    }
    return self;
}
- (void)dealloc
{
    if (_started) { /* committed work completes first, as in Metal */
        pthread_mutex_lock(&_mu);
        _stopping = YES;
        pthread_cond_broadcast(&_cv);
        pthread_mutex_unlock(&_mu);
        pthread_join(_thread, NULL);
    }
    free(_pending);
    pthread_cond_destroy(&_cv);
    pthread_mutex_destroy(&_mu);
    [(id)_device release];
    [super dealloc];
}
- (id)device { return (id)_device; }
- (id)commandBuffer { return [[[IASimCommandBuffer alloc] initWithQueue:self] autorelease]; }
- (void)enqueue:(IASimCommandBuffer *)cb
{
    [cb retain];
    pthread_mutex_lock(&_mu);
    if (_npending == _cap) {
        size_t cap = _cap ? _cap * 2 : 8;
        IASimCommandBuffer **p = malloc(cap * sizeof *p);
        for (size_t i = 0; i < _npending; ++i)
            p[i] = _pending[(_head + i) % _cap];
        free(_pending);
        _pending = p;
        _cap = cap;
        _head = 0;
    }
    _pending[(_head + _npending) % _cap] = cb;
    _npending++;
    if (!_started) {
        pthread_create(&_thread, NULL, sim_worker, self);
        _started = YES;
    }
    pthread_cond_broadcast(&_cv);
    pthread_mutex_unlock(&_mu);
}
@end

@implementation IASimCommandBuffer
+ (int)simKind { return K_COMMAND_BUFFER; }
- (id)initWithQueue:(IASimCommandQueue *)queue
{
    if ((self = [super init]) != nil) {
        _queue = queue;
        _done = calloc(1, sizeof *_done);
        pthread_mutex_init(&_done->mu, NULL);
        pthread_cond_init(&_done->cv, NULL);
        _done->refs = 1;
        _done->status = MTLCommandBufferStatusNotEnqueued;
    }
    return self;
}
- (void)dealloc
{
    for (size_t i = 0; i < _nheld; ++i)
        [_held[i] release];
    for (size_t i = 0; i < _nbytes; ++i)
        free(_bytes[i]);
    free(_held);
    free(_bytes);
    free(_cmds);
    [_error release];
    sim_completion_unref(_done);
    [super dealloc];
}
- (void)hold:(id)obj
{
    if (_nheld == _capheld) {
        _capheld = _capheld ? _capheld * 2 : 8;
        _held = realloc(_held, _capheld * sizeof *_held);
    }
    _held[_nheld++] = [obj retain];
}
- (void *)keepBytes:(const void *)bytes length:(NSUInteger)length
{
    if (_nbytes == _capbytes) {
        _capbytes = _capbytes ? _capbytes * 2 : 8;
        _bytes = realloc(_bytes, _capbytes * sizeof *_bytes);
    }
    void *p = malloc(length ? length : 1);
    memcpy(p, bytes, length);
    return _bytes[_nbytes++] = p;
}
- (sim_cmd *)appendCommand:(int)kind
{
    if (_ncmds == _capcmds) {
        _capcmds = _capcmds ? _capcmds * 2 : 8;
        _cmds = realloc(_cmds, _capcmds * sizeof *_cmds);
    }
    sim_cmd *c = &_cmds[_ncmds++];
    memset(c, 0, sizeof *c);
    c->kind = kind;
    return c;
}
- (void)invalid:(const char *)what
{
    sim_validation("%s", what);
    sim_cmd *c = [self appendCommand:CMD_INVALID];
    snprintf(c->what, sizeof c->what, "%s", what);
}
- (BOOL)openEncoder
{
    if (_committed) {
        sim_validation("an encoder was asked of a committed command buffer");
        return NO;
    }
    if (_encoding) {
        [self invalid:"an encoder was asked for while another is still encoding (endEncoding missing)"];
        return NO;
    }
    _encoding = YES;
    return YES;
}
- (void)commit
{
    if (_committed) {
        sim_validation("commit of a command buffer already committed");
        return;
    }
    if (_encoding)
        [self invalid:"commit while an encoder is still encoding (endEncoding missing)"];
    _committed = YES;
    pthread_mutex_lock(&_done->mu);
    _done->status = MTLCommandBufferStatusCommitted;
    pthread_mutex_unlock(&_done->mu);
    [_queue enqueue:self];
}
- (void)enqueue
{
    pthread_mutex_lock(&_done->mu);
    if (_done->status == MTLCommandBufferStatusNotEnqueued)
        _done->status = MTLCommandBufferStatusEnqueued;
    pthread_mutex_unlock(&_done->mu);
}
- (void)waitUntilCompleted
{
    if (!_committed) {
        sim_validation("waitUntilCompleted on a command buffer not committed");
        return;
    }
    pthread_mutex_lock(&_done->mu);
    while (!_done->released_by_queue)
        pthread_cond_wait(&_done->cv, &_done->mu);
    pthread_mutex_unlock(&_done->mu);
}
- (void)waitUntilScheduled
{
    if (!_committed)
        return;
    pthread_mutex_lock(&_done->mu);
    while (_done->status < MTLCommandBufferStatusScheduled)
        pthread_cond_wait(&_done->cv, &_done->mu);
    pthread_mutex_unlock(&_done->mu);
}
- (MTLCommandBufferStatus)status
{
    pthread_mutex_lock(&_done->mu);
    MTLCommandBufferStatus s = _done->status;
    pthread_mutex_unlock(&_done->mu);
    return s;
}
- (NSError *)error
{
    pthread_mutex_lock(&_done->mu);
    BOOL failed = _done->status == MTLCommandBufferStatusError;
    pthread_mutex_unlock(&_done->mu);
    if (!failed)
        return nil;
    if (_error == nil) {
        NSString *msg = [NSString stringWithUTF8String:_done->error_message];
        _error = [sim_error(MTLCommandBufferErrorDomain, _done->error_code, msg) retain];
    }
    return _error;
}
- (CFTimeInterval)GPUStartTime { return [self status] >= MTLCommandBufferStatusCompleted ? _done->start : 0.0; }
- (CFTimeInterval)GPUEndTime { return [self status] >= MTLCommandBufferStatusCompleted ? _done->end : 0.0; }
- (id)commandQueue { return (id)_queue; }
- (id)device { return [(id)_queue device]; }
- (void)encodeSignalEvent:(id)event value:(uint64_t)value
{
    if (_committed || _encoding || ![event isKindOfClass:[IASimSharedEvent class]]) {
        sim_validation("encodeSignalEvent:value: %s", _committed ? "after commit"
                       : _encoding ? "while an encoder is encoding" : "with an object that is not an event");
        return;
    }
    [self hold:event];
    sim_cmd *c = [self appendCommand:CMD_SIGNAL];
    c->event = &((IASimSharedEvent *)event)->_ev;
    c->event_value = value;
}
- (void)encodeWaitForEvent:(id)event value:(uint64_t)value
{
    if (_committed || _encoding || ![event isKindOfClass:[IASimSharedEvent class]]) {
        sim_validation("encodeWaitForEvent:value: %s", _committed ? "after commit"
                       : _encoding ? "while an encoder is encoding" : "with an object that is not an event");
        return;
    }
    [self hold:event];
    sim_cmd *c = [self appendCommand:CMD_WAIT];
    c->event = &((IASimSharedEvent *)event)->_ev;
    c->event_value = value;
}
@end

/* -------- encoders */

@interface IASimComputeCommandEncoder : IASimObject {
    IASimCommandBuffer *_cb; /* retained */
    BOOL _ended;
    IASimComputePipelineState *_pipeline;
    char *_ptr[SIM_MAX_BUFFER_INDEX];
    size_t _len[SIM_MAX_BUFFER_INDEX];
    BOOL _bound[SIM_MAX_BUFFER_INDEX];
}
@end
@implementation IASimComputeCommandEncoder
+ (int)simKind { return K_COMPUTE_ENCODER; }
- (id)initWithCommandBuffer:(IASimCommandBuffer *)cb
{
    if ((self = [super init]) != nil)
        _cb = [cb retain];
    return self;
}
- (void)dealloc
{
    [_cb release];
    [super dealloc];
}
- (BOOL)usable:(const char *)selector
{
    if (_ended) {
        sim_validation("%s on a compute encoder after endEncoding", selector);
        return NO;
    }
    return YES;
}
- (void)setComputePipelineState:(id)state
{
    if (![self usable:"setComputePipelineState:"])
        return;
    if (![state isKindOfClass:[IASimComputePipelineState class]]) {
        [_cb invalid:"setComputePipelineState: with an object that is not a compute pipeline state"];
        return;
    }
    [_cb hold:state];
    _pipeline = state;
}
- (void)setBuffer:(id)buffer offset:(NSUInteger)offset atIndex:(NSUInteger)index
{
    if (![self usable:"setBuffer:offset:atIndex:"])
        return;
    char what[160];
    if (index >= SIM_MAX_BUFFER_INDEX) {
        snprintf(what, sizeof what, "setBuffer:offset:atIndex: index %lu is not below %d", (unsigned long)index,
                 SIM_MAX_BUFFER_INDEX);
        [_cb invalid:what];
        return;
    }
    if (buffer == nil) {
        _bound[index] = NO;
        return;
    }
    if (![buffer isKindOfClass:[IASimBuffer class]]) {
        [_cb invalid:"setBuffer:offset:atIndex: with an object that is not a buffer"];
        return;
    }
    IASimBuffer *b = buffer;
    if (offset > b->_length) {
        snprintf(what, sizeof what, "setBuffer:offset:atIndex: offset %lu is past the buffer's end (%lu)",
                 (unsigned long)offset, (unsigned long)b->_length);
        [_cb invalid:what];
        return;
    }
    [_cb hold:b];
    _ptr[index] = b->_mem + offset;
    _len[index] = b->_length - offset;
    _bound[index] = YES;
}
- (void)setBufferOffset:(NSUInteger)offset atIndex:(NSUInteger)index
{
    (void)offset;
    (void)index;
    [_cb invalid:"setBufferOffset:atIndex: is not simulated"];
}
- (void)setBytes:(const void *)bytes length:(NSUInteger)length atIndex:(NSUInteger)index
{
    if (![self usable:"setBytes:length:atIndex:"])
        return;
    char what[160];
    if (index >= SIM_MAX_BUFFER_INDEX || length > SIM_MAX_SET_BYTES || (bytes == NULL && length > 0)) {
        snprintf(what, sizeof what, "setBytes:length:atIndex: length %lu (at most %d), index %lu (below %d)%s",
                 (unsigned long)length, SIM_MAX_SET_BYTES, (unsigned long)index, SIM_MAX_BUFFER_INDEX,
                 bytes == NULL ? ", bytes NULL" : "");
        [_cb invalid:what];
        return;
    }
    _ptr[index] = [_cb keepBytes:bytes length:length];
    _len[index] = length;
    _bound[index] = YES;
}
- (void)dispatch:(MTLSize)grid group:(MTLSize)group selector:(const char *)selector
{
    if (![self usable:selector])
        return;
    char what[200];
    if (_pipeline == nil) {
        snprintf(what, sizeof what, "%s without a compute pipeline state", selector);
        [_cb invalid:what];
        return;
    }
    NSUInteger total = group.width * group.height * group.depth;
    if (total > [_pipeline maxTotalThreadsPerThreadgroup] || total == 0) {
        snprintf(what, sizeof what, "%s threadsPerThreadgroup {%lu, %lu, %lu} (%lu threads) is not within 1..%lu",
                 selector, (unsigned long)group.width, (unsigned long)group.height, (unsigned long)group.depth,
                 (unsigned long)total, (unsigned long)[_pipeline maxTotalThreadsPerThreadgroup]);
        [_cb invalid:what];
        return;
    }
    const sim_kernel *k = _pipeline->_kernel;
    for (int i = 0; i < k->nargs; ++i)
        if (!_bound[i]) {
            snprintf(what, sizeof what, "%s: kernel %s's argument [[buffer(%d)]] is not bound", selector, k->name, i);
            [_cb invalid:what];
            return;
        }
    sim_cmd *c = [_cb appendCommand:CMD_DISPATCH];
    c->kernel = k;
    c->grid = grid;
    memcpy(c->ptr, _ptr, sizeof c->ptr);
    memcpy(c->len, _len, sizeof c->len);
}
- (void)dispatchThreads:(MTLSize)threadsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup
{
    [self dispatch:threadsPerGrid group:threadsPerThreadgroup selector:"dispatchThreads:threadsPerThreadgroup:"];
}
- (void)dispatchThreadgroups:(MTLSize)threadgroupsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup
{
    MTLSize grid = {threadgroupsPerGrid.width * threadsPerThreadgroup.width,
                    threadgroupsPerGrid.height * threadsPerThreadgroup.height,
                    threadgroupsPerGrid.depth * threadsPerThreadgroup.depth};
    [self dispatch:grid group:threadsPerThreadgroup selector:"dispatchThreadgroups:threadsPerThreadgroup:"];
}
- (void)endEncoding
{
    if (![self usable:"endEncoding"])
        return;
    _ended = YES;
    _cb->_encoding = NO;
}
- (id)device { return [_cb device]; }
- (id)commandBuffer { return _cb; }
@end

static BOOL sim_in_buffer(id b, NSUInteger offset, NSUInteger size)
{
    if (![b isKindOfClass:[IASimBuffer class]])
        return NO;
    NSUInteger len = ((IASimBuffer *)b)->_length;
    return offset <= len && size <= len - offset;
}

@interface IASimBlitCommandEncoder : IASimObject {
    IASimCommandBuffer *_cb; /* retained */
    BOOL _ended;
}
@end
@implementation IASimBlitCommandEncoder
+ (int)simKind { return K_BLIT_ENCODER; }
- (id)initWithCommandBuffer:(IASimCommandBuffer *)cb
{
    if ((self = [super init]) != nil)
        _cb = [cb retain];
    return self;
}
- (void)dealloc
{
    [_cb release];
    [super dealloc];
}
- (BOOL)usable:(const char *)selector
{
    if (_ended) {
        sim_validation("%s on a blit encoder after endEncoding", selector);
        return NO;
    }
    return YES;
}
- (void)copyFromBuffer:(id)source sourceOffset:(NSUInteger)sourceOffset toBuffer:(id)destination
     destinationOffset:(NSUInteger)destinationOffset size:(NSUInteger)size
{
    if (![self usable:"copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:"])
        return;
    if (!sim_in_buffer(source, sourceOffset, size) || !sim_in_buffer(destination, destinationOffset, size)) {
        [_cb invalid:"copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size: outside a buffer (or not a buffer)"];
        return;
    }
    [_cb hold:source];
    [_cb hold:destination];
    sim_cmd *c = [_cb appendCommand:CMD_COPY];
    c->src = ((IASimBuffer *)source)->_mem + sourceOffset;
    c->dst = ((IASimBuffer *)destination)->_mem + destinationOffset;
    c->size = size;
}
- (void)fillBuffer:(id)buffer range:(NSRange)range value:(uint8_t)value
{
    if (![self usable:"fillBuffer:range:value:"])
        return;
    if (!sim_in_buffer(buffer, range.location, range.length)) {
        [_cb invalid:"fillBuffer:range:value: outside the buffer (or not a buffer)"];
        return;
    }
    [_cb hold:buffer];
    sim_cmd *c = [_cb appendCommand:CMD_FILL];
    c->dst = ((IASimBuffer *)buffer)->_mem + range.location;
    c->size = range.length;
    c->value = value;
}
- (void)endEncoding
{
    if (![self usable:"endEncoding"])
        return;
    _ended = YES;
    _cb->_encoding = NO;
}
- (id)device { return [_cb device]; }
- (id)commandBuffer { return _cb; }
@end

@implementation IASimCommandBuffer (Encoders)
- (id)computeCommandEncoder
{
    if (![self openEncoder])
        return nil;
    return [[[IASimComputeCommandEncoder alloc] initWithCommandBuffer:self] autorelease];
}
- (id)blitCommandEncoder
{
    if (![self openEncoder])
        return nil;
    return [[[IASimBlitCommandEncoder alloc] initWithCommandBuffer:self] autorelease];
}
@end

/* -------- the device */

@interface IASimDevice : IASimObject {
    NSString *_name;
    MTLGPUFamily _families[SIM_MAX_FAMILIES];
    int _nfamilies;
}
@end

static IASimDevice *g_device; /* not retained: the device while something holds it (see -release) */
static pthread_mutex_t g_device_mu = PTHREAD_MUTEX_INITIALIZER;

/* "Compiles" MSL source: the kernel names it defines, each a built-in kernel.  On failure, a compiler-like
 * message in msg and NO. */
static BOOL sim_compile(const char *src, const sim_kernel **out, size_t *nout, char *msg, size_t msgsize)
{
    size_t n = 0;
    int line = 1;
    const char *line_start = src;
    for (const char *p = src; *p; ++p) {
        if (*p == '\n') {
            line++;
            line_start = p + 1;
            continue;
        }
        if (strncmp(p, "kernel", 6) != 0 || (p > src && (isalnum((unsigned char)p[-1]) || p[-1] == '_'))
            || isalnum((unsigned char)p[6]) || p[6] == '_')
            continue;
        const char *q = p + 6;
        if (q[0] == ']' && q[1] == ']')
            q += 2;
        while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
            ++q;
        if (strncmp(q, "void", 4) != 0)
            continue;
        q += 4;
        while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
            ++q;
        const char *name = q;
        while (isalnum((unsigned char)*q) || *q == '_')
            ++q;
        size_t len = (size_t)(q - name);
        while (*q == ' ' || *q == '\t')
            ++q;
        if (len == 0 || *q != '(')
            continue;
        /* the name's line and column (the name may sit on a later line than `kernel`) */
        int nline = line;
        const char *nstart = line_start;
        for (const char *r = p; r < name; ++r)
            if (*r == '\n') {
                nline++;
                nstart = r + 1;
            }
        const sim_kernel *k = sim_find_kernel(name, len);
        if (k == NULL) {
            snprintf(msg, msgsize,
                     "program_source:%d:%d: error: kernel '%.*s' cannot be compiled: the IA simulated Metal device "
                     "runs only its built-in kernels (vector_add, saxpy, lcg)",
                     nline, (int)(name - nstart) + 1, (int)len, name);
            return NO;
        }
        BOOL seen = NO;
        for (size_t i = 0; i < n; ++i)
            seen = seen || out[i] == k;
        if (seen) {
            snprintf(msg, msgsize, "program_source:%d:%d: error: redefinition of '%s'", nline,
                     (int)(name - nstart) + 1, k->name);
            return NO;
        }
        out[n++] = k;
        p = q;
    }
    if (n == 0) {
        snprintf(msg, msgsize,
                 "program_source:1:1: error: no kernel function found (the IA simulated Metal device runs only its "
                 "built-in kernels: vector_add, saxpy, lcg)");
        return NO;
    }
    *nout = n;
    return YES;
}

@implementation IASimDevice
+ (int)simKind { return K_DEVICE; }
- (id)init
{
    if ((self = [super init]) != nil) {
        _name = [[NSString alloc] initWithUTF8String:SIM_DEVICE_NAME];
        const char *env = getenv("IA_METAL_SIM_FAMILIES");
        if (env != NULL) {
            char *end;
            for (const char *p = env; *p && _nfamilies < SIM_MAX_FAMILIES; p = end) {
                long v = strtol(p, &end, 10);
                if (end == p) {
                    end = (char *)p + 1;
                    continue;
                }
                _families[_nfamilies++] = v;
            }
        } else {
            _families[0] = MTLGPUFamilyCommon1;
            _families[1] = MTLGPUFamilyCommon2;
            _families[2] = MTLGPUFamilyCommon3;
            _nfamilies = 3;
        }
    }
    return self;
}
- (void)dealloc
{
    [_name release];
    [super dealloc];
}
/* The global that MTLCreateSystemDefaultDevice hands out is cleared under its lock when the last reference
 * goes, so that no one can take the device while it is being deallocated. */
- (oneway void)release
{
    pthread_mutex_lock(&g_device_mu);
    if (g_device == self && [self retainCount] == 1)
        g_device = nil;
    [super release]; /* under the lock: no one may retain it between the test and the release */
    pthread_mutex_unlock(&g_device_mu);
}
- (NSString *)name { return _name; }
- (uint64_t)registryID { return SIM_REGISTRY_ID; }
- (uint64_t)recommendedMaxWorkingSetSize { return SIM_WORKING_SET; }
- (BOOL)hasUnifiedMemory { return YES; }
- (BOOL)isLowPower { return NO; }
- (BOOL)isHeadless { return YES; }
- (BOOL)isRemovable { return NO; }
- (MTLSize)maxThreadsPerThreadgroup
{
    MTLSize s = {SIM_MAX_THREADS_PER_GROUP, SIM_MAX_THREADS_PER_GROUP, SIM_MAX_THREADS_PER_GROUP};
    return s;
}
- (NSUInteger)maxBufferLength { return SIM_MAX_BUFFER_LENGTH; }
- (NSUInteger)maxThreadgroupMemoryLength { return 32768; }
- (BOOL)supportsFamily:(MTLGPUFamily)family
{
    for (int i = 0; i < _nfamilies; ++i)
        if (_families[i] == family)
            return YES;
    return NO;
}
- (id)newBufferWithLength:(NSUInteger)length options:(MTLResourceOptions)options
{
    NSUInteger mode = (options & MTLResourceStorageModeMask) >> MTLResourceStorageModeShift;
    if (length == 0 || length > SIM_MAX_BUFFER_LENGTH || mode == MTLStorageModeMemoryless)
        return nil;
    void *mem = NULL;
    size_t rounded = (length + SIM_PAGE - 1) / SIM_PAGE * SIM_PAGE;
    if (posix_memalign(&mem, SIM_PAGE, rounded) != 0)
        return nil;
    memset(mem, 0, rounded);
    return [[IASimBuffer alloc] initWithDevice:self memory:mem length:length options:options owned:YES
                                   deallocator:NULL];
}
- (id)newBufferWithBytes:(const void *)pointer length:(NSUInteger)length options:(MTLResourceOptions)options
{
    if (pointer == NULL)
        return nil;
    IASimBuffer *b = [self newBufferWithLength:length options:options];
    if (b != nil)
        memcpy(b->_mem, pointer, length);
    return b;
}
- (id)newBufferWithBytesNoCopy:(void *)pointer length:(NSUInteger)length options:(MTLResourceOptions)options
                   deallocator:(void *)deallocator
{
    NSUInteger mode = (options & MTLResourceStorageModeMask) >> MTLResourceStorageModeShift;
    if (pointer == NULL || (uintptr_t)pointer % SIM_PAGE != 0 || length == 0 || length % SIM_PAGE != 0
        || length > SIM_MAX_BUFFER_LENGTH || mode == MTLStorageModePrivate || mode == MTLStorageModeMemoryless)
        return nil;
    return [[IASimBuffer alloc] initWithDevice:self memory:pointer length:length options:options owned:NO
                                   deallocator:deallocator];
}
- (id)newCommandQueue { return [[IASimCommandQueue alloc] initWithDevice:self]; }
- (id)newCommandQueueWithMaxCommandBufferCount:(NSUInteger)count
{
    (void)count;
    return [self newCommandQueue];
}
- (id)newSharedEvent { return [[IASimSharedEvent alloc] initWithDevice:self]; }
- (id)newLibraryWithSource:(NSString *)source options:(id)options error:(NSError **)error
{
    char msg[400];
    const sim_kernel *kernels[SIM_NKERNELS];
    size_t n = 0;
    const char *src = [source UTF8String];
    if (options != nil && ![options isKindOfClass:[MTLCompileOptions class]]) {
        if (error != NULL)
            *error = sim_error(MTLLibraryErrorDomain, MTLLibraryErrorInternal,
                               @"options is not an MTLCompileOptions");
        return nil;
    }
    if (src == NULL) {
        snprintf(msg, sizeof msg, "program_source:1:1: error: no source");
    } else if (sim_compile(src, kernels, &n, msg, sizeof msg)) {
        return [[IASimLibrary alloc] initWithDevice:self kernels:kernels count:n];
    }
    if (error != NULL)
        *error = sim_error(MTLLibraryErrorDomain, MTLLibraryErrorCompileFailure, [NSString stringWithUTF8String:msg]);
    return nil;
}
- (id)newComputePipelineStateWithFunction:(id)function error:(NSError **)error
{
    if (![function isKindOfClass:[IASimFunction class]]) {
        if (error != NULL)
            *error = sim_error(MTLLibraryErrorDomain, MTLLibraryErrorInternal,
                               @"newComputePipelineStateWithFunction:error: needs a function of this device");
        return nil;
    }
    return [[IASimComputePipelineState alloc] initWithDevice:self kernel:((IASimFunction *)function)->_kernel];
}
@end

/* ------------------------------------------------------------------ the C entry points */

id MTLCreateSystemDefaultDevice(void)
{
    pthread_mutex_lock(&g_device_mu);
    IASimDevice *d = g_device;
    if (d != nil)
        [d retain];
    else
        d = g_device = [[IASimDevice alloc] init];
    pthread_mutex_unlock(&g_device_mu);
    return d;
}

NSArray *MTLCopyAllDevices(void)
{
    id d = MTLCreateSystemDefaultDevice();
    NSArray *all = [[NSArray alloc] initWithObjects:d, nil];
    [d release];
    return all;
}
