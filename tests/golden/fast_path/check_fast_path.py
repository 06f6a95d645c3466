"""The checked fast path: in API mode the wrappers of functions that take and return only numbers and strings
are compiled C (trampolines.c, module fast_path._fast); ABI mode runs the Python wrappers.  Same calls (by
position or keyword), same answers and types, same exceptions either way.  (tests/test_fast_path.py compares
the two wrappers of each function call by call.)"""

from __future__ import annotations

import inspect

from golden_check import compiled, error, load, raises

from ironaccelerator import ErrorKind

g = load("fast_path")
FAST = ("goldenAlloc", "goldenCalls", "goldenFail", "goldenGetErrorName", "goldenGetName", "goldenGetValue",
        "goldenGetVersion", "goldenInit", "goldenNotExported", "goldenScale", "goldenSetValue", "goldenStatusString")
for name in FAST:
    assert compiled(getattr(g, name)) is (g.BINDING_MODE == "api"), name
    assert getattr(g, name).__doc__.lstrip().startswith("``"), name
assert sorted(getattr(g, "_python", {})) == (sorted(FAST) if g.BINDING_MODE == "api" else [])
assert list(inspect.signature(g.goldenScale).parameters) == ["x", "factor"]
assert "goldenAlloc_v2" in g.goldenAlloc.__doc__ and "Returns ``ptr``" in g.goldenAlloc.__doc__
assert g.goldenInit(1) is None and g.goldenGetVersion() == (2, 1)
assert g.goldenAlloc(100) == 0x1000 + 100 and g.goldenAlloc(bytes=7) == 0x1007
assert g.goldenAlloc(g.GOLDEN_MODE_SAFE) == 0x1004  # an IntEnum is an int
assert g.goldenScale(factor=2.0, x=1.25) == 2.5 and g.goldenScale(3, 2) == 6.0 and abs(g.goldenScale(1.5, 2.0) - 3) < 1e-12
assert isinstance(g.goldenScale(3, 2), float) and type(g.goldenAlloc(1)) is int
assert g.goldenGetName(index=12) == "golden-device-12" and g.goldenStatusString(0) == "no error"
assert g.goldenGetErrorName(g.GOLDEN_SUCCESS) == "GOLDEN_SUCCESS"
assert g.goldenSetValue(3, 8) is None and g.goldenGetValue(3) == 8 and isinstance(g.goldenCalls(), int)
for call, exc in ((lambda: g.goldenAlloc(-1), OverflowError), (lambda: g.goldenAlloc(1 << 64), OverflowError),
                  (lambda: g.goldenInit(1 << 32), OverflowError), (lambda: g.goldenGetName(1 << 31), OverflowError),
                  (lambda: g.goldenAlloc(1.0), TypeError), (lambda: g.goldenAlloc("1"), TypeError),
                  (lambda: g.goldenAlloc(None), TypeError), (lambda: g.goldenScale("x", 1.0), TypeError),
                  (lambda: g.goldenAlloc(), TypeError), (lambda: g.goldenAlloc(1, 2), TypeError),
                  (lambda: g.goldenAlloc(size=1), TypeError), (lambda: g.goldenAlloc(1, bytes=1), TypeError),
                  (lambda: g.goldenGetVersion(1), TypeError)):
    raises(exc, call)
e = error(lambda: g.goldenInit(99))
assert (e.kind, e.code, e.function) == (ErrorKind.INVALID_VALUE, 1, "goldenInit") and "GOLDEN_ERROR_INVALID_VALUE" in str(e)
assert error(lambda: g.goldenAlloc(1 << 31)).kind is ErrorKind.OUT_OF_MEMORY
assert error(lambda: g.goldenGetName(-1)).kind is ErrorKind.INVALID_VALUE
assert error(lambda: g.goldenFail(g.GOLDEN_ERROR_UNKNOWN, 1)).kind is ErrorKind.DRIVER
assert error(lambda: g.goldenNotExported(1)).kind is ErrorKind.SYMBOL_NOT_FOUND
