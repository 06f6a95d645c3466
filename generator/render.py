"""Rendering: bound libraries -> the files of the generated package (in memory).

Templates only print; anything with logic is a filter here or a pass in
:mod:`ironaccelerator_gen.wrappers`.  Output carries a fixed banner naming the
spec and SDK version, never a timestamp or an absolute path.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, assert_never

import jinja2

from dataclasses import dataclass

from . import __version__, data, resolvers
from .bind import BoundFunction, BoundLibrary
from . import objc as _objc
from .output import JOURNAL
from .roles import ValueKind
from .spec import CoreSpec, LoaderSpec
from .wrappers import FastPath, c_string, fast_paths, lower, out_types, raw_result

TEMPLATES = data.TEMPLATES
# the hand-written C every library's trampolines.c includes: part of each library's build id
RUNTIME_HEADER = data.RUNTIME_INCLUDE / "ia_runtime.h"
OBJC_HEADER = RUNTIME_HEADER.with_name("ia_objc.h")  # what each Objective-C library's trampolines.c includes
# the files of an Objective-C library rendered from the C library's template (the same for both families), by name;
# _cffi_build.py, the build description, is one template too (_build_description)
SHARED = {"types.cdef": "library"}
SENTINEL = 0x7FFFFFEF  # returned by a trampoline whose symbol cannot be resolved; no vendor uses it


def _pystr(v: Any) -> str:
    return "None" if v is None else repr(str(v))


def _pytuple(v: Any) -> str:
    items = [repr(str(x)) for x in v]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _pyliteral(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise TypeError(f"not a literal: {v!r}")
    return repr(v)


def _flag_union(flags: Any, enum_name: str) -> str:
    """``A | B`` of an IntFlag's members (``<enum>.NONE`` for none)."""
    return " | ".join(f"{enum_name}.{f}" for f in flags) or f"{enum_name}.NONE"


def _pydoc(v: str) -> str:
    # every quote is escaped: a docstring text ending in '"' would otherwise close the literal early
    return v.replace("\\", "\\\\").replace('"', '\\"')


def _c_doc(fp: FastPath, indent: int = 5) -> str:
    """The C fast path's docstring: CPython's ``name($module, ...)\\n--\\n\\n`` signature line, then the
    Python wrapper's docstring, as concatenated C string literals (one per line)."""
    text = f"{fp.text_signature}\n--\n\n{fp.doc}"
    lines = text.split("\n")
    parts = [c_string(line + "\n") for line in lines[:-1]] + [c_string(lines[-1])]
    return ("\n" + " " * indent).join(parts)


def _c_args(f: BoundFunction) -> str:
    return ", ".join(p.name or f"arg{i}" for i, p in enumerate(f.c.params))


def _c_failure_value(f: BoundFunction) -> str:
    if f.returns_status:
        return f" ({f.result_decl}){SENTINEL}"
    match f.result_kind:
        case ValueKind.VOID:
            return ""
        case ValueKind.STR | ValueKind.CDATA:
            return " NULL"
        case ValueKind.STRUCT:  # a struct returned by value: a zeroed compound literal
            return f" ({f.result_decl}){{0}}"
        case ValueKind.INT | ValueKind.FLOAT | ValueKind.BYTES | ValueKind.NONE:  # (value_kind gives no result these two)
            return " 0"
        case _:
            assert_never(f.result_kind)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolverView:
    """What the templates emit for a library whose resolver kind the runtime declares (generator/resolvers.py),
    from the kind's declaration and its bound keys: no template names a kind."""

    name: str  # the kind's  ex) lookup
    module: str  # the module of its ABI-mode class  ex) ironaccelerator_runtime.loader ("": dlsym's default)
    cls: str  # ex) Lookup
    py_comment: tuple[str, ...]  # lines of the comment above RESOLVER
    args: tuple[tuple[str, str], ...]  # (keyword, Python source) of RESOLVER's constructor
    c_comment: tuple[str, ...]
    defines: tuple[tuple[str, str], ...]  # trampolines.c's #defines (IA_RESOLVER, IA_RESOLVER_VIA, the keys')
    tables: tuple[str, ...]  # the per-function C tables its C reads: public (ia_public[]), pin (ia_pin[])
    via: tuple[BoundFunction, ...]  # the functions it is asked for (abi.cdef's ia_pfn_<index> typedefs)
    abi_comment: tuple[str, ...]
    c_code: str  # its C, when not in ia_runtime.h (after the #include)


