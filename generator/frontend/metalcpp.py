"""The metal-cpp front-end: Apple's metal-cpp headers (C++, Apache-2.0) -> Metal's classes and selectors in C terms.

Metal has no C header: its API is Objective-C.  metal-cpp wraps every selector in an inline C++ method whose body
is the message send, so the prototype of each selector can be read from C++ rather than typed by hand::

    _MTL_INLINE MTL::Buffer* MTL::Device::newBuffer(NS::UInteger length, MTL::ResourceOptions options)
    {
        return Object::sendMessage<MTL::Buffer*>(this, _MTL_PRIVATE_SEL(newBufferWithLength_options_), length, options);
    }

gives ``MTLDevice``, instance method ``newBufferWithLength:options:``, returning ``id``, arguments
``[NSUInteger, MTLResourceOptions]`` (the vocabulary of the ``objc`` spec form: C types in C terms).  The selector's
string comes from its definition ``_MTL_PRIVATE_DEF_SEL(newBufferWithLength_options_, "newBufferWithLength:options:")``
(parsed with ``MTL_PRIVATE_IMPLEMENTATION`` defined, so the definition is a variable initialised by
``sel_registerName("...")``); a send whose receiver is ``_MTL_PRIVATE_CLS(MTLFoo)`` is a class method (``+``) of
``MTLFoo``.  Argument types are those of the expressions passed to the send (which is what the message carries),
spelled with the typedef names the C++ method declares.

metal-cpp is fetched at build time (``make``: the ``pymetal-cpp`` sdist, ``.venv/sdk/metal-cpp``), never vendored.
It includes a few Apple platform headers that Linux lacks (``TargetConditionals.h``, ``objc/runtime.h`` ...): the
minimal declarations it needs of them are written here (:data:`SHIMS`, our own text) into a temporary directory at
parse time.  Only declarations *from* metal-cpp's own files are read.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ..diagnostics import Collector, Diagnostic, UserError, suggest
from ..ir import Location
from . import gcc_include_dir

if TYPE_CHECKING:
    from ..spec import LibrarySpec

__all__ = [
    "METAL_CPP_VERSION", "METAL_CPP_DIST", "DEFAULT_ROOT", "SHIMS", "Method", "ObjCClass", "CFunction", "MetalCpp",
    "Request", "find_root", "parse", "ownership", "render_classes", "requests_from_yaml", "c_type_names",
    "fill_spec", "version_of",
]

ROOT = Path(__file__).resolve().parent.parent.parent
METAL_CPP_DIST = "pymetal-cpp==0.1.5"  # the sdist carrying thirdparty/metal-cpp (Makefile: fetch-metal-cpp.sh)
METAL_CPP_VERSION = "367.4.2"  # METALCPP_VERSION_MAJOR/MINOR/PATCH of that copy (Metal/MTLVersion.hpp)
DEFAULT_ROOT = ROOT / ".venv" / "sdk" / "metal-cpp"  # where `make` unpacks it
ENV_ROOT = "IRONACCEL_METAL_CPP"  # another copy: the directory holding Metal/ and Foundation/
HEADERS = ("Foundation/Foundation.hpp", "Metal/Metal.hpp")

# Namespaces of metal-cpp and the prefix their names take in Objective-C/C (NS::UInteger -> NSUInteger,
# MTL::Size -> MTLSize, MTL::Device -> MTLDevice).
PREFIXES = {"NS": "NS", "MTL": "MTL", "CA": "CA", "MTLFX": "MTLFX", "MTL4": "MTL4"}
# The few whose C name is not the prefix + the C++ name
RENAMED = {"NSunichar": "unichar"}
# NS::Object's base templates: their methods are NSObject's
NSOBJECT_TEMPLATES = {"Object", "Referencing", "Copying", "SecureCoding"}

# Minimal declarations of the Apple platform headers metal-cpp includes, so that it parses on Linux.  Written for
# this project (not Apple's text): only the names metal-cpp uses, with the ABI-relevant shape (id, SEL and Class are
# pointers; objc_object is complete because NS::Object derives from it; blocks are parsed with -fblocks).
SHIMS: Mapping[str, str] = {
    "TargetConditionals.h": "#pragma once\n#define TARGET_OS_OSX 1\n",
    "objc/runtime.h": (
        "#pragma once\n"
        "typedef struct objc_class *Class;\n"
        "struct objc_object { Class isa; };\n"
        "typedef struct objc_object *id;\n"
        "typedef struct objc_selector *SEL;\n"
        'extern "C" SEL sel_registerName(const char *name);\n'
        'extern "C" Class objc_lookUpClass(const char *name);\n'
        'extern "C" void *objc_getProtocol(const char *name);\n'),
    "objc/message.h": (
        "#pragma once\n#include <objc/runtime.h>\n"
        'extern "C" void objc_msgSend(void);\n'
        'extern "C" void objc_msgSend_stret(void);\n'
        'extern "C" void objc_msgSend_fpret(void);\n'),
    "IOSurface/IOSurfaceRef.h": "#pragma once\ntypedef struct __IOSurface *IOSurfaceRef;\n",
    "CoreFoundation/CoreFoundation.h": (
        "#pragma once\n#include <math.h>\n"  # INFINITY (MTLAccelerationStructureTypes.hpp)
        "typedef double CFTimeInterval;\n"
        "typedef struct dispatch_queue_s *dispatch_queue_t;\n"
        "typedef struct dispatch_data_s *dispatch_data_t;\n"),
    "mach/mach.h": "#pragma once\ntypedef int kern_return_t;\ntypedef unsigned int task_id_token_t;\n",
}

OWNED_FAMILIES = ("alloc", "new", "copy", "mutableCopy")


@dataclass(frozen=True, slots=True, kw_only=True)
class Method:
    """One selector of one class, in C terms.  ex) MTLDevice -newBufferWithLength:options: -> id"""

    selector: str  # ex) newBufferWithLength:options:
    class_method: bool  # '+': sent to the class object
    returns: str  # ex) id, NSUInteger, MTLSize, void
    args: tuple[str, ...]  # ex) ("NSUInteger", "MTLResourceOptions")
    cxx: str  # the C++ method it was read from  ex) MTL::Device::newBuffer(NS::UInteger, MTL::ResourceOptions)
    location: Location = field(compare=False)  # the method's definition in metal-cpp

    @property
    def key(self) -> str:
        """The spec's key for it: ``+sel`` for a class method, ``sel`` for an instance method."""
        return ("+" if self.class_method else "") + self.selector

    def contract(self) -> dict[str, Any]:
        """The spec's per-selector dict {class_method, returns, args}."""
        return {"class_method": self.class_method, "returns": self.returns, "args": list(self.args)}


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjCClass:
    """An Objective-C class or protocol that a metal-cpp C++ class stands for.  ex) MTLDevice (MTL::Device)"""

    name: str  # ex) MTLDevice
    cxx: str  # ex) MTL::Device
    base: str | None  # ex) NSObject; MTLResource for MTLBuffer; None for NSObject itself
    methods: Mapping[str, Method]  # by key (+sel / sel), sorted


