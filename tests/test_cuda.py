"""Real-header tests: the CUDA 13.0 driver API and NVRTC, generated, built, imported and (NVRTC) run."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ironaccelerator_gen import pipeline
from ironaccelerator_gen.frontend import ParseRequest, parse
from ironaccelerator_gen.ir import Location

from conftest import CUDA_INCLUDE, GENERATED, ROOT, SPECS, site_file

needs_cuda = pytest.mark.skipif(not (CUDA_INCLUDE / "cuda.h").is_file(), reason="CUDA toolkit headers not installed")
CUDA129 = site_file("nvidia/cuda_runtime/include/cuda.h")


@pytest.fixture(scope="module")
def generated() -> pipeline.Result:
    return pipeline.compile_specs(SPECS)


def _lib(result: pipeline.Result, name: str):  # type: ignore[no-untyped-def]
    """The CUDA library ``name`` (by vendor too: a hip.runtime may sit beside a cuda.runtime)."""
    return next(lib for lib in result.libraries if (lib.spec.vendor.value, lib.spec.library.value) == ("cuda", name))


@needs_cuda
def test_driver_binds_the_whole_api(generated: pipeline.Result) -> None:
    drv = _lib(generated, "driver")
    assert drv.sdk_version == "13.0"
    assert len(drv.functions) >= 440
    by = {f.public: f for f in drv.functions}
    # renames from the header's #defines, including those through __CUDA_API_PTDS/PTSZ
    assert by["cuMemAlloc"].symbol == "cuMemAlloc_v2"
    assert by["cuCtxCreate"].symbol == "cuCtxCreate_v4"
    assert by["cuMemcpyHtoD"].symbol == "cuMemcpyHtoD_v2"
    assert by["cuMemcpyHtoD"].per_thread_symbol == "cuMemcpyHtoD_v2_ptds"
    assert by["cuMemcpyHtoDAsync"].per_thread_symbol == "cuMemcpyHtoDAsync_v2_ptsz"
    assert by["cuInit"].per_thread_symbol is None
    # minimum versions from cudaTypedefs.h's PFN_<name>_v<version>
    assert by["cuMemAlloc"].min_version == "3.2"
    assert by["cuInit"].min_version == "2.0"
    assert by["cuFuncGetParamInfo"].min_version == "12.4"
    # the ABI pin is the PFN_ version whose prototype is the bound declaration: cuCtxCreate has PFNs
    # 3020 (_v2), 11040 (_v3) and 12050 (_v4, the one cuda.h binds) - neither the lowest nor blindly the highest
    assert (by["cuCtxCreate"].symbol, by["cuCtxCreate"].abi_version) == ("cuCtxCreate_v4", 12050)
    assert (by["cuStreamGetCaptureInfo"].symbol, by["cuStreamGetCaptureInfo"].abi_version) == ("cuStreamGetCaptureInfo_v3", 12030)
    assert by["cuMemAlloc"].abi_version == 3020
    # symbols are resolved through cuGetProcAddress with those pins (falling back to dlsym)
    assert drv.resolver.kind == "proc_address" and drv.resolver.symbol == "cuGetProcAddress_v2"
    # (the v2 form's trailing status parameter: the shape's optional one; the declared kind's keys, bound)
    function, per_thread = drv.resolver.value("function"), drv.resolver.value("per_thread_flag")
    assert function is not None and function.optional == 1 and per_thread is not None and per_thread.value == 2
    # statuses that are not failures
    assert by["cuStreamQuery"].status_codes == (600,)
    # graphics interop excluded; nothing from cudaTypedefs.h bound
    assert "cuDeviceGetNvSciSyncAttributes" not in by
    assert not any(name.startswith("PFN_") for name in by)
    # parameter roles
    roles = {p.name: p.role for p in by["cuMemAlloc"].params}
    assert roles == {"dptr": "out", "bytesize": "in"}
    assert {p.name: p.role for p in by["cuDeviceGetName"].params} == {"name": "out_buffer", "len": "capacity", "dev": "in"}
    assert {p.name: p.role for p in by["cuGetErrorName"].params} == {"error": "in", "pStr": "out_str"}


@needs_cuda
def test_every_cuda_error_code_is_mapped(generated: pipeline.Result) -> None:
    drv = _lib(generated, "driver")
    header_codes = {c.name: c.value for e in drv.enums if e.name == "CUresult" for c in e.constants}
    assert len(header_codes) >= 100
    mapped = {e.name for e in drv.errors}
    assert set(header_codes) - mapped == {"CUDA_SUCCESS"}
    kinds = {e.name: e.kind for e in drv.errors}
    assert kinds["CUDA_ERROR_OUT_OF_MEMORY"] == "OUT_OF_MEMORY"
    assert kinds["CUDA_ERROR_NO_DEVICE"] == "NO_DEVICE"
    assert kinds["CUDA_ERROR_NOT_READY"] == "NOT_READY"


def test_generation_is_deterministic(generated: pipeline.Result) -> None:
    again = pipeline.compile_specs(SPECS)
    assert again.files == generated.files
    for text in generated.files.values():
        assert "/work/" not in text and str(ROOT) not in text and "/usr/local" not in text.split("sdk_roots")[0]


def test_generated_is_fresh() -> None:
    """`generate --check` finds nothing to change in the checked-in generated/."""
    r = subprocess.run([sys.executable, "-m", "ironaccelerator_gen", "generate", "--check"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_missing_sdk_changes_nothing_of_its_vendor(tmp_path: Path) -> None:
    """A machine without one vendor's headers (here: every vendor, each in turn, pointed at an empty
    directory) leaves that vendor's checked-in files alone: skipping is not deleting."""
    for vendor in ("hip", "opencl", "cuda"):
        result = pipeline.compile_specs(SPECS, {vendor: str(tmp_path)})
        assert any(s.startswith(f"{vendor}.") for s in result.skipped), result.skipped
        assert pipeline.diff(result.files, GENERATED, result.keep) == [], vendor


