"""Run by test_launch_stub.py in a subprocess whose libcuda.so.1 is bench/stub_cuda: CUDA graphs over the compiled
launch.  While a stream captures, its prepared launchers (``stream.launch``, one kept from before the capture
too) are paused, so that every launch records its allocations into the graph; after the capture they are the
same launchers again.  A replay after one of those allocations (or a copy's, fill's, slice's) was freed is refused
(INVALID_HANDLE) before it reaches the driver, and a graph keeps the allocations it uses from being freed when
dropped.  The stub counts a capturing stream's launches into the graph and adds them to its launch count at
each cuGraphLaunch.  Prints "ok <n>" (checks)."""

from __future__ import annotations

import ctypes
import gc
import sys
from typing import Callable, cast

import numpy as np

import ironaccelerator as ia
from ironaccelerator import Error, ErrorKind, KernelLaunch, LaunchDims
from ironaccelerator.backends.cuda import _backend as cb

STUB = sys.argv[1]


class Counters(ctypes.Structure):  # stub_counters_t in bench/stub_cuda/stub_cuda.c
    _fields_ = [(name, ctypes.c_ulonglong) for name in (
        "launches", "allocs", "frees", "unknown_calls", "ctx_retains", "ctx_releases", "ctx_used_after_release")]


get = ctypes.CDLL(STUB).stub_cuda_counters
get.restype = ctypes.POINTER(Counters)
counters = get().contents

SOURCE = r"""
extern "C" __global__ void fill(float *out, unsigned n) {}
"""
dev = cast(cb.CudaDevice, ia.BackendRegistry.default().get(ia.BackendKind.CUDA).open(0))
assert cb.CudaBackend.vendor_api().modules["driver"].BINDING_MODE == "api"  # (the compiled launch is what is tested)
stream = dev.create_stream()
k = dev.load_module(cb.compile_source(SOURCE, "compute_90")).kernel("fill")
dims = LaunchDims(1, 16)
n16 = np.uint32(16)
checked = 0


def refused(call: Callable[[], object], what: str) -> None:
    global checked
    before = counters.launches
    try:
        call()
    except Error as e:
        assert e.kind is ErrorKind.INVALID_HANDLE and e.backend == "CUDA" and e.function == "Graph.launch", (what, e)
        assert "which the graph's work uses, was freed" in str(e), (what, e)
    else:
        raise AssertionError(f"{what}: the replay was not refused")
    assert counters.launches == before, what  # (nothing reached the driver)
    checked += 1


# the launchers: one kept from before the capture, prepared (its launch re-issued in C), and the stream's own
kept = stream.launch
kept_u = stream.launch_unchecked
assert type(kept).__name__ != "method", kept  # (a prepared launcher, not the Python method)
a, b, c, d = (dev.alloc(64) for _ in range(4))
la = KernelLaunch(k, dims, (a, n16))
kept(la)
kept(la)
base = counters.launches
with stream.capture() as g:
    kept(la)  # the kept launcher's prepared launch
    stream.launch(k, dims, b, n16)  # launch(kernel, dims, *args), built in C
    assert kept_u(KernelLaunch(k, dims, (c, n16))) is None
    stream.launch(KernelLaunch(k, dims, (d[16:], n16)))  # a slice
assert counters.launches == base  # captured, not run
assert stream.launch is kept and stream.launch_unchecked is kept_u  # the same launchers, resumed
g.launch(stream)
assert counters.launches == base + 4
checked += 2
kept(la)  # outside a capture: launched at once again
assert counters.launches == base + 5
checked += 1
for x, what in ((d, "a slice's allocation"), (c, "an unchecked launch's argument"),
                (b, "launch(kernel, dims, *args)'s"), (a, "the kept launcher's argument")):
    x.free()
    refused(g.launch, what)
g.close()

# (launches, fills, device copies, slices and pool blocks: tests/mistakes.py's freed_before_replay, run over this
# stub by mistakes_stub_child.py)
# host <-> device copies and rect copies record their device side
host = np.zeros(64, np.uint8)
copies: tuple[tuple[str, Callable[[ia.Allocation], object]], ...] = (
        ("copy_from_host", lambda x: stream.copy_from_host(x, host)),
        ("copy_to_host", lambda x: stream.copy_to_host(host, x)),
        ("copy_2d to device", lambda x: stream.copy_2d(x, host, 8, 4, dst_pitch=16, src_pitch=8)),
        ("copy_2d from device", lambda x: stream.copy_2d(host, x, 8, 4, dst_pitch=8, src_pitch=16)))
for what, record in copies:
    x = dev.alloc(64)
    with stream.capture() as g:
        record(x)
    g.launch(stream)
    x.free()
    refused(g.launch, what)
    g.close()

# the graph keeps what it uses: dropping the allocation does not free it, closing the graph does
x = dev.alloc(64)
with stream.capture() as g:
    stream.fill(x, 0)
frees = counters.frees
del x
gc.collect()
assert counters.frees == frees, "the graph's allocation was freed while the graph lives"
g.launch(stream)
g.close()
gc.collect()
assert counters.frees == frees + 1
checked += 2
stream.synchronize()
print("ok", checked)
