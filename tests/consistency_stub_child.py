"""Run by test_consistency_stub.py in a subprocess whose libcuda.so.1 is bench/stub_cuda: issue 23 item 9 (one
behaviour for one mistake) on the CUDA backend, as test_conformance.py checks it on OpenCL, QNN and Metal: an
unknown kernel name, bad device ids, overlapping copies, pickling, NUL in source, Errors naming their backend and a
function.  Prints "ok <n>" (checks)."""

from __future__ import annotations

import copy
import pickle
import re
import sys
from typing import Any, Callable, cast

import numpy as np

import ironaccelerator as ia
from ironaccelerator import Error, ErrorKind, KernelLaunch, LaunchDims
from ironaccelerator.backends.cuda import _backend as cb

checked = 0
NAME = re.compile(r"^[A-Za-z_][\w.]*$")


def refused(fn: Callable[[], Any], kind: ErrorKind, *words: str) -> Error:
    """``fn()`` raises Error(kind) naming CUDA and a function, its message holding ``words``."""
    global checked
    try:
        fn()
    except Error as e:
        assert e.kind is kind, repr(e)
        assert e.backend == "CUDA" and e.function is not None and NAME.match(e.function), repr(e)
        for w in words:
            assert w in str(e), (w, str(e))
        checked += 1
        return e
    raise AssertionError(f"{fn} did not raise")


SOURCE = r"""
extern "C" __global__ void fill(float *out, unsigned n) {}
"""
backend = ia.BackendRegistry.default().get(ia.BackendKind.CUDA)
dev = cast(cb.CudaDevice, backend.open(0))
stream = dev.create_stream()
mod = dev.load_module(cb.compile_source(SOURCE, "compute_90"))
k = mod.kernel("fill")

# module.kernel of a name the module lacks: INVALID_VALUE (CUDA_ERROR_NOT_FOUND was INVALID_HANDLE) named the
# operation called, the driver's code kept (the function was cuModuleGetFunction, under a "Module.kernel:" message)
e = refused(lambda: mod.kernel("no_such_kernel"), ErrorKind.INVALID_VALUE, "no_such_kernel")
assert e.code == 500 and e.function == "Module.kernel" and str(e).startswith("Module.kernel: "), repr(e)

# Backend.open: integers and DeviceIds only
for bad in ("0", 0.9, True, None):
    refused(lambda: backend.open(bad), ErrorKind.INVALID_VALUE, "device_id")  # type: ignore[arg-type]
refused(lambda: backend.open(ia.DeviceId(ia.BackendKind.OPENCL, 0)), ErrorKind.INVALID_VALUE)
assert backend.open(np.int64(0)).descriptor.id.index == 0  # type: ignore[arg-type]

# overlapping ranges of one allocation: refused before the driver; disjoint ones copy
a = dev.alloc(4096)
for dst, src, kw in ((a, a, dict(nbytes=2048, dst_offset=1024)), (a, a, {}), (a[0:2048], a[1024:3072], {})):
    refused(lambda: stream.copy(dst, src, **kw), ErrorKind.INVALID_VALUE, "overlap")
stream.copy(a, a, 1024, dst_offset=2048)
stream.copy(a[0:1024], a[1024:2048])
checked += 1

# a pool allocation slices as an allocation does, and its slice dies with it
p = dev.memory_pool().alloc(4096)
ps = p[1024:2048]
stream.copy_from_host(ps, np.zeros(1024, np.uint8))
p.free()
refused(lambda: stream.copy_from_host(ps, np.zeros(1024, np.uint8)), ErrorKind.INVALID_HANDLE)

# NUL inside NVRTC source
refused(lambda: dev.load_module(SOURCE + "\0" + SOURCE), ErrorKind.INVALID_VALUE, "NUL")

# pickling: a TypeError naming the type and the way to share
for obj, what, hint in ((a, "Allocation", "export_ipc()"), (a[0:64], "Allocation", "export_ipc()"),
                        (dev, "Device", "descriptor"), (stream, "Stream", ""), (mod, "Module", ""),
                        (k, "Kernel", ""), (stream.record_event(), "Event", "")):
    for dump in (pickle.dumps, copy.copy):
        try:
            dump(obj)
        except TypeError as err:
            assert str(err).startswith(f"cannot pickle {what} ") and hint in str(err), str(err)
            checked += 1
        else:
            raise AssertionError(f"{what} pickled")

# elapsed_ms: waits (the stub's events complete at once) and refuses a foreign event
e0, e1 = stream.record_event(), stream.record_event()
assert isinstance(e0.elapsed_ms(e1), float)
refused(lambda: e0.elapsed_ms(None), ErrorKind.INVALID_VALUE)  # type: ignore[arg-type]

# a sample of mistakes: each names CUDA and a function
dead = dev.alloc(64)
dead.free()
for fn, kind in ((lambda: dev.alloc(-1), ErrorKind.INVALID_VALUE), (lambda: a[5:5], ErrorKind.INVALID_VALUE),
                 (lambda: dead.free(), ErrorKind.INVALID_HANDLE), (lambda: stream.copy(a, dead), ErrorKind.INVALID_HANDLE),
                 (lambda: stream.launch(KernelLaunch(k, LaunchDims(grid=2**31, block=1024), (a, np.uint32(1)))),
                  ErrorKind.INVALID_VALUE),
                 (lambda: stream.launch(KernelLaunch(k, LaunchDims(), (dead, np.uint32(1)))), ErrorKind.INVALID_HANDLE),
                 (lambda: stream.fill(a, 256), ErrorKind.INVALID_VALUE)):
    refused(fn, kind)
stream.synchronize()
print("ok", checked)
