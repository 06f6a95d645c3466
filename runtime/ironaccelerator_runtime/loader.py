"""Run-time support shared by every generated library: loading and errors.

A library binding is compiled cffi API mode (``_cffi``: C trampolines that
resolve symbols lazily) when it has been built, otherwise cffi ABI mode (the
pre-parsed ``_cffi_abi`` module, or the cdef parsed at import as a last
resort).  Neither mode needs the vendor library at import time, and both
resolve a function the same way on its first call: through the library's own
resolver (``cuGetProcAddress``) with the function's ABI version pin where the
spec names one, else (or if that fails) ``dlsym`` of its exported symbol; or,
for a library that exports only a provider of function tables, as the entry of
the selected provider's table (never ``dlsym``).
"""

from __future__ import annotations

import _thread
import importlib
import os
import sys
from typing import Any, Callable, Protocol, Sequence

from ironaccelerator._core import ErrorKind

from .errors import Error, fail
from .libpaths import library_candidates as library_candidates  # (re-exported: objc.py, the tests)
# re-exported: the generated bindings import the resolvers from here
from .resolvers import DLSYM as DLSYM, AbiMajor as AbiMajor, ProcAddress as ProcAddress, Resolver as Resolver
from .resolvers import Lookup as Lookup, Scope as Scope, Table as Table

CData = Any  # a cffi cdata object (pointer, handle or struct)

API = "api"
ABI = "abi"

_LIB_MISSING = 1
_SYMBOL_MISSING = 2

REQUIRE_API_ENV = "IRONACCEL_REQUIRE_API"
BUILD_STAMP = ".ironaccel-build"  # generator/build.py's STAMP: the build's key, then the compiled modules it made

# package -> {"module", "backend", "library", "mode" ("api", "abi" or "error"), "reason" (why not API, else None),
# "expected" (ABI mode chosen: an --abi-only build, an import blocked on purpose)}: what `python -m ironaccelerator`
# reports for each library module imported in this process
MODES: dict[str, dict[str, Any]] = {}
_WARNED: set[str] = set()


def _compiled_files(here: str) -> list[str]:
    try:
        names = os.listdir(here)
    except OSError:
        return []
    return sorted(n for n in names if n.startswith("_cffi.") and n.endswith((".so", ".pyd")))


def why_not_api(package: str, here: str, exc: ImportError) -> tuple[str, bool]:
    """Why ``package``'s compiled cffi module (``_cffi``) did not import: (the reason, whether ABI mode is
    expected there).  Expected: a build made ABI-only on purpose (``ironaccel-gen build --abi-only``: its stamp
    lists no compiled module) or an import blocked on purpose (``sys.modules[...] = None``)."""
    import importlib.machinery

    name = package + "._cffi"
    if name in sys.modules and sys.modules[name] is None:
        return "its compiled module's import is blocked (sys.modules entry None)", True
    files = _compiled_files(here)
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    ours = [f for f in files if any(f == "_cffi" + s for s in suffixes)]
    if ours:
        return f"its compiled module {ours[0]} does not load ({exc})", False
    if files:
        return (f"its compiled module {files[0]} was built for another interpreter (this one, "
                f"{sys.implementation.cache_tag}, loads _cffi{suffixes[0]})"), False
    try:
        with open(os.path.join(here, BUILD_STAMP), encoding="utf-8") as fh:
            stamp = [line for line in fh.read().splitlines() if line]
    except (OSError, UnicodeDecodeError):
        stamp = []
    if len(stamp) == 1:
        return "it was built ABI-only (ironaccel-gen build --abi-only)", True
    return "its compiled module is missing (not built, or its C compile failed)", False


