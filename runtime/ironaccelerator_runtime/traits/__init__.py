"""The behavioural core surface every backend implements: one module per concept.

Base classes raise ``Error(kind=UNSUPPORTED)`` for any operation a backend does
not provide: a backend provides an operation by overriding its base method, which
is also how :meth:`Backend.supports` answers (``operations.py``).  Checked
operations validate and raise :class:`Error`; each ``*_unchecked`` twin skips
validation and bookkeeping and returns a :data:`Result` (the value, or the
:class:`Error` instead of raising it).

The modules, each building only on those before it (a name a later module defines appears in an earlier one's
annotations only):

- ``values``: ``DeviceId``, ``Capability``, ``DeviceLimits``, ``DeviceDescriptor``, ``IpcHandle``, ``Result``;
- ``checks``: argument and range checks (``check_size``, ``check_span``, ``host_span``, ``fill_pattern``,
  ``copy_region``, ``host_view``, ``not_a_launch``) and the base classes' Errors (``unsupported``);
- ``launch``: ``LaunchDims``, ``Scalar``, ``KernelLaunch``;
- ``module``: ``CompileOptions``/``compile_options``, ``Module``, ``Kernel``, ``KernelAttributes``, ``Graph``,
  ``compiler_log``;
- ``event``: ``Event``; ``callbacks``: host callbacks and ``InFlight`` (what pending work keeps alive);
- ``memory``: ``Allocation``, ``AllocationSlice``;
- ``device``: ``Device`` (its ``memory_pool`` imports ``pool`` when it makes the pool);
- ``stream``: ``Stream``;
- ``pool``: ``MemoryPool``, ``PooledAllocation``, ``PoolStats``, and ``device_span`` (the copy check that knows
  slices and pool blocks);
- ``backend``: ``Backend``; ``report``: what a registry reports (``python -m ironaccelerator``, whose command,
  ``inventory.py``, sits above this package); ``registry``: ``BackendRegistry``.

Import the names from this package (``from ironaccelerator_runtime.traits import Device``): which module defines
a name is not part of the interface.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..integers import _integer as _integer
    from .values import _SIZE_MAX as _SIZE_MAX
    from .values import Capability, DeviceDescriptor, DeviceId, DeviceLimits, IpcHandle, Result
    from .checks import (CopyRegion, check_size, check_span, copy_region, fill_pattern, host_span, host_view,
                         not_a_launch, unsupported)
    from .launch import KernelLaunch, LaunchDims, Scalar
    from .module import CompileOptions, Graph, Kernel, KernelAttributes, Module, compile_options, compiler_log
    from .event import Event
    from .callbacks import InFlight
    from .memory import Allocation, AllocationSlice
    from .device import Device
    from .stream import Stream
    from .pool import MemoryPool, PooledAllocation, PoolStats, device_span
    from .backend import Backend
    from .registry import BackendRegistry

__all__ = [
    "Allocation", "AllocationSlice", "Backend", "BackendRegistry", "Capability", "CompileOptions", "CopyRegion",
    "Device", "DeviceDescriptor", "DeviceId", "DeviceLimits", "Event", "Graph", "InFlight", "IpcHandle", "Kernel",
    "KernelAttributes", "KernelLaunch", "LaunchDims", "MemoryPool", "Module", "PoolStats", "PooledAllocation",
    "Result", "Scalar", "Stream", "check_size", "check_span", "compile_options", "compiler_log", "copy_region",
    "device_span", "fill_pattern", "host_span", "host_view", "not_a_launch", "unsupported",
]

# The modules in import order (each builds only on those before it).  They are imported on the first use of a name
# of the package (PEP 562), all of them at once -- but for ``BackendRegistry``, which needs none of the others: the
# registry's first use (``BackendRegistry.default().get(kind)``) may then start a backend's slow vendor start on a
# worker thread (registry.py, ``_EARLY_START``) before the rest of this package, and the backend, import beside it.
_MODULES = ("values", "checks", "launch", "module", "event", "callbacks", "memory", "device", "stream", "pool",
            "backend", "report", "registry")
# module -> the names the package takes from it
_NAMES = {
    "values": ("_SIZE_MAX", "Capability", "DeviceDescriptor", "DeviceId", "DeviceLimits", "IpcHandle", "Result"),
    "checks": ("CopyRegion", "check_size", "check_span", "copy_region", "fill_pattern", "host_span", "host_view",
               "not_a_launch", "unsupported"),
    "launch": ("KernelLaunch", "LaunchDims", "Scalar"),
    "module": ("CompileOptions", "Graph", "Kernel", "KernelAttributes", "Module", "compile_options", "compiler_log"),
    "event": ("Event",),
    "callbacks": ("InFlight",),
    "memory": ("Allocation", "AllocationSlice"),
    "device": ("Device",),
    "stream": ("Stream",),
    "pool": ("MemoryPool", "PooledAllocation", "PoolStats", "device_span"),
    "backend": ("Backend",),
    "registry": ("BackendRegistry",),
}


def __getattr__(name: str) -> Any:
    """A name of the package: ``BackendRegistry`` alone imports ``registry``; any other imports every module
    (:func:`_load`)."""
    if name == "BackendRegistry":
        from .registry import BackendRegistry

        globals()[name] = BackendRegistry
        return BackendRegistry
    if name in __all__ or name in ("_integer", "_SIZE_MAX"):
        _load()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def _load() -> None:
    """Import every module and bind the package's names, then bind into each module the names it imports only for
    type checking.

    The modules import one way, so an earlier module's annotations name later classes under ``TYPE_CHECKING``
    only.  Once the package has loaded, those names are set in each module's globals (where missing), so that
    ``typing.get_type_hints`` resolves every annotation at run time, as it did in the single module this
    package was split from: autodoc's signatures and ``operations.py`` (the return annotations of the methods
    that make objects) evaluate them there."""
    import importlib

    from ..integers import _integer

    g = globals()
    mods = [importlib.import_module(f"{__name__}.{m}") for m in _MODULES]
    for m, mod in zip(_MODULES, mods):
        for name in _NAMES.get(m, ()):
            g.setdefault(name, getattr(mod, name))
    g.setdefault("_integer", _integer)
    public = {name: g[name] for name in __all__}
    for mod in mods:
        for name, obj in public.items():
            mod.__dict__.setdefault(name, obj)
