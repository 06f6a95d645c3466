"""Directions: out-parameters become return values (one value; several as a tuple; a handle; a struct made with
its type tag set, fill:), inout takes the value and returns the new one, and a non-const pointer marked
direction: in (nullable) is passed as is."""

from __future__ import annotations

from golden_check import compiled, load

o = load("out_params")
assert o.outGetVersion() == (2, 1) and o.outAlloc(100) == 0x1000 + 100
ctx = o.outCtxCreate(5)
assert o.outCtxFlags(ctx) == 5
assert o.outBump(40, 2) == 42
buf = o.ffi.new("char[]", 4)
assert o.outSetCallback(o.ffi.NULL, buf) is None and o.outLastUserData() == int(o.ffi.cast("uintptr_t", buf))
assert o.outSetCallback(o.ffi.NULL, None) is None and o.outLastUserData() == 0
seen = []
cb = o.ffi.callback("outCallback", lambda user, status: seen.append((user, status)))
assert o.outSetCallback(cb, o.ffi.NULL) is None and seen == [(o.ffi.NULL, o.OUT_SUCCESS)]
assert compiled(o.outGetVersion) is (o.BINDING_MODE == "api")
assert compiled(o.outCtxCreate) is compiled(o.outSetCallback) is (o.BINDING_MODE == "api")  # handles, nullable pointers
# fill: the out struct is made with its type tag set (the library refuses a struct whose stype it does not know)
limits = o.outGetLimits(ctx)
assert (limits.stype, limits.maxThreads, limits.maxBytes) == (o.OUT_STRUCTURE_TYPE_LIMITS_2, 69, 4096), limits
assert not compiled(o.outGetLimits)  # the Python wrapper initialises the struct
