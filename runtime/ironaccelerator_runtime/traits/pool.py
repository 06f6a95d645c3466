"""The stream-ordered :class:`MemoryPool` trait base, its :class:`PooledAllocation` blocks and
:class:`PoolStats`; and ``device_span``, the device-to-device copy check, which knows how slices and pool blocks
share another allocation's memory."""

from __future__ import annotations

import threading
from typing import Any, Callable, TYPE_CHECKING

from ironaccelerator._core import BackendKind, ErrorKind, MemoryKind

from ..errors import Error, as_operation, fail
from ..records import record
from .checks import check_size, check_span
from .memory import Allocation, AllocationSlice
from .stream import Stream

if TYPE_CHECKING:
    from .values import IpcHandle, Result
    from .event import Event
    from .device import Device


def device_span(dst: Any, src: Any, nbytes: Any, dst_offset: Any, src_offset: Any,
                backend: BackendKind | str | None = None) -> tuple[int, int, int]:
    """``(src_offset, dst_offset, nbytes)`` of a device-to-device copy (``Stream.copy``): without ``nbytes`` the
    source's bytes after its offset, which must be exactly the destination's after its offset.  Overlapping ranges
    of one allocation (itself, its slices, a pool block) are ``INVALID_VALUE`` on every backend, as memcpy's."""
    function = "Stream.copy"
    so, n = check_span(src.nbytes, src_offset, nbytes, "src", function, backend)
    do, dn = check_span(dst.nbytes, dst_offset, None if nbytes is None else n, "dst", function, backend)
    if nbytes is None and dn != n:
        name = backend.name if isinstance(backend, BackendKind) else backend
        raise fail(ErrorKind.INVALID_VALUE, function, f"the source holds {n} bytes (after offset {so}) and the "
                   f"destination {dn} (after offset {do}): sizes must match, or pass nbytes to copy part", name)
    if n and (dst is src or isinstance(dst, _SHARES) or isinstance(src, _SHARES)):  # (else distinct memory)
        dm, dbase = _memory_of(dst)
        sm, sbase = _memory_of(src)
        if dm is sm and dbase + do < sbase + so + n and sbase + so < dbase + do + n:
            name = backend.name if isinstance(backend, BackendKind) else backend
            raise fail(ErrorKind.INVALID_VALUE, function, f"the source (bytes {sbase + so}..{sbase + so + n}) and "
                       f"the destination (bytes {dbase + do}..{dbase + do + n}) overlap in the same allocation: a "
                       "copy's ranges must not overlap (as memcpy's); copy through a temporary allocation", name)
    return so, do, n


def _memory_of(a: Any) -> tuple[Any, int]:
    """``(the allocation whose memory a is, the offset of a's bytes in it)``: a slice's allocation, a pool
    block's block (device_span's overlap test)."""
    offset = 0
    if isinstance(a, AllocationSlice):
        offset, a = a.offset, a.parent
    if isinstance(a, PooledAllocation):
        a = a.block
    return a, offset


@record(frozen=False)
class PoolStats:
    """Counters of a :class:`MemoryPool` (:meth:`MemoryPool.stats`), a snapshot.

    Attributes:
        allocated_bytes: memory held from the backend (in use + cached).
        in_use_bytes: memory of live pool allocations (whole blocks).
        cached_bytes: memory of freed blocks kept for reuse.
        hits: allocations served from a cached block.
        misses: allocations that asked the backend for a new block.

    Backends:
        All.  CUDA/HIP where the device has stream-ordered pools: the driver's counters (``allocated_bytes`` the
        memory the pool reserves, ``in_use_bytes`` what its allocations use); the driver counts no hits or
        misses (0).
    """

    allocated_bytes: int = 0  # held from the backend (in use + cached)
    in_use_bytes: int = 0
    cached_bytes: int = 0
    hits: int = 0
    misses: int = 0

    def __init__(self, allocated_bytes: int = 0, in_use_bytes: int = 0, cached_bytes: int = 0, hits: int = 0,
                 misses: int = 0) -> None:
        self.allocated_bytes = allocated_bytes
        self.in_use_bytes = in_use_bytes
        self.cached_bytes = cached_bytes
        self.hits = hits
        self.misses = misses


