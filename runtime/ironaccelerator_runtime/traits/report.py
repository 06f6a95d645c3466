"""What a :class:`BackendRegistry` reports (``BackendRegistry.report``; ``python -m ironaccelerator``, whose command
is ``inventory.py``, prints it): per backend, available or why not, its versions, devices, the operations of the
trait surface it implements, the binding mode of each of its library modules and what it was generated from."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ironaccelerator._core import BackendKind, CapabilityFlags

from ..errors import Error

if TYPE_CHECKING:
    from .registry import BackendRegistry
    from .values import DeviceDescriptor


def binding_modes() -> list[dict[str, Any]]:
    """Every generated library module (``ironaccelerator.backends.<vendor>.<library>``), imported (that loads no
    vendor library) to learn its binding mode: ``{"module", "backend", "library", "mode"}`` with ``mode`` "api"
    (the compiled cffi module), "abi" (cffi ABI mode: ``reason`` says why, ``expected`` whether on purpose) or
    "error" (the module does not import: ``reason``), in module name order."""
    import importlib
    import importlib.util
    import pkgutil

    from .. import loader

    out: list[dict[str, Any]] = []
    backends = importlib.import_module("ironaccelerator.backends")
    for vendor in sorted(m.name for m in pkgutil.iter_modules(backends.__path__) if m.ispkg):
        vpkg = importlib.import_module(f"ironaccelerator.backends.{vendor}")
        for lib in sorted(m.name for m in pkgutil.iter_modules(vpkg.__path__) if m.ispkg):
            name = f"ironaccelerator.backends.{vendor}.{lib}"
            if not any(os.path.isfile(os.path.join(d, lib, "_binding.py")) for d in vpkg.__path__):
                continue
            try:
                importlib.import_module(name)
            except Exception as e:  # noqa: BLE001 - reported, not raised: the inventory lists what it can
                entry = loader.MODES.get(name) or {"module": name, "backend": None, "library": lib, "mode": "error",
                                                   "expected": False}
                entry = {**entry, "mode": "error", "reason": f"{e.__class__.__name__}: {e}"}
            else:
                entry = loader.MODES.get(name) or {"module": name, "backend": None, "library": lib, "mode": "unknown",
                                                   "reason": None, "expected": False}
            out.append(dict(entry))
    return out



def device_entry(d: DeviceDescriptor) -> dict[str, Any]:
    """One device as plain data (the JSON of ``--json``)."""
    lim = d.limits
    return {
        "id": str(d.id), "index": d.id.index, "name": d.name, "vendor": d.vendor.name,
        "tier": d.capability.tier.name,
        "flags": [str(f.name) for f in CapabilityFlags if f and f in d.capability.flags],
        "vendor_version": d.capability.vendor_version, "total_memory": d.total_memory,
        "max_alloc": lim.max_alloc, "compute_units": d.compute_units,
        "limits": {"max_block": list(lim.max_block), "max_threads_per_block": lim.max_threads_per_block,
                   "max_grid": list(lim.max_grid), "max_shared_mem": lim.max_shared_mem,
                   "max_work_items": lim.max_work_items},
    }


def generated_from(kind: str) -> dict[str, Any]:
    """What backend ``kind``'s part of the package was generated from (``ironaccelerator._core.GENERATED_FROM``,
    recorded by ``ironaccel-gen generate``): the generator, the digest (``sha256:...``) of the core spec, of the
    backend spec and of each of its library specs (named relative to the spec directory), and each library's SDK
    version (its module's ``SDK_VERSION``; None where the module does not import).  Imports the library modules,
    which never loads a vendor library."""
    import importlib

    from ironaccelerator import _core

    record: dict[str, Any] = getattr(_core, "GENERATED_FROM", {})
    specs: dict[str, str] = record.get("specs", {})
    backend = record.get("backends", {}).get(kind)
    libraries: dict[str, Any] = {}
    for name, lib in record.get("libraries", {}).items():
        if lib["backend"] != kind:
            continue
        try:
            version = getattr(importlib.import_module(f"ironaccelerator.backends.{name}"), "SDK_VERSION", None)
        except Exception:  # (a report: a library that does not import shows no version, and the report goes on)
            version = None
        libraries[name] = {"spec": lib["spec"], "digest": specs.get(lib["spec"]), "sdk_version": version}
    return {
        "generator": record.get("generator"),
        "core_spec": {"spec": "core.yaml", "digest": specs.get("core.yaml")},
        "backend_spec": None if backend is None else {"spec": backend["spec"], "digest": specs.get(backend["spec"])},
        "libraries": libraries,
    }


def operations(kind: BackendKind, backend: Any = None) -> list[str] | None:
    """The operations of the trait surface backend ``kind`` implements (``Backend.operations()``, derived from its
    classes): of ``backend`` where it loaded, else of its built-in class (``BUILTIN_BACKENDS``: importing it loads
    no vendor library); None where neither is there."""
    import importlib

    from ironaccelerator import _core

    from ..operations import implemented

    cls = type(backend) if backend is not None else None
    if cls is None:
        where = _core.BUILTIN_BACKENDS.get(kind)
        if where is None:
            return None
        module, _, name = where.partition(":")
        try:
            cls = getattr(importlib.import_module(module), name)
        except Exception:  # (a report: a backend whose module does not import lists none, and the report goes on)
            return None
    return list(implemented(cls))


def describe(registry: BackendRegistry) -> list[dict[str, Any]]:
    """Every backend kind, in order: ``{"backend", "dlpack_device", "available", "error" (why not, or why no
    devices), "error_kind", "versions", "devices": [device_entry, ...], "operations": [the trait operations it
    implements (:func:`operations`), "generated_from": generated_from(...), "modules": [its library modules and their
    binding modes (:func:`binding_modes`)]}``, of ``registry``'s backends."""
    out: list[dict[str, Any]] = []
    modes = binding_modes()
    for kind in BackendKind:
        entry: dict[str, Any] = {"backend": kind.name, "dlpack_device": kind.dlpack_device, "available": False,
                                 "error": None, "error_kind": None, "versions": {}, "devices": [],
                                 "operations": None}
        entry["generated_from"] = generated_from(kind.name)
        entry["modules"] = [{k: v for k, v in m.items() if k != "backend"} for m in modes if m["backend"] == kind.name]
        out.append(entry)
        try:
            b = registry.get(kind)
        except Error as e:
            entry.update(error=str(e), error_kind=e.kind.name, operations=operations(kind))
            continue
        entry["available"] = True
        entry["operations"] = operations(kind, b)
        try:
            entry["versions"] = dict(b.versions())
        except Error as e:  # a version query that fails says so in place of the versions
            entry["versions"] = {"error": f"{e.kind.name}: {e}"}
        try:
            entry["devices"] = [device_entry(d) for d in b.devices()]
        except Error as e:
            entry.update(error=str(e), error_kind=e.kind.name)
    return out


def _mib(n: int | None) -> str:
    return "?" if n is None else f"{n // (1 << 20)} MiB"


def _module_lines(e: dict[str, Any]) -> list[str]:
    """A backend's library modules and their binding modes (a line), then a line per module not in API mode with
    the reason.  An unavailable backend shows them only where a module is not in API mode."""
    mods = e.get("modules") or []
    if not mods:
        return []
    lines = ["  binding: " + ", ".join(f"{m['module'].rpartition('.backends.')[2]} {m['mode']}" for m in mods)]
    lines += [f"    {m['module']}: {m['mode']}: {m['reason']}" for m in mods if m["mode"] != "api" and m.get("reason")]
    return lines


def text(entries: list[dict[str, Any]]) -> list[str]:
    """The human report: a line per backend, its versions, then a line per device."""
    lines = []
    for e in entries:
        name = e["backend"]
        if not e["available"]:
            lines.append(f"{name}: unavailable: {e['error']}")
            if any(m["mode"] != "api" for m in e.get("modules") or []):  # (one line per backend otherwise)
                lines += _module_lines(e)
            continue
        devs = e["devices"]
        head = f"{name}: library loaded, {len(devs)} device{'s' if len(devs) != 1 else ''}"
        if e["error"] is not None:
            head = f"{name}: library loaded, no devices ({e['error_kind']}: {e['error']})"
        lines.append(head)
        if e["versions"]:
            lines.append("  versions: " + ", ".join(f"{k} {v}" for k, v in e["versions"].items()))
        lines += _module_lines(e)
        for d in devs:
            lim = d["limits"]
            lines.append(f"  {d['id']}: {d['name']} ({d['vendor']}, {d['tier']}, {_mib(d['total_memory'])}, "
                         f"max alloc {_mib(d['max_alloc'])}, {d['compute_units']} CUs, "
                         f"block <= {lim['max_threads_per_block']}, {d['vendor_version']}; "
                         f"{'|'.join(d['flags']) or '-'})")
    return lines
