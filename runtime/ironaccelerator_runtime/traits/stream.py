"""The :class:`Stream` trait base: an in-order queue of copies, fills, launches, events and callbacks."""

from __future__ import annotations

from typing import Any, Callable, Sequence, TYPE_CHECKING

from ironaccelerator._core import ErrorKind, MemoryKind

from ..errors import Error, as_operation, fail
from .checks import _not_picklable, _owner, check_span, copy_region, host_view, unsupported
from .callbacks import _CALLBACK_LOCK, _Callbacks
from .memory import Allocation
from .device import Device

if TYPE_CHECKING:
    from .values import Result
    from .checks import CopyRegion
    from .launch import KernelLaunch
    from .event import Event
    from .module import Kernel


class Stream:
    """An in-order queue of copies, fills and launches on one device, from :meth:`Device.create_stream`.

    Work is enqueued and runs in the order it was enqueued on this stream; :meth:`synchronize` waits for it, an
    event (:meth:`record_event`) marks a point in it, and another stream can wait for that event
    (:meth:`wait_event`).  Copies to and from host memory (any Python buffer: pageable memory) are synchronous with
    respect to the host on every backend but CUDA/HIP: :meth:`copy_from_host` returns once its source was read (it
    may change then), :meth:`copy_to_host` once the bytes are in its destination.  On CUDA/HIP they are the driver's
    ``*Async`` copies: the stream keeps their host buffers alive until work after them is seen complete; do not
    change a source (or read a destination) before then (portable code does neither before :meth:`synchronize` or
    an event recorded after the copy).  Not picklable.

    Attributes:
        device: the :class:`Device` the stream belongs to.

    Backends:
        CUDA/HIP: a non-blocking driver stream (``CU_STREAM_NON_BLOCKING``); a CUDA stream also has
        ``__cuda_stream__`` for cuda.core, CuPy and others.  OpenCL: an in-order command queue with profiling
        enabled.  Metal: an ``MTLCommandQueue``, each operation a committed command buffer.  QNN: graphs execute
        synchronously (the x86 HTP has no asynchronous execution) and copies are host copies: every operation is
        complete when it returns.
    """

    def __reduce__(self) -> Any:  # (a driver handle of this process: no pickle, no copy.copy)
        raise _not_picklable(self, "Stream")

    device: Device

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{_owner(self)}>"

    # Copies take an optional byte count and offsets on both sides: ``nbytes`` None copies the host buffer's bytes
    # after its offset (host copies, which must fit in the allocation after its offset) or, device to device, the
    # source's bytes after its offset, which must then be exactly the destination's after its offset (pass nbytes
    # to copy part of either).  A range past either end is INVALID_VALUE before any call.
    def copy_from_host(self, dst: Allocation, src: Any, nbytes: int | None = None, *, dst_offset: int = 0,
                       src_offset: int = 0) -> None:
        """Copy bytes of a host buffer into an allocation, in stream order.

        Args:
            dst: the destination, a live :class:`Allocation` (a slice or pool block included) of this stream's
                device.
            src: any C-contiguous buffer-protocol object (numpy array, bytes, bytearray, memoryview); not a numpy
                scalar or 0-d array, nor an array of Python objects.
            nbytes: how many bytes to copy; None (default): the host buffer's bytes after ``src_offset``, which
                must fit in ``dst`` after ``dst_offset``.
            dst_offset: byte offset in ``dst``, >= 0.
            src_offset: byte offset in ``src``, >= 0.

        Raises:
            TypeError: ``nbytes`` or an offset is not an integer; ``dst`` is not an allocation (Metal:
                ``INVALID_VALUE``).
            Error: ``ErrorKind.INVALID_VALUE`` when the range is past the end of either side, ``src`` is not a
                usable host buffer (no buffer protocol, not C-contiguous, a numpy scalar, Python objects), or
                ``dst`` is another device's allocation (OpenCL, Metal, QNN); ``ErrorKind.INVALID_HANDLE`` when
                ``dst`` was freed or the device closed; the vendor's status of the copy.

        Backends:
            All.  CUDA/HIP: ``cuMemcpyHtoDAsync``/``hipMemcpyHtoDAsync`` (``src`` held until work after the copy is
            seen complete); OpenCL: a blocking ``clEnqueueWriteBuffer`` (returns once ``src`` was read, after the
            work before it); Metal, Vulkan: the bytes are staged at the call (Vulkan: or written straight into
            host-visible memory when the stream is idle), then blitted / copied; QNN: a host copy, done when it
            returns.  Everywhere but CUDA/HIP ``src`` may change once the call returns.
        """
        raise unsupported(self.device.kind, "Stream.copy_from_host")

    def copy_to_host(self, dst: Any, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
                     src_offset: int = 0) -> None:
        """Copy bytes of an allocation into a host buffer, in stream order.

        The bytes are in ``dst`` when the call returns on every backend but CUDA/HIP; there, once the stream (or
        an event recorded after the copy) is synchronized.

        Args:
            dst: a writable, C-contiguous buffer-protocol object (numpy array, bytearray, writable memoryview).
            src: the source, a live :class:`Allocation` (a slice or pool block included) of this stream's device.
            nbytes: how many bytes to copy; None (default): the host buffer's bytes after ``dst_offset``, which
                ``src`` must hold after ``src_offset``.
            dst_offset: byte offset in ``dst``, >= 0.
            src_offset: byte offset in ``src``, >= 0.

        Raises:
            TypeError: ``nbytes`` or an offset is not an integer; ``src`` is not an allocation (Metal:
                ``INVALID_VALUE``).
            Error: ``ErrorKind.INVALID_VALUE`` when the range is past the end of either side, ``dst`` is
                read-only (``bytes``) or not a usable host buffer, or ``src`` is another device's allocation
                (OpenCL, Metal, QNN); ``ErrorKind.INVALID_HANDLE`` when ``src`` was freed or the device closed;
                the vendor's status of the copy (Metal: the failure of earlier work, as :meth:`synchronize`).

        Backends:
            All.  CUDA/HIP: ``cuMemcpyDtoHAsync``/``hipMemcpyDtoHAsync`` (``dst`` held until work after the copy is
            seen complete); OpenCL: a blocking ``clEnqueueReadBuffer`` (returns after the work before it and the
            read); Metal, Vulkan: wait for the stream, so the bytes are there when it returns; QNN: a host copy,
            done when it returns.
        """
        raise unsupported(self.device.kind, "Stream.copy_to_host")

    def copy(self, dst: Allocation, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
             src_offset: int = 0) -> None:
        """Copy bytes from one allocation to another on this device, in stream order.

        Args:
            dst: the destination, a live :class:`Allocation` (a slice or pool block included) of this device.
            src: the source, likewise.
            nbytes: how many bytes to copy; None (default): the source's bytes after ``src_offset``, which must
                be exactly the destination's after ``dst_offset`` (pass ``nbytes`` to copy part of either).
            dst_offset: byte offset in ``dst``, >= 0.
            src_offset: byte offset in ``src``, >= 0.

        Raises:
            TypeError: ``nbytes`` or an offset is not an integer; ``dst`` or ``src`` is not an allocation (Metal:
                ``INVALID_VALUE``).
            Error: ``ErrorKind.INVALID_VALUE`` when a range is past its end, the sizes differ without
                ``nbytes``, ``nbytes`` < 0, the two ranges overlap in one allocation (itself, its slices, a pool
                block: as memcpy's, every backend), or an allocation is another device's (OpenCL, Metal, QNN);
                ``ErrorKind.INVALID_HANDLE`` when either was freed or the device closed; the vendor's status.

        Backends:
            All.  CUDA/HIP: ``cuMemcpyDtoDAsync``/``hipMemcpyDtoDAsync``; OpenCL: ``clEnqueueCopyBuffer``; Metal:
            a blit; QNN: a host copy after the work queued before it.
        """
        raise unsupported(self.device.kind, "Stream.copy")

    def fill(self, dst: Allocation, value: int, nbytes: int | None = None, offset: int = 0, *,
             width: int = 1) -> None:
        """Set bytes of an allocation to a repeated 1-, 2- or 4-byte pattern, in stream order.

        Args:
            dst: a live :class:`Allocation` (a slice or pool block included) of this stream's device.
            value: the pattern, an unsigned integer that fits in ``width`` bytes (written little-endian).
            nbytes: how many bytes to set, a multiple of ``width``; None (default): to the end of ``dst``.
            offset: byte offset in ``dst`` where the fill starts, a multiple of ``width``.
            width: the pattern's size in bytes: 1, 2 or 4.

        Raises:
            TypeError: ``value``, ``nbytes``, ``offset`` or ``width`` is not an integer; ``dst`` is not an
                allocation (Metal: ``INVALID_VALUE``).
            Error: ``ErrorKind.INVALID_VALUE`` when ``width`` is not 1, 2 or 4, ``value`` does not fit in it, the
                range is past the end of ``dst`` or not a whole number of patterns, or ``dst`` is another device's
                allocation; ``ErrorKind.INVALID_HANDLE`` when ``dst`` was freed or the device closed;
                ``ErrorKind.UNSUPPORTED`` on Metal for a 2- or 4-byte pattern whose bytes differ.

        Backends:
            All.  CUDA/HIP: ``cuMemsetD8/D16/D32Async`` (HIP: ``hipMemsetD8/D16/D32Async``); OpenCL:
            ``clEnqueueFillBuffer``; Metal: the blit encoder's ``fillBuffer:range:value:``, which fills bytes (a
            multi-byte pattern of one repeated byte, such as 0, works); QNN: written by the CPU after the work
            queued before it.
        """
        raise unsupported(self.device.kind, "Stream.fill")

    # strided copies: each side an Allocation (or slice) or a host buffer, checked here (copy_region), the vendor
    # call made by the backend's _copy_rect
    def copy_2d(self, dst: Any, src: Any, width: int, height: int, *, dst_pitch: int | None = None,
                src_pitch: int | None = None, dst_offset: int | Sequence[int] = 0,
                src_offset: int | Sequence[int] = 0) -> None:
        """Copy ``height`` rows of ``width`` bytes, in stream order: row ``i`` from ``src_offset + i * src_pitch``
        to ``dst_offset + i * dst_pitch``.

        Host to device, device to host and device to device: each side is an allocation or a host buffer (not
        both host buffers).  A zero ``width`` or ``height`` copies nothing.

        Args:
            dst: the destination: a live :class:`Allocation` (or slice) of this device, or a writable
                C-contiguous host buffer (numpy array, bytearray, ...).
            src: the source: an allocation (or slice) of this device, or a C-contiguous host buffer.
            width: bytes per row, >= 0.
            height: rows, >= 0.
            dst_pitch: bytes from one destination row to the next, >= ``width``; None (default): ``width``
                (packed rows).
            src_pitch: likewise for the source.
            dst_offset: where the region starts in ``dst``: bytes, or an ``(x bytes, y rows)`` origin.
            src_offset: likewise for the source.

        Raises:
            TypeError: a size, pitch or offset is not an integer.
            Error: ``ErrorKind.INVALID_VALUE`` when neither side is an allocation, a row of the region lies
                outside its side, a pitch is less than the width, or a host side is not a usable (writable, for
                ``dst``) buffer; ``ErrorKind.INVALID_HANDLE`` when an allocation was freed or the device closed;
                ``ErrorKind.UNSUPPORTED`` where the vendor has no strided copy (Metal, QNN); the vendor's status.
                Every check is made before any vendor call.

        Backends:
            CUDA: ``cuMemcpy2DAsync``; HIP: ``hipMemcpyParam2DAsync``; OpenCL: ``clEnqueueCopyBufferRect``
            (device to device), ``clEnqueueWriteBufferRect``/``clEnqueueReadBufferRect`` (blocking, as
            :meth:`copy_from_host`/:meth:`copy_to_host`).
            Metal (the blit encoder copies linear ranges) and QNN (tensors are flat client buffers):
            ``UNSUPPORTED``.
        """
        self._strided("Stream.copy_2d", dst, src, (width, height), dst_pitch, src_pitch, dst_offset, src_offset, 2)

    def copy_3d(self, dst: Any, src: Any, extent: Sequence[int], *,
                dst_pitch: int | Sequence[int] | None = None, src_pitch: int | Sequence[int] | None = None,
                dst_offset: int | Sequence[int] = 0, src_offset: int | Sequence[int] = 0) -> None:
        """Copy a box of ``extent = (width bytes, height rows, depth slices)``, in stream order; the sides as for
        :meth:`copy_2d`.  A zero extent copies nothing.

        Args:
            dst: the destination: a live :class:`Allocation` (or slice) of this device, or a writable
                C-contiguous host buffer.
            src: the source: an allocation (or slice) of this device, or a C-contiguous host buffer.
            extent: ``(width bytes, height rows, depth slices)``.
            dst_pitch: ``(row pitch, slice pitch)`` in bytes, or a row pitch (slices of ``height`` rows), or None
                (default: packed); the slice pitch must be a multiple of the row pitch.
            src_pitch: likewise for the source.
            dst_offset: where the box starts in ``dst``: bytes, or an ``(x bytes, y rows, z slices)`` origin.
            src_offset: likewise for the source.

        Raises:
            TypeError: a size, pitch or offset is not an integer.
            Error: ``ErrorKind.INVALID_VALUE`` when neither side is an allocation, ``extent`` is not three
                sizes, a row of the box lies outside its side, a pitch is too small or a slice pitch not a
                multiple of the row pitch, or a host side is not a usable buffer; ``ErrorKind.INVALID_HANDLE``
                when an allocation was freed or the device closed; ``ErrorKind.UNSUPPORTED`` on Metal and QNN;
                the vendor's status.  Every check is made before any vendor call.

        Backends:
            CUDA: ``cuMemcpy3DAsync``; HIP: ``hipDrvMemcpy3DAsync``; OpenCL: the ``clEnqueue*BufferRect`` calls.
            Metal and QNN: ``UNSUPPORTED``.
        """
        self._strided("Stream.copy_3d", dst, src, extent, dst_pitch, src_pitch, dst_offset, src_offset, 3)

    def _strided(self, function: str, dst: Any, src: Any, extent: Any, dst_pitch: Any, src_pitch: Any,
                 dst_offset: Any, src_offset: Any, dims: int) -> None:
        kind = self.device.kind
        if type(self)._copy_rect is Stream._copy_rect:  # (before checking what the backend could not use anyway)
            raise unsupported(kind, function)
        if not isinstance(dst, Allocation) and not isinstance(src, Allocation):
            raise fail(ErrorKind.INVALID_VALUE, function, "dst or src must be an allocation (host to host is "
                       "numpy's)", kind)
        sides: list[tuple[Allocation | memoryview, int]] = []
        for what, obj in (("dst", dst), ("src", src)):
            if isinstance(obj, Allocation):
                obj._check_live(function)
                sides.append((obj, obj.nbytes))
            else:
                view = host_view(obj, what == "dst", backend=kind, function=function)
                sides.append((view, view.nbytes))
        region = copy_region(sides[0][1], sides[1][1], extent, dst_pitch, src_pitch, dst_offset, src_offset, function,
                             kind, dims=dims)
        self.device._check_open(function)
        if not region.empty:
            self._copy_rect(sides[0][0], sides[1][0], region, function)

    def _copy_rect(self, dst: Allocation | memoryview, src: Allocation | memoryview, region: CopyRegion,
                   function: str) -> None:
        """Backends: enqueue a checked, non-empty strided copy; a host side is a flat byte memoryview (writable for
        ``dst``), an allocation side still to be checked as this backend's (``TypeError``/``INVALID_VALUE``)."""
        raise unsupported(self.device.kind, function)

    def prefetch(self, alloc: Allocation, to: Any = None, nbytes: int | None = None, offset: int = 0) -> None:
        """Migrate part of a ``MemoryKind.UNIFIED`` allocation to a device or the host, in stream order.

        A hint: the memory stays usable from both sides, and its contents do not change.

        Args:
            alloc: a live UNIFIED :class:`Allocation` (managed, shared virtual memory) of this backend.
            to: None (default: this stream's device), a :class:`Device` of this backend, or ``"host"``.
            nbytes: how many bytes to migrate; None (default): to the end of ``alloc``.
            offset: byte offset in ``alloc`` where the range starts.

        Raises:
            TypeError: ``alloc`` is not an allocation, or ``nbytes``/``offset`` not an integer.
            Error: ``ErrorKind.INVALID_VALUE`` when ``alloc`` is not UNIFIED memory (device and pinned memory do
                not move), ``to`` is none of the above (OpenCL: a device other than the queue's), or the range is
                past its end; ``ErrorKind.INVALID_HANDLE`` when ``alloc`` was freed or the device closed;
                ``ErrorKind.UNSUPPORTED`` where the backend (or an OpenCL device before 2.1) cannot migrate.

        Backends:
            CUDA: ``cuMemPrefetchAsync`` (a ``CUmemLocation``); HIP: ``hipMemPrefetchAsync``; OpenCL:
            ``clEnqueueSVMMigrateMem`` (OpenCL 2.1 devices, to the queue's device or the host).  Metal and QNN:
            ``UNSUPPORTED``.
        """
        raise unsupported(self.device.kind, "Stream.prefetch")

    def _prefetch_span(self, alloc: Allocation, nbytes: Any, offset: Any) -> tuple[int, int]:
        """``(offset, nbytes)`` of a prefetch: the allocation live and UNIFIED, the range inside it."""
        function, kind = "Stream.prefetch", self.device.kind
        if not isinstance(alloc, Allocation):
            raise TypeError(f"{function}: alloc must be an Allocation, not {type(alloc).__name__} ({alloc!r})")
        alloc._check_live(function)
        self.device._check_open(function)
        if alloc.kind is not MemoryKind.UNIFIED:
            raise fail(ErrorKind.INVALID_VALUE, function, f"{alloc!r} is {alloc.kind.name} memory; only UNIFIED "
                       "(managed, shared virtual) memory migrates", kind)
        return check_span(alloc.nbytes, offset, nbytes, "alloc", function, kind)

    def _prefetch_to_host(self, to: Any) -> bool:
        """Whether a prefetch's ``to`` is the host (``"host"``), else it must be None or a Device (INVALID_VALUE)."""
        if isinstance(to, str) and to == "host":
            return True
        if to is None or isinstance(to, Device):
            return False
        raise fail(ErrorKind.INVALID_VALUE, "Stream.prefetch", "to must be None (this stream's device), a Device or "
                   f"'host', not {to!r}", self.device)

    def launch(self, launch: KernelLaunch | Kernel, *parts: Any) -> None:
        """Enqueue one kernel launch, checked, in stream order.

        The launch is asynchronous: its failure at run time is reported by :meth:`synchronize` (or an event's).
        What each kernel parameter takes is the kernel-argument policy (``ironaccelerator_runtime.kernel_args``),
        the same on every backend.  Repeating the same :class:`KernelLaunch` object is the fast path (its checks
        and packing are cached).

        Args:
            launch: a :class:`KernelLaunch` ``(kernel, dims, args)``: a :class:`Kernel` of this stream's device,
                :class:`LaunchDims`, and one argument per kernel parameter (an :class:`Allocation` for a buffer,
                a numpy scalar, :class:`Scalar`, bytes or a Python number for a value, :class:`LocalMemory` for
                an OpenCL ``__local`` parameter); or, with ``parts``, its kernel.
            parts: ``dims, *args`` after a kernel: ``launch(kernel, dims, *args)`` is
                ``launch(KernelLaunch(kernel, dims, args))``, on every backend (cuda.core's order of a launch).

        Raises:
            TypeError: ``launch`` is not a :class:`KernelLaunch`.
            Error: ``ErrorKind.INVALID_VALUE`` when the kernel is not one of this backend and device, the
                dimensions are not a :class:`LaunchDims` or exceed the device's :class:`DeviceLimits`
                (:meth:`LaunchDims.validate`), the argument count is not the kernel's (``Kernel.num_args``, where
                known), or an argument is refused by the argument policy (naming its index and the kernel);
                ``ErrorKind.INVALID_HANDLE`` when an argument's allocation was freed or the device closed; ``ErrorKind.UNSUPPORTED`` for a request the backend cannot honour (``cooperative`` or
                ``cluster`` off CUDA, ``shared_mem`` off CUDA/HIP, :class:`LocalMemory` off OpenCL); the
                vendor's status of the launch call (e.g. ``LAUNCH_FAILED``).

        Backends:
            All.  CUDA/HIP: ``cuLaunchKernel``/``hipModuleLaunchKernel`` (``cuLaunchKernelEx`` with launch
            options), arguments packed in C on the compiled fast path.  OpenCL: ``clEnqueueNDRangeKernel`` with a
            3-D global size of grid x block and local size of block.  Metal: a compute command encoder
            (``dispatchThreadgroups:threadsPerThreadgroup:``) in a committed command buffer.  QNN:
            ``QnnGraph_execute`` of the graph, ``dims`` must be ``LaunchDims()`` and the arguments are the
            graph's input then output tensors, each buffer's size (and a typed argument's element type) checked
            against its tensor; it runs synchronously.
        """
        raise unsupported(self.device.kind, "Stream.launch")

    def launch_unchecked(self, launch: KernelLaunch | Kernel, *parts: Any) -> Result[None]:
        """Enqueue one kernel launch without validating its dimensions against the device's limits, returning
        the Error instead of raising it (the ``_unchecked`` contract: docs/UNCHECKED.md).

        Still refused, as returned Errors: a closed device, a kernel of another backend or device, a wrong
        argument count, every argument the kernel-argument policy refuses, dimensions the runtime cannot take,
        and requests the backend cannot honour.

        Args:
            launch: a :class:`KernelLaunch`, as for :meth:`launch`; or, with ``parts``, its kernel.
            parts: ``dims, *args`` after a kernel, as for :meth:`launch`.

        Returns:
            None on success, else the :class:`Error` (the same ``ErrorKind`` :meth:`launch` raises for the same
            mistake; the driver's own status for a limit it enforces).

        Raises:
            TypeError: ``launch`` is not a :class:`KernelLaunch` (the call's own parameter of the wrong type).
                Never raises an Error for a bad value; see docs/UNCHECKED.md.

        Backends:
            All.  OpenCL: more work-items than ``DeviceLimits.max_work_items`` is still ``INVALID_VALUE`` (past
            it PoCL aborts).  Metal: a grid past ``max_grid`` or ``max_work_items``, or a threadgroup of more threads
            than the pipeline's ``maxTotalThreadsPerThreadgroup``, is still ``INVALID_VALUE``.
            CUDA/HIP: a grid, block or ``shared_mem`` past the launch function's ``unsigned int`` is
            ``INVALID_VALUE``.  QNN: any dims but ``LaunchDims()`` is still refused; the tensor-size checks of a
            re-bind are skipped.
        """
        raise unsupported(self.device.kind, "Stream.launch_unchecked")

    def record_event(self) -> Event:
        """Record an :class:`Event` after the work enqueued so far.

        Returns:
            The new event; it completes when that work has.

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` when the device was closed; the vendor's status of the record;
                QNN: the failure of the work before it (the stream is synchronized first).

        Backends:
            All.  CUDA/HIP: ``cuEventCreate`` + ``cuEventRecord`` (HIP's likewise); OpenCL:
            ``clEnqueueMarkerWithWaitList``; Metal: a command buffer that signals the stream's
            ``MTLSharedEvent``; QNN: synchronizes the stream, then reads the **host clock**.
        """
        raise unsupported(self.device.kind, "Stream.record_event")

    def wait_event(self, event: Event) -> None:
        """Make the work enqueued on this stream from now on wait until ``event`` is complete (without blocking
        the host): the way to order two streams.

        Args:
            event: an :class:`Event` of this backend, recorded on any of its streams.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` when ``event`` is not an event of this backend, or (but on
                CUDA/HIP, whose drivers wait across contexts) not one of this stream's device;
                ``ErrorKind.INVALID_HANDLE`` when the device (CUDA/HIP: either device) was closed; the vendor's
                status.

        Backends:
            All.  CUDA/HIP: ``cuStreamWaitEvent``/``hipStreamWaitEvent``; OpenCL:
            ``clEnqueueBarrierWithWaitList``; Metal: a command buffer that waits for the event's
            ``MTLSharedEvent`` value (nothing when it is this stream's own event); QNN: nothing to wait for
            (an event is recorded after its work completed).
        """
        raise unsupported(self.device.kind, "Stream.wait_event")

    def _pool_fence(self) -> Event | None:
        """For :class:`MemoryPool`: None if the work enqueued so far is known complete (a cheap test, no
        enqueue), else an event after it, submitted so that it completes without a further call (the pool
        polls it, waits for it, or makes another stream wait for it).  Backends whose ``query`` enqueues
        or waits override this."""
        return None if self.query() else self.record_event()

    def synchronize(self) -> None:
        """Block until all the work enqueued on this stream so far is complete, and report its failures.

        Raises:
            Error: the failure of asynchronous work on the stream: the vendor's status (CUDA/HIP
                ``cuStreamSynchronize``, OpenCL ``clFinish``), Metal ``LAUNCH_FAILED`` naming the failed command
                buffers, or the failure of the work queued before a host callback (:meth:`add_callback`), with
                its kind; ``ErrorKind.INVALID_HANDLE`` when the device was closed (on every backend).

        Backends:
            All.  QNN: waits for nothing (graphs execute synchronously) but still reports the failures above.
        """
        raise unsupported(self.device.kind, "Stream.synchronize")

    def query(self) -> bool:
        """Whether all the work enqueued on this stream so far is complete, without waiting.

        Returns:
            True when complete, False while work is pending (never ``NOT_READY``).

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` when the device was closed; the vendor's failure status of the
                query (CUDA/HIP: other than "not ready").

        Backends:
            All.  CUDA/HIP: ``cuStreamQuery``/``hipStreamQuery``; OpenCL: True with no call when nothing was
            enqueued since a :meth:`synchronize` (or a query that said True), else a marker's status (it enqueues
            a marker, polled once: right after the work finished it may still say False); Metal: whether the
            committed command buffers completed; QNN: True unless an asynchronous execution is pending (never, on
            the x86 HTP).
        """
        raise unsupported(self.device.kind, "Stream.query")

    # host callbacks: an event recorded now, waited for by the stream's callback thread, then fn() called there
    def add_callback(self, fn: Callable[[], object]) -> None:
        """Call ``fn()`` once the work queued on this stream before it is over, on the stream's callback thread
        (``ironaccelerator-callbacks``), in the order added.

        An exception ``fn`` raises is reported through ``logging`` (``ironaccelerator.callbacks``, ERROR, with
        its traceback) and kept, never lost, in :attr:`callback_errors`.  If that work failed, ``fn`` is still
        called once it is over; the failure is the stream's, not ``fn``'s: logged, never filed under ``fn``, and
        raised by the stream's :meth:`synchronize`.  Unlike ``cuLaunchHostFunc`` the stream does not wait for
        ``fn``: later work may already run while it does.  :meth:`drain_callbacks` waits until every callback
        added so far has returned.

        Args:
            fn: a callable taking no arguments; its return value is ignored.

        Raises:
            TypeError: ``fn`` is not callable.
            Error: what :meth:`record_event` raises (an event is recorded now; ``ErrorKind.INVALID_HANDLE`` when
                the device was closed).

        Backends:
            All (a thread of this runtime waits for the event, on every backend).
        """
        if not callable(fn):
            raise TypeError(f"Stream.add_callback: fn must be callable, not {type(fn).__name__}")
        try:
            event = self.record_event()
        except Error as e:  # (a closed device: the operation called names it)
            raise as_operation(e, "Stream.record_event", "Stream.add_callback") from None
        with _CALLBACK_LOCK:
            state: _Callbacks | None = self.__dict__.get("_callback_state")
            if state is None:
                state = _Callbacks()
                self.__dict__["_callback_state"] = state
            state.add(event, fn)

    @property
    def callback_errors(self) -> list[tuple[Callable[[], object], BaseException]]:
        """The exceptions host callbacks (:meth:`add_callback`) raised, as ``(fn, exception)`` pairs in order
        (a copy; every backend)."""
        state: _Callbacks | None = self.__dict__.get("_callback_state")
        return list(state.errors) if state is not None else []

    def drain_callbacks(self, timeout: float | None = None) -> bool:
        """Wait until every host callback added so far (:meth:`add_callback`) has returned.

        Args:
            timeout: the most seconds to wait; None (default): no limit.

        Returns:
            True when every callback has returned, False when ``timeout`` passed first.

        Raises:
            RuntimeError: called from one of this stream's own callbacks, where it would wait for itself (as
                ``Thread.join()`` of the current thread).  Raises no Error.

        Backends:
            All.
        """
        state: _Callbacks | None = self.__dict__.get("_callback_state")
        return True if state is None else state.drain(timeout)

    def _check_callback_waits(self, what: str) -> None:
        """Raise the failures of the work before host callbacks that their waits met (``Stream.synchronize`` of
        each backend calls it): the work failed, not the callback, and the stream reports it."""
        state: _Callbacks | None = self.__dict__.get("_callback_state")
        if state is None or not state.wait_errors:
            return
        with state.cond:
            errs, state.wait_errors = state.wait_errors, []
        if errs:
            first = errs[0]
            raise fail(first.kind if isinstance(first, Error) else ErrorKind.LAUNCH_FAILED, what,
                       f"the work queued before {len(errs)} host callback(s) failed: "
                       + "; ".join(f"{type(e).__name__}: {e}" for e in errs), self.device) from first

    async def wait(self) -> None:
        """``await stream.wait()``: the work queued so far is complete, without blocking the event loop (an event
        is recorded and awaited in the loop's default executor).

        Raises:
            Error: what :meth:`record_event` and :meth:`Event.synchronize` raise (the work's failure).

        Backends:
            All.
        """
        await self.record_event()

    def capture(self) -> Any:
        """Record the launches and copies enqueued on this stream into a :class:`Graph` instead of running them.

        ``with stream.capture() as graph: ...``: inside the block the work is recorded (not run); after it,
        ``graph.launch(stream)`` replays it.  An exception inside the block ends the capture and discards what
        was recorded.  The graph holds the allocations the recorded work uses (dropping them does not free them)
        and refuses a replay once one was freed (:meth:`Graph.launch`).

        Returns:
            A context manager whose ``__enter__`` returns the :class:`Graph` (usable once the block has ended).

        Raises:
            Error: ``ErrorKind.UNSUPPORTED`` off CUDA/HIP and Vulkan; ``ErrorKind.INVALID_HANDLE`` when the device was
                closed; ``ErrorKind.INVALID_VALUE`` when the stream is already capturing; the driver's status of
                capture begin/end and instantiation (e.g. an operation that cannot be captured).

        Backends:
            CUDA/HIP (``cuStreamBeginCapture`` in thread-local mode, ``cuStreamEndCapture``,
            ``cuGraphInstantiate``; HIP's likewise); Vulkan (the work recorded into reusable command buffers).
            OpenCL, Metal, QNN: ``UNSUPPORTED``.
        """
        raise unsupported(self.device.kind, "Stream.capture")
