/* The checked fast path: in API mode every function of every shape below gets a compiled C wrapper
   (tests/test_fast_path.py compares them with the Python wrappers they replace): numbers and strings, handles
   in and out, structs by address, by value, out, in-out and returned, arrays with their lengths, nullable
   pointers, function pointers, an errors.out_param status, strings sized by a query, a compile log. */
#ifndef FAST_PATH_H
#define FAST_PATH_H
#include <stddef.h>

typedef enum golden_status_enum {
    GOLDEN_SUCCESS = 0,
    GOLDEN_ERROR_INVALID_VALUE = 1,
    GOLDEN_ERROR_OUT_OF_MEMORY = 2,
    GOLDEN_ERROR_COMPILE = 4,
    GOLDEN_ERROR_UNKNOWN = 999
} goldenStatus;
typedef enum { GOLDEN_MODE_FAST = 1, GOLDEN_MODE_SAFE = 4 } goldenMode;
typedef unsigned long long goldenPtr;

#define goldenAlloc goldenAlloc_v2

goldenStatus goldenInit(unsigned int flags);                   /* INVALID_VALUE for flags > 7 */
goldenStatus goldenGetVersion(int *major, int *minor);         /* 2, 1 */
goldenStatus goldenAlloc(goldenPtr *ptr, size_t bytes);        /* 0x1000 + bytes; OUT_OF_MEMORY above 1 GiB */
goldenStatus goldenGetName(char *name, int len, int index);    /* "golden-device-<index>" */
goldenStatus goldenGetErrorName(goldenStatus status, const char **name);
goldenStatus goldenNotExported(int x);                         /* declared, not in the library */
goldenStatus goldenSetValue(int index, unsigned int value);    /* slots 0-15, values up to 8 */
goldenStatus goldenGetValue(int index, unsigned long long *value);
goldenStatus goldenFail(goldenStatus status, int count);       /* returns status when count > 0 */
const char *goldenStatusString(goldenStatus status);
int goldenCalls(void);                                         /* how many calls so far */
double goldenScale(double x, float factor);

typedef struct golden_ctx_st *goldenCtx;  /* an opaque handle */
typedef struct golden_desc_st { int width; int height; char tag[8]; } goldenDesc;
typedef void (*goldenCallback)(void *user, int value);

goldenStatus goldenCtxCreate(goldenCtx *ctx, unsigned int flags);   /* a handle out; INVALID_VALUE for flags > 7 */
goldenStatus goldenCtxGetFlags(goldenCtx ctx, unsigned int *flags); /* a handle in; INVALID_VALUE for NULL */
goldenStatus goldenCtxPair(goldenCtx *first, goldenCtx *second);    /* two handles out */
goldenStatus goldenCtxSwap(goldenCtx *ctx);                         /* in-out: the pair's other one (NULL: the first) */
goldenCtx goldenCtxOpen(unsigned int flags, goldenStatus *errcode_ret); /* the status through errcode_ret */
goldenCtx goldenCtxCurrent(void);                                   /* the last one created (NULL before) */
goldenStatus goldenCtxSetLabel(goldenCtx ctx, const char *label);   /* NULL clears it */
const char *goldenCtxLabel(goldenCtx ctx);
goldenStatus goldenCtxNotify(goldenCtx ctx, goldenCallback cb, void *user); /* calls cb(user, flags) unless NULL */
goldenStatus goldenCtxUser(goldenCtx ctx, void **user);             /* the last user pointer notified */
void goldenCtxReset(goldenCtx ctx);                                 /* flags 0, no label */
goldenStatus goldenGetDesc(goldenDesc *desc, goldenCtx ctx);        /* width flags, height 2 * flags, tag "desc" */
goldenStatus goldenDescArea(goldenDesc desc, long long *area);      /* by value */
goldenStatus goldenDescCheck(const goldenDesc *desc);               /* INVALID_VALUE for a negative width or NULL */
goldenStatus goldenDescGrow(goldenDesc *desc, int by);              /* in-out: width and height += by */
goldenDesc goldenMakeDesc(int width, int height);                   /* a struct by value, tag "made" */
goldenStatus goldenBump(int *value, int by);                        /* in-out: value += by */
goldenStatus goldenSumInts(const int *values, unsigned int count, long long *sum);
goldenStatus goldenDot(unsigned int n, const double *a, const double *b, double *dot); /* two arrays, one length */
goldenStatus goldenSumFlags(const goldenCtx *ctxs, int n, unsigned int *total);         /* INVALID_VALUE for a NULL one */
goldenStatus goldenJoin(const char *const *parts, int n, char *out, int len);           /* parts joined with ',' */
goldenStatus goldenCountTerminated(const long long *values, int *count);               /* items before the 0 */
goldenStatus goldenLogSize(goldenCtx ctx, size_t *size);            /* the log's size with its NUL */
goldenStatus goldenLog(goldenCtx ctx, char *log);                   /* "log of <label>" */
goldenStatus goldenBlobSize(goldenCtx ctx, size_t *size);           /* flags + 3 */
goldenStatus goldenBlob(goldenCtx ctx, char *blob);                 /* bytes 0, 1, 2, ...: NULs included */
goldenStatus goldenBuild(goldenCtx ctx, const char *source);        /* COMPILE (label: the source) if it has "error" */
goldenStatus goldenFillBytes(void *dst, int value, size_t n);       /* memset */
void goldenMissing(const int *values, unsigned int n);              /* declared, not in the library */
#endif
