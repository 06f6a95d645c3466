"""DLPack both ways: typed, strided views of allocations that export capsules, and imports of foreign memory.

Export (:class:`ArrayView`, made by ``Allocation.view``): a ``DLManagedTensorVersioned`` capsule
(``"dltensor_versioned"``, DLPack 1.x) when the consumer passes ``max_version >= (1, 0)``, else the legacy
``DLManagedTensor`` (``"dltensor"``).  A capsule keeps the view (and so its allocation) alive until the consumer
calls the deleter, or until it is dropped unconsumed (the exporter's next sweep then deletes it, see
:class:`_Exporter`): exactly once either way.  A consumer's refusal surfaces as its own error.

Import (:func:`import_dlpack`, ``Device.from_dlpack``): the producer's capsule is consumed (renamed
``used_dltensor[_versioned]``) and its deleter is called once, when the imported allocation is released
(``free()`` or dropped).

The C structures are those of the DLPack header (``dlpack.h``, Apache-2.0), declared here with ctypes from the
specification's field list.
"""

from __future__ import annotations

import ctypes
import gc
import sys
import threading
from typing import Any, Sequence

from ironaccelerator._core import BackendKind, DType, ErrorKind, MemoryKind

from .errors import Error, as_operation, fail
from .integers import _integer

# DLPack's own DLDeviceType values (dlpack.h: kDLCPU, kDLCUDAHost, kDLROCMHost, kDLCUDAManaged) of memory that is no
# backend's device memory: the host's, and the host memory CUDA and ROCm map.  A backend's device memory has its
# kind's code, specs/core.yaml's `dlpack_device` (BackendKind.dlpack_device), which is not repeated here.
KDL_CPU, KDL_CUDA_HOST, KDL_ROCM_HOST, KDL_CUDA_MANAGED = 1, 3, 11, 13
HOST_DEVICE_TYPES = frozenset((KDL_CPU, KDL_CUDA_HOST, KDL_ROCM_HOST, KDL_CUDA_MANAGED))  # host-addressable
FLAG_READ_ONLY, FLAG_IS_COPIED = 1 << 0, 1 << 1
VERSION = (1, 1)  # the DLPack version of the versioned capsules made here (1.1: the float8 type codes)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


# capsule names: a capsule keeps a pointer to its name, so these live as long as the module
NAME_LEGACY = ctypes.create_string_buffer(b"dltensor")
NAME_VERSIONED = ctypes.create_string_buffer(b"dltensor_versioned")
USED_LEGACY = ctypes.create_string_buffer(b"used_dltensor")
USED_VERSIONED = ctypes.create_string_buffer(b"used_dltensor_versioned")

# private prototypes (ctypes.pythonapi's own attributes are process-wide: never reconfigure them)
_api = ctypes.pythonapi
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", _api))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", _api))
_err_fetch = ctypes.PYFUNCTYPE(None)(("PyErr_Fetch", _api))  # (no argtypes: its three outs convert without a call)
_err_restore = ctypes.PYFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(("PyErr_Restore", _api))

_BY_DLPACK = {d.dlpack: d for d in DType}


def dtype_of(value: Any, function: str, backend: str | None = None) -> DType:
    """A :class:`DType` from a DType, or a numpy dtype, scalar type or name (``"float32"``, ``"f4"``, ``np.int8``):
    ``INVALID_VALUE`` for anything else."""
    if isinstance(value, DType):
        return value
    try:
        return DType.from_numpy(value)
    except (ValueError, TypeError):
        pass
    try:
        import numpy as np

        return DType.from_numpy(np.dtype(value))
    except Exception:
        raise fail(ErrorKind.INVALID_VALUE, function, f"{value!r} is not a DType or numpy dtype this runtime knows",
                   backend) from None


_TYPESTR = {DType.F64: "<f8", DType.F32: "<f4", DType.F16: "<f2", DType.I8: "|i1", DType.I16: "<i2",
            DType.I32: "<i4", DType.I64: "<i8", DType.U8: "|u1", DType.U16: "<u2", DType.U32: "<u4",
            DType.U64: "<u8", DType.BOOL: "|b1", DType.C64: "<c8", DType.C128: "<c16"}
_BY_TYPESTR = {v[1:]: k for k, v in _TYPESTR.items()}


def typestr(dtype: DType) -> str | None:
    """The ``__array_interface__`` typestr of ``dtype`` (little-endian), or None where numpy has none (bf16, f8)."""
    return _TYPESTR.get(dtype)


# ----------------------------------------------------------------------------------------------- export


