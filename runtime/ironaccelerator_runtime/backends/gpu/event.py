"""Events: :class:`GpuEvent`, a point in a stream, which releases the stream's in-flight host buffers once seen
complete."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from ironaccelerator._core import ErrorKind
from ironaccelerator_runtime.backends.gpu.context import _destroy
from ironaccelerator_runtime.errors import fail
from ironaccelerator_runtime.traits import Event, InFlight

if TYPE_CHECKING:  # (and bound at run time by __init__.py: the module defining it imports this one)
    from ironaccelerator_runtime.backends.gpu.device import GpuDevice


class GpuEvent(Event):
    """A point in a stream.  It knows the stream's in-flight host buffers enqueued before it (``InFlight`` and
    the mark at record time): once the event is seen complete (``synchronize``, a ``query`` that returns True)
    they are released."""

    def __init__(self, device: GpuDevice, handle: Any, inflight: InFlight | None = None, mark: int = 0) -> None:
        self.device = device
        self.api = device.api
        self.handle = handle
        self._finalizer = weakref.finalize(self, _destroy, self.api.event_destroy, handle, device._ctx)
        self._inflight = inflight
        self._mark = mark

    def synchronize(self) -> None:
        if self.device._closed:
            raise self.device._closed_error("Event.synchronize")
        self.api.check(self.api.event_synchronize(self.handle), "event_synchronize")
        self._done()

    def query(self) -> bool:
        if self.device._closed:
            raise self.device._closed_error("Event.query")
        code = self.api.event_query(self.handle)
        if code == self.api.status_not_ready:
            return False
        self.api.check(code, "event_query")
        self._done()
        return True

    def elapsed_ms(self, end: Event) -> float:
        if not (isinstance(end, GpuEvent) and end.api is self.api):  # (the same api: the same vendor)
            raise fail(ErrorKind.INVALID_VALUE, "Event.elapsed_ms",
                       f"Event.elapsed_ms needs another {self.api.name} event",
                       self.api)
        self._elapsed_pair(end)  # (either device closed, another device's event; both waited for)
        out = self.api.ffi.new("float *")
        self.api.check(self.api.event_elapsed(out, self.handle, end.handle), "event_elapsed")
        return float(out[0])
