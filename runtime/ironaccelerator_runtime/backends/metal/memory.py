"""Metal allocations (``MTLBuffer``: private or shared storage) and the buffer a launch argument or copy names."""

from __future__ import annotations

from typing import Any

from ironaccelerator._core import ErrorKind, MemoryKind
from ironaccelerator_runtime.errors import Error, fail
from ironaccelerator_runtime.kernel_args import buffer_error, where
from ironaccelerator_runtime.traits import Allocation, AllocationSlice, PooledAllocation, Result

from .device import MetalDevice
from .tables import _NAME


class MetalAllocation(Allocation):
    """An ``MTLBuffer`` (private storage for DEVICE, shared for UNIFIED).  ``_bid``: its ``id`` (raw), whose
    reference (the +1 of ``newBufferWithLength:options:``) the allocation owns: released by ``free`` or on drop.
    ``buffer``: a checked ``MTLBuffer`` handle of it, made on first use (with a reference of its own), closed by
    ``free``.

    The fields the alloc/free hot path reads and writes are slots (set by ``__init__``, or inline by
    ``MetalDevice.alloc``), so none of them is looked up through the class as a default (issue 27 item 4)."""

    __slots__ = ("device", "nbytes", "kind", "_bid", "_freed", "_views", "_buffer")
    device: MetalDevice
    _tracked = True  # (every Metal allocation: released on drop unless freed)
    _buffer: Any

    def __init__(self, device: MetalDevice, handle: Any, nbytes: int, kind: MemoryKind) -> None:
        self.device = device
        self.nbytes = nbytes
        self.kind = kind
        self._bid = handle
        self._freed = False
        self._views = None
        self._buffer = None

    def __del__(self) -> None:  # a freed allocation (the usual drop) costs one slot test
        if not self._freed and self._tracked:
            Allocation.__del__(self)

    @property
    def buffer(self) -> Any:
        """The checked ``MTLBuffer`` handle (``ironaccelerator.backends.metal.metal.MTLBuffer``) of the
        allocation, made on first use; closed (``INVALID_HANDLE`` on use) once the allocation is freed."""
        b = self._buffer
        if b is None:
            a = self.device.api
            if self._freed:
                b = a.b.wrap_as(a.NULL, a.M.MTLBuffer)  # (closed)
            else:
                b = self._buffer = a.b.wrap_as(a.retain(self._bid), a.M.MTLBuffer)
        return b

    def _release(self) -> Error | None:
        # a command buffer that uses the buffer holds its own reference (Metal retains a command's resources)
        self.device._release(self._bid)
        if self._buffer is not None:
            self._buffer.close()
        return None

    def free(self) -> None:
        if self._freed or self._views is not None or self._buffer is not None:  # (the base's checks and errors)
            return Allocation.free(self)
        self._freed = True
        self.device._release(self._bid)
        return None

    def free_unchecked(self) -> Result[None]:
        if self._freed or self._views is not None or self._buffer is not None:
            return Allocation.free_unchecked(self)
        self._freed = True
        self.device._release(self._bid)
        return None

    def _host_address(self) -> int | None:
        """Shared storage (UNIFIED): its ``contents``; private storage has no host address."""
        if self.kind is not MemoryKind.UNIFIED:
            return None
        a = self.device.api
        return int(a.ffi.cast("uintptr_t", a.U.MTLBuffer_contents(self._bid)))

    def _slice(self, offset: int, nbytes: int) -> Allocation:
        """The same ``MTLBuffer`` at an offset: kernels get it through ``setBuffer:offset:atIndex:``, blits through
        their offsets."""
        return AllocationSlice(self, offset, nbytes)


def _buffer_of(x: Any, device: MetalDevice, what: str) -> tuple[Any, int]:
    """The raw ``id`` of an allocation argument of ``device`` and the offset of its bytes in it (a slice's):
    INVALID_HANDLE if freed, INVALID_VALUE if an allocation of another device, TypeError if not an allocation."""
    if isinstance(x, (MetalAllocation, PooledAllocation)) and x.device is device:
        if x._freed or (type(x) is PooledAllocation and x.block._freed):
            raise fail(ErrorKind.INVALID_HANDLE, what, f"{x!r} was freed", _NAME)
        return x._bid, 0
    if type(x) is AllocationSlice and isinstance(x.parent, MetalAllocation) and x.device is device:
        if x._freed:
            raise fail(ErrorKind.INVALID_HANDLE, what, f"the allocation of {x!r} was freed", _NAME)
        return x.parent._bid, x.offset
    if isinstance(x, Allocation):
        raise fail(ErrorKind.INVALID_VALUE, what, f"{x!r} is not an allocation of {device.descriptor.id}", _NAME)
    raise TypeError(f"{what}: expected a Metal Allocation, not {type(x).__name__}")  # (as on every backend)


def _arg_buffer(x: Any, device: MetalDevice, i: int, kernel: str, what: str) -> tuple[Any, int]:
    """``_buffer_of`` for argument ``i`` of a launch: the policy's errors (kernel_args) naming the argument."""
    t = type(x)
    if (t is MetalAllocation or t is PooledAllocation or t is AllocationSlice) and x.device is device:
        return _buffer_of(x, device, what)
    raise buffer_error(where(i, kernel), x, _NAME, what)
