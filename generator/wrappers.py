"""Lowering of a bound function to its checked wrapper: Python statements, and C for the fast path.

Pure functions of :class:`~ironaccelerator_gen.bind.BoundFunction`; the
templates only print what these return.  Every identifier used here was
validated by the binder, and every literal is emitted with ``repr`` (Python) or
as a decimal integer literal (C).

:func:`lower` gives the Python wrapper (used in ABI mode, and in API mode for
functions without a fast path).  :func:`fast_path` gives, for every function
whose parameters and result it can express (numbers, strings, handles and other
pointers, structs, arrays with their lengths, nullable pointers, errcode_ret), a
METH_FASTCALL C function compiled into the cffi API module (``trampolines.c``)
that does the same thing without Python bytecode, converting C data with cffi's
own functions.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, assert_never

from .bind import BoundFunction, BoundLibrary, BoundParam
from .roles import OUT_ROLES, PY_IN_ROLES, Role, ValueKind
from .ctypes_util import FLOAT_BUILTINS, INTEGER_BUILTINS, declare, resolve
from .ir import Array, Builtin, CType, EnumRef, FunctionProto, InlineEnum, InlineRecord, Pointer, RecordRef, Typedef



@dataclass(frozen=True, slots=True, kw_only=True)
class Wrapper:
    signature: str  # ex) bytesize: int
    returns: str  # ex) int | tuple[int, int] | None
    results: tuple[str, ...]
    results_doc: str
    body: tuple[str, ...]
    doc: str  # the docstring text (unindented, unescaped)


def out_types(lib: BoundLibrary) -> tuple[str, ...]:
    """Every pointee type an out/inout parameter allocates, in first-use order (``_T<n>`` constants)."""
    seen: dict[str, None] = {}
    for f in lib.functions:
        for p in f.params:
            if p.role in (Role.OUT, Role.OUT_STR, Role.OUT_STRUCT, Role.INOUT, Role.ERRCODE):
                seen.setdefault(p.pointee, None)
    return tuple(seen)


def lower(f: BoundFunction, lib: BoundLibrary, type_index: dict[str, int],
          by_public: dict[str, BoundFunction]) -> Wrapper:
    params = f.params
    py_params = [p for p in params if p.role in PY_IN_ROLES]
    # trailing nullable parameters default to None
    sig = []
    defaults_from = len(py_params)
    while defaults_from > 0 and py_params[defaults_from - 1].nullable:
        defaults_from -= 1
    for i, p in enumerate(py_params):
        sig.append(f"{p.name}: {p.py_type}" + (" = None" if i >= defaults_from else ""))
    body: list[str] = []
    keep = any(p.role is Role.IN_ARRAY for p in params)
    if keep:
        body.append("_keep: list[Any] = []")
    args: list[str] = []
    for p in params:
        _lower_arg(p, f, lib, type_index, by_public, body, args)
    # locals of this wrapper: a module global of the same name would be shadowed in its body
    local_names = {"_keep", "_r", "_v"} | {f"_{p.name}" for p in params} | {f"_{p.name}_n" for p in params}
    # the cffi function: looked up once (API mode) or on first call (ABI mode) as the global _f_<name>
    fn = f"_f_{f.public}" if f"_f_{f.public}" not in local_names else f"_lib.{f.public}"
    call = f"{fn}({', '.join(args)})"
    results: list[tuple[str, str]] = []  # (expression, annotation)
    for p in params:
        result = _lower_result(p)
        if result is not None:
            results.append(result)
    if f.returns_status:
        body.append(f"_r = {call}")
        ok = [str(c) for c in lib.success]
        statuses = [str(c) for c in f.status_codes]
        allowed = ok + statuses
        cond = "_r" if allowed == ["0"] else f"_r not in ({', '.join(allowed)},)"
        body.append(f"if {cond}:")
        if f.error_log is not None and f.log_param is not None:
            body.append(f"    raise _error(_r, {f.index}, _detail({f.error_log}, {f.log_param}))")
        else:
            body.append(f"    raise _error(_r, {f.index})")
        if statuses:
            results.insert(0, ("_r", "int"))
    else:
        if f.result_kind is ValueKind.VOID:
            body.append(f"_require({f.index})")
            body.append(call)
        else:
            body.append(f"_r = {call}")
            for p in params:
                if p.role is Role.ERRCODE:
                    body.append(f"if _{p.name}[0]:")
                    body.append(f"    raise _error(_{p.name}[0], {f.index})")
            if f.result_kind is ValueKind.STR and not results:
                # one truth test, no helper call: NULL is "" unless the function could not be resolved
                string = "_string" if "_string" not in local_names else "ffi.string"
                body.append("if not _r:")
                body.append(f"    _require({f.index})")
                body.append('    return ""')
                results.insert(0, (f'{string}(_r).decode("utf-8", "replace")', "str"))
            elif f.result_kind is ValueKind.STR:
                body.append("if _r == _NULL:")
                body.append(f"    _require({f.index})")
                results.insert(0, ("_str(_r)", "str"))
            else:
                results.insert(0, ("_r", {ValueKind.INT: "int", ValueKind.FLOAT: "float"}.get(f.result_kind, "CData")))
    if not results:
        returns = "None"
    elif len(results) == 1:
        returns = results[0][1]
        expr, ann = results[0]
        if (ann in ("int", "float") and not expr.startswith("_str(")) or (ann == "str" and ".decode(" in expr):
            # a typed local: cdata reads are Any to mypy, and a local costs nothing measurable
            body.append(f"_v: {ann} = {expr}")
            expr = "_v"
        body.append(f"return {expr}")
    else:
        returns = f"tuple[{', '.join(a for _, a in results)}]"
        body.append(f"return {', '.join(e for e, _ in results)}")
    names = [p.name for p in params if p.role in OUT_ROLES]
    if f.returns_status and f.status_codes:
        names.insert(0, "the status code")
    elif not f.returns_status and f.result_kind is not ValueKind.VOID:
        names.insert(0, "the result")
    results_doc = ", ".join(f"``{n}``" if " " not in n else n for n in names)
    return Wrapper(signature=", ".join(sig), returns=returns, results=tuple(names), results_doc=results_doc,
                   body=tuple(body), doc=_doc(f, lib, results_doc))


def _lower_arg(p: BoundParam, f: BoundFunction, lib: BoundLibrary, type_index: dict[str, int],
               by_public: dict[str, BoundFunction], body: list[str], args: list[str]) -> None:
    """The Python wrapper's statements for parameter ``p`` (into ``body``) and its C argument (into ``args``)."""
    v = p.name
    match p.role:
        case Role.IN:
            if p.refuse_null:  # errors.null_handle: a NULL handle is refused before the call
                body.append(f"if {v} == _NULL:")
                body.append(f"    raise _b.null_handle({f.index}, {v!r})")
            args.append(f"_NULL if {v} is None else {v}" if p.nullable else v)
        case Role.IN_STR:
            body.append(f"_{v} = {v}.encode() if isinstance({v}, str) else {v}")
            args.append(f"_NULL if _{v} is None else _{v}" if p.nullable else f"_{v}")
        case Role.IN_ARRAY:
            body.append(f"_{v} = _c_array(ffi, {p.element!r}, {v}, _keep{', terminated=True' if p.terminated else ''})")
            args.append(f"_{v}")
        case Role.LEN:
            body.append(f"_{v} = len({p.len_of[0]}) if {p.len_of[0]} is not None else 0")
            for other in p.len_of[1:]:
                body.append(f"if {other} is not None and len({other}) != _{v}:")
                body.append(f"    raise Error(ErrorKind.INVALID_VALUE, {f'{other} must have as many items as {p.len_of[0]}'!r}, "
                            f"function={f.public!r}, backend={lib.spec.backend.value!r})")
            args.append(f"_{v}")
        case Role.OUT | Role.OUT_STR | Role.OUT_STRUCT | Role.ERRCODE:
            init = f", {dict(p.fill)!r}" if p.fill else ""  # fill: the type tag the function reads
            body.append(f"_{v} = _new(_T{type_index[p.pointee]}{init})")
            args.append(f"_{v}")
        case Role.INOUT:
            body.append(f"_{v} = _new(_T{type_index[p.pointee]}, {v})")
            args.append(f"_{v}")
        case Role.DEVICE:  # an Allocation, a slice or view of one, or an int: its address (device_pointers.py)
            extra = ", True" if p.nullable else ""
            body.append(f"_{v} = _b.device_pointer({f.index}, {v!r}, {v}, {p.cast or None!r}{extra})")
            args.append(f"_{v}")
        case Role.CAPACITY:
            cap = next(q for q in f.params if q.string is not None and q.string.length_param is not None
                       and q.string.length_param.value == p.c_name)
            assert cap.string is not None and cap.string.capacity is not None
            args.append(str(cap.string.capacity))
        case Role.OUT_BUFFER:
            assert p.string is not None
            if p.string.size_function is not None:
                sizer = by_public[p.string.size_function.value]
                sizer_args = ", ".join(q.name for q in sizer.params if q.role in PY_IN_ROLES)
                body.append(f"_{v}_n = {sizer.public}({sizer_args})")
            else:
                body.append(f"_{v}_n = {p.string.capacity}")
            body.append(f"_{v} = _new('char[]', max(_{v}_n, 1))")
            args.append(f"_{v}")
        case _:
            assert_never(p.role)


