/* A buffer creator in the manner of clCreateBuffer and clReleaseMemObject (the spec's device_memory with create:
   called in C, the memory a C object): it returns the handle and reports its status through errcode_ret; the
   context, the flags and the host pointer are given by the device. */
#ifndef DEVICE_MEMORY_CREATE_H
#define DEVICE_MEMORY_CREATE_H
#include <stddef.h>

typedef enum { DC_SUCCESS = 0, DC_ERROR_INVALID_VALUE = -30, DC_ERROR_OUT_OF_MEMORY = -4 } dcStatus;
typedef struct dc_context_s *dcContext;
typedef struct dc_mem_s *dcMem;
typedef unsigned long long dcFlags;

dcMem dcCreateBuffer(dcContext context, dcFlags flags, size_t size, void *host_ptr, dcStatus *errcode_ret);
dcStatus dcReleaseMem(dcMem mem);
/* what they last received: 0 creations, 1 releases, 2 bytes, 3 handle released, 4 context, 5 flags, 6 host_ptr */
dcStatus dcValue(int index, unsigned long long *value);
/* the next `count` calls of either answer `status` (a failed creation returns NULL) */
dcStatus dcFail(dcStatus status, int count);
#endif
