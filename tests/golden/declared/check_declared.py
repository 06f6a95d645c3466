"""frontend: declared: a library bound from declarations written in its spec (both C front-ends parse them
alike: test_golden compares each with expected/), called like any other; SDK_VERSION is "declared"."""

from __future__ import annotations

from golden_check import error, load

from ironaccelerator import ErrorKind

d = load("declared")
assert d.SDK_VERSION == "declared" and d.DECL_API_MAJOR == 2 and d.DeclStatus.DECL_BAD_ARG == 2
v = d.declGetVersion()
assert (v.major, v.minor) == (2, 7), v
assert d.declScale(21, 2) == 42
e = error(lambda: d.declScale(1, 0))
assert (e.kind, e.code, e.function) == (ErrorKind.INVALID_VALUE, 2, "declScale"), e
assert d.declCreate() != d.ffi.NULL and d.declName() == "declared"
