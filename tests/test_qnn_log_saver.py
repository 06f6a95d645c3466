"""QNN log messages into Python logging (runtime/ironaccelerator_runtime/backends/qnn_log.py) and the Saver as a
tracing option (qnn_saver.py), on Qualcomm's real libraries from the onnxruntime-qnn wheel.

The log tests run here, on libQnnHtp.so (its messages checked with pytest's ``caplog``).  The Saver tests run in
subprocesses (tests/qnn_saver_child.py: one interface library per process) and use the Saver as an oracle: the
calls it recorded, read back from the C program it writes, must be the calls the binding issued, in order.  Its
output goes to a temporary directory deleted by the test; only call names are compared or printed.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from conftest import ROOT, site_file

pytestmark = pytest.mark.skipif(site_file("onnxruntime_qnn/libQnnHtp.so") is None,
                                reason="Qualcomm's QNN libraries (pip onnxruntime-qnn) are not installed")

CHILD = ROOT / "tests" / "qnn_saver_child.py"
LOGGER = "ironaccelerator.qnn"
MISMATCH = "Number of tensors mismatch. Provided 1 tensors, expected 2 tensors."

# What the Saver does not record among the calls the child issues, as data: the log calls (its replay program
# makes its own log handle: it opens with logCreate and ends with logFree inside `if (logging)`, whether or not
# the traced process made one -- SAVER_FRAME) and pure getters.
NOT_RECORDED = frozenset({"QnnLog_create", "QnnLog_setLogLevel", "QnnLog_free", "QnnBackend_getApiVersion"})
SAVER_FRAME = ("logCreate", "logFree")
_CALL = re.compile(r"\binterface\.([A-Za-z0-9_]+)\(")


# ------------------------------------------------------------------------ log (in this process, on HTP)


@pytest.fixture(scope="module")
def q() -> Any:
    import ironaccelerator.backends.qnn.interface as q
    return q


@pytest.fixture(scope="module")
def qnn_log() -> Any:
    from ironaccelerator_runtime.backends import qnn_log
    return qnn_log


@pytest.fixture(scope="module")
def G() -> Any:
    import qnn_graphs
    return qnn_graphs


def session(q: Any, G: Any, log: Any) -> Any:
    """G.open_session with ``log`` given to QnnBackend_create and QnnDevice_create."""
    backend = q.QnnBackend_create(log, G.NULL)
    device = q.QnnDevice_create(log, G.NULL)
    return G.Session(backend, device, q.QnnContext_create(backend, device, G.NULL))


def execute_one_input(q: Any, G: Any, g: Any) -> Any:
    """QnnGraph_execute with one input of the two: the Error (6004) HTP answers."""
    a, b = G.inputs("f32", 1)
    c = np.zeros_like(a)
    ins, outs = G.bind(g, [a, b, c])
    with pytest.raises(q.Error) as err:
        q.QnnGraph_execute(g.handle, ins, 1, outs, 1, G.NULL, G.NULL)
    return err.value


def qnn_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER]


def test_levels(qnn_log: Any) -> None:
    assert qnn_log.LEVELS == {1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.DEBUG,
                              5: qnn_log.QNN_DEBUG}
    assert qnn_log.QNN_DEBUG < logging.DEBUG
    got = [qnn_log.qnn_level(x) for x in (logging.CRITICAL, logging.ERROR, logging.WARNING, logging.INFO,
                                          logging.DEBUG, qnn_log.QNN_DEBUG, logging.NOTSET)]
    assert got == [1, 1, 2, 3, 4, 5, 5]
    from ironaccelerator import Error, ErrorKind
    for bad in ("INFO", None, 2.0, True):
        with pytest.raises(Error) as err:
            qnn_log.qnn_level(bad)
        assert err.value.kind == ErrorKind.INVALID_VALUE


def test_messages_arrive_formatted(q: Any, qnn_log: Any, G: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(qnn_log.QNN_DEBUG, logger=LOGGER)
    gc.collect()  # (a handle an earlier test's garbage holds is freed now, not while this one counts)
    live = qnn_log.live_handles()
    log = qnn_log.create_logger()  # follows the logger: everything
    assert qnn_log.live_handles() == live + 1
    s = session(q, G, log)
    try:
        G.add_graph(s, "log_add", "f32")
        building = qnn_records(caplog)
        assert any(r.levelno == logging.INFO for r in building), "graph building logs at INFO"
        assert any(r.levelno <= logging.DEBUG for r in building), "graph building logs at VERBOSE/DEBUG"
        for r in building:
            assert r.levelno == qnn_log.LEVELS[getattr(r, "qnn_level")]
            assert isinstance(getattr(r, "qnn_timestamp"), int)
        # a message longer than the first buffer is formatted again at its length, not truncated
        assert max(len(r.getMessage()) for r in building) >= qnn_log._FIRST_BUFFER
        caplog.clear()
        err = execute_one_input(q, G, s.graphs[0])
        assert err.code & 0xFFFF == 6004
        errors = [r.getMessage() for r in qnn_records(caplog) if r.levelno == logging.ERROR]
        assert any(MISMATCH in m for m in errors), errors  # %d formatted in C: "1" and "2", no % left
    finally:
        s.close()
        qnn_log.free_logger(log)
    assert qnn_log.live_handles() == live


def test_level_is_respected_and_followed(q: Any, qnn_log: Any, G: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(qnn_log.QNN_DEBUG, logger=LOGGER)  # caplog's handler takes everything (restored after)
    logging.getLogger(LOGGER).setLevel(logging.ERROR)  # the level the handle follows
    follows = qnn_log.create_logger()
    s = session(q, G, follows)
    try:
        G.add_graph(s, "quiet_add", "f32")
        assert not [r for r in qnn_records(caplog) if r.levelno < logging.WARNING]
        qnn_log.set_level(logging.INFO)  # the logger and every handle that follows it
        caplog.clear()
        G.add_graph(s, "loud_add", "f32")
        infos = [r for r in qnn_records(caplog) if r.levelno == logging.INFO]
        assert infos, "INFO messages after set_level(INFO)"
        assert not [r for r in qnn_records(caplog) if r.levelno < logging.INFO], "and nothing finer"
        logging.getLogger(LOGGER).setLevel(logging.ERROR)
        qnn_log.sync()  # a level changed directly, then applied
        caplog.clear()
        G.add_graph(s, "quiet_again", "f32")
        assert not [r for r in qnn_records(caplog) if r.levelno < logging.WARNING]
    finally:
        s.close()
        qnn_log.free_logger(follows)


def test_fixed_level_handle(q: Any, qnn_log: Any, G: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(qnn_log.QNN_DEBUG, logger=LOGGER)
    fixed = qnn_log.create_logger(logging.ERROR)  # does not follow the logger
    s = session(q, G, fixed)
    try:
        qnn_log.sync()
        G.add_graph(s, "fixed_add", "f32")
        assert not [r for r in qnn_records(caplog) if r.levelno < logging.WARNING]
        err = execute_one_input(q, G, s.graphs[0])
        assert err.code & 0xFFFF == 6004
        assert any(MISMATCH in r.getMessage() for r in qnn_records(caplog) if r.levelno == logging.ERROR)
        qnn_log.set_level(logging.DEBUG, fixed)  # this handle only
        caplog.clear()
        G.add_graph(s, "fixed_add2", "f32")
        assert any(r.levelno == logging.DEBUG for r in qnn_records(caplog))
        assert not [r for r in qnn_records(caplog) if r.levelno < logging.DEBUG]
    finally:
        s.close()
        qnn_log.free_logger(fixed)


def test_callback_never_raises_into_c(q: Any, qnn_log: Any, G: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger=LOGGER)
    logger = logging.getLogger(LOGGER)

    class Boom(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            raise RuntimeError("a filter that fails")

    log = qnn_log.create_logger()
    s = session(q, G, log)
    before = qnn_log.callback_errors()
    boom = Boom()
    try:
        g = G.add_graph(s, "boom_add", "f32")
        logger.addFilter(boom)
        err = execute_one_input(q, G, g)  # the library's own error, not the filter's
        assert err.code & 0xFFFF == 6004
        assert qnn_log.callback_errors() > before
    finally:
        logger.removeFilter(boom)
        s.close()
        qnn_log.free_logger(log)


def test_messages_from_threads(q: Any, qnn_log: Any, G: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger=LOGGER)
    log = qnn_log.create_logger()
    s = session(q, G, log)
    threads, rounds = 4, 5
    failures: list[BaseException] = []
    try:
        graphs = [G.add_graph(s, f"thread_add{i}", "f32") for i in range(threads)]

        def run(g: Any) -> None:
            try:
                for _ in range(rounds):
                    a, b = G.inputs("f32", 1)
                    c = np.zeros_like(a)
                    ins, outs = G.bind(g, [a, b, c])
                    try:
                        q.QnnGraph_execute(g.handle, ins, 1, outs, 1, G.NULL, G.NULL)
                    except q.Error as exc:
                        assert exc.code & 0xFFFF == 6004
                    else:
                        raise AssertionError("one input of two accepted")
            except BaseException as exc:
                failures.append(exc)

        workers = [threading.Thread(target=run, args=(g,)) for g in graphs]
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)
        assert not failures, failures
        mismatches = [r for r in qnn_records(caplog) if MISMATCH in r.getMessage()]
        assert len(mismatches) == threads * rounds
    finally:
        s.close()
        qnn_log.free_logger(log)


def test_free_logger_checks_its_handle(q: Any, qnn_log: Any) -> None:
    from ironaccelerator import Error, ErrorKind
    log = qnn_log.create_logger(logging.WARNING)
    qnn_log.free_logger(log)
    for bad in (log, q.ffi.NULL, "handle", 0):
        with pytest.raises(Error) as err:
            qnn_log.free_logger(bad)
        assert err.value.kind == ErrorKind.INVALID_HANDLE
    with pytest.raises(Error) as err:
        qnn_log.set_level(logging.INFO, log)
    assert err.value.kind == ErrorKind.INVALID_HANDLE


# ------------------------------------------------------------------------ the Saver (subprocesses)


@pytest.fixture()
def scratch() -> Iterator[Path]:
    """A temporary directory for the Saver's output, deleted afterwards (pytest's tmp_path would keep it)."""
    d = Path(tempfile.mkdtemp(prefix="ia_qnn_saver_"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def child(*args: str, cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if k not in ("IA_QNN_TRACE_DIR", "QNN_CHILD_ABI")}
    proc = subprocess.run([sys.executable, str(CHILD), *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env={**environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def recorded_calls(trace: Path) -> list[str]:
    """The ``interface.<name>(`` calls of the C program(s) the Saver wrote under ``trace``, in order."""
    sources = sorted(trace.rglob("*.c"))
    assert sources, f"the Saver wrote no C program: {sorted(p.name for p in trace.rglob('*'))}"
    return [m for src in sources for m in _CALL.findall(src.read_text(errors="replace"))]


def assert_oracle(q: Any, issued: list[str], recorded: list[str]) -> None:
    from ironaccelerator.backends.qnn.interface._binding import BINDING
    from ironaccelerator_runtime.loader import Table
    assert isinstance(BINDING.resolver, Table)
    entries = BINDING.resolver.entries  # public name -> table field, the names the Saver writes
    assert issued and set(NOT_RECORDED) & set(issued), "the sequence exercises the filter"
    assert recorded[:1] == [SAVER_FRAME[0]] and recorded[-1:] == [SAVER_FRAME[1]], (recorded[:1], recorded[-1:])
    expected = [entries[name] for name in issued if name not in NOT_RECORDED]
    assert recorded[1:-1] == expected


@pytest.mark.parametrize("mode", ["api", "abi"])
def test_saver_records_what_was_issued(q: Any, scratch: Path, mode: str) -> None:
    trace, cwd = scratch / "trace", scratch / "cwd"
    cwd.mkdir()
    out = child("trace", str(trace), cwd=cwd, env={"QNN_CHILD_ABI": "1"} if mode == "abi" else {})
    assert out["mode"] == mode
    assert Path(out["path"]).name == "libQnnSaver.so"
    assert out["c_max"] == 0.0  # the Saver executes nothing: the output buffer is as it was
    assert out["size_code"] == 4950  # QNN_SAVER_ERROR_DUMMY_RETVALUE
    assert "QnnGraph_execute" in out["issued"] and "QnnContext_getBinarySize" in out["issued"]
    assert_oracle(q, out["issued"], recorded_calls(trace))
    assert not list(cwd.iterdir())  # everything went to the output directory


# what the trait-surface backend issues that the Saver does not record, besides NOT_RECORDED: a getter, and the
# asynchronous execute the backend tries first (the Saver refuses it unrecorded; the backend then executes)
BACKEND_NOT_RECORDED = NOT_RECORDED | {"QnnBackend_getBuildId", "QnnGraph_executeAsync"}


def test_saver_traces_the_backend(q: Any, scratch: Path) -> None:
    """QnnBackend(trace_dir=...): the Saver's recording of the trait-surface lifecycle (a context binary loaded,
    its graph retrieved and launched, everything dropped) is the sequence the backend issued, frees in reverse."""
    import qnn_graphs as G
    binary = scratch / "add.bin"
    binary.write_bytes(G.build_binary(("f32",)))
    trace, cwd = scratch / "trace", scratch / "cwd"
    cwd.mkdir()
    out = child("backend", str(trace), str(binary), cwd=cwd)
    assert Path(out["path"]).name == "libQnnSaver.so"
    assert out["names"] == [f"Qualcomm QNN Saver (records calls into {trace}; executes nothing)"]
    issued = [n for n in out["issued"] if n not in BACKEND_NOT_RECORDED - NOT_RECORDED]
    assert issued[-4:] == ["QnnContext_free", "QnnDevice_free", "QnnBackend_free", "QnnLog_free"], issued
    assert_oracle(q, issued, recorded_calls(trace))
    assert not list(cwd.iterdir())


def _graph_part(trace: Path) -> str:
    """What the Saver wrote from the graph's creation to its finalization (tensors, op config, validation,
    node): the part of the recording that depends on how the graph was built, not on the lifecycle around it."""
    (source,) = sorted(trace.rglob("*.c"))
    text = source.read_text(errors="replace")
    start = text.index("interface.graphCreate(")
    start = text.rindex("\n", 0, start)
    end = text.index("\n", text.index("interface.graphFinalize("))
    return text[start:end]


def test_saver_records_a_built_graph_as_the_raw_table(q: Any, scratch: Path) -> None:
    """Device.graph_builder issues the calls tests/qnn_graphs.py makes through the raw table for the same add
    graph, with the same tensors and op config: the Saver's two recordings of the graph are the same text."""
    raw_trace, built_trace, cwd = scratch / "raw", scratch / "built", scratch / "cwd"
    cwd.mkdir()
    child("trace", str(raw_trace), cwd=cwd)
    out = child("builder", str(built_trace), cwd=cwd)
    assert Path(out["path"]).name == "libQnnSaver.so"
    issued = [n for n in out["issued"] if n not in BACKEND_NOT_RECORDED - NOT_RECORDED]
    assert_oracle(q, issued, recorded_calls(built_trace))  # what the builder issued is what the Saver recorded
    raw, built = _graph_part(raw_trace), _graph_part(built_trace)
    assert "backendValidateOpConfig" in built and "graphAddNode" in built and '"ElementWiseAdd"' in built
    assert built == raw
    assert not list(cwd.iterdir())


