#include <string.h>
#include "structs.h"

stStatus stDescribe(stDesc *desc, stPtr ptr)
{
    memset(desc, 0, sizeof *desc);
    desc->kind = 7;
    desc->res.linear.base = ptr;
    desc->res.linear.bytes = 4096;
    strcpy(desc->label, "linear");
    return ST_SUCCESS;
}
stStatus stArea(const stPoint *p, long long *area)
{
    if (!p) return ST_ERROR_INVALID_VALUE;
    *area = (long long)p->x * p->y;
    return ST_SUCCESS;
}
