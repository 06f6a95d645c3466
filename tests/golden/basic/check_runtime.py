"""Exercises the generated golden package against libiagolden.so (run in a subprocess by test_golden.py).

``check_runtime.py api|abi [no-resolver]``: the binding mode to expect; ``no-resolver`` when the library was
built without goldenGetProcAddress (-DGOLDEN_NO_RESOLVER), so that every function must come from dlsym.
Both modes resolve alike: through the resolver with the function's pin, else dlsym.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, Callable

from ironaccelerator import Error, ErrorKind
from ironaccelerator.backends.test import golden as g

expected_mode = sys.argv[1]
assert g.BINDING_MODE == expected_mode, (g.BINDING_MODE, expected_mode)
RESOLVER = "no-resolver" not in sys.argv[2:]
# goldenAlloc is pinned to its ABI 2010 (PFN_goldenAlloc_v2010, between the decoys v1000 and v9000): the
# resolver answers for exactly that version with its own implementation (0x2000 + bytes); the exported
# goldenAlloc_v2, which dlsym finds, answers 0x1000 + bytes
BASE = 0x2000 if RESOLVER else 0x1000


def raises(exc: type[BaseException], call: Callable[[], object]) -> None:
    """call() raises exc (or a subclass)."""
    try:
        call()
    except exc:
        return
    raise AssertionError(f"no {exc.__name__}")


# constants and enums
assert g.GOLDEN_VERSION == 2010 and g.GOLDEN_MAX_NAME == 64 and g.GOLDEN_FLAG_B == 8
assert g.GOLDEN_GREETING == "hello"
assert g.goldenStatus.GOLDEN_ERROR_NOT_READY == 3 and g.GOLDEN_MODE_SAFE == 4
assert isinstance(g.goldenMode.GOLDEN_MODE_FAST, int)

# availability without calling
assert g.has("goldenInit") and not g.has("goldenNotExported") and not g.has("noSuchFunction")
assert g.has("goldenGetProcAddress") is RESOLVER

# checked calls
assert g.goldenInit(1) is None
# goldenGetVersion is pinned (1000) but the resolver refuses it: the first call asks it once, then dlsym
refused, lookups = g.goldenProcRefusals(), g.goldenProcLookups()
assert g.goldenGetVersion() == (2, 1)
assert g.goldenProcRefusals() == refused + RESOLVER, (g.goldenProcRefusals(), refused)
assert g.goldenGetVersion() == (2, 1) and g.goldenProcRefusals() == refused + RESOLVER  # resolved once
ptr = g.goldenAlloc(100)
assert ptr == BASE + 100, hex(ptr)
assert g.goldenProcLookups() == lookups + RESOLVER and g.goldenProcRefusals() == refused + RESOLVER
assert g.goldenAlloc(1) == BASE + 1 and g.goldenProcLookups() == lookups + RESOLVER  # resolved once
ctx = g.goldenCtxCreate(g.GOLDEN_MODE_SAFE)
assert g.goldenQuery(ctx) == g.GOLDEN_ERROR_NOT_READY  # a status, not an error
assert g.goldenQuery(ctx) == g.GOLDEN_SUCCESS
assert g.goldenGetName(3) == "golden-device-3"
assert g.goldenGetErrorName(g.GOLDEN_ERROR_COMPILE) == "GOLDEN_ERROR_COMPILE"
desc = g.goldenDescribe(ptr)
assert desc.kind == 7 and desc.res.linear.base == ptr and desc.res.linear.bytes == 4096
assert g.ffi.string(desc.label) == b"linear"
assert g.goldenSum([1, 2, 3, 40]) == 46
assert g.goldenJoin(["a", b"bc", "d"]) == "a+bc+d"
assert g.goldenJoin([]) == ""
assert g.goldenSetCallback(g.ffi.NULL) is None
assert g.goldenStatusString(0) == "no error"
assert abs(g.goldenScale(1.5, 2.0) - 3.0) < 1e-12
s = g.new_struct("goldenDesc", kind=5)
assert s.kind == 5

# the checked fast path: in API mode the wrappers of functions that take and return only numbers or
# strings are compiled C (trampolines.c, module golden._fast); ABI mode runs the Python wrappers.  Same
# calls, same answers, same exceptions either way.
FAST = ("goldenAlloc", "goldenGetErrorName", "goldenGetName", "goldenGetVersion", "goldenInit", "goldenNotExported",
        "goldenScale", "goldenStatusString")
kind = "builtin_function_or_method" if expected_mode == "api" else "function"
assert type(g.goldenGetVersion).__name__ == kind, type(g.goldenGetVersion)
for name in FAST:
    assert type(getattr(g, name)).__name__ == kind, (name, type(getattr(g, name)))
    assert getattr(g, name).__doc__.lstrip().startswith("``"), name
for name in ("goldenBuild", "goldenSum", "goldenQuery", "goldenGetLog", "goldenCtxCreate"):  # stay in Python
    assert type(getattr(g, name)).__name__ == "function", name
assert list(inspect.signature(g.goldenScale).parameters) == ["x", "factor"]
assert "goldenAlloc_v2" in g.goldenAlloc.__doc__ and "Returns ``ptr``" in g.goldenAlloc.__doc__
assert g.goldenAlloc(bytes=7) == BASE + 7 and g.goldenAlloc(g.GOLDEN_MODE_SAFE) == BASE + 4
assert g.goldenScale(factor=2.0, x=1.25) == 2.5 and g.goldenScale(3, 2) == 6.0
assert isinstance(g.goldenScale(3, 2), float) and type(g.goldenAlloc(1)) is int
assert g.goldenGetName(index=12) == "golden-device-12"
assert g.goldenStatusString(status=g.GOLDEN_ERROR_COMPILE) == "some error"
assert g.goldenGetErrorName(g.GOLDEN_SUCCESS) == "GOLDEN_SUCCESS"
exc: type[Exception]  # (the exception each `raises` loop below expects)
for call, exc in ((lambda: g.goldenAlloc(-1), OverflowError), (lambda: g.goldenAlloc(1 << 64), OverflowError),
                  (lambda: g.goldenInit(1 << 32), OverflowError), (lambda: g.goldenGetName(1 << 31), OverflowError),
                  (lambda: g.goldenAlloc(1.0), TypeError), (lambda: g.goldenAlloc("1"), TypeError),
                  (lambda: g.goldenAlloc(None), TypeError), (lambda: g.goldenScale("x", 1.0), TypeError),
                  (lambda: g.goldenAlloc(), TypeError), (lambda: g.goldenAlloc(1, 2), TypeError),
                  (lambda: g.goldenAlloc(size=1), TypeError), (lambda: g.goldenAlloc(1, bytes=1), TypeError),
                  (lambda: g.goldenGetVersion(1), TypeError)):
    raises(exc, call)
try:
    g.goldenGetName(-1)  # a failure from a function with a string buffer
except Error as e:
    assert e.kind is ErrorKind.INVALID_VALUE and e.function == "goldenGetName", e
else:
    raise AssertionError("goldenGetName(-1) did not raise")
try:
    g.goldenGetErrorName(999)  # a failure of the name function itself (the message then asks it again)
except Error as e:
    assert e.kind is ErrorKind.INVALID_VALUE and "GOLDEN_ERROR_INVALID_VALUE" in str(e), e
else:
    raise AssertionError("goldenGetErrorName(999) did not raise")

# errors: kind, code, function, backend, vendor name in the message
try:
    g.goldenInit(99)
except Error as e:
    assert e.kind is ErrorKind.INVALID_VALUE and e.code == 1 and e.function == "goldenInit" and e.backend == "GOLDEN"
    assert "GOLDEN_ERROR_INVALID_VALUE" in str(e), str(e)
else:
    raise AssertionError("goldenInit(99) did not raise")
# (a handler that expects another kind binds a name of its own: mypy would keep e.kind narrowed to the kind
# the handler before asserted)
try:
    g.goldenAlloc(1 << 31)
except Error as oom:
    assert oom.kind is ErrorKind.OUT_OF_MEMORY, oom
g.goldenBuild(ctx, "fine")
try:
    g.goldenBuild(ctx, "syntax error here")
except Error as failed:
    assert failed.kind is ErrorKind.COMPILE_FAILED and "line 1: unexpected 'syntax error here'" in str(failed), \
        str(failed)
else:
    raise AssertionError("goldenBuild did not raise")

# a symbol the library lacks: SYMBOL_NOT_FOUND naming the symbol and the minimum version
try:
    g.goldenNotExported(1)
except Error as missing:
    assert (missing.kind is ErrorKind.SYMBOL_NOT_FOUND and "goldenNotExported" in str(missing)
            and "3.5" in str(missing)), str(missing)
else:
    raise AssertionError("goldenNotExported did not raise")

# unchecked fast path: raw status codes, caller-provided out-pointers
p = g.ffi.new("goldenPtr *")
assert g.unchecked.goldenAlloc(p, 5) == 0 and p[0] == BASE + 5
assert g.unchecked.goldenInit(99) == 1

# per-thread default stream variants (goldenCopy -> goldenCopy_v2_ptds): the resolver gets the per-thread flag
# and answers goldenCopy_v2_ptds for it (goldenCopy_v2 without); without a resolver, dlsym of goldenCopy_v2_ptds
buf = g.ffi.new("char[]", 4)
lookups = g.goldenProcLookups()
g.goldenCopy(0, buf, 4)
assert g.goldenProcLookups() == lookups + RESOLVER
g.set_per_thread_default_stream(True)
assert g.unchecked.goldenCopy(0, buf, 4) == 999
assert g.goldenProcLookups() == lookups + 2 * RESOLVER  # resolved again, through the resolver
try:
    g.goldenCopy(0, buf, 4)
except Error as per_thread:
    assert per_thread.kind is ErrorKind.DRIVER and per_thread.code == 999
else:
    raise AssertionError("the per-thread variant was not used")
assert g.goldenProcLookups() == lookups + 2 * RESOLVER  # the checked wrapper uses what unchecked resolved
g.set_per_thread_default_stream(False)
g.goldenCopy(0, buf, 4)
assert g.unchecked.goldenCopy(0, buf, 4) == 0  # resolved again (ABI mode had cached the _ptds function)
assert g.goldenProcLookups() == lookups + 3 * RESOLVER
assert g.goldenAlloc(3) == BASE + 3  # resolved again after the switch, with the same pin
# the kernel-launch fast path (kernel_launch: goldenLaunch): golden._fast._launch packs the arguments as a
# layout says and calls goldenLaunch; only API mode has it (ABI mode: the backend packs in Python)
launch_fast = getattr(sys.modules.get(g.__name__ + "._fast"), "_launch", None)
assert (launch_fast is not None) is (expected_mode == "api"), launch_fast
if launch_fast is not None:
    import struct

    class Mem:  # what the backend's allocations look like to it: .ptr, ._freed
        def __init__(self, ptr: object, freed: bool = False) -> None:
            self.ptr, self._freed = ptr, freed

    def layout(total: int, *records: tuple[int, int, int]) -> bytes:  # (kind, size, offset) per argument
        return struct.pack("<I" + "BxHI" * len(records), total, *[v for r in records for v in r])

    def last() -> list[int]:
        return [g.goldenLastLaunchValue(i) for i in range(12)]

    def params(n: int) -> list[int]:
        return [g.goldenLastLaunchParam(i) for i in range(n)]

    for i, size in enumerate((8, 4, 2, 8)):
        g.goldenLaunchParamSize(i, size)
    dims = (2, 3, 4, 32, 2, 1, 256)
    mem = Mem(0x7F00DEADBEE0)
    args = (mem, struct.pack("<i", -5), struct.pack("<e", 1.5), struct.pack("<d", 2.25))
    layouts = {(Mem, bytes, bytes, bytes): layout(24, (0, 8, 0), (1, 4, 8), (1, 2, 12), (1, 8, 16))}
    before = last()[11]
    assert launch_fast(layouts, args, True, 0x1234, dims, 0x5678) == 0
    v = last()
    assert v == [0x1234, *dims, 0x5678, 0, 1, before + 1], v
    assert params(4) == [mem.ptr, 2**32 - 5, struct.unpack("<H", args[2])[0], struct.unpack("<Q", args[3])[0]]
    # no layout for these types, or values it cannot pack: None, nothing launched (the backend packs)
    for a, check in (((mem, b"1234", b"12"), True), ((mem, b"123", b"12", b"12345678"), True),
                     ((Mem(-1), *args[1:]), False), ((Mem("x"), *args[1:]), False),
                     ((Mem(1, freed=True), *args[1:]), True)):
        assert launch_fast(layouts, a, check, 1, dims, 2) is None, a
    assert last()[11] == before + 1
    # unchecked too: a freed allocation is not launched (its address may be other memory by now)
    assert launch_fast(layouts, (Mem(9, freed=True), *args[1:]), False, 1, dims, 2) is None
    assert last()[11] == before + 1
    assert launch_fast(layouts, (Mem(9), *args[1:]), False, 1, dims, 2) == 0
    assert params(1) == [9] and last()[11] == before + 2
    # an argument whose attribute changes the layouts while the launch reads it (the layout is held)
    class Sneaky:
        _freed = False

        @property
        def ptr(self) -> int:
            sneaky.clear()
            return 0x42

    sneaky = {(Sneaky, bytes): layout(12, (0, 8, 0), (1, 4, 8))}
    assert launch_fast(sneaky, (Sneaky(), b"abcd"), True, 1, dims, 2) == 0 and not sneaky
    assert params(2) == [0x42, int.from_bytes(b"abcd", "little")] and last()[11] == before + 3
    # the vendor's status comes back as is
    assert launch_fast(layouts, args, True, 1, (1, 1, 1, 1024, 2, 1, 0), 2) == g.GOLDEN_ERROR_INVALID_VALUE
    # no arguments: params NULL
    assert launch_fast({(): layout(0)}, (), True, 7, dims, 0) == 0
    assert last()[8:11] == [0, 1, 1], last()
    # bad calls and malformed layouts are errors, not launches
    for bad, exc in ((lambda: launch_fast(layouts, args, True, 1, dims[:6], 2), TypeError),
                     (lambda: launch_fast(layouts, list(args), True, 1, dims, 2), TypeError),
                     (lambda: launch_fast(layouts, args, True, 1, (-1, *dims[1:]), 2), OverflowError),
                     (lambda: launch_fast(layouts, args, True, 1, (2**32, *dims[1:]), 2), OverflowError),
                     (lambda: launch_fast({(): b"\0"}, (), True, 1, dims, 2), ValueError),
                     (lambda: launch_fast({(): layout(5000)}, (), True, 1, dims, 2), ValueError),
                     (lambda: launch_fast({(Mem,): layout(8, (0, 8, 4))}, (mem,), True, 1, dims, 2), ValueError),
                     (lambda: launch_fast({(Mem,): layout(8, (0, 4, 0))}, (mem,), True, 1, dims, 2), ValueError),
                     (lambda: launch_fast({(Mem,): layout(8, (7, 8, 0))}, (mem,), True, 1, dims, 2), ValueError)):
        raises(exc, bad)
    assert last()[11] == before + 5

# the pool fast path (pool_memory: goldenPoolAlloc, goldenPoolFree): golden._fast._pool_alloc allocates and
# returns a _PoolMemory (subclassed as the backend does) that frees in C; only API mode has it
pool_setup = getattr(sys.modules.get(g.__name__ + "._fast"), "_pool_setup", None)
assert (pool_setup is not None) is (expected_mode == "api"), pool_setup
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
        return g.goldenPoolValue(i)

    def new(nbytes: int = 4096, stream: int = 0xCD) -> Any:
        n = pv(0)
        m = pool_alloc(Memory, pool, 0xAB, nbytes, stream, KEY)
        assert pv(0) == n + 1 and [pv(2), pv(3), pv(4)] == [nbytes, 0xAB, stream]
        assert type(m) is Memory and (m.ptr, m.nbytes, m.pool, m._stream) == (0x100000 + pv(0) * 0x1000, nbytes,
                                                                             pool, stream)
        assert not m._freed and m._tracked
        return m

    m = new()
    # freeing: the pool's device made current first (tls.key unset on this thread), then goldenPoolFree
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
    g.goldenPoolFail(g.GOLDEN_ERROR_OUT_OF_MEMORY, 1)
    assert pool_alloc(Memory, pool, 1, 16, 2, KEY) == g.GOLDEN_ERROR_OUT_OF_MEMORY
    m = new()
    g.goldenPoolFail(g.GOLDEN_ERROR_INVALID_VALUE, 1)
    try:
        m.free()
    except Err as e:
        assert e.args == (m.ptr, g.GOLDEN_ERROR_INVALID_VALUE, "Allocation.free") and m._freed, e.args
    else:
        raise AssertionError("free did not raise")
    m = new()
    g.goldenPoolFail(g.GOLDEN_ERROR_INVALID_VALUE, 1)
    got = m.free_unchecked()
    assert isinstance(got, Err) and got.args[1:] == (g.GOLDEN_ERROR_INVALID_VALUE, "Allocation.free_unchecked")
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
        g.goldenPoolFail(g.GOLDEN_ERROR_INVALID_VALUE, i % 2)
        assert pool_alloc(Memory, pool, 1, 16, 2, KEY) is not None
    m = None
    gc.collect()
    assert (sys.getrefcount(pool), sys.getrefcount(KEY)) == refs, (refs, sys.getrefcount(pool), sys.getrefcount(KEY))

g.goldenCtxDestroy(ctx)
if not RESOLVER:
    assert g.goldenProcLookups() == 0 and g.goldenProcRefusals() == 0
print("golden runtime ok", g.BINDING_MODE)
