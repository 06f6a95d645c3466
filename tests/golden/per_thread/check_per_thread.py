"""Per-thread variants with dlsym: the default symbols until set_per_thread_default_stream(True), then the
``{}_ptds`` ones (of the renamed symbol: ptCopy_v2_ptds), checked and unchecked alike, and back after False;
functions without a variant are unaffected."""

from __future__ import annotations

from golden_check import load

t = load("per_thread")
src, dst = t.ffi.new("char[]", b"abc"), t.ffi.new("char[4]")

assert t.ptCopy(dst, src, 4) is None and t.ptWhich() == 1 and t.ffi.string(dst) == b"abc"
assert t.ptFill(dst, 0, 4) is None and t.ptWhich() == 1
t.set_per_thread_default_stream(True)
assert t.ptCopy(dst, src, 4) is None and t.ptWhich() == 2 and t.ffi.string(dst) == b"abc"
assert t.unchecked.ptFill(dst, 65, 3) == 0 and t.ptWhich() == 2 and t.ffi.string(dst) == b"AAA"
assert t.ptFill(dst, 0, 4) is None and t.ptWhich() == 2
assert t.ptInit() is None and t.ptWhich() == 1
t.set_per_thread_default_stream(False)
assert t.unchecked.ptCopy(dst, src, 4) == 0 and t.ptWhich() == 1  # resolved again (ABI mode had cached it)
assert t.ptFill(dst, 0, 4) is None and t.ptWhich() == 1