class _Exporter:
    """The capsules made and not yet deleted: struct address -> [struct, shape, strides, owner, capsule,
    PyErr_Fetch outs].

    A capsule has no destructor: CPython calls a capsule's destructor from its dealloc, typically while the
    consumer's own exception is pending (a consumer that refuses a capsule raises, then drops it:
    ``np.from_dlpack`` of a bf16 or a device tensor), and Python code can neither run correctly with an
    exception set nor leave one set on its way out (every call's result is checked): a Python destructor turned
    the consumer's error into ``SystemError: ... returned NULL without setting an exception``, and failed before
    deleting.  Instead the exporter holds a reference to each capsule it made, and :meth:`sweep` deletes a
    capsule once it alone holds it and it is still named as made (dropped unconsumed), or lets go of it once it
    was renamed ``used_...`` (the consumer calls the deleter when done).  Sweeps run at each export, after each
    garbage collection, before ``Allocation.free`` counts exported views, and when ``deleted`` is read: each
    capsule is deleted exactly once, whoever deletes it."""

    def __init__(self) -> None:
        self.live: dict[int, list[Any]] = {}
        self.lock = threading.RLock()  # (a capsule dropped by a GC pass inside the lock deletes under it)
        self.deleter = DELETER(self._deleter)  # the same callback serves both layouts
        self._deleted = 0  # deleter calls (consumed or dropped)
        self._alone = self._refs([None, None, None, None, object()])  # the count of a capsule only we hold
        gc.callbacks.append(self._after_gc)  # (a collection never runs with an exception pending)

    @staticmethod
    def _refs(entry: list[Any]) -> int:
        cap = entry[4]
        return sys.getrefcount(cap)

    def _after_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "stop" and self.live:
            self.sweep()

    @property
    def deleted(self) -> int:
        """How many capsules were deleted (by their consumer, or dropped unconsumed), for tests: sweeps first."""
        self.sweep()
        return self._deleted

    def _deleter(self, address: int) -> None:
        # A consumer may call it with its own exception pending (some do on a failed import): until that is
        # taken, every call fails.  PyErr_Fetch into the outs made at export (array arguments convert without a
        # call) is the one call that works; the exception is then reported (it cannot be set again for the
        # consumer to raise: a Python callback cannot return with an exception set).
        if address not in self.live:  # (no call: one would fail with an exception pending)
            return
        slots = self.live[address][5]
        _err_fetch(slots[0], slots[1], slots[2])
        with self.lock:
            if self.live.pop(address, None) is not None:
                self._deleted += 1
        if slots[0][0]:
            _err_restore(slots[0][0], slots[1][0], slots[2][0])  # (raises it here: printed as unraisable)

    def sweep(self) -> None:
        """Delete the capsules dropped unconsumed; let go of those a consumer took (see the class doc)."""
        if not self.live:
            return
        with self.lock:
            for address, entry in list(self.live.items()):
                if entry[4] is None or self._refs(entry) > self._alone:
                    continue
                cap = entry[4]
                if _capsule_is_valid(cap, NAME_VERSIONED) or _capsule_is_valid(cap, NAME_LEGACY):
                    del self.live[address]  # dropped unconsumed: deleted here, once
                    self._deleted += 1
                else:
                    entry[4] = None  # consumed: the consumer calls the deleter
                del cap

    def export(self, owner: Any, data: int, device: tuple[int, int], dtype: DType, shape: Sequence[int],
               strides: Sequence[int] | None, byte_offset: int, versioned: bool, read_only: bool = False) -> Any:
        managed: Any = DLManagedTensorVersioned() if versioned else DLManagedTensor()
        ndim = len(shape)
        c_shape = (ctypes.c_int64 * max(ndim, 1))(*shape)
        c_strides = (ctypes.c_int64 * max(ndim, 1))(*strides) if strides is not None else None
        t = managed.dl_tensor
        t.data = data or None
        t.device.device_type, t.device.device_id = device
        t.ndim = ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = dtype.dlpack
        t.shape = ctypes.cast(c_shape, ctypes.POINTER(ctypes.c_int64))
        t.strides = ctypes.cast(c_strides, ctypes.POINTER(ctypes.c_int64)) if c_strides is not None else None
        t.byte_offset = byte_offset
        managed.manager_ctx = None
        managed.deleter = self.deleter
        if versioned:
            managed.version.major, managed.version.minor = VERSION
            managed.flags = FLAG_READ_ONLY if read_only else 0
        address = ctypes.addressof(managed)
        slots = ((ctypes.c_void_p * 1)(), (ctypes.c_void_p * 1)(), (ctypes.c_void_p * 1)())
        self.sweep()
        entry = [managed, c_shape, c_strides, owner, None, slots]
        with self.lock:
            self.live[address] = entry
        try:
            capsule = _capsule_new(address, NAME_VERSIONED if versioned else NAME_LEGACY, None)
        except BaseException:
            with self.lock:
                self.live.pop(address, None)
            raise
        entry[4] = capsule
        return capsule


