"""Resolvers: how a generated library binding finds each function of the opened library before (or instead of)
``dlsym`` of its exported symbol, as its spec's ``resolver:`` section says: ``dlsym`` (:data:`DLSYM`), the library's
own address lookup (:class:`ProcAddress`, ex. ``cuGetProcAddress``), its lookup by name (:class:`Lookup`, ex.
``vkGetInstanceProcAddr``, which the runtime may also bind to a handle: :class:`Scope`), or the entries of a provider's function table
(:class:`Table`); and :class:`AbiMajor`, the check that an opened library's ABI major is the one bound.

Each kind is declared, with its spec keys, their C shapes and its C, in :mod:`.resolver_kinds` (``KINDS``), which
names the class here that ABI mode instantiates (``python``); the generator reads that declaration, so a new kind
is a declaration, a class and its C, with no generator edit.

The generated bindings import these names from :mod:`ironaccelerator_runtime.loader`, which re-exports them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ironaccelerator._core import ErrorKind

from .errors import Error, fail

if TYPE_CHECKING:
    from .loader import Binding, _LazyLib


class Resolver:
    """How ABI mode finds a function of an opened library, before ``dlsym`` of its symbol: a library spec's
    ``resolver: {kind: ...}``.  The C twin is ia_runtime.h's IA_RESOLVER (API mode); both resolve alike.

    ``kind`` ``dlsym`` (this class: nothing before dlsym); :class:`ProcAddress` for ``proc_address``;
    :class:`Lookup` for ``lookup``; :class:`Table` for ``table`` (a provider's function table, and no dlsym but of the provider).
    """

    kind = "dlsym"
    pins: dict[str, int] = {}  # public name -> ABI version the resolver is asked for

    def resolve(self, lib: _LazyLib, index: int) -> Any:
        """``index``'s cdata function, or None to fall back to dlsym of its symbol."""
        return None

    def dlsym(self, public: str) -> bool:
        """Whether function ``public`` may come from dlsym of its symbol (when :meth:`resolve` has nothing)."""
        return True

    def missing(self, binding: Binding, index: int) -> Error | None:
        """The error for function ``index`` when the library is open but the function was not found; None: the
        usual one (the library does not export its symbol)."""
        return None

    @staticmethod
    def finder(lib: _LazyLib, public: str) -> Any:
        """The resolver's own function ``public`` (a bound function, ex. ``cuGetProcAddress``), dlsym'ed once per
        opened library and kept there; None where the library does not export it."""
        if not lib._proc_looked_up:
            b = lib._binding
            lib._proc = lib._dlsym(b.functions[b.index[public]][1])
            lib._proc_looked_up = True
        return lib._proc


DLSYM = Resolver()


class ProcAddress(Resolver):
    """``proc_address``: the library's own resolver (``cuGetProcAddress``):
    ``resolver(public name, &fn, pins[name], flags[, &status])``; the flags are ``per_thread_flag`` after
    ``set_per_thread_default_stream(True)``, else ``default_flag`` (as ia_runtime.h's ``ia_via_proc``).
    Functions without a pin, and the resolver itself, come from dlsym."""

    kind = "proc_address"

    def __init__(self, *, resolver: str, default_flag: int, per_thread_flag: int, pins: dict[str, int]) -> None:
        self.resolver = resolver  # ex) cuGetProcAddress: a bound function, itself always resolved with dlsym
        self.default_flag = default_flag  # ex) CU_GET_PROC_ADDRESS_DEFAULT
        self.per_thread_flag = per_thread_flag  # ex) CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
        self.pins = pins  # ex) {"cuCtxCreate": 12050}

    def resolve(self, lib: _LazyLib, index: int) -> Any:
        b = lib._binding
        pin = b.pins[index]
        if pin <= 0:
            return None
        proc = self.finder(lib, self.resolver)
        if proc is None:
            return None
        ffi = lib._ffi
        args = ffi.typeof(proc).args  # (const char *, void **, int, flags[, status *])
        fp = ffi.new(args[1])
        status = (ffi.new(args[4]),) if len(args) > 4 else ()
        flags = self.per_thread_flag if b.per_thread else self.default_flag
        if proc(b.functions[index][0].encode(), fp, pin, flags, *status) != 0 or fp[0] == ffi.NULL:
            return None
        return ffi.cast(f"ia_pfn_{index}", fp[0])  # typedef'd in abi.cdef


class Lookup(Resolver):
    """``lookup``: the library's own lookup by name, ``fn lookup(scope, const char *name)`` (Vulkan's
    ``vkGetInstanceProcAddr``), asked with a NULL scope for each function, then dlsym of its symbol (as
    ia_runtime.h's ``ia_via_lookup``); the lookup itself comes from dlsym.

    A library whose functions dispatch on a handle (a Vulkan instance or device) also has them per handle:
    :meth:`scope` binds ``function`` or one of the ``scoped`` lookups (``vkGetDeviceProcAddr``) to a handle and
    gives a :class:`Scope`, whose functions are those the lookup returns for that handle (ex. a device's own entry
    points, which skip the loader's dispatch, and extension functions the library does not export)."""

    kind = "lookup"

    def __init__(self, *, function: str, scoped: tuple[str, ...] = (), status: str = "") -> None:
        self.function = function  # ex) vkGetInstanceProcAddr: a bound function, itself resolved with dlsym
        self.scoped = scoped  # ex) ("vkGetDeviceProcAddr",): further bound lookups of the same shape
        self.status = status  # ex) VkResult: the C type of the status the checked scope calls test

    def resolve(self, lib: _LazyLib, index: int) -> Any:
        b = lib._binding
        public = b.functions[index][0]
        if public == self.function:
            return None
        proc, ffi = self.finder(lib, self.function), lib._ffi
        if proc is None:
            return None
        fp = proc(ffi.NULL, public.encode())
        return None if fp == ffi.NULL else ffi.cast(f"ia_pfn_{index}", fp)  # typedef'd in abi.cdef

    def scope(self, binding: Binding, handle: Any, lookup: str | None = None) -> Scope:
        """The functions ``lookup`` (default: ``function``; else one of ``scoped``) returns for ``handle``."""
        via = lookup or self.function
        if via != self.function and via not in self.scoped:
            raise fail(ErrorKind.INVALID_VALUE, "Lookup.scope", f"lookup={via!r} is not a lookup of this library; "
                       f"use {self.function!r}" + "".join(f" or {s!r}" for s in self.scoped), binding.backend)
        if handle is None or handle == binding.ffi.NULL:
            raise fail(ErrorKind.INVALID_HANDLE, via, "handle is NULL: pass the handle whose functions are wanted "
                       "(a NULL scope is the library's own resolution)", binding.backend)
        return Scope(binding, self, via, handle)


class Scope:
    """The functions of one handle (a Vulkan instance or device), found with a :class:`Lookup` bound to it:
    ``scope.vkCreateBuffer(...)`` calls the handle's own entry point with the C arguments (as the ``unchecked``
    module's functions take them) and raises :class:`Error` when it returns a status that is not success (every
    code of the library's error table: a caller that treats one as a status, ex. ``VK_INCOMPLETE``, calls
    :meth:`raw`'s pointer instead); other results are returned as they are.  Each function is looked up once, on
    first use; one the lookup does not return for this handle raises ``SYMBOL_NOT_FOUND``."""

    def __init__(self, binding: Binding, resolver: Lookup, lookup: str, handle: Any) -> None:
        self.binding = binding
        self.handle = handle
        self.lookup = lookup  # ex) vkGetDeviceProcAddr
        self._resolver = resolver

    def raw(self, name: str) -> Any:
        """Function ``name``'s cdata function pointer for this handle (raises SYMBOL_NOT_FOUND when missing)."""
        b = self.binding
        index = b.index.get(name)
        if index is None:
            raise fail(ErrorKind.SYMBOL_NOT_FOUND, name, f"{name} is not a bound function of the {b.library} "
                       "library (its spec's bind.include)", b.backend)
        ffi = b.ffi
        get = getattr(b.lib, self.lookup)
        fp = get(self.handle, name.encode())
        if fp == ffi.NULL:
            raise fail(ErrorKind.SYMBOL_NOT_FOUND, name, f"{self.lookup} returned NULL for {name}: not a function "
                       "of this handle (an extension not enabled, or a newer version than the handle's)", b.backend)
        # the type: API mode, the compiled trampoline's (same prototype); ABI mode, abi.cdef's ia_pfn_<index>
        ftype = ffi.typeof(ffi.addressof(b.lib, name)) if b.mode == "api" else ffi.typeof(f"ia_pfn_{index}")
        return ffi.cast(ftype, fp)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        fn = self.raw(name)
        b, index = self.binding, self.binding.index[name]
        if not self._resolver.status or b.ffi.typeof(fn).result != b.ffi.typeof(self._resolver.status):
            call: Any = fn
        else:
            errors, error = b.errors, b.error

            def call(*args: Any) -> Any:
                code = fn(*args)
                if code in errors:
                    raise error(code, index)
                return code
            call.__name__ = call.__qualname__ = name
        setattr(self, name, call)  # later calls skip __getattr__
        return call


def _member(value: Any, path: str) -> Any:
    for part in path.split("."):
        value = getattr(value, part)
    return value


class Table(Resolver):
    """``table``: the library exports only ``provider(const Interface ***list, uint32_t *n)`` (status 0: success).
    The first listed provider whose ``version`` member has major ``major``, a minor of at least ``minor`` and
    whose ``match`` members have their values is selected, once; every other function is its entry
    (``entries``: public name -> field) of the provider's ``table`` member, never dlsym'ed.  An entry that is
    NULL, or newer than the provider (``since``: field -> the minor that added it; an older table may end before
    it, so it is never read) is a missing function (SYMBOL_NOT_FOUND naming the entry), no matching provider a
    missing library (LIBRARY_NOT_FOUND listing the providers offered).  As ia_runtime.h's ``ia_via_table``."""

    kind = "table"

    def __init__(self, *, provider: str, table: str, version: str, major: int, minor: int,
                 match: dict[str, int], entries: dict[str, str], since: dict[str, int]) -> None:
        self.provider = provider  # ex) QnnInterface_getProviders: a bound function, resolved with dlsym
        self.table = table  # ex) v2_27: member path of the function table in the provider struct
        self.version = version  # ex) apiVersion.coreApiVersion: member path of {major, minor, patch}
        self.major = major
        self.minor = minor
        self.match = match  # ex) {"backendId": 6}: provider member path -> the value it must have
        self.entries = entries  # ex) {"QnnBackend_getApiVersion": "backendGetApiVersion"}
        self.since = since  # ex) {"contextFinalize": 16}: field -> the minor that added it (absent: every one)

    def providers(self, binding: Binding) -> list[Any] | None:
        """The providers the library lists (cdata pointers), or None when it cannot be asked."""
        index = binding.index[self.provider]
        if binding.status(index) != 0:
            return None
        ffi = binding.ffi
        # API mode ("api", loader.API): the compiled trampoline's address; ABI mode: the resolved cdata function
        get = ffi.addressof(binding.lib, self.provider) if binding.mode == "api" else binding.lib._resolve(index)
        ftype = ffi.typeof(get)
        lst, n = ffi.new(ftype.args[0]), ffi.new(ftype.args[1])
        if get(lst, n) != 0 or lst[0] == ffi.NULL:
            return None
        return [lst[0][k] for k in range(int(n[0])) if lst[0][k] != ffi.NULL]

    def selects(self, p: Any) -> bool:
        """Whether provider ``p`` is one this binding can use (ia_runtime.h: ``ia_table_selects``)."""
        v = _member(p, self.version)
        return (int(v.major) == self.major and int(v.minor) >= self.minor
                and all(int(_member(p, m)) == value for m, value in self.match.items()))

    def select(self, binding: Binding) -> tuple[list[Any] | None, Any]:
        """(the providers listed, or None; the first one selected, or None)."""
        found = self.providers(binding)
        return found, next((p for p in found or () if self.selects(p)), None)

    def entry(self, p: Any, public: str) -> Any:
        """Function ``public``'s entry in provider ``p`` (a cdata function pointer, maybe NULL), or None when
        the entry is newer than ``p``'s minor (its table may end before it: not read)."""
        field = self.entries[public]
        if int(_member(p, self.version).minor) < self.since.get(field, 0):
            return None
        return getattr(_member(p, self.table), field)

    def _describe(self, binding: Binding, p: Any) -> str:
        v = _member(p, self.version)
        ver = ".".join(str(int(getattr(v, k))) for k in ("major", "minor", "patch") if hasattr(v, k))
        names = [f"{k}={_cstr(binding.ffi, getattr(p, k))}" for k, _ in binding.ffi.typeof(p).item.fields
                 if k and k != self.table.split(".")[0] and k != self.version.split(".")[0]
                 and _cstr(binding.ffi, getattr(p, k)) is not None]
        return f"version {ver}" + (f" ({', '.join(names)})" if names else "")

    def _wanted(self) -> str:
        match = "".join(f" and {m} {value}" for m, value in self.match.items())
        return f"API version {self.major}.{self.minor} or a later {self.major}.x{match}"

    def resolve(self, lib: _LazyLib, index: int) -> Any:
        b = lib._binding
        public = b.functions[index][0]
        if public == self.provider:
            return None
        if not lib._proc_looked_up:
            lib._proc = self.select(b)[1]
            lib._proc_looked_up = True
        if lib._proc is None:
            return None
        fn = self.entry(lib._proc, public)
        return None if fn is None or fn == lib._ffi.NULL else fn

    def dlsym(self, public: str) -> bool:
        return public == self.provider

    def missing(self, binding: Binding, index: int) -> Error | None:
        public = binding.functions[index][0]
        if public == self.provider:
            return None
        found, chosen = self.select(binding)
        if found is None:
            return fail(ErrorKind.LIBRARY_NOT_FOUND, public, f"{binding.path} does not list any provider "
                        f"({self.provider} failed or is not exported)", binding.backend)
        if chosen is None:
            offers = "; ".join(self._describe(binding, p) for p in found) or "none"
            return fail(ErrorKind.LIBRARY_NOT_FOUND, public, f"{binding.path} has no provider of {self._wanted()}; "
                        f"it offers: {offers}", binding.backend)
        field = self.entries[public]
        why = "NULL" if self.entry(chosen, public) is not None else (
            f"added in {self.major}.{self.since[field]}, after the provider's version")
        return fail(ErrorKind.SYMBOL_NOT_FOUND, public, f"{binding.path}: the selected provider, "
                    f"{self._describe(binding, chosen)}, has no entry {field} ({why})", binding.backend)


class AbiMajor:
    """A library spec's ``loader.abi_major``: a library whose ABI (enum values, struct layouts) changes at each
    major version must be the major of the headers the bindings were generated from.  Once a file is opened,
    ``function(&version)`` is asked (status 0: success); a file reporting another major (``version //
    encoding[0]``) is passed over as if it were missing, and the next name is tried.  A file that cannot say
    its version (the function is not exported, or fails) is kept: nothing is known against it."""

    def __init__(self, *, function: str, encoding: tuple[int, int], major: int) -> None:
        self.function = function  # ex) hipRuntimeGetVersion: status (integer *version)
        self.encoding = encoding  # ex) (10000000, 100000): major = v // e[0], minor = v % e[0] // e[1]
        self.major = major  # ex) 5: the headers' (HIP 5.2)

    def version(self, ffi: Any, fn: Any) -> tuple[int, str] | None:
        """(major, "major.minor") that the opened library's ``fn`` (the cdata function) reports, or None."""
        if fn is None:
            return None
        out = ffi.new(ffi.typeof(fn).args[0])
        try:
            if fn(out) != 0:
                return None
        except Exception:  # (a stand-in that raises): nothing known
            return None
        v, (e0, e1) = int(out[0]), self.encoding
        return v // e0, f"{v // e0}.{v % e0 // e1}"


def _cstr(ffi: Any, value: Any) -> str | int | None:
    """A provider member worth naming in a message: an integer, or a C string; else None."""
    if isinstance(value, int):
        return value
    try:
        if ffi.typeof(value).cname in ("char *", "const char *") and value != ffi.NULL:
            return str(ffi.string(value).decode(errors="replace"))
    except (TypeError, AttributeError):
        pass
    return None
