#include <stdio.h>
#include <string.h>
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

struct golden_ctx_st { unsigned int flags; char label[32]; void *user; };
static struct golden_ctx_st ctxs[64];
static goldenCtx current = 0;

static goldenCtx new_ctx(unsigned int flags)  /* one per flags value: the same handle each time (comparable) */
{
    goldenCtx c = &ctxs[flags % 64];
    memset(c, 0, sizeof *c);
    c->flags = flags;
    current = c;
    return c;
}
goldenStatus goldenCtxCreate(goldenCtx *ctx, unsigned int flags)
{
    if (flags > 7) return GOLDEN_ERROR_INVALID_VALUE;
    *ctx = new_ctx(flags);
    return GOLDEN_SUCCESS;
}
goldenStatus goldenCtxGetFlags(goldenCtx ctx, unsigned int *flags)
{
    if (!ctx) return GOLDEN_ERROR_INVALID_VALUE;
    *flags = ctx->flags;
    return GOLDEN_SUCCESS;
}
static struct golden_ctx_st pair[2];
goldenStatus goldenCtxPair(goldenCtx *first, goldenCtx *second) { *first = &pair[0]; *second = &pair[1]; return GOLDEN_SUCCESS; }
goldenStatus goldenCtxSwap(goldenCtx *ctx)
{
    if (*ctx == &pair[0]) *ctx = &pair[1];
    else if (*ctx == &pair[1] || *ctx == 0) *ctx = &pair[0];
    else return GOLDEN_ERROR_INVALID_VALUE;
    return GOLDEN_SUCCESS;
}
goldenCtx goldenCtxOpen(unsigned int flags, goldenStatus *errcode_ret)
{
    if (flags > 7) { *errcode_ret = flags == 99 ? GOLDEN_ERROR_UNKNOWN : GOLDEN_ERROR_INVALID_VALUE; return 0; }
    *errcode_ret = GOLDEN_SUCCESS;
    return new_ctx(flags);
}
goldenCtx goldenCtxCurrent(void) { return current; }
goldenStatus goldenCtxSetLabel(goldenCtx ctx, const char *label)
{
    if (!ctx) return GOLDEN_ERROR_INVALID_VALUE;
    snprintf(ctx->label, sizeof ctx->label, "%s", label ? label : "");
    return GOLDEN_SUCCESS;
}
const char *goldenCtxLabel(goldenCtx ctx) { return ctx ? ctx->label : 0; }
goldenStatus goldenCtxNotify(goldenCtx ctx, goldenCallback cb, void *user)
{
    if (!ctx) return GOLDEN_ERROR_INVALID_VALUE;
    ctx->user = user;
    if (cb) cb(user, (int)ctx->flags);
    return GOLDEN_SUCCESS;
}
goldenStatus goldenCtxUser(goldenCtx ctx, void **user)
{
    if (!ctx) return GOLDEN_ERROR_INVALID_VALUE;
    *user = ctx->user;
    return GOLDEN_SUCCESS;
}
void goldenCtxReset(goldenCtx ctx) { if (ctx) { ctx->flags = 0; ctx->label[0] = 0; } }
goldenStatus goldenGetDesc(goldenDesc *desc, goldenCtx ctx)
{
    if (!ctx) return GOLDEN_ERROR_INVALID_VALUE;
    desc->width = (int)ctx->flags;
    desc->height = 2 * (int)ctx->flags;
    strcpy(desc->tag, "desc");
    return GOLDEN_SUCCESS;
}
goldenStatus goldenDescArea(goldenDesc desc, long long *area) { *area = (long long)desc.width * desc.height; return GOLDEN_SUCCESS; }
goldenStatus goldenDescCheck(const goldenDesc *desc) { return !desc || desc->width < 0 ? GOLDEN_ERROR_INVALID_VALUE : GOLDEN_SUCCESS; }
goldenStatus goldenDescGrow(goldenDesc *desc, int by) { desc->width += by; desc->height += by; return GOLDEN_SUCCESS; }
goldenDesc goldenMakeDesc(int width, int height)
{
    goldenDesc d;
    memset(&d, 0, sizeof d);
    d.width = width;
    d.height = height;
    strcpy(d.tag, "made");
    return d;
}
goldenStatus goldenBump(int *value, int by) { *value += by; return GOLDEN_SUCCESS; }
goldenStatus goldenSumInts(const int *values, unsigned int count, long long *sum)
{
    unsigned int i;
    if (!values && count) return GOLDEN_ERROR_INVALID_VALUE;
    *sum = 0;
    for (i = 0; i < count; i++) *sum += values[i];
    return GOLDEN_SUCCESS;
}
goldenStatus goldenDot(unsigned int n, const double *a, const double *b, double *dot)
{
    unsigned int i;
    if (n && (!a || !b)) return GOLDEN_ERROR_INVALID_VALUE;
    *dot = 0;
    for (i = 0; i < n; i++) *dot += a[i] * b[i];
    return GOLDEN_SUCCESS;
}
goldenStatus goldenSumFlags(const goldenCtx *list, int n, unsigned int *total)
{
    int i;
    *total = 0;
    for (i = 0; i < n; i++) {
        if (!list[i]) return GOLDEN_ERROR_INVALID_VALUE;
        *total += list[i]->flags;
    }
    return GOLDEN_SUCCESS;
}
goldenStatus goldenJoin(const char *const *parts, int n, char *out, int len)
{
    int i;
    size_t used = 0;
    out[0] = 0;
    for (i = 0; i < n; i++) {
        if (!parts[i]) return GOLDEN_ERROR_INVALID_VALUE;
        used += (size_t)snprintf(out + used, used < (size_t)len ? (size_t)len - used : 0, "%s%s", i ? "," : "", parts[i]);
        if (used >= (size_t)len) return GOLDEN_ERROR_OUT_OF_MEMORY;
    }
    return GOLDEN_SUCCESS;
}
goldenStatus goldenCountTerminated(const long long *values, int *count)
{
    if (!values) return GOLDEN_ERROR_INVALID_VALUE;
    for (*count = 0; values[*count] != 0; (*count)++) {}
    return GOLDEN_SUCCESS;
}
goldenStatus goldenLogSize(goldenCtx ctx, size_t *size)
{
    if (!ctx) return GOLDEN_ERROR_INVALID_VALUE;
    *size = strlen("log of ") + strlen(ctx->label) + 1;
    return GOLDEN_SUCCESS;
}
goldenStatus goldenLog(goldenCtx ctx, char *log)
{
    if (!ctx) return GOLDEN_ERROR_INVALID_VALUE;
    sprintf(log, "log of %s", ctx->label);
    return GOLDEN_SUCCESS;
}
goldenStatus goldenBlobSize(goldenCtx ctx, size_t *size)
{
    if (!ctx) return GOLDEN_ERROR_INVALID_VALUE;
    *size = ctx->flags + 3;
    return GOLDEN_SUCCESS;
}
goldenStatus goldenBlob(goldenCtx ctx, char *blob)
{
    unsigned int i;
    if (!ctx) return GOLDEN_ERROR_INVALID_VALUE;
    for (i = 0; i < ctx->flags + 3; i++) blob[i] = (char)i;
    return GOLDEN_SUCCESS;
}
goldenStatus goldenBuild(goldenCtx ctx, const char *source)
{
    if (!ctx || !source) return GOLDEN_ERROR_INVALID_VALUE;
    if (strstr(source, "error")) {
        snprintf(ctx->label, sizeof ctx->label, "%s", source);
        return GOLDEN_ERROR_COMPILE;
    }
    return GOLDEN_SUCCESS;
}
goldenStatus goldenFillBytes(void *dst, int value, size_t n) { if (!dst) return GOLDEN_ERROR_INVALID_VALUE; memset(dst, value, n); return GOLDEN_SUCCESS; }
