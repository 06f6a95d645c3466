/* Legal C parameter names that are Python keywords or would shadow what a generated wrapper
 * uses: they must be renamed with a trailing '_', never rejected (tests/test_bind.py). */
#ifndef PYKEYWORDS_H
#define PYKEYWORDS_H

typedef enum kwResult_enum {
    KW_SUCCESS = 0,
    KW_ERROR = 1
} kwResult;

kwResult kwFrom(int lambda, int from);
kwResult kwPass(int pass, int *yield);
kwResult kwStr(const char *str, int isinstance);
kwResult kwLen(const int *items, int n, int len);
kwResult kwPrivate(int _lib, int _r, int ffi);
kwResult kwPlain(int bytes, int len, int str, int type, int match);
kwResult kwShadow(int new, int *lib, int *error, int *T0, int *keep, int *r);

#endif
