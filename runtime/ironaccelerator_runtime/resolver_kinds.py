"""Resolver kinds: what a library spec's ``resolver: {kind: <name>, ...}`` may name, each declared once, as data.

A :class:`ResolverKind` holds everything the generator needs to know about a kind, so that adding one edits nothing
under ``generator/`` or ``templates/``:

- its spec keys (:class:`Key`): what each one is (a bound function of a given C :class:`Shape`, a list of those,
  or a constant of the header), whether it is required, and its documentation (docs/SPEC_KEYS.md is rendered from
  it); the generator reads the keys, checks them against the header with located errors and suggestions, and
  emits them;
- the C side: the ``#define`` s each key's facts give (:attr:`Key.c`), the per-function tables the kind's C reads
  (:attr:`ResolverKind.c_tables`), the function of ``ia_runtime.h`` (or of :attr:`ResolverKind.c_code`, for a kind
  whose C is not there) that resolves a function (``IA_RESOLVER_VIA``) and the one that forgets what it resolved
  (``IA_RESOLVER_FORGET``);
- the Python side: the class the generated ``_binding.py`` instantiates as ``RESOLVER`` (ABI mode resolves through
  it; ``ironaccelerator_runtime.resolvers``), with each key's value as a keyword argument (:attr:`Key.py`) and the
  library's facts it takes (:attr:`ResolverKind.py_library`).

The facts a key gives (the generator's generic vocabulary):

- a ``function`` key: ``symbol`` (its exported symbol, a C string), ``index`` (its index in the binding's function
  table), ``optional`` (how many of its shape's optional trailing parameters it has); in Python, its public name;
- a ``functions`` key: in Python, a tuple of public names;
- a ``constant`` key: ``value`` (an integer of the header: an enum constant or a ``#define``); in Python, the value.

The library facts (:attr:`ResolverKind.py_library`): ``error_type`` (the C type of its status), ``pins`` (public
name -> ABI version of each function the kind is asked for).  Per-function C tables (:attr:`ResolverKind.c_tables`):
``public`` (``ia_public[]``, the public names) and ``pin`` (``ia_pin[]``, the ABI versions, 0 for none).

This module is pure (the standard library only): the generator loads it from its file without importing the
runtime package (which imports the generated one), as it does ``capability_match``.  A new kind is one
:func:`register` call (a new entry of :data:`KINDS`), its Python class (a :class:`resolvers.Resolver
<ironaccelerator_runtime.resolvers.Resolver>` subclass) and its C (in ``ia_runtime.h``, or :attr:`c_code`).

Two kinds are not declared here yet and stay the generator's own (:data:`EXCEPTIONS`): ``table`` (a provider's
function table: nested sections, member paths and per-entry offsets) and ``objc`` (Objective-C messages, a binding
family of its own).
"""

from __future__ import annotations

from dataclasses import dataclass

# what a Shape's result and parameters may be (the generator checks a bound function's C types against them)
RESULTS = ("status", "function pointer", "any")  # status: the library's status type (errors.type)
PARAMS = ("string", "pointer", "any")  # string: const char *; pointer: any pointer (a handle, void **, ...)
KEY_TYPES = ("function", "functions", "constant")
FUNCTION_FACTS = ("symbol", "index", "optional")
CONSTANT_FACTS = ("value",)
LIBRARY_FACTS = ("error_type", "pins")
TABLES = ("public", "pin")
VIA = ("none", "pinned", "all")


@dataclass(frozen=True, kw_only=True)
class Shape:
    """The C shape a bound function named by a key must have.  ``noun`` and ``what`` say it in errors: ``'f' does
    not look like a <noun> (<what>)``.  ``null``: the parameters the kind passes NULL to (the bound function must
    not refuse NULL there: ``errors.null_handle``), ``null_what`` what that NULL is (ex. ``scope``)."""

    result: str
    params: tuple[str, ...]
    optional: tuple[str, ...] = ()  # trailing parameters that may be absent
    null: tuple[int, ...] = ()
    null_what: str = ""
    noun: str
    what: str


