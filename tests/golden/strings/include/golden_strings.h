/* Strings: in, out into a caller-sized buffer, out sized by a query function, returned, and a compile log. */
#ifndef GOLDEN_STRINGS_H
#define GOLDEN_STRINGS_H
#include <stddef.h>

typedef enum { STR_SUCCESS = 0, STR_ERROR_INVALID_VALUE = 1, STR_ERROR_COMPILE = 4 } strStatus;
typedef struct str_program_st *strProgram;

/* writes "device-<index>" into name (len bytes); INVALID_VALUE for index < 0 */
strStatus strGetName(char *name, int len, int index);
strStatus strProgramCreate(strProgram *prog);
/* COMPILE (and a log naming the source) when source contains "error" */
strStatus strBuild(strProgram prog, const char *source);
strStatus strGetLogSize(strProgram prog, size_t *size);
strStatus strGetLog(strProgram prog, char *log);
const char *strStatusString(strStatus status);
#endif
