"""The shared macro pass: ``#define`` token lists -> constants and function renames.

Both front-ends hand over macros as tokens; this pure function decides what
they mean, so the two front-ends cannot disagree about it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Callable

from ..ir import Header, Macro, MacroConstant, Rename

_INT = re.compile(r"(0[xX][0-9A-Fa-f]+|0[0-7]*|[1-9][0-9]*)([uUlL]*)\Z")
_FLOAT = re.compile(r"([0-9]*\.[0-9]+([eE][-+]?[0-9]+)?|[0-9]+\.[0-9]*([eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+)[fFlL]?\Z")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TOKEN = re.compile(r"""\s*(?:
    (?P<str>L?"(?:[^"\\]|\\.)*")
  | (?P<chr>L?'(?:[^'\\]|\\.)+')
  | (?P<num>\.?[0-9](?:[eEpP][-+]|[0-9A-Za-z_.])*)
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\#\#|<<=|>>=|\.\.\.|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^~!<>=?:;,.()\[\]{}\#])
)""", re.X)

_INT_CASTS = {
    "char": 8, "signed char": 8, "unsigned char": 8, "short": 16, "unsigned short": 16, "int": 32,
    "unsigned int": 32, "unsigned": 32, "long": 64, "unsigned long": 64, "long long": 64,
    "unsigned long long": 64, "size_t": 64, "int8_t": 8, "uint8_t": 8, "int16_t": 16, "uint16_t": 16,
    "int32_t": 32, "uint32_t": 32, "int64_t": 64, "uint64_t": 64,
}


def tokenize(text: str) -> tuple[str, ...]:
    """Split a macro body into C preprocessing tokens (for front-ends without a lexer)."""
    out = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"cannot tokenize {text[pos:pos + 20]!r}")
        out.append(m.group(m.lastgroup or "op"))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return tuple(out)


class _NotConstant(Exception):
    pass


class _Eval:
    """Recursive-descent evaluation of a constant expression over tokens (C precedence)."""

    BINARY = (("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", ">", "<=", ">="),
              ("<<", ">>"), ("+", "-"), ("*", "/", "%"))

    def __init__(self, tokens: tuple[str, ...], env: dict[str, int | float | str]):
        self.t = tokens
        self.i = 0
        self.env = env

    def peek(self) -> str | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self) -> str:
        if self.i >= len(self.t):
            raise _NotConstant
        self.i += 1
        return self.t[self.i - 1]

    def run(self) -> int | float | str:
        if not self.t:
            raise _NotConstant
        v = self.ternary()
        if self.i != len(self.t):
            raise _NotConstant
        return v

    def ternary(self) -> int | float | str:
        cond = self.binary(0)
        if self.peek() == "?":
            self.take()
            a = self.ternary()
            if self.take() != ":":
                raise _NotConstant
            b = self.ternary()
            return a if cond else b
        return cond

    def binary(self, level: int) -> int | float | str:
        if level == len(self.BINARY):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in self.BINARY[level]:
            op = self.take()
            right = self.binary(level + 1)
            left = _apply(op, left, right)
        return left

    def unary(self) -> int | float | str:
        tok = self.peek()
        if tok in ("-", "+", "~", "!"):
            self.take()
            v = self.unary()
            if isinstance(v, str):
                raise _NotConstant
            if tok == "-":
                return -v
            if tok == "+":
                return v
            if tok == "~":
                if not isinstance(v, int):
                    raise _NotConstant
                return ~v
            return int(not v)
        if tok == "(":
            # a cast to an integer type, or a parenthesised expression
            j = self.i + 1
            words: list[str] = []
            while j < len(self.t) and _IDENT.match(self.t[j]):
                words.append(self.t[j])
                j += 1
            if words and j < len(self.t) and self.t[j] == ")" and " ".join(words) in _INT_CASTS:
                self.i = j + 1
                v = self.unary()
                if not isinstance(v, int):
                    raise _NotConstant
                bits = _INT_CASTS[" ".join(words)]
                v &= (1 << bits) - 1
                if not words[0].startswith("u") and "unsigned" not in words and words != ["size_t"] and v >= 1 << (bits - 1):
                    v -= 1 << bits
                return v
            self.take()
            v = self.ternary()
            if self.take() != ")":
                raise _NotConstant
            return v
        return self.primary()

    def primary(self) -> int | float | str:
        tok = self.take()
        m = _INT.match(tok)
        if m:
            digits = m.group(1)
            return int(digits, 16) if digits[:2] in ("0x", "0X") else int(digits, 8) if len(digits) > 1 and digits[0] == "0" else int(digits)
        if _FLOAT.match(tok):
            return float(tok.rstrip("fFlL"))
        if tok.startswith('"'):
            s = _unquote(tok)
            while (nxt := self.peek()) is not None and nxt.startswith('"'):
                s += _unquote(self.take())
            return s
        if tok.startswith("'") and len(tok) == 3:
            return ord(tok[1])
        if _IDENT.match(tok) and tok in self.env:
            return self.env[tok]
        raise _NotConstant


def _unquote(tok: str) -> str:
    body = tok[1:-1]
    if "\\" in body:
        try:
            body = body.encode("latin-1", "backslashreplace").decode("unicode_escape")
        except UnicodeDecodeError:
            raise _NotConstant from None
    return body


def _c_div(a: int, b: int) -> int:
    """C's integer division: the quotient truncated toward zero (-7 / 2 == -3), not floored as ``//``."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


