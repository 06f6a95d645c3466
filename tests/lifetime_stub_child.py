"""Run by test_lifetime_stub.py in a subprocess whose libcuda.so.1 is bench/stub_cuda: the CUDA backend's
checked copies (sizes), host buffers released on event completion, Device.close() and bad-typed input.
Usage: lifetime_stub_child.py STUB PART (PART: copy, inflight, close, input).  Prints "ok <n>" (checks)."""

from __future__ import annotations

import sys
from typing import Any, Callable, cast

import numpy as np

import ironaccelerator as ia
from ironaccelerator import Error, ErrorKind
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
else:
    raise SystemExit(f"unknown part {PART}")
print("ok", checked)
