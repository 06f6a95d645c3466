#!/usr/bin/env python
"""Checked raw-layer calls of different shapes (issue 15 item 5): ours checked vs cuda-bindings (CUDA driver on the
stub driver, NVRTC), vs pyopencl and the raw cffi call (OpenCL on PoCL), vs hip-python if installed, else the raw
cffi call (HIP, Debian's libamdhip64, calls that need no device).

Run from the repository root::

    .venv/bin/python bench/bench_checked_calls.py [--repeats N] [--target-ms T] [--quick] [--tree DIR]

Each section's variants are timed side by side in one process (bench/_harness.py: each repeat times every
variant once, in a rotated order; a ratio is the median of the per-repeat ratios).  Per row:

* ours         the checked wrapper as users call it (``driver.cuCtxGetCurrent()``): the compiled fast path in
               API mode, where the function has one
* Python       the Python wrapper of the same function (``driver._python[name]``): what ABI mode runs, and what
               API mode ran before a function had a fast path
* reference    cuda-bindings 13.5 (``cuda.bindings.driver`` / ``.nvrtc``), pyopencl, hip-python; or the raw
               cffi call (``<library>._cffi.lib.<name>`` with its out-parameters allocated once, no check)

``--tree DIR`` imports the generated package and runtime of another checkout (e.g. main's, built there), so that
a table from before a change can be taken with the same script.  The CUDA section runs in a child process whose
``LD_LIBRARY_PATH`` puts bench/stub_cuda's libcuda.so.1 (built by bench_launch_cpu.build_stub) first, for both
bindings (checked in /proc/self/maps); OpenCL and HIP run in the parent, without the stub.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
CHILD_ENV = "IA_BENCH_CHECKED_STUB"


def _paths(tree: Path) -> None:
    for sub in ("runtime", "generated"):
        sys.path.insert(0, str(tree / sub))
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))


def _args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--target-ms", type=float, default=15.0, help="time per sample of one variant")
    ap.add_argument("--quick", action="store_true", help="5 repeats of 5 ms")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose generated/ and runtime/ to import")
    a = ap.parse_args(argv)
    if a.quick:
        a.repeats, a.target_ms = 5, 5.0
    return a


class Row:
    """One function: ours (checked), its Python wrapper, and the reference, each ``f()`` doing one call."""

    def __init__(self, name: str, shape: str, ours: Callable[[], Any], python: Callable[[], Any] | None,
                 ref: Callable[[], Any] | None, ref_name: str, target: float | None = None) -> None:
        self.name, self.shape, self.ref_name, self.target = name, shape, ref_name, target
        self.calls = {"ours": ours, "python": python, "ref": ref}


def _loop(fn: Callable[[], Any]) -> Callable[[int], None]:
    def body(n: int) -> None:
        for _ in range(n):
            fn()
    return body


def measure(title: str, rows: list[Row], args: argparse.Namespace) -> list[tuple[Row, dict[str, float], dict[str, float]]]:
    """Time every row's variants (one harness run per row), print the table; the ratios per row."""
    from _harness import Variant, ratio, run

    out = []
    for row in rows:
        variants = [Variant(k, k, _loop(fn)) for k, fn in row.calls.items() if fn is not None]
        run(variants, args.repeats, args.target_ms / 1000)
        by = {v.key: v for v in variants}
        ns = {k: v.median * 1e9 for k, v in by.items()}
        ratios = {}
        if "ref" in by:
            ratios["ours"] = ratio(by["ours"], by["ref"])
            if "python" in by:
                ratios["python"] = ratio(by["python"], by["ref"])
        out.append((row, ns, ratios))
    print(f"\n== {title}")
    print(f"  {'function':<28} {'shape':<34} {'ours ns':>8} {'Python ns':>9} {'ref ns':>8} {'ours/ref':>9} "
          f"{'Python/ref':>10}  reference")
    for row, ns, ratios in out:
        def f(x: float | None, fmt: str) -> str:
            return format(x, fmt) if x is not None else "-"
        print(f"  {row.name:<28} {row.shape:<34} {f(ns.get('ours'), '8.0f')} {f(ns.get('python'), '9.0f'):>9} "
              f"{f(ns.get('ref'), '8.0f'):>8} {f(ratios.get('ours'), '9.2f'):>9} {f(ratios.get('python'), '10.2f'):>10}"
              f"  {row.ref_name}")
    return out


