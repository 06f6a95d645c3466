/* resolver: {kind: dlsym}: each function's symbol is looked up with dlsym, on its first call; a #define
   rename gives the symbol; a symbol the library lacks is an error naming its minimum version. */
#ifndef RESOLVER_DLSYM_H
#define RESOLVER_DLSYM_H
#include <stddef.h>

typedef enum { DL_SUCCESS = 0, DL_ERROR_INVALID_VALUE = 1 } dlStatus;
typedef unsigned long long dlPtr;

#define dlAlloc dlAlloc_v2

dlStatus dlInit(unsigned int flags);
dlStatus dlAlloc(dlPtr *ptr, size_t bytes);
dlStatus dlNotExported(int x);
dlStatus dlHelper(void); /* left out by the spec's bind.exclude */

/* PFN_<name>_v<version>: the SDK version that introduced each function's ABI (3050: 3.5) */
typedef dlStatus (*PFN_dlAlloc_v2000)(dlPtr *ptr, size_t bytes);
typedef dlStatus (*PFN_dlNotExported_v3050)(int x);
#endif