def _lower_result(p: BoundParam) -> tuple[str, str] | None:
    """The (expression, annotation) of the value the Python wrapper returns for parameter ``p``, if any."""
    v = p.name
    match p.role:
        case Role.OUT | Role.INOUT:
            return f"_{v}[0]", p.py_result
        case Role.OUT_STR:
            return f"_str(_{v}[0])", "str"
        case Role.OUT_STRUCT:  # the struct by value (it keeps ffi.new's storage alive), as the fast path
            return f"_{v}[0]", "CData"
        case Role.OUT_BUFFER:
            assert p.string is not None
            if p.string.binary:
                return f"bytes(ffi.buffer(_{v}, _{v}_n))", "bytes"
            return f"_str(_{v})", "str"
        case Role.IN | Role.IN_STR | Role.IN_ARRAY | Role.LEN | Role.CAPACITY | Role.ERRCODE | Role.DEVICE:
            return None
        case _:
            assert_never(p.role)


def _doc(f: BoundFunction, lib: BoundLibrary, results_doc: str) -> str:
    """The wrapper's docstring (the Python function's, and the C fast path's after its signature line)."""
    symbol = f"Symbol ``{f.symbol}``"
    if f.per_thread_symbol:
        symbol += f" (per-thread: ``{f.per_thread_symbol}``)"
    if f.min_version:
        symbol += f"; {lib.spec.backend} >= {f.min_version}"
    lines = [f"``{f.prototype}``", "", symbol + "."]
    if results_doc:
        lines.append(f"Returns {results_doc}.")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ C fast path

