#include <stdint.h>
#include <stdlib.h>
#include "out_params.h"

struct out_ctx_st { int flags; };
static void *last_user = 0;

outStatus outGetVersion(int *major, int *minor) { *major = 2; *minor = 1; return OUT_SUCCESS; }
outStatus outCtxCreate(outCtx *ctx, int flags)
{
    *ctx = calloc(1, sizeof **ctx);
    (*ctx)->flags = flags;
    return OUT_SUCCESS;
}
outStatus outCtxFlags(outCtx ctx, int *flags) { *flags = ctx->flags; return OUT_SUCCESS; }
outStatus outAlloc(outPtr *ptr, size_t bytes) { *ptr = 0x1000 + bytes; return OUT_SUCCESS; }
outStatus outBump(int *counter, int by) { *counter += by; return OUT_SUCCESS; }
outStatus outSetCallback(outCallback cb, void *userData)
{
    last_user = userData;
    if (cb) cb(userData, OUT_SUCCESS);
    return OUT_SUCCESS;
}
outStatus outLastUserData(outPtr *userData) { *userData = (uintptr_t)last_user; return OUT_SUCCESS; }
outStatus outGetLimits(outCtx ctx, outLimits *limits)
{
    if (limits->stype != OUT_STRUCTURE_TYPE_LIMITS && limits->stype != OUT_STRUCTURE_TYPE_LIMITS_2)
        return OUT_ERROR_INVALID_VALUE;
    limits->maxThreads = 64 + ctx->flags;
    if (limits->stype == OUT_STRUCTURE_TYPE_LIMITS_2) limits->maxBytes = 4096;
    return OUT_SUCCESS;
}
