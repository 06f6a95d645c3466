"""OpenCL events and streams (in-order command queues): copies, fills, launches, markers and waits."""

from __future__ import annotations

import sys
import weakref
from functools import partial
from typing import Any

from ironaccelerator._core import ErrorKind
from ironaccelerator_runtime.errors import Error, fail
from ironaccelerator_runtime.traits.checks import foreign
from ironaccelerator_runtime.kernel_args import shared_mem_error
from ironaccelerator_runtime.traits import (
    Allocation, CopyRegion, Event, KernelLaunch, LaunchDims, PooledAllocation, Result, Stream, check_span,
    device_span, host_span, fill_pattern, host_view, not_a_launch,
)

from .args import _live_buffer, _plain_host, _set_args
from .device import OpenCLDevice
from .memory import _BUFFERS, _COMPILED
from .module import OpenCLKernel
from .tables import _KIND

_NONE = object()  # the launch-dims cache's key before the first launch


class OpenCLEvent(Event):
    """A marker in a stream (``clEnqueueMarkerWithWaitList``), made by ``OpenCLStream.record_event``, with the
    queue's profiling timestamps for ``elapsed_ms``.  (No host buffer waits on it: an OpenCL stream's host copies
    are done with the host buffer when they return.)"""

    def __init__(self, device: OpenCLDevice, handle: Any) -> None:
        self.device = device
        self.handle = handle
        self._finalizer = weakref.finalize(self, device.api.raw.clReleaseEvent, handle)

    def synchronize(self) -> None:
        self.device._check_open("Event.synchronize")
        api = self.device.api
        evs = api.ffi.new("cl_event[1]", [self.handle])
        api.check(api.raw.clWaitForEvents(1, evs), "clWaitForEvents")

    def query(self) -> bool:
        self.device._check_open("Event.query")
        api = self.device.api
        status = api.info_int("clGetEventInfo", self.handle, api.cl.CL_EVENT_COMMAND_EXECUTION_STATUS, "cl_int")
        return bool(status == api.cl.CL_COMPLETE)

    def _end_ns(self) -> int:
        api = self.device.api
        return api.info_int("clGetEventProfilingInfo", self.handle, api.cl.CL_PROFILING_COMMAND_END, "cl_ulong")

    def elapsed_ms(self, end: Event) -> float:
        if not isinstance(end, OpenCLEvent):
            raise fail(ErrorKind.INVALID_VALUE, "Event.elapsed_ms",
                       "Event.elapsed_ms needs another OpenCL event", "OPENCL")
        self._elapsed_pair(end)  # (either device closed, another device's event; both waited for)
        return (end._end_ns() - self._end_ns()) / 1e6


def _stream_gone(function: str) -> Error:
    """The Error of a compiled copy method called after its stream was dropped (and destroyed)."""
    return fail(ErrorKind.INVALID_HANDLE, function, "the stream of this copy method was dropped (and destroyed): keep "
                "the Stream while you copy on it", "OPENCL")


