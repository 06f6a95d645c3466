"""The argument and range checks the trait bases and every backend share (sizes, spans, fills, strided copy
regions, host buffers), and the Errors of the base classes (``unsupported``, not picklable)."""

from __future__ import annotations

from typing import Any

from ironaccelerator._core import BackendKind, ErrorKind

from ..errors import Error, fail
from ..integers import _integer
from ..records import record
from .values import DeviceDescriptor, _SIZE_MAX


def unsupported(backend: BackendKind | None, what: str, function: str | None = None) -> Error:
    """The ``UNSUPPORTED`` Error of ``what`` (an operation, ex. ``"Stream.capture"``, or a phrase) on ``backend``;
    ``function``: the operation's name where ``what`` is a phrase (``Error.function`` is always a name)."""
    return fail(ErrorKind.UNSUPPORTED, function or what,
                f"{what} is not supported by the {backend.name if backend else '?'} backend", backend)


def foreign(owner: Any, function: str, message: str, backend: Any) -> Error:
    """The Error of an object (allocation, kernel, event, stream) of ``owner``, another device than the one an
    operation runs on: ``INVALID_HANDLE`` when ``owner`` was closed (what a closed device made is refused so on
    every backend, before the question of whose it is), else ``INVALID_VALUE`` with ``message``.  The failure
    path only."""
    if getattr(owner, "_closed", False):
        return owner._closed_error(function)  # type: ignore[no-any-return]
    return fail(ErrorKind.INVALID_VALUE, function, message, backend)


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


def check_size(v: Any, what: str, function: str, backend: BackendKind | str | None = None, *,
               minimum: int = 1) -> int:
    """A checked size/count parameter: ``TypeError`` (naming it) unless an integer, ``INVALID_VALUE`` below
    ``minimum`` or above ``size_t``."""
    n = _integer(v)
    if n is None:
        raise TypeError(f"{function}: {what} must be an integer, not {type(v).__name__} ({v!r})")
    if n < minimum or n > _SIZE_MAX:
        raise fail(ErrorKind.INVALID_VALUE, function, f"{what}={n} is out of range "
                   f"({minimum}..{_SIZE_MAX})", backend)
    return n


def check_span(size: int, offset: Any, nbytes: Any, what: str, function: str,
               backend: BackendKind | str | None = None, *, width: int = 1) -> tuple[int, int]:
    """``(offset, nbytes)`` of a byte range inside something of ``size`` bytes (``what``: "dst", "the source",
    ...): ``nbytes`` None means the rest after ``offset``.  ``INVALID_VALUE`` for a range past the end, or (for a
    ``width``-byte pattern) an offset or length that is not a multiple of the width; ``TypeError`` for non-integers."""
    o = check_size(offset, f"{what} offset", function, backend, minimum=0)
    n = size - o if nbytes is None else check_size(nbytes, "nbytes", function, backend, minimum=0)
    if o + n > size or n < 0:
        raise fail(ErrorKind.INVALID_VALUE, function, f"{what}: offset {o} + {max(n, 0)} bytes is past its end "
                   f"({size} bytes)", backend)
    if width > 1 and (o % width or n % width):
        raise fail(ErrorKind.INVALID_VALUE, function, f"offset {o} and nbytes {n} must be multiples of the "
                   f"{width}-byte pattern", backend)
    return o, n


def host_span(host_size: int, device_size: int, nbytes: Any, host_offset: Any, device_offset: Any, function: str,
              backend: BackendKind | str | None = None, *, to_device: bool) -> tuple[int, int, int]:
    """``(host_offset, device_offset, nbytes)`` of a copy between a host buffer and an allocation: without
    ``nbytes`` the host buffer's bytes after its offset, which must fit in the allocation after its offset."""
    ho, n = check_span(host_size, host_offset, nbytes, "the host source" if to_device else "the host destination",
                       function, backend)
    do, _ = check_span(device_size, device_offset, n, "dst" if to_device else "src", function, backend)
    return ho, do, n


def fill_pattern(value: Any, width: Any, function: str, backend: BackendKind | str | None = None) -> tuple[int, int]:
    """``(value, width)`` of a fill: ``width`` 1, 2 or 4 bytes, ``value`` an unsigned integer of that width."""
    w = check_size(width, "width", function, backend)
    if w not in (1, 2, 4):
        raise fail(ErrorKind.INVALID_VALUE, function, f"width={w}: a fill pattern is 1, 2 or 4 bytes", backend)
    v = check_size(value, "value", function, backend, minimum=0)
    if v >= 1 << (8 * w):
        raise fail(ErrorKind.INVALID_VALUE, function, f"value={v} does not fit in {w} byte{'s' if w > 1 else ''}",
                   backend)
    return v, w