# Largest fixed-capacity output string kept on the C stack; bigger ones are PyMem_Calloc'ed.
FAST_STACK_BUFFER_MAX = 4096
# Integer builtins cffi does not read and write as plain ints: char is bytes, _Bool is bool, wchar_t is str.
_NOT_INT = frozenset({"char", "_Bool", "wchar_t"})


@dataclass(frozen=True, slots=True, kw_only=True)
class FastPath:
    """A checked wrapper lowered to a CPython METH_FASTCALL function (``ia_fast_<index>`` in trampolines.c)."""

    index: int
    public: str
    text_signature: str  # ex) ``cuDeviceGet($module, ordinal)`` (CPython's __text_signature__ convention)
    doc: str  # the Python wrapper's docstring
    body: tuple[str, ...]  # C statements of the function body, one per line (nested lines are indented)
    # the C types it converts with (cffi's), ia_ct[ct_base + k]: (C argument index, or -1 for the result; whether
    # the type that one points to)  ex) ((0, True),) for cuCtxGetCurrent(CUcontext *pctx): CUcontext
    ctypes: tuple[tuple[int, bool], ...] = ()
    ct_base: int = 0


def _scalar(t: CType, typedefs: Mapping[str, Typedef]) -> str | None:
    """'int' or 'float' when a C value of type ``t`` converts to and from a Python int/float as cffi does."""
    if isinstance(t, (InlineEnum, InlineRecord)):
        return None  # an anonymous type cannot be spelled a second time (for a local variable)
    r = resolve(t, typedefs)
    if isinstance(r, Builtin):
        if r.name in INTEGER_BUILTINS and r.name not in _NOT_INT:
            return "int"
        if r.name in FLOAT_BUILTINS and r.name != "long double":
            return "float"
        return None
    if isinstance(r, (EnumRef, InlineEnum)):
        return "int"
    return None


def _is_char(t: CType, typedefs: Mapping[str, Typedef]) -> bool:
    """Plain ``char`` (what ``ffi.string`` reads and ``char[]`` buffers hold), not signed/unsigned char."""
    r = resolve(t, typedefs)
    return isinstance(r, Builtin) and r.name == "char"


def _spell(t: CType, name: str = "") -> str:
    """C declaration of a local of type ``t`` without top-level const (it is assigned after declaration)."""
    return declare(replace(t, const=False), name)


def _pointee(t: CType, typedefs: Mapping[str, Typedef]) -> CType | None:
    r = resolve(t, typedefs)
    return r.pointee if isinstance(r, Pointer) else None


def _c_int(v: int) -> str:
    return f"{v}LL" if v >= 0 else f"({v}LL)"


def _spellable(t: CType) -> bool:
    """Whether ``t`` can be written a second time (for a local): no anonymous struct or enum outside a typedef."""
    while isinstance(t, (Pointer, Array)):
        t = t.pointee if isinstance(t, Pointer) else t.element
    return not isinstance(t, (InlineEnum, InlineRecord))


def _pointer_local(t: CType, r: CType, name: str) -> str:
    """A local for a pointer argument of type ``t`` (resolved: ``r``); an array parameter is a pointer (C, cffi)."""
    return _spell(Pointer(pointee=r.element), name) if isinstance(r, Array) else _spell(t, name)


def _is_record(t: CType, typedefs: Mapping[str, Typedef]) -> bool:
    return isinstance(resolve(t, typedefs), (RecordRef, InlineRecord))


