"""The OpenCL backend: the core surface over the generated ``ironaccelerator.backends.opencl.cl``.

Streams are in-order command queues with profiling enabled; kernels are built
from OpenCL C source (a failed build raises ``COMPILE_FAILED`` with the build
log); ``LaunchDims`` maps to a 3-D NDRange with global = grid x block and local = block (given
explicitly, never NULL).  Hot paths call the raw (unchecked) C functions directly.

What is per-spec data (``specs/opencl/backend.yaml``: extension -> capability flags, device type -> tier,
vendor names) arrives as an :class:`OpenCLTables`, rendered into the generated
``ironaccelerator.backends.opencl._backend``, whose ``OpenCLBackend`` subclasses the one here with it.

One module per concept: :mod:`.tables` (the capability tables and the loaded binding), :mod:`.device` (the backend
and its devices), :mod:`.memory` (allocations), :mod:`.stream` (streams and events), :mod:`.module` (programs and
kernels) and :mod:`.args` (a launch's kernel arguments).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .tables import OpenCLTables
    from .device import OpenCLBackend, OpenCLDevice
    from .memory import OpenCLAllocation
    from .stream import OpenCLEvent, OpenCLStream
    from .module import OpenCLKernel, OpenCLModule

__all__ = ["OpenCLAllocation", "OpenCLBackend", "OpenCLDevice", "OpenCLEvent", "OpenCLKernel", "OpenCLModule",
           "OpenCLStream", "OpenCLTables"]

# name -> the module that defines it
_WHERE = {"OpenCLTables": "tables", "OpenCLBackend": "device", "OpenCLDevice": "device", "OpenCLAllocation": "memory",
          "OpenCLEvent": "stream", "OpenCLStream": "stream", "OpenCLKernel": "module", "OpenCLModule": "module"}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    from . import device, memory, module, stream  # noqa: F401  (the backend's modules, all at once: as before)

    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
