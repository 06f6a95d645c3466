"""Exercises the generated golden package against libiagolden.so (run in a subprocess by test_golden.py)."""

import sys

from ironaccelerator import Error, ErrorKind
from ironaccelerator.backends.test import golden as g

expected_mode = sys.argv[1]
assert g.BINDING_MODE == expected_mode, (g.BINDING_MODE, expected_mode)

# constants and enums
assert g.GOLDEN_VERSION == 2010 and g.GOLDEN_MAX_NAME == 64 and g.GOLDEN_FLAG_B == 8
assert g.GOLDEN_GREETING == "hello"
assert g.goldenStatus.GOLDEN_ERROR_NOT_READY == 3 and g.GOLDEN_MODE_SAFE == 4
assert isinstance(g.goldenMode.GOLDEN_MODE_FAST, int)

# availability without calling
assert g.has("goldenInit") and not g.has("goldenNotExported") and not g.has("noSuchFunction")

# checked calls
assert g.goldenInit(1) is None
assert g.goldenGetVersion() == (2, 1)
ptr = g.goldenAlloc(100)
assert ptr == 0x1000 + 100
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
assert g.unchecked.goldenAlloc(p, 5) == 0 and p[0] == 0x1005
assert g.unchecked.goldenInit(99) == 1

# per-thread default stream variants (goldenCopy -> goldenCopy_v2_ptds)
buf = g.ffi.new("char[]", 4)
g.goldenCopy(0, buf, 4)
g.set_per_thread_default_stream(True)
assert g.unchecked.goldenCopy(0, buf, 4) == 999
try:
    g.goldenCopy(0, buf, 4)
except Error as e:
    assert e.kind is ErrorKind.DRIVER and e.code == 999
else:
    raise AssertionError("the per-thread variant was not used")
g.set_per_thread_default_stream(False)
g.goldenCopy(0, buf, 4)
g.goldenCtxDestroy(ctx)
print("golden runtime ok", g.BINDING_MODE)
