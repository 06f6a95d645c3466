"""Binding: spec x parsed header -> the bound API that templates render.

Every name the spec mentions is checked against the header here; a name that
matches nothing is an error, never a silently dead rule.
"""

from __future__ import annotations

import fnmatch
import keyword
import re
from dataclasses import dataclass, replace
from typing import AbstractSet, Iterable, Mapping, assert_never

from .ctypes_util import FLOAT_BUILTINS, INTEGER_BUILTINS, declare, is_char, references, resolve
from . import resolvers
from .diagnostics import Collector, suggest
from .ir import (
    BUILTIN_NAMES, Array, Builtin, CType, Enum, EnumConstant, EnumRef, Function, FunctionProto, Header, InlineEnum,
    InlineRecord, Location, MacroConstant, Param, Pointer, Record, RecordRef, Typedef, TypedefRef,
)
from .roles import OUT_ROLES, PY_IN_ROLES, Role, ValueKind
from .rules import apply_rules
from .spec import (MAJOR as MAJOR_PLACEHOLDER, CoreSpec, DeviceMemorySpec, FunctionSpec, LibrarySpec, Name, ParamSpec,
                   StringSpec)

PY_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# names the generated module defines or imports itself, and the builtins its code calls: a C name bound
# at module level (function, enum, enum constant, macro constant) must not shadow one of them
RESERVED = frozenset({"ffi", "has", "unchecked", "BINDING_MODE", "LIBRARY", "SDK_VERSION", "SPEC",
                      "set_per_thread_default_stream", "Error", "ErrorKind", "CData", "annotations",
                      "enum", "Any", "Sequence", "TYPE_CHECKING", "STRUCTS", "new_struct",
                      "str", "bytes", "len", "max", "isinstance", "Exception", "getattr", "globals"})
# module globals every checked wrapper body may reference (see wrappers.lower); the ``_``-prefixed
# names are the wrapper's own locals and helpers
WRAPPER_GLOBALS = frozenset({"ffi", "Error", "ErrorKind", "_lib", "_NULL", "_new", "_error", "_require",
                             "_detail", "_str", "_c_array", "_keep", "_r", "_v", "_b"})
# builtins a wrapper body calls only when it has a parameter of this role
ROLE_GLOBALS = {Role.IN_STR: frozenset({"isinstance", "str"}), Role.LEN: frozenset({"len"}),
                Role.OUT_BUFFER: frozenset({"max", "bytes"})}


