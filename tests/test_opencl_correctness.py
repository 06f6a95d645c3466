"""Issue 10 on the OpenCL backend (PoCL): each promise the README makes, tested where it broke.

Crash-prone cases run in a subprocess (``_run_cases``): a case that kills the interpreter is named in the
failure instead of taking pytest down with it.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
import time
import weakref
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import ironaccelerator as ia
from ironaccelerator import BackendKind, BackendRegistry, CapabilityFlags, Error, ErrorKind, KernelLaunch, LaunchDims
from ironaccelerator import MemoryKind, Vendor

from conftest import ROOT, rect_reference


def _has_device() -> bool:
    try:
        return bool(BackendRegistry.default().get(BackendKind.OPENCL).devices())
    except Error:
        return False


pytestmark = pytest.mark.skipif(not _has_device(), reason="no OpenCL platform with a device (clinfo -l)")

TWICE = ("__kernel void twice(__global const float *a, __global float *c, int n)"
         "{ int i = get_global_id(0); if (i < n) c[i] = 2 * a[i]; }")


@pytest.fixture
def dev() -> Iterator[Any]:
    with BackendRegistry.default().get(BackendKind.OPENCL).open(0) as d:
        yield d


def test_load_module_keeps_the_source_alive_200_distinct_programs(dev: Any) -> None:
    """Item 1: the source's char[] was freed before clCreateProgramWithSource read it (22 of 40 failed)."""
    for i in range(200):
        body = " ".join(f"x = x * {j + 1} + {i};" for j in range(i % 37 + 1))
        src = f"__kernel void k{i}(__global int *p) {{ int x = p[0]; {body} p[0] = x; }}" + " " * (i * 13 % 101)
        dev.load_module(src).kernel(f"k{i}")


def test_host_copies_hold_no_host_buffer_past_the_call(dev: Any) -> None:
    """Item 3: 2,000 copies ordered only by events kept every host buffer until Stream.synchronize.  Since issue 27
    host copies are blocking (synchronous with respect to the host): no buffer is held past the call, and events
    recorded after the copies still complete."""
    s = dev.create_stream()
    buf = dev.alloc(64 * 1024)
    for i in range(2000):
        src = np.full(16 * 1024, i, dtype=np.float32)
        ref = weakref.ref(src)
        s.copy_from_host(buf, src)
        del src
        assert ref() is None, i  # let go when the call returned (it was kept until an event after it completed)
        e = s.record_event()
        if i % 2:
            e.synchronize()
        else:
            while not e.query():
                pass
    out = np.empty(16 * 1024, dtype=np.float32)
    s.copy_to_host(out, buf)
    assert out[0] == 1999 and out[-1] == 1999  # no synchronize: the bytes are there when the call returns


# a kernel that takes a while (a data-dependent loop the compiler cannot drop), then writes v: work still running
# when the host copy behind it is enqueued
# (~30 ms on PoCL): the host copy behind it is called while it still runs
SLOW = ("__kernel void slow(__global int *p, int v, int iters) { int x = v; for (int i = 0; i < iters; ++i) "
        "x = x * 1103515245 + 12345; for (int j = 0; j < 256; ++j) p[j] = v; p[256] = x; }")


def _slow_launch(dev: Any, s: Any, a: Any, v: int) -> None:
    k = dev.load_module(SLOW).kernel("slow")
    s.launch(KernelLaunch(k, LaunchDims(grid=1, block=1), (a, np.int32(v), np.int32(20_000_000))))


def test_copy_to_host_result_is_there_when_the_call_returns(dev: Any) -> None:
    """Issue 27: copy_to_host was a non-blocking read, its bytes in the destination only after synchronize; now
    it returns after the work before it (a kernel still running when the copy is called) and the read itself."""
    s = dev.create_stream()
    a = dev.alloc(257 * 4)
    s.fill(a, 0)
    _slow_launch(dev, s, a, 5)
    out = np.zeros(256, np.int32)
    s.copy_to_host(out, a)
    assert (out == 5).all(), out[:8]  # (before: zeros, the read still queued behind the kernel)
    rect = np.zeros(256, np.int32)  # the 2-D read (clEnqueueReadBufferRect) is blocking too
    _slow_launch(dev, s, a, 6)
    s.copy_2d(rect, a, width=1024, height=1)
    assert (rect == 6).all(), rect[:8]
    _slow_launch(dev, s, a, 7)  # asynchronous work after a blocking read: synchronize still waits for it
    e = s.record_event()
    s.synchronize()
    assert e.query()


def test_copy_from_host_source_may_change_when_the_call_returns(dev: Any) -> None:
    """Issue 27: copy_from_host was a non-blocking write that read its source when the queue reached it; now the
    source is read before the call returns (as CUDA's copies of pageable memory), even behind running work."""
    s = dev.create_stream()
    a = dev.alloc(257 * 4)
    _slow_launch(dev, s, a, 5)
    src = np.arange(256, dtype=np.int32)
    s.copy_from_host(a, src)
    src[:] = -1  # (before: the write, still queued behind the kernel, would copy these)
    two = np.arange(256, dtype=np.int32) * 2
    s.copy_2d(a, two, width=1024, height=1)
    two[:] = -1
    out = np.zeros(256, np.int32)
    s.copy_to_host(out, a)
    np.testing.assert_array_equal(out, np.arange(256, dtype=np.int32) * 2)


