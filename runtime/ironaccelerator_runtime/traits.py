"""The behavioural core surface every backend implements.

Base classes raise ``Error(kind=UNSUPPORTED)`` for any operation a backend does
not provide: a backend provides an operation by overriding its base method, which
is also how :meth:`Backend.supports` answers (``operations.py``).  Checked
operations validate and raise :class:`Error`; each ``*_unchecked`` twin skips
validation and bookkeeping and returns a :data:`Result` (the value, or the
:class:`Error` instead of raising it).
"""

from __future__ import annotations

import ctypes
import math
import operator
import os
import re
import threading
import weakref
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Callable, Iterable, Mapping, Sequence, SupportsIndex, TypeVar, Union

from ironaccelerator._core import BackendKind, CapabilityFlags, ComputeTier, DType, ErrorKind, MemoryKind, Vendor

from .errors import CompilerWarning, Error

T = TypeVar("T")
A = TypeVar("A", bound="Allocation")
Result = Union[T, Error]
Result.__doc__ = """``Result[T]`` (``T | Error``): what an ``_unchecked`` operation returns: the value, or the
:class:`Error` it did not raise.

ex) ``r = device.alloc_unchecked(n)`` then ``if isinstance(r, Error): ...``

An ``_unchecked`` call never raises for a bad value: the Error it returns has the ``ErrorKind`` the checked twin
raises for the same mistake (docs/UNCHECKED.md).  Test it with ``isinstance(r, Error)``; a launch's success is
None.

Backends:
    All (``Device.alloc_unchecked``, ``Allocation.free_unchecked``, ``Stream.launch_unchecked``,
    ``MemoryPool.alloc_unchecked``).
"""


def unsupported(backend: BackendKind | None, what: str, function: str | None = None) -> Error:
    """The ``UNSUPPORTED`` Error of ``what`` (an operation, ex. ``"Stream.capture"``, or a phrase) on ``backend``;
    ``function``: the operation's name where ``what`` is a phrase (``Error.function`` is always a name)."""
    return Error(ErrorKind.UNSUPPORTED, f"{what} is not supported by the {backend.name if backend else '?'} backend",
                 backend=backend.name if backend else None, function=function or what)


def _kind_of(obj: object) -> BackendKind | None:
    """The backend of an object made from a device (``obj.device``, or its module's, or its stream's), for the
    Errors of base-class operations; None if it has none."""
    dev = getattr(obj, "device", None) or getattr(getattr(obj, "module", None), "device", None) or \
        getattr(getattr(obj, "stream", None), "device", None)
    d = getattr(dev, "descriptor", None)
    return d.backend if isinstance(d, DeviceDescriptor) else None


_HOW_TO_SHARE = {
    "Allocation": "share device memory across processes with export_ipc() / Device.import_ipc() (CUDA, HIP), or "
                  "copy it to a host array (Stream.copy_to_host) and send that",
    "Device": "send its descriptor (device.descriptor, or its id), which pickles, and open the device there "
              "(Backend.open)",
}


def _not_picklable(obj: object, what: str) -> TypeError:
    """The TypeError of pickling (or copying) a handle of this process's driver state: ``what`` names the trait
    class (Allocation, Device, Stream, ...); the message says how to share it instead."""
    how = _HOW_TO_SHARE.get(what, "it lives in this process's driver context: make it again in the other process "
                                  "(open the device there, load the module, create the stream)")
    return TypeError(f"cannot pickle {what} {obj!r:.120}: {how}")


@dataclass(frozen=True, slots=True)
class DeviceId:
    """A device of one backend: its kind and its index in that backend's :meth:`Backend.devices` order.

    ``DeviceId(BackendKind.OPENCL, 0)``; ``str()`` of it is ``"opencl:0"``.  Frozen and hashable; picklable (send
    it, or the :class:`DeviceDescriptor` holding it, to another process and open the device there with
    :meth:`Backend.open`).

    Attributes:
        backend: the :class:`BackendKind` whose device this is.
        index: the device's position in that backend's enumeration (0-based, in the vendor's order).

    Backends:
        All.
    """

    backend: BackendKind
    index: int

    def __str__(self) -> str:
        return f"{self.backend.name.lower()}:{self.index}"


@dataclass(frozen=True, slots=True)
class Capability:
    """What a device can do, translated from the vendor's own version/feature report by the backend spec's tables.

    Attributes:
        flags: the :class:`CapabilityFlags` the device has (``CapabilityFlags.FP16 in cap.flags``).
        tier: the :class:`ComputeTier` (CPU, integrated, discrete, NPU ...).
        vendor_version: the vendor's own words for it: ``"sm_90"`` (CUDA compute capability 9.0),
            ``"gfx90a:sramecc+:xnack-"`` (HIP: the gfx arch), ``"OpenCL C 1.2 PoCL"`` (OpenCL),
            ``"Metal Common1,Common2,Common3"`` (Metal: the GPU families), ``"QNN 2.40 / HTP 5.51 v68"`` (QNN).

    Backends:
        All: OpenCL from ``CL_DEVICE_EXTENSIONS``/``CL_DEVICE_TYPE``, CUDA/HIP from the compute capability or
        gfx arch, Metal from ``supportsFamily:``, QNN from the HTP architecture.
    """

    flags: CapabilityFlags
    tier: ComputeTier
    vendor_version: str  # ex) "OpenCL C 1.2 pocl" or "sm_90" (compute capability 9.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class IpcHandle:
    """Device memory exported for another process (:meth:`Allocation.export_ipc`), opened there by
    :meth:`Device.import_ipc`.  Opaque and picklable: send it through a pipe, a queue or a file.

    Attributes:
        backend: the :class:`BackendKind` that exported it (``import_ipc`` on another backend is ``INVALID_VALUE``).
        device: the exporting device's index (in the exporter's numbering).
        nbytes: the size of the exported allocation in bytes.
        data: the vendor's handle as bytes (``CUipcMemHandle`` / ``hipIpcMemHandle_t``).
        pid: the exporting process (the vendors refuse opening a handle in the process that made it).

    Backends:
        CUDA, HIP (``cuIpcGetMemHandle`` / ``hipIpcGetMemHandle``).  OpenCL, Metal, QNN export none
        (``UNSUPPORTED``).
    """

    backend: BackendKind
    device: int
    nbytes: int
    data: bytes
    pid: int

    def __repr__(self) -> str:
        return (f"IpcHandle({self.backend.name}, device {self.device}, {self.nbytes} bytes, from pid {self.pid}, "
                f"{self.data[:8].hex()}...)")


_SIZE_MAX = 2**64 - 1  # size_t on the 64-bit hosts we build for


@dataclass(frozen=True, slots=True)
class DeviceLimits:
    """What one launch or one allocation may ask of a device (``DeviceDescriptor.limits``); :meth:`LaunchDims.validate`
    checks a launch against it before any vendor call (``INVALID_VALUE`` naming the limit).

    Attributes:
        max_block: the most threads of a block in each dimension (x, y, z).
        max_threads_per_block: the most threads of one block, all dimensions together.
        max_grid: the most blocks of a grid in each dimension.
        max_shared_mem: the most shared/local memory (bytes) one block may use.
        max_alloc: the largest single allocation in bytes; None: unknown.
        max_work_items: the most threads (grid x block, all dimensions) one launch may have.
        max_global: the most threads (``grid[i] * block[i]``) in each dimension; None: ``size_t``.

    Backends:
        All, each from its own report.  OpenCL: ``CL_DEVICE_MAX_WORK_ITEM_SIZES``, ``..._WORK_GROUP_SIZE``,
        ``..._LOCAL_MEM_SIZE``, ``..._MAX_MEM_ALLOC_SIZE`` (``max_work_items`` 2**32 - 1: PoCL crashes past it).
        CUDA/HIP: the device attributes (``max_alloc``: the device's memory).  Metal: ``maxThreadsPerThreadgroup``,
        ``maxBufferLength``, 32-bit grid positions (``max_global``), ``max_shared_mem`` 0.  QNN: a graph has no
        launch geometry, so every launch limit is 1 (``LaunchDims()`` only) and ``max_alloc`` is 2**32 - 1 (a
        client buffer's 32-bit size).
    """

    max_block: tuple[int, int, int] = (1024, 1024, 64)
    max_threads_per_block: int = 1024
    max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    max_shared_mem: int = 48 * 1024
    max_alloc: int | None = None  # the largest single allocation in bytes (OpenCL CL_DEVICE_MAX_MEM_ALLOC_SIZE); None: unknown
    max_work_items: int = _SIZE_MAX  # the most threads (grid x block, all dimensions) one launch may have
    max_global: tuple[int, int, int] | None = None  # the most threads (grid[i] x block[i]) in each dimension; None: size_t


@dataclass(frozen=True, slots=True)
class DeviceDescriptor:
    """A device as enumerated by :meth:`Backend.devices` (no context opened): what it is, without using it.

    Picklable; :meth:`Backend.open` takes its ``id``.

    Attributes:
        id: the :class:`DeviceId` to open it by.
        name: the vendor's device name (``"NVIDIA H100 80GB HBM3"``, ``"pthread-..."`` on PoCL).
        vendor: the :class:`Vendor` that made it.
        backend: the :class:`BackendKind` it belongs to (``id.backend``).
        total_memory: its memory in bytes (QNN: the host's, where its client buffers live; Metal:
            ``recommendedMaxWorkingSetSize``).
        compute_units: multiprocessors / compute units / cores (Metal reports none: 1).
        capability: what it can do (:class:`Capability`).
        limits: what one launch or allocation may ask of it (:class:`DeviceLimits`).

    Backends:
        All.
    """

    id: DeviceId
    name: str
    vendor: Vendor
    backend: BackendKind
    total_memory: int
    compute_units: int
    capability: Capability
    limits: DeviceLimits = field(default_factory=DeviceLimits)


def _integer(v: Any) -> int | None:
    """``v`` as a Python int if it is an integer (an ``int`` or anything with ``__index__``, e.g. numpy
    integers) and not a ``bool``; else None.  Floats, strings, bytes and bools are not sizes."""
    if type(v) is int:
        return v
    if isinstance(v, bool):
        return None
    try:
        return operator.index(v)
    except TypeError:
        return None


def check_size(v: Any, what: str, function: str, backend: BackendKind | str | None = None, *,
               minimum: int = 1) -> int:
    """A checked size/count parameter: ``TypeError`` (naming it) unless an integer, ``INVALID_VALUE`` below
    ``minimum`` or above ``size_t``."""
    n = _integer(v)
    name = backend.name if isinstance(backend, BackendKind) else backend
    if n is None:
        raise TypeError(f"{function}: {what} must be an integer, not {type(v).__name__} ({v!r})")
    if n < minimum or n > _SIZE_MAX:
        raise Error(ErrorKind.INVALID_VALUE, f"{function}: {what}={n} is out of range "
                    f"({minimum}..{_SIZE_MAX})", backend=name, function=function)
    return n


def check_span(size: int, offset: Any, nbytes: Any, what: str, function: str,
               backend: BackendKind | str | None = None, *, width: int = 1) -> tuple[int, int]:
    """``(offset, nbytes)`` of a byte range inside something of ``size`` bytes (``what``: "dst", "the source",
    ...): ``nbytes`` None means the rest after ``offset``.  ``INVALID_VALUE`` for a range past the end, or (for a
    ``width``-byte pattern) an offset or length that is not a multiple of the width; ``TypeError`` for non-integers."""
    o = check_size(offset, f"{what} offset", function, backend, minimum=0)
    n = size - o if nbytes is None else check_size(nbytes, "nbytes", function, backend, minimum=0)
    if o + n > size or n < 0:
        name = backend.name if isinstance(backend, BackendKind) else backend
        raise Error(ErrorKind.INVALID_VALUE, f"{function}: {what}: offset {o} + {max(n, 0)} bytes is past its end "
                    f"({size} bytes)", backend=name, function=function)
    if width > 1 and (o % width or n % width):
        name = backend.name if isinstance(backend, BackendKind) else backend
        raise Error(ErrorKind.INVALID_VALUE, f"{function}: offset {o} and nbytes {n} must be multiples of the "
                    f"{width}-byte pattern", backend=name, function=function)
    return o, n


def host_span(host_size: int, device_size: int, nbytes: Any, host_offset: Any, device_offset: Any, function: str,
              backend: BackendKind | str | None = None, *, to_device: bool) -> tuple[int, int, int]:
    """``(host_offset, device_offset, nbytes)`` of a copy between a host buffer and an allocation: without
    ``nbytes`` the host buffer's bytes after its offset, which must fit in the allocation after its offset."""
    ho, n = check_span(host_size, host_offset, nbytes, "the host source" if to_device else "the host destination",
                       function, backend)
    do, _ = check_span(device_size, device_offset, n, "dst" if to_device else "src", function, backend)
    return ho, do, n


def device_span(dst: Any, src: Any, nbytes: Any, dst_offset: Any, src_offset: Any,
                backend: BackendKind | str | None = None) -> tuple[int, int, int]:
    """``(src_offset, dst_offset, nbytes)`` of a device-to-device copy (``Stream.copy``): without ``nbytes`` the
    source's bytes after its offset, which must be exactly the destination's after its offset.  Overlapping ranges
    of one allocation (itself, its slices, a pool block) are ``INVALID_VALUE`` on every backend, as memcpy's."""
    function = "Stream.copy"
    so, n = check_span(src.nbytes, src_offset, nbytes, "src", function, backend)
    do, dn = check_span(dst.nbytes, dst_offset, None if nbytes is None else n, "dst", function, backend)
    if nbytes is None and dn != n:
        name = backend.name if isinstance(backend, BackendKind) else backend
        raise Error(ErrorKind.INVALID_VALUE, f"{function}: the source holds {n} bytes (after offset {so}) and the "
                    f"destination {dn} (after offset {do}): sizes must match, or pass nbytes to copy part",
                    backend=name, function=function)
    if n and (dst is src or isinstance(dst, _SHARES) or isinstance(src, _SHARES)):  # (else distinct memory)
        dm, dbase = _memory_of(dst)
        sm, sbase = _memory_of(src)
        if dm is sm and dbase + do < sbase + so + n and sbase + so < dbase + do + n:
            name = backend.name if isinstance(backend, BackendKind) else backend
            raise Error(ErrorKind.INVALID_VALUE, f"{function}: the source (bytes {sbase + so}..{sbase + so + n}) and "
                        f"the destination (bytes {dbase + do}..{dbase + do + n}) overlap in the same allocation: a "
                        "copy's ranges must not overlap (as memcpy's); copy through a temporary allocation",
                        backend=name, function=function)
    return so, do, n


def _memory_of(a: Any) -> tuple[Any, int]:
    """``(the allocation whose memory a is, the offset of a's bytes in it)``: a slice's allocation, a pool
    block's block (device_span's overlap test)."""
    offset = 0
    if isinstance(a, AllocationSlice):
        offset, a = a.offset, a.parent
    if isinstance(a, PooledAllocation):
        a = a.block
    return a, offset


def fill_pattern(value: Any, width: Any, function: str, backend: BackendKind | str | None = None) -> tuple[int, int]:
    """``(value, width)`` of a fill: ``width`` 1, 2 or 4 bytes, ``value`` an unsigned integer of that width."""
    w = check_size(width, "width", function, backend)
    name = backend.name if isinstance(backend, BackendKind) else backend
    if w not in (1, 2, 4):
        raise Error(ErrorKind.INVALID_VALUE, f"{function}: width={w}: a fill pattern is 1, 2 or 4 bytes",
                    backend=name, function=function)
    v = check_size(value, "value", function, backend, minimum=0)
    if v >= 1 << (8 * w):
        raise Error(ErrorKind.INVALID_VALUE, f"{function}: value={v} does not fit in {w} byte{'s' if w > 1 else ''}",
                    backend=name, function=function)
    return v, w


@dataclass(frozen=True, slots=True)
class CopyRegion:
    """A checked strided copy (``Stream.copy_2d``/``copy_3d``): ``depth`` slices of ``height`` rows of ``width``
    bytes; per side, the byte offset of the first row and the pitches (bytes from the start of one row, or slice, to
    the next).  Every row lies inside its side; the slice pitch is a multiple of the row pitch (OpenCL's rule, and
    the only layout CUDA/HIP's ``<side>Height`` can say).  ``dims``: 2 (a 2-D copy) or 3."""

    dims: int
    width: int
    height: int
    depth: int
    dst_offset: int
    dst_pitch: int
    dst_slice_pitch: int
    src_offset: int
    src_pitch: int
    src_slice_pitch: int

    @property
    def empty(self) -> bool:
        """Nothing to copy (a zero width, height or depth): no vendor call is made."""
        return not (self.width and self.height and self.depth)

    def origin(self, side: str) -> tuple[int, int, int]:
        """``side``'s ("dst" or "src") offset as an (x bytes, y rows, z slices) origin of its pitches (OpenCL)."""
        offset, row, slab = ((self.dst_offset, self.dst_pitch, self.dst_slice_pitch) if side == "dst" else
                             (self.src_offset, self.src_pitch, self.src_slice_pitch))
        z, rest = divmod(offset, slab) if slab else (0, offset)
        y, x = divmod(rest, row) if row else (0, rest)
        return x, y, z


def _pitches(v: Any, width: int, height: int, what: str, function: str, backend: BackendKind | str | None,
             dims: int) -> tuple[int, int]:
    """``(row pitch, slice pitch)`` of one side: ``v`` None (packed: the width, and height rows), a row pitch (its
    slices packed: ``height`` rows), or for a 3-D copy a ``(row, slice)`` pair."""
    name = backend.name if isinstance(backend, BackendKind) else backend
    if v is None:
        row, slab = width, None
    elif dims == 3 and isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise Error(ErrorKind.INVALID_VALUE, f"{function}: {what}_pitch must be a row pitch or a (row, slice) "
                        f"pair, not {v!r}", backend=name, function=function)
        row = check_size(v[0], f"{what} row pitch", function, backend, minimum=0)
        slab = check_size(v[1], f"{what} slice pitch", function, backend, minimum=0)
    else:
        row, slab = check_size(v, f"{what}_pitch", function, backend, minimum=0), None
    if row < width:
        raise Error(ErrorKind.INVALID_VALUE, f"{function}: {what} pitch {row} is less than the width ({width} bytes): "
                    "rows would overlap", backend=name, function=function)
    if slab is None:
        return row, row * height
    if slab < row * height or (row and slab % row):
        raise Error(ErrorKind.INVALID_VALUE, f"{function}: {what} slice pitch {slab} must be a multiple of the row "
                    f"pitch {row} and at least {height} rows ({row * height} bytes)", backend=name, function=function)
    return row, slab


def _origin(v: Any, row: int, slab: int, what: str, function: str, backend: BackendKind | str | None,
            dims: int) -> int:
    """A side's offset in bytes: an int, or an ``(x bytes, y rows[, z slices])`` origin of its pitches."""
    if isinstance(v, (tuple, list)):
        if not 2 <= len(v) <= dims:
            name = backend.name if isinstance(backend, BackendKind) else backend
            raise Error(ErrorKind.INVALID_VALUE, f"{function}: {what}_offset must be bytes or an (x, y"
                        f"{', z' if dims == 3 else ''}) origin, not {v!r}", backend=name, function=function)
        parts = [check_size(p, f"{what} origin", function, backend, minimum=0) for p in v]
        return parts[0] + parts[1] * row + (parts[2] * slab if len(parts) == 3 else 0)
    return check_size(v, f"{what}_offset", function, backend, minimum=0)


