#include <stdint.h>
#include "device_memory_create.h"

static unsigned long long dc_value[7];
static dcStatus fail_status;
static int fail_count;

dcMem dcCreateBuffer(dcContext context, dcFlags flags, size_t size, void *host_ptr, dcStatus *errcode_ret)
{
    dc_value[0]++;
    dc_value[2] = size;
    dc_value[4] = (unsigned long long)(uintptr_t)context;
    dc_value[5] = flags;
    dc_value[6] = (unsigned long long)(uintptr_t)host_ptr;
    if (fail_count > 0) {
        fail_count--;
        if (errcode_ret) *errcode_ret = fail_status;
        return NULL;
    }
    if (errcode_ret) *errcode_ret = DC_SUCCESS;
    return (dcMem)(uintptr_t)(0x300000 + dc_value[0] * 0x1000);
}
dcStatus dcReleaseMem(dcMem mem)
{
    dc_value[1]++;
    dc_value[3] = (unsigned long long)(uintptr_t)mem;
    if (fail_count > 0) {
        fail_count--;
        return fail_status;
    }
    return DC_SUCCESS;
}
dcStatus dcValue(int index, unsigned long long *value)
{
    if (index < 0 || index >= 7) return DC_ERROR_INVALID_VALUE;
    *value = dc_value[index];
    return DC_SUCCESS;
}
dcStatus dcFail(dcStatus status, int count)
{
    fail_status = status;
    fail_count = count;
    return DC_SUCCESS;
}
