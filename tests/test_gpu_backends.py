"""The CUDA and ROCm/HIP backends: the hand-written runtime/ironaccelerator_runtime/backends/gpu/, with each
vendor's tables rendered by the one shared template, templates/backends/gpu.py.j2.

Everything here but the ``gpu``-marked tests runs on a CPU-only machine: capability translation on
real GPUs' numbers, kernel-argument packing, module classification, NVRTC compilation, DLPack /
CUDA-Array-Interface export around a fake pointer, the no-driver / no-device paths, and the
generator's checks of the backend specs.  ``pytest -m gpu`` runs the device tests (scripts/gpu-check.sh).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import gc
import importlib
import inspect
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Any, Callable, cast

import numpy as np
import pytest

from ironaccelerator import (
    Allocation, BackendKind, BackendRegistry, CapabilityFlags as F, ComputeTier, DeviceDescriptor, DeviceId, DType,
    Error, ErrorKind, KernelLaunch, LaunchDims, MemoryKind, MemoryPool, Scalar, Vendor,
)
from ironaccelerator.backends.cuda import _backend as cuda_backend
from ironaccelerator.backends.hip import _backend as hip_backend
from ironaccelerator_runtime.backends import gpu
from ironaccelerator_runtime.backends.gpu import (
    args as gpu_args, context as gpu_context, module as gpu_module, pool as gpu_pool,
)
from ironaccelerator_gen import pipeline
from ironaccelerator_gen.diagnostics import UserError

import dlpack_capsules
from conftest import GENERATED, ROOT, SPECS, rect_reference
from ironaccelerator_runtime import dlpack

# ------------------------------------------------------------------ capability translation (pure)

CUDA_BASE = F.FP64 | F.PROFILING | F.SUBGROUPS | F.ATOMICS_64
PASCAL = CUDA_BASE | F.FP16 | F.UNIFIED_MEMORY  # (COOPERATIVE_LAUNCH, clusters: from device attributes, not here)
VOLTA = PASCAL | F.INT8_DOT | F.TENSOR_CORES
AMPERE = VOLTA | F.BF16 | F.ASYNC_COPY
ADA = AMPERE | F.FP8

CUDA_GPUS = [
    # (device name as the driver reports it, compute capability, flags, tier)
    ("Tesla K80", "3.7", CUDA_BASE, ComputeTier.DATACENTER),
    ("Tesla P100-PCIE-16GB", "6.0", PASCAL, ComputeTier.DATACENTER),
    ("Tesla V100-SXM2-16GB", "7.0", VOLTA, ComputeTier.DATACENTER),
    ("Tesla T4", "7.5", VOLTA, ComputeTier.DATACENTER),
    ("NVIDIA A100-SXM4-80GB", "8.0", AMPERE, ComputeTier.DATACENTER),
    ("NVIDIA GeForce RTX 4090", "8.9", ADA, ComputeTier.DISCRETE),
    ("NVIDIA H100 80GB HBM3", "9.0", ADA, ComputeTier.DATACENTER),
    ("NVIDIA H200", "9.0", ADA, ComputeTier.DATACENTER),
    ("NVIDIA B200", "10.0", ADA, ComputeTier.DATACENTER),
    # not in the issue's table, but worth pinning: a consumer card at a datacenter-free capability
    ("NVIDIA GeForce GTX 1080", "6.1", PASCAL | F.INT8_DOT, ComputeTier.DISCRETE),
    ("NVIDIA A10", "8.6", AMPERE, ComputeTier.DATACENTER),
    ("NVIDIA RTX A1000", "8.6", AMPERE, ComputeTier.DISCRETE),
]


@pytest.mark.parametrize("name, cc, flags, tier", CUDA_GPUS, ids=[g[0] for g in CUDA_GPUS])
def test_cuda_capability_translation(name: str, cc: str, flags: F, tier: ComputeTier) -> None:
    cap = cuda_backend.translate_capability(cc, name)
    assert cap.flags == flags, (cap.flags, flags)
    assert cap.tier is tier
    assert cap.vendor_version == "sm_" + cc.replace(".", "")
    assert cuda_backend.translate_vendor(name) is Vendor.NVIDIA


def test_cuda_integrated_devices() -> None:
    orin = cuda_backend.translate_capability("8.7", "Orin", integrated=True)
    assert orin.tier is ComputeTier.INTEGRATED and orin.flags == AMPERE


HIP_BASE = F.FP16 | F.FP64 | F.PROFILING | F.ASYNC_COPY | F.SUBGROUPS | F.ATOMICS_64
HIP_GPUS = [
    # (device name, gcnArchName, flags, tier)
    ("AMD Instinct MI50", "gfx906:sramecc+:xnack-", HIP_BASE | F.INT8_DOT, ComputeTier.DATACENTER),
    ("AMD Instinct MI100", "gfx908:sramecc+:xnack-", HIP_BASE | F.INT8_DOT | F.TENSOR_CORES | F.BF16,
     ComputeTier.DATACENTER),
    ("AMD Instinct MI210", "gfx90a:sramecc+:xnack-",
     HIP_BASE | F.INT8_DOT | F.TENSOR_CORES | F.BF16 | F.UNIFIED_MEMORY, ComputeTier.DATACENTER),
    ("AMD Instinct MI250X", "gfx90a:sramecc+:xnack-",
     HIP_BASE | F.INT8_DOT | F.TENSOR_CORES | F.BF16 | F.UNIFIED_MEMORY, ComputeTier.DATACENTER),
    ("AMD Instinct MI300X", "gfx942:sramecc+:xnack-",
     HIP_BASE | F.INT8_DOT | F.TENSOR_CORES | F.BF16 | F.FP8 | F.UNIFIED_MEMORY, ComputeTier.DATACENTER),
    ("AMD Radeon RX 6800", "gfx1030", HIP_BASE | F.INT8_DOT, ComputeTier.DISCRETE),
    ("AMD Radeon RX 7900 XTX", "gfx1100", HIP_BASE | F.INT8_DOT | F.TENSOR_CORES | F.BF16, ComputeTier.DISCRETE),
    ("AMD Radeon VII", "gfx906:sramecc-:xnack-", HIP_BASE | F.INT8_DOT, ComputeTier.DISCRETE),  # name beats arch
    ("AMD Radeon Graphics", "gfx1103", HIP_BASE | F.INT8_DOT | F.TENSOR_CORES | F.BF16 | F.UNIFIED_MEMORY,
     ComputeTier.INTEGRATED),  # a Phoenix APU (integrated)
]


@pytest.mark.parametrize("name, arch, flags, tier", HIP_GPUS, ids=[g[0] for g in HIP_GPUS])
def test_hip_capability_translation(name: str, arch: str, flags: F, tier: ComputeTier) -> None:
    cap = hip_backend.translate_capability(arch, name, integrated=arch == "gfx1103")
    assert cap.flags == flags, (cap.flags, flags)
    assert cap.tier is tier
    assert cap.vendor_version == arch
    assert hip_backend.translate_vendor(name) is Vendor.AMD


def test_hip_unknown_arch_keeps_the_base_flags() -> None:
    cap = hip_backend.translate_capability("unknown", "gfx???")
    assert cap.flags == HIP_BASE and cap.tier is ComputeTier.DISCRETE


# ------------------------------------------------------------------ fake allocations (no device)


def _cls(module: Any, what: str) -> Any:
    prefix = module.__name__.split(".")[-2].capitalize()  # ironaccelerator.backends.cuda._backend -> Cuda
    return getattr(module, prefix + what)


def fake_device(module: Any = cuda_backend, index: int = 3) -> Any:
    """A Device of ``module``'s backend that was never opened: enough for export and packing."""
    kind = module.TABLES.kind
    dev = object.__new__(_cls(module, "Device"))
    dev.api = _cls(module, "Backend").vendor_api()  # (binding loads no library)
    dev.descriptor = DeviceDescriptor(id=DeviceId(kind, index), name="fake", vendor=Vendor.OTHER, backend=kind,
                                      total_memory=1 << 30, compute_units=1,
                                      capability=module.translate_capability("unknown" if kind is BackendKind.ROCM
                                                                             else "9.0", "fake"))
    return dev


FAKE_PTR = 0x7F00DEAD0000  # never dereferenced


def fake_allocation(nbytes: int = 64, module: Any = cuda_backend) -> Any:
    return _cls(module, "Allocation")(fake_device(module), FAKE_PTR, nbytes, MemoryKind.DEVICE)


def test_fake_allocation_shape() -> None:
    a: cuda_backend.CudaAllocation = fake_allocation(64)
    assert isinstance(a, Allocation) and a.ptr == FAKE_PTR and a.dptr == FAKE_PTR  # CUdeviceptr: an int
    assert a.__dlpack_device__() == (2, 3)
    h = fake_allocation(64, module=hip_backend)
    assert h.ptr == FAKE_PTR and h.__dlpack_device__() == (10, 3)
    ffi = hip_backend.HipBackend.vendor_api().ffi
    assert int(ffi.cast("uintptr_t", h.dptr)) == FAKE_PTR  # void *


# ------------------------------------------------------------------ kernel argument packing (pure)


def _read(ffi: Any, packed: Any, i: int, ctype: str) -> Any:
    return ffi.cast(ctype + " *", packed.params[i])[0]


def test_pack_args_sizes_alignment_and_values() -> None:
    ffi = cuda_backend.CudaBackend.vendor_api().ffi
    buf = fake_allocation(4096)
    args = [np.uint8(7), buf, np.float32(2.5), Scalar(1.5, DType.F16), np.int64(-3), Scalar(2.5, DType.BF16),
            Scalar(1 + 2j, DType.C64), Scalar(True, DType.BOOL), Scalar(2**40 + 5, DType.U64),
            Scalar(-0.25, DType.F64), np.int16(-2), Scalar(3 - 1j, DType.C128), b"\x01\x02\x03"]
    packed = cuda_backend.pack_args(args, ffi)
    assert packed.sizes == (1, 8, 4, 2, 8, 2, 8, 1, 8, 8, 2, 16, 3)
    aligns = (1, 8, 4, 2, 8, 2, 8, 1, 8, 8, 2, 16, 1)
    base = int(ffi.cast("uintptr_t", packed.storage))
    for i, (off, align) in enumerate(zip(packed.offsets, aligns)):
        addr = int(ffi.cast("uintptr_t", packed.params[i]))
        assert addr == base + off
        assert addr % align == 0, (i, addr, align)
    assert _read(ffi, packed, 0, "uint8_t") == 7
    assert _read(ffi, packed, 1, "CUdeviceptr") == FAKE_PTR
    assert _read(ffi, packed, 2, "float") == 2.5
    assert bytes(ffi.buffer(packed.params[3], 2)) == np.float16(1.5).tobytes()
    assert _read(ffi, packed, 4, "int64_t") == -3
    assert _read(ffi, packed, 5, "uint16_t") == 0x4020  # bf16(2.5)
    assert (_read(ffi, packed, 6, "float"), ffi.cast("float *", packed.params[6])[1]) == (1.0, 2.0)
    assert _read(ffi, packed, 7, "uint8_t") == 1
    assert _read(ffi, packed, 8, "uint64_t") == 2**40 + 5
    assert _read(ffi, packed, 9, "double") == -0.25
    assert _read(ffi, packed, 10, "int16_t") == -2
    assert tuple(ffi.cast("double *", packed.params[11])[0:2]) == (3.0, -1.0)
    assert bytes(ffi.buffer(packed.params[12], 3)) == b"\x01\x02\x03"
    assert packed.keep == (buf,)
    empty = cuda_backend.pack_args([], ffi)
    assert empty.params == ffi.NULL and empty.sizes == ()


def test_bf16_rounding() -> None:
    assert gpu_args._bf16_bits(1.0) == 0x3F80
    assert gpu_args._bf16_bits(-2.0) == 0xC000
    assert gpu_args._bf16_bits(1.0 + 2**-8) == 0x3F80  # a tie: to even
    assert gpu_args._bf16_bits(1.0 + 3 * 2**-9) == 0x3F81  # above half: up
    assert gpu_args._bf16_bits(float("nan")) == 0x7FC0
    assert gpu_args._bf16_bits(float("inf")) == 0x7F80


def test_pack_args_checks() -> None:
    ffi = cuda_backend.CudaBackend.vendor_api().ffi
    buf = fake_allocation(16)
    with pytest.raises(Error) as ei:  # count, against the kernel's parameter info
        cuda_backend.pack_args([buf, np.uint32(1)], ffi, expected=(8, 4, 4))
    assert ei.value.kind is ErrorKind.INVALID_VALUE and "takes 3 arguments, 2 given" in str(ei.value)
    with pytest.raises(Error) as ei:  # size
        cuda_backend.pack_args([buf, np.uint64(1)], ffi, expected=(8, 4))
    assert ei.value.kind is ErrorKind.INVALID_VALUE and "argument 1: 8 bytes given" in str(ei.value)
    for bad in (5, 2.5, True, np.zeros(3, np.float32), "x", Scalar(2.5, DType.F8E4M3)):
        with pytest.raises(Error) as ei:
            cuda_backend.pack_args([bad], ffi)
        assert ei.value.kind is ErrorKind.INVALID_VALUE, bad
    assert cuda_backend.pack_args([Scalar(0x38, DType.F8E4M3)], ffi).sizes == (1,)  # fp8 as raw bits
    buf._freed = True  # as if freed (a fake pointer is never handed to the driver)
    with pytest.raises(Error) as ei:
        cuda_backend.pack_args([buf], ffi, expected=(8,))
    assert ei.value.kind is ErrorKind.INVALID_HANDLE
    with pytest.raises(Error) as ei:  # unchecked too: a freed allocation's address may be other memory by now
        cuda_backend.pack_args([buf], ffi, expected=(8,), check=False)
    assert ei.value.kind is ErrorKind.INVALID_HANDLE
    buf._freed = False
    # unchecked: no count or size checks
    assert cuda_backend.pack_args([buf, np.uint64(1)], ffi, expected=(8,), check=False).sizes == (8, 8)


def test_pack_args_hip_matches_cuda() -> None:
    args = [fake_allocation(8, module=hip_backend), np.float32(1.0), np.uint32(9)]
    packed = hip_backend.pack_args(args, hip_backend.HipBackend.vendor_api().ffi)
    assert packed.sizes == (8, 4, 4) and packed.offsets == (0, 8, 12)


# ------------------------------------------------------------------ module formats (pure)

PTX = """//
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 k_param_0) { ret; }
"""


def test_classify_image() -> None:
    c = cuda_backend.classify_image
    assert c(PTX) == "ptx" and c(PTX.encode()) == "ptx"
    assert c(b"\x7fELF\x02\x01\x01" + bytes(64)) == "elf"
    assert c(b"\x50\xed\x55\xba\x01\x00\x10\x00" + bytes(64)) == "fatbin"
    assert c(b"__CLANG_OFFLOAD_BUNDLE__\x02\x00") == "offload_bundle"
    assert c('extern "C" __global__ void k(float *x) { x[0] = 1; }') == "source"
    assert c("// mentions .version in a comment\n__global__ void k() {}") == "source"
    with pytest.raises(Error) as ei:
        c(b"")
    assert ei.value.kind is ErrorKind.INVALID_VALUE
    assert cuda_backend.MODULE_FORMATS == ("ptx", "elf", "fatbin", "source")
    assert hip_backend.MODULE_FORMATS == ("elf", "offload_bundle")


def test_hip_has_no_runtime_compiler() -> None:
    with pytest.raises(Error) as ei:
        hip_backend.compile_source("__global__ void k() {}", "gfx90a")
    assert ei.value.kind is ErrorKind.UNSUPPORTED and "code object" in str(ei.value)


@pytest.mark.parametrize("module, library, function", [(cuda_backend, "driver", "cuLaunchKernel"),
                                                       (hip_backend, "runtime", "hipModuleLaunchKernel")])
def test_the_compiled_launch_is_wired_to_the_launch_role(module: Any, library: str, function: str) -> None:
    """API mode: the backend launches through its library's _fast._launch (the spec's kernel_launch, the
    same function as its launch role); a launch it has no layout for comes back None, the driver untouched
    (test_launch_stub.py and the golden case kernel_launch launch through it for real)."""
    api = gpu.GpuApi(module.TABLES)
    assert module.TABLES.functions["launch"] == (library, function)
    lib = api.modules[library]
    if lib.BINDING_MODE != "api":
        assert api.launch_packed is None
        return
    assert api.launch_packed is sys.modules[f"{lib.__name__}._fast"]._launch
    assert api.launch_packed({}, (np.int32(1),), True, 0, (1, 1, 1, 1, 1, 1, 0), 0) is None


@pytest.mark.parametrize("module, library, functions", [
    (cuda_backend, "driver", ("cuMemAllocFromPoolAsync", "cuMemFreeAsync")),
    (hip_backend, "runtime", ("hipMallocFromPoolAsync", "hipFreeAsync"))])
def test_the_compiled_pool_is_wired_to_the_pool_roles(module: Any, library: str, functions: tuple[str, str]) -> None:
    """API mode: the stream-ordered pool allocates through its library's _fast._pool_alloc (the spec's
    pool_memory, the same functions as its pool_alloc and pool_free roles), into a subclass of both the C
    _PoolMemory and the backend's PoolAllocation (test_pool_stub.py and the golden case pool_memory run it for real)."""
    api = gpu.GpuApi(module.TABLES)
    assert (module.TABLES.functions["pool_alloc"], module.TABLES.functions["pool_free"]) == tuple((library, f) for f in functions)
    lib = api.modules[library]
    if lib.BINDING_MODE != "api":
        assert api.pool_memory is None
        return
    fast = sys.modules[f"{lib.__name__}._fast"]
    assert api.pool_memory is not None
    alloc, base = api.pool_memory
    assert alloc is fast._pool_alloc and base is fast._PoolMemory
    pool_cls = _cls(module, "PoolAllocation")
    cls = gpu_pool._compiled_pool_allocation(api, pool_cls)
    assert gpu_pool._compiled_pool_allocation(api, pool_cls) is cls  # made once per class and api
    assert cls.__mro__[1:3] == (fast._PoolMemory, pool_cls) and cls.__name__ == pool_cls.__name__
    assert issubclass(cls, Allocation) and cls.kind is MemoryKind.DEVICE
    # no pool (a NULL handle): the real library answers with a failure status, or the loader's error where
    # the library is missing (this machine has libamdhip64 without a device, and no CUDA driver)
    try:
        status = alloc(cls, object(), 0, 16, 0, ("device", 0))
    except Error as e:
        assert e.kind in (ErrorKind.LIBRARY_NOT_FOUND, ErrorKind.SYMBOL_NOT_FOUND), e
    else:
        assert type(status) is int and status != 0, status


@pytest.mark.parametrize("module, library, functions", [
    (cuda_backend, "driver", ("cuMemAlloc", "cuMemFree")), (hip_backend, "runtime", ("hipMalloc", "hipFree"))])
def test_the_compiled_device_memory_is_wired_to_the_alloc_roles(module: Any, library: str,
                                                               functions: tuple[str, str]) -> None:
    """API mode: Device.alloc of DEVICE memory allocates through its library's _fast._devmem_allocator (the spec's
    device_memory, the same functions as its alloc and free roles), into a subclass of both the C _DeviceMemory
    and the backend's Allocation whose handle is the native device-pointer type (an int for CUdeviceptr, a
    void * for hipDeviceptr_t, as the Python allocation's); test_devmem_stub.py and the golden case device_memory
    run it for real."""
    from ironaccelerator_runtime.backends.gpu import memory as gpu_memory

    api = gpu.GpuApi(module.TABLES)
    assert (module.TABLES.functions["alloc"], module.TABLES.functions["free"]) == tuple((library, f) for f in functions)
    lib = api.modules[library]
    if lib.BINDING_MODE != "api":
        assert api.device_memory is None
        return
    fast = sys.modules[f"{lib.__name__}._fast"]
    assert api.device_memory is not None
    make, base = api.device_memory
    assert make is fast._devmem_allocator and base is fast._DeviceMemory
    alloc_cls = _cls(module, "Allocation")
    cls: Any = gpu_memory._compiled_device_allocation(api, alloc_cls)
    assert gpu_memory._compiled_device_allocation(api, alloc_cls) is cls  # made once per class and api
    assert cls.__mro__[1:3] == (fast._DeviceMemory, alloc_cls) and cls.__name__ == alloc_cls.__name__
    assert issubclass(cls, Allocation) and cls.kind is MemoryKind.DEVICE

    class Held:
        ptr = 0x7F0000001000

    prop: Any = vars(cls)["handle"]  # (a property of the made class)
    handle = prop.fget(Held())
    if module is cuda_backend:
        assert type(handle) is int and handle == Held.ptr
    else:
        assert api.ffi.typeof(handle) is api.ffi.typeof("void *") and int(api.ffi.cast("uintptr_t", handle)) == Held.ptr
    assert vars(cls)["dptr"] is prop


