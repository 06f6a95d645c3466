"""Every key the spec loaders accept, with what it means: the one list the loaders check keys against (generator/spec.py
and generator/surface.py take their allowed and required keys from here) and the reference docs/SPEC_KEYS.md is
rendered from (``python -m ironaccelerator_gen spec-keys``; tests/test_schema.py keeps both in step), so the
reference cannot drift from what the loaders do."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .diagnostics import suggest


@dataclass(frozen=True, slots=True)
class Key:
    name: str
    doc: str  # one or two sentences; `code` in backquotes
    required: bool = False


@dataclass(frozen=True, slots=True)
class Section:
    """A mapping in a spec: where it is (``path``, as a reader finds it) and its keys."""

    path: str  # ex) library > sdk > version
    doc: str
    keys: tuple[Key, ...]


def _k(name: str, doc: str, required: bool = False) -> Key:
    return Key(name=name, doc=doc, required=required)


PLATFORMS = ("linux", "windows", "darwin")


def _resolver_sections() -> tuple[Section, ...]:
    """``library > resolver`` and one section per declared resolver kind with keys, from the runtime's declarations
    (generator/resolvers.py); ``table`` and ``objc``, the generator's own kinds, have theirs below."""
    from . import resolvers

    names = resolvers.names()
    listed = ", ".join(f"`{n}`" for n in names[:-1]) + f" or `{names[-1]}`"
    out = [Section("library > resolver", "How functions are found once the library is open. `kind`: "
                   + listed.replace(f"`{names[0]}`", f"`{names[0]}` (the default)", 1)
                   + "; each kind's own keys are in the sections below.", (_k("kind", f"{listed}.", True),))]
    for kind in resolvers.declared().values():
        if kind.keys:
            out.append(Section(f"library > resolver ({kind.name})", kind.doc,
                               tuple(_k(k.name, k.doc, k.required) for k in kind.keys)))
    return tuple(out)

# Keys the loaders once read and now refuse, each with what replaced it (a located error saying so, not the plain
# "unknown key"): section path -> key -> the message.
RETIRED: dict[str, dict[str, str]] = {
    "core": {"traits": "the trait operations are the public methods of the runtime's base classes "
                       "(runtime/ironaccelerator_runtime/traits/); remove the section"},
    "backend": {"operations": "what a backend implements is derived from what its runtime classes override "
                              "(Backend.supports, `python -m ironaccelerator --json`); remove the section"},
}

