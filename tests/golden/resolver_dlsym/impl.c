#include "resolver_dlsym.h"

dlStatus dlInit(unsigned int flags) { return flags > 7 ? DL_ERROR_INVALID_VALUE : DL_SUCCESS; }
#undef dlAlloc
/* the unversioned symbol, which the binding must not use */
dlStatus dlAlloc(dlPtr *ptr, size_t bytes) { *ptr = 0xBAD; (void)bytes; return DL_SUCCESS; }
dlStatus dlAlloc_v2(dlPtr *ptr, size_t bytes) { *ptr = 0x1000 + bytes; return DL_SUCCESS; }
dlStatus dlHelper(void) { return DL_SUCCESS; }
