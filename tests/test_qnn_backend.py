"""The QNN backend on the trait surface, on Qualcomm's real libraries (libQnnHtp.so / libQnnSystem.so of the
onnxruntime-qnn wheel; HTP graphs execute in x86 emulation): graphs are built through the raw bindings
(tests/qnn_graphs.py), serialized (``QnnContext_getBinary``), then loaded and run through the trait surface.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest

from ironaccelerator import (
    Allocation, BackendKind, BackendRegistry, CapabilityFlags, ComputeTier, Error, ErrorKind, KernelLaunch, LaunchDims,
    MemoryKind, Vendor,
)

q = pytest.importorskip("ironaccelerator.backends.qnn.interface")
if not q.has("QnnBackend_create"):
    pytest.skip("libQnnHtp.so not found (pip install --no-deps onnxruntime-qnn)", allow_module_level=True)

import qnn_graphs as G  # noqa: E402
from ironaccelerator import Backend  # noqa: E402
from ironaccelerator.backends.qnn import QnnBackend, QnnDevice  # noqa: E402
from ironaccelerator.backends.qnn import _backend as qb  # noqa: E402
from ironaccelerator_runtime.backends.qnn import check_config_layout  # noqa: E402

DTYPES = ("f32", "f16", "u8")


@pytest.fixture(scope="module")
def binary() -> bytes:
    return G.build_binary(DTYPES)


@pytest.fixture(scope="module")
def backend() -> qb.QnnBackend:
    return qb.QnnBackend()  # a fresh backend, not the registry's


@pytest.fixture(scope="module")
def device(backend: qb.QnnBackend) -> Iterator[qb.QnnDevice]:
    dev = backend.open(0)
    with dev:
        yield dev


@pytest.fixture(scope="module")
def module(device: qb.QnnDevice, binary: bytes) -> qb.QnnModule:
    return device.load_module(binary)


def _run(device: qb.QnnDevice, kernel: qb.QnnKernel, dt: str, seed: int) -> tuple[Any, Any, Any]:
    a, b = G.inputs(dt, seed)
    c = np.zeros_like(a)
    s = device.create_stream()
    da, db, dc = (device.alloc(x.nbytes) for x in (a, b, c))
    s.copy_from_host(da, a)
    s.copy_from_host(db, b)
    s.launch(KernelLaunch(kernel, LaunchDims(), (da, db, dc)))
    s.copy_to_host(c, dc)
    s.synchronize()
    return a, b, c


# ------------------------------------------------------------------ devices


def test_registry_has_the_builtin_qnn_backend() -> None:
    b = BackendRegistry.default().get(BackendKind.QNN)
    assert type(b).__name__ == "QnnBackend" and b.kind is BackendKind.QNN
    assert any(line.startswith("QNN: library loaded, 1 device") for line in BackendRegistry.default().report())


def test_device_descriptor_from_platform_info(backend: Any) -> None:
    pi = q.QnnDevice_getPlatformInfo(q.ffi.NULL)
    ext = q.ffi.cast("QnnHtpDevice_DeviceInfoExtension_t *", pi.v1.hwDevices[0].v1.deviceInfoExtension).onChipDevice
    soc, arch = int(ext.socModel), int(ext.arch)
    q.QnnDevice_freePlatformInfo(q.ffi.NULL, pi)
    devs = backend.devices()
    assert len(devs) == 1
    d = devs[0]
    assert (soc, arch) == (30, 68)  # what these libraries report (the emulated device)
    assert d.name == "Qualcomm HTP v68 (SM8350)"
    assert d.vendor is Vendor.QUALCOMM and d.capability.tier is ComputeTier.NPU
    v = q.QnnBackend_getApiVersion()
    assert d.capability.vendor_version == (f"QNN {v.coreApiVersion.major}.{v.coreApiVersion.minor} / HTP "
                                           f"{v.backendApiVersion.major}.{v.backendApiVersion.minor} v68")
    assert CapabilityFlags.FP16 not in d.capability.flags and CapabilityFlags.INT8_DOT in d.capability.flags


@pytest.mark.parametrize("soc,model,arch,fp16", [
    ("SM8350", 30, 68, False), ("SA8295", 39, 68, False), ("SM8450", 36, 69, True), ("SM8475", 42, 69, True),
    ("SM8550", 43, 73, True), ("SM8650", 57, 75, True), ("SM8750", 69, 79, True), ("SM8850", 87, 81, True),
])
def test_soc_table_and_capability_translation(soc: str, model: int, arch: int, fp16: bool) -> None:
    t = qb.TABLES
    assert t.soc_models[soc] == (model, arch)
    assert t.soc_name(model) == soc and t.soc_model(soc) == model and t.soc_model(soc.lower()) == model
    assert t.device_name(arch, model) == f"Qualcomm HTP v{arch} ({soc})"
    cap = qb.translate_capability(arch, "x")
    assert cap.tier is ComputeTier.NPU
    assert (CapabilityFlags.FP16 in cap.flags) is fp16
    assert CapabilityFlags.TENSOR_CORES in cap.flags and CapabilityFlags.INT8_DOT in cap.flags


def test_unknown_soc() -> None:
    assert qb.TABLES.soc_name(9999) is None
    assert qb.TABLES.device_name(68, 9999) == "Qualcomm HTP v68 (SoC model 9999)"
    with pytest.raises(Error) as ei:
        qb.TABLES.soc_model("SM0000")
    assert ei.value.kind is ErrorKind.INVALID_VALUE and "SM8650" in str(ei.value)


def test_config_layout_check_refuses_older_library() -> None:
    check_config_layout((2, 40), (2, 40), 8)
    check_config_layout((2, 41), (2, 40), 8)
    for lib in ((2, 32), (3, 0), (1, 99)):
        with pytest.raises(Error) as ei:
            check_config_layout(lib, (2, 40), 8)
        msg = str(ei.value)
        assert ei.value.kind is ErrorKind.UNSUPPORTED
        assert "2.40" in msg and f"{lib[0]}.{lib[1]}" in msg and "offset 8" in msg, msg
    assert q.ffi.offsetof("QnnHtpDevice_CustomConfig_t", "socModel") == 8
    assert (q.QNN_API_VERSION_MAJOR, q.QNN_API_VERSION_MINOR) == (2, 40)


def _build_on(device: qb.QnnDevice, dt: str = "f32") -> bytes:
    """An add graph built on an opened trait-surface device's own handles, serialized."""
    ctx = q.QnnContext_create(device._backend_owner.handle, device.handle, q.ffi.NULL)
    s = G.Session(device._backend_owner.handle, device.handle, ctx)
    try:
        G.add_graph(s, f"add_{dt}", dt)
        return s.binary()
    finally:
        s.backend = s.device = None  # (the trait surface's handles: only the context is this helper's)
        s.close()