def abi_fallback(package: str, backend: str, library: str, here: str, exc: ImportError) -> None:
    """Record that ``package`` runs in ABI mode and why; warn once (a ``RuntimeWarning`` naming the module, the
    reason and the fix) where that is not expected; with ``IRONACCEL_REQUIRE_API=1``, raise ImportError instead;
    with ``IRONACCEL_REQUIRE_API=0``, accept ABI mode without a warning (a test of ABI mode, a machine with no
    compiler on purpose)."""
    reason, expected = why_not_api(package, here, exc)
    require = os.environ.get(REQUIRE_API_ENV, "")
    expected = expected or require == "0"  # IRONACCEL_REQUIRE_API=0: ABI mode accepted, no warning
    entry = {"module": package, "backend": backend, "library": library, "mode": ABI, "reason": reason,
             "expected": expected}
    MODES[package] = entry
    fix = "run `ironaccel-gen build` (python -m ironaccelerator_gen build) with this interpreter"
    if require not in ("", "0"):
        entry["mode"] = "error"
        raise ImportError(f"{package}: API mode required ({REQUIRE_API_ENV}={os.environ[REQUIRE_API_ENV]}) but "
                          f"{reason}; {fix}", name=package) from exc
    if not expected and package not in _WARNED:
        _WARNED.add(package)
        import warnings

        warnings.warn(f"{package} runs in cffi ABI mode, about 10x slower per call than API mode: {reason}; {fix} "
                      f"(set {REQUIRE_API_ENV}=1 to make this an error)", RuntimeWarning, stacklevel=2)


def api_loaded(package: str, backend: str, library: str) -> None:
    MODES[package] = {"module": package, "backend": backend, "library": library, "mode": API, "reason": None,
                      "expected": False}


class Loadable(Protocol):
    """What :func:`load_module` reads of a binding (:class:`Binding`, or ``objc.ObjcBinding``)."""

    package: str
    build_id: str
    backend: str
    library: str


def load_module(binding: Loadable, opener: Callable[[Any], bool],
                abi_lib: Callable[[Any], Any]) -> tuple[str, Any, Any]:
    """The cffi module of a generated library, C or Objective-C alike: ``(mode, ffi, lib)``.

    API mode: the compiled ``<package>._cffi``, whose ``ia_open_library`` (called from C on the first call of any
    function or message) runs ``opener(lib)``, True when the library (or runtime and frameworks) opened.  Else ABI
    mode (:func:`abi_fallback` records why): the pre-parsed ``<package>._cffi_abi`` (or, with nothing built, the
    cdefs beside the package, parsed now) and ``abi_lib(ffi)``, the binding's ABI-mode library object.  Either
    built module must carry ``binding.build_id`` (:func:`check_build`)."""
    here = list(sys.modules[binding.package].__path__)[0]
    try:
        mod = importlib.import_module(binding.package + "._cffi")
    except ImportError as exc:
        abi_fallback(binding.package, binding.backend, binding.library, here, exc)
    else:
        package = sys.modules[binding.package]
        if getattr(package, "_cffi", None) is not mod:  # (one loaded ahead of its package, by the OpenCL early
            setattr(package, "_cffi", mod)  # start, is found in sys.modules: the import did not make it an attribute)
        ffi, lib = mod.ffi, mod.lib
        built = getattr(lib, "ia_build_id", None)
        check_build(binding, mod, ffi.string(built()).decode() if built is not None else None)
        api_loaded(binding.package, binding.backend, binding.library)

        def _open() -> int:
            try:
                return 0 if opener(lib) else 1
            except BaseException:  # never let an exception cross into C
                return 1

        ffi.def_extern(name="ia_open_library")(_open)
        realize_types(ffi, lib)
        return API, ffi, lib
    try:
        abi = importlib.import_module(binding.package + "._cffi_abi")
    except ImportError:  # nothing built: the cdefs beside the package, parsed now
        cffi = importlib.import_module("cffi")
        ffi = cffi.FFI()
        ffi.cdef("".join(open(os.path.join(here, name), encoding="utf-8").read()
                         for name in ("types.cdef", "abi.cdef")))
    else:
        check_build(binding, abi, getattr(abi, "BUILD_ID", None))
        ffi = abi.ffi
        realize_types(ffi, None)
    return ABI, ffi, abi_lib(ffi)


