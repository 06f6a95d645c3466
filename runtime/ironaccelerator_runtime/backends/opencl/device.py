"""The OpenCL backend and its devices: platform and device enumeration, ``Backend.open``, allocation, module
loading and the device queries."""

from __future__ import annotations

from functools import partial
import os
import re
import threading
import weakref
from typing import Any, Mapping, Sequence

from ironaccelerator._core import BackendKind, CapabilityFlags, ErrorKind, MemoryKind
from ironaccelerator_runtime.errors import Error, as_operation, fail
from ironaccelerator_runtime.traits.device import enqueue_tracked_fence
from ironaccelerator_runtime.traits import (
    _SIZE_MAX, Backend, Capability, Device, DeviceDescriptor, DeviceId, DeviceLimits, Event, Result, check_size,
    compile_options,
)

from ironaccelerator_runtime.early_start import wait as _platform_started
from .tables import OpenCLTables, _Api, _KIND, _PLATFORM_NOT_FOUND_KHR

_DEVICE = MemoryKind.DEVICE
_new = object.__new__

# OpenCLDevice._fence_events while a fence is being computed: non-empty, so the pool's lock-free test sends the
# reader to _pool_fence (never iterated: it is replaced before the lock is released)


class OpenCLBackend(Backend):
    """The OpenCL backend (``BackendKind.OPENCL``): every device of every platform the ICD loader
    (``libOpenCL.so.1``) lists, in order; on this project's test machine, PoCL's CPU device.

    ``tables``: the spec's capability tables (``TABLES`` of ``specs/opencl/backend.yaml``: extensions ->
    :class:`~ironaccelerator.CapabilityFlags`, device types -> tiers, vendor names), which the generated subclass
    ``ironaccelerator.backends.opencl.OpenCLBackend`` sets.  Adds over :class:`~ironaccelerator.Backend`:
    ``versions()`` lists each platform with its ``CL_PLATFORM_VERSION``.  Constructing it loads the ICD loader
    (``Error(LIBRARY_NOT_FOUND)`` when it cannot).
    """

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
            _platform_started()  # (BackendRegistry.get's early start, if it began one: early_start.py)
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
                                    implementation=platform + " " + api.info_str(fn, d, cl.CL_DEVICE_VERSION))
        dtype = api.info_int(fn, d, cl.CL_DEVICE_TYPE, "cl_device_type")
        unified = bool(api.info_int(fn, d, cl.CL_DEVICE_HOST_UNIFIED_MEMORY, "cl_bool"))
        capability = self.tables.capability(api.info_str(fn, d, cl.CL_DEVICE_EXTENSIONS), dtype, unified,
                                            api.info_str(fn, d, cl.CL_DEVICE_OPENCL_C_VERSION), cl)
        if _fine_grain_svm(api, d):  # alloc(MemoryKind.UNIFIED) works: fine-grained buffer SVM
            capability = Capability(capability.flags | CapabilityFlags.UNIFIED_MEMORY, capability.tier,
                                    capability.vendor_version)
        sizes = api.info_bytes(fn, d, cl.CL_DEVICE_MAX_WORK_ITEM_SIZES)
        dims = tuple(api.ffi.from_buffer("size_t[]", sizes)) + (1, 1, 1)  # (size_t[], the host's byte order)
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
            raise fail(ErrorKind.NO_DEVICE, "Backend.open", "no OpenCL device found", "OPENCL")
        if not 0 <= index < len(devs):
            raise fail(ErrorKind.INVALID_VALUE, "Backend.open",
                       f"OpenCL device {index} does not exist ({len(devs)} found)", "OPENCL")
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
        self._pool_fast = getattr(self.api.cl, "_fast", None)  # (MemoryPool's compiled free list, API mode)
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
        self._device_flags = cl.CL_MEM_READ_WRITE
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
        self._fence_lock = threading.RLock()  # the pool's fences (this and every stream's): see _pool_fence
        self._allocators: tuple[Any, ...] = ()
        self._bind_allocators()

    def _bind_allocators(self) -> None:
        """In API mode, ``alloc`` and ``alloc_unchecked`` of DEVICE memory are compiled allocators
        (``_fast._devmem_allocator``, ia_runtime.h; the spec's ``device_memory``), bound as instance attributes over
        the methods below: ``clCreateBuffer(context, CL_MEM_READ_WRITE, nbytes, NULL, &status)`` called in C, the
        buffer a C object that releases itself (``clReleaseMemObject``) in C.  What they do not take (other kinds,
        a bad size, keywords) goes to the methods.  They hold the device weakly."""
        fast = self._pool_fast
        cls = _compiled_allocation(fast, self.api.ffi)
        if cls is None:
            return
        bound = (int(self.api.ffi.cast("uintptr_t", self.context)), self._device_flags, 0)  # context, flags, host_ptr
        ref, error = weakref.ref(self), type(self)._alloc_error
        self._allocators = tuple(fast._devmem_allocator(cls, ref, getattr(type(self), name),
                                                        partial(error, function=f"Device.{name}"), _DEVICE, None,
                                                        None, None, check, bound)
                                 for name, check in (("alloc", True), ("alloc_unchecked", False)))
        setattr(self, "alloc", self._allocators[0])
        setattr(self, "alloc_unchecked", self._allocators[1])

    def _alloc_error(self, code: int, nbytes: int, kind: MemoryKind = _DEVICE, *,
                     function: str = "Device.alloc") -> Error:
        """The Error of a failed ``clCreateBuffer`` (its ``code``): INVALID_VALUE named ``function`` (the operation
        called) for DEVICE memory past ``DeviceLimits.max_alloc``, as on every backend (the driver's code kept)."""
        limit = self.descriptor.limits.max_alloc
        if kind is _DEVICE and limit is not None and nbytes > limit:
            return fail(ErrorKind.INVALID_VALUE, function, f"nbytes={nbytes} is more than the device's largest "
                        f"allocation ({limit} bytes, DeviceLimits.max_alloc)", "OPENCL", code=int(code))
        return self.api.error(code, "clCreateBuffer", f"{nbytes} bytes of {kind.name} memory requested; the device's "
                              f"largest allocation is {self.descriptor.limits.max_alloc} bytes")

    def _memory_error(self, memory: Any, code: int | None, function: str) -> Error:
        """The Error of a compiled allocation's failed release (``code``), or of freeing it twice (None)."""
        if code is None:
            return fail(ErrorKind.INVALID_HANDLE, function, f"{memory!r} was already freed", self)
        return self.api.error(code, "clReleaseMemObject")

    # MemoryPool's fences: every enqueue of work sets _dirty (on its stream, then here) after the call
    _dirty = False
    _fence_events: list[Event] = []  # (replaced, never appended to)

    def _pool_fence(self) -> list[Event]:
        """The events a pool block freed now waits for
        (:func:`~ironaccelerator_runtime.traits.device.enqueue_tracked_fence`: none on an idle device, else
        a marker on each stream with work since
        (``OpenCLStream._pool_fence``), under ``_fence_lock``)."""
        return enqueue_tracked_fence(self)

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
        # the hot path: DEVICE memory of a valid size on an open device is one clCreateBuffer and the allocation's
        # attributes set in place (OpenCLAllocation.__init__'s); anything else (or a failed clCreateBuffer, asked
        # again there for its reason) goes through the checks
        if kind is _DEVICE and type(nbytes) is int and 0 < nbytes <= _SIZE_MAX and not self._closed:
            null = self._null
            buf = self._create_buffer(self.context, self._device_flags, nbytes, null, null)
            if buf:
                a = _new(OpenCLAllocation)
                a.device = self
                a.buffer = buf
                a.nbytes = nbytes  # (kind: the class's default, DEVICE)
                a._tracked = True  # released by Allocation.__del__ if dropped unfreed
                return a
        return self._checked_alloc(nbytes, kind, self._alloc)

    def alloc_unchecked(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> Result[OpenCLAllocation]:
        if kind is _DEVICE and type(nbytes) is int and 0 < nbytes <= _SIZE_MAX and not self._closed:  # (as alloc)
            null = self._null
            buf = self._create_buffer(self.context, self._device_flags, nbytes, null, null)
            if buf:
                a = _new(OpenCLAllocation)
                a.device = self
                a.buffer = buf
                a.nbytes = nbytes
                return a
        if self._closed:
            return self._closed_error("Device.alloc_unchecked")
        if type(nbytes) is not int or not 0 < nbytes <= _SIZE_MAX or type(kind) is not MemoryKind:
            checked = self._alloc_args_unchecked(nbytes, kind, "Device.alloc_unchecked")
            if isinstance(checked, Error):
                return checked
            nbytes = checked
        r = self._alloc(nbytes, kind, False)
        return as_operation(r, "Device.alloc", "Device.alloc_unchecked") if r.__class__ is Error else r

    def _alloc(self, nbytes: int, kind: MemoryKind, tracked: bool) -> Result[OpenCLAllocation]:
        flags = self._mem_flags.get(kind)
        if kind is MemoryKind.UNIFIED and self._svm:
            return self._alloc_svm(nbytes, tracked)
        if flags is None:
            return fail(ErrorKind.UNSUPPORTED, "Device.alloc",
                        f"{getattr(kind, 'name', kind)} memory is not supported by the "
                        "OpenCL backend", "OPENCL")
        null = self._null
        try:
            buf = self._create_buffer(self.context, flags, nbytes, null, null)  # no errcode_ret: NULL means failed
        except (OverflowError, TypeError) as e:  # not a size_t
            return fail(ErrorKind.INVALID_VALUE, "Device.alloc", f"cannot allocate {nbytes!r} bytes: {e}", "OPENCL")
        if not buf:  # failed: ask again for the reason (only the failing path pays for a cl_int *)
            err = self.api.ffi.new("cl_int *")
            buf = self._create_buffer(self.context, flags, nbytes, null, err)
            if not buf:
                return self._alloc_error(err[0], nbytes, kind)
        return OpenCLAllocation(self, buf, nbytes, kind, tracked)

    def _alloc_svm(self, nbytes: int, tracked: bool) -> Result[OpenCLAllocation]:
        """UNIFIED: ``clSVMAlloc`` (fine-grained buffer: the host reads and writes it directly, coherently), wrapped
        in a ``cl_mem`` with ``CL_MEM_USE_HOST_PTR`` (OpenCL 2.0: the buffer then uses the SVM allocation as its
        storage), so copies, fills and kernel arguments take it as any buffer."""
        api, cl, what = self.api, self.api.cl, "Device.alloc"
        try:
            n = check_size(nbytes, "nbytes", what, _KIND)
        except (Error, TypeError) as e:
            return e if isinstance(e, Error) else fail(ErrorKind.INVALID_VALUE, what, str(e), "OPENCL")
        p = api.raw.clSVMAlloc(self.context, cl.CL_MEM_READ_WRITE | cl.CL_MEM_SVM_FINE_GRAIN_BUFFER, n, 0)
        if p == self._null:
            return fail(ErrorKind.OUT_OF_MEMORY, what, f"clSVMAlloc of {n} bytes of UNIFIED (fine-grained SVM) "
                        f"memory failed; the device's largest allocation is {self.descriptor.limits.max_alloc} bytes",
                        "OPENCL")
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
        raise fail(ErrorKind.UNSUPPORTED, what, "OpenCL buffers over foreign memory (CL_MEM_USE_HOST_PTR, SVM) "
                   "are not supported: copy it into an allocation (Stream.copy_from_host)", "OPENCL")

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
            raise fail(ErrorKind.UNSUPPORTED, "Device.load_module", "name_expressions are not supported by the OpenCL "
                       "backend (OpenCL C has no templates)", "OPENCL")
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
        if self._allocators:  # (alloc and alloc_unchecked: the methods again, which refuse)
            for allocator in self._allocators:
                allocator._shut()  # (one kept by a caller takes the methods from now on)
            del self.alloc, self.alloc_unchecked
            self._allocators = ()
        for s in self._live_streams():  # (their compiled copies: the methods again, which refuse)
            s._shut_copiers()  # type: ignore[attr-defined]
        self._finalizer()


# Imported last: these modules import this one (the package's __init__ imports this module before
# them, so each finds the classes above already defined).
from .memory import OpenCLAllocation, _compiled_allocation, _fine_grain_svm
from .module import OpenCLModule
from .stream import OpenCLStream