@dataclass(frozen=True, slots=True, kw_only=True)
class CFunction:
    """A plain C entry point declared by metal-cpp.  ex) MTLCreateSystemDefaultDevice -> id, +1"""

    name: str
    returns: str
    args: tuple[str, ...]
    ownership: str  # +1 for Create/Copy functions returning an object (the CoreFoundation rule), else +0
    location: Location = field(compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class MetalCpp:
    """What the front-end read from one copy of metal-cpp."""

    root: Path
    version: str  # ex) 367.4.2
    selectors: Mapping[str, str]  # accessor -> selector string  ex) newBufferWithLength_options_ -> newBuffer...
    class_symbols: tuple[str, ...]  # _MTL_PRIVATE_DEF_CLS / _NS_PRIVATE_DEF_CLS  ex) MTLComputePipelineDescriptor
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


def find_root(override: str | os.PathLike[str] | None = None) -> Path | None:
    """The metal-cpp directory (holding Metal/Metal.hpp): ``override``, $IRONACCEL_METAL_CPP, or ``make``'s cache."""
    for cand in (override, os.environ.get(ENV_ROOT), DEFAULT_ROOT):
        if cand and (Path(cand) / "Metal" / "Metal.hpp").is_file():
            return Path(cand)
    return None


def ownership(selector: str, returns: str) -> str:
    """+1 for the alloc/new/copy/mutableCopy families returning an object, +0 otherwise (the spec's default)."""
    if returns != "id":
        return "+0"
    for fam in OWNED_FAMILIES:
        if selector.startswith(fam) and (len(selector) == len(fam) or not selector[len(fam)].islower()):
            return "+1"
    return "+0"


def version_of(root: Path) -> str:
    """The METALCPP_VERSION_MAJOR.MINOR.PATCH of the copy at ``root`` (Metal/MTLVersion.hpp), or 'unknown'."""
    return _version(root)


def _version(root: Path) -> str:
    try:
        text = (root / "Metal" / "MTLVersion.hpp").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown"
    parts = [re.search(rf"#\s*define\s+METALCPP_VERSION_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts if m) or "unknown"


# ----------------------------------------------------------------------------------------------------- the reader
class _Reader:
    def __init__(self, ci: Any, root: Path) -> None:
        self.ci = ci
        self.K = ci.CursorKind
        self.T = ci.TypeKind
        self.root = root.resolve()
        self.files: dict[str, str | None] = {}
        self.object_classes: dict[str, bool] = {}

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
        """The C/Objective-C name of a metal-cpp declaration at namespace scope.  ex) MTL::Size -> MTLSize"""
        q = self.qualified(cursor)
        if len(q) == 2 and q[0] in PREFIXES and q[1] and "(" not in q[1]:
            name = PREFIXES[q[0]] + q[1]
            return RENAMED.get(name, name)
        return None

    def is_object_class(self, decl: Any) -> bool:
        """True for the C++ classes that stand for Objective-C objects (they derive from NS::Object; a class only
        declared, never defined, is one of them: metal-cpp forward-declares only those)."""
        usr = decl.get_usr() or decl.spelling
        if usr not in self.object_classes:
            d = decl.get_definition() or decl
            if d.kind == self.K.CLASS_TEMPLATE or (self.qualified(d)[:1] == ["NS"] and d.spelling in NSOBJECT_TEMPLATES):
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
        """A C++ type of metal-cpp in C terms (see the module's docstring)."""
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
            return bool(re.match(r"(const )?((NS|MTL)::)?[A-Z]\w*<.*>\Z", c.spelling or p.spelling))
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


def parse(root: Path | None = None, headers: Iterable[str] = HEADERS) -> MetalCpp:
    """Read metal-cpp at ``root`` (default :func:`find_root`).  UserError (located) if it is missing or does not
    parse."""
    t0 = time.perf_counter()
    root = root or find_root()
    where = Location(file="<metal-cpp>", line=1, col=1)
    if root is None or not (root / "Metal" / "Metal.hpp").is_file():
        raise UserError([Diagnostic(location=where, message=(
            f"metal-cpp not found (Metal/Metal.hpp under ${ENV_ROOT} or {DEFAULT_ROOT}); `make` fetches it "
            f"({METAL_CPP_DIST})"))])
    try:
        import clang.cindex as ci
    except ImportError as exc:  # pragma: no cover - an install problem
        raise UserError([Diagnostic(location=where, message=f"libclang is not installed ({exc})")])
    with tempfile.TemporaryDirectory(prefix="ia-metalcpp-shims-") as shim_dir:
        for rel, text in SHIMS.items():
            p = Path(shim_dir, rel)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        args = ["-x", "c++", "-std=c++17", "-fblocks", "-I", str(root), "-isystem", shim_dir,
                "-DMTL_PRIVATE_IMPLEMENTATION", "-DNS_PRIVATE_IMPLEMENTATION"]
        gcc = gcc_include_dir()
        if gcc:
            args += ["-isystem", gcc]
        src = "".join(f"#include <{h}>\n" for h in headers)
        tu = ci.Index.create().parse("metal_cpp_all.cpp", args=args, unsaved_files=[("metal_cpp_all.cpp", src)])
        reader = _Reader(ci, root)
        errors = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
        if errors:
            out = []
            for d in errors[:20]:
                f = d.location.file
                where_file = str(f.name) if f else "<metal-cpp>"
                if f and Path(where_file).resolve().is_relative_to(reader.root):
                    where_file = Path(where_file).resolve().relative_to(reader.root).as_posix()
                out.append(Diagnostic(location=Location(file=where_file,
                                                        line=d.location.line, col=d.location.column),
                                      message=f"metal-cpp does not parse: {d.spelling}"))
            raise UserError(out)
        model = _read(reader, tu, root)
    return MetalCpp(**model, seconds=time.perf_counter() - t0)


def _read(r: _Reader, tu: Any, root: Path) -> dict[str, Any]:
    ci, K = r.ci, r.K
    selectors: dict[str, str] = {}
    class_symbols: set[str] = set()
    methods: dict[str, dict[str, Method]] = {}
    cxx_of: dict[str, str] = {"NSObject": "NS::Object"}
    bases: dict[str, str | None] = {"NSObject": None}
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
                if len(q) == 4 and q[1] == "Private" and ch.spelling.startswith("s_k"):
                    lit = string_literal(ch)
                    if q[2] == "Selector" and lit is not None:
                        selectors[ch.spelling[3:]] = lit
                    elif q[2] == "Class":
                        class_symbols.add(ch.spelling[3:])
            elif k in (K.CLASS_DECL, K.STRUCT_DECL, K.CLASS_TEMPLATE) and ch.is_definition():
                q = r.qualified(ch)
                if len(q) == 2 and q[0] in PREFIXES and not (q[0] == "NS" and q[1] in NSOBJECT_TEMPLATES) and (
                        r.is_object_class(ch)):
                    name = PREFIXES[q[0]] + q[1]
                    cxx_of.setdefault(name, "::".join(q))
                    bases.setdefault(name, _base(r, ch))
                elif len(q) == 2 and q[0] in PREFIXES and k == K.STRUCT_DECL:  # a value struct: MTL::Size
                    structs.setdefault(PREFIXES[q[0]] + q[1], tuple(
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
        bases.setdefault(m_cls, "NSObject" if m_cls != "NSObject" else None)
    classes = {
        name: ObjCClass(name=name, cxx=cxx_of.get(name, name), base=bases.get(name, "NSObject"),
                        methods=dict(sorted(methods.get(name, {}).items())))
        for name in sorted(set(methods) | set(cxx_of))
    }
    return dict(root=root, version=_version(root), selectors=dict(sorted(selectors.items())),
                class_symbols=tuple(sorted(class_symbols)), classes=classes,
                enums={k: dict(sorted(v.items(), key=lambda kv: (kv[1], kv[0]))) for k, v in sorted(enums.items())},
                enum_types=dict(sorted(enum_types.items())), structs=dict(sorted(structs.items())), functions=dict(sorted(functions.items())), skipped=tuple(sorted(set(skipped))))


def _base(r: _Reader, cls: Any) -> str | None:
    """The Objective-C superclass (or inherited protocol) of a metal-cpp class: ``NS::Referencing<Buffer, Resource>``
    -> MTLResource; ``NS::Referencing<Device>`` -> NSObject."""
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
                return "NSObject" if name in ("NSObject",) else name
        decl = t.get_canonical().get_declaration()
        name = r.c_name(decl)
        if name and decl.spelling not in NSOBJECT_TEMPLATES:
            return name
        return "NSObject"
    return None


def _enum(r: _Reader, e: Any, enums: dict[str, dict[str, int]], types: dict[str, str]) -> None:
    q = r.qualified(e)
    if len(q) != 2 or q[0] not in PREFIXES:
        return
    prefix = PREFIXES[q[0]]
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


SENDS = ("sendMessage", "sendMessageSafe")


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
    if len(q) != 2 or q[0] not in PREFIXES:
        return
    is_nsobject = q[0] == "NS" and q[1] in NSOBJECT_TEMPLATES
    cls = "NSObject" if is_nsobject else PREFIXES[q[0]] + q[1]
    cxx = f"{'::'.join(q)}::{m.displayname}"
    sends = [n for n in m.walk_preorder() if n.kind == K.CALL_EXPR and _callee(r, n) in SENDS]
    if not sends:
        # worth saying only of an object's method (not of NS::Object's plumbing or a struct's helpers)
        if not is_nsobject and parent.kind != K.STRUCT_DECL and q[1] not in ("Private", "SharedPtr"):
            skipped.append(f"{cxx}: no message send")
        return
    call = sends[0]
    args = _send_args(r, call)
    if len(args) < 2:
        skipped.append(f"{cxx}: a send with {len(args)} arguments")
        return
    sel_ref = _peel(r.ci, args[1])
    accessor = sel_ref.referenced.spelling[3:] if sel_ref.referenced is not None and (
        sel_ref.referenced.spelling.startswith("s_k")) else None
    if accessor is None or accessor not in selectors:
        skipped.append(f"{cxx}: the selector is not a _PRIVATE_SEL")
        return
    selector = selectors[accessor]
    recv = _peel(r.ci, args[0])
    class_method = False
    if recv.kind == K.CXX_THIS_EXPR:
        pass
    elif recv.kind == K.DECL_REF_EXPR and recv.referenced is not None and r.qualified(recv.referenced)[1:3] == [
            "Private", "Class"]:
        class_method = True
        cls = recv.referenced.spelling[3:]
    elif m.is_static_method() and recv.kind == K.DECL_REF_EXPR and recv.referenced is not None and (
            recv.referenced.kind == K.PARM_DECL):
        # NS::Object::alloc(const void* pClass): sent to the class given; respondsToSelector(const void* pObj, ...):
        # to the object given
        class_method = "Class" in recv.referenced.spelling
    else:
        skipped.append(f"{cxx}: the receiver is neither this nor a _PRIVATE_CLS")
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


# ----------------------------------------------------------------------------------------------- the spec's side
@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One selector a spec asks for.  ex) MTLDevice "newBufferWithLength:options:" at metal.yaml:12:7"""

    cls: str
    key: str  # +sel for a class method, sel or -sel for an instance method
    location: Location
    ownership: str | None = None  # the spec's override, if any


def render_classes(model: MetalCpp, requests: Iterable[Request],
                   bases: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """The contract's ``classes:`` block for the selectors a spec lists, filled from metal-cpp::

        {"MTLDevice": {"base": "NSObject", "methods": {"newBufferWithLength:options:":
                                                       {"returns": "id", "args": ["NSUInteger", ...]}}}}

    Class methods keep their ``+`` key.  A class or selector metal-cpp does not have is a located error with the
    closest name; every such error of the batch is reported."""
    errors = Collector()
    out: dict[str, dict[str, Any]] = {}
    for req in requests:
        key = req.key[1:] if req.key.startswith("-") else req.key
        m = model.lookup(req.cls, key)
        if m is None:
            errors.error(req.location, _not_found(model, req.cls, key))
            continue
        cls = out.setdefault(req.cls, {"base": (bases or {}).get(req.cls) or model.classes[req.cls].base or
                                       "NSObject", "methods": {}})
        entry: dict[str, Any] = {"returns": m.returns}
        if m.args:
            entry["args"] = list(m.args)
        own = req.ownership or ownership(m.selector, m.returns)
        if req.ownership or own != "+0":
            entry["ownership"] = own
        cls["methods"][m.key] = entry
    errors.check()
    return {k: {"base": v["base"], "methods": dict(sorted(v["methods"].items()))} for k, v in sorted(out.items())}


def _not_found(model: MetalCpp, cls: str, key: str) -> str:
    """Why ``key`` (+sel / sel) of ``cls`` is not in metal-cpp, with the closest class, method or selector."""
    if cls not in model.classes:
        return f"metal-cpp has no class '{cls}'{suggest(cls, model.classes)}"
    keys = model.keys(cls)
    hint = suggest(key, keys)
    other = ("+" + key) if not key.startswith("+") else key[1:]
    if not hint and other in keys:
        hint = f" (did you mean '{other}'?: it is {'a class' if other.startswith('+') else 'an instance'} method)"
    if not hint and key.lstrip("+") not in model.selectors.values():
        hint = suggest(key.lstrip("+"), model.selectors.values())
        hint = hint.replace("did you mean", "no such selector in metal-cpp; did you mean") if hint else \
            " (no such selector in metal-cpp)"
    return f"{cls} has no method '{key}' in metal-cpp {model.version}{hint}"


def _spelled(t: str) -> str:
    return " ".join(t.replace("*", " * ").split()).replace("* *", "**")


def fill_spec(spec: LibrarySpec, model: MetalCpp) -> LibrarySpec:
    """``spec`` (resolver objc, ``prototypes: metal-cpp``) with the prototype of every selector it lists without
    one read from metal-cpp, located at the selector in the spec.  A class or selector metal-cpp lacks is a located
    error with the closest name; a method the spec declares itself (returns:/args:) that metal-cpp also declares
    must agree with it, else a located error shows both.  Every problem of the spec is reported at once."""
    from ..spec import Name

    assert spec.objc is not None
    errors = Collector()
    classes = []
    for c in spec.objc.classes:
        methods = []
        for m in c.methods:
            key = ("+" if m.class_method else "") + m.selector.value
            found = model.lookup(c.name.value, key)
            at = m.selector.location
            if not m.declared:
                if found is None:
                    errors.error(at, _not_found(model, c.name.value, key))
                    continue
                m = replace(m, returns=Name(value=found.returns, location=at), declared=True,
                            args=tuple(Name(value=a, location=at) for a in found.args))
            elif found is not None:
                mine = [_spelled(t.value) for t in (m.returns, *m.args)]
                theirs = [_spelled(t) for t in (found.returns, *found.args)]
                if mine != theirs:
                    errors.error(at, f"{c.name} '{key}' is declared here as {mine[0]} ({', '.join(mine[1:])}) but "
                                 f"metal-cpp {model.version} declares {theirs[0]} ({', '.join(theirs[1:])}) "
                                 f"({found.location.file}:{found.location.line}): list the selector alone to take "
                                 "metal-cpp's prototype, or fix the spec's")
            methods.append(m)
        classes.append(replace(c, methods=tuple(methods)))
    errors.check()
    return replace(spec, objc=replace(spec.objc, classes=tuple(classes)))


def requests_from_yaml(path: str, text: str) -> list[Request]:
    """The selectors listed by a spec's ``classes:`` block in its selector-only form::

        classes:
          MTLDevice:
            methods: [name, "newBufferWithLength:options:", {"+new": {ownership: "+1"}}]

    (a list of selector strings, or one-key mappings carrying an ``ownership:`` override), each with its spec
    location.  A ``methods:`` mapping (the contract's full form) is also read: its keys are the selectors."""
    import yaml

    from ..spec import compose

    root = compose(path, text)
    errors = Collector()
    out: list[Request] = []

    def loc(node: yaml.Node) -> Location:
        return Location(file=path, line=node.start_mark.line + 1, col=node.start_mark.column + 1)

    if not isinstance(root, yaml.MappingNode):
        raise UserError([Diagnostic(location=Location(file=path, line=1, col=1), message="expected a mapping")])
    classes = next((v for k, v in root.value if isinstance(k, yaml.ScalarNode) and k.value == "classes"), None)
    if not isinstance(classes, yaml.MappingNode):
        raise UserError([Diagnostic(location=loc(classes or root), message="expected a 'classes:' mapping")])
    for cname, cnode in classes.value:
        if not isinstance(cnode, yaml.MappingNode):
            errors.error(loc(cnode), f"{cname.value}: expected a mapping with 'methods:'")
            continue
        methods = next((v for k, v in cnode.value if k.value == "methods"), None)
        items: list[tuple[yaml.Node, yaml.Node | None]] = []
        if isinstance(methods, yaml.SequenceNode):
            for it in methods.value:
                if isinstance(it, yaml.MappingNode) and len(it.value) == 1:
                    items.append(it.value[0])
                else:
                    items.append((it, None))
        elif isinstance(methods, yaml.MappingNode):
            items = list(methods.value)
        else:
            errors.error(loc(methods or cnode), f"{cname.value}: expected 'methods:' (a list of selectors)")
            continue
        for key, val in items:
            if not isinstance(key, yaml.ScalarNode) or not isinstance(key.value, str) or not key.value:
                errors.error(loc(key), "expected a selector string")
                continue
            own = None
            if isinstance(val, yaml.MappingNode):
                own = next((v.value for k, v in val.value if k.value == "ownership"), None)
            out.append(Request(cls=cname.value, key=key.value, location=loc(key), ownership=own))
    errors.check()
    return out


def c_type_names(rendered: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The C type names a rendered ``classes:`` block uses (what the spec's ``declarations`` must declare)."""
    names: set[str] = set()
    for cls in rendered.values():
        for m in cls["methods"].values():
            for t in [m["returns"], *m.get("args", [])]:
                names.update(w for w in re.findall(r"[A-Za-z_]\w*", t) if w not in ("const", "void", "char"))
    return sorted(names)


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - a developer's dump
    """``python -m ironaccelerator_gen.frontend.metalcpp [CLASS ...]``: print what metal-cpp gives."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    model = parse()
    print(f"metal-cpp {model.version} at {model.root}: {len(model.classes)} classes, "
          f"{sum(len(c.methods) for c in model.classes.values())} methods, {len(model.selectors)} selectors, "
          f"{len(model.enums)} enums, {len(model.functions)} C functions in {model.seconds:.2f} s")
    for name in args:
        c = model.classes[name]
        print(f"{name} ({c.cxx}) : {c.base}")
        for m in c.methods.values():
            print(f"  {m.key}: {m.returns} ({', '.join(m.args)})")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
