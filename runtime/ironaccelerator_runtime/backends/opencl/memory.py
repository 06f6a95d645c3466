"""OpenCL allocations: buffers and SVM, their host views (mapped), slices and release."""

from __future__ import annotations

import itertools
import weakref
from typing import Any

from ironaccelerator._core import ErrorKind, MemoryKind
from ironaccelerator_runtime import tracing
from ironaccelerator_runtime.errors import Error, fail
from ironaccelerator_runtime.traits import Allocation, AllocationSlice, Result

from .device import OpenCLDevice


def _unmap(api: Any, queue: Any, buffer: Any, ptr: Any) -> None:
    """End a host view's mapping (its last view gone): unmap, wait for it, drop the references it held."""
    raw = api.raw
    if raw.clEnqueueUnmapMemObject(queue, buffer, ptr, 0, api.ffi.NULL, api.ffi.NULL) == 0:
        raw.clFinish(queue)
    raw.clReleaseCommandQueue(queue)
    raw.clReleaseMemObject(buffer)


def _fine_grain_svm(api: Any, device: Any) -> bool:
    """Whether the device has fine-grained buffer SVM (CL_DEVICE_SVM_CAPABILITIES, OpenCL 2.0; an older device
    refuses the query)."""
    cl, out = api.cl, api.ffi.new("cl_ulong *")
    code = api.raw.clGetDeviceInfo(device, cl.CL_DEVICE_SVM_CAPABILITIES, api.ffi.sizeof("cl_ulong"), out,
                                   api.ffi.NULL)
    return code == 0 and bool(out[0] & cl.CL_DEVICE_SVM_FINE_GRAIN_BUFFER)




_SERIALS = itertools.count(1)
_BUFFERS: set[type] = set()  # OpenCLAllocation and its compiled twin: the classes the copy and launch paths inline
_COMPILED: list[type] = []  # the compiled twin, once made (one _fast module per process)


def _serial(a: OpenCLAllocation) -> int:
    """Give ``a`` its serial (the kernel-argument cache's key), on its first use as a kernel argument."""
    a._serial = key = next(_SERIALS)
    return key


