"""The kernel-argument policy: one set of rules, written once, that every backend's launch applies.

A kernel parameter is a **buffer** (OpenCL ``__global``/``__constant`` pointer, Metal ``device``/``constant T *``,
CUDA/HIP pointer, every QNN tensor), a **value** (by-value scalar, struct or vector) or **local memory** (an OpenCL
``__local`` pointer).  What each takes, on every backend:

=========================  ==========================================================================================
buffer parameter           an :class:`Allocation` (pooled block or slice included) of the launching stream's device,
                           live.  Freed (a slice's allocation freed): ``INVALID_HANDLE``.  Another device's or
                           context's allocation, or a slice of one: ``INVALID_VALUE``.  An allocation of another
                           backend (a Metal buffer given to OpenCL): ``INVALID_VALUE`` naming the argument.  A value,
                           ``None`` or anything else: ``INVALID_VALUE``.
value parameter            a numpy scalar, a ``Scalar(value, DType)``, or ``bytes``/``bytearray`` of exactly the
                           parameter's size; a plain Python ``int``/``float``/``bool`` is converted to the
                           parameter's type where the backend knows it (OpenCL: ``clGetKernelArgInfo`` type names;
                           Metal: the kernel's signature), an ``int`` out of the type's range or a ``float`` for an
                           integer parameter refused; where the type is not known (CUDA/HIP know sizes only, an
                           OpenCL ``typedef`` or vector type) a Python number is refused: pass ``np.int32(..)`` or
                           ``Scalar(..)``.  A numpy scalar or Scalar of another *kind* than a known parameter type
                           (``np.int32`` for a ``float``: its bits would be read as a float) or of another size
                           (``np.float64`` for a ``float``; 3 bytes for an ``int``) is refused.  Integers of the
                           parameter's size but the other signedness are taken (the bits are what C's conversion
                           gives).  ``None``, an Allocation or :class:`LocalMemory`: refused.
local memory parameter     ``LocalMemory(nbytes)``: ``nbytes`` of ``__local`` memory per work-group, sized at launch
                           (OpenCL ``clSetKernelArg(i, nbytes, NULL)``).  Anything else: refused.
=========================  ==========================================================================================

Where a backend cannot tell, the gap is the vendor's: CUDA/HIP device pointers are process-wide (unified
addressing), so an allocation of another device of the same backend is passed as its pointer (peer access; the
driver answers if the device cannot reach it), and a program from an OpenCL runtime that keeps no argument
information (``clGetKernelArgInfo`` refused) has its arguments taken by their own type.

Every refusal is ``Error(INVALID_VALUE)`` (``INVALID_HANDLE`` for freed memory) naming the argument's index and the
kernel, checked or unchecked alike (``launch_unchecked`` returns it): these are type dispatches made where the
argument changes, never per launch of the same arguments.

Dynamic local memory has one meaning per backend: CUDA/HIP ``LaunchDims.shared_mem`` (``sharedMemBytes``, the
kernel's ``extern __shared__`` array); OpenCL a :class:`LocalMemory` argument per ``__local`` parameter.  Where a
backend cannot honour a request it is ``UNSUPPORTED``, never ignored: ``LaunchDims.shared_mem`` on OpenCL (use
``LocalMemory``), Metal (``setThreadgroupMemoryLength:atIndex:`` is not bound) and QNN; ``LocalMemory`` on
CUDA/HIP (use ``LaunchDims.shared_mem``), Metal and QNN.
"""

from __future__ import annotations

import sys
from typing import Any

from ironaccelerator._core import DType, ErrorKind

from .errors import Error, fail
from .integers import _integer
from .records import record
from .traits import Scalar

__all__ = ["LocalMemory", "Param", "arg_error", "local_error", "shared_mem_error", "value_bytes"]


@record()
class LocalMemory:
    """``nbytes`` of dynamic local (work-group) memory for one ``__local`` kernel parameter, sized at launch.

    ex) ``KernelLaunch(k, LaunchDims(4, 64), (buf, LocalMemory(64 * 4), np.uint32(n)))``

    Pass it as the argument of an OpenCL ``__local`` pointer parameter; each work-group gets its own ``nbytes``.
    Immutable and hashable.

    Args:
        nbytes: bytes of local memory per work-group, an integer in 1..2**64-1.

    Raises:
        Error: ``ErrorKind.INVALID_VALUE`` when ``nbytes`` is not a positive integer (a float, a bool, 0, a
            negative number).  At launch: ``INVALID_VALUE`` in a buffer or value slot, ``UNSUPPORTED`` on a
            backend without it.

    Backends:
        OpenCL: ``clSetKernelArg(i, nbytes, NULL)``.  ``UNSUPPORTED`` at launch on CUDA/HIP (their dynamic shared
        memory is ``LaunchDims.shared_mem``), Metal and QNN, raised by ``launch`` and returned by
        ``launch_unchecked``, never ignored.
    """

    __slots__ = ("nbytes",)
    nbytes: int

    def __init__(self, nbytes: int) -> None:
        n = _integer(nbytes)
        if n is None or n < 1 or n > 2**64 - 1:
            raise fail(ErrorKind.INVALID_VALUE, "LocalMemory", "nbytes must be a positive integer (bytes of local "
                       f"memory per work-group), not {nbytes!r}", None)
        object.__setattr__(self, "nbytes", n)


