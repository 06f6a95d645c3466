"""The vendor-neutral core surface (runtime/ironaccelerator_runtime: the traits package, errors.py) on its own:
errors that survive pickling, checked values (sizes, launch dimensions, scalars, host buffers), the
device lifetime every backend shares, and the in-flight host-buffer bookkeeping of streams."""

from __future__ import annotations

import ast
import concurrent.futures
import copy
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ironaccelerator as ia
from ironaccelerator import DType, Error, ErrorKind, LaunchDims, MemoryPool, Scalar
from conftest import ROOT
from ironaccelerator_runtime.traits import DeviceLimits, InFlight, check_size, host_view


def _raise_in_worker(n: int) -> None:
    e = Error(ErrorKind.OUT_OF_MEMORY, f"no room for {n} bytes", code=-4, function="clCreateBuffer", backend="OPENCL")
    e.add_note("while testing")
    raise e


def _same(a: Error, b: Error) -> None:
    assert type(b) is Error
    assert (b.kind, str(b), b.code, b.function, b.backend) == (a.kind, str(a), a.code, a.function, a.backend)


def test_error_pickles_and_copies_with_every_field() -> None:
    e = Error(ErrorKind.COMPILE_FAILED, "build log:\nline 1: oops", code=-11, function="clBuildProgram",
              backend="OPENCL")
    e.kind = ErrorKind.COMPILE_FAILED  # set after construction, as backends do
    e.add_note("a note")
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(e, protocol=proto))
        _same(e, back)
        assert back.__notes__ == ["a note"]
    _same(e, copy.copy(e))
    _same(e, copy.deepcopy(e))
    plain = Error(ErrorKind.UNSUPPORTED, "no")
    _same(plain, pickle.loads(pickle.dumps(plain)))


def test_error_raised_in_a_process_pool_worker_reaches_the_parent() -> None:
    with concurrent.futures.ProcessPoolExecutor(max_workers=1) as pool:
        fut = pool.submit(_raise_in_worker, 7)
        with pytest.raises(Error) as info:
            fut.result(timeout=60)
    assert info.value.kind is ErrorKind.OUT_OF_MEMORY
    assert (info.value.code, info.value.function, info.value.backend) == (-4, "clCreateBuffer", "OPENCL")
    assert "7 bytes" in str(info.value)


@pytest.mark.parametrize("bad", [True, 1.5, "8", b"8", None, [8], 8.0])
def test_check_size_refuses_non_integers(bad: Any) -> None:
    with pytest.raises(TypeError, match="nbytes"):
        check_size(bad, "nbytes", "Device.alloc")


def test_check_size_ranges_and_numpy_integers() -> None:
    assert check_size(np.int64(5), "n", "f") == 5 and type(check_size(np.uint8(5), "n", "f")) is int
    for bad in (0, -1, np.int64(-5), 2**64):
        with pytest.raises(Error) as info:
            check_size(bad, "nbytes", "Device.alloc", "OPENCL")
        assert info.value.kind is ErrorKind.INVALID_VALUE and info.value.function == "Device.alloc"
        assert info.value.backend == "OPENCL"
    assert check_size(0, "n", "f", minimum=0) == 0


@pytest.mark.parametrize("kw", [dict(grid=b"x"), dict(grid="ab"), dict(block=bytearray(b"\x01")), dict(grid=1.5),
                                dict(grid=(1, 2, 3, 4)), dict(grid=()), dict(grid=(True,)), dict(grid=None),
                                dict(shared_mem="12"), dict(shared_mem=1.0), dict(shared_mem=None)])
def test_launch_dims_refuses_what_is_not_dimensions(kw: dict[str, Any]) -> None:
    with pytest.raises(Error) as info:
        LaunchDims(**kw)
    assert info.value.kind is ErrorKind.INVALID_VALUE and info.value.function == "LaunchDims"