def copy_region(dst_size: int, src_size: int, extent: Any, dst_pitch: Any, src_pitch: Any, dst_offset: Any,
                src_offset: Any, function: str, backend: BackendKind | str | None = None, *,
                dims: int) -> CopyRegion:
    """Check a strided copy before any vendor call (``Stream.copy_2d``/``copy_3d``): ``extent`` (width bytes,
    height rows[, depth slices]), each side's pitches and offset.  ``TypeError`` for non-integers; ``INVALID_VALUE``
    for a negative or too-large value, a pitch below the width (or a slice pitch below ``height`` rows or not a
    multiple of the row pitch), and a region whose last byte is past the end of either side (``*_size`` bytes)."""
    name = backend.name if isinstance(backend, BackendKind) else backend
    if isinstance(extent, (str, bytes)) or not isinstance(extent, (tuple, list)) or len(extent) != dims:
        raise Error(ErrorKind.INVALID_VALUE, f"{function}: the extent must be {dims} sizes (width in bytes, height"
                    f"{', depth' if dims == 3 else ''}), not {extent!r}", backend=name, function=function)
    width, height, depth = [check_size(x, w, function, backend, minimum=0)
                            for x, w in zip((*extent, 1), ("width", "height", "depth"))]
    sides = {}
    for what, size, pitch, offset in (("dst", dst_size, dst_pitch, dst_offset), ("src", src_size, src_pitch,
                                                                                 src_offset)):
        row, slab = _pitches(pitch, width, height, what, function, backend, dims)
        o = _origin(offset, row, slab, what, function, backend, dims)
        end = o if not (width and height and depth) else o + (depth - 1) * slab + (height - 1) * row + width
        if end > size:
            raise Error(ErrorKind.INVALID_VALUE, f"{function}: {what}: the region from offset {o} ends at byte {end}, "
                        f"past its end ({size} bytes)", backend=name, function=function)
        sides[what] = (o, row, slab)
    return CopyRegion(dims, width, height, depth, *sides["dst"], *sides["src"])


def not_a_launch(obj: Any, function: str) -> TypeError:
    """The TypeError for a launch argument that is not a :class:`KernelLaunch` (raised by the backends from
    the AttributeError or unpacking error it causes, so the hot path pays no isinstance test)."""
    return TypeError(f"{function}: launch must be a KernelLaunch, not {type(obj).__name__} ({obj!r:.80})")


def _dims(v: SupportsIndex | Sequence[SupportsIndex], what: str) -> tuple[int, int, int]:
    if isinstance(v, (str, bytes, bytearray, memoryview)):  # iterable, but not dimensions (b"x" is not (120,))
        t: tuple[Any, ...] = ()
    else:
        try:
            t = (v,) if _integer(v) is not None else tuple(v)  # type: ignore[arg-type]
        except TypeError:  # not an int nor iterable (a float, None): the same INVALID_VALUE as a bad sequence
            t = ()
    ints = tuple(_integer(x) for x in t)
    if not 1 <= len(t) <= 3 or None in ints:
        raise Error(ErrorKind.INVALID_VALUE, f"LaunchDims: {what} must be an int or 1-3 ints, got {v!r}",
                    function="LaunchDims")
    return (ints + (1, 1))[:3]  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class LaunchDims:
    """The size of a launch: a grid of blocks, each a block of threads, each 3-D (an int means ``(n, 1, 1)``),
    plus dynamic shared memory and launch options.  Immutable, hashable and picklable; checked when made.

    ex) ``LaunchDims(grid=(n + 255) // 256, block=256)``

    CUDA/HIP: ``grid`` and ``block`` are the launch's grid and block dimensions.  OpenCL: every launch is 3-D
    (``get_work_dim()`` is 3) with, per dimension, global size = grid x block and local size = block, always
    passed explicitly (the runtime never picks the local size), so ``get_num_groups`` = grid and the global
    size is a multiple of the local size by construction.  For a work size ``n`` that is not a multiple of
    a chosen block, launch ``grid = ceil(n / block)`` and test ``i < n`` in the kernel, or pass ``block=1``
    and ``grid=n`` (work-groups of one item).  Metal: ``dispatchThreadgroups`` of ``grid`` threadgroups of
    ``block`` threads.  QNN: graphs have no geometry: only ``LaunchDims()``.

    Args:
        grid: blocks per dimension: an int or 1-3 ints (missing dimensions are 1).
        block: threads per block per dimension, likewise.
        shared_mem: bytes of dynamic shared memory per block, CUDA/HIP's ``sharedMemBytes`` (the kernel's
            ``extern __shared__`` array).  Every other backend refuses a nonzero ``shared_mem`` with
            ``UNSUPPORTED``, never ignoring it: OpenCL sizes each ``__local`` parameter with a
            ``LocalMemory(nbytes)`` argument instead; Metal and QNN have no dynamic local memory here
            (``ironaccelerator_runtime.kernel_args``).
        cooperative: keyword-only; launch a cooperative grid (``CU_LAUNCH_ATTRIBUTE_COOPERATIVE``:
            ``cooperative_groups::this_grid().sync()`` works; every block must be resident at once, so the grid
            is at most ``Kernel.max_active_blocks(threads) x compute units`` blocks, else ``INVALID_VALUE`` at
            launch; ``CapabilityFlags.COOPERATIVE_LAUNCH``).
        cluster: keyword-only; 1-3 ints grouping blocks into thread-block clusters of that shape
            (``CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION``, compute capability 9.0+,
            ``CapabilityFlags.THREAD_BLOCK_CLUSTERS``); the grid must be a multiple of it in every dimension.

    Raises:
        Error: ``ErrorKind.INVALID_VALUE`` when ``grid``, ``block`` or ``cluster`` is not an int or 1-3 ints
            (floats, strings, bools, None), ``shared_mem`` is not an int, ``cooperative`` is not a bool, or
            ``cluster`` has a size < 1 or does not divide the grid.  Sizes against the device's limits are
            checked at launch (:meth:`validate`).

    Backends:
        All take grid and block (QNN: only ``LaunchDims()``).  ``shared_mem``: CUDA/HIP only.  Launch options
        (``cooperative``, ``cluster``): CUDA only, where the device's :class:`Capability` has the flag
        (``cuLaunchKernelEx``; dims without options take ``cuLaunchKernel``, the compiled fast path);
        ``UNSUPPORTED`` at launch on every other backend.
    """

    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    shared_mem: int = 0
    cooperative: bool = False
    cluster: tuple[int, int, int] | None = None

    def __init__(self, grid: SupportsIndex | Sequence[SupportsIndex] = 1, block: SupportsIndex | Sequence[SupportsIndex] = 1,
                 shared_mem: SupportsIndex = 0, *, cooperative: bool = False,
                 cluster: SupportsIndex | Sequence[SupportsIndex] | None = None) -> None:
        object.__setattr__(self, "grid", g := _dims(grid, "grid"))
        object.__setattr__(self, "block", _dims(block, "block"))
        sm = _integer(shared_mem)
        if sm is None:
            raise Error(ErrorKind.INVALID_VALUE, f"LaunchDims: shared_mem must be an int, got {shared_mem!r}",
                        function="LaunchDims")
        object.__setattr__(self, "shared_mem", sm)
        if not isinstance(cooperative, bool):
            raise Error(ErrorKind.INVALID_VALUE, f"LaunchDims: cooperative must be a bool, got {cooperative!r}",
                        function="LaunchDims")
        object.__setattr__(self, "cooperative", cooperative)
        c = None
        if cluster is not None:
            c = _dims(cluster, "cluster")
            if min(c) < 1 or min(g) < 1 or any(g[i] % c[i] for i in range(3)):
                raise Error(ErrorKind.INVALID_VALUE, f"LaunchDims: cluster={c} must be >= 1 and divide grid={g} in "
                            "every dimension", function="LaunchDims")
        object.__setattr__(self, "cluster", c)

    def __repr__(self) -> str:
        opts = (", cooperative=True" if self.cooperative else "") + \
            (f", cluster={self.cluster}" if self.cluster is not None else "")
        return f"LaunchDims(grid={self.grid}, block={self.block}, shared_mem={self.shared_mem}{opts})"

    @property
    def has_options(self) -> bool:
        """Whether a launch option (``cooperative``, ``cluster``) is set: such dims take the vendor's extended
        launch, where it has one."""
        return self.cooperative or self.cluster is not None

    def options_error(self, backend: BackendKind | str | None, function: str = "Stream.launch") -> Error:
        """The Error a backend without launch options raises (or returns) for these dims: used by backends.

        Args:
            backend: the backend refusing, a :class:`BackendKind` or its name (None: unknown).
            function: the operation named in the Error (default ``"Stream.launch"``).

        Returns:
            An ``ErrorKind.UNSUPPORTED`` :class:`Error` naming the options set (cooperative launch,
            thread-block clusters); it is returned, not raised.

        Raises:
            Error: never (it builds the Error only).

        Backends:
            OpenCL, Metal and QNN use it; CUDA honours the options.
        """
        name = backend.name if isinstance(backend, BackendKind) else backend
        what = " and ".join(w for w, on in (("cooperative launch", self.cooperative),
                                            ("thread-block clusters", self.cluster is not None)) if on)
        return Error(ErrorKind.UNSUPPORTED, f"{function}: {what} (LaunchDims options) are not supported by the "
                     f"{name or '?'} backend", backend=name, function=function)

    @property
    def threads(self) -> int:
        """The launch's total number of threads (work-items), the product of every grid and block dimension."""
        g, b = self.grid, self.block
        return g[0] * g[1] * g[2] * b[0] * b[1] * b[2]

    def validate(self, limits: DeviceLimits, backend: BackendKind | None = None, function: str = "Stream.launch") -> None:
        """Check these dimensions against a device's limits (the checked :meth:`Stream.launch` calls it).

        Args:
            limits: the device's :class:`DeviceLimits` (``device.descriptor.limits``).
            backend: the backend named in the Error (None: none).
            function: the operation named in the Error (default ``"Stream.launch"``).

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` listing every problem: a dimension < 1; more threads in all than
                ``max_work_items``; a global size (grid x block) past ``size_t`` or ``max_global``; a block or
                grid dimension past ``max_block``/``max_grid``; more threads per block than
                ``max_threads_per_block``; ``shared_mem`` < 0 or past ``max_shared_mem``.

        Backends:
            All (the limits are each device's).
        """
        problems = []
        if min(self.grid + self.block) < 1:
            problems.append(f"dimensions must be >= 1 (grid={self.grid}, block={self.block})")
        else:
            total = self.threads
            if total > limits.max_work_items:
                problems.append(f"{total} threads (grid x block) exceed the device's {limits.max_work_items}")
            for i in range(3):
                if self.grid[i] * self.block[i] > _SIZE_MAX:
                    problems.append(f"global size grid[{i}] x block[{i}] overflows size_t")
                elif limits.max_global is not None and self.grid[i] * self.block[i] > limits.max_global[i]:
                    problems.append(f"grid[{i}] x block[{i}] = {self.grid[i] * self.block[i]} threads exceed the "
                                    f"device's {limits.max_global[i]} per dimension")
        for i in range(3):
            if self.block[i] > limits.max_block[i]:
                problems.append(f"block[{i}]={self.block[i]} exceeds {limits.max_block[i]}")
            if self.grid[i] > limits.max_grid[i]:
                problems.append(f"grid[{i}]={self.grid[i]} exceeds {limits.max_grid[i]}")
        if self.block[0] * self.block[1] * self.block[2] > limits.max_threads_per_block:
            problems.append(f"block of {self.block} has more than {limits.max_threads_per_block} threads")
        if self.shared_mem < 0 or self.shared_mem > limits.max_shared_mem:
            problems.append(f"shared_mem={self.shared_mem} exceeds {limits.max_shared_mem}")
        if problems:
            raise Error(ErrorKind.INVALID_VALUE, "bad launch dimensions: " + "; ".join(problems),
                        backend=backend.name if backend else None, function=function)


@dataclass(frozen=True, slots=True)
class Scalar:
    """A kernel argument value tagged with its :class:`DType`, for a by-value kernel parameter.

    ex) ``Scalar(2.5, DType.F32)``

    Checked when made, so packing it into a launch cannot fail later.  Immutable, hashable and picklable.

    Args:
        value: a number the type can hold: an int in range for integer types, a real number for floating
            types (finite where the type has no infinity), a bool (or 0/1) for BOOL, a number for complex types.
        dtype: the parameter's :class:`DType`.

    Raises:
        TypeError: ``dtype`` is not a :class:`DType`.
        Error: ``ErrorKind.INVALID_VALUE`` when ``value`` is not a number of that type or is out of its range
            (an int past the integer type, a float that overflows F16/BF16/F32).

    Backends:
        All, for value parameters.  At launch it must match a parameter whose type the backend knows (OpenCL,
        Metal) in kind and size, else ``INVALID_VALUE``; CUDA/HIP check its size (``kernel_args``).
    """

    value: int | float | complex | bool
    dtype: DType

    def __post_init__(self) -> None:
        _check_scalar(self.value, self.dtype)


# the smallest magnitude that rounds to infinity in each type: (2 - 2**-(mantissa bits + 1)) * 2**max_exponent
_FLOAT_OVERFLOW = {"f16": (2 - 2**-11) * 2.0**15, "bf16": (2 - 2**-8) * 2.0**127, "f32": (2 - 2**-24) * 2.0**127}


def _check_scalar(value: Any, dtype: Any) -> None:
    if not isinstance(dtype, DType):
        raise TypeError(f"Scalar: dtype must be a DType, not {type(dtype).__name__} ({dtype!r})")
    cls, name = dtype.numeric_class.name, dtype.info.name
    problem = None
    if cls in ("SIGNED_INT", "UNSIGNED_INT"):
        n = _integer(value) if not isinstance(value, bool) else int(value)
        if n is None:
            problem = "is not an integer"
        else:
            bits = dtype.size * 8
            lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if cls == "SIGNED_INT" else (0, (1 << bits) - 1)
            if not lo <= n <= hi:
                problem = f"is out of range for {name} ({lo}..{hi})"
    elif cls == "BOOL":
        if not isinstance(value, bool) and _integer(value) not in (0, 1):
            problem = "is not a bool (or 0/1)"
    elif cls == "COMPLEX":
        if isinstance(value, (str, bytes)) or not isinstance(value, (int, float, complex)) and \
                not hasattr(value, "__complex__"):
            problem = "is not a number"
    else:  # floating
        if isinstance(value, (str, bytes, complex)) or not hasattr(value, "__float__"):
            problem = "is not a real number"
        else:
            f = float(value)
            top = _FLOAT_OVERFLOW.get(name)
            if top is not None and math.isfinite(f) and abs(f) >= top:
                problem = f"overflows {name}"
            elif cls in ("FLOAT8_E4M3FN",) and not math.isfinite(f):
                problem = f"is not finite ({name} has no infinity)"
    if problem is not None:
        raise Error(ErrorKind.INVALID_VALUE, f"Scalar({value!r}, DType.{dtype.name}): the value {problem}",
                    function="Scalar")


class KernelLaunch(tuple):  # type: ignore[type-arg]
    """One kernel launch: what, how big, with which arguments; pass it to :meth:`Stream.launch`.

    ex) ``KernelLaunch(kernel, LaunchDims(grid, 256), (a, b, c, np.uint32(n)))``

    What each parameter takes (Allocations, numpy scalars, :class:`Scalar`, bytes, Python numbers where the
    backend knows the parameter's type, :class:`LocalMemory`), and what every backend refuses, is the
    kernel-argument policy of ``ironaccelerator_runtime.kernel_args``; it is checked at launch, not here.

    An immutable record, built once per launch, so the cheapest one Python has: a tuple ``(kernel, dims,
    args)`` with named fields (a frozen dataclass costs ~2.5x as much to build).  Like a named tuple, it
    compares equal to a plain tuple of the same fields.  Launching the same KernelLaunch object again is the
    fast path.

    Args:
        kernel: the :class:`Kernel` to launch.
        dims: its :class:`LaunchDims`.
        args: one argument per kernel parameter, in order (any sequence; kept as a tuple).

    Raises:
        TypeError: ``args`` is not iterable.  Nothing else is checked here: a wrong kernel, dims or argument is
            refused by :meth:`Stream.launch` (``launch_unchecked`` returns it).

    Backends:
        All.
    """

    __slots__ = ()

    def __new__(cls, kernel: Kernel, dims: LaunchDims, args: Sequence[Any] = ()) -> KernelLaunch:
        return _new_tuple(cls, (kernel, dims, args if type(args) is tuple else tuple(args)))

    kernel: Kernel = property(itemgetter(0), doc="The :class:`Kernel` to launch.")  # type: ignore[assignment]
    dims: LaunchDims = property(itemgetter(1), doc="Its :class:`LaunchDims`.")  # type: ignore[assignment]
    args: tuple[Any, ...] = property(itemgetter(2),  # type: ignore[assignment]
                                     doc="Its arguments, a tuple (one per kernel parameter).")

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        return f"KernelLaunch(kernel={self[0]!r}, dims={self[1]!r}, args={self[2]!r})"


_new_tuple = tuple.__new__


_MACRO = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True, slots=True, kw_only=True)
class CompileOptions:
    """``load_module``'s compile options, checked.  ex) ``CompileOptions(options=("-w",), defines=(("N", "4"),))``

    ``defines``: (name, value or None) pairs in the caller's order; ``include_dirs``: absolute paths."""

    options: tuple[str, ...] = ()
    defines: tuple[tuple[str, str | None], ...] = ()
    include_dirs: tuple[str, ...] = ()
    name_expressions: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.options or self.defines or self.include_dirs or self.name_expressions)

    def flags(self) -> list[str]:
        """The compiler flags: ``options``, then ``-DNAME[=VALUE]`` per define, then ``-I<dir>`` per directory."""
        out = list(self.options)
        out += [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in self.defines]
        out += [f"-I{d}" for d in self.include_dirs]
        return out


def compile_options(options: Any = (), defines: Any = None, include_dirs: Any = (), name_expressions: Any = (),
                    backend: BackendKind | str | None = None,
                    function: str = "Device.load_module") -> CompileOptions:
    """Check ``load_module``'s option arguments (no vendor call): ``INVALID_VALUE`` naming the bad one.
    ``options``/``name_expressions``: sequences of str (a single str is refused: it would be its characters);
    ``defines``: a mapping of macro names to str, int, float, bool or None; ``include_dirs``: str or path-like."""
    name = backend.name if isinstance(backend, BackendKind) else backend

    def bad(what: str) -> Error:
        return Error(ErrorKind.INVALID_VALUE, f"{function}: {what}", backend=name, function=function)

    def strings(v: Any, what: str) -> tuple[str, ...]:
        if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)):
            raise bad(f"{what} must be a list or tuple of str, not {type(v).__name__} ({v!r:.80})")
        for x in v:
            if not isinstance(x, str):
                raise bad(f"{what} must hold str, not {type(x).__name__} ({x!r:.80})")
            if "\0" in x:
                raise bad(f"{what}: {x!r} contains a NUL character")
        return tuple(v)

    opts = strings(options, "options")
    if any(not o for o in opts):
        raise bad("options: an empty option")
    names = strings(name_expressions, "name_expressions")
    defs: list[tuple[str, str | None]] = []
    if defines is not None:
        if not isinstance(defines, Mapping):
            raise bad(f"defines must be a mapping (dict) of macro names to values, not {type(defines).__name__}")
        for k, v in defines.items():
            if not isinstance(k, str) or not _MACRO.match(k):
                raise bad(f"defines: {k!r} is not a macro name")
            if v is None:
                defs.append((k, None))
            elif isinstance(v, bool):
                defs.append((k, "1" if v else "0"))
            elif isinstance(v, (int, float, str)):
                text = str(v)
                if "\0" in text or "\n" in text:
                    raise bad(f"defines: the value of {k} contains a NUL or newline")
                defs.append((k, text))
            else:
                raise bad(f"defines: the value of {k} must be str, int, float, bool or None, not {type(v).__name__}")
    if isinstance(include_dirs, (str, bytes, os.PathLike)) or not isinstance(include_dirs, (list, tuple)):
        raise bad(f"include_dirs must be a list or tuple of paths, not {type(include_dirs).__name__}")
    dirs = []
    for d in include_dirs:
        if not isinstance(d, (str, os.PathLike)) or isinstance(d, bytes):
            raise bad(f"include_dirs must hold str or path-like objects, not {type(d).__name__} ({d!r:.80})")
        p = os.fspath(d)
        if not isinstance(p, str) or not p or "\0" in p:
            raise bad(f"include_dirs: {d!r} is not a path")
        dirs.append(os.path.abspath(p))
    return CompileOptions(options=opts, defines=tuple(defs), include_dirs=tuple(dirs), name_expressions=names)


