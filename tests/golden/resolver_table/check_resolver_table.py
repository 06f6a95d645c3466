"""resolver: {kind: table}: the library exports only tbGetProviders (and a decoy TbDevice_add that must never be
called); the first provider of API 2.x with x >= 1 and backendId 23 is selected (2.3, after a 2.0, a 1.9, a 3.0
and a 2.5 of backend 99), and every function is called through its table entry (TbDevice_* by the default rule,
tbCallCount by an explicit entry).  A NULL entry (deviceReset) and an entry newer than the provider (deviceScale,
API 2.4, whose slot holds a function that must never be called) are SYMBOL_NOT_FOUND naming the entry and the
library, never a crash.  ``no-match``: the library lists no such provider: the error is a LIBRARY_NOT_FOUND
listing what it offers."""

from __future__ import annotations

from golden_check import error, load, variant

from ironaccelerator import ErrorKind

g = load("resolver_table")

if variant() == "no-match":
    assert g.has("tbGetProviders")  # the provider itself is exported (dlsym)
    assert not g.has("TbDevice_add") and not g.has("TbDevice_getVersion")
    e = error(lambda: g.TbDevice_getVersion())
    assert e.kind is ErrorKind.LIBRARY_NOT_FOUND, e
    msg = str(e)
    assert "libia_resolver_table.so" in msg and "2.1 or a later 2.x and backendId 23" in msg, msg
    for offered in ("version 2.0.0", "version 1.9.4", "version 3.0.0", "version 2.5.0 (backendId=99, "
                    "providerName=other)", "providerName=early", "backendId=23"):
        assert offered in msg, (offered, msg)
    assert "current" not in msg, msg
    e = error(lambda: g.TbDevice_add(1, 2))  # the decoy export is not a fallback
    assert e.kind is ErrorKind.LIBRARY_NOT_FOUND, e
    assert not g.has("tbCallCount")
else:
    assert g.tbCallCount() == 0
    assert g.TbDevice_getVersion() == (2, 3)  # the 2.3 provider: not the first listed (2.0), another major,
    assert g.TbDevice_add(40, 2) == 42  # nor backend 99's 2.5; its table entry, not the exported decoy (1042)
    assert g.tbCallCount() == 2
    p = g.ffi.new("int *")
    assert g.unchecked.TbDevice_add(1, 2, p) == 0 and p[0] == 3
    assert g.tbCallCount() == 3
    assert g.has("TbDevice_add") and g.has("tbGetProviders")
    # deviceReset is NULL in the selected provider; deviceScale (2.4) is past the end of a 2.3 table
    assert not g.has("TbDevice_reset") and not g.has("TbDevice_scale")
    for _ in range(2):  # and stays so: no crash, the same error each time
        e = error(lambda: g.TbDevice_reset())
        assert e.kind is ErrorKind.SYMBOL_NOT_FOUND, e
        msg = str(e)
        assert msg.startswith("TbDevice_reset: ") and "deviceReset (NULL)" in msg and "libia_resolver_table.so" in msg, msg
        assert "version 2.3.1 (backendId=23, providerName=current)" in msg, msg
        e = error(lambda: g.TbDevice_scale(5))
        assert e.kind is ErrorKind.SYMBOL_NOT_FOUND, e
        msg = str(e)
        assert msg.startswith("TbDevice_scale: ") and "deviceScale (added in 2.4, after the provider's version)" in msg, msg
        assert "libia_resolver_table.so" in msg and "version 2.3.1" in msg, msg
    assert g.tbCallCount() == 3  # the slot past a 2.3 table was never called
