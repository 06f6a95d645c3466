"""QNN's log messages, into Python :mod:`logging` (logger ``ironaccelerator.qnn``).

A QNN backend library logs through a *log handle* (``Qnn_LogHandle_t``) made by ``QnnLog_create`` from a C
callback and a maximum level; the handle is then given to ``QnnBackend_create`` / ``QnnDevice_create`` (and the
calls that take one).  :func:`create_logger` makes such a handle whose callback formats each message and logs it
on :data:`LOGGER`; :func:`free_logger` frees it; :func:`set_level` / :func:`sync` follow later level changes
(``QnnLog_setLogLevel``).

Levels (``QnnLog_Level_t`` -> logging): ERROR 1 -> ERROR, WARN 2 -> WARNING, INFO 3 -> INFO, VERBOSE 4 -> DEBUG,
DEBUG 5 -> :data:`QNN_DEBUG` (5, finer than DEBUG).  The record carries ``qnn_level`` (the QNN level) and
``qnn_timestamp`` (the library's ``uint64_t`` timestamp) as attributes.

Formatting: QNN's callback is ``void (*)(const char *fmt, QnnLog_Level_t level, uint64_t timestamp, va_list args)``,
a printf format and its arguments.  cffi cannot declare ``va_list``, so the spec declares ``args`` as ``void *``,
and the message is formatted in C by libc's ``vsnprintf`` given that pointer (never by reading the format in
Python).  That is valid where a ``va_list`` parameter arrives as a pointer to the caller's list, and a list can be
copied by copying its bytes (``va_copy``): x86-64 System V (``va_list`` is an array of one 24-byte struct, so the
parameter is a pointer to it) and AArch64 Linux (a 32-byte struct, which AAPCS64 passes by reference to a copy).
Everywhere else (:data:`FORMATS_ARGUMENTS` is False) the message is the format itself, unformatted, prefixed
``[unformatted]``: degraded, never a crash.

The callback never raises into C: an exception inside it (a failing filter of :data:`LOGGER`, say) is swallowed
there, counted in :func:`callback_errors` and reported once per kind on stderr.  A handle's cffi callback is kept
alive until :func:`free_logger` has freed it; the bookkeeping is under a lock, and the callback may run on any
thread (cffi takes the GIL; :mod:`logging` is thread-safe).
"""

from __future__ import annotations

import logging
import platform
import sys
import threading
from dataclasses import dataclass
from typing import Any

import cffi

from ironaccelerator._core import ErrorKind
from ironaccelerator_runtime.errors import fail

from . import qnn_saver as _qnn_saver  # noqa: F401  (installs the IA_QNN_TRACE_DIR hook before the first call)

LOGGER = logging.getLogger("ironaccelerator.qnn")

QNN_DEBUG = 5  # the logging level of QNN_LOG_LEVEL_DEBUG: finer than logging.DEBUG (where VERBOSE goes)
if logging.getLevelName(QNN_DEBUG) == f"Level {QNN_DEBUG}":
    logging.addLevelName(QNN_DEBUG, "QNN_DEBUG")

# QnnLog_Level_t -> logging level, finest last
LEVELS: dict[int, int] = {1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.DEBUG, 5: QNN_DEBUG}

# bytes of a va_list where the parameter is a pointer to it (see the module docstring); absent: not formatted
_VA_LIST_BYTES = {("linux", "x86_64"): 24, ("linux", "amd64"): 24, ("linux", "aarch64"): 32, ("linux", "arm64"): 32}
_VA_BYTES = _VA_LIST_BYTES.get((sys.platform, platform.machine().lower()))
FORMATS_ARGUMENTS: bool = _VA_BYTES is not None
_FIRST_BUFFER = 512  # most messages fit; longer ones are formatted again at their length

_cffi = cffi.FFI()
_cffi.cdef("int vsnprintf(char *s, size_t n, const char *fmt, void *ap);\n"
           "void *memcpy(void *d, const void *s, size_t n);")
