"""resolver: {kind: proc_address}: functions resolved lazily through the library's resolver with their pins
(paAlloc: 2010, between the decoys 1000 and 9000), once each; a pinned function the resolver refuses falls
back to dlsym; the per-thread flag is passed when set, and switching it resolves again.  ``no-resolver``: the
library was built without paGetProcAddress, so every function comes from dlsym (the same calls succeed)."""

from __future__ import annotations

from golden_check import error, load, variant

from ironaccelerator import ErrorKind

g = load("resolver_proc_address")
RESOLVER = variant() != "no-resolver"
# the resolver's own paAlloc answers 0x2000 + bytes; the exported paAlloc_v2, which dlsym finds, 0x1000 + bytes
BASE = 0x2000 if RESOLVER else 0x1000
assert g.has("paGetProcAddress") is RESOLVER  # (has() of a pinned function would resolve it: below)

# paGetVersion is pinned (1000) but the resolver refuses it: the first call asks it once, then dlsym
refused, lookups = g.paProcRefusals(), g.paProcLookups()
assert g.paGetVersion() == (2, 1) and g.paProcRefusals() == refused + RESOLVER
assert g.paGetVersion() == (2, 1) and g.paProcRefusals() == refused + RESOLVER  # resolved once
assert g.paAlloc(100) == BASE + 100
assert g.paProcLookups() == lookups + RESOLVER and g.paProcRefusals() == refused + RESOLVER
assert g.paAlloc(1) == BASE + 1 and g.paProcLookups() == lookups + RESOLVER  # resolved once
p = g.ffi.new("paPtr *")
assert g.unchecked.paAlloc(p, 5) == 0 and p[0] == BASE + 5

# per-thread default stream variants (paCopy -> paCopy_v2_ptds): the resolver gets the per-thread flag and
# answers paCopy_v2_ptds for it (paCopy_v2 without); without a resolver, dlsym of paCopy_v2_ptds
buf = g.ffi.new("char[]", 4)
lookups = g.paProcLookups()
g.paCopy(0, buf, 4)
assert g.paProcLookups() == lookups + RESOLVER
g.set_per_thread_default_stream(True)
assert g.unchecked.paCopy(0, buf, 4) == 999
assert g.paProcLookups() == lookups + 2 * RESOLVER  # resolved again, through the resolver
e = error(lambda: g.paCopy(0, buf, 4))
assert e.kind is ErrorKind.DRIVER and e.code == 999, e
assert g.paProcLookups() == lookups + 2 * RESOLVER  # the checked wrapper uses what unchecked resolved
g.set_per_thread_default_stream(False)
g.paCopy(0, buf, 4)
assert g.unchecked.paCopy(0, buf, 4) == 0  # resolved again (ABI mode had cached the _ptds function)
assert g.paProcLookups() == lookups + 3 * RESOLVER
assert g.paAlloc(3) == BASE + 3  # resolved again after the switch, with the same pin
assert g.has("paAlloc") and g.has("paCopy") and g.has("paGetVersion")
if not RESOLVER:
    assert g.paProcLookups() == 0 and g.paProcRefusals() == 0