class _Lowering:
    """The pieces of one fast path's C body, collected parameter by parameter (see :func:`fast_path`).

    The body runs in the Python wrapper's order: its statements (``prepare``: strings encoded, arrays built,
    lengths checked, out storage made), then the arguments cffi converts at the call (``convert``), the call with
    the GIL released, the status checks, and the results; every failure jumps to ``ia_done``, which releases
    what was made (``cleanup``) and returns ``ia_res``."""

    def __init__(self, ct_base: int, f: BoundFunction, lib: BoundLibrary, typedefs: Mapping[str, Typedef],
                 py_index: Mapping[str, int], capacity: Mapping[str, int], sizers: Mapping[str, int] | None) -> None:
        self.f, self.lib, self.typedefs = f, lib, typedefs
        self.py_index = py_index  # a Python parameter's name -> its index in the fast call's arguments
        self.capacity = capacity  # an out_buffer's capacity parameter (C name) -> its capacity
        self.sizers = sizers
        self.decls: list[str] = []
        self.prepare: list[str] = []
        self.convert: list[str] = []
        self.args: list[str] = []  # the C call's arguments, in C order
        self.outs: list[str] = []  # new references to the Python results from out parameters, in parameter order
        self.checks: list[str] = []  # after the call, before the results (error_out)
        self.cleanup: list[str] = []
        self.ct_base = ct_base
        self.ctypes: list[tuple[int, bool]] = []
        self.free_args = False

    def ct(self, arg: int, item: bool) -> int:
        """The index in ia_ct of C argument ``arg``'s type (-1: the result), or of what it points to."""
        key = (arg, item)
        if key not in self.ctypes:
            self.ctypes.append(key)
        return self.ct_base + self.ctypes.index(key)

    def pointer_arg(self, i: int, obj: str, nullable: bool, function_pointer: bool) -> None:
        """Convert ``obj`` into pointer local ``a<i>`` as cffi converts an argument of its type."""
        k = self.ct(i, False)
        if function_pointer:  # cffi: _cffi_to_c_pointer (a NULL result is an error only with one set)
            conv = [f"a{i} = (void *)_cffi_to_c_pointer({obj}, IA_CT({k}));",
                    f"if (a{i} == NULL && PyErr_Occurred())", "    goto ia_done;"]
        else:
            self.free_args = True
            conv = [f"if (ia_arg_ptr(IA_CT({k}), {obj}, (char **)&a{i}, &ia_free) < 0)", "    goto ia_done;"]
        if nullable:  # the Python wrapper passes ffi.NULL for None
            self.convert += [f"if ({obj} == Py_None) {{", f"    a{i} = NULL;", "} else {",
                             *["    " + line for line in conv], "}"]
        else:
            self.convert += conv

    def param(self, i: int, p: BoundParam) -> None:
        """Lower C parameter ``i`` (``p``) by its role; :class:`_NoFastPath` when it cannot be expressed."""
        o = f"ia_a[{self.py_index[p.name]}]" if p.name in self.py_index else ""
        t = p.type
        if not _spellable(t):
            raise _NoFastPath
        r = resolve(t, self.typedefs)
        match p.role:
            case Role.IN:
                self.in_(i, p, o, t, r)
            case Role.IN_STR:
                self.in_str(i, p, o, t, r)
            case Role.IN_ARRAY:
                self.in_array(i, p, o, t, r)
            case Role.LEN:
                self.len_(i, p, t)
            case Role.ERRCODE:
                self.errcode(i, t)
            case Role.OUT | Role.INOUT:
                self.out(i, p, o, t)
            case Role.OUT_STRUCT:
                if p.fill:  # (the Python wrapper initialises the struct)
                    raise _NoFastPath
                self.out_struct(i, r)
            case Role.OUT_STR:
                self.out_str(i, t)
            case Role.CAPACITY:
                self.capacity_(p, t)
            case Role.OUT_BUFFER:
                self.out_buffer(i, p, t)
            case Role.DEVICE:  # (the Python wrapper reads the runtime's Allocation protocol)
                raise _NoFastPath
            case _:
                assert_never(p.role)

    def in_(self, i: int, p: BoundParam, o: str, t: CType, r: CType) -> None:
        kind = _scalar(t, self.typedefs)
        if kind is not None:
            if p.nullable or p.py_type != kind:
                raise _NoFastPath
            self.decls.append(f"{_spell(t, f'a{i}')};")
            conv = "IA_IN_INT" if kind == "int" else "IA_IN_FLOAT"
            self.convert.append(f"{conv}({_spell(t)}, {o}, a{i});")
        elif isinstance(r, (Pointer, Array)):
            self.decls.append(f"{_pointer_local(t, r, f'a{i}')};")
            function_pointer = isinstance(r, Pointer) and isinstance(resolve(r.pointee, self.typedefs), FunctionProto)
            self.pointer_arg(i, o, p.nullable, function_pointer)
            if p.refuse_null:  # errors.null_handle, as the Python wrapper
                self.convert += [f"if (IA_UNLIKELY(a{i} == NULL)) {{",
                                 f"    ia_fast_null({self.f.index}, {c_string(p.name)});", "    goto ia_done;", "}"]
        elif isinstance(r, (RecordRef, InlineRecord)) and not p.nullable:  # a struct by value
            self.decls.append(f"{_spell(t, f'a{i}')};")
            self.convert += [f"if (_cffi_to_c((char *)&a{i}, IA_CT({self.ct(i, False)}), {o}) < 0)",
                             "    goto ia_done;"]
        else:
            raise _NoFastPath
        self.args.append(f"a{i}")

    def in_str(self, i: int, p: BoundParam, o: str, t: CType, r: CType) -> None:
        if not isinstance(r, Pointer):
            raise _NoFastPath
        # the Python wrapper: _v = v.encode() if isinstance(v, str) else v; cffi then converts _v.  A str passes
        # its own UTF-8 (PyUnicode_AsUTF8AndSize: made once and kept in the str, which the caller holds), not a
        # bytes object made and dropped on every call; embedded NULs pass as the encoded bytes would
        self.decls += [f"{_spell(t, f'a{i}')};", f"const char *ia_u{i} = NULL;"]
        self.prepare += [f"if (PyUnicode_Check({o}) && (ia_u{i} = PyUnicode_AsUTF8AndSize({o}, NULL)) == NULL)",
                         "    goto ia_done;"]
        before = len(self.convert)
        self.pointer_arg(i, o, p.nullable, False)  # (anything else: bytes, a cdata, None where nullable)
        other = self.convert[before:]
        self.convert[before:] = [f"if (ia_u{i} != NULL) {{", f"    a{i} = ({_spell(t)})ia_u{i};", "} else {",
                                 *["    " + line for line in other], "}"]
        self.args.append(f"a{i}")

    def in_array(self, i: int, p: BoundParam, o: str, t: CType, r: CType) -> None:
        if not isinstance(r, (Pointer, Array)):
            raise _NoFastPath
        element = resolve(r.pointee if isinstance(r, Pointer) else r.element, self.typedefs)
        if (isinstance(element, Builtin) and element.name == "void") or isinstance(element, FunctionProto):
            raise _NoFastPath  # (cffi cannot make such an array: the Python wrapper's TypeError, or no C size)
        if isinstance(element, RecordRef) and not any(
                (c.kind, c.tag) == (element.kind, element.tag) and c.fields is not None for c in self.lib.header.records):
            raise _NoFastPath
        if "ia_keep" not in "".join(self.decls):
            self.decls.append("PyObject *ia_keep = NULL;")
            self.cleanup.append("Py_XDECREF(ia_keep);")
        self.decls += [f"{_pointer_local(t, r, f'a{i}')} = NULL;", f"void *ia_m{i} = NULL;"]
        self.prepare += [f"if (ia_array({o}, ia_ct[{self.ct(i, True)}], sizeof *a{i}, {1 if p.terminated else 0}, "
                         f"&ia_m{i}, &ia_keep) < 0)", "    goto ia_done;", f"a{i} = ia_m{i};"]
        self.cleanup.append(f"PyMem_Free(ia_m{i});")
        self.args.append(f"a{i}")

    def len_(self, i: int, p: BoundParam, t: CType) -> None:
        if _scalar(t, self.typedefs) != "int" or any(n not in self.py_index for n in p.len_of):
            raise _NoFastPath
        first = f"ia_a[{self.py_index[p.len_of[0]]}]"
        self.decls += [f"{_spell(t, f'a{i}')};", f"Py_ssize_t ia_n{i} = 0;"]
        self.prepare += [f"if ({first} != Py_None && (ia_n{i} = PyObject_Length({first})) < 0)", "    goto ia_done;"]
        for other in p.len_of[1:]:
            ob = f"ia_a[{self.py_index[other]}]"
            message = f"{other} must have as many items as {p.len_of[0]}"
            self.prepare += [f"if ({ob} != Py_None) {{", f"    Py_ssize_t ia_m = PyObject_Length({ob});",
                             "    if (ia_m < 0)", "        goto ia_done;",
                             f"    if (ia_m != ia_n{i}) {{", f"        ia_fast_invalid({self.f.index}, {c_string(message)});",
                             "        goto ia_done;", "    }", "}"]
        self.convert.append(f"IA_IN_LEN({_spell(t)}, ia_n{i}, a{i});")
        self.args.append(f"a{i}")

    def errcode(self, i: int, t: CType) -> None:
        pointee = _pointee(t, self.typedefs)
        if pointee is None or not _spellable(pointee) or _scalar(pointee, self.typedefs) != "int":
            raise _NoFastPath
        self.decls.append(f"{_spell(pointee, f'o{i}')} = 0;")
        self.checks += [f"if (IA_UNLIKELY(o{i} != 0)) {{",
                        f"    ia_fast_fail(IA_FROM_INT({_spell(pointee)}, o{i}), {self.f.index});", "    goto ia_done;",
                        "}"]
        self.args.append(f"&o{i}")

    def out(self, i: int, p: BoundParam, o: str, t: CType) -> None:
        """An out or in-out number, handle or other pointer, or an in-out struct."""
        pointee = _pointee(t, self.typedefs)
        if pointee is None or not _spellable(pointee):
            raise _NoFastPath
        kind = _scalar(pointee, self.typedefs)
        pt = _spell(pointee)
        inout = p.role is Role.INOUT
        if _is_record(pointee, self.typedefs):  # an in-out struct: ffi.new(T *, v) as the Python wrapper, v[0] back
            if not inout:
                raise _NoFastPath
            k = self.ct(i, False)
            self.decls += [f"PyObject *ia_o{i} = NULL;", f"{_spell(t, f'a{i}')};"]
            self.prepare += [f"if ((ia_o{i} = ia_new(ia_ct[{k}], {o})) == NULL)", "    goto ia_done;",
                             f"a{i} = (void *)_cffi_to_c_pointer(ia_o{i}, IA_CT({k}));"]
            self.cleanup.append(f"Py_XDECREF(ia_o{i});")
            self.args.append(f"a{i}")
            self.outs.append(f"ia_item0(ia_o{i})")
            return
        if kind is not None and p.py_result == kind:
            if inout:
                self.decls.append(f"{_spell(pointee, f'o{i}')};")
                conv = "IA_INOUT_INT" if kind == "int" else "IA_INOUT_FLOAT"
                self.prepare.append(f"{conv}({pt}, {o}, o{i});")
            else:
                self.decls.append(f"{_spell(pointee, f'o{i}')} = 0;")
            self.outs.append(f"IA_FROM_INT({pt}, o{i})" if kind == "int" else f"PyFloat_FromDouble((double)o{i})")
        elif kind is None and isinstance(resolve(pointee, self.typedefs), Pointer):  # a handle or other pointer
            k = self.ct(i, True)
            self.decls.append(f"{_spell(pointee, f'o{i}')} = NULL;")
            if inout:  # ffi.new(T *, v): None is NULL
                self.prepare += [f"if ({o} != Py_None && _cffi_to_c((char *)&o{i}, IA_CT({k}), {o}) < 0)",
                                 "    goto ia_done;"]
            self.outs.append(f"_cffi_from_c_pointer((char *)o{i}, IA_CT({k}))")
        else:
            raise _NoFastPath
        self.args.append(f"&o{i}")

    def out_struct(self, i: int, r: CType) -> None:
        # a zeroed local (as ffi.new's storage), passed by address and returned by value: no ffi.new
        pointee = r.pointee if isinstance(r, Pointer) else r.element if isinstance(r, Array) else None
        if pointee is None or not _spellable(pointee):
            raise _NoFastPath
        k = self.ct(i, True)
        self.decls.append(f"{_spell(pointee, f'o{i}')};")
        self.prepare.append(f"memset(&o{i}, 0, sizeof o{i});")
        self.args.append(f"&o{i}")
        self.outs.append(f"_cffi_from_c_struct((char *)&o{i}, IA_CT({k}))")

    def out_str(self, i: int, t: CType) -> None:
        pointee = _pointee(t, self.typedefs)
        inner = None if pointee is None else _pointee(pointee, self.typedefs)
        if pointee is None or inner is None or not _is_char(inner, self.typedefs):
            raise _NoFastPath
        self.decls.append(f"{_spell(pointee, f'o{i}')} = NULL;")
        self.args.append(f"&o{i}")
        self.outs.append(f"ia_str(o{i})")

    def capacity_(self, p: BoundParam, t: CType) -> None:
        if p.c_name not in self.capacity or _scalar(t, self.typedefs) != "int":
            raise _NoFastPath
        self.args.append(f"({_spell(t)}){self.capacity[p.c_name]}")

    def out_buffer(self, i: int, p: BoundParam, t: CType) -> None:
        assert p.string is not None
        pointee = _pointee(t, self.typedefs)
        if pointee is None or not _is_char(pointee, self.typedefs):
            raise _NoFastPath
        if p.string.size_function is not None:
            assert self.sizers is not None
            sizer_name = p.string.size_function.value
            sizer = next(q for q in self.lib.functions if q.public == sizer_name)
            names = [q.name for q in sizer.params if q.role in PY_IN_ROLES]
            if any(n not in self.py_index for n in names):
                raise _NoFastPath
            argv = ", ".join(f"ia_a[{self.py_index[n]}]" for n in names) or "NULL"
            # the Python wrapper: _v_n = sizer(...); _v = ffi.new("char[]", max(_v_n, 1))
            self.decls += [f"char *ia_buf{i} = NULL;", f"Py_ssize_t ia_n{i} = 0;"]
            self.prepare += ["{", f"    PyObject *ia_sv[{max(len(names), 1)}] = {{{argv}}};",
                             f"    PyObject *ia_sz = ia_fast_{self.sizers[sizer_name]}(NULL, ia_sv, {len(names)}, NULL);",
                             "    if (ia_sz == NULL)", "        goto ia_done;",
                             f"    ia_n{i} = PyLong_AsSsize_t(ia_sz);", "    Py_DECREF(ia_sz);",
                             f"    if (ia_n{i} == -1 && PyErr_Occurred())", "        goto ia_done;", "}",
                             f"if ((ia_buf{i} = (char *)PyMem_Calloc(ia_n{i} > 1 ? (size_t)ia_n{i} : 1, 1)) == NULL) {{",
                             "    PyErr_NoMemory();", "    goto ia_done;", "}"]
            self.cleanup.append(f"PyMem_Free(ia_buf{i});")
            size = f"(ia_n{i} > 1 ? (size_t)ia_n{i} : 1)"
            # bytes(ffi.buffer(_v, _v_n)): a negative size is the whole buffer
            self.outs.append(f"PyBytes_FromStringAndSize(ia_buf{i}, ia_n{i} >= 0 ? ia_n{i} : 1)"
                             if p.string.binary else f"ia_str_n(ia_buf{i}, {size})")
            self.args.append(f"ia_buf{i}")
            return
        assert p.string.capacity is not None
        cap = p.string.capacity
        size_n = max(cap, 1)  # as the Python wrapper: char[max(n, 1)], the capacity argument stays n
        if size_n <= FAST_STACK_BUFFER_MAX:
            self.decls.append(f"char ia_buf{i}[{size_n}];")
            self.prepare.append(f"memset(ia_buf{i}, 0, sizeof ia_buf{i});")
        else:
            self.decls.append(f"char *ia_buf{i} = NULL;")
            self.prepare += [f"if ((ia_buf{i} = (char *)PyMem_Calloc({size_n}, 1)) == NULL) {{",
                             "    PyErr_NoMemory();", "    goto ia_done;", "}"]
            self.cleanup.append(f"PyMem_Free(ia_buf{i});")
        self.args.append(f"ia_buf{i}")
        self.outs.append(f"PyBytes_FromStringAndSize(ia_buf{i}, {cap})" if p.string.binary
                         else f"ia_str_n(ia_buf{i}, {size_n})")