@dataclass(frozen=True, kw_only=True)
class Key:
    """One key of a kind's ``resolver:`` mapping.

    ``type``: ``function`` (a bound function's public name, of ``shape``), ``functions`` (a list of them) or
    ``constant`` (a constant of the header); ``what``: how errors name the key's value (ex. ``lookup``);
    ``default``: for an optional ``constant``, the key whose value it takes when absent; ``c``: the ``#define`` s
    of trampolines.c it gives, (name, fact) (see the module's doc for the facts); ``py``: the keyword argument of
    the kind's Python class it is passed as (``""``: not passed)."""

    name: str
    type: str
    doc: str
    required: bool = False
    shape: Shape | None = None
    what: str = ""
    default: str = ""
    c: tuple[tuple[str, str], ...] = ()
    py: str = ""


@dataclass(frozen=True, kw_only=True)
class ResolverKind:
    """One resolver kind (see the module's doc).

    ``via``: which functions the kind is asked for (``pinned``: those with an ABI version pin, but its own;
    ``all``; ``none``): ABI mode's abi.cdef declares their pointer types (``ia_pfn_<index>``), and ``pins`` lists
    them.  ``python``: ``module.Class`` of the ABI-mode resolver (``""``: dlsym's, the default).  Comments
    (``py_comment`` above ``RESOLVER``, ``c_comment`` above the defines, ``abi_comment`` above abi.cdef's
    typedefs) are formatted with ``{symbol}``, the first function key's symbol; a line break starts a new comment
    line.  ``c_select``: the ``IA_RESOLVER_<X>`` constant of ia_runtime.h whose code the kind uses (``""``: none,
    its C being :attr:`c_code`, emitted after ia_runtime.h)."""

    name: str
    doc: str
    keys: tuple[Key, ...] = ()
    via: str = "none"
    python: str = ""
    py_library: tuple[tuple[str, str], ...] = ()
    py_comment: str = ""
    c_select: str = ""
    c_via: str = ""
    c_forget: str = ""
    c_tables: tuple[str, ...] = ()
    c_code: str = ""
    c_comment: str = ""
    abi_comment: str = ""

    def key(self, name: str) -> Key | None:
        return next((k for k in self.keys if k.name == name), None)

    def problems(self) -> list[str]:
        """What is wrong with this declaration (the vocabulary above), for :func:`register` and the tests."""
        out = []
        for k in self.keys:
            if k.type not in KEY_TYPES:
                out.append(f"key {k.name}: type {k.type!r} is not one of {KEY_TYPES}")
            if (k.shape is None) != (k.type == "constant"):
                out.append(f"key {k.name}: a function key has a shape, a constant none")
            facts = CONSTANT_FACTS if k.type == "constant" else FUNCTION_FACTS if k.type == "function" else ()
            out += [f"key {k.name}: fact {f!r} is not one of {facts}" for _, f in k.c if f not in facts]
            if k.default and (k.type != "constant" or self.key(k.default) is None):
                out.append(f"key {k.name}: default {k.default!r} is not a constant key")
            s = k.shape
            if s is not None and (s.result not in RESULTS or not set(s.params + s.optional) <= set(PARAMS)):
                out.append(f"key {k.name}: its shape uses a result or parameter not in {RESULTS} / {PARAMS}")
        out += [f"library fact {f!r} is not one of {LIBRARY_FACTS}" for _, f in self.py_library
                if f not in LIBRARY_FACTS]
        out += [f"table {t!r} is not one of {TABLES}" for t in self.c_tables if t not in TABLES]
        if self.via not in VIA:
            out.append(f"via {self.via!r} is not one of {VIA}")
        if self.keys and self.keys[0].type != "function":
            out.append("the first key is the kind's own function (a 'function' key)")
        if self.python and "." not in self.python:
            out.append(f"python {self.python!r} is not module.Class")
        return out


_LOADER = "ironaccelerator_runtime.loader"  # re-exports the runtime's resolvers (resolvers.py)

KINDS: dict[str, ResolverKind] = {}
# resolver kinds the generator still implements itself (see the module's doc), after the declared ones
EXCEPTIONS = ("table", "objc")


def register(kind: ResolverKind) -> ResolverKind:
    """Declare ``kind`` (a ValueError when its declaration is inconsistent or its name is taken)."""
    problems = kind.problems()
    if kind.name in KINDS or kind.name in EXCEPTIONS:
        problems.append(f"resolver kind {kind.name!r} is already declared")
    if problems:
        raise ValueError(f"resolver kind {kind.name!r}: " + "; ".join(problems))
    KINDS[kind.name] = kind
    return kind


register(ResolverKind(name="dlsym", doc="Each function is the library's exported symbol."))

