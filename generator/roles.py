"""The binder's closed vocabularies: how a checked wrapper treats each C parameter (:class:`Role`) and how a C value
is read back into Python (:class:`ValueKind`); for the Objective-C binder (generator/objc.py), how a result
(:class:`ObjcResult`) and an argument (:class:`ObjcArg`) cross, and the compiled fast path's conversion
(:class:`ObjcFast`).

All are :class:`enum.StrEnum`, so the templates compare them with the strings they print, while the generator's
own code dispatches on them with ``match`` ending in :func:`typing.assert_never`: a new member is a mypy error at
every dispatch that does not handle it (``tests/test_types.py`` runs mypy ``--strict`` over ``generator/``).
"""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    """How the checked wrapper treats one C parameter."""

    IN = "in"  # passed through
    IN_STR = "in_str"  # str/bytes -> const char *
    IN_ARRAY = "in_array"  # a Python sequence -> a C array (its LEN parameter is filled in)
    LEN = "len"  # computed from the arrays named by BoundParam.len_of
    OUT = "out"  # allocated by the wrapper, returned
    OUT_STR = "out_str"  # char ** returned as str
    OUT_STRUCT = "out_struct"  # a struct the function fills, returned by value
    OUT_BUFFER = "out_buffer"  # a string buffer the function writes (see BoundParam.string)
    CAPACITY = "capacity"  # the capacity of an OUT_BUFFER, filled in from its spec
    INOUT = "inout"  # passed in, its updated value returned
    ERRCODE = "errcode"  # an errors.out_param status of a function that returns something else
    DEVICE = "device"  # a device address: an Allocation, a slice or view of one, or an int, passed as its address


# the roles the Python caller passes (the wrapper's parameters), and the roles whose values the wrapper returns
PY_IN_ROLES = frozenset({Role.IN, Role.IN_STR, Role.IN_ARRAY, Role.INOUT, Role.DEVICE})
OUT_ROLES = frozenset({Role.OUT, Role.OUT_STR, Role.OUT_STRUCT, Role.INOUT, Role.OUT_BUFFER})


class ValueKind(StrEnum):
    """How a C value (a result, or what an out parameter points to) is read into Python."""

    INT = "int"
    FLOAT = "float"
    STR = "str"
    BYTES = "bytes"  # a binary OUT_BUFFER
    CDATA = "cdata"  # a cffi pointer or other C data
    STRUCT = "struct"
    VOID = "void"  # no value (a void result)
    NONE = ""  # a parameter whose role reads nothing back


class ObjcResult(StrEnum):
    """How the result of an Objective-C method or framework C function (generator/objc.py) becomes a Python value:
    the checked wrapper's conversion, and how it learns that the send was refused."""

    OBJECT = "object"  # id: a handle owning a reference (None for nil)
    STR = "str"  # const char *: copied into a str inside an autorelease pool
    BOOL = "bool"  # BOOL / _Bool
    INT = "int"  # an integer or enum type
    FLOAT = "float"  # float / double / long double (the fpret send flavour)
    STRUCT = "struct"  # a struct returned by value (the stret send flavour)
    CDATA = "cdata"  # any other pointer: cffi data
    VOID = "void"  # no value


class ObjcArg(StrEnum):
    """How an argument of an Objective-C method or framework C function is passed from Python."""

    OBJECT = "object"  # id: a handle (None for nil where the spec's nullable: allows it)
    STR = "str"  # const char *: str or bytes
    ERROR = "error"  # NSError **: hidden; the error out-parameter, raised as an Error
    VALUE = "value"  # anything else, converted by cffi


class ObjcFast(StrEnum):
    """The compiled checked method of an instance method without arguments returning a number (ia_objc.h's fast
    path): how its C result becomes a Python object; ``NONE``: the method has none."""

    NONE = ""
    UNSIGNED = "unsigned"
    SIGNED = "signed"
    BOOL = "bool"
