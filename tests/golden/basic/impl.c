/* A real implementation of golden.h, built into libiagolden.so by the golden test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "golden.h"

struct golden_ctx_st { int mode; int queries; char log[128]; };
static int initialised = 0;
static const void *last_user = 0;

goldenStatus goldenInit(unsigned int flags) { initialised = 1; return flags > 7 ? GOLDEN_ERROR_INVALID_VALUE : GOLDEN_SUCCESS; }
goldenStatus goldenGetVersion(int *major, int *minor) { *major = 2; *minor = 1; return GOLDEN_SUCCESS; }
goldenStatus goldenCtxCreate(goldenCtx *ctx, goldenMode mode)
{
    struct golden_ctx_st *c = calloc(1, sizeof *c);
    if (!c) return GOLDEN_ERROR_OUT_OF_MEMORY;
    c->mode = mode;
    *ctx = c;
    return GOLDEN_SUCCESS;
}
goldenStatus goldenCtxDestroy(goldenCtx ctx) { free(ctx); return GOLDEN_SUCCESS; }
goldenStatus goldenAlloc_v2(goldenPtr *ptr, size_t bytes)
{
    if (bytes > (1u << 30)) return GOLDEN_ERROR_OUT_OF_MEMORY;
    *ptr = 0x1000 + bytes;
    return GOLDEN_SUCCESS;
}
static int copies = 0;
goldenStatus goldenCopy_v2(goldenPtr dst, const void *src, size_t bytes) { (void)dst; (void)src; copies += (int)bytes; return GOLDEN_SUCCESS; }
goldenStatus goldenCopy_v2_ptds(goldenPtr dst, const void *src, size_t bytes) { (void)dst; (void)src; (void)bytes; return GOLDEN_ERROR_UNKNOWN; }
goldenStatus goldenQuery(goldenCtx ctx) { return (ctx->queries++ % 2) ? GOLDEN_SUCCESS : GOLDEN_ERROR_NOT_READY; }
goldenStatus goldenGetName(char *name, int len, int index)
{
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
goldenStatus goldenDescribe(goldenDesc *desc, goldenPtr ptr)
{
    memset(desc, 0, sizeof *desc);
    desc->kind = 7;
    desc->res.linear.base = ptr;
    desc->res.linear.bytes = 4096;
    strcpy(desc->label, "linear");
    return GOLDEN_SUCCESS;
}
goldenStatus goldenSum(const int *values, int count, long long *total)
{
    long long t = 0;
    for (int i = 0; i < count; i++) t += values[i];
    *total = t;
    return GOLDEN_SUCCESS;
}
goldenStatus goldenJoin(int count, const char *const *words, char *out, int outLen)
{
    out[0] = 0;
    for (int i = 0; i < count; i++) {
        if (i) strncat(out, "+", (size_t)outLen - strlen(out) - 1);
        strncat(out, words[i], (size_t)outLen - strlen(out) - 1);
    }
    return GOLDEN_SUCCESS;
}
static char build_log[128] = "";
goldenStatus goldenGetLogSize(goldenCtx ctx, size_t *size) { (void)ctx; *size = strlen(build_log) + 1; return GOLDEN_SUCCESS; }
goldenStatus goldenGetLog(goldenCtx ctx, char *log) { (void)ctx; strcpy(log, build_log); return GOLDEN_SUCCESS; }
goldenStatus goldenBuild(goldenCtx ctx, const char *source)
{
    (void)ctx;
    if (strstr(source, "error")) { snprintf(build_log, sizeof build_log, "line 1: unexpected '%s'", source); return GOLDEN_ERROR_COMPILE; }
    strcpy(build_log, "ok");
    return GOLDEN_SUCCESS;
}
goldenStatus goldenSetCallback(goldenCallback cb, void *userData) { last_user = userData; if (cb) cb(userData, GOLDEN_SUCCESS); return GOLDEN_SUCCESS; }
const char *goldenStatusString(goldenStatus status) { return status == GOLDEN_SUCCESS ? "no error" : "some error"; }
double goldenScale(double x, float factor) { return x * factor; }

static unsigned int param_size[16];
static unsigned long long last_launch[12];
static unsigned long long last_param[16];
goldenStatus goldenLaunch(goldenFunction f, unsigned int gridX, unsigned int gridY, unsigned int gridZ,
                          unsigned int blockX, unsigned int blockY, unsigned int blockZ, unsigned int sharedBytes,
                          goldenStream stream, void **params, void **extra)
{
    unsigned long long v[11] = {(unsigned long long)(uintptr_t)f, gridX, gridY, gridZ, blockX, blockY, blockZ,
                                sharedBytes, (unsigned long long)(uintptr_t)stream, params == 0, extra == 0};
    memcpy(last_launch, v, sizeof v);
    last_launch[11]++;
    for (int i = 0; i < 16; i++) {
        last_param[i] = 0;
        if (params != 0 && param_size[i] > 0)
            memcpy(&last_param[i], params[i], param_size[i]);  /* little-endian hosts */
    }
    return blockX * blockY * blockZ > 1024 ? GOLDEN_ERROR_INVALID_VALUE : GOLDEN_SUCCESS;
}
goldenStatus goldenLaunchParamSize(int index, unsigned int size)
{
    if (index < 0 || index >= 16 || size > 8) return GOLDEN_ERROR_INVALID_VALUE;
    param_size[index] = size;
    return GOLDEN_SUCCESS;
}
goldenStatus goldenLastLaunchValue(int index, unsigned long long *value)
{
    if (index < 0 || index >= 12) return GOLDEN_ERROR_INVALID_VALUE;
    *value = last_launch[index];
    return GOLDEN_SUCCESS;
}
goldenStatus goldenLastLaunchParam(int index, unsigned long long *value)
{
    if (index < 0 || index >= 16) return GOLDEN_ERROR_INVALID_VALUE;
    *value = last_param[index];
    return GOLDEN_SUCCESS;
}

