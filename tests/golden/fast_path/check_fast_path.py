"""The checked fast path: in API mode the checked wrappers are compiled C (trampolines.c, module fast_path._fast)
for every shape here (numbers, strings, handles, structs, arrays, nullable and function pointers, an errcode_ret
status, sized strings, a compile log); ABI mode runs the Python wrappers.  Same calls (by
position or keyword), same answers and types, same exceptions either way.  (tests/test_fast_path.py compares
the two wrappers of each function call by call.)"""

from __future__ import annotations

import inspect
from typing import Callable

from golden_check import compiled, error, load, raises

from ironaccelerator import Error, ErrorKind

g = load("fast_path")
FAST = tuple(name for name, *_ in g._b.functions)  # every function: each shape here has a fast path
assert len(FAST) == 41 and {"goldenAlloc", "goldenCtxCreate", "goldenBuild", "goldenCtxOpen"} <= set(FAST)
for name in FAST:
    assert compiled(getattr(g, name)) is (g.BINDING_MODE == "api"), name
    assert getattr(g, name).__doc__.lstrip().startswith("``"), name
assert sorted(getattr(g, "_python", {})) == (sorted(FAST) if g.BINDING_MODE == "api" else [])
assert list(inspect.signature(g.goldenScale).parameters) == ["x", "factor"]
# trailing nullable parameters default to None (a compiled fast path's text signature says so too)
assert [p.default for p in inspect.signature(g.goldenCtxNotify).parameters.values()] == [inspect.Parameter.empty, None, None]
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

# handles in and out: the cdata a Python wrapper returns (a non-owning pointer of the handle type)
ctx = g.goldenCtxCreate(5)
assert g.ffi.typeof(ctx) is g.ffi.typeof("goldenCtx") and g.goldenCtxGetFlags(ctx) == 5
assert g.goldenCtxCurrent() == ctx and g.goldenCtxGetFlags(ctx=g.goldenCtxCurrent()) == 5
a, b = g.goldenCtxPair()
assert a != b and g.goldenCtxSwap(a) == b and g.goldenCtxSwap(b) == a and g.goldenCtxSwap(None) == a
assert g.goldenCtxSwap(g.ffi.NULL) == a
assert error(lambda: g.goldenCtxGetFlags(g.ffi.NULL)).kind is ErrorKind.INVALID_VALUE
wrong: tuple[tuple[Callable[[], object], type[BaseException]], ...]
wrong = ((lambda: g.goldenCtxGetFlags(None), TypeError), (lambda: g.goldenCtxGetFlags(5), TypeError),
         (lambda: g.goldenCtxGetFlags(g.ffi.new("int *")), TypeError), (lambda: g.goldenCtxSwap(ctx), Error),
         (lambda: g.goldenCtxSwap(3), TypeError))
for bad_call, bad_exc in wrong:
    raises(bad_exc, bad_call)
