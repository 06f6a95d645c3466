"""Binding Objective-C classes (``resolver: {kind: objc}`` + ``classes:``): spec x declarations -> ObjcLibrary.

There is no header: the spec's ``classes:`` section is the declaration (selectors with their C prototypes), and
its ``declarations:`` the C types they use (``id``, ``SEL``, ``Class``, ``NSUInteger``, ``NSRange``, ...), parsed
by a C front-end.  Each selector becomes a bound method: a C function whose first parameter is the receiver
(``id``; ``Class`` for a ``+`` method) followed by the selector's arguments, sent through the runtime with the
selector's exact prototype (``templates/objc/trampolines.c.j2`` + ``runtime/.../include/ia_objc.h``).  Each
function of ``functions:`` (declared in the declarations) becomes a bound C function, called through the address
dlsym(RTLD_DEFAULT) gives once the frameworks are open.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import assert_never

from .bind import BoundEnum, Binder, py_name_problem
from .ctypes_util import FLOAT_BUILTINS, declare, resolve
from .diagnostics import Collector, suggest
from .ir import Builtin, EnumRef, Function, Header, InlineEnum, InlineRecord, Location, Pointer, RecordRef, TypedefRef
from .roles import ObjcArg, ObjcFast, ObjcResult
from .spec import ClassSpec, CoreSpec, LibrarySpec, MethodSpec, Name, ObjcFunctionSpec, cf_ownership, objc_ownership

# the types every Objective-C spec's declarations must give (the runtime's own, spelled as the runtime does)
REQUIRED_TYPES = ("id", "SEL", "Class")
ERROR_OUT = "NSError **"  # an argument of this type is the method's error out-parameter
C_WORDS = frozenset({"const", "volatile", "signed", "unsigned", "short", "long", "int", "char", "float", "double",
                     "void", "_Bool", "struct", "union", "enum"})
# the module-level names of a generated objc package (templates/objc/__init__.py.j2): a C function may not take them
MODULE_NAMES = frozenset({"BINDING_MODE", "Error", "ErrorKind", "Object", "autorelease_pool", "ffi", "objc_class",
                          "retain_count", "unchecked", "annotations", "Any"})
BUILTIN_TYPEDEFS = frozenset({"size_t", "ssize_t", "ptrdiff_t", "intptr_t", "uintptr_t", "int8_t", "uint8_t",
                              "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t", "wchar_t"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjcParam:
    """One argument of a bound method.  ex) ``(name='arg0', decl='const char *', kind='str')``"""

    name: str  # arg0, arg1, ... (selectors name their parts, not their arguments)
    decl: str  # the C type  ex) NSUInteger
    kind: ObjcArg  # object (id: a handle) | str (const char *: str/bytes) | error (NSError **: hidden) | value
    nullable: bool = False  # an object argument the spec's nullable: lets be None (nil)


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundMethod:
    """One selector bound as a function.  ex) ``-[NSString rangeOfString:]`` -> ``NSString_rangeOfString_(id self,
    id arg0)`` returning ``NSRange``, sent through ``NSRange (*)(id, SEL, id)``."""

    index: int
    cls: str  # ex) NSString
    class_index: int  # the class's index (its Class object is looked up once, by name)
    selector: str  # ex) rangeOfString:
    class_method: bool  # '+': the receiver is the class object
    py_name: str  # ex) rangeOfString_ (a method of the Python class NSString)
    public: str  # ex) NSString_rangeOfString_: the unchecked trampoline (unchecked.<public>)
    receiver: str  # id | Class
    result_decl: str  # ex) NSRange
    result_kind: ObjcResult
    params: tuple[ObjcParam, ...]
    ownership: str  # +1: the caller owns the returned object; +0: retained by the checked call to be kept
    consumes_self: bool  # init family: the receiver's reference passes to the result
    error_param: int  # the index in params of the NSError ** out-parameter; -1: none
    # the checked call runs inside an autorelease pool: +0 objects, NSError outputs, object or string arguments
    # (methods taking and returning only numbers do not; string results are copied inside a pool in Python)
    autoreleases: bool
    same_class: bool  # the result is of the receiver's class (alloc/new class methods, init): wrapped as it
    # the compiled checked method (ia_py_<index> in ia_objc.h's fast path): '' (none), or how its result becomes a
    # Python object: unsigned | signed | bool (instance methods without arguments returning a number, no pool)
    fast: ObjcFast = ObjcFast.NONE
    fpret: str  # '' | 'long double' | 'float': which Apple objc_msgSend_fpret rule can apply
    location: Location

    @property
    def send_type(self) -> str:
        """The IMP cast: ``R (*)(id, SEL, A...)``."""
        return f"{self.result_decl} (*)({', '.join([self.receiver, 'SEL'] + [p.decl for p in self.params])})"

    @property
    def c_params(self) -> str:
        return ", ".join(f"{p.decl} {p.name}" for p in self.params)

    @property
    def c_args(self) -> str:
        return "".join(f", {p.name}" for p in self.params)


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundFunction:
    """A plain C function of ``functions:`` (declared in the declarations), found with dlsym(RTLD_DEFAULT) once the
    runtime and frameworks are open and called with its exact prototype.
    ex) ``MTLCreateSystemDefaultDevice`` -> ``id (*)(void)``, +1"""

    index: int  # its index in _binding.FUNCTIONS (the Python side names it ~index where methods use index)
    name: str  # ex) MTLCreateSystemDefaultDevice: the C symbol, the checked module-level function, unchecked.<name>
    result_decl: str  # ex) id
    result_kind: ObjcResult  # (as BoundMethod)
    params: tuple[ObjcParam, ...]
    ownership: str  # +1: the caller owns the returned object; +0: retained by the checked call to be kept
    autoreleases: bool  # the checked call runs inside an autorelease pool (the rule of BoundMethod)
    location: Location
    class_method: bool = False  # (what py_body asks of a BoundMethod)
    consumes_self: bool = False
    same_class: bool = False
    error_param: int = -1

    @property
    def pointer_type(self) -> str:
        """``R (*)(A...)``."""
        return f"{self.result_decl} (*)({', '.join(p.decl for p in self.params) or 'void'})"

    @property
    def c_params(self) -> str:
        return ", ".join(f"{p.decl} {p.name}" for p in self.params) or "void"

    @property
    def c_args(self) -> str:
        return ", ".join(p.name for p in self.params)


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundClass:
    """A class of ``classes:`` and the Python class its handles get.  ex) NSMutableArray (base NSArray)"""

    index: int
    name: str
    base: str | None  # a bound class, or None: the run-time Object
    methods: tuple[BoundMethod, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorMapping:
    """An NSError domain (and code) -> ErrorKind entry of the resolver's ``errors:``."""

    domain: str
    code: int | None
    kind: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjcLibrary:
    """Everything the objc templates need for one library."""

    spec: LibrarySpec
    core: CoreSpec
    header: Header
    sdk_version: str
    module: str  # ex) ironaccelerator.backends.foundation.foundation
    classes: tuple[BoundClass, ...]  # bases before the classes deriving from them
    methods: tuple[BoundMethod, ...]  # by index
    functions: tuple[BoundFunction, ...]  # by index (functions:)
    declarations: tuple[str, ...]
    enums: tuple[BoundEnum, ...]
    constants: tuple[tuple[str, int], ...]  # every enum constant of the declarations (anonymous enums too)
    structs: tuple[str, ...]
    runtime: tuple[tuple[str, tuple[str, ...]], ...]
    frameworks: tuple[tuple[str, tuple[str, ...]], ...]
    error_kinds: tuple[ErrorMapping, ...]
    error_default: str


