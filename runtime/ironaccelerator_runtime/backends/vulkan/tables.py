"""The Vulkan backend's capability tables (:class:`VulkanTables`, spec data) and the loaded binding (``_Api``: the
generated ``ironaccelerator.backends.vulkan.vulkan``, its error table and the raw functions)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ironaccelerator._core import BackendKind, CapabilityFlags, ComputeTier, Vendor
from ironaccelerator_runtime.capability_match import MATCHERS
from ironaccelerator_runtime.errors import Error
from ironaccelerator_runtime.loader import Binding, load_library
from ironaccelerator_runtime.traits import Capability
from ironaccelerator_runtime.vendors import VendorTable

_KIND = BackendKind.VULKAN
_MATCH = MATCHERS["exact"]  # specs/vulkan/backend.yaml: keys are extension / feature names, device types
API_VERSION = (1 << 22) | (2 << 12)  # Vulkan 1.2: timeline semaphores and hostQueryReset are core
VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
# VkPhysicalDeviceType -> the tier table's key
DEVICE_TYPES = {0: "OTHER", 1: "INTEGRATED_GPU", 2: "DISCRETE_GPU", 3: "VIRTUAL_GPU", 4: "CPU"}


def vendor_key(vendor_id: int) -> str:
    """The vendor table's key of a ``VkPhysicalDeviceProperties.vendorID`` (PCI id or Khronos vendor id):
    ``"vendorID 0x10de."``."""
    return f"vendorID 0x{vendor_id:x}."


@dataclass(frozen=True)
class VulkanTables(VendorTable):
    """Capability translation, as spec data: device extension or feature name (``shaderFloat64``,
    ``shaderInt64``, ``VK_KHR_shader_float16_int8``; ``always``) -> flags, ``VkPhysicalDeviceType`` name
    (``CPU``, ``INTEGRATED_GPU``, ``DISCRETE_GPU``, ``VIRTUAL_GPU``, ``OTHER``) -> tier, and
    (``vendorID 0x....``, vendor) pairs."""

    flags: dict[str, CapabilityFlags]
    tiers: dict[str, ComputeTier]
    vendors: tuple[tuple[str, Vendor], ...]

    def capability(self, features: frozenset[str], device_type: int, version: str) -> Capability:
        """Device facts -> Capability, by the tables (unit-testable without a device)."""
        flags = _MATCH.flags(self.flags, features, self.flags.get("always", CapabilityFlags.NONE))
        tier = _MATCH.tier(self.tiers, DEVICE_TYPES.get(device_type, "OTHER"))
        return Capability(flags=flags, tier=tier if tier is not None else ComputeTier.DISCRETE,
                          vendor_version=version)


class _Api:
    """The loaded binding plus the error factory, resolved once."""

    def __init__(self) -> None:
        vk, BINDING = load_library("ironaccelerator.backends.vulkan.vulkan", "vkCreateInstance",
                                   "the Vulkan loader (libvulkan.so.1) was not found")
        self.vk = vk
        self.ffi = vk.ffi
        self.raw = vk.unchecked
        self.binding: Binding = BINDING

    def error(self, code: int, function: str, detail: str = "") -> Error:
        return self.binding.error(code, self.binding.index[function], detail)

    def check(self, code: int, function: str, detail: str = "") -> None:
        if code < 0:
            raise self.error(code, function, detail)
