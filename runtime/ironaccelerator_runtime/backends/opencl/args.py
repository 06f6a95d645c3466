"""Launch arguments of an OpenCL kernel: ``clSetKernelArg`` for each argument, with the per-kernel caches that
let a repeated launch of the same arguments skip the calls."""

from __future__ import annotations

import sys
from typing import Any

from ironaccelerator._core import ErrorKind
from ironaccelerator_runtime.errors import Error, fail
from ironaccelerator_runtime.traits.checks import foreign
from ironaccelerator_runtime.kernel_args import LocalMemory, buffer_error, value_bytes
from ironaccelerator_runtime.traits import Allocation, PooledAllocation, Scalar

from .device import OpenCLDevice
from .memory import _BUFFERS, _serial
from .module import OpenCLKernel, _LOCAL_SLOT, _POINTER_SLOT, _UNSET, _VALUE_SLOT
from .tables import _KIND


_CData: type = type(None)  # cffi's CData type, set when the bindings load (_Api)
_HOST_TYPES: dict[type, int] = {}  # host buffer type -> what _plain_host looks at: _PLAIN, _DTYPED, _VIEW, _SCALAR
_PLAIN, _DTYPED, _VIEW, _SCALAR = 0, 1, 2, 3


def _plain_host(obj: Any, t: type) -> bool:
    """Whether a host buffer other than bytes/bytearray may go straight to ``ffi.from_buffer``: not a buffer of
    Python object pointers (numpy ``object`` dtypes, format ``O``) and not a numpy scalar.  When False,
    ``host_view`` refuses it with the descriptive Error (the two refusals agree: a scalar has ndim 0).
    What to look at is decided once per type (a copy's hot path)."""
    how = _HOST_TYPES.get(t)
    if how is None:
        np = sys.modules.get("numpy")
        if np is not None and issubclass(t, np.generic):
            how = _SCALAR
        elif t is memoryview:
            how = _VIEW
        elif getattr(obj, "dtype", None) is not None:
            how = _DTYPED
        else:
            how = _PLAIN
        if len(_HOST_TYPES) < 256:
            _HOST_TYPES[t] = how
    if how == _DTYPED:
        return not getattr(getattr(obj, "dtype", None), "hasobject", False)
    if how == _VIEW:
        return "O" not in obj.format
    return how == _PLAIN


def _live_buffer(a: Allocation, what: str, device: OpenCLDevice | None = None) -> Any:
    """The ``cl_mem`` of an allocation (pooled or not) for use on ``device`` (the stream's): INVALID_HANDLE if
    it was freed or the device closed, INVALID_VALUE if it is another device's, TypeError if not an allocation."""
    t = type(a)
    if t in _BUFFERS:
        block = a
    elif t is PooledAllocation:
        block = a.block  # type: ignore[attr-defined]
    elif isinstance(a, Allocation) and isinstance(getattr(a, "buffer", None), _CData):
        block = a
    else:
        raise TypeError(f"{what}: expected an OpenCL allocation, got {t.__name__} ({a!r})")
    if a._freed:
        a._check_live(what)
    if device is not None and (device._closed or block.device is not device):
        if device._closed:
            raise device._closed_error(what)
        raise foreign(block.device, what, f"{a!r} belongs to another device (context) than the stream",
                      "OPENCL")
    return block.buffer  # type: ignore[attr-defined]


_IMMUTABLE: dict[type, bool] = {}  # by-value argument types whose objects can be cached by identity


def _immutable(t: type) -> bool:
    r = _IMMUTABLE.get(t)
    if r is None:
        np = sys.modules.get("numpy")
        # np.void scalars of structured arrays are views of the array's memory: not immutable
        r = issubclass(t, (Scalar, bytes, int, float, LocalMemory)) or (
            np is not None and issubclass(t, np.generic) and not issubclass(t, np.void))
        _IMMUTABLE[t] = r
    return r


def _where(kernel: OpenCLKernel, i: int) -> str:
    return f"argument {i} of kernel {kernel.name!r}"