def _words(decl: str) -> list[str]:
    return re.findall(r"[A-Za-z_][A-Za-z0-9_]*", decl)


def normalize(decl: str) -> str:
    """``const  char*`` -> ``const char *``."""
    words = " ".join(decl.replace("*", " * ").split())
    return words.replace("* *", "**").replace(" *", " *")


class _TypeBinder:
    """Classifies the C types of ``classes:`` against the declarations' typedefs; a name they lack is a located
    error with a suggestion."""

    def __init__(self, b: Binder, err: Collector):
        self.b = b
        self.err = err
        self.typedefs = b.typedefs

    def known(self, name: Name) -> bool:
        text = normalize(name.value)
        if text == ERROR_OUT:
            return True
        ok = True
        words = _words(text)
        tagged = False
        for w in words:
            if tagged:  # struct X: the tag need not be a typedef
                tagged = False
                continue
            if w in ("struct", "union", "enum"):
                tagged = True
                continue
            if w in C_WORDS or w in BUILTIN_TYPEDEFS or w in self.typedefs:
                continue
            self.err.error(name.location, f"type '{name}' names '{w}', which the declarations do not declare"
                           f"{suggest(w, list(self.typedefs))}")
            ok = False
        return ok

    @staticmethod
    def is_error_out(decl: str) -> bool:
        """``NSError **``: the error out-parameter (an argument only; hidden from Python)."""
        return normalize(decl) == ERROR_OUT

    def kind(self, decl: str) -> ObjcResult:
        """How a value of C type ``decl`` crosses to Python (as a result; :func:`_arg` as an argument)."""
        text = normalize(decl)
        if text in ("id", "instancetype"):
            return ObjcResult.OBJECT
        stars = text.count("*")
        base = " ".join(w for w in _words(text) if w != "const")
        if stars == 1 and base == "char":
            return ObjcResult.STR
        if stars:
            return ObjcResult.CDATA
        if base == "void":
            return ObjcResult.VOID
        if base == "BOOL" or base == "_Bool":
            return ObjcResult.BOOL
        if base in FLOAT_BUILTINS:
            return ObjcResult.FLOAT
        if base in self.typedefs:
            t = resolve(TypedefRef(name=base), self.typedefs)
            if isinstance(t, Builtin):
                return ObjcResult.FLOAT if t.name in FLOAT_BUILTINS else \
                    ObjcResult.BOOL if t.name == "_Bool" else ObjcResult.INT
            if isinstance(t, (EnumRef, InlineEnum)):
                return ObjcResult.INT
            if isinstance(t, (RecordRef, InlineRecord)):
                return ObjcResult.STRUCT
            if isinstance(t, Pointer):
                return ObjcResult.CDATA
        if base.startswith(("struct ", "union ")):
            return ObjcResult.STRUCT
        return ObjcResult.INT  # an enum tag, or a name the declarations leave undefined

    def signed(self, decl: str) -> bool:
        """Whether an integer type is signed (typedefs expanded)."""
        base = " ".join(w for w in _words(normalize(decl)) if w != "const")
        if base in self.typedefs:
            t = resolve(TypedefRef(name=base), self.typedefs)
            base = t.name if isinstance(t, Builtin) else "int"  # an enum: int
        return not (base.startswith("unsigned") or base in ("_Bool", "size_t", "uintptr_t") or
                    base.startswith("uint"))

    def is_long_double(self, decl: str) -> bool:
        base = " ".join(w for w in _words(normalize(decl)) if w != "const")
        if base in self.typedefs:
            t = resolve(TypedefRef(name=base), self.typedefs)
            return isinstance(t, Builtin) and t.name == "long double"
        return base == "long double"


