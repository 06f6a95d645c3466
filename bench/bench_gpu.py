#!/usr/bin/env python
"""The CUDA backend on a real GPU against cuda.core, CuPy, PyTorch, cuda-bindings and C, in one process.

Run from the repository root (after ``generate`` and ``build``), on a machine with an NVIDIA GPU::

    .venv/bin/python bench/bench_gpu.py [--quick] [--repeats N] [--only launch,alloc,copy]
                                        [--json PATH] [--require-device] [--batch N] [--deadline-s S]

Without a CUDA driver or device it prints one line saying so and exits 0 (2 with ``--require-device``).

Sections (every variant of a section is timed once per repeat, in a rotated order; the tables show
the median time per op and ratios, a ratio being the median over repeats of the paired per-repeat
ratio; see bench/_harness.py):

1. launch   ``--batch`` launches back to back, then one stream synchronize; the time per launch.  Two
            kernels: ``empty()`` and ``args(int *p, int n)`` (a pointer and an int: the realistic case).
              ours checked          ``s.launch(KernelLaunch(...))`` (the launch object built once)
              ours unchecked        ``s.launch_unchecked(...)``
              ours per-call object  ``s.launch(KernelLaunch(k, dims, (buf, n)))`` built on every launch
              cuda.core             ``launch(stream, LaunchConfig(grid=1, block=1), kernel, *args)``
              CuPy                  ``RawKernel((1,), (1,), args)`` inside ``with stream:``
              cuda-bindings         ``driver.cuLaunchKernel`` with the ``void *[]`` packed once (the floor),
                                    and with ``((values), (ctypes types))`` packed on every call
2. alloc    alloc + free of device memory: ours ``dev.alloc(n).free()``, ``alloc_unchecked`` +
            ``free_unchecked``, ours ``dev.memory_pool()`` (on CUDA the driver's stream-ordered pool)
            ``.alloc(n)`` and, where it takes a stream, ``.alloc(n, stream=s)``; cuda.core
            ``Device.allocate(n, stream=s)`` + ``Buffer.close(s)`` (its default memory resource: a driver
            memory pool where the device has one); CuPy ``cupy.cuda.alloc(n)`` (its pool) and
            ``torch.empty(n, device="cuda")`` (its caching allocator) for context.
3. copy     pinned host <-> device, each copy followed by a synchronize, in GB/s: ours
            (``dev.alloc(n, MemoryKind.HOST_PINNED)`` viewed as a numpy array, ``copy_from_host`` /
            ``copy_to_host``), PyTorch (``pin_memory=True`` tensor, ``copy_(non_blocking=True)``),
            cuda-bindings' runtime (``cudaMallocHost`` + synchronous ``cudaMemcpy``), ours copying
            from / into the cudart buffer (a control for where the pinned pages landed), and a C
            program compiled here (build/bench/) that times ``cudaMemcpy`` with cudaEvents and the
            wall clock.  In-process variants alternate op by op (bench/_harness.py run_interleaved).

Every reference is optional: one that is missing or fails prints ``skipped: <reason>`` and the rest go on.
Targets (printed with OK / MISS): launch, ours (checked and unchecked) / cuda.core <= 1.0; alloc, ours
``memory_pool().alloc(n, stream=s)`` (``alloc(n)`` if it takes no stream) / cuda.core <= 1.0.  Everything
else (ours / CuPy, ours / the floors, copy bandwidth as a fraction of the best reference) is printed for
context.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import faulthandler
import importlib
import importlib.metadata
import inspect
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BUILD = ROOT / "build" / "bench"
for _p in (str(ROOT / "generated"), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import numpy as np  # noqa: E402

from _harness import Targets, Variant, libs_mapped, ratio, run, run_interleaved, spread, us  # noqa: E402

SECTIONS = ("launch", "alloc", "copy")
PATTERN = ((np.arange(1 << 16, dtype=np.uint32) * 2654435761) >> 24).astype(np.uint8)  # copy contents (64 KiB)

# (label, bytes) per run length; copy sizes are multiples of 64 KiB (the size of PATTERN)
ALLOC_SIZES = {"quick": [("1 MiB", 1 << 20), ("64 MiB", 64 << 20)],
               "full": [("4 KiB", 4 << 10), ("1 MiB", 1 << 20), ("64 MiB", 64 << 20)]}
COPY_SIZES = {"quick": [("64 MiB", 64 << 20), ("256 MiB", 256 << 20)],
              "full": [("4 MiB", 4 << 20), ("64 MiB", 64 << 20), ("256 MiB", 256 << 20)]}

TARGET_LAUNCH = 1.0  # ours time / cuda.core time, per launch
TARGET_POOL = 1.0    # ours memory_pool() alloc+free time / cuda.core allocate+close time

KERNEL_SRC = r"""
extern "C" __global__ void empty() {}
extern "C" __global__ void args(int *p, int n) { (void)p; (void)n; }
extern "C" __global__ void touch(int *p, int v) { p[0] = v; }
"""

# The same kernels as PTX, for when NVRTC cannot be loaded: the driver JIT-compiles it (PTX ISA 7.0 is
# accepted by every driver from CUDA 11.0 on).  ``args`` never dereferences ``p``: whatever a reference
# library passes, the launch cannot fault and poison the context every variant shares.
KERNEL_PTX = r"""
.version 7.0
.target sm_70
.address_size 64

.visible .entry empty()
{
	ret;
}

.visible .entry args(
	.param .u64 args_param_0,
	.param .u32 args_param_1
)
{
	ret;
}

.visible .entry touch(
	.param .u64 touch_param_0,
	.param .u32 touch_param_1
)
{
	.reg .b32 	%r<2>;
	.reg .b64 	%rd<3>;

	ld.param.u64 	%rd1, [touch_param_0];
	ld.param.u32 	%r1, [touch_param_1];
	cvta.to.global.u64 	%rd2, %rd1;
	st.global.u32 	[%rd2], %r1;
	ret;
}
"""

# The C reference for copy bandwidth.  It dlopens libcudart (path in $BENCH_CUDART), so it needs no CUDA
# toolkit to link; with -DBENCH_CUDART_HEADERS the prototypes come from the real cuda_runtime_api.h and
# the function-pointer types are checked against them.
BW_C_SOURCE = r"""
/* Pinned cudaMemcpy bandwidth: the C reference of bench/bench_gpu.py.
 * usage: BENCH_CUDART=/path/libcudart.so.N bench_gpu_bw REPS SIZE...
 * prints per size and direction: "H2D|D2H <bytes> <GB/s by cudaEvents> <GB/s by the wall clock>" (medians). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef BENCH_CUDART_HEADERS
#include <cuda_runtime_api.h>
#else
typedef int cudaError_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUstream_st *cudaStream_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
/* declared only, never referenced: the pointers below take their types from these */
cudaError_t cudaSetDevice(int device);
cudaError_t cudaMalloc(void **devPtr, size_t size);
cudaError_t cudaFree(void *devPtr);
cudaError_t cudaMallocHost(void **ptr, size_t size);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaEventDestroy(cudaEvent_t event);
const char *cudaGetErrorString(cudaError_t error);
#endif

