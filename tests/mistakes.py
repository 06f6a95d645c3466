"""The table of mistakes docs/guide/concepts.md documents ("The same mistake on every backend"), as calls: each
function below makes the mistake on one device and returns ``(operation, call)`` pairs.  tests/test_conformance.py
runs them over every backend with a device, tests/consistency_stub_child.py over CUDA's stub driver, and each
asserts the one outcome the table gives (an ``Error`` raised, or returned by an ``_unchecked`` call, of one
``ErrorKind``; a ``TypeError``; or success).  No pytest here: the stub child imports it too."""

from __future__ import annotations

import re
from functools import partial
from typing import Any, Callable

import numpy as np

from ironaccelerator import Allocation, BackendKind, Device, DeviceId, Error, ErrorKind, KernelLaunch, Stream

Call = Callable[[], object]

# backends whose streams capture graphs (Stream.capture); every other backend's capture is UNSUPPORTED
GRAPHS = frozenset({BackendKind.CUDA, BackendKind.ROCM, BackendKind.VULKAN})

# backends whose driver takes what another device of the process made (cuStreamWaitEvent and hipStreamWaitEvent take
# an event of any context; device pointers and kernels are process-wide, unified addressing): a stream waits for
# another device's event, copies its memory, launches with it; every other backend refuses them with INVALID_VALUE
CROSS_DEVICE = frozenset({BackendKind.CUDA, BackendKind.ROCM})


def outcome(call: Call) -> object:
    """What ``call()`` gives: its result, or the Error it raised (any other exception propagates)."""
    try:
        return call()
    except Error as e:
        return e


def operation(what: str) -> str:
    """The public operation a mistake's ``what`` names: ``"Stream.launch"`` of ``"Stream.launch(dims=16)"``."""
    m = re.match(r"[A-Za-z_][\w.]*", what)
    assert m is not None, what
    return m.group()


def check_error(got: object, kind: ErrorKind, device: Device | Any, what: str) -> Error:
    """``got`` is an Error of ``kind`` naming ``device``'s backend (``device``: or the Backend) and, as
    ``function``, the public operation that ``what`` names (:func:`operation`: the rule of docs/guide/concepts.md
    for an error raised before any vendor call), its message starting with that operation (AssertionError naming
    ``what`` otherwise)."""
    assert isinstance(got, Error), (what, got)
    assert got.kind is kind and got.backend == device.kind.name, (what, got)
    assert got.function == operation(what) and str(got).startswith(got.function), (what, got)
    return got


def after_close(device: Device, launch: KernelLaunch | None) -> tuple[list[tuple[str, Call]], list[tuple[str, Call]]]:
    """Closes ``device``, having made a stream, an event, an allocation, a pool block and (``launch``: a launch of
    one of its kernels) a module.  Returns ``(refused, allowed)``: the operations that must raise (``_unchecked``:
    return) INVALID_HANDLE now, and the ones still allowed (frees, a second close), which must return None."""
    stream = device.create_stream()
    event = stream.record_event()
    event.synchronize()
    a = device.alloc(64)
    pool = device.memory_pool()
    block = pool.alloc(64, stream)
    unordered = pool.alloc(64)
    host = np.zeros(64, np.uint8)
    device.close()
    refused: list[tuple[str, Call]] = [
        ("Allocation.host_view", a.host_view),
        ("Device.memory_pool", device.memory_pool),
        ("Device.alloc", lambda: device.alloc(64)),
        ("Device.alloc_unchecked", lambda: device.alloc_unchecked(64)),
        ("Device.create_stream", device.create_stream),
        ("Device.synchronize", device.synchronize),
        ("MemoryPool.alloc", lambda: pool.alloc(64)),
        ("MemoryPool.alloc_unchecked", lambda: pool.alloc_unchecked(64)),
        ("Stream.synchronize", stream.synchronize),
        ("Stream.query", stream.query),
        ("Stream.record_event", stream.record_event),
        ("Stream.wait_event", lambda: stream.wait_event(event)),
        ("Stream.copy_from_host", lambda: stream.copy_from_host(a, host)),
        ("Stream.copy_to_host", lambda: stream.copy_to_host(host, a)),
        ("Stream.copy", lambda: stream.copy(a, a, 8, dst_offset=8)),
        ("Stream.fill", lambda: stream.fill(a, 0)),
        ("Stream.add_callback", lambda: stream.add_callback(lambda: None)),
        ("Event.synchronize", event.synchronize),
        ("Event.query", event.query),
        ("Event.elapsed_ms", lambda: event.elapsed_ms(event)),
    ]
    if launch is not None:
        kernel: Any = launch.kernel
        refused += [("Stream.launch", lambda: stream.launch(launch)),
                    ("Stream.launch_unchecked", lambda: stream.launch_unchecked(launch)),
                    ("Module.kernel", lambda: kernel.module.kernel(kernel.name))]
        if device.backend.supports("Kernel.max_active_blocks"):
            refused.append(("Kernel.max_active_blocks", lambda: kernel.max_active_blocks(64)))
    if device.backend.supports("Stream.capture"):  # (refused on entering the block)
        refused.append(("Stream.capture", lambda: stream.capture().__enter__()))
    allowed: list[tuple[str, Call]] = [("Allocation.free", a.free), ("Allocation.free (a pool block)", block.free),
                                       ("Allocation.free (a block of no stream)", unordered.free),
                                       ("Device.close", device.close)]
    return refused, allowed


