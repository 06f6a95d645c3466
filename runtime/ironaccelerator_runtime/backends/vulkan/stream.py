"""Vulkan streams and events.

A stream records its copies, fills and dispatches into a command buffer of its own pool (a global memory barrier
between commands: in-order, as every stream of the surface) and submits them in batches to the device's queue.
Each submission waits for the stream's timeline semaphore to reach the previous submission's value and signals the
next one, so batches run in order; ``wait_event`` adds a wait on the other stream's semaphore to the next
submission.  An event is a submission's timeline value plus a timestamp query (``vkCmdWriteTimestamp``) for
``elapsed_ms``.  Host copies use the allocation's mapping where its memory is host-coherent (copy_from_host when the
stream has nothing pending; copy_to_host after waiting for the stream), else host-visible staging buffers
(copy_from_host copies the source into one at once; copy_to_host waits for the stream and copies out)."""

from __future__ import annotations

import collections
import contextlib
import struct
import sys
import threading
import weakref
from typing import Any, Iterator

from ironaccelerator._core import ErrorKind
from ironaccelerator_runtime.errors import Error, fail
from ironaccelerator_runtime.traits.checks import foreign
from ironaccelerator_runtime.kernel_args import (
    LocalMemory, _numpy_kind, buffer_error, local_error, shared_mem_error, value_bytes,
)
from ironaccelerator_runtime.traits import (
    Allocation, CopyRegion, Event, Graph, KernelLaunch, LaunchDims, PooledAllocation, Result, Stream, check_span,
    device_span, fill_pattern, host_span, host_view, not_a_launch,
)

from .device import VulkanDevice, make_buffer
from .memory import VulkanAllocation, _free_buffer, _serial
from .module import VulkanKernel
from .tables import _KIND

_BATCH = 64  # commands recorded before a batch is submitted on its own
_SETS = 256  # descriptor sets a stream keeps cached (by kernel and buffers)
_QUERIES = 1024  # timestamp slots per stream (a ring)
_SPARE = 4  # command buffers of completed batches a stream keeps to record the next ones in
_ALL_COMMANDS = 0x10000
_BOTTOM_OF_PIPE = 0x2000
_MEMORY_READ, _MEMORY_WRITE = 0x8000, 0x10000
_UINT64_MAX = 2**64 - 1
_IMMUTABLE = frozenset((int, float, bool, bytes))  # push-constant values a prepared launch keeps as bytes


class VulkanEvent(Event):
    """A point in a stream's order: the timeline value of the submission that ends with it, and the timestamp
    query slot written there (``elapsed_ms``)."""

    def __init__(self, stream: VulkanStream, value: int, slot: int) -> None:
        self.stream = stream
        self.device = stream.device
        self.value = value
        self.slot = slot
        self._ns: int | None = None

    def synchronize(self) -> None:
        self.device._check_open("Event.synchronize")
        self.stream._wait(self.value)
        self._timestamp()

    def query(self) -> bool:
        self.device._check_open("Event.query")
        done = self.stream._reached(self.value, False)
        if done:
            self._timestamp()
        return done

    def _timestamp(self) -> int:
        if self._ns is None:
            s = self.stream
            out = s._ffi.new("uint64_t[1]")
            code = s._api.raw.vkGetQueryPoolResults(self.device.handle, s._queries, self.slot, 1, 8, out, 8, 0x1)
            s._api.check(code, "vkGetQueryPoolResults")
            self._ns = int(out[0] * self.device.timestamp_period)
        return self._ns

    def elapsed_ms(self, end: Event) -> float:
        if not isinstance(end, VulkanEvent):
            raise fail(ErrorKind.INVALID_VALUE, "Event.elapsed_ms", "Event.elapsed_ms needs another Vulkan event",
                       "VULKAN")
        if not self.device.timestamps:
            raise fail(ErrorKind.UNSUPPORTED, "Event.elapsed_ms", f"{self.device.descriptor.name!r}'s compute queue "
                       "writes no timestamps (timestampValidBits 0)", "VULKAN")
        self._elapsed_pair(end)  # (either device closed, another device's event; both waited for)
        return (end._timestamp() - self._timestamp()) / 1e6


class _Timeline:
    """A stream's timeline semaphore, destroyed when the last reference to it goes: the stream's own, and one held
    by each submission of another stream that waits for it (``wait_event``), from the wait's recording until that
    batch completes.  A semaphore must outlive every batch that refers to it: a stream dropped (its thread ended)
    while another stream's pending batch waited for it left lavapipe waiting on a destroyed semaphore (a crash)."""

    __slots__ = ("handle", "_finalizer", "__weakref__")

    def __init__(self, owner: Any, handle: Any) -> None:
        self.handle = handle
        owner.retain()  # (the VkDevice outlives the semaphore)
        self._finalizer = weakref.finalize(self, _destroy_semaphore, owner, handle)
        self._finalizer.atexit = False  # (as the stream's)

    def keep(self) -> None:
        """A waiting batch's reference (in its held resources, which are called when it completes): nothing to
        do but be dropped."""


def _destroy_semaphore(owner: Any, handle: Any) -> None:
    owner.api.raw.vkDestroySemaphore(owner.handle, handle, owner.api.ffi.NULL)
    owner.release()


def _destroy_stream(owner: Any, pool: Any, timeline: _Timeline, queries: Any, dpools: list[Any], tail: list[int],
                    pending: collections.deque[Any], resources: list[Any]) -> None:
    """A dropped stream: wait for its last submission, release what its batches held, destroy its objects, and
    give up its reference to the device (the semaphore goes with the last batch of another stream that waits for
    it: ``_Timeline``)."""
    sem = timeline.handle
    api, device = owner.api, owner.handle
    raw, null, ffi = api.raw, api.ffi.NULL, api.ffi
    if tail[0]:
        sems, vals = ffi.new("VkSemaphore[1]", [sem]), ffi.new("uint64_t[1]", [tail[0]])
        wi = ffi.new("VkSemaphoreWaitInfo *", {"sType": api.vk.VkStructureType.VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                               "semaphoreCount": 1, "pSemaphores": sems, "pValues": vals})
        raw.vkWaitSemaphores(device, wi, _UINT64_MAX)
    for _, _, held in pending:
        for r in held:
            r()
    for r in resources:
        r()
    raw.vkDestroyCommandPool(device, pool, null)
    raw.vkDestroyQueryPool(device, queries, null)
    for p in dpools:
        raw.vkDestroyDescriptorPool(device, p, null)
    owner.release()


