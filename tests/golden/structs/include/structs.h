/* Structs: a union of an anonymous struct and an array inside, a char array sized by a macro; one filled as
   an out-parameter, one passed in by pointer, and new_struct. */
#ifndef STRUCTS_H
#define STRUCTS_H
#include <stddef.h>

#define ST_MAX_LABEL (16 * 2)
typedef enum { ST_SUCCESS = 0, ST_ERROR_INVALID_VALUE = 1 } stStatus;
typedef unsigned long long stPtr;

typedef struct st_desc_st {
    unsigned int kind;
    union {
        struct { stPtr base; size_t bytes; } linear;
        int reserved[4];
    } res;
    char label[ST_MAX_LABEL];
} stDesc;

typedef struct { int x, y; } stPoint;

/* kind 7, res.linear = {ptr, 4096}, label "linear" */
stStatus stDescribe(stDesc *desc, stPtr ptr);
/* x * y; INVALID_VALUE for NULL */
stStatus stArea(const stPoint *p, long long *area);
#endif
