/* Focused header for the binder's pool_memory, device_memory and host_copy checks (tests/test_bind.py): functions of the
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
/* device_memory's create (clCreateBuffer / clReleaseMemObject shapes), and near misses */
typedef struct mem_st *poolMem;
poolMem poolCreate(poolHandle ctx, unsigned long long flags, size_t size, void *host, poolResult *errcode_ret);
poolResult poolDestroy(poolMem mem);
poolMem poolCreateNoStatus(poolHandle ctx, size_t size);
poolMem poolCreateFloat(poolHandle ctx, double scale, size_t size, poolResult *errcode_ret);
/* host_copy (clEnqueueWriteBuffer / clEnqueueReadBuffer shapes), and near misses */
typedef struct queue_st *poolQueue;
typedef struct event_st *poolEvent;
poolResult poolWrite(poolQueue q, poolMem mem, unsigned int blocking, size_t offset, size_t size, const void *host,
                     unsigned int nwait, const poolEvent *wait, poolEvent *event);
poolResult poolRead(poolQueue q, poolMem mem, unsigned int blocking, size_t offset, size_t size, void *host,
                    unsigned int nwait, const poolEvent *wait, poolEvent *event);
poolResult poolReadConst(poolQueue q, poolMem mem, unsigned int blocking, size_t offset, size_t size,
                         const void *host, unsigned int nwait, const poolEvent *wait, poolEvent *event);
poolResult poolWriteShort(poolQueue q, poolMem mem, size_t size, const void *host);
poolResult poolWriteOther(poolQueue q, poolHandle mem, unsigned int blocking, size_t offset, size_t size,
                          const void *host, unsigned int nwait, const poolEvent *wait, poolEvent *event);
#endif