def test_launch_dims_accepts_numpy_integers_as_ints() -> None:
    d = LaunchDims(grid=np.int64(4), block=(np.int32(2), 3), shared_mem=np.uint16(16))
    assert d.grid == (4, 1, 1) and d.block == (2, 3, 1) and d.shared_mem == 16
    assert all(type(x) is int for x in d.grid + d.block) and type(d.shared_mem) is int


def test_launch_dims_options_cooperative_and_cluster() -> None:
    """Issue 14 item 5: launch options are keyword-only, checked when made (a cluster must divide the grid in every
    dimension), and take part in equality, hashing, pickling and the repr; dims without them are as before."""
    plain = LaunchDims(8, 32)
    assert not plain.has_options and plain.cooperative is False and plain.cluster is None
    assert repr(plain) == "LaunchDims(grid=(8, 1, 1), block=(32, 1, 1), shared_mem=0)"
    coop = LaunchDims(8, 32, cooperative=True)
    clus = LaunchDims((8, 4), 32, cluster=(2, 2))
    both = LaunchDims((8, 4), 32, 64, cooperative=True, cluster=np.int64(4))
    assert coop.has_options and clus.has_options and both.has_options
    assert clus.cluster == (2, 2, 1) and both.cluster == (4, 1, 1) and type(both.cluster[0]) is int
    assert repr(both) == "LaunchDims(grid=(8, 4, 1), block=(32, 1, 1), shared_mem=64, cooperative=True, cluster=(4, 1, 1))"
    assert coop != plain and hash(coop) != hash(plain) and LaunchDims(8, 32, cooperative=True) == coop
    assert len({plain, coop, LaunchDims(8, 32, cooperative=True), clus}) == 3
    for d in (plain, coop, clus, both):
        for proto in range(pickle.HIGHEST_PROTOCOL + 1):
            back = pickle.loads(pickle.dumps(d, protocol=proto))
            assert back == d and hash(back) == hash(d) and repr(back) == repr(d)
        assert copy.deepcopy(d) == d
    with pytest.raises(TypeError):
        LaunchDims(8, 32, 0, True)  # type: ignore[call-arg]  # (keyword-only)
    for kw in (dict(grid=6, cluster=4), dict(grid=(8, 3), cluster=(2, 2)), dict(grid=8, cluster=0),
               dict(grid=8, cluster=(1, 1, 1, 1)), dict(grid=8, cluster="2"), dict(grid=8, cluster=1.0),
               dict(grid=8, cooperative=1), dict(grid=8, cooperative="yes")):
        with pytest.raises(Error) as info:
            LaunchDims(**kw)
        assert info.value.kind is ErrorKind.INVALID_VALUE and info.value.function == "LaunchDims", kw
    e = both.options_error(ia.BackendKind.OPENCL, "Stream.launch")
    assert e.kind is ErrorKind.UNSUPPORTED and e.backend == "OPENCL"
    assert "cooperative launch and thread-block clusters" in str(e) and "OPENCL backend" in str(e)


def test_launch_dims_validate_total_work_and_size_t() -> None:
    limits = DeviceLimits(max_grid=(2**63, 2**63, 2**63), max_block=(2**40, 1, 1), max_threads_per_block=2**40,
                          max_work_items=2**32 - 1)
    LaunchDims(grid=(2**16, 2**16 - 1, 1)).validate(limits)
    for d in (LaunchDims(grid=(2**16, 2**16, 1)), LaunchDims(grid=(2**31 - 1, 1, 1), block=4096)):
        with pytest.raises(Error, match="threads") as info:
            d.validate(limits, ia.BackendKind.OPENCL, "Stream.launch")
        assert info.value.function == "Stream.launch" and info.value.backend == "OPENCL"
    wide = DeviceLimits(max_grid=(2**63,) * 3, max_block=(2**40, 1, 1), max_threads_per_block=2**40,
                        max_work_items=2**200)
    with pytest.raises(Error, match="overflows size_t"):
        LaunchDims(grid=2**40, block=2**30).validate(wide)


