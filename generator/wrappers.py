"""Lowering of a bound function to its checked Python wrapper: signature, statements, results.

A pure function of :class:`~ironaccelerator_gen.bind.BoundFunction`; the
template only prints what this returns.  Every identifier used here was
validated by the binder, and every literal is emitted with ``repr``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .bind import BoundFunction, BoundLibrary, BoundParam

PY_IN_ROLES = ("in", "in_str", "in_array", "inout")
OUT_ROLES = ("out", "out_str", "out_struct", "inout", "out_buffer")


@dataclass(frozen=True, slots=True, kw_only=True)
class Wrapper:
    signature: str  # ex) bytesize: int
    returns: str  # ex) int | tuple[int, int] | None
    results: tuple[str, ...]
    results_doc: str
    body: tuple[str, ...]


def out_types(lib: BoundLibrary) -> tuple[str, ...]:
    """Every pointee type an out/inout parameter allocates, in first-use order (``_T<n>`` constants)."""
    seen: dict[str, None] = {}
    for f in lib.functions:
        for p in f.params:
            if p.role in ("out", "out_str", "out_struct", "inout"):
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
            body.append(f"_{v} = _c_array(ffi, {p.element!r}, {v}, _keep)")
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
    call = f"_lib.{f.public}({', '.join(args)})"
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
            if f.result_kind == "str":
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
        if ann in ("int", "float") and not expr.startswith("_str("):
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
    return Wrapper(signature=", ".join(sig), returns=returns, results=tuple(names),
                   results_doc=", ".join(f"``{n}``" if " " not in n else n for n in names), body=tuple(body))


def raw_result(f: BoundFunction) -> str:
    """The annotation of an unchecked call's return value."""
    if f.returns_status or f.result_kind == "int":
        return "int"
    if f.result_kind == "void":
        return "None"
    if f.result_kind == "float":
        return "float"
    return "Any"


__all__ = ["Wrapper", "lower", "out_types", "raw_result", "BoundParam"]