class _Forward:
    """A block's attribute (a backend's handle: ``.buffer``, ``.ptr`` ...) read through the
    :class:`PooledAllocation` that holds the block.  A non-data descriptor: one set on the allocation is the
    allocation's own, as an attribute found by ``__getattr__`` would be.  (Forwarding by descriptors rather than a
    ``__getattr__`` keeps the allocation's other attribute loads specialised by the interpreter: ~15 ns each,
    ~120 ns of a pool's alloc + free.)"""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        return getattr(obj.block, self.name)


_FORWARDED: set[type] = set()  # the block classes whose attributes PooledAllocation forwards
# what a PooledAllocation sets itself (never forwarded: a descriptor of the same name would slow their loads)
_OWN = frozenset({"pool", "block", "nbytes", "kind", "device", "stream", "_cache"})


def _forward(block: Allocation) -> None:
    """Forward to ``block`` (through :class:`_Forward` on :class:`PooledAllocation`) the attributes of its class
    and of it that a PooledAllocation does not have: the block's instance attributes and those of its class and
    bases below :class:`Allocation`.  Once per block class, when its first block enters a pool."""
    t = type(block)
    names = set(vars(block))
    for k in t.__mro__:
        if k is Allocation or k is object:
            break
        names.update(vars(k))
    for name in names:
        if name in _OWN or name.startswith("__") or hasattr(PooledAllocation, name):
            continue
        setattr(PooledAllocation, name, _Forward(name))
    _FORWARDED.add(t)


class PooledAllocation(Allocation):
    """An allocation served by a :class:`MemoryPool`; ``free`` (or dropping it) returns its block to the pool.

    ``stream`` is the stream it is ordered on (``pool.alloc(n, stream=s)``, or ``free(stream=s)``); None if
    neither named one.  The block's backend-specific handles (``.buffer`` on OpenCL, Metal and QNN, ``.ptr`` and
    ``.handle`` on CUDA/HIP ...) are read through it."""

    # slots, every one set by each maker (__init__, MemoryPool.alloc, and the compiled alloc of ia_runtime.h's
    # pool free list, which writes them at their offsets; its free and __del__ read them)
    __slots__ = ("pool", "block", "nbytes", "kind", "device", "stream", "_freed", "_views", "_cache")
    pool: MemoryPool
    block: Allocation
    stream: Stream | None
    _cache: Any  # the pool's _cache (None: the pool has no compiled free list)

    def __init__(self, pool: MemoryPool, block: Allocation, nbytes: int, stream: Stream | None = None) -> None:
        if type(block) not in _FORWARDED:
            _forward(block)
        self.pool = pool
        self.block = block
        self.nbytes = nbytes
        self.kind = block.kind
        self.device = block.device
        self.stream = stream
        self._freed = False
        self._views = None
        self._cache = pool._cache

    _tracked = True  # dropped unfreed: Allocation.__del__ gives the block back

    def _release(self) -> Error | None:
        try:
            self.pool._give_back(self.block, self.stream)
        except Error as e:
            return e
        return None

    def _device_address(self) -> int | None:
        return self.block._device_address()

    def export_ipc(self) -> IpcHandle:
        self._check_live("Allocation.export_ipc")
        if type(self.block).export_ipc is Allocation.export_ipc:  # the backend exports nothing: UNSUPPORTED
            return Allocation.export_ipc(self)
        raise fail(ErrorKind.INVALID_VALUE, "Allocation.export_ipc",
                   f"{self!r} is a block of the caching pool, reused by "
                   "later allocations: allocate with Device.alloc to export", self.device)

    def free(self, stream: Stream | None = None) -> None:  # (MemoryPool._give_back inlined: the pool's hot path)
        """Give the block back to the pool, in the order of ``stream`` (default: the stream it was allocated on).

        Stream-ordered as CUDA's ``cuMemFreeAsync``: the block is reused at once by allocations on that stream,
        and by others only once the work enqueued on it before this free has completed (or after their stream is
        made to wait for it).  Freed with no stream at all, it is ordered after the work then enqueued on *every*
        stream of the device (reused at once if all of it is known complete)."""
        if self._freed:
            raise fail(ErrorKind.INVALID_HANDLE, "Allocation.free", f"{self!r} was already freed", self.device)
        if self._views and (e := self._views_error("Allocation.free")) is not None:
            raise e  # (a view of a block handed to a new owner would read and write its memory)
        pool = self.pool
        if stream is None:
            stream = self.stream
        elif stream is not self.stream:
            pool._check_stream(stream, "Allocation.free")
        block = self.block
        lock = pool._lock
        if stream is None:  # fenced after every stream's work: free at once where all of it is known complete
            device = pool.device  # (the block's: read from the pool, whose attributes load faster)
            events = _NO_EVENTS if not device._dirty and not device._fence_events else pool._device_fence()
            self._freed = True
            lock.acquire()
            try:
                if not events:
                    blocks = pool._free.get(block.nbytes)
                    if blocks is None:
                        pool._free[block.nbytes] = [block]
                    else:
                        blocks.append(block)
                else:
                    pool._add_fenced(events, block)
            finally:
                lock.release()
            return
        self._freed = True
        lock.acquire()
        try:
            lists = pool._ordered.get(stream)
            if lists is None:
                lists = pool._ordered[stream] = {}
            blocks = lists.get(block.nbytes)
            if blocks is None:
                lists[block.nbytes] = [block]
            else:
                blocks.append(block)
        finally:
            lock.release()

    def free_unchecked(self, stream: Stream | None = None) -> Result[None]:
        """``free`` returning the Error (a second free, a bad stream) instead of raising it."""
        if self._freed:
            return fail(ErrorKind.INVALID_HANDLE, "Allocation.free_unchecked", f"{self!r} was already freed",
                        self.device)
        if self._views and (e := self._views_error("Allocation.free_unchecked")) is not None:
            return e
        if stream is not None and stream is not self.stream:
            try:
                self.pool._check_stream(stream, "Allocation.free_unchecked")
            except Error as e:
                return e
            self.stream = stream
        self._freed = True
        return self._release()

    def _host_address(self) -> int | None:  # the block's bytes: host-visible where the block's are (e.g. QNN's)
        return self.block._host_address()

    if TYPE_CHECKING:  # the block's handles, forwarded at run time by _Forward (no __getattr__: see _Forward)
        def __getattr__(self, name: str) -> Any: ...

    def _slice(self, offset: int, nbytes: int) -> Allocation:
        """``pool.alloc(n)[a:b]``: the block's slice (the backend's kind of slice), live while this allocation is:
        it keeps this allocation alive, and is INVALID_HANDLE once this allocation is freed (its block reused)."""
        s = self.block._slice(offset, nbytes)
        s._owner = self  # type: ignore[attr-defined]
        return s


