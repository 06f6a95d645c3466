#!/usr/bin/env python
"""The OpenCL backend of the core surface against pyopencl, on the same PoCL device, in one process.

Run from the repository root (after ``generate`` and ``build``)::

    .venv/bin/python bench/bench_opencl.py [--repeats N] [--quick] [--target-ms MS] [--batch N]

Sections (every variant of a section is timed once per repeat, in a rotated order; the
tables show the median per-op time and ratios, a ratio being the median over repeats of the
paired per-repeat ratio, which is robust to the shared machine getting slower or faster):

1. launch + finish   a trivial kernel (one buffer arg + one int arg), global size 1, enqueue then
                     wait, per iteration:
                       ours checked      ``s.launch(launch); s.synchronize()``
                       ours unchecked    ``s.launch_unchecked(launch); s.synchronize()``
                       pyopencl knl()    ``knl(queue, (1,), (1,), buf, np.int32(1)); queue.finish()``
                       pyopencl set_args ``knl.set_args(buf, np.int32(1)); cl.enqueue_nd_range_kernel(...); finish``
                       pyopencl enqueue  args set once, ``cl.enqueue_nd_range_kernel(...); finish`` (a floor)
                       raw cffi          our raw ``clEnqueueNDRangeKernel`` + ``clFinish``, args set once (PoCL's floor)
2. enqueue only      ``--batch`` launches then one finish; the time per launch.  Same variants.
3. copies            H2D and D2H of 4 KiB, 1 MiB and 64 MiB, each followed by synchronize/finish;
                     ours ``copy_from_host``/``copy_to_host`` vs ``cl.enqueue_copy(queue, ...)``; GB/s.
                     Same host arrays on both sides; fresh device buffers every repeat (page placement),
                     allocated in alternating order, caches evicted.  Ours and pyopencl alternate op by
                     op (each copy + wait timed on its own), a repeat's sample being the median op.
4. allocation        alloc + free of 256 B, 64 KiB and 4 MiB: ours ``MemoryPool`` vs ours ``dev.alloc``
                     vs pyopencl ``cl.Buffer`` + ``release()`` vs ``pyopencl.tools.MemoryPool``.
                     Also ours ``alloc_unchecked`` + ``free_unchecked`` and our raw cffi ``clCreateBuffer`` +
                     ``clReleaseMemObject`` (the floor of a binding through cffi).
5. open              in fresh interpreters, alternating: ours ``BackendRegistry.default().get(OPENCL)``,
                     ``devices()``, ``open(0)``, ``create_stream()`` vs pyopencl ``get_platforms()`` +
                     ``get_devices()``, ``Context``, ``CommandQueue`` (each side's package import timed apart).
6. own work          launch / copy + synchronize on a stream whose vendor calls are a Python no-op: the
                     binding's Python work per call (printed, no target).

Targets are printed at the end with OK / MISS (issue 27's where it sets one): ours / pyopencl time <= 0.9
for checked launch + finish, <= 1.0 for the other launch rows and enqueue only; ours / pyopencl throughput
>= 1.0 for every copy; ours ``MemoryPool`` / ours ``dev.alloc`` <= 1.0 (a pool must beat no pool); ours
``dev.alloc`` / pyopencl ``cl.Buffer`` <= 1.3, ours ``MemoryPool`` / pyopencl ``tools.MemoryPool`` <= 1.0,
``alloc_unchecked`` / the raw cffi pair <= 1.2; registry + first device <= 1.2x pyopencl's
get_platforms + Context + CommandQueue, and ``Backend.open`` of a listed device <= 5 ms.  pyopencl's
``cl.Buffer`` and ``tools.MemoryPool`` are C++ and never reach Python bytecode: the raw cffi pair is
printed next to them (our floor).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "generated"))

import numpy as np  # noqa: E402

from _harness import Targets, Variant, libs_mapped, ratio, run, run_interleaved, spread, us  # noqa: E402

KERNEL_SRC = """
__kernel void touch(__global int *buf, int v) { if (get_global_id(0) == 0) buf[0] = v; }
"""

TARGET_LAUNCH = 1.0   # ours time / pyopencl time (launch + finish, enqueue only)
TARGET_COPY = 1.0     # ours throughput / pyopencl throughput
TARGET_POOL = 1.0     # ours MemoryPool alloc+free time / ours dev.alloc+free time
TARGET_LAUNCH_FINISH = 0.9  # ours checked launch + finish / pyopencl knl() + finish (issue 27)
TARGET_ALLOC = 1.3    # ours dev.alloc+free / pyopencl cl.Buffer+release (issue 27)
TARGET_POOL_PCL = 1.0  # ours MemoryPool / pyopencl tools.MemoryPool (issue 27)
TARGET_UNCHECKED = 1.2  # ours alloc_unchecked+free_unchecked / our raw cffi clCreateBuffer+clReleaseMemObject
TARGET_FIRST_DEVICE = 1.2  # registry + first device (+ stream) / pyopencl get_platforms+Context+CommandQueue
TARGET_OPEN_MS = 5.0  # Backend.open of a device already listed, in ms

# the children of section 5: each prints its timings (perf_counter deltas, seconds) as one JSON line
_OPEN_OURS = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
t0 = time.perf_counter()
import ironaccelerator as ia
t1 = time.perf_counter()
b = ia.BackendRegistry.default().get(ia.BackendKind.OPENCL)
t2 = time.perf_counter()
b.devices()
t3 = time.perf_counter()
d = b.open(0)
t4 = time.perf_counter()
s = d.create_stream()
t5 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "registry": t2 - t1, "devices": t3 - t2, "open": t4 - t3, "stream": t5 - t4}))
"""
_OPEN_PCL = """
import json, time
t0 = time.perf_counter()
import pyopencl as cl
t1 = time.perf_counter()
devs = [d for p in cl.get_platforms() for d in p.get_devices()]
t2 = time.perf_counter()
ctx = cl.Context([devs[0]])
t3 = time.perf_counter()
q = cl.CommandQueue(ctx, devs[0])
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "devices": t2 - t1, "context": t3 - t2, "queue": t4 - t3}))
"""