def resolver_view(lib: BoundLibrary) -> ResolverView | None:
    """The declared kind of ``lib``'s resolver, rendered (None: ``table`` or ``objc``, the generator's own)."""
    r = lib.resolver
    kind = resolvers.declared().get(r.kind)
    if kind is None:
        return None
    fmt = {"symbol": r.symbol}
    match kind.via:
        case "pinned":
            via = tuple(f for f in lib.functions if (f.abi_version or 0) > 0 and f.index != r.index)
        case "all":
            via = tuple(lib.functions)
        case _:
            via = ()
    args: list[tuple[str, str]] = []
    defines: list[tuple[str, str]] = []
    if kind.c_select:
        defines.append(("IA_RESOLVER", kind.c_select))
    if kind.c_via:
        defines.append(("IA_RESOLVER_VIA", kind.c_via))
    if kind.c_forget:
        defines.append(("IA_RESOLVER_FORGET", kind.c_forget))
    for key in kind.keys:
        v = r.value(key.name)
        if v is None:
            continue
        if key.type == "constant":
            assert v.value is not None
            facts = {"value": _c_int(v.value)}
            py = str(v.value)
        else:
            f = lib.functions[v.functions[0]]
            facts = {"symbol": f'"{f.symbol}"', "index": str(f.index), "optional": str(v.optional)}
            py = (_pystr(f.public) if key.type == "function" else
                  "(" + "".join(f"{_pystr(lib.functions[i].public)}, " for i in v.functions) + ")")
        defines += [(name, facts[fact]) for name, fact in key.c]
        if key.py:
            args.append((key.py, py))
    for arg, fact in kind.py_library:
        if fact == "error_type":
            args.append((arg, _pystr(lib.error_type)))
        elif fact == "pins":
            rows = "".join(f"        {_pystr(f.public)}: {f.abi_version},\n" for f in via)
            args.append((arg, "{  # public name -> ABI version (the PFN_ typedef whose prototype is the bound "
                              f"declaration)\n{rows}    }}"))
    module, _, cls = kind.python.rpartition(".")

    def lines(text: str) -> tuple[str, ...]:
        return tuple(text.format(**fmt).split("\n")) if text else ()
    return ResolverView(name=kind.name, module=module, cls=cls, py_comment=lines(kind.py_comment), args=tuple(args),
                        c_comment=lines(kind.c_comment), defines=tuple(defines), tables=tuple(kind.c_tables),
                        via=via, abi_comment=lines(kind.abi_comment), c_code=kind.c_code)


def _c_int(value: int) -> str:
    """An integer as a C literal of a type that holds it (a negative one as ``(n LL - 1)``: ``-9223372036854775808``
    is not a literal)."""
    return f"{value}ULL" if value >= 0 else f"({value + 1}LL - 1)"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters.update(flag_union=_flag_union, pystr=_pystr, pytuple=_pytuple, pyliteral=_pyliteral, pydoc=_pydoc, c_args=_c_args,
                       c_failure_value=_c_failure_value, raw_result=raw_result, c_doc=_c_doc, c_string=c_string,
                       c_int=_c_int, objc_zero=_objc.c_zero, objc_send=_objc.c_send,
                       objc_checked_params=_objc.c_checked_params, objc_py_signature=_objc.py_signature,
                       objc_py_returns=_objc.py_returns, objc_py_body=_objc.py_body, objc_py_doc=_objc.py_doc,
                       objc_row=_objc.method_row, objc_py_from_c=_objc.py_from_c,
                       objc_function_row=_objc.function_row, objc_function_signature=_objc.py_function_signature,
                       objc_function_doc=_objc.py_function_doc)
    return env