def realize_types(ffi: Any, lib: Any) -> None:
    """Build every C type of a compiled cffi module now, while its import holds the import lock.

    cffi builds them lazily, on first use, and that is not thread-safe: a garbage collection while one thread
    builds an enum, a struct or a function's type may run a finalizer that lets another thread in, which builds the
    same type; cffi then aborts the process (an assertion on the type's slot) or completes a struct twice.  Four
    threads' first launches on one Vulkan device did it in CI (tests/test_types_realized.py forces the race on every
    generated module).  Built here, each type is found ready by every later use.  The typedefs (enums, handles,
    function pointers), every struct and union's fields, and in API mode every function's type (``lib``: the
    function objects are made and kept; calling none opens the library).  An ABI-mode ``lib`` (``_LazyLib``) is
    passed as None: it builds a function's type when it resolves the function, one resolution at a time.  Takes
    ~0.1 ms (OpenCL) to ~9 ms (Vulkan), once per process."""
    typedefs, structs, unions = ffi.list_types()
    typeof, sizeof = ffi.typeof, ffi.sizeof
    for name in typedefs:
        typeof(name)
    for tag, names in (("struct ", structs), ("union ", unions)):
        for name in names:
            t = typeof(tag + name)
            try:
                sizeof(t)  # (an opaque one has no size, and no fields to build)
            except (ffi.error, TypeError, ValueError):
                continue
            t.fields  # (completes the lazy field list)
    if lib is not None:
        for name in dir(lib):
            getattr(lib, name)


def check_build(binding: Loadable, module: Any, built: str | None) -> None:
    """Refuse a built module made from other generated sources than these (``generate`` after ``build``):
    cffi would fail later, and less clearly, on the first function the two disagree about."""
    if built != binding.build_id:
        MODES[binding.package] = {"module": binding.package, "backend": binding.backend,
                                  "library": binding.library, "mode": "error", "expected": False,
                                  "reason": f"{getattr(module, '__file__', module)} is stale (`build` before "
                                            "`generate`)"}
        raise ImportError(f"{binding.package}: {getattr(module, '__file__', module)} was built from other "
                          f"generated sources (build {built or 'without an id'}, sources {binding.build_id}): "
                          "`generate` ran after `build`; run `python -m ironaccelerator_gen build` "
                          "(or `make generate`)", name=binding.package)