class PythonWrappers:
    """``lib``'s Python wrapper of each function: the one its fast path replaced, or (no fast path) the function."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib

    def __getitem__(self, name: str) -> Any:
        return self.lib._python.get(name) or getattr(self.lib, name)


def compiled(fn: object) -> str:
    return "C" if type(fn).__name__ == "builtin_function_or_method" else "Py"


# ------------------------------------------------------------------------------------------- CUDA, stub

PTX = b"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry bench_kernel(.param .u64 p0, .param .u32 p1)
{
    ret;
}
"""


def cuda_rows() -> list[Row]:
    from _harness import libs_mapped
    from cuda.bindings import driver as cb
    from ironaccelerator.backends.cuda import driver as d

    d.cuInit(0)
    dev = d.cuDeviceGet(0)
    ctx = d.cuDevicePrimaryCtxRetain(dev)
    d.cuCtxSetCurrent(ctx)
    s = d.cuStreamCreate(0)
    e1, e2 = d.cuEventCreate(0), d.cuEventCreate(0)
    d.cuEventRecord(e1, s)
    d.cuEventRecord(e2, s)
    mod = d.cuModuleLoadData(PTX)
    fn = d.cuModuleGetFunction(mod, "bench_kernel")
    dptr = d.cuMemAlloc(4096)
    host = d.ffi.new("char[]", 256)
    options = [d.CU_JIT_MAX_REGISTERS, d.CU_JIT_OPTIMIZATION_LEVEL]
    values = d.ffi.new("void *[]", [d.ffi.cast("void *", 32), d.ffi.cast("void *", 4)])

    assert cb.cuInit(0)[0] == cb.CUresult.CUDA_SUCCESS
    _, cdev = cb.cuDeviceGet(0)
    _, cctx = cb.cuDevicePrimaryCtxRetain(cdev)
    cb.cuCtxSetCurrent(cctx)
    _, cs = cb.cuStreamCreate(0)
    _, ce1 = cb.cuEventCreate(0)
    _, ce2 = cb.cuEventCreate(0)
    cb.cuEventRecord(ce1, cs)
    cb.cuEventRecord(ce2, cs)
    _, cmod = cb.cuModuleLoadData(PTX)
    err, cfn = cb.cuModuleGetFunction(cmod, b"bench_kernel")
    assert err == cb.CUresult.CUDA_SUCCESS, err
    _, cdptr = cb.cuMemAlloc(4096)
    chost = bytearray(256)
    copts = [cb.CUjit_option.CU_JIT_MAX_REGISTERS, cb.CUjit_option.CU_JIT_OPTIMIZATION_LEVEL]
    cvals = [32, 4]
    mapped = libs_mapped("libcuda")
    assert len(mapped) == 1 and "stub_cuda" in next(iter(mapped)), mapped  # both bindings: the stub

    P = PythonWrappers(d)

    def load_unload() -> None:
        d.cuModuleUnload(d.cuModuleLoadDataEx(PTX, options, values))

    def load_unload_py() -> None:
        P["cuModuleUnload"](P["cuModuleLoadDataEx"](PTX, options, values))

    def load_unload_cb() -> None:
        cb.cuModuleUnload(cb.cuModuleLoadDataEx(PTX, 2, copts, cvals)[1])

    T = 1.0
    rows = [
        Row("cuCtxGetCurrent", "handle out", d.cuCtxGetCurrent, P["cuCtxGetCurrent"], cb.cuCtxGetCurrent,
            "cuda-bindings", T),
        Row("cuStreamGetPriority", "handle in, int out", lambda: d.cuStreamGetPriority(s),
            lambda: P["cuStreamGetPriority"](s), lambda: cb.cuStreamGetPriority(cs), "cuda-bindings", T),
        Row("cuCtxGetStreamPriorityRange", "two int outs", d.cuCtxGetStreamPriorityRange,
            P["cuCtxGetStreamPriorityRange"], cb.cuCtxGetStreamPriorityRange, "cuda-bindings", T),
        Row("cuMemGetInfo", "two size_t outs", d.cuMemGetInfo, P["cuMemGetInfo"], cb.cuMemGetInfo, "cuda-bindings", T),
        Row("cuEventElapsedTime", "two handles in, float out", lambda: d.cuEventElapsedTime(e1, e2),
            lambda: P["cuEventElapsedTime"](e1, e2), lambda: cb.cuEventElapsedTime(ce1, ce2), "cuda-bindings", T),
        Row("cuStreamWaitEvent", "two handles in", lambda: d.cuStreamWaitEvent(s, e1, 0),
            lambda: P["cuStreamWaitEvent"](s, e1, 0), lambda: cb.cuStreamWaitEvent(cs, ce1, 0), "cuda-bindings", T),
        Row("cuDeviceGetUuid", "struct out (CUuuid)", lambda: d.cuDeviceGetUuid(dev),
            lambda: P["cuDeviceGetUuid"](dev), lambda: cb.cuDeviceGetUuid(cdev), "cuda-bindings", T),
        Row("cuDeviceGetName", "string out (256 bytes)", lambda: d.cuDeviceGetName(dev),
            lambda: P["cuDeviceGetName"](dev), lambda: cb.cuDeviceGetName(256, cdev), "cuda-bindings", T),
        Row("cuModuleGetFunction", "handle + string in, handle out", lambda: d.cuModuleGetFunction(mod, "bench_kernel"),
            lambda: P["cuModuleGetFunction"](mod, "bench_kernel"), lambda: cb.cuModuleGetFunction(cmod, b"bench_kernel"),
            "cuda-bindings", T),
        Row("cuLaunchKernel", "9 in, nullable params/extra None", lambda: d.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s),
            lambda: P["cuLaunchKernel"](fn, 1, 1, 1, 1, 1, 1, 0, s),
            lambda: cb.cuLaunchKernel(cfn, 1, 1, 1, 1, 1, 1, 0, cs, 0, 0), "cuda-bindings", T),
        Row("cuMemcpyHtoDAsync", "void * in (256 B)", lambda: d.cuMemcpyHtoDAsync(dptr, host, 256, s),
            lambda: P["cuMemcpyHtoDAsync"](dptr, host, 256, s), lambda: cb.cuMemcpyHtoDAsync(cdptr, chost, 256, cs),
            "cuda-bindings", T),
        Row("cuModuleLoadDataEx+Unload", "array in with length (2 options)", load_unload, load_unload_py,
            load_unload_cb, "cuda-bindings", T),
        Row("cuStreamQuery", "handle in, status codes", lambda: d.cuStreamQuery(s), lambda: P["cuStreamQuery"](s),
            lambda: cb.cuStreamQuery(cs), "cuda-bindings", T),
    ]
    for r in rows:
        r.name += f" [{compiled(getattr(d, r.name.split('+')[0]))}]"
    return rows


