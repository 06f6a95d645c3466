/* Focused header for the binder's pool_memory and device_memory checks (tests/test_bind.py): functions of the
   cuMemAllocFromPoolAsync / cuMemFreeAsync shapes, and near misses. */
#ifndef POOL_H
#define POOL_H
#include <stddef.h>

typedef enum { POOL_SUCCESS = 0, POOL_ERROR = 1 } poolResult;
typedef unsigned long long poolDevptr;
typedef struct pool_st *poolHandle;
typedef struct stream_st *poolStream;

poolResult poolAlloc(poolDevptr *ptr, size_t bytes, poolHandle pool, poolStream stream);
poolResult poolFree(poolDevptr ptr, poolStream stream);
poolResult poolFreePointer(void *ptr, poolStream stream);
poolResult poolFreeLater(poolDevptr ptr, poolStream stream, int delay);
poolResult poolAllocSwapped(poolDevptr *ptr, poolHandle pool, size_t bytes, poolStream stream);
int poolCount(poolDevptr *ptr, size_t bytes, poolHandle pool, poolStream stream);
/* device_memory (cuMemAlloc / cuMemFree shapes), and near misses */
poolResult poolMalloc(poolDevptr *ptr, size_t bytes);
poolResult poolRelease(poolDevptr ptr);
poolResult poolReleasePointer(void *ptr);
poolResult poolMallocSwapped(size_t bytes, poolDevptr *ptr);

#endif
