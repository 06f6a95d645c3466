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
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ironaccelerator._core import BackendKind, CapabilityFlags, ComputeTier, DType, ErrorKind, MemoryKind, Vendor
from ironaccelerator_runtime.backends import qnn_log, qnn_saver
from ironaccelerator_runtime.errors import Error
from ironaccelerator_runtime.traits import _SIZE_MAX  # (alloc_unchecked's one range test)
from ironaccelerator_runtime.kernel_args import LocalMemory, buffer_error, local_error, shared_mem_error, where
from ironaccelerator_runtime.traits import (
    Allocation, AllocationSlice, Backend, Capability, Device, DeviceDescriptor, DeviceId, DeviceLimits, Event, Kernel, LaunchDims,
    Module, PooledAllocation, Result, Stream, check_size, check_span, compile_options, device_span, host_span,
    fill_pattern, host_view, not_a_launch,
)

_KIND = BackendKind.QNN
_NAME = "QNN"
_DEFAULT_DIMS = LaunchDims()
_NOT_SUPPORTED = 1000  # QNN_COMMON_ERROR_NOT_SUPPORTED
_RAW = 0  # QNN_TENSORMEMTYPE_RAW
_APP_WRITE, _APP_READ = 0, 1  # Qnn_TensorType_t of graph inputs / outputs
_HTP_CONFIG_SOC, _HTP_CONFIG_ARCH = 0, 1  # QnnHtpDevice_ConfigOption_t
_SAVER_BACKEND_ID = 2  # QnnInterface_t.backendId of libQnnSaver.so
_MAX_CLIENT_BUFFER = 2**32 - 1  # Qnn_ClientBuffer_t.dataSize is 32 bits

# Qnn_DataType_t -> DType (fixed-point types are their storage integers; their scale/offset is TensorInfo's)
_DTYPES = {
    0x0008: DType.I8, 0x0016: DType.I16, 0x0032: DType.I32, 0x0064: DType.I64,
    0x0108: DType.U8, 0x0116: DType.U16, 0x0132: DType.U32, 0x0164: DType.U64,
    0x0216: DType.F16, 0x0232: DType.F32, 0x0264: DType.F64,
    0x0308: DType.I8, 0x0316: DType.I16, 0x0332: DType.I32,
    0x0408: DType.U8, 0x0416: DType.U16, 0x0432: DType.U32,
    0x0508: DType.BOOL,
}


def _bits(qnn_dtype: int) -> int:
    """A Qnn_DataType_t's element width in bits: its low byte, read as decimal digits (0x32 -> 32)."""
    return int(f"{qnn_dtype & 0xFF:x}")


@dataclass(frozen=True)
class QnnTables:
    """Capability translation, as spec data: HTP architecture (an int, 68 for v68; or ``"always"``) -> flags,
    each a threshold (a device gets the flags of every key at or below its architecture); architecture (or
    ``"default"``) -> tier; (substring, vendor) pairs; SoC name -> (SoC model number, architecture)."""

    flags: dict[Any, CapabilityFlags]
    tiers: dict[Any, ComputeTier]
    vendors: tuple[tuple[str, Vendor], ...]
    soc_models: dict[str, tuple[int, int]]

    def capability(self, arch: int, vendor_version: str) -> Capability:
        """An HTP architecture (68 for v68) -> Capability, by the tables (unit-testable without a device)."""
        flags = self.flags.get("always", CapabilityFlags.NONE)
        for key, f in self.flags.items():
            if key != "always" and arch >= key:
                flags |= f
        tier = self.tiers.get(arch, self.tiers.get("default", ComputeTier.NPU))
        return Capability(flags=flags, tier=tier, vendor_version=vendor_version)

    def soc_name(self, model: int) -> str | None:
        """The SoC name of a model number (``30`` -> ``"SM8350"``), None if the table does not know it."""
        for name, (m, _) in self.soc_models.items():
            if m == model:
                return name
        return None

    def soc_model(self, soc: int | str) -> int:
        """A SoC given by name (``"SM8650"``) or model number -> the model number (INVALID_VALUE if unknown by
        name; a number is taken as it is, so a SoC newer than the table can still be selected)."""
        if isinstance(soc, str):
            entry = self.soc_models.get(soc.upper())
            if entry is None:
                raise Error(ErrorKind.INVALID_VALUE, f"unknown SoC {soc!r}; known: {', '.join(self.soc_models)} "
                            "(or pass the SoC model number)", backend=_NAME, function="Backend.open")
            return entry[0]
        n = check_size(soc, "soc", "Backend.open", _KIND)
        return n

    def soc_arch(self, model: int) -> int | None:
        for m, arch in self.soc_models.values():
            if m == model:
                return arch
        return None

    def device_name(self, arch: int | None, soc_model: int | None) -> str:
        """``"Qualcomm HTP v68 (SM8350)"``; an unknown SoC model by number, none when not known."""
        name = "Qualcomm HTP" + (f" v{arch}" if arch else "")
        if soc_model:
            name += f" ({self.soc_name(soc_model) or f'SoC model {soc_model}'})"
        return name

    def vendor(self, text: str = "Qualcomm") -> Vendor:
        for needle, vendor in self.vendors:
            if needle.lower() in text.lower():
                return vendor
        return Vendor.OTHER