# ------------------------------------------------------------------ DLPack and the CUDA Array Interface


from dlpack_capsules import Managed as DLManagedTensor  # (the tests' own reader of the DLPack structs)


# private prototypes (ctypes.pythonapi's own attributes are process-wide: never reconfigure them)
GET_POINTER = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
SET_NAME = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", ctypes.pythonapi))
GET_NAME = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
USED = ctypes.create_string_buffer(b"used_dltensor")  # a capsule's name must outlive it


def test_dlpack_capsule_structure_and_lifetime() -> None:
    alloc = fake_allocation(4096)
    capsule = alloc.__dlpack__(stream=-1)  # -1: no synchronisation (there is no device)
    assert type(capsule).__name__ == "PyCapsule" and GET_NAME(capsule) == b"dltensor"
    address = GET_POINTER(capsule, b"dltensor")
    managed = DLManagedTensor.from_address(address)
    t = managed.dl_tensor
    assert t.data == FAKE_PTR
    assert (t.device.device_type, t.device.device_id) == (2, 3) == alloc.__dlpack_device__()
    assert t.ndim == 1 and t.shape[0] == 4096
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (1, 8, 1)  # kDLUInt, 8 bits: uint8
    assert not t.strides and t.byte_offset == 0
    assert managed.deleter
    # the capsule keeps the allocation alive until the consumer calls the deleter
    ref = weakref.ref(alloc)
    del alloc
    gc.collect()
    assert ref() is not None
    assert SET_NAME(capsule, USED) == 0  # what a consumer does on taking ownership ...
    managed.deleter(address)  # ... and, when done, this
    gc.collect()
    assert ref() is None
    del capsule  # renamed: the capsule's destructor must not delete again
    gc.collect()


def test_dlpack_capsule_dropped_unconsumed_releases() -> None:
    alloc = fake_allocation(16, module=hip_backend)
    capsule = alloc.__dlpack__(stream=-1)
    t = DLManagedTensor.from_address(GET_POINTER(capsule, b"dltensor")).dl_tensor
    assert (t.device.device_type, t.device.device_id) == (10, 3)
    ref = weakref.ref(alloc)
    del alloc, t
    gc.collect()
    assert ref() is not None
    del capsule
    gc.collect()
    assert ref() is None
    assert not dlpack.EXPORTER.live


def test_dlpack_versioned_capsule_of_an_allocation() -> None:
    """The allocation's own 1-D uint8 export answers a consumer passing max_version with DLPack 1.x too."""
    alloc = fake_allocation(48)
    info = dlpack_capsules.parse(alloc.__dlpack__(stream=-1, max_version=(1, 0)))
    assert info["name"] == b"dltensor_versioned" and info["version"] == (1, 1) and info["flags"] == 0
    assert info["data"] == FAKE_PTR and info["shape"] == (48,) and info["dtype"] == (1, 8, 1)
    gc.collect()
    assert not dlpack.EXPORTER.live  # dropped unconsumed: deleted
    with pytest.raises(BufferError):
        alloc.__dlpack__(stream=0)  # CUDA: 0 is ambiguous, the protocol forbids it


def test_dlpack_refusals() -> None:
    alloc = fake_allocation(16)
    with pytest.raises(BufferError):
        alloc.__dlpack__(stream=-1, copy=True)
    with pytest.raises(BufferError):
        alloc.__dlpack__(stream=-1, dl_device=(1, 0))
    alloc._freed = True
    with pytest.raises(Error) as ei:
        alloc.__dlpack__(stream=-1)
    assert ei.value.kind is ErrorKind.INVALID_HANDLE


def test_cuda_array_interface() -> None:
    alloc = fake_allocation(1000)
    assert alloc.__cuda_array_interface__ == {"shape": (1000,), "typestr": "|u1", "data": (FAKE_PTR, False),
                                              "version": 3, "strides": None, "stream": None}
    h = fake_allocation(8, module=hip_backend)
    assert not hasattr(h, "__cuda_array_interface__")  # only where the spec's interop lists it


# ------------------------------------------------------------------ NVRTC (the library is a pip wheel)

VECTOR_ADD = r"""
extern "C" __global__ void vector_add(const float *a, const float *b, float *c, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""


@pytest.fixture(scope="module")
def nvrtc_available() -> None:
    from ironaccelerator.backends.cuda import nvrtc
    if not nvrtc.has("nvrtcVersion"):
        pytest.skip("libnvrtc not found (pip install nvidia-cuda-nvrtc)")


def test_nvrtc_compiles_to_ptx_for_compute_90(nvrtc_available: None) -> None:
    assert cuda_backend.compiler_version() >= (12, 0)
    ptx = cuda_backend.compile_source(VECTOR_ADD, "compute_90").decode()
    assert re.search(r"^\.target sm_90\b", ptx, re.M), ptx[:400]
    assert ".visible .entry vector_add(" in ptx
    assert cuda_backend.classify_image(ptx) == "ptx"
    cubin = cuda_backend.compile_source(VECTOR_ADD, "sm_90", binary=True)
    assert cuda_backend.classify_image(cubin) == "elf"


def test_nvrtc_compile_error_carries_the_build_log(nvrtc_available: None) -> None:
    with pytest.raises(Error) as ei:
        cuda_backend.compile_source('extern "C" __global__ void broken(float *x) { x[0] = ; }', "compute_90")
    err = ei.value
    assert err.kind is ErrorKind.COMPILE_FAILED and err.backend == "CUDA"
    assert "build log" in str(err) and "expected an expression" in str(err)


# ------------------------------------------------------------------ loading without a driver / a device


def test_import_loads_no_library() -> None:
    code = ("import ironaccelerator.backends.cuda._backend, ironaccelerator.backends.hip._backend\n"
            "from ironaccelerator.backends.cuda.driver._binding import BINDING as d\n"
            "from ironaccelerator.backends.cuda.nvrtc._binding import BINDING as n\n"
            "from ironaccelerator.backends.hip.runtime._binding import BINDING as h\n"
            "assert d.path is None and n.path is None and h.path is None, (d.path, n.path, h.path)\n")
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(GENERATED)},
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.skipif(bool(ctypes.util.find_library("cuda")), reason="a CUDA driver is installed")
def test_cuda_backend_without_driver_is_library_not_found() -> None:
    with pytest.raises(Error) as ei:
        cuda_backend.CudaBackend()
    err = ei.value
    assert err.kind is ErrorKind.LIBRARY_NOT_FOUND and err.backend == "CUDA"
    assert "libcuda.so.1" in str(err) and "libcuda.so" in str(err)
    with pytest.raises(Error) as ei:
        BackendRegistry.default().get(BackendKind.CUDA)
    assert ei.value.kind is ErrorKind.LIBRARY_NOT_FOUND
    line = next(x for x in BackendRegistry.default().report() if x.startswith("CUDA:"))
    assert line.startswith("CUDA: unavailable:") and "tried libcuda.so.1" in line, line


@pytest.fixture(scope="module")
def hip_runtime() -> Any:
    from ironaccelerator.backends.hip import runtime
    if not runtime.has("hipGetDeviceCount"):
        pytest.skip("libamdhip64 not found")
    return runtime


def test_hip_library_loads_and_reports_the_runtime_version(hip_runtime: Any) -> None:
    backend = hip_backend.HipBackend()
    v = backend.runtime_version()
    assert isinstance(v, int) and 50_000_000 <= v < 100_000_000, v  # HIP_VERSION: major * 10^7 + minor * 10^5 + patch
    out = hip_runtime.ffi.new("int *")
    assert hip_runtime.unchecked.hipRuntimeGetVersion(out) == 0 and out[0] == v
    assert hip_runtime.hipRuntimeGetVersion() == v  # the checked wrapper
    assert isinstance(backend.driver_version(), int)


def test_hip_loader_tries_the_library_of_the_headers_major_first() -> None:
    """specs/hip/runtime.yaml names "libamdhip64.so.{major}": generated from HIP 5.2 headers, .so.5 comes first (and
    no other major's soname is tried); the unversioned fallback is guarded by abi_major."""
    from ironaccelerator.backends.hip import runtime
    from ironaccelerator.backends.hip.runtime._binding import BINDING
    assert '"libamdhip64.so.{major}"' in (SPECS / "hip" / "runtime.yaml").read_text(encoding="utf-8")
    major = int(runtime.SDK_VERSION.split(".")[0])
    names = BINDING.loader[0]
    assert names["linux"] == (f"libamdhip64.so.{major}", "libamdhip64.so"), names
    assert names["windows"] == (f"amdhip64_{major}.dll", "amdhip64.dll"), names
    a = BINDING.abi_major
    assert a is not None and (a.function, a.encoding, a.major) == ("hipRuntimeGetVersion", (10_000_000, 100_000), major)


def test_hip_library_of_the_headers_major_passes_the_guard(hip_runtime: Any) -> None:
    from ironaccelerator.backends.hip.runtime._binding import BINDING
    assert BINDING.path is not None and BINDING.refused == [], (BINDING.path, BINDING.tried)
    assert BINDING.abi_major is not None
    assert hip_runtime.hipRuntimeGetVersion() // 10_000_000 == BINDING.abi_major.major


# each mode in its own interpreter (a process opens the library once): the bindings claim headers of the next
# major, so the real libamdhip64 (5.x) stands for a library of another major than the headers'
_HIP_OTHER_MAJOR = """
import sys
mode, chosen = sys.argv[1], sys.argv[2:]
if mode == "abi":
    sys.modules["ironaccelerator.backends.hip.runtime._cffi"] = None
import ironaccelerator.backends.hip.runtime as h
from ironaccelerator.backends.hip.runtime._binding import BINDING as B
from ironaccelerator import BackendRegistry, BackendKind, Error, ErrorKind
from ironaccelerator.backends.hip import _backend
assert h.BINDING_MODE == mode, h.BINDING_MODE
real = B.abi_major.major
B.abi_major.major, B.sdk_version = real + 1, f"{real + 1}.0"
if chosen:
    B.use_library(*chosen)
try:
    _backend.HipBackend()
except Error as e:
    assert e.kind is ErrorKind.LIBRARY_NOT_FOUND, e
    msg = str(e)
else:
    raise SystemExit("HipBackend() opened a library of another major")
assert not h.has("hipMalloc") and B.path is None and B.refused, B.refused
try:
    h.hipRuntimeGetVersion()
except Error as e:
    assert e.kind is ErrorKind.LIBRARY_NOT_FOUND and e.function == "hipRuntimeGetVersion", e
else:
    raise SystemExit("hipRuntimeGetVersion was called in a refused library")
line = next(x for x in BackendRegistry.default().report() if x.startswith("ROCM:"))
assert line.startswith("ROCM: unavailable: "), line
print(msg)
"""


@pytest.mark.parametrize("mode", ["api", "abi"])
@pytest.mark.parametrize("chosen", [(), ("libamdhip64.so",)], ids=["search", "use_library"])
def test_hip_library_of_another_major_is_refused(hip_runtime: Any, mode: str, chosen: tuple[str, ...]) -> None:
    """The guard: a libamdhip64 whose hipRuntimeGetVersion has another major than the headers' is not used (its
    enum values and struct layouts differ: ROCm 6 renumbered hipMemoryType); the backend is unavailable, saying
    which versions and to regenerate."""
    r = subprocess.run([sys.executable, "-c", _HIP_OTHER_MAJOR, mode, *chosen], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(GENERATED)}, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    msg = r.stdout.strip().splitlines()[-1]
    real = hip_runtime.hipRuntimeGetVersion()
    found = f"{real // 10_000_000}.{real % 10_000_000 // 100_000}"
    major = real // 10_000_000 + 1
    assert re.match(r"\w+: cannot use the ROCM runtime library: ", msg), msg
    assert f"generated from ROCM {major}.0 headers" in msg and f"(version {found})" in msg, msg
    assert "run `make generate` against that library's SDK (found through ROCM_PATH or HIP_PATH)" in msg, msg
    assert f"install a ROCM {major}.x library" in msg, msg
    assert f"from hipRuntimeGetVersion: major {major - 1}, not the headers' {major}" in msg, msg
    if chosen:
        assert "tried libamdhip64.so (version" in msg and "libamdhip64.so." not in msg, msg


def test_hip_without_a_device_is_no_device(hip_runtime: Any) -> None:
    out = hip_runtime.ffi.new("int *")
    if hip_runtime.unchecked.hipGetDeviceCount(out) == 0 and out[0] > 0:
        pytest.skip("a ROCm device is present")
    with pytest.raises(Error) as ei:
        hip_runtime.hipGetDeviceCount()
    assert ei.value.kind is ErrorKind.NO_DEVICE and ei.value.code == hip_runtime.hipErrorNoDevice
    backend = hip_backend.HipBackend()
    assert backend.devices() == []  # a loaded library with no device: zero devices
    with pytest.raises(Error) as ei:
        backend.open(0)
    assert ei.value.kind is ErrorKind.NO_DEVICE and "hipErrorNoDevice" in str(ei.value)
    report = BackendRegistry.default().report()
    assert "ROCM: library loaded, 0 devices" in report, report


def test_hip_symbols_the_library_lacks_fail_at_call_time(hip_runtime: Any) -> None:
    from ironaccelerator.backends.hip.runtime import _binding
    missing = [f for f, *_ in _binding.FUNCTIONS if not hip_runtime.has(f)]
    if not missing:
        pytest.skip("this libamdhip64 exports every function of the headers")
    name = missing[0]
    ffi = hip_runtime.ffi
    binding = _binding.BINDING
    raw = getattr(hip_runtime.unchecked, name, None) if binding.mode == "api" else None
    if raw is not None:  # API mode: the trampoline answers the sentinel; the error factory explains it
        args = [ffi.NULL if t.kind == "pointer" else 0 for t in ffi.typeof(raw).args]
        code = raw(*args)
        assert code == binding.sentinel
        err = binding.error(code, binding.index[name])
        assert err.kind is ErrorKind.SYMBOL_NOT_FOUND and name in str(err)
    checked = getattr(hip_runtime, name)
    # the annotations are the Python wrapper's (a compiled fast path's text signature has none)
    python = hip_runtime._python.get(name, checked)
    kwargs = {p: (0 if a == "int" else ffi.NULL) for p, a in
              ((p.name, str(p.annotation)) for p in inspect.signature(python).parameters.values())}
    with pytest.raises(Error) as ei:
        checked(**kwargs)
    assert ei.value.kind is ErrorKind.SYMBOL_NOT_FOUND and ei.value.function == name


# ------------------------------------------------------------------ the generator's checks of backend specs


def _spec_dir(tmp_path: Path, vendor: str, old: str, new: str) -> Path:
    specs = tmp_path / "specs"
    shutil.copytree(SPECS, specs)
    p = specs / vendor / "backend.yaml"
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new, 1))
    return specs


def _errors(specs: Path, only: str = "hip.runtime") -> list[str]:
    with pytest.raises(UserError) as ei:
        pipeline.compile_specs(specs, only=[only], base=specs.parent)
    return [str(d) for d in ei.value.diagnostics]


def _line(specs: Path, vendor: str, needle: str) -> int:
    return next(i for i, line in enumerate((specs / vendor / "backend.yaml").read_text().splitlines(), 1)
                if needle in line)


@pytest.fixture(scope="module")
def hip_headers() -> None:
    from ironaccelerator_gen import sdk
    if sdk.find("hip", None, "hip/hip_runtime_api.h") is None:
        pytest.skip("HIP headers not installed")


def test_generator_refuses_an_unknown_function(tmp_path: Path, hip_headers: None) -> None:
    specs = _spec_dir(tmp_path, "hip", "  host_free: hipHostFree\n", "  host_free: hipHostFre\n")
    errors = _errors(specs)
    line = _line(specs, "hip", "host_free: hipHostFre")
    assert any(e.startswith(f"specs/hip/backend.yaml:{line}:14:") and "'hipHostFre' (function role 'host_free') is "
               "not a function of hip.runtime (did you mean 'hipHostFree'?)" in e for e in errors), errors


def test_generator_refuses_unknown_constants_and_types(tmp_path: Path, hip_headers: None) -> None:
    specs = _spec_dir(tmp_path, "hip", "  stream_flags: hipStreamNonBlocking\n  event_flags: hipEventDefault",
                      "  stream_flags: hipStreamNonBlockin\n  event_flags: hipEventDefault")
    p = specs / "hip" / "backend.yaml"
    p.write_text(p.read_text().replace("  stream: hipStream_t\n", "  stream: hipStreem_t\n"))
    errors = _errors(specs)
    assert any("'hipStreamNonBlockin' (constant role 'stream_flags')" in e and "did you mean 'hipStreamNonBlocking'" in e
               for e in errors), errors
    assert any(f"backend.yaml:{_line(specs, 'hip', 'hipStreem_t')}:" in e and "'hipStreem_t' (type role 'stream')" in e
               and "did you mean 'hipStream_t'" in e for e in errors), errors


def test_generator_refuses_missing_and_unused_roles(tmp_path: Path, hip_headers: None) -> None:
    specs = _spec_dir(tmp_path, "hip", "  stream_query: hipStreamQuery\n", "  stream_qeury: hipStreamQuery\n")
    errors = _errors(specs)
    assert any("ironaccelerator_runtime.backends.gpu needs the function role 'stream_query'" in e for e in errors), errors
    specs2 = _spec_dir(tmp_path / "2", "hip", "  host_free: hipHostFree\n",
                       "  host_free: hipHostFree\n  host_frees: hipHostFree\n")
    errors = _errors(specs2)
    line = _line(specs2, "hip", "host_frees: hipHostFree")
    assert any(e.startswith(f"specs/hip/backend.yaml:{line}:3:") and "function role 'host_frees' is not used by "
               "ironaccelerator_runtime.backends.gpu (did you mean 'host_free'?)" in e for e in errors), errors


def test_every_annotation_of_the_gpu_package_resolves() -> None:
    """Each module of backends/gpu/ resolves the names its annotations use at run time, as the one module it was
    split from did: the docs' signatures (autodoc) and operations.py (the return annotations of the methods that
    make objects) evaluate them in the module's globals."""
    import typing

    checked = 0
    for info in pkgutil.iter_modules(gpu.__path__):
        module = importlib.import_module(f"{gpu.__name__}.{info.name}")
        for obj in list(vars(module).values()):
            if getattr(obj, "__module__", None) != module.__name__:
                continue
            members = [obj] if inspect.isfunction(obj) else []
            if isinstance(obj, type):
                typing.get_type_hints(obj)  # its class-level annotations
                for value in vars(obj).values():
                    fn = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
                    if inspect.isfunction(fn):
                        members.append(inspect.unwrap(fn))
            for fn in members:
                typing.get_type_hints(fn)  # NameError for a name only imported for type checking
                checked += 1
    assert checked > 150, checked


def test_a_runtime_package_is_a_runtime(tmp_path: Path, hip_headers: None) -> None:
    """``runtime: gpu`` names the package backends/gpu/: a misspelt name is refused with it as the suggestion."""
    specs = _spec_dir(tmp_path, "hip", "runtime: gpu ", "runtime: gpuu ")
    errors = _errors(specs)
    assert any(f"backend.yaml:{_line(specs, 'hip', 'runtime: gpuu')}:" in e and "'gpuu' is not a module of "
               "ironaccelerator_runtime.backends (runtime/ironaccelerator_runtime/backends/) (did you mean 'gpu'?)" in e
               for e in errors), errors


@pytest.mark.parametrize("role, function", [("launch", "hipModuleLaunchKernel"), ("launch", "hipLaunchKernel"),
                                            ("pool_free", "hipFree"), ("free", "hipFree"),
                                            ("alloc", "hipMalloc")])
def test_compiled_path_functions_are_stated_once(tmp_path: Path, hip_headers: None, role: str, function: str) -> None:
    """launch / pool_alloc / pool_free / alloc / free come from the library spec's kernel_launch / pool_memory /
    device_memory; stating one
    in the backend spec as well (the same function or another, which would silently turn the compiled path
    off) is a located error pointing at the library spec's statement."""
    specs = _spec_dir(tmp_path, "hip", "  host_free: hipHostFree\n", f"  host_free: hipHostFree\n  {role}: {function}\n")
    errors = _errors(specs)
    line = _line(specs, "hip", f"  {role}: {function}")
    runtime = (specs / "hip" / "runtime.yaml").read_text().splitlines()
    what = {"launch": "kernel_launch", "pool_free": "pool_memory free"}.get(role, f"device_memory {role}")
    key = {"launch": "kernel_launch:", "pool_free": "pool_memory:"}.get(role, "device_memory:")
    lib_line = next(i for i, text in enumerate(runtime, 1) if text.startswith(key))
    assert any(e.startswith(f"specs/hip/backend.yaml:{line}:3: function role '{role}' is stated by hip.runtime's "
                            f"{what} (") and f"specs/hip/runtime.yaml:{lib_line}:" in e
               and "the library spec states it once" in e for e in errors), errors


