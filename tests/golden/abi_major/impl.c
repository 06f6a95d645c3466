#include "abi_major.h"

/* -DGOLDEN_OTHER_MAJOR: the library of the next major (4.0.2), whose amMemoryType starts at 1 */
#ifdef GOLDEN_OTHER_MAJOR
#define LIB_VERSION 4002
#define FIRST_TYPE 1
#else
#define LIB_VERSION (AM_VERSION_MAJOR * 1000 + AM_VERSION_MINOR * 10 + 7)
#define FIRST_TYPE 0
#endif

amStatus amRuntimeGetVersion(int *version)
{
    if (version == 0)
        return AM_ERROR_INVALID_VALUE;
    *version = LIB_VERSION;
    return AM_SUCCESS;
}

amStatus amPointerType(unsigned long long ptr, amMemoryType *type)
{
    *type = (amMemoryType)(FIRST_TYPE + (ptr >= 0x1000));
    return AM_SUCCESS;
}

amStatus amAdd(int a, int b, int *sum)
{
    *sum = a + b;
    return AM_SUCCESS;
}
