"""Lowering of a bound function to its checked wrapper: Python statements, and C for the fast path.

Pure functions of :class:`~ironaccelerator_gen.bind.BoundFunction`; the
templates only print what these return.  Every identifier used here was
validated by the binder, and every literal is emitted with ``repr`` (Python) or
as a decimal integer literal (C).

:func:`lower` gives the Python wrapper (used in ABI mode, and in API mode for
functions without a fast path).  :func:`fast_path` gives, for functions whose
parameters and result are plain numbers (or a ``const char *`` / fixed-capacity
string), a METH_FASTCALL C function compiled into the cffi API module
(``trampolines.c``) that does the same thing without Python bytecode.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from .bind import BoundFunction, BoundLibrary, BoundParam
from .ctypes_util import FLOAT_BUILTINS, INTEGER_BUILTINS, declare, resolve
from .ir import Builtin, CType, EnumRef, InlineEnum, InlineRecord, Pointer, Typedef

PY_IN_ROLES = ("in", "in_str", "in_array", "inout")
OUT_ROLES = ("out", "out_str", "out_struct", "inout", "out_buffer")


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
            if p.role in ("out", "out_str", "out_struct", "inout", "errcode"):
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
    keep = any(p.role == "in_array" for p in params)
    if keep:
        body.append("_keep: list[Any] = []")
    args: list[str] = []
    for p in params:
        v = p.name
        if p.role == "in":
            args.append(f"_NULL if {v} is None else {v}" if p.nullable else v)
        elif p.role == "in_str":
            body.append(f"_{v} = {v}.encode() if isinstance({v}, str) else {v}")
            args.append(f"_NULL if _{v} is None else _{v}" if p.nullable else f"_{v}")
        elif p.role == "in_array":
            body.append(f"_{v} = _c_array(ffi, {p.element!r}, {v}, _keep{', terminated=True' if p.terminated else ''})")
            args.append(f"_{v}")
        elif p.role == "len":
            body.append(f"_{v} = len({p.len_of[0]}) if {p.len_of[0]} is not None else 0")
            for other in p.len_of[1:]:
                body.append(f"if {other} is not None and len({other}) != _{v}:")
                body.append(f"    raise Error(ErrorKind.INVALID_VALUE, {f'{other} must have as many items as {p.len_of[0]}'!r}, "
                            f"function={f.public!r}, backend={lib.spec.backend.value!r})")
            args.append(f"_{v}")
        elif p.role in ("out", "out_str", "out_struct"):
            body.append(f"_{v} = _new(_T{type_index[p.pointee]})")
            args.append(f"_{v}")
        elif p.role == "inout":
            body.append(f"_{v} = _new(_T{type_index[p.pointee]}, {v})")
            args.append(f"_{v}")
        elif p.role == "errcode":
            body.append(f"_{v} = _new(_T{type_index[p.pointee]})")
            args.append(f"_{v}")
        elif p.role == "capacity":
            cap = next(q for q in params if q.string is not None and q.string.length_param is not None
                       and q.string.length_param.value == p.c_name)
            assert cap.string is not None and cap.string.capacity is not None
            args.append(str(cap.string.capacity))
        elif p.role == "out_buffer":
            assert p.string is not None
            if p.string.size_function is not None:
                sizer = by_public[p.string.size_function.value]
                sizer_args = ", ".join(q.name for q in sizer.params if q.role in PY_IN_ROLES)
                body.append(f"_{v}_n = {sizer.public}({sizer_args})")
            else:
                body.append(f"_{v}_n = {p.string.capacity}")
            body.append(f"_{v} = _new('char[]', max(_{v}_n, 1))")
            args.append(f"_{v}")
    # locals of this wrapper: a module global of the same name would be shadowed in its body
    local_names = {"_keep", "_r", "_v"} | {f"_{p.name}" for p in params} | {f"_{p.name}_n" for p in params}
    # the cffi function: looked up once (API mode) or on first call (ABI mode) as the global _f_<name>
    fn = f"_f_{f.public}" if f"_f_{f.public}" not in local_names else f"_lib.{f.public}"
    call = f"{fn}({', '.join(args)})"
    results: list[tuple[str, str]] = []  # (expression, annotation)
    for p in params:
        v = p.name
        if p.role in ("out", "inout"):
            expr = f"_{v}[0]"
            results.append((expr, p.py_result))
        elif p.role == "out_str":
            results.append((f"_str(_{v}[0])", "str"))
        elif p.role == "out_struct":
            results.append((f"_{v}", "CData"))
        elif p.role == "out_buffer":
            assert p.string is not None
            if p.string.binary:
                results.append((f"bytes(ffi.buffer(_{v}, _{v}_n))", "bytes"))
            else:
                results.append((f"_str(_{v})", "str"))
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
        if f.result_kind == "void":
            body.append(f"_require({f.index})")
            body.append(call)
        else:
            body.append(f"_r = {call}")
            for p in params:
                if p.role == "errcode":
                    body.append(f"if _{p.name}[0]:")
                    body.append(f"    raise _error(_{p.name}[0], {f.index})")
            if f.result_kind == "str" and not results:
                # one truth test, no helper call: NULL is "" unless the function could not be resolved
                string = "_string" if "_string" not in local_names else "ffi.string"
                body.append("if not _r:")
                body.append(f"    _require({f.index})")
                body.append('    return ""')
                results.insert(0, (f'{string}(_r).decode("utf-8", "replace")', "str"))
            elif f.result_kind == "str":
                body.append("if _r == _NULL:")
                body.append(f"    _require({f.index})")
                results.insert(0, ("_str(_r)", "str"))
            else:
                results.insert(0, ("_r", {"int": "int", "float": "float"}.get(f.result_kind, "CData")))
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
    elif not f.returns_status and f.result_kind != "void":
        names.insert(0, "the result")
    results_doc = ", ".join(f"``{n}``" if " " not in n else n for n in names)
    return Wrapper(signature=", ".join(sig), returns=returns, results=tuple(names), results_doc=results_doc,
                   body=tuple(body), doc=_doc(f, lib, results_doc))


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


def fast_path(f: BoundFunction, lib: BoundLibrary, doc: str, typedefs: Mapping[str, Typedef]) -> FastPath | None:
    """The C fast path of ``f``'s checked wrapper, or None when ``f`` keeps its Python wrapper.

    Eligible: every parameter is a number passed in (``in``, not nullable), a number written through a
    pointer (``out``/``inout``), a ``char **`` result (``out_str``), or a fixed-capacity ``char *``
    buffer with its capacity parameter; the result is the status type, a number, ``const char *`` or
    void; no ``error_log``.  The C function must behave exactly like the Python wrapper (same
    arguments, same results, same exceptions).
    """
    if f.error_log is not None:
        return None
    result = f.c.result
    if f.returns_status:
        if _scalar(result, typedefs) != "int":
            return None
        rkind = "status"
    elif f.result_kind == "void":
        rkind = "void"
    elif f.result_kind in ("int", "float"):
        if _scalar(result, typedefs) != f.result_kind:
            return None
        rkind = f.result_kind
    elif f.result_kind == "str":
        pointee = _pointee(result, typedefs)
        if pointee is None or not _is_char(pointee, typedefs):
            return None
        rkind = "str"
    else:
        return None

    decls: list[str] = []
    convert_inout: list[str] = []
    convert_in: list[str] = []
    args: list[str] = []  # the C call's arguments, in C order
    outs: list[str] = []  # Python results from out parameters, in parameter order
    heap: list[str] = []  # PyMem_Calloc'ed buffers
    alloc: list[str] = []
    py_names: list[str] = []  # Python parameters, in signature order
    capacity: dict[str, int] = {}
    for p in f.params:
        if p.role == "out_buffer":
            if p.string is None or p.string.capacity is None or p.string.size_function is not None:
                return None
            if p.string.length_param is None:
                return None
            capacity[p.string.length_param.value] = p.string.capacity
    for i, p in enumerate(f.params):
        if p.role in ("in", "inout"):
            py_names.append(p.name)
        if p.role == "in":
            kind = _scalar(p.type, typedefs)
            if p.nullable or p.py_type not in ("int", "float") or kind != p.py_type:
                return None
            t = _spell(p.type)
            decls.append(f"{_spell(p.type, f'a{i}')};")
            conv = "IA_ARG_INT" if kind == "int" else "IA_ARG_FLOAT"
            convert_in.append(f"{conv}({t}, ia_a[{len(py_names) - 1}], a{i});")
            args.append(f"a{i}")
        elif p.role in ("out", "inout"):
            pointee = _pointee(p.type, typedefs)
            kind = None if pointee is None else _scalar(pointee, typedefs)
            if pointee is None or kind is None or p.py_result != kind:
                return None
            t = _spell(pointee)
            if p.role == "inout":
                if p.nullable:
                    return None
                decls.append(f"{_spell(pointee, f'o{i}')};")
                conv = "IA_ARG_INT" if kind == "int" else "IA_ARG_FLOAT"
                convert_inout.append(f"{conv}({t}, ia_a[{len(py_names) - 1}], o{i});")
            else:
                decls.append(f"{_spell(pointee, f'o{i}')} = 0;")
            args.append(f"&o{i}")
            outs.append(f"IA_FROM_INT({t}, o{i})" if kind == "int" else f"PyFloat_FromDouble((double)o{i})")
        elif p.role == "out_str":
            pointee = _pointee(p.type, typedefs)
            inner = None if pointee is None else _pointee(pointee, typedefs)
            if pointee is None or inner is None or not _is_char(inner, typedefs):
                return None
            decls.append(f"{_spell(pointee, f'o{i}')} = NULL;")
            args.append(f"&o{i}")
            outs.append(f"ia_str(o{i})")
        elif p.role == "capacity":
            if p.c_name not in capacity or _scalar(p.type, typedefs) != "int":
                return None
            args.append(f"({_spell(p.type)}){capacity[p.c_name]}")
        elif p.role == "out_buffer":
            assert p.string is not None and p.string.capacity is not None
            pointee = _pointee(p.type, typedefs)
            if pointee is None or not _is_char(pointee, typedefs):
                return None
            cap = p.string.capacity
            size = max(cap, 1)  # as the Python wrapper: char[max(n, 1)], the capacity argument stays n
            if size <= FAST_STACK_BUFFER_MAX:
                decls.append(f"char ia_buf{i}[{size}];")
                alloc.append(f"memset(ia_buf{i}, 0, sizeof ia_buf{i});")
            else:
                decls.append(f"char *ia_buf{i} = NULL;")
                heap.append(f"ia_buf{i}")
                alloc.append(f"ia_buf{i} = (char *)PyMem_Calloc({size}, 1);")
                alloc.append(f"if (ia_buf{i} == NULL)")
                alloc.append("    return PyErr_NoMemory();")
            args.append(f"ia_buf{i}")
            outs.append(f"PyBytes_FromStringAndSize(ia_buf{i}, {cap})" if p.string.binary
                        else f"ia_str_n(ia_buf{i}, {size})")
        else:
            return None  # in_str, in_array, len, out_struct, CData handles, ...: the Python wrapper

    def ret(expr: str, cond: str | None = None) -> list[str]:
        """``return expr;`` (if ``cond``), freeing the heap buffers first."""
        lines = [f"return {expr};"] if not heap else \
            [f"ia_res = {expr};", *[f"PyMem_Free({b});" for b in heap], "return ia_res;"]
        if cond is None:
            return lines
        if len(lines) == 1:
            return [f"if ({cond})", "    " + lines[0]]
        return [f"if ({cond}) {{", *["    " + line for line in lines], "}"]

    n = len(py_names)
    body: list[str] = []
    if n:
        body.append(f"static const char *const ia_kw[] = {{{', '.join(c_string(x) for x in py_names)}}};")
    body.append(f"PyObject *ia_argv[{max(n, 1)}];")
    if n:
        body.append("PyObject *const *ia_a = ia_args;")
    if heap:
        body.append("PyObject *ia_res;")
    rtype = _spell(result) if rkind != "void" else ""
    if rkind != "void":
        body.append(f"{_spell(result, 'ia_r')};")
    body += decls
    body.append("(void)ia_self;")
    body.append(f"if (IA_UNLIKELY(ia_kwnames != NULL || ia_nargs != {n})) {{")
    body.append(f"    if (ia_fast_args({c_string(f.public)}, {'ia_kw' if n else 'NULL'}, {n}, ia_args, ia_nargs, "
                "ia_kwnames, ia_argv) < 0)")
    body.append("        return NULL;")
    if n:
        body.append("    ia_a = ia_argv;")
    body.append("}")
    if rkind == "void":
        # the Python wrapper raises the loader error before it converts any argument
        body.append(f"if (IA_UNLIKELY(ia_status({f.index}) != 0) && ia_fast_require({f.index}) < 0)")
        body.append("    return NULL;")
    body += convert_inout + convert_in + alloc
    call = f"{f.public}({', '.join(args)})"
    body.append("Py_BEGIN_ALLOW_THREADS")
    body.append(f"ia_r = {call};" if rkind != "void" else f"{call};")
    body.append("Py_END_ALLOW_THREADS")
    results: list[str] = []
    if rkind == "status":
        allowed = list(dict.fromkeys([*lib.success, *f.status_codes]))
        cond = " && ".join(f"(long long)ia_r != {_c_int(c)}" for c in allowed) or "0"
        body += ret(f"ia_fast_fail(IA_FROM_INT({rtype}, ia_r), {f.index})", f"IA_UNLIKELY({cond})")
        if f.status_codes:
            results.append(f"IA_FROM_INT({rtype}, ia_r)")
    elif rkind == "int":
        results.append(f"IA_FROM_INT({rtype}, ia_r)")
    elif rkind == "float":
        results.append("PyFloat_FromDouble((double)ia_r)")
    elif rkind == "str":
        # NULL is "" unless the function could not be resolved (then the loader error, as _require)
        body += ret("NULL", f"ia_r == NULL && ia_status({f.index}) != 0 && ia_fast_require({f.index}) < 0")
        results.append("ia_str(ia_r)")
    results += outs
    if not results:
        body += ret("(Py_INCREF(Py_None), Py_None)")
    elif len(results) == 1:
        body += ret(results[0])
    else:
        body += ret(f"ia_tuple({len(results)}, (PyObject *[]){{{', '.join(results)}}})")
    text_signature = f"{f.public}({', '.join(['$module', *py_names])})"
    return FastPath(index=f.index, public=f.public, text_signature=text_signature, doc=doc, body=tuple(body))


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
    """The fast path of every eligible function of ``lib``, in function order."""
    typedefs = {t.name: t for t in lib.header.typedefs}
    out = []
    for f in lib.functions:
        fp = fast_path(f, lib, wrappers[f.public].doc, typedefs)
        if fp is not None:
            out.append(fp)
    return tuple(out)


def raw_result(f: BoundFunction) -> str:
    """The annotation of an unchecked call's return value."""
    if f.returns_status or f.result_kind == "int":
        return "int"
    if f.result_kind == "void":
        return "None"
    if f.result_kind == "float":
        return "float"
    return "Any"


__all__ = ["FastPath", "Wrapper", "c_string", "fast_path", "fast_paths", "lower", "out_types", "raw_result", "BoundParam"]
