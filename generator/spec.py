"""Loading and validating the YAML specs, keeping every value's ``file:line:col``.

The loader checks the *shape* of a spec (keys, types, allowed values,
identifier syntax); :mod:`ironaccelerator_gen.bind` then checks every name
against the parsed header.  All problems found are reported together.
"""

from __future__ import annotations

import keyword
import os
import re
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, NoReturn

import yaml

from . import resolvers, schema
from .diagnostics import Collector, Diagnostic, UserError, suggest
from .ir import Location
from .prototypes import PrototypeSource, read_prototypes

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
PATTERN = re.compile(r"[A-Za-z0-9_*?\[\]]+\Z")
LIBNAME = re.compile(r"[A-Za-z0-9_.+\-/*]+\Z")
DIRECTIONS = ("in", "out", "inout")
CORE_KINDS = ("INVALID_VALUE", "LIBRARY_NOT_FOUND", "SYMBOL_NOT_FOUND", "UNKNOWN")  # used by the templates
PLATFORMS = schema.PLATFORMS


@dataclass(frozen=True, slots=True, kw_only=True)
class Name:
    """A string from a spec with where it was written.  ex) ``cuMemAlloc`` at driver.yaml:42:3"""

    value: str
    location: Location

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True, kw_only=True)
class StringSpec:
    """An output string: a caller-sized buffer (``capacity`` + ``length_param``) or a size query."""

    capacity: int | None = None  # ex) 256 for cuDeviceGetName's name
    length_param: Name | None = None  # ex) len: the parameter that carries the capacity
    size_function: Name | None = None  # ex) nvrtcGetPTXSize: called first with the same handle
    binary: bool = False  # bytes (cubin) rather than text (PTX, logs)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParamSpec:
    """What the header cannot say about one parameter."""

    name: Name
    direction: str | None = None  # in | out | inout; None: inferred from the type
    len: Name | None = None  # the parameter holding this array's element count
    terminated: bool = False  # len: null-terminated: the array ends with a zero element (no count parameter)
    nullable: bool = False
    string: StringSpec | None = None
    device: bool = False  # a device address: the wrapper takes an Allocation, a slice or view of one, or an int
    # members of an out struct the wrapper sets before the call: its type tag  ex) ((stype, ZE_STRUCTURE_TYPE_...),)
    fill: tuple[tuple[Name, Name], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleSpec:
    """One line of ``rules:``: a library's convention over many parameters.  ex) ``{functions: ["cublas*"],
    types: ["float *", "const float *"], names: [A, B, C], device: true}``; applied by generator/rules.py."""

    location: Location  # the rule's mapping
    functions: tuple[Name, ...]  # globs of bound functions' public names
    types: tuple[Name, ...] = ()  # C type spellings (spaces aside); none: any type
    names: tuple[Name, ...] = ()  # globs of parameter names; none: any name
    direction: Name | None = None  # what it says of each parameter it matches: at least one of these three
    device: Name | None = None  # (the key, where it was written, when true)
    nullable: Name | None = None
    len: Name | None = None  # the parameter holding each matched array's length (every matched function has it)


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionSpec:
    """Per-function binding overrides.  ex) ``cuStreamQuery: {status: [CUDA_ERROR_NOT_READY]}``"""

    name: Name
    symbol: Name | None = None  # the ABI symbol, overriding the header's #define rename
    status: tuple[Name, ...] = ()  # codes returned as results, not raised
    params: tuple[ParamSpec, ...] = ()
    error_log: Name | None = None  # a function(handle) -> str whose output is appended to errors
    since: str | None = None  # the SDK version that introduced the function
    skip: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorSpec:
    """The vendor's status type and how its codes map onto ``ErrorKind``."""

    type: Name  # ex) CUresult
    success: tuple[Name, ...]
    kinds: tuple[tuple[Name, Name], ...]  # (code, kind)
    defaulted: tuple[Name, ...]  # codes that deliberately take ``default``
    default: Name
    since: tuple[tuple[Name, str], ...] = ()  # codes newer than some supported SDKs
    name_function: Name | None = None  # ex) cuGetErrorName (out-param) or nvrtcGetErrorString (returns)
    macros: tuple[Name, ...] = ()  # ex) [CL_*, !CL_BUILD_NONE]: the codes are negative #define constants, not an enum
    out_param: Name | None = None  # ex) errcode_ret: functions returning a value report status through it
    codes: Name | None = None  # ex) Qnn_ErrorCode_t: the enum of codes when ``type`` is a wider integer handle
    mask: int = 0  # ex) 0xffff: the bits of a status that are its code (0: all of them)
    null_handle: Name | None = None  # ex) INVALID_HANDLE: raised for a NULL opaque handle not declared nullable
    reported: bool = True  # False: ``errors: none`` (ex: NVTX): the functions report no status, none is checked


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolverSpec:
    """``resolver: {kind: <a declared kind>, ...}`` (generator/resolvers.py: the runtime's declarations): the values
    its keys were given, as the spec names them; bind.bind_resolver checks them against the header as the kind's
    declaration says.  ex) ``{kind: lookup, function: vkGetInstanceProcAddr, scoped: [vkGetDeviceProcAddr]}``."""

    kind: Name
    location: Location  # the resolver mapping's
    values: tuple[tuple[str, Name | tuple[Name, ...]], ...] = ()  # key -> a name, or a list of names

    def get(self, key: str) -> Name | tuple[Name, ...] | None:
        return next((v for k, v in self.values if k == key), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class TableSpec:
    """``resolver: {kind: table, ...}``: the library exports only a provider function
    ``status provider(const Interface ***list, uint32_t *n)``; each provider struct carries an API version and a
    struct of function pointers (the table).  One provider is selected (version major equal, minor at least the
    required one, the ``match`` members equal) and every other bound function is called through its table entry,
    never dlsym'ed.  Tables grow by appending fields: an entry added in a later minor (``since``) is missing from
    an older provider's table, which may end before it."""

    provider: Name  # ex) QnnInterface_getProviders (a bound function: the one symbol dlsym'ed)
    interface: Name  # ex) QnnInterface_t (the provider struct type)
    table: Name  # ex) v2_27 (member path of the table struct in the provider; anonymous unions looked through)
    version: Name  # ex) apiVersion.coreApiVersion (member path of a {major, minor, ...} struct)
    major: int
    minor: int
    match: tuple[tuple[Name, int], ...] = ()  # ex) (backendId, 6): integer members the provider must have
    prefix: Name | None = None  # ex) Qnn: removed before the default rule (QnnBackend_create -> backendCreate)
    entries: tuple[tuple[Name, Name], ...] = ()  # explicit (function, field) pairs, before the default rule
    since: tuple[tuple[Name, int], ...] = ()  # ex) (contextFinalize, 16): table field -> the minor that added it


@dataclass(frozen=True, slots=True, kw_only=True)
class MethodSpec:
    """One Objective-C method of a ``classes:`` entry: its selector and prototype in C terms.
    ex) ``"+stringWithUTF8String:": {returns: id, args: [const char *]}``"""

    selector: Name  # ex) rangeOfString: (without the leading '+' or '-')
    class_method: bool  # '+': sent to the class object; '-' or none: to an instance
    returns: Name  # ex) NSRange (a C type; typedef names from the declarations); void when omitted
    args: tuple[Name, ...] = ()  # ex) (const void *, NSUInteger); NSError ** is the error out-parameter
    ownership: str | None = None  # +1 | +0: overrides the naming rule (alloc/new/copy/mutableCopy/init: +1)
    py_name: str  # ex) rangeOfString_ (':' -> '_'; a Python keyword gets a trailing '_')
    # False: listed by selector only (``methods: [length, ...]``); returns/args are placeholders until the
    # resolver's ``prototypes:`` source fills them in (generator/prototypes.py, fill_spec)
    declared: bool = True
    nullable: tuple[Name, ...] = ()  # ex) (options,): the selector keywords whose object argument may be nil


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassSpec:
    """One Objective-C class of ``classes:``.  ex) ``NSString: {base: NSObject, methods: {...}}``"""

    name: Name  # ex) NSString (looked up with objc_getClass at run time)
    base: Name | None = None  # ex) NSObject: its methods are inherited by the Python class
    methods: tuple[MethodSpec, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjcFunctionSpec:
    """A plain C function of an objc spec's ``functions:`` section, declared in its ``declarations:`` and found
    with dlsym(RTLD_DEFAULT) once the runtime and frameworks are open.
    ex) ``MTLCreateSystemDefaultDevice: {ownership: "+1"}``"""

    name: Name  # ex) MTLCreateSystemDefaultDevice (a function the declarations declare)
    ownership: Name | None = None  # +1 | +0 for an id result; None: the Create/Copy rule (cf_ownership)


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjcSpec:
    """``resolver: {kind: objc, ...}`` with ``classes:``: methods are sent as Objective-C messages through the
    runtime (GNU ``objc_msg_lookup`` or Apple ``objc_msgSend``); the runtime and the frameworks holding the classes
    are dlopen'ed RTLD_GLOBAL, in order, before the first message."""

    runtime: tuple[tuple[str, tuple[str, ...]], ...]  # (platform, runtime library candidates)
    frameworks: tuple[tuple[str, tuple[str, ...]], ...]  # (platform, framework libraries, each opened)
    classes: tuple[ClassSpec, ...]
    error_kinds: tuple[tuple[str, int | None, Name], ...] = ()  # (NSError domain, code or None: any, ErrorKind)
    error_default: str = "UNKNOWN"  # the kind of an NSError no entry names
    prototypes: PrototypeSource | None = None  # where the selector-only methods' prototypes come from
    functions: tuple[ObjcFunctionSpec, ...] = ()  # plain C entry points of the frameworks (functions:)


# Objective-C selectors: a unary one (length) or keywords each ending in ':' (initWithBytes:length:encoding:)
SELECTOR = re.compile(r"[+-]?([A-Za-z_][A-Za-z0-9_]*|([A-Za-z_][A-Za-z0-9_]*)?:(([A-Za-z_][A-Za-z0-9_]*)?:)*)\Z")
OWNERSHIPS = ("+1", "+0")
# names the run-time Object class gives every handle: a selector may not be bound under them
OBJC_RESERVED = ("close", "handle", "retained")


# How a library's functions are found once it is open (``resolver: {kind: ...}``); dlsym when none is named.
# One mechanism, in C (runtime/ironaccelerator_runtime/include/ia_runtime.h, IA_RESOLVER) and in Python (ABI mode:
# ironaccelerator_runtime.resolvers).  The kinds are declared, with their keys, in the runtime
# (runtime/ironaccelerator_runtime/resolver_kinds.py, read through generator/resolvers.py: ResolverSpec), except
# two the generator still implements (resolver_kinds.EXCEPTIONS):
#   table         provider: <the one exported function, status (const Interface ***list, uint32_t *count)>,
#                 interface: <the provider struct typedef>, version: <member path of its {major, minor} struct>,
#                 require: {major: N, minor: M} (major == N, minor >= M), match: {<member path>: <integer>}
#                 (optional), table: <member path of the function table>, prefix: <removed before the default
#                 rule Component_name -> componentName> (optional), entries: {<function>: <table field>}
#                 (optional), since: {<table field>: <the minor that appended it>} (optional)
#   objc          runtime: {<platform>: [runtime library, ...]}, frameworks: {<platform>: [library, ...]},
#                 errors: {<ErrorKind>: [<NSError domain>[:<code>], ...]} (optional); the methods are the spec's
#                 classes: section, its plain C functions the functions: section (see ObjcSpec)


def _resolver_keys() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """kind -> (the keys it takes besides 'kind', those it requires), for every kind a spec may name."""
    out = {name: (tuple(k.name for k in kind.keys), tuple(k.name for k in kind.keys if k.required))
           for name, kind in resolvers.declared().items()}
    for name in resolvers.exceptions():
        out[name] = (schema.keys(f"library > resolver ({name})"), schema.required(f"library > resolver ({name})"))
    return out


MEMBER_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolMemorySpec:
    """The stream-ordered allocator that the backend's memory pool calls in C (``_fast._pool_alloc`` and
    ``_fast._PoolMemory`` in trampolines.c).

    ex) ``alloc: cuMemAllocFromPoolAsync`` (status (devptr *out, size_t bytes, pool, stream)) and
    ``free: cuMemFreeAsync`` (status (devptr, stream)).
    """

    alloc: Name
    free: Name


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceMemorySpec:
    """The device-memory allocator that the backend's ``Device.alloc`` calls in C (``_fast._DeviceMemory`` in
    trampolines.c).

    ex) ``alloc: cuMemAlloc`` (status (devptr *out, size_t bytes)) and ``free: cuMemFree`` (status (devptr)); or
    ``create: clCreateBuffer`` with ``size: size`` (handle (..., size_t size, ..., status *errcode_ret): returns the
    handle, its status through ``errors: out_param``) and ``free: clReleaseMemObject`` (status (handle)).
    """

    alloc: Name  # the allocator: ``alloc:``'s or ``create:``'s function
    free: Name
    returns_handle: bool = False  # given as ``create:``: it returns the handle
    size: Name | None = None  # ``create:``'s byte-count parameter  ex) size


@dataclass(frozen=True, slots=True, kw_only=True)
class HostCopySpec:
    """The host copies that the backend's ``Stream.copy_from_host`` and ``copy_to_host`` call in C, between a
    ``device_memory`` allocation and any host buffer (``_fast._host_copier`` in trampolines.c).

    ex) ``write: clEnqueueWriteBuffer`` and ``read: clEnqueueReadBuffer``: status (queue, buffer, blocking, offset,
    size, host pointer, wait count, wait list, event), called blocking, at offset 0, waiting for nothing.
    """

    write: Name  # host -> device
    read: Name  # device -> host


@dataclass(frozen=True, slots=True, kw_only=True)
class AbiMajorSpec:
    """How an opened library's own version is asked, so that a file of another major version than the headers
    the bindings come from is refused (ROCm changes enum values and struct layouts at each major).

    ex) ``abi_major: {function: hipRuntimeGetVersion, encoding: [10000000, 100000]}``
    """

    function: Name  # a bound function, status (integer *version)
    encoding: tuple[int, int]  # major = v // e[0], minor = v % e[0] // e[1]
    location: Location


@dataclass(frozen=True, slots=True, kw_only=True)
class LoaderSpec:
    """Where the vendor library is found at run time."""

    names: tuple[tuple[str, tuple[str, ...]], ...]  # (platform, library file names in order; {major} unfilled)
    wheel_dirs: tuple[str, ...] = ()  # ex) nvidia/cu13/lib, relative to site-packages
    sdk_dirs: tuple[str, ...] = ()  # ex) lib64, relative to each discovered SDK root
    sdk_env: tuple[str, ...] = ()  # ex) CUDA_HOME, CUDA_PATH: environment variables naming SDK roots
    sdk_roots: tuple[str, ...] = ()  # ex) /usr/local/cuda: standard install prefixes (globs allowed)
    major_at: Location | None = None  # the first name with {major} (filled by the binder from the SDK version)
    abi_major: AbiMajorSpec | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SdkWheel:
    """A pip wheel that carries the SDK's headers.  ex) nvidia/cu13/include of nvidia-cuda-nvrtc"""

    include: str  # relative to site-packages
    dist: str  # the distribution's name  ex) nvidia-cuda-nvrtc


@dataclass(frozen=True, slots=True, kw_only=True)
class SdkVersion:
    """How an SDK's version is read (one of macro / macros / newest; all optional).

    ``macro`` + ``encoding``: an integer macro, ``major = v // e[0]``, ``minor = v % e[0] // e[1]``
    (CUDA_VERSION 13000 with [1000, 10] -> 13.0); ``macros``: integer macros joined with dots
    (HIP_VERSION_MAJOR, _MINOR, _PATCH); ``newest``: the highest X.Y among defined macros matching a pattern
    with two ``*`` (CL_VERSION_*_*).  ``root_pattern``: a regular expression whose group 1 is the version in an
    SDK root's path (cuda-(\\d+\\.\\d+)) when the header has none; ``wheel: dist``: an SDK found in a pip wheel
    takes the distribution's version instead of the header's."""

    header: str | None = None  # default: the marker header
    macro: str | None = None
    encoding: tuple[int, ...] = ()
    macros: tuple[str, ...] = ()
    newest: str | None = None
    root_pattern: str | None = None
    wheel_dist: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SdkSpec:
    """How ``generate`` finds an SDK's headers: ``specs/<vendor>/<library>.yaml``'s ``sdk:`` block.  Searched in
    this order: the roots named by ``env`` variables, ``roots`` (globs, newest first), the root of each ``tools``
    program on PATH (its bin/'s parent), ``include_dirs`` as they are, then ``wheels`` of the interpreter.  An
    include directory (``<root>/include`` for a root) holds the SDK when it has ``marker``."""

    kind: Name  # ex) cuda: what --sdk KIND=PATH and `ironaccel-gen sdks` call it
    marker: str  # ex) cuda.h
    env: tuple[str, ...] = ()
    roots: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    wheels: tuple[SdkWheel, ...] = ()
    version: SdkVersion = SdkVersion()
    path: str = ""  # the spec that declares it
    # where to get it: (manager, package) pairs, manager apt (scripts/install-system-sdks.sh) or pip (the Makefile's
    # GEN_SDKS/TEST_SDKS); named when it is not found and `generate --require-sdks` (or CI=true) fails
    install: tuple[tuple[str, str], ...] = ()
    # further include directories its headers need, after its own (cuBLAS's: the CUDA runtime's): ``sdk:KIND``
    # (where that SDK is found), a directory relative to this SDK's include directory, or an absolute one
    extra_includes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Declarations:
    """C declarations written in the spec itself (``frontend: declared``: an API without a usable header, or
    whose header may not be redistributed), parsed by the C front-ends as a virtual header.  ``line``/``indent``
    place the text's first line in the spec, so a diagnostic in it is located in the spec."""

    text: str
    line: int  # the spec line of the text's first line (1-based)
    indent: int  # the columns its lines are indented by in the spec


@dataclass(frozen=True, slots=True, kw_only=True)
class LibrarySpec:
    """One vendor library: ``specs/<vendor>/<library>.yaml``."""

    path: str  # ex) specs/cuda/driver.yaml (relative, for messages and banners)
    location: Location
    vendor: Name  # ex) cuda -> ironaccelerator.backends.cuda
    library: Name  # ex) driver -> ironaccelerator.backends.cuda.driver
    backend: Name  # ex) CUDA (an ErrorKind-style backend name for errors)
    sdk: Name  # ex) cuda | nvrtc: which SDK discovery supplies the headers
    sdk_spec: SdkSpec | None = None  # how it is found, when this spec declares it (else another spec, or --sdk)
    headers: tuple[Name, ...]  # for frontend: declared, the one virtual header the declarations become
    version_headers: tuple[Name, ...] = ()
    frontend: str | None = None  # clang | pycparser | declared; None: the generator's choice (--frontend, clang)
    declarations: Declarations | None = None  # frontend: declared: the C declarations written in the spec
    defines: tuple[tuple[str, str], ...] = ()
    undefines: tuple[str, ...] = ()  # ex) __SSE__: predefined macros removed before parsing
    version_macro: tuple[Name, ...] = ()  # ex) [CUDA_VERSION] (encoded 13000) or [HIP_VERSION_MAJOR, HIP_VERSION_MINOR]
    version_function: Name | None = None
    include: tuple[Name, ...] = ()
    exclude: tuple[Name, ...] = ()
    per_thread: tuple[tuple[Name, str], ...] = ()  # (wrapper macro, symbol format)
    version_typedef: str | None = None  # ex) PFN_{name}_v{version}
    # a declared resolver kind's keys  ex) proc_address: cuGetProcAddress with per-function version pins
    resolver: ResolverSpec | None = None
    table: TableSpec | None = None  # ex) QnnInterface_getProviders and the selected provider's function table
    kernel_launch: Name | None = None  # ex) cuLaunchKernel: packed and called in C by the backend's launch fast path
    pool_memory: PoolMemorySpec | None = None  # the pool's allocator, called in C by the backend's MemoryPool
    device_memory: DeviceMemorySpec | None = None  # the device's allocator, called in C by Device.alloc
    host_copy: HostCopySpec | None = None  # the stream's host copies, called in C by copy_from_host/copy_to_host
    loader: LoaderSpec
    errors: ErrorSpec
    functions: tuple[FunctionSpec, ...] = ()
    rules: tuple[RuleSpec, ...] = ()  # conventions over many parameters (generator/rules.py applies them)
    objc: ObjcSpec | None = None  # resolver kind objc: the classes and their selectors, the runtime, the frameworks


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorKindSpec:
    name: Name
    doc: str
    value: int  # the ErrorKind's integer, from the spec (stable)


@dataclass(frozen=True, slots=True, kw_only=True)
class CoreSpec:
    """``specs/core.yaml``: the vendor-neutral surface."""

    path: str
    error_kinds: tuple[ErrorKindSpec, ...]
    backend_kinds: tuple[str, ...] = ()  # the names only (generator/surface.py checks the entries)


# ------------------------------------------------------------------------ YAML


def _loc(path: str, node: yaml.Node) -> Location:
    return Location(file=path, line=node.start_mark.line + 1, col=node.start_mark.column + 1)


# Bounds on one spec, far above what a real one needs (the largest, specs/cuda/driver.yaml, is 8 KB with about
# 1,100 values): a spec past them is refused in bounded time and memory, not parsed for minutes.
MAX_SPEC_BYTES = 1 << 20
MAX_NODES = 50_000


class _TooManyNodes(Exception):
    def __init__(self, mark: yaml.Mark | None) -> None:
        self.mark = mark


class _BoundedLoader(yaml.SafeLoader):  # type: ignore[misc]
    """PyYAML's safe composer, stopped after :data:`MAX_NODES` nodes (an alias counts where it is used)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.nodes = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _TooManyNodes(self.peek_event().start_mark)
        node: yaml.Node = super().compose_node(parent, index)
        return node


def _expanded_size(root: yaml.Node) -> int | None:
    """How many nodes a reader walking the tree visits, aliases expanded (capped a little past
    :data:`MAX_NODES`); None if an alias refers to a node that contains it."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()

    def size(node: yaml.Node) -> int | None:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in visiting:
            return None
        visiting.add(key)
        total = 1
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [x for pair in node.value for x in pair]
        for child in children:
            n = size(child)
            if n is None:
                return None
            total = min(total + n, MAX_NODES + 1)
        visiting.discard(key)
        sizes[key] = total
        return total

    return size(root)


def compose(path: str, text: str) -> yaml.Node | None:
    """Parse YAML into a node tree (safe: no tags, no objects), or raise a located error."""
    try:
        loader = _BoundedLoader(text)
        try:
            root: yaml.Node | None = loader.get_single_node()
        finally:
            loader.dispose()
        if root is not None:
            expanded = _expanded_size(root)
            if expanded is None:
                raise UserError([Diagnostic(location=_loc(path, root),
                                            message="YAML error: an alias refers to a node that contains it")])
            if expanded > MAX_NODES:
                raise UserError([Diagnostic(location=_loc(path, root),
                                            message=f"the spec has more than {MAX_NODES} values once its aliases "
                                                    "are expanded; stopping here")])
        return root
    except _TooManyNodes as exc:
        line, col = (exc.mark.line + 1, exc.mark.column + 1) if exc.mark else (1, 1)
        raise UserError([Diagnostic(location=Location(file=path, line=line, col=col),
                                    message=f"the spec has more than {MAX_NODES} values (lists, mappings and "
                                            "scalars); stopping here")]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = " ".join(" ".join(x for x in (exc.context, exc.problem) if x).split()) or "invalid YAML"
        raise UserError([Diagnostic(location=Location(file=path, line=line, col=col),
                                    message=f"YAML syntax error: {what}")]) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow; position: its index in text
        at = max(0, min(exc.position, len(text)))
        line, col = text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character[:1] or "\0")
        raise UserError([Diagnostic(location=Location(file=path, line=line, col=col),
                                    message=f"YAML error: character U+{code:04X} is not allowed")]) from None
    except yaml.YAMLError as exc:
        raise UserError([Diagnostic(location=Location(file=path, line=1, col=1),
                                    message=f"YAML error: {' '.join(str(exc).split())}")]) from None
    except RecursionError:  # PyYAML's composer recurses once per nesting level
        raise UserError([Diagnostic(location=Location(file=path, line=1, col=1),
                                    message="YAML error: the document is nested too deeply")]) from None


class SpecReader:
    """Typed access to YAML nodes that records located errors instead of raising."""

    def __init__(self, path: str, errors: Collector):
        self.path = path
        self.errors = errors

    def loc(self, node: yaml.Node) -> Location:
        return _loc(self.path, node)

    def mapping(self, node: yaml.Node | None, allowed: tuple[str, ...], required: tuple[str, ...] = (),
                what: str = "mapping", retired: Mapping[str, str] | None = None) -> dict[str, yaml.Node] | None:
        """The keys of a mapping node, each one of ``allowed`` (if any) and every ``required`` one present; a
        ``retired`` key (key -> what replaced it) is a located error that says so."""
        if node is None:
            return None
        if not isinstance(node, yaml.MappingNode):
            self.errors.error(self.loc(node), f"expected a {what} (key: value), got {_kind(node)}")
            return None
        out: dict[str, yaml.Node] = {}
        for k, v in node.value:
            if not isinstance(k, yaml.ScalarNode) or not isinstance(k.value, str):
                self.errors.error(self.loc(k), "mapping keys must be plain strings")
                continue
            if retired and k.value in retired:
                self.errors.error(self.loc(k), schema.retired_key(k.value, what, retired[k.value]))
                continue
            if allowed and k.value not in allowed:
                self.errors.error(self.loc(k), schema.unknown_key(k.value, allowed, what))
                continue
            if k.value in out:
                self.errors.error(self.loc(k), f"duplicate key {k.value!r}")
                continue
            out[k.value] = v
        for r in required:
            if r not in out:
                self.errors.error(self.loc(node), f"missing required key '{r}' in {what}")
        return out

    def section(self, node: yaml.Node | None, path: str, what: str, form: str | None = None,
                also: tuple[str, ...] = ()) -> dict[str, yaml.Node] | None:
        """The mapping of schema section ``path`` (generator/schema.py: its keys, those it requires, in ``form``
        when given, and those retired), read as :meth:`mapping`; ``also``: keys its subsections allow besides."""
        return self.mapping(node, schema.keys(path) + also, schema.required(path, form), what,
                            retired=schema.RETIRED.get(path))

    def refuse(self, m: Mapping[str, yaml.Node], path: str, form: str) -> None:
        """A located error for each key of ``m`` (section ``path``) that its ``form`` refuses."""
        for key, _ in schema.FORMS[path][form].refused:
            if key in m:
                self.errors.error(self.loc(m[key]), schema.refused_key(path, form, key) or "")

    def keyed(self, node: yaml.Node | None, what: str) -> list[tuple[Name, yaml.Node]]:
        """A mapping whose keys are names (functions, parameters)."""
        if node is None:
            return []
        if not isinstance(node, yaml.MappingNode):
            self.errors.error(self.loc(node), f"expected a mapping of {what}, got {_kind(node)}")
            return []
        out = []
        seen: set[str] = set()
        for k, v in node.value:
            name = self.ident(k, what)
            if name is None:
                continue
            if name.value in seen:
                self.errors.error(name.location, f"duplicate {what} '{name.value}'")
                continue
            seen.add(name.value)
            out.append((name, v))
        return out

    def scalar(self, node: yaml.Node | None, what: str) -> str | None:
        if node is None:
            return None
        if not isinstance(node, yaml.ScalarNode) or node.tag not in (
                "tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
            self.errors.error(self.loc(node), f"{what} must be a string, got {_kind(node)}")
            return None
        return str(node.value)

    def string(self, node: yaml.Node | None, what: str, pattern: re.Pattern[str] | None = None,
               hint: str = "") -> Name | None:
        s = self.scalar(node, what)
        if s is None or node is None:
            return None
        if pattern is not None and not pattern.match(s):
            self.errors.error(self.loc(node), f"{what} {s!r} is not valid{hint}")
            return None
        return Name(value=s, location=self.loc(node))

    def ident(self, node: yaml.Node | None, what: str) -> Name | None:
        return self.string(node, what, IDENT, ": expected a C identifier ([A-Za-z_][A-Za-z0-9_]*)")

    def integer(self, node: yaml.Node | None, what: str) -> int | None:
        if node is None:
            return None
        if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:int":
            self.errors.error(self.loc(node), f"{what} must be an integer, got {_kind(node)}")
            return None
        try:
            return int(node.value, 0)
        except ValueError:
            self.errors.error(self.loc(node), f"{what} must be an integer")
            return None

    def boolean(self, node: yaml.Node | None, what: str) -> bool:
        if node is None:
            return False
        if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:bool":
            self.errors.error(self.loc(node), f"{what} must be true or false, got {_kind(node)}")
            return False
        return node.value.lower() in ("true", "yes", "on")

    def seq(self, node: yaml.Node | None, what: str, item: Callable[[yaml.Node], Any]) -> tuple[Any, ...]:
        if node is None:
            return ()
        if isinstance(node, yaml.ScalarNode) and node.tag != "tag:yaml.org,2002:null":
            node = yaml.SequenceNode(tag="tag:yaml.org,2002:seq", value=[node],
                                     start_mark=node.start_mark, end_mark=node.end_mark)
        if not isinstance(node, yaml.SequenceNode):
            if isinstance(node, yaml.ScalarNode):
                return ()
            self.errors.error(self.loc(node), f"{what} must be a list, got {_kind(node)}")
            return ()
        return tuple(x for x in (item(n) for n in node.value) if x is not None)

    def version(self, node: yaml.Node | None, what: str) -> str | None:
        s = self.scalar(node, what)
        if s is not None and node is not None and not re.match(r"[0-9]+(\.[0-9]+)*\Z", s):
            self.errors.error(self.loc(node), f"{what} {s!r} is not a version like '12.0'")
            return None
        return s


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    tag = node.tag.rsplit(":", 1)[-1]
    return f"{'null' if tag == 'null' else tag} {node.value!r}" if tag != "null" else "nothing (null)"


# what a spec's display path may contain: it is printed into generated comments and docstrings
SAFE_PATH = re.compile(r"[\w./+\-@=,~ ]+\Z")


def _check_display(display: str) -> None:
    if not SAFE_PATH.match(display):
        raise UserError([Diagnostic(location=Location(file=ascii(display)[1:-1], line=1, col=1),
                                    message="a spec's path may only contain letters, digits, spaces and "
                                            "'_ . / + - @ = , ~' (it is printed into the generated files)")])


_FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def read_spec(path: Path, display: str) -> str:
    """The text of a spec file, or a located error: it must be a regular file (a FIFO would block, a device
    read without end) of at most :data:`MAX_SPEC_BYTES` bytes of UTF-8."""

    def fail(message: str, line: int = 1, col: int = 1) -> NoReturn:
        raise UserError([Diagnostic(location=Location(file=display, line=line, col=col), message=message)])

    def not_regular(mode: int) -> NoReturn:
        what = next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")
        fail(f"cannot read spec: it is {what}, not a regular file")

    def too_big(size: str) -> NoReturn:
        fail(f"the spec is {size} bytes; a spec may be at most {MAX_SPEC_BYTES} bytes ({MAX_SPEC_BYTES >> 20} MiB)")

    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            not_regular(st.st_mode)
        if st.st_size > MAX_SPEC_BYTES:
            too_big(str(st.st_size))
        # O_NONBLOCK: if the file was replaced by a FIFO since the stat, open must not wait for a writer
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                not_regular(st.st_mode)
            chunks: list[bytes] = []
            size = 0
            while size <= MAX_SPEC_BYTES:
                chunk = os.read(fd, MAX_SPEC_BYTES + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
    except OSError as exc:  # ex) a symlink loop, no permission, a name too long
        fail(f"cannot read spec: {exc.strerror or exc}")
    data = b"".join(chunks)
    if len(data) > MAX_SPEC_BYTES:  # it grew since the stat
        too_big(f"more than {MAX_SPEC_BYTES}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = exc.start
        start = data.rfind(b"\n", 0, at) + 1
        fail(f"the spec is not UTF-8 text: byte 0x{data[at]:02x} is not valid here", data.count(b"\n", 0, at) + 1,
             len(data[start:at].decode("utf-8", "replace")) + 1)




def load_library(path: Path, display: str | None = None, text: str | None = None) -> LibrarySpec:
    """Load ``specs/<vendor>/<library>.yaml``; raise :class:`UserError` with every problem found."""
    display = display or path.as_posix()
    _check_display(display)
    text = read_spec(path, display) if text is None else text
    root = compose(display, text)
    errors = Collector()
    r = SpecReader(display, errors)
    top_loc = Location(file=display, line=1, col=1)
    if root is None:
        errors.error(top_loc, "the spec is empty")
        errors.check()
    declared = isinstance(root, yaml.MappingNode) and any(
        isinstance(k, yaml.ScalarNode) and k.value == "frontend" and isinstance(v, yaml.ScalarNode)
        and v.value == "declared" for k, v in root.value)
    objc = isinstance(root, yaml.MappingNode) and any(
        isinstance(k, yaml.ScalarNode) and k.value == "resolver" and isinstance(v, yaml.MappingNode)
        and any(isinstance(a, yaml.ScalarNode) and a.value == "kind" and isinstance(b, yaml.ScalarNode)
                and b.value == "objc" for a, b in v.value) for k, v in root.value)
    # the form of the spec (schema.FORMS: what each requires and refuses); objc specs are declared ones too
    m = r.section(root, "library", "library spec", form="objc" if objc else "declared" if declared else "headers")
    if m is None:
        errors.check()
        raise UserError([Diagnostic(location=top_loc, message="the spec must be a mapping")])

    def py_ident(node: yaml.Node | None, what: str) -> Name | None:
        n = r.ident(node, what)
        if n is not None and (keyword.iskeyword(n.value) or n.value.startswith("_")):
            errors.error(n.location, f"{what} '{n.value}' cannot be used as a Python module name")
            return None
        return n

    vendor = py_ident(m.get("vendor"), "vendor")
    library = py_ident(m.get("library"), "library")
    backend = r.ident(m.get("backend"), "backend")
    sdk, sdk_spec = _sdk(r, m.get("sdk"), display)
    frontend = r.string(m.get("frontend"), "frontend", re.compile(r"clang\Z|pycparser\Z|declared\Z"),
                        ": expected clang, pycparser or declared")
    declarations = None
    if declared:
        declarations = _declarations(r, m, text)
        dn = m.get("declarations")
        sdk = Name(value="declared", location=r.loc(dn) if dn is not None else top_loc)
    elif "declarations" in m:
        errors.error(r.loc(m["declarations"]), "declarations go with frontend: declared (this spec parses "
                     f"{'its headers' if 'headers' in m else 'headers'})")
    headers, version_headers, defines, undefines, version_macro = _parse_options(r, m)

    include, exclude = _bind(r, m)
    sym = r.section(m.get("symbols"), "library > symbols", "symbols") or {}
    resolver, table, objc_resolver = _resolver(r, m)
    per_thread, vt = _symbols(r, sym)

    kernel_launch = r.ident(m.get("kernel_launch"), "kernel_launch")
    pool_memory = _pool_memory(r, m)
    device_memory = _device_memory(r, m)
    host_copy = _host_copy(r, m)
    lm = r.section(m.get("loader"), "library > loader", "loader") or {}
    loader = _loader(r, lm)

    # errors: none -- a library whose functions report no status (ex: NVTX's push/pop return depths, its marks
    # nothing): every function returns its value and none is checked
    en = m.get("errors")
    no_status = isinstance(en, yaml.ScalarNode) and en.value == "none"
    err = _errors(r, {} if no_status else r.section(
        en, "library > errors", "mapping of status codes (or errors: none)") or {})
    err_type, default = err.type, err.default

    functions = []
    for fname, fnode in r.keyed(m.get("functions") if not objc else None, "function"):
        functions.append(_function(r, fname, fnode))
    rules = r.seq(m.get("rules") if not objc else None, "rules", lambda n: _rule(r, n))
    if no_status and en is not None:
        err_type = Name(value="none", location=r.loc(en))
        default = Name(value="UNKNOWN", location=r.loc(en))
        for fs in functions:
            for what, given in (("status", fs.status), ("error_log", fs.error_log)):
                if given:
                    errors.error(fs.name.location, f"'{what}' of '{fs.name}' does not go with errors: none (the "
                                 "library reports no status)")

    objc_spec = None
    if objc:
        r.refuse(lm, "library > loader", "objc")  # the loader only says where to search
        r.refuse(m, "library", "objc")
        if frontend is not None and frontend.value != "declared":
            errors.error(frontend.location, "resolver kind objc goes with frontend: declared (there is no header)")
        objc_spec = _objc(r, objc_resolver or {}, m.get("classes"), m.get("functions"))
        err_type = err_type or Name(value="id", location=top_loc)
        default = default or Name(value=objc_spec.error_default if objc_spec else "UNKNOWN", location=top_loc)
        loader = replace(loader, names=objc_spec.runtime if objc_spec else ())
    elif "classes" in m:
        errors.error(r.loc(m["classes"]), "classes: go with resolver: {kind: objc} (Objective-C methods)")

    errors.check()
    assert vendor and library and backend and sdk and err_type and default  # guaranteed by check()
    return LibrarySpec(
        path=display, location=top_loc, vendor=vendor, library=library, backend=backend, sdk=sdk, sdk_spec=sdk_spec,
        frontend=frontend.value if frontend else None, declarations=declarations,
        headers=(Name(value=f"{library}.declared.h", location=top_loc),) if declared and library else headers,
        version_headers=version_headers, defines=tuple(defines),
        undefines=tuple(u.value for u in undefines), version_macro=version_macro,
        include=include, exclude=exclude, per_thread=tuple(per_thread), version_typedef=vt.value if vt else None,
        resolver=resolver, table=table, kernel_launch=kernel_launch, pool_memory=pool_memory,
        device_memory=device_memory, host_copy=host_copy,
        loader=loader,
        errors=ErrorSpec(type=err_type, success=err.success, kinds=err.kinds, defaulted=err.defaulted, default=default,
                         since=err.since, name_function=err.name_function, macros=err.macros,
                         out_param=err.out_param, codes=err.codes, mask=err.mask, null_handle=err.null_handle,
                         reported=not no_status),
        functions=tuple(functions), rules=rules, objc=objc_spec,
    )


# ---- the sections of a library spec, one reader each (their keys: schema.SECTIONS) ----

def _declarations(r: SpecReader, m: dict[str, yaml.Node], text: str) -> Declarations | None:
    """``frontend: declared``: the ``declarations:`` block (its text, and where it starts, for diagnostics)."""
    r.refuse(m, "library", "declared")
    dn = m.get("declarations")
    dtext = r.scalar(dn, "declarations")
    if dn is None or dtext is None:
        return None
    if not dtext.strip():
        r.errors.error(r.loc(dn), "declarations must declare something")
    first = dn.start_mark.line + (2 if dn.style in ("|", ">") else 1)  # a block's text starts a line below
    lines = text.splitlines()
    body = lines[first - 1] if dn.style in ("|", ">") and first - 1 < len(lines) else ""
    indent = len(body) - len(body.lstrip(" ")) if body.strip() else dn.start_mark.column
    return Declarations(text=dtext, line=first, indent=indent)


def _parse_options(r: SpecReader, m: dict[str, yaml.Node]) -> tuple[
        tuple[Name, ...], tuple[Name, ...], list[tuple[str, str]], tuple[Name, ...], tuple[Name, ...]]:
    """``headers``, ``version_headers``, ``defines``, ``undefines`` and ``version_macro``: what is parsed, how."""
    header_re = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./\-]*\.h\Z")
    headers = r.seq(m.get("headers"), "headers", lambda n: r.string(n, "header", header_re, ": expected a header file name like 'cuda.h'"))
    if "headers" in m and not headers and (isinstance(m["headers"], yaml.SequenceNode) and not m["headers"].value
                                           or m["headers"].tag == "tag:yaml.org,2002:null"):
        r.errors.error(r.loc(m["headers"]), "headers must name at least one header")
    version_headers = r.seq(m.get("version_headers"), "version_headers",
                            lambda n: r.string(n, "header", header_re, ": expected a header file name"))
    defines: list[tuple[str, str]] = []
    for name, node in r.keyed(m.get("defines"), "macro"):
        value = r.scalar(node, f"value of define '{name}'")
        if value is not None:
            if not re.match(r"[A-Za-z0-9_]*\Z", value):
                r.errors.error(r.loc(node), f"define value {value!r} must be a number or identifier")
            else:
                defines.append((name.value, value))
    undefines = r.seq(m.get("undefines"), "undefines", lambda n: r.ident(n, "macro"))
    version_macro = r.seq(m.get("version_macro"), "version_macro", lambda n: r.ident(n, "version_macro"))
    return headers, version_headers, defines, undefines, version_macro


def _bind(r: SpecReader, m: dict[str, yaml.Node]) -> tuple[tuple[Name, ...], tuple[Name, ...]]:
    """``bind:``: the include and exclude patterns."""
    bind = r.section(m.get("bind"), "library > bind", "bind") or {}
    hint = ": use C identifier characters and * ? [ ] globs"
    include = r.seq(bind.get("include"), "include", lambda n: r.string(n, "pattern", PATTERN, hint))
    exclude = r.seq(bind.get("exclude"), "exclude", lambda n: r.string(n, "pattern", PATTERN, hint))
    return include, exclude


def _resolver(r: SpecReader, m: dict[str, yaml.Node]) -> tuple[
        ResolverSpec | None, TableSpec | None, dict[str, yaml.Node] | None]:
    """``resolver:``: its kind, checked against the keys each kind takes; a declared kind's values, the table
    resolver, or the objc resolver's mapping (read with the classes)."""
    if "resolver" not in m:
        return None, None, None
    errors = r.errors
    kinds = _resolver_keys()
    all_keys = tuple(dict.fromkeys(k for keys, _ in kinds.values() for k in keys))
    rm = r.section(m["resolver"], "library > resolver", "resolver", also=all_keys) or {}
    rkind = r.ident(rm.get("kind"), "resolver kind")
    if rkind is None:
        return None, None, None
    if rkind.value not in kinds:
        errors.error(rkind.location, f"'{rkind}' is not a resolver kind{suggest(rkind.value, kinds)}; "
                     f"expected one of: {', '.join(kinds)}")
        return None, None, None
    rk = rkind.value
    ok = True
    for key in all_keys:
        if key in rm and key not in kinds[rk][0]:
            owner = next(k for k, (keys, _) in kinds.items() if key in keys)
            errors.error(r.loc(rm[key]), f"'{key}' goes with resolver kind {owner}, not {rk}")
            ok = False
    for key in kinds[rk][1]:
        if key not in rm:
            errors.error(r.loc(m["resolver"]), f"resolver kind {rk} needs '{key}'")
            ok = False
    if not ok:
        return None, None, None
    if rk == "table":  # (resolver_kinds.EXCEPTIONS)
        return None, _table_resolver(r, rm), None
    if rk == "objc":
        return None, None, rm
    values: list[tuple[str, Name | tuple[Name, ...]]] = []
    for key in resolvers.declared()[rk].keys:
        if key.name not in rm:
            continue
        what: str = key.what or key.name

        def item(n: yaml.Node, what: str = what) -> Name | None:
            return r.ident(n, what)
        if key.type == "functions":
            values.append((key.name, tuple(r.seq(rm[key.name], key.name, item))))
        elif (v := r.ident(rm[key.name], key.name)) is not None:
            values.append((key.name, v))
        else:
            ok = False
    if not ok:
        return None, None, None
    return ResolverSpec(kind=rkind, location=r.loc(m["resolver"]), values=tuple(values)), None, None


def _symbols(r: SpecReader, sym: dict[str, yaml.Node]) -> tuple[list[tuple[Name, str]], Name | None]:
    """``symbols:``: per-thread symbol formats, and the version typedef format."""
    per_thread = []
    for wrapper, node in r.keyed(sym.get("per_thread"), "wrapper macro"):
        fmt = r.string(node, "per-thread symbol format", re.compile(r"[A-Za-z0-9_]*\{\}[A-Za-z0-9_]*\Z"),
                       ": expected a format such as '{}_ptds'")
        if fmt is not None:
            per_thread.append((wrapper, fmt.value))
    vt = r.string(sym.get("version_typedef"), "version_typedef",
                  re.compile(r"[A-Za-z0-9_]*\{name\}[A-Za-z0-9_]*\{version\}[A-Za-z0-9_]*\Z"),
                  ": expected a format such as 'PFN_{name}_v{version}'")
    return per_thread, vt


def _function_pair(r: SpecReader, m: dict[str, yaml.Node], key: str, first: str,
                   second: str) -> tuple[Name, Name] | None:
    """``key: {first: F, second: G}``: a top-level section that names two functions (None: absent, or an error
    reported)."""
    if key not in m:
        return None
    section = r.section(m[key], f"library > {key}", key) or {}
    a, b = r.ident(section.get(first), first), r.ident(section.get(second), second)
    return None if a is None or b is None else (a, b)


def _pool_memory(r: SpecReader, m: dict[str, yaml.Node]) -> PoolMemorySpec | None:
    """``pool_memory:``: the stream-ordered allocator's alloc and free."""
    pair = _function_pair(r, m, "pool_memory", "alloc", "free")
    return None if pair is None else PoolMemorySpec(alloc=pair[0], free=pair[1])


def _device_memory(r: SpecReader, m: dict[str, yaml.Node]) -> DeviceMemorySpec | None:
    """``device_memory:``: the device-memory allocator's alloc and free."""
    if "device_memory" not in m:
        return None
    node = m["device_memory"]
    dm_map = r.section(node, "library > device_memory", "device_memory") or {}
    dm_free = r.ident(dm_map.get("free"), "free")
    if ("alloc" in dm_map) == ("create" in dm_map):
        both = "alloc" in dm_map
        r.errors.error(r.loc(dm_map["create"] if both else node),
                       "device_memory takes one of 'alloc' (status (device pointer *out, size_t bytes)) and 'create' "
                       "(a creator that returns the handle)" + (", not both" if both else ": add one"))
        return None
    if ("size" in dm_map) != ("create" in dm_map):
        r.errors.error(r.loc(dm_map["size"] if "size" in dm_map else dm_map["create"]),
                       "'size' (the byte count's parameter) goes with 'create' only" if "size" in dm_map else
                       "'create' needs 'size': the name of its byte count's parameter (ex. size: size)")
        return None
    returns = "create" in dm_map
    dm_alloc = r.ident(dm_map.get("create" if returns else "alloc"), "create" if returns else "alloc")
    size = r.ident(dm_map.get("size"), "size") if returns else None
    if dm_alloc is None or dm_free is None or (returns and size is None):
        return None
    return DeviceMemorySpec(alloc=dm_alloc, free=dm_free, returns_handle=returns, size=size)


def _host_copy(r: SpecReader, m: dict[str, yaml.Node]) -> HostCopySpec | None:
    """``host_copy:``: the stream's host-to-device write and device-to-host read."""
    pair = _function_pair(r, m, "host_copy", "write", "read")
    return None if pair is None else HostCopySpec(write=pair[0], read=pair[1])


def _loader(r: SpecReader, lm: dict[str, yaml.Node]) -> LoaderSpec:
    """``loader:``: the library's file names per platform and where they are searched."""
    names = []
    major_at = None
    for plat in PLATFORMS:
        libs = r.seq(lm.get(plat), f"{plat} libraries", lambda n: _loader_name(r, n))
        names.append((plat, tuple(x.value for x in libs)))
        major_at = major_at or next((x.location for x in libs if MAJOR in x.value), None)
    abi_major = None
    if "abi_major" in lm:
        am = r.section(lm["abi_major"], "library > loader > abi_major", "abi_major") or {}
        am_function = r.ident(am.get("function"), "abi_major function")
        am_encoding = _encoding(r, am.get("encoding"))
        if am_function is not None and am_encoding is not None:
            abi_major = AbiMajorSpec(function=am_function, encoding=am_encoding, location=r.loc(lm["abi_major"]))
    relpath = re.compile(r"[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*\Z")
    wheel_dirs = r.seq(lm.get("wheel_dirs"), "wheel_dirs", lambda n: r.string(n, "directory", relpath))
    sdk_dirs = r.seq(lm.get("sdk_dirs"), "sdk_dirs", lambda n: r.string(n, "directory", relpath))
    sdk_env = r.seq(lm.get("sdk_env"), "sdk_env", lambda n: r.ident(n, "environment variable"))
    sdk_roots = r.seq(lm.get("sdk_roots"), "sdk_roots",
                      lambda n: r.string(n, "directory", re.compile(r"(/[A-Za-z0-9_.*\-]+)+\Z|[A-Z]:[\\/][A-Za-z0-9_.* \\/\-]+\Z")))
    return LoaderSpec(names=tuple(names), wheel_dirs=tuple(x.value for x in wheel_dirs),
                      sdk_dirs=tuple(x.value for x in sdk_dirs), sdk_env=tuple(x.value for x in sdk_env),
                      sdk_roots=tuple(x.value for x in sdk_roots), major_at=major_at, abi_major=abi_major)


@dataclass(frozen=True, slots=True)
class _ErrorsRead:
    """What ``errors:`` says, before the defaults of ``errors: none`` and of the objc resolver are applied."""

    type: Name | None
    success: tuple[Name, ...]
    kinds: tuple[tuple[Name, Name], ...]
    defaulted: tuple[Name, ...]
    default: Name | None
    since: tuple[tuple[Name, str], ...]
    name_function: Name | None
    macros: tuple[Name, ...]
    out_param: Name | None
    codes: Name | None
    mask: int
    null_handle: Name | None


def _errors(r: SpecReader, em: dict[str, yaml.Node]) -> _ErrorsRead:
    """``errors:``: the status type, its success codes and the codes' ErrorKinds."""
    err_type = r.ident(em.get("type"), "error type")
    success = r.seq(em.get("success"), "success codes", lambda n: r.ident(n, "success code"))
    kinds: list[tuple[Name, Name]] = []
    for kind, node in r.keyed(em.get("kinds"), "error kind"):
        for code in r.seq(node, f"codes of {kind}", lambda n: r.ident(n, "error code")):
            kinds.append((code, kind))
    defaulted = r.seq(em.get("defaulted"), "defaulted codes", lambda n: r.ident(n, "error code"))
    default = r.ident(em.get("default"), "default error kind")
    since = []
    for code, node in r.keyed(em.get("since"), "error code"):
        v = r.version(node, f"version of {code}")
        if v is not None:
            since.append((code, v))
    name_function = r.ident(em.get("name_function"), "name_function")
    err_macros = r.seq(em.get("macros"), "macros", lambda n: r.string(
        n, "macro pattern", re.compile(r"!?[A-Za-z0-9_*?\[\]]+\Z"), ": use a glob, or !glob to exclude"))
    out_param = r.ident(em.get("out_param"), "out_param")
    codes = r.ident(em.get("codes"), "codes")
    mask = r.integer(em.get("mask"), "mask") if em.get("mask") is not None else None
    if mask is not None and not 0 < mask < 1 << 64:
        r.errors.error(r.loc(em["mask"]), "mask must be a positive integer of at most 64 bits (ex: 0xffff)")
    return _ErrorsRead(type=err_type, success=success, kinds=tuple(kinds), defaulted=defaulted, default=default,
                       since=tuple(since), name_function=name_function, macros=err_macros, out_param=out_param,
                       codes=codes, mask=mask or 0, null_handle=r.ident(em.get("null_handle"), "null_handle"))


MAJOR = "{major}"  # the one placeholder of a loader name: the major version of the SDK of the headers


def _loader_name(r: SpecReader, node: yaml.Node) -> Name | None:
    """A library file name of ``loader:``, which may hold ``{major}`` (filled by the binder)."""
    name = r.string(node, "library name")
    if name is None:
        return None
    rest = name.value.replace(MAJOR, "")
    if "{" in rest or "}" in rest:
        r.errors.error(name.location, f"library name {name.value!r}: the only placeholder is {MAJOR} (the major "
                       "version of the SDK the bindings are generated from)")
        return None
    if not LIBNAME.match(rest):  # (an empty name, or only the placeholder, is refused too)
        r.errors.error(name.location, f"library name {name.value!r} is not valid")
        return None
    return name


def _encoding(r: SpecReader, node: yaml.Node | None) -> tuple[int, int] | None:
    """``[major divisor, minor divisor]``: ``major = v // e[0]``, ``minor = v % e[0] // e[1]``."""
    if node is None:
        return None
    got = [r.integer(n, "divisor") for n in (node.value if isinstance(node, yaml.SequenceNode) else [])]
    if not isinstance(node, yaml.SequenceNode) or len(got) != 2 or not all(e is not None and e > 0 for e in got):
        r.errors.error(r.loc(node), "encoding must be two positive divisors, ex. [1000, 10]")
        return None
    major, minor = got
    assert major is not None and minor is not None
    return major, minor


def _platform_libs(r: SpecReader, node: yaml.Node | None, what: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``{linux: [libobjc.so.4], darwin: [...]}``: library names by platform."""
    pm = r.mapping(node, PLATFORMS, (), what) or {}
    return tuple((plat, tuple(x.value for x in r.seq(pm.get(plat), f"{plat} {what}",
                                                   lambda n: r.string(n, "library name", LIBNAME))))
                 for plat in PLATFORMS)


def method_py_name(selector: str) -> str:
    """A selector's Python name: ':' -> '_' (``rangeOfString:`` -> ``rangeOfString_``); a keyword gets '_'."""
    name = selector.replace(":", "_")
    return name + "_" if keyword.iskeyword(name) or keyword.issoftkeyword(name) else name


def objc_ownership(selector: str, returns: str) -> str:
    """The Cocoa naming rule: a method of the alloc, new, copy, mutableCopy or init family returning an object
    returns it +1 (the caller owns a reference); every other method +0.  The family is the selector's first
    word: the prefix followed by the end, ':' or an upper-case letter (``newBufferWithLength:``, not
    ``newline``)."""
    if returns.replace(" ", "") not in ("id", "instancetype"):
        return "+0"
    for family in ("alloc", "new", "copy", "mutableCopy", "init"):
        rest = selector[len(family):]
        if selector.startswith(family) and (not rest or rest[0] == ":" or rest[0].isupper()):
            return "+1"
    return "+0"


def cf_ownership(function: str) -> str:
    """The Core Foundation naming rule for C functions returning an object: a name containing ``Create`` or
    ``Copy`` returns it +1 (``MTLCreateSystemDefaultDevice``, ``MTLCopyAllDevices``); every other +0
    (``NSTemporaryDirectory``)."""
    return "+1" if "Create" in function or "Copy" in function else "+0"


def _objc_functions(r: SpecReader, node: yaml.Node | None) -> tuple[ObjcFunctionSpec, ...]:
    """``functions: {<C function>: {ownership: "+1"} | null}`` of an objc spec (checked against the declarations
    by generator/objc.py, which has them parsed)."""
    out = []
    for fname, fnode in r.keyed(node, "function"):
        if isinstance(fnode, yaml.ScalarNode) and fnode.tag == "tag:yaml.org,2002:null":
            out.append(ObjcFunctionSpec(name=fname))
            continue
        fm = r.section(fnode, "library > functions > <name> (objc)", f"function {fname}")
        if fm is None:
            continue
        text = _ownership(r, fm.get("ownership"), f" of {fname}")
        ownership = Name(value=text, location=r.loc(fm["ownership"])) if text is not None else None
        out.append(ObjcFunctionSpec(name=fname, ownership=ownership))
    return tuple(out)


def _ownership(r: SpecReader, node: yaml.Node | None, whose: str = "") -> str | None:
    """An ``ownership:`` value: '+1' or '+0' (else a located error and None); None when absent."""
    if node is None:
        return None
    text = r.scalar(node, "ownership")
    if text is not None and text not in OWNERSHIPS:
        r.errors.error(r.loc(node), f"ownership {text!r}{whose} is not valid; expected '+1' (the caller owns the "
                       "result) or '+0'")
        return None
    return text


def _objc(r: SpecReader, rm: dict[str, yaml.Node], classes_node: yaml.Node | None,
          functions_node: yaml.Node | None = None) -> ObjcSpec | None:
    """``resolver: {kind: objc, runtime, frameworks, errors}``, the ``classes:`` and ``functions:`` sections."""
    runtime = _platform_libs(r, rm.get("runtime"), "runtime")
    frameworks = _platform_libs(r, rm.get("frameworks"), "frameworks")
    error_kinds: list[tuple[str, int | None, Name]] = []
    for kind, node in r.keyed(rm.get("errors"), "error kind"):
        for entry in r.seq(node, f"NSError domains of {kind}", lambda n: r.string(
                n, "NSError domain", re.compile(r"[A-Za-z_][A-Za-z0-9_.]*(:-?[0-9]+)?\Z"),
                ": expected a domain or domain:code, ex. NSPOSIXErrorDomain:2")):
            domain, _, code = entry.value.partition(":")
            error_kinds.append((domain, int(code) if code else None, kind))
    prototypes = read_prototypes(r, rm["prototypes"]) if "prototypes" in rm else None
    undeclared: list[Name] = []
    classes: list[ClassSpec] = []
    for cname, cnode in r.keyed(classes_node, "class"):
        cm = r.section(cnode, "library > classes > <name>", f"class {cname}") or {}
        base = r.ident(cm.get("base"), "base class")
        methods: list[MethodSpec] = []
        names: dict[str, Name] = {}
        mnode = cm.get("methods")
        items: list[tuple[yaml.Node, yaml.Node | None]] = []  # (selector, its mapping; None: selector only)
        if isinstance(mnode, yaml.MappingNode):
            items = list(mnode.value)
        elif isinstance(mnode, yaml.SequenceNode):  # the selector-only form: prototypes from the resolver's source
            for it in mnode.value:
                if isinstance(it, yaml.MappingNode) and len(it.value) == 1:
                    items.append(it.value[0])
                elif isinstance(it, yaml.MappingNode):
                    r.errors.error(r.loc(it), f"a method of {cname}'s list is a selector or a one-key mapping "
                                   f"(ex: {{newCommandQueue: {{ownership: '+1'}}}}), got {len(it.value)} keys")
                else:
                    items.append((it, None))
        elif mnode is not None:
            r.errors.error(r.loc(mnode), f"methods of {cname} must be a mapping of selectors (or a list of them, "
                           f"with the resolver's prototypes:), got {_kind(mnode)}")
        for knode, vnode in items:
            key = r.string(knode, "selector", SELECTOR, ": expected a selector such as 'length', "
                           "'rangeOfString:' or 'initWithBytes:length:encoding:', with '+' before a class method")
            if key is None:
                continue
            class_method = key.value.startswith("+")
            selector = Name(value=key.value.lstrip("+-"), location=key.location)
            if vnode is None:
                vm: dict[str, yaml.Node] | None = {}
            else:
                vm = r.section(vnode, "library > classes > <name> > methods > <selector>",
                               f"method {key.value} of {cname}")
            if vm is None:
                if isinstance(vnode, yaml.ScalarNode) and vnode.tag == "tag:yaml.org,2002:null":
                    vm = {}
                else:
                    continue
            # in the list form, a method without returns/args takes its prototype from the resolver's prototypes:
            declared = not isinstance(mnode, yaml.SequenceNode) or "returns" in vm or "args" in vm
            if not declared:
                undeclared.append(key)
            returns = r.string(vm.get("returns"), "return type", C_TYPE, C_TYPE_HINT) if "returns" in vm else \
                Name(value="void" if declared else "id", location=key.location)
            args = r.seq(vm.get("args"), "argument types", lambda n: r.string(n, "argument type", C_TYPE, C_TYPE_HINT))
            want = selector.value.count(":")
            if "args" in vm and not isinstance(vm["args"], yaml.SequenceNode):
                pass  # (reported by seq)
            elif declared and len(args) != want:
                r.errors.error(r.loc(vm["args"]) if "args" in vm else key.location,
                               f"selector '{selector}' takes {want} argument{'s' if want != 1 else ''} (one per ':'); "
                               f"args lists {len(args)}")
            ownership = _ownership(r, vm.get("ownership"))
            if ownership is not None and declared and returns is not None and returns.value.replace(" ", "") != "id":
                r.errors.error(r.loc(vm["ownership"]), f"ownership goes with methods returning an object (id), "
                               f"not {returns}")
                ownership = None
            keywords = selector.value.split(":")[:-1]
            nullable = r.seq(vm.get("nullable"), "nullable keywords", lambda n: r.ident(n, "selector keyword"))
            for kw in nullable:
                if kw.value not in keywords:
                    r.errors.error(kw.location, f"nullable: '{kw}' is not a keyword of selector '{selector}'"
                                   f"{suggest(kw.value, [k for k in keywords if k])}; its keywords: "
                                   f"{', '.join(k for k in keywords if k) or 'none (it takes no argument)'}")
            py = method_py_name(selector.value)
            if py in OBJC_RESERVED:
                r.errors.error(key.location, f"selector '{key.value}' of {cname} would be bound as {py!r}, which "
                               f"every Objective-C handle already has ({', '.join(OBJC_RESERVED)})")
                continue
            if py in names:
                first = names[py]
                r.errors.error(key.location, f"selector '{key.value}' of {cname} would be bound as {py!r}, as "
                               f"'{first}' (at {first.location.line}:{first.location.col}) is: a class method and "
                               "an instance method share the Python class's namespace")
                continue
            names[py] = key
            if returns is None:
                continue
            methods.append(MethodSpec(selector=selector, class_method=class_method, returns=returns,
                                      args=tuple(args), ownership=ownership, py_name=py, declared=declared,
                                      nullable=tuple(nullable)))
        classes.append(ClassSpec(name=cname, base=base, methods=tuple(methods)))
    known = [c.name.value for c in classes]
    for c in classes:
        if c.base is not None and c.base.value not in known:
            r.errors.error(c.base.location, f"base class '{c.base}' of {c.name} is not a class of this spec"
                           f"{suggest(c.base.value, known)}; known: {', '.join(known)}")
        seen: list[str] = []
        up = c.base.value if c.base else None
        while up is not None and up in known and up not in seen:
            seen.append(up)
            up = next((x.base.value if x.base else None) for x in classes if x.name.value == up)
        if c.name.value in seen:
            r.errors.error(c.name.location, f"class {c.name}'s bases form a cycle ({' -> '.join([c.name.value] + seen)})")
    if classes_node is not None and not classes:
        r.errors.error(r.loc(classes_node), "classes: must declare at least one class")
    if undeclared and prototypes is None and "prototypes" not in rm:
        first = undeclared[0]
        r.errors.error(first.location, f"selector '{first}' has no prototype: give it returns:/args:, or name where "
                       "the listed selectors' prototypes come from with the resolver's 'prototypes:' section "
                       f"({len(undeclared)} selector{'s' if len(undeclared) != 1 else ''} listed without one)")
    return ObjcSpec(runtime=runtime, frameworks=frameworks, classes=tuple(classes), error_kinds=tuple(error_kinds),
                    prototypes=prototypes, functions=_objc_functions(r, functions_node))


# a C type as the classes: section spells it: words, '*' and 'const' (typedef names come from the declarations)
C_TYPE = re.compile(r"\s*(const\s+)?(struct\s+|union\s+|enum\s+)?[A-Za-z_][A-Za-z0-9_]*(\s+[A-Za-z_][A-Za-z0-9_]*)*"
                    r"(\s*\*(\s*const)?)*\s*\Z")
C_TYPE_HINT = ": expected a C type such as 'NSUInteger', 'const char *' or 'id'"


def _table_resolver(r: SpecReader, rm: dict[str, yaml.Node]) -> TableSpec | None:
    """``resolver: {kind: table, ...}`` (its keys all present)."""
    path_hint = ": expected a member path such as 'v1' or 'u.v1'"
    provider, interface = r.ident(rm.get("provider"), "provider"), r.ident(rm.get("interface"), "interface")
    tpath = r.string(rm.get("table"), "table", MEMBER_PATH, path_hint)
    vpath = r.string(rm.get("version"), "version", MEMBER_PATH, path_hint)
    req = r.section(rm.get("require"), "library > resolver (table) > require", "require") or {}
    major, minor = r.integer(req.get("major"), "require major"), r.integer(req.get("minor"), "require minor")
    for key, value in (("major", major), ("minor", minor)):
        if value is not None and value < 0:
            r.errors.error(r.loc(req[key]), f"require {key} must not be negative")
    match = []
    if rm.get("match") is not None and not isinstance(rm["match"], yaml.MappingNode):
        r.errors.error(r.loc(rm["match"]), f"expected a mapping of provider members, got {_kind(rm['match'])}")
    elif rm.get("match") is not None:
        seen: set[str] = set()
        for k, v in rm["match"].value:
            member = r.string(k, "match member", MEMBER_PATH, path_hint)
            value = r.integer(v, f"match value of {member}" if member else "match value")
            if member is not None and member.value in seen:
                r.errors.error(member.location, f"duplicate match member '{member}'")
            elif member is not None and value is not None:
                seen.add(member.value)
                match.append((member, value))
    prefix = r.ident(rm.get("prefix"), "prefix")
    entries = []
    for fname, node in r.keyed(rm.get("entries"), "function"):
        slot = r.ident(node, f"table field of {fname}")
        if slot is not None:
            entries.append((fname, slot))
    since = []
    for field_name, node in r.keyed(rm.get("since"), "table field"):
        added = r.integer(node, f"since minor of {field_name}")
        if added is not None and added < 0:
            r.errors.error(r.loc(node), f"since minor of {field_name} must not be negative")
        elif added is not None:
            since.append((field_name, added))
    if None in (provider, interface, tpath, vpath, major, minor) or major < 0 or minor < 0:  # type: ignore[operator]
        return None
    assert provider and interface and tpath and vpath and major is not None and minor is not None
    return TableSpec(provider=provider, interface=interface, table=tpath, version=vpath, major=major, minor=minor,
                     match=tuple(match), prefix=prefix, entries=tuple(entries), since=tuple(since))


def _function(r: SpecReader, name: Name, node: yaml.Node) -> FunctionSpec:
    if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
        return FunctionSpec(name=name)
    fm = r.section(node, "library > functions > <name>", f"function '{name}'") or {}
    params = []
    for pname, pnode in r.keyed(fm.get("params"), "parameter"):
        params.append(_param(r, name, pname, pnode))
    return FunctionSpec(
        name=name,
        symbol=r.ident(fm.get("symbol"), "symbol"),
        status=r.seq(fm.get("status"), "status codes", lambda n: r.ident(n, "status code")),
        params=tuple(params),
        error_log=r.ident(fm.get("error_log"), "error_log"),
        since=r.version(fm.get("since"), "since"),
        skip=r.boolean(fm.get("skip"), "skip"),
    )


def _param(r: SpecReader, fname: Name, name: Name, node: yaml.Node) -> ParamSpec:
    if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:str":
        # shorthand: `dptr: out`
        if node.value not in DIRECTIONS:
            r.errors.error(r.loc(node), f"bad direction {node.value!r} for parameter '{name}'{suggest(node.value, DIRECTIONS)}; "
                           f"expected one of: {', '.join(DIRECTIONS)}")
            return ParamSpec(name=name)
        return ParamSpec(name=name, direction=node.value)
    pm = r.section(node, "library > functions > <name> > params > <param>",
                   f"parameter '{name}' of {fname}") or {}
    direction = None
    if "direction" in pm:
        d = r.scalar(pm["direction"], "direction")
        if d is not None and d not in DIRECTIONS:
            r.errors.error(r.loc(pm["direction"]), f"bad direction {d!r} for parameter '{name}'{suggest(d, DIRECTIONS)}; "
                           f"expected one of: {', '.join(DIRECTIONS)}")
        elif d is not None:
            direction = d
    string = None
    if "string" in pm:
        sm = r.section(pm["string"], "library > functions > <name> > params > <param> > string",
                       f"string of parameter '{name}'") or {}
        capacity = r.integer(sm.get("capacity"), "capacity")
        if capacity is not None and not 0 < capacity <= 1 << 24:
            r.errors.error(r.loc(sm["capacity"]), f"capacity {capacity} must be between 1 and 16777216")
            capacity = None
        string = StringSpec(capacity=capacity, length_param=r.ident(sm.get("length_param"), "length_param"),
                            size_function=r.ident(sm.get("size_function"), "size_function"),
                            binary=r.boolean(sm.get("binary"), "binary"))
        if string.size_function is None and string.capacity is None and "capacity" not in sm:
            r.errors.error(r.loc(pm["string"]), f"output string '{name}' needs 'capacity' or 'size_function'")
        elif string.size_function is not None and "capacity" in sm:
            r.errors.error(r.loc(pm["string"]), f"string: parameter '{name}' of '{fname}' gives both 'capacity' "
                           "and 'size_function'; give one")
        elif string.length_param is not None and string.capacity is None and "capacity" not in sm:
            r.errors.error(r.loc(pm["string"]), f"string: length_param of parameter '{name}' of '{fname}' needs a "
                           "'capacity' to pass")
    terminated = isinstance(pm.get("len"), yaml.ScalarNode) and pm["len"].value == NULL_TERMINATED
    return ParamSpec(name=name, direction=direction, len=None if terminated else r.ident(pm.get("len"), "len"),
                     terminated=terminated, nullable=r.boolean(pm.get("nullable"), "nullable"), string=string,
                     device=r.boolean(pm.get("device"), "device"), fill=_fill(r, pm.get("fill")))


def _fill(r: SpecReader, node: yaml.Node | None) -> tuple[tuple[Name, Name], ...]:
    """``fill: {<member>: <enum constant>}``: what the wrapper sets in an out struct before the call."""
    out = []
    for member, value in r.keyed(node, "struct member"):
        constant = r.ident(value, f"the value of member '{member}'")
        if constant is not None:
            out.append((member, constant))
    return tuple(out)


TYPE_SPELLING = re.compile(r"[A-Za-z0-9_ *]+\Z")  # a C type as rules: spell it: words and '*' (const is a word)


def _rule(r: SpecReader, node: yaml.Node) -> RuleSpec | None:
    """One item of ``rules:`` (its matching is generator/rules.py's)."""
    rm = r.section(node, "library > rules[]", "rule")
    if rm is None:
        return None
    hint = ": use C identifier characters and * ? [ ] globs"
    functions = r.seq(rm.get("functions"), "functions", lambda n: r.string(n, "function pattern", PATTERN, hint))
    types = r.seq(rm.get("types"), "types", lambda n: r.string(
        n, "type", TYPE_SPELLING, ": spell a C type as the header does, ex. 'const float *'"))
    names = r.seq(rm.get("names"), "names", lambda n: r.string(n, "parameter pattern", PATTERN, hint))
    direction = r.string(rm.get("direction"), "direction")
    given = direction is not None
    if direction is not None and direction.value not in DIRECTIONS:
        r.errors.error(direction.location, f"bad direction {direction.value!r}{suggest(direction.value, DIRECTIONS)}; "
                       f"expected one of: {', '.join(DIRECTIONS)}")
        direction = None

    def flag(key: str) -> Name | None:
        node = rm.get(key)
        if node is None or not r.boolean(node, key):
            return None
        return Name(value=key, location=r.loc(node))

    device, nullable = flag("device"), flag("nullable")
    length = r.ident(rm.get("len"), "len")
    if not given and device is None and nullable is None and length is None:
        r.errors.error(r.loc(node), "a rule says nothing of the parameters it matches: give direction: "
                       "(in, out, inout), device: true, nullable: true or len:")
        return None
    return RuleSpec(location=r.loc(node), functions=functions, types=types, names=names, direction=direction,
                    device=device, nullable=nullable, len=length)


NULL_TERMINATED = "null-terminated"  # `len: null-terminated`: an input array that ends with a zero element


ABS_DIR = re.compile(r"(/[A-Za-z0-9_.*+\-]+)+\Z")  # an absolute directory (globs allowed in roots)
REL_DIR = re.compile(r"[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*\Z")


EXTRA_INCLUDE = re.compile(r"sdk:[A-Za-z_][A-Za-z0-9_]*\Z|/?[A-Za-z0-9_.+\-]+(/[A-Za-z0-9_.+\-]+)*\Z")


def _sdk(r: SpecReader, node: yaml.Node | None, display: str) -> tuple[Name | None, SdkSpec | None]:
    """``sdk: kind`` (declared by another spec, or given with --sdk) or ``sdk: {kind: ..., marker: ..., ...}``."""
    if node is None or isinstance(node, yaml.ScalarNode):
        return r.ident(node, "sdk"), None
    m = r.section(node, "library > sdk", "sdk") or {}
    kind = r.ident(m.get("kind"), "sdk kind")
    header = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./\-]*\.h\Z")
    marker = r.string(m.get("marker"), "marker", header, ": expected a header path like 'CL/cl.h'")
    env = r.seq(m.get("env"), "env", lambda n: r.ident(n, "environment variable"))
    roots = r.seq(m.get("roots"), "roots", lambda n: r.string(n, "root", ABS_DIR, ": expected an absolute directory"))
    tools = r.seq(m.get("tools"), "tools", lambda n: r.ident(n, "program"))
    include_dirs = r.seq(m.get("include_dirs"), "include_dirs",
                         lambda n: r.string(n, "include directory", ABS_DIR, ": expected an absolute directory"))
    wheels = []
    if "wheels" in m:
        if not isinstance(m["wheels"], yaml.SequenceNode):
            r.errors.error(r.loc(m["wheels"]), "wheels must be a list of {include: dir, dist: name}")
        else:
            for wn in m["wheels"].value:
                wm = r.section(wn, "library > sdk > wheels[]", "wheel") or {}
                inc = r.string(wm.get("include"), "include", REL_DIR, ": expected a directory under site-packages")
                dist = r.string(wm.get("dist"), "dist", re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*\Z"),
                                ": expected a distribution name")
                if inc is not None and dist is not None:
                    wheels.append(SdkWheel(include=inc.value, dist=dist.value))
    version = SdkVersion()
    if "version" in m:
        vm = r.section(m["version"], "library > sdk > version", "version") or {}
        vheader = r.string(vm.get("header"), "header", header, ": expected a header path")
        macro = r.ident(vm.get("macro"), "macro")
        encoding = _encoding(r, vm.get("encoding")) or ()
        macros = r.seq(vm.get("macros"), "macros", lambda n: r.ident(n, "macro"))
        newest = r.string(vm.get("newest"), "newest", re.compile(r"[A-Za-z0-9_]*\*[A-Za-z0-9_]*\*[A-Za-z0-9_]*\Z"),
                          ": expected a macro name pattern with two '*' (major, minor), ex. CL_VERSION_*_*")
        root_pattern = r.string(vm.get("root_pattern"), "root_pattern")
        if root_pattern is not None:
            try:
                if re.compile(root_pattern.value).groups < 1:
                    r.errors.error(root_pattern.location, "root_pattern needs a group: the version")
            except re.error as e:
                r.errors.error(root_pattern.location, f"root_pattern is not a regular expression: {e}")
        wheel = r.string(vm.get("wheel"), "wheel", re.compile(r"dist\Z|header\Z"), ": expected 'dist' or 'header'")
        given = [k for k in ("macro", "macros", "newest") if k in vm]
        if len(given) > 1:
            r.errors.error(r.loc(m["version"]), f"version: give one of macro, macros or newest, not {' and '.join(given)}")
        if "encoding" in vm and "macro" not in vm:
            r.errors.error(r.loc(vm["encoding"]), "encoding goes with macro")
        version = SdkVersion(header=vheader.value if vheader else None, macro=macro.value if macro else None,
                             encoding=tuple(e for e in encoding if e is not None),
                             macros=tuple(x.value for x in macros), newest=newest.value if newest else None,
                             root_pattern=root_pattern.value if root_pattern else None,
                             wheel_dist=wheel is not None and wheel.value == "dist")
    extra = r.seq(m.get("extra_includes"), "extra_includes", lambda n: r.string(
        n, "include directory", EXTRA_INCLUDE, ": expected sdk:KIND (another SDK's include directory), a directory "
        "relative to this SDK's include directory, or an absolute one"))
    install: list[tuple[str, str]] = []
    if "install" in m:
        im = r.section(m["install"], "library > sdk > install", "install") or {}
        package = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+\-]*([<>=!~]=?[A-Za-z0-9_.*+\-]+)?\Z")
        for manager in ("apt", "pip"):
            for x in r.seq(im.get(manager), manager, lambda n: r.string(n, "package", package,
                                                                         ": expected a package name (pip: a pinned "
                                                                         "requirement allowed, ex. foo==1.2)")):
                install.append((manager, x.value))
    if kind is None or marker is None:
        return kind, None
    return kind, SdkSpec(kind=kind, marker=marker.value, env=tuple(x.value for x in env),
                         roots=tuple(x.value for x in roots), tools=tuple(x.value for x in tools),
                         include_dirs=tuple(x.value for x in include_dirs), wheels=tuple(wheels), version=version,
                         path=display, install=tuple(install), extra_includes=tuple(x.value for x in extra))


# the trait-surface sections of core.yaml, read by ironaccelerator_gen.surface


def load_core(path: Path, display: str | None = None, text: str | None = None) -> CoreSpec:
    """Load ``specs/core.yaml`` (from ``text`` when given)."""
    display = display or path.as_posix()
    _check_display(display)
    root = compose(display, read_spec(path, display) if text is None else text)
    errors = Collector()
    r = SpecReader(display, errors)
    m = r.section(root, "core", "core spec") or {}
    kinds = []
    seen = set()
    values: dict[int, Name] = {}
    duplicates: list[tuple[Name, int, Location]] = []
    for kname, node in r.keyed(m.get("error_kinds"), "error kind"):
        if not re.match(r"[A-Z][A-Z0-9_]*\Z", kname.value):
            errors.error(kname.location, f"error kind '{kname}' must be UPPER_CASE")
        if isinstance(node, yaml.ScalarNode):
            errors.error(r.loc(node), f"error kind {kname} needs 'value' (its ErrorKind integer, stable: a new kind "
                         "takes a new value) and 'doc', not a plain description")
            continue
        km = r.section(node, "core > error_kinds > <KIND>", f"error kind {kname}") or {}
        doc = " ".join((r.scalar(km.get("doc"), f"description of {kname}") or "").split())
        if not doc.isprintable():  # it becomes a docstring: no NUL, control characters or lone surrogates
            errors.error(r.loc(km.get("doc") or node), f"description of {kname} must be printable text")
        value = r.integer(km.get("value"), f"value of {kname}")
        if value is not None and not 1 <= value <= 2**31 - 1:
            errors.error(r.loc(km["value"]), f"value of {kname} must be in 1..2147483647, got {value}")
            value = None
        elif value is not None and value in values:
            duplicates.append((kname, value, r.loc(km["value"])))
            value = None
        if value is not None:
            values[value] = kname
            kinds.append(ErrorKindSpec(name=kname, doc=doc, value=value))
        seen.add(kname.value)
    for kname, value, where in duplicates:
        first = values[value]
        errors.error(where, f"value {value} of {kname} is already {first}'s (declared at {first.location.line}:"
                     f"{first.location.col}); the next free value is {max(values) + 1}")
    if root is None:
        errors.error(Location(file=display, line=1, col=1), "the core spec is empty")
    elif isinstance(m.get("error_kinds"), yaml.MappingNode):
        for required in CORE_KINDS:
            if required not in seen:
                errors.error(r.loc(m["error_kinds"]), f"error_kinds must define {required} "
                             "(the generated run-time support raises it)")
    errors.check()
    bk = m.get("backend_kinds")
    backend_kinds = tuple(k.value for k, _ in bk.value if isinstance(k, yaml.ScalarNode)) \
        if isinstance(bk, yaml.MappingNode) else ()
    return CoreSpec(path=display, error_kinds=tuple(kinds), backend_kinds=backend_kinds)


def check_backends(specs: list[LibrarySpec], core: CoreSpec) -> list[Diagnostic]:
    """Each library's ``backend:`` must be a backend kind of the core spec: it is what ``Error.backend`` says."""
    return [Diagnostic(location=sp.backend.location,
                       message=f"backend '{sp.backend}' is not a backend kind of {core.path}"
                               f"{suggest(sp.backend.value, core.backend_kinds)} (one of "
                               f"{', '.join(core.backend_kinds)}: it names the backend in Error.backend); a new "
                               "kind is appended to backend_kinds: of the core spec first "
                               "(docs/maintainer/adding-a-backend.md)")
            for sp in specs if core.backend_kinds and sp.backend.value not in core.backend_kinds]


def sdk_declarations(specs: list[LibrarySpec]) -> tuple[dict[str, SdkSpec], list[Diagnostic]]:
    """The SDK descriptions the specs declare, by kind; a kind declared twice differently is an error (declare
    it once, and name it by kind elsewhere: ``sdk: cuda``)."""
    out: dict[str, SdkSpec] = {}
    problems: list[Diagnostic] = []
    for sp in specs:
        d = sp.sdk_spec
        if d is None:
            continue
        first = out.get(d.kind.value)
        if first is None:
            out[d.kind.value] = d
        elif replace(first, kind=d.kind, path=d.path) != d:
            problems.append(Diagnostic(location=d.kind.location, message=f"sdk '{d.kind}' is already declared "
                                       f"differently by {first.path}:{first.kind.location.line}; declare it once "
                                       f"and name it elsewhere by kind (sdk: {d.kind})"))
    return out, problems


def check_library_set(specs: list[LibrarySpec], sdk_overrides: Mapping[str, str],
                      known_sdks: Iterable[str]) -> list[Diagnostic]:
    """What no single spec shows: two specs declaring one library (the last silently won), an ``sdk:`` kind
    that no spec declares (``known_sdks``) nor ``--sdk`` supplies (it was "skipped"), and ``--sdk`` entries
    naming a directory that does not exist or a kind no spec uses (silently ignored)."""
    out: list[Diagnostic] = []
    seen: dict[tuple[str, str], LibrarySpec] = {}
    for sp in specs:
        key = (sp.vendor.value, sp.library.value)
        if key in seen:
            out.append(Diagnostic(location=sp.library.location, message=f"library '{sp.vendor}.{sp.library}' is "
                                  f"already declared by {seen[key].path}"))
        else:
            seen[key] = sp
    known = sorted(known_sdks)
    for sp in specs:
        kind = sp.sdk.value
        if sp.declarations is None and kind not in known and kind not in sdk_overrides:
            out.append(Diagnostic(location=sp.sdk.location, message=f"sdk '{kind}' is not an SDK kind that a spec "
                                  f"declares{suggest(kind, known)}; known: {', '.join(known) or 'none'}; declare how "
                                  f"it is found (sdk: {{kind: {kind}, marker: <header>, ...}}) or give its headers "
                                  f"with --sdk {kind}=PATH"))
    used = {sp.sdk.value for sp in specs if sp.declarations is None} | \
        {sp.objc.prototypes.sdk.value for sp in specs if sp.objc is not None and sp.objc.prototypes is not None}
    where = Location(file="--sdk", line=1, col=1)
    for kind, path in sdk_overrides.items():
        if kind not in used:
            out.append(Diagnostic(location=where, message=f"--sdk {kind}: no library spec uses this SDK kind"
                                  f"{suggest(kind, sorted(used))}"))
        elif not Path(path).is_dir():
            what = "not a directory" if Path(path).exists() else "no such directory"
            out.append(Diagnostic(location=where, message=f"--sdk {kind}={path}: {what}"))
    return out