# errors.out_param: the status through errcode_ret
opened = g.goldenCtxOpen(3)
assert g.goldenCtxGetFlags(opened) == 3
e = error(lambda: g.goldenCtxOpen(8))
assert (e.kind, e.code, e.function) == (ErrorKind.INVALID_VALUE, 1, "goldenCtxOpen"), e
assert error(lambda: g.goldenCtxOpen(99)).kind is ErrorKind.DRIVER
# strings in (str or bytes; nullable: None is NULL), a const char * result
assert g.goldenCtxSetLabel(ctx, "héllo") is None and g.goldenCtxLabel(ctx) == "héllo"
assert g.goldenCtxSetLabel(ctx, b"raw") is None and g.goldenCtxLabel(ctx) == "raw"
assert g.goldenCtxSetLabel(ctx, None) is None and g.goldenCtxLabel(ctx) == "" and g.goldenCtxSetLabel(ctx) is None
raises(TypeError, lambda: g.goldenCtxSetLabel(ctx, 5))
raises(UnicodeEncodeError, lambda: g.goldenCtxSetLabel(ctx, "\ud800"))
# function pointers and void * (nullable, defaulting to None), a void * out
seen = []
cb = g.ffi.callback("goldenCallback", lambda user, value: seen.append((user, value)))
buf = g.ffi.new("char[]", 8)
assert g.goldenCtxNotify(ctx, cb, buf) is None and seen == [(g.ffi.cast("void *", buf), 5)]
assert g.goldenCtxUser(ctx) == g.ffi.cast("void *", buf) and g.ffi.typeof(g.goldenCtxUser(ctx)) is g.ffi.typeof("void *")
assert g.goldenCtxNotify(ctx) is None and g.goldenCtxUser(ctx) == g.ffi.NULL and len(seen) == 1
assert g.goldenCtxNotify(ctx, user=buf) is None and len(seen) == 1
raises(TypeError, lambda: g.goldenCtxNotify(ctx, lambda u, v: None))
assert g.goldenFillBytes(buf, 65, 3) is None and g.ffi.string(buf) == b"AAA"
# structs: out (by value: an owning struct, no pointer), by address (nullable), by value, in-out, returned
d = g.goldenGetDesc(ctx)
assert g.ffi.typeof(d) is g.ffi.typeof("goldenDesc") and (d.width, d.height, g.ffi.string(d.tag)) == (5, 10, b"desc")
assert g.ffi.typeof(getattr(g, "_python", {}).get("goldenGetDesc", g.goldenGetDesc)(ctx)) is g.ffi.typeof("goldenDesc")
assert g.goldenDescArea(d) == 50 and g.goldenDescCheck(g.ffi.addressof(d)) is None
d2 = g.goldenGetDesc(ctx)
d2.width = 9  # each call's struct is its own storage
assert (d.width, d2.width) == (5, 9)
assert error(lambda: g.goldenDescCheck(None)).kind is ErrorKind.INVALID_VALUE
assert error(lambda: g.goldenDescCheck()).kind is ErrorKind.INVALID_VALUE
# cffi passes a list as an array of the pointed-to type (here of one struct); not a dict
assert error(lambda: g.goldenDescCheck([{"width": -1}])).kind is ErrorKind.INVALID_VALUE
assert g.goldenDescCheck([[3, 4]]) is None
raises(TypeError, lambda: g.goldenDescCheck({"width": 1}))
grown = g.goldenDescGrow(d, 2)
assert (grown.width, grown.height, d.width) == (7, 12, 5) and g.goldenDescGrow({"width": 1}, 1).height == 1
m = g.goldenMakeDesc(3, 4)
assert g.ffi.typeof(m) is g.ffi.typeof("goldenDesc") and (m.width, m.height, g.ffi.string(m.tag)) == (3, 4, b"made")
assert g.goldenBump(40, 2) == 42 and g.goldenBump(None, 2) == 2  # None initialises the in-out value to 0
# arrays with their lengths (None: NULL and 0), of doubles, handles and strings; null-terminated
assert g.goldenSumInts([1, 2, 3]) == 6 and g.goldenSumInts(()) == 0 and g.goldenSumInts(None) == 0
assert g.goldenSumInts(range(5)) == 10 and g.goldenCountTerminated(x for x in (1, 2)) == 2
raises(TypeError, lambda: g.goldenSumInts(x for x in (1, 2)))  # the count is len(values)
raises(TypeError, lambda: g.goldenSumInts([1, "2"]))
raises(OverflowError, lambda: g.goldenSumInts([1 << 40]))
assert g.goldenDot([1.0, 2.0], [3.0, 4.0]) == 11.0 and g.goldenDot(None, None) == 0.0
e = error(lambda: g.goldenDot([1.0], [1.0, 2.0]))
assert (e.kind, e.function) == (ErrorKind.INVALID_VALUE, "goldenDot") and "b_ must have as many items as a" in str(e), e  # (b_: the Python name)
assert error(lambda: g.goldenDot([1.0], None)).kind is ErrorKind.INVALID_VALUE  # the library's: NULL b
assert g.goldenSumFlags([ctx, opened, ctx]) == 13
assert error(lambda: g.goldenSumFlags([ctx, g.ffi.NULL])).kind is ErrorKind.INVALID_VALUE
raises(TypeError, lambda: g.goldenSumFlags([ctx, None]))
assert g.goldenJoin(["a", b"bc", "dé"]) == "a,bc,dé" and g.goldenJoin([]) == ""
assert g.goldenCountTerminated([5, 6, 7]) == 3 and g.goldenCountTerminated([]) == 0
# strings sized by a query function (text and binary), a compile log in the error
g.goldenCtxSetLabel(ctx, "lbl")
assert g.goldenLog(ctx) == "log of lbl" and g.goldenBlob(ctx) == bytes(range(8))
assert g.goldenBuild(ctx, "fine") is None
e = error(lambda: g.goldenBuild(ctx, "an error"))
assert (e.kind, e.function) == (ErrorKind.COMPILE_FAILED, "goldenBuild") and "log of an error" in str(e), str(e)
assert error(lambda: g.goldenLog(g.ffi.NULL)).kind is ErrorKind.INVALID_VALUE
# void functions: the loader error after the wrapper's own work (an array built), before the call
assert g.goldenCtxReset(ctx) is None and g.goldenCtxGetFlags(ctx) == 0
assert error(lambda: g.goldenMissing([1, 2])).kind is ErrorKind.SYMBOL_NOT_FOUND
raises(TypeError, lambda: g.goldenMissing([None]))