def bad_device_ids(backend: Any) -> list[tuple[str, Call]]:
    """``Backend.open`` given what is not a device index of it (a negative int, a str, a float, a bool, another
    backend's DeviceId): INVALID_VALUE on every backend, one without devices (HIP here) included."""
    other = next(k for k in BackendKind if k is not backend.kind)
    bads: tuple[Any, ...] = (-1, "0", 0.5, True, DeviceId(other, 0))
    return [(f"Backend.open({bad!r})", partial(backend.open, bad)) for bad in bads]


def _with_buffer(launch: KernelLaunch, buffer: Any) -> KernelLaunch:
    """``launch`` with ``buffer`` in place of its first Allocation argument."""
    args = list(launch.args)
    i = next(i for i, x in enumerate(args) if isinstance(x, Allocation))
    args[i] = buffer
    return KernelLaunch(launch.kernel, launch.dims, args)


def another_device(stream: Stream, launch: KernelLaunch, theirs: Stream,
                   their_launch: KernelLaunch) -> tuple[list[tuple[str, Call]], list[tuple[str, Call]]]:
    """What another open Device (``theirs``: a stream of it, ``their_launch``: a launch of one of its kernels, of
    the same shape as ``launch``) made, given to ``stream``'s device.  Returns ``(refused, crossed)``: the calls
    that raise (``_unchecked``: return) INVALID_VALUE on every backend (an event of another device in
    ``elapsed_ms``: two clocks; a pool's stream, checked or not), and those that do so except on
    :data:`CROSS_DEVICE`, whose drivers take another device's events, memory and kernels (one address space; there
    they return None)."""
    device, other = stream.device, theirs.device
    mine = next(x for x in launch.args if isinstance(x, Allocation))
    their_buffer = other.alloc(mine.nbytes)
    their_block = other.memory_pool().alloc(mine.nbytes)
    host = np.zeros(mine.nbytes, np.uint8)
    my_event, their_event = stream.record_event(), theirs.record_event()
    my_event.synchronize()
    their_event.synchronize()
    refused: list[tuple[str, Call]] = [
        ("Event.elapsed_ms(end of another device)", lambda: my_event.elapsed_ms(their_event)),
        ("Event.elapsed_ms(start of another device)", lambda: their_event.elapsed_ms(my_event)),
        ("MemoryPool.alloc(stream of another device)", lambda: device.memory_pool().alloc(64, theirs)),
        ("MemoryPool.alloc_unchecked(stream of another device)",
         lambda: device.memory_pool().alloc_unchecked(64, theirs)),
    ]
    crossed: list[tuple[str, Call]] = [
        ("Stream.wait_event", lambda: stream.wait_event(their_event)),
        ("Stream.copy(dst of another device)", lambda: stream.copy(their_buffer, mine)),
        ("Stream.copy(src: a pool block of another device)", lambda: stream.copy(mine, their_block)),
        ("Stream.copy_from_host", lambda: stream.copy_from_host(their_buffer, host)),
        ("Stream.copy_to_host", lambda: stream.copy_to_host(host, their_block)),
        ("Stream.fill", lambda: stream.fill(their_buffer, 0)),
        ("Stream.launch(an argument of another device)", lambda: stream.launch(_with_buffer(launch, their_buffer))),
        ("Stream.launch_unchecked(an argument of another device)",
         lambda: stream.launch_unchecked(_with_buffer(launch, their_buffer))),
        ("Stream.launch(a kernel of another device)",
         lambda: stream.launch(KernelLaunch(their_launch.kernel, launch.dims, launch.args))),
        ("Stream.launch_unchecked(a kernel of another device)",
         lambda: stream.launch_unchecked(KernelLaunch(their_launch.kernel, launch.dims, launch.args))),
    ]
    return refused, crossed


