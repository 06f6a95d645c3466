"""The Vulkan backend: the core surface over the generated ``ironaccelerator.backends.vulkan.vulkan``.

Devices are the loader's physical devices with a compute queue (one ``VkDevice`` and queue per opened device);
allocations ``VkBuffer`` + ``VkDeviceMemory``; streams command buffers submitted in batches, ordered by a timeline
semaphore; events timeline values with timestamp queries; modules SPIR-V (given, or compiled from GLSL by
glslangValidator through the kernel cache), reflected by :mod:`.spirv`; kernels compute pipelines whose
descriptor-set layout and push constants come from that reflection.

One module per concept: :mod:`.tables` (the capability tables and the loaded binding), :mod:`.device` (the backend
and its devices), :mod:`.memory` (allocations), :mod:`.stream` (streams and events), :mod:`.module` (modules and
kernels), :mod:`.spirv` (the SPIR-V reflector).
"""

from __future__ import annotations

from .tables import VulkanTables
from .device import VulkanBackend, VulkanDevice
from .memory import VulkanAllocation
from .stream import VulkanEvent, VulkanGraph, VulkanStream
from .module import VulkanKernel, VulkanModule

__all__ = ["VulkanAllocation", "VulkanBackend", "VulkanDevice", "VulkanEvent", "VulkanGraph", "VulkanKernel",
           "VulkanModule",
           "VulkanStream", "VulkanTables"]
