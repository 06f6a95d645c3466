"""What a backend implements, derived from its classes: the trait surface is declared once, by the base classes.

The operations are the public methods and properties of the trait bases of :mod:`.traits` (``Backend``,
``Device``, ``Allocation``, ``MemoryPool``, ``Stream``, ``Event``, ``Module``, ``Kernel``, ``Graph``), named
``"Trait.method"`` (ex. ``"Stream.capture"``).  No spec lists them: adding a trait method is adding it to its base
class (and overriding it in the backends that provide it).

A backend implements an operation when:

- its class for that trait overrides the base method (whatever the base does); or
- the base method is a generic implementation, for every backend (``Device.close``, ``Device.memory_pool``,
  ``MemoryPool.alloc``, ``Stream.add_callback``, ``Event`` awaiting, ...), and what it builds on is there: the
  private hook the backend must provide (``Allocation.free`` calls ``_release``, ``Stream.copy_2d`` calls
  ``_copy_rect``, ``Device.from_dlpack`` calls ``_import_memory``) is overridden, or the operation it calls
  (``Stream.add_callback`` records an event) is implemented: :data:`NEEDS`;

and the operation making objects of that trait is implemented (no Graph operation where ``Stream.capture`` is
not).  A base method whose code raises :func:`.traits.unsupported` is a stub: not implemented unless overridden.
A backend class whose classes serve several vendors (``GpuBackend``: CUDA and HIP) names, in a classmethod
``_operations_lacking()``, the overridden operations its vendor's data leaves out (a function role its spec
leaves null, an interop protocol it does not list), which raise ``UNSUPPORTED`` there.

A backend's class for each trait is found from the return annotation of the operation making its objects on the
backend's classes (``Backend.open -> OpenCLDevice``, ``Device.create_stream -> OpenCLStream``, ...): the
annotations mypy checks against what the methods return.

What this answers is the surface: an implemented operation may still refuse some arguments or devices with
``UNSUPPORTED`` (Metal's ``alloc(MemoryKind.HOST)``, QNN's UNIFIED memory, a CUDA/HIP vendor function its spec
leaves null); the device's capability flags say those.  Derived once per backend class, then cached.
"""

from __future__ import annotations

import inspect
import re
import weakref
from typing import Any

from ironaccelerator._core import ErrorKind

from .errors import fail
from .traits import Allocation, Backend, Device, Event, Graph, Kernel, MemoryPool, Module, Stream

__all__ = ["OPERATIONS", "NEEDS", "implemented", "supports", "operations_of"]

# The trait bases, each with the operation that makes its objects (None: the backend object itself).
TRAITS: tuple[tuple[type, str | None], ...] = (
    (Backend, None),
    (Device, "Backend.open"),
    (Allocation, "Device.alloc"),
    (MemoryPool, "Device.memory_pool"),
    (Stream, "Device.create_stream"),
    (Event, "Stream.record_event"),
    (Module, "Device.load_module"),
    (Kernel, "Module.kernel"),
    (Graph, "Stream.capture"),
)

# Generic operations of the bases that work only where what they build on is there: a private hook of the same
# trait the backend must override ("Trait._hook"), or another operation that must be implemented.
# (tests/test_operations.py checks that every generic operation calling a stub hook is listed here)
NEEDS: dict[str, str] = {
    "Device.from_dlpack": "Device._import_memory",
    "Device.memory_pool": "Device.alloc",
    "Allocation.free": "Allocation._release",
    "Allocation.free_unchecked": "Allocation._release",
    "Stream.copy_2d": "Stream._copy_rect",
    "Stream.copy_3d": "Stream._copy_rect",
    "Stream.add_callback": "Stream.record_event",
    "Stream.wait": "Stream.record_event",
    "Graph.launch_unchecked": "Graph.launch",
}


def _is_operation(value: Any) -> bool:
    return isinstance(value, (property, classmethod, staticmethod)) or inspect.isfunction(value)


def _function(value: Any) -> Any:
    """The function under a method, property or class/static method (None if none)."""
    if isinstance(value, property):
        return value.fget
    if isinstance(value, (classmethod, staticmethod)):
        return value.__func__
    return value if inspect.isfunction(value) else None


