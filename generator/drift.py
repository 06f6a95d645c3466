"""``ironaccel-gen drift``: what changed in a bound API between two versions of it, and what of the specs it breaks.

A *side* is one version of the libraries: the SDK headers (``--sdk KIND=PATH``, or the SDK ``generate`` would
find) read through the generator's own front-end and binder, or a generated tree (``--old-tree`` /
``--new-tree``: the ``types.cdef``, ``api.cdef``, ``_binding.py`` and ``__init__.py`` ``generate`` wrote).
Each side becomes a :class:`Snapshot` per library: the functions the spec selects, by public name, with
their ABI symbol, version pin and parameters; the enums; the complete structs with their layout (cffi's,
from the same C declarations the generated module compiles); the macro constants.  :func:`compare` turns
two snapshots into :class:`LibraryDrift` rows, and :func:`spec_breaks` lists the spec entries (library
specs and the ``backend.yaml`` role tables) that name something the old side declares and the new one does
not: those would stop ``generate``, and make ``drift`` exit with status 1.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import fnmatch
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from . import resolvers
from .bind import PY_IDENT, Binder, py_name_problem
from .ctypes_util import declare
from .diagnostics import Collector, Diagnostic, UserError, as_given, suggest
from .frontend import FRONTENDS, ParseRequest, parse
from .ir import Function, Header, Location
from .spec import CoreSpec, LibrarySpec, Name, sdk_declarations
from .surface import BackendSpec

__all__ = ["Snapshot", "FunctionInfo", "StructInfo", "LibraryDrift", "SpecBreak", "run",
           "snapshot_sdk", "snapshot_tree", "compare", "spec_breaks"]

EXIT_BREAKS = 1  # something a spec refers to disappears


class _Lenient(Collector):
    """A collector that never raises: the binder's helpers are asked questions, not asked to bind."""

    def error(self, location: Location, message: str) -> None:
        self.items.append(Diagnostic(location=location, message=message))

    def check(self) -> None:
        pass


# ------------------------------------------------------------------------------------------ the model


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionInfo:
    """A bound function as one side declares it.  ex) ``cuCtxCreate`` -> symbol ``cuCtxCreate_v4``, pin 12050"""

    public: str  # ex) cuCtxCreate
    symbol: str  # ex) cuCtxCreate_v4
    pin: int | None  # ex) 12050: the PFN_ typedef version whose prototype is the declaration (None: none)
    result: str  # ex) CUresult
    params: tuple[tuple[str, str, str], ...]  # (name, C type as spelled, C type with typedefs expanded)


@dataclass(frozen=True, slots=True, kw_only=True)
class StructInfo:
    """A complete struct (or union) typedef and its layout.  ex) ``CUDA_MEMCPY3D``: 200 bytes"""

    size: int | None  # None: cffi could not lay it out
    fields: tuple[tuple[str, str, int], ...]  # (name, C type, byte offset)


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """One library as one side declares it."""

    library: str  # ex) cuda.driver
    source: str  # ex) CUDA 13.0 (/usr/local/cuda/include) | tree generated
    version: str | None  # ex) 13.0 (the spec's version_macro), for ``since:``
    functions: dict[str, FunctionInfo]  # the functions bound: selected by the spec, neither skipped nor variadic
    declared: frozenset[str]  # every public function name the side declares (the spec may name any)
    enums: dict[str, dict[str, int]]  # enum (typedef) name -> constant -> value
    structs: dict[str, StructInfo]
    constants: dict[str, int | float | str]  # macro constants the module exports
    typedefs: frozenset[str]
    wrappers: frozenset[str] | None  # rename wrapper macros (ex: __CUDA_API_PTDS); None: a tree does not say

    def enum_constants(self) -> dict[str, int]:
        return {c: v for consts in self.enums.values() for c, v in consts.items()}


# --------------------------------------------------------------------------------------- snapshots