class OpenCLAllocation(Allocation):
    """A ``cl_mem`` buffer.  ``_serial`` names it for the kernel-argument cache: unlike the ``cl_mem``
    address (which the driver may hand out again after a release), it is never reused; given on the first use
    as a kernel argument (0 until then: an allocation never passed to a kernel costs no serial).  No DLPack
    export: neither ``__dlpack__`` nor ``__dlpack_device__`` (a ``cl_mem`` is not an address; DLPack's
    ``kDLOpenCL`` is accepted by no consumer we know), and ``view()`` gives a plain ``ArrayView``.

    ``OpenCLDevice.alloc`` and ``alloc_unchecked`` make DEVICE buffers without calling ``__init__`` (they set the
    same attributes: one Python frame less on the allocation hot path)."""

    def __init__(self, device: OpenCLDevice, buffer: Any, nbytes: int, kind: MemoryKind, tracked: bool = False) -> None:
        self.device = device
        self.buffer = buffer
        self.nbytes = nbytes
        self.kind = kind
        if tracked:  # released by Allocation.__del__ if dropped unfreed
            self._tracked = True

    device: OpenCLDevice

    kind = MemoryKind.DEVICE  # (set by __init__; alloc's hot path leaves the default)
    _serial = 0  # (see the class)
    _svm: Any = None  # UNIFIED: the fine-grained SVM pointer the buffer uses as its storage

    def free(self) -> None:
        # the hot path (no views ever exported, not SVM): Allocation.free's checks and _release inlined
        if self._freed or self._views is not None or self._svm is not None:
            Allocation.free(self)
            return
        self._freed = True
        code = self.device._release_mem(self.buffer)
        if code:
            raise self.device.api.error(code, "clReleaseMemObject")

    def free_unchecked(self) -> Result[None]:
        if self._freed or self._views is not None or self._svm is not None:
            return Allocation.free_unchecked(self)
        self._freed = True
        code = self.device._release_mem(self.buffer)
        return self.device.api.error(code, "clReleaseMemObject") if code else None

    def _slice(self, offset: int, nbytes: int) -> Allocation:
        """``clCreateSubBuffer`` over the region (released when the slice is dropped); its origin must be a
        multiple of the device's CL_DEVICE_MEM_BASE_ADDR_ALIGN, else INVALID_VALUE naming it."""
        device, api = self.device, self.device.api
        cl, what = api.cl, "Allocation.__getitem__"
        if not device._base_align:
            device._base_align = max(
                api.info_int("clGetDeviceInfo", device.handle, cl.CL_DEVICE_MEM_BASE_ADDR_ALIGN, "cl_uint") // 8, 1)
        align = device._base_align
        if offset % align:
            raise fail(ErrorKind.INVALID_VALUE, what, "an OpenCL sub-buffer must start at a multiple of "
                       f"{align} bytes (CL_DEVICE_MEM_BASE_ADDR_ALIGN) on this device, not at {offset}", "OPENCL")
        region = api.ffi.new("cl_buffer_region *", {"origin": offset, "size": nbytes})
        err = api.ffi.new("cl_int *")
        sub = api.raw.clCreateSubBuffer(self.buffer, 0, cl.CL_BUFFER_CREATE_TYPE_REGION, region, err)
        if err[0] != 0:
            raise api.error(err[0], "clCreateSubBuffer", f"[{offset}:{offset + nbytes}] of {self!r}")
        s: Any = AllocationSlice(self, offset, nbytes)
        s.buffer = sub
        s._finalizer_ref = weakref.finalize(s, api.raw.clReleaseMemObject, sub)
        return s  # type: ignore[no-any-return]

    def _host_address(self) -> int | None:
        """UNIFIED (fine-grained SVM) memory is the host's to read and write; other buffers have no address."""
        return None if self._svm is None else int(self.device.api.ffi.cast("uintptr_t", self._svm))

    def _device_address(self) -> int | None:
        """The SVM pointer (UNIFIED memory), which kernels and libraries take as an address; other buffers are
        ``cl_mem`` handles with no address."""
        return self._host_address()

    def host_view(self) -> memoryview:
        """A writable byte view of host-visible memory, without a copy (see :meth:`Allocation.host_view`).

        UNIFIED: the SVM memory itself.  A host-allocated buffer (HOST_PINNED, HOST: ``CL_MEM_ALLOC_HOST_PTR``) is
        mapped (a blocking ``clEnqueueMapBuffer``, read and write, on the device's own queue) and unmapped when
        the view is released or dropped (``clEnqueueUnmapMemObject``, then that queue finished).  OpenCL leaves a
        command that uses a mapped buffer undefined: release the view before the buffer is used on a stream, and
        synchronize that stream before taking one.

        Returns:
            A writable ``memoryview`` (format ``"B"``) of the allocation's bytes.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for DEVICE buffers (not host-visible), as everywhere;
                ``ErrorKind.INVALID_HANDLE`` once freed or after ``Device.close``; the driver's error where mapping
                fails.

        Backends:
            OpenCL.
        """
        if self.kind not in (MemoryKind.HOST_PINNED, MemoryKind.HOST) or self._svm is not None:
            return super().host_view()
        what = "Allocation.host_view"
        self._check_live(what)
        device = self.device
        device._check_open(what)
        if self.nbytes == 0:
            return memoryview(b"").cast("B")[:0]
        api, cl = device.api, device.api.cl
        q = device._map_queue()
        err = api.ffi.new("cl_int *")
        ptr = api.raw.clEnqueueMapBuffer(q, self.buffer, cl.CL_TRUE, cl.CL_MAP_READ | cl.CL_MAP_WRITE, 0, self.nbytes,
                                         0, api.ffi.NULL, api.ffi.NULL, err)
        if err[0] != 0:
            raise api.error(err[0], "clEnqueueMapBuffer", repr(self))
        # the mapping holds the buffer and the queue (OpenCL references) until it is unmapped
        api.raw.clRetainMemObject(self.buffer)
        api.raw.clRetainCommandQueue(q)
        import ctypes  # (here, not at import: ~1.4 ms of the first device's start)

        arr = (ctypes.c_char * self.nbytes).from_address(int(api.ffi.cast("uintptr_t", ptr)))
        arr._allocation = self  # type: ignore[attr-defined]  # (the view keeps the allocation alive)
        weakref.finalize(arr, _unmap, api, q, self.buffer, ptr)
        self._views = [r for r in (self._views or ()) if r() is not None] + [weakref.ref(arr)]
        return memoryview(arr).cast("B")

    def _release(self) -> Error | None:
        device = self.device
        code = device._release_mem(self.buffer)
        if self._svm is not None:  # clSVMFree does not wait for queued commands: every stream is waited for first
            for s in device._live_streams():
                s.synchronize()
            device.api.raw.clSVMFree(device.context, self._svm)
            self._svm = None
        return device.api.error(code, "clReleaseMemObject") if code else None


_BUFFERS.add(OpenCLAllocation)


class _Buffer:
    """``buffer`` of a compiled allocation: the ``cl_mem`` of its address, made on first use and then kept in the
    instance's ``__dict__`` (a non-data descriptor: later reads find it there)."""

    def __init__(self, cast: Any) -> None:
        self._cast = cast

    def __get__(self, obj: Any, cls: type | None = None) -> Any:
        if obj is None:
            return self
        buffer = obj.__dict__["buffer"] = self._cast("cl_mem", obj.ptr)
        return buffer


def _compiled_allocation(fast: Any, ffi: Any) -> type | None:
    """:class:`OpenCLAllocation` on the compiled ``_DeviceMemory`` (ia_runtime.h, the spec's ``device_memory``:
    ``clCreateBuffer`` and ``clReleaseMemObject`` called in C), made once per process with the same name; DEVICE
    buffers only (``ptr`` is the ``cl_mem``'s address, ``buffer`` the ``cl_mem``).  None without it (ABI mode,
    ``IRONACCEL_TRACE``)."""
    if _COMPILED:
        return _COMPILED[0]
    setup = getattr(fast, "_devmem_setup", None)
    if setup is None or tracing.ENABLED:  # (the C paths would call the library unlogged)
        return None
    base: Any = setup(None, Error)  # (no thread-local: OpenCL has no current device)

    class Compiled(base, OpenCLAllocation):  # type: ignore[misc]
        __doc__ = OpenCLAllocation.__doc__
        kind = MemoryKind.DEVICE
        buffer = _Buffer(ffi.cast)

    Compiled.__name__ = Compiled.__qualname__ = OpenCLAllocation.__name__
    Compiled.__module__ = OpenCLAllocation.__module__
    _COMPILED.append(Compiled)
    _BUFFERS.add(Compiled)
    return Compiled
