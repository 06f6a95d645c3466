"""The Metal backend (runtime/ironaccelerator_runtime/backends/metal/ over the generated binding of
specs/metal/metal.yaml) on the IA Simulated Metal Device (tests/metal_sim: a test fixture of ours on the CPU, NOT
Apple Metal; the GNU Objective-C runtime and GNUstep Foundation under it are real).  Also the capability tables of
specs/metal/backend.yaml on a table of real Apple GPUs (no device needed) and the generator's checks of them.

The conformance suite (tests/test_conformance.py) runs over the same backend and device with its MSL KERNELS.
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import ironaccelerator as ia
from ironaccelerator import (
    BackendKind, CapabilityFlags, ComputeTier, DType, Error, ErrorKind, KernelLaunch, LaunchDims, MemoryKind, Scalar,
    Vendor,
)

ROOT = Path(__file__).resolve().parent.parent

MSL = """
#include <metal_stdlib>
using namespace metal;
kernel void vector_add(device const float *a [[buffer(0)]], device const float *b [[buffer(1)]],
                       device float *c [[buffer(2)]], constant uint &n [[buffer(3)]],
                       uint i [[thread_position_in_grid]]) {
    if (i < n) c[i] = a[i] + b[i];
}
kernel void saxpy(constant float &a [[buffer(0)]], device const float *x [[buffer(1)]], device float *y [[buffer(2)]],
                  constant uint &n [[buffer(3)]], uint i [[thread_position_in_grid]]) {
    if (i < n) y[i] = a * x[i] + y[i];
}
[[kernel]] void lcg(device uint *x [[buffer(0)]], constant uint &n [[buffer(1)]], constant uint &rounds [[buffer(2)]],
                    uint i [[thread_position_in_grid]]) {
    if (i >= n) return;
    uint v = x[i];
    for (uint r = 0; r < rounds; ++r) v = v * 1664525u + 1013904223u;
    x[i] = v;
}
"""


# ------------------------------------------------------------------ capability tables (no device)

# Real Apple GPUs and the MTLGPUFamily values their supportsFamily: answers YES for (support is cumulative), from
# Apple's public GPU family tables (developer.apple.com: "Metal feature set tables" and MTLGPUFamily's
# documentation: Apple6 = A13; Apple7 = A14, M1; Apple8 = A15, A16, M2; Apple9 = A17 Pro, A18, M3, M4; Mac2 = every
# Mac GPU of the Metal 3 era; Metal3 = A14/M1 on, AMD Vega/5000/6000, Intel UHD 630 / Iris Plus), written here by us.
_COMMON = {"Common1", "Common2", "Common3"}


def _apple(n: int) -> set[str]:
    return {f"Apple{i}" for i in range(1, n + 1)}


GPUS: list[tuple[str, set[str], bool, CapabilityFlags, ComputeTier, Vendor]] = [
    ("Apple M1", _apple(7) | {"Mac1", "Mac2", "Metal3"} | _COMMON, True,
     CapabilityFlags.FP16 | CapabilityFlags.PROFILING | CapabilityFlags.UNIFIED_MEMORY | CapabilityFlags.SUBGROUPS
     | CapabilityFlags.TENSOR_CORES, ComputeTier.INTEGRATED, Vendor.APPLE),
    ("Apple M2 Max", _apple(8) | {"Mac1", "Mac2", "Metal3"} | _COMMON, True,
     CapabilityFlags.FP16 | CapabilityFlags.PROFILING | CapabilityFlags.UNIFIED_MEMORY | CapabilityFlags.SUBGROUPS
     | CapabilityFlags.TENSOR_CORES, ComputeTier.INTEGRATED, Vendor.APPLE),
    ("Apple M3 Pro", _apple(9) | {"Mac1", "Mac2", "Metal3"} | _COMMON, True,
     CapabilityFlags.FP16 | CapabilityFlags.PROFILING | CapabilityFlags.UNIFIED_MEMORY | CapabilityFlags.SUBGROUPS
     | CapabilityFlags.TENSOR_CORES | CapabilityFlags.ATOMICS_64, ComputeTier.INTEGRATED, Vendor.APPLE),
    ("Apple M4", _apple(9) | {"Mac1", "Mac2", "Metal3"} | _COMMON, True,
     CapabilityFlags.FP16 | CapabilityFlags.PROFILING | CapabilityFlags.UNIFIED_MEMORY | CapabilityFlags.SUBGROUPS
     | CapabilityFlags.TENSOR_CORES | CapabilityFlags.ATOMICS_64, ComputeTier.INTEGRATED, Vendor.APPLE),
    ("Apple A14 GPU", _apple(7) | {"Metal3"} | _COMMON, True,
     CapabilityFlags.FP16 | CapabilityFlags.PROFILING | CapabilityFlags.UNIFIED_MEMORY | CapabilityFlags.SUBGROUPS
     | CapabilityFlags.TENSOR_CORES, ComputeTier.INTEGRATED, Vendor.APPLE),
    ("Apple A13 GPU", _apple(6) | _COMMON, True,
     CapabilityFlags.FP16 | CapabilityFlags.PROFILING | CapabilityFlags.UNIFIED_MEMORY | CapabilityFlags.SUBGROUPS,
     ComputeTier.INTEGRATED, Vendor.APPLE),
    ("Apple A11 GPU", _apple(4) | _COMMON, True,
     CapabilityFlags.FP16 | CapabilityFlags.PROFILING | CapabilityFlags.UNIFIED_MEMORY, ComputeTier.INTEGRATED,
     Vendor.APPLE),
    ("AMD Radeon Pro 5500M", {"Mac1", "Mac2", "Metal3"} | _COMMON, False,
     CapabilityFlags.FP16 | CapabilityFlags.PROFILING | CapabilityFlags.SUBGROUPS | CapabilityFlags.TENSOR_CORES,
     ComputeTier.DISCRETE, Vendor.AMD),
    ("Intel(R) UHD Graphics 630", {"Mac1", "Mac2", "Metal3"} | _COMMON, True,
     CapabilityFlags.FP16 | CapabilityFlags.PROFILING | CapabilityFlags.UNIFIED_MEMORY | CapabilityFlags.SUBGROUPS
     | CapabilityFlags.TENSOR_CORES, ComputeTier.INTEGRATED, Vendor.INTEL),
]


@pytest.mark.parametrize("name, families, unified, flags, tier, vendor", GPUS, ids=[g[0] for g in GPUS])
def test_capability_of_real_apple_gpus(name: str, families: set[str], unified: bool, flags: CapabilityFlags,
                                       tier: ComputeTier, vendor: Vendor) -> None:
    from ironaccelerator.backends.metal import _backend

    t = _backend.TABLES
    values = {t.families[f] for f in families}
    by_call = t.capability(lambda v: v in values, unified)  # as the device answers supportsFamily:
    by_names = t.capability(families, unified)
    assert by_call == by_names
    assert by_call.flags == flags, (name, by_call.flags)
    assert by_call.tier is tier and t.vendor(name) is vendor
    assert by_call.vendor_version.startswith("Metal ") and all(f in by_call.vendor_version for f in families)


def test_family_values_come_from_the_metal_spec() -> None:
    from ironaccelerator.backends.metal import _backend
    from ironaccelerator.backends.metal import metal as M

    fams = _backend.TABLES.families
    assert fams["Apple7"] == M.MTLGPUFamilyApple7 == 1007 and fams["Mac2"] == 2002 and fams["Metal3"] == 5001
    assert fams["Common3"] == 3003 and fams["Apple9"] == 1009
    assert (M.MTLResourceStorageModeShared, M.MTLResourceStorageModePrivate) == (0, 32)
    assert M.MTLCommandBufferStatusCompleted == 4 and M.MTLCommandBufferStatusError == 5


# ------------------------------------------------------------------ the generator's checks of the tables


def _spec_dir(tmp_path: Path, old: str, new: str) -> Path:
    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "specs", specs)
    p = specs / "metal" / "backend.yaml"
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new, 1))
    return specs


def _errors(specs: Path) -> list[str]:
    from generator import pipeline
    from generator.diagnostics import UserError

    with pytest.raises(UserError) as ei:
        pipeline.compile_specs(specs, only=["metal.metal"], base=specs.parent)
    return [str(d) for d in ei.value.diagnostics]


def test_generator_refuses_an_unknown_gpu_family(tmp_path: Path) -> None:
    specs = _spec_dir(tmp_path, "    Apple9: [ATOMICS_64]", "    Apple99: [ATOMICS_64]")
    errors = _errors(specs)
    line = next(i for i, t in enumerate((specs / "metal" / "backend.yaml").read_text().splitlines(), 1)
                if "Apple99" in t)
    assert any(e.startswith(f"specs/metal/backend.yaml:{line}:5:") and "flags key 'Apple99' is not a GPU family: no "
               "MTLGPUFamilyApple99 constant in metal.metal (did you mean 'Apple9'?)" in e for e in errors), errors


def test_generator_refuses_a_malformed_family_key(tmp_path: Path) -> None:
    specs = _spec_dir(tmp_path, "    Mac2: DISCRETE", "    mac-2: DISCRETE")
    errors = _errors(specs)
    assert any("tiers key 'mac-2' is not a Metal GPU family like 'Apple7'" in e for e in errors), errors


def test_generator_refuses_an_unknown_match(tmp_path: Path) -> None:
    specs = _spec_dir(tmp_path, "match: gpu_family", "match: gpu_familly")
    errors = _errors(specs)
    assert any("'gpu_familly' is not a capability match (did you mean 'gpu_family'?)" in e for e in errors), errors


# ------------------------------------------------------------------ over the simulated device


class Sim:
    """The simulated device's own counters (the library the binding loaded)."""

    def __init__(self, path: Path) -> None:
        import cffi

        self.ffi = cffi.FFI()
        self.ffi.cdef("long ia_metal_sim_live_objects(const char *class_name); long ia_metal_sim_zombie_messages(void);"
                      "long ia_metal_sim_validation_errors(void);")
        self.lib = self.ffi.dlopen(str(path))

    def live(self, cls: str | None = None) -> int:
        return int(self.lib.ia_metal_sim_live_objects(self.ffi.NULL if cls is None else cls.encode()))

    def zombies(self) -> int:
        return int(self.lib.ia_metal_sim_zombie_messages())

    def validation_errors(self) -> int:
        return int(self.lib.ia_metal_sim_validation_errors())


