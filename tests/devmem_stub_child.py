"""Run by test_devmem_stub.py in a subprocess whose libcuda.so.1 is bench/stub_cuda (STUB_CUDA_RECORD=1):
allocates and frees DEVICE memory through the CUDA backend's Device.alloc / alloc_unchecked and checks what
the driver received (sizes, addresses, the context current at each call) and the behaviour of the memory
(double frees, exported views, release on drop, slices, DLPack, threads, close), for the compiled device
memory (_fast._devmem_allocator, _DeviceMemory; API mode) and for the Python path.  Prints "ok <n>"
(allocations checked)."""

from __future__ import annotations

import ctypes
import gc
import sys
import threading
import weakref
from typing import Any, cast

import ironaccelerator as ia
from ironaccelerator import Allocation, Error, ErrorKind, MemoryKind
from ironaccelerator.backends.cuda import _backend as cb
from ironaccelerator.backends.cuda import driver as drv

STUB = sys.argv[1]


class Memory(ctypes.Structure):  # stub_memory_t in bench/stub_cuda/stub_cuda.c
    _fields_ = [("alloc_bytes", ctypes.c_size_t), ("alloc_ptr", ctypes.c_ulonglong), ("free_ptr", ctypes.c_ulonglong),
                ("alloc_ctx", ctypes.c_void_p), ("free_ctx", ctypes.c_void_p), ("fail_alloc_count", ctypes.c_int),
                ("fail_free_count", ctypes.c_int), ("fail_alloc_status", ctypes.c_int),
                ("fail_free_status", ctypes.c_int)]


class Counters(ctypes.Structure):  # stub_counters_t
    _fields_ = [(n, ctypes.c_ulonglong) for n in ("launches", "allocs", "frees", "unknown_calls", "ctx_retains",
                                                  "ctx_releases", "ctx_used_after_release")]


lib = ctypes.CDLL(STUB)
lib.stub_cuda_memory.restype = ctypes.POINTER(Memory)
lib.stub_cuda_counters.restype = ctypes.POINTER(Counters)
seen = lib.stub_cuda_memory().contents
counts = lib.stub_cuda_counters().contents
R = drv.CUresult

backend = ia.BackendRegistry.default().get(ia.BackendKind.CUDA)
dev = cast(cb.CudaDevice, backend.open(0))
api = cb.CudaBackend.vendor_api()
compiled = api.device_memory
assert (compiled is not None) is (api.modules["driver"].BINDING_MODE == "api"), compiled
ctx = int(api.ffi.cast("uintptr_t", dev.context))
checked = 0


def alloc(n: int, unchecked: bool = False) -> Any:
    """dev.alloc (or alloc_unchecked), checking what the driver was asked for and what the allocation says."""
    global checked
    before = counts.allocs
    a = dev.alloc_unchecked(n) if unchecked else dev.alloc(n)
    assert counts.allocs == before + 1, (counts.allocs, before)
    assert (seen.alloc_bytes, seen.alloc_ctx) == (n, ctx), "allocated with the device's context current"
    assert isinstance(a, cb.CudaAllocation) and isinstance(a, Allocation)
    assert (a.ptr, a.handle, a.dptr, a.nbytes, a.kind) == (seen.alloc_ptr,) * 3 + (n, MemoryKind.DEVICE)
    assert a.device is dev and not a.freed and a._tracked is (not unchecked)
    checked += 1
    return a


def freed_by_driver(a: Any, frees: int) -> None:
    assert counts.frees == frees + 1 and seen.free_ptr == a.ptr, (counts.frees, frees, seen.free_ptr, a.ptr)
    assert seen.free_ctx == ctx, "freed with the device's context current"


def expect(kind: ErrorKind, fn: Any, *args: Any) -> Error:
    try:
        fn(*args)
    except Error as e:
        assert e.kind is kind, (e, kind)
        return e
    raise AssertionError(f"{fn} did not raise {kind}")


