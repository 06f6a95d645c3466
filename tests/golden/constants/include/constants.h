/* #define constants (integer expressions, unsigned, derived from other macros, strings) and enums. */
#ifndef CONSTANTS_H
#define CONSTANTS_H

#define CONST_VERSION 2010
#define CONST_MAX_NAME (32 * 2)
#define CONST_FLAG_A 0x1u
#define CONST_FLAG_B (CONST_FLAG_A << 3)
#define CONST_GREETING "hello"

/* a named enum with a tag, behind a typedef */
typedef enum const_status_enum {
    CONST_SUCCESS = 0,
    CONST_ERROR_INVALID_VALUE = 1,
    CONST_ERROR_NOT_READY = 3
} constStatus;

/* an anonymous enum, one member defined from another */
typedef enum { CONST_MODE_FAST = 1, CONST_MODE_SAFE = CONST_MODE_FAST << 2 } constMode;

/* an enum parameter: returns CONST_ERROR_INVALID_VALUE unless mode is one of constMode */
constStatus constSetMode(constMode mode);
#endif