# the binary operators defined on integers only, and those defined on any arithmetic value
_INT_OPS: dict[str, Callable[[int, int], int]] = {
    "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "&": lambda a, b: a & b,
    "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
    "%": lambda a, b: a - b * _c_div(a, b),  # C: the sign of the dividend (-7 % 2 == -1)
}
_NUM_OPS: dict[str, Callable[[int | float, int | float], int | float]] = {
    "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b), "<": lambda a, b: int(a < b),
    ">": lambda a, b: int(a > b), "<=": lambda a, b: int(a <= b), ">=": lambda a, b: int(a >= b),
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
}


def _apply(op: str, a: int | float | str, b: int | float | str) -> int | float:
    if isinstance(a, str) or isinstance(b, str):
        raise _NotConstant
    try:
        if op == "||":
            return int(bool(a) or bool(b))
        if op == "&&":
            return int(bool(a) and bool(b))
        if op in _INT_OPS:
            if not (isinstance(a, int) and isinstance(b, int)):
                raise _NotConstant
            return _INT_OPS[op](a, b)
        if op == "/":
            return _c_div(a, b) if isinstance(a, int) and isinstance(b, int) else a / b
        return _NUM_OPS[op](a, b)
    except (ZeroDivisionError, ValueError, OverflowError):
        raise _NotConstant from None


def evaluate(tokens: tuple[str, ...], env: dict[str, int | float | str]) -> int | float | str | None:
    """The value of a constant expression, or None when it is not one."""
    try:
        return _Eval(tokens, env).run()
    except (_NotConstant, RecursionError):
        return None


def interpret(header: Header) -> Header:
    """Derive :class:`MacroConstant` and :class:`Rename` entries from ``header.macros``."""
    functions = {f.name for f in header.functions}
    wrappers = {m.name for m in header.macros
                if m.params is not None and len(m.params) == 1 and m.tokens == m.params}
    env: dict[str, int | float | str] = {}
    for e in header.enums:
        for c in e.constants:
            env[c.name] = c.value
    for t in header.typedefs:
        inner = getattr(t.type, "enum", None)
        if inner is not None:
            for c in inner.constants:
                env[c.name] = c.value
    constants: list[MacroConstant] = []
    renames: list[Rename] = []
    for m in header.macros:
        if m.params is not None or m.name in functions:
            continue
        toks = m.tokens
        if len(toks) == 1 and toks[0] in functions:
            renames.append(Rename(name=m.name, target=toks[0], location=m.location))
            continue
        if len(toks) == 4 and toks[0] in wrappers and toks[1] == "(" and toks[3] == ")" and toks[2] in functions:
            renames.append(Rename(name=m.name, target=toks[2], wrapper=toks[0], location=m.location))
            continue
        value = evaluate(toks, env)
        if value is not None and not (isinstance(value, str) and not toks[0].startswith('"')):
            env[m.name] = value
            constants.append(MacroConstant(name=m.name, value=value, location=m.location))
    return replace(header, constants=tuple(constants), renames=tuple(renames))


def from_define_line(line: str) -> tuple[str, tuple[str, ...] | None, tuple[str, ...]]:
    """Split the text after ``#define`` into name, parameters and body tokens (gcc ``-dD`` output)."""
    m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)(\(([^)]*)\))?\s*(.*)\Z", line, re.S)
    if m is None:
        raise ValueError(f"bad #define: {line!r}")
    params = None if m.group(2) is None else tuple(p.strip() for p in m.group(3).split(",") if p.strip())
    return m.group(1), params, tokenize(m.group(4))
