"""Run by test_qnn_log_saver.py in a subprocess (one QNN interface library per process):

    qnn_saver_child.py trace DIR     trace_to(DIR), then the ElementWiseAdd sequence (below)
    qnn_saver_child.py env           the same, traced through IA_QNN_TRACE_DIR (set by the parent) at first use
    qnn_saver_child.py late DIR      a call on libQnnHtp.so first, then trace_to(DIR): must be refused
    qnn_saver_child.py missing DIR   trace_to(DIR) with no Saver to be found: refused, HTP still usable after
    qnn_saver_child.py env-bad       IA_QNN_TRACE_DIR names a file: the first call raises trace_to's error, twice,
                                     and no library is opened
    qnn_saver_child.py hook          a before-open hook that raises: every call raises, nothing opened
    qnn_saver_child.py builder DIR   the same add graph built with Device.graph_builder, traced into DIR

With QNN_CHILD_ABI=1 the compiled cffi modules are hidden: the ABI-mode loader runs.

The sequence: a log handle (qnn_log.create_logger, then its level set again: qnn_log.sync), backend, device,
context with it, an f32 add graph (tensors, validateOpConfig, addNode, finalize), one execute,
QnnContext_getBinarySize (the Saver answers 4950, a dummy value), a getter the Saver does not record, the frees.
Every call of the interface module is recorded by name (its functions wrapped here).  Prints one JSON line:
``issued`` (the names in order), ``path`` (the interface library file), ``mode`` (api or abi), ``c_max`` (max |c|
after execute: the Saver executes nothing), ``size_code``.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any, Callable

import numpy as np

if os.environ.get("QNN_CHILD_ABI"):  # no compiled modules: the ABI-mode loader (before_open runs from _LazyLib)
    for _lib in ("interface", "saver"):
        sys.modules[f"ironaccelerator.backends.qnn.{_lib}._cffi"] = None  # type: ignore[assignment]

import ironaccelerator.backends.qnn.interface as q  # noqa: E402
from ironaccelerator.backends.qnn.interface._binding import BINDING  # noqa: E402
from ironaccelerator import Error  # noqa: E402
from ironaccelerator_runtime.backends import qnn_log, qnn_saver  # noqa: E402

import qnn_graphs as G  # noqa: E402

WHAT = sys.argv[1]
issued: list[str] = []


def recorded(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        issued.append(name)
        return fn(*args)
    return call


def wrap_interface(unchecked: bool = False) -> None:
    for name, *_ in BINDING.functions:
        if name != "QnnInterface_getProviders":
            setattr(q, name, recorded(name, getattr(q, name)))
            if unchecked:  # the trait-surface backend calls both (frees and execution are unchecked)
                setattr(q.unchecked, name, recorded(name, getattr(q.unchecked, name)))


def through_backend(directory: str, binary: str) -> dict[str, Any]:
    """The trait-surface lifecycle, traced: QnnBackend(trace_dir=...), open, load_module, kernel, launch, then
    everything dropped (frees in reverse order)."""
    import gc

    from ironaccelerator import KernelLaunch, LaunchDims
    from ironaccelerator.backends.qnn._backend import QnnBackend

    wrap_interface(unchecked=True)
    backend = QnnBackend(trace_dir=directory)
    names = [d.name for d in backend.devices()]
    device = backend.open(0)
    module = device.load_module(open(binary, "rb").read())
    kernel = module.kernel("add_f32")
    stream = device.create_stream()
    bufs = [device.alloc(4 * G.N) for _ in range(3)]
    stream.launch(KernelLaunch(kernel, LaunchDims(), tuple(bufs)))
    stream.synchronize()
    del kernel, module, stream, device, bufs, backend
    gc.collect()
    return {"issued": issued, "path": BINDING.path, "mode": q.BINDING_MODE, "names": names}


def through_builder(directory: str) -> dict[str, Any]:
    """The add graph of :func:`sequence` (G.add_graph's names, dims and node), built with
    ``Device.graph_builder`` under QnnBackend(trace_dir=...), finalized, launched once, dropped."""
    import gc

    from ironaccelerator import DType, KernelLaunch, LaunchDims
    from ironaccelerator.backends.qnn._backend import QnnBackend

    wrap_interface(unchecked=True)
    backend = QnnBackend(trace_dir=directory)
    device = backend.open(0)
    builder = device.graph_builder()
    g = builder.graph("add_f32")
    a, b = (g.input(f"add_f32_{n}", DType.F32, (1, G.N)) for n in "ab")
    c = g.output("add_f32_c", DType.F32, (1, G.N))
    g.node("ElementWiseAdd", [a, b], c, name="add_f32_add")
    kernel = device.load_module(builder).kernel("add_f32")
    stream = device.create_stream()
    bufs = [device.alloc(4 * G.N) for _ in range(3)]
    stream.launch(KernelLaunch(kernel, LaunchDims(), tuple(bufs)))
    del kernel, builder, g, a, b, c, stream, device, bufs, backend
    gc.collect()
    return {"issued": issued, "path": BINDING.path}


def sequence() -> dict[str, Any]:
    log = qnn_log.create_logger()
    qnn_log.sync()  # QnnLog_setLogLevel on the handle (it follows the logger's level)
    backend = q.QnnBackend_create(log, G.NULL)
    device = q.QnnDevice_create(log, G.NULL)
    context = q.QnnContext_create(backend, device, G.NULL)
    s = G.Session(backend, device, context)
    g = G.add_graph(s, "add_f32", "f32")
    a, b = G.inputs("f32", 7)
    c = np.zeros_like(a)
    ins, outs = G.bind(g, [a, b, c])
    q.QnnGraph_execute(g.handle, ins, 2, outs, 1, G.NULL, G.NULL)
    try:
        q.QnnContext_getBinarySize(context)  # recorded, though the Saver answers it with a dummy-value status
        size_code = 0
    except Error as exc:
        size_code = int(exc.code or 0) & 0xFFFF
    q.QnnBackend_getApiVersion()
    s.close()
    qnn_log.free_logger(log)
    return {"issued": issued, "path": BINDING.path, "mode": q.BINDING_MODE, "c_max": float(np.abs(c).max()),
            "size_code": size_code}


def refused(fn: Callable[[], None]) -> dict[str, Any]:
    try:
        fn()
    except Error as exc:
        return {"kind": exc.kind.name, "message": str(exc)}
    return {"kind": None, "message": ""}


if WHAT == "trace":
    qnn_saver.trace_to(sys.argv[2])
    qnn_saver.trace_to(sys.argv[2])  # again, same directory: nothing
    wrap_interface()
    out = sequence()
elif WHAT == "backend":
    out = through_backend(sys.argv[2], sys.argv[3])
elif WHAT == "builder":
    out = through_builder(sys.argv[2])
elif WHAT == "env":
    wrap_interface()
    out = sequence()
    out["tracing"] = qnn_saver.tracing()
elif WHAT == "late":
    q.QnnBackend_getApiVersion()
    out = refused(lambda: qnn_saver.trace_to(sys.argv[2]))
    out["path"] = BINDING.path
elif WHAT == "missing":
    qnn_saver.saver_candidates = lambda: [os.path.join(sys.argv[2], "libQnnSaver.so")]  # a directory without one
    out = refused(lambda: qnn_saver.trace_to(sys.argv[2]))
    out["tracing"] = qnn_saver.tracing()
    out["api"] = int(q.QnnBackend_getApiVersion().coreApiVersion.major)  # the interface is still free: HTP
    out["path"] = BINDING.path
elif WHAT == "env-bad":
    first = refused(q.QnnBackend_getApiVersion)
    out = {"first": first, "second": refused(q.QnnBackend_getApiVersion), "path": BINDING.path,
           "tracing": qnn_saver.tracing()}
elif WHAT == "hook":
    def boom(binding: Any) -> None:
        raise RuntimeError("boom")
    registered = BINDING.before_open(boom)
    out = {"registered": registered, "first": refused(q.QnnBackend_getApiVersion),
           "second": refused(q.QnnBackend_getApiVersion), "path": BINDING.path, "mode": q.BINDING_MODE}
else:
    raise SystemExit(f"unknown mode {WHAT}")
print(json.dumps(out))
