/* Buffers in the manner of clCreateBuffer and clReleaseMemObject (the spec's device_memory), and host copies in
   the manner of clEnqueueWriteBuffer and clEnqueueReadBuffer (the spec's host_copy, called in C): each records what
   it received; a write keeps the bytes, a read fills the host buffer with a pattern. */
#ifndef HOST_COPY_H
#define HOST_COPY_H
#include <stddef.h>

typedef enum { HC_SUCCESS = 0, HC_ERROR_INVALID_VALUE = -30, HC_ERROR_OUT_OF_MEMORY = -4 } hcStatus;
typedef struct hc_context_s *hcContext;
typedef struct hc_queue_s *hcQueue;
typedef struct hc_mem_s *hcMem;
typedef struct hc_event_s *hcEvent;
typedef unsigned int hcBool;

hcMem hcCreateBuffer(hcContext context, unsigned long long flags, size_t size, void *host_ptr, hcStatus *errcode_ret);
hcStatus hcReleaseMem(hcMem mem);
hcStatus hcWriteBuffer(hcQueue queue, hcMem buffer, hcBool blocking_write, size_t offset, size_t size,
                       const void *ptr, unsigned int num_events_in_wait_list, const hcEvent *event_wait_list,
                       hcEvent *event);
hcStatus hcReadBuffer(hcQueue queue, hcMem buffer, hcBool blocking_read, size_t offset, size_t size, void *ptr,
                      unsigned int num_events_in_wait_list, const hcEvent *event_wait_list, hcEvent *event);
/* what the last copy received: 0 writes, 1 reads, 2 queue, 3 buffer, 4 blocking, 5 offset, 6 size,
   7 the host pointer, 8 wait count, 9 wait list, 10 event, 11 the sum of the bytes written */
hcStatus hcValue(int index, unsigned long long *value);
/* the next `count` copies answer `status` (and copy nothing) */
hcStatus hcFail(hcStatus status, int count);
#endif
