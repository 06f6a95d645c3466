"""The OpenCL backend's capability tables (:class:`OpenCLTables`, spec data) and the loaded binding (``_Api``:
the generated ``ironaccelerator.backends.opencl.cl``, its error table and its query helpers)."""

from __future__ import annotations

from typing import Any

from ironaccelerator._core import BackendKind, CapabilityFlags, ComputeTier, Vendor
from ironaccelerator_runtime.capability_match import MATCHERS
from ironaccelerator_runtime.errors import Error
from ironaccelerator_runtime.loader import Binding, load_library
from ironaccelerator_runtime.records import record
from ironaccelerator_runtime.traits import Capability
from ironaccelerator_runtime.vendors import VendorTable


_KIND = BackendKind.OPENCL
_BUILD_OPTIONS = b"-cl-kernel-arg-info"
_PLATFORM_NOT_FOUND_KHR = -1001  # cl_ext.h: what the ICD loader returns when no platform is installed
_MATCH = MATCHERS["exact"]  # the capability-key grammar specs/opencl/backend.yaml chooses (capabilities.match)


@record()
class OpenCLTables(VendorTable):
    """Capability translation, as spec data: extension (or ``always`` / ``host_unified_memory``) -> flags,
    device type (``CPU``, ``GPU``, ``GPU+host_unified_memory``, ``ACCELERATOR``, ``CUSTOM``) -> tier, and
    (substring, vendor) pairs tried in order (:meth:`VendorTable.vendor`: the device's vendor string, its platform
    first — PoCL's CPU device reports its processor's maker, "AuthenticAMD", but is PoCL's device)."""

    flags: dict[str, CapabilityFlags]
    tiers: dict[str, ComputeTier]
    vendors: tuple[tuple[str, Vendor], ...]

    def __init__(self, flags: dict[str, CapabilityFlags], tiers: dict[str, ComputeTier],
                 vendors: tuple[tuple[str, Vendor], ...]) -> None:
        d = self.__dict__  # (frozen: set past the frozen __setattr__)
        d["flags"] = flags
        d["tiers"] = tiers
        d["vendors"] = vendors

    def capability(self, extensions: str, device_type: int, host_unified: bool, c_version: str,
                   cl: Any) -> Capability:
        """Device facts -> Capability, by the tables (unit-testable without a device)."""
        flags = _MATCH.flags(self.flags, frozenset(extensions.split()), self.flags.get("always", CapabilityFlags.NONE))
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
        tier = _MATCH.tier(self.tiers, key)
        return Capability(flags=flags, tier=tier if tier is not None else ComputeTier.DISCRETE,
                          vendor_version=c_version)


class _Api:
    """The loaded bindings plus the error factory, resolved once."""

    def __init__(self) -> None:
        cl, BINDING = load_library("ironaccelerator.backends.opencl.cl", "clGetPlatformIDs",
                                   "OpenCL library not found")
        self.cl = cl
        self.ffi = cl.ffi
        from . import args  # (args imports this module)
        args._CData = cl.ffi.CData
        self.raw = cl.unchecked
        self.binding: Binding = BINDING

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