@record()
class Param:
    """What a backend knows of one by-value parameter: ``kind`` (``"f"`` floating, ``"i"``/``"u"`` integer,
    ``"b"`` bool; None: not known), ``size`` in bytes (None: not known) and ``text`` (how to name it)."""

    __slots__ = ("kind", "size", "text")
    kind: str | None
    size: int | None
    text: str

    def __init__(self, kind: str | None, size: int | None, text: str = "") -> None:
        _set = object.__setattr__
        _set(self, "kind", kind)
        _set(self, "size", size)
        _set(self, "text", text)


# OpenCL C / Metal Shading Language scalar type names -> (kind, size)
SCALAR_TYPES: dict[str, tuple[str, int]] = {
    "bool": ("b", 1), "char": ("i", 1), "schar": ("i", 1), "uchar": ("u", 1), "int8_t": ("i", 1),
    "uint8_t": ("u", 1), "short": ("i", 2), "ushort": ("u", 2), "int16_t": ("i", 2), "uint16_t": ("u", 2),
    "int": ("i", 4), "uint": ("u", 4), "int32_t": ("i", 4), "uint32_t": ("u", 4), "long": ("i", 8),
    "ulong": ("u", 8), "int64_t": ("i", 8), "uint64_t": ("u", 8), "size_t": ("u", 8), "half": ("f", 2),
    "float": ("f", 4), "double": ("f", 8), "unsigned char": ("u", 1), "unsigned short": ("u", 2),
    "unsigned int": ("u", 4), "unsigned long": ("u", 8), "signed char": ("i", 1),
}
_STRUCT = {("i", 1): "b", ("u", 1): "B", ("i", 2): "h", ("u", 2): "H", ("i", 4): "i", ("u", 4): "I", ("i", 8): "q",
           ("u", 8): "Q", ("f", 2): "e", ("f", 4): "f", ("f", 8): "d", ("b", 1): "?"}
_KIND_WORDS = {"f": "floating-point", "i": "integer", "u": "integer", "b": "bool"}


def param_of(type_name: str, text: str = "") -> Param:
    """A value parameter from its C type name (OpenCL ``CL_KERNEL_ARG_TYPE_NAME``, an MSL type): kind and size
    where it is a known scalar type, else both None (vectors, structs, typedefs)."""
    known = SCALAR_TYPES.get(" ".join(type_name.replace("const", " ").split()))
    return Param(known[0], known[1], text or type_name) if known else Param(None, None, text or type_name)


def _scalar_class(dtype: DType) -> str | None:
    cls = dtype.numeric_class.name
    if cls == "SIGNED_INT":
        return "i"
    if cls == "UNSIGNED_INT":
        return "u"
    if cls == "BOOL":
        return "b"
    if cls == "FLOAT":
        return "f"
    return None  # bf16, fp8, complex: no C scalar type of theirs is known here (their size is still checked)


_NUMPY: dict[type, tuple[str, int] | None] = {}  # numpy scalar type -> (kind, size); None: not a plain scalar


def _numpy_kind(t: type) -> tuple[str, int] | None | bool:
    """(kind, size) of a numpy scalar type, None for other numpy scalars (structured, complex, datetime), False
    for anything that is not a numpy scalar (decided once per type)."""
    try:
        return _NUMPY[t]
    except KeyError:
        pass
    np = sys.modules.get("numpy")
    if np is None or not issubclass(t, np.generic):
        return False
    dt = np.dtype(t) if not issubclass(t, np.void) else None
    r = None if dt is None or dt.kind not in "biuf" else ("i" if dt.kind == "i" else dt.kind, dt.itemsize)
    if len(_NUMPY) < 256:
        _NUMPY[t] = r
    return r


def _matches(kind: str, size: int, param: Param) -> bool:
    if param.size is not None and size != param.size:
        return False
    if param.kind is None or kind == param.kind:
        return True
    return kind in "iu" and param.kind in "iu"  # signedness: the bits C's conversion gives