_libc: Any = _cffi.dlopen(None) if FORMATS_ARGUMENTS else None


def _q() -> Any:
    import ironaccelerator.backends.qnn.interface as q
    return q


def qnn_level(level: int) -> int:
    """The ``QnnLog_Level_t`` that lets through what Python ``level`` lets through: the finest QNN level whose
    logging level is at least ``level`` (ERROR, 1, for anything above ERROR: QNN has no quieter level)."""
    if isinstance(level, bool) or not isinstance(level, int):
        raise fail(ErrorKind.INVALID_VALUE, "qnn_level",
                   f"a logging level is an int (logging.INFO, ...), not {level!r}", "QNN")
    return max((q for q, py in LEVELS.items() if py >= level), default=1)


def format_message(fmt: Any, args: Any) -> str:
    """``vsnprintf(fmt, args)`` of a QNN log callback's ``fmt`` (char *) and ``args`` (its va_list pointer),
    formatted on a copy of the list; trailing newlines dropped."""
    fmt_p = _cffi.cast("const char *", int(_cffi.cast("uintptr_t", fmt)))
    if fmt_p == _cffi.NULL:
        return ""
    if _VA_BYTES is None:
        return "[unformatted] " + _text(_cffi.string(fmt_p))
    ap = _cffi.cast("void *", int(_cffi.cast("uintptr_t", args)))
    saved = _cffi.new("char[]", _VA_BYTES)  # va_copy: the list is its bytes on these ABIs
    _libc.memcpy(saved, ap, _VA_BYTES)
    size = _FIRST_BUFFER
    while True:
        work = _cffi.new("char[]", _VA_BYTES)
        _libc.memcpy(work, saved, _VA_BYTES)
        buf = _cffi.new("char[]", size)
        n = _libc.vsnprintf(buf, size, fmt_p, work)
        if n < 0:
            return "[format error] " + _text(_cffi.string(fmt_p))
        if n < size:
            return _text(_cffi.string(buf, n))
        size = n + 1


def _text(raw: bytes) -> str:
    """A message as logged: decoded, without the newline and the leading space QNN puts around it."""
    return str(raw.decode("utf-8", "replace").strip())


@dataclass
class _Handle:
    """A live log handle's callback (kept alive here) and whether it follows :data:`LOGGER`'s level."""

    handle: Any  # Qnn_LogHandle_t
    callback: Any  # the cffi callback the library calls: must outlive the handle
    follows: bool


_lock = threading.RLock()  # the live handles; held across QnnLog_free / QnnLog_setLogLevel
_live: dict[int, _Handle] = {}  # handle address -> its callback
_error_lock = threading.Lock()
_errors = 0  # messages dropped because the Python side raised
_reported: set[str] = set()  # exception types already reported on stderr


_probe = threading.local()  # .depth: inside probing() on this thread


class probing:
    """``with probing(what):`` the library's messages on this thread are logged at DEBUG at most, with ``what``:
    for a call made to find out whether the library supports something (``QnnGraph_executeAsync`` on a backend
    that may not have it), whose refusal is an answer, not an error the user should see."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        self.outer = getattr(_probe, "what", None)
        _probe.what = self.what

    def __exit__(self, *exc: object) -> None:
        _probe.what = self.outer


def _on_message(fmt: Any, level: int, timestamp: int, args: Any) -> None:
    py = LEVELS.get(int(level), QNN_DEBUG)
    what = getattr(_probe, "what", None)
    if what is not None:
        py = min(py, logging.DEBUG)
    if not LOGGER.isEnabledFor(py):
        return
    text = format_message(fmt, args)
    if what is not None:
        text += f" (while probing {what}: expected where it is unsupported)"
    LOGGER.log(py, "%s", text, extra={"qnn_level": int(level), "qnn_timestamp": int(timestamp)})


def _on_error(exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
    """cffi's ``onerror``: what the callback raised stays here (the C caller gets a plain return)."""
    global _errors
    name = exc_type.__name__ if exc_type is not None else "?"
    with _error_lock:  # never held across a C call (the thread that holds _lock may be waiting for this one)
        _errors += 1
        first = name not in _reported
        _reported.add(name)
    if first:
        try:
            sys.stderr.write(f"ironaccelerator.qnn: a QNN log message was dropped: {name}: {exc}\n")
        except Exception:
            pass