_SHARES = (AllocationSlice, PooledAllocation)  # what shares another allocation's memory (device_span's overlap test)
_new = object.__new__


class _Fence:
    """Blocks freed before ``events`` (one per stream they wait for), reusable once every event completed."""

    __slots__ = ("events", "blocks", "waited", "done")

    def __init__(self, events: list[Event], blocks: dict[int, list[Allocation]]) -> None:
        self.events = events
        self.blocks = blocks
        self.waited: set[int] = set()  # id() of the streams already made to wait for the events
        self.done = not events

    def poll(self) -> bool:
        if not self.done:
            for e in self.events:
                if not e.query():
                    return False
            self.done = True
        return True


class MemoryPool:
    """A caching sub-allocator, stream-ordered as CUDA's: freed blocks are kept by size class and reused.

    Size classes are powers of two from 256 bytes (so a reused block may be up to 2x the request); ``trim()``
    returns cached blocks to the backend.

    Ordering: a block allocated with ``alloc(n, stream=s)`` (or freed with ``free(stream=s)``) is freed in the
    order of ``s``: the next ``alloc(..., stream=s)`` of its size class may reuse it at once (work on ``s`` runs in
    order), another stream ``t`` reuses it only after ``t`` is made to wait (an event recorded on ``s``, waited
    for on ``t``: no host blocking), and ``alloc(n)`` with no stream only once that event has completed (it waits
    for it when no block of the size class is free otherwise: its memory is usable on any stream at once).  A
    block that neither its allocation nor its free ordered on a stream is fenced when freed after the work then
    enqueued on every stream of the device (as ``cuMemFree`` orders after the device's work): free at once if all
    of it is known complete (no event needed), else reused as above once those events complete.  So queued work
    never sees its memory handed to a new owner.

    The hot paths count only hits (misses and held bytes change on the slow path); ``stats()`` derives the
    cached and in-use bytes from the free lists.

    Get a device's pool with :meth:`Device.memory_pool` (or make one: ``MemoryPool(device, kind)``, ``kind`` the
    :class:`MemoryKind` of its blocks, DEVICE by default).

    Backends:
        All.  CUDA/HIP devices with memory pools get a subclass on the driver's stream-ordered allocator
        (``cuMemAllocFromPoolAsync``/``hipMallocFromPoolAsync``) with the same contract; its ``stats()`` are the
        driver's.
    """

    MIN_BLOCK = 256

    def __init__(self, device: Device, kind: MemoryKind = MemoryKind.DEVICE) -> None:
        self.device = device
        self.kind = kind
        self._free: dict[int, list[Allocation]] = {}  # reusable by anyone: no queued work can use them
        self._ordered: dict[Stream, dict[int, list[Allocation]]] = {}  # freed in a stream's order, not yet fenced
        self._fenced: list[_Fence] = []  # blocks waiting for events, oldest first
        self._lock = threading.Lock()  # taken with acquire()/release(): cheaper than `with`
        self._stats = PoolStats()  # misses and allocated_bytes are kept here
        self._hits = 0
        self._sizes: dict[int, int] = {}  # request size -> size class (the default size_class's, memoized)
        # the events a block freed with no stream waits for: the device's own fence where it keeps one (OpenCL: two
        # flag tests when idle), else each live stream's
        self._device_fence: Callable[[], list[Event]] = getattr(device, "_pool_fence", None) or self._stream_fences
        # alloc() computes the size class inline unless a subclass overrides size_class
        self._custom_size_class = type(self).size_class.__func__ is not MemoryPool.size_class.__func__  # type: ignore[attr-defined]
        # the compiled free list (ia_runtime.h) where the backend's module has it: the pool's lock, and alloc's
        # and PooledAllocation.free's hot paths (a cached block, no stream); None: the Python paths alone
        self._cache: Any = None
        cache_type = _compiled(device) if not self._custom_size_class and type(self).alloc is MemoryPool.alloc \
            else None
        if cache_type is not None:
            self._cache = cache = cache_type(self, device, kind, self._free, MemoryPool.alloc, self.MIN_BLOCK)
            self._lock = cache  # (its C paths stand aside while Python code holds it)
            self.__dict__["alloc"] = cache.alloc  # (found before the class's alloc: a bound C method)

    @classmethod
    def size_class(cls, nbytes: int) -> int:
        """The block size a request of ``nbytes`` gets: the next power of two, at least ``MIN_BLOCK`` (256).

        Args:
            nbytes: the requested size in bytes, an integer >= 1.

        Returns:
            The size of the block that serves it.

        Raises:
            TypeError: ``nbytes`` is not an integer.
            Error: ``ErrorKind.INVALID_VALUE`` for ``nbytes`` < 1 or past ``size_t``.

        Backends:
            All (the core's caching pool; the drivers' stream-ordered pools size their own blocks).
        """
        n = max(check_size(nbytes, "nbytes", "MemoryPool.size_class"), cls.MIN_BLOCK)
        return 1 << (n - 1).bit_length()

    def _size_of(self, nbytes: int) -> int:
        """The size class of ``nbytes`` (an int >= 1), remembered for the next request of that size where the
        class's ``size_class`` is the default one (the first 1024 sizes asked for)."""
        if self._custom_size_class:
            return self.size_class(nbytes)
        size = 1 << ((nbytes if nbytes > self.MIN_BLOCK else self.MIN_BLOCK) - 1).bit_length()
        if len(self._sizes) < 1024:
            self._sizes[nbytes] = size
        return size

    def alloc(self, nbytes: int, stream: Stream | None = None) -> Allocation:
        """Allocate at least ``nbytes`` from the pool, in the order of ``stream`` (see the class).

        A cached block of the size class is reused when one is free for ``stream``; else the pool allocates a
        new block from the device (after trimming its cache once if the device is out of memory).

        Args:
            nbytes: size in bytes, an integer >= 1.
            stream: None, or a :class:`Stream` of this device: the allocation is ordered on it, and its
                ``free()`` frees in that stream's order.

        Returns:
            An :class:`Allocation` of ``nbytes`` (a block of :meth:`size_class` bytes underneath); ``free()`` (or
            dropping it) gives the block back to the pool.  ``free(stream=s)`` frees in ``s``'s order.

        Raises:
            TypeError: ``nbytes`` is not an integer.
            Error: ``ErrorKind.INVALID_VALUE`` for ``nbytes`` < 1 or a ``stream`` that is not one of this device's;
                ``ErrorKind.INVALID_HANDLE`` after ``Device.close``; ``ErrorKind.OUT_OF_MEMORY`` (and the other
                errors of :meth:`Device.alloc`) when a new block cannot be had.

        Backends:
            All.  CUDA/HIP stream-ordered pools: ``alloc(n, stream=s)`` is ``cuMemAllocFromPoolAsync`` on ``s``
            (no synchronisation); ``alloc(n)`` allocates on the pool's own stream and waits for it.
        """
        if type(nbytes) is not int or nbytes <= 0:
            nbytes = check_size(nbytes, "nbytes", "MemoryPool.alloc", self.device.kind)
        if stream is not None:
            self._check_stream(stream, "MemoryPool.alloc")
        if self.device._closed:
            raise self.device._closed_error("MemoryPool.alloc")
        size = self._sizes.get(nbytes)  # (a size asked for before: its class in one lookup)
        if size is None:
            size = self._size_of(nbytes)
        lock = self._lock
        lock.acquire()
        try:
            if stream is not None:
                lists = self._ordered.get(stream)
                if lists is not None:
                    blocks = lists.get(size)
                    if blocks:  # freed in this stream's order: reusable at once
                        self._hits += 1
                        return PooledAllocation(self, blocks.pop(), nbytes, stream)
            blocks = self._free.get(size)
            if blocks:  # (the hot path: PooledAllocation.__init__ inlined, its kind and device the pool's)
                self._hits += 1
                a = _new(PooledAllocation)
                a.pool = self
                a.block = blocks.pop()
                a.nbytes = nbytes
                a.kind = self.kind
                a.device = self.device
                a.stream = stream
                a._freed = False
                a._views = None
                a._cache = self._cache
                return a
            pending = bool(self._fenced or self._ordered)
        finally:
            lock.release()
        if pending:
            block = self._recycle(size, stream)
            if block is not None:
                with lock:
                    self._hits += 1
                return PooledAllocation(self, block, nbytes, stream)
        with lock:
            self._stats.misses += 1
        try:
            block = self.device.alloc(size, self.kind)
        except Error as e:
            if e.kind is not ErrorKind.OUT_OF_MEMORY:  # (past max_alloc: the operation called names it)
                raise as_operation(e, "Device.alloc", "MemoryPool.alloc") from None
            self.trim()  # (waits for the queued work first)
            block = self.device.alloc(size, self.kind)
        with lock:
            self._stats.allocated_bytes += size
        return PooledAllocation(self, block, nbytes, stream)

    def alloc_unchecked(self, nbytes: int, stream: Stream | None = None) -> Result[Allocation]:
        """:meth:`alloc` that returns the :class:`Error` instead of raising it.

        Args:
            nbytes: size in bytes, as for :meth:`alloc`.
            stream: None or a stream of this device, as for :meth:`alloc`.

        Returns:
            The :class:`Allocation`, or the :class:`Error` :meth:`alloc` would raise (a non-integer ``nbytes`` is
            ``INVALID_VALUE`` here, not ``TypeError``).

        Raises:
            Error: never for a bad value (the Error is returned); see docs/UNCHECKED.md.

        Backends:
            All, as :meth:`alloc`.
        """
        try:
            return self.alloc(nbytes, stream)
        except Error as e:
            return as_operation(e, "MemoryPool.alloc", "MemoryPool.alloc_unchecked")
        except (TypeError, ValueError, OverflowError) as e:
            return fail(ErrorKind.INVALID_VALUE, "MemoryPool.alloc_unchecked", str(e), self.device)

    def _check_stream(self, stream: Any, function: str = "MemoryPool.alloc") -> None:
        if not isinstance(stream, Stream) or getattr(stream, "device", None) is not self.device:
            raise fail(ErrorKind.INVALID_VALUE, function, "stream must be None or a Stream of "
                       f"{self.device!r}, not {stream!r}", self.device)

    def _give_back(self, block: Allocation, stream: Stream | None) -> None:
        """Take ``block`` back: in ``stream``'s order, or (None) fenced now after every stream's work."""
        if stream is not None:
            with self._lock:
                self._ordered.setdefault(stream, {}).setdefault(block.nbytes, []).append(block)
            return
        events = self._device_fence()  # (after the work that used the block: it was enqueued before this free)
        with self._lock:
            if not events:  # all of the device's work is known complete: free for anyone at once
                self._free.setdefault(block.nbytes, []).append(block)
            else:
                self._add_fenced(events, block)

    def _add_fenced(self, events: list[Event], block: Allocation) -> None:
        """(Lock held.)  ``block`` waits for ``events``: with the blocks of the previous fence if it has the same."""
        fenced = self._fenced
        if fenced and _same_events(fenced[-1].events, events):  # the fence of the previous free, still open
            fenced[-1].blocks.setdefault(block.nbytes, []).append(block)
        else:
            fenced.append(_Fence(events, {block.nbytes: [block]}))

    def _stream_fences(self) -> list[Event]:
        """The events of a fence after the work enqueued so far on every stream of the device (none for a stream
        whose work is known complete): each live stream's ``_pool_fence``."""
        return [e for s in self.device._live_streams() if (e := self._fence_of(s)) is not None]

    def _fence_of(self, stream: Stream) -> Event | None:
        """``stream._pool_fence()``; a stream that cannot be fenced is waited for instead (None)."""
        try:
            return stream._pool_fence()
        except Error:
            self._synchronize(stream)
            return None

    # the slow path: blocks freed in another order
    def _recycle(self, size: int, stream: Stream | None) -> Allocation | None:
        """A block of ``size`` freed in another order, made safe for ``stream`` (waited for on it), or for any
        stream (``stream`` None: a block whose fence has completed, else waited for); None if there is none."""
        lock = self._lock
        # fence what was freed on another stream and holds this size (one event per stream covers all its blocks;
        # a stream whose work is known complete needs none)
        lock.acquire()
        try:
            ordered = self._ordered
            take = [(s, lists) for s, lists in ordered.items() if s is not stream and lists.get(size)] \
                if ordered else []
            for s, _ in take:
                del ordered[s]
        finally:
            lock.release()
        fences = [_Fence([] if (e := self._fence_of(s)) is None else [e], lists) for s, lists in take]
        with lock:
            self._fenced.extend(fences)
            self._settle()
            blocks = self._free.get(size)
            if blocks:
                return blocks.pop()
            candidates = [f for f in self._fenced if f.blocks.get(size)]
        if not candidates:
            return None
        if stream is None and not any(f.poll() for f in candidates):
            f = candidates[0]  # none complete: wait for the oldest (memory usable on any stream, as CUDA's pools)
            for e in f.events:
                e.synchronize()
            f.poll()
        for f in candidates:
            if stream is None and not f.done:
                continue
            with lock:
                blocks = f.blocks.get(size)
                if not blocks:
                    continue
                block = blocks.pop()
                if f.done:
                    self._settle()
            if stream is not None and not f.done and id(stream) not in f.waited:
                try:
                    for e in f.events:
                        stream.wait_event(e)
                except Error:
                    for e in f.events:  # (cannot order the streams: wait here)
                        e.synchronize()
                f.waited.add(id(stream))
            return block
        with lock:
            self._settle()
        return None

    def _synchronize(self, stream: Stream) -> None:
        """A stream that cannot be fenced is waited for (else the device)."""
        try:
            stream.synchronize()
        except Error:
            self.device.synchronize()

    def _settle(self) -> None:
        """(Lock held.)  Move the blocks of completed fences to the free lists and drop empty fences."""
        keep = []
        for f in self._fenced:
            if f.done:
                for size, blocks in f.blocks.items():
                    if blocks:
                        self._free.setdefault(size, []).extend(blocks)
                f.blocks = {}  # (moved, not copied: another thread's list of candidates may still hold this fence)
                continue
            if any(f.blocks.values()):
                keep.append(f)
        self._fenced = keep

    def _cached(self) -> list[Allocation]:
        """(Lock held.)  Every cached block, whatever its order."""
        blocks = [b for bs in self._free.values() for b in bs]
        blocks += [b for lists in self._ordered.values() for bs in lists.values() for b in bs]
        blocks += [b for f in self._fenced for bs in f.blocks.values() for b in bs]
        return blocks

    def trim(self) -> int:
        """Release every cached block to the backend, once the work queued before their frees has completed.

        Waits for the device (:meth:`Device.synchronize`) when blocks freed in a stream's order are cached.
        :meth:`Device.close` calls it.

        Returns:
            The bytes released.

        Raises:
            Error: the error of the device's failed work, from waiting for it.

        Backends:
            All.  CUDA/HIP stream-ordered pools: ``cuMemPoolTrimTo``/``hipMemPoolTrimTo`` of the pool's unused
            reserved memory.
        """
        with self._lock:
            pending = bool(self._ordered or self._fenced)
        if pending and not self.device._closed:
            try:
                self.device.synchronize()
            except Error as e:
                if e.kind is not ErrorKind.UNSUPPORTED:
                    raise
        with self._lock:
            blocks = self._cached()
            for bs in self._free.values():
                bs.clear()  # (emptied, never removed: the compiled free list keeps the lists)
            self._ordered.clear()
            self._fenced.clear()
            released = sum(b.nbytes for b in blocks)
            self._stats.allocated_bytes -= released
        for b in blocks:
            b.free_unchecked()
        return released

    def stats(self) -> PoolStats:
        """The pool's counters now: bytes held, in use and cached, hits and misses.

        Returns:
            A :class:`PoolStats` snapshot.

        Raises:
            Error: the vendor's error where the driver's counters cannot be read (CUDA/HIP pools); the core's
                pool never raises.

        Backends:
            All.  CUDA/HIP stream-ordered pools report the driver's reserved and used bytes and no hits or
            misses (0).
        """
        with self._lock:
            st = self._stats
            cached = sum(b.nbytes for b in self._cached())
            return PoolStats(allocated_bytes=st.allocated_bytes, in_use_bytes=st.allocated_bytes - cached,
                             cached_bytes=cached, hits=self._hits + (self._cache.hits if self._cache else 0),
                             misses=st.misses)


