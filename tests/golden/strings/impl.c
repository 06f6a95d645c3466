#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "golden_strings.h"

struct str_program_st { char log[128]; };

strStatus strGetName(char *name, int len, int index)
{
    if (index < 0) return STR_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "device-%d", index);
    return STR_SUCCESS;
}
strStatus strProgramCreate(strProgram *prog)
{
    *prog = calloc(1, sizeof **prog);
    return STR_SUCCESS;
}
strStatus strBuild(strProgram prog, const char *source)
{
    if (strstr(source, "error")) {
        snprintf(prog->log, sizeof prog->log, "line 1: unexpected '%s'", source);
        return STR_ERROR_COMPILE;
    }
    strcpy(prog->log, "ok");
    return STR_SUCCESS;
}
strStatus strGetLogSize(strProgram prog, size_t *size) { *size = strlen(prog->log) + 1; return STR_SUCCESS; }
strStatus strGetLog(strProgram prog, char *log) { strcpy(log, prog->log); return STR_SUCCESS; }
const char *strStatusString(strStatus status) { return status == STR_SUCCESS ? "no error" : "some error"; }