static __typeof__(&cudaSetDevice) p_cudaSetDevice;
static __typeof__(&cudaMalloc) p_cudaMalloc;
static __typeof__(&cudaFree) p_cudaFree;
static __typeof__(&cudaMallocHost) p_cudaMallocHost;
static __typeof__(&cudaFreeHost) p_cudaFreeHost;
static __typeof__(&cudaMemcpy) p_cudaMemcpy;
static __typeof__(&cudaEventCreate) p_cudaEventCreate;
static __typeof__(&cudaEventRecord) p_cudaEventRecord;
static __typeof__(&cudaEventSynchronize) p_cudaEventSynchronize;
static __typeof__(&cudaEventElapsedTime) p_cudaEventElapsedTime;
static __typeof__(&cudaEventDestroy) p_cudaEventDestroy;
static __typeof__(&cudaGetErrorString) p_cudaGetErrorString;

#define LOAD(name)                                                           \
    do {                                                                     \
        *(void **)&p_##name = dlsym(lib, #name);                             \
        if (p_##name == NULL) {                                              \
            fprintf(stderr, "bench_gpu_bw: %s lacks %s\n", path, #name);     \
            return 1;                                                        \
        }                                                                    \
    } while (0)

#define CHECK(call)                                                          \
    do {                                                                     \
        cudaError_t err_ = (call);                                           \
        if (err_ != 0) {                                                     \
            fprintf(stderr, "bench_gpu_bw: %s failed: %d (%s)\n", #call,     \
                    (int)err_, p_cudaGetErrorString(err_));                  \
            return 1;                                                        \
        }                                                                    \
    } while (0)

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    const char *path = getenv("BENCH_CUDART");
    if (argc < 3 || path == NULL) {
        fprintf(stderr, "usage: BENCH_CUDART=/path/libcudart.so.N %s REPS SIZE...\n", argv[0]);
        return 2;
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "bench_gpu_bw: dlopen(%s): %s\n", path, dlerror());
        return 1;
    }
    LOAD(cudaGetErrorString);
    LOAD(cudaSetDevice);
    LOAD(cudaMalloc);
    LOAD(cudaFree);
    LOAD(cudaMallocHost);
    LOAD(cudaFreeHost);
    LOAD(cudaMemcpy);
    LOAD(cudaEventCreate);
    LOAD(cudaEventRecord);
    LOAD(cudaEventSynchronize);
    LOAD(cudaEventElapsedTime);
    LOAD(cudaEventDestroy);

    int reps = atoi(argv[1]);
    if (reps < 1)
        reps = 1;
    double *ev = malloc(sizeof(double) * (size_t)reps), *wall = malloc(sizeof(double) * (size_t)reps);
    if (ev == NULL || wall == NULL)
        return 1;
    CHECK(p_cudaSetDevice(0));
    cudaEvent_t start, stop;
    CHECK(p_cudaEventCreate(&start));
    CHECK(p_cudaEventCreate(&stop));
    for (int a = 2; a < argc; a++) {
        size_t n = (size_t)strtoull(argv[a], NULL, 10);
        void *h = NULL, *d = NULL;
        CHECK(p_cudaMallocHost(&h, n));
        CHECK(p_cudaMalloc(&d, n));
        memset(h, 1, n);
        for (int dir = 0; dir < 2; dir++) {
            enum cudaMemcpyKind kind = dir == 0 ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
            void *dst = dir == 0 ? d : h;
            const void *src = dir == 0 ? h : d;
            for (int w = 0; w < 2; w++) /* warm up */
                CHECK(p_cudaMemcpy(dst, src, n, kind));
            for (int r = 0; r < reps; r++) {
                float ms = 0;
                double t0 = now_s();
                CHECK(p_cudaEventRecord(start, (cudaStream_t)0));
                CHECK(p_cudaMemcpy(dst, src, n, kind));
                CHECK(p_cudaEventRecord(stop, (cudaStream_t)0));
                CHECK(p_cudaEventSynchronize(stop));
                double t1 = now_s();
                CHECK(p_cudaEventElapsedTime(&ms, start, stop));
                ev[r] = (double)n / (ms * 1e-3) / 1e9;
                wall[r] = (double)n / (t1 - t0) / 1e9;
            }
            printf("%s %zu %.3f %.3f\n", dir == 0 ? "H2D" : "D2H", n, median(ev, reps), median(wall, reps));
            fflush(stdout);
        }
        CHECK(p_cudaFree(d));
        CHECK(p_cudaFreeHost(h));
    }
    CHECK(p_cudaEventDestroy(start));
    CHECK(p_cudaEventDestroy(stop));
    return 0;
}
"""


# ----------------------------------------------------------------------------- options


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="shorter samples, fewer sizes, 15 repeats (well under a minute on an idle GPU)")
    ap.add_argument("--repeats", type=int, default=None, help="repeats per variant (default 31, --quick 15)")
    ap.add_argument("--target-ms", type=float, default=None, help="duration of one sample (default 20, --quick 5)")
    ap.add_argument("--batch", type=int, default=256, help="launches per synchronize in the launch section")
    ap.add_argument("--only", action="append", default=None, metavar="SECTION",
                    help="launch, alloc or copy; repeatable or a comma list (default: all)")
    ap.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the figures as JSON")
    ap.add_argument("--require-device", action="store_true",
                    help="exit 2 (not 0) when there is no CUDA driver or device")
    ap.add_argument("--deadline-s", type=float, default=None,
                    help="dump the stacks and exit 1 after this long, whatever is running (default 150, "
                         "--quick 120); sections that would start too close to it are skipped")
    args = ap.parse_args(argv)
    only: list[str] = []
    for item in args.only or list(SECTIONS):
        for name in item.split(","):
            name = name.strip().lower()
            if not name:
                continue
            if name not in SECTIONS:
                ap.error(f"--only: unknown section {name!r} (choose from {', '.join(SECTIONS)})")
            if name not in only:
                only.append(name)
    if not only:
        ap.error("--only: no section named")
    args.only = only
    if args.repeats is not None and args.repeats < 3:
        ap.error("--repeats: at least 3")
    if args.batch < 1:
        ap.error("--batch: at least 1")
    args.repeats = args.repeats or (15 if args.quick else 31)
    args.target_s = (args.target_ms or (5.0 if args.quick else 20.0)) / 1e3
    args.deadline_s = args.deadline_s or (120.0 if args.quick else 900.0)
    return args


# ----------------------------------------------------------------------------- the report


def one_line(e: BaseException | str, limit: int = 400) -> str:
    text = e if isinstance(e, str) else f"{type(e).__name__}: {e}"
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Report:
    """What the run found, printed as it goes and written as JSON (after every section, so a run cut short
    still leaves its figures)."""

    def __init__(self, json_path: Path | None) -> None:
        self.json_path = json_path
        self.data: dict[str, Any] = {"status": "running", "env": {}, "sections": {}, "skipped": [], "errors": [],
                                     "notes": []}

    def skip(self, what: str, reason: BaseException | str) -> None:
        print(f"  skipped: {what}: {one_line(reason)}")
        self.data["skipped"].append({"what": what, "reason": one_line(reason, 2000)})

    def error(self, what: str, exc: BaseException | str) -> None:
        """A failure of ours (not of a reference): the run's exit status becomes 1."""
        print(f"  ERROR: {what}: {one_line(exc)}", file=sys.stderr)
        if isinstance(exc, BaseException):
            traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
        self.data["errors"].append({"what": what, "error": one_line(exc, 4000)})

    def note(self, text: str) -> None:
        print(f"  note: {text}")
        self.data["notes"].append(text)

    def section(self, name: str) -> dict[str, Any]:
        sections: dict[str, dict[str, Any]] = self.data["sections"]
        return sections.setdefault(name, {"rows": []})

    def write(self, targets: Targets | None = None) -> None:
        if targets is not None:
            self.data.update(targets.as_json())
        if self.json_path is None:
            return
        try:
            self.json_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.json_path.with_name(self.json_path.name + ".tmp")
            tmp.write_text(json.dumps(self.data, indent=1, default=str) + "\n")
            tmp.replace(self.json_path)
        except OSError as e:
            print(f"warning: cannot write {self.json_path}: {e}", file=sys.stderr)


