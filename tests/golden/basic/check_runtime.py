"""Exercises the generated golden package against libiagolden.so (run in a subprocess by test_golden.py).

``check_runtime.py api|abi [no-resolver]``: the binding mode to expect; ``no-resolver`` when the library was
built without goldenGetProcAddress (-DGOLDEN_NO_RESOLVER), so that every function must come from dlsym.
Both modes resolve alike: through the resolver with the function's pin, else dlsym.
"""

import inspect
import sys

from ironaccelerator import Error, ErrorKind
from ironaccelerator.backends.test import golden as g

expected_mode = sys.argv[1]
assert g.BINDING_MODE == expected_mode, (g.BINDING_MODE, expected_mode)
RESOLVER = "no-resolver" not in sys.argv[2:]
# goldenAlloc is pinned to its ABI 2010 (PFN_goldenAlloc_v2010, between the decoys v1000 and v9000): the
# resolver answers for exactly that version with its own implementation (0x2000 + bytes); the exported
# goldenAlloc_v2, which dlsym finds, answers 0x1000 + bytes
BASE = 0x2000 if RESOLVER else 0x1000

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
for call, exc in ((lambda: g.goldenAlloc(-1), OverflowError), (lambda: g.goldenAlloc(1 << 64), OverflowError),
                  (lambda: g.goldenInit(1 << 32), OverflowError), (lambda: g.goldenGetName(1 << 31), OverflowError),
                  (lambda: g.goldenAlloc(1.0), TypeError), (lambda: g.goldenAlloc("1"), TypeError),
                  (lambda: g.goldenAlloc(None), TypeError), (lambda: g.goldenScale("x", 1.0), TypeError),
                  (lambda: g.goldenAlloc(), TypeError), (lambda: g.goldenAlloc(1, 2), TypeError),
                  (lambda: g.goldenAlloc(size=1), TypeError), (lambda: g.goldenAlloc(1, bytes=1), TypeError),
                  (lambda: g.goldenGetVersion(1), TypeError)):
    try:
        call()
    except exc:
        pass
    else:
        raise AssertionError(f"no {exc.__name__}")
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
try:
    g.goldenAlloc(1 << 31)
except Error as e:
    assert e.kind is ErrorKind.OUT_OF_MEMORY, e
g.goldenBuild(ctx, "fine")
try:
    g.goldenBuild(ctx, "syntax error here")
except Error as e:
    assert e.kind is ErrorKind.COMPILE_FAILED and "line 1: unexpected 'syntax error here'" in str(e), str(e)
else:
    raise AssertionError("goldenBuild did not raise")

# a symbol the library lacks: SYMBOL_NOT_FOUND naming the symbol and the minimum version
try:
    g.goldenNotExported(1)
except Error as e:
    assert e.kind is ErrorKind.SYMBOL_NOT_FOUND and "goldenNotExported" in str(e) and "3.5" in str(e), str(e)
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
except Error as e:
    assert e.kind is ErrorKind.DRIVER and e.code == 999
else:
    raise AssertionError("the per-thread variant was not used")
assert g.goldenProcLookups() == lookups + 2 * RESOLVER  # the checked wrapper uses what unchecked resolved
g.set_per_thread_default_stream(False)
g.goldenCopy(0, buf, 4)
assert g.unchecked.goldenCopy(0, buf, 4) == 0  # resolved again (ABI mode had cached the _ptds function)
assert g.goldenProcLookups() == lookups + 3 * RESOLVER
assert g.goldenAlloc(3) == BASE + 3  # resolved again after the switch, with the same pin
g.goldenCtxDestroy(ctx)
if not RESOLVER:
    assert g.goldenProcLookups() == 0 and g.goldenProcRefusals() == 0
print("golden runtime ok", g.BINDING_MODE)
