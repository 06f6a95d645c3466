#include <stdint.h>
#include "pool_memory.h"

static unsigned long long pool_value[7];
static pmStatus fail_status;
static int fail_count;

pmStatus pmPoolAlloc(pmPtr *ptr, size_t bytes, pmPool pool, pmStream stream)
{
    pool_value[0]++;
    pool_value[2] = bytes;
    pool_value[3] = (unsigned long long)(uintptr_t)pool;
    pool_value[4] = (unsigned long long)(uintptr_t)stream;
    if (fail_count > 0) {
        fail_count--;
        return fail_status;
    }
    *ptr = 0x100000 + pool_value[0] * 0x1000;
    return PM_SUCCESS;
}
pmStatus pmPoolFree(pmPtr ptr, pmStream stream)
{
    pool_value[1]++;
    pool_value[5] = ptr;
    pool_value[6] = (unsigned long long)(uintptr_t)stream;
    if (fail_count > 0) {
        fail_count--;
        return fail_status;
    }
    return PM_SUCCESS;
}
pmStatus pmPoolValue(int index, unsigned long long *value)
{
    if (index < 0 || index >= 7) return PM_ERROR_INVALID_VALUE;
    *value = pool_value[index];
    return PM_SUCCESS;
}
pmStatus pmPoolFail(pmStatus status, int count)
{
    fail_status = status;
    fail_count = count;
    return PM_SUCCESS;
}
