"""The device: :class:`GpuDevice` (allocation, streams, modules, IPC and foreign memory, the memory pool)."""

from __future__ import annotations

from functools import partial
import os
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

from ironaccelerator._core import BackendKind, ErrorKind, MemoryKind
from ironaccelerator_runtime import dlpack, kernel_cache
from ironaccelerator_runtime.backends.gpu.api import _address
from ironaccelerator_runtime.backends.gpu.compile import _image_bytes, classify_image, compile_program, compiler_version
from ironaccelerator_runtime.backends.gpu.context import _ContextRef, _RETAINS, _TLS, _make_current
from ironaccelerator_runtime.backends.gpu.memory import (
    GpuAllocation, _ImportedMemory, _IpcMemory, _compiled_device_allocation, _with_mixin,
)
from ironaccelerator_runtime.backends.gpu.module import GpuModule
from ironaccelerator_runtime.backends.gpu.pool import GpuStreamOrderedPool
from ironaccelerator_runtime.backends.gpu.stream import GpuStream
from ironaccelerator_runtime.errors import Error, as_operation, fail
from ironaccelerator_runtime.traits import (
    Allocation, CompileOptions, Device, DeviceDescriptor, IpcHandle, MemoryPool, Result, _SIZE_MAX, check_size, compile_options,
    compiler_log, unsupported,
)

if TYPE_CHECKING:  # (and bound at run time by __init__.py: the module defining it imports this one)
    from ironaccelerator_runtime.backends.gpu.backend import GpuBackend


_POOL_LOCK = threading.Lock()  # Device.memory_pool: one pool per device


