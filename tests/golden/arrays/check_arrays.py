"""Input arrays from Python sequences: with a count parameter the wrapper fills in (len: count), of strings
(str or bytes), and ending with a zero element the wrapper appends (len: null-terminated)."""

from __future__ import annotations

from golden_check import compiled, error, load

from ironaccelerator import ErrorKind

a = load("arrays")
assert a.arrSum([1, 2, 3, 40]) == 46 and a.arrSum([]) == 0 and a.arrSum((5,)) == 5
assert a.arrJoin(["a", b"bc", "d"]) == "a+bc+d" and a.arrJoin([]) == ""
assert a.arrSumTerminated([1, 2, 3 << 40]) == 3 + (3 << 40) and a.arrSumTerminated([]) == 0
assert a.arrSumTerminated([4, 0, 5]) == 4  # the array ends at its first 0, as C reads it
assert error(lambda: a.arrSumTerminated(None)).kind is ErrorKind.INVALID_VALUE  # None: NULL
assert a.arrCountNames(["x", b"yyy", "zz"]) == (3, 3) and a.arrCountNames([]) == (0, 0)
# arrays (with their count, of strings, terminated): the compiled fast path in API mode
assert all(compiled(f) is (a.BINDING_MODE == "api") for f in (a.arrSum, a.arrJoin, a.arrSumTerminated, a.arrCountNames))
