"""Header front-ends: translate a vendor's C headers into :mod:`ironaccelerator_gen.ir`.

Each front-end only translates; interpretation of macros (constants, renames)
is the shared pure pass :func:`ironaccelerator_gen.frontend.macros.interpret`.
"""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import assert_never

from ..diagnostics import Diagnostic, UserError
from ..ir import (
    Array, Builtin, CType, EnumRef, FunctionProto, Header, InlineEnum, InlineRecord, Location, Pointer, RecordRef, TypedefRef,
)

__all__ = ["ParseRequest", "parse", "gcc_include_dir", "not_utf8_macro", "check_depth", "FRONTENDS", "MAX_TYPE_DEPTH"]

FRONTENDS = ("clang", "pycparser")


@dataclass(frozen=True, slots=True, kw_only=True)
class ParseRequest:
    """What to parse: ``#include`` each of ``headers`` with ``include_dirs`` on the path."""

    headers: tuple[str, ...]  # ex) ("cuda.h", "cudaTypedefs.h")
    include_dirs: tuple[Path, ...]  # the SDK's include directories: the "vendor's own headers"
    defines: tuple[tuple[str, str], ...] = ()  # ex) (("CL_TARGET_OPENCL_VERSION", "300"),)
    undefines: tuple[str, ...] = ()  # ex) ("__SSE__",): predefined macros to drop (-U)
    where: Location  # the spec entry that asked for this parse, for errors

    @property
    def primary(self) -> str:
        return self.headers[0]

    def source(self) -> str:
        """The one-file translation unit that includes every header."""
        return "".join(f"#include <{h}>\n" for h in self.headers)

    def vendor_relpath(self, path: str) -> str | None:
        """``path`` relative to its include directory, or None if it is not a vendor header.

        Vendor headers are those under the directories of the requested headers: all of
        ``/usr/local/cuda/include`` for ``cuda.h``, but only ``/usr/include/CL`` for ``CL/cl.h``.
        """
        p = Path(path).resolve()
        for d in self.include_dirs:
            root = d.resolve()
            try:
                rel = p.relative_to(root)
            except ValueError:
                continue
            if any(rel.as_posix().startswith(sub) for sub in self._vendor_subdirs()):
                return rel.as_posix()
        return None

    def _vendor_subdirs(self) -> tuple[str, ...]:
        subs = {Path(h).parent.as_posix() for h in self.headers}
        return tuple("" if s == "." else s + "/" for s in sorted(subs))


def not_utf8_macro(name: str, byte: int) -> str:
    """The message for a ``#define`` whose body is not UTF-8 (both front-ends report it alike)."""
    return f"macro '{name}' is not UTF-8 text: byte 0x{byte:02x} in its definition"


@functools.cache
def gcc_include_dir() -> str:
    """GCC's own include directory (stddef.h), which libclang needs to parse ``size_t`` right."""
    try:
        out = subprocess.run(["gcc", "-print-file-name=include"], capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


# How deeply a declaration's type may nest (pointer to pointer ..., arrays, function prototypes, inline
# records): the binder and the renderers recurse once per level.  Vendor APIs need a handful.
MAX_TYPE_DEPTH = 64


def _type_depth(t: CType) -> int:
    """The nesting depth of ``t`` (a plain type: 0, ``int **``: 2), counted without recursion."""
    deepest = 0
    todo: list[tuple[CType, int]] = [(t, 0)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        if depth > MAX_TYPE_DEPTH:
            break
        match node:
            case Pointer():
                todo.append((node.pointee, depth + 1))
            case Array():
                todo.append((node.element, depth + 1))
            case FunctionProto():
                todo += [(node.result, depth + 1)] + [(p.type, depth + 1) for p in node.params]
            case InlineRecord():
                todo += [(f.type, depth + 1) for f in node.record.fields or ()]
            case Builtin() | TypedefRef() | RecordRef() | EnumRef() | InlineEnum():
                pass  # a leaf
            case _:
                assert_never(node)
    return deepest


def check_depth(header: Header) -> None:
    """Refuse declarations nested past :data:`MAX_TYPE_DEPTH`, located at the declaration."""
    decls: list[tuple[str, Location, tuple[CType, ...]]] = []
    decls += [(f.name, f.location, (f.result, *(p.type for p in f.params))) for f in header.functions]
    decls += [(t.name, t.location, (t.type,)) for t in header.typedefs]
    decls += [(r.tag or "(unnamed)", r.location, tuple(f.type for f in r.fields or ())) for r in header.records]
    errors = [Diagnostic(location=loc, message=f"the type of '{name}' nests more than {MAX_TYPE_DEPTH} levels "
                         "deep (pointers, arrays, prototypes, records); such a declaration cannot be bound")
              for name, loc, types in decls if any(_type_depth(t) > MAX_TYPE_DEPTH for t in types)]
    if errors:
        raise UserError(errors)


def parse(request: ParseRequest, frontend: str = "clang") -> Header:
    """Parse with the named front-end, check how deeply declarations nest, and run the shared macro pass."""
    from . import macros

    if frontend == "clang":
        from . import clang as fe
    elif frontend == "pycparser":
        from . import pycparser_fe as fe  # type: ignore[no-redef]
    else:
        raise ValueError(f"unknown front-end {frontend!r}; expected one of {FRONTENDS}")
    try:
        header = fe.parse(request)
    except RecursionError:  # a front-end translates a type once per level of nesting
        raise UserError([Diagnostic(location=request.where, message=f"a declaration in {request.primary} nests "
                                    f"more than {MAX_TYPE_DEPTH} levels deep (pointers, arrays, prototypes, "
                                    "records); such a declaration cannot be bound")]) from None
    check_depth(header)
    return macros.interpret(header)
