"""Tracing QNN calls with Qualcomm's Saver backend (``libQnnSaver.so``, shipped beside ``libQnnHtp.so``).

The Saver is a QNN backend library with the same provider function table as the others.  It **executes nothing**:
each call returns success (or, for a query it cannot answer, ``QNN_SAVER_ERROR_DUMMY_RETVALUE``, 4950) and dummy
values -- a graph "executed" on it leaves its outputs as they were.  What it does is record every call it receives
(with its arguments, tensors, configs and data) as a C program that replays them against a real backend:
``saver_output.c`` and ``params.bin`` in the output directory.  Pure getters (``QnnBackend_getApiVersion``,
``QnnBackend_getBuildId``, ``QnnLog_setLogLevel``, ...) are not recorded.

:func:`trace_to` makes this process's QNN interface (``ironaccelerator.backends.qnn.interface``) use the Saver,
recording into a directory.  One library file binds the interface per process, so it must run before the first
call of the interface module; it raises :class:`~ironaccelerator.Error` when that is too late or when no Saver is
found.

``IA_QNN_TRACE_DIR``: when this environment variable names a directory, the interface's first call does
``trace_to(IA_QNN_TRACE_DIR)`` first (the hook is installed when this module is imported; importing
:mod:`ironaccelerator_runtime.backends.qnn_log` or the QNN backend imports it).  If the interface library is already
open when this module is imported, the variable cannot be honoured and a warning says so.

The Saver's output carries Qualcomm's notice: keep it out of repositories (the tests write it to a temporary
directory that they delete).
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from typing import Any

from ironaccelerator._core import ErrorKind
from ironaccelerator_runtime.errors import fail
from ironaccelerator_runtime.loader import Binding

ENV = "IA_QNN_TRACE_DIR"

_lock = threading.Lock()
_traced: str | None = None  # the directory this process traces into
_keep: list[Any] = []  # the config given to QnnSaver_initialize (its strings stay valid for the process)


def _interface() -> Any:
    import ironaccelerator.backends.qnn.interface as q
    return q


def _saver() -> Any:
    import ironaccelerator.backends.qnn.saver as s
    return s


def _bindings() -> tuple[Binding, Binding]:
    """The loader state of the interface and of the Saver's own module."""
    from ironaccelerator.backends.qnn.interface._binding import BINDING as interface
    from ironaccelerator.backends.qnn.saver._binding import BINDING as saver
    return interface, saver


def _platform() -> str:
    return "windows" if sys.platform == "win32" else "darwin" if sys.platform == "darwin" else "linux"


def saver_candidates() -> list[str]:
    """Where the Saver is looked for, in order: beside each backend library file the interface's search finds
    (``libQnnHtp.so`` of the wheel or SDK; the file chosen with ``use_library`` if one was), then the Saver
    binding's own search (the same wheel and SDK directories, then the bare name for the system loader)."""
    ib, sb = _bindings()
    names = sb.loader[0].get(_platform(), ())
    out: list[str] = []
    for lib in ib.candidates():
        if os.path.isabs(lib) and os.path.isfile(lib):
            out += [os.path.join(os.path.dirname(lib), n) for n in names
                    if os.path.isfile(os.path.join(os.path.dirname(lib), n))]
    out += sb.candidates()
    return list(dict.fromkeys(out))


def tracing() -> str | None:
    """The directory this process's QNN calls are recorded into, or None."""
    return _traced


def trace_to(directory: str | os.PathLike[str]) -> None:
    """Record this process's QNN calls, from now on, with the Saver into ``directory`` (made if missing):
    selects ``libQnnSaver.so`` as the interface library and calls ``QnnSaver_initialize`` with
    ``QNN_SAVER_CONFIG_OPTION_OUTPUT_DIRECTORY``.  Nothing is executed from then on (see the module docstring).

    Raises :class:`~ironaccelerator.Error`: INVALID_VALUE when the interface library is already loaded (too late:
    call this before the first QNN call), when this process already traces into another directory, or for a
    directory that cannot be made; LIBRARY_NOT_FOUND when no Saver library is found.  Again with the same
    directory: nothing."""
    global _traced
    try:
        path = os.fspath(directory)
    except TypeError:
        path = None
    if not isinstance(path, str) or not path:
        raise fail(ErrorKind.INVALID_VALUE, "trace_to", "a directory path (str or os.PathLike[str]), not "
                   f"{directory!r}", "QNN")
    path = os.path.abspath(path)
    q, s = _interface(), _saver()
    ib, sb = _bindings()
    with _lock:
        if _traced is not None:
            if _traced == path:
                return
            raise fail(ErrorKind.INVALID_VALUE, "trace_to", f"trace_to({path!r}): this process already records its QNN "
                       f"calls into {_traced!r} (one Saver per process)", "QNN")
        if ib.path is not None:
            raise fail(ErrorKind.INVALID_VALUE, "trace_to",
                       f"trace_to({path!r}) is too late: the QNN interface library is "
                       f"already loaded from {ib.path} (one library file per process); call trace_to, or set "
                       f"{ENV}, before the first QNN call", "QNN")
        if sb.path is None:
            s.use_library(*saver_candidates())
        if not s.has("QnnSaver_initialize"):  # opens it: no Saver (or not a Saver) -> the loader's error
            err = sb.load_error(sb.index["QnnSaver_initialize"])
            raise fail(ErrorKind.LIBRARY_NOT_FOUND, "QnnSaver_initialize",
                       f"no QNN Saver library (libQnnSaver.so) found for trace_to: {err}", "QNN")
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise fail(ErrorKind.INVALID_VALUE, "trace_to", f"cannot make the directory {path!r}: {exc}",
                       "QNN") from exc
        cfg = s.ffi.new("QnnSaver_Config_t *")
        cfg.option = s.QnnSaver_ConfigOption_t.QNN_SAVER_CONFIG_OPTION_OUTPUT_DIRECTORY
        text = s.ffi.new("char[]", os.fsencode(path))
        cfg.outputDirectory = text
        configs = s.ffi.new("const QnnSaver_Config_t *[2]", [cfg, s.ffi.NULL])
        s.QnnSaver_initialize(configs)
        _keep.extend((cfg, text, configs))
        q.use_library(sb.path)  # the very file the Saver was initialized in
        _traced = path


def _from_env(binding: Binding) -> None:
    """The interface's before-open hook: ``trace_to($IA_QNN_TRACE_DIR)`` when it is set."""
    directory = os.environ.get(ENV)
    if directory:
        trace_to(directory)


if not _bindings()[0].before_open(_from_env) and os.environ.get(ENV) and _traced is None:
    warnings.warn(f"{ENV} is set but the QNN interface library is already loaded from {_bindings()[0].path}: "
                  "these QNN calls are not recorded (import ironaccelerator_runtime.backends.qnn_saver before the "
                  "first QNN call)", RuntimeWarning, stacklevel=2)