@pytest.mark.parametrize("value,dtype", [("1", DType.I32), (float("nan"), DType.I32), (2**31, DType.I32),
                                         (-1, DType.U8), (256, DType.U8), (1.5, DType.I64), (2**64, DType.U64),
                                         ("x", DType.F32), (1e39, DType.F32), (1e5, DType.F16), (1j, DType.F64),
                                         (2, DType.BOOL), (b"1", DType.C64), (None, DType.F32)])
def test_scalar_refuses_values_its_dtype_cannot_hold(value: Any, dtype: DType) -> None:
    with pytest.raises(Error) as info:
        Scalar(value, dtype)
    assert info.value.kind is ErrorKind.INVALID_VALUE and info.value.function == "Scalar"


@pytest.mark.parametrize("dtype", [None, "f32", 3, np.float32])
def test_scalar_dtype_must_be_a_dtype(dtype: Any) -> None:
    with pytest.raises(TypeError, match="dtype"):
        Scalar(1, dtype)


def test_scalar_accepts_what_fits() -> None:
    cases: list[tuple[Any, DType]] = [(2**31 - 1, DType.I32), (-(2**63), DType.I64), (2**64 - 1, DType.U64), (np.int8(-3), DType.I8),
                         (65504.0, DType.F16), (float("inf"), DType.F32), (float("nan"), DType.F64), (True, DType.BOOL),
                         (1, DType.BOOL), (1 + 2j, DType.C128), (3, DType.F32), (np.float64(2.5), DType.F32)]
    for value, dtype in cases:
        assert Scalar(value, dtype).value is value


def test_size_class_refuses_bad_sizes() -> None:
    assert MemoryPool.size_class(1) == 256 and MemoryPool.size_class(257) == 512
    with pytest.raises(Error):
        MemoryPool.size_class(-1)
    with pytest.raises(TypeError):
        MemoryPool.size_class(1.5)  # type: ignore[arg-type]


def test_host_view_refuses_object_buffers_and_names_the_operation() -> None:
    with pytest.raises(Error, match="Python objects") as info:
        host_view(np.empty(4, dtype=object), backend="OPENCL", function="Stream.copy_to_host")
    assert (info.value.backend, info.value.function) == ("OPENCL", "Stream.copy_to_host")
    with pytest.raises(Error) as info:
        host_view(object(), backend=ia.BackendKind.CUDA, function="Stream.copy_from_host")
    assert info.value.backend == "CUDA" and info.value.kind is ErrorKind.INVALID_VALUE
    with pytest.raises(Error, match="read-only"):
        host_view(b"abc", writable=True)
    for scalar in (np.int64(-5), np.array(7, np.int32)):  # a value, not a buffer
        with pytest.raises(Error, match="not a host buffer") as info:
            host_view(scalar, backend="CUDA", function="Stream.copy_from_host")
        assert info.value.backend == "CUDA"
    assert host_view(np.arange(4, dtype=np.int32)).nbytes == 16


def test_in_flight_releases_exactly_the_prefix_before_a_mark() -> None:
    f = InFlight()
    marks = []
    for i in range(10):
        f.items.append(i)
        marks.append(f.mark())
    f.release(marks[3])  # buffers 0..3 were enqueued before the 4th mark
    assert f.items == list(range(4, 10)) and f.base == 4
    f.release(marks[1])  # an older event completing later releases nothing more
    assert len(f) == 6
    f.items.append(10)
    f.release(f.mark())
    assert len(f) == 0 and f.mark() == 11


class _FakeDevice(ia.Device):
    """A Device of the base class alone: what close() does that is not backend-specific."""

    def __init__(self) -> None:
        self.descriptor = ia.DeviceDescriptor(
            id=ia.DeviceId(ia.BackendKind.OPENCL, 3), name="fake", vendor=ia.Vendor.OTHER,
            backend=ia.BackendKind.OPENCL, total_memory=0, compute_units=1,
            capability=ia.Capability(ia.CapabilityFlags.NONE, ia.ComputeTier.CPU, ""))
        self.calls: list[str] = []

    def synchronize(self) -> None:
        self.calls.append("synchronize")

    def _close(self) -> None:
        self.calls.append("_close")