class VulkanStream(Stream):
    """A sequence of command buffers submitted in batches to the device's compute queue, ordered by a timeline
    semaphore (``semaphore``; ``value`` is the last value submitted).  ``capture()`` is ``UNSUPPORTED``."""

    device: VulkanDevice

    def __init__(self, device: VulkanDevice) -> None:
        api, ffi, raw = device.api, device.api.ffi, device.api.raw
        S = api.vk.VkStructureType
        self.device = device
        self._api = api
        self._ffi = ffi
        h = device.handle
        self._lock = threading.RLock()
        pci = ffi.new("VkCommandPoolCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                                    "flags": 0x2, "queueFamilyIndex": device.family})
        out = ffi.new("VkCommandPool *")
        api.check(raw.vkCreateCommandPool(h, pci, ffi.NULL, out), "vkCreateCommandPool")
        self._pool = out[0]
        tci = ffi.new("VkSemaphoreTypeCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                                      "semaphoreType": 1, "initialValue": 0})
        sci = ffi.new("VkSemaphoreCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, "pNext": tci})
        sout = ffi.new("VkSemaphore *")
        api.check(raw.vkCreateSemaphore(h, sci, ffi.NULL, sout), "vkCreateSemaphore")
        self.semaphore = sout[0]
        self._timeline = _Timeline(device._owner, self.semaphore)
        qci = ffi.new("VkQueryPoolCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                                  "queryType": 2, "queryCount": _QUERIES})  # TIMESTAMP
        qout = ffi.new("VkQueryPool *")
        api.check(raw.vkCreateQueryPool(h, qci, ffi.NULL, qout), "vkCreateQueryPool")
        self._queries = qout[0]
        self._dpools: list[Any] = []
        self._tail = [0]  # the last value submitted, for the finalizer
        # submitted, in order: (value, command buffer, resources)
        self._pending: collections.deque[tuple[int, Any, Any]] = collections.deque()
        self._resources: list[Any] = []  # released when the batch being recorded completes
        device._owner.retain()
        self._finalizer = weakref.finalize(self, _destroy_stream, device._owner, self._pool, self._timeline,
                                           self._queries, self._dpools, self._tail, self._pending, self._resources)
        self._finalizer.atexit = False  # (as the device's: allocations released at exit still flush this stream)
        self.value = 0  # last timeline value submitted
        self._seen = 0  # last value seen reached
        self._slot = 0
        self._cb: Any = None  # the command buffer being recorded (None: none open)
        self._count = 0  # commands in it
        self._waits: list[tuple[_Timeline, int]] = []  # other streams' (timeline, value) the next submission waits for
        self._barrier = ffi.new("VkMemoryBarrier *", {"sType": S.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                                      "srcAccessMask": _MEMORY_WRITE,
                                                      "dstAccessMask": _MEMORY_READ | _MEMORY_WRITE})
        self._S = S
        # the hot path's structures, made once (every recording and submission runs under _lock): the begin info;
        # the submission of a batch that waits for nothing but this stream's previous one; command buffers of
        # completed batches, begun again (the pool resets them: RESET_COMMAND_BUFFER) instead of freed
        self._begin = ffi.new("VkCommandBufferBeginInfo *", {
            "sType": S.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, "flags": 0x1})  # ONE_TIME_SUBMIT
        self._alloc_info = ffi.new("VkCommandBufferAllocateInfo *", {
            "sType": S.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, "commandPool": self._pool, "level": 0,
            "commandBufferCount": 1})
        self._spare: list[Any] = []
        self._own_sem = ffi.new("VkSemaphore[1]", [self.semaphore])
        self._wait_val = ffi.new("uint64_t[1]")
        self._stage = ffi.new("VkPipelineStageFlags[1]", [_ALL_COMMANDS])
        self._signal_val = ffi.new("uint64_t[1]")
        self._submit_cb = ffi.new("VkCommandBuffer[1]")
        self._tsi = ffi.new("VkTimelineSemaphoreSubmitInfo *", {
            "sType": S.VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO, "waitSemaphoreValueCount": 1,
            "pWaitSemaphoreValues": self._wait_val, "signalSemaphoreValueCount": 1,
            "pSignalSemaphoreValues": self._signal_val})
        self._si = ffi.new("VkSubmitInfo *", {
            "sType": S.VK_STRUCTURE_TYPE_SUBMIT_INFO, "pNext": self._tsi, "waitSemaphoreCount": 1,
            "pWaitSemaphores": self._own_sem, "pWaitDstStageMask": self._stage, "commandBufferCount": 1,
            "pCommandBuffers": self._submit_cb, "signalSemaphoreCount": 1, "pSignalSemaphores": self._own_sem})
        # the wait for the stream's own timeline (_wait_only), made once
        self._wait_lock = threading.Lock()
        self._wait_vals = ffi.new("uint64_t[1]")
        self._wait_info = ffi.new("VkSemaphoreWaitInfo *", {
            "sType": S.VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, "semaphoreCount": 1, "pSemaphores": self._own_sem,
            "pValues": self._wait_vals})
        self._wait_semaphores = raw.vkWaitSemaphores
        self._handle = h
        self._sets: dict[tuple[Any, ...], Any] = {}  # (kernel, buffer keys...) -> VkDescriptorSet[1]
        self._set_pools: dict[Any, Any] = {}  # descriptor set -> its pool
        # the launch's raw functions, resolved once
        self._bind_pipeline = raw.vkCmdBindPipeline
        self._bind_sets = raw.vkCmdBindDescriptorSets
        self._push = raw.vkCmdPushConstants
        self._dispatch = raw.vkCmdDispatch
        self._end = raw.vkEndCommandBuffer
        self._queue_submit = raw.vkQueueSubmit
        self._counter_value = raw.vkGetSemaphoreCounterValue
        self._counter = ffi.new("uint64_t *")
        self._null = ffi.NULL
        device._streams.add(self)

    # ---------------------------------------------------------------- recording and submission
    def _record(self) -> Any:
        """The open command buffer (begun on first use), with a barrier after the previous command; while capturing,
        the graph's."""
        if self._capture is not None:
            return self._capture._record()
        cb = self._cb
        raw, ffi = self._api.raw, self._ffi
        if cb is None:
            if self._spare:
                cb = self._spare.pop()  # (a completed batch's: begun again, the pool resets it)
            else:
                out = ffi.new("VkCommandBuffer *")
                self._api.check(raw.vkAllocateCommandBuffers(self.device.handle, self._alloc_info, out),
                                "vkAllocateCommandBuffers")
                cb = out[0]
            code = raw.vkBeginCommandBuffer(cb, self._begin)
            if code < 0:
                self._spare.append(cb)
                raise self._api.error(code, "vkBeginCommandBuffer")
            self._cb = cb
            self._count = 0
        elif self._count:
            raw.vkCmdPipelineBarrier(cb, _ALL_COMMANDS, _ALL_COMMANDS, 0, 1, self._barrier, 0, ffi.NULL, 0, ffi.NULL)
        self._count += 1
        return cb

    def _recorded(self) -> None:
        """After a command: submit the batch once it is long enough; mark the device's pool fence dirty."""
        if self._capture is not None:
            return
        self.device._dirty = True
        if self._count >= _BATCH:
            self._submit()

    def _submit(self) -> int:
        """Submit the open batch (an empty one too, to signal a value); returns the value it signals."""
        cb = self._cb
        if cb is None:
            cb = self._record()
        try:
            code = self._end(cb)
            if code:
                self._api.check(code, "vkEndCommandBuffer")
            if self._resources:
                held: Any = list(self._resources)
                self._resources.clear()
            else:
                held = ()
            value = self._queue(cb, True, held)
        finally:
            # (only now, the value it signals counted: a free meanwhile, from another thread, read _cb set and
            # waited for that value; set to None first, the free found nothing pending and released the memory
            # the batch was being submitted with)
            self._cb = None
        if not self._spare and len(self._pending) > 1:
            # launching with no wait: retire what completed, so the next batches reuse its command buffers
            code = self._counter_value(self._handle, self.semaphore, self._counter)
            if code == 0:
                self._retire(self._counter[0])
        return value

    def _queue(self, cb: Any, owned: bool, held: Any) -> int:
        """Submit ``cb`` after the stream's previous submission (and the waits ``wait_event`` added), signalling the
        next timeline value; ``held`` (callables) is called once it completes, and ``cb`` reused or freed where
        ``owned``."""
        self._submitting = True  # (for _flush_for_release, until self.value counts this submission)
        try:
            return self._queue_now(cb, owned, held)
        finally:
            self._submitting = False

    _submitting = False

    def _queue_now(self, cb: Any, owned: bool, held: Any) -> int:
        api, ffi, raw = self._api, self._ffi, self._api.raw
        S = self._S
        value = self.value + 1
        if not self._waits:  # (the common case: the structures made once)
            self._wait_val[0] = self.value
            self._signal_val[0] = value
            cbs = self._submit_cb
            cbs[0] = cb
            device = self.device
            with device.queue_lock:
                code = self._queue_submit(device.queue, 1, self._si, self._null)
            if code < 0:
                return self._queued(code, value, cb, cbs, owned, held)
            self.value = self._tail[0] = value
            self._pending.append((value, cb if owned else None, held))
            return value
        waits = [(self._timeline, self.value)] + self._waits
        wsems = ffi.new("VkSemaphore[]", [w[0].handle for w in waits])
        wvals = ffi.new("uint64_t[]", [w[1] for w in waits])
        # the batch holds the other streams' semaphores until it completes (_Timeline)
        held = [*held, *(w[0].keep for w in self._waits)]
        stages = ffi.new("VkPipelineStageFlags[]", [_ALL_COMMANDS] * len(waits))
        ssem = ffi.new("VkSemaphore[1]", [self.semaphore])
        sval = ffi.new("uint64_t[1]", [value])
        tsi = ffi.new("VkTimelineSemaphoreSubmitInfo *", {
            "sType": S.VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO, "waitSemaphoreValueCount": len(waits),
            "pWaitSemaphoreValues": wvals, "signalSemaphoreValueCount": 1, "pSignalSemaphoreValues": sval})
        cbs = ffi.new("VkCommandBuffer[1]", [cb])
        si = ffi.new("VkSubmitInfo *", {
            "sType": S.VK_STRUCTURE_TYPE_SUBMIT_INFO, "pNext": tsi, "waitSemaphoreCount": len(waits),
            "pWaitSemaphores": wsems, "pWaitDstStageMask": stages, "commandBufferCount": 1, "pCommandBuffers": cbs,
            "signalSemaphoreCount": 1, "pSignalSemaphores": ssem})
        with self.device.queue_lock:
            code = raw.vkQueueSubmit(self.device.queue, 1, si, ffi.NULL)
        return self._queued(code, value, cb, cbs, owned, held)

    def _queued(self, code: int, value: int, cb: Any, cbs: Any, owned: bool, held: Any) -> int:
        """After ``vkQueueSubmit`` of ``cb`` (in ``cbs``) signalling ``value``: the bookkeeping, or the error."""
        if code < 0:
            if owned:
                self._api.raw.vkFreeCommandBuffers(self.device.handle, self._pool, 1, cbs)
            self._release_resources(held)
            raise self._api.error(code, "vkQueueSubmit")
        self.value = self._tail[0] = value
        self._waits.clear()
        self._pending.append((value, cb if owned else None, held))
        return value

    def _flush_for_release(self) -> int:
        """The timeline value after which memory used by the work enqueued so far may be released (0: nothing
        pending).  Submits nothing: a release may come from an allocation's ``__del__`` in the middle of recording
        a command on this very stream; an open batch's value is the one its submission will signal."""
        if self._cb is not None or self._submitting:
            return self.value + 1
        if self._seen >= self.value:
            return 0
        return self.value

    def _reached(self, value: int, wait: bool) -> bool:
        """Whether the timeline reached ``value`` (waiting for it with ``wait``); retires completed batches."""
        if value <= self._seen:
            return True
        api = self._api
        if wait:
            if value > self.value:  # (the open batch's value, from _flush_for_release: submit it first)
                with self._lock:
                    if value > self.value and self._cb is not None:
                        self._submit()
            self._wait(min(value, self.value))
            return True
        out = self._ffi.new("uint64_t *")
        api.check(api.raw.vkGetSemaphoreCounterValue(self.device.handle, self.semaphore, out),
                  "vkGetSemaphoreCounterValue")
        self._retire(int(out[0]))
        return value <= self._seen

    def _wait(self, value: int) -> None:
        if value <= self._seen:
            return
        self._wait_only(value)
        self._retire(value)

    def _wait_only(self, value: int) -> None:
        """Wait for the timeline to reach ``value``, retiring nothing (the caller still reads a staging buffer).
        The wait structures are the stream's own, made once, used by one thread at a time (``_wait_lock``, never
        waited for: a thread that finds it taken makes its own)."""
        if self._wait_lock.acquire(False):
            try:
                self._wait_vals[0] = value
                code = self._wait_semaphores(self._handle, self._wait_info, _UINT64_MAX)
            finally:
                self._wait_lock.release()
        else:
            ffi = self._ffi
            sems = ffi.new("VkSemaphore[1]", [self.semaphore])
            vals = ffi.new("uint64_t[1]", [value])
            wi = ffi.new("VkSemaphoreWaitInfo *", {"sType": self._S.VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                                   "semaphoreCount": 1, "pSemaphores": sems, "pValues": vals})
            code = self._wait_semaphores(self._handle, wi, _UINT64_MAX)
        if code:
            self._api.check(code, "vkWaitSemaphores")

    def _retire(self, reached: int) -> None:
        """Note that the timeline reached ``reached``: the batches it completed give back their command buffers
        (kept to record the next batches in, up to ``_SPARE``, else freed) and release what they held."""
        if reached <= self._seen:
            return
        with self._lock:
            if reached > self._seen:
                self._seen = reached
            pending = self._pending  # (in the order submitted: values ascending)
            while pending and pending[0][0] <= reached:
                _, cb, held = pending.popleft()
                if cb is not None:
                    if len(self._spare) < _SPARE:
                        self._spare.append(cb)  # (begun again by _record: no allocation per batch)
                    else:
                        self._submit_cb[0] = cb  # (all submission and retiring runs under _lock)
                        self._api.raw.vkFreeCommandBuffers(self._handle, self._pool, 1, self._submit_cb)
                for r in held:
                    r()

    def _release_resources(self, resources: list[Any]) -> None:
        for r in resources:
            r()

    def _staging(self, nbytes: int, batch: bool = True) -> tuple[Any, Any]:
        """A host-visible buffer of ``nbytes`` and its mapped pointer, released with the batch (``batch``), or
        else by the caller through ``self._unstage`` (a copy to the host, which reads it after the batch completed:
        another thread's query may retire the batch first)."""
        device = self.device
        from ironaccelerator._core import MemoryKind

        mtype = device._types[MemoryKind.HOST_PINNED]
        buf, mem, ptr = make_buffer(device, nbytes, mtype if mtype is not None else 0, True)
        api, h = self._api, device.handle
        release = lambda: _free_buffer(api, h, buf, mem)  # noqa: E731
        if self._capture is not None:
            self._capture._resources.append(release)
        elif batch:
            self._resources.append(release)
        else:
            self._unstage = release
        return buf, ptr

    _unstage: Any = None

    def _copy_cmd(self, src: Any, so: int, dst: Any, do: int, n: int) -> None:
        cb = self._record()
        region = self._ffi.new("VkBufferCopy *", {"srcOffset": so, "dstOffset": do, "size": n})
        self._api.raw.vkCmdCopyBuffer(cb, src, dst, 1, region)

    # ---------------------------------------------------------------- copies and fills
    def copy_from_host(self, dst: Allocation, src: Any, nbytes: int | None = None, *, dst_offset: int = 0,
                       src_offset: int = 0) -> None:
        what = "Stream.copy_from_host"
        if self._capture is not None:
            raise self._capture_error(what)
        buf, base = _live_buffer(dst, what, self.device)
        view = host_view(src, backend=_KIND, function=what)
        so, do, n = host_span(view.nbytes, dst.nbytes, nbytes, src_offset, dst_offset, what, _KIND, to_device=True)
        if not n:
            return
        with self._lock:
            mapped = _mapping(dst)
            if mapped and self._cb is None and not self._waits and \
                    (self._seen >= self.value or self._reached(self.value, False)):
                # host-coherent memory and nothing of this stream pending: the bytes go in now (in order)
                self._ffi.memmove(self._ffi.cast("char *", mapped + base + do), view[so:so + n], n)
                return
            staging, ptr = self._staging(n)
            self._ffi.memmove(ptr, view[so:so + n], n)
            self._copy_cmd(staging, 0, buf, base + do, n)
            self._recorded()

    def copy_to_host(self, dst: Any, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
                     src_offset: int = 0) -> None:
        what = "Stream.copy_to_host"
        if self._capture is not None:
            raise self._capture_error(what)
        buf, base = _live_buffer(src, what, self.device)
        view = host_view(dst, True, backend=_KIND, function=what)
        do, so, n = host_span(view.nbytes, src.nbytes, nbytes, dst_offset, src_offset, what, _KIND,
                              to_device=False)
        if not n:
            return
        mapped = _mapping(src)
        if mapped:  # host-coherent memory: once the stream's work so far is done, the bytes are read from it
            with self._lock:
                if self._cb is not None or self._waits:
                    self._submit()
                value = self.value
            self._wait(value)
            view[do:do + n] = self._ffi.buffer(self._ffi.cast("char *", mapped + base + so), n)
            return
        with self._lock:
            staging, ptr = self._staging(n, False)
            release, self._unstage = self._unstage, None
            try:
                self._copy_cmd(buf, base + so, staging, 0, n)
                self.device._dirty = True
                value = self._submit()
            except BaseException:
                release()
                raise
        try:
            self._wait(value)
            view[do:do + n] = self._ffi.buffer(ptr, n)
        finally:
            release()

    def copy(self, dst: Allocation, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
             src_offset: int = 0) -> None:
        what = "Stream.copy"
        d, dbase = _live_buffer(dst, what, self.device)
        s, sbase = _live_buffer(src, what, self.device)
        so, do, n = device_span(dst, src, nbytes, dst_offset, src_offset, _KIND)
        if n:
            with self._lock:
                if self._capture is not None:
                    self._capture._hold(dst, src)
                self._copy_cmd(s, sbase + so, d, dbase + do, n)
                self._recorded()

    def fill(self, dst: Allocation, value: int, nbytes: int | None = None, offset: int = 0, *,
             width: int = 1) -> None:
        what = "Stream.fill"
        buf, base = _live_buffer(dst, what, self.device)
        v, w = fill_pattern(value, width, what, _KIND)
        o, n = check_span(dst.nbytes, offset, nbytes, "dst", what, _KIND, width=w)
        if not n:
            return
        pattern = v.to_bytes(w, "little")
        with self._lock:
            if self._capture is not None:
                self._capture._hold(dst)
            at = base + o
            if w <= 4 and at % 4 == 0 and n % 4 == 0:
                word = int.from_bytes(pattern * (4 // w), "little")
                cb = self._record()
                self._api.raw.vkCmdFillBuffer(cb, buf, at, n, word)
            else:  # an unaligned span or an 8-byte pattern: the pattern written to staging, then copied
                staging, ptr = self._staging(n)
                self._ffi.memmove(ptr, (pattern * (n // w + 1))[:n], n)
                self._copy_cmd(staging, 0, buf, at, n)
            self._recorded()

    def _copy_rect(self, dst: Allocation | memoryview, src: Allocation | memoryview, region: CopyRegion,
                   function: str) -> None:
        """One ``vkCmdCopyBuffer`` with a region per row; a host side goes through a staging buffer holding the
        rows packed (to the device: filled now; from it: copied out once the stream reaches the copy)."""
        w = region.width
        rows = [(z, y) for z in range(region.depth) for y in range(region.height)]
        doffs = [region.dst_offset + z * region.dst_slice_pitch + y * region.dst_pitch for z, y in rows]
        soffs = [region.src_offset + z * region.src_slice_pitch + y * region.src_pitch for z, y in rows]
        packed = [i * w for i in range(len(rows))]
        ffi = self._ffi
        if self._capture is not None and (isinstance(src, memoryview) or isinstance(dst, memoryview)):
            raise self._capture_error(function)
        if isinstance(src, memoryview):
            d, dbase = _live_buffer(dst, function, self.device)
            with self._lock:
                staging, ptr = self._staging(w * len(rows))
                buf = ffi.buffer(ptr, w * len(rows))
                for p, so in zip(packed, soffs):
                    buf[p:p + w] = src[so:so + w]
                self._regions(staging, 0, d, dbase, list(zip(packed, doffs)), w)
                self._recorded()
            return
        s, sbase = _live_buffer(src, function, self.device)
        if isinstance(dst, memoryview):
            with self._lock:
                staging, ptr = self._staging(w * len(rows), False)
                release, self._unstage = self._unstage, None
                try:
                    self._regions(s, sbase, staging, 0, list(zip(soffs, packed)), w)
                    self.device._dirty = True
                    value = self._submit()
                except BaseException:
                    release()
                    raise
            try:
                self._wait(value)
                buf = ffi.buffer(ptr, w * len(rows))
                for p, do in zip(packed, doffs):
                    dst[do:do + w] = buf[p:p + w]
            finally:
                release()
            return
        d, dbase = _live_buffer(dst, function, self.device)
        with self._lock:
            if self._capture is not None:
                self._capture._hold(dst, src)
            self._regions(s, sbase, d, dbase, list(zip(soffs, doffs)), w)
            self._recorded()

    def _regions(self, src: Any, sbase: int, dst: Any, dbase: int, pairs: list[tuple[int, int]], w: int) -> None:
        cb = self._record()
        regions = self._ffi.new("VkBufferCopy[]", [{"srcOffset": sbase + so, "dstOffset": dbase + do, "size": w}
                                                   for so, do in pairs])
        self._api.raw.vkCmdCopyBuffer(cb, src, dst, len(pairs), regions)

    _capture: VulkanGraph | None = None  # the graph being captured (between capture()'s enter and exit)

    @contextlib.contextmanager
    def capture(self) -> Iterator[VulkanGraph]:
        # The dispatches, device copies and fills enqueued inside the block are recorded into the graph's command
        # buffer instead of running; host copies, events, waits, synchronize and query inside it are UNSUPPORTED
        # (they would need the work to run).  An exception inside the block discards the graph.
        what = "Stream.capture"
        self.device._check_open(what)
        if self._capture is not None:
            raise fail(ErrorKind.INVALID_VALUE, what, f"{self!r} is already capturing", "VULKAN")
        graph = VulkanGraph(self)
        with self._lock:
            self._prep = None
            self._capture = graph
        try:
            yield graph
        except BaseException:
            self._capture = None
            graph.close()
            raise
        self._capture = None
        graph._end()

    def _capture_error(self, what: str) -> Error:
        return fail(ErrorKind.UNSUPPORTED, what, "it cannot be captured (the stream is capturing a graph: only "
                    "dispatches, device-to-device copies and fills are recorded)", "VULKAN")

    def prefetch(self, alloc: Allocation, to: Any = None, nbytes: int | None = None, offset: int = 0) -> None:
        # UNIFIED memory here is one memory type that is both device-local and host-visible (lavapipe: all of it):
        # nothing migrates, so a checked prefetch (to this stream's device or the host) has nothing to enqueue
        function = "Stream.prefetch"
        self._prefetch_span(alloc, nbytes, offset)
        _live_buffer(alloc, function, self.device)
        host = self._prefetch_to_host(to)
        if to is not None and not host and to is not self.device:
            raise fail(ErrorKind.INVALID_VALUE, function, "a Vulkan stream prefetches to its own device or the host, "
                       f"not to {to!r} (prefetch on a stream of that device)", "VULKAN")

    # ---------------------------------------------------------------- launches
    _prep: tuple[Any, ...] | None = None  # the last launch, prepared (see _launch)

    def launch(self, launch: Any, *parts: Any) -> None:
        if parts:  # launch(kernel, dims, *args), as on CUDA/HIP
            launch = KernelLaunch(launch, parts[0], parts[1:])
        err = self._launch(launch, "Stream.launch", True)
        if err is not None:
            raise err

    def launch_unchecked(self, launch: Any, *parts: Any) -> Result[None]:
        if parts:  # launch(kernel, dims, *args), as on CUDA/HIP
            launch = KernelLaunch(launch, parts[0], parts[1:])
        try:
            return self._launch(launch, "Stream.launch_unchecked", False)
        except Error as e:
            return e.with_traceback(None)

    def _launch(self, launch: KernelLaunch, what: str, validate: bool) -> Error | None:
        """A launch, checked or not alike (Vulkan reports nothing for a bad dispatch: every check is ours).

        The hot path: the same ``KernelLaunch`` object as this stream's previous launch (``_prep``, dropped by
        ``synchronize``) is recorded as prepared then, once its storage buffers are found live and the device open:
        no Python object is made.  Otherwise the kernel's last LaunchDims (by identity: they are immutable) gives
        the pipeline without validating again; storage buffers are keyed by their allocation's serial (never
        reused), so a repeated set of buffers finds its descriptor set in the stream's cache; values are converted
        each time."""
        prep = self._prep
        if prep is not None and prep[0] is launch and not self.device._closed:
            args, at = prep[4], prep[9]  # (the arguments, the positions of the storage buffers among them)
            i, n = 0, len(at)
            while i < n:
                if args[at[i]]._freed:
                    break
                i += 1
            else:
                lock = self._lock
                lock.acquire()  # (not `with`: its bound __enter__ and __exit__ would be two new objects a call)
                try:
                    if self._prep is prep:  # (not dropped meanwhile: the set cache emptied, a capture begun)
                        cb = self._record()
                        self._bind_pipeline(cb, 1, prep[1])  # VK_PIPELINE_BIND_POINT_COMPUTE
                        layout = prep[5]
                        if prep[2] is not None:
                            self._bind_sets(cb, 1, layout, 0, 1, prep[2], 0, self._null)
                        push = prep[3]
                        if push:
                            self._push(cb, layout, 0x20, 0, len(push), push)
                        self._dispatch(cb, prep[6], prep[7], prep[8])
                        self._recorded()
                        return None
                finally:
                    lock.release()
        try:
            kernel = launch.kernel
            args = launch.args
            d = launch.dims
        except AttributeError:
            raise not_a_launch(launch, what) from None
        device = self.device
        if device._closed:
            return device._closed_error(what)
        if type(kernel) is not VulkanKernel and not isinstance(kernel, VulkanKernel) or \
                kernel.module.device is not device:
            return foreign(getattr(getattr(kernel, "module", None), "device", None), what,
                           f"{kernel!r:.80} is not a Vulkan kernel of {device!r}", "VULKAN")
        last = kernel._last
        if last[0] is d:
            pipeline = last[1]
        else:
            if type(d) is not LaunchDims:
                return fail(ErrorKind.INVALID_VALUE, what, f"dims must be a LaunchDims, not {type(d).__name__}",
                            "VULKAN")
            if d.cooperative or d.cluster is not None:
                return d.options_error(_KIND, what)
            if d.shared_mem:
                return shared_mem_error("VULKAN", what, d.shared_mem)
            # validated unchecked too: Vulkan reports no error for a block or grid past the device's limits
            d.validate(device.descriptor.limits, _KIND, what)
            pipeline = kernel._pipeline(d.block, what)
            kernel._last = (d, pipeline)
        if len(args) != kernel.num_args:
            return fail(ErrorKind.INVALID_VALUE, what, f"kernel {kernel.name!r} takes {kernel.num_args} arguments "
                        f"({kernel.signature}), {len(args)} given", "VULKAN")
        keys: list[Any] = []
        values: list[bytes] = []
        slots = kernel.slots
        fixed = True  # every buffer a VulkanAllocation and every value immutable: the launch can be prepared
        for i, a in enumerate(args):
            slot = slots[i]
            t = type(a)
            if slot[0] == "buffer":
                if t is VulkanAllocation and not a._freed and a.device is device:
                    keys.append(a._serial or _serial(a))
                    continue
                key = self._buffer_key(kernel, i, a, slot, what)
                if type(key) is Error:
                    return key
                keys.append(key)
                fixed = False
            else:
                if t is LocalMemory:
                    return local_error("VULKAN", what, f"argument {i} of kernel {kernel.name!r}")
                if isinstance(a, Allocation):
                    return fail(ErrorKind.INVALID_VALUE, what, f"argument {i} of kernel {kernel.name!r} is push "
                                f"constant {slot[1].text!r}: it takes a value, not an allocation", "VULKAN")
                values.append(value_bytes(a, slot[1], i, kernel.name, "VULKAN", what))
                if fixed and t not in _IMMUTABLE and type(_numpy_kind(t)) is not tuple:
                    fixed = False  # (a bytearray, a Scalar, a numpy void scalar: its bytes may change)
        if kernel._packed:
            push = b"".join(values)
        else:
            buf = bytearray(kernel.push_size)
            for v, off in zip(values, kernel._offsets):
                buf[off:off + len(v)] = v
            push = bytes(buf)
        args_of = kernel._buffers_of
        with self._lock:
            sets = self._sets.get((kernel, *keys)) if keys else None
            if self._capture is not None:
                sets = self._capture._descriptor_set(kernel, args_of(args, keys)) if keys else None
                # (map, not a generator: a closure over args would make a cell every launch)
                self._capture._hold(*map(args.__getitem__, kernel._buffer_positions))
                fixed = False
            elif sets is None and keys:
                sets = self._descriptor_set(kernel, args_of(args, keys), (kernel, *keys))
            cb = self._record()
            self._bind_pipeline(cb, 1, pipeline)  # VK_PIPELINE_BIND_POINT_COMPUTE
            if sets is not None:
                self._bind_sets(cb, 1, kernel.layout, 0, 1, sets, 0, self._null)
            if push:
                self._push(cb, kernel.layout, 0x20, 0, len(push), push)
            g = d.grid
            self._dispatch(cb, g[0], g[1], g[2])
            self._prep = (launch, pipeline, sets, push, args, kernel.layout, g[0], g[1], g[2],
                          kernel._buffer_positions) if fixed else None
            self._recorded()
        return None

    def _buffer_key(self, kernel: VulkanKernel, i: int, a: Any, slot: Any, what: str) -> Any:
        """The cache key of a storage-buffer argument that is not a live VulkanAllocation of this device (a slice,
        a pool block), checked: ``(serial, offset, nbytes)``; else the Error."""
        device = self.device
        if type(a) is LocalMemory:
            return local_error("VULKAN", what, f"argument {i} of kernel {kernel.name!r}")
        if not isinstance(a, Allocation):
            return fail(ErrorKind.INVALID_VALUE, what, f"argument {i} of kernel {kernel.name!r} is storage buffer "
                        f"{slot[1]!r}: it takes an Allocation of this device, not {type(a).__name__} ({a!r:.60})",
                        "VULKAN")
        if a._freed:
            return fail(ErrorKind.INVALID_HANDLE, what, f"argument {i} of kernel {kernel.name!r}: {a!r} was freed",
                        "VULKAN")
        try:
            _, base = _live_buffer(a, what, device)
        except (Error, TypeError):
            return buffer_error(f"argument {i} of kernel {kernel.name!r}", a, "VULKAN", what)
        if base % device.min_storage_offset:
            return fail(ErrorKind.INVALID_VALUE, what, f"argument {i}: a storage buffer's offset must be a multiple "
                        f"of {device.min_storage_offset} bytes (minStorageBufferOffsetAlignment), not {base}",
                        "VULKAN")
        root: Any = a
        while not isinstance(root, VulkanAllocation):
            root = getattr(root, "block", None) or getattr(root, "parent", None) or getattr(root, "_parent", None)
            if root is None:
                return buffer_error(f"argument {i} of kernel {kernel.name!r}", a, "VULKAN", what)
        return (root._serial or _serial(root), base, a.nbytes)

    def _descriptor_set(self, kernel: VulkanKernel, buffers: list[tuple[Any, int, int]], key: tuple[Any, ...]) -> Any:
        """A descriptor set of the kernel's layout with its storage buffers written, cached under ``key`` (the
        kernel and its buffers' serials: never reused, so a freed buffer's sets are never bound again); past
        ``_SETS`` entries the cache is emptied, its sets freed once the batch being recorded completes."""
        if len(self._sets) >= _SETS:
            for (set_key, sets) in list(self._sets.items()):
                self._resources.append(self._freer(sets))
            self._sets.clear()
            self._prep = None  # (its set is among those freed)
        out = _written_set(self._api, self.device.handle, self._dpools, kernel, buffers, 0x1, 512)
        dset = out[0]
        self._set_pools[dset] = self._dpools[-1]
        self._sets[key] = out
        return out

    def _freer(self, sets: Any) -> Any:
        raw, h, pool = self._api.raw, self.device.handle, self._set_pools.pop(sets[0])
        return lambda: raw.vkFreeDescriptorSets(h, pool, 1, sets)

    # ---------------------------------------------------------------- events and ordering
    def record_event(self) -> VulkanEvent:
        self.device._check_open("Stream.record_event")
        if self._capture is not None:
            raise self._capture_error("Stream.record_event")
        return self._event()

    def _event(self) -> VulkanEvent:
        with self._lock:
            slot = self._slot
            self._slot = (slot + 1) % _QUERIES
            cb = self._record()
            if self.device.timestamps:
                raw = self._api.raw
                raw.vkCmdResetQueryPool(cb, self._queries, slot, 1)
                raw.vkCmdWriteTimestamp(cb, _BOTTOM_OF_PIPE, self._queries, slot)
            value = self._submit()
        return VulkanEvent(self, value, slot)

    def _pool_fence(self) -> VulkanEvent | None:
        with self._lock:
            if self._cb is None and self._seen >= self.value:
                return None
        return self._event()

    def wait_event(self, event: Event) -> None:
        self.device._check_open("Stream.wait_event")
        if self._capture is not None:
            raise self._capture_error("Stream.wait_event")
        if not isinstance(event, VulkanEvent):
            raise fail(ErrorKind.INVALID_VALUE, "Stream.wait_event", "Stream.wait_event needs a Vulkan event",
                       "VULKAN")
        if event.stream is self:
            return  # (in order already)
        if event.stream.device is not self.device:  # (another VkDevice's semaphore: the submission crashes)
            raise foreign(event.stream.device, "Stream.wait_event", f"{event!r} is not an event of {self.device!r}; "
                          "order streams of two devices by synchronizing the first", "VULKAN")
        with self._lock:
            if self._cb is not None:
                self._submit()
            self._waits.append((event.stream._timeline, event.value))

    def synchronize(self) -> None:
        if self.device._closed:
            raise self.device._closed_error("Stream.synchronize")
        if self._capture is not None:
            raise self._capture_error("Stream.synchronize")
        with self._lock:
            if self._cb is not None or self._waits:
                self._submit()
            value = self.value
            self._prep = None  # (it holds the launch's arguments alive)
        self._wait(value)
        state = self.__dict__.get("_callback_state")
        if state is not None and state.wait_errors:
            self._check_callback_waits("Stream.synchronize")

    def query(self) -> bool:
        self.device._check_open("Stream.query")
        if self._capture is not None:
            raise self._capture_error("Stream.query")
        with self._lock:
            if self._cb is not None or self._waits:
                self._submit()
            value = self.value
        done = self._reached(value, False)
        if done:
            self._prep = None  # (idle: as synchronize, it lets the launch's arguments go)
        return done


class VulkanGraph(Graph):
    """Work captured from a stream (``VulkanStream.capture``): one command buffer (``SIMULTANEOUS_USE``, of a pool
    of its own) holding the captured dispatches, copies and fills, with the descriptor sets and staging buffers
    they use.  ``launch(stream)`` submits it on a stream of the same device, in that stream's order (it may be
    pending on several streams at once); ``close()`` waits for its submissions, then releases it."""

    def __init__(self, stream: VulkanStream) -> None:
        device = stream.device
        api, ffi, raw = device.api, device.api.ffi, device.api.raw
        S = api.vk.VkStructureType
        self.device = device
        self._api = api
        h = device.handle
        pci = ffi.new("VkCommandPoolCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                                    "queueFamilyIndex": device.family})
        out = ffi.new("VkCommandPool *")
        api.check(raw.vkCreateCommandPool(h, pci, ffi.NULL, out), "vkCreateCommandPool")
        self._pool = out[0]
        self._dpools: list[Any] = []
        self._resources: list[Any] = []
        self._kernels: list[Any] = []  # (their pipelines are bound in the command buffer)
        # the allocations its commands use: kept alive, and a replay refused once one was freed (it would run on
        # a destroyed VkBuffer: lavapipe crashed the process)
        self._held = {}
        self._uses: list[tuple[Any, int]] = []  # (stream, value) of each submission
        device._owner.retain()
        self._fin = weakref.finalize(self, _destroy_graph, device._owner, self._pool, self._dpools, self._resources)
        self._fin.atexit = False  # (as the device's)
        ai = ffi.new("VkCommandBufferAllocateInfo *", {
            "sType": S.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, "commandPool": self._pool, "level": 0,
            "commandBufferCount": 1})
        cout = ffi.new("VkCommandBuffer *")
        api.check(raw.vkAllocateCommandBuffers(h, ai, cout), "vkAllocateCommandBuffers")
        self.command_buffer = cout[0]
        bi = ffi.new("VkCommandBufferBeginInfo *", {"sType": S.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                                    "flags": 0x4})  # SIMULTANEOUS_USE
        api.check(raw.vkBeginCommandBuffer(self.command_buffer, bi), "vkBeginCommandBuffer")
        self._count = 0
        self._ended = False
        self._barrier = stream._barrier

    def _record(self) -> Any:
        cb = self.command_buffer
        if self._count:
            ffi = self._api.ffi
            self._api.raw.vkCmdPipelineBarrier(cb, _ALL_COMMANDS, _ALL_COMMANDS, 0, 1, self._barrier, 0, ffi.NULL, 0,
                                               ffi.NULL)
        self._count += 1
        return cb

    def _descriptor_set(self, kernel: VulkanKernel, buffers: list[tuple[Any, int, int]]) -> Any:
        """A descriptor set of the graph's own (the stream's cache frees its sets; a graph's live with it)."""
        self._kernels.append(kernel)
        return _written_set(self._api, self.device.handle, self._dpools, kernel, buffers, 0, 128)

    def _end(self) -> None:
        self._api.check(self._api.raw.vkEndCommandBuffer(self.command_buffer), "vkEndCommandBuffer")
        self._ended = True

    def launch(self, stream: Stream | None = None) -> None:
        what = "Graph.launch"
        if not self._fin.alive or not self._ended:
            raise fail(ErrorKind.INVALID_HANDLE, what, "the graph was closed (or its capture failed)", "VULKAN")
        device = self.device
        if device._closed:
            raise device._closed_error(what)
        if not isinstance(stream, VulkanStream) or stream.device is not device:
            raise fail(ErrorKind.INVALID_VALUE, what, f"{stream!r:.80} is not a stream of {device!r}", "VULKAN")
        if stream._capture is not None:
            raise stream._capture_error(what)
        freed = self._freed_error(what, "VULKAN")
        if freed is not None:
            raise freed
        with stream._lock:
            if stream._cb is not None:
                stream._submit()
            value = stream._queue(self.command_buffer, False, [lambda graph=self: None])  # (holds the graph)
            device._dirty = True
        self._uses = [(s, v) for s, v in self._uses if v > s._seen] + [(stream, value)]

    def close(self) -> None:
        if not self._fin.alive:
            return
        for s, v in self._uses:
            s._wait(v)
        self._uses = []
        self._held = {}
        self._fin()



def _written_set(api: Any, h: Any, dpools: list[Any], kernel: Any, buffers: list[tuple[Any, int, int]],
                 pool_flags: int, max_sets: int) -> Any:
    """A descriptor set (``VkDescriptorSet[1]``) of ``kernel``'s layout with its storage buffers written, from the
    last of ``dpools``, or from a new pool appended to them (``pool_flags``: FREE_DESCRIPTOR_SET where its sets are
    freed one by one; ``max_sets`` sets of 8 storage buffers each) when that one is full."""
    ffi, raw, S = api.ffi, api.raw, api.vk.VkStructureType
    layouts = ffi.new("VkDescriptorSetLayout[1]", [kernel.set_layout])
    out = ffi.new("VkDescriptorSet[1]")
    code = -1
    if dpools:
        ai = ffi.new("VkDescriptorSetAllocateInfo *", {
            "sType": S.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, "descriptorPool": dpools[-1],
            "descriptorSetCount": 1, "pSetLayouts": layouts})
        code = raw.vkAllocateDescriptorSets(h, ai, out)
    if code != 0:
        size = ffi.new("VkDescriptorPoolSize *", {"type": 7, "descriptorCount": 8 * max_sets})  # STORAGE_BUFFER
        pci = ffi.new("VkDescriptorPoolCreateInfo *", {
            "sType": S.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, "flags": pool_flags, "maxSets": max_sets,
            "poolSizeCount": 1, "pPoolSizes": size})
        pout = ffi.new("VkDescriptorPool *")
        api.check(raw.vkCreateDescriptorPool(h, pci, ffi.NULL, pout), "vkCreateDescriptorPool")
        dpools.append(pout[0])
        ai = ffi.new("VkDescriptorSetAllocateInfo *", {
            "sType": S.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, "descriptorPool": pout[0],
            "descriptorSetCount": 1, "pSetLayouts": layouts})
        api.check(raw.vkAllocateDescriptorSets(h, ai, out), "vkAllocateDescriptorSets")
    n = len(buffers)
    infos = ffi.new("VkDescriptorBufferInfo[]", [{"buffer": b, "offset": o, "range": r} for b, o, r in buffers])
    writes = ffi.new("VkWriteDescriptorSet[]", [{
        "sType": S.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "dstSet": out[0], "dstBinding": kernel.bindings[i],
        "descriptorCount": 1, "descriptorType": 7, "pBufferInfo": infos + i} for i in range(n)])
    raw.vkUpdateDescriptorSets(h, n, writes, 0, ffi.NULL)
    return out

def _destroy_graph(owner: Any, pool: Any, dpools: list[Any], resources: list[Any]) -> None:
    api, h = owner.api, owner.handle
    raw, null = api.raw, api.ffi.NULL
    for r in resources:
        r()
    for p in dpools:
        raw.vkDestroyDescriptorPool(h, p, null)
    raw.vkDestroyCommandPool(h, pool, null)
    owner.release()


def _mapping(a: Any) -> int:
    """The host address of the mapping of an allocation's memory (its whole allocation's, for a slice or a pool
    block) where it is host-coherent and mapped, else 0."""
    t = type(a)
    if t is VulkanAllocation:
        return a._map  # type: ignore[no-any-return]
    if t is PooledAllocation:
        return _mapping(a.block)
    return int(getattr(a, "_map", 0) or 0)


def _live_buffer(a: Any, what: str, device: VulkanDevice) -> tuple[Any, int]:
    """The ``VkBuffer`` and byte offset of an allocation (pooled, sliced or not) for use on ``device``:
    INVALID_HANDLE if it was freed or the device closed, INVALID_VALUE if another device's, TypeError if not an
    allocation."""
    t = type(a)
    if t is PooledAllocation:
        if a._freed:
            a._check_live(what)
        return _live_buffer(a.block, what, device)
    if not isinstance(a, Allocation):
        raise TypeError(f"{what}: expected a Vulkan allocation, got {t.__name__} ({a!r:.80})")
    if a._freed:
        a._check_live(what)
    if device._closed:
        raise device._closed_error(what)
    buf = getattr(a, "buffer", None)
    owner = a.device
    if buf is None or getattr(owner, "kind", None) is not _KIND:
        raise fail(ErrorKind.INVALID_VALUE, what, f"{a!r:.80} is not a Vulkan allocation", "VULKAN")
    if owner is not device:
        raise foreign(owner, what, f"{a!r} belongs to another device than the stream", "VULKAN")
    return buf, int(getattr(a, "offset", 0))
