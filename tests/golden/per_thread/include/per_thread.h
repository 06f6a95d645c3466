/* Per-thread default-stream variants (CUDA's _ptds/_ptsz): a function declared through the marker macro
   has a second symbol, used once set_per_thread_default_stream(True) is called. */
#ifndef PER_THREAD_H
#define PER_THREAD_H
#include <stddef.h>

typedef enum { PT_SUCCESS = 0, PT_ERROR_INVALID_VALUE = 1 } ptStatus;

#define __PT_API(api) api
#define ptCopy __PT_API(ptCopy_v2)
#define ptFill __PT_API(ptFill_v2)

/* each returns which symbol ran: ptWhich() after the call: 1 the default symbol, 2 the per-thread one */
ptStatus ptCopy(void *dst, const void *src, size_t bytes);
ptStatus ptFill(void *dst, int value, size_t bytes);
ptStatus ptInit(void); /* no per-thread variant */
int ptWhich(void);
#endif
