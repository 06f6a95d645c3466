/* The implementation has no header to include: it repeats the spec's declarations it needs. */
#include <stdio.h>
#include <stdlib.h>

typedef enum { DECL_OK = 0, DECL_BAD_ARG = 2, DECL_NO_MEMORY = 3 } DeclStatus;
typedef struct { unsigned int major; unsigned int minor; } DeclVersion;

DeclStatus declGetVersion(DeclVersion *v) { v->major = 2; v->minor = 7; return DECL_OK; }
DeclStatus declScale(int value, int factor, long long *r)
{
    if (factor == 0) return DECL_BAD_ARG;
    *r = (long long)value * factor;
    return DECL_OK;
}
DeclStatus declCreate(void **c) { *c = malloc(1); return *c ? DECL_OK : DECL_NO_MEMORY; }
DeclStatus declName(char *name, size_t capacity) { snprintf(name, capacity, "declared"); return DECL_OK; }
