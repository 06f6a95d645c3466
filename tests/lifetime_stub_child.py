"""Run by test_lifetime_stub.py in a subprocess whose libcuda.so.1 is bench/stub_cuda: the CUDA backend's
checked copies (sizes), host buffers released on event completion, Device.close(), bad-typed input and
the Errors of the conformance suite's mistakes (built one way: errors.fail).
Usage: lifetime_stub_child.py STUB PART (PART: copy, inflight, close, input, ranges, errors).
Prints "ok <n>" (checks)."""

from __future__ import annotations

import sys
from typing import Any, Callable, cast

import numpy as np

import ironaccelerator as ia
from ironaccelerator import Error, ErrorKind, MemoryKind
from ironaccelerator.backends.cuda import _backend as cb

PART = sys.argv[2]
checked = 0


def raises(kind: type[BaseException], fn: Callable[[], Any], *words: str,
           error_kind: ErrorKind | None = None) -> None:
    global checked
    try:
        fn()
    except kind as e:
        if error_kind is not None:
            assert isinstance(e, Error) and e.kind is error_kind, repr(e)
        for w in words:
            assert w in str(e), (w, str(e))
        checked += 1
        return
    raise AssertionError(f"{fn} did not raise {kind.__name__}")


dev = cast(cb.CudaDevice, ia.BackendRegistry.default().get(ia.BackendKind.CUDA).open(0))
stream = dev.create_stream()

if PART == "copy":
    big, small = dev.alloc(16384), dev.alloc(16)
    raises(Error, lambda: stream.copy(small, big), "16384", "16", error_kind=ErrorKind.INVALID_VALUE)
    raises(Error, lambda: stream.copy(big, small), "16384", "16", error_kind=ErrorKind.INVALID_VALUE)
    stream.copy(small, dev.alloc(16))
    checked += 1
elif PART == "inflight":
    a = dev.alloc(65536)
    for _ in range(50):
        stream.copy_from_host(a, np.zeros(65536, np.uint8))
        ev = stream.record_event()
        ev.synchronize()
        assert len(stream._inflight) == 0, len(stream._inflight)
        checked += 1
    for _ in range(50):
        stream.copy_from_host(a, np.zeros(65536, np.uint8))
        ev = stream.record_event()
        stream.copy_from_host(a, np.zeros(65536, np.uint8))  # after the event: kept
        assert ev.query() is True
        assert len(stream._inflight) == 1, len(stream._inflight)
        stream.synchronize()
        assert len(stream._inflight) == 0
        checked += 1
elif PART == "close":
    a = dev.alloc(64)
    host = np.zeros(64, np.uint8)
    pool = dev.memory_pool()
    dev.close()
    INV = ErrorKind.INVALID_HANDLE
    raises(Error, lambda: dev.alloc(64), "closed", error_kind=INV)
    raises(Error, lambda: dev.create_stream(), "closed", error_kind=INV)
    raises(Error, lambda: dev.load_module(b"\x7fELF" + b"\0" * 60), "closed", error_kind=INV)
    raises(Error, lambda: stream.copy_from_host(a, host), "closed", error_kind=INV)
    raises(Error, lambda: stream.copy_to_host(host, a), "closed", error_kind=INV)
    raises(Error, lambda: stream.copy(a, a), "closed", error_kind=INV)
    raises(Error, lambda: stream.record_event(), "closed", error_kind=INV)
    raises(Error, lambda: pool.alloc(64), "closed", error_kind=INV)
    a.free()  # still frees
    checked += 1
elif PART == "input":
    a = dev.alloc(64)
    raises(TypeError, lambda: dev.alloc(True), "nbytes")
    raises(TypeError, lambda: dev.alloc(1.5), "nbytes")  # type: ignore[arg-type]
    raises(TypeError, lambda: dev.alloc("8"), "nbytes")  # type: ignore[arg-type]
    raises(Error, lambda: dev.alloc(-1), error_kind=ErrorKind.INVALID_VALUE)
    raises(TypeError, lambda: dev.memory_pool().alloc(1.5), "nbytes")  # type: ignore[arg-type]
    raises(TypeError, lambda: dev.memory_pool().alloc(True), "nbytes")
    raises(TypeError, lambda: dev.alloc(8, kind="64"), "kind")  # type: ignore
    assert dev.alloc(cast(int, np.int64(8))).nbytes == 8
    raises(TypeError, lambda: stream.copy_from_host(None, np.zeros(8, np.uint8)), "dst")  # type: ignore
    raises(TypeError, lambda: stream.copy_to_host(np.zeros(8, np.uint8), None), "src")  # type: ignore
    raises(TypeError, lambda: stream.copy(a, None), "src")  # type: ignore
    raises(TypeError, lambda: stream.copy(None, a), "dst")  # type: ignore
    obj = np.empty(8, dtype=object)
    raises((TypeError, Error), lambda: stream.copy_from_host(a, obj), "object")  # type: ignore[arg-type]
    raises((TypeError, Error), lambda: stream.copy_to_host(obj, a), "object")  # type: ignore[arg-type]
