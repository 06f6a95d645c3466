"""A backend's vendor start, begun early on a worker thread: what ``BackendRegistry.get`` calls before it imports the
backend's Python modules (registry.py's ``_EARLY_START``).  Today OpenCL's, :func:`start_opencl`.

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

What runs before the worker's call is the critical path, so it is kept to what the call needs:
- This module sits at the runtime's top level, not in ``backends/opencl/``: importing that package and its parent
  first cost ~0.5 ms (two more packages, two directory listings) before the call.
- An extension module that loads beside the worker (``dlopen``) waits for the worker's own ``dlopen`` (the dynamic
  loader's lock), and everything the importing thread does after it waits too.  So the library package's compiled
  module loads first (:func:`_load_extension`), and the backend's Python imports no other one on its way to a
  device and its stream: it reads ``size_t`` arrays through cffi, not ``struct``; ``kernel_args`` imports
  ``struct`` where it packs a scalar; ``traits.launch`` tests finiteness without ``math``.
"""

from __future__ import annotations

import _thread
from typing import Any

_lock = _thread.allocate_lock()
_done: Any = None  # held by the worker while it runs (a _thread lock); None: no early start in this process
_HANDOFF_S = 0.002  # how long start_opencl waits for the worker to begin its call


def start_opencl() -> None:
    """Load the OpenCL library and call ``clGetPlatformIDs`` on a daemon thread, once per process.  Never raises."""
    global _done
    with _lock:
        if _done is not None or not _cpus_beside():
            return
        try:
            call = _platform_ids()
        except Exception:  # (LIBRARY_NOT_FOUND...: the backend's constructor raises it)
            return
        if call is None:
            return
        import atexit
        import os

        done, running = _thread.allocate_lock(), _thread.allocate_lock()
        done.acquire()
        running.acquire()
        args = (*call, done, running)
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


_PACKAGE = "ironaccelerator.backends.opencl.cl"
_kept: Any = None  # the ICD loader as the early start opened it: never closed (a dlclose would unmap it under a call)


def _platform_ids() -> tuple[Any, Any, Any] | None:
    """``(clGetPlatformIDs, NULL, a cl_uint *)`` for the worker, or None where the library is not found.

    Where the library's package is not imported yet (the common case), nothing of it runs before the worker's call:
    the ICD loader is opened through cffi's backend at the first of the spec's candidate paths that opens, as the
    binding's own open will (the vendor package's ``_LIBRARIES``, ``libpaths.library_candidates``), and the package's
    compiled module is loaded alone (:func:`_load_extension`).  The package's Python (its wrappers, the binding:
    ~1.5 ms) then imports beside the worker.  Where the package is imported (``use_library`` may have chosen the
    file), its binding's own function."""
    import sys

    if _PACKAGE in sys.modules:
        from ironaccelerator_runtime.loader import load_library

        cl, _ = load_library(_PACKAGE, "clGetPlatformIDs", "")
        return cl.unchecked.clGetPlatformIDs, cl.ffi.NULL, cl.ffi.new("cl_uint *")
    import os

    import _cffi_backend as backend  # type: ignore[import-untyped]  # (cffi's C backend: no stubs)

    from ironaccelerator.backends.opencl import _LIBRARIES
    from ironaccelerator_runtime.libpaths import library_candidates

    global _kept
    _load_extension(_PACKAGE + "._cffi")
    for path in library_candidates(*_LIBRARIES["cl"]):
        try:
            lib = backend.load_library(path, os.RTLD_NOW | os.RTLD_LOCAL)  # (the binding's flags: ia_dlopen)
        except OSError:
            continue
        uint = backend.new_primitive_type("unsigned int")  # (cl_uint)
        pointer = backend.new_pointer_type(backend.new_void_type())
        ftype = backend.new_function_type((uint, pointer, backend.new_pointer_type(uint)),
                                          backend.new_primitive_type("int"), False)
        try:
            fn = lib.load_function(ftype, "clGetPlatformIDs")
        except AttributeError:  # (no such function: the binding's open goes on to the next file, or fails)
            return None
        _kept = lib
        return fn, backend.cast(pointer, 0), backend.newp(backend.new_pointer_type(uint), None)
    return None


def _load_extension(name: str) -> None:
    """The compiled module ``name`` (a C extension: ``<package>._cffi``) loaded and put in ``sys.modules`` before its
    package is imported, which then finds it there: loaded later, beside the worker, its ``dlopen`` would wait for
    the worker's (the dynamic loader's lock).  Nothing where it is imported, blocked or not built (ABI mode)."""
    import importlib.machinery
    import importlib.util
    import os
    import sys

    if name in sys.modules:
        return
    package, _, leaf = name.rpartition(".")
    spec = importlib.util.find_spec(package)  # (imports the parent packages, not this one)
    for directory in (spec.submodule_search_locations or ()) if spec is not None else ():
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(directory, leaf + suffix)
            if os.path.isfile(path):
                loader = importlib.machinery.ExtensionFileLoader(name, path)
                ext = importlib.util.spec_from_loader(name, loader, origin=path)
                if ext is None:
                    return
                module = importlib.util.module_from_spec(ext)
                sys.modules[name] = module
                try:
                    loader.exec_module(module)
                except BaseException:
                    del sys.modules[name]
                    raise
                return


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
        running.release()  # (start_opencl goes on; this thread keeps the GIL until its call releases it)
        get_platform_ids(0, null, count)  # (its status is not read: the backend's own call returns it again)
    finally:
        done.release()


def wait() -> None:
    """Return once the early start (if one began) has finished."""
    done = _done
    if done is not None and done.locked():
        with done:
            pass