register(ResolverKind(
    name="proc_address",
    doc="Through the library's own resolver, pinned to each function's ABI (`cuGetProcAddress(name, &fn, version, "
        "flags)`).",
    keys=(
        Key(name="function", type="function", required=True, what="resolver function", py="resolver",
            doc="The resolver, a bound function, ex. `cuGetProcAddress`.",
            shape=Shape(result="status", params=("any", "any", "any", "any"), optional=("any",), noun="resolver",
                        what="status (const char *symbol, void **fn, int version, flags[, status *])"),
            c=(("IA_PROC_SYMBOL", "symbol"), ("IA_PROC_INDEX", "index"), ("IA_PROC_STATUS_PARAM", "optional"))),
        Key(name="default_flag", type="constant", required=True, py="default_flag",
            doc="The flag for the legacy default stream, ex. `CU_GET_PROC_ADDRESS_DEFAULT`.",
            c=(("IA_PROC_DEFAULT_FLAG", "value"),)),
        Key(name="per_thread_flag", type="constant", default="default_flag", py="per_thread_flag",
            doc="The flag for the per-thread default stream.", c=(("IA_PROC_PER_THREAD_FLAG", "value"),)),
    ),
    via="pinned",
    python=f"{_LOADER}.ProcAddress",
    py_library=(("pins", "pins"),),
    py_comment="ABI mode resolves each function pinned here as the trampolines do (ia_runtime.h, ia_via_proc):\n"
               "{symbol}(public name, &fn, pin, flags), then dlsym of its symbol if that fails.",
    c_select="IA_RESOLVER_PROC_ADDRESS",
    c_via="ia_via_proc",
    c_forget="ia_forget_proc",
    c_tables=("public", "pin"),
    c_comment="Symbols resolve through {symbol}(public name, &fn, ABI version, flags), pinned per\n"
              "function to the version of the ABI this binding was generated for (the PFN_ typedefs); functions\n"
              "without a pin, and the resolver itself, fall back to the exported symbol.",
    abi_comment="ABI mode resolves these through {symbol} first, as the trampolines do: the function pointer\n"
                "type each one's address is cast to (ia_pfn_<index>, <index> as in _binding.FUNCTIONS).",
))

_LOOKUP_SHAPE = "function pointer (handle scope, const char *name)"

register(ResolverKind(
    name="lookup",
    doc="Through the library's own lookup by name, `fn lookup(scope, const char *name)`, asked with a NULL scope "
        "(Vulkan's `vkGetInstanceProcAddr(NULL, name)`), then dlsym; the runtime binds a lookup to a handle for a "
        "table of that scope's functions (`RESOLVER.scope`).",
    keys=(
        Key(name="function", type="function", required=True, what="lookup", py="function",
            doc="The lookup, a bound function returning a function pointer, ex. `vkGetInstanceProcAddr`.",
            shape=Shape(result="function pointer", params=("pointer", "string"), null=(0,), null_what="scope",
                        noun="lookup", what=_LOOKUP_SHAPE),
            c=(("IA_LOOKUP_SYMBOL", "symbol"), ("IA_LOOKUP_INDEX", "index"))),
        Key(name="scoped", type="functions", what="lookup", py="scoped",
            doc="Further lookups of the same shape the runtime may bind to a handle, ex. `[vkGetDeviceProcAddr]`.",
            shape=Shape(result="function pointer", params=("pointer", "string"), noun="lookup", what=_LOOKUP_SHAPE)),
    ),
    via="all",
    python=f"{_LOADER}.Lookup",
    py_library=(("status", "error_type"),),
    py_comment="ABI mode resolves as the trampolines do (ia_runtime.h, ia_via_lookup): {symbol}(NULL, public name),\n"
               "then dlsym of its symbol; RESOLVER.scope(BINDING, handle[, lookup]) binds a lookup to a handle.",
    c_select="IA_RESOLVER_LOOKUP",
    c_via="ia_via_lookup",
    c_forget="ia_forget_lookup",
    c_tables=("public",),
    c_comment="Symbols resolve through {symbol}(NULL, public name), then the exported symbol; the lookup\n"
              "itself is the exported symbol.",
    abi_comment="ABI mode asks {symbol}(NULL, public name) first, as the trampolines do, and a scope's lookup\n"
                "(Lookup.scope): the function pointer type each address is cast to (ia_pfn_<index>, <index> as in\n"
                "_binding.FUNCTIONS).",
))
