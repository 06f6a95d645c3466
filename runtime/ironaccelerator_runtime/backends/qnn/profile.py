"""QNN profiling (``QnnProfile``): a stream's launches executed with a profile handle, and what the library
reports for each as typed records (:class:`ProfileEvent`, :class:`LaunchProfile`).

The levels offered are QNN's two generic ones, ``"basic"`` (``QNN_PROFILE_LEVEL_BASIC``, 1: whole-execution
figures) and ``"detailed"`` (``QNN_PROFILE_LEVEL_DETAILED``, 2: adds a row per node).  Measured on libQnnHtp 2.51
(x86): ``QnnProfile_create`` accepts *any* level number (0, 3, 1000, 0xFFFFFFFF) and profiles every one but 2 as
BASIC, so the library cannot say what it lacks; any other level is refused here as ``UNSUPPORTED`` before a call.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Callable

from ironaccelerator._core import ErrorKind
from ironaccelerator_runtime.errors import fail

from .tables import _NAME, _Owned, _SAVER_BACKEND_ID

# QnnProfile_Level_t: the levels offered, by name
LEVEL_NAMES = ("basic", "detailed")
# QnnProfile_EventUnit_t: the units QNN defines, by their suffix in the declarations (1000 and up: the backend's
# own, shown as the number)
UNIT_NAMES = {"MICROSEC": "us", "BYTES": "bytes", "CYCLES": "cycles", "COUNT": "count", "OBJECT": "object"}


@functools.cache
def _declared() -> tuple[dict[str, int], dict[int, str], int, int]:
    """(levels, units, EXECUTE, NODE): the declared values of specs/qnn/interface.yaml (read on first use, as the
    rest of the backend reads its binding)."""
    from ironaccelerator.backends.qnn import interface as q

    levels = {n: int(getattr(q, f"QNN_PROFILE_LEVEL_{n.upper()}")) for n in LEVEL_NAMES}
    units = {int(getattr(q, f"QNN_PROFILE_EVENTUNIT_{k}")): v for k, v in UNIT_NAMES.items()}
    # EXECUTE: the execution as the library timed it; NODE: one node of it (a sub-event; DETAILED)
    return levels, units, int(q.QNN_PROFILE_EVENTTYPE_EXECUTE), int(q.QNN_PROFILE_EVENTTYPE_NODE)


# a node row's identifier on HTP: "<node name>:OpId_<n> (<unit>)"; the graph's input and output stages are
# "Input OpId_<n> (<unit>)" / "Output OpId_<n> (<unit>)"
_NODE_ID = re.compile(r"(?P<node>.*?)[: ]OpId_(?P<op>\d+)(?: \((?P<unit>[^)]*)\))?\Z")


@dataclass(frozen=True)
class ProfileEvent:
    """One event the library reported for a launch (``QnnProfile_getEventData``), with its sub-events.

    ``type``: the ``QnnProfile_EventType_t`` (400 EXECUTE, 404 NODE; 1000 and up the backend's own: HTP's 3004 is
    its accelerator time); ``unit``: ``"us"``, ``"cycles"``, ``"count"``, ``"bytes"``, ``"object"``, or the
    number as a str for a unit QNN does not define; ``node``: for a NODE event, the node's name as it was added
    to the graph (``"Input"``/``"Output"`` for HTP's input and output stages), else None."""

    name: str  # the library's identifier  ex) "QNN (execute) time", "chain_f32_add:OpId_16 (cycles)"
    type: int
    unit: str
    value: int
    node: str | None
    children: tuple[ProfileEvent, ...]


@dataclass(frozen=True)
class LaunchProfile:
    """What the library reported for one launch (``Stream.last_profile`` of a profiling stream).

    ``execute_us``: the EXECUTE event's value in microseconds (the library's time for ``QnnGraph_execute``), or
    None if it reported none; ``nodes``: every NODE event, in the order reported (DETAILED only)."""

    graph: str
    level: str
    events: tuple[ProfileEvent, ...]

    @property
    def execute_us(self) -> int | None:
        execute = _declared()[2]
        for e in self.events:
            if e.type == execute and e.unit == "us":
                return e.value
        return None

    @property
    def nodes(self) -> tuple[ProfileEvent, ...]:
        out: list[ProfileEvent] = []
        node = _declared()[3]

        def walk(events: tuple[ProfileEvent, ...]) -> None:
            for e in events:
                if e.type == node:
                    out.append(e)
                walk(e.children)
        walk(self.events)
        return tuple(out)


def level_number(level: Any, function: str) -> int:
    """``"basic"``/``"detailed"`` -> its QnnProfile_Level_t; another str is ``UNSUPPORTED``, not a str TypeError."""
    if not isinstance(level, str):
        raise TypeError(f"{function}: level must be a str ('basic' or 'detailed') or None, not "
                        f"{type(level).__name__} ({level!r:.80})")
    n = _declared()[0].get(level.lower())
    if n is None:
        raise fail(ErrorKind.UNSUPPORTED, function, f"profiling level {level!r} is not supported; QNN's levels are "
                   f"{', '.join(repr(k) for k in LEVEL_NAMES)} (libQnnHtp takes any level number and profiles all but "
                   "DETAILED as BASIC, so no other is offered)", _NAME)
    return n


class Profiler:
    """A profile handle (``QnnProfile_create`` on the device's backend handle) at one level; :meth:`read` gives
    the events of the execution it was last passed to (the library keeps the latest execution's only)."""

    def __init__(self, device: Any, level: str, function: str) -> None:
        n = level_number(level, function)
        device._check_open(function)
        api = device.api
        self.api = api
        self.level = level.lower()
        handle = api.q.QnnProfile_create(device._backend_owner.handle, n)
        # freed before the backend handle it was made from
        self._owner = _Owned(handle, _profile_free(api.q), device._backend_owner)
        self.handle = handle
        # the Saver (QnnBackend(trace_dir=...)) records the calls, executes nothing and answers its dummy value
        # (QNN_SAVER_ERROR_DUMMY_RETVALUE) to QnnProfile_getEvents: no events, not an error
        self._saver = device.backend.backend_id == _SAVER_BACKEND_ID

    def read(self, graph: str) -> LaunchProfile:
        api = self.api
        q, ffi = api.q, api.ffi
        ids = ffi.new("QnnProfile_EventId_t **")
        count = ffi.new("uint32_t *")
        code = api.raw.QnnProfile_getEvents(self.handle, ids, count)
        if code:
            if self._saver and code & 0xFFFF == int(q.QNN_SAVER_ERROR_DUMMY_RETVALUE):
                return LaunchProfile(graph=graph, level=self.level, events=())
            raise api.error(code, "QnnProfile_getEvents", f"the profile of graph {graph!r}")
        events = tuple(_event(q, ffi, ids[0][i], 0) for i in range(count[0]))
        return LaunchProfile(graph=graph, level=self.level, events=events)


def _profile_free(q: Any) -> Callable[[Any], object]:
    free = q.unchecked.QnnProfile_free
    return lambda handle: free(handle)


def _event(q: Any, ffi: Any, eid: int, depth: int) -> ProfileEvent:
    _, units, _, node_type = _declared()
    d = q.QnnProfile_getEventData(eid)
    name = ffi.string(d.identifier).decode("utf-8", "replace") if d.identifier else ""
    etype, unit = int(d.type), int(d.unit)
    node = None
    if etype == node_type:
        m = _NODE_ID.match(name)
        node = m.group("node") if m else name
    children: tuple[ProfileEvent, ...] = ()
    if depth < 8:  # (sub-events of sub-events: HTP reports one level)
        sub, ns = q.QnnProfile_getSubEvents(eid)
        children = tuple(_event(q, ffi, sub[i], depth + 1) for i in range(ns))
    return ProfileEvent(name=name, type=etype, unit=units.get(unit, str(unit)), value=int(d.value), node=node,
                        children=children)
