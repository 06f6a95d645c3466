"""bench/bench_gpu.py (the H200 benchmarks) and bench/_harness.py, on a machine without a GPU.

The benchmark runs once, on a lent GPU machine; everything that can go wrong before it gets there is
checked here: the no-device exit paths, option parsing, the paired-ratio harness, the C bandwidth program
(compiled, not run), the kernels (NVRTC and ptxas), the cuda.core / cuda-bindings names it calls, and a
whole run of every section against a fake device and fake reference libraries (all present, or all
missing/failing), so that no reporting path meets its first caller on the GPU.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import shutil
import subprocess
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from conftest import ROOT

BENCH = ROOT / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import _harness  # noqa: E402
import bench_gpu  # noqa: E402

HAS_LIBCUDA = bool(ctypes.util.find_library("cuda"))


# ----------------------------------------------------------------------------- no device


@pytest.mark.skipif(HAS_LIBCUDA, reason="a CUDA driver is installed")
@pytest.mark.parametrize("extra, status", [([], 0), (["--require-device"], 2)], ids=["default", "require-device"])
def test_without_a_driver_nothing_to_measure(tmp_path: Path, extra: list[str], status: int) -> None:
    out = tmp_path / "figures.json"
    proc = subprocess.run([sys.executable, str(BENCH / "bench_gpu.py"), "--quick", "--json", str(out), *extra],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == status, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    assert lines[0].startswith("bench_gpu: no CUDA device (LIBRARY_NOT_FOUND: ") and lines[0].endswith(
        "): nothing to measure"), lines[0]
    data = json.loads(out.read_text())
    assert data["status"] == "no-device" and data["reason"].startswith("LIBRARY_NOT_FOUND")


# ----------------------------------------------------------------------------- options


def test_options_defaults() -> None:
    quick = bench_gpu.parse_args(["--quick"])
    assert (quick.repeats, quick.target_s, quick.only, quick.batch) == (15, 0.005, ["launch", "alloc", "copy"], 256)
    assert quick.json is None and not quick.require_device and quick.deadline_s == 120
    full = bench_gpu.parse_args([])
    assert (full.repeats, full.target_s, full.deadline_s) == (31, 0.02, 900)


def test_options_only_is_repeatable_and_a_comma_list() -> None:
    args = bench_gpu.parse_args(["--only", "copy", "--only", " Alloc,copy,", "--repeats", "7", "--json", "x.json"])
    assert args.only == ["copy", "alloc"] and args.repeats == 7 and args.json == Path("x.json")


@pytest.mark.parametrize("argv", [["--only", "launchh"], ["--only", ","], ["--repeats", "2"], ["--batch", "0"]])
def test_options_rejected(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        bench_gpu.parse_args(argv)
    assert ei.value.code == 2
    assert "error:" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the harness


def _variant(key: str, samples: list[float]) -> _harness.Variant:
    v = _harness.Variant(key, key, lambda n: None)
    v.samples = list(samples)
    return v


def test_ratio_is_the_median_of_paired_ratios() -> None:
    b = _variant("b", [2.0, 2.0, 10.0])
    a = _variant("a", [1.0, 2.0, 30.0])  # per repeat 0.5, 1.0, 3.0
    assert _harness.ratio(a, b) == 1.0
    e = _variant("e", [2.0, 4.0, 10.0])  # per repeat 1.0, 2.0, 1.0: one slow repeat does not move it
    assert _harness.ratio(e, b) == 1.0 and e.median / b.median == 2.0


def test_spread_and_safe_ratio() -> None:
    v = _variant("v", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    assert _harness.spread(v) == pytest.approx((6.0 - 3.0) / 4.5 * 100)
    assert _harness.spread(_variant("w", [1.0, 9.0])) == 0.0
    assert bench_gpu.safe_ratio(v, None) is None and bench_gpu.safe_ratio(None, v) is None
    assert bench_gpu.safe_ratio(v, v) == 1.0
    assert bench_gpu.fmt_ratio(None, 5) == "    -" and bench_gpu.fmt_ratio(0.5, 6) == " 0.500"


def test_run_rotates_the_order_and_samples_every_variant() -> None:
    calls: list[str] = []

    def body(key: str) -> Any:
        def f(n: int) -> None:
            calls.append(key)
        return f

    vs = [_harness.Variant(k, k, body(k)) for k in "abc"]
    _harness.run(vs, repeats=6, target_s=1e-6)
    assert [len(v.samples) for v in vs] == [6, 6, 6] and all(x > 0 for v in vs for x in v.samples)
    # after calibration (warm-up and sizing calls), each repeat calls a, b, c in a rotated order
    timed = calls[-18:]
    firsts = [timed[i] for i in range(0, 18, 3)]
    assert firsts == ["a", "b", "c", "a", "b", "c"]


def test_targets(capsys: pytest.CaptureFixture[str]) -> None:
    t = _harness.Targets()
    t.print()  # nothing measured (every reference skipped): no crash
    t.add("x / y", 0.8, "<=", 1.0)
    t.add("p / q", 0.9, ">=", 1.0)
    t.note("context", 2.0)
    assert t.missed == 1
    t.print()
    out = capsys.readouterr().out
    assert "OK" in out and "MISS" in out and "1/2 met" in out and "no target" in out
    js = t.as_json()
    assert [r["ok"] for r in js["targets"]] == [True, False] and js["context"] == [{"what": "context", "value": 2.0}]


# ----------------------------------------------------------------------------- the C program and the kernels


def test_parse_bw_output() -> None:
    text = "H2D 67108864 52.125 51.500\nnoise\nD2H 67108864 53.000 52.250\nH2D x 1 2\n"
    assert bench_gpu.parse_bw_output(text) == {("H2D", 67108864): (52.125, 51.5), ("D2H", 67108864): (53.0, 52.25)}


@pytest.mark.skipif(bench_gpu.find_c_compiler() is None, reason="no C compiler")
@pytest.mark.parametrize("headers", [False, True], ids=["own-prototypes", "cuda-headers"])
def test_bw_program_compiles(tmp_path: Path, headers: bool) -> None:
    include = bench_gpu.find_cuda_include() if headers else None
    if headers and include is None:
        pytest.skip("no cuda_runtime_api.h (CUDA toolkit or pip nvidia-cuda-runtime)")
    exe = bench_gpu.build_bw_program(tmp_path, include)  # -Wall -Werror: the pointer types match the header
    assert exe.is_file() and exe.name == ("bench_gpu_bw_hdr" if headers else "bench_gpu_bw")
    usage = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert usage.returncode == 2 and "usage:" in usage.stderr
    cudart = bench_gpu.find_cudart()
    if cudart is not None and not HAS_LIBCUDA:  # it loads libcudart and every symbol, then finds no driver
        proc = subprocess.run([str(exe), "3", "65536"], capture_output=True, text=True, timeout=60,
                              env={"BENCH_CUDART": cudart, "PATH": "/usr/bin:/bin"})
        assert proc.returncode == 1 and "cudaSetDevice(0) failed" in proc.stderr, proc.stderr


def test_bw_program_reports_a_compile_failure(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="failed"):
        bench_gpu.build_bw_program(tmp_path, None, compiler=shutil.which("false") or "/bin/false")


def test_kernel_ptx_is_what_load_module_takes() -> None:
    from ironaccelerator.backends.cuda import _backend as cuda_backend

    assert cuda_backend.classify_image(bench_gpu.KERNEL_PTX) == "ptx"
    assert cuda_backend.classify_image(bench_gpu.KERNEL_SRC) == "source"


@pytest.mark.skipif(shutil.which("ptxas") is None and not Path("/usr/local/cuda/bin/ptxas").is_file(),
                    reason="no ptxas")
def test_kernel_ptx_assembles_for_hopper(tmp_path: Path) -> None:
    ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
    src = tmp_path / "k.ptx"
    src.write_text(bench_gpu.KERNEL_PTX)
    proc = subprocess.run([ptxas, "-arch=sm_90", str(src), "-o", str(tmp_path / "k.cubin")], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_kernel_source_compiles_with_nvrtc() -> None:
    from ironaccelerator import Error, ErrorKind
    from ironaccelerator.backends.cuda import _backend as cuda_backend

    try:
        ptx = cuda_backend.compile_source(bench_gpu.KERNEL_SRC, "compute_90").decode()
    except Error as e:
        if e.kind in (ErrorKind.LIBRARY_NOT_FOUND, ErrorKind.SYMBOL_NOT_FOUND):
            pytest.skip(f"no NVRTC: {e}")
        raise
    for entry, params in (("empty", 0), ("args", 2), ("touch", 2)):
        assert f".entry {entry}(" in ptx
        assert ptx.count(f"{entry}_param_") >= params  # extern "C": unmangled names, as the PTX has them


# ----------------------------------------------------------------------------- the reference libraries' names


def test_cuda_core_api_and_compile() -> None:
    pytest.importorskip("cuda.core")
    api = bench_gpu.cuda_core_api()
    assert api.module in ("cuda.core", "cuda.core.experimental") and api.version
    for name in ("Device", "LaunchConfig", "Program", "launch"):
        assert callable(getattr(api, name)), name
    assert isinstance(api.new_launch, bool)
    cfg = api.LaunchConfig(grid=1, block=1) if api.new_launch else None
    assert cfg is None or tuple(cfg.grid) == (1, 1, 1)
    try:
        obj = bench_gpu.cuda_core_compile(api, bench_gpu.KERNEL_SRC, "9.0")  # NVRTC only, no device
    except Exception as e:  # noqa: BLE001
        if "nvrtc" in str(e).lower() and ("not found" in str(e).lower() or "load" in str(e).lower()):
            pytest.skip(f"cuda.core finds no NVRTC: {e}")
        raise
    assert callable(obj.get_kernel)


def test_bindings_api_names() -> None:
    pytest.importorskip("cuda.bindings")
    b = bench_gpu.bindings_api()
    for name in ("cuLaunchKernel", "cuStreamCreate", "cuStreamSynchronize", "cudaMallocHost", "cudaMalloc",
                 "cudaMemcpy", "cudaFreeHost", "cudaFree"):
        assert callable(getattr(b, name)), name
    assert (int(b.H2D), int(b.D2H)) == (1, 2)
    assert int(b.CUfunction(0x1234)) == 0x1234  # a handle from an address, as the floor uses ours
    assert bench_gpu.check_cu((b.driver.CUresult.CUDA_SUCCESS, 5), "x") == 5


def test_check_cu() -> None:
    assert bench_gpu.check_cu((0,), "f") is None
    assert bench_gpu.check_cu((0, 7), "f") == 7
    assert bench_gpu.check_cu((0, 7, 8), "f") == (7, 8)
    with pytest.raises(RuntimeError, match="f returned 2"):
        bench_gpu.check_cu((2, 7), "f")


def test_pack_raw_params() -> None:
    assert bench_gpu.pack_raw_params([]) == (0, None)
    address, keep = bench_gpu.pack_raw_params([(0xDEADBEEF00, ctypes.c_uint64), (-3, ctypes.c_int)])
    ptrs = (ctypes.c_void_p * 2).from_address(address)
    assert ptrs[0] and ptrs[1]
    assert ctypes.c_uint64.from_address(ptrs[0] or 0).value == 0xDEADBEEF00
    assert ctypes.c_int.from_address(ptrs[1] or 0).value == -3
    assert keep is not None


def test_pinned_view_shares_the_memory() -> None:
    from ironaccelerator_runtime.traits import host_view

    raw = ctypes.create_string_buffer(256)
    view = bench_gpu.pinned_view(ctypes.addressof(raw), 256)
    assert view.dtype == np.uint8 and view.shape == (256,) and view.flags.writeable
    view[:] = 7
    assert raw.raw == b"\x07" * 256
    mv = host_view(view, writable=True)  # what ours' copy_to_host does with it
    assert mv.nbytes == 256 and not mv.readonly


# ----------------------------------------------------------------------------- whole runs on a fake device


class FakeMem:
    def __init__(self, nbytes: int) -> None:
        self.raw = ctypes.create_string_buffer(nbytes)
        self.ptr = ctypes.addressof(self.raw)
        self.nbytes = nbytes
        self.freed = False

    def free(self) -> None:
        assert not self.freed, "double free"
        self.freed = True

    def free_unchecked(self) -> None:
        self.freed = True


class FakeStream:
    """Ours, emulated on host memory: the ``touch`` kernel writes its int; copies are memmoves."""

    def __init__(self) -> None:
        self.launches = 0

    def launch(self, launch: Any) -> None:
        from ironaccelerator import KernelLaunch

        assert isinstance(launch, KernelLaunch)
        self.launches += 1
        if launch.kernel.name == "touch":
            mem, value = launch.args
            ctypes.c_int32.from_address(mem.ptr).value = int(value)

    def launch_unchecked(self, launch: Any) -> None:
        self.launch(launch)

    def synchronize(self) -> None:
        pass

    def copy_from_host(self, dst: FakeMem, src: np.ndarray) -> None:
        ctypes.memmove(dst.ptr, src.ctypes.data, src.nbytes)

    def copy_to_host(self, dst: np.ndarray, src: FakeMem) -> None:
        ctypes.memmove(dst.ctypes.data, src.ptr, dst.nbytes)


class FakeDevice:
    arch = "9.0"
    descriptor = SimpleNamespace(name="Fake H200", total_memory=141 << 30, compute_units=132)

    def __init__(self) -> None:
        self.stream = FakeStream()

    def load_module(self, source: str) -> Any:
        assert source == bench_gpu.KERNEL_SRC
        return SimpleNamespace(kernel=lambda name: SimpleNamespace(name=name, handle=0x1000 + len(name)))

    def alloc(self, nbytes: int, kind: Any = None) -> FakeMem:
        return FakeMem(nbytes)

    alloc_unchecked = alloc

    def memory_pool(self) -> Any:
        def alloc(nbytes: int, stream: Any = None) -> FakeMem:  # a stream-ordered pool, as CUDA's
            assert stream is None or stream is self.stream
            return FakeMem(nbytes)

        return SimpleNamespace(alloc=alloc)

    def create_stream(self) -> FakeStream:
        return self.stream


def fake_cuda_core() -> SimpleNamespace:
    class Stream:
        def sync(self) -> None:
            pass

    class Buffer:
        def close(self, stream: Any = None) -> None:
            assert isinstance(stream, Stream)

    class Device:
        memory_resource = "FakeMemoryResource"

        def __init__(self, index: int) -> None:
            assert index == 0

        def set_current(self) -> None:
            pass

        def create_stream(self) -> Stream:
            return Stream()

        def allocate(self, size: int, *, stream: Any) -> Buffer:
            assert isinstance(stream, Stream) and size > 0
            return Buffer()

    class Program:
        def __init__(self, code: str, code_type: str, options: Any = None) -> None:
            assert code_type == "c++" and options == "sm_90"

        def compile(self, target: str) -> Any:
            assert target == "cubin"
            return SimpleNamespace(get_kernel=lambda name: SimpleNamespace(name=name))

    def launch(stream: Any, config: Any, kernel: Any, *args: Any) -> None:
        assert isinstance(stream, Stream) and config == ("config", 1, 1)
        assert len(args) == {"empty": 0, "args": 2}[kernel.name]
        assert not args or (isinstance(args[0], Buffer) and isinstance(args[1], np.int32))

    return SimpleNamespace(module="fake.core", version="0-fake", new_launch=True, Device=Device, Program=Program,
                           ProgramOptions=lambda arch: arch, LaunchConfig=lambda grid, block: ("config", grid, block),
                           launch=launch, ObjectCode=None)


def fake_bindings() -> SimpleNamespace:
    pinned: list[Any] = []

    def alloc(n: int) -> tuple[int, int]:
        pinned.append(ctypes.create_string_buffer(n))
        return 0, ctypes.addressof(pinned[-1])

    def memcpy(dst: int, src: int, n: int, kind: int) -> tuple[int]:
        assert kind in (1, 2)
        ctypes.memmove(dst, src, n)
        return (0,)

    def launch(*a: Any) -> tuple[int]:
        assert len(a) == 11 and a[9] is not None
        return (0,)

    runtime = SimpleNamespace(cudaMallocHost=alloc, cudaMalloc=alloc, cudaMemcpy=memcpy,
                              cudaFreeHost=lambda p: (0,), cudaFree=lambda p: (0,))
    return SimpleNamespace(cuLaunchKernel=launch, cuStreamCreate=lambda flags: (0, "stream"),
                           cuStreamSynchronize=lambda s: (0,), CUfunction=int, runtime=runtime, H2D=1, D2H=2)


def fake_cupy() -> types.ModuleType:
    cp = types.ModuleType("cupy")

    class Stream:
        def __init__(self, non_blocking: bool = False) -> None:
            self.entered = 0

        def __enter__(self) -> Stream:
            self.entered += 1
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def synchronize(self) -> None:
            pass

    def raw_kernel(code: str, name: str) -> Any:
        def call(grid: tuple[int, ...], block: tuple[int, ...], args: tuple[Any, ...]) -> None:
            assert grid == (1,) and block == (1,) and len(args) == {"empty": 0, "args": 2}[name]
        return call

    cp.__version__ = "0-fake"  # type: ignore[attr-defined]
    cuda = SimpleNamespace(Device=lambda i: SimpleNamespace(use=lambda: None), Stream=Stream, alloc=lambda n: object())
    cp.cuda = cuda  # type: ignore[attr-defined]
    cp.RawKernel = raw_kernel  # type: ignore[attr-defined]
    cp.zeros = lambda n, dtype=None: np.zeros(n, dtype)  # type: ignore[attr-defined]
    cp.int32 = np.int32  # type: ignore[attr-defined]
    return cp


def fake_torch() -> types.ModuleType:
    torch = types.ModuleType("torch")

    class Tensor:
        def __init__(self, n: int) -> None:
            self.data = np.zeros(n, np.uint8)

        def copy_(self, other: Tensor, non_blocking: bool = False) -> Tensor:
            np.copyto(self.data, other.data)
            return self

    def empty(n: int, dtype: Any = None, device: Any = None, pin_memory: bool = False) -> Tensor:
        assert dtype == "uint8"
        return Tensor(n)

    torch.__version__ = "0-fake"  # type: ignore[attr-defined]
    torch.version = SimpleNamespace(cuda="13.0")  # type: ignore[attr-defined]
    torch.uint8 = "uint8"  # type: ignore[attr-defined]
    torch.empty = empty  # type: ignore[attr-defined]
    torch.cuda = SimpleNamespace(is_available=lambda: True, synchronize=lambda: None)  # type: ignore[attr-defined]
    return torch


@pytest.fixture
def fake_device(monkeypatch: pytest.MonkeyPatch) -> FakeDevice:
    dev = FakeDevice()
    backend = SimpleNamespace(driver_version=lambda: 13000)
    monkeypatch.setattr(bench_gpu, "open_cuda_device", lambda: (backend, dev, None))
    monkeypatch.setitem(bench_gpu.ALLOC_SIZES, "quick", [("4 KiB", 4 << 10), ("64 KiB", 64 << 10)])
    monkeypatch.setitem(bench_gpu.COPY_SIZES, "quick", [("64 KiB", 64 << 10), ("128 KiB", 128 << 10)])
    return dev


FAST = ["--quick", "--repeats", "3", "--target-ms", "0.3", "--batch", "4"]


def test_a_whole_run_with_every_reference(fake_device: FakeDevice, monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(bench_gpu, "cuda_core_api", fake_cuda_core)
    monkeypatch.setattr(bench_gpu, "bindings_api", fake_bindings)
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    c_figures = {(d, nb): (50.0, 49.0) for d in ("H2D", "D2H") for nb in (64 << 10, 128 << 10)}
    monkeypatch.setattr(bench_gpu, "c_bandwidth", lambda sizes, reps, timeout: (c_figures, "fake C"))
    out = tmp_path / "figures.json"

    assert bench_gpu.main([*FAST, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "skipped" not in text and "Fake H200" in text
    data = json.loads(out.read_text())
    assert data["status"] == "ok" and data["errors"] == [] and data["skipped"] == []
    launch = data["sections"]["launch"]["rows"]
    assert [r["kernel"] for r in launch] == ["empty()", "args(int *p, int n)"]
    assert [v["key"] for v in launch[0]["variants"]] == ["ours", "ours_u", "ours_obj", "core", "cupy", "raw"]
    assert [v["key"] for v in launch[1]["variants"]][-1] == "raw_t"
    assert all(v["repeats"] == 3 and v["median_s"] > 0 for r in launch for v in r["variants"])
    alloc = data["sections"]["alloc"]["rows"]
    assert [v["key"] for v in alloc[0]["variants"]] == ["ours", "ours_u", "ours_pool", "ours_pool_s", "core", "cupy",
                                                        "torch"]
    copy = data["sections"]["copy"]["rows"]
    assert [(r["direction"], r["nbytes"]) for r in copy] == [("H2D", 64 << 10), ("D2H", 64 << 10),
                                                             ("H2D", 128 << 10), ("D2H", 128 << 10)]
    assert [v["key"] for v in copy[0]["variants"]] == ["ours", "torch", "rt", "ours_rtbuf", "c_event", "c_wall"]
    assert all(r["ours_fraction_of_best"] > 0 for r in copy)
    whats = [t["what"] for t in data["targets"]]
    assert "launch empty(): ours checked / cuda.core" in whats
    assert "launch args(int *p, int n): ours unchecked / cuda.core" in whats
    assert "alloc 64 KiB: ours memory_pool().alloc(n, stream=s) / cuda.core allocate(n, stream=s)" in whats
    assert any(c["what"].startswith("copy D2H 128 KiB: ours GB/s / best reference") for c in data["context"])
    assert fake_device.stream.launches > 0


@pytest.mark.skipif(HAS_LIBCUDA, reason="a CUDA driver is installed: the real references would find it")
def test_a_whole_run_with_every_reference_missing_or_failing(fake_device: FakeDevice, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    # the real modules: cupy / torch absent (or without a GPU), cuda.core / cuda-bindings without a driver,
    # the C program built for real and failing to find a driver
    out = tmp_path / "figures.json"
    assert bench_gpu.main([*FAST, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["status"] == "ok" and data["errors"] == []
    skipped = {s["what"] for s in data["skipped"]}
    assert {"cuda.core", "CuPy", "PyTorch", "C cudaMemcpy program"} <= skipped, skipped
    assert any(w.startswith("cuda-bindings") for w in skipped), skipped
    assert all(s["reason"] for s in data["skipped"])
    assert text.count("skipped: ") >= len(skipped)
    assert data["targets"] == []  # nothing to compare with
    assert [v["key"] for v in data["sections"]["launch"]["rows"][0]["variants"]] == ["ours", "ours_u", "ours_obj"]
    assert [v["key"] for v in data["sections"]["copy"]["rows"][0]["variants"]] == ["ours"]


def test_a_failure_of_ours_is_an_error_not_a_skip(fake_device: FakeDevice, monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def broken(self: FakeStream, launch: Any) -> None:
        raise RuntimeError("launch is broken")

    monkeypatch.setattr(FakeStream, "launch", broken)
    out = tmp_path / "figures.json"
    assert bench_gpu.main([*FAST, "--only", "launch", "--json", str(out)]) == 1
    data = json.loads(out.read_text())
    assert data["status"] == "errors" and "launch is broken" in data["errors"][0]["error"]
    assert "launch is broken" in capsys.readouterr().err


# ----------------------------------------------------------------------------- a whole run over the stub driver


def test_a_whole_run_over_the_stub_driver(tmp_path: Path, stub_cuda: tuple[Path, dict[str, str]]) -> None:
    """Ours, cuda.core and cuda-bindings for real, over bench/stub_cuda (a libcuda.so.1 built from the real
    cuda.h whose functions return at once): every call the benchmark makes into them gets made once here.
    The stub moves no data, so the two checks of ours that read results back are switched off."""
    stub, env = stub_cuda
    out = tmp_path / "figures.json"
    driver = ("import sys; sys.path.insert(0, sys.argv[1]); import bench_gpu; "
              "bench_gpu.verify_ours_launch = bench_gpu.verify_ours_copies = lambda *a: None; "
              "sys.exit(bench_gpu.main(sys.argv[2:]))")
    proc = subprocess.run([sys.executable, "-c", driver, str(BENCH), *FAST, "--json", str(out)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"libcuda mapped: ['{stub}']" in proc.stdout, proc.stdout
    data = json.loads(out.read_text())
    assert data["status"] == "ok" and data["errors"] == [], data["errors"]
    assert data["env"]["binding_mode"]["driver"] in ("api", "abi")
    launch_keys = [v["key"] for v in data["sections"]["launch"]["rows"][1]["variants"]]
    assert launch_keys[:3] == ["ours", "ours_u", "ours_obj"]
    alloc_keys = [v["key"] for v in data["sections"]["alloc"]["rows"][0]["variants"]]
    assert alloc_keys[:3] == ["ours", "ours_u", "ours_pool"]
    assert [v["key"] for v in data["sections"]["copy"]["rows"][0]["variants"]][0] == "ours"
    whats = {t["what"] for t in data["targets"]}
    skipped = {s["what"] for s in data["skipped"]}
    try:
        bench_gpu.cuda_core_api()
        has_core = True
    except ImportError:
        has_core = False
    if has_core:  # cuda.core compiled, loaded and launched both kernels and allocated, over the stub
        assert "core" in launch_keys and "core" in alloc_keys, skipped
        assert "launch args(int *p, int n): ours checked / cuda.core" in whats
        assert any(w.startswith("alloc 64 MiB: ours memory_pool().alloc(n") for w in whats), whats
    try:
        bench_gpu.bindings_api()
        has_bindings = True
    except ImportError:
        has_bindings = False
    if has_bindings:  # cuLaunchKernel both ways: the arguments packed once, and as ((values), (types))
        assert launch_keys[-2:] == ["raw", "raw_t"], skipped