def _arg(kind: ObjcResult) -> ObjcArg | None:
    """How an argument whose C type reads as ``kind`` is passed from Python; None: ``void``, which no argument is."""
    match kind:
        case ObjcResult.OBJECT:
            return ObjcArg.OBJECT
        case ObjcResult.STR:
            return ObjcArg.STR
        case ObjcResult.VOID:
            return None
        case ObjcResult.BOOL | ObjcResult.INT | ObjcResult.FLOAT | ObjcResult.STRUCT | ObjcResult.CDATA:
            return ObjcArg.VALUE
        case _:
            assert_never(kind)


def _passes_object(params: tuple[ObjcParam, ...] | list[ObjcParam]) -> bool:
    """An object or string argument: the call runs in an autorelease pool (the rule of BoundMethod.autoreleases)."""
    return any(p.kind in (ObjcArg.OBJECT, ObjcArg.STR) for p in params)


def _ordered(classes: tuple[ClassSpec, ...]) -> list[ClassSpec]:
    """Bases first (the spec loader refused unknown bases and cycles)."""
    by_name = {c.name.value: c for c in classes}
    out: list[ClassSpec] = []

    def visit(c: ClassSpec) -> None:
        if c in out:
            return
        if c.base is not None and c.base.value in by_name:
            visit(by_name[c.base.value])
        out.append(c)

    for c in classes:
        visit(c)
    return out


