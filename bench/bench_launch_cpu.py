#!/usr/bin/env python
"""The CUDA backend's kernel-launch and alloc + free cost on the CPU, against cuda.core, over a stub driver.

Run from the repository root (after ``generate`` and ``build``)::

    .venv/bin/python bench/bench_launch_cpu.py [--repeats N] [--quick] [--target-ms MS]

No GPU is needed.  The script compiles ``bench/stub_cuda/stub_cuda.c`` with gcc, against the toolkit's real
``cuda.h``, into ``build/bench/stub_cuda/libcuda.so.1``: a driver whose every function returns at once (fake
handles, PTX kernels looked up by name, parameter sizes parsed from the PTX).  It then runs itself again in a
subprocess with ``LD_LIBRARY_PATH`` pointing at that directory, so our binding (its trampolines ``dlopen
("libcuda.so.1")``) and cuda-bindings (``cuda.pathfinder``, the same name) load the stub, and checks in
``/proc/self/maps`` that one and the same stub is the only ``libcuda`` mapped.

What it measures is therefore the **CPU-side cost of each binding** (argument handling, packing, checks,
the call into C).  On a GPU the driver's own work per call (~2-5 us for a launch) is added to both sides
alike, so the ratios there are closer to 1; bench/bench_gpu.py measures that on real hardware.

Sections (every variant of a section is timed once per repeat, in a rotated order; the tables show the
median per-op time and ratios, a ratio being the median over repeats of the paired per-repeat ratio):

1. launch, empty kernel (no arguments), grid 1 x block 32, per launch:
     ours launch               ``s.launch(KernelLaunch(...))``, the KernelLaunch built once (checked)
     ours launch (new launch)  the same, building the KernelLaunch on every call (``KernelLaunch(...)``)
     ours launch(k, dims, *a)  ``s.launch(kernel, dims, *args)``: cuda.core's order, the KernelLaunch built per
                               call in C (the compiled launcher; GPU streams)
     ours launch_unchecked     ``s.launch_unchecked(...)``
     cuda.core launch          ``launch(stream, config, kernel, *args)`` (cuda.core 1.x)
     cuda-bindings             ``driver.cuLaunchKernel(...)``, arguments as the (values, ctypes types) tuple
     cuda-bindings, packed     ``driver.cuLaunchKernel(...)``, a ``void *[]`` packed once (its floor)
     raw cffi                  our unchecked ``cuLaunchKernel`` on a ``void *[]`` packed once (our floor)
2. launch, a realistic kernel: ``axpy(const float *x, float *y, int n)`` (2 pointers + an int), same variants.
3. alloc + free of 64 KiB (the stub's cost does not depend on the size), per pair:
     ours dev.alloc + free, ours alloc_unchecked + free_unchecked, ours MemoryPool alloc + free (and its
     alloc_unchecked + free_unchecked),
     cuda.core ``Device.allocate(n, stream)`` + ``close()``, cuda-bindings ``cuMemAlloc`` + ``cuMemFree``,
     raw cffi ``cuMemAlloc`` + ``cuMemFree`` (the floor).

4. the hot path never allocates: a reused KernelLaunch launched 10^5 times with ``launch_unchecked`` and
   ``launch`` (empty and axpy), counting the calls into CPython's allocators (``bench/count_alloc.c``: the
   PYMEM_DOMAIN_MEM and PYMEM_DOMAIN_OBJ allocators wrapped), the net change of ``sys.getallocatedblocks()``
   and of ``tracemalloc``'s traced memory.  Not timed.

Targets (printed with OK / MISS; issue 27 item 1 and 2): per kernel, ``launch_unchecked`` <= 1.1x the raw cffi
floor, the checked ``launch`` <= 0.7x cuda.core's launch, ``launch`` with a new KernelLaunch per call
(``s.launch(kernel, dims, *args)``, which builds it in C) <= 1.0x cuda.core's (``s.launch(KernelLaunch(...))``,
whose Python ``__new__`` costs more, is printed for context); ``dev.alloc`` + ``free`` <= 1.5x cuda-bindings' ``cuMemAlloc`` + ``cuMemFree``,
``alloc_unchecked`` + ``free_unchecked`` <= 1.2x the raw cffi pair, ``memory_pool().alloc(n, stream)`` + free
<= 1.0x cuda.core's ``allocate`` (which draws from the driver's stream-ordered pool too); 0 allocator calls
per steady-state launch.  The stub counts the launches, allocations and frees that reach it; every variant
is checked to make exactly one driver launch (or one alloc and one free) per op before it is timed.
If gcc, ``cuda.h`` or cuda-core is missing the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import tracemalloc
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
STUB_SRC = ROOT / "bench" / "stub_cuda" / "stub_cuda.c"
STUB_DIR = ROOT / "build" / "bench" / "stub_cuda"
COUNTER_SRC = ROOT / "bench" / "count_alloc.c"
COUNTER = ROOT / "build" / "bench" / f"count_alloc{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
if str(ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(ROOT / "bench"))

from _harness import Targets, Variant, libs_mapped, ratio, run, spread  # noqa: E402
CHILD_ENV = "IA_BENCH_LAUNCH_CPU_CHILD"

KERNELS = r"""
extern "C" __global__ void empty() {}
extern "C" __global__ void axpy(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}
"""
N = 1 << 14  # elements (the stub never touches the memory)
ALLOC_BYTES = 64 << 10
TARGET = 1.0  # ours / cuda.core time (memory_pool)
TARGET_FLOOR = 1.1  # launch_unchecked / the raw cffi launch
TARGET_CHECKED = 0.7  # launch (checked, the KernelLaunch reused) / cuda.core
TARGET_NEW = 1.0  # launch with a new KernelLaunch per call / cuda.core
TARGET_ALLOC = 1.5  # dev.alloc + free / cuda-bindings cuMemAlloc + cuMemFree
TARGET_ALLOC_U = 1.2  # alloc_unchecked + free_unchecked / the raw cffi pair
HOT_CALLS = 100_000  # section 4


# ------------------------------------------------------------------------------------------ parent


def cuda_include() -> Path | None:
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "include" / "cuda.h").is_file():
            return Path(root) / "include"
    return None


def build_stub() -> Path | str:
    """Compile the stub (when its source is newer than the library); the library's path, or why not."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        return "no C compiler (gcc) found"
    inc = cuda_include()
    if inc is None:
        return "cuda.h not found (install the CUDA toolkit at /usr/local/cuda or set CUDA_HOME)"
    out = STUB_DIR / "libcuda.so.1"
    if out.is_file() and out.stat().st_mtime >= STUB_SRC.stat().st_mtime:
        return out
    STUB_DIR.mkdir(parents=True, exist_ok=True)
    cmd = [gcc, "-O2", "-shared", "-fPIC", "-Wall", "-Wextra", f"-I{inc}", "-o", str(out), str(STUB_SRC)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return f"compiling the stub failed:\n{' '.join(cmd)}\n{r.stderr}"
    return out


def build_counter() -> Path | str:
    """Compile bench/count_alloc.c (when newer than the library) against this Python's headers; its path, or why
    not."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        return "no C compiler (gcc) found"
    if COUNTER.is_file() and COUNTER.stat().st_mtime >= COUNTER_SRC.stat().st_mtime:
        return COUNTER
    COUNTER.parent.mkdir(parents=True, exist_ok=True)
    cmd = [gcc, "-O2", "-shared", "-fPIC", "-Wall", f"-I{sysconfig.get_paths()['include']}", "-o", str(COUNTER),
           str(COUNTER_SRC)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return f"compiling the allocator counter failed:\n{' '.join(cmd)}\n{r.stderr}"
    return COUNTER


def _allocations(f: Callable[[Any], Any], arg: Any, n: int, counter: Any) -> tuple[int, int, int]:
    counter.count_start()
    try:
        c0 = counter.count_calls()
        for _ in itertools.repeat(None, n):
            f(arg)
        calls = counter.count_calls() - c0
    finally:
        counter.count_stop()
    b0 = sys.getallocatedblocks()
    for _ in itertools.repeat(None, n):
        f(arg)
    blocks = sys.getallocatedblocks() - b0
    tracemalloc.start()
    try:
        t0 = tracemalloc.get_traced_memory()[0]
        for _ in itertools.repeat(None, n):
            f(arg)
        traced = tracemalloc.get_traced_memory()[0] - t0
    finally:
        tracemalloc.stop()
    return calls, blocks, traced


def allocations(f: Callable[[Any], Any], arg: Any, n: int, counter: Any) -> tuple[float, int, int]:
    """``f(arg)`` n times after a warm-up: (allocator calls per call, net change of sys.getallocatedblocks(), net
    change of tracemalloc's traced bytes), less what measuring costs (the same with no call: the counter's own
    ctypes call, the ints it returns).  The loop itself allocates nothing (itertools.repeat)."""
    for _ in range(1000):
        f(arg)
    _allocations(f, arg, 0, counter)  # (warms what measuring uses)
    base = _allocations(f, arg, 0, counter)
    got = _allocations(f, arg, n, counter)
    return (got[0] - base[0]) / n, got[1] - base[1], got[2] - base[2]


def parent(argv: list[str]) -> int:
    try:
        import cuda.core  # noqa: F401
    except ImportError:
        print("bench_launch_cpu: cuda-core is not installed (.venv/bin/pip install 'cuda-core>=1.2'): skipped")
        return 0
    stub = build_stub()
    if isinstance(stub, str):
        print(f"bench_launch_cpu: {stub}: skipped")
        return 0
    env = dict(os.environ)
    env[CHILD_ENV] = str(stub)
    env["LD_LIBRARY_PATH"] = os.pathsep.join([str(stub.parent)] + [p for p in env.get("LD_LIBRARY_PATH", "").split(
        os.pathsep) if p])
    return subprocess.call([sys.executable, str(Path(__file__).resolve()), *argv], env=env)


# ------------------------------------------------------------------------------------------ timing
# (the shared harness: Variant, run, ratio, spread, Targets, libs_mapped from bench/_harness.py)


def ns(x: float) -> str:
    return f"{x * 1e9:9.0f}"


# ------------------------------------------------------------------------------------------ child


class Counters(ctypes.Structure):
    _fields_ = [("launches", ctypes.c_ulonglong), ("allocs", ctypes.c_ulonglong), ("frees", ctypes.c_ulonglong),
                ("unknown_calls", ctypes.c_ulonglong)]


def child(args: argparse.Namespace) -> int:
    repeats = args.repeats or (15 if args.quick else 31)
    target_s = (args.target_ms or (5.0 if args.quick else 20.0)) / 1e3
    stub_path = os.environ[CHILD_ENV]
    t_start = time.perf_counter()

    import numpy as np

    sys.path.insert(0, str(ROOT / "generated"))
    import ironaccelerator as ia
    from ironaccelerator.backends.cuda import _backend as cb
    from ironaccelerator.backends.cuda import driver as iadrv

    # the stub reports a driver at least as new as NVRTC (cuda.core warns otherwise)
    major, minor = cb.compiler_version()
    os.environ["STUB_CUDA_DRIVER_VERSION"] = str(max(13000, major * 1000 + minor * 10))

    import cuda.core
    from cuda.bindings import driver as cbd
    from cuda.core import Device as CoreDevice, LaunchConfig, ObjectCode, launch as core_launch

    # -- ours
    dev = ia.BackendRegistry.default().get(ia.BackendKind.CUDA).open(0)
    assert isinstance(dev, cb.CudaDevice), dev  # (its allocations have .ptr, its streams .handle)
    s = dev.create_stream()
    ptx = cb.compile_source(KERNELS, "compute_90")
    mod = dev.load_module(ptx)
    k_empty, k_axpy = mod.kernel("empty"), mod.kernel("axpy")
    x, y = dev.alloc(4 * N), dev.alloc(4 * N)
    n32 = np.int32(N)
    dims = ia.LaunchDims(grid=(N + 255) // 256, block=256)

    # -- cuda.core (same stub, same PTX)
    cdev = CoreDevice(0)
    cdev.set_current()
    cs = cdev.create_stream()
    cmod = ObjectCode.from_ptx(ptx)
    ck_empty, ck_axpy = cmod.get_kernel("empty"), cmod.get_kernel("axpy")
    cx, cy = cdev.allocate(4 * N, stream=cs), cdev.allocate(4 * N, stream=cs)
    config = LaunchConfig(grid=(N + 255) // 256, block=256)

    # -- raw cuda-bindings: a module, stream and memory of its own
    def ok(r: Any) -> Any:
        err, *rest = r if isinstance(r, tuple) else (r,)
        assert err == cbd.CUresult.CUDA_SUCCESS, err
        return rest[0] if len(rest) == 1 else rest

    bmod = ok(cbd.cuModuleLoadData(ptx + b"\0"))
    bf_empty, bf_axpy = ok(cbd.cuModuleGetFunction(bmod, b"empty")), ok(cbd.cuModuleGetFunction(bmod, b"axpy"))
    bstream = ok(cbd.cuStreamCreate(1))
    bx, by = ok(cbd.cuMemAlloc(4 * N)), ok(cbd.cuMemAlloc(4 * N))
    bvals = (ctypes.c_uint64(int(bx)), ctypes.c_uint64(int(by)), ctypes.c_int32(N))
    bparams = (ctypes.c_void_p * 3)(*(ctypes.addressof(v) for v in bvals))
    bparams_addr = ctypes.addressof(bparams)
    bargs = ((int(bx), int(by), N), (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int))
    g0 = (N + 255) // 256

    # -- raw cffi floor: our unchecked cuLaunchKernel on a void *[] packed once
    raw, ffi = iadrv.unchecked, iadrv.ffi
    storage = ffi.new("char[20]")
    ffi.cast("uint64_t *", storage)[0] = x.ptr
    ffi.cast("uint64_t *", storage + 8)[0] = y.ptr
    ffi.cast("int32_t *", storage + 16)[0] = N
    rparams = ffi.new("void *[3]", [storage, storage + 8, storage + 16])
    rs, null = s.handle, ffi.NULL

    # -- what is loaded
    cudas = libs_mapped("libcuda")
    print("CPU-side binding cost over a STUB CUDA driver (no GPU; every driver call returns at once).")
    print("On a GPU the driver's own work per call is added to both sides; see bench/bench_gpu.py for that.\n")
    print(f"device: {dev.descriptor.name}")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, cuda.core {cuda.core.__version__}, "
          f"cuda-bindings {__import__('cuda.bindings').bindings.__version__}, "
          f"ironaccelerator driver BINDING_MODE={iadrv.BINDING_MODE!r}, cpus={os.cpu_count()}")
    print(f"libcuda mapped: {sorted(cudas)}")
    real = {os.path.realpath(p) for p in cudas}
    if real != {os.path.realpath(stub_path)}:
        print(f"ERROR: expected only the stub {stub_path} to be mapped", file=sys.stderr)
        return 1
    if iadrv.BINDING_MODE != "api":
        print("WARNING: the CUDA driver binding is not in API mode; run `ironaccelerator_gen build`", file=sys.stderr)
    get_counters = ctypes.CDLL(stub_path).stub_cuda_counters  # the same mapping (checked above)
    get_counters.restype = ctypes.POINTER(Counters)
    counters = get_counters().contents
    print(f"repeats={repeats}, sample~{target_s * 1e3:.0f} ms\n")

    targets = Targets()

    def launch_section(title: str, key: str, k: Any, ck: Any, bf: Any, args: tuple[Any, ...],
                       cargs: tuple[Any, ...], bkp: Any, bkp_packed: Any, rp: Any) -> None:
        kl = ia.KernelLaunch(k, dims, args)
        b0, b1 = dims.block[0], dims.grid[0]

        def ours(n: int) -> None:
            f = s.launch
            for _ in range(n):
                f(kl)

        def ours_new(n: int) -> None:
            f, KL = s.launch, ia.KernelLaunch
            for _ in range(n):
                f(KL(k, dims, args))

        def ours_parts(n: int) -> None:
            f = s.launch
            for _ in range(n):
                f(k, dims, *args)

        def ours_u(n: int) -> None:
            f = s.launch_unchecked
            for _ in range(n):
                f(kl)

        def core(n: int) -> None:
            for _ in range(n):
                core_launch(cs, config, ck, *cargs)

        def bind(n: int) -> None:
            f = cbd.cuLaunchKernel
            for _ in range(n):
                f(bf, b1, 1, 1, b0, 1, 1, 0, bstream, bkp, 0)

        def bind_packed(n: int) -> None:
            f = cbd.cuLaunchKernel
            for _ in range(n):
                f(bf, b1, 1, 1, b0, 1, 1, 0, bstream, bkp_packed, 0)

        def floor(n: int) -> None:
            f = raw.cuLaunchKernel
            for _ in range(n):
                f(k.handle, b1, 1, 1, b0, 1, 1, 0, rs, rp, null)

        variants = [
            Variant("ours", "ours Stream.launch (checked)", ours),
            Variant("ours_new", "ours Stream.launch, new KernelLaunch per call", ours_new),
            Variant("ours_parts", "ours Stream.launch(kernel, dims, *args)", ours_parts),
            Variant("ours_u", "ours Stream.launch_unchecked", ours_u),
            Variant("core", "cuda.core launch(stream, config, kernel, *args)", core),
            Variant("bind", "cuda-bindings cuLaunchKernel, (values, types) args", bind),
            Variant("bind_p", "cuda-bindings cuLaunchKernel, void *[] packed once", bind_packed),
            Variant("raw", "raw cffi cuLaunchKernel, void *[] packed once (floor)", floor),
        ]
        for v in variants:  # each op reaches the stub's cuLaunchKernel(Ex) exactly once
            before = counters.launches
            v.body(10)
            assert counters.launches - before == 10, (v.label, counters.launches - before)
        run(variants, repeats, target_s)
        vm = {v.key: v for v in variants}
        print(f"== {title}, per launch")
        print(f"  {'variant':<56} {'median ns':>9}  {'IQR%':>5}  {'/ cuda.core':>11}  {'/ raw cffi':>10}")
        for v in variants:
            print(f"  {v.label:<56} {ns(v.median)}  {spread(v):5.1f}  {ratio(v, vm['core']):11.3f}  "
                  f"{ratio(v, vm['raw']):10.3f}")
        print()
        targets.add(f"{key}: ours launch_unchecked / raw cffi floor", ratio(vm["ours_u"], vm["raw"]), "<=",
                    TARGET_FLOOR)
        targets.add(f"{key}: ours launch (checked) / cuda.core launch", ratio(vm["ours"], vm["core"]), "<=",
                    TARGET_CHECKED)
        targets.add(f"{key}: ours launch(kernel, dims, *args) (new KernelLaunch, in C) / cuda.core launch",
                    ratio(vm["ours_parts"], vm["core"]), "<=", TARGET_NEW)
        targets.note(f"{key}: ours launch(KernelLaunch(...)) per call / cuda.core launch",
                     ratio(vm["ours_new"], vm["core"]))
        targets.note(f"{key}: ours launch_unchecked / cuda.core launch", ratio(vm["ours_u"], vm["core"]))
        targets.note(f"{key}: ours launch (checked) / raw cffi floor", ratio(vm["ours"], vm["raw"]))

    launch_section("1. launch: empty kernel (no arguments)", "empty", k_empty, ck_empty, bf_empty, (), (), 0, 0,
                   null)
    launch_section("2. launch: axpy(const float *x, float *y, int n)", "axpy", k_axpy, ck_axpy, bf_axpy,
                   (x, y, n32), (cx, cy, n32), bargs, bparams_addr, rparams)

    # ------------------------------------------------------------------ 3. alloc + free
    pool = dev.memory_pool()
    assert isinstance(pool, cb.CudaStreamOrderedPool), pool  # the stub supports stream-ordered allocation
    nb = ALLOC_BYTES
    out = ffi.new("CUdeviceptr *")

    def o_alloc(n: int) -> None:
        alloc = dev.alloc
        for _ in range(n):
            alloc(nb).free()

    def o_alloc_u(n: int) -> None:
        # returns Result[CudaAllocation]: the stub never fails (checked below), so no Error test is timed
        alloc: Callable[[int], Any] = dev.alloc_unchecked
        for _ in range(n):
            alloc(nb).free_unchecked()

    def o_pool(n: int) -> None:
        alloc = pool.alloc
        for _ in range(n):
            alloc(nb, s).free()

    def o_pool_u(n: int) -> None:
        # returns Result[CudaPoolAllocation]: the stub never fails (checked below), so no Error test is timed
        alloc: Callable[..., Any] = pool.alloc_unchecked
        for _ in range(n):
            alloc(nb, s).free_unchecked()

    def o_pool_sync(n: int) -> None:
        alloc = pool.alloc
        for _ in range(n):
            alloc(nb).free()

    def c_alloc(n: int) -> None:
        alloc = cdev.allocate
        for _ in range(n):
            alloc(nb, stream=cs).close(cs)

    def b_alloc(n: int) -> None:
        alloc, free = cbd.cuMemAlloc, cbd.cuMemFree
        for _ in range(n):
            free(alloc(nb)[1])

    def r_alloc(n: int) -> None:
        alloc, free = raw.cuMemAlloc, raw.cuMemFree
        for _ in range(n):
            alloc(out, nb)
            free(out[0])

    sec3 = [
        Variant("ours", "ours dev.alloc + free", o_alloc),
        Variant("ours_u", "ours dev.alloc_unchecked + free_unchecked", o_alloc_u),
        Variant("pool", "ours memory_pool().alloc(n, stream) + free", o_pool),
        Variant("pool_u", "ours memory_pool().alloc_unchecked(n, stream) + free_unchecked", o_pool_u),
        Variant("pool_sync", "ours memory_pool().alloc(n) + free (waits for the pool's stream)", o_pool_sync),
        Variant("core", "cuda.core Device.allocate(n, stream) + close(stream)", c_alloc),
        Variant("bind", "cuda-bindings cuMemAlloc + cuMemFree", b_alloc),
        Variant("raw", "raw cffi cuMemAlloc + cuMemFree (floor)", r_alloc),
    ]
    for v in sec3:
        a0, f0 = counters.allocs, counters.frees
        v.body(10)
        assert (counters.allocs - a0, counters.frees - f0) == (10, 10), (v.label, counters.allocs - a0)
    run(sec3, repeats, target_s)
    vm = {v.key: v for v in sec3}
    print(f"== 3. alloc + free of {nb >> 10} KiB, per pair")
    print(f"  {'variant':<56} {'median ns':>9}  {'IQR%':>5}  {'/ cuda.core':>11}  {'/ raw cffi':>10}")
    for v in sec3:
        print(f"  {v.label:<56} {ns(v.median)}  {spread(v):5.1f}  {ratio(v, vm['core']):11.3f}  "
              f"{ratio(v, vm['raw']):10.3f}")
    # cuda.core allocates from the driver's stream-ordered pool, in a stream's order: so does memory_pool()
    targets.add("alloc+free: ours dev.alloc + free / cuda-bindings cuMemAlloc + cuMemFree",
                ratio(vm["ours"], vm["bind"]), "<=", TARGET_ALLOC)
    targets.add("alloc+free: ours alloc_unchecked + free_unchecked / raw cffi pair", ratio(vm["ours_u"], vm["raw"]),
                "<=", TARGET_ALLOC_U)
    targets.add("alloc+free: ours memory_pool().alloc(n, stream) / cuda.core allocate", ratio(vm["pool"], vm["core"]),
                "<=", TARGET)
    targets.note("alloc+free: ours memory_pool().alloc_unchecked(n, stream) / cuda.core allocate",
                 ratio(vm["pool_u"], vm["core"]))
    targets.note("alloc+free: ours memory_pool().alloc(n) / cuda.core allocate", ratio(vm["pool_sync"], vm["core"]))
    targets.note("alloc+free: ours dev.alloc (cuMemAlloc) / cuda.core allocate", ratio(vm["ours"], vm["core"]))
    targets.note("alloc+free: ours alloc_unchecked / cuda.core allocate", ratio(vm["ours_u"], vm["core"]))

    # ------------------------------------------------------------------ 4. the hot path never allocates
    counter_path = build_counter()
    print(f"\n== 4. allocations per launch, a reused KernelLaunch, {HOT_CALLS} calls each (not timed)")
    if isinstance(counter_path, str):
        print(f"  skipped: {counter_path}")
    else:
        counter = ctypes.PyDLL(str(counter_path))
        counter.count_calls.restype = ctypes.c_ulonglong
        print(f"  {'variant':<40} {'allocator calls/call':>20}  {'net blocks':>10}  {'net traced B':>12}")
        for key, k, kargs in (("empty", k_empty, ()), ("axpy", k_axpy, (x, y, n32))):
            kl = ia.KernelLaunch(k, dims, kargs)
            for name, f in (("launch_unchecked", s.launch_unchecked), ("launch", s.launch)):
                calls, blocks, traced = allocations(f, kl, HOT_CALLS, counter)
                print(f"  {key + ': ' + name:<40} {calls:20.3f}  {blocks:10d}  {traced:12d}")
                if name == "launch_unchecked":
                    targets.add(f"{key}: allocator calls per launch_unchecked (a count, not a ratio)", calls, "<=",
                                0.0)
                else:
                    targets.note(f"{key}: allocator calls per launch (a count, not a ratio)", calls)
        s.synchronize()

    print("\n(targets: CPU-side binding cost over the stub driver; ours / cuda.core time)")
    targets.print()
    print(f"\nstub driver calls: {counters.launches} launches, {counters.allocs} allocs, {counters.frees} frees, "
          f"{counters.unknown_calls} calls of functions the stub does not implement")
    print(f"total {time.perf_counter() - t_start:.1f} s")
    for a in (x, y):
        a.free()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=None, help="repeats per variant (default 31, --quick 15)")
    ap.add_argument("--quick", action="store_true", help="shorter samples and 15 repeats")
    ap.add_argument("--target-ms", type=float, default=None, help="duration of one sample (default 20, --quick 5)")
    args = ap.parse_args()
    if not os.environ.get(CHILD_ENV):
        return parent(sys.argv[1:])
    return child(args)


if __name__ == "__main__":
    sys.exit(main())
