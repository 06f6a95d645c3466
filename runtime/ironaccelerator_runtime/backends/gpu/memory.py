"""Device memory: :class:`GpuAllocation`, and its imported (DLPack) and IPC-opened kinds."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ironaccelerator._core import BackendKind, DType, ErrorKind, MemoryKind
from ironaccelerator_runtime import dlpack
from ironaccelerator_runtime.backends.gpu.api import GpuApi, _address
from ironaccelerator_runtime.backends.gpu.context import _TLS
from ironaccelerator_runtime.errors import Error, fail
from ironaccelerator_runtime.traits import Allocation, AllocationSlice, IpcHandle, Result, unsupported

if TYPE_CHECKING:  # (and bound at run time by __init__.py: the module defining it imports this one)
    from ironaccelerator_runtime.backends.gpu.device import GpuDevice


def _free(api: GpuApi, kind: MemoryKind, handle: Any) -> tuple[int, str]:
    if kind is MemoryKind.HOST_PINNED or kind is MemoryKind.HOST:
        return int(api.host_free(handle)), "host_free"
    return int(api.free(handle)), "free"


def _offset_ptr(ffi: Any, dptr: Any, offset: int) -> Any:
    """``dptr`` + ``offset`` bytes, in the native device-pointer type (CUdeviceptr: an int; hipDeviceptr_t: a
    void * cdata)."""
    if not offset:
        return dptr
    if isinstance(dptr, int):
        return dptr + offset
    return ffi.cast(ffi.typeof(dptr), ffi.cast("char *", dptr) + offset)


class GpuAllocation(Allocation):
    """Device memory: ``.ptr`` (the address, an int), ``.dptr`` (the native device-pointer argument: what the
    allocator returned), ``.handle`` (the same).  Exports DLPack, and ``__cuda_array_interface__`` (v3) where the
    vendor's ``interop`` lists it."""

    device: GpuDevice

    def __init__(self, device: GpuDevice, handle: Any, nbytes: int, kind: MemoryKind) -> None:
        # (_freed and _tracked: False, the class defaults)
        self.device = device
        self._ctx = device._ctx  # the context lives while this does (Device.close gives up only the device's)
        self.handle = handle
        self.ptr = handle if type(handle) is int else _address(handle)
        self.dptr: Any = handle  # (an int where the device-pointer type is an integer, ex. CUdeviceptr)
        self.nbytes = nbytes
        self.kind = kind

    def _release(self) -> Error | None:
        device = self.device
        try:
            if getattr(_TLS, "key", None) != device._key:
                device.activate()
        except Error as e:
            return e.with_traceback(None)
        api = device.api
        code, role = _free(api, self.kind, self.handle)
        return api.error(code, role) if code else None

    # Allocation.free and free_unchecked, with _release inline for device memory of the current device
    def free(self) -> None:
        if self._freed:
            raise fail(ErrorKind.INVALID_HANDLE, "Allocation.free", f"{self!r} was already freed", self.device)
        if self._views and (e := self._views_error("Allocation.free")) is not None:
            raise e  # (exported views: typed DLPack views of DEVICE memory too)
        device = self.device
        if self.kind is MemoryKind.DEVICE and getattr(_TLS, "key", None) == device._key:
            self._freed = True
            code = device._free(self.handle)
            if code:
                raise device.api.error(code, "free")
            return
        self._freed = True
        err = self._release()
        if err is not None:
            raise err

    def free_unchecked(self) -> Result[None]:
        if self._freed:  # one flag test: releasing the vendor handle twice is undefined behaviour (a crash)
            return fail(ErrorKind.INVALID_HANDLE, "Allocation.free_unchecked", f"{self!r} was already freed",
                        self.device)
        if self._views and (e := self._views_error("Allocation.free_unchecked")) is not None:
            return e
        device = self.device
        if self.kind is MemoryKind.DEVICE and getattr(_TLS, "key", None) == device._key:
            self._freed = True
            code = device._free(self.handle)
            return device.api.error(code, "free") if code else None
        self._freed = True
        return self._release()

    def export_ipc(self) -> IpcHandle:
        """An IPC handle of this DEVICE allocation (``ipc_get``: ``cuIpcGetMemHandle`` / ``hipIpcGetMemHandle``; see
        :meth:`Allocation.export_ipc`).

        Returns:
            The :class:`IpcHandle` another process opens with ``Device.import_ipc``.

        Raises:
            Error: ``ErrorKind.UNSUPPORTED`` for HOST_PINNED, HOST or UNIFIED memory, stream-ordered pool
                allocations and imported memory, or where the vendor has no IPC; ``ErrorKind.INVALID_VALUE`` for a
                slice or a caching-pool block; ``ErrorKind.INVALID_HANDLE`` once freed or after ``Device.close``;
                the driver's error.

        Backends:
            CUDA, HIP.
        """
        what = "Allocation.export_ipc"
        self._check_live(what)
        device = self.device
        device._check_open(what)
        api = device.api
        if api.ipc_get is None:
            raise unsupported(device.kind, what)
        if self.kind is not MemoryKind.DEVICE:
            raise fail(ErrorKind.UNSUPPORTED, what, f"{self.kind.name} memory has no {api.name} IPC handle; export "
                       "DEVICE memory (Device.alloc)", api)
        device.activate()
        out = api.ffi.new(api.tables.types["ipc_handle"] + " *")
        api.check(api.ipc_get(out, self.dptr), "ipc_get")
        return IpcHandle(backend=device.kind, device=device.descriptor.id.index, nbytes=self.nbytes,
                         data=bytes(api.ffi.buffer(out)), pid=os.getpid())

    def _slice(self, offset: int, nbytes: int) -> Allocation:
        """A slice: ``ptr`` and ``dptr`` (the native device-pointer type) moved by ``offset`` bytes."""
        s: Any = AllocationSlice(self, offset, nbytes)
        s.ptr = self.ptr + offset
        s.dptr = s.handle = _offset_ptr(self.device.api.ffi, self.dptr, offset)
        return s  # type: ignore[no-any-return]

    def _device_address(self) -> int | None:
        """Every kind: device, pinned and managed memory share the process's unified address space."""
        return self.ptr

    def _host_address(self) -> int | None:
        """Pinned host memory and managed (unified) memory are host-addressable; device memory is not."""
        return self.ptr if self.kind in (MemoryKind.HOST_PINNED, MemoryKind.HOST, MemoryKind.UNIFIED) else None

    # typed views (Allocation.view): the DLPack device of each kind, and the consumer-stream handshake
    def _dlpack_device(self) -> tuple[int, int] | None:
        """Device memory: ``kDLCUDA``/``kDLROCM``; pinned host memory: ``kDLCUDAHost``/``kDLROCMHost``; managed
        memory: ``kDLCUDAManaged`` (HIP has no managed device type: ``kDLROCMHost``, host-addressable too)."""
        cuda = self.device.kind is BackendKind.CUDA
        index = self.device.descriptor.id.index
        if self.kind is MemoryKind.DEVICE:
            return (self.device.kind.dlpack_device, index)
        if self.kind is MemoryKind.UNIFIED and cuda:
            return (dlpack.KDL_CUDA_MANAGED, index)
        return (dlpack.KDL_CUDA_HOST if cuda else dlpack.KDL_ROCM_HOST, index)

    def _dlpack_address(self) -> int:
        return self.ptr

    def _view_class(self) -> type[Any]:
        return dlpack.CudaArrayView if "cuda_array_interface" in self.device.api.tables.interop else dlpack.DLPackView

    def _dlpack_sync(self, view: Any, stream: Any) -> None:
        """The DLPack stream handshake: ``stream`` is the consumer's (None: the legacy default stream; -1: the
        consumer orders itself, nothing is done).  With a producer stream (``view(..., stream=s)``) an event is
        recorded on it and the consumer's stream waits on that event (no host wait); without one the producer
        cannot know what to wait for, so the device is synchronised."""
        if stream == -1 and type(stream) is int:
            return
        device = self.device
        handle = device._stream_handle(stream, "__dlpack__")
        producer = view.stream
        if producer is None:
            device.synchronize()
            return
        if handle is not None and handle == producer._address:
            return  # the same stream: already in order
        event = producer.record_event()
        api = device.api
        target = api.ffi.cast(api.tables.types["stream"], handle or 0)
        api.check(api.stream_wait_event(target, event.handle, 0), "stream_wait_event")

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CUDA Array Interface v3: a 1-D uint8 view of the allocation (zero copy), where the vendor's ``interop``
        lists it (elsewhere AttributeError: ``hasattr`` is False)."""
        if "cuda_array_interface" not in self.device.api.tables.interop:
            raise AttributeError(f"{type(self).__name__} has no __cuda_array_interface__ ({self.device.kind.name} "
                                 "memory is not CUDA memory)")
        self._check_live("__cuda_array_interface__")
        self.device._check_open("__cuda_array_interface__")
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.ptr, False), "version": 3,
                "strides": None, "stream": None}

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.device.kind.dlpack_device, self.device.descriptor.id.index)

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """A DLPack capsule of a 1-D uint8 tensor over the allocation (zero copy): ``"dltensor_versioned"`` for a
        consumer passing ``max_version >= (1, 0)``, else ``"dltensor"`` (typed, strided exports: ``view()``).

        The producer's work is complete before the capsule is returned: unless ``stream == -1``, the device is
        synchronised (this backend does not track which stream last wrote an allocation; a view made with
        ``view(..., stream=s)`` orders the consumer's stream after ``s`` instead)."""
        self._check_live("__dlpack__")
        self.device._check_open("__dlpack__")
        if copy:
            raise BufferError(f"{self.device.kind.name} allocations export without copying (copy=True is not supported)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"cannot export {self!r} to device {tuple(dl_device)}")
        self._dlpack_sync(_NO_PRODUCER, stream)  # (the stream argument checked as the protocol says)
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return dlpack.EXPORTER.export(self, self.ptr, self.__dlpack_device__(), DType.U8, (self.nbytes,), None, 0,
                                      versioned)


def _compiled_device_allocation(api: GpuApi, cls: type[GpuAllocation]) -> type:
    """``cls`` (a vendor's :class:`GpuAllocation`) on the compiled ``_DeviceMemory`` (ia_runtime.h), which holds
    ``ptr``, ``nbytes``, ``device``, the context reference, the views and the flags, and allocates, frees and
    releases on drop in C; DEVICE memory only; made once per class and api, with the same name."""
    made = api.device_types.get(cls)
    if made is not None:
        return made
    assert api.device_memory is not None
    base: Any = api.device_memory[1]
    ffi, deviceptr_t = api.ffi, api.tables.types["deviceptr"]
    pointer = "*" in deviceptr_t  # else the device-pointer type is the address itself (an integer)

    class Compiled(base, cls):  # type: ignore[misc,valid-type]
        __doc__ = cls.__doc__
        kind = MemoryKind.DEVICE

        @property
        def handle(self) -> Any:  # the native device-pointer argument: what the allocator returned
            return ffi.cast(deviceptr_t, self.ptr) if pointer else self.ptr

        dptr = handle

    Compiled.__name__ = Compiled.__qualname__ = cls.__name__
    Compiled.__module__ = cls.__module__
    api.device_types[cls] = Compiled
    return Compiled


class _NoProducer:
    stream = None  # an allocation's own export knows no producer stream


_NO_PRODUCER = _NoProducer()


class _ImportedMemory:
    """Memory imported from another library (``Device.from_dlpack``): never freed by this backend; ``free()``
    or dropping it calls the producer's deleter (``_foreign.release()``) once."""

    _foreign: Any = None

    def _release(self) -> Error | None:
        foreign, self._foreign = self._foreign, None
        if foreign is not None:
            foreign.release()
        return None

    free = Allocation.free  # (not GpuAllocation's fast path, which frees device memory)
    free_unchecked = Allocation.free_unchecked

    def export_ipc(self) -> IpcHandle:
        raise fail(ErrorKind.UNSUPPORTED, "Allocation.export_ipc", "memory imported from another library is not this "
                   "backend's to export", self.device)  # type: ignore[attr-defined]


class _IpcMemory:
    """Memory opened from another process's IPC handle (``Device.import_ipc``): ``free()`` or dropping it closes the
    mapping (``ipc_close``), never frees the memory (the exporter's)."""

    def _release(self) -> Error | None:
        device: GpuDevice = self.device  # type: ignore[attr-defined]
        try:
            if getattr(_TLS, "key", None) != device._key:
                device.activate()
        except Error as e:
            return e.with_traceback(None)
        code = device.api.ipc_close(self.handle)  # type: ignore[attr-defined]
        return device.api.error(code, "ipc_close") if code else None

    free = Allocation.free  # (not GpuAllocation's fast path, which frees device memory)
    free_unchecked = Allocation.free_unchecked

    def export_ipc(self) -> IpcHandle:
        raise fail(ErrorKind.UNSUPPORTED, "Allocation.export_ipc", "memory opened from an IPC handle is the exporting "
                   "process's: pass its handle on instead", self.device)  # type: ignore[attr-defined]


_MIXED: dict[tuple[type, type], type] = {}


def _with_mixin(mixin: type, base: type[GpuAllocation]) -> type[GpuAllocation]:
    """``base`` (a vendor's allocation class) with ``mixin``'s release in front, made once per pair:
    ``ImportedCudaAllocation`` (memory of another framework), ``IpcCudaAllocation`` (another process's)."""
    cls = _MIXED.get((mixin, base))
    if cls is None:
        prefix = "Imported" if mixin is _ImportedMemory else "Ipc"
        cls = _MIXED[mixin, base] = type(prefix + base.__name__, (mixin, base), {})
    return cls
