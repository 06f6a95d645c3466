/* loader: {abi_major}: a library whose enum values change at each major version (as ROCm 6 renumbered
   hipMemoryType); the bindings of these 3.1 headers must not drive a 4.x library. */
#ifndef ABI_MAJOR_H
#define ABI_MAJOR_H

#define AM_VERSION_MAJOR 3
#define AM_VERSION_MINOR 1

typedef enum { AM_SUCCESS = 0, AM_ERROR_INVALID_VALUE = 1 } amStatus;
/* 4.0 inserts amMemoryTypeUnregistered = 0 before these */
typedef enum { amMemoryTypeHost = 0, amMemoryTypeDevice = 1 } amMemoryType;

/* the library's version: major * 1000 + minor * 10 + patch */
amStatus amRuntimeGetVersion(int *version);
amStatus amPointerType(unsigned long long ptr, amMemoryType *type);
amStatus amAdd(int a, int b, int *sum);
#endif
