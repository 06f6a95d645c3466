"""The CUDA and ROCm/HIP backends: the core surface over a GPU vendor's generated bindings.

One hand-written backend for every GPU vendor whose API has the CUDA driver's shape.  What differs between
vendors is data, rendered from the vendor's ``specs/<vendor>/backend.yaml`` (by
``templates/backends/gpu.py.j2``) into its ``ironaccelerator.backends.<vendor>._backend``: a :class:`GpuTables`
(role -> vendor function, constants, C types, capability tables, what the compiled paths take) and small
subclasses of the classes here named after the vendor (``CudaDevice``, ``HipStream``, ...), which say which of
them play which part.  A role the vendor lacks is ``None`` in the tables, and the code here branches on that
(``context_retain``: primary contexts, else ``set_device``; ``program_create``: source compilation;
``param_info``: argument checks; ``device_properties``: the architecture's name).  Importing this package loads no
vendor library; constructing a backend does, and raises ``Error(LIBRARY_NOT_FOUND)`` (listing the files tried)
when it cannot.

Streams are non-blocking; copies are asynchronous (host buffers are kept alive until an event recorded after
them, the stream or the device is seen complete: :class:`InFlight`); events record timing.  Kernel arguments
are packed by :func:`pack_args` into a ``void *[]`` of pointers to the values, and checked against the
kernel's parameter info where the vendor has it (``param_info``).  Hot paths call the raw (unchecked)
functions, bound once per object (``Device._alloc``, ``Stream._launch``, ...).

One module per concept; this package re-exports their public names (what the generated backends subclass):

- ``tables``: :data:`SPEC_ROLES` (what the generator reads from a vendor's spec) and :class:`GpuTables`;
- ``args``: :func:`pack_args` and the launch fast path's argument plans;
- ``api``: :class:`GpuApi`, each function role bound to its raw vendor function;
- ``context``: the thread's current context or device, and the primary-context retains;
- ``compile``: :func:`classify_image` and the runtime compiler (:func:`compile_program`);
- ``backend``, ``device``, ``memory``, ``event``, ``module``, ``graph``, ``stream``, ``pool``: :class:`GpuBackend`,
  :class:`GpuDevice`, :class:`GpuAllocation`, :class:`GpuEvent`, :class:`GpuModule` and :class:`GpuKernel`,
  :class:`GpuGraph`, :class:`GpuStream`, :class:`GpuStreamOrderedPool` and :class:`GpuPoolAllocation`.
"""

from __future__ import annotations

from ironaccelerator_runtime.backends.gpu.api import GpuApi
from ironaccelerator_runtime.backends.gpu.args import PackedArgs, pack_args
from ironaccelerator_runtime.backends.gpu.backend import GpuBackend
from ironaccelerator_runtime.backends.gpu.compile import (
    classify_image, compile_program, compile_source, compiler_version,
)
from ironaccelerator_runtime.backends.gpu.device import GpuDevice
from ironaccelerator_runtime.backends.gpu.event import GpuEvent
from ironaccelerator_runtime.backends.gpu.graph import GpuGraph
from ironaccelerator_runtime.backends.gpu.memory import GpuAllocation
from ironaccelerator_runtime.backends.gpu.module import GpuKernel, GpuModule
from ironaccelerator_runtime.backends.gpu.pool import GpuPoolAllocation, GpuStreamOrderedPool
from ironaccelerator_runtime.backends.gpu.stream import GpuStream
from ironaccelerator_runtime.backends.gpu.tables import SPEC_ROLES, GpuTables

from ironaccelerator_runtime.backends.gpu import context, device, event, graph, memory, module, pool, stream

# The names some modules use but cannot import at their top (the module that defines the name imports them: they
# import it for type checking only), bound once every module is loaded: Graph.launch and Stream.prefetch test
# isinstance(..., GpuStream / GpuDevice), and every annotation resolves at run time as it did in the one module
# this package was split from (autodoc evaluates them for the docs' signatures, operations.py the return
# annotations of the methods that make objects; tests/test_gpu_backends.py:
# test_every_annotation_of_the_gpu_package_resolves).
for _module, _name, _value in ((context, "GpuApi", GpuApi), (device, "GpuBackend", GpuBackend),
                               (event, "GpuDevice", GpuDevice), (graph, "GpuStream", GpuStream),
                               (memory, "GpuDevice", GpuDevice), (module, "GpuDevice", GpuDevice),
                               (pool, "GpuDevice", GpuDevice), (stream, "GpuDevice", GpuDevice)):
    setattr(_module, _name, _value)
del _module, _name, _value

__all__ = [
    "SPEC_ROLES", "GpuAllocation", "GpuApi", "GpuBackend", "GpuDevice", "GpuEvent", "GpuGraph", "GpuKernel",
    "GpuModule", "GpuPoolAllocation", "GpuStream", "GpuStreamOrderedPool", "GpuTables", "PackedArgs",
    "classify_image", "compile_program", "compile_source", "compiler_version", "pack_args",
]
