#include <stdint.h>
#include <string.h>
#include "kernel_launch.h"

static unsigned int param_size[16];
static unsigned long long last_launch[12];
static unsigned long long last_param[16];

klStatus klLaunch(klFunction f, unsigned int gridX, unsigned int gridY, unsigned int gridZ,
                  unsigned int blockX, unsigned int blockY, unsigned int blockZ, unsigned int sharedBytes,
                  klStream stream, void **params, void **extra)
{
    unsigned long long v[11] = {(unsigned long long)(uintptr_t)f, gridX, gridY, gridZ, blockX, blockY, blockZ,
                                sharedBytes, (unsigned long long)(uintptr_t)stream, params == 0, extra == 0};
    memcpy(last_launch, v, sizeof v);
    last_launch[11]++;
    for (int i = 0; i < 16; i++) {
        last_param[i] = 0;
        if (params != 0 && param_size[i] > 0)
            memcpy(&last_param[i], params[i], param_size[i]); /* little-endian hosts */
    }
    return blockX * blockY * blockZ > 1024 ? KL_ERROR_INVALID_VALUE : KL_SUCCESS;
}
klStatus klLaunchParamSize(int index, unsigned int size)
{
    if (index < 0 || index >= 16 || size > 8) return KL_ERROR_INVALID_VALUE;
    param_size[index] = size;
    return KL_SUCCESS;
}
klStatus klLastLaunchValue(int index, unsigned long long *value)
{
    if (index < 0 || index >= 12) return KL_ERROR_INVALID_VALUE;
    *value = last_launch[index];
    return KL_SUCCESS;
}
klStatus klLastLaunchParam(int index, unsigned long long *value)
{
    if (index < 0 || index >= 16) return KL_ERROR_INVALID_VALUE;
    *value = last_param[index];
    return KL_SUCCESS;
}