@record()
class CopyRegion:
    """A checked strided copy (``Stream.copy_2d``/``copy_3d``): ``depth`` slices of ``height`` rows of ``width``
    bytes; per side, the byte offset of the first row and the pitches (bytes from the start of one row, or slice, to
    the next).  Every row lies inside its side; the slice pitch is a multiple of the row pitch (OpenCL's rule, and
    the only layout CUDA/HIP's ``<side>Height`` can say).  ``dims``: 2 (a 2-D copy) or 3."""

    __slots__ = ("dims", "width", "height", "depth", "dst_offset", "dst_pitch", "dst_slice_pitch", "src_offset",
                 "src_pitch", "src_slice_pitch")
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

    def __init__(self, dims: int, width: int, height: int, depth: int, dst_offset: int, dst_pitch: int,
                 dst_slice_pitch: int, src_offset: int, src_pitch: int, src_slice_pitch: int) -> None:
        _set = object.__setattr__
        _set(self, "dims", dims)
        _set(self, "width", width)
        _set(self, "height", height)
        _set(self, "depth", depth)
        _set(self, "dst_offset", dst_offset)
        _set(self, "dst_pitch", dst_pitch)
        _set(self, "dst_slice_pitch", dst_slice_pitch)
        _set(self, "src_offset", src_offset)
        _set(self, "src_pitch", src_pitch)
        _set(self, "src_slice_pitch", src_slice_pitch)

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
    if v is None:
        row, slab = width, None
    elif dims == 3 and isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise fail(ErrorKind.INVALID_VALUE, function, f"{what}_pitch must be a row pitch or a (row, slice) "
                       f"pair, not {v!r}", backend)
        row = check_size(v[0], f"{what} row pitch", function, backend, minimum=0)
        slab = check_size(v[1], f"{what} slice pitch", function, backend, minimum=0)
    else:
        row, slab = check_size(v, f"{what}_pitch", function, backend, minimum=0), None
    if row < width:
        raise fail(ErrorKind.INVALID_VALUE, function, f"{what} pitch {row} is less than the width ({width} bytes): "
                   "rows would overlap", backend)
    if slab is None:
        return row, row * height
    if slab < row * height or (row and slab % row):
        raise fail(ErrorKind.INVALID_VALUE, function, f"{what} slice pitch {slab} must be a multiple of the row "
                   f"pitch {row} and at least {height} rows ({row * height} bytes)", backend)
    return row, slab


def _origin(v: Any, row: int, slab: int, what: str, function: str, backend: BackendKind | str | None,
            dims: int) -> int:
    """A side's offset in bytes: an int, or an ``(x bytes, y rows[, z slices])`` origin of its pitches."""
    if isinstance(v, (tuple, list)):
        if not 2 <= len(v) <= dims:
            raise fail(ErrorKind.INVALID_VALUE, function, f"{what}_offset must be bytes or an (x, y"
                       f"{', z' if dims == 3 else ''}) origin, not {v!r}", backend)
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
    if isinstance(extent, (str, bytes)) or not isinstance(extent, (tuple, list)) or len(extent) != dims:
        raise fail(ErrorKind.INVALID_VALUE, function, f"the extent must be {dims} sizes (width in bytes, height"
                   f"{', depth' if dims == 3 else ''}), not {extent!r}", backend)
    width, height, depth = [check_size(x, w, function, backend, minimum=0)
                            for x, w in zip((*extent, 1), ("width", "height", "depth"))]
    sides = {}
    for what, size, pitch, offset in (("dst", dst_size, dst_pitch, dst_offset), ("src", src_size, src_pitch,
                                                                                 src_offset)):
        row, slab = _pitches(pitch, width, height, what, function, backend, dims)
        o = _origin(offset, row, slab, what, function, backend, dims)
        end = o if not (width and height and depth) else o + (depth - 1) * slab + (height - 1) * row + width
        if end > size:
            raise fail(ErrorKind.INVALID_VALUE, function, f"{what}: the region from offset {o} ends at byte {end}, "
                       f"past its end ({size} bytes)", backend)
        sides[what] = (o, row, slab)
    return CopyRegion(dims, width, height, depth, *sides["dst"], *sides["src"])


def not_a_launch(obj: Any, function: str) -> TypeError:
    """The TypeError for a launch argument that is not a :class:`KernelLaunch` (raised by the backends from
    the AttributeError or unpacking error it causes, so the hot path pays no isinstance test)."""
    return TypeError(f"{function}: launch must be a KernelLaunch, not {type(obj).__name__} ({obj!r:.80})")


def _owner(obj: object) -> str:
    """``on <device id>`` for a repr, from ``obj.device`` (or ``obj.module.device``), if it has one."""
    dev = getattr(obj, "device", None) or getattr(getattr(obj, "module", None), "device", None)
    d = getattr(dev, "descriptor", None)
    if d is None:
        return ""
    return f" on {d.id}{' (closed)' if getattr(dev, '_closed', False) else ''}"


def host_view(obj: Any, writable: bool = False, *, backend: BackendKind | str | None = None,
              function: str | None = None) -> memoryview:
    """A flat byte view of any buffer-protocol object (numpy arrays, bytes, bytearray, memoryview).

    Refused with ``INVALID_VALUE``: objects without the buffer protocol, read-only destinations,
    non-contiguous buffers, buffers of Python object pointers (numpy ``object`` dtypes, format ``O``):
    raw bytes copied over them would be dangling references, and numpy scalars or 0-d arrays: a value,
    not a buffer (``np.int64(-5)`` given where an array was meant).
    """
    function = function or "host_view"
    if getattr(obj, "ndim", 1) == 0:
        raise fail(ErrorKind.INVALID_VALUE, function, "a numpy scalar (or 0-d array) is not a host buffer "
                   f"(got {obj!r}; pass an array)", backend)
    try:
        mv = memoryview(obj)
    except TypeError:
        raise fail(ErrorKind.INVALID_VALUE, function,
                   f"{type(obj).__name__} does not support the buffer protocol", backend) from None
    if "O" in mv.format:
        raise fail(ErrorKind.INVALID_VALUE, function,
                   f"a buffer of Python objects (format {mv.format!r}) cannot be "
                   "copied to or from a device", backend)
    if writable and mv.readonly:
        raise fail(ErrorKind.INVALID_VALUE, function, "the destination buffer is read-only", backend)
    if not mv.c_contiguous:
        raise fail(ErrorKind.INVALID_VALUE, function, "host buffers must be C-contiguous", backend)
    return mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv
