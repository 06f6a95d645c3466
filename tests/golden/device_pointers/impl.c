/* Records the addresses it receives (no memory is touched: they are device addresses). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef enum { DP_OK = 0, DP_BAD_ARG = 7 } DpStatus;
static uintptr_t last[3];

DpStatus dpCreate(void **handle) { *handle = malloc(1); return *handle ? DP_OK : DP_BAD_ARG; }
DpStatus dpScale(void *handle, int n, float alpha, const float *x, float *y)
{
    (void)alpha;
    if (handle == NULL || n < 0) return DP_BAD_ARG;
    last[0] = (uintptr_t)x; last[1] = (uintptr_t)y;
    return DP_OK;
}
DpStatus dpScaleD(void *handle, int n, double alpha, const double *x, double *y)
{
    return dpScale(handle, n, (float)alpha, (const float *)x, (float *)y);
}
DpStatus dpFill(unsigned long long dst, size_t bytes, int value)
{
    (void)value;
    last[2] = (uintptr_t)dst + bytes;
    return DP_OK;
}
DpStatus dpSum(void *handle, int n, const float *x, float *result)
{
    if (handle == NULL) return DP_BAD_ARG;
    last[0] = (uintptr_t)x;
    *result = 2.5f * (float)n;
    return DP_OK;
}
DpStatus dpLast(int which, uintptr_t *address)
{
    if (which < 0 || which > 2) return DP_BAD_ARG;
    *address = last[which];
    return DP_OK;
}
