#include <string.h>
#include "arrays.h"

arrStatus arrSum(const int *values, int count, long long *total)
{
    long long t = 0;
    for (int i = 0; i < count; i++) t += values[i];
    *total = t;
    return ARR_SUCCESS;
}
arrStatus arrJoin(int count, const char *const *words, char *out, int outLen)
{
    out[0] = 0;
    for (int i = 0; i < count; i++) {
        if (i) strncat(out, "+", (size_t)outLen - strlen(out) - 1);
        strncat(out, words[i], (size_t)outLen - strlen(out) - 1);
    }
    return ARR_SUCCESS;
}
arrStatus arrSumTerminated(const long long *values, long long *total)
{
    if (!values) return ARR_ERROR_INVALID_VALUE;
    *total = 0;
    for (; *values; values++) *total += *values;
    return ARR_SUCCESS;
}
arrStatus arrCountNames(const char *const *names, int *count, int *longest)
{
    *count = *longest = 0;
    for (; names[*count]; ++*count)
        if ((int)strlen(names[*count]) > *longest) *longest = (int)strlen(names[*count]);
    return ARR_SUCCESS;
}
