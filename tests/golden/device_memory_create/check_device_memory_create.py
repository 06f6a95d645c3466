"""The device-memory fast path of a creator (device_memory: {create: dcCreateBuffer, size: size, free:
dcReleaseMem}): device_memory_create._fast._devmem_allocator makes a device's allocator from the values the device
gives (its context, flags and host pointer, in the creator's order), which calls dcCreateBuffer in C, reads its
status from errcode_ret and returns a _DeviceMemory that releases in C; no thread-local (tls None): no device is
ever made current; only API mode has it."""

from __future__ import annotations

import gc
import sys
import weakref
from typing import Any

from golden_check import load, mode, raises

g = load("device_memory_create")
fast = sys.modules.get(g.__name__ + "._fast")
setup = getattr(fast, "_devmem_setup", None)
assert (setup is not None) is (mode() == "api"), setup
if setup is not None:
    make = fast._devmem_allocator  # type: ignore[union-attr]

    class Err(Exception):  # the backend's Error: returned (not raised) by free_unchecked and _release
        pass

    Base: type[Any] = setup(None, Err)
    assert Base is fast._DeviceMemory  # type: ignore[union-attr]

    class Memory(Base):  # type: ignore[misc]
        _drop = None

        def _views_error(self, what: str) -> Err | None:
            return Err("views", what)

    DEVICE = object()  # MemoryKind.DEVICE
    CONTEXT, FLAGS = 0x7F00DEAD0000, (1 << 40) | 1  # an address and a 64-bit flag word, given as they are
    slow_calls: list[tuple[Any, ...]] = []

    class Device:
        def activate(self) -> None:  # never called: no current device
            raise AssertionError("activate")

        def _memory_error(self, memory: Any, code: int | None, function: str) -> Err:
            return Err(memory.ptr, code, function)

    def slow(device: Any, *args: Any, **kwargs: Any) -> str:
        slow_calls.append((device, args, kwargs))
        return "slow"

    def alloc_error(device: Any, code: int, nbytes: int) -> Err:
        return Err("alloc", code, nbytes)

    dev = Device()
    ref = weakref.ref(dev)
    bound = (CONTEXT, FLAGS, 0)
    alloc = make(Memory, ref, slow, alloc_error, DEVICE, None, None, None, True, bound)
    alloc_unchecked = make(Memory, ref, slow, alloc_error, DEVICE, None, None, None, False, bound)

    def dv(i: int) -> Any:
        return g.dcValue(i)

    def new(nbytes: int = 4096, checked: bool = True, *kind: Any) -> Any:
        n = dv(0)
        m = (alloc if checked else alloc_unchecked)(nbytes, *kind)
        # the creator got the device's values in its order, the size in its place
        assert (dv(0), dv(2), dv(4), dv(5), dv(6)) == (n + 1, nbytes, CONTEXT, FLAGS, 0)
        assert type(m) is Memory and (m.ptr, m.nbytes, m.device, m._ctx, m._key) == (0x300000 + dv(0) * 0x1000,
                                                                                   nbytes, dev, None, None)
        assert not m._freed and m._tracked is checked and m._views is None
        return m

    m = new()
    new(8, False, DEVICE)
    # what it does not take: the slow path
    for args, kwargs in (((0,), {}), ((-1,), {}), ((2**70,), {}), ((True,), {}), ((8, "HOST"), {}),
                         ((8,), {"kind": DEVICE}), ((), {})):
        n = dv(0)
        assert alloc(*args, **kwargs) == "slow" and slow_calls.pop() == (dev, args, kwargs) and dv(0) == n
    # releasing: dcReleaseMem with the handle, nothing made current
    frees = dv(1)
    assert m.free() is None and m._freed and (dv(1), dv(3)) == (frees + 1, m.ptr)
    m = new()
    assert m.free_unchecked() is None and dv(3) == m.ptr
    # freeing twice: the device's error for None, no call
    frees = dv(1)
    raises(Err, m.free)
    got = m.free_unchecked()
    assert isinstance(got, Err) and got.args == (m.ptr, None, "Allocation.free_unchecked") and dv(1) == frees
    # a failed creation: NULL and errcode_ret's status -> alloc_error's Error, raised checked, returned unchecked
    g.dcFail(g.DC_ERROR_OUT_OF_MEMORY, 1)
    try:
        alloc(16)
    except Err as e:
        assert e.args == ("alloc", g.DC_ERROR_OUT_OF_MEMORY, 16), e.args
    else:
        raise AssertionError("alloc did not raise")
    g.dcFail(g.DC_ERROR_INVALID_VALUE, 1)
    got = alloc_unchecked(16)
    assert isinstance(got, Err) and got.args == ("alloc", g.DC_ERROR_INVALID_VALUE, 16), got
    # a failed release: the device's Error with the status
    m = new()
    g.dcFail(g.DC_ERROR_INVALID_VALUE, 1)
    got = m.free_unchecked()
    assert isinstance(got, Err) and got.args == (m.ptr, g.DC_ERROR_INVALID_VALUE, "Allocation.free_unchecked")
    # dropped: released while tracked
    frees = dv(1)
    m = new()
    ptr = m.ptr
    del m
    assert (dv(1), dv(3)) == (frees + 1, ptr)
    m = new(16, False)
    del m
    assert dv(1) == frees + 1
    # the bound values: a tuple of as many integers as the creator has parameters the device gives
    for bad, exc in (((CONTEXT, FLAGS), TypeError), ((CONTEXT, FLAGS, 0, 0), TypeError),
                     ([CONTEXT, FLAGS, 0], TypeError), ((CONTEXT, "flags", 0), TypeError),
                     ((CONTEXT, -1, 0), OverflowError)):
        raises(exc, lambda: make(Memory, ref, slow, alloc_error, DEVICE, None, None, None, True, bad))
    raises(TypeError, lambda: make(Memory, ref, slow, alloc_error, DEVICE, None, None, None, True))
    # no reference leaks: allocations, frees, double frees, failures
    m = got = None
    gc.collect()
    refs = sys.getrefcount(dev)
    for i in range(200):
        m = alloc(64)
        m.free()
        assert isinstance(m.free_unchecked(), Err)
        g.dcFail(g.DC_ERROR_INVALID_VALUE, i % 2)
        assert alloc_unchecked(16) is not None
    m = None
    gc.collect()
    assert sys.getrefcount(dev) == refs, refs