class Backend:
    """A vendor API: enumerates its devices and opens them.

    Get one from the registry (``BackendRegistry.default().get("opencl")``) or construct a vendor's class
    (``ironaccelerator.backends.opencl.OpenCLBackend()``); a backend whose vendor library cannot load raises
    ``LIBRARY_NOT_FOUND`` there.  ``kind`` is its :class:`BackendKind`.  The base class raises
    ``Error(UNSUPPORTED)`` for what a backend does not provide.

    Backends:
        OpenCL (``OpenCLBackend``), CUDA and HIP (``CudaBackend``/``HipBackend``), Metal (``MetalBackend``),
        QNN (``QnnBackend``).
    """

    kind: BackendKind

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.kind.name}>"

    def versions(self) -> dict[str, Any]:
        """The driver, runtime and platform versions the backend can report (for ``python -m ironaccelerator``).

        Returns:
            name -> value, as the vendor gives them; empty where it reports none.

        Raises:
            Error: the vendor's error where a version query fails (OpenCL: enumerating the platforms).

        Backends:
            All.  OpenCL: each platform with its ``CL_PLATFORM_VERSION``; CUDA/HIP: driver (and HIP runtime)
            version; Metal: the Objective-C runtime and the frameworks opened; QNN: core and backend API
            versions, provider and build id.
        """
        return {}

    def devices(self) -> list[DeviceDescriptor]:
        """The backend's devices as enumerated, in the vendor's order, without opening any.

        Enumerated once per backend object and cached.

        Returns:
            One :class:`DeviceDescriptor` per device; empty where the library loads but finds none (HIP without
            an AMD GPU; OpenCL without a platform).

        Raises:
            Error: the vendor's error (mapped to an :class:`ErrorKind`, ``.code`` the vendor's status) where the
                enumeration fails, e.g. ``NOT_INITIALIZED`` when the driver cannot initialise.

        Backends:
            All.
        """
        raise unsupported(self.kind, "Backend.devices")

    def open(self, device_id: DeviceId | int = 0) -> Device:
        """Open a device: create its context (or device handle) so it can allocate, run and load code.

        Args:
            device_id: a :class:`DeviceId` of this backend (from :meth:`devices`) or an index (an ``int`` or
                anything with ``__index__``, such as ``np.int64``); default the first device.

        Returns:
            The opened :class:`Device` (the backend's subclass, e.g. ``OpenCLDevice``); a context manager that
            closes the device on exit.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for an index out of range, a :class:`DeviceId` of another backend,
                or anything that is not an index (``"0"``, ``0.5``, ``True``); ``ErrorKind.NO_DEVICE`` when the
                backend has no device at all (OpenCL, CUDA, HIP, QNN; Metal says ``INVALID_VALUE``); the vendor's
                error where creating the context fails.

        Backends:
            All.  QNN also takes ``arch=`` and ``soc=`` keywords (the HTP architecture / SoC model graphs are
            prepared for: see ``QnnBackend.open``).
        """
        raise unsupported(self.kind, "Backend.open")

    def _index(self, device_id: DeviceId | int) -> int:
        """The device index ``open`` was given: a :class:`DeviceId` of this backend, or an integer (an ``int`` or
        anything with ``__index__``, ex. ``np.int64``); anything else (``"0"``, ``0.9``, ``True``: a bool is not
        an index) is ``INVALID_VALUE``, like an id of another backend or out of range."""
        if type(device_id) is DeviceId:
            if device_id.backend != self.kind:
                raise Error(ErrorKind.INVALID_VALUE, f"Backend.open: {device_id} is not a {self.kind.name} device",
                            backend=self.kind.name, function="Backend.open")
            return device_id.index
        n = _integer(device_id)
        if n is None:
            raise Error(ErrorKind.INVALID_VALUE, f"Backend.open: device_id must be a DeviceId or an int index, not "
                        f"{type(device_id).__name__} ({device_id!r:.80})", backend=self.kind.name,
                        function="Backend.open")
        return n

    def operations(self) -> tuple[str, ...]:
        """The operations of the trait surface this backend implements, derived from what its classes override.

        Returns:
            ``"Trait.method"`` names (ex. ``"Stream.capture"``) in the order of the trait bases; the surface's
            operations this backend leaves out raise ``UNSUPPORTED`` (see :mod:`ironaccelerator_runtime.operations`
            for the rule).  Derived once per backend class.

        Raises:
            Error: nothing on a backend of the package; a backend class whose methods lack the return annotations
                the derivation follows raises the ``TypeError`` of the failed lookup.

        Backends:
            All.  What ``python -m ironaccelerator --json`` lists as each backend's ``operations``.
        """
        from .operations import implemented

        return implemented(type(self))

    def supports(self, operation: str) -> bool:
        """Whether this backend implements ``operation``: ask instead of calling it and catching ``UNSUPPORTED``.

        Args:
            operation: an operation of the trait surface, ``"Trait.method"`` (ex. ``"Stream.capture"``,
                ``"Kernel.max_active_blocks"``).

        Returns:
            True where the backend's class overrides the base method (or the base implements it for every
            backend and what it builds on is there), False where calling it raises ``UNSUPPORTED``.  An
            implemented operation may still refuse some arguments with ``UNSUPPORTED`` (a memory kind, a module
            format): the device's capability flags say those.

        Raises:
            Error: ``INVALID_VALUE`` for a name that is not an operation of the surface; the message lists them.

        Backends:
            All.
        """
        from .operations import supports

        return supports(type(self), operation, self.kind.name)


class Device:
    """An opened device: allocates memory, creates streams, loads modules.  A context manager.

    Lifetime: :meth:`close` (or leaving ``with``) waits for the device's streams, returns the memory
    pool's cached blocks and gives up the device's own reference to its native context.  From then on
    every checked operation on the device, and on the streams, events, modules, kernels and allocations
    made from it, raises ``Error(INVALID_HANDLE)`` saying the device is closed (``_unchecked`` twins return
    that Error where a flag test is all it costs).  Objects still alive keep the native handles they hold
    valid until they are freed or dropped (the context lives while anything made from it does), so no
    call on them can touch a released handle; ``Allocation.free()`` after ``close()`` still releases the
    memory.  ``close()`` is idempotent.

    A device does not pickle (``TypeError`` saying to send its ``descriptor`` and open it there).  ``descriptor``
    is its :class:`DeviceDescriptor`, ``backend`` the :class:`Backend` that opened it.

    Backends:
        All: ``OpenCLDevice`` (a ``cl_context``), ``CudaDevice``/``HipDevice`` (the primary context / the
        selected device), ``MetalDevice`` (an ``MTLDevice``), ``QnnDevice`` (a ``QnnDevice_create`` handle).
    """

    def __reduce__(self) -> Any:  # (a driver handle of this process: no pickle, no copy.copy)
        raise _not_picklable(self, "Device")

    descriptor: DeviceDescriptor
    backend: Backend
    _closed: bool = False
    # MemoryPool's device-wide fence (frees naming no stream): a backend that tracks enqueues keeps _dirty (work
    # enqueued since its last fence) and _fence_events (that fence's events until seen complete) and defines
    # _pool_fence(); the defaults send the pool to each stream's _pool_fence
    _dirty: bool = True
    _fence_events: Sequence[Event] = ()

    @property
    def kind(self) -> BackendKind:
        """The :class:`BackendKind` of this device (``descriptor.backend``)."""
        return self.descriptor.backend

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (checked operations then raise ``INVALID_HANDLE``)."""
        return self._closed

    def _closed_error(self, what: str) -> Error:
        return Error(ErrorKind.INVALID_HANDLE, f"{what}: device {self.descriptor.id} was closed",
                     backend=self.kind.name, function=what)

    def _check_open(self, what: str) -> None:
        """Raise INVALID_HANDLE if the device was closed (checked paths call this)."""
        if self._closed:
            raise self._closed_error(what)

    def __repr__(self) -> str:
        d = getattr(self, "descriptor", None)
        if d is None:
            return f"<{type(self).__name__} (not opened)>"
        return f"<{type(self).__name__} {d.id} {d.name!r}{' closed' if self._closed else ''}>"

    def alloc(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> Allocation:
        """Allocate ``nbytes`` of memory of ``kind`` on this device.

        The allocation is released when it is freed (:meth:`Allocation.free`, or leaving ``with``) or, unfreed,
        when it is dropped.  Its contents are uninitialised.

        Args:
            nbytes: size in bytes, an integer (``int`` or anything with ``__index__``) from 1 to ``2**64 - 1``.
            kind: where the memory lives (:class:`MemoryKind`): ``DEVICE`` (default), ``HOST_PINNED`` (page-locked
                host memory the device reads), ``UNIFIED`` (one address for host and device), ``HOST``.

        Returns:
            The new :class:`Allocation` (the backend's subclass), with ``nbytes``, ``kind`` and ``device``.

        Raises:
            TypeError: ``nbytes`` is not an integer (``1.5``, ``"8"``), or ``kind`` is not a :class:`MemoryKind`.
            Error: ``ErrorKind.INVALID_VALUE`` for ``nbytes`` < 1 or past ``size_t``, or past what the device
                allocates at once (OpenCL ``CL_DEVICE_MAX_MEM_ALLOC_SIZE``, Metal ``maxBufferLength``);
                ``ErrorKind.OUT_OF_MEMORY`` when the memory is not there; ``ErrorKind.UNSUPPORTED`` when the
                backend lacks ``kind`` (see Backends); ``ErrorKind.INVALID_HANDLE`` after :meth:`close`.

        Backends:
            OpenCL: every kind (``HOST_PINNED``/``HOST``: ``CL_MEM_ALLOC_HOST_PTR`` buffers; ``UNIFIED``: fine-grained
            SVM, where the device has it (``CapabilityFlags.UNIFIED_MEMORY``), else ``UNSUPPORTED``).
            CUDA/HIP: every kind (``cuMemAlloc``/``hipMalloc``, ``cuMemHostAlloc``/``hipHostMalloc``,
            ``cuMemAllocManaged``/``hipMallocManaged``).  Metal: ``DEVICE`` (private storage) and ``UNIFIED``
            (shared storage, on a unified-memory device); ``HOST_PINNED`` and ``HOST`` are ``UNSUPPORTED``.
            QNN: ``DEVICE``, ``HOST_PINNED`` and ``HOST`` are all host memory bound to graph tensors as client
            buffers; ``UNIFIED`` (registered shared memory, ``QnnMem_register``) is ``UNSUPPORTED`` (the
            message gives the library's reason).
        """
        raise unsupported(self.kind, "Device.alloc")

    def alloc_unchecked(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> Result[Allocation]:
        """:meth:`alloc` that returns the :class:`Error` instead of raising it, for the hot path.

        The allocation is not tracked: it is released only by :meth:`Allocation.free` / ``free_unchecked``
        (Metal's are tracked).  One fast test of the arguments (``type(nbytes) is int``, ``type(kind) is
        MemoryKind``); see docs/UNCHECKED.md.

        Args:
            nbytes: size in bytes, as for :meth:`alloc`.
            kind: the :class:`MemoryKind`, as for :meth:`alloc`.

        Returns:
            The new :class:`Allocation`, or the :class:`Error` it did not raise (``INVALID_VALUE`` for a bad
            ``nbytes`` or ``kind``, where :meth:`alloc` raises ``TypeError`` too; ``OUT_OF_MEMORY``,
            ``UNSUPPORTED`` and ``INVALID_HANDLE`` for a closed device, as for :meth:`alloc`).

        Raises:
            Error: never for a bad value (the Error is returned); see docs/UNCHECKED.md.

        Backends:
            All, with the memory kinds of :meth:`alloc`.
        """
        raise unsupported(self.kind, "Device.alloc_unchecked")

    def _alloc_args_unchecked(self, nbytes: Any, kind: Any, function: str) -> int | Error:
        """``alloc_unchecked``'s arguments where its one fast test (``type(nbytes) is int``, ``0 < nbytes <=
        SIZE_MAX``, ``type(kind) is MemoryKind``) failed: the size as an int (numpy integers convert, as for
        ``alloc``), or the INVALID_VALUE naming the bad one (returned: an unchecked call never raises for a bad
        value: ``alloc`` raises TypeError for a non-integer size or a kind that is not a MemoryKind, and the same
        INVALID_VALUE for a size out of range)."""
        n = _integer(nbytes)
        if n is None:
            why = f"nbytes must be an integer, not {type(nbytes).__name__} ({nbytes!r:.80})"
        elif n < 1 or n > _SIZE_MAX:
            why = f"nbytes={n} is out of range (1..{_SIZE_MAX})"
        elif not isinstance(kind, MemoryKind):
            why = f"kind must be a MemoryKind, not {type(kind).__name__} ({kind!r:.80})"
        else:
            return n
        return Error(ErrorKind.INVALID_VALUE, f"{function}: {why}", backend=self.kind.name, function=function)

    def _checked_alloc(self, nbytes: int, kind: MemoryKind, alloc: Callable[[int, MemoryKind, bool], Result[A]]) -> A:
        """``alloc`` for a backend whose ``_alloc(nbytes, kind, tracked)`` does the work: the size, the device
        and the kind checked first; the allocation tracked (released on drop)."""
        if type(nbytes) is not int or nbytes <= 0 or nbytes > _SIZE_MAX:
            nbytes = check_size(nbytes, "nbytes", "Device.alloc", self.kind)
        if self._closed:
            raise self._closed_error("Device.alloc")
        if not isinstance(kind, MemoryKind):
            raise TypeError(f"Device.alloc: kind must be a MemoryKind, not {type(kind).__name__} ({kind!r})")
        r = alloc(nbytes, kind, True)
        if isinstance(r, Error):
            raise r
        return r

    def memory_pool(self) -> MemoryPool:
        """The device's memory pool: one per device, made on first use, trimmed by :meth:`close`.

        Returns:
            The device's :class:`MemoryPool` (DEVICE memory, stream-ordered; see the class).

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` after :meth:`close` (CUDA/HIP; elsewhere the pool's ``alloc``
                raises it).

        Backends:
            All.  CUDA/HIP: on the driver's stream-ordered allocator (``cuMemPoolCreate``/``hipMemPoolCreate``)
            where the device supports memory pools, else the core's caching pool; OpenCL, Metal, QNN: the core's
            caching pool over :meth:`alloc`.
        """
        pool = getattr(self, "_pool", None)
        if pool is None:
            pool = MemoryPool(self)
            self._pool = pool
        return pool

    def create_stream(self) -> Stream:
        """Create a stream: an in-order queue of copies, fills and launches on this device.

        Returns:
            The new :class:`Stream` (released when dropped).

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` after :meth:`close`; the vendor's error where creating the queue
                fails (``OUT_OF_MEMORY`` ...).

        Backends:
            All.  OpenCL: a command queue; CUDA/HIP: ``cuStreamCreate``/``hipStreamCreate``; Metal: an
            ``MTLCommandQueue``; QNN: a graph executor (synchronous where the library has no asynchronous
            execution, as on the x86 HTP emulator).
        """
        raise unsupported(self.kind, "Device.create_stream")

    def _live_streams(self) -> list[Stream]:
        """The streams of this device still alive (what a device-wide fence waits for); backends keep them in
        ``_streams``, a WeakSet."""
        return _alive(getattr(self, "_streams", None))

    def load_module(self, source_or_binary: str | bytes, *, options: Sequence[str] = (),
                    defines: Mapping[str, Any] | None = None, include_dirs: Sequence[str | os.PathLike[str]] = (),
                    name_expressions: Sequence[str] = (), cache: bool = True) -> Module:
        """Load device code (source to compile, or a compiled image) as a :class:`Module`.

        Where the backend keeps one (NVRTC, OpenCL), the compiled artifact comes from the on-disk kernel cache
        (``kernel_cache``; ``cache=False`` or ``IRONACCEL_CACHE=0`` skips it) and ``Module.from_cache`` says so.
        A compiler's output on success (NVRTC, OpenCL) is issued as a :class:`CompilerWarning` and kept in
        ``Module.build_log``.

        Args:
            source_or_binary: source text (``str``, or ``bytes`` of source) or a compiled image (``bytes``), as
                the backend takes them (see Backends).
            options: the compiler's own flags (``["-cl-fast-relaxed-math"]``, ``["-use_fast_math"]``).
            defines: macros: ``{"N": 4, "FAST": None}`` -> ``-DN=4 -DFAST``.
            include_dirs: directories for ``#include`` (``-I``), paths or path-like objects.
            name_expressions: NVRTC/hiprtc template instantiations (``"axpy<float>"``), looked up after compiling
                so that ``module.kernel("axpy<float>")`` finds the lowered name.
            cache: use the kernel cache (default True).

        Returns:
            The loaded :class:`Module`; :meth:`Module.kernel` gets its kernels.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for bad option types (before any vendor call) or a NUL character
                inside the source; ``ErrorKind.COMPILE_FAILED`` when the compiler refuses the source or an option
                (the message holds its log); ``ErrorKind.UNSUPPORTED`` for input or options the backend cannot
                take (see Backends); ``ErrorKind.INVALID_HANDLE`` after :meth:`close`.

        Backends:
            OpenCL: OpenCL C source, cached as the program binary; ``name_expressions`` ``UNSUPPORTED``.
            CUDA: CUDA C++ source (NVRTC, cached), PTX, cubin (ELF) or fatbin; options with an image
            ``UNSUPPORTED``.  HIP: code objects (ELF, offload bundles).  Metal: Metal Shading Language source
            (``str``) only; any compile option, and metallib bytes, ``UNSUPPORTED``; no kernel cache.  QNN: a
            context binary (bytes); any compile option ``UNSUPPORTED``; nothing is compiled.
        """
        raise unsupported(self.kind, "Device.load_module")

    def from_dlpack(self, obj: Any, *, stream: Any = None) -> Allocation:
        """Import ``obj``'s memory as an allocation of this device, without a copy.

        The producer is kept alive until the allocation is freed or dropped (then its deleter runs, once).

        Args:
            obj: anything with ``__dlpack__`` and ``__dlpack_device__``: a numpy array, a view of ours, a
                CuPy/PyTorch tensor.
            stream: (CUDA/HIP) the stream of this device that will use the memory: a :class:`Stream`, an object
                with ``__cuda_stream__`` or a handle, per the DLPack protocol; the producer orders its work
                before it.  None: the producer synchronises.

        Returns:
            An :class:`Allocation` over the tensor's memory; ``.dtype`` and ``.shape`` say what it holds.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for an object without DLPack, memory of another device, a
                read-only or non-contiguous tensor; ``ErrorKind.UNSUPPORTED`` where the backend cannot use
                foreign memory of that kind; ``ErrorKind.INVALID_HANDLE`` after :meth:`close`.

        Backends:
            CUDA: device memory of this device, pinned (``kDLCUDAHost``) and managed memory; HIP: device and
            pinned memory; pageable host memory (``kDLCPU``) is ``UNSUPPORTED`` on both (copy it in).  QNN:
            host memory (a numpy array), bound as client buffers.  OpenCL and Metal: ``UNSUPPORTED`` (a buffer
            over foreign memory is not wrapped: copy it in with :meth:`Stream.copy_from_host`).
        """
        from . import dlpack

        what = "Device.from_dlpack"
        self._check_open(what)
        probe = getattr(obj, "__dlpack_device__", None)
        if probe is None:
            raise Error(ErrorKind.INVALID_VALUE, f"{what}: {type(obj).__name__} does not export DLPack",
                        backend=self.kind.name, function=what)
        dev = tuple(probe())
        kind = self._import_kind((int(dev[0]), int(dev[1])), what)
        imp = dlpack.dlpack_of(obj, self._consumer_stream(stream, what), what, self.kind.name)
        return self._adopt(imp, kind, what)

    def from_cuda_array_interface(self, obj: Any, *, stream: Any = None) -> Allocation:
        """Import ``obj.__cuda_array_interface__`` (v2/v3) memory as a DEVICE allocation, without a copy.

        The memory is trusted to be this device's (the interface does not say which device it is on).

        Args:
            obj: an object with ``__cuda_array_interface__`` (a CuPy array, a Numba device array, a torch CUDA
                tensor).
            stream: this device's stream that will use the memory: the producer's stream (v3) is ordered
                before it with an event; None: the producer's stream is synchronised.

        Returns:
            A DEVICE :class:`Allocation` over the memory; ``.dtype`` and ``.shape`` say what it holds.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for a missing, malformed, masked or non-contiguous interface;
                ``ErrorKind.UNSUPPORTED`` on a backend without the interface; ``ErrorKind.INVALID_HANDLE``
                after :meth:`close`.

        Backends:
            CUDA only; HIP, OpenCL, Metal, QNN: ``UNSUPPORTED`` (use :meth:`from_dlpack`).
        """
        raise unsupported(self.kind, "Device.from_cuda_array_interface")

    def import_ipc(self, handle: IpcHandle) -> Allocation:
        """Open device memory another process exported (:meth:`Allocation.export_ipc`) as a DEVICE allocation.

        ``free()`` (or dropping it) closes the mapping, never the memory, which stays the exporter's.

        Args:
            handle: the :class:`IpcHandle` the exporting process sent.

        Returns:
            A DEVICE :class:`Allocation` of this device over the exporter's memory (its ``.ipc_handle`` is
            ``handle``).

        Raises:
            TypeError: ``handle`` is not an :class:`IpcHandle`.
            Error: ``ErrorKind.INVALID_VALUE`` for a handle of another backend, of the wrong size, or made by
                this very process (the vendors refuse it: use the allocation); ``ErrorKind.UNSUPPORTED`` on a
                backend without IPC; the vendor's error where opening fails; ``ErrorKind.INVALID_HANDLE`` after
                :meth:`close`.

        Backends:
            CUDA (``cuIpcOpenMemHandle``), HIP (``hipIpcOpenMemHandle``); OpenCL, Metal, QNN: ``UNSUPPORTED``.
        """
        raise unsupported(self.kind, "Device.import_ipc")

    def _import_kind(self, device: tuple[int, int], what: str) -> MemoryKind:
        """The MemoryKind an imported tensor on DLPack ``device`` becomes here, or raise (backends override)."""
        raise Error(ErrorKind.UNSUPPORTED, f"{what}: the {self.kind.name} backend cannot use foreign memory",
                    backend=self.kind.name, function=what)

    def _consumer_stream(self, stream: Any, what: str) -> Any:
        """The ``stream`` argument passed to a producer's ``__dlpack__`` (backends with streams override)."""
        return None

    def _import_memory(self, imp: Any, kind: MemoryKind) -> Allocation:
        raise unsupported(self.kind, "Device.from_dlpack")

    def _adopt(self, imp: Any, kind: MemoryKind, what: str) -> Allocation:
        """An allocation over an imported tensor (its deleter run on free or drop); INVALID_VALUE (the deleter
        run now) for read-only memory."""
        try:
            if imp.read_only:
                raise Error(ErrorKind.INVALID_VALUE, f"{what}: the tensor is read-only (kernels would write it)",
                            backend=self.kind.name, function=what)
            a = self._import_memory(imp, kind)
        except BaseException:
            imp.release()
            raise
        a.dtype = imp.dtype
        a.shape = imp.shape
        return a

    def synchronize(self) -> None:
        """Wait until all work enqueued on every stream of this device has completed.

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` after :meth:`close`; the error of failed work (CUDA/HIP:
                ``LAUNCH_FAILED`` for a kernel that faulted, the vendor's error otherwise).

        Backends:
            All.  CUDA/HIP: ``cuCtxSynchronize``/``hipDeviceSynchronize``; OpenCL, Metal, QNN: each live stream
            synchronised.
        """
        raise unsupported(self.kind, "Device.synchronize")

    def close(self) -> None:
        """Wait for the device's work, release its pooled memory and its context reference.

        Later use of the device or anything made from it raises ``INVALID_HANDLE`` (see the class docstring).
        Idempotent; leaving ``with device:`` calls it.

        Raises:
            Error: the error of the device's failed work (as :meth:`synchronize`); the device is closed all the
                same.

        Backends:
            All.
        """
        if self._closed:
            return
        try:
            try:
                self.synchronize()
            except Error as e:
                if e.kind is not ErrorKind.UNSUPPORTED:
                    raise
            pool = getattr(self, "_pool", None)
            if pool is not None:
                pool.trim()
        finally:
            self._closed = True
            self._close()

    def _close(self) -> None:
        """Backends: give up the device's own native references (called once, by ``close``)."""

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _alive(streams: weakref.WeakSet[Any] | None) -> list[Any]:
    """The live members of a WeakSet, read through its references (``list(weakset)`` costs ~5x as much)."""
    if streams is None:
        return []
    refs: set[weakref.ref[Any]] = streams.data  # type: ignore[attr-defined]
    return [s for r in list(refs) if (s := r()) is not None]