def test_generator_refuses_bad_capability_keys_and_formats(tmp_path: Path) -> None:
    specs = _spec_dir(tmp_path, "cuda", '    "5.3": [FP16]', '    "sm53": [FP16]')
    p = specs / "cuda" / "backend.yaml"
    p.write_text(p.read_text().replace("module_formats: [ptx, elf, fatbin, source]",
                                       "module_formats: [ptx, elf, fatbin, sourse]"))
    errors = _errors(specs, only="cuda.nvrtc")  # load_backend's own checks need no headers
    assert any("flags key 'sm53' is not a compute capability" in e for e in errors), errors
    assert any("'sourse' is not a module format (did you mean 'source'?)" in e for e in errors), errors


# ------------------------------------------------------------------ the rendered modules


def test_the_runtime_reads_the_roles_it_declares() -> None:
    """SPEC_ROLES (what the generator renders) and GpuApi's attributes (what the runtime calls) are one list;
    the generator reads the same literal the runtime holds (in the gpu package's tables module, found by
    reading the package); every condition names a function role."""
    from generator.surface import runtime_path, runtime_roles
    functions = gpu.SPEC_ROLES["functions"]
    assert list(functions) == [name for name, t in gpu.GpuApi.__annotations__.items() if t == "Any"]
    assert runtime_path("gpu") == Path(gpu.__file__).parent
    assert runtime_roles(Path(gpu.__file__).parent) == gpu.SPEC_ROLES
    for declared in gpu.SPEC_ROLES.values():
        assert all(not when or when.lstrip("!") in functions for when in declared.values()), declared
    for module in (cuda_backend, hip_backend):  # each vendor's tables hold exactly the roles it needs
        t = module.TABLES
        tables: tuple[tuple[str, dict[str, Any]], ...] = (("functions", t.functions), ("constants", t.constants),
                                                          ("types", t.types))
        for section, table in tables:
            need = [r for r, when in gpu.SPEC_ROLES[section].items()
                    if not when or (t.functions.get(when.lstrip("!")) is None) == when.startswith("!")]
            assert list(table) == need, (module.__name__, section)


def _tables(**changes: Any) -> gpu.GpuTables:
    """A vendor's tables without its compiler, runtime version or contexts (HIP's), changed."""
    import dataclasses
    return dataclasses.replace(hip_backend.TABLES, **changes)


def test_runtime_capability_tables_both_matches() -> None:
    cc = _tables(match="compute_capability", flags={"always": F.FP64, "7.0": F.TENSOR_CORES, "8.9": F.FP8},
                 tiers={"default": ComputeTier.DISCRETE, "9.0": ComputeTier.DATACENTER,
                        "name Tesla": ComputeTier.DATACENTER, "integrated": ComputeTier.INTEGRATED},
                 vendors=(("default", Vendor.NVIDIA),))
    h100 = cc.capability("9.0", "H100")
    assert h100.flags == F.FP64 | F.TENSOR_CORES | F.FP8 and h100.tier is ComputeTier.DATACENTER
    assert h100.vendor_version == "sm_90"
    assert cc.capability("7.5", "Tesla T4").tier is ComputeTier.DATACENTER  # by name
    assert cc.capability("8.7", "Orin", integrated=True).tier is ComputeTier.INTEGRATED
    assert cc.capability("6.1", "GTX 1080").flags == F.FP64 and cc.vendor("anything") is Vendor.NVIDIA
    arch = _tables(flags={"always": F.FP16, "gfx9": F.INT8_DOT, "gfx90a": F.BF16},
                   tiers={"default": ComputeTier.DISCRETE, "gfx9": ComputeTier.INTEGRATED,
                          "gfx90a": ComputeTier.DATACENTER})
    mi210 = arch.capability("gfx90a:sramecc+:xnack-")
    assert mi210.flags == F.FP16 | F.INT8_DOT | F.BF16 and mi210.tier is ComputeTier.DATACENTER  # longest prefix
    assert arch.capability("gfx906").tier is ComputeTier.INTEGRATED and arch.capability("").vendor_version == "unknown"
    with pytest.raises(KeyError):
        arch.const("status_unsupported_ptx")  # a role this vendor does not need is not in its tables


def test_runtime_null_roles_are_runtime_branches() -> None:
    """A role the vendor lacks is None in the tables and in GpuApi, and the runtime refuses (or skips) what
    needs it, with no library loaded: no compiler, no parameter info, no runtime version, no contexts."""
    api = gpu.GpuApi(_tables())
    assert api.program_create is None and api.param_info is None and api.context_retain is None
    assert api.init is None and api.set_device is not None and api.compiler_ffi is None
    for call in (lambda: gpu.compile_source(api, "__global__ void k() {}", "gfx90a"),
                 lambda: gpu.compiler_version(api)):
        with pytest.raises(Error) as ei:
            call()
        assert ei.value.kind is ErrorKind.UNSUPPORTED and ei.value.backend == "ROCM"
    assert gpu_module._param_sizes(api, None) is None
    ref = gpu_context._ContextRef(api, 0)
    assert ref.context is None  # nothing retained, nothing to release
    no_launch = gpu.GpuApi(_tables(launch_max_args=0, launch_max_bytes=0, compiled_pool=False))
    assert no_launch.launch_packed is None and no_launch.pool_memory is None


def test_both_backends_render_from_the_one_template() -> None:
    for vendor, prefix in (("cuda", "Cuda"), ("hip", "Hip")):
        text = (GENERATED / "ironaccelerator" / "backends" / vendor / "_backend.py").read_text()
        assert "Rendered from ``templates/backends/gpu.py.j2``" in text
        for cls in ("Backend", "Device", "Allocation", "Stream", "Event", "Module", "Kernel"):
            assert f"class {prefix}{cls}(" in text
    from ironaccelerator._core import BUILTIN_BACKENDS
    assert BUILTIN_BACKENDS[BackendKind.CUDA] == "ironaccelerator.backends.cuda._backend:CudaBackend"
    assert BUILTIN_BACKENDS[BackendKind.ROCM] == "ironaccelerator.backends.hip._backend:HipBackend"
    assert (ROOT / "templates" / "backends" / "gpu.py.j2").is_file()


# ------------------------------------------------------------------ a simulated driver (CPU)
#
# The real backend classes over a fake role table: every vendor function is a Python function with
# the C function's argument shape, and host memory stands in for device memory.  This drives the
# runtime's own logic (enumeration, contexts, allocation kinds, copies, argument packing, launches,
# events, modules, finalizers, the pool, DLPack) on a machine without a GPU.