class _NoFastPath(Exception):
    """A parameter or result the C fast path cannot express: the function keeps its Python wrapper."""


def fast_path(f: BoundFunction, lib: BoundLibrary, doc: str, typedefs: Mapping[str, Typedef], ct_base: int = 0,
              sizers: Mapping[str, int] | None = None) -> FastPath | None:
    """The C fast path of ``f``'s checked wrapper, or None when ``f`` keeps its Python wrapper.

    Expressible: parameters passed in as numbers, pointers (handles, ``void *``, structs by address; nullable:
    None is NULL), function pointers or structs by value; strings in (``in_str``); arrays with their lengths
    (``in_array``/``len``); numbers, handles and other pointers out or in-out; structs out (``out_struct``, returned by value) or
    in-out; ``char **`` strings out; string buffers of a fixed capacity, or sized by a size function that has a
    fast path of its own returning one int (``sizers``: its public name -> index); a status result, a number, a
    string, a pointer or a struct result, an ``errors.out_param`` status (``errcode``), or void; an ``error_log``
    function's log is read by calling the module's log function, as the Python wrapper does.  Not: anonymous types, and argument types cffi converts in ways not mirrored here (char,
    _Bool, long double).  The C function behaves exactly like the Python wrapper (same arguments,
    same results and result types, same exceptions), converting C data with cffi's own functions.
    """
    if f.error_log is not None and (f.log_param is None or not f.returns_status):
        return None
    result = f.c.result
    if f.returns_status:
        if _scalar(result, typedefs) != "int":
            return None
        rkind = "status"
    elif f.result_kind is ValueKind.VOID:
        rkind = "void"
    elif f.result_kind in (ValueKind.INT, ValueKind.FLOAT):
        if _scalar(result, typedefs) != f.result_kind:
            return None
        rkind = f.result_kind
    elif f.result_kind is ValueKind.STR:
        pointee = _pointee(result, typedefs)
        if pointee is None or not _is_char(pointee, typedefs):
            return None
        rkind = "str"
    elif f.result_kind in (ValueKind.CDATA, ValueKind.STRUCT) and _spellable(result):
        r = resolve(result, typedefs)
        if isinstance(r, Pointer):
            rkind = "pointer"
        elif isinstance(r, (RecordRef, InlineRecord)):
            rkind = "struct"
        else:
            return None
    else:
        return None

    params = f.params
    py_params = [p for p in params if p.role in PY_IN_ROLES]
    required = len(py_params)  # as lower(): trailing nullable parameters default to None
    while required > 0 and py_params[required - 1].nullable:
        required -= 1
    py_index = {p.name: k for k, p in enumerate(py_params)}
    for p in params:
        if p.role is Role.OUT_BUFFER:
            if p.string is None:
                return None
            if p.string.size_function is not None:
                if sizers is None or p.string.size_function.value not in sizers or p.string.length_param is not None:
                    return None
            elif p.string.capacity is None or p.string.length_param is None:
                return None
    capacity = {p.string.length_param.value: p.string.capacity for p in params
                if p.role is Role.OUT_BUFFER and p.string is not None and p.string.length_param is not None
                and p.string.capacity is not None}
    low = _Lowering(ct_base, f, lib, typedefs, py_index, capacity, sizers)
    try:
        for i, p in enumerate(params):
            low.param(i, p)
    except _NoFastPath:
        return None

    n = len(py_params)
    names = [p.name for p in py_params]
    body: list[str] = []
    if n:
        body.append(f"static const char *const ia_kw[] = {{{', '.join(c_string(x) for x in names)}}};")
    body.append(f"PyObject *ia_argv[{max(n, 1)}];")
    if n:
        body.append("PyObject *const *ia_a = ia_args;")
    body.append("PyObject *ia_res = NULL;")
    if low.free_args:
        body.append("struct _cffi_freeme_s *ia_free = NULL;")
    rtype = _spell(result) if rkind != "void" else ""
    if rkind != "void":
        body.append(f"{_spell(result, 'ia_r')};")
    body += low.decls
    body.append("(void)ia_self;")
    body.append(f"if (IA_UNLIKELY(ia_kwnames != NULL || ia_nargs != {n})) {{")
    body.append(f"    if (ia_fast_args({c_string(f.public)}, {'ia_kw' if n else 'NULL'}, {n}, {required}, ia_args, "
                "ia_nargs, ia_kwnames, ia_argv) < 0)")
    body.append("        return NULL;")
    if n:
        body.append("    ia_a = ia_argv;")
    body.append("}")
    k_result = low.ct(-1, False) if rkind in ("pointer", "struct") else None
    if low.ctypes:
        body.append(f"if (IA_UNLIKELY(ia_ct[{ct_base}] == NULL) && ia_ct_load({ct_base}, {len(low.ctypes)}) < 0)")
        body.append("    return NULL;")
    body += low.prepare
    if rkind == "void":
        # the Python wrapper raises the loader error after its own statements, before cffi converts the arguments
        body.append(f"if (IA_UNLIKELY(ia_status({f.index}) != 0) && ia_fast_require({f.index}) < 0)")
        body.append("    goto ia_done;")
    body += low.convert
    call = f"{f.public}({', '.join(low.args)})"
    body.append("Py_BEGIN_ALLOW_THREADS")
    body.append(f"ia_r = {call};" if rkind != "void" else f"{call};")
    body.append("Py_END_ALLOW_THREADS")
    results: list[str] = []
    if rkind == "status":
        allowed = list(dict.fromkeys([*lib.success, *f.status_codes]))
        cond = " && ".join(f"(long long)ia_r != {_c_int(c)}" for c in allowed) or "0"
        if f.error_log is not None and f.log_param is not None:  # the error's detail: error_log(log_param)
            assert f.log_param in py_index
            fail = (f"ia_fast_fail_log(IA_FROM_INT({rtype}, ia_r), {f.index}, {c_string(f.error_log)}, "
                    f"ia_a[{py_index[f.log_param]}]);")
        else:
            fail = f"ia_fast_fail(IA_FROM_INT({rtype}, ia_r), {f.index});"
        body += [f"if (IA_UNLIKELY({cond})) {{", f"    {fail}", "    goto ia_done;", "}"]
        if f.status_codes:
            results.append(f"IA_FROM_INT({rtype}, ia_r)")
    body += low.checks
    if rkind == "int":
        results.append(f"IA_FROM_INT({rtype}, ia_r)")
    elif rkind == "float":
        results.append("PyFloat_FromDouble((double)ia_r)")
    elif rkind == "str":
        # NULL is "" unless the function could not be resolved (then the loader error, as _require)
        body += [f"if (ia_r == NULL && ia_status({f.index}) != 0 && ia_fast_require({f.index}) < 0)", "    goto ia_done;"]
        results.append("ia_str(ia_r)")
    elif rkind == "pointer":
        results.append(f"_cffi_from_c_pointer((char *)ia_r, IA_CT({k_result}))")
    elif rkind == "struct":
        results.append(f"_cffi_from_c_struct((char *)&ia_r, IA_CT({k_result}))")
    results += low.outs
    if not results:
        body.append("ia_res = (Py_INCREF(Py_None), Py_None);")
    elif len(results) == 1:
        body.append(f"ia_res = {results[0]};")
    else:
        body.append(f"ia_res = ia_tuple({len(results)}, (PyObject *[]){{{', '.join(results)}}});")
    body.append("ia_done:")
    if low.free_args:
        body.append("ia_free_args(ia_free);")
    body += low.cleanup
    body.append("return ia_res;")
    sig = [x if k < required else f"{x}=None" for k, x in enumerate(names)]
    text_signature = f"{f.public}({', '.join(['$module', *sig])})"
    return FastPath(index=f.index, public=f.public, text_signature=text_signature, doc=doc, body=tuple(body),
                    ctypes=tuple(low.ctypes), ct_base=ct_base)