@pytest.mark.skipif(CUDA129 is None, reason="nvidia-cuda-runtime-cu12 (CUDA 12.9 cuda.h) not installed")
def test_generates_from_cuda_12_9() -> None:
    assert CUDA129 is not None
    result = pipeline.compile_specs(SPECS, {"cuda": str(CUDA129.parent)}, only=["cuda.driver"])
    drv = _lib(result, "driver")
    assert drv.sdk_version == "12.9"
    assert len(drv.functions) >= 400
    assert {f.public: f.symbol for f in drv.functions}["cuMemAlloc"] == "cuMemAlloc_v2"
    # the 13.0-only error code is tolerated by its `since:` and absent here
    assert "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER" not in {e.name for e in drv.errors}


def test_driver_import_needs_no_driver() -> None:
    if ctypes.util.find_library("cuda"):
        pytest.skip("a CUDA driver is installed: the no-driver path cannot be observed")
    code = (
        "from ironaccelerator import Error, ErrorKind\n"
        "from ironaccelerator.backends.cuda import driver\n"
        "assert not driver.has('cuInit')\n"
        "try:\n    driver.cuInit(0)\nexcept Error as e:\n"
        "    assert e.kind is ErrorKind.LIBRARY_NOT_FOUND and 'libcuda.so.1' in str(e), e\n"
        "    assert e.function == 'cuInit' and e.backend == 'CUDA'\n"
        "    print(driver.BINDING_MODE)\n"
        "else:\n    raise SystemExit('no error')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(GENERATED)},
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


# ------------------------------------------------------------------ NVRTC, for real

VADD = b"""
extern "C" __global__ void vadd(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""


@pytest.fixture(scope="module")
def nvrtc():  # type: ignore[no-untyped-def]
    from ironaccelerator.backends.cuda import nvrtc as mod
    if not mod.has("nvrtcVersion"):
        pytest.skip("libnvrtc not found (pip install nvidia-cuda-nvrtc)")
    return mod


def test_nvrtc_binding_is_compiled(nvrtc) -> None:  # type: ignore[no-untyped-def]
    assert nvrtc.BINDING_MODE == "api", "run `ironaccel-gen build` (make test does) to build the cffi modules"


def test_nvrtc_compiles_vector_add_to_ptx(nvrtc) -> None:  # type: ignore[no-untyped-def]
    major, minor = nvrtc.nvrtcVersion()
    assert major >= 12
    prog = nvrtc.nvrtcCreateProgram(VADD, "vadd.cu")
    try:
        nvrtc.nvrtcCompileProgram(prog, ["--gpu-architecture=compute_90", "-default-device"])
        ptx = nvrtc.nvrtcGetPTX(prog)
        assert ".entry vadd" in ptx and ".target sm_90" in ptx
        assert isinstance(nvrtc.nvrtcGetProgramLog(prog), str)
    finally:
        assert nvrtc.nvrtcDestroyProgram(prog) == nvrtc.ffi.NULL


def test_nvrtc_compile_error_carries_the_log(nvrtc) -> None:  # type: ignore[no-untyped-def]
    from ironaccelerator import Error, ErrorKind
    prog = nvrtc.nvrtcCreateProgram(b"__global__ void broken( { int x = ; }", b"broken.cu")
    with pytest.raises(Error) as info:
        nvrtc.nvrtcCompileProgram(prog, [b"--gpu-architecture=compute_90"])
    e = info.value
    assert e.kind is ErrorKind.COMPILE_FAILED and e.code == nvrtc.NVRTC_ERROR_COMPILATION
    assert e.function == "nvrtcCompileProgram" and e.backend == "CUDA"
    assert "NVRTC_ERROR_COMPILATION" in str(e) and "broken.cu(1): error" in str(e)
    nvrtc.nvrtcDestroyProgram(prog)


def test_nvrtc_errors_and_unchecked_path(nvrtc) -> None:  # type: ignore[no-untyped-def]
    from ironaccelerator import Error, ErrorKind
    assert nvrtc.nvrtcGetErrorString(nvrtc.NVRTC_ERROR_INVALID_PROGRAM) == "NVRTC_ERROR_INVALID_PROGRAM"
    with pytest.raises(Error) as info:
        nvrtc.nvrtcCompileProgram(nvrtc.ffi.NULL, [])
    assert info.value.kind is ErrorKind.INVALID_HANDLE
    major, minor = nvrtc.ffi.new("int *"), nvrtc.ffi.new("int *")
    assert nvrtc.unchecked.nvrtcVersion(major, minor) == 0
    assert (major[0], minor[0]) == nvrtc.nvrtcVersion()
    assert nvrtc.unchecked.nvrtcCompileProgram(nvrtc.ffi.NULL, 0, nvrtc.ffi.NULL) == nvrtc.NVRTC_ERROR_INVALID_PROGRAM


def test_nvrtc_supported_archs(nvrtc) -> None:  # type: ignore[no-untyped-def]
    n = nvrtc.nvrtcGetNumSupportedArchs()
    archs = nvrtc.ffi.new("int[]", n)
    nvrtc.nvrtcGetSupportedArchs(archs)
    assert 90 in list(archs)


@needs_cuda
def test_frontend_sees_ptds_wrappers() -> None:
    h = parse(ParseRequest(headers=("cuda.h",), include_dirs=(CUDA_INCLUDE,), where=Location(file="t", line=1, col=1)))
    renames = {r.name: r for r in h.renames}
    assert renames["cuMemcpyHtoD"].wrapper == "__CUDA_API_PTDS"
    assert {c.name: c.value for c in h.constants}["CUDA_VERSION"] == 13000
