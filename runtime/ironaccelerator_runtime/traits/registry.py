"""The :class:`BackendRegistry`: the built-in backends and the ``ironaccelerator.backends`` entry points, loaded
on first use."""

from __future__ import annotations

import _thread
import os
import sys
from importlib.machinery import PathFinder
from typing import Any, Callable, TYPE_CHECKING

from ironaccelerator._core import BackendKind, ErrorKind

from ..errors import Error, fail

if TYPE_CHECKING:
    from .backend import Backend


class BackendRegistry:
    """The backends this process knows: built-in ones and those registered under the entry-point group
    ``ironaccelerator.backends`` (name -> ``module:BackendClass``).

    ``BackendRegistry.default()`` is the process's; ``BackendRegistry(factories)`` makes a private one from
    ``{BackendKind: callable returning a Backend}``.  Each backend is constructed on first use and kept (or the
    Error of constructing it).  Thread-safe.

    Backends:
        All kinds of :class:`BackendKind`; one whose library cannot load stays listed with its reason
        (:meth:`report`).
    """

    _default: BackendRegistry | None = None
    _default_lock = _thread.allocate_lock()  # (threading's Lock, without importing threading)

    def __init__(self, factories: dict[BackendKind, Callable[[], Backend]] | None = None) -> None:
        self._factories: dict[BackendKind, Callable[[], Backend]] = dict(factories or {})
        self._backends: dict[BackendKind, Backend | Error] = {}
        self._lock = _thread.allocate_lock()
        self._entry_points_pending = False  # default(): read on first use (_take_entry_points), under the lock

    @classmethod
    def default(cls) -> BackendRegistry:
        """The process-wide registry: the built-in backends plus the ``ironaccelerator.backends`` entry points.

        Returns:
            The same :class:`BackendRegistry` on every call (made on the first; the entry points are read by its
            first :meth:`get`, :meth:`register`, :meth:`available` or :meth:`report`).

        Raises:
            Error: never (broken entry-point metadata, or a backend that fails to load, is reported by
                :meth:`get`).

        Backends:
            All.
        """
        with cls._default_lock:
            if cls._default is None:
                from ironaccelerator._core import BUILTIN_BACKENDS

                reg = cls({k: _importer(k, v) for k, v in BUILTIN_BACKENDS.items()})
                reg._entry_points_pending = True
                cls._default = reg
            return cls._default

    def register(self, kind: BackendKind, factory: Callable[[], Backend]) -> None:
        """Register (or replace) the backend of ``kind``: the next :meth:`get` constructs it with ``factory``.

        Args:
            kind: the :class:`BackendKind` it serves.
            factory: a callable that returns the :class:`Backend` (e.g. the backend class); an :class:`Error` it
                raises is what :meth:`get` raises, any other exception becomes ``UNKNOWN``.

        Raises:
            Error: never (the backend is constructed by :meth:`get`, which raises what ``factory`` raises).

        Backends:
            All kinds.
        """
        with self._lock:
            self._take_entry_points()
            self._factories[kind] = factory
            self._backends.pop(kind, None)

    def _take_entry_points(self) -> None:
        """(Under the lock.)  The entry points of :meth:`default`'s registry, read once, on its first use."""
        if self._entry_points_pending:
            self._entry_points_pending = False
            self._load_entry_points()

    def _load_entry_points(self) -> None:
        if not _may_declare_entry_points(_GROUP):  # (the common case: importlib.metadata, ~25 ms, never imported)
            return
        try:
            from importlib.metadata import entry_points

            eps = entry_points(group=_GROUP)
        except Exception:  # broken metadata must not break import
            return
        for ep in eps:
            try:
                kind = BackendKind[ep.name.upper()]
            except KeyError:
                continue
            self._factories[kind] = _entry_point(ep)

    def _resolve(self, kind: BackendKind, early: bool = False) -> Backend | Error:
        with self._lock:
            if kind not in self._backends:
                builtin = self._factories.get(kind)
                if early and isinstance(builtin, _Builtin):
                    # before the entry points are read (~1 ms of directory reads): one that replaces this kind
                    # is then found after the built-in backend's start began, which only loaded its library
                    builtin.start()
                self._take_entry_points()
                factory = self._factories.get(kind)
                if factory is None:
                    self._backends[kind] = fail(ErrorKind.UNSUPPORTED, "BackendRegistry.get",
                                                f"no {kind.name} backend is registered", kind)
                else:
                    try:
                        self._backends[kind] = factory()
                    except Error as e:
                        self._backends[kind] = e
                    except Exception as e:  # a backend that cannot even construct is unavailable, not fatal
                        self._backends[kind] = fail(ErrorKind.UNKNOWN, "BackendRegistry.get",
                                                    f"{kind.name} backend failed to load: {e!r}", kind)
            return self._backends[kind]

    def get(self, kind: BackendKind | str) -> Backend:
        """The backend of ``kind``, constructed on first use.

        Args:
            kind: a :class:`BackendKind`, or its name in any case (``"opencl"``, ``"CUDA"``, ``"rocm"``).

        Returns:
            The :class:`Backend` (the same object on every call).

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for anything else (``None``, an unknown name), listing the kinds;
                ``ErrorKind.UNSUPPORTED`` when no backend of ``kind`` is registered; the Error of constructing it
                otherwise, e.g. ``ErrorKind.LIBRARY_NOT_FOUND`` naming the libraries tried (CUDA without
                ``libcuda.so.1``), or ``ErrorKind.UNKNOWN`` for a backend that failed with another exception.

        Backends:
            All kinds.
        """
        if type(kind) is not BackendKind:
            kind = _backend_kind(kind)
        b = self._resolve(kind, early=True)
        if isinstance(b, Error):
            raise b
        return b

    def available(self) -> list[Backend]:
        """The backends whose library loads (each constructed, in :class:`BackendKind` order).

        A backend may be available with no device (:meth:`Backend.devices` is then empty).

        Returns:
            The available :class:`Backend` objects.

        Raises:
            Error: never (an unavailable backend is left out; :meth:`report` says why).

        Backends:
            All kinds.
        """
        return [b for k in BackendKind if not isinstance(b := self._resolve(k), Error)]

    def report(self) -> list[str]:
        """What ``python -m ironaccelerator`` prints: each backend, available (its versions and devices) or why not.

        Returns:
            The report's lines of text.

        Raises:
            Error: never for an unavailable backend (its reason is a line of the report).

        Backends:
            All kinds.
        """
        from .report import describe, text  # (not at import: the registry's first use does not report)

        return text(describe(self))


