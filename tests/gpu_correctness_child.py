"""Run by test_gpu_correctness.py in a subprocess whose libcuda.so.1 is bench/stub_cuda (STUB_CUDA_RECORD=1):
the CUDA backend's promises of issue 10 over a driver that counts what reaches it.

    gpu_correctness_child.py STUB lifetime         Device.close, the primary context's retain and release
    gpu_correctness_child.py STUB inflight         host buffers released when later work is seen complete
    gpu_correctness_child.py STUB corpus I J       bad-input cases I..J-1 (prints "case <i>" before each and
                                                   "done <i> <outcome>" after, so a crash names its case)
    gpu_correctness_child.py STUB stress T S       T threads x S seconds of alloc/copy/launch/free; RSS bounded

Prints "ok <n>" at the end (the number of things checked)."""

from __future__ import annotations

import ctypes
import gc
import sys
import threading
import time
from typing import Any, Callable, cast

import numpy as np

import ironaccelerator as ia
from ironaccelerator import DType, Error, ErrorKind, KernelLaunch, LaunchDims, MemoryKind, Scalar
from ironaccelerator.backends.cuda import _backend as cb

STUB = sys.argv[1]
WHAT = sys.argv[2]


class Counters(ctypes.Structure):  # stub_counters_t in bench/stub_cuda/stub_cuda.c
    _fields_ = [(name, ctypes.c_ulonglong) for name in (
        "launches", "allocs", "frees", "unknown_calls", "ctx_retains", "ctx_releases", "ctx_used_after_release")]


lib = ctypes.CDLL(STUB)
lib.stub_cuda_counters.restype = ctypes.POINTER(Counters)
counters = lib.stub_cuda_counters().contents
lib.stub_cuda_busy.restype = ctypes.POINTER(ctypes.c_int)
busy = lib.stub_cuda_busy()

SOURCE = r"""
extern "C" __global__ void axpy(float *x, int n, float *y) {}
extern "C" __global__ void none() {}
"""
PTX = cb.compile_source(SOURCE, "compute_90")
backend = ia.BackendRegistry.default().get(ia.BackendKind.CUDA)


def expect(kind: ErrorKind, fn: Callable[[], object], what: str = "") -> Error:
    try:
        fn()
    except Error as e:
        assert e.kind is kind, (what, e)
        assert str(e), what
        return e
    raise AssertionError(f"{what or fn}: no Error({kind.name})")


