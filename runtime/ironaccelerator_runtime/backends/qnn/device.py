"""The QNN backend (the backend library's handle, its devices and their HTP architecture) and its devices:
``Backend.open``, allocation, context binaries loaded as modules, the device queries."""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Mapping, Sequence

from ironaccelerator._core import BackendKind, ErrorKind, MemoryKind
from ironaccelerator_runtime.backends import qnn_log, qnn_saver
from ironaccelerator_runtime.errors import Error, as_operation, fail
from ironaccelerator_runtime.traits.device import enqueue_tracked_fence
from ironaccelerator_runtime.traits import (
    _SIZE_MAX, Backend, Device, DeviceDescriptor, DeviceId, DeviceLimits, Event, Result, check_size,
    compile_options,
)

from .tables import (
    QnnTables, _Api, _HTP_CONFIG_ARCH, _HTP_CONFIG_SOC, _KIND, _MAX_CLIENT_BUFFER, _NAME, _Owned, _SAVER_BACKEND_ID,
    check_config_layout,
)


# ---------------------------------------------------------------------------------------------------- backend


class QnnBackend(Backend):
    """The QNN backend (``BackendKind.QNN``): Qualcomm AI Engine Direct's HTP backend library (``libQnnHtp.so``,
    through the generated interface module; the x86 build emulates the Hexagon NPU) and its devices, as
    ``QnnDevice_getPlatformInfo`` reports them.

    ``tables``: the spec's capability and SoC tables (``TABLES`` of ``specs/qnn/backend.yaml``), which the generated
    subclass ``ironaccelerator.backends.qnn.QnnBackend`` sets.  Adds over :class:`~ironaccelerator.Backend`:
    ``open(device_id, arch=..., soc=...)`` selects the HTP architecture / SoC model graphs are prepared for, and
    ``QnnBackend(trace_dir=...)`` records every QNN call with the Saver backend instead of running it.  Modules are
    context binaries, kernels are graphs (no compiler: compile options are ``UNSUPPORTED``).
    """

    kind = BackendKind.QNN
    tables = QnnTables(flags={}, tiers={}, vendors=(), soc_models={})

    def __init__(self, *, trace_dir: str | os.PathLike[str] | None = None) -> None:
        """``trace_dir``: record every QNN call of this process with the Saver backend (libQnnSaver.so, which
        executes nothing) into that directory instead of running it (:func:`qnn_saver.trace_to`: before the
        first QNN call of the process; ``IA_QNN_TRACE_DIR`` does the same)."""
        if trace_dir is not None:
            qnn_saver.trace_to(trace_dir)
        self.api = _Api()
        q = self.api.q
        v = q.QnnBackend_getApiVersion()
        self.core_api = (int(v.coreApiVersion.major), int(v.coreApiVersion.minor), int(v.coreApiVersion.patch))
        self.backend_api = (int(v.backendApiVersion.major), int(v.backendApiVersion.minor),
                            int(v.backendApiVersion.patch))
        try:
            self.build_id = q.QnnBackend_getBuildId()
        except Error:
            self.build_id = ""
        providers, n = q.QnnInterface_getProviders()
        self.backend_id = int(providers[0].backendId) if n else -1  # the provider the table resolver selected
        self.provider_name = self.api.ffi.string(providers[0].providerName).decode() if n else ""
        self._lock = threading.Lock()
        self._handle: _Owned | None = None
        self._devices: list[tuple[dict[str, Any], DeviceDescriptor]] | None = None
        self.async_execute: bool | None = None  # QnnGraph_executeAsync: unknown until the first launch tries it

    def _backend_handle(self) -> _Owned:
        """The backend handle (``QnnBackend_create``), made on first use and freed after every device made
        from it."""
        with self._lock:
            if self._handle is None:
                q = self.api.q
                # the library's messages go to logging (logger ironaccelerator.qnn); the log handle is freed
                # after the backend handle and every device made with it
                log = _Owned(qnn_log.create_logger(), qnn_log.free_logger)
                self._handle = _Owned(q.QnnBackend_create(log.handle, self.api.null), q.unchecked.QnnBackend_free,
                                      log)
            return self._handle

    def _platform(self) -> list[dict[str, Any]]:
        """Each hardware device of ``QnnDevice_getPlatformInfo``: id, cores, SoC model, arch, VTCM (MB)."""
        api = self.api
        q, ffi = api.q, api.ffi
        if self.backend_id == _SAVER_BACKEND_ID:
            # the Saver records calls and answers QNN_SAVER_ERROR_DUMMY_RETVALUE to queries: one device, which
            # stands for the device of the replay
            return [{"device_id": 0, "cores": 1, "soc": 0, "arch": 0, "vtcm_mb": 0}]
        pi = q.QnnDevice_getPlatformInfo(api.null)
        try:
            found = []
            if pi.version == 1:
                for i in range(pi.v1.numHwDevices):
                    hw = pi.v1.hwDevices[i].v1
                    d: dict[str, Any] = {"device_id": int(hw.deviceId), "cores": max(int(hw.numCores), 1),
                                         "soc": 0, "arch": 0, "vtcm_mb": 0}
                    if hw.deviceInfoExtension:
                        ext = ffi.cast("QnnHtpDevice_DeviceInfoExtension_t *", hw.deviceInfoExtension)
                        if ext.devType == 0:  # QNN_HTP_DEVICE_TYPE_ON_CHIP
                            on = ext.onChipDevice
                            d.update(soc=int(on.socModel), arch=int(on.arch), vtcm_mb=int(on.vtcmSize))
                    found.append(d)
            return found
        finally:
            api.raw.QnnDevice_freePlatformInfo(api.null, pi)

    def versions(self) -> dict[str, Any]:
        """The core and backend API versions the library reports, its provider and build id.

        Returns:
            ``{"core_api": "2.x.y", "backend_api": "5.x.y", "provider": ..., "build": ...}``.

        Raises:
            Error: never (read once, when the backend was constructed).

        Backends:
            QNN.
        """
        return {"core_api": ".".join(map(str, self.core_api)), "backend_api": ".".join(map(str, self.backend_api)),
                "provider": self.provider_name, "build": self.build_id}

    def _describe(self, index: int, hw: dict[str, Any], arch: int | None = None, soc: int | None = None) -> DeviceDescriptor:
        t = self.tables
        arch = arch if arch is not None else hw["arch"]
        soc = soc if soc is not None else hw["soc"]
        if arch is None or arch == 0:
            arch = t.soc_arch(soc) if soc else None
        core, be = self.core_api, self.backend_api
        kind = self.provider_name.split("_", 1)[0] or "HTP"  # HTP_QTI_AISW -> HTP, SAVER_QTI_AISW -> SAVER
        version = f"QNN {core[0]}.{core[1]} / {kind} {be[0]}.{be[1]}" + (f" v{arch}" if arch else "")
        cap = t.capability(arch or 0, version)
        try:
            host_memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            host_memory = 1 << 30
        # allocations are host memory bound as client buffers (one client buffer: 32-bit size); a graph has no
        # launch geometry, so the launch limits are all 1 (LaunchDims() only)
        limits = DeviceLimits(max_block=(1, 1, 1), max_threads_per_block=1, max_grid=(1, 1, 1), max_shared_mem=0,
                              max_alloc=_MAX_CLIENT_BUFFER, max_work_items=1)
        name = t.device_name(arch, soc)
        if self.backend_id == _SAVER_BACKEND_ID:
            name = f"Qualcomm QNN Saver (records calls into {qnn_saver.tracing()}; executes nothing)"
        return DeviceDescriptor(id=DeviceId(_KIND, index), name=name, vendor=t.vendor(name),
                                backend=_KIND, total_memory=host_memory, compute_units=hw["cores"],
                                capability=cap, limits=limits)

    def _enumerate(self) -> list[tuple[dict[str, Any], DeviceDescriptor]]:
        with self._lock:
            if self._devices is None:
                self._devices = [(hw, self._describe(i, hw)) for i, hw in enumerate(self._platform())]
            return self._devices

    def devices(self) -> list[DeviceDescriptor]:
        return [d for _, d in self._enumerate()]

    def open(self, device_id: DeviceId | int = 0, *, arch: int | str | None = None,
             soc: int | str | None = None) -> QnnDevice:
        """Open a device; ``arch`` and/or ``soc`` select the HTP architecture / SoC model graphs are prepared for.

        Measured on libQnnHtp 2.51 (x86): the SoC selection is process-wide — after a device opened with
        ``soc=``, graphs built on later default devices of the process run f32 at fp16 precision, as on that
        SoC; ``arch=`` alone does not leak so.  Select a SoC in a process of its own.

        Args:
            device_id: a :class:`DeviceId` of this backend or an index, as for :meth:`Backend.open`.
            arch: the HTP architecture, ``75`` or ``"v75"`` (one of ``QnnHtpDevice_Arch_t``'s); passed to
                ``QnnDevice_create`` as a ``QnnHtpDevice_CustomConfig_t``.  None: the library's default.
            soc: the SoC model, ``"SM8650"`` (a name of the spec's SoC table) or its number ``57``.  None: the
                default.

        Returns:
            The opened ``QnnDevice``; its ``descriptor`` names the architecture / SoC selected.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for a bad ``device_id`` (as :meth:`Backend.open`), an ``arch`` that
                is not an HTP architecture QNN knows, or a ``soc`` name the table lacks (the message lists the
                known ones; a number is passed as it is, and the library may refuse it);
                ``ErrorKind.NO_DEVICE`` when the library reports no device; the library's error where
                ``QnnDevice_create`` fails.

        Backends:
            QNN only (the other backends' ``open`` takes ``device_id`` alone).
        """
        index = self._index(device_id)
        devs = self._enumerate()
        if not devs:
            raise fail(ErrorKind.NO_DEVICE, "Backend.open", "the QNN backend library reports no device", _NAME)
        if not 0 <= index < len(devs):
            raise fail(ErrorKind.INVALID_VALUE, "Backend.open",
                       f"QNN device {index} does not exist ({len(devs)} found)", _NAME)
        hw, desc = devs[index]
        options: list[tuple[int, int]] = []
        soc_model = arch_n = None
        if soc is not None:
            soc_model = self.tables.soc_model(soc)
            options.append((_HTP_CONFIG_SOC, soc_model))
        if arch is not None:
            arch_n = _arch_number(arch)
            options.append((_HTP_CONFIG_ARCH, arch_n))
        if options:
            desc = self._describe(index, hw, arch_n if arch_n is not None else
                                  (self.tables.soc_arch(soc_model) if soc_model else None) or hw["arch"],
                                  soc_model if soc_model is not None else (0 if arch_n is not None else None))
        return QnnDevice(self, desc, hw["device_id"], options)


