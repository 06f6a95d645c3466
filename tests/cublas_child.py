"""Run by test_cublas.py in a subprocess whose libcuda.so.1 is bench/stub_cuda: the test-only cuBLAS GEMM spec
(tests/cublas/gemm.yaml, generated and built into argv[1]) over tests/cublas/recorder.c (argv[2]), called with the
CUDA backend's real allocations.  Checks that each matrix argument reaches the library as the allocation's device
address (slices and views at their offsets, plain ints as they are), that no host storage is made for C, and that
wrong objects are refused before the call.  Prints "ok <n>" (calls checked)."""

from __future__ import annotations

import ctypes
import importlib
import inspect
import sys
from typing import Any, Callable

import ironaccelerator as ia
import ironaccelerator.backends
from ironaccelerator import Error, ErrorKind

ironaccelerator.backends.__path__.append(sys.argv[1] + "/ironaccelerator/backends")  # the generated cuBLAS package
cb: Any = importlib.import_module("ironaccelerator.backends.cublas.gemm")  # (generated for this run only)

RECORDER = sys.argv[2]
cb.use_library(RECORDER)


_FIELDS: list[tuple[str, Any]] = [("function", ctypes.c_char * 16)]
_FIELDS += [(n, ctypes.c_size_t) for n in ("handle", "stream", "A", "B", "C")]
_FIELDS += [(n, ctypes.c_int) for n in ("transa", "transb", "m", "n", "k", "lda", "ldb", "ldc", "atype", "btype",
                                        "ctype", "compute", "algo")]
_FIELDS += [("alpha", ctypes.c_double), ("beta", ctypes.c_double), ("calls", ctypes.c_long)]


class Record(ctypes.Structure):  # record_t in tests/cublas/recorder.c
    _fields_ = _FIELDS


rec_lib = ctypes.CDLL(RECORDER)  # (the file cb loaded: one copy of its record)
rec_lib.recorder_last.restype = ctypes.POINTER(Record)
rec = rec_lib.recorder_last().contents
checked = 0

dev: Any = ia.BackendRegistry.default().get(ia.BackendKind.CUDA).open(0)
m, n, k = 4, 5, 6
A, B, C = dev.alloc(m * k * 8), dev.alloc(k * n * 8), dev.alloc(m * n * 8)
h = cb.cublasCreate_v2()
assert int(cb.ffi.cast("uintptr_t", h)) == rec.handle != 0
one, zero = cb.ffi.new("float *", 1.5), cb.ffi.new("float *", 0.25)
d_one, d_zero = cb.ffi.new("double *", 2.0), cb.ffi.new("double *", 0.5)


def gemm(a: Any, b: Any, c: Any, fn: Callable[..., Any] = cb.cublasSgemm_v2, scalars: tuple[Any, Any] = (one, zero),
         want: tuple[int, int, int] | None = None, name: bytes = b"sgemm") -> None:
    """One call that must reach the library with ``want`` as the A, B and C it received."""
    global checked
    calls = rec.calls
    assert fn(h, cb.CUBLAS_OP_N, cb.CUBLAS_OP_N, m, n, k, scalars[0], a, m, b, k, scalars[1], c, m) is None
    assert rec.calls == calls + 1 and rec.function == name, (rec.calls, rec.function)
    assert (rec.A, rec.B, rec.C) == want, ((rec.A, rec.B, rec.C), want)
    assert (rec.m, rec.n, rec.k, rec.lda, rec.ldb, rec.ldc) == (m, n, k, m, k, m)
    checked += 1


# allocations: their device addresses
gemm(A, B, C, want=(A.ptr, B.ptr, C.ptr))
assert (rec.alpha, rec.beta) == (1.5, 0.25)  # alpha and beta: host pointers, read by the library
gemm(A, B, C, fn=cb.cublasDgemm_v2, scalars=(d_one, d_zero), want=(A.ptr, B.ptr, C.ptr), name=b"dgemm")
assert (rec.alpha, rec.beta) == (2.0, 0.5)
# slices and views: the allocation's address plus the offset; plain ints: as they are
gemm(A[16:], B[8:72], C, want=(A.ptr + 16, B.ptr + 8, C.ptr))
gemm(A.view("float32", (k, m)), B.view("float32", (n,), offset=12), C.view(ia.DType.F32, (n, m)),
     want=(A.ptr, B.ptr + 12, C.ptr))