def lifetime() -> int:
    checked = 0
    r0, l0 = counters.ctx_retains, counters.ctx_releases
    dev = cast(cb.CudaDevice, backend.open(0))
    assert counters.ctx_retains == r0 + 1, "open retains the primary context once"
    s = dev.create_stream()
    a, b = dev.alloc(256), dev.alloc(256)
    pinned = dev.alloc(64, MemoryKind.HOST_PINNED)
    mod = dev.load_module(PTX)
    k = mod.kernel("axpy")
    pool = dev.memory_pool()
    p = pool.alloc(256, s)
    host = np.zeros(64, np.float32)
    kl = KernelLaunch(k, LaunchDims(1, 32), (a, np.int32(64), b))
    s.launch(kl)
    e = s.record_event()
    assert "cuda:0" in repr(dev) and "on cuda:0" in repr(s) and "on cuda:0" in repr(e) and "'axpy'" in repr(k)
    assert "on cuda:0" in repr(mod)
    dev.close()
    dev.close()  # idempotent
    assert counters.ctx_releases == l0, "released while the streams, modules and allocations are alive"
    assert "closed" in repr(dev) and "(closed)" in repr(s)
    launches = counters.launches
    refused: list[tuple[str, Callable[[], object]]] = [
        ("Device.alloc", lambda: dev.alloc(8)), ("Device.create_stream", dev.create_stream),
        ("Device.load_module", lambda: dev.load_module(PTX)), ("Device.memory_pool", dev.memory_pool),
        ("Device.synchronize", dev.synchronize),
        ("Stream.copy_from_host", lambda: s.copy_from_host(a, host)),
        ("Stream.copy_to_host", lambda: s.copy_to_host(host, a)), ("Stream.copy", lambda: s.copy(a, b)),
        ("Stream.launch", lambda: s.launch(kl)), ("Stream.launch", lambda: s.launch(KernelLaunch(k, LaunchDims(2), kl.args))),
        ("Stream.record_event", s.record_event), ("Stream.wait_event", lambda: s.wait_event(e)),
        ("Stream.synchronize", s.synchronize), ("Stream.query", s.query),
        ("Event.synchronize", e.synchronize), ("Event.query", e.query), ("Module.kernel", lambda: mod.kernel("axpy")),
        ("MemoryPool.alloc", lambda: pool.alloc(8, s)), ("MemoryPool.alloc", lambda: pool.alloc(8)),
        ("__dlpack__", lambda: a.__dlpack__()), ("__cuda_array_interface__", lambda: a.__cuda_array_interface__),
    ]
    for what, fn in refused:
        err = expect(ErrorKind.INVALID_HANDLE, fn, what)
        assert "was closed" in str(err) and err.function == what, (what, err, err.function)
        checked += 1
    for r in (dev.alloc_unchecked(8), s.launch_unchecked(kl), s.launch_unchecked(KernelLaunch(k, LaunchDims(3), kl.args)),
              pool.alloc_unchecked(8, s)):
        assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE, r  # returned, not raised
        checked += 1
    assert counters.launches == launches, "a closed device launched"
    frees = counters.frees
    a.free()  # freeing still works, the context being held by what was made from it
    p.free()
    pinned.free()
    assert counters.frees == frees + 3
    assert counters.ctx_releases == l0
    del s, e, k, mod, kl, refused, fn, err
    gc.collect()
    assert counters.ctx_releases == l0, "b and the pool still hold the context"
    del b, pool, p, pinned, a
    gc.collect()
    assert counters.ctx_releases == l0 + 1, "released once everything made from the device is gone"
    del dev
    gc.collect()
    assert counters.ctx_releases == l0 + 1 and counters.ctx_retains == r0 + 1
    assert counters.ctx_used_after_release == 0
    checked += 1

    # never closed: released when the device and its objects are dropped, after they are destroyed, even when
    # they are collected in one garbage cycle (a device, its pool, a stream, a module and allocations)
    for variant in range(3):
        l1 = counters.ctx_releases
        dev = cast(cb.CudaDevice, backend.open(0))
        junk: list[Any] = [dev.alloc(64), dev.alloc(64, MemoryKind.HOST_PINNED)]
        if variant >= 1:
            junk += [dev.create_stream(), dev.load_module(PTX), dev.memory_pool()]
            junk.append(dev.memory_pool().alloc(64, junk[2]))
        if variant == 2:
            junk.append(junk[2].record_event())
        junk.append(junk)  # a cycle ...
        dev.junk = junk  # type: ignore[attr-defined]  # ... through the device
        del dev, junk
        assert counters.ctx_releases == l1
        gc.collect()
        assert counters.ctx_releases == l1 + 1, variant
        assert counters.ctx_used_after_release == 0, f"variant {variant}: a call on the released context"
        checked += 1
    # two opens of one device: two retains, each released once
    l2 = counters.ctx_releases
    d1, d2 = backend.open(0), backend.open(0)
    x = d1.alloc(16)
    d1.close()
    d2.close()
    assert counters.ctx_releases == l2 + 1  # d2's; d1's is held by x
    del x
    gc.collect()
    assert counters.ctx_releases == l2 + 2 and counters.ctx_used_after_release == 0
    return checked + 1


