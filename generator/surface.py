"""The trait surface: ``specs/core.yaml``'s data sections and the vendor backend specs.

``specs/<vendor>/backend.yaml`` says which core backend a vendor implements, with
which template and runtime module, and its capability translation as data.  No spec
lists the trait operations: the runtime's base classes (the ``traits`` package) are the
contract, and what a backend implements is derived from what its classes override
(``ironaccelerator_runtime.operations``, ``Backend.supports``).

A template shared by several vendors (``backends/gpu.py.j2``: CUDA and ROCm) renders the
vendor differences from the spec's ``functions:``, ``constants:`` and ``types:`` role
tables, read through :class:`RoleTable`, which checks every name against the bound
libraries.  Which roles are needed is the hand-written runtime's declaration (its
``SPEC_ROLES``, read with :func:`runtime_roles` from the module or, for a package runtime such as
``backends/gpu/``, the module of it that assigns them; ``RoleTable.needed`` resolves it): a role it
needs that the spec lacks, or one the spec declares that nothing reads, is a located error.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import yaml

from . import data, schema
from .diagnostics import Collector, Diagnostic, UserError, suggest
from .ir import Location
from .spec import IDENT, CoreSpec, Name, SpecReader, compose, read_spec

if TYPE_CHECKING:
    import jinja2

    from .bind import BoundLibrary
    from .objc import ObjcLibrary

RUNTIME_BACKENDS = data.RUNTIME_PACKAGE / "backends"  # hand-written backends the generated modules subclass
# the runtime's capability matchers (spec key ``capabilities.match``), loaded from the file: see :func:`matchers`
CAPABILITY_MATCH = data.RUNTIME_PACKAGE / "capability_match.py"

UPPER = re.compile(r"[A-Z][A-Z0-9_]*\Z")
# the array-exchange protocols a backend's allocations export (spec key ``interop``)
INTEROP = ("dlpack", "cuda_array_interface")
CTYPE = re.compile(r"(const )?[A-Za-z_][A-Za-z0-9_]*( [A-Za-z_][A-Za-z0-9_]*)*( ?\*)*\Z")
C_BUILTINS = frozenset({"void", "char", "signed char", "unsigned char", "short", "unsigned short", "int",
                        "unsigned int", "unsigned", "long", "unsigned long", "long long", "unsigned long long",
                        "float", "double", "size_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t",
                        "uint16_t", "uint32_t", "uint64_t", "uintptr_t", "intptr_t"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Named:
    """An entry of a core table.  ex) ``OPENCL: {dlpack_device: 4}``"""

    name: str
    doc: str = ""
    dlpack_device: int = 0
    dlpack_code: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class DTypeSpec:
    name: str  # ex) f32
    size: int
    numeric_class: str
    dlpack_code: int
    numpy: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Surface:
    """The data sections of core.yaml."""

    path: str
    backend_kinds: tuple[Named, ...]
    vendors: tuple[str, ...]
    numeric_classes: tuple[Named, ...]
    dtypes: tuple[DTypeSpec, ...]
    capability_flags: tuple[Named, ...]
    compute_tiers: tuple[Named, ...]
    memory_kinds: tuple[Named, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendSpec:
    """``specs/<vendor>/backend.yaml``."""

    path: str
    location: Location
    kind: str  # ex) OPENCL
    vendor: str  # ex) opencl -> ironaccelerator.backends.opencl
    class_prefix: str  # ex) OpenCL -> OpenCLBackend, OpenCLDevice, ...
    template: str  # ex) backends/tables.py.j2
    runtime: str | None  # ex) opencl: the hand-written module ironaccelerator_runtime.backends.opencl
    libraries: tuple[str, ...]  # ex) ("opencl.cl",)
    flags: tuple[tuple[str, tuple[str, ...]], ...]  # backend-defined key -> CapabilityFlags
    tiers: tuple[tuple[str, str], ...]  # backend-defined key -> ComputeTier
    vendors: tuple[tuple[str, str], ...]  # substring of the vendor's name -> Vendor
    # --- the data a shared template (backends/gpu.py.j2) renders per vendor; all optional
    # role -> the vendor function (None: the vendor has none), checked against the bound libraries
    functions: tuple[tuple[Name, Name | None], ...] = ()
    # role -> constants OR'd together (empty: none), checked against the libraries' enums and macros
    constants: tuple[tuple[Name, tuple[Name, ...]], ...] = ()
    types: tuple[tuple[Name, Name], ...] = ()  # role -> C type  ex) deviceptr: CUdeviceptr
    match: str = "exact"  # the runtime's capability matcher that compares the keys (see matchers())
    arch_field: Name | None = None  # a matcher option: the device-properties struct field naming the architecture
    module_formats: tuple[str, ...] = ()  # what load_module accepts (each in the runtime's MODULE_FORMATS)
    interop: tuple[str, ...] = ()  # INTEROP
    sections: tuple[tuple[str, Location], ...] = ()  # where functions/constants/types were written
    # with a matcher that reads soc_models: SoC name -> (SoC model number, its architecture key)
    soc_models: tuple[tuple[str, int, str], ...] = ()
    # where each key of capabilities.flags / tiers was written  ex) (("flags", "Apple7", <Location>), ...)
    capability_keys: tuple[tuple[str, str, Location], ...] = ()

    @property
    def module(self) -> str:
        return f"ironaccelerator.backends.{self.vendor}"

    def section(self, key: str) -> Location:
        return dict(self.sections).get(key, self.location)


# core.yaml's tables whose entries are mappings: their schema sections
SECTION_OF = {"backend_kinds": "core > backend_kinds > <KIND>", "numeric_classes": "core > numeric_classes > <CLASS>"}

def load_surface(path: Path, display: str) -> Surface:
    root = compose(display, read_spec(path, display))
    errors = Collector()
    r = SpecReader(display, errors)
    m = r.mapping(root, (), (), "core spec") or {}

    def table(key: str, with_doc: bool = True, extra: str | None = None) -> tuple[Named, ...]:
        out = []
        for name, node in r.keyed(m.get(key), key):
            if not UPPER.match(name.value):
                errors.error(name.location, f"{key} entry '{name}' must be UPPER_CASE")
            doc, value = "", 0
            if extra is not None:
                section = SECTION_OF[key]
                em = r.mapping(node, schema.keys(section), schema.required(section), f"{key} entry '{name}'") or {}
                value = r.integer(em.get(extra), extra) or 0
                doc = r.scalar(em.get("doc"), "doc") or ""
            elif with_doc:
                doc = r.scalar(node, f"description of {name}") or ""
            out.append(Named(name=name.value, doc=" ".join(doc.split()), dlpack_device=value if extra == "dlpack_device" else 0,
                             dlpack_code=value if extra == "dlpack_code" else 0))
        if not out:
            errors.error(Location(file=display, line=1, col=1), f"core spec needs a non-empty '{key}' section")
        return tuple(out)

    backend_kinds = table("backend_kinds", extra="dlpack_device")
    numeric_classes = table("numeric_classes", extra="dlpack_code")
    classes = {c.name: c for c in numeric_classes}
    vendors = tuple(v.value for v in r.seq(m.get("vendors"), "vendors", lambda n: r.string(n, "vendor", UPPER)))
    dtypes = []
    for name, node in r.keyed(m.get("dtypes"), "dtype"):
        dm = r.mapping(node, schema.keys("core > dtypes > <name>"), schema.required("core > dtypes > <name>"),
                       f"dtype '{name}'") or {}
        size = r.integer(dm.get("size"), "size") or 0
        cls = r.ident(dm.get("class"), "class")
        if cls is not None and cls.value not in classes:
            errors.error(cls.location, f"'{cls}' is not a numeric class{suggest(cls.value, classes)}")
        numpy = r.ident(dm.get("numpy"), "numpy")
        dtypes.append(DTypeSpec(name=name.value, size=size, numeric_class=cls.value if cls else "",
                                dlpack_code=classes[cls.value].dlpack_code if cls and cls.value in classes else 0,
                                numpy=numpy.value if numpy else None))
    surface = Surface(path=display, backend_kinds=backend_kinds, vendors=vendors, numeric_classes=numeric_classes,
                      dtypes=tuple(dtypes), capability_flags=table("capability_flags"),
                      compute_tiers=table("compute_tiers"), memory_kinds=table("memory_kinds"))
    errors.check()
    return surface


def load_backend(path: Path, display: str, surface: Surface) -> BackendSpec:
    root = compose(display, read_spec(path, display))
    errors = Collector()
    r = SpecReader(display, errors)
    if root is None:
        errors.error(Location(file=display, line=1, col=1), "the backend spec is empty")
        errors.check()
    m = r.mapping(root, schema.keys("backend"), schema.required("backend"), "backend spec",
                  retired=schema.RETIRED["backend"]) or {}
    kinds = [b.name for b in surface.backend_kinds]
    kind = r.ident(m.get("backend"), "backend")
    if kind is not None and kind.value not in kinds:
        errors.error(kind.location, f"'{kind}' is not a backend kind of {surface.path}{suggest(kind.value, kinds)}")
    vendor = r.ident(m.get("vendor"), "vendor")
    prefix = r.ident(m.get("class_prefix"), "class_prefix")
    template = r.string(m.get("template"), "template", re.compile(r"backends/[a-z0-9_]+\.py\.j2\Z"),
                        ": expected backends/<name>.py.j2")
    runtime = r.ident(m.get("runtime"), "runtime")
    if runtime is not None and runtime_path(runtime.value) is None:
        known = sorted(p.stem for p in runtime_paths())
        errors.error(runtime.location, f"'{runtime}' is not a module of ironaccelerator_runtime.backends "
                     f"({RUNTIME_BACKENDS.relative_to(RUNTIME_BACKENDS.parents[2]).as_posix()}/){suggest(runtime.value, known)}")
    libraries = r.seq(m.get("libraries"), "libraries", lambda n: r.string(n, "library", re.compile(r"[a-z0-9_]+\.[a-z0-9_]+\Z"),
                                                                             ": expected vendor.library"))
    cm = r.mapping(m.get("capabilities"), schema.keys("backend > capabilities"), (),
                   "capabilities") or {}
    flag_names = [f.name for f in surface.capability_flags]
    tier_names = [t.name for t in surface.compute_tiers]
    all_matchers = matchers()
    match = r.ident(cm.get("match"), "match")
    if match is not None and match.value not in all_matchers:
        errors.error(match.location, f"'{match}' is not a capability match{suggest(match.value, all_matchers)}; "
                     f"expected one of: {', '.join(all_matchers)}")
        match = None
    chosen = all_matchers[match.value if match else "exact"]
    arch_field = _matcher_options(r, errors, cm, chosen, match)
    _check_capability_keys(r, errors, chosen, cm)
    flags = []
    for key, node in _keys(r, cm.get("flags")):
        vals = r.seq(node, f"flags of {key}", lambda n: r.ident(n, "flag"))
        for v in vals:
            if v.value not in flag_names:
                errors.error(v.location, f"'{v}' is not a capability flag{suggest(v.value, flag_names)}")
        flags.append((key.value, tuple(v.value for v in vals)))
    tiers = []
    for key, node in _keys(r, cm.get("tiers")):
        v = r.ident(node, "tier")
        if v is not None and v.value not in tier_names:
            errors.error(v.location, f"'{v}' is not a compute tier{suggest(v.value, tier_names)}")
        tiers.append((key.value, v.value if v else ""))
    vendors = []
    for key, node in _keys(r, cm.get("vendors")):
        v = r.ident(node, "vendor")
        if v is not None and v.value not in surface.vendors:
            errors.error(v.location, f"'{v}' is not a vendor{suggest(v.value, surface.vendors)}")
        vendors.append((key.value, v.value if v else ""))
    functions = [(role, names[0] if names else None)
                 for role, names in _roles(r, errors, m.get("functions"), "function", many=False)]
    constants = _roles(r, errors, m.get("constants"), "constant", many=True)
    types = []
    for role, node in r.keyed(m.get("types"), "type role"):
        t = r.string(node, f"C type of {role}", CTYPE, ": expected a C type name, optionally with '*'")
        if t is not None:
            types.append((role, t))
    module_formats = _module_formats(r, errors, m.get("module_formats"), runtime.value if runtime else None)
    interop = _choices(r, errors, m.get("interop"), "interop protocol", INTEROP)
    sections = tuple((k, r.loc(m[k])) for k in ("functions", "constants", "types") if k in m)
    soc_models = _soc_models(r, errors, m.get("soc_models"), chosen, all_matchers)
    quiet = SpecReader(display, Collector())
    capability_keys = tuple((section, key.value, key.location) for section in ("flags", "tiers")
                            for key, _ in _keys(quiet, cm.get(section)))
    errors.check()
    if not (kind and vendor and prefix and template):  # an empty file, or not a mapping at all
        raise UserError([Diagnostic(location=Location(file=display, line=1, col=1),
                                    message="a backend spec needs 'backend', 'vendor', 'class_prefix' and "
                                            "'template' (the file is empty or not a mapping)")])
    return BackendSpec(path=display, location=Location(file=display, line=1, col=1), kind=kind.value,
                       vendor=vendor.value, class_prefix=prefix.value, template=template.value,
                       runtime=runtime.value if runtime else None,
                       libraries=tuple(x.value for x in libraries), flags=tuple(flags), tiers=tuple(tiers), vendors=tuple(vendors),
                       functions=tuple(functions), constants=tuple(constants), types=tuple(types),
                       match=match.value if match else "exact", arch_field=arch_field,
                       module_formats=module_formats, interop=interop, sections=sections, soc_models=soc_models,
                       capability_keys=capability_keys)


def _matcher_options(r: SpecReader, errors: Collector, cm: dict[str, yaml.Node], chosen: Any,
                     match: Name | None) -> Name | None:
    """The ``capabilities`` keys beyond the tables that matchers take (their ``options``: each meaningful, and
    required, with the matchers that name it); the value of ``arch_field``, the one there is, or None."""
    found: dict[str, Name | None] = {}
    for option in sorted({o for m in matchers().values() for o in m.options}):
        value = r.ident(cm.get(option), option)
        found[option] = value
        if value is not None and option not in chosen.options:
            takes = " or ".join(f"'match: {m.name}'" for m in matchers().values() if option in m.options)
            errors.error(value.location, f"{option} is only meaningful with {takes}")
    for option, what in chosen.options.items():
        if found.get(option) is None and match is not None:
            errors.error(match.location, f"'match: {chosen.name}' needs '{option}' ({what})")
    return found.get("arch_field")


def _soc_models(r: SpecReader, errors: Collector, node: yaml.Node | None, chosen: Any,
                known: Mapping[str, Any]) -> tuple[tuple[str, int, str], ...]:
    """``soc_models: {<name>: {model: 30, arch: <key>}, ...}`` (only with a matcher that reads the section): names
    (the matcher's grammar), model numbers (each once) and architectures (the matcher's key grammar) checked."""
    if node is None:
        return ()
    if "soc_models" not in chosen.sections:
        takes = " or ".join(m.name for m in known.values() if "soc_models" in m.sections)
        errors.error(r.loc(node), f"soc_models is only meaningful with 'capabilities: {{match: {takes}}}'")
        return ()
    out: list[tuple[str, int, str]] = []
    seen: dict[int, str] = {}
    for name, value in _keys(r, node):
        if chosen.soc_name is not None and not chosen.soc_name.match(name.value):
            errors.error(name.location, f"SoC name '{name}' is not like '{chosen.soc_example}' (upper-case letters "
                         "and digits)")
        sm = r.mapping(value, schema.keys("backend > soc_models > <name>"),
                       schema.required("backend > soc_models > <name>"), f"SoC {name}") or {}
        model = r.integer(sm.get("model"), "model")
        arch = r.string(sm.get("arch"), "arch", chosen.value, f": expected {chosen.what}")
        if model is not None and model < 1:
            errors.error(r.loc(sm["model"]), f"SoC {name}: model {model} must be >= 1")
            continue
        if model is not None and model in seen:
            errors.error(r.loc(sm["model"]), f"SoC {name}: model {model} is already {seen[model]}'s")
            continue
        if model is not None and arch is not None:
            seen[model] = name.value
            out.append((name.value, model, arch.value))
    return tuple(out)


_MATCHERS: dict[str, Any] = {}


def matchers() -> dict[str, Any]:
    """The runtime's capability matchers (``ironaccelerator_runtime.capability_match.MATCHERS``: name ->
    ``Matcher``), loaded once from the runtime's file (not by importing the runtime package, which imports the
    generated one): the generator asks the chosen one for its key grammar and names none of them."""
    if not _MATCHERS:
        import importlib.util
        import sys

        name = "_ironaccel_gen_capability_match"
        spec = importlib.util.spec_from_file_location(name, CAPABILITY_MATCH)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # (dataclasses resolve the module's annotations through sys.modules)
        spec.loader.exec_module(module)
        _MATCHERS.update(module.MATCHERS)
    return _MATCHERS


def _module_formats(r: SpecReader, errors: Collector, node: yaml.Node | None,
                    runtime: str | None) -> tuple[str, ...]:
    """``module_formats: [...]``: what ``Device.load_module`` accepts, each one the hand-written runtime can load
    (its ``MODULE_FORMATS`` literal, :func:`runtime_literal`); any identifier where the spec names no runtime or
    the runtime declares none."""
    path = runtime_path(runtime) if runtime else None
    loadable = runtime_literal(path, "MODULE_FORMATS") if path is not None else None
    if loadable is None:
        out: list[str] = []
        for v in r.seq(node, "module formats", lambda n: r.ident(n, "module format")):
            if v.value in out:
                errors.error(v.location, f"module format '{v}' is listed twice")
            else:
                out.append(v.value)
        return tuple(out)
    return _choices(r, errors, node, "module format", tuple(loadable))


def _is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _roles(r: SpecReader, errors: Collector, node: yaml.Node | None, what: str,
           many: bool) -> list[tuple[Name, tuple[Name, ...]]]:
    """``role: name`` (or ``role: null``: the vendor has none; or, with ``many``, a list OR'd together)."""
    out: list[tuple[Name, tuple[Name, ...]]] = []
    for role, value in r.keyed(node, f"{what} role"):
        if _is_null(value):
            out.append((role, ()))
        elif isinstance(value, yaml.SequenceNode) and many:
            out.append((role, r.seq(value, f"{what}s of {role}", lambda n: r.ident(n, what))))
        elif isinstance(value, yaml.SequenceNode):
            errors.error(r.loc(value), f"{what} role '{role}' takes one {what} name (or null)")
        else:
            name = r.ident(value, f"{what} of {role}")
            if name is not None:
                out.append((role, (name,)))
    return out


def _choices(r: SpecReader, errors: Collector, node: yaml.Node | None, what: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for v in r.seq(node, f"{what}s", lambda n: r.ident(n, what)):
        if v.value not in allowed:
            errors.error(v.location, f"'{v}' is not a {what}{suggest(v.value, allowed)}; expected one of: "
                         f"{', '.join(allowed)}")
        elif v.value in out:
            errors.error(v.location, f"{what} '{v}' is listed twice")
        else:
            out.append(v.value)
    return tuple(out)


def _check_capability_keys(r: SpecReader, errors: Collector, chosen: Any, cm: dict[str, yaml.Node]) -> None:
    """The keys of the capability tables, by the chosen matcher's grammar (``exact`` keys are free-form)."""
    quiet = SpecReader(r.path, Collector())  # _keys' own errors are reported where the tables are read
    for section in ("flags", "tiers"):
        for key, _ in _keys(quiet, cm.get(section)):
            problem = chosen.key_problem(section, key.value)
            if problem is not None:
                errors.error(key.location, problem)


def _keys(r: SpecReader, node: yaml.Node | None) -> list[tuple[Name, yaml.Node]]:
    """A mapping keyed by free-form strings (extension names, vendor substrings)."""
    if node is None:
        return []
    if not isinstance(node, yaml.MappingNode):
        r.errors.error(r.loc(node), "expected a mapping")
        return []
    out = []
    for k, v in node.value:
        s = r.string(k, "key", re.compile(r"[A-Za-z0-9_ .+\-]+\Z"))
        if s is not None:
            out.append((s, v))
    return out


def spec_roles(runtime_source: str) -> dict[str, dict[str, str]] | None:
    """The ``SPEC_ROLES`` literal of a hand-written runtime module (section -> role -> when it is needed: ``""``
    always, ``"f"`` when the function role f is bound, ``"!f"`` when it is null), or None where it has none."""
    roles: dict[str, dict[str, str]] | None = module_literal(runtime_source, "SPEC_ROLES")
    return roles


def module_literal(source: str, name: str) -> Any:
    """The literal a module's source assigns to ``name`` at its top level, or None where it assigns none."""
    for n in ast.parse(source).body:
        target: ast.expr
        if isinstance(n, ast.AnnAssign):
            target, value = n.target, n.value
        elif isinstance(n, ast.Assign):
            target, value = n.targets[0], n.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == name and value is not None:
            return ast.literal_eval(value)
    return None


def runtime_literal(runtime: Path, name: str) -> Any:
    """The literal ``name`` of a hand-written backend runtime, read without importing it: the module's, or that of
    whichever module of the package assigns it; None where none does."""
    for path in sorted(runtime.glob("*.py")) if runtime.is_dir() else [runtime]:
        text = path.read_text(encoding="utf-8")
        value = module_literal(text, name) if name in text else None
        if value is not None:
            return value
    return None


def runtime_paths(backends: Path = RUNTIME_BACKENDS) -> list[Path]:
    """The hand-written backend runtimes: each module ``backends/<name>.py`` and package ``backends/<name>/``
    (``ex. gpu/``: one module per concept), by name."""
    found = [p for p in backends.glob("*.py") if not p.name.startswith("_")]
    found += [p for p in backends.iterdir() if (p / "__init__.py").is_file()]
    return sorted(found, key=lambda p: p.stem)


def runtime_path(name: str) -> Path | None:
    """The hand-written backend runtime a spec's ``runtime: <name>`` names (see :func:`runtime_paths`), or None."""
    return next((p for p in runtime_paths() if p.stem == name), None)


def runtime_roles(runtime: Path) -> dict[str, dict[str, str]] | None:
    """The ``SPEC_ROLES`` of a hand-written backend runtime, read without importing it: the literal of the module,
    or of whichever module of the package assigns it; None where it declares none."""
    roles: dict[str, dict[str, str]] | None = runtime_literal(runtime, "SPEC_ROLES")
    return roles


@dataclass(frozen=True, slots=True, kw_only=True)
class NeededRoles:
    """The roles of a backend spec that its runtime reads, in the runtime's order (see :meth:`RoleTable.needed`)."""

    functions: tuple[str, ...]  # ex) ("init", "driver_version", ...)
    constants: tuple[str, ...]
    types: tuple[str, ...]


class RoleTable:
    """A backend spec's function / constant / type tables, resolved against its bound libraries.

    Construction checks every name (a located error, with a suggestion, for one the libraries do not
    declare).  The template reads roles through :meth:`fn`, :meth:`lib`, :meth:`const` and :meth:`ctype`;
    a role it asks for that the spec lacks is a located error, and so (see :meth:`unused`) is a role the
    spec declares that the template never reads: a misspelt role is never silently dead.
    """

    def __init__(self, spec: BackendSpec, libraries: Mapping[str, BoundLibrary]) -> None:
        self.spec = spec
        self.libraries = libraries
        # who reads the roles: the runtime module where the spec names one (its SPEC_ROLES), else the template
        self.reader = f"ironaccelerator_runtime.backends.{spec.runtime}" if spec.runtime else spec.template
        self.read: set[str] = set()
        errors = Collector()
        libs = [(key, libraries[key]) for key in spec.libraries if key in libraries]
        owner = {f.public: key for key, lib in libs for f in lib.functions}
        values: dict[str, int] = {}
        for _, lib in libs:
            for e in lib.enums:
                values.update((c.name, c.value) for c in e.constants)
            values.update((c.name, c.value) for c in lib.constants if isinstance(c.value, int))
        typenames = set(C_BUILTINS)
        for _, lib in libs:
            typenames.update(t.name for t in lib.header.typedefs)
        self.functions: dict[str, tuple[str, str] | None] = {}
        for role, name in spec.functions:
            if name is None:
                self.functions[role.value] = None
            elif name.value not in owner:
                errors.error(name.location, f"'{name}' (function role '{role}') is not a function of "
                             f"{' or '.join(spec.libraries)}{suggest(name.value, owner)}")
            else:
                self.functions[role.value] = (owner[name.value].partition(".")[2], name.value)
        # The functions a library spec already names for the backend's compiled paths (kernel_launch,
        # pool_memory, device_memory) are stated there once: their roles come from it, and stating them here too is an error
        # (a disagreement would silently turn the compiled path off).
        stated = {role.value: (role, name) for role, name in spec.functions}
        for key, lib in libs:
            derived: list[tuple[str, Any, str]] = []
            if lib.spec.kernel_launch is not None:
                derived.append(("launch", lib.spec.kernel_launch, "kernel_launch"))
            if lib.spec.pool_memory is not None:
                derived += [("pool_alloc", lib.spec.pool_memory.alloc, "pool_memory alloc"),
                            ("pool_free", lib.spec.pool_memory.free, "pool_memory free")]
            if lib.spec.device_memory is not None:
                derived += [("alloc", lib.spec.device_memory.alloc, "device_memory alloc"),
                            ("free", lib.spec.device_memory.free, "device_memory free")]
            for role_name, fname, what in derived:
                if role_name in stated:
                    role, name = stated[role_name]
                    where = f"{fname.location.file}:{fname.location.line}:{fname.location.col}"
                    errors.error(role.location, f"function role '{role_name}' is stated by {key}'s {what} "
                                 f"({fname.value}, {where}): remove it here, the library spec states it once")
                else:
                    self.functions[role_name] = (key.partition(".")[2], fname.value)
        self.constants: dict[str, tuple[str, int] | None] = {}
        for role, names in spec.constants:
            value = 0
            for n in names:
                if n.value not in values:
                    errors.error(n.location, f"'{n}' (constant role '{role}') is not an enum constant or integer "
                                 f"macro of {' or '.join(spec.libraries)}{suggest(n.value, values)}")
                else:
                    value |= values[n.value]
            self.constants[role.value] = (" | ".join(n.value for n in names), value) if names else None
        self.types: dict[str, str] = {}
        for role, t in spec.types:
            base = " ".join(w for w in t.value.replace("*", " ").split() if w != "const")
            if base not in typenames:
                errors.error(t.location, f"'{base}' (type role '{role}') is not a C type or a typedef of "
                             f"{' or '.join(spec.libraries)}{suggest(base, typenames)}")
            self.types[role.value] = t.value
        if spec.arch_field is not None:
            field = spec.arch_field.value
            if not any(re.search(rf"\b{re.escape(field)}\b", d) for _, lib in libs for d in lib.declarations):
                errors.error(spec.arch_field.location, f"no struct of {' or '.join(spec.libraries)} has a field "
                             f"'{field}'")
        errors.check()

    def _get(self, table: dict[str, Any], kind: str, role: str) -> Any:
        self.read.add(f"{kind}:{role}")
        if role not in table:
            raise UserError([Diagnostic(location=self.spec.section(kind + "s"),
                                        message=f"{self.reader} needs the {kind} role '{role}': add "
                                        f"'{role}: <{kind}>' to {kind}s" + ("" if kind == "type" else
                                                                          " (or null if the vendor has none)"))])
        return table[role]

    def fn(self, role: str) -> str | None:
        """The vendor function of ``role`` (None: the vendor has none)."""
        entry = self._get(self.functions, "function", role)
        return entry[1] if entry else None

    def lib(self, role: str) -> str | None:
        """The library (ex. ``driver``) exporting ``role``'s function."""
        entry = self._get(self.functions, "function", role)
        return entry[0] if entry else None

    def const(self, role: str) -> int | None:
        entry = self._get(self.constants, "constant", role)
        return entry[1] if entry else None

    def const_name(self, role: str) -> str:
        entry: tuple[str, int] | None = self._get(self.constants, "constant", role)
        return entry[0] if entry else "none"

    def ctype(self, role: str) -> str:
        t: str = self._get(self.types, "type", role)
        return t

    def needed(self, declared: Mapping[str, Mapping[str, str]]) -> NeededRoles:
        """The roles a runtime's ``SPEC_ROLES`` (``declared``) needs of this spec, each read (a missing one is a
        located error); a condition ``"f"`` / ``"!f"`` reads the function role f."""
        out: dict[str, list[str]] = {"functions": [], "constants": [], "types": []}
        tables: dict[str, dict[str, Any]] = {"functions": self.functions, "constants": self.constants,
                                             "types": self.types}
        for section, roles in declared.items():
            for role, when in roles.items():
                if when and (self.fn(when.lstrip("!")) is None) != when.startswith("!"):
                    continue
                self._get(tables[section], section[:-1], role)
                out[section].append(role)
        return NeededRoles(functions=tuple(out["functions"]), constants=tuple(out["constants"]),
                           types=tuple(out["types"]))

    def compiled_launch(self) -> tuple[int, int]:
        """(arguments, bytes) the compiled launch can pack where the library of the ``launch`` role names that
        function as its ``kernel_launch``, else (0, 0)."""
        lib = self.libraries[f"{self.spec.vendor}.{self.lib('launch')}"]
        kl = lib.kernel_launch
        return (kl.max_args, kl.max_bytes) if kl is not None and kl.public == self.fn("launch") else (0, 0)

    def compiled_pool(self) -> bool:
        """The library's ``pool_memory`` is this spec's ``pool_alloc`` and ``pool_free`` (one library)."""
        if self.fn("pool_alloc") is None or self.lib("pool_free") != self.lib("pool_alloc"):
            return False
        pm = self.libraries[f"{self.spec.vendor}.{self.lib('pool_alloc')}"].pool_memory
        return pm is not None and (pm.alloc, pm.free) == (self.fn("pool_alloc"), self.fn("pool_free"))

    def compiled_device_memory(self) -> bool:
        """The library's ``device_memory`` is this spec's ``alloc`` and ``free`` (one library)."""
        if self.fn("alloc") is None or self.lib("free") != self.lib("alloc"):
            return False
        dm = self.libraries[f"{self.spec.vendor}.{self.lib('alloc')}"].device_memory
        return dm is not None and (dm.alloc, dm.free) == (self.fn("alloc"), self.fn("free"))

    def unused(self) -> list[Diagnostic]:
        """Roles the spec declares that the template never read."""
        out = []
        for kind, entries in (("function", self.spec.functions), ("constant", self.spec.constants),
                              ("type", self.spec.types)):
            wanted = sorted(r.partition(":")[2] for r in self.read if r.startswith(kind + ":"))
            for role, _ in entries:
                if f"{kind}:{role.value}" not in self.read:
                    out.append(Diagnostic(location=role.location, message=f"{kind} role '{role}' is not used by "
                                          f"{self.reader}{suggest(role.value, wanted)}"))
        return out


__all__ = ["Surface", "BackendSpec", "RoleTable", "NeededRoles", "load_surface", "load_backend", "spec_roles",
           "runtime_paths", "runtime_path", "runtime_roles", "runtime_literal", "module_literal", "matchers",
           "matched_constants", "IDENT"]


def matched_constants(spec: BackendSpec, objc: Mapping[str, ObjcLibrary]) -> tuple[tuple[str, int], ...]:
    """Where the chosen matcher's keys name constants (its ``constant_prefix``): every ``<prefix><name>`` constant
    of the backend's Objective-C libraries as ``(name, value)``, in declaration order (what the runtime asks a
    device about); a key of the capability tables that no library declares is a located error with a
    suggestion.  Empty for a matcher that names none."""
    chosen = matchers()[spec.match]
    prefix = chosen.constant_prefix
    if prefix is None:
        return ()
    values = {name[len(prefix):]: value for key in spec.libraries if key in objc
              for name, value in objc[key].constants if name.startswith(prefix)}
    errors = Collector()
    reserved = {k for keys in chosen.special.values() for k in keys}
    for section, key, location in spec.capability_keys:
        if key not in reserved and key not in values:
            errors.error(location, f"{section} key '{key}' is not {chosen.constant_what}: no {prefix}{key} "
                         f"constant in {' or '.join(spec.libraries)}{suggest(key, list(values))}")
    errors.check()
    return tuple(values.items())


def render_surface(env: jinja2.Environment, surface: Surface, backends: list[BackendSpec],
                   libraries: Mapping[str, BoundLibrary], banner: Callable[[str], str], core: CoreSpec,
                   objc: Mapping[str, ObjcLibrary] | None = None, *,
                   generated_from: Mapping[str, Any] | None = None) -> dict[str, str]:
    """``ironaccelerator/_core.py`` (the core spec's data), ``__main__.py`` and each backend's module (``objc``: the
    Objective-C libraries, which a backend may name in ``libraries:`` too; ``generated_from``: what _core.py records
    as ``GENERATED_FROM``, :func:`pipeline.provenance`)."""
    objc = objc or {}
    ctx = dict(banner=banner(surface.path), surface=surface, backends=backends, core=core,
               generated_from=generated_from or {})
    out = {
        "ironaccelerator/_core.py": env.get_template("core/_core.py.j2").render(**ctx),
        "ironaccelerator/__main__.py": env.get_template("core/__main__.py.j2").render(**ctx),
    }
    problems: list[Diagnostic] = []
    for b in backends:
        missing = [lib for lib in b.libraries if lib not in libraries and lib not in objc]
        if missing:
            # the backend's libraries were skipped (no SDK headers): leave its module as it is
            continue
        runtime = runtime_path(b.runtime) if b.runtime else None
        declared = runtime_roles(runtime) if runtime is not None else None
        try:
            roles = RoleTable(b, libraries)
            needed = roles.needed(declared) if declared is not None else None
            constants = matched_constants(b, objc)
            text = env.get_template(b.template).render(banner=banner(b.path), spec=b, surface=surface,
                                                       libs={k: libraries[k] for k in b.libraries if k in libraries},
                                                       objc={k: objc[k] for k in b.libraries if k in objc},
                                                       match_constants=constants, matcher=matchers()[b.match],
                                                       roles=roles,
                                                       needed=needed, fn=roles.fn, lib=roles.lib, const=roles.const,
                                                       const_name=roles.const_name, ctype=roles.ctype)
        except UserError as e:
            problems += e.diagnostics
            continue
        problems += roles.unused()
        try:
            ast.parse(text)
        except SyntaxError as e:
            problems.append(Diagnostic(location=b.location, message=f"{b.template} renders invalid Python: {e}"))
        out[f"ironaccelerator/backends/{b.vendor}/_backend.py"] = text
    if problems:
        raise UserError(problems)
    return out