class FakeDriver:
    """What the fake functions share: memory, handles, kernels and a call log."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.ffi = _cls(module, "Backend").vendor_api().ffi
        self.mem: dict[int, Any] = {}
        self.freed: list[Any] = []  # the buffers of freed allocations, kept (never reused)
        self.next_handle = 0x1000
        self.events: dict[int, float] = {}
        self.recorded: dict[int, int] = {}  # event -> the stream it was last recorded on
        self.waits: list[tuple[int, int]] = []  # (stream, event) of each stream_wait_event
        self.calls: list[str] = []
        self.busy_queries = 0  # how many stream/event queries answer NOT_READY first
        self.event_failure = 0  # what event_synchronize answers
        self.pool_limit = 1 << 40  # bytes a stream-ordered pool may reserve before it answers out-of-memory
        self.kernels: dict[str, tuple[tuple[int, ...], Callable[[Any, Any, Any], int]]] = {
            "vector_add": ((8, 8, 8, 4), self._vector_add)}
        self.functions: dict[int, str] = {}
        self.pools_supported = 0  # the device attribute; the stream-ordered pool tests set it
        self.pools: dict[int, dict[str, Any]] = {}  # handle -> reserved/used bytes, cached blocks
        self.cooperative_supported = 1  # CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH (an H200 has it)
        self.clusters_supported = 1  # CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH (compute capability 9.0)
        self.max_coresident = 132 * 8  # a cooperative grid of more blocks: CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
        # launch_ex (cuLaunchKernelEx): each config as it was received, field by field, with its attributes
        self.launches_ex: list[dict[str, Any]] = []
        # IPC: a handle's 64 bytes name an address (b"IPC!" + address); what is open (address -> opens), closes
        self.ipc_open: dict[int, int] = {}
        self.ipc_closed: list[int] = []
        # stream capture, as the drivers do it: work enqueued on a capturing stream is recorded (a launch's
        # parameter values copied then), not run; a graph replays it in order
        self.capturing: dict[int, list[Callable[[], int]]] = {}
        self.graphs: dict[int, list[Callable[[], int]]] = {}
        self.execs: dict[int, list[Callable[[], int]]] = {}
        self.rects: list[tuple[Any, ...]] = []  # (3-D?, width, height, depth, (src pitch, slice), (dst pitch, slice))
        self.prefetches: list[tuple[int, int, int | str, int]] = []  # (address, bytes, device or "host", stream)

    def handle(self, ctype: str) -> Any:
        self.next_handle += 0x10
        return self.ffi.cast(ctype, self.next_handle)

    def key(self, h: Any) -> int:
        return h if isinstance(h, int) else int(self.ffi.cast("uintptr_t", h))

    def _vector_add(self, grid: tuple[int, ...], block: tuple[int, ...], params: Any) -> int:
        ffi = self.ffi
        a, b, c = (ffi.cast("uint64_t *", params[i])[0] for i in range(3))
        n = ffi.cast("uint32_t *", params[3])[0]
        m = min(n, grid[0] * block[0])  # only the threads launched do work

        def view(addr: Any) -> np.ndarray[Any, np.dtype[np.float32]]:
            return np.frombuffer(ffi.buffer(ffi.cast("float *", addr), 4 * m), np.float32)

        view(c)[:] = view(a) + view(b)
        return 0

    def api(self) -> Any:
        m, ffi, d = self.module, self.ffi, self
        api: Any = gpu.GpuApi(m.TABLES)  # the real bindings (error factory) ...
        api.require = lambda role: None  # ... but every library "loads"
        api.launch_packed = None  # the compiled launch calls the real driver (test_launch_stub.py tests it)
        api.pool_memory = None  # so does the compiled pool allocation (test_pool_stub.py tests it)
        api.device_memory = None  # and the compiled device memory (test_devmem_stub.py tests it)
        C, T = m.TABLES.constants, m.TABLES.types
        attrs = {C["attr_compute_units"]: 132, C["attr_max_block_x"]: 1024, C["attr_max_block_y"]: 1024,
                 C["attr_max_block_z"]: 64, C["attr_max_grid_x"]: 2**31 - 1, C["attr_max_grid_y"]: 65535,
                 C["attr_max_grid_z"]: 65535, C["attr_max_threads_per_block"]: 1024, C["attr_max_shared_mem"]: 48 << 10,
                 C["attr_integrated"]: 0}
        if "attr_compute_major" in C:
            attrs.update({C["attr_compute_major"]: 9, C["attr_compute_minor"]: 0})
        pools_attr = C.get("attr_memory_pools_supported")
        if "attr_cooperative_launch" in C:
            attrs[C["attr_cooperative_launch"]] = -1  # (read from the driver object: the tests change it)
            attrs[C["attr_cluster_launch"]] = -2
        name = b"NVIDIA H200" if m is cuda_backend else b"AMD Instinct MI210"

        def log(fn: Any) -> Any:
            def call(*args: Any) -> Any:
                d.calls.append(fn.__name__)
                return fn(*args)
            call.__name__ = fn.__name__
            return call

        def init(flags: int) -> int: return 0
        def driver_version(out: Any) -> int: out[0] = 13000; return 0
        def runtime_version(out: Any) -> int: out[0] = 60300000; return 0
        def device_count(out: Any) -> int: out[0] = 1; return 0
        def device_get(out: Any, i: int) -> int: out[0] = i; return 0
        def device_name(buf: Any, n: int, dev: Any) -> int: ffi.memmove(buf, name + b"\0", len(name) + 1); return 0
        def device_total_mem(out: Any, dev: Any) -> int: out[0] = 141 << 30; return 0
        def device_attribute(out: Any, attr: int, dev: Any) -> int:
            v = d.pools_supported if attr == pools_attr else attrs[attr]
            out[0] = {-1: d.cooperative_supported, -2: d.clusters_supported}.get(v, v); return 0
        def device_properties(props: Any, index: int) -> int:
            arch = b"gfx90a:sramecc+:xnack-\0"
            ffi.memmove(props.gcnArchName, arch, len(arch))
            return 0
        def context_retain(out: Any, dev: Any) -> int: out[0] = d.handle("CUcontext"); return 0
        def context_release(dev: Any) -> int: return 0
        def context_set_current(ctx: Any) -> int: return 0
        def set_device(i: int) -> int: return 0
        def device_synchronize() -> int: return 0

        def _alloc(out: Any, n: int, kind: str) -> int:
            if n < 0:
                raise OverflowError("can't convert negative int to unsigned")  # as cffi does for a size_t
            if n > 1 << 40:
                return 2  # CUDA_ERROR_OUT_OF_MEMORY, hipErrorOutOfMemory
            buf = ffi.new("char[]", n)
            addr = int(ffi.cast("uintptr_t", buf))
            d.mem[addr] = (buf, kind)
            out[0] = addr if "*" not in ffi.typeof(out).item.cname else ffi.cast("void *", addr)
            return 0
        def alloc(out: Any, n: int) -> int: return _alloc(out, n, "device")
        def host_alloc(out: Any, n: int, flags: int) -> int: return _alloc(out, n, "host")
        def managed_alloc(out: Any, n: int, flags: int) -> int: return _alloc(out, n, "managed")
        def _free(p: Any, kinds: tuple[str, ...]) -> int:
            entry = d.mem.pop(d.key(p), None)
            if entry is not None:
                d.freed.append(entry)  # (kept: work run on freed memory writes only these buffers)
            return 0 if entry is not None and entry[1] in kinds else 1  # 1: *_INVALID_VALUE
        def free(p: Any) -> int: return _free(p, ("device", "managed"))
        def host_free(p: Any) -> int: return _free(p, ("host",))
        def _run(s: Any, op: Callable[[], int]) -> int:
            recorded = d.capturing.get(d.key(s)) if s is not None else None
            if recorded is None:
                return op()
            recorded.append(op)
            return 0
        def _moved(dst: Any, src: Any, n: int) -> int:
            ffi.memmove(dst, src, n); return 0
        def memcpy_htod(dst: Any, src: Any, n: int, s: Any) -> int:
            return _run(s, lambda: _moved(ffi.cast("void *", dst), src, n))
        def memcpy_dtoh(dst: Any, src: Any, n: int, s: Any) -> int:
            return _run(s, lambda: _moved(dst, ffi.cast("void *", src), n))
        def memcpy_dtod(dst: Any, src: Any, n: int, s: Any) -> int:
            return _run(s, lambda: _moved(ffi.cast("void *", dst), ffi.cast("void *", src), n))
        def _inside(addr: int, n: int, kinds: tuple[str, ...] = ("device", "host", "managed", "pool")) -> bool:
            """Whether [addr, addr + n) lies in one live allocation (of one of ``kinds``), as the drivers check."""
            return any(base <= addr and addr + n <= base + len(e[0]) and e[1] in kinds for base, e in d.mem.items())
        def _rect(p: Any, three: bool) -> int | Callable[[], int]:
            """cuMemcpy2D/3DAsync, hipMemcpyParam2DAsync, hipDrvMemcpy3DAsync: the struct read at the call (as the
            drivers do), its rows moved when the stream runs; a device side's rows must lie in an allocation."""
            w, h, depth = p.WidthInBytes, p.Height, p.Depth if three else 1
            sides = {}
            for side in ("src", "dst"):
                host = getattr(p, side + "MemoryType") == C["memory_type_host"]
                if getattr(p, side + "MemoryType") not in (C["memory_type_host"], C["memory_type_device"]):
                    return 1
                ptr = getattr(p, side + ("Host" if host else "Device"))
                pitch = getattr(p, side + "Pitch")
                slab = pitch * (getattr(p, side + "Height") if three else h)
                assert getattr(p, side + "XInBytes") == getattr(p, side + "Y") == 0  # offsets are in the pointers
                if pitch < w:
                    return 1  # *_INVALID_VALUE (CUDA: and hipErrorInvalidPitchValue)
                base = d.key(ptr)
                if not host and not _inside(base, (depth - 1) * slab + (h - 1) * pitch + w):
                    return 1
                sides[side] = (base, pitch, slab)
            d.rects.append((three, w, h, depth, sides["src"][1:], sides["dst"][1:]))
            def run() -> int:
                (s0, sp, ss), (d0, dp, ds) = sides["src"], sides["dst"]
                for z in range(depth):
                    for y in range(h):
                        ffi.memmove(ffi.cast("char *", d0 + z * ds + y * dp), ffi.cast("char *", s0 + z * ss + y * sp), w)
                return 0
            return run
        def memcpy_2d(p: Any, s: Any) -> int:
            op = _rect(p, False)
            return op if isinstance(op, int) else _run(s, op)
        def memcpy_3d(p: Any, s: Any) -> int:
            op = _rect(p, True)
            return op if isinstance(op, int) else _run(s, op)
        def prefetch_location(ptr: Any, n: int, loc: Any, flags: int, s: Any) -> int:
            if not _inside(d.key(ptr), n, ("managed",)) or flags:
                return 1
            d.prefetches.append((d.key(ptr), n, "host" if loc.type == C["location_host"] else loc.id, d.key(s)))
            assert loc.type in (C["location_host"], C["location_device"])
            return 0
        def prefetch(ptr: Any, n: int, device: int, s: Any) -> int:
            if not _inside(d.key(ptr), n, ("managed",)):
                return 1
            d.prefetches.append((d.key(ptr), n, "host" if device == C["cpu_device_id"] else device, d.key(s)))
            return 0
        def capture_begin(s: Any, mode: int) -> int:
            assert mode == C["capture_mode"]
            d.capturing[d.key(s)] = []; return 0
        def capture_end(s: Any, out: Any) -> int:
            ops = d.capturing.pop(d.key(s), None)
            if ops is None:
                return 1  # not capturing: *_INVALID_VALUE (the drivers: ..._ILLEGAL_STATE)
            out[0] = d.handle(T["graph"]); d.graphs[d.key(out[0])] = ops; return 0
        def graph_instantiate(out: Any, g: Any, flags: int) -> int:
            out[0] = d.handle(T["graph_exec"]); d.execs[d.key(out[0])] = d.graphs[d.key(g)]; return 0
        def graph_launch(e: Any, s: Any) -> int:
            for op in d.execs[d.key(e)]:
                code = op()
                if code:
                    return code
            return 0
        def graph_destroy(g: Any) -> int: d.graphs.pop(d.key(g)); return 0
        def graph_exec_destroy(e: Any) -> int: d.execs.pop(d.key(e)); return 0
        def _memset(dst: Any, value: int, count: int, width: int, fmt: str) -> int:
            import struct
            ffi.buffer(ffi.cast("char *", dst), count * width)[:] = struct.pack(f"<{fmt}", value) * count
            return 0
        def memset_d8(dst: Any, value: int, count: int, s: Any) -> int:
            return _run(s, lambda: _memset(dst, value, count, 1, "B"))
        def memset_d16(dst: Any, value: int, count: int, s: Any) -> int:
            return _run(s, lambda: _memset(dst, value, count, 2, "H"))
        def memset_d32(dst: Any, value: int, count: int, s: Any) -> int:
            if m is hip_backend and value > 2**31 - 1:
                raise OverflowError("int too big to convert")  # hipMemsetD32Async's value is an int, as cffi says
            return _run(s, lambda: _memset(dst, value, count, 4, "i" if value < 0 else "I"))
        func_attrs = {C["func_max_threads"]: 768, C["func_shared"]: 4096, C["func_const"]: 64, C["func_local"]: 16,
                      C["func_regs"]: 40, C["func_max_dynamic_shared"]: 48 << 10}
        attrs[C["attr_warp_size"]] = 32 if m is cuda_backend else 64
        def occupancy(out: Any, f: Any, threads: int, shared: int) -> int:
            d.functions[d.key(f)]
            out[0] = max(0, min(2048 // threads, 32) - shared // 16384); return 0  # an H100-like rule
        def func_attribute(out: Any, attr: int, f: Any) -> int:
            d.functions[d.key(f)]  # (a function of a loaded module)
            out[0] = func_attrs[attr]; return 0
        def stream_create(out: Any, flags: int) -> int: assert flags == C["stream_flags"]; out[0] = d.handle(T["stream"]); return 0
        def stream_destroy(s: Any) -> int: return 0
        def stream_synchronize(s: Any) -> int: return 0
        def _query() -> int:
            if d.busy_queries:
                d.busy_queries -= 1
                return cast(int, C["status_not_ready"])
            return 0
        def stream_query(s: Any) -> int: return _query()
        def stream_wait_event(s: Any, e: Any, flags: int) -> int: d.waits.append((d.key(s), d.key(e))); return 0
        def event_create(out: Any, flags: int) -> int: out[0] = d.handle(T["event"]); return 0
        def event_destroy(e: Any) -> int: return 0
        def event_record(e: Any, s: Any) -> int:
            d.recorded[d.key(e)] = d.key(s)
            d.events[d.key(e)] = float(len(d.calls)); return 0
        def event_synchronize(e: Any) -> int: return d.event_failure  # (a failed kernel before the event: sticky)
        def event_query(e: Any) -> int: return _query()
        def event_elapsed(out: Any, a: Any, b: Any) -> int:
            out[0] = d.events[d.key(b)] - d.events[d.key(a)]; return 0
        def module_load(out: Any, image: Any) -> int:
            text = ffi.string(image)
            if not (text.startswith(b"\x7fELF") or b".entry" in text):
                return 200  # *_ERROR_INVALID_IMAGE
            out[0] = d.handle(T["module"]); return 0
        def module_unload(mod: Any) -> int: return 0
        def module_function(out: Any, mod: Any, kname: bytes) -> int:
            if kname.decode() not in d.kernels:
                return 500  # *_ERROR_NOT_FOUND
            out[0] = d.handle(T["function"])
            d.functions[d.key(out[0])] = kname.decode()
            return 0
        def param_info(f: Any, i: int, off: Any, size: Any) -> int:
            sizes = d.kernels[d.functions[d.key(f)]][0]
            if i >= len(sizes):
                return 1  # CUDA_ERROR_INVALID_VALUE: past the last parameter
            off[0], size[0] = sum(sizes[:i]), sizes[i]
            return 0
        def launch(f: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shm: int, s: Any, params: Any,
                   extra: Any) -> int:
            if bx * by * bz > 1024:
                return 1  # *_ERROR_INVALID_VALUE, as a driver refuses it
            sizes, run = d.kernels[d.functions[d.key(f)]]
            if d.key(s) not in d.capturing:
                return run((gx, gy, gz), (bx, by, bz), params)
            kept = [ffi.new("char[]", bytes(ffi.buffer(params[i], n))) for i, n in enumerate(sizes)]  # copied now
            ptrs = ffi.new("void *[]", kept)
            d.capturing[d.key(s)].append(lambda: run((gx, gy, gz), (bx, by, bz), ptrs) if kept else 0)
            return 0

        def launch_ex(config: Any, f: Any, params: Any, extra: Any) -> int:
            assert extra == ffi.NULL
            got: dict[str, Any] = {
                "grid": (config.gridDimX, config.gridDimY, config.gridDimZ),
                "block": (config.blockDimX, config.blockDimY, config.blockDimZ), "shared": config.sharedMemBytes,
                "stream": d.key(config.hStream), "attrs": {}}
            for i in range(config.numAttrs):
                a = config.attrs[i]
                if a.id == C["launch_attr_cooperative"]:
                    got["attrs"]["cooperative"] = a.value.cooperative
                elif a.id == C["launch_attr_cluster"]:
                    c = a.value.clusterDim
                    got["attrs"]["cluster"] = (c.x, c.y, c.z)
                else:
                    got["attrs"][a.id] = None
            d.launches_ex.append(got)
            gx, gy, gz = got["grid"]
            if "cooperative" in got["attrs"] and gx * gy * gz > d.max_coresident:
                return cast(int, C["status_cooperative_too_large"])
            cluster = got["attrs"].get("cluster")
            if cluster is not None and any(g % c for g, c in zip(got["grid"], cluster)):
                return 912  # CUDA_ERROR_INVALID_CLUSTER_SIZE
            bx, by, bz = got["block"]
            return launch(f, gx, gy, gz, bx, by, bz, got["shared"], config.hStream, params, ffi.NULL)

        def ipc_get(out: Any, p: Any) -> int:
            entry = d.mem.get(d.key(p))
            if entry is None or entry[1] != "device":
                return 1  # *_INVALID_VALUE: not the base of a device allocation
            ffi.memmove(out, b"IPC!" + d.key(p).to_bytes(8, "little"), 12)
            return 0
        def ipc_open(out: Any, handle: Any, flags: int) -> int:
            assert flags == C["ipc_open_flags"]
            raw = bytes(ffi.buffer(ffi.addressof(handle)))
            addr = int.from_bytes(raw[4:12], "little")
            if not raw.startswith(b"IPC!") or addr not in d.mem:
                return 1  # *_INVALID_VALUE (the drivers: ..._INVALID_HANDLE / hipErrorInvalidValue)
            d.ipc_open[addr] = d.ipc_open.get(addr, 0) + 1
            out[0] = addr if "*" not in ffi.typeof(out).item.cname else ffi.cast("void *", addr)
            return 0
        def ipc_close(p: Any) -> int:
            addr = d.key(p)
            if not d.ipc_open.get(addr):
                return 1
            d.ipc_open[addr] -= 1
            d.ipc_closed.append(addr)
            return 0

        # the stream-ordered pool: blocks live in d.mem (kind "pool"); a freed block stays reserved (cached by
        # size) until trimmed, as with a release threshold of UINT64_MAX
        def pool_create(out: Any, props: Any) -> int:
            assert props.allocType == C["pool_alloc_type"] and props.location.type == C["pool_location_device"]
            out[0] = d.handle(T["mempool"])
            d.pools[d.key(out[0])] = {"reserved": 0, "used": 0, "cached": [], "threshold": 0, "streams": []}
            return 0
        def pool_destroy(pool: Any) -> int: d.pools.pop(d.key(pool)); return 0
        def pool_set_attribute(pool: Any, attr: int, value: Any) -> int:
            assert attr == C["pool_attr_release_threshold"]
            d.pools[d.key(pool)]["threshold"] = ffi.cast("uint64_t *", value)[0]; return 0
        def pool_get_attribute(pool: Any, attr: int, value: Any) -> int:
            st = d.pools[d.key(pool)]
            ffi.cast("uint64_t *", value)[0] = st["reserved" if attr == C["pool_attr_reserved"] else "used"]
            return 0
        def pool_alloc(out: Any, n: int, pool: Any, s: Any) -> int:
            st = d.pools[d.key(pool)]
            st["streams"].append(d.key(s))
            block = next((b for b in st["cached"] if len(b) == n), None)
            if block is not None:
                st["cached"].remove(block)
            else:
                if st["reserved"] + n > d.pool_limit:
                    return 2  # out of memory
                block = ffi.new("char[]", n)
                st["reserved"] += n
            st["used"] += n
            addr = int(ffi.cast("uintptr_t", block))
            d.mem[addr] = (block, "pool", d.key(pool))
            out[0] = addr if "*" not in ffi.typeof(out).item.cname else ffi.cast("void *", addr)
            return 0
        def pool_free(ptr: Any, s: Any) -> int:
            entry = d.mem.pop(d.key(ptr), None)
            if entry is None or entry[1] != "pool":
                return 1
            st = d.pools[entry[2]]
            st["streams"].append(d.key(s))
            st["used"] -= len(entry[0])
            st["cached"].append(entry[0])
            return 0
        def pool_trim(pool: Any, keep: int) -> int:
            st = d.pools[d.key(pool)]
            assert keep == 0
            st["reserved"] -= sum(len(b) for b in st["cached"])
            st["cached"].clear()
            return 0

        local = dict(locals())
        for role, entry in m.TABLES.functions.items():
            if entry is not None and role in local:
                setattr(api, role, log(local[role]))
        return api


def fresh_thread_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new ``_TLS`` (no context or device current on any thread) for every module of the gpu package that
    reads it (each holds it as a global of its own: patch them all)."""
    tls = threading.local()
    for info in pkgutil.iter_modules(gpu.__path__):
        module = importlib.import_module(f"{gpu.__name__}.{info.name}")
        if hasattr(module, "_TLS"):
            monkeypatch.setattr(module, "_TLS", tls)


@pytest.fixture(params=["cuda", "hip"])
def sim(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    module = cuda_backend if request.param == "cuda" else hip_backend
    driver = FakeDriver(module)
    api = driver.api()
    monkeypatch.setattr(_cls(module, "Backend"), "_API", api)
    fresh_thread_state(monkeypatch)
    backend = _cls(module, "Backend")()
    return module, driver, backend


def _image(module: Any, source: str) -> str | bytes:
    return PTX if module is cuda_backend else b"\x7fELF\x02\x01\x01" + bytes(64)


def test_sim_enumerate_and_report(sim: Any) -> None:
    module, driver, backend = sim
    (d,) = backend.devices()
    assert d.id == DeviceId(module.TABLES.kind, 0) and d.compute_units == 132 and d.total_memory == 141 << 30
    assert d.limits.max_block == (1024, 1024, 64) and d.limits.max_shared_mem == 48 << 10
    if module is cuda_backend:
        assert (d.name, d.vendor, d.capability.vendor_version) == ("NVIDIA H200", Vendor.NVIDIA, "sm_90")
        assert d.capability.flags == ADA | F.COOPERATIVE_LAUNCH | F.THREAD_BLOCK_CLUSTERS  # (the attributes)
        assert d.capability.tier is ComputeTier.DATACENTER
        assert backend.runtime_version() is None and backend.driver_version() == 13000
    else:
        assert (d.name, d.vendor, d.capability.vendor_version) == ("AMD Instinct MI210", Vendor.AMD,
                                                                   "gfx90a:sramecc+:xnack-")
        assert F.TENSOR_CORES in d.capability.flags and d.capability.tier is ComputeTier.DATACENTER
        assert backend.runtime_version() == 60300000
    report = BackendRegistry({module.TABLES.kind: lambda: backend}).report()
    assert f"{module.TABLES.kind.name}: library loaded, 1 device" in report
    assert any(line.startswith(f"  {d.id}: {d.name} (") for line in report), report
    with pytest.raises(Error) as ei:
        backend.open(1)
    assert ei.value.kind is ErrorKind.INVALID_VALUE


def test_sim_memory_copies_and_kinds(sim: Any) -> None:
    module, driver, backend = sim
    dev = backend.open(0)
    s = dev.create_stream()
    data = np.arange(1000, dtype=np.uint8)
    for kind in (MemoryKind.DEVICE, MemoryKind.HOST_PINNED, MemoryKind.UNIFIED):
        with dev.alloc(1000, kind) as a, dev.alloc(1000) as b:
            assert a.kind is kind and a.ptr in driver.mem and len(s._inflight) == 0
            s.copy_from_host(a, data)
            assert len(s._inflight) == 1  # the host buffer stays alive until work after it is seen complete
            s.copy(b, a)
            out = np.zeros_like(data)
            s.copy_to_host(out, b)
            s.synchronize()
            assert not s._inflight
            np.testing.assert_array_equal(out, data)
    assert not driver.mem  # every kind freed by its own function
    assert driver.calls.count("host_free") == 1 and driver.calls.count("free") == 5
    huge = dev.alloc_unchecked(1 << 62)  # past max_alloc: the driver's out of memory is INVALID_VALUE, its code kept
    assert isinstance(huge, Error) and huge.kind is ErrorKind.INVALID_VALUE and "max_alloc" in str(huge), huge
    assert huge.code is not None and dev.api.error(huge.code, "alloc").kind is ErrorKind.OUT_OF_MEMORY, huge
    bad = dev.alloc_unchecked(-5)
    assert isinstance(bad, Error) and bad.kind is ErrorKind.INVALID_VALUE


def test_sim_offsets_counts_and_fills(sim: Any) -> None:
    """Stream.copy*/fill with offsets and byte counts over host memory standing in for the device (HIP's device
    pointers are void *: the offset is added through char *; its D32 fill takes an int)."""
    module, driver, backend = sim
    dev = backend.open(0)
    s = dev.create_stream()
    data = np.arange(256, dtype=np.uint8)
    with dev.alloc(1024) as a, dev.alloc(1024) as b:
        s.fill(a, 0x11)
        s.fill(b, 0)
        s.copy_from_host(a, data, 100, dst_offset=10, src_offset=5)
        s.copy(b, a, 300, dst_offset=700, src_offset=0)
        s.fill(a, 0xBEEF, 8, offset=512, width=2)
        s.fill(a, 0xDEADBEEF, 8, offset=600, width=4)
        out_a, out_b = np.zeros(1024, np.uint8), np.zeros(1024, np.uint8)
        s.copy_to_host(out_a, a)
        s.copy_to_host(out_b, b, 324, dst_offset=700, src_offset=700)
        s.synchronize()
        want_a = np.full(1024, 0x11, np.uint8)
        want_a[10:110] = data[5:105]
        want_a[512:520] = np.frombuffer(b"\xef\xbe" * 4, np.uint8)
        want_a[600:608] = np.frombuffer(b"\xef\xbe\xad\xde" * 2, np.uint8)
        np.testing.assert_array_equal(out_a, want_a)
        want_b = np.zeros(1024, np.uint8)
        want_b[700:1000] = np.full(300, 0x11, np.uint8)
        want_b[710:810] = data[5:105]
        np.testing.assert_array_equal(out_b, want_b)
        with pytest.raises(Error) as ei:
            s.copy(b, a, 400, dst_offset=700)
        assert ei.value.kind is ErrorKind.INVALID_VALUE and "past its end" in str(ei.value)


def test_sim_strided_copies_fill_the_vendor_structs(sim: Any) -> None:
    """copy_2d / copy_3d through memcpy_2d / memcpy_3d (CUDA_MEMCPY2D/3D; hip_Memcpy2D, HIP_MEMCPY3D): each side's
    memory type, pointer (moved to its offset: slices and origins included), pitch and rows per slice, as the
    simulated driver reads them to move the rows; the host buffers are held until the stream is seen past them."""
    module, driver, backend = sim
    dev = backend.open(0)
    s = dev.create_stream()
    data = np.random.default_rng(7).integers(0, 256, 2048, dtype=np.uint8)
    ra, rb = np.zeros(2048, np.uint8), np.zeros(2048, np.uint8)
    with dev.alloc(2048) as a, dev.alloc(2048) as b:
        s.fill(a, 0)
        s.fill(b, 0)
        s.copy_2d(a, data, 10, 7, src_pitch=33, dst_pitch=50, src_offset=3, dst_offset=(4, 2))
        rect_reference(ra, data, (10, 7), (50, 350), (33, 231), 104, 3)
        assert driver.rects[-1] == (False, 10, 7, 1, (33, 231), (50, 350)) and len(s._inflight) == 1
        s.copy_2d(b[512:1024], a, 12, 5, dst_pitch=20, src_pitch=50, src_offset=100, dst_offset=7)  # a slice
        rect_reference(rb, ra, (12, 5), (20, 100), (50, 250), 512 + 7, 100)
        s.copy_3d(b, data, (6, 3, 4), dst_pitch=(16, 64), src_pitch=(9, 45), dst_offset=1000, src_offset=(1, 1, 1))
        rect_reference(rb, data, (6, 3, 4), (16, 64), (9, 45), 1000, 55)
        assert driver.rects[-1] == (True, 6, 3, 4, (9, 45), (16, 64))
        s.copy_3d(a, b, (5, 2, 3), dst_pitch=(11, 33), src_pitch=16, src_offset=1000, dst_offset=(0, 1, 20))
        rect_reference(ra, rb, (5, 2, 3), (11, 33), (16, 32), 11 + 660, 1000)
        box = np.full((4, 3, 8), 0xEE, np.uint8)
        s.copy_3d(box, b, (6, 3, 4), src_pitch=(16, 64), src_offset=1000, dst_pitch=8)
        want_box = box.copy().reshape(-1)
        rect_reference(want_box, rb, (6, 3, 4), (8, 24), (16, 64), 0, 1000)
        back_a, back_b = np.zeros(2048, np.uint8), np.zeros(2048, np.uint8)
        s.copy_to_host(back_a, a)
        s.copy_to_host(back_b, b)
        s.synchronize()
        assert not s._inflight
        np.testing.assert_array_equal(box.reshape(-1), want_box)
        np.testing.assert_array_equal(back_a, ra)
        np.testing.assert_array_equal(back_b, rb)
        assert back_b[523:531].tolist() == data[3:11].tolist()  # (the reference is not vacuous)
        calls = len(driver.calls)
        refused: list[Callable[[], object]] = [
            lambda: s.copy_2d(a, data, 10, 4, dst_pitch=100, dst_offset=2048 - 309),
            lambda: s.copy_2d(a, data, 10, 4, dst_pitch=9),
            lambda: s.copy_3d(a, data, (4, 4, 2), dst_pitch=(8, 36)),
            lambda: s.copy_2d(bytes(64), a, 8, 8)]
        for bad in refused:
            with pytest.raises(Error) as ei:
                bad()
            assert ei.value.kind is ErrorKind.INVALID_VALUE
        s.copy_2d(a, data, 0, 4)
        s.copy_3d(a, data, (4, 4, 0))
        assert len(driver.calls) == calls  # refused (or empty) before any vendor call
        with pytest.raises(TypeError):
            s.copy_2d(a, np.zeros(8, np.uint8).view(np.float32), 4, 1, src_offset=0.5)
        # a pitch of 2**32 passes the region checks (one row): HIP 5.2's HIP_MEMCPY3D holds unsigned ints
        if module is hip_backend:
            with pytest.raises(Error) as ei:
                s.copy_3d(a, data, (4, 1, 1), dst_pitch=2**32)
            assert ei.value.kind is ErrorKind.INVALID_VALUE and "HIP_MEMCPY3D" in str(ei.value)
        else:
            s.copy_3d(a, data, (4, 1, 1), dst_pitch=2**32)
            assert driver.rects[-1] == (True, 4, 1, 1, (4, 4), (2**32, 2**32))
        s.synchronize()


def test_sim_strided_copy_and_prefetch_without_the_role(sim: Any) -> None:
    """A vendor whose spec binds no memcpy_3d / prefetch function (null) gets UNSUPPORTED, not a crash."""
    module, driver, backend = sim
    dev = backend.open(0)
    s = dev.create_stream()
    dev.api.memcpy_3d = None
    dev.api.prefetch = dev.api.prefetch_location = None
    with dev.alloc(64) as a, dev.alloc(64, MemoryKind.UNIFIED) as u:
        s.copy_2d(a, bytearray(64), 8, 8)
        calls: list[Callable[[], object]] = [lambda: s.copy_3d(a, bytearray(64), (4, 4, 4)), lambda: s.prefetch(u)]
        for call in calls:
            with pytest.raises(Error) as ei:
                call()
            assert ei.value.kind is ErrorKind.UNSUPPORTED and ei.value.backend == module.TABLES.kind.name


def test_sim_prefetch_of_managed_memory(sim: Any) -> None:
    """Stream.prefetch: CUDA's cuMemPrefetchAsync with a CUmemLocation (device, or host), HIP's hipMemPrefetchAsync
    with a device ordinal (hipCpuDeviceId for the host); offsets and slices move the pointer; other kinds, targets
    and ranges are refused before any call."""
    module, driver, backend = sim
    dev = backend.open(0)
    s = dev.create_stream()
    role = "prefetch_location" if module is cuda_backend else "prefetch"
    with dev.alloc(4096, MemoryKind.UNIFIED) as u, dev.alloc(64) as d, dev.alloc(64, MemoryKind.HOST_PINNED) as p:
        stream = s._address
        s.prefetch(u)
        s.prefetch(u, "host", 100, offset=200)
        s.prefetch(u[1024:2048], dev)
        s.prefetch(u, None, 0)  # nothing
        assert driver.prefetches == [(u.ptr, 4096, 0, stream), (u.ptr + 200, 100, "host", stream),
                                     (u.ptr + 1024, 1024, 0, stream)]
        assert driver.calls.count(role) == 3
        refused: list[Callable[[], object]] = [
            lambda: s.prefetch(d), lambda: s.prefetch(p), lambda: s.prefetch(u, "gpu"), lambda: s.prefetch(u, 1),
            lambda: s.prefetch(u, None, 4097), lambda: s.prefetch(u, None, 8, offset=4090)]
        for bad in refused:
            with pytest.raises(Error) as ei:
                bad()
            assert ei.value.kind is ErrorKind.INVALID_VALUE
        assert driver.calls.count(role) == 3
    with pytest.raises(Error) as ei:
        s.prefetch(u)
    assert ei.value.kind is ErrorKind.INVALID_HANDLE


def test_sim_stream_capture_records_and_graphs_replay(sim: Any) -> None:
    """Stream.capture(): the copies, fills and launches inside the block are recorded, not run (the simulator
    defers them as the drivers do); each Graph.launch replays them, reading the host buffer at replay time and
    the launch's argument values as captured."""
    module, driver, backend = sim
    dev = backend.open(0)
    s = dev.create_stream()
    k = dev.load_module(_image(module, VECTOR_ADD)).kernel("vector_add")
    n = 1024
    host = np.arange(n, dtype=np.float32)
    da, db, dc = (dev.alloc(4 * n) for _ in range(3))
    s.fill(db, 0)
    s.synchronize()
    with s.capture() as g:
        s.copy_from_host(da, host)
        s.fill(db, 0x3F800000, width=4)  # 1.0f
        s.launch(KernelLaunch(k, LaunchDims(n // 256, 256), [da, db, dc, np.uint32(n)]))
    out = np.zeros(n, np.float32)
    s.copy_to_host(out, dc)
    s.synchronize()
    assert not out.any()  # nothing ran during the capture
    for round_ in range(3):
        host[:] = round_  # the graph reads the host buffer when it runs
        g.launch(s)
        s.copy_to_host(out, dc)
        s.synchronize()
        np.testing.assert_array_equal(out, np.full(n, round_ + 1, np.float32))
    host[:] = 5
    assert g.launch_unchecked(s) is None  # the same replay, its Error returned (there is none)
    s.copy_to_host(out, dc)
    s.synchronize()
    np.testing.assert_array_equal(out, np.full(n, 6, np.float32))
    s2 = dev.create_stream()
    g.launch(s2)  # on another stream of the device
    s2.synchronize()
    e = g.launch_unchecked(object())  # not a stream of the graph's device
    assert isinstance(e, Error) and e.kind is ErrorKind.INVALID_VALUE, e
    assert e.function == "Graph.launch_unchecked" and str(e).startswith("Graph.launch_unchecked"), e
    g.close()
    assert not driver.graphs and not driver.execs  # both destroyed
    with pytest.raises(Error) as ei:
        g.launch(s)
    assert ei.value.kind is ErrorKind.INVALID_HANDLE
    e = g.launch_unchecked(s)
    assert isinstance(e, Error) and e.kind is ErrorKind.INVALID_HANDLE and e.function == "Graph.launch_unchecked", e
    with pytest.raises(ZeroDivisionError):
        with s.capture():
            s.fill(db, 1)
            1 / 0
    assert not driver.capturing and not driver.graphs  # the capture ended and its graph discarded
    s.fill(db, 7)  # the stream runs work again
    s.synchronize()


@pytest.mark.parametrize("pools", [0, 1], ids=["caching-pool", "stream-ordered-pool"])
def test_sim_a_graph_replay_after_a_free_is_refused(sim: Any, pools: int) -> None:
    """A graph whose work uses an allocation (a launch's argument, checked, unchecked, re-issued or built from
    (kernel, dims, *args); a fill's, a copy's either side, a host copy's, a rect copy's device side; a slice's
    allocation; a pool block) replays while it is live, and once it was freed its replay raises INVALID_HANDLE
    without reaching the driver (it replayed the work onto the freed memory)."""
    module, driver, backend = sim
    driver.pools_supported = pools
    dev = backend.open(0)
    s = dev.create_stream()
    pool = dev.memory_pool()
    assert isinstance(pool, gpu_pool.GpuStreamOrderedPool) is bool(pools)
    k = dev.load_module(_image(module, VECTOR_ADD)).kernel("vector_add")
    n = 64
    keep = dev.alloc(4 * n)
    host = np.zeros(4 * n, np.uint8)

    def launch(a: Any) -> KernelLaunch:
        return KernelLaunch(k, LaunchDims(1, n), [a, a, a, np.uint32(n)])

    def twice(a: Any) -> None:
        la = launch(a)
        s.launch(la)
        s.launch(la)  # (the second launch in a row: packed once, re-issued)

    cases: list[tuple[str, Callable[[Any], object]]] = [
        ("launch", lambda a: s.launch(launch(a))),
        ("launch, re-issued", twice),
        ("launch(kernel, dims, *args)", lambda a: s.launch(k, LaunchDims(1, n), a, a, a, np.uint32(n))),
        ("launch_unchecked", lambda a: s.launch_unchecked(launch(a))),
        ("fill", lambda a: s.fill(a, 0x3F800000, width=4)),
        ("copy dst", lambda a: s.copy(a, keep)),
        ("copy src", lambda a: s.copy(keep, a)),
        ("copy_from_host", lambda a: s.copy_from_host(a, host)),
        ("copy_to_host", lambda a: s.copy_to_host(host, a)),
        ("copy_2d to the device", lambda a: s.copy_2d(a, host, 16, 4, dst_pitch=32, src_pitch=16)),
        ("copy_3d from the device", lambda a: s.copy_3d(host, a, (8, 2, 2), dst_pitch=8, src_pitch=16)),
        ("a slice", lambda a: s.fill(a[64:128], 1)),
    ]
    makers: list[tuple[str, Callable[[], Any]]] = [
        ("Device.alloc", lambda: dev.alloc(4 * n)), ("a pool block", lambda: pool.alloc(4 * n, s))]
    for what, record in cases:
        for made, make in makers:
            a = make()
            s.fill(a, 0)
            with s.capture() as g:
                out = record(a)
                assert out is None, (what, out)
            assert driver.graphs  # (captured)
            g.launch(s)  # live: replayed
            s.synchronize()
            a.free()
            calls = len(driver.calls)
            with pytest.raises(Error) as ei:
                g.launch(s)
            e = ei.value
            assert e.kind is ErrorKind.INVALID_HANDLE and e.function == "Graph.launch", (what, made, e)
            assert "which the graph's work uses, was freed" in str(e), (what, made, e)
            assert e.backend == dev.kind.name
            assert "graph_launch" not in driver.calls[calls:], (what, made)
            g.close()
    # a pool block freed inside the capture: its pool may hand it out again before the replay
    a = pool.alloc(4 * n, s)
    with s.capture() as g:
        s.fill(a, 1)
        a.free()
    with pytest.raises(Error) as ei:
        g.launch(s)
    assert ei.value.kind is ErrorKind.INVALID_HANDLE
    keep.free()


def test_sim_a_graph_keeps_what_its_work_uses(sim: Any) -> None:
    """Dropping an allocation (or the host buffer of a host copy) that a graph's work uses does not free it: the
    graph holds it until it is closed; an exception in the capture lets go of what was recorded."""
    module, driver, backend = sim
    dev = backend.open(0)
    s = dev.create_stream()
    a = dev.alloc(256)
    addr = a.ptr
    host = np.arange(256, dtype=np.uint8)
    ref = weakref.ref(host)
    with s.capture() as g:
        s.copy_from_host(a, host)
    del a, host
    gc.collect()
    assert addr in driver.mem and ref() is not None  # held by the graph
    g.launch(s)
    s.synchronize()
    assert driver.ffi.buffer(driver.mem[addr][0])[:] == bytes(range(256))
    g.close()
    gc.collect()
    assert addr not in driver.mem and ref() is None  # let go with the graph
    b = dev.alloc(256)
    addr = b.ptr
    with pytest.raises(ZeroDivisionError):
        with s.capture():
            s.fill(b, 1)
            1 / 0
    del b
    gc.collect()
    assert addr not in driver.mem
    # a graph launched inside another stream's capture: the outer graph uses the inner one's allocations too
    c = dev.alloc(256)
    with s.capture() as inner:
        s.fill(c, 2)
    s2 = dev.create_stream()
    with s2.capture() as outer:
        inner.launch(s2)
    c.free()
    for g in (inner, outer):
        with pytest.raises(Error) as ei:
            g.launch(s2)
        assert ei.value.kind is ErrorKind.INVALID_HANDLE
    # one capture at a time on a stream
    with s.capture():
        with pytest.raises(Error) as ei:
            with s.capture():
                pass
        assert ei.value.kind is ErrorKind.INVALID_VALUE


def test_sim_slices_move_the_device_pointer(sim: Any) -> None:
    """alloc[start:stop] on CUDA (CUdeviceptr: an int) and HIP (hipDeviceptr_t: void *): the kernel and the copies
    see the slice's bytes."""
    module, driver, backend = sim
    dev = backend.open(0)
    s = dev.create_stream()
    k = dev.load_module(_image(module, VECTOR_ADD)).kernel("vector_add")
    n = 256
    a = dev.alloc(3 * 4 * n + 100)
    x, y, z = a[100:100 + 4 * n], a[100 + 4 * n:100 + 8 * n], a[100 + 8 * n:]
    assert z.ptr == a.ptr + 100 + 8 * n and z.nbytes == 4 * n
    s.copy_from_host(x, np.arange(n, dtype=np.float32))
    s.copy_from_host(y, np.ones(n, np.float32))
    s.launch(KernelLaunch(k, LaunchDims(1, n), [x, y, z, np.uint32(n)]))
    out = np.zeros(n, np.float32)
    s.copy_to_host(out, z)
    s.synchronize()
    np.testing.assert_array_equal(out, np.arange(n, dtype=np.float32) + 1)
    a.free()
    with pytest.raises(Error) as ei:
        s.launch(KernelLaunch(k, LaunchDims(1, n), [x, y, z, np.uint32(n)]))
    assert ei.value.kind is ErrorKind.INVALID_HANDLE


def test_sim_host_views_of_pinned_and_managed_memory(sim: Any) -> None:
    """HOST_PINNED and UNIFIED allocations are host-addressable: host_view() is their bytes without a copy (a
    numpy view writes what the stream then reads); device memory has none; free waits for the views to go."""
    module, driver, backend = sim
    dev = backend.open(0)
    s = dev.create_stream()
    for kind in (MemoryKind.HOST_PINNED, MemoryKind.UNIFIED):
        a = dev.alloc(256, kind)
        view = a.host_view()
        arr = np.frombuffer(view, np.uint8)
        arr[:] = np.arange(256, dtype=np.uint8)
        out = np.zeros(256, np.uint8)
        s.copy_to_host(out, a)
        s.synchronize()
        np.testing.assert_array_equal(out, np.arange(256, dtype=np.uint8))
        with pytest.raises(Error) as ei:
            a.free()
        assert ei.value.kind is ErrorKind.INVALID_VALUE and "still exported" in str(ei.value)
        del arr, view
        a.free()
    with dev.alloc(64) as d:
        with pytest.raises(Error) as ei:
            d.host_view()
        assert ei.value.kind is ErrorKind.INVALID_VALUE and "device memory" in str(ei.value)


def test_sim_free_double_free_and_finalizer(sim: Any) -> None:
    module, driver, backend = sim
    dev = backend.open(0)
    a = dev.alloc(64)
    a.free()
    with pytest.raises(Error) as ei:
        a.free()
    assert ei.value.kind is ErrorKind.INVALID_HANDLE
    assert isinstance(a.free_unchecked(), Error)
    assert driver.calls.count("free") == 1  # never released twice
    b = dev.alloc(64)
    assert b.ptr in driver.mem
    del b
    gc.collect()
    assert not driver.mem  # the finalizer freed it


def test_sim_kernel_launch_events_and_checks(sim: Any) -> None:
    module, driver, backend = sim
    dev = backend.open(0)
    module_ = dev.load_module(_image(module, VECTOR_ADD))
    k = module_.kernel("vector_add")
    with pytest.raises(Error) as ei:
        module_.kernel("nope")
    assert ei.value.kind is ErrorKind.INVALID_VALUE and ei.value.code == 500  # as on every backend (issue 23 item 9)
    if module is cuda_backend:
        assert k.param_sizes == (8, 8, 8, 4) and k.num_args == 4  # from cuFuncGetParamInfo
    else:
        assert k.param_sizes is None and k.num_args is None  # HIP: nothing to ask
    at = k.attributes  # cuFuncGetAttribute / hipFuncGetAttribute per field, the device's warp size
    assert (at.max_threads_per_block, at.registers, at.static_shared_mem, at.local_mem, at.const_mem,
            at.max_dynamic_shared_mem) == (768, 40, 4096, 16, 64, 48 << 10)
    assert at.preferred_multiple == (32 if module is cuda_backend else 64)
    assert (k.max_active_blocks(256), k.max_active_blocks(64), k.max_active_blocks(256, 32768)) == (8, 32, 6)
    with pytest.raises(Error) as ei:
        k.max_active_blocks(0)
    assert ei.value.kind is ErrorKind.INVALID_VALUE
    with pytest.raises(TypeError):
        k.max_active_blocks(True)
    n = 3000
    a = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    b = np.random.default_rng(4).standard_normal(n).astype(np.float32)
    s = dev.create_stream()
    da, db, dc = (dev.alloc(4 * n) for _ in range(3))
    s.copy_from_host(da, a)
    s.copy_from_host(db, b)
    e0 = s.record_event()
    s.launch(KernelLaunch(k, LaunchDims((n + 255) // 256, 256), [da, db, dc, np.uint32(n)]))
    e1 = s.record_event()
    out = np.zeros(n, np.float32)
    s.copy_to_host(out, dc)
    s.synchronize()
    np.testing.assert_array_equal(out, a + b)
    assert e0.elapsed_ms(e1) > 0 and e0.query() and isinstance(e0.elapsed_ms(e1), float)
    driver.busy_queries = 1
    assert s.query() is False and s.query() is True
    driver.busy_queries = 1
    assert e1.query() is False and e1.query() is True
    if module is cuda_backend:  # argument checks against the driver's parameter info
        with pytest.raises(Error) as ei:
            s.launch(KernelLaunch(k, LaunchDims(1, 32), [da, db, dc]))
        assert ei.value.kind is ErrorKind.INVALID_VALUE
        with pytest.raises(Error) as ei:
            s.launch(KernelLaunch(k, LaunchDims(1, 32), [da, db, dc, np.uint64(n)]))
        assert ei.value.kind is ErrorKind.INVALID_VALUE
    with pytest.raises(Error) as ei:
        s.launch(KernelLaunch(k, LaunchDims(1, 2048), [da, db, dc, np.uint32(n)]))
    assert ei.value.kind is ErrorKind.INVALID_VALUE  # LaunchDims.validate, before the driver
    failed = s.launch_unchecked(KernelLaunch(k, LaunchDims(1, 2048), [da, db, dc, np.uint32(n)]))
    assert isinstance(failed, Error) and failed.kind is ErrorKind.INVALID_VALUE  # the driver's refusal, as a value
    assert s.launch_unchecked(KernelLaunch(k, LaunchDims(1, 32), [da, db, dc, np.uint32(32)])) is None
    dc.free()
    with pytest.raises(Error) as ei:
        s.launch(KernelLaunch(k, LaunchDims(1, 32), [da, db, dc, np.uint32(n)]))
    assert ei.value.kind is ErrorKind.INVALID_HANDLE
    s.wait_event(e1)
    dev.synchronize()
    assert "device_synchronize" in driver.calls


def test_sim_load_module_formats(sim: Any) -> None:
    module, driver, backend = sim
    dev = backend.open(0)
    if module is cuda_backend:
        from ironaccelerator.backends.cuda import nvrtc
        if not nvrtc.has("nvrtcVersion"):
            pytest.skip("libnvrtc not found")
        k = dev.load_module(VECTOR_ADD).kernel("vector_add")  # NVRTC -> PTX for compute_90 -> module_load
        assert k.name == "vector_add"
        with pytest.raises(Error) as ei:
            dev.load_module(b"\x50\xed\x55\xba" + bytes(16))  # a fatbin: accepted, but the fake refuses it
        assert ei.value.kind is ErrorKind.COMPILE_FAILED
    else:
        with pytest.raises(Error) as ei:
            dev.load_module(VECTOR_ADD)
        assert ei.value.kind is ErrorKind.UNSUPPORTED and "offload_bundle" in str(ei.value)
        with pytest.raises(Error) as ei:
            dev.load_module(PTX)
        assert ei.value.kind is ErrorKind.UNSUPPORTED


def test_sim_contexts_are_made_current_per_thread(sim: Any) -> None:
    module, driver, backend = sim
    dev = backend.open(0)
    role = "context_set_current" if module is cuda_backend else "set_device"
    before = driver.calls.count(role)
    dev.alloc(16).free()
    dev.create_stream()
    assert driver.calls.count(role) == before  # cached on this thread
    t = threading.Thread(target=lambda: dev.alloc(16).free())
    t.start()
    t.join()
    assert driver.calls.count(role) == before + 1  # a new thread makes it current once


def test_sim_memory_pool_and_dlpack(sim: Any) -> None:
    module, driver, backend = sim
    dev = backend.open(0)
    pool = dev.memory_pool()
    p = pool.alloc(3000)
    s = dev.create_stream()
    s.copy_from_host(p, np.ones(3000, np.uint8))
    s.synchronize()
    p.free()
    assert pool.trim() == 4096 and not driver.mem
    a = dev.alloc(256)
    syncs = driver.calls.count("device_synchronize")
    capsule = a.__dlpack__()  # stream=None: the producer synchronises first
    assert driver.calls.count("device_synchronize") == syncs + 1
    t = DLManagedTensor.from_address(GET_POINTER(capsule, b"dltensor")).dl_tensor
    assert t.data == a.ptr and t.shape[0] == 256 and t.device.device_type == module.TABLES.kind.dlpack_device
    del capsule, t
    gc.collect()
    a.free()
    assert not driver.mem


def test_sim_dlpack_both_or_neither(sim: Any) -> None:
    """Every kind of allocation has ``__dlpack__`` iff it has ``__dlpack_device__``: device, pinned and unified
    memory and the stream-ordered pool's export both; blocks of the core's caching pool (the fallback where
    the device has no stream-ordered pools) neither."""
    module, driver, backend = sim
    seen = {}
    for pools in (0, 1):
        driver.pools_supported = pools
        dev = backend.open(0)
        allocs = [dev.alloc(64, kind) for kind in (MemoryKind.DEVICE, MemoryKind.HOST_PINNED, MemoryKind.UNIFIED)]
        for a in allocs + [dev.memory_pool().alloc(64)]:
            has_device, has_export = hasattr(a, "__dlpack_device__"), hasattr(a, "__dlpack__")
            assert has_device == has_export, (a, has_device, has_export)
            seen[type(a).__name__] = has_export
            if has_export:
                assert a.__dlpack_device__() == (module.TABLES.kind.dlpack_device, 0)
            a.free()
        dev.close()
    assert seen == {_cls(module, "Allocation").__name__: True, "PooledAllocation": False,
                    _cls(module, "PoolAllocation").__name__: True}, seen


# ------------------------------------------------------------------ typed views, DLPack both ways, stream protocols


def test_sim_typed_view_capsules(sim: Any) -> None:
    """``Allocation.view``: versioned capsules for consumers that ask (max_version >= (1, 0)), legacy otherwise,
    with the real dtype, shape, strides and offset; the deleter runs exactly once (consumed, or dropped)."""
    module, driver, backend = sim
    kind = module.TABLES.kind
    dev = backend.open(0)
    a = dev.alloc(4096)
    v = a.view(DType.F32, (8, 16), offset=64)
    assert v.__dlpack_device__() == (kind.dlpack_device, 0) and v.nbytes == 512
    deleted = dlpack.EXPORTER.deleted
    cap = v.__dlpack__(stream=-1, max_version=(1, 2))
    info = dlpack_capsules.parse(cap)
    assert info["name"] == b"dltensor_versioned" and info["version"] == (1, 1) and info["flags"] == 0
    assert info["data"] == a.ptr and info["byte_offset"] == 64 and info["device"] == (kind.dlpack_device, 0)
    assert info["dtype"] == (2, 32, 1) and info["shape"] == (8, 16) and info["strides"] is None
    done = dlpack_capsules.consume(cap)
    del cap
    gc.collect()
    assert dlpack.EXPORTER.deleted == deleted  # consumed: the consumer owns it now
    done()
    assert dlpack.EXPORTER.deleted == deleted + 1
    legacy = a.view("int16", (4, 3), strides=(6, 2), offset=2).__dlpack__(stream=-1)  # no max_version: legacy
    info = dlpack_capsules.parse(legacy)
    assert info["name"] == b"dltensor" and info["version"] is None and info["strides"] == (6, 2)
    assert info["dtype"] == (0, 16, 1) and info["byte_offset"] == 2
    del legacy  # dropped unconsumed: the capsule's destructor deletes it
    gc.collect()
    assert dlpack.EXPORTER.deleted == deleted + 2 and not dlpack.EXPORTER.live
    # the capsule keeps the view, and so the allocation, alive
    ref = weakref.ref(a)
    cap = a.view(DType.U8, 4096).__dlpack__(stream=-1, max_version=(1, 0))
    del a, v
    gc.collect()
    assert ref() is not None
    del cap
    gc.collect()
    assert ref() is None and not driver.mem


def test_sim_alloc_unchecked_returns_invalid_value_for_bad_arguments(sim: Any) -> None:
    """CUDA/HIP ``Device.alloc_unchecked`` and the stream-ordered ``MemoryPool.alloc_unchecked``: a bad size, kind
    or stream is an INVALID_VALUE Error returned naming it, never raised (True allocated a byte, a non-stream
    raised AttributeError); the checked calls raise TypeError or the same kind (as tests/test_conformance.py on
    the other backends)."""
    module, driver, backend = sim
    driver.pools_supported = 1
    dev = backend.open(0)
    pool = dev.memory_pool()
    assert type(pool).__name__ != "MemoryPool", type(pool)  # (the stream-ordered pool)
    cases: list[tuple[Any, Any, str]] = []
    for n in (-1, 0, 2**64, 2**70, 1.5, "64", None, True, False):
        cases += [(lambda n=n: dev.alloc_unchecked(n), lambda n=n: dev.alloc(n), "nbytes"),
                  (lambda n=n: pool.alloc_unchecked(n), lambda n=n: pool.alloc(n), "nbytes")]
    for k in (3, "DEVICE", None, 1.0):
        cases.append((lambda k=k: dev.alloc_unchecked(64, k), lambda k=k: dev.alloc(64, k), "kind"))
    cases.append((lambda: pool.alloc_unchecked(64, 42), lambda: pool.alloc(64, 42), "stream"))
    for unchecked, checked, param in cases:
        r = unchecked()
        assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_VALUE and param in str(r), r
        with pytest.raises((TypeError, Error)) as ei:
            checked()
        assert not isinstance(ei.value, Error) or ei.value.kind is ErrorKind.INVALID_VALUE, ei.value
    a = dev.alloc_unchecked(np.int64(64))
    assert not isinstance(a, Error) and a.nbytes == 64
    a.free()
    dev.close()


def test_sim_callback_after_failed_work_runs_and_the_stream_reports_it(sim: Any) -> None:
    """The wait before a host callback fails (the work before it failed: 700, an illegal address): the callback
    still runs once, nothing is filed under it, and Stream.synchronize raises the failure, once; draining the
    stream from its own callback is RuntimeError."""
    module, driver, backend = sim
    dev = backend.open(0)
    s = dev.create_stream()
    driver.event_failure = 700
    ran: list[BaseException | None] = []

    def fn() -> None:
        try:
            s.drain_callbacks()
        except RuntimeError as e:
            ran.append(e)

    s.add_callback(fn)
    assert s.drain_callbacks(timeout=30)
    driver.event_failure = 0
    assert len(ran) == 1 and isinstance(ran[0], RuntimeError) and s.callback_errors == []
    with pytest.raises(Error) as ei:
        s.synchronize()
    assert "700" in str(ei.value) or "ILLEGAL" in str(ei.value).upper(), str(ei.value)
    s.synchronize()  # reported once
    dev.close()


def test_sim_dlpack_device_memory_refused_by_numpy(sim: Any) -> None:
    """``np.from_dlpack`` of device memory (and of a pinned bf16 view): numpy's own error, never ``SystemError``
    (a Python capsule destructor run with numpy's exception pending lost it); the capsule is deleted exactly once
    and ``free()`` works after."""
    module, driver, backend = sim
    dev = backend.open(0)
    a, h = dev.alloc(4096), dev.alloc(4096, MemoryKind.HOST_PINNED)
    deleted = dlpack.EXPORTER.deleted
    for view in (a.view(DType.F32, 16), h.view(DType.BF16, 16)):
        with pytest.raises(Exception) as ei:
            np.from_dlpack(view)
        assert not isinstance(ei.value, SystemError), ei.value
    del view
    a.free()
    h.free()
    assert dlpack.EXPORTER.deleted == deleted + 2
    gc.collect()
    assert dlpack.EXPORTER.deleted == deleted + 2 and not dlpack.EXPORTER.live and not driver.mem


def test_sim_dlpack_stream_handshake(sim: Any) -> None:
    """``__dlpack__(stream=...)``: an event recorded on the producer stream, the consumer's stream waiting on it;
    no device-wide synchronisation (the fallback only where the view names no producer stream)."""
    module, driver, backend = sim
    dev = backend.open(0)
    producer, consumer = dev.create_stream(), dev.create_stream()
    a = dev.alloc(1024)
    v = a.view(DType.U32, 256, stream=producer)
    syncs = driver.calls.count("device_synchronize")
    cap = v.__dlpack__(stream=consumer._address, max_version=(1, 0))
    ((waiter, event),) = driver.waits
    assert waiter == consumer._address and driver.recorded[event] == producer._address
    assert driver.calls.count("device_synchronize") == syncs
    v.__dlpack__(stream=consumer)  # a Stream of ours: the same handshake
    assert driver.waits[-1][0] == consumer._address and len(driver.waits) == 2

    class Foreign:  # another library's stream, through the CUDA stream protocol
        def __cuda_stream__(self) -> tuple[int, int]:
            return (0, 0x5550)

    v.__dlpack__(stream=Foreign())
    assert driver.waits[-1][0] == 0x5550
    v.__dlpack__(stream=producer)  # the producer's own stream: already in order
    v.__dlpack__(stream=-1)  # the consumer orders itself
    assert len(driver.waits) == 3 and driver.calls.count("device_synchronize") == syncs
    bad = 0 if module is cuda_backend else 1  # CUDA forbids 0 (ambiguous), HIP 1 and 2
    with pytest.raises(BufferError):
        v.__dlpack__(stream=bad)
    with pytest.raises(BufferError):
        v.__dlpack__(stream="default")
    a.view(DType.U8, 16).__dlpack__(stream=None)  # no producer stream known: the device is synchronised
    assert driver.calls.count("device_synchronize") == syncs + 1
    del cap
    if module is cuda_backend:
        assert producer.__cuda_stream__() == (0, producer._address) and producer._address
    else:
        assert not hasattr(producer, "__cuda_stream__")  # HIP streams are not CUDA streams
    other = backend.open(0)
    with pytest.raises(Error) as ei:
        a.view(DType.U8, 16, stream=other.create_stream())
    assert ei.value.kind is ErrorKind.INVALID_VALUE


def test_sim_cuda_array_interface_of_views(sim: Any) -> None:
    module, driver, backend = sim
    dev = backend.open(0)
    s = dev.create_stream()
    a = dev.alloc(4096)
    v = a.view(np.float64, (4, 8), offset=128, stream=s)
    strided = a.view("u2", (3, 5), strides=(10, 2))
    if module is hip_backend:
        assert not hasattr(v, "__cuda_array_interface__")
        return
    assert v.__cuda_array_interface__ == {"shape": (4, 8), "typestr": "<f8", "data": (a.ptr + 128, False),
                                          "version": 3, "strides": None, "stream": s._address}
    cai = strided.__cuda_array_interface__
    assert cai["strides"] == (20, 4) and cai["typestr"] == "<u2" and cai["stream"] is None
    with pytest.raises(Error) as ei:
        a.view(DType.BF16, 4).__cuda_array_interface__  # numpy has no typestr for bfloat16
    assert ei.value.kind is ErrorKind.UNSUPPORTED


def test_sim_host_kinds_to_numpy_without_a_copy(sim: Any) -> None:
    """Pinned and managed memory export as kDLCUDAHost / kDLCUDAManaged (HIP: kDLROCMHost), which numpy takes
    without a copy: the same address, writes seen both ways."""
    module, driver, backend = sim
    dev = backend.open(0)
    s = dev.create_stream()
    cuda = module is cuda_backend
    for kind, dl in ((MemoryKind.HOST_PINNED, 3 if cuda else 11), (MemoryKind.UNIFIED, 13 if cuda else 11)):
        a = dev.alloc(4096, kind)
        v = a.view(np.int32, (16, 8), offset=256)
        assert v.__dlpack_device__() == (dl, 0)
        x = np.from_dlpack(v)
        assert x.ctypes.data == a.ptr + 256 and x.shape == (16, 8) and x.dtype == np.int32
        x[:] = np.arange(128, dtype=np.int32).reshape(16, 8)
        out = np.zeros(128, np.int32)
        s.copy_to_host(out, a, 512, src_offset=256)
        s.synchronize()
        np.testing.assert_array_equal(out, np.arange(128))
        with pytest.raises(Error) as ei:
            a.free()  # a view is exported: the array would read freed memory
        assert ei.value.kind is ErrorKind.INVALID_VALUE
        del x, v
        gc.collect()
        a.free()
    assert not driver.mem


def test_sim_from_dlpack_and_cuda_array_interface(sim: Any) -> None:
    """Import without a copy: a view of ours round-trips to an allocation at the same address (the producer's
    deleter runs once, when it is freed; the memory is not freed by the importer); numpy (pageable host memory)
    is refused UNSUPPORTED; another device INVALID_VALUE."""
    module, driver, backend = sim
    kind = module.TABLES.kind
    dev = backend.open(0)
    s = dev.create_stream()
    a = dev.alloc(1024)
    s.copy_from_host(a, np.arange(256, dtype=np.float32))
    s.synchronize()
    deleted = dlpack.EXPORTER.deleted
    b = dev.from_dlpack(a.view(DType.F32, (16, 8), offset=512), stream=s)
    assert b.ptr == a.ptr + 512 and b.nbytes == 512 and b.kind is MemoryKind.DEVICE
    assert b.dtype is DType.F32 and b.shape == (16, 8)
    out = np.zeros(128, np.float32)
    s.copy_to_host(out, b)  # usable as any allocation
    s.synchronize()
    np.testing.assert_array_equal(out, np.arange(128, 256))
    frees = driver.calls.count("free")
    b.free()
    assert dlpack.EXPORTER.deleted == deleted + 1 and driver.calls.count("free") == frees  # not the importer's
    with pytest.raises(Error) as ei:
        b.free()
    assert ei.value.kind is ErrorKind.INVALID_HANDLE
    # imported memory is a kernel argument like any allocation (the launch reads its address)
    k = dev.load_module(_image(module, VECTOR_ADD)).kernel("vector_add")
    x = dev.from_dlpack(a.view(DType.F32, 64))
    y = dev.from_dlpack(a.view(DType.F32, 64, offset=256))
    z = dev.alloc(256)
    for _ in range(3):  # the first launch on the Python path, later ones on the fast path where compiled
        s.launch(KernelLaunch(k, LaunchDims(1, 64), [x, y, z, np.uint32(64)]))
    out = np.zeros(64, np.float32)
    s.copy_to_host(out, z)
    s.synchronize()
    np.testing.assert_array_equal(out, np.arange(64) + np.arange(64, 128))
    x.free()
    y.free()
    z.free()
    assert dlpack.EXPORTER.deleted == deleted + 3
    c = dev.from_dlpack(a.view(DType.U8, 64))
    del c  # dropped: the deleter too
    gc.collect()
    assert dlpack.EXPORTER.deleted == deleted + 4
    with pytest.raises(Error) as ei:
        dev.from_dlpack(np.zeros(4))
    assert ei.value.kind is ErrorKind.UNSUPPORTED and "kDLCPU" in str(ei.value)

    class Elsewhere:
        def __dlpack_device__(self) -> tuple[int, int]:
            return (kind.dlpack_device, 5)

        def __dlpack__(self, **kw: Any) -> Any:
            raise AssertionError("not asked: the device is checked first")

    with pytest.raises(Error) as ei:
        dev.from_dlpack(Elsewhere())
    assert ei.value.kind is ErrorKind.INVALID_VALUE
    with pytest.raises(Error) as ei:
        dev.from_dlpack(a.view(DType.U8, (4, 4), strides=(8, 1)))  # strided: no copy possible
    assert ei.value.kind is ErrorKind.INVALID_VALUE and not dlpack.EXPORTER.live
    if module is hip_backend:
        with pytest.raises(Error) as ei:
            dev.from_cuda_array_interface(a)
        assert ei.value.kind is ErrorKind.UNSUPPORTED
        return
    syncs = driver.calls.count("stream_synchronize")
    c2 = dev.from_cuda_array_interface({"shape": (10,), "typestr": "<i4", "data": (a.ptr, False), "version": 3,
                                        "strides": None, "stream": 0x7770})
    assert c2.ptr == a.ptr and c2.nbytes == 40 and c2.dtype is DType.I32
    assert driver.calls.count("stream_synchronize") == syncs + 1  # no consumer stream: the producer's synchronised
    dev.from_cuda_array_interface(a.view(DType.F32, 4, stream=s), stream=dev.create_stream())
    assert driver.recorded[driver.waits[-1][1]] == s._address  # an event of the producer's stream, waited on
    with pytest.raises(Error) as ei:
        dev.from_cuda_array_interface({"shape": (2, 2), "typestr": "<f4", "data": (a.ptr, False), "version": 3,
                                       "strides": (4, 8)})
    assert ei.value.kind is ErrorKind.INVALID_VALUE


def test_sim_view_refusals(sim: Any) -> None:
    module, driver, backend = sim
    dev = backend.open(0)
    a = dev.alloc(256)
    cases: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((DType.F32, 65), {}),  # 260 bytes
        ((DType.F32, (8, 8)), {"offset": 4}),
        ((DType.F32, (2, 2)), {"strides": (64, 1)}),  # (1 * 64 + 1 + 1) * 4 > 256
        ((DType.F32, 4), {"offset": 2}),  # not a multiple of the element
        ((DType.F32, (2, -1)), {}), ((DType.F32, "4"), {}), ((DType.F32, (2, 2)), {"strides": (1,)}),
        ((DType.F32, 2), {"strides": (-1,)}), (("no such type", 4), {}), ((object(), 4), {})]
    for args, kw in cases:
        with pytest.raises(Error) as ei:
            a.view(*args, **kw)
        assert ei.value.kind is ErrorKind.INVALID_VALUE, (args, kw)
    assert a.view(DType.F32, (0, 7)).nbytes == 0  # empty: fits anywhere
    assert a.view("f4", 64).shape == (64,)  # the whole allocation
    v = a.view(DType.U8, 16)
    del v
    a.free()
    with pytest.raises(Error) as ei:
        a.view(DType.U8, 16)
    assert ei.value.kind is ErrorKind.INVALID_HANDLE
    b = dev.alloc(64)
    v = b.view(DType.U8, 64)
    dev.close()
    calls: list[Callable[[], Any]] = [lambda: b.view(DType.U8, 4), lambda: v.__dlpack__(stream=-1),
                                      lambda: dev.from_dlpack(v)]
    for call in calls:
        with pytest.raises(Error) as ei:
            call()
        assert ei.value.kind is ErrorKind.INVALID_HANDLE


# ------------------------------------------------------------------ the launch fast path (plans, reuse)

RECORD_SIZES = (8, 4, 2, 8, 16, 1)  # Allocation, float32, Scalar BF16, int64, Scalar C128, uint8


def _recorder(driver: FakeDriver, name: str = "record", sizes: tuple[int, ...] = RECORD_SIZES) -> list[bytes]:
    """A fake kernel that records the bytes of each argument, as the driver copies them at launch."""
    seen: list[bytes] = []
    ffi = driver.ffi

    def run(grid: Any, block: Any, params: Any) -> int:
        seen.append(b"".join(bytes(ffi.buffer(params[i], n)) for i, n in enumerate(sizes)))
        return 0

    driver.kernels[name] = (sizes, run)
    return seen


def _reference(module: Any, args: Any) -> bytes:
    packed = module.pack_args(args, _cls(module, "Backend").vendor_api().ffi)
    ffi = _cls(module, "Backend").vendor_api().ffi
    return b"".join(bytes(ffi.buffer(packed.params[i], n)) for i, n in enumerate(packed.sizes))


def _record_args(dev: Any, v: int) -> list[Any]:
    return [dev.alloc(64), np.float32(v + 0.5), Scalar(v + 2.5, DType.BF16), np.int64(-v), Scalar(v - 1j, DType.C128),
            np.uint8(v)]


def test_sim_launch_bytes_match_pack_args_on_every_path(sim: Any) -> None:
    module, driver, backend = sim
    dev = backend.open(0)
    seen = _recorder(driver)
    k = dev.load_module(_image(module, "")).kernel("record")
    s = dev.create_stream()
    args = _record_args(dev, 3)
    kl = KernelLaunch(k, LaunchDims(1, 32), args)
    s.launch(kl)  # first: packed into the stream's buffer for this plan
    assert s._last[0] is kl and s._last[1] is None and len(s._slots) == 1
    s.launch(kl)  # second in a row: a private, immutable copy
    assert s._last[0] is kl and s._last[1] is not None
    calls = driver.calls.count("launch")
    s.launch(kl)  # re-issued without packing
    assert s.launch_unchecked(kl) is None
    assert driver.calls.count("launch") == calls + 2
    other = _record_args(dev, 7)  # the same types, other values: the plan's buffer is rewritten
    s.launch(KernelLaunch(k, LaunchDims(1, 32), other))
    assert s.launch_unchecked(KernelLaunch(k, LaunchDims(1, 32), other)) is None
    assert seen == [_reference(module, args)] * 4 + [_reference(module, other)] * 2
    assert seen[0] != seen[-1]
    assert len(k._plans) == 1  # one layout, planned once
    with s._pack_lock:  # another thread is launching on this stream: a buffer of its own, same bytes
        s.launch(KernelLaunch(k, LaunchDims(1, 32), args))
    assert seen[-1] == _reference(module, args)


def test_sim_launch_layout_change_between_launches(sim: Any) -> None:
    module, driver, backend = sim
    dev = backend.open(0)
    a = dev.alloc(64)
    seen_i32 = _recorder(driver, "k32", (8, 4))
    k = dev.load_module(_image(module, "")).kernel("k32")
    s = dev.create_stream()
    s.launch(KernelLaunch(k, LaunchDims(1, 1), [a, np.int32(5)]))
    s.launch(KernelLaunch(k, LaunchDims(1, 1), [a, np.float32(5)]))  # same sizes, another plan
    assert seen_i32 == [_reference(module, [a, np.int32(5)]), _reference(module, [a, np.float32(5)])]
    wide = KernelLaunch(k, LaunchDims(1, 1), [a, np.int64(5)])
    if module is cuda_backend:  # the kernel's parameter info says 4 bytes: refused, every time
        for _ in range(2):
            with pytest.raises(Error) as ei:
                s.launch(wide)
            assert ei.value.kind is ErrorKind.INVALID_VALUE and "argument 1: 8 bytes given" in str(ei.value)
        # unchecked too (the kernel-argument policy, kernel_args): a value of another size than the parameter
        # would be read with bytes not its own; returned, not raised
        r = s.launch_unchecked(wide)
        assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_VALUE and "8 bytes given" in str(r)
    else:  # HIP reports no parameter sizes: the 8 bytes packed as given
        assert s.launch_unchecked(wide) is None
    packed = module.pack_args([a, np.int64(5)], _cls(module, "Backend").vendor_api().ffi)
    assert packed.offsets == (0, 8) and len(k._plans) == 3


def test_sim_relaunch_still_checks_liveness_and_dims(sim: Any) -> None:
    module, driver, backend = sim
    dev = backend.open(0)
    seen = _recorder(driver)
    k = dev.load_module(_image(module, "")).kernel("record")
    s = dev.create_stream()
    args = _record_args(dev, 1)
    kl = KernelLaunch(k, LaunchDims(1, 32), args)
    assert s.launch_unchecked(kl) is None and s.launch_unchecked(kl) is None  # packed without checks ...
    args[0].free()
    for _ in range(2):  # ... so the checked path does not take that copy: a freed allocation raises
        with pytest.raises(Error) as ei:
            s.launch(kl)
        assert ei.value.kind is ErrorKind.INVALID_HANDLE
    live = _record_args(dev, 2)
    kl = KernelLaunch(k, LaunchDims(1, 32), live)
    s.launch(kl)
    s.launch(kl)  # re-issued from now on
    live[0].free()
    with pytest.raises(Error) as ei:
        s.launch(kl)
    assert ei.value.kind is ErrorKind.INVALID_HANDLE
    assert len(seen) == 4
    bad = KernelLaunch(k, LaunchDims(1, 2048), _record_args(dev, 3))
    for _ in range(2):
        with pytest.raises(Error) as ei:
            s.launch(bad)
        assert ei.value.kind is ErrorKind.INVALID_VALUE and "bad launch dimensions" in str(ei.value)
    r = s.launch_unchecked(bad)  # not validated: the (fake) driver's refusal, as a value
    assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_VALUE
    with pytest.raises(Error) as ei:  # an unchecked launch of the same dims does not make them valid
        s.launch(bad)
    assert "bad launch dimensions" in str(ei.value)
    assert len(seen) == 4


def test_sim_mutable_arguments_are_packed_every_time(sim: Any) -> None:
    module, driver, backend = sim
    dev = backend.open(0)
    seen = _recorder(driver, "mut", (4, 4))
    k = dev.load_module(_image(module, "")).kernel("mut")
    s = dev.create_stream()
    raw = bytearray(b"\x01\x00\x00\x00")
    zero_d = np.array(7, np.int32)  # a 0-d array: mutable, unlike np.int32(7)
    kl = KernelLaunch(k, LaunchDims(1, 1), [raw, zero_d])
    for v in range(3):
        raw[0] = v
        zero_d[()] = 10 * v
        s.launch(kl)
    assert seen == [bytes([v, 0, 0, 0]) + np.int32(10 * v).tobytes() for v in range(3)]


def test_sim_the_last_launch_is_held_until_synchronize(sim: Any) -> None:
    module, driver, backend = sim
    dev = backend.open(0)
    _recorder(driver)
    k = dev.load_module(_image(module, "")).kernel("record")
    s = dev.create_stream()
    args = _record_args(dev, 1)
    before = len(driver.mem)
    kl = KernelLaunch(k, LaunchDims(1, 32), args)
    s.launch(kl)
    s.launch(kl)
    ref = weakref.ref(args[0])
    del kl, args
    gc.collect()
    assert ref() is not None  # the stream holds its last launch, like the host buffers of copies ...
    s.synchronize()
    gc.collect()
    assert ref() is None and len(driver.mem) == before - 1  # ... until synchronize: then dropped and freed


def test_sim_stream_ordered_pool(sim: Any) -> None:
    """Where the device supports stream-ordered allocation, memory_pool() is a pool of the driver's own."""
    module, driver, backend = sim
    driver.pools_supported = 1
    dev = backend.open(0)
    pool = dev.memory_pool()
    assert type(pool).__name__.endswith("StreamOrderedPool") and dev.memory_pool() is pool
    (st,) = driver.pools.values()
    assert st["threshold"] == 2**64 - 1  # freed memory stays reserved for reuse
    pool_stream = driver.key(pool.stream.handle)
    # without a stream: allocated on the pool's own stream, which is then waited for
    syncs = driver.calls.count("stream_synchronize")
    a = pool.alloc(3000)
    assert driver.calls.count("stream_synchronize") == syncs + 1 and st["streams"] == [pool_stream]
    assert a.nbytes == 3000 and a.kind is MemoryKind.DEVICE and a.stream == pool.stream.handle
    # with a stream: ordered on it, no wait; the memory works as any allocation's
    s = dev.create_stream()
    b = pool.alloc(1000, stream=s)
    assert driver.calls.count("stream_synchronize") == syncs + 1 and st["streams"][-1] == driver.key(s.handle)
    x = np.arange(1000, dtype=np.uint8)
    y = np.zeros(1000, np.uint8)
    s.copy_from_host(b, x)
    with dev.alloc(1000) as c2:  # (a copy is between allocations of one size)
        s.copy(c2, b)
        s.copy_to_host(y, c2)
        s.synchronize()
    assert (y == x).all()
    st_before = pool.stats()
    assert (st_before.allocated_bytes, st_before.in_use_bytes, st_before.cached_bytes) == (4000, 4000, 0)
    b.free()  # freed in the order of the stream it was allocated on
    assert st["streams"][-1] == driver.key(s.handle)
    with pytest.raises(Error) as ei:
        b.free()
    assert ei.value.kind is ErrorKind.INVALID_HANDLE
    assert pool.stats().cached_bytes == 1000 and pool.stats().in_use_bytes == 3000
    c = pool.alloc(1000, stream=s)  # the driver reuses the reserved block
    assert pool.stats().allocated_bytes == 4000
    del c  # dropped unfreed: freed in stream order
    gc.collect()
    assert pool.stats().in_use_bytes == 3000
    assert pool.trim() == 1000 and pool.stats().allocated_bytes == 3000
    # refusals
    for bad in (0, -1):
        with pytest.raises(Error) as ei:
            pool.alloc(bad)
        assert ei.value.kind is ErrorKind.INVALID_VALUE
    for wrong in (1.5, True, "8"):  # check_size: not an integer
        with pytest.raises(TypeError, match="nbytes must be an integer"):
            pool.alloc(wrong)
    with pytest.raises(Error) as ei:
        pool.alloc(16, stream=object())
    assert ei.value.kind is ErrorKind.INVALID_VALUE
    # out of memory: the unused reserve is trimmed and the allocation retried once
    keep = pool.alloc(500, stream=s)
    keep.free()
    driver.pool_limit = 3000 + 600
    d = pool.alloc(600, stream=s)  # fits only once the cached 500 bytes are trimmed
    assert pool.stats().allocated_bytes == 3600 and "pool_trim" in driver.calls
    with pytest.raises(Error) as ei:
        pool.alloc(1 << 20, stream=s)
    assert ei.value.kind is ErrorKind.OUT_OF_MEMORY
    a.free()
    d.free()
    dev.close()  # trims the pool
    assert pool.stats().allocated_bytes == 0 and not driver.mem
    handle = driver.key(pool.handle)
    del pool, a, b, d, keep, ei  # (the last error's traceback holds the pool too)
    dev._pool = None
    gc.collect()
    assert handle not in driver.pools  # destroyed with its last reference


def test_sim_pool_falls_back_without_stream_ordered_allocation(sim: Any) -> None:
    module, driver, backend = sim
    driver.pools_supported = 0
    pool = backend.open(0).memory_pool()
    assert type(pool) is MemoryPool and not driver.pools


# ------------------------------------------------------------------ issue 14 items 5 and 8: launch options, IPC


def _vector_add_setup(dev: Any, module: Any, n: int) -> tuple[Any, Any, tuple[Any, ...], np.ndarray[Any, Any]]:
    k = dev.load_module(_image(module, VECTOR_ADD)).kernel("vector_add")
    s = dev.create_stream()
    a = np.arange(n, dtype=np.float32)
    da, db, dc = (dev.alloc(4 * n) for _ in range(3))
    s.copy_from_host(da, a)
    s.copy_from_host(db, a)
    return k, s, (da, db, dc), 2 * a


def test_sim_capability_flags_from_the_launch_attributes(sim: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """COOPERATIVE_LAUNCH and THREAD_BLOCK_CLUSTERS follow the device attributes (CUDA), never the architecture;
    HIP (no launch_ex) advertises neither."""
    module, driver, backend = sim
    flags = backend.devices()[0].capability.flags
    if module is hip_backend:
        assert module.TABLES.functions["launch_ex"] is None
        assert F.COOPERATIVE_LAUNCH not in flags and F.THREAD_BLOCK_CLUSTERS not in flags
        return
    assert F.COOPERATIVE_LAUNCH in flags and F.THREAD_BLOCK_CLUSTERS in flags
    for coop, clusters in ((0, 1), (1, 0), (0, 0)):
        driver.cooperative_supported, driver.clusters_supported = coop, clusters
        fresh = _cls(module, "Backend")().devices()[0].capability.flags  # (a new backend enumerates again)
        assert (F.COOPERATIVE_LAUNCH in fresh, F.THREAD_BLOCK_CLUSTERS in fresh) == (bool(coop), bool(clusters))
        assert fresh & ~(F.COOPERATIVE_LAUNCH | F.THREAD_BLOCK_CLUSTERS) == ADA  # the rest from the tables


def test_sim_cooperative_and_cluster_launches(sim: Any) -> None:
    """Dims with options go to launch_ex (cuLaunchKernelEx) with the config and attributes they ask for, checked
    and unchecked; plain dims never do.  HIP: UNSUPPORTED, raised or returned."""
    module, driver, backend = sim
    dev = backend.open(0)
    n = 4096
    k, s, (da, db, dc), want = _vector_add_setup(dev, module, n)
    args = (da, db, dc, np.uint32(n))
    coop = LaunchDims(16, 256, 128, cooperative=True)
    clus = LaunchDims((16, 2), (256, 1), cluster=(4, 2))
    both = LaunchDims(16, 256, cooperative=True, cluster=2)
    if module is hip_backend:
        for dims in (coop, clus, both):
            with pytest.raises(Error) as ei:
                s.launch(KernelLaunch(k, dims, args))
            assert ei.value.kind is ErrorKind.UNSUPPORTED and ei.value.backend == "ROCM"
            r = s.launch_unchecked(KernelLaunch(k, dims, args))
            assert isinstance(r, Error) and r.kind is ErrorKind.UNSUPPORTED
        assert "launch" not in driver.calls  # nothing launched
        return
    s.launch(KernelLaunch(k, LaunchDims(16, 256), args))  # plain: cuLaunchKernel
    assert driver.launches_ex == [] and driver.calls.count("launch") == 1
    stream = driver.key(s.handle)
    for i, (dims, attrs) in enumerate(((coop, {"cooperative": 1}), (clus, {"cluster": (4, 2, 1)}),
                                       (both, {"cooperative": 1, "cluster": (2, 1, 1)}))):
        s.fill(dc, 0)
        launch = KernelLaunch(k, dims, args)
        if i == 1:
            assert s.launch_unchecked(launch) is None
        else:
            s.launch(launch)
            s.launch(launch)  # (a second time in a row: still the extended launch, never a plain re-issue)
        out = np.zeros(n, np.float32)
        s.copy_to_host(out, dc)
        s.synchronize()
        m = dims.threads
        np.testing.assert_array_equal(out[:m], want[:m])  # the kernel ran with these arguments
        got = driver.launches_ex[-1]
        assert got == {"grid": dims.grid, "block": dims.block, "shared": dims.shared_mem, "stream": stream,
                       "attrs": attrs}
    assert len(driver.launches_ex) == 5 and driver.calls.count("launch") == 1  # (launch_ex runs the kernel itself)
    # what the device cannot do is UNSUPPORTED before any call (checked); a grid too big to be co-resident says so
    dev.descriptor = dataclasses.replace(dev.descriptor, capability=dataclasses.replace(
        dev.descriptor.capability, flags=dev.descriptor.capability.flags & ~F.THREAD_BLOCK_CLUSTERS))
    with pytest.raises(Error) as ei:
        s.launch(KernelLaunch(k, clus, args))
    assert ei.value.kind is ErrorKind.UNSUPPORTED and "THREAD_BLOCK_CLUSTERS" in str(ei.value)
    assert len(driver.launches_ex) == 5
    s.launch(KernelLaunch(k, coop, args))  # (still cooperative)
    big = LaunchDims(132 * 8 + 1, 256, cooperative=True)
    with pytest.raises(Error) as ei:
        s.launch(KernelLaunch(k, big, args))
    e = ei.value
    assert e.kind is ErrorKind.INVALID_VALUE and e.code == module.TABLES.const("status_cooperative_too_large")
    assert "1057 blocks" in str(e) and "at most 1056 blocks fit" in str(e), e  # max_active_blocks(256) x 132
    r = s.launch_unchecked(KernelLaunch(k, big, args))
    assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_VALUE and "resident" in str(r)
    with pytest.raises(Error) as ei:  # argument checks hold on this path too
        s.launch(KernelLaunch(k, coop, args[:3]))
    assert ei.value.kind is ErrorKind.INVALID_VALUE and "4 arguments, 3 given" in str(ei.value)
    r = s.launch_unchecked(KernelLaunch(k, coop, args[:3]))
    assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_VALUE
    with pytest.raises(Error) as ei:
        s.launch(KernelLaunch(k, LaunchDims(16, 2048, cooperative=True), args))  # validated against the limits
    assert ei.value.kind is ErrorKind.INVALID_VALUE and "2048" in str(ei.value)
    dev.close()
    with pytest.raises(Error) as ei:
        s.launch(KernelLaunch(k, coop, args))
    assert ei.value.kind is ErrorKind.INVALID_HANDLE


def test_sim_ipc_export_import_close(sim: Any) -> None:
    """Allocation.export_ipc -> a picklable IpcHandle; Device.import_ipc in another process (simulated: another
    pid) opens the same memory; free() and drop close the mapping (ipc_close), never free it; refusals."""
    import pickle
    from ironaccelerator import IpcHandle
    module, driver, backend = sim
    dev = backend.open(0)
    s = dev.create_stream()
    src = dev.alloc(256)
    s.copy_from_host(src, np.arange(64, dtype=np.float32))
    h = src.export_ipc()
    assert isinstance(h, IpcHandle) and h.backend is module.TABLES.kind and h.nbytes == 256 and h.device == 0
    assert h.pid == os.getpid() and len(h.data) == 64 and h.data[:4] == b"IPC!"
    assert pickle.loads(pickle.dumps(h)) == h and "256 bytes" in repr(h)
    with pytest.raises(Error) as ei:  # the vendors refuse opening in the exporting process: said before the call
        dev.import_ipc(h)
    assert ei.value.kind is ErrorKind.INVALID_VALUE and "this process" in str(ei.value)
    other = dataclasses.replace(pickle.loads(pickle.dumps(h)), pid=h.pid + 1)  # as another process receives it
    imp = dev.import_ipc(other)
    assert imp.ptr == src.ptr and imp.nbytes == 256 and imp.kind is MemoryKind.DEVICE and imp.ipc_handle == other
    out = np.zeros(64, np.float32)
    s.copy_to_host(out, imp)
    s.synchronize()
    np.testing.assert_array_equal(out, np.arange(64, dtype=np.float32))
    imp.free()
    assert driver.ipc_closed == [src.ptr] and src.ptr in driver.mem  # closed, not freed
    with pytest.raises(Error) as ei:
        imp.free()
    assert ei.value.kind is ErrorKind.INVALID_HANDLE and driver.ipc_closed == [src.ptr]
    dropped = dev.import_ipc(other)
    del dropped
    gc.collect()
    assert driver.ipc_closed == [src.ptr, src.ptr] and driver.ipc_open[src.ptr] == 0
    again = dev.import_ipc(other)
    with pytest.raises(Error) as ei:
        again.export_ipc()  # the exporter's memory: pass the handle on instead
    assert ei.value.kind is ErrorKind.UNSUPPORTED
    assert again.free_unchecked() is None and len(driver.ipc_closed) == 3
    # refusals: not a handle, another backend's, bad bytes; slices, other kinds, pool memory, freed memory
    with pytest.raises(TypeError):
        dev.import_ipc(h.data)
    wrong = BackendKind.ROCM if module is cuda_backend else BackendKind.CUDA
    for bad in (dataclasses.replace(other, backend=wrong), dataclasses.replace(other, data=other.data[:63]),
                dataclasses.replace(other, nbytes=0)):
        with pytest.raises(Error) as ei:
            dev.import_ipc(bad)
        assert ei.value.kind is ErrorKind.INVALID_VALUE, bad
    with pytest.raises(Error) as ei:  # a handle the driver does not know: its error
        dev.import_ipc(dataclasses.replace(other, data=bytes(64)))
    assert ei.value.kind is ErrorKind.INVALID_VALUE and ei.value.code == 1
    with pytest.raises(Error) as ei:
        src[16:32].export_ipc()
    assert ei.value.kind is ErrorKind.INVALID_VALUE and "slice" in str(ei.value)
    for kind in (MemoryKind.HOST_PINNED, MemoryKind.UNIFIED):
        with dev.alloc(64, kind) as a, pytest.raises(Error) as ei:
            a.export_ipc()
        assert ei.value.kind is ErrorKind.UNSUPPORTED and kind.name in str(ei.value)
    for pools in (0, 1):  # the caching pool's blocks, the stream-ordered pool's memory
        driver.pools_supported = pools
        fresh = backend.open(0)
        block = fresh.memory_pool().alloc(64, fresh.create_stream() if pools else None)
        with pytest.raises(Error) as ei:
            block.export_ipc()
        assert ei.value.kind is (ErrorKind.UNSUPPORTED if pools else ErrorKind.INVALID_VALUE) and "pool" in str(ei.value)
        block.free()
    src.free()
    with pytest.raises(Error) as ei:
        src.export_ipc()
    assert ei.value.kind is ErrorKind.INVALID_HANDLE


# ------------------------------------------------------------------ on a GPU (pytest -m gpu)

SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float *x, float *y, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


@pytest.fixture(scope="module")
def cuda_device() -> Any:
    try:
        backend = BackendRegistry.default().get(BackendKind.CUDA)
        devices = backend.devices()
    except Error as e:
        pytest.fail(f"the gpu tests need a CUDA device: {e}")
    assert devices, "no CUDA device"
    dev = backend.open(0)
    yield dev
    dev.synchronize()
    dev.close()


@pytest.mark.gpu
def test_gpu_describe(cuda_device: Any) -> None:
    d = cuda_device.descriptor
    assert d.vendor is Vendor.NVIDIA and d.total_memory > 1 << 30 and d.compute_units >= 1
    assert d.capability.vendor_version.startswith("sm_") and F.FP64 in d.capability.flags
    assert d.limits.max_threads_per_block >= 1024 and d.limits.max_block[0] >= 1024
    assert cuda_device.backend.driver_version() >= 12000
    print(BackendRegistry.default().report())


@pytest.mark.gpu
def test_gpu_vector_add_nvrtc(cuda_device: Any) -> None:
    n = 1 << 20
    a = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    b = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    c = np.zeros(n, np.float32)
    k = cuda_device.load_module(VECTOR_ADD).kernel("vector_add")
    assert k.param_sizes == (8, 8, 8, 4) and k.num_args == 4
    s = cuda_device.create_stream()
    with cuda_device.alloc(a.nbytes) as da, cuda_device.alloc(b.nbytes) as db, cuda_device.alloc(c.nbytes) as dc:
        s.copy_from_host(da, a)
        s.copy_from_host(db, b)
        e0 = s.record_event()
        s.launch(KernelLaunch(k, LaunchDims((n + 255) // 256, 256), [da, db, dc, np.uint32(n)]))
        e1 = s.record_event()
        s.copy_to_host(c, dc)
        s.synchronize()
        assert e0.elapsed_ms(e1) >= 0.0
        with pytest.raises(Error) as ei:
            s.launch(KernelLaunch(k, LaunchDims(1, 1), [da, db, dc]))
        assert ei.value.kind is ErrorKind.INVALID_VALUE
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.gpu
def test_gpu_issue14_fill_offsets_views_attributes_graphs_callbacks(cuda_device: Any) -> None:
    """Issue 14 on a real device: fills and offset copies, host views of pinned memory, kernel attributes and
    occupancy, a captured graph replayed, a host callback after the work, the kernel cache."""
    dev = cuda_device
    n = 1 << 16
    k = dev.load_module(VECTOR_ADD).kernel("vector_add")
    at = k.attributes
    assert 1 <= at.max_threads_per_block <= 1024 and at.preferred_multiple == 32 and at.registers is not None
    assert k.max_active_blocks(256) >= 1
    s = dev.create_stream()
    da, db, dc = (dev.alloc(4 * n) for _ in range(3))
    s.fill(da, 0x3F800000, width=4)  # 1.0f
    s.fill(db, 0)
    host = np.arange(n, dtype=np.float32)
    s.copy_from_host(db, host, 4 * (n - 8), dst_offset=32, src_offset=0)  # db[8:] = host[:n-8]
    with s.capture() as g:
        s.launch(KernelLaunch(k, LaunchDims(n // 256, 256), [da, db, dc, np.uint32(n)]))
    g.launch(s)
    ran: list[bool] = []
    s.add_callback(lambda: ran.append(True))
    pinned = dev.alloc(4 * n, MemoryKind.HOST_PINNED)
    s.copy(pinned, dc)
    s.synchronize()
    assert s.drain_callbacks(60) and ran == [True]
    view = np.frombuffer(pinned.host_view(), np.float32)
    want = np.ones(n, np.float32)
    want[8:] += host[: n - 8]
    np.testing.assert_array_equal(view, want)
    del view
    g.close()
    for x in (da, db, dc, pinned):
        x.free()


@pytest.mark.gpu
def test_gpu_ptx_cubin_and_scalar_args(cuda_device: Any) -> None:
    cc = cuda_device.arch.replace(".", "")
    ptx = cuda_backend.compile_source(SAXPY, f"compute_{cc}")
    cubin = cuda_backend.compile_source(SAXPY, f"sm_{cc}", binary=True)
    n = 4096
    x = np.arange(n, dtype=np.float32)
    s = cuda_device.create_stream()
    for image in (cubin, ptx.decode()):
        try:
            k = cuda_device.load_module(image).kernel("saxpy")
        except Error as e:
            if e.code == cuda_backend.TABLES.const("status_unsupported_ptx"):
                continue  # a compiler newer than the driver: the source path falls back to the cubin
            raise
        y = np.ones(n, np.float32)
        with cuda_device.alloc(x.nbytes) as dx, cuda_device.alloc(x.nbytes) as dy:
            s.copy_from_host(dx, x)
            s.copy_from_host(dy, y)
            s.launch(KernelLaunch(k, LaunchDims(n // 128, 128), [Scalar(2.0, DType.F32), dx, dy, np.uint32(n)]))
            s.copy_to_host(y, dy)
            s.synchronize()
        np.testing.assert_array_equal(y, 2 * x + 1)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", [MemoryKind.HOST_PINNED, MemoryKind.UNIFIED])
def test_gpu_pinned_and_unified_memory(cuda_device: Any, kind: MemoryKind) -> None:
    data = np.arange(1 << 16, dtype=np.uint8)
    s = cuda_device.create_stream()
    with cuda_device.alloc(data.nbytes, kind) as a, cuda_device.alloc(data.nbytes) as d:
        assert a.kind is kind
        s.copy_from_host(a, data)
        s.copy(d, a)
        out = np.zeros_like(data)
        s.copy_to_host(out, d)
        s.synchronize()
    np.testing.assert_array_equal(out, data)


@pytest.mark.gpu
def test_gpu_strided_copies_and_prefetch(cuda_device: Any) -> None:
    """Issue 14 on a real device: copy_2d / copy_3d (cuMemcpy2DAsync / cuMemcpy3DAsync) host to device, device to
    device and back, against numpy's own slicing; prefetch of managed memory to the device and back to the host
    (cuMemPrefetchAsync with a CUmemLocation) around a kernel that reads it."""
    dev = cuda_device
    s = dev.create_stream()
    img = np.random.default_rng(3).integers(0, 256, (64, 100), dtype=np.uint8)  # 64 rows of 100 bytes
    vol = np.random.default_rng(4).integers(0, 256, (5, 6, 40), dtype=np.uint8)
    with dev.alloc(64 * 128) as pitched, dev.alloc(64 * 128) as other, dev.alloc(8 * 8 * 64) as box:
        s.fill(pitched, 0)
        s.copy_2d(pitched, img, 100, 64, dst_pitch=128)  # rows padded to 128 bytes, as cuMemAllocPitch would
        s.copy_2d(other, pitched, 30, 20, src_pitch=128, dst_pitch=32, src_offset=(10, 5))  # a 20 x 30 window
        window = np.zeros((20, 32), np.uint8)
        s.copy_2d(window, other, 30, 20, src_pitch=32, dst_pitch=32)
        s.copy_3d(box, vol, (40, 6, 5), dst_pitch=(64, 8 * 64), dst_offset=(0, 1, 2))
        back = np.zeros((5, 6, 40), np.uint8)
        s.copy_3d(back, box, (40, 6, 5), src_pitch=(64, 8 * 64), src_offset=(0, 1, 2))
        round_trip = np.zeros((64, 100), np.uint8)
        s.copy_2d(round_trip, pitched, 100, 64, src_pitch=128)
        s.synchronize()
    np.testing.assert_array_equal(round_trip, img)
    np.testing.assert_array_equal(window[:, :30], img[5:25, 10:40])
    np.testing.assert_array_equal(back, vol)
    if F.UNIFIED_MEMORY not in dev.descriptor.capability.flags:
        return
    n = 1 << 16
    k = dev.load_module(VECTOR_ADD).kernel("vector_add")
    a, b, c = (dev.alloc(4 * n, MemoryKind.UNIFIED) for _ in range(3))
    va, vb, vc = (np.frombuffer(x.host_view(), np.float32) for x in (a, b, c))
    va[:] = np.arange(n, dtype=np.float32)
    vb[:] = 2.0
    for x in (a, b, c):
        s.prefetch(x)  # to the stream's device
    s.launch(KernelLaunch(k, LaunchDims(n // 256, 256), [a, b, c, np.uint32(n)]))
    s.prefetch(c, "host")
    s.prefetch(a, dev, 4 * 1024, offset=4 * 1024)
    s.synchronize()
    np.testing.assert_array_equal(vc, np.arange(n, dtype=np.float32) + 2.0)
    del va, vb, vc
    with dev.alloc(64) as d:
        with pytest.raises(Error) as ei:
            s.prefetch(d)
        assert ei.value.kind is ErrorKind.INVALID_VALUE
    for x in (a, b, c):
        x.free()


@pytest.mark.gpu
def test_gpu_stream_ordered_pool(cuda_device: Any) -> None:
    pool = cuda_device.memory_pool()
    assert type(pool).__name__ == "CudaStreamOrderedPool"  # every CUDA >= 11.2 GPU supports it
    s = cuda_device.create_stream()
    x = np.arange(1 << 20, dtype=np.float32)
    y = np.zeros_like(x)
    a = pool.alloc(x.nbytes)  # usable on any stream at once
    b = pool.alloc(x.nbytes, stream=s)  # ordered on s
    s.copy_from_host(a, x)
    s.copy(b, a)
    s.copy_to_host(y, b)
    s.synchronize()
    np.testing.assert_array_equal(y, x)
    st = pool.stats()
    assert st.in_use_bytes >= 2 * x.nbytes and st.allocated_bytes >= st.in_use_bytes
    a.free()
    b.free()
    s.synchronize()
    assert pool.stats().in_use_bytes == 0 and pool.stats().cached_bytes > 0  # kept for reuse
    c = pool.alloc(x.nbytes, stream=s)
    c.free()
    s.synchronize()
    assert pool.trim() > 0 and pool.stats().allocated_bytes == 0
    # API mode: the allocations are the compiled _PoolMemory (freed in C); dropped, or freed on a thread
    # where nothing is current yet, they go back to the pool all the same
    if cuda_device.api.modules["driver"].BINDING_MODE == "api":
        assert pool._compiled is not None and type(a).__mro__[1].__name__ == "_PoolMemory"
    d = pool.alloc(4096, stream=s)
    assert d.__cuda_array_interface__["data"] == (d.ptr, False) and d.ptr != 0
    del d
    gc.collect()
    e = pool.alloc(4096, stream=s)
    t = threading.Thread(target=e.free)
    t.start()
    t.join()
    s.synchronize()
    assert e.freed and pool.stats().in_use_bytes == 0


@pytest.mark.gpu
def test_gpu_cupy_interop_zero_copy(cuda_device: Any) -> None:
    cp = pytest.importorskip("cupy")
    data = np.arange(256, dtype=np.uint8)
    s = cuda_device.create_stream()
    with cuda_device.alloc(256) as a:
        s.copy_from_host(a, data)
        s.synchronize()
        via_cai = cp.asarray(a)  # __cuda_array_interface__
        via_dlpack = cp.from_dlpack(a)
        for arr in (via_cai, via_dlpack):
            assert arr.data.ptr == a.ptr and arr.shape == (256,) and arr.dtype == cp.uint8
            np.testing.assert_array_equal(cp.asnumpy(arr), data)
        via_cai[:] = 7  # written by CuPy, read back by us: the same memory
        cp.cuda.Device().synchronize()
        out = np.zeros(256, np.uint8)
        s.copy_to_host(out, a)
        s.synchronize()
        assert (out == 7).all()
        del via_cai, via_dlpack, arr  # before the allocation is freed


@pytest.mark.gpu
def test_gpu_torch_interop_zero_copy(cuda_device: Any) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch has no CUDA")
    with cuda_device.alloc(1024) as a:
        t = torch.from_dlpack(a)
        assert t.data_ptr() == a.ptr and t.dtype == torch.uint8 and t.shape == (1024,) and t.is_cuda
        t.fill_(3)
        torch.cuda.synchronize()
        out = np.zeros(1024, np.uint8)
        s = cuda_device.create_stream()
        s.copy_to_host(out, a)
        s.synchronize()
        assert (out == 3).all()
        del t


@pytest.mark.gpu
def test_gpu_typed_views_with_cupy_both_ways(cuda_device: Any) -> None:
    """Typed views to CuPy (versioned DLPack and __cuda_array_interface__, with the stream handshake) and CuPy
    arrays back (from_dlpack, from_cuda_array_interface): pointer equality and values."""
    cp = pytest.importorskip("cupy")
    s = cuda_device.create_stream()
    x = np.arange(512, dtype=np.float32).reshape(16, 32)
    with cuda_device.alloc(x.nbytes + 256) as a:
        s.copy_from_host(a, x, dst_offset=256)
        v = a.view(DType.F32, (16, 32), offset=256, stream=s)
        with cp.cuda.Stream(non_blocking=True) as consumer:
            y = cp.from_dlpack(v)  # CuPy passes its stream: it waits on an event of s
            assert y.data.ptr == a.ptr + 256 and y.shape == (16, 32) and y.dtype == cp.float32
            np.testing.assert_array_equal(cp.asnumpy(y), x)
            z = cp.asarray(a.view(DType.F32, (16, 16), strides=(32, 2), offset=256, stream=s))
            np.testing.assert_array_equal(cp.asnumpy(z), x[:, ::2])
            consumer.synchronize()
        c = cp.arange(100, dtype=cp.int32)
        cp.cuda.Device().synchronize()
        for b in (cuda_device.from_dlpack(c), cuda_device.from_cuda_array_interface(c)):
            assert b.ptr == c.data.ptr and b.nbytes == 400 and b.dtype is DType.I32
            out = np.zeros(100, np.int32)
            s.copy_to_host(out, b)
            s.synchronize()
            np.testing.assert_array_equal(out, np.arange(100))
            b.free()
        del y, z, v


@pytest.mark.gpu
def test_gpu_typed_views_with_torch_both_ways(cuda_device: Any) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch has no CUDA")
    s = cuda_device.create_stream()
    with cuda_device.alloc(4096) as a:
        s.fill(a, 0)
        v = a.view(np.int64, (8, 8), stream=s)
        t = torch.from_dlpack(v)
        assert t.data_ptr() == a.ptr and t.dtype == torch.int64 and tuple(t.shape) == (8, 8) and t.is_cuda
        t += 5
        torch.cuda.synchronize()
        out = np.zeros(64, np.int64)
        s.copy_to_host(out, a, 512)
        s.synchronize()
        assert (out == 5).all()
        u = torch.arange(64, dtype=torch.float32, device="cuda")
        torch.cuda.synchronize()
        b = cuda_device.from_dlpack(u)
        assert b.ptr == u.data_ptr() and b.dtype is DType.F32 and b.shape == (64,)
        b.free()
        del t, v


# issue 10 on a real device (the same checks run on the stub driver in test_gpu_correctness.py)

_LIFETIME_CHILD = r"""
import gc, sys
import numpy as np
import ironaccelerator as ia
from ironaccelerator.backends.cuda import driver
dev = ia.BackendRegistry.default().get(ia.BackendKind.CUDA).open(0)
assert driver.cuDevicePrimaryCtxGetState(dev.handle)[1] == 1
s = dev.create_stream()
a = dev.alloc(1 << 20)
k = dev.load_module('extern "C" __global__ void f(float *x) { x[threadIdx.x] = 1.0f; }').kernel("f")
p = dev.memory_pool().alloc(4096, s)
s.launch(ia.KernelLaunch(k, ia.LaunchDims(1, 32), (a,)))
out = np.zeros(32, np.float32)
s.copy_to_host(out, a)
s.synchronize()
assert (out == 1).all() or dev.descriptor.name.startswith("Stub "), out  # (the stub runs no kernels)
dev.close()
try:
    s.launch(ia.KernelLaunch(k, ia.LaunchDims(1, 32), (a,)))
except ia.Error as e:
    assert e.kind is ia.ErrorKind.INVALID_HANDLE, e
else:
    raise AssertionError("launched on a closed device")
assert driver.cuDevicePrimaryCtxGetState(dev.handle)[1] == 1, "released while a, p, s, k are alive"
a.free()
p.free()
del s, k, p, a
gc.collect()
assert driver.cuDevicePrimaryCtxGetState(dev.handle)[1] == 0, "not released when everything is gone"
print("ok")
"""


@pytest.mark.gpu
def test_gpu_close_releases_the_primary_context_once_everything_is_gone() -> None:
    """In a process of its own (the module's device would hold the context): the driver reports the primary
    context active until the closed device's last stream, kernel and allocation are dropped, then inactive."""
    proc = subprocess.run([sys.executable, "-c", _LIFETIME_CHILD], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


@pytest.mark.gpu
def test_gpu_copies_events_sizes_and_unchecked_launches(cuda_device: Any) -> None:
    s = cuda_device.create_stream()
    n = 1 << 14
    a, b = cuda_device.alloc(4 * n), cuda_device.alloc(4 * n)
    # host buffers of copies ordered only by events are released as the events complete (bounded, not 200)
    for i in range(200):
        s.copy_from_host(a, np.full(n, i, np.float32))
        s.record_event().synchronize()
        assert len(s._inflight) == 0
    out = np.zeros(n, np.float32)
    s.copy(b, a)
    s.copy_to_host(out, b)
    e = s.record_event()
    while not e.query():
        pass
    assert (out == 199).all() and len(s._inflight) == 0
    with cuda_device.alloc(16) as small:
        with pytest.raises(Error) as ei:
            s.copy(small, a)  # no silent truncation
        assert ei.value.kind is ErrorKind.INVALID_VALUE and str(4 * n) in str(ei.value)
    k = cuda_device.load_module(VECTOR_ADD).kernel("vector_add")
    r = s.launch_unchecked(KernelLaunch(k, LaunchDims(1, 32), (a, a, b)))  # one argument missing
    assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_VALUE and "4 arguments, 3 given" in str(r)
    gone = cuda_device.alloc(64)
    gone.free()
    r = s.launch_unchecked(KernelLaunch(k, LaunchDims(1, 32), (a, gone, b, np.uint32(16))))
    assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE
    assert cuda_device.descriptor.limits.max_alloc == cuda_device.descriptor.total_memory
    with pytest.raises(Error) as ei:
        cuda_device.alloc(cuda_device.descriptor.total_memory * 4)
    assert ei.value.kind is ErrorKind.OUT_OF_MEMORY and str(cuda_device.descriptor.total_memory * 4) in str(ei.value)
    s.synchronize()
    a.free()
    b.free()


# issue 14 items 5 and 8 on the device: a cooperative grid that syncs, a cluster launch (sm_90), IPC across processes

GRID_SYNC = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
// each block writes its slot, the whole grid syncs, then each block reads its neighbour's slot: right only if
// every block wrote before any read (a grid-wide barrier)
extern "C" __global__ void neighbour(unsigned int *slots, unsigned int *out) {
    cg::grid_group grid = cg::this_grid();
    unsigned int b = blockIdx.x, n = gridDim.x;
    if (threadIdx.x == 0) slots[b] = 1000u + b;
    grid.sync();
    if (threadIdx.x == 0) out[b] = slots[(b + 1) % n];
}
"""

CLUSTER_RANK = r"""
// the block's rank in its cluster and the cluster's size, from PTX's special registers (no header needed)
extern "C" __global__ void rank(unsigned int *out) {
    unsigned int r, n;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    if (threadIdx.x == 0) out[blockIdx.x] = r * 1000u + n;
}
"""


def _cooperative_groups_include() -> list[str]:
    """The include directories NVRTC needs for cooperative_groups.h (the toolkit's, else a CUDA runtime wheel's;
    CUDA 13's headers include libcu++ from include/cccl); empty if none is found."""
    import importlib.util
    dirs = [os.path.join(os.environ[v], "include") for v in ("CUDA_HOME", "CUDA_PATH") if v in os.environ]
    dirs.append("/usr/local/cuda/include")
    for pkg in ("nvidia.cu13", "nvidia.cuda_runtime"):
        try:
            spec = importlib.util.find_spec(pkg)
        except (ImportError, ValueError):
            continue
        if spec is not None:
            dirs += [os.path.join(p, "include") for p in spec.submodule_search_locations or []]
    for d in dirs:
        if os.path.isfile(os.path.join(d, "cooperative_groups.h")):
            return [d] + [x for x in (os.path.join(d, "cccl"),) if os.path.isdir(x)]
    return []


@pytest.mark.gpu
def test_gpu_cooperative_grid_sync(cuda_device: Any) -> None:
    dev = cuda_device
    assert F.COOPERATIVE_LAUNCH in dev.descriptor.capability.flags  # (H100/H200 report the attribute)
    include = _cooperative_groups_include()
    if not include:
        pytest.skip("cooperative_groups.h not found (CUDA toolkit or the nvidia-cuda-runtime wheel)")
    k = dev.load_module(GRID_SYNC, include_dirs=include).kernel("neighbour")
    per_sm = k.max_active_blocks(128)
    n = per_sm * dev.descriptor.compute_units  # every block resident at once: the most a cooperative grid may be
    s = dev.create_stream()
    slots, out = dev.alloc(4 * n), dev.alloc(4 * n)
    s.fill(slots, 0)
    s.launch(KernelLaunch(k, LaunchDims(n, 128, cooperative=True), (slots, out)))
    got = np.zeros(n, np.uint32)
    s.copy_to_host(got, out)
    s.synchronize()
    np.testing.assert_array_equal(got, 1000 + (np.arange(n, dtype=np.uint32) + 1) % n)
    with pytest.raises(Error) as ei:  # one block more than fits: the driver refuses, we say why
        s.launch(KernelLaunch(k, LaunchDims(n + 1, 128, cooperative=True), (slots, out)))
    assert ei.value.kind is ErrorKind.INVALID_VALUE and f"at most {n} blocks" in str(ei.value), ei.value
    s.synchronize()
    slots.free()
    out.free()


@pytest.mark.gpu
def test_gpu_cluster_launch(cuda_device: Any) -> None:
    dev = cuda_device
    if float(dev.arch) < 9.0:
        pytest.skip(f"thread-block clusters need compute capability 9.0 (this is {dev.arch})")
    assert F.THREAD_BLOCK_CLUSTERS in dev.descriptor.capability.flags
    k = dev.load_module(CLUSTER_RANK).kernel("rank")
    s = dev.create_stream()
    n, c = 32, 4
    out = dev.alloc(4 * n)
    s.launch(KernelLaunch(k, LaunchDims(n, 64, cluster=c), (out,)))
    got = np.zeros(n, np.uint32)
    s.copy_to_host(got, out)
    s.synchronize()
    np.testing.assert_array_equal(got, (np.arange(n, dtype=np.uint32) % c) * 1000 + c)
    assert s.launch_unchecked(KernelLaunch(k, LaunchDims(n, 64, cluster=(2, 1, 1)), (out,))) is None
    s.copy_to_host(got, out)
    s.synchronize()
    np.testing.assert_array_equal(got, (np.arange(n, dtype=np.uint32) % 2) * 1000 + 2)
    out.free()


def _ipc_child(handle: Any, n: int) -> None:
    """In another process: open the exporter's memory, check what it holds, write it back doubled."""
    dev = BackendRegistry.default().get(BackendKind.CUDA).open(0)
    mem = dev.import_ipc(handle)
    s = dev.create_stream()
    got = np.zeros(n, np.float32)
    s.copy_to_host(got, mem)
    s.synchronize()
    assert (got == np.arange(n, dtype=np.float32)).all(), got[:8]
    s.copy_from_host(mem, got * 2)
    s.synchronize()
    mem.free()  # cuIpcCloseMemHandle: the exporter's memory stays


@pytest.mark.gpu
def test_gpu_ipc_across_processes(cuda_device: Any) -> None:
    import multiprocessing
    dev = cuda_device
    n = 1 << 16
    s = dev.create_stream()
    src = dev.alloc(4 * n)
    s.copy_from_host(src, np.arange(n, dtype=np.float32))
    s.synchronize()
    h = src.export_ipc()
    with pytest.raises(Error) as ei:
        dev.import_ipc(h)  # CUDA opens a handle only in another process
    assert ei.value.kind is ErrorKind.INVALID_VALUE
    p = multiprocessing.get_context("spawn").Process(target=_ipc_child, args=(h, n))
    p.start()
    p.join(240)
    assert p.exitcode == 0
    got = np.zeros(n, np.float32)
    s.copy_to_host(got, src)
    s.synchronize()
    np.testing.assert_array_equal(got, 2 * np.arange(n, dtype=np.float32))  # what the child wrote
    src.free()