def py_name_problem(name: str, enum_member: bool = False) -> str | None:
    """Why ``name`` cannot be a module-level name of a generated module, or None."""
    if not PY_IDENT.match(name):
        return "not a Python identifier"
    if keyword.iskeyword(name):
        return "it is a Python keyword"
    if name.startswith("_"):
        return "names starting with '_' are private to the generated module"
    if name in RESERVED:
        return f"it would shadow the generated module's own '{name}'"
    if enum_member and name == "mro":
        return "enum.IntEnum does not allow a member named 'mro'"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundParam:
    """One C parameter and how the checked wrapper treats it.

    ``role`` is a :class:`~ironaccelerator_gen.roles.Role` (what each means is said there).
    """

    name: str  # python-safe name  ex) from_ for a C parameter named 'from'
    c_name: str
    type: CType
    decl: str  # ex) CUdeviceptr *dptr
    role: Role
    pointee: str = ""  # C spelling of the pointee type for out/inout  ex) CUdeviceptr
    element: str = ""  # C spelling of an in_array's element type  ex) const char *
    len_of: tuple[str, ...] = ()  # for role 'len': the arrays whose length this is
    terminated: bool = False  # for role 'in_array': passed with a zero element after the items (len: null-terminated)
    nullable: bool = False
    # errors.null_handle: an opaque handle (pointer to an incomplete struct) passed in, not nullable, whose NULL the
    # wrapper refuses before the call with the library's null_handle kind
    refuse_null: bool = False
    string: StringSpec | None = None
    py_type: str = "CData"  # the annotation in the checked wrapper
    py_result: str = ""  # the annotation of the returned value for out roles
    result_kind: ValueKind = ValueKind.NONE  # how an out value is read
    cast: str = ""  # role 'device': the pointer type the address is cast to ("": an integer type, passed as the int)
    fill: tuple[tuple[str, int], ...] = ()  # role 'out_struct': members set before the call  ex) (("stype", 3),)


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundFunction:
    """A bound C function: public name, ABI symbol(s) and parameter roles."""

    index: int
    public: str  # ex) cuMemAlloc
    symbol: str  # ex) cuMemAlloc_v2
    per_thread_symbol: str | None  # ex) cuMemcpyHtoD_v2_ptds
    c: Function
    params: tuple[BoundParam, ...]
    returns_status: bool
    result_decl: str  # the C result type  ex) CUresult
    result_kind: ValueKind  # for non-status results
    status_codes: tuple[int, ...]
    min_version: str | None  # ex) 3.2: the version that introduced this ABI (from abi_version)
    abi_version: int | None = None  # ex) 3020: the PFN_ pin, passed to cuGetProcAddress
    error_log: str | None  # a bound function public name
    log_param: str | None
    prototype: str  # ex) CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
    pointer_type: str  # ex) CUresult (*)(CUdeviceptr *dptr, size_t bytesize)


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionTable:
    """``resolver: {kind: table}``: the provider struct the library lists and where each function's entry is in
    it.  ex) QnnInterface_t, whose ``v2_27`` member is a struct of function pointers such as
    ``backendGetApiVersion``."""

    interface: str  # ex) QnnInterface_t
    table: str  # ex) v2_27 (C member path of the table struct within the provider)
    version: str  # ex) apiVersion.coreApiVersion (C member path of a {major, minor, ...} struct)
    major: int  # selection: the provider's major equals this ...
    minor: int  # ... its minor is at least this ...
    match: tuple[tuple[str, int], ...]  # ... and these integer members have these values  ex) (("backendId", 6),)
    entries: tuple[str, ...]  # by function index: its field in the table ("" for the provider)
    since: tuple[int, ...]  # by function index: the first minor whose table has its entry (0: every one)
    list_decl: str  # the provider's list parameter type  ex) const QnnInterface_t ***
    count_pointee: str  # the type its count points to  ex) uint32_t


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolverValue:
    """A declared resolver kind's key, bound: ``functions`` (a ``function`` key's one, a ``functions`` key's list:
    BoundFunction indexes) and ``optional`` (how many of its shape's optional parameters the function has), or
    ``value`` (a ``constant`` key's integer)."""

    key: str
    functions: tuple[int, ...] = ()
    optional: int = 0
    value: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolver:
    """How the library's functions are found once it is open: ``kind`` ``dlsym`` (each symbol), a kind the runtime
    declares (runtime/ironaccelerator_runtime/resolver_kinds.py: ``proc_address``, ``lookup``, ...) with its keys
    bound (``values``), or ``table``: entries of a function table that the one exported function (the provider)
    lists.  Rendered into trampolines.c (IA_RESOLVER), abi.cdef and _binding.py."""

    kind: str = "dlsym"
    index: int = -1  # the resolver's (or provider's) own BoundFunction index (always resolved with dlsym)
    symbol: str = ""  # ex) cuGetProcAddress_v2, QnnInterface_getProviders
    values: tuple[ResolverValue, ...] = ()  # a declared kind's keys, in its declaration's order
    table: FunctionTable | None = None  # kind table only

    def value(self, key: str) -> ResolverValue | None:
        return next((v for v in self.values if v.key == key), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class AbiMajor:
    """``loader.abi_major`` checked against the header: the function that asks an opened library its version,
    and the major that version must have (the SDK's the bindings come from).  The loader passes over a file of
    another major (``ironaccelerator_runtime.loader.AbiMajor``)."""

    public: str  # ex) hipRuntimeGetVersion: status (integer *version)
    encoding: tuple[int, int]  # ex) (10000000, 100000): major = v // e[0], minor = v % e[0] // e[1]
    major: int  # ex) 5, from the SDK version 5.2


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelLaunch:
    """The launch function that the backend's launch fast path (``_fast._launch`` in trampolines.c) packs
    kernel arguments for and calls: ``status (function, grid x/y/z, block x/y/z, shared bytes, stream,
    void **params, void **extra)``, as ``cuLaunchKernel`` and ``hipModuleLaunchKernel`` are."""

    index: int  # its BoundFunction index
    public: str  # ex) cuLaunchKernel (the trampoline's name)
    result: str  # ex) CUresult
    casts: tuple[str, ...]  # the C type of each parameter  ex) (CUfunction, unsigned int, ..., void **)
    # what _launch packs at most (its buffer is on the C stack); the backend builds no layout beyond them
    max_args: int = 256
    max_bytes: int = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolMemory:
    """The stream-ordered allocator that the backend's memory pool calls in C (``_fast._pool_alloc`` and
    ``_fast._PoolMemory`` in trampolines.c): ``status alloc(devptr *out, size_t bytes, pool, stream)`` and
    ``status free(devptr, stream)``, as ``cuMemAllocFromPoolAsync``/``cuMemFreeAsync`` and
    ``hipMallocFromPoolAsync``/``hipFreeAsync`` are."""

    alloc_index: int  # their BoundFunction indices
    free_index: int
    alloc: str  # ex) cuMemAllocFromPoolAsync (the trampolines' names)
    free: str  # ex) cuMemFreeAsync
    alloc_result: str  # ex) CUresult
    free_result: str
    alloc_casts: tuple[str, ...]  # the C type of each parameter  ex) (CUdeviceptr *, size_t, CUmemoryPool, CUstream)
    free_casts: tuple[str, ...]  # ex) (CUdeviceptr, CUstream)
    devptr: str  # the device pointer's C type, typedefs expanded  ex) unsigned long long, void *


@dataclass(frozen=True, slots=True, kw_only=True)
class HostCopy:
    """The host copies that the backend's ``Stream.copy_from_host`` and ``copy_to_host`` call in C (``_fast.
    _host_copier`` in trampolines.c), both ``status f(queue, buffer, blocking, offset, size, host pointer, wait
    count, wait list, event *)`` as ``clEnqueueWriteBuffer`` and ``clEnqueueReadBuffer`` are, ``buffer`` the
    ``device_memory``'s handle type: called blocking, at offset 0, waiting for nothing, asking for no event."""

    write_index: int  # their BoundFunction indices
    read_index: int
    write: str  # ex) clEnqueueWriteBuffer (the trampolines' names)
    read: str
    result: str  # ex) cl_int
    write_casts: tuple[str, ...]  # the C type of each parameter
    read_casts: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceMemory:
    """The device-memory allocator that the backend's ``Device.alloc`` calls in C (``_fast._DeviceMemory`` in
    trampolines.c), of one of two shapes, and ``status free(devptr)``: ``status alloc(devptr *out, size_t bytes)``,
    as ``cuMemAlloc``/``cuMemFree`` and ``hipMalloc``/``hipFree`` are (``returns_handle`` false); or a creator that
    returns the handle and its status through the errors' out-parameter, its other parameters given by the device
    as integers (``bound``), as ``clCreateBuffer(context, flags, size, host_ptr, &errcode_ret)`` and
    ``clReleaseMemObject`` are (``returns_handle`` true)."""

    alloc_index: int  # their BoundFunction indices
    free_index: int
    alloc: str  # ex) cuMemAlloc (the trampolines' names)
    free: str  # ex) cuMemFree
    alloc_result: str  # ex) CUresult
    free_result: str
    alloc_casts: tuple[str, ...]  # the C type of each parameter  ex) (CUdeviceptr *, size_t)
    free_casts: tuple[str, ...]  # ex) (CUdeviceptr,)
    devptr: str  # the device pointer's C type, typedefs expanded  ex) unsigned long long, void *
    returns_handle: bool = False
    # each allocator parameter: (what, C type, slot): what is 'out' (the out-pointer), 'size', 'status' (the errors'
    # out-parameter) or 'bound' (a value the device gives: slot is its index among those, else -1)
    # ex) (('bound', 'cl_context', 0), ('bound', 'cl_mem_flags', 1), ('size', 'size_t', -1), ('bound', 'void *', 2),
    #      ('status', 'cl_int *', -1))
    alloc_params: tuple[tuple[str, str, int], ...] = ()
    bound_pointers: tuple[bool, ...] = ()  # per bound value: whether its C type is a pointer (cast via uintptr_t)


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundEnum:
    """An enum exported to Python as an IntEnum.  ex) ``CUresult``"""

    name: str
    constants: tuple[EnumConstant, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorCode:
    name: str
    value: int
    kind: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundLibrary:
    """Everything the templates need for one library."""

    spec: LibrarySpec
    core: CoreSpec
    header: Header
    sdk_version: str  # ex) 13.0 (or the header file's version string)
    module: str  # ex) ironaccelerator.backends.cuda.driver
    functions: tuple[BoundFunction, ...]
    enums: tuple[BoundEnum, ...]
    constants: tuple[MacroConstant, ...]
    errors: tuple[ErrorCode, ...]
    success: tuple[int, ...]
    error_type: str
    error_name_function: str | None
    error_mask: int = 0  # the bits of a status that are its code (errors.mask; 0: the whole status)
    null_handle: str | None = None  # errors.null_handle: the ErrorKind of a NULL handle not declared nullable
    declarations: tuple[str, ...]  # C type declarations in dependency order (cdef and C source)
    structs: tuple[str, ...]  # typedef names of complete structs/unions, usable from Python
    per_thread: bool
    resolver: Resolver = Resolver()
    kernel_launch: KernelLaunch | None = None
    pool_memory: PoolMemory | None = None
    device_memory: DeviceMemory | None = None
    host_copy: HostCopy | None = None
    library_names: tuple[tuple[str, tuple[str, ...]], ...] = ()  # spec.loader.names with {major} filled
    abi_major: AbiMajor | None = None


def _version_str(v: int) -> str:
    """CUDA-style encoded version: 3020 -> 3.2, 12040 -> 12.4."""
    return f"{v // 1000}.{(v % 1000) // 10}"


def _vtuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


class Binder:
    def __init__(self, spec: LibrarySpec, core: CoreSpec, header: Header, errors: Collector):
        self.spec = spec
        self.core = core
        self.h = header
        self.err = errors
        self.typedefs = {t.name: t for t in header.typedefs}
        self.records = {(r.kind, r.tag): r for r in header.records if r.tag}
        self.enum_tags = {e.tag: e for e in header.enums if e.tag}
        self.constants = {c.name: c for c in header.constants}
        self.version: str | None = None
        values = []
        for vm in spec.version_macro:
            c = self.constants.get(vm.value)
            if c is None or not isinstance(c.value, int):
                self.err.error(vm.location, f"version_macro '{vm}' is not an integer macro in {header.name}"
                               f"{suggest(vm.value, self.constants)}")
            else:
                values.append(c.value)
        if len(values) == 1:  # one CUDA-style encoded number: 13000 -> 13.0
            self.version = _version_str(values[0])
        elif values and len(values) == len(spec.version_macro):  # major, minor[, patch] macros
            self.version = ".".join(str(v) for v in values)
        self.enum_locations: dict[str, Location] = {}  # bound enum name -> its typedef (or enum) declaration
        self.version_files = {h.value for h in spec.version_headers}

    # ------------------------------------------------------------- helpers
    def in_bound_files(self, loc: Location) -> bool:
        return loc.file not in self.version_files

    def older_than(self, since: str | None) -> bool:
        """True when the parsed SDK predates ``since`` (so a missing name is expected)."""
        return since is not None and self.version is not None and _vtuple(self.version) < _vtuple(since)

    def check_py_name(self, name: str, loc: Location, what: str, enum_member: bool = False) -> bool:
        why = py_name_problem(name, enum_member)
        if why is not None:
            self.err.error(loc, f"{what} {name!r} cannot be bound as a Python name: {why}")
            return False
        return True

    # ----------------------------------------------------------- functions
    def public_names(self) -> dict[str, tuple[Function, str | None]]:
        """public name -> (declared function, wrapper macro of its rename)."""
        by_target: dict[str, tuple[str, str | None]] = {}
        for r in self.h.renames:
            by_target.setdefault(r.target, (r.name, r.wrapper))
        out: dict[str, tuple[Function, str | None]] = {}
        for f in self.h.functions:
            if not self.in_bound_files(f.location):
                continue
            public, wrapper = by_target.get(f.name, (f.name, None))
            out.setdefault(public, (f, wrapper))
        return out

    def selected(self, names: list[str]) -> list[str]:
        for pat in self.spec.include + self.spec.exclude:
            if not any(fnmatch.fnmatchcase(n, pat.value) for n in names):
                self.err.error(pat.location, f"pattern '{pat}' matches no function declared in {self.h.name}")
        inc = [p.value for p in self.spec.include] or ["*"]
        exc = [p.value for p in self.spec.exclude]
        return [n for n in names
                if any(fnmatch.fnmatchcase(n, p) for p in inc) and not any(fnmatch.fnmatchcase(n, p) for p in exc)]

    def version_candidates(self) -> dict[str, list[tuple[int, CType]]]:
        """public name -> [(encoded version, function-pointer type)] from the version typedefs."""
        if self.spec.version_typedef is None:
            return {}
        pat = re.compile(re.escape(self.spec.version_typedef).replace(r"\{name\}", r"(?P<name>\w+?)")
                         .replace(r"\{version\}", r"(?P<version>[0-9]+)") + r"\Z")
        out: dict[str, list[tuple[int, CType]]] = {}
        for t in self.h.typedefs:
            m = pat.match(t.name)
            if m:
                out.setdefault(m.group("name"), []).append((int(m.group("version")), t.type))
        return out

    def abi_pin(self, f: Function, candidates: list[tuple[int, CType]]) -> int | None:
        """The version whose PFN prototype is the declaration's: the ABI this binding calls.

        cudaTypedefs.h declares several versions of some functions (cuCtxCreate 3020, 11040, 12050);
        neither the lowest nor the highest is right in general — the one with the declaration's
        parameter types is.  Among identical prototypes the newest wins.
        """
        want = (self.canonical(f.result), tuple(self.canonical(p.type) for p in f.params), f.variadic)
        best = None
        for version, ptype in candidates:
            proto = resolve(ptype, self.typedefs)
            proto = proto.pointee if isinstance(proto, Pointer) else proto
            if not isinstance(proto, FunctionProto):
                continue
            got = (self.canonical(proto.result), tuple(self.canonical(p.type) for p in proto.params), proto.variadic)
            if got == want and (best is None or version > best):
                best = version
        return best

    def canonical(self, t: CType) -> CType:
        """``t`` with every vendor typedef expanded (CUdeviceptr and CUdeviceptr_v2 compare equal)."""
        t = resolve(t, self.typedefs)
        if isinstance(t, Pointer):
            return replace(t, pointee=self.canonical(t.pointee))
        if isinstance(t, Array):
            return replace(t, element=self.canonical(t.element))
        if isinstance(t, FunctionProto):
            return replace(t, result=self.canonical(t.result),
                           params=tuple(replace(p, name=None, type=self.canonical(p.type)) for p in t.params))
        return t

    def bind_functions(self) -> tuple[BoundFunction, ...]:
        publics = self.public_names()
        fspecs: Mapping[str, FunctionSpec] = {f.name.value: f for f in self.spec.functions}
        for fs in self.spec.functions:
            if fs.name.value not in publics and not self.older_than(fs.since):
                self.err.error(fs.name.location, f"function '{fs.name}' is not declared in {self.h.name}"
                               f"{suggest(fs.name.value, publics)}")
        names = self.selected(sorted(publics))
        versions = self.version_candidates()
        per_thread = {w.value: fmt for w, fmt in self.spec.per_thread}
        for w, _ in self.spec.per_thread:
            if not any(r.wrapper == w.value for r in self.h.renames):
                self.err.error(w.location, f"no function is renamed through '{w}' in {self.h.name}")
        if self.spec.rules:  # (after the typo checks above: a rule adds entries only for declared parameters)
            bound = {n: publics[n][0] for n in names if not (n in fspecs and fspecs[n].skip)}
            fspecs = apply_rules(self.spec.rules, bound, fspecs, self.err, self.h.name)
        out: list[BoundFunction] = []
        for name in names:
            fs = fspecs.get(name, FunctionSpec(name=_name(name, self.spec.location)))
            if fs.skip:
                continue
            func, wrapper = publics[name]
            if not self.check_py_name(name, func.location, "function"):
                continue
            symbol = fs.symbol.value if fs.symbol else func.name
            pts = per_thread[wrapper].format(func.name) if wrapper in per_thread else None
            pin = self.abi_pin(func, versions[name]) if name in versions else None
            bf = self.bind_function(len(out), name, symbol, pts, func, fs, pin, fspecs, publics)
            if bf is not None:
                out.append(bf)
        return tuple(out)

    def bind_function(self, index: int, public: str, symbol: str, pts: str | None, f: Function,
                      fs: FunctionSpec, abi_version: int | None, fspecs: Mapping[str, FunctionSpec],
                      publics: Mapping[str, tuple[Function, str | None]]) -> BoundFunction | None:
        if f.variadic:
            return None  # cffi API mode cannot forward a va_list portably; none in the bound APIs
        by_name = {p.name: p for p in f.params if p.name}
        pspecs = {p.name.value: p for p in fs.params}
        ok = True
        for ps in fs.params:
            if ps.name.value not in by_name:
                self.err.error(ps.name.location, f"function '{public}' has no parameter '{ps.name}'"
                               f"{suggest(ps.name.value, by_name)}")
                ok = False
            if ps.len is not None and ps.len.value not in by_name:
                self.err.error(ps.len.location, f"len: function '{public}' has no parameter '{ps.len}'"
                               f"{suggest(ps.len.value, by_name)}")
                ok = False
            if ps.string is not None and ps.string.length_param is not None and ps.string.length_param.value not in by_name:
                lp = ps.string.length_param
                self.err.error(lp.location, f"length_param: function '{public}' has no parameter '{lp}'"
                               f"{suggest(lp.value, by_name)}")
                ok = False
            if ps.string is not None and ps.string.size_function is not None and ps.string.size_function.value not in publics:
                sf = ps.string.size_function
                self.err.error(sf.location, f"size_function '{sf}' is not declared in {self.h.name}{suggest(sf.value, publics)}")
                ok = False
        if ok:
            ok = self.check_annotations(public, fs, by_name)
        if fs.error_log is not None and fs.error_log.value not in publics:
            self.err.error(fs.error_log.location, f"error_log function '{fs.error_log}' is not declared in "
                           f"{self.h.name}{suggest(fs.error_log.value, publics)}")
            ok = False
        if not ok:
            return None
        len_of: dict[str, list[str]] = {}
        capacity_of: dict[str, str] = {}
        for ps in fs.params:
            if ps.len is not None:
                len_of.setdefault(ps.len.value, []).append(ps.name.value)
            if ps.string is not None and ps.string.length_param is not None:
                capacity_of[ps.string.length_param.value] = ps.name.value
        roles: list[tuple[str, CType, Role, ParamSpec | None]] = []
        fills: dict[str, tuple[tuple[str, int], ...]] = {}
        for i, p in enumerate(f.params):
            c_name = p.name or f"arg{i}"
            pspec = pspecs.get(c_name)
            out_param = self.spec.errors.out_param
            if out_param is not None and c_name == out_param.value and pspec is None and isinstance(p.type, Pointer):
                role: Role | None = Role.ERRCODE  # the status of a function that returns something else
            else:
                role = self.param_role(public, p.type, pspec.direction if pspec else None, pspec, c_name in len_of,
                                       c_name in capacity_of, f.location)
            if role is None:
                return None
            if pspec is not None and pspec.fill:
                fill = self.bind_fill(public, pspec, p.type, role)
                if fill is None:
                    return None
                fills[c_name] = fill
            roles.append((c_name, p.type, role, pspec))
        # Python keywords and the names the wrapper body refers to are renamed with a trailing '_'
        # (ex: from -> from_; bytes -> bytes_ only where the body calls bytes())
        shadowed = set(WRAPPER_GLOBALS).union(*(ROLE_GLOBALS.get(r, ()) for _, _, r, _ in roles))
        shadowed |= {ps.string.size_function.value for ps in fs.params
                     if ps.string is not None and ps.string.size_function is not None}
        if fs.error_log is not None:
            shadowed.add(fs.error_log.value)
        params: list[BoundParam] = []
        used: set[str] = set()
        for c_name, ctype, role, pspec in roles:
            # a parameter with a local (_<name>: every role but in/capacity) named 'new' would shadow the
            # helper _new, 'r' the status _r, 'T0' the type _T0
            has_local = role not in (Role.IN, Role.CAPACITY)
            py = c_name + "_" if keyword.iskeyword(c_name) or c_name in shadowed \
                or re.match(r"_T[0-9]+\Z", c_name) \
                or has_local and (f"_{c_name}" in shadowed or re.match(r"T[0-9]+\Z", c_name)) else c_name
            why = ("not a Python identifier" if not PY_IDENT.match(py) else
                   "names starting with '__' are not allowed" if py.startswith("__") else
                   f"another parameter is already bound as {py!r}" if py in used else None)
            if why is not None:
                self.err.error(f.location, f"parameter {c_name!r} of '{public}' cannot be bound as a Python name: {why}")
                return None
            used.add(py)
            bp = self.make_param(py, c_name, ctype, role, pspec, tuple(len_of.get(c_name, ())))
            params.append(replace(bp, fill=fills[c_name]) if c_name in fills else bp)
        # len: names arrays by their C names; the wrapper refers to them by their Python names (b -> b_)
        py_of = {bp.c_name: bp.name for bp in params}
        params = [replace(bp, len_of=tuple(py_of[n] for n in bp.len_of)) if bp.len_of else bp for bp in params]
        # the wrapper's locals are _<name> and _<name>_n: no parameter may be called that
        locals_ = {f"_{bp.name}" for bp in params} | {f"_{bp.name}_n" for bp in params}
        for bp in params:
            if bp.name in locals_:
                self.err.error(f.location, f"parameter {bp.c_name!r} of '{public}' cannot be bound as a Python name: "
                               "it collides with a local of the generated wrapper")
                return None
        result = resolve(f.result, self.typedefs)
        returns_status = self.spec.errors.reported and _same_type(f.result, self.spec.errors.type.value)
        status_codes = []
        for s in fs.status:
            c = self.error_constants.get(s.value)
            if c is None:
                self.err.error(s.location, f"status code '{s}' is not a value of {self.spec.errors.type}"
                               f"{suggest(s.value, self.error_constants)}")
            else:
                status_codes.append(c.value)
        log_param = None
        if fs.error_log is not None:
            log_param = next((p.name for p in params if p.role is Role.IN), None)
        proto_params = ", ".join(declare(p.type, p.name or f"arg{i}") for i, p in enumerate(f.params)) or "void"
        return BoundFunction(
            index=index, public=public, symbol=symbol, per_thread_symbol=pts, c=f, params=tuple(params),
            returns_status=returns_status, result_decl=declare(f.result), result_kind=self.value_kind(result),
            status_codes=tuple(status_codes), abi_version=abi_version,
            min_version=_version_str(abi_version) if abi_version is not None else None,
            error_log=fs.error_log.value if fs.error_log else None, log_param=log_param,
            prototype=declare(f.result, f"{public}({proto_params})"),
            pointer_type=declare(f.result, f"(*)({proto_params})"),
        )

    def is_integer(self, t: CType) -> bool:
        """An integer parameter (after typedefs): what a length or a capacity is passed as."""
        r = resolve(t, self.typedefs)
        return isinstance(r, (EnumRef, InlineEnum)) or isinstance(r, Builtin) and r.name in INTEGER_BUILTINS

    def check_annotations(self, public: str, fs: FunctionSpec, by_name: Mapping[str, Param]) -> bool:
        """Refuse ``len:``, ``length_param:``, ``direction:`` and ``nullable:`` where they make no sense: each
        would bind a wrapper that drops a parameter from its signature or fails when called."""
        ok = True

        def bad(loc: Location, message: str) -> None:
            nonlocal ok
            self.err.error(loc, message)
            ok = False

        # parameter -> (what it takes, the annotated parameter): a length or capacity filled in by the wrapper
        taken: dict[str, tuple[str, str]] = {}
        for ps in fs.params:
            name = ps.name.value
            if ps.len is not None or ps.terminated:  # an input array: neither written by the function nor a string
                array = "len: null-terminated" if ps.terminated else "len:"
                if ps.direction in ("out", "inout"):
                    bad(ps.name.location, f"parameter '{name}' of '{public}' has {array} (an input array); it "
                        f"cannot also be '{ps.direction}'")
                if ps.string is not None:
                    bad(ps.name.location, f"parameter '{name}' of '{public}' has {array} (an input array); it "
                        "cannot also be an output string (string:)")
            if ps.device:
                for key, given in (("direction", ps.direction in ("out", "inout")), ("string", ps.string is not None),
                                   ("len", ps.len is not None or ps.terminated)):
                    if given:
                        bad(ps.name.location, f"parameter '{name}' of '{public}' is a device pointer (device: true, an "
                            f"address passed through); it cannot also be {key}: (the host never reads or writes it)")
                if not self.is_integer(by_name[name].type) and not isinstance(
                        resolve(by_name[name].type, self.typedefs), Pointer):
                    bad(ps.name.location, f"parameter '{name}' of '{public}' is {declare(by_name[name].type)}, "
                        "neither a pointer nor an integer, so it cannot be a device pointer (device: true)")
            if ps.string is not None and ps.direction == "in":
                bad(ps.name.location, f"parameter '{name}' of '{public}' has string: (an output string the function "
                    "writes); it cannot also be 'in' (an input string needs neither)")
            if ps.len is not None:
                if ps.len.value == name:
                    bad(ps.len.location, f"len: parameter '{name}' of '{public}' cannot be its own length")
                elif not self.is_integer(by_name[ps.len.value].type):
                    bad(ps.len.location, f"len: parameter '{ps.len}' of '{public}' is not an integer, so it "
                        f"cannot hold the length of '{name}'")
                elif ps.len.value in taken and taken[ps.len.value][0] == "capacity":
                    bad(ps.len.location, f"len: parameter '{ps.len}' of '{public}' already takes the capacity "
                        f"of '{taken[ps.len.value][1]}'")
                else:
                    taken.setdefault(ps.len.value, ("length", name))
            lp = ps.string.length_param if ps.string is not None else None
            if lp is not None:
                if lp.value == name:
                    bad(lp.location, f"length_param: parameter '{name}' of '{public}' cannot be its own capacity")
                elif not self.is_integer(by_name[lp.value].type):
                    bad(lp.location, f"length_param: parameter '{lp}' of '{public}' is not an integer, so it "
                        f"cannot take the capacity of '{name}'")
                elif lp.value in taken:
                    what, of = taken[lp.value]
                    bad(lp.location, f"length_param: parameter '{lp}' of '{public}' already takes the {what} "
                        f"of '{of}'")
                else:
                    taken[lp.value] = ("capacity", name)
            if ps.nullable and not isinstance(resolve(by_name[name].type, self.typedefs), (Pointer, Array)):
                bad(ps.name.location, f"parameter '{name}' of '{public}' is not a pointer, so it cannot be nullable")
        for ps in fs.params:
            if ps.name.value not in taken:
                continue
            what, of = taken[ps.name.value]
            role = "len:" if what == "length" else "length_param"
            for key, given in (("direction", ps.direction in ("out", "inout")), ("len", ps.len is not None),
                               ("string", ps.string is not None)):
                if given:
                    also = f"'{ps.direction}'" if key == "direction" else f"{key}:"
                    bad(ps.name.location, f"parameter '{ps.name}' of '{public}' is the {what} of '{of}' ({role}); "
                        f"it cannot also be {also}")
        return ok

    def value_kind(self, t: CType) -> ValueKind:
        """How a value of type ``t`` reads into Python."""
        t = resolve(t, self.typedefs)
        match t:
            case Builtin():
                if t.name == "void":
                    return ValueKind.VOID
                if t.name in FLOAT_BUILTINS:
                    return ValueKind.FLOAT
                return ValueKind.INT
            case EnumRef() | InlineEnum():
                return ValueKind.INT
            case Pointer():
                return ValueKind.STR if is_char(resolve(t.pointee, self.typedefs)) else ValueKind.CDATA
            case RecordRef() | InlineRecord():
                return ValueKind.STRUCT
            case TypedefRef() | Array() | FunctionProto():  # (a typedef the header does not define: opaque)
                return ValueKind.CDATA
            case _:
                assert_never(t)

    def param_role(self, public: str, t: CType, direction: str | None, ps, is_len: bool,  # type: ignore[no-untyped-def]
                   is_capacity: bool, loc: Location) -> Role | None:
        where = ps.name.location if ps is not None else loc
        r = resolve(t, self.typedefs)
        if is_capacity:
            return Role.CAPACITY
        if is_len:
            return Role.LEN
        if ps is not None and ps.device:
            return Role.DEVICE
        if ps is not None and ps.string is not None:
            if not isinstance(r, Pointer) or not is_char(resolve(r.pointee, self.typedefs)):
                self.err.error(where, f"string: parameter '{ps.name}' of '{public}' is not a char pointer")
                return None
            if r.pointee.const or resolve(r.pointee, self.typedefs).const:
                self.err.error(where, f"string: parameter '{ps.name}' of '{public}' points to const, so the "
                               "function cannot write the string into it")
                return None
            return Role.OUT_BUFFER
        if ps is not None and (ps.len is not None or ps.terminated):
            if not isinstance(r, (Pointer, Array)):
                self.err.error(where, f"len: parameter '{ps.name}' of '{public}' is not a pointer or array")
                return None
            return Role.IN_ARRAY
        is_ptr = isinstance(r, Pointer)
        if direction in ("out", "inout"):
            if not is_ptr:
                self.err.error(where, f"parameter '{ps.name}' of '{public}' is not a pointer, so it cannot be "
                               f"'{direction}'")
                return None
            assert isinstance(r, Pointer)
            pointee = resolve(r.pointee, self.typedefs)
            if isinstance(pointee, Builtin) and pointee.name == "void":
                self.err.error(where, f"parameter '{ps.name}' of '{public}' is a void pointer; an '{direction}' "
                               "parameter needs a typed pointer")
                return None
            if r.pointee.const or pointee.const:
                self.err.error(where, f"parameter '{ps.name}' of '{public}' points to const, so the function "
                               f"cannot write it ('{direction}')")
                return None
            if isinstance(pointee, (FunctionProto, Array)) or self.incomplete(pointee):
                what = (f"an incomplete type ({pointee.kind} {pointee.tag})" if isinstance(pointee, RecordRef)
                        else "a function" if isinstance(pointee, FunctionProto) else "an array")
                self.err.error(where, f"parameter '{ps.name}' of '{public}' points to {what}, which cannot be "
                               f"allocated for an '{direction}' parameter")
                return None
            if direction == "inout":
                return Role.INOUT
            return self.out_role(pointee)
        if direction == "in" or not is_ptr:
            if is_ptr and is_char(resolve(r.pointee, self.typedefs)) and r.pointee.const:  # type: ignore[union-attr]
                return Role.IN_STR
            return Role.IN
        # inference for pointers without a spec
        assert isinstance(r, Pointer)
        pointee = resolve(r.pointee, self.typedefs)
        if r.pointee.const or pointee.const:
            return Role.IN_STR if is_char(pointee) else Role.IN
        if isinstance(pointee, (Builtin,)) and (pointee.name == "void" or is_char(pointee)):
            return Role.IN
        if isinstance(pointee, (FunctionProto, Array)):
            return Role.IN
        if isinstance(pointee, (RecordRef, InlineRecord)) and self.incomplete(pointee):
            return Role.IN
        return self.out_role(pointee)

    def bind_fill(self, public: str, ps: ParamSpec, t: CType, role: Role) -> tuple[tuple[str, int], ...] | None:
        """``fill:`` of an out struct: each member, and the value of the enum constant it is set to."""
        if role is not Role.OUT_STRUCT:
            self.err.error(ps.name.location, f"fill: parameter '{ps.name}' of '{public}' is not a struct the "
                           f"function fills ({declare(t)}, bound as '{role}'): fill: sets members of an out struct")
            return None
        r = resolve(t, self.typedefs)
        assert isinstance(r, Pointer)
        rec = _record_of(self, r.pointee)
        assert rec is not None  # (an out struct is complete)
        fields = _fields(self, rec)
        values = {c.name: c.value for e in self.h.enums for c in e.constants}
        out = []
        for member, constant in ps.fill:
            if member.value not in fields:
                self.err.error(member.location, f"fill: '{declare(r.pointee)}' has no member '{member}'"
                               f"{suggest(member.value, fields)}")
                return None
            mt = resolve(fields[member.value], self.typedefs)
            enum = mt.enum if isinstance(mt, InlineEnum) else self.enum_tags.get(mt.tag) \
                if isinstance(mt, EnumRef) else None
            allowed = {c.name: c.value for c in enum.constants} if enum is not None else values
            if constant.value not in allowed:
                of = (f"a value of the enum of member '{member}'" if enum is not None
                      else f"an enum constant of {self.h.name}")
                self.err.error(constant.location, f"fill: '{constant}' is not {of}{suggest(constant.value, allowed)}")
                return None
            out.append((member.value, allowed[constant.value]))
        return tuple(out)

    def incomplete(self, t: CType) -> bool:
        if isinstance(t, RecordRef):
            rec = self.records.get((t.kind, t.tag))
            return rec is None or rec.fields is None
        return False

    def out_role(self, pointee: CType) -> Role:
        if isinstance(pointee, Pointer) and is_char(resolve(pointee.pointee, self.typedefs)):
            return Role.OUT_STR
        if isinstance(pointee, (RecordRef, InlineRecord)):
            return Role.OUT_STRUCT
        return Role.OUT

    def make_param(self, py: str, c_name: str, t: CType, role: Role, ps, len_of: tuple[str, ...]) -> BoundParam:  # type: ignore[no-untyped-def]
        r = resolve(t, self.typedefs)
        pointee = element = ""
        py_type, py_result, kind = "CData", "", ValueKind.NONE
        if isinstance(r, (Pointer, Array)):
            inner = r.pointee if isinstance(r, Pointer) else r.element
            pointee = declare(inner)
            element = pointee
        match role:
            case Role.IN:
                k = self.value_kind(t)
                py_type = {ValueKind.INT: "int", ValueKind.FLOAT: "float"}.get(k, "CData")
            case Role.IN_STR:
                py_type = "str | bytes"
            case Role.IN_ARRAY:
                inner_t = resolve(r.pointee if isinstance(r, Pointer) else r.element, self.typedefs)  # type: ignore[union-attr]
                if isinstance(inner_t, Pointer) and is_char(resolve(inner_t.pointee, self.typedefs)):
                    py_type = "Sequence[str | bytes]"
                else:
                    py_type = "Sequence[Any]"
            case Role.OUT | Role.INOUT | Role.OUT_STR | Role.OUT_STRUCT:
                kind = (ValueKind.STR if role is Role.OUT_STR else ValueKind.STRUCT if role is Role.OUT_STRUCT
                        else self.value_kind(r.pointee))  # type: ignore[union-attr]
                py_result = {ValueKind.INT: "int", ValueKind.FLOAT: "float", ValueKind.STR: "str"}.get(kind, "CData")
                if role is Role.INOUT:
                    py_type = py_result
            case Role.OUT_BUFFER:
                kind = ValueKind.BYTES if ps.string.binary else ValueKind.STR
                py_result = str(kind)
            case Role.DEVICE:
                py_type = "Any"  # an Allocation, a slice or view of one, or an int (device_pointers.py)
            case Role.LEN | Role.CAPACITY | Role.ERRCODE:
                pass
            case _:
                assert_never(role)
        nullable = bool(ps and ps.nullable)
        if nullable:
            py_type += " | None"
        refuse_null = (role is Role.IN and not nullable and self.spec.errors.null_handle is not None
                       and isinstance(r, Pointer) and self.incomplete(resolve(r.pointee, self.typedefs)))
        cast = declare(t) if role is Role.DEVICE and isinstance(r, Pointer) else ""
        return BoundParam(name=py, c_name=c_name, type=t, decl=declare(t, c_name), role=role, pointee=pointee,
                          cast=cast,
                          element=element, len_of=len_of, nullable=nullable, refuse_null=refuse_null,
                          string=ps.string if ps else None,
                          terminated=bool(ps and ps.terminated),
                          py_type=py_type, py_result=py_result, result_kind=kind)

    # -------------------------------------------------------------- errors
    def bind_errors(self) -> tuple[ErrorCode, ...]:
        es = self.spec.errors
        self.error_constants: dict[str, EnumConstant] = {}
        if not es.reported:  # errors: none
            return ()
        enum: Enum | None = None
        if es.codes is not None:
            # the status is an integer handle (ex: Qnn_ErrorHandle_t, uint64_t) whose masked bits are a code of
            # the enum errors.codes names
            st = self.typedefs.get(es.type.value)
            rst = resolve(st.type, self.typedefs) if st is not None else None
            if not (isinstance(rst, Builtin) and rst.name in INTEGER_BUILTINS):
                self.err.error(es.type.location, f"error type '{es.type}' must be an integer typedef declared in "
                               f"{self.h.name} when errors.codes is given{self.what_is(es.type.value)}")
        t = self.typedefs.get((es.codes or es.type).value)
        if t is not None:
            rt = resolve(t.type, self.typedefs)
            if isinstance(rt, InlineEnum):
                enum = rt.enum
            elif isinstance(rt, EnumRef):
                enum = self.enum_tags.get(rt.tag)
        elif (es.codes or es.type).value in self.enum_tags:
            enum = self.enum_tags[(es.codes or es.type).value]
        if es.macros:
            enum = self.macro_error_enum(es)
        if enum is None:
            which = es.codes or es.type
            self.err.error(which.location, f"error {'codes' if es.codes else 'type'} '{which}' is not an enum "
                           f"typedef declared in {self.h.name}{self.what_is(which.value)}")
            return ()
        self.error_constants = {c.name: c for c in enum.constants}
        kinds = {k.name.value for k in self.core.error_kinds}
        since = {c.value: v for c, v in es.since}
        if es.default.value not in kinds:
            self.err.error(es.default.location, f"'{es.default}' is not an error kind of {self.core.path}"
                           f"{suggest(es.default.value, kinds)}")
        if es.null_handle is not None and es.null_handle.value not in kinds:
            self.err.error(es.null_handle.location, f"null_handle '{es.null_handle}' is not an error kind of "
                           f"{self.core.path}{suggest(es.null_handle.value, kinds)}")
        mapped: dict[str, str] = {}
        for code, kind in es.kinds:
            if kind.value not in kinds:
                self.err.error(kind.location, f"'{kind}' is not an error kind of {self.core.path}{suggest(kind.value, kinds)}")
            if code.value in mapped:
                self.err.error(code.location, f"error code '{code}' is mapped twice")
            mapped[code.value] = kind.value
        named = [(c, "success") for c in es.success] + [(c, "kinds") for c, _ in es.kinds] + [(c, "defaulted") for c in es.defaulted]
        codes = es.codes or es.type  # the enum whose values the codes are
        for code, _ in named:
            if code.value not in self.error_constants and not self.older_than(since.get(code.value)):
                self.err.error(code.location, f"error code '{code}' is not a value of {codes} in {self.h.name}"
                               f"{suggest(code.value, self.error_constants)}")
        covered = {c.value for c, _ in named}
        for c in enum.constants:
            if c.name not in covered:
                self.err.error(codes.location, f"error code '{c.name}' ({c.value}) of {codes} is neither "
                               "mapped in errors.kinds nor listed in errors.defaulted or errors.success")
            if es.mask and c.value & ~es.mask:  # (negative values too)
                self.err.error(codes.location, f"error code '{c.name}' ({c.value}) of {codes} has bits outside "
                               f"errors.mask ({es.mask:#x}): no masked status can equal it")
        success = {c.value for c in es.success}
        return tuple(ErrorCode(name=c.name, value=c.value, kind=mapped.get(c.name, es.default.value))
                     for c in enum.constants if c.name not in success)

    def what_is(self, name: str) -> str:
        """A message's end for ``name``, declared but of the wrong kind (what it is), or not declared (a close
        name, if any)."""
        t = self.typedefs.get(name)
        if t is None:
            return suggest(name, self.typedefs) if name not in self.enum_tags else ": it is an enum tag, not a typedef"
        rt = resolve(t.type, self.typedefs)
        match rt:
            case Builtin():
                return f": it is a typedef of {rt.name}"
            case InlineEnum() | EnumRef():
                return ": it is an enum typedef"
            case InlineRecord():
                return f": it is a {rt.record.kind} typedef"
            case RecordRef():
                return f": it is a {rt.kind} typedef"
            case Pointer():
                return ": it is a pointer typedef"
            case TypedefRef() | Array() | FunctionProto():
                return ": it is a typedef of another kind"
            case _:
                assert_never(rt)

    def macro_error_enum(self, es) -> Enum | None:  # type: ignore[no-untyped-def]
        """Status codes defined as macros (OpenCL): the negative ``errors.macros`` constants plus success."""
        if es.type.value not in self.typedefs:
            self.err.error(es.type.location, f"error type '{es.type}' is not a typedef declared in {self.h.name}"
                           f"{suggest(es.type.value, self.typedefs)}")
            return None
        success = {c.value for c in es.success}
        include = [p.value for p in es.macros if not p.value.startswith("!")]
        exclude = [p.value[1:] for p in es.macros if p.value.startswith("!")]
        names = {c.name for c in self.h.constants}
        for p in es.macros:
            pat = p.value.lstrip("!")
            if not any(fnmatch.fnmatchcase(n, pat) for n in names):
                self.err.error(p.location, f"macro pattern '{pat}' matches no macro constant of {self.h.name}")

        def wanted(c: MacroConstant) -> bool:
            return (any(fnmatch.fnmatchcase(c.name, p) for p in include)
                    and not any(fnmatch.fnmatchcase(c.name, p) for p in exclude)
                    and isinstance(c.value, int) and (c.value < 0 or c.name in success)
                    and self.in_bound_files(c.location))

        codes = tuple(EnumConstant(name=c.name, value=c.value, location=c.location)  # type: ignore[arg-type]
                      for c in self.h.constants if wanted(c))
        if not codes:
            self.err.error(es.macros[0].location, f"macros: no negative integer macro matches in {self.h.name}")
            return None
        return Enum(tag=es.type.value, constants=codes)

    # ------------------------------------------------------- declarations
    def declarations(self) -> tuple[tuple[str, ...], tuple[BoundEnum, ...], tuple[str, ...]]:
        records = [r for r in self.h.records if self.in_bound_files(r.location)]
        typedefs = [t for t in self.h.typedefs if self.in_bound_files(t.location)]
        enums = [e for e in self.h.enums if self.in_bound_files(e.location)]
        out: list[str] = []
        out += [f"{r.kind} {r.tag};" for r in sorted(records, key=_pos)]
        enum_names: dict[str, str] = {}
        for t in typedefs:
            if isinstance(t.type, EnumRef):
                enum_names.setdefault(t.type.tag, t.name)
        bound_enums = []
        enum_typedefs = {t.name: t for t in typedefs}
        for e in sorted(enums, key=_pos):
            body = ", ".join(f"{c.name} = {c.value}" for c in e.constants)
            out.append(f"enum {e.tag + ' ' if e.tag else ''}{{ {body} }};")
            if e.tag:
                name = enum_names.get(e.tag, e.tag)
                where = enum_typedefs[name].location if name in enum_typedefs else e.location
                bound_enums.append(BoundEnum(name=name, constants=e.constants))
                self.enum_locations.setdefault(name, where)
        for t in typedefs:
            if isinstance(t.type, InlineEnum):
                bound_enums.append(BoundEnum(name=t.name, constants=t.type.enum.constants))
                self.enum_locations.setdefault(t.name, t.location)
        # typedefs and complete records, topologically ordered by what they use by value
        nodes: dict[tuple[str, str], tuple[Location, str, set[tuple[str, str]]]] = {}
        defined = {(r.kind, r.tag) for r in records if r.fields is not None}
        for r in records:
            if r.fields is None:
                continue
            deps: set[tuple[str, str]] = set()
            for f in r.fields:
                deps |= self.deps(f.type, defined)
            nodes[("record", f"{r.kind} {r.tag}")] = (r.location, _record_def(r), deps)
        for t in typedefs:
            nodes[("typedef", t.name)] = (t.location, f"typedef {declare(t.type, t.name)};", self.deps(t.type, defined))
        out += _toposort(nodes)
        structs = tuple(t.name for t in typedefs
                        if isinstance(resolve(t.type, self.typedefs), (RecordRef, InlineRecord))
                        and not self.incomplete(resolve(t.type, self.typedefs)))
        return tuple(out), tuple(bound_enums), structs

    def deps(self, t: CType, defined: AbstractSet[tuple[str, str | None]]) -> set[tuple[str, str]]:
        out: set[tuple[str, str]] = set()
        for ref, by_value in references(t):
            if isinstance(ref, TypedefRef):
                out.add(("typedef", ref.name))
                if by_value:
                    target = resolve(ref, self.typedefs)
                    if isinstance(target, RecordRef) and (target.kind, target.tag) in defined:
                        out.add(("record", f"{target.kind} {target.tag}"))
            elif isinstance(ref, RecordRef) and by_value and (ref.kind, ref.tag) in defined:
                out.add(("record", f"{ref.kind} {ref.tag}"))
        return out


def _pos(x: Record | Enum | Typedef) -> tuple[str, int, int]:
    return (x.location.file, x.location.line, x.location.col)


def _record_def(r: Record) -> str:
    from .ctypes_util import record_body
    return record_body(r) + ";"


def _toposort(nodes: dict[tuple[str, str], tuple[Location, str, set[tuple[str, str]]]]) -> list[str]:
    order = sorted(nodes, key=lambda k: (nodes[k][0].file, nodes[k][0].line, nodes[k][0].col, k))
    done: set[tuple[str, str]] = set()
    visiting: set[tuple[str, str]] = set()
    out: list[str] = []

    def visit(k: tuple[str, str]) -> None:
        if k in done or k not in nodes or k in visiting:
            return
        visiting.add(k)
        for d in sorted(nodes[k][2]):
            visit(d)
        visiting.discard(k)
        done.add(k)
        out.append(nodes[k][1])

    for k in order:
        visit(k)
    return out


def _same_type(t: CType, name: str) -> bool:
    return isinstance(t, TypedefRef) and t.name == name


def _name(value: str, loc: Location):  # type: ignore[no-untyped-def]
    from .spec import Name
    return Name(value=value, location=loc)


def _record_of(b: Binder, t: CType) -> Record | None:
    """The complete struct or union ``t`` is (typedefs expanded), or None."""
    c = resolve(t, b.typedefs)
    rec = c.record if isinstance(c, InlineRecord) else b.records.get((c.kind, c.tag)) if isinstance(c, RecordRef) else None
    return rec if rec is not None and rec.fields is not None else None


def _fields(b: Binder, rec: Record) -> dict[str, CType]:
    """The members of ``rec`` by name, those of its anonymous structs and unions included (as C reaches them)."""
    out: dict[str, CType] = {}
    for f in rec.fields or ():
        if f.name:
            out.setdefault(f.name, f.type)
        else:
            inner = _record_of(b, f.type)
            if inner is not None:
                for k, v in _fields(b, inner).items():
                    out.setdefault(k, v)
    return out


def _member(b: Binder, t: CType, path: str) -> tuple[CType | None, str]:
    """The type of member ``path`` (``a.b``) of the struct ``t``, or (None, why not)."""
    where = declare(t)
    for part in path.split("."):
        rec = _record_of(b, t)
        if rec is None:
            return None, f"'{where}' is not a complete struct or union"
        fields = _fields(b, rec)
        if part not in fields:
            return None, f"'{where}' has no member '{part}'{suggest(part, fields)}"
        t, where = fields[part], f"{where}.{part}"
    return t, ""


# bits of the integer builtins (LP64), and which are unsigned
_INT_BITS = {"char": 8, "signed char": 8, "unsigned char": 8, "short": 16, "unsigned short": 16, "int": 32,
             "unsigned int": 32, "long": 64, "unsigned long": 64, "long long": 64, "unsigned long long": 64,
             "size_t": 64, "ssize_t": 64, "ptrdiff_t": 64, "intptr_t": 64, "uintptr_t": 64, "int8_t": 8,
             "uint8_t": 8, "int16_t": 16, "uint16_t": 16, "int32_t": 32, "uint32_t": 32, "int64_t": 64,
             "uint64_t": 64, "wchar_t": 32, "_Bool": 1}


def _int_bounds(b: Binder, t: CType) -> tuple[int, int] | None:
    """The values an integer (or enum) type holds, or None when ``t`` is not one."""
    c = b.canonical(t)
    if isinstance(c, (EnumRef, InlineEnum)):
        return -(1 << 31), (1 << 31) - 1
    if not isinstance(c, Builtin) or c.name not in _INT_BITS:
        return None
    bits = _INT_BITS[c.name]
    if c.name.startswith(("unsigned", "uint")) or c.name in ("size_t", "_Bool"):
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def table_field(public: str, prefix: str) -> str:
    """The default table field of a function: ``Prefix_name`` -> ``prefixName`` after the spec's ``prefix``
    is removed (prefix Qnn: QnnBackend_getApiVersion -> backendGetApiVersion); "" when the name has no ``_``."""
    head, sep, tail = public.partition("_")
    if not sep or not tail:
        return ""
    if prefix and head.startswith(prefix) and len(head) > len(prefix):
        head = head[len(prefix):]
    return head[:1].lower() + head[1:] + tail[:1].upper() + tail[1:]


def bind_table(spec: LibrarySpec, header: Header, functions: tuple[BoundFunction, ...], b: Binder,
               col: Collector) -> Resolver:
    """Check ``resolver: {kind: table}`` against the header: the provider is a bound function
    ``status (const Interface ***list, integer *n)``, the interface a struct with the version and table members,
    and every other bound function has a table field of its own prototype."""
    ts = spec.table
    assert ts is not None
    by = {f.public: f for f in functions}
    provider = _bound(by, ts.provider, "provider", header, col)
    if provider is None:
        return Resolver()
    iface = TypedefRef(name=ts.interface.value)
    if ts.interface.value not in b.typedefs or _record_of(b, iface) is None:
        structs = [t for t in b.typedefs if _record_of(b, TypedefRef(name=t)) is not None]
        col.error(ts.interface.location, f"interface '{ts.interface}' is not a struct typedef of "
                  f"{header.name}{suggest(ts.interface.value, structs)}")
        return Resolver()
    params = provider.c.params
    p0 = b.canonical(params[0].type) if params else None
    p1 = b.canonical(params[1].type) if len(params) > 1 else None
    want = b.canonical(iface)
    depth, inner = 0, p0
    while isinstance(inner, Pointer):
        depth, inner = depth + 1, inner.pointee
    if (len(params) != 2 or depth != 3 or inner is None or replace(inner, const=False) != replace(want, const=False)
            or not isinstance(p1, Pointer) or _shape(b, p1.pointee) != "int"
            or not (provider.returns_status or _shape(b, provider.c.result) == "int")):
        col.error(ts.provider.location, f"'{ts.provider}' does not look like a provider of {ts.interface}: "
                  f"expected status (const {ts.interface} ***list, uint32_t *count), got {provider.prototype}")
        return Resolver()
    ok = True
    vtype, why = _member(b, iface, ts.version.value)
    if vtype is None:
        col.error(ts.version.location, f"version '{ts.version}': {why}")
        ok = False
    else:
        vrec = _record_of(b, vtype)
        vf = _fields(b, vrec) if vrec is not None else {}
        if any(k not in vf or _shape(b, vf[k]) != "int" for k in ("major", "minor")):
            col.error(ts.version.location, f"version '{ts.version}' is a '{declare(vtype)}', not a struct with "
                      "integer members 'major' and 'minor'")
            ok = False
    ttype, why = _member(b, iface, ts.table.value)
    trec = _record_of(b, ttype) if ttype is not None else None
    if ttype is None:
        col.error(ts.table.location, f"table '{ts.table}': {why}")
        return Resolver()
    if trec is None:
        col.error(ts.table.location, f"table '{ts.table}' is a '{declare(ttype)}', not a struct of function pointers")
        return Resolver()
    slots = _fields(b, trec)
    for member, value in ts.match:
        mtype, why = _member(b, iface, member.value)
        bounds = _int_bounds(b, mtype) if mtype is not None else None
        if mtype is None:
            col.error(member.location, f"match '{member}': {why}")
            ok = False
        elif bounds is None:
            col.error(member.location, f"match '{member}' is a '{declare(mtype)}', not an integer member")
            ok = False
        elif not bounds[0] <= value <= bounds[1]:
            col.error(member.location, f"match '{member}': {value} is not a value of its type "
                      f"'{declare(mtype)}' ({bounds[0]}..{bounds[1]})")
            ok = False
    added: dict[str, int] = {}
    for slot, minor in ts.since:
        if slot.value not in slots:
            col.error(slot.location, f"since: table '{ts.table}' ({declare(ttype)}) has no field "
                      f"'{slot}'{suggest(slot.value, slots)}")
            ok = False
        else:
            added[slot.value] = minor
    # a field appended after one that came in minor N is in no table older than N either
    since_of: dict[str, int] = {}
    newest = 0
    for field_name in slots:
        newest = max(newest, added.get(field_name, 0))
        since_of[field_name] = newest
    explicit = {fn.value: field for fn, field in ts.entries}
    for fn, _ in ts.entries:
        if fn.value not in by:
            col.error(fn.location, f"entries: '{fn}' is not a bound function of {header.name}{suggest(fn.value, by)}")
            ok = False
        elif fn.value == ts.provider.value:
            col.error(fn.location, f"entries: '{fn}' is the provider: it is exported, not in the table")
            ok = False
    entries: list[str] = []
    for f in functions:
        if f is provider:
            entries.append("")
            continue
        named = explicit.get(f.public)
        field = named.value if named is not None else table_field(f.public, ts.prefix.value if ts.prefix else "")
        where = named.location if named is not None else ts.table.location
        entries.append(field)
        if field not in slots:
            rule = f"entry '{field}' named for it" if named is not None else (
                f"field '{field}' (the default rule)" if field else "default field (its name has no '_')")
            col.error(where, f"table '{ts.table}' ({declare(ttype)}) has no {rule} for {f.public} "
                      f"(declared at {f.c.location}){suggest(field, slots) if field else ''}; name its field in "
                      "resolver.entries, or leave the function out with bind.exclude")
            ok = False
            continue
        got = b.canonical(slots[field])
        fp = f.c
        want_proto = FunctionProto(result=fp.result, params=fp.params, variadic=fp.variadic)
        if not isinstance(got, Pointer) or not isinstance(got.pointee, FunctionProto):
            col.error(where, f"table field '{field}' for {f.public} is a '{declare(slots[field])}', not a "
                      "function pointer")
            ok = False
        elif replace(got.pointee, const=False) != b.canonical(want_proto):
            col.error(where, f"table field '{field}' does not match {f.public}: the field is "
                      f"'{declare(slots[field])}' ({declare(got)}), the function is {f.prototype}")
            ok = False
    if not ok:
        return Resolver()
    assert isinstance(p1, Pointer)
    table = FunctionTable(interface=ts.interface.value, table=ts.table.value, version=ts.version.value,
                          major=ts.major, minor=ts.minor, match=tuple((m.value, v) for m, v in ts.match),
                          entries=tuple(entries), since=tuple(since_of.get(e, 0) for e in entries),
                          list_decl=declare(params[0].type), count_pointee=declare(replace(p1.pointee, const=False)))
    return Resolver(kind="table", index=provider.index, symbol=provider.symbol, table=table)


def _fits(b: Binder, t: CType, want: str) -> bool:
    """Whether C type ``t`` is what a resolver kind's Shape names (resolver_kinds.PARAMS, RESULTS but status)."""
    r = resolve(t, b.typedefs)
    match want:
        case "any":
            return True
        case "pointer":
            return isinstance(r, Pointer)
        case "string":
            return isinstance(r, Pointer) and is_char(resolve(r.pointee, b.typedefs))
        case "function pointer":
            return isinstance(r, Pointer) and isinstance(resolve(r.pointee, b.typedefs), FunctionProto)
    return False


def _bound(by: Mapping[str, BoundFunction], name: Name, what: str, header: Header,
           col: Collector) -> BoundFunction | None:
    """The bound function a spec key names (``what``: how the error calls the key, ex. "kernel_launch function"),
    or None with a located error that suggests the nearest name."""
    f = by.get(name.value)
    if f is None:
        col.error(name.location, f"{what} '{name}' is not a bound function of {header.name}{suggest(name.value, by)}")
    return f


def _bind_function(key: object, name: Name, by: Mapping[str, BoundFunction], header: Header, b: Binder,
                   col: Collector, first: bool) -> ResolverValue | None:
    """A resolver key's function ``name``, checked against its Shape (``key``: a resolver_kinds.Key)."""
    what = getattr(key, "what", "") or getattr(key, "name")
    shape = getattr(key, "shape")
    f = _bound(by, name, what, header, col)
    if f is None:
        return None
    params, optional = tuple(shape.params), tuple(shape.optional)
    n = len(f.c.params)
    fits = (len(params) <= n <= len(params) + len(optional)
            and (f.returns_status if shape.result == "status" else _fits(b, f.c.result, shape.result))
            and all(_fits(b, p.type, want) for p, want in zip(f.c.params, params + optional)))
    if not fits:
        col.error(name.location, f"'{name}' does not look like a {shape.noun} ({shape.what})")
        return None
    for i in shape.null if first else ():
        if i < len(f.params) and f.params[i].refuse_null:
            col.error(name.location, f"{what} '{name}' is asked with a NULL {shape.null_what}, which "
                      f"errors.null_handle refuses: declare its parameter '{f.params[i].name}' nullable (functions: "
                      f"{name}: params:)")
            return None
    return ResolverValue(key=getattr(key, "name"), functions=(f.index,), optional=n - len(params))


def bind_declared(spec: LibrarySpec, header: Header, functions: tuple[BoundFunction, ...], b: Binder,
                  col: Collector) -> Resolver:
    """A kind the runtime declares (generator/resolvers.py): each key's value checked against the header as the
    kind's declaration says (a function of its Shape, a list of them, a constant of the header)."""
    rs = spec.resolver
    assert rs is not None
    kind = resolvers.declared()[rs.kind.value]
    by = {f.public: f for f in functions}
    constants: dict[str, int | float] | None = None
    bound: dict[str, ResolverValue] = {}
    ok = True
    for key in kind.keys:
        given = rs.get(key.name)
        if given is None:
            continue
        if key.type == "constant":
            assert isinstance(given, Name)
            if constants is None:
                constants = {c.name: c.value for e in header.enums for c in e.constants}
                constants.update({c.name: c.value for t in header.typedefs if isinstance(t.type, InlineEnum)
                                  for c in t.type.enum.constants})
                constants.update({c.name: c.value for c in header.constants if isinstance(c.value, int)})
            if given.value not in constants:
                col.error(given.location, f"'{given}' is not a constant of {header.name}"
                          f"{suggest(given.value, constants)}")
                ok = False
            else:
                bound[key.name] = ResolverValue(key=key.name, value=int(constants[given.value]))
            continue
        names = given if isinstance(given, tuple) else (given,)
        found = [_bind_function(key, name, by, header, b, col, first=key is kind.keys[0]) for name in names]
        if any(v is None for v in found):
            ok = False
            continue
        bound[key.name] = ResolverValue(key=key.name, functions=tuple(v.functions[0] for v in found if v),
                                        optional=found[0].optional if len(found) == 1 and found[0] else 0)
    if not ok:
        return Resolver()
    for key in kind.keys:  # an optional constant left out takes its default key's value
        if key.name not in bound and key.default and key.default in bound:
            bound[key.name] = replace(bound[key.default], key=key.name)
    own = bound.get(kind.keys[0].name) if kind.keys else None
    first = functions[own.functions[0]] if own is not None else None
    return Resolver(kind=kind.name, index=first.index if first else -1, symbol=first.symbol if first else "",
                    values=tuple(bound[k.name] for k in kind.keys if k.name in bound))


def bind_resolver(spec: LibrarySpec, header: Header, functions: tuple[BoundFunction, ...], b: Binder,
                  col: Collector) -> Resolver:
    """Check ``resolver:`` against the header: a declared kind as its declaration says (:func:`bind_declared`);
    for table, see :func:`bind_table`."""
    if spec.table is not None:
        return bind_table(spec, header, functions, b, col)
    if spec.resolver is not None:
        return bind_declared(spec, header, functions, b, col)
    return Resolver()


# the shape kernel_launch must have, parameter by parameter (after typedefs are expanded)
_LAUNCH_SHAPE = ("handle", "int", "int", "int", "int", "int", "int", "int", "handle", "void **", "void **")


def _shape(b: Binder, t: CType) -> str:
    """What a parameter of the compiled paths is, typedefs expanded: 'void **', 'handle' (another pointer),
    'int' (an integer that is not a character or boolean), or 'other'."""
    c = b.canonical(t)
    if isinstance(c, Pointer):
        inner = c.pointee
        if isinstance(inner, Pointer) and isinstance(inner.pointee, Builtin) and inner.pointee.name == "void":
            return "void **"
        return "handle"
    if isinstance(c, Builtin) and c.name in INTEGER_BUILTINS and c.name not in ("char", "_Bool", "wchar_t"):
        return "int"
    return "other"


def _casts(f: BoundFunction) -> tuple[str, ...]:
    """The C type of each parameter of ``f``, as the compiled paths cast their arguments to."""
    return tuple(declare(replace(p.type, const=False)) for p in f.c.params)


def bind_kernel_launch(spec: LibrarySpec, functions: tuple[BoundFunction, ...], b: Binder,
                       col: Collector) -> KernelLaunch | None:
    """Check ``kernel_launch`` against the header: a bound function of the cuLaunchKernel shape."""
    name = spec.kernel_launch
    if name is None:
        return None
    f = _bound({f.public: f for f in functions}, name, "kernel_launch function", b.h, col)
    if f is None:
        return None

    got = tuple(_shape(b, p.type) for p in f.c.params)
    if not f.returns_status or got != _LAUNCH_SHAPE:
        col.error(name.location, f"'{name}' does not look like a kernel launch: expected status (function, "
                  "grid x, y, z, block x, y, z, shared bytes, stream, void **params, void **extra)")
        return None
    return KernelLaunch(index=f.index, public=f.public, result=f.result_decl, casts=_casts(f))


def bind_pool_memory(spec: LibrarySpec, functions: tuple[BoundFunction, ...], b: Binder,
                     col: Collector) -> PoolMemory | None:
    """Check ``pool_memory`` against the header: bound functions of the cuMemAllocFromPoolAsync and
    cuMemFreeAsync shapes, the one allocating the device-pointer type that the other frees."""
    pm = spec.pool_memory
    if pm is None:
        return None
    by = {f.public: f for f in functions}
    found = [f for key, name in (("alloc", pm.alloc), ("free", pm.free))
             if (f := _bound(by, name, f"pool_memory {key} function", b.h, col)) is not None]
    if len(found) != 2:
        return None
    fa, ff = found

    def devptr(t: CType) -> bool:  # an integer or a pointer: what a device address is passed as
        return _shape(b, t) != "other"

    def handle(t: CType) -> bool:
        return _shape(b, t) in ("handle", "void **")

    ap, fp = fa.c.params, ff.c.params
    out = b.canonical(ap[0].type) if ap else None
    if not (fa.returns_status and len(ap) == 4 and isinstance(out, Pointer) and devptr(out.pointee)
            and _shape(b, ap[1].type) == "int" and handle(ap[2].type) and handle(ap[3].type)):
        col.error(pm.alloc.location, f"'{pm.alloc}' does not look like a stream-ordered pool allocation: expected "
                  "status (device pointer *out, size_t bytes, pool, stream)")
        return None
    if not (ff.returns_status and len(fp) == 2 and devptr(fp[0].type) and handle(fp[1].type)):
        col.error(pm.free.location, f"'{pm.free}' does not look like a stream-ordered free: expected "
                  "status (device pointer, stream)")
        return None
    assert isinstance(out, Pointer)
    if declare(replace(out.pointee, const=False)) != declare(replace(b.canonical(fp[0].type), const=False)):
        declared = ap[0].type.pointee if isinstance(ap[0].type, Pointer) else out.pointee
        col.error(pm.free.location, f"'{pm.free}' frees a '{declare(fp[0].type)}', but '{pm.alloc}' allocates a "
                  f"'{declare(declared)}' ({declare(out.pointee)})")
        return None

    return PoolMemory(alloc_index=fa.index, free_index=ff.index, alloc=fa.public, free=ff.public,
                      devptr=declare(replace(b.canonical(out.pointee), const=False)),
                      alloc_result=fa.result_decl, free_result=ff.result_decl, alloc_casts=_casts(fa),
                      free_casts=_casts(ff))


def bind_device_memory(spec: LibrarySpec, functions: tuple[BoundFunction, ...], b: Binder,
                       col: Collector) -> DeviceMemory | None:
    """Check ``device_memory`` against the header: bound functions of the cuMemAlloc and cuMemFree shapes, the
    one allocating the device-pointer type that the other frees."""
    dm = spec.device_memory
    if dm is None:
        return None
    by = {f.public: f for f in functions}
    found = [f for key, name in (("alloc", dm.alloc), ("free", dm.free))
             if (f := _bound(by, name, f"device_memory {key} function", b.h, col)) is not None]
    if len(found) != 2:
        return None
    fa, ff = found
    if dm.returns_handle:
        return _bind_device_creator(dm, fa, ff, b, col)
    ap, fp = fa.c.params, ff.c.params
    out = b.canonical(ap[0].type) if ap else None
    if not (fa.returns_status and len(ap) == 2 and isinstance(out, Pointer) and _shape(b, out.pointee) != "other"
            and _shape(b, ap[1].type) == "int"):
        col.error(dm.alloc.location, f"'{dm.alloc}' does not look like a device-memory allocation: expected "
                  "status (device pointer *out, size_t bytes)")
        return None
    if not (ff.returns_status and len(fp) == 1 and _shape(b, fp[0].type) != "other"):
        col.error(dm.free.location, f"'{dm.free}' does not look like a device-memory free: expected "
                  "status (device pointer)")
        return None
    assert isinstance(out, Pointer)
    if declare(replace(out.pointee, const=False)) != declare(replace(b.canonical(fp[0].type), const=False)):
        declared = ap[0].type.pointee if isinstance(ap[0].type, Pointer) else out.pointee
        col.error(dm.free.location, f"'{dm.free}' frees a '{declare(fp[0].type)}', but '{dm.alloc}' allocates a "
                  f"'{declare(declared)}' ({declare(out.pointee)})")
        return None
    casts = _casts(fa)
    return DeviceMemory(alloc_index=fa.index, free_index=ff.index, alloc=fa.public, free=ff.public,
                        devptr=declare(replace(b.canonical(out.pointee), const=False)),
                        alloc_result=fa.result_decl, free_result=ff.result_decl, alloc_casts=casts,
                        free_casts=_casts(ff), alloc_params=(("out", casts[0], -1), ("size", casts[1], -1)))


_HOST_COPY_SHAPE = ("handle", "handle", "int", "int", "int", "handle", "int", "handle", "handle")


def bind_host_copy(spec: LibrarySpec, functions: tuple[BoundFunction, ...], b: Binder,
                   device_memory: DeviceMemory | None, col: Collector) -> HostCopy | None:
    """Check ``host_copy`` against the header: bound functions of the clEnqueueWriteBuffer shape whose buffer is the
    ``device_memory``'s handle, the read's host pointer writable."""
    hc = spec.host_copy
    if hc is None:
        return None
    if spec.device_memory is None:
        col.error(hc.write.location, "host_copy copies to and from the library's device_memory allocations: add "
                  "device_memory (section 'library > device_memory')")
        return None
    by = {f.public: f for f in functions}
    found: list[BoundFunction] = []
    for key, name in (("write", hc.write), ("read", hc.read)):
        f = _bound(by, name, f"host_copy {key} function", b.h, col)
        if f is None:
            continue
        got = tuple(_shape(b, p.type) for p in f.c.params)
        if not f.returns_status or got != _HOST_COPY_SHAPE:
            col.error(name.location, f"'{name}' does not look like a host copy: expected status (queue, buffer, "
                      "blocking, offset, size, host pointer, wait count, wait list, event *)")
            continue
        host = b.canonical(f.c.params[5].type)
        if key == "read" and isinstance(host, Pointer) and host.pointee.const:
            col.error(name.location, f"'{name}' takes a const host pointer: a read writes the host buffer")
            continue
        if device_memory is not None:
            buf = declare(replace(b.canonical(f.c.params[1].type), const=False))
            if buf != device_memory.devptr:
                col.error(name.location, f"'{name}' copies a '{declare(f.c.params[1].type)}' ({buf}), but the "
                          f"device_memory allocates a '{device_memory.devptr}'")
                continue
        found.append(f)
    if len(found) != 2 or device_memory is None:
        return None
    fw, fr = found
    return HostCopy(write_index=fw.index, read_index=fr.index, write=fw.public, read=fr.public,
                    result=fw.result_decl, write_casts=_casts(fw), read_casts=_casts(fr))


def _bind_device_creator(dm: DeviceMemorySpec, fa: BoundFunction, ff: BoundFunction, b: Binder,
                         col: Collector) -> DeviceMemory | None:
    """``device_memory: {create: F, size: P, free: G}``: ``F`` returns a handle (a pointer or an integer) and reports
    its status through the errors' out-parameter; ``P`` is its byte count (an integer); its other parameters are
    integers or pointers the device gives; ``G`` is status (that handle)."""
    assert dm.size is not None
    params, fp = fa.c.params, ff.c.params
    errcodes = {p.c_name for p in fa.params if p.role is Role.ERRCODE}
    names = [p.name or f"arg{i}" for i, p in enumerate(params)]
    shapes = [_shape(b, p.type) for p in params]
    if dm.size.value not in names:
        col.error(dm.size.location, f"'{dm.size}' is not a parameter of '{dm.alloc}' "
                  f"({', '.join(names) or 'none'}){suggest(dm.size.value, names)}")
        return None
    handle = b.canonical(fa.c.result)
    if not (len(errcodes) == 1 and _shape(b, handle) in ("handle", "int")
            and shapes[names.index(dm.size.value)] == "int"
            and all(s != "other" for n, s in zip(names, shapes) if n not in errcodes)):
        col.error(dm.alloc.location, f"'{dm.alloc}' does not look like a device-memory creator: expected handle "
                  f"(..., size_t {dm.size}, ..., status *errcode) returning a pointer or an integer, its status "
                  "through the errors' out_param, every other parameter an integer or a pointer")
        return None
    if not (ff.returns_status and len(fp) == 1 and _shape(b, fp[0].type) != "other"):
        col.error(dm.free.location, f"'{dm.free}' does not look like a device-memory free: expected "
                  "status (device pointer)")
        return None
    devptr = declare(replace(handle, const=False))
    if devptr != declare(replace(b.canonical(fp[0].type), const=False)):
        col.error(dm.free.location, f"'{dm.free}' frees a '{declare(fp[0].type)}', but '{dm.alloc}' returns a "
                  f"'{declare(fa.c.result)}' ({devptr})")
        return None
    casts = _casts(fa)
    alloc_params: list[tuple[str, str, int]] = []
    pointers: list[bool] = []
    for n, cast, shape in zip(names, casts, shapes):
        if n == dm.size.value:
            alloc_params.append(("size", cast, -1))
        elif n in errcodes:
            alloc_params.append(("status", cast, -1))
        else:
            alloc_params.append(("bound", cast, len(pointers)))
            pointers.append(shape != "int")
    status = params[names.index(next(iter(errcodes)))].type  # (as declared: ex) cl_int *; Role.ERRCODE's pointer)
    assert isinstance(status, Pointer)
    return DeviceMemory(alloc_index=fa.index, free_index=ff.index, alloc=fa.public, free=ff.public, devptr=devptr,
                        alloc_result=declare(replace(status.pointee, const=False)), free_result=ff.result_decl,
                        alloc_casts=casts, free_casts=_casts(ff), returns_handle=True,
                        alloc_params=tuple(alloc_params), bound_pointers=tuple(pointers))


_KIND_NAMES = {"str": "a str", "bytes": "bytes", "float": "a float", "cdata": "a C pointer", "struct": "a struct",
               "void": "nothing"}


def _returns(f: BoundFunction) -> list[ValueKind]:
    """The kinds of the values ``f``'s checked wrapper returns, in order (int | float | str | bytes | cdata | struct)."""
    out = [p.result_kind or ValueKind.CDATA for p in f.params if p.role in OUT_ROLES]
    if f.returns_status:
        return ([ValueKind.INT] if f.status_codes else []) + out
    return ([f.result_kind] if f.result_kind is not ValueKind.VOID else []) + out


def check_size_functions(functions: tuple[BoundFunction, ...], col: Collector) -> None:
    """A ``string: {size_function: F}`` output is sized by calling ``F`` with the caller's own arguments of the
    same names: ``F`` must be another bound function whose wrapper returns one integer."""
    by = {f.public: f for f in functions}
    for f in functions:
        for p in f.params:
            sf = p.string.size_function if p.role is Role.OUT_BUFFER and p.string is not None else None
            if sf is None:
                continue
            sizer = by.get(sf.value)
            why = None
            if sizer is None:
                col.error(sf.location, f"size_function '{sf}' is not a bound function (bind.include/exclude or skip "
                          "leave it out)")
                continue
            returns = _returns(sizer)
            have = {q.name for q in f.params if q.role in PY_IN_ROLES}
            missing = [q.name for q in sizer.params if q.role in PY_IN_ROLES and q.name not in have]
            if sizer is f:
                why = "it is that function itself"
            elif returns != [ValueKind.INT]:
                why = "it must return one integer (it returns " + (
                    f"{len(returns)} values" if len(returns) > 1 else _KIND_NAMES.get(returns[0] if returns else "void",
                                                                                      "something else")) + ")"
            elif missing:
                why = f"it takes '{missing[0]}', which {f.public} has no input parameter of that name to pass"
            if why is not None:
                col.error(sf.location, f"size_function '{sf}' cannot size the output of {f.public}: {why}")


def check_declared_types(b: Binder, functions: tuple[BoundFunction, ...], col: Collector) -> None:
    """Every typedef a bound function or an emitted typedef uses must be emitted too (or be one cffi knows, as
    size_t): a type from a header outside the headers' directories is not (nvtx3/nvToolsExtCuda.h's CUdevice, from
    cuda.h), and its cdef would fail in cffi ("cannot parse") at build and import instead of here."""
    import cffi.commontypes
    import cffi.model

    known = ({t.name for t in b.h.typedefs if b.in_bound_files(t.location)} | set(cffi.commontypes.COMMON_TYPES)
             | set(cffi.model.PrimitiveType.ALL_PRIMITIVE_TYPES) | set(BUILTIN_NAMES))
    dirs = sorted({h.value.rpartition("/")[0] + "/" for h in b.spec.headers if "/" in h.value})
    where = (f"the headers' director{'ies' if len(dirs) > 1 else 'y'} {', '.join(dirs)}" if dirs else "them")

    def report(user: str, types: Iterable[CType], at: Location, fix: str) -> None:
        missing = sorted({ref.name for t in types for ref, _ in references(t)
                          if isinstance(ref, (TypedefRef, Builtin)) and ref.name not in known})
        if missing:
            col.error(at, f"{user} uses {', '.join(repr(m) for m in missing)}, which no header of {where} declares "
                          f"(a header outside {'them' if dirs else 'the headers'} does): add that header to "
                          f"`headers:`{fix}")

    for f in functions:
        report(f"function '{f.public}'", (f.c.result, *(p.type for p in f.c.params)), f.c.location,
               ", or leave the function out (bind.exclude)")
    for td in b.h.typedefs:
        if b.in_bound_files(td.location):
            report(f"typedef '{td.name}'", (td.type,), td.location, "")
    for r in b.h.records:
        if b.in_bound_files(r.location) and r.fields:
            report(f"{r.kind} '{r.tag}'", tuple(fl.type for fl in r.fields), r.location, "")


def sdk_major(version: str | None) -> int | None:
    """The major of an SDK version (``5.2`` -> 5, ``13.0`` -> 13); None when it is not a number."""
    m = re.match(r"(\d+)(\.|\Z)", version or "")
    return int(m.group(1)) if m else None


def bind_loader(spec: LibrarySpec, functions: tuple[BoundFunction, ...], b: Binder, version: str,
                col: Collector) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], AbiMajor | None]:
    """The loader's names with ``{major}`` filled from the SDK ``version``, and ``abi_major`` checked against the
    header: both need a known major, and the function the shape status (integer *version)."""
    lo = spec.loader
    major = sdk_major(version)
    if major is None and (lo.major_at is not None or lo.abi_major is not None):
        where = lo.major_at or lo.abi_major.location  # type: ignore[union-attr]
        what = MAJOR_PLACEHOLDER if lo.major_at is not None else "abi_major"
        col.error(where, f"{what} needs the major version of the SDK the bindings are generated from, and it is "
                  f"{version!r} here: give the spec's sdk: a version: (or version_macro:)")
    names = tuple((plat, tuple(n.replace(MAJOR_PLACEHOLDER, str(major)) for n in files)) for plat, files in lo.names)
    am = lo.abi_major
    if am is None or major is None:
        return names, None
    f = _bound({f.public: f for f in functions}, am.function, "abi_major function", b.h, col)
    if f is None:
        return names, None
    params = f.c.params
    out = b.canonical(params[0].type) if len(params) == 1 else None
    if not (f.returns_status and isinstance(out, Pointer) and _shape(b, out.pointee) == "int"
            and not getattr(out.pointee, "const", False)):
        col.error(am.function.location, f"'{am.function}' cannot give the library's version: expected the shape "
                  "status (integer *version)")
        return names, None
    return names, AbiMajor(public=f.public, encoding=am.encoding, major=major)