def _in_spec(spec: LibrarySpec, at: Location) -> Location:
    """A location in the declarations' virtual header, as a location in the spec (parse_declared keeps columns)."""
    d = spec.declarations
    if d is None or at.file != spec.headers[0].value:
        return at
    return Location(file=spec.path, line=at.line + d.line - 1, col=at.col)


def bind_objc(spec: LibrarySpec, core: CoreSpec, header: Header, sdk_version: str | None = None) -> ObjcLibrary:
    """Bind an Objective-C library spec; raise :class:`UserError` listing every problem."""
    assert spec.objc is not None
    col = Collector()
    b = Binder(spec, core, header, col)
    tb = _TypeBinder(b, col)
    for t in REQUIRED_TYPES:
        if t not in b.typedefs:
            col.error(spec.location,
                      f"the declarations must declare '{t}' (ex: typedef struct objc_object *id; typedef struct "
                      "objc_selector *SEL; typedef struct objc_class *Class;): the methods are sent with it")
    for td in header.typedefs:
        if td.name in BUILTIN_TYPEDEFS:  # the compiled module includes <stdint.h>/<stddef.h>: a second typedef
            col.error(_in_spec(spec, td.location), f"'{td.name}' is a standard C type (stdint.h/stddef.h), known without a typedef; "
                      "declaring it again conflicts with the system's definition when the module is compiled")
    kinds = {k.name.value for k in core.error_kinds}
    error_kinds = []
    for domain, code, kind in spec.objc.error_kinds:
        if kind.value not in kinds:
            col.error(kind.location, f"'{kind}' is not an ErrorKind{suggest(kind.value, sorted(kinds))}")
        else:
            error_kinds.append(ErrorMapping(domain=domain, code=code, kind=kind.value))
    classes: list[BoundClass] = []
    methods: list[BoundMethod] = []
    publics: dict[str, Location] = {}
    ordered = _ordered(spec.objc.classes)
    for ci, c in enumerate(ordered):
        bound: list[BoundMethod] = []
        for m in c.methods:
            bm = _method(m, c, ci, len(methods), tb, col)
            if bm is None:
                continue
            why = py_name_problem(bm.public)
            if why is not None:
                col.error(m.selector.location, f"selector '{m.selector}' of {c.name} cannot be bound as {bm.public!r}: "
                          f"{why}")
                continue
            if bm.public in publics:
                first = publics[bm.public]
                col.error(m.selector.location, f"selector '{m.selector}' of {c.name} would be the unchecked function "
                          f"{bm.public!r}, as the method at {first.line}:{first.col} is")
                continue
            publics[bm.public] = m.selector.location
            methods.append(bm)
            bound.append(bm)
        classes.append(BoundClass(index=ci, name=c.name.value, base=c.base.value if c.base else None,
                                  methods=tuple(bound)))
    functions: list[BoundFunction] = []
    constants = tuple((c.name, c.value) for e in header.enums for c in e.constants)
    # module-level names of __init__.py, and of unchecked.py (the methods' public names)
    taken = MODULE_NAMES | {c.name for c in classes} | {name for name, _ in constants} | set(publics)
    declared = {f.name: f for f in header.functions}
    for fs in spec.objc.functions:
        bf = _function(fs, declared, len(functions), tb, col)
        if bf is None:
            continue
        why = py_name_problem(bf.name)
        if why is None and bf.name in taken:
            why = "the generated module already has that name"
        if why is not None:
            col.error(fs.name.location, f"function '{fs.name}' cannot be bound as a module-level function: {why}")
            continue
        taken |= {bf.name}
        functions.append(bf)
    decls, enums, structs = b.declarations()
    col.check()
    return ObjcLibrary(
        spec=spec, core=core, header=header, sdk_version=sdk_version or "declared",
        module=f"ironaccelerator.backends.{spec.vendor}.{spec.library}", classes=tuple(classes),
        methods=tuple(methods), functions=tuple(functions), declarations=decls, enums=enums, structs=structs,
        runtime=spec.objc.runtime, constants=constants,
        frameworks=spec.objc.frameworks, error_kinds=tuple(error_kinds), error_default=spec.objc.error_default)