@pytest.fixture(scope="module")
def sim(metal_sim: Path) -> Sim:
    return Sim(metal_sim)


@pytest.fixture
def backend(metal_sim: Path) -> Any:
    try:
        return ia.BackendRegistry.default().get(BackendKind.METAL)
    except Error as e:
        pytest.fail(f"the Metal backend did not load over the simulated device: {e}")


@pytest.fixture
def dev(backend: Any, sim: Sim) -> Iterator[Any]:
    gc.collect()
    zombies = sim.zombies()
    d = backend.open(0)
    yield d
    d.close()
    del d
    gc.collect()
    assert sim.zombies() == zombies, "a message was sent to a deallocated simulator object (an over-release)"


def _kernels(dev: Any) -> dict[str, Any]:
    m = dev.load_module(MSL)
    return {n: m.kernel(n) for n in ("vector_add", "saxpy", "lcg")}


def test_devices_and_descriptor(backend: Any) -> None:
    devs = backend.devices()
    assert len(devs) == 1
    d = devs[0]
    assert d.name == "IA Simulated Metal Device" and d.backend is BackendKind.METAL and d.vendor is Vendor.APPLE
    assert str(d.id) == "metal:0" and BackendKind.METAL.dlpack_device == 8
    assert d.total_memory == 4 << 30 and d.limits.max_alloc == 1 << 30 and d.limits.max_block == (1024, 1024, 1024)
    # the simulator answers Common1-3 and has unified memory
    assert d.capability.vendor_version == "Metal Common1,Common2,Common3"
    assert d.capability.flags == CapabilityFlags.FP16 | CapabilityFlags.PROFILING | CapabilityFlags.UNIFIED_MEMORY
    assert d.capability.tier is ComputeTier.INTEGRATED


def test_families_asked_of_the_device(metal_sim: Path, sim: Sim) -> None:
    """supportsFamily: is what the tables are applied to: the simulator told to be an M1 (IA_METAL_SIM_FAMILIES,
    read when its device is created) is described as one."""
    from ironaccelerator.backends.metal import _backend

    gc.collect()
    assert sim.live("IASimDevice") == 0, "a device is still held: the families would not be read again"
    m1 = [1001, 1002, 1003, 1004, 1005, 1006, 1007, 2001, 2002, 3001, 3002, 3003, 5001]
    os.environ["IA_METAL_SIM_FAMILIES"] = ",".join(map(str, m1))
    try:
        d = _backend.MetalBackend().devices()[0]
    finally:
        del os.environ["IA_METAL_SIM_FAMILIES"]
    assert d.capability.flags == GPUS[0][3] and d.capability.tier is ComputeTier.INTEGRATED
    assert "Apple7" in d.capability.vendor_version and "Mac2" in d.capability.vendor_version
    gc.collect()
    assert sim.live("IASimDevice") == 0