def _functions(b: Binder, spec: LibrarySpec, selected: Iterable[str], publics: dict[str, tuple[Function, str | None]],
               symbols: dict[str, str] | None, pins: dict[str, int] | None) -> dict[str, FunctionInfo]:
    """``symbols``/``pins``: a tree's tables; None: from the header (its renames and version typedefs)."""
    skip = {f.name.value for f in spec.functions if f.skip}
    override = {f.name.value: f.symbol.value for f in spec.functions if f.symbol is not None}
    # a pin is the ABI version the proc_address resolver is asked for (a tree's RESOLVER pins); the resolver itself
    # is found with dlsym, and a library without that resolver pins nothing
    # (a declared kind with via: pinned, ex. proc_address; generator/resolvers.py)
    rs = spec.resolver
    kind = resolvers.declared().get(rs.kind.value) if rs is not None else None
    pinning = rs is not None and kind is not None and kind.via == "pinned"
    versions = b.version_candidates() if pins is None and pinning else {}
    own = rs.get(kind.keys[0].name) if rs is not None and kind is not None and pinning and kind.keys else None
    if isinstance(own, Name):
        versions.pop(own.value, None)
    out = {}
    for name in selected:
        func, _ = publics[name]
        if name in skip or func.variadic:
            continue
        pin = (pins.get(name) if pins is not None else
               b.abi_pin(func, versions[name]) if name in versions else None)
        params = tuple((p.name or f"arg{i}", declare(p.type), declare(b.canonical(p.type)))
                       for i, p in enumerate(func.params))
        out[name] = FunctionInfo(public=name, symbol=symbols[name] if symbols is not None else
                                 override.get(name, func.name), pin=pin, result=declare(func.result), params=params)
    return out


def _layouts(declarations: Iterable[str], structs: Iterable[str]) -> dict[str, StructInfo]:
    """Each struct's size and fields as cffi lays them out from the declarations the module compiles."""
    import cffi

    names = sorted(set(structs))
    ffi = cffi.FFI()
    try:
        ffi.cdef("\n".join(declarations))
    except Exception:  # (cffi raises several kinds) a library cffi cannot read has no layouts, only its names
        return {n: StructInfo(size=None, fields=()) for n in names}
    out = {}
    for n in names:
        try:
            t = ffi.typeof(n)
            size = ffi.sizeof(t)
            fields = tuple((f or "", f_.type.cname, f_.offset) for f, f_ in (t.fields or ()))
        except Exception:  # an opaque or otherwise unsized type: named, not laid out
            out[n] = StructInfo(size=None, fields=())
            continue
        out[n] = StructInfo(size=size, fields=fields)
    return out


def _snapshot(spec: LibrarySpec, core: CoreSpec, header: Header, source: str, symbols: dict[str, str] | None = None,
              pins: dict[str, int] | None = None, constants: dict[str, int | float | str] | None = None) -> Snapshot:
    b = Binder(spec, core, header, _Lenient())
    publics = b.public_names()
    if symbols is not None:  # a tree: what it bound is what its tables list
        publics = {n: v for n, v in publics.items() if n in symbols}
        selected = sorted(publics)
    else:
        selected = b.selected(sorted(publics))
    decls, enums, structs = b.declarations()
    if constants is None:
        constants = {c.name: c.value for c in header.constants if b.in_bound_files(c.location)
                     and PY_IDENT.match(c.name) and not c.name.startswith("_") and py_name_problem(c.name) is None}
    return Snapshot(
        library=f"{spec.vendor}.{spec.library}", source=source, version=b.version,
        functions=_functions(b, spec, selected, publics, symbols, pins), declared=frozenset(publics),
        enums={e.name: {c.name: c.value for c in e.constants} for e in enums},
        structs=_layouts(decls, structs), constants=dict(constants),
        typedefs=frozenset(t.name for t in header.typedefs if b.in_bound_files(t.location)),
        wrappers=None if symbols is not None else frozenset(r.wrapper for r in header.renames if r.wrapper))