gemm(A.ptr, B.ptr + 4, C.ptr, want=(A.ptr, B.ptr + 4, C.ptr))
# a stream-ordered pool's block
P = dev.memory_pool().alloc(m * n * 4)
gemm(A, B, P, want=(A.ptr, B.ptr, P.ptr))
# cublasGemmEx: void * matrices, the same rule line
calls = rec.calls
assert cb.cublasGemmEx(h, cb.CUBLAS_OP_N, cb.CUBLAS_OP_T, m, n, k, one, A, cb.CUDA_R_32F, m, B[4:], cb.CUDA_R_32F,
                       n, zero, C, cb.CUDA_R_32F, m, cb.CUBLAS_COMPUTE_32F, cb.CUBLAS_GEMM_DEFAULT) is None
assert rec.calls == calls + 1 and (rec.A, rec.B, rec.C) == (A.ptr, B.ptr + 4, C.ptr)
assert (rec.atype, rec.compute, rec.algo, rec.transb) == (0, 68, -1, 1)
checked += 1

# C is a parameter the caller passes, not a host float the wrapper allocates and returns
assert "C" in inspect.signature(cb.cublasSgemm_v2).parameters
real_new = cb._new
cb._new = None  # a wrapper that allocated host storage would fail here
try:
    gemm(A, B, C, want=(A.ptr, B.ptr, C.ptr))
finally:
    cb._new = real_new

# the library's own status, raised
e: Error | None = None
try:
    cb.cublasSgemm_v2(h, cb.CUBLAS_OP_N, cb.CUBLAS_OP_N, m, n, k, one, A, m - 1, B, k, zero, C, m)
except Error as x:
    e = x
assert e is not None and e.kind is ErrorKind.INVALID_VALUE and e.code == 7 and e.backend == "CUDA", e

# wrong objects: refused before the call (the library is not called)
freed = dev.alloc(64)
piece = freed[8:]
freed.free()
cases: list[tuple[Any, ErrorKind]] = [(1.5, ErrorKind.INVALID_VALUE), (None, ErrorKind.INVALID_VALUE),
                                      (True, ErrorKind.INVALID_VALUE), (-8, ErrorKind.INVALID_VALUE),
                                      (cb.ffi.new("float[4]"), ErrorKind.INVALID_VALUE),
                                      (bytearray(16), ErrorKind.INVALID_VALUE), (freed, ErrorKind.INVALID_HANDLE),
                                      (piece, ErrorKind.INVALID_HANDLE)]
for bad, kind in cases:
    calls = rec.calls
    try:
        cb.cublasSgemm_v2(h, cb.CUBLAS_OP_N, cb.CUBLAS_OP_N, m, n, k, one, A, m, B, k, zero, bad, m)
    except Error as x:
        assert x.kind is kind and x.function == "cublasSgemm_v2" and "C" in str(x), (bad, x)
    else:
        raise AssertionError(f"{bad!r} was taken")
    assert rec.calls == calls, bad
    checked += 1

# cublasSetStream_v2: a stream's native handle, and NULL (the default stream)
s = dev.create_stream()
assert cb.cublasSetStream_v2(h, cb.ffi.cast("cudaStream_t", s._address)) is None and rec.stream == s._address != 0
assert cb.cublasSetStream_v2(h, cb.ffi.NULL) is None and rec.stream == 0
assert cb.cublasGetVersion_v2(h) == 130501
assert cb.cublasDestroy_v2(h) is None and rec.function == b"destroy"
for mem in (P, A, B, C):
    mem.free()
print("ok", checked)