class OpenCLStream(Stream):
    """An in-order command queue (``clCreateCommandQueueWithProperties``) with profiling enabled, made by
    ``OpenCLDevice.create_stream``.

    Adds over :class:`~ironaccelerator.Stream`: ``queue`` (the ``cl_command_queue``); events carry the queue's
    profiling timestamps (``elapsed_ms``); ``prefetch`` is ``clEnqueueSVMMigrateMem`` of UNIFIED (SVM) memory
    (OpenCL 2.1 devices); 2-D/3-D copies are ``clEnqueueCopyBufferRect`` and its read/write twins.  ``capture()``
    (graphs) is ``UNSUPPORTED``: OpenCL has no stream capture.

    Copies to and from host memory (any Python buffer) are blocking reads and writes, synchronous with respect
    to the host as CUDA's copies of pageable memory are: ``copy_from_host`` returns once the source has been read,
    ``copy_to_host`` once the bytes are in the destination, both after the work enqueued before them; no host
    buffer is held past the call.  Device-to-device copies, fills and launches are asynchronous.
    """

    device: OpenCLDevice
    # for the stream's fences (MemoryPool, query): set after every enqueue of work, cleared by _pool_fence;
    # synchronize and query leave a mark of their own in it (truthy, as True: the pool still fences), and _idle is
    # the mark of the last one that saw the stream's work complete (query: the same mark still there, idle)
    _dirty: object = False
    _idle: object = None
    _pool_event: OpenCLEvent | None = None
    # whether work may be pending on the queue: set by every enqueue, cleared once the queue is seen empty (a
    # finish, or a blocking read, which returns after everything enqueued before it); synchronize finishes only then
    _pending = False

    def __init__(self, device: OpenCLDevice) -> None:
        api, ffi, cl = device.api, device.api.ffi, device.api.cl
        self.device = device
        self.api = api
        err = ffi.new("cl_int *")
        props = ffi.new("cl_queue_properties[3]", [cl.CL_QUEUE_PROPERTIES, cl.CL_QUEUE_PROFILING_ENABLE, 0])
        q = api.raw.clCreateCommandQueueWithProperties(device.context, device.handle, props, err)
        api.check(err[0], "clCreateCommandQueueWithProperties")
        self.queue = q
        self._finalizer = weakref.finalize(self, api.raw.clReleaseCommandQueue, q)
        # the hot paths' raw functions, resolved once
        raw = api.raw
        self._null = ffi.NULL
        self._from_buffer = ffi.from_buffer
        self._enqueue_kernel = raw.clEnqueueNDRangeKernel
        self._write = raw.clEnqueueWriteBuffer
        self._read = raw.clEnqueueReadBuffer
        self._finish = raw.clFinish
        self._limits = device.descriptor.limits
        np = sys.modules.get("numpy")  # copies test a numpy array (the common host buffer) inline
        self._ndarray: type | None = np.ndarray if np is not None else None
        # launch dimensions -> (global, local) size_t[3] arrays, and whether they passed validation;
        # _last is the entry of the last LaunchDims object seen (identity: the fast path for a reused launch)
        self._dims: dict[tuple[Any, ...], tuple[Any, Any, bool]] = {}
        self._last: tuple[Any, Any, Any, bool] = (_NONE, None, None, False)  # (dims None must not match it)
        self._copiers: tuple[Any, ...] = ()
        self._bind_copiers(device, np)
        device._streams.add(self)

    def _bind_copiers(self, device: OpenCLDevice, np: Any) -> None:
        """In API mode, ``copy_from_host`` and ``copy_to_host`` are compiled copiers (``_fast._host_copier``,
        ia_runtime.h; the spec's ``host_copy``), bound as instance attributes over the methods below: for a DEVICE
        allocation of this device (the compiled class) and a host buffer of a plain type (numpy arrays, bytes,
        bytearray, memoryview), with no offsets, the checks, the buffer export and the blocking
        ``clEnqueueWriteBuffer``/``clEnqueueReadBuffer`` run in C.  What they do not take (pool blocks, offsets,
        keywords, other host types, a freed allocation, a closed device) goes to the methods, which copy or
        raise as before.  None with ``IRONACCEL_TRACE`` (the C calls would go unlogged: no compiled class).  A
        copier holds its stream weakly (the stream holds it): one kept after its stream was dropped refuses,
        INVALID_HANDLE."""
        make = getattr(device._pool_fast, "_host_copier", None)
        if make is None or not _COMPILED or not device._allocators:
            return
        arrays = (np.ndarray,) if np is not None else ()
        ref, queue = weakref.ref(self), int(self.api.ffi.cast("uintptr_t", self.queue))
        cls = type(self)
        self._copiers = (
            make(True, ref, _COMPILED[0], device, queue, (bytes, bytearray, memoryview) + arrays,
                 cls.copy_from_host, partial(self.api.error, function="clEnqueueWriteBuffer"),
                 partial(_stream_gone, "Stream.copy_from_host")),
            make(False, ref, _COMPILED[0], device, queue, (bytearray, memoryview) + arrays,
                 cls.copy_to_host, partial(self.api.error, function="clEnqueueReadBuffer"),
                 partial(_stream_gone, "Stream.copy_to_host")))
        setattr(self, "copy_from_host", self._copiers[0])
        setattr(self, "copy_to_host", self._copiers[1])

    def _shut_copiers(self) -> None:
        """The device was closed: the methods again, which refuse (a copier kept by a caller takes them too)."""
        for copier in self._copiers:
            copier._shut()
        if self._copiers:
            del self.copy_from_host, self.copy_to_host
            self._copiers = ()

    # copies to and from host memory: blocking (synchronous with respect to the host, as CUDA's of pageable memory):
    # the call returns once the source was read (to the device) or the bytes are in the destination (to the host),
    # so no host buffer is held past it.  A non-blocking write and a clFinish inside copy_from_host measured no
    # faster in bench_opencl.py (docs/performance.md, stop 38).  In API mode the common case runs in C (the
    # compiled copiers _bind_copiers binds over these methods); these take the rest, with the same checks.
    def copy_from_host(self, dst: Allocation, src: Any, nbytes: int | None = None, *, dst_offset: int = 0,
                       src_offset: int = 0) -> None:
        device = self.device
        if type(dst) in _BUFFERS and not dst._freed and dst.device is device and not device._closed:
            buf = dst.buffer  # type: ignore[attr-defined]  # (_live_buffer's checks, inlined for the common case)
        else:
            buf = _live_buffer(dst, "Stream.copy_from_host", device)
        t = type(src)
        if t is self._ndarray:  # (_plain_host's test of a numpy array, inlined)
            if src.dtype.hasobject:
                host_view(src, backend=_KIND, function="Stream.copy_from_host")  # raises the descriptive Error
        elif t is not bytes and t is not bytearray and not _plain_host(src, t):
            host_view(src, backend=_KIND, function="Stream.copy_from_host")  # raises the descriptive Error
        try:  # any C-contiguous buffer (numpy arrays, bytes, memoryview): no memoryview/cast needed
            ptr = self._from_buffer(src)
        except (TypeError, ValueError, BufferError):
            ptr = self._from_buffer(host_view(src, backend=_KIND, function="Stream.copy_from_host"))
        n = len(ptr)
        at, src_ptr = 0, ptr
        if nbytes is not None or dst_offset or src_offset:
            so, at, n = host_span(n, dst.nbytes, nbytes, src_offset, dst_offset, "Stream.copy_from_host", _KIND,
                                  to_device=True)
            src_ptr = ptr + so
        elif n > dst.nbytes:
            raise fail(ErrorKind.INVALID_VALUE, "Stream.copy_from_host", f"{n} bytes do not fit in {dst!r}", "OPENCL")
        null = self._null
        code = self._write(self.queue, buf, 1, at, n, src_ptr, 0, null, null)  # (blocking_write CL_TRUE)
        self._dirty = self._pending = device._dirty = True  # (the device may still write dst after the source was read)
        if code:
            raise self.api.error(code, "clEnqueueWriteBuffer")

    def copy_to_host(self, dst: Any, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
                     src_offset: int = 0) -> None:
        device = self.device
        if type(src) in _BUFFERS and not src._freed and src.device is device and not device._closed:
            buf = src.buffer  # type: ignore[attr-defined]  # (_live_buffer's checks, inlined for the common case)
        else:
            buf = _live_buffer(src, "Stream.copy_to_host", device)
        t = type(dst)
        if t is self._ndarray:  # (_plain_host's test of a numpy array, inlined)
            if dst.dtype.hasobject:
                host_view(dst, writable=True, backend=_KIND, function="Stream.copy_to_host")  # raises
        elif t is not bytearray and not _plain_host(dst, t):
            host_view(dst, writable=True, backend=_KIND, function="Stream.copy_to_host")  # raises
        try:  # positional require_writable: a keyword costs cffi twice the call
            ptr = self._from_buffer("char[]", dst, True)
        except (TypeError, ValueError, BufferError):
            ptr = self._from_buffer("char[]", host_view(dst, writable=True, backend=_KIND,
                                                        function="Stream.copy_to_host"), True)
        n = len(ptr)
        at, dst_ptr = 0, ptr
        if nbytes is not None or dst_offset or src_offset:
            do, at, n = host_span(n, src.nbytes, nbytes, dst_offset, src_offset, "Stream.copy_to_host", _KIND,
                                  to_device=False)
            dst_ptr = ptr + do
        elif n > src.nbytes:
            raise fail(ErrorKind.INVALID_VALUE, "Stream.copy_to_host", f"{n} bytes is more than {src!r} holds",
                       "OPENCL")
        null = self._null
        code = self._read(self.queue, buf, 1, at, n, dst_ptr, 0, null, null)  # (blocking_read CL_TRUE)
        self._dirty = device._dirty = True
        if code:
            self._pending = True
            raise self.api.error(code, "clEnqueueReadBuffer")
        self._pending = False  # (in order: everything enqueued before the read completed before it)

    def copy(self, dst: Allocation, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
             src_offset: int = 0) -> None:
        d = _live_buffer(dst, "Stream.copy", self.device)
        s = _live_buffer(src, "Stream.copy", self.device)
        so, do, n = device_span(dst, src, nbytes, dst_offset, src_offset, _KIND)
        if n:
            self.api.check(self.api.raw.clEnqueueCopyBuffer(self.queue, s, d, so, do, n, 0, self._null, self._null),
                           "clEnqueueCopyBuffer")
            self._dirty = self._pending = self.device._dirty = True

    def fill(self, dst: Allocation, value: int, nbytes: int | None = None, offset: int = 0, *,
             width: int = 1) -> None:
        buf = _live_buffer(dst, "Stream.fill", self.device)
        v, w = fill_pattern(value, width, "Stream.fill", _KIND)
        o, n = check_span(dst.nbytes, offset, nbytes, "dst", "Stream.fill", _KIND, width=w)
        if n:
            pattern = self.api.ffi.new("char[]", v.to_bytes(w, "little"))
            self.api.check(self.api.raw.clEnqueueFillBuffer(self.queue, buf, pattern, w, o, n, 0, self._null,
                                                            self._null), "clEnqueueFillBuffer")
            self._dirty = self._pending = self.device._dirty = True

    def _copy_rect(self, dst: Allocation | memoryview, src: Allocation | memoryview, region: CopyRegion,
                   function: str) -> None:
        """``clEnqueueCopyBufferRect`` (device to device), ``clEnqueueWriteBufferRect`` / ``clEnqueueReadBufferRect``
        (to / from the host; blocking, as ``copy_from_host``/``copy_to_host``): a buffer's offset as an origin of its
        pitches, a host side's as its pointer moved."""
        ffi, null = self.api.ffi, self._null
        region_ = ffi.new("size_t[3]", [region.width, region.height, region.depth])
        pitches = {"dst": (region.dst_pitch, region.dst_slice_pitch), "src": (region.src_pitch, region.src_slice_pitch)}
        if isinstance(dst, memoryview) or isinstance(src, memoryview):
            to_device = isinstance(src, memoryview)
            side, host = ("dst", src) if to_device else ("src", dst)
            device_side = dst if to_device else src
            buf = _live_buffer(device_side, function, self.device)  # type: ignore[arg-type]
            ptr = ffi.from_buffer("char[]", host, not to_device)
            offset = region.src_offset if to_device else region.dst_offset
            origin = ffi.new("size_t[3]", region.origin(side))
            zero = ffi.new("size_t[3]")
            row, slab = pitches[side]
            hrow, hslab = pitches["src" if to_device else "dst"]
            name = "clEnqueueWriteBufferRect" if to_device else "clEnqueueReadBufferRect"
            code = getattr(self.api.raw, name)(self.queue, buf, 1, origin, zero, region_, row, slab, hrow, hslab,
                                               ptr + offset, 0, null, null)
            self._dirty = self._pending = self.device._dirty = True
            if code:
                raise self.api.error(code, name)
            if not to_device:
                self._pending = False  # (a blocking read: the queue is empty, as after copy_to_host)
            return
        d = _live_buffer(dst, function, self.device)
        s = _live_buffer(src, function, self.device)
        so, do = ffi.new("size_t[3]", region.origin("src")), ffi.new("size_t[3]", region.origin("dst"))
        self.api.check(self.api.raw.clEnqueueCopyBufferRect(self.queue, s, d, so, do, region_, *pitches["src"],
                                                            *pitches["dst"], 0, null, null), "clEnqueueCopyBufferRect")
        self._dirty = self._pending = self.device._dirty = True

    def prefetch(self, alloc: Allocation, to: Any = None, nbytes: int | None = None, offset: int = 0) -> None:
        # ``clEnqueueSVMMigrateMem`` of the UNIFIED allocation's SVM range (OpenCL 2.1 devices; older ones:
        # UNSUPPORTED): to the queue's device (``to`` None or that device) or the host (``CL_MIGRATE_MEM_OBJECT_HOST``).
        function, device, cl = "Stream.prefetch", self.device, self.api.cl
        _live_buffer(alloc, function, device)
        o, n = self._prefetch_span(alloc, nbytes, offset)
        host = self._prefetch_to_host(to)
        if to is not None and not host and to is not device:
            raise fail(ErrorKind.INVALID_VALUE, function, "an OpenCL queue migrates memory to its own device or the "
                       f"host, not to {to!r} (prefetch on a stream of that device)", "OPENCL")
        if device._cl_version() < (2, 1):
            raise fail(ErrorKind.UNSUPPORTED, function, "clEnqueueSVMMigrateMem needs an OpenCL 2.1 device; "
                       f"{device.descriptor.name!r} reports {device._cl_version()}", "OPENCL")
        if not n:
            return
        addr = getattr(alloc, "block", alloc)._host_address() if type(alloc) is PooledAllocation else \
            alloc._host_address()
        assert addr is not None  # (UNIFIED OpenCL memory is SVM: _alloc_svm)
        ffi = self.api.ffi
        ptrs = ffi.new("void *[1]", [ffi.cast("void *", addr + o)])
        sizes = ffi.new("size_t[1]", [n])
        flags = cl.CL_MIGRATE_MEM_OBJECT_HOST if host else 0
        self.api.check(self.api.raw.clEnqueueSVMMigrateMem(self.queue, 1, ptrs, sizes, flags, 0, self._null,
                                                           self._null), "clEnqueueSVMMigrateMem")
        self._dirty = self._pending = self.device._dirty = True

    # launches
    def _sizes(self, d: LaunchDims, validate: bool) -> tuple[Any, Any]:
        """The (global, local) arrays of ``d``, validated first if asked (cached per grid/block/shared_mem); launch
        options (cooperative, cluster) and ``shared_mem`` (OpenCL's dynamic local memory is a LocalMemory
        argument) are UNSUPPORTED.  Unvalidated, a launch of more work-items than the device's ``max_work_items``
        is still INVALID_VALUE: past it the runtime itself crashes (PoCL aborts), no error code comes back."""
        what = "Stream.launch" if validate else "Stream.launch_unchecked"
        if type(d) is not LaunchDims:
            raise fail(ErrorKind.INVALID_VALUE, what, f"dims must be a LaunchDims, not {type(d).__name__}", "OPENCL")
        if d.cooperative or d.cluster is not None:  # (not cached: OpenCL has neither grid sync nor clusters)
            raise d.options_error(_KIND, what)
        if d.shared_mem:
            raise shared_mem_error("OPENCL", what, d.shared_mem)
        key = (d.grid, d.block, d.shared_mem)
        entry = self._dims.get(key)
        if entry is None or (validate and not entry[2]):
            if validate:
                d.validate(self._limits, _KIND, "Stream.launch")
            elif d.threads > self._limits.max_work_items:
                raise fail(ErrorKind.INVALID_VALUE, what, f"{d} is {d.threads} work-items, more than the "
                           f"device's {self._limits.max_work_items} (DeviceLimits.max_work_items)", "OPENCL")
            if entry is None:
                g, b = d.grid, d.block
                ffi = self.api.ffi
                entry = (ffi.new("size_t[3]", [g[0] * b[0], g[1] * b[1], g[2] * b[2]]), ffi.new("size_t[3]", b),
                         validate)
            else:
                entry = (entry[0], entry[1], True)
            if len(self._dims) >= 256:
                self._dims.clear()
            self._dims[key] = entry
        self._last = (d, entry[0], entry[1], entry[2])
        return entry[0], entry[1]

    def launch(self, launch: Any, *parts: Any) -> None:
        if parts:  # launch(kernel, dims, *args), as on CUDA/HIP
            launch = KernelLaunch(launch, parts[0], parts[1:])
        try:
            kernel = launch.kernel
        except AttributeError:
            raise not_a_launch(launch, "Stream.launch") from None
        if type(kernel) is not OpenCLKernel and not isinstance(kernel, OpenCLKernel):
            raise fail(ErrorKind.INVALID_VALUE, "Stream.launch", f"{kernel!r:.80} is not an OpenCL kernel", "OPENCL")
        if self.device._closed:
            raise self.device._closed_error("Stream.launch")
        if kernel.module.device is not self.device:
            raise foreign(kernel.module.device, "Stream.launch", f"{kernel!r} belongs to another device than {self!r}",
                          "OPENCL")
        d = launch.dims
        last = self._last
        if last[0] is d and last[3]:
            gl, lo = last[1], last[2]
        else:
            gl, lo = self._sizes(d, True)
        args = launch.args
        if len(args) != kernel.num_args:
            raise fail(ErrorKind.INVALID_VALUE, "Stream.launch",
                       f"kernel {kernel.name!r} takes {kernel.num_args} arguments, "
                       f"{len(args)} given", "OPENCL")
        null = self._null
        lock = kernel._lock
        lock.acquire()  # (cheaper than `with`)
        try:
            err = _set_args(kernel, args, "Stream.launch")
            if err is None:
                code = self._enqueue_kernel(self.queue, kernel.handle, 3, null, gl, lo, 0, null, null)
                self._dirty = self._pending = self.device._dirty = True
        finally:
            lock.release()
        if err is not None:
            raise err
        if code:
            raise self.api.error(code, "clEnqueueNDRangeKernel")

    def launch_unchecked(self, launch: Any, *parts: Any) -> Result[None]:
        # The launch without LaunchDims validation against the device's limits (the driver's own checks remain),
        # returning the Error.  Still refused (flag tests and type dispatches, see docs/UNCHECKED.md): a closed
        # device, a kernel of another backend or device, a wrong argument count, any argument the kernel-argument
        # policy refuses (a freed allocation or slice, a value in a buffer slot, ``None``...), more work-items than
        # ``DeviceLimits.max_work_items``.  A non-KernelLaunch ``launch`` raises TypeError (not a value mistake).
        if parts:  # launch(kernel, dims, *args), as on CUDA/HIP
            launch = KernelLaunch(launch, parts[0], parts[1:])
        what = "Stream.launch_unchecked"
        try:
            kernel: OpenCLKernel = launch.kernel
            args = launch.args
        except AttributeError:
            raise not_a_launch(launch, what) from None
        device = self.device
        if device._closed:
            return device._closed_error(what)
        if type(kernel) is not OpenCLKernel and not isinstance(kernel, OpenCLKernel) or \
                kernel.module.device is not device:
            return foreign(getattr(getattr(kernel, "module", None), "device", None), what,
                           f"{kernel!r:.80} is not an OpenCL kernel of {device!r}", "OPENCL")
        if len(args) != kernel.num_args:  # never launch with a previous launch's leftover arguments
            return fail(ErrorKind.INVALID_VALUE, what, f"kernel {kernel.name!r} takes {kernel.num_args} arguments, "
                        f"{len(args)} given", "OPENCL")
        d = launch.dims
        last = self._last
        if last[0] is d:
            gl, lo = last[1], last[2]
        else:
            try:
                gl, lo = self._sizes(d, False)
            except (OverflowError, TypeError, AttributeError) as e:  # a negative size (no size_t), not LaunchDims
                return fail(ErrorKind.INVALID_VALUE, what, f"bad launch dimensions {d!r:.80}: {e}", "OPENCL")
            except Error as e:  # (launch options, shared_mem, too many work-items)
                return e.with_traceback(None)
        null = self._null
        lock = kernel._lock
        lock.acquire()
        try:
            err = _set_args(kernel, args, what)
            if err is None:
                code = self._enqueue_kernel(self.queue, kernel.handle, 3, null, gl, lo, 0, null, null)
                self._dirty = self._pending = self.device._dirty = True
        finally:
            lock.release()
        if err is not None:
            return err
        return self.api.error(code, "clEnqueueNDRangeKernel") if code else None

    # events and ordering
    def record_event(self) -> OpenCLEvent:
        self.device._check_open("Stream.record_event")
        return self._marker()

    def _marker(self) -> OpenCLEvent:
        ev = self.api.ffi.new("cl_event *")
        self._pending = True  # (synchronize flushes it)
        self.api.check(self.api.raw.clEnqueueMarkerWithWaitList(self.queue, 0, self._null, ev),
                       "clEnqueueMarkerWithWaitList")
        return OpenCLEvent(self.device, ev[0])

    def _pool_fence(self) -> OpenCLEvent | None:
        """MemoryPool's fence: None when nothing was enqueued since the last fence and that fence completed
        (:meth:`query` reads the same); else that fence, or a new marker, flushed.  None once the device was
        closed (``close`` waited for its work)."""
        if self.device._closed:
            return None
        with self.device._fence_lock:  # (else a second caller could see _dirty cleared and the old event: None)
            ev = self._pool_event
            if not self._dirty:
                if ev is None or ev.query():
                    return None
                return ev
            self._dirty = False  # (an enqueue sets it after the call: one racing with this marks it again)
            try:
                ev = self._marker()
                self.api.check(self.api.raw.clFlush(self.queue), "clFlush")  # submitted: completes on its own
            except BaseException:
                self._dirty = True
                raise
            self._pool_event = ev
            return ev

    def wait_event(self, event: Event) -> None:
        self.device._check_open("Stream.wait_event")
        if not isinstance(event, OpenCLEvent):
            raise fail(ErrorKind.INVALID_VALUE, "Stream.wait_event",
                       "Stream.wait_event needs an OpenCL event", "OPENCL")
        if event.device is not self.device:  # (another context: the driver's CL_INVALID_CONTEXT, a handle error)
            raise foreign(event.device, "Stream.wait_event", f"{event!r} is not an event of {self.device!r}; "
                          "order streams of two devices by synchronizing the first", "OPENCL")
        evs = self.api.ffi.new("cl_event[1]", [event.handle])
        self.api.check(self.api.raw.clEnqueueBarrierWithWaitList(self.queue, 1, evs, self._null),
                       "clEnqueueBarrierWithWaitList")
        self._dirty = self._pending = self.device._dirty = True

    def synchronize(self) -> None:
        if self.device._closed:
            raise self.device._closed_error("Stream.synchronize")
        dirty = self._dirty
        if dirty:  # (a mark of its own: still there after the finish, nothing was enqueued since: query's True)
            mark = self._dirty = object()
        if self._pending:  # (else nothing was enqueued since the queue was last seen empty)
            code = self._finish(self.queue)
            if code:
                raise self.api.error(code, "clFinish")
            self._pending = False
        if dirty:
            self._idle = mark
        state = self.__dict__.get("_callback_state")  # (_check_callback_waits's test, inlined)
        if state is not None and state.wait_errors:
            self._check_callback_waits("Stream.synchronize")

    def query(self) -> bool:
        # Whether everything enqueued so far has completed (never True while work is pending), with no timing in
        # it (a grace of 2 ms let a marker behind finished work complete; under load it did not, and query said
        # False after synchronize).  Known without a call: nothing enqueued since a synchronize or a query that
        # answered True (every enqueue sets _dirty after its call, replacing the mark they left in it: the mark
        # still there is that), or since the stream's last fence (_pool_fence), when that one completed.  Else a
        # marker behind the work, flushed, polled once: one behind work that just finished completes when the
        # runtime's scheduler sees it (PoCL: a worker thread's wake-up), so that answer may be False: poll again.
        self.device._check_open("Stream.query")
        dirty = self._dirty
        if dirty is self._idle:
            return True
        if not dirty:  # (nothing enqueued since the last fence: it says)
            fence = self._pool_event
            return fence is None or fence.query()
        mark = self._dirty = object()
        marker = self._marker()
        self.api.check(self.api.raw.clFlush(self.queue), "clFlush")  # submit the marker itself
        done = marker.query()
        if done:
            self._idle = mark
        return done
