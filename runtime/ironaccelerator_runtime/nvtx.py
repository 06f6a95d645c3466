"""NVTX ranges and marks: named spans that profilers (Nsight Systems, Nsight Compute) draw on their timelines.

NVTX is the CUDA backend's: calls go through its generated binding of NVIDIA's NVTX v3
(``ironaccelerator.backends.cuda.nvtx``, from ``specs/cuda/nvtx.yaml``: ``libnvtx3interop.so.1``, which CUDA 13's
toolkit ships).  This module stays at ``ironaccelerator_runtime.nvtx`` because it is the public ``ironaccelerator.nvtx``
and works whatever backend runs.  Where that library is not installed, or no profiler is attached, every call here returns
at once and does nothing, as NVTX itself does; :func:`available` says whether the library was found::

    import ironaccelerator as ia
    with ia.nvtx.range("prepare", color=0xFF00AA00):   # ARGB
        ...
    @ia.nvtx.range("step")                             # or as a decorator
    def step(): ...
    ia.nvtx.mark("checkpoint")

Ranges nest per thread (push/pop).  With ``domain=`` a range goes to a named NVTX domain (one handle per name,
created on first use and kept for the process), which profilers show as its own row.  ``IRONACCEL_TRACE=nvtx``
(see :mod:`ironaccelerator_runtime.tracing`) puts every raw driver call the substrate makes in a range of the
``ironaccelerator`` domain, through the public hook :func:`prepared_range` (the tracer uses nothing else here).
"""

from __future__ import annotations

import functools
import threading
from types import TracebackType
from typing import Any, Callable, TypeVar

from ironaccelerator._core import ErrorKind

from .errors import fail

__all__ = ["available", "range", "mark", "push", "pop", "prepared_range", "PreparedRange", "DOMAIN"]

#: The NVTX domain of ``IRONACCEL_TRACE=nvtx``'s ranges (one per raw driver call), a row of its own in the profiler.
DOMAIN = "ironaccelerator"
F = TypeVar("F", bound=Callable[..., Any])

_lock = threading.Lock()
_raw: Any = None  # the binding's raw functions (generated ``unchecked`` module), once loaded and found usable
_ffi: Any = None
_loaded = False
_domains: dict[str, Any] = {}
_messages: dict[str, bytes] = {}  # str -> its bytes kept alive (NVTX may read them after the call: registered)

# nvToolsExt.h's constants (values of its enums, read from the binding when it is there)
_VERSION = 3
_COLOR_ARGB = 1
_MESSAGE_ASCII = 1


def _load() -> Any:
    """The raw NVTX functions, or None when the library (or the generated binding) is not there."""
    global _raw, _ffi, _loaded, _COLOR_ARGB, _MESSAGE_ASCII
    if _loaded:
        return _raw
    with _lock:
        if _loaded:
            return _raw
        try:
            from ironaccelerator.backends.cuda import nvtx as checked
            from ironaccelerator.backends.cuda.nvtx import _binding, unchecked
        except ImportError:  # not generated (no NVTX headers where `make generate` ran)
            _loaded = True
            return None
        if _binding.BINDING.has("nvtxRangePush"):
            _raw = unchecked
            _ffi = _binding.BINDING.ffi
            _COLOR_ARGB = int(checked.nvtxColorType_t.NVTX_COLOR_ARGB)
            _MESSAGE_ASCII = int(checked.nvtxMessageType_t.NVTX_MESSAGE_TYPE_ASCII)
        _loaded = True
    return _raw


def available() -> bool:
    """Whether the NVTX library was found (calls do something only when a profiler is attached as well).

    Returns:
        True when ``libnvtx3interop.so.1`` and its generated binding loaded; False otherwise (every call of this
        module then does nothing).

    Raises:
        Error: never.

    Backends:
        Independent of the backend in use: NVTX is NVIDIA's profiler annotation library, found where CUDA 13's
        toolkit (or the library alone) is installed.
    """
    return _load() is not None


def _text(message: Any, what: str, cache: bool = True) -> bytes:
    if isinstance(message, str):
        b = _messages.get(message)
        if b is None:
            b = message.encode("utf-8", "replace")
            if b"\0" in b:
                raise fail(ErrorKind.INVALID_VALUE, what, "the message contains a NUL character", None)
            if cache and len(_messages) < 4096:
                _messages[message] = b
        return b
    raise fail(ErrorKind.INVALID_VALUE, what, f"the message must be a str, got {type(message).__name__}", None)


