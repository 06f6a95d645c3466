"""loader: {abi_major}: the loader's names with {major} filled from the headers' version (3.1: libia_abi_major.so.3
first); a library of the headers' major is used; one of another major (built with -DGOLDEN_OTHER_MAJOR: 4.0, whose
enum values differ) is refused at the first call of any function, LIBRARY_NOT_FOUND saying both versions and to
regenerate, and none of its functions is called."""

from __future__ import annotations

import importlib

from golden_check import error, load, mode, variant

from ironaccelerator import ErrorKind

g = load("abi_major")
b = importlib.import_module("ironaccelerator.backends.test.abi_major._binding").BINDING
assert b.loader[0]["linux"] == ("libia_abi_major.so.3", "libia_abi_major.so"), b.loader[0]
assert b.abi_major is not None and b.abi_major.major == 3 and b.path is None
if variant() == "":
    assert g.has("amAdd") and g.amRuntimeGetVersion() == 3017 and g.amAdd(2, 3) == 5
    assert g.amPointerType(0x2000) == g.amMemoryTypeDevice
    assert b.path is not None and b.path.endswith("/libia_abi_major.so") and b.refused == []
else:
    assert variant() == "other-major"
    assert not g.has("amAdd") and b.path is None
    e = error(lambda: g.amPointerType(0x2000))
    assert e.kind is ErrorKind.LIBRARY_NOT_FOUND and e.function == "amPointerType", e
    msg = str(e)
    assert "generated from GOLDEN 3.1 headers" in msg and "libia_abi_major.so (version 4.0)" in msg, msg
    assert "make generate" in msg and "IA_GOLDEN_HOME" in msg and "GOLDEN 3.x" in msg, msg
    assert "from amRuntimeGetVersion: major 4, not the headers' 3" in msg, msg
    assert error(lambda: g.amRuntimeGetVersion()).kind is ErrorKind.LIBRARY_NOT_FOUND
    p = g.ffi.new("int *")
    if mode() == "api":  # the trampoline answers the sentinel: the refused file's amAdd is not called
        assert g.unchecked.amAdd(1, 2, p) == b.sentinel and p[0] == 0
    else:  # ABI mode: the raw function is looked up in the library, which is refused
        assert error(lambda: g.unchecked.amAdd(1, 2, p)).kind is ErrorKind.LIBRARY_NOT_FOUND and p[0] == 0
