/* A small header exercising the C features both front-ends must agree on.
 * Parsed by tests/test_frontends.py with each front-end; the results must be equal. */
#ifndef FRONTEND_FEATURES_H
#define FRONTEND_FEATURES_H

#include <stddef.h>
#include <stdint.h>

#define FF_VERSION 1203
#define FF_NAME "features"
#define FF_FLOAT 1.5f
#define FF_NAME_LEN (8 * 2)
#define FF_QUOTIENT (-7 / 2)   /* C truncates toward zero: -3, not -4 */
#define FF_REMAINDER (-7 % 2)  /* the sign of the dividend: -1 */
#define FF_REMAINDER_B (7 % -2)
/* C's integer types: unsigned wraparound, conversions, promotions (checked against gcc too) */
#define FF_ALL_ONES (~0u)
#define FF_MINUS_ONE_U (-1u)
#define FF_WRAPS (0xFFFFFFFF + 1)
#define FF_TOP_BIT (1u << 31)
#define FF_TOP_BIT_LL (1ull << 63)
#define FF_BYTE ((unsigned char)-1)
#define FF_NARROW ((short)70000)
#define FF_SIGNED_CMP (-1 < 0u)
#define FF_HEX_NEG (-0x80000000)
#define FF_LONG_NEG (-2147483648)
#define FF_ULL_MAX (~0ull)
#define FF_MIXED_FLOAT (3 / 2.0)
#define FF_CHAR_PLUS ('A' + 1u)
#define FF_BOOL_CAST ((_Bool)256)
#define FF_STDINT_CAST ((uint8_t)300)
#define FF_PAIR(a, b) ((a) + (b))
#define FF_API(api) api
#define FF_DEPRECATED __attribute__((deprecated))
#define FF_TWICE(x) FF_PAIR(x, x)
#define FF_REDEFINED 1
#undef FF_REDEFINED
#define FF_REDEFINED 2
#define ff_open ff_open_v2
#define ff_close FF_API(ff_close_v2)
#define FF_CONTINUED(a, b) \
{                          \
    a, b                   \
}

/* an unnamed typedef enum, with shifts, negatives and references */
typedef enum {
    FF_OK = 0,
    FF_ERR_A = -1,
    FF_ERR_B = FF_ERR_A - 1,
    FF_NEXT,
    FF_SHIFT = 1 << 4,
    FF_HIGH = 1u << 31,
    FF_COMBO = FF_SHIFT | (FF_NEXT & 0xff),
    FF_NOT = ~0x0f,
    FF_CAST = (int)0x7fffffff,
    FF_DIV = -7 / 2,
    FF_MOD = -7 % 2,
    FF_TERN = FF_OK ? 10 : 20,
    FF_CHAR = 'A'
} ffResult;

/* a named enum used through a typedef */
typedef enum ffFlags_enum {
    FF_FLAG_NONE = 0x0,
    FF_FLAG_A = 0x1,
    FF_FLAG_B = FF_FLAG_A << 1,
    FF_FLAG_ALL = FF_FLAG_A | FF_FLAG_B,
    FF_FLAG_BIG = 0x80000000
} ffFlags;

/* an unnamed top-level enum */
enum {
    FF_ANON_ONE = 1,
    FF_ANON_TWO
};

enum ffColor { FF_RED, FF_GREEN = FF_RED + 5, FF_BLUE };

typedef struct ffCtx_st *ffContext;         /* opaque through a pointer only */
typedef struct ffStream_st *ffStream;
struct ffStream_st;                            /* forward declaration */
typedef uint64_t ffDeviceptr;
typedef const char *ffString;
typedef unsigned ffUnsigned;
typedef signed ffSigned;
typedef long unsigned int ffLongUnsigned;
typedef long long int ffLongLong;
typedef unsigned long long ffULL;
typedef short int ffShort;
typedef signed char ffSChar;
typedef long double ffLongDouble;
typedef _Bool ffBool;
typedef size_t ffSize;
typedef wchar_t ffWchar;
typedef uintptr_t ffUintptr;
typedef int32_t ffInt32;

typedef void (*ffCallback)(void *userData, ffResult status, const char *message);
typedef int ffHandler(int, ...);
typedef void (*ffNoProto)();
typedef void (*ffConstCb)(const int a, char *const b, const char *c);
typedef const int ffConstInt;
typedef int ffVec3[3];
typedef const ffVec3 ffConstVec3;

struct ffOuter_st {
    unsigned int flags;
    struct ffInner_st {          /* a named struct defined inside another */
        int x, y;
    } inner;
    union {                      /* a C11 anonymous member */
        int asInt;
        float asFloat;
        struct {                 /* nested anonymous struct inside it */
            unsigned short lo;
            unsigned short hi;
        };
    };
    struct {                     /* an unnamed struct type with a field name */
        int a;
        union {
            long l;
            double d;
        } u;
    } named;
    unsigned int bitA : 1;
    unsigned int bitB : 3;
    unsigned int : 0;
    int bitC : FF_NAME_LEN - 12;
    const char *const name;
    const volatile int *volatile cv;
    char label[FF_NAME_LEN];
    int grid[2][FF_PAIR(1, 2)];
    char pad[16 - sizeof(ffFlags)];
    char pad2[24 - sizeof(void *) - sizeof(struct ffInner_st)];
    ffCallback callback;
    void (*handler)(int code, const struct ffOuter_st *self);
    struct ffOuter_st *next;
    struct ffStream_st *stream;
    enum ffColor color;
    const ffContext ctx;
    unsigned char data[];
};

typedef struct ffOuter_st ffOuter;
typedef struct {
    int count;
    ffOuter *items;
} ffList;

typedef union ffValue_u {
    int64_t i;
    double f;
    void *p;
} ffValue;

struct ffStream_st {
    int id;
};

ffResult ffInit(unsigned int flags);
ffResult ffVoid(void);
ffResult ffNoArgs();
ffResult ffGetString(ffResult error, const char **pStr);
ffResult ffPrintf(const char *fmt, ...);
ffResult ffSetCallback(ffCallback cb, void (*raw)(void *, int), void *userData);
ffResult ffUnnamed(int, const char *, ffContext *);
ffResult ffConst(const int x, int *const p, const ffOuter *const q);
ffResult ffArray(int values[4], const char names[][8]);
ffResult ffFunctionParam(int callback(int));
FF_DEPRECATED ffResult ffOld(ffStream stream);
void *ffMalloc(size_t bytes);
const char *ffName(void);
ffResult ffFlagsOf(enum ffFlags_enum flags, ffFlags *out);
ffResult ffUnionArg(union ffValue_u value, struct ffUnknown_st *unknown);
ffResult ffGetProc(ffResult (**proc)(int, ...));
ffResult ffInit(unsigned int flags);   /* a duplicate declaration */
ffHandler ffDeclaredByTypedef;        /* a function declared through a function typedef */

/* sizeof a struct with bit-fields (SysV layout: 24 bytes) */
struct ffBits { unsigned a : 3; unsigned : 0; unsigned char b : 7; unsigned char c : 3; long d : 40; int e; };
typedef char ffBitsSize[sizeof(struct ffBits)];

ffResult ff_open_v2(int device);
ffResult ff_close_v2(int device);

#endif