def _color(color: Any, what: str) -> int | None:
    if color is None:
        return None
    if isinstance(color, bool) or not isinstance(color, int) or not 0 <= color <= 0xFFFFFFFF:
        raise fail(ErrorKind.INVALID_VALUE, what, f"color must be an ARGB int in [0, 0xFFFFFFFF], got {color!r}",
                   None)
    return color


def _domain(raw: Any, name: Any, what: str) -> Any:
    if name is None:
        return _ffi.NULL  # NVTX's default domain
    d = _domains.get(name)
    if d is None:
        text = _text(name, what)
        with _lock:
            d = _domains.get(name)
            if d is None:
                d = _domains[name] = raw.nvtxDomainCreate(text)
    return d


def _attributes(message: bytes, color: int | None) -> tuple[Any, Any]:
    """The event attributes (and the NUL-terminated copy of ``message`` they point to: keep both alive)."""
    a = _ffi.new("nvtxEventAttributes_t *")
    a.version = _VERSION
    a.size = _ffi.sizeof("nvtxEventAttributes_t")
    if color is not None:
        a.colorType = _COLOR_ARGB
        a.color = color
    a.messageType = _MESSAGE_ASCII
    text = _ffi.new("char[]", message)
    a.message.ascii = text
    return a, text


def _event(what: str, simple: str, extended: str, message: str, color: Any, domain: Any) -> None:
    """A push or a mark: the char (A) call when neither ``color`` nor ``domain`` is given, else the domain's Ex
    call with event attributes (a NULL domain handle is NVTX's default domain)."""
    text = _text(message, what)
    c = _color(color, what)
    raw = _load()
    if raw is None:
        return
    if c is None and domain is None:
        getattr(raw, simple)(text)
    else:
        a, keep = _attributes(text, c)
        getattr(raw, extended)(_domain(raw, domain, what), a)
        del keep


def push(message: str, *, color: int | None = None, domain: str | None = None) -> None:
    """Open a range on this thread (close it with :func:`pop`, same ``domain``); ranges nest.

    Args:
        message: the range's name, a str without NUL characters.
        color: keyword-only; an ARGB color as an int in [0, 0xFFFFFFFF] (``0xFF00AA00``), or None.
        domain: keyword-only; a named NVTX domain (its own row in the profiler), or None: NVTX's default domain.

    Raises:
        Error: ``ErrorKind.INVALID_VALUE`` when ``message`` (or ``domain``) is not a str or holds a NUL, or
            ``color`` is not an int in range; checked even where the library is absent.

    Backends:
        Independent of the backend; does nothing without the NVTX library (:func:`available`).
    """
    _event("nvtx.push", "nvtxRangePush", "nvtxDomainRangePushEx", message, color, domain)


def pop(*, domain: str | None = None) -> None:
    """Close the innermost range this thread opened with :func:`push` in ``domain``.

    Args:
        domain: keyword-only; the domain the range was pushed in (None: NVTX's default domain).

    Raises:
        Error: ``ErrorKind.INVALID_VALUE`` when ``domain`` is not a str or holds a NUL (where the library is
            present).

    Backends:
        Independent of the backend; does nothing without the NVTX library (:func:`available`).
    """
    raw = _load()
    if raw is None:
        return
    if domain is None:
        raw.nvtxRangePop()
    else:
        raw.nvtxDomainRangePop(_domain(raw, domain, "nvtx.pop"))


def mark(message: str, *, color: int | None = None, domain: str | None = None) -> None:
    """Put an instantaneous event (a mark) on this thread's timeline.

    Args:
        message: the mark's text, a str without NUL characters.
        color: keyword-only; an ARGB color as an int in [0, 0xFFFFFFFF], or None.
        domain: keyword-only; a named NVTX domain, or None: NVTX's default domain.

    Raises:
        Error: ``ErrorKind.INVALID_VALUE`` when ``message`` (or ``domain``) is not a str or holds a NUL, or
            ``color`` is not an int in range; checked even where the library is absent.

    Backends:
        Independent of the backend; does nothing without the NVTX library (:func:`available`).
    """
    _event("nvtx.mark", "nvtxMark", "nvtxDomainMarkEx", message, color, domain)


