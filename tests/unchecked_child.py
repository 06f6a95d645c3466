"""Run by test_conformance.test_launch_unchecked_contract in a child process (``python unchecked_child.py KIND``):
drives every launch mistake docs/UNCHECKED.md lists through ``Stream.launch_unchecked`` on device 0 of backend
KIND and checks that each comes back as a *returned* Error of the documented kind, with nothing launched where that
is observable.  A child, because on a backend that gets one of these wrong the process dies (PoCL aborts on a
2**40 grid; a numpy scalar read as a cl_mem segfaults).  Prints "ok <cases>"."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ironaccelerator import (
    BackendKind, BackendRegistry, CapabilityFlags, DType, Error, ErrorKind, KernelLaunch, LaunchDims, LocalMemory,
    MemoryKind, Scalar,
)

import test_conformance as tc

kind = BackendKind[sys.argv[1]]
backend = BackendRegistry.default().get(kind)
device = backend.open(0)
stream = device.create_stream()
n = 1024
k, dims, args_of = tc._vector_add(device, n)
flags = device.descriptor.capability.flags
mem = MemoryKind.UNIFIED if CapabilityFlags.UNIFIED_MEMORY in flags and kind is not BackendKind.QNN else \
    MemoryKind.DEVICE
a, b, c = (device.alloc(4 * n, mem) for _ in range(3))
assert stream.launch_unchecked(KernelLaunch(k, dims, args_of(a, b, c))) is None  # (the arguments cached)
stream.synchronize()

dead = device.alloc(4 * n, mem)
dead_slice = dead[0:4 * n]
dead.free()
other = backend.open(0)  # another device object: another context
foreign = other.alloc(4 * n)
cases: list[tuple[str, Any, ErrorKind]] = [
    ("a slice of a freed allocation", KernelLaunch(k, dims, args_of(a, b, dead_slice)), ErrorKind.INVALID_HANDLE),
    ("a freed allocation", KernelLaunch(k, dims, args_of(a, dead, c)), ErrorKind.INVALID_HANDLE),
    ("None in a buffer slot", KernelLaunch(k, dims, args_of(a, None, c)), ErrorKind.INVALID_VALUE),
    ("a numpy scalar in a buffer slot", KernelLaunch(k, dims, args_of(np.int64(0), b, c)), ErrorKind.INVALID_VALUE),
    ("another context's allocation", KernelLaunch(k, dims, args_of(a, foreign, c)), ErrorKind.INVALID_VALUE),
    ("a slice of another context's allocation", KernelLaunch(k, dims, args_of(a, foreign[0:4 * n], c)),
     ErrorKind.INVALID_VALUE),
    ("an argument missing", KernelLaunch(k, dims, args_of(a, b, c)[:-1]), ErrorKind.INVALID_VALUE),
    ("an argument extra", KernelLaunch(k, dims, [*args_of(a, b, c), c]), ErrorKind.INVALID_VALUE),
    ("not a kernel", KernelLaunch(object(), dims, args_of(a, b, c)), ErrorKind.INVALID_VALUE),  # type: ignore[arg-type]
    ("a 2**40 grid", KernelLaunch(k, LaunchDims(2**40, dims.block), args_of(a, b, c)), ErrorKind.INVALID_VALUE),
    ("a cooperative launch", KernelLaunch(k, LaunchDims(dims.grid, dims.block, cooperative=True), args_of(a, b, c)),
     ErrorKind.UNSUPPORTED),
]
if kind not in tc.SHARED_MEM:
    cases.append(("LaunchDims.shared_mem", KernelLaunch(k, LaunchDims(dims.grid, dims.block, shared_mem=64),
                                                        args_of(a, b, c)), ErrorKind.UNSUPPORTED))
if tc.MODULE_FORMATS[kind] == "source":
    sources = tc.KERNELS[kind]
    assert sources is not None
    saxpy = device.load_module(sources.saxpy).kernel("saxpy")
    sdims = tc.grid_for(n, 64)
    cases += [
        ("np.int32 for a float", KernelLaunch(saxpy, sdims, (np.int32(2), a, b, np.uint32(n))),
         ErrorKind.INVALID_VALUE),
        ("3 bytes for a uint", KernelLaunch(saxpy, sdims, (np.float32(2), a, b, b"\1\0\0")), ErrorKind.INVALID_VALUE),
        ("None for a value", KernelLaunch(saxpy, sdims, (None, a, b, np.uint32(n))), ErrorKind.INVALID_VALUE),
        ("an allocation for a value", KernelLaunch(saxpy, sdims, (a, a, b, np.uint32(n))), ErrorKind.INVALID_VALUE),
        ("Scalar(I32) for a float", KernelLaunch(saxpy, sdims, (Scalar(2, DType.I32), a, b, np.uint32(n))),
         ErrorKind.INVALID_VALUE),
    ]
checked = 0
for label, launch, expected in cases:
    for _ in range(2):  # the second time from whatever the first left cached
        try:
            r = stream.launch_unchecked(launch)
        except BaseException as e:  # noqa: BLE001
            raise AssertionError(f"{kind.name}: {label}: raised {e!r}, not returned") from None
        assert isinstance(r, Error) and r.kind is expected, (kind.name, label, r)
        checked += 1
    # nothing of a refused launch lingers: the good launch after it still computes the right thing
    stream.copy_from_host(a, np.arange(n, dtype=np.float32))
    stream.copy_from_host(b, np.ones(n, np.float32))
    assert stream.launch_unchecked(KernelLaunch(k, dims, args_of(a, b, c))) is None, label
    out = np.zeros(n, np.float32)
    stream.copy_to_host(out, c)
    stream.synchronize()
    assert (out == np.arange(n, dtype=np.float32) + 1).all(), (kind.name, label)
foreign.free()
other.close()

# a non-KernelLaunch is a TypeError (the call's own parameter of the wrong type), documented in docs/UNCHECKED.md
try:
    stream.launch_unchecked((k, dims))  # type: ignore[arg-type]
except TypeError:
    checked += 1
else:
    raise AssertionError("a non-KernelLaunch was accepted")

# LocalMemory where the backend has no local-memory parameters (OpenCL's own refusal: test_dynamic_local_memory)
if kind not in tc.LOCAL_KERNELS:
    r = stream.launch_unchecked(KernelLaunch(k, dims, args_of(a, b, LocalMemory(64))))
    assert isinstance(r, Error) and r.kind is ErrorKind.UNSUPPORTED, (kind.name, r)
    checked += 1

# after Device.close(): the closed-device Error, for a launch seen before and a new one
launch = KernelLaunch(k, dims, args_of(a, b, c))
assert stream.launch_unchecked(launch) is None
stream.synchronize()
device.close()
for kl in (launch, KernelLaunch(k, dims, args_of(b, a, c))):
    r = stream.launch_unchecked(kl)
    assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE and "closed" in str(r), (kind.name, r)
    checked += 1
print("ok", checked)
