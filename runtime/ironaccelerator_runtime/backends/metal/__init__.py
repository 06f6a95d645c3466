"""The Metal backend: the core surface over the generated ``ironaccelerator.backends.metal.metal`` (Objective-C
messages to Metal's protocols, resolver kind objc).

What the trait surface means for Metal:

* a :class:`MetalDevice` is one ``MTLDevice`` of ``MTLCopyAllDevices()``; its capability comes from
  ``supportsFamily:`` through the spec's family tables (:class:`MetalTables`, ``specs/metal/backend.yaml``);
* an allocation is an ``MTLBuffer``: ``MemoryKind.DEVICE`` is private storage (``MTLResourceStorageModePrivate``),
  ``MemoryKind.UNIFIED`` shared storage on a device with unified memory, whose :meth:`MetalAllocation.host_view` is
  the buffer's ``contents`` without a copy (other kinds: UNSUPPORTED);
* a :class:`MetalStream` is an ``MTLCommandQueue``: each launch, copy or fill is one command buffer (one encoder),
  committed at once; the queue runs them in order.  Copies go through the blit encoder: from the host through a
  shared staging buffer (the host buffer is read before the call returns; the blit runs in stream order), to the
  host after the stream is waited for (synchronous: the host buffer is written when the call returns);
* a launch is ``computeCommandEncoder`` + ``setComputePipelineState:`` + per argument ``setBuffer:offset:atIndex:``
  (an allocation) or ``setBytes:length:atIndex:`` (a value) + ``dispatchThreadgroups:threadsPerThreadgroup:``
  (``LaunchDims.grid`` threadgroups of ``LaunchDims.block`` threads) + ``endEncoding`` + ``commit``, sent through
  the generated unchecked trampolines inside one autorelease pool;
* a :class:`MetalModule` is an ``MTLLibrary`` from Metal Shading Language source
  (``newLibraryWithSource:options:error:``; a failure is COMPILE_FAILED with the compiler's message); metallib
  bytes are not accepted yet (``newLibraryWithData:error:`` takes a ``dispatch_data_t``, which is not bound);
* a :class:`MetalKernel` is ``newFunctionWithName:`` + ``newComputePipelineStateWithFunction:error:``; its
  arguments (which ``[[buffer(i)]]`` slots take a buffer, which a value and of what size) are read from the kernel's
  signature in the source, as Metal reports no argument information without reflection; the threadgroup size is
  checked against the pipeline's ``maxTotalThreadsPerThreadgroup`` before any message (INVALID_VALUE);
* an :class:`MetalEvent` is a command buffer committed after the work before it that signals the stream's
  ``MTLSharedEvent`` (``encodeSignalEvent:value:``); ``Stream.wait_event`` commits one that waits for that value
  (``encodeWaitForEvent:value:``) on another queue; ``elapsed_ms`` is the difference of the two command buffers'
  ``GPUEndTime`` (GPU timestamps; the simulated device reports the host's CLOCK_MONOTONIC).  Completion is polled
  (``status``) or waited for (``waitUntilCompleted``): blocks (``addCompletedHandler:``) are not bound.

On Linux the binding's frameworks are the GNU Objective-C runtime, GNUstep Foundation and the IA Simulated Metal
Device (tests/metal_sim, a test fixture, not Metal), found in ``$IA_METAL_SIM_DIR``; real Metal is generated but
has not run on Apple hardware.

One module per concept: :mod:`.tables` (the capability tables and the loaded binding), :mod:`.device` (the backend
and its devices), :mod:`.memory` (allocations), :mod:`.module` (libraries, kernels and their MSL signatures) and
:mod:`.stream` (streams and events).
"""

from __future__ import annotations

from .tables import MetalTables, api
from .device import MetalBackend, MetalDevice
from .module import ArgSlot, MetalKernel, MetalModule, kernel_signature
from .memory import MetalAllocation
from .stream import MetalEvent, MetalStream

__all__ = ["ArgSlot", "MetalAllocation", "MetalBackend", "MetalDevice", "MetalEvent", "MetalKernel", "MetalModule",
           "MetalStream", "MetalTables", "api", "kernel_signature"]
