/* A recording stand-in for libcublas: the symbols tests/cublas/gemm.yaml binds, with cuBLAS's prototypes (typedefs
 * of our own: no cuBLAS header), recording what each call received instead of computing anything.  Addresses are
 * recorded, never dereferenced (they are device addresses), except alpha and beta: host pointers, read as cuBLAS
 * reads them in CUBLAS_POINTER_MODE_HOST.  Built by tests/test_cublas.py. */
#include <stdint.h>
#include <stdlib.h>

typedef int status_t;      /* cublasStatus_t: 0 success, 7 invalid value */
typedef int operation_t;   /* cublasOperation_t */
typedef int data_type_t;   /* cudaDataType */

typedef struct {
    char function[16];
    uintptr_t handle, stream, A, B, C;
    int transa, transb, m, n, k, lda, ldb, ldc, atype, btype, ctype, compute, algo;
    double alpha, beta;
    long calls;
} record_t;

static record_t last;
record_t *recorder_last(void) { return &last; }

static void named(const char *name)
{
    int i = 0;
    for (; name[i] && i < 15; i++) last.function[i] = name[i];
    last.function[i] = 0;
    last.calls++;
}

status_t cublasCreate_v2(void **handle)
{
    named("create");
    *handle = malloc(8);
    last.handle = (uintptr_t)*handle;
    return *handle ? 0 : 3;
}
status_t cublasDestroy_v2(void *handle) { named("destroy"); last.handle = (uintptr_t)handle; free(handle); return 0; }
status_t cublasGetVersion_v2(void *handle, int *version)
{
    (void)handle;
    named("version");
    *version = 130501;
    return 0;
}
status_t cublasSetStream_v2(void *handle, void *stream)
{
    named("setstream");
    last.handle = (uintptr_t)handle;
    last.stream = (uintptr_t)stream;
    return handle ? 0 : 1;
}

static status_t gemm(const char *name, void *handle, operation_t ta, operation_t tb, int m, int n, int k,
                     const void *A, int lda, const void *B, int ldb, void *C, int ldc)
{
    named(name);
    last.handle = (uintptr_t)handle;
    last.transa = ta; last.transb = tb; last.m = m; last.n = n; last.k = k;
    last.A = (uintptr_t)A; last.B = (uintptr_t)B; last.C = (uintptr_t)C;
    last.lda = lda; last.ldb = ldb; last.ldc = ldc;
    if (handle == NULL) return 1;
    if (m < 0 || n < 0 || k < 0 || lda < (ta == 0 ? m : k) || ldc < m) return 7;
    return 0;
}

status_t cublasSgemm_v2(void *handle, operation_t ta, operation_t tb, int m, int n, int k, const float *alpha,
                        const float *A, int lda, const float *B, int ldb, const float *beta, float *C, int ldc)
{
    last.alpha = *alpha; last.beta = *beta;
    return gemm("sgemm", handle, ta, tb, m, n, k, A, lda, B, ldb, C, ldc);
}
status_t cublasDgemm_v2(void *handle, operation_t ta, operation_t tb, int m, int n, int k, const double *alpha,
                        const double *A, int lda, const double *B, int ldb, const double *beta, double *C, int ldc)
{
    last.alpha = *alpha; last.beta = *beta;
    return gemm("dgemm", handle, ta, tb, m, n, k, A, lda, B, ldb, C, ldc);
}
status_t cublasGemmEx(void *handle, operation_t ta, operation_t tb, int m, int n, int k, const void *alpha,
                      const void *A, data_type_t atype, int lda, const void *B, data_type_t btype, int ldb,
                      const void *beta, void *C, data_type_t ctype, int ldc, int compute, int algo)
{
    last.alpha = *(const float *)alpha; last.beta = *(const float *)beta;  /* CUBLAS_COMPUTE_32F: float scalars */
    last.atype = atype; last.btype = btype; last.ctype = ctype; last.compute = compute; last.algo = algo;
    return gemm("gemmex", handle, ta, tb, m, n, k, A, lda, B, ldb, C, ldc);
}
