"""The trait surface's values: device ids, capabilities, limits and descriptors, IPC handles, ``Result``.

Frozen, picklable data: nothing here holds driver state."""

from __future__ import annotations

from typing import TypeVar, Union

from ironaccelerator._core import BackendKind, CapabilityFlags, ComputeTier, Vendor

from ..errors import Error
from ..records import FACTORY, record

T = TypeVar("T")
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


@record()
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

    __slots__ = ("backend", "index")
    backend: BackendKind
    index: int

    def __init__(self, backend: BackendKind, index: int) -> None:
        _set = object.__setattr__
        _set(self, "backend", backend)
        _set(self, "index", index)

    def __str__(self) -> str:
        return f"{self.backend.name.lower()}:{self.index}"


@record()
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

    __slots__ = ("flags", "tier", "vendor_version")
    flags: CapabilityFlags
    tier: ComputeTier
    vendor_version: str  # ex) "OpenCL C 1.2 pocl" or "sm_90" (compute capability 9.0)

    def __init__(self, flags: CapabilityFlags, tier: ComputeTier, vendor_version: str) -> None:
        _set = object.__setattr__
        _set(self, "flags", flags)
        _set(self, "tier", tier)
        _set(self, "vendor_version", vendor_version)


@record(kw_only=True)
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

    __slots__ = ("backend", "device", "nbytes", "data", "pid")
    backend: BackendKind
    device: int
    nbytes: int
    data: bytes
    pid: int

    def __init__(self, *, backend: BackendKind, device: int, nbytes: int, data: bytes, pid: int) -> None:
        _set = object.__setattr__
        _set(self, "backend", backend)
        _set(self, "device", device)
        _set(self, "nbytes", nbytes)
        _set(self, "data", data)
        _set(self, "pid", pid)

    def __repr__(self) -> str:
        return (f"IpcHandle({self.backend.name}, device {self.device}, {self.nbytes} bytes, from pid {self.pid}, "
                f"{self.data[:8].hex()}...)")


_SIZE_MAX = 2**64 - 1  # size_t on the 64-bit hosts we build for


@record()
class DeviceLimits:
    """What one launch or one allocation may ask of a device (``DeviceDescriptor.limits``); :meth:`LaunchDims.validate`
    checks a launch against it before any vendor call (``INVALID_VALUE`` naming the limit).

    Attributes:
        max_block: the most threads of a block in each dimension (x, y, z).
        max_threads_per_block: the most threads of one block, all dimensions together.
        max_grid: the most blocks of a grid in each dimension.
        max_shared_mem: the most shared/local memory (bytes) one block may use.
        max_alloc: the largest single allocation in bytes; None: unknown.  More DEVICE memory in one
            ``Device.alloc`` or ``MemoryPool.alloc`` is ``INVALID_VALUE`` on every backend.
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

    __slots__ = ("max_block", "max_threads_per_block", "max_grid", "max_shared_mem", "max_alloc", "max_work_items",
                 "max_global")
    max_block: tuple[int, int, int]
    max_threads_per_block: int
    max_grid: tuple[int, int, int]
    max_shared_mem: int
    max_alloc: int | None  # the largest single allocation in bytes (OpenCL CL_DEVICE_MAX_MEM_ALLOC_SIZE); None: unknown
    max_work_items: int  # the most threads (grid x block, all dimensions) one launch may have
    max_global: tuple[int, int, int] | None  # the most threads (grid[i] x block[i]) in each dimension; None: size_t

    def __init__(self, max_block: tuple[int, int, int] = (1024, 1024, 64), max_threads_per_block: int = 1024,
                 max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535), max_shared_mem: int = 48 * 1024,
                 max_alloc: int | None = None, max_work_items: int = _SIZE_MAX,
                 max_global: tuple[int, int, int] | None = None) -> None:
        _set = object.__setattr__
        _set(self, "max_block", max_block)
        _set(self, "max_threads_per_block", max_threads_per_block)
        _set(self, "max_grid", max_grid)
        _set(self, "max_shared_mem", max_shared_mem)
        _set(self, "max_alloc", max_alloc)
        _set(self, "max_work_items", max_work_items)
        _set(self, "max_global", max_global)


@record(factories={"limits": DeviceLimits})
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

    __slots__ = ("id", "name", "vendor", "backend", "total_memory", "compute_units", "capability", "limits")
    id: DeviceId
    name: str
    vendor: Vendor
    backend: BackendKind
    total_memory: int
    compute_units: int
    capability: Capability
    limits: DeviceLimits

    def __init__(self, id: DeviceId, name: str, vendor: Vendor, backend: BackendKind, total_memory: int,
                 compute_units: int, capability: Capability, limits: DeviceLimits = FACTORY) -> None:
        _set = object.__setattr__
        _set(self, "id", id)
        _set(self, "name", name)
        _set(self, "vendor", vendor)
        _set(self, "backend", backend)
        _set(self, "total_memory", total_memory)
        _set(self, "compute_units", compute_units)
        _set(self, "capability", capability)
        _set(self, "limits", DeviceLimits() if limits is FACTORY else limits)