_ARCH_CHILD = """
import sys
sys.path.insert(0, {tests!r})
import test_qnn_backend as T
from ironaccelerator.backends.qnn import _backend as qb
from ironaccelerator import CapabilityFlags
b = qb.QnnBackend()
with b.open(0, **{how!r}) as dev:
    m = dev.load_module(T._build_on(dev))
    print("NAME", dev.descriptor.name, CapabilityFlags.FP16 in dev.descriptor.capability.flags)
    print("BINARY", m.soc_model, m.platform_arch, qb.TABLES.soc_name(m.soc_model))
"""


@pytest.mark.parametrize("how", [{"arch": 75}, {"arch": "v75"}, {"soc": "SM8650"}, {"soc": 57}])
def test_arch_selection_reaches_the_binary(how: Any) -> None:
    """Each in a child process: a SoC selection is process-wide in libQnnHtp (measured: after a device opened
    with the SOC option, graphs built on later default devices of the process run f32 at fp16 precision)."""
    code = _ARCH_CHILD.format(tests=str(Path(__file__).parent), how=how)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "NAME Qualcomm HTP v75" in r.stdout and " True" in r.stdout, r.stdout
    assert "BINARY 57 75 SM8650" in r.stdout, r.stdout


def open_v75(backend: Backend) -> QnnDevice:
    """The README's typed form (issue 23 item 10: ``backend.open(0, arch=75)`` failed ``mypy --strict`` and the
    backend classes were importable only from private modules): the public class, narrowed, takes the HTP
    options.  ``mypy --strict tests`` (test_types.py) checks these lines; the test below runs them."""
    assert isinstance(backend, QnnBackend)
    return backend.open(0, arch=75)


def test_backend_classes_are_public_and_open_is_typed() -> None:
    from ironaccelerator.backends import qnn as public

    backend = BackendRegistry.default().get(BackendKind.QNN)
    assert isinstance(backend, QnnBackend) and type(backend) is qb.QnnBackend
    assert public.__all__ == [f"Qnn{c}" for c in ("Backend", "Device", "Allocation", "Stream", "Event", "Module",
                                                   "Kernel")]
    for name in public.__all__:
        assert getattr(public, name) is getattr(qb, name)
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            "import test_qnn_backend as t\n"
            "from ironaccelerator import BackendRegistry, BackendKind\n"
            "d = t.open_v75(BackendRegistry.default().get(BackendKind.QNN))\n"
            "print('NAME', d.descriptor.name, type(d).__name__)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "NAME Qualcomm HTP v75" in r.stdout and "QnnDevice" in r.stdout, r.stdout


def test_unknown_arch_is_refused_listing_the_supported_ones(backend: Any) -> None:
    """open(arch=12) returned an "HTP v12" device: an architecture QnnHtpDevice_Arch_t does not list is INVALID_VALUE
    naming the supported ones (before any device is made)."""
    for arch in (12, "v12", 0, 2**31 - 1, "v"):
        with pytest.raises(Error) as ei:
            backend.open(0, arch=arch)
        msg = str(ei.value)
        assert ei.value.kind is ErrorKind.INVALID_VALUE and ei.value.backend == "QNN", msg
        assert ei.value.function == "Backend.open" and "v68, v69, v73, v75, v79, v81" in msg, msg


def test_default_device_binary_reports_no_selection(device: Any) -> None:
    m = device.load_module(_build_on(device))
    assert m.soc_model in (None, 30)


# ------------------------------------------------------------------ modules, kernels, launches


