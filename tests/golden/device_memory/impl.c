#include <stdint.h>
#include "device_memory.h"

static unsigned long long dm_value[4];
static dmStatus fail_status;
static int fail_count;

dmStatus dmAlloc(dmPtr *ptr, size_t bytes)
{
    dm_value[0]++;
    dm_value[2] = bytes;
    if (fail_count > 0) {
        fail_count--;
        return fail_status;
    }
    *ptr = (dmPtr)(uintptr_t)(0x200000 + dm_value[0] * 0x1000);
    return DM_SUCCESS;
}
dmStatus dmFree(dmPtr ptr)
{
    dm_value[1]++;
    dm_value[3] = (unsigned long long)(uintptr_t)ptr;
    if (fail_count > 0) {
        fail_count--;
        return fail_status;
    }
    return DM_SUCCESS;
}
dmStatus dmValue(int index, unsigned long long *value)
{
    if (index < 0 || index >= 4) return DM_ERROR_INVALID_VALUE;
    *value = dm_value[index];
    return DM_SUCCESS;
}
dmStatus dmFail(dmStatus status, int count)
{
    fail_status = status;
    fail_count = count;
    return DM_SUCCESS;
}
