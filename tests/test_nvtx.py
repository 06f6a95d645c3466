"""NVTX (issue 14 item 9): ``ironaccelerator.nvtx`` ranges and marks, and ``IRONACCEL_TRACE=nvtx``, over NVIDIA's real
NVTX library (specs/cuda/nvtx.yaml: CUDA 13's ``libnvtx3interop.so.1``).

What a profiler would see is recorded by tests/nvtx_recorder/recorder.c, a test NVTX tool that NVTX loads from
``NVTX_INJECTION64_PATH`` (its documented injection interface, as Nsight Systems attaches): each NVTX call becomes a
line of the file ``NVTX_RECORD_PATH`` names.  NVTX reads those variables once per process, so each case is a fresh
process.  The ``errors: none`` spec form that the NVTX spec uses is tested here as well.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import GENERATED, ROOT

import ironaccelerator as ia
from ironaccelerator_gen.diagnostics import UserError
from ironaccelerator_gen.spec import load_library

RECORDER = ROOT / "tests" / "nvtx_recorder" / "recorder.c"


def _nvtx_include() -> Path | None:
    try:
        from ironaccelerator.backends.cuda.nvtx import _binding
    except ImportError:
        return None
    del _binding
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "include" / "nvtx3" / "nvToolsExt.h").is_file():
            return Path(root) / "include"
    return None


INCLUDE = _nvtx_include()
needs_nvtx = pytest.mark.skipif(INCLUDE is None or not ia.nvtx.available(),
                                reason="NVTX (libnvtx3interop.so.1 and nvtx3/nvToolsExt.h: the CUDA 13 toolkit) is not here")


@pytest.fixture(scope="module")
def recorder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or INCLUDE is None:
        pytest.skip("no C compiler or no NVTX headers for the recording tool")
    out = tmp_path_factory.mktemp("nvtx") / "librecorder.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}", "-o", str(out),
                    str(RECORDER)], check=True, capture_output=True, text=True)
    return out


def record(recorder: Path, tmp_path: Path, code: str, trace: str | None = None) -> list[str]:
    """Run ``code`` in a fresh process with the recording tool attached; the NVTX calls it made, one per line."""
    path = tmp_path / "record.txt"
    env = {k: v for k, v in os.environ.items() if k != "IRONACCEL_TRACE"}
    env.update(PYTHONPATH=os.pathsep.join([str(GENERATED), str(ROOT / "runtime")]),
               NVTX_INJECTION64_PATH=str(recorder), NVTX_RECORD_PATH=str(path))
    if trace is not None:
        env["IRONACCEL_TRACE"] = trace
    proc = subprocess.run([sys.executable, "-c", "import ironaccelerator as ia\n" + code], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return path.read_text().splitlines() if path.exists() else []


@needs_nvtx
def test_ranges_marks_and_domains_reach_the_profiler(recorder: Path, tmp_path: Path) -> None:
    code = """
with ia.nvtx.range("outer"):
    with ia.nvtx.range("inner", color=0xFF00AA00, domain="app"):
        ia.nvtx.mark("here")
        ia.nvtx.mark("there", domain="app")
    ia.nvtx.push("manual", color=0x80112233)
    ia.nvtx.pop(domain=None)