def snapshot_sdk(spec: LibrarySpec, core: CoreSpec, override: str | None, descs: dict[str, Any],
                 frontend: str | None = None) -> Snapshot | str:
    """The library as the SDK's headers declare it (``override``: an include directory or SDK root; None: the SDK
    ``generate`` would find), or why there is none."""
    from . import sdk as sdks
    from .pipeline import parse_declared

    name = f"{spec.vendor}.{spec.library}"
    parser = frontend or (spec.frontend if spec.frontend in FRONTENDS else None) or "clang"
    if spec.objc is not None:
        return f"{name}: an Objective-C library (its classes and selectors are not compared)"
    if spec.declarations is not None:
        return _snapshot(spec, core, parse_declared(spec, parser), f"declarations in {spec.path}")
    found = sdks.find(spec.sdk.value, override, spec.headers[0].value, descs)
    if found is None:
        where = f" in {override}" if override else ""
        return f"{name}: no {spec.sdk} SDK headers found{where} ({', '.join(h.value for h in spec.headers)})"
    request = ParseRequest(headers=tuple(h.value for h in spec.headers + spec.version_headers),
                           include_dirs=sdks.include_path(descs.get(spec.sdk.value), found, None, descs)[0],
                           defines=spec.defines, undefines=spec.undefines, where=spec.location)
    header = parse(request, parser)
    return _snapshot(spec, core, header, f"{spec.sdk} {found.version} ({found.include_dir})")


def _literal(tree: ast.Module, name: str) -> Any:
    """The literal value of a module-level ``name = ...`` or ``name: T = ...``, or of a call's ``name=`` keyword."""
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            value = node.value
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = node.value
        elif isinstance(node, ast.keyword) and node.arg == name:
            value = node.value
        else:
            continue
        try:
            return ast.literal_eval(value)  # type: ignore[arg-type]
        except ValueError:
            return None
    return None