def test_closed_device_refuses_every_object_kind_and_never_crashes() -> None:
    """Item 4: close() released nothing; allocations and copies went on working."""
    dev: Any = BackendRegistry.default().get(BackendKind.OPENCL).open(0)
    s = dev.create_stream()
    a, b = dev.alloc(16), dev.alloc(16)
    m = dev.load_module(TWICE)
    k = m.kernel("twice")
    e = s.record_event()
    pool = dev.memory_pool()
    p = pool.alloc(16)
    launch = KernelLaunch(k, LaunchDims(grid=1, block=4), (a, b, np.int32(4)))
    s.launch(launch)
    with dev:
        pass  # leaving `with` closes
    assert dev.closed and "closed" in repr(dev)
    host = np.zeros(4, dtype=np.float32)
    checked: list[Callable[[], object]] = [lambda: dev.alloc(16), lambda: dev.create_stream(), lambda: dev.load_module(TWICE),
               lambda: dev.synchronize(), lambda: dev.memory_pool().alloc(16), lambda: s.copy_from_host(a, host),
               lambda: s.copy_to_host(host, a), lambda: s.copy(b, a), lambda: s.launch(launch),
               lambda: s.record_event(), lambda: s.wait_event(e), lambda: s.query(), lambda: e.synchronize(),
               lambda: e.query(), lambda: m.kernel("twice"), lambda: s.synchronize()]
    for op in checked:
        with pytest.raises(Error) as info:
            op()
        assert info.value.kind is ErrorKind.INVALID_HANDLE and "closed" in str(info.value), op
    r = dev.alloc_unchecked(16)
    assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE
    # launch_unchecked returns the closed-device Error (a flag test, as every backend: docs/UNCHECKED.md); live
    # objects keep valid handles: frees still work, nothing dangles
    r = s.launch_unchecked(launch)
    assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE and "closed" in str(r)
    a.free(); b.free(); p.free()
    del s, e, k, m, launch
    gc.collect()
    dev.close()  # idempotent


def test_memory_pool_alloc_takes_a_stream_on_opencl(dev: Any) -> None:
    """Item 5: `stream=` existed only on the CUDA/HIP pool (TypeError here)."""
    pool: ia.MemoryPool = dev.memory_pool()
    s = dev.create_stream()
    a = pool.alloc(100, stream=s)
    assert a.nbytes == 100
    r = pool.alloc_unchecked(100, s)
    assert isinstance(r, ia.Allocation)
    a.free(); r.free()
    with BackendRegistry.default().get(BackendKind.OPENCL).open(0) as other:
        with pytest.raises(Error, match="stream"):
            pool.alloc(16, stream=other.create_stream())


def test_every_advertised_capability_flag_works(dev: Any) -> None:
    """Item 6: UNIFIED_MEMORY was advertised on an SVM device while alloc(UNIFIED) was UNSUPPORTED."""
    flags = dev.descriptor.capability.flags
    ops: dict[CapabilityFlags, Callable[[], object]] = {
        CapabilityFlags.UNIFIED_MEMORY: lambda: dev.alloc(64, MemoryKind.UNIFIED).free(),
        CapabilityFlags.PROFILING: lambda: _profiled(dev),
        CapabilityFlags.FP64: lambda: dev.load_module("__kernel void f(__global double *p) { p[0] *= 2.0; }"),
        CapabilityFlags.FP16: lambda: dev.load_module(
            "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n__kernel void f(__global half *p) { p[0] = p[1]; }"),
        CapabilityFlags.ATOMICS_64: lambda: dev.load_module(
            "#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable\n"
            "__kernel void f(__global long *p) { atom_add(p, 1L); }"),
    }
    for flag in CapabilityFlags:
        if flag and flag in flags and flag in ops:
            ops[flag]()  # raises if the flag lies


def _profiled(dev: Any) -> None:
    s = dev.create_stream()
    e0 = s.record_event()
    e1 = s.record_event()
    assert e0.elapsed_ms(e1) >= 0


def test_copy_of_different_sizes_is_refused(dev: Any) -> None:
    """Item 8: 16 KiB into 16 bytes was silently truncated."""
    s = dev.create_stream()
    with pytest.raises(Error) as info:
        s.copy(dev.alloc(16), dev.alloc(16 * 1024))
    assert info.value.kind is ErrorKind.INVALID_VALUE and "16384" in str(info.value) and "16" in str(info.value)