def test_typed_views_and_dlpack_on_the_simulated_device(dev: Any, sim: Sim) -> None:
    """Shared (UNIFIED) buffers of the simulated Metal device export DLPack as kDLCPU: ``np.from_dlpack`` sees the
    buffer's ``contents`` without a copy; private buffers have a plain view (no DLPack device a consumer can
    address); importing foreign memory is UNSUPPORTED (no newBufferWithBytesNoCopy); no object leaks."""
    import dlpack_capsules

    s = dev.create_stream()
    shared = dev.alloc(4096, MemoryKind.UNIFIED)
    v = shared.view(np.uint16, (32, 64))
    x = np.from_dlpack(v)
    assert x.ctypes.data == shared._host_address() and x.shape == (32, 64)
    x[:] = np.arange(2048, dtype=np.uint16).reshape(32, 64)
    priv = dev.alloc(4096)
    s.copy(priv, shared)
    out = np.zeros(2048, np.uint16)
    s.copy_to_host(out, priv)
    s.synchronize()
    np.testing.assert_array_equal(out, np.arange(2048))
    info = dlpack_capsules.parse(v.__dlpack__(max_version=(1, 0)))
    assert info["version"] == (1, 1) and info["device"] == (1, 0) and info["dtype"] == (1, 16, 1)
    pv = priv.view(DType.F32, 1024)
    assert not hasattr(pv, "__dlpack__") and pv.nbytes == 4096
    with pytest.raises(Error) as ei:
        dev.from_dlpack(np.zeros(16))
    assert ei.value.kind is ErrorKind.UNSUPPORTED and "newBufferWithBytesNoCopy" in str(ei.value)
    del x, v, pv, info
    gc.collect()
    for a in (shared, priv):
        a.free()
    s.synchronize()
    gc.collect()
    assert sim.live("IASimBuffer") == 0


def test_alloc_kinds_and_host_view(dev: Any) -> None:
    s = dev.create_stream()
    priv = dev.alloc(4096)
    assert priv.kind is MemoryKind.DEVICE and priv.buffer.storageMode() == 2  # MTLStorageModePrivate
    with pytest.raises(Error) as ei:
        priv.host_view()
    assert ei.value.kind is ErrorKind.INVALID_VALUE
    shared = dev.alloc(4096, MemoryKind.UNIFIED)
    assert shared.kind is MemoryKind.UNIFIED and shared.buffer.storageMode() == 0  # MTLStorageModeShared
    view = shared.host_view()
    view[:4] = b"\x01\x02\x03\x04"  # written through the view: no copy
    back = np.zeros(8, np.uint8)
    s.copy_to_host(back, shared)
    assert list(back[:5]) == [1, 2, 3, 4, 0]
    data = np.arange(4096, dtype=np.uint8)
    s.copy_from_host(shared, data)
    s.copy(priv, shared)  # blit, device to device
    s.synchronize()
    assert bytes(shared.host_view()) == data.tobytes()
    out = np.zeros(4096, np.uint8)
    s.copy_to_host(out, priv)
    np.testing.assert_array_equal(out, data)
    s.fill(priv, 0x5A)  # fillBuffer:range:value:
    s.copy_to_host(out, priv)
    assert (out == 0x5A).all()
    for kind in (MemoryKind.HOST, MemoryKind.HOST_PINNED):
        r = dev.alloc_unchecked(64, kind)
        assert isinstance(r, Error) and r.kind is ErrorKind.UNSUPPORTED
    big = dev.alloc_unchecked((1 << 30) + 1)  # over maxBufferLength
    assert isinstance(big, Error) and big.kind is ErrorKind.INVALID_VALUE and "maxBufferLength" in str(big)
    with pytest.raises(Error) as ei:
        shared.free()  # `view` is still exported
    assert ei.value.kind is ErrorKind.INVALID_VALUE and "still exported" in str(ei.value)
    view.release()
    for a in (priv, shared):
        a.free()


def test_an_allocations_buffer_handle_is_made_on_demand_and_closed_by_free(dev: Any) -> None:
    """An allocation owns its MTLBuffer's id; ``buffer`` (the checked handle) is made on first use, the same one
    after, and closed by ``free`` (INVALID_HANDLE on use), also when first asked for after the free."""
    a = dev.alloc(64)
    b = a.buffer
    assert a.buffer is b and b.length() == 64
    a.free()
    for handle in (b, a.buffer):
        with pytest.raises(Error) as ei:
            handle.length()
        assert ei.value.kind is ErrorKind.INVALID_HANDLE
    c = dev.alloc(64)
    c.free()
    with pytest.raises(Error) as ei:
        c.buffer.length()
    assert ei.value.kind is ErrorKind.INVALID_HANDLE


def _python_calls(fn: Callable[[], object]) -> list[str]:
    """The Python functions ``fn()`` calls (qualified names, in order; ``fn`` itself and C functions left out),
    the collector off: the drop's ``__del__`` is counted where ``fn`` drops the object."""
    calls: list[str] = []

    def profile(frame: Any, event: str, arg: object) -> None:
        if event == "call":
            calls.append(frame.f_code.co_qualname)

    gc.collect()
    gc.disable()
    try:
        sys.setprofile(profile)
        try:
            fn()
        finally:
            sys.setprofile(None)
    finally:
        gc.enable()
    return calls[1:]


def test_alloc_and_free_run_no_python_beyond_themselves(dev: Any) -> None:
    """Issue 27 item 4: ``dev.alloc(n).free()`` of DEVICE memory, checked or unchecked, runs alloc, free and the
    drop's ``__del__`` and no other Python function (no ``__init__``, no ``_checked_alloc``/``_alloc``, no
    ``_release``); the allocation is the one the checked path makes (tracked: released on drop), and a dropped
    unfreed one is still released.  In API mode the allocators are compiled (ia_handle_memory.h) and the pair runs
    no Python function at all; the methods' allocations (another kind, keywords) are of the same class."""
    compiled = dev._handle_class is not None
    assert compiled is (dev._pool_fast is not None)
    assert _python_calls(lambda: dev.alloc(256).free()) == \
        ([] if compiled else ["MetalDevice.alloc", "MetalAllocation.free", "MetalAllocation.__del__"])
    assert _python_calls(lambda: dev.alloc_unchecked(256).free_unchecked()) == \
        ([] if compiled else
         ["MetalDevice.alloc_unchecked", "MetalAllocation.free_unchecked", "MetalAllocation.__del__"])
    kinds = [MemoryKind.DEVICE] + ([MemoryKind.UNIFIED] if dev.unified else [])
    slow = [dev.alloc(256, kind=k) for k in kinds]  # (keywords: the methods' path)
    assert {type(a) for a in slow} == {type(dev.alloc(8))} and [a.kind for a in slow] == kinds
    for a in slow:
        a.free()
    for a in (dev.alloc(256), dev.alloc_unchecked(256)):
        assert type(a).__name__ == "MetalAllocation"
        assert (a.nbytes, a.kind, a.device, a.freed) == (256, MemoryKind.DEVICE, dev, False)
        assert a._finalizer is not None and a._finalizer.alive and a.buffer.length() == 256
        a.free()
        assert a.freed and not a._finalizer.alive
        with pytest.raises(Error) as ei:
            a.free()
        assert ei.value.kind is ErrorKind.INVALID_HANDLE
        r = a.free_unchecked()
        assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE
    live = dev.alloc(256)
    fin = live._finalizer
    assert fin is not None and fin.alive
    del live  # (released by the drop: the dev fixture counts the simulator's objects for over-releases)
    gc.collect()
    a = dev.alloc(64)
    view_of_buffer = a.buffer  # (a checked handle made on first use: free closes it, through the Python path)
    a.free()
    assert a.freed and view_of_buffer.handle == dev.api.NULL
    other = dev.backend.open(0)
    alloc, alloc_unchecked = other.alloc, other.alloc_unchecked
    other.close()
    with pytest.raises(Error) as ei:  # a closed device's allocators refuse as its methods do
        alloc(64)
    assert ei.value.kind is ErrorKind.INVALID_HANDLE
    r = alloc_unchecked(64)
    assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE


def test_compiled_allocations_make_their_handle_on_first_read(dev: Any, sim: Sim) -> None:
    """Issue 27 item 4: the compiled allocator sends ``newBufferWithLength:options:`` and ``release`` from C by the
    functions' addresses and keeps the buffer's address; ``_handle`` (the binding's ``id`` cdata) is made when
    first read, then the same object on every read, naming the buffer the allocator made (private storage, the
    size asked) and the one ``buffer`` wraps.  Read or not, the buffer is released once, by free or on drop."""
    if dev._handle_class is None:
        pytest.skip("ABI mode: the Python MetalAllocation holds its handle")
    api = dev.api
    gc.collect()
    live = sim.live("IASimBuffer")
    for alloc in (dev.alloc, dev.alloc_unchecked, lambda n: dev.alloc(n, kind=MemoryKind.DEVICE)):  # (+ the method)
        a = alloc(256)
        h = a._handle
        assert a._handle is h and api.ffi.typeof(h) is api.ffi.typeof("id") and h != api.NULL
        assert api.U.MTLBuffer_length(h) == 256 and api.U.MTLResource_storageMode(h) == 2  # MTLStorageModePrivate
        assert a.buffer.handle == h
        with pytest.raises(AttributeError):
            a._handle = api.NULL  # (read-only, as the slot it replaces was)
        a.free()
        assert a._handle is h  # (still readable after free; a launch or copy refuses the freed allocation first)
    unread = [dev.alloc(256), dev.alloc_unchecked(256)]
    unread[0].free()
    del unread  # (the second released by its drop, its handle never made)
    gc.collect()
    assert sim.live("IASimBuffer") == live


def test_a_compiled_allocation_dropped_unfreed_is_released_in_c(dev: Any, sim: Sim) -> None:
    """A plain compiled allocation dropped unfreed is released as ``free`` releases it, running no Python; one with
    instance attributes (a ``_drop`` given to ``_track``) or an exported ``buffer`` still goes through
    ``Allocation.__del__``: its ``_drop`` runs, or its ``_release`` closes the exported handle."""
    if dev._handle_class is None:
        pytest.skip("ABI mode: the Python MetalAllocation's __del__")
    gc.collect()
    live = sim.live("IASimBuffer")
    assert _python_calls(lambda: dev.alloc(256)) == []
    assert _python_calls(lambda: dev.alloc_unchecked(256)) == []
    gc.collect()
    assert sim.live("IASimBuffer") == live
    a = dev.alloc(256)
    h, dropped = a._handle, []

    def drop() -> None:  # (what _track is given: it releases the buffer itself)
        dropped.append(True)
        dev.api.release(h)

    a._track(drop)
    del a
    gc.collect()
    assert dropped == [True] and sim.live("IASimBuffer") == live
    a = dev.alloc(256)
    b = a.buffer
    assert b.length() == 256
    del a
    gc.collect()
    assert b.handle == dev.api.NULL and sim.live("IASimBuffer") == live


def test_the_compiled_allocators_calls_have_the_headers_shapes(dev: Any) -> None:
    """``handle_calls`` hands ia_handle_memory.h only functions whose cffi types match its two C shapes
    (``object = new(owner, nbytes, option)``, ``release(object)``): another prototype is a TypeError, not a wrong
    call from C; so are arguments of the wrong kind to the C constructors."""
    if dev._handle_class is None:
        pytest.skip("ABI mode: no compiled allocators")
    from ironaccelerator_runtime.traits.memory import handle_calls

    fast, api = dev._pool_fast, dev.api
    new, release = "MTLDevice_newBufferWithLength_options_", "ia_objc_release"
    assert type(handle_calls(fast, api.ffi, api.b.lib, new, release)).__name__ == "_HandleCalls"
    for n, r, wrong in (("MTLBuffer_length", release, "MTLBuffer_length"),  # one argument, an integer result
                        ("MTLBuffer_didModifyRange_", release, "MTLBuffer_didModifyRange_"),  # a struct argument
                        (new, "MTLBuffer_contents", "MTLBuffer_contents"),  # a pointer result
                        (new, "MTLDevice_newBufferWithLength_options_", new)):
        with pytest.raises(TypeError, match=wrong):
            handle_calls(fast, api.ffi, api.b.lib, n, r)
    with pytest.raises(TypeError):
        fast._handle_calls(0, 1, api.ffi.cast)  # (a NULL function)
    with pytest.raises(TypeError):
        fast._handle_calls(api.NULL, 1, api.ffi.cast)  # (a cdata, not an address)
    with pytest.raises(TypeError):  # (no object at address 0)
        fast._handle_memory(dev._handle_class, dev, 0, 64, MemoryKind.DEVICE, dev._handle_calls)
    with pytest.raises(TypeError):  # (calls of another type)
        fast._handle_memory(dev._handle_class, dev, 1, 64, MemoryKind.DEVICE, object())


