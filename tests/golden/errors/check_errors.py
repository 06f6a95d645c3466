"""Errors: each code's ErrorKind, the default kind, Error's fields, the vendor's name in the message (and a
failure of the name function itself), codes a function returns as results (status:), raw codes unchecked."""

from __future__ import annotations

from golden_check import compiled, error, load

from ironaccelerator import ErrorKind

g = load("errors")
assert g.errInit(1) is None
e = error(lambda: g.errInit(99))
assert (e.kind, e.code, e.function, e.backend) == (ErrorKind.INVALID_VALUE, 1, "errInit", "GOLDEN"), e
assert "ERR_INVALID_VALUE" in str(e), str(e)
e = error(lambda: g.errFail(g.ERR_OUT_OF_MEMORY))
assert (e.kind, e.code, e.function) == (ErrorKind.OUT_OF_MEMORY, 2, "errFail"), e
e = error(lambda: g.errFail(g.ERR_UNKNOWN))  # defaulted, and no name: the spec's default kind
assert (e.kind, e.code) == (ErrorKind.DRIVER, 999) and "999" in str(e), e
e = error(lambda: g.errFail(12345))  # a code the header does not know: UNKNOWN, said so
assert (e.kind, e.code) == (ErrorKind.UNKNOWN, 12345) and "unknown status (12345)" in str(e), e
assert g.errFail(g.ERR_SUCCESS) is None
# the name function is checked like any function; its own failure names the code it failed with
assert g.errGetErrorName(g.ERR_NOT_READY) == "ERR_NOT_READY"
e = error(lambda: g.errGetErrorName(999))
assert e.kind is ErrorKind.INVALID_VALUE and "ERR_INVALID_VALUE" in str(e), e
# status: [ERR_NOT_READY]: returned, not raised
q = g.errQueueCreate()
assert g.errQuery(q) == g.ERR_NOT_READY and g.errQuery(q) == g.ERR_SUCCESS
assert compiled(g.errQuery) is compiled(g.errInit) is (g.BINDING_MODE == "api")
# unchecked: the raw code
assert g.unchecked.errInit(99) == 1 and g.unchecked.errFail(999) == 999