def test_launch_unchecked_never_reuses_old_arguments(dev: Any) -> None:
    """Item 9: a missing argument ran the kernel with the previous launch's value."""
    s = dev.create_stream()
    a, c = dev.alloc(16), dev.alloc(16)
    k = dev.load_module(TWICE).kernel("twice")
    assert s.launch_unchecked(KernelLaunch(k, LaunchDims(grid=1, block=4), (a, c, np.int32(4)))) is None
    r = s.launch_unchecked(KernelLaunch(k, LaunchDims(grid=1, block=4), (a, c)))
    assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_VALUE and "3 arguments, 2 given" in str(r)
    s.synchronize()


def test_launch_options_and_ipc_are_unsupported_on_opencl(dev: Any) -> None:
    """Issue 14 items 5 and 8 on PoCL: cooperative and cluster launches, and IPC handles, are UNSUPPORTED (raised by
    launch, returned by launch_unchecked, before anything runs), the capability says so, and the same dims
    without options still launch."""
    from ironaccelerator import CapabilityFlags as F
    assert not dev.descriptor.capability.flags & (F.COOPERATIVE_LAUNCH | F.THREAD_BLOCK_CLUSTERS)
    s = dev.create_stream()
    a, c = dev.alloc(16), dev.alloc(16)
    s.copy_from_host(a, np.arange(4, dtype=np.float32))
    s.fill(c, 0)
    k = dev.load_module(TWICE).kernel("twice")
    for opts in ({"cooperative": True}, {"cluster": 1}, {"cooperative": True, "cluster": (1, 1)}):
        launch = KernelLaunch(k, LaunchDims(grid=1, block=4, **opts), (a, c, np.int32(4)))
        with pytest.raises(Error) as info:
            s.launch(launch)
        assert info.value.kind is ErrorKind.UNSUPPORTED and info.value.backend == "OPENCL", opts
        assert "OPENCL backend" in str(info.value)
        r = s.launch_unchecked(launch)
        assert isinstance(r, Error) and r.kind is ErrorKind.UNSUPPORTED
    out = np.zeros(4, np.float32)
    s.copy_to_host(out, c)
    s.synchronize()
    assert (out == 0).all()  # nothing ran
    s.launch(KernelLaunch(k, LaunchDims(grid=1, block=4), (a, c, np.int32(4))))
    s.copy_to_host(out, c)
    s.synchronize()
    assert out.tolist() == [0, 2, 4, 6]
    for call in (a.export_ipc, a[0:8].export_ipc, dev.memory_pool().alloc(16).export_ipc):
        with pytest.raises(Error) as info:
            call()
        assert info.value.kind is ErrorKind.UNSUPPORTED and info.value.backend == "OPENCL"
    from ironaccelerator import BackendKind, IpcHandle
    with pytest.raises(Error) as info:
        dev.import_ipc(IpcHandle(backend=BackendKind.OPENCL, device=0, nbytes=16, data=bytes(64), pid=1))
    assert info.value.kind is ErrorKind.UNSUPPORTED


def test_errors_carry_context_and_pocl_is_pocl(dev: Any) -> None:
    """Item 10."""
    d = dev.descriptor
    if "pocl" in d.capability.vendor_version.lower() or "pthread" in d.name.lower() or "cpu" in d.name.lower():
        assert d.vendor is Vendor.POCL, d
    assert d.limits.max_alloc and d.limits.max_alloc > 0
    huge = d.limits.max_alloc + 1
    with pytest.raises(Error) as info:
        dev.alloc(huge)
    assert str(huge) in str(info.value) and str(d.limits.max_alloc) in str(info.value)
    s = dev.create_stream()
    with pytest.raises(Error) as info:
        s.copy_from_host(dev.alloc(16), object())
    assert info.value.backend == "OPENCL" and info.value.function == "Stream.copy_from_host"
    k = dev.load_module(TWICE).kernel("twice")
    with pytest.raises(Error) as info:
        s.launch(KernelLaunch(k, LaunchDims(grid=1, block=10**6), (dev.alloc(4), dev.alloc(4), np.int32(1))))
    assert info.value.function == "Stream.launch"
    for obj in (dev, s, s.record_event(), k, k.module):
        assert "object at 0x" not in repr(obj) and str(d.id) in repr(obj), repr(obj)
    assert "'twice'" in repr(k) and "3 arguments" in repr(k)
    assert repr(BackendRegistry.default().get(BackendKind.OPENCL)) == "<OpenCLBackend OPENCL>"


DIMS = """
__kernel void dims(__global ulong *out, __global uint *hits) {
    size_t x = get_global_id(0), y = get_global_id(1), z = get_global_id(2);
    if (x == 0 && y == 0 && z == 0) {
        for (uint d = 0; d < 3; ++d) {
            out[d] = get_global_size(d); out[3 + d] = get_local_size(d); out[6 + d] = get_num_groups(d);
        }
        out[9] = get_work_dim();
    }
    atomic_inc(&hits[(z * get_global_size(1) + y) * get_global_size(0) + x]);
}
"""


@pytest.mark.parametrize("grid, block", [(5, 7), (1000, 1), (3, 256), (1, 1), ((3, 2, 2), (4, 2, 1)),
                                         ((2, 3, 4), 1), (1, (2, 3, 4)), ((7, 1, 3), (1, 5, 1))])
