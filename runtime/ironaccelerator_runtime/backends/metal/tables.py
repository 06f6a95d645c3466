"""The Metal backend's capability tables (:class:`MetalTables`, spec data) and the loaded binding (``api()``: the
generated ``ironaccelerator.backends.metal.metal``, loaded once per process)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

from ironaccelerator._core import BackendKind, CapabilityFlags, ComputeTier, Vendor
from ironaccelerator_runtime.capability_match import MATCHERS
from ironaccelerator_runtime.errors import Error
from ironaccelerator_runtime.loader import load_library
from ironaccelerator_runtime.traits import Capability
from ironaccelerator_runtime.vendors import VendorTable


_KIND = BackendKind.METAL
_NAME = "METAL"
_SHARED, _PRIVATE = 0, 32  # MTLResourceStorageModeShared / Private (MTLResourceOptions)
_COMPLETED, _ERROR = 4, 5  # MTLCommandBufferStatusCompleted / Error
_MAX_SET_BYTES = 4096  # setBytes:length:atIndex: is for data under 4 KiB (Apple's documentation)
_PRUNE = 64  # committed command buffers kept per stream before the completed ones are let go
_BATCH = 16  # launches encoded in one command buffer before it is committed (see MetalStream)
_MATCH = MATCHERS["gpu_family"]  # the capability-key grammar specs/metal/backend.yaml chooses (capabilities.match)


@dataclass(frozen=True)
class MetalTables(VendorTable):
    """Capability translation, as spec data: GPU family name (``"Apple7"``; or ``"always"``, ``"integrated"``: a
    device with unified memory) -> flags, a device getting those of every family it supports; ``(key, tier)`` in
    spec order, the first key the device matches giving its tier (``"default"`` otherwise); ``(substring of the
    device name, vendor)`` pairs and the spec's ``default``, APPLE (:meth:`VendorTable.vendor`); family name -> its
    ``MTLGPUFamily`` value."""

    flags: dict[str, CapabilityFlags]
    tiers: tuple[tuple[str, ComputeTier], ...]
    vendors: tuple[tuple[str, Vendor], ...]
    families: dict[str, int]

    def capability(self, supports: Callable[[int], bool] | set[str], unified: bool, vendor_version: str = "") \
            -> Capability:
        """The Capability of a device that supports the families ``supports`` answers for (a callable taking an
        ``MTLGPUFamily`` value, e.g. the device's ``supportsFamily_``, or a set of family names) and has unified
        memory or not; unit-testable without a device."""
        if isinstance(supports, set):
            names = supports
        else:
            names = {name for name, value in self.families.items() if supports(value)}
        flags = self.flags.get("always", CapabilityFlags.NONE)
        if unified:
            flags |= self.flags.get("integrated", CapabilityFlags.NONE)
        flags = _MATCH.flags(self.flags, names, flags)
        # the first tier key (in spec order) the device matches: a family it supports, "integrated", "default"
        selected = names | {"default"} | ({"integrated"} if unified else set())
        key = _MATCH.tier_key([k for k, _ in self.tiers], selected)
        tier = dict(self.tiers)[key] if key is not None else None
        if not vendor_version:
            vendor_version = "Metal " + (",".join(n for n in self.families if n in names) or "(no known family)")
        return Capability(flags=flags, tier=tier if tier is not None else ComputeTier.INTEGRATED,
                          vendor_version=vendor_version)


# ------------------------------------------------------------------ the binding


class _Api:
    """The generated Metal binding (checked classes ``M``, unchecked trampolines ``U``, its ObjcBinding ``b``) and
    the raw functions the hot paths send through."""

    def __init__(self) -> None:
        # the runtime and frameworks, loaded as a whole (LIBRARY_NOT_FOUND when they cannot be)
        M, BINDING = load_library("ironaccelerator.backends.metal.metal")
        self.M = M
        self.U = M.unchecked
        self.b = BINDING
        self.ffi = BINDING.ffi
        self.NULL = BINDING.ffi.NULL
        lib = BINDING.lib
        self.push, self.pop, self.release = lib.ia_objc_push, lib.ia_objc_pop, lib.ia_objc_release
        self.retain = self.U.NSObject_retain

    def cast(self, obj: Any, cls: type) -> Any:
        """A handle of a Metal protocol's class (the run-time class is private: ``_MTLDevice``, ``IASimDevice``):
        the checked methods of ``cls`` then apply (each still checks ``respondsToSelector``)."""
        if obj is not None:
            obj.__class__ = cls
        return obj

    def nsstring(self, text: str | bytes) -> Any:
        return self.M.NSString.stringWithUTF8String_(text)

    def utf8(self, s: Any) -> str:
        return "" if s is None else str(s.UTF8String())


_api_lock = threading.Lock()
_api: _Api | Error | None = None


def api() -> _Api:
    """The loaded binding (once per process); raises its Error when the runtime or a framework cannot be loaded."""
    global _api
    with _api_lock:
        if _api is None:
            try:
                _api = _Api()
            except Error as e:
                _api = e
        if isinstance(_api, Error):
            raise _api
        return _api