_GROUP = "ironaccelerator.backends"


def _may_declare_entry_points(group: str) -> bool:
    """Whether a distribution may declare an entry point of ``group``: False only where ``importlib.metadata``
    would find none, which is told without importing it (the registry's first use then skips ~25 ms of imports).

    That is: no finder on ``sys.meta_path`` but the standard ``PathFinder`` finds distributions, and every
    ``sys.path`` entry is a directory (or absent) that is not an ``.egg``, none of whose ``*.dist-info`` /
    ``*.egg-info`` directories has an ``entry_points.txt`` naming ``group``.  Anything else (a zip on the
    path, an unreadable directory, a finder of distributions) answers True: ``importlib.metadata`` decides."""
    for finder in sys.meta_path:
        if finder is not PathFinder and getattr(finder, "find_distributions", None) is not None:
            return True
    key = group.encode()
    for entry in sys.path:
        if not isinstance(entry, str) or entry.lower().endswith(".egg"):
            return True
        try:
            children = os.scandir(entry or ".")  # ('' is the working directory, as for importlib.metadata)
        except (FileNotFoundError, NotADirectoryError) as e:
            if isinstance(e, NotADirectoryError) or os.path.exists(entry or "."):  # a zip file
                return True
            continue  # absent (a path hook's name, a missing zip): no distributions
        except OSError:
            return True
        with children:
            for child in children:
                if child.name.lower().endswith((".dist-info", ".egg-info")):
                    try:
                        with open(os.path.join(child.path, "entry_points.txt"), "rb") as f:
                            if key in f.read():
                                return True
                    except (FileNotFoundError, NotADirectoryError):
                        continue  # no entry points (or an .egg-info file: PKG-INFO alone)
                    except OSError:
                        return True
    return False


def _backend_kind(kind: Any) -> BackendKind:
    """``BackendRegistry.get``'s argument as a BackendKind: the kind, or its name (case-insensitive)."""
    if isinstance(kind, BackendKind):
        return kind
    if isinstance(kind, str) and kind.upper() in BackendKind.__members__:
        return BackendKind[kind.upper()]
    raise fail(ErrorKind.INVALID_VALUE, "BackendRegistry.get",
               f"{kind!r:.80} is not a backend kind; pass a BackendKind or "
               f"one of the names {', '.join(k.name for k in BackendKind)}", None)


# Built-in backends whose vendor start is slow C run with the GIL released (kind -> "module:function", a function
# that never raises): get() -- a request for that one backend, not the probes of available() and report() -- calls
# it before importing the backend's Python modules, which then import while it runs on a worker thread, joined by the
# backend's first use of it.  OpenCL: the ICD loader opening the vendors' libraries (early_start.py).
_EARLY_START: dict[BackendKind, str] = {
    BackendKind.OPENCL: "ironaccelerator_runtime.early_start:start_opencl",
}


class _Builtin:
    """A built-in backend's factory: ``module:Class`` imported and constructed; :meth:`start` begins its early start
    (``_EARLY_START``) where it has one."""

    def __init__(self, kind: BackendKind, target: str) -> None:
        self.kind = kind
        self.target = target

    def __call__(self) -> Backend:
        import importlib

        module, _, cls = self.target.partition(":")
        backend: Backend = getattr(importlib.import_module(module), cls)()
        return backend

    def start(self) -> None:
        early = _EARLY_START.get(self.kind)
        if early is not None:
            import importlib

            module, _, fn = early.partition(":")
            getattr(importlib.import_module(module), fn)()


def _importer(kind: BackendKind, target: str) -> Callable[[], Backend]:
    return _Builtin(kind, target)


def _entry_point(ep: Any) -> Callable[[], Backend]:
    def load() -> Backend:
        backend: Backend = ep.load()()
        return backend

    return load