def inflight() -> int:
    """2,000 copies of 64 KiB ordered only by events: the held host buffers stay bounded."""
    dev = cast(cb.CudaDevice, backend.open(0))
    s = dev.create_stream()
    a = dev.alloc(1 << 16)
    events = []
    most = 0
    for i in range(2000):
        s.copy_from_host(a, np.full(1 << 14, i, np.float32))  # 64 KiB, dropped by the caller at once
        events.append(s.record_event())
        if len(events) > 3:
            old = events.pop(0)
            if i % 2:
                old.synchronize()
            else:
                while not old.query():  # the stub answers "not ready" first on some
                    pass
        if i % 7 == 0:
            busy[0] = 2
        most = max(most, len(s._inflight))
    assert most <= 5, most  # at most the copies after the last event seen complete
    busy[0] = 1
    assert s.query() is False and len(s._inflight) == 3  # not complete: nothing released
    assert s.query() is True and len(s._inflight) == 0
    b = np.zeros(1 << 14, np.float32)
    s.copy_to_host(b, a)
    e = s.record_event()
    busy[0] = 1
    assert e.query() is False and len(s._inflight) == 1
    assert e.query() is True and len(s._inflight) == 0
    s.copy_to_host(b, a)
    dev.synchronize()
    assert len(s._inflight) == 0
    dev.close()
    return 2000


# ------------------------------------------------------------------ the bad-input corpus

OK, TYPE, ANY = "ok", "TypeError", "any"  # "any": a result or a clear Error/TypeError/ValueError, not a crash