class Binding:
    """The loaded form of one vendor library: its cffi ``ffi``/``lib`` and how to report failures."""

    def __init__(self, *, package: str, build_id: str, backend: str, library: str,
                 functions: Sequence[tuple[str, str, str | None, str | None]],
                 names: dict[str, tuple[str, ...]], wheel_dirs: Sequence[str] = (), sdk_dirs: Sequence[str] = (),
                 sdk_env: Sequence[str] = (), sdk_roots: Sequence[str] = (), errors: dict[int, tuple[str, ErrorKind]],
                 sentinel: int, sdk_version: str, resolver: Resolver = DLSYM, error_mask: int = 0,
                 abi_major: AbiMajor | None = None, null_handle: ErrorKind | None = None) -> None:
        self.package = package
        self.build_id = build_id
        self.backend = backend
        self.library = library
        self.functions = tuple(functions)  # (public, symbol, per-thread symbol, minimum version)
        self.index = {f[0]: i for i, f in enumerate(self.functions)}
        self.loader = (names, tuple(wheel_dirs), tuple(sdk_dirs), tuple(sdk_env), tuple(sdk_roots))
        self.errors = errors
        self.sentinel = sentinel
        self.null_kind = null_handle  # errors.null_handle: the kind of a NULL handle not declared nullable
        self.error_mask = error_mask  # the bits of a status that are its code (errors.mask; 0: all)
        self.sdk_version = sdk_version
        self.resolver = resolver
        self.pins = tuple(resolver.pins.get(f[0], 0) for f in self.functions)  # by index; 0: dlsym only
        self.path: str | None = None  # the library file that was loaded
        self.tried: list[str] = []
        self.abi_major = abi_major
        self.refused: list[str] = []  # files opened but passed over by abi_major: "path (version 6.2)"
        self.chosen: tuple[str, ...] = ()  # use_library(): the only candidates, replacing the spec's search
        self.per_thread = False
        self.name_function: Callable[[int], str] | None = None
        self.opening: list[Callable[[Binding], None]] = []  # before_open(): run once, just before the first open
        self.opening_error: BaseException | None = None  # what one of them raised: the library is then not opened
        self.mode, self.ffi, self.lib = self._load_module()

    # ------------------------------------------------------------ modes
    def _load_module(self) -> tuple[str, Any, Any]:
        return load_module(self, self._open_api, lambda ffi: _LazyLib(self, ffi))

    def candidates(self) -> list[str]:
        if self.chosen:
            return list(self.chosen)
        return library_candidates(*self.loader)

    def use_library(self, *paths: str | os.PathLike[str]) -> None:
        """Load this library from ``paths`` (files or names for the system loader, tried in order; str or
        ``os.PathLike``) instead of the spec's search: another build of the same API (ex: QNN's libQnnSaver.so
        for libQnnHtp.so, which share one function table).  Only before the library is opened: one library
        file per process."""
        files = [os.fspath(p) if isinstance(p, os.PathLike) else p for p in paths]
        chosen = tuple(f for f in files if isinstance(f, str) and f)
        if not files or len(chosen) != len(files):
            raise fail(ErrorKind.INVALID_VALUE, "use_library", f"give one or more library paths, not {paths!r}",
                       self.backend)
        if self.path is not None and self.path not in chosen:
            raise fail(ErrorKind.INVALID_VALUE, "use_library", f"the {self.backend} {self.library} library is "
                       f"already loaded from {self.path}; a process binds one file (choose before the first call)",
                       self.backend)
        self.chosen = chosen
        if self.mode == ABI:
            self.lib._failed = False  # a failed search before this choice is not this choice's failure

    def before_open(self, hook: Callable[[Binding], None]) -> bool:
        """Run ``hook(self)`` once, just before the library is first opened (the first call of a function, in
        either mode), where it may still choose the file (:meth:`use_library`).  False, and nothing registered,
        when the library is already open.  If a hook raises, the library is not opened and every call raises
        what it raised (an :class:`Error`; anything else as LIBRARY_NOT_FOUND naming it)."""
        if self.path is not None:
            return False
        self.opening.append(hook)
        return True

    def _run_opening(self) -> bool:
        """The :meth:`before_open` hooks, each once; False when one failed (then always False)."""
        while self.opening and self.opening_error is None:
            hook = self.opening.pop(0)
            try:
                hook(self)
            except BaseException as exc:  # also from inside C (API mode): never let it cross into C
                self.opening_error = exc
        return self.opening_error is None

    def _open_api(self, lib: Any) -> bool:
        if not self._run_opening():
            return False
        self.tried, self.refused = [], []
        for path in self.candidates():
            if lib.ia_dlopen(path.encode()) == 0:
                # (the trampoline finds the file just opened: it does not call back to open one)
                if self._accepts(path, self.ffi.addressof(lib, self.abi_major.function) if self.abi_major else None):
                    self.path = path
                    return True
                lib.ia_dlforget()
                continue
            self.tried.append(f"{path} ({self.ffi.string(lib.ia_dlerror()).decode(errors='replace')})")
        return False

    def _accepts(self, path: str, version_fn: Any) -> bool:
        """Whether the file just opened at ``path`` may be used: always, but with ``abi_major``, whose function
        (``version_fn``, resolved in that file) must report the headers' major; else it is listed in ``tried``
        and ``refused``.  A refused file stays mapped (a runtime that started threads may not unload safely);
        the binding forgets it."""
        a = self.abi_major
        found = a.version(self.ffi, version_fn) if a is not None else None
        if a is None or found is None or found[0] == a.major:
            return True
        self.refused.append(f"{path} (version {found[1]})")
        self.tried.append(f"{path} (version {found[1]} from {a.function}: major {found[0]}, not the headers' "
                          f"{a.major})")
        return False

    # ------------------------------------------------------------ queries
    def status(self, index: int) -> int:
        """0 when the function can be called, else why not (library or symbol missing)."""
        if self.mode == API:
            return int(self.lib.ia_status(index))
        st: int = self.lib._status(index)
        return st

    def has(self, name: str) -> bool:
        """Whether the loaded library provides ``name`` (loads the library if needed; never raises)."""
        i = self.index.get(name)
        return i is not None and self.status(i) == 0

    def set_per_thread_default_stream(self, enabled: bool) -> None:
        """Bind the per-thread-default-stream variants (``_ptds``/``_ptsz``) instead of the legacy stream ones."""
        self.per_thread = bool(enabled)
        if self.mode == API:
            self.lib.ia_set_per_thread(1 if enabled else 0)
        else:
            self.lib._reset()

    def symbol(self, index: int) -> str:
        public, symbol, pts, _ = self.functions[index]
        return pts if self.per_thread and pts else symbol

    # ------------------------------------------------------------ errors
    def load_error(self, index: int) -> Error | None:
        """The loader failure behind a call of function ``index``, if there was one."""
        st = self.status(index)
        public, _, _, minimum = self.functions[index]
        if st == _LIB_MISSING and self.opening_error is not None:
            exc = self.opening_error
            return exc if isinstance(exc, Error) else fail(
                ErrorKind.LIBRARY_NOT_FOUND, public, f"the {self.backend} {self.library} library was not opened: "
                f"a hook run before opening it failed: {type(exc).__name__}: {exc}", self.backend)
        if st == _LIB_MISSING and self.refused:
            a = self.abi_major
            assert a is not None
            env = self.loader[3]
            where = f" (found through {' or '.join(env)})" if env else ""
            return fail(ErrorKind.LIBRARY_NOT_FOUND, public, f"cannot use the {self.backend} {self.library} "
                        f"library: these bindings were generated from {self.backend} {self.sdk_version} headers, "
                         f"but the library found is {', '.join(self.refused)}, and another major version has other "
                         "enum values and struct layouts: run `make generate` against that library's SDK"
                        f"{where}, or install a {self.backend} {a.major}.x library; tried {'; '.join(self.tried)}",
                        self.backend)
        if st == _LIB_MISSING:
            tried = "; ".join(self.tried) or "no candidates for this platform"
            return fail(ErrorKind.LIBRARY_NOT_FOUND, public, f"cannot load the {self.backend} {self.library} library: "
                        f"tried {tried}", self.backend)
        if st == _SYMBOL_MISSING and (err := self.resolver.missing(self, index)) is not None:
            return err
        if st == _SYMBOL_MISSING:
            need = f"; it needs {self.backend} {self.library} {minimum} or newer" if minimum else ""
            return fail(ErrorKind.SYMBOL_NOT_FOUND, public, f"{self.path} does not export {self.symbol(index)}{need}",
                        self.backend)
        return None

    def error(self, code: int, index: int, detail: str = "") -> Error:
        """Build the :class:`Error` for status ``code`` returned by function ``index``."""
        if code == self.sentinel:
            err = self.load_error(index)
            if err is not None:
                return err
        public = self.functions[index][0]
        name, kind = self.errors.get(code & self.error_mask if self.error_mask else code, (None, ErrorKind.UNKNOWN))
        vendor = None
        if self.name_function is not None:
            try:
                vendor = self.name_function(code)
            except Exception:
                vendor = None
        label = vendor or name or "an unknown status"
        if name and vendor and vendor != name and not vendor.startswith(name + ":"):
            label = f"{name}: {vendor}"  # (QNN's messages begin with the name themselves: not said twice)
        message = f"{public} failed with {label} ({code})"
        if detail:
            message += "\n" + detail
        return fail(kind, public, message, self.backend, code=code)  # (begins with the function: no prefix added)

    def error_with_log(self, code: int, index: int, log: Callable[..., Any], *args: Any) -> Error:
        """:meth:`error` with ``log(*args)`` (a compile log) as its detail: a fast path's ``error_log``."""
        return self.error(code, index, detail(log, *args))

    def invalid(self, index: int, message: str) -> Error:
        """The INVALID_VALUE :class:`Error` a checked wrapper of function ``index`` raises itself (arrays whose
        lengths differ): what its compiled fast path raises too."""
        return Error(ErrorKind.INVALID_VALUE, message, function=self.functions[index][0], backend=self.backend)

    def null_handle(self, index: int, param: str) -> Error:
        """The :class:`Error` a checked wrapper of function ``index`` raises itself when NULL is passed for its
        handle ``param`` (a spec's ``errors.null_handle``; the library would dereference it): what its compiled
        fast path raises too."""
        return fail(self.null_kind or ErrorKind.INVALID_HANDLE, self.functions[index][0],
                    f"{param} is NULL: pass a valid handle (a {self.backend} handle this function dereferences)",
                    self.backend)

    def device_pointer(self, index: int, param: str, value: Any, ctype: str | None, nullable: bool = False) -> Any:
        """The C argument of function ``index``'s device-pointer parameter ``param`` (a spec's ``device: true``):
        the address of an Allocation, a slice or view of one, or an int (ironaccelerator_runtime.device_pointers
        says what each takes), cast to ``ctype`` (the parameter's pointer type; None: an integer type such as
        ``CUdeviceptr``, passed as the int).  Raises ``Error(INVALID_VALUE)`` for anything else
        (``INVALID_HANDLE`` for freed memory)."""
        from .device_pointers import device_address  # (not at import: only libraries with device pointers use it)

        address = device_address(value, self.functions[index][0], param, self.backend, nullable)
        if not isinstance(address, int):
            raise address
        return address if ctype is None else self.ffi.cast(ctype, address)

    def raise_error(self, code: int, index: int) -> None:
        raise self.error(code, index)

    def require(self, index: int) -> None:
        """Raise the loader error for function ``index`` if it cannot be called."""
        err = self.load_error(index)
        if err is not None:
            raise err