SECTIONS: dict[str, Section] = {s.path: s for s in (
    # ------------------------------------------------------------------------------------------ library specs
    Section("library", "A library spec, `specs/<vendor>/<library>.yaml`: one vendor C library (or Objective-C "
            "framework) bound as `ironaccelerator.backends.<vendor>.<library>`.", (
                _k("vendor", "The package the library goes in (`ironaccelerator.backends.<vendor>`): a lower-case "
                   "Python identifier, ex. `cuda`.", True),
                _k("library", "The module name under the vendor, ex. `driver`; unique per vendor (two vendors may "
                   "each have a `runtime`).", True),
                _k("backend", "The backend kind it serves, one of `core.yaml`'s `backend_kinds` (ex. `CUDA`): what "
                   "`Error.backend` says for its failures.", True),
                _k("sdk", "Where `generate` finds the headers: an SDK description (section `library > sdk`), or the "
                   "kind of one another spec describes (ex. `sdk: cuda`). Required unless `frontend: declared`."),
                _k("frontend", "The C front-end: `clang` (default), `pycparser` (both must agree: `make test` checks), "
                   "or `declared` (no header: `declarations:` is it)."),
                _k("headers", "The headers to parse, relative to the SDK's include directory, ex. `[cuda.h]`; the "
                   "first is the SDK's marker unless `sdk.marker` says otherwise. Required unless `frontend: declared`."),
                _k("declarations", "`frontend: declared` only: the C declarations to bind, written from the vendor's "
                   "public documentation (a block scalar; diagnostics point into it)."),
                _k("version_headers", "Headers parsed for version data only, ex. `cudaTypedefs.h` (the `PFN_*_v<N>` "
                   "typedefs that pin each function's ABI)."),
                _k("defines", "Macros defined before parsing (`{NAME: value}`), ex. `__HIP_PLATFORM_AMD__: \"1\"`."),
                _k("undefines", "Predefined macros removed before parsing, ex. `[__SSE__]`."),
                _k("version_macro", "The macro (or list of macros: major, minor) giving the SDK's version, printed in "
                   "the generated banners."),
                _k("bind", "Which declared functions are bound (section `library > bind`)."),
                _k("symbols", "How declared names map to exported symbols (section `library > symbols`)."),
                _k("resolver", "How functions are found once the library is open (section `library > resolver`); "
                   "dlsym when absent."),
                _k("kernel_launch", "The launch function the backend calls from C, shape status (function, grid x, y, z, "
                   "block x, y, z, shared bytes, stream, void **params, void **extra), ex. `cuLaunchKernel`."),
                _k("pool_memory", "The stream-ordered allocator the backend's pool calls from C (section "
                   "`library > pool_memory`)."),
                _k("device_memory", "The device-memory allocator the backend's `Device.alloc` calls from C (section "
                   "`library > device_memory`)."),
                _k("host_copy", "The host copies the backend's streams call from C, between `device_memory` "
                   "allocations and host buffers (section `library > host_copy`)."),
                _k("loader", "Where the shared library is searched for at import (section `library > loader`). "
                   "With `resolver: {kind: objc}` only its directories (the resolver names the libraries).", True),
                _k("errors", "The status type and how its codes map onto `ErrorKind` (section `library > errors`), "
                   "or `errors: none` for a library whose functions report no status (NVTX). Required except with "
                   "`resolver: {kind: objc}`."),
                _k("functions", "Per-function overrides, by public name (section `library > functions > <name>`); "
                   "with `resolver: {kind: objc}`, the framework's plain C functions (section "
                   "`library > functions > <name> (objc)`)."),
                _k("classes", "`resolver: {kind: objc}` only: the Objective-C classes bound and their methods "
                   "(section `library > classes > <name>`)."),
                _k("rules", "A library's conventions, each one line over many parameters (section "
                   "`library > rules[]`), ex. every `float *` named `A`, `B` or `C` of a `cublas*` function is a "
                   "device pointer. A parameter listed under `functions:` is not touched by any rule."),
            )),
    Section("library > sdk", "How `generate` finds an installation providing the headers (generator/sdk.py: the "
            "mechanism; this section: the facts). Declared once per kind; other specs name the kind.", (
                _k("kind", "The SDK kind, ex. `cuda`; `--sdk KIND=PATH` overrides where it is.", True),
                _k("marker", "A header whose presence identifies an include directory of this SDK, ex. `cuda.h`.",
                   True),
                _k("env", "Environment variables each naming an SDK root, ex. `[CUDA_HOME, CUDA_PATH]`."),
                _k("roots", "Root directories (globs allowed) searched after the variables, ex. `[/usr/local/cuda-*]`."),
                _k("tools", "Programs on `PATH` whose `<root>/bin` locates a root, ex. `[nvcc]`."),
                _k("include_dirs", "Include directories searched as they are (distribution packages), ex. "
                   "`[/usr/include]`."),
                _k("wheels", "pip wheels of the running interpreter that carry the headers (section "
                   "`library > sdk > wheels[]`)."),
                _k("version", "How the SDK's version is read (section `library > sdk > version`)."),
                _k("extra_includes", "Further include directories its headers need, searched after its own, ex. "
                   "`[sdk:cuda]` (cuBLAS's headers include the CUDA runtime's): `sdk:KIND` is where that SDK is "
                   "found (`--sdk KIND=PATH` moves it too), a relative directory is under this SDK's include "
                   "directory, an absolute one is as it is."),
                _k("install", "Where to get it (section `library > sdk > install`): named when it is not found and "
                   "`generate --require-sdks` (or `CI=true`) fails."),
            )),
    Section("library > sdk > install", "The package(s) providing the SDK; its install step goes in "
            "scripts/install-system-sdks.sh (apt) or the Makefile's `GEN_SDKS`/`TEST_SDKS` (pip).", (
                _k("apt", "Debian packages, ex. `[opencl-headers]`."),
                _k("pip", "pip requirements, ex. `nvidia-cuda-nvrtc==13.5.37`."),
            )),
    Section("library > sdk > wheels[]", "One pip wheel carrying the headers.", (
                _k("include", "The include directory inside site-packages, ex. `nvidia/cu13/include`.", True),
                _k("dist", "The distribution's name, ex. `nvidia-cuda-nvrtc` (its version is reported).", True),
            )),
    Section("library > sdk > version", "How the SDK's version is read: one of `macro`, `macros` or `newest`.", (
                _k("header", "The header holding the version macro(s), if not the marker."),
                _k("macro", "One integer macro, decoded with `encoding`, ex. `CUDA_VERSION`."),
                _k("encoding", "Divisors turning `macro` into major.minor, ex. `[1000, 10]` (12090 -> 12.9)."),
                _k("macros", "Macros for major, minor (and patch), ex. `[HIP_VERSION_MAJOR, HIP_VERSION_MINOR]`."),
                _k("newest", "A macro pattern with two `*`, ex. `CL_VERSION_*_*`: the highest X.Y among the defined "
                   "macros matching it (a header that defines one per release, as OpenCL's)."),
                _k("root_pattern", "A regular expression with one group reading the version from the root's path, ex. "
                   "`cuda-(\\d+\\.\\d+)`."),
                _k("wheel", "`dist`: a wheel's version is the distribution's own, not the header's."),
            )),
    Section("library > bind", "Which declared functions are bound; a pattern matching nothing is an error.", (
                _k("include", "Glob patterns of function names bound, ex. `[\"cu*\"]`."),
                _k("exclude", "Glob patterns left out of `include`'s matches, ex. `[\"*NvSci*\"]`."),
            )),
    Section("library > symbols", "How a declared function's public name maps to the symbol exported.", (
                _k("per_thread", "Per-thread-default-stream renaming macros and their formats, ex. "
                   "`{__CUDA_API_PTDS: \"{}_ptds\"}`."),
                _k("version_typedef", "The typedef naming a function's ABI version, ex. `PFN_{name}_v{version}`: "
                   "the pin `resolver: proc_address` passes."),
            )),
    *_resolver_sections(),  # the declared kinds' (runtime/ironaccelerator_runtime/resolver_kinds.py)
    Section("library > resolver (table)", "Through a function-pointer table that one exported provider function "
            "lists (QNN's `QnnInterface_getProviders`).", (
                _k("provider", "The exported function: status (const Interface ***list, uint32_t *count).", True),
                _k("interface", "The provider struct's typedef.", True),
                _k("table", "The member path of the function table in it, ex. `v2_40`.", True),
                _k("version", "The member path of its `{major, minor}` API version.", True),
                _k("require", "The API version required (section `library > resolver (table) > require`).", True),
                _k("match", "`{<member path>: <integer>}` the chosen provider must have (ex. a backend id)."),
                _k("prefix", "Removed from a function's name before the default rule `Component_name` -> "
                   "`componentName` names its table field."),
                _k("entries", "`{<function>: <table field>}` where the default rule does not apply."),
                _k("since", "`{<table field>: <minor>}`: the minor version that appended the field (an older "
                   "provider's table is shorter)."),
            )),
    Section("library > resolver (table) > require", "major must be equal, minor at least.", (
                _k("major", "The API major version.", True),
                _k("minor", "The lowest API minor version.", True),
            )),
    Section("library > resolver (objc)", "Objective-C messages through the runtime; the classes are the spec's "
            "`classes:`.", (
                _k("runtime", "`{<platform>: [library, ...]}`: the Objective-C runtime, ex. GNU `libobjc.so.4` or "
                   "Apple's.", True),
                _k("frameworks", "`{<platform>: [library, ...]}`: the frameworks holding the classes, opened in "
                   "order.", True),
                _k("errors", "`{<ErrorKind>: [<NSError domain>[:<code>], ...]}`: how an `NSError` maps to a kind."),
                _k("prototypes", "Where the selectors listed alone take their prototypes from (section "
                   "`library > resolver (objc) > prototypes`)."),
            )),
    Section("library > resolver (objc) > prototypes", "A source of prototypes for the selectors a class lists alone. "
            "`kind: cpp-wrappers`: C++ wrapper headers whose inline methods send each message through selector and "
            "class symbols (`sendMessage<R>(this, <ns>::Private::Selector::s_k<accessor>, args...)`), read with "
            "libclang (generator/frontend/objc_cpp.py); the keys below say what is particular to one such SDK.", (
                _k("kind", "`cpp-wrappers`.", True),
                _k("sdk", "The SDK's name, ex. `metal-cpp`: `--sdk <name>=PATH` gives a copy, `sdks` lists it, the "
                   "generated `SDK_VERSION` is `<name> <version>`.", True),
                _k("marker", "A header (relative to a copy's root) whose presence identifies a copy, ex. "
                   "`Metal/Metal.hpp`; its license notice opens the generated files.", True),
                _k("headers", "The headers parsed, in order (one translation unit).", True),
                _k("env", "An environment variable naming a copy."),
                _k("cache", "Where the build fetches a copy, relative to the generator's root, ex. "
                   "`.venv/sdk/metal-cpp`: searched after `env`."),
                _k("fetch", "The command that fetches a copy, ex. `make metal-cpp` (said when none is found)."),
                _k("version", "How the copy's version is read (section "
                   "`library > resolver (objc) > prototypes > version`); `unknown` without it."),
                _k("defines", "Macros defined for the parse, ex. the one making the selector macros define their "
                   "symbols (`sel_registerName(\"sel:\")`)."),
                _k("namespaces", "`{<C++ namespace>: <C prefix>}`: the namespaces read and the prefix their names "
                   "take in C, ex. `{NS: NS}` (`NS::UInteger` -> `NSUInteger`).", True),
                _k("renamed", "`{<prefixed name>: <C name>}` where the C name is not prefix + C++ name."),
                _k("root_class", "The root class (section `library > resolver (objc) > prototypes > root_class`).",
                   True),
                _k("selector_symbols", "What the selector macro expands to, less the accessor: the enclosing "
                   "classes and the name's prefix, ex. `Private::Selector::s_k` (in each namespace).", True),
                _k("class_symbols", "What the class macro expands to, less the class name, ex. "
                   "`Private::Class::s_k`: a message sent to one is a class method of that class.", True),
                _k("sends", "The functions that send a message `(receiver, selector, args...)`, ex. "
                   "`[sendMessage]`.", True),
                _k("plumbing", "C++ classes of the wrappers' own machinery, whose methods send nothing of their "
                   "own (not reported as passed over)."),
                _k("shims", "`{<header path>: <text>}`: stand-ins for platform headers the wrappers include and this "
                   "machine lacks, written into a temporary include directory for the parse (our own text, "
                   "minimal)."),
            )),
    Section("library > resolver (objc) > prototypes > version", "The copy's version: integer macros joined with "
            "dots.", (
                _k("header", "The header defining them, relative to the copy's root.", True),
                _k("macros", "The macros, major first, ex. `[V_MAJOR, V_MINOR, V_PATCH]`.", True),
            )),
    Section("library > resolver (objc) > prototypes > root_class", "The Objective-C root class and the C++ "
            "classes standing for it.", (
                _k("name", "Its Objective-C name, ex. `NSObject`: the base of a class with no other.", True),
                _k("cxx", "Its C++ class, ex. `NS::Object`.", True),
                _k("templates", "The C++ base templates (in `cxx`'s namespace) whose methods are the root class's, "
                   "ex. `[Object, Referencing]`.", True),
            )),
    Section("library > pool_memory", "The stream-ordered allocator a backend's memory pool calls from C.", (
                _k("alloc", "status (device pointer *out, size_t bytes, pool, stream), ex. `cuMemAllocFromPoolAsync`.",
                   True),
                _k("free", "status (device pointer, stream), ex. `cuMemFreeAsync`.", True),
            )),
    Section("library > device_memory", "The device-memory allocator a backend's `Device.alloc` calls from C (its "
            "memory a C object that frees itself): either `alloc`, which fills an out-pointer, or `create` with "
            "`size`, which returns its handle and reports its status through the `errors` `out_param`.", (
                _k("alloc", "status (device pointer *out, size_t bytes), ex. `cuMemAlloc`, `hipMalloc` (or `create`)."),
                _k("create", "handle (..., size_t bytes, ..., status *out_param), ex. `clCreateBuffer`: returns the "
                   "handle; its other parameters are integers or handles the backend's device gives once, in order, "
                   "when it makes its allocator (or `alloc`)."),
                _k("size", "`create`'s byte-count parameter, by name, ex. `size`; required with `create`."),
                _k("free", "status (device pointer), ex. `cuMemFree`, `hipFree`, `clReleaseMemObject`.", True),
            )),
    Section("library > host_copy", "The host copies a backend's `Stream.copy_from_host` and `copy_to_host` call "
            "from C, between an allocation of the library's `device_memory` and a host buffer, blocking, at offset "
            "0, waiting for nothing; needs `device_memory`.", (
                _k("write", "status (queue, buffer, blocking, offset, size, const void *host, wait count, wait list, "
                   "event *), ex. `clEnqueueWriteBuffer`: host to device.", True),
                _k("read", "the same shape with a writable host pointer, ex. `clEnqueueReadBuffer`: device to host.",
                   True),
            )),
    Section("library > loader", "Where the shared library is searched for at import (each platform's names are "
            "tried in order after the directories below, then by the system loader).", (
                _k("linux", "Library file names on Linux, ex. `[libcuda.so.1, libcuda.so]`. `{major}` in a name is "
                   "the major version of the SDK the bindings are generated from (quoted in a flow list: "
                   "`[\"libamdhip64.so.{major}\", libamdhip64.so]`), so that the library of that SDK is tried first."),
                _k("windows", "DLL names on Windows (`{major}` as for `linux`)."),
                _k("darwin", "Library names on macOS (`{major}` as for `linux`)."),
                _k("wheel_dirs", "Directories inside site-packages (pip wheels) searched first."),
                _k("sdk_dirs", "Directories under each SDK root, ex. `[lib64, lib]`."),
                _k("sdk_env", "Environment variables naming SDK roots."),
                _k("sdk_roots", "SDK roots (globs allowed)."),
                _k("abi_major", "For a library whose ABI (enum values, struct layouts) changes at each major version "
                   "(section `library > loader > abi_major`): once a file is opened, its own version is asked, and "
                   "a file of another major than the headers' is passed over as if it were missing."),
            )),
    Section("library > loader > abi_major", "How an opened library's version is asked (`loader.abi_major`). A "
            "file whose major differs from the SDK's the bindings come from is refused (`LIBRARY_NOT_FOUND`, "
            "saying both versions and to regenerate against that SDK); the next name is tried.", (
                _k("function", "A bound function of the shape status (integer *version), ex. "
                   "`hipRuntimeGetVersion`.", True),
                _k("encoding", "How its number is read: `major = v // e[0]`, `minor = v % e[0] // e[1]`, ex. "
                   "`[10000000, 100000]` for HIP (major * 10^7 + minor * 10^5 + patch).", True),
            )),
    Section("library > errors", "The vendor's status type and how its codes map onto `ErrorKind` (or "
            "`errors: none`). Every code must be mapped, defaulted or a success.", (
                _k("type", "The status type, ex. `CUresult`: functions returning it are checked.", True),
                _k("success", "The codes meaning success, ex. `[CUDA_SUCCESS]`.", True),
                _k("kinds", "`{<ErrorKind>: [code, ...]}`.", False),
                _k("defaulted", "Codes that deliberately take `default`."),
                _k("default", "The kind of every other code, ex. `DRIVER`.", True),
                _k("since", "`{<code>: <version>}`: codes newer than some supported SDKs."),
                _k("name_function", "A bound function giving a code's name (out-parameter or return), ex. "
                   "`cuGetErrorName`."),
                _k("macros", "The codes are negative `#define`s matching these globs (`!glob` excludes), not an "
                   "enum, ex. `[CL_*]` for OpenCL."),
                _k("out_param", "The parameter through which functions returning something else report status, ex. "
                   "`errcode_ret`."),
                _k("codes", "The enum of codes when `type` is a wider integer handle, ex. `Qnn_ErrorCode_t`."),
                _k("mask", "The bits of a status that are its code, ex. `0xffff`."),
                _k("null_handle", "The `ErrorKind` raised, before the call, when NULL is passed for a handle (a "
                   "pointer to an opaque struct) that is not `nullable`, ex. `INVALID_HANDLE` for Vulkan, whose "
                   "loader dereferences its handles; without it NULL is passed on."),
            )),
    Section("library > functions > <name>", "Overrides for one bound function (by public name).", (
                _k("symbol", "The ABI symbol, overriding the header's `#define` rename."),
                _k("status", "Codes returned as results rather than raised, ex. `[CUDA_ERROR_NOT_READY]`."),
                _k("params", "Per-parameter overrides, by name (section `library > functions > <name> > params > "
                   "<param>`)."),
                _k("error_log", "A function(handle) -> str whose output is appended to errors, ex. "
                   "`nvrtcGetProgramLog`."),
                _k("since", "The SDK version that introduced it (an older library: `SYMBOL_NOT_FOUND` naming it)."),
                _k("skip", "`true`: not bound (with a reason in a comment)."),
            )),
    Section("library > functions > <name> > params > <param>", "How one pointer parameter is bound; undeclared "
            "directions are inferred (const: in, else out) and listed by `scaffold --missing`.", (
                _k("direction", "`in`, `out` or `inout`."),
                _k("len", "The parameter holding this array's length (arrays in) or capacity."),
                _k("nullable", "`true`: None passes NULL."),
                _k("string", "An output string or byte buffer (section `... > params > <param> > string`)."),
                _k("device", "`true`: a device address (a pointer or an integer such as `CUdeviceptr`): the checked "
                   "wrapper takes an `Allocation`, a slice or view of one, or an int, and passes the address "
                   "(`INVALID_VALUE` for anything else, another backend's memory or memory with no address)."),
                _k("fill", "`{<member>: <enum constant>}`: members of an out struct that the wrapper sets before the "
                   "call, ex. `{stype: ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES}` (Level Zero's `stype`, Vulkan's "
                   "`sType`: the type tag by which the function knows the struct it fills); the struct is returned."),
            )),
    Section("library > rules[]", "One rule: the parameters it matches (every given key must match) and what it "
            "says of them (`direction`, `device`, `nullable`, `len`: at least one). Each function pattern, type and name "
            "pattern must match a parameter of a bound function, and a parameter may take a key from one rule only: "
            "anything else is an error. Rules do not touch a parameter the spec lists under `functions:`.", (
                _k("functions", "Glob patterns of bound functions' public names, ex. `[\"cublas*\"]`.", True),
                _k("types", "Parameter C types as the header spells them (spaces aside), ex. `[\"float *\", "
                   "\"const float *\"]`."),
                _k("names", "Glob patterns of parameter names, ex. `[A, B, C]`."),
                _k("direction", "`in`, `out` or `inout`, as a parameter's own `direction`."),
                _k("device", "`true`: device pointers, as a parameter's own `device`."),
                _k("nullable", "`true`: None passes NULL, as a parameter's own `nullable`."),
                _k("len", "The parameter holding each matched array's length, as a parameter's own `len` (every "
                   "matched function must have it), ex. OpenCL's `num_events_in_wait_list`."),
            )),
    Section("library > functions > <name> > params > <param> > string", "An output string or binary buffer.", (
                _k("capacity", "The buffer size to pass when no size function exists."),
                _k("length_param", "The parameter receiving the capacity."),
                _k("size_function", "A bound function returning the size first, ex. `nvrtcGetPTXSize`."),
                _k("binary", "`true`: bytes, not str."),
            )),
    Section("library > functions > <name> (objc)", "With `resolver: {kind: objc}`: a plain C function of the "
            "frameworks.", (
                _k("ownership", "`+1` or `+0` for an `id` result (default: the Create/Copy rule)."),
            )),
    Section("library > classes > <name>", "An Objective-C class and the methods bound.", (
                _k("base", "The base class, when its methods are inherited."),
                _k("methods", "Selectors (a list), or a mapping of selector -> overrides (section "
                   "`library > classes > <name> > methods > <selector>`).", True),
            )),
    Section("library > classes > <name> > methods > <selector>", "One method's prototype where no header gives it.", (
                _k("returns", "The C return type."),
                _k("args", "The C argument types, in order."),
                _k("ownership", "`+1` or `+0` for an `id` result."),
                _k("nullable", "`true`: a nil result is returned as None, not raised."),
            )),
    # ------------------------------------------------------------------------------------------- core spec
    Section("core", "`specs/core.yaml`: the vendor-neutral surface.", (
                _k("error_kinds", "`{<KIND>: {value, doc}}`: `ErrorKind`; each value is stable forever.", True),
                _k("backend_kinds", "`{<KIND>: {dlpack_device, doc}}`: `BackendKind`; a library's `backend:` is one."),
                _k("vendors", "`Vendor` members."),
                _k("numeric_classes", "`{<CLASS>: {dlpack_code, doc}}`: `NumericClass`."),
                _k("dtypes", "`{<name>: {size, class, numpy}}`: `DType`."),
                _k("capability_flags", "`{<FLAG>: description}`: `CapabilityFlags`."),
                _k("compute_tiers", "`{<TIER>: description}`: `ComputeTier`."),
                _k("memory_kinds", "`{<KIND>: description}`: `MemoryKind`."),
            )),
    Section("core > error_kinds > <KIND>", "One `ErrorKind`.", (
                _k("value", "Its integer, never changed (a new kind takes a new value).", True),
                _k("doc", "Its description (the docstring).", True),
            )),
    Section("core > backend_kinds > <KIND>", "One `BackendKind`.", (
                _k("dlpack_device", "The DLPack `DLDeviceType` of its memory.", True),
                _k("doc", "Its description."),
            )),
    Section("core > numeric_classes > <CLASS>", "One `NumericClass`.", (
                _k("dlpack_code", "The DLPack `DLDataTypeCode`.", True),
                _k("doc", "Its description."),
            )),
    Section("core > dtypes > <name>", "One `DType`.", (
                _k("size", "Bytes per element.", True),
                _k("class", "Its numeric class.", True),
                _k("numpy", "The equivalent numpy dtype name, where numpy has one."),
            )),
    # ------------------------------------------------------------------------------------------ backend specs
    Section("backend", "A backend spec, `specs/<vendor>/backend.yaml`: the vendor's backend of the core surface.", (
                _k("backend", "Its `BackendKind`.", True),
                _k("vendor", "The vendor package it is generated into.", True),
                _k("class_prefix", "Its classes' prefix, ex. `Cuda` (`CudaDevice`).", True),
                _k("template", "The Jinja template rendering its tables, ex. `backends/gpu.py.j2`.", True),
                _k("runtime", "The hand-written runtime module it subclasses, ex. `gpu` "
                   "(`runtime/ironaccelerator_runtime/backends/gpu/`, a package: `gpu/tables.py`), whose `SPEC_ROLES` say "
                   "which roles it needs."),
                _k("libraries", "The bound libraries it calls, ex. `[cuda.driver, cuda.nvrtc]`."),
                _k("capabilities", "Capability translation, as data (section `backend > capabilities`)."),
                _k("functions", "`{<role>: <function or null>}`: the vendor function of each role the runtime "
                   "calls (roles below), checked against the libraries."),
                _k("constants", "`{<role>: <constant or list OR'd>}`, checked against the libraries' enums and "
                   "macros."),
                _k("types", "`{<role>: <C type>}`."),
                _k("module_formats", "What `Device.load_module` accepts (the generated `MODULE_FORMATS`), each one "
                   "the runtime's `MODULE_FORMATS` names, ex. `[ptx, elf, fatbin, source]`."),
                _k("interop", "Interop protocols exported, ex. `[dlpack, cuda_array_interface]`."),
                _k("soc_models", "`{<name>: {model, arch}}`: SoCs by model, for a matcher that reads them "
                   "(`arch`: one of its keys)."),
            )),
    Section("backend > capabilities", "How a device's numbers become its `Capability`.", (
                _k("flags", "`{<key>: [FLAG, ...]}`: flags by capability key (`always` for all)."),
                _k("tiers", "`{<key>: TIER}`: `default`, `integrated`, `name <token>` or a capability key."),
                _k("vendors", "`{<substring of the device's name>: VENDOR}`, tried in order, and `default: VENDOR` "
                   "for a device none names (else `OTHER`); read by the runtime's one `VendorTable.vendor`."),
                _k("match", "How keys compare with the device: the name of a matcher of "
                   "`ironaccelerator_runtime.capability_match` (default `exact`), which checks the keys' grammar."),
                _k("arch_field", "An option of the matchers that take it: the properties field naming the "
                   "architecture, ex. `gcnArchName`."),
            )),
    Section("backend > soc_models > <name>", "One SoC.", (
                _k("model", "Its model number.", True),
                _k("arch", "Its architecture.", True),
            )),
)}


