"""The OpenCL platform's start, begun early on a worker thread: what ``BackendRegistry.get(OPENCL)`` does before it
imports the backend's Python modules (registry.py's ``_EARLY_START``).

The first ``clGetPlatformIDs`` of a process is where the ICD loader opens each vendor's library: PoCL's pulls in
LLVM and Clang (``dlopen`` and relocation, ~20 ms of C, the GIL released).  It loads libraries and starts no thread
of the vendor (PoCL's device threads start with ``clGetDeviceIDs``, on the caller's own thread, as without this).
Started here, it runs while the backend's Python modules import; :func:`wait` (the backend's first platform query)
joins it, so what the backend calls and reports is unchanged, and so are its errors (the worker's own status is
not read: the backend's ``clGetPlatformIDs`` returns it again).  Nothing is started when the library does not load
(the backend's constructor then reports why, as without this), nor in a process bound to one CPU.  A fork waits
for it first (``os.register_at_fork``: never a child of a process in the middle of ``dlopen``), and so does the
interpreter's exit (``atexit``).  It pays only where a CPU is free: where every CPU is busy, the worker's ~20 ms
come out of the caller's share (the kernel shares CPU time between sessions, not threads).
"""

from __future__ import annotations

import _thread
from typing import Any

_lock = _thread.allocate_lock()
_done: Any = None  # held by the worker while it runs (a _thread lock); None: no early start in this process
_HANDOFF_S = 0.002  # how long start_platform waits for the worker to begin its call


def start_platform() -> None:
    """Load the OpenCL library and call ``clGetPlatformIDs`` on a daemon thread, once per process.  Never raises."""
    global _done
    with _lock:
        if _done is not None or not _cpus_beside():
            return
        try:
            from ironaccelerator_runtime.loader import load_library

            cl, _ = load_library("ironaccelerator.backends.opencl.cl", "clGetPlatformIDs", "")
        except Exception:  # (LIBRARY_NOT_FOUND...: the backend's constructor raises it)
            return
        # the extension modules the backend imports beside the worker: loading one (dlopen) would wait for the
        # worker's dlopen to finish, so they load first (traits.launch: math; backends.opencl.device: struct)
        import atexit
        import math  # noqa: F401
        import os
        import struct  # noqa: F401

        done, running = _thread.allocate_lock(), _thread.allocate_lock()
        done.acquire()
        running.acquire()
        args = (cl.unchecked.clGetPlatformIDs, cl.ffi.NULL, cl.ffi.new("cl_uint *"), done, running)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(before=wait)
        atexit.register(wait)
        # (_thread, not threading.Thread: Thread.start waits without bound for the new thread to run)
        _thread.start_new_thread(_run, args)
        _done = done
        # Hand the worker the GIL until its call has begun (it releases the GIL there): left to take it on its
        # own, a new thread waits for the switch interval (5 ms) while this one imports.  Bounded: on a busy
        # machine, where the new thread may wait a time slice to run at all, this goes on without it.
        running.acquire(True, _HANDOFF_S)


def _cpus_beside() -> bool:
    """Whether this process may run on more than one CPU: on one, a worker thread only takes turns with the
    caller (nothing is started)."""
    import os

    try:
        return len(os.sched_getaffinity(0)) > 1
    except (AttributeError, OSError):  # (no sched_getaffinity: macOS, Windows)
        return (os.cpu_count() or 1) > 1


def _run(get_platform_ids: Any, null: Any, count: Any, done: Any, running: Any) -> None:
    try:
        running.release()  # (start_platform goes on; this thread keeps the GIL until its call releases it)
        get_platform_ids(0, null, count)  # (its status is not read: the backend's own call returns it again)
    finally:
        done.release()


def wait() -> None:
    """Return once the early start (if one began) has finished."""
    done = _done
    if done is not None and done.locked():
        with done:
            pass