class _LazyLib:
    """ABI mode: opens the library on first use and resolves functions by public name, caching them.

    A function resolves as in the trampolines (``ia_resolve``): through the resolver with its pin, else
    ``dlsym`` of its (per-thread) symbol.  The result -- a cdata function pointer, called like the
    ``ffi.dlopen`` library's own attributes -- is cached as an attribute, so later calls do no Python work.
    """

    def __init__(self, binding: Binding, ffi: Any) -> None:
        self._binding = binding
        self._ffi = ffi
        self._dl: Any = None
        self._failed = False
        self._fns: list[Any] = [None] * len(binding.functions)  # by index: resolved (None: not yet, or missing)
        self._proc: Any = None  # the resolver's cdata function, looked up (with dlsym) once
        self._proc_looked_up = False
        # one resolution at a time: cffi builds a function's C type on its first lookup in the library, which is
        # not thread-safe (realize_types; reentrant: a collection may run a finalizer that resolves another)
        self._resolving = _thread.RLock()  # (_thread: the OpenCL early start imports no threading)

    def _open(self) -> Any:
        if self._dl is None and not self._failed:
            b = self._binding
            if not b._run_opening():
                return None
            b.tried, b.refused = [], []
            for path in b.candidates():
                try:
                    dl = self._ffi.dlopen(path)
                except OSError as exc:
                    b.tried.append(f"{path} ({exc})")
                    continue
                self._dl = dl
                a = b.abi_major
                if b._accepts(path, self._dlsym(b.functions[b.index[a.function]][1]) if a else None):
                    b.path = path
                    break
                self._dl = None  # (kept mapped: see Binding._accepts)
            else:
                self._failed = True
        return self._dl

    def _dlsym(self, symbol: str) -> Any:
        try:
            return getattr(self._dl, symbol)
        except Exception:  # AttributeError, or ffi.error from the in-line FFI: both mean "not exported"
            return None

    def _resolve(self, index: int) -> Any:
        """``index``'s cdata function (resolver, then dlsym), or None when the library or the symbol is missing."""
        fn = self._fns[index]
        if fn is None:
            with self._resolving:
                fn = self._fns[index]
                if fn is None and self._open() is not None:
                    b = self._binding
                    fn = b.resolver.resolve(self, index)
                    if fn is None and b.resolver.dlsym(b.functions[index][0]):
                        fn = self._dlsym(b.symbol(index))
                    self._fns[index] = fn
        return fn

    def _status(self, index: int) -> int:
        if self._open() is None:
            return _LIB_MISSING
        return 0 if self._resolve(index) is not None else _SYMBOL_MISSING

    def _reset(self) -> None:
        self._fns = [None] * len(self._binding.functions)
        for public, *_ in self._binding.functions:
            self.__dict__.pop(public, None)

    def __getattr__(self, name: str) -> Any:
        b = self._binding
        index = b.index.get(name)
        if index is None:
            raise AttributeError(name)
        fn = self._resolve(index)
        if fn is None:
            err = b.load_error(index)
            raise err if err is not None else AttributeError(name)
        setattr(self, name, fn)
        return fn


