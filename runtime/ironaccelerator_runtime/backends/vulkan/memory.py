"""Vulkan allocations: a ``VkBuffer`` bound to its own ``VkDeviceMemory`` (mapped where host-visible), their slices
(a buffer and an offset) and their release (deferred while submitted work uses them)."""

from __future__ import annotations

import itertools
from typing import Any

from ironaccelerator._core import MemoryKind
from ironaccelerator_runtime.errors import Error
from ironaccelerator_runtime.traits import Allocation, AllocationSlice

from .device import VulkanDevice


_SERIALS = itertools.count(1)


def _serial(a: VulkanAllocation) -> int:
    """Give ``a`` its serial (the descriptor-set cache's key), on its first use as a kernel argument."""
    a._serial = key = next(_SERIALS)
    return key


def _free_buffer(api: Any, device: Any, buf: Any, mem: Any) -> None:
    api.raw.vkDestroyBuffer(device, buf, api.ffi.NULL)
    api.raw.vkFreeMemory(device, mem, api.ffi.NULL)


def release_buffer(owner: Any, buf: Any, mem: Any) -> None:
    """Free an allocation's buffer and memory, then give up its reference to the device."""
    _free_buffer(owner.api, owner.handle, buf, mem)
    owner.release()


class VulkanAllocation(Allocation):
    """A ``VkBuffer`` (usage: storage, transfer source and destination) with its own ``VkDeviceMemory``.

    ``buffer`` and ``memory`` are the handles; ``offset`` is 0 (a slice's is its start).  Host-visible kinds
    (``HOST_PINNED``, ``HOST``, ``UNIFIED``) stay mapped: ``host_view()`` is the memory itself, and a view's DLPack
    export is ``kDLCPU``.  ``DEVICE`` memory has no host view, even where the driver's memory is host-visible
    (lavapipe's is): the kind is what the caller asked for."""

    offset = 0
    _serial = 0  # (see _serial: never reused, unlike a VkBuffer handle)

    def __init__(self, device: VulkanDevice, buffer: Any, memory: Any, nbytes: int, kind: MemoryKind, ptr: Any,
                 tracked: bool = False) -> None:
        self.device = device
        self.buffer = buffer
        self.memory = memory
        self.nbytes = nbytes
        self.kind = kind
        self._ptr = ptr
        # the mapping's address where the memory is host-coherent and mapped (any kind: copies use it), else 0
        self._map = int(device.api.ffi.cast("uintptr_t", ptr)) if ptr is not None else 0
        if tracked:
            self._tracked = True

    device: VulkanDevice

    def _host_address(self) -> int | None:
        if self.kind is MemoryKind.DEVICE or not self._map:
            return None
        return self._map

    def _slice(self, offset: int, nbytes: int) -> Allocation:
        s: Any = AllocationSlice(self, offset, nbytes)
        s.buffer = self.buffer
        s.offset = offset
        s._map = self._map
        return s  # type: ignore[no-any-return]

    def _release(self) -> Error | None:
        device = self.device
        owner, buf, mem = device._owner, self.buffer, self.memory
        device._defer(lambda: release_buffer(owner, buf, mem))
        return None
