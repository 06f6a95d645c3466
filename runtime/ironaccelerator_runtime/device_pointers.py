"""The device-pointer argument of a generated checked wrapper (a spec's ``device: true`` parameter, or a ``rules:``
line that makes one): what it takes, on every backend, and the address it passes.

=======================  ==============================================================================================
argument                 passed as
=======================  ==============================================================================================
an :class:`Allocation`   its address (``Allocation._device_address``: CUDA/HIP every kind, OpenCL fine-grained SVM,
                         QNN's host memory), pooled blocks and slices (``alloc[a:b]``: the address plus the offset)
                         included.  Freed: ``INVALID_HANDLE``.  Another backend's allocation (an OpenCL buffer given
                         to a CUDA library), or memory with no address (an OpenCL ``cl_mem`` buffer, a Vulkan or
                         Metal buffer): ``INVALID_VALUE``.
a view of one            ``Allocation.view(...)``'s ``ArrayView``/``DLPackView``: its allocation's address plus the
                         view's byte offset, as for an allocation.
an ``int``               the address as it is (numpy integers too): 0 .. 2**64 - 1, else ``INVALID_VALUE``.
``None``                 NULL where the parameter is ``nullable``, else ``INVALID_VALUE``.
anything else            ``INVALID_VALUE`` (a ``float``, a ``bool``, a cffi pointer, a numpy array: host memory is not
                         a device address).
=======================  ==============================================================================================

The same mistake is the same :class:`ErrorKind` as a kernel argument's (:mod:`ironaccelerator_runtime.kernel_args`).
"""

from __future__ import annotations

from typing import Any

from ironaccelerator._core import ErrorKind

from .errors import Error, fail
from .integers import _integer
from .traits import Allocation

__all__ = ["device_address"]

_MAX = (1 << 64) - 1


def device_address(value: Any, function: str, param: str, backend: str, nullable: bool = False) -> int | Error:
    """The address ``value`` stands for as parameter ``param`` of ``function`` (a library of ``backend``, an
    ``ErrorKind`` backend name such as ``"CUDA"``), or the :class:`Error` saying why it cannot be one."""
    offset = 0
    if not isinstance(value, Allocation) and hasattr(value, "allocation") and hasattr(value, "offset"):
        from .dlpack import ArrayView  # (here: a view was made, so the module is already imported)

        if isinstance(value, ArrayView):
            offset = value.offset
            value = value.allocation
    if isinstance(value, Allocation):
        if value.freed:
            return fail(ErrorKind.INVALID_HANDLE, function, f"{param}: {value!r} was freed", backend)
        kind = value.device.kind.name
        if kind != backend:
            return fail(ErrorKind.INVALID_VALUE, function, f"{param}: {value!r} is {kind} memory; a {backend} "
                        f"library takes {backend} allocations", backend)
        address = value._device_address()
        if address is None:
            return fail(ErrorKind.INVALID_VALUE, function, f"{param}: {value!r} has no device address (its "
                        f"memory is a handle, not an address): allocate memory a library can address", backend)
        return address + offset
    if value is None:
        if nullable:
            return 0
        return fail(ErrorKind.INVALID_VALUE, function, f"{param} is None: pass an Allocation, a slice or view of "
                    "one, or an integer device address", backend)
    address = _integer(value)
    if address is None:
        return fail(ErrorKind.INVALID_VALUE, function, f"{param} must be an Allocation, a slice or view of one, or "
                    f"an integer device address, not {type(value).__name__}", backend)
    if not 0 <= address <= _MAX:
        return fail(ErrorKind.INVALID_VALUE, function, f"{param}={address} is not an address (0 .. 2**64 - 1)",
                    backend)
    return address
