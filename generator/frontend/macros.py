"""The shared macro pass: ``#define`` token lists -> constants and function renames.

Both front-ends hand over macros as tokens; this pure function decides what
they mean, so the two front-ends cannot disagree about it.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Callable, NamedTuple, Union

from ..ir import Header, Macro, MacroConstant, Rename
from . import cint

_FLOAT = re.compile(r"([0-9]*\.[0-9]+([eE][-+]?[0-9]+)?|[0-9]+\.[0-9]*([eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+)[fFlL]?\Z")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TOKEN = re.compile(r"""\s*(?:
    (?P<str>L?"(?:[^"\\]|\\.)*")
  | (?P<chr>L?'(?:[^'\\]|\\.)+')
  | (?P<num>\.?[0-9](?:[eEpP][-+]|[0-9A-Za-z_.])*)
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\#\#|<<=|>>=|\.\.\.|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^~!<>=?:;,.()\[\]{}\#])
)""", re.X)

# the integer types a macro may cast to, as spelled there: (bits, signed)
_INT_CASTS: dict[str, cint.IntType] = {**cint.BUILTIN_INTS, **cint.SYSTEM_INT_TYPES, "unsigned": cint.UINT,
                                       "signed": cint.INT}


class _I(NamedTuple):
    """An integer with its C type, as the evaluator carries it (``~0u`` is 4294967295, not -1)."""

    v: int
    t: cint.IntType


_Value = Union[_I, float, str]


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


_NotConstant = cint.NotConstant


class _Eval:
    """Recursive-descent evaluation of a constant expression over tokens (C precedence, C integer types)."""

    BINARY = (("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", ">", "<=", ">="),
              ("<<", ">>"), ("+", "-"), ("*", "/", "%"))

    def __init__(self, tokens: tuple[str, ...], env: dict[str, _Value]):
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

    def run(self) -> _Value:
        if not self.t:
            raise _NotConstant
        v = self.ternary()
        if self.i != len(self.t):
            raise _NotConstant
        return v

    def ternary(self) -> _Value:
        cond = self.binary(0)
        if self.peek() == "?":
            self.take()
            a = self.ternary()
            if self.take() != ":":
                raise _NotConstant
            b = self.ternary()
            return a if _truth(cond) else b
        return cond

    def binary(self, level: int) -> _Value:
        if level == len(self.BINARY):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in self.BINARY[level]:
            op = self.take()
            right = self.binary(level + 1)
            left = _apply(op, left, right)
        return left

    def unary(self) -> _Value:
        tok = self.peek()
        if tok in ("-", "+", "~", "!"):
            self.take()
            v = self.unary()
            if isinstance(v, str):
                raise _NotConstant
            if isinstance(v, _I):
                return _I(*cint.unary(tok, v.v, v.t))
            if tok == "!":
                return _I(int(not v), cint.INT)
            if tok == "~":
                raise _NotConstant
            return -v if tok == "-" else v
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
                if not isinstance(v, _I):
                    raise _NotConstant
                bits, signed = _INT_CASTS[" ".join(words)]
                if bits == 1:  # _Bool
                    return _I(int(v.v != 0), cint.INT)
                return _I(cint.wrap(v.v, bits, signed), cint.promote((bits, signed)))
            self.take()
            v = self.ternary()
            if self.take() != ")":
                raise _NotConstant
            return v
        return self.primary()

    def primary(self) -> _Value:
        tok = self.take()
        if tok[:1].isdigit() and not _FLOAT.match(tok):
            return _I(*cint.literal(tok))  # (NotConstant if it is no integer literal either)
        if _FLOAT.match(tok):
            return float(tok.rstrip("fFlL"))
        if tok.startswith('"'):
            s = _unquote(tok)
            while (nxt := self.peek()) is not None and nxt.startswith('"'):
                s += _unquote(self.take())
            return s
        if tok.startswith("'") and len(tok) == 3:
            return _I(ord(tok[1]), cint.INT)
        if _IDENT.match(tok) and tok in self.env:
            return self.env[tok]
        raise _NotConstant


def _truth(v: _Value) -> bool:
    if isinstance(v, str):
        raise _NotConstant
    return bool(v.v) if isinstance(v, _I) else bool(v)


def _unquote(tok: str) -> str:
    body = tok[1:-1]
    if "\\" in body:
        try:
            body = body.encode("latin-1", "backslashreplace").decode("unicode_escape")
        except UnicodeDecodeError:
            raise _NotConstant from None
    return body


# the operators defined on floating values (an integer operand converted to double, as C does)
_FLOAT_OPS: dict[str, Callable[[float, float], float]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
}
_COMPARE = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
            ">": lambda a, b: a > b, "<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b}


def _apply(op: str, a: _Value, b: _Value) -> _Value:
    if op == "||":
        return _I(int(_truth(a) or _truth(b)), cint.INT)
    if op == "&&":
        return _I(int(_truth(a) and _truth(b)), cint.INT)
    if isinstance(a, str) or isinstance(b, str):
        raise _NotConstant
    if isinstance(a, _I) and isinstance(b, _I):
        return _I(*cint.binary(op, a.v, a.t, b.v, b.t))
    x = float(a.v) if isinstance(a, _I) else a
    y = float(b.v) if isinstance(b, _I) else b
    try:
        if op in _COMPARE:
            return _I(int(_COMPARE[op](x, y)), cint.INT)
        if op in _FLOAT_OPS:
            return _FLOAT_OPS[op](x, y)
    except (ZeroDivisionError, OverflowError):
        raise _NotConstant from None
    raise _NotConstant  # %, shifts and bitwise operators take integers


def _evaluate(tokens: tuple[str, ...], env: dict[str, _Value]) -> _Value | None:
    """The value of a constant expression, with its C type if an integer, or None when it is not one."""
    try:
        return _Eval(tokens, env).run()
    except (_NotConstant, RecursionError):
        return None


def evaluate(tokens: tuple[str, ...], env: dict[str, int | float | str]) -> int | float | str | None:
    """The value of a constant expression (the names in ``env``: integers of the type their value fits),
    or None when it is not one."""
    typed: dict[str, _Value] = {k: _I(v, cint.type_of(v)) if isinstance(v, int) else v for k, v in env.items()}
    value = _evaluate(tokens, typed)
    return value.v if isinstance(value, _I) else value


def interpret(header: Header) -> Header:
    """Derive :class:`MacroConstant` and :class:`Rename` entries from ``header.macros``."""
    functions = {f.name for f in header.functions}
    wrappers = {m.name for m in header.macros
                if m.params is not None and len(m.params) == 1 and m.tokens == m.params}
    env: dict[str, _Value] = {}  # enumerators (int, or wider where the value needs it) and earlier macros
    for e in header.enums:
        for c in e.constants:
            env[c.name] = _I(c.value, cint.type_of(c.value))
    for t in header.typedefs:
        inner = getattr(t.type, "enum", None)
        if inner is not None:
            for c in inner.constants:
                env[c.name] = _I(c.value, cint.type_of(c.value))
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
        value = _evaluate(toks, env)
        if isinstance(value, float) and not math.isfinite(value):
            value = None  # 1e999 is no value of double (and `X = inf` no Python a module can import)
        if value is not None and not (isinstance(value, str) and not toks[0].startswith('"')):
            env[m.name] = value
            constants.append(MacroConstant(name=m.name, value=value.v if isinstance(value, _I) else value,
                                           location=m.location))
    return replace(header, constants=tuple(constants), renames=tuple(renames))


def from_define_line(line: str) -> tuple[str, tuple[str, ...] | None, tuple[str, ...]]:
    """Split the text after ``#define`` into name, parameters and body tokens (gcc ``-dD`` output)."""
    m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)(\(([^)]*)\))?\s*(.*)\Z", line, re.S)
    if m is None:
        raise ValueError(f"bad #define: {line!r}")
    params = None if m.group(2) is None else tuple(p.strip() for p in m.group(3).split(",") if p.strip())
    return m.group(1), params, tokenize(m.group(4))