def _module_constants(source: str) -> dict[str, int | float | str]:
    """The macro constants of a generated ``__init__.py``: its module-level ``NAME = <literal>`` assignments
    (enum members are ``NAME = Enum.NAME``, the module's own settings are annotated or private)."""
    out: dict[str, int | float | str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and not node.targets[0].id.startswith("_"):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            if isinstance(value, (int, float, str)) and not isinstance(value, bool):
                out[node.targets[0].id] = value
    return out


def tree_library_dir(tree: Path, spec: LibrarySpec) -> Path:
    """Where a generated tree (``generated`` or ``generated/ironaccelerator``) keeps the library's files."""
    package = tree if (tree / "backends").is_dir() and not (tree / "ironaccelerator").is_dir() else tree / "ironaccelerator"
    return package / "backends" / spec.vendor.value / spec.library.value


TREE_FILES = ("types.cdef", "api.cdef", "_binding.py", "__init__.py")


def snapshot_tree(spec: LibrarySpec, core: CoreSpec, tree: Path) -> Snapshot | str:
    """The library as a generated tree binds it, or why there is none."""
    name = f"{spec.vendor}.{spec.library}"
    if spec.objc is not None:
        return f"{name}: an Objective-C library (its classes and selectors are not compared)"
    d = tree_library_dir(tree, spec)
    if not d.is_dir():
        return f"{name}: not generated in {tree}"
    missing = [f for f in TREE_FILES if not (d / f).is_file()]
    if missing:
        return f"{name}: {d} lacks {', '.join(missing)} (not a tree `generate` wrote)"
    try:
        binding = ast.parse((d / "_binding.py").read_text(encoding="utf-8"))
        constants = _module_constants((d / "__init__.py").read_text(encoding="utf-8"))
        types = (d / "types.cdef").read_text(encoding="utf-8")
        api = (d / "api.cdef").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        return f"{name}: cannot read {d}: {exc}"
    rows = _literal(binding, "FUNCTIONS")
    pins = _literal(binding, "pins") or {}
    if not isinstance(rows, tuple) or not all(isinstance(r, tuple) and len(r) >= 2 for r in rows):
        return f"{name}: {d / '_binding.py'} has no FUNCTIONS table"
    symbols = {str(r[0]): str(r[1]) for r in rows}
    # api.cdef: one prototype per bound function under its public name, then the loader's own helpers
    # (filtered out by the FUNCTIONS table) and cffi's extern "Python" callbacks (not C)
    api = "".join(line for line in api.splitlines(True) if not line.startswith('extern "Python"'))
    with tempfile.TemporaryDirectory(prefix="ia-drift-") as tmp:
        h = f"{spec.library}.tree.h"
        (Path(tmp) / h).write_text("#include <stddef.h>\n#include <stdint.h>\n" + types + api, encoding="utf-8")
        request = ParseRequest(headers=(h,), include_dirs=(Path(tmp),), where=Location(file=str(d), line=1, col=1))
        header = parse(request, "clang")
    return _snapshot(spec, core, header, f"tree {tree}", symbols=symbols,
                     pins={str(k): int(v) for k, v in pins.items()}, constants=constants)


# --------------------------------------------------------------------------------------- comparing


@dataclass(frozen=True, slots=True, kw_only=True)
class SpecBreak:
    """A spec entry naming something the old side declares and the new one does not.
    ex) ``specs/cuda/driver.yaml:140:5``, ``function``, ``cuCtxCreate_v3``, ``functions:``"""

    location: Location
    kind: str  # function | parameter | error code | enum constant | constant | macro pattern | pattern | type | ...
    name: str
    entry: str  # the spec key that names it  ex) functions[cuMemAlloc].params  | backend functions: alloc

    def text(self) -> str:
        which = "matches nothing the new side declares" if self.kind.endswith("pattern") else \
            "the new side does not declare"
        return f"{self.location}: {self.entry} names {self.kind} '{self.name}', which {which}"

    def as_json(self) -> dict[str, Any]:
        return {"location": str(self.location), "kind": self.kind, "name": self.name, "entry": self.entry}


@dataclass(kw_only=True)
class LibraryDrift:
    """What changed in one library from the old side to the new, as sorted rows."""

    library: str
    old: str
    new: str
    functions_added: list[str] = field(default_factory=list)
    functions_removed: list[str] = field(default_factory=list)
    symbols: list[tuple[str, str, str]] = field(default_factory=list)  # (public, old symbol, new symbol)
    pins: list[tuple[str, int | None, int | None]] = field(default_factory=list)
    signatures: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)  # (public, changes)
    enums_added: list[str] = field(default_factory=list)
    enums_removed: list[str] = field(default_factory=list)
    enum_values: list[tuple[str, str, str]] = field(default_factory=list)  # (enum, constant, "added 5" | ...)
    structs_added: list[str] = field(default_factory=list)
    structs_removed: list[str] = field(default_factory=list)
    structs: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)  # (struct, changes)
    constants: list[tuple[str, str]] = field(default_factory=list)  # (name, "added 5" | "removed" | "1 -> 2")
    spec: list[SpecBreak] = field(default_factory=list)

    def empty(self) -> bool:
        return not any((self.functions_added, self.functions_removed, self.symbols, self.pins, self.signatures,
                        self.enums_added, self.enums_removed, self.enum_values, self.structs_added,
                        self.structs_removed, self.structs, self.constants, self.spec))

    def as_json(self) -> dict[str, Any]:
        return {
            "old": self.old, "new": self.new,
            "functions": {"added": self.functions_added, "removed": self.functions_removed},
            "symbols": [{"function": f, "old": o, "new": n} for f, o, n in self.symbols],
            "pins": [{"function": f, "old": o, "new": n} for f, o, n in self.pins],
            "signatures": [{"function": f, "changes": list(c)} for f, c in self.signatures],
            "enums": {"added": self.enums_added, "removed": self.enums_removed,
                      "values": [{"enum": e, "name": c, "change": ch} for e, c, ch in self.enum_values]},
            "structs": {"added": self.structs_added, "removed": self.structs_removed,
                        "changed": [{"struct": s, "changes": list(c)} for s, c in self.structs]},
            "constants": [{"name": n, "change": c} for n, c in self.constants],
            "spec": [b.as_json() for b in self.spec],
        }

    def text(self) -> list[str]:
        lines = [f"{self.library}: {self.old} -> {self.new}"]
        lines += [f"  + function {n}" for n in self.functions_added]
        lines += [f"  - function {n}" for n in self.functions_removed]
        lines += [f"  ~ symbol {f}: {o} -> {n}" for f, o, n in self.symbols]
        lines += [f"  ~ pin {f}: {_pin(o)} -> {_pin(n)}" for f, o, n in self.pins]
        lines += [f"  ~ signature {f}: {'; '.join(c)}" for f, c in self.signatures]
        lines += [f"  + enum {n}" for n in self.enums_added]
        lines += [f"  - enum {n}" for n in self.enums_removed]
        lines += [f"  {_mark(ch)} enum value {e}.{c}: {ch}" for e, c, ch in self.enum_values]
        lines += [f"  + struct {n}" for n in self.structs_added]
        lines += [f"  - struct {n}" for n in self.structs_removed]
        lines += [f"  ~ struct {s}: {'; '.join(c)}" for s, c in self.structs]
        lines += [f"  {_mark(ch)} constant {n}: {ch}" for n, ch in self.constants]
        lines += [f"  ! {b.text()}" for b in self.spec]
        if self.empty():
            lines.append("  no changes")
        return lines


