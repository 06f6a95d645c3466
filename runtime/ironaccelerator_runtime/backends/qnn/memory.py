"""QNN allocations: host memory bound as RAW client buffers, or registered shared memory (UNIFIED)."""

from __future__ import annotations

from typing import Any

from ironaccelerator._core import ErrorKind, MemoryKind
from ironaccelerator_runtime.errors import Error, fail
from ironaccelerator_runtime.traits.checks import foreign
from ironaccelerator_runtime.traits import Allocation, AllocationSlice, PooledAllocation, Result
from ironaccelerator_runtime.traits.memory import compiled_allocation_class

from .device import QnnDevice
from .tables import _NAME


# ---------------------------------------------------------------------------------------------------- memory


class _QnnMemory(Allocation):
    """What every QNN allocation is, the Python :class:`QnnAllocation` and the compiled one alike (host memory:
    a slice is an address moved by its offset)."""

    def _slice(self, offset: int, nbytes: int) -> Allocation:
        """Host memory: a slice is the client buffer's address moved by ``offset``."""
        return AllocationSlice(self, offset, nbytes)

    def _device_address(self) -> int | None:
        """Client buffers are host memory: a library takes their host address."""
        return self._host_address()


class QnnAllocation(_QnnMemory):
    """Host memory (``buffer``: a cffi ``uint8_t[]``), bound to graph tensors as a RAW client buffer.

    In API mode ``Device.alloc`` makes the compiled class of the same name instead (:func:`host_allocation_class`:
    the memory calloc'ed and freed in C); this one remains for ABI mode and imported memory
    (``Device.from_dlpack``).

    The fields the alloc/free hot path reads and writes are slots (set by ``__init__``, or inline by
    ``QnnDevice.alloc``), so none of them is looked up through the class as a default; ``buffer`` stays an
    instance attribute (the handle a pool allocation forwards).  Issue 27 item 4."""

    __slots__ = ("device", "nbytes", "kind", "_freed", "_tracked", "_views", "_foreign")
    device: QnnDevice
    _foreign: Any  # Device.from_dlpack: the imported tensor (dlpack.Imported) whose memory this is; else None

    def __init__(self, device: QnnDevice, buffer: Any, nbytes: int, kind: MemoryKind, tracked: bool = False) -> None:
        self.device = device
        self.buffer = buffer
        self.nbytes = nbytes
        self.kind = kind
        self._freed = False
        self._tracked = tracked
        self._views = None
        self._foreign = None

    def __del__(self) -> None:  # a freed allocation (the usual drop) costs one slot test
        if not self._freed and self._tracked:
            Allocation.__del__(self)

    def free(self) -> None:
        if self._freed or self._views is not None or self._foreign is not None:  # (the base's checks and errors)
            return Allocation.free(self)
        self._freed = True
        self.buffer = None  # (_release's: the memory goes with the last reference)
        return None

    def free_unchecked(self) -> Result[None]:
        if self._freed or self._views is not None or self._foreign is not None:
            return Allocation.free_unchecked(self)
        self._freed = True
        self.buffer = None
        return None

    def _host_address(self) -> int | None:
        """QNN client buffers are host memory, whatever the kind: every allocation has a host view."""
        return int(self.device.api.ffi.cast("uintptr_t", self.buffer))

    def _release(self) -> Error | None:
        self.buffer = None  # the memory goes with the last reference (a launch never binds a freed allocation)
        foreign = self._foreign
        if foreign is not None:  # imported memory: the producer's deleter, now
            self._foreign = None
            foreign.release()
        return None


_BLOCKS: set[type] = {QnnAllocation}  # the classes of QNN allocations (with the compiled one, once made)
_COMPILED: dict[Any, type | None] = {}  # per _fast module: the compiled allocation class, or None


def host_allocation_class(fast: Any, ffi: Any) -> type | None:
    """The compiled QNN allocation class over ``fast._HostMemory`` (ia_host_memory.h: calloc'ed memory, freed
    in C; ``_fast._host_memory_setup`` once), with the name ``QnnAllocation``; None where ``fast`` has none (ABI
    mode, a free-threaded build).  ``buffer`` is a cffi ``uint8_t[]`` over the memory, made on first use
    (``ffi.from_buffer`` of its ``_HostBlock``: it keeps the memory alive after ``free``, as a bound graph's client
    buffer must), None once freed."""
    from_buffer = ffi.from_buffer

    def make(base: Any) -> type:
        class Compiled(base, _QnnMemory):  # type: ignore[misc]
            _export: Any  # (the C type's slot: the buffer below, once made)
            _foreign = None  # (never imported memory: that is the Python QnnAllocation's)

            @property
            def buffer(self) -> Any:
                b = self._export
                if b is None and not self._freed:  # (made once: the memory's block, ia_host_memory.h, holds it)
                    b = self._export = from_buffer("uint8_t[]", self._block())
                return b

            def _host_address(self) -> int | None:
                return self.ptr or None

        _BLOCKS.add(Compiled)
        return Compiled

    return compiled_allocation_class(fast, "_host_memory_setup", QnnAllocation, _COMPILED, make)


def _live(a: Any, what: str, device: QnnDevice) -> Any:
    """The cffi buffer of a QNN allocation (pooled or not; a slice's: its allocation's, at the slice's offset) for
    use on ``device``: INVALID_HANDLE if freed or the device closed, INVALID_VALUE if another device's, TypeError
    if not an allocation."""
    t = type(a)
    offset = 0
    if t in _BLOCKS:
        block = a
    elif t is AllocationSlice and type(a.parent) in _BLOCKS:
        offset, block = a.offset, a.parent
    elif t is PooledAllocation and type(a.block) in _BLOCKS:
        block = a.block
    else:
        raise TypeError(f"{what}: expected a QNN allocation, got {t.__name__} ({a!r:.80})")
    if a._freed or block._freed:
        a._check_live(what)
        block._check_live(what)
    if device._closed:
        raise device._closed_error(what)
    if block.device is not device:
        raise foreign(block.device, what, f"{a!r} belongs to another device than the stream", _NAME)
    return block.buffer + offset if offset else block.buffer
