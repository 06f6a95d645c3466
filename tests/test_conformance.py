"""Backend-agnostic conformance of the core trait surface.

Every test that needs a device is parameterised over each *available* backend of
``BackendRegistry.default()`` that enumerates at least one device, so a new backend
(CUDA, ROCm, ...) runs this module unchanged once it is registered.  The only
backend-specific input is device code: :data:`MODULE_FORMATS` says which module format a backend's
``load_module`` takes here (source kernels, :data:`KERNELS`; or QNN context binaries built by
tests/qnn_graphs.py), and :data:`UNSUPPORTED` the operations it declares unsupported, each asserted to raise
UNSUPPORTED; the source-kernel tests skip, saying why, for a backend of another format.

The pure unit tests at the end (DType table, LaunchDims validation) need no device.
"""

from __future__ import annotations

import gc
import math
import os
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
import pytest

from ironaccelerator import (
    Allocation, Backend, BackendKind, BackendRegistry, Capability, CapabilityFlags, ComputeTier, Device,
    DeviceDescriptor, DeviceId, DeviceLimits, DType, Error, ErrorKind, Event, Kernel, KernelLaunch, LaunchDims,
    LocalMemory, MemoryKind, MemoryPool, NumericClass, Scalar, Stream, Vendor,
)

from conftest import rect_reference


# ------------------------------------------------------------------ device code, per backend


@dataclass(frozen=True)
class KernelSources:
    """Device code for one backend.  Each kernel's parameters, in order:

    * ``vector_add``: ``(const float *a, const float *b, float *c, uint32 n)``: ``c[i] = a[i] + b[i]``
    * ``saxpy``: ``(float a, const float *x, float *y, uint32 n)``: ``y[i] = a * x[i] + y[i]``
    * ``lcg``: ``(uint32 *x, uint32 n, uint32 rounds)``: ``rounds`` times ``x[i] = x[i] * 1664525 + 1013904223``
      (deliberately slow: it gives streams and events real work to order and time)
    * ``broken``: a module that does not compile
    """

    vector_add: str
    saxpy: str
    lcg: str
    broken: str


_OPENCL = KernelSources(
    vector_add="""
__kernel void vector_add(__global const float *a, __global const float *b, __global float *c, uint n) {
    size_t i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}
""",
    saxpy="""
__kernel void saxpy(float a, __global const float *x, __global float *y, uint n) {
    size_t i = get_global_id(0);
    if (i < n) y[i] = a * x[i] + y[i];
}
""",
    lcg="""
__kernel void lcg(__global uint *x, uint n, uint rounds) {
    size_t i = get_global_id(0);
    if (i >= n) return;
    uint v = x[i];
    for (uint r = 0; r < rounds; ++r) v = v * 1664525u + 1013904223u;
    x[i] = v;
}
""",
    broken="""
__kernel void broken(__global float *x) {
    x[0] = ;  /* a syntax error */
    this_is_not_declared = 1;
}
""",
)

_CUDA = KernelSources(
    vector_add="""
extern "C" __global__ void vector_add(const float *a, const float *b, float *c, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
""",
    saxpy="""
extern "C" __global__ void saxpy(float a, const float *x, float *y, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
""",
    lcg="""
extern "C" __global__ void lcg(unsigned int *x, unsigned int n, unsigned int rounds) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned int v = x[i];
    for (unsigned int r = 0; r < rounds; ++r) v = v * 1664525u + 1013904223u;
    x[i] = v;
}
""",
    broken="""
extern "C" __global__ void broken(float *x) {
    x[0] = ;  /* a syntax error */
    this_is_not_declared = 1;
}
""",
)

# Metal Shading Language: one [[buffer(i)]] parameter per argument, in the order above (a value as `constant T &`);
# on Linux they run on the IA Simulated Metal Device (tests/metal_sim, a test fixture, not Metal), whose "compiler"
# knows these three kernels by name and signature and fails any other source with a compiler-like message
_METAL = KernelSources(
    vector_add="""
#include <metal_stdlib>
using namespace metal;
kernel void vector_add(device const float *a [[buffer(0)]], device const float *b [[buffer(1)]],
                       device float *c [[buffer(2)]], constant uint &n [[buffer(3)]],
                       uint i [[thread_position_in_grid]]) {
    if (i < n) c[i] = a[i] + b[i];
}
""",
    saxpy="""
#include <metal_stdlib>
using namespace metal;
kernel void saxpy(constant float &a [[buffer(0)]], device const float *x [[buffer(1)]], device float *y [[buffer(2)]],
                  constant uint &n [[buffer(3)]], uint i [[thread_position_in_grid]]) {
    if (i < n) y[i] = a * x[i] + y[i];
}
""",
    lcg="""
#include <metal_stdlib>
using namespace metal;
kernel void lcg(device uint *x [[buffer(0)]], constant uint &n [[buffer(1)]], constant uint &rounds [[buffer(2)]],
                uint i [[thread_position_in_grid]]) {
    if (i >= n) return;
    uint v = x[i];
    for (uint r = 0; r < rounds; ++r) v = v * 1664525u + 1013904223u;
    x[i] = v;
}
""",
    broken="""
kernel void broken(device float *x [[buffer(0)]]) {
    x[0] = ;  /* a syntax error */
    this_is_not_declared = 1;
}
""",
)

# Vulkan GLSL compute shaders (glslangValidator): a kernel is a parameterless void function (compiled as the entry
# point of its name); a launch passes the storage buffers at the positions of their bindings and the push-constant
# members in the other positions, in declaration order (saxpy binds x and y at 1 and 2, so `a` comes first).  The
# local size is specialization constants, so any block launches.
_VULKAN_HEAD = """#version 450
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
"""
_VULKAN = KernelSources(
    vector_add=_VULKAN_HEAD + """
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform Args { uint n; };
void vector_add() { uint i = gl_GlobalInvocationID.x; if (i < n) c[i] = a[i] + b[i]; }
void main() { vector_add(); }
""",
    saxpy=_VULKAN_HEAD + """
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(push_constant) uniform Args { float a; uint n; };
void saxpy() { uint i = gl_GlobalInvocationID.x; if (i < n) y[i] = a * x[i] + y[i]; }
void main() { saxpy(); }
""",
    lcg=_VULKAN_HEAD + """
layout(std430, binding = 0) buffer X { uint x[]; };
layout(push_constant) uniform Args { uint n; uint rounds; };
void lcg() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= n) return;
    uint v = x[i];
    for (uint r = 0u; r < rounds; ++r) v = v * 1664525u + 1013904223u;
    x[i] = v;
}
void main() { lcg(); }
""",
    broken="""#version 450
void main() {
    float x = ;  // a syntax error
    this_is_not_declared = 1;
}
""",
)

KERNELS: dict[BackendKind, KernelSources | None] = {
    BackendKind.OPENCL: _OPENCL,
    BackendKind.CUDA: _CUDA,  # compiled by the backend through NVRTC for the device's architecture
    BackendKind.ROCM: None,  # TODO: HIP C++ for hipRTC (same shape as the CUDA sources)
    BackendKind.METAL: _METAL,  # newLibraryWithSource:options:error: (the simulated device on Linux)
    BackendKind.QNN: None,  # graphs, not source: see MODULE_FORMATS (the kernel tests below need source kernels)
    BackendKind.VULKAN: _VULKAN,  # GLSL compute shaders, compiled by glslangValidator
}

# The module format each backend's load_module takes in this suite: "source" (KERNELS above, compiled by the
# backend) or "qnn_context_binary" (a QNN context binary of ElementWiseAdd graphs, built through the raw bindings
# by tests/qnn_graphs.build_binary; a graph takes its inputs then its outputs, no scalars, LaunchDims()).
MODULE_FORMATS: dict[BackendKind, str] = {
    BackendKind.OPENCL: "source",
    BackendKind.CUDA: "source",
    BackendKind.ROCM: "source",
    BackendKind.METAL: "source",
    BackendKind.QNN: "qnn_context_binary",
    BackendKind.VULKAN: "source",
}

# Operations a backend declares unsupported: each is called and must raise (or, unchecked, return) an
# Error(UNSUPPORTED), never be skipped silently.  name -> call(device)
UNSUPPORTED: dict[BackendKind, dict[str, Callable[[Any], object]]] = {
    BackendKind.OPENCL: {"Stream.capture()": lambda dev: dev.create_stream().capture()},
    BackendKind.METAL: {
        "Device.alloc(MemoryKind.HOST)": lambda dev: dev.alloc(64, MemoryKind.HOST),
        "Device.alloc_unchecked(MemoryKind.HOST_PINNED)": lambda dev: dev.alloc_unchecked(64, MemoryKind.HOST_PINNED),
        "Device.load_module(metallib bytes)": lambda dev: dev.load_module(b"MTLB"),
        "Stream.capture()": lambda dev: dev.create_stream().capture(),
        "Stream.copy_2d": lambda dev: dev.create_stream().copy_2d(dev.alloc(64), bytearray(64), 8, 8),
        "Stream.prefetch": lambda dev: dev.create_stream().prefetch(dev.alloc(64, MemoryKind.UNIFIED)),
    },
    BackendKind.QNN: {
        # registered shared memory (QnnMem_register): the x86 HTP answers 1000 for every memory type
        "Device.alloc(MemoryKind.UNIFIED)": lambda dev: dev.alloc(64, MemoryKind.UNIFIED),
        "Device.alloc_unchecked(MemoryKind.UNIFIED)": lambda dev: dev.alloc_unchecked(64, MemoryKind.UNIFIED),
        "Stream.capture()": lambda dev: dev.create_stream().capture(),
        "Stream.copy_3d": lambda dev: dev.create_stream().copy_3d(bytearray(64), dev.alloc(64), (4, 4, 4)),
        "Stream.prefetch": lambda dev: dev.create_stream().prefetch(dev.alloc(64)),
    },
}


# ------------------------------------------------------------------ which backends run


# Vulkan runs this suite under the Khronos validation layer where it is installed (the backend's debug messenger keeps
# its warnings and errors in validation_messages: the device fixture asserts there are none)
if os.path.exists("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json"):
    os.environ.setdefault("IRONACCEL_VULKAN_VALIDATION", "1")


def _backends_with_devices() -> tuple[list[Any], str]:
    """pytest params: each available backend with >= 1 device; else one skipped param saying why."""
    registry = BackendRegistry.default()
    params, why = [], []
    for kind in BackendKind:
        try:
            backend = registry.get(kind)
        except Error as e:
            why.append(f"{kind.name}: {e}")
            continue
        try:
            devs = backend.devices()
        except Error as e:
            why.append(f"{kind.name}: {e.kind.name}: {e}")
            continue
        if not devs:
            why.append(f"{kind.name}: no devices")
            continue
        params.append(pytest.param(backend, id=kind.name.lower()))
    reason = "no backend with a device is available (" + "; ".join(why) + ")"
    return params, reason


_PARAMS, _NONE_REASON = _backends_with_devices()
if not _PARAMS:
    _PARAMS = [pytest.param(None, id="no-backend", marks=pytest.mark.skip(reason=_NONE_REASON))]


@pytest.fixture(scope="module", params=_PARAMS)
def backend(request: pytest.FixtureRequest) -> Backend:
    b: Backend = request.param
    return b


@pytest.fixture(scope="module")
def device(backend: Backend) -> Iterator[Device]:
    dev = backend.open(backend.devices()[0].id)
    yield dev
    dev.synchronize()
    dev.close()
    assert getattr(backend, "validation_messages", []) == []  # (Vulkan, under the validation layer)


@pytest.fixture
def stream(device: Device) -> Iterator[Stream]:
    s = device.create_stream()
    yield s
    s.synchronize()


@pytest.fixture(scope="module")
def sources(backend: Backend) -> KernelSources:
    src = KERNELS.get(backend.kind)
    if src is None:
        if MODULE_FORMATS.get(backend.kind) != "source":
            pytest.skip(f"{backend.kind.name} modules are {MODULE_FORMATS[backend.kind]}s, not source kernels: "
                        "the module-format tests (test_module_format_*) run it")
        pytest.skip(f"TODO: no {backend.kind.name} kernel sources in test_conformance.KERNELS")
    return src


@pytest.fixture(scope="module")
def kernels(device: Device, sources: KernelSources) -> dict[str, Kernel]:
    return {name: device.load_module(getattr(sources, name)).kernel(name) for name in ("vector_add", "saxpy", "lcg")}


RNG = np.random.default_rng(20240611)


def random_bytes(n: int) -> np.ndarray:
    data = RNG.integers(0, 256, size=n, dtype=np.uint8)
    if n > 1:
        data[0], data[-1] = 0xA5, 0x5A  # never all zeros, even by chance
    else:
        data[0] = 0xA5
    return data