def nvrtc_rows() -> list[Row]:
    from cuda.bindings import nvrtc as cn
    from ironaccelerator.backends.cuda import nvrtc as n

    src = b'extern "C" __global__ void k(float *x) { x[0] = 1.0f; }'
    prog = n.nvrtcCreateProgram(src, "k.cu")
    n.nvrtcCompileProgram(prog, ["--gpu-architecture=compute_80"])
    _, cprog = cn.nvrtcCreateProgram(src, b"k.cu", 0, [], [])
    assert cn.nvrtcCompileProgram(cprog, 1, [b"--gpu-architecture=compute_80"])[0] == cn.nvrtcResult.NVRTC_SUCCESS

    def cb_ptx() -> bytes:
        size = cn.nvrtcGetPTXSize(cprog)[1]
        buf: bytes = b" " * size
        cn.nvrtcGetPTX(cprog, buf)
        return buf

    P = PythonWrappers(n)
    rows = [
        Row("nvrtcVersion", "two int outs", n.nvrtcVersion, P["nvrtcVersion"], cn.nvrtcVersion, "cuda-bindings", 1.0),
        Row("nvrtcGetPTXSize", "handle in, size_t out", lambda: n.nvrtcGetPTXSize(prog),
            lambda: P["nvrtcGetPTXSize"](prog), lambda: cn.nvrtcGetPTXSize(cprog), "cuda-bindings", 1.0),
        Row("nvrtcGetPTX", "string sized by a size function", lambda: n.nvrtcGetPTX(prog), lambda: P["nvrtcGetPTX"](prog),
            cb_ptx, "cuda-bindings (size, buffer, get)", 1.0),
    ]
    for r in rows:
        r.name += f" [{compiled(getattr(n, r.name))}]"
    return rows