def corpus() -> list[tuple[str, str, Callable[[], object]]]:
    """(name, expected outcome, case): "ok", "TypeError", "any" or an ErrorKind name."""
    dev = cast(cb.CudaDevice, backend.open(0))
    s = dev.create_stream()
    a, b, small = dev.alloc(256), dev.alloc(256), dev.alloc(16)
    gone = dev.alloc(64)
    gone.free()
    k = dev.load_module(PTX).kernel("axpy")  # axpy(float *x, int n, float *y): sizes 8, 4, 8
    mod = k.module
    pool = dev.memory_pool()
    d = LaunchDims(1, 32)
    n = np.int32(8)
    IV, IH = ErrorKind.INVALID_VALUE.name, ErrorKind.INVALID_HANDLE.name

    def launch(*args: Any, unchecked: bool = False, dims: Any = d) -> Callable[[], object]:
        def run() -> object:
            kl = KernelLaunch(k, dims, args)
            for _ in range(3):  # the first launch of these types (Python), then the compiled one
                if unchecked:
                    r = s.launch_unchecked(kl)
                    if isinstance(r, Error):
                        raise r
                else:
                    s.launch(kl)
            return None
        return run

    cases: list[tuple[str, str, Callable[[], object]]] = [
        # kernel arguments (a pointer slot cannot be told from a 64-bit integer one by its size: CUDA's
        # parameter info has sizes only, so an 8-byte integer there is passed, and must not crash anything)
        ("int64 -5 in a pointer slot", ANY, launch(np.int64(-5), n, b)),
        ("uint64 max in a pointer slot", ANY, launch(np.uint64(2**64 - 1), n, b)),
        ("uint64 max in a pointer slot, unchecked", ANY, launch(np.uint64(2**64 - 1), n, b, unchecked=True)),
        ("int32 in a pointer slot", IV, launch(np.int32(-5), n, b)),
        ("float64 in an int slot", IV, launch(a, np.float64(1), b)),
        ("Scalar I64 in an int slot", IV, launch(a, Scalar(1, DType.I64), b)),
        ("8 bytes in an int slot", IV, launch(a, b"12345678", b)),
        ("an allocation in an int slot", IV, launch(a, a, b)),
        ("int16 in an int slot", IV, launch(a, np.int16(1), b)),
        ("None argument", IV, launch(a, n, None)),
        ("str argument", IV, launch(a, "x", b)),
        ("float argument", IV, launch(a, 1.5, b)),
        ("object argument", IV, launch(a, object(), b)),
        ("object 0-d array argument", IV, launch(a, np.array(None, dtype=object), b)),
        ("object memoryview argument", IV, launch(a, memoryview(cast(Any, np.array([None, None], dtype=object))), b)),
        ("freed allocation", IH, launch(gone, n, b)),
        ("freed allocation, unchecked", IH, launch(gone, n, b, unchecked=True)),
        ("missing argument", IV, launch(a, n)),
        ("missing argument, unchecked", IV, launch(a, n, unchecked=True)),
        ("extra argument, unchecked", IV, launch(a, n, b, n, unchecked=True)),
        ("no arguments, unchecked", IV, launch(unchecked=True)),
        ("dims not LaunchDims", IV, launch(a, n, b, dims=(1, 32))),  # (as on every backend: tests/mistakes.py)
        ("dims None", IV, launch(a, n, b, dims=None)),
        ("grid of 2**32", IV, lambda: LaunchDims(2**32, 1).validate(dev.descriptor.limits, ia.BackendKind.CUDA)),
        ("block too big", IV, launch(a, n, b, dims=LaunchDims(1, 2048))),
        ("LaunchDims(grid=b'x')", IV, lambda: LaunchDims(grid=b"x")),
        ("LaunchDims(shared_mem='1')", IV, lambda: LaunchDims(shared_mem="1")),  # type: ignore[arg-type]
        ("Scalar('x', I32)", IV, lambda: Scalar("x", DType.I32)),  # type: ignore[arg-type]
        ("Scalar(2**40, I32)", IV, lambda: Scalar(2**40, DType.I32)),
        ("Scalar(nan, F8E4M3)", ANY, lambda: Scalar(float("nan"), DType.F8E4M3)),
        ("Scalar(1, None)", TYPE, lambda: Scalar(1, None)),  # type: ignore[arg-type]
        ("launch(None)", TYPE, lambda: s.launch(None)),  # type: ignore[arg-type]
        ("launch_unchecked(None)", TYPE, lambda: s.launch_unchecked(None)),  # type: ignore[arg-type]
        ("launch of a 2-tuple", TYPE, lambda: s.launch((1, 2))),  # type: ignore[arg-type]
        ("launch of another kernel type", IV, lambda: s.launch(KernelLaunch(object(), d, ()))),  # type: ignore[arg-type]
        # allocations
        ("alloc(True)", TYPE, lambda: dev.alloc(True)),
        ("alloc(1.5)", TYPE, lambda: dev.alloc(1.5)),  # type: ignore[arg-type]
        ("alloc('8')", TYPE, lambda: dev.alloc("8")),  # type: ignore[arg-type]
        ("alloc(None)", TYPE, lambda: dev.alloc(None)),  # type: ignore[arg-type]
        ("alloc(0)", IV, lambda: dev.alloc(0)),
        ("alloc(-1)", IV, lambda: dev.alloc(-1)),
        ("alloc(2**64)", IV, lambda: dev.alloc(2**64)),
        ("alloc(np.int64(8))", OK, lambda: dev.alloc(np.int64(8)).free()),  # type: ignore[arg-type]
        ("alloc(8, kind='64')", TYPE, lambda: dev.alloc(8, kind="64")),  # type: ignore[arg-type]
        ("alloc(8, kind=None)", TYPE, lambda: dev.alloc(8, kind=None)),  # type: ignore[arg-type]
        ("alloc(8, UNIFIED)", OK, lambda: dev.alloc(8, MemoryKind.UNIFIED).free()),
        ("alloc_unchecked(1.5)", ANY, lambda: dev.alloc_unchecked(1.5)),  # type: ignore[arg-type]
        ("alloc_unchecked(-1)", ANY, lambda: dev.alloc_unchecked(-1)),
        ("pool.alloc(1.5)", TYPE, lambda: pool.alloc(1.5)),  # type: ignore[arg-type]
        ("pool.alloc(True)", TYPE, lambda: pool.alloc(True)),
        ("pool.alloc(-1)", IV, lambda: pool.alloc(-1)),
        ("pool.alloc(8, stream='s')", IV, lambda: pool.alloc(8, stream="s")),  # type: ignore[arg-type]
        ("pool.alloc_unchecked(1.5)", ANY, lambda: pool.alloc_unchecked(1.5)),  # type: ignore[arg-type]
        ("pool.alloc_unchecked(2**64)", ANY, lambda: pool.alloc_unchecked(2**64)),
        ("MemoryPool.size_class(-1)", IV, lambda: ia.MemoryPool.size_class(-1)),
        ("double free", IH, lambda: gone.free()),
        ("double free_unchecked", ANY, lambda: gone.free_unchecked()),
        # copies
        ("copy_from_host(None, a)", TYPE, lambda: s.copy_from_host(None, np.zeros(4))),  # type: ignore[arg-type]
        ("copy_to_host(a, None)", TYPE, lambda: s.copy_to_host(np.zeros(4), None)),  # type: ignore[arg-type]
        ("copy_from_host(a, None)", IV, lambda: s.copy_from_host(a, None)),
        ("copy_from_host(a, 'str')", IV, lambda: s.copy_from_host(a, "abcd")),
        ("copy_from_host(a, np.int64(-5))", IV, lambda: s.copy_from_host(a, np.int64(-5))),
        ("copy_to_host(np.float64 scalar)", IV, lambda: s.copy_to_host(np.float64(1), a)),
        ("copy_from_host(a, object array)", IV, lambda: s.copy_from_host(a, np.array([None] * 4, dtype=object))),
        ("copy_to_host(object array)", IV, lambda: s.copy_to_host(np.array([None] * 4, dtype=object), a)),
        ("copy_to_host(bytes)", IV, lambda: s.copy_to_host(b"\0" * 16, a)),
        ("copy_from_host non-contiguous", IV, lambda: s.copy_from_host(a, np.zeros(64, np.float32)[::2])),
        ("copy_from_host too big", IV, lambda: s.copy_from_host(small, np.zeros(64, np.float32))),
        ("copy_to_host too big", IV, lambda: s.copy_to_host(np.zeros(64, np.float32), small)),
        ("copy_from_host freed", IH, lambda: s.copy_from_host(gone, b"1234")),
        ("copy_from_host bytes", OK, lambda: s.copy_from_host(a, b"1234")),
        ("copy of different sizes", IV, lambda: s.copy(small, a)),
        ("copy(a, None)", TYPE, lambda: s.copy(a, None)),  # type: ignore[arg-type]
        ("copy(a, freed)", IH, lambda: s.copy(a, gone)),
        ("copy of one size", OK, lambda: s.copy(a, b)),
        ("wait_event(None)", IV, lambda: s.wait_event(None)),  # type: ignore[arg-type]
        ("elapsed_ms(None)", IV, lambda: s.record_event().elapsed_ms(None)),  # type: ignore[arg-type]
        # modules and kernels
        ("load_module(5)", TYPE, lambda: dev.load_module(5)),  # type: ignore[arg-type]
        ("load_module(2**64)", TYPE, lambda: dev.load_module(2**64)),  # type: ignore[arg-type]
        ("load_module(None)", TYPE, lambda: dev.load_module(None)),  # type: ignore[arg-type]
        ("load_module(b'')", IV, lambda: dev.load_module(b"")),
        ("load_module(garbage bytes)", ErrorKind.COMPILE_FAILED.name, lambda: dev.load_module(b"garbage \xff\xfe{")),
        ("load_module(lone surrogate)", IV, lambda: dev.load_module("\udcff")),
        ("load_module(PTX with a NUL)", IV, lambda: dev.load_module(PTX[:40] + b"\0" + PTX[40:])),
        ("load_module(bytearray PTX)", OK, lambda: dev.load_module(cast(Any, bytearray(PTX)))),
        ("kernel name with NUL", IV, lambda: mod.kernel("axpy\0x")),
        ("kernel name not UTF-8", IV, lambda: mod.kernel("\udcff")),
        ("kernel name int", TYPE, lambda: mod.kernel(5)),  # type: ignore[arg-type]
        ("kernel name bytes", TYPE, lambda: mod.kernel(b"axpy")),  # type: ignore[arg-type]
        ("kernel not found", ErrorKind.INVALID_VALUE.name, lambda: mod.kernel("nope")),
        ("compile_source options str", TYPE, lambda: cb.compile_source(SOURCE, "compute_90", "-O3")),
        ("compile_source options [5]", TYPE, lambda: cb.compile_source(SOURCE, "compute_90", [5])),  # type: ignore[list-item]
        ("compile_source option with NUL", IV, lambda: cb.compile_source(SOURCE, "compute_90", ["-O3\0"])),
        ("compile_source(5)", TYPE, lambda: cb.compile_source(5, "compute_90")),  # type: ignore[arg-type]
        ("compile_source arch None", TYPE, lambda: cb.compile_source(SOURCE, None)),  # type: ignore[arg-type]
        ("dlpack of a freed allocation", IH, lambda: gone.__dlpack__()),
    ]
    return cases


