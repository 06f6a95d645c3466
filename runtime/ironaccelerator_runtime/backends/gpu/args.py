"""Kernel arguments: C strings for the vendor, :func:`pack_args` (a ``void *[]`` of pointers to the values) and the
cached per-kernel argument plans of the launch fast path."""

from __future__ import annotations

import struct
from typing import Any, Sequence

from ironaccelerator._core import DType, ErrorKind
from ironaccelerator_runtime.backends.gpu.tables import GpuTables
from ironaccelerator_runtime.errors import Error, fail
from ironaccelerator_runtime.kernel_args import LocalMemory, local_error, value_bytes, where
from ironaccelerator_runtime.traits import Allocation, Scalar


def _c_string(v: Any, what: str, function: str, backend: str) -> bytes:
    """A ``str`` parameter passed to the vendor as a NUL-terminated UTF-8 string: ``TypeError`` unless a str,
    ``INVALID_VALUE`` if it holds a NUL (C would see only the part before it) or cannot be encoded."""
    if not isinstance(v, str):
        raise TypeError(f"{function}: {what} must be a str, not {type(v).__name__} ({v!r})")
    if "\0" in v:
        raise fail(ErrorKind.INVALID_VALUE, function, f"{what} {v!r} contains a NUL character", backend)
    try:
        return v.encode()
    except UnicodeEncodeError:
        raise fail(ErrorKind.INVALID_VALUE, function, f"{what} {v!r} is not valid UTF-8", backend) from None


_SCALAR_FORMATS = {DType.F64: "d", DType.F32: "f", DType.F16: "e", DType.I8: "b", DType.I16: "h", DType.I32: "i",
                   DType.I64: "q", DType.U8: "B", DType.U16: "H", DType.U32: "I", DType.U64: "Q", DType.BOOL: "?"}