@dataclass(frozen=True, slots=True)
class Form:
    """One form of a section, told apart by a value in the spec (a library spec with ``frontend: declared``, or
    with ``resolver: {kind: objc}``): the keys it requires instead of the section's required ones, and the keys
    it refuses, each with why (the located error "'<key>' does not go with <name> (<why>)")."""

    name: str  # as a message says it, ex. `frontend: declared`
    required: tuple[str, ...] | None = None  # None: the section's own required keys
    refused: tuple[tuple[str, str], ...] = ()  # (key, why)


_OBJC_TOP = ("methods are the classes: section, C functions the functions: section; NSErrors map to kinds through "
             "the resolver's errors:")
_OBJC_LOADER = ("its runtime: and frameworks: name the libraries; loader: may say where to search: sdk_env, sdk_dirs, "
                "sdk_roots, wheel_dirs")

# The forms of a section where its keys depend on another of its values: section path -> form -> Form (the
# readers in generator/spec.py choose the form; these say what it requires and refuses).
FORMS: dict[str, dict[str, Form]] = {
    "library": {
        "headers": Form("headers", ("vendor", "library", "backend", "sdk", "headers", "loader", "errors")),
        "declared": Form("frontend: declared", ("vendor", "library", "backend", "declarations", "loader", "errors"),
                         tuple((k, "the declarations are the header; there is no SDK to find")
                               for k in ("headers", "sdk", "version_headers"))),
        # the resolver names the libraries; failures are nil results and NSErrors, not status codes
        "objc": Form("resolver kind objc", ("vendor", "library", "backend", "frontend", "declarations", "resolver",
                                            "classes"),
                     tuple((k, _OBJC_TOP) for k in ("errors", "bind", "symbols", "kernel_launch", "pool_memory",
                                                                  "device_memory", "host_copy", "rules"))),
    },
    "library > loader": {
        "objc": Form("resolver kind objc", refused=tuple((p, _OBJC_LOADER) for p in PLATFORMS) + (
            ("abi_major", "it asks a bound C function for the library's version"),)),
    },
}


