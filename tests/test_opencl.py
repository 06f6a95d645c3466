"""OpenCL-specific tests: the raw bindings (``ironaccelerator.backends.opencl.cl``), the error table,
capability translation, the registry report / ``python -m ironaccelerator``, and the generator's
refusal of a backend spec that does not match its template.

The backend-agnostic behaviour (alloc, copies, kernels, events, pool) is in test_conformance.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml

from ironaccelerator import BackendKind, BackendRegistry, CapabilityFlags, ComputeTier, Error, ErrorKind, Vendor

from conftest import GENERATED, ROOT, SPECS

CL_H = Path("/usr/include/CL/cl.h")
BACKEND_YAML = SPECS / "opencl" / "backend.yaml"
CL_YAML = SPECS / "opencl" / "cl.yaml"


@pytest.fixture(scope="module")
def cl() -> Any:
    from ironaccelerator.backends.opencl import cl as module
    return module


@pytest.fixture(scope="module")
def backend_module() -> Any:
    from ironaccelerator.backends.opencl import _backend
    return _backend


def _has_device() -> bool:
    try:
        return bool(BackendRegistry.default().get(BackendKind.OPENCL).devices())
    except Error:
        return False


needs_device = pytest.mark.skipif(not _has_device(), reason="no OpenCL platform with a device (clinfo -l)")


@pytest.fixture(scope="module")
def platforms(cl: Any) -> Any:
    if not _has_device():
        pytest.skip("no OpenCL platform with a device (clinfo -l)")
    ffi = cl.ffi
    n = ffi.new("cl_uint *")
    cl.clGetPlatformIDs(0, None, n)
    assert n[0] >= 1
    ps = ffi.new("cl_platform_id[]", n[0])
    cl.clGetPlatformIDs(n[0], ps, None)
    return ps


# ------------------------------------------------------------------ raw bindings


def test_binding_mode_is_api_after_build(cl: Any) -> None:
    assert cl.BINDING_MODE == "api", ("the compiled cffi module is not in use: run "
                                      "`python -m ironaccelerator_gen build`")
    assert cl.SDK_VERSION == "3.0"


def test_has(cl: Any) -> None:
    assert cl.has("clGetPlatformIDs") and cl.has("clEnqueueNDRangeKernel")
    assert cl.has("clCreateCommandQueueWithProperties")  # OpenCL 2.0, used by the backend
    assert not cl.has("clNoSuchFunction")
    assert not cl.has("")


@needs_device
def test_null_terminated_properties_reach_the_driver(cl: Any, platforms: Any) -> None:
    """``len: null-terminated`` (issue 11): a list of (name, value) pairs is passed with its terminating 0, and
    PoCL reads it: the queue made with CL_QUEUE_PROFILING_ENABLE reports it, the one made with [] does not."""
    ffi = cl.ffi
    n = ffi.new("cl_uint *")
    cl.clGetDeviceIDs(platforms[0], cl.CL_DEVICE_TYPE_ALL, 0, None, n)
    devs = ffi.new("cl_device_id[]", n[0])
    cl.clGetDeviceIDs(platforms[0], cl.CL_DEVICE_TYPE_ALL, n[0], devs, None)
    ctx = cl.clCreateContext([cl.CL_CONTEXT_PLATFORM, ffi.cast("cl_context_properties", platforms[0])], [devs[0]],
                             None, None)
    try:
        got = ffi.new("cl_command_queue_properties *")
        for props, want in (([cl.CL_QUEUE_PROPERTIES, cl.CL_QUEUE_PROFILING_ENABLE], cl.CL_QUEUE_PROFILING_ENABLE),
                            ([], 0), (None, 0)):
            q = cl.clCreateCommandQueueWithProperties(ctx, devs[0], props)
            try:
                size = ffi.sizeof("cl_command_queue_properties")
                assert cl.unchecked.clGetCommandQueueInfo(q, cl.CL_QUEUE_PROPERTIES, size, got, ffi.NULL) == 0
                assert got[0] == want, (props, got[0])
            finally:
                cl.clReleaseCommandQueue(q)
        with pytest.raises(Error) as info:  # an unknown property name: the driver saw the list
            cl.clCreateCommandQueueWithProperties(ctx, devs[0], [0x7FFF, 1])
        assert info.value.kind is ErrorKind.INVALID_VALUE
    finally:
        cl.clReleaseContext(ctx)


@needs_device
def test_checked_calls_enumerate_platforms_and_devices(cl: Any, platforms: Any) -> None:
    ffi = cl.ffi
    size = ffi.new("size_t *")
    total = 0
    for p in platforms:
        cl.clGetPlatformInfo(p, cl.CL_PLATFORM_NAME, 0, None, size)
        assert size[0] > 1
        buf = ffi.new("char[]", size[0])
        cl.clGetPlatformInfo(p, cl.CL_PLATFORM_NAME, size[0], buf, None)
        assert ffi.string(buf).decode().strip()
        nd = ffi.new("cl_uint *")
        try:
            cl.clGetDeviceIDs(p, cl.CL_DEVICE_TYPE_ALL, 0, None, nd)
        except Error as e:  # a platform without devices
            assert e.kind is ErrorKind.NO_DEVICE and "CL_DEVICE_NOT_FOUND" in str(e)
            continue
        total += nd[0]
    assert total == len(BackendRegistry.default().get(BackendKind.OPENCL).devices()) >= 1


@needs_device
def test_error_paths_map_to_kinds_with_cl_names(cl: Any, platforms: Any) -> None:
    ffi = cl.ffi
    cases: list[tuple[Callable[[], object], str, ErrorKind, str, int]] = [
        # both devices and num_devices NULL: CL_INVALID_VALUE
        (lambda: cl.clGetDeviceIDs(platforms[0], cl.CL_DEVICE_TYPE_ALL, 0, None, None),
         "clGetDeviceIDs", ErrorKind.INVALID_VALUE, "CL_INVALID_VALUE", -30),
        (lambda: cl.clGetPlatformIDs(0, None, None),
         "clGetPlatformIDs", ErrorKind.INVALID_VALUE, "CL_INVALID_VALUE", -30),
        (lambda: cl.clGetPlatformInfo(platforms[0], 0x7FFF, 0, None, ffi.new("size_t *")),
         "clGetPlatformInfo", ErrorKind.INVALID_VALUE, "CL_INVALID_VALUE", -30),
        # NULL handles are rejected by the ICD loader itself
        (lambda: cl.clReleaseMemObject(ffi.NULL),
         "clReleaseMemObject", ErrorKind.INVALID_HANDLE, "CL_INVALID_MEM_OBJECT", -38),
        (lambda: cl.clReleaseContext(ffi.NULL),
         "clReleaseContext", ErrorKind.INVALID_HANDLE, "CL_INVALID_CONTEXT", -34),
    ]
    for call, function, kind, name, code in cases:
        with pytest.raises(Error) as ei:
            call()
        e = ei.value
        assert (e.kind, e.code, e.function, e.backend) == (kind, code, function, "OPENCL"), repr(e)
        assert name in str(e) and f"({code})" in str(e)
    # the unchecked twin returns the raw status
    assert cl.unchecked.clReleaseMemObject(ffi.NULL) == -38


@needs_device
def test_errcode_ret_functions_raise(cl: Any) -> None:
    """Functions that return an object report failure through errcode_ret: clCreateBuffer(size=0)."""
    dev = BackendRegistry.default().get(BackendKind.OPENCL).open(0)
    with pytest.raises(Error) as ei:
        cl.clCreateBuffer(dev.context, cl.CL_MEM_READ_WRITE, 0, None)  # type: ignore[attr-defined]
    assert ei.value.kind is ErrorKind.INVALID_VALUE
    assert "CL_INVALID_BUFFER_SIZE" in str(ei.value) and ei.value.function == "clCreateBuffer"
    buf = cl.clCreateBuffer(dev.context, cl.CL_MEM_READ_WRITE, 64, None)  # type: ignore[attr-defined]
    assert buf != cl.ffi.NULL
    cl.clReleaseMemObject(buf)


def test_invalid_platform_maps_to_no_device() -> None:
    """CL_INVALID_PLATFORM -> NO_DEVICE (cl.yaml).  With a NULL platform the ICD loader picks a default
    one (implementation-defined), and a bogus non-NULL handle would crash it, so build the Error the
    way the checked wrapper does."""
    from ironaccelerator.backends.opencl.cl._binding import BINDING

    e = BINDING.error(-32, BINDING.index["clGetDeviceIDs"])
    assert e.kind is ErrorKind.NO_DEVICE and e.code == -32 and e.function == "clGetDeviceIDs"
    assert "CL_INVALID_PLATFORM" in str(e)
    unknown = BINDING.error(-123456, BINDING.index["clGetDeviceIDs"])
    assert unknown.kind is ErrorKind.UNKNOWN and "-123456" in str(unknown)


# ------------------------------------------------------------------ the error table


def _cl_h_errors() -> dict[str, int]:
    if not CL_H.is_file():
        pytest.skip(f"{CL_H} not installed (opencl-headers)")
    found = {m[1]: -int(m[2]) for m in re.finditer(r"^\s*#\s*define\s+(CL_\w+)\s+-(\d+)\b", CL_H.read_text(), re.M)}
    for state in ("CL_BUILD_NONE", "CL_BUILD_ERROR", "CL_BUILD_IN_PROGRESS"):  # build states, not errors
        found.pop(state, None)
    return found


def test_every_cl_error_code_is_in_the_table() -> None:
    from ironaccelerator.backends.opencl.cl._binding import ERRORS

    header = _cl_h_errors()
    assert len(header) >= 60
    missing = {name: code for name, code in header.items() if code not in ERRORS}
    assert not missing, f"cl.h error codes missing from _binding.ERRORS: {missing}"
    for name, code in header.items():
        assert ERRORS[code][0] == name, (code, ERRORS[code], name)
    # nothing in the table that cl.h does not define
    assert {name for name, _ in ERRORS.values()} == set(header)
    assert all(code < 0 for code in ERRORS)


def test_error_kinds_follow_the_spec() -> None:
    from ironaccelerator.backends.opencl.cl._binding import ERRORS

    spec = yaml.safe_load(CL_YAML.read_text())["errors"]
    by_name = {name: kind for name, kind in ERRORS.values()}
    for kind, names in spec["kinds"].items():
        for name in names:
            assert by_name[name] is ErrorKind[kind], name
    for name in spec.get("defaulted", []):
        assert by_name[name] is ErrorKind[spec["default"]], name
    # spot checks
    assert ERRORS[-1] == ("CL_DEVICE_NOT_FOUND", ErrorKind.NO_DEVICE)
    assert ERRORS[-4] == ("CL_MEM_OBJECT_ALLOCATION_FAILURE", ErrorKind.OUT_OF_MEMORY)
    assert ERRORS[-11] == ("CL_BUILD_PROGRAM_FAILURE", ErrorKind.COMPILE_FAILED)
    assert ERRORS[-38] == ("CL_INVALID_MEM_OBJECT", ErrorKind.INVALID_HANDLE)
    assert ERRORS[-54] == ("CL_INVALID_WORK_GROUP_SIZE", ErrorKind.INVALID_VALUE)


# ------------------------------------------------------------------ capability translation (no device)


def test_translate_capability_extensions(cl: Any, backend_module: Any) -> None:
    tc = backend_module.translate_capability
    always = CapabilityFlags.PROFILING | CapabilityFlags.ASYNC_COPY
    cpu = cl.CL_DEVICE_TYPE_CPU
    bare = tc("", cpu, False, "OpenCL C 1.2", cl)
    assert bare.flags == always and bare.tier is ComputeTier.CPU and bare.vendor_version == "OpenCL C 1.2"
    cap = tc("cl_khr_fp16 cl_khr_fp64  cl_khr_int64_base_atomics\tcl_intel_subgroups cl_khr_integer_dot_product",
             cpu, False, "OpenCL C 3.0", cl)
    assert cap.flags == (always | CapabilityFlags.FP16 | CapabilityFlags.FP64 | CapabilityFlags.ATOMICS_64
                         | CapabilityFlags.SUBGROUPS | CapabilityFlags.INT8_DOT)
    # whole extension names only; unknown ones add nothing
    assert tc("cl_khr_fp16_extra cl_khr_fp6 cl_vendor_magic", cpu, False, "", cl).flags == always
    assert tc("cl_arm_integer_dot_product_int8 cl_khr_subgroups", cpu, False, "", cl).flags == (
        always | CapabilityFlags.INT8_DOT | CapabilityFlags.SUBGROUPS)
    # host-unified memory is not UNIFIED_MEMORY: the backend has no alloc(MemoryKind.UNIFIED) to back the flag
    assert CapabilityFlags.UNIFIED_MEMORY not in tc("", cpu, True, "", cl).flags
    assert CapabilityFlags.UNIFIED_MEMORY not in tc("", cpu, False, "", cl).flags


def test_translate_capability_follows_backend_yaml(cl: Any, backend_module: Any) -> None:
    flags = yaml.safe_load(BACKEND_YAML.read_text())["capabilities"]["flags"]
    for ext, names in flags.items():
        if ext in ("always", "host_unified_memory"):
            continue
        cap = backend_module.translate_capability(ext, cl.CL_DEVICE_TYPE_GPU, False, "", cl)
        for name in names:
            assert CapabilityFlags[name] in cap.flags, ext


def test_translate_capability_tiers(cl: Any, backend_module: Any) -> None:
    tc = backend_module.translate_capability
    t = cl
    assert tc("", t.CL_DEVICE_TYPE_CPU, False, "", cl).tier is ComputeTier.CPU
    assert tc("", t.CL_DEVICE_TYPE_CPU, True, "", cl).tier is ComputeTier.CPU
    assert tc("", t.CL_DEVICE_TYPE_GPU, False, "", cl).tier is ComputeTier.DISCRETE
    assert tc("", t.CL_DEVICE_TYPE_GPU, True, "", cl).tier is ComputeTier.INTEGRATED
    assert tc("", t.CL_DEVICE_TYPE_ACCELERATOR, False, "", cl).tier is ComputeTier.NPU
    assert tc("", t.CL_DEVICE_TYPE_CUSTOM, False, "", cl).tier is ComputeTier.NPU
    # CL_DEVICE_TYPE_DEFAULT is a bit a device may report alongside its real type
    assert tc("", t.CL_DEVICE_TYPE_GPU | t.CL_DEVICE_TYPE_DEFAULT, False, "", cl).tier is ComputeTier.DISCRETE


def test_translate_vendor(backend_module: Any) -> None:
    tv = backend_module.translate_vendor
    cases = {
        "NVIDIA Corporation": Vendor.NVIDIA,
        "Advanced Micro Devices, Inc.": Vendor.AMD,
        "AuthenticAMD": Vendor.AMD,
        "Intel(R) Corporation": Vendor.INTEL,
        "GenuineIntel": Vendor.INTEL,
        "Apple": Vendor.APPLE,
        "ARM": Vendor.ARM,
        "QUALCOMM": Vendor.QUALCOMM,
        "The pocl project": Vendor.POCL,
        "Portable Computing Language": Vendor.POCL,
        "Imagination Technologies": Vendor.OTHER,
        "": Vendor.OTHER,
    }
    for name, vendor in cases.items():
        assert tv(name) is vendor, name
    # the implementation (platform, version string) wins over the maker of the processor it runs on:
    # PoCL's CPU device says "AuthenticAMD" but is PoCL's
    assert tv("AuthenticAMD", "Portable Computing Language OpenCL 3.0 PoCL 5.0") is Vendor.POCL
    assert tv("AuthenticAMD", "") is Vendor.AMD
    assert tv("NVIDIA Corporation", "NVIDIA CUDA OpenCL 3.0 CUDA 13.0") is Vendor.NVIDIA


# ------------------------------------------------------------------ report / python -m ironaccelerator


@needs_device
def test_report_mentions_opencl_devices() -> None:
    report = BackendRegistry.default().report()
    assert len([line for line in report if not line.startswith(" ")]) == len(BackendKind)
    line = next(line for line in report if line.startswith("OPENCL:"))
    m = re.match(r"OPENCL: library loaded, (\d+) devices?$", line)
    assert m and int(m[1]) >= 1, line
    assert any(line.startswith("  opencl:0: ") for line in report), report


@needs_device
def test_python_dash_m_ironaccelerator() -> None:
    env = dict(os.environ, PYTHONPATH=str(GENERATED))
    proc = subprocess.run([sys.executable, "-m", "ironaccelerator"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(re.match(r"OPENCL: library loaded, [1-9]\d* devices?$", line) for line in lines), proc.stdout
    assert any(line.startswith("  opencl:0: ") for line in lines), proc.stdout
    for kind in BackendKind:
        assert any(line.startswith(f"{kind.name}: ") for line in lines), (kind, proc.stdout)


@needs_device
def test_python_dash_m_ironaccelerator_json() -> None:
    """--json: every backend kind, with its versions and devices as data; stdout holds only the JSON, even where
    a vendor library prints while it loads (libQnnHtp's "LIBNATIVE" line goes to stderr)."""
    import json

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(GENERATED), str(ROOT / "runtime")]))
    proc = subprocess.run([sys.executable, "-m", "ironaccelerator", "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # nothing else on stdout
    assert [e["backend"] for e in data] == [k.name for k in BackendKind]
    ocl = next(e for e in data if e["backend"] == "OPENCL")
    assert ocl["available"] and ocl["error"] is None and "PoCL" in ocl["versions"]["platforms"]
    d = ocl["devices"][0]
    assert d["id"] == "opencl:0" and d["vendor"] == "POCL" and d["tier"] == "CPU" and d["compute_units"] >= 1
    assert d["total_memory"] > 0 and 0 < d["max_alloc"] <= d["total_memory"] and "PROFILING" in d["flags"]
    assert d["limits"]["max_threads_per_block"] >= 1 and len(d["limits"]["max_block"]) == 3
    for e in data:
        assert e["available"] or e["error_kind"], e
    # the trait operations each backend implements, derived from its classes (Backend.operations())
    registry = BackendRegistry.default()
    assert ocl["operations"] == list(registry.get(BackendKind.OPENCL).operations())
    assert "Stream.launch" in ocl["operations"] and "Stream.capture" not in ocl["operations"]
    cuda = next(e for e in data if e["backend"] == "CUDA")  # (listed whether or not its library loads here)
    assert "Stream.capture" in cuda["operations"] and "Kernel.max_active_blocks" in cuda["operations"]
    qnn = next(e for e in data if e["backend"] == "QNN")
    if qnn["available"]:
        assert qnn["versions"]["core_api"].startswith("2.") and qnn["devices"][0]["id"] == "qnn:0"


# ------------------------------------------------------------------ the generator checks backend specs


@pytest.fixture
def tmp_specs(tmp_path: Path) -> Path:
    """core.yaml and specs/opencl/ only (the other vendors' specs play no part here)."""
    out = tmp_path / "specs"
    out.mkdir()
    shutil.copy(SPECS / "core.yaml", out / "core.yaml")
    shutil.copytree(SPECS / "opencl", out / "opencl")
    return out


def _compile(spec_dir: Path) -> Any:
    from ironaccelerator_gen import pipeline
    return pipeline.compile_specs(spec_dir, only=["opencl.cl"])


def _edit_backend(spec_dir: Path, old: str, new: str) -> None:
    p = spec_dir / "opencl" / "backend.yaml"
    text = p.read_text()
    assert text.count(old) == 1, old
    p.write_text(text.replace(old, new))


def test_generator_accepts_the_unmodified_backend_spec(tmp_specs: Path) -> None:
    result = _compile(tmp_specs)
    assert "ironaccelerator/backends/opencl/_backend.py" in result.files
    assert [b.kind for b in result.backends] == ["OPENCL"]


def test_backend_spec_listing_operations_is_a_located_error(tmp_specs: Path) -> None:
    """``operations:`` is retired: what a backend implements is derived from its runtime classes
    (Backend.supports); a spec still carrying the list is told so where it wrote it, not silently accepted."""
    from ironaccelerator_gen.diagnostics import UserError

    _edit_backend(tmp_specs, "libraries: [opencl.cl]\n", "libraries: [opencl.cl]\n\noperations:\n"
                  "  implemented: [Backend.devices, Backend.open]\n")
    line = (tmp_specs / "opencl" / "backend.yaml").read_text().splitlines().index("operations:") + 1
    with pytest.raises(UserError) as ei:
        _compile(tmp_specs)
    msg = str(ei.value)
    assert f"opencl/backend.yaml:{line}:1: 'operations' is no longer a key of the backend spec: what a backend " \
           "implements is derived from what its runtime classes override (Backend.supports" in msg, msg


def test_core_spec_listing_traits_is_a_located_error(tmp_specs: Path) -> None:
    from ironaccelerator_gen.diagnostics import UserError

    core = tmp_specs / "core.yaml"
    lines = core.read_text().count("\n")
    core.write_text(core.read_text() + "traits:\n  Backend: [devices, open]\n")
    with pytest.raises(UserError) as ei:
        _compile(tmp_specs)
    msg = str(ei.value)
    assert f"core.yaml:{lines + 1}:1: 'traits' is no longer a key of the core spec: the trait operations are the " \
           "public methods of the runtime's base classes" in msg, msg


def test_backend_spec_naming_a_runtime_module_that_does_not_exist(tmp_specs: Path) -> None:
    from ironaccelerator_gen.diagnostics import UserError

    _edit_backend(tmp_specs, "runtime: opencl ", "runtime: opencll ")
    with pytest.raises(UserError) as ei:
        _compile(tmp_specs)
    msg = str(ei.value)
    assert "'opencll' is not a module of ironaccelerator_runtime.backends (runtime/ironaccelerator_runtime/backends/)" \
           " (did you mean 'opencl'?)" in msg and "backend.yaml:" in msg, msg


# ------------------------------------------------------------------ Device.alloc in C (device_memory: create)


@needs_device
def test_device_alloc_creates_and_releases_buffers_in_c(cl: Any) -> None:
    """In API mode, ``Device.alloc`` and ``alloc_unchecked`` of DEVICE memory are the compiled allocators of the
    spec's ``device_memory: {create: clCreateBuffer, ...}``: the buffer is made on the device's context with
    CL_MEM_READ_WRITE and the size asked, ``buffer`` is the cl_mem at ``ptr``, and free / drop release it in C
    (its reference count falls); failures and misuse raise what the Python methods raise."""
    from ironaccelerator import MemoryKind
    from ironaccelerator_runtime.backends.opencl.memory import OpenCLAllocation

    dev: Any = BackendRegistry.default().get(BackendKind.OPENCL).open(0)
    api, ffi = dev.api, cl.ffi
    assert type(dev.alloc).__name__ == "_DeviceAllocator" and type(dev.alloc_unchecked).__name__ == "_DeviceAllocator"

    def info(a: Any, param: int, ctype: str) -> int:
        return int(api.info_int("clGetMemObjectInfo", a.buffer, param, ctype))

    a: Any = dev.alloc(1000)
    assert type(a).__mro__[1].__name__ == "_DeviceMemory" and issubclass(type(a), OpenCLAllocation)
    assert a.kind is MemoryKind.DEVICE and a.nbytes == 1000 and a.device is dev and a._tracked
    assert int(ffi.cast("uintptr_t", a.buffer)) == a.ptr and a.buffer is a.buffer
    assert info(a, cl.CL_MEM_SIZE, "size_t") == 1000
    assert info(a, cl.CL_MEM_FLAGS, "cl_mem_flags") == cl.CL_MEM_READ_WRITE
    assert info(a, cl.CL_MEM_CONTEXT, "uintptr_t") == int(ffi.cast("uintptr_t", dev.context))
    s = dev.create_stream()
    data = bytes(range(256)) * 3
    s.copy_from_host(a, data)
    back = bytearray(len(data))
    s.copy_to_host(back, a)
    s.synchronize()
    assert bytes(back) == data

    def retained(a: Any) -> Any:  # a reference of the test's own, to read the count after the allocation's is gone
        assert api.raw.clRetainMemObject(a.buffer) == 0
        return a.buffer

    def released(buf: Any) -> None:
        refs = api.info_int("clGetMemObjectInfo", buf, cl.CL_MEM_REFERENCE_COUNT, "cl_uint")
        assert api.raw.clReleaseMemObject(buf) == 0
        assert refs == 1, refs

    buf = retained(a)
    a.free()
    released(buf)
    a = dev.alloc(64)
    buf = retained(a)
    assert a.free_unchecked() is None
    released(buf)
    a = dev.alloc(64)
    buf = retained(a)
    del a  # dropped unfreed: released
    released(buf)
    u: Any = dev.alloc_unchecked(64)
    assert not u._tracked and u.free_unchecked() is None
    # misuse: the same kinds and messages as the Python methods
    python_alloc = type(dev).alloc
    for args in ((2**62,), (0,), (-1,), (1.5,)):
        got = []
        for fn in (dev.alloc, lambda *x: python_alloc(dev, *x)):
            try:
                fn(*args)
            except (Error, TypeError) as err:
                got.append((type(err), getattr(err, "kind", None), str(err)))
        assert len(got) == 2 and got[0] == got[1], got
    a = dev.alloc(8)
    a.free()
    with pytest.raises(Error) as e:
        a.free()
    assert e.value.kind is ErrorKind.INVALID_HANDLE
    assert dev.alloc_unchecked(2**62).kind is ErrorKind.INVALID_VALUE
    h = dev.alloc(64, MemoryKind.HOST_PINNED)  # another kind: the Python class
    assert type(h) is OpenCLAllocation
    h.free()
    dev.close()
    with pytest.raises(Error) as e:
        dev.alloc(8)
    assert e.value.kind is ErrorKind.INVALID_HANDLE
    assert dev.alloc_unchecked(8).kind is ErrorKind.INVALID_HANDLE


# ------------------------------------------------------------------ host copies in C (host_copy)


def _outcome(fn: Callable[[], Any]) -> tuple[Any, ...]:
    try:
        fn()
    except (Error, TypeError, BufferError, ValueError) as err:
        return (type(err), getattr(err, "kind", None), str(err))
    return ("ok",)


@needs_device
def test_stream_host_copies_run_in_c_and_refuse_as_the_methods_do(cl: Any) -> None:
    """In API mode a stream's ``copy_from_host`` and ``copy_to_host`` are the compiled copiers of the spec's
    ``host_copy: {write: clEnqueueWriteBuffer, read: clEnqueueReadBuffer}``: a DEVICE allocation and a numpy array,
    bytes, bytearray or memoryview copy in C, leaving the stream's flags as the methods do; everything else goes
    to the methods, so every mistake gets the methods' own Error (type, kind and message); after the device's
    close the methods are back; a copier kept past its stream refuses, INVALID_HANDLE."""
    import gc

    import numpy as np

    registry = BackendRegistry.default()
    dev: Any = registry.get(BackendKind.OPENCL).open(0)
    other: Any = registry.get(BackendKind.OPENCL).open(0)
    s = dev.create_stream()
    assert type(s.copy_from_host).__name__ == type(s.copy_to_host).__name__ == "_HostCopier"
    cls = type(s)
    a = dev.alloc(4096)
    x = np.arange(1024, dtype=np.int32)
    for src in (x, x.tobytes(), bytearray(x.tobytes()), x.data):
        s.synchronize()
        s.copy_from_host(a, src)
        assert s._pending is True and s._dirty and dev._dirty
        for dst in (np.zeros_like(x), bytearray(4096), memoryview(bytearray(4096))):
            s.copy_to_host(dst, a)
            assert s._pending is False and bytes(dst) == x.tobytes()
    s.copy_from_host(a, x[:4])  # (fewer bytes than the allocation: its start)
    half = np.zeros(512, np.int32)
    s.copy_to_host(half, a)
    assert (half[:4] == x[:4]).all() and (half[4:] == x[4:512]).all()
    pool = dev.memory_pool()
    block = pool.alloc(4096, s)  # (the methods take pool blocks)
    s.copy_from_host(block, x)
    out = np.zeros_like(x)
    s.copy_to_host(out, block)
    assert (out == x).all()
    freed = dev.alloc(64)
    freed.free()
    theirs = other.alloc(4096)
    mistakes: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
        ("copy_from_host", (a, np.zeros(2048, np.int32)), {}),  # too big
        ("copy_from_host", (a, np.array([None] * 8, dtype=object)), {}),  # Python objects
        ("copy_from_host", (a, np.zeros((64, 64), np.int32)[:, ::2]), {}),  # not contiguous
        ("copy_from_host", (a, np.zeros((64, 64), np.int32)[:, ::2].data), {}),
        ("copy_from_host", (a, np.int32(5)), {}),  # a numpy scalar
        ("copy_from_host", (a, 5), {}),  # not a buffer
        ("copy_from_host", (freed, x), {}),
        ("copy_from_host", (theirs, x), {}),
        ("copy_from_host", (x, a), {}),  # swapped
        ("copy_from_host", (a, x), {"nbytes": 8192}),
        ("copy_to_host", (bytes(4096), a), {}),  # read-only
        ("copy_to_host", (np.zeros(2048, np.int32), a), {}),  # more than the allocation holds
        ("copy_to_host", (np.zeros((64, 64), np.int32)[:, ::2], a), {}),
        ("copy_to_host", (np.array([None] * 8, dtype=object), a), {}),
        ("copy_to_host", (out, freed), {}),
        ("copy_to_host", (out, theirs), {}),
        ("copy_to_host", (out, a), {"src_offset": 8192}),
    ]
    for name, args, kwargs in mistakes:
        compiled = _outcome(lambda: getattr(s, name)(*args, **kwargs))
        python = _outcome(lambda: getattr(cls, name)(s, *args, **kwargs))
        assert compiled == python and compiled[0] != "ok", (name, args, kwargs, compiled, python)
    s.copy_from_host(a, np.zeros(0, np.int32))  # (nothing to copy: the methods, as before)
    s.copy_to_host(np.zeros(0, np.int32), a)
    s.copy_from_host(a, x[:8], nbytes=16, dst_offset=8)  # (offsets: the method)
    s.copy_to_host(out, a)
    assert (out[2:6] == x[:4]).all()
    t = dev.create_stream()
    kept = t.copy_from_host
    del t
    gc.collect()
    with pytest.raises(Error) as e:
        kept(a, x)
    assert e.value.kind is ErrorKind.INVALID_HANDLE and "dropped" in str(e.value)
    kept = s.copy_to_host
    block.free()
    dev.close()
    assert type(s.copy_to_host).__name__ == "method"
    calls: tuple[Callable[[], Any], ...] = (lambda: s.copy_to_host(out, a), lambda: kept(out, a))
    for fn in calls:
        with pytest.raises(Error) as e:
            fn()
        assert e.value.kind is ErrorKind.INVALID_HANDLE
    theirs.free()
    other.close()