def _pin(v: int | None) -> str:
    return "none" if v is None else str(v)


def _mark(change: str) -> str:
    return "+" if change.startswith("added") else "-" if change.startswith("removed") else "~"


def _signature(old: FunctionInfo, new: FunctionInfo) -> tuple[str, ...]:
    """How a function's C signature changed: result, parameters added/removed/renamed, types (typedefs expanded)."""
    out = []
    if old.result != new.result:
        out.append(f"result {old.result} -> {new.result}")
    o = {p[0]: p for p in old.params}
    n = {p[0]: p for p in new.params}
    if len(old.params) == len(new.params) and set(o) != set(n):
        # same arity: a parameter of the same type at the same place under another name is a rename
        for a, b in zip(old.params, new.params):
            if a[0] != b[0] and a[0] not in n and b[0] not in o and a[2] == b[2]:
                out.append(f"parameter {a[0]} renamed {b[0]}")
                o.pop(a[0])
                n.pop(b[0])
    out += [f"parameter {name} removed ({p[1]})" for name, p in o.items() if name not in n]
    out += [f"parameter {name} added ({p[1]})" for name, p in n.items() if name not in o]
    for name, p in o.items():
        if name in n and p[2] != n[name][2]:
            out.append(f"parameter {name} type {p[1]} -> {n[name][1]}")
    if not out and [p[0] for p in old.params] != [p[0] for p in new.params]:
        out.append("parameters reordered: (" + ", ".join(p[0] for p in new.params) + ")")
    return tuple(out)


def _struct(old: StructInfo, new: StructInfo) -> tuple[str, ...]:
    out = []
    if old.size != new.size:
        out.append(f"size {_size(old.size)} -> {_size(new.size)}")
    o = {f[0]: f for f in old.fields}
    n = {f[0]: f for f in new.fields}
    out += [f"field {name} removed ({f[1]}, offset {f[2]})" for name, f in o.items() if name not in n]
    out += [f"field {name} added ({f[1]}, offset {f[2]})" for name, f in n.items() if name not in o]
    for name, f in o.items():
        if name not in n:
            continue
        g = n[name]
        if f[1] != g[1]:
            out.append(f"field {name} type {f[1]} -> {g[1]}")
        if f[2] != g[2]:
            out.append(f"field {name} offset {f[2]} -> {g[2]}")
    return tuple(out)


def _size(v: int | None) -> str:
    return "unknown" if v is None else str(v)