def keys(path: str) -> tuple[str, ...]:
    """The keys section ``path`` allows (a KeyError for a section not declared here is a generator bug)."""
    return tuple(k.name for k in SECTIONS[path].keys)


def required(path: str, form: str | None = None) -> tuple[str, ...]:
    """The keys section ``path`` requires (in its ``form``, when given: :data:`FORMS`)."""
    given = FORMS[path][form].required if form is not None else None
    return given if given is not None else tuple(k.name for k in SECTIONS[path].keys if k.required)


def variants(path: str) -> tuple[str, ...]:
    """The ``X`` of the sections ``<path> (X)``, in order: ex. the resolver kinds that have keys of their own."""
    prefix = f"{path} ("
    return tuple(p[len(prefix):-1] for p in SECTIONS if p.startswith(prefix) and p.endswith(")")
                 and " > " not in p[len(prefix):])


def unknown_key(key: str, allowed: Sequence[str], what: str) -> str:
    """The message for a key ``what`` does not allow: the closest allowed key, else the list of them."""
    close = suggest(key, allowed)
    return f"unknown key {key!r} in {what}{close}" + ("" if close else f"; expected one of: {', '.join(allowed)}")


def retired_key(key: str, what: str, instead: str) -> str:
    """The message for a key :data:`RETIRED` (``instead``: what replaced it)."""
    return f"{key!r} is no longer a key of the {what}: {instead}"