def row_json(v: Variant, **ratios: float | None) -> dict[str, Any]:
    return {"key": v.key, "label": v.label, "median_s": v.median, "iqr_pct": spread(v), "repeats": len(v.samples),
            "nbytes": v.nbytes or None, "ops_per_sample": v.n * v.ops_per_call,
            **{k: r for k, r in ratios.items() if r is not None}}


def attempt(report: Report, what: str, fn: Callable[[], Any]) -> Any:
    """``fn()``, or None after printing ``skipped: <what>: <why>``: every reference is optional."""
    try:
        return fn()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # a reference can fail in any way (ImportError, its own errors, RuntimeError)
        report.skip(what, e)
        return None


def usable(report: Report, variants: list[Variant]) -> list[Variant]:
    """The variants whose body runs once without raising (ours failing is an error; a reference, a skip)."""
    ok = []
    for v in variants:
        try:
            v.body(1)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:
            if v.key.startswith("ours"):
                report.error(v.label, e)
            else:
                report.skip(v.label, e)
            continue
        ok.append(v)
    return ok


def safe_ratio(a: Variant | None, b: Variant | None) -> float | None:
    return ratio(a, b) if a is not None and b is not None and a.samples and b.samples else None


def fmt_ratio(x: float | None, width: int) -> str:
    return f"{x:{width}.3f}" if x is not None else f"{'-':>{width}}"


# ----------------------------------------------------------------------------- environment


DISTRIBUTIONS = {
    "cuda-core": ("cuda-core", "cuda_core"),
    "cuda-bindings": ("cuda-bindings", "cuda_bindings", "cuda-python"),
    "cupy": ("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x"),
    "torch": ("torch",),
    "numpy": ("numpy",),
}


def dist_versions() -> dict[str, str | None]:
    """Installed versions of the reference libraries (from their metadata: nothing is imported)."""
    out: dict[str, str | None] = {}
    for name, dists in DISTRIBUTIONS.items():
        out[name] = None
        for d in dists:
            try:
                out[name] = f"{importlib.metadata.version(d)}" + ("" if d == name else f" ({d})")
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return out


def open_cuda_device() -> tuple[Any, Any, Any]:
    """(backend, device 0, None), or (None, None, the Error saying why there is none)."""
    import ironaccelerator as ia

    try:
        backend = ia.BackendRegistry.default().get(ia.BackendKind.CUDA)
        return backend, backend.open(0), None
    except ia.Error as e:
        return None, None, e


NO_DEVICE_KINDS = ("LIBRARY_NOT_FOUND", "NO_DEVICE")


def print_env(report: Report, backend: Any, dev: Any) -> None:
    from ironaccelerator.backends.cuda import driver, nvrtc

    d = dev.descriptor
    try:
        v = backend.driver_version()
        drv = f"{v // 1000}.{v % 1000 // 10} ({v})"
    except Exception as e:  # noqa: BLE001 - context only
        drv = f"? ({one_line(e)})"
    versions = dist_versions()
    env = {"gpu": d.name, "compute_capability": dev.arch, "total_memory": d.total_memory,
           "compute_units": d.compute_units, "driver": drv, "python": platform.python_version(),
           "binding_mode": {"driver": driver.BINDING_MODE, "nvrtc": nvrtc.BINDING_MODE}, "versions": versions,
           "cpus": os.cpu_count(), "host": platform.node()}
    report.data["env"] = env
    print(f"device: {d.name}, compute capability {dev.arch}, {d.total_memory / 2**30:.1f} GiB, "
          f"{d.compute_units} SMs; CUDA driver {drv}")
    print(f"python {env['python']}, cpus={env['cpus']}, "
          + ", ".join(f"{k} {v or '(not installed)'}" for k, v in versions.items()))
    print(f"ironaccelerator: cuda.driver BINDING_MODE={driver.BINDING_MODE!r}, "
          f"cuda.nvrtc BINDING_MODE={nvrtc.BINDING_MODE!r}")
    if driver.BINDING_MODE != "api":
        msg = ("WARNING: the CUDA driver binding is not in API mode (no compiled cffi module): every figure of "
               "ours below measures the ABI fallback; run `python -m ironaccelerator_gen build`")
        print("!" * 100 + "\n" + msg + "\n" + "!" * 100, file=sys.stderr)
        report.data["notes"].append(msg)
    print(f"libcuda mapped: {sorted(libs_mapped('libcuda.so'))}")


# ----------------------------------------------------------------------------- reference libraries


def cuda_core_api() -> SimpleNamespace:
    """The cuda.core names this benchmark uses: top-level in 1.x (and late 0.x), under
    ``cuda.core.experimental`` in 0.x.  ``new_launch``: ``launch(stream, config, kernel, *args)`` (0.1.1
    on) rather than 0.1.0's ``launch(kernel, config, *args)`` with the stream in the LaunchConfig."""
    errors = []
    for modname in ("cuda.core", "cuda.core.experimental"):
        try:
            m = importlib.import_module(modname)
            api = SimpleNamespace(module=modname, Device=m.Device, LaunchConfig=m.LaunchConfig, Program=m.Program,
                                  ProgramOptions=getattr(m, "ProgramOptions", None), launch=m.launch,
                                  ObjectCode=getattr(m, "ObjectCode", None))
        except (ImportError, AttributeError) as e:
            errors.append(f"{modname}: {one_line(e)}")
            continue
        fields = getattr(api.LaunchConfig, "__dataclass_fields__", None) or {}
        api.new_launch = "stream" not in fields
        try:
            api.version = importlib.import_module("cuda.core").__version__
        except (ImportError, AttributeError):
            api.version = dist_versions()["cuda-core"] or "?"
        return api
    raise ImportError("; ".join(errors))


def cuda_core_compile(api: SimpleNamespace, source: str, arch: str) -> Any:
    """``Program(source, "c++", ProgramOptions(arch="sm_XY")).compile("cubin")`` -> ObjectCode (needs
    NVRTC, not a device).  ``arch``: the compute capability, ex. ``"9.0"``."""
    sm = "sm_" + arch.replace(".", "")
    if api.ProgramOptions is not None:
        return api.Program(source, code_type="c++", options=api.ProgramOptions(arch=sm)).compile("cubin")
    return api.Program(source, "c++").compile("cubin")  # 0.1.0: no options class; the current device's arch


def bindings_api() -> SimpleNamespace:
    """cuda-bindings' driver and runtime modules (``cuda.bindings.*`` from 12.6 on, ``cuda.cuda`` /
    ``cuda.cudart`` before) and the functions this benchmark calls, looked up now so a missing name fails
    at set-up, not mid-measurement."""
    try:
        from cuda.bindings import driver, runtime
    except ImportError:
        from cuda import cuda as driver, cudart as runtime
    ns = SimpleNamespace(driver=driver, runtime=runtime)
    for mod, names in ((driver, ("cuLaunchKernel", "cuStreamCreate", "cuStreamSynchronize", "cuStreamDestroy",
                                 "CUfunction", "CUstream")),
                       (runtime, ("cudaMallocHost", "cudaFreeHost", "cudaMalloc", "cudaFree", "cudaMemcpy",
                                  "cudaMemcpyKind"))):
        for n in names:
            setattr(ns, n, getattr(mod, n))
    ns.H2D = runtime.cudaMemcpyKind.cudaMemcpyHostToDevice
    ns.D2H = runtime.cudaMemcpyKind.cudaMemcpyDeviceToHost
    return ns


