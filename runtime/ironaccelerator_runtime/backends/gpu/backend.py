"""The backend: :class:`GpuBackend`, a vendor's devices in its order."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, ClassVar, Sequence

from ironaccelerator._core import CapabilityFlags, ErrorKind
from ironaccelerator_runtime.backends.gpu.api import GpuApi
from ironaccelerator_runtime.backends.gpu.compile import compile_source, compiler_version
from ironaccelerator_runtime.backends.gpu.device import GpuDevice
from ironaccelerator_runtime.backends.gpu.tables import GpuTables
from ironaccelerator_runtime.errors import Error, fail
from ironaccelerator_runtime.traits import Backend, DeviceDescriptor, DeviceId, DeviceLimits


_API_LOCK = threading.Lock()  # GpuBackend.vendor_api: one GpuApi per backend class


class GpuBackend(Backend):
    """A GPU vendor's backend: every device, in the vendor's order.  A vendor's subclass (generated) sets
    ``tables`` (its spec's :class:`GpuTables`) and ``device_class``; ``kind`` follows from the tables."""

    tables: ClassVar[GpuTables]
    device_class: ClassVar[type[GpuDevice]]
    _API: ClassVar[GpuApi | None] = None  # per subclass: vendor_api()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "tables" in cls.__dict__:
            cls.kind = cls.tables.kind
            cls._API = None

    @classmethod
    def vendor_api(cls) -> GpuApi:
        """The vendor's bound functions, made once (binding loads no library)."""
        api = cls._API
        if api is None:
            with _API_LOCK:
                api = cls._API
                if api is None:
                    api = cls._API = GpuApi(cls.tables)
        return api

    @classmethod
    def _operations_lacking(cls) -> frozenset[str]:
        """The operations the Gpu classes implement that this vendor's spec leaves out, so that they raise
        ``UNSUPPORTED`` here: a null function role, an interop protocol the spec does not list (what
        ``Backend.supports`` subtracts; see :mod:`ironaccelerator_runtime.operations`)."""
        tables = getattr(cls, "tables", None)
        if tables is None:
            return frozenset()
        fn = tables.functions
        out = [op for op, roles in (("Device.import_ipc", ("ipc_open",)), ("Allocation.export_ipc", ("ipc_get",)),
                                    ("Stream.copy_2d", ("memcpy_2d",)), ("Stream.copy_3d", ("memcpy_3d",)),
                                    ("Stream.prefetch", ("prefetch", "prefetch_location")))
               if all(fn.get(r) is None for r in roles)]
        if "cuda_array_interface" not in tables.interop:
            out.append("Device.from_cuda_array_interface")
        return frozenset(out)

    @classmethod
    def compile_source(cls, source: str | bytes, arch: str, options: Sequence[str] = (), *, binary: bool = False,
                       name: str = "ironaccelerator.cu") -> bytes:
        """:func:`compile_source` with this vendor's compiler."""
        return compile_source(cls.vendor_api(), source, arch, options, binary=binary, name=name)

    @classmethod
    def compiler_version(cls) -> tuple[int, int]:
        """:func:`compiler_version` of this vendor's compiler."""
        return compiler_version(cls.vendor_api())

    def __init__(self) -> None:
        api = self.vendor_api()
        api.require("device_count")  # LIBRARY_NOT_FOUND (with the files tried) when the library does not load
        self.api = api
        self._devices: list[tuple[Any, DeviceDescriptor, str]] | None = None
        self._no_device: Error | None = None
        self._lock = threading.RLock()

    def versions(self) -> dict[str, Any]:
        """The driver (and runtime) versions as the vendor encodes them: ``{"driver": 13000, "runtime": ...}``.

        Returns:
            ``{"driver": int}`` plus ``"runtime"`` where the vendor has a separate runtime (HIP); CUDA encodes
            ``1000 * major + 10 * minor``.

        Raises:
            Error: the vendor's error where a version query fails.

        Backends:
            CUDA (``cuDriverGetVersion``), HIP (``hipDriverGetVersion``, ``hipRuntimeGetVersion``).
        """
        out: dict[str, Any] = {"driver": self.driver_version()}
        rt = self.runtime_version()
        if rt is not None:
            out["runtime"] = rt
        return out

    def driver_version(self) -> int:
        """The vendor's ``driver_version``."""
        out = self.api.ffi.new("int *")
        self.api.check(self.api.driver_version(out), "driver_version")
        return int(out[0])

    def runtime_version(self) -> int | None:
        """The vendor's ``runtime_version``; None where it has no separate runtime."""
        if self.api.runtime_version is None:
            return None
        out = self.api.ffi.new("int *")
        self.api.check(self.api.runtime_version(out), "runtime_version")
        return int(out[0])

    def _attr(self, attr: int, dev: Any) -> int:
        out = self.api.ffi.new("int *")
        self.api.check(self.api.device_attribute(out, attr, dev), "device_attribute")
        return int(out[0])

    def _enumerate(self) -> list[tuple[Any, DeviceDescriptor, str]]:
        with self._lock:
            if self._devices is not None:
                return self._devices
            api, ffi = self.api, self.api.ffi
            no_device = self.tables.const("status_no_device")
            if api.init is not None:
                code = api.init(0)
                if code == no_device:
                    self._no_device = api.error(code, "init")
                    self._devices = []
                    return self._devices
                api.check(code, "init")
            n = ffi.new("int *")
            code = api.device_count(n)
            if code == no_device:  # a loaded library with no device: zero devices, not a failure
                self._no_device = api.error(code, "device_count")
                self._devices = []
                return self._devices
            api.check(code, "device_count")
            found = []
            for i in range(int(n[0])):
                h = ffi.new(self.tables.types["device"] + " *")
                api.check(api.device_get(h, i), "device_get")
                found.append((h[0], *self._describe(i, h[0])))
            self._devices = found
            return found

    def _arch(self, index: int, dev: Any) -> str:
        """The device's architecture: the properties struct's ``arch_field`` where the vendor has
        ``device_properties``, else the compute capability ``"X.Y"`` from two attributes."""
        api, ffi, tables = self.api, self.api.ffi, self.tables
        if api.device_properties is None:
            return f"{self._attr(tables.const('attr_compute_major'), dev)}.{self._attr(tables.const('attr_compute_minor'), dev)}"
        properties = tables.types["properties"]
        # oversized: a runtime newer than the headers may write a larger struct
        buf = ffi.new("char[]", max(ffi.sizeof(properties), 1 << 13))
        props = ffi.cast(properties + " *", buf)
        code = api.device_properties(props, index)
        if code:
            return "unknown"  # ex) a runtime that no longer exports this layout: capabilities from the name only
        return str(ffi.string(getattr(props, tables.arch_field or "")).decode("utf-8", "replace"))

    def _describe(self, index: int, dev: Any) -> tuple[DeviceDescriptor, str]:
        api, ffi, tables = self.api, self.api.ffi, self.tables
        c = tables.const
        buf = ffi.new("char[256]")
        api.check(api.device_name(buf, 256, dev), "device_name")
        name = ffi.string(buf).decode("utf-8", "replace")
        total = ffi.new("size_t *")
        api.check(api.device_total_mem(total, dev), "device_total_mem")
        integrated = bool(self._attr(c("attr_integrated"), dev))
        arch = self._arch(index, dev)
        max_grid = (self._attr(c("attr_max_grid_x"), dev), self._attr(c("attr_max_grid_y"), dev),
                    self._attr(c("attr_max_grid_z"), dev))
        max_threads = self._attr(c("attr_max_threads_per_block"), dev)
        limits = DeviceLimits(
            max_block=(self._attr(c("attr_max_block_x"), dev), self._attr(c("attr_max_block_y"), dev),
                       self._attr(c("attr_max_block_z"), dev)),
            max_threads_per_block=max_threads,
            max_grid=max_grid,
            max_shared_mem=self._attr(c("attr_max_shared_mem"), dev),
            # the driver reports no largest single allocation: the device's memory bounds it
            max_alloc=int(total[0]) or None,
            max_work_items=min(max_grid[0] * max_grid[1] * max_grid[2] * max_threads, 2**64 - 1),
        )
        capability = tables.capability(arch, name, integrated)
        if api.launch_ex is not None:  # launch options: advertised where the device says it can (not by arch)
            extra = CapabilityFlags.NONE
            for role, flag in (("attr_cooperative_launch", CapabilityFlags.COOPERATIVE_LAUNCH),
                               ("attr_cluster_launch", CapabilityFlags.THREAD_BLOCK_CLUSTERS)):
                out = ffi.new("int *")
                if api.device_attribute(out, c(role), dev) == 0 and out[0]:  # (an older driver: unknown, so not)
                    extra |= flag
            capability = dataclasses.replace(capability, flags=capability.flags | extra)
        desc = DeviceDescriptor(
            id=DeviceId(self.kind, index), name=name, vendor=tables.vendor(name), backend=self.kind,
            total_memory=int(total[0]), compute_units=self._attr(c("attr_compute_units"), dev),
            capability=capability, limits=limits,
        )
        return desc, arch

    def devices(self) -> list[DeviceDescriptor]:
        return [desc for _, desc, _ in self._enumerate()]

    def open(self, device_id: DeviceId | int = 0) -> GpuDevice:
        index = self._index(device_id)
        devs = self._enumerate()
        backend = self.tables.name
        if not devs:
            why = f": {self._no_device}" if self._no_device is not None else ""
            raise fail(ErrorKind.NO_DEVICE, "Backend.open", f"no {backend} device found{why}", backend)
        if not 0 <= index < len(devs):
            raise fail(ErrorKind.INVALID_VALUE, "Backend.open",
                       f"{backend} device {index} does not exist ({len(devs)} found)", backend)
        handle, desc, arch = devs[index]
        return self.device_class(self, index, handle, desc, arch)
