"""The QNN backend's tables (:class:`QnnTables`: spec data, the data types) and the loaded binding (``_Api``: the
generated ``ironaccelerator.backends.qnn.interface`` and ``.system``), with the owned-handle lifetime helpers."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, Callable

from ironaccelerator._core import BackendKind, CapabilityFlags, ComputeTier, DType, ErrorKind, Vendor
from ironaccelerator_runtime.capability_match import MATCHERS
from ironaccelerator_runtime.errors import Error, fail
from ironaccelerator_runtime.loader import load_library
from ironaccelerator_runtime.traits import Capability, LaunchDims, check_size
from ironaccelerator_runtime.vendors import VendorTable


_KIND = BackendKind.QNN
_NAME = "QNN"
_DEFAULT_DIMS = LaunchDims()
_NOT_SUPPORTED = 1000  # QNN_COMMON_ERROR_NOT_SUPPORTED
_RAW = 0  # QNN_TENSORMEMTYPE_RAW
_APP_WRITE, _APP_READ = 0, 1  # Qnn_TensorType_t of graph inputs / outputs
_HTP_CONFIG_SOC, _HTP_CONFIG_ARCH = 0, 1  # QnnHtpDevice_ConfigOption_t
_SAVER_BACKEND_ID = 2  # QnnInterface_t.backendId of libQnnSaver.so
_MAX_CLIENT_BUFFER = 2**32 - 1  # Qnn_ClientBuffer_t.dataSize is 32 bits
_MATCH = MATCHERS["hexagon_arch"]  # the capability-key grammar specs/qnn/backend.yaml chooses (capabilities.match)

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
class QnnTables(VendorTable):
    """Capability translation, as spec data: HTP architecture (an int, 68 for v68; or ``"always"``) -> flags,
    each a threshold (a device gets the flags of every key at or below its architecture); architecture (or
    ``"default"``) -> tier; (substring of the device name, vendor) pairs (:meth:`VendorTable.vendor`); SoC name -> (SoC model number, architecture)."""

    flags: dict[Any, CapabilityFlags]
    tiers: dict[Any, ComputeTier]
    vendors: tuple[tuple[str, Vendor], ...]
    soc_models: dict[str, tuple[int, int]]

    def capability(self, arch: int, vendor_version: str) -> Capability:
        """An HTP architecture (68 for v68) -> Capability, by the tables (unit-testable without a device)."""
        flags = _MATCH.flags(self.flags, arch, self.flags.get("always", CapabilityFlags.NONE))
        tier = _MATCH.tier(self.tiers, arch)
        if tier is None:
            tier = self.tiers.get("default", ComputeTier.NPU)
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
                raise fail(ErrorKind.INVALID_VALUE, "Backend.open", f"unknown SoC {soc!r}; known: "
                           f"{', '.join(self.soc_models)} (or pass the SoC model number)", _KIND)
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



def check_config_layout(library: tuple[int, int], declared: tuple[int, int], offset: int) -> None:
    """Refuse to pass a ``QnnHtpDevice_CustomConfig_t`` to a library whose core API is older than the one the
    declarations describe (``declared``: the spec's QNN_API_VERSION_MAJOR/MINOR): the struct's layout changed
    (2.32-era libraries read the union at offset 4; the declarations put it at ``offset``), and a library that
    misreads it ignores the selection silently.  Another major version is refused too."""
    lmaj, lmin = library
    dmaj, dmin = declared
    if lmaj != dmaj or lmin < dmin:
        raise fail(ErrorKind.UNSUPPORTED, "QnnDevice_create", f"QnnHtpDevice_CustomConfig_t is declared for QNN core API {dmaj}.{dmin} "
                    f"(its union at offset {offset}); the loaded library implements core API {lmaj}.{lmin}, "
                    f"whose layout differs (2.32-era libraries read the union at offset 4): refusing to pass a "
                    "device config the library would misread (the SoC/architecture selection would be silently "
                    "ignored). Use a library of core API "
                    f"{dmaj}.{dmin} or later, or open the device without soc=/arch=", _KIND)


class _Api:
    """The loaded bindings, resolved once."""

    def __init__(self) -> None:
        q, BINDING = load_library("ironaccelerator.backends.qnn.interface", "QnnBackend_create",
                                  "QNN backend library not found")
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
            self._system, _ = load_library("ironaccelerator.backends.qnn.system", "QnnSystemContext_create",
                                           "libQnnSystem not found")
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
