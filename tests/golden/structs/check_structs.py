"""Structs: a nested struct filled as an out-parameter and returned, one passed in by pointer, new_struct."""

from __future__ import annotations

from golden_check import error, load, raises

from ironaccelerator import ErrorKind

s = load("structs")
desc = s.stDescribe(0xABC)
assert s.ffi.typeof(desc) is s.ffi.typeof("stDesc")  # a struct out is returned by value
assert desc.kind == 7 and desc.res.linear.base == 0xABC and desc.res.linear.bytes == 4096
assert s.ffi.string(desc.label) == b"linear" and s.ffi.sizeof(desc.label) == s.ST_MAX_LABEL == 32
assert s.ffi.sizeof("stDesc") == s.ffi.sizeof(desc) == 4 + 4 + 16 + 32  # (res is 8-aligned)
d = s.new_struct("stDesc", kind=5)
assert d.kind == 5 and d.res.linear.base == 0 and s.ffi.typeof(d) is s.ffi.typeof("stDesc *")
p = s.new_struct("stPoint", x=6, y=7)
assert s.stArea(p) == 42
assert error(lambda: s.stArea(s.ffi.NULL)).kind is ErrorKind.INVALID_VALUE
assert set(s.STRUCTS) >= {"stDesc", "stPoint"}, s.STRUCTS
raises(Exception, lambda: s.new_struct("stNoSuch"))
