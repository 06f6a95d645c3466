"""The Metal backend (``MTLCopyAllDevices``) and its devices: ``Backend.open``, allocation, module loading and the
device queries."""

from __future__ import annotations

import os
import sys
import threading
import weakref
from typing import Any, Mapping, Sequence

from ironaccelerator._core import BackendKind, CapabilityFlags, ErrorKind, MemoryKind
from ironaccelerator_runtime.errors import Error, as_operation, fail
from ironaccelerator_runtime.traits.device import enqueue_tracked_fence
from ironaccelerator_runtime.traits.memory import handle_calls
from ironaccelerator_runtime.traits import (
    _SIZE_MAX, Allocation, Backend, Device, DeviceDescriptor, DeviceId, DeviceLimits, Event, Result,
    compile_options,
)

from .tables import MetalTables, _KIND, _NAME, _PRIVATE, _SHARED, api

_DEVICE = MemoryKind.DEVICE
_new = object.__new__
# MetalDevice._fence_events while a fence is being computed: non-empty, so the pool's lock-free test sends the
# reader to _pool_fence (never iterated: it is replaced before the lock is released)


# ------------------------------------------------------------------ the backend


class MetalBackend(Backend):
    """The Metal backend (``BackendKind.METAL``): the devices of ``MTLCopyAllDevices()``, through the Objective-C
    runtime.  Holds no Metal object between calls (each enumeration releases what it made).

    ``tables``: the spec's capability tables (``TABLES`` of ``specs/metal/backend.yaml``: GPU families ->
    :class:`~ironaccelerator.CapabilityFlags` and tiers, vendor names), which the generated subclass
    ``ironaccelerator.backends.metal.MetalBackend`` sets.  On Apple platforms it would use Metal.framework
    (generated, never run on Apple hardware); on Linux it runs over the IA Simulated Metal Device
    (``$IA_METAL_SIM_DIR/libia_metal_sim.so``, a test fixture, not Metal).
    """

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
            raise fail(ErrorKind.INVALID_VALUE, "Backend.open", f"no Metal device {i} ({len(descs)} found)", _NAME)
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
        self._fence_lock = threading.RLock()  # the pool's device fence (_pool_fence)
        self._pool_fast = sys.modules.get(self.api.b.package + "._objc_fast")  # (MemoryPool's free list in C)
        # the allocation hot path's: the device's id, its trampoline, the largest buffer, the release function
        self._hid = handle.handle
        self._new_buffer = self.api.U.MTLDevice_newBufferWithLength_options_
        limit = descriptor.limits.max_alloc
        self._max_alloc = limit if limit is not None else _SIZE_MAX
        self._release = self.api.release
        self._closed = False  # (read from the instance by the hot path, not looked up as the class's default)
        self._bind_allocators()

    def _bind_allocators(self) -> None:
        """In API mode, ``alloc`` and ``alloc_unchecked`` of DEVICE memory are compiled allocators
        (``_objc_fast._handle_allocator``, ia_handle_memory.h), bound as instance attributes over the methods
        below: from C, they call the C functions of the binding's unchecked trampoline of
        ``newBufferWithLength:options:`` (the device's ``id``, private storage) and ``ia_objc_release`` (by their
        addresses: :func:`~ironaccelerator_runtime.traits.memory.handle_calls`) and make the allocation, whose
        ``free`` sends ``release``.  What they do not take (other kinds, a size over the device's limit, keywords,
        a nil buffer, a closed device) goes to the methods, whose allocations are of the same class
        (``_objc_fast._handle_memory``).  They hold the device weakly; ``_close`` shuts them before it releases
        the device's ``id``."""
        fast = self._pool_fast
        cls = None if fast is None else handle_allocation_class(fast)
        self._handle_class = cls
        self._allocators: tuple[Any, ...] = ()
        if cls is None:
            return
        a = self.api
        self._handle_memory = fast._handle_memory
        self._handle_calls = handle_calls(fast, a.ffi, a.b.lib, "MTLDevice_newBufferWithLength_options_",
                                          "ia_objc_release")
        ref = weakref.ref(self)
        owner = int(a.ffi.cast("uintptr_t", self._hid))
        self._allocators = tuple(fast._handle_allocator(cls, ref, getattr(type(self), name), self._handle_calls,
                                                        owner, _PRIVATE, _DEVICE, self._max_alloc)
                                 for name in ("alloc", "alloc_unchecked"))
        setattr(self, "alloc", self._allocators[0])
        setattr(self, "alloc_unchecked", self._allocators[1])

    # MemoryPool's device-wide fence (a block freed naming no stream): every launch, copy and fill sets _dirty after
    # its enqueue; events and waits use no memory and do not
    _dirty = False
    _fence_events: list[Event] = []  # (replaced, never appended to)

    def _pool_fence(self) -> list[Event]:
        """The events a pool block freed now waits for
        (:func:`~ironaccelerator_runtime.traits.device.enqueue_tracked_fence`: none on an idle device, else
        an event on each stream whose work is not
        known complete (``MetalStream._pool_fence``), under ``_fence_lock``)."""
        return enqueue_tracked_fence(self)

    # ---- memory
    def _alloc(self, nbytes: int, kind: MemoryKind, tracked: bool) -> Result[MetalAllocation]:
        if kind is MemoryKind.DEVICE:
            options = _PRIVATE
        elif kind is MemoryKind.UNIFIED and self.unified:
            options = _SHARED
        else:
            why = "the device has no unified memory" if kind is MemoryKind.UNIFIED else "Metal buffers are DEVICE " \
                  "(private storage) or UNIFIED (shared storage)"
            return fail(ErrorKind.UNSUPPORTED, "Device.alloc", f"Device.alloc({kind!r}): {why}", _NAME)
        limit = self.descriptor.limits.max_alloc
        if limit is not None and nbytes > limit:
            return fail(ErrorKind.INVALID_VALUE, "Device.alloc", f"{nbytes} bytes exceed the device's maxBufferLength "
                        f"({limit})", _NAME)
        a = self.api
        h = a.U.MTLDevice_newBufferWithLength_options_(self.handle.handle, nbytes, options)
        if h == a.NULL:
            return fail(ErrorKind.OUT_OF_MEMORY, "Device.alloc", f"newBufferWithLength:{nbytes} options:{options} "
                        f"returned nil (max_alloc {limit})", _NAME)
        if self._handle_class is not None:  # (the class of the compiled allocators' allocations)
            made: MetalAllocation = self._handle_memory(self._handle_class, self, int(a.ffi.cast("uintptr_t", h)),
                                                        nbytes, kind, self._handle_calls)
            return made
        return MetalAllocation(self, h, nbytes, kind)  # (tracked: every Metal allocation is)

    def alloc(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> MetalAllocation:
        # the hot path: DEVICE memory of an int size the device takes, on an open device (the rest, and a nil
        # buffer, go through _checked_alloc for their errors)
        if type(nbytes) is int and 0 < nbytes <= self._max_alloc and kind is _DEVICE and not self._closed \
                and self._handle_class is None:  # (ABI mode's hot path: else the compiled allocator's class)
            h = self._new_buffer(self._hid, nbytes, _PRIVATE)
            if h:  # MetalAllocation(self, h, nbytes, kind), its __init__ inline (no call: ~60 ns of a pair)
                a = _new(MetalAllocation)
                a.device = self
                a.nbytes = nbytes
                a.kind = kind
                a._handle = h
                a._freed = False
                a._views = None
                a._export = None
                return a
        return self._checked_alloc(nbytes, kind, self._alloc)

    def alloc_unchecked(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> Result[Allocation]:
        if type(nbytes) is int and 0 < nbytes <= self._max_alloc and kind is _DEVICE and not self._closed \
                and self._handle_class is None:  # (ABI mode's hot path: else the compiled allocator's class)
            h = self._new_buffer(self._hid, nbytes, _PRIVATE)
            if h:  # (as alloc's)
                a = _new(MetalAllocation)
                a.device = self
                a.nbytes = nbytes
                a.kind = kind
                a._handle = h
                a._freed = False
                a._views = None
                a._export = None
                return a
        if self._closed:
            return self._closed_error("Device.alloc_unchecked")
        if type(nbytes) is not int or not 0 < nbytes <= _SIZE_MAX or type(kind) is not MemoryKind:
            checked = self._alloc_args_unchecked(nbytes, kind, "Device.alloc_unchecked")
            if isinstance(checked, Error):
                return checked
            nbytes = checked
        r = self._alloc(nbytes, kind, True)
        return as_operation(r, "Device.alloc", "Device.alloc_unchecked") if r.__class__ is Error else r

    # ---- streams, modules
    def _import_kind(self, device: tuple[int, int], what: str) -> MemoryKind:
        """Foreign memory is refused: an ``MTLBuffer`` over it needs ``newBufferWithBytesNoCopy:`` on
        page-aligned memory (with a deallocator block), which this backend does not wrap."""
        raise fail(ErrorKind.UNSUPPORTED, what, "Metal buffers over foreign memory (newBufferWithBytesNoCopy) "
                   "are not supported: copy it into an allocation (Stream.copy_from_host)", "METAL")

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
            TypeError: ``source_or_binary`` is neither str nor bytes (None, an int), as on every backend.
            Error: ``ErrorKind.COMPILE_FAILED`` (or the kind of the ``NSError``) with the compiler log;
                ``ErrorKind.INVALID_VALUE`` for a NUL character or lone surrogates in the source;
                ``ErrorKind.UNSUPPORTED`` for bytes or any compile option; ``ErrorKind.INVALID_HANDLE`` after
                ``close``.

        Backends:
            Metal (on Linux, the simulated device's "compiler").
        """
        if compile_options(options, defines, include_dirs, name_expressions, _NAME):
            raise fail(ErrorKind.UNSUPPORTED, "Device.load_module", "compile options (options, defines, include_dirs, "
                       "name_expressions) are not supported by the Metal backend yet (preprocessorMacros needs "
                       "an NSDictionary, not bound)", _NAME)
        self._check_open("Device.load_module")
        if not isinstance(source_or_binary, (str, bytes, bytearray, memoryview)):  # (as on every backend)
            raise TypeError(f"Device.load_module: source_or_binary must be str or bytes, not "
                            f"{type(source_or_binary).__name__}")
        if not isinstance(source_or_binary, str):
            raise fail(ErrorKind.UNSUPPORTED, "Device.load_module", "the Metal backend takes Metal Shading Language "
                       f"source (str), not {type(source_or_binary).__name__} (metallib bytes need "
                       "newLibraryWithData:error:, not bound yet)", _NAME)
        a = self.api
        from ironaccelerator_runtime.objc import NSErrorError

        text = source_or_binary
        nul = text.find("\0")
        if nul >= 0:  # refused as on every backend (the Objective-C string would end there)
            raise fail(ErrorKind.INVALID_VALUE, "Device.load_module", "the source holds a NUL character at "
                       f"character {nul} (the compiler would stop reading there)", _NAME)
        src = a.nsstring(text)  # INVALID_VALUE for lone surrogates
        mtl_options = a.M.MTLCompileOptions.new()
        try:
            library = self.handle.newLibraryWithSource_options_error_(src, mtl_options)
        except NSErrorError as e:
            raise fail(e.kind, "Device.load_module",
                       f"Metal newLibraryWithSource:options:error: failed ({e.domain} {e.code}); compiler "
                       f"log:\n{e.localized_description}", _NAME, code=e.code) from None
        finally:
            src.close()
            mtl_options.close()
        if library is None:
            raise fail(ErrorKind.COMPILE_FAILED, "Device.load_module",
                       "Metal newLibraryWithSource:options:error: returned nil without "
                       "an error (compiler log: none)", _NAME)
        return MetalModule(self, a.cast(library, a.M.MTLLibrary), text)

    def synchronize(self) -> None:
        self._check_open("Device.synchronize")
        for s in list(self._streams):
            s.synchronize()

    def _close(self) -> None:
        for allocator in self._allocators:  # (their later calls go to the methods, which refuse)
            allocator._shut()
        self.handle.close()


# Imported last: these modules import this one (the package's __init__ imports this module before
# them, so each finds the classes above already defined).
from .memory import MetalAllocation, handle_allocation_class
from .module import MetalModule
from .stream import MetalStream
