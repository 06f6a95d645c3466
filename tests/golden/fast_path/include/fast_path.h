/* The checked fast path: functions taking and returning only numbers and strings get compiled C wrappers
   in API mode (tests/test_fast_path.py compares them with the Python wrappers they replace). */
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
#endif