_NO_EVENTS: list[Event] = []  # (never appended to)

# the compiled free list: its _PoolCache type once set up (the first pool whose backend's module has it; the C
# is vendor-neutral, one copy serves every backend), False where it cannot be
_COMPILED: list[Any] = [None]


def _compiled(device: Device) -> Any:
    """The ``_PoolCache`` type of the compiled free list (ia_runtime.h) for a pool of ``device``, or None where
    its backend's module has none (ABI mode, a backend without the runtime's C): the Python paths.  The first
    call that finds it sets ``PooledAllocation.free`` and ``__del__`` to the compiled ones, which run the Python
    ones for all but the hot path (and for the allocations of pools without it).  The compiled ``__del__`` is a
    slot wrapper, so the class's (and its subclasses') tp_finalize is then the C function itself: a freed
    allocation's drop runs one pointer test, where a method would be looked up and called by CPython's
    slot_tp_finalize on every drop (~30 ns of a ~180 ns pair)."""
    fast = getattr(device, "_pool_fast", None)
    setup = getattr(fast, "_pool_cache_setup", None)
    if setup is None:
        return None
    if _COMPILED[0] is None:
        try:
            cache_type, free, delete = setup(PooledAllocation, tuple(vars(PooledAllocation)[n] for n in
                                                                    PooledAllocation.__slots__),
                                             PooledAllocation.free, Allocation.__del__)
        except (TypeError, NotImplementedError):
            _COMPILED[0] = False
            return None
        PooledAllocation.free = free  # type: ignore[method-assign]
        PooledAllocation.__del__ = delete  # type: ignore[method-assign]
        _COMPILED[0] = cache_type
    return _COMPILED[0] or None


def _same_events(a: list[Event], b: list[Event]) -> bool:
    return a is b or (len(a) == len(b) and all(x is y for x, y in zip(a, b)))
