"""The pycparser front-end (secondary): ``gcc -E -dD`` output -> pycparser AST -> IR.

It must produce exactly the IR the libclang front-end produces (``==``, which
ignores locations) before the shared macro pass.  The pipeline:

1. ``gcc -E -dD`` preprocesses the one-file translation unit.  GCC extensions
   pycparser cannot parse (``__attribute__``, ``__extension__`` ...) are
   neutralised with ``-D`` on the command line, which does not change the
   vendor's own ``#define`` lines that ``-dD`` reports.
2. The output is split by its line markers: text from the vendor's headers is
   kept (with ``# N "relpath"`` markers so pycparser's coordinates name the
   vendor file), ``#define`` lines from vendor headers become :class:`Macro`,
   and system-header text is dropped.  A prelude of ``typedef int NAME;`` lets
   pycparser know the system typedef names the vendor text uses (the C standard
   ``stddef.h``/``stdint.h`` names, plus typedefs found in the dropped text);
   those names become ``Builtin(name=...)``, as in the libclang front-end.
3. The AST is translated with the libclang front-end's rules (see ``clang.py``).
   Constant expressions (enum values, array sizes, bit-field widths) are
   evaluated here with C's integer typing (``1u << 31``, ``-7 / 2``, casts,
   ``sizeof`` under the LP64 ABI).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any, NoReturn

from pycparser import c_ast, c_parser  # type: ignore[import-untyped]

from ..diagnostics import Diagnostic, UserError
from ..ir import (
    Array, Builtin, CType, Enum, EnumConstant, EnumRef, Field, Function, FunctionProto,
    Header, InlineEnum, InlineRecord, Location, Macro, Param, Pointer, Record, RecordRef, Typedef, TypedefRef,
)
from . import ParseRequest, cint, macros, not_utf8_macro

__all__ = ["parse"]

# GCC extensions that pycparser cannot parse, removed or renamed by the preprocessor.
_NEUTRALISE = (
    "__attribute__(x)=", "__extension__=", "__asm__(x)=", "__asm(x)=", "__declspec(x)=",
    "__inline__=inline", "__inline=inline", "__restrict__=restrict", "__restrict=restrict",
    "__const=const", "__volatile__=volatile", "__signed__=signed", "__alignof__=_Alignof",
    "__forceinline=",
)

# The typedef names of the C standard's <stddef.h> and <stdint.h>.
_STANDARD_TYPEDEFS = (
    "size_t", "ptrdiff_t", "wchar_t", "max_align_t",
    "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
    "int_least8_t", "int_least16_t", "int_least32_t", "int_least64_t",
    "uint_least8_t", "uint_least16_t", "uint_least32_t", "uint_least64_t",
    "int_fast8_t", "int_fast16_t", "int_fast32_t", "int_fast64_t",
    "uint_fast8_t", "uint_fast16_t", "uint_fast32_t", "uint_fast64_t",
    "intptr_t", "uintptr_t", "intmax_t", "uintmax_t",
)

# (bits, signed) of system typedefs under glibc's x86-64 (LP64) ABI, for casts and sizeof.
_SYSTEM_INT_TYPES = cint.SYSTEM_INT_TYPES

_BUILTIN_WORDS = frozenset(("void", "_Bool", "char", "short", "int", "long", "float", "double", "signed", "unsigned"))

# size (= alignment) of the arithmetic types under LP64
_BUILTIN_SIZES = {
    "void": 1, "_Bool": 1, "char": 1, "signed char": 1, "unsigned char": 1, "short": 2, "unsigned short": 2,
    "int": 4, "unsigned int": 4, "long": 8, "unsigned long": 8, "long long": 8, "unsigned long long": 8,
    "float": 4, "double": 8, "long double": 16,
}
_BUILTIN_INTS = cint.BUILTIN_INTS

_MARKER = re.compile(r'#\s*(\d+)\s+"((?:[^"\\]|\\.)*)"')
_GCC_DIAG = re.compile(r"^(.*?):(\d+):(?:(\d+):)?\s*(?:fatal )?error:\s*(.*)$")
_PARSE_ERROR = re.compile(r"^(.*?):(\d+)(?::(\d+))?:\s*(.*)$", re.S)
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TAG_RE = re.compile(r"\b(struct|union|enum)\s+([A-Za-z_][A-Za-z0-9_]*)")
_PRELUDE_FILE = "<ia-prelude>"
_DOLLAR_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_NOT_UTF8 = re.compile("[\udc80-\udcff]")  # a byte that is not UTF-8, as surrogateescape decodes it


def _unquote_file(name: str | None) -> str | None:
    """A ``# N "file"`` marker's file name, with its C escapes undone."""
    return re.sub(r"\\(.)", r"\1", name) if name and "\\" in name else name


