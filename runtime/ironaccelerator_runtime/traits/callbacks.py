"""Host callbacks run in stream order (``Stream.add_callback``) and :class:`InFlight`, the tracking of what a
stream's pending work keeps alive until it completes."""

from __future__ import annotations

import threading
from typing import Any, Callable, TYPE_CHECKING


if TYPE_CHECKING:
    from .event import Event


_CALLBACK_LOCK = threading.Lock()


class _Callbacks:
    """One stream's host callbacks: a FIFO of (event, fn) served by a daemon thread that ends when idle.

    Each ``fn`` runs once the work before it is over, failed or not: a failure of that work is not ``fn``'s (it
    is never filed under ``fn`` in ``errors``); it is logged, and kept in ``wait_errors`` for the stream's
    ``synchronize`` to raise (where the backend's event wait reports it; Metal's streams keep their own)."""

    IDLE_S = 1.0  # a thread with nothing to do for this long ends (the next add starts another)

    def __init__(self) -> None:
        import collections

        self.cond = threading.Condition()
        self.queue: collections.deque[tuple[Event, Callable[[], object]]] = collections.deque()
        self.errors: list[tuple[Callable[[], object], BaseException]] = []
        self.wait_errors: list[BaseException] = []
        self.pending = 0
        self.thread: threading.Thread | None = None

    def add(self, event: Event, fn: Callable[[], object]) -> None:
        with self.cond:
            self.queue.append((event, fn))
            self.pending += 1
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="ironaccelerator-callbacks", daemon=True)
                self.thread.start()
            self.cond.notify_all()

    def drain(self, timeout: float | None) -> bool:
        with self.cond:
            if self.thread is threading.current_thread():
                raise RuntimeError("Stream.drain_callbacks: called from a callback of the same stream, it would wait "
                                   "for itself (a deadlock); drain from another thread")
            return self.cond.wait_for(lambda: self.pending == 0, timeout)

    def _run(self) -> None:
        import logging

        log = logging.getLogger("ironaccelerator.callbacks")
        while True:
            with self.cond:
                if not self.queue and not self.cond.wait_for(lambda: bool(self.queue), self.IDLE_S):
                    self.thread = None
                    return
                event, fn = self.queue.popleft()
            try:
                try:
                    event._wait_for_callback()
                except BaseException as e:  # the work before fn failed: the stream's failure, not fn's
                    log.error("the work queued before stream callback %r failed (the callback is still called; "
                              "Stream.synchronize raises it): %s: %s", fn, type(e).__name__, e)
                    with self.cond:
                        self.wait_errors.append(e.with_traceback(None))
                del event
                fn()
            except BaseException as e:  # reported and kept: a callback never takes the thread (or process) down
                log.error("stream callback %r raised %s", fn, type(e).__name__, exc_info=e)
                with self.cond:
                    self.errors.append((fn, e))
            finally:
                event = None  # type: ignore[assignment]
                with self.cond:
                    self.pending -= 1
                    self.cond.notify_all()


class InFlight:
    """The host buffers a stream's asynchronous copies still use, in enqueue order, each released as soon
    as work after it is known complete.

    ``mark()`` is the sequence number of the next buffer: a backend records it with each event (and before
    a ``synchronize``/``query``); once that event is seen complete (``Event.synchronize``, an
    ``Event.query`` that returns True, a finished stream), ``release(mark)`` lets every buffer enqueued
    before it go.  Streams are in order, so that is exact.  Appending is a list operation under the GIL;
    releases may come from several threads (an ``await event`` waits in an executor, host callbacks on the stream's
    callback thread), so a release takes a lock to drop its prefix and count it, and lets the dropped buffers go
    (their finalizers run Python code) after letting go of it.
    """

    __slots__ = ("items", "base", "_lock", "__weakref__")

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.base = 0  # the sequence number of items[0]
        self._lock = threading.Lock()

    def mark(self) -> int:
        # (base is read first: a release between the two reads can only make the mark smaller, which keeps buffers
        # longer, never shorter; release drops the items before it moves base)
        return self.base + len(self.items)

    def release(self, mark: int) -> None:
        if mark <= self.base:  # nothing to drop (base only grows: a stale read just takes the lock below)
            return
        lock = self._lock
        lock.acquire()  # (acquire/release, and no slice object when all go: ~130 ns of a synchronize)
        try:
            n = mark - self.base
            if n <= 0:
                return
            items = self.items
            if n == len(items):  # (a synchronize: everything enqueued so far)
                dropped = items.copy()
                items.clear()
            else:
                dropped = items[:n]
                del items[:n]
            self.base += n
        finally:
            lock.release()
        del dropped  # the buffers' finalizers run here, outside the lock

    def __len__(self) -> int:
        return len(self.items)