def c_array(ffi: Any, ctype: str, items: Sequence[Any] | None, keep: list[Any], terminated: bool = False) -> Any:
    """A C array of ``ctype`` from a Python sequence; strings become ``char *`` kept alive in ``keep``.
    ``terminated``: one zero element (0, NULL) after the items (a spec's ``len: null-terminated``)."""
    if items is None:
        return ffi.NULL
    values = []
    for x in items:
        if isinstance(x, str):
            x = x.encode()
        if isinstance(x, bytes):
            buf = ffi.new("char[]", x)
            keep.append(buf)
            x = buf
        values.append(x)
    if terminated:
        arr = ffi.new(f"{ctype}[]", len(values) + 1)  # zero-filled: the last element is the terminator
        for i, x in enumerate(values):
            arr[i] = x
    else:
        arr = ffi.new(f"{ctype}[]", values)
    keep.append(arr)
    return arr


# ------------------------------------------------ what a backend does to use a library (one helper for every backend)


def require_function(binding: Binding, function: str, missing: str) -> None:
    """Raise unless ``binding``'s ``function`` can be called: the loader's error (``LIBRARY_NOT_FOUND`` naming the
    files tried, ``SYMBOL_NOT_FOUND``...), else ``Error(LIBRARY_NOT_FOUND, missing)``."""
    if not binding.has(function):
        raise binding.load_error(binding.index[function]) or fail(
            ErrorKind.LIBRARY_NOT_FOUND, function, missing, binding.backend)