elif PART == "ranges":  # offsets, byte counts and fills reach the driver as asked (its last transfer, recorded)
    import ctypes

    class Transfer(ctypes.Structure):
        _fields_ = [("what", ctypes.c_char * 24), ("dst", ctypes.c_ulonglong), ("src", ctypes.c_ulonglong),
                    ("count", ctypes.c_ulonglong), ("value", ctypes.c_ulonglong)]

    last_transfer = ctypes.CDLL(sys.argv[1]).stub_cuda_last_transfer
    last_transfer.restype = ctypes.POINTER(Transfer)

    def last() -> tuple[str, int, int, int, int]:
        t = last_transfer().contents
        return t.what.decode(), t.dst, t.src, t.count, t.value

    a, b = dev.alloc(4096), dev.alloc(4096)
    host = np.zeros(1000, np.uint8)
    hp = host.ctypes.data
    stream.copy_from_host(a, host, 100, dst_offset=64, src_offset=8)
    assert last() == ("htod", a.ptr + 64, hp + 8, 100, 0), last()
    stream.copy_from_host(a, host)  # the whole host buffer, at the start (the fast path)
    assert last() == ("htod", a.ptr, hp, 1000, 0), last()
    stream.copy_to_host(host, a, src_offset=4000, dst_offset=904)  # the host's remaining 96 bytes
    assert last() == ("dtoh", hp + 904, a.ptr + 4000, 96, 0), last()
    stream.copy(b, a, 512, dst_offset=1024, src_offset=2048)
    assert last() == ("dtod", b.ptr + 1024, a.ptr + 2048, 512, 0), last()
    stream.fill(a, 0xAB)
    assert last() == ("memset8", a.ptr, 0, 4096, 0xAB), last()
    stream.fill(a, 0xBEEF, 64, offset=32, width=2)
    assert last() == ("memset16", a.ptr + 32, 0, 32, 0xBEEF), last()
    stream.fill(b, 0xDEADBEEF, offset=4000, width=4)
    assert last() == ("memset32", b.ptr + 4000, 0, 24, 0xDEADBEEF), last()
    checked += 7
    # strided copies: the CUDA_MEMCPY2D / CUDA_MEMCPY3D (_v2 ABI) fields the driver reads
    stream.copy_2d(a, host, 10, 7, src_pitch=33, dst_pitch=50, src_offset=3, dst_offset=(4, 2))
    assert last() == ("2d h>d", a.ptr + 104, hp + 3, 70, 33 << 32 | 50), last()
    stream.copy_2d(host, b[1024:2048], 16, 8, src_pitch=64, src_offset=8)
    assert last() == ("2d d>h", hp, b.ptr + 1032, 128, 64 << 32 | 16), last()
    stream.copy_3d(b, a, (6, 3, 4), dst_pitch=(16, 64), src_pitch=8, src_offset=(0, 0, 2), dst_offset=100)
    assert last() == ("3d d>d 3,4", b.ptr + 100, a.ptr + 48, 72, 8 << 32 | 16), last()
    stream.copy_3d(host, a, (5, 2, 2), dst_pitch=(5, 20), src_pitch=(10, 30))
    assert last() == ("3d d>h 3,4", hp, a.ptr, 20, 10 << 32 | 5), last()
    # prefetch of managed memory: cuMemPrefetchAsync (_v2) with a CUmemLocation, passed by value
    m = dev.alloc(4096, MemoryKind.UNIFIED)
    stream.prefetch(m, None, 512, offset=1024)
    assert last() == ("prefetch", m.ptr + 1024, 1 << 32 | 0, 512, 0), last()  # CU_MEM_LOCATION_TYPE_DEVICE, 0
    stream.prefetch(m, "host")
    assert last() == ("prefetch", m.ptr, 2 << 32 | 0, 4096, 0), last()  # CU_MEM_LOCATION_TYPE_HOST
    checked += 6
    before = last()
    raises(Error, lambda: stream.copy_2d(a, host, 10, 4, dst_pitch=9), "pitch", error_kind=ErrorKind.INVALID_VALUE)
    raises(Error, lambda: stream.prefetch(a), "UNIFIED", error_kind=ErrorKind.INVALID_VALUE)
    raises(Error, lambda: stream.fill(a, 0, 6, width=4), "multiples", error_kind=ErrorKind.INVALID_VALUE)
    raises(Error, lambda: stream.copy(b, a, 16, dst_offset=4090), "past", error_kind=ErrorKind.INVALID_VALUE)
    raises(Error, lambda: stream.copy_from_host(a, host, 1001), "past", error_kind=ErrorKind.INVALID_VALUE)
    assert last() == before  # refused before any driver call
elif PART == "errors":  # issue 26 item 7: the conformance suite's same mistakes, built one way on CUDA too
    def one_way(function: str, kind: ErrorKind, fn: Callable[[], Any]) -> None:
        global checked
        try:
            got = fn()
        except Error as e:
            got = e
        assert isinstance(got, Error) and got.kind is kind, repr(got)
        assert (got.backend, got.function) == ("CUDA", function), repr(got)
        assert str(got).startswith(function), repr(got)
        checked += 1

    twice, twice_unchecked, small = dev.alloc(64), dev.alloc(64), dev.alloc(64)
    twice.free()
    twice_unchecked.free()
    ev = stream.record_event()
    ev.synchronize()
    one_way("Allocation.free", ErrorKind.INVALID_HANDLE, twice.free)
    one_way("Allocation.free_unchecked", ErrorKind.INVALID_HANDLE, twice_unchecked.free_unchecked)
    one_way("Stream.copy_from_host", ErrorKind.INVALID_VALUE,
            lambda: stream.copy_from_host(small, np.zeros(128, np.uint8)))
    one_way("Stream.copy_to_host", ErrorKind.INVALID_VALUE,
            lambda: stream.copy_to_host(np.zeros(128, np.uint8), small))
    one_way("Stream.wait_event", ErrorKind.INVALID_VALUE, lambda: stream.wait_event(object()))  # type: ignore[arg-type]
    one_way("Event.elapsed_ms", ErrorKind.INVALID_VALUE, lambda: ev.elapsed_ms(object()))  # type: ignore[arg-type]
else:
    raise SystemExit(f"unknown part {PART}")

print("ok", checked)
