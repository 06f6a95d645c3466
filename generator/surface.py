"""The trait surface: ``specs/core.yaml``'s data sections and the vendor backend specs.

``specs/<vendor>/backend.yaml`` says which core backend a vendor implements, with
which template, which trait operations it implements or marks unsupported (every
one must be either), and its capability translation as data.  After rendering,
:func:`check_backend_module` reads the generated module back (``ast``) and refuses
an operation marked implemented that the backend's class does not define.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from .diagnostics import Collector, Diagnostic, UserError, suggest
from .ir import Location
from .spec import IDENT, Name, _Reader, compose

UPPER = re.compile(r"[A-Z][A-Z0-9_]*\Z")


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
class TraitSpec:
    name: str  # ex) Stream
    operations: tuple[str, ...]


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
    traits: tuple[TraitSpec, ...]

    def operations(self) -> list[str]:
        return [f"{t.name}.{op}" for t in self.traits for op in t.operations]


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendSpec:
    """``specs/<vendor>/backend.yaml``."""

    path: str
    location: Location
    kind: str  # ex) OPENCL
    vendor: str  # ex) opencl -> ironaccelerator.backends.opencl
    class_prefix: str  # ex) OpenCL -> OpenCLBackend, OpenCLDevice, ...
    template: str  # ex) backends/opencl.py.j2
    libraries: tuple[str, ...]  # ex) ("opencl.cl",)
    implemented: tuple[Name, ...]
    unsupported: tuple[tuple[Name, str], ...]
    flags: tuple[tuple[str, tuple[str, ...]], ...]  # backend-defined key -> CapabilityFlags
    tiers: tuple[tuple[str, str], ...]  # backend-defined key -> ComputeTier
    vendors: tuple[tuple[str, str], ...]  # substring of the vendor's name -> Vendor

    @property
    def module(self) -> str:
        return f"ironaccelerator.backends.{self.vendor}"


def load_surface(path: Path, display: str) -> Surface:
    root = compose(display, path.read_text(encoding="utf-8"))
    errors = Collector()
    r = _Reader(display, errors)
    m = r.mapping(root, (), (), "core spec") or {}

    def table(key: str, with_doc: bool = True, extra: str | None = None) -> tuple[Named, ...]:
        out = []
        for name, node in r.keyed(m.get(key), key):
            if not UPPER.match(name.value):
                errors.error(name.location, f"{key} entry '{name}' must be UPPER_CASE")
            doc, value = "", 0
            if extra is not None:
                em = r.mapping(node, (extra, "doc"), (extra,), f"{key} entry '{name}'") or {}
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
        dm = r.mapping(node, ("size", "class", "numpy"), ("size", "class"), f"dtype '{name}'") or {}
        size = r.integer(dm.get("size"), "size") or 0
        cls = r.ident(dm.get("class"), "class")
        if cls is not None and cls.value not in classes:
            errors.error(cls.location, f"'{cls}' is not a numeric class{suggest(cls.value, classes)}")
        numpy = r.ident(dm.get("numpy"), "numpy")
        dtypes.append(DTypeSpec(name=name.value, size=size, numeric_class=cls.value if cls else "",
                                dlpack_code=classes[cls.value].dlpack_code if cls and cls.value in classes else 0,
                                numpy=numpy.value if numpy else None))
    traits = []
    for name, node in r.keyed(m.get("traits"), "trait"):
        ops = r.seq(node, f"operations of {name}", lambda n: r.ident(n, "operation"))
        traits.append(TraitSpec(name=name.value, operations=tuple(o.value for o in ops)))
    surface = Surface(path=display, backend_kinds=backend_kinds, vendors=vendors, numeric_classes=numeric_classes,
                      dtypes=tuple(dtypes), capability_flags=table("capability_flags"),
                      compute_tiers=table("compute_tiers"), memory_kinds=table("memory_kinds"), traits=tuple(traits))
    errors.check()
    return surface


def load_backend(path: Path, display: str, surface: Surface) -> BackendSpec:
    root = compose(display, path.read_text(encoding="utf-8"))
    errors = Collector()
    r = _Reader(display, errors)
    m = r.mapping(root, ("backend", "vendor", "class_prefix", "template", "libraries", "operations", "capabilities"),
                  ("backend", "vendor", "class_prefix", "template", "operations"), "backend spec") or {}
    kinds = [b.name for b in surface.backend_kinds]
    kind = r.ident(m.get("backend"), "backend")
    if kind is not None and kind.value not in kinds:
        errors.error(kind.location, f"'{kind}' is not a backend kind of {surface.path}{suggest(kind.value, kinds)}")
    vendor = r.ident(m.get("vendor"), "vendor")
    prefix = r.ident(m.get("class_prefix"), "class_prefix")
    template = r.string(m.get("template"), "template", re.compile(r"backends/[a-z0-9_]+\.py\.j2\Z"),
                        ": expected backends/<name>.py.j2")
    libraries = r.seq(m.get("libraries"), "libraries", lambda n: r.string(n, "library", re.compile(r"[a-z0-9_]+\.[a-z0-9_]+\Z"),
                                                                             ": expected vendor.library"))
    om = r.mapping(m.get("operations"), ("implemented", "unsupported"), (), "operations") or {}
    all_ops = surface.operations()
    implemented = r.seq(om.get("implemented"), "implemented", lambda n: r.string(n, "operation", re.compile(r"\w+\.\w+\Z")))
    unsupported = []
    for op, node in _dotted(r, om.get("unsupported")):
        reason = r.scalar(node, f"reason for {op}") or ""
        unsupported.append((op, reason))
    seen: dict[str, Name] = {}
    for op in list(implemented) + [o for o, _ in unsupported]:
        if op.value not in all_ops:
            errors.error(op.location, f"'{op}' is not a trait operation of {surface.path}{suggest(op.value, all_ops)}")
        elif op.value in seen:
            errors.error(op.location, f"'{op}' is listed both as implemented and unsupported (or twice)")
        seen[op.value] = op
    missing = [op for op in all_ops if op not in seen]
    if missing and kind is not None:
        errors.error(om and r.loc(m["operations"]) or Location(file=display, line=1, col=1),
                     f"the {kind} backend neither implements nor marks unsupported: {', '.join(missing)}")
    cm = r.mapping(m.get("capabilities"), ("flags", "tiers", "vendors"), (), "capabilities") or {}
    flag_names = [f.name for f in surface.capability_flags]
    tier_names = [t.name for t in surface.compute_tiers]
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
    errors.check()
    assert kind and vendor and prefix and template
    return BackendSpec(path=display, location=Location(file=display, line=1, col=1), kind=kind.value,
                       vendor=vendor.value, class_prefix=prefix.value, template=template.value,
                       libraries=tuple(x.value for x in libraries), implemented=implemented,
                       unsupported=tuple(unsupported), flags=tuple(flags), tiers=tuple(tiers), vendors=tuple(vendors))


def _keys(r: _Reader, node: yaml.Node | None) -> list[tuple[Name, yaml.Node]]:
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


def _dotted(r: _Reader, node: yaml.Node | None) -> list[tuple[Name, yaml.Node]]:
    return [(k, v) for k, v in _keys(r, node)]


def check_backend_module(spec: BackendSpec, source: str, surface: Surface) -> None:
    """Refuse a rendered backend whose classes lack an operation its spec says is implemented."""
    tree = ast.parse(source)
    classes = {n.name: {f.name for f in n.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
               for n in tree.body if isinstance(n, ast.ClassDef)}
    problems = []
    generic = {"Device.memory_pool", "Allocation.free", "Allocation.free_unchecked"}  # implemented by the core
    for op in spec.implemented:
        trait, _, method = op.value.partition(".")
        cls = spec.class_prefix + trait
        if op.value in generic:
            continue
        if cls not in classes:
            problems.append(Diagnostic(location=op.location, message=f"{spec.template} defines no class {cls} "
                                       f"for the implemented operation {op}"))
        elif method not in classes[cls]:
            problems.append(Diagnostic(location=op.location, message=f"{op} is marked implemented but "
                                       f"{spec.template}'s {cls} does not define {method}()"))
    for op, _ in spec.unsupported:
        trait, _, method = op.value.partition(".")
        if method in classes.get(spec.class_prefix + trait, set()):
            problems.append(Diagnostic(location=op.location, message=f"{op} is marked unsupported but "
                                       f"{spec.template} defines it"))
    if problems:
        raise UserError(problems)


__all__ = ["Surface", "BackendSpec", "load_surface", "load_backend", "check_backend_module", "IDENT"]


def render_surface(env, surface: Surface, backends: list[BackendSpec], libraries: dict[str, object],  # type: ignore[no-untyped-def]
                   banner: str) -> dict[str, str]:
    """``ironaccelerator/_core.py``, ``_traits.py``, ``__main__.py`` and each backend's module."""
    ctx = dict(banner=banner, surface=surface, backends=backends)
    out = {
        "ironaccelerator/_core.py": env.get_template("core/_core.py.j2").render(**ctx),
        "ironaccelerator/_traits.py": env.get_template("core/_traits.py.j2").render(**ctx),
        "ironaccelerator/__main__.py": env.get_template("core/__main__.py.j2").render(**ctx),
    }
    problems: list[Diagnostic] = []
    for b in backends:
        missing = [lib for lib in b.libraries if lib not in libraries]
        if missing:
            # the backend's libraries were skipped (no SDK headers): leave its module as it is
            continue
        text = env.get_template(b.template).render(banner=banner, spec=b, surface=surface,
                                                   libs={k: libraries[k] for k in b.libraries})
        try:
            check_backend_module(b, text, surface)
        except UserError as e:
            problems += e.diagnostics
        except SyntaxError as e:
            problems.append(Diagnostic(location=b.location, message=f"{b.template} renders invalid Python: {e}"))
        out[f"ironaccelerator/backends/{b.vendor}/_backend.py"] = text
    if problems:
        raise UserError(problems)
    return out