def c_string(s: str) -> str:
    """A C string literal of ``s`` (ASCII printable kept; everything else escaped, octal for bytes)."""
    out = []
    for b in s.encode("utf-8"):
        c = chr(b)
        if c in '\\"?':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif 32 <= b < 127:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def fast_paths(lib: BoundLibrary, wrappers: Mapping[str, Wrapper]) -> tuple[FastPath, ...]:
    """The fast path of every eligible function of ``lib``, in function order, numbering their C types."""
    typedefs = {t.name: t for t in lib.header.typedefs}
    # size functions first: a string out sized by one is expressible when the size function has a fast path that
    # returns one int (it is called in C)
    sizer_names = {p.string.size_function.value for f in lib.functions for p in f.params
                   if p.role is Role.OUT_BUFFER and p.string is not None and p.string.size_function is not None}
    sizers = {f.public: f.index for f in lib.functions if f.public in sizer_names and _one_int(f, typedefs)
              and fast_path(f, lib, "", typedefs) is not None}
    out = []
    ct_base = 0
    for f in lib.functions:
        fp = fast_path(f, lib, wrappers[f.public].doc, typedefs, ct_base, sizers)
        if fp is not None:
            out.append(fp)
            ct_base += len(fp.ctypes)
    return tuple(out)


def _one_int(f: BoundFunction, typedefs: Mapping[str, Typedef]) -> bool:
    """Whether ``f``'s checked wrapper returns exactly one int (an integer out parameter, on a status)."""
    outs = [p for p in f.params if p.role in OUT_ROLES]
    if not f.returns_status or f.status_codes or len(outs) != 1 or outs[0].role is not Role.OUT:
        return False
    pointee = _pointee(outs[0].type, typedefs)
    return pointee is not None and _scalar(pointee, typedefs) == "int" and outs[0].py_result == "int"


def raw_result(f: BoundFunction) -> str:
    """The annotation of an unchecked call's return value."""
    if f.returns_status or f.result_kind is ValueKind.INT:
        return "int"
    if f.result_kind is ValueKind.VOID:
        return "None"
    if f.result_kind is ValueKind.FLOAT:
        return "float"
    return "Any"


__all__ = ["FastPath", "Wrapper", "c_string", "fast_path", "fast_paths", "lower", "out_types", "raw_result", "BoundParam"]