def test_a_nil_buffer_is_the_same_error_on_every_path(dev: Any, sim: Sim, monkeypatch: pytest.MonkeyPatch) -> None:
    """A nil ``newBufferWithLength:options:`` (here: memoryless storage, which the simulated device refuses as
    Metal does) leaves the compiled allocator for the methods, which send again and report OUT_OF_MEMORY: raised by
    ``alloc``, returned by ``alloc_unchecked``, the same Error as the methods' own (each naming the operation called);
    nothing is left alive."""
    import ironaccelerator_runtime.backends.metal.device as metal_device

    monkeypatch.setattr(metal_device, "_PRIVATE", 48)  # MTLResourceStorageModeMemoryless
    dev._bind_allocators()  # (the allocators take the storage mode when made)
    gc.collect()
    live = sim.live("IASimBuffer")
    errors = []
    for alloc in (dev.alloc, type(dev).alloc.__get__(dev)):
        with pytest.raises(Error) as ei:
            alloc(256)
        errors.append(ei.value)
    for alloc in (dev.alloc_unchecked, type(dev).alloc_unchecked.__get__(dev)):
        r = alloc(256)
        assert isinstance(r, Error)
        errors.append(r)
    # (each names the operation called: docs/guide/concepts.md's rule for Error.function)
    assert [e.function for e in errors] == ["Device.alloc"] * 2 + ["Device.alloc_unchecked"] * 2
    assert {(e.kind, str(e).removeprefix(e.function or "")) for e in errors} == {
        (ErrorKind.OUT_OF_MEMORY, str(errors[0]).removeprefix("Device.alloc"))}
    assert "returned nil" in str(errors[0])
    gc.collect()
    assert sim.live("IASimBuffer") == live


def test_traced_allocations_log_their_messages(metal_sim: Path) -> None:
    """Under ``IRONACCEL_TRACE`` no allocation is made in C (the compiled allocator would send unlogged): the Python
    class sends ``newBufferWithLength:options:`` through the logged trampoline."""
    code = ("import ironaccelerator as ia\n"
            "dev = ia.BackendRegistry.default().get(ia.BackendKind.METAL).open(0)\n"
            "a = dev.alloc(256)\n"
            "print(type(a).__module__, type(a).__mro__[1].__name__)\n"
            "a.free()\n"
            "dev.close()\n")
    env = dict(os.environ, IA_METAL_SIM_DIR=str(metal_sim.parent), IRONACCEL_TRACE="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "generated"), str(ROOT / "runtime")]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ironaccelerator_runtime.backends.metal.memory", "_MetalMemory"], out.stdout
    assert any(line.startswith("ironaccelerator.trace: MTLDevice_newBufferWithLength_options_(") and ", 256, 32)"
               in line for line in out.stderr.splitlines()), out.stderr