def _bf16_bits(value: float) -> int:
    """float -> bfloat16 bits, rounding to nearest even (NaN stays NaN)."""
    (bits,) = struct.unpack("<I", struct.pack("<f", float(value)))
    if bits & 0x7F800000 == 0x7F800000 and bits & 0x007FFFFF:
        return 0x7FC0
    return int(((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF)


def _scalar_bytes(s: Scalar, backend: str) -> tuple[bytes, int]:
    dt, v = s.dtype, s.value
    if dt is DType.C64 or dt is DType.C128:
        c = complex(v)
        fmt = "<ff" if dt is DType.C64 else "<dd"
        return struct.pack(fmt, c.real, c.imag), dt.size
    if dt is DType.BF16:
        if isinstance(v, complex):
            raise fail(ErrorKind.INVALID_VALUE, "Stream.launch", f"Scalar({v!r}, BF16): not a real number", backend)
        return struct.pack("<H", _bf16_bits(v)), 2
    if dt is DType.F8E4M3 or dt is DType.F8E5M2:
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 256:
            raise fail(ErrorKind.INVALID_VALUE, "Stream.launch",
                       f"Scalar({v!r}, {dt.name}): pass an fp8 value as its raw bits "
                       "(an int 0..255)", backend)
        return bytes([v]), 1
    return struct.pack("<" + _SCALAR_FORMATS[dt], v), dt.size


class PackedArgs:
    """Kernel arguments packed for the vendor's ``launch``: ``params`` is the ``void *[]`` (NULL when there
    are none) whose i-th pointer points at argument i's bytes in ``storage``."""

    __slots__ = ("params", "storage", "offsets", "sizes", "keep")

    def __init__(self, params: Any, storage: Any, offsets: tuple[int, ...], sizes: tuple[int, ...],
                 keep: tuple[Any, ...]) -> None:
        self.params = params
        self.storage = storage
        self.offsets = offsets
        self.sizes = sizes
        self.keep = keep  # the allocations passed: alive at least as long as the launch's arguments


def _arg_bytes(a: Any, i: int, backend: str) -> tuple[bytes, int]:
    """(bytes, alignment) of argument ``i``.  A freed allocation is INVALID_HANDLE in both modes (a flag test:
    its address may already belong to other memory)."""
    if isinstance(a, Allocation):
        if a._freed:
            a._check_live("Stream.launch")
        try:
            ptr = a.ptr  # type: ignore[attr-defined]
        except AttributeError:
            raise fail(ErrorKind.INVALID_VALUE, "Stream.launch", f"kernel argument {i}: {a!r} is not {backend} memory",
                       backend) from None
        return struct.pack("<Q", ptr), 8
    if isinstance(a, Scalar):
        data, align = _scalar_bytes(a, backend)
        return data, min(align, 16)
    dtype = getattr(a, "dtype", None)
    if dtype is not None and getattr(a, "ndim", None) == 0:  # a numpy scalar (or 0-d array)
        if getattr(dtype, "hasobject", False):  # its bytes would be Python object pointers
            raise fail(ErrorKind.INVALID_VALUE, "Stream.launch",
                       f"kernel argument {i}: a numpy value of dtype {dtype} holds Python "
                       "objects, not bytes a kernel can take", backend)
        data = a.tobytes()
        return data, int(getattr(dtype, "alignment", len(data)) or 1)
    if isinstance(a, (bytes, bytearray, memoryview)):
        if type(a) is memoryview and "O" in a.format:
            raise fail(ErrorKind.INVALID_VALUE, "Stream.launch",
                       f"kernel argument {i}: a buffer of Python objects is not bytes a "
                       "kernel can take", backend)
        data = bytes(a)
        align = 8 if len(data) % 8 == 0 else 4 if len(data) % 4 == 0 else 2 if len(data) % 2 == 0 else 1
        return data, align
    if type(a) is LocalMemory:  # (dynamic shared memory is LaunchDims.shared_mem here)
        raise local_error(backend, "Stream.launch", where(i, None))
    # None, a Python number (only parameter sizes are known here), anything else: the policy's refusal
    value_bytes(a, None, i, None, backend, "Stream.launch")
    raise fail(ErrorKind.INVALID_VALUE, "Stream.launch",
               f"kernel argument {i} ({type(a).__name__} {a!r:.60}): pass an Allocation, "
               "a numpy scalar (np.int32(n)) or Scalar(value, DType)", backend)


def _count_error(backend: str, expected: int, given: int, name: str | None = None,
                 function: str = "Stream.launch") -> Error:
    kernel = f"kernel {name!r}" if name is not None else "the kernel"
    return fail(ErrorKind.INVALID_VALUE, function, f"{kernel} takes {expected} argument{'s' if expected != 1 else ''}, "
                f"{given} given", backend)


def pack_args(args: Sequence[Any], ffi: Any, expected: Sequence[int] | None = None, *,
              check: bool = True, backend: str = "") -> PackedArgs:
    """Pack kernel arguments: an Allocation as its device pointer (8 bytes), a numpy scalar as its bytes,
    ``Scalar(value, DType)`` as that type; each value at its natural alignment in one buffer.

    ``expected``: the kernel's parameter sizes (from the vendor's ``param_info``); with ``check``, a count or
    size mismatch is ``INVALID_VALUE``; a freed allocation is ``INVALID_HANDLE`` always.  ``backend``: the backend
    named in errors.  Pure: needs ``ffi`` (any cffi FFI) but no device and no vendor library.
    """
    if check and expected is not None and len(args) != len(expected):
        raise _count_error(backend, len(expected), len(args))
    chunks = []
    offsets = []
    sizes = []
    end = 0
    for i, a in enumerate(args):
        data, align = _arg_bytes(a, i, backend)
        if check and expected is not None and len(data) != expected[i]:
            raise fail(ErrorKind.INVALID_VALUE, "Stream.launch",
                       f"kernel argument {i}: {len(data)} bytes given, the kernel's "
                       f"parameter is {expected[i]} bytes", backend)
        pad = -end % align
        if pad:
            chunks.append(b"\0" * pad)
            end += pad
        offsets.append(end)
        sizes.append(len(data))
        chunks.append(data)
        end += len(data)
    if not offsets:
        return PackedArgs(ffi.NULL, None, (), (), ())
    storage = ffi.new("char[]", b"".join(chunks))  # malloc'd: aligned for any type
    params = ffi.new("void *[]", [storage + off for off in offsets])
    keep = tuple(a for a in args if isinstance(a, Allocation))
    return PackedArgs(params, storage, tuple(offsets), tuple(sizes), keep)


# The launch fast path.  pack_args above is the reference; the Stream packs through an _ArgPlan instead:
# the layout pack_args would produce for one tuple of argument types (per kernel, built once), written by
# one struct.pack_into into a buffer that holds the void *[] and the values (the pointers fixed when the
# buffer is made).  Arguments whose bytes do not follow from their type (bytes, bytearray, memoryview,
# 0-d arrays, structured numpy scalars) and every failing check take pack_args, so errors are its own.
# how argument i becomes the value packed: its .ptr, itself (a numpy scalar struct packs as is), its
# .value (a Scalar of a plain type), its .tobytes(), or _scalar_bytes (BF16, FP8, complex)
_ALLOC, _ITSELF, _VALUE, _TOBYTES, _SCALAR_BYTES = 0, 1, 2, 3, 4
_NUMPY_KINDS = frozenset("biufcmM")  # numpy scalar kinds whose size follows from the type
_STRUCT_CODES = {("b", 1): "?", ("i", 1): "b", ("i", 2): "h", ("i", 4): "i", ("i", 8): "q", ("u", 1): "B",
                 ("u", 2): "H", ("u", 4): "I", ("u", 8): "Q", ("f", 2): "e", ("f", 4): "f", ("f", 8): "d"}
_MAX_PLANS = 64  # per kernel; past it, the cache is cleared
# what the compiled launch (_fast._launch) packs: an Allocation's .ptr (0), a numpy scalar's buffer (1);
# at most GpuTables.launch_max_args arguments and launch_max_bytes bytes (its buffer is on the C stack)
_LAYOUT_KINDS = {_ALLOC: 0, _ITSELF: 1, _TOBYTES: 1}
_EMPTY_LAYOUT = struct.pack("<I", 0)  # no arguments


class _ArgPlan:
    """One layout of a kernel's arguments: ``fmt`` packs the values (after the ``void *[]``) at ``offsets``;
    ``kinds[i]`` says how argument ``i`` becomes a value; ``allocs`` the indices of Allocations;
    ``checked``: the count and sizes match the kernel's parameter info (or it has none); ``layout``: the
    same layout for the compiled launch (``_fast._launch``, see trampolines.c), or None where that cannot
    pack these arguments (Scalars, too many or too large, a count or size the kernel does not take);
    ``backend``: the backend named in errors."""

    __slots__ = ("kinds", "fmt", "offsets", "size", "data_offset", "allocs", "checked", "layout", "backend")

    def __init__(self, kinds: tuple[int, ...], fmt: str, offsets: tuple[int, ...], sizes: tuple[int, ...],
                 size: int, allocs: tuple[int, ...], checked: bool, tables: GpuTables) -> None:
        self.kinds = kinds
        self.fmt = fmt
        self.offsets = offsets
        self.size = size
        self.data_offset = -(-8 * len(kinds) // 16) * 16  # the values start 16-aligned after the pointers
        self.allocs = allocs
        self.checked = checked
        self.layout: bytes | None = None
        self.backend = tables.name
        if checked and size <= tables.launch_max_bytes and len(kinds) <= tables.launch_max_args and all(
                k in _LAYOUT_KINDS for k in kinds):
            self.layout = struct.pack(f"<I{len(kinds) * 'BxHI'}", size, *[
                v for k, n, off in zip(kinds, sizes, offsets) for v in (_LAYOUT_KINDS[k], n, off)])

    def values(self, args: Sequence[Any]) -> list[Any]:
        return [a.ptr if k == _ALLOC else a if k == _ITSELF else a.value if k == _VALUE else
                a.tobytes() if k == _TOBYTES else _scalar_bytes(a, self.backend)[0] for a, k in zip(args, self.kinds)]

    def buffer(self, ffi: Any) -> tuple[Any, Any, Any]:
        """A fresh (storage, writable view, params): the ``void *[]`` written, the values not yet."""
        storage = ffi.new("char[]", self.data_offset + max(self.size, 1))  # malloc'd: aligned for any type
        view = ffi.buffer(storage)
        base = int(ffi.cast("uintptr_t", storage)) + self.data_offset
        struct.pack_into(f"<{len(self.kinds)}Q", view, 0, *[base + off for off in self.offsets])
        return storage, view, ffi.cast("void **", storage)


def _arg_plan(args: Sequence[Any], expected: Sequence[int] | None,
              tables: GpuTables) -> tuple[_ArgPlan | None, bool]:
    """(the plan for ``args``' types, whether to cache it): None when their bytes do not follow from their
    types; None, not cached, when these values cannot be packed (pack_args will say why; other values of the
    same types may be fine)."""
    kinds: list[int] = []
    offsets: list[int] = []
    sizes: list[int] = []
    allocs: list[int] = []
    fmt = "<"
    end = 0
    checked = expected is None or len(expected) == len(args)
    for i, a in enumerate(args):
        try:
            data, align = _arg_bytes(a, i, tables.name)
        except Error:
            return None, False
        if isinstance(a, Allocation):
            kind, code = _ALLOC, "Q"
            allocs.append(i)
        elif type(a) is Scalar:
            code = _SCALAR_FORMATS.get(a.dtype, "")
            kind = _VALUE if code else _SCALAR_BYTES
        else:
            dtype = getattr(a, "dtype", None)
            if dtype is None or type(a) is not getattr(dtype, "type", None) or getattr(dtype, "kind", "") not in \
                    _NUMPY_KINDS:
                return None, True  # not a numpy scalar (a 0-d array is mutable; bytes vary in size)
            code = _STRUCT_CODES.get((dtype.kind, len(data)), "")
            kind = _ITSELF if code else _TOBYTES
        pad = -end % align
        if pad:
            fmt += f"{pad}x"
            end += pad
        offsets.append(end)
        sizes.append(len(data))
        fmt += code or f"{len(data)}s"
        end += len(data)
        kinds.append(kind)
        if expected is not None and checked and len(data) != expected[i]:
            checked = False
    return _ArgPlan(tuple(kinds), fmt, tuple(offsets), tuple(sizes), end, tuple(allocs), checked,
                    tables), True