def import_cupy() -> Any:
    """CuPy on device 0, its kernel cache under build/bench/ (the default, ~/.cupy, may not be writable)."""
    os.environ.setdefault("CUPY_CACHE_DIR", str(BUILD / "cupy-cache"))
    import cupy as cp

    cp.cuda.Device(0).use()
    return cp


def check_cu(result: Any, what: str) -> Any:
    """cuda-bindings returns ``(status, *values)``: raise on a non-zero status, else the value(s)."""
    status, *values = result if isinstance(result, tuple) else (result,)
    if int(status) != 0:
        raise RuntimeError(f"{what} returned {status!r}")
    return values[0] if len(values) == 1 else tuple(values) if values else None


def pack_raw_params(values_and_types: list[tuple[int, Any]]) -> tuple[int, Any]:
    """A ``void *[]`` of pointers to ctypes values, as cuLaunchKernel's ``kernelParams`` (an address):
    (address or 0 when there are no arguments, what must stay alive while it is used)."""
    if not values_and_types:
        return 0, None
    holders = [ctype(value) for value, ctype in values_and_types]
    array = (ctypes.c_void_p * len(holders))(*[ctypes.addressof(h) for h in holders])
    return ctypes.addressof(array), (holders, array)


def pinned_view(address: int, nbytes: int) -> np.ndarray:
    """A writable uint8 numpy array over ``nbytes`` of host memory at ``address`` (no copy)."""
    return np.ctypeslib.as_array((ctypes.c_ubyte * nbytes).from_address(address))


def address_of(dev: Any, handle: Any) -> int:
    """An int address from one of our cffi handles (CUfunction, CUstream)."""
    return handle if isinstance(handle, int) else int(dev.api.ffi.cast("uintptr_t", handle))


# ----------------------------------------------------------------------------- the C bandwidth program


def _site_dirs() -> list[Path]:
    import site

    dirs = [Path(p) for p in sys.path if p and p.endswith("-packages")]
    try:
        dirs += [Path(p) for p in site.getsitepackages()]
    except AttributeError:
        pass
    seen: list[Path] = []
    for d in dirs:
        if d.is_dir() and d not in seen:
            seen.append(d)
    return seen


