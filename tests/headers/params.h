/* Focused header for the binder's parameter-annotation checks (tests/test_bind.py): a string output sized
   by a query, array/length pairs, out-parameters, and near misses of each. */
#ifndef PARAMS_H
#define PARAMS_H
#include <stddef.h>

typedef enum { PARAMS_SUCCESS = 0, PARAMS_ERROR = 1 } paramsResult;
typedef struct params_st *paramsHandle;
typedef struct params_pair { int a; int b; } paramsPair;

paramsResult paramsGetLog(paramsHandle handle, char *log);
paramsResult paramsGetLogSize(paramsHandle handle, size_t *size);
paramsResult paramsGetLogSizes(paramsHandle handle, size_t *size, size_t *other);
paramsResult paramsGetLogSizeOf(paramsHandle program, size_t *size);
paramsResult paramsGetLogName(paramsHandle handle, char **name);
paramsResult paramsGetName(paramsHandle handle, char *name, size_t capacity);
paramsResult paramsSum(const int *values, size_t count, int *sum);
paramsResult paramsSumTerminated(const int *values, int *sum);
paramsResult paramsCreate(paramsHandle *handle);
paramsResult paramsSetName(paramsHandle handle, const char *name);
paramsResult paramsSetPair(const paramsPair *pair);
paramsResult paramsGetPair(paramsPair *pair);

#endif
