"""IRONACCEL_TRACE (ironaccelerator_runtime.tracing): every raw driver call logged with arguments, status and duration
when on; nothing wrapped, so nothing paid, when off; ``ironaccelerator.trace()`` logs a block (ondemand mode).
Each mode is a fresh process: the wrapping happens when the generated modules are imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import GENERATED, ROOT

SESSION = """
import numpy as np, ironaccelerator as ia
dev = ia.BackendRegistry.default().get(ia.BackendKind.OPENCL).open(0)
s = dev.create_stream()
k = dev.load_module("__kernel void twice(__global float *a) { a[get_global_id(0)] *= 2; }", cache=False).kernel("twice")
a = dev.alloc(64)
def work():
    s.copy_from_host(a, np.ones(16, np.float32))
    s.launch(ia.KernelLaunch(k, ia.LaunchDims(grid=16, block=1), (a,)))
    out = np.zeros(16, np.float32)
    s.copy_to_host(out, a)
    s.fill(a, 0)  # asynchronous: synchronize waits for it (clFinish; the blocking read left nothing to wait for)
    s.synchronize()
    assert (out == 2).all()
"""


def run(code: str, trace: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "IRONACCEL_TRACE"}
    env["PYTHONPATH"] = os.pathsep.join([str(GENERATED), str(ROOT / "runtime")])
    if trace is not None:
        env["IRONACCEL_TRACE"] = trace
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def traced_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ironaccelerator.trace: ")]


def _opencl() -> bool:
    try:
        import ironaccelerator as ia

        return bool(ia.BackendRegistry.default().get(ia.BackendKind.OPENCL).devices())
    except Exception:
        return False


def test_tracing_uses_only_the_public_api_of_nvtx() -> None:
    """The vendor-neutral tracer reaches NVTX (the CUDA backend's) through its public hook, nvtx.prepared_range,
    never through the module's private names (issue 26 item 3)."""
    import ast

    tree = ast.parse((ROOT / "runtime" / "ironaccelerator_runtime" / "tracing.py").read_text())
    used = {n.attr for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "nvtx"}
    from ironaccelerator_runtime import nvtx

    assert used and used <= set(nvtx.__all__), sorted(used - set(nvtx.__all__))


pytestmark = pytest.mark.skipif(not _opencl(), reason="no OpenCL device (PoCL)")


def test_off_nothing_is_wrapped_and_nothing_logged() -> None:
    code = SESSION + """
work()
from ironaccelerator.backends.opencl.cl import unchecked
from ironaccelerator.backends.opencl.cl._binding import BINDING
from ironaccelerator_runtime import tracing
assert not tracing.ENABLED
if BINDING.mode == "api":  # the raw functions are the compiled cffi functions themselves: no cost
    assert unchecked.clEnqueueNDRangeKernel is BINDING.lib.clEnqueueNDRangeKernel
assert not hasattr(unchecked.clFinish, "__wrapped__")
try:
    ia.trace().__enter__()
except ia.Error as e:
    assert e.kind is ia.ErrorKind.UNSUPPORTED and "IRONACCEL_TRACE=ondemand" in str(e)
else:
    raise AssertionError("trace() without IRONACCEL_TRACE")
"""
    proc = run(code, None)
    assert traced_lines(proc.stderr) == []


def test_on_every_raw_call_is_logged_with_status_and_duration() -> None:
    proc = run(SESSION + "work()\n", "1")
    lines = traced_lines(proc.stderr)
    names = [line.split(": ", 1)[1].split("(", 1)[0] for line in lines]
    for fn in ("clCreateContext", "clBuildProgram", "clCreateKernel", "clCreateBuffer", "clEnqueueWriteBuffer",
               "clSetKernelArg", "clEnqueueNDRangeKernel", "clEnqueueReadBuffer", "clFinish"):
        assert fn in names, (fn, names)
    launch = next(line for line in lines if "clEnqueueNDRangeKernel(" in line)
    assert launch.rstrip().endswith(" us]") and ") -> 0 [" in launch, launch
    assert names.index("clEnqueueWriteBuffer") < names.index("clEnqueueNDRangeKernel") < \
        names.index("clEnqueueReadBuffer")


def test_ondemand_logs_only_inside_trace() -> None:
    code = SESSION + """
work()
import sys
print("-- inside --", file=sys.stderr, flush=True)
with ia.trace():
    with ia.trace():  # nests
        pass
    work()
print("-- after --", file=sys.stderr, flush=True)
work()
"""
    proc = run(code, "ondemand")
    before, rest = proc.stderr.split("-- inside --", 1)
    inside, after = rest.split("-- after --", 1)
    assert traced_lines(before) == [] and traced_lines(after) == []
    assert any("clEnqueueNDRangeKernel(" in line for line in traced_lines(inside)), inside


def test_cuda_launches_are_traced_over_the_stub_driver(stub_cuda: tuple[Path, dict[str, str]]) -> None:
    """With tracing on, the compiled CUDA launch (which calls cuLaunchKernel from C) is not used, so launches
    are logged too."""
    stub, env = stub_cuda
    code = """
import numpy as np, ironaccelerator as ia
dev = ia.BackendRegistry.default().get(ia.BackendKind.CUDA).open(0)
s = dev.create_stream()
k = dev.load_module('extern "C" __global__ void k(float *a) { a[0] = 1; }', cache=False).kernel("k")
a = dev.alloc(64)
s.launch(ia.KernelLaunch(k, ia.LaunchDims(grid=1, block=1), (a,)))
s.synchronize()
assert dev.api.launch_packed is None
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**env, "IRONACCEL_TRACE": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = traced_lines(proc.stderr)
    assert any(line.split(": ", 1)[1].startswith("cuLaunchKernel(") and ") -> 0 [" in line for line in lines), lines


def test_configuring_the_logger_after_import_prints_each_line_once() -> None:
    """Issue 23 item 9: with IRONACCEL_TRACE=1, a handler the application adds to ``ironaccelerator.trace`` after
    import (or a root handler, ``logging.basicConfig``) takes the lines over: each once, none left on the fallback
    (standard error)."""
    for configure in ('logging.getLogger("ironaccelerator.trace").addHandler(h)',
                      "logging.basicConfig(handlers=[h], level=logging.DEBUG)"):
        code = SESSION + f"""
import io, logging, sys
buf = io.StringIO()
h = logging.StreamHandler(buf)
h.setFormatter(logging.Formatter("mine: %(message)s"))
{configure}
print("-- configured --", file=sys.stderr, flush=True)
work()
lines = buf.getvalue().splitlines()
assert lines, "the application's handler got nothing"
launches = [line for line in lines if "clEnqueueNDRangeKernel(" in line]
assert len(launches) == 1, lines
print(len(lines))
"""
        proc = run(code, "1")
        before, after = proc.stderr.split("-- configured --", 1)
        assert traced_lines(before) and traced_lines(after) == [], (configure, after[-2000:])
        assert int(proc.stdout.split()[-1]) >= 3


@pytest.mark.parametrize("value", ["verbose", "1,bogus", "YES"])
def test_unknown_values_warn_and_do_not_turn_tracing_on(value: str) -> None:
    """An unknown word in IRONACCEL_TRACE is ignored with a RuntimeWarning listing the accepted values (a typo turned
    full tracing on without a word); known words in any case still work."""
    code = SESSION + """
from ironaccelerator_runtime import tracing
print("ENABLED", tracing.ENABLED)
work()
"""
    proc = run(code, value)
    enabled = value != "verbose"
    assert f"ENABLED {enabled}" in proc.stdout, proc.stdout
    assert bool(traced_lines(proc.stderr)) is enabled
    if value == "YES":
        assert "RuntimeWarning" not in proc.stderr
    else:
        bad = value.split(",")[-1]
        warning = next(line for line in proc.stderr.splitlines() if "RuntimeWarning" in line)
        assert repr(bad) in warning and "ondemand" in warning and "0/off/false/no" in warning, warning
