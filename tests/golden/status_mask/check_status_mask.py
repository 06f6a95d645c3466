"""errors.codes + errors.mask: a uint64 status handle whose low 16 bits are the code.  A status maps to its kind
by those bits whatever the upper ones hold (bit 63 included), Error.code keeps the whole status, in the
compiled fast path and in the Python wrappers (ABI mode) alike; the
vendor's message is read with the whole status; the unchecked functions return it unchanged."""

from __future__ import annotations

from golden_check import compiled, error, load

from ironaccelerator import ErrorKind

g = load("status_mask")
assert compiled(g.smCheck) is compiled(g.smDivide) is compiled(g.smGetVersion) is (g.BINDING_MODE == "api")
assert g.SmCode.SM_ERROR_BUSY == 5000 and g.SM_ERROR_INVALID_ARGUMENT == 1004

TAG = 0xC0DE << 48
for code, kind in ((1000, ErrorKind.UNSUPPORTED), (1002, ErrorKind.OUT_OF_MEMORY),
                   (1004, ErrorKind.INVALID_VALUE), (5000, ErrorKind.DRIVER), (65535, ErrorKind.DRIVER)):
    for upper in (0, 1 << 16, TAG, 1 << 63, 0xFFFFFFFFFFFF0000):
        status = upper | code
        e = error(lambda: g.smCheck(status))
        assert (e.kind, e.code, e.function, e.backend) == (kind, status, "smCheck", "GOLDEN"), (hex(status), e)
        assert f"({status})" in str(e) and g.SmCode(code).name in str(e), str(e)
# the vendor's message, not the name twice
e = error(lambda: g.smCheck(TAG | 1004))
assert "smCheck failed with SM_ERROR_INVALID_ARGUMENT: invalid argument (" in str(e), str(e)
assert str(e).count("SM_ERROR_INVALID_ARGUMENT") == 1, str(e)
e = error(lambda: g.smCheck(5000))  # a message that does not start with the name: both
assert "SM_ERROR_BUSY: busy (5000)" in str(e), str(e)
# low bits of no code: UNKNOWN, with the whole status
e = error(lambda: g.smCheck(TAG | 4321))
assert (e.kind, e.code) == (ErrorKind.UNKNOWN, TAG | 4321) and "unknown status" in str(e), e
# upper bits over a zero code: still a non-zero status, so a failure; its code (success) is no error: UNKNOWN
e = error(lambda: g.smCheck(TAG))
assert (e.kind, e.code) == (ErrorKind.UNKNOWN, TAG), e
assert g.smCheck(0) is None
# an out-parameter: the library's tagged status the same way; a Python wrapper too
assert g.smDivide(7, 2) == 3
e = error(lambda: g.smDivide(1, 0))
assert (e.kind, e.code, e.function) == (ErrorKind.INVALID_VALUE, TAG | 1004, "smDivide"), e
v = g.smGetVersion(0)
assert (v.major, v.minor) == (2, 40)
e = error(lambda: g.smGetVersion(1))
assert (e.kind, e.code, e.function) == (ErrorKind.UNSUPPORTED, TAG | 1000, "smGetVersion"), e
assert "SM_ERROR_UNSUPPORTED: not supported here (" in str(e), str(e)
# a value the status type cannot hold is refused before C
for bad in (-1, 1 << 64):
    try:
        g.smCheck(bad)
    except (OverflowError, TypeError):
        pass
    else:
        raise AssertionError(f"smCheck({bad}) accepted")
# unchecked: the whole status, unchanged
p = g.ffi.new("int32_t *")
assert g.unchecked.smDivide(1, 0, p) == TAG | 1004 and g.unchecked.smCheck((1 << 63) | 7) == (1 << 63) | 7