def refused_key(path: str, form: str, key: str) -> str | None:
    """The message for ``key`` given in section ``path`` of form ``form`` that refuses it; None if it may."""
    f = FORMS[path][form]
    why = dict(f.refused).get(key)
    if why is None:
        return None
    where = path.split(" > ", 1)[1] + ": " if " > " in path else ""
    return f"{where}'{key}' does not go with {f.name} ({why})"


def runtime_roles(runtime: Path) -> dict[str, dict[str, str]]:
    """A hand-written backend runtime's ``SPEC_ROLES`` (section -> role -> the role it is needed with; ``""``:
    always), read without importing it: a module, or a package (the module of it that assigns them)."""
    from .surface import runtime_roles as roles_of

    return roles_of(runtime) or {}


def render_markdown(runtime_dir: Path) -> str:
    """docs/SPEC_KEYS.md: every section and key, then the roles each backend runtime declares."""
    out = ["# Spec keys", "",
           "Generated from `generator/schema.py`, the list the spec loaders check keys against "
           "(`python -m ironaccelerator_gen spec-keys > docs/SPEC_KEYS.md`; `tests/test_schema.py` fails when this "
           "file is stale). **Required** keys are marked; a section is reached through the key named in its path.",
           ""]
    groups = (("Library specs", "library"), ("The core spec", "core"), ("Backend specs", "backend"))
    for title, prefix in groups:
        out += [f"## {title}", ""]
        for s in SECTIONS.values():
            if s.path.split(" ")[0] != prefix:
                continue
            out += [f"### `{s.path}`", "", s.doc, "", "| key | | meaning |", "|---|---|---|"]
            for k in s.keys:
                doc = k.doc.replace("|", "\\|")
                out.append(f"| `{k.name}` | {'**required**' if k.required else ''} | {doc} |")
            out.append("")
    out += ["## Backend roles", "",
            "The `functions:`, `constants:` and `types:` roles a backend spec with `runtime: <name>` fills, from that "
            "runtime's `SPEC_ROLES` (a role listed with another is needed only when that one is given).", ""]
    from .surface import runtime_paths

    for path in runtime_paths(runtime_dir):
        roles = runtime_roles(path)
        if not roles:
            continue
        out += [f"### `runtime: {path.stem}`", ""]
        for section, table in roles.items():
            out += [f"`{section}:`", "", "| role | needed with |", "|---|---|"]
            for role, when in table.items():
                out.append(f"| `{role}` | {f'`{when}`' if when else 'always'} |")
            out.append("")
    from .surface import matchers

    out += ["## Capability matchers", "",
            "What `capabilities: {match: <name>}` may name: the matchers of "
            "`runtime/ironaccelerator_runtime/capability_match.py`, each the grammar of the capability tables' keys "
            "(checked here) and how they compare with a device (at run time).", "",
            "| match | keys | takes |", "|---|---|---|"]
    for m in matchers().values():
        takes = [f"`{o}`" for o in m.options] + [f"`{x}`" for x in m.sections]
        out.append(f"| `{m.name}` | {m.doc.replace('|', chr(92) + '|')} | {', '.join(takes)} |")
    return "\n".join(out).rstrip("\n") + "\n"


def literal_key_tuples(source: str) -> list[int]:
    """Lines of ``source`` calling ``.mapping(node, <tuple literal>, ...)``: keys that bypass this schema."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "mapping":
            if any(isinstance(a, ast.Tuple) and a.elts for a in node.args[1:3]):
                lines.append(node.lineno)
    return lines


__all__ = ["FORMS", "Form", "Key", "PLATFORMS", "SECTIONS", "Section", "keys", "literal_key_tuples", "refused_key",
           "render_markdown", "required", "retired_key", "unknown_key", "variants"]
