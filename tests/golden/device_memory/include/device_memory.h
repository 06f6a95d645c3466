/* A device-memory allocator in the manner of hipMalloc and hipFree (the spec's device_memory: called in C, the
   memory a C object); its device pointer is a void *, as hipDeviceptr_t is. */
#ifndef DEVICE_MEMORY_H
#define DEVICE_MEMORY_H
#include <stddef.h>

typedef enum { DM_SUCCESS = 0, DM_ERROR_INVALID_VALUE = 1, DM_ERROR_OUT_OF_MEMORY = 2 } dmStatus;
typedef void *dmPtr;

dmStatus dmAlloc(dmPtr *ptr, size_t bytes);
dmStatus dmFree(dmPtr ptr);
/* what they last received: 0 allocations, 1 frees, 2 bytes, 3 address freed */
dmStatus dmValue(int index, unsigned long long *value);
/* the next `count` calls of either answer `status` */
dmStatus dmFail(dmStatus status, int count);
#endif
