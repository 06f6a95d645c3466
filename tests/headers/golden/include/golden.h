/* A small vendor-style C API exercising every binding feature the compiler knows: the spec set that
   test_fuzz.py mutates and test_output.py generates through the CLI.  (The golden cases, one per
   behaviour, are tests/golden/<case>/.) */
#ifndef GOLDEN_H
#define GOLDEN_H
#include <stddef.h>
#include <stdint.h>

#define GOLDEN_VERSION 2010
#define GOLDEN_MAX_NAME (32 * 2)
#define GOLDEN_FLAG_A 0x1u
#define GOLDEN_FLAG_B (GOLDEN_FLAG_A << 3)
#define GOLDEN_GREETING "hello"

typedef enum golden_status_enum {
    GOLDEN_SUCCESS = 0,
    GOLDEN_ERROR_INVALID_VALUE = 1,
    GOLDEN_ERROR_OUT_OF_MEMORY = 2,
    GOLDEN_ERROR_NOT_READY = 3,
    GOLDEN_ERROR_COMPILE = 4,
    GOLDEN_ERROR_UNKNOWN = 999
} goldenStatus;

typedef enum { GOLDEN_MODE_FAST = 1, GOLDEN_MODE_SAFE = GOLDEN_MODE_FAST << 2 } goldenMode;

typedef struct golden_ctx_st *goldenCtx;
typedef unsigned long long goldenPtr;

typedef struct golden_desc_st {
    unsigned int kind;
    union {
        struct { goldenPtr base; size_t bytes; } linear;
        int reserved[4];
    } res;
    char label[GOLDEN_MAX_NAME];
} goldenDesc;

typedef void (*goldenCallback)(void *userData, goldenStatus status);

#define __GOLDEN_PT(api) api
#define goldenAlloc goldenAlloc_v2
#define goldenCopy __GOLDEN_PT(goldenCopy_v2)

goldenStatus goldenInit(unsigned int flags);
goldenStatus goldenGetVersion(int *major, int *minor);
goldenStatus goldenCtxCreate(goldenCtx *ctx, goldenMode mode);
goldenStatus goldenCtxDestroy(goldenCtx ctx);
goldenStatus goldenAlloc(goldenPtr *ptr, size_t bytes);
goldenStatus goldenCopy(goldenPtr dst, const void *src, size_t bytes);
goldenStatus goldenQuery(goldenCtx ctx);
goldenStatus goldenGetName(char *name, int len, int index);
goldenStatus goldenGetErrorName(goldenStatus status, const char **name);
goldenStatus goldenDescribe(goldenDesc *desc, goldenPtr ptr);
goldenStatus goldenSum(const int *values, int count, long long *total);
goldenStatus goldenJoin(int count, const char *const *words, char *out, int outLen);
goldenStatus goldenGetLogSize(goldenCtx ctx, size_t *size);
goldenStatus goldenGetLog(goldenCtx ctx, char *log);
goldenStatus goldenBuild(goldenCtx ctx, const char *source);
goldenStatus goldenSetCallback(goldenCallback cb, void *userData);
goldenStatus goldenNotExported(int x);
const char *goldenStatusString(goldenStatus status);

/* A resolver in the manner of cuGetProcAddress: the symbol's public name, pinned to an ABI version. */
typedef enum { GOLDEN_PROC_DEFAULT = 0, GOLDEN_PROC_PER_THREAD = 2 } goldenProcFlags;
goldenStatus goldenGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags, int *status);
int goldenProcLookups(void);
int goldenProcRefusals(void);
double goldenScale(double x, float factor);

/* A kernel launch in the manner of cuLaunchKernel (the spec's kernel_launch: packed and called in C). */
typedef struct golden_function_st *goldenFunction;
typedef struct golden_stream_st *goldenStream;
goldenStatus goldenLaunch(goldenFunction f, unsigned int gridX, unsigned int gridY, unsigned int gridZ,
                          unsigned int blockX, unsigned int blockY, unsigned int blockZ, unsigned int sharedBytes,
                          goldenStream stream, void **params, void **extra);
/* The "kernel"'s parameter sizes (what goldenLaunch reads), and what the last launch received:
   value 0 the function, 1-7 the dimensions, 8 the stream, 9 params == NULL, 10 extra == NULL, 11 the
   launch count; param: parameter i's bytes (up to 8) as a little-endian number. */
goldenStatus goldenLaunchParamSize(int index, unsigned int size);
goldenStatus goldenLastLaunchValue(int index, unsigned long long *value);
goldenStatus goldenLastLaunchParam(int index, unsigned long long *value);

/* A stream-ordered pool in the manner of cuMemAllocFromPoolAsync and cuMemFreeAsync (the spec's pool_memory:
   called in C, the memory a C object).  goldenPoolValue: what they last received -- 0 allocations, 1 frees,
   2 bytes, 3 pool, 4 stream (allocation), 5 address freed, 6 stream (free).  goldenPoolFail: the next
   `count` calls of either answer `status`. */
typedef struct golden_pool_st *goldenPool;
goldenStatus goldenPoolAlloc(goldenPtr *ptr, size_t bytes, goldenPool pool, goldenStream stream);
goldenStatus goldenPoolFree(goldenPtr ptr, goldenStream stream);
goldenStatus goldenPoolValue(int index, unsigned long long *value);
goldenStatus goldenPoolFail(goldenStatus status, int count);

/* PFN_<name>_v<version>: the version that introduced each ABI.  goldenAlloc has three: the pin must be
   the one whose prototype matches the declaration above (2010), not the lowest nor the highest. */
typedef goldenStatus (*PFN_goldenNotExported_v3050)(int x);
typedef goldenStatus (*PFN_goldenAlloc_v1000)(unsigned int *ptr, unsigned int bytes);
typedef goldenStatus (*PFN_goldenAlloc_v2010)(goldenPtr *ptr, size_t bytes);
typedef goldenStatus (*PFN_goldenAlloc_v9000)(goldenPtr *ptr, size_t bytes, unsigned int flags);
typedef goldenStatus (*PFN_goldenCopy_v2000)(goldenPtr dst, const void *src, size_t bytes);
/* pinned, but the resolver does not implement it: the binding falls back to dlsym of goldenGetVersion */
typedef goldenStatus (*PFN_goldenGetVersion_v1000)(int *major, int *minor);
#endif
