"""The :class:`Event` trait base: a marker in a stream's order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ironaccelerator._core import ErrorKind

from ..errors import Error, as_operation, fail
from .checks import _kind_of, _not_picklable, _owner, unsupported

if TYPE_CHECKING:  # (and bound at run time by the package: callbacks builds on this module)
    from .callbacks import InFlight


class Event:
    """A point in a stream's order, made by :meth:`Stream.record_event`: wait for it, poll it, time between two,
    make another stream wait for it (:meth:`Stream.wait_event`), or ``await`` it.

    ``await event`` waits (as :meth:`synchronize`) in the event loop's default executor, so the loop keeps
    running; a failure raises from the ``await``.  Events are not picklable (a driver handle of this process).

    Backends:
        CUDA/HIP: a driver event (``cuEventRecord``/``hipEventRecord``).  OpenCL: a marker
        (``clEnqueueMarkerWithWaitList``) on a profiling queue.  Metal: a command buffer that signals the stream's
        ``MTLSharedEvent``.  QNN: a **host clock** reading taken after the stream was synchronized (QNN executes
        synchronously here), so it is always complete.
    """

    # the stream's in-flight host buffers (the sources of asynchronous copies) enqueued before this event, and the
    # mark at record time: released once the event is seen complete (a backend's synchronize or a query that
    # returns True calls _done)
    _inflight: InFlight | None = None
    _mark: int = 0

    def _done(self) -> None:
        inflight = self._inflight
        if inflight is not None:
            inflight.release(self._mark)
            self._inflight = None

    def __reduce__(self) -> Any:  # (a driver handle of this process: no pickle, no copy.copy)
        raise _not_picklable(self, "Event")

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{_owner(self)}>"

    def synchronize(self) -> None:
        """Block until the work queued before this event is complete.

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` when the event's device was closed; the failure of the work
                before the event, where the vendor reports it here (CUDA/HIP and OpenCL: the driver's status,
                e.g. ``LAUNCH_FAILED``; Metal: ``LAUNCH_FAILED`` naming the failed command buffers).

        Backends:
            All.  QNN: returns at once (the event was recorded after its work completed).
        """
        raise unsupported(_kind_of(self), "Event.synchronize")

    def query(self) -> bool:
        """Whether the work queued before this event is complete, without waiting.

        Returns:
            True when complete, False while work before it is pending (never ``NOT_READY``).

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` when the event's device was closed; CUDA/HIP and OpenCL: the
                vendor's failure status of the query (other than "not ready").

        Backends:
            All.  QNN: always True.
        """
        raise unsupported(_kind_of(self), "Event.query")

    def elapsed_ms(self, end: Event) -> float:
        """Milliseconds from this event to ``end``.

        One behaviour on every backend: a pending event is waited for (both events are synchronized first, as
        :meth:`synchronize` does, whose failures it raises), never ``NOT_READY``.

        Args:
            end: a later event of the same backend (of any of its streams).

        Returns:
            The time between the two events in milliseconds, a float.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` when ``end`` is not an event of this device (None, another
                backend's event, an event of another open device: two clocks); ``ErrorKind.INVALID_HANDLE`` when
                either event's device was closed; what :meth:`synchronize` raises (as ``Event.elapsed_ms``'s);
                ``ErrorKind.UNSUPPORTED`` on a backend without events.

        Backends:
            All, each with its own clock.  CUDA/HIP: ``cuEventElapsedTime``/``hipEventElapsedTime`` (device
            clock).  OpenCL: the markers' ``CL_PROFILING_COMMAND_END`` (device clock).  Metal: the command
            buffers' ``GPUEndTime``.  QNN: host wall time (``time.perf_counter_ns``) between the two records.
        """
        raise unsupported(_kind_of(self), "Event.elapsed_ms")

    def _elapsed_pair(self, end: Any) -> None:
        """What every backend's :meth:`elapsed_ms` does before it reads the two times (its own ``end`` type
        checked first): INVALID_HANDLE when either event's device was closed, INVALID_VALUE when ``end`` is an
        event of another device (two devices' clocks: no interval; as ``Stream.wait_event``), then both waited for
        (their failures raised as ``Event.elapsed_ms``'s, the operation called)."""
        device, other = self.device, end.device  # type: ignore[attr-defined]
        for d in (device, other):
            if d._closed:
                raise d._closed_error("Event.elapsed_ms")
        if other is not device:
            raise fail(ErrorKind.INVALID_VALUE, "Event.elapsed_ms", f"{end!r} is an event of another device than "
                       f"{self!r}: time two events of one device", device)
        try:
            self.synchronize()
            end.synchronize()
        except Error as e:
            raise as_operation(e, "Event.synchronize", "Event.elapsed_ms") from None

    def _wait_for_callback(self) -> None:
        """Wait, for a host callback (``Stream.add_callback``), until the work before the event is over.  A failure
        of that work raises here where waiting reports it (``synchronize``, the default); a backend whose stream
        keeps its failures for ``Stream.synchronize`` waits without taking them (Metal)."""
        self.synchronize()

    def __await__(self) -> Any:
        """``await event``: the wait (``synchronize``) runs in the event loop's default executor, so the loop keeps
        running; a failure raises from the ``await``."""
        import asyncio

        return asyncio.get_running_loop().run_in_executor(None, self.synchronize).__await__()