EXPORTER = _Exporter()


class ArrayView:
    """A typed, strided view of an allocation (``Allocation.view``): ``dtype``, ``shape``, ``strides`` (in
    elements, C order when not given), ``offset`` (bytes from the allocation's start).  It keeps the allocation
    alive.  Views of memory a consumer can address export DLPack (:class:`DLPackView`); device memory with no
    DLPack device type numpy or others accept (OpenCL buffers, private Metal buffers) has a plain view without
    ``__dlpack__``/``__dlpack_device__``."""

    def __init__(self, allocation: Any, dtype: DType, shape: tuple[int, ...], strides: tuple[int, ...] | None,
                 offset: int, stream: Any = None) -> None:
        self.allocation = allocation
        self.dtype = dtype
        self.shape = shape
        self.strides = strides  # None: C-contiguous
        self.offset = offset
        self.stream = stream  # the producer stream (CUDA/HIP): what a consumer's stream waits for

    @property
    def device(self) -> Any:
        return self.allocation.device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        """The bytes of the elements (``size * itemsize``; for strided views, not the span)."""
        return self.size * self.dtype.size

    def contiguous_strides(self) -> tuple[int, ...]:
        out, acc = [], 1
        for s in reversed(self.shape):
            out.append(acc)
            acc *= s
        return tuple(reversed(out))

    @property
    def is_contiguous(self) -> bool:
        return self.strides is None or all(st == c for st, c, n in
                                           zip(self.strides, self.contiguous_strides(), self.shape) if n > 1)

    def _live(self, what: str) -> None:
        self.allocation._check_live(what)
        self.device._check_open(what)

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.dtype.name} shape={self.shape} strides={self.strides} "
                f"offset={self.offset} of {self.allocation!r}>")


class DLPackView(ArrayView):
    """An :class:`ArrayView` that exports DLPack (``np.from_dlpack(view)`` for host-visible memory, CuPy/PyTorch
    for CUDA/HIP device memory)."""

    def __dlpack_device__(self) -> tuple[int, int]:
        dev: tuple[int, int] | None = self.allocation._dlpack_device()
        assert dev is not None
        return dev

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """A capsule over the view (zero copy): ``"dltensor_versioned"`` (DLPack 1.x) if ``max_version`` is at
        least ``(1, 0)``, else the legacy ``"dltensor"``.  ``stream`` (CUDA/HIP): the consumer's stream (an int
        handle per the DLPack protocol, or any object with ``__cuda_stream__``); the backend orders it after the
        producer's work (``Allocation._dlpack_sync``)."""
        self._live("__dlpack__")
        if copy:
            raise BufferError(f"{self.device.kind.name} views export without copying (copy=True is not supported)")
        dev = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != dev:
            raise BufferError(f"cannot export {self!r} to device {tuple(dl_device)} (it is on {dev})")
        self.allocation._dlpack_sync(self, stream)
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        base = self.allocation._dlpack_address()
        return EXPORTER.export(self, base, dev, self.dtype, self.shape, self.strides, self.offset, versioned)


class CudaArrayView(DLPackView):
    """A :class:`DLPackView` of CUDA memory, with ``__cuda_array_interface__`` (v3)."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """Version 3: the real shape, typestr and strides (bytes; None when C-contiguous), ``data`` the address of
        the first element, ``stream`` the producer stream's handle (None: none to wait for)."""
        self._live("__cuda_array_interface__")
        ts = typestr(self.dtype)
        if ts is None:
            raise fail(ErrorKind.UNSUPPORTED, "__cuda_array_interface__", f"{self.dtype.name} has no typestr",
                       self.device)
        s = self.stream
        handle = None if s is None else int(self.device.api.ffi.cast("uintptr_t", s.handle)) or None
        strides = None if self.is_contiguous else tuple(st * self.dtype.size for st in self.strides or ())
        return {"shape": self.shape, "typestr": ts, "data": (self.allocation.ptr + self.offset, False),
                "version": 3, "strides": strides, "stream": handle}


