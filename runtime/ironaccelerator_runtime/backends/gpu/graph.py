"""Graphs: :class:`GpuGraph`, a stream capture instantiated and replayed."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from ironaccelerator._core import ErrorKind
from ironaccelerator_runtime.backends.gpu.api import GpuApi
from ironaccelerator_runtime.errors import fail
from ironaccelerator_runtime.traits import Graph, Stream

if TYPE_CHECKING:  # (and bound at run time by __init__.py: the module defining it imports this one)
    from ironaccelerator_runtime.backends.gpu.stream import GpuStream


class GpuGraph(Graph):
    """A captured graph, instantiated (``graph_instantiate``): ``launch(stream)`` is ``graph_launch``.

    It holds the allocations its work uses (recorded by the capture: ``GpuStream._record_into``), so that
    dropping them does not free its memory, and refuses a replay once one of them was freed (INVALID_HANDLE, as
    Vulkan's graphs): the driver would write memory the caller no longer owns.  It holds the host buffers of its
    host copies too (a replay reads or writes them)."""

    def __init__(self, stream: GpuStream) -> None:
        self.stream = stream
        self.device = stream.device
        self.api = stream.api
        self.graph: Any = None
        self.exec: Any = None
        self._fin: Any = None
        self._held = {}
        self._host: list[Any] = []

    def _adopt(self, graph: Any) -> None:
        api = self.api
        self.graph = graph
        out = api.ffi.new(api.tables.types["graph_exec"] + " *")
        code = api.graph_instantiate(out, graph, 0)
        if code:
            api.graph_destroy(graph)
            self.graph = None
            raise api.error(code, "graph_instantiate")
        self.exec = out[0]
        self._fin = weakref.finalize(self, _destroy_graph, api, graph, self.exec)

    def launch(self, stream: Stream | None = None) -> None:
        # Replay the recorded work on ``stream`` (default: the stream it was captured on).
        s = self.stream if stream is None else stream
        if not isinstance(s, GpuStream) or s.device is not self.device:
            raise fail(ErrorKind.INVALID_VALUE, "Graph.launch", f"{s!r} is not a stream of {self.device.descriptor.id}",
                       self.api)
        if self.exec is None:
            raise fail(ErrorKind.INVALID_HANDLE, "Graph.launch", "the graph is closed or was never captured", self.api)
        if self.device._closed:
            raise self.device._closed_error("Graph.launch")
        freed = self._freed_error("Graph.launch", self.api)
        if freed is not None:
            raise freed
        outer = s._capture
        if outer is not None:  # captured into another graph (a child graph node): that one uses these too
            outer._hold(*self._held.values())
        self.device.activate()
        self.api.check(self.api.graph_launch(self.exec, s.handle), "graph_launch")

    def close(self) -> None:
        if self._fin is not None:
            self._fin()
            self._fin = None
        self.exec = self.graph = None
        self._held, self._host = {}, []


def _destroy_graph(api: GpuApi, graph: Any, exe: Any) -> None:
    api.graph_exec_destroy(exe)
    api.graph_destroy(graph)
