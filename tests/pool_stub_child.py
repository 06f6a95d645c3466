"""Run by test_pool_stub.py in a subprocess whose libcuda.so.1 is bench/stub_cuda (STUB_CUDA_RECORD=1):
allocates and frees through the CUDA backend's stream-ordered pool and checks what the driver received
(sizes, pool, stream, addresses, the context current at each call) and the errors the backend gives, for
the compiled pool allocation (_fast._pool_alloc, _PoolMemory) and for the Python one.  Prints "ok <n>"
(allocations checked)."""

from __future__ import annotations

import ctypes
import gc
import sys
import threading
from typing import Any, Callable, cast

import ironaccelerator as ia
from ironaccelerator import Allocation, Error, ErrorKind
from ironaccelerator.backends.cuda import _backend as cb
from ironaccelerator.backends.cuda import driver as drv

STUB = sys.argv[1]


class Pool(ctypes.Structure):  # stub_pool_t in bench/stub_cuda/stub_cuda.c
    _fields_ = [("allocs", ctypes.c_ulonglong), ("frees", ctypes.c_ulonglong), ("trims", ctypes.c_ulonglong),
                ("alloc_bytes", ctypes.c_size_t), ("alloc_pool", ctypes.c_void_p), ("alloc_stream", ctypes.c_void_p),
                ("free_stream", ctypes.c_void_p), ("alloc_ptr", ctypes.c_ulonglong), ("free_ptr", ctypes.c_ulonglong),
                ("alloc_ctx", ctypes.c_void_p), ("free_ctx", ctypes.c_void_p), ("fail_alloc_count", ctypes.c_int),
                ("fail_free_count", ctypes.c_int), ("fail_alloc_status", ctypes.c_int),
                ("fail_free_status", ctypes.c_int), ("waits", ctypes.c_ulonglong),
                ("waits_at_free", ctypes.c_ulonglong), ("wait_stream", ctypes.c_void_p)]


get = ctypes.CDLL(STUB).stub_cuda_pool
get.restype = ctypes.POINTER(Pool)
seen = get().contents
busy_of = ctypes.CDLL(STUB).stub_cuda_busy  # the next busy[0] stream/event queries answer NOT_READY
busy_of.restype = ctypes.POINTER(ctypes.c_int)
busy = busy_of()
R = drv.CUresult

dev = cast(cb.CudaDevice, ia.BackendRegistry.default().get(ia.BackendKind.CUDA).open(0))
stream = dev.create_stream()
pool = cast(cb.CudaStreamOrderedPool, dev.memory_pool())  # the stub supports stream-ordered allocation
api = cb.CudaBackend.vendor_api()
compiled = pool._compiled
assert (compiled is not None) is (api.modules["driver"].BINDING_MODE == "api"), compiled
checked = 0


def addr(handle: Any) -> int:
    return int(api.ffi.cast("uintptr_t", handle))


def alloc(n: int, s: Any = None, calls: int = 1) -> Any:
    """pool.alloc, checking what the driver was asked for and what the allocation says."""
    global checked
    before = seen.allocs
    a = pool.alloc(n, s) if s is not None else pool.alloc(n)
    st = s if s is not None else pool.stream
    assert seen.allocs == before + calls, (seen.allocs, before)
    assert (seen.alloc_bytes, seen.alloc_pool, seen.alloc_stream) == (n, addr(pool.handle), addr(st.handle))
    assert seen.alloc_ctx == addr(dev.context), "allocated with the device's context current"
    assert isinstance(a, cb.CudaPoolAllocation) and isinstance(a, Allocation)
    assert (a.ptr, a.handle, a.dptr, a.nbytes, a.kind) == (seen.alloc_ptr, seen.alloc_ptr, seen.alloc_ptr, n,
                                                           ia.MemoryKind.DEVICE)
    assert a.stream == st.handle and addr(a.stream) == addr(st.handle)
    assert a.device is dev and a.pool is pool and not a.freed
    checked += 1
    return a


def freed_by_driver(a: Any, s: Any) -> None:
    assert (seen.free_ptr, seen.free_stream) == (a.ptr, addr(s.handle)), (seen.free_ptr, a.ptr)
    assert seen.free_ctx == addr(dev.context), "freed with the device's context current"


def expect(kind: ErrorKind, fn: Any, *args: Any) -> Error:
    try:
        fn(*args)
    except Error as e:
        assert e.kind is kind, (e, kind)
        return e
    raise AssertionError(f"{fn} did not raise {kind}")


