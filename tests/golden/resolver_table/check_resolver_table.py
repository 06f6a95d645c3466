"""resolver: {kind: table}: the library exports only tbGetProviders (and a decoy TbDevice_add that must never be
called); the first provider of API 2.x with x >= 1 is selected (2.3, after a 2.0, a 1.9 and a 3.0), and every
function is called through its table entry (TbDevice_* by the default rule, tbCallCount by an explicit entry).
A NULL entry (deviceReset) is SYMBOL_NOT_FOUND naming the entry and the library, never a crash.  ``no-match``:
the library lists no 2.x provider with x >= 1: the error is a LIBRARY_NOT_FOUND listing what it offers."""

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
    assert "libia_resolver_table.so" in msg and "2.1" in msg, msg
    for offered in ("version 2.0.0", "version 1.9.4", "version 3.0.0", "providerName=early", "backendId=19"):
        assert offered in msg, (offered, msg)
    assert "current" not in msg, msg
    e = error(lambda: g.TbDevice_add(1, 2))  # the decoy export is not a fallback
    assert e.kind is ErrorKind.LIBRARY_NOT_FOUND, e
else:
    assert g.tbCallCount() == 0
    assert g.TbDevice_getVersion() == (2, 3)  # the 2.3 provider, not the first listed (2.0) nor another major
    assert g.TbDevice_add(40, 2) == 42  # its table entry, not the exported decoy (1042) nor another provider's
    assert g.tbCallCount() == 2
    p = g.ffi.new("int *")
    assert g.unchecked.TbDevice_add(1, 2, p) == 0 and p[0] == 3
    assert g.tbCallCount() == 3
    # deviceReset is NULL in the selected provider
    assert not g.has("TbDevice_reset") and g.has("TbDevice_add") and g.has("tbGetProviders")
    for _ in range(2):  # and stays so: no crash, the same error each time
        e = error(lambda: g.TbDevice_reset())
        assert e.kind is ErrorKind.SYMBOL_NOT_FOUND, e
        msg = str(e)
        assert "deviceReset" in msg and "TbDevice_reset" in msg and "libia_resolver_table.so" in msg, msg
        assert "version 2.3.1" in msg and "providerName=current" in msg, msg
    assert g.tbCallCount() == 3
