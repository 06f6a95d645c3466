"""The OpenCL backend: the core surface over the generated ``ironaccelerator.backends.opencl.cl``.

Streams are in-order command queues with profiling enabled; kernels are built
from OpenCL C source (a failed build raises ``COMPILE_FAILED`` with the build
log); ``LaunchDims`` maps to a 3-D NDRange with global = grid x block and local = block (given
explicitly, never NULL).  Hot paths call the raw (unchecked) C functions directly.

What is per-spec data (``specs/opencl/backend.yaml``: extension -> capability flags, device type -> tier,
vendor names) arrives as an :class:`OpenCLTables`, rendered into the generated
``ironaccelerator.backends.opencl._backend``, whose ``OpenCLBackend`` subclasses the one here with it.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import re
import struct
import sys
import threading
import time
import weakref
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from ironaccelerator._core import BackendKind, CapabilityFlags, ComputeTier, DType, ErrorKind, MemoryKind, Vendor
from ironaccelerator_runtime import kernel_cache
from ironaccelerator_runtime.errors import Error
from ironaccelerator_runtime.traits import _SIZE_MAX  # (alloc_unchecked's one range test)
from ironaccelerator_runtime.kernel_args import (
    LocalMemory, Param, arg_error, buffer_error, param_of, shared_mem_error, value_bytes,
)
from ironaccelerator_runtime.traits import (
    Allocation, AllocationSlice, Backend, Capability, CompileOptions, CopyRegion, Device, DeviceDescriptor, DeviceId,
    DeviceLimits, Event,
    Kernel, KernelAttributes, KernelLaunch, InFlight, LaunchDims, Module, PooledAllocation, Result, Scalar, Stream,
    check_size, check_span, compile_options, compiler_log, device_span, host_span, fill_pattern, host_view,
    not_a_launch,
)

_KIND = BackendKind.OPENCL
_BUILD_OPTIONS = b"-cl-kernel-arg-info"
_CData: type = type(None)  # cffi's CData type, set when the bindings load (_Api)
_QUERY_GRACE_S = 0.002  # Stream.query: how long a marker behind finished work may take to complete
_PLATFORM_NOT_FOUND_KHR = -1001  # cl_ext.h: what the ICD loader returns when no platform is installed


def _cl() -> Any:
    from ironaccelerator.backends.opencl import cl
    return cl


@dataclass(frozen=True)
class OpenCLTables:
    """Capability translation, as spec data: extension (or ``always`` / ``host_unified_memory``) -> flags,
    device type (``CPU``, ``GPU``, ``GPU+host_unified_memory``, ``ACCELERATOR``, ``CUSTOM``) -> tier, and
    (substring, vendor) pairs tried in order."""

    flags: dict[str, CapabilityFlags]
    tiers: dict[str, ComputeTier]
    vendors: tuple[tuple[str, Vendor], ...]

    def capability(self, extensions: str, device_type: int, host_unified: bool, c_version: str,
                   cl: Any) -> Capability:
        """Device facts -> Capability, by the tables (unit-testable without a device)."""
        flags = self.flags.get("always", CapabilityFlags.NONE)
        for ext in extensions.split():
            flags |= self.flags.get(ext, CapabilityFlags.NONE)
        if host_unified:
            flags |= self.flags.get("host_unified_memory", CapabilityFlags.NONE)
        if device_type & cl.CL_DEVICE_TYPE_CPU:
            key = "CPU"
        elif device_type & cl.CL_DEVICE_TYPE_GPU:
            key = "GPU+host_unified_memory" if host_unified else "GPU"
        elif device_type & cl.CL_DEVICE_TYPE_ACCELERATOR:
            key = "ACCELERATOR"
        else:
            key = "CUSTOM"
        return Capability(flags=flags, tier=self.tiers.get(key, ComputeTier.DISCRETE), vendor_version=c_version)

    def vendor(self, name: str, platform: str = "") -> Vendor:
        """The vendor of an OpenCL device: the platform (the implementation that drives it) first, then the
        device's own vendor string — PoCL's CPU device reports its processor's maker ("AuthenticAMD") but is
        PoCL's device, not AMD's."""
        for text in (platform, name):
            for needle, vendor in self.vendors:
                if text and needle.lower() in text.lower():
                    return vendor
        return Vendor.OTHER


class _Api:
    """The loaded bindings plus the error factory, resolved once."""

    def __init__(self) -> None:
        cl = _cl()
        if not cl.has("clGetPlatformIDs"):
            from ironaccelerator.backends.opencl.cl._binding import BINDING
            err = BINDING.load_error(BINDING.index["clGetPlatformIDs"])
            raise err or Error(ErrorKind.LIBRARY_NOT_FOUND, "OpenCL library not found", backend="OPENCL",
                               function="clGetPlatformIDs")
        from ironaccelerator.backends.opencl.cl._binding import BINDING
        self.cl = cl
        self.ffi = cl.ffi
        global _CData
        _CData = cl.ffi.CData
        self.raw = cl.unchecked
        self.binding = BINDING

    def error(self, code: int, function: str, detail: str = "") -> Error:
        return self.binding.error(code, self.binding.index[function], detail)

    def check(self, code: int, function: str) -> None:
        if code != 0:
            raise self.error(code, function)

    def info_bytes(self, fn: str, handle: Any, param: int, *extra: Any) -> bytes:
        raw = getattr(self.raw, fn)
        size = self.ffi.new("size_t *")
        self.check(raw(handle, *extra, param, 0, self.ffi.NULL, size), fn)
        buf = self.ffi.new("char[]", max(size[0], 1))
        self.check(raw(handle, *extra, param, size[0], buf, self.ffi.NULL), fn)
        return bytes(self.ffi.buffer(buf, size[0]))

    def info_str(self, fn: str, handle: Any, param: int, *extra: Any) -> str:
        return self.info_bytes(fn, handle, param, *extra).rstrip(b"\0").decode("utf-8", "replace")

    def info_int(self, fn: str, handle: Any, param: int, ctype: str, *extra: Any) -> int:
        raw = getattr(self.raw, fn)
        out = self.ffi.new(ctype + " *")
        self.check(raw(handle, *extra, param, self.ffi.sizeof(ctype), out, self.ffi.NULL), fn)
        return int(out[0])


class OpenCLBackend(Backend):
    """OpenCL through the ICD loader (``libOpenCL.so.1``): every platform's devices, in order.  ``tables``: the
    spec's capability data (the generated subclass sets it)."""

    kind = BackendKind.OPENCL
    tables = OpenCLTables(flags={}, tiers={}, vendors=())

    def __init__(self) -> None:
        self.api = _Api()
        self._devices: list[tuple[Any, DeviceDescriptor]] | None = None
        self._platforms: list[str] = []  # "name (CL_PLATFORM_VERSION)" of each platform, once enumerated
        self._lock = threading.Lock()

    def versions(self) -> dict[str, Any]:
        """The platforms the ICD loader lists, each with its CL_PLATFORM_VERSION.

        Returns:
            ``{"platforms": "name (version); ..."}``; empty when the loader lists no platform.

        Raises:
            Error: the vendor's error where enumerating the platforms fails.

        Backends:
            OpenCL.
        """
        self._enumerate()
        return {"platforms": "; ".join(self._platforms)} if self._platforms else {}

    def _enumerate(self) -> list[tuple[Any, DeviceDescriptor]]:
        with self._lock:
            if self._devices is not None:
                return self._devices
            api, ffi, raw, cl = self.api, self.api.ffi, self.api.raw, self.api.cl
            n = ffi.new("cl_uint *")
            code = raw.clGetPlatformIDs(0, ffi.NULL, n)
            if code == _PLATFORM_NOT_FOUND_KHR:
                self._devices = []
                return self._devices
            api.check(code, "clGetPlatformIDs")
            platforms = ffi.new("cl_platform_id[]", n[0])
            api.check(raw.clGetPlatformIDs(n[0], platforms, ffi.NULL), "clGetPlatformIDs")
            found: list[tuple[Any, DeviceDescriptor]] = []
            self._platforms = []
            for p in platforms:
                pname = api.info_str("clGetPlatformInfo", p, cl.CL_PLATFORM_NAME)
                self._platforms.append(f"{pname} ({api.info_str('clGetPlatformInfo', p, cl.CL_PLATFORM_VERSION)})")
                nd = ffi.new("cl_uint *")
                code = raw.clGetDeviceIDs(p, cl.CL_DEVICE_TYPE_ALL, 0, ffi.NULL, nd)
                if code == cl.CL_DEVICE_NOT_FOUND:
                    continue
                api.check(code, "clGetDeviceIDs")
                devs = ffi.new("cl_device_id[]", nd[0])
                api.check(raw.clGetDeviceIDs(p, cl.CL_DEVICE_TYPE_ALL, nd[0], devs, ffi.NULL), "clGetDeviceIDs")
                for d in devs:
                    found.append((d, self._describe(len(found), d, pname)))
            self._devices = found
            return found

    def _describe(self, index: int, d: Any, platform: str = "") -> DeviceDescriptor:
        api, cl = self.api, self.api.cl
        fn = "clGetDeviceInfo"
        name = api.info_str(fn, d, cl.CL_DEVICE_NAME)
        vendor = self.tables.vendor(api.info_str(fn, d, cl.CL_DEVICE_VENDOR),
                                    platform + " " + api.info_str(fn, d, cl.CL_DEVICE_VERSION))
        dtype = api.info_int(fn, d, cl.CL_DEVICE_TYPE, "cl_device_type")
        unified = bool(api.info_int(fn, d, cl.CL_DEVICE_HOST_UNIFIED_MEMORY, "cl_bool"))
        capability = self.tables.capability(api.info_str(fn, d, cl.CL_DEVICE_EXTENSIONS), dtype, unified,
                                            api.info_str(fn, d, cl.CL_DEVICE_OPENCL_C_VERSION), cl)
        if _fine_grain_svm(api, d):  # alloc(MemoryKind.UNIFIED) works: fine-grained buffer SVM
            capability = replace(capability, flags=capability.flags | CapabilityFlags.UNIFIED_MEMORY)
        sizes = api.info_bytes(fn, d, cl.CL_DEVICE_MAX_WORK_ITEM_SIZES)
        n = len(sizes) // 8
        dims = struct.unpack(f"<{n}Q", sizes[: n * 8]) + (1, 1, 1)
        limits = DeviceLimits(
            max_block=(int(dims[0]), int(dims[1]), int(dims[2])),
            max_threads_per_block=api.info_int(fn, d, cl.CL_DEVICE_MAX_WORK_GROUP_SIZE, "size_t"),
            max_grid=(2**31 - 1, 2**31 - 1, 2**31 - 1),
            max_shared_mem=api.info_int(fn, d, cl.CL_DEVICE_LOCAL_MEM_SIZE, "cl_ulong"),
            max_alloc=api.info_int(fn, d, cl.CL_DEVICE_MAX_MEM_ALLOC_SIZE, "cl_ulong"),
            # PoCL's CPU device crashes or hangs past 2**32 work-items in one launch (measured: (2**16, 2**16, 1)
            # SIGILL, (2**31-1) x 4096 SIGSEGV); OpenCL itself sets no such limit, so keep it below 2**32
            max_work_items=2**32 - 1,
        )
        return DeviceDescriptor(
            id=DeviceId(BackendKind.OPENCL, index), name=name, vendor=vendor, backend=BackendKind.OPENCL,
            total_memory=api.info_int(fn, d, cl.CL_DEVICE_GLOBAL_MEM_SIZE, "cl_ulong"),
            compute_units=api.info_int(fn, d, cl.CL_DEVICE_MAX_COMPUTE_UNITS, "cl_uint"),
            capability=capability, limits=limits,
        )

    def devices(self) -> list[DeviceDescriptor]:
        return [desc for _, desc in self._enumerate()]

    def open(self, device_id: DeviceId | int = 0) -> OpenCLDevice:
        index = self._index(device_id)
        devs = self._enumerate()
        if not devs:
            raise Error(ErrorKind.NO_DEVICE, "no OpenCL device found", backend="OPENCL", function="Backend.open")
        if not 0 <= index < len(devs):
            raise Error(ErrorKind.INVALID_VALUE, f"OpenCL device {index} does not exist ({len(devs)} found)",
                        backend="OPENCL", function="Backend.open")
        handle, desc = devs[index]
        return OpenCLDevice(self, handle, desc)