def test_saver_from_env(q: Any, scratch: Path) -> None:
    trace = scratch / "env trace"  # a space: the path reaches the Saver whole
    out = child("env", cwd=scratch, env={"IA_QNN_TRACE_DIR": str(trace)})
    assert out["tracing"] == str(trace)
    assert Path(out["path"]).name == "libQnnSaver.so"
    assert_oracle(q, out["issued"], recorded_calls(trace))


def test_env_naming_a_file_fails_every_call(scratch: Path) -> None:
    bad = scratch / "a file"
    bad.write_text("")
    out = child("env-bad", cwd=scratch, env={"IA_QNN_TRACE_DIR": str(bad)})
    assert out["first"]["kind"] == out["second"]["kind"] == "INVALID_VALUE"
    assert "cannot make the directory" in out["first"]["message"]
    assert out["path"] is None and out["tracing"] is None  # not silently run on HTP instead


def test_trace_to_too_late(scratch: Path) -> None:
    out = child("late", str(scratch / "trace"), cwd=scratch)
    assert out["kind"] == "INVALID_VALUE" and "too late" in out["message"]
    assert Path(out["path"]).name == "libQnnHtp.so"
    assert not (scratch / "trace").exists()


def test_trace_to_without_a_saver(scratch: Path) -> None:
    out = child("missing", str(scratch), cwd=scratch)
    assert out["kind"] == "LIBRARY_NOT_FOUND" and "libQnnSaver.so" in out["message"]
    assert out["tracing"] is None
    assert out["api"] == 2 and Path(out["path"]).name == "libQnnHtp.so"  # the interface was left as it was