def _fail(location: Location, message: str) -> NoReturn:
    raise UserError([Diagnostic(location=location, message=message)])


# ----------------------------------------------------------------- preprocessing


def _run_gcc(request: ParseRequest) -> str:
    args = ["gcc", "-E", "-dD", "-std=gnu11"]
    args += [f"-D{n}" for n in _NEUTRALISE]
    for d in request.include_dirs:
        args += ["-I", str(d)]
    for name, value in request.defines:
        args.append(f"-D{name}={value}")
    args += [f"-U{name}" for name in request.undefines]
    args += ["-x", "c", "-"]
    try:
        proc = subprocess.run(args, input=request.source().encode(), capture_output=True)
    except OSError as exc:
        _fail(request.where, f"cannot run the C preprocessor gcc: {exc}")
    if proc.returncode != 0:
        errors = []
        for line in proc.stderr.decode("utf-8", "replace").splitlines():
            m = _GCC_DIAG.match(line)
            if m is None:
                continue
            path = m.group(1)
            if path.startswith("<"):
                loc = request.where
            else:
                rel = request.vendor_relpath(path) or Path(path).name
                loc = Location(file=rel, line=max(1, int(m.group(2))), col=max(1, int(m.group(3) or 1)))
            errors.append(Diagnostic(location=loc, message=m.group(4)))
        if not errors:
            tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-5:]
            errors.append(Diagnostic(location=request.where,
                                     message="gcc could not preprocess the headers: " + " / ".join(tail)))
        raise UserError(errors)
    # bytes that are not UTF-8 (a Latin-1 string in a header) are kept as lone surrogates, for _Split to place
    return proc.stdout.decode("utf-8", "surrogateescape")


class _Split:
    """gcc -dD output split into vendor C text, vendor macros and facts about the system text."""

    def __init__(self, request: ParseRequest, text: str) -> None:
        self.macros: dict[str, Macro] = {}
        self.errors: list[Diagnostic] = []
        vendor: list[str] = []
        system: list[str] = []
        cache: dict[str, str | None] = {}
        rel: str | None = None
        lineno = 1
        emitted: tuple[str | None, int] = (None, 0)  # where pycparser thinks the next line is
        for line in text.splitlines():
            if line.startswith("#"):
                m = _MARKER.match(line)
                if m is not None:
                    name = _unquote_file(m.group(2)) or ""
                    if name not in cache:
                        cache[name] = None if name.startswith("<") else request.vendor_relpath(name)
                    rel = cache[name]
                    lineno = int(m.group(1))
                    continue
                if rel is not None and line.startswith("#define "):
                    bad = _NOT_UTF8.search(line)
                    if bad is None:
                        self.macro(line[len("#define "):], rel, lineno)
                    else:
                        ident = _IDENT_RE.match(line, len("#define "))
                        self.errors.append(Diagnostic(location=Location(file=rel, line=lineno, col=9),
                                                      message=not_utf8_macro(ident.group() if ident else "?",
                                                                             ord(bad.group()) - 0xDC00)))
                lineno += 1  # #define, #undef, #pragma: not C text
                continue
            # (C text is only read for declarations, where libclang ignores such bytes too)
            line = _NOT_UTF8.sub("?", line)
            if rel is not None:
                if emitted != (rel, lineno):
                    quoted = rel.replace("\\", "\\\\").replace('"', '\\"')
                    vendor.append(f'# {lineno} "{quoted}"')
                vendor.append(line)
                emitted = (rel, lineno + 1)
            elif line:
                system.append(line)
            lineno += 1
        self.vendor_text = "\n".join(vendor) + "\n"
        system_text = "\n".join(system)
        self.system_tags = {m.group(2) for m in _TAG_RE.finditer(system_text)}
        used = set(_IDENT_RE.findall(self.vendor_text))
        names = (set(_STANDARD_TYPEDEFS) | _typedef_names(system_text)) & used
        self.system_typedefs = names
        prelude = "".join(f"typedef int {n};\n" for n in sorted(names))
        self.text = f'# 1 "{_PRELUDE_FILE}"\n{prelude}{self.vendor_text}'

    def macro(self, body: str, rel: str, lineno: int) -> None:
        try:
            name, params, tokens = macros.from_define_line(body)
        except ValueError:
            m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)(\(([^)]*)\))?\s*(.*)\Z", body, re.S)
            if m is None:
                return
            name = m.group(1)
            params = None if m.group(2) is None else tuple(p.strip() for p in m.group(3).split(",") if p.strip())
            tokens = _loose_tokens(m.group(4))
        self.macros[name] = Macro(name=name, params=params, tokens=tokens,
                                  location=Location(file=rel, line=lineno, col=9))


