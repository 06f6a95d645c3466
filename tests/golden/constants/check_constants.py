"""#define constants and enums: values (expressions, unsigned, derived from other macros, strings), enums as
IntEnum with their members also at module level, the SDK version from version_macro."""

from __future__ import annotations

from golden_check import error, load

from ironaccelerator import ErrorKind

c = load("constants")
assert c.CONST_VERSION == 2010 and c.SDK_VERSION == "2.1"
assert c.CONST_MAX_NAME == 64 and c.CONST_FLAG_A == 1 and c.CONST_FLAG_B == 8
assert c.CONST_GREETING == "hello"
assert c.constStatus.CONST_ERROR_NOT_READY == 3 and c.CONST_ERROR_NOT_READY == 3
assert c.constMode.CONST_MODE_SAFE == 4 and c.CONST_MODE_SAFE == 4
assert isinstance(c.constMode.CONST_MODE_FAST, int) and c.constMode(1) is c.CONST_MODE_FAST
assert [m.name for m in c.constMode] == ["CONST_MODE_FAST", "CONST_MODE_SAFE"]
assert c.constSetMode(c.CONST_MODE_SAFE) is None and c.constSetMode(c.constMode.CONST_MODE_FAST) is None
assert error(lambda: c.constSetMode(2)).kind is ErrorKind.INVALID_VALUE
