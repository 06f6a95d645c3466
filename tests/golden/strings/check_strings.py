"""Strings: an output into a caller-sized buffer (capacity + length_param), an output sized by a query
(size_function), a returned const char *, an input string, and a compile log appended to the error."""

from __future__ import annotations

from golden_check import compiled, error, load

from ironaccelerator import ErrorKind

s = load("strings")
assert s.strGetName(3) == "device-3" and s.strGetName(index=12) == "device-12"
e = error(lambda: s.strGetName(-1))  # a failure of a function with a string buffer
assert e.kind is ErrorKind.INVALID_VALUE and e.function == "strGetName", e
assert s.strStatusString(0) == "no error" and s.strStatusString(status=s.STR_ERROR_COMPILE) == "some error"
prog = s.strProgramCreate()
assert s.strBuild(prog, "fine") is None and s.strGetLog(prog) == "ok"
e = error(lambda: s.strBuild(prog, "syntax error here"))
assert e.kind is ErrorKind.COMPILE_FAILED and "line 1: unexpected 'syntax error here'" in str(e), str(e)
assert s.strGetLog(prog) == "line 1: unexpected 'syntax error here'"
# compiled in API mode: a fixed buffer, one sized by a query function, a compile log
assert compiled(s.strGetName) is compiled(s.strStatusString) is (s.BINDING_MODE == "api")
assert compiled(s.strGetLog) is compiled(s.strBuild) is (s.BINDING_MODE == "api")
