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

from .tables import OpenCLTables
from .device import OpenCLBackend, OpenCLDevice
from .memory import OpenCLAllocation
from .stream import OpenCLEvent, OpenCLStream
from .module import OpenCLKernel, OpenCLModule

__all__ = ["OpenCLAllocation", "OpenCLBackend", "OpenCLDevice", "OpenCLEvent", "OpenCLKernel", "OpenCLModule",
           "OpenCLStream", "OpenCLTables"]