static unsigned long long pool_value[7];
static goldenStatus pool_fail_status;
static int pool_fail_count;
goldenStatus goldenPoolAlloc(goldenPtr *ptr, size_t bytes, goldenPool pool, goldenStream stream)
{
    pool_value[0]++;
    pool_value[2] = bytes;
    pool_value[3] = (unsigned long long)(uintptr_t)pool;
    pool_value[4] = (unsigned long long)(uintptr_t)stream;
    if (pool_fail_count > 0) {
        pool_fail_count--;
        return pool_fail_status;
    }
    *ptr = 0x100000 + pool_value[0] * 0x1000;
    return GOLDEN_SUCCESS;
}
goldenStatus goldenPoolFree(goldenPtr ptr, goldenStream stream)
{
    pool_value[1]++;
    pool_value[5] = ptr;
    pool_value[6] = (unsigned long long)(uintptr_t)stream;
    if (pool_fail_count > 0) {
        pool_fail_count--;
        return pool_fail_status;
    }
    return GOLDEN_SUCCESS;
}
goldenStatus goldenPoolValue(int index, unsigned long long *value)
{
    if (index < 0 || index >= 7) return GOLDEN_ERROR_INVALID_VALUE;
    *value = pool_value[index];
    return GOLDEN_SUCCESS;
}
goldenStatus goldenPoolFail(goldenStatus status, int count)
{
    pool_fail_status = status;
    pool_fail_count = count;
    return GOLDEN_SUCCESS;
}

/* The resolver: answers only for the exact (name, version) pairs it implements.  Built without it
   (-DGOLDEN_NO_RESOLVER), the binding must fall back to dlsym for everything. */
static int proc_lookups = 0;
static int proc_refusals = 0;
#ifndef GOLDEN_NO_RESOLVER
static goldenStatus goldenAlloc_via_proc(goldenPtr *ptr, size_t bytes) { *ptr = 0x2000 + bytes; return GOLDEN_SUCCESS; }
goldenStatus goldenGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags, int *status)
{
    *pfn = 0;
    if (status) *status = 0;
    if (strcmp(symbol, "goldenAlloc") == 0 && version == 2010)
        *pfn = (void *)goldenAlloc_via_proc;
    else if (strcmp(symbol, "goldenCopy") == 0 && version == 2000)
        *pfn = (flags & GOLDEN_PROC_PER_THREAD) ? (void *)goldenCopy_v2_ptds : (void *)goldenCopy_v2;
    if (*pfn == 0) {
        proc_refusals++;
        return GOLDEN_ERROR_INVALID_VALUE;
    }
    proc_lookups++;
    return GOLDEN_SUCCESS;
}
#endif
int goldenProcLookups(void) { return proc_lookups; }
int goldenProcRefusals(void) { return proc_refusals; }
