"""The pool fast path (pool_memory: pmPoolAlloc, pmPoolFree): pool_memory._fast._pool_alloc allocates and
returns a _PoolMemory (subclassed as the backend does) that frees in C; only API mode has it."""

from __future__ import annotations

import sys
from typing import Any

from golden_check import load, mode, raises

g = load("pool_memory")
pool_setup = getattr(sys.modules.get(g.__name__ + "._fast"), "_pool_setup", None)
assert (pool_setup is not None) is (mode() == "api"), pool_setup
if pool_setup is not None:
    import gc
    import threading

    pool_alloc = sys.modules[g.__name__ + "._fast"]._pool_alloc
    tls = threading.local()

    class Err(Exception):  # the backend's Error: returned (not raised) by free_unchecked and _release
        pass

    Base: type[Any] = pool_setup(tls, Err)
    assert Base is sys.modules[g.__name__ + "._fast"]._PoolMemory and Base.__name__ == "_PoolMemory"

    class Memory(Base):  # type: ignore[misc]  # (Base: the compiled class, Any to mypy)
        # as the backend's pool allocation: a Python subclass, with a __dict__
        _drop = None

    KEY = ("context", 77)
    activations: list[int] = []

    class Device:
        fail: Exception | None = None

        def activate(self) -> None:
            activations.append(1)
            if self.fail is not None:
                raise self.fail
            tls.key = KEY

    class Pool:
        device = Device()

        def _memory_error(self, memory: Any, code: int | None, function: str) -> Err:
            return Err(memory.ptr, code, function)

    pool = Pool()

    def pv(i: int) -> Any:
        return g.pmPoolValue(i)

    def new(nbytes: int = 4096, stream: int = 0xCD) -> Any:
        n = pv(0)
        m = pool_alloc(Memory, pool, 0xAB, nbytes, stream, KEY)
        assert pv(0) == n + 1 and [pv(2), pv(3), pv(4)] == [nbytes, 0xAB, stream]
        assert type(m) is Memory and (m.ptr, m.nbytes, m.pool, m._stream) == (0x100000 + pv(0) * 0x1000, nbytes,
                                                                             pool, stream)
        assert not m._freed and m._tracked
        return m

    m = new()
    # freeing: the pool's device made current first (tls.key unset on this thread), then pmPoolFree
    frees = pv(1)
    assert m.free() is None and m._freed and activations == [1]
    assert (pv(1), pv(5), pv(6)) == (frees + 1, m.ptr, 0xCD)
    m = new(8, 0xEF)
    assert m.free_unchecked() is None and activations == [1] and (pv(5), pv(6)) == (m.ptr, 0xEF)  # current now
    tls.key = ("context", 78)  # another device current: activated again
    m = new()
    assert m._release() is None and activations == [1, 1] and pv(5) == m.ptr
    assert not m._freed  # _release only releases (its callers set _freed), as Allocation._release
    m._freed = True
    # freeing twice: the pool's error for None, raised by free, returned by free_unchecked; no driver call
    frees = pv(1)
    for call in (m.free, m.free_unchecked):
        try:
            got = call()
        except Err as e:
            got = e
            assert call == m.free
        assert isinstance(got, Err) and got.args == (m.ptr, None, "Allocation." + call.__name__), got.args
    assert pv(1) == frees
    # the driver's failures: an allocation's status comes back as an int; a free's as the pool's error
    g.pmPoolFail(g.PM_ERROR_OUT_OF_MEMORY, 1)
    assert pool_alloc(Memory, pool, 1, 16, 2, KEY) == g.PM_ERROR_OUT_OF_MEMORY
    m = new()
    g.pmPoolFail(g.PM_ERROR_INVALID_VALUE, 1)
    try:
        m.free()
    except Err as e:
        assert e.args == (m.ptr, g.PM_ERROR_INVALID_VALUE, "Allocation.free") and m._freed, e.args
    else:
        raise AssertionError("free did not raise")
    m = new()
    g.pmPoolFail(g.PM_ERROR_INVALID_VALUE, 1)
    got = m.free_unchecked()
    assert isinstance(got, Err) and got.args[1:] == (g.PM_ERROR_INVALID_VALUE, "Allocation.free_unchecked")
    # making the device current fails: free raises; free_unchecked returns an Err, raises anything else
    del tls.key
    for fail, method, returned in ((Err("no context"), "free", False), (Err("no context"), "free_unchecked", True),
                                   (KeyError("bug"), "free_unchecked", False)):
        Device.fail = fail
        m = new()
        frees = pv(1)
        try:
            got = getattr(m, method)()
        except (Err, KeyError) as e:
            assert not returned and e is fail
        else:
            assert returned and got is fail
        assert m._freed and pv(1) == frees
    Device.fail = None
    # dropped: freed while tracked and not freed; _drop instead when set; a failure is unraisable, not lost
    frees = pv(1)
    m = new()
    ptr = m.ptr
    del m
    assert pv(1) == frees + 1 and pv(5) == ptr
    m = new()
    m._tracked = False
    del m
    assert pv(1) == frees + 1
    dropped: list[int] = []
    m = new()
    m._drop = lambda: dropped.append(1)
    del m
    assert dropped == [1] and pv(1) == frees + 1
    unraisable: list[sys.UnraisableHookArgs] = []
    old_hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        m = new()
        m._drop = lambda: 1 / 0
        del m
    finally:
        sys.unraisablehook = old_hook
    assert len(unraisable) == 1 and unraisable[0].exc_type is ZeroDivisionError
    # with cycles through the instance dict, the collector frees it too
    m = new()
    m.me = m
    del m
    gc.collect()
    assert pv(1) == frees + 2
    # bad calls
    for bad, exc in ((lambda: Base(), TypeError), (lambda: Memory(), TypeError),
                     (lambda: pool_alloc(int, pool, 1, 16, 2, KEY), TypeError),
                     (lambda: pool_alloc(Memory, pool, 1, 16, 2), TypeError),
                     (lambda: pool_alloc(Memory, pool, 1, -16, 2, KEY), OverflowError),
                     (lambda: pool_alloc(Memory, pool, "x", 16, 2, KEY), TypeError),
                     (lambda: pool_setup(tls), TypeError)):
        n = pv(0)
        raises(exc, bad)
        assert pv(0) == n

    def set_freed(value: object) -> None:
        new()._freed = value

    raises(TypeError, lambda: set_freed(1))  # a bool
    # no reference leaks: allocations, frees, double frees, drops, failures
    m = got = e = None  # type: ignore[misc]  # (e: the handlers above already unbound it; a new global)
    unraisable.clear()
    gc.collect()
    refs = sys.getrefcount(pool), sys.getrefcount(KEY)
    for i in range(200):
        m = new()
        m.free()
        assert isinstance(m.free_unchecked(), Err)
        m = new()
        g.pmPoolFail(g.PM_ERROR_INVALID_VALUE, i % 2)
        assert pool_alloc(Memory, pool, 1, 16, 2, KEY) is not None
    m = None
    gc.collect()
    assert (sys.getrefcount(pool), sys.getrefcount(KEY)) == refs, (refs, sys.getrefcount(pool), sys.getrefcount(KEY))
