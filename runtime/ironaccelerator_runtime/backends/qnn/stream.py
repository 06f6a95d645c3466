"""QNN streams (graph execution and host copies) and events (host clock timestamps)."""

from __future__ import annotations

import threading
import time
from contextlib import nullcontext
from typing import Any

from ironaccelerator._core import ErrorKind
from ironaccelerator_runtime.backends import qnn_log
from ironaccelerator_runtime.errors import Error, fail
from ironaccelerator_runtime.traits.checks import foreign
from ironaccelerator_runtime.kernel_args import shared_mem_error
from ironaccelerator_runtime.traits import (
    Allocation, Event, KernelLaunch, LaunchDims, Result, Stream, check_span, device_span, host_span, fill_pattern, host_view,
    not_a_launch,
)

from .device import QnnDevice
from .memory import _live
from .module import QnnKernel
from .profile import LaunchProfile, Profiler
from .tables import _DEFAULT_DIMS, _KIND, _NAME, _NOT_SUPPORTED


# ---------------------------------------------------------------------------------------------------- streams


def _launch_error(stream: QnnStream, kernel: QnnKernel, code: int) -> Error:
    """The Error of a failed execute: Stream.launch's and launch_unchecked's, and the compiled launchers'
    (ia_prepared_launch.h)."""
    return stream.api.error(code, "QnnGraph_execute", f"graph {kernel.name!r}")


_COMPILED: list[bool | None] = [None]  # whether QnnStream's launch and launch_unchecked are the compiled ones


def _compile(device: QnnDevice) -> None:
    """Once per process, where the device's interface module is compiled (API mode): QnnStream.launch and
    launch_unchecked become the compiled launchers over the Python methods (ia_prepared_launch.h: method descriptors,
    bound as methods), which run a stream's prepared launch in C and call the Python methods for anything else."""
    make = getattr(device._pool_fast, "_prepared_launcher", None)
    if make is None:
        return  # (ABI mode: no compiled module, perhaps a later device's)
    QnnStream.launch = make(_PY_LAUNCH[0], _launch_error, True)  # type: ignore[method-assign]
    QnnStream.launch_unchecked = make(_PY_LAUNCH[1], _launch_error, False)  # type: ignore[method-assign]
    _COMPILED[0] = True


