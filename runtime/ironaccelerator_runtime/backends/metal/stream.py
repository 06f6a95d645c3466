"""Metal streams (an ``MTLCommandQueue``) and events (command buffers that signal the stream's ``MTLSharedEvent``).

Launches are batched: each is a compute encoder in the stream's open command buffer, committed by the ``_BATCH``-th
launch (16) or first thing by any other operation of the stream (``synchronize``, ``query``, ``record_event`` and
so ``add_callback`` and ``wait``, ``wait_event``, a copy or fill, the memory pool's fences, the stream's drop), so
the work is never left uncommitted past the next of them.  Copies, fills, events and waits are one command buffer
each."""

from __future__ import annotations

import threading
from typing import Any, Callable

from ironaccelerator._core import ErrorKind, MemoryKind
from ironaccelerator_runtime.errors import Error, fail
from ironaccelerator_runtime.traits.checks import foreign
from ironaccelerator_runtime.kernel_args import LocalMemory, local_error, shared_mem_error, where
from ironaccelerator_runtime.traits import (
    Allocation, Event, KernelLaunch, LaunchDims, PooledAllocation, Result, Stream, check_span, device_span,
    host_span, fill_pattern, host_view, not_a_launch,
)

from .device import MetalDevice
from .memory import _arg_buffer, _buffer_of
from .module import MetalKernel, _value
from .tables import _BATCH, _COMPLETED, _ERROR, _KIND, _NAME, _PRUNE, _SHARED


class MetalEvent(Event):
    """A command buffer committed after the work before it on ``stream``'s queue, signalling the stream's shared
    event to ``value``.  Holds one reference to the command buffer (``_cb``)."""

    def __init__(self, stream: MetalStream, cb: Any, value: int) -> None:
        self.stream = stream
        self.device = stream.device
        self._cb = cb
        self.value = value

    def __del__(self) -> None:
        cb, self._cb = getattr(self, "_cb", None), None
        if cb is not None:
            try:
                self.stream._api.release(cb)
            except Exception:  # interpreter shutdown
                pass

    def query(self) -> bool:
        # Whether the work before the event is done: its command buffer completed, or the shared event it signals
        # reached its value (the signal comes before the command buffer's status changes).
        self.device._check_open("Event.query")
        U = self.stream._api.U
        return int(U.MTLCommandBuffer_status(self._cb)) >= _COMPLETED or \
            int(U.MTLSharedEvent_signaledValue(self.stream.shared_event.handle)) >= self.value

    def synchronize(self) -> None:
        self.device._check_open("Event.synchronize")
        a = self.stream._api
        a.U.MTLCommandBuffer_waitUntilCompleted(self._cb)
        self.stream._check_failed("Event.synchronize")

    def _wait_for_callback(self) -> None:
        """Wait until the event's command buffer has completed, failed or not: a failure is the stream's to report
        (its ``synchronize``), not the host callback's, and is left for it."""
        self.device._check_open("Stream.add_callback")
        self.stream._api.U.MTLCommandBuffer_waitUntilCompleted(self._cb)

    def gpu_end_time(self) -> float:
        """When the GPU finished the work before this event: its command buffer's ``GPUEndTime``.

        :meth:`elapsed_ms` is the difference of two of these (and waits first).

        Returns:
            The time in seconds, on the GPU's clock (meaningful only as a difference).

        Raises:
            Error: ``ErrorKind.NOT_READY`` when the event has not completed yet (:meth:`query` is False);
                ``ErrorKind.INVALID_HANDLE`` when the device was closed.

        Backends:
            Metal only.
        """
        if not self.query():
            raise fail(ErrorKind.NOT_READY, "Event.elapsed_ms", "the event has not completed", _NAME)
        U = self.stream._api.U
        U.MTLCommandBuffer_waitUntilCompleted(self._cb)  # signalled: completes at once
        return float(U.MTLCommandBuffer_GPUEndTime(self._cb))

    def elapsed_ms(self, end: Event) -> float:
        if not isinstance(end, MetalEvent):
            raise fail(ErrorKind.INVALID_VALUE, "Event.elapsed_ms", f"{end!r} is not a Metal event", _NAME)
        self._elapsed_pair(end)  # (either device closed, another device's event; both waited for)
        return (end.gpu_end_time() - self.gpu_end_time()) * 1000.0


