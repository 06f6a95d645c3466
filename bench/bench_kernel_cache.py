#!/usr/bin/env python
"""Cold vs warm ``Device.load_module``: what the on-disk kernel cache saves, on OpenCL (PoCL) and NVRTC.

Run from the repository root (after ``generate`` and ``build``)::

    .venv/bin/python bench/bench_kernel_cache.py [--repeats N]

Per backend, each repeat times three loads of the same source, in a rotated order:

- ``cold``: a miss: compile, then write the entry (a fresh cache directory each time)
- ``warm``: a hit: read and verify the entry, load the binary (OpenCL: ``clCreateProgramWithBinary`` +
  ``clBuildProgram``; CUDA: ``cuModuleLoadData``)
- ``off``: ``cache=False``, compile only (what every load cost before the cache)

and prints the medians and the median of the paired per-repeat ratios cold/warm and off/warm.  With
``--include-dirs DIR...`` every load also passes ``include_dirs=[DIR, ...]`` (ex. ``/usr``: a large tree that a
warm load must not walk; the sources include nothing from it).  NVRTC runs on
the CPU: the CUDA device is bench/stub_cuda (a libcuda.so.1 whose calls return at once, so ``warm`` is the
cache read plus a stub module load), in a child process that loads it through ``LD_LIBRARY_PATH``.  PoCL
keeps a kernel cache of its own (``~/.cache/pocl``), which makes its "cold" builds warm: it is switched off
(``POCL_KERNEL_CACHE=0``) unless ``--pocl-cache`` is given.  Every cache directory lives under
``build/bench/kernel_cache``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "generated"))
sys.path.insert(0, str(ROOT / "runtime"))
WORK = ROOT / "build" / "bench" / "kernel_cache"

OPENCL_SRC = """
#define TILE 16
__kernel void matmul(__global const float *a, __global const float *b, __global float *c, int n) {
    __local float ta[TILE][TILE], tb[TILE][TILE];
    int r = get_local_id(1), q = get_local_id(0), row = get_global_id(1), col = get_global_id(0);
    float acc = 0;
    for (int t = 0; t < n / TILE; ++t) {
        ta[r][q] = a[row * n + t * TILE + q]; tb[r][q] = b[(t * TILE + r) * n + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TILE; ++k) acc += ta[r][k] * tb[k][q];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    c[row * n + col] = acc * SCALE;
}
__kernel void saxpy(float a, __global const float *x, __global float *y) { int i = get_global_id(0); y[i] += a * x[i]; }
"""

CUDA_SRC = """
template <typename T, int TILE> __global__ void matmul(const T *a, const T *b, T *c, int n) {
    __shared__ T ta[TILE][TILE], tb[TILE][TILE];
    int r = threadIdx.y, q = threadIdx.x, row = blockIdx.y * TILE + r, col = blockIdx.x * TILE + q;
    T acc = 0;
    for (int t = 0; t < n / TILE; ++t) {
        ta[r][q] = a[row * n + t * TILE + q]; tb[r][q] = b[(t * TILE + r) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += ta[r][k] * tb[k][q];
        __syncthreads();
    }
    c[row * n + col] = acc * SCALE;
}
"""
CUDA_NAMES = ["matmul<float, 16>", "matmul<double, 16>", "matmul<float, 32>"]


def measure(load: Callable[[str], Any], repeats: int) -> dict[str, list[float]]:
    """Times of cold / warm / off loads, one each per repeat, in rotated order."""
    times: dict[str, list[float]] = {"cold": [], "warm": [], "off": []}
    warm_dir = WORK / "warm"
    shutil.rmtree(warm_dir, ignore_errors=True)
    os.environ["IRONACCEL_CACHE_DIR"] = str(warm_dir)
    m = load("prime")
    assert not m.from_cache
    order = ["cold", "warm", "off"]
    for rep in range(repeats):
        for variant in order[rep % 3:] + order[:rep % 3]:
            if variant == "cold":
                d = WORK / f"cold{rep}"
                shutil.rmtree(d, ignore_errors=True)
                os.environ["IRONACCEL_CACHE_DIR"] = str(d)
            else:
                os.environ["IRONACCEL_CACHE_DIR"] = str(warm_dir)
            t0 = time.perf_counter()
            m = load(variant)
            times[variant].append(time.perf_counter() - t0)
            assert m.from_cache is (variant == "warm"), (variant, m.from_cache)
            if variant == "cold":
                shutil.rmtree(WORK / f"cold{rep}", ignore_errors=True)
    return times


def report(name: str, times: dict[str, list[float]]) -> None:
    med = {k: statistics.median(v) for k, v in times.items()}
    cold_warm = statistics.median(c / w for c, w in zip(times["cold"], times["warm"]))
    off_warm = statistics.median(o / w for o, w in zip(times["off"], times["warm"]))
    print(f"{name}: cold {med['cold'] * 1e3:9.2f} ms   warm {med['warm'] * 1e3:8.3f} ms   "
          f"off {med['off'] * 1e3:9.2f} ms   cold/warm {cold_warm:7.1f}x   off/warm {off_warm:7.1f}x   "
          f"({len(times['warm'])} repeats, medians)")


INCLUDE_DIRS: list[str] = []


def bench_opencl(repeats: int) -> None:
    import ironaccelerator as ia

    try:
        dev = ia.BackendRegistry.default().get(ia.BackendKind.OPENCL).open(0)
    except ia.Error as e:
        print(f"OpenCL: skipped ({e})")
        return

    def load(variant: str) -> Any:
        return dev.load_module(OPENCL_SRC, defines={"SCALE": 2}, options=["-cl-mad-enable"],
                               include_dirs=INCLUDE_DIRS, cache=variant != "off")

    pocl = "PoCL's cache " + ("off" if os.environ.get("POCL_KERNEL_CACHE") == "0" else "on")
    inc = f", include_dirs={INCLUDE_DIRS}" if INCLUDE_DIRS else ""
    report(f"OpenCL ({dev.descriptor.name}, {pocl}{inc})", measure(load, repeats))


def cuda_child(repeats: int) -> int:
    import ironaccelerator as ia

    dev = ia.BackendRegistry.default().get(ia.BackendKind.CUDA).open(0)

    def load(variant: str) -> Any:
        return dev.load_module(CUDA_SRC, defines={"SCALE": 2}, name_expressions=CUDA_NAMES, include_dirs=INCLUDE_DIRS,
                               cache=variant != "off")

    times = measure(load, repeats)
    print(json.dumps(times))
    return 0


def bench_nvrtc(repeats: int) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_launch_cpu

    stub = bench_launch_cpu.build_stub()
    if isinstance(stub, str):
        print(f"NVRTC: skipped ({stub})")
        return
    from ironaccelerator import Error
    from ironaccelerator.backends.cuda import _backend as cb

    try:
        major, minor = cb.compiler_version()
    except Error as e:
        print(f"NVRTC: skipped ({e})")
        return
    env = {**os.environ, "LD_LIBRARY_PATH": os.pathsep.join([str(stub.parent), os.environ.get("LD_LIBRARY_PATH", "")]),
           "STUB_CUDA_DRIVER_VERSION": str(max(13000, major * 1000 + minor * 10))}
    inc = ["--include-dirs", *INCLUDE_DIRS] if INCLUDE_DIRS else []
    r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--cuda-child", "--repeats", str(repeats), *inc],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"NVRTC: failed\n{r.stdout}{r.stderr}")
        return
    incs = f", include_dirs={INCLUDE_DIRS}" if INCLUDE_DIRS else ""
    report(f"NVRTC {major}.{minor} (stub CUDA driver, {len(CUDA_NAMES)} name expressions{incs})",
           json.loads(r.stdout.strip().splitlines()[-1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--pocl-cache", action="store_true", help="leave PoCL's own kernel cache on")
    ap.add_argument("--include-dirs", nargs="+", default=[], metavar="DIR",
                    help="pass include_dirs=[DIR, ...] to every load (ex. /usr: a tree a warm load must not walk)")
    ap.add_argument("--cuda-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    INCLUDE_DIRS[:] = args.include_dirs
    if not args.pocl_cache:
        os.environ["POCL_KERNEL_CACHE"] = "0"  # read when PoCL initialises (the first OpenCL call, below)
    WORK.mkdir(parents=True, exist_ok=True)
    os.environ.pop("IRONACCEL_CACHE", None)
    if args.cuda_child:
        return cuda_child(args.repeats)
    bench_opencl(args.repeats)
    bench_nvrtc(args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
