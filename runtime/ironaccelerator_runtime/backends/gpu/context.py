"""The current context or device of a thread (``_TLS``, :func:`_make_current`) and the primary-context retains every
object of a device holds (:class:`_ContextRef`), released after the garbage collection that drops their last holder."""

from __future__ import annotations

import gc
import itertools
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # (and bound at run time by __init__.py: the module defining it imports this one)
    from ironaccelerator_runtime.backends.gpu.api import GpuApi


# .key: the context / device current on this thread.  One for every GPU backend: the keys of a vendor's devices
# differ from every other vendor's (("context", address, retain) / ("device", index)), so a thread that uses two
# vendors makes each current again when it switches, and never trusts the other vendor's state.
_TLS = threading.local()
_RETAINS = itertools.count()  # numbers the devices' context retains (in the keys of _TLS)


def _make_current(api: GpuApi, key: tuple[Any, ...], target: Any) -> None:
    """Make a device current on the calling thread, once per thread (the key is cached thread-locally): its
    primary context where the vendor has contexts (``context_retain``), else the device (``set_device``)."""
    if getattr(_TLS, "key", None) != key:
        if api.context_retain is not None:
            api.check(api.context_set_current(target), "context_set_current")
        else:
            api.check(api.set_device(target), "set_device")
        _TLS.key = key


# primary contexts (context_retain): released after the garbage collection that drops their last holder
_GC = {"running": False}  # a collection is in progress (gc.callbacks, from the first retain on)
_DEFERRED: list[Callable[[], object]] = []  # context releases due in it: run when it ends


def _gc_phase(phase: str, info: dict[str, int]) -> None:
    _GC["running"] = phase == "start"
    while phase == "stop" and _DEFERRED:
        _DEFERRED.pop()()


def _release_context(api: GpuApi, dev: Any) -> None:
    """Finalizer of a :class:`_ContextRef`.  Inside a garbage collection the release waits for its end: the
    collector clears weak references (this callback) before it calls ``__del__`` (an allocation's free), so
    an allocation collected in the same cycle as the last holder is freed first."""
    if _GC["running"]:
        _DEFERRED.append(lambda: api.context_release(dev))
    else:
        api.context_release(dev)


class _ContextRef:
    """What the objects of a device hold as ``_ctx``.  Where the vendor has primary contexts (``context_retain``):
    one retain of the device's, released (``context_release``) exactly once, when nothing holds this object any
    more: the :class:`GpuDevice` until it is closed, and every stream, event, module, pool and allocation made
    from it (each keeps it as ``_ctx``; the finalizers that destroy streams, events, modules and pools take it as
    an argument, so they run first).  Not released at interpreter exit (objects still alive then may be freed
    after the exit hooks; the process's end tears the context down).  Elsewhere (HIP: the device is selected
    per thread) there is no context to retain, and nothing is released."""

    __slots__ = ("context", "__weakref__")

    def __init__(self, api: GpuApi, dev: Any) -> None:
        self.context: Any = None
        if api.context_retain is None:
            return
        if _gc_phase not in gc.callbacks:
            gc.callbacks.append(_gc_phase)
        out = api.ffi.new(api.tables.types["context"] + " *")
        api.check(api.context_retain(out, dev), "context_retain")
        self.context = out[0]
        weakref.finalize(self, _release_context, api, dev).atexit = False


def _destroy(fn: Callable[[Any], int], handle: Any, ctx: _ContextRef | None) -> int:
    """Finalizer of a stream, event or module: ``ctx`` (its device's context) is held until this has run."""
    return int(fn(handle))