for mode in ("compiled", "python"):
    pool._compiled = compiled if mode == "compiled" else None
    if mode == "compiled" and compiled is None:
        continue
    # an exported typed view makes free refuse (INVALID_VALUE), until the view is gone, on a stream or not
    for s in (stream, None):
        a = alloc(64, s)
        v = a.view("float32", (4,))
        frees = seen.frees
        expect(ErrorKind.INVALID_VALUE, a.free)
        e = a.free_unchecked()
        assert isinstance(e, Error) and e.kind is ErrorKind.INVALID_VALUE and "view" in str(e), (mode, e)
        assert not a.freed and seen.frees == frees, mode
        del v
        gc.collect()
        a.free()
        assert seen.frees == frees + 1 and a.freed
    # alloc + free on a stream, and on the pool's own stream
    for n in (1, 4096, 3 << 20):
        a = alloc(n, stream)
        frees = seen.frees
        a.free()
        assert seen.frees == frees + 1 and a.freed
        freed_by_driver(a, stream)
        b = alloc(n)
        waits = seen.waits
        others = [s for s in dev._live_streams() if s is not pool.stream]
        busy[0] = len(others)  # every other stream still has work queued (cuStreamQuery: NOT_READY)
        assert b.free_unchecked() is None
        freed_by_driver(b, pool.stream)
        # issue 23 item 1: allocated with no stream, it may be used on any stream: its free is ordered after the
        # work of every other stream of the device (the pool's stream waits for an event of each, then frees)
        assert busy[0] == 0, busy[0]
        assert others and seen.waits_at_free == waits + len(others), (seen.waits_at_free, waits, len(others))
        assert seen.wait_stream == addr(pool.stream.handle)
        b = alloc(n)
        waits = seen.waits
        busy[0] = len(others)
        b.free()
        assert seen.waits_at_free == waits + len(others) and seen.wait_stream == addr(pool.stream.handle)
        freed_by_driver(b, pool.stream)
        # issue 27: a stream whose work is complete has nothing the free could overtake, so it costs no event
        b = alloc(n)
        waits = seen.waits
        b.free()
        assert seen.waits == waits, (seen.waits, waits)
        freed_by_driver(b, pool.stream)
    # freeing twice: an error, and the driver is not called again
    frees = seen.frees
    e = expect(ErrorKind.INVALID_HANDLE, a.free)
    assert "already freed" in str(e) and e.function == "Allocation.free", e
    e2 = a.free_unchecked()
    assert isinstance(e2, Error) and e2.kind is ErrorKind.INVALID_HANDLE and e2.function == "Allocation.free_unchecked"
    assert seen.frees == frees
    # dropped unfreed: freed in stream order; a release given to _track runs instead; detached: not freed
    c = alloc(100, stream)
    ptr = c.ptr
    del c
    gc.collect()
    assert seen.frees == frees + 1 and seen.free_ptr == ptr
    calls: list[int] = []
    d = alloc(200, stream)
    d._track(lambda: calls.append(1))
    del d
    gc.collect()
    assert calls == [1] and seen.frees == frees + 1
    f = alloc(300, stream)
    fin = f._finalizer
    assert fin is not None and fin.alive
    info = fin.detach()
    assert info is not None and info[0] is f and not fin.alive
    del f, info
    gc.collect()
    assert seen.frees == frees + 1
    g = alloc(400, stream)
    fin = g._finalizer
    assert fin is not None
    fin()  # releases now, counts as freed
    assert g.freed and seen.frees == frees + 2 and seen.free_ptr == g.ptr
    # with-statement frees
    with alloc(500, stream) as h:
        pass
    assert h.freed and seen.free_ptr == h.ptr
    # the driver's failures: out of memory once -> trimmed and tried again; twice -> OUT_OF_MEMORY
    trims = seen.trims
    seen.fail_alloc_status, seen.fail_alloc_count = R.CUDA_ERROR_OUT_OF_MEMORY, 1
    k = alloc(600, stream, calls=2)
    assert seen.trims == trims + 1 and seen.fail_alloc_count == 0
    k.free()
    seen.fail_alloc_count = 2
    allocs = seen.allocs
    e = expect(ErrorKind.OUT_OF_MEMORY, pool.alloc, 700, stream)
    assert seen.allocs == allocs + 2 and seen.trims == trims + 2 and "cuMemAllocFromPoolAsync" in str(e), e
    seen.fail_alloc_status, seen.fail_alloc_count = R.CUDA_ERROR_INVALID_VALUE, 1
    e = expect(ErrorKind.INVALID_VALUE, pool.alloc, 700, stream)
    assert seen.trims == trims + 2, "only out-of-memory is retried"
    # a failed free: free raises the driver's error, free_unchecked returns it; either way it counts as freed
    seen.fail_free_status, seen.fail_free_count = R.CUDA_ERROR_ILLEGAL_ADDRESS, 1
    m = alloc(800, stream)
    e = expect(ErrorKind.LAUNCH_FAILED, m.free)  # ILLEGAL_ADDRESS: a kernel faulted
    assert "cuMemFreeAsync" in str(e) and m.freed, e
    seen.fail_free_count = 1
    m = alloc(800, stream)
    e3 = m.free_unchecked()
    assert isinstance(e3, Error) and "cuMemFreeAsync" in str(e3) and m.freed, e3
    # refused before the driver is called
    allocs = seen.allocs
    for bad in (0, -1, 2**64):  # 2**64: no size_t
        expect(ErrorKind.INVALID_VALUE, pool.alloc, bad, stream)
    for wrong in (1.5, True, "8"):  # not integers (check_size): TypeError naming the parameter
        try:
            pool.alloc(wrong, stream)  # type: ignore[arg-type]
        except TypeError as e:
            assert "nbytes must be an integer" in str(e), e
        else:
            raise AssertionError(f"pool.alloc({wrong!r}) was accepted")
    expect(ErrorKind.INVALID_VALUE, pool.alloc, 16, object())
    assert seen.allocs == allocs
    # alloc_unchecked: the same allocation without the checks; the driver's failures come back as values
    allocs = seen.allocs
    u = pool.alloc_unchecked(1000, stream)
    assert isinstance(u, cb.CudaPoolAllocation) and type(u) is type(alloc(8, stream)) and u.nbytes == 1000
    assert seen.allocs == allocs + 2 and u.ptr != 0 and u.free_unchecked() is None
    freed_by_driver(u, stream)
    u = pool.alloc_unchecked(1000)  # on the pool's stream, waited for
    assert isinstance(u, cb.CudaPoolAllocation) and addr(u.stream) == addr(pool.stream.handle)
    u.free()
    seen.fail_alloc_status, seen.fail_alloc_count = R.CUDA_ERROR_OUT_OF_MEMORY, 2
    got = pool.alloc_unchecked(700, stream)
    assert isinstance(got, Error) and got.kind is ErrorKind.OUT_OF_MEMORY, got
    seen.fail_alloc_status, seen.fail_alloc_count = R.CUDA_ERROR_INVALID_VALUE, 1
    got = pool.alloc_unchecked(700, stream)
    assert isinstance(got, Error) and got.kind is ErrorKind.INVALID_VALUE, got
    got = pool.alloc_unchecked(2**64, stream)
    assert isinstance(got, Error) and got.kind is ErrorKind.INVALID_VALUE, got
    # freed on another thread, where no context is current yet: the device's is made current first
    n_ = alloc(900, stream)
    done: list[object] = []
    t = threading.Thread(target=lambda: done.append(n_.free()))
    t.start()
    t.join()
    assert done == [None] and n_.freed
    freed_by_driver(n_, stream)
    # threads allocating and freeing at once (the record is not thread-safe: only the counts are checked)
    problems: list[str] = []
    allocs, frees = seen.allocs, seen.frees

    def worker() -> None:
        try:
            for i in range(500):
                x = pool.alloc(64 + i, stream)
                if i % 3 == 0:
                    del x  # dropped: freed on drop
                else:
                    x.free()
        except Exception as exc:  # noqa: BLE001
            problems.append(repr(exc))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    gc.collect()
    assert not problems, problems[:3]
    assert (seen.allocs - allocs, seen.frees - frees) == (2000, 2000), (seen.allocs - allocs, seen.frees - frees)

# the compiled allocation holds the pool: no reference leaks over many allocations
if compiled is not None:
    pool._compiled = compiled
    gc.collect()
    refs = sys.getrefcount(pool), sys.getrefcount(pool._device_key)
    for _ in range(1000):
        pool.alloc(64, stream).free()
        x = pool.alloc(64, stream)
        del x
    gc.collect()
    assert (sys.getrefcount(pool), sys.getrefcount(pool._device_key)) == refs, refs
    # the type cannot be made but by the pool, and _pool_alloc checks its arguments
    fast = api.modules["driver"]._fast
    pool_alloc, memory_type = compiled
    bad_calls: tuple[Callable[[], object], ...] = (
        lambda: type(pool.alloc(8, stream))(),  # type: ignore[call-arg]  # wrong on purpose: TypeError
        lambda: pool_alloc(int, pool, 0, 8, 0, None), lambda: pool_alloc(memory_type, pool, 0, -8, 0, None),
        lambda: pool_alloc(memory_type))
    for bad_call in bad_calls:
        try:
            bad_call()
        except (TypeError, OverflowError):
            pass
        else:
            raise AssertionError("accepted")
    gc.collect()
print("ok", checked)