def test_device_close_is_once_and_in_order() -> None:
    d = _FakeDevice()
    assert "fake" in repr(d) and "closed" not in repr(d)
    with d:
        pass
    d.close()
    assert d.calls == ["synchronize", "_close"] and d.closed and repr(d).endswith("closed>")
    with pytest.raises(Error) as info:
        d._check_open("Device.alloc")
    assert info.value.kind is ErrorKind.INVALID_HANDLE and "closed" in str(info.value)
    with pytest.raises(Error) as info:
        d.memory_pool().alloc(16)
    assert info.value.kind is ErrorKind.INVALID_HANDLE


def test_awaiting_an_event_does_not_block_the_event_loop() -> None:
    """Event.__await__ waits in the loop's executor: other tasks run meanwhile, and a failure raises at the await."""
    import asyncio
    import time as _time

    from ironaccelerator import Event

    class Slow(Event):
        def synchronize(self) -> None:
            _time.sleep(0.3)

    class Failing(Event):
        def synchronize(self) -> None:
            raise Error(ErrorKind.LAUNCH_FAILED, "the work failed")

    async def main() -> int:
        ticks, done = 0, False

        async def ticker() -> None:
            nonlocal ticks
            while not done:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        await Slow()  # 0.3 s: a wait that blocked the loop would leave the ticker at 0
        during = ticks
        done = True
        await task
        with pytest.raises(Error) as ei:
            await Failing()
        assert ei.value.kind is ErrorKind.LAUNCH_FAILED
        return during

    assert asyncio.run(main()) >= 5