class Allocation:
    """Memory on a device.  Checked ``free`` detects double frees; a dropped allocation is released.

    Release-on-drop costs nothing when allocating: a *tracked* allocation (``_track()``, or a backend
    constructor setting ``_tracked``) that is dropped unfreed is released by ``__del__`` (through the
    callable given to ``_track``, else ``_release``).  ``_finalizer`` is a ``weakref.finalize``-like view of
    that (``alive``, ``detach()``, calling it), made on demand; ``None`` for an untracked allocation.

    DLPack is a backend's to export: one that does defines ``__dlpack__`` and ``__dlpack_device__`` together
    (CUDA, ROCm: a 1-D uint8 legacy capsule); this base class defines neither, so a consumer that probes
    ``__dlpack_device__`` never finds it on an allocation that cannot export (OpenCL, pooled blocks of the
    caching pool).  Typed, strided exports (versioned DLPack 1.x capsules) are made by :meth:`view`, on every
    backend whose memory a consumer can address.

    Made by :meth:`Device.alloc` (or ``alloc_unchecked``, :meth:`MemoryPool.alloc`, :meth:`Device.from_dlpack`,
    :meth:`Device.import_ipc`); ``nbytes``, ``kind`` (:class:`MemoryKind`) and ``device`` say what it is.
    ``alloc[start:stop]`` is a slice sharing its memory.  A context manager that frees it on exit.  It does not
    pickle (``TypeError`` saying how to share it).

    Backends:
        All: ``OpenCLAllocation`` (a ``cl_mem``), ``CudaAllocation``/``HipAllocation`` (``.ptr``, ``.dptr``),
        ``MetalAllocation`` (an ``MTLBuffer``), ``QnnAllocation`` (host memory bound as a client buffer).
    """

    def __reduce__(self) -> Any:  # (a driver handle of this process: no pickle, no copy.copy)
        raise _not_picklable(self, "Allocation")

    nbytes: int
    kind: MemoryKind
    device: Device
    dtype: DType | None = None  # what an imported tensor holds (Device.from_dlpack); None for raw memory
    shape: tuple[int, ...] | None = None
    _freed: bool = False
    _tracked: bool = False  # release on drop (``__del__``) unless freed
    _drop: Callable[[], object] | None = None  # what releases it on drop; None: ``_release``

    def _release(self) -> Error | None:
        """Free the vendor object; return the Error instead of raising (backends override)."""
        raise unsupported(self.device.kind, "Allocation.free")

    def _track(self, release: Callable[[], object] | None = None) -> None:
        """Release the memory (``release()``, or ``_release()``) if the allocation is dropped unfreed."""
        if release is not None:
            self._drop = release
        self._tracked = True

    def __del__(self) -> None:
        if self._tracked and not self._freed:
            self._freed = True
            drop = self._drop
            if drop is not None:
                drop()
            else:
                self._release()

    @property
    def _finalizer(self) -> _DropFinalizer | None:
        return _DropFinalizer(self) if self._tracked else None

    @_finalizer.setter
    def _finalizer(self, fin: weakref.finalize | None) -> None:  # type: ignore[type-arg]
        """Compatibility: ``None`` untracks; a ``weakref.finalize`` is adopted (detached, run by ``__del__``)."""
        if fin is None:
            self._tracked = False
            return
        info = fin.detach()
        if info is not None:
            _, func, args, kwargs = info
            self._track(lambda: func(*args, **kwargs))

    # host views: host-visible memory (pinned, unified/shared) read and written by Python without a copy
    _views: list[weakref.ref[Any]] | None = None  # the exported views still alive (free() refuses while any is)

    def _host_address(self) -> int | None:
        """The host address of the bytes where this allocation's kind is host-visible; None: device memory
        (backends override)."""
        return None

    def host_view(self) -> memoryview:
        """A writable byte view of host-visible memory, without a copy.

        ``np.asarray(view)`` or ``np.frombuffer(view, dtype)`` is a numpy view of it.  The view keeps the
        allocation alive, and :meth:`free` refuses (``INVALID_VALUE``) while one is exported
        (``memoryview.release()`` or dropping it ends that).  Access it only when no queued work uses the memory
        (:meth:`Stream.synchronize` first).

        Returns:
            A writable ``memoryview`` of format ``"B"`` over the allocation's ``nbytes``.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for memory that is not host-visible (DEVICE memory);
                ``ErrorKind.INVALID_HANDLE`` once freed or after ``Device.close``.

        Backends:
            OpenCL: ``UNIFIED`` (the SVM memory itself), ``HOST_PINNED`` and ``HOST`` (mapped with
            ``clEnqueueMapBuffer`` until the view is released: release it before a stream uses the buffer).
            CUDA/HIP: ``HOST_PINNED``, ``HOST``, ``UNIFIED``.  Metal: ``UNIFIED`` (shared storage).  QNN: every
            kind (client buffers are host memory).
        """
        what = "Allocation.host_view"
        self._check_live(what)
        addr = self._host_address()
        if addr is None:
            raise Error(ErrorKind.INVALID_VALUE, f"{what}: {self!r} is device memory ({self.kind.name}), not "
                        "host-visible: allocate MemoryKind.HOST_PINNED or UNIFIED for a host view",
                        backend=self.device.kind.name, function=what)
        if self.nbytes == 0:
            return memoryview(b"").cast("B")[:0]
        arr = (ctypes.c_char * self.nbytes).from_address(addr)
        arr._allocation = self  # type: ignore[attr-defined]  # (the view keeps the memory's owner alive)
        views = [r for r in (self._views or ()) if r() is not None]
        views.append(weakref.ref(arr))
        self._views = views
        return memoryview(arr).cast("B")

    # typed views and DLPack (ironaccelerator_runtime.dlpack)
    def _dlpack_device(self) -> tuple[int, int] | None:
        """The DLPack device of this allocation's memory for a view's export, or None where no consumer could
        address it (backends override): host-visible memory is ``kDLCPU``."""
        from .dlpack import KDL_CPU

        return (KDL_CPU, 0) if self._host_address() is not None else None

    def _dlpack_address(self) -> int:
        """The address a DLPack tensor's ``data`` holds (the view's offset goes in ``byte_offset``)."""
        addr = self._host_address()
        assert addr is not None
        return addr

    def _dlpack_sync(self, view: Any, stream: Any) -> None:
        """Order the consumer's ``stream`` after the producer's work (backends with streams override): host
        memory has nothing to order (the caller synchronises before touching it, as for ``host_view``)."""

    def _view_class(self) -> type[Any]:
        from .dlpack import ArrayView, DLPackView

        return DLPackView if self._dlpack_device() is not None else ArrayView

    def view(self, dtype: Any, shape: Any, strides: Any = None, offset: int = 0, *, stream: Stream | None = None) -> Any:
        """A typed, strided view of the allocation, zero copy.

        The view keeps the allocation alive and is bounds-checked.  Where the memory has a DLPack device a
        consumer can use it exports ``__dlpack__`` (``np.from_dlpack(view)``, ``torch.from_dlpack(view)``), and on
        CUDA ``__cuda_array_interface__``.

        Args:
            dtype: the element type: a :class:`DType`, or a numpy dtype or its name (``"float32"``).
            shape: the extents, an int or a tuple of ints (>= 0).
            strides: the strides in elements, one per extent (>= 0); None: C-contiguous.
            offset: where the view starts, in bytes: a multiple of the element size.
            stream: (CUDA/HIP) the stream that produces the data, so a consumer's ``__dlpack__(stream=...)`` waits
                on an event of it rather than on the whole device.

        Returns:
            A ``DLPackView`` (exports DLPack) where the memory has a DLPack device, else an ``ArrayView``
            (``dtype``, ``shape``, ``strides``, ``offset``, ``allocation``).

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for a dtype with no :class:`DType`, a shape or strides that are
                not ints, negative, of different lengths, an offset not a multiple of the element size, or a
                view past the allocation's end; ``ErrorKind.INVALID_HANDLE`` once freed or after ``Device.close``.

        Backends:
            All.  DLPack export: host-visible memory (OpenCL ``UNIFIED``, Metal ``UNIFIED``, every QNN
            allocation: ``kDLCPU``; CUDA/HIP pinned and managed memory: ``kDLCUDAHost``/``kDLROCMHost``,
            ``kDLCUDAManaged``) and CUDA/HIP device memory (``kDLCUDA``/``kDLROCM``).  OpenCL buffers and private
            Metal buffers get a plain ``ArrayView`` (no DLPack device type numpy or others accept).
        """
        from .dlpack import make_view

        self._check_live("Allocation.view")  # (before asking the freed memory's kind for a view class)
        self.device._check_open("Allocation.view")
        view: Any = make_view(self, dtype, shape, strides, offset, stream, self._view_class())
        return view

    def _views_error(self, what: str) -> Error | None:
        """The refusal of freeing while host views are exported (a view would then read freed memory), or None."""
        from .dlpack import EXPORTER

        EXPORTER.sweep()  # (capsules dropped unconsumed, e.g. refused by their consumer, release their views)
        n = sum(1 for r in self._views or () if r() is not None)
        if not n:
            return None
        return Error(ErrorKind.INVALID_VALUE, f"{what}: {n} host view(s) of {self!r} are still exported; release "
                     "them first (memoryview.release(), or drop them and the arrays made from them)",
                     backend=self.device.kind.name, function=what)

    def free(self) -> None:
        """Release the memory now (a dropped allocation is released too: freeing is for when it matters).

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` when it was already freed (a double free is detected, never
                passed to the driver); ``ErrorKind.INVALID_VALUE`` while host views of it are exported
                (:meth:`host_view`, a numpy view of it) or for a slice (free the allocation it was cut from);
                the vendor's error where the release fails.

        Backends:
            All.  The memory is released once the work queued on it is done: CUDA/HIP ``cuMemFree`` orders after
            the device's work, OpenCL and Metal command buffers hold their own references.  A pool allocation
            (:meth:`MemoryPool.alloc`) goes back to its pool, and takes ``stream=`` (free in that stream's
            order).  An imported allocation (:meth:`Device.from_dlpack`, :meth:`Device.import_ipc`) gives the
            memory back to its producer (runs the DLPack deleter / closes the IPC mapping).
        """
        if self._freed:
            raise Error(ErrorKind.INVALID_HANDLE, f"{self!r} was already freed", backend=self.device.kind.name,
                        function="Allocation.free")
        if self._views and (e := self._views_error("Allocation.free")) is not None:
            raise e
        self._freed = True
        err = self._release()
        if err is not None:
            raise err

    def free_unchecked(self) -> Result[None]:
        """:meth:`free` that returns the :class:`Error` instead of raising it.

        Returns:
            None, or the :class:`Error` :meth:`free` would raise (``INVALID_HANDLE`` for a second free, found by
            one flag test so the vendor's handle is never released twice; ``INVALID_VALUE`` while host views are
            exported or for a slice; the vendor's error).

        Raises:
            Error: never for a bad value (the Error is returned); see docs/UNCHECKED.md.

        Backends:
            All, as :meth:`free`.
        """
        if self._freed:  # one flag test: releasing the vendor handle twice is undefined behaviour (a crash)
            return Error(ErrorKind.INVALID_HANDLE, f"{self!r} was already freed", backend=self.device.kind.name,
                         function="Allocation.free_unchecked")
        if self._views and (e := self._views_error("Allocation.free_unchecked")) is not None:
            return e
        self._freed = True
        return self._release()

    @property
    def freed(self) -> bool:
        """Whether the allocation was freed (for a slice, whether its allocation was); using it then is
        ``INVALID_HANDLE``."""
        return self._freed

    def _check_live(self, what: str) -> None:
        if self._freed:
            raise Error(ErrorKind.INVALID_HANDLE, f"{what}: {self!r} was freed", backend=self.device.kind.name,
                        function=what)

    def __enter__(self) -> Allocation:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._freed:
            self.free()

    def __repr__(self) -> str:
        state = " freed" if self._freed else ""
        return f"<{type(self).__name__} {self.nbytes} bytes {self.kind.name} on {self.device.descriptor.id}{state}>"

    def export_ipc(self) -> IpcHandle:
        """A handle another process opens with :meth:`Device.import_ipc` to use this DEVICE memory without a copy.

        Keep this allocation alive while importers use it.

        Returns:
            The :class:`IpcHandle` (picklable; send it through a pipe, a queue or a file).

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for a slice or a caching-pool block (export the whole allocation);
                ``ErrorKind.UNSUPPORTED`` for other memory kinds than DEVICE, stream-ordered pool allocations,
                imported memory, and on backends without IPC; ``ErrorKind.INVALID_HANDLE`` once freed or after
                ``Device.close``.

        Backends:
            CUDA (``cuIpcGetMemHandle``), HIP (``hipIpcGetMemHandle``); OpenCL, Metal, QNN: ``UNSUPPORTED``.
        """
        raise unsupported(self.device.kind, "Allocation.export_ipc")

    def __getitem__(self, key: slice) -> Allocation:
        """``alloc[start:stop]``: bytes ``start`` to ``stop`` of the allocation (step 1, Python's slice rules),
        sharing its memory: usable as a kernel argument and in copies, fills and views.  The slice keeps the
        allocation alive; once the allocation is freed the slice is INVALID_HANDLE, and a slice's own ``free()`` is
        refused (free the allocation).  An empty slice is INVALID_VALUE; UNSUPPORTED where the backend cannot (see
        the README)."""
        what = "Allocation.__getitem__"
        if not isinstance(key, slice):
            raise TypeError(f"{what}: an allocation is sliced by bytes (alloc[start:stop]), not indexed by "
                            f"{type(key).__name__}")
        for part in (key.start, key.stop, key.step):
            if part is not None and _integer(part) is None:
                raise TypeError(f"{what}: slice bounds must be integers, not {type(part).__name__} ({part!r})")
        start, stop, step = key.indices(self.nbytes)
        if step != 1 or stop <= start:
            raise Error(ErrorKind.INVALID_VALUE, f"{what}: [{key.start}:{key.stop}:{key.step}] of {self.nbytes} bytes "
                        "is not a non-empty range of step 1", backend=self.device.kind.name, function=what)
        self._check_live(what)
        return self._slice(start, stop - start)

    def _slice(self, offset: int, nbytes: int) -> Allocation:
        raise unsupported(self.device.kind, "Allocation slices (alloc[start:stop])", "Allocation.__getitem__")