def check_config_layout(library: tuple[int, int], declared: tuple[int, int], offset: int) -> None:
    """Refuse to pass a ``QnnHtpDevice_CustomConfig_t`` to a library whose core API is older than the one the
    declarations describe (``declared``: the spec's QNN_API_VERSION_MAJOR/MINOR): the struct's layout changed
    (2.32-era libraries read the union at offset 4; the declarations put it at ``offset``), and a library that
    misreads it ignores the selection silently.  Another major version is refused too."""
    lmaj, lmin = library
    dmaj, dmin = declared
    if lmaj != dmaj or lmin < dmin:
        raise Error(ErrorKind.UNSUPPORTED, f"QnnHtpDevice_CustomConfig_t is declared for QNN core API {dmaj}.{dmin} "
                    f"(its union at offset {offset}); the loaded library implements core API {lmaj}.{lmin}, "
                    f"whose layout differs (2.32-era libraries read the union at offset 4): refusing to pass a "
                    "device config the library would misread (the SoC/architecture selection would be silently "
                    "ignored). Use a library of core API "
                    f"{dmaj}.{dmin} or later, or open the device without soc=/arch=",
                    backend=_NAME, function="QnnDevice_create")


class _Api:
    """The loaded bindings, resolved once."""

    def __init__(self) -> None:
        from ironaccelerator.backends.qnn import interface as q
        if not q.has("QnnBackend_create"):
            from ironaccelerator.backends.qnn.interface._binding import BINDING
            err = BINDING.load_error(BINDING.index["QnnBackend_create"])
            raise err or Error(ErrorKind.LIBRARY_NOT_FOUND, "QNN backend library not found", backend=_NAME,
                               function="QnnBackend_create")
        from ironaccelerator.backends.qnn.interface._binding import BINDING
        self.q = q
        self.ffi = q.ffi
        self.raw = q.unchecked
        self.binding = BINDING
        self.null = q.ffi.NULL
        self._system: Any = None

    @property
    def system(self) -> Any:
        """``ironaccelerator.backends.qnn.system`` (libQnnSystem), LIBRARY_NOT_FOUND if it does not load."""
        if self._system is None:
            from ironaccelerator.backends.qnn import system as s
            if not s.has("QnnSystemContext_create"):
                from ironaccelerator.backends.qnn.system._binding import BINDING
                err = BINDING.load_error(BINDING.index["QnnSystemContext_create"])
                raise err or Error(ErrorKind.LIBRARY_NOT_FOUND, "libQnnSystem not found", backend=_NAME,
                                   function="QnnSystemContext_create")
            self._system = s
        return self._system

    def error(self, code: int, function: str, detail: str = "") -> Error:
        err: Error = self.binding.error(code, self.binding.index[function], detail)
        return err


class _Owned:
    """One native handle and what frees it, run once: when the last holder lets go (a weakref.finalize on this
    object) or explicitly.  ``parent``: the owner of the handle this one was made from, kept alive until this
    one is freed (reverse lifecycle order: context, then device, then backend)."""

    __slots__ = ("handle", "parent", "_fin", "__weakref__")

    def __init__(self, handle: Any, free: Callable[[Any], object], parent: _Owned | None = None,
                 extra: Any = None) -> None:
        self.handle = handle
        self.parent = parent
        self._fin = weakref.finalize(self, _free, free, handle, parent, extra)

    @property
    def alive(self) -> bool:
        return self._fin.alive


def _free(free: Callable[[Any], object], handle: Any, parent: _Owned | None, extra: Any) -> None:
    # (module level: the finalizer must not hold the owner itself; parent and extra are held until now)
    free(handle)


# ---------------------------------------------------------------------------------------------------- backend


