/* A stream-ordered pool in the manner of cuMemAllocFromPoolAsync and cuMemFreeAsync (the spec's pool_memory:
   called in C, the memory a C object). */
#ifndef POOL_MEMORY_H
#define POOL_MEMORY_H
#include <stddef.h>

typedef enum { PM_SUCCESS = 0, PM_ERROR_INVALID_VALUE = 1, PM_ERROR_OUT_OF_MEMORY = 2 } pmStatus;
typedef unsigned long long pmPtr;
typedef struct pm_pool_st *pmPool;
typedef struct pm_stream_st *pmStream;

pmStatus pmPoolAlloc(pmPtr *ptr, size_t bytes, pmPool pool, pmStream stream);
pmStatus pmPoolFree(pmPtr ptr, pmStream stream);
/* what they last received: 0 allocations, 1 frees, 2 bytes, 3 pool, 4 stream (allocation), 5 address freed,
   6 stream (free) */
pmStatus pmPoolValue(int index, unsigned long long *value);
/* the next `count` calls of either answer `status` */
pmStatus pmPoolFail(pmStatus status, int count);
#endif
