#!/usr/bin/env python
"""The Vulkan dispatch round trip (issue 28 item 4): ours vs wgpu-py (wgpu-native), the same SPIR-V vadd shader on
the same lavapipe device, side by side in one process.

Run from the repository root (``make bench-deps`` installs wgpu)::

    .venv/bin/python bench/bench_vulkan.py [--repeats N] [--quick] [--target-ms MS] [--batch N]

The shader is one GLSL compute shader (``c[i] = a[i] + b[i]``, local size 64, three storage buffers), compiled
once by ``glslangValidator`` to SPIR-V; both sides load those bytes (wgpu-py's ``create_shader_module`` takes
SPIR-V, which wgpu-native translates through naga).  Buffers, pipelines and wgpu's bind group are made once.
wgpu is forced onto Vulkan (``WGPU_BACKEND_TYPE=Vulkan``) and the fallback (CPU) adapter, and its adapter info
must name llvmpipe.  Rows (bench/_harness.py: every variant timed once per repeat in a rotated order; a ratio is
the median over repeats of the paired per-repeat ratio):

1. round trip, 1024 elements   ours ``s.launch(KernelLaunch(...)); s.synchronize()`` (checked), ours
                               ``launch_unchecked`` + ``synchronize``, vs wgpu: a command encoder, a compute pass
                               (set_pipeline, set_bind_group, dispatch_workgroups, end), ``queue.submit([enc.finish()])``
                               and a blocking device poll (``wgpuDevicePoll(wait=True)``: wgpu-py 0.32.0's public
                               ``queue.on_submitted_work_done_sync()`` fails with a cffi callback-type mismatch
                               against its wgpu-native, checked and printed at start).
2. round trip, 1M elements     the same with 1,048,576 elements (16384 workgroups).
3. launch only                 ``--batch`` dispatches, then one wait; the time per dispatch: ours checked launch
                               (recorded into the stream's open command buffer, submitted every 64 commands) vs
                               wgpu's encode + submit of one pass per dispatch, and wgpu's passes recorded into one
                               encoder and submitted once (the same batching as ours).

4. allocation (not timed)     issue 27's rule on Vulkan (issue 28 item 2): the same ``KernelLaunch`` launched again
                               by ``launch_unchecked`` and ``launch`` (``--alloc-launches`` times, after a warm-up),
                               and the checked round trip: calls into CPython's allocators per call
                               (``bench/count_alloc.c``, built as ``bench/bench_launch_cpu.py`` builds it), the net
                               change of ``sys.getallocatedblocks()`` and of ``tracemalloc``'s traced bytes, less
                               what measuring costs (``bench_launch_cpu.allocations``).  A launch records into the
                               stream's open batch; every 64th submits it, which makes its timeline value and its
                               entry in the stream's pending list (those are the fractional calls per launch), and
                               the batches still pending at the end are the net blocks.

``--baseline REV`` adds, to sections 1 and 3, the same rows run by the Vulkan stream module of git revision REV
(``runtime/ironaccelerator_runtime/backends/vulkan/stream.py`` as ``git show`` prints it, loaded beside this tree's
and given a stream of the same device; the rest of the runtime is this tree's): a before/after comparison of a
change to the stream, side by side in one process, printed as ``ours (REV)`` with the ratio now / REV.  It also
prints the calling thread's CPU time per checked round trip (1024) of each (``time.thread_time()`` over 500 round
trips, the two alternated, ``repeats`` times; medians): on a loaded machine the wall time of a round trip is mostly
waiting for lavapipe's threads to be scheduled, while the CPU time is the work done on the calling thread (ours,
and lavapipe's own inside ``vkQueueSubmit`` and the wait).

Target printed: ours checked round trip (1024) / wgpu <= 0.7.  Kompute (``kp``) is absent: no wheel of it is
installable here (printed).
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for sub in ("runtime", "generated"):
    sys.path.insert(0, str(ROOT / sub))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402

from _harness import Targets, Variant, ratio, run, spread, us  # noqa: E402

TARGET_ROUND_TRIP = 0.7  # ours checked launch + synchronize / wgpu-py encode + submit + wait (issue 28)
LOCAL = 64
SMALL, LARGE = 1024, 1 << 20

GLSL = """#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) buffer C { float c[]; };
void main() { uint i = gl_GlobalInvocationID.x; if (i < uint(c.length())) c[i] = a[i] + b[i]; }
"""


def spirv() -> bytes | str:
    """The shader's SPIR-V (glslangValidator), or why not."""
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "vadd.comp", Path(d) / "vadd.spv"
        src.write_text(GLSL)
        try:
            subprocess.run(["glslangValidator", "-V", str(src), "-o", str(out)], check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            return f"glslangValidator failed or is missing ({exc}): glslang-tools"
        return out.read_bytes()


def kompute_note() -> str:
    try:
        importlib.import_module("kp")  # (by name: kp and wgpu ship no type information)
    except ImportError:
        return ("Kompute (kp): absent: kp 0.9.0 (2024-01) has no wheel the package index here offers "
                "(`pip install --only-binary=:all: kp==0.9.0`: no matching distribution); not timed")
    return "Kompute (kp): importable, but no rows for it yet"


def wgpu_side(spv: bytes) -> dict[str, Any] | str:
    """wgpu-py on lavapipe, or why not."""
    os.environ.setdefault("WGPU_BACKEND_TYPE", "Vulkan")
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())  # (wgpu-native's EGL probe complains without)
    try:
        wgpu = importlib.import_module("wgpu")
    except (ImportError, OSError) as exc:
        return f"wgpu is not usable ({exc}): `make bench-deps`"
    try:
        adapter = wgpu.gpu.request_adapter_sync(power_preference="low-power", force_fallback_adapter=True)
    except Exception as exc:  # noqa: BLE001 (wgpu raises its own errors for no adapter)
        return f"wgpu found no fallback adapter ({exc})"
    info = adapter.info
    if "llvmpipe" not in str(info.get("device", "")) or info.get("backend_type") != "Vulkan":
        return f"wgpu's adapter is not lavapipe on Vulkan: {dict(info)}"
    device = adapter.request_device_sync()
    module = device.create_shader_module(code=spv)
    pipeline = device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
    return {"wgpu": wgpu, "info": info, "device": device, "pipeline": pipeline}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=None, help="repeats per variant (default 31, --quick 15)")
    ap.add_argument("--quick", action="store_true", help="shorter samples and 15 repeats")
    ap.add_argument("--target-ms", type=float, default=None, help="duration of one sample (default 25, --quick 10)")
    ap.add_argument("--batch", type=int, default=64, help="dispatches per wait in the launch-only row")
    ap.add_argument("--baseline", metavar="REV", default=None,
                    help="also time the Vulkan stream module of git revision REV (sections 1 and 3)")
    ap.add_argument("--alloc-launches", type=int, default=6400,
                    help="launches counted in the allocation section (0: skip it)")
    args = ap.parse_args()
    repeats = args.repeats or (15 if args.quick else 31)
    target_s = (args.target_ms or (10.0 if args.quick else 25.0)) / 1e3

    spv = spirv()
    if isinstance(spv, str):
        print(f"bench_vulkan: skipped: {spv}")
        return 0
    import ironaccelerator as ia

    try:
        backend = ia.BackendRegistry.default().get("vulkan")
        names = [d.name for d in backend.devices()]
    except ia.Error as exc:
        print(f"bench_vulkan: skipped: no Vulkan backend here ({exc})")
        return 0
    idx = next((i for i, n in enumerate(names) if "llvmpipe" in n), None)
    if idx is None:
        print(f"bench_vulkan: skipped: no lavapipe device (mesa-vulkan-drivers); devices: {names}")
        return 0
    w = wgpu_side(spv)
    if isinstance(w, str):
        print(f"bench_vulkan: skipped: {w}")
        return 0
    wgpu, wdev, wpipe = w["wgpu"], w["device"], w["pipeline"]
    dev = backend.open(idx)
    s = dev.create_stream()
    base = baseline_stream(dev, args.baseline) if args.baseline else None
    if isinstance(base, str):
        print(f"bench_vulkan: --baseline: {base}")
        return 2
    kernel = dev.load_module(spv).kernel("main")

    print(f"device: {dev.descriptor.name}")
    print(f"wgpu {wgpu.__version__} adapter: {w['info']['device']} ({w['info']['description']}), "
          f"backend {w['info']['backend_type']}, adapter type {w['info']['adapter_type']}")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, cpus={os.cpu_count()}, "
          f"ours kernel signature: {getattr(kernel, 'signature', '?')}")
    print(kompute_note())
    try:
        wdev.queue.on_submitted_work_done_sync()
        waiter = "queue.on_submitted_work_done_sync()"
    except TypeError as exc:
        waiter = f"device._poll_wait() (on_submitted_work_done_sync() fails: {str(exc)[:90]}...)"
    print(f"wgpu wait: {waiter}")
    print(f"repeats={repeats}, sample~{target_s * 1e3:.0f} ms, batch={args.batch}\n")

    U = wgpu.BufferUsage
    cases: dict[int, dict[str, Any]] = {}
    for n in (SMALL, LARGE):
        x = np.arange(n, dtype=np.float32)
        y = np.full(n, 0.5, np.float32)
        da, db, dc = dev.alloc(x.nbytes), dev.alloc(y.nbytes), dev.alloc(x.nbytes)
        s.copy_from_host(da, x)
        s.copy_from_host(db, y)
        s.synchronize()
        launch = ia.KernelLaunch(kernel, ia.LaunchDims(grid=n // LOCAL, block=LOCAL), (da, db, dc))
        wa = wdev.create_buffer_with_data(data=x, usage=U.STORAGE)
        wb = wdev.create_buffer_with_data(data=y, usage=U.STORAGE)
        wc = wdev.create_buffer(size=x.nbytes, usage=U.STORAGE | U.COPY_SRC)
        bg = wdev.create_bind_group(layout=wpipe.get_bind_group_layout(0), entries=[
            {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}} for i, b in enumerate((wa, wb, wc))])
        # the same result from both before timing
        s.launch(launch)
        out = np.zeros(n, np.float32)
        s.copy_to_host(out, dc)
        s.synchronize()
        assert np.array_equal(out, x + y), "ours"
        enc = wdev.create_command_encoder()
        cp = enc.begin_compute_pass()
        cp.set_pipeline(wpipe)
        cp.set_bind_group(0, bg)
        cp.dispatch_workgroups(n // LOCAL)
        cp.end()
        wdev.queue.submit([enc.finish()])
        assert np.array_equal(np.frombuffer(wdev.queue.read_buffer(wc), np.float32), x + y), "wgpu"
        cases[n] = {"launch": launch, "bg": bg, "groups": n // LOCAL, "keep": (da, db, dc, wa, wb, wc)}

    queue, poll = wdev.queue, wdev._poll_wait

    def ours(launch: Any, s: Any = s) -> Any:
        def body(k: int) -> None:
            launch_, sync = s.launch, s.synchronize
            for _ in range(k):
                launch_(launch)
                sync()
        return body

    def ours_unchecked(launch: Any) -> Any:
        def body(k: int) -> None:
            launch_, sync = s.launch_unchecked, s.synchronize
            for _ in range(k):
                launch_(launch)
                sync()
        return body

    def wgpu_rt(bg: Any, groups: int, wait: bool = True) -> Any:
        def body(k: int) -> None:
            enc_, submit = wdev.create_command_encoder, queue.submit
            for _ in range(k):
                enc = enc_()
                cp = enc.begin_compute_pass()
                cp.set_pipeline(wpipe)
                cp.set_bind_group(0, bg)
                cp.dispatch_workgroups(groups)
                cp.end()
                submit([enc.finish()])
                if wait:
                    poll()
            if not wait:
                poll()
        return body

    batch = args.batch

    def ours_batch(launch: Any, s: Any = s) -> Any:
        def body(k: int) -> None:
            launch_ = s.launch
            for _ in range(k):
                for _ in range(batch):
                    launch_(launch)
                s.synchronize()
        return body

    def wgpu_batch(bg: Any, groups: int) -> Any:
        inner = wgpu_rt(bg, groups, wait=False)

        def body(k: int) -> None:
            for _ in range(k):
                inner(batch)
        return body

    def wgpu_one_encoder(bg: Any, groups: int) -> Any:
        def body(k: int) -> None:
            for _ in range(k):
                enc = wdev.create_command_encoder()
                for _ in range(batch):
                    cp = enc.begin_compute_pass()
                    cp.set_pipeline(wpipe)
                    cp.set_bind_group(0, bg)
                    cp.dispatch_workgroups(groups)
                    cp.end()
                queue.submit([enc.finish()])
                poll()
        return body

    c0, c1 = cases[SMALL], cases[LARGE]
    old: list[Variant] = []
    old_batch: list[Variant] = []
    if base is not None:
        old = [Variant("old", f"ours (baseline {args.baseline}) launch + synchronize", ours(c0["launch"], base))]
        old_batch = [Variant("old", f"ours (baseline {args.baseline}) launch (checked)", ours_batch(c0["launch"], base),
                             ops_per_call=batch)]
    sections = [
        (f"1. round trip, {SMALL} elements (dispatch + submit + wait)", [
            Variant("ours", "ours launch + synchronize (checked)", ours(c0["launch"])),
            Variant("ours_u", "ours launch_unchecked + synchronize", ours_unchecked(c0["launch"])),
            *old,
            Variant("wgpu", "wgpu encoder + pass + submit + poll(wait)", wgpu_rt(c0["bg"], c0["groups"])),
        ]),
        (f"2. round trip, {LARGE} elements (1M vadd)", [
            Variant("ours", "ours launch + synchronize (checked)", ours(c1["launch"])),
            Variant("wgpu", "wgpu encoder + pass + submit + poll(wait)", wgpu_rt(c1["bg"], c1["groups"])),
        ]),
        (f"3. launch only, {SMALL} elements ({batch} dispatches, then one wait; per dispatch)", [
            Variant("ours", "ours launch (checked)", ours_batch(c0["launch"]), ops_per_call=batch),
            *old_batch,
            Variant("wgpu_1", "wgpu one encoder, a pass per dispatch, 1 submit", wgpu_one_encoder(c0["bg"], c0["groups"]),
                    ops_per_call=batch),
            Variant("wgpu", "wgpu encoder + pass + submit", wgpu_batch(c0["bg"], c0["groups"]), ops_per_call=batch),
        ]),
    ]
    targets = Targets()
    t0 = time.perf_counter()
    for title, vs in sections:
        run(vs, repeats, target_s)
        ref = vs[-1]
        print(f"== {title}")
        print(f"  {'variant':<50} {'us/op':>9}  {'IQR%':>5}  {'/ wgpu':>7}")
        for v in vs:
            r = ratio(v, ref)
            print(f"  {v.label:<50} {us(v.median)}  {spread(v):5.1f}  {r:6.3f}x")
        print()
    (s1, v1), (s2, v2), (s3, v3) = sections
    if base is not None:
        cpu_now: list[float] = []
        cpu_old: list[float] = []
        for _ in range(repeats):
            for samples, body in ((cpu_now, v1[0].body), (cpu_old, v1[2].body)):
                started = time.thread_time()
                body(500)
                samples.append((time.thread_time() - started) / 500)
        r = statistics.median(a / b for a, b in zip(cpu_now, cpu_old))
        print(f"== calling thread's CPU time per checked round trip ({SMALL}): ours {us(statistics.median(cpu_now))} "
              f"us, baseline {args.baseline} {us(statistics.median(cpu_old))} us, ratio {r:.3f}x\n")
    targets.add(f"ours checked round trip ({SMALL}) / wgpu-py", ratio(v1[0], v1[-1]), "<=", TARGET_ROUND_TRIP)
    targets.note(f"ours unchecked round trip ({SMALL}) / wgpu-py", ratio(v1[1], v1[-1]))
    targets.note(f"ours checked round trip (1M vadd) / wgpu-py", ratio(v2[0], v2[-1]))
    targets.note("ours checked launch only / wgpu-py encode + submit", ratio(v3[0], v3[-1]))
    targets.note("ours checked launch only / wgpu-py passes in one encoder", ratio(v3[0], v3[-2]))
    if base is not None:
        targets.note(f"ours checked round trip (1024) / baseline {args.baseline}'s", ratio(v1[0], v1[2]))
        targets.note(f"baseline {args.baseline}'s checked round trip (1024) / wgpu-py", ratio(v1[2], v1[-1]))
        targets.note(f"ours checked launch only / baseline {args.baseline}'s", ratio(v3[0], v3[1]))
    targets.print()
    print(f"\n(timed in {time.perf_counter() - t0:.1f} s)")
    if args.alloc_launches:
        allocation_section(s, c0["launch"], args.alloc_launches)
    s.synchronize()
    if base is not None:
        base.synchronize()
    for c in cases.values():
        for m in c["keep"][:3]:
            m.free()
    dev.close()
    return 0


def baseline_stream(dev: Any, rev: str) -> Any:
    """A stream of ``dev`` made by the Vulkan stream module of git revision ``rev``, or why not."""
    import importlib.util

    rel = "runtime/ironaccelerator_runtime/backends/vulkan/stream.py"
    try:
        text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{rel}"], check=True, capture_output=True,
                              text=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"git show {rev}:{rel} failed ({getattr(exc, 'stderr', exc)!s:.200})"
    path = Path(tempfile.mkdtemp(prefix="ia-bench-vulkan-")) / "stream_baseline.py"
    path.write_text(text)
    name = "ironaccelerator_runtime.backends.vulkan._stream_baseline"  # (its relative imports: this tree's package)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.VulkanStream(dev)


def allocation_section(s: Any, launch: Any, n: int) -> None:
    """Section 4: allocator calls per call of a reused launch and of the round trip (see the module's doc)."""
    import ctypes

    import bench_launch_cpu

    print("\n== 4. allocation per call (not timed): a reused KernelLaunch")
    path = bench_launch_cpu.build_counter()
    if isinstance(path, str):
        print(f"  skipped: {path}")
        return
    counter = ctypes.PyDLL(str(path))
    counter.count_calls.restype = ctypes.c_ulonglong

    def round_trip(launch_: Any) -> None:
        s.launch(launch_)
        s.synchronize()

    print(f"  {'call':<50} {'allocs/call':>11}  {'blocks':>6}  {'traced B':>8}")
    for label, f, times in (("ours launch_unchecked (reused)", s.launch_unchecked, n),
                            ("ours launch (checked, reused)", s.launch, n),
                            ("ours launch + synchronize (checked)", round_trip, max(1, n // 10))):
        calls, blocks, traced = bench_launch_cpu.allocations(f, launch, times, counter)
        s.synchronize()
        print(f"  {label:<50} {calls:11.3f}  {blocks:6d}  {traced:8d}")


if __name__ == "__main__":
    raise SystemExit(main())
