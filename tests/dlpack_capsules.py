"""DLPack capsules read back with ctypes, independently of the runtime's own declarations (the struct layouts of
the DLPack specification, written out again here so a layout mistake in the runtime cannot hide itself)."""

from __future__ import annotations

import ctypes
from typing import Any


class Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", Device), ("ndim", ctypes.c_int32), ("dtype", DataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Managed(ctypes.Structure):
    _fields_ = [("dl_tensor", Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", Deleter)]


class Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class ManagedVersioned(ctypes.Structure):
    _fields_ = [("version", Version), ("manager_ctx", ctypes.c_void_p), ("deleter", Deleter),
                ("flags", ctypes.c_uint64), ("dl_tensor", Tensor)]


_api = ctypes.pythonapi
GET_POINTER = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
GET_NAME = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", _api))
SET_NAME = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", _api))
USED = {b"dltensor": ctypes.create_string_buffer(b"used_dltensor"),
        b"dltensor_versioned": ctypes.create_string_buffer(b"used_dltensor_versioned")}


def parse(capsule: Any) -> dict[str, Any]:
    """What an unconsumed capsule holds: name, version (None for legacy), flags, data, device, ndim, dtype,
    shape, strides (None: compact), byte_offset, and the struct's address."""
    name = GET_NAME(capsule)
    address = GET_POINTER(capsule, name)
    if name == b"dltensor_versioned":
        m: Any = ManagedVersioned.from_address(address)
        version: tuple[int, int] | None = (m.version.major, m.version.minor)
        flags = int(m.flags)
    else:
        assert name == b"dltensor", name
        m = Managed.from_address(address)
        version, flags = None, 0
    t = m.dl_tensor
    return {"name": name, "version": version, "flags": flags, "data": t.data or 0,
            "device": (t.device.device_type, t.device.device_id), "ndim": t.ndim,
            "dtype": (t.dtype.code, t.dtype.bits, t.dtype.lanes),
            "shape": tuple(t.shape[i] for i in range(t.ndim)),
            "strides": tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None,
            "byte_offset": t.byte_offset, "address": address, "has_deleter": bool(m.deleter)}


def consume(capsule: Any) -> Any:
    """Take ownership as a consumer does (rename to ``used_...``); returns a function that calls the deleter."""
    name = GET_NAME(capsule)
    address = GET_POINTER(capsule, name)
    m: Any = (ManagedVersioned if name == b"dltensor_versioned" else Managed).from_address(address)
    assert SET_NAME(capsule, USED[name]) == 0
    return lambda: m.deleter(address)