def test_launch_dims_global_is_grid_times_block_local_is_block(dev: Any, grid: Any, block: Any) -> None:
    """Item 10: global = grid x block and local = block in each of 3 dimensions, as the runtime sees them
    (get_global_size, get_local_size, get_num_groups), checked and unchecked; no block is ever replaced by 1
    and every work-item runs once."""
    d = LaunchDims(grid=grid, block=block)
    k = dev.load_module(DIMS).kernel("dims")
    s = dev.create_stream()
    n = d.threads
    for launch in (s.launch, s.launch_unchecked):
        out, hits = np.zeros(10, np.uint64), np.zeros(n, np.uint32)
        with dev.alloc(out.nbytes) as o, dev.alloc(hits.nbytes) as h:
            s.copy_from_host(o, out)
            s.copy_from_host(h, hits)
            assert launch(KernelLaunch(k, d, (o, h))) is None
            s.copy_to_host(out, o)
            s.copy_to_host(hits, h)
            s.synchronize()
        expected = [g * b for g, b in zip(d.grid, d.block)] + list(d.block) + list(d.grid) + [3]
        assert out.tolist() == expected, (launch.__name__, d, out.tolist())
        assert (hits == 1).all(), (launch.__name__, d, np.flatnonzero(hits != 1)[:10])


# ------------------------------------------------------------------ bad input, each case in a subprocess

_PRELUDE = """
import numpy as np, ironaccelerator as ia
from ironaccelerator import *
dev = BackendRegistry.default().get(BackendKind.OPENCL).open(0)
s = dev.create_stream()
a = dev.alloc(64); b = dev.alloc(64)
k = dev.load_module("__kernel void f(__global float *p, int n) { if (get_global_id(0) < n) p[0] = n; }").kernel("f")
other = BackendRegistry.default().get(BackendKind.OPENCL).open(0)
oa = other.alloc(64)
L = lambda args, g=1, bl=1: KernelLaunch(k, LaunchDims(grid=g, block=bl), args)
"""

# (name, statement): every one must raise ia.Error, TypeError or ValueError with a message
BAD_INPUT = [
    ("pointer arg np.int64(-5)", "s.launch(L((np.int64(-5), np.int32(1))))"),
    ("pointer arg uint64 max", "s.launch(L((np.uint64(2**64 - 1), np.int32(1))))"),
    ("8-byte float in a pointer slot", "s.launch(L((np.float64(1.0), np.int32(1))))"),
    ("8 bytes in a pointer slot", "s.launch(L((b'12345678', np.int32(1))))"),
    ("Scalar I64 in a pointer slot", "s.launch(L((Scalar(5, DType.I64), np.int32(1))))"),
    ("allocation in a value slot", "s.launch(L((a, a)))"),
    ("another context's buffer", "s.launch(L((oa, np.int32(1))))"),
    ("copy_to_host into object array", "s.copy_to_host(np.empty(8, dtype=object), a)"),
    ("copy_from_host from object array", "s.copy_from_host(a, np.array([object()] * 8, dtype=object))"),
    ("copy_from_host of a numpy scalar", "s.copy_from_host(a, np.int64(-5))"),
    # the same types again after a good copy of each (what to check is decided once per type)
    ("object array after a float array", "s.copy_from_host(a, np.zeros(4, np.float32)); "
                                         "s.copy_to_host(np.array([None] * 4, dtype=object), a)"),
    ("object memoryview after a float one", "s.copy_from_host(a, memoryview(np.zeros(4, np.float32))); "
                                            "s.copy_from_host(a, memoryview(np.array([None] * 4, dtype=object)))"),
    ("numpy scalar after another", "s.copy_from_host(a, np.array([1.0], np.float32)); "
                                   "s.copy_from_host(a, np.float32(1.0))"),
    ("copy_from_host of the bytes type", "s.copy_from_host(a, bytes)"),
    ("copy_from_host(None, a)", "s.copy_from_host(None, np.zeros(4))"),
    ("copy_to_host(x, None)", "s.copy_to_host(np.zeros(4), None)"),
    ("copy from another context", "s.copy(a, oa)"),
    ("alloc(True)", "dev.alloc(True)"),
    ("alloc(1.5)", "dev.alloc(1.5)"),
    ("alloc('8')", "dev.alloc('8')"),
    ("alloc(8, kind='64')", "dev.alloc(8, kind='64')"),
    ("pool.alloc(1.5)", "dev.memory_pool().alloc(1.5)"),
    ("pool.size_class(-1)", "MemoryPool.size_class(-1)"),
    ("LaunchDims(grid=b'x')", "LaunchDims(grid=b'x')"),
    ("LaunchDims(shared_mem='1')", "LaunchDims(shared_mem='1')"),
    ("load_module(b'garbage')", "dev.load_module(b'garbage').kernel('f')"),
    ("load_module(2**64)", "dev.load_module(2**64)"),
    ("load_module(None)", "dev.load_module(None)"),
    ("kernel name with NUL", "dev.load_module('__kernel void f(__global int *p) {}').kernel('f\\x00g')"),
    ("kernel name surrogate", "dev.load_module('__kernel void f(__global int *p) {}').kernel('\\udcff')"),
    ("kernel name not a str", "dev.load_module('__kernel void f(__global int *p) {}').kernel(b'f')"),
    ("Scalar str", "Scalar('x', DType.F32)"),
    ("Scalar NaN int", "Scalar(float('nan'), DType.I32)"),
    ("Scalar overflow", "Scalar(2**40, DType.I32)"),
    ("Scalar dtype None", "Scalar(1, None)"),
    ("Scalar BF16 argument", "s.launch(L((a, Scalar(1.0, DType.BF16))))"),
    ("grid 2**16 x 2**16", "s.launch(L((a, np.int32(1)), g=(2**16, 2**16, 1)))"),
    ("grid (2**31-1) x 4096", "s.launch(L((a, np.int32(1)), g=2**31 - 1, bl=(1, 1, 1)), ) or "
                                "s.launch(L((a, np.int32(1)), g=(2**31 - 1, 4096, 1)))"),
    ("grid (2**31-1)**3", "s.launch(L((a, np.int32(1)), g=(2**31 - 1,) * 3))"),
    ("global size overflows size_t", "s.launch(L((a, np.int32(1)), g=2**40, bl=2**30))"),
    ("freed allocation, checked", "c = dev.alloc(64); c.free(); s.launch(L((c, np.int32(1))))"),
    ("freed allocation, unchecked", "c = dev.alloc(64); c.free(); r = s.launch_unchecked(L((c, np.int32(1))));"
                                    " s.synchronize(); raise r"),
    ("freed allocation copied", "c = dev.alloc(64); c.free(); s.copy(a, c)"),
    ("wrong arg count", "s.launch(L((a,)))"),
    ("launch(None)", "s.launch(None)"),  # AttributeError before
    ("launch_unchecked(None)", "s.launch_unchecked(None)"),
    ("launch of a plain tuple", "s.launch((1, 2, 3))"),
]