def test_inflight_releases_from_several_threads_never_drop_work_still_queued() -> None:
    """Releases come from more than the stream's thread (``await event`` runs Event.synchronize in an executor,
    host callbacks wait on events on the stream's callback thread).  Dropping a buffer can run Python code (a
    finalizer: a mapped view's unmap, a cffi buffer's release), where another thread may take the GIL: two releases
    racing there both dropped their prefix (11 of 100 trials before the fix), freeing host buffers a queued copy
    still reads."""
    import sys
    import threading

    class Buffer:
        __slots__ = ("i",)

        def __init__(self, i: int) -> None:
            self.i = i

        def __del__(self) -> None:
            for _ in range(3):  # Python code in a finalizer (a backward jump: the GIL may switch here)
                pass

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(100):
            f = InFlight()
            f.items.extend(Buffer(i) for i in range(2000))
            marks = list(range(1, 2001))

            def release(ms: list[int]) -> None:
                for m in ms:
                    f.release(m)

            threads = [threading.Thread(target=release, args=(marks[k::3],)) for k in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            # every buffer released exactly once: none dropped twice over (base past the end) or left
            assert f.base == 2000 and not f.items, (f.base, len(f.items))
            f.items.append(Buffer(2000))
            assert f.mark() == 2001
    finally:
        sys.setswitchinterval(old)


def test_a_failed_wait_before_a_callback_is_the_streams_not_the_callbacks() -> None:
    """Stream.add_callback: when the work before ``fn`` failed (the event's wait raises), ``fn`` still runs once,
    nothing is filed under it in callback_errors, and the stream's synchronize raises the failure (once)."""
    from ironaccelerator import Event, Stream

    class Failed(Event):
        def synchronize(self) -> None:
            raise Error(ErrorKind.LAUNCH_FAILED, "the kernel before the callback faulted")

    class FakeStream(Stream):
        device: Any = type("D", (), {"kind": ia.BackendKind.OPENCL})()

        def record_event(self) -> Event:
            return Failed()

        def synchronize(self) -> None:
            self._check_callback_waits("Stream.synchronize")

    s = FakeStream()
    ran: list[int] = []
    s.add_callback(lambda: ran.append(1))
    assert s.drain_callbacks(timeout=30)
    assert ran == [1] and s.callback_errors == []
    with pytest.raises(Error) as ei:
        s.synchronize()
    assert ei.value.kind is ErrorKind.LAUNCH_FAILED and "faulted" in str(ei.value)
    s.synchronize()  # reported once


# The layering of the runtime's core modules (issue 26 item 1): the traits package, one module per concept, each
# importing at module level only the modules before it; dlpack and the integer test below traits, the inventory
# (the `python -m ironaccelerator` command) above it, and no import back up.
_TRAIT_ORDER = ["values", "checks", "launch", "module", "event", "callbacks", "memory", "device", "stream", "pool",
                "backend", "report", "registry"]
RUNTIME_PACKAGE = ROOT / "runtime" / "ironaccelerator_runtime"


def _imports(path: Path, *, module_level: bool) -> set[str]:
    """The ironaccelerator_runtime modules ``path`` imports (dotted, relative to the runtime package): at module
    level only (``if TYPE_CHECKING:`` blocks left out), or anywhere, function bodies included."""
    package = list(path.relative_to(RUNTIME_PACKAGE).parts[:-1])
    tree = ast.parse(path.read_text())
    nodes = tree.body if module_level else list(ast.walk(tree))
    out: set[str] = set()
    for n in nodes:
        if isinstance(n, ast.ImportFrom) and n.level:
            base = package[:len(package) - (n.level - 1)]
            target = [*base, *(n.module.split(".") if n.module else [])]
            out.update(".".join([*target, a.name]) if not n.module else ".".join(target) for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("ironaccelerator_runtime."):
            out.add(n.module.removeprefix("ironaccelerator_runtime."))
    return out


def test_traits_is_a_package_of_concept_modules_each_importing_only_those_below_it() -> None:
    traits = RUNTIME_PACKAGE / "traits"
    modules = sorted(p.stem for p in traits.glob("*.py") if p.stem != "__init__")
    assert modules == sorted(_TRAIT_ORDER), "a new module of traits/ takes its place in _TRAIT_ORDER"
    for i, name in enumerate(_TRAIT_ORDER):
        path = traits / f"{name}.py"
        assert len(path.read_text().splitlines()) < 800, f"traits/{name}.py is over 800 lines: split the concept"
        below = {f"traits.{m}" for m in _TRAIT_ORDER[:i]} | {"errors", "integers", "records"}
        assert _imports(path, module_level=True) <= below, (name, _imports(path, module_level=True) - below)


def test_dlpack_and_inventory_import_traits_one_way() -> None:
    """traits -> dlpack (a view of an allocation) and inventory -> traits (the command prints the registry's
    report), never back: neither dlpack nor the integer test imports traits, and nothing in traits imports the
    inventory."""
    for below in ("dlpack.py", "integers.py"):
        assert not {m for m in _imports(RUNTIME_PACKAGE / below, module_level=False) if m.startswith("traits")}, below
    for path in (RUNTIME_PACKAGE / "traits").glob("*.py"):
        assert "inventory" not in _imports(path, module_level=False), path.name
    assert "traits.registry" in _imports(RUNTIME_PACKAGE / "inventory.py", module_level=True)


def test_every_annotation_of_the_trait_modules_resolves() -> None:
    """Each module of traits/ resolves the names its annotations use at run time (the package binds the names a
    module imports only for type checking): autodoc and the operations derivation evaluate them, and a subclass's
    ``typing.get_type_hints`` reads its bases' annotations too (the gpu package's test found Backend's)."""
    import importlib
    import inspect
    import pkgutil
    import typing

    from ironaccelerator_runtime import traits

    checked = 0
    for info in pkgutil.iter_modules(traits.__path__):
        mod = importlib.import_module(f"{traits.__name__}.{info.name}")
        for obj in list(vars(mod).values()):
            if getattr(obj, "__module__", None) != mod.__name__:
                continue
            members = [obj] if inspect.isfunction(obj) else []
            if isinstance(obj, type):
                typing.get_type_hints(obj)
                for value in vars(obj).values():
                    fn = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
                    if inspect.isfunction(fn):
                        members.append(inspect.unwrap(fn))
            for fn in members:
                typing.get_type_hints(fn)
                checked += 1
    assert checked > 200, checked