def compare(old: Snapshot, new: Snapshot) -> LibraryDrift:
    """The rows of what changed from ``old`` to ``new`` (both of one library), sorted by name."""
    d = LibraryDrift(library=old.library, old=old.source, new=new.source)
    d.functions_added = sorted(set(new.functions) - set(old.functions))
    d.functions_removed = sorted(set(old.functions) - set(new.functions))
    for name in sorted(set(old.functions) & set(new.functions)):
        a, b = old.functions[name], new.functions[name]
        if a.symbol != b.symbol:
            d.symbols.append((name, a.symbol, b.symbol))
        if a.pin != b.pin:
            d.pins.append((name, a.pin, b.pin))
        changes = _signature(a, b)
        if changes:
            d.signatures.append((name, changes))
    d.enums_added = sorted(set(new.enums) - set(old.enums))
    d.enums_removed = sorted(set(old.enums) - set(new.enums))
    for e in sorted(set(old.enums) & set(new.enums)):
        a_, b_ = old.enums[e], new.enums[e]
        for c in sorted(set(a_) | set(b_)):
            if c not in a_:
                d.enum_values.append((e, c, f"added = {b_[c]}"))
            elif c not in b_:
                d.enum_values.append((e, c, f"removed (was {a_[c]})"))
            elif a_[c] != b_[c]:
                d.enum_values.append((e, c, f"renumbered {a_[c]} -> {b_[c]}"))
    d.structs_added = sorted(set(new.structs) - set(old.structs))
    d.structs_removed = sorted(set(old.structs) - set(new.structs))
    for s in sorted(set(old.structs) & set(new.structs)):
        changes = _struct(old.structs[s], new.structs[s])
        if changes:
            d.structs.append((s, changes))
    for c in sorted(set(old.constants) | set(new.constants)):
        if c not in old.constants:
            d.constants.append((c, f"added = {new.constants[c]!r}"))
        elif c not in new.constants:
            d.constants.append((c, f"removed (was {old.constants[c]!r})"))
        elif old.constants[c] != new.constants[c]:
            d.constants.append((c, f"{old.constants[c]!r} -> {new.constants[c]!r}"))
    return d


# ------------------------------------------------------------------------------- spec references


def _older(version: str | None, since: str | None) -> bool:
    """True when ``version`` predates ``since`` (the spec expects the name to be missing there)."""
    if version is None or since is None:
        return False
    try:
        return tuple(int(x) for x in version.split(".")) < tuple(int(x) for x in since.split("."))
    except ValueError:
        return False


