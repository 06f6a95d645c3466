/* C identifiers that are legal C but dangerous as Python names in a generated module.
 * Bound by tests/test_bind.py through a tiny "test.hostile" spec: each must be rejected with
 * a located error, never rendered into Python.  The tests find each name's line in this file. */
#ifndef HOSTILE_H
#define HOSTILE_H

typedef enum hostileResult_enum {
    HOSTILE_SUCCESS = 0,
    HOSTILE_ERROR = 1
} hostileResult;

/* enum constants: a dunder, a keyword, a name enum.IntEnum refuses, one that shadows a module name */
typedef enum hostileMode_enum {
    __class__ = 0,
    None = 1,
    mro = 2,
    STRUCTS = 3,
    HOSTILE_MODE_OK = 4
} hostileMode;

/* an enum whose typedef name is a Python keyword */
typedef enum { HOSTILE_K = 0 } lambda;

/* object-like macros become module constants */
#define HOSTILE_VERSION 3
#define True 1
#define Error 2
#define _HOSTILE_PRIVATE 4

/* functions: dunders, the generated module's own names, private names, keywords, used builtins */
hostileResult __builtins__(void);
hostileResult ffi(void);
hostileResult has(int x);
hostileResult _lib(void);
hostileResult import(int x);
hostileResult isinstance(const char *s);
hostileResult hostileFine(int x);
hostileResult hostileDunderParam(int __import__);

/* an enum tag (a separate namespace in C) that a function of the same name would redefine */
enum hostileTwice { HOSTILE_TWICE_A = 0 };
hostileResult hostileTwice(void);

#endif
