"""Pure helpers over IR C types: typedef resolution and C declarator spelling.

C spelling follows cffi's approach: a declarator is built inside-out around a
name, so pointers to functions and arrays of pointers come out right.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator, Mapping, assert_never

from .ir import (
    Array, Builtin, CType, EnumRef, Field, FunctionProto, InlineEnum, InlineRecord, Pointer, Record,
    RecordRef, Typedef, TypedefRef,
)

INTEGER_BUILTINS = frozenset({
    "_Bool", "char", "signed char", "unsigned char", "short", "unsigned short", "int", "unsigned int",
    "long", "unsigned long", "long long", "unsigned long long", "size_t", "ssize_t", "ptrdiff_t",
    "intptr_t", "uintptr_t", "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t",
    "int64_t", "uint64_t", "wchar_t",
})
FLOAT_BUILTINS = frozenset({"float", "double", "long double"})


def resolve(t: CType, typedefs: Mapping[str, Typedef]) -> CType:
    """Follow vendor typedefs to the type they name (keeps the outermost const)."""
    seen = 0
    const = t.const
    while isinstance(t, TypedefRef) and t.name in typedefs and seen < 64:
        t = typedefs[t.name].type
        const = const or t.const
        seen += 1
    return t if t.const == const else replace(t, const=const)


def is_char(t: CType) -> bool:
    return isinstance(t, Builtin) and t.name in ("char", "signed char", "unsigned char")


def references(t: CType) -> Iterator[tuple[CType, bool]]:
    """Every named type used by ``t``, with whether it is used by value (needs a complete type)."""
    stack: list[tuple[CType, bool]] = [(t, True)]
    while stack:
        cur, by_value = stack.pop()
        match cur:
            case TypedefRef() | RecordRef() | EnumRef() | Builtin():
                yield cur, by_value
            case Pointer():
                stack.append((cur.pointee, False))
            case Array():
                stack.append((cur.element, by_value))
            case FunctionProto():
                stack.append((cur.result, False))
                stack.extend((p.type, False) for p in cur.params)
            case InlineRecord():
                stack.extend((f.type, by_value) for f in cur.record.fields or ())
            case InlineEnum():
                pass  # its constants name no type
            case _:
                assert_never(cur)


def _quals(t: CType) -> str:
    return "const " if t.const else ""


def declare(t: CType, name: str = "") -> str:
    """The C declaration of ``name`` with type ``t``.  ex) ``declare(ptr-to-fn, 'cb')`` -> ``int (*cb)(void *)``"""
    decl = name
    while True:
        if isinstance(t, Pointer):
            inner = "*" + (" const" if t.const else "") + (" " if t.const and decl else "") + decl
            t = t.pointee
            decl = f"({inner})" if isinstance(t, (Array, FunctionProto)) else inner
            continue
        if isinstance(t, Array):
            decl = f"{decl}[{'' if t.size is None else t.size}]"
            t = t.element
            continue
        if isinstance(t, FunctionProto):
            params = ", ".join(declare(p.type, p.name or "") for p in t.params)
            if t.variadic:
                params = f"{params}, ..." if params else "..."
            decl = f"{decl}({params or 'void'})"
            t = t.result
            continue
        return f"{base(t)} {decl}".rstrip() if decl else base(t)


def base(t: CType) -> str:
    """The specifier part of a declaration (no declarator)."""
    q = _quals(t)
    match t:
        case Builtin() | TypedefRef():
            return f"{q}{t.name}"
        case RecordRef():
            return f"{q}{t.kind} {t.tag}"
        case EnumRef():
            return f"{q}enum {t.tag}"
        case InlineRecord():
            return f"{q}{record_body(t.record)}"
        case InlineEnum():
            body = ", ".join(f"{c.name} = {c.value}" for c in t.enum.constants)
            return f"{q}enum {{ {body} }}"
        case Pointer() | Array() | FunctionProto():  # declarators: declare() peels them off first
            raise TypeError(f"no base type for {t!r}")
        case _:
            assert_never(t)


def record_body(r: Record) -> str:
    """``struct tag { fields }`` (or without tag for an anonymous record)."""
    head = f"{r.kind} {r.tag}" if r.tag else r.kind
    if r.fields is None:
        return head
    return head + " { " + " ".join(field_decl(f) for f in r.fields) + " }"


def field_decl(f: Field) -> str:
    d = declare(f.type, f.name or "")
    if f.bit_width is not None:
        d += f" : {f.bit_width}"
    return d + ";"