class QnnStream(Stream):
    """A graph executor.  Work is synchronous (complete when ``launch`` returns) where the library has no
    asynchronous execution (the x86 HTP: ``QnnGraph_executeAsync`` answers 1000); copies are host copies.

    ``last_profile``: what the library reported for the latest launch while the stream profiles
    (:meth:`set_profiling`), a ``LaunchProfile``; None before the first."""

    device: QnnDevice

    def __init__(self, device: QnnDevice) -> None:
        self.device = device
        self.api = device.api
        self._memmove = device.api.ffi.memmove
        self._from_buffer = device.api.ffi.from_buffer
        self._pending = 0
        self._cond = threading.Condition()
        self._async_error: Error | None = None
        self._notify: Any = None
        # the KernelLaunch Stream.launch checked last (its kernel, dims and device), its kernel and its arguments:
        # one tuple, read at once (a KernelLaunch is a tuple subclass, which unpacks through an iterator)
        self._checked: tuple[Any, Any, Any] = (None, None, None)
        self._profiler: Profiler | None = None  # set_profiling's (None: launches pass no profile handle)
        # launches execute synchronously with no profile handle: QnnGraph_execute called at once (set by _run once
        # the backend's asynchronous execution was found missing; cleared by set_profiling)
        self._sync = False
        # (launch, kernel, args, device): the KernelLaunch the compiled launch and launch_unchecked run in C
        # (ia_prepared_launch.h), set by the methods below after they ran it synchronously; None: none
        self._prepared: tuple[Any, Any, Any, Any] | None = None
        if _COMPILED[0] is None:
            _compile(device)
        self._device_us = 0  # the library's execute time of this profiler's launches, summed (events read it)
        self.last_profile: LaunchProfile | None = None

    # copies (host memory: done when they return)
    def copy_from_host(self, dst: Allocation, src: Any, nbytes: int | None = None, *, dst_offset: int = 0,
                       src_offset: int = 0) -> None:
        what = "Stream.copy_from_host"
        buf = _live(dst, what, self.device)
        view = host_view(src, backend=_KIND, function=what)
        so, at, n = host_span(view.nbytes, dst.nbytes, nbytes, src_offset, dst_offset, what, _KIND, to_device=True)
        self.synchronize()  # (asynchronous execution: never overwrite a buffer a graph still reads)
        self._memmove(buf + at, self._from_buffer(view) + so, n)

    def copy_to_host(self, dst: Any, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
                     src_offset: int = 0) -> None:
        what = "Stream.copy_to_host"
        buf = _live(src, what, self.device)
        view = host_view(dst, writable=True, backend=_KIND, function=what)
        do, at, n = host_span(view.nbytes, src.nbytes, nbytes, dst_offset, src_offset, what, _KIND, to_device=False)
        self.synchronize()
        self._memmove(self._from_buffer("char[]", view, True) + do, buf + at, n)

    def copy(self, dst: Allocation, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
             src_offset: int = 0) -> None:
        d = _live(dst, "Stream.copy", self.device)
        s = _live(src, "Stream.copy", self.device)
        so, do, n = device_span(dst, src, nbytes, dst_offset, src_offset, _KIND)
        self.synchronize()
        self._memmove(d + do, s + so, n)

    def fill(self, dst: Allocation, value: int, nbytes: int | None = None, offset: int = 0, *,
             width: int = 1) -> None:
        # Host memory: the pattern is written by the CPU, after the graphs queued before it.
        d = _live(dst, "Stream.fill", self.device)
        v, w = fill_pattern(value, width, "Stream.fill", _KIND)
        o, n = check_span(dst.nbytes, offset, nbytes, "dst", "Stream.fill", _KIND, width=w)
        self.synchronize()
        ffi = self.api.ffi
        ffi.buffer(ffi.cast("char *", d) + o, n)[:] = v.to_bytes(w, "little") * (n // w)

    # launches
    def launch(self, launch: Any, *parts: Any) -> None:
        # Execute a graph: ``KernelLaunch(kernel, LaunchDims(), (inputs..., outputs...))``, checked (argument
        # count and kinds, each buffer's size against its tensor's bytes (HTP does not check them), a typed
        # argument's element type against its tensor's (an imported tensor, ``Device.from_dlpack``, carries one; raw
        # memory from ``Device.alloc`` or the pool is bytes and binds by size), freed allocations, the device) before
        # any C call.  The KernelLaunch this stream checked last is not checked again for what it cannot change
        # (its kernel, its dims, the kernel's device): a launch reused is the fast path.
        if parts:  # launch(kernel, dims, *args), as on CUDA/HIP
            launch = KernelLaunch(launch, parts[0], parts[1:])
        checked = self._checked
        if launch is checked[0]:
            kernel = checked[1]
            args = checked[2]
        else:
            try:
                kernel, dims, args = launch
            except (TypeError, ValueError):
                raise not_a_launch(launch, "Stream.launch") from None
            if type(kernel) is not QnnKernel:
                raise fail(ErrorKind.INVALID_VALUE, "Stream.launch", f"not a QNN graph kernel: {kernel!r:.80}",
                           _NAME)
            if dims is not _DEFAULT_DIMS and dims != _DEFAULT_DIMS:
                raise _dims_error(dims, "Stream.launch")
            if kernel.module.device is not self.device:
                if self.device._closed:
                    raise self.device._closed_error("Stream.launch")
                raise foreign(kernel.module.device, "Stream.launch", f"{kernel!r} belongs to another device than "
                              f"{self!r}", _NAME)
            if type(launch) is KernelLaunch:  # (an immutable record: a plain list could change its kernel)
                self._checked = (launch, kernel, args)
        device = self.device
        if device._closed:
            raise device._closed_error("Stream.launch")
        # (as little Python as can be around the execute: on the x86 HTP emulation, every bytecode after a ~60 us
        # execute runs cold, ~10x its usual cost: a `with` block around it cost 2-3% of the launch)
        lock = kernel._lock
        lock.acquire()
        try:
            if args is not kernel._bound and not _same(args, kernel._bound):
                err = kernel._bind(args, device, "Stream.launch")
                if err is not None:
                    raise err
            else:
                for a in kernel._blocks:
                    if a._freed:
                        raise _freed(a, "Stream.launch")
            code = kernel._execute(*kernel._call) if self._sync else self._run(kernel)
        finally:
            lock.release()
        if code:
            raise _launch_error(self, kernel, code)
        if launch is self._checked[0] and self._sync and _COMPILED[0]:
            self._prepared = (launch, kernel, args, device)

    def launch_unchecked(self, launch: Any, *parts: Any) -> Result[None]:
        # ``launch`` returning the Error instead of raising it, without the LaunchDims, device and size checks
        # on a rebind (a freed allocation is still refused: its memory may be gone).
        if parts:  # launch(kernel, dims, *args), as on CUDA/HIP
            launch = KernelLaunch(launch, parts[0], parts[1:])
        checked = self._checked
        if launch is checked[0]:
            kernel = checked[1]
            args = checked[2]
        else:
            what = "Stream.launch_unchecked"
            try:
                kernel, dims, args = launch
            except (TypeError, ValueError):
                raise not_a_launch(launch, what) from None
            if type(kernel) is not QnnKernel:
                return fail(ErrorKind.INVALID_VALUE, what, f"not a QNN graph kernel: {kernel!r:.80}", _NAME)
            if dims is not _DEFAULT_DIMS and dims != _DEFAULT_DIMS:  # never silently dropped
                return _dims_error(dims, what)
            if kernel.module.device is not self.device and not self.device._closed:  # (as every backend's)
                return foreign(kernel.module.device, what, f"{kernel!r} belongs to another device than {self!r}",
                               _NAME)
        device = self.device
        if device._closed:  # (a flag test: the rebind below would catch it, a repeated launch would not)
            return device._closed_error("Stream.launch_unchecked")
        lock = kernel._lock  # (as launch's)
        lock.acquire()
        try:
            if args is not kernel._bound and not _same(args, kernel._bound):
                err: Error | None = kernel._bind(args, device, "Stream.launch_unchecked")
                if err is not None:
                    return err
            else:
                for a in kernel._blocks:
                    if a._freed:
                        return _freed(a, "Stream.launch_unchecked")
            code = kernel._execute(*kernel._call) if self._sync else self._run(kernel)
        finally:
            lock.release()
        if code:
            return _launch_error(self, kernel, code)
        if launch is self._checked[0] and self._sync and _COMPILED[0]:
            self._prepared = (launch, kernel, args, device)
        return None

    def set_profiling(self, level: str | None) -> None:
        """Profile this stream's later launches through ``QnnProfile`` at ``level`` (None: stop).

        Each launch then executes with a profile handle (``QnnProfile_create`` at ``QNN_PROFILE_LEVEL_BASIC`` or
        ``_DETAILED``; synchronously), and ``stream.last_profile`` becomes a :class:`LaunchProfile` of what the
        library reported for it: its events (``QnnProfile_getEvents``/``getEventData``/``getSubEvents``), the
        EXECUTE time in microseconds (``execute_us``) and, at ``"detailed"``, a row per node (``nodes``).  Events
        recorded on the stream while it profiles measure the library's execute time: ``elapsed_ms`` between two
        such events of the same ``set_profiling`` call is the sum of the ``execute_us`` of the launches between
        them (microsecond resolution), not host time.

        Args:
            level: ``"basic"`` or ``"detailed"`` (QNN's generic levels; case-insensitive), or None to stop.

        Raises:
            TypeError: ``level`` is neither a str nor None.
            Error: ``ErrorKind.UNSUPPORTED`` for any other level (libQnnHtp accepts every level number and
                profiles all but DETAILED as BASIC, so none other is offered); ``ErrorKind.INVALID_HANDLE`` after
                the device was closed; the library's error where ``QnnProfile_create`` fails.

        Backends:
            QNN only.
        """
        self.synchronize()
        self._sync = False  # (_run decides again)
        self._prepared = None  # (the Python methods run the launches, and profile them)
        if level is None:
            self._profiler = None
            return
        self._profiler = Profiler(self.device, level, "Stream.set_profiling")
        self._device_us = 0

    @property
    def profiling(self) -> str | None:
        """The level :meth:`set_profiling` set (``"basic"``, ``"detailed"``), or None when not profiling."""
        return self._profiler.level if self._profiler is not None else None

    def _run(self, kernel: QnnKernel) -> int:
        """(Kernel's lock held.)  Execute where ``_sync`` is not set: profiled, asynchronously, or synchronously
        once the backend has no asynchronous execution (which sets ``_sync`` for the next launches); the code."""
        profiler = self._profiler
        if profiler is not None:
            return self._run_profiled(kernel, profiler)
        if self.device.backend.async_execute is False:
            self._sync = True
            return int(kernel._execute(*kernel._call))
        return self._run_async(kernel)

    def _run_profiled(self, kernel: QnnKernel, profiler: Profiler) -> int:
        """``QnnGraph_execute`` with the profile handle, then its events read as ``last_profile``."""
        code = int(kernel._execute(kernel.handle, kernel._ins, kernel._nin, kernel._outs, kernel._nout,
                                   profiler.handle, kernel._null))
        if code == 0:
            p = profiler.read(kernel.name)
            self.last_profile = p
            us = p.execute_us
            if us is not None:
                self._device_us += us
        return code

    def _run_async(self, kernel: QnnKernel) -> int:
        """``QnnGraph_executeAsync`` (tried once per backend; NOT_SUPPORTED -> synchronous from then on).  The
        asynchronous path has never run: the x86 HTP answers 1000."""
        backend = self.device.backend
        api = self.api
        if self._notify is None:
            self._notify = api.ffi.callback("Qnn_NotifyFn_t", self._done)
        with self._cond:
            self._pending += 1
        # the first try is a probe: its refusal is logged at DEBUG
        with qnn_log.probing("for QnnGraph_executeAsync") if backend.async_execute is None else nullcontext():
            code = api.raw.QnnGraph_executeAsync(kernel.handle, kernel._ins, kernel._nin, kernel._outs, kernel._nout,
                                                 api.null, api.null, self._notify, api.null)
        if code:
            with self._cond:
                self._pending -= 1
            if code & 0xFFFF == _NOT_SUPPORTED and backend.async_execute is None:
                backend.async_execute = False
                return int(kernel._execute(kernel.handle, kernel._ins, kernel._nin, kernel._outs, kernel._nout,
                                           kernel._null, kernel._null))
            return int(code)
        backend.async_execute = True
        self.device._dirty = True  # (after the enqueue: the device's pool fence, QnnDevice._pool_fence)
        return 0

    def _done(self, param: Any, status: Any) -> None:
        code = int(status.error)
        with self._cond:
            self._pending -= 1
            if code and self._async_error is None:
                self._async_error = self.api.error(code, "QnnGraph_executeAsync", "(reported by its notification)")
            self._cond.notify_all()

    # ordering (synchronous execution: everything enqueued is complete)
    def record_event(self) -> QnnEvent:
        # An event at this point: the stream is synchronized, then the **host clock** is read.
        self.device._check_open("Stream.record_event")
        self.synchronize()
        e = QnnEvent(self.device, time.perf_counter_ns())
        if self._profiler is not None:
            e.profile_clock = (self._profiler, self._device_us)
        return e

    def wait_event(self, event: Event) -> None:
        # Events are recorded after the work before them completed: nothing to wait for.
        self.device._check_open("Stream.wait_event")
        if not isinstance(event, QnnEvent):
            raise fail(ErrorKind.INVALID_VALUE, "Stream.wait_event", "Stream.wait_event needs a QNN event", _NAME)
        if event.device is not self.device:  # (as every backend but CUDA/HIP: one device's events only)
            raise foreign(event.device, "Stream.wait_event", f"{event!r} is not an event of {self.device!r}; "
                          "order streams of two devices by synchronizing the first", _NAME)

    def synchronize(self) -> None:
        if self.device._closed:
            raise self.device._closed_error("Stream.synchronize")
        if self._pending:
            with self._cond:
                while self._pending:
                    self._cond.wait()
        err = self._async_error
        if err is not None:
            self._async_error = None
            raise err
        self._check_callback_waits("Stream.synchronize")

    def query(self) -> bool:
        self.device._check_open("Stream.query")
        return self._pending == 0


def _dims_error(dims: Any, what: str) -> Error:
    """The refusal of launch dimensions other than ``LaunchDims()``: launch options and ``shared_mem``
    UNSUPPORTED (as on every backend that cannot honour them), any other geometry INVALID_VALUE."""
    if isinstance(dims, LaunchDims):
        if dims.cooperative or dims.cluster is not None:
            return dims.options_error(_NAME, what)
        if dims.shared_mem and dims.grid == (1, 1, 1) and dims.block == (1, 1, 1):
            return shared_mem_error(_NAME, what, dims.shared_mem)
    return fail(ErrorKind.INVALID_VALUE, what, "a QNN graph has no launch geometry; pass LaunchDims() (grid 1, "
                f"block 1, no shared memory), not {dims!r:.120}", _NAME)


def _same(args: tuple[Any, ...], bound: tuple[Any, ...] | None) -> bool:
    if bound is None or len(args) != len(bound):
        return False
    for a, b in zip(args, bound):
        if a is not b:
            return False
    return True


def _freed(a: Allocation, function: str) -> Error:
    return fail(ErrorKind.INVALID_HANDLE, function, f"{a!r} was freed", _NAME)


class QnnEvent(Event):
    """A point in a stream, as a **host clock** reading (``time.perf_counter_ns``) taken after the work before
    it completed; always complete.  On a profiling stream (:meth:`QnnStream.set_profiling`) it also keeps the
    stream's profiled execute time so far (``profile_clock``: the profiler, microseconds)."""

    profile_clock: tuple[Profiler, int] | None = None

    def __init__(self, device: QnnDevice, t_ns: int) -> None:
        self.device = device
        self.t_ns = t_ns

    def synchronize(self) -> None:
        self.device._check_open("Event.synchronize")

    def query(self) -> bool:
        self.device._check_open("Event.query")
        return True

    def elapsed_ms(self, end: Event) -> float:
        # Host wall time from this event to ``end``, in milliseconds; between two events of one profiling
        # stream (the same set_profiling call), the library's execute time of the launches between them.
        if not isinstance(end, QnnEvent):
            raise fail(ErrorKind.INVALID_VALUE, "Event.elapsed_ms", "Event.elapsed_ms needs another QNN event", _NAME)
        self._elapsed_pair(end)
        a, b = self.profile_clock, end.profile_clock
        if a is not None and b is not None and a[0] is b[0]:
            return (b[1] - a[1]) / 1e3
        return (end.t_ns - self.t_ns) / 1e6


_PY_LAUNCH = (QnnStream.launch, QnnStream.launch_unchecked)  # the Python methods (the compiled ones' slow paths)