def unbind() -> None:
    """The Python path: the methods, not the compiled allocators."""
    for allocator in dev._allocators:
        allocator._shut()
    del dev.alloc, dev.alloc_unchecked
    dev._allocators = ()


for mode in ("compiled", "python"):
    if mode == "python":
        unbind()
    elif compiled is None:
        continue
    else:
        assert type(dev.alloc).__name__ == "_DeviceAllocator", type(dev.alloc)
        assert type(alloc(8)).__mro__[1] is compiled[1], type(alloc(8)).__mro__

    # free: once; the second is INVALID_HANDLE (raised by free, returned by free_unchecked), not the driver's
    for unchecked in (False, True):
        a = alloc(4096, unchecked)
        frees = counts.frees
        assert (a.free_unchecked() if unchecked else a.free()) is None and a.freed
        freed_by_driver(a, frees)
        expect(ErrorKind.INVALID_HANDLE, a.free)
        e = a.free_unchecked()
        assert isinstance(e, Error) and e.kind is ErrorKind.INVALID_HANDLE and "already freed" in str(e), e
        assert counts.frees == frees + 1

    # freeing on a thread where no context is current: the device's is made current first
    a = alloc(64)
    frees = counts.frees
    t = threading.Thread(target=a.free)
    t.start()
    t.join()
    assert a.freed
    freed_by_driver(a, frees)
    # allocating there too: the device made current (the allocator's slow path, then its own)
    got: list[Any] = []
    t = threading.Thread(target=lambda: got.append(dev.alloc(32)))
    t.start()
    t.join()
    assert seen.alloc_ctx == ctx and got[0].nbytes == 32 and got[0].kind is MemoryKind.DEVICE
    got[0].free()

    # an exported typed view makes free refuse (INVALID_VALUE), until the view is gone
    a = alloc(64)
    v = a.view("float32", (4,))
    frees = counts.frees
    expect(ErrorKind.INVALID_VALUE, a.free)
    e = a.free_unchecked()
    assert isinstance(e, Error) and e.kind is ErrorKind.INVALID_VALUE and "view" in str(e), e
    assert not a.freed and counts.frees == frees
    del v
    gc.collect()
    a.free()
    freed_by_driver(a, frees)

    # dropped: Device.alloc's memory is released, alloc_unchecked's is not (as before); _drop replaces it
    a = alloc(64)
    ptr, frees = a.ptr, counts.frees
    del a
    assert counts.frees == frees + 1 and seen.free_ptr == ptr
    a = alloc(64, unchecked=True)
    del a
    assert counts.frees == frees + 1
    dropped: list[int] = []
    a = alloc(64)
    a._track(lambda: dropped.append(1))
    del a
    assert dropped == [1] and counts.frees == frees + 1
    a = alloc(64)
    fin = a._finalizer
    assert fin is not None and fin.alive
    fin.detach()
    del a
    assert counts.frees == frees + 1
    a = alloc(64)
    a.cycle = a  # a cycle through the instance dict: the collector releases it too
    r = weakref.ref(a)
    del a
    gc.collect()
    assert r() is None and counts.frees == frees + 2

    # slices, DLPack, the CUDA array interface, the context manager
    a = alloc(256)
    s = a[16:48]
    assert (s.ptr, s.dptr, s.nbytes, s.kind) == (a.ptr + 16, a.ptr + 16, 32, MemoryKind.DEVICE)
    assert a.__dlpack_device__() == (2, 0) and a.__cuda_array_interface__["data"] == (a.ptr, False)
    capsule = a.__dlpack__()
    assert type(capsule).__name__ == "PyCapsule"
    expect(ErrorKind.INVALID_VALUE, s.free)
    expect(ErrorKind.INVALID_VALUE, a.host_view)  # device memory is not host-visible
    del capsule
    gc.collect()
    with a:
        pass
    assert a.freed and s.freed
    expect(ErrorKind.INVALID_HANDLE, lambda: a[0:8])
    assert "freed" in repr(a) and repr(a).startswith("<CudaAllocation 256 bytes DEVICE")

    # the driver's failures: the allocation's error names the size; a free's is the driver's
    seen.fail_alloc_count, seen.fail_alloc_status = 1, R.CUDA_ERROR_OUT_OF_MEMORY
    e = expect(ErrorKind.OUT_OF_MEMORY, dev.alloc, 1 << 20)
    assert "1048576 bytes of DEVICE memory requested" in str(e), e
    seen.fail_alloc_count = 1
    e = dev.alloc_unchecked(1 << 20)
    assert isinstance(e, Error) and e.kind is ErrorKind.OUT_OF_MEMORY, e
    a = alloc(64)
    seen.fail_free_count, seen.fail_free_status = 1, R.CUDA_ERROR_INVALID_VALUE
    expect(ErrorKind.INVALID_VALUE, a.free)
    assert a.freed
    a = alloc(64, unchecked=True)
    seen.fail_free_count = 1
    e = a.free_unchecked()
    assert isinstance(e, Error) and e.kind is ErrorKind.INVALID_VALUE, e

    # what the checks refuse, as before
    for bad in (True, 1.5, "8"):
        try:
            dev.alloc(bad)  # type: ignore[arg-type]
        except TypeError as t_err:
            assert "nbytes" in str(t_err)
        else:
            raise AssertionError(f"alloc({bad!r}) did not raise")
    expect(ErrorKind.INVALID_VALUE, dev.alloc, -1)
    e = dev.alloc_unchecked(0)
    assert isinstance(e, Error) and e.kind is ErrorKind.INVALID_VALUE, e
    e = dev.alloc_unchecked(2**70)
    assert isinstance(e, Error) and e.kind is ErrorKind.INVALID_VALUE, e
    h = dev.alloc(64, MemoryKind.HOST_PINNED)  # other kinds: the methods
    assert h.kind is MemoryKind.HOST_PINNED and len(h.host_view()) == 64
    h.free()
    a = dev.alloc(nbytes=64, kind=MemoryKind.DEVICE)
    assert a.kind is MemoryKind.DEVICE and a.nbytes == 64
    a.free()