class QnnBackend(Backend):
    """A QNN backend library (libQnnHtp.so, through the generated interface module): its devices, as
    ``QnnDevice_getPlatformInfo`` reports them.  ``tables``: the spec's capability data (the generated subclass
    sets it)."""

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
        return DeviceDescriptor(id=DeviceId(_KIND, index), name=name, vendor=t.vendor(),
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
            raise Error(ErrorKind.NO_DEVICE, "the QNN backend library reports no device", backend=_NAME,
                        function="Backend.open")
        if not 0 <= index < len(devs):
            raise Error(ErrorKind.INVALID_VALUE, f"QNN device {index} does not exist ({len(devs)} found)",
                        backend=_NAME, function="Backend.open")
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
            raise Error(ErrorKind.INVALID_VALUE, f"Backend.open: arch {arch!r} is not an HTP architecture like 'v75' "
                        f"or 75; supported: {_arch_list()}", backend=_NAME, function="Backend.open")
        n = int(s)
    else:
        n = check_size(arch, "arch", "Backend.open", _KIND, minimum=0)
    if n not in _supported_arches():
        raise Error(ErrorKind.INVALID_VALUE, f"Backend.open: arch {arch!r} is not an HTP architecture QNN knows; "
                    f"supported: {_arch_list()}", backend=_NAME, function="Backend.open")
    return n


def _supported_arches() -> tuple[int, ...]:
    """The architectures of ``QnnHtpDevice_Arch_t`` (not NONE or UNKNOWN): 68, 69, 73, ..."""
    from ironaccelerator.backends.qnn import interface as q

    return tuple(int(a) for a in q.QnnHtpDevice_Arch_t if a.name.rpartition("_")[2][1:].isdigit())


def _arch_list() -> str:
    return ", ".join(f"v{a}" for a in _supported_arches())


# ---------------------------------------------------------------------------------------------------- device


class QnnDevice(Device):
    """A QNN device handle (``QnnDevice_create``) of the backend's handle.  See the module docstring for what
    allocations, modules, kernels and streams are here."""

    backend: QnnBackend

    def __init__(self, backend: QnnBackend, descriptor: DeviceDescriptor, hw_device_id: int = 0,
                 options: list[tuple[int, int]] | None = None) -> None:
        self.backend = backend
        self.api = api = backend.api
        self.descriptor = descriptor
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

    # memory
    def alloc(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> QnnAllocation:
        return self._checked_alloc(nbytes, kind, self._alloc)

    def alloc_unchecked(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> Result[QnnAllocation]:
        if self._closed:
            return self._closed_error("Device.alloc_unchecked")
        if type(nbytes) is not int or not 0 < nbytes <= _SIZE_MAX or type(kind) is not MemoryKind:
            checked = self._alloc_args_unchecked(nbytes, kind, "Device.alloc_unchecked")
            if isinstance(checked, Error):
                return checked
            nbytes = checked
        return self._alloc(nbytes, kind, False)

    def _alloc(self, nbytes: int, kind: MemoryKind, tracked: bool) -> Result[QnnAllocation]:
        if kind is MemoryKind.UNIFIED:
            return self._unified_error()
        try:
            buf = self.api.ffi.new("uint8_t[]", nbytes)
        except (MemoryError, OverflowError) as e:
            return Error(ErrorKind.OUT_OF_MEMORY, f"cannot allocate {nbytes} bytes of host memory for client "
                         f"buffers: {type(e).__name__}", backend=_NAME, function="Device.alloc")
        except TypeError as e:
            return Error(ErrorKind.INVALID_VALUE, f"cannot allocate {nbytes!r} bytes: {e}", backend=_NAME,
                         function="Device.alloc")
        return QnnAllocation(self, buf, nbytes, kind, tracked)

    # foreign memory (Device.from_dlpack): QNN client buffers are host memory bound by address, so any host tensor
    def _import_kind(self, device: tuple[int, int], what: str) -> MemoryKind:
        from ..dlpack import HOST_DEVICE_TYPES, wrong_device

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
        self._unified = Error(ErrorKind.UNSUPPORTED, f"MemoryKind.UNIFIED (QNN registered shared memory, "
                              f"QnnMem_register) is not supported on {self.descriptor.name}: {reason}; use "
                              "MemoryKind.DEVICE or HOST (host memory bound as client buffers)",
                              code=code or None, backend=_NAME, function="Device.alloc")
        return self._unified

    def create_stream(self) -> QnnStream:
        self._check_open("Device.create_stream")
        s = QnnStream(self)
        self._streams.add(s)
        return s

    def load_module(self, source_or_binary: str | bytes, *, options: Sequence[str] = (),
                    defines: Mapping[str, Any] | None = None, include_dirs: Sequence[str | os.PathLike[str]] = (),
                    name_expressions: Sequence[str] = (), cache: bool = True) -> QnnModule:
        """A QNN context binary -> its module (``QnnContext_createFromBinary``), whose graphs are the kernels.

        Nothing is compiled, so any compile option is ``UNSUPPORTED`` and there is no kernel cache.

        Args:
            source_or_binary: the context binary: ``bytes``, ``bytearray``, ``memoryview`` or a uint8 array (not
                ``str``).
            options: must be empty (``UNSUPPORTED`` otherwise).
            defines: must be empty (``UNSUPPORTED`` otherwise).
            include_dirs: must be empty (``UNSUPPORTED`` otherwise).
            name_expressions: must be empty (``UNSUPPORTED`` otherwise).
            cache: accepted and ignored.

        Returns:
            The ``QnnModule`` (``graph_names`` lists its graphs).

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for source text, an empty binary, or one the library cannot read;
                ``ErrorKind.UNSUPPORTED`` for any compile option; the library's error where creating the context
                fails; ``ErrorKind.INVALID_HANDLE`` after ``close``.

        Backends:
            QNN.
        """
        if compile_options(options, defines, include_dirs, name_expressions, _NAME):
            raise Error(ErrorKind.UNSUPPORTED, "Device.load_module: the QNN backend loads context binaries only; "
                        "compile options do not apply", backend=_NAME, function="Device.load_module")
        self._check_open("Device.load_module")
        return QnnModule(self, source_or_binary)

    def synchronize(self) -> None:
        self._check_open("Device.synchronize")
        for s in list(self._streams):
            s.synchronize()

    def _close(self) -> None:
        # the device's own reference to its handle; modules made from it hold theirs (freed after them)
        self._owner = None


# ---------------------------------------------------------------------------------------------------- memory


class QnnAllocation(Allocation):
    """Host memory (``buffer``: a cffi ``uint8_t[]``), bound to graph tensors as a RAW client buffer."""

    device: QnnDevice
    _foreign: Any = None  # Device.from_dlpack: the imported tensor (dlpack.Imported) whose memory this is

    def __init__(self, device: QnnDevice, buffer: Any, nbytes: int, kind: MemoryKind, tracked: bool = False) -> None:
        self.device = device
        self.buffer = buffer
        self.nbytes = nbytes
        self.kind = kind
        if tracked:
            self._tracked = True

    def _host_address(self) -> int | None:
        """QNN client buffers are host memory, whatever the kind: every allocation has a host view."""
        return int(self.device.api.ffi.cast("uintptr_t", self.buffer))

    def _slice(self, offset: int, nbytes: int) -> Allocation:
        """Host memory: a slice is the client buffer's address moved by ``offset``."""
        return AllocationSlice(self, offset, nbytes)

    def _release(self) -> Error | None:
        self.buffer = None  # the memory goes with the last reference (a launch never binds a freed allocation)
        foreign = self._foreign
        if foreign is not None:  # imported memory: the producer's deleter, now
            self._foreign = None
            foreign.release()
        return None


def _live(a: Any, what: str, device: QnnDevice) -> Any:
    """The cffi buffer of a QNN allocation (pooled or not; a slice's: its allocation's, at the slice's offset) for
    use on ``device``: INVALID_HANDLE if freed or the device closed, INVALID_VALUE if another device's, TypeError
    if not an allocation."""
    t = type(a)
    offset = 0
    if t is AllocationSlice and type(a.parent) is QnnAllocation:
        offset, block = a.offset, a.parent
    elif t is QnnAllocation:
        block = a
    elif t is PooledAllocation and type(a.block) is QnnAllocation:
        block = a.block
    else:
        raise TypeError(f"{what}: expected a QNN allocation, got {t.__name__} ({a!r:.80})")
    if a._freed or block._freed:
        a._check_live(what)
        block._check_live(what)
    if device._closed:
        raise device._closed_error(what)
    if block.device is not device:
        raise Error(ErrorKind.INVALID_VALUE, f"{what}: {a!r} belongs to another device than the stream",
                    backend=_NAME, function=what)
    return block.buffer + offset if offset else block.buffer


# ---------------------------------------------------------------------------------------------------- modules


@dataclass(frozen=True)
class TensorInfo:
    """A graph input or output, as the context binary describes it."""

    name: str
    id: int
    qnn_dtype: int  # Qnn_DataType_t  ex) 0x0232 (QNN_DATATYPE_FLOAT_32)
    dtype: DType | None  # the element type of its buffer (fixed point: the storage integer); None if not mapped
    dims: tuple[int, ...]
    nbytes: int
    quantization: tuple[float, int] | None  # (scale, offset): real = (q + offset) * scale; None: not quantized
    is_input: bool


class QnnModule(Module):
    """A context (``QnnContext_createFromBinary``) and the binary's description (libQnnSystem), whose graphs
    are kernels.  The context is freed when the module is dropped or :meth:`close` d, after its kernels."""

    def __init__(self, device: QnnDevice, binary: Any) -> None:
        api = device.api
        self.device = device
        if isinstance(binary, str):
            raise Error(ErrorKind.INVALID_VALUE, "Device.load_module: the QNN backend loads context binaries "
                        "(bytes), not source text", backend=_NAME, function="Device.load_module")
        mv = host_view(binary, backend=_KIND, function="Device.load_module")
        if mv.nbytes == 0:
            raise Error(ErrorKind.INVALID_VALUE, "Device.load_module: the context binary is empty", backend=_NAME,
                        function="Device.load_module")
        data = bytes(mv)
        self.nbytes = len(data)
        s = api.system
        sys_handle = s.QnnSystemContext_create()
        self._system = _Owned(sys_handle, s.unchecked.QnnSystemContext_free)
        sbuf = s.ffi.from_buffer(data)
        try:
            info, _ = s.QnnSystemContext_getBinaryInfo(sys_handle, sbuf, len(data))
        except Error as e:
            raise Error(e.kind, f"Device.load_module: not a QNN context binary this library can read ({len(data)} "
                        f"bytes): {e}", code=e.code, backend=_NAME, function=e.function) from None
        self.graphs: dict[str, tuple[tuple[TensorInfo, ...], tuple[TensorInfo, ...], int, int]] = _graphs(s, info)
        # what the binary was built for: its SoC model, and the HTP architecture (the platform info's HTP
        # extension where the binary has one, else the SoC table's)
        self.soc_model, self.platform_arch = _binary_platform(s, info)
        if self.platform_arch is None and self.soc_model:
            self.platform_arch = device.backend.tables.soc_arch(self.soc_model)
        self._binary = data  # (the description's memory belongs to the system context; the binary is ours)
        ctx = api.ffi.new("Qnn_ContextHandle_t *")
        q = api.q
        code = api.raw.QnnContext_createFromBinary(device._backend_owner.handle, device.handle, api.null,
                                                    api.ffi.from_buffer(data), len(data), ctx, api.null)
        if code:
            raise api.error(code, "QnnContext_createFromBinary", f"{len(data)}-byte context binary holding "
                            f"graphs {', '.join(self.graphs) or '(none)'}")
        owner = device._owner
        if owner is None:  # closed meanwhile
            api.raw.QnnContext_free(ctx[0], api.null)
            raise device._closed_error("Device.load_module")
        self.handle = ctx[0]
        self._owner: _Owned | None = _Owned(ctx[0], _context_free(q), owner, self._system)

    @property
    def graph_names(self) -> list[str]:
        """The names of the context binary's graphs, in its order (what :meth:`kernel` takes; QNN only)."""
        return list(self.graphs)

    def kernel(self, name: str) -> QnnKernel:
        self.device._check_open("Module.kernel")
        if self._owner is None:
            raise Error(ErrorKind.INVALID_HANDLE, "Module.kernel: the module was closed", backend=_NAME,
                        function="Module.kernel")
        if not isinstance(name, str):
            raise TypeError(f"Module.kernel: name must be a str, not {type(name).__name__} ({name!r})")
        entry = self.graphs.get(name)
        if entry is None:
            raise Error(ErrorKind.INVALID_VALUE, f"Module.kernel: no graph {name!r} in this context binary; it "
                        f"holds: {', '.join(repr(g) for g in self.graphs) or 'no graphs'}", backend=_NAME,
                        function="Module.kernel")
        return QnnKernel(self, name, entry)

    def close(self) -> None:
        """Give up the module's reference to its context now, instead of when the module is dropped.

        The context (``QnnContext_free``) is freed once no kernel of it is alive: kernels already made keep
        working; a later :meth:`kernel` raises ``INVALID_HANDLE``.  Idempotent.

        Raises:
            Error: never.

        Backends:
            QNN only (other modules are released when dropped).
        """
        self._owner = None


def _context_free(q: Any) -> Callable[[Any], object]:
    raw, null = q.unchecked, q.ffi.NULL
    return lambda ctx: raw.QnnContext_free(ctx, null)


def _tensor_info(s: Any, t: Any, is_input: bool) -> TensorInfo:
    v = t.v1 if t.version == 1 else t.v2  # (v2 begins with v1's fields)
    name = s.ffi.string(v.name).decode("utf-8", "replace") if v.name else ""
    dims = tuple(int(v.dimensions[i]) for i in range(v.rank)) if v.dimensions else ()
    qdt = int(v.dataType)
    n = 1
    for d in dims:
        n *= d
    nbytes = (n * _bits(qdt) + 7) // 8
    qp = v.quantizeParams
    quant = None
    if qp.encodingDefinition == 1 and qp.quantizationEncoding == 0:  # DEFINED, SCALE_OFFSET
        quant = (float(qp.scaleOffsetEncoding.scale), int(qp.scaleOffsetEncoding.offset))
    return TensorInfo(name=name, id=int(v.id), qnn_dtype=qdt, dtype=_DTYPES.get(qdt), dims=dims, nbytes=nbytes,
                      quantization=quant, is_input=is_input)


def _graphs(s: Any, info: Any) -> dict[str, tuple[tuple[TensorInfo, ...], tuple[TensorInfo, ...], int, int]]:
    """name -> (inputs, outputs, address of the inputs' Qnn_Tensor_t array, of the outputs')."""
    version = int(info.version)
    body = {1: "contextBinaryInfoV1", 2: "contextBinaryInfoV2", 3: "contextBinaryInfoV3"}.get(version)
    if body is None:
        raise Error(ErrorKind.UNSUPPORTED, f"context binary info version {version} is not one of 1-3",
                    backend=_NAME, function="QnnSystemContext_getBinaryInfo")
    b = getattr(info, body)
    out = {}
    for i in range(b.numGraphs):
        g = b.graphs[i]
        gi = {1: g.graphInfoV1, 2: g.graphInfoV2, 3: g.graphInfoV3}.get(int(g.version))
        if gi is None:
            continue
        name = s.ffi.string(gi.graphName).decode("utf-8", "replace")
        ins = tuple(_tensor_info(s, gi.graphInputs[k], True) for k in range(gi.numGraphInputs))
        outs = tuple(_tensor_info(s, gi.graphOutputs[k], False) for k in range(gi.numGraphOutputs))
        out[name] = (ins, outs, int(s.ffi.cast("uintptr_t", gi.graphInputs)),
                     int(s.ffi.cast("uintptr_t", gi.graphOutputs)))
    return out


def _binary_platform(s: Any, info: Any) -> tuple[int | None, int | None]:
    """(SoC model, HTP arch) a version-3 binary info reports (socModel; the platform info's HTP extension)."""
    if int(info.version) != 3:
        return None, None
    b = info.contextBinaryInfoV3
    soc = int(b.socModel) or None
    arch = None
    pi = b.platformInfo
    if pi and pi.version == 1 and pi.v1.numHwDevices and pi.v1.hwDevices:
        hw = pi.v1.hwDevices[0]
        if hw.version == 1 and hw.v1.deviceInfoExtension:
            ext = s.ffi.cast("QnnHtpDevice_DeviceInfoExtension_t *", hw.v1.deviceInfoExtension)
            if ext.devType == 0:
                arch = int(ext.onChipDevice.arch) or None
    return soc, arch


class QnnKernel(Kernel):
    """A graph of a module (``QnnGraph_retrieve``): ``inputs``/``outputs`` (:class:`TensorInfo`) and the
    ``Qnn_Tensor_t`` arrays a launch binds (copies of the binary's tensors, memType RAW), cached with the
    arguments last bound."""

    def __init__(self, module: QnnModule, name: str,
                 entry: tuple[tuple[TensorInfo, ...], tuple[TensorInfo, ...], int, int]) -> None:
        api = module.device.api
        self.module = module
        self.name = name
        self.inputs, self.outputs, in_addr, out_addr = entry
        self.handle = api.q.QnnGraph_retrieve(module.handle, name)
        self._owner = module._owner  # the context lives while a kernel of it does
        ffi = api.ffi
        nin, nout = len(self.inputs), len(self.outputs)
        self.num_args = nin + nout
        self._nin, self._nout = nin, nout
        self._ins = ffi.new("Qnn_Tensor_t[]", max(nin, 1))
        self._outs = ffi.new("Qnn_Tensor_t[]", max(nout, 1))
        src_in = ffi.cast("Qnn_Tensor_t *", in_addr)
        src_out = ffi.cast("Qnn_Tensor_t *", out_addr)
        for i in range(nin):
            self._ins[i] = src_in[i]
        for i in range(nout):
            self._outs[i] = src_out[i]
        self._slots = [self._ins[i].v1 for i in range(nin)] + [self._outs[i].v1 for i in range(nout)]
        for slot, t in zip(self._slots, self.inputs + self.outputs):
            slot.memType = _RAW
            slot.clientBuf.data = api.null
            slot.clientBuf.dataSize = t.nbytes
        self._bound: tuple[Any, ...] | None = None  # the argument tuple last bound (its objects, by identity)
        self._blocks: tuple[Any, ...] = ()  # ... and the allocations behind them (pooled: both), for freed tests
        self._keep: list[Any] = []  # the cffi buffers bound
        self._lock = threading.Lock()
        self._execute = api.raw.QnnGraph_execute
        self._null = api.null

    def signature(self) -> str:
        """The graph's signature: its name, then each input and output tensor's name, element type and shape.

        ex) ``add_f32(a: f32[1, 1024], b: f32[1, 1024]) -> (c: f32[1, 1024])`` (a quantized tensor adds its
        quantization; an element type without a :class:`DType` shows as the QNN data type's hex value).

        Returns:
            The signature, a str: the arguments a launch passes are the inputs then the outputs, in this order.

        Raises:
            Error: never (it reads what the binary described).

        Backends:
            QNN only.
        """
        def one(t: TensorInfo) -> str:
            dt = t.dtype.info.name if t.dtype is not None else hex(t.qnn_dtype)
            q = f" q{t.quantization}" if t.quantization else ""
            return f"{t.name}: {dt}{list(t.dims)}{q}"
        return (f"{self.name}({', '.join(one(t) for t in self.inputs)}) -> "
                f"({', '.join(one(t) for t in self.outputs)})")

    def _bind(self, args: tuple[Any, ...], device: QnnDevice, function: str) -> Error | None:
        """Check ``args`` against the graph's tensors and bind them as client buffers (under ``_lock``)."""
        if len(args) != self.num_args:
            return Error(ErrorKind.INVALID_VALUE, f"{function}: graph {self.name!r} takes {self.num_args} "
                         f"allocations ({self._nin} inputs, then {self._nout} outputs: "
                         f"{', '.join(t.name for t in self.inputs + self.outputs)}), {len(args)} given",
                         backend=_NAME, function=function)
        keep, blocks = [], []
        tensors = self.inputs + self.outputs
        for i, (a, t) in enumerate(zip(args, tensors)):
            what = f"{function}: argument {i} ({'input' if t.is_input else 'output'} {t.name!r})"
            try:
                buf = _live(a, what, device)
            except TypeError:  # not an allocation of this backend: the kernel-argument policy's refusal
                if type(a) is LocalMemory:
                    return local_error(_NAME, function, where(i, self.name))
                return buffer_error(f"{where(i, self.name)} ({'input' if t.is_input else 'output'} {t.name!r})", a,
                                    _NAME, function)
            except Error as e:
                return e
            if a.nbytes < t.nbytes:
                dt = t.dtype.info.name if t.dtype is not None else hex(t.qnn_dtype)
                return Error(ErrorKind.INVALID_VALUE, f"{what} holds {a.nbytes} bytes; the tensor is "
                             f"{dt}{list(t.dims)}, {t.nbytes} bytes", backend=_NAME, function=function)
            # element types: a typed argument (an imported tensor, Device.from_dlpack, or a slice of one) must hold
            # the tensor's type; raw memory (Device.alloc, pool blocks: dtype None) is bytes and binds by size
            typed = (a.parent if type(a) is AllocationSlice else a).dtype
            if typed is not None and t.dtype is not None and typed is not t.dtype:
                dt = t.dtype.info.name
                return Error(ErrorKind.INVALID_VALUE, f"{what} holds {typed.info.name} elements; the tensor is "
                             f"{dt}{list(t.dims)}: pass {dt} data (convert it on the host first)", backend=_NAME,
                             function=function)
            keep.append(buf)
            blocks.append(a)
            if type(a) is PooledAllocation:
                blocks.append(a.block)
        for slot, buf in zip(self._slots, keep):
            slot.clientBuf.data = buf
        self._keep = keep
        self._blocks = tuple(blocks)
        self._bound = args
        return None


# ---------------------------------------------------------------------------------------------------- streams


class QnnStream(Stream):
    """A graph executor.  Work is synchronous (complete when ``launch`` returns) where the library has no
    asynchronous execution (the x86 HTP: ``QnnGraph_executeAsync`` answers 1000); copies are host copies."""

    device: QnnDevice

    def __init__(self, device: QnnDevice) -> None:
        self.device = device
        self.api = device.api
        self._memmove = device.api.ffi.memmove
        self._from_buffer = device.api.ffi.from_buffer
        self._pending = 0
        self._cond = threading.Condition()
        self._async_error: Error | None = None
        self._notify: Any = None

    # copies (host memory: done when they return)
    def copy_from_host(self, dst: Allocation, src: Any, nbytes: int | None = None, *, dst_offset: int = 0,
                       src_offset: int = 0) -> None:
        what = "Stream.copy_from_host"
        buf = _live(dst, what, self.device)
        view = host_view(src, backend=_KIND, function=what)
        so, at, n = host_span(view.nbytes, dst.nbytes, nbytes, src_offset, dst_offset, what, _KIND, to_device=True)
        self.synchronize()  # (asynchronous execution: never overwrite a buffer a graph still reads)
        self._memmove(buf + at, self._from_buffer(view) + so, n)

    def copy_to_host(self, dst: Any, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
                     src_offset: int = 0) -> None:
        what = "Stream.copy_to_host"
        buf = _live(src, what, self.device)
        view = host_view(dst, writable=True, backend=_KIND, function=what)
        do, at, n = host_span(view.nbytes, src.nbytes, nbytes, dst_offset, src_offset, what, _KIND, to_device=False)
        self.synchronize()
        self._memmove(self._from_buffer("char[]", view, True) + do, buf + at, n)

    def copy(self, dst: Allocation, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
             src_offset: int = 0) -> None:
        d = _live(dst, "Stream.copy", self.device)
        s = _live(src, "Stream.copy", self.device)
        so, do, n = device_span(dst, src, nbytes, dst_offset, src_offset, _KIND)
        self.synchronize()
        self._memmove(d + do, s + so, n)

    def fill(self, dst: Allocation, value: int, nbytes: int | None = None, offset: int = 0, *,
             width: int = 1) -> None:
        # Host memory: the pattern is written by the CPU, after the graphs queued before it.
        d = _live(dst, "Stream.fill", self.device)
        v, w = fill_pattern(value, width, "Stream.fill", _KIND)
        o, n = check_span(dst.nbytes, offset, nbytes, "dst", "Stream.fill", _KIND, width=w)
        self.synchronize()
        ffi = self.api.ffi
        ffi.buffer(ffi.cast("char *", d) + o, n)[:] = v.to_bytes(w, "little") * (n // w)

    # launches
    def launch(self, launch: Any) -> None:
        # Execute a graph: ``KernelLaunch(kernel, LaunchDims(), (inputs..., outputs...))``, checked (argument
        # count and kinds, each buffer's size against its tensor's bytes (HTP does not check them), a typed
        # argument's element type against its tensor's (an imported tensor, ``Device.from_dlpack``, carries one; raw
        # memory from ``Device.alloc`` or the pool is bytes and binds by size), freed allocations, the device) before
        # any C call.
        try:
            kernel, dims, args = launch
        except (TypeError, ValueError):
            raise not_a_launch(launch, "Stream.launch") from None
        if type(kernel) is not QnnKernel:
            raise Error(ErrorKind.INVALID_VALUE, f"Stream.launch: not a QNN graph kernel: {kernel!r:.80}",
                        backend=_NAME, function="Stream.launch")
        if dims is not _DEFAULT_DIMS and dims != _DEFAULT_DIMS:
            raise _dims_error(dims, "Stream.launch")
        device = self.device
        if device._closed:
            raise device._closed_error("Stream.launch")
        if kernel.module.device is not device:
            raise Error(ErrorKind.INVALID_VALUE, f"Stream.launch: {kernel!r} belongs to another device than "
                        f"{self!r}", backend=_NAME, function="Stream.launch")
        lock = kernel._lock
        lock.acquire()
        try:
            if args is not kernel._bound and not _same(args, kernel._bound):
                err = kernel._bind(args, device, "Stream.launch")
                if err is not None:
                    raise err
            else:
                for a in kernel._blocks:
                    if a._freed:
                        raise _freed(a, "Stream.launch")
            code = self._run(kernel)
        finally:
            lock.release()
        if code:
            raise self.api.error(code, "QnnGraph_execute", f"graph {kernel.name!r}")

    def launch_unchecked(self, launch: Any) -> Result[None]:
        # ``launch`` returning the Error instead of raising it, without the LaunchDims, device and size checks
        # on a rebind (a freed allocation is still refused: its memory may be gone).
        what = "Stream.launch_unchecked"
        try:
            kernel, dims, args = launch
        except (TypeError, ValueError):
            raise not_a_launch(launch, what) from None
        if type(kernel) is not QnnKernel:
            return Error(ErrorKind.INVALID_VALUE, f"{what}: not a QNN graph kernel: {kernel!r:.80}", backend=_NAME,
                         function=what)
        if dims is not _DEFAULT_DIMS and dims != _DEFAULT_DIMS:  # never silently dropped
            return _dims_error(dims, what)
        if self.device._closed:  # (a flag test: the rebind below would catch it, a repeated launch would not)
            return self.device._closed_error(what)
        lock = kernel._lock
        lock.acquire()
        try:
            if args is not kernel._bound and not _same(args, kernel._bound):
                err: Error | None = kernel._bind(args, self.device, "Stream.launch_unchecked")
                if err is not None:
                    return err
            else:
                for a in kernel._blocks:
                    if a._freed:
                        return _freed(a, "Stream.launch_unchecked")
            code = self._run(kernel)
        finally:
            lock.release()
        return self.api.error(code, "QnnGraph_execute", f"graph {kernel.name!r}") if code else None

    def _run(self, kernel: QnnKernel) -> int:
        backend = self.device.backend
        if backend.async_execute is False:
            return int(kernel._execute(kernel.handle, kernel._ins, kernel._nin, kernel._outs, kernel._nout,
                                       kernel._null, kernel._null))
        return self._run_async(kernel)

    def _run_async(self, kernel: QnnKernel) -> int:
        """``QnnGraph_executeAsync`` (tried once per backend; NOT_SUPPORTED -> synchronous from then on).  The
        asynchronous path has never run: the x86 HTP answers 1000."""
        backend = self.device.backend
        api = self.api
        if self._notify is None:
            self._notify = api.ffi.callback("Qnn_NotifyFn_t", self._done)
        with self._cond:
            self._pending += 1
        # the first try is a probe: its refusal is logged at DEBUG
        with qnn_log.probing("for QnnGraph_executeAsync") if backend.async_execute is None else nullcontext():
            code = api.raw.QnnGraph_executeAsync(kernel.handle, kernel._ins, kernel._nin, kernel._outs, kernel._nout,
                                                 api.null, api.null, self._notify, api.null)
        if code:
            with self._cond:
                self._pending -= 1
            if code & 0xFFFF == _NOT_SUPPORTED and backend.async_execute is None:
                backend.async_execute = False
                return int(kernel._execute(kernel.handle, kernel._ins, kernel._nin, kernel._outs, kernel._nout,
                                           kernel._null, kernel._null))
            return int(code)
        backend.async_execute = True
        return 0

    def _done(self, param: Any, status: Any) -> None:
        code = int(status.error)
        with self._cond:
            self._pending -= 1
            if code and self._async_error is None:
                self._async_error = self.api.error(code, "QnnGraph_executeAsync", "(reported by its notification)")
            self._cond.notify_all()

    # ordering (synchronous execution: everything enqueued is complete)
    def record_event(self) -> QnnEvent:
        # An event at this point: the stream is synchronized, then the **host clock** is read.
        self.device._check_open("Stream.record_event")
        self.synchronize()
        return QnnEvent(self.device, time.perf_counter_ns())

    def wait_event(self, event: Event) -> None:
        # Events are recorded after the work before them completed: nothing to wait for.
        self.device._check_open("Stream.wait_event")
        if not isinstance(event, QnnEvent):
            raise Error(ErrorKind.INVALID_VALUE, "Stream.wait_event needs a QNN event", backend=_NAME,
                        function="Stream.wait_event")

    def synchronize(self) -> None:
        if self._pending:
            with self._cond:
                while self._pending:
                    self._cond.wait()
        err = self._async_error
        if err is not None:
            self._async_error = None
            raise err
        self._check_callback_waits("Stream.synchronize")

    def query(self) -> bool:
        self.device._check_open("Stream.query")
        return self._pending == 0


def _dims_error(dims: Any, what: str) -> Error:
    """The refusal of launch dimensions other than ``LaunchDims()``: launch options and ``shared_mem``
    UNSUPPORTED (as on every backend that cannot honour them), any other geometry INVALID_VALUE."""
    if isinstance(dims, LaunchDims):
        if dims.cooperative or dims.cluster is not None:
            return dims.options_error(_NAME, what)
        if dims.shared_mem and dims.grid == (1, 1, 1) and dims.block == (1, 1, 1):
            return shared_mem_error(_NAME, what, dims.shared_mem)
    return Error(ErrorKind.INVALID_VALUE, f"{what}: a QNN graph has no launch geometry; pass LaunchDims() (grid 1, "
                 f"block 1, no shared memory), not {dims!r:.120}", backend=_NAME, function=what)


def _same(args: tuple[Any, ...], bound: tuple[Any, ...] | None) -> bool:
    if bound is None or len(args) != len(bound):
        return False
    for a, b in zip(args, bound):
        if a is not b:
            return False
    return True


def _freed(a: Allocation, function: str) -> Error:
    return Error(ErrorKind.INVALID_HANDLE, f"{function}: {a!r} was freed", backend=_NAME, function=function)


class QnnEvent(Event):
    """A point in a stream, as a **host clock** reading (``time.perf_counter_ns``) taken after the work before
    it completed; always complete."""

    def __init__(self, device: QnnDevice, t_ns: int) -> None:
        self.device = device
        self.t_ns = t_ns

    def synchronize(self) -> None:
        self.device._check_open("Event.synchronize")

    def query(self) -> bool:
        self.device._check_open("Event.query")
        return True

    def elapsed_ms(self, end: Event) -> float:
        # Host wall time from this event to ``end``, in milliseconds.
        if not isinstance(end, QnnEvent):
            raise Error(ErrorKind.INVALID_VALUE, "Event.elapsed_ms needs another QNN event", backend=_NAME,
                        function="Event.elapsed_ms")
        return (end.t_ns - self.t_ns) / 1e6


__all__ = ["QnnAllocation", "QnnBackend", "QnnDevice", "QnnEvent", "QnnKernel", "QnnModule", "QnnStream",
           "QnnTables", "TensorInfo", "check_config_layout"]