def make_view(allocation: Any, dtype: Any, shape: Any, strides: Any, offset: Any, stream: Any,
              cls: type[ArrayView]) -> ArrayView:
    """Check ``Allocation.view``'s arguments (INVALID_VALUE naming the bad one) and make the view."""
    what = "Allocation.view"
    backend = allocation.device.kind.name

    def bad(msg: str) -> Error:
        return fail(ErrorKind.INVALID_VALUE, what, msg, backend)

    allocation._check_live(what)
    allocation.device._check_open(what)
    dt = dtype_of(dtype, what, backend)

    def ints(v: Any, name: str) -> tuple[int, ...]:
        seq = (v,) if _integer(v) is not None else v
        if isinstance(seq, (str, bytes)) or not isinstance(seq, (tuple, list)):
            raise bad(f"{name} must be an int or a tuple of ints, not {type(v).__name__} ({v!r:.80})")
        out = tuple(_integer(x) for x in seq)
        if None in out:
            raise bad(f"{name} must hold ints, got {v!r:.80}")
        return out  # type: ignore[return-value]

    shp = ints(shape, "shape")
    if any(n < 0 for n in shp):
        raise bad(f"shape {shp} has a negative extent")
    st = None if strides is None else ints(strides, "strides")
    if st is not None and len(st) != len(shp):
        raise bad(f"strides {st} and shape {shp} differ in length")
    if st is not None and any(x < 0 for x in st):
        raise bad(f"strides {st}: negative strides are not supported")
    off = _integer(offset)
    if off is None or off < 0:
        raise bad(f"offset must be a non-negative int, not {offset!r}")
    if off % dt.size:
        raise bad(f"offset {off} is not a multiple of the {dt.size}-byte {dt.name} element")
    if 0 in shp:
        span = 0
    else:
        steps = st if st is not None else ArrayView(allocation, dt, shp, None, 0).contiguous_strides()
        span = (sum((n - 1) * s for n, s in zip(shp, steps)) + 1) * dt.size
    if off + span > allocation.nbytes:
        raise bad(f"{dt.name} shape {shp} strides {st} at offset {off} needs {off + span} bytes, past the end of "
                  f"{allocation!r}")
    if stream is not None and getattr(stream, "device", None) is not allocation.device:
        raise bad(f"stream must be None or a Stream of {allocation.device!r}, not {stream!r}")
    view = cls(allocation, dt, shp, st, off, stream)
    if isinstance(view, DLPackView):  # free() refuses while an exporting view is alive (as for host views)
        import weakref

        refs = [r for r in (allocation._views or ()) if r() is not None]
        refs.append(weakref.ref(view))
        allocation._views = refs
    return view


# ----------------------------------------------------------------------------------------------- import


class Imported:
    """A consumed capsule (or a ``__cuda_array_interface__`` producer): the memory's address, size, element
    type and shape, and what keeps the producer's memory alive.  ``release()`` (idempotent; also on drop) calls
    the producer's deleter once."""

    def __init__(self, address: int, nbytes: int, dtype: DType, shape: tuple[int, ...], device: tuple[int, int],
                 read_only: bool, deleter: Any = None, managed: int = 0, keep: Any = None) -> None:
        self.address = address
        self.nbytes = nbytes
        self.dtype = dtype
        self.shape = shape
        self.device = device
        self.read_only = read_only
        self._deleter = deleter
        self._managed = managed
        self._keep = keep
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            deleter, self._deleter, self._keep = self._deleter, None, None
        if deleter:
            deleter(self._managed)

    def __del__(self) -> None:
        self.release()


def consume_capsule(capsule: Any, function: str, backend: str | None) -> Imported:
    """Take ownership of a DLPack capsule (versioned or legacy): renamed ``used_...``; INVALID_VALUE (the
    deleter called at once) for a tensor this runtime cannot import: non-contiguous, an unknown dtype, lanes."""

    def bad(msg: str) -> Error:
        return fail(ErrorKind.INVALID_VALUE, function, msg, backend)

    if type(capsule).__name__ != "PyCapsule":
        raise bad(f"__dlpack__ returned {type(capsule).__name__}, not a capsule")
    if _capsule_is_valid(capsule, NAME_VERSIONED):
        address = _capsule_get_pointer(capsule, NAME_VERSIONED)
        vm = DLManagedTensorVersioned.from_address(address)
        if vm.version.major != 1:
            raise bad(f"DLPack version {vm.version.major}.{vm.version.minor} is not supported (1.x is)")
        _capsule_set_name(capsule, USED_VERSIONED)
        t, deleter, read_only = vm.dl_tensor, vm.deleter, bool(vm.flags & FLAG_READ_ONLY)
    elif _capsule_is_valid(capsule, NAME_LEGACY):
        address = _capsule_get_pointer(capsule, NAME_LEGACY)
        lm = DLManagedTensor.from_address(address)
        _capsule_set_name(capsule, USED_LEGACY)
        t, deleter, read_only = lm.dl_tensor, lm.deleter, False
    else:
        raise bad("the capsule is neither an unconsumed 'dltensor_versioned' nor 'dltensor'")
    imp = Imported(0, 0, DType.U8, (), (t.device.device_type, t.device.device_id), read_only,
                   deleter if deleter else None, address)
    code = (t.dtype.code, t.dtype.bits, t.dtype.lanes)
    dt = _BY_DLPACK.get(code)
    if dt is None:
        imp.release()
        raise bad(f"DLPack dtype (code {code[0]}, bits {code[1]}, lanes {code[2]}) has no DType")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    size = 1
    for n in shape:
        size *= n
    if t.strides and size:
        view = ArrayView(None, dt, shape, tuple(t.strides[i] for i in range(t.ndim)), 0)
        if not view.is_contiguous:
            imp.release()
            raise bad(f"a strided tensor (shape {shape}, strides {view.strides}) cannot be imported without a "
                      "copy: only C-contiguous tensors")
    imp.address = (t.data or 0) + t.byte_offset
    imp.nbytes, imp.dtype, imp.shape = size * dt.size, dt, shape
    return imp