class AllocationSlice(Allocation):
    """Bytes ``[offset, offset + nbytes)`` of ``parent`` (``Allocation.__getitem__``); a backend sets what its
    calls read (``ptr``/``dptr`` on CUDA/HIP, ``buffer`` on OpenCL)."""

    def __init__(self, parent: Allocation, offset: int, nbytes: int) -> None:
        self.parent = parent
        self.offset = offset
        self.nbytes = nbytes
        self.device = parent.device
        self.kind = parent.kind

    _owner: Allocation | None = None  # a pool block's slice: the PooledAllocation it was cut from (it lives, and the
    # slice is live, while that allocation is not freed: the block goes to a new owner once it is)

    @property
    def _freed(self) -> bool:  # the allocation's: a slice is live while its allocation is
        owner = self._owner
        return self.parent._freed or (owner is not None and owner._freed)

    @_freed.setter
    def _freed(self, value: bool) -> None:
        raise AttributeError("a slice is freed with its allocation")

    def free(self) -> None:
        self._check_live("Allocation.free")
        raise Error(ErrorKind.INVALID_VALUE, f"Allocation.free: {self!r} shares its allocation's memory: free the "
                    "allocation", backend=self.device.kind.name, function="Allocation.free")

    def free_unchecked(self) -> Result[None]:
        return Error(ErrorKind.INVALID_VALUE, f"Allocation.free_unchecked: {self!r} shares its allocation's memory",
                     backend=self.device.kind.name, function="Allocation.free_unchecked")

    def _release(self) -> Error | None:
        return None

    def export_ipc(self) -> IpcHandle:
        self._check_live("Allocation.export_ipc")
        if type(self.parent).export_ipc is Allocation.export_ipc:  # the backend exports nothing: UNSUPPORTED
            return Allocation.export_ipc(self)
        raise Error(ErrorKind.INVALID_VALUE, f"Allocation.export_ipc: {self!r} is a slice; an IPC handle names a whole "
                    "allocation: export the allocation and slice it after import", backend=self.device.kind.name,
                    function="Allocation.export_ipc")

    def _host_address(self) -> int | None:
        a = self.parent._host_address()
        return None if a is None else a + self.offset

    def _slice(self, offset: int, nbytes: int) -> Allocation:
        s = self.parent._slice(self.offset + offset, nbytes)  # a slice of a slice: of the allocation
        if self._owner is not None:
            s._owner = self._owner  # type: ignore[attr-defined]
        return s

    def __exit__(self, *exc: object) -> None:
        pass  # (the allocation's to free)

    def __repr__(self) -> str:
        return f"<slice [{self.offset}:{self.offset + self.nbytes}] of {self.parent!r}>"


class _DropFinalizer:
    """``Allocation._finalizer``: the ``weakref.finalize`` interface over an allocation's release-on-drop."""

    __slots__ = ("_ref",)

    def __init__(self, allocation: Allocation) -> None:
        self._ref = weakref.ref(allocation)

    @property
    def alive(self) -> bool:
        """Whether the allocation will still be released on drop (not dropped, freed or detached)."""
        a = self._ref()
        return a is not None and a._tracked and not a._freed

    def detach(self) -> tuple[Allocation, Callable[[], object], tuple[()], dict[str, Any]] | None:
        """Stop releasing on drop; returns ``(allocation, release, (), {})`` if it was alive, else None."""
        a = self._ref()
        if a is None or not a._tracked or a._freed:
            return None
        a._tracked = False
        return (a, a._drop or a._release, (), {})

    def __call__(self) -> object:
        """Release now (if alive); the allocation counts as freed."""
        a = self._ref()
        if a is None or not a._tracked or a._freed:
            return None
        a._freed = True
        a._tracked = False
        return (a._drop or a._release)()


def _owner(obj: object) -> str:
    """``on <device id>`` for a repr, from ``obj.device`` (or ``obj.module.device``), if it has one."""
    dev = getattr(obj, "device", None) or getattr(getattr(obj, "module", None), "device", None)
    d = getattr(dev, "descriptor", None)
    if d is None:
        return ""
    return f" on {d.id}{' (closed)' if getattr(dev, '_closed', False) else ''}"


class Event:
    """A point in a stream's order, made by :meth:`Stream.record_event`: wait for it, poll it, time between two,
    make another stream wait for it (:meth:`Stream.wait_event`), or ``await`` it.

    ``await event`` waits (as :meth:`synchronize`) in the event loop's default executor, so the loop keeps
    running; a failure raises from the ``await``.  Events are not picklable (a driver handle of this process).

    Backends:
        CUDA/HIP: a driver event (``cuEventRecord``/``hipEventRecord``).  OpenCL: a marker
        (``clEnqueueMarkerWithWaitList``) on a profiling queue.  Metal: a command buffer that signals the stream's
        ``MTLSharedEvent``.  QNN: a **host clock** reading taken after the stream was synchronized (QNN executes
        synchronously here), so it is always complete.
    """

    def __reduce__(self) -> Any:  # (a driver handle of this process: no pickle, no copy.copy)
        raise _not_picklable(self, "Event")

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{_owner(self)}>"

    def synchronize(self) -> None:
        """Block until the work queued before this event is complete.

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` when the event's device was closed; the failure of the work
                before the event, where the vendor reports it here (CUDA/HIP and OpenCL: the driver's status,
                e.g. ``LAUNCH_FAILED``; Metal: ``LAUNCH_FAILED`` naming the failed command buffers).

        Backends:
            All.  QNN: returns at once (the event was recorded after its work completed).
        """
        raise unsupported(_kind_of(self), "Event.synchronize")

    def query(self) -> bool:
        """Whether the work queued before this event is complete, without waiting.

        Returns:
            True when complete, False while work before it is pending (never ``NOT_READY``).

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` when the event's device was closed; CUDA/HIP and OpenCL: the
                vendor's failure status of the query (other than "not ready").

        Backends:
            All.  QNN: always True.
        """
        raise unsupported(_kind_of(self), "Event.query")

    def elapsed_ms(self, end: Event) -> float:
        """Milliseconds from this event to ``end``.

        One behaviour on every backend: a pending event is waited for (both events are synchronized first, as
        :meth:`synchronize` does, whose failures it raises), never ``NOT_READY``.

        Args:
            end: a later event of the same backend (of any of its streams).

        Returns:
            The time between the two events in milliseconds, a float.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` when ``end`` is not an event of this backend (None, another
                backend's event); ``ErrorKind.INVALID_HANDLE`` when the device was closed (every backend but
                QNN); what :meth:`synchronize` raises; ``ErrorKind.UNSUPPORTED`` on a backend without events.

        Backends:
            All, each with its own clock.  CUDA/HIP: ``cuEventElapsedTime``/``hipEventElapsedTime`` (device
            clock).  OpenCL: the markers' ``CL_PROFILING_COMMAND_END`` (device clock).  Metal: the command
            buffers' ``GPUEndTime``.  QNN: host wall time (``time.perf_counter_ns``) between the two records.
        """
        raise unsupported(_kind_of(self), "Event.elapsed_ms")

    def _wait_for_callback(self) -> None:
        """Wait, for a host callback (``Stream.add_callback``), until the work before the event is over.  A failure
        of that work raises here where waiting reports it (``synchronize``, the default); a backend whose stream
        keeps its failures for ``Stream.synchronize`` waits without taking them (Metal)."""
        self.synchronize()

    def __await__(self) -> Any:
        """``await event``: the wait (``synchronize``) runs in the event loop's default executor, so the loop keeps
        running; a failure raises from the ``await``."""
        import asyncio

        return asyncio.get_running_loop().run_in_executor(None, self.synchronize).__await__()


@dataclass(frozen=True, slots=True)
class KernelAttributes:
    """What the compiler made of a kernel, as its vendor reports it (:attr:`Kernel.attributes`); a field is None
    where this vendor does not report it.  A frozen value: equal each time it is read.

    Attributes:
        max_threads_per_block: the most threads one block (work-group, threadgroup) of this kernel may have.
        preferred_multiple: block sizes that are a multiple of it run best (warp size, OpenCL's preferred
            work-group size multiple, Metal's thread execution width).
        registers: registers per thread (CUDA/HIP).
        static_shared_mem: bytes of shared / local / threadgroup memory the code declares (CUDA/HIP, OpenCL).
        local_mem: bytes of private (local, spill) memory per thread (CUDA/HIP, OpenCL).
        const_mem: bytes of constant memory (CUDA/HIP).
        max_dynamic_shared_mem: the most dynamic shared memory a launch may add (CUDA/HIP).

    Backends:
        CUDA/HIP: every field (``cuFuncGetAttribute``/``hipFuncGetAttribute``; ``preferred_multiple`` the device's
        warp size).  OpenCL: ``clGetKernelWorkGroupInfo`` (no registers, constant memory or dynamic limit).
        Metal: ``maxTotalThreadsPerThreadgroup`` and ``threadExecutionWidth`` only.  QNN: none
        (:attr:`Kernel.attributes` is ``UNSUPPORTED``).
    """

    max_threads_per_block: int  # the most threads one block (work-group, threadgroup) of it may have
    preferred_multiple: int | None = None  # block sizes that are a multiple run best: warp, SIMD or execution width
    registers: int | None = None  # per thread
    static_shared_mem: int | None = None  # bytes of shared / local / threadgroup memory the code declares
    local_mem: int | None = None  # bytes of private (local, spill) memory per thread
    const_mem: int | None = None  # bytes of constant memory
    max_dynamic_shared_mem: int | None = None  # the most dynamic shared memory a launch may add


class Graph:
    """Work recorded by :meth:`Stream.capture`, instantiated: :meth:`launch` replays it; :meth:`close` releases
    it (also on drop, and at the end of a ``with graph:`` block).  Not picklable.

    Backends:
        CUDA/HIP only (stream capture, ``cuGraphInstantiate``/``hipGraphInstantiateWithFlags``); every other backend's
        :meth:`Stream.capture` is ``UNSUPPORTED``, so no Graph exists there.
    """

    def __reduce__(self) -> Any:  # (a driver handle of this process: no pickle, no copy.copy)
        raise _not_picklable(self, "Graph")

    def launch(self, stream: Stream) -> None:
        """Replay the recorded work on ``stream``, in its order (asynchronous, as the recorded work was).

        Args:
            stream: a stream of the graph's device.  CUDA/HIP also take None (default there): the stream it was
                captured on.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` when ``stream`` is not a stream of the graph's device;
                ``ErrorKind.INVALID_HANDLE`` when the graph was closed (or its capture failed) or the device was
                closed; the driver's status of ``cuGraphLaunch``/``hipGraphLaunch``; ``ErrorKind.UNSUPPORTED``
                on a backend without graphs.

        Backends:
            CUDA/HIP (``cuGraphLaunch``/``hipGraphLaunch``).  Elsewhere ``UNSUPPORTED``.
        """
        raise unsupported(_kind_of(self), "Graph.launch")

    def close(self) -> None:
        """Release the graph and its instantiation now (idempotent; dropping the graph does the same).

        Raises:
            Error: never; a second close does nothing.

        Backends:
            CUDA/HIP (``cuGraphExecDestroy`` and ``cuGraphDestroy``, HIP's likewise); the base class does
            nothing.
        """

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{_owner(self)}>"


class Kernel:
    """A device function ready to launch, from :meth:`Module.kernel`; launch it with
    ``stream.launch(KernelLaunch(kernel, LaunchDims(...), args))``.  Not picklable.

    Attributes:
        name: the name it was looked up by.
        num_args: how many arguments a launch must pass, or None where the backend cannot say (then the count
            is not checked): CUDA with a driver before 12.4 (no ``cuFuncGetParamInfo``), HIP always (no
            parameter introspection), Metal when the kernel's signature could not be read from its source.

    Backends:
        CUDA/HIP: a ``CUfunction``/``hipFunction_t``.  OpenCL: a ``cl_kernel`` (one per Kernel object, its
        arguments cached between launches).  Metal: an ``MTLComputePipelineState``.  QNN: a graph of a context
        binary (``QnnGraph_retrieve``; its tensors are the arguments).
    """

    def __reduce__(self) -> Any:  # (a driver handle of this process: no pickle, no copy.copy)
        raise _not_picklable(self, "Kernel")

    name: str
    num_args: int | None = None

    @property
    def attributes(self) -> KernelAttributes:
        """What the compiler made of the kernel, a :class:`KernelAttributes` (``UNSUPPORTED`` on QNN, whose graphs
        report none; see :class:`KernelAttributes` for the fields each vendor fills)."""
        raise unsupported(_kind_of(self), "Kernel.attributes")

    def max_active_blocks(self, block_threads: int, dynamic_shared_mem: int = 0) -> int:
        """Occupancy: how many blocks of ``block_threads`` threads can be resident on one multiprocessor at once.

        Args:
            block_threads: threads per block, an integer in 1..2**31-1.
            dynamic_shared_mem: bytes of dynamic shared memory per block (``LaunchDims.shared_mem``), >= 0.

        Returns:
            The number of resident blocks per multiprocessor.

        Raises:
            TypeError: ``block_threads`` or ``dynamic_shared_mem`` is not an integer.
            Error: ``ErrorKind.INVALID_VALUE`` when ``block_threads`` < 1 or > 2**31-1, or
                ``dynamic_shared_mem`` < 0; the driver's status of the occupancy call; ``ErrorKind.UNSUPPORTED``
                on a backend without an occupancy query.

        Backends:
            CUDA (``cuOccupancyMaxActiveBlocksPerMultiprocessor``) and HIP
            (``hipModuleOccupancyMaxActiveBlocksPerMultiprocessor``).  OpenCL, Metal, QNN: ``UNSUPPORTED``.
        """
        raise unsupported(_kind_of(self), "Kernel.max_active_blocks")

    def __repr__(self) -> str:
        n = getattr(self, "num_args", None)
        args = "" if n is None else f" ({n} argument{'s' if n != 1 else ''})"
        return f"<{type(self).__name__} {getattr(self, 'name', '?')!r}{args}{_owner(self)}>"


class Module:
    """Compiled device code, from :meth:`Device.load_module`; :meth:`kernel` looks up its kernels.  Not picklable.

    Attributes:
        from_cache: whether it was loaded from the on-disk kernel cache (no compile).
        build_log: what the compiler said about a build that succeeded ("" when nothing; a non-empty log is also
            issued as a :class:`CompilerWarning`).  A module loaded from the kernel cache has the log its
            compile wrote, kept with the cache entry, and warns the same (a warm load says what a cold one said).

    Backends:
        CUDA/HIP: a ``CUmodule``/``hipModule_t`` (CUDA: from PTX, a cubin or CUDA C source compiled by NVRTC;
        HIP: from a code object, hipRTC is not bound).  OpenCL: a ``cl_program`` built from source.  Metal: an ``MTLLibrary`` from Metal Shading
        Language source.  QNN: a context of a context binary (``QnnContext_createFromBinary``), its graphs the
        kernels.
    """

    def __reduce__(self) -> Any:  # (a driver handle of this process: no pickle, no copy.copy)
        raise _not_picklable(self, "Module")

    from_cache: bool = False
    build_log: str = ""

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{_owner(self)}>"

    def kernel(self, name: str) -> Kernel:
        """The kernel (device function, QNN graph) called ``name`` in this module.

        Args:
            name: the kernel's name: its symbol (an ``extern "C"`` name for C++), or on CUDA/HIP a name
                expression given to ``load_module(name_expressions=...)`` such as ``"axpy<float>"``; on QNN a
                graph name (``QnnModule.graph_names``).

        Returns:
            A new :class:`Kernel` (each call makes one; OpenCL kernels keep their own argument state).

        Raises:
            TypeError: ``name`` is not a str.
            Error: ``ErrorKind.INVALID_VALUE`` when the module has no kernel of that name, or the name holds a
                NUL character or is not valid UTF-8 (every backend alike); ``ErrorKind.INVALID_HANDLE`` when the
                device was closed (QNN: also when the module was closed); Metal: the kind of the pipeline
                compiler's ``NSError``; the vendor's status otherwise; ``ErrorKind.UNSUPPORTED`` on a backend
                without modules.

        Backends:
            All.  CUDA/HIP: ``cuModuleGetFunction``/``hipModuleGetFunction``.  OpenCL: ``clCreateKernel``.
            Metal: ``newFunctionWithName:`` and ``newComputePipelineStateWithFunction:error:``.  QNN:
            ``QnnGraph_retrieve``.
        """
        raise unsupported(_kind_of(self), "Module.kernel")


_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__))
_LOG_LINES = 40  # of a long compiler log, what the warning shows (Module.build_log keeps all)


def compiler_log(module: Module, log: str | bytes, backend: str, *, cached: bool = False) -> None:
    """Keep a successful build's compiler output as ``module.build_log`` and, if there is any, issue it as a
    :class:`CompilerWarning` attributed to the caller of ``load_module`` (the first frame outside this package)."""
    if isinstance(log, bytes):
        log = log.decode("utf-8", "replace")
    log = log.rstrip("\0").strip("\n")
    module.build_log = log
    if not log.strip():
        return
    import sys
    import warnings

    import ironaccelerator._core as core

    ours = (_RUNTIME_DIR + os.sep, os.path.dirname(os.path.abspath(core.__file__)) + os.sep)
    level, frame = 2, sys._getframe(1)  # stacklevel 2: compiler_log's caller
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(ours):
        frame, level = frame.f_back, level + 1
    lines = log.splitlines()
    shown = "\n".join(lines[:_LOG_LINES]) + (f"\n[... {len(lines) - _LOG_LINES} more lines in Module.build_log]"
                                               if len(lines) > _LOG_LINES else "")
    where = " (loaded from the kernel cache; the log of its compile)" if cached else ""
    warnings.warn(f"{backend} compiler output for a module that built{where}:\n{shown}", CompilerWarning,
                  stacklevel=level)


