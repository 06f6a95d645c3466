"""C integer arithmetic for constant expressions: values with their C type, as a C compiler computes them.

Shared by the pycparser front-end (enumerators, array sizes) and the macro pass (``#define`` constants), so
that ``~0u``, ``-1u``, ``0xFFFFFFFF + 1``, ``1u << 31`` or ``-7 / 2`` mean what they mean in C.  A type is
``(bits, signed)``; the target is LP64 (int 32, long and long long 64 bits), as on the platforms bound.
"""

from __future__ import annotations

import re

IntType = tuple[int, bool]  # (bits, signed)

INT: IntType = (32, True)
UINT: IntType = (32, False)
LONG: IntType = (64, True)
ULONG: IntType = (64, False)

# the integer types by their canonical spelling (bits 1: _Bool, which converts by != 0)
BUILTIN_INTS: dict[str, IntType] = {
    "_Bool": (1, False), "char": (8, True), "signed char": (8, True), "unsigned char": (8, False),
    "short": (16, True), "unsigned short": (16, False), "int": (32, True), "unsigned int": (32, False),
    "long": (64, True), "unsigned long": (64, False), "long long": (64, True), "unsigned long long": (64, False),
}

# the integer typedefs of the C library (stddef.h, stdint.h), as on LP64 Linux
SYSTEM_INT_TYPES: dict[str, IntType] = {
    "size_t": (64, False), "ssize_t": (64, True), "ptrdiff_t": (64, True), "wchar_t": (32, True),
    "intptr_t": (64, True), "uintptr_t": (64, False), "intmax_t": (64, True), "uintmax_t": (64, False),
    **{f"int{b}_t": (b, True) for b in (8, 16, 32, 64)},
    **{f"uint{b}_t": (b, False) for b in (8, 16, 32, 64)},
    **{f"int_least{b}_t": (b, True) for b in (8, 16, 32, 64)},
    **{f"uint_least{b}_t": (b, False) for b in (8, 16, 32, 64)},
    "int_fast8_t": (8, True), "uint_fast8_t": (8, False),
    **{f"int_fast{b}_t": (64, True) for b in (16, 32, 64)},
    **{f"uint_fast{b}_t": (64, False) for b in (16, 32, 64)},
}

_LITERAL = re.compile(r"(0[xX][0-9A-Fa-f]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)([uUlL]*)\Z")


class NotConstant(Exception):
    """Not an integer constant expression (the message, if any, says why)."""


def wrap(v: int, bits: int, signed: bool) -> int:
    """``v`` converted to the type: modulo 2**bits, then into the signed range if signed."""
    v &= (1 << bits) - 1
    if signed and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def fits(v: int, t: IntType) -> bool:
    bits, signed = t
    return (-(1 << (bits - 1)) <= v < (1 << (bits - 1))) if signed else (0 <= v < (1 << bits))


def common(a: IntType, b: IntType) -> IntType:
    """The usual arithmetic conversions of two (promoted) integer types."""
    if a[1] == b[1]:
        return (max(a[0], b[0]), a[1])
    u, s = (a, b) if not a[1] else (b, a)
    return u if u[0] >= s[0] else s


def promote(t: IntType) -> IntType:
    """Integer promotion: anything narrower than int becomes int."""
    return t if t[0] >= 32 else INT


def literal(text: str) -> tuple[int, IntType]:
    """An integer literal's value and type: the first of the candidate types (by base and suffix) it fits."""
    m = _LITERAL.match(text)
    if m is None:
        raise NotConstant(f"'{text}' is not an integer")
    digits, suffix = m.group(1), m.group(2).lower()
    # no integer type holds more than 64 bits: longer literals are refused before Python converts them
    # (its int() refuses more than 4,300 decimal digits, and a megabyte of hex digits costs time for nothing)
    significant = digits[2:] if digits[:2].lower() in ("0x", "0b") else digits
    if len(significant.lstrip("0")) > 64:
        raise NotConstant(f"integer literal of {len(digits)} digits is too large for any integer type")
    if digits[:2] in ("0x", "0X"):
        v = int(digits, 16)
    elif digits[:2] in ("0b", "0B"):
        v = int(digits[2:], 2)
    elif len(digits) > 1 and digits[0] == "0":
        v = int(digits, 8)
    else:
        v = int(digits)
    if v >= 1 << 64:
        raise NotConstant(f"integer literal '{text}' is too large for any integer type")
    decimal = digits[0] != "0" or digits == "0"
    unsigned = "u" in suffix
    wide = "l" in suffix
    candidates: list[IntType] = []
    if not wide:
        candidates += [UINT] if unsigned else ([INT] if decimal else [INT, UINT])
    candidates += [ULONG] if unsigned else ([LONG] if decimal else [LONG, ULONG])
    for t in candidates:
        if fits(v, t):
            return v, t
    return wrap(v, 64, False), ULONG


def type_of(v: int) -> IntType:
    """The type of a bare value (an enumerator, a constant known only by value): int, or wider if needed."""
    for t in (INT, LONG, ULONG):
        if fits(v, t):
            return t
    return ULONG


def unary(op: str, v: int, t: IntType) -> tuple[int, IntType]:
    t = promote(t)
    if op == "-":
        return wrap(-v, *t), t
    if op == "+":
        return v, t
    if op == "~":
        return wrap(~v, *t), t
    if op == "!":
        return int(not v), INT
    raise NotConstant(f"operator '{op}'")


def binary(op: str, a: int, ta: IntType, b: int, tb: IntType) -> tuple[int, IntType]:
    """``a op b`` for every binary operator but ``&&`` and ``||`` (which do not evaluate both sides)."""
    if op in ("<<", ">>"):
        t = promote(ta)
        a = wrap(a, *t)
        if b < 0:
            raise NotConstant("negative shift count")
        if b >= t[0]:  # undefined in C (and 1 << 10**11 would build a number of 10**11 bits first)
            raise NotConstant("shift count not less than the width of the type")
        return wrap(a << b if op == "<<" else a >> b, *t), t
    t = common(promote(ta), promote(tb))
    a, b = wrap(a, *t), wrap(b, *t)
    if op in ("==", "!=", "<", ">", "<=", ">="):
        r = {"==": a == b, "!=": a != b, "<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]
        return int(r), INT
    if op == "/" or op == "%":
        if b == 0:
            raise NotConstant("division by zero")
        q = abs(a) // abs(b)  # C truncates toward zero
        if (a < 0) != (b < 0):
            q = -q
        return wrap(q if op == "/" else a - q * b, *t), t
    if op == "+":
        return wrap(a + b, *t), t
    if op == "-":
        return wrap(a - b, *t), t
    if op == "*":
        return wrap(a * b, *t), t
    if op == "&":
        return wrap(a & b, *t), t
    if op == "|":
        return wrap(a | b, *t), t
    if op == "^":
        return wrap(a ^ b, *t), t
    raise NotConstant(f"operator '{op}'")