def callback_errors() -> int:
    """How many QNN log messages were dropped because the Python side raised (since the process started)."""
    return _errors


def create_logger(level: int | None = None) -> Any:
    """A ``Qnn_LogHandle_t`` (``QnnLog_create``) whose messages go to :data:`LOGGER`.

    ``level``: a :mod:`logging` level; the library is asked for the messages it lets through
    (:func:`qnn_level`).  None: follow :data:`LOGGER`'s effective level, now and at each :func:`set_level` /
    :func:`sync`.  Free it with :func:`free_logger` after the backend and device that use it."""
    q = _q()
    follows = level is None
    max_level = qnn_level(LOGGER.getEffectiveLevel() if level is None else level)
    callback = q.ffi.callback("QnnLog_Callback_t", _on_message, onerror=_on_error)
    handle = q.QnnLog_create(callback, max_level)
    with _lock:
        _live[int(q.ffi.cast("uintptr_t", handle))] = _Handle(handle, callback, follows)
    return handle


def free_logger(handle: Any) -> None:
    """``QnnLog_free`` a handle of :func:`create_logger`, then let its callback go (kept if the free fails: a
    handle the library may still use must keep its callback)."""
    q = _q()
    key = _key(q, handle)
    with _lock:  # held across the free: sync() must not set the level of a handle being freed
        if key not in _live:
            raise fail(ErrorKind.INVALID_HANDLE, "QnnLog_free",
                       f"{handle!r} is not a live handle of create_logger (free_logger)", "QNN")
        q.QnnLog_free(handle)
        del _live[key]


def set_level(level: int | None, handle: Any = None) -> None:
    """Change what the library logs (``QnnLog_setLogLevel``): of ``handle`` to logging ``level``; or, without a
    handle, set :data:`LOGGER`'s level to ``level`` and apply it to every handle that follows it."""
    q = _q()
    if handle is not None:
        if level is None:
            level = LOGGER.getEffectiveLevel()
        key = _key(q, handle, "QnnLog_setLogLevel")
        max_level = qnn_level(level)
        with _lock:
            if key not in _live:
                raise fail(ErrorKind.INVALID_HANDLE, "QnnLog_setLogLevel",
                           f"{handle!r} is not a live handle of create_logger (set_level)", "QNN")
            q.QnnLog_setLogLevel(handle, max_level)
        return
    if level is not None:
        qnn_level(level)  # validate before changing anything
    LOGGER.setLevel(logging.NOTSET if level is None else level)
    sync()


def sync() -> None:
    """Apply :data:`LOGGER`'s effective level to every handle that follows it (after the level of the logger or
    of its parents was changed directly)."""
    q = _q()
    max_level = qnn_level(LOGGER.getEffectiveLevel())
    with _lock:
        for key, entry in _live.items():
            if entry.follows:
                q.QnnLog_setLogLevel(entry.handle, max_level)


def live_handles() -> int:
    """How many handles of :func:`create_logger` are not freed yet."""
    with _lock:
        return len(_live)


def _key(q: Any, handle: Any, function: str = "QnnLog_free") -> int:
    if not isinstance(handle, q.ffi.CData):
        raise fail(ErrorKind.INVALID_HANDLE, function, f"a QNN log handle (from create_logger), not {handle!r}", "QNN")
    return int(q.ffi.cast("uintptr_t", handle))