class PreparedRange:
    """A range whose event attributes and domain handle were built once (by :func:`prepared_range`), to open and
    close many times at the cost of one NVTX call each.  ``push`` and ``pop`` are callables taking no argument:
    ``push()`` opens the range on the calling thread (``nvtxDomainRangePushEx`` with the prepared attributes),
    ``pop()`` closes the innermost range of its domain (``nvtxDomainRangePop``).  ``IRONACCEL_TRACE=nvtx`` puts
    every raw driver call in one of these.

    Backends:
        Independent of the backend (NVTX is the CUDA backend's library, but ranges work whatever runs).
    """

    __slots__ = ("push", "pop", "_keep")

    def __init__(self, push: Callable[[], object], pop: Callable[[], object], keep: Any) -> None:
        self.push = push
        self.pop = pop
        self._keep = keep  # the message the attributes point to (NVTX reads it when the range is pushed)


def prepared_range(message: str, *, domain: str | None = DOMAIN) -> PreparedRange | None:
    """Prepare a range for a hot path: its attributes (message, no color) and its domain's handle built now, once.

    Args:
        message: the range's name, a str without NUL characters.
        domain: keyword-only; a named NVTX domain (default :data:`DOMAIN`, ``"ironaccelerator"``), or None: NVTX's
            default domain.

    Returns:
        A :class:`PreparedRange` (``push()`` / ``pop()``), or None where the NVTX library is not there (there is
        nothing to call: :func:`available` is False).

    Raises:
        Error: ``ErrorKind.INVALID_VALUE`` when ``message`` (or ``domain``) is not a str or holds a NUL.

    Backends:
        Independent of the backend; None without the NVTX library (:func:`available`).
    """
    text = _text(message, "nvtx.prepared_range", cache=False)  # (its attributes keep their own copy)
    raw = _load()
    if raw is None:
        return None
    attributes, keep = _attributes(text, None)
    handle = _domain(raw, domain, "nvtx.prepared_range")
    return PreparedRange(functools.partial(raw.nvtxDomainRangePushEx, handle, attributes),
                         functools.partial(raw.nvtxDomainRangePop, handle), keep)


class range:  # noqa: N801  (named like the builtin it shadows inside this module only, as NVTX's own Python API)
    """A range as a context manager (``with nvtx.range("name"): ...``) or a decorator (``@nvtx.range("name")``,
    or ``@nvtx.range()`` for the function's qualified name): :func:`push` on entry, :func:`pop` on exit.

    Args:
        message: the range's name, a str without NUL characters; None (default): ``"range"`` as a context
            manager, the function's qualified name as a decorator.
        color: keyword-only; an ARGB color as an int in [0, 0xFFFFFFFF], or None.
        domain: keyword-only; a named NVTX domain, or None: NVTX's default domain.

    Raises:
        Error: ``ErrorKind.INVALID_VALUE`` when ``message`` or ``domain`` is not a str or holds a NUL, or
            ``color`` is not an int in range: checked when the range is made (even where the library is absent).

    Backends:
        Independent of the backend; does nothing without the NVTX library (:func:`available`).
    """

    __slots__ = ("message", "color", "domain")

    def __init__(self, message: str | None = None, *, color: int | None = None, domain: str | None = None) -> None:
        if message is not None:
            _text(message, "nvtx.range")
        _color(color, "nvtx.range")
        if domain is not None:
            _text(domain, "nvtx.range")
        self.message, self.color, self.domain = message, color, domain

    def __enter__(self) -> range:
        push(self.message or "range", color=self.color, domain=self.domain)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        pop(domain=self.domain)

    def __call__(self, fn: F) -> F:
        message = self.message or getattr(fn, "__qualname__", None) or repr(fn)
        color, domain = self.color, self.domain

        @functools.wraps(fn)
        def ranged(*args: Any, **kwargs: Any) -> Any:
            push(message, color=color, domain=domain)
            try:
                return fn(*args, **kwargs)
            finally:
                pop(domain=domain)

        return ranged  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"nvtx.range({self.message!r}, color={self.color!r}, domain={self.domain!r})"