def test_launch_vector_add_saxpy_lcg(dev: Any) -> None:
    k = _kernels(dev)
    assert k["vector_add"].num_args == 4 and k["lcg"].num_args == 3
    assert k["vector_add"].max_threads == 1024 and k["vector_add"].execution_width == 32
    s = dev.create_stream()
    n = 10_000
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    y = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    dx, dy, dz = dev.alloc(x.nbytes), dev.alloc(y.nbytes), dev.alloc(x.nbytes)
    s.copy_from_host(dx, x)
    s.copy_from_host(dy, y)
    grid = LaunchDims(grid=(n + 255) // 256, block=256)
    s.launch(KernelLaunch(k["vector_add"], grid, (dx, dy, dz, np.uint32(n))))
    s.launch(KernelLaunch(k["saxpy"], grid, (Scalar(2.0, DType.F32), dx, dy, n)))  # a Python int for `uint &n`
    out = np.zeros(n, np.float32)
    s.copy_to_host(out, dz)
    np.testing.assert_allclose(out, x + y, rtol=1e-6)
    s.copy_to_host(out, dy)
    np.testing.assert_allclose(out, 2 * x + y, rtol=1e-5)
    u = np.arange(n, dtype=np.uint32)
    du = dev.alloc(u.nbytes)
    s.copy_from_host(du, u)
    s.launch(KernelLaunch(k["lcg"], LaunchDims(grid=(n + 63) // 64, block=64), (du, np.uint32(n), np.uint32(7))))
    s.copy_to_host(u, du)
    ref = np.arange(n, dtype=np.uint32)
    with np.errstate(over="ignore"):
        for _ in range(7):
            ref = ref * np.uint32(1664525) + np.uint32(1013904223)
    np.testing.assert_array_equal(u, ref)


def test_events_gpu_timestamps_and_cross_stream_order(dev: Any) -> None:
    k = _kernels(dev)
    a, b = dev.create_stream(), dev.create_stream()
    n = 1 << 16
    buf = dev.alloc(4 * n)
    a.copy_from_host(buf, np.zeros(n, np.uint32))
    e0 = a.record_event()
    a.launch(KernelLaunch(k["lcg"], LaunchDims(n // 64, 64), (buf, np.uint32(n), np.uint32(300))))
    e1 = a.record_event()
    b.wait_event(e1)  # encodeWaitForEvent:value: on the other queue
    out = np.ones(n, np.uint32)
    b.copy_to_host(out, buf)
    assert e1.query()
    ms = e0.elapsed_ms(e1)
    assert 0 < ms < 60_000
    ref = np.zeros(n, np.uint32)
    with np.errstate(over="ignore"):
        for _ in range(300):
            ref = ref * np.uint32(1664525) + np.uint32(1013904223)
    np.testing.assert_array_equal(out, ref)
    with pytest.raises(Error) as ei:
        e0.elapsed_ms(object())
    assert ei.value.kind is ErrorKind.INVALID_VALUE
    a.synchronize()


def test_grids_past_the_limits(dev: Any) -> None:
    """The checked launch refuses a dimension of more than 2**32 - 1 threads (a 2**41-thread grid ran on the simulated
    device: a Metal thread position is a 32-bit uint per dimension); the unchecked launch returns the Error of a
    dimension MTLSize cannot hold (an OverflowError escaped while a compute encoder was open) and the stream works on."""
    k = _kernels(dev)["vector_add"]
    s = dev.create_stream()
    a = dev.alloc(64)
    for dims in (LaunchDims(grid=2**31, block=1024), LaunchDims(grid=2**32), LaunchDims(grid=(1, 2**22), block=(1, 1024))):
        with pytest.raises(Error) as ei:
            s.launch(KernelLaunch(k, dims, (a, a, a, np.uint32(0))))
        assert ei.value.kind is ErrorKind.INVALID_VALUE and "4294967295 per dimension" in str(ei.value), ei.value
    for dims in (LaunchDims(grid=2**64), LaunchDims(grid=(1, 1, 2**70), block=1)):
        r = s.launch_unchecked(KernelLaunch(k, dims, (a, a, a, np.uint32(0))))
        assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_VALUE and "MTLSize" in str(r), r
    s.launch(KernelLaunch(k, LaunchDims(grid=1, block=16), (a, a, a, np.uint32(16))))
    s.synchronize()


def test_compile_failure_carries_the_compiler_message(dev: Any) -> None:
    with pytest.raises(Error) as ei:
        dev.load_module("kernel void not_a_builtin(device float *x [[buffer(0)]]) {\n  x[0] = ;\n}\n")
    e = ei.value
    assert e.kind is ErrorKind.COMPILE_FAILED and e.backend == "METAL" and e.code == 3  # MTLLibraryErrorCompileFailure
    assert "MTLLibraryErrorDomain" in str(e) and "program_source:1:13: error:" in str(e), str(e)
    with pytest.raises(Error) as ei:
        dev.load_module("no kernel at all")
    assert ei.value.kind is ErrorKind.COMPILE_FAILED
    with pytest.raises(Error) as ei:
        dev.load_module("kernel void vector_add(\0")  # NUL: refused before any message
    assert ei.value.kind is ErrorKind.INVALID_VALUE
    with pytest.raises(Error) as ei:
        dev.load_module(MSL).kernel("no_such")
    assert ei.value.kind is ErrorKind.INVALID_VALUE and "no_such" in str(ei.value)


def test_launch_checks_before_any_message(dev: Any, sim: Sim) -> None:
    k = _kernels(dev)
    s = dev.create_stream()
    a = dev.alloc(64)
    s.synchronize()
    gc.collect()
    cbs, validation = sim.live("IASimCommandBuffer"), sim.validation_errors()
    bad: list[tuple[Any, ErrorKind]] = [
        (KernelLaunch(k["vector_add"], LaunchDims(1, (32, 32, 2)), (a, a, a, np.uint32(1))), ErrorKind.INVALID_VALUE),
        (KernelLaunch(k["vector_add"], LaunchDims(1, 1), (a, a, a)), ErrorKind.INVALID_VALUE),
        (KernelLaunch(k["vector_add"], LaunchDims(1, 1), (a, a, np.uint32(1), np.uint32(1))), ErrorKind.INVALID_VALUE),
        (KernelLaunch(k["vector_add"], LaunchDims(1, 1), (a, a, a, a)), ErrorKind.INVALID_VALUE),
        (KernelLaunch(k["vector_add"], LaunchDims(1, 1), (a, a, a, np.uint64(1))), ErrorKind.INVALID_VALUE),
        (KernelLaunch(k["vector_add"], LaunchDims(1, 1), (a, a, a, -1)), ErrorKind.INVALID_VALUE),
        (KernelLaunch(k["vector_add"], LaunchDims(1, 1), (a, a, a, "4")), ErrorKind.INVALID_VALUE),
    ]
    for launch, kind in bad:
        with pytest.raises(Error) as ei:
            s.launch(launch)
        assert ei.value.kind is kind, launch
        r = s.launch_unchecked(launch)
        assert isinstance(r, Error) and r.kind is kind, launch
    with pytest.raises(TypeError):
        s.launch("not a launch")
    dead = dev.alloc(64)
    dead.free()
    freed = KernelLaunch(k["vector_add"], LaunchDims(1, 1), (a, dead, a, np.uint32(1)))
    with pytest.raises(Error) as ei:
        s.launch(freed)
    assert ei.value.kind is ErrorKind.INVALID_HANDLE
    r = s.launch_unchecked(freed)
    assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE
    gc.collect()
    assert sim.live("IASimCommandBuffer") == cbs and sim.validation_errors() == validation, "a message was sent"


def test_a_repeated_launch_never_passes_a_freed_buffer(dev: Any) -> None:
    """A repeated KernelLaunch reuses its packed arguments (the stream keeps the last one), but not once one of
    its allocations was freed, plain or pooled."""
    k = _kernels(dev)["vector_add"]
    s = dev.create_stream()
    a, b = dev.alloc(64), dev.memory_pool().alloc(64)
    launch = KernelLaunch(k, LaunchDims(1, 16), (a, b, a, np.uint32(16)))
    s.launch(launch)
    s.launch(launch)
    assert s.launch_unchecked(launch) is None
    b.free()
    with pytest.raises(Error) as ei:
        s.launch(launch)
    assert ei.value.kind is ErrorKind.INVALID_HANDLE
    r = s.launch_unchecked(launch)
    assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE
    again = KernelLaunch(k, LaunchDims(1, 16), (a, a, a, np.uint32(16)))
    s.launch(again)
    a.free()
    with pytest.raises(Error) as ei:
        s.launch(again)
    assert ei.value.kind is ErrorKind.INVALID_HANDLE
    s.synchronize()


def test_an_unchecked_plan_never_skips_the_checked_launchs_checks(dev: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """launch_unchecked keeps its plan for the next launch of the same KernelLaunch, but a checked launch of it still
    validates its LaunchDims against the device's limits (which the unchecked launch does not); a checked plan is
    reused by both."""
    import dataclasses

    k = _kernels(dev)["vector_add"]
    s = dev.create_stream()
    a = dev.alloc(64)
    limits = dataclasses.replace(dev.descriptor.limits, max_global=(64, 1, 1))
    monkeypatch.setattr(dev, "descriptor", dataclasses.replace(dev.descriptor, limits=limits))
    wide = KernelLaunch(k, LaunchDims(4, 32), (a, a, a, np.uint32(0)))  # 128 threads: past max_global
    assert s.launch_unchecked(wide) is None
    assert s.launch_unchecked(wide) is None
    with pytest.raises(Error) as ei:
        s.launch(wide)
    assert ei.value.kind is ErrorKind.INVALID_VALUE, ei.value
    ok = KernelLaunch(k, LaunchDims(1, 16), (a, a, a, np.uint32(16)))
    s.launch(ok)
    assert s.launch_unchecked(ok) is None
    s.launch(ok)
    s.synchronize()


def test_pool_frees_on_an_idle_device_ask_no_stream(dev: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool block freed with no stream is fenced after the device's work: the device tracks its enqueues (as
    OpenCL's), so once a fence has completed and nothing was enqueued since, a free asks no stream (the pool's hot
    path), and a launch makes the next free fence again."""
    from ironaccelerator_runtime.backends.metal import MetalStream

    k = _kernels(dev)["vector_add"]
    s = dev.create_stream()
    a = dev.alloc(64)
    pool = dev.memory_pool()
    fences: list[Any] = []
    real = MetalStream._pool_fence

    def counted(self: Any) -> Any:
        fences.append(self)
        return real(self)

    monkeypatch.setattr(MetalStream, "_pool_fence", counted)
    s.launch(KernelLaunch(k, LaunchDims(1, 16), (a, a, a, np.uint32(16))))
    pool.alloc(256).free()  # work enqueued since the last fence: the streams are asked
    assert fences == [s]
    s.synchronize()
    pool.alloc(256).free()  # (the fence seen complete)
    del fences[:]
    for _ in range(3):
        pool.alloc(256).free()
    assert fences == []
    b = pool.alloc(256)
    s.launch(KernelLaunch(k, LaunchDims(1, 16), (a, a, a, np.uint32(16))))
    b.free()
    assert fences == [s]
    s.synchronize()


def _batched(dev: Any, n: int = 64) -> tuple[Any, Any, Any, Any, Callable[[], bool]]:
    """A stream, shared buffers x (= 1), y (= 2) and out, the launch out = x + y, and whether out holds it."""
    k = _kernels(dev)["vector_add"]
    x, y, out = (dev.alloc(n * 4, MemoryKind.UNIFIED) for _ in range(3))
    np.frombuffer(x.host_view(), np.float32)[:] = 1.0
    np.frombuffer(y.host_view(), np.float32)[:] = 2.0
    np.frombuffer(out.host_view(), np.float32)[:] = 0.0
    launch = KernelLaunch(k, LaunchDims(1, n), (x, y, out, np.uint32(n)))

    def done() -> bool:
        return bool((np.frombuffer(out.host_view(), np.float32) == 3.0).all())

    return dev.create_stream(), launch, out, (x, y), done


def _eventually(done: Callable[[], bool], seconds: float = 10.0) -> bool:
    import time

    end = time.monotonic() + seconds
    while not done():
        if time.monotonic() > end:
            return False
        time.sleep(0.001)
    return True


@pytest.mark.parametrize("unchecked", [False, True], ids=["checked", "unchecked"])
@pytest.mark.parametrize("how", ["synchronize", "event", "query", "copy_to_host", "fill", "callback", "pool",
                                 "batch_full", "dropped"])
def test_batched_launches_are_always_committed(dev: Any, how: str, unchecked: bool) -> None:
    """Launches are encoded into the stream's open command buffer, committed after _BATCH of them or by the
    stream's next operation: every one of those sees the launches' work (never left uncommitted)."""
    from ironaccelerator_runtime.backends.metal.tables import _BATCH

    s, launch, out, keep, done = _batched(dev)

    def go(n: int = 1) -> None:
        for _ in range(n):
            if unchecked:
                assert s.launch_unchecked(launch) is None
            else:
                s.launch(launch)

    go()
    if how == "synchronize":
        s.synchronize()
        assert done()
    elif how == "event":
        e = s.record_event()
        e.synchronize()  # an event recorded after the launch completes after it
        assert e.query() and done()
    elif how == "query":
        assert _eventually(s.query) and done()
    elif how == "copy_to_host":
        host = np.zeros(64, np.float32)
        s.copy_to_host(host, out)  # a blit after the launch: reads its result
        assert (host == 3.0).all()
    elif how == "fill":
        s.fill(out, 0)  # after the launch: the launch's result is overwritten, not the other way round
        s.synchronize()
        assert (np.frombuffer(out.host_view(), np.float32) == 0.0).all()
    elif how == "callback":
        seen: list[int] = []
        s.add_callback(lambda: seen.append(1))  # (no synchronize: the callback's event commits the launch)
        assert s.drain_callbacks(10.0) and seen == [1] and done()  # (never run uncommitted: done() stays False)
    elif how == "pool":
        pool = dev.memory_pool()
        b = pool.alloc(256)
        b.free()  # fenced after the launch: the fence commits it
        assert _eventually(done)
    elif how == "batch_full":
        go(_BATCH - 1)  # the _BATCH-th launch commits the command buffer: no other call needed
        assert _eventually(done)
        s.synchronize()
    elif how == "dropped":
        del s  # the work was asked for: a dropped stream commits it
        gc.collect()
        assert _eventually(done)
    del keep


def test_a_failed_launch_fails_its_batch_and_is_reported_once(dev: Any) -> None:
    """A launch that fails (the simulator's page fault) fails the command buffer it shares with the launches
    around it: synchronize reports LAUNCH_FAILED once; the stream works on."""
    k = _kernels(dev)
    s, launch, out, keep, done = _batched(dev)
    a = dev.alloc(64)
    s.launch(launch)
    s.launch(KernelLaunch(k["vector_add"], LaunchDims(4, 64), (a, a, a, np.uint32(256))))  # past the 16 floats
    s.launch(launch)
    with pytest.raises(Error) as ei:
        s.synchronize()
    assert ei.value.kind is ErrorKind.LAUNCH_FAILED and "1 command buffer(s) failed" in str(ei.value), ei.value
    np.frombuffer(out.host_view(), np.float32)[:] = 0.0
    s.launch(launch)
    s.synchronize()
    assert done()


def test_a_failed_command_buffer_is_reported(dev: Any) -> None:
    """A kernel that would read past its buffers fails its command buffer (the simulator's page fault):
    Stream.synchronize raises LAUNCH_FAILED with the command buffer's NSError."""
    k = _kernels(dev)
    s = dev.create_stream()
    a = dev.alloc(64)
    s.launch(KernelLaunch(k["vector_add"], LaunchDims(4, 64), (a, a, a, np.uint32(256))))  # n past the 16 floats
    with pytest.raises(Error) as ei:
        s.synchronize()
    assert ei.value.kind is ErrorKind.LAUNCH_FAILED and "MTLCommandBufferErrorDomain 3" in str(ei.value), str(ei.value)
    s.synchronize()  # reported once


def test_a_callback_after_a_failed_command_buffer_still_runs(dev: Any) -> None:
    """add_callback after a launch whose command buffer fails: fn runs once the work is over, the failure is not
    filed under fn (callback_errors stays empty), and Stream.synchronize still raises it (the callback thread's
    wait took it from the stream before, and synchronize reported success)."""
    k = _kernels(dev)
    s = dev.create_stream()
    a = dev.alloc(64)
    s.launch(KernelLaunch(k["vector_add"], LaunchDims(4, 64), (a, a, a, np.uint32(256))))  # faults
    ran: list[int] = []
    s.add_callback(lambda: ran.append(1))
    assert s.drain_callbacks(timeout=60)
    assert ran == [1] and s.callback_errors == []
    with pytest.raises(Error) as ei:
        s.synchronize()
    assert ei.value.kind is ErrorKind.LAUNCH_FAILED and "MTLCommandBufferErrorDomain 3" in str(ei.value)
    s.synchronize()  # reported once


_CALLBACK_LOOP = """
import sys, threading
import ironaccelerator as ia
dev = ia.BackendRegistry.default().get(ia.BackendKind.METAL).open(0)
ran = []
def loop(n):
    s = dev.create_stream()
    for i in range(n):
        s.add_callback(lambda: ran.append(1))
        s.synchronize()
    assert s.drain_callbacks(timeout=60) and not s.callback_errors
loop(300)
threads = [threading.Thread(target=loop, args=(100,)) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
dev.close()
import cffi
ffi = cffi.FFI()
ffi.cdef("long ia_metal_sim_zombie_messages(void);")
print("ok", len(ran), ffi.dlopen(None).ia_metal_sim_zombie_messages())
"""


def test_callbacks_and_synchronize_in_a_loop_release_each_command_buffer_once(metal_sim: Path) -> None:
    """add_callback then synchronize in a loop, on one thread and on 8: the callback thread's wait and
    synchronize both let go of the completed command buffers, and released the same ones twice (an uncaught
    NSException on a freed command buffer, heap corruption or a hang within a few iterations).  In a child
    process: it must exit 0, every callback run, no message to a freed object."""
    env = dict(os.environ, IA_METAL_SIM_DIR=str(metal_sim.parent))
    proc = subprocess.run([sys.executable, "-c", _CALLBACK_LOOP], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.split() == ["ok", str(300 + 8 * 100), "0"], proc.stdout + proc.stderr[-3000:]
    assert "without pool" not in proc.stderr, proc.stderr[-3000:]


def test_closed_device_refuses(backend: Any) -> None:
    d = backend.open(0)
    s = d.create_stream()
    a = d.alloc(64)
    k = _kernels(d)["vector_add"]
    d.close()
    calls: list[Callable[[], object]] = [
        lambda: d.alloc(64), lambda: s.copy_from_host(a, b"x"), lambda: s.synchronize(),
        lambda: s.launch(KernelLaunch(k, LaunchDims(1, 1), (a, a, a, 1))), lambda: d.load_module(MSL)]
    for call in calls:
        with pytest.raises(Error) as ei:
            call()
        assert ei.value.kind is ErrorKind.INVALID_HANDLE
    r = s.launch_unchecked(KernelLaunch(k, LaunchDims(1, 1), (a, a, a, 1)))
    assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE
    a.free()  # still works after close


def test_no_simulator_object_outlives_its_handles(backend: Any, sim: Sim) -> None:
    """Everything made through the backend is released once closed and dropped: no live simulator object, no
    message to a deallocated one, after 2,000 launches and the rest of a session."""
    gc.collect()
    zombies = sim.zombies()
    d = backend.open(0)
    k = _kernels(d)
    s, s2 = d.create_stream(), d.create_stream()
    a = d.alloc(4096)
    u = d.alloc(4096, MemoryKind.UNIFIED)
    pool = d.memory_pool()
    p = pool.alloc(1000)
    s.copy_from_host(a, np.zeros(1024, np.float32))
    launch = KernelLaunch(k["vector_add"], LaunchDims(4, 256), (a, a, u, np.uint32(1024)))
    for _ in range(1000):
        s.launch(launch)
        assert s.launch_unchecked(launch) is None
    e = s.record_event()
    s2.wait_event(e)
    s2.copy(p, p, 500, dst_offset=500)  # (ranges of one allocation must not overlap)
    s.copy_to_host(np.zeros(16, np.uint8), u)
    d.synchronize()
    assert sim.live() > 0
    d.close()
    del d, k, s, s2, a, u, pool, p, launch, e
    gc.collect()
    assert sim.live() == 0, {c: sim.live(c) for c in ("IASimDevice", "IASimBuffer", "IASimCommandQueue",
                                                      "IASimCommandBuffer", "IASimLibrary", "IASimFunction",
                                                      "IASimComputePipelineState", "IASimSharedEvent",
                                                      "MTLCompileOptions", "IASimError")}
    assert sim.zombies() == zombies


def test_without_the_simulated_device_metal_is_unavailable(metal_sim: Path) -> None:
    """On Linux the binding's Metal "framework" is the simulated device, found in IA_METAL_SIM_DIR (else by the
    system loader): without it the backend is unavailable, LIBRARY_NOT_FOUND naming the library."""
    env = {k: v for k, v in os.environ.items() if k not in ("IA_METAL_SIM_DIR", "LD_LIBRARY_PATH")}
    code = ("import ironaccelerator as ia\n"
            "try:\n    ia.BackendRegistry.default().get(ia.BackendKind.METAL)\n"
            "except ia.Error as e:\n    print(e.kind.name, e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("LIBRARY_NOT_FOUND") and "libia_metal_sim.so" in out.stdout, out.stdout


@pytest.mark.parametrize("mode", ["api", "abi"])
def test_a_session_in_both_binding_modes(metal_sim: Path, tmp_path: Path, mode: str) -> None:
    """The backend in a child process over the compiled binding (API) and over the package without its compiled
    module (ABI: the same contract in Python): correct results, nothing left alive, no message to a deallocated
    object, and nothing autoreleased outside a pool (GNUstep would say so on stderr)."""
    root = ROOT / "generated"
    if mode == "abi":
        root = tmp_path / "abi"
        shutil.copytree(ROOT / "generated" / "ironaccelerator", root / "ironaccelerator",
                        ignore=shutil.ignore_patterns("_cffi.*.so", "__pycache__"))
    env = dict(os.environ, IA_METAL_SIM_DIR=str(metal_sim.parent),
               PYTHONPATH=os.pathsep.join([str(root), str(ROOT / "runtime"), str(ROOT / "tests")]))
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "metal_backend_child.py")], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "without pool" not in proc.stderr, proc.stderr
    assert proc.stdout.split() == ["ok", mode, "0", "0"], proc.stdout + proc.stderr


def test_the_metal_trampolines_compile_for_apple(tmp_path: Path) -> None:
    """The Apple flavour (objc_msgSend cast to each prototype; objc_msgSend_stret for the 24-byte MTLSize on x86-64)
    cannot run here: the generated Metal trampolines are compiled with -DIA_OBJC_APPLE=1 against declarations of
    Apple's runtime functions written in tests/test_objc_trampolines.py, and in the GNU flavour."""
    from test_objc_trampolines import APPLE_DECLARATIONS, INCLUDE, WARNINGS, _gcc

    lib = ROOT / "generated" / "ironaccelerator" / "backends" / "metal" / "metal"
    text = (lib / "trampolines.c").read_text(encoding="utf-8")
    assert "typedef MTLSize (*ia_send_" in text and "IA_SEND_STRUCT(ia_send_" in text  # maxThreadsPerThreadgroup
    for flavour in ("apple", "gnu"):
        decls = tmp_path / f"{flavour}.h"
        decls.write_text(APPLE_DECLARATIONS if flavour == "apple" else "", encoding="utf-8")
        r = subprocess.run([_gcc(), "-std=c11", "-fsyntax-only", *WARNINGS,
                            f"-DIA_OBJC_APPLE={int(flavour == 'apple')}", "-include", str(decls), "-I", str(INCLUDE),
                            "-I", str(lib), str(lib / "trampolines.c")], capture_output=True, text=True)
        assert r.returncode == 0, (flavour, r.stderr)