def cuda_roots() -> list[Path]:
    roots = [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    roots += [Path("/usr/local/cuda")] + sorted(Path("/usr/local").glob("cuda-*"), reverse=True)
    return [r for r in roots if r.is_dir()]


def find_cuda_include() -> Path | None:
    """A directory holding ``cuda_runtime_api.h``: the toolkit's, else a pip wheel's (nvidia/*/include)."""
    cands = [r / "include" for r in cuda_roots()]
    for site_dir in _site_dirs():
        cands += sorted(site_dir.glob("nvidia/*/include"))
    return next((c for c in cands if (c / "cuda_runtime_api.h").is_file()), None)


def find_cudart() -> str | None:
    """A loadable libcudart: cuda-pathfinder's answer, else the toolkit's, a pip wheel's, the loader's."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        path = load_nvidia_dynamic_lib("cudart").abs_path
        if path and Path(path).is_file():
            return str(path)
    except Exception:  # noqa: BLE001 - any failure: look elsewhere
        pass
    cands: list[Path] = []
    for r in cuda_roots():
        for sub in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
            cands += sorted((r / sub).glob("libcudart.so*"), reverse=True)
    for site_dir in _site_dirs():
        cands += sorted(site_dir.glob("nvidia/*/lib/libcudart.so*"), reverse=True)
    for c in cands:
        if c.is_file() and not c.name.endswith(".a"):
            return str(c)
    found = ctypes.util.find_library("cudart")
    return found


def find_c_compiler() -> str | None:
    for cc in (os.environ.get("CC"), "gcc", "cc", "clang", "nvcc"):
        if cc and shutil.which(cc):
            return shutil.which(cc)
    return None


def build_bw_program(out_dir: Path, include: Path | None, compiler: str | None = None,
                     timeout: float = 60.0) -> Path:
    """Compile BW_C_SOURCE into ``out_dir`` (with the real header's prototypes when ``include`` is given);
    raise RuntimeError with the compiler's output if it fails."""
    compiler = compiler or find_c_compiler()
    if compiler is None:
        raise RuntimeError("no C compiler (gcc, cc, clang or nvcc) on PATH")
    out_dir.mkdir(parents=True, exist_ok=True)
    src = out_dir / "bench_gpu_bw.c"
    if not src.is_file() or src.read_text() != BW_C_SOURCE:
        src.write_text(BW_C_SOURCE)
    exe = out_dir / ("bench_gpu_bw_hdr" if include is not None else "bench_gpu_bw")
    flags = ["-O2", "-o", str(exe), str(src), "-ldl"]
    if include is not None:
        flags = ["-DBENCH_CUDART_HEADERS", f"-I{include}"] + flags
    if Path(compiler).name != "nvcc":
        flags = ["-std=gnu11", "-Wall", "-Werror"] + flags
    proc = subprocess.run([compiler, *flags], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not exe.is_file():
        output = one_line(proc.stderr + proc.stdout, 1500)
        raise RuntimeError(f"{Path(compiler).name} failed ({proc.returncode}): {output}")
    return exe


def parse_bw_output(text: str) -> dict[tuple[str, int], tuple[float, float]]:
    """``H2D 67108864 52.1 51.8`` lines -> {("H2D", 67108864): (event GB/s, wall GB/s)}."""
    out: dict[tuple[str, int], tuple[float, float]] = {}
    for line in text.splitlines():
        m = re.fullmatch(r"\s*(H2D|D2H)\s+(\d+)\s+([0-9.eE+-]+)\s+([0-9.eE+-]+)\s*", line)
        if m:
            out[(m[1], int(m[2]))] = (float(m[3]), float(m[4]))
    return out


def c_bandwidth(sizes: list[int], reps: int, timeout: float) -> tuple[dict[tuple[str, int], tuple[float, float]], str]:
    """Build and run the C program: ({(direction, bytes): (event GB/s, wall GB/s)}, how it was built)."""
    cudart = find_cudart()
    if cudart is None:
        raise RuntimeError("no libcudart found (cuda-pathfinder, CUDA_HOME, /usr/local/cuda*, pip nvidia-*, loader)")
    include = find_cuda_include()
    exe, how = None, ""
    if include is not None:
        try:
            exe, how = build_bw_program(BUILD, include), f"prototypes from {include}/cuda_runtime_api.h"
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            how = f"(with {include}: {one_line(e, 200)}) "
    if exe is None:
        exe = build_bw_program(BUILD, None)
        how += "own prototypes (no CUDA headers needed)"
    env = dict(os.environ, BENCH_CUDART=cudart)
    proc = subprocess.run([str(exe), str(reps), *map(str, sizes)], capture_output=True, text=True, timeout=timeout,
                          env=env)
    result = parse_bw_output(proc.stdout)
    if proc.returncode != 0 or not result:
        raise RuntimeError(f"{exe.name} exited {proc.returncode}: {one_line(proc.stderr or proc.stdout, 1500)}")
    return result, f"{exe.name} ({how}), {cudart}"


# ----------------------------------------------------------------------------- 1. launch


def load_ours_module(report: Report, dev: Any) -> Any:
    import ironaccelerator as ia

    try:
        return dev.load_module(KERNEL_SRC)
    except ia.Error as e:
        report.note(f"ours: load_module(CUDA C) failed ({e.kind.name}: {one_line(str(e), 300)}); "
                    "using the hand-written PTX instead")
        return dev.load_module(KERNEL_PTX)


def verify_ours_launch(s: Any, touch: Any, buf: Any) -> None:
    """Ours launches correctly, checked and unchecked (the timed kernels write nothing; ``touch`` writes its
    int argument to its pointer argument)."""
    import ironaccelerator as ia

    for launch_fn, value in ((s.launch, 7), (s.launch_unchecked, 8)):
        r = launch_fn(ia.KernelLaunch(touch, ia.LaunchDims(1, 1), (buf, np.int32(value))))
        if isinstance(r, ia.Error):
            raise r
        s.synchronize()
        out = np.zeros(1, np.int32)
        s.copy_to_host(out, buf)
        s.synchronize()
        if int(out[0]) != value:
            raise RuntimeError(f"ours: the touch kernel wrote {int(out[0])}, expected {value}")


def verify_ours_copies(s: Any, dev_buf: Any, host: np.ndarray) -> None:
    """A round trip host -> device -> another host buffer gives back ``host``."""
    s.copy_from_host(dev_buf, host)
    s.synchronize()
    check = np.zeros(host.nbytes, np.uint8)
    s.copy_to_host(check, dev_buf)
    s.synchronize()
    if not np.array_equal(check, host):
        raise RuntimeError(f"ours: a {host.nbytes}-byte round trip through device memory changed the data")


def section_launch(ctx: SimpleNamespace, args: argparse.Namespace, report: Report, targets: Targets) -> None:
    import ironaccelerator as ia

    dev, s, B = ctx.dev, ctx.stream, args.batch
    print(f"\n== 1. launch: {B} launches back to back, then one stream synchronize; time per launch")
    mod = load_ours_module(report, dev)
    kernels = {name: mod.kernel(name) for name in ("empty", "args", "touch")}
    buf = dev.alloc(4096)
    verify_ours_launch(s, kernels["touch"], buf)
    n_arg = np.int32(1)
    dims = ia.LaunchDims(1, 1)

    # -- references (each optional)
    def setup_core() -> SimpleNamespace:
        api = cuda_core_api()
        cdev = api.Device(0)
        cdev.set_current()
        stream = cdev.create_stream()
        try:
            obj = cuda_core_compile(api, KERNEL_SRC, dev.arch)
        except Exception as e:  # noqa: BLE001 - NVRTC missing for cuda.core: the PTX, if it can load that
            from_ptx = getattr(api.ObjectCode, "from_ptx", None)
            if from_ptx is None:
                raise
            report.note(f"cuda.core: Program.compile failed ({one_line(e, 200)}); using the hand-written PTX")
            obj = from_ptx(KERNEL_PTX)
        ks = {name: obj.get_kernel(name) for name in ("empty", "args")}
        cbuf = cdev.allocate(4096, stream=stream)
        if api.new_launch:
            config = api.LaunchConfig(grid=1, block=1)
        else:
            config = api.LaunchConfig(grid=1, block=1, stream=stream)
        style = "stream, config, kernel" if api.new_launch else "kernel, config"
        print(f"  cuda.core {api.version} ({api.module}; launch({style}, *args))")
        return SimpleNamespace(api=api, dev=cdev, stream=stream, kernels=ks, buf=cbuf, config=config)

    def setup_cupy() -> SimpleNamespace:
        cp = import_cupy()
        ks = {name: cp.RawKernel(KERNEL_SRC, name) for name in ("empty", "args")}
        stream = cp.cuda.Stream(non_blocking=True)
        arr = cp.zeros(1024, dtype=cp.int32)
        print(f"  cupy {cp.__version__}")
        return SimpleNamespace(cp=cp, kernels=ks, stream=stream, arr=arr)

    def setup_raw() -> SimpleNamespace:
        b = bindings_api()
        stream = check_cu(b.cuStreamCreate(1), "cuStreamCreate")  # CU_STREAM_NON_BLOCKING, as ours
        fns = {name: b.CUfunction(address_of(dev, kernels[name].handle)) for name in ("empty", "args")}
        return SimpleNamespace(b=b, stream=stream, fns=fns)

    core = attempt(report, "cuda.core", setup_core)
    cupy = attempt(report, "CuPy", setup_cupy)
    raw = attempt(report, "cuda-bindings cuLaunchKernel", setup_raw)

    def batched(enqueue: Callable[[int], None], sync: Callable[[], Any]) -> Callable[[int], None]:
        def body(n: int) -> None:
            for _ in range(n):
                enqueue(B)
                sync()
        return body

    section = report.section("launch")
    section.update(batch=B)
    for kname, label in (("empty", "empty()"), ("args", "args(int *p, int n)")):
        k = kernels[kname]
        kargs: tuple[Any, ...] = () if kname == "empty" else (buf, n_arg)
        launch = ia.KernelLaunch(k, dims, kargs)
        variants: list[Variant] = []

        def ours(m: int, launch: Any = launch) -> None:
            f = s.launch
            for _ in range(m):
                f(launch)

        def ours_u(m: int, launch: Any = launch) -> None:
            f = s.launch_unchecked
            for _ in range(m):
                f(launch)

        def ours_obj(m: int, k: Any = k, kargs: tuple[Any, ...] = kargs) -> None:
            f, KL = s.launch, ia.KernelLaunch
            for _ in range(m):
                f(KL(k, dims, kargs))

        variants += [Variant("ours", "ours launch", batched(ours, s.synchronize), B),
                     Variant("ours_u", "ours launch_unchecked", batched(ours_u, s.synchronize), B),
                     Variant("ours_obj", "ours launch, KernelLaunch built per launch", batched(ours_obj, s.synchronize),
                             B)]
        if core is not None:
            variants.append(Variant("core", "cuda.core launch", batched(core_enqueue(core, kname, n_arg),
                                                                        core.stream.sync), B))
        if cupy is not None:
            pk, pstream = cupy.kernels[kname], cupy.stream
            pargs: tuple[Any, ...] = () if kname == "empty" else (cupy.arr, n_arg)
            g1, b1 = (1,), (1,)

            def cupy_enq(m: int, pk: Any = pk, pargs: tuple[Any, ...] = pargs) -> None:
                with pstream:
                    for _ in range(m):
                        pk(g1, b1, pargs)

            variants.append(Variant("cupy", "CuPy RawKernel", batched(cupy_enq, pstream.synchronize), B))
        if raw is not None:
            rb, rf, rs = raw.b, raw.fns[kname], raw.stream
            address, keep = pack_raw_params([] if kname == "empty" else [(buf.ptr, ctypes.c_uint64),
                                                                         (1, ctypes.c_int)])

            def raw_enq(m: int, rf: Any = rf, address: int = address, keep: Any = keep) -> None:
                f = rb.cuLaunchKernel
                for _ in range(m):
                    f(rf, 1, 1, 1, 1, 1, 1, 0, rs, address, 0)

            def raw_sync() -> None:
                rb.cuStreamSynchronize(rs)

            def raw_check(params: Any, rf: Any = rf) -> bool:  # the timed loops ignore the statuses: check once
                check_cu(rb.cuLaunchKernel(rf, 1, 1, 1, 1, 1, 1, 0, rs, params, 0), "cuLaunchKernel")
                check_cu(rb.cuStreamSynchronize(rs), "cuStreamSynchronize")
                return True

            if attempt(report, f"cuda-bindings cuLaunchKernel, void*[] packed once ({label})",
                       lambda: raw_check(address)):
                variants.append(Variant("raw", "cuda-bindings cuLaunchKernel, void*[] packed once (floor)",
                                        batched(raw_enq, raw_sync), B))
            if kname == "args":
                packed = ((buf.ptr, 1), (ctypes.c_void_p, ctypes.c_int))

                def raw_tuple(m: int, rf: Any = rf) -> None:
                    f = rb.cuLaunchKernel
                    for _ in range(m):
                        f(rf, 1, 1, 1, 1, 1, 1, 0, rs, packed, 0)

                if attempt(report, f"cuda-bindings cuLaunchKernel, ((values), (types)) ({label})",
                           lambda: raw_check(packed)):
                    variants.append(Variant("raw_t", "cuda-bindings cuLaunchKernel, ((values), (types)) per call",
                                            batched(raw_tuple, raw_sync), B))
        variants = usable(report, variants)
        if not any(v.key == "ours" for v in variants):
            report.error(f"launch {label}", "ours launch failed: nothing to compare")
            continue
        run(variants, args.repeats, args.target_s)
        report_launch(report, targets, label, {v.key: v for v in variants})


def core_enqueue(core: SimpleNamespace, kname: str, n_arg: Any) -> Callable[[int], None]:
    """``m`` cuda.core launches of kernel ``kname`` (the arguments spelled out, as a user would write them)."""
    ck, cs, cfg, L, cb = core.kernels[kname], core.stream, core.config, core.api.launch, core.buf
    if not core.api.new_launch:  # 0.1.0: launch(kernel, config, *args), the stream in the config
        cargs: tuple[Any, ...] = () if kname == "empty" else (cb, n_arg)

        def old(m: int) -> None:
            for _ in range(m):
                L(ck, cfg, *cargs)
        return old
    if kname == "empty":
        def empty(m: int) -> None:
            for _ in range(m):
                L(cs, cfg, ck)
        return empty

    def with_args(m: int) -> None:
        for _ in range(m):
            L(cs, cfg, ck, cb, n_arg)
    return with_args


def report_launch(report: Report, targets: Targets, label: str, v: dict[str, Variant]) -> None:
    """Print one kernel's launch table and add its targets (references may be missing)."""
    core, cupy, raw = v.get("core"), v.get("cupy"), v.get("raw")
    print(f"\n  {label}")
    print(f"  {'variant':<58} {'median us':>9}  {'IQR%':>5}  {'/ cuda.core':>11}  {'/ CuPy':>7}  {'/ floor':>7}")
    rows = []
    for x in v.values():
        rc, rp, rr = safe_ratio(x, core), safe_ratio(x, cupy), safe_ratio(x, raw)
        print(f"  {x.label:<58} {us(x.median)}  {spread(x):5.1f}  {fmt_ratio(rc, 11)}  {fmt_ratio(rp, 7)}  "
              f"{fmt_ratio(rr, 7)}")
        rows.append(row_json(x, per_cuda_core=rc, per_cupy=rp, per_floor=rr))
    report.section("launch")["rows"].append({"kernel": label, "variants": rows})
    for key, who in (("ours", "checked"), ("ours_u", "unchecked")):
        r = safe_ratio(v.get(key), core)
        if r is not None:
            targets.add(f"launch {label}: ours {who} / cuda.core", r, "<=", TARGET_LAUNCH)
    for key, who in (("ours", "checked"), ("ours_u", "unchecked")):
        r = safe_ratio(v.get(key), cupy)
        if r is not None:
            targets.note(f"launch {label}: ours {who} / CuPy RawKernel", r)
    r = safe_ratio(v.get("ours"), raw)
    if r is not None:
        targets.note(f"launch {label}: ours checked / cuda-bindings floor", r)


# ----------------------------------------------------------------------------- 2. alloc


def section_alloc(ctx: SimpleNamespace, args: argparse.Namespace, report: Report, targets: Targets) -> None:
    dev = ctx.dev
    sizes = ALLOC_SIZES["quick" if args.quick else "full"]
    print("\n== 2. alloc + free of device memory, per pair")
    pool = dev.memory_pool()
    pool_name = type(pool).__name__
    try:
        pool_takes_stream = "stream" in inspect.signature(pool.alloc).parameters
    except (TypeError, ValueError):
        pool_takes_stream = False
    print(f"  ours: Device.memory_pool() is a {pool_name}" + (" (alloc(n, stream=s): stream-ordered)"
                                                              if pool_takes_stream else ""))
    report.section("alloc").update(pool=pool_name, pool_takes_stream=pool_takes_stream)

    def setup_core() -> SimpleNamespace:
        api = cuda_core_api()
        cdev = api.Device(0)
        cdev.set_current()
        stream = cdev.create_stream()
        mr = getattr(cdev, "memory_resource", None)
        print(f"  cuda.core {api.version}: memory resource {type(mr).__name__ if mr is not None else '?'}")
        return SimpleNamespace(dev=cdev, stream=stream)

    def setup_cupy() -> Any:
        return import_cupy()

    def setup_torch() -> Any:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError(f"torch {torch.__version__}: torch.cuda.is_available() is False")
        return torch

    core = attempt(report, "cuda.core", setup_core)
    cp = attempt(report, "CuPy", setup_cupy)
    torch = attempt(report, "PyTorch", setup_torch)
    section = report.section("alloc")
    for label, nb in sizes:
        def o_alloc(n: int, nb: int = nb) -> None:
            alloc = dev.alloc
            for _ in range(n):
                alloc(nb).free()

        def o_unchecked(n: int, nb: int = nb) -> None:
            alloc = dev.alloc_unchecked
            for _ in range(n):
                alloc(nb).free_unchecked()

        def o_pool(n: int, nb: int = nb) -> None:
            alloc = pool.alloc
            for _ in range(n):
                alloc(nb).free()

        def o_pool_s(n: int, nb: int = nb) -> None:
            alloc, s = pool.alloc, ctx.stream
            for _ in range(n):
                alloc(nb, stream=s).free()

        variants = [Variant("ours", f"ours dev.alloc + free {label}", o_alloc),
                    Variant("ours_u", f"ours alloc_unchecked + free_unchecked {label}", o_unchecked),
                    Variant("ours_pool", f"ours {pool_name}.alloc(n) + free {label}", o_pool)]
        if pool_takes_stream:
            variants.append(Variant("ours_pool_s", f"ours {pool_name}.alloc(n, stream=s) + free {label}",
                                    o_pool_s))
        if core is not None:
            def c_alloc(n: int, nb: int = nb) -> None:
                alloc, cs = core.dev.allocate, core.stream
                for _ in range(n):
                    alloc(nb, stream=cs).close(cs)

            variants.append(Variant("core", f"cuda.core Device.allocate + Buffer.close {label}", c_alloc))
        if cp is not None:
            def p_alloc(n: int, nb: int = nb) -> None:
                alloc = cp.cuda.alloc
                for _ in range(n):
                    alloc(nb)  # dropped at once: back to CuPy's pool

            variants.append(Variant("cupy", f"CuPy cupy.cuda.alloc (its pool) {label}", p_alloc))
        if torch is not None:
            def t_alloc(n: int, nb: int = nb) -> None:
                empty, u8 = torch.empty, torch.uint8
                for _ in range(n):
                    empty(nb, dtype=u8, device="cuda")  # dropped at once: back to the caching allocator

            variants.append(Variant("torch", f"torch.empty(device='cuda') (caching allocator) {label}", t_alloc))
        variants = usable(report, variants)
        if not variants:
            continue
        run(variants, args.repeats, args.target_s)
        report_alloc(report, targets, label, {v.key: v for v in variants})
        section.setdefault("sizes", []).append(nb)


def report_alloc(report: Report, targets: Targets, label: str, v: dict[str, Variant]) -> None:
    core = v.get("core")
    print(f"  {'variant':<62} {'median us':>9}  {'IQR%':>5}  {'/ cuda.core':>11}")
    rows = []
    for x in v.values():
        rc = safe_ratio(x, core)
        print(f"  {x.label:<62} {us(x.median)}  {spread(x):5.1f}  {fmt_ratio(rc, 11)}")
        rows.append(row_json(x, per_cuda_core=rc))
    report.section("alloc")["rows"].append({"size": label, "variants": rows})
    # the like-for-like pair: a stream-ordered alloc + free on both sides, where ours has one
    pool_key = "ours_pool_s" if "ours_pool_s" in v else "ours_pool"
    pool_what = "ours memory_pool().alloc(n, stream=s)" if pool_key == "ours_pool_s" else "ours memory_pool().alloc(n)"
    r = safe_ratio(v.get(pool_key), core)
    if r is not None:
        targets.add(f"alloc {label}: {pool_what} / cuda.core allocate(n, stream=s)", r, "<=", TARGET_POOL)
    if pool_key == "ours_pool_s":
        r = safe_ratio(v.get("ours_pool"), core)
        if r is not None:
            targets.note(f"alloc {label}: ours memory_pool().alloc(n) (waits for its stream) / cuda.core", r)
    r = safe_ratio(v.get("ours"), core)
    if r is not None:
        targets.note(f"alloc {label}: ours dev.alloc (cuMemAlloc/cuMemFree) / cuda.core allocate", r)
    for key, name in (("cupy", "CuPy pool"), ("torch", "torch caching allocator")):
        r = safe_ratio(v.get(pool_key), v.get(key))
        if r is not None:
            targets.note(f"alloc {label}: {pool_what} / {name}", r)


# ----------------------------------------------------------------------------- 3. copy


def section_copy(ctx: SimpleNamespace, args: argparse.Namespace, report: Report, targets: Targets) -> None:
    import ironaccelerator as ia

    dev, s = ctx.dev, ctx.stream
    sizes = COPY_SIZES["quick" if args.quick else "full"]
    print("\n== 3. pinned host <-> device copies, each followed by a synchronize")

    def setup_torch() -> Any:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError(f"torch {torch.__version__}: torch.cuda.is_available() is False")
        print(f"  torch {torch.__version__} (CUDA {torch.version.cuda})")
        return torch

    torch = attempt(report, "PyTorch", setup_torch)
    rt = attempt(report, "cuda-bindings runtime", bindings_api)
    keep: list[Any] = []  # every buffer stays alive (and pinned) until the section ends
    groups: list[tuple[str, str, int, list[Variant]]] = []
    for label, nb in sizes:
        # ours: pinned host memory from cuMemHostAlloc, viewed as a numpy array
        hp = dev.alloc(nb, ia.MemoryKind.HOST_PINNED)
        db = dev.alloc(nb)
        host = pinned_view(hp.ptr, nb)
        keep += [hp, db]
        host.reshape(-1, 1 << 16)[:] = PATTERN  # every size is a multiple of 64 KiB
        verify_ours_copies(s, db, host)
        h2d: list[Variant] = []
        d2h: list[Variant] = []

        def o_h2d(n: int, db: Any = db, host: Any = host) -> None:
            for _ in range(n):
                s.copy_from_host(db, host)
                s.synchronize()

        def o_d2h(n: int, db: Any = db, host: Any = host) -> None:
            for _ in range(n):
                s.copy_to_host(host, db)
                s.synchronize()

        h2d.append(Variant("ours", f"ours H2D {label}", o_h2d, nbytes=nb))
        d2h.append(Variant("ours", f"ours D2H {label}", o_d2h, nbytes=nb))

        def torch_bufs(nb: int = nb) -> tuple[Any, Any]:
            th = torch.empty(nb, dtype=torch.uint8, pin_memory=True)
            td = torch.empty(nb, dtype=torch.uint8, device="cuda")
            td.copy_(th, non_blocking=True)
            torch.cuda.synchronize()
            return th, td

        tb = attempt(report, f"PyTorch {label}", torch_bufs) if torch is not None else None
        if tb is not None:
            th, td = tb
            keep += [th, td]
            sync = torch.cuda.synchronize

            def t_h2d(n: int, th: Any = th, td: Any = td) -> None:
                for _ in range(n):
                    td.copy_(th, non_blocking=True)
                    sync()

            def t_d2h(n: int, th: Any = th, td: Any = td) -> None:
                for _ in range(n):
                    th.copy_(td, non_blocking=True)
                    sync()

            h2d.append(Variant("torch", f"PyTorch H2D {label}", t_h2d, nbytes=nb))
            d2h.append(Variant("torch", f"PyTorch D2H {label}", t_d2h, nbytes=nb))

        def rt_bufs(nb: int = nb) -> tuple[int, int]:
            hptr = check_cu(rt.runtime.cudaMallocHost(nb), "cudaMallocHost")
            dptr = check_cu(rt.runtime.cudaMalloc(nb), "cudaMalloc")
            return int(hptr), int(dptr)

        rb = attempt(report, f"cuda-bindings runtime {label}", rt_bufs) if rt is not None else None
        if rb is not None:
            hptr, dptr = rb
            keep.append(SimpleNamespace(free=lambda hptr=hptr, dptr=dptr: (rt.runtime.cudaFreeHost(hptr),
                                                                             rt.runtime.cudaFree(dptr))))
            memcpy, H2D, D2H = rt.runtime.cudaMemcpy, rt.H2D, rt.D2H
            rt_host = pinned_view(hptr, nb)

            def r_h2d(n: int, hptr: int = hptr, dptr: int = dptr, nb: int = nb) -> None:
                for _ in range(n):
                    memcpy(dptr, hptr, nb, H2D)

            def r_d2h(n: int, hptr: int = hptr, dptr: int = dptr, nb: int = nb) -> None:
                for _ in range(n):
                    memcpy(hptr, dptr, nb, D2H)

            def c_h2d(n: int, db: Any = db, rt_host: Any = rt_host) -> None:
                for _ in range(n):
                    s.copy_from_host(db, rt_host)
                    s.synchronize()

            def c_d2h(n: int, db: Any = db, rt_host: Any = rt_host) -> None:
                for _ in range(n):
                    s.copy_to_host(rt_host, db)
                    s.synchronize()

            def r_check(hptr: int = hptr, dptr: int = dptr, nb: int = nb) -> bool:  # the timed loops ignore statuses
                check_cu(memcpy(dptr, hptr, nb, H2D), "cudaMemcpy H2D")
                check_cu(memcpy(hptr, dptr, nb, D2H), "cudaMemcpy D2H")
                return True

            if attempt(report, f"cuda-bindings cudaMemcpy {label}", r_check):
                h2d.append(Variant("rt", f"cuda-bindings cudaMemcpy H2D {label}", r_h2d, nbytes=nb))
                d2h.append(Variant("rt", f"cuda-bindings cudaMemcpy D2H {label}", r_d2h, nbytes=nb))
                h2d.append(Variant("ours_rtbuf", f"ours H2D from cudaMallocHost memory {label}", c_h2d, nbytes=nb))
                d2h.append(Variant("ours_rtbuf", f"ours D2H into cudaMallocHost memory {label}", c_d2h, nbytes=nb))
        groups.append(("H2D", label, nb, usable(report, h2d)))
        groups.append(("D2H", label, nb, usable(report, d2h)))

    groups = [g for g in groups if g[3]]
    try:
        if groups:
            run_interleaved([g[3] for g in groups], args.repeats, max(args.target_s * 4, 0.02))
        # the C reference, in its own process (not paired: its medians are its own)
        c_ref: dict[tuple[str, int], tuple[float, float]] = {}
        res = attempt(report, "C cudaMemcpy program",
                      lambda: c_bandwidth([nb for _, nb in sizes], max(args.repeats, 10), timeout=90.0))
        if res is not None:
            c_ref, how = res
            print(f"  C reference: {how}")
            report.section("copy")["c_program"] = how
        report_copy(report, targets, groups, c_ref)
    finally:
        for x in keep:
            try:
                x.free() if hasattr(x, "free") else None
            except Exception:  # noqa: BLE001 - best effort at the end
                pass


def report_copy(report: Report, targets: Targets, groups: list[tuple[str, str, int, list[Variant]]],
                c_ref: dict[tuple[str, int], tuple[float, float]]) -> None:
    """GB/s per variant, the C program's figures, and ours as a fraction of the best reference."""
    def gbps(x: Variant) -> float:
        return x.nbytes / x.median / 1e9

    print(f"  {'copy':<50} {'median ms':>9}  {'GB/s':>7}  {'IQR%':>5}  {'ours / this':>11}")
    section = report.section("copy")
    for direction, label, nb, variants in groups:
        v = {x.key: x for x in variants}
        ours = v.get("ours")
        rows = []
        refs: dict[str, float] = {}
        for x in variants:
            thr = 1 / ratio(ours, x) if ours is not None and x is not ours else None  # throughput ratio
            print(f"  {x.label:<50} {x.median * 1e3:9.3f}  {gbps(x):7.2f}  {spread(x):5.1f}  {fmt_ratio(thr, 11)}")
            rows.append(row_json(x, gbps=gbps(x), ours_throughput_ratio=thr))
            if not x.key.startswith("ours"):
                refs[x.label] = gbps(x)
        c = c_ref.get((direction, nb))
        if c is not None:
            ev, wall = c
            for how, c_gbps in (("cudaEvents", ev), ("wall clock", wall)):
                name = f"C cudaMemcpy {direction} {label} ({how})"
                print(f"  {name:<50} {nb / c_gbps / 1e6:9.3f}  {c_gbps:7.2f}")
            refs[f"C cudaMemcpy {direction} (cudaEvents)"] = ev
            refs[f"C cudaMemcpy {direction} (wall clock)"] = wall
            rows.append({"key": "c_event", "gbps": ev})
            rows.append({"key": "c_wall", "gbps": wall})
        entry: dict[str, Any] = {"direction": direction, "size": label, "nbytes": nb, "variants": rows}
        if ours is not None and refs:
            best_label, best = max(refs.items(), key=lambda kv: kv[1])
            frac = gbps(ours) / best
            print(f"  -> ours {direction} {label}: {gbps(ours):.2f} GB/s = {frac:.3f} of the best reference "
                  f"({best_label}, {best:.2f} GB/s)")
            entry.update(ours_gbps=gbps(ours), best_reference=best_label, best_reference_gbps=best,
                         ours_fraction_of_best=frac)
            targets.note(f"copy {direction} {label}: ours GB/s / best reference ({best_label})", frac)
        if "ours_rtbuf" in v and ours is not None:
            targets.note(f"copy {direction} {label}: ours on its own pinned buffer / on cudaMallocHost's, throughput",
                         1 / ratio(ours, v["ours_rtbuf"]))
        section["rows"].append(entry)


# ----------------------------------------------------------------------------- main


def arm_watchdog(seconds: float) -> bool:
    """Nothing may hang the one-shot GPU run: after ``seconds`` dump every thread's stack and exit 1 (and
    print the stack on a crash in C).  Needs a real file descriptor (not so under pytest's capture)."""
    for f in (sys.stderr, sys.__stderr__):
        try:
            if f is None:
                continue
            f.fileno()
            faulthandler.enable(file=f)
            faulthandler.dump_traceback_later(seconds, exit=True, file=f)
            return True
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
            continue
    return False


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = Report(args.json)
    t_start = time.monotonic()
    arm_watchdog(args.deadline_s)
    try:
        return _main(args, report, t_start)
    finally:
        faulthandler.cancel_dump_traceback_later()


def _main(args: argparse.Namespace, report: Report, t_start: float) -> int:
    try:
        backend, dev, err = open_cuda_device()
    except ImportError as e:
        print(f"bench_gpu: cannot import ironaccelerator ({one_line(e)}): run `make generate` first", file=sys.stderr)
        return 1
    if err is not None:
        kind = err.kind.name
        no_device = kind in NO_DEVICE_KINDS
        what = "no CUDA device" if no_device else "cannot open CUDA device 0"
        print(f"bench_gpu: {what} ({kind}: {one_line(str(err), 1000)}): nothing to measure")
        report.data.update(status="no-device" if no_device else "error", reason=f"{kind}: {err}")
        report.write()
        if args.require_device:
            return 2
        return 0 if no_device else 1

    print_env(report, backend, dev)
    print(f"repeats={args.repeats}, sample~{args.target_s * 1e3:.0f} ms, batch={args.batch}, "
          f"sections={','.join(args.only)}, deadline {args.deadline_s:.0f} s")
    report.data["config"] = {"repeats": args.repeats, "target_s": args.target_s, "batch": args.batch,
                             "quick": args.quick, "sections": args.only}
    report.write()
    ctx = SimpleNamespace(backend=backend, dev=dev, stream=dev.create_stream())
    targets = Targets()
    runners = {"launch": section_launch, "alloc": section_alloc, "copy": section_copy}
    for name in args.only:
        left = args.deadline_s - (time.monotonic() - t_start)
        if left < 25:
            report.skip(f"section {name}", f"only {left:.0f} s left before the deadline")
            continue
        t0 = time.monotonic()
        try:
            runners[name](ctx, args, report, targets)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # one section failing must not lose the others
            report.error(f"section {name}", e)
        report.section(name)["seconds"] = round(time.monotonic() - t0, 2)
        report.write(targets)
    targets.print()
    status = "ok" if not report.data["errors"] else "errors"
    report.data["status"] = status
    report.data["seconds"] = round(time.monotonic() - t_start, 2)
    report.write(targets)
    if report.data["skipped"]:
        print(f"\n{len(report.data['skipped'])} skipped: " + "; ".join(x["what"] for x in report.data["skipped"]))
    if report.data["errors"]:
        print(f"{len(report.data['errors'])} error(s) of ours: " + "; ".join(x["what"] for x in report.data["errors"]),
              file=sys.stderr)
    print(f"\ntotal {time.monotonic() - t_start:.1f} s")
    return 0 if status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