def of_a_closed_device(stream: Stream, launch: KernelLaunch, theirs: Stream,
                       their_launch: KernelLaunch) -> tuple[list[tuple[str, Call]], list[tuple[str, Call]]]:
    """Closes ``theirs``'s device (another open Device) having made an allocation, a pool block and an event there,
    and returns ``(refused, launched)``: what it made, given to ``stream`` (of a live device), must raise
    (``_unchecked``: return) INVALID_HANDLE, "was closed", on every backend, before whose it is is asked;
    ``launched`` (its kernel, or its allocation as an argument, launched on ``stream``) likewise except on
    :data:`CROSS_DEVICE`, whose compiled launch does not ask (the module or allocation keeps its context alive:
    the launch runs, and returns None)."""
    other = theirs.device
    mine = next(x for x in launch.args if isinstance(x, Allocation))
    their_buffer = other.alloc(mine.nbytes)
    their_block = other.memory_pool().alloc(mine.nbytes)
    their_event = theirs.record_event()
    their_event.synchronize()
    my_event = stream.record_event()
    host = np.zeros(mine.nbytes, np.uint8)
    other.close()
    refused: list[tuple[str, Call]] = [
        ("Stream.wait_event", lambda: stream.wait_event(their_event)),
        ("Event.elapsed_ms(end of a closed device)", lambda: my_event.elapsed_ms(their_event)),
        ("Event.elapsed_ms(start of a closed device)", lambda: their_event.elapsed_ms(my_event)),
        ("Stream.copy(dst of a closed device)", lambda: stream.copy(their_buffer, mine)),
        ("Stream.copy(src: a pool block of a closed device)", lambda: stream.copy(mine, their_block)),
        ("Stream.copy_from_host", lambda: stream.copy_from_host(their_buffer, host)),
        ("Stream.copy_to_host", lambda: stream.copy_to_host(host, their_block)),
        ("Stream.fill", lambda: stream.fill(their_buffer, 0)),
    ]
    launched: list[tuple[str, Call]] = [
        ("Stream.launch(an argument of a closed device)", lambda: stream.launch(_with_buffer(launch, their_buffer))),
        ("Stream.launch_unchecked(an argument of a closed device)",
         lambda: stream.launch_unchecked(_with_buffer(launch, their_buffer))),
        ("Stream.launch(a kernel of a closed device)",
         lambda: stream.launch(KernelLaunch(their_launch.kernel, launch.dims, launch.args))),
        ("Stream.launch_unchecked(a kernel of a closed device)",
         lambda: stream.launch_unchecked(KernelLaunch(their_launch.kernel, launch.dims, launch.args))),
    ]
    return refused, launched


def not_allocations(stream: Stream, a: Any) -> list[tuple[str, Call]]:
    """Copies and fills given something that is not an Allocation where they take one (``a``: a live allocation
    of 64 bytes of the stream's device): each raises TypeError (a parameter of the wrong Python type)."""
    host = np.zeros(64, np.uint8)
    calls: list[tuple[str, Call]] = []
    for bad in (64, b"x" * 64, np.zeros(64, np.uint8), None):
        calls += _wrong_types(stream, a, host, bad)
    return calls


def _wrong_types(stream: Stream, a: Any, host: Any, bad: Any) -> list[tuple[str, Call]]:
    name = type(bad).__name__
    return [(f"Stream.copy(dst={name})", lambda: stream.copy(bad, a)),
            (f"Stream.copy(src={name})", lambda: stream.copy(a, bad)),
            (f"Stream.copy_from_host(dst={name})", lambda: stream.copy_from_host(bad, host)),
            (f"Stream.copy_to_host(src={name})", lambda: stream.copy_to_host(host, bad)),
            (f"Stream.fill(dst={name})", lambda: stream.fill(bad, 0))]


# dims that are not a LaunchDims: refused with INVALID_VALUE (a tuple does not say which is the grid and which the
# block), raised by launch and returned by launch_unchecked
NOT_DIMS: tuple[Any, ...] = ((1, 16), 16, None, [1, 1, 1], "1")


def bad_dims(stream: Stream, launch: KernelLaunch) -> list[tuple[str, Call]]:
    """``launch`` (a good one) with each of :data:`NOT_DIMS` as its dims, checked and unchecked."""
    calls: list[tuple[str, Call]] = []
    for d in NOT_DIMS:
        calls += _launches(stream, KernelLaunch(launch.kernel, d, launch.args), f"dims={d!r}")
    return calls


