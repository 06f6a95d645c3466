"""The C++-wrappers front-end: C++ headers whose inline methods send Objective-C messages -> the classes and
selectors they stand for, in C terms.

Some Objective-C APIs ship C++ wrapper headers in which every selector is an inline C++ method whose body is the
message send, through a selector symbol and, for a class method, a class symbol that macros name.  The prototype of
each selector can then be read from C++ rather than typed by hand.  With the data of Apple's metal-cpp
(specs/metal/metal.yaml's ``prototypes:``: namespaces ``MTL`` -> prefix ``MTL``, selector symbols
``Private::Selector::s_k``, sends ``sendMessage``)::

    _MTL_INLINE MTL::Buffer* MTL::Device::newBuffer(NS::UInteger length, MTL::ResourceOptions options)
    {
        return Object::sendMessage<MTL::Buffer*>(this, _MTL_PRIVATE_SEL(newBufferWithLength_options_), length, options);
    }

gives ``MTLDevice``, instance method ``newBufferWithLength:options:``, returning ``id``, arguments
``[NSUInteger, MTLResourceOptions]`` (the vocabulary of the ``objc`` spec form: C types in C terms).  The selector's
string comes from its definition ``_MTL_PRIVATE_DEF_SEL(newBufferWithLength_options_, "newBufferWithLength:options:")``
(parsed with the source's ``defines``, so that the definition is a variable ``MTL::Private::Selector::s_k...``
initialised by ``sel_registerName("...")``); a send whose receiver is a class symbol (``_MTL_PRIVATE_CLS(MTLFoo)``:
``Private::Class::s_kMTLFoo``) is a class method (``+``) of ``MTLFoo``.  Argument types are those of the expressions
passed to the send (which is what the message carries), spelled with the typedef names the C++ method declares.

Everything particular to one SDK is the spec's (:class:`~ironaccelerator_gen.prototypes.PrototypeSource`): its
name, how a copy is found (the marker header, an environment variable, the cache the build fetches it into), how its
version is read, the headers and defines, the namespace prefixes and renames, the root class, the selector and
class symbols, the send functions, and the shims: minimal stand-ins for platform headers the wrappers include and
this machine lacks, written into a temporary directory at parse time.  Only declarations *from* the copy's own files
are read.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from .. import data
from ..diagnostics import Diagnostic, UserError
from ..ir import Location
from . import gcc_include_dir

if TYPE_CHECKING:
    from ..prototypes import PrototypeSource

__all__ = ["CFunction", "Method", "Model", "ObjCClass", "find_root", "parse", "version_of"]

CACHE_BASE = data.ROOT  # what a source's cache: is relative to (a checkout's root, where `make` fetches it)


@dataclass(frozen=True, slots=True, kw_only=True)
class Method:
    """One selector of one class, in C terms.  ex) MTLDevice -newBufferWithLength:options: -> id"""

    selector: str  # ex) newBufferWithLength:options:
    class_method: bool  # '+': sent to the class object
    returns: str  # ex) id, NSUInteger, MTLSize, void
    args: tuple[str, ...]  # ex) ("NSUInteger", "MTLResourceOptions")
    cxx: str  # the C++ method it was read from  ex) MTL::Device::newBuffer(NS::UInteger, MTL::ResourceOptions)
    location: Location = field(compare=False)  # the method's definition in the wrapper headers

    @property
    def key(self) -> str:
        """The spec's key for it: ``+sel`` for a class method, ``sel`` for an instance method."""
        return ("+" if self.class_method else "") + self.selector

    def contract(self) -> dict[str, Any]:
        """The spec's per-selector dict {class_method, returns, args}."""
        return {"class_method": self.class_method, "returns": self.returns, "args": list(self.args)}


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjCClass:
    """An Objective-C class or protocol that a wrapper C++ class stands for.  ex) MTLDevice (MTL::Device)"""

    name: str  # ex) MTLDevice
    cxx: str  # ex) MTL::Device
    base: str | None  # ex) NSObject; MTLResource for MTLBuffer; None for NSObject itself
    methods: Mapping[str, Method]  # by key (+sel / sel), sorted


