"""Run by test_consistency_stub.py in a subprocess whose libcuda.so.1 is bench/stub_cuda: the table of mistakes of
tests/mistakes.py (docs/guide/concepts.md, "The same mistake on every backend") on the CUDA backend, as
test_conformance.py runs it on the backends with a device here.  Prints "ok <n>" (checks)."""

from __future__ import annotations

from typing import cast

import numpy as np

import ironaccelerator as ia
from ironaccelerator import Error, ErrorKind, KernelLaunch, LaunchDims
from ironaccelerator.backends.cuda import _backend as cb

import mistakes

checked = 0
SOURCE = r"""
extern "C" __global__ void fill(float *out, unsigned n) {}
"""
backend = ia.BackendRegistry.default().get(ia.BackendKind.CUDA)
dev = cast(cb.CudaDevice, backend.open(0))
stream = dev.create_stream()
k = dev.load_module(cb.compile_source(SOURCE, "compute_90")).kernel("fill")
a = dev.alloc(64)
good = KernelLaunch(k, LaunchDims(1, 16), (a, np.uint32(16)))

# launch(kernel, dims, *args) is launch(KernelLaunch(kernel, dims, args)), checked and unchecked
stream.launch(k, LaunchDims(1, 16), a, np.uint32(16))  # (raises on failure)
assert stream.launch_unchecked(k, LaunchDims(1, 16), a, np.uint32(16)) is None
checked += 2

for what, call in mistakes.not_allocations(stream, a):
    try:
        call()
    except TypeError as e:
        assert "allocation" in str(e).lower(), (what, e)
        checked += 1
    else:
        raise AssertionError(f"{what} did not raise TypeError")

for what, call in mistakes.bad_dims(stream, good):
    refusal = mistakes.check_error(mistakes.outcome(call), ErrorKind.INVALID_VALUE, dev, what)
    assert "LaunchDims" in str(refusal), (what, refusal)
    checked += 1

for what, call in mistakes.unknown_kernel(k.module):
    assert mistakes.check_unknown_kernel(mistakes.outcome(call), dev, what).code == 500  # CUDA_ERROR_NOT_FOUND
    checked += 1

for what, call in mistakes.too_big(dev):
    got = mistakes.outcome(call)
    if not isinstance(got, Error):
        got.free()  # type: ignore[attr-defined]
    mistakes.check_error(got, ErrorKind.INVALID_VALUE, dev, what)
    checked += 1
assert dev.alloc(4096, ia.MemoryKind.UNIFIED).nbytes == 4096  # (max_alloc bounds DEVICE memory only)

# what another Device made: CUDA takes its events, memory and kernels (mistakes.CROSS_DEVICE), but for elapsed_ms
# (two devices' events: INVALID_VALUE) and a checked pool allocation on its stream
assert ia.BackendKind.CUDA in mistakes.CROSS_DEVICE
for closing in (False, True):
    other = cast(cb.CudaDevice, backend.open(0))
    their_k = other.load_module(cb.compile_source(SOURCE, "compute_90")).kernel("fill")
    their_launch = KernelLaunch(their_k, LaunchDims(1, 16), (other.alloc(64), np.uint32(16)))
    if not closing:
        refused_value, crossed = mistakes.another_device(stream, good, other.create_stream(), their_launch)
        for what, call in refused_value:
            mistakes.check_error(mistakes.outcome(call), ErrorKind.INVALID_VALUE, dev, what)
            checked += 1
    else:
        refused_handle, crossed = mistakes.of_a_closed_device(stream, good, other.create_stream(), their_launch)
        for what, call in refused_handle:
            refusal = mistakes.check_error(mistakes.outcome(call), ErrorKind.INVALID_HANDLE, dev, what)
            assert "closed" in str(refusal), (what, refusal)
            checked += 1
    for what, call in crossed:
        got = mistakes.outcome(call)
        assert not isinstance(got, Error), (what, got)
        getattr(got, "free", lambda: None)()
        checked += 1
    other.close()
stream.synchronize()

# a graph replayed after an allocation its work uses was freed (the compiled launchers paused while capturing)
for what, call in mistakes.freed_before_replay(stream,
                                               lambda x: KernelLaunch(k, LaunchDims(1, 16), (x, np.uint32(16)))):
    refusal = mistakes.check_error(mistakes.outcome(call), ErrorKind.INVALID_HANDLE, dev, what)
    assert "which the graph's work uses, was freed" in str(refusal), (what, refusal)
    checked += 1

for what, call in mistakes.bad_device_ids(backend):
    mistakes.check_error(mistakes.outcome(call), ErrorKind.INVALID_VALUE, backend, what)
    checked += 1

refused, allowed = mistakes.after_close(dev, good)
for what, call in refused:
    refusal = mistakes.check_error(mistakes.outcome(call), ErrorKind.INVALID_HANDLE, dev, what)
    assert "closed" in str(refusal), (what, refusal)
    checked += 1
for what, call in allowed:
    assert mistakes.outcome(call) is None, what
    checked += 1
a.free()
print("ok", checked)