class Stream:
    """An in-order queue of copies, fills and launches on one device, from :meth:`Device.create_stream`.

    Work is enqueued and runs in the order it was enqueued on this stream; :meth:`synchronize` waits for it, an
    event (:meth:`record_event`) marks a point in it, and another stream can wait for that event
    (:meth:`wait_event`).  Host buffers given to asynchronous copies are kept alive by the stream until work after
    them is seen complete; do not change a source (or read a destination) before then.  Not picklable.

    Attributes:
        device: the :class:`Device` the stream belongs to.

    Backends:
        CUDA/HIP: a non-blocking driver stream (``CU_STREAM_NON_BLOCKING``); a CUDA stream also has
        ``__cuda_stream__`` for cuda.core, CuPy and others.  OpenCL: an in-order command queue with profiling
        enabled.  Metal: an ``MTLCommandQueue``, each operation a committed command buffer.  QNN: graphs execute
        synchronously (the x86 HTP has no asynchronous execution) and copies are host copies: every operation is
        complete when it returns.
    """

    def __reduce__(self) -> Any:  # (a driver handle of this process: no pickle, no copy.copy)
        raise _not_picklable(self, "Stream")

    device: Device

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{_owner(self)}>"

    # Copies take an optional byte count and offsets on both sides: ``nbytes`` None copies the host buffer's bytes
    # after its offset (host copies, which must fit in the allocation after its offset) or, device to device, the
    # source's bytes after its offset, which must then be exactly the destination's after its offset (pass nbytes
    # to copy part of either).  A range past either end is INVALID_VALUE before any call.
    def copy_from_host(self, dst: Allocation, src: Any, nbytes: int | None = None, *, dst_offset: int = 0,
                       src_offset: int = 0) -> None:
        """Copy bytes of a host buffer into an allocation, in stream order.

        Args:
            dst: the destination, a live :class:`Allocation` (a slice or pool block included) of this stream's
                device.
            src: any C-contiguous buffer-protocol object (numpy array, bytes, bytearray, memoryview); not a numpy
                scalar or 0-d array, nor an array of Python objects.
            nbytes: how many bytes to copy; None (default): the host buffer's bytes after ``src_offset``, which
                must fit in ``dst`` after ``dst_offset``.
            dst_offset: byte offset in ``dst``, >= 0.
            src_offset: byte offset in ``src``, >= 0.

        Raises:
            TypeError: ``nbytes`` or an offset is not an integer; ``dst`` is not an allocation (Metal:
                ``INVALID_VALUE``).
            Error: ``ErrorKind.INVALID_VALUE`` when the range is past the end of either side, ``src`` is not a
                usable host buffer (no buffer protocol, not C-contiguous, a numpy scalar, Python objects), or
                ``dst`` is another device's allocation (OpenCL, Metal, QNN); ``ErrorKind.INVALID_HANDLE`` when
                ``dst`` was freed or the device closed; the vendor's status of the copy.

        Backends:
            All.  CUDA/HIP: ``cuMemcpyHtoDAsync``/``hipMemcpyHtoDAsync``; OpenCL: a non-blocking
            ``clEnqueueWriteBuffer``; Metal: the bytes are staged into a shared buffer at the call (``src`` may
            change after it returns), then blitted; QNN: a host copy, done when it returns.
        """
        raise unsupported(self.device.kind, "Stream.copy_from_host")

    def copy_to_host(self, dst: Any, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
                     src_offset: int = 0) -> None:
        """Copy bytes of an allocation into a host buffer, in stream order.

        The bytes are in ``dst`` once the stream (or an event recorded after the copy) is synchronized.

        Args:
            dst: a writable, C-contiguous buffer-protocol object (numpy array, bytearray, writable memoryview).
            src: the source, a live :class:`Allocation` (a slice or pool block included) of this stream's device.
            nbytes: how many bytes to copy; None (default): the host buffer's bytes after ``dst_offset``, which
                ``src`` must hold after ``src_offset``.
            dst_offset: byte offset in ``dst``, >= 0.
            src_offset: byte offset in ``src``, >= 0.

        Raises:
            TypeError: ``nbytes`` or an offset is not an integer; ``src`` is not an allocation (Metal:
                ``INVALID_VALUE``).
            Error: ``ErrorKind.INVALID_VALUE`` when the range is past the end of either side, ``dst`` is
                read-only (``bytes``) or not a usable host buffer, or ``src`` is another device's allocation
                (OpenCL, Metal, QNN); ``ErrorKind.INVALID_HANDLE`` when ``src`` was freed or the device closed;
                the vendor's status of the copy (Metal: the failure of earlier work, as :meth:`synchronize`).

        Backends:
            All.  CUDA/HIP: ``cuMemcpyDtoHAsync``/``hipMemcpyDtoHAsync``; OpenCL: a non-blocking
            ``clEnqueueReadBuffer``; Metal: synchronizes the stream, so the bytes are there when it returns; QNN:
            a host copy, done when it returns.
        """
        raise unsupported(self.device.kind, "Stream.copy_to_host")

    def copy(self, dst: Allocation, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
             src_offset: int = 0) -> None:
        """Copy bytes from one allocation to another on this device, in stream order.

        Args:
            dst: the destination, a live :class:`Allocation` (a slice or pool block included) of this device.
            src: the source, likewise.
            nbytes: how many bytes to copy; None (default): the source's bytes after ``src_offset``, which must
                be exactly the destination's after ``dst_offset`` (pass ``nbytes`` to copy part of either).
            dst_offset: byte offset in ``dst``, >= 0.
            src_offset: byte offset in ``src``, >= 0.

        Raises:
            TypeError: ``nbytes`` or an offset is not an integer; ``dst`` or ``src`` is not an allocation (Metal:
                ``INVALID_VALUE``).
            Error: ``ErrorKind.INVALID_VALUE`` when a range is past its end, the sizes differ without
                ``nbytes``, ``nbytes`` < 0, the two ranges overlap in one allocation (itself, its slices, a pool
                block: as memcpy's, every backend), or an allocation is another device's (OpenCL, Metal, QNN);
                ``ErrorKind.INVALID_HANDLE`` when either was freed or the device closed; the vendor's status.

        Backends:
            All.  CUDA/HIP: ``cuMemcpyDtoDAsync``/``hipMemcpyDtoDAsync``; OpenCL: ``clEnqueueCopyBuffer``; Metal:
            a blit; QNN: a host copy after the work queued before it.
        """
        raise unsupported(self.device.kind, "Stream.copy")

    def fill(self, dst: Allocation, value: int, nbytes: int | None = None, offset: int = 0, *,
             width: int = 1) -> None:
        """Set bytes of an allocation to a repeated 1-, 2- or 4-byte pattern, in stream order.

        Args:
            dst: a live :class:`Allocation` (a slice or pool block included) of this stream's device.
            value: the pattern, an unsigned integer that fits in ``width`` bytes (written little-endian).
            nbytes: how many bytes to set, a multiple of ``width``; None (default): to the end of ``dst``.
            offset: byte offset in ``dst`` where the fill starts, a multiple of ``width``.
            width: the pattern's size in bytes: 1, 2 or 4.

        Raises:
            TypeError: ``value``, ``nbytes``, ``offset`` or ``width`` is not an integer; ``dst`` is not an
                allocation (Metal: ``INVALID_VALUE``).
            Error: ``ErrorKind.INVALID_VALUE`` when ``width`` is not 1, 2 or 4, ``value`` does not fit in it, the
                range is past the end of ``dst`` or not a whole number of patterns, or ``dst`` is another device's
                allocation; ``ErrorKind.INVALID_HANDLE`` when ``dst`` was freed or the device closed;
                ``ErrorKind.UNSUPPORTED`` on Metal for a 2- or 4-byte pattern whose bytes differ.

        Backends:
            All.  CUDA/HIP: ``cuMemsetD8/D16/D32Async`` (HIP: ``hipMemsetD8/D16/D32Async``); OpenCL:
            ``clEnqueueFillBuffer``; Metal: the blit encoder's ``fillBuffer:range:value:``, which fills bytes (a
            multi-byte pattern of one repeated byte, such as 0, works); QNN: written by the CPU after the work
            queued before it.
        """
        raise unsupported(self.device.kind, "Stream.fill")

    # strided copies: each side an Allocation (or slice) or a host buffer, checked here (copy_region), the vendor
    # call made by the backend's _copy_rect
    def copy_2d(self, dst: Any, src: Any, width: int, height: int, *, dst_pitch: int | None = None,
                src_pitch: int | None = None, dst_offset: int | Sequence[int] = 0,
                src_offset: int | Sequence[int] = 0) -> None:
        """Copy ``height`` rows of ``width`` bytes, in stream order: row ``i`` from ``src_offset + i * src_pitch``
        to ``dst_offset + i * dst_pitch``.

        Host to device, device to host and device to device: each side is an allocation or a host buffer (not
        both host buffers).  A zero ``width`` or ``height`` copies nothing.

        Args:
            dst: the destination: a live :class:`Allocation` (or slice) of this device, or a writable
                C-contiguous host buffer (numpy array, bytearray, ...).
            src: the source: an allocation (or slice) of this device, or a C-contiguous host buffer.
            width: bytes per row, >= 0.
            height: rows, >= 0.
            dst_pitch: bytes from one destination row to the next, >= ``width``; None (default): ``width``
                (packed rows).
            src_pitch: likewise for the source.
            dst_offset: where the region starts in ``dst``: bytes, or an ``(x bytes, y rows)`` origin.
            src_offset: likewise for the source.

        Raises:
            TypeError: a size, pitch or offset is not an integer.
            Error: ``ErrorKind.INVALID_VALUE`` when neither side is an allocation, a row of the region lies
                outside its side, a pitch is less than the width, or a host side is not a usable (writable, for
                ``dst``) buffer; ``ErrorKind.INVALID_HANDLE`` when an allocation was freed or the device closed;
                ``ErrorKind.UNSUPPORTED`` where the vendor has no strided copy (Metal, QNN); the vendor's status.
                Every check is made before any vendor call.

        Backends:
            CUDA: ``cuMemcpy2DAsync``; HIP: ``hipMemcpyParam2DAsync``; OpenCL: ``clEnqueueCopyBufferRect``
            (device to device), ``clEnqueueWriteBufferRect``/``clEnqueueReadBufferRect`` (non-blocking).
            Metal (the blit encoder copies linear ranges) and QNN (tensors are flat client buffers):
            ``UNSUPPORTED``.
        """
        self._strided("Stream.copy_2d", dst, src, (width, height), dst_pitch, src_pitch, dst_offset, src_offset, 2)

    def copy_3d(self, dst: Any, src: Any, extent: Sequence[int], *,
                dst_pitch: int | Sequence[int] | None = None, src_pitch: int | Sequence[int] | None = None,
                dst_offset: int | Sequence[int] = 0, src_offset: int | Sequence[int] = 0) -> None:
        """Copy a box of ``extent = (width bytes, height rows, depth slices)``, in stream order; the sides as for
        :meth:`copy_2d`.  A zero extent copies nothing.

        Args:
            dst: the destination: a live :class:`Allocation` (or slice) of this device, or a writable
                C-contiguous host buffer.
            src: the source: an allocation (or slice) of this device, or a C-contiguous host buffer.
            extent: ``(width bytes, height rows, depth slices)``.
            dst_pitch: ``(row pitch, slice pitch)`` in bytes, or a row pitch (slices of ``height`` rows), or None
                (default: packed); the slice pitch must be a multiple of the row pitch.
            src_pitch: likewise for the source.
            dst_offset: where the box starts in ``dst``: bytes, or an ``(x bytes, y rows, z slices)`` origin.
            src_offset: likewise for the source.

        Raises:
            TypeError: a size, pitch or offset is not an integer.
            Error: ``ErrorKind.INVALID_VALUE`` when neither side is an allocation, ``extent`` is not three
                sizes, a row of the box lies outside its side, a pitch is too small or a slice pitch not a
                multiple of the row pitch, or a host side is not a usable buffer; ``ErrorKind.INVALID_HANDLE``
                when an allocation was freed or the device closed; ``ErrorKind.UNSUPPORTED`` on Metal and QNN;
                the vendor's status.  Every check is made before any vendor call.

        Backends:
            CUDA: ``cuMemcpy3DAsync``; HIP: ``hipDrvMemcpy3DAsync``; OpenCL: the ``clEnqueue*BufferRect`` calls.
            Metal and QNN: ``UNSUPPORTED``.
        """
        self._strided("Stream.copy_3d", dst, src, extent, dst_pitch, src_pitch, dst_offset, src_offset, 3)

    def _strided(self, function: str, dst: Any, src: Any, extent: Any, dst_pitch: Any, src_pitch: Any,
                 dst_offset: Any, src_offset: Any, dims: int) -> None:
        kind = self.device.kind
        if type(self)._copy_rect is Stream._copy_rect:  # (before checking what the backend could not use anyway)
            raise unsupported(kind, function)
        if not isinstance(dst, Allocation) and not isinstance(src, Allocation):
            raise Error(ErrorKind.INVALID_VALUE, f"{function}: dst or src must be an allocation (host to host is "
                        "numpy's)", backend=kind.name, function=function)
        sides: list[tuple[Allocation | memoryview, int]] = []
        for what, obj in (("dst", dst), ("src", src)):
            if isinstance(obj, Allocation):
                obj._check_live(function)
                sides.append((obj, obj.nbytes))
            else:
                view = host_view(obj, what == "dst", backend=kind, function=function)
                sides.append((view, view.nbytes))
        region = copy_region(sides[0][1], sides[1][1], extent, dst_pitch, src_pitch, dst_offset, src_offset, function,
                             kind, dims=dims)
        self.device._check_open(function)
        if not region.empty:
            self._copy_rect(sides[0][0], sides[1][0], region, function)

    def _copy_rect(self, dst: Allocation | memoryview, src: Allocation | memoryview, region: CopyRegion,
                   function: str) -> None:
        """Backends: enqueue a checked, non-empty strided copy; a host side is a flat byte memoryview (writable for
        ``dst``), an allocation side still to be checked as this backend's (``TypeError``/``INVALID_VALUE``)."""
        raise unsupported(self.device.kind, function)

    def prefetch(self, alloc: Allocation, to: Any = None, nbytes: int | None = None, offset: int = 0) -> None:
        """Migrate part of a ``MemoryKind.UNIFIED`` allocation to a device or the host, in stream order.

        A hint: the memory stays usable from both sides, and its contents do not change.

        Args:
            alloc: a live UNIFIED :class:`Allocation` (managed, shared virtual memory) of this backend.
            to: None (default: this stream's device), a :class:`Device` of this backend, or ``"host"``.
            nbytes: how many bytes to migrate; None (default): to the end of ``alloc``.
            offset: byte offset in ``alloc`` where the range starts.

        Raises:
            TypeError: ``alloc`` is not an allocation, or ``nbytes``/``offset`` not an integer.
            Error: ``ErrorKind.INVALID_VALUE`` when ``alloc`` is not UNIFIED memory (device and pinned memory do
                not move), ``to`` is none of the above (OpenCL: a device other than the queue's), or the range is
                past its end; ``ErrorKind.INVALID_HANDLE`` when ``alloc`` was freed or the device closed;
                ``ErrorKind.UNSUPPORTED`` where the backend (or an OpenCL device before 2.1) cannot migrate.

        Backends:
            CUDA: ``cuMemPrefetchAsync`` (a ``CUmemLocation``); HIP: ``hipMemPrefetchAsync``; OpenCL:
            ``clEnqueueSVMMigrateMem`` (OpenCL 2.1 devices, to the queue's device or the host).  Metal and QNN:
            ``UNSUPPORTED``.
        """
        raise unsupported(self.device.kind, "Stream.prefetch")

    def _prefetch_span(self, alloc: Allocation, nbytes: Any, offset: Any) -> tuple[int, int]:
        """``(offset, nbytes)`` of a prefetch: the allocation live and UNIFIED, the range inside it."""
        function, kind = "Stream.prefetch", self.device.kind
        if not isinstance(alloc, Allocation):
            raise TypeError(f"{function}: alloc must be an Allocation, not {type(alloc).__name__} ({alloc!r})")
        alloc._check_live(function)
        self.device._check_open(function)
        if alloc.kind is not MemoryKind.UNIFIED:
            raise Error(ErrorKind.INVALID_VALUE, f"{function}: {alloc!r} is {alloc.kind.name} memory; only UNIFIED "
                        "(managed, shared virtual) memory migrates", backend=kind.name, function=function)
        return check_span(alloc.nbytes, offset, nbytes, "alloc", function, kind)

    def _prefetch_to_host(self, to: Any) -> bool:
        """Whether a prefetch's ``to`` is the host (``"host"``), else it must be None or a Device (INVALID_VALUE)."""
        if isinstance(to, str) and to == "host":
            return True
        if to is None or isinstance(to, Device):
            return False
        raise Error(ErrorKind.INVALID_VALUE, f"Stream.prefetch: to must be None (this stream's device), a Device or "
                    f"'host', not {to!r}", backend=self.device.kind.name, function="Stream.prefetch")

    def launch(self, launch: KernelLaunch) -> None:
        """Enqueue one kernel launch, checked, in stream order.

        The launch is asynchronous: its failure at run time is reported by :meth:`synchronize` (or an event's).
        What each kernel parameter takes is the kernel-argument policy (``ironaccelerator_runtime.kernel_args``),
        the same on every backend.  Repeating the same :class:`KernelLaunch` object is the fast path (its checks
        and packing are cached).

        Args:
            launch: a :class:`KernelLaunch` ``(kernel, dims, args)``: a :class:`Kernel` of this stream's device,
                :class:`LaunchDims`, and one argument per kernel parameter (an :class:`Allocation` for a buffer,
                a numpy scalar, :class:`Scalar`, bytes or a Python number for a value, :class:`LocalMemory` for
                an OpenCL ``__local`` parameter).

        Raises:
            TypeError: ``launch`` is not a :class:`KernelLaunch`.
            Error: ``ErrorKind.INVALID_VALUE`` when the kernel is not one of this backend and device, the
                dimensions exceed the device's :class:`DeviceLimits` (:meth:`LaunchDims.validate`), the argument
                count is not the kernel's (``Kernel.num_args``, where known), or an argument is refused by
                the argument policy (naming its index and the kernel); ``ErrorKind.INVALID_HANDLE`` when an argument's allocation was freed or the device
                closed; ``ErrorKind.UNSUPPORTED`` for a request the backend cannot honour (``cooperative`` or
                ``cluster`` off CUDA, ``shared_mem`` off CUDA/HIP, :class:`LocalMemory` off OpenCL); the
                vendor's status of the launch call (e.g. ``LAUNCH_FAILED``).

        Backends:
            All.  CUDA/HIP: ``cuLaunchKernel``/``hipModuleLaunchKernel`` (``cuLaunchKernelEx`` with launch
            options), arguments packed in C on the compiled fast path.  OpenCL: ``clEnqueueNDRangeKernel`` with a
            3-D global size of grid x block and local size of block.  Metal: a compute command encoder
            (``dispatchThreadgroups:threadsPerThreadgroup:``) in a committed command buffer.  QNN:
            ``QnnGraph_execute`` of the graph, ``dims`` must be ``LaunchDims()`` and the arguments are the
            graph's input then output tensors, each buffer's size (and a typed argument's element type) checked
            against its tensor; it runs synchronously.
        """
        raise unsupported(self.device.kind, "Stream.launch")

    def launch_unchecked(self, launch: KernelLaunch) -> Result[None]:
        """Enqueue one kernel launch without validating its dimensions against the device's limits, returning
        the Error instead of raising it (the ``_unchecked`` contract: docs/UNCHECKED.md).

        Still refused, as returned Errors: a closed device, a kernel of another backend or device, a wrong
        argument count, every argument the kernel-argument policy refuses, dimensions the runtime cannot take,
        and requests the backend cannot honour.

        Args:
            launch: a :class:`KernelLaunch`, as for :meth:`launch`.

        Returns:
            None on success, else the :class:`Error` (the same ``ErrorKind`` :meth:`launch` raises for the same
            mistake; the driver's own status for a limit it enforces).

        Raises:
            TypeError: ``launch`` is not a :class:`KernelLaunch` (the call's own parameter of the wrong type).
                Never raises an Error for a bad value; see docs/UNCHECKED.md.

        Backends:
            All.  OpenCL: more work-items than ``DeviceLimits.max_work_items`` is still ``INVALID_VALUE`` (past
            it PoCL aborts).  Metal: a grid past ``max_grid`` or ``max_work_items``, or a threadgroup of more threads
            than the pipeline's ``maxTotalThreadsPerThreadgroup``, is still ``INVALID_VALUE``.
            CUDA/HIP: a grid, block or ``shared_mem`` past the launch function's ``unsigned int`` is
            ``INVALID_VALUE``.  QNN: any dims but ``LaunchDims()`` is still refused; the tensor-size checks of a
            re-bind are skipped.
        """
        raise unsupported(self.device.kind, "Stream.launch_unchecked")

    def record_event(self) -> Event:
        """Record an :class:`Event` after the work enqueued so far.

        Returns:
            The new event; it completes when that work has.

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` when the device was closed; the vendor's status of the record;
                QNN: the failure of the work before it (the stream is synchronized first).

        Backends:
            All.  CUDA/HIP: ``cuEventCreate`` + ``cuEventRecord`` (HIP's likewise); OpenCL:
            ``clEnqueueMarkerWithWaitList``; Metal: a command buffer that signals the stream's
            ``MTLSharedEvent``; QNN: synchronizes the stream, then reads the **host clock**.
        """
        raise unsupported(self.device.kind, "Stream.record_event")

    def wait_event(self, event: Event) -> None:
        """Make the work enqueued on this stream from now on wait until ``event`` is complete (without blocking
        the host): the way to order two streams.

        Args:
            event: an :class:`Event` of this backend, recorded on any of its streams.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` when ``event`` is not an event of this backend (Metal: of this
                device); ``ErrorKind.INVALID_HANDLE`` when the device (CUDA/HIP: either device) was closed; the
                vendor's status (OpenCL: an event of another device's context is the driver's
                ``CL_INVALID_CONTEXT``, ``INVALID_HANDLE``).

        Backends:
            All.  CUDA/HIP: ``cuStreamWaitEvent``/``hipStreamWaitEvent``; OpenCL:
            ``clEnqueueBarrierWithWaitList``; Metal: a command buffer that waits for the event's
            ``MTLSharedEvent`` value (nothing when it is this stream's own event); QNN: nothing to wait for
            (an event is recorded after its work completed).
        """
        raise unsupported(self.device.kind, "Stream.wait_event")

    def _pool_fence(self) -> Event | None:
        """For :class:`MemoryPool`: None if the work enqueued so far is known complete (a cheap test, no
        enqueue), else an event after it, submitted so that it completes without a further call (the pool
        polls it, waits for it, or makes another stream wait for it).  Backends whose ``query`` enqueues
        or waits override this."""
        return None if self.query() else self.record_event()

    def synchronize(self) -> None:
        """Block until all the work enqueued on this stream so far is complete, and report its failures.

        Raises:
            Error: the failure of asynchronous work on the stream: the vendor's status (CUDA/HIP
                ``cuStreamSynchronize``, OpenCL ``clFinish``), Metal ``LAUNCH_FAILED`` naming the failed command
                buffers, or the failure of the work queued before a host callback (:meth:`add_callback`), with
                its kind; ``ErrorKind.INVALID_HANDLE`` when the device was closed (CUDA/HIP and Metal; OpenCL and
                QNN return at once: closing the device waited for its work).

        Backends:
            All.  QNN: waits for nothing (graphs execute synchronously) but still reports the failures above.
        """
        raise unsupported(self.device.kind, "Stream.synchronize")

    def query(self) -> bool:
        """Whether all the work enqueued on this stream so far is complete, without waiting.

        Returns:
            True when complete, False while work is pending (never ``NOT_READY``).

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` when the device was closed; the vendor's failure status of the
                query (CUDA/HIP: other than "not ready").

        Backends:
            All.  CUDA/HIP: ``cuStreamQuery``/``hipStreamQuery``; OpenCL: a marker's status (it enqueues a
            marker); Metal: whether the committed command buffers completed; QNN: True unless an asynchronous
            execution is pending (never, on the x86 HTP).
        """
        raise unsupported(self.device.kind, "Stream.query")

    # host callbacks: an event recorded now, waited for by the stream's callback thread, then fn() called there
    def add_callback(self, fn: Callable[[], object]) -> None:
        """Call ``fn()`` once the work queued on this stream before it is over, on the stream's callback thread
        (``ironaccelerator-callbacks``), in the order added.

        An exception ``fn`` raises is reported through ``logging`` (``ironaccelerator.callbacks``, ERROR, with
        its traceback) and kept, never lost, in :attr:`callback_errors`.  If that work failed, ``fn`` is still
        called once it is over; the failure is the stream's, not ``fn``'s: logged, never filed under ``fn``, and
        raised by the stream's :meth:`synchronize`.  Unlike ``cuLaunchHostFunc`` the stream does not wait for
        ``fn``: later work may already run while it does.  :meth:`drain_callbacks` waits until every callback
        added so far has returned.

        Args:
            fn: a callable taking no arguments; its return value is ignored.

        Raises:
            TypeError: ``fn`` is not callable.
            Error: what :meth:`record_event` raises (an event is recorded now; ``ErrorKind.INVALID_HANDLE`` when
                the device was closed).

        Backends:
            All (a thread of this runtime waits for the event, on every backend).
        """
        if not callable(fn):
            raise TypeError(f"Stream.add_callback: fn must be callable, not {type(fn).__name__}")
        event = self.record_event()
        with _CALLBACK_LOCK:
            state: _Callbacks | None = self.__dict__.get("_callback_state")
            if state is None:
                state = _Callbacks()
                self.__dict__["_callback_state"] = state
            state.add(event, fn)

    @property
    def callback_errors(self) -> list[tuple[Callable[[], object], BaseException]]:
        """The exceptions host callbacks (:meth:`add_callback`) raised, as ``(fn, exception)`` pairs in order
        (a copy; every backend)."""
        state: _Callbacks | None = self.__dict__.get("_callback_state")
        return list(state.errors) if state is not None else []

    def drain_callbacks(self, timeout: float | None = None) -> bool:
        """Wait until every host callback added so far (:meth:`add_callback`) has returned.

        Args:
            timeout: the most seconds to wait; None (default): no limit.

        Returns:
            True when every callback has returned, False when ``timeout`` passed first.

        Raises:
            RuntimeError: called from one of this stream's own callbacks, where it would wait for itself (as
                ``Thread.join()`` of the current thread).  Raises no Error.

        Backends:
            All.
        """
        state: _Callbacks | None = self.__dict__.get("_callback_state")
        return True if state is None else state.drain(timeout)

    def _check_callback_waits(self, what: str) -> None:
        """Raise the failures of the work before host callbacks that their waits met (``Stream.synchronize`` of
        each backend calls it): the work failed, not the callback, and the stream reports it."""
        state: _Callbacks | None = self.__dict__.get("_callback_state")
        if state is None or not state.wait_errors:
            return
        with state.cond:
            errs, state.wait_errors = state.wait_errors, []
        if errs:
            first = errs[0]
            raise Error(first.kind if isinstance(first, Error) else ErrorKind.LAUNCH_FAILED,
                        f"{what}: the work queued before {len(errs)} host callback(s) failed: "
                        + "; ".join(f"{type(e).__name__}: {e}" for e in errs),
                        backend=self.device.kind.name, function=what) from first

    async def wait(self) -> None:
        """``await stream.wait()``: the work queued so far is complete, without blocking the event loop (an event
        is recorded and awaited in the loop's default executor).

        Raises:
            Error: what :meth:`record_event` and :meth:`Event.synchronize` raise (the work's failure).

        Backends:
            All.
        """
        await self.record_event()

    def capture(self) -> Any:
        """Record the launches and copies enqueued on this stream into a :class:`Graph` instead of running them.

        ``with stream.capture() as graph: ...``: inside the block the work is recorded (not run); after it,
        ``graph.launch(stream)`` replays it.  An exception inside the block ends the capture and discards what
        was recorded.

        Returns:
            A context manager whose ``__enter__`` returns the :class:`Graph` (usable once the block has ended).

        Raises:
            Error: ``ErrorKind.UNSUPPORTED`` off CUDA/HIP; ``ErrorKind.INVALID_HANDLE`` when the device was
                closed; the driver's status of capture begin/end and instantiation (e.g. an operation that
                cannot be captured).

        Backends:
            CUDA/HIP (``cuStreamBeginCapture`` in thread-local mode, ``cuStreamEndCapture``,
            ``cuGraphInstantiate``; HIP's likewise).  OpenCL, Metal, QNN: ``UNSUPPORTED``.
        """
        raise unsupported(self.device.kind, "Stream.capture")