def _function(fs: ObjcFunctionSpec, declared: dict[str, Function], index: int, tb: _TypeBinder,
              col: Collector) -> BoundFunction | None:
    """One entry of ``functions:``, its prototype from the declarations."""
    f = declared.get(fs.name.value)
    if f is None:
        col.error(fs.name.location, f"function '{fs.name}' is not declared in the declarations"
                  f"{suggest(fs.name.value, list(declared))}" + ("" if declared else
                                                                  " (which declare no function: add its prototype, "
                                                                  "ex: id MTLCreateSystemDefaultDevice(void);)"))
        return None
    if f.variadic:
        col.error(fs.name.location, f"function '{fs.name}' is variadic: its arguments' types are not known")
        return None
    result = normalize(declare(f.result))
    result_kind = tb.kind(result)
    params = []
    for i, p in enumerate(f.params):
        decl = normalize(declare(p.type))
        if tb.is_error_out(decl):
            col.error(fs.name.location, f"function '{fs.name}': an {ERROR_OUT} argument is only understood in "
                      "methods (pass it as a pointer type of the declarations instead)")
            return None
        params.append(ObjcParam(name=f"arg{i}", decl=decl, kind=_arg(tb.kind(decl)) or ObjcArg.VALUE))
    if fs.ownership is not None and result_kind is not ObjcResult.OBJECT:
        col.error(fs.ownership.location, f"ownership goes with functions returning an object (id); "
                  f"{fs.name} returns {result}")
        return None
    ownership = fs.ownership.value if fs.ownership is not None else \
        cf_ownership(fs.name.value) if result_kind is ObjcResult.OBJECT else "+0"
    return BoundFunction(
        index=index, name=fs.name.value, result_decl=result, result_kind=result_kind, params=tuple(params),
        ownership=ownership, location=fs.name.location,
        autoreleases=result_kind is not ObjcResult.STR and (
            (result_kind is ObjcResult.OBJECT and ownership == "+0") or _passes_object(params)))


def _family(selector: str, families: tuple[str, ...]) -> bool:
    """The selector's first word is one of ``families`` (``initWithBytes:`` is of init, ``initials`` is not)."""
    for f in families:
        rest = selector[len(f):]
        if selector.startswith(f) and (not rest or rest[0] == ":" or rest[0].isupper()):
            return True
    return False