def dlpack_of(obj: Any, stream: Any, function: str, backend: str | None) -> Imported:
    """Ask ``obj`` for a capsule (versioned first, legacy for producers that do not take ``max_version``) and
    consume it."""
    if not hasattr(obj, "__dlpack__"):
        raise fail(ErrorKind.INVALID_VALUE, function, f"{type(obj).__name__} does not export DLPack (no __dlpack__)",
                   backend)
    try:
        capsule = obj.__dlpack__(stream=stream, max_version=VERSION)
    except TypeError:
        capsule = obj.__dlpack__(stream=stream)
    except BufferError as e:
        raise fail(ErrorKind.INVALID_VALUE, function, f"the producer refused: {e}", backend) from None
    except Error as e:  # (this runtime's own allocation refused: freed, closed; named as the operation called)
        raise as_operation(e, "__dlpack__", function) from None
    return consume_capsule(capsule, function, backend)


def cuda_array_interface_of(obj: Any, function: str, backend: str | None) -> tuple[Imported, int | None]:
    """``obj.__cuda_array_interface__`` (or the dict itself) read: the memory (the producer kept alive) and the
    producer's stream handle (None: none).  INVALID_VALUE for a version < 2 shape, a typestr with no DType, or
    strides that are not C-contiguous."""

    def bad(msg: str) -> Error:
        return fail(ErrorKind.INVALID_VALUE, function, msg, backend)

    cai = obj if isinstance(obj, dict) else getattr(obj, "__cuda_array_interface__", None)
    if not isinstance(cai, dict):
        raise bad(f"{type(obj).__name__} has no __cuda_array_interface__")
    try:
        shape = tuple(int(n) for n in cai["shape"])
        ts = str(cai["typestr"])
        address, read_only = cai["data"]
    except (KeyError, TypeError, ValueError) as e:
        raise bad(f"a malformed __cuda_array_interface__ ({e!r})") from None
    dt = _BY_TYPESTR.get(ts[1:]) if ts[:1] in "<|=" else None
    if dt is None:
        raise bad(f"typestr {ts!r} has no DType (little-endian numeric types only)")
    if cai.get("mask") is not None:
        raise bad("masked arrays cannot be imported")
    strides = cai.get("strides")
    view = ArrayView(None, dt, shape, None, 0)
    if strides is not None and any(s != c * dt.size for s, c, n in zip(strides, view.contiguous_strides(), shape)
                                   if n > 1):
        raise bad(f"strides {tuple(strides)} are not C-contiguous")
    stream = cai.get("stream")
    # (the protocol is CUDA's: its memory is CUDA device memory, of CUDA's DLPack device type)
    imp = Imported(int(address or 0), view.nbytes, dt, shape, (BackendKind.CUDA.dlpack_device, -1), bool(read_only),
                   keep=obj)
    return imp, (int(stream) if stream is not None else None)


def imported_kind(device_type: int) -> MemoryKind:
    """The MemoryKind of an imported tensor's DLPack device type."""
    if device_type == KDL_CUDA_MANAGED:
        return MemoryKind.UNIFIED
    if device_type in (KDL_CUDA_HOST, KDL_ROCM_HOST):
        return MemoryKind.HOST_PINNED
    if device_type == KDL_CPU:
        return MemoryKind.HOST
    return MemoryKind.DEVICE


def wrong_device(function: str, backend: BackendKind, got: tuple[int, int], want: str) -> Error:
    return fail(ErrorKind.INVALID_VALUE, function, f"the tensor is on DLPack device {got}, not {want}", backend)