"""
    # color= without a domain goes through the default domain's extended push (a NULL domain handle)
    assert record(recorder, tmp_path, code) == [
        "push outer", "domain app", "dpush app inner ff00aa00", "mark here", "dmark app there", "dpop app",
        "dpush (global) manual 80112233", "pop", "pop"]


@needs_nvtx
def test_a_prepared_range_is_pushed_and_popped_with_one_call_each(recorder: Path, tmp_path: Path) -> None:
    """nvtx.prepared_range: the public hook IRONACCEL_TRACE=nvtx uses (issue 26: tracing no longer reaches into
    nvtx's private functions), its attributes and domain handle made once, then each push and pop one NVTX call."""
    code = """
r = ia.nvtx.prepared_range("step", domain="app")
for _ in range(2):
    r.push()
    ia.nvtx.mark("inside")
    r.pop()
d = ia.nvtx.prepared_range("plain", domain=None)
d.push()
d.pop()
t = ia.nvtx.prepared_range("traced")  # default: the tracer's domain
t.push()
t.pop()
"""
    assert record(recorder, tmp_path, code) == [
        "domain app", "dpush app step -", "mark inside", "dpop app", "dpush app step -", "mark inside", "dpop app",
        "dpush (global) plain -", "dpop (global)", "domain ironaccelerator", "dpush ironaccelerator traced -",
        "dpop ironaccelerator"]


@needs_nvtx
def test_decorator_names_the_range_after_the_function_and_pops_on_exceptions(recorder: Path, tmp_path: Path) -> None:
    code = """
@ia.nvtx.range()
def step(x):
    return 2 * x
@ia.nvtx.range("failing", domain="app")
def bad():
    raise KeyError("k")
assert step(21) == 42 and step.__name__ == "step"
try:
    bad()
except KeyError:
    pass
else:
    raise AssertionError("the exception was lost")
"""
    assert record(recorder, tmp_path, code) == ["push step", "pop", "domain app", "dpush app failing -", "dpop app"]


def _opencl() -> bool:
    try:
        return bool(ia.BackendRegistry.default().get(ia.BackendKind.OPENCL).devices())
    except Exception:
        return False


WORK = """
dev = ia.BackendRegistry.default().get(ia.BackendKind.OPENCL).open(0)
a = dev.alloc(64)
s = dev.create_stream()
with ia.nvtx.range("user"):
    s.fill(a, 7)
s.synchronize()
"""


@needs_nvtx
@pytest.mark.skipif(not _opencl(), reason="no OpenCL device (PoCL)")
@pytest.mark.parametrize("trace", [None, "nvtx", "1,nvtx"])
def test_trace_nvtx_puts_every_driver_call_in_a_range(recorder: Path, tmp_path: Path, trace: str | None) -> None:
    lines = record(recorder, tmp_path, WORK, trace)
    driver = [x for x in lines if x.startswith("dpush ironaccelerator ")]
    if trace is None:  # off: only the user's range; no driver call is wrapped
        assert lines == ["push user", "pop"]
        return
    names = [x.split()[2] for x in driver]
    assert {"clGetPlatformIDs", "clCreateBuffer", "clEnqueueFillBuffer", "clFinish"} <= set(names), names
    # balanced, and the fill sits inside the user's range
    assert sum(x.startswith("dpush ") for x in lines) == sum(x.startswith("dpop ") for x in lines)
    user = lines.index("push user")
    fill = lines.index("dpush ironaccelerator clEnqueueFillBuffer -")
    assert user < fill < lines.index("pop", user)
    assert lines[fill + 1] == "dpop ironaccelerator"
    assert lines.count("domain ironaccelerator") == 1  # one domain handle for the process


@needs_nvtx
def test_without_a_profiler_calls_return_at_once(tmp_path: Path) -> None:
    # NVTX with no tool attached: the library is there and every call is a no-op returning NVTX's "not tracked"
    code = """
from ironaccelerator.backends.cuda import nvtx as raw
assert ia.nvtx.available()
with ia.nvtx.range("r", color=1, domain="d"):
    ia.nvtx.mark("m")
assert raw.nvtxRangePush("x") < 0 and raw.nvtxRangePop() < 0
"""
    env = {k: v for k, v in os.environ.items() if k not in ("NVTX_INJECTION64_PATH", "IRONACCEL_TRACE")}
    env["PYTHONPATH"] = os.pathsep.join([str(GENERATED), str(ROOT / "runtime")])
    proc = subprocess.run([sys.executable, "-c", "import ironaccelerator as ia\n" + code], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_without_the_library_everything_is_a_no_op(tmp_path: Path) -> None:
    code = """
import ironaccelerator as ia
try:
    from ironaccelerator.backends.cuda.nvtx import _binding
except ImportError:
    pass
else:
    _binding.BINDING.use_library("/nonexistent/libnvtx3interop.so.1")
assert not ia.nvtx.available()
with ia.nvtx.range("r", color=0xFF000000, domain="d"):
    ia.nvtx.mark("m")
@ia.nvtx.range()
def f():
    return 1
assert f() == 1
assert ia.nvtx.prepared_range("r") is None  # nothing to call: the tracer logs only
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(GENERATED), str(ROOT / "runtime")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


@pytest.mark.parametrize("call, what", [
    (lambda: ia.nvtx.range(3), "must be a str"),  # type: ignore[arg-type]
    (lambda: ia.nvtx.range("a\0b"), "NUL"),
    (lambda: ia.nvtx.range("r", color=-1), "color"),
    (lambda: ia.nvtx.range("r", color=1 << 32), "color"),
    (lambda: ia.nvtx.range("r", color=True), "color"),
    (lambda: ia.nvtx.range("r", domain=b"d"), "must be a str"),  # type: ignore[arg-type]
    (lambda: ia.nvtx.mark(None), "must be a str"),  # type: ignore[arg-type]
    (lambda: ia.nvtx.push("p", color=2.5), "color"),  # type: ignore[arg-type]
    (lambda: ia.nvtx.prepared_range("a\0b"), "NUL"),
    (lambda: ia.nvtx.prepared_range(3), "must be a str"),  # type: ignore[arg-type]
    (lambda: ia.nvtx.prepared_range("r", domain=b"d"), "must be a str"),  # type: ignore[arg-type]
])
def test_bad_arguments_are_invalid_value(call: object, what: str) -> None:
    with pytest.raises(ia.Error) as e:
        call()  # type: ignore[operator]
    assert e.value.kind == ia.ErrorKind.INVALID_VALUE and what in str(e.value)


# ---------------------------------------------------------------- errors: none (the spec form NVTX's spec uses)

def test_errors_none_loads_and_marks_the_library_as_reporting_no_status() -> None:
    spec = load_library(ROOT / "specs" / "cuda" / "nvtx.yaml", "specs/cuda/nvtx.yaml")
    assert not spec.errors.reported
    cuda = load_library(ROOT / "specs" / "cuda" / "driver.yaml", "specs/cuda/driver.yaml")
    assert cuda.errors.reported


@pytest.mark.parametrize("functions, message", [
    ("functions:\n  tinyRun:\n    status: [TINY_BUSY]\n", "specs/x/tiny.yaml:17:3: 'status' of 'tinyRun' does not go with errors: none"),
    ("functions:\n  tinyRun:\n    error_log: tinyLog\n", "specs/x/tiny.yaml:17:3: 'error_log' of 'tinyRun' does not go with errors: none"),
])
def test_errors_none_refuses_status_overrides(functions: str, message: str) -> None:
    text = ("vendor: x\nlibrary: tiny\nbackend: CUDA\nsdk:\n  kind: tiny\n  marker: tiny.h\nheaders: [tiny.h]\n"
            "bind:\n  include: ['tiny*']\nloader:\n  linux: [libtiny.so]\n"
            "# no status\n\n\nerrors: none\n" + functions)
    with pytest.raises(UserError) as e:
        load_library(Path("specs/x/tiny.yaml"), "specs/x/tiny.yaml", text=text)
    assert message in str(e.value)


def test_errors_other_scalars_are_still_refused() -> None:
    text = ("vendor: x\nlibrary: tiny\nbackend: CUDA\nsdk:\n  kind: tiny\n  marker: tiny.h\nheaders: [tiny.h]\n"
            "bind:\n  include: ['tiny*']\nloader:\n  linux: [libtiny.so]\nerrors: nothing\n")
    with pytest.raises(UserError) as e:
        load_library(Path("specs/x/tiny.yaml"), "specs/x/tiny.yaml", text=text)
    assert str(e.value) == ("specs/x/tiny.yaml:12:9: expected a mapping of status codes (or errors: none) "
                            "(key: value), got str 'nothing'")