def _method(m: MethodSpec, c: ClassSpec, class_index: int, index: int, tb: _TypeBinder,
            col: Collector) -> BoundMethod | None:
    ok = tb.known(m.returns)
    for a in m.args:
        ok = tb.known(a) and ok
    if not ok:
        return None
    result = normalize(m.returns.value)
    if tb.is_error_out(result):
        col.error(m.returns.location, f"{ERROR_OUT} is an argument type (the error out-parameter), not a result")
        return None
    result_kind = tb.kind(result)
    params = []
    error_param = -1
    keywords = m.selector.value.split(":")[:-1]
    nullable = {keywords.index(kw.value): kw for kw in m.nullable if kw.value in keywords}
    for i, a in enumerate(m.args):
        kind = ObjcArg.ERROR if tb.is_error_out(a.value) else _arg(tb.kind(a.value))
        if kind is None:
            col.error(a.location, "an argument cannot be void")
            return None
        if kind is ObjcArg.ERROR:
            if error_param >= 0:
                col.error(a.location, f"method {m.selector} of {c.name} has a second {ERROR_OUT} argument")
                return None
            error_param = i
        if i in nullable and kind is not ObjcArg.OBJECT:
            col.error(nullable[i].location, f"nullable: '{nullable[i]}' of {m.selector} is a {normalize(a.value)}, not "
                      "an object (id): only an object argument may be nil")
            return None
        params.append(ObjcParam(name=f"arg{i}", decl="id *" if kind is ObjcArg.ERROR else normalize(a.value), kind=kind,
                                nullable=i in nullable))
    ownership = m.ownership or objc_ownership(m.selector.value, result)
    family = m.selector.value
    consumes = not m.class_method and result_kind is ObjcResult.OBJECT and _family(family, ("init",))
    fast = ObjcFast.NONE
    if not m.class_method and not params and result_kind in (ObjcResult.INT, ObjcResult.BOOL):
        fast = ObjcFast.BOOL if result_kind is ObjcResult.BOOL else \
            ObjcFast.SIGNED if tb.signed(result) else ObjcFast.UNSIGNED
    fpret = ""
    if result_kind is ObjcResult.FLOAT:
        fpret = "long double" if tb.is_long_double(result) else "float"
    return BoundMethod(
        index=index, cls=c.name.value, class_index=class_index, selector=m.selector.value,
        class_method=m.class_method, py_name=m.py_name, public=f"{c.name.value}_{m.py_name}",
        receiver="Class" if m.class_method else "id", result_decl=result, result_kind=result_kind,
        params=tuple(params), ownership=ownership, consumes_self=consumes, error_param=error_param,
        autoreleases=result_kind is not ObjcResult.STR and (
            (result_kind is ObjcResult.OBJECT and ownership == "+0") or error_param >= 0 or _passes_object(params)),
        fpret=fpret, fast=fast, same_class=result_kind is ObjcResult.OBJECT and (consumes or m.class_method and _family(
            m.selector.value, ("alloc", "new"))),
        location=m.selector.location)


# ------------------------------------------------------------------ rendering helpers (filters)

def c_zero(m: BoundMethod | BoundFunction) -> str:
    """What a trampoline returns without sending: `` (R){0}`` (nothing for void)."""
    return "" if m.result_kind is ObjcResult.VOID else f" ({m.result_decl}){{0}}"


def c_send(m: BoundMethod) -> str:
    """The send expression of the flavour macros (ia_objc.h), cast to ``ia_send_<index>_t``."""
    t = f"ia_send_{m.index}_t"
    match m.result_kind:
        case ObjcResult.STRUCT:
            return f"IA_SEND_STRUCT({t}, {m.result_decl}, self, ia_objc_sel[{m.index}])"
        case ObjcResult.FLOAT:
            return f"IA_SEND_FP({t}, {1 if m.fpret == 'long double' else 0}, self, ia_objc_sel[{m.index}])"
        case ObjcResult.OBJECT | ObjcResult.STR | ObjcResult.BOOL | ObjcResult.INT | ObjcResult.CDATA | \
                ObjcResult.VOID:
            return f"IA_SEND({t}, self, ia_objc_sel[{m.index}])"
        case _:
            assert_never(m.result_kind)


def c_checked_params(m: BoundMethod) -> str:
    """The checked trampoline's parameters: the receiver (for a '+' method the index of the class it is sent to,
    whose Class was looked up once: ``NSString.alloc()`` sends NSObject's ``+alloc`` to NSString) and the
    arguments."""
    parts = (["int ia_class"] if m.class_method else ["id self"]) + [f"{p.decl} {p.name}" for p in m.params]
    return ", ".join(parts) or "void"


def _py_arg(kind: ObjcArg) -> str:
    """The checked wrapper's annotation of an argument (None: the error out-parameter, which it hides)."""
    match kind:
        case ObjcArg.STR:
            return "str | bytes"
        case ObjcArg.OBJECT | ObjcArg.VALUE | ObjcArg.ERROR:
            return "Any"
        case _:
            assert_never(kind)


def py_signature(m: BoundMethod) -> str:
    args = [f"a{i}: {_py_arg(p.kind)}" for i, p in enumerate(m.params) if p.kind is not ObjcArg.ERROR]
    return ", ".join(["cls" if m.class_method else "self"] + args)