def banner_text(source: str) -> str:
    return (f"Generated by ironaccel-gen {__version__} from {source}. "
            "Do not edit: change the spec and run `make generate`.")


# the trait classes a backend's module defines, exported by its vendor package as <class_prefix><trait>
BACKEND_CLASSES = ("Backend", "Device", "Allocation", "Stream", "Event", "Module", "Kernel")


def render_package(env: jinja2.Environment, core: CoreSpec, vendors: Iterable[str],
                   backends: Mapping[str, str] | None = None,
                   loaders: Mapping[str, Sequence[tuple[str, LoaderSpec]]] | None = None) -> dict[str, str]:
    """The package-level files (errors, runtime, package __init__s).

    ``vendors``: every vendor with a library spec, whether or not its SDK was found this run, so that a
    machine without (say) the HIP headers renders the same package files as one with them.  ``backends``: vendor
    -> class prefix of each backend spec; its vendor package exports the backend's classes (imported from
    ``_backend`` on first use, so that importing one library does not load the backend).  ``loaders``: vendor ->
    (library, its spec's ``loader``) of each library spec, which a backend's vendor package states as
    ``_LIBRARIES`` (where each library's file is looked for, for a backend's early start: read without importing
    the library's package).  Spec data only, as the vendors are: the same files with or without the SDKs."""
    backends = backends or {}
    loaders = loaders or {}
    banner = "# " + banner_text(core.path)
    out = {
        "ironaccelerator/__init__.py": env.get_template("package/__init__.py.j2").render(banner=banner, version=__version__,
                                                                                          journal=JOURNAL),
        "ironaccelerator/py.typed": "",
        "ironaccelerator/backends/__init__.py": f'{banner}\n"""Vendor backends: ``ironaccelerator.backends.<vendor>.<library>``."""\n',
    }
    for vendor in sorted(set(vendors) | set(backends)):
        prefix = backends.get(vendor)
        if prefix is None:
            out[f"ironaccelerator/backends/{vendor}/__init__.py"] = f'{banner}\n"""The {vendor} vendor libraries."""\n'
            continue
        out[f"ironaccelerator/backends/{vendor}/__init__.py"] = env.get_template("package/vendor.py.j2").render(
            banner=banner, vendor=vendor, classes=[prefix + c for c in BACKEND_CLASSES],
            loaders=sorted(loaders.get(vendor, ()), key=lambda x: x[0]))
    return out


def with_notice(banner: str, text: str, notice: tuple[str, str] | None) -> tuple[str, str]:
    """The Python banner and the C banner text with ``notice`` below them: (what the declarations are derived from,
    the license notice it carries: :func:`sdk.header_notice`), or as they are without one."""
    if not notice:
        return banner, text
    lines = [f"The declarations in this file are derived from {notice[0]}, whose notice follows.", "",
             *notice[1].splitlines()]
    return (banner + "\n#\n" + "\n".join(("# " + line).rstrip() for line in lines),
            text + "\n *\n" + "\n".join((" * " + line.replace("*/", "* /")).rstrip() for line in lines) + "\n")