def test_module_describes_graphs(module: Any) -> None:
    assert module.graph_names == [f"add_{dt}" for dt in DTYPES]
    k = module.kernel("add_u8")
    assert k.num_args == 3 and [t.name for t in k.inputs] == ["add_u8_a", "add_u8_b"]
    (c,) = k.outputs
    assert c.name == "add_u8_c" and c.dims == (1, G.N) and c.nbytes == G.N and not c.is_input
    assert c.qnn_dtype == q.Qnn_DataType_t.QNN_DATATYPE_UFIXED_POINT_8
    assert c.quantization is not None and c.quantization[0] == pytest.approx(G.QC[0]) and c.quantization[1] == G.QC[1]
    f = module.kernel("add_f32")
    assert all(t.nbytes == 4 * G.N and t.quantization is None for t in f.inputs + f.outputs)
    assert "add_f32_a: f32[1, 1024]" in f.signature()


@pytest.mark.parametrize("dt", DTYPES)
def test_launch_matches_numpy(device: Any, module: Any, dt: str) -> None:
    a, b, c = _run(device, module.kernel(f"add_{dt}"), dt, seed=11)
    G.check(dt, a, b, c)
    assert np.any(c != 0)


def test_repeated_launch_rebinds_new_arguments(device: Any, module: Any) -> None:
    k = module.kernel("add_f32")
    s = device.create_stream()
    bufs = [device.alloc(4 * G.N) for _ in range(4)]
    x = [np.full((1, G.N), v, np.float32) for v in (1, 2, 3)]
    for buf, arr in zip(bufs, x):
        s.copy_from_host(buf, arr)
    out = np.zeros((1, G.N), np.float32)
    s.launch(KernelLaunch(k, LaunchDims(), (bufs[0], bufs[1], bufs[3])))
    s.copy_to_host(out, bufs[3])
    assert np.all(out == 3)
    s.launch(KernelLaunch(k, LaunchDims(), (bufs[1], bufs[2], bufs[3])))  # a new tuple, other buffers
    s.copy_to_host(out, bufs[3])
    assert np.all(out == 5)
    pooled = [device.memory_pool().alloc(4 * G.N) for _ in range(3)]
    for p, arr in zip(pooled, x):
        s.copy_from_host(p, arr)
    assert s.launch_unchecked(KernelLaunch(k, LaunchDims(), (pooled[0], pooled[2], bufs[0]))) is None
    s.copy_to_host(out, bufs[0])
    assert np.all(out == 4)



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


def test_alloc_and_free_run_no_python_beyond_themselves(device: Any) -> None:
    """Issue 27 item 4: ``dev.alloc(n).free()`` of DEVICE memory, checked or unchecked, runs no Python function in
    API mode (the compiled allocators of ia_host_memory.h), and in ABI mode alloc, free and the drop's ``__del__``
    only (no ``_checked_alloc``/``_alloc``, no ``__init__``, no ``_release``); the allocation is the one the checked
    path makes (``alloc``'s tracked, ``alloc_unchecked``'s not), its client buffer let go by ``free``."""
    compiled = q.BINDING_MODE == "api"
    assert (device._host_class is not None) is compiled
    assert _python_calls(lambda: device.alloc(256).free()) == \
        ([] if compiled else ["QnnDevice.alloc", "QnnAllocation.free", "QnnAllocation.__del__"])
    assert _python_calls(lambda: device.alloc_unchecked(256).free_unchecked()) == \
        ([] if compiled else ["QnnDevice.alloc_unchecked", "QnnAllocation.free_unchecked", "QnnAllocation.__del__"])
    for a, tracked in ((device.alloc(256), True), (device.alloc_unchecked(256), False)):
        slow = device._alloc(256, MemoryKind.DEVICE, tracked)
        assert type(a) is type(slow) and (a._finalizer is None) is (slow._finalizer is None) is (not tracked)
        assert (a.nbytes, a.kind, a.device, a.freed) == (256, MemoryKind.DEVICE, device, False)
        assert len(q.ffi.buffer(a.buffer)) == 256 and bytes(a.host_view()) == bytes(256)
        a.free()
        assert a.freed and a.buffer is None
        with pytest.raises(Error) as ei:
            a.free()
        assert ei.value.kind is ErrorKind.INVALID_HANDLE
        r = a.free_unchecked()
        assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE
        slow.free()