def spec_breaks(spec: LibrarySpec, backends: Iterable[BackendSpec], old: Snapshot, new: Snapshot) -> list[SpecBreak]:
    """Every entry of ``spec`` (and of the backend specs that use the library) whose name the old side declares
    and the new side does not, sorted by location.  (A name missing from both is a spec error ``generate``
    already reports; one excused by ``since:`` is not counted.)"""
    refs: list[tuple[Name, str, str, Any]] = []  # (name, kind, entry, present(snapshot) -> bool)

    def function(s: Snapshot, n: str) -> bool:
        return n in s.declared

    def code(s: Snapshot, n: str) -> bool:
        return n in s.enum_constants() or n in s.constants

    def constant(s: Snapshot, n: str) -> bool:
        return n in s.constants

    def typename(s: Snapshot, n: str) -> bool:
        return n in s.typedefs or n in s.enums

    def pattern(s: Snapshot, p: str) -> bool:
        return any(fnmatch.fnmatchcase(n, p) for n in s.declared)

    def macro_pattern(s: Snapshot, p: str) -> bool:
        return any(fnmatch.fnmatchcase(n, p.lstrip("!")) for n in s.constants)

    for fs in spec.functions:
        if _older(new.version, fs.since):
            continue
        refs.append((fs.name, "function", "functions:", function))
        for ps in fs.params:
            # a parameter of a function both sides declare (a function that is gone is reported once, above)
            def param(s: Snapshot, n: str, f: str = fs.name.value) -> bool:
                info = s.functions.get(f)
                return info is None or any(p[0] == n for p in info.params)
            entry = f"functions: {fs.name.value} params:"
            refs.append((ps.name, "parameter", entry, param))
            if ps.len is not None:
                refs.append((ps.len, "parameter", entry + " len:", param))
            if ps.string is not None and ps.string.length_param is not None:
                refs.append((ps.string.length_param, "parameter", entry + " length_param:", param))
            if ps.string is not None and ps.string.size_function is not None:
                refs.append((ps.string.size_function, "function", entry + " size_function:", function))
        if fs.error_log is not None:
            refs.append((fs.error_log, "function", f"functions: {fs.name.value} error_log:", function))
        refs += [(s, "error code", f"functions: {fs.name.value} status:", code) for s in fs.status]
    refs += [(p, "pattern", "bind: include:", pattern) for p in spec.include]
    refs += [(p, "pattern", "bind: exclude:", pattern) for p in spec.exclude]
    es = spec.errors
    if es.reported:
        refs.append((es.codes or es.type, "type", "errors:", typename))
        code_since = {c.value: v for c, v in es.since}
        codes = list(es.success) + [c for c, _ in es.kinds] + list(es.defaulted)
        refs += [(c, "error code", "errors:", code) for c in codes if not _older(new.version, code_since.get(c.value))]
        refs += [(p, "macro pattern", "errors: macros:", macro_pattern) for p in es.macros]
        if es.name_function is not None:
            refs.append((es.name_function, "function", "errors: name_function:", function))
    refs += [(v, "constant", "version_macro:", constant) for v in spec.version_macro]
    if new.wrappers is not None and old.wrappers is not None:
        refs += [(w, "rename wrapper", "symbols: per_thread:", lambda s, n: n in (s.wrappers or ()))
                 for w, _ in spec.per_thread]
    if spec.resolver is not None:  # a declared kind's functions and constants (generator/resolvers.py)
        for key in resolvers.declared()[spec.resolver.kind.value].keys:
            given = spec.resolver.get(key.name)
            for n in given if isinstance(given, tuple) else (given,) if given is not None else ():
                refs.append((n, "enum constant", "resolver:", code) if key.type == "constant" else
                            (n, "function", f"resolver: {key.name}:", function))
    if spec.table is not None:
        refs.append((spec.table.provider, "function", "resolver: provider:", function))
    if spec.kernel_launch is not None:
        refs.append((spec.kernel_launch, "function", "kernel_launch:", function))
    if spec.pool_memory is not None:
        refs += [(spec.pool_memory.alloc, "function", "pool_memory: alloc:", function),
                 (spec.pool_memory.free, "function", "pool_memory: free:", function)]
    if spec.device_memory is not None:
        refs += [(spec.device_memory.alloc, "function", "device_memory: alloc:", function),
                 (spec.device_memory.free, "function", "device_memory: free:", function)]
    if spec.host_copy is not None:
        refs += [(spec.host_copy.write, "function", "host_copy: write:", function),
                 (spec.host_copy.read, "function", "host_copy: read:", function)]
    for b in backends:
        if old.library not in b.libraries:
            continue
        refs += [(n, "function", f"functions: {r.value}: ({b.path})", function) for r, n in b.functions if n]
        refs += [(n, "enum constant", f"constants: {r.value}: ({b.path})", code) for r, ns in b.constants for n in ns]
        for r, t in b.types:
            base = " ".join(w for w in t.value.replace("*", " ").split() if w != "const")
            refs.append((Name(value=base, location=t.location), "type", f"types: {r.value}: ({b.path})", typename))
    out = {(n.location.file, n.location.line, n.location.col, n.value, entry):
           SpecBreak(location=n.location, kind=kind, name=n.value, entry=entry)
           for n, kind, entry, present in refs if present(old, n.value) and not present(new, n.value)}
    return [out[k] for k in sorted(out)]


# --------------------------------------------------------------------------------------------- CLI


def _arg_error(where: str, message: str) -> UserError:
    return UserError([Diagnostic(location=Location(file=where, line=1, col=1), message=message)])


