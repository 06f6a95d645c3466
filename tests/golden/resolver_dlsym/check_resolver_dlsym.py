"""resolver: {kind: dlsym}: the renamed symbol (dlAlloc_v2, not dlAlloc), availability without a call
(has), SYMBOL_NOT_FOUND at the first call of a function the library lacks, naming its minimum version (from
the PFN typedef), the unchecked functions with caller-provided out-pointers, bind.exclude."""

from __future__ import annotations

from golden_check import error, load

from ironaccelerator import ErrorKind

g = load("resolver_dlsym")
assert g.has("dlInit") and g.has("dlAlloc") and not g.has("dlNotExported") and not g.has("noSuchFunction")
assert not hasattr(g, "dlHelper") and not hasattr(g.unchecked, "dlHelper")
assert g.dlInit(1) is None and g.dlAlloc(100) == 0x1000 + 100
e = error(lambda: g.dlNotExported(1))
assert e.kind is ErrorKind.SYMBOL_NOT_FOUND and "dlNotExported" in str(e) and "3.5" in str(e), str(e)
p = g.ffi.new("dlPtr *")
assert g.unchecked.dlAlloc(p, 5) == 0 and p[0] == 0x1000 + 5
assert g.unchecked.dlInit(99) == 1