def time_open(repeats: int) -> dict[str, Any]:
    """Section 5: ours and pyopencl opening the first device, alternating, each in a fresh interpreter (bytecode
    caching on, as in an installed package: one untimed run of each first writes it)."""
    import json
    import statistics
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    gen = str(ROOT / "generated")

    def child(code: str) -> dict[str, float]:
        out = subprocess.run([sys.executable, "-c", code, gen], env=env, cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
        return {k: float(v) for k, v in json.loads(out.strip().splitlines()[-1]).items()}

    child(_OPEN_OURS), child(_OPEN_PCL)
    ours, pcl = [], []
    for i in range(repeats):  # (alternating which side goes first)
        if i % 2:
            p = child(_OPEN_PCL)
            o = child(_OPEN_OURS)
        else:
            o = child(_OPEN_OURS)
            p = child(_OPEN_PCL)
        ours.append(o)
        pcl.append(p)
    med = statistics.median
    o_first = [o["registry"] + o["devices"] + o["open"] + o["stream"] for o in ours]
    p_first = [p["devices"] + p["context"] + p["queue"] for p in pcl]
    table = [
        ("ours import ironaccelerator", med(o["import"] for o in ours)),
        ("ours BackendRegistry.default().get(OPENCL)  (lazy imports, library load)", med(o["registry"] for o in ours)),
        ("ours Backend.devices()  (clGetPlatformIDs: the platform's own start, + descriptors)",
         med(o["devices"] for o in ours)),
        ("ours Backend.open(0)  (clCreateContext)", med(o["open"] for o in ours)),
        ("ours Device.create_stream()  (clCreateCommandQueueWithProperties)", med(o["stream"] for o in ours)),
        ("ours registry + first device + stream", med(o_first)),
        ("pyopencl import pyopencl", med(p["import"] for p in pcl)),
        ("pyopencl get_platforms() + get_devices()", med(p["devices"] for p in pcl)),
        ("pyopencl Context([dev])", med(p["context"] for p in pcl)),
        ("pyopencl CommandQueue(ctx, dev)", med(p["queue"] for p in pcl)),
        ("pyopencl get_platforms + Context + CommandQueue", med(p_first)),
    ]
    return {
        "table": [(what, t * 1e3) for what, t in table],
        "first_device": med(o / p for o, p in zip(o_first, p_first)),
        "with_imports": med((o + a["import"]) / (p + b["import"]) for o, p, a, b in zip(o_first, p_first, ours, pcl)),
        "open": med(o["open"] for o in ours) * 1e3 / TARGET_OPEN_MS,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=None, help="repeats per variant (default 41, --quick 15)")
    ap.add_argument("--quick", action="store_true", help="shorter samples and 15 repeats (~5-10 s)")
    ap.add_argument("--target-ms", type=float, default=None, help="duration of one sample (default 25, --quick 5)")
    ap.add_argument("--batch", type=int, default=256, help="launches per finish in the enqueue-only section")
    ap.add_argument("--open-repeats", type=int, default=None,
                    help="fresh processes per side in the open section (default 11, --quick 5)")
    args = ap.parse_args()
    repeats = args.repeats or (15 if args.quick else 41)
    if repeats < 15:
        print(f"warning: {repeats} repeats; the targets assume medians of >= 15", file=sys.stderr)
    target_s = (args.target_ms or (5.0 if args.quick else 25.0)) / 1e3

    import pyopencl as pcl
    import pyopencl.tools as pcl_tools

    import ironaccelerator as ia
    from ironaccelerator.backends.opencl import cl as iacl
    from ironaccelerator.backends.opencl._backend import OpenCLDevice

    t_start = time.perf_counter()
    dev = ia.BackendRegistry.default().get(ia.BackendKind.OPENCL).open(0)
    assert isinstance(dev, OpenCLDevice), dev  # (the raw floor and the controls use .handle, .buffer, .queue)
    s = dev.create_stream()
    # pyopencl on the same device (matched by name)
    pdev = next(d for p in pcl.get_platforms() for d in p.get_devices() if d.name == dev.descriptor.name)
    ctx = pcl.Context([pdev])
    queue = pcl.CommandQueue(ctx, pdev, properties=pcl.command_queue_properties.PROFILING_ENABLE)

    print(f"device: {dev.descriptor.name}  ({pdev.platform.name} {pdev.platform.version})")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, pyopencl {pcl.VERSION_TEXT}, "
          f"ironaccelerator cl BINDING_MODE={iacl.BINDING_MODE!r}, cpus={os.cpu_count()}")
    print(f"OpenCL libraries mapped: {sorted(libs_mapped('libOpenCL') | libs_mapped('libpocl'))}")
    if iacl.BINDING_MODE != "api":
        print("WARNING: the OpenCL binding is not in API mode; run `ironaccelerator_gen build`", file=sys.stderr)
    print(f"repeats={repeats}, sample~{target_s * 1e3:.0f} ms, batch={args.batch}\n")

    # -- kernels and launch objects
    k = dev.load_module(KERNEL_SRC).kernel("touch")
    buf = dev.alloc(4096)
    launch = ia.KernelLaunch(k, ia.LaunchDims(grid=1, block=1), (buf, np.int32(1)))
    prg = pcl.Program(ctx, KERNEL_SRC).build()
    knl = prg.touch
    pbuf = pcl.Buffer(ctx, pcl.mem_flags.READ_WRITE, 4096)
    one = np.int32(1)
    gsz, lsz = (1,), (1,)

    # raw floor: our compiled cffi functions on a kernel of its own (ours caches its argument state), args
    # set once, 1-D range
    raw, ffi = iacl.unchecked, iacl.ffi
    k_raw = dev.load_module(KERNEL_SRC).kernel("touch")
    rk = k_raw.handle
    mem = ffi.new("cl_mem *", buf.buffer)
    ival = ffi.new("cl_int *", 1)
    assert raw.clSetKernelArg(rk, 0, ffi.sizeof("cl_mem"), mem) == 0
    assert raw.clSetKernelArg(rk, 1, 4, ival) == 0
    rg = ffi.new("size_t[1]", [1])
    rq = s.queue

    # correctness of every launch variant before timing: each writes its own value, read back
    def read_ours() -> int:
        out = np.zeros(1, np.int32)
        s.copy_to_host(out, buf)
        s.synchronize()
        return int(out[0])

    def read_pcl() -> int:
        out = np.zeros(1, np.int32)
        pcl.enqueue_copy(queue, out, pbuf)
        return int(out[0])

    s.launch(ia.KernelLaunch(k, ia.LaunchDims(1, 1), (buf, np.int32(7))))
    s.synchronize()
    assert read_ours() == 7
    assert s.launch_unchecked(ia.KernelLaunch(k, ia.LaunchDims(1, 1), (buf, np.int32(8)))) is None
    s.synchronize()
    assert read_ours() == 8
    ival[0] = 9
    assert raw.clSetKernelArg(rk, 1, 4, ival) == 0
    assert raw.clEnqueueNDRangeKernel(rq, rk, 1, ffi.NULL, rg, rg, 0, ffi.NULL, ffi.NULL) == 0
    assert raw.clFinish(rq) == 0
    assert read_ours() == 9
    ival[0] = 1
    knl(queue, gsz, lsz, pbuf, np.int32(10))
    queue.finish()
    assert read_pcl() == 10
    knl.set_args(pbuf, np.int32(11))
    pcl.enqueue_nd_range_kernel(queue, knl, gsz, lsz)
    queue.finish()
    assert read_pcl() == 11

    def ours_checked(n: int) -> None:
        launch_, sync = s.launch, s.synchronize
        for _ in range(n):
            launch_(launch)
            sync()

    def ours_unchecked(n: int) -> None:
        launch_, sync = s.launch_unchecked, s.synchronize
        for _ in range(n):
            launch_(launch)
            sync()

    def pcl_call(n: int) -> None:
        finish = queue.finish
        for _ in range(n):
            knl(queue, gsz, lsz, pbuf, one)
            finish()

    def pcl_setargs(n: int) -> None:
        finish, set_args, enq = queue.finish, knl.set_args, pcl.enqueue_nd_range_kernel
        for _ in range(n):
            set_args(pbuf, one)
            enq(queue, knl, gsz, lsz)
            finish()

    def pcl_enqueue(n: int) -> None:
        knl.set_args(pbuf, one)
        finish, enq = queue.finish, pcl.enqueue_nd_range_kernel
        for _ in range(n):
            enq(queue, knl, gsz, lsz)
            finish()

    def raw_floor(n: int) -> None:
        enq, fin, null = raw.clEnqueueNDRangeKernel, raw.clFinish, ffi.NULL
        assert raw.clSetKernelArg(rk, 0, ffi.sizeof("cl_mem"), mem) == 0
        assert raw.clSetKernelArg(rk, 1, 4, ival) == 0
        for _ in range(n):
            enq(rq, rk, 1, null, rg, rg, 0, null, null)
            fin(rq)

    targets = Targets()

    # ------------------------------------------------------------------ 1. launch + finish
    sec1 = [
        Variant("ours", "ours launch + synchronize", ours_checked),
        Variant("ours_u", "ours launch_unchecked + synchronize", ours_unchecked),
        Variant("pcl", "pyopencl knl(queue, ...) + finish", pcl_call),
        Variant("pcl_sa", "pyopencl set_args + enqueue_nd_range_kernel + finish", pcl_setargs),
        Variant("pcl_e", "pyopencl enqueue_nd_range_kernel + finish (args set once)", pcl_enqueue),
        Variant("raw", "raw cffi clEnqueueNDRangeKernel + clFinish (args set once)", raw_floor),
    ]
    run(sec1, repeats, target_s)
    v = {x.key: x for x in sec1}
    print("== 1. launch + finish (global size 1), per iteration")
    print(f"  {'variant':<60} {'median us':>9}  {'IQR%':>5}  {'/ pyopencl knl()':>16}  {'/ pyopencl set_args':>19}")
    for x in sec1:
        print(f"  {x.label:<60} {us(x.median)}  {spread(x):5.1f}  {ratio(x, v['pcl']):16.3f}  "
              f"{ratio(x, v['pcl_sa']):19.3f}")
    targets.add("launch+finish: ours checked / pyopencl knl()", ratio(v["ours"], v["pcl"]), "<=",
                TARGET_LAUNCH_FINISH)
    targets.add("launch+finish: ours checked / pyopencl set_args+enqueue", ratio(v["ours"], v["pcl_sa"]), "<=",
                TARGET_LAUNCH)
    targets.add("launch+finish: ours unchecked / pyopencl knl()", ratio(v["ours_u"], v["pcl"]), "<=", TARGET_LAUNCH)
    targets.add("launch+finish: ours unchecked / pyopencl set_args+enqueue", ratio(v["ours_u"], v["pcl_sa"]), "<=",
                TARGET_LAUNCH)

    # ------------------------------------------------------------------ 2. enqueue only
    B = args.batch

    def batched(body: Callable[[int], None], finish: Callable[[], Any]) -> Callable[[int], None]:
        def f(n: int) -> None:
            for _ in range(n):
                body(B)
                finish()
        return f

    def ours_enq(m: int) -> None:
        launch_ = s.launch
        for _ in range(m):
            launch_(launch)

    def ours_enq_u(m: int) -> None:
        launch_ = s.launch_unchecked
        for _ in range(m):
            launch_(launch)

    def pcl_enq_call(m: int) -> None:
        for _ in range(m):
            knl(queue, gsz, lsz, pbuf, one)

    def pcl_enq_sa(m: int) -> None:
        set_args, enq = knl.set_args, pcl.enqueue_nd_range_kernel
        for _ in range(m):
            set_args(pbuf, one)
            enq(queue, knl, gsz, lsz)

    def pcl_enq_only(m: int) -> None:
        knl.set_args(pbuf, one)
        enq = pcl.enqueue_nd_range_kernel
        for _ in range(m):
            enq(queue, knl, gsz, lsz)

    def raw_enq(m: int) -> None:
        enq, null = raw.clEnqueueNDRangeKernel, ffi.NULL
        assert raw.clSetKernelArg(rk, 0, ffi.sizeof("cl_mem"), mem) == 0
        assert raw.clSetKernelArg(rk, 1, 4, ival) == 0
        for _ in range(m):
            enq(rq, rk, 1, null, rg, rg, 0, null, null)

    rfin = lambda: raw.clFinish(rq)  # noqa: E731
    sec2 = [
        Variant("ours", "ours launch", batched(ours_enq, s.synchronize), B),
        Variant("ours_u", "ours launch_unchecked", batched(ours_enq_u, s.synchronize), B),
        Variant("pcl", "pyopencl knl(queue, ...)", batched(pcl_enq_call, queue.finish), B),
        Variant("pcl_sa", "pyopencl set_args + enqueue_nd_range_kernel", batched(pcl_enq_sa, queue.finish), B),
        Variant("pcl_e", "pyopencl enqueue_nd_range_kernel (args set once)", batched(pcl_enq_only, queue.finish), B),
        Variant("raw", "raw cffi clEnqueueNDRangeKernel (args set once)", batched(raw_enq, rfin), B),
    ]
    run(sec2, repeats, target_s)
    v = {x.key: x for x in sec2}
    print(f"\n== 2. enqueue only: {B} launches then one finish, per launch")
    print(f"  {'variant':<60} {'median us':>9}  {'IQR%':>5}  {'/ pyopencl knl()':>16}  {'/ pyopencl set_args':>19}")
    for x in sec2:
        print(f"  {x.label:<60} {us(x.median)}  {spread(x):5.1f}  {ratio(x, v['pcl']):16.3f}  "
              f"{ratio(x, v['pcl_sa']):19.3f}")
    targets.add("enqueue-only: ours checked / pyopencl knl()", ratio(v["ours"], v["pcl"]), "<=", TARGET_LAUNCH)
    targets.add("enqueue-only: ours checked / pyopencl set_args+enqueue", ratio(v["ours"], v["pcl_sa"]), "<=",
                TARGET_LAUNCH)
    targets.add("enqueue-only: ours unchecked / pyopencl knl()", ratio(v["ours_u"], v["pcl"]), "<=", TARGET_LAUNCH)

    # ------------------------------------------------------------------ 3. copies
    # Both sides copy from / into the same host arrays.  The device buffers are allocated afresh (and
    # committed by one untimed copy) before every repeat: where a buffer's pages land moves a 64 MiB copy
    # by +-7% from one buffer to the next on either side, so a single buffer pair would be a coin toss.
    # Which side allocates and commits its buffer last matters too (by a few % at 64 MiB, through what is
    # left in the caches), so the order alternates between repeats and a scratch copy evicts the caches.
    sizes = [("4 KiB", 4 << 10), ("1 MiB", 1 << 20), ("64 MiB", 64 << 20)]
    sec3: list[tuple[str, str, Variant, Variant, Variant]] = []
    # a control: pyopencl on *our* cl_mem and queue (wrapped with from_int_ptr), which takes buffer placement
    # out of the comparison and leaves only the two bindings' per-copy costs
    pqueue_ours = pcl.CommandQueue.from_int_ptr(int(ffi.cast("uintptr_t", s.queue)), retain=True)
    slots: list[dict[str, Any]] = []
    scratch = (np.empty(64 << 20, np.uint8), np.zeros(64 << 20, np.uint8))
    renewals = [0]

    def renew() -> None:
        ours_first = renewals[0] % 2 == 0
        renewals[0] += 1
        for slot in slots:
            if "ours" in slot:
                slot["shared"].release()
                slot["ours"].free()
                slot["pcl"].release()
            for side in ("ours", "pcl") if ours_first else ("pcl", "ours"):
                if side == "ours":
                    slot["ours"] = dev.alloc(slot["nbytes"])
                    slot["shared"] = pcl.Buffer.from_int_ptr(int(ffi.cast("uintptr_t", slot["ours"].buffer)),
                                                             retain=True)
                    s.copy_from_host(slot["ours"], slot["host"])
                    s.synchronize()
                else:
                    slot["pcl"] = pcl.Buffer(ctx, pcl.mem_flags.READ_WRITE, slot["nbytes"])
                    pcl.enqueue_copy(queue, slot["pcl"], slot["host"])
                    queue.finish()
        np.copyto(scratch[0], scratch[1])

    for label, nb in sizes:
        host = (np.arange(nb // 4, dtype=np.int32) * 3) % 1000
        out = np.empty_like(host)
        slot: dict[str, Any] = {"nbytes": nb, "host": host, "out": out}
        slots.append(slot)
        renew()
        # correctness first
        out[:] = 0
        s.copy_to_host(out, slot["ours"])
        s.synchronize()
        assert np.array_equal(out, host)
        out[:] = 0
        pcl.enqueue_copy(queue, out, slot["pcl"])
        assert np.array_equal(out, host)
        out[:] = 0
        pcl.enqueue_copy(pqueue_ours, out, slot["shared"])
        assert np.array_equal(out, host)

        def o_h2d(n: int, slot: dict[str, Any] = slot) -> None:
            cp, sync, dbuf, host = s.copy_from_host, s.synchronize, slot["ours"], slot["host"]
            for _ in range(n):
                cp(dbuf, host)
                sync()

        def o_d2h(n: int, slot: dict[str, Any] = slot) -> None:
            cp, sync, dbuf, out = s.copy_to_host, s.synchronize, slot["ours"], slot["out"]
            for _ in range(n):
                cp(out, dbuf)
                sync()

        def p_h2d(n: int, slot: dict[str, Any] = slot) -> None:
            cp, fin, pb, host = pcl.enqueue_copy, queue.finish, slot["pcl"], slot["host"]
            for _ in range(n):
                cp(queue, pb, host)
                fin()

        def p_d2h(n: int, slot: dict[str, Any] = slot) -> None:
            cp, fin, pb, out = pcl.enqueue_copy, queue.finish, slot["pcl"], slot["out"]
            for _ in range(n):
                cp(queue, out, pb)
                fin()

        def c_h2d(n: int, slot: dict[str, Any] = slot) -> None:
            cp, fin, pb, host = pcl.enqueue_copy, pqueue_ours.finish, slot["shared"], slot["host"]
            for _ in range(n):
                cp(pqueue_ours, pb, host)
                fin()

        def c_d2h(n: int, slot: dict[str, Any] = slot) -> None:
            cp, fin, pb, out = pcl.enqueue_copy, pqueue_ours.finish, slot["shared"], slot["out"]
            for _ in range(n):
                cp(pqueue_ours, out, pb)
                fin()

        sec3.append((label, "H2D", Variant("ours", f"ours H2D {label}", o_h2d, nbytes=nb),
                     Variant("pcl", f"pyopencl H2D {label}", p_h2d, nbytes=nb),
                     Variant("shared", f"pyopencl on our buffer H2D {label}", c_h2d, nbytes=nb)))
        sec3.append((label, "D2H", Variant("ours", f"ours D2H {label}", o_d2h, nbytes=nb),
                     Variant("pcl", f"pyopencl D2H {label}", p_d2h, nbytes=nb),
                     Variant("shared", f"pyopencl on our buffer D2H {label}", c_d2h, nbytes=nb)))
    run_interleaved([list(row[2:]) for row in sec3], repeats, target_s, before_repeat=renew)
    print("\n== 3. host <-> device copies, each followed by synchronize / finish")
    print("   (throughput ratios ours / pyopencl; 'same buffer' = pyopencl copying to/from our cl_mem on our queue)")
    print(f"  {'copy':<14} {'ours us':>10} {'ours GB/s':>10} {'pyopencl us':>12} {'pyopencl GB/s':>14} "
          f"{'ours/pyopencl':>14} {'same buffer':>12}  {'IQR% ours/pcl/same':>19}")
    for label, d, o, p, c in sec3:
        thr = 1 / ratio(o, p)  # throughput ratio = inverse of the time ratio
        thr_c = 1 / ratio(o, c)
        print(f"  {d + ' ' + label:<14} {us(o.median):>10} {o.nbytes / o.median / 1e9:10.2f} {us(p.median):>12} "
              f"{p.nbytes / p.median / 1e9:14.2f} {thr:14.3f} {thr_c:12.3f}  "
              f"{spread(o):5.1f}/{spread(p):5.1f}/{spread(c):5.1f}")
        targets.add(f"copy {d} {label}: ours / pyopencl throughput", thr, ">=", TARGET_COPY)
    for label, d, o, p, c in sec3:
        targets.note(f"copy {d} {label}: ours / pyopencl on our buffer, throughput", 1 / ratio(o, c))

    # ------------------------------------------------------------------ 4. allocation
    pool = dev.memory_pool()
    ppool = pcl_tools.MemoryPool(pcl_tools.ImmediateAllocator(queue))
    sec4: list[tuple[str, list[Variant]]] = []
    mf = pcl.mem_flags.READ_WRITE
    for label, nb in [("256 B", 256), ("64 KiB", 64 << 10), ("4 MiB", 4 << 20)]:
        def o_pool(n: int, nb: int = nb) -> None:
            alloc = pool.alloc
            for _ in range(n):
                alloc(nb).free()

        def o_raw(n: int, nb: int = nb) -> None:
            alloc = dev.alloc
            for _ in range(n):
                alloc(nb).free()

        def o_unchecked(n: int, nb: int = nb) -> None:
            alloc = dev.alloc_unchecked
            for _ in range(n):
                alloc(nb).free_unchecked()  # type: ignore[union-attr]  # (an Error only for a bad size)

        def raw_pair(n: int, nb: int = nb) -> None:
            create, release, c, null = raw.clCreateBuffer, raw.clReleaseMemObject, dev.context, ffi.NULL
            for _ in range(n):
                release(create(c, mf, nb, null, null))

        def p_buf(n: int, nb: int = nb) -> None:
            B_ = pcl.Buffer
            for _ in range(n):
                B_(ctx, mf, nb).release()

        def p_pool(n: int, nb: int = nb) -> None:
            alloc = ppool.allocate
            for _ in range(n):
                alloc(nb).release()

        sec4.append((label, [Variant("pool", f"ours MemoryPool.alloc + free {label}", o_pool),
                             Variant("raw", f"ours dev.alloc + free {label}", o_raw),
                             Variant("unchecked", f"ours alloc_unchecked + free_unchecked {label}", o_unchecked),
                             Variant("cffi", f"raw cffi clCreateBuffer + clReleaseMemObject {label}", raw_pair),
                             Variant("pbuf", f"pyopencl cl.Buffer + release {label}", p_buf),
                             Variant("ppool", f"pyopencl tools.MemoryPool allocate + release {label}", p_pool)]))
    run([x for _, row in sec4 for x in row], repeats, target_s)
    print("\n== 4. allocation: alloc + free, per pair")
    print(f"  {'variant':<60} {'median us':>9}  {'IQR%':>5}  {'/ ours pool':>11}  {'/ pyopencl pool':>15}")
    for label, row in sec4:
        v = {x.key: x for x in row}
        for x in row:
            print(f"  {x.label:<60} {us(x.median)}  {spread(x):5.1f}  {ratio(x, v['pool']):11.3f}  "
                  f"{ratio(x, v['ppool']):15.3f}")
        targets.add(f"alloc {label}: ours MemoryPool / ours dev.alloc", ratio(v["pool"], v["raw"]), "<=", TARGET_POOL)
    for label, row in sec4:
        v = {x.key: x for x in row}
        targets.add(f"alloc {label}: ours dev.alloc / pyopencl cl.Buffer", ratio(v["raw"], v["pbuf"]), "<=",
                    TARGET_ALLOC)
        targets.add(f"alloc {label}: ours MemoryPool / pyopencl tools.MemoryPool", ratio(v["pool"], v["ppool"]),
                    "<=", TARGET_POOL_PCL)
        targets.add(f"alloc {label}: ours alloc_unchecked / raw cffi pair", ratio(v["unchecked"], v["cffi"]), "<=",
                    TARGET_UNCHECKED)
    for label, row in sec4:
        v = {x.key: x for x in row}
        targets.note(f"alloc {label}: raw cffi pair / pyopencl cl.Buffer (our binding's floor)",
                     ratio(v["cffi"], v["pbuf"]))

    # ------------------------------------------------------------------ 5. open
    open_rows = time_open(args.open_repeats or (5 if args.quick else 11))
    print("\n== 5. open, in fresh processes (medians; imports of the packages themselves excluded unless said)")
    for what, ms in open_rows["table"]:
        print(f"  {what:<76} {ms:8.2f} ms")
    targets.add("open: registry + first device / pyopencl get_platforms+Context+CommandQueue",
                open_rows["first_device"], "<=", TARGET_FIRST_DEVICE)
    targets.add(f"open: Backend.open (devices listed) / {TARGET_OPEN_MS:.0f} ms", open_rows["open"], "<=", 1.0)
    targets.note("open: registry + first device / pyopencl, both with their package's import",
                 open_rows["with_imports"])

    # ------------------------------------------------------------------ 6. the binding's own work
    # a stream of its own whose bound vendor calls (clEnqueueNDRangeKernel, clEnqueueWriteBuffer/ReadBuffer,
    # clFinish) are a Python function returning 0: what is left is the binding's Python work per call, plus that
    # function's own cost (printed); the work the device does is out of the picture
    s6 = dev.create_stream()
    def noop(*a: Any) -> int:
        return 0

    s6._enqueue_kernel = s6._write = s6._read = s6._finish = noop
    h6, o6, b6 = np.arange(1024, dtype=np.int32), np.empty(1024, np.int32), dev.alloc(4096)

    def w_noop(n: int) -> None:
        for _ in range(n):
            noop(1, 2, 3, 4, 5, 6, 7, 8, 9)
            noop(1)

    def w_launch(n: int) -> None:
        launch_, sync = s6.launch, s6.synchronize
        for _ in range(n):
            launch_(launch)
            sync()

    def w_launch_u(n: int) -> None:
        launch_, sync = s6.launch_unchecked, s6.synchronize
        for _ in range(n):
            launch_(launch)
            sync()

    def w_h2d(n: int) -> None:
        cp, sync = s6.copy_from_host, s6.synchronize
        for _ in range(n):
            cp(b6, h6)
            sync()

    def w_d2h(n: int) -> None:
        cp, sync = s6.copy_to_host, s6.synchronize
        for _ in range(n):
            cp(o6, b6)
            sync()

    sec6 = [Variant("noop", "two calls of the no-op (its own cost, included below)", w_noop),
            Variant("launch", "launch + synchronize", w_launch),
            Variant("launch_u", "launch_unchecked + synchronize", w_launch_u),
            Variant("h2d", "copy_from_host + synchronize (4 KiB numpy array)", w_h2d),
            Variant("d2h", "copy_to_host + synchronize (4 KiB numpy array)", w_d2h)]
    run(sec6, repeats, target_s)
    print("\n== 6. the binding's own work: the stream's vendor calls replaced by a Python no-op, per iteration")
    print(f"  {'variant':<60} {'median us':>9}  {'IQR%':>5}")
    for x in sec6:
        print(f"  {x.label:<60} {us(x.median)}  {spread(x):5.1f}")

    targets.print()
    print(f"\ntotal {time.perf_counter() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