_CALLBACK_LOCK = threading.Lock()


class _Callbacks:
    """One stream's host callbacks: a FIFO of (event, fn) served by a daemon thread that ends when idle.

    Each ``fn`` runs once the work before it is over, failed or not: a failure of that work is not ``fn``'s (it
    is never filed under ``fn`` in ``errors``); it is logged, and kept in ``wait_errors`` for the stream's
    ``synchronize`` to raise (where the backend's event wait reports it; Metal's streams keep their own)."""

    IDLE_S = 1.0  # a thread with nothing to do for this long ends (the next add starts another)

    def __init__(self) -> None:
        import collections

        self.cond = threading.Condition()
        self.queue: collections.deque[tuple[Event, Callable[[], object]]] = collections.deque()
        self.errors: list[tuple[Callable[[], object], BaseException]] = []
        self.wait_errors: list[BaseException] = []
        self.pending = 0
        self.thread: threading.Thread | None = None

    def add(self, event: Event, fn: Callable[[], object]) -> None:
        with self.cond:
            self.queue.append((event, fn))
            self.pending += 1
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="ironaccelerator-callbacks", daemon=True)
                self.thread.start()
            self.cond.notify_all()

    def drain(self, timeout: float | None) -> bool:
        with self.cond:
            if self.thread is threading.current_thread():
                raise RuntimeError("Stream.drain_callbacks: called from a callback of the same stream, it would wait "
                                   "for itself (a deadlock); drain from another thread")
            return self.cond.wait_for(lambda: self.pending == 0, timeout)

    def _run(self) -> None:
        import logging

        log = logging.getLogger("ironaccelerator.callbacks")
        while True:
            with self.cond:
                if not self.queue and not self.cond.wait_for(lambda: bool(self.queue), self.IDLE_S):
                    self.thread = None
                    return
                event, fn = self.queue.popleft()
            try:
                try:
                    event._wait_for_callback()
                except BaseException as e:  # the work before fn failed: the stream's failure, not fn's
                    log.error("the work queued before stream callback %r failed (the callback is still called; "
                              "Stream.synchronize raises it): %s: %s", fn, type(e).__name__, e)
                    with self.cond:
                        self.wait_errors.append(e.with_traceback(None))
                del event
                fn()
            except BaseException as e:  # reported and kept: a callback never takes the thread (or process) down
                log.error("stream callback %r raised %s", fn, type(e).__name__, exc_info=e)
                with self.cond:
                    self.errors.append((fn, e))
            finally:
                event = None  # type: ignore[assignment]
                with self.cond:
                    self.pending -= 1
                    self.cond.notify_all()


def host_view(obj: Any, writable: bool = False, *, backend: BackendKind | str | None = None,
              function: str | None = None) -> memoryview:
    """A flat byte view of any buffer-protocol object (numpy arrays, bytes, bytearray, memoryview).

    Refused with ``INVALID_VALUE``: objects without the buffer protocol, read-only destinations,
    non-contiguous buffers, buffers of Python object pointers (numpy ``object`` dtypes, format ``O``):
    raw bytes copied over them would be dangling references, and numpy scalars or 0-d arrays: a value,
    not a buffer (``np.int64(-5)`` given where an array was meant).
    """
    name = backend.name if isinstance(backend, BackendKind) else backend
    where = f"{function}: " if function else ""
    if getattr(obj, "ndim", 1) == 0:
        raise Error(ErrorKind.INVALID_VALUE, f"{where}a numpy scalar (or 0-d array) is not a host buffer "
                    f"(got {obj!r}; pass an array)", backend=name, function=function)
    try:
        mv = memoryview(obj)
    except TypeError:
        raise Error(ErrorKind.INVALID_VALUE, f"{where}{type(obj).__name__} does not support the buffer protocol",
                    backend=name, function=function) from None
    if "O" in mv.format:
        raise Error(ErrorKind.INVALID_VALUE, f"{where}a buffer of Python objects (format {mv.format!r}) cannot be "
                    "copied to or from a device", backend=name, function=function)
    if writable and mv.readonly:
        raise Error(ErrorKind.INVALID_VALUE, f"{where}the destination buffer is read-only", backend=name,
                    function=function)
    if not mv.c_contiguous:
        raise Error(ErrorKind.INVALID_VALUE, f"{where}host buffers must be C-contiguous", backend=name,
                    function=function)
    return mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv


class InFlight:
    """The host buffers a stream's asynchronous copies still use, in enqueue order, each released as soon
    as work after it is known complete.

    ``mark()`` is the sequence number of the next buffer: a backend records it with each event (and before
    a ``synchronize``/``query``); once that event is seen complete (``Event.synchronize``, an
    ``Event.query`` that returns True, a finished stream), ``release(mark)`` lets every buffer enqueued
    before it go.  Streams are in order, so that is exact.  Appending is a list operation under the GIL;
    releases may come from several threads (an ``await event`` waits in an executor, host callbacks on the stream's
    callback thread), so a release takes a lock to drop its prefix and count it, and lets the dropped buffers go
    (their finalizers run Python code) after letting go of it.
    """

    __slots__ = ("items", "base", "_lock", "__weakref__")

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.base = 0  # the sequence number of items[0]
        self._lock = threading.Lock()

    def mark(self) -> int:
        # (base is read first: a release between the two reads can only make the mark smaller, which keeps buffers
        # longer, never shorter; release drops the items before it moves base)
        return self.base + len(self.items)

    def release(self, mark: int) -> None:
        if mark <= self.base:  # nothing to drop (base only grows: a stale read just takes the lock below)
            return
        with self._lock:
            n = mark - self.base
            if n <= 0:
                return
            dropped = self.items[:n]
            del self.items[:n]
            self.base += n
        del dropped  # the buffers' finalizers run here, outside the lock

    def __len__(self) -> int:
        return len(self.items)


@dataclass
class PoolStats:
    """Counters of a :class:`MemoryPool` (:meth:`MemoryPool.stats`), a snapshot.

    Attributes:
        allocated_bytes: memory held from the backend (in use + cached).
        in_use_bytes: memory of live pool allocations (whole blocks).
        cached_bytes: memory of freed blocks kept for reuse.
        hits: allocations served from a cached block.
        misses: allocations that asked the backend for a new block.

    Backends:
        All.  CUDA/HIP where the device has stream-ordered pools: the driver's counters (``allocated_bytes`` the
        memory the pool reserves, ``in_use_bytes`` what its allocations use); the driver counts no hits or
        misses (0).
    """

    allocated_bytes: int = 0  # held from the backend (in use + cached)
    in_use_bytes: int = 0
    cached_bytes: int = 0
    hits: int = 0
    misses: int = 0


class PooledAllocation(Allocation):
    """An allocation served by a :class:`MemoryPool`; ``free`` (or dropping it) returns its block to the pool.

    ``stream`` is the stream it is ordered on (``pool.alloc(n, stream=s)``, or ``free(stream=s)``); None if
    neither named one."""

    def __init__(self, pool: MemoryPool, block: Allocation, nbytes: int, stream: Stream | None = None) -> None:
        self.pool = pool
        self.block = block
        self.nbytes = nbytes
        self.kind = block.kind
        self.device = block.device
        self.stream = stream
        self._tracked = True  # dropped unfreed: Allocation.__del__ gives the block back

    def _release(self) -> Error | None:
        try:
            self.pool._give_back(self.block, self.stream)
        except Error as e:
            return e
        return None

    def export_ipc(self) -> IpcHandle:
        self._check_live("Allocation.export_ipc")
        if type(self.block).export_ipc is Allocation.export_ipc:  # the backend exports nothing: UNSUPPORTED
            return Allocation.export_ipc(self)
        raise Error(ErrorKind.INVALID_VALUE, f"Allocation.export_ipc: {self!r} is a block of the caching pool, reused by "
                    "later allocations: allocate with Device.alloc to export", backend=self.device.kind.name,
                    function="Allocation.export_ipc")

    def free(self, stream: Stream | None = None) -> None:  # (MemoryPool._give_back inlined: the pool's hot path)
        """Give the block back to the pool, in the order of ``stream`` (default: the stream it was allocated on).

        Stream-ordered as CUDA's ``cuMemFreeAsync``: the block is reused at once by allocations on that stream,
        and by others only once the work enqueued on it before this free has completed (or after their stream is
        made to wait for it).  Freed with no stream at all, it is ordered after the work then enqueued on *every*
        stream of the device (reused at once if all of it is known complete)."""
        if self._freed:
            raise Error(ErrorKind.INVALID_HANDLE, f"{self!r} was already freed", backend=self.device.kind.name,
                        function="Allocation.free")
        if self._views and (e := self._views_error("Allocation.free")) is not None:
            raise e  # (a view of a block handed to a new owner would read and write its memory)
        pool = self.pool
        if stream is None:
            stream = self.stream
        elif stream is not self.stream:
            pool._check_stream(stream, "Allocation.free")
        block = self.block
        lock = pool._lock
        if stream is None:  # fenced after every stream's work: free at once where all of it is known complete
            device = self.device
            events = _NO_EVENTS if not device._dirty and not device._fence_events else pool._device_fence()
            self._freed = True
            lock.acquire()
            try:
                if not events:
                    blocks = pool._free.get(block.nbytes)
                    if blocks is None:
                        pool._free[block.nbytes] = [block]
                    else:
                        blocks.append(block)
                else:
                    pool._add_fenced(events, block)
            finally:
                lock.release()
            return
        self._freed = True
        lock.acquire()
        try:
            lists = pool._ordered.get(stream)
            if lists is None:
                lists = pool._ordered[stream] = {}
            blocks = lists.get(block.nbytes)
            if blocks is None:
                lists[block.nbytes] = [block]
            else:
                blocks.append(block)
        finally:
            lock.release()

    def free_unchecked(self, stream: Stream | None = None) -> Result[None]:
        """``free`` returning the Error (a second free, a bad stream) instead of raising it."""
        if self._freed:
            return Error(ErrorKind.INVALID_HANDLE, f"{self!r} was already freed", backend=self.device.kind.name,
                         function="Allocation.free_unchecked")
        if self._views and (e := self._views_error("Allocation.free_unchecked")) is not None:
            return e
        if stream is not None and stream is not self.stream:
            try:
                self.pool._check_stream(stream, "Allocation.free_unchecked")
            except Error as e:
                return e
            self.stream = stream
        self._freed = True
        return self._release()

    def _host_address(self) -> int | None:  # the block's bytes: host-visible where the block's are (e.g. QNN's)
        return self.block._host_address()

    def __getattr__(self, name: str) -> Any:  # backend-specific handles (e.g. .buffer, .ptr) of the block
        if name in ("pool", "block") or name.startswith("__"):  # not yet set (a failed __init__): no recursion
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}", name=name, obj=self)
        return getattr(self.block, name)

    def _slice(self, offset: int, nbytes: int) -> Allocation:
        """``pool.alloc(n)[a:b]``: the block's slice (the backend's kind of slice), live while this allocation is:
        it keeps this allocation alive, and is INVALID_HANDLE once this allocation is freed (its block reused)."""
        s = self.block._slice(offset, nbytes)
        s._owner = self  # type: ignore[attr-defined]
        return s


_SHARES = (AllocationSlice, PooledAllocation)  # what shares another allocation's memory (device_span's overlap test)


class _Fence:
    """Blocks freed before ``events`` (one per stream they wait for), reusable once every event completed."""

    __slots__ = ("events", "blocks", "waited", "done")

    def __init__(self, events: list[Event], blocks: dict[int, list[Allocation]]) -> None:
        self.events = events
        self.blocks = blocks
        self.waited: set[int] = set()  # id() of the streams already made to wait for the events
        self.done = not events

    def poll(self) -> bool:
        if not self.done:
            for e in self.events:
                if not e.query():
                    return False
            self.done = True
        return True


