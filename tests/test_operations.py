"""The trait surface declared once (runtime/ironaccelerator_runtime/operations.py): the operations are the public
methods of the trait bases, and what a backend implements is derived from what its classes override.  The
per-backend answers against the live backends are in test_conformance.py (test_supports_*)."""

from __future__ import annotations

import inspect

import pytest

from ironaccelerator import BackendKind, Error, ErrorKind
from ironaccelerator_runtime import operations, traits
from ironaccelerator_runtime.operations import NEEDS, OPERATIONS, TRAITS, implemented, supports


class _Event(traits.Event):
    def synchronize(self) -> None:
        pass


class _Stream(traits.Stream):
    def record_event(self) -> _Event:
        return _Event()

    def _copy_rect(self, dst: object, src: object, region: object, function: str) -> None:
        pass


class _Device(traits.Device):
    def create_stream(self) -> _Stream:
        return _Stream()


class _Backend(traits.Backend):
    kind = BackendKind.OPENCL

    def open(self, device_id: object = 0) -> _Device:
        raise AssertionError("not called: the derivation reads the classes, never makes objects")


def test_operations_are_the_public_methods_of_the_trait_bases() -> None:
    for base, _ in TRAITS:
        public = [n for n, v in vars(base).items() if not n.startswith("_") and (inspect.isfunction(v) or
                                                                                isinstance(v, (property, classmethod)))]
        assert [op.partition(".")[2] for op in OPERATIONS if op.startswith(base.__name__ + ".")] == public
    assert {"Stream.launch", "Device.synchronize", "Kernel.max_active_blocks", "Graph.launch"} <= set(OPERATIONS)


def test_what_a_backend_implements_follows_what_its_classes_override() -> None:
    table = operations.operations_of(_Backend)
    # overridden: implemented; a stub of the base left alone: not
    assert table["Backend.open"] and not table["Backend.devices"]
    assert table["Device.create_stream"] and not table["Device.alloc"] and not table["Device.synchronize"]
    assert table["Event.synchronize"] and not table["Event.elapsed_ms"]
    # generic base methods: implemented where what they build on is (NEEDS)
    assert table["Device.close"] and table["Stream.drain_callbacks"]
    assert table["Stream.copy_2d"] and table["Stream.copy_3d"]  # (_copy_rect overridden)
    assert table["Stream.add_callback"]  # (record_event implemented)
    assert not table["Device.from_dlpack"]  # (_import_memory not overridden)
    assert not table["Device.memory_pool"]  # (no Device.alloc)
    # the operations of a trait whose objects nothing makes: none (no Device.alloc, no Stream.capture)
    assert not table["Allocation.free"] and not table["Allocation.view"]
    assert not table["Graph.launch"] and not table["Graph.close"]
    assert implemented(_Backend) == tuple(op for op in OPERATIONS if table[op])
    assert operations.operations_of(_Backend) is table  # derived once per class


class _Timed(_Event):
    def elapsed_ms(self, end: traits.Event) -> float:
        return 0.0


class _TimedStream(_Stream):
    def record_event(self) -> _Timed:
        return _Timed()


class _TimedDevice(_Device):
    def create_stream(self) -> _TimedStream:
        return _TimedStream()


class _TimedBackend(_Backend):
    def open(self, device_id: object = 0) -> _TimedDevice:
        raise AssertionError


def test_a_backend_class_that_lacks_an_operation_says_so() -> None:
    """The classes are found through the return annotations (Backend.open -> its Device, Device.create_stream ->
    its Stream, Stream.record_event -> its Event): one override deeper is seen."""
    assert not supports(_Backend, "Event.elapsed_ms") and supports(_TimedBackend, "Event.elapsed_ms")


def test_unknown_operation_is_invalid_value_naming_the_operations() -> None:
    with pytest.raises(Error) as ei:
        _Backend().supports("Stream.lunch")
    assert ei.value.kind is ErrorKind.INVALID_VALUE and ei.value.backend == "OPENCL"
    assert "'Stream.lunch' is not an operation" in str(ei.value) and "Stream.launch" in str(ei.value)


def _private_stubs(base: type) -> set[str]:
    """The private methods of a base that raise UNSUPPORTED (what a backend must override)."""
    out = set()
    for name, value in vars(base).items():
        if name.startswith("_") and not name.startswith("__") and inspect.isfunction(value):
            code = value.__code__
            if "unsupported" in code.co_names or "UNSUPPORTED" in code.co_names:
                out.add(name)
    return out


def test_every_generic_operation_over_a_hook_is_in_needs() -> None:
    """A base method that works for every backend by calling a private hook the base leaves UNSUPPORTED (free ->
    _release, copy_2d -> _strided -> _copy_rect) is implemented only where the hook is overridden: NEEDS says
    which; a new such method missing there would be reported as implemented everywhere."""
    for base, _ in TRAITS:
        stubs = _private_stubs(base)
        for op in OPERATIONS:
            trait, _, name = op.partition(".")
            if trait != base.__name__:
                continue
            fn = operations._function(inspect.getattr_static(base, name))
            if fn is None or operations._stub(inspect.getattr_static(base, name)):
                continue
            if set(fn.__code__.co_names) & stubs:
                assert op in NEEDS, f"{op} calls {sorted(set(fn.__code__.co_names) & stubs)}: add it to NEEDS"
    for op, need in NEEDS.items():
        trait, _, name = need.partition(".")
        assert op in OPERATIONS and hasattr(getattr(traits, trait), name), (op, need)


def test_gpu_backends_subtract_what_their_vendor_spec_leaves_out() -> None:
    """CUDA and HIP share their classes (backends/gpu/): what one vendor's spec leaves out (a null function role,
    an interop protocol it does not list) raises UNSUPPORTED there, and supports() says so."""
    import dataclasses

    from ironaccelerator.backends.cuda._backend import TABLES, CudaBackend
    from ironaccelerator.backends.hip._backend import HipBackend

    assert supports(CudaBackend, "Device.from_cuda_array_interface")  # interop: [dlpack, cuda_array_interface]
    assert not supports(HipBackend, "Device.from_cuda_array_interface")  # interop: [dlpack]
    assert supports(CudaBackend, "Stream.capture") and supports(HipBackend, "Graph.launch")
    assert supports(CudaBackend, "Stream.prefetch") and supports(HipBackend, "Stream.prefetch")  # (one of two roles)

    class NoIpc(CudaBackend):
        tables = dataclasses.replace(TABLES, functions={**TABLES.functions, "ipc_get": None, "ipc_open": None,
                                                        "memcpy_3d": None})

    lacking = {op for op in OPERATIONS if not supports(NoIpc, op)} - \
        {op for op in OPERATIONS if not supports(CudaBackend, op)}  # (what CUDA itself lacks: Module.save)
    assert lacking == {"Device.import_ipc", "Allocation.export_ipc", "Stream.copy_3d"}, lacking