def bind(spec: LibrarySpec, core: CoreSpec, header: Header, sdk_version: str | None = None,
         errors: Collector | None = None) -> BoundLibrary:
    """Bind one library; raise :class:`UserError` listing every problem."""
    col = errors or Collector()
    b = Binder(spec, core, header, col)
    error_codes = b.bind_errors()
    functions = b.bind_functions()
    decls, enums, structs = b.declarations()
    # every module-level Python name: (name, what, where)
    module_names: list[tuple[str, str, Location]] = [(f.public, "function", f.c.location) for f in functions]
    for e in enums:
        where = b.enum_locations.get(e.name, spec.location)
        if b.check_py_name(e.name, where, "enum"):
            module_names.append((e.name, "enum", where))
        for c in e.constants:
            if b.check_py_name(c.name, c.location, "enum constant", enum_member=True):
                module_names.append((c.name, "enum constant", c.location))
    # macros in C's reserved namespace (_X, __x) are the implementation's, not the API: not exported
    constants = tuple(c for c in header.constants if b.in_bound_files(c.location)
                      and PY_IDENT.match(c.name) and not c.name.startswith("_")
                      and b.check_py_name(c.name, c.location, "macro constant"))
    module_names += [(c.name, "macro constant", c.location) for c in constants]
    first: dict[str, tuple[str, Location]] = {}
    for name, what, where in module_names:
        if name in first:
            col.error(where, f"{what} '{name}' cannot be bound as a Python name: the {first[name][0]} "
                      f"declared at {first[name][1]} is bound under the same name")
        else:
            first[name] = (what, where)
    names = spec.errors.name_function.value if spec.errors.name_function else None
    if names is not None and names not in {f.public for f in functions}:
        col.error(spec.errors.name_function.location,  # type: ignore[union-attr]
                  f"name_function '{names}' is not a bound function of {header.name}"
                  f"{suggest(names, [f.public for f in functions])}")
    check_size_functions(functions, col)
    check_declared_types(b, functions, col)
    resolver = bind_resolver(spec, header, functions, b, col)
    launch = bind_kernel_launch(spec, functions, b, col)
    pool_memory = bind_pool_memory(spec, functions, b, col)
    device_memory = bind_device_memory(spec, functions, b, col)
    host_copy = bind_host_copy(spec, functions, b, device_memory, col)
    version = sdk_version or b.version or "unknown"
    library_names, abi_major = bind_loader(spec, functions, b, version, col)
    col.check()
    success = tuple(b.error_constants[c.value].value for c in spec.errors.success if c.value in b.error_constants)
    return BoundLibrary(
        spec=spec, core=core, header=header, sdk_version=version,
        module=f"ironaccelerator.backends.{spec.vendor}.{spec.library}",
        functions=functions, enums=enums, constants=constants, errors=error_codes, success=success,
        error_type=spec.errors.type.value, error_name_function=names, declarations=decls, structs=structs,
        error_mask=spec.errors.mask, null_handle=spec.errors.null_handle.value if spec.errors.null_handle else None,
        per_thread=any(f.per_thread_symbol for f in functions), resolver=resolver, kernel_launch=launch,
        pool_memory=pool_memory, device_memory=device_memory, host_copy=host_copy, library_names=library_names,
        abi_major=abi_major,
    )