def load_library(package: str, function: str | None = None, missing: str = "") -> tuple[Any, Any]:
    """A backend's generated library module ``package`` (``ironaccelerator.backends.opencl.cl``) and its binding,
    usable: ``function`` (the first one the backend calls) checked by :func:`require_function`, or, without one,
    the binding loaded as a whole (the Objective-C family's ``ready()``: the runtime and frameworks)."""
    module, binding = importlib.import_module(package), importlib.import_module(package + "._binding").BINDING
    if function is None:
        binding.ready()
    else:
        require_function(binding, function, missing)
    return module, binding


# ------------------------------------------------ what every generated library module does at import


def detail(fn: Callable[..., Any], *args: Any) -> str:
    """``str(fn(*args))`` for an error's detail (a compile log), or why there is none: the log is a courtesy and
    never masks the original error."""
    try:
        return str(fn(*args))
    except Exception as exc:
        return f"(no log: {exc})"


def bind_functions(namespace: dict[str, Any], binding: Binding) -> None:
    """Set ``_f_<name>`` in a generated library module's ``namespace`` for each of its functions (what the
    checked wrappers call): API mode, the compiled cffi function, looked up once here; ABI mode, a stand-in
    that resolves the function through the lazy library on its first call (resolver with the function's
    pin, else dlsym; the loader's error if neither finds it) and puts it in its own place."""
    lib = binding.lib
    if binding.mode == API:
        for name, *_ in binding.functions:
            namespace["_f_" + name] = getattr(lib, name)
        return

    def first_call(name: str) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            fn = getattr(lib, name)
            namespace["_f_" + name] = fn
            return fn(*args)
        return call

    for name, *_ in binding.functions:
        namespace["_f_" + name] = first_call(name)


def switch_per_thread(namespace: dict[str, Any], binding: Binding, unchecked: Any, enabled: bool) -> None:
    """A library module's ``set_per_thread_default_stream``: bind the ``_ptds``/``_ptsz`` symbols (or the
    legacy ones again); ABI mode resolves what it had resolved under the other symbols again."""
    binding.set_per_thread_default_stream(enabled)
    if binding.mode != API:
        bind_functions(namespace, binding)
        for name, *_ in binding.functions:
            unchecked.__dict__.pop(name, None)


def install_fast(namespace: dict[str, Any], binding: Binding, module: str) -> tuple[Any, dict[str, Any]]:
    """API mode: replace the Python checked wrappers in ``namespace`` by the compiled ones of the cffi module's
    ``_fast`` submodule (``ia_install_fast``; trampolines.c).  Returns (the ``_fast`` module or None, the
    Python wrappers it replaced by name: what ABI mode runs, kept for tests and benchmarks)."""
    lib = binding.lib
    if binding.mode != API or getattr(lib, "ia_install_fast", None) is None or lib.ia_install_fast() != 0:
        return None, {}
    fast = sys.modules.get(module + "._fast")
    if fast is None:
        return None, {}
    python = {name: namespace[name] for name in vars(fast) if not name.startswith("_") and name in namespace}
    namespace.update({name: getattr(fast, name) for name in python})
    return fast, python
