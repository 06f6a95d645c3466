"""The stream-ordered memory pool: :class:`GpuStreamOrderedPool` and its :class:`GpuPoolAllocation`."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from ironaccelerator._core import ErrorKind, MemoryKind
from ironaccelerator_runtime.backends.gpu.api import GpuApi, _address
from ironaccelerator_runtime.backends.gpu.context import _ContextRef, _TLS, _make_current
from ironaccelerator_runtime.backends.gpu.memory import GpuAllocation
from ironaccelerator_runtime.backends.gpu.stream import GpuStream
from ironaccelerator_runtime.errors import Error, as_operation, fail
from ironaccelerator_runtime.traits import (
    Allocation, IpcHandle, MemoryPool, PoolStats, Result, Stream, _SIZE_MAX, check_size,
)

if TYPE_CHECKING:  # (and bound at run time by __init__.py: the module defining it imports this one)
    from ironaccelerator_runtime.backends.gpu.device import GpuDevice


def _destroy_pool(api: GpuApi, key: tuple[Any, ...], target: Any, handle: Any, ctx: _ContextRef | None) -> int:
    """Finalizer of a stream-ordered pool (the driver defers it while allocations are outstanding; ``ctx``,
    the device's context, is held until this has run)."""
    try:
        _make_current(api, key, target)
    except Error:
        pass
    return int(api.pool_destroy(handle))


class GpuPoolAllocation(GpuAllocation):
    """Memory from a :class:`GpuStreamOrderedPool`, freed (``pool_free``) in the order of the stream it
    was allocated on (``.stream``, the native handle)."""

    kind = MemoryKind.DEVICE
    _tracked = True  # dropped unfreed: freed in stream order by Allocation.__del__
    _unordered = False  # allocated with no stream: freed after the work of every stream of the device

    def __init__(self, pool: GpuStreamOrderedPool, handle: Any, nbytes: int, stream: Any) -> None:
        # the pool's hot path: the fewest attributes (.device and .dptr are read through the pool and .handle)
        self.pool = pool  # keeps the pool (and its stream) alive while this is
        self.handle = handle  # the allocator's answer: the native device-pointer argument
        self.ptr = handle if type(handle) is int else _address(handle)
        self.nbytes = nbytes
        self.stream = stream

    @property
    def device(self) -> GpuDevice:  # type: ignore[override]
        return self.pool.device

    @property
    def dptr(self) -> Any:
        return self.handle

    def _release(self) -> Error | None:
        pool = self.pool
        if getattr(_TLS, "key", None) != pool._device_key:
            try:
                pool.device.activate()
            except Error as e:
                return e
        if self._unordered:
            try:
                pool._order_after_device()
            except Error as e:
                return e
        code = pool._pool_free(self.handle, self.stream)
        return pool.api.error(code, "pool_free") if code else None

    free_unchecked = Allocation.free_unchecked  # through _release, not GpuAllocation's inline free

    def export_ipc(self) -> IpcHandle:
        self._check_live("Allocation.export_ipc")
        raise fail(ErrorKind.UNSUPPORTED, "Allocation.export_ipc", f"{self!r} comes from a stream-ordered pool, whose "
                   "memory has no IPC handle (pool export is not bound): allocate with Device.alloc to export",
                   self.pool.api)

    def free(self) -> None:  # _release inline (the pool's hot path)
        if self._freed:
            raise fail(ErrorKind.INVALID_HANDLE, "Allocation.free", f"{self!r} was already freed", self.pool.api)
        if self._views and (e := self._views_error("Allocation.free")) is not None:
            raise e  # (typed DLPack views of it are exported)
        self._freed = True
        pool = self.pool
        if getattr(_TLS, "key", None) != pool._device_key:
            pool.device.activate()
        if self._unordered:
            pool._order_after_device()
        code = pool._pool_free(self.handle, self.stream)
        if code:
            raise pool.api.error(code, "pool_free")


def _compiled_pool_allocation(api: GpuApi, cls: type[GpuPoolAllocation]) -> type:
    """``cls`` (a vendor's :class:`GpuPoolAllocation`) on the compiled ``_PoolMemory`` (trampolines.c), which holds
    ``ptr``, ``nbytes``, ``pool``, the stream and the flags, and frees in C; made once per class and api, with the
    same name."""
    made = api.pool_types.get(cls)
    if made is not None:
        return made
    assert api.pool_memory is not None
    base: Any = api.pool_memory[1]
    ffi, stream_t, deviceptr_t = api.ffi, api.tables.types["stream"], api.tables.types["deviceptr"]
    pointer = "*" in deviceptr_t  # else the device-pointer type is the address itself (an integer)

    class Compiled(base, cls):  # type: ignore[misc,valid-type]
        __doc__ = cls.__doc__

        @property
        def handle(self) -> Any:  # the native device-pointer argument (also .dptr, as for every pool allocation)
            return ffi.cast(deviceptr_t, self.ptr) if pointer else self.ptr

        @property
        def stream(self) -> Any:  # the native stream handle
            return ffi.cast(stream_t, self._stream)

    Compiled.__name__ = Compiled.__qualname__ = cls.__name__
    Compiled.__module__ = cls.__module__
    api.pool_types[cls] = Compiled
    return Compiled


class GpuStreamOrderedPool(MemoryPool):
    """:class:`MemoryPool` on the driver's stream-ordered allocator: a pool of its own on this device
    (``pool_create``; its release threshold raised so that freed memory stays reserved for reuse instead of
    going back to the driver at each synchronisation), served by ``pool_alloc`` and returned by ``pool_free``.
    Other libraries' pools (the device's default pool) are left alone.  A vendor's subclass (generated) names
    the class of its allocations, ``allocation_class``.

    ``alloc(n, stream=s)`` allocates in the order of ``s`` and frees in that order, with no synchronisation
    (the fast path: use the memory on ``s``, or order other streams after it with events; the driver reuses
    the memory on another stream only after the free, as :class:`MemoryPool` does).  ``alloc(n)`` allocates on
    the pool's own stream and waits for it, so that the memory is usable on any stream at once, as
    :meth:`Device.alloc`'s is; its ``free()`` is ordered after the work then enqueued on every stream of the
    device (the pool's stream is made to wait for an event on each stream whose work is not complete), so work
    still queued on any stream never sees the memory handed to a new owner.

    ``stats()`` reads the driver's counters: ``allocated_bytes`` is the memory the pool reserves,
    ``in_use_bytes`` what its allocations use; the driver keeps no hit or miss counts (0).
    """

    device: GpuDevice
    allocation_class: ClassVar[type[GpuPoolAllocation]]

    def __init__(self, device: GpuDevice) -> None:
        MemoryPool.__init__(self, device, MemoryKind.DEVICE)
        api = device.api
        self.api = api
        ffi, tables = api.ffi, api.tables
        device.activate()
        props = ffi.new(tables.types["mempool_props"] + " *")
        props.allocType = tables.const("pool_alloc_type")
        props.location.type = tables.const("pool_location_device")
        props.location.id = device.index
        out = ffi.new(tables.types["mempool"] + " *")
        api.check(api.pool_create(out, props), "pool_create")
        self.handle = out[0]
        self._ctx = device._ctx  # its allocations hold the pool, and so the context
        self._finalizer = weakref.finalize(self, _destroy_pool, api, device._key, device._target, self.handle,
                                           device._ctx)
        keep_all = ffi.new("uint64_t *", 2**64 - 1)
        api.check(api.pool_set_attribute(self.handle, tables.const("pool_attr_release_threshold"), keep_all),
                  "pool_set_attribute")
        self.stream = device.create_stream()  # alloc() without a stream: allocate here, then wait
        self._new = ffi.new
        self._ptr_t = ffi.typeof(tables.types["deviceptr"] + " *")
        self._device_key = device._key
        self._pool_alloc: Callable[..., int] = api.pool_alloc
        self._pool_free: Callable[..., int] = api.pool_free
        self._address = _address(self.handle)
        self._allocation = self.allocation_class  # (instance attributes: the allocation path reads them)
        self._stream_type = device.stream_class
        self._reserved, self._used = tables.const("pool_attr_reserved"), tables.const("pool_attr_used")
        compiled = api.pool_memory
        # (_fast._pool_alloc, the allocation class) or None
        self._compiled: tuple[Callable[..., GpuPoolAllocation | int], type] | None = None if compiled is None else (
            compiled[0], _compiled_pool_allocation(api, self.allocation_class))

    def _shut(self) -> None:
        """The device was closed: allocations are refused from now on (``_try``'s allocator replaced by one that
        raises the closed-device Error, which ``alloc_unchecked`` returns), at no cost to the allocation path;
        frees still work."""
        error = self.device._closed_error

        def refuse(*_: Any) -> int:
            raise error("MemoryPool.alloc")

        self._compiled = None
        self._pool_alloc = refuse

    def _memory_error(self, memory: Allocation, code: int | None, function: str) -> Error:
        """The Error of a compiled allocation's failed free (``code``), or of freeing it twice (None)."""
        if code is None:
            return fail(ErrorKind.INVALID_HANDLE, function, f"{memory!r} was already freed", self.api)
        return self.api.error(code, "pool_free")

    def alloc(self, nbytes: int, stream: Stream | None = None) -> GpuPoolAllocation:
        """At least ``nbytes`` (``check_size``: an integer >= 1), in the order of ``stream`` (see the class)."""
        if type(nbytes) is not int or nbytes <= 0:
            nbytes = check_size(nbytes, "nbytes", "MemoryPool.alloc", self.device.kind)
        if stream is not None and not ((type(stream) is self._stream_type or isinstance(stream, self._stream_type))
                                       and stream.device is self.device):
            raise self._not_my_stream(stream, "MemoryPool.alloc")
        a = self.alloc_unchecked(nbytes, stream)
        if isinstance(a, Error):
            raise as_operation(a, "MemoryPool.alloc_unchecked", "MemoryPool.alloc")
        return a

    def _not_my_stream(self, stream: object, function: str) -> Error:
        """INVALID_VALUE named ``function``: ``stream`` is not a stream of this pool's device (another device's, or
        not a stream of this backend)."""
        return fail(ErrorKind.INVALID_VALUE, function, f"stream must be None or a {self.api.name} stream of "
                    f"{self.device!r}, not {stream!r:.80}", self.api)

    def alloc_unchecked(self, nbytes: int, stream: Stream | None = None) -> Result[GpuPoolAllocation]:
        """``alloc`` without its checks of the size's type, returning the Error instead of raising it; a stream of
        another device (or not a stream) is INVALID_VALUE as in ``alloc``."""
        if type(nbytes) is not int or not 0 < nbytes <= _SIZE_MAX:
            checked = self.device._alloc_args_unchecked(nbytes, MemoryKind.DEVICE, "MemoryPool.alloc_unchecked")
            if isinstance(checked, Error):
                return checked
            nbytes = checked
        st: Any = self.stream if stream is None else stream
        try:
            if getattr(_TLS, "key", None) != self._device_key:
                self.device.activate()
            if stream is not None and stream.device is not self.device:  # (a non-stream: AttributeError, below)
                return self._not_my_stream(stream, "MemoryPool.alloc_unchecked")
            compiled = self._compiled  # (_try, with its compiled case inline: the hot path)
            a = compiled[0](compiled[1], self, self._address, nbytes, st._address, self._device_key) \
                if compiled is not None and stream is not None else self._try(nbytes, st, stream is None)
            if isinstance(a, int):
                a = self._retry(a, nbytes, st, stream is None)
            if stream is None:
                code = self.api.stream_synchronize(st.handle)
                if code:
                    a.free_unchecked()
                    return self.api.error(code, "stream_synchronize")
            return a
        except Error as e:  # (a value: its frames would hold their objects)
            return as_operation(e.with_traceback(None), "MemoryPool.alloc", "MemoryPool.alloc_unchecked")
        except (OverflowError, TypeError) as e:  # not a size_t
            return fail(ErrorKind.INVALID_VALUE, "MemoryPool.alloc_unchecked", f"cannot allocate {nbytes!r} bytes: {e}",
                        self.api)
        except AttributeError:
            if isinstance(stream, self._stream_type):
                raise
            return self._not_my_stream(stream, "MemoryPool.alloc_unchecked")

    def _try(self, nbytes: int, st: GpuStream, unordered: bool = False) -> GpuPoolAllocation | int:
        """One allocation on ``st`` (the device current): the allocation, or the driver's status.  ``unordered``
        (``alloc(n)``, no stream): the Python allocation, whose free orders after every stream of the device."""
        compiled = self._compiled
        if compiled is not None and not unordered:  # in C: _fast._pool_alloc
            return compiled[0](compiled[1], self, self._address, nbytes, st._address, self._device_key)
        out = self._new(self._ptr_t)
        code = self._pool_alloc(out, nbytes, self.handle, st.handle)
        if code:
            return code
        a = self._allocation(self, out[0], nbytes, st.handle)
        if unordered:
            a._unordered = True
        return a

    def _order_after_device(self) -> None:
        """Make the pool's stream wait for the work enqueued so far on every other stream of the device (an
        event recorded on each stream whose work is not complete; a stream ``stream_query`` finds idle has
        nothing the free could overtake, and costs no event): a free on it is then ordered after all of it (the
        device current).  Nothing after ``Device.close``, which waited for all of it (a free still works then)."""
        if self.device._closed:
            return
        own = self.stream
        for s in self.device._live_streams():
            if s is not own and (event := s._pool_fence()) is not None:
                own.wait_event(event)

    def _retry(self, code: int, nbytes: int, st: GpuStream, unordered: bool = False) -> GpuPoolAllocation:
        """After a failed allocation (``code``): raise, or trim the pool and try once more if out of memory;
        INVALID_VALUE past ``DeviceLimits.max_alloc`` (as ``Device.alloc``'s)."""
        limit = self.device.descriptor.limits.max_alloc
        if limit is not None and nbytes > limit:
            raise fail(ErrorKind.INVALID_VALUE, "MemoryPool.alloc", f"nbytes={nbytes} is more than the device's "
                       f"largest allocation ({limit} bytes, DeviceLimits.max_alloc)", self.api, code=code)
        err = self.api.error(code, "pool_alloc", f"{nbytes} bytes requested")
        if err.kind is not ErrorKind.OUT_OF_MEMORY:
            raise err
        self.trim()  # unused reserved memory back to the driver (the device made current), then once more
        a = self._try(nbytes, st, unordered)
        if isinstance(a, int):
            raise self.api.error(a, "pool_alloc", f"{nbytes} bytes requested (after trimming the pool); the "
                                 f"device has {self.device.descriptor.total_memory} bytes in all")
        return a

    def _attribute(self, attr: int) -> int:
        value = self.api.ffi.new("uint64_t *")
        self.api.check(self.api.pool_get_attribute(self.handle, attr, value), "pool_get_attribute")
        return int(value[0])

    def trim(self) -> int:
        """Return the pool's unused reserved memory to the driver (``pool_trim``); the bytes released."""
        self.device.activate()
        self.api.check(self.api.stream_synchronize(self.stream.handle), "stream_synchronize")
        before = self._attribute(self._reserved)
        self.api.check(self.api.pool_trim(self.handle, 0), "pool_trim")
        return max(0, before - self._attribute(self._reserved))

    def stats(self) -> PoolStats:
        self.device.activate()
        reserved, used = self._attribute(self._reserved), self._attribute(self._used)
        return PoolStats(allocated_bytes=reserved, in_use_bytes=used, cached_bytes=max(0, reserved - used))