@pytest.mark.parametrize("mode", ["api", "abi"])
def test_before_open_hook_failure(scratch: Path, mode: str) -> None:
    out = child("hook", cwd=scratch, env={"QNN_CHILD_ABI": "1"} if mode == "abi" else {})
    assert out["mode"] == mode
    assert out["registered"] is True and out["path"] is None
    assert out["first"]["kind"] == out["second"]["kind"] == "LIBRARY_NOT_FOUND"
    assert "RuntimeError: boom" in out["first"]["message"]


def test_before_open_after_the_library_is_open(q: Any) -> None:
    from ironaccelerator.backends.qnn.interface._binding import BINDING
    q.QnnBackend_getApiVersion()  # open (HTP, in this process)
    ran: list[object] = []
    assert BINDING.before_open(ran.append) is False
    q.QnnBackend_getApiVersion()
    assert ran == [] and not BINDING.opening


def test_trace_to_argument_checks() -> None:
    from ironaccelerator import Error, ErrorKind
    from ironaccelerator_runtime.backends import qnn_saver
    for bad in (3, None, b"/tmp/x", ""):
        with pytest.raises(Error) as err:
            qnn_saver.trace_to(bad)  # type: ignore[arg-type]
        assert err.value.kind == ErrorKind.INVALID_VALUE
    assert qnn_saver.tracing() is None