def grid_for(n: int, block: int) -> LaunchDims:
    return LaunchDims(grid=(n + block - 1) // block, block=block)


def kind_of(excinfo: pytest.ExceptionInfo[Error]) -> ErrorKind:
    return excinfo.value.kind


# ------------------------------------------------------------------ enumerate / open


def test_enumerate_descriptors_are_sane(backend: Backend) -> None:
    devs = backend.devices()
    assert devs, "the parameterisation only admits backends with devices"
    assert isinstance(backend.kind, BackendKind)
    for i, d in enumerate(devs):
        assert isinstance(d, DeviceDescriptor)
        assert d.id == DeviceId(backend.kind, i)
        assert d.backend is backend.kind and d.id.backend is backend.kind
        assert str(d.id) == f"{backend.kind.name.lower()}:{i}"
        assert isinstance(d.name, str) and d.name.strip()
        assert isinstance(d.vendor, Vendor)
        assert isinstance(d.total_memory, int) and d.total_memory > 0
        assert isinstance(d.compute_units, int) and d.compute_units >= 1
        cap = d.capability
        assert isinstance(cap, Capability)
        assert isinstance(cap.flags, CapabilityFlags) and isinstance(cap.tier, ComputeTier)
        assert isinstance(cap.vendor_version, str) and cap.vendor_version.strip()
        lim = d.limits
        assert isinstance(lim, DeviceLimits)
        assert all(isinstance(x, int) and x >= 1 for x in lim.max_block + lim.max_grid)
        assert 1 <= lim.max_threads_per_block
        assert lim.max_block[0] >= 1 and lim.max_shared_mem >= 0
    # enumeration is stable
    assert backend.devices() == devs


def test_descriptors_pickle_and_cross_processes(backend: Backend) -> None:
    """DeviceDescriptor (with its id, capability and limits), LaunchDims, DType, MemoryKind, CapabilityFlags and
    Scalar round-trip through pickle (every protocol) and deepcopy, and come back equal from a worker process."""
    import copy
    import multiprocessing
    import pickle
    from concurrent.futures import ProcessPoolExecutor

    d = backend.devices()[0]
    values = [d, d.id, d.capability, d.limits, LaunchDims(grid=(4, 2), block=64, shared_mem=128), DType.F16,
              MemoryKind.UNIFIED, d.capability.flags, Scalar(3, DType.I32)]
    for v in values:
        for proto in range(pickle.HIGHEST_PROTOCOL + 1):
            assert pickle.loads(pickle.dumps(v, protocol=proto)) == v, (v, proto)
        assert copy.deepcopy(v) == v
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:  # (no fork: threads)
        assert list(pool.map(copy.copy, values)) == values


def test_registry_reports_backend(backend: Backend) -> None:
    registry = BackendRegistry.default()
    assert registry.get(backend.kind) is backend
    assert backend in registry.available()
    report = registry.report()
    assert any(line.startswith(f"{backend.kind.name}: library loaded, {len(backend.devices())} device")
               for line in report), report
    for d in backend.devices():
        assert any(line.strip().startswith(f"{d.id}: {d.name}") for line in report), report


def test_open_by_index_and_id_and_context_manager(backend: Backend) -> None:
    desc = backend.devices()[0]
    with backend.open(desc.id) as dev:
        assert isinstance(dev, Device)
        assert dev.descriptor == desc and dev.kind is backend.kind
        with dev.alloc(64) as a:
            assert a.nbytes == 64 and a.device is dev
        assert a.freed
        dev.synchronize()
    with backend.open(0) as dev2:
        assert dev2.descriptor == desc


def test_open_bad_ids(backend: Backend) -> None:
    with pytest.raises(Error) as ei:
        backend.open(len(backend.devices()))
    assert kind_of(ei) is ErrorKind.INVALID_VALUE
    other = next(k for k in BackendKind if k is not backend.kind)
    with pytest.raises(Error) as ei:
        backend.open(DeviceId(other, 0))
    assert kind_of(ei) is ErrorKind.INVALID_VALUE


# ------------------------------------------------------------------ memory


def test_alloc_and_free(device: Device) -> None:
    a = device.alloc(4096)
    assert isinstance(a, Allocation)
    assert a.nbytes == 4096 and a.kind is MemoryKind.DEVICE and a.device is device and not a.freed
    assert repr(a).startswith("<") and "4096" in repr(a)
    a.free()
    assert a.freed and "freed" in repr(a)
    for bad in (0, -1):
        with pytest.raises(Error) as ei:
            device.alloc(bad)
        assert kind_of(ei) is ErrorKind.INVALID_VALUE


# the backends whose allocations export DLPack (``__dlpack__`` and ``__dlpack_device__``); the others export neither
DLPACK_EXPORTERS = {BackendKind.CUDA, BackendKind.ROCM}


def test_dlpack_device(device: Device) -> None:
    with device.alloc(16) as a:
        if device.kind in DLPACK_EXPORTERS:  # (the backend's class has it; the base Allocation does not)
            assert getattr(a, "__dlpack_device__")() == (device.kind.dlpack_device, device.descriptor.id.index)
        else:
            assert not hasattr(a, "__dlpack_device__")


def test_dlpack_both_or_neither(device: Device) -> None:
    """A consumer that probes ``__dlpack_device__`` may call ``__dlpack__`` next: an allocation, plain or from
    the device's pool, has both or neither; where neither, ``np.from_dlpack`` fails at once, naming the
    missing method and the allocation's type."""
    for a in (device.alloc(16), device.memory_pool().alloc(16)):
        with a:
            has_device, has_export = hasattr(a, "__dlpack_device__"), hasattr(a, "__dlpack__")
            assert has_device == has_export, (a, has_device, has_export)
            if has_export:
                continue
            with pytest.raises(AttributeError) as ei:
                np.from_dlpack(a)  # type: ignore[arg-type]  # (what the test is about)
            assert "__dlpack__" in str(ei.value) and type(a).__name__ in str(ei.value), str(ei.value)


def test_alloc_unchecked_returns_result(device: Device) -> None:
    ok = device.alloc_unchecked(256)
    assert isinstance(ok, Allocation) and ok.nbytes == 256
    assert ok.free_unchecked() is None
    huge = device.alloc_unchecked(1 << 62)  # past any device's max_alloc: an Error value, not an exception
    assert isinstance(huge, Error)
    assert huge.kind is ErrorKind.INVALID_VALUE, huge  # (on every backend: QNN's was OUT_OF_MEMORY)


BAD_SIZES = [-1, 0, 2**64, 2**70, 1.5, 4.0, "64", b"64", None, True, False, [64]]
BAD_KINDS = [3, "DEVICE", None, 1.0, BackendKind.CUDA]


def test_alloc_unchecked_returns_invalid_value_for_bad_arguments(device: Device) -> None:
    """``Device.alloc_unchecked`` and ``MemoryPool.alloc_unchecked`` never raise for a bad value: a size that is
    not an integer >= 1 within size_t, or a kind that is not a MemoryKind, is an INVALID_VALUE Error returned,
    naming the parameter (Metal raised TypeError/OverflowError, QNN ValueError, True allocated one byte, 2**70
    was OUT_OF_MEMORY on QNN).  The checked ``alloc`` raises TypeError for a wrong type, else the same kind;
    numpy integers are sizes for both."""
    from functools import partial

    dev: Any = device  # (called with the wrong types on purpose)
    pool: Any = device.memory_pool()
    cases: list[tuple[str, Callable[[], Any], Callable[[], Any], str]] = []
    for n in BAD_SIZES:
        cases.append((f"Device nbytes={n!r}", partial(dev.alloc_unchecked, n), partial(dev.alloc, n), "nbytes"))
        cases.append((f"MemoryPool nbytes={n!r}", partial(pool.alloc_unchecked, n), partial(pool.alloc, n),
                      "nbytes"))
    for k in BAD_KINDS:
        cases.append((f"Device kind={k!r}", partial(dev.alloc_unchecked, 64, k), partial(dev.alloc, 64, k), "kind"))
    cases.append(("MemoryPool stream=42", partial(pool.alloc_unchecked, 64, 42), partial(pool.alloc, 64, 42),
                  "stream"))
    for what, unchecked, checked, param in cases:
        r = unchecked()
        assert isinstance(r, Error), (what, r)
        assert r.kind is ErrorKind.INVALID_VALUE and param in str(r), (what, r)
        assert r.backend == device.kind.name, (what, r)
        with pytest.raises((TypeError, Error)) as ei:
            checked()
        if isinstance(ei.value, Error):
            assert ei.value.kind is ErrorKind.INVALID_VALUE, (what, ei.value)
    for n in (np.int64(64), np.uint32(64)):
        a = dev.alloc_unchecked(n)
        assert isinstance(a, Allocation) and a.nbytes == 64 and type(a.nbytes) is int, a
        assert a.free_unchecked() is None
        b = pool.alloc_unchecked(n)
        assert isinstance(b, Allocation) and b.nbytes == 64, b
        assert b.free_unchecked() is None


def test_checked_double_free_raises_invalid_handle(device: Device) -> None:
    a = device.alloc(128)
    a.free()
    with pytest.raises(Error) as ei:
        a.free()
    assert kind_of(ei) is ErrorKind.INVALID_HANDLE
    assert ei.value.backend == device.kind.name


def _free_twice(device: Device, stream: Stream) -> tuple[str, Callable[[], object]]:
    a = device.alloc(128)
    a.free()
    return "Allocation.free", a.free


def _free_unchecked_twice(device: Device, stream: Stream) -> tuple[str, Callable[[], object]]:
    a = device.alloc(128)
    a.free()
    return "Allocation.free_unchecked", a.free_unchecked


def _copy_too_big(device: Device, stream: Stream) -> tuple[str, Callable[[], object]]:
    a = device.alloc(64)
    return "Stream.copy_from_host", lambda: stream.copy_from_host(a, np.zeros(128, np.uint8))


def _wait_on_a_non_event(device: Device, stream: Stream) -> tuple[str, Callable[[], object]]:
    return "Stream.wait_event", lambda: stream.wait_event(object())  # type: ignore[arg-type]


def _elapsed_to_a_non_event(device: Device, stream: Stream) -> tuple[str, Callable[[], object]]:
    ev = stream.record_event()
    ev.synchronize()
    return "Event.elapsed_ms", lambda: ev.elapsed_ms(object())  # type: ignore[arg-type]


@pytest.mark.parametrize(("mistake", "kind"), [
    (_free_twice, ErrorKind.INVALID_HANDLE), (_free_unchecked_twice, ErrorKind.INVALID_HANDLE),
    (_copy_too_big, ErrorKind.INVALID_VALUE), (_wait_on_a_non_event, ErrorKind.INVALID_VALUE),
    (_elapsed_to_a_non_event, ErrorKind.INVALID_VALUE)], ids=lambda m: getattr(m, "__name__", str(m)).strip("_"))
def test_the_same_mistake_builds_its_error_one_way(device: Device, stream: Stream, mistake: Any,
                                                    kind: ErrorKind) -> None:
    """Issue 26 item 7 (errors.fail): the same mistake's Error, raised or returned, names the backend by its
    BackendKind name, its operation in ``.function``, and starts its message with that operation, on every
    backend."""
    function, call = mistake(device, stream)
    try:
        got = call()
    except Error as e:
        got = e
    assert isinstance(got, Error), got
    assert got.kind is kind, got
    assert (got.backend, got.function) == (device.kind.name, function), got
    assert str(got).startswith(function), got


def test_free_unchecked_never_raises(device: Device) -> None:
    a = device.alloc(128)
    assert a.free_unchecked() is None  # success: nothing to report
    assert a.freed
    again = a.free_unchecked()  # a double free: reported as a value, never raised (and never released twice)
    assert isinstance(again, Error) and again.kind is ErrorKind.INVALID_HANDLE
    b = device.alloc(128)
    b.free()
    assert isinstance(b.free_unchecked(), Error)


def test_use_after_free_in_copies_raises_invalid_handle(device: Device, stream: Stream) -> None:
    live = device.alloc(64)
    dead = device.alloc(64)
    dead.free()
    host = np.zeros(64, np.uint8)
    calls: list[Callable[[], object]] = [
        lambda: stream.copy_from_host(dead, host),
        lambda: stream.copy_to_host(host, dead),
        lambda: stream.copy(dead, live),
        lambda: stream.copy(live, dead),
    ]
    for call in calls:
        with pytest.raises(Error) as ei:
            call()
        assert kind_of(ei) is ErrorKind.INVALID_HANDLE
    live.free()


def test_dropped_allocation_is_released_by_finalizer(device: Device) -> None:
    a = device.alloc(1 << 20)
    ref = weakref.ref(a)
    del a
    gc.collect()
    assert ref() is None, "nothing (no cycle, no registry) may keep a dropped allocation alive"
    # and in bulk: dropped buffers, each filled (so its memory is really committed), must not pile up.
    # Host RSS catches a leak on CPU devices (PoCL); a GPU backend would run out of device memory instead.
    chunk, count = 32 << 20, 24
    data = np.full(chunk, 0x5A, np.uint8)
    s = device.create_stream()
    before = _rss()
    for _ in range(count):
        b = device.alloc(chunk)
        s.copy_from_host(b, data)
        s.synchronize()
        del b
    grown = _rss() - before
    assert grown < (count * chunk) // 3, f"host memory grew by {grown >> 20} MiB over {count} dropped allocations"


def _rss() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return 0


def test_host_copy_size_checks(device: Device, stream: Stream) -> None:
    with device.alloc(16) as a:
        with pytest.raises(Error) as ei:
            stream.copy_from_host(a, np.zeros(17, np.uint8))
        assert kind_of(ei) is ErrorKind.INVALID_VALUE
        with pytest.raises(Error) as ei:
            stream.copy_to_host(np.zeros(17, np.uint8), a)
        assert kind_of(ei) is ErrorKind.INVALID_VALUE
        with pytest.raises(Error) as ei:
            stream.copy_to_host(b"read-only bytes!", a)
        assert kind_of(ei) is ErrorKind.INVALID_VALUE


@pytest.mark.parametrize("nbytes", [1, 4096, (1 << 20) + 7, 16 << 20], ids=["1B", "4KiB", "1MiB+7", "16MiB"])
def test_round_trip_random_data(device: Device, stream: Stream, nbytes: int) -> None:
    data = random_bytes(nbytes)
    with device.alloc(nbytes) as a, device.alloc(nbytes) as b:
        stream.copy_from_host(a, data)
        stream.copy(b, a)  # device to device
        back_a = np.zeros(nbytes, np.uint8)
        back_b = np.full(nbytes, 0xFF, np.uint8)
        stream.copy_to_host(back_a, a)
        stream.copy_to_host(back_b, b)
        stream.synchronize()
        np.testing.assert_array_equal(back_a, data)
        np.testing.assert_array_equal(back_b, data)


def test_copies_with_offsets_and_byte_counts(device: Device, stream: Stream) -> None:
    """nbytes and offsets on both sides of each copy: exactly the bytes asked for move, the rest stay."""
    data = random_bytes(4096)
    with device.alloc(4096) as a, device.alloc(4096) as b:
        stream.fill(a, 0)
        stream.fill(b, 0)
        stream.copy_from_host(a, data, 1000, dst_offset=96, src_offset=24)  # a[96:1096] = data[24:1024]
        stream.copy(b, a, 512, dst_offset=2048, src_offset=96)              # b[2048:2560] = a[96:608]
        back_a, back_b = np.full(4096, 0xEE, np.uint8), np.full(4096, 0xEE, np.uint8)
        stream.copy_to_host(back_a, a)
        stream.copy_to_host(back_b, b, 600, dst_offset=7, src_offset=2000)  # back_b[7:607] = b[2000:2600]
        stream.synchronize()
        want_a = np.zeros(4096, np.uint8)
        want_a[96:1096] = data[24:1024]
        np.testing.assert_array_equal(back_a, want_a)
        want_b = np.zeros(4096, np.uint8)
        want_b[2048:2560] = data[24:536]
        expect = np.full(4096, 0xEE, np.uint8)
        expect[7:607] = want_b[2000:2600]
        np.testing.assert_array_equal(back_b, expect)
        # the host side's remainder after its offset is the default count
        stream.copy_from_host(a, data[:96], dst_offset=4000)
        tail = np.zeros(96, np.uint8)
        stream.copy_to_host(tail, a, src_offset=4000)
        stream.synchronize()
        np.testing.assert_array_equal(tail, data[:96])


def test_copy_ranges_are_checked_before_any_call(device: Device, stream: Stream) -> None:
    with device.alloc(64) as a, device.alloc(32) as b:
        host = np.zeros(64, np.uint8)
        bad: list[Callable[[], object]] = [
            lambda: stream.copy_from_host(a, host, 8, dst_offset=60),         # past dst's end
            lambda: stream.copy_from_host(a, host, 65),                        # past the host buffer's end
            lambda: stream.copy_from_host(a, host[:10], src_offset=11),        # offset past the host end
            lambda: stream.copy_to_host(host, a, 10, src_offset=60),           # past src's end
            lambda: stream.copy_to_host(host, a, 10, dst_offset=60),           # past the host destination's end
            lambda: stream.copy(b, a),                                         # 64 bytes into 32: sizes differ
            lambda: stream.copy(a, b, 33),                                     # more than the source holds
            lambda: stream.copy(b, a, 16, dst_offset=20),                      # past dst's end
            lambda: stream.copy(a, b, -1),
            lambda: stream.fill(a, 0, 65),
            lambda: stream.fill(a, 0, 4, offset=62),
            lambda: stream.fill(a, 256),                                       # not a byte
            lambda: stream.fill(a, 1 << 16, width=2),
            lambda: stream.fill(a, 0, 6, offset=0, width=4),                   # not a whole number of patterns
            lambda: stream.fill(a, 0, width=3),
        ]
        for call in bad:
            with pytest.raises(Error) as ei:
                call()
            assert kind_of(ei) is ErrorKind.INVALID_VALUE, ei.value
        with pytest.raises(TypeError):
            stream.copy(a, b, 8, dst_offset=1.5)  # type: ignore[arg-type]
        stream.copy(b, a, 32)  # part of the larger one: fine
        stream.copy(a, b, dst_offset=32)  # the source's 32 bytes fill the destination's last 32
        stream.synchronize()


@pytest.mark.parametrize("width", [1, 2, 4])
def test_fill_patterns(device: Device, stream: Stream, width: int) -> None:
    value = {1: 0xA5, 2: 0xBEEF, 4: 0xDEADBEEF}[width]
    with device.alloc(4096) as a:
        stream.fill(a, 0x11)
        try:
            stream.fill(a, value, 1024, offset=512, width=width)
        except Error as e:
            # a backend without multi-byte fills says so (Metal's blit encoder fills bytes)
            assert e.kind is ErrorKind.UNSUPPORTED and width > 1 and device.descriptor.backend is BackendKind.METAL, e
            return
        out = np.zeros(4096, np.uint8)
        stream.copy_to_host(out, a)
        stream.synchronize()
        want = np.full(4096, 0x11, np.uint8)
        want[512:1536] = np.frombuffer(value.to_bytes(width, "little") * (1024 // width), np.uint8)
        np.testing.assert_array_equal(out, want)
        stream.fill(a, 0, width=width)  # the whole allocation; zero is a byte pattern on every backend
        stream.copy_to_host(out, a)
        stream.synchronize()
        assert not out.any()


# strided copies (Stream.copy_2d / copy_3d) and prefetch: the backends whose vendor has none (Metal's blit encoder
# copies linear ranges, QNN tensors are flat client buffers; neither has managed memory to migrate)
STRIDED_UNSUPPORTED = {BackendKind.METAL, BackendKind.QNN}
PREFETCH_UNSUPPORTED = {BackendKind.METAL, BackendKind.QNN}


def test_strided_copies_each_direction(device: Device, stream: Stream) -> None:
    """copy_2d / copy_3d host to device, device to device and device to host, with pitches, byte offsets and
    (x, y[, z]) origins: exactly the rows of the region move (checked against a numpy reference)."""
    if device.kind in STRIDED_UNSUPPORTED:
        with device.alloc(64) as a:
            calls: list[Callable[[], object]] = [lambda: stream.copy_2d(a, bytearray(64), 8, 8),
                                                 lambda: stream.copy_3d(bytearray(64), a, (4, 4, 4))]
            for call in calls:
                with pytest.raises(Error) as ei:
                    call()
                assert kind_of(ei) is ErrorKind.UNSUPPORTED and ei.value.backend == device.kind.name
        return
    data = random_bytes(4096)
    ra, rb = np.zeros(4096, np.uint8), np.zeros(4096, np.uint8)
    with device.alloc(4096) as a, device.alloc(4096) as b:
        stream.fill(a, 0)
        stream.fill(b, 0)
        # host -> device: 7 rows of 10 bytes, from pitch 33 at byte 3 to pitch 50 at origin (4, 2) (byte 104)
        stream.copy_2d(a, data, 10, 7, src_pitch=33, dst_pitch=50, src_offset=3, dst_offset=(4, 2))
        rect_reference(ra, data, (10, 7), (50, 350), (33, 231), 104, 3)
        # device -> device, 2-D
        stream.copy_2d(b, a, 12, 5, dst_pitch=20, src_pitch=50, src_offset=100, dst_offset=7)
        rect_reference(rb, ra, (12, 5), (20, 100), (50, 250), 7, 100)
        # host -> device, 3-D: 4 slices of 3 rows of 6 bytes; the source at origin (1, 1, 1) of pitches (9, 45)
        stream.copy_3d(b, data, (6, 3, 4), dst_pitch=(16, 64), src_pitch=(9, 45), dst_offset=1000,
                       src_offset=(1, 1, 1))
        rect_reference(rb, data, (6, 3, 4), (16, 64), (9, 45), 1000, 1 + 9 + 45)
        # device -> device, 3-D, a row pitch alone (slices of `height` rows) and an origin on the destination
        stream.copy_3d(a, b, (5, 2, 3), dst_pitch=(11, 33), src_pitch=16, src_offset=1000, dst_offset=(0, 1, 20))
        rect_reference(ra, rb, (5, 2, 3), (11, 33), (16, 32), 11 + 20 * 33, 1000)
        # device -> host: 3-D into a C-contiguous (4, 3, 8) array (rows of 8 bytes, slices of 24), and 2-D
        box = np.full((4, 3, 8), 0xEE, np.uint8)
        stream.copy_3d(box, b, (6, 3, 4), src_pitch=(16, 64), src_offset=1000, dst_pitch=8)
        want_box = box.copy().reshape(-1)
        rect_reference(want_box, rb, (6, 3, 4), (8, 24), (16, 64), 0, 1000)
        plane = np.full((7, 10), 0xEE, np.uint8)
        stream.copy_2d(plane, a, 10, 7, src_pitch=50, src_offset=104)
        back_a, back_b = np.zeros(4096, np.uint8), np.zeros(4096, np.uint8)
        stream.copy_to_host(back_a, a)
        stream.copy_to_host(back_b, b)
        stream.synchronize()
        np.testing.assert_array_equal(box.reshape(-1), want_box)
        np.testing.assert_array_equal(plane, data[3:3 + 7 * 33].reshape(7, 33)[:, :10])
        np.testing.assert_array_equal(back_a, ra)
        np.testing.assert_array_equal(back_b, rb)
        assert back_b[1000:1006].tolist() == data[55:61].tolist()  # (the reference is not vacuous)


def test_strided_copies_reach_the_last_byte_and_no_further(device: Device, stream: Stream) -> None:
    """Every row of the region must lie inside its side, checked before any vendor call (INVALID_VALUE): the last
    row may end exactly at the end (its pitch's padding after it is not needed); a zero extent copies nothing."""
    if device.kind in STRIDED_UNSUPPORTED:
        pytest.skip(f"{device.kind.name} has no strided copies (test_strided_copies_each_direction checks it says so)")
    data = random_bytes(1024)
    with device.alloc(1024) as a, device.alloc(256) as small:
        stream.fill(a, 0)
        stream.copy_2d(a, data, 10, 4, src_pitch=16, dst_pitch=100, dst_offset=1024 - 310)  # ends at byte 1024
        stream.copy_3d(a, data, (8, 2, 2), dst_pitch=(64, 256), dst_offset=1024 - 8 - 64 - 256)
        stream.copy_2d(a, data, 0, 5)  # nothing
        stream.copy_3d(a, data, (4, 4, 0))
        out = np.zeros(1024, np.uint8)
        stream.copy_to_host(out, a)
        stream.synchronize()
        want = np.zeros(1024, np.uint8)
        rect_reference(want, data, (10, 4), (100, 400), (16, 64), 714, 0)
        rect_reference(want, data, (8, 2, 2), (64, 256), (8, 16), 1024 - 328, 0)
        np.testing.assert_array_equal(out, want)
        host = np.zeros(1024, np.uint8)
        bad: list[Callable[[], object]] = [
            lambda: stream.copy_2d(a, data, 10, 4, src_pitch=16, dst_pitch=100, dst_offset=1024 - 309),  # 1 past
            lambda: stream.copy_2d(a, data, 10, 4, dst_pitch=9),               # pitch below the width
            lambda: stream.copy_2d(a, data[:40], 10, 5),                       # the host source is 40 bytes
            lambda: stream.copy_2d(host, small, 16, 17),                       # 272 bytes of a 256-byte source
            lambda: stream.copy_2d(small, a, 16, 2, src_offset=1024 - 16),     # the second source row past its end
            lambda: stream.copy_2d(a, data, -1, 4),
            lambda: stream.copy_2d(a, data, 4, 4, src_offset=-8),
            lambda: stream.copy_2d(a, data, 4, 4, dst_pitch=2**64),            # not a size_t
            lambda: stream.copy_2d(a, data, 2**63, 2),                         # the region's end overflows size_t
            lambda: stream.copy_2d(a, data, 4, 4, dst_offset=(1, 2, 3)),       # a 3-D origin for a 2-D copy
            lambda: stream.copy_3d(a, data, (4, 4)),                           # not 3 sizes
            lambda: stream.copy_3d(a, data, (4, 4, 2), dst_pitch=(8, 36)),     # slice pitch not a multiple of 8
            lambda: stream.copy_3d(a, data, (4, 4, 2), dst_pitch=(8, 24)),     # slice pitch below 4 rows
            lambda: stream.copy_3d(a, data, (4, 4, 2), dst_pitch=(8, 32, 1)),
            lambda: stream.copy_2d(bytes(64), a, 8, 8),                        # a read-only host destination
            lambda: stream.copy_2d(host, data, 8, 8),                          # host to host
            lambda: stream.copy_2d(a, data, 4, 4, dst_offset=1025),            # an offset past the end, even empty
        ]
        for i, call in enumerate(bad):
            with pytest.raises(Error) as ei:
                call()
            assert kind_of(ei) is ErrorKind.INVALID_VALUE, (i, ei.value)
        with pytest.raises(TypeError):
            stream.copy_2d(a, data, 4.0, 4)  # type: ignore[arg-type]
        stream.copy_to_host(out, a)
        stream.synchronize()
        np.testing.assert_array_equal(out, want)  # none of them wrote anything
    with pytest.raises(Error) as ei:
        stream.copy_2d(a, data, 4, 4)
    assert kind_of(ei) is ErrorKind.INVALID_HANDLE  # a freed allocation


def test_prefetch_of_unified_memory(device: Device, stream: Stream) -> None:
    """Stream.prefetch migrates UNIFIED memory to the device or the host, in stream order, without changing it;
    other kinds and bad targets or ranges are INVALID_VALUE; backends without migration say UNSUPPORTED."""
    if device.kind in PREFETCH_UNSUPPORTED:
        with device.alloc(64) as a:
            with pytest.raises(Error) as ei:
                stream.prefetch(a)
            assert kind_of(ei) is ErrorKind.UNSUPPORTED and ei.value.backend == device.kind.name
        return
    if CapabilityFlags.UNIFIED_MEMORY not in device.descriptor.capability.flags:
        pytest.skip(f"{device.descriptor.name} has no UNIFIED memory")
    u = device.alloc(4096, MemoryKind.UNIFIED)
    view = np.frombuffer(u.host_view(), np.uint32)
    view[:] = np.arange(1024, dtype=np.uint32)
    stream.prefetch(u)  # to this stream's device
    stream.prefetch(u, device, 1024, offset=2048)
    stream.prefetch(u[1024:2048])
    stream.fill(u, 0x01, 16, offset=0)  # device work on it, ordered after the prefetch
    stream.prefetch(u, "host")
    stream.prefetch(u, "host", 0)  # nothing
    stream.synchronize()
    want = np.arange(1024, dtype=np.uint32)
    want[:4] = 0x01010101
    np.testing.assert_array_equal(view, want)
    with device.alloc(64) as d:
        bad: list[Callable[[], object]] = [
            lambda: stream.prefetch(d),                           # device memory does not migrate
            lambda: stream.prefetch(u, "gpu"),
            lambda: stream.prefetch(u, 0),
            lambda: stream.prefetch(u, None, 4097),
            lambda: stream.prefetch(u, None, 8, offset=4090),
        ]
        for i, call in enumerate(bad):
            with pytest.raises(Error) as ei:
                call()
            assert kind_of(ei) is ErrorKind.INVALID_VALUE, (i, ei.value)
    with pytest.raises(TypeError):
        stream.prefetch(bytearray(8))  # type: ignore[arg-type]
    del view
    u.free()
    with pytest.raises(Error) as ei:
        stream.prefetch(u)
    assert kind_of(ei) is ErrorKind.INVALID_HANDLE


# host views: which kinds each backend gives one for (the others: INVALID_VALUE for device memory; a host kind that
# has none yet is UNSUPPORTED, listed here)
HOST_VIEWS = {BackendKind.OPENCL: {MemoryKind.UNIFIED, MemoryKind.HOST_PINNED, MemoryKind.HOST},
              BackendKind.METAL: {MemoryKind.UNIFIED},
              BackendKind.QNN: {MemoryKind.DEVICE, MemoryKind.HOST_PINNED, MemoryKind.HOST},
              BackendKind.VULKAN: {MemoryKind.UNIFIED, MemoryKind.HOST_PINNED, MemoryKind.HOST}}
HOST_VIEW_UNSUPPORTED: dict[BackendKind, set[MemoryKind]] = {}
# views that are mappings (OpenCL's ALLOC_HOST_PTR buffers: clEnqueueMapBuffer): released before the stream uses
# the memory, as OpenCL requires, and taken again to see what it wrote
MAPPED_VIEWS = {BackendKind.OPENCL: {MemoryKind.HOST_PINNED, MemoryKind.HOST}}


def test_host_views_without_a_copy(device: Device, stream: Stream) -> None:
    backend = device.descriptor.backend
    seen = set()
    for kind in MemoryKind:
        a = device.alloc_unchecked(4096, kind)
        if isinstance(a, Error):
            assert a.kind is ErrorKind.UNSUPPORTED, a
            continue
        try:
            view = a.host_view()
        except Error as e:
            if e.kind is ErrorKind.UNSUPPORTED:
                assert kind in HOST_VIEW_UNSUPPORTED.get(backend, set()), e
            else:
                assert e.kind is ErrorKind.INVALID_VALUE and kind not in HOST_VIEWS.get(backend, set()), e
                assert kind not in (MemoryKind.HOST_PINNED, MemoryKind.UNIFIED) or backend is BackendKind.METAL, e
            a.free()
            continue
        seen.add(kind)
        arr = np.frombuffer(view, np.uint32)  # a numpy view of the same memory
        arr[:] = np.arange(1024, dtype=np.uint32)
        if kind in MAPPED_VIEWS.get(backend, set()):
            with pytest.raises(Error) as ei:
                a.free()  # mapped: freeing would unmap under the view
            assert kind_of(ei) is ErrorKind.INVALID_VALUE and "still exported" in str(ei.value)
            del arr
            view.release()  # unmapped: the stream may use the buffer now
            out = np.zeros(1024, np.uint32)
            stream.copy_to_host(out, a)
            stream.synchronize()
            np.testing.assert_array_equal(out, np.arange(1024, dtype=np.uint32))
            stream.copy_from_host(a, np.full(1024, 7, np.uint32))
            stream.synchronize()
            again = a.host_view()
            assert int(np.frombuffer(again, np.uint32)[1000]) == 7  # what the stream wrote, mapped again
            again.release()
            a.free()
            continue
        out = np.zeros(1024, np.uint32)
        stream.copy_to_host(out, a)
        stream.synchronize()
        np.testing.assert_array_equal(out, np.arange(1024, dtype=np.uint32))
        stream.copy_from_host(a, np.full(1024, 7, np.uint32))
        stream.synchronize()
        assert int(arr[1000]) == 7  # what the stream wrote, seen through the view
        with pytest.raises(Error) as ei:
            a.free()  # a view is exported: freeing would leave it reading freed memory
        assert kind_of(ei) is ErrorKind.INVALID_VALUE and "still exported" in str(ei.value)
        refused = a.free_unchecked()
        assert isinstance(refused, Error) and refused.kind is ErrorKind.INVALID_VALUE
        del arr
        view.release()
        a.free()
        with pytest.raises(Error) as ei:
            a.host_view()
        assert kind_of(ei) is ErrorKind.INVALID_HANDLE
    assert seen == HOST_VIEWS.get(backend, set())


def test_pool_blocks_have_host_views_where_their_memory_does(device: Device, stream: Stream) -> None:
    """Issue 23 item 10: a pool block is host-visible exactly where an allocation of the pool's kind is (QNN: every
    allocation is host memory; the pool's blocks were refused with a message calling them device memory), and
    its free is refused while a view is exported (a block handed to a new owner would alias the view)."""
    pool = device.memory_pool()
    plain = device.alloc(4096)
    try:
        plain.host_view().release()
        visible = True
    except Error as e:
        assert e.kind is ErrorKind.INVALID_VALUE, e
        visible = False
    plain.free()
    a = pool.alloc(4096)
    if not visible:
        with pytest.raises(Error) as ei:
            a.host_view()
        assert kind_of(ei) is ErrorKind.INVALID_VALUE
        a.free()
        return
    view = a.host_view()
    arr = np.frombuffer(view, np.uint32)
    arr[:] = np.arange(1024, dtype=np.uint32)
    out = np.zeros(1024, np.uint32)
    stream.copy_to_host(out, a)
    stream.synchronize()
    np.testing.assert_array_equal(out, arr)
    with pytest.raises(Error) as ei:
        a.free()
    assert kind_of(ei) is ErrorKind.INVALID_VALUE and "still exported" in str(ei.value) and not a.freed
    refused = a.free_unchecked()
    assert isinstance(refused, Error) and refused.kind is ErrorKind.INVALID_VALUE and not a.freed
    del arr
    view.release()
    a.free()


def test_unified_memory_flag_means_kernels_and_host_share_it(device: Device, stream: Stream,
                                                             kernels: dict[str, Kernel]) -> None:
    """A device advertising UNIFIED_MEMORY allocates MemoryKind.UNIFIED, and a kernel reads what the host wrote
    through host views and writes what the host then reads, without copies (OpenCL: fine-grained SVM; Metal:
    shared storage)."""
    if CapabilityFlags.UNIFIED_MEMORY not in device.descriptor.capability.flags:
        with pytest.raises(Error):
            device.alloc(64, MemoryKind.UNIFIED).host_view()
        return
    n = 4096
    a, b, c = (device.alloc(4 * n, MemoryKind.UNIFIED) for _ in range(3))
    va, vb, vc = (np.frombuffer(x.host_view(), np.float32) for x in (a, b, c))
    va[:] = np.arange(n, dtype=np.float32)
    vb[:] = 0.5
    vc[:] = -1
    stream.launch(KernelLaunch(kernels["vector_add"], grid_for(n, 64), (a, b, c, Scalar(n, DType.U32))))
    stream.synchronize()
    np.testing.assert_array_equal(vc, np.arange(n, dtype=np.float32) + 0.5)
    del va, vb, vc
    for x in (a, b, c):
        x.free()


# DLPack imports of foreign (numpy) host memory: where the backend can use it (QNN client buffers are host memory)
DLPACK_IMPORTS = {BackendKind.QNN: MemoryKind.HOST}


def test_typed_views_to_numpy_and_back(device: Device, stream: Stream) -> None:
    """``Allocation.view``: host-visible memory exports DLPack as kDLCPU, so ``np.from_dlpack`` is a numpy array
    of the same memory (versioned capsule, legacy for old consumers, each deleted exactly once); device memory
    no consumer can address (OpenCL buffers, private Metal buffers) has a plain view without ``__dlpack__``.
    Imports: numpy memory becomes an allocation at the same address where the backend can use foreign host
    memory, else UNSUPPORTED."""
    import dlpack_capsules
    from ironaccelerator_runtime import dlpack

    backend = device.descriptor.backend
    exported = set()
    for kind in MemoryKind:
        a = device.alloc_unchecked(4096, kind)
        if isinstance(a, Error):
            continue
        v = a.view(DType.F32, (16, 32), offset=1024)
        assert v.shape == (16, 32) and v.dtype is DType.F32 and v.nbytes == 2048
        # (a mapped host view's address holds only while it is mapped: no DLPack export of those kinds)
        if kind not in HOST_VIEWS.get(backend, set()) - MAPPED_VIEWS.get(backend, set()):
            assert not hasattr(v, "__dlpack__") and not hasattr(v, "__dlpack_device__"), (backend, kind)
            with pytest.raises((TypeError, AttributeError)):  # (numpy 2.4: AttributeError, no __dlpack__)
                np.from_dlpack(v)
            del v
            a.free()
            continue
        exported.add(kind)
        assert v.__dlpack_device__() == (1, 0)  # kDLCPU
        host = np.frombuffer(a.host_view(), np.uint8)
        x = np.from_dlpack(v)  # no copy: the same address
        assert x.ctypes.data == host.ctypes.data + 1024 and x.shape == (16, 32) and x.dtype == np.float32
        x[:] = np.arange(512, dtype=np.float32).reshape(16, 32)
        out = np.zeros(512, np.float32)
        stream.copy_to_host(out, a, 2048, src_offset=1024)
        stream.synchronize()
        np.testing.assert_array_equal(out, np.arange(512, dtype=np.float32))
        s = a.view(np.int32, (4, 4), strides=(32, 2), offset=4)  # every other int of every 8th row
        y = np.from_dlpack(s)
        assert y.strides == (128, 8) and y.ctypes.data == host.ctypes.data + 4
        np.testing.assert_array_equal(y, np.frombuffer(host, np.int32)[1:].reshape(-1)[: 32 * 4].reshape(4, 32)[:, :8:2])
        deleted = dlpack.EXPORTER.deleted
        for max_version, name in (((1, 0), b"dltensor_versioned"), (None, b"dltensor")):
            cap = s.__dlpack__(max_version=max_version)
            info = dlpack_capsules.parse(cap)
            assert info["name"] == name and info["device"] == (1, 0) and info["shape"] == (4, 4)
            assert info["strides"] == (32, 2) and info["dtype"] == (0, 32, 1) and info["byte_offset"] == 4
            assert info["data"] == host.ctypes.data and info["has_deleter"]
            assert info["version"] == (None if max_version is None else (1, 1)) and info["flags"] == 0
            del cap
        gc.collect()
        assert dlpack.EXPORTER.deleted == deleted + 2  # dropped unconsumed: deleted once each
        if backend in DLPACK_IMPORTS:  # our own view round-trips too: the same memory, the deleter once on free
            b = device.from_dlpack(v)
            assert b.kind is DLPACK_IMPORTS[backend] and b.nbytes == 2048
            assert np.frombuffer(b.host_view(), np.uint8).ctypes.data == host.ctypes.data + 1024
            b.free()
            assert dlpack.EXPORTER.deleted == deleted + 3
        with pytest.raises(Error) as ei:
            a.free()  # views are exported
        assert kind_of(ei) is ErrorKind.INVALID_VALUE
        del x, y, v, s, host
        gc.collect()
        a.free()
        with pytest.raises(Error) as ei:
            a.view(DType.U8, 4)
        assert kind_of(ei) is ErrorKind.INVALID_HANDLE
    assert exported == HOST_VIEWS.get(backend, set()) - MAPPED_VIEWS.get(backend, set())
    arr = np.arange(1000, dtype=np.float32)
    if backend not in DLPACK_IMPORTS:
        with pytest.raises(Error) as ei:
            device.from_dlpack(arr)
        assert kind_of(ei) is ErrorKind.UNSUPPORTED
        return
    ref = weakref.ref(arr_owner := np.arange(1000, dtype=np.float32))
    imp = device.from_dlpack(arr_owner)  # numpy -> an allocation without a copy
    assert np.frombuffer(imp.host_view(), np.float32).ctypes.data == arr_owner.ctypes.data
    assert imp.dtype is DType.F32 and imp.shape == (1000,) and imp.nbytes == 4000
    out = np.zeros(1000, np.float32)
    stream.copy_to_host(out, imp)
    stream.copy_from_host(imp, np.full(10, 5, np.float32))
    stream.synchronize()
    np.testing.assert_array_equal(out, arr)
    assert (arr_owner[:10] == 5).all()
    del arr_owner
    gc.collect()
    assert ref() is not None  # the allocation keeps numpy's array alive ...
    imp.free()
    gc.collect()
    assert ref() is None  # ... until it is freed (numpy's deleter ran)
    for bad in (np.arange(10.0)[::2], np.zeros(4, np.float16).view(np.dtype("V2")), b"bytes"):
        with pytest.raises(Error) as ei:
            device.from_dlpack(bad)
        assert kind_of(ei) is ErrorKind.INVALID_VALUE, bad
    ro = np.zeros(8)
    ro.flags.writeable = False
    with pytest.raises(Error) as ei:
        device.from_dlpack(ro)  # numpy marks it READ_ONLY in the versioned capsule
    assert kind_of(ei) is ErrorKind.INVALID_VALUE and "read-only" in str(ei.value)


def test_dlpack_refused_capsules_surface_the_consumer_error_and_are_deleted_once(device: Device) -> None:
    """A consumer that refuses a capsule (``np.from_dlpack`` of a bf16 view; a consumer that raises with the
    capsule in hand, versioned or legacy) raises its own error, never ``SystemError: ... returned NULL without
    setting an exception``; each refused capsule's deleter runs exactly once, and ``free()`` works after.
    Refusals of ``__dlpack__`` itself (``copy=True``, another ``dl_device``) make no capsule."""
    from ironaccelerator_runtime import dlpack

    backend = device.descriptor.backend
    kinds = HOST_VIEWS.get(backend, set()) - MAPPED_VIEWS.get(backend, set())
    assert kinds, f"{backend.name} exports DLPack from no memory kind"
    for kind in sorted(kinds, key=lambda k: k.name):
        a = device.alloc(4096, kind)
        deleted, live = dlpack.EXPORTER.deleted, len(dlpack.EXPORTER.live)
        with pytest.raises(Exception) as ei:
            np.from_dlpack(a.view(DType.BF16, 16))  # numpy has no bfloat16
        assert not isinstance(ei.value, SystemError), ei.value
        assert "dtype" in str(ei.value), ei.value  # numpy's own message
        view = a.view(DType.F32, (4, 4), strides=(8, 2))

        def refuse(capsule: Any) -> None:
            raise BufferError("refused by the consumer")

        for max_version in ((1, 0), None):
            with pytest.raises(BufferError, match="refused by the consumer"):
                refuse(view.__dlpack__(stream=None, max_version=max_version))
        with pytest.raises(BufferError):
            view.__dlpack__(max_version=(1, 0), copy=True)
        with pytest.raises(BufferError):
            view.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
        assert np.from_dlpack(view).shape == (4, 4)  # (accepted and dropped: deleted by numpy)
        del view
        a.free()  # the refused capsules' views are released: nothing is exported any more
        assert dlpack.EXPORTER.deleted == deleted + 4  # each capsule exactly once
        gc.collect()
        assert dlpack.EXPORTER.deleted == deleted + 4 and len(dlpack.EXPORTER.live) == live


def test_round_trip_typed_buffers(device: Device, stream: Stream) -> None:
    """Any buffer-protocol object: float32 2-D arrays, bytes, bytearray, memoryview."""
    x = RNG.standard_normal((257, 33)).astype(np.float32)
    with device.alloc(x.nbytes) as a:
        stream.copy_from_host(a, x)
        y = np.empty_like(x)
        stream.copy_to_host(y, a)
        stream.synchronize()
        np.testing.assert_array_equal(y, x)
        raw = bytes(random_bytes(100))
        stream.copy_from_host(a, raw)
        out = bytearray(100)
        stream.copy_to_host(memoryview(out), a)
        stream.synchronize()
        assert bytes(out) == raw


# ------------------------------------------------------------------ kernels


N = 1 << 20


def test_vector_add(device: Device, stream: Stream, kernels: dict[str, Kernel]) -> None:
    a = RNG.standard_normal(N).astype(np.float32)
    b = RNG.standard_normal(N).astype(np.float32)
    c = np.zeros(N, np.float32)
    with device.alloc(a.nbytes) as da, device.alloc(b.nbytes) as db, device.alloc(c.nbytes) as dc:
        stream.copy_from_host(da, a)
        stream.copy_from_host(db, b)
        stream.launch(KernelLaunch(kernels["vector_add"], grid_for(N, 256), [da, db, dc, np.uint32(N)]))
        stream.copy_to_host(c, dc)
        stream.synchronize()
    np.testing.assert_allclose(c, a + b, rtol=1e-6, atol=0)


def test_saxpy_with_scalar_argument(device: Device, stream: Stream, kernels: dict[str, Kernel]) -> None:
    x = RNG.standard_normal(N).astype(np.float32)
    y = RNG.standard_normal(N).astype(np.float32)
    alpha = 2.5
    out = np.zeros(N, np.float32)
    with device.alloc(x.nbytes) as dx, device.alloc(y.nbytes) as dy:
        stream.copy_from_host(dx, x)
        stream.copy_from_host(dy, y)
        # a Scalar(value, DType) and a numpy scalar, both by value
        stream.launch(KernelLaunch(kernels["saxpy"], grid_for(N, 128), [Scalar(alpha, DType.F32), dx, dy, np.uint32(N)]))
        stream.launch(KernelLaunch(kernels["saxpy"], grid_for(N, 128), [np.float32(-1.0), dx, dy, np.uint32(N)]))
        stream.copy_to_host(out, dy)
        stream.synchronize()
    expected = np.float32(-1.0) * x + (np.float32(alpha) * x + y)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def lcg_reference(x: np.ndarray, rounds: int) -> np.ndarray:
    v = x.astype(np.uint32).copy()
    with np.errstate(over="ignore"):
        for _ in range(rounds):
            v = v * np.uint32(1664525) + np.uint32(1013904223)
    return v


def test_two_streams_ordered_by_event(device: Device, kernels: dict[str, Kernel]) -> None:
    """Stream A uploads and runs a slow kernel, then records an event; stream B waits on that event
    and reads the result back.  Only B is synchronised: the event alone must order B after A."""
    n, rounds = 1 << 18, 2000
    x = RNG.integers(0, 2**32, size=n, dtype=np.uint32)
    expected = lcg_reference(x, rounds)
    a, b = device.create_stream(), device.create_stream()
    with device.alloc(x.nbytes) as buf:
        a.copy_from_host(buf, x)
        a.launch(KernelLaunch(kernels["lcg"], grid_for(n, 64), [buf, np.uint32(n), np.uint32(rounds)]))
        done = a.record_event()
        out = np.zeros(n, np.uint32)
        b.wait_event(done)
        b.copy_to_host(out, buf)
        b.synchronize()
        assert done.query(), "B finished after waiting on A's event, so the event has completed"
        np.testing.assert_array_equal(out, expected)
        a.synchronize()


def test_event_timing_is_positive_and_monotone(device: Device, stream: Stream, kernels: dict[str, Kernel]) -> None:
    n = 1 << 16
    with device.alloc(4 * n) as buf:
        stream.copy_from_host(buf, np.arange(n, dtype=np.uint32))
        launch = KernelLaunch(kernels["lcg"], grid_for(n, 64), [buf, np.uint32(n), np.uint32(500)])
        e0 = stream.record_event()
        stream.launch(launch)
        e1 = stream.record_event()
        stream.launch(launch)
        e2 = stream.record_event()
        e2.synchronize()
        assert e0.query() and e1.query() and e2.query()
        t01, t02, t12 = e0.elapsed_ms(e1), e0.elapsed_ms(e2), e1.elapsed_ms(e2)
    assert all(isinstance(t, float) and math.isfinite(t) for t in (t01, t02, t12))
    assert 0 < t01 < t02 and 0 < t12 < t02
    assert t01 + t12 == pytest.approx(t02, rel=1e-3, abs=1e-3)


def test_stream_and_event_queries(device: Device, stream: Stream, kernels: dict[str, Kernel]) -> None:
    n = 1 << 16
    with device.alloc(4 * n) as buf:
        stream.launch(KernelLaunch(kernels["lcg"], grid_for(n, 64), [buf, np.uint32(n), np.uint32(10)]))
        ev = stream.record_event()
        stream.synchronize()
        assert ev.query() is True
        assert stream.query() is True
        assert stream.query() is True  # and stays so while nothing is enqueued
        ev.synchronize()  # an already-complete event


def test_host_callbacks_run_in_order_after_the_work(device: Device, stream: Stream, kernels: dict[str, Kernel],
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """add_callback: each fn runs once, in order, after the work queued before it (an event recorded before the
    callback is complete when it runs); an exception is logged and kept in callback_errors, the next ones still
    run."""
    import logging

    ran: list[tuple[int, bool]] = []
    n = 1 << 16
    with device.alloc(4 * n) as a, device.alloc(4 * n) as b, device.alloc(4 * n) as c:
        x = np.ones(n, np.float32)
        stream.copy_from_host(a, x)
        stream.copy_from_host(b, x)
        events = []
        for i in range(5):
            stream.launch(KernelLaunch(kernels["vector_add"], grid_for(n, 64), (a, b, c, Scalar(n, DType.U32))))
            ev = stream.record_event()
            events.append(ev)
            def note(i: int = i, ev: Event = ev) -> None:
                ran.append((i, ev.query()))
            stream.add_callback(note)
        def boom() -> None:
            raise ValueError("raised in a callback")
        with caplog.at_level(logging.ERROR, logger="ironaccelerator.callbacks"):
            stream.add_callback(boom)
            stream.add_callback(lambda: ran.append((5, True)))
            assert stream.drain_callbacks(timeout=60)
        assert ran == [(i, True) for i in range(6)], ran
        (fn, err), = stream.callback_errors
        assert fn is boom and isinstance(err, ValueError)
        assert any("raised in a callback" in str(r.exc_info[1]) for r in caplog.records if r.exc_info), caplog.text
        with pytest.raises(TypeError):
            stream.add_callback(42)  # type: ignore[arg-type]
        stream.synchronize()


def test_threads_share_device_module_kernel_and_pool(device: Device, kernels: dict[str, Kernel]) -> None:
    """The README's thread-safety policy: the device, the module and its kernel, and the memory pool are shared by
    4 threads; each has its own stream (and the events it records).  Every result is checked."""
    import threading

    k = kernels["vector_add"]
    pool = device.memory_pool()
    problems: list[str] = []

    def work(t: int) -> None:
        try:
            s = device.create_stream()
            rng = np.random.default_rng(t)
            for i in range(25):
                n = int(rng.integers(64, 4096))
                a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
                da, db = device.alloc(4 * n), pool.alloc(4 * n, s)
                dc = device.alloc(4 * n) if i % 2 else pool.alloc(4 * n, s)
                s.copy_from_host(da, a)
                s.copy_from_host(db, b)
                s.launch(KernelLaunch(k, grid_for(n, 64), (da, db, dc, Scalar(n, DType.U32))))
                out = np.empty_like(a)
                s.copy_to_host(out, dc)
                s.record_event().synchronize() if i % 3 else s.synchronize()
                if not np.array_equal(out, a + b):
                    problems.append(f"thread {t} round {i}: wrong sum")
                for x in (da, db, dc):
                    x.free()
        except Exception as e:  # reported below: a thread's exception must fail the test
            problems.append(f"thread {t}: {e!r}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
        assert not th.is_alive(), "a worker hangs"
    assert problems == []
    pool.trim()


SLICES_UNSUPPORTED: set[BackendKind] = set()  # (every backend slices; QNN: tests/test_qnn_backend.py)


def test_allocation_slices_as_kernel_arguments(device: Device, stream: Stream, kernels: dict[str, Kernel]) -> None:
    """alloc[start:stop] shares the allocation's memory: a kernel over three slices of one allocation writes only
    its output slice; copies and fills on a slice touch only its bytes; the slice dies with the allocation."""
    backend = device.descriptor.backend
    a = device.alloc(5 * 4096)
    if backend in SLICES_UNSUPPORTED:
        with pytest.raises(Error) as ei:
            a[0:64]
        assert kind_of(ei) is ErrorKind.UNSUPPORTED
        a.free()
        return
    n = 1024  # floats: 4096 bytes per slice, at 4096-byte boundaries (OpenCL sub-buffers need aligned origins)
    x, y, z = a[0:4096], a[8192:12288], a[-4096:]
    assert (x.nbytes, y.nbytes, z.nbytes) == (4096, 4096, 4096)
    stream.fill(a, 0xAB)
    xs, ys = np.arange(n, dtype=np.float32), np.full(n, 0.25, np.float32)
    stream.copy_from_host(x, xs)
    stream.copy_from_host(y, ys)
    stream.launch(KernelLaunch(kernels["vector_add"], grid_for(n, 64), (x, y, z, Scalar(n, DType.U32))))
    out = np.zeros(5 * 4096, np.uint8)
    stream.copy_to_host(out, a)
    stream.synchronize()
    np.testing.assert_array_equal(out[16384:].view(np.float32), xs + ys)
    np.testing.assert_array_equal(out[4096:8192], np.full(4096, 0xAB, np.uint8))  # between the slices: untouched
    stream.fill(y[1024:2048], 0)  # a slice of a slice
    back = np.zeros(4096, np.uint8)
    stream.copy_to_host(back, y)
    stream.synchronize()
    assert not back[1024:2048].any() and (back[:1024].view(np.float32) == 0.25).all()
    for bad in (lambda: a[10:10], lambda: a[::2], lambda: x.free()):
        with pytest.raises(Error) as ei:
            bad()
        assert kind_of(ei) is ErrorKind.INVALID_VALUE
    with pytest.raises(TypeError):
        a[3]  # type: ignore[index]
    a.free()
    with pytest.raises(Error) as ei:
        stream.copy_to_host(back, y)  # its allocation is freed
    assert kind_of(ei) is ErrorKind.INVALID_HANDLE


def test_kernel_attributes(device: Device, kernels: dict[str, Kernel]) -> None:
    """What the compiler made of a kernel; QNN graphs report none (UNSUPPORTED)."""
    k = kernels["vector_add"]
    if device.descriptor.backend is BackendKind.QNN:
        with pytest.raises(Error) as ei:
            k.attributes
        assert kind_of(ei) is ErrorKind.UNSUPPORTED
        return
    at = k.attributes
    assert 1 <= at.max_threads_per_block <= device.descriptor.limits.max_threads_per_block, at
    with pytest.raises(Error) as ei:  # occupancy: CUDA/HIP only (tests/test_gpu_backends.py)
        k.max_active_blocks(64)
    assert kind_of(ei) is ErrorKind.UNSUPPORTED
    assert at.preferred_multiple is not None and at.preferred_multiple >= 1, at
    assert at == k.attributes  # a frozen value, the same each time


def test_await_stream_and_event(device: Device, stream: Stream, kernels: dict[str, Kernel]) -> None:
    import asyncio

    n = 1 << 16
    with device.alloc(4 * n) as a, device.alloc(4 * n) as b, device.alloc(4 * n) as c:
        stream.copy_from_host(a, np.full(n, 2, np.float32))
        stream.copy_from_host(b, np.full(n, 3, np.float32))

        async def main() -> np.ndarray:
            stream.launch(KernelLaunch(kernels["vector_add"], grid_for(n, 64), (a, b, c, Scalar(n, DType.U32))))
            await stream.wait()
            ev = stream.record_event()
            await ev
            assert ev.query()
            out = np.zeros(n, np.float32)
            stream.copy_to_host(out, c)
            await stream.wait()
            return out

        np.testing.assert_array_equal(asyncio.run(main()), np.full(n, 5, np.float32))


def test_device_synchronize_waits_for_every_stream(device: Device, kernels: dict[str, Kernel]) -> None:
    n = 1 << 16
    x = RNG.integers(0, 2**32, size=n, dtype=np.uint32)
    streams = [device.create_stream() for _ in range(2)]
    bufs = [device.alloc(x.nbytes) for _ in streams]
    outs = [np.zeros(n, np.uint32) for _ in streams]
    for s, buf, out in zip(streams, bufs, outs):
        s.copy_from_host(buf, x)
        s.launch(KernelLaunch(kernels["lcg"], grid_for(n, 64), [buf, np.uint32(n), np.uint32(50)]))
        s.copy_to_host(out, buf)
    device.synchronize()
    expected = lcg_reference(x, 50)
    for out in outs:
        np.testing.assert_array_equal(out, expected)
    for buf in bufs:
        buf.free()


def test_launch_bad_dimensions_raise_invalid_value(device: Device, stream: Stream, kernels: dict[str, Kernel]) -> None:
    lim = device.descriptor.limits
    k = kernels["vector_add"]
    with device.alloc(16) as a:
        args = [a, a, a, np.uint32(0)]
        bad = [
            LaunchDims(grid=1, block=lim.max_block[0] + 1),
            LaunchDims(grid=1, block=(1, 1, lim.max_block[2] + 1)),
            LaunchDims(grid=1, block=0),
            LaunchDims(grid=0, block=1),
        ]
        if device.kind in SHARED_MEM:  # (elsewhere any shared_mem is UNSUPPORTED: test_dynamic_local_memory)
            bad.append(LaunchDims(grid=1, block=1, shared_mem=lim.max_shared_mem + 1))
        if lim.max_threads_per_block < lim.max_block[0] * lim.max_block[1]:
            bad.append(LaunchDims(grid=1, block=(lim.max_block[0], lim.max_block[1], 1)))
        for dims in bad:
            with pytest.raises(Error) as ei:
                stream.launch(KernelLaunch(k, dims, args))
            assert kind_of(ei) is ErrorKind.INVALID_VALUE, dims
        stream.synchronize()


def test_launch_wrong_argument_count_raises_invalid_value(device: Device, stream: Stream,
                                                          kernels: dict[str, Kernel]) -> None:
    k = kernels["vector_add"]
    with device.alloc(16) as a:
        for args in ([a, a, a], [a, a, a, np.uint32(4), np.uint32(4)], []):
            with pytest.raises(Error) as ei:
                stream.launch(KernelLaunch(k, LaunchDims(1, 4), args))
            assert kind_of(ei) is ErrorKind.INVALID_VALUE


def test_launch_with_freed_allocation_raises_invalid_handle(device: Device, stream: Stream,
                                                            kernels: dict[str, Kernel]) -> None:
    a = device.alloc(16)
    a.free()
    with pytest.raises(Error) as ei:
        stream.launch(KernelLaunch(kernels["vector_add"], LaunchDims(1, 4), [a, a, a, np.uint32(4)]))
    assert kind_of(ei) is ErrorKind.INVALID_HANDLE


def test_a_bad_launch_builds_its_error_one_way(device: Device, stream: Stream, kernels: dict[str, Kernel]) -> None:
    """Issue 26 item 7 (errors.fail), for launches: bad dimensions, the wrong argument count and a freed argument
    each raise an Error naming the backend by its BackendKind name and ``Stream.launch``, its message starting
    with it; ``launch_unchecked`` returns the same Error for bad dimensions."""
    lim = device.descriptor.limits
    k = kernels["vector_add"]
    dead = device.alloc(16)
    dead.free()
    with device.alloc(16) as a:
        good: list[Any] = [a, a, a, np.uint32(0)]
        mistakes: list[tuple[LaunchDims, list[Any]]] = [
            (LaunchDims(grid=1, block=lim.max_block[0] + 1), good), (LaunchDims(1, 4), [a, a, a]),
            (LaunchDims(1, 4), [dead, a, a, np.uint32(0)])]
        for dims, args in mistakes:
            with pytest.raises(Error) as ei:
                stream.launch(KernelLaunch(k, dims, args))
            e = ei.value
            assert (e.backend, e.function) == (device.kind.name, "Stream.launch"), e
            assert str(e).startswith("Stream.launch"), e
        got = stream.launch_unchecked(KernelLaunch(k, mistakes[0][0], good))
        assert isinstance(got, Error) and got.backend == device.kind.name, got
        assert got.function is not None and str(got).startswith(got.function), got
        stream.synchronize()


def test_launch_unchecked(device: Device, stream: Stream, kernels: dict[str, Kernel]) -> None:
    n = 1000
    a = np.arange(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    with device.alloc(a.nbytes) as da, device.alloc(a.nbytes) as dc:
        stream.copy_from_host(da, a)
        ok = stream.launch_unchecked(KernelLaunch(kernels["vector_add"], grid_for(n, 100), [da, da, dc, np.uint32(n)]))
        assert ok is None
        stream.copy_to_host(out, dc)
        stream.synchronize()
        np.testing.assert_array_equal(out, 2 * a)
        # unchecked skips LaunchDims validation; the driver refuses a block over its limit: a value, not raised
        too_big = device.descriptor.limits.max_threads_per_block + 1
        failed = stream.launch_unchecked(KernelLaunch(kernels["vector_add"], LaunchDims(grid=1, block=too_big),
                                                      [da, da, dc, np.uint32(n)]))
        assert isinstance(failed, Error)
        assert failed.kind is ErrorKind.INVALID_VALUE
        stream.synchronize()


def test_compile_error_carries_build_log(device: Device, sources: KernelSources) -> None:
    with pytest.raises(Error) as ei:
        device.load_module(sources.broken)
    err = ei.value
    assert err.kind is ErrorKind.COMPILE_FAILED
    assert err.backend == device.kind.name
    msg = str(err)
    assert "log" in msg.lower()
    assert "error" in msg.lower() and ("expected expression" in msg or "this_is_not_declared" in msg or "3:" in msg), msg


# what each backend's compiler says about a `#warning` in a module that builds: None where it reports nothing
# (the Metal simulator's compiler writes no log; real Metal reports warnings through the NSError of a successful
# newLibraryWithSource:options:error:, which the generated binding releases: Module.build_log stays "")
WARNING_LOGS: dict[BackendKind, str | None] = {BackendKind.OPENCL: "ia_build_log_check",
                                               BackendKind.CUDA: "ia_build_log_check", BackendKind.METAL: None}
# how a backend's source says `#warning ia_build_log_check` where its language has no #warning (GLSL: an unknown
# extension asked with `warn`, after the #version line that must come first)
def _warning_directive(src: str) -> str:
    return "#warning ia_build_log_check\n" + src


WARNING_SOURCES: dict[BackendKind, Callable[[str], str]] = {
    BackendKind.VULKAN: lambda src: src.replace("\n", "\n#extension GL_EXT_ia_build_log_check : warn\n", 1),
}


def test_compiler_warnings_reach_the_user(device: Device, sources: KernelSources) -> None:
    """Issue 24 item 7: a build that succeeds with a log gives Module.build_log and an ia.CompilerWarning at the
    caller's line (as pyopencl); a clean build gives "" and no warning."""
    import warnings

    import ironaccelerator as ia

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clean = device.load_module(sources.vector_add, cache=False)
    assert clean.build_log == "" and not [w for w in caught if w.category is ia.CompilerWarning], clean.build_log
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warned = WARNING_SOURCES.get(device.kind, _warning_directive)
        module = device.load_module(warned(sources.vector_add), cache=False)
    assert module.kernel("vector_add").num_args == 4
    said = [w for w in caught if w.category is ia.CompilerWarning]
    want = WARNING_LOGS.get(device.kind, "ia_build_log_check")
    if want is None:
        assert module.build_log == "" and not said, module.build_log
        return
    assert want in module.build_log, module.build_log
    assert len(said) == 1 and want in str(said[0].message) and device.kind.name in str(said[0].message), said
    assert said[0].filename == __file__, said[0].filename  # the user's load_module line, not the runtime's


def test_unknown_kernel_name(device: Device, sources: KernelSources) -> None:
    module = device.load_module(sources.vector_add)
    with pytest.raises(Error) as ei:
        module.kernel("no_such_kernel")
    assert kind_of(ei) is ErrorKind.INVALID_VALUE  # on every backend (test_unknown_kernel_name_is_invalid_value)


# ------------------------------------------------------------------ module formats, declared unsupported operations


def _vector_add(device: Device, n: int) -> tuple[Kernel, LaunchDims, Callable[[Any, Any, Any], list[Any]]]:
    """c = a + b over n float32s in the backend's module format: (kernel, dims, args(a, b, c))."""
    fmt = MODULE_FORMATS[device.kind]
    if fmt == "source":
        src = KERNELS.get(device.kind)
        if src is None:
            pytest.skip(f"TODO: no {device.kind.name} kernel sources in test_conformance.KERNELS")
        k = device.load_module(src.vector_add).kernel("vector_add")
        return k, grid_for(n, 256), lambda a, b, c: [a, b, c, np.uint32(n)]
    assert fmt == "qnn_context_binary", fmt
    import qnn_graphs
    k = device.load_module(qnn_graphs.build_binary(("f32",), n)).kernel("add_f32")
    return k, LaunchDims(), lambda a, b, c: [a, b, c]


def test_module_format_vector_add(device: Device, stream: Stream) -> None:
    n = 4096
    k, dims, args = _vector_add(device, n)
    a = RNG.standard_normal(n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    c = np.zeros(n, np.float32)
    with device.alloc(a.nbytes) as da, device.alloc(b.nbytes) as db, device.alloc(c.nbytes) as dc:
        stream.copy_from_host(da, a)
        stream.copy_from_host(db, b)
        e0 = stream.record_event()
        stream.launch(KernelLaunch(k, dims, args(da, db, dc)))
        assert stream.launch_unchecked(KernelLaunch(k, dims, args(da, db, dc))) is None
        e1 = stream.record_event()
        stream.copy_to_host(c, dc)
        stream.synchronize()
        assert e1.query() and e0.elapsed_ms(e1) > 0
        for bad in (args(da, db, dc)[:2], args(da, db, dc) + [dc]):
            with pytest.raises(Error) as ei:
                stream.launch(KernelLaunch(k, dims, bad))
            assert kind_of(ei) is ErrorKind.INVALID_VALUE
    np.testing.assert_array_equal(c, a + b)
    dead = device.alloc(4 * n)
    dead.free()
    with device.alloc(4 * n) as live, pytest.raises(Error) as ei:
        stream.launch(KernelLaunch(k, dims, args(live, dead, live)))
    assert kind_of(ei) is ErrorKind.INVALID_HANDLE


def test_callbacks_after_a_failed_launch_and_drain_inside_a_callback(device: Device, stream: Stream) -> None:
    """A launch that fails raises at the launch; a callback added after it still runs once the work before it is
    over, nothing is filed under it, and synchronize succeeds (nothing failed on the stream).
    ``drain_callbacks()`` from a callback of the same stream would wait for itself: RuntimeError (it deadlocked),
    while draining another stream from a callback works."""
    n = 1024
    k, dims, args = _vector_add(device, n)
    other = device.create_stream()
    ran: list[str] = []
    inner: list[BaseException | bool] = []
    with device.alloc(4 * n) as a, device.alloc(4 * n) as c:
        dead = device.alloc(4 * n)
        dead.free()
        stream.launch(KernelLaunch(k, dims, args(a, a, c)))
        with pytest.raises(Error) as ei:
            stream.launch(KernelLaunch(k, dims, args(a, dead, c)))
        assert kind_of(ei) is ErrorKind.INVALID_HANDLE
        stream.add_callback(lambda: ran.append("after the failed launch"))

        def drain_self() -> None:
            try:
                inner.append(stream.drain_callbacks(timeout=5))  # (before: a deadlock, False after 5 s)
            except RuntimeError as e:
                inner.append(e)
            other.add_callback(lambda: ran.append("other"))
            inner.append(other.drain_callbacks(timeout=30))  # another stream's: fine

        stream.add_callback(drain_self)
        assert stream.drain_callbacks(timeout=60)  # (a deadlock: False after 60 s)
        stream.synchronize()
        assert ran == ["after the failed launch", "other"], ran
        assert stream.callback_errors == [] and other.callback_errors == []
        assert len(inner) == 2 and isinstance(inner[0], RuntimeError) and inner[1] is True, inner
        assert "callback" in str(inner[0])
    other.synchronize()


def test_module_format_bad_module(device: Device) -> None:
    """A module the backend cannot load: source that does not compile, or a binary that is not one."""
    if MODULE_FORMATS[device.kind] == "source":
        src = KERNELS.get(device.kind)
        if src is None:
            pytest.skip(f"TODO: no {device.kind.name} kernel sources in test_conformance.KERNELS")
        with pytest.raises(Error) as ei:
            device.load_module(src.broken)
        assert kind_of(ei) is ErrorKind.COMPILE_FAILED
        return
    with pytest.raises(Error) as ei:
        device.load_module(b"not a context binary" * 50)
    assert kind_of(ei) is ErrorKind.INVALID_VALUE and ei.value.backend == device.kind.name


def test_declared_unsupported_operations_raise_unsupported(device: Device) -> None:
    declared = UNSUPPORTED.get(device.kind, {})
    for name, call in declared.items():
        try:
            r = call(device)
        except Error as e:
            r = e
        assert isinstance(r, Error) and r.kind is ErrorKind.UNSUPPORTED, (name, r)
        assert r.backend == device.kind.name, (name, r)


# ------------------------------------------------------------------ the same mistake on every backend (mistakes.py)


def test_everything_made_from_a_closed_device_is_invalid_handle(backend: Backend) -> None:
    """After ``Device.close()`` every operation on the device or on what it made raises (``_unchecked``: returns)
    INVALID_HANDLE on every backend: ``memory_pool()`` and ``Stream.synchronize`` included (OpenCL, QNN and Vulkan
    returned from synchronize; the pool was handed out off CUDA; QNN's ``elapsed_ms`` answered); frees and a second
    close still succeed (a CUDA pool block's free raised)."""
    import mistakes

    dev = backend.open(backend.devices()[0].id)
    k, dims, args = _vector_add(dev, 64)
    buf = dev.alloc(256)
    refused, allowed = mistakes.after_close(dev, KernelLaunch(k, dims, args(buf, buf, buf)))
    for what, call in refused:
        e = mistakes.check_error(mistakes.outcome(call), ErrorKind.INVALID_HANDLE, dev, what)
        assert "closed" in str(e), (what, e)
    for what, call in allowed:
        assert mistakes.outcome(call) is None, what
    buf.free()


def test_a_copy_given_a_non_allocation_raises_type_error(device: Device, stream: Stream) -> None:
    """An int, bytes, a numpy array or None where a copy or fill takes an Allocation: TypeError on every backend
    (a parameter of the wrong Python type; Metal raised Error(INVALID_VALUE))."""
    import mistakes

    with device.alloc(64) as a:
        for what, call in mistakes.not_allocations(stream, a):
            with pytest.raises(TypeError, match="(?i)allocation"):
                call()
        stream.synchronize()


def test_launch_dims_that_are_not_launch_dims_are_invalid_value(device: Device, stream: Stream) -> None:
    """A KernelLaunch whose dims are a tuple, an int, None...: INVALID_VALUE raised by launch and returned by
    launch_unchecked, on every backend (CUDA and Metal raised TypeError, OpenCL's and Vulkan's unchecked launches
    cffi's TypeError for None)."""
    import mistakes

    k, dims, args = _vector_add(device, 64)
    with device.alloc(256) as a:
        for what, call in mistakes.bad_dims(stream, KernelLaunch(k, dims, args(a, a, a))):
            e = mistakes.check_error(mistakes.outcome(call), ErrorKind.INVALID_VALUE, device, what)
            assert "LaunchDims" in str(e), (what, e)
        stream.synchronize()


def test_launch_takes_kernel_dims_and_arguments(device: Device, stream: Stream) -> None:
    """``stream.launch(kernel, dims, *args)`` (and ``launch_unchecked``'s) is ``launch(KernelLaunch(kernel, dims,
    args))`` on every backend (it was CUDA/HIP only: TypeError elsewhere)."""
    n = 256
    k, dims, args = _vector_add(device, n)
    a = RNG.standard_normal(n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    c = np.zeros(n, np.float32)
    with device.alloc(a.nbytes) as da, device.alloc(b.nbytes) as db, device.alloc(c.nbytes) as dc:
        stream.copy_from_host(da, a)
        stream.copy_from_host(db, b)
        stream.launch(k, dims, *args(da, db, dc))  # (raises on failure)
        stream.copy_to_host(c, dc)
        stream.synchronize()
        np.testing.assert_array_equal(c, a + b)
        stream.fill(dc, 0)
        assert stream.launch_unchecked(k, dims, *args(da, da, dc)) is None
        stream.copy_to_host(c, dc)
        stream.synchronize()
        np.testing.assert_array_equal(c, a + a)
        with pytest.raises(Error) as ei:  # the same checks as a KernelLaunch's
            stream.launch(k, dims, *args(da, db, dc)[:2])
        assert kind_of(ei) is ErrorKind.INVALID_VALUE


def test_allocations_past_max_alloc_are_invalid_value(device: Device) -> None:
    """One byte past ``DeviceLimits.max_alloc`` (DEVICE memory): INVALID_VALUE from Device.alloc and the pool,
    raised or returned, before any vendor call on every backend (QNN and CUDA allocated it; OpenCL's driver
    refuses it with CL_INVALID_BUFFER_SIZE, the same kind)."""
    import mistakes

    for what, call in mistakes.too_big(device):
        got = mistakes.outcome(call)
        if not isinstance(got, Error):
            getattr(got, "free", lambda: None)()
        mistakes.check_error(got, ErrorKind.INVALID_VALUE, device, what)


def _available_backends() -> list[Any]:
    """pytest params: each backend of the default registry that loads here, with or without a device."""
    registry, params = BackendRegistry.default(), []
    for kind in BackendKind:
        try:
            params.append(pytest.param(registry.get(kind), id=kind.name.lower()))
        except Error:
            continue
    return params or [pytest.param(None, id="none", marks=pytest.mark.skip(reason="no backend loads here"))]


@pytest.mark.parametrize("any_backend", _available_backends())
def test_open_of_what_is_not_a_device_index_is_invalid_value(any_backend: Backend) -> None:
    """``Backend.open(-1)`` (a str, a float, a bool, another backend's DeviceId): INVALID_VALUE naming
    ``Backend.open`` on every backend that loads, one without devices included (HIP said NO_DEVICE for -1)."""
    import mistakes

    for what, call in mistakes.bad_device_ids(any_backend):
        mistakes.check_error(mistakes.outcome(call), ErrorKind.INVALID_VALUE, any_backend, what)


def _crossed_outcome(backend: Backend, device: Device, what: str, got: object, kind: ErrorKind) -> None:
    """A call of mistakes.CROSS_DEVICE's kind: None (or an allocation, freed here) on CUDA/HIP, else ``kind``."""
    import mistakes

    if backend.kind in mistakes.CROSS_DEVICE:
        assert not isinstance(got, Error), (what, got)
        getattr(got, "free", lambda: None)()
    else:
        mistakes.check_error(got, kind, device, what)


def test_what_another_device_made_is_invalid_value(backend: Backend, device: Device, stream: Stream) -> None:
    """An event, allocation, pool block, stream or kernel of another open Device (here a second open of the same
    one) given to this device's stream or pool: INVALID_VALUE naming the operation, before any vendor call, off
    CUDA/HIP, whose drivers take them (mistakes.CROSS_DEVICE; OpenCL raised the driver's CL_INVALID_CONTEXT as
    INVALID_HANDLE, Vulkan submitted another VkDevice's semaphore and crashed, QNN accepted a wait and launched
    another device's graph unchecked); ``Event.elapsed_ms`` between two devices' events is INVALID_VALUE on every
    backend (it answered a difference of two clocks everywhere)."""
    import mistakes

    other = backend.open(backend.devices()[0].id)
    try:
        k, dims, args = _vector_add(device, 64)
        theirs = other.create_stream()
        their_k, _, their_args = _vector_add(other, 64)
        with device.alloc(256) as buf, other.alloc(256) as their_buf:
            launch = KernelLaunch(k, dims, args(buf, buf, buf))
            refused, crossed = mistakes.another_device(stream, launch, theirs,
                                                       KernelLaunch(their_k, dims, their_args(*[their_buf] * 3)))
            for what, call in refused:
                got = mistakes.outcome(call)
                mistakes.check_error(got, ErrorKind.INVALID_VALUE, device, what)
            for what, call in crossed:
                _crossed_outcome(backend, device, what, mistakes.outcome(call), ErrorKind.INVALID_VALUE)
            stream.record_event().synchronize()  # (the stream still works)
            stream.synchronize()
            theirs.synchronize()
    finally:
        other.close()


def test_what_a_closed_device_made_is_invalid_handle_on_a_live_stream(backend: Backend, device: Device,
                                                                       stream: Stream) -> None:
    """What a closed Device made (an event, an allocation, a pool block; a kernel off CUDA/HIP) given to another,
    live device's stream: INVALID_HANDLE, "was closed", before whose it is (OpenCL, QNN, Vulkan and Metal said
    INVALID_VALUE, another device's; CUDA copied a closed device's memory; QNN answered elapsed_ms)."""
    import mistakes

    other = backend.open(backend.devices()[0].id)
    try:
        k, dims, args = _vector_add(device, 64)
        their_k, _, their_args = _vector_add(other, 64)
        with device.alloc(256) as buf:
            their_buf = other.alloc(256)
            launch = KernelLaunch(k, dims, args(buf, buf, buf))
            refused, launched = mistakes.of_a_closed_device(
                stream, launch, other.create_stream(), KernelLaunch(their_k, dims, their_args(*[their_buf] * 3)))
            assert other.closed
            for what, call in refused:
                e = mistakes.check_error(mistakes.outcome(call), ErrorKind.INVALID_HANDLE, device, what)
                assert "closed" in str(e), (what, e)
            for what, call in launched:
                _crossed_outcome(backend, device, what, mistakes.outcome(call), ErrorKind.INVALID_HANDLE)
            stream.record_event().synchronize()
            stream.synchronize()
            their_buf.free()
    finally:
        other.close()


def test_a_graph_replayed_after_an_allocation_it_uses_was_freed_is_invalid_handle(device: Device,
                                                                                   stream: Stream) -> None:
    """A graph whose captured work (a launch checked or not, a fill, a copy's either side, a slice, a pool block)
    uses an allocation freed after the capture: its replay raises INVALID_HANDLE "which the graph's work uses, was
    freed" on every backend with graphs (CUDA/HIP replayed it onto the freed memory; Vulkan refused it);
    elsewhere the capture itself is UNSUPPORTED."""
    import mistakes

    if device.kind not in mistakes.GRAPHS:
        with pytest.raises(Error) as ei, stream.capture():
            pass
        assert kind_of(ei) is ErrorKind.UNSUPPORTED
        return
    k, dims, args = _vector_add(device, 64)
    for what, call in mistakes.freed_before_replay(stream, lambda a: KernelLaunch(k, dims, args(a, a, a))):
        e = mistakes.check_error(mistakes.outcome(call), ErrorKind.INVALID_HANDLE, device, what)
        assert "which the graph's work uses, was freed" in str(e), (what, e)
    stream.synchronize()


# ------------------------------------------------------------------ memory pool


def test_memory_pool_reuse_stats_and_trim(device: Device, stream: Stream) -> None:
    pool = device.memory_pool()
    assert isinstance(pool, MemoryPool) and device.memory_pool() is pool
    pool.trim()
    base = pool.stats()
    assert base.in_use_bytes == 0 and base.cached_bytes == 0

    a = pool.alloc(3000)
    size = MemoryPool.size_class(3000)
    assert size == 4096 and a.nbytes == 3000 and a.device is device
    s = pool.stats()
    assert (s.misses, s.hits) == (base.misses + 1, base.hits)
    assert s.in_use_bytes == size and s.allocated_bytes == base.allocated_bytes + size

    # pooled memory is real device memory
    data = random_bytes(3000)
    stream.copy_from_host(a, data)
    back = np.zeros(3000, np.uint8)
    stream.copy_to_host(back, a)
    stream.synchronize()
    np.testing.assert_array_equal(back, data)

    block = a.block  # type: ignore[attr-defined]
    a.free()
    s = pool.stats()
    assert s.in_use_bytes == 0 and s.cached_bytes == size

    b = pool.alloc(2049)  # same size class: a hit, served by the same block
    s = pool.stats()
    assert (s.misses, s.hits) == (base.misses + 1, base.hits + 1)
    assert b.block is block  # type: ignore[attr-defined]
    assert s.cached_bytes == 0 and s.in_use_bytes == size
    with pytest.raises(Error) as ei:
        b.free()
        b.free()
    assert kind_of(ei) is ErrorKind.INVALID_HANDLE
    assert pool.stats().cached_bytes == size  # given back once, not twice

    c = pool.alloc(100_000)  # another class: a miss
    assert pool.stats().misses == base.misses + 2
    del c  # a dropped pooled allocation goes back to the pool
    gc.collect()
    s = pool.stats()
    assert s.in_use_bytes == 0 and s.cached_bytes == size + MemoryPool.size_class(100_000)

    released = pool.trim()
    assert released == size + MemoryPool.size_class(100_000)
    s = pool.stats()
    assert s.cached_bytes == 0 and s.allocated_bytes == base.allocated_bytes
    assert block.freed
    d = pool.alloc(3000)  # after trim: a miss again
    assert pool.stats().misses == base.misses + 3
    d.free()
    pool.trim()
    with pytest.raises(Error) as ei:
        pool.alloc(0)
    assert kind_of(ei) is ErrorKind.INVALID_VALUE


@pytest.mark.parametrize("order", ["alloc-stream", "free-stream", "no-stream"])
@pytest.mark.parametrize("reuse", ["other-stream", "no-stream"])
def test_memory_pool_never_hands_out_a_block_queued_work_still_uses(device: Device, kernels: dict[str, Kernel],
                                                                    order: str, reuse: str) -> None:
    """Issue 23 item 1: a long kernel on stream A writes a pooled block that is then freed; the block's next owner
    (on stream B, or with no stream) writes its own data.  The pool must not hand the block over before A's work up
    to the free has completed (or B is made to wait for it): the new owner's data must survive A's kernel.  (The
    old pool reused the block at once: A's kernel overwrote B's data.)"""
    n, rounds = 1 << 16, 3000
    pool = device.memory_pool()
    pool.trim()
    a, b = device.create_stream(), device.create_stream()
    x = RNG.integers(0, 2**32, size=n, dtype=np.uint32)
    old = pool.alloc(x.nbytes, a) if order == "alloc-stream" else pool.alloc(x.nbytes)
    block = old.block  # type: ignore[attr-defined]
    a.copy_from_host(old, x)
    a.launch(KernelLaunch(kernels["lcg"], grid_for(n, 64), [old, np.uint32(n), np.uint32(rounds)]))
    if order == "free-stream":
        old.free(stream=a)  # type: ignore[call-arg]
    else:
        old.free()
    mine = np.arange(n, dtype=np.uint32) ^ np.uint32(0x5A5A5A5A)
    new = pool.alloc(x.nbytes, b) if reuse == "other-stream" else pool.alloc(x.nbytes)
    s = b if reuse == "other-stream" else device.create_stream()
    s.copy_from_host(new, mine)
    s.synchronize()
    a.synchronize()  # A's kernel has certainly finished: had it still used the block, it overwrote `mine`
    back = np.zeros(n, np.uint32)
    s.copy_to_host(back, new)
    s.synchronize()
    assert int(np.count_nonzero(back != mine)) == 0, "the new owner's data was overwritten by queued work"
    assert new.block is block  # type: ignore[attr-defined]  # reused (after ordering), not leaked
    new.free()
    pool.trim()


def test_memory_pool_shared_by_threads_never_gives_one_block_two_owners(device: Device,
                                                                       kernels: dict[str, Kernel]) -> None:
    """4 threads share the pool, each with its own stream, allocating in every order (on their stream, freed on it,
    or naming none) while their kernels run; no block may have two live owners, every result must be right, and the
    pool's counts must add up.  (A completed fence's blocks were moved to the free list while another thread still
    held the fence and popped the same block from it: two owners, wrong results, negative in-use bytes.)"""
    import threading

    pool = device.memory_pool()
    pool.trim()
    owners: dict[int, int] = {}
    guard = threading.Lock()
    problems: list[str] = []
    deadline = time.perf_counter() + 3.0

    def work(t: int) -> None:
        try:
            s = device.create_stream()
            rng = np.random.default_rng(t)
            i = 0
            while time.perf_counter() < deadline:
                i += 1
                n = int(rng.choice([1024, 2048, 4096]))
                a = pool.alloc(4 * n, s) if i % 3 == 0 else pool.alloc(4 * n)
                block = id(a.block)  # type: ignore[attr-defined]
                with guard:
                    if block in owners:
                        problems.append(f"thread {t} round {i}: block already owned by thread {owners[block]}")
                    owners[block] = t
                x = rng.integers(0, 2**32, n, dtype=np.uint32)
                s.copy_from_host(a, x)
                s.launch(KernelLaunch(kernels["lcg"], grid_for(n, 64), [a, np.uint32(n), np.uint32(50)]))
                out = np.empty_like(x)
                s.copy_to_host(out, a)
                with guard:
                    del owners[block]
                if i % 3 == 1:
                    a.free(stream=s)  # type: ignore[call-arg]
                else:
                    a.free()
                s.synchronize()
                if not np.array_equal(out, lcg_reference(x, 50)):
                    problems.append(f"thread {t} round {i}: wrong result")
        except Exception as e:  # reported below
            problems.append(f"thread {t}: {e!r}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
        assert not th.is_alive(), "a worker hangs"
    assert problems[:5] == []
    st = pool.stats()
    assert st.in_use_bytes == 0 and st.cached_bytes == st.allocated_bytes, st
    pool.trim()


def test_memory_pool_reuses_at_once_on_the_freeing_stream(device: Device, stream: Stream) -> None:
    """A block freed in a stream's order is reused by the next allocation on that stream with no wait, and a
    stream of another device (or no Stream) is refused."""
    pool = device.memory_pool()
    pool.trim()
    x = pool.alloc(5000, stream)
    assert x.stream is stream  # type: ignore[attr-defined]
    block = x.block  # type: ignore[attr-defined]
    x.free()
    before = pool.stats()
    y = pool.alloc(4097, stream)
    after = pool.stats()
    assert y.block is block and after.hits == before.hits + 1 and after.misses == before.misses  # type: ignore[attr-defined]
    with pytest.raises(Error) as ei:
        y.free(stream="not a stream")  # type: ignore[call-arg]
    assert kind_of(ei) is ErrorKind.INVALID_VALUE and not y.freed
    err = y.free_unchecked(stream=object())  # type: ignore[call-arg]
    assert isinstance(err, Error) and err.kind is ErrorKind.INVALID_VALUE and not y.freed
    y.free()
    assert pool.stats().cached_bytes == MemoryPool.size_class(5000)
    assert pool.trim() == MemoryPool.size_class(5000)


def test_pool_allocations_read_their_blocks_handles(device: Device) -> None:
    """A pool allocation reads its block's backend handles (``.buffer``, ``.ptr`` ...) through itself, as it did
    through a ``__getattr__``: what the block has, the allocation gives (its own attribute first, once set), what
    it lacks is AttributeError.  Issue 27: forwarded by descriptors, not ``__getattr__``, which kept the
    interpreter from specialising every other attribute load of the pool's hot path (~120 ns an alloc + free)."""
    from ironaccelerator_runtime.traits.pool import PooledAllocation

    assert "__getattr__" not in vars(PooledAllocation)
    pool = device.memory_pool()
    a = pool.alloc(3000)
    try:
        assert type(a) is PooledAllocation and a.block is not a
        own = {"pool", "block", "nbytes", "kind", "device", "stream"}
        handles = [n for n in vars(a.block) if not n.startswith("_") and n not in own]
        # (a handle made on first use: Metal's buffer, a property; a compiled block's: OpenCL's buffer, cached by a
        # descriptor, and ptr, a member of the C type)
        handles += [n for k in type(a.block).__mro__[:type(a.block).__mro__.index(Allocation)]
                    for n, v in vars(k).items() if (isinstance(v, property) or hasattr(type(v), "__get__")
                                                    and not callable(v)) and not n.startswith("_")
                    and n not in own and n not in handles]
        assert handles, vars(a.block)  # (every backend's allocation has a handle: buffer, ptr, handle ...)
        for name in handles:  # (equal: a C member's int is made at each read)
            assert getattr(a, name) == getattr(a.block, name)
        a.__dict__[handles[0]] = "mine"  # (an attribute of the allocation's own shadows the block's)
        assert getattr(a, handles[0]) == "mine"
        del a.__dict__[handles[0]]
        with pytest.raises(AttributeError):
            a.no_such_handle  # noqa: B018
        assert not hasattr(a, "no_such_handle")
    finally:
        a.free()


def test_memory_pool_alloc_unchecked_returns_result(device: Device) -> None:
    pool = device.memory_pool()
    ok = pool.alloc_unchecked(3000)
    assert isinstance(ok, Allocation) and ok.nbytes == 3000 and ok.device is device
    data = random_bytes(3000)
    s = device.create_stream()
    s.copy_from_host(ok, data)
    back = np.zeros(3000, np.uint8)
    s.copy_to_host(back, ok)
    s.synchronize()
    np.testing.assert_array_equal(back, data)
    assert ok.free_unchecked() is None
    again = ok.free_unchecked()  # freed twice: an Error value
    assert isinstance(again, Error) and again.kind is ErrorKind.INVALID_HANDLE
    huge = pool.alloc_unchecked(1 << 62)  # past any device's max_alloc: an Error value, not an exception
    assert isinstance(huge, Error) and huge.kind is ErrorKind.INVALID_VALUE, huge
    pool.trim()


def _compiled_pool(device: Device) -> MemoryPool:
    """The device's pool, which must run the compiled free list (ia_pool_cache.h) where the backend's generated
    module is compiled (API mode): the C libraries' ``_fast`` (ia_runtime.h: OpenCL, QNN) and the Objective-C ones'
    ``_objc_fast`` (ia_objc.h: Metal) include it."""
    from ironaccelerator_runtime.loader import API

    api = getattr(device, "api", None)
    binding = getattr(api, "binding", None) or getattr(api, "b", None)  # (Metal's Objective-C binding: api.b)
    if getattr(binding, "mode", None) != API:
        pytest.skip(f"{device.kind.name}: ABI mode, no compiled module: the pool runs its Python paths")
    pool = device.memory_pool()
    assert type(pool._lock).__name__ == "_PoolCache", pool._lock  # (its C, and the lock its C stands aside for)
    return pool


def test_memory_pool_hot_path_runs_no_python_code(device: Device) -> None:
    """Issue 27: with the compiled free list, reusing a cached block runs no Python function: ``pool.alloc(n)``
    of a size class with a free block, and, where the device's pool fence is clear (nothing enqueued since its
    last fence completed: OpenCL, which tracks its enqueues), ``free()`` and the allocation's drop.  (Before, each
    ran MemoryPool.alloc, PooledAllocation.free and Allocation.__del__ in Python: 0.65 us a pair against
    pyopencl's C++ tools.MemoryPool at 0.19.)  The compiled paths keep the pool's contract: hits counted, a second
    free INVALID_HANDLE (raised; returned by free_unchecked), a dropped allocation's block back in the pool."""
    import sys

    pool = _compiled_pool(device)
    device.synchronize()
    pool.alloc(3000).free()  # (a cached block of the class; the fence computed, and clear, where one is kept)
    fence_clear = not device._dirty and not device._fence_events
    calls: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls.append(frame.f_code.co_qualname)

    hits = pool.stats().hits
    gc.disable()  # (a collection could run Python finalizers in the traced window)
    try:
        sys.setprofile(profile)
        try:
            a = pool.alloc(3000)
            if fence_clear:
                a.free()
                b = pool.alloc(3000)
                del b  # (dropped unfreed: the compiled __del__ gives the block back)
        finally:
            sys.setprofile(None)
    finally:
        gc.enable()
    assert calls == [], calls
    if not fence_clear:
        a.free()
    assert pool.stats().hits == hits + (2 if fence_clear else 1)
    with pytest.raises(Error) as e:
        a.free()
    assert e.value.kind is ErrorKind.INVALID_HANDLE and "already freed" in str(e.value)
    again = a.free_unchecked()
    assert isinstance(again, Error) and again.kind is ErrorKind.INVALID_HANDLE
    blocks = pool.stats().cached_bytes
    c = pool.alloc(3000)
    assert pool.stats().cached_bytes == blocks - MemoryPool.size_class(3000)  # (the dropped block, reused)
    c.free()
    pool.trim()


def test_memory_pool_compiled_paths_wait_for_its_lock(device: Device) -> None:
    """The compiled alloc and free never take the pool's lock: while Python code holds it (a trim, a recycle, stats
    of another thread) they stand aside to the Python paths, which wait for it, so no thread's C changes a free list
    in the middle of another's critical section."""
    import threading

    pool = _compiled_pool(device)
    pool.alloc(3000).free()
    kept = pool.alloc(3000)
    kept.free()
    pool.alloc(3000).free()
    done = threading.Event()
    got: list[Any] = []

    def work() -> None:
        a = pool.alloc(3000)
        got.append(a)
        a.free()
        got.append(pool.alloc(3000))
        done.set()

    with pool._lock:
        assert pool._lock.locked()
        t = threading.Thread(target=work)
        t.start()
        assert not done.wait(0.3) and not got  # (waits for the lock: not served by the C path behind its back)
    t.join(10)
    assert done.is_set() and len(got) == 2 and not pool._lock.locked()
    got[1].free()
    assert pool._lock.acquire(blocking=False)  # (threading.Lock's interface: the Python paths take it so)
    pool._lock.release()
    st = pool.stats()
    assert st.in_use_bytes == 0 and st.cached_bytes == MemoryPool.size_class(3000), st
    pool.trim()


def test_memory_pool_compiled_paths_race_trim_and_stats(device: Device) -> None:
    """Threads allocating and freeing (and dropping) through the compiled paths while another trims the pool and
    reads its stats: no block has two owners, none is trimmed while owned (the bytes held never go negative, and
    end equal to what is cached), and every allocation is counted once, as a hit or a miss."""
    import sys
    import threading

    from ironaccelerator_runtime.traits.pool import PooledAllocation

    pool = _compiled_pool(device)
    pool.trim()
    start = pool.stats()
    owners: dict[int, int] = {}
    guard = threading.Lock()
    problems: list[str] = []
    stop = threading.Event()
    switch = sys.getswitchinterval()

    def work(i: int) -> None:
        for n in range(1500):
            a = pool.alloc(3000 if n % 3 else 300)
            assert isinstance(a, PooledAllocation)
            key = id(a.block)
            with guard:
                if key in owners:
                    problems.append(f"block {key:#x} of thread {owners[key]} handed to {i}")
                owners[key] = i
            with guard:
                del owners[key]
            if n % 5:
                a.free()
            else:
                del a  # (dropped: the compiled __del__)

    def trimmer() -> None:
        while not stop.is_set():
            pool.trim()
            st = pool.stats()
            if st.allocated_bytes < 0 or st.in_use_bytes < 0:
                problems.append(f"inconsistent {st}")

    sys.setswitchinterval(1e-5)  # (switch threads often: the interleavings the lock must order)
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
        t = threading.Thread(target=trimmer)
        t.start()
        for w in threads:
            w.start()
        for w in threads:
            w.join(60)
        stop.set()
        t.join(60)
    finally:
        sys.setswitchinterval(switch)
    assert problems == []
    st = pool.stats()
    assert st.in_use_bytes == 0 and st.allocated_bytes == st.cached_bytes, st
    assert (st.hits - start.hits) + (st.misses - start.misses) == 3 * 1500, (start, st)
    pool.trim()


def test_memory_pool_compiled_drop_is_the_classes_finalizer(device: Device) -> None:
    """With the compiled free list, ``PooledAllocation.__del__`` is a slot wrapper of its C finalizer (its
    tp_finalize, inherited by subclasses), as a C type's would be, not a method that CPython looks up and calls on
    every drop.  It keeps ``Allocation.__del__``'s contract: a freed allocation's drop changes nothing, an unfreed
    one's gives the block back, a failing release is reported (sys.unraisablehook) and never propagates nor replaces
    the exception being handled, and calling it on something else never reads that object as an allocation."""
    import sys

    from ironaccelerator_runtime.traits.pool import PooledAllocation

    pool = _compiled_pool(device)
    assert type(vars(PooledAllocation)["__del__"]).__name__ == "wrapper_descriptor"

    class Sub(PooledAllocation):
        __slots__ = ()

    assert Sub.__del__ is PooledAllocation.__del__
    device.synchronize()
    a = pool.alloc(3000)
    a.free()
    cached = pool.stats().cached_bytes
    del a  # (freed: nothing)
    assert pool.stats().cached_bytes == cached
    b = pool.alloc(3000)
    assert pool.stats().cached_bytes == cached - MemoryPool.size_class(3000)
    assert pool.stats().in_use_bytes == MemoryPool.size_class(3000)
    del b  # (unfreed: back to the pool, by the compiled path or Allocation.__del__)
    assert pool.stats().in_use_bytes == 0
    seen: list[BaseException | None] = []
    hook = sys.unraisablehook
    sys.unraisablehook = lambda u: seen.append(u.exc_value)
    try:
        c = pool.alloc(3000)
        c._track(lambda: 1 // 0)  # (a release that fails)
        try:
            raise KeyError("handled")
        except KeyError:
            del c
            assert isinstance(sys.exc_info()[1], KeyError)
        PooledAllocation.__del__(object())  # type: ignore[arg-type]  # (not an allocation: reported)
    finally:
        sys.unraisablehook = hook
    assert len(seen) == 2 and isinstance(seen[0], ZeroDivisionError) and isinstance(seen[1], AttributeError), seen
    pool.trim()


def test_memory_pool_compiled_paths_read_the_devices_flags(device: Device) -> None:
    """The compiled alloc and free read the device's ``_closed``, ``_dirty`` and ``_fence_events`` from its
    ``__dict__`` (cheaper than a getattr), as getattr reads them: a change to the instance's flag is seen by the next
    call, and a data descriptor of one on the device's class (which getattr prefers to the dict) turns that off."""
    import sys

    pool = _compiled_pool(device)
    device.synchronize()
    pool.alloc(3000).free()
    fence_clear = not device._dirty and not device._fence_events
    closed = vars(device).get("_closed", None)
    device._closed = True
    try:
        with pytest.raises(Error) as e:
            pool.alloc(3000)
        assert e.value.kind is ErrorKind.INVALID_HANDLE
    finally:
        if closed is None:
            del device._closed
        else:
            device._closed = closed
    if fence_clear:
        calls: list[str] = []

        def profile(frame: Any, event: str, arg: Any) -> None:
            if event == "call":
                calls.append(frame.f_code.co_qualname)

        a = pool.alloc(3000)
        dirty = vars(device).get("_dirty", None)
        device._dirty = True  # (work enqueued since the last fence: the free must fence, in Python)
        sys.setprofile(profile)
        try:
            a.free()
        finally:
            sys.setprofile(None)
            if dirty is not None and vars(device).get("_dirty") is True:
                device._dirty = dirty
        assert "PooledAllocation.free" in calls, calls
        device.synchronize()
    # a data descriptor of the flag on the device's class wins over its __dict__, for the C as for getattr
    cache_type = type(pool._cache)

    class Shadowed:
        _closed = property(lambda self: True)
        _dirty = False
        _fence_events: list[Any] = []

    fake = Shadowed()
    fake.__dict__["_closed"] = False  # (what a dict read would find)
    block = device.alloc(MemoryPool.size_class(3000))
    cache = cache_type(pool, fake, pool.kind, {MemoryPool.size_class(3000): [block]}, MemoryPool.alloc,
                       MemoryPool.MIN_BLOCK)
    hits = cache.hits
    a = cache.alloc(3000)  # (closed, by the property: the Python path, the real pool's)
    assert cache.hits == hits and a.block is not block
    a.free()
    block.free()
    pool.trim()


# ------------------------------------------------------------------ the kernel-argument policy (kernel_args)

# Backends whose LaunchDims.shared_mem is dynamic shared memory (sharedMemBytes); elsewhere it is UNSUPPORTED
SHARED_MEM: set[BackendKind] = {BackendKind.CUDA, BackendKind.ROCM}
# Backends that know their value parameters' types (OpenCL: clGetKernelArgInfo; Metal: the kernel's signature), so a
# Python number converts to the parameter's type (Vulkan: the push-constant members' SPIR-V types); elsewhere (CUDA/HIP:
# sizes only) it is refused
KNOWS_PARAM_TYPES: set[BackendKind] = {BackendKind.OPENCL, BackendKind.METAL, BackendKind.VULKAN}
# A kernel with a local-memory parameter, per backend that has them (LocalMemory(nbytes) arguments): ``wg_sum(x,
# scratch, out)``: out[g] = the sum of work-group g's block of x, reduced through `scratch` (block floats)
LOCAL_KERNELS: dict[BackendKind, str] = {
    BackendKind.OPENCL: """
__kernel void wg_sum(__global const float *x, __local float *scratch, __global float *out) {
    size_t l = get_local_id(0), n = get_local_size(0);
    scratch[l] = x[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (size_t s = n / 2; s > 0; s /= 2) {
        if (l < s) scratch[l] += scratch[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0) out[get_group_id(0)] = scratch[0];
}
""",
}


def _refused(call: Callable[[], object], kind: ErrorKind, unchecked: bool) -> Error:
    """The Error ``call`` raises (checked) or returns (unchecked), asserted to be of ``kind``."""
    if unchecked:
        r = call()
        assert isinstance(r, Error), r
        err = r
    else:
        with pytest.raises(Error) as ei:
            call()
        err = ei.value
    assert err.kind is kind, err
    return err


def _launcher(stream: Stream, unchecked: bool) -> Callable[[KernelLaunch], object]:
    return stream.launch_unchecked if unchecked else stream.launch


def _other_backend_device(device: Device) -> Device | None:
    """A device of another backend (for an allocation of the wrong backend), or None if none enumerates one."""
    for p in _PARAMS:
        b = p.values[0]
        if b is not None and b.kind is not device.kind:
            return b.open(0)  # type: ignore[no-any-return]
    return None


@pytest.mark.parametrize("unchecked", [False, True], ids=["checked", "unchecked"])
def test_argument_policy_buffer_parameters(device: Device, stream: Stream, unchecked: bool) -> None:
    """A buffer parameter takes a live allocation (or slice) of this device: None, a value, another device's
    allocation or a slice of one, and another backend's allocation are INVALID_VALUE naming the argument; a slice of
    a freed allocation INVALID_HANDLE; checked (raised) and unchecked (returned) alike, never the previous launch's
    buffer left in the slot."""
    n = 1024
    k, dims, args = _vector_add(device, n)
    launch = _launcher(stream, unchecked)
    a, b, c = device.alloc(4 * n), device.alloc(4 * n), device.alloc(4 * n)
    stream.copy_from_host(a, np.arange(n, dtype=np.float32))
    stream.copy_from_host(b, np.ones(n, np.float32))
    assert launch(KernelLaunch(k, dims, args(a, b, c))) is None  # every slot set, and cached where a backend caches
    for bad in (None, np.float32(1)):
        err = _refused(lambda: launch(KernelLaunch(k, dims, args(a, bad, c))), ErrorKind.INVALID_VALUE, unchecked)
        assert "argument 1" in str(err), err
    other = device.backend.open(device.descriptor.id)  # another device object: another context
    try:
        theirs = other.alloc(4 * n)
        for alien in (theirs, theirs[0:4 * n]):  # the allocation and a slice of it: refused alike
            err = _refused(lambda: launch(KernelLaunch(k, dims, args(a, alien, c))), ErrorKind.INVALID_VALUE,
                           unchecked)
            assert "argument 1" in str(err), err
        theirs.free()
    finally:
        other.close()
    foreign_device = _other_backend_device(device)
    if foreign_device is not None:  # an allocation of another backend: INVALID_VALUE, not a cffi TypeError
        try:
            foreign = foreign_device.alloc(4 * n)
            err = _refused(lambda: launch(KernelLaunch(k, dims, args(a, foreign, c))), ErrorKind.INVALID_VALUE,
                           unchecked)
            assert "argument 1" in str(err) and foreign_device.kind.name in str(err), err
            foreign.free()
        finally:
            foreign_device.close()
    dead = device.alloc(4 * n)
    dead_slice = dead[0:4 * n]
    dead.free()
    _refused(lambda: launch(KernelLaunch(k, dims, args(a, b, dead_slice))), ErrorKind.INVALID_HANDLE, unchecked)
    # after every refusal, the good launch still runs with its own buffers
    stream.fill(c, 0)
    assert launch(KernelLaunch(k, dims, args(a, b, c))) is None
    out = np.zeros(n, np.float32)
    stream.copy_to_host(out, c)
    stream.synchronize()
    np.testing.assert_array_equal(out, np.arange(n, dtype=np.float32) + 1)
    for x in (a, b, c):
        x.free()


@pytest.mark.parametrize("unchecked", [False, True], ids=["checked", "unchecked"])
def test_argument_policy_value_parameters(device: Device, stream: Stream, kernels: dict[str, Kernel],
                                          unchecked: bool) -> None:
    """A value parameter takes a numpy scalar, a Scalar or bytes of its exact size, or a Python number converted to
    its type where the backend knows it (refused with a hint where it does not); a numpy scalar or Scalar of another
    kind (np.int32 for a float: never its bits) or size, the wrong byte count, None or an allocation: INVALID_VALUE
    naming the argument and kernel.  Integers of the parameter's size but the other signedness are taken."""
    n = 1024
    k = kernels["saxpy"]
    dims = grid_for(n, 64)
    launch = _launcher(stream, unchecked)
    x = np.arange(n, dtype=np.float32)
    with device.alloc(x.nbytes) as dx, device.alloc(x.nbytes) as dy:
        stream.copy_from_host(dx, x)
        stream.fill(dy, 0)
        bad_values: list[tuple[int, Any]] = [
            (0, np.int32(2)), (0, Scalar(2, DType.I32)), (0, np.float64(2.0)), (0, None), (0, dx), (0, b"\0\0"),
            (3, b"\1\0\0"), (3, np.uint64(n)), (3, np.float32(n)), (3, None),
        ]
        if device.kind in KNOWS_PARAM_TYPES:
            bad_values += [(3, 2**40), (3, -1), (3, float(n))]  # out of uint's range; a float for an integer
        else:
            bad_values += [(0, 2.0), (3, n)]
        for i, v in bad_values:
            args: list[Any] = [np.float32(2), dx, dy, np.uint32(n)]
            args[i] = v
            err = _refused(lambda: launch(KernelLaunch(k, dims, args)), ErrorKind.INVALID_VALUE, unchecked)
            assert f"argument {i}" in str(err) and "saxpy" in str(err), (v, err)
            if device.kind not in KNOWS_PARAM_TYPES and type(v) in (int, float):
                assert "np.int32" in str(err) or "np.float32" in str(err), err
        # accepted: y = 2x (a Python float converted where the type is known), then += 1x through np.int32(n) for
        # the uint (the same bits), then += 0.5x through a Scalar
        first: list[Any] = [2.0, dx, dy, n] if device.kind in KNOWS_PARAM_TYPES else \
            [np.float32(2), dx, dy, np.uint32(n)]
        assert launch(KernelLaunch(k, dims, first)) is None
        assert launch(KernelLaunch(k, dims, [np.float32(1), dx, dy, np.int32(n)])) is None
        assert launch(KernelLaunch(k, dims, [Scalar(0.5, DType.F32), dx, dy, np.uint32(n).tobytes()])) is None
        out = np.zeros(n, np.float32)
        stream.copy_to_host(out, dy)
        stream.synchronize()
        np.testing.assert_array_equal(out, 3.5 * x)


def test_dynamic_local_memory(device: Device, stream: Stream) -> None:
    """Dynamic local memory has one meaning per backend: LaunchDims.shared_mem on CUDA/HIP, LocalMemory(nbytes)
    arguments for OpenCL __local parameters; where a backend cannot honour either it is UNSUPPORTED (raised, or
    returned unchecked), never silently ignored."""
    n = 1024
    k, dims, args = _vector_add(device, n)
    with device.alloc(4 * n) as a:
        if device.kind not in SHARED_MEM:
            for unchecked in (False, True):
                launch = _launcher(stream, unchecked)
                err = _refused(lambda: launch(KernelLaunch(k, LaunchDims(dims.grid, dims.block, shared_mem=256),
                                                           args(a, a, a))), ErrorKind.UNSUPPORTED, unchecked)
                assert "shared_mem" in str(err), err
        if device.kind not in LOCAL_KERNELS:
            for unchecked in (False, True):
                launch = _launcher(stream, unchecked)
                err = _refused(lambda: launch(KernelLaunch(k, dims, args(a, a, LocalMemory(64)))),
                               ErrorKind.UNSUPPORTED, unchecked)
                assert "LocalMemory" in str(err), err
            return
    with pytest.raises(Error) as ei:
        LocalMemory(0)
    assert kind_of(ei) is ErrorKind.INVALID_VALUE
    wg_sum = device.load_module(LOCAL_KERNELS[device.kind]).kernel("wg_sum")
    block, groups = 64, 32
    x = RNG.standard_normal(block * groups).astype(np.float32)
    with device.alloc(x.nbytes) as dx, device.alloc(4 * groups) as dout:
        stream.copy_from_host(dx, x)
        d = LaunchDims(groups, block)
        for unchecked in (False, True):
            stream.fill(dout, 0)
            assert _launcher(stream, unchecked)(KernelLaunch(wg_sum, d, (dx, LocalMemory(4 * block), dout))) is None
            out = np.zeros(groups, np.float32)
            stream.copy_to_host(out, dout)
            stream.synchronize()
            np.testing.assert_allclose(out, x.reshape(groups, block).sum(axis=1), rtol=1e-4, atol=1e-4)
            # a buffer or a value in the __local slot, LocalMemory in a buffer slot: INVALID_VALUE, the same message
            for bad in ((dx, dx, dout), (dx, np.uint32(256), dout), (LocalMemory(256), LocalMemory(256), dout)):
                err = _refused(lambda: _launcher(stream, unchecked)(KernelLaunch(wg_sum, d, bad)),
                               ErrorKind.INVALID_VALUE, unchecked)
                assert "LocalMemory" in str(err) or "buffer" in str(err), err


def test_launch_unchecked_contract(backend: Backend) -> None:
    """Every launch mistake docs/UNCHECKED.md lists comes back from launch_unchecked as a returned Error of the
    documented kind (not raised, no crash, nothing left behind), in a child process: a backend that gets one wrong
    dies of it (PoCL aborts on a 2**40 grid, a numpy scalar read as a cl_mem segfaults)."""
    import subprocess
    import sys

    from conftest import PACKAGE_PATHS

    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*PACKAGE_PATHS, here]))  # (the checkout's or the wheel's)
    proc = subprocess.run([sys.executable, os.path.join(here, "unchecked_child.py"), backend.kind.name],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, f"rc {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    last = proc.stdout.strip().splitlines()[-1].split()  # (a vendor library may print its own lines first)
    assert last[0] == "ok" and int(last[1]) >= 20, proc.stdout


# ------------------------------------------------------------------ pure unit tests (no device)


def test_dtype_table() -> None:
    sizes = {DType.F64: 8, DType.F32: 4, DType.F16: 2, DType.BF16: 2, DType.F8E4M3: 1, DType.F8E5M2: 1,
             DType.I8: 1, DType.I16: 2, DType.I32: 4, DType.I64: 8, DType.U8: 1, DType.U16: 2, DType.U32: 4,
             DType.U64: 8, DType.BOOL: 1, DType.C64: 8, DType.C128: 16}
    assert set(sizes) == set(DType)
    for dt, size in sizes.items():
        assert dt.size == size == dt.info.size
        code, bits, lanes = dt.dlpack
        assert (code, bits, lanes) == (int(dt.numeric_class), 8 * size, 1)
    assert DType.F32.dlpack == (2, 32, 1)
    assert DType.BF16.dlpack == (4, 16, 1)
    assert DType.I32.dlpack == (0, 32, 1)
    assert DType.U8.dlpack == (1, 8, 1)
    assert DType.BOOL.dlpack == (6, 8, 1)
    assert DType.C64.dlpack == (5, 64, 1)
    assert DType.F8E4M3.dlpack == (10, 8, 1) and DType.F8E5M2.dlpack == (12, 8, 1)
    assert int(NumericClass.FLOAT) == 2 and int(NumericClass.BFLOAT) == 4
    assert DType.F32.info.name == "f32"


def test_dtype_numpy_mapping() -> None:
    with_numpy = [dt for dt in DType if dt.numpy is not None]
    assert {dt for dt in DType if dt.numpy is None} == {DType.BF16, DType.F8E4M3, DType.F8E5M2}
    for dt in with_numpy:
        assert dt.numpy is not None
        npdt = np.dtype(dt.numpy)
        assert npdt.itemsize == dt.size
        assert DType.from_numpy(npdt) is dt  # a numpy dtype
        assert DType.from_numpy(npdt.type) is dt  # a scalar type
        assert DType.from_numpy(npdt.type(0).dtype) is dt  # a numpy scalar's dtype
        assert DType.from_numpy(np.zeros(1, npdt).dtype) is dt
        assert DType.from_numpy(npdt.type(0)) is dt  # a numpy scalar value
        assert DType.from_numpy(np.zeros((2, 3), npdt)) is dt  # an array
    assert DType.from_numpy("float32") is DType.F32
    assert DType.from_numpy(np.bool_) is DType.BOOL and DType.from_numpy(np.dtype(bool)) is DType.BOOL
    with pytest.raises(ValueError):
        DType.from_numpy(np.dtype("datetime64[s]"))
    with pytest.raises(ValueError):
        DType.from_numpy("float128x")


@pytest.mark.parametrize("vendor", ["opencl", "metal", "qnn", "cuda", "hip"])
def test_vendor_tables_answer_by_one_rule(vendor: str) -> None:
    """Every backend's tables say who made a device by the same code over its spec's vendor table (issue 26: one
    ``vendor()``, vendors as data): the first substring (spec order, any case) in the implementation string, then
    in the name, else the spec's ``default``, else OTHER."""
    import importlib

    from ironaccelerator_runtime.vendors import VendorTable

    tables = importlib.import_module(f"ironaccelerator.backends.{vendor}._backend").TABLES
    assert isinstance(tables, VendorTable) and type(tables).vendor is VendorTable.vendor
    pairs = [(k, v) for k, v in tables.vendors if k != "default"]
    fallback = dict(tables.vendors).get("default", Vendor.OTHER)
    assert tables.vendor("") is fallback and tables.vendor("Imagination Technologies") is fallback
    for needle, v in pairs:
        first = next(w for k, w in pairs if k.lower() in f"x {needle.upper()} y".lower())
        assert tables.vendor(f"x {needle.upper()} y") is first, needle
        assert tables.vendor("Imagination Technologies", f"x {needle.lower()} y") is first, needle  # wins over name
    # the spec's data decides: Metal's "else APPLE" is its table's default, QNN's name its device name's
    assert dict(tables.vendors).get("default") is {"metal": Vendor.APPLE, "cuda": Vendor.NVIDIA,
                                                   "hip": Vendor.AMD}.get(vendor)


_MISSING_LIBRARY_CHILD = """
import sys
from ironaccelerator import Error, ErrorKind
from ironaccelerator_runtime.loader import load_library
package, function, message, backend, construct = sys.argv[1:]
import importlib
importlib.import_module(package)
BINDING = importlib.import_module(package + "._binding").BINDING
BINDING.use_library("/nonexistent/libia_missing_library.so")
errors = []
for make in (lambda: load_library(package, function, message), lambda: eval(construct)):
    try:
        make()
    except Error as e:
        errors.append(e)
    else:
        raise SystemExit(f"no error from {make}")
for e in errors:
    assert e.kind is ErrorKind.LIBRARY_NOT_FOUND and e.backend == backend and e.function == function, repr(e)
    assert "/nonexistent/libia_missing_library.so" in str(e), str(e)
print("ok", errors[0].kind.name, errors[0].function)
"""


@pytest.mark.parametrize("package, function, backend, construct", [
    ("ironaccelerator.backends.opencl.cl", "clGetPlatformIDs", "OPENCL",
     "importlib.import_module('ironaccelerator.backends.opencl').OpenCLBackend()"),
    ("ironaccelerator.backends.qnn.interface", "QnnBackend_create", "QNN",
     "importlib.import_module('ironaccelerator.backends.qnn').QnnBackend()"),
    ("ironaccelerator.backends.qnn.system", "QnnSystemContext_create", "QNN",
     "importlib.import_module('ironaccelerator_runtime.backends.qnn.tables')._Api().system"),
    ("ironaccelerator.backends.cuda.driver", "cuDeviceGetCount", "CUDA",
     "importlib.import_module('ironaccelerator.backends.cuda').CudaBackend()"),
    ("ironaccelerator.backends.hip.runtime", "hipGetDeviceCount", "ROCM",
     "importlib.import_module('ironaccelerator.backends.hip').HipBackend()"),
], ids=["opencl", "qnn", "qnn-system", "cuda", "hip"])
def test_a_library_that_does_not_load_is_one_error_on_every_backend(package: str, function: str, backend: str,
                                                                     construct: str) -> None:
    """One library-loading helper (``loader.load_library``, issue 26): a backend's library that cannot be loaded is
    LIBRARY_NOT_FOUND naming the backend, the first function the backend calls and the files tried, from the helper
    and from the backend that uses it alike."""
    import subprocess
    import sys

    from conftest import PACKAGE_PATHS

    if package.endswith("qnn.system"):
        pytest.importorskip("ironaccelerator.backends.qnn.interface")
        from ironaccelerator.backends.qnn.interface._binding import BINDING as interface
        if not interface.has("QnnBackend_create"):
            pytest.skip("the QNN backend library is not installed here (the system library is reached through it)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(PACKAGE_PATHS))
    proc = subprocess.run([sys.executable, "-c", _MISSING_LIBRARY_CHILD, package, function, "not loaded", backend,
                           construct], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, f"rc {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip().splitlines()[-1] == f"ok LIBRARY_NOT_FOUND {function}", proc.stdout


def test_backend_kind_dlpack_devices() -> None:
    assert BackendKind.CUDA.dlpack_device == 2
    assert BackendKind.ROCM.dlpack_device == 10
    assert BackendKind.METAL.dlpack_device == 8
    assert BackendKind.OPENCL.dlpack_device == 4
    assert BackendKind.QNN.dlpack_device == 16


def test_dlpack_device_codes_of_backends_come_from_core_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend's DLPack device code is specs/core.yaml's ``dlpack_device`` (``BackendKind.dlpack_device``), never a
    second constant in dlpack.py (issue 26 item 3); dlpack.py keeps only DLPack's own codes of memory that is no
    backend's device memory (the host's, and the host memory CUDA and ROCm map)."""
    import ironaccelerator._core as core
    from ironaccelerator_runtime import dlpack

    codes = {k: v for k, v in vars(dlpack).items() if k.startswith("KDL_")}
    assert codes == {"KDL_CPU": 1, "KDL_CUDA_HOST": 3, "KDL_ROCM_HOST": 11, "KDL_CUDA_MANAGED": 13}, codes
    assert not set(codes.values()) & {k.dlpack_device for k in BackendKind}
    # a __cuda_array_interface__ is CUDA device memory: the device type core.yaml gives CUDA, read when it is used
    monkeypatch.setitem(core._DLPACK_DEVICE, BackendKind.CUDA, 99)
    imported, stream = dlpack.cuda_array_interface_of({"shape": (4,), "typestr": "<f4", "data": (0x1000, False),
                                                       "version": 3}, "from_cuda_array_interface", None)
    assert imported.device == (99, -1) and stream is None


def test_launch_dims_normalisation() -> None:
    d = LaunchDims(4, 256)
    assert d.grid == (4, 1, 1) and d.block == (256, 1, 1) and d.shared_mem == 0 and d.threads == 1024
    d = LaunchDims((2, 3), [4, 5, 6], shared_mem=128)
    assert d.grid == (2, 3, 1) and d.block == (4, 5, 6) and d.shared_mem == 128 and d.threads == 720
    assert LaunchDims() == LaunchDims(1, 1) == LaunchDims((1, 1, 1), (1, 1, 1), 0)
    for bad in ((1, 2, 3, 4), (), 1.5, (1, "2"), None):
        with pytest.raises(Error) as ei:
            LaunchDims(grid=bad)  # type: ignore[arg-type]
        assert kind_of(ei) is ErrorKind.INVALID_VALUE
        with pytest.raises(Error) as ei:
            LaunchDims(block=bad)  # type: ignore[arg-type]
        assert kind_of(ei) is ErrorKind.INVALID_VALUE


def test_launch_dims_validation() -> None:
    lim = DeviceLimits(max_block=(1024, 512, 64), max_threads_per_block=1024, max_grid=(1000, 100, 10),
                       max_shared_mem=48 * 1024)
    ok = [LaunchDims(1, 1), LaunchDims(1000, 1024), LaunchDims((1000, 100, 10), (16, 16, 4)),
          LaunchDims(1, (1, 512, 2)), LaunchDims(1, 64, shared_mem=48 * 1024)]
    for d in ok:
        d.validate(lim, BackendKind.OPENCL)
    bad = {
        "block[0]": LaunchDims(1, 1025),
        "block[1]": LaunchDims(1, (1, 513)),
        "block[2]": LaunchDims(1, (1, 1, 65)),
        "threads": LaunchDims(1, (32, 32, 2)),
        "grid[0]": LaunchDims(1001, 1),
        "grid[2]": LaunchDims((1, 1, 11), 1),
        ">= 1": LaunchDims(0, 1),
        "shared_mem": LaunchDims(1, 1, shared_mem=48 * 1024 + 1),
    }
    for needle, d in bad.items():
        with pytest.raises(Error) as ei:
            d.validate(lim, BackendKind.CUDA)
        assert kind_of(ei) is ErrorKind.INVALID_VALUE
        assert ei.value.backend == "CUDA"
        assert needle in str(ei.value), (needle, str(ei.value))
    with pytest.raises(Error) as ei:
        LaunchDims(1, 0).validate(lim)
    assert kind_of(ei) is ErrorKind.INVALID_VALUE and ei.value.backend is None
    with pytest.raises(Error) as ei:
        LaunchDims(1, 1, shared_mem=-1).validate(lim)
    assert kind_of(ei) is ErrorKind.INVALID_VALUE


def test_kernel_launch_and_scalar_are_values() -> None:
    k = Kernel()
    launch = KernelLaunch(k, LaunchDims(2, 2), [Scalar(1.5, DType.F32), np.int32(3)])
    assert isinstance(launch.args, tuple) and len(launch.args) == 2
    assert launch.args[0] == Scalar(1.5, DType.F32) and launch.args[0].dtype is DType.F32
    with pytest.raises(AttributeError):
        launch.dims = LaunchDims()


def test_base_traits_raise_unsupported() -> None:
    """An operation a backend does not override raises UNSUPPORTED (never AttributeError)."""

    class Partial(Backend):
        kind = BackendKind.METAL

    b = Partial()
    with pytest.raises(Error) as ei:
        b.devices()
    assert kind_of(ei) is ErrorKind.UNSUPPORTED and "METAL" in str(ei.value)
    with pytest.raises(Error) as ei:
        b.open(0)
    assert kind_of(ei) is ErrorKind.UNSUPPORTED
    with pytest.raises(Error) as ei:
        Event().elapsed_ms(Event())
    assert kind_of(ei) is ErrorKind.UNSUPPORTED


def test_registry_unavailable_backend_reports_reason() -> None:
    class Broken(Backend):
        kind = BackendKind.QNN

        def __init__(self) -> None:
            raise Error(ErrorKind.LIBRARY_NOT_FOUND, "libQnnHtp.so: not found", backend="QNN")

    reg = BackendRegistry({BackendKind.QNN: Broken})
    with pytest.raises(Error) as ei:
        reg.get(BackendKind.QNN)
    assert kind_of(ei) is ErrorKind.LIBRARY_NOT_FOUND
    with pytest.raises(Error) as ei:
        reg.get(BackendKind.ROCM)
    assert kind_of(ei) is ErrorKind.UNSUPPORTED
    assert reg.available() == []
    report = reg.report()
    assert len(report) == len(BackendKind)
    assert "QNN: unavailable: libQnnHtp.so: not found" in report


_REGISTRY_CHILD = """
import sys
sys.path[:0] = sys.argv[1:]
import ironaccelerator as ia
reg = ia.BackendRegistry.default()
before = "importlib.metadata" in sys.modules  # (default() reads the entry points on first use)
reg._take_entry_points()
f = reg._factories[ia.BackendKind.QNN]
print(before, "importlib.metadata" in sys.modules, getattr(f, "__qualname__", type(f).__qualname__).partition(".")[0])
"""


def _registry_child(*path: str) -> list[str]:
    import subprocess
    import sys

    from conftest import GENERATED, RUNTIME
    proc = subprocess.run([sys.executable, "-c", _REGISTRY_CHILD, *path, str(GENERATED), str(RUNTIME)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()[-1].split()


def test_registry_default_skips_importlib_metadata_without_entry_points(tmp_path: Any) -> None:
    """BackendRegistry.default() loads the ``ironaccelerator.backends`` entry points; where no distribution on
    sys.path declares one it tells so without importing importlib.metadata (~25 ms of a first device's open),
    and a distribution that does is still found (its backend replaces the built-in one)."""
    if BackendKind.QNN not in BackendRegistry.default()._factories:
        pytest.skip("no built-in QNN backend")
    assert _registry_child(str(tmp_path)) == ["False", "False", "_Builtin"]
    info = tmp_path / "fake_backend-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-backend\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ironaccelerator.backends]\nqnn = fake_backend_mod:FakeQnn\n")
    (tmp_path / "fake_backend_mod.py").write_text("from ironaccelerator import Backend, BackendKind\n\n"
                                                  "class FakeQnn(Backend):\n    kind = BackendKind.QNN\n")
    assert _registry_child(str(tmp_path)) == ["False", "True", "_entry_point"]
    # read on first use, the entry points still come before get() and under register(): what get() returns is the
    # entry point's backend, and a backend registered after default() is not replaced by it
    import subprocess
    import sys

    from conftest import GENERATED, RUNTIME
    code = ("import sys\nsys.path[:0] = sys.argv[1:]\nimport ironaccelerator as ia\n"
            "print(type(ia.BackendRegistry.default().get('qnn')).__name__)\n"
            "class Mine(ia.Backend):\n    kind = ia.BackendKind.QNN\n"
            "ia.BackendRegistry._default = None\n"
            "reg = ia.BackendRegistry.default()\n"
            "reg.register(ia.BackendKind.QNN, Mine)\n"
            "print(type(reg.get(ia.BackendKind.QNN)).__name__)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(GENERATED), str(RUNTIME)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["FakeQnn", "Mine"]


def test_registry_entry_point_prescan_defers_to_importlib_metadata(tmp_path: Any, monkeypatch: Any) -> None:
    """What the pre-scan cannot read (a zip on sys.path, an .egg) is importlib.metadata's to decide."""
    import sys

    from ironaccelerator_runtime.traits.registry import _may_declare_entry_points
    group = "ironaccelerator.backends"
    monkeypatch.setattr(sys, "path", [str(tmp_path), str(tmp_path / "absent")])
    assert not _may_declare_entry_points(group)
    (tmp_path / "other-1.0.dist-info").mkdir()
    (tmp_path / "other-1.0.dist-info" / "entry_points.txt").write_text("[console_scripts]\nx = y:z\n")
    (tmp_path / "bare.egg-info").write_text("Name: bare\n")  # (an .egg-info file: no entry points)
    assert not _may_declare_entry_points(group)
    (tmp_path / "Other-2.0.DIST-INFO").mkdir()
    (tmp_path / "Other-2.0.DIST-INFO" / "entry_points.txt").write_text(f"[{group}]\nqnn = m:C\n")
    assert _may_declare_entry_points(group)
    (tmp_path / "lib.zip").write_bytes(b"")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "lib.zip")])
    assert _may_declare_entry_points(group)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "x.egg")])
    assert _may_declare_entry_points(group)


def test_cuda_sources_compile_with_nvrtc() -> None:
    """The CUDA kernels above are valid CUDA C (checked on the CPU, so a GPU run cannot fail on a typo)."""
    from ironaccelerator.backends.cuda import nvrtc
    if not nvrtc.has("nvrtcCompileProgram"):
        pytest.skip("libnvrtc not found")
    for name in ("vector_add", "saxpy", "lcg"):
        prog = nvrtc.nvrtcCreateProgram(getattr(_CUDA, name), f"{name}.cu")
        try:
            nvrtc.nvrtcCompileProgram(prog, ["--gpu-architecture=compute_90"])
            assert f".entry {name}" in nvrtc.nvrtcGetPTX(prog)
        finally:
            nvrtc.nvrtcDestroyProgram(prog)
    prog = nvrtc.nvrtcCreateProgram(_CUDA.broken, "broken.cu")
    with pytest.raises(Error) as info:
        nvrtc.nvrtcCompileProgram(prog, ["--gpu-architecture=compute_90"])
    assert info.value.kind is ErrorKind.COMPILE_FAILED
    nvrtc.nvrtcDestroyProgram(prog)


# ------------------------------------------------------------------ issue 23 item 9: one behaviour for one mistake


def test_enums_print_as_their_names() -> None:
    """str() and f-strings of the public enums name the member on every Python (3.11 printed ``2`` for
    ``f"{DType.F32}"``); a format spec still formats the integer; pickling is unchanged."""
    import pickle

    from ironaccelerator import ComputeTier

    for member in (DType.F32, ErrorKind.NOT_READY, MemoryKind.UNIFIED, BackendKind.OPENCL, Vendor.OTHER,
                   NumericClass.FLOAT, ComputeTier.NPU):
        name = f"{type(member).__name__}.{member.name}"
        assert str(member) == f"{member}" == format(member) == name, (str(member), f"{member}")
        assert f"{member:d}" == str(int(member)) and f"{member:>4}" == f"{int(member):>4}"
        assert pickle.loads(pickle.dumps(member)) is member
    flags = CapabilityFlags(3)
    assert f"{flags}" == str(flags) == f"CapabilityFlags.{flags.name}" and f"{flags:d}" == "3"
    assert f"{CapabilityFlags.NONE}" == "CapabilityFlags.NONE"


def _names_backend_and_function(e: Error, device_or_backend: Any) -> None:
    """An Error of a device-bound operation names its backend and, in ``function``, an operation or C function
    (a name, never a sentence; an Objective-C method is named as such: ``-[MTLDevice newBufferWithLength:options:]``)."""
    import re

    kind = device_or_backend.kind
    assert e.backend == kind.name, (e.backend, repr(e))
    assert e.function is not None and re.match(r"^([A-Za-z_][\w.]*|[-+]\[\w+ [\w:]+\])$", e.function), repr(e)
    assert "the ? backend" not in str(e), str(e)


def test_unknown_kernel_name_is_invalid_value(device: Device) -> None:
    """module.kernel(name) of a name the module lacks: INVALID_VALUE named Module.kernel on every backend, the
    driver's code kept on CUDA/HIP and OpenCL (CUDA said INVALID_HANDLE: tests/consistency_stub_child.py; CUDA named
    cuModuleGetFunction and OpenCL clCreateKernel)."""
    fmt = MODULE_FORMATS[device.kind]
    if fmt == "source":
        src = KERNELS.get(device.kind)
        if src is None:
            pytest.skip(f"TODO: no {device.kind.name} kernel sources in test_conformance.KERNELS")
        module = device.load_module(src.vector_add)
    else:
        import qnn_graphs
        module = device.load_module(qnn_graphs.build_binary(("f32",), 64))
    import mistakes

    for what, call in mistakes.unknown_kernel(module):
        e = mistakes.check_unknown_kernel(mistakes.outcome(call), device, what)
        _names_backend_and_function(e, device)


def test_pool_blocks_slice_like_allocations(device: Device, stream: Stream) -> None:
    """pool.alloc(n)[a:b] is a slice as alloc(n)[a:b] is (OpenCL said slices were unsupported): copies through it
    touch only its bytes; it keeps the pooled allocation alive and is INVALID_HANDLE once that allocation is freed
    (its block goes back to the pool, to the next owner)."""
    pool = device.memory_pool()
    p = pool.alloc(3 * 4096)
    s = p[4096:8192]  # (4096-byte origins: OpenCL sub-buffers need aligned ones)
    assert s.nbytes == 4096 and s.device is device
    inner = s[1024:2048]  # a slice of the block's slice
    stream.fill(p, 0x11)
    data = random_bytes(4096)
    stream.copy_from_host(s, data)
    stream.fill(inner, 0x22)
    out = np.zeros(3 * 4096, np.uint8)
    stream.copy_to_host(out, p)
    stream.synchronize()
    expect = data.copy()
    expect[1024:2048] = 0x22
    np.testing.assert_array_equal(out[4096:8192], expect)
    assert (out[:4096] == 0x11).all() and (out[8192:] == 0x11).all()
    ref = weakref.ref(p)
    del p
    gc.collect()
    assert ref() is not None  # the slice keeps the pooled allocation (and so its block) alive
    ref().free()  # type: ignore[union-attr]
    for use in (lambda: stream.copy_to_host(out[:4096], s), lambda: stream.fill(inner, 0),
                lambda: s.host_view(), lambda: s[0:16]):
        with pytest.raises(Error) as ei:
            use()
        assert kind_of(ei) is ErrorKind.INVALID_HANDLE, repr(ei.value)
    q = pool.alloc(3 * 4096)  # the same block, most likely: the old slice must not reach it
    with pytest.raises(Error) as ei:
        stream.copy_from_host(s, data)
    assert kind_of(ei) is ErrorKind.INVALID_HANDLE
    q.free()


def test_overlapping_copy_within_one_allocation_is_refused(device: Device, stream: Stream) -> None:
    """Stream.copy between overlapping ranges of one allocation (itself, its slices, a pool block) is INVALID_VALUE
    before any vendor call on every backend, as memcpy's ranges must not overlap (OpenCL's driver refused with
    CL_MEM_COPY_OVERLAP, Metal and QNN ran it); ranges of one allocation that do not overlap copy."""
    a = device.alloc(4 * 4096)
    data = random_bytes(4 * 4096)
    stream.copy_from_host(a, data)
    pool_block = device.memory_pool().alloc(4096)
    for dst, src, kw in ((a, a, dict(nbytes=8192, dst_offset=4096)),  # forward overlap
                         (a, a, dict(nbytes=8192, src_offset=4096)),  # backward
                         (a, a, {}),  # the same bytes
                         (a[0:8192], a[4096:12288], {}),  # slices that overlap
                         (a[4096:8192], a, dict(nbytes=4096, src_offset=4096 + 8)),
                         (pool_block, pool_block, dict(nbytes=1024, dst_offset=512))):
        with pytest.raises(Error) as ei:
            stream.copy(dst, src, **kw)
        assert kind_of(ei) is ErrorKind.INVALID_VALUE and "overlap" in str(ei.value), repr(ei.value)
        _names_backend_and_function(ei.value, device)
    stream.copy(a, a, 4096, dst_offset=3 * 4096, src_offset=0)  # disjoint ranges of one allocation
    stream.copy(a[4096:8192], a[8192:12288])  # adjacent slices
    out = np.zeros(4 * 4096, np.uint8)
    stream.copy_to_host(out, a)
    stream.synchronize()
    expect = data.copy()
    expect[3 * 4096:] = data[:4096]
    expect[4096:8192] = data[8192:12288]
    np.testing.assert_array_equal(out, expect)
    pool_block.free()
    a.free()


def test_elapsed_ms_waits_for_a_pending_event(device: Device, stream: Stream) -> None:
    """elapsed_ms with an event still pending waits for it (as Event.synchronize) on every backend: Metal raised
    NOT_READY while OpenCL and CUDA waited (Event.elapsed_ms's docstring)."""
    if MODULE_FORMATS[device.kind] == "source" and KERNELS.get(device.kind) is not None:
        src = KERNELS[device.kind]
        assert src is not None
        lcg = device.load_module(src.lcg).kernel("lcg")
        n = 1 << 16
        buf = device.alloc(4 * n)
        launch = KernelLaunch(lcg, grid_for(n, 64), [buf, np.uint32(n), np.uint32(3000)])
    else:
        k, dims, args = _vector_add(device, 1 << 16)
        buf = device.alloc(4 << 16)
        launch = KernelLaunch(k, dims, args(buf, buf, buf))
    e0 = stream.record_event()
    stream.launch(launch)
    e1 = stream.record_event()
    t = e0.elapsed_ms(e1)  # (e1 pending here on an asynchronous device)
    assert isinstance(t, float) and t > 0 and e1.query()
    with pytest.raises(Error) as ei:
        e0.elapsed_ms(object())  # type: ignore[arg-type]
    assert kind_of(ei) is ErrorKind.INVALID_VALUE
    _names_backend_and_function(ei.value, device)
    stream.synchronize()
    buf.free()


def test_open_takes_only_integer_indices_and_device_ids(backend: Backend) -> None:
    """Backend.open: a DeviceId of the backend or an integer index (int, numpy integer); "0", 0.9, True (a bool
    opened device 1), None and the like are INVALID_VALUE, as a bad index is (test_open_bad_ids)."""
    for bad in ("0", 0.9, True, False, None, b"\x00", [0]):
        with pytest.raises(Error) as ei:
            backend.open(bad)  # type: ignore[arg-type]
        assert kind_of(ei) is ErrorKind.INVALID_VALUE, (bad, ei.value)
        assert "device_id" in str(ei.value), str(ei.value)
        _names_backend_and_function(ei.value, backend)
    with backend.open(np.int64(0)) as dev:  # type: ignore[arg-type]
        assert dev.descriptor.id.index == 0


def test_registry_get_takes_kinds_and_their_names(backend: Backend) -> None:
    """BackendRegistry.get: a BackendKind, or its name in any case; None or an unknown name is INVALID_VALUE listing
    the kinds (it raised AttributeError)."""
    registry = BackendRegistry.default()
    name = backend.kind.name
    assert registry.get(name) is registry.get(name.lower()) is registry.get(backend.kind) is backend
    for bad in (None, "no-such-backend", 3, b"OPENCL"):
        with pytest.raises(Error) as ei:
            registry.get(bad)  # type: ignore[arg-type]
        assert kind_of(ei) is ErrorKind.INVALID_VALUE and "OPENCL" in str(ei.value) and "CUDA" in str(ei.value)
        assert ei.value.function == "BackendRegistry.get"


def test_nul_inside_source_is_refused(device: Device, sources: KernelSources) -> None:
    """Source with a NUL before its end is INVALID_VALUE on every source backend: OpenCL compiled what came
    before the NUL, silently dropping the rest."""
    src = sources.vector_add + "\0" + sources.saxpy
    for text in (src, src.encode()) if device.kind is not BackendKind.METAL else (src,):
        with pytest.raises(Error) as ei:
            device.load_module(text).kernel("saxpy")
        assert kind_of(ei) is ErrorKind.INVALID_VALUE and "NUL" in str(ei.value), repr(ei.value)
        _names_backend_and_function(ei.value, device)


def test_launch_grid_over_the_device_limits_is_refused(device: Device, stream: Stream,
                                                       kernels: dict[str, Kernel]) -> None:
    """A 2**41-thread grid is refused by the checked launch (INVALID_VALUE naming the limit) on every backend: the
    simulated Metal device accepted it (a Metal thread position is a 32-bit uint per dimension)."""
    with device.alloc(64) as a:
        for dims in (LaunchDims(grid=2**31, block=1024), LaunchDims(grid=(2**29, 1, 1), block=(2**12, 1, 1)),
                     LaunchDims(grid=2**41)):
            with pytest.raises(Error) as ei:
                stream.launch(KernelLaunch(kernels["vector_add"], dims, [a, a, a, np.uint32(0)]))
            assert kind_of(ei) is ErrorKind.INVALID_VALUE, (dims, ei.value)
            _names_backend_and_function(ei.value, device)
        stream.synchronize()


def test_device_objects_refuse_pickle_saying_how_to_share(device: Device, stream: Stream) -> None:
    """Pickling an allocation (or a slice or pool block of one), a device, a stream, an event, a module or a
    kernel is a TypeError naming the type and what to do instead (export_ipc() for memory; the descriptor for a
    device); it said "cannot pickle 'module' object" or pickled a useless handle."""
    import copy
    import pickle

    k, _, _ = _vector_add(device, 64)
    a = device.alloc(8192)
    block = device.memory_pool().alloc(64)
    things = {"Allocation": (a, a[4096:8192], block), "Device": (device,), "Stream": (stream,),
              "Event": (stream.record_event(),), "Kernel": (k,), "Module": (k.module,)}  # type: ignore[attr-defined]
    for what, objs in things.items():
        for obj in objs:
            for dump in (pickle.dumps, copy.copy):
                with pytest.raises(TypeError) as ei:
                    dump(obj)
                msg = str(ei.value)
                assert msg.startswith(f"cannot pickle {what} "), msg
                if what == "Allocation":
                    assert "export_ipc()" in msg, msg
                if what == "Device":
                    assert "descriptor" in msg, msg
    pickle.loads(pickle.dumps(device.descriptor))  # (descriptors still pickle)
    block.free()
    a.free()


def test_errors_name_their_backend_and_a_function(device: Device, stream: Stream) -> None:
    """A sample of mistakes on every backend: each Error names the backend (never "the ? backend", backend None)
    and in ``function`` an operation or C function, not a sentence."""
    import functools

    a = device.alloc(64)
    dead = device.alloc(64)
    dead.free()
    k, dims, args = _vector_add(device, 16)
    ev = stream.record_event()
    mistakes: list[Callable[[], Any]] = [
        lambda: device.alloc(-1), lambda: device.alloc(2**70), lambda: a[10:10], lambda: a[::2],
        lambda: dead.free(), lambda: dead.host_view(), lambda: stream.copy(a, a, 8, dst_offset=4),
        lambda: stream.copy_from_host(a, np.zeros(128, np.uint8)), lambda: stream.copy_to_host(bytes(64), a),
        lambda: stream.fill(a, 256), lambda: stream.copy(a, dead),
        lambda: stream.launch(KernelLaunch(k, dims, args(a, a, a)[:-1])),
        lambda: stream.launch(KernelLaunch(k, LaunchDims(grid=2**40, block=2**20), args(a, a, a))),
        lambda: stream.launch(KernelLaunch(k, dims, args(a, dead, a))),
        lambda: stream.launch(KernelLaunch(k, LaunchDims(cooperative=True), args(a, a, a))),
        lambda: device.load_module(b"", options="-O2"), lambda: ev.elapsed_ms(None),  # type: ignore[arg-type]
        lambda: stream.wait_event(None),  # type: ignore[arg-type]
        lambda: k.max_active_blocks(64), lambda: k.attributes,
        lambda: device.memory_pool().alloc(-4), lambda: a.export_ipc(),
        lambda: device.import_ipc(None),  # type: ignore[arg-type]
        lambda: device.from_dlpack(object()), lambda: device.backend.open(10**6),
    ]
    for call in UNSUPPORTED.get(device.kind, {}).values():
        mistakes.append(functools.partial(call, device))
    seen = 0
    for mistake in mistakes:
        try:
            r = mistake()
        except Error as e:
            r = e
        except TypeError:
            continue  # (a TypeError is the caller's bug, not a backend's error)
        if isinstance(r, Error):
            _names_backend_and_function(r, device)
            seen += 1
    assert seen >= 20, seen
    stream.synchronize()
    a.free()


# ------------------------------------------------------------------ the surface a backend implements, asked


# arguments an operation checks before it reaches what the backend lacks (a generic base method over a hook)
_VALID_ARGS: dict[str, Callable[[], tuple[Any, ...]]] = {"from_dlpack": lambda: (np.zeros(16, np.float32),)}


def _dummy_call(obj: object, name: str) -> object:
    """``obj.name`` called with None for each required argument (an operation the backend leaves to the base
    raises UNSUPPORTED before reading any; _VALID_ARGS where it checks them first), or read where it is a
    property."""
    import inspect

    attr = getattr(obj, name)
    if not callable(attr):
        return attr
    if name in _VALID_ARGS:
        return attr(*_VALID_ARGS[name]())
    params = [p for p in inspect.signature(attr).parameters.values()
              if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return attr(*[None] * len(params))


def test_supports_is_false_exactly_where_the_operation_raises_unsupported(backend: Backend, device: Device,
                                                                            stream: Stream) -> None:
    """``Backend.supports(op)``, derived from what the backend's classes override: False for every operation
    that raises UNSUPPORTED when called (each is called), True for every operation the live objects' classes
    override, and in agreement with the operations this suite declares unsupported (UNSUPPORTED above: an
    operation-level entry like ``Stream.capture()`` is not supported; an argument-level one like
    ``Device.alloc(MemoryKind.HOST)`` is an implemented operation refusing that argument)."""
    import inspect

    from ironaccelerator_runtime import traits
    from ironaccelerator_runtime.operations import OPERATIONS, TRAITS

    kernel, _, _ = _vector_add(device, 64)
    alloc = device.alloc(64)
    objects: dict[str, object] = {"Backend": backend, "Device": device, "Allocation": alloc,
                                  "MemoryPool": device.memory_pool(), "Stream": stream,
                                  "Event": stream.record_event(), "Kernel": kernel}
    module = getattr(kernel, "module", None)
    if module is not None:
        objects["Module"] = module
    made_by = {base.__name__: op for base, op in TRAITS}
    try:
        assert backend.operations() == tuple(op for op in OPERATIONS if backend.supports(op))
        for op in OPERATIONS:
            trait, _, name = op.partition(".")
            obj = objects.get(trait)
            if backend.supports(op):
                continue
            if obj is None:  # (no live object of the trait here: the operation making one is not supported either)
                made = made_by[trait]
                assert made is not None and not backend.supports(made), op
                continue
            try:
                r = _dummy_call(obj, name)
            except Error as e:
                r = e
            assert isinstance(r, Error) and r.kind is ErrorKind.UNSUPPORTED, (op, r)
        for trait, obj in objects.items():
            base = getattr(traits, trait)
            for op in OPERATIONS:
                t, _, name = op.partition(".")
                if t == trait and inspect.getattr_static(type(obj), name) is not inspect.getattr_static(base, name):
                    assert backend.supports(op), f"{type(obj).__name__} overrides {name}, yet {op} is not supported"
        for declared in UNSUPPORTED.get(backend.kind, {}):
            op, _, args = declared.partition("(")
            assert backend.supports(op) is (args.rstrip(")") != ""), declared
    finally:
        alloc.free()
    stream.synchronize()


def test_supports_refuses_a_name_that_is_not_an_operation(backend: Backend) -> None:
    for bad in ("Stream.captur", "capture", "", None, 3):
        with pytest.raises(Error) as ei:
            backend.supports(bad)  # type: ignore[arg-type]
        assert kind_of(ei) is ErrorKind.INVALID_VALUE and ei.value.backend == backend.kind.name
        assert ei.value.function == "Backend.supports" and "Stream.capture" in str(ei.value), str(ei.value)
    assert backend.supports("Stream.launch") and backend.supports("Device.alloc")
