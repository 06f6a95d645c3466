#include <string.h>
#include "per_thread.h"

static int which = 0;
int ptWhich(void) { return which; }
ptStatus ptCopy_v2(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); which = 1; return PT_SUCCESS; }
ptStatus ptCopy_v2_ptds(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); which = 2; return PT_SUCCESS; }
ptStatus ptFill_v2(void *dst, int value, size_t bytes) { memset(dst, value, bytes); which = 1; return PT_SUCCESS; }
ptStatus ptFill_v2_ptds(void *dst, int value, size_t bytes) { memset(dst, value, bytes); which = 2; return PT_SUCCESS; }
ptStatus ptInit(void) { which = 1; return PT_SUCCESS; }