def _set_args(kernel: OpenCLKernel, args: tuple[Any, ...], function: str) -> Error | None:
    """Set the arguments that differ from the kernel's cached state (call with ``kernel._lock`` held; ``args``
    has ``kernel.num_args`` items), by the kernel-argument policy (:mod:`ironaccelerator_runtime.kernel_args`),
    checked and unchecked alike: each check is a type dispatch made only where an argument changed.

    An allocation is identified by its serial (pooled ones by their block's), a by-value argument by its
    bytes; an argument object that is immutable and identical to the last one is skipped outright.  A slot
    whose argument failed is left uncached (set again by the next launch).
    """
    keys, objs, slots = kernel._keys, kernel._objs, kernel._slots
    for i, a in enumerate(args):
        t = type(a)
        if t not in _BUFFERS:
            if a is objs[i]:
                continue
            if t is PooledAllocation:
                if a._freed:
                    return _freed_error(a, function)
                a = a.block
                t = type(a)
        if t in _BUFFERS:
            if a._freed:  # also unchecked: a released cl_mem in a launch aborts the runtime
                return _freed_error(a, function)
            key = a._serial or _serial(a)
            if keys[i] != key:
                if slots is not None and slots[i] != _POINTER_SLOT:
                    return kernel._slot_error(i, a, function)
                if a.device is not kernel.module.device:
                    return buffer_error(_where(kernel, i), a, "OPENCL", function)
                objs[i] = _UNSET
                mem = kernel._mem
                mem[0] = a.buffer
                code = kernel._set_arg(kernel.handle, i, kernel._sizeof_mem, mem)
                if code:
                    keys[i] = None
                    return kernel._api.error(code, "clSetKernelArg", _where(kernel, i))
                keys[i] = key
            continue
        slot = slots[i] if slots is not None else 0
        if t is LocalMemory:
            if keys[i] == a:
                objs[i] = a
                continue
            keys[i] = None
            objs[i] = _UNSET
            if slot and slot != _LOCAL_SLOT:
                return kernel._slot_error(i, a, function)
            code = kernel._set_arg(kernel.handle, i, a.nbytes, kernel._null)
            if not code:
                keys[i] = objs[i] = a
        elif isinstance(a, Allocation):  # a slice, or another backend's allocation: checked and set every time
            keys[i] = None
            objs[i] = _UNSET
            buffer = _arg_buffer(kernel, i, a, function)
            if type(buffer) is Error:
                return buffer
            if slot and slot != _POINTER_SLOT:
                return kernel._slot_error(i, a, function)
            mem = kernel._mem
            mem[0] = buffer
            code = kernel._set_arg(kernel.handle, i, kernel._sizeof_mem, mem)
        else:
            if slot and slot != _VALUE_SLOT:  # never a value's bytes read as a cl_mem (a crash)
                keys[i] = None
                objs[i] = _UNSET
                return kernel._slot_error(i, a, function)
            try:
                data = value_bytes(a, kernel._params[i] if kernel._params is not None else None, i, kernel.name,
                                   "OPENCL", function)
            except Error as e:
                keys[i] = None
                objs[i] = _UNSET
                return e
            if keys[i] == data:
                objs[i] = a if _immutable(t) else _UNSET
                continue
            keys[i] = None
            objs[i] = _UNSET
            code = kernel._set_arg(kernel.handle, i, len(data), data)
            if not code:
                keys[i] = data
                objs[i] = a if _immutable(t) else _UNSET
        if code:
            return kernel._api.error(code, "clSetKernelArg", _where(kernel, i))
    return None


def _arg_buffer(kernel: OpenCLKernel, i: int, a: Allocation, function: str) -> Any:
    """The ``cl_mem`` of an allocation argument that is not a (pooled) OpenCLAllocation: a slice (its
    sub-buffer) of this device, live; else the Error (INVALID_HANDLE freed, INVALID_VALUE another device's or
    another backend's)."""
    if a._freed:  # (a slice: its allocation's)
        return _freed_error(a, function)
    buffer = getattr(a, "buffer", None)
    if not isinstance(buffer, _CData) or getattr(a.device, "kind", None) is not _KIND:
        return buffer_error(_where(kernel, i), a, "OPENCL", function)
    if a.device is not kernel.module.device:
        return buffer_error(_where(kernel, i), a, "OPENCL", function)
    return buffer


def _freed_error(a: Allocation, function: str = "Stream.launch") -> Error:
    try:
        a._check_live(function)
    except Error as e:
        return e.with_traceback(None)
    return fail(ErrorKind.INVALID_HANDLE, function, f"{a!r} was freed", "OPENCL")
