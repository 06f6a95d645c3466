"""The QNN backend: the core surface over the generated ``ironaccelerator.backends.qnn.interface`` (a backend
library's provider table: libQnnHtp.so) and ``.system`` (libQnnSystem: what a context binary holds).

What the trait surface means for QNN, which runs graphs, not source kernels:

* a :class:`QnnDevice` is one QNN device handle (``QnnDevice_create``) of the backend library; ``Backend.open``
  takes the HTP SoC model and/or architecture to build for (``soc=``, ``arch=``: a ``QnnHtpDevice_CustomConfig_t``
  given as the device's CUSTOM config);
* a :class:`QnnModule` is a context binary (``Device.load_module(binary)`` -> ``QnnContext_createFromBinary``),
  read first through libQnnSystem (``QnnSystemContext_getBinaryInfo``) for its graphs and their tensors;
* a :class:`QnnKernel` is one of its graphs (``module.kernel(name)`` -> ``QnnGraph_retrieve``), with the graph's
  input and output tensors (:class:`TensorInfo`);
* ``Stream.launch(KernelLaunch(graph, LaunchDims(), (in0, in1, out0)))`` executes the graph
  (``QnnGraph_execute``) with the allocations bound as RAW client buffers, inputs then outputs.  A graph has no
  launch geometry: any LaunchDims but the default is INVALID_VALUE.  The bound ``Qnn_Tensor_t`` arrays are
  cached per kernel, so a repeated launch of the same arguments only checks that none was freed;
* allocations are host memory (``ffi.new``; every MemoryKind but UNIFIED), bound as client buffers that QNN
  copies from and to; Stream copies are host copies (``memmove``), complete when they return;
  ``MemoryKind.UNIFIED`` would be QNN's registered shared memory (``QnnMem_register``): it is tried, and the
  library's refusal surfaces as UNSUPPORTED (the x86 HTP answers 1000, NOT_SUPPORTED, for every memory type);
* execution is synchronous where the library has no asynchronous execution (``QnnGraph_executeAsync`` answers
  1000 on the x86 HTP: remembered per device).  Events read the **host clock** (``time.perf_counter_ns``) when
  recorded, which is after the work before them completed, so ``elapsed_ms`` is host wall time between them.

Handles are freed in reverse lifecycle order: a context (module) before its device, a device before the
backend handle; each holds the owner of the handle it was made from (:class:`_Owned`), so closing a device or
dropping a module never frees a handle something alive still uses.

Capability translation (HTP architecture -> flags, tier) and the SoC model table are spec data
(``specs/qnn/backend.yaml``), rendered into ``ironaccelerator.backends.qnn._backend`` as a :class:`QnnTables`.

One module per concept: :mod:`.tables` (the tables, the loaded binding and the owned handles), :mod:`.device` (the
backend and its devices), :mod:`.memory` (allocations), :mod:`.module` (context binaries and their graphs) and
:mod:`.stream` (streams and events), :mod:`.profile` (``QnnProfile``: a stream's launches profiled), :mod:`.graph`
(graphs built from ops: ``Device.graph_builder``) with :mod:`.ops` (the op table it checks nodes against).
"""

from __future__ import annotations

from .tables import QnnTables, check_config_layout
from .device import QnnBackend, QnnDevice
from .memory import QnnAllocation
from .module import GraphInfo, QnnKernel, QnnModule, TensorInfo
from .profile import LaunchProfile, ProfileEvent
from .stream import QnnEvent, QnnStream
from .graph import Graph, GraphBuilder, GraphTensor

__all__ = ["Graph", "GraphBuilder", "GraphInfo", "GraphTensor", "LaunchProfile", "ProfileEvent", "QnnAllocation",
           "QnnBackend", "QnnDevice", "QnnEvent", "QnnKernel", "QnnModule", "QnnStream", "QnnTables", "TensorInfo",
           "check_config_layout"]