_NSUINTEGER_MAX = 2**64 - 1
# a launch's plan: (the pipeline's id, grid, block, the buffer arguments (id, offset, index), the value arguments
# (bytes, length, index), the kernel, the LaunchDims)
_Plan = tuple[Any, tuple[int, int, int], tuple[int, int, int], tuple[tuple[Any, int, int], ...],
              tuple[tuple[bytes, int, int], ...], MetalKernel, LaunchDims]


def _senders(a: Any, queue: Any, pending: list[Any], batch: list[Any], lock: Any) \
        -> tuple[Callable[[_Plan, bool], int], Callable[[], int]]:
    """The hot path of a stream's launches (the trampolines bound here, read as free variables).

    ``send(plan, kept)``: the messages of one launch, a compute encoder in the stream's open command buffer
    (``batch``: [the command buffer (one reference) or None, the launches encoded in it, whether a checked launch
    is among them]), made by the first launch after a commit; the ``_BATCH``-th launch commits it.  ``flush()``
    commits it now (every other operation of the stream does first: work is never left uncommitted past the
    stream's next synchronize, query, event, wait, copy or fill).  A committed command buffer with a checked launch
    in it moves its reference to ``pending`` (kept until seen complete, for its failure to be reported); one of
    unchecked launches only is left to the queue.  Both return ``len(pending)`` after keeping one, else 0.
    ``lock`` (the stream's ``_batch_lock``) guards ``batch``: one thread encodes at a time."""
    U = a.U
    push, pop, retain, release, append = a.push, a.pop, a.retain, a.release, pending.append
    acquire, unlock = lock.acquire, lock.release
    command_buffer, compute_encoder = U.MTLCommandQueue_commandBuffer, U.MTLCommandBuffer_computeCommandEncoder
    set_pipeline = U.MTLComputeCommandEncoder_setComputePipelineState_
    set_buffer, set_bytes = U.MTLComputeCommandEncoder_setBuffer_offset_atIndex_, \
        U.MTLComputeCommandEncoder_setBytes_length_atIndex_
    dispatch = U.MTLComputeCommandEncoder_dispatchThreadgroups_threadsPerThreadgroup_
    end_encoding, commit = U.MTLCommandEncoder_endEncoding, U.MTLCommandBuffer_commit

    def commit_open() -> int:  # (lock held)
        cb = batch[0]
        if cb is None:
            return 0
        commit(cb)
        batch[0] = None  # (after the commit: _flush reads it without the lock, and one that sees None goes on to
        batch[1] = 0  # commit what must come after this command buffer)
        if batch[2]:
            batch[2] = False
            append(cb)  # (its reference: atomic; only the reaper, which deletes from the front, takes the list)
            return len(pending)
        release(cb)  # the queue holds it until it has run
        return 0

    def send(plan: _Plan, kept: bool) -> int:
        pid, grid, block, buffers, values, _, _ = plan
        acquire()
        try:
            pool = push()
            try:
                cb = batch[0]
                if cb is None:
                    cb = command_buffer(queue)
                    retain(cb)  # (autoreleased: the pool below is popped before it is committed)
                    batch[0] = cb
                enc = compute_encoder(cb)
                try:
                    set_pipeline(enc, pid)
                    for bid, offset, index in buffers:
                        set_buffer(enc, bid, offset, index)
                    for v, n, index in values:
                        set_bytes(enc, v, n, index)
                    dispatch(enc, grid, block)
                finally:
                    end_encoding(enc)  # (always: a command buffer takes one encoder at a time)
                if kept:
                    batch[2] = True
                n = batch[1] + 1
                if n < _BATCH:
                    batch[1] = n
                    return 0
                return commit_open()
            finally:
                pop(pool)
        finally:
            unlock()

    def flush() -> int:
        acquire()
        try:
            return commit_open()
        finally:
            unlock()

    return send, flush