def _launches(stream: Stream, launch: KernelLaunch, what: str) -> list[tuple[str, Call]]:
    return [(f"Stream.launch({what})", lambda: stream.launch(launch)),
            (f"Stream.launch_unchecked({what})", lambda: stream.launch_unchecked(launch))]


def too_big(device: Device) -> list[tuple[str, Call]]:
    """Allocations one byte past ``DeviceLimits.max_alloc`` (DEVICE memory): INVALID_VALUE, raised or returned."""
    n = device.descriptor.limits.max_alloc
    assert n is not None, device
    pool = device.memory_pool()
    return [("Device.alloc", lambda: device.alloc(n + 1)),
            ("Device.alloc_unchecked", lambda: device.alloc_unchecked(n + 1)),
            ("MemoryPool.alloc", lambda: pool.alloc(n + 1)),
            ("MemoryPool.alloc_unchecked", lambda: pool.alloc_unchecked(n + 1))]


# backends whose driver answers an unknown kernel name with a code of its own (CUDA_ERROR_NOT_FOUND,
# hipErrorNotFound, CL_INVALID_KERNEL_NAME), which the refusal keeps as Error.code; elsewhere the runtime refuses
# the name itself (Error.code None)
KERNEL_NAME_CODES = frozenset({BackendKind.CUDA, BackendKind.ROCM, BackendKind.OPENCL})


def unknown_kernel(module: Any) -> list[tuple[str, Call]]:
    """``module.kernel`` of a name that ``module`` lacks: INVALID_VALUE named ``Module.kernel`` (the operation
    called) on every backend, the driver's code kept where it answered (:data:`KERNEL_NAME_CODES`)."""
    return [("Module.kernel('no_such_kernel')", lambda: module.kernel("no_such_kernel"))]


def check_unknown_kernel(got: object, device: Device | Any, what: str) -> Error:
    """:func:`check_error` of an :func:`unknown_kernel` outcome: INVALID_VALUE naming the name asked for, with the
    driver's code exactly where :data:`KERNEL_NAME_CODES` says."""
    e = check_error(got, ErrorKind.INVALID_VALUE, device, what)
    assert "no_such_kernel" in str(e), (what, e)
    assert (e.code is not None) == (device.kind in KERNEL_NAME_CODES), (what, e.code, e)
    return e


def freed_before_replay(stream: Stream, launch: Callable[[Allocation], KernelLaunch]) -> list[tuple[str, Call]]:
    """Graphs whose captured work uses an allocation freed after the capture (a pool block freed: its pool may
    hand it out again), each replayed with ``Graph.launch`` and ``Graph.launch_unchecked`` (returned, not raised):
    INVALID_HANDLE (the replay would write memory the caller no longer owns).  ``launch(a)``: a launch of one of the
    stream's device's kernels writing ``a`` (256 bytes).  Needs a backend of :data:`GRAPHS`."""
    device = stream.device
    keep = device.alloc(256)
    stream.fill(keep, 0)
    pool = device.memory_pool()
    cases: list[tuple[str, Callable[[Allocation], object], Callable[[], Any]]] = [
        ("a checked launch's argument", lambda a: stream.launch(launch(a)), lambda: device.alloc(256)),
        ("an unchecked launch's argument", lambda a: _ok(stream.launch_unchecked(launch(a))),
         lambda: device.alloc(256)),
        ("a fill's", lambda a: stream.fill(a, 7), lambda: device.alloc(256)),
        ("a copy's dst", lambda a: stream.copy(a, keep), lambda: device.alloc(256)),
        ("a copy's src", lambda a: stream.copy(keep, a), lambda: device.alloc(256)),
        ("the allocation of a slice", lambda a: stream.fill(a[64:128], 7), lambda: device.alloc(256)),
        ("a pool block", lambda a: stream.fill(a, 7), lambda: pool.alloc(256, stream)),
    ]
    calls: list[tuple[str, Call]] = []
    for what, record, make in cases:
        a = make()
        with stream.capture() as graph:
            record(a)
        a.free()
        calls.append((f"Graph.launch ({what} freed)", partial(graph.launch, stream)))
        calls.append((f"Graph.launch_unchecked ({what} freed)", partial(graph.launch_unchecked, stream)))
    return calls


def _ok(result: object) -> None:
    assert result is None, result