def _loose_tokens(text: str) -> tuple[str, ...]:
    """Like macros.tokenize, but a character it cannot place becomes a token of its own."""
    out: list[str] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        ident = _DOLLAR_IDENT.match(text, pos)
        if ident is not None and "$" in ident.group():  # GCC and clang allow $ in identifiers
            out.append(ident.group())
            pos = ident.end()
            continue
        m = macros._TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            out.append(text[pos])
            pos += 1
            continue
        out.append(m.group(m.lastgroup or "op"))
        pos = m.end()
    return tuple(out)


def _typedef_names(text: str) -> set[str]:
    """The names declared by file-scope ``typedef`` declarations in (system) C text, roughly."""
    names: set[str] = set()
    for m in re.finditer(r"\btypedef\b", text):
        i = m.end()
        depth = 0
        start = i
        parts = []
        while i < len(text):
            ch = text[i]
            if ch == "{":
                if depth == 0:
                    parts.append(text[start:i])
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    start = i + 1
            elif ch == ";" and depth == 0:
                parts.append(text[start:i])
                break
            i += 1
        decl = re.sub(r"\[[^\]]*\]", "", " ".join(parts))
        level = 0
        piece_start = 0
        pieces = []
        for j, ch in enumerate(decl):
            if ch == "(":
                level += 1
            elif ch == ")":
                level -= 1
            elif ch == "," and level == 0:
                pieces.append(decl[piece_start:j])
                piece_start = j + 1
        pieces.append(decl[piece_start:])
        for p in pieces:
            fp = re.search(r"\(\s*\*+\s*(?:const\s+)?([A-Za-z_]\w*)\s*\)", p)
            if fp:
                names.add(fp.group(1))
                continue
            p = p.strip()
            while p.endswith(")"):
                k = _open_paren(p)
                if k <= 0:
                    break
                p = p[:k].rstrip()
            ids = _IDENT_RE.findall(p)
            if ids:
                names.add(ids[-1])
    return names - _BUILTIN_WORDS


def _open_paren(s: str) -> int:
    level = 0
    for k in range(len(s) - 1, -1, -1):
        if s[k] == ")":
            level += 1
        elif s[k] == "(":
            level -= 1
            if level == 0:
                return k
    return -1


# ------------------------------------------------------------ constant evaluation

# (C integer arithmetic is cint's, shared with the macro pass)
_INT, _LONG, _ULONG = cint.INT, cint.LONG, cint.ULONG
_wrap, _fits, _common, _promote = cint.wrap, cint.fits, cint.common, cint.promote


_ESCAPES = {"n": 10, "t": 9, "r": 13, "0": 0, "a": 7, "b": 8, "f": 12, "v": 11, "\\": 92, "'": 39, '"': 34, "?": 63, "e": 27}


_NotConstant = cint.NotConstant


# ------------------------------------------------------------------- translation


