"""resolver kind objc: messages sent with each selector's exact prototype (GNU runtime: objc_msg_lookup, then the
IMP cast) to classes impl.c registers through the runtime's C API: a 24-byte struct result and a struct argument,
8-byte struct, double and long double results, BOOL, strings, +0/+1 results and their reference counts, NSError-style
outputs mapped through the spec's errors:, a selector the class lacks, nil receivers, the plain C functions of
functions: (+1/+0 results, a symbol the library lacks); in API and ABI mode."""

from __future__ import annotations

import ctypes
import gc
import os

from golden_check import error, load

from ironaccelerator import ErrorKind
from ironaccelerator_runtime.objc import NSErrorError

try:
    ctypes.CDLL("libobjc.so.4", mode=os.RTLD_GLOBAL)
except OSError:  # no GNU Objective-C runtime (gobjc): nothing to send to
    raise SystemExit(0)

g = load("objc_messages")
Shape, Text, Object = g.GoldenShape, g.GoldenText, g.GoldenObject
assert g.GOLDEN_LIMIT == 3
live = Object.liveCount()

size = g.ffi.new("GoldenSize *", {"width": 2, "height": 3, "depth": 4})[0]
s = Shape.alloc().initWithSize_(size)
assert type(s) is Shape and g.retain_count(s) == 1
got = s.size()  # 24 bytes: returned in memory (objc_msgSend_stret on x86-64 Apple)
assert (got.width, got.height, got.depth) == (2, 3, 4)
big = s.scaledBy_(10)
assert (big.width, big.height, big.depth) == (20, 30, 40)
o = s.origin()  # 8 bytes: in registers
assert (o.x, o.y) == (0.5, 2.0)
assert s.area() == 6.0 and abs(float(s.preciseArea()) - 2.0) < 1e-12
assert s.isEmpty() is False and Shape.alloc().initWithSize_(g.ffi.new("GoldenSize *")[0]).isEmpty() is True
assert Object.liveCount() == live + 1  # the empty shape is gone already

# strings, +0 and +1 results, reference counts
assert s.label() is None
t = Text.textWithUTF8String_("étiquette ✓")
assert type(t) is Text and t.UTF8String() == "étiquette ✓"
s.setLabel_(t)
assert g.retain_count(t) == 3  # ours, the shape's, the "autorelease" slot's
for _ in range(1000):
    lab = s.label()  # +0: retained for the handle, released with it
    assert lab == t
    del lab
    c = s.copyLabel()  # +1: owned, released with the handle
    assert c.UTF8String() == "étiquette ✓" and g.retain_count(c) == 1
    c.close()
    r = t.retain()
    r.close()
assert g.retain_count(t) == 3

# NSError ** outputs: kinds from errors: (domain:code, then domain), default UNKNOWN
assert s.validateWithLimit_error_(5) is True
e = error(lambda: s.validateWithLimit_error_(1))
assert isinstance(e, NSErrorError)
assert (e.kind, e.code, e.domain, e.localized_description) == (ErrorKind.INVALID_VALUE, 22, "GoldenDomain",
                                                               "width over the limit"), e
assert "-[GoldenShape validateWithLimit:error:]" in str(e)
deep = Shape.alloc().initWithSize_(g.ffi.new("GoldenSize *", {"depth": 5000})[0])
assert error(lambda: deep.validateWithLimit_error_(9)).kind == ErrorKind.OUT_OF_MEMORY
bare = Shape.alloc().init()
e = error(lambda: bare.labelCheckedWithError_())
assert isinstance(e, NSErrorError)
assert (e.kind, e.code, e.domain) == (ErrorKind.UNKNOWN, 5, "OtherDomain"), e
assert s.labelCheckedWithError_() == t

# refusals: a selector the class lacks, nil receivers, a closed handle, a consumed receiver, bad values
e = error(s.notImplemented)
assert e.kind == ErrorKind.SYMBOL_NOT_FOUND and "GoldenShape" in str(e) and "notImplemented" in str(e), e
e = error(lambda: Shape.size(t))
assert e.kind == ErrorKind.SYMBOL_NOT_FOUND and "GoldenText" in str(e), e
assert g.unchecked.GoldenShape_area(g.ffi.NULL) == 0.0
z = g.unchecked.GoldenShape_size(g.ffi.NULL)
assert (z.width, z.height, z.depth) == (0, 0, 0)
allocated = Shape.alloc()
allocated.init()
assert error(allocated.init).kind == ErrorKind.INVALID_HANDLE  # init consumed its reference
s2 = Shape.alloc().initWithSize_(size)
s2.close()
assert error(s2.area).kind == ErrorKind.INVALID_HANDLE
assert error(lambda: s.scaledBy_(-1)).kind == ErrorKind.INVALID_VALUE
assert error(lambda: s.setLabel_("text")).kind == ErrorKind.INVALID_VALUE
assert error(lambda: Text.textWithUTF8String_(b"a\0b")).kind == ErrorKind.INVALID_VALUE

# unchecked: raw ids at the method's own ownership, class methods take the Class
cls = g.objc_class("GoldenShape")
raw = g.unchecked.GoldenObject_alloc(cls)
assert g.unchecked.GoldenObject_retainCount(raw) == 1
g.unchecked.GoldenObject_release(raw)

# plain C functions (functions:): found with dlsym(RTLD_DEFAULT), called with their exact prototypes
before = g.GoldenLiveObjects()
assert before == Object.liveCount()
for _ in range(1000):
    n = g.GoldenLiveObjects()
    made = g.GoldenCreateShape(size)  # +1 by the Create/Copy rule: adopted, released with the handle
    assert type(made) is Shape and g.retain_count(made) == 1 and made.area() == 6.0
    assert g.GoldenLiveObjects() == n + 1
    copied = g.GoldenCopyLabel(s)  # +1
    assert type(copied) is Text and g.retain_count(copied) == 1 and copied.UTF8String() == "étiquette ✓"
    shared = g.GoldenSharedText("partagé")  # +0: retained for the handle (the slot holds the other reference)
    assert g.retain_count(shared) == 2 and shared.UTF8String() == "partagé"
    made.close()
    del copied, shared
    assert g.GoldenLiveObjects() <= before + 1  # at most the last shared text, held by the slot
assert g.GoldenCopyLabel(bare) is None  # NULL -> None
assert g.GoldenScale(size, 2.5) == 5.0  # a struct argument by value, a double result
e = error(g.GoldenNotExported)
assert e.kind == ErrorKind.SYMBOL_NOT_FOUND and "GoldenNotExported" in str(e) and "libia_objc_messages" in str(e), e
assert g.unchecked.GoldenNotExported() == g.ffi.NULL  # unchecked: zero, no crash
assert error(lambda: g.GoldenCopyLabel(None)).kind == ErrorKind.INVALID_VALUE
assert error(lambda: g.GoldenSharedText(3)).kind == ErrorKind.INVALID_VALUE
assert error(lambda: g.GoldenScale(size, "x")).kind == ErrorKind.INVALID_VALUE
raw = g.unchecked.GoldenCreateShape(size)  # raw: +1, ours to release
assert g.unchecked.GoldenObject_retainCount(raw) == 1
g.unchecked.GoldenObject_release(raw)

del s, t, big, deep, bare, allocated, s2, got, o, e, size, c, r, made
gc.collect()
# every object is gone but what the "autoreleased" slot holds: one text, or one error and its two texts
assert Object.liveCount() <= live + 3, (Object.liveCount(), live)