class MemoryPool:
    """A caching sub-allocator, stream-ordered as CUDA's: freed blocks are kept by size class and reused.

    Size classes are powers of two from 256 bytes (so a reused block may be up to 2x the request); ``trim()``
    returns cached blocks to the backend.

    Ordering: a block allocated with ``alloc(n, stream=s)`` (or freed with ``free(stream=s)``) is freed in the
    order of ``s``: the next ``alloc(..., stream=s)`` of its size class may reuse it at once (work on ``s`` runs in
    order), another stream ``t`` reuses it only after ``t`` is made to wait (an event recorded on ``s``, waited
    for on ``t``: no host blocking), and ``alloc(n)`` with no stream only once that event has completed (it waits
    for it when no block of the size class is free otherwise: its memory is usable on any stream at once).  A
    block that neither its allocation nor its free ordered on a stream is fenced when freed after the work then
    enqueued on every stream of the device (as ``cuMemFree`` orders after the device's work): free at once if all
    of it is known complete (no event needed), else reused as above once those events complete.  So queued work
    never sees its memory handed to a new owner.

    The hot paths count only hits (misses and held bytes change on the slow path); ``stats()`` derives the
    cached and in-use bytes from the free lists.

    Get a device's pool with :meth:`Device.memory_pool` (or make one: ``MemoryPool(device, kind)``, ``kind`` the
    :class:`MemoryKind` of its blocks, DEVICE by default).

    Backends:
        All.  CUDA/HIP devices with memory pools get a subclass on the driver's stream-ordered allocator
        (``cuMemAllocFromPoolAsync``/``hipMallocFromPoolAsync``) with the same contract; its ``stats()`` are the
        driver's.
    """

    MIN_BLOCK = 256

    def __init__(self, device: Device, kind: MemoryKind = MemoryKind.DEVICE) -> None:
        self.device = device
        self.kind = kind
        self._free: dict[int, list[Allocation]] = {}  # reusable by anyone: no queued work can use them
        self._ordered: dict[Stream, dict[int, list[Allocation]]] = {}  # freed in a stream's order, not yet fenced
        self._fenced: list[_Fence] = []  # blocks waiting for events, oldest first
        self._lock = threading.Lock()  # taken with acquire()/release(): cheaper than `with`
        self._stats = PoolStats()  # hits, misses and allocated_bytes are kept here
        # the events a block freed with no stream waits for: the device's own fence where it keeps one (OpenCL: two
        # flag tests when idle), else each live stream's
        self._device_fence: Callable[[], list[Event]] = getattr(device, "_pool_fence", None) or self._stream_fences
        # alloc() computes the size class inline unless a subclass overrides size_class
        self._custom_size_class = type(self).size_class.__func__ is not MemoryPool.size_class.__func__  # type: ignore[attr-defined]

    @classmethod
    def size_class(cls, nbytes: int) -> int:
        """The block size a request of ``nbytes`` gets: the next power of two, at least ``MIN_BLOCK`` (256).

        Args:
            nbytes: the requested size in bytes, an integer >= 1.

        Returns:
            The size of the block that serves it.

        Raises:
            TypeError: ``nbytes`` is not an integer.
            Error: ``ErrorKind.INVALID_VALUE`` for ``nbytes`` < 1 or past ``size_t``.

        Backends:
            All (the core's caching pool; the drivers' stream-ordered pools size their own blocks).
        """
        n = max(check_size(nbytes, "nbytes", "MemoryPool.size_class"), cls.MIN_BLOCK)
        return 1 << (n - 1).bit_length()

    def alloc(self, nbytes: int, stream: Stream | None = None) -> Allocation:
        """Allocate at least ``nbytes`` from the pool, in the order of ``stream`` (see the class).

        A cached block of the size class is reused when one is free for ``stream``; else the pool allocates a
        new block from the device (after trimming its cache once if the device is out of memory).

        Args:
            nbytes: size in bytes, an integer >= 1.
            stream: None, or a :class:`Stream` of this device: the allocation is ordered on it, and its
                ``free()`` frees in that stream's order.

        Returns:
            An :class:`Allocation` of ``nbytes`` (a block of :meth:`size_class` bytes underneath); ``free()`` (or
            dropping it) gives the block back to the pool.  ``free(stream=s)`` frees in ``s``'s order.

        Raises:
            TypeError: ``nbytes`` is not an integer.
            Error: ``ErrorKind.INVALID_VALUE`` for ``nbytes`` < 1 or a ``stream`` that is not one of this device's;
                ``ErrorKind.INVALID_HANDLE`` after ``Device.close``; ``ErrorKind.OUT_OF_MEMORY`` (and the other
                errors of :meth:`Device.alloc`) when a new block cannot be had.

        Backends:
            All.  CUDA/HIP stream-ordered pools: ``alloc(n, stream=s)`` is ``cuMemAllocFromPoolAsync`` on ``s``
            (no synchronisation); ``alloc(n)`` allocates on the pool's own stream and waits for it.
        """
        if type(nbytes) is not int or nbytes <= 0:
            nbytes = check_size(nbytes, "nbytes", "MemoryPool.alloc", self.device.kind)
        if stream is not None:
            self._check_stream(stream, "MemoryPool.alloc")
        if self.device._closed:
            raise self.device._closed_error("MemoryPool.alloc")
        if self._custom_size_class:
            size = self.size_class(nbytes)
        else:
            n = nbytes if type(nbytes) is int else int(nbytes)
            size = 1 << ((n if n > self.MIN_BLOCK else self.MIN_BLOCK) - 1).bit_length()
        lock = self._lock
        lock.acquire()
        try:
            if stream is not None:
                lists = self._ordered.get(stream)
                if lists is not None:
                    blocks = lists.get(size)
                    if blocks:  # freed in this stream's order: reusable at once
                        self._stats.hits += 1
                        return PooledAllocation(self, blocks.pop(), nbytes, stream)
            blocks = self._free.get(size)
            if blocks:
                self._stats.hits += 1
                return PooledAllocation(self, blocks.pop(), nbytes, stream)
            pending = bool(self._fenced or self._ordered)
        finally:
            lock.release()
        if pending:
            block = self._recycle(size, stream)
            if block is not None:
                with lock:
                    self._stats.hits += 1
                return PooledAllocation(self, block, nbytes, stream)
        with lock:
            self._stats.misses += 1
        try:
            block = self.device.alloc(size, self.kind)
        except Error as e:
            if e.kind is not ErrorKind.OUT_OF_MEMORY:
                raise
            self.trim()  # (waits for the queued work first)
            block = self.device.alloc(size, self.kind)
        with lock:
            self._stats.allocated_bytes += size
        return PooledAllocation(self, block, nbytes, stream)

    def alloc_unchecked(self, nbytes: int, stream: Stream | None = None) -> Result[Allocation]:
        """:meth:`alloc` that returns the :class:`Error` instead of raising it.

        Args:
            nbytes: size in bytes, as for :meth:`alloc`.
            stream: None or a stream of this device, as for :meth:`alloc`.

        Returns:
            The :class:`Allocation`, or the :class:`Error` :meth:`alloc` would raise (a non-integer ``nbytes`` is
            ``INVALID_VALUE`` here, not ``TypeError``).

        Raises:
            Error: never for a bad value (the Error is returned); see docs/UNCHECKED.md.

        Backends:
            All, as :meth:`alloc`.
        """
        try:
            return self.alloc(nbytes, stream)
        except Error as e:
            return e
        except (TypeError, ValueError, OverflowError) as e:
            return Error(ErrorKind.INVALID_VALUE, str(e), backend=self.device.kind.name,
                         function="MemoryPool.alloc_unchecked")

    def _check_stream(self, stream: Any, function: str = "MemoryPool.alloc") -> None:
        if not isinstance(stream, Stream) or getattr(stream, "device", None) is not self.device:
            raise Error(ErrorKind.INVALID_VALUE, f"{function}: stream must be None or a Stream of "
                        f"{self.device!r}, not {stream!r}", backend=self.device.kind.name, function=function)

    def _give_back(self, block: Allocation, stream: Stream | None) -> None:
        """Take ``block`` back: in ``stream``'s order, or (None) fenced now after every stream's work."""
        if stream is not None:
            with self._lock:
                self._ordered.setdefault(stream, {}).setdefault(block.nbytes, []).append(block)
            return
        events = self._device_fence()  # (after the work that used the block: it was enqueued before this free)
        with self._lock:
            if not events:  # all of the device's work is known complete: free for anyone at once
                self._free.setdefault(block.nbytes, []).append(block)
            else:
                self._add_fenced(events, block)

    def _add_fenced(self, events: list[Event], block: Allocation) -> None:
        """(Lock held.)  ``block`` waits for ``events``: with the blocks of the previous fence if it has the same."""
        fenced = self._fenced
        if fenced and _same_events(fenced[-1].events, events):  # the fence of the previous free, still open
            fenced[-1].blocks.setdefault(block.nbytes, []).append(block)
        else:
            fenced.append(_Fence(events, {block.nbytes: [block]}))

    def _stream_fences(self) -> list[Event]:
        """The events of a fence after the work enqueued so far on every stream of the device (none for a stream
        whose work is known complete): each live stream's ``_pool_fence``."""
        return [e for s in self.device._live_streams() if (e := self._fence_of(s)) is not None]

    def _fence_of(self, stream: Stream) -> Event | None:
        """``stream._pool_fence()``; a stream that cannot be fenced is waited for instead (None)."""
        try:
            return stream._pool_fence()
        except Error:
            self._synchronize(stream)
            return None

    # the slow path: blocks freed in another order
    def _recycle(self, size: int, stream: Stream | None) -> Allocation | None:
        """A block of ``size`` freed in another order, made safe for ``stream`` (waited for on it), or for any
        stream (``stream`` None: a block whose fence has completed, else waited for); None if there is none."""
        lock = self._lock
        # fence what was freed on another stream and holds this size (one event per stream covers all its blocks;
        # a stream whose work is known complete needs none)
        lock.acquire()
        try:
            ordered = self._ordered
            take = [(s, lists) for s, lists in ordered.items() if s is not stream and lists.get(size)] \
                if ordered else []
            for s, _ in take:
                del ordered[s]
        finally:
            lock.release()
        fences = [_Fence([] if (e := self._fence_of(s)) is None else [e], lists) for s, lists in take]
        with lock:
            self._fenced.extend(fences)
            self._settle()
            blocks = self._free.get(size)
            if blocks:
                return blocks.pop()
            candidates = [f for f in self._fenced if f.blocks.get(size)]
        if not candidates:
            return None
        if stream is None and not any(f.poll() for f in candidates):
            f = candidates[0]  # none complete: wait for the oldest (memory usable on any stream, as CUDA's pools)
            for e in f.events:
                e.synchronize()
            f.poll()
        for f in candidates:
            if stream is None and not f.done:
                continue
            with lock:
                blocks = f.blocks.get(size)
                if not blocks:
                    continue
                block = blocks.pop()
                if f.done:
                    self._settle()
            if stream is not None and not f.done and id(stream) not in f.waited:
                try:
                    for e in f.events:
                        stream.wait_event(e)
                except Error:
                    for e in f.events:  # (cannot order the streams: wait here)
                        e.synchronize()
                f.waited.add(id(stream))
            return block
        with lock:
            self._settle()
        return None

    def _synchronize(self, stream: Stream) -> None:
        """A stream that cannot be fenced is waited for (else the device)."""
        try:
            stream.synchronize()
        except Error:
            self.device.synchronize()

    def _settle(self) -> None:
        """(Lock held.)  Move the blocks of completed fences to the free lists and drop empty fences."""
        keep = []
        for f in self._fenced:
            if f.done:
                for size, blocks in f.blocks.items():
                    if blocks:
                        self._free.setdefault(size, []).extend(blocks)
                f.blocks = {}  # (moved, not copied: another thread's list of candidates may still hold this fence)
                continue
            if any(f.blocks.values()):
                keep.append(f)
        self._fenced = keep

    def _cached(self) -> list[Allocation]:
        """(Lock held.)  Every cached block, whatever its order."""
        blocks = [b for bs in self._free.values() for b in bs]
        blocks += [b for lists in self._ordered.values() for bs in lists.values() for b in bs]
        blocks += [b for f in self._fenced for bs in f.blocks.values() for b in bs]
        return blocks

    def trim(self) -> int:
        """Release every cached block to the backend, once the work queued before their frees has completed.

        Waits for the device (:meth:`Device.synchronize`) when blocks freed in a stream's order are cached.
        :meth:`Device.close` calls it.

        Returns:
            The bytes released.

        Raises:
            Error: the error of the device's failed work, from waiting for it.

        Backends:
            All.  CUDA/HIP stream-ordered pools: ``cuMemPoolTrimTo``/``hipMemPoolTrimTo`` of the pool's unused
            reserved memory.
        """
        with self._lock:
            pending = bool(self._ordered or self._fenced)
        if pending and not self.device._closed:
            try:
                self.device.synchronize()
            except Error as e:
                if e.kind is not ErrorKind.UNSUPPORTED:
                    raise
        with self._lock:
            blocks = self._cached()
            self._free.clear()
            self._ordered.clear()
            self._fenced.clear()
            released = sum(b.nbytes for b in blocks)
            self._stats.allocated_bytes -= released
        for b in blocks:
            b.free_unchecked()
        return released

    def stats(self) -> PoolStats:
        """The pool's counters now: bytes held, in use and cached, hits and misses.

        Returns:
            A :class:`PoolStats` snapshot.

        Raises:
            Error: the vendor's error where the driver's counters cannot be read (CUDA/HIP pools); the core's
                pool never raises.

        Backends:
            All.  CUDA/HIP stream-ordered pools report the driver's reserved and used bytes and no hits or
            misses (0).
        """
        with self._lock:
            st = self._stats
            cached = sum(b.nbytes for b in self._cached())
            return PoolStats(allocated_bytes=st.allocated_bytes, in_use_bytes=st.allocated_bytes - cached,
                             cached_bytes=cached, hits=st.hits, misses=st.misses)


_NO_EVENTS: list[Event] = []  # (never appended to)


def _same_events(a: list[Event], b: list[Event]) -> bool:
    return a is b or (len(a) == len(b) and all(x is y for x, y in zip(a, b)))


class BackendRegistry:
    """The backends this process knows: built-in ones and those registered under the entry-point group
    ``ironaccelerator.backends`` (name -> ``module:BackendClass``).

    ``BackendRegistry.default()`` is the process's; ``BackendRegistry(factories)`` makes a private one from
    ``{BackendKind: callable returning a Backend}``.  Each backend is constructed on first use and kept (or the
    Error of constructing it).  Thread-safe.

    Backends:
        All kinds of :class:`BackendKind`; one whose library cannot load stays listed with its reason
        (:meth:`report`).
    """

    _default: BackendRegistry | None = None
    _default_lock = threading.Lock()

    def __init__(self, factories: dict[BackendKind, Callable[[], Backend]] | None = None) -> None:
        self._factories: dict[BackendKind, Callable[[], Backend]] = dict(factories or {})
        self._backends: dict[BackendKind, Backend | Error] = {}
        self._lock = threading.Lock()

    @classmethod
    def default(cls) -> BackendRegistry:
        """The process-wide registry: the built-in backends plus the ``ironaccelerator.backends`` entry points.

        Returns:
            The same :class:`BackendRegistry` on every call (made on the first).

        Raises:
            Error: never (broken entry-point metadata, or a backend that fails to load, is reported by
                :meth:`get`).

        Backends:
            All.
        """
        with cls._default_lock:
            if cls._default is None:
                from ironaccelerator._core import BUILTIN_BACKENDS

                reg = cls({k: _importer(v) for k, v in BUILTIN_BACKENDS.items()})
                reg._load_entry_points()
                cls._default = reg
            return cls._default

    def register(self, kind: BackendKind, factory: Callable[[], Backend]) -> None:
        """Register (or replace) the backend of ``kind``: the next :meth:`get` constructs it with ``factory``.

        Args:
            kind: the :class:`BackendKind` it serves.
            factory: a callable that returns the :class:`Backend` (e.g. the backend class); an :class:`Error` it
                raises is what :meth:`get` raises, any other exception becomes ``UNKNOWN``.

        Raises:
            Error: never (the backend is constructed by :meth:`get`, which raises what ``factory`` raises).

        Backends:
            All kinds.
        """
        with self._lock:
            self._factories[kind] = factory
            self._backends.pop(kind, None)

    def _load_entry_points(self) -> None:
        try:
            from importlib.metadata import entry_points

            eps = entry_points(group="ironaccelerator.backends")
        except Exception:  # broken metadata must not break import
            return
        for ep in eps:
            try:
                kind = BackendKind[ep.name.upper()]
            except KeyError:
                continue
            self._factories[kind] = _entry_point(ep)

    def _resolve(self, kind: BackendKind) -> Backend | Error:
        with self._lock:
            if kind not in self._backends:
                factory = self._factories.get(kind)
                if factory is None:
                    self._backends[kind] = Error(ErrorKind.UNSUPPORTED, f"no {kind.name} backend is registered",
                                                 backend=kind.name, function="BackendRegistry.get")
                else:
                    try:
                        self._backends[kind] = factory()
                    except Error as e:
                        self._backends[kind] = e
                    except Exception as e:  # a backend that cannot even construct is unavailable, not fatal
                        self._backends[kind] = Error(ErrorKind.UNKNOWN, f"{kind.name} backend failed to load: {e!r}",
                                                     backend=kind.name, function="BackendRegistry.get")
            return self._backends[kind]

    def get(self, kind: BackendKind | str) -> Backend:
        """The backend of ``kind``, constructed on first use.

        Args:
            kind: a :class:`BackendKind`, or its name in any case (``"opencl"``, ``"CUDA"``, ``"rocm"``).

        Returns:
            The :class:`Backend` (the same object on every call).

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for anything else (``None``, an unknown name), listing the kinds;
                ``ErrorKind.UNSUPPORTED`` when no backend of ``kind`` is registered; the Error of constructing it
                otherwise, e.g. ``ErrorKind.LIBRARY_NOT_FOUND`` naming the libraries tried (CUDA without
                ``libcuda.so.1``), or ``ErrorKind.UNKNOWN`` for a backend that failed with another exception.

        Backends:
            All kinds.
        """
        if type(kind) is not BackendKind:
            kind = _backend_kind(kind)
        b = self._resolve(kind)
        if isinstance(b, Error):
            raise b
        return b

    def available(self) -> list[Backend]:
        """The backends whose library loads (each constructed, in :class:`BackendKind` order).

        A backend may be available with no device (:meth:`Backend.devices` is then empty).

        Returns:
            The available :class:`Backend` objects.

        Raises:
            Error: never (an unavailable backend is left out; :meth:`report` says why).

        Backends:
            All kinds.
        """
        return [b for k in BackendKind if not isinstance(b := self._resolve(k), Error)]

    def report(self) -> list[str]:
        """What ``python -m ironaccelerator`` prints: each backend, available (its versions and devices) or why not.

        Returns:
            The report's lines of text.

        Raises:
            Error: never for an unavailable backend (its reason is a line of the report).

        Backends:
            All kinds.
        """
        from .inventory import describe, text

        return text(describe(self))


def _backend_kind(kind: Any) -> BackendKind:
    """``BackendRegistry.get``'s argument as a BackendKind: the kind, or its name (case-insensitive)."""
    if isinstance(kind, BackendKind):
        return kind
    if isinstance(kind, str) and kind.upper() in BackendKind.__members__:
        return BackendKind[kind.upper()]
    raise Error(ErrorKind.INVALID_VALUE, f"BackendRegistry.get: {kind!r:.80} is not a backend kind; pass a BackendKind or "
                f"one of the names {', '.join(k.name for k in BackendKind)}", function="BackendRegistry.get")


def _importer(target: str) -> Callable[[], Backend]:
    def load() -> Backend:
        import importlib

        module, _, cls = target.partition(":")
        backend: Backend = getattr(importlib.import_module(module), cls)()
        return backend

    return load


def _entry_point(ep: Any) -> Callable[[], Backend]:
    def load() -> Backend:
        backend: Backend = ep.load()()
        return backend

    return load