class _Translator:
    def __init__(self, request: ParseRequest, split: _Split) -> None:
        self.req = request
        self.system_tags = split.system_tags
        self.functions: dict[str, Function] = {}
        self.typedefs: dict[str, Typedef] = {}
        self.enums: dict[Any, Enum] = {}
        self.records: dict[tuple[str, str], Record] = {}
        self.in_progress: set[tuple[str, str]] = set()
        # filled by the pre-pass
        self.record_defs: dict[tuple[str, str], c_ast.Node] = {}
        self.enum_defs: dict[str, c_ast.Enum] = {}
        self.enum_consts: dict[int, tuple[EnumConstant, ...]] = {}
        self.env: dict[str, tuple[int, tuple[int, bool]]] = {}
        self.typedef_nodes: dict[str, c_ast.Node] = {}
        self.anon = 0

    # ------------------------------------------------------------ helpers
    def loc(self, node: Any) -> Location:
        coord = getattr(node, "coord", None)
        if coord is None:
            return Location(file=self.req.primary, line=0, col=0)
        return Location(file=_unquote_file(coord.file) or self.req.primary, line=coord.line or 0, col=coord.column or 0)

    def fail(self, node: Any, message: str) -> NoReturn:
        _fail(self.loc(node), message)

    def is_vendor_tag(self, key: tuple[str, str]) -> bool:
        return key in self.record_defs or key[1] not in self.system_tags

    # ------------------------------------------------------------ pre-pass
    def collect(self, node: Any) -> None:
        """Record definitions and enum values, in source order (enumerators may use earlier ones)."""
        if node is None:
            return
        if isinstance(node, (c_ast.Decl, c_ast.Typedef, c_ast.Typename, c_ast.TypeDecl, c_ast.PtrDecl, c_ast.ArrayDecl)):
            self.collect(node.type)
        elif isinstance(node, c_ast.FuncDecl):
            self.collect(node.type)
            if node.args is not None:
                for p in node.args.params:
                    if isinstance(p, (c_ast.Decl, c_ast.Typename)):
                        self.collect(p)
        elif isinstance(node, (c_ast.Struct, c_ast.Union)):
            if node.decls is not None:
                kind = "union" if isinstance(node, c_ast.Union) else "struct"
                if node.name is not None:
                    self.record_defs.setdefault((kind, node.name), node)
                for d in node.decls:
                    if isinstance(d, c_ast.Decl):
                        self.collect(d)
        elif isinstance(node, c_ast.Enum):
            if node.values is not None:
                if node.name is not None:
                    self.enum_defs.setdefault(node.name, node)
                self.enum_values(node)

    def enum_values(self, node: c_ast.Enum) -> None:
        consts = []
        prev: int | None = None
        for e in node.values.enumerators:
            if e.value is not None:
                v, t = self.const_expr(e.value)
            else:
                v = 0 if prev is None else prev + 1
                t = _INT if _fits(v, _INT) else (_LONG if _fits(v, _LONG) else _ULONG)
            # C: an enumeration constant that fits in int has type int (clang keeps wider values wide)
            self.env[e.name] = (v, _INT if _fits(v, _INT) else t)
            consts.append(EnumConstant(name=e.name, value=v, location=self.loc(e)))
            prev = v
        self.enum_consts[id(node)] = tuple(consts)

    # -------------------------------------------------- constant expressions
    def const_expr(self, node: Any) -> tuple[int, tuple[int, bool]]:
        try:
            return self.ev(node)
        except _NotConstant as exc:
            detail = f": {exc}" if str(exc) else ""
            self.fail(node, f"cannot evaluate the constant expression{detail}")
        except (ZeroDivisionError, RecursionError):
            self.fail(node, "cannot evaluate the constant expression")

    def const_int(self, node: Any) -> int:
        return self.const_expr(node)[0]

    def ev(self, n: Any) -> tuple[int, tuple[int, bool]]:
        if isinstance(n, c_ast.Constant):
            if n.type == "char":
                return self.char_constant(n.value), _INT
            if n.type in ("int", "unsigned int", "long int", "unsigned long int", "long long int",
                          "unsigned long long int") or re.match(r"\d", n.value):
                return cint.literal(n.value)
            raise _NotConstant(f"'{n.value}' is not an integer")
        if isinstance(n, c_ast.ID):
            if n.name in self.env:
                return self.env[n.name]
            raise _NotConstant(f"'{n.name}' is not a constant")
        if isinstance(n, c_ast.UnaryOp):
            if n.op in ("sizeof", "_Alignof", "alignof"):
                if isinstance(n.expr, c_ast.Typename):
                    size, align = self.layout(n.expr.type)
                else:
                    size, align = self.expr_layout(n.expr)
                return (size if n.op == "sizeof" else align), _ULONG
            v, t = self.ev(n.expr)
            return cint.unary(n.op, v, t)
        if isinstance(n, c_ast.BinaryOp):
            op = n.op
            if op in ("&&", "||"):
                a = self.ev(n.left)[0]
                if op == "&&":
                    return (int(bool(self.ev(n.right)[0])) if a else 0), _INT
                return (1 if a else int(bool(self.ev(n.right)[0]))), _INT
            a, ta = self.ev(n.left)
            b, tb = self.ev(n.right)
            return cint.binary(op, a, ta, b, tb)
        if isinstance(n, c_ast.TernaryOp):
            c = self.ev(n.cond)[0]
            x, tx = self.ev(n.iftrue)
            y, ty = self.ev(n.iffalse)
            t = _common(_promote(tx), _promote(ty))
            return _wrap(x if c else y, *t), t
        if isinstance(n, c_ast.Cast):
            v, _ = self.ev(n.expr)
            bits, signed = self.int_type(n.to_type.type)
            if bits == 1:
                return int(bool(v)), _INT
            v = _wrap(v, bits, signed)
            return v, _promote((bits, signed))
        raise _NotConstant(type(n).__name__)

    @staticmethod
    def char_constant(text: str) -> int:
        body = text[1:-1] if text.startswith("'") else text[2:-1]
        if not body.startswith("\\"):
            if len(body) != 1:
                raise _NotConstant(f"character constant {text}")
            return ord(body)
        esc = body[1:]
        if esc[:1] == "x":
            v = int(esc[1:], 16)
        elif esc[:1].isdigit():
            v = int(esc, 8)
        elif esc in _ESCAPES:
            v = _ESCAPES[esc]
        else:
            raise _NotConstant(f"character constant {text}")
        return _wrap(v, 8, True)

    def int_type(self, node: Any) -> tuple[int, bool]:
        """(bits, signed) of a type named in a cast; bits == 1 for _Bool."""
        if isinstance(node, c_ast.PtrDecl):
            return (64, False)
        if isinstance(node, c_ast.TypeDecl):
            spec = node.type
            if isinstance(spec, c_ast.IdentifierType):
                name = _builtin_name(spec.names)
                if name is not None:
                    if name not in _BUILTIN_INTS:
                        raise _NotConstant(f"cast to '{name}'")
                    return _BUILTIN_INTS[name]
                tname = spec.names[-1]
                if tname in self.typedef_nodes:
                    return self.int_type(self.typedef_nodes[tname])
                if tname in _SYSTEM_INT_TYPES:
                    return _SYSTEM_INT_TYPES[tname]
                raise _NotConstant(f"cast to '{tname}'")
            if isinstance(spec, c_ast.Enum):
                return self.enum_int_type(spec)
        raise _NotConstant("cast to a non-integer type")

    def enum_constants_of(self, spec: c_ast.Enum) -> tuple[EnumConstant, ...]:
        node = spec if spec.values is not None else self.enum_defs.get(spec.name or "")
        return self.enum_consts.get(id(node), ()) if node is not None else ()

    def enum_int_type(self, spec: c_ast.Enum) -> tuple[int, bool]:
        values = [c.value for c in self.enum_constants_of(spec)]
        if not values:
            return (32, False)
        lo, hi = min(values), max(values)
        if lo >= 0:
            return (32, False) if hi < 1 << 32 else (64, False)
        return (32, True) if lo >= -(1 << 31) and hi < 1 << 31 else (64, True)

    def layout(self, node: Any) -> tuple[int, int]:
        """(size, alignment) of a type under the LP64 ABI."""
        if isinstance(node, c_ast.Typename):
            return self.layout(node.type)
        if isinstance(node, c_ast.PtrDecl):
            return 8, 8
        if isinstance(node, c_ast.ArrayDecl):
            size, align = self.layout(node.type)
            if node.dim is None:
                raise _NotConstant("sizeof an array of unknown size")
            return size * self.ev(node.dim)[0], align
        if isinstance(node, c_ast.TypeDecl):
            spec = node.type
            if isinstance(spec, c_ast.IdentifierType):
                name = _builtin_name(spec.names)
                if name is not None:
                    s = _BUILTIN_SIZES[name]
                    return s, s
                tname = spec.names[-1]
                if tname in self.typedef_nodes:
                    return self.layout(self.typedef_nodes[tname])
                if tname in _SYSTEM_INT_TYPES:
                    s = _SYSTEM_INT_TYPES[tname][0] // 8
                    return s, s
                raise _NotConstant(f"sizeof '{tname}'")
            if isinstance(spec, c_ast.Enum):
                s = self.enum_int_type(spec)[0] // 8
                return s, s
            if isinstance(spec, (c_ast.Struct, c_ast.Union)):
                kind = "union" if isinstance(spec, c_ast.Union) else "struct"
                d = spec if spec.decls is not None else self.record_defs.get((kind, spec.name or ""))
                if d is None:
                    raise _NotConstant(f"sizeof an incomplete {kind}")
                return self.record_layout(d, kind == "union")
        raise _NotConstant("sizeof this type")

    def record_layout(self, node: Any, union: bool) -> tuple[int, int]:
        """(size, alignment) of a struct/union body under the SysV x86-64 rules, bit-fields included."""
        bit = 0  # struct: the next free bit; union: the largest member, in bits
        align = 1
        for d in node.decls:
            if not isinstance(d, c_ast.Decl):
                continue
            ty = d.type
            if d.name is None and isinstance(ty, (c_ast.Struct, c_ast.Union, c_ast.Enum)):
                if isinstance(ty, c_ast.Enum) or ty.name is not None:
                    continue  # declares a tag, not a member
                fs, fa = self.record_layout(ty, isinstance(ty, c_ast.Union))
            elif isinstance(ty, c_ast.ArrayDecl) and ty.dim is None:
                fs, fa = 0, self.layout(ty.type)[1]
            else:
                fs, fa = self.layout(ty)
            if d.bitsize is not None:
                width = self.ev(d.bitsize)[0]
                unit = 8 * fa
                if union:
                    bit = max(bit, width)
                elif width == 0:
                    bit = -(-bit // unit) * unit
                else:
                    if bit // unit != (bit + width - 1) // unit:
                        bit = -(-bit // unit) * unit
                    bit += width
                if d.name is not None:
                    align = max(align, fa)
                continue
            align = max(align, fa)
            if union:
                bit = max(bit, 8 * fs)
            else:
                bit = -(-bit // (8 * fa)) * (8 * fa) + 8 * fs
        size = -(-bit // 8)
        return -(-size // align) * align, align

    def expr_layout(self, n: Any) -> tuple[int, int]:
        if isinstance(n, c_ast.ID) and n.name in self.env:
            s = self.env[n.name][1][0] // 8
            return s, s
        if isinstance(n, c_ast.Constant):
            if n.type == "char":
                return 4, 4
            s = self.ev(n)[1][0] // 8
            return s, s
        raise _NotConstant("sizeof an expression")

    # ---------------------------------------------------------------- types
    def ctype(self, node: Any) -> CType:
        if isinstance(node, c_ast.TypeDecl):
            return self.spec_type(node.type, "const" in node.quals, node)
        if isinstance(node, c_ast.PtrDecl):
            return Pointer(pointee=self.ctype(node.type), const="const" in node.quals)
        if isinstance(node, c_ast.ArrayDecl):
            size = None if node.dim is None else self.const_int(node.dim)
            return Array(element=self.ctype(node.type), size=size)
        if isinstance(node, c_ast.FuncDecl):
            params, variadic = self.params(node, named=False)
            # no prototype, ``void (*)()``: libclang's FUNCTIONNOPROTO, no params and variadic
            return FunctionProto(result=self.ctype(node.type), params=params, variadic=variadic is not False)
        if isinstance(node, c_ast.Typename):
            return self.ctype(node.type)
        self.fail(node, f"unsupported C type ({type(node).__name__})")

    def spec_type(self, spec: Any, const: bool, at: Any) -> CType:
        if isinstance(spec, c_ast.IdentifierType):
            name = _builtin_name(spec.names)
            if name is not None:
                return Builtin(name=name, const=const)
            if len(spec.names) != 1:
                self.fail(at, f"unsupported C type '{' '.join(spec.names)}'")
            tname = spec.names[0]
            if tname in self.typedef_nodes:
                return TypedefRef(name=tname, const=const)
            return Builtin(name=tname, const=const)
        if isinstance(spec, (c_ast.Struct, c_ast.Union)):
            kind = "union" if isinstance(spec, c_ast.Union) else "struct"
            if spec.name is None:
                return InlineRecord(record=self.record(kind, None, spec), const=const)
            self.register_record(kind, spec.name, spec)
            return RecordRef(kind=kind, tag=spec.name, const=const)
        if isinstance(spec, c_ast.Enum):
            if spec.name is None:
                self.fail(at, "an unnamed enum used as a type outside a typedef is not supported")
            self.register_enum(spec.name, spec)
            return EnumRef(tag=spec.name, const=const)
        self.fail(at, f"unsupported C type ({type(spec).__name__})")

    def params(self, fd: c_ast.FuncDecl, named: bool) -> tuple[tuple[Param, ...], bool | None]:
        """A prototype's parameters and whether it is variadic (None: no prototype, ``f()``)."""
        if fd.args is None:
            return (), None
        plist = list(fd.args.params)
        variadic = bool(plist) and isinstance(plist[-1], c_ast.EllipsisParam)
        if variadic:
            plist.pop()
        if len(plist) == 1 and _is_void(plist[0]):
            return (), variadic
        out = []
        for p in plist:
            if isinstance(p, (c_ast.Decl, c_ast.Typename)):
                out.append(Param(name=(p.name or None) if named else None, type=self.ctype(p.type)))
            else:
                self.fail(p, "an identifier list (K&R-style declaration) is not supported")
        return tuple(out), variadic

    # --------------------------------------------------------- declarations
    def record(self, kind: str, tag: str | None, node: Any, at: Any = None) -> Record:
        """The record ``node`` defines; without a definition, an opaque one located at its first mention
        (``at``, as libclang locates it), not at no location."""
        if node is None or node.decls is None:
            return Record(kind=kind, tag=tag, fields=None, location=self.loc(node if node is not None else at))
        fields = []
        for d in node.decls:
            if not isinstance(d, c_ast.Decl):
                continue
            ty = d.type
            if d.name is None and isinstance(ty, (c_ast.Struct, c_ast.Union, c_ast.Enum)):
                if isinstance(ty, c_ast.Enum) or ty.name is not None:
                    continue  # declares a tag (and enumerators), not a member
                fields.append(Field(name=None, type=InlineRecord(record=self.record(
                    "union" if isinstance(ty, c_ast.Union) else "struct", None, ty))))
                continue
            width = None if d.bitsize is None else self.const_int(d.bitsize)
            fields.append(Field(name=d.name or None, type=self.ctype(ty), bit_width=width))
        return Record(kind=kind, tag=tag, fields=tuple(fields), location=self.loc(node))

    def register_record(self, kind: str, tag: str, at: Any = None) -> None:
        key = (kind, tag)
        if not self.is_vendor_tag(key):
            return
        existing = self.records.get(key)
        if key in self.in_progress or (existing is not None and existing.fields is not None):
            return
        self.in_progress.add(key)
        try:
            rec = self.record(kind, tag, self.record_defs.get(key), at)
        finally:
            self.in_progress.discard(key)
        if existing is None or rec.fields is not None:
            self.records[key] = rec

    def enum(self, spec: c_ast.Enum, tag: str | None) -> Enum:
        node = spec if spec.values is not None else self.enum_defs.get(spec.name or "", spec)
        return Enum(tag=tag, constants=self.enum_constants_of(spec), location=self.loc(node))

    def register_enum(self, tag: str, at: c_ast.Enum) -> None:
        if tag not in self.enum_defs and tag in self.system_tags:
            return
        key = (tag, "enum")
        if key not in self.enums or not self.enums[key].constants:
            self.enums[key] = self.enum(self.enum_defs.get(tag, at), tag)

    def tag_declarations(self, ty: Any, typedef: bool) -> None:
        """The tags a file-scope declaration's specifiers declare (libclang's top-level tag cursors)."""
        direct = True
        while isinstance(ty, (c_ast.PtrDecl, c_ast.ArrayDecl, c_ast.FuncDecl)):
            ty = ty.type
            direct = False
        if isinstance(ty, c_ast.TypeDecl):
            ty = ty.type
        else:
            direct = False if not isinstance(ty, (c_ast.Struct, c_ast.Union, c_ast.Enum)) else direct
        if isinstance(ty, (c_ast.Struct, c_ast.Union)):
            if ty.name is not None:
                self.register_record("union" if isinstance(ty, c_ast.Union) else "struct", ty.name, ty)
        elif isinstance(ty, c_ast.Enum):
            if ty.name is not None:
                self.register_enum(ty.name, ty)
            elif ty.values is not None and not (typedef and direct):
                self.anon += 1
                self.enums[(None, self.anon)] = self.enum(ty, None)

    def function(self, decl: c_ast.Decl) -> None:
        fd = decl.type
        params, variadic = self.params(fd, named=True)
        result = self.ctype(fd.type)
        self.functions.setdefault(decl.name, Function(
            name=decl.name, result=result, params=params, variadic=bool(variadic), location=self.loc(decl)))

    def typedef(self, td: c_ast.Typedef) -> None:
        self.tag_declarations(td.type, typedef=True)
        if td.name in self.typedefs:
            return
        t = td.type
        if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.Enum) and t.type.name is None:
            ty: CType = InlineEnum(enum=self.enum(t.type, None), const="const" in t.quals)
        else:
            ty = self.ctype(t)
        self.typedefs[td.name] = Typedef(name=td.name, type=ty, location=self.loc(td))

    def walk(self, ast: c_ast.FileAST) -> None:
        exts = [e for e in ast.ext if getattr(e.coord, "file", None) != _PRELUDE_FILE]
        for e in exts:
            if isinstance(e, c_ast.Typedef):
                self.typedef_nodes.setdefault(e.name, e.type)
        for e in exts:
            if isinstance(e, c_ast.FuncDef):
                self.collect(e.decl)
            elif isinstance(e, (c_ast.Decl, c_ast.Typedef)):
                self.collect(e)
        for e in exts:
            if isinstance(e, c_ast.FuncDef):
                self.function(e.decl)
            elif isinstance(e, c_ast.Typedef):
                self.typedef(e)
            elif isinstance(e, c_ast.Decl):
                if isinstance(e.type, c_ast.FuncDecl):
                    self.tag_declarations(e.type.type, typedef=False)
                    self.function(e)
                else:
                    self.tag_declarations(e.type, typedef=False)
                    fd = self.function_typedef(e.type)
                    if fd is not None:
                        self.function_via_typedef(e, fd)

    def function_typedef(self, ty: Any) -> c_ast.FuncDecl | None:
        """The function type behind ``fn_t name;`` when ``fn_t`` is a vendor typedef of a function type."""
        seen = set()
        while (isinstance(ty, c_ast.TypeDecl) and isinstance(ty.type, c_ast.IdentifierType)
               and len(ty.type.names) == 1 and ty.type.names[0] in self.typedef_nodes):
            name = ty.type.names[0]
            if name in seen:
                return None
            seen.add(name)
            ty = self.typedef_nodes[name]
        return ty if isinstance(ty, c_ast.FuncDecl) else None

    def function_via_typedef(self, decl: c_ast.Decl, fd: c_ast.FuncDecl) -> None:
        # libclang: the implicit parameters are unnamed, and the declaration's type is the
        # typedef (not a FUNCTIONPROTO), so the clang front-end reports it as not variadic.
        params, _ = self.params(fd, named=False)
        result = self.ctype(fd.type)
        self.functions.setdefault(decl.name, Function(
            name=decl.name, result=result, params=params, variadic=False, location=self.loc(decl)))


def _builtin_name(names: list[str]) -> str | None:
    """The canonical spelling of an arithmetic type's specifiers, or None for a typedef name."""
    if not names or any(w not in _BUILTIN_WORDS for w in names):
        return None
    words = set(names)
    longs = names.count("long")
    unsigned = "unsigned" in words
    for single in ("void", "_Bool", "float"):
        if single in words:
            return single
    if "double" in words:
        return "long double" if longs else "double"
    if "char" in words:
        return "unsigned char" if unsigned else "signed char" if "signed" in words else "char"
    prefix = "unsigned " if unsigned else ""
    if "short" in words:
        return prefix + "short"
    if longs >= 2:
        return prefix + "long long"
    if longs == 1:
        return prefix + "long"
    return prefix + "int"


def _is_void(p: Any) -> bool:
    if not isinstance(p, (c_ast.Typename, c_ast.Decl)) or p.name:
        return False
    t = p.type
    return (isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType)
            and t.type.names == ["void"] and not t.quals)


def parse(request: ParseRequest) -> Header:
    for h in request.headers:
        if not any((d / h).is_file() for d in request.include_dirs):
            dirs = ", ".join(d.as_posix() for d in request.include_dirs) or "(none)"
            raise UserError([Diagnostic(location=request.where,
                                        message=f"header '{h}' not found in the include directories: {dirs}")])
    split = _Split(request, _run_gcc(request))
    if split.errors:
        raise UserError(split.errors)
    try:
        ast = c_parser.CParser().parse(split.text, request.primary)
    except c_parser.ParseError as exc:
        m = _PARSE_ERROR.match(str(exc))
        if m is not None and m.group(1) != _PRELUDE_FILE:
            loc = Location(file=_unquote_file(m.group(1)) or request.primary, line=int(m.group(2)), col=max(1, int(m.group(3) or 1)))
            message = m.group(4)
        else:
            loc, message = request.where, str(exc)
        raise UserError([Diagnostic(location=loc, message=f"pycparser could not parse the headers: {message}")])
    translator = _Translator(request, split)
    translator.walk(ast)
    return Header(
        name=request.primary,
        functions=tuple(translator.functions.values()),
        typedefs=tuple(translator.typedefs.values()),
        enums=tuple(translator.enums.values()),
        records=tuple(translator.records.values()),
        macros=tuple(split.macros.values()),
    )