def child(args: argparse.Namespace) -> int:
    from _harness import Targets

    targets = Targets()
    for title, rows in (("CUDA driver on the stub driver (bench/stub_cuda)", cuda_rows()), ("NVRTC", nvrtc_rows())):
        for row, _ns, ratios in measure(title, rows, args):
            if row.target is not None and "ours" in ratios:
                targets.add(f"{row.name} ours / {row.ref_name}", ratios["ours"], "<=", row.target)
    targets.print()
    return 0


# ------------------------------------------------------------------------------------------ OpenCL, HIP

def opencl_rows() -> list[Row] | str:
    try:
        import pyopencl as pcl
    except ImportError:
        return "pyopencl is not installed"
    from ironaccelerator.backends.opencl import cl

    ffi, raw = cl.ffi, cl._cffi.lib  # type: ignore[attr-defined]  # the compiled module
    n = ffi.new("cl_uint *")
    cl.clGetPlatformIDs(0, None, n)
    if n[0] == 0:
        return "no OpenCL platform"
    plats = ffi.new("cl_platform_id[]", n[0])
    cl.clGetPlatformIDs(n[0], plats, None)
    devs = ffi.new("cl_device_id[]", 1)
    cl.clGetDeviceIDs(plats[0], cl.CL_DEVICE_TYPE_ALL, 1, devs, None)
    dev = devs[0]
    ctx = cl.clCreateContext(None, [dev])
    q = cl.clCreateCommandQueueWithProperties(ctx, dev, None)
    err = ffi.new("cl_int *")
    units = ffi.new("cl_uint *")

    pctx = pcl.Context([pcl.get_platforms()[0].get_devices()[0]])
    pq = pcl.CommandQueue(pctx)
    pdev = pctx.devices[0]
    mf = pcl.mem_flags

    P = PythonWrappers(cl)

    def buf_ours() -> None:
        cl.clReleaseMemObject(cl.clCreateBuffer(ctx, cl.CL_MEM_READ_WRITE, 64))

    def buf_py() -> None:
        P["clReleaseMemObject"](P["clCreateBuffer"](ctx, cl.CL_MEM_READ_WRITE, 64))

    def buf_pcl() -> None:
        pcl.Buffer(pctx, mf.READ_WRITE, 64).release()

    def buf_raw() -> None:
        raw.clReleaseMemObject(raw.clCreateBuffer(ctx, 1, 64, ffi.NULL, err))

    def ev_ours() -> None:
        cl.clReleaseEvent(cl.clCreateUserEvent(ctx))

    def ev_py() -> None:
        P["clReleaseEvent"](P["clCreateUserEvent"](ctx))

    def ev_pcl() -> None:
        pcl.UserEvent(pctx)  # released when dropped

    def ev_raw() -> None:
        raw.clReleaseEvent(raw.clCreateUserEvent(ctx, err))

    rows = [
        Row("clCreateBuffer+clReleaseMemObject", "errcode_ret, handle result", buf_ours, buf_py, buf_pcl, "pyopencl"),
        Row("clCreateUserEvent+clReleaseEvent", "errcode_ret, handle result", ev_ours, ev_py, ev_pcl, "pyopencl"),
        Row("clGetDeviceInfo", "void * in, nullable size_ret None",
            lambda: cl.clGetDeviceInfo(dev, cl.CL_DEVICE_MAX_COMPUTE_UNITS, 4, units),
            lambda: P["clGetDeviceInfo"](dev, cl.CL_DEVICE_MAX_COMPUTE_UNITS, 4, units),
            lambda: pdev.get_info(pcl.device_info.MAX_COMPUTE_UNITS), "pyopencl (returns the value)"),
        Row("clFlush", "handle in", lambda: cl.clFlush(q), lambda: P["clFlush"](q), pq.flush, "pyopencl"),
        # the same calls against the raw cffi call (no check, out-parameters allocated once)
        Row("clCreateBuffer+clReleaseMemObject", "errcode_ret, handle result", buf_ours, None, buf_raw, "raw cffi"),
        Row("clCreateUserEvent+clReleaseEvent", "errcode_ret, handle result", ev_ours, None, ev_raw, "raw cffi"),
        Row("clGetDeviceInfo", "void * in, nullable size_ret None",
            lambda: cl.clGetDeviceInfo(dev, cl.CL_DEVICE_MAX_COMPUTE_UNITS, 4, units), None,
            lambda: raw.clGetDeviceInfo(dev, cl.CL_DEVICE_MAX_COMPUTE_UNITS, 4, units, ffi.NULL), "raw cffi"),
        Row("clFlush", "handle in", lambda: cl.clFlush(q), None, lambda: raw.clFlush(q), "raw cffi"),
    ]
    for r in rows:
        r.name += f" [{compiled(getattr(cl, r.name.split('+')[0]))}]"
    return rows


