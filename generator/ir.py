"""The intermediate representation of a parsed C API.

Plain frozen value objects that "look like a C header" and know nothing of
libclang or pycparser.  Both front-ends translate into these classes, and the
agreement test compares their output with ``==``: source locations are carried
for diagnostics but excluded from equality.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

__all__ = [
    "Location", "Builtin", "TypedefRef", "RecordRef", "EnumRef", "Pointer", "Array",
    "FunctionProto", "InlineRecord", "InlineEnum", "CType", "Param", "Function", "Typedef",
    "EnumConstant", "Enum", "Field", "Record", "Macro", "MacroConstant", "Rename",
    "Header", "BUILTIN_NAMES",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Location:
    """A position in a source file.  ex) ``cuda.h:5149:10``"""

    file: str  # ex) cuda.h (a path relative to the SDK include directory)
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NOWHERE = Location(file="<unknown>", line=0, col=0)


def _loc() -> Location:
    return field(default=NOWHERE, compare=False, hash=False, repr=False)


# The canonical spellings of C's arithmetic types, in the order C lists them.
BUILTIN_NAMES = (
    "void", "_Bool", "char", "signed char", "unsigned char", "short", "unsigned short",
    "int", "unsigned int", "long", "unsigned long", "long long", "unsigned long long",
    "float", "double", "long double",
)


# ---------------------------------------------------------------------------- types


@dataclass(frozen=True, slots=True, kw_only=True)
class Builtin:
    """A C arithmetic type or ``void``, or a standard typedef such as ``size_t``.  ex) ``unsigned int``"""

    name: str  # ex) unsigned long long | size_t | uint32_t
    const: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TypedefRef:
    """A use of a typedef declared in the vendor's headers.  ex) ``CUstream``"""

    name: str
    const: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordRef:
    """A use of a struct or union by tag.  ex) ``struct CUstream_st``"""

    kind: str  # struct | union
    tag: str
    const: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class EnumRef:
    """A use of an enum by tag.  ex) ``enum cudaError_enum``"""

    tag: str
    const: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Pointer:
    """A pointer.  ex) ``const char *`` is ``Pointer(pointee=Builtin(name='char', const=True))``"""

    pointee: CType
    const: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Array:
    """A fixed or unsized array.  ex) ``char bytes[16]``"""

    element: CType
    size: int | None
    const: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionProto:
    """A function type, seen through a pointer.  ex) ``void (*)(void *userData)``"""

    result: CType
    params: tuple[Param, ...]
    variadic: bool = False
    const: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class InlineRecord:
    """An anonymous struct/union defined where it is used (a field's type)."""

    record: Record
    const: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class InlineEnum:
    """An unnamed enum defined in a typedef.  ex) ``typedef enum { NVRTC_SUCCESS = 0, ... } nvrtcResult;``"""

    enum: Enum
    const: bool = False


CType = Union[Builtin, TypedefRef, RecordRef, EnumRef, Pointer, Array, FunctionProto, InlineRecord, InlineEnum]


# --------------------------------------------------------------------- declarations


@dataclass(frozen=True, slots=True, kw_only=True)
class Param:
    """A function parameter.  ex) ``CUdeviceptr *dptr``"""

    name: str | None  # ex) dptr (None when the prototype leaves it unnamed)
    type: CType


@dataclass(frozen=True, slots=True, kw_only=True)
class Function:
    """A function declaration, under the name the linker sees.  ex) ``cuMemAlloc_v2``"""

    name: str
    result: CType
    params: tuple[Param, ...]
    variadic: bool = False
    location: Location = _loc()


@dataclass(frozen=True, slots=True, kw_only=True)
class Typedef:
    """``typedef <type> <name>;``  ex) ``typedef struct CUstream_st *CUstream;``"""

    name: str
    type: CType
    location: Location = _loc()


@dataclass(frozen=True, slots=True, kw_only=True)
class EnumConstant:
    """One enumerator with its evaluated value.  ex) ``CUDA_ERROR_NOT_READY = 600``"""

    name: str
    value: int
    location: Location = _loc()


@dataclass(frozen=True, slots=True, kw_only=True)
class Enum:
    """An enum definition.  ex) ``enum cudaError_enum { CUDA_SUCCESS = 0, ... }``"""

    tag: str | None
    constants: tuple[EnumConstant, ...]
    location: Location = _loc()


@dataclass(frozen=True, slots=True, kw_only=True)
class Field:
    """A struct/union member.  ex) ``unsigned int Flags``; ``name`` is None for an anonymous member."""

    name: str | None
    type: CType
    bit_width: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """A struct or union.  ``fields`` is None for an incomplete (opaque) type.  ex) ``struct CUctx_st;``"""

    kind: str  # struct | union
    tag: str | None
    fields: tuple[Field, ...] | None
    location: Location = _loc()


@dataclass(frozen=True, slots=True, kw_only=True)
class Macro:
    """An object- or function-like ``#define`` as tokens.  ex) ``#define cuMemAlloc cuMemAlloc_v2``"""

    name: str
    params: tuple[str, ...] | None  # None for object-like macros
    tokens: tuple[str, ...]
    location: Location = _loc()


@dataclass(frozen=True, slots=True, kw_only=True)
class MacroConstant:
    """A ``#define`` that evaluates to a number or string.  ex) ``CUDA_VERSION = 13000``"""

    name: str
    value: int | float | str
    location: Location = _loc()


@dataclass(frozen=True, slots=True, kw_only=True)
class Rename:
    """A ``#define`` that renames a function, possibly through a wrapper macro.

    ex) ``cuMemAlloc -> cuMemAlloc_v2``; ``cuMemcpyHtoD -> cuMemcpyHtoD_v2`` via ``__CUDA_API_PTDS``
    """

    name: str
    target: str
    wrapper: str | None = None
    location: Location = _loc()


@dataclass(frozen=True, slots=True, kw_only=True)
class Header:
    """Everything the vendor's own headers declare, in declaration order."""

    name: str  # ex) cuda.h (the primary header, for messages)
    functions: tuple[Function, ...] = ()
    typedefs: tuple[Typedef, ...] = ()
    enums: tuple[Enum, ...] = ()
    records: tuple[Record, ...] = ()
    macros: tuple[Macro, ...] = ()
    constants: tuple[MacroConstant, ...] = ()
    renames: tuple[Rename, ...] = ()