# closed: both allocators refuse (also one a caller kept), and the memory frees still
if compiled is not None:
    dev2 = cast(cb.CudaDevice, backend.open(0))
    kept, kept_unchecked = dev2.alloc, dev2.alloc_unchecked
    a = dev2.alloc(64)
    dev2.close()
    expect(ErrorKind.INVALID_HANDLE, dev2.alloc, 64)
    expect(ErrorKind.INVALID_HANDLE, kept, 64)
    e = kept_unchecked(64)
    assert isinstance(e, Error) and e.kind is ErrorKind.INVALID_HANDLE, e
    a.free()
    # the allocators hold the device weakly: a dropped device is collected, its memory keeps the context
    dev3 = cast(cb.CudaDevice, backend.open(0))
    a = dev3.alloc(64)
    r3 = weakref.ref(dev3)
    del dev3
    gc.collect()
    assert r3() is not None  # (the memory holds its device)
    a.free()
    del a
    gc.collect()
    assert r3() is None
    # no reference leaks over many allocations, frees, double frees and failures
    dev.close()
    dev = cast(cb.CudaDevice, backend.open(0))
    gc.collect()
    before = sys.getrefcount(dev), sys.getrefcount(dev._key)
    for i in range(300):
        a = dev.alloc(64)
        a.free()
        a.free_unchecked()
        a = dev.alloc_unchecked(64)
        seen.fail_alloc_count, seen.fail_alloc_status = i % 2, R.CUDA_ERROR_OUT_OF_MEMORY
        dev.alloc_unchecked(64)
    a = None
    gc.collect()
    assert (sys.getrefcount(dev), sys.getrefcount(dev._key)) == before, before
assert counts.ctx_used_after_release == 0, counts.ctx_used_after_release
print(f"ok {checked}")