@pytest.mark.skipif(q.BINDING_MODE != "api", reason="the compiled host memory is API mode's")
def test_compiled_host_memory(backend: Any, module: Any) -> None:
    """Issue 27 item 4: the compiled allocation (calloc'ed in C, ia_host_memory.h) behaves as the Python one: zeroed
    memory of the size asked, its class named QnnAllocation for every kind and path, the same errors (a second
    free, a free while a host view is exported), release on drop of a tracked allocation only, and memory that a
    graph still bound to a freed allocation keeps alive (its client buffer holds an export) until it is rebound;
    a closed device's allocators refuse as the methods do."""
    device = module.device
    a = device.alloc(1000)
    assert type(a).__name__ == "QnnAllocation" and type(a) is device._host_class and Allocation in type(a).__mro__
    assert (a.nbytes, a.kind, a.device, a.freed, a._tracked) == (1000, MemoryKind.DEVICE, device, False, True)
    assert a.ptr != 0 and a._host_address() == a.ptr and bytes(a.host_view()) == bytes(1000)
    assert int(q.ffi.cast("uintptr_t", a.buffer)) == a.ptr and len(q.ffi.buffer(a.buffer)) == 1000
    for kind in (MemoryKind.HOST, MemoryKind.DEVICE):  # the Python paths make the same class
        b = device.alloc(7, kind=kind)
        assert type(b) is type(a) and b.kind is kind and bytes(b.host_view()) == bytes(7)
        b.free()
    assert type(device.alloc(16, MemoryKind.DEVICE)) is type(a)
    view = a.host_view()
    view[:3] = b"abc"
    with pytest.raises(Error) as ei:
        a.free()
    assert ei.value.kind is ErrorKind.INVALID_VALUE and not a.freed
    r = a.free_unchecked()
    assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_VALUE and not a.freed
    view.release()
    a.free()
    assert a.freed and a.buffer is None and a.ptr == 0 and a._host_address() is None
    with pytest.raises(Error) as ei:
        a.free()
    assert ei.value.kind is ErrorKind.INVALID_HANDLE
    r = a.free_unchecked()
    assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE
    with pytest.raises(BufferError):
        a._block()
    # a graph bound to an allocation freed afterwards: the client buffer it holds keeps the memory
    k = module.kernel("add_f32")
    s = device.create_stream()
    x, y, z = (device.alloc(4 * G.N) for _ in range(3))
    s.copy_from_host(x, np.ones(G.N, np.float32))
    s.launch(KernelLaunch(k, LaunchDims(), (x, y, z)))
    block = weakref.ref(z._block())  # (what owns the memory once handed out)
    z.free()
    assert z.ptr == 0 and z.buffer is None
    assert block() is not None, "bound to the graph: the memory stays until the graph lets it go"
    with pytest.raises(Error) as ei:
        s.launch(KernelLaunch(k, LaunchDims(), (x, y, z)))
    assert ei.value.kind is ErrorKind.INVALID_HANDLE
    w = device.alloc(4 * G.N)
    s.launch(KernelLaunch(k, LaunchDims(), (x, y, w)))  # rebound: z's buffer let go, and its memory with it
    assert block() is None
    v = device.alloc(64)
    assert v.buffer is v.buffer  # (one handle: what a pool allocation forwards)
    block = weakref.ref(v._block())
    v.free()
    assert block() is None, "handed out, then let go: freed with the allocation"
    out = np.zeros(G.N, np.float32)
    s.copy_to_host(out, w)
    np.testing.assert_array_equal(out, np.ones(G.N, np.float32))
    del s, ei  # (the module's device fences every live stream: leave none behind; the error's frames hold it)
    gc.collect()
    # release on drop: a tracked allocation only (alloc_unchecked's is the caller's to free)
    released: list[int] = []
    t = device.alloc(64)
    t._track(lambda: released.append(1))
    del t
    gc.collect()
    assert released == [1]
    u = device.alloc_unchecked(64)
    assert not u._tracked
    ref = weakref.ref(u)
    del u
    assert ref() is None
    # a closed device: its allocators take the methods' path, which refuses
    dev = backend.open(0)
    alloc, alloc_unchecked = dev.alloc, dev.alloc_unchecked
    dev.close()
    with pytest.raises(Error) as ei:
        alloc(64)
    assert ei.value.kind is ErrorKind.INVALID_HANDLE
    r = alloc_unchecked(64)
    assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE


def test_pool_frees_on_an_idle_device_ask_no_stream(device: Any, module: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27 item 4: a pool block freed with no stream is fenced after the device's work, and only an
    asynchronous execution leaves work behind its call: it marks the device (``_dirty``, after its enqueue), so a
    free after synchronous launches and copies asks no stream (the pool's hot path, two flag tests), and one after
    an asynchronous execution asks every stream, once."""
    from ironaccelerator_runtime.backends.qnn import QnnStream

    s = device.create_stream()
    a, b = G.inputs("f32", 1)
    bufs = [device.alloc(4 * G.N) for _ in range(3)]
    s.copy_from_host(bufs[0], a)
    s.copy_from_host(bufs[1], b)
    pool = device.memory_pool()
    pool.alloc(256).free()  # (any fence of earlier tests, seen complete)
    fences: list[Any] = []
    real = QnnStream._pool_fence

    def counted(self: Any) -> Any:
        fences.append(self)
        return real(self)

    monkeypatch.setattr(QnnStream, "_pool_fence", counted)
    launch = KernelLaunch(module.kernel("add_f32"), LaunchDims(), tuple(bufs))
    s.launch(launch)
    for _ in range(3):
        pool.alloc(256).free()
    assert fences == []

    class Raw:  # QnnGraph_executeAsync accepting the execution (the x86 HTP refuses it: never run otherwise)
        @staticmethod
        def QnnGraph_executeAsync(*args: Any) -> int:
            return 0

    api = s.api
    monkeypatch.setattr(s, "api", type("Api", (), {"raw": Raw, "null": api.null, "ffi": api.ffi})())
    monkeypatch.setattr(s, "_notify", object())
    monkeypatch.setattr(device.backend, "async_execute", True)
    block = pool.alloc(256)
    assert s._run_async(launch.kernel) == 0 and s._pending == 1 and device._dirty
    with s._cond:
        s._pending = 0  # (its notification)
    block.free()
    assert fences == [s]
    pool.alloc(256).free()
    assert fences == [s]
    for x in bufs:
        x.free()


def test_allocation_slices_bind_graph_tensors_and_take_copies(device: Any, module: Any) -> None:
    """alloc[start:stop] on QNN: the client buffer's address moved by start, as graph inputs and outputs and in
    copies and fills; the bytes around the slices are untouched; INVALID_HANDLE once the allocation is freed."""
    k = module.kernel("add_f32")
    s = device.create_stream()
    n = 4 * G.N
    a = device.alloc(4 * n)
    x, y, z = a[0:n], a[n:2 * n], a[3 * n:]
    s.fill(a, 0xAB)
    s.copy_from_host(x, np.full((1, G.N), 1.5, np.float32))
    s.copy_from_host(y, np.full((1, G.N), 2.0, np.float32))
    s.launch(KernelLaunch(k, LaunchDims(), (x, y, z)))
    out = np.zeros(4 * n, np.uint8)
    s.copy_to_host(out, a)
    s.synchronize()
    assert np.all(out[3 * n:].view(np.float32) == 3.5)
    assert np.all(out[2 * n:3 * n] == 0xAB)  # between the slices
    s.fill(z[:16], 0)
    back = np.zeros(n, np.uint8)
    s.copy_to_host(back, z)
    assert not back[:16].any() and np.all(back[16:].view(np.float32) == 3.5)
    assert np.frombuffer(z.host_view(), np.float32)[-1] == 3.5
    with pytest.raises(Error) as e:
        s.launch(KernelLaunch(k, LaunchDims(), (x, y, a[3 * n + 4:])))  # a slice shorter than the tensor
    assert e.value.kind is ErrorKind.INVALID_VALUE
    a.free()
    with pytest.raises(Error) as e:
        s.copy_to_host(back, z)
    assert e.value.kind is ErrorKind.INVALID_HANDLE

def test_reload_in_a_new_process(binary: bytes, tmp_path: Path) -> None:
    path = tmp_path / "add.bin"
    path.write_bytes(binary)
    child = textwrap.dedent(f"""
        import sys
        import numpy as np
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import qnn_graphs as G
        from ironaccelerator import BackendKind, BackendRegistry, KernelLaunch, LaunchDims
        dev = BackendRegistry.default().get(BackendKind.QNN).open(0)
        m = dev.load_module(open({str(path)!r}, "rb").read())
        s = dev.create_stream()
        for dt in ("f32", "f16", "u8"):
            a, b = G.inputs(dt, 5)
            c = np.zeros_like(a)
            da, db, dc = (dev.alloc(x.nbytes) for x in (a, b, c))
            s.copy_from_host(da, a); s.copy_from_host(db, b)
            s.launch(KernelLaunch(m.kernel("add_" + dt), LaunchDims(), (da, db, dc)))
            s.copy_to_host(c, dc)
            G.check(dt, a, b, c)
        print("RAN", ",".join(m.graph_names))
    """)
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "RAN add_f32,add_f16,add_u8" in r.stdout


# ------------------------------------------------------------------ error paths


def test_wrong_argument_count_names_the_tensors(device: Any, module: Any) -> None:
    k = module.kernel("add_f32")
    s = device.create_stream()
    a = device.alloc(4 * G.N)
    for args in ((a, a), (a, a, a, a), ()):
        with pytest.raises(Error) as ei:
            s.launch(KernelLaunch(k, LaunchDims(), args))
        msg = str(ei.value)
        assert ei.value.kind is ErrorKind.INVALID_VALUE
        assert "add_f32_a, add_f32_b, add_f32_c" in msg and f"{len(args)} given" in msg, msg


def test_wrong_input_count_reaches_htp_as_6004(module: Any) -> None:
    """What the check above prevents: the library's own answer to too few inputs (raw call)."""
    k = module.kernel("add_f32")
    a = np.zeros(G.N, np.float32)
    ins = q.ffi.new("Qnn_Tensor_t[1]", [k._ins[0]])
    ins[0].v1.clientBuf.data = q.ffi.from_buffer(a)
    outs = q.ffi.new("Qnn_Tensor_t[1]", [k._outs[0]])
    outs[0].v1.clientBuf.data = q.ffi.from_buffer(a)
    with pytest.raises(Error) as ei:
        q.QnnGraph_execute(k.handle, ins, 1, outs, 1, q.ffi.NULL, q.ffi.NULL)
    assert ei.value.code is not None and ei.value.code & 0xFFFF == 6004


def test_short_buffers_are_caught_before_c(device: Any, module: Any) -> None:
    k = module.kernel("add_f16")
    s = device.create_stream()
    ok, short = device.alloc(2 * G.N), device.alloc(100)
    for args, which in (((ok, ok, short), "output 'add_f16_c'"), ((short, ok, ok), "input 'add_f16_a'")):
        with pytest.raises(Error) as ei:
            s.launch(KernelLaunch(k, LaunchDims(), args))
        msg = str(ei.value)
        assert ei.value.kind is ErrorKind.INVALID_VALUE and which in msg and "100 bytes" in msg
        assert "2048 bytes" in msg and "f16[1, 1024]" in msg, msg
        assert isinstance(s.launch_unchecked(KernelLaunch(k, LaunchDims(), args)), Error)


def test_element_types_of_typed_arguments_must_match_the_tensors(device: Any, module: Any) -> None:
    """Issue 23 item 6: a typed argument (an imported tensor, or a slice of one) binds only to a tensor of its element
    type, checked and unchecked (INVALID_VALUE naming the tensor): an f64 tensor through the f32 graph, f32 buffers
    through the f16 graph were garbage out, the byte sizes being large enough.  Raw memory (Device.alloc, pool blocks)
    is bytes: it binds by size.  The matching type still runs, correctly."""
    s = device.create_stream()
    f32, f16 = module.kernel("add_f32"), module.kernel("add_f16")
    a64, b64 = (RNG_QNN.standard_normal((1, G.N)) for _ in range(2))
    c64 = np.zeros((1, G.N))
    raw = device.alloc(8 * G.N)
    for kernel, x, y, z, which, held in (
            (f32, a64, b64, c64, "input 'add_f32_a'", "f64"),  # f64 into f32
            (f16, a64.astype(np.float32), b64.astype(np.float32), np.zeros((1, G.N), np.float32),
             "input 'add_f16_a'", "f32")):  # f32 into f16
        da, db, dc = (device.from_dlpack(v) for v in (x, y, z))
        for args, name in (((da, db, dc), which), ((raw, raw, dc), which.replace("input", "output")
                                                                          .replace("_a'", "_c'")),
                           ((da[:kernel.inputs[0].nbytes], raw, raw), which)):
            launch = KernelLaunch(kernel, LaunchDims(), args)
            with pytest.raises(Error) as ei:
                s.launch(launch)
            msg = str(ei.value)
            assert ei.value.kind is ErrorKind.INVALID_VALUE and name in msg, msg
            assert f"holds {held} elements" in msg, msg
            r = s.launch_unchecked(launch)
            assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_VALUE, r
        assert not dc.host_view().tobytes().strip(b"\0")  # nothing ran
    for dt, npdt, kernel in (("f32", np.float32, f32), ("f16", np.float16, f16)):
        a, b = G.inputs(dt, seed=23)
        c = np.zeros_like(a)
        args = tuple(device.from_dlpack(v) for v in (a, b, c))
        s.launch(KernelLaunch(kernel, LaunchDims(), args))
        s.synchronize()
        G.check(dt, a, b, c)
        assert c.dtype == npdt and np.any(c != 0)
        c[:] = 0  # raw memory binds by size: the same bytes through untyped allocations
        da, db, dc = (device.alloc(v.nbytes) for v in (a, b, c))
        s.copy_from_host(da, a)
        s.copy_from_host(db, b)
        assert s.launch_unchecked(KernelLaunch(kernel, LaunchDims(), (da, db, dc))) is None
        s.copy_to_host(c, dc)
        s.synchronize()
        G.check(dt, a, b, c)


RNG_QNN = np.random.default_rng(23)


def _error_of(call: Any, launch: Any) -> Error | None:
    """The Error a launch method gives: raised (checked) or returned (unchecked); None when it launched."""
    try:
        r = call(launch)
    except Error as e:
        return e
    assert r is None or isinstance(r, Error), r
    return r


def test_freed_allocation(device: Any, module: Any) -> None:
    k = module.kernel("add_f32")
    s = device.create_stream()
    a, b, c = (device.alloc(4 * G.N) for _ in range(3))
    launch = KernelLaunch(k, LaunchDims(), (a, b, c))
    s.launch(launch)  # bound and cached
    b.free()
    for call in (s.launch, s.launch_unchecked):
        r = _error_of(call, launch)
        assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE and "freed" in str(r)
    with pytest.raises(Error) as ei:  # a fresh tuple with the freed allocation
        s.launch(KernelLaunch(k, LaunchDims(), (a, b, c)))
    assert ei.value.kind is ErrorKind.INVALID_HANDLE


def test_a_reused_launch_skips_only_what_it_cannot_change(backend: Any, binary: bytes) -> None:
    """The KernelLaunch a stream checked last is the fast path (its kernel, dims and device are not checked
    again), but what can change between two launches still is: a freed argument, a closed device, another
    stream of another device, and a launch given as a list (which can change its kernel or dims)."""
    dev = backend.open(0)
    k = dev.load_module(binary).kernel("add_f32")
    s = dev.create_stream()
    a, b, c = (dev.alloc(4 * G.N) for _ in range(3))
    launch = KernelLaunch(k, LaunchDims(), (a, b, c))
    s.launch(launch)
    assert s._checked[0] is launch
    as_list = [k, LaunchDims(), (a, b, c)]
    s.launch(as_list)
    as_list[1] = LaunchDims(2)  # the same list, now with dims QNN refuses
    with pytest.raises(Error) as ei:
        s.launch(as_list)
    assert ei.value.kind is ErrorKind.INVALID_VALUE and "no launch geometry" in str(ei.value)
    other = backend.open(0)
    try:
        with pytest.raises(Error) as ei:  # another device's stream checks the launch itself
            other.create_stream().launch(launch)
        assert ei.value.kind is ErrorKind.INVALID_VALUE and "another device" in str(ei.value)
    finally:
        other.close()
    s.launch(launch)
    dev.close()
    for call in (s.launch, s.launch_unchecked):
        r = _error_of(call, launch)
        assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE, r


def test_a_reused_launch_runs_in_c_and_keeps_every_check(backend: Any, binary: bytes) -> None:
    """API mode: a stream's launch and launch_unchecked of the KernelLaunch it ran last run in C (a prepared launcher,
    ia_prepared_launch.h: no Python code, ~1.00x the raw QnnGraph_execute where the Python method ran at 1.04-1.05x),
    and keep what the Python method checks per launch: a kernel another launch rebound is bound again (the right
    result), a freed argument is INVALID_HANDLE, a profiling stream profiles, a failing execute is the library's
    Error (raised; returned unchecked), a closed device INVALID_HANDLE."""
    import sys

    dev = backend.open(0)
    if getattr(dev._pool_fast, "_prepared_launcher", None) is None:
        dev.close()
        pytest.skip("ABI mode: no compiled module, the Python launch")
    k = dev.load_module(binary).kernel("add_f32")
    s, other = dev.create_stream(), dev.create_stream()
    a, b = G.inputs("f32", 3)
    da, db, dc, dd = (dev.alloc(a.nbytes) for _ in range(4))
    s.copy_from_host(da, a)
    s.copy_from_host(db, b)
    launch = KernelLaunch(k, LaunchDims(), (da, db, dc))
    s.launch(launch)
    assert s._prepared is not None and s._prepared[0] is launch
    assert type(type(s).launch).__name__ == "_PreparedLauncher"
    calls: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls.append(frame.f_code.co_qualname)

    sys.setprofile(profile)
    try:
        s.launch(launch)
        r = s.launch_unchecked(launch)
    finally:
        sys.setprofile(None)
    assert calls == [] and r is None, calls
    # another launch of the kernel, on another stream, rebinds it: the prepared launch binds it back
    other.launch(KernelLaunch(k, LaunchDims(), (db, da, dd)))
    dc_host = np.zeros_like(a)
    s.copy_from_host(dc, dc_host)
    s.launch(launch)
    s.copy_to_host(dc_host, dc)
    np.testing.assert_array_equal(dc_host, a + b)
    # a profiling stream profiles its launches (the Python path), and runs in C again once it stops
    s.set_profiling("basic")
    s.launch(launch)
    assert s.last_profile is not None and s.last_profile.execute_us is not None
    s.set_profiling(None)
    assert s._prepared is None
    s.launch(launch)
    assert s._prepared is not None and s._prepared[0] is launch
    # a failing execute: the library's Error, raised by launch, returned by launch_unchecked
    real = k._execute
    k._execute = lambda *args: 6004  # (QNN_GRAPH_ERROR_INVALID_HANDLE's value)
    try:
        with pytest.raises(Error) as ei:
            s.launch(launch)
        assert ei.value.code == 6004 and "QnnGraph_execute" in str(ei.value)
        r = s.launch_unchecked(launch)
        assert isinstance(r, Error) and r.code == 6004, r
    finally:
        k._execute = real
    s.launch(launch)
    dc.free()
    for call in (s.launch, s.launch_unchecked):
        r = _error_of(call, launch)
        assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE and "freed" in str(r), r
    relaunch = KernelLaunch(k, LaunchDims(), (da, db, dd))
    s.launch(relaunch)
    assert s._prepared is not None and s._prepared[0] is relaunch
    dev.close()
    for call in (s.launch, s.launch_unchecked):
        r = _error_of(call, relaunch)
        assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE, r


def test_garbage_binary(device: Any) -> None:
    for junk in (b"garbage" * 100, bytes(49152)):
        with pytest.raises(Error) as ei:
            device.load_module(junk)
        assert ei.value.kind is ErrorKind.INVALID_VALUE
        assert "not a QNN context binary" in str(ei.value)
        assert ei.value.code is not None and ei.value.code & 0xFFFF == 30010
    for bad in (b"", "source text"):
        with pytest.raises(Error) as ei:
            device.load_module(bad)
        assert ei.value.kind is ErrorKind.INVALID_VALUE


def test_unknown_graph_name_lists_the_graphs(module: Any) -> None:
    with pytest.raises(Error) as ei:
        module.kernel("add_f64")
    msg = str(ei.value)
    assert ei.value.kind is ErrorKind.INVALID_VALUE and "'add_f32', 'add_f16', 'add_u8'" in msg, msg


def test_non_default_launch_dims(device: Any, module: Any) -> None:
    k = module.kernel("add_f32")
    a = device.alloc(4 * G.N)
    s = device.create_stream()
    for dims in (LaunchDims(2), LaunchDims(1, 32)):
        with pytest.raises(Error) as ei:
            s.launch(KernelLaunch(k, dims, (a, a, a)))
        assert ei.value.kind is ErrorKind.INVALID_VALUE and "no launch geometry" in str(ei.value)
        r = s.launch_unchecked(KernelLaunch(k, dims, (a, a, a)))  # never silently ignored, unchecked too
        assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_VALUE and "no launch geometry" in str(r)
    # dynamic shared memory: UNSUPPORTED, as on every backend that cannot honour it (kernel_args)
    with pytest.raises(Error) as ei:
        s.launch(KernelLaunch(k, LaunchDims(1, 1, shared_mem=16), (a, a, a)))
    assert ei.value.kind is ErrorKind.UNSUPPORTED and "shared_mem" in str(ei.value)
    s.launch(KernelLaunch(k, LaunchDims(1, 1), (a, a, a)))  # equal to the default: fine


def test_unified_memory_is_unsupported_with_the_reason(device: Any) -> None:
    calls: list[Callable[[], object]] = [lambda: device.alloc(64, MemoryKind.UNIFIED),
                                         lambda: device.alloc_unchecked(64, MemoryKind.UNIFIED)]
    for call in calls:
        try:
            r = call()
        except Error as e:
            r = e
        assert isinstance(r, Error) and r.kind is ErrorKind.UNSUPPORTED
        assert "QnnMem_register" in str(r) and "1000" in str(r) and r.code == 1000


def test_async_execution_falls_back_to_synchronous(device: Any, module: Any, backend: Any) -> None:
    _run(device, module.kernel("add_f32"), "f32", 1)
    assert backend.async_execute is False  # the x86 HTP answered 1000 to QnnGraph_executeAsync


def test_async_probe_is_not_an_error_in_the_log(binary: bytes, caplog: pytest.LogCaptureFixture) -> None:
    """The first launch of a backend tries QnnGraph_executeAsync; the x86 HTP refuses it and logs that at ERROR:
    an answer to a probe, logged at DEBUG with what was probed, never at WARNING or above."""
    import logging

    fresh = qb.QnnBackend()
    dev = fresh.open(0)
    with dev, caplog.at_level(logging.DEBUG, logger="ironaccelerator.qnn"):
        _run(dev, dev.load_module(binary).kernel("add_f32"), "f32", 3)
        assert fresh.async_execute is False
    probe = [r for r in caplog.records if "while probing for QnnGraph_executeAsync" in r.getMessage()]
    assert probe and all(r.levelno == logging.DEBUG for r in probe), [(r.levelname, r.getMessage()) for r in probe]
    loud = [r.getMessage() for r in caplog.records if r.name == "ironaccelerator.qnn" and r.levelno >= logging.WARNING
            and "sync" in r.getMessage().lower()]
    assert not loud, loud


def test_events_use_the_host_clock(device: Any, module: Any) -> None:
    k = module.kernel("add_f32")
    s = device.create_stream()
    a = device.alloc(4 * G.N)
    e0 = s.record_event()
    for _ in range(20):
        s.launch(KernelLaunch(k, LaunchDims(), (a, a, a)))
    e1 = s.record_event()
    assert e0.query() and e1.query() and s.query()
    assert 0 < e0.elapsed_ms(e1) < 10_000


def test_module_lifetime_frees_context_after_kernels(backend: Any, binary: Any) -> None:
    dev = backend.open(0)
    m = dev.load_module(binary)
    k = m.kernel("add_f32")
    owner = weakref.ref(m._owner)
    device_owner = weakref.ref(dev._owner)
    dev.close()
    m.close()
    del m
    gc.collect()
    ctx_owner, dev_owner = owner(), device_owner()
    assert ctx_owner is not None and ctx_owner.alive  # the kernel keeps its context ...
    assert dev_owner is not None and dev_owner.alive  # ... and the context its device
    del ctx_owner, dev_owner
    del k
    gc.collect()
    assert owner() is None and device_owner() is None  # context freed, then the device


# ------------------------------------------------------------------ the spec data is checked by the generator


@pytest.mark.parametrize("old,new,message", [
    ("    v69: [FP16]", "    sm69: [FP16]", "flags key 'sm69' is not an HTP architecture like 'v68'"),
    ("    v69: [FP16]", "    v69: [FP61]", "'FP61' is not a capability flag"),
    ("    default: NPU", "    default: NUP", "'NUP' is not a compute tier"),
    ("  SM8650: {model: 57, arch: v75}", "  SM8650: {model: 43, arch: v75}", "SoC SM8650: model 43 is already SM8550's"),
    ("  SM8650: {model: 57, arch: v75}", "  SM8650: {model: 57, arch: 75}", "arch '75' is not valid: expected an HTP"),
    ("  SM8650: {model: 57, arch: v75}", "  sm8650: {model: 57, arch: v75}", "SoC name 'sm8650' is not like 'SM8350'"),
    ("  SM8650: {model: 57, arch: v75}", "  SM8650: {modle: 57, arch: v75}", "unknown key 'modle'"),
])
def test_generator_refuses_bad_qnn_spec_data(tmp_path: Path, old: str, new: str, message: str) -> None:
    import shutil

    from generator import pipeline
    from generator.diagnostics import UserError
    src = Path(__file__).resolve().parent.parent / "specs"
    specs = tmp_path / "specs"
    shutil.copytree(src, specs)
    p = specs / "qnn" / "backend.yaml"
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new, 1))
    line = next(i for i, s in enumerate(p.read_text().splitlines(), 1) if new.strip() in s)
    with pytest.raises(UserError) as ei:
        pipeline.compile_specs(specs, only=["qnn.system"], base=specs.parent)
    errors = [str(d) for d in ei.value.diagnostics]
    assert any(e.startswith(f"specs/qnn/backend.yaml:{line}:") and message in e for e in errors), errors
