/* resolver: {kind: proc_address}, in the manner of cuGetProcAddress: each function is asked of the library's
   resolver by public name, pinned to its ABI version (and with the per-thread flag when set); dlsym when the
   resolver refuses or is absent. */
#ifndef RESOLVER_PROC_ADDRESS_H
#define RESOLVER_PROC_ADDRESS_H
#include <stddef.h>

typedef enum { PA_SUCCESS = 0, PA_ERROR_INVALID_VALUE = 1, PA_ERROR_UNKNOWN = 999 } paStatus;
typedef enum { PA_PROC_DEFAULT = 0, PA_PROC_PER_THREAD = 2 } paProcFlags;
typedef unsigned long long paPtr;

#define __PA_PT(api) api
#define paAlloc paAlloc_v2
#define paCopy __PA_PT(paCopy_v2)

paStatus paGetVersion(int *major, int *minor);
paStatus paAlloc(paPtr *ptr, size_t bytes);
paStatus paCopy(paPtr dst, const void *src, size_t bytes);
paStatus paGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags, int *status);
int paProcLookups(void);   /* the resolver's answers so far */
int paProcRefusals(void);  /* and its refusals */

/* paAlloc has three ABIs: the pin must be the one whose prototype matches the declaration (2010), not the
   lowest nor the highest.  paGetVersion is pinned, but the resolver does not implement it: dlsym. */
typedef paStatus (*PFN_paAlloc_v1000)(unsigned int *ptr, unsigned int bytes);
typedef paStatus (*PFN_paAlloc_v2010)(paPtr *ptr, size_t bytes);
typedef paStatus (*PFN_paAlloc_v9000)(paPtr *ptr, size_t bytes, unsigned int flags);
typedef paStatus (*PFN_paCopy_v2000)(paPtr dst, const void *src, size_t bytes);
typedef paStatus (*PFN_paGetVersion_v1000)(int *major, int *minor);
#endif