def where(index: int, kernel: str | None) -> str:
    """How an Error names argument ``index`` of ``kernel`` (made only when there is an Error to raise)."""
    return f"argument {index} of kernel {kernel!r}" if kernel is not None else f"argument {index}"


def value_bytes(a: Any, param: Param | None, index: int, kernel: str | None, backend: str, function: str) -> bytes:
    """The bytes of argument ``a`` for a by-value parameter (``param``: what is known of it, None: nothing), by
    the policy in this module's docstring; ``index`` and ``kernel`` (its name) name the argument in an Error."""
    t = type(a)
    nk = _numpy_kind(t)
    if nk is not False:  # a numpy scalar
        if nk is None:  # structured (np.void), complex, datetime: its bytes, sized
            if getattr(getattr(a, "dtype", None), "hasobject", False):
                raise arg_error(where(index, kernel),
                                f"a numpy value of dtype {a.dtype} holds Python objects, not bytes a kernel "
                                "can take", backend, function)
            data: bytes = a.tobytes()
            _check_size(data, param, index, kernel, a, backend, function)
            return data
        kind, size = nk  # type: ignore[misc]
        if param is not None and not _matches(kind, size, param):
            raise _mismatch(where(index, kernel), a, f"numpy {t.__name__}", param, backend, function)
        return a.tobytes()  # type: ignore[no-any-return]
    if t is Scalar:
        kind = _scalar_class(a.dtype)
        if param is not None and kind is not None and not _matches(kind, a.dtype.size, param):
            raise _mismatch(where(index, kernel), a, f"Scalar of {a.dtype.name}", param, backend, function)
        data = scalar_bytes(a, backend, function)
        _check_size(data, param, index, kernel, a, backend, function)
        return data
    if t is bytes or t is bytearray:
        data = bytes(a)
        _check_size(data, param, index, kernel, a, backend, function)
        if not data:
            raise arg_error(where(index, kernel),
                            "an empty value (0 bytes)", backend, function)
        return data
    if t is int or t is float or t is bool:
        return _python_number(a, param, index, kernel, backend, function)
    if a is None:
        raise arg_error(where(index, kernel),
                        "is None; pass a numpy scalar (np.int32(n)), Scalar(value, DType) or bytes",
                        backend, function)
    if isinstance(a, LocalMemory):
        raise arg_error(where(index, kernel),
                        f"LocalMemory is for a __local parameter; `{_text(param)}` takes a value",
                        backend, function)
    from .traits import Allocation
    if isinstance(a, Allocation):
        raise arg_error(where(index, kernel),
                        f"an allocation ({a!r}) for `{_text(param)}`, which takes a value", backend, function)
    if isinstance(a, Scalar):  # (a subclass)
        return value_bytes(Scalar(a.value, a.dtype), param, index, kernel, backend, function)
    raise arg_error(where(index, kernel),
                    f"{t.__name__} ({a!r:.60}) is not a kernel argument: pass an Allocation, a numpy scalar "
                    "(np.int32(n)), Scalar(value, DType) or bytes", backend, function)


def _text(param: Param | None) -> str:
    return param.text if param is not None and param.text else "the parameter"


def _check_size(data: bytes, param: Param | None, index: int, kernel: str | None, a: Any, backend: str,
                function: str) -> None:
    if param is not None and param.size is not None and len(data) != param.size:
        raise arg_error(where(index, kernel),
                        f"a {len(data)}-byte value ({a!r:.60}) for `{_text(param)}`, which is {param.size} "
                        "bytes", backend, function)


def _mismatch(where: str, a: Any, what: str, param: Param, backend: str, function: str) -> Error:
    want = f"{_KIND_WORDS.get(param.kind or '', 'a')} {param.size * 8 if param.size else ''}-bit".replace(" -bit", "")
    return arg_error(where, f"{what} ({a!r:.60}) for `{_text(param)}` ({want}): its bits would be read as another "
                     "type; pass a value of the parameter's type (a numpy scalar, a Scalar or a Python number)",
                     backend, function)