_CHILD = """
import json, sys, traceback
cases = json.loads(sys.argv[1])
exec(compile(PRELUDE, "<prelude>", "exec"))
for name, stmt in cases:
    print("BEGIN", name, flush=True)
    try:
        exec(stmt)
    except (ia.Error, TypeError, ValueError) as e:
        print("OK", name, type(e).__name__, str(e).replace("\\n", " ")[:200], flush=True)
    except BaseException as e:
        print("BAD", name, type(e).__name__, str(e)[:200], flush=True)
    else:
        print("ACCEPTED", name, flush=True)
    s.synchronize()
"""


def _run_cases(cases: list[tuple[str, str]]) -> dict[str, str]:
    """Run the cases in one subprocess after another; returns name -> outcome line ("CRASH" for a case the
    interpreter died in; the cases after it run again in a new process)."""
    outcomes: dict[str, str] = {}
    todo = list(cases)
    while todo:
        code = _CHILD.replace("PRELUDE", repr(textwrap.dedent(_PRELUDE)))
        proc = subprocess.run([sys.executable, "-c", code, json.dumps(todo)], capture_output=True, text=True,
                              timeout=120, cwd=ROOT)
        started = None
        for line in proc.stdout.splitlines():
            word, _, rest = line.partition(" ")
            if word == "BEGIN":
                started = rest
            elif word in ("OK", "BAD", "ACCEPTED"):
                name = next(n for n, _ in todo if rest.startswith(n))
                outcomes[name] = line
                started = None
        done = [c for c in todo if c[0] in outcomes]
        if started is not None:  # the process died inside this case
            outcomes[started] = f"CRASH {started} (exit {proc.returncode}) {proc.stderr[-300:]}"
        elif proc.returncode != 0 and len(done) < len(todo):
            raise AssertionError(proc.stdout + proc.stderr)
        todo = [c for c in todo if c[0] not in outcomes]
    return outcomes


def test_bad_input_corpus_is_refused_clearly_never_crashes() -> None:
    """Item 11 / 13: numpy integers as pointers and 8-byte values in buffer slots segfaulted, object arrays
    were copied over, floats and bools allocated, huge grids crashed PoCL; all now clear errors."""
    outcomes = _run_cases(BAD_INPUT)
    wrong = {n: o for n, o in outcomes.items() if not o.startswith("OK")}
    assert not wrong, "\n".join(wrong.values())