@dataclass(frozen=True, slots=True, kw_only=True)
class CFunction:
    """A plain C entry point the wrapper headers declare.  ex) MTLCreateSystemDefaultDevice -> id, +1"""

    name: str
    returns: str
    args: tuple[str, ...]
    ownership: str  # +1 for Create/Copy functions returning an object (the CoreFoundation rule), else +0
    location: Location = field(compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Model:
    """What the front-end read from one copy of a source's wrapper headers.  ex) metal-cpp 367.4.2"""

    sdk: str  # the source's name  ex) metal-cpp
    root_class: str  # ex) NSObject: the base of a class with no other
    root: Path
    version: str  # ex) 367.4.2
    selectors: Mapping[str, str]  # accessor -> selector string  ex) newBufferWithLength_options_ -> newBuffer...
    class_symbols: tuple[str, ...]  # the class symbols defined (_MTL_PRIVATE_DEF_CLS)  ex) MTLCompileOptions
    classes: Mapping[str, ObjCClass]  # by Objective-C name, sorted
    enums: Mapping[str, Mapping[str, int]]  # ex) MTLResourceOptions -> {MTLResourceStorageModeShared: 0, ...}
    enum_types: Mapping[str, str]  # each enum's integer type  ex) MTLResourceOptions -> NSUInteger
    structs: Mapping[str, tuple[tuple[str, str], ...]]  # value structs' fields  ex) MTLSize -> ((width, NSUInteger),..)
    functions: Mapping[str, CFunction]  # ex) MTLCreateSystemDefaultDevice
    skipped: tuple[str, ...]  # C++ methods with no direct message send (std::function overloads ...), with why
    seconds: float = field(compare=False)  # the parse's time

    def lookup(self, cls: str, key: str) -> Method | None:
        """``key`` (+sel / sel) of ``cls`` or of its bases."""
        seen: set[str] = set()
        c = self.classes.get(cls)
        while c is not None and c.name not in seen:
            seen.add(c.name)
            if key in c.methods:
                return c.methods[key]
            c = self.classes.get(c.base) if c.base else None
        return None

    def keys(self, cls: str) -> list[str]:
        """Every key ``cls`` answers (its own and its bases')."""
        out: set[str] = set()
        seen: set[str] = set()
        c = self.classes.get(cls)
        while c is not None and c.name not in seen:
            seen.add(c.name)
            out.update(c.methods)
            c = self.classes.get(c.base) if c.base else None
        return sorted(out)


def find_root(source: PrototypeSource, override: str | os.PathLike[str] | None = None) -> Path | None:
    """The copy of ``source`` (the directory holding its marker header): ``override``, its ``env``, or its
    ``cache`` (relative to :data:`CACHE_BASE`)."""
    cache = CACHE_BASE / source.cache if source.cache else None
    for cand in (override, os.environ.get(source.env) if source.env else None, cache):
        if cand and (Path(cand) / source.marker).is_file():
            return Path(cand)
    return None


def version_of(source: PrototypeSource, root: Path) -> str:
    """The version of the copy at ``root``: its version macros joined with dots (``version.header``), or
    'unknown'."""
    if source.version_header is None:
        return "unknown"
    try:
        text = (root / source.version_header).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown"
    parts = [re.search(rf"#\s*define\s+{re.escape(name)}\s+(\d+)", text) for name in source.version_macros]
    return ".".join(m.group(1) for m in parts if m) or "unknown"


# ----------------------------------------------------------------------------------------------------- the reader
class _Reader:
    def __init__(self, ci: Any, root: Path, source: PrototypeSource) -> None:
        self.ci = ci
        self.K = ci.CursorKind
        self.T = ci.TypeKind
        self.root = root.resolve()
        self.files: dict[str, str | None] = {}
        self.object_classes: dict[str, bool] = {}
        # the source's data: C++ namespace -> C prefix, renames, the root class and the C++ classes standing for it
        self.prefixes = dict(source.namespaces)
        self.renamed = dict(source.renamed)
        self.root_class = source.root_name
        self.root_cxx = source.root_cxx
        self.root_ns = source.root_cxx.split("::")[0]
        self.root_templates = frozenset(source.root_templates)
        self.sends = frozenset(source.sends)
        self.plumbing = frozenset(source.plumbing)
        *self.selector_scope, self.selector_prefix = source.selector_symbols.split("::")
        *self.class_scope, self.class_prefix = source.class_symbols.split("::")
        # a dependent specialisation of a wrapper template, as libclang spells it  ex) NS::Enumerator<_KeyType>
        self.specialisation = re.compile(
            rf"(const )?(({'|'.join(map(re.escape, self.prefixes))})::)?[A-Z]\w*<.*>\Z" if self.prefixes else
            r"(const )?[A-Z]\w*<.*>\Z")

    def is_root(self, q: list[str]) -> bool:
        """``q`` (a qualified name) is one of the C++ classes standing for the root class.  ex) NS::Referencing"""
        return len(q) == 2 and q[0] == self.root_ns and q[1] in self.root_templates

    # ------------------------------------------------------------------ where
    def rel(self, cursor: Any) -> str | None:
        f = cursor.location.file
        if f is None:
            return None
        if f.name not in self.files:
            try:
                self.files[f.name] = Path(f.name).resolve().relative_to(self.root).as_posix()
            except ValueError:
                self.files[f.name] = None
        return self.files[f.name]

    def loc(self, cursor: Any) -> Location:
        return Location(file=self.rel(cursor) or "<system>", line=cursor.location.line, col=cursor.location.column)

    # ------------------------------------------------------------------ names
    def qualified(self, cursor: Any) -> list[str]:
        """The enclosing namespaces/classes of ``cursor`` and its own name.  ex) ["MTL", "Device"]"""
        parts: list[str] = []
        c = cursor
        while c is not None and c.kind != self.K.TRANSLATION_UNIT:
            if c.kind != self.K.LINKAGE_SPEC:  # extern "C" { ... }
                parts.append(c.spelling)
            c = c.semantic_parent
        return parts[::-1]

    def c_name(self, cursor: Any) -> str | None:
        """The C/Objective-C name of a wrapper declaration at namespace scope.  ex) MTL::Size -> MTLSize"""
        q = self.qualified(cursor)
        if len(q) == 2 and q[0] in self.prefixes and q[1] and "(" not in q[1]:
            name = self.prefixes[q[0]] + q[1]
            return self.renamed.get(name, name)
        return None

    def is_object_class(self, decl: Any) -> bool:
        """True for the C++ classes that stand for Objective-C objects (they derive from the root class's C++
        class; a class only declared, never defined, is one of them: the wrappers forward-declare only those)."""
        usr = decl.get_usr() or decl.spelling
        if usr not in self.object_classes:
            d = decl.get_definition() or decl
            if d.kind == self.K.CLASS_TEMPLATE or (self.qualified(d)[:1] == [self.root_ns] and (
                    d.spelling in self.root_templates)):
                self.object_classes[usr] = True
            elif d.kind == self.K.STRUCT_DECL and d.spelling == "objc_object":
                self.object_classes[usr] = True
            else:
                self.object_classes[usr] = not d.is_definition() or any(
                    ch.kind == self.K.CXX_BASE_SPECIFIER for ch in d.get_children())
        return self.object_classes[usr]

    # ------------------------------------------------------------------ types
    def value_type(self, t: Any) -> str:
        """An argument's or result's type: as :meth:`ctype`, without top-level qualifiers (which do not change what
        is passed: ``const NS::UInteger`` is an NSUInteger, ``const NS::Range&`` passes an NSRange)."""
        s = self.ctype(t)
        if s.startswith("const ") and not s.endswith("*"):
            s = s[len("const "):]
        if s.endswith(" * const"):
            s = s[: -len(" const")]
        return s

    def ctype(self, t: Any) -> str:
        """A C++ type of the wrappers in C terms (see the module's docstring)."""
        T = self.T
        if t.kind in (T.LVALUEREFERENCE, T.RVALUEREFERENCE):
            return self.ctype(t.get_pointee())
        if t.kind == T.ELABORATED:
            return self.ctype(t.get_named_type()) if not t.is_const_qualified() else "const " + self.ctype(
                t.get_named_type())
        const = "const " if t.is_const_qualified() else ""
        if t.kind == T.TYPEDEF:
            decl = t.get_declaration()
            canon = t.get_canonical()
            if canon.kind == T.BLOCKPOINTER:
                return "id"  # a block is an object: its pointer is passed
            name = self.c_name(decl)
            if name is not None:
                if canon.kind == T.POINTER and self._object_pointee(canon.get_pointee()):
                    return "id"
                return const + name
            if decl.spelling in ("id", "SEL", "Class") or self.rel(decl) is None:
                return const + str(decl.spelling)  # a system or shim typedef: uint64_t, CFTimeInterval, IOSurfaceRef
            return self.ctype(decl.underlying_typedef_type) if not const else const + self.ctype(
                decl.underlying_typedef_type)
        if t.kind == T.BOOL:
            return const + "BOOL"
        if t.kind == T.BLOCKPOINTER:
            return "id"
        if t.kind in (T.RECORD, T.ENUM):
            decl = t.get_declaration()
            if t.kind == T.ENUM and (not decl.spelling or "(" in decl.spelling):
                return const + self.ctype(decl.enum_type)
            name = self.c_name(decl)
            return const + (name or t.get_canonical().spelling.replace("const ", ""))
        if t.kind == T.POINTER:
            pointee = t.get_pointee()
            if self._object_pointee(pointee):
                return "id"
            inner = self._pointer_pointee_object(pointee)
            if inner is not None:  # NS::Error** -> NSError **; const Buffer* const* -> id const *
                return inner
            return self.ctype(pointee) + " *" + (" const" if t.is_const_qualified() else "")
        if t.kind in (T.CONSTANTARRAY, T.INCOMPLETEARRAY):  # a parameter: decays to a pointer
            elem = t.element_type
            ec = elem.get_canonical()
            if ec.kind == T.POINTER and self._object_pointee(ec.get_pointee()):
                return "id const *" if elem.is_const_qualified() or ec.is_const_qualified() else "id *"
            return self.ctype(elem) + " *"
        if t.kind == T.UNEXPOSED:
            canon = t.get_canonical()
            if canon.kind != t.kind:
                return self.ctype(canon)
            return const + str(t.spelling)
        return str(t.get_canonical().spelling)

    def _object_pointee(self, pointee: Any) -> bool:
        T = self.T
        p = pointee
        while p.kind == T.ELABORATED:
            p = p.get_named_type()
        if self._template_param(p):
            return True  # NS::Referencing<_Class>: _Class* is the object itself
        c = p.get_canonical()
        if c.kind == T.RECORD:
            return self.is_object_class(c.get_declaration())
        if c.kind == T.UNEXPOSED:  # a dependent specialisation in a template: NS::Enumerator<_KeyType>
            decl = p.get_declaration()
            if decl.kind == self.K.CLASS_TEMPLATE:
                return self.is_object_class(decl)
            return bool(self.specialisation.match(c.spelling or p.spelling))
        return False

    def _template_param(self, t: Any) -> bool:
        """A template's type parameter (libclang's Python bindings have no TypeKind for it: UNEXPOSED)."""
        return bool(t.kind == self.T.UNEXPOSED and (t.get_declaration().kind == self.K.TEMPLATE_TYPE_PARAMETER or
                                                     t.get_canonical().spelling.startswith("type-parameter-")))

    def _pointer_pointee_object(self, pointee: Any) -> str | None:
        """For a pointer to an object pointer: ``NSError **`` (an out-parameter), else ``id *`` / ``id const *``."""
        c = pointee.get_canonical()
        if c.kind != self.T.POINTER or not self._object_pointee(c.get_pointee()):
            return None
        decl = c.get_pointee().get_canonical().get_declaration()
        name = self.c_name(decl)
        if name == "NSError" and not c.is_const_qualified():
            return "NSError **"
        return "id const *" if c.is_const_qualified() else "id *"


def _peel(ci: Any, cursor: Any) -> Any:
    K = ci.CursorKind
    while cursor.kind in (K.UNEXPOSED_EXPR, K.PAREN_EXPR) and len(list(cursor.get_children())) == 1:
        cursor = next(cursor.get_children())
    return cursor


def parse(source: PrototypeSource, root: Path | None = None, headers: Iterable[str] | None = None) -> Model:
    """Read the copy of ``source`` at ``root`` (default :func:`find_root`): its ``headers`` (default the
    source's).  UserError (located) if it is missing or does not parse."""
    t0 = time.perf_counter()
    sdk = source.sdk.value
    root = root or find_root(source)
    where = Location(file=f"<{sdk}>", line=1, col=1)
    if root is None or not (root / source.marker).is_file():
        places = [f"${source.env}"] if source.env else []
        if source.cache:
            places.append(str(CACHE_BASE / source.cache))
        searched = " or ".join(places) or f"--sdk {sdk}=PATH"
        raise UserError([Diagnostic(location=where, message=(
            f"{sdk} not found ({source.marker} under {searched})" + (
                f"; `{source.fetch}` fetches it" if source.fetch else "")))])
    try:
        import clang.cindex as ci
    except ImportError as exc:  # pragma: no cover - an install problem
        raise UserError([Diagnostic(location=where, message=f"libclang is not installed ({exc})")])
    with tempfile.TemporaryDirectory(prefix="ia-objc-cpp-shims-") as shim_dir:
        for rel, text in source.shims:
            p = Path(shim_dir, rel)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        args = ["-x", "c++", "-std=c++17", "-fblocks", "-I", str(root), "-isystem", shim_dir,
                *(f"-D{d}" for d in source.defines)]
        gcc = gcc_include_dir()
        if gcc:
            args += ["-isystem", gcc]
        src = "".join(f"#include <{h}>\n" for h in (source.headers if headers is None else headers))
        tu = ci.Index.create().parse("wrappers_all.cpp", args=args, unsaved_files=[("wrappers_all.cpp", src)])
        reader = _Reader(ci, root, source)
        errors = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
        if errors:
            out = []
            for d in errors[:20]:
                f = d.location.file
                where_file = str(f.name) if f else f"<{sdk}>"
                if f and Path(where_file).resolve().is_relative_to(reader.root):
                    where_file = Path(where_file).resolve().relative_to(reader.root).as_posix()
                out.append(Diagnostic(location=Location(file=where_file,
                                                        line=d.location.line, col=d.location.column),
                                      message=f"{sdk} does not parse: {d.spelling}"))
            raise UserError(out)
        model = _read(reader, tu, root)
    return Model(sdk=sdk, root_class=source.root_name, version=version_of(source, root), **model,
                 seconds=time.perf_counter() - t0)


def _read(r: _Reader, tu: Any, root: Path) -> dict[str, Any]:
    ci, K = r.ci, r.K
    selectors: dict[str, str] = {}
    class_symbols: set[str] = set()
    methods: dict[str, dict[str, Method]] = {}
    cxx_of: dict[str, str] = {r.root_class: r.root_cxx}
    bases: dict[str, str | None] = {r.root_class: None}
    enums: dict[str, dict[str, int]] = {}
    enum_types: dict[str, str] = {}
    structs: dict[str, tuple[tuple[str, str], ...]] = {}
    functions: dict[str, CFunction] = {}
    skipped: list[str] = []
    bodies: list[Any] = []

    def string_literal(c: Any) -> str | None:
        for n in c.walk_preorder():
            if n.kind == K.STRING_LITERAL:
                tok = n.spelling
                return tok[1:-1] if tok.startswith('"') and tok.endswith('"') else None
        return None

    def visit(c: Any, depth: int) -> None:
        for ch in c.get_children():
            if r.rel(ch) is None:
                continue
            k = ch.kind
            if k == K.NAMESPACE:
                visit(ch, depth + 1)
            elif k == K.VAR_DECL:
                q = r.qualified(ch)
                if q[1:-1] == r.selector_scope and ch.spelling.startswith(r.selector_prefix):
                    lit = string_literal(ch)  # the selector macro's definition: sel_registerName("sel:")
                    if lit is not None:
                        selectors[ch.spelling[len(r.selector_prefix):]] = lit
                elif q[1:-1] == r.class_scope and ch.spelling.startswith(r.class_prefix):
                    class_symbols.add(ch.spelling[len(r.class_prefix):])
            elif k in (K.CLASS_DECL, K.STRUCT_DECL, K.CLASS_TEMPLATE) and ch.is_definition():
                q = r.qualified(ch)
                if len(q) == 2 and q[0] in r.prefixes and not r.is_root(q) and r.is_object_class(ch):
                    name = r.prefixes[q[0]] + q[1]
                    cxx_of.setdefault(name, "::".join(q))
                    bases.setdefault(name, _base(r, ch))
                elif len(q) == 2 and q[0] in r.prefixes and k == K.STRUCT_DECL:  # a value struct: MTL::Size
                    structs.setdefault(r.prefixes[q[0]] + q[1], tuple(
                        (f.spelling, r.value_type(f.type)) for f in ch.get_children() if f.kind == K.FIELD_DECL))
                for m in ch.get_children():  # methods defined in the class body
                    if m.kind in (K.CXX_METHOD, K.FUNCTION_TEMPLATE) and m.is_definition():
                        bodies.append(m)
            elif k in (K.CXX_METHOD, K.FUNCTION_TEMPLATE) and ch.is_definition():
                bodies.append(ch)
            elif k == K.ENUM_DECL and ch.is_definition():
                _enum(r, ch, enums, enum_types)
            elif k == K.FUNCTION_DECL and len(r.qualified(ch)) == 1 and ch.linkage == ci.LinkageKind.EXTERNAL:
                name = ch.spelling
                if name not in functions:
                    ret = r.value_type(ch.result_type)
                    functions[name] = CFunction(
                        name=name, returns=ret, args=tuple(r.value_type(a.type) for a in ch.get_arguments()),
                        ownership="+1" if ret == "id" and re.search(r"(Create|Copy)", name) else "+0",
                        location=r.loc(ch))
            elif k == K.LINKAGE_SPEC:
                visit(ch, depth)

    visit(tu.cursor, 0)
    for m in bodies:
        _method(r, m, selectors, methods, skipped)
    for m_cls in methods:
        bases.setdefault(m_cls, r.root_class if m_cls != r.root_class else None)
    classes = {
        name: ObjCClass(name=name, cxx=cxx_of.get(name, name), base=bases.get(name, r.root_class),
                        methods=dict(sorted(methods.get(name, {}).items())))
        for name in sorted(set(methods) | set(cxx_of))
    }
    return dict(root=root, selectors=dict(sorted(selectors.items())), class_symbols=tuple(sorted(class_symbols)),
                classes=classes,
                enums={k: dict(sorted(v.items(), key=lambda kv: (kv[1], kv[0]))) for k, v in sorted(enums.items())},
                enum_types=dict(sorted(enum_types.items())), structs=dict(sorted(structs.items())),
                functions=dict(sorted(functions.items())), skipped=tuple(sorted(set(skipped))))


def _base(r: _Reader, cls: Any) -> str | None:
    """The Objective-C superclass (or inherited protocol) of a wrapper class: ``NS::Referencing<Buffer, Resource>``
    -> MTLResource; ``NS::Referencing<Device>`` -> NSObject (the root class)."""
    for ch in cls.get_children():
        if ch.kind != r.K.CXX_BASE_SPECIFIER:
            continue
        t = ch.type
        n = t.get_num_template_arguments()
        if n >= 2:
            arg = t.get_template_argument_type(1)
            decl = arg.get_canonical().get_declaration()
            name = r.c_name(decl)
            if name:
                return name
        decl = t.get_canonical().get_declaration()
        name = r.c_name(decl)
        if name and decl.spelling not in r.root_templates:
            return name
        return r.root_class
    return None


def _enum(r: _Reader, e: Any, enums: dict[str, dict[str, int]], types: dict[str, str]) -> None:
    q = r.qualified(e)
    if len(q) != 2 or q[0] not in r.prefixes:
        return
    prefix = r.prefixes[q[0]]
    anonymous = not e.spelling or "(" in e.spelling  # libclang spells it "(unnamed enum at ...)"
    name = r.ctype(e.enum_type) if anonymous else prefix + e.spelling  # `enum : ResourceOptions` -> its typedef
    if not name or " " in name:
        return
    under = e.enum_type
    if anonymous and under.kind in (r.T.TYPEDEF, r.T.ELABORATED):  # `using ResourceOptions = NS::UInteger`
        decl = under.get_declaration()
        under = decl.underlying_typedef_type if decl.kind in (r.K.TYPEDEF_DECL, r.K.TYPE_ALIAS_DECL) else under
    types.setdefault(name, r.value_type(under))
    consts = enums.setdefault(name, {})
    for c in e.get_children():
        if c.kind == r.K.ENUM_CONSTANT_DECL:
            consts[prefix + c.spelling] = c.enum_value


def _callee(r: _Reader, call: Any) -> str:
    """The name a call calls; in a template, where the call is dependent (``sendMessage<_Class*>(this, ...)``
    has no spelling), the name of the overload set its first child refers to."""
    if call.spelling:
        return str(call.spelling)
    for ch in call.get_children():
        for n in ch.walk_preorder():
            if n.kind == r.K.OVERLOADED_DECL_REF:
                return str(n.spelling)
        break
    return ""


def _send_args(r: _Reader, call: Any) -> list[Any]:
    """The arguments of a send (receiver, selector, message arguments)."""
    args = list(call.get_arguments())
    if args or call.spelling:
        return args
    return list(call.get_children())[1:]  # a dependent call: its callee, then the arguments


def _method(r: _Reader, m: Any, selectors: Mapping[str, str], out: dict[str, dict[str, Method]],
            skipped: list[str]) -> None:
    K = r.K
    parent = m.semantic_parent
    q = r.qualified(parent)
    if len(q) != 2 or q[0] not in r.prefixes:
        return
    is_root = r.is_root(q)
    cls = r.root_class if is_root else r.prefixes[q[0]] + q[1]
    cxx = f"{'::'.join(q)}::{m.displayname}"
    sends = [n for n in m.walk_preorder() if n.kind == K.CALL_EXPR and _callee(r, n) in r.sends]
    if not sends:
        # worth saying only of an object's method (not of the root class's or the wrappers' own plumbing, nor of
        # a struct's helpers)
        if not is_root and parent.kind != K.STRUCT_DECL and q[1] not in r.plumbing:
            skipped.append(f"{cxx}: no message send")
        return
    call = sends[0]
    args = _send_args(r, call)
    if len(args) < 2:
        skipped.append(f"{cxx}: a send with {len(args)} arguments")
        return
    sel_ref = _peel(r.ci, args[1])
    accessor = sel_ref.referenced.spelling[len(r.selector_prefix):] if sel_ref.referenced is not None and (
        sel_ref.referenced.spelling.startswith(r.selector_prefix)) else None
    if accessor is None or accessor not in selectors:
        skipped.append(f"{cxx}: the selector is not a selector symbol")
        return
    selector = selectors[accessor]
    recv = _peel(r.ci, args[0])
    class_method = False
    if recv.kind == K.CXX_THIS_EXPR:
        pass
    elif recv.kind == K.DECL_REF_EXPR and recv.referenced is not None and r.qualified(recv.referenced)[
            1:1 + len(r.class_scope)] == r.class_scope:  # a class symbol: a class method of the class it names
        class_method = True
        cls = recv.referenced.spelling[len(r.class_prefix):]
    elif m.is_static_method() and recv.kind == K.DECL_REF_EXPR and recv.referenced is not None and (
            recv.referenced.kind == K.PARM_DECL):
        # NS::Object::alloc(const void* pClass): sent to the class given; respondsToSelector(const void* pObj, ...):
        # to the object given
        class_method = "Class" in recv.referenced.spelling
    else:
        skipped.append(f"{cxx}: the receiver is neither this nor a class symbol")
        return
    params = {p.spelling: p for p in m.get_arguments()}
    spec_types = list(call.referenced.type.argument_types()) if call.referenced is not None else []
    c_args: list[str] = []
    for i, a in enumerate(args[2:], start=2):
        inner = _peel(r.ci, a)
        t = a.type
        if inner.kind == K.DECL_REF_EXPR and inner.referenced is not None and inner.referenced.kind == K.PARM_DECL and (
                inner.spelling in params):
            t = params[inner.spelling].type
        elif t.kind == r.T.INVALID and i < len(spec_types):
            t = spec_types[i]
        c_args.append(r.value_type(t))
    ret = r.value_type(m.result_type)
    if call.type.kind != r.T.DEPENDENT and call.type.get_canonical().spelling != m.result_type.get_canonical(
    ).spelling and m.result_type.kind != r.T.VOID:
        ret = r.value_type(call.type)
    if m.result_type.kind == r.T.VOID:
        ret = "void"
    method = Method(selector=selector, class_method=class_method, returns=ret, args=tuple(c_args), cxx=cxx,
                    location=r.loc(m))
    out.setdefault(cls, {}).setdefault(method.key, method)


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - a developer's dump
    """``python -m ironaccelerator_gen.frontend.objc_cpp SPEC [CLASS ...]``: print what the prototype source of the
    objc spec ``SPEC`` (ex. specs/metal/metal.yaml) gives."""
    import sys

    from ..spec import load_library

    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m ironaccelerator_gen.frontend.objc_cpp SPEC [CLASS ...]", file=sys.stderr)
        return 2
    spec = load_library(Path(args[0]))
    if spec.objc is None or spec.objc.prototypes is None:
        print(f"{args[0]}: no resolver prototypes: section", file=sys.stderr)
        return 2
    model = parse(spec.objc.prototypes)
    print(f"{model.sdk} {model.version} at {model.root}: {len(model.classes)} classes, "
          f"{sum(len(c.methods) for c in model.classes.values())} methods, {len(model.selectors)} selectors, "
          f"{len(model.enums)} enums, {len(model.functions)} C functions in {model.seconds:.2f} s")
    for name in args[1:]:
        c = model.classes[name]
        print(f"{name} ({c.cxx}) : {c.base}")
        for m in c.methods.values():
            print(f"  {m.key}: {m.returns} ({', '.join(m.args)})")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
