"""QNN modules saved and loaded again (``Module.save``: the context binary; ``QnnModule.graph_info``: what
libQnnSystem reads back from it) and launches profiled through ``QnnProfile`` (``QnnStream.set_profiling``),
on Qualcomm's real libQnnHtp (x86 emulation).  Issue 30, items 2 and 3."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

import ironaccelerator as ia
from conftest import site_file
from ironaccelerator import Error, ErrorKind, KernelLaunch, LaunchDims

q = pytest.importorskip("ironaccelerator.backends.qnn.interface")
if not q.has("QnnBackend_create"):
    pytest.skip("libQnnHtp.so not found (pip install --no-deps onnxruntime-qnn)", allow_module_level=True)

import qnn_graphs as G  # noqa: E402
from ironaccelerator.backends.qnn import _backend as qb  # noqa: E402
from ironaccelerator_runtime.backends.qnn.module import context_binary  # noqa: E402

DTYPES = ("f32", "f16", "u8")
QDT = {"f32": "QNN_DATATYPE_FLOAT_32", "f16": "QNN_DATATYPE_FLOAT_16", "u8": "QNN_DATATYPE_UFIXED_POINT_8"}


@pytest.fixture(scope="module")
def binary() -> bytes:
    return G.build_binary(DTYPES, chain=True)


@pytest.fixture(scope="module")
def device() -> Iterator[qb.QnnDevice]:
    dev = qb.QnnBackend().open(0)
    with dev:
        yield dev


@pytest.fixture(scope="module")
def module(device: qb.QnnDevice, binary: bytes) -> qb.QnnModule:
    return device.load_module(binary)


def _launch(device: Any, stream: Any, kernel: Any, arrays: list[np.ndarray], out: np.ndarray) -> np.ndarray:
    bufs = [device.alloc(x.nbytes) for x in (*arrays, out)]
    for buf, x in zip(bufs, arrays):
        stream.copy_from_host(buf, x)
    stream.launch(KernelLaunch(kernel, LaunchDims(), tuple(bufs)))
    res = np.empty_like(out)
    stream.copy_to_host(res, bufs[-1])
    return res


def _built() -> dict[str, list[tuple[str, str, list[int], list[float] | None, bool]]]:
    """What tests/qnn_graphs.py built, per graph: (tensor name, QNN data type, dims, (scale, offset), is input)."""
    out = {}
    for dt in DTYPES:
        qin, qout = (list(G.QA), list(G.QC)) if dt == "u8" else (None, None)
        out[f"add_{dt}"] = [(f"add_{dt}_a", QDT[dt], [1, G.N], qin, True), (f"add_{dt}_b", QDT[dt], [1, G.N], qin, True),
                            (f"add_{dt}_c", QDT[dt], [1, G.N], qout, False)]
    out["chain_f32"] = [("chain_f32_a", QDT["f32"], [1, G.N], None, True),
                        ("chain_f32_b", QDT["f32"], [1, G.N], None, True),
                        ("chain_f32_d", QDT["f32"], [1, G.N], None, False)]
    return out


def _described(m: Any) -> dict[str, list[tuple[str, str, list[int], list[float] | None, bool]]]:
    """The same, as the module reads it back through libQnnSystem (``graph_info``)."""
    out = {}
    for name in m.graph_names:
        g = m.graph_info(name)
        assert g.name == name
        out[name] = [(t.name, q.Qnn_DataType_t(t.qnn_dtype).name, list(t.dims),
                      [float(np.float32(t.quantization[0])), t.quantization[1]] if t.quantization else None, t.is_input)
                     for t in g.inputs + g.outputs]
    return out


# ------------------------------------------------------------------ save and load


def test_graph_info_reads_back_what_was_built(module: Any) -> None:
    built = {k: [(n, d, s, [float(np.float32(x[0])), x[1]] if x else None, i) for n, d, s, x, i in v]
             for k, v in _built().items()}
    assert _described(module) == built
    g = module.graph_info("add_u8")
    assert g.inputs[0].dtype is ia.DType.U8 and g.outputs[0].nbytes == G.N
    assert module.kernel("add_u8").inputs == g.inputs                 # the kernel's tensors are the same records
    with pytest.raises(Error) as e:
        module.graph_info("mul_f32")
    assert e.value.kind is ErrorKind.INVALID_VALUE and "chain_f32" in str(e.value)
    with pytest.raises(TypeError):
        module.graph_info(3)


def test_saved_module_reloads_in_another_process_with_the_same_outputs(device: Any, module: Any, binary: bytes,
                                                                       tmp_path: Path) -> None:
    saved = module.save()
    assert isinstance(saved, bytes) and len(saved) == module.nbytes
    (tmp_path / "ctx.bin").write_bytes(saved)
    s = device.create_stream()
    here = {}
    for dt in DTYPES:
        a, b = G.inputs(dt, 11)
        here[f"add_{dt}"] = _launch(device, s, module.kernel(f"add_{dt}"), [a, b], np.zeros_like(a))
    a, b = G.inputs("f32", 11)
    here["chain_f32"] = _launch(device, s, module.kernel("chain_f32"), [a, b], np.zeros_like(a))
    np.testing.assert_array_equal(here["chain_f32"], G.chain_reference(a, b))
    child = textwrap.dedent(f"""
        import json, sys
        import numpy as np
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import qnn_graphs as G
        import test_qnn_save_profile as T
        from ironaccelerator import BackendKind, BackendRegistry
        out = {str(tmp_path)!r}
        dev = BackendRegistry.default().get(BackendKind.QNN).open(0)
        m = dev.load_module(open(out + "/ctx.bin", "rb").read())
        s = dev.create_stream()
        for name in m.graph_names:
            dt = name.rsplit("_", 1)[1]
            a, b = G.inputs(dt, 11)
            np.save(out + "/" + name + ".npy", T._launch(dev, s, m.kernel(name), [a, b], np.zeros_like(a)))
        json.dump(T._described(m), open(out + "/described.json", "w"))
        print("RAN", ",".join(m.graph_names))
    """)
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "RAN add_f32,add_f16,add_u8,chain_f32" in r.stdout
    for name, mine in here.items():
        theirs = np.load(tmp_path / f"{name}.npy")
        assert theirs.dtype == mine.dtype
        np.testing.assert_array_equal(theirs, mine)                  # the same graph, the same bits
    described = json.loads((tmp_path / "described.json").read_text())
    assert {k: [tuple(t) for t in v] for k, v in described.items()} == \
        {k: [tuple(t) for t in v] for k, v in _described(module).items()}


def test_a_context_made_here_is_serialized_through_get_binary(device: Any) -> None:
    sess = G.open_session()
    try:
        G.chain_graph(sess, "fresh")
        data = context_binary(device.api, sess.context)
    finally:
        sess.close()
    m = device.load_module(data)
    assert m.graph_names == ["fresh"] and m.save() is m.save()
    a, b = G.inputs("f32", 4)
    c = _launch(device, device.create_stream(), m.kernel("fresh"), [a, b], np.zeros_like(a))
    np.testing.assert_array_equal(c, G.chain_reference(a, b))


def test_a_loaded_context_is_not_serialized_again(module: Any, binary: bytes) -> None:
    # why save() returns the bytes a module was loaded from: libQnnHtp refuses to size a deserialized context
    # (QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED, 1005)
    with pytest.raises(Error) as e:
        context_binary(module.device.api, module.handle)
    assert e.value.code is not None and e.value.code & 0xFFFF == 1005 and e.value.kind is ErrorKind.DRIVER
    assert module.save() == binary


def test_save_after_close(device: Any, binary: bytes) -> None:
    m = device.load_module(binary)
    m.close()
    with pytest.raises(Error) as e:
        m.save()
    assert e.value.kind is ErrorKind.INVALID_HANDLE
    dev = qb.QnnBackend().open(0)
    m = dev.load_module(binary)
    dev.close()
    with pytest.raises(Error) as e:
        m.save()
    assert e.value.kind is ErrorKind.INVALID_HANDLE


def test_save_is_unsupported_where_modules_are_not_saved() -> None:
    with pytest.raises(Error) as e:
        ia.Module().save()
    assert e.value.kind is ErrorKind.UNSUPPORTED and e.value.function == "Module.save"


# ------------------------------------------------------------------ profiling


def _buffers(device: Any, seed: int) -> tuple[Any, ...]:
    a, b = G.inputs("f32", seed)
    bufs = tuple(device.alloc(4 * G.N) for _ in range(3))
    s = device.create_stream()
    s.copy_from_host(bufs[0], a)
    s.copy_from_host(bufs[1], b)
    return bufs


def test_basic_profile_reports_the_execute_time(device: Any, module: Any) -> None:
    s = device.create_stream()
    launch = KernelLaunch(module.kernel("add_f32"), LaunchDims(), _buffers(device, 1))
    s.launch(launch)                                   # (a first execution: warm-up)
    assert s.last_profile is None and s.profiling is None
    s.set_profiling("basic")
    assert s.profiling == "basic"
    times: list[int] = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        s.launch(launch)
        host_us = (time.perf_counter_ns() - t0) / 1e3
        p = s.last_profile
        assert p is not None and p.graph == "add_f32" and p.level == "basic"
        assert 0 < p.execute_us <= host_us            # the library's time for the call, within the call
        times.append(p.execute_us)
        assert p.nodes == ()                           # per-node rows are DETAILED's
        assert all(e.unit in ("us", "cycles", "count", "bytes", "object") for e in p.events)
    assert len(set(times)) > 1 or len(times) == 1      # measured each time, not a constant


def test_detailed_profile_has_a_row_per_node(device: Any, module: Any) -> None:
    s = device.create_stream()
    s.set_profiling("DETAILED")                        # (case-insensitive)
    launch = KernelLaunch(module.kernel("chain_f32"), LaunchDims(), _buffers(device, 2))
    s.launch(launch)
    s.launch(launch)
    p = s.last_profile
    assert p is not None and p.level == "detailed" and p.execute_us and p.execute_us > 0
    names = [n.node for n in p.nodes]
    ops = [f"chain_f32_{op}" for op, _ in G.CHAIN_OPS]
    assert [n for n in names if n in ops] == ops       # each node built, in graph order
    for n in p.nodes:
        assert n.type == q.QNN_PROFILE_EVENTTYPE_NODE and n.value > 0 and n.children == ()
    # the declared units against the library's own words: its identifiers name the unit of cycle counts, and
    # its EXECUTE event is a time (QNN_PROFILE_EVENTUNIT_CYCLES 3, _MICROSEC 1)
    every = [*p.events, *(c for e in p.events for c in e.children)]
    assert {e.unit for e in every if e.name.endswith("(cycles)")} == {"cycles"}
    assert all(e.name.endswith("(cycles)") for e in every if e.unit == "cycles")
    execute = [e for e in p.events if e.type == q.QNN_PROFILE_EVENTTYPE_EXECUTE]
    assert len(execute) == 1 and "time" in execute[0].name and execute[0].unit == "us"
    # the node rows are the sub-events of one total in the same unit, which is at least their sum
    parent = next(e for e in p.events if e.children)
    assert parent.unit == "cycles" and parent.value >= sum(n.value for n in parent.children)


def test_events_on_a_profiling_stream_measure_the_library_time(device: Any, module: Any) -> None:
    s = device.create_stream()
    launch = KernelLaunch(module.kernel("add_f32"), LaunchDims(), _buffers(device, 3))
    s.set_profiling("basic")
    e0 = s.record_event()
    t0 = time.perf_counter_ns()
    total = 0
    for _ in range(4):
        s.launch(launch)
        total += s.last_profile.execute_us
    host_ms = (time.perf_counter_ns() - t0) / 1e6
    e1 = s.record_event()
    assert e0.elapsed_ms(e1) == pytest.approx(total / 1e3) and 0 < e0.elapsed_ms(e1) <= host_ms
    assert s.launch_unchecked(launch) is None          # unchecked launches are profiled too
    e2 = s.record_event()
    assert e1.elapsed_ms(e2) == pytest.approx(s.last_profile.execute_us / 1e3)
    s.set_profiling(None)                              # stopped: events read the host clock again
    last = s.last_profile
    s.launch(launch)
    assert s.last_profile is last and s.profiling is None
    e3 = s.record_event()
    assert e3.profile_clock is None and e2.elapsed_ms(e3) > 0
    s.set_profiling("basic")                           # a new profiler: its events do not mix with the old one's
    e4 = s.record_event()
    assert e0.elapsed_ms(e4) == (e4.t_ns - e0.t_ns) / 1e6


@pytest.mark.parametrize("level", ["linting", "backend", "optrace", ""])
def test_other_levels_are_unsupported(device: Any, level: str) -> None:
    s = device.create_stream()
    with pytest.raises(Error) as e:
        s.set_profiling(level)
    assert e.value.kind is ErrorKind.UNSUPPORTED and "'basic', 'detailed'" in str(e.value)
    assert s.profiling is None


def test_level_of_another_type(device: Any) -> None:
    with pytest.raises(TypeError):
        device.create_stream().set_profiling(2)


@pytest.mark.skipif(site_file("onnxruntime_qnn/libQnnSaver.so") is None, reason="libQnnSaver.so is not installed")
def test_a_profiled_launch_under_the_saver_is_recorded(binary: bytes, tmp_path: Path) -> None:
    # the Saver (one interface library per process: a child) records the profile calls, executes nothing and
    # answers QnnProfile_getEvents with its dummy value: a launch with no events, not an error
    (tmp_path / "ctx.bin").write_bytes(binary)
    child = textwrap.dedent(f"""
        import ironaccelerator as ia
        from ironaccelerator.backends.qnn import _backend as qb
        dev = qb.QnnBackend(trace_dir={str(tmp_path / "trace")!r}).open(0)
        s = dev.create_stream()
        s.set_profiling("detailed")
        k = dev.load_module(open({str(tmp_path / "ctx.bin")!r}, "rb").read()).kernel("add_f32")
        s.launch(ia.KernelLaunch(k, ia.LaunchDims(), tuple(dev.alloc(4096) for _ in range(3))))
        print("EVENTS", s.last_profile.graph, s.last_profile.events, s.last_profile.execute_us)
    """)
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "EVENTS add_f32 () None" in r.stdout
    c = (tmp_path / "trace" / "saver_output.c").read_text()
    assert "profileCreate(backend_0, (QnnProfile_Level_t)2, &profile_0)" in c
    assert ", profile_0, NULL));" in c[c.index("graphExecute("):]          # the execute was given the handle
    assert c.index("graphExecute(") < c.index("profileGetEvents(profile_0") < c.index("profileFree(profile_0)")


def test_profiling_on_a_closed_device() -> None:
    dev = qb.QnnBackend().open(0)
    s = dev.create_stream()
    dev.close()
    with pytest.raises(Error) as e:
        s.set_profiling("basic")
    assert e.value.kind is ErrorKind.INVALID_HANDLE