def test_random_strided_copies_match_numpy(dev: Any) -> None:
    """200 random 3-D regions (each direction, any byte offset: a buffer's offset becomes an origin whose x may run
    past the row pitch, rows crossing the pitch) on PoCL's clEnqueue*BufferRect, against a numpy reference; the
    regions the checks refuse are refused before any call, and leave both sides unchanged."""
    rng = np.random.default_rng(14)
    s = dev.create_stream()
    size = 4096
    a, b = dev.alloc(size), dev.alloc(size)
    ra, rb = rng.integers(0, 256, size, dtype=np.uint8), rng.integers(0, 256, size, dtype=np.uint8)
    s.copy_from_host(a, ra)
    s.copy_from_host(b, rb)
    host = rng.integers(0, 256, size, dtype=np.uint8)
    done = refused = 0
    for _ in range(200):
        w, h, depth = (int(x) for x in rng.integers(1, [24, 8, 5]))
        pitches = []
        for _side in range(2):
            row = w + int(rng.integers(0, 12))
            pitches.append((row, row * (h + int(rng.integers(0, 3)))))
        (dp, sp) = pitches
        do, so = (int(x) for x in rng.integers(0, size - 256, 2))
        direction = ["h2d", "d2h", "d2d"][int(rng.integers(0, 3))]
        dst, src = {"h2d": (a, host), "d2h": (host, a), "d2d": (b, a)}[direction]
        rdst, rsrc = {"h2d": (ra, host), "d2h": (host, ra), "d2d": (rb, ra)}[direction]
        fits = all(o + (depth - 1) * p[1] + (h - 1) * p[0] + w <= size for o, p in ((do, dp), (so, sp)))
        try:
            s.copy_3d(dst, src, (w, h, depth), dst_pitch=dp, src_pitch=sp, dst_offset=do, src_offset=so)
        except Error as e:
            assert not fits and e.kind is ErrorKind.INVALID_VALUE, (e, w, h, depth, dp, sp, do, so)
            refused += 1
            continue
        assert fits
        s.synchronize()  # (the host array is both a source and a destination across iterations)
        rect_reference(rdst, rsrc, (w, h, depth), dp, sp, do, so)
        done += 1
    back_a, back_b = np.zeros(size, np.uint8), np.zeros(size, np.uint8)
    s.copy_to_host(back_a, a)
    s.copy_to_host(back_b, b)
    s.synchronize()
    np.testing.assert_array_equal(back_a, ra)
    np.testing.assert_array_equal(back_b, rb)
    assert done > 100 and refused > 0, (done, refused)


def _map_count(dev: Any, alloc: Any) -> int:
    api = dev.api
    out = api.ffi.new("cl_uint *")
    assert api.raw.clGetMemObjectInfo(alloc.buffer, api.cl.CL_MEM_MAP_COUNT, api.ffi.sizeof("cl_uint"), out,
                                      api.ffi.NULL) == 0
    return int(out[0])


@pytest.mark.parametrize("kind", [MemoryKind.HOST_PINNED, MemoryKind.HOST])
def test_host_views_of_host_buffers_are_mappings_ended_with_the_view(dev: Any, kind: MemoryKind) -> None:
    """HOST_PINNED/HOST buffers (CL_MEM_ALLOC_HOST_PTR): each host_view() is a clEnqueueMapBuffer mapping, unmapped
    when its last view goes; a view may outlive the allocation's device (the mapping holds its own references)."""
    a = dev.alloc(256, kind)
    s = dev.create_stream()
    s.copy_from_host(a, np.arange(256, dtype=np.uint8))
    s.synchronize()
    v1, v2 = a.host_view(), a.host_view()
    assert _map_count(dev, a) == 2
    np.testing.assert_array_equal(np.frombuffer(v1, np.uint8), np.arange(256, dtype=np.uint8))
    v1.release()
    gc.collect()
    assert _map_count(dev, a) == 1
    x = np.frombuffer(v2, np.uint8)
    x[:] = 9
    del x, v2
    gc.collect()
    assert _map_count(dev, a) == 0
    out = np.zeros(256, np.uint8)
    s.copy_to_host(out, a)
    s.synchronize()
    assert (out == 9).all()
    a.free()
    other = ia.BackendRegistry.default().get(BackendKind.OPENCL).open(0)
    late = other.alloc(64, kind).host_view()
    other.close()
    np.frombuffer(late, np.uint8)[:] = 1  # still mapped, still valid
    del late
    gc.collect()


def test_compile_and_link_with_an_embedded_header(dev: Any) -> None:
    """clCompileProgram's header arrays are inputs (the spec says so since scaffold --missing showed
    header_include_names inferred as an output string): a program including an embedded header compiles and links."""
    from ironaccelerator.backends.opencl import cl

    api = dev.api
    header = cl.clCreateProgramWithSource(dev.context, ["#define SCALE 3.0f\n"], None)
    main = cl.clCreateProgramWithSource(dev.context, ['#include "scale.h"\n'
                                                      "__kernel void k(__global float *a) { a[0] *= SCALE; }\n"], None)
    cl.clCompileProgram(main, [dev.handle], "", [header], ["scale.h"])
    linked = cl.clLinkProgram(dev.context, [dev.handle], "", [main])
    kernel = cl.clCreateKernel(linked, "k")
    assert kernel != api.ffi.NULL
    with pytest.raises(Error) as e:  # without the header the include fails: the header really was used
        bare = cl.clCreateProgramWithSource(dev.context, ['#include "scale.h"\n__kernel void k(void) {}\n'], None)
        cl.clCompileProgram(bare, [dev.handle], "", None, None)
    assert e.value.kind is ErrorKind.COMPILE_FAILED, e.value
    for obj in (kernel,):
        cl.clReleaseKernel(obj)
    for prog in (linked, main, header, bare):
        cl.clReleaseProgram(prog)