class OpenCLDevice(Device):
    """An opened OpenCL device: a ``cl_context`` of its own (``clCreateContext``) on one ``cl_device_id``.

    Adds over :class:`~ironaccelerator.Device`: ``handle`` (the ``cl_device_id``) and ``context`` (the
    ``cl_context``) for interop with other OpenCL code; ``alloc(kind=MemoryKind.UNIFIED)`` is fine-grained buffer
    SVM (``clSVMAlloc``) where the device has it (``CapabilityFlags.UNIFIED_MEMORY``), HOST_PINNED/HOST are
    ``CL_MEM_ALLOC_HOST_PTR`` buffers; ``load_module`` builds OpenCL C and keeps program binaries in the kernel
    cache.  Foreign memory (``from_dlpack``) and IPC are ``UNSUPPORTED``.  Closing it releases the device's own
    context reference; streams, programs and buffers made from it hold theirs.
    """

    def __init__(self, backend: OpenCLBackend, handle: Any, descriptor: DeviceDescriptor) -> None:
        self.backend = backend
        self.api = backend.api
        self.handle = handle
        self.descriptor = descriptor
        api, ffi, cl = self.api, self.api.ffi, self.api.cl
        err = ffi.new("cl_int *")
        devs = ffi.new("cl_device_id[1]", [handle])
        ctx = api.raw.clCreateContext(ffi.NULL, 1, devs, ffi.NULL, ffi.NULL, err)
        api.check(err[0], "clCreateContext")
        self.context = ctx
        self._finalizer = weakref.finalize(self, api.raw.clReleaseContext, ctx)
        self._default_stream: OpenCLStream | None = None
        self._streams: weakref.WeakSet[OpenCLStream] = weakref.WeakSet()  # (Device.synchronize, pool fences)
        # the allocation hot path, resolved once
        self._create_buffer = api.raw.clCreateBuffer
        self._release_mem = api.raw.clReleaseMemObject
        self._null = ffi.NULL
        self._mem_flags = {
            MemoryKind.DEVICE: cl.CL_MEM_READ_WRITE,
            MemoryKind.HOST_PINNED: cl.CL_MEM_READ_WRITE | cl.CL_MEM_ALLOC_HOST_PTR,
            MemoryKind.HOST: cl.CL_MEM_READ_WRITE | cl.CL_MEM_ALLOC_HOST_PTR,
        }
        # MemoryKind.UNIFIED: fine-grained buffer SVM, which is what UNIFIED_MEMORY says here (see _describe)
        self._svm = CapabilityFlags.UNIFIED_MEMORY in descriptor.capability.flags
        self._base_align = 0  # CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes (sub-buffer origins), read on first use
        self._mapper: Any = None  # the queue host views map HOST_PINNED buffers on (created on first use)
        self._mapper_lock = threading.Lock()

    # MemoryPool's fences: every enqueue of work sets _dirty (on its stream and here) after the call
    _dirty = False
    _fence_events: list[Event] = []  # (replaced, never appended to)

    def _pool_fence(self) -> list[Event]:
        """The events a pool block freed now waits for: none when nothing was enqueued since the last fence and
        that fence completed (two flag tests, no call: the pool's hot path); else a marker on each stream with
        work since (``OpenCLStream._pool_fence``)."""
        if not self._dirty:
            events = self._fence_events
            if events:
                for e in events:
                    if not e.query():
                        return events
                self._fence_events = events = []
            return events
        self._dirty = False  # (an enqueue sets it after its call: one racing with this sets it again)
        events = []
        for s in self._live_streams():
            fence = s._pool_fence()
            if fence is not None:
                events.append(fence)
        self._fence_events = events
        return events

    def _map_queue(self) -> Any:
        """The device's queue for ``clEnqueueMapBuffer`` (host views), created on first use and released with the
        device; each mapping retains it until it is unmapped, so a view may outlive the device."""
        with self._mapper_lock:
            if self._mapper is None:
                api = self.api
                err = api.ffi.new("cl_int *")
                q = api.raw.clCreateCommandQueueWithProperties(self.context, self.handle, api.ffi.NULL, err)
                api.check(err[0], "clCreateCommandQueueWithProperties")
                self._mapper = q
                weakref.finalize(self, api.raw.clReleaseCommandQueue, q)
            return self._mapper

    def alloc(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> OpenCLAllocation:
        return self._checked_alloc(nbytes, kind, self._alloc)

    def alloc_unchecked(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> Result[OpenCLAllocation]:
        if self._closed:
            return self._closed_error("Device.alloc_unchecked")
        if type(nbytes) is not int or not 0 < nbytes <= _SIZE_MAX or type(kind) is not MemoryKind:
            checked = self._alloc_args_unchecked(nbytes, kind, "Device.alloc_unchecked")
            if isinstance(checked, Error):
                return checked
            nbytes = checked
        return self._alloc(nbytes, kind, False)

    def _alloc(self, nbytes: int, kind: MemoryKind, tracked: bool) -> Result[OpenCLAllocation]:
        flags = self._mem_flags.get(kind)
        if kind is MemoryKind.UNIFIED and self._svm:
            return self._alloc_svm(nbytes, tracked)
        if flags is None:
            return Error(ErrorKind.UNSUPPORTED, f"{getattr(kind, 'name', kind)} memory is not supported by the "
                         "OpenCL backend", backend="OPENCL", function="Device.alloc")
        null = self._null
        try:
            buf = self._create_buffer(self.context, flags, nbytes, null, null)  # no errcode_ret: NULL means failed
        except (OverflowError, TypeError) as e:  # not a size_t
            return Error(ErrorKind.INVALID_VALUE, f"cannot allocate {nbytes!r} bytes: {e}", backend="OPENCL",
                         function="Device.alloc")
        if not buf:  # failed: ask again for the reason (only the failing path pays for a cl_int *)
            err = self.api.ffi.new("cl_int *")
            buf = self._create_buffer(self.context, flags, nbytes, null, err)
            if not buf:
                limit = self.descriptor.limits.max_alloc
                return self.api.error(err[0], "clCreateBuffer", f"{nbytes} bytes of {kind.name} memory requested; "
                                      f"the device's largest allocation is {limit} bytes")
        return OpenCLAllocation(self, buf, nbytes, kind, tracked)

    def _alloc_svm(self, nbytes: int, tracked: bool) -> Result[OpenCLAllocation]:
        """UNIFIED: ``clSVMAlloc`` (fine-grained buffer: the host reads and writes it directly, coherently), wrapped
        in a ``cl_mem`` with ``CL_MEM_USE_HOST_PTR`` (OpenCL 2.0: the buffer then uses the SVM allocation as its
        storage), so copies, fills and kernel arguments take it as any buffer."""
        api, cl, what = self.api, self.api.cl, "Device.alloc"
        try:
            n = check_size(nbytes, "nbytes", what, _KIND)
        except (Error, TypeError) as e:
            return e if isinstance(e, Error) else Error(ErrorKind.INVALID_VALUE, str(e), backend="OPENCL", function=what)
        p = api.raw.clSVMAlloc(self.context, cl.CL_MEM_READ_WRITE | cl.CL_MEM_SVM_FINE_GRAIN_BUFFER, n, 0)
        if p == self._null:
            return Error(ErrorKind.OUT_OF_MEMORY, f"{what}: clSVMAlloc of {n} bytes of UNIFIED (fine-grained SVM) "
                         f"memory failed; the device's largest allocation is {self.descriptor.limits.max_alloc} bytes",
                         backend="OPENCL", function=what)
        err = api.ffi.new("cl_int *")
        buf = self._create_buffer(self.context, cl.CL_MEM_READ_WRITE | cl.CL_MEM_USE_HOST_PTR, n, p, err)
        if not buf:
            api.raw.clSVMFree(self.context, p)
            return api.error(err[0], "clCreateBuffer", f"a buffer over {n} bytes of SVM")
        a = OpenCLAllocation(self, buf, n, MemoryKind.UNIFIED, tracked)
        a._svm = p
        return a

    def _import_kind(self, device: tuple[int, int], what: str) -> MemoryKind:
        """Foreign memory is refused: a ``cl_mem`` over it would need ``CL_MEM_USE_HOST_PTR`` (host memory,
        which the implementation may still copy) or SVM pointers, neither of which this backend wraps."""
        raise Error(ErrorKind.UNSUPPORTED, f"{what}: OpenCL buffers over foreign memory (CL_MEM_USE_HOST_PTR, SVM) "
                    "are not supported: copy it into an allocation (Stream.copy_from_host)", backend="OPENCL",
                    function=what)

    def create_stream(self) -> OpenCLStream:
        self._check_open("Device.create_stream")
        return OpenCLStream(self)

    def load_module(self, source_or_binary: str | bytes, *, options: Sequence[str] = (),
                    defines: Mapping[str, Any] | None = None, include_dirs: Sequence[str | os.PathLike[str]] = (),
                    name_expressions: Sequence[str] = (), cache: bool = True) -> OpenCLModule:
        """OpenCL C source -> a built program (``clBuildProgram``), from the kernel cache when it has it.

        ``options``, ``defines`` and ``include_dirs`` go into ``clBuildProgram``'s option string (after
        ``-cl-kernel-arg-info``); the program binary (``CL_PROGRAM_BINARIES``) is kept in the kernel cache, with the
        headers the build read (checked at each hit: an edited header, found through ``include_dirs`` or a ``-I``
        option, rebuilds), and reloaded with ``clCreateProgramWithBinary``.

        Args:
            source_or_binary: OpenCL C source, ``str`` or UTF-8 ``bytes``.
            options: ``clBuildProgram`` options (``"-cl-fast-relaxed-math"``, ``"-cl-std=CL2.0"``).
            defines: macros, ``{"N": 4}`` -> ``-DN=4``.
            include_dirs: ``-I`` directories.
            name_expressions: must be empty: OpenCL C has no templates.
            cache: use the kernel cache (default True).

        Returns:
            The built ``OpenCLModule`` (``from_cache`` says whether the binary came from the cache).

        Raises:
            TypeError: ``source_or_binary`` is neither ``str`` nor bytes.
            Error: ``ErrorKind.COMPILE_FAILED`` with the build log; ``ErrorKind.INVALID_VALUE`` for bad option types
                or a NUL character inside the source; ``ErrorKind.UNSUPPORTED`` for ``name_expressions``;
                ``ErrorKind.INVALID_HANDLE`` after ``close``.

        Backends:
            OpenCL (see :meth:`Device.load_module` for the others).
        """
        opts = compile_options(options, defines, include_dirs, name_expressions, _KIND)
        if opts.name_expressions:
            raise Error(ErrorKind.UNSUPPORTED, "Device.load_module: name_expressions are not supported by the OpenCL "
                        "backend (OpenCL C has no templates)", backend="OPENCL", function="Device.load_module")
        self._check_open("Device.load_module")
        return OpenCLModule(self, source_or_binary, opts, cache)

    def _cache_identity(self) -> str:
        """The device part of a cache key: name, device and driver versions, platform version (made once)."""
        ident = getattr(self, "_identity", None)
        if ident is None:
            api, cl, fn = self.api, self.api.cl, "clGetDeviceInfo"
            platform = self.api.ffi.new("cl_platform_id *")
            api.check(api.raw.clGetDeviceInfo(self.handle, cl.CL_DEVICE_PLATFORM, api.ffi.sizeof("cl_platform_id"),
                                              platform, api.ffi.NULL), fn)
            ident = "\n".join([api.info_str(fn, self.handle, cl.CL_DEVICE_NAME),
                               api.info_str(fn, self.handle, cl.CL_DEVICE_VERSION),
                               api.info_str(fn, self.handle, cl.CL_DRIVER_VERSION),
                               api.info_str("clGetPlatformInfo", platform[0], cl.CL_PLATFORM_VERSION)])
            self._identity = ident
        return ident

    def _cl_version(self) -> tuple[int, int]:
        """The device's OpenCL version, ``CL_DEVICE_VERSION``'s "OpenCL <major>.<minor> ..." (read once)."""
        version = getattr(self, "_version", None)
        if version is None:
            text = self.api.info_str("clGetDeviceInfo", self.handle, self.api.cl.CL_DEVICE_VERSION)
            m = re.match(r"OpenCL (\d+)\.(\d+)", text)
            version = self._version = (int(m.group(1)), int(m.group(2))) if m else (1, 0)
        return version

    def synchronize(self) -> None:
        self._check_open("Device.synchronize")
        for s in self._live_streams():
            s.synchronize()

    def _close(self) -> None:
        # the device's own context reference; every stream, program, kernel and buffer made from it holds
        # one of its own (OpenCL reference counting), so their handles stay valid until they are released
        self._finalizer()


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


class OpenCLAllocation(Allocation):
    """A ``cl_mem`` buffer.  ``_serial`` names it for the kernel-argument cache: unlike the ``cl_mem``
    address (which the driver may hand out again after a release), it is never reused.  No DLPack export:
    neither ``__dlpack__`` nor ``__dlpack_device__`` (a ``cl_mem`` is not an address; DLPack's ``kDLOpenCL`` is
    accepted by no consumer we know), and ``view()`` gives a plain ``ArrayView``."""

    def __init__(self, device: OpenCLDevice, buffer: Any, nbytes: int, kind: MemoryKind, tracked: bool = False) -> None:
        self.device = device
        self.buffer = buffer
        self.nbytes = nbytes
        self.kind = kind
        self._serial = next(_SERIALS)
        if tracked:  # released by Allocation.__del__ if dropped unfreed
            self._tracked = True

    device: OpenCLDevice

    _svm: Any = None  # UNIFIED: the fine-grained SVM pointer the buffer uses as its storage

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
            raise Error(ErrorKind.INVALID_VALUE, f"{what}: an OpenCL sub-buffer must start at a multiple of "
                        f"{align} bytes (CL_DEVICE_MEM_BASE_ADDR_ALIGN) on this device, not at {offset}",
                        backend="OPENCL", function=what)
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


class OpenCLEvent(Event):
    """A marker in a stream (``clEnqueueMarkerWithWaitList``), made by ``OpenCLStream.record_event``, with the
    queue's profiling timestamps for ``elapsed_ms``.  It knows the stream's in-flight host buffers enqueued
    before it: once it is seen complete they are released."""

    def __init__(self, device: OpenCLDevice, handle: Any, inflight: InFlight | None = None, mark: int = 0) -> None:
        self.device = device
        self.handle = handle
        self._finalizer = weakref.finalize(self, device.api.raw.clReleaseEvent, handle)
        self._inflight = inflight
        self._mark = mark

    def _done(self) -> None:
        inflight = self._inflight
        if inflight is not None:
            inflight.release(self._mark)
            self._inflight = None

    def synchronize(self) -> None:
        self.device._check_open("Event.synchronize")
        api = self.device.api
        evs = api.ffi.new("cl_event[1]", [self.handle])
        api.check(api.raw.clWaitForEvents(1, evs), "clWaitForEvents")
        self._done()

    def query(self) -> bool:
        self.device._check_open("Event.query")
        api = self.device.api
        status = api.info_int("clGetEventInfo", self.handle, api.cl.CL_EVENT_COMMAND_EXECUTION_STATUS, "cl_int")
        done = bool(status == api.cl.CL_COMPLETE)
        if done:
            self._done()
        return done

    def _end_ns(self) -> int:
        api = self.device.api
        return api.info_int("clGetEventProfilingInfo", self.handle, api.cl.CL_PROFILING_COMMAND_END, "cl_ulong")

    def elapsed_ms(self, end: Event) -> float:
        if not isinstance(end, OpenCLEvent):
            raise Error(ErrorKind.INVALID_VALUE, "elapsed_ms needs another OpenCL event", backend="OPENCL",
                        function="Event.elapsed_ms")
        self.synchronize()
        end.synchronize()
        return (end._end_ns() - self._end_ns()) / 1e6


class OpenCLKernel(Kernel):
    """A ``cl_kernel``.  Its argument state lives in the driver; ``_keys``/``_objs`` mirror what was last set
    (per index: an allocation's serial or a by-value argument's bytes, and the immutable argument object
    itself) so a launch only calls ``clSetKernelArg`` for arguments that changed.  Call :meth:`forget_args`
    after setting arguments on ``handle`` directly."""

    def __init__(self, module: OpenCLModule, name: str) -> None:
        api = module.device.api
        module.device._check_open("Module.kernel")
        if not isinstance(name, str):
            raise TypeError(f"Module.kernel: name must be a str, not {type(name).__name__} ({name!r})")
        try:
            cname = name.encode("utf-8")
        except UnicodeEncodeError as e:
            raise Error(ErrorKind.INVALID_VALUE, f"Module.kernel: kernel name {name!r} is not valid UTF-8 ({e})",
                        backend="OPENCL", function="Module.kernel") from None
        if b"\0" in cname:
            raise Error(ErrorKind.INVALID_VALUE, f"Module.kernel: kernel name {name!r} contains a NUL character",
                        backend="OPENCL", function="Module.kernel")
        self.module = module
        self.name = name
        err = api.ffi.new("cl_int *")
        self.handle = api.raw.clCreateKernel(module.program, cname, err)
        if err[0] != 0:
            raise api.error(err[0], "clCreateKernel", f"kernel {name!r}")
        self._finalizer = weakref.finalize(self, api.raw.clReleaseKernel, self.handle)
        self.num_args: int = api.info_int("clGetKernelInfo", self.handle, api.cl.CL_KERNEL_NUM_ARGS, "cl_uint")
        self._lock = threading.Lock()  # clSetKernelArg + enqueue must not interleave between threads
        self._api = api
        self._set_arg = api.raw.clSetKernelArg
        self._mem = api.ffi.new("cl_mem *")  # scratch for buffer arguments (used under _lock)
        self._sizeof_mem = api.ffi.sizeof("cl_mem")
        self._null = api.ffi.NULL
        self._keys: list[Any] = [None] * self.num_args
        self._objs: list[Any] = [_UNSET] * self.num_args
        self._slots = _arg_slots(api, self.handle, self.num_args)
        # the by-value parameters' types (clGetKernelArgInfo CL_KERNEL_ARG_TYPE_NAME): what a Python number
        # converts to and which numpy scalars fit (kernel_args); None where the runtime keeps no argument info
        self._params = _arg_params(api, self.handle, self.num_args) if self._slots is not None else None

    @property
    def attributes(self) -> KernelAttributes:
        # ``clGetKernelWorkGroupInfo`` on the module's device (OpenCL reports no register count or constant use).
        api, cl = self._api, self._api.cl
        dev = self.module.device.handle
        wg = "clGetKernelWorkGroupInfo"
        return KernelAttributes(
            max_threads_per_block=api.info_int(wg, self.handle, cl.CL_KERNEL_WORK_GROUP_SIZE, "size_t", dev),
            preferred_multiple=api.info_int(wg, self.handle, cl.CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                                            "size_t", dev),
            static_shared_mem=api.info_int(wg, self.handle, cl.CL_KERNEL_LOCAL_MEM_SIZE, "cl_ulong", dev),
            local_mem=api.info_int(wg, self.handle, cl.CL_KERNEL_PRIVATE_MEM_SIZE, "cl_ulong", dev))

    def _slot_error(self, i: int, a: Any, function: str) -> Error:
        """INVALID_VALUE: argument ``i`` is not what its parameter (by its address qualifier) takes."""
        slot = self._slots[i] if self._slots is not None else 0
        what = {_POINTER_SLOT: "a buffer (an Allocation of this device)",
                _LOCAL_SLOT: "__local memory: pass LocalMemory(nbytes), the bytes per work-group",
                _VALUE_SLOT: "a value (a numpy scalar, a Scalar, bytes or a Python number)"}.get(slot, "?")
        return arg_error(f"argument {i} of kernel {self.name!r}", f"the parameter takes {what}, not "
                         f"{type(a).__name__} ({a!r:.60})", "OPENCL", function)

    def forget_args(self) -> None:
        """Drop the kernel's cached argument state, so that the next launch sets every argument again.

        A launch sets (``clSetKernelArg``) only the arguments that changed since this kernel's last launch; call
        this after changing the ``cl_kernel``'s arguments outside this runtime (through the raw binding).

        Raises:
            Error: never.

        Backends:
            OpenCL only.
        """
        with self._lock:
            self._keys = [None] * self.num_args
            self._objs = [_UNSET] * self.num_args


_POINTER_SLOT, _VALUE_SLOT, _LOCAL_SLOT = 1, 2, 3


def _arg_slots(api: _Api, kernel: Any, n: int) -> tuple[int, ...] | None:
    """Per argument: a __global/__constant pointer (a buffer), a by-value argument, or __local memory; None
    where the runtime keeps no argument info (programs from binaries)."""
    cl = api.cl
    slots = []
    out = api.ffi.new("cl_kernel_arg_address_qualifier *")
    size = api.ffi.sizeof("cl_kernel_arg_address_qualifier")
    for i in range(n):
        if api.raw.clGetKernelArgInfo(kernel, i, cl.CL_KERNEL_ARG_ADDRESS_QUALIFIER, size, out, api.ffi.NULL):
            return None
        q = int(out[0])
        if q == cl.CL_KERNEL_ARG_ADDRESS_LOCAL:
            slots.append(_LOCAL_SLOT)
        elif q in (cl.CL_KERNEL_ARG_ADDRESS_GLOBAL, cl.CL_KERNEL_ARG_ADDRESS_CONSTANT):
            slots.append(_POINTER_SLOT)
        else:  # __private: a value, unless its type is a pointer (not legal for kernel arguments)
            slots.append(_VALUE_SLOT)
    return tuple(slots)


def _arg_params(api: _Api, kernel: Any, n: int) -> tuple[Param | None, ...] | None:
    """Per argument, its type as a kernel_args.Param (by-value arguments; None for the others): from the type
    name (``float``, ``uint``: known; ``float4``, a typedef: kind and size unknown), named "<type> <name>"."""
    cl, fn = api.cl, "clGetKernelArgInfo"
    out: list[Param | None] = []
    try:
        for i in range(n):
            type_name = api.info_str(fn, kernel, cl.CL_KERNEL_ARG_TYPE_NAME, i)
            arg_name = api.info_str(fn, kernel, cl.CL_KERNEL_ARG_NAME, i)
            out.append(None if type_name.endswith("*") else param_of(type_name, f"{type_name} {arg_name}".strip()))
    except Error:
        return None
    return tuple(out)


class OpenCLModule(Module):
    """A built ``cl_program``: from source, or from the kernel cache's program binary (``from_cache``)."""

    def __init__(self, device: OpenCLDevice, source: str | bytes, opts: CompileOptions | None = None,
                 cache: bool = True) -> None:
        api = device.api
        self.device = device
        if isinstance(source, str):
            src = source.encode("utf-8", "surrogateescape")
        elif isinstance(source, (bytes, bytearray, memoryview)):
            src = bytes(source)
        else:
            raise TypeError(f"Device.load_module: source must be str or bytes, not {type(source).__name__}")
        nul = src.rstrip(b"\0").find(b"\0")
        if nul >= 0:  # clCreateProgramWithSource would read up to it: the rest silently gone
            raise Error(ErrorKind.INVALID_VALUE, f"Device.load_module: the source holds a NUL character at byte {nul}, "
                        "before its end (the compiler would stop reading there)", backend="OPENCL",
                        function="Device.load_module")
        opts = opts or CompileOptions()
        # -cl-kernel-arg-info: each kernel's argument kinds, so a checked launch refuses a value in a buffer slot
        options = b" ".join([_BUILD_OPTIONS, *(f.encode("utf-8", "surrogateescape") for f in opts.flags())])
        store = kernel_cache.default_cache() if cache else None
        key = None
        if store is not None:
            key = kernel_cache.cache_key(backend="OPENCL", source=src, options=opts.options,
                                         defines=dict(opts.defines), include_dirs=opts.include_dirs,
                                         device=device._cache_identity(), extra=_BUILD_OPTIONS.decode())
            entry = store.get_entry(key)  # None too when a header it read changed since
            if entry is not None and self._from_binary(entry[1], options):
                self.from_cache = True
                log = entry[0].get("log")  # the compile's own log, kept with the entry
                if isinstance(log, str) and log:
                    compiler_log(self, log, "OPENCL", cached=True)
                return
        # what the build may read besides the source, recorded before it builds (kernel_cache.scan_dependencies)
        deps = kernel_cache.scan_dependencies(src, opts.options, opts.include_dirs) if key is not None else None
        self._from_source(src, options)
        if store is not None and key is not None:
            binary = self._binary()
            if binary:
                store.put_entry(key, {"log": self.build_log} if self.build_log else {}, binary, deps)

    def _adopt(self, prog: Any) -> None:
        self.program = prog
        self._finalizer = weakref.finalize(self, self.device.api.raw.clReleaseProgram, prog)

    def _build(self, options: bytes) -> None:
        device, api, ffi = self.device, self.device.api, self.device.api.ffi
        devs = ffi.new("cl_device_id[1]", [device.handle])
        code = api.raw.clBuildProgram(self.program, 1, devs, options, ffi.NULL, ffi.NULL)
        if code != 0:
            log = api.info_str("clGetProgramBuildInfo", self.program, api.cl.CL_PROGRAM_BUILD_LOG, device.handle)
            e = api.error(code, "clBuildProgram", f"options {options.decode('utf-8', 'replace')!r}; build log:\n" + log)
            if code in (api.cl.CL_BUILD_PROGRAM_FAILURE, api.cl.CL_INVALID_BUILD_OPTIONS):
                e.kind = ErrorKind.COMPILE_FAILED
            raise e
        # a build that succeeded may still have said something (#warning, -Werror not given): the user sees it
        try:
            log = api.info_str("clGetProgramBuildInfo", self.program, api.cl.CL_PROGRAM_BUILD_LOG, device.handle)
        except Error:
            log = ""
        compiler_log(self, log, "OPENCL")

    def _from_source(self, src: bytes, options: bytes) -> None:
        device, api, ffi = self.device, self.device.api, self.device.api.ffi
        err = ffi.new("cl_int *")
        text = ffi.new("char[]", src)  # owned here until the call returns: the runtime copies the source
        strings = ffi.new("char *[1]", [text])
        lengths = ffi.new("size_t[1]", [len(src)])
        prog = api.raw.clCreateProgramWithSource(device.context, 1, strings, lengths, err)
        del text
        api.check(err[0], "clCreateProgramWithSource")
        self._adopt(prog)
        self._build(options)

    def _from_binary(self, binary: bytes, options: bytes) -> bool:
        """Build the program from a cached binary; False (and no program kept) if the runtime refuses it."""
        device, api, ffi = self.device, self.device.api, self.device.api.ffi
        err, status = ffi.new("cl_int *"), ffi.new("cl_int *")
        data = ffi.new("unsigned char[]", binary)
        ptrs = ffi.new("unsigned char *[1]", [data])
        lengths = ffi.new("size_t[1]", [len(binary)])
        devs = ffi.new("cl_device_id[1]", [device.handle])
        prog = api.raw.clCreateProgramWithBinary(device.context, 1, devs, lengths, ptrs, status, err)
        if err[0] != 0 or status[0] != 0 or not prog:
            if prog:
                api.raw.clReleaseProgram(prog)
            return False
        code = api.raw.clBuildProgram(prog, 1, devs, options, ffi.NULL, ffi.NULL)
        if code != 0:
            api.raw.clReleaseProgram(prog)
            return False
        self._adopt(prog)
        return True

    def _binary(self) -> bytes | None:
        """The built program's binary for the device (``CL_PROGRAM_BINARIES``), or None if it has none."""
        api, ffi, cl = self.device.api, self.device.api.ffi, self.device.api.cl
        size = ffi.new("size_t[1]")
        if api.raw.clGetProgramInfo(self.program, cl.CL_PROGRAM_BINARY_SIZES, ffi.sizeof("size_t"), size, ffi.NULL):
            return None
        n = int(size[0])
        if n == 0:
            return None
        buf = ffi.new("unsigned char[]", n)
        ptrs = ffi.new("unsigned char *[1]", [buf])
        if api.raw.clGetProgramInfo(self.program, cl.CL_PROGRAM_BINARIES, ffi.sizeof("unsigned char *"), ptrs,
                                    ffi.NULL):
            return None
        return bytes(ffi.buffer(buf, n))

    def kernel(self, name: str) -> OpenCLKernel:
        return OpenCLKernel(self, name)


class OpenCLStream(Stream):
    """An in-order command queue (``clCreateCommandQueueWithProperties``) with profiling enabled, made by
    ``OpenCLDevice.create_stream``.

    Adds over :class:`~ironaccelerator.Stream`: ``queue`` (the ``cl_command_queue``); events carry the queue's
    profiling timestamps (``elapsed_ms``); ``prefetch`` is ``clEnqueueSVMMigrateMem`` of UNIFIED (SVM) memory
    (OpenCL 2.1 devices); 2-D/3-D copies are ``clEnqueueCopyBufferRect`` and its read/write twins.  ``capture()``
    (graphs) is ``UNSUPPORTED``: OpenCL has no stream capture.
    """

    device: OpenCLDevice
    # for MemoryPool's fences: set after every enqueue of work that may use memory, cleared by _pool_fence
    _dirty = False
    _pool_event: OpenCLEvent | None = None

    def __init__(self, device: OpenCLDevice) -> None:
        api, ffi, cl = device.api, device.api.ffi, device.api.cl
        self.device = device
        self.api = api
        err = ffi.new("cl_int *")
        props = ffi.new("cl_queue_properties[3]", [cl.CL_QUEUE_PROPERTIES, cl.CL_QUEUE_PROFILING_ENABLE, 0])
        q = api.raw.clCreateCommandQueueWithProperties(device.context, device.handle, props, err)
        api.check(err[0], "clCreateCommandQueueWithProperties")
        self.queue = q
        self._finalizer = weakref.finalize(self, api.raw.clReleaseCommandQueue, q)
        self._inflight = InFlight()  # host buffers of copies in flight, until work after them is seen complete
        self._keep = self._inflight.items
        # the hot paths' raw functions, resolved once
        raw = api.raw
        self._null = ffi.NULL
        self._from_buffer = ffi.from_buffer
        self._enqueue_kernel = raw.clEnqueueNDRangeKernel
        self._write = raw.clEnqueueWriteBuffer
        self._read = raw.clEnqueueReadBuffer
        self._finish = raw.clFinish
        self._limits = device.descriptor.limits
        # launch dimensions -> (global, local) size_t[3] arrays, and whether they passed validation;
        # _last is the entry of the last LaunchDims object seen (identity: the fast path for a reused launch)
        self._dims: dict[tuple[Any, ...], tuple[Any, Any, bool]] = {}
        self._last: tuple[Any, Any, Any, bool] = (None, None, None, False)
        device._streams.add(self)

    # copies (asynchronous; host buffers are kept alive until an event after them, or the stream, completes)
    def copy_from_host(self, dst: Allocation, src: Any, nbytes: int | None = None, *, dst_offset: int = 0,
                       src_offset: int = 0) -> None:
        buf = _live_buffer(dst, "Stream.copy_from_host", self.device)
        t = type(src)
        if t is not bytes and t is not bytearray and not _plain_host(src, t):
            host_view(src, backend=_KIND, function="Stream.copy_from_host")  # raises the descriptive Error
        try:  # any C-contiguous buffer (numpy arrays, bytes, memoryview): no memoryview/cast needed
            ptr = self._from_buffer(src)
        except (TypeError, ValueError, BufferError):
            ptr = self._from_buffer(host_view(src, backend=_KIND, function="Stream.copy_from_host"))
        n = len(ptr)
        at, src_ptr = 0, ptr
        if nbytes is not None or dst_offset or src_offset:
            so, at, n = host_span(n, dst.nbytes, nbytes, src_offset, dst_offset, "Stream.copy_from_host", _KIND,
                                  to_device=True)
            src_ptr = ptr + so
        elif n > dst.nbytes:
            raise Error(ErrorKind.INVALID_VALUE, f"{n} bytes do not fit in {dst!r}", backend="OPENCL",
                        function="Stream.copy_from_host")
        null = self._null
        code = self._write(self.queue, buf, 0, at, n, src_ptr, 0, null, null)
        self._dirty = self.device._dirty = True
        if code:
            raise self.api.error(code, "clEnqueueWriteBuffer")
        self._keep.append(ptr)  # the cdata holds the exporter's buffer until synchronize()

    def copy_to_host(self, dst: Any, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
                     src_offset: int = 0) -> None:
        buf = _live_buffer(src, "Stream.copy_to_host", self.device)
        t = type(dst)
        if t is not bytearray and not _plain_host(dst, t):
            host_view(dst, writable=True, backend=_KIND, function="Stream.copy_to_host")  # raises
        try:  # positional require_writable: a keyword costs cffi twice the call
            ptr = self._from_buffer("char[]", dst, True)
        except (TypeError, ValueError, BufferError):
            ptr = self._from_buffer("char[]", host_view(dst, writable=True, backend=_KIND,
                                                        function="Stream.copy_to_host"), True)
        n = len(ptr)
        at, dst_ptr = 0, ptr
        if nbytes is not None or dst_offset or src_offset:
            do, at, n = host_span(n, src.nbytes, nbytes, dst_offset, src_offset, "Stream.copy_to_host", _KIND,
                                  to_device=False)
            dst_ptr = ptr + do
        elif n > src.nbytes:
            raise Error(ErrorKind.INVALID_VALUE, f"{n} bytes is more than {src!r} holds", backend="OPENCL",
                        function="Stream.copy_to_host")
        null = self._null
        code = self._read(self.queue, buf, 0, at, n, dst_ptr, 0, null, null)
        self._dirty = self.device._dirty = True
        if code:
            raise self.api.error(code, "clEnqueueReadBuffer")
        self._keep.append(ptr)

    def copy(self, dst: Allocation, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
             src_offset: int = 0) -> None:
        d = _live_buffer(dst, "Stream.copy", self.device)
        s = _live_buffer(src, "Stream.copy", self.device)
        so, do, n = device_span(dst, src, nbytes, dst_offset, src_offset, _KIND)
        if n:
            self.api.check(self.api.raw.clEnqueueCopyBuffer(self.queue, s, d, so, do, n, 0, self._null, self._null),
                           "clEnqueueCopyBuffer")
            self._dirty = self.device._dirty = True

    def fill(self, dst: Allocation, value: int, nbytes: int | None = None, offset: int = 0, *,
             width: int = 1) -> None:
        buf = _live_buffer(dst, "Stream.fill", self.device)
        v, w = fill_pattern(value, width, "Stream.fill", _KIND)
        o, n = check_span(dst.nbytes, offset, nbytes, "dst", "Stream.fill", _KIND, width=w)
        if n:
            pattern = self.api.ffi.new("char[]", v.to_bytes(w, "little"))
            self.api.check(self.api.raw.clEnqueueFillBuffer(self.queue, buf, pattern, w, o, n, 0, self._null,
                                                            self._null), "clEnqueueFillBuffer")
            self._dirty = self.device._dirty = True

    def _copy_rect(self, dst: Allocation | memoryview, src: Allocation | memoryview, region: CopyRegion,
                   function: str) -> None:
        """``clEnqueueCopyBufferRect`` (device to device), ``clEnqueueWriteBufferRect`` / ``clEnqueueReadBufferRect``
        (to / from the host; non-blocking, the host buffer kept until the stream is seen past it): a buffer's offset
        as an origin of its pitches, a host side's as its pointer moved."""
        ffi, null = self.api.ffi, self._null
        region_ = ffi.new("size_t[3]", [region.width, region.height, region.depth])
        pitches = {"dst": (region.dst_pitch, region.dst_slice_pitch), "src": (region.src_pitch, region.src_slice_pitch)}
        if isinstance(dst, memoryview) or isinstance(src, memoryview):
            to_device = isinstance(src, memoryview)
            side, host = ("dst", src) if to_device else ("src", dst)
            device_side = dst if to_device else src
            buf = _live_buffer(device_side, function, self.device)  # type: ignore[arg-type]
            ptr = ffi.from_buffer("char[]", host, not to_device)
            offset = region.src_offset if to_device else region.dst_offset
            origin = ffi.new("size_t[3]", region.origin(side))
            zero = ffi.new("size_t[3]")
            row, slab = pitches[side]
            hrow, hslab = pitches["src" if to_device else "dst"]
            name = "clEnqueueWriteBufferRect" if to_device else "clEnqueueReadBufferRect"
            code = getattr(self.api.raw, name)(self.queue, buf, 0, origin, zero, region_, row, slab, hrow, hslab,
                                               ptr + offset, 0, null, null)
            self._dirty = self.device._dirty = True
            if code:
                raise self.api.error(code, name)
            self._keep.append(ptr)  # (the cdata holds the exporter's buffer until the stream is seen past it)
            return
        d = _live_buffer(dst, function, self.device)
        s = _live_buffer(src, function, self.device)
        so, do = ffi.new("size_t[3]", region.origin("src")), ffi.new("size_t[3]", region.origin("dst"))
        self.api.check(self.api.raw.clEnqueueCopyBufferRect(self.queue, s, d, so, do, region_, *pitches["src"],
                                                            *pitches["dst"], 0, null, null), "clEnqueueCopyBufferRect")
        self._dirty = self.device._dirty = True

    def prefetch(self, alloc: Allocation, to: Any = None, nbytes: int | None = None, offset: int = 0) -> None:
        # ``clEnqueueSVMMigrateMem`` of the UNIFIED allocation's SVM range (OpenCL 2.1 devices; older ones:
        # UNSUPPORTED): to the queue's device (``to`` None or that device) or the host (``CL_MIGRATE_MEM_OBJECT_HOST``).
        function, device, cl = "Stream.prefetch", self.device, self.api.cl
        _live_buffer(alloc, function, device)
        o, n = self._prefetch_span(alloc, nbytes, offset)
        host = self._prefetch_to_host(to)
        if to is not None and not host and to is not device:
            raise Error(ErrorKind.INVALID_VALUE, f"{function}: an OpenCL queue migrates memory to its own device or the "
                        f"host, not to {to!r} (prefetch on a stream of that device)", backend="OPENCL",
                        function=function)
        if device._cl_version() < (2, 1):
            raise Error(ErrorKind.UNSUPPORTED, f"{function}: clEnqueueSVMMigrateMem needs an OpenCL 2.1 device; "
                        f"{device.descriptor.name!r} reports {device._cl_version()}", backend="OPENCL",
                        function=function)
        if not n:
            return
        addr = getattr(alloc, "block", alloc)._host_address() if type(alloc) is PooledAllocation else \
            alloc._host_address()
        assert addr is not None  # (UNIFIED OpenCL memory is SVM: _alloc_svm)
        ffi = self.api.ffi
        ptrs = ffi.new("void *[1]", [ffi.cast("void *", addr + o)])
        sizes = ffi.new("size_t[1]", [n])
        flags = cl.CL_MIGRATE_MEM_OBJECT_HOST if host else 0
        self.api.check(self.api.raw.clEnqueueSVMMigrateMem(self.queue, 1, ptrs, sizes, flags, 0, self._null,
                                                           self._null), "clEnqueueSVMMigrateMem")
        self._dirty = self.device._dirty = True

    # launches
    def _sizes(self, d: LaunchDims, validate: bool) -> tuple[Any, Any]:
        """The (global, local) arrays of ``d``, validated first if asked (cached per grid/block/shared_mem); launch
        options (cooperative, cluster) and ``shared_mem`` (OpenCL's dynamic local memory is a LocalMemory
        argument) are UNSUPPORTED.  Unvalidated, a launch of more work-items than the device's ``max_work_items``
        is still INVALID_VALUE: past it the runtime itself crashes (PoCL aborts), no error code comes back."""
        what = "Stream.launch" if validate else "Stream.launch_unchecked"
        if d.cooperative or d.cluster is not None:  # (not cached: OpenCL has neither grid sync nor clusters)
            raise d.options_error(_KIND, what)
        if d.shared_mem:
            raise shared_mem_error("OPENCL", what, d.shared_mem)
        key = (d.grid, d.block, d.shared_mem)
        entry = self._dims.get(key)
        if entry is None or (validate and not entry[2]):
            if validate:
                d.validate(self._limits, _KIND, "Stream.launch")
            elif d.threads > self._limits.max_work_items:
                raise Error(ErrorKind.INVALID_VALUE, f"{what}: {d} is {d.threads} work-items, more than the "
                            f"device's {self._limits.max_work_items} (DeviceLimits.max_work_items)",
                            backend="OPENCL", function=what)
            if entry is None:
                g, b = d.grid, d.block
                ffi = self.api.ffi
                entry = (ffi.new("size_t[3]", [g[0] * b[0], g[1] * b[1], g[2] * b[2]]), ffi.new("size_t[3]", b),
                         validate)
            else:
                entry = (entry[0], entry[1], True)
            if len(self._dims) >= 256:
                self._dims.clear()
            self._dims[key] = entry
        self._last = (d, entry[0], entry[1], entry[2])
        return entry[0], entry[1]

    def launch(self, launch: KernelLaunch) -> None:
        try:
            kernel = launch.kernel
        except AttributeError:
            raise not_a_launch(launch, "Stream.launch") from None
        if type(kernel) is not OpenCLKernel and not isinstance(kernel, OpenCLKernel):
            raise Error(ErrorKind.INVALID_VALUE, f"Stream.launch: {kernel!r:.80} is not an OpenCL kernel",
                        backend="OPENCL", function="Stream.launch")
        if self.device._closed:
            raise self.device._closed_error("Stream.launch")
        if kernel.module.device is not self.device:
            raise Error(ErrorKind.INVALID_VALUE, f"Stream.launch: {kernel!r} belongs to another device than {self!r}",
                        backend="OPENCL", function="Stream.launch")
        d = launch.dims
        last = self._last
        if last[0] is d and last[3]:
            gl, lo = last[1], last[2]
        else:
            if type(d) is not LaunchDims:
                raise Error(ErrorKind.INVALID_VALUE, f"Stream.launch: dims must be a LaunchDims, not "
                            f"{type(d).__name__}", backend="OPENCL", function="Stream.launch")
            gl, lo = self._sizes(d, True)
        args = launch.args
        if len(args) != kernel.num_args:
            raise Error(ErrorKind.INVALID_VALUE, f"kernel {kernel.name!r} takes {kernel.num_args} arguments, "
                        f"{len(args)} given", backend="OPENCL", function="Stream.launch")
        null = self._null
        lock = kernel._lock
        lock.acquire()  # (cheaper than `with`)
        try:
            err = _set_args(kernel, args, "Stream.launch")
            if err is None:
                code = self._enqueue_kernel(self.queue, kernel.handle, 3, null, gl, lo, 0, null, null)
                self._dirty = self.device._dirty = True
        finally:
            lock.release()
        if err is not None:
            raise err
        if code:
            raise self.api.error(code, "clEnqueueNDRangeKernel")

    def launch_unchecked(self, launch: KernelLaunch) -> Result[None]:
        # The launch without LaunchDims validation against the device's limits (the driver's own checks remain),
        # returning the Error.  Still refused (flag tests and type dispatches, see docs/UNCHECKED.md): a closed
        # device, a kernel of another backend or device, a wrong argument count, any argument the kernel-argument
        # policy refuses (a freed allocation or slice, a value in a buffer slot, ``None``...), more work-items than
        # ``DeviceLimits.max_work_items``.  A non-KernelLaunch ``launch`` raises TypeError (not a value mistake).
        what = "Stream.launch_unchecked"
        try:
            kernel: OpenCLKernel = launch.kernel  # type: ignore[assignment]
            args = launch.args
        except AttributeError:
            raise not_a_launch(launch, what) from None
        device = self.device
        if device._closed:
            return device._closed_error(what)
        if type(kernel) is not OpenCLKernel and not isinstance(kernel, OpenCLKernel) or \
                kernel.module.device is not device:
            return Error(ErrorKind.INVALID_VALUE, f"{what}: {kernel!r:.80} is not an OpenCL kernel of {device!r}",
                         backend="OPENCL", function=what)
        if len(args) != kernel.num_args:  # never launch with a previous launch's leftover arguments
            return Error(ErrorKind.INVALID_VALUE, f"kernel {kernel.name!r} takes {kernel.num_args} arguments, "
                         f"{len(args)} given", backend="OPENCL", function=what)
        d = launch.dims
        last = self._last
        if last[0] is d:
            gl, lo = last[1], last[2]
        else:
            try:
                gl, lo = self._sizes(d, False)
            except (OverflowError, TypeError, AttributeError) as e:  # a negative size (no size_t), not LaunchDims
                return Error(ErrorKind.INVALID_VALUE, f"{what}: bad launch dimensions {d!r:.80}: {e}",
                             backend="OPENCL", function=what)
            except Error as e:  # (launch options, shared_mem, too many work-items)
                return e.with_traceback(None)
        null = self._null
        lock = kernel._lock
        lock.acquire()
        try:
            err = _set_args(kernel, args, what)
            if err is None:
                code = self._enqueue_kernel(self.queue, kernel.handle, 3, null, gl, lo, 0, null, null)
                self._dirty = self.device._dirty = True
        finally:
            lock.release()
        if err is not None:
            return err
        return self.api.error(code, "clEnqueueNDRangeKernel") if code else None

    # events and ordering
    def record_event(self) -> OpenCLEvent:
        self.device._check_open("Stream.record_event")
        return self._marker()

    def _marker(self) -> OpenCLEvent:
        ev = self.api.ffi.new("cl_event *")
        mark = self._inflight.mark()  # the marker completes after every copy enqueued before it
        self.api.check(self.api.raw.clEnqueueMarkerWithWaitList(self.queue, 0, self._null, ev),
                       "clEnqueueMarkerWithWaitList")
        return OpenCLEvent(self.device, ev[0], self._inflight, mark)

    def _pool_fence(self) -> OpenCLEvent | None:
        """(``query`` enqueues a marker and waits a moment: too dear for the pool.)  None when nothing was
        enqueued since the last fence and that fence completed; else that fence, or a new marker, flushed."""
        ev = self._pool_event
        if not self._dirty:
            if ev is None or ev.query():
                return None
            return ev
        self._dirty = False  # (an enqueue sets it after the call: one racing with this marks it again)
        ev = self._marker()
        self.api.check(self.api.raw.clFlush(self.queue), "clFlush")  # submitted: it completes on its own
        self._pool_event = ev
        return ev

    def wait_event(self, event: Event) -> None:
        self.device._check_open("Stream.wait_event")
        if not isinstance(event, OpenCLEvent):
            raise Error(ErrorKind.INVALID_VALUE, "wait_event needs an OpenCL event", backend="OPENCL",
                        function="Stream.wait_event")
        evs = self.api.ffi.new("cl_event[1]", [event.handle])
        self.api.check(self.api.raw.clEnqueueBarrierWithWaitList(self.queue, 1, evs, self._null),
                       "clEnqueueBarrierWithWaitList")
        self._dirty = self.device._dirty = True

    def synchronize(self) -> None:
        inflight = self._inflight
        mark = inflight.base + len(self._keep)  # (InFlight.mark inlined) what is enqueued before the finish
        code = self._finish(self.queue)
        if code:
            raise self.api.error(code, "clFinish")
        if mark > inflight.base:  # anything to let go
            inflight.release(mark)
        self._check_callback_waits("Stream.synchronize")

    def query(self) -> bool:
        # Whether everything enqueued so far has completed (never True while work is pending).
        self.device._check_open("Stream.query")
        marker = self._marker()  # completing, it releases the host buffers enqueued before it
        self.api.check(self.api.raw.clFlush(self.queue), "clFlush")  # submit the marker itself
        # A marker behind finished work completes as soon as the runtime's scheduler sees it, which is
        # not instantly (PoCL: a worker thread's wake-up): allow it a moment before answering False.
        deadline = time.perf_counter() + _QUERY_GRACE_S
        while not (done := marker.query()) and time.perf_counter() < deadline:
            time.sleep(0)
        return done


_HOST_TYPES: dict[type, int] = {}  # host buffer type -> what _plain_host looks at: _PLAIN, _DTYPED, _VIEW, _SCALAR
_PLAIN, _DTYPED, _VIEW, _SCALAR = 0, 1, 2, 3


def _plain_host(obj: Any, t: type) -> bool:
    """Whether a host buffer other than bytes/bytearray may go straight to ``ffi.from_buffer``: not a buffer of
    Python object pointers (numpy ``object`` dtypes, format ``O``) and not a numpy scalar.  When False,
    ``host_view`` refuses it with the descriptive Error (the two refusals agree: a scalar has ndim 0).
    What to look at is decided once per type (a copy's hot path)."""
    how = _HOST_TYPES.get(t)
    if how is None:
        np = sys.modules.get("numpy")
        if np is not None and issubclass(t, np.generic):
            how = _SCALAR
        elif t is memoryview:
            how = _VIEW
        elif getattr(obj, "dtype", None) is not None:
            how = _DTYPED
        else:
            how = _PLAIN
        if len(_HOST_TYPES) < 256:
            _HOST_TYPES[t] = how
    if how == _DTYPED:
        return not getattr(getattr(obj, "dtype", None), "hasobject", False)
    if how == _VIEW:
        return "O" not in obj.format
    return how == _PLAIN


def _live_buffer(a: Allocation, what: str, device: OpenCLDevice | None = None) -> Any:
    """The ``cl_mem`` of an allocation (pooled or not) for use on ``device`` (the stream's): INVALID_HANDLE if
    it was freed or the device closed, INVALID_VALUE if it is another device's, TypeError if not an allocation."""
    t = type(a)
    if t is OpenCLAllocation:
        block = a
    elif t is PooledAllocation:
        block = a.block  # type: ignore[attr-defined]
    elif isinstance(a, Allocation) and isinstance(getattr(a, "buffer", None), _CData):
        block = a
    else:
        raise TypeError(f"{what}: expected an OpenCL allocation, got {t.__name__} ({a!r})")
    if a._freed:
        a._check_live(what)
    if device is not None and (device._closed or block.device is not device):
        if device._closed:
            raise device._closed_error(what)
        raise Error(ErrorKind.INVALID_VALUE, f"{what}: {a!r} belongs to another device (context) than the stream",
                    backend="OPENCL", function=what)
    return block.buffer  # type: ignore[attr-defined]


_IMMUTABLE: dict[type, bool] = {}  # by-value argument types whose objects can be cached by identity
_UNSET: Any = object()  # OpenCLKernel._objs of a slot with no cached argument object (never `is` an argument)


def _immutable(t: type) -> bool:
    r = _IMMUTABLE.get(t)
    if r is None:
        np = sys.modules.get("numpy")
        # np.void scalars of structured arrays are views of the array's memory: not immutable
        r = issubclass(t, (Scalar, bytes, int, float, LocalMemory)) or (
            np is not None and issubclass(t, np.generic) and not issubclass(t, np.void))
        _IMMUTABLE[t] = r
    return r


def _where(kernel: OpenCLKernel, i: int) -> str:
    return f"argument {i} of kernel {kernel.name!r}"


def _set_args(kernel: OpenCLKernel, args: tuple[Any, ...], function: str) -> Error | None:
    """Set the arguments that differ from the kernel's cached state (call with ``kernel._lock`` held; ``args``
    has ``kernel.num_args`` items), by the kernel-argument policy (:mod:`ironaccelerator_runtime.kernel_args`),
    checked and unchecked alike: each check is a type dispatch made only where an argument changed.

    An allocation is identified by its serial (pooled ones by their block's), a by-value argument by its
    bytes; an argument object that is immutable and identical to the last one is skipped outright.  A slot
    whose argument failed is left uncached (set again by the next launch).
    """
    keys, objs, slots = kernel._keys, kernel._objs, kernel._slots
    for i, a in enumerate(args):
        t = type(a)
        if t is not OpenCLAllocation:
            if a is objs[i]:
                continue
            if t is PooledAllocation:
                if a._freed:
                    return _freed_error(a, function)
                a = a.block
                t = type(a)
        if t is OpenCLAllocation:
            if a._freed:  # also unchecked: a released cl_mem in a launch aborts the runtime
                return _freed_error(a, function)
            key = a._serial
            if keys[i] != key:
                if slots is not None and slots[i] != _POINTER_SLOT:
                    return kernel._slot_error(i, a, function)
                if a.device is not kernel.module.device:
                    return buffer_error(_where(kernel, i), a, "OPENCL", function)
                objs[i] = _UNSET
                mem = kernel._mem
                mem[0] = a.buffer
                code = kernel._set_arg(kernel.handle, i, kernel._sizeof_mem, mem)
                if code:
                    keys[i] = None
                    return kernel._api.error(code, "clSetKernelArg", _where(kernel, i))
                keys[i] = key
            continue
        slot = slots[i] if slots is not None else 0
        if t is LocalMemory:
            if keys[i] == a:
                objs[i] = a
                continue
            keys[i] = None
            objs[i] = _UNSET
            if slot and slot != _LOCAL_SLOT:
                return kernel._slot_error(i, a, function)
            code = kernel._set_arg(kernel.handle, i, a.nbytes, kernel._null)
            if not code:
                keys[i] = objs[i] = a
        elif isinstance(a, Allocation):  # a slice, or another backend's allocation: checked and set every time
            keys[i] = None
            objs[i] = _UNSET
            buffer = _arg_buffer(kernel, i, a, function)
            if type(buffer) is Error:
                return buffer
            if slot and slot != _POINTER_SLOT:
                return kernel._slot_error(i, a, function)
            mem = kernel._mem
            mem[0] = buffer
            code = kernel._set_arg(kernel.handle, i, kernel._sizeof_mem, mem)
        else:
            if slot and slot != _VALUE_SLOT:  # never a value's bytes read as a cl_mem (a crash)
                keys[i] = None
                objs[i] = _UNSET
                return kernel._slot_error(i, a, function)
            try:
                data = value_bytes(a, kernel._params[i] if kernel._params is not None else None, i, kernel.name,
                                   "OPENCL", function)
            except Error as e:
                keys[i] = None
                objs[i] = _UNSET
                return e
            if keys[i] == data:
                objs[i] = a if _immutable(t) else _UNSET
                continue
            keys[i] = None
            objs[i] = _UNSET
            code = kernel._set_arg(kernel.handle, i, len(data), data)
            if not code:
                keys[i] = data
                objs[i] = a if _immutable(t) else _UNSET
        if code:
            return kernel._api.error(code, "clSetKernelArg", _where(kernel, i))
    return None


def _arg_buffer(kernel: OpenCLKernel, i: int, a: Allocation, function: str) -> Any:
    """The ``cl_mem`` of an allocation argument that is not a (pooled) OpenCLAllocation: a slice (its
    sub-buffer) of this device, live; else the Error (INVALID_HANDLE freed, INVALID_VALUE another device's or
    another backend's)."""
    if a._freed:  # (a slice: its allocation's)
        return _freed_error(a, function)
    buffer = getattr(a, "buffer", None)
    if not isinstance(buffer, _CData) or getattr(a.device, "kind", None) is not _KIND:
        return buffer_error(_where(kernel, i), a, "OPENCL", function)
    if a.device is not kernel.module.device:
        return buffer_error(_where(kernel, i), a, "OPENCL", function)
    return buffer


def _freed_error(a: Allocation, function: str = "Stream.launch") -> Error:
    try:
        a._check_live(function)
    except Error as e:
        return e.with_traceback(None)
    return Error(ErrorKind.INVALID_HANDLE, f"{function}: {a!r} was freed", backend="OPENCL", function=function)