class GpuDevice(Device):
    """A GPU.  A vendor's subclass (generated) names the classes of what it makes: ``allocation_class``,
    ``stream_class``, ``module_class`` and ``pool_class``."""

    backend: GpuBackend
    allocation_class: ClassVar[type[GpuAllocation]]
    stream_class: ClassVar[type[GpuStream]]
    module_class: ClassVar[type[GpuModule]]
    pool_class: ClassVar[type[GpuStreamOrderedPool]]
    _ctx: _ContextRef | None = None  # the device's own context reference (see _ContextRef); None once closed

    def __init__(self, backend: GpuBackend, index: int, handle: Any, descriptor: DeviceDescriptor,
                 arch: str) -> None:
        self.backend = backend
        self.api = api = backend.api
        self.index = index
        self.handle = handle
        self.descriptor = descriptor
        self.arch = arch  # ex) "9.0" (compute capability) or "gfx90a:sramecc+:xnack-"
        self._ctx = ctx = _ContextRef(api, handle)
        if api.context_retain is not None:
            self.context = ctx.context
            self._target: Any = self.context
            # per retain: once a released primary context is retained again (the same handle, made anew), each
            # thread makes it current again instead of trusting what it cached for the old one
            self._key: tuple[Any, ...] = ("context", _address(self.context), next(_RETAINS))
        else:  # no contexts: the device is selected per thread
            self._target = index
            self._key = ("device", index)
        self._streams: weakref.WeakSet[GpuStream] = weakref.WeakSet()
        # alloc and free of DEVICE memory, inline (the hot path)
        self._new = api.ffi.new
        self._ptr_t = api.ffi.typeof(api.tables.types["deviceptr"] + " *")
        self._alloc: Callable[..., int] = api.alloc
        self._free: Callable[..., int] = api.free
        self._allocation = self.allocation_class  # (an instance attribute: the alloc path reads it)
        self._allocators: tuple[Any, ...] = ()
        self.activate()
        self._bind_allocators()

    def _bind_allocators(self) -> None:
        """In API mode, ``alloc`` and ``alloc_unchecked`` of DEVICE memory are compiled allocators
        (``_fast._devmem_allocator``, ia_runtime.h), bound as instance attributes over the methods below: the
        memory a C object (``_DeviceMemory``) that frees and releases on drop in C.  What they do not take (other
        kinds, a bad size, another device current) goes to the methods.  They hold the device weakly."""
        made = self.api.device_memory
        if made is None:
            return
        cls = _compiled_device_allocation(self.api, self.allocation_class)
        ref, ctx, error = weakref.ref(self), self._ctx, type(self)._alloc_error
        self._allocators = tuple(made[0](cls, ref, getattr(type(self), name), partial(error, function=f"Device.{name}"),
                                         MemoryKind.DEVICE, _TLS, self._key, ctx, check)
                                 for name, check in (("alloc", True), ("alloc_unchecked", False)))
        setattr(self, "alloc", self._allocators[0])
        setattr(self, "alloc_unchecked", self._allocators[1])

    def _alloc_error(self, code: int, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE, *,
                     function: str = "Device.alloc") -> Error:
        """The Error of a failed allocation (the driver's ``code``): INVALID_VALUE for DEVICE memory past
        ``DeviceLimits.max_alloc`` (the driver's out of memory; every backend refuses that size so), named
        ``function`` (the operation called: ``Device.alloc`` or ``Device.alloc_unchecked``)."""
        limit = self.descriptor.limits.max_alloc
        if kind is MemoryKind.DEVICE and limit is not None and nbytes > limit:
            return fail(ErrorKind.INVALID_VALUE, function, f"nbytes={nbytes} is more than the device's "
                        f"largest allocation ({limit} bytes, DeviceLimits.max_alloc)", self.api, code=int(code))
        role = "alloc" if kind is MemoryKind.DEVICE else "host_alloc" if kind in (
            MemoryKind.HOST_PINNED, MemoryKind.HOST) else "managed_alloc"
        return self.api.error(code, role, f"{nbytes} bytes of {kind.name} memory requested; the device has "
                              f"{self.descriptor.total_memory} bytes in all")

    def _memory_error(self, memory: Allocation, code: int | None, function: str) -> Error:
        """The Error of a compiled allocation's failed free (``code``), or of freeing it twice (None)."""
        if code is None:
            return fail(ErrorKind.INVALID_HANDLE, function, f"{memory!r} was already freed", self)
        return self.api.error(code, "free")

    def activate(self) -> None:
        """Make this device current on the calling thread (every operation does; cached per thread)."""
        if getattr(_TLS, "key", None) != self._key:
            _make_current(self.api, self._key, self._target)

    def _close(self) -> None:
        """Closed (``Device.close``): the streams launch no more (their launch functions refuse, so the launch
        paths pay nothing for the check), and the device gives up its context reference; what was made from
        it keeps its own until it is gone."""
        for s in list(self._streams):
            s._shut()
        self._ctx = None
        if self._allocators:  # (alloc and alloc_unchecked: the methods again, which refuse)
            for allocator in self._allocators:
                allocator._shut()  # (one kept by a caller takes the methods from now on)
            del self.alloc, self.alloc_unchecked
            self._allocators = ()
        pool = self.__dict__.pop("_pool", None)  # (trimmed by close; whoever still holds it keeps the context)
        shut = getattr(pool, "_shut", None)
        if shut is not None:
            shut()

    # memory
    def alloc(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> GpuAllocation:
        if type(nbytes) is not int or nbytes <= 0:
            nbytes = check_size(nbytes, "nbytes", "Device.alloc", self.backend.kind)
        r = self._alloc_unchecked(nbytes, kind)
        if isinstance(r, Error):
            if not isinstance(kind, MemoryKind):
                raise TypeError(f"Device.alloc: kind must be a MemoryKind, not {type(kind).__name__} ({kind!r})")
            raise r
        r._tracked = True  # released on drop (Allocation.__del__ -> _release)
        return r

    def alloc_unchecked(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> Result[GpuAllocation]:
        r = self._alloc_unchecked(nbytes, kind)
        return as_operation(r, "Device.alloc", "Device.alloc_unchecked") if r.__class__ is Error else r

    def _alloc_unchecked(self, nbytes: int, kind: MemoryKind) -> Result[GpuAllocation]:
        """``alloc_unchecked``, its Errors named ``Device.alloc`` (``alloc`` raises them as they are)."""
        api, ffi = self.api, self.api.ffi
        if self._closed:
            return self._closed_error("Device.alloc")
        if type(nbytes) is not int or not 0 < nbytes <= _SIZE_MAX or type(kind) is not MemoryKind:
            checked = self._alloc_args_unchecked(nbytes, kind, "Device.alloc")
            if isinstance(checked, Error):
                return checked
            nbytes = checked
        try:
            if getattr(_TLS, "key", None) != self._key:
                self.activate()
            if kind is MemoryKind.DEVICE and self._allocators:  # the compiled allocator, the device now current
                return self._allocators[1](nbytes)  # type: ignore[no-any-return]
            if kind is MemoryKind.DEVICE:  # (the hot path: the pointer type and the function kept by __init__)
                role, out = "alloc", self._new(self._ptr_t)
                code = self._alloc(out, nbytes)
            elif kind is MemoryKind.HOST_PINNED or kind is MemoryKind.HOST:
                if api.host_alloc is None:
                    return self._unsupported(kind)
                role, out = "host_alloc", ffi.new("void **")
                code = api.host_alloc(out, nbytes, api.tables.const("host_alloc_flags"))
            elif kind is MemoryKind.UNIFIED:
                if api.managed_alloc is None:
                    return self._unsupported(kind)
                role, out = "managed_alloc", ffi.new(api.tables.types["deviceptr"] + " *")
                code = api.managed_alloc(out, nbytes, api.tables.const("managed_flags"))
            else:
                return fail(ErrorKind.INVALID_VALUE, "Device.alloc", f"{kind!r} is not a MemoryKind", api)
        except Error as e:
            return e.with_traceback(None)  # (a value: its frames would hold their objects)
        except (OverflowError, TypeError) as e:  # ex) a negative size: cffi refuses it before the call
            return fail(ErrorKind.INVALID_VALUE, "Device.alloc", f"cannot allocate {nbytes!r} bytes: {e}", api)
        if code:
            return self._alloc_error(code, nbytes, kind)
        return self._allocation(self, out[0], nbytes, kind)

    def _unsupported(self, kind: MemoryKind) -> Error:
        return fail(ErrorKind.UNSUPPORTED, "Device.alloc",
                    f"{kind.name} memory is not supported by the {self.api.name} backend", self.api)

    # interop: stream handles of other libraries, and foreign memory (Device.from_dlpack)
    def _stream_handle(self, stream: Any, what: str) -> int | None:
        """The native stream handle a DLPack ``stream`` argument names (None: the default stream): a Stream of
        this device, an object with ``__cuda_stream__`` (``(version, handle)``), or an int per the protocol
        (CUDA: 1 legacy default, 2 per-thread default, else a handle, 0 refused; HIP: 0 default, else a handle,
        1 and 2 refused).  BufferError for anything else, as a producer answers a bad consumer."""
        if stream is None:
            return None
        if isinstance(stream, GpuStream):
            if stream.device is not self:
                raise BufferError(f"{what}: {stream!r} is not a stream of {self!r}")
            return stream._address
        proto = getattr(stream, "__cuda_stream__", None)
        if proto is not None:
            pair = proto() if callable(proto) else proto
            try:
                _, handle = pair
                return int(handle)
            except (TypeError, ValueError):
                raise BufferError(f"{what}: __cuda_stream__ gave {pair!r}, not (version, handle)") from None
        if type(stream) is not int:
            raise BufferError(f"{what}: stream must be None, an int handle, a Stream or have __cuda_stream__, not "
                              f"{type(stream).__name__}")
        cuda = self.kind is BackendKind.CUDA
        if (cuda and stream == 0) or (not cuda and stream in (1, 2)) or stream < -1:
            raise BufferError(f"{what}: stream={stream} is not allowed for {self.kind.name} by the DLPack protocol")
        return stream

    def _consumer_stream(self, stream: Any, what: str) -> Any:
        if stream is None:
            return None
        handle = self._stream_handle(stream, what)
        return handle

    def _import_kind(self, device: tuple[int, int], what: str) -> MemoryKind:
        cuda = self.kind is BackendKind.CUDA
        kinds = {self.kind.dlpack_device: MemoryKind.DEVICE}
        kinds.update({dlpack.KDL_CUDA_HOST: MemoryKind.HOST_PINNED, dlpack.KDL_CUDA_MANAGED: MemoryKind.UNIFIED}
                     if cuda else {dlpack.KDL_ROCM_HOST: MemoryKind.HOST_PINNED})
        if device[0] == dlpack.KDL_CPU:
            raise fail(ErrorKind.UNSUPPORTED, what, "pageable host memory (kDLCPU) cannot be used by a "
                       f"{self.kind.name} device without registering it, which this backend does not do: copy it "
                       "into an allocation (Stream.copy_from_host)", self)
        kind = kinds.get(device[0])
        if kind is None or device[1] != self.descriptor.id.index:
            raise dlpack.wrong_device(what, self.kind, device, f"{self.descriptor.id} (DLPack device "
                                      f"{(self.kind.dlpack_device, self.descriptor.id.index)})")
        return kind

    def _import_memory(self, imp: Any, kind: MemoryKind) -> GpuAllocation:
        cls = _with_mixin(_ImportedMemory, self.allocation_class)
        ptr_t = self.api.tables.types["deviceptr"]
        handle: Any = imp.address if "*" not in ptr_t else self.api.ffi.cast(ptr_t, imp.address)
        a: Any = cls(self, handle, imp.nbytes, kind)
        a._foreign = imp
        a._tracked = True
        imported: GpuAllocation = a
        return imported

    def from_cuda_array_interface(self, obj: Any, *, stream: Any = None) -> GpuAllocation:
        """Import ``__cuda_array_interface__`` memory (v2/v3) as a DEVICE allocation without a copy, where the
        vendor's ``interop`` lists it (CUDA).

        The producer's ``stream`` (v3) is ordered before ``stream`` (an event recorded there, waited on here) or,
        without one, synchronised.  The memory is trusted to be this device's (the interface does not say which
        device it is on).

        Args:
            obj: an object with ``__cuda_array_interface__`` (CuPy, Numba, torch CUDA tensors).
            stream: this device's consumer stream (a :class:`Stream`, ``__cuda_stream__`` or a handle); None: the
                producer's stream is synchronised.

        Returns:
            A DEVICE allocation over the memory (``.dtype``, ``.shape``); the producer stays alive with it.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for a missing, malformed, masked or non-contiguous interface;
                ``ErrorKind.UNSUPPORTED`` where the vendor's ``interop`` lacks it (HIP); the driver's error where
                ordering the streams fails; ``ErrorKind.INVALID_HANDLE`` after ``close``.

        Backends:
            CUDA; HIP: ``UNSUPPORTED``.
        """
        what = "Device.from_cuda_array_interface"
        self._check_open(what)
        if "cuda_array_interface" not in self.api.tables.interop:
            raise unsupported(self.kind, what)
        imp, producer = dlpack.cuda_array_interface_of(obj, what, self.kind.name)
        try:
            if producer is not None:
                self.activate()
                api = self.api
                native = api.ffi.cast(api.tables.types["stream"], producer)
                consumer = self._stream_handle(stream, what) if stream is not None else None
                if consumer is None:
                    api.check(api.stream_synchronize(native), "stream_synchronize")
                else:
                    out = api.ffi.new(api.tables.types["event"] + " *")
                    api.check(api.event_create(out, api.tables.const("event_flags")), "event_create")
                    try:
                        api.check(api.event_record(out[0], native), "event_record")
                        api.check(api.stream_wait_event(api.ffi.cast(api.tables.types["stream"], consumer), out[0],
                                                        0), "stream_wait_event")
                    finally:
                        api.event_destroy(out[0])
        except BaseException:
            imp.release()
            raise
        return self._adopt(imp, MemoryKind.DEVICE, what)  # type: ignore[return-value]

    def import_ipc(self, handle: IpcHandle) -> GpuAllocation:
        """Open a handle another process exported (``ipc_open``: ``cuIpcOpenMemHandle`` / ``hipIpcOpenMemHandle``,
        lazily enabling peer access) as a DEVICE allocation whose ``free()`` is ``ipc_close`` (see
        :meth:`Device.import_ipc`).

        Args:
            handle: the :class:`IpcHandle` the exporter sent.

        Returns:
            A DEVICE allocation over the exporter's memory; ``.ipc_handle`` is the handle it was opened from.

        Raises:
            TypeError: ``handle`` is not an :class:`IpcHandle`.
            Error: ``ErrorKind.INVALID_VALUE`` for a handle of another backend, of the wrong size, or exported by
                this process; ``ErrorKind.UNSUPPORTED`` where the vendor has no IPC; the driver's error where
                opening fails; ``ErrorKind.INVALID_HANDLE`` after ``close``.

        Backends:
            CUDA, HIP.
        """
        what = "Device.import_ipc"
        if not isinstance(handle, IpcHandle):
            raise TypeError(f"{what}: handle must be an IpcHandle (Allocation.export_ipc()), not {type(handle).__name__}")
        self._check_open(what)
        api, ffi = self.api, self.api.ffi
        if api.ipc_open is None:
            raise unsupported(self.kind, what)
        if handle.backend is not self.kind:
            raise fail(ErrorKind.INVALID_VALUE, what, f"{handle!r} is not a {self.kind.name} handle", api)
        ctype = api.tables.types["ipc_handle"]
        size = ffi.sizeof(ctype)
        if not isinstance(handle.data, bytes) or len(handle.data) != size:
            raise fail(ErrorKind.INVALID_VALUE, what, f"the handle's data must be the {size} bytes of a {ctype}", api)
        nbytes = check_size(handle.nbytes, "the handle's nbytes", what, self.kind)
        if handle.pid == os.getpid():
            raise fail(ErrorKind.INVALID_VALUE, what, f"{handle!r} was exported by this process; {api.name} opens "
                       "an IPC handle only in another process (use the allocation itself)", api)
        self.activate()
        native = ffi.new(ctype + " *")
        ffi.memmove(native, handle.data, size)
        out = ffi.new(api.tables.types["deviceptr"] + " *")
        code = api.ipc_open(out, native[0], api.tables.const("ipc_open_flags"))
        if code:
            raise api.error(code, "ipc_open", repr(handle))
        a: Any = _with_mixin(_IpcMemory, self.allocation_class)(self, out[0], nbytes, MemoryKind.DEVICE)
        a.ipc_handle = handle
        a._tracked = True  # closed on drop
        imported: GpuAllocation = a
        return imported

    def create_stream(self) -> GpuStream:
        self._check_open("Device.create_stream")
        return self.stream_class(self)

    def memory_pool(self) -> MemoryPool:
        """The device's pool (one per device), made on first use.

        Returns:
            A stream-ordered pool (``pool_class``, on ``cuMemPoolCreate``/``hipMemPoolCreate``) where the vendor has
            one and the device supports it (``attr_memory_pools_supported``), else the core's :class:`MemoryPool`.

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` after ``close``; the driver's error where creating the pool fails.

        Backends:
            CUDA, HIP.
        """
        self._check_open("Device.memory_pool")
        pool = getattr(self, "_pool", None)
        if pool is None:
            with _POOL_LOCK:
                pool = getattr(self, "_pool", None)
                if pool is None:
                    if self.api.pool_create is not None and self.backend._attr(
                            self.api.tables.const("attr_memory_pools_supported"), self.handle):
                        pool = self.pool_class(self)
                    else:
                        pool = MemoryPool(self)
                    self._pool = pool
        return pool

    def load_module(self, source_or_binary: str | bytes, *, options: Sequence[str] = (),
                    defines: Mapping[str, Any] | None = None, include_dirs: Sequence[str | os.PathLike[str]] = (),
                    name_expressions: Sequence[str] = (), cache: bool = True) -> GpuModule:
        """A code object, or source compiled by the vendor's runtime compiler (NVRTC), from the kernel cache when it
        has it.

        Source is compiled with ``options`` + ``-D`` + ``-I`` flags, ``name_expressions`` lowered so
        ``kernel("f<float>")`` works; the image that loaded (PTX, else cubin) is kept in the kernel cache under the
        source, options, compiler version, architecture, device name and driver version, with the headers the
        compile read (checked at each hit: an edited header, found through ``include_dirs`` or a ``-I`` option,
        recompiles).

        Args:
            source_or_binary: source (``str``/bytes) or an image: PTX, cubin (ELF) or fatbin on CUDA; ELF or an
                offload bundle on HIP.
            options: the compiler's flags (``"-use_fast_math"``); only with source.
            defines: macros, ``{"N": 4}`` -> ``-DN=4``; only with source.
            include_dirs: ``-I`` directories; only with source.
            name_expressions: template instantiations to look up (``"axpy<float>"``); only with source.
            cache: use the kernel cache (default True).

        Returns:
            The loaded module (``CudaModule``/``HipModule``).

        Raises:
            Error: ``ErrorKind.COMPILE_FAILED`` with the compiler log; ``ErrorKind.INVALID_VALUE`` for bad option
                types or a NUL byte inside PTX or source; ``ErrorKind.UNSUPPORTED`` for an image format the vendor
                does not load, source where no compiler is bound (HIP), or options with an image; the driver's error
                where loading fails; ``ErrorKind.INVALID_HANDLE`` after ``close``.

        Backends:
            CUDA (source via NVRTC, PTX, cubin, fatbin), HIP (code objects: ELF, offload bundles).
        """
        backend, formats = self.api.name, self.api.tables.module_formats
        opts = compile_options(options, defines, include_dirs, name_expressions, backend)
        self._check_open("Device.load_module")
        data = _image_bytes(source_or_binary, backend)
        fmt = classify_image(data, backend)
        if fmt not in formats:
            raise fail(ErrorKind.UNSUPPORTED, "Device.load_module",
                       f"the {backend} backend cannot load {fmt} (it takes: "
                       f"{', '.join(formats)})", backend)
        if fmt in ("ptx", "source") and b"\0" in data.rstrip(b"\0"):
            raise fail(ErrorKind.INVALID_VALUE, "Device.load_module", f"{fmt} text contains a NUL byte (the driver "
                       "would read only the text before it)", backend)
        if fmt == "source":
            return self._compile(data, opts, cache)
        if opts:
            raise fail(ErrorKind.UNSUPPORTED, "Device.load_module", f"compile options apply to source; a {fmt} image "
                       "is already compiled", backend)
        return self.module_class(self, data)

    def _cache_identity(self) -> str:
        """The device and compiler part of a cache key: architecture, name, driver and compiler versions."""
        ident = getattr(self, "_identity", None)
        if ident is None:
            ident = (f"{self.arch}\n{self.descriptor.name}\ndriver {self.backend.driver_version()}\n"
                     f"compiler {compiler_version(self.api)}")
            self._identity = ident
        return ident

    def _compile(self, source: bytes, opts: CompileOptions | None = None, cache: bool = False) -> GpuModule:
        """Source -> PTX for this device's virtual architecture; if the driver is older than the compiler's
        PTX, compile for the real architecture instead (no driver JIT needed).  With ``cache``, the image
        that loaded comes from (or goes to) the kernel cache."""
        opts = opts or CompileOptions()
        flags, names = opts.flags(), opts.name_expressions
        store = kernel_cache.default_cache() if cache and self.api.program_create is not None else None
        key = None
        if store is not None:
            key = kernel_cache.cache_key(backend=self.api.name, source=source, options=opts.options,
                                         defines=dict(opts.defines), include_dirs=opts.include_dirs,
                                         name_expressions=names, device=self._cache_identity())
            entry = store.get_entry(key)  # None too when a header it read changed since
            if entry is not None:
                meta, image = entry
                lowered = meta.get("lowered")
                if isinstance(lowered, dict) and set(lowered) == set(names):
                    try:
                        module = self.module_class(self, image)
                    except Error:  # the driver refuses it now: compile afresh
                        pass
                    else:
                        module.lowered_names = {str(k): str(v) for k, v in lowered.items()}
                        module.from_cache = True
                        cached_log = meta.get("log")  # the compile's own log, kept with the entry
                        if isinstance(cached_log, str) and cached_log:
                            compiler_log(module, cached_log, self.api.name, cached=True)
                        return module
        # what the compile may read besides the source, recorded before it compiles (kernel_cache.scan_dependencies)
        deps = kernel_cache.scan_dependencies(source, opts.options, opts.include_dirs) if key is not None else None
        arch = self.arch.replace(".", "")
        log: list[str] = []
        image, lowered = compile_program(self.api, source, f"compute_{arch}", flags, name_expressions=names, build_log=log)
        try:
            module = self.module_class(self, image)
        except Error as e:
            if e.code != self.api.tables.const("status_unsupported_ptx"):
                raise
            log.clear()
            image, lowered = compile_program(self.api, source, f"sm_{arch}", flags, binary=True,
                                             name_expressions=names, build_log=log)
            module = self.module_class(self, image)
        module.lowered_names = lowered
        compiler_log(module, "".join(log), self.api.name)
        if store is not None and key is not None:
            stored: dict[str, Any] = {"lowered": lowered}
            if module.build_log:
                stored["log"] = module.build_log
            store.put_entry(key, stored, image, deps)
        return module

    def synchronize(self) -> None:
        self._check_open("Device.synchronize")
        self.activate()
        marks = [(s, s._inflight.mark()) for s in list(self._streams)]  # what is enqueued before the wait
        self.api.check(self.api.device_synchronize(), "device_synchronize")
        for s, mark in marks:
            s._inflight.release(mark)
            s._last = None
