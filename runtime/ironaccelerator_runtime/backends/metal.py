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
  shared staging buffer (asynchronous), to the host after the stream is waited for (synchronous: the host buffer
  is written when the call returns);
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
"""

from __future__ import annotations

import os
import re
import sys
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ironaccelerator._core import BackendKind, CapabilityFlags, ComputeTier, ErrorKind, MemoryKind, Vendor
from ironaccelerator_runtime.errors import Error
from ironaccelerator_runtime.traits import _SIZE_MAX  # (alloc_unchecked's one range test)
from ironaccelerator_runtime.kernel_args import (
    LocalMemory, Param, arg_error, buffer_error, local_error, shared_mem_error, value_bytes, where,
)
from ironaccelerator_runtime.traits import (
    Allocation, AllocationSlice, Backend, Capability, Device, DeviceDescriptor, DeviceId, DeviceLimits, Event, Kernel,
    KernelAttributes, KernelLaunch, LaunchDims, Module, PooledAllocation, Result, Scalar, Stream, check_size,
    check_span, compile_options, device_span, host_span, fill_pattern, host_view, not_a_launch,
)

_KIND = BackendKind.METAL
_NAME = "METAL"
_SHARED, _PRIVATE = 0, 32  # MTLResourceStorageModeShared / Private (MTLResourceOptions)
_COMPLETED, _ERROR = 4, 5  # MTLCommandBufferStatusCompleted / Error
_MAX_SET_BYTES = 4096  # setBytes:length:atIndex: is for data under 4 KiB (Apple's documentation)
_PRUNE = 64  # committed command buffers kept per stream before the completed ones are let go


@dataclass(frozen=True)
class MetalTables:
    """Capability translation, as spec data: GPU family name (``"Apple7"``; or ``"always"``, ``"integrated"``: a
    device with unified memory) -> flags, a device getting those of every family it supports; ``(key, tier)`` in
    spec order, the first key the device matches giving its tier (``"default"`` otherwise); ``(substring of the
    device name, vendor)`` pairs (APPLE when none matches); family name -> its ``MTLGPUFamily`` value."""

    flags: dict[str, CapabilityFlags]
    tiers: tuple[tuple[str, ComputeTier], ...]
    vendors: tuple[tuple[str, Vendor], ...]
    families: dict[str, int]

    def capability(self, supports: Callable[[int], bool] | set[str], unified: bool, vendor_version: str = "") \
            -> Capability:
        """The Capability of a device that supports the families ``supports`` answers for (a callable taking an
        ``MTLGPUFamily`` value, e.g. the device's ``supportsFamily_``, or a set of family names) and has unified
        memory or not; unit-testable without a device."""
        if isinstance(supports, set):
            names = supports
        else:
            names = {name for name, value in self.families.items() if supports(value)}
        flags = self.flags.get("always", CapabilityFlags.NONE)
        if unified:
            flags |= self.flags.get("integrated", CapabilityFlags.NONE)
        for key, f in self.flags.items():
            if key in names:
                flags |= f
        tier = None
        for key, t in self.tiers:
            if key == "default" or (key == "integrated" and unified) or key in names:
                tier = t
                break
        if not vendor_version:
            vendor_version = "Metal " + (",".join(n for n in self.families if n in names) or "(no known family)")
        return Capability(flags=flags, tier=tier if tier is not None else ComputeTier.INTEGRATED,
                          vendor_version=vendor_version)

    def vendor(self, name: str) -> Vendor:
        low = name.lower()
        for key, v in self.vendors:
            if key.lower() in low:
                return v
        return Vendor.APPLE


# ------------------------------------------------------------------ the binding


class _Api:
    """The generated Metal binding (checked classes ``M``, unchecked trampolines ``U``, its ObjcBinding ``b``) and
    the raw functions the hot paths send through."""

    def __init__(self) -> None:
        from ironaccelerator.backends.metal import metal as M
        from ironaccelerator.backends.metal.metal._binding import BINDING

        self.M = M
        self.U = M.unchecked
        self.b = BINDING
        self.ffi = BINDING.ffi
        self.NULL = BINDING.ffi.NULL
        BINDING.ready()  # the runtime and frameworks (LIBRARY_NOT_FOUND when they cannot be loaded)
        lib = BINDING.lib
        self.push, self.pop, self.release = lib.ia_objc_push, lib.ia_objc_pop, lib.ia_objc_release
        self.retain = self.U.NSObject_retain

    def cast(self, obj: Any, cls: type) -> Any:
        """A handle of a Metal protocol's class (the run-time class is private: ``_MTLDevice``, ``IASimDevice``):
        the checked methods of ``cls`` then apply (each still checks ``respondsToSelector``)."""
        if obj is not None:
            obj.__class__ = cls
        return obj

    def nsstring(self, text: str | bytes) -> Any:
        return self.M.NSString.stringWithUTF8String_(text)

    def utf8(self, s: Any) -> str:
        return "" if s is None else str(s.UTF8String())


_api_lock = threading.Lock()
_api: _Api | Error | None = None


def api() -> _Api:
    """The loaded binding (once per process); raises its Error when the runtime or a framework cannot be loaded."""
    global _api
    with _api_lock:
        if _api is None:
            try:
                _api = _Api()
            except Error as e:
                _api = e
        if isinstance(_api, Error):
            raise _api
        return _api


# ------------------------------------------------------------------ kernel signatures (from the MSL source)

# the by-value scalar types of Metal Shading Language and their numpy types
_MSL_SCALARS = {
    "bool": "bool", "char": "int8", "uchar": "uint8", "int8_t": "int8", "uint8_t": "uint8", "short": "int16",
    "ushort": "uint16", "int16_t": "int16", "uint16_t": "uint16", "half": "float16", "int": "int32",
    "uint": "uint32", "int32_t": "int32", "uint32_t": "uint32", "float": "float32", "long": "int64",
    "ulong": "uint64", "int64_t": "int64", "uint64_t": "uint64", "size_t": "uint64",
}
_BUFFER_ATTR = re.compile(r"\[\[\s*buffer\s*\(\s*(\d+)\s*\)\s*\]\]")


@dataclass(frozen=True)
class ArgSlot:
    """One ``[[buffer(index)]]`` parameter of a kernel: a buffer (``device T *``/``constant T *``) or a value
    (``constant T &`` or ``T``) of numpy type ``dtype`` (None: a type this reader does not know; bytes only)."""

    index: int
    buffer: bool
    dtype: str | None
    text: str


def kernel_signature(source: str, name: str) -> tuple[ArgSlot, ...] | None:
    """The ``[[buffer(i)]]`` parameters of ``kernel void name(...)`` in Metal Shading Language source, in parameter
    order; None when the source has no such kernel (or its parameter list is not balanced)."""
    for m in re.finditer(r"(?:\[\[\s*kernel\s*\]\]|\bkernel)\s+void\s+" + re.escape(name) + r"\s*\(", source):
        depth, i = 1, m.end()
        while i < len(source) and depth:
            depth += {"(": 1, ")": -1}.get(source[i], 0)
            i += 1
        if depth:
            return None
        params, part, level = [], "", 0
        for ch in source[m.end():i - 1]:
            if ch in "([<":
                level += 1
            elif ch in ")]>":
                level -= 1
            if ch == "," and level == 0:
                params.append(part)
                part = ""
            else:
                part += ch
        params.append(part)
        slots = []
        for p in params:
            a = _BUFFER_ATTR.search(p)
            if a is None:
                continue
            decl = p[:a.start()]
            buffer = "*" in decl
            words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", decl.replace("&", " "))
            types = [w for w in words[:-1] if w not in ("device", "constant", "const", "volatile", "thread")]
            dtype = _MSL_SCALARS.get(types[-1]) if types and not buffer else None
            slots.append(ArgSlot(index=int(a.group(1)), buffer=buffer, dtype=dtype, text=" ".join(p.split())))
        return tuple(slots)
    return None


# ------------------------------------------------------------------ the backend


class MetalBackend(Backend):
    """Metal: the devices of ``MTLCopyAllDevices``.  ``tables``: the spec's capability data (the generated subclass
    sets it).  Holds no Metal object between calls (each enumeration releases what it made)."""

    kind = BackendKind.METAL
    tables = MetalTables(flags={}, tiers=(), vendors=(), families={})

    def __init__(self) -> None:
        self.api = api()
        self._lock = threading.Lock()
        self._descriptors: list[DeviceDescriptor] | None = None

    def versions(self) -> dict[str, Any]:
        """The Objective-C runtime's flavour and the frameworks the binding opened (on Linux: the simulated device's
        library).

        Returns:
            ``{"runtime": ..., "frameworks": ...}``.

        Raises:
            Error: never (nothing is asked of the device).

        Backends:
            Metal.
        """
        b = self.api.b
        return {"runtime": "Apple objc_msgSend" if sys.platform == "darwin" else "GNU objc_msg_lookup",
                "frameworks": ", ".join(os.path.basename(p) for p in b.paths)}

    def _handles(self) -> list[Any]:
        """The MTLDevice handles of ``MTLCopyAllDevices()`` (each owning a reference; the array released)."""
        a = self.api
        arr = a.M.MTLCopyAllDevices()  # +1: the NSArray handle owns it
        if arr is None:
            return []
        try:
            return [a.cast(arr.objectAtIndex_(i), a.M.MTLDevice) for i in range(arr.count())]
        finally:
            arr.close()

    def _describe(self, i: int, dev: Any) -> DeviceDescriptor:
        name = self.api.utf8(dev.name())
        unified = bool(dev.hasUnifiedMemory())
        cap = self.tables.capability(dev.supportsFamily_, unified)
        mt = dev.maxThreadsPerThreadgroup()
        max_block = (int(mt.width), int(mt.height), int(mt.depth))
        limits = DeviceLimits(max_block=max_block, max_threads_per_block=max(max_block),
                              max_grid=(2**32 - 1, 2**32 - 1, 2**32 - 1),
                              # a thread's position in the grid is a 32-bit uint per dimension (MSL
                              # thread_position_in_grid): no dimension of more threads
                              max_global=(2**32 - 1, 2**32 - 1, 2**32 - 1),
                              max_shared_mem=0,  # threadgroup memory by setThreadgroupMemoryLength: is not bound
                              max_alloc=int(dev.maxBufferLength()))
        return DeviceDescriptor(id=DeviceId(_KIND, i), name=name, vendor=self.tables.vendor(name), backend=_KIND,
                                total_memory=int(dev.recommendedMaxWorkingSetSize()), compute_units=1,
                                capability=cap, limits=limits)

    def devices(self) -> list[DeviceDescriptor]:
        with self._lock:
            if self._descriptors is None:
                handles = self._handles()
                try:
                    self._descriptors = [self._describe(i, d) for i, d in enumerate(handles)]
                finally:
                    for d in handles:
                        d.close()
            return list(self._descriptors)

    def open(self, device_id: DeviceId | int = 0) -> MetalDevice:
        i = self._index(device_id)
        descs = self.devices()
        if not 0 <= i < len(descs):
            raise Error(ErrorKind.INVALID_VALUE, f"no Metal device {i} ({len(descs)} found)", backend=_NAME,
                        function="Backend.open")
        handles = self._handles()
        try:
            dev = handles.pop(i)
        finally:
            for d in handles:
                d.close()
        return self._device_class()(self, descs[i], dev)

    def _device_class(self) -> type[MetalDevice]:
        return MetalDevice


class MetalDevice(Device):
    """An opened ``MTLDevice`` (see the module docstring).  ``close()`` waits for its streams and releases the
    device's reference; objects made from it keep theirs (a queue, a buffer each hold the device)."""

    def __init__(self, backend: MetalBackend, descriptor: DeviceDescriptor, handle: Any) -> None:
        self.backend = backend
        self.descriptor = descriptor
        self.api = backend.api
        self.handle = handle  # the MTLDevice handle (M.MTLDevice)
        self.unified = CapabilityFlags.UNIFIED_MEMORY in descriptor.capability.flags or bool(handle.hasUnifiedMemory())
        self._streams: weakref.WeakSet[MetalStream] = weakref.WeakSet()
        self._copy_stream: MetalStream | None = None

    # ---- memory
    def _alloc(self, nbytes: int, kind: MemoryKind, tracked: bool) -> Result[MetalAllocation]:
        if kind is MemoryKind.DEVICE:
            options = _PRIVATE
        elif kind is MemoryKind.UNIFIED and self.unified:
            options = _SHARED
        else:
            why = "the device has no unified memory" if kind is MemoryKind.UNIFIED else "Metal buffers are DEVICE " \
                  "(private storage) or UNIFIED (shared storage)"
            return Error(ErrorKind.UNSUPPORTED, f"Device.alloc({kind!r}): {why}", backend=_NAME,
                         function="Device.alloc")
        limit = self.descriptor.limits.max_alloc
        if limit is not None and nbytes > limit:
            return Error(ErrorKind.INVALID_VALUE, f"Device.alloc: {nbytes} bytes exceed the device's maxBufferLength "
                         f"({limit})", backend=_NAME, function="Device.alloc")
        a = self.api
        h = a.U.MTLDevice_newBufferWithLength_options_(self.handle.handle, nbytes, options)
        if h == a.NULL:
            return Error(ErrorKind.OUT_OF_MEMORY, f"Device.alloc: newBufferWithLength:{nbytes} options:{options} "
                         f"returned nil (max_alloc {limit})", backend=_NAME, function="Device.alloc")
        return MetalAllocation(self, h, nbytes, kind, tracked)

    def alloc(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> MetalAllocation:
        return self._checked_alloc(nbytes, kind, self._alloc)

    def alloc_unchecked(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> Result[Allocation]:
        if self._closed:
            return self._closed_error("Device.alloc_unchecked")
        if type(nbytes) is not int or not 0 < nbytes <= _SIZE_MAX or type(kind) is not MemoryKind:
            checked = self._alloc_args_unchecked(nbytes, kind, "Device.alloc_unchecked")
            if isinstance(checked, Error):
                return checked
            nbytes = checked
        return self._alloc(nbytes, kind, True)

    # ---- streams, modules
    def _import_kind(self, device: tuple[int, int], what: str) -> MemoryKind:
        """Foreign memory is refused: an ``MTLBuffer`` over it needs ``newBufferWithBytesNoCopy:`` on
        page-aligned memory (with a deallocator block), which this backend does not wrap."""
        raise Error(ErrorKind.UNSUPPORTED, f"{what}: Metal buffers over foreign memory (newBufferWithBytesNoCopy) "
                    "are not supported: copy it into an allocation (Stream.copy_from_host)", backend="METAL",
                    function=what)

    def create_stream(self) -> MetalStream:
        self._check_open("Device.create_stream")
        s = MetalStream(self)
        self._streams.add(s)
        return s

    def load_module(self, source_or_binary: str | bytes, *, options: Sequence[str] = (),
                    defines: Mapping[str, Any] | None = None, include_dirs: Sequence[str | os.PathLike[str]] = (),
                    name_expressions: Sequence[str] = (), cache: bool = True) -> MetalModule:
        """Metal Shading Language source -> an ``MTLLibrary`` (``newLibraryWithSource:options:error:``).

        Default ``MTLCompileOptions``: defines need ``MTLCompileOptions.preprocessorMacros``, an ``NSDictionary``,
        which the Foundation spec does not bind yet, and MSL has no include-path option.  No kernel cache: the Metal
        framework keeps its own.

        Args:
            source_or_binary: Metal Shading Language source (``str``); metallib bytes are ``UNSUPPORTED``.
            options: must be empty (``UNSUPPORTED`` otherwise).
            defines: must be empty (``UNSUPPORTED`` otherwise).
            include_dirs: must be empty (``UNSUPPORTED`` otherwise).
            name_expressions: must be empty (``UNSUPPORTED`` otherwise).
            cache: accepted and ignored.

        Returns:
            The ``MetalModule`` (the library and its source, for the kernels' signatures).

        Raises:
            Error: ``ErrorKind.COMPILE_FAILED`` (or the kind of the ``NSError``) with the compiler log;
                ``ErrorKind.INVALID_VALUE`` for a NUL character or lone surrogates in the source;
                ``ErrorKind.UNSUPPORTED`` for bytes or any compile option; ``ErrorKind.INVALID_HANDLE`` after
                ``close``.

        Backends:
            Metal (on Linux, the simulated device's "compiler").
        """
        if compile_options(options, defines, include_dirs, name_expressions, _NAME):
            raise Error(ErrorKind.UNSUPPORTED, "Device.load_module: compile options (options, defines, include_dirs, "
                        "name_expressions) are not supported by the Metal backend yet (preprocessorMacros needs "
                        "an NSDictionary, not bound)", backend=_NAME, function="Device.load_module")
        self._check_open("Device.load_module")
        if not isinstance(source_or_binary, str):
            raise Error(ErrorKind.UNSUPPORTED, "Device.load_module: the Metal backend takes Metal Shading Language "
                        f"source (str), not {type(source_or_binary).__name__} (metallib bytes need "
                        "newLibraryWithData:error:, not bound yet)", backend=_NAME, function="Device.load_module")
        a = self.api
        from ironaccelerator_runtime.objc import NSErrorError

        text = source_or_binary
        nul = text.find("\0")
        if nul >= 0:  # refused as on every backend (the Objective-C string would end there)
            raise Error(ErrorKind.INVALID_VALUE, f"Device.load_module: the source holds a NUL character at "
                        f"character {nul} (the compiler would stop reading there)", backend=_NAME,
                        function="Device.load_module")
        src = a.nsstring(text)  # INVALID_VALUE for lone surrogates
        mtl_options = a.M.MTLCompileOptions.new()
        try:
            library = self.handle.newLibraryWithSource_options_error_(src, mtl_options)
        except NSErrorError as e:
            raise Error(e.kind, f"Metal newLibraryWithSource:options:error: failed ({e.domain} {e.code}); compiler "
                        f"log:\n{e.localized_description}", code=e.code, backend=_NAME,
                        function="Device.load_module") from None
        finally:
            src.close()
            mtl_options.close()
        if library is None:
            raise Error(ErrorKind.COMPILE_FAILED, "Metal newLibraryWithSource:options:error: returned nil without "
                        "an error (compiler log: none)", backend=_NAME, function="Device.load_module")
        return MetalModule(self, a.cast(library, a.M.MTLLibrary), text)

    def synchronize(self) -> None:
        self._check_open("Device.synchronize")
        for s in list(self._streams):
            s.synchronize()

    def _close(self) -> None:
        self.handle.close()


class MetalAllocation(Allocation):
    """An ``MTLBuffer`` (private storage for DEVICE, shared for UNIFIED).  ``_bid``: its ``id`` (raw)."""

    device: MetalDevice

    def __init__(self, device: MetalDevice, handle: Any, nbytes: int, kind: MemoryKind, tracked: bool) -> None:
        self.device = device
        self.nbytes = nbytes
        self.kind = kind
        self.buffer = device.api.b.wrap_as(handle, device.api.M.MTLBuffer)  # owns the +1 of newBuffer...
        self._bid = handle
        self._tracked = tracked

    def _release(self) -> Error | None:
        # a command buffer that uses the buffer holds its own reference (Metal retains a command's resources)
        self.buffer.close()
        return None

    def _host_address(self) -> int | None:
        """Shared storage (UNIFIED): its ``contents``; private storage has no host address."""
        if self.kind is not MemoryKind.UNIFIED:
            return None
        a = self.device.api
        return int(a.ffi.cast("uintptr_t", a.U.MTLBuffer_contents(self._bid)))

    def _slice(self, offset: int, nbytes: int) -> Allocation:
        """The same ``MTLBuffer`` at an offset: kernels get it through ``setBuffer:offset:atIndex:``, blits through
        their offsets."""
        return AllocationSlice(self, offset, nbytes)


def _buffer_of(x: Any, device: MetalDevice, what: str) -> tuple[Any, int]:
    """The raw ``id`` of an allocation argument of ``device`` and the offset of its bytes in it (a slice's):
    INVALID_HANDLE if freed, INVALID_VALUE if not an allocation of this device."""
    if isinstance(x, (MetalAllocation, PooledAllocation)) and x.device is device:
        if x._freed or (type(x) is PooledAllocation and x.block._freed):
            raise Error(ErrorKind.INVALID_HANDLE, f"{what}: {x!r} was freed", backend=_NAME, function=what)
        return x._bid, 0
    if type(x) is AllocationSlice and isinstance(x.parent, MetalAllocation) and x.device is device:
        if x._freed:
            raise Error(ErrorKind.INVALID_HANDLE, f"{what}: the allocation of {x!r} was freed", backend=_NAME,
                        function=what)
        return x.parent._bid, x.offset
    if isinstance(x, Allocation):
        raise Error(ErrorKind.INVALID_VALUE, f"{what}: {x!r} is not an allocation of {device.descriptor.id}",
                    backend=_NAME, function=what)
    raise Error(ErrorKind.INVALID_VALUE, f"{what}: expected an Allocation, not {type(x).__name__}", backend=_NAME,
                function=what)


def _arg_buffer(x: Any, device: MetalDevice, i: int, kernel: str, what: str) -> tuple[Any, int]:
    """``_buffer_of`` for argument ``i`` of a launch: the policy's errors (kernel_args) naming the argument."""
    t = type(x)
    if (t is MetalAllocation or t is PooledAllocation or t is AllocationSlice) and x.device is device:
        return _buffer_of(x, device, what)
    raise buffer_error(where(i, kernel), x, _NAME, what)


class MetalModule(Module):
    """An ``MTLLibrary`` and the source it was made from (for the kernels' signatures)."""

    def __init__(self, device: MetalDevice, library: Any, source: str) -> None:
        self.device = device
        self.library = library
        self.source = source

    def kernel(self, name: str) -> MetalKernel:
        dev = self.device
        dev._check_open("Module.kernel")
        if not isinstance(name, str):
            raise TypeError(f"Module.kernel: name must be str, not {type(name).__name__}")
        a = dev.api
        from ironaccelerator_runtime.objc import NSErrorError

        n = a.nsstring(name)
        try:
            fn = self.library.newFunctionWithName_(n)
        finally:
            n.close()
        if fn is None:
            raise Error(ErrorKind.INVALID_VALUE, f"Module.kernel: the Metal library has no function {name!r}",
                        backend=_NAME, function="Module.kernel")
        try:
            pipeline = dev.handle.newComputePipelineStateWithFunction_error_(fn)
        except NSErrorError as e:
            raise Error(e.kind, f"Module.kernel({name!r}): newComputePipelineStateWithFunction:error: failed: "
                        f"{e.localized_description}", code=e.code, backend=_NAME, function="Module.kernel") from None
        finally:
            fn.close()
        pipeline = a.cast(pipeline, a.M.MTLComputePipelineState)
        sig = kernel_signature(self.source, name)
        return MetalKernel(self, name, pipeline, sig)


class MetalKernel(Kernel):
    """A compute pipeline state: ``max_threads`` (maxTotalThreadsPerThreadgroup), ``execution_width``
    (threadExecutionWidth), ``slots`` (the ``[[buffer(i)]]`` parameters of its signature; None: unknown, then
    arguments are taken in order, allocations as buffers and values as bytes)."""

    def __init__(self, module: MetalModule, name: str, pipeline: Any, slots: tuple[ArgSlot, ...] | None) -> None:
        self.module = module
        self.device = module.device
        self.name = name
        self.pipeline = pipeline
        self._pid = pipeline.handle
        self.max_threads = int(pipeline.maxTotalThreadsPerThreadgroup())
        self.execution_width = int(pipeline.threadExecutionWidth())
        self.slots = slots
        self.num_args = len(slots) if slots is not None else None
        # the value parameters' types for the kernel-argument policy (kernel_args); None for buffers
        self._params = None if slots is None else tuple(None if s.buffer else _param(s) for s in slots)

    @property
    def attributes(self) -> KernelAttributes:
        # The pipeline's ``maxTotalThreadsPerThreadgroup`` and ``threadExecutionWidth`` (the SIMD width); Metal
        # reports no registers, and ``staticThreadgroupMemoryLength`` is not bound.
        return KernelAttributes(max_threads_per_block=self.max_threads, preferred_multiple=self.execution_width)


def _param(slot: ArgSlot) -> Param:
    """A value slot as a kernel_args.Param: kind and size from its MSL scalar type (None: a type not known)."""
    if slot.dtype is None:
        return Param(None, None, slot.text)
    import numpy as np

    dt = np.dtype(slot.dtype)
    return Param("b" if dt.kind == "b" else dt.kind, dt.itemsize, slot.text)


def _value(x: Any, slot: ArgSlot | None, param: Param | None, i: int, kernel: str, what: str) -> bytes:
    """The bytes of a by-value argument (the kernel-argument policy, kernel_args.value_bytes), at most the 4 KiB
    ``setBytes:length:atIndex:`` takes."""
    data = value_bytes(x, param, i, kernel, _NAME, what)
    if len(data) > _MAX_SET_BYTES:
        raise arg_error(where(i, kernel), f"a value of {len(data)} bytes (setBytes takes 1..{_MAX_SET_BYTES}): "
                        "pass a buffer", _NAME, what)
    return data


class MetalEvent(Event):
    """A command buffer committed after the work before it on ``stream``'s queue, signalling the stream's shared
    event to ``value``.  Holds one reference to the command buffer (``_cb``)."""

    def __init__(self, stream: MetalStream, cb: Any, value: int) -> None:
        self.stream = stream
        self.device = stream.device
        self._cb = cb
        self.value = value

    def __del__(self) -> None:
        cb, self._cb = getattr(self, "_cb", None), None
        if cb is not None:
            try:
                self.stream._api.release(cb)
            except Exception:  # interpreter shutdown
                pass

    def query(self) -> bool:
        # Whether the work before the event is done: its command buffer completed, or the shared event it signals
        # reached its value (the signal comes before the command buffer's status changes).
        self.device._check_open("Event.query")
        U = self.stream._api.U
        return int(U.MTLCommandBuffer_status(self._cb)) >= _COMPLETED or \
            int(U.MTLSharedEvent_signaledValue(self.stream.shared_event.handle)) >= self.value

    def synchronize(self) -> None:
        self.device._check_open("Event.synchronize")
        a = self.stream._api
        a.U.MTLCommandBuffer_waitUntilCompleted(self._cb)
        self.stream._check_failed("Event.synchronize")

    def _wait_for_callback(self) -> None:
        """Wait until the event's command buffer has completed, failed or not: a failure is the stream's to report
        (its ``synchronize``), not the host callback's, and is left for it."""
        self.device._check_open("Stream.add_callback")
        self.stream._api.U.MTLCommandBuffer_waitUntilCompleted(self._cb)

    def gpu_end_time(self) -> float:
        """When the GPU finished the work before this event: its command buffer's ``GPUEndTime``.

        :meth:`elapsed_ms` is the difference of two of these (and waits first).

        Returns:
            The time in seconds, on the GPU's clock (meaningful only as a difference).

        Raises:
            Error: ``ErrorKind.NOT_READY`` when the event has not completed yet (:meth:`query` is False);
                ``ErrorKind.INVALID_HANDLE`` when the device was closed.

        Backends:
            Metal only.
        """
        if not self.query():
            raise Error(ErrorKind.NOT_READY, "Event.elapsed_ms: the event has not completed", backend=_NAME,
                        function="Event.elapsed_ms")
        U = self.stream._api.U
        U.MTLCommandBuffer_waitUntilCompleted(self._cb)  # signalled: completes at once
        return float(U.MTLCommandBuffer_GPUEndTime(self._cb))

    def elapsed_ms(self, end: Event) -> float:
        if not isinstance(end, MetalEvent):
            raise Error(ErrorKind.INVALID_VALUE, f"Event.elapsed_ms: {end!r} is not a Metal event", backend=_NAME,
                        function="Event.elapsed_ms")
        self.synchronize()  # a pending event is waited for, as on every backend (Event.elapsed_ms)
        end.synchronize()
        return (end.gpu_end_time() - self.gpu_end_time()) * 1000.0


_NSUINTEGER_MAX = 2**64 - 1


class MetalStream(Stream):
    """An ``MTLCommandQueue`` (see the module docstring).  ``_pending``: the committed command buffers not yet seen
    complete (one reference each), whose failures :meth:`synchronize` reports."""

    device: MetalDevice

    def __init__(self, device: MetalDevice) -> None:
        a = device.api
        self.device = device
        self._api = a
        self.queue = a.cast(device.handle.newCommandQueue(), a.M.MTLCommandQueue)
        self._qid = self.queue.handle
        self.shared_event = a.cast(device.handle.newSharedEvent(), a.M.MTLSharedEvent)
        self._value = 0
        self._pending: list[Any] = []
        self._untracked = False  # unchecked launches committed since the last fence
        self._reap_at = _PRUNE  # len(_pending) at which _keep next lets go of the completed ones
        # the last checked launch: (KernelLaunch, its allocations, (kernel, dims, packed arguments))
        self._cache: tuple[Any, list[Any], tuple[MetalKernel, LaunchDims, list[tuple[bool, int, Any]]]] | None = None
        self._failed: list[str] = []
        # guards _pending, _value, _untracked and _failed: the owner's thread and others (a MemoryPool fencing the
        # stream for another stream's allocation, a callback thread's Event.synchronize) may both change them; one
        # reaper at a time (two would release the same completed command buffers: a freed MTLCommandBuffer messaged)
        self._state = threading.RLock()
        # the hot path's trampolines, bound once
        U = a.U
        self._commandBuffer = U.MTLCommandQueue_commandBuffer
        self._computeEncoder = U.MTLCommandBuffer_computeCommandEncoder
        self._setPipeline = U.MTLComputeCommandEncoder_setComputePipelineState_
        self._setBuffer = U.MTLComputeCommandEncoder_setBuffer_offset_atIndex_
        self._setBytes = U.MTLComputeCommandEncoder_setBytes_length_atIndex_
        self._dispatch = U.MTLComputeCommandEncoder_dispatchThreadgroups_threadsPerThreadgroup_
        self._endEncoding = U.MTLCommandEncoder_endEncoding
        self._commit = U.MTLCommandBuffer_commit

    def __del__(self) -> None:
        pending, self._pending = getattr(self, "_pending", []), []
        try:
            for cb in pending:
                self._api.release(cb)
        except Exception:  # interpreter shutdown
            pass

    # ---- command buffers
    def _keep(self, cb: Any) -> None:
        """Hold a committed (autoreleased) command buffer until it is seen complete."""
        self._api.retain(cb)
        with self._state:
            pending = self._pending
            pending.append(cb)
            if len(pending) >= self._reap_at:
                self._reap(False)
                self._reap_at = len(self._pending) + _PRUNE

    def _reap(self, wait: bool) -> None:
        """Let go of the completed command buffers (all, waiting for them, when ``wait``), noting failures.  A queue
        completes its command buffers in commit order, so the first one not complete ends the scan."""
        with self._state:
            a = self._api
            U = a.U
            pending = self._pending
            done = 0
            for cb in pending:
                if wait:
                    U.MTLCommandBuffer_waitUntilCompleted(cb)
                status = int(U.MTLCommandBuffer_status(cb))
                if status < _COMPLETED:
                    break
                if status == _ERROR:
                    self._failed.append(self._cb_error(cb))
                a.release(cb)
                done += 1
            del pending[:done]

    def _cb_error(self, cb: Any) -> str:
        a = self._api
        pool = a.push()
        try:
            e = a.U.MTLCommandBuffer_error(cb)
            if e == a.NULL:
                return "a command buffer failed (no error)"
            d = a.U.NSError_localizedDescription(e)
            text = a.ffi.string(a.U.NSString_UTF8String(d)).decode("utf-8", "replace") if d != a.NULL else ""
            return f"{a.ffi.string(a.U.NSString_UTF8String(a.U.NSError_domain(e))).decode()} " \
                   f"{int(a.U.NSError_code(e))}: {text}"
        finally:
            a.pop(pool)

    def _check_failed(self, what: str) -> None:
        with self._state:
            self._reap(False)
            msgs, self._failed = self._failed, []
        if msgs:
            raise Error(ErrorKind.LAUNCH_FAILED, f"{what}: {len(msgs)} command buffer(s) failed: "
                        + "; ".join(msgs), backend=_NAME, function=what)

    def _blit(self, encode: Callable[[Any, Any], None]) -> Any:
        """One command buffer with a blit encoder filled by ``encode(a, encoder)``, committed and kept."""
        a = self._api
        pool = a.push()
        try:
            cb = self._commandBuffer(self._qid)
            enc = a.U.MTLCommandBuffer_blitCommandEncoder(cb)
            encode(a, enc)
            self._endEncoding(enc)
            self._commit(cb)
            self._keep(cb)
            return cb
        finally:
            a.pop(pool)

    def _staging(self, nbytes: int, what: str) -> Any:
        a = self._api
        h = a.U.MTLDevice_newBufferWithLength_options_(self.device.handle.handle, nbytes, _SHARED)
        if h == a.NULL:
            raise Error(ErrorKind.OUT_OF_MEMORY, f"{what}: no shared staging buffer of {nbytes} bytes", backend=_NAME,
                        function=what)
        return h

    def _live(self, what: str) -> None:
        if self.device._closed:
            raise self.device._closed_error(what)

    # ---- copies
    def copy_from_host(self, dst: Allocation, src: Any, nbytes: int | None = None, *, dst_offset: int = 0,
                       src_offset: int = 0) -> None:
        what = "Stream.copy_from_host"
        self._live(what)
        bid, base = _buffer_of(dst, self.device, what)
        view = host_view(src, backend=_KIND, function=what)
        so, at, n = host_span(view.nbytes, dst.nbytes, nbytes, src_offset, dst_offset, what, _KIND, to_device=True)
        if n == 0:
            return
        at += base
        a = self._api
        staging = self._staging(n, what)
        try:
            a.ffi.memmove(a.U.MTLBuffer_contents(staging), view[so:so + n], n)
            self._blit(lambda a, enc: a.U.MTLBlitCommandEncoder_copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size_(
                enc, staging, 0, bid, at, n))
        finally:
            a.release(staging)  # the command buffer holds it until the copy ran

    def copy_to_host(self, dst: Any, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
                     src_offset: int = 0) -> None:
        what = "Stream.copy_to_host"
        self._live(what)
        bid, base = _buffer_of(src, self.device, what)
        view = host_view(dst, writable=True, backend=_KIND, function=what)
        do, at, n = host_span(view.nbytes, src.nbytes, nbytes, dst_offset, src_offset, what, _KIND, to_device=False)
        if n == 0:
            return
        at += base
        a = self._api
        out = view[do:do + n]
        if src.kind is MemoryKind.UNIFIED:  # shared storage: read its contents once the queue is done with it
            self.synchronize()
            a.ffi.memmove(out, a.ffi.buffer(a.ffi.cast("char *", a.U.MTLBuffer_contents(bid)) + at, n), n)
            return
        staging = self._staging(n, what)
        try:
            self._blit(lambda a, enc: a.U.MTLBlitCommandEncoder_copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size_(
                enc, bid, at, staging, 0, n))
            self.synchronize()
            a.ffi.memmove(out, a.ffi.buffer(a.ffi.cast("char *", a.U.MTLBuffer_contents(staging)), n), n)
        finally:
            a.release(staging)

    def copy(self, dst: Allocation, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
             src_offset: int = 0) -> None:
        what = "Stream.copy"
        self._live(what)
        d, dbase = _buffer_of(dst, self.device, what)
        s, sbase = _buffer_of(src, self.device, what)
        so, do, n = device_span(dst, src, nbytes, dst_offset, src_offset, _KIND)
        if n:
            self._blit(lambda a, enc: a.U.MTLBlitCommandEncoder_copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size_(
                enc, s, sbase + so, d, dbase + do, n))

    def fill(self, dst: Allocation, value: int, nbytes: int | None = None, offset: int = 0, *,
             width: int = 1) -> None:
        # The blit encoder's ``fillBuffer:range:value:``, which fills bytes: a 2- or 4-byte pattern whose bytes
        # differ is UNSUPPORTED (one whose bytes are all the same, such as 0, is that byte).
        what = "Stream.fill"
        self._live(what)
        d, base = _buffer_of(dst, self.device, what)
        v, w = fill_pattern(value, width, what, _KIND)
        o, n = check_span(dst.nbytes, offset, nbytes, "dst", what, _KIND, width=w)
        pattern = v.to_bytes(w, "little")
        if pattern != pattern[:1] * w:
            raise Error(ErrorKind.UNSUPPORTED, f"{what}: Metal's blit encoder fills bytes; the {w}-byte pattern "
                        f"{v:#x} is not one byte repeated", backend=_NAME, function=what)
        if n:
            self._blit(lambda a, enc: a.U.MTLBlitCommandEncoder_fillBuffer_range_value_(enc, d, (base + o, n),
                                                                                         pattern[0]))

    # ---- launches
    def _pack(self, launch: Any, what: str) -> tuple[MetalKernel, LaunchDims, list[tuple[bool, int, Any]]]:
        """The checks of a launch (before any message) and its arguments: (is a buffer, index, id or bytes)."""
        try:
            kernel, dims, args = launch
        except (TypeError, ValueError):
            raise not_a_launch(launch, what) from None
        if not isinstance(kernel, MetalKernel) or kernel.device is not self.device:
            raise Error(ErrorKind.INVALID_VALUE, f"{what}: {kernel!r} is not a kernel of {self.device.descriptor.id}",
                        backend=_NAME, function=what)
        if not isinstance(dims, LaunchDims):
            raise TypeError(f"{what}: dims must be LaunchDims, not {type(dims).__name__}")
        if dims.cooperative or dims.cluster is not None:  # (Metal has neither grid sync nor clusters)
            raise dims.options_error(_KIND, what)
        if dims.shared_mem:  # never silently ignored (checked and unchecked)
            raise shared_mem_error(_NAME, what, dims.shared_mem)
        b = dims.block
        if b[0] * b[1] * b[2] > kernel.max_threads:
            raise Error(ErrorKind.INVALID_VALUE, f"{what}: a threadgroup of {b} has more than the pipeline's "
                        f"maxTotalThreadsPerThreadgroup ({kernel.max_threads}) threads", backend=_NAME, function=what)
        slots = kernel.slots
        if slots is not None and len(args) != len(slots):
            raise Error(ErrorKind.INVALID_VALUE, f"{what}: {kernel.name} takes {len(slots)} arguments "
                        f"([[buffer(i)]] parameters), got {len(args)}", backend=_NAME, function=what)
        packed: list[tuple[bool, int, Any]] = []  # (True, index, (buffer id, offset)) or (False, index, bytes)
        params = kernel._params
        device = self.device
        for i, x in enumerate(args):
            slot = slots[i] if slots is not None else None
            index = slot.index if slot is not None else i
            if type(x) is LocalMemory:
                raise local_error(_NAME, what, where(i, kernel.name))
            if slot.buffer if slot is not None else isinstance(x, Allocation):
                packed.append((True, index, _arg_buffer(x, device, i, kernel.name, what)))
            else:
                packed.append((False, index, _value(x, slot, params[i] if params is not None else None, i,
                                                    kernel.name, what)))
        return kernel, dims, packed

    def _encode(self, kernel: MetalKernel, dims: LaunchDims, packed: list[tuple[bool, int, Any]],
                keep: bool = True) -> None:
        """The messages of one launch: one command buffer, one compute encoder, committed; kept (for its failure
        to be reported) when ``keep``, else only the queue holds it (``_untracked``: synchronize and query then
        commit an empty command buffer to wait for)."""
        a = self._api
        pool = a.push()
        try:
            cb = self._commandBuffer(self._qid)
            enc = self._computeEncoder(cb)
            self._setPipeline(enc, kernel._pid)
            setBuffer, setBytes = self._setBuffer, self._setBytes
            for is_buffer, index, v in packed:
                if is_buffer:
                    setBuffer(enc, v[0], v[1], index)
                else:
                    setBytes(enc, v, len(v), index)
            self._dispatch(enc, dims.grid, dims.block)
            self._endEncoding(enc)
            self._commit(cb)
            if keep:
                self._keep(cb)
            else:
                self._untracked = True
        finally:
            a.pop(pool)

    def _fence(self) -> None:
        """After untracked launches: an empty command buffer, kept, which completes after them (in-order queue)."""
        if self._untracked:
            with self._state:
                if not self._untracked:
                    return
                self._untracked = False
            a = self._api
            pool = a.push()
            try:
                cb = self._commandBuffer(self._qid)
                self._commit(cb)
                self._keep(cb)
            finally:
                a.pop(pool)

    def _reuse(self, launch: Any) -> tuple[MetalKernel, LaunchDims, list[tuple[bool, int, Any]]] | None:
        """The packed arguments of the previous launch when ``launch`` is the same (immutable) KernelLaunch and none
        of its allocations was freed since: a repeated launch skips the argument checks, never a freed buffer."""
        cached = self._cache
        if cached is None or cached[0] is not launch:
            return None
        for x in cached[1]:
            if x._freed or (type(x) is PooledAllocation and x.block._freed):
                return None
        return cached[2]

    def _remember(self, launch: Any, packed: tuple[MetalKernel, LaunchDims, list[tuple[bool, int, Any]]]) -> None:
        """Keep a checked launch for :meth:`_reuse` when it cannot change: a KernelLaunch (its arguments are a
        tuple) without a mutable value (bytearray).  The stream holds it (and its allocations) until the next one."""
        if type(launch) is KernelLaunch and not any(isinstance(x, bytearray) for x in launch[2]):
            self._cache = (launch, [x for x in launch[2] if isinstance(x, Allocation)], packed)
        else:
            self._cache = None

    def launch(self, launch: Any) -> None:
        if self.device._closed:
            raise self.device._closed_error("Stream.launch")
        plan = self._reuse(launch)
        if plan is None:
            plan = self._pack(launch, "Stream.launch")
            plan[1].validate(self.device.descriptor.limits, _KIND, "Stream.launch")
            self._remember(launch, plan)
        self._encode(*plan)

    def launch_unchecked(self, launch: Any) -> Result[None]:
        # The launch without LaunchDims validation against the device's limits; still refused (an Error returned,
        # before any message): a freed allocation, a wrong argument count, a threadgroup over the pipeline's
        # maxTotalThreadsPerThreadgroup, a closed device.
        if self.device._closed:
            return self.device._closed_error("Stream.launch_unchecked")
        plan = self._reuse(launch)
        if plan is None:
            try:
                plan = self._pack(launch, "Stream.launch_unchecked")
            except Error as e:
                return e.with_traceback(None)  # (its frames would keep the stream and the launch alive)
            g, b = plan[1].grid, plan[1].block
            if max(g + b) > _NSUINTEGER_MAX:  # MTLSize cannot hold it: refused before the encoder is made (one
                # left without endEncoding would be released mid-encoding)
                return Error(ErrorKind.INVALID_VALUE, f"Stream.launch_unchecked: grid={g}, block={b}: a dimension does "
                             "not fit MTLSize (64-bit NSUInteger)", backend=_NAME, function="Stream.launch_unchecked")
            limits, g = self.device.descriptor.limits, plan[1].grid
            if plan[1].threads > limits.max_work_items or g[0] > limits.max_grid[0] or g[1] > limits.max_grid[1] \
                    or g[2] > limits.max_grid[2]:  # (a few compares, on packing only: the device would try them all)
                return Error(ErrorKind.INVALID_VALUE, f"Stream.launch_unchecked: {plan[1]} is more than the device "
                             f"runs in one dispatch (DeviceLimits max_grid {limits.max_grid}, max_work_items "
                             f"{limits.max_work_items})", backend=_NAME, function="Stream.launch_unchecked")
        self._encode(*plan, keep=False)  # a failure of its command buffer is not reported (as on the other backends)
        return None

    # ---- ordering
    def record_event(self) -> MetalEvent:
        what = "Stream.record_event"
        self._live(what)
        a = self._api
        pool = a.push()
        try:
            with self._state:  # (values signalled in commit order)
                self._value += 1
                value = self._value
                cb = self._commandBuffer(self._qid)
                a.U.MTLCommandBuffer_encodeSignalEvent_value_(cb, self.shared_event.handle, value)
                self._commit(cb)
                a.retain(cb)  # the event's reference
                self._keep(cb)
        finally:
            a.pop(pool)
        return MetalEvent(self, cb, value)

    def wait_event(self, event: Event) -> None:
        what = "Stream.wait_event"
        self._live(what)
        if not isinstance(event, MetalEvent) or event.device is not self.device:
            raise Error(ErrorKind.INVALID_VALUE, f"{what}: {event!r} is not an event of {self.device.descriptor.id}",
                        backend=_NAME, function=what)
        if event.stream is self:
            return  # in order already
        a = self._api
        pool = a.push()
        try:
            cb = self._commandBuffer(self._qid)
            a.U.MTLCommandBuffer_encodeWaitForEvent_value_(cb, event.stream.shared_event.handle, event.value)
            self._commit(cb)
            self._keep(cb)
        finally:
            a.pop(pool)

    def synchronize(self) -> None:
        self._live("Stream.synchronize")
        self._fence()
        self._reap(True)
        self._check_failed("Stream.synchronize")
        self._check_callback_waits("Stream.synchronize")

    def query(self) -> bool:
        self._live("Stream.query")
        self._fence()
        with self._state:
            self._reap(False)
            return not self._pending

    def _pool_fence(self) -> MetalEvent | None:
        """(Called from any thread: under the stream's state lock.)"""
        with self._state:
            if self.query():
                return None
            return self.record_event()
