/* A status-handle library: every call returns a uint64 whose low 16 bits are the code and whose upper bits
   carry something else (here a tag, 0xC0DE in bits 48-63, on every failure smDivide reports). */
#include <stdint.h>

typedef uint64_t SmStatus;

#define SM_TAG (0xC0DEull << 48)

SmStatus smCheck(uint64_t status) { return status; }

SmStatus smDivide(int32_t a, int32_t b, int32_t *quotient)
{
    if (b == 0)
        return SM_TAG | 1004;
    *quotient = a / b;
    return 0;
}

typedef struct { uint32_t major; uint32_t minor; } SmVersion;

SmStatus smGetVersion(uint32_t component, SmVersion *version)
{
    if (component != 0)
        return SM_TAG | 1000;
    version->major = 2;
    version->minor = 40;
    return 0;
}

/* the message of a status, read from its code (the low 16 bits) */
SmStatus smGetMessage(SmStatus status, const char **message)
{
    switch (status & 0xffff) {
    case 1000: *message = "SM_ERROR_UNSUPPORTED: not supported here"; return 0;
    case 1002: *message = "SM_ERROR_MEM_ALLOC: out of memory"; return 0;
    case 1004: *message = "SM_ERROR_INVALID_ARGUMENT: invalid argument"; return 0;
    case 5000: *message = "busy"; return 0;
    default: return SM_TAG | 1004;
    }
}
