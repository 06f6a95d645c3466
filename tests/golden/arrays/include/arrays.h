/* Input arrays: with a count parameter (len: count), and ending with a zero element (len: null-terminated). */
#ifndef ARRAYS_H
#define ARRAYS_H

typedef enum { ARR_SUCCESS = 0, ARR_ERROR_INVALID_VALUE = 1 } arrStatus;

arrStatus arrSum(const int *values, int count, long long *total);
/* the words joined with '+' into out (outLen bytes) */
arrStatus arrJoin(int count, const char *const *words, char *out, int outLen);
/* values up to their terminating 0; INVALID_VALUE for a NULL array */
arrStatus arrSumTerminated(const long long *values, long long *total);
/* how many names before the terminating NULL, and the length of the longest */
arrStatus arrCountNames(const char *const *names, int *count, int *longest);
#endif
