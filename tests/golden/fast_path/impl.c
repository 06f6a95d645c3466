#include <stdio.h>
#include "fast_path.h"

static int calls = 0;
static unsigned long long values[16];

goldenStatus goldenInit(unsigned int flags) { calls++; return flags > 7 ? GOLDEN_ERROR_INVALID_VALUE : GOLDEN_SUCCESS; }
goldenStatus goldenGetVersion(int *major, int *minor) { calls++; *major = 2; *minor = 1; return GOLDEN_SUCCESS; }
goldenStatus goldenAlloc_v2(goldenPtr *ptr, size_t bytes)
{
    calls++;
    if (bytes > (1u << 30)) return GOLDEN_ERROR_OUT_OF_MEMORY;
    *ptr = 0x1000 + bytes;
    return GOLDEN_SUCCESS;
}
goldenStatus goldenGetName(char *name, int len, int index)
{
    calls++;
    if (index < 0) return GOLDEN_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "golden-device-%d", index);
    return GOLDEN_SUCCESS;
}
goldenStatus goldenGetErrorName(goldenStatus status, const char **name)
{
    switch (status) {
    case GOLDEN_SUCCESS: *name = "GOLDEN_SUCCESS"; return GOLDEN_SUCCESS;
    case GOLDEN_ERROR_INVALID_VALUE: *name = "GOLDEN_ERROR_INVALID_VALUE"; return GOLDEN_SUCCESS;
    case GOLDEN_ERROR_COMPILE: *name = "GOLDEN_ERROR_COMPILE"; return GOLDEN_SUCCESS;
    default: *name = 0; return GOLDEN_ERROR_INVALID_VALUE;
    }
}
goldenStatus goldenSetValue(int index, unsigned int value)
{
    if (index < 0 || index >= 16 || value > 8) return GOLDEN_ERROR_INVALID_VALUE;
    values[index] = value;
    return GOLDEN_SUCCESS;
}
goldenStatus goldenGetValue(int index, unsigned long long *value)
{
    if (index < 0 || index >= 16) return GOLDEN_ERROR_INVALID_VALUE;
    *value = values[index];
    return GOLDEN_SUCCESS;
}
goldenStatus goldenFail(goldenStatus status, int count) { return count > 0 ? status : GOLDEN_SUCCESS; }
const char *goldenStatusString(goldenStatus status) { return status == GOLDEN_SUCCESS ? "no error" : "some error"; }
int goldenCalls(void) { return calls; }
double goldenScale(double x, float factor) { return x * factor; }
