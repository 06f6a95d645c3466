"""Metal allocations (``MTLBuffer``: private or shared storage) and the buffer a launch argument or copy names."""

from __future__ import annotations

from typing import Any

from ironaccelerator._core import ErrorKind, MemoryKind
from ironaccelerator_runtime import tracing
from ironaccelerator_runtime.errors import Error, fail
from ironaccelerator_runtime.traits.checks import foreign
from ironaccelerator_runtime.kernel_args import buffer_error, where
from ironaccelerator_runtime.traits import Allocation, AllocationSlice, PooledAllocation, Result
from ironaccelerator_runtime.traits.memory import compiled_allocation_class

from .device import MetalDevice
from .tables import _NAME


class _MetalMemory(Allocation):
    """What every Metal allocation does, the Python :class:`MetalAllocation` and the compiled one alike: ``_handle``
    is the ``MTLBuffer``'s ``id`` (raw; the compiled class keeps the address and makes this cdata on first read),
    whose reference (the +1 of ``newBufferWithLength:options:``) the allocation owns, released by ``free`` or on
    drop; ``_export`` the checked handle ``buffer`` made on first use."""

    device: MetalDevice
    _handle: Any
    _export: Any

    @property
    def buffer(self) -> Any:
        """The checked ``MTLBuffer`` handle (``ironaccelerator.backends.metal.metal.MTLBuffer``) of the
        allocation, made on first use; closed (``INVALID_HANDLE`` on use) once the allocation is freed."""
        b = self._export
        if b is None:
            a = self.device.api
            if self._freed:
                b = a.b.wrap_as(a.NULL, a.M.MTLBuffer)  # (closed)
            else:
                b = self._export = a.b.wrap_as(a.retain(self._handle), a.M.MTLBuffer)
        return b

    def _release(self) -> Error | None:
        # a command buffer that uses the buffer holds its own reference (Metal retains a command's resources)
        self.device._release(self._handle)
        if self._export is not None:
            self._export.close()
        return None

    def _host_address(self) -> int | None:
        """Shared storage (UNIFIED): its ``contents``; private storage has no host address."""
        if self.kind is not MemoryKind.UNIFIED:
            return None
        a = self.device.api
        return int(a.ffi.cast("uintptr_t", a.U.MTLBuffer_contents(self._handle)))

    def _slice(self, offset: int, nbytes: int) -> Allocation:
        """The same ``MTLBuffer`` at an offset: kernels get it through ``setBuffer:offset:atIndex:``, blits through
        their offsets."""
        return AllocationSlice(self, offset, nbytes)


class MetalAllocation(_MetalMemory):
    """An ``MTLBuffer`` (private storage for DEVICE, shared for UNIFIED): see :class:`_MetalMemory`.

    In API mode ``Device.alloc`` makes the compiled class of the same name instead (:func:`handle_allocation_class`:
    allocated and released from C); this one remains for ABI mode and ``IRONACCEL_TRACE``.  The fields the
    alloc/free hot path reads and writes are slots (set by ``__init__``, or inline by ``MetalDevice.alloc``), so
    none of them is looked up through the class as a default (issue 27 item 4)."""

    __slots__ = ("device", "nbytes", "kind", "_handle", "_freed", "_views", "_export")
    device: MetalDevice
    _tracked = True  # (every Metal allocation: released on drop unless freed)

    def __init__(self, device: MetalDevice, handle: Any, nbytes: int, kind: MemoryKind) -> None:
        self.device = device
        self.nbytes = nbytes
        self.kind = kind
        self._handle = handle
        self._freed = False
        self._views = None
        self._export = None

    def __del__(self) -> None:  # a freed allocation (the usual drop) costs one slot test
        if not self._freed and self._tracked:
            Allocation.__del__(self)

    def free(self) -> None:
        if self._freed or self._views is not None or self._export is not None:  # (the base's checks and errors)
            return Allocation.free(self)
        self._freed = True
        self.device._release(self._handle)
        return None

    def free_unchecked(self) -> Result[None]:
        if self._freed or self._views is not None or self._export is not None:
            return Allocation.free_unchecked(self)
        self._freed = True
        self.device._release(self._handle)
        return None


_BLOCKS: set[type] = {MetalAllocation}  # the classes of Metal allocations (with the compiled one, once made)
_COMPILED: dict[Any, type | None] = {}  # per _objc_fast module: the compiled allocation class, or None


def handle_allocation_class(fast: Any) -> type | None:
    """The compiled Metal allocation class over ``fast._HandleMemory`` (ia_handle_memory.h: made by the allocators
    of ``_objc_fast._handle_allocator``, which send ``newBufferWithLength:options:`` from C, and freed from C;
    ``_handle_memory_setup`` once), named ``MetalAllocation``; its ``_handle`` (the ``id`` cdata) is made on first
    read.  None where ``fast`` has none (ABI mode, a free-threaded build) and under ``IRONACCEL_TRACE`` (the C
    would send unlogged): the Python class then."""
    if tracing.ENABLED:
        return None

    def make(base: Any) -> type:
        class Compiled(base, _MetalMemory):  # type: ignore[misc]
            pass

        _BLOCKS.add(Compiled)
        return Compiled

    return compiled_allocation_class(fast, "_handle_memory_setup", MetalAllocation, _COMPILED, make)


def _buffer_of(x: Any, device: MetalDevice, what: str) -> tuple[Any, int]:
    """The raw ``id`` of an allocation argument of ``device`` and the offset of its bytes in it (a slice's):
    INVALID_HANDLE if freed, INVALID_VALUE if an allocation of another device, TypeError if not an allocation."""
    if isinstance(x, (_MetalMemory, PooledAllocation)) and x.device is device:
        if x._freed or (type(x) is PooledAllocation and x.block._freed):
            raise fail(ErrorKind.INVALID_HANDLE, what, f"{x!r} was freed", _NAME)
        return x._handle, 0
    if type(x) is AllocationSlice and isinstance(x.parent, _MetalMemory) and x.device is device:
        if x._freed:
            raise fail(ErrorKind.INVALID_HANDLE, what, f"the allocation of {x!r} was freed", _NAME)
        return x.parent._handle, x.offset
    if isinstance(x, Allocation):
        raise foreign(x.device, what, f"{x!r} is not an allocation of {device.descriptor.id}", _NAME)
    raise TypeError(f"{what}: expected a Metal Allocation, not {type(x).__name__}")  # (as on every backend)


def _arg_buffer(x: Any, device: MetalDevice, i: int, kernel: str, what: str) -> tuple[Any, int]:
    """``_buffer_of`` for argument ``i`` of a launch: the policy's errors (kernel_args) naming the argument."""
    t = type(x)
    if (t in _BLOCKS or t is PooledAllocation or t is AllocationSlice) and x.device is device:
        return _buffer_of(x, device, what)
    raise buffer_error(where(i, kernel), x, _NAME, what)