def test_create_program_with_binary_through_the_checked_wrapper(dev: Any) -> None:
    """clCreateProgramWithBinary's binaries are inputs (the binder read const unsigned char ** as an output string, so
    its checked wrapper could not take a binary): a program's own binary makes a working program again."""
    from ironaccelerator.backends.opencl import cl

    api, ffi = dev.api, dev.api.ffi
    src = cl.clCreateProgramWithSource(dev.context, ["__kernel void k(__global int *a) { a[0] = 42; }\n"], None)
    cl.clBuildProgram(src, [dev.handle], "")
    size = ffi.new("size_t *")
    assert api.raw.clGetProgramInfo(src, api.cl.CL_PROGRAM_BINARY_SIZES, ffi.sizeof("size_t"), size, ffi.NULL) == 0
    blob = ffi.new("unsigned char[]", size[0])
    ptrs = ffi.new("unsigned char *[1]", [blob])
    assert api.raw.clGetProgramInfo(src, api.cl.CL_PROGRAM_BINARIES, ffi.sizeof(ptrs), ptrs, ffi.NULL) == 0
    status = ffi.new("cl_int[1]", [-1])
    prog = cl.clCreateProgramWithBinary(dev.context, [dev.handle], [size[0]], [bytes(ffi.buffer(blob, size[0]))],
                                        status)
    assert status[0] == 0
    cl.clBuildProgram(prog, [dev.handle], "")
    kernel = cl.clCreateKernel(prog, "k")
    with pytest.raises(Error) as e:  # a damaged binary: the vendor's refusal, as an Error
        cl.clCreateProgramWithBinary(dev.context, [dev.handle], [8], [b"\0garbage"], None)
    assert e.value.kind is ErrorKind.COMPILE_FAILED, e.value  # CL_INVALID_BINARY
    cl.clReleaseKernel(kernel)
    for p in (prog, src):
        cl.clReleaseProgram(p)


def test_pool_free_during_another_threads_fence_waits_for_its_own_queued_work(dev: Any) -> None:
    """A block freed (no stream) by a thread whose own work on it is still queued, while another thread is computing
    the device's pool fence, must wait for that work.  The fence used to clear the device's ``_dirty`` flag before
    publishing its events, so the freeing thread read ``_dirty`` False and the previous (completed) fence and put the
    block on the free list at once: the next ``alloc`` handed it to a new owner while the first thread's queued
    kernel still wrote it (CI: test_memory_pool_shared_by_threads_never_gives_one_block_two_owners, a wrong
    result).  The interleaving is forced here: the fence, at its first stream, lets the freeing thread run."""
    import threading

    api, ffi, cl = dev.api, dev.api.ffi, dev.api.cl
    pool = dev.memory_pool()
    pool.trim()
    s, other = dev.create_stream(), dev.create_stream()
    a, c = pool.alloc(4096), pool.alloc(256)
    dev.synchronize()
    deadline = time.monotonic() + 10
    while dev._pool_fence() and time.monotonic() < deadline:  # the previous fences completed: the device is idle
        time.sleep(0.01)
    err = ffi.new("cl_int *")
    gate = api.raw.clCreateUserEvent(dev.context, err)  # holds s's queue until the test opens it
    assert err[0] == 0
    try:
        api.check(api.raw.clEnqueueBarrierWithWaitList(s.queue, 1, ffi.new("cl_event[1]", [gate]), ffi.NULL),
                  "clEnqueueBarrierWithWaitList")
        s.fill(a, 7)  # queued behind the gate: uses a's block (not a host copy: those block, behind the gate forever)
        freer = threading.Thread(target=a.free)
        original = other._pool_fence

        def fence_that_lets_the_freeing_thread_run() -> Any:
            freer.start()
            freer.join(0.5)  # (with the fix it blocks on the fence's lock until this fence is published)
            return original()

        other._pool_fence = fence_that_lets_the_freeing_thread_run
        c.free()  # this thread computes the fence; the other thread frees a during it
        other._pool_fence = original
        freer.join(10)
        got: list[Any] = []
        taker = threading.Thread(target=lambda: got.append(pool.alloc(4096)))
        taker.start()
        taker.join(0.5)
        assert not (got and got[0].block is a.block), \
            "the pool handed out a block whose freeing thread's queued work (behind the gate) still uses it"
    finally:
        api.raw.clSetUserEventStatus(gate, cl.CL_COMPLETE)
    taker.join(10)
    assert not taker.is_alive()
    s.synchronize()
    api.raw.clReleaseEvent(gate)