def run_corpus(start: int, end: int) -> int:
    cases = corpus()
    if start == -1:  # the number of cases
        print("cases", len(cases))
        return 0
    for i in range(start, min(end, len(cases))):
        name, want, fn = cases[i]
        print("case", i, flush=True)
        try:
            fn()
            got = OK
        except Error as e:
            got = e.kind.name if str(e) else "Error without a message"
        except (TypeError, ValueError) as e:
            got = TYPE if type(e) is TypeError and str(e) else f"{type(e).__name__}: {e}"
        except BaseException as e:  # noqa: BLE001  (an unclear exception: reported as such)
            got = f"unclear {type(e).__name__}: {e}"
        print("done", i, got, flush=True)
    return end - start


# ------------------------------------------------------------------ host memory under load


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / (1 << 20)


def stress(threads: int, seconds: float) -> int:
    dev = cast(cb.CudaDevice, backend.open(0))
    k = dev.load_module(PTX).kernel("axpy")
    pool = dev.memory_pool()
    problems: list[str] = []
    counts = [0] * threads

    def work(t: int, until: float) -> None:
        s = dev.create_stream()
        host = np.arange(1 << 12, dtype=np.float32) + t
        back = np.zeros_like(host)
        i = 0
        try:
            while time.perf_counter() < until:
                x = dev.alloc(host.nbytes)
                y = pool.alloc(host.nbytes, s) if i % 2 else dev.alloc(host.nbytes)
                s.copy_from_host(x, host)
                kl = KernelLaunch(k, LaunchDims(16, 256), (x, np.int32(host.size), y))
                s.launch(kl)
                if s.launch_unchecked(kl) is not None:
                    problems.append("unchecked launch failed")
                s.copy_to_host(back, y)
                if i % 3 == 0:
                    s.record_event().synchronize()
                else:
                    s.synchronize()
                x.free()
                y.free()
                i += 1
        except Exception as e:  # noqa: BLE001
            problems.append(f"thread {t}: {e!r}")
        counts[t] = i

    def round_(secs: float) -> None:
        until = time.perf_counter() + secs
        ts = [threading.Thread(target=work, args=(t, until)) for t in range(threads)]
        for th in ts:
            th.start()
        for th in ts:
            th.join()

    round_(min(1.0, seconds / 4))  # warm-up: caches, plans, pools
    gc.collect()
    before = rss_mib()
    allocs, frees = counters.allocs, counters.frees
    round_(seconds)
    gc.collect()
    after = rss_mib()
    assert not problems, problems[:3]
    done = sum(counts)
    assert done > 0
    # every allocation of the round was freed (pool blocks are freed in stream order, i.e. at once here)
    assert counters.allocs - allocs == counters.frees - frees, (counters.allocs - allocs, counters.frees - frees)
    assert after - before < 16, f"RSS grew from {before:.1f} to {after:.1f} MiB over {done} iterations"
    print(f"stress: {threads} threads x {seconds} s: {done} iterations, RSS {before:.1f} -> {after:.1f} MiB",
          file=sys.stderr)
    dev.close()
    return done


if WHAT == "lifetime":
    n = lifetime()
elif WHAT == "inflight":
    n = inflight()
elif WHAT == "corpus":
    n = run_corpus(int(sys.argv[3]), int(sys.argv[4]))
elif WHAT == "stress":
    n = stress(int(sys.argv[3]), float(sys.argv[4]))
else:
    raise SystemExit(f"unknown section {WHAT!r}")
print("ok", n)
