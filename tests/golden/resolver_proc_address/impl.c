/* Built as is, and without the resolver (-DGOLDEN_NO_RESOLVER): then the binding must dlsym everything. */
#include <string.h>
#include "resolver_proc_address.h"

paStatus paGetVersion(int *major, int *minor) { *major = 2; *minor = 1; return PA_SUCCESS; }
paStatus paAlloc_v2(paPtr *ptr, size_t bytes) { *ptr = 0x1000 + bytes; return PA_SUCCESS; }
paStatus paCopy_v2(paPtr dst, const void *src, size_t bytes) { (void)dst; (void)src; (void)bytes; return PA_SUCCESS; }
paStatus paCopy_v2_ptds(paPtr dst, const void *src, size_t bytes) { (void)dst; (void)src; (void)bytes; return PA_ERROR_UNKNOWN; }

static int lookups = 0, refusals = 0;
int paProcLookups(void) { return lookups; }
int paProcRefusals(void) { return refusals; }
#ifndef GOLDEN_NO_RESOLVER
static paStatus paAlloc_via_proc(paPtr *ptr, size_t bytes) { *ptr = 0x2000 + bytes; return PA_SUCCESS; }
/* answers only for the exact (name, version) pairs it implements */
paStatus paGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags, int *status)
{
    *pfn = 0;
    if (status) *status = 0;
    if (strcmp(symbol, "paAlloc") == 0 && version == 2010)
        *pfn = (void *)paAlloc_via_proc;
    else if (strcmp(symbol, "paCopy") == 0 && version == 2000)
        *pfn = (flags & PA_PROC_PER_THREAD) ? (void *)paCopy_v2_ptds : (void *)paCopy_v2;
    if (*pfn == 0) {
        refusals++;
        return PA_ERROR_INVALID_VALUE;
    }
    lookups++;
    return PA_SUCCESS;
}
#endif