def _stub(value: Any) -> bool:
    """A base method whose code raises ``unsupported(...)``: not implemented unless overridden."""
    fn = _function(value)
    return fn is not None and "unsupported" in fn.__code__.co_names


OPERATIONS: tuple[str, ...] = tuple(f"{base.__name__}.{name}" for base, _ in TRAITS
                                    for name, value in vars(base).items()
                                    if not name.startswith("_") and _is_operation(value))
"""Every operation of the trait surface, in the order of the bases' source."""

_BASES = {base.__name__: base for base, _ in TRAITS}
_MADE_BY = {base.__name__: made_by for base, made_by in TRAITS}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def _made_class(owner: type, method: str, base: type) -> type:
    """The class ``owner.method`` says (its return annotation) it makes, of trait ``base``; ``base`` where the
    annotation names none more derived."""
    fn = _function(inspect.getattr_static(owner, method, None))
    if fn is None:
        return base
    fn = inspect.unwrap(fn)  # (a contextlib.contextmanager: the annotations and globals of the generator)
    ann = getattr(fn, "__annotations__", {}).get("return")
    if isinstance(ann, type):
        return ann if issubclass(ann, base) else base
    found: list[type] = []
    for name in _IDENT.findall(ann if isinstance(ann, str) else ""):
        head, *rest = name.split(".")
        value = fn.__globals__.get(head)
        for part in rest:
            value = getattr(value, part, None)
        if isinstance(value, type) and issubclass(value, base):
            found.append(value)
    best = base
    for cls in found:
        if issubclass(cls, best):
            best = cls
    return best


def _derive(backend: type) -> dict[str, bool]:
    classes: dict[str, type] = {"Backend": backend}
    out: dict[str, bool] = {}
    lacking = getattr(backend, "_operations_lacking", None)
    lacks = frozenset(lacking()) if callable(lacking) else frozenset()

    def implemented_(op: str) -> bool:
        if op in out:
            return out[op]
        trait, _, name = op.partition(".")
        base, cls = _BASES[trait], classes[trait]
        made_by = _MADE_BY[trait]
        if op in lacks or (made_by is not None and not implemented_(made_by)):
            out[op] = False
            return False
        own = inspect.getattr_static(cls, name, None)
        inherited = inspect.getattr_static(base, name)
        if own is not inherited:
            ok = True
        elif _stub(inherited):
            ok = False
        else:
            need = NEEDS.get(op)
            if need is None:
                ok = True
            elif need.partition(".")[2].startswith("_"):
                ok = inspect.getattr_static(cls, need.partition(".")[2], None) is not inspect.getattr_static(
                    base, need.partition(".")[2])
            else:
                ok = implemented_(need)
        out[op] = ok
        return ok

    for base, made_by in TRAITS:
        if made_by is not None:
            owner, _, method = made_by.partition(".")
            classes[base.__name__] = _made_class(classes[owner], method, base)
    for op in OPERATIONS:
        implemented_(op)
    return out


_CACHE: weakref.WeakKeyDictionary[type, dict[str, bool]] = weakref.WeakKeyDictionary()


def operations_of(backend: type) -> dict[str, bool]:
    """Every operation of :data:`OPERATIONS` -> whether backend class ``backend`` implements it (cached per
    class)."""
    table = _CACHE.get(backend)
    if table is None:
        table = _derive(backend)
        _CACHE[backend] = table
    return table


def implemented(backend: type) -> tuple[str, ...]:
    """The operations backend class ``backend`` implements, in :data:`OPERATIONS` order."""
    table = operations_of(backend)
    return tuple(op for op in OPERATIONS if table[op])


def supports(backend: type, operation: object, name: str | None = None) -> bool:
    """Whether backend class ``backend`` (named ``name`` in errors) implements ``operation`` (``"Trait.method"``);
    anything else is ``INVALID_VALUE`` naming the operations."""
    table = operations_of(backend)
    ok = table.get(operation) if isinstance(operation, str) else None
    if ok is None:
        raise fail(ErrorKind.INVALID_VALUE, "Backend.supports", f"{operation!r:.80} is not an operation of the trait "
                   f"surface (\"Trait.method\"); the operations: {', '.join(OPERATIONS)}", name)
    return ok