def run(args: argparse.Namespace) -> int:
    """``ironaccel-gen drift``: print the report; 1 if a spec entry stops matching, else 0 (UserError: 2)."""
    from .pipeline import _display, load_backends, load_specs

    pairs: dict[str, list[str]] = {}
    for item in args.sdk:
        kind, sep, path = item.partition("=")
        if not sep or not kind or not path:
            raise _arg_error("--sdk", f"--sdk expects KIND=PATH, got {item!r}")
        pairs.setdefault(kind, []).append(path)
    for kind, paths in pairs.items():
        if len(paths) > 2:
            raise _arg_error("--sdk", f"--sdk {kind}= given {len(paths)} times: once (both sides) or twice "
                             "(old, then new)")
    paired = sorted(k for k, v in pairs.items() if len(v) == 2)
    trees = (args.old_tree, args.new_tree)
    if paired and any(trees):
        raise _arg_error("--sdk", f"--sdk {paired[0]}= given twice compares two SDKs; with --old-tree/--new-tree "
                         "give each kind once")
    if not paired and not any(trees):
        raise _arg_error("--sdk", "drift compares two sides: --sdk KIND=OLD --sdk KIND=NEW, --old-tree DIR "
                         "--new-tree DIR, or --old-tree DIR against the installed SDK")
    for t in trees:
        if t is not None and not t.is_dir():
            raise _arg_error("--old-tree" if t is args.old_tree else "--new-tree", f"{str(t)!r} is not a directory")
    spec_dir: Path = args.specs
    if not (spec_dir / "core.yaml").is_file():
        raise _arg_error("--specs", f"{str(spec_dir)!r} has no core.yaml (not a spec directory)")
    base = spec_dir.parent
    core, specs, problems = load_specs(spec_dir, base)
    _, backends, backend_problems = load_backends(spec_dir, base)
    problems += backend_problems
    descs, conflicts = sdk_declarations(specs)
    problems += conflicts
    if problems:
        raise UserError(problems)
    known = {f"{s.vendor}.{s.library}": s for s in specs}
    for want in args.only:
        if want not in known:
            raise _arg_error("--only", f"no library spec '{want}' in {_display(spec_dir, base)}{suggest(want, known)}")
    if args.only:
        chosen = [known[n] for n in sorted(set(args.only))]
    elif paired:  # two SDKs: the libraries generated from them
        chosen = [s for n, s in sorted(known.items()) if s.sdk.value in paired]
    else:
        chosen = [s for _, s in sorted(known.items())]

    def side(spec: LibrarySpec, which: int) -> Snapshot | str:
        tree = trees[which]
        if tree is not None:
            return snapshot_tree(spec, core, tree)
        paths = pairs.get(spec.sdk.value, [])
        override = paths[which] if len(paths) == 2 else paths[0] if paths else None
        return snapshot_sdk(spec, core, override, descs, args.frontend)

    drifts: list[LibraryDrift] = []
    skipped: list[str] = []
    for spec in chosen:
        old, new = side(spec, 0), side(spec, 1)
        if isinstance(old, str) or isinstance(new, str):
            skipped += [s for s in (old, new) if isinstance(s, str)]
            continue
        d = compare(old, new)
        d.spec = [dataclasses.replace(b, location=as_given(b.location, spec_dir))
                  for b in spec_breaks(spec, backends, old, new)]
        drifts.append(d)
    breaks = sum(len(d.spec) for d in drifts)
    if args.json:
        print(json.dumps({"libraries": {d.library: d.as_json() for d in drifts}, "skipped": sorted(set(skipped)),
                          "spec_breaks": breaks}, indent=2, sort_keys=True))
    else:
        for s in sorted(set(skipped)):
            print(f"skipped {s}")
        for d in drifts:
            print("\n".join(d.text()))
        print(f"drift: {len(drifts)} librar{'y' if len(drifts) == 1 else 'ies'} compared; {breaks} spec "
              f"entr{'y' if breaks == 1 else 'ies'} would stop matching")
    return EXIT_BREAKS if breaks else 0