def _python_number(a: Any, param: Param | None, index: int, kernel: str | None, backend: str,
                   function: str) -> bytes:
    """A Python int/float/bool converted to the parameter's known type, or refused."""
    if param is None or param.kind is None or param.size is None:
        hint = "np.float32(x)" if type(a) is float else "np.int32(n)"
        raise arg_error(where(index, kernel),
                        f"a Python {type(a).__name__} ({a!r}) for `{_text(param)}`, whose type the "
                        f"{backend} backend does not know: use {hint} or Scalar(value, DType)", backend, function)
    kind, size = param.kind, param.size
    fmt = _STRUCT.get((kind, size))
    if fmt is None:
        raise arg_error(where(index, kernel),
                        f"cannot convert {a!r} to `{_text(param)}`: pass a numpy scalar or Scalar", backend,
                        function)
    import struct  # (here, not at import: the OpenCL early start keeps extension modules out of the backend's import)

    if kind == "f":
        try:
            return struct.pack("<" + fmt, a)
        except (OverflowError, struct.error):
            raise arg_error(where(index, kernel),
                            f"{a!r} overflows `{_text(param)}`", backend, function) from None
    if type(a) is float:
        raise arg_error(where(index, kernel),
                        f"a float ({a!r}) for the integer parameter `{_text(param)}`: pass an int",
                        backend, function)
    if kind == "b" and a not in (0, 1):
        raise arg_error(where(index, kernel),
                        f"{a!r} for the bool parameter `{_text(param)}`: pass True/False", backend, function)
    try:
        return struct.pack("<" + fmt, a)
    except struct.error:
        raise arg_error(where(index, kernel),
                        f"{a!r} is out of range for `{_text(param)}` ({'un' if kind == 'u' else ''}signed "
                        f"{size * 8}-bit)", backend, function) from None


def scalar_bytes(a: Scalar, backend: str, function: str) -> bytes:
    """The little-endian bytes of a Scalar (its value was checked against its DType when made)."""
    import struct  # (as in _python_number)

    dt = a.dtype
    kind = _scalar_class(dt)
    fmt = _STRUCT.get((kind, dt.size)) if kind is not None else None
    if fmt is not None:
        return struct.pack("<" + fmt, a.value)
    cls = dt.numeric_class.name
    if cls == "COMPLEX":
        c = complex(a.value)
        return struct.pack("<ff" if dt.size == 8 else "<dd", c.real, c.imag)
    raise fail(ErrorKind.UNSUPPORTED, function, f"{dt.name} scalars are not supported by the {backend} backend "
               "(pass the bits as bytes or a numpy scalar)", backend)


def arg_error(where: str, problem: str, backend: str, function: str,
              kind: ErrorKind = ErrorKind.INVALID_VALUE) -> Error:
    """The Error of a refused kernel argument: ``<function>: <where>: <problem>``."""
    return fail(kind, function, f"{where}: {problem}", backend)


def buffer_error(where: str, a: Any, backend: str, function: str, device: Any = None) -> Error:
    """The INVALID_VALUE for something that is not a usable allocation in a buffer parameter."""
    from .traits import Allocation
    if a is None:
        problem = "is None; pass an Allocation of this device"
    elif isinstance(a, Allocation):
        other = getattr(getattr(a, "device", None), "kind", None)
        if other is not None and getattr(other, "name", None) != backend:
            problem = f"{a!r} is a {other.name} allocation, not {backend} memory"
        elif getattr(getattr(a, "device", None), "_closed", False):  # (what a closed device made: as everywhere)
            return arg_error(where, f"{a!r}: its device was closed", backend, function, ErrorKind.INVALID_HANDLE)
        else:
            problem = f"{a!r} belongs to another device (context) than the stream's"
    elif isinstance(a, LocalMemory):
        problem = "LocalMemory is for a __local parameter; this one takes a buffer (an Allocation)"
    else:
        problem = f"{type(a).__name__} ({a!r:.60}) in a buffer parameter: pass an Allocation of this device"
    return arg_error(where, problem, backend, function)


def local_error(backend: str, function: str, where: str) -> Error:
    """UNSUPPORTED: a LocalMemory argument on a backend without local-memory parameters."""
    hint = " (dynamic shared memory is LaunchDims.shared_mem here)" if backend in ("CUDA", "ROCM") else ""
    return arg_error(where, f"LocalMemory arguments are not supported by the {backend} backend{hint}", backend,
                     function, ErrorKind.UNSUPPORTED)


def shared_mem_error(backend: str, function: str, shared_mem: int) -> Error:
    """UNSUPPORTED: ``LaunchDims.shared_mem`` on a backend that cannot honour it (never silently ignored)."""
    hint = {"OPENCL": "; pass a LocalMemory(nbytes) argument for each __local parameter instead",
            "METAL": " (setThreadgroupMemoryLength:atIndex: is not bound; declare threadgroup arrays in the kernel)",
            "QNN": " (a graph has no launch geometry)"}.get(backend, "")
    return fail(ErrorKind.UNSUPPORTED, function, f"LaunchDims.shared_mem={shared_mem}: dynamic shared memory is not "
                f"supported by the {backend} backend{hint}", backend)