def _arch_number(arch: int | str) -> int:
    """An HTP architecture given as 75 or ``"v75"`` -> 75: one of ``QnnHtpDevice_Arch_t``'s (the QNN headers'
    list, as the interface spec declares it), else INVALID_VALUE listing them."""
    if isinstance(arch, str):
        s = arch.lower().lstrip("v")
        if not s.isdigit():
            raise fail(ErrorKind.INVALID_VALUE, "Backend.open", f"arch {arch!r} is not an HTP architecture like 'v75' "
                       f"or 75; supported: {_arch_list()}", _NAME)
        n = int(s)
    else:
        n = check_size(arch, "arch", "Backend.open", _KIND, minimum=0)
    if n not in _supported_arches():
        raise fail(ErrorKind.INVALID_VALUE, "Backend.open", f"arch {arch!r} is not an HTP architecture QNN knows; "
                   f"supported: {_arch_list()}", _NAME)
    return n


def _supported_arches() -> tuple[int, ...]:
    """The architectures of ``QnnHtpDevice_Arch_t`` (not NONE or UNKNOWN): 68, 69, 73, ..."""
    from ironaccelerator.backends.qnn import interface as q

    return tuple(int(a) for a in q.QnnHtpDevice_Arch_t if a.name.rpartition("_")[2][1:].isdigit())


def _arch_list() -> str:
    return ", ".join(f"v{a}" for a in _supported_arches())


# ---------------------------------------------------------------------------------------------------- device


_DEVICE = MemoryKind.DEVICE
_new = object.__new__


class QnnDevice(Device):
    """A QNN device handle (``QnnDevice_create``) of the backend's handle.  See the module docstring for what
    allocations, modules, kernels and streams are here."""

    backend: QnnBackend
    _fence_events: list[Event]  # (the pool fence's: replaced, never appended to)

    def __init__(self, backend: QnnBackend, descriptor: DeviceDescriptor, hw_device_id: int = 0,
                 options: list[tuple[int, int]] | None = None) -> None:
        self.backend = backend
        self.api = api = backend.api
        self.descriptor = descriptor
        self._pool_fast = getattr(api.q, "_fast", None)  # (MemoryPool's compiled free list, API mode)
        q, ffi = api.q, api.ffi
        keep = []
        config = api.null
        if options:
            offset = ffi.offsetof("QnnHtpDevice_CustomConfig_t", "socModel")
            check_config_layout(backend.core_api[:2], (q.QNN_API_VERSION_MAJOR, q.QNN_API_VERSION_MINOR), offset)
            configs = []
            for option, value in options:
                custom = ffi.new("QnnHtpDevice_CustomConfig_t *")
                custom.option = option
                if option == _HTP_CONFIG_SOC:
                    custom.socModel = value
                else:
                    custom.arch.deviceId = hw_device_id
                    custom.arch.arch = value
                cfg = ffi.new("QnnDevice_Config_t *")
                cfg.option = q.QnnDevice_ConfigOption_t.QNN_DEVICE_CONFIG_OPTION_CUSTOM
                cfg.customConfig = custom
                keep += [custom, cfg]
                configs.append(cfg)
            config = ffi.new("QnnDevice_Config_t *[]", configs + [api.null])
            keep.append(config)
        self.options = tuple(options or ())
        parent = backend._backend_handle()
        handle = q.QnnDevice_create(parent.parent.handle if parent.parent is not None else api.null, config)
        self._owner: _Owned | None = _Owned(handle, api.raw.QnnDevice_free, parent)
        self.handle = handle
        self._backend_owner = parent
        self._streams: weakref.WeakSet[QnnStream] = weakref.WeakSet()
        self._unified: Error | None = None
        # the allocation hot path's: ffi.new and the client buffer's type; _closed read from the instance
        self._new = ffi.new
        self._bytes_t = ffi.typeof("uint8_t[]")
        self._closed = False
        # MemoryPool's device-wide fence (a block freed naming no stream): only an asynchronous execution
        # (QnnStream._run_async) leaves work behind its call, and it sets _dirty after its enqueue; every other
        # launch, copy and fill is complete when it returns, so a free on an idle device asks no stream
        self._fence_lock = threading.RLock()
        self._dirty = False
        self._fence_events = []
        self._bind_allocators()

    def _bind_allocators(self) -> None:
        """In API mode, ``alloc`` and ``alloc_unchecked`` of DEVICE memory are compiled allocators
        (``_fast._host_allocator``, ia_host_memory.h), bound as instance attributes over the methods below: the
        memory is calloc'ed by a C object that frees it in C.  What they do not take (other kinds, a size no
        client buffer holds, keywords, a closed device) goes to the methods, whose allocations are of the same
        class (``_fast._host_memory``).  They hold the device weakly."""
        fast = self._pool_fast
        cls = None if fast is None else host_allocation_class(fast, self.api.ffi)
        self._host_class = cls
        self._allocators: tuple[Any, ...] = ()
        if cls is None:
            return
        self._host_memory = fast._host_memory
        ref = weakref.ref(self)
        self._allocators = tuple(fast._host_allocator(cls, ref, getattr(type(self), name), _DEVICE,
                                                      _MAX_CLIENT_BUFFER, check)
                                 for name, check in (("alloc", True), ("alloc_unchecked", False)))
        setattr(self, "alloc", self._allocators[0])
        setattr(self, "alloc_unchecked", self._allocators[1])

    def _pool_fence(self) -> list[Event]:
        """The events a pool block freed now waits for
        (:func:`~ironaccelerator_runtime.traits.device.enqueue_tracked_fence`: none on an idle device, else each
        live stream's ``_pool_fence``, under ``_fence_lock``)."""
        return enqueue_tracked_fence(self)

    # memory
    def alloc(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> QnnAllocation:
        # the hot path: DEVICE memory of an int size one client buffer holds, on an open device (the rest, and a
        # failed allocation, go through _checked_alloc for their errors)
        if type(nbytes) is int and 0 < nbytes <= _MAX_CLIENT_BUFFER and kind is _DEVICE and not self._closed \
                and self._host_class is None:  # (ABI mode's hot path: else the compiled allocator's class)
            try:
                buf = self._new(self._bytes_t, nbytes)
            except (MemoryError, OverflowError):
                pass  # (the checked path below reports it)
            else:  # QnnAllocation(self, buf, nbytes, kind, True), its __init__ inline (no call)
                a = _new(QnnAllocation)
                a.device = self
                a.buffer = buf
                a.nbytes = nbytes
                a.kind = kind
                a._freed = False
                a._tracked = True
                a._views = None
                a._foreign = None
                return a
        return self._checked_alloc(nbytes, kind, self._alloc)

    def alloc_unchecked(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> Result[QnnAllocation]:
        if type(nbytes) is int and 0 < nbytes <= _MAX_CLIENT_BUFFER and kind is _DEVICE and not self._closed \
                and self._host_class is None:  # (ABI mode's hot path: else the compiled allocator's class)
            try:
                buf = self._new(self._bytes_t, nbytes)
            except (MemoryError, OverflowError):
                pass  # (the checked path below reports it)
            else:  # (as alloc's, untracked)
                a = _new(QnnAllocation)
                a.device = self
                a.buffer = buf
                a.nbytes = nbytes
                a.kind = kind
                a._freed = False
                a._tracked = False
                a._views = None
                a._foreign = None
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

    def _alloc(self, nbytes: int, kind: MemoryKind, tracked: bool) -> Result[QnnAllocation]:
        if kind is MemoryKind.UNIFIED:
            return self._unified_error()
        if nbytes > _MAX_CLIENT_BUFFER:  # (a tensor's client buffer could not hold it: INVALID_VALUE as elsewhere)
            return fail(ErrorKind.INVALID_VALUE, "Device.alloc", f"nbytes={nbytes} is more than the device's largest "
                        f"allocation ({_MAX_CLIENT_BUFFER} bytes, DeviceLimits.max_alloc)", _NAME)
        try:
            if self._host_class is not None:  # (the class of the compiled allocators' allocations)
                made: QnnAllocation = self._host_memory(self._host_class, self, nbytes, kind, tracked)
                return made
            buf = self._new(self._bytes_t, nbytes)
        except (MemoryError, OverflowError) as e:
            return fail(ErrorKind.OUT_OF_MEMORY, "Device.alloc",
                        f"cannot allocate {nbytes} bytes of host memory for client "
                        f"buffers: {type(e).__name__}", _NAME)
        except TypeError as e:
            return fail(ErrorKind.INVALID_VALUE, "Device.alloc", f"cannot allocate {nbytes!r} bytes: {e}", _NAME)
        return QnnAllocation(self, buf, nbytes, kind, tracked)

    # foreign memory (Device.from_dlpack): QNN client buffers are host memory bound by address, so any host tensor
    def _import_kind(self, device: tuple[int, int], what: str) -> MemoryKind:
        from ...dlpack import HOST_DEVICE_TYPES, wrong_device

        if device[0] not in HOST_DEVICE_TYPES:
            raise wrong_device(what, self.kind, device, "host memory (QNN client buffers are host memory)")
        return MemoryKind.HOST

    def _import_memory(self, imp: Any, kind: MemoryKind) -> QnnAllocation:
        a = QnnAllocation(self, self.api.ffi.cast("uint8_t *", imp.address), imp.nbytes, kind, True)
        a._foreign = imp  # released (the producer's deleter) with the allocation
        return a

    def _unified_error(self) -> Error:
        """MemoryKind.UNIFIED is QNN's registered shared memory: ask the library (``QnnMem_register`` of a
        DMA-BUF descriptor, on a scratch context) once per device, and answer UNSUPPORTED with its reason."""
        if self._unified is not None:
            return self._unified
        api = self.api
        q, ffi, raw = api.q, api.ffi, api.raw
        ctx = ffi.new("Qnn_ContextHandle_t *")
        code = raw.QnnContext_create(self._backend_owner.handle, self.handle, api.null, ctx)
        if code:
            reason = str(api.error(code, "QnnContext_create"))
        else:
            try:
                scratch = ffi.new("uint8_t[]", 4096)
                dims = ffi.new("uint32_t[1]", [4096])
                md = ffi.new("Qnn_MemDescriptor_t *")
                md.memShape.numDim = 1
                md.memShape.dimSize = dims
                md.dataType = q.Qnn_DataType_t.QNN_DATATYPE_UINT_8
                md.memType = q.Qnn_MemType_t.QNN_MEM_TYPE_DMA_BUF
                md.dmaBufInfo.fd = -1
                md.dmaBufInfo.data = scratch
                handles = ffi.new("Qnn_MemHandle_t[1]")
                code = raw.QnnMem_register(ctx[0], md, 1, handles)
                if code == 0:
                    raw.QnnMem_deRegister(handles, 1)
                    reason = ("QnnMem_register accepted a descriptor, but registered shared memory is not bound to "
                              "graph tensors by this backend yet (never run on Snapdragon hardware)")
                else:
                    reason = str(api.error(code, "QnnMem_register"))
            finally:
                raw.QnnContext_free(ctx[0], api.null)
        self._unified = fail(ErrorKind.UNSUPPORTED, "Device.alloc",
                             "MemoryKind.UNIFIED (QNN registered shared memory, "
                             f"QnnMem_register) is not supported on {self.descriptor.name}: {reason}; use "
                             "MemoryKind.DEVICE or HOST (host memory bound as client buffers)",
                             _NAME, code=code or None)
        return self._unified

    def create_stream(self) -> QnnStream:
        self._check_open("Device.create_stream")
        s = QnnStream(self)
        self._streams.add(s)
        return s

    def graph_builder(self) -> GraphBuilder:
        """A builder of QNN graphs on this device (a new context, ``QnnContext_create``): ``builder.graph(name)``
        adds a graph, whose tensors and ``qti.aisw`` nodes are checked as they are added; ``builder.finalize()``
        or ``load_module(builder)`` gives the module (:mod:`ironaccelerator_runtime.backends.qnn.graph`).

        Returns:
            The :class:`~ironaccelerator_runtime.backends.qnn.graph.GraphBuilder`.

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` after ``close``; the library's error where ``QnnContext_create``
                fails.

        Backends:
            QNN only.
        """
        return GraphBuilder(self)

    def load_module(self, source_or_binary: str | bytes | GraphBuilder, *, options: Sequence[str] = (),
                    defines: Mapping[str, Any] | None = None, include_dirs: Sequence[str | os.PathLike[str]] = (),
                    name_expressions: Sequence[str] = (), cache: bool = True) -> QnnModule:
        """A QNN context binary -> its module (``QnnContext_createFromBinary``), whose graphs are the kernels.

        Nothing is compiled, so any compile option is ``UNSUPPORTED`` and there is no kernel cache.

        Args:
            source_or_binary: the context binary: ``bytes``, ``bytearray``, ``memoryview`` or a uint8 array (not
                ``str``); or a :meth:`graph_builder` of this device, finalized (``GraphBuilder.finalize``).
            options: must be empty (``UNSUPPORTED`` otherwise).
            defines: must be empty (``UNSUPPORTED`` otherwise).
            include_dirs: must be empty (``UNSUPPORTED`` otherwise).
            name_expressions: must be empty (``UNSUPPORTED`` otherwise).
            cache: accepted and ignored.

        Returns:
            The ``QnnModule`` (``graph_names`` lists its graphs).

        Raises:
            TypeError: ``source_or_binary`` is neither a buffer nor a GraphBuilder (None, an int).
            Error: ``ErrorKind.INVALID_VALUE`` for source text, an empty binary, one the library cannot read, or
                a graph builder of another device (a builder's own: as ``GraphBuilder.finalize``);
                ``ErrorKind.UNSUPPORTED`` for any compile option; the library's error where creating the context
                fails; ``ErrorKind.INVALID_HANDLE`` after ``close``.

        Backends:
            QNN.
        """
        if compile_options(options, defines, include_dirs, name_expressions, _NAME):
            raise fail(ErrorKind.UNSUPPORTED, "Device.load_module", "the QNN backend loads context binaries only; "
                       "compile options do not apply", _NAME)
        self._check_open("Device.load_module")
        if isinstance(source_or_binary, GraphBuilder):
            if source_or_binary.device is not self:
                raise fail(ErrorKind.INVALID_VALUE, "Device.load_module", "the graph builder was made on another "
                           "device (its context belongs to that device)", _NAME)
            return source_or_binary.finalize()
        if not isinstance(source_or_binary, (str, bytes, bytearray, memoryview)) and \
                not hasattr(source_or_binary, "__buffer__") and not hasattr(source_or_binary, "__array_interface__"):
            raise TypeError("Device.load_module: source_or_binary must be a context binary (bytes, bytearray, "
                            "memoryview, a uint8 array) or a GraphBuilder, not "
                            f"{type(source_or_binary).__name__}")  # (a wrong Python type: as on every backend)
        return QnnModule(self, source_or_binary)

    def synchronize(self) -> None:
        self._check_open("Device.synchronize")
        for s in list(self._streams):
            s.synchronize()

    def _close(self) -> None:
        # the device's own reference to its handle; modules made from it hold theirs (freed after them)
        self._owner = None
        for allocator in self._allocators:  # (their later calls go to the methods, which refuse)
            allocator._shut()


# Imported last: these modules import this one (the package's __init__ imports this module before
# them, so each finds the classes above already defined).
from .memory import QnnAllocation, host_allocation_class
from .module import QnnModule
from .stream import QnnStream
from .graph import GraphBuilder