def test_stream_pool_fence_computed_by_two_threads_never_calls_queued_work_complete(dev: Any) -> None:
    """Two threads asking for one stream's pool fence at once (a pool recycling blocks freed in the stream's order
    while another computes the device's fence): the second must not answer "complete" (None) while the first has
    cleared the stream's ``_dirty`` flag but not yet published its marker; the stream's work is still queued."""
    import threading

    api, ffi, cl = dev.api, dev.api.ffi, dev.api.cl
    s = dev.create_stream()
    a = dev.alloc(4096)
    err = ffi.new("cl_int *")
    gate = api.raw.clCreateUserEvent(dev.context, err)
    assert err[0] == 0
    try:
        api.check(api.raw.clEnqueueBarrierWithWaitList(s.queue, 1, ffi.new("cl_event[1]", [gate]), ffi.NULL),
                  "clEnqueueBarrierWithWaitList")
        s.fill(a, 7)  # (asynchronous: a host copy would block behind the gate)
        got: list[Any] = []
        second = threading.Thread(target=lambda: got.append(s._pool_fence()))
        original = s._marker

        def marker_that_lets_the_second_thread_run() -> Any:
            second.start()
            second.join(0.5)
            return original()

        s._marker = marker_that_lets_the_second_thread_run
        first = s._pool_fence()
        s._marker = original
        second.join(10)
        assert first is not None
        assert got and got[0] is not None, "a stream with queued work (behind the gate) was reported complete"
    finally:
        api.raw.clSetUserEventStatus(gate, cl.CL_COMPLETE)
    s.synchronize()
    a.free()
    api.raw.clReleaseEvent(gate)


def test_alloc_hot_path_makes_the_same_allocation_and_a_serial_only_for_kernels(dev: Any) -> None:
    """Issue 27: dev.alloc and alloc_unchecked make DEVICE buffers without OpenCLAllocation.__init__, and the
    kernel-argument cache's serial is given on first use as an argument (an allocation never passed to a kernel
    costs none); the allocation is the one __init__ makes, tracked (checked) or not (unchecked), and two buffers
    passed in turn to one kernel get distinct serials (the cache sets the argument again)."""
    from ironaccelerator_runtime.backends.opencl import OpenCLAllocation

    a, u = dev.alloc(64), dev.alloc_unchecked(64)
    ref = OpenCLAllocation(dev, a.buffer, 64, MemoryKind.DEVICE)  # (untracked: never releases a's buffer)
    assert type(a) is type(u)  # (in API mode OpenCLAllocation's compiled twin, test_opencl.py's device_memory test)
    for x in (a, u, ref):
        assert isinstance(x, OpenCLAllocation) and x.device is dev and x.nbytes == 64 and x.kind is MemoryKind.DEVICE
        assert x._serial == 0 and not x.freed and x._svm is None and x._views is None
    assert a._tracked and not u._tracked and not ref._tracked
    s = dev.create_stream()
    k = dev.load_module(TWICE).kernel("twice")
    host = np.arange(16, dtype=np.float32)
    s.copy_from_host(a, host)
    s.copy_from_host(u, host + 1)
    out = np.zeros(16, np.float32)
    c = dev.alloc(64)
    for src, want in ((a, host), (u, host + 1), (a, host)):
        s.launch(KernelLaunch(k, LaunchDims(grid=1, block=16), (src, c, np.int32(16))))
        s.copy_to_host(out, c)
        s.synchronize()
        assert np.array_equal(out, 2 * want)
    assert a._serial and u._serial and a._serial != u._serial
    u.free_unchecked()
    assert isinstance(u.free_unchecked(), Error) and u.free_unchecked().kind is ErrorKind.INVALID_HANDLE
    a.free()
    with pytest.raises(Error) as ei:
        a.free()
    assert ei.value.kind is ErrorKind.INVALID_HANDLE and "was already freed" in str(ei.value)
    p = dev.alloc(64, MemoryKind.HOST_PINNED)  # (other kinds: through the checks, as before)
    assert p.kind is MemoryKind.HOST_PINNED and p._tracked
    p.free()


def test_stream_query_is_known_without_a_marker_after_synchronize(dev: Any) -> None:
    """``Stream.query`` has no timing in it: after ``synchronize`` (or a query that said True) it answers True
    with no vendor call until work is enqueued; then it asks a marker, never True while that work is pending.  It
    waited up to 2 ms for a marker behind finished work and answered False after synchronize when PoCL's
    scheduler took longer (under load)."""
    stream = dev.create_stream()
    a = dev.alloc(1 << 16)
    markers = []
    make = stream._marker

    def counted() -> Any:
        markers.append(1)
        return make()

    stream._marker = counted  # (an instance attribute: the stream's own calls find it first)
    for _ in range(3):
        stream.fill(a, 7)
        stream.synchronize()
        before = len(markers)
        assert all(stream.query() for _ in range(100))
        assert len(markers) == before, "query after synchronize enqueued a marker"
    stream.fill(a, 1)
    while not stream.query():  # (the marker behind the fill: polled, never True before it completed)
        pass
    assert len(markers) >= 1
    done = len(markers)
    assert stream.query() and len(markers) == done  # (and stays True, with no call, while nothing is enqueued)
    host = np.zeros(1 << 16, np.uint8)
    stream.copy_to_host(host, a)
    stream.synchronize()
    assert (host == 1).all()
    a.free()