class MetalStream(Stream):
    """An ``MTLCommandQueue`` (see the module docstring).  ``_pending``: the committed command buffers not yet seen
    complete (one reference each), whose failures :meth:`synchronize` reports; ``_batch``: the open command buffer
    of the launches (``_senders``)."""

    device: MetalDevice

    def __init__(self, device: MetalDevice) -> None:
        a = device.api
        self.device = device
        self._api = a
        self.queue = a.cast(device.handle.newCommandQueue(), a.M.MTLCommandQueue)
        self._qid = self.queue.handle
        self.shared_event = a.cast(device.handle.newSharedEvent(), a.M.MTLSharedEvent)
        self._value = 0
        self._pending: list[Any] = []
        self._untracked = False  # unchecked launches committed since the last fence
        self._reap_at = _PRUNE  # len(_pending) at which _keep next lets go of the completed ones
        # the last launch: (KernelLaunch, its allocations (and pool blocks), its plan, whether the checked launch
        # made the plan)
        self._cache: tuple[Any, tuple[Any, ...], _Plan, bool] | None = None
        self._failed: list[str] = []
        # guards _pending, _value, _untracked and _failed: the owner's thread and others (a MemoryPool fencing the
        # stream for another stream's allocation, a callback thread's Event.synchronize) may both change them; one
        # reaper at a time (two would release the same completed command buffers: a freed MTLCommandBuffer messaged)
        self._state = threading.RLock()
        # the hot path's trampolines, bound once
        U = a.U
        self._commandBuffer = U.MTLCommandQueue_commandBuffer
        self._endEncoding = U.MTLCommandEncoder_endEncoding
        self._commit = U.MTLCommandBuffer_commit
        # the open command buffer of the launches (see _senders), and its lock (taken after _state, never before)
        self._batch: list[Any] = [None, 0, False]
        self._batch_lock = threading.Lock()
        self._send, self._flush_batch = _senders(a, self._qid, self._pending, self._batch, self._batch_lock)

    def __del__(self) -> None:
        try:
            if getattr(self, "_batch", (None,))[0] is not None:
                a = self._api
                pool = a.push()
                try:
                    self._flush()  # (the work was asked for: it runs, the queue holding it)
                finally:
                    a.pop(pool)
        except Exception:  # interpreter shutdown
            pass
        pending, self._pending = getattr(self, "_pending", []), []
        try:
            for cb in pending:
                self._api.release(cb)
        except Exception:  # interpreter shutdown
            pass

    # ---- command buffers
    def _flush(self) -> None:
        """Commit the open command buffer of the launches, if any (before any other command buffer of the stream,
        which must come after them, and before any wait for the stream's work)."""
        if self._batch[0] is not None and self._flush_batch() >= self._reap_at:
            self._prune()

    def _keep(self, cb: Any) -> None:
        """Hold a committed (autoreleased) command buffer until it is seen complete."""
        self._api.retain(cb)
        with self._state:
            pending = self._pending
            pending.append(cb)
            if len(pending) >= self._reap_at:
                self._reap(False)
                self._reap_at = len(self._pending) + _PRUNE

    def _reap(self, wait: bool) -> None:
        """Let go of the completed command buffers (all, waiting for them, when ``wait``), noting failures.  A queue
        completes its command buffers in commit order, so the first one not complete ends the scan."""
        with self._state:
            a = self._api
            U = a.U
            pending = self._pending
            done = 0
            for cb in pending:
                if wait:
                    U.MTLCommandBuffer_waitUntilCompleted(cb)
                status = int(U.MTLCommandBuffer_status(cb))
                if status < _COMPLETED:
                    break
                if status == _ERROR:
                    self._failed.append(self._cb_error(cb))
                a.release(cb)
                done += 1
            del pending[:done]

    def _cb_error(self, cb: Any) -> str:
        a = self._api
        pool = a.push()
        try:
            e = a.U.MTLCommandBuffer_error(cb)
            if e == a.NULL:
                return "a command buffer failed (no error)"
            d = a.U.NSError_localizedDescription(e)
            text = a.ffi.string(a.U.NSString_UTF8String(d)).decode("utf-8", "replace") if d != a.NULL else ""
            return f"{a.ffi.string(a.U.NSString_UTF8String(a.U.NSError_domain(e))).decode()} " \
                   f"{int(a.U.NSError_code(e))}: {text}"
        finally:
            a.pop(pool)

    def _check_failed(self, what: str) -> None:
        with self._state:
            self._reap(False)
            msgs, self._failed = self._failed, []
        if msgs:
            raise fail(ErrorKind.LAUNCH_FAILED, what, f"{len(msgs)} command buffer(s) failed: "
                       + "; ".join(msgs), _NAME)

    def _blit(self, encode: Callable[[Any, Any], None]) -> Any:
        """One command buffer with a blit encoder filled by ``encode(a, encoder)``, committed and kept."""
        self._flush()
        a = self._api
        pool = a.push()
        try:
            cb = self._commandBuffer(self._qid)
            enc = a.U.MTLCommandBuffer_blitCommandEncoder(cb)
            encode(a, enc)
            self._endEncoding(enc)
            self._commit(cb)
            self._keep(cb)
            self.device._dirty = True
            return cb
        finally:
            a.pop(pool)

    def _staging(self, nbytes: int, what: str) -> Any:
        a = self._api
        h = a.U.MTLDevice_newBufferWithLength_options_(self.device.handle.handle, nbytes, _SHARED)
        if h == a.NULL:
            raise fail(ErrorKind.OUT_OF_MEMORY, what, f"no shared staging buffer of {nbytes} bytes", _NAME)
        return h

    def _live(self, what: str) -> None:
        if self.device._closed:
            raise self.device._closed_error(what)

    # ---- copies
    def copy_from_host(self, dst: Allocation, src: Any, nbytes: int | None = None, *, dst_offset: int = 0,
                       src_offset: int = 0) -> None:
        what = "Stream.copy_from_host"
        self._live(what)
        bid, base = _buffer_of(dst, self.device, what)
        view = host_view(src, backend=_KIND, function=what)
        so, at, n = host_span(view.nbytes, dst.nbytes, nbytes, src_offset, dst_offset, what, _KIND, to_device=True)
        if n == 0:
            return
        at += base
        a = self._api
        staging = self._staging(n, what)
        try:
            a.ffi.memmove(a.U.MTLBuffer_contents(staging), view[so:so + n], n)
            self._blit(lambda a, enc: a.U.MTLBlitCommandEncoder_copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size_(
                enc, staging, 0, bid, at, n))
        finally:
            a.release(staging)  # the command buffer holds it until the copy ran

    def copy_to_host(self, dst: Any, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
                     src_offset: int = 0) -> None:
        what = "Stream.copy_to_host"
        self._live(what)
        bid, base = _buffer_of(src, self.device, what)
        view = host_view(dst, writable=True, backend=_KIND, function=what)
        do, at, n = host_span(view.nbytes, src.nbytes, nbytes, dst_offset, src_offset, what, _KIND, to_device=False)
        if n == 0:
            return
        at += base
        a = self._api
        out = view[do:do + n]
        if src.kind is MemoryKind.UNIFIED:  # shared storage: read its contents once the queue is done with it
            self.synchronize()
            a.ffi.memmove(out, a.ffi.buffer(a.ffi.cast("char *", a.U.MTLBuffer_contents(bid)) + at, n), n)
            return
        staging = self._staging(n, what)
        try:
            self._blit(lambda a, enc: a.U.MTLBlitCommandEncoder_copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size_(
                enc, bid, at, staging, 0, n))
            self.synchronize()
            a.ffi.memmove(out, a.ffi.buffer(a.ffi.cast("char *", a.U.MTLBuffer_contents(staging)), n), n)
        finally:
            a.release(staging)

    def copy(self, dst: Allocation, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
             src_offset: int = 0) -> None:
        what = "Stream.copy"
        self._live(what)
        d, dbase = _buffer_of(dst, self.device, what)
        s, sbase = _buffer_of(src, self.device, what)
        so, do, n = device_span(dst, src, nbytes, dst_offset, src_offset, _KIND)
        if n:
            self._blit(lambda a, enc: a.U.MTLBlitCommandEncoder_copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size_(
                enc, s, sbase + so, d, dbase + do, n))

    def fill(self, dst: Allocation, value: int, nbytes: int | None = None, offset: int = 0, *,
             width: int = 1) -> None:
        # The blit encoder's ``fillBuffer:range:value:``, which fills bytes: a 2- or 4-byte pattern whose bytes
        # differ is UNSUPPORTED (one whose bytes are all the same, such as 0, is that byte).
        what = "Stream.fill"
        self._live(what)
        d, base = _buffer_of(dst, self.device, what)
        v, w = fill_pattern(value, width, what, _KIND)
        o, n = check_span(dst.nbytes, offset, nbytes, "dst", what, _KIND, width=w)
        pattern = v.to_bytes(w, "little")
        if pattern != pattern[:1] * w:
            raise fail(ErrorKind.UNSUPPORTED, what, f"Metal's blit encoder fills bytes; the {w}-byte pattern "
                       f"{v:#x} is not one byte repeated", _NAME)
        if n:
            self._blit(lambda a, enc: a.U.MTLBlitCommandEncoder_fillBuffer_range_value_(enc, d, (base + o, n),
                                                                                         pattern[0]))

    # ---- launches
    def _pack(self, launch: Any, what: str) -> _Plan:
        """The checks of a launch (before any message) and its plan: (kernel, dims, the buffer arguments
        ``(id, offset, index)``, the value arguments ``(bytes, length, index)``)."""
        try:
            kernel, dims, args = launch
        except (TypeError, ValueError):
            raise not_a_launch(launch, what) from None
        if not isinstance(kernel, MetalKernel) or kernel.device is not self.device:
            raise foreign(getattr(kernel, "device", None), what, f"{kernel!r} is not a kernel of "
                          f"{self.device.descriptor.id}", _NAME)
        if not isinstance(dims, LaunchDims):
            raise fail(ErrorKind.INVALID_VALUE, what, f"dims must be a LaunchDims, not {type(dims).__name__}", _NAME)
        if dims.cooperative or dims.cluster is not None:  # (Metal has neither grid sync nor clusters)
            raise dims.options_error(_KIND, what)
        if dims.shared_mem:  # never silently ignored (checked and unchecked)
            raise shared_mem_error(_NAME, what, dims.shared_mem)
        b = dims.block
        if b[0] * b[1] * b[2] > kernel.max_threads:
            raise fail(ErrorKind.INVALID_VALUE, what, f"a threadgroup of {b} has more than the pipeline's "
                       f"maxTotalThreadsPerThreadgroup ({kernel.max_threads}) threads", _NAME)
        slots = kernel.slots
        if slots is not None and len(args) != len(slots):
            raise fail(ErrorKind.INVALID_VALUE, what, f"{kernel.name} takes {len(slots)} arguments "
                       f"([[buffer(i)]] parameters), got {len(args)}", _NAME)
        buffers: list[tuple[Any, int, int]] = []
        values: list[tuple[bytes, int, int]] = []
        params = kernel._params
        device = self.device
        for i, x in enumerate(args):
            slot = slots[i] if slots is not None else None
            index = slot.index if slot is not None else i
            if type(x) is LocalMemory:
                raise local_error(_NAME, what, where(i, kernel.name))
            if slot.buffer if slot is not None else isinstance(x, Allocation):
                bid, offset = _arg_buffer(x, device, i, kernel.name, what)
                buffers.append((bid, offset, index))
            else:
                v = _value(x, slot, params[i] if params is not None else None, i, kernel.name, what)
                values.append((v, len(v), index))
        return kernel._pid, dims.grid, dims.block, tuple(buffers), tuple(values), kernel, dims

    def _remember(self, launch: Any, plan: _Plan, checked: bool) -> None:
        """Keep a launch's plan for the next launch of the same KernelLaunch (reused by ``launch`` and
        ``launch_unchecked``, inline: the hot path) when it cannot change: a KernelLaunch
        (its arguments are a tuple) without a mutable value (bytearray).  ``checked``: the plan passed the checked
        launch's limits (``LaunchDims.validate``), which an unchecked launch skips.  The stream holds the launch
        (and its allocations: for a pool block, the block too, whose ``_freed`` a trim sets) until the next one."""
        if type(launch) is KernelLaunch and not any(isinstance(x, bytearray) for x in launch[2]):
            deps: list[Any] = []
            for x in launch[2]:
                if isinstance(x, Allocation):
                    deps.append(x)
                    if type(x) is PooledAllocation:
                        deps.append(x.block)
            self._cache = (launch, tuple(deps), plan, checked)
        else:
            self._cache = None

    def _prune(self) -> None:
        """Let go of the completed command buffers once ``_PRUNE`` more are kept (the checked launch's ``_keep``)."""
        with self._state:
            self._reap(False)
            self._reap_at = len(self._pending) + _PRUNE

    def launch(self, launch: Any, *parts: Any) -> None:
        # the hot path: a repeated KernelLaunch (the last one this stream checked, none of its allocations freed)
        # goes straight to its messages
        if parts:  # launch(kernel, dims, *args), as on CUDA/HIP
            launch = KernelLaunch(launch, parts[0], parts[1:])
        device = self.device
        if device._closed:
            raise device._closed_error("Stream.launch")
        cached = self._cache
        if cached is not None and cached[0] is launch and cached[3]:
            for x in cached[1]:
                if x._freed:
                    plan = self._checked_plan(launch)
                    break
            else:
                plan = cached[2]
        else:
            plan = self._checked_plan(launch)
        n = self._send(plan, True)
        device._dirty = True  # (after the enqueue: the device's pool fence, MetalDevice._pool_fence)
        if n >= self._reap_at:
            self._prune()

    def _checked_plan(self, launch: Any) -> _Plan:
        plan = self._pack(launch, "Stream.launch")
        plan[6].validate(self.device.descriptor.limits, _KIND, "Stream.launch")
        self._remember(launch, plan, True)
        return plan

    def _unchecked_plan(self, launch: Any) -> _Plan | Error:
        what = "Stream.launch_unchecked"
        try:
            plan = self._pack(launch, what)
        except Error as e:
            return e.with_traceback(None)  # (its frames would keep the stream and the launch alive)
        g, b = plan[1], plan[2]
        if max(g + b) > _NSUINTEGER_MAX:  # MTLSize cannot hold it: refused before the encoder is made (one
            # left without endEncoding would be released mid-encoding)
            return fail(ErrorKind.INVALID_VALUE, what, f"grid={g}, block={b}: a dimension does "
                        "not fit MTLSize (64-bit NSUInteger)", _NAME)
        limits = self.device.descriptor.limits
        if plan[6].threads > limits.max_work_items or g[0] > limits.max_grid[0] or g[1] > limits.max_grid[1] \
                or g[2] > limits.max_grid[2]:  # (a few compares, on packing only: the device would try them all)
            return fail(ErrorKind.INVALID_VALUE, what, f"{plan[6]} is more than the device "
                        f"runs in one dispatch (DeviceLimits max_grid {limits.max_grid}, max_work_items "
                        f"{limits.max_work_items})", _NAME)
        self._remember(launch, plan, False)  # (a checked plan of the launch was reused, not repacked, if it could be)
        return plan

    def launch_unchecked(self, launch: Any, *parts: Any) -> Result[None]:
        # The launch without LaunchDims validation against the device's limits; still refused (an Error returned,
        # before any message): a freed allocation, a wrong argument count, a threadgroup over the pipeline's
        # maxTotalThreadsPerThreadgroup, a closed device.  A failure of its command buffer is not reported (as on
        # the other backends): only the queue holds it (_untracked: synchronize and query then commit an empty
        # command buffer to wait for).
        if parts:  # launch(kernel, dims, *args), as on CUDA/HIP
            launch = KernelLaunch(launch, parts[0], parts[1:])
        device = self.device
        if device._closed:
            return device._closed_error("Stream.launch_unchecked")
        cached = self._cache
        if cached is not None and cached[0] is launch:
            for x in cached[1]:
                if x._freed:
                    plan = self._unchecked_plan(launch)
                    break
            else:
                plan = cached[2]
        else:
            plan = self._unchecked_plan(launch)
        if type(plan) is not tuple:
            return plan  # type: ignore[return-value]  # (the Error)
        self._send(plan, False)
        self._untracked = True
        device._dirty = True
        return None

    def _fence(self) -> None:
        """After untracked launches: an empty command buffer, kept, which completes after them (in-order queue).
        The open command buffer of the launches is committed first."""
        self._flush()
        if self._untracked:
            with self._state:
                if not self._untracked:
                    return
                self._untracked = False
            a = self._api
            pool = a.push()
            try:
                cb = self._commandBuffer(self._qid)
                self._commit(cb)
                self._keep(cb)
            finally:
                a.pop(pool)

    # ---- ordering
    def record_event(self) -> MetalEvent:
        what = "Stream.record_event"
        self._live(what)
        self._flush()
        a = self._api
        pool = a.push()
        try:
            with self._state:  # (values signalled in commit order)
                self._value += 1
                value = self._value
                cb = self._commandBuffer(self._qid)
                a.U.MTLCommandBuffer_encodeSignalEvent_value_(cb, self.shared_event.handle, value)
                self._commit(cb)
                a.retain(cb)  # the event's reference
                self._keep(cb)
        finally:
            a.pop(pool)
        return MetalEvent(self, cb, value)

    def wait_event(self, event: Event) -> None:
        what = "Stream.wait_event"
        self._live(what)
        if not isinstance(event, MetalEvent) or event.device is not self.device:
            raise foreign(getattr(event, "device", None), what, f"{event!r} is not an event of "
                          f"{self.device.descriptor.id}", _NAME)
        if event.stream is self:
            return  # in order already
        self._flush()
        a = self._api
        pool = a.push()
        try:
            cb = self._commandBuffer(self._qid)
            a.U.MTLCommandBuffer_encodeWaitForEvent_value_(cb, event.stream.shared_event.handle, event.value)
            self._commit(cb)
            self._keep(cb)
        finally:
            a.pop(pool)

    def synchronize(self) -> None:
        self._live("Stream.synchronize")
        self._fence()
        self._reap(True)
        self._check_failed("Stream.synchronize")
        self._check_callback_waits("Stream.synchronize")

    def query(self) -> bool:
        self._live("Stream.query")
        self._fence()
        with self._state:
            self._reap(False)
            return not self._pending

    def _pool_fence(self) -> MetalEvent | None:
        """(Called from any thread: under the stream's state lock.)"""
        with self._state:
            if self.query():
                return None
            return self.record_event()