def render_library(env: jinja2.Environment, lib: BoundLibrary, notice: tuple[str, str] | None = None) -> dict[str, str]:
    """The files of one library package: ``ironaccelerator/backends/<vendor>/<library>/``.  ``notice``: the license
    notice of the header whose declarations the files reproduce (:func:`with_notice`), carried below the banner of
    each."""
    source = f"{lib.spec.path} and {lib.header.name} ({lib.spec.backend} {lib.sdk_version})"
    banner, text = with_notice("# " + banner_text(source), banner_text(source), notice)
    types = out_types(lib)
    type_index = {t: i for i, t in enumerate(types)}
    by_public = {f.public: f for f in lib.functions}
    wrappers = {f.public: lower(f, lib, type_index, by_public) for f in lib.functions}
    fast = fast_paths(lib, wrappers)
    ctx = dict(lib=lib, banner=banner, banner_text=text, sentinel=SENTINEL, out_types=types, wrappers=wrappers,
               fast=fast, objc=False, rk=resolver_view(lib))
    base = f"ironaccelerator/backends/{lib.spec.vendor}/{lib.spec.library}/"
    # what the build compiles: its digest is the build id that the built modules carry and that import checks
    built = {name: env.get_template(f"library/{name}.j2").render(**ctx)
             for name in ("types.cdef", "api.cdef", "abi.cdef", "trampolines.c")}
    built["_cffi_build.py"] = _build_description(env, ctx, built, RUNTIME_HEADER)
    files = {name: env.get_template(f"library/{name}.j2").render(**ctx)
             for name in ("__init__.py", "unchecked.py", "_binding.py")}
    return {base + name: text for name, text in sorted({**files, **built}.items())}


def _build_description(env: jinja2.Environment, ctx: dict[str, Any], built: dict[str, str], header: Path) -> str:
    """``_cffi_build.py`` of either family (one template, ``library/_cffi_build.py.j2``), carrying the build id: the
    digest of the other build inputs (``built``), this description rendered without the id, and every runtime
    header (``ia_*.h`` beside ``header``, the one that trampolines.c includes: what it includes in turn, and so on,
    with no list to keep; a header neither family includes only changes the id).  Sets ``ctx["build_id"]`` for
    the files rendered after it."""
    template = env.get_template("library/_cffi_build.py.j2")
    built["_cffi_build.py"] = template.render(**ctx, build_id="", runtime_header=header.name)
    ctx["build_id"] = build_id({**built, **{h.name: h.read_text(encoding="utf-8")
                                            for h in sorted(header.parent.glob("ia_*.h"))}})
    return template.render(**ctx, runtime_header=header.name)


def build_id(sources: dict[str, str]) -> str:
    """The digest of a library's build inputs (name and text of each, in name order)."""
    h = hashlib.sha256()
    for name in sorted(sources):
        h.update(f"{name}\0{len(sources[name])}\0{sources[name]}\0".encode("utf-8"))
    return h.hexdigest()[:24]


def render_objc_library(env: jinja2.Environment, lib: _objc.ObjcLibrary,
                        notice: tuple[str, str] | None = None) -> dict[str, str]:
    """The files of one Objective-C library package (``templates/objc/``): the same names as a C library's, so
    that ``build`` and ``generate --check`` treat both alike.  ``notice``: as :func:`render_library`'s (metal-cpp's,
    where the prototypes come from it)."""
    source = f"{lib.spec.path} ({lib.spec.backend} {lib.spec.library}, Objective-C)"
    banner, text = with_notice("# " + banner_text(source), banner_text(source), notice)
    ctx: dict[str, Any] = dict(lib=lib, banner=banner, banner_text=text, objc=True)
    base = f"ironaccelerator/backends/{lib.spec.vendor}/{lib.spec.library}/"
    built = {name: env.get_template(f"{SHARED.get(name, 'objc')}/{name}.j2").render(**ctx)
             for name in ("types.cdef", "api.cdef", "abi.cdef", "trampolines.c")}
    built["_cffi_build.py"] = _build_description(env, ctx, built, OBJC_HEADER)
    files = {name: env.get_template(f"{SHARED.get(name, 'objc')}/{name}.j2").render(**ctx)
             for name in ("__init__.py", "unchecked.py", "_binding.py")}
    return {base + name: text for name, text in sorted({**files, **built}.items())}