def py_returns(m: BoundMethod) -> str:
    """The checked wrapper's return annotation."""
    match m.result_kind:
        case ObjcResult.STR:
            return "str | None"
        case ObjcResult.BOOL | ObjcResult.INT | ObjcResult.FLOAT:
            return m.result_kind.value
        case ObjcResult.VOID:
            return "None"
        case ObjcResult.OBJECT | ObjcResult.STRUCT | ObjcResult.CDATA:
            return "Any"
        case _:
            assert_never(m.result_kind)


def py_body(m: BoundMethod | BoundFunction) -> list[str]:
    """The checked wrapper's body: arguments converted, ``_c<index>`` called (the checked trampoline; ``_f<index>``
    for a C function, which the binding's tables name ``~index``), a refusal (``_failed()``) raised as an Error,
    the result converted (a handle owning the object's reference)."""
    function = isinstance(m, BoundFunction)
    i: int | str = f"~{m.index}" if function else m.index
    out: list[str] = []
    args: list[str] = []
    values = False
    for n, p in enumerate(m.params):
        match p.kind:
            case ObjcArg.OBJECT:
                out.append(f"o{n} = _NULL if a{n} is None else _obj(a{n}, {i}, {n})" if p.nullable
                           else f"o{n} = _obj(a{n}, {i}, {n})")
                args.append(f"o{n}")
            case ObjcArg.STR:
                out.append(f"s{n} = _cstr(a{n}, {i}, {n})")
                args.append(f"s{n}")
            case ObjcArg.ERROR:
                out.append("err = _new_error()")
                args.append("err")
            case ObjcArg.VALUE:
                args.append(f"a{n}")
                values = True
            case _:
                assert_never(p.kind)
    receiver = "cls._ci" if m.class_method else "self._id"
    call = f"_f{m.index}({', '.join(args)})" if function else f"_c{i}({', '.join([receiver] + args)})"
    who = "None" if function else "cls" if m.class_method else "self"
    match m.result_kind:
        case ObjcResult.STR:  # the returned bytes belong to an autoreleased buffer: copied inside a pool
            out.append("pool = _push()")
            out.append("try:")
            out.append(f"    r = {call}")
            out.append(f"    if r == _NULL and (f := _failed()):")
            out.append(f"        raise _fail({i}, {who}, f)")
            out.append("    return _string(r)")
            out.append("finally:")
            out.append("    _pop(pool)")
        case ObjcResult.INT | ObjcResult.FLOAT | ObjcResult.BOOL:  # a zero result may be a refusal
            annotation = "" if m.result_kind is ObjcResult.BOOL else f": {m.result_kind.value}"
            out.append(f"r{annotation} = {call}")
            out.append(f"if not r and (f := _failed()):")
            out.append(f"    raise _fail({i}, {who}, f)")
            if m.error_param >= 0:
                out.append("if not r and err[0] != _NULL:")
                out.append(f"    raise _nserror(err[0], {i})")
                out.append("if err[0] != _NULL:")
                out.append("    _release(err[0])")
            out.append("return bool(r)" if m.result_kind is ObjcResult.BOOL else "return r")
        case ObjcResult.OBJECT:
            out.append(f"r = {call}")
            out += _object_result(m, i, who)
        case ObjcResult.CDATA:
            out.append(f"r = {call}")
            out.append("if r == _NULL and (f := _failed()):")
            out.append(f"    raise _fail({i}, {who}, f)")
            out.append("return r")
        case ObjcResult.STRUCT | ObjcResult.VOID:  # the result cannot say whether it was refused
            out.append(call if m.result_kind is ObjcResult.VOID else f"r = {call}")
            out.append("f = _failed()")
            out.append("if f:")
            out.append(f"    raise _fail({i}, {who}, f)")
            if m.error_param >= 0:
                out.append("if err[0] != _NULL:")
                out.append(f"    raise _nserror(err[0], {i})")
            if m.result_kind is ObjcResult.STRUCT:
                out.append("return r")
        case _:
            assert_never(m.result_kind)
    return _guard(out, values, i)


