"""The binder's closed vocabularies: how a checked wrapper treats each C parameter (:class:`Role`) and how a C value
is read back into Python (:class:`ValueKind`).

Both are :class:`enum.StrEnum`, so the templates compare them with the strings they print, while the generator's
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


# the roles the Python caller passes (the wrapper's parameters), and the roles whose values the wrapper returns
PY_IN_ROLES = frozenset({Role.IN, Role.IN_STR, Role.IN_ARRAY, Role.INOUT})
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