def hip_rows() -> list[Row] | str:
    from ironaccelerator.backends.hip import runtime as h

    if not h.has("hipRuntimeGetVersion") or h.BINDING_MODE != "api":
        return "no libamdhip64 (or no compiled binding)"
    try:
        from hip import hip as hp  # hip-python (make bench-deps)
    except ImportError:
        hp = None
    raw, ffi = h._cffi.lib, h.ffi  # type: ignore[attr-defined]  # the compiled module
    v = ffi.new("int *")
    P = PythonWrappers(h)
    if hp is not None:
        # hip-python takes its enum, not an int (TypeError: argument 'hipError' must be of type
        # '_hipError_t__Base'); code 1 is hipErrorInvalidValue, the code our rows pass
        code = hp.hipError_t(1)
        ref_v, ref_s, name = (lambda: hp.hipRuntimeGetVersion()), (lambda: hp.hipGetErrorString(code)), "hip-python"
        ref_n = lambda: hp.hipGetErrorName(code)  # noqa: E731
    else:
        ref_v, ref_s, name = (lambda: raw.hipRuntimeGetVersion(v)), (lambda: raw.hipGetErrorString(1)), "raw cffi"
        ref_n = lambda: raw.hipGetErrorName(1)  # noqa: E731
    rows = [
        Row("hipRuntimeGetVersion", "int out", h.hipRuntimeGetVersion, P["hipRuntimeGetVersion"], ref_v, name),
        Row("hipGetErrorString", "string result", lambda: h.hipGetErrorString(1), lambda: P["hipGetErrorString"](1),
            ref_s, name),
        Row("hipGetErrorName", "string result", lambda: h.hipGetErrorName(1), lambda: P["hipGetErrorName"](1),
            ref_n, name),
    ]
    for r in rows:
        r.name += f" [{compiled(getattr(h, r.name))}]"
    return rows


def parent(args: argparse.Namespace, argv: list[str]) -> int:
    import bench_launch_cpu  # builds the stub driver

    print(f"bench_checked_calls: tree {args.tree}; {args.repeats} repeats of {args.target_ms} ms per variant")
    for title, make in (("OpenCL on PoCL", opencl_rows), ("HIP (libamdhip64, no device)", hip_rows)):
        rows = make()
        if isinstance(rows, str):
            print(f"\n== {title}: skipped ({rows})")
        else:
            measure(title, rows, args)
    stub = bench_launch_cpu.build_stub()
    if isinstance(stub, str):
        print(f"\n== CUDA: skipped ({stub})")
        return 0
    env = {**os.environ, CHILD_ENV: str(stub),
           "LD_LIBRARY_PATH": os.pathsep.join([str(stub.parent), *filter(None, os.environ.get("LD_LIBRARY_PATH",
                                                                                                "").split(os.pathsep))])}
    sys.stdout.flush()
    return subprocess.call([sys.executable, str(Path(__file__).resolve()), *argv], env=env)


def main(argv: list[str]) -> int:
    args = _args(argv)
    _paths(args.tree.resolve())
    return child(args) if os.environ.get(CHILD_ENV) else parent(args, argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