def _object_result(m: BoundMethod | BoundFunction, i: int | str, who: str) -> list[str]:
    """The checked wrapper's lines after ``r = <call>`` for an object result: a nil refusal raised, an NSError
    output raised, the result wrapped in a handle."""
    out = ["if r == _NULL and (f := _failed()):", f"    raise _fail({i}, {who}, f)"]
    if m.consumes_self:  # init: the receiver's reference went to the result (or was released on failure)
        out.append("self._id = _NULL")
    if m.error_param >= 0:
        out.append("if r == _NULL and err[0] != _NULL:")
        out.append(f"    raise _nserror(err[0], {i})")
        out.append("if err[0] != _NULL:")
        out.append("    _release(err[0])")
    if m.same_class:  # the result's class may be private (NSString's placeholder): the receiver's is known
        out.append(f"return None if r == _NULL else _wrap_as(r, {'cls' if m.class_method else 'type(self)'})")
    else:
        out.append("return None if r == _NULL else _wrap(r)")
    return out


def _guard(lines: list[str], values: bool, index: int | str) -> list[str]:
    """Value arguments are converted by cffi, which raises TypeError/OverflowError: as INVALID_VALUE."""
    if not values:
        return lines
    return ["try:"] + ["    " + x for x in lines] + ["except (TypeError, OverflowError) as exc:",
                                                      f"    raise _bad_value({index}, exc) from None"]


def py_function_signature(f: BoundFunction) -> str:
    return ", ".join(f"a{i}: {_py_arg(p.kind)}" for i, p in enumerate(f.params))


def py_function_doc(f: BoundFunction) -> str:
    args = ", ".join(p.decl for p in f.params) or "void"
    notes = ["the C function, found with dlsym(RTLD_DEFAULT) once the runtime and frameworks are open; missing: "
             "ironaccelerator.Error SYMBOL_NOT_FOUND"]
    if f.result_kind is ObjcResult.OBJECT:
        notes.append("a handle owning the result (+1 from the function)" if f.ownership == "+1"
                     else "a handle owning the result (retained: +0 from the function)")
        notes.append("None when it returns nil")
    return f"``{f.result_decl} {f.name}({args})``: {'; '.join(notes)}."


def function_row(f: BoundFunction) -> str:
    """The function's row in _binding.FUNCTIONS (ironaccelerator_runtime.objc.FunctionRow)."""
    return repr((f.name, f.result_kind.value, tuple(p.kind.value for p in f.params), f.ownership, f.autoreleases))


def py_doc(m: BoundMethod) -> str:
    sig = f"{'+' if m.class_method else '-'}[{m.cls} {m.selector}] -> {m.result_decl}"
    args = ", ".join(p.decl for p in m.params)
    notes = []
    if m.result_kind is ObjcResult.OBJECT:
        notes.append("a handle owning the result (+1 from the method)" if m.ownership == "+1"
                     else "a handle owning the result (retained: +0 from the method)")
    if m.consumes_self:
        notes.append("consumes the receiver's reference (this handle is then closed)")
    if m.error_param >= 0:
        notes.append("an NSError output raises ironaccelerator.Error")
    return f"``{sig}`` ({args or 'no arguments'}){': ' + '; '.join(notes) if notes else ''}."


def method_row(m: BoundMethod) -> str:
    """The method's row in _binding.METHODS (ironaccelerator_runtime.objc.MethodRow)."""
    kinds = tuple(p.kind.value for p in m.params)
    return repr((m.cls, m.selector, m.class_method, m.result_kind.value, kinds, m.ownership, m.consumes_self,
                 m.error_param, m.autoreleases, m.fpret))


def py_from_c(m: BoundMethod) -> str:
    """The compiled checked method's conversion of its result to a Python object."""
    match m.fast:
        case ObjcFast.UNSIGNED:
            return "PyLong_FromUnsignedLongLong((unsigned long long)r)"
        case ObjcFast.SIGNED:
            return "PyLong_FromLongLong((long long)r)"
        case ObjcFast.BOOL:
            return "PyBool_FromLong(r != 0)"
        case ObjcFast.NONE:  # (the template asks only of a method that has a fast path)
            raise ValueError(f"{m.public} has no compiled fast path")
        case _:
            assert_never(m.fast)
