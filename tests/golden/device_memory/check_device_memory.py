"""The device-memory fast path (device_memory: dmAlloc, dmFree): device_memory._fast._devmem_allocator makes a
device's allocator, which allocates in C and returns a _DeviceMemory (subclassed as the backend does) that frees
in C; only API mode has it."""

from __future__ import annotations

import gc
import sys
import threading
import weakref
from typing import Any

from golden_check import load, mode, raises

g = load("device_memory")
fast = sys.modules.get(g.__name__ + "._fast")
setup = getattr(fast, "_devmem_setup", None)
assert (setup is not None) is (mode() == "api"), setup
if setup is not None:
    make = fast._devmem_allocator  # type: ignore[union-attr]
    tls = threading.local()

    class Err(Exception):  # the backend's Error: returned (not raised) by free_unchecked and _release
        pass

    Base: type[Any] = setup(tls, Err)
    assert Base is fast._DeviceMemory and Base.__name__ == "_DeviceMemory"  # type: ignore[union-attr]

    class Memory(Base):  # type: ignore[misc]  # (Base: the compiled class, Any to mypy)
        _drop = None

        def _views_error(self, what: str) -> Err | None:
            return Err("views", what) if any(r() is not None for r in self._views) else None

    KEY = ("context", 77)
    DEVICE = object()  # MemoryKind.DEVICE
    activations: list[int] = []
    slow_calls: list[tuple[Any, ...]] = []

    class Device:
        fail: Exception | None = None

        def activate(self) -> None:
            activations.append(1)
            if self.fail is not None:
                raise self.fail
            tls.key = KEY

        def _memory_error(self, memory: Any, code: int | None, function: str) -> Err:
            return Err(memory.ptr, code, function)

    def slow(device: Any, *args: Any, **kwargs: Any) -> str:
        slow_calls.append((device, args, kwargs))
        return "slow"

    def alloc_error(device: Any, code: int, nbytes: int) -> Err:
        return Err("alloc", code, nbytes)

    dev = Device()
    ctx = object()
    ref = weakref.ref(dev)
    alloc = make(Memory, ref, slow, alloc_error, DEVICE, tls, KEY, ctx, True)
    alloc_unchecked = make(Memory, ref, slow, alloc_error, DEVICE, tls, KEY, ctx, False)

    def dv(i: int) -> Any:
        return g.dmValue(i)

    # not current on this thread: the slow path (which makes the device current), with the arguments as given
    assert alloc(64) == "slow" and slow_calls.pop() == (dev, (64,), {}) and dv(0) == 0
    tls.key = KEY

    def new(nbytes: int = 4096, checked: bool = True, *kind: Any) -> Any:
        n = dv(0)
        m = (alloc if checked else alloc_unchecked)(nbytes, *kind)
        assert dv(0) == n + 1 and dv(2) == nbytes
        assert type(m) is Memory and (m.ptr, m.nbytes, m.device, m._ctx, m._key) == (0x200000 + dv(0) * 0x1000,
                                                                                   nbytes, dev, ctx, KEY)
        assert not m._freed and m._tracked is checked and m._views is None
        return m

    m = new()
    new(8, False, DEVICE)
    # what it does not take: the slow path
    for args, kwargs in (((0,), {}), ((-1,), {}), ((2**70,), {}), ((True,), {}), ((8.0,), {}), ((8, "HOST"), {}),
                         ((8,), {"kind": DEVICE}), ((), {}), ((1, DEVICE, 3), {})):
        n = dv(0)
        assert alloc(*args, **kwargs) == "slow" and slow_calls.pop() == (dev, args, kwargs) and dv(0) == n
    # freeing: the device current, then dmFree with the address
    frees = dv(1)
    assert m.free() is None and m._freed and (dv(1), dv(3)) == (frees + 1, m.ptr) and activations == []
    m = new()
    del tls.key  # nothing current: the device is made current first
    assert m.free_unchecked() is None and activations == [1] and dv(3) == m.ptr
    m = new()
    assert m._release() is None and not m._freed  # _release only releases (its callers set _freed)
    m._freed = True
    # freeing twice: the device's error for None, raised by free, returned by free_unchecked; no driver call
    frees = dv(1)
    for call in (m.free, m.free_unchecked):
        try:
            got = call()
        except Err as e:
            got = e
            assert call == m.free
        assert isinstance(got, Err) and got.args == (m.ptr, None, "Allocation." + call.__name__), got.args
    assert dv(1) == frees
    # exported views refuse the free (the instance's _views_error), until they are gone
    m = new()

    class View:
        pass

    v = View()
    m._views = [weakref.ref(v)]
    raises(Err, m.free)
    got = m.free_unchecked()
    assert isinstance(got, Err) and got.args == ("views", "Allocation.free_unchecked") and not m._freed
    assert dv(1) == frees
    del v
    assert m.free() is None and dv(1) == frees + 1
    # the driver's failures: alloc_error's Error, raised checked and returned unchecked; a free's is the device's
    g.dmFail(g.DM_ERROR_OUT_OF_MEMORY, 1)
    raises(Err, lambda: alloc(16))
    g.dmFail(g.DM_ERROR_OUT_OF_MEMORY, 1)
    got = alloc_unchecked(16)
    assert isinstance(got, Err) and got.args == ("alloc", g.DM_ERROR_OUT_OF_MEMORY, 16), got
    m = new()
    g.dmFail(g.DM_ERROR_INVALID_VALUE, 1)
    try:
        m.free()
    except Err as e:
        assert e.args == (m.ptr, g.DM_ERROR_INVALID_VALUE, "Allocation.free") and m._freed, e.args
    else:
        raise AssertionError("free did not raise")
    # making the device current fails: free raises; free_unchecked returns an Err, raises anything else
    for fail, method, returned in ((Err("no context"), "free", False), (Err("no context"), "free_unchecked", True),
                                   (KeyError("bug"), "free_unchecked", False)):
        m = new()
        del tls.key
        Device.fail = fail
        frees = dv(1)
        try:
            got = getattr(m, method)()
        except (Err, KeyError) as e:
            assert not returned and e is fail
        else:
            assert returned and got is fail
        assert m._freed and dv(1) == frees
        Device.fail = None
        tls.key = KEY
    # dropped: freed while tracked and not freed; _drop instead when set; a failure is unraisable, not lost
    frees = dv(1)
    m = new()
    ptr = m.ptr
    del m
    assert dv(1) == frees + 1 and dv(3) == ptr
    m = new(16, False)  # untracked (alloc_unchecked's)
    del m
    assert dv(1) == frees + 1
    dropped: list[int] = []
    m = new()
    m._drop = lambda: dropped.append(1)
    del m
    assert dropped == [1] and dv(1) == frees + 1
    unraisable: list[Any] = []
    old_hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        m = new()
        m._drop = lambda: 1 / 0
        del m
    finally:
        sys.unraisablehook = old_hook
    assert len(unraisable) == 1 and unraisable[0].exc_type is ZeroDivisionError
    m = new()
    m.me = m  # a cycle through the instance dict: the collector frees it too
    del m
    gc.collect()
    assert dv(1) == frees + 2
    # shut (the device closed): every call takes the slow path
    shut = make(Memory, ref, slow, alloc_error, DEVICE, tls, KEY, ctx, True)
    shut._shut()
    assert shut(64) == "slow" and slow_calls.pop() == (dev, (64,), {})
    # bad calls
    for bad, exc in ((lambda: Base(), TypeError), (lambda: Memory(), TypeError),
                     (lambda: make(int, ref, slow, alloc_error, DEVICE, tls, KEY, ctx, True), TypeError),
                     (lambda: make(Memory, dev, slow, alloc_error, DEVICE, tls, KEY, ctx, True), TypeError),
                     (lambda: make(Memory, ref, slow), TypeError), (lambda: setup(tls), TypeError)):
        n = dv(0)
        raises(exc, bad)
        assert dv(0) == n

    def set_freed(value: object) -> None:
        new()._freed = value

    raises(TypeError, lambda: set_freed(1))  # a bool
    # the device gone: ReferenceError
    other = Device()
    orphan = make(Memory, weakref.ref(other), slow, alloc_error, DEVICE, tls, KEY, ctx, True)
    del other
    raises(ReferenceError, lambda: orphan(8))
    # no reference leaks: allocations, frees, double frees, drops, failures
    m = got = e = None  # type: ignore[misc]
    unraisable.clear()
    gc.collect()
    refs = sys.getrefcount(dev), sys.getrefcount(KEY), sys.getrefcount(ctx)
    for i in range(200):
        m = alloc(64)
        m.free()
        assert isinstance(m.free_unchecked(), Err)
        m = alloc_unchecked(64)
        g.dmFail(g.DM_ERROR_INVALID_VALUE, i % 2)
        assert alloc_unchecked(16) is not None
    m = None
    gc.collect()
    assert (sys.getrefcount(dev), sys.getrefcount(KEY), sys.getrefcount(ctx)) == refs, refs
