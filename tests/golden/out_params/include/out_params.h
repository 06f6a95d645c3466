/* Parameter directions: out-parameters returned (one value, several as a tuple, a handle), inout, and a
   non-const pointer that is an input (direction: in, nullable), beside a callback; an out struct whose type tag
   the wrapper sets (fill:), as Level Zero's stype and Vulkan's sType. */
#ifndef OUT_PARAMS_H
#define OUT_PARAMS_H
#include <stddef.h>

typedef enum { OUT_SUCCESS = 0, OUT_ERROR_INVALID_VALUE = 1 } outStatus;
typedef struct out_ctx_st *outCtx;
typedef unsigned long long outPtr;
typedef void (*outCallback)(void *userData, outStatus status);

outStatus outGetVersion(int *major, int *minor);
outStatus outCtxCreate(outCtx *ctx, int flags);
outStatus outCtxFlags(outCtx ctx, int *flags);
outStatus outAlloc(outPtr *ptr, size_t bytes);
/* counter += by */
outStatus outBump(int *counter, int by);
/* calls cb(userData, OUT_SUCCESS) at once when cb is not NULL; outLastUserData: the userData it last got */
outStatus outSetCallback(outCallback cb, void *userData);
outStatus outLastUserData(outPtr *userData);
typedef enum { OUT_STRUCTURE_TYPE_LIMITS = 1, OUT_STRUCTURE_TYPE_LIMITS_2 = 2 } outStructureType;
typedef struct { outStructureType stype; void *pNext; int maxThreads; int maxBytes; } outLimits;
/* fills *limits as its stype says (maxBytes only for OUT_STRUCTURE_TYPE_LIMITS_2); any other: invalid value */
outStatus outGetLimits(outCtx ctx, outLimits *limits);
#endif
