"""Seeing what the driver does: every raw call the substrate makes, logged with its arguments, status and duration.

``IRONACCEL_TRACE=1`` in the environment when the process starts: each generated module's raw functions (its
``unchecked`` module, which the backends call) are wrapped when the module is imported, and every call is logged
at DEBUG to ``ironaccelerator.trace`` (to standard error if that logger has no handler of its own)::

    clEnqueueWriteBuffer(<cdata 'struct _cl_command_queue *' 0x...>, ..., 4096, ...) -> 0 [3.1 us]

``IRONACCEL_TRACE=ondemand`` wraps the same functions but logs only inside ``with ironaccelerator.trace():``.
``nvtx`` (alone or with the others: ``IRONACCEL_TRACE=1,nvtx``) puts every call in an NVTX range named after the
function, in the ``ironaccelerator`` domain, so that Nsight Systems shows them on its timeline (where NVIDIA's NVTX
library is installed: :mod:`ironaccelerator_runtime.nvtx`); alone, it logs only inside ``trace()``.
Unset (or ``0``, ``off``, ``false``, ``no``), nothing is wrapped: the raw functions are the compiled cffi functions themselves, so tracing
costs nothing when it is off (``tests/test_tracing.py`` checks that they are the same objects).  The compiled fast
paths that call the driver from C (the CUDA/HIP packed launch and pool allocation) are not used while tracing is on,
so launches and pool allocations are logged too; the checked fast paths compiled into the cffi modules
(the checked functions; their Python wrappers call the cffi functions, not the wrapped ``unchecked`` ones,
so in ABI mode too) call the driver directly and are not traced.

Accepted words (comma-separated, any case): ``1``/``on``/``true``/``yes`` (log every call), ``ondemand``, ``nvtx``,
and the off words above; any other word is ignored with a :class:`RuntimeWarning` listing these (a typo never
turns full tracing on).  Where the lines go: the ``ironaccelerator.trace`` logger.  Until the application gives
that logger (or, through propagation, an ancestor such as the root logger) a handler of its own, a fallback
handler writes them to standard error; once it does, they go to its handlers only, each line once.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import sys
import time
import warnings
from typing import Any, Callable, Iterator, MutableMapping, TYPE_CHECKING

if TYPE_CHECKING:
    import logging

from ironaccelerator._core import ErrorKind

from .errors import fail

__all__ = ["ENABLED", "MODE", "NVTX", "trace", "wrap", "traced", "log"]

MODE = os.environ.get("IRONACCEL_TRACE", "").strip().lower()
_OFF = {"", "0", "off", "false", "no"}
_ON = {"1", "on", "true", "yes"}
_KNOWN = _OFF | _ON | {"ondemand", "nvtx"}
_WORDS = {w.strip() for w in MODE.split(",")} - _OFF
if _WORDS - _KNOWN:
    warnings.warn(f"IRONACCEL_TRACE={os.environ.get('IRONACCEL_TRACE', '')!r}: unknown "
                  f"{', '.join(sorted(repr(w) for w in _WORDS - _KNOWN))} ignored; accepted (comma-separated): "
                  "1/on/true/yes (log every driver call), ondemand (log inside ironaccelerator.trace()), nvtx, "
                  "0/off/false/no", RuntimeWarning, stacklevel=2)
    _WORDS &= _KNOWN
NVTX = "nvtx" in _WORDS  # every call in an NVTX range of the "ironaccelerator" domain (ironaccelerator_runtime.nvtx)
ENABLED = bool(_WORDS)  # wrappers installed (at import of each generated module)
_active = bool(_WORDS - {"ondemand", "nvtx"})  # logging now (ondemand, or nvtx alone: only inside trace())
_depth = 0
_lock = _thread.allocate_lock()  # (threading's Lock, without importing threading)
_REPR_MAX = 64



def _trace_logger() -> logging.Logger:
    """The ``ironaccelerator.trace`` logger, with the fallback handler where the env var asks for output.  (logging
    is imported only where tracing is on, or ``log`` is read: ~3 ms of the first device's start otherwise.)"""
    import logging

    log = logging.getLogger("ironaccelerator.trace")

    class _Fallback(logging.StreamHandler):  # type: ignore[type-arg]
        """Standard error, for as long as no other handler would get the line (on the logger, or through
        propagation on an ancestor): configuring logging after import takes the lines over instead of printing
        each twice."""

        def emit(self, record: logging.LogRecord) -> None:
            c: logging.Logger | None = log
            while c is not None:
                for h in c.handlers:
                    if h is not self:
                        return
                if not c.propagate:
                    break
                c = c.parent
            super().emit(record)

    if _WORDS - {"nvtx"} and not log.handlers:  # the env var asks for output: a place to go unless the app chose one
        handler = _Fallback(sys.stderr)
        handler.setFormatter(logging.Formatter("ironaccelerator.trace: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.DEBUG)
    return log


if _WORDS:
    log = _trace_logger()
else:
    def __getattr__(name: str) -> Any:  # (tracing off: the logger made when first read)
        if name == "log":
            globals()["log"] = logger = _trace_logger()
            return logger
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= _REPR_MAX else r[:_REPR_MAX - 3] + "..."


def traced(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` logging each call (while tracing is active): name, arguments, result or exception, duration; with
    ``nvtx`` in ``IRONACCEL_TRACE``, inside an NVTX range named after the function as well.  NVTX's own functions
    (the tracer's instrument) are returned as they are."""
    if name.startswith("nvtx"):
        return fn
    return _ranged(fn, name) if NVTX else _logged(fn, name)


def _logged(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    perf = time.perf_counter

    def call(*args: Any) -> Any:
        if not _active:
            return fn(*args)
        t0 = perf()
        try:
            r = fn(*args)
        except BaseException as e:
            log.debug("%s(%s) raised %s [%.1f us]", name, ", ".join(map(_short, args)), type(e).__name__,
                      (perf() - t0) * 1e6)
            raise
        log.debug("%s(%s) -> %s [%.1f us]", name, ", ".join(map(_short, args)), _short(r), (perf() - t0) * 1e6)
        return r

    call.__name__ = call.__qualname__ = name
    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


def _ranged(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``IRONACCEL_TRACE=nvtx``: each call of ``fn`` in an NVTX range (domain ``ironaccelerator``), and logged as
    :func:`traced` logs while logging is active."""
    from . import nvtx
    logged = _logged(fn, name)
    # the range (message = the function's name) prepared once per function, through nvtx's public hook
    ranged = nvtx.prepared_range(name, domain=nvtx.DOMAIN)
    if ranged is None:  # no NVTX library: logging only
        return logged
    push, pop = ranged.push, ranged.pop

    def call(*args: Any) -> Any:
        push()
        try:
            return logged(*args)
        finally:
            pop()

    call._keep = ranged  # type: ignore[attr-defined]  # what the prepared range's attributes point to

    call.__name__ = call.__qualname__ = name
    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


def wrap(namespace: MutableMapping[str, Any], names: Any) -> None:
    """Replace each function ``names`` lists in ``namespace`` (a generated ``unchecked`` module's globals) with its
    traced twin; called by the generated modules only when :data:`ENABLED`."""
    for name in names:
        fn = namespace.get(name)
        if callable(fn) and not hasattr(fn, "__wrapped__"):
            namespace[name] = traced(fn, name)


@contextlib.contextmanager
def trace() -> Iterator[None]:
    """Log every raw driver call made inside the block: ``with ironaccelerator.trace(): ...``.

    Each call is logged at DEBUG to the ``ironaccelerator.trace`` logger with its arguments, result (or
    exception) and duration.  ``IRONACCEL_TRACE`` (``ondemand``, ``1`` or ``nvtx``) must have been set when the
    process started: the functions are wrapped when their modules are imported, so that a process that never
    traces pays nothing.  Nests; process-wide effect (calls from other threads meanwhile are logged too).

    Returns:
        A context manager (nothing to bind with ``as``).

    Raises:
        Error: ``ErrorKind.UNSUPPORTED`` when tracing is off in this process (``IRONACCEL_TRACE`` unset or
            ``0``/``off``/``false``/``no`` at start-up), saying which value to set.

    Backends:
        All: every generated binding's raw (``unchecked``) functions, whatever the vendor.  Not traced: the
        checked fast paths compiled into the cffi modules, which call the driver from C.
    """
    global _active, _depth
    if not ENABLED:
        raise fail(ErrorKind.UNSUPPORTED, "ironaccelerator.trace", "tracing is off in this process; start it with "
                   "IRONACCEL_TRACE=ondemand (wrapped, logging only inside trace()) or IRONACCEL_TRACE=1 (always)", None)
    with _lock:
        _depth += 1
        before = _active
        _active = True
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _active = before
