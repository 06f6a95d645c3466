"""The libclang front-end (primary): a translation unit's cursors -> IR."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..diagnostics import Diagnostic, UserError
from ..ir import (
    Array, Builtin, CType, Enum, EnumConstant, EnumRef, Field, Function, FunctionProto,
    Header, InlineEnum, InlineRecord, Location, Macro, Param, Pointer, Record, RecordRef, Typedef, TypedefRef,
)
from . import ParseRequest, gcc_include_dir, not_utf8_macro

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_LINE_SPLICE = re.compile(r"\\\r?\n")


def _cindex() -> Any:
    """The ``clang.cindex`` module (libclang's Python bindings, which ship no type information: Any)."""
    try:
        import clang.cindex as ci
    except ImportError as exc:  # pragma: no cover - an install problem, reported plainly
        raise UserError([Diagnostic(location=Location(file="<libclang>", line=1, col=1),
                                    message=f"libclang is not installed ({exc}); pip install libclang")])
    return ci


class _Translator:
    """Walks one translation unit, keeping only declarations from the vendor's headers."""

    def __init__(self, request: ParseRequest, ci) -> None:  # type: ignore[no-untyped-def]
        self.req = request
        self.ci = ci
        K = ci.TypeKind
        self.builtin_kinds = {
            K.VOID: "void", K.BOOL: "_Bool", K.CHAR_S: "char", K.CHAR_U: "char",
            K.SCHAR: "signed char", K.UCHAR: "unsigned char", K.SHORT: "short",
            K.USHORT: "unsigned short", K.INT: "int", K.UINT: "unsigned int", K.LONG: "long",
            K.ULONG: "unsigned long", K.LONGLONG: "long long", K.ULONGLONG: "unsigned long long",
            K.FLOAT: "float", K.DOUBLE: "double", K.LONGDOUBLE: "long double",
        }
        self.functions: dict[str, Function] = {}
        self.typedefs: dict[str, Typedef] = {}
        self.enums: dict[tuple[str | None, str], Enum] = {}
        self.records: dict[tuple[str, str], Record] = {}
        self.macros: dict[str, Macro] = {}
        self.in_progress: set[tuple[str, str]] = set()
        self.file_cache: dict[str, str | None] = {}
        self.errors: list[Diagnostic] = []

    # -------------------------------------------------------------- helpers
    def vendor_file(self, cursor) -> str | None:  # type: ignore[no-untyped-def]
        f = cursor.location.file
        if f is None:
            return None
        name = f.name
        if name not in self.file_cache:
            self.file_cache[name] = self.req.vendor_relpath(name)
        return self.file_cache[name]

    def loc(self, cursor) -> Location:  # type: ignore[no-untyped-def]
        rel = self.vendor_file(cursor) or "<system>"
        return Location(file=rel, line=cursor.location.line, col=cursor.location.column)

    def fail(self, cursor, message: str) -> UserError:  # type: ignore[no-untyped-def]
        return UserError([Diagnostic(location=self.loc(cursor), message=message)])

    @staticmethod
    def is_unnamed(decl) -> bool:  # type: ignore[no-untyped-def]
        """True for ``struct { ... }`` (clang names such records after their typedef)."""
        spelling = decl.type.spelling
        if "(unnamed" in spelling or "(anonymous" in spelling:
            return True
        return not spelling.startswith(("struct ", "union ", "enum ", "const struct ", "const union ", "const enum "))

    # ---------------------------------------------------------------- types
    def ctype(self, t, at) -> CType:  # type: ignore[no-untyped-def]
        K = self.ci.TypeKind
        const = t.is_const_qualified()
        k = t.kind
        if k == K.ELABORATED:
            inner = self.ctype(t.get_named_type(), at)
            return _with_const(inner, const or _is_const(inner))
        if k in self.builtin_kinds:
            return Builtin(name=self.builtin_kinds[k], const=const)
        if k == K.TYPEDEF:
            decl = t.get_declaration()
            if self.vendor_file(decl) is None:
                return Builtin(name=decl.spelling, const=const)
            return TypedefRef(name=decl.spelling, const=const)
        if k == K.POINTER:
            return Pointer(pointee=self.ctype(t.get_pointee(), at), const=const)
        if k == K.CONSTANTARRAY:
            return Array(element=self.ctype(t.element_type, at), size=t.element_count, const=const)
        if k == K.INCOMPLETEARRAY:
            return Array(element=self.ctype(t.element_type, at), size=None, const=const)
        if k == K.RECORD:
            decl = t.get_declaration()
            kind = "union" if decl.kind == self.ci.CursorKind.UNION_DECL else "struct"
            if self.is_unnamed(decl):
                return InlineRecord(record=self.record(decl, None), const=const)
            self.register_record(decl)
            return RecordRef(kind=kind, tag=decl.spelling, const=const)
        if k == K.ENUM:
            decl = t.get_declaration()
            if self.is_unnamed(decl):
                raise self.fail(at, "an unnamed enum used as a type outside a typedef is not supported")
            self.register_enum(decl)
            return EnumRef(tag=decl.spelling, const=const)
        if k == K.FUNCTIONPROTO:
            params = tuple(Param(name=None, type=self.ctype(a, at)) for a in t.argument_types())
            return FunctionProto(result=self.ctype(t.get_result(), at), params=params,
                                 variadic=t.is_function_variadic(), const=const)
        if k == K.FUNCTIONNOPROTO:
            return FunctionProto(result=self.ctype(t.get_result(), at), params=(), variadic=True, const=const)
        raise self.fail(at, f"unsupported C type '{t.spelling}' (libclang kind {k.spelling})")

    # --------------------------------------------------------- declarations
    def record(self, decl, tag: str | None) -> Record:  # type: ignore[no-untyped-def]
        kind = "union" if decl.kind == self.ci.CursorKind.UNION_DECL else "struct"
        definition = decl.get_definition()
        if definition is None:
            return Record(kind=kind, tag=tag, fields=None, location=self.loc(decl))
        fields = []
        for f in definition.type.get_fields():
            name = f.spelling if _IDENT.match(f.spelling or "") else None
            width = f.get_bitfield_width() if f.is_bitfield() else None
            fields.append(Field(name=name, type=self.ctype(f.type, f), bit_width=width))
        return Record(kind=kind, tag=tag, fields=tuple(fields), location=self.loc(definition))

    def register_record(self, decl) -> None:  # type: ignore[no-untyped-def]
        if self.vendor_file(decl) is None:
            return
        kind = "union" if decl.kind == self.ci.CursorKind.UNION_DECL else "struct"
        key = (kind, decl.spelling)
        existing = self.records.get(key)
        if key in self.in_progress or (existing is not None and existing.fields is not None):
            return
        self.in_progress.add(key)
        try:
            rec = self.record(decl, decl.spelling)
        finally:
            self.in_progress.discard(key)
        if existing is None or rec.fields is not None:
            self.records[key] = rec

    def enum(self, decl, tag: str | None) -> Enum:  # type: ignore[no-untyped-def]
        definition = decl.get_definition() or decl
        constants = tuple(
            EnumConstant(name=c.spelling, value=c.enum_value, location=self.loc(c))
            for c in definition.get_children()
            if c.kind == self.ci.CursorKind.ENUM_CONSTANT_DECL
        )
        return Enum(tag=tag, constants=constants, location=self.loc(definition))

    def register_enum(self, decl) -> None:  # type: ignore[no-untyped-def]
        if self.vendor_file(decl) is None:
            return
        key = (decl.spelling, "enum")
        if key not in self.enums or not self.enums[key].constants:
            self.enums[key] = self.enum(decl, decl.spelling)

    def function(self, c) -> Function:  # type: ignore[no-untyped-def]
        params = tuple(Param(name=a.spelling or None, type=self.ctype(a.type, a)) for a in c.get_arguments())
        return Function(name=c.spelling, result=self.ctype(c.result_type, c), params=params,
                        variadic=c.type.kind == self.ci.TypeKind.FUNCTIONPROTO and c.type.is_function_variadic(),
                        location=self.loc(c))

    def macro(self, c) -> Macro:  # type: ignore[no-untyped-def]
        toks = list(c.get_tokens())
        name = toks[0].spelling
        params: tuple[str, ...] | None = None
        body = toks[1:]
        if (len(toks) > 1 and toks[1].spelling == "("
                and toks[1].extent.start.offset == toks[0].extent.end.offset):
            close = next(i for i, t in enumerate(toks) if t.spelling == ")")
            params = tuple(_LINE_SPLICE.sub("", t.spelling) for t in toks[2:close] if t.spelling != ",")
            body = toks[close + 1:]
        # libclang spells a token that starts a continuation line with the backslash-newline before it
        return Macro(name=name, params=params, tokens=tuple(_LINE_SPLICE.sub("", t.spelling) for t in body),
                     location=self.loc(c))

    def walk(self, tu) -> None:  # type: ignore[no-untyped-def]
        CK = self.ci.CursorKind
        for c in tu.cursor.get_children():
            if self.vendor_file(c) is None:
                continue
            k = c.kind
            if k == CK.FUNCTION_DECL:
                self.functions.setdefault(c.spelling, self.function(c))
            elif k == CK.TYPEDEF_DECL:
                if c.spelling in self.typedefs:
                    continue
                under = c.underlying_typedef_type
                named = under.get_named_type() if under.kind == self.ci.TypeKind.ELABORATED else under
                decl = named.get_declaration()
                if named.kind == self.ci.TypeKind.ENUM and self.is_unnamed(decl):
                    ty: CType = InlineEnum(enum=self.enum(decl, None), const=under.is_const_qualified())
                else:
                    ty = self.ctype(under, c)
                self.typedefs[c.spelling] = Typedef(name=c.spelling, type=ty, location=self.loc(c))
            elif k in (CK.STRUCT_DECL, CK.UNION_DECL):
                if not self.is_unnamed(c):
                    self.register_record(c)
            elif k == CK.ENUM_DECL:
                if self.is_unnamed(c):
                    if c.type.spelling.startswith("enum ") or "(unnamed" in c.type.spelling or "(anonymous" in c.type.spelling:
                        key = (None, f"{self.loc(c)}")
                        self.enums[key] = self.enum(c, None)
                else:
                    self.register_enum(c)
            elif k == CK.MACRO_DEFINITION:
                try:
                    m = self.macro(c)
                except UnicodeDecodeError as exc:  # libclang's token spellings are bytes, decoded as UTF-8
                    self.errors.append(Diagnostic(location=self.loc(c), message=not_utf8_macro(
                        c.spelling, exc.object[exc.start])))
                    continue
                self.macros[m.name] = m


def _is_const(t: CType) -> bool:
    return t.const


def _with_const(t: CType, const: bool) -> CType:
    if t.const == const:
        return t
    from dataclasses import replace
    return replace(t, const=const)


def parse(request: ParseRequest) -> Header:
    ci = _cindex()
    for h in request.headers:
        if not any((d / h).is_file() for d in request.include_dirs):
            dirs = ", ".join(d.as_posix() for d in request.include_dirs) or "(none)"
            raise UserError([Diagnostic(location=request.where,
                                        message=f"header '{h}' not found in the include directories: {dirs}")])
    args = ["-x", "c", "-std=gnu11", "-isystem", gcc_include_dir()]
    for d in request.include_dirs:
        args += ["-I", str(d)]
    for name, value in request.defines:
        args.append(f"-D{name}={value}")
    args += [f"-U{name}" for name in request.undefines]
    index = ci.Index.create()
    opts = ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD | ci.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES
    try:
        tu = index.parse("ia_frontend.c", args=args, unsaved_files=[("ia_frontend.c", request.source())], options=opts)
    except ci.TranslationUnitLoadError as exc:
        raise UserError([Diagnostic(location=request.where, message=f"libclang could not parse the headers: {exc}")])
    translator = _Translator(request, ci)
    errors = []
    for diag in tu.diagnostics:
        if diag.severity >= ci.Diagnostic.Error:
            f = diag.location.file
            rel = (translator.req.vendor_relpath(f.name) or Path(f.name).name) if f else request.primary
            errors.append(Diagnostic(location=Location(file=rel, line=max(1, diag.location.line), col=max(1, diag.location.column)),
                                     message=diag.spelling))
    if errors:
        raise UserError(errors)
    translator.walk(tu)
    if translator.errors:
        raise UserError(translator.errors)
    enums = tuple(translator.enums.values())
    return Header(
        name=request.primary,
        functions=tuple(translator.functions.values()),
        typedefs=tuple(translator.typedefs.values()),
        enums=enums,
        records=tuple(translator.records.values()),
        macros=tuple(translator.macros.values()),
    )
