"""``ironaccel-gen scaffold``: a starting spec for a library not yet bound, and ``--missing``: what an existing
spec leaves to review.

The scaffold reads one header with the C front-end the generator uses and writes what a header can suggest:
where the SDK is (``sdk:``), the function prefix (``bind.include``), the status type and its codes (an enum, or
negative ``#define``s as OpenCL has) each with an ``ErrorKind`` suggested by its name and marked for review, and
the library files found on this system (``loader:``).  The draft is then loaded with the project's own loader
and bound against the parsed header before anything is written; a function the binder refuses is excluded with
the reason, so the spec written generates and builds without edits.  Suggestions are naming rules, never
meaning: every one carries a ``# review`` comment.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib.metadata
import json
import keyword
import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Sequence

from . import data
from .bind import BoundLibrary, bind
from .diagnostics import Collector, Diagnostic, UserError
from .frontend import ParseRequest, parse
from .ctypes_util import declare, resolve
from .rules import apply_rules, spelling
from .ir import (Builtin, CType, EnumRef, Field, Function, FunctionProto, Header, InlineEnum, InlineRecord, Location,
                 Pointer,
                 RecordRef, TypedefRef)
from .spec import IDENT, CoreSpec, LibrarySpec, load_core, load_library

EXIT_USER_ERROR = 2
DEFAULT_SPECS = data.SPECS

# Suggested ErrorKind by a code's name: the first rule with a pattern in the code's words (the name in upper case,
# camelCase split at each capital: hipErrorOutOfMemory -> _HIP_ERROR_OUT_OF_MEMORY_); a pattern ending in '$'
# must end the name (CL_INVALID_KERNEL is a bad handle, CL_INVALID_KERNEL_ARGS a bad value).  The order matters:
# LAUNCH_OUT_OF_RESOURCES is a failed launch before it is memory, DEVICE_NOT_FOUND no device before NOT_FOUND.
# They follow how specs/cuda/driver.yaml, specs/hip/runtime.yaml and specs/opencl/cl.yaml map their codes.
KIND_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("LAUNCH_FAILED", ("_LAUNCH_", "_ILLEGAL_ADDRESS_", "_ILLEGAL_INSTRUCTION_", "_MISALIGNED_ADDRESS_",
                       "_HARDWARE_STACK_ERROR_", "_ASSERT_$", "_EXEC_STATUS_ERROR_", "_EXECUTION_FAILED_")),
    # out of device/host/pool memory, an allocation that failed (cuBLAS's ALLOC_FAILED), a fragmented pool (Vulkan)
    ("OUT_OF_MEMORY", ("_OUT_OF_MEMORY_", "_OUT_OF_RESOURCES_", "_OUT_OF_HOST_MEMORY_", "_OUT_OF_DEVICE_MEMORY_",
                       "_OUT_OF_POOL_MEMORY_", "_ALLOCATION_FAIL", "_ALLOC_FAIL", "_MEMORY_ALLOCATION_",
                       "_HEAP_EXHAUSTED_", "_NO_MEMORY_", "_INSUFFICIENT_MEMORY_", "_FRAGMENTED_POOL_",
                       "_FRAGMENTATION_", "_TOO_MANY_OBJECTS_", "_MEMORY_MAP_FAILED_")),
    ("NOT_READY", ("_NOT_READY_", "_BUSY_$", "_TIMEOUT_", "_TIMED_OUT_")),
    ("NOT_INITIALIZED", ("_NOT_INITIALIZED_", "_UNINITIALIZED_", "_DEINITIALIZED_", "_INITIALIZATION_ERROR_",
                         "_INITIALIZATION_FAILED_")),
    ("NO_DEVICE", ("_NO_DEVICE_", "_DEVICE_NOT_FOUND_", "_DEVICE_NOT_AVAILABLE_", "_DEVICE_UNAVAILABLE_",
                   "_INSUFFICIENT_DRIVER_", "_DEVICE_LOST_", "_INCOMPATIBLE_DRIVER_", "_DEVICE_REQUIRES_RESET_")),
    ("LIBRARY_NOT_FOUND", ("_LIBRARY_NOT_FOUND_", "_FILE_NOT_FOUND_", "_SHARED_OBJECT_INIT_")),
    ("SYMBOL_NOT_FOUND", ("_SYMBOL_NOT_FOUND_",)),
    ("COMPILE_FAILED", ("_COMPILATION_$", "_COMPILE_PROGRAM_", "_COMPILER_NOT_", "_LINKER_NOT_", "_LINK_PROGRAM_",
                        "_BUILD_PROGRAM_", "_INVALID_PTX_$", "_INVALID_IMAGE_$", "_INVALID_BINARY_$",
                        "_NO_BINARY_", "_INVALID_SOURCE_$", "_JIT_", "_PROGRAM_CREATION_", "_BUILD_FAILURE_$",
                        "_LINK_FAILURE_$", "_INVALID_SHADER_")),
    ("UNSUPPORTED", ("_NOT_SUPPORTED_", "_UNSUPPORTED_", "_NOT_IMPLEMENTED_", "_NOT_PERMITTED_", "_NOT_AVAILABLE_",
                     "_INVALID_OPERATION_$", "_NOT_PRESENT_$", "_ARCH_MISMATCH_", "_INSUFFICIENT_PERMISSIONS_")),
    ("INVALID_HANDLE", ("_INVALID_HANDLE_$", "_INVALID_RESOURCE_HANDLE_$", "_INVALID_CONTEXT_$", "_INVALID_QUEUE_$",
                        "_INVALID_COMMAND_QUEUE_$", "_INVALID_DEVICE_QUEUE_$", "_INVALID_MEM_OBJECT_$",
                        "_INVALID_PROGRAM_$", "_INVALID_KERNEL_$", "_INVALID_EVENT_$", "_INVALID_SAMPLER_$",
                        "_INVALID_STREAM_$", "_INVALID_MODULE_$", "_INVALID_FUNCTION_$", "_INVALID_GRAPH_$",
                        "_INVALID_OBJECT_$", "_INVALID_GL_OBJECT_$", "_CONTEXT_IS_DESTROYED_", "_NOT_FOUND_",
                        "_INVALID_NULL_HANDLE_$", "_INVALID_EXTERNAL_HANDLE_")),
    ("INVALID_VALUE", ("_INVALID_VALUE_", "_INVALID_ARG", "_INVALID_INPUT_", "_INVALID_OPTION", "_INVALID_",
                       "_BAD_PARAM", "_OUT_OF_RANGE_", "_OVERLAP_", "_SIZE_RESTRICTION_", "_VALIDATION_FAILED_")),
    ("UNKNOWN", ("_UNKNOWN_",)),
)

# predefined macros a vendor header turns into SIMD members (cl_platform.h: __m128 in cl_float4) that the IR,
# plain C, cannot model: dropped when parsing fails inside a compiler's *intrin.h
SIMD_MACROS = ("__SSE__", "__SSE2__", "__MMX__", "__AVX__")

LIB_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/usr/local/lib64",
            "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu")
_ABS_DIR = re.compile(r"(/[A-Za-z0-9_.*+\-]+)+\Z")  # what the spec loader accepts as a directory
_REL_DIR = re.compile(r"[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*\Z")


def words(name: str) -> str:
    """A code's name as ``_WORD_WORD_``: upper case, split at underscores and camelCase capitals.
    ex) ``hipErrorOutOfMemory`` -> ``_HIP_ERROR_OUT_OF_MEMORY_``; ``CL_INVALID_VALUE`` -> ``_CL_INVALID_VALUE_``"""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return "_" + "_".join(w for w in spaced.upper().split("_") if w) + "_"


def suggest_kind(name: str) -> tuple[str, str] | None:
    """The ErrorKind a code's name suggests, with the rule that matched (``*OUT_OF_MEMORY*``), or None."""
    w = words(name)
    for kind, patterns in KIND_RULES:
        for p in patterns:
            ends = p.endswith("$")
            if w.endswith(p[:-1]) if ends else p in w:
                return kind, "*" + p.strip("_$") + ("" if ends else "*")
    return None


def first_word(name: str) -> str:
    """A function's prefix: its first word.  ex) clGetPlatformIDs -> cl, nvrtcVersion -> nvrtc,
    QnnBackend_create -> Qnn, make_uchar1 -> make, __hipPushCallConfiguration -> __hip, CUDA_init -> CUDA"""
    m = re.match(r"_*(?:[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+)", name)
    return m.group(0) if m else name


# ------------------------------------------------------------------------------ the draft


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeRow:
    """One status code with what the scaffold suggests for it.  ex) ``CL_OUT_OF_RESOURCES``, OUT_OF_MEMORY"""

    name: str
    value: int
    kind: str | None  # the suggested ErrorKind; None: defaulted (no rule matched)
    rule: str = ""  # ex) *OUT_OF_MEMORY*


@dataclass(frozen=True, slots=True, kw_only=True)
class Draft:
    """What the scaffold writes, as data; :func:`render` turns it into YAML with its review comments."""

    vendor: str  # ex) opencl
    library: str  # ex) cl
    backend: str  # ex) OPENCL
    backend_note: str
    source: str  # the header as given, for the banner  ex) /usr/include/CL/cl.h
    header: str  # ex) CL/cl.h (relative to the include directory)
    sdk_kind: str  # ex) opencl
    sdk_ref: bool = False  # True: another spec declares this kind (written as ``sdk: kind``)
    sdk_env: tuple[str, ...] = ()
    sdk_roots: tuple[str, ...] = ()
    sdk_include_dirs: tuple[str, ...] = ()
    sdk_wheels: tuple[tuple[str, str], ...] = ()  # (include, dist)
    sdk_note: str = ""
    sdk_version: tuple[tuple[str, str], ...] = ()  # the version: block, (key, YAML value)  ex) (macro, CUDA_VERSION)
    sdk_extra_includes: tuple[str, ...] = ()  # extra_includes: sdk:KIND, relative or absolute directories
    sdk_extra_note: str = ""
    sdk_install: tuple[tuple[str, str], ...] = ()  # install: (apt|pip, package), from dpkg -S or the wheel's dist
    sdk_version_note: str = ""  # a version the header states that no version: way reads (ZE_API_VERSION_CURRENT)
    defines: tuple[tuple[str, str], ...] = ()
    define_note: str = ""
    undefines: tuple[str, ...] = ()
    undefine_note: str = ""
    include: tuple[str, ...] = ()
    include_note: str = ""
    others: tuple[tuple[str, int], ...] = ()  # other prefixes, not bound: (prefix, count)
    exclude: tuple[tuple[str, str], ...] = ()  # (pattern, why)
    loader: tuple[str, ...] = ()
    loader_note: str = ""
    loader_wheel_dirs: tuple[str, ...] = ()
    loader_sdk_dirs: tuple[str, ...] = ()
    loader_sdk_env: tuple[str, ...] = ()
    loader_sdk_roots: tuple[str, ...] = ()
    error_type: str | None = None  # None: ``errors: none``
    error_note: str = ""
    success: tuple[str, ...] = ()
    macros: tuple[str, ...] = ()  # errors.macros patterns (negative #define codes)
    out_param: str | None = None
    name_function: str | None = None
    codes: tuple[CodeRow, ...] = ()
    inferred: int = 0  # pointer parameters whose direction is inferred
    # functions: what the header's comments state about pointer parameters ([in], [out], [in,out], [optional],
    # [range(0, n)], @param[out]): (function, ((param, YAML flow mapping, the comment's tags), ...))
    params: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = ()
    # rules: the strided arrays a BLAS-like library takes (a pointer with its ld<name>/inc<name> parameter), as
    # device pointers: (types, names, how many parameters), empty when the header has none
    device_rule: tuple[tuple[str, ...], tuple[str, ...], int] | None = None
    # rules: input arrays that follow their count (OpenCL's num_events_in_wait_list, event_wait_list): (array, count,
    # the functions, or () for the bound prefix, how many parameters)
    array_rules: tuple[tuple[str, str, tuple[str, ...], int], ...] = ()


def _scalar(s: str) -> str:
    """``s`` as a YAML scalar: plain where YAML reads it back as that string, else double-quoted (JSON)."""
    plain = re.fullmatch(r"[A-Za-z_/][A-Za-z0-9_./\-]*", s) is not None and s.lower() not in (
        "true", "false", "yes", "no", "on", "off", "null", "y", "n")
    return s if plain else json.dumps(s)


def _flow(items: Iterable[str]) -> str:
    return "[" + ", ".join(_scalar(x) for x in items) + "]"


def _comment(text: str) -> str:
    return f"  # {text}" if text else ""


def render(d: Draft) -> str:
    """The spec's YAML text: deterministic (the draft's order; no dates, no absolute paths but the SDK's)."""
    out = [f"# {d.vendor}.{d.library}: a starting spec written by `ironaccel-gen scaffold` from {d.header}.",
           "# Every suggestion is marked 'review' (or TODO): read each, then delete the mark.  Parameter directions",
           "# the header's comments do not state are inferred from their types: "
           f"`ironaccel-gen scaffold {d.vendor}.{d.library} --missing` lists the {d.inferred}",
           "# pointer parameters to state in functions: (direction, len, nullable, string).",
           f"vendor: {_scalar(d.vendor)}",
           f"library: {_scalar(d.library)}",
           f"backend: {_scalar(d.backend)}{_comment(d.backend_note)}"]
    if d.sdk_ref:
        out.append(f"sdk: {_scalar(d.sdk_kind)}{_comment(d.sdk_note)}")
    else:
        out += ["sdk:" + _comment(d.sdk_note), f"  kind: {_scalar(d.sdk_kind)}", f"  marker: {_scalar(d.header)}"]
        if d.sdk_env:
            out.append(f"  env: {_flow(d.sdk_env)}  # review: guessed names of the variables that point at the SDK")
        if d.sdk_roots:
            out.append(f"  roots: {_flow(d.sdk_roots)}")
        if d.sdk_include_dirs:
            out.append(f"  include_dirs: {_flow(d.sdk_include_dirs)}")
        if d.sdk_extra_includes or d.sdk_extra_note:
            out.append(f"  extra_includes: {_flow(d.sdk_extra_includes)}{_comment(d.sdk_extra_note)}")
        if d.sdk_version:
            out.append("  version: {" + ", ".join(f"{k}: {v}" for k, v in d.sdk_version) + "}  # review")
        elif d.sdk_version_note:
            out.append(f"  # {d.sdk_version_note}")
        if d.sdk_install:
            out.append("  install: {" + ", ".join(f"{k}: {_scalar(v)}" for k, v in d.sdk_install)
                       + "}  # review: what CI installs (scripts/install-system-sdks.sh, the Makefile's TEST_SDKS)")
        if d.sdk_wheels:
            out.append("  wheels:")
            out += [f"    - {{include: {_scalar(inc)}, dist: {_scalar(dist)}}}" for inc, dist in d.sdk_wheels]
    out.append(f"headers: {_flow([d.header])}")
    if d.defines:
        out.append("defines:" + _comment(d.define_note))
        out += [f"  {_scalar(k)}: {json.dumps(v)}" for k, v in d.defines]
    if d.undefines:
        out.append(f"undefines: {_flow(d.undefines)}{_comment(d.undefine_note)}")
    out += ["", "bind:", f"  include: {_flow(d.include)}{_comment(d.include_note)}"]
    if d.others:
        listed = ", ".join(f"{p}* ({n})" for p, n in d.others)
        out.append(f"  # other prefixes, not bound: {listed}")
    if d.exclude:
        out.append("  exclude:")
        out += [f"    - {_scalar(p)}{_comment(why)}" for p, why in d.exclude]
    out += ["", "loader:", f"  linux: {_flow(d.loader)}{_comment(d.loader_note)}"]
    for key, values in (("wheel_dirs", d.loader_wheel_dirs), ("sdk_dirs", d.loader_sdk_dirs),
                        ("sdk_env", d.loader_sdk_env), ("sdk_roots", d.loader_sdk_roots)):
        if values:
            out.append(f"  {key}: {_flow(values)}")
    out.append("")
    if d.error_type is None:
        out.append(f"errors: none{_comment(d.error_note)}")
    else:
        out += ["errors:", f"  type: {_scalar(d.error_type)}{_comment(d.error_note)}"]
        if d.macros:
            out.append("  # review: the codes are the negative #defines the first pattern matches, less each !NAME:")
            out.append("  # negative too, but outside the run of codes that follows the success code")
            out.append("  macros:")
            out += [f"    - {_scalar(m)}" for m in d.macros]
        if d.out_param:
            out.append(f"  out_param: {_scalar(d.out_param)}  # review: functions returning an object report "
                       "their status here")
        out.append(f"  success: {_flow(d.success)}{'  # TODO: no success code found' if not d.success else ''}")
        if d.name_function:
            out.append(f"  name_function: {_scalar(d.name_function)}  # review: the code's name for messages")
        out.append("  default: DRIVER")
        kinds: dict[str, list[CodeRow]] = {}
        for row in d.codes:
            if row.kind is not None:
                kinds.setdefault(row.kind, []).append(row)
        width = max((len(r.name) for r in d.codes), default=0)
        if kinds:
            out.append("  kinds:  # suggested from each code's name: review each")
            for kind, _ in KIND_RULES:
                if kind in kinds:
                    out.append(f"    {kind}:")
                    out += [f"      - {r.name:<{width}}  # review: {r.rule} ({r.value})" for r in kinds[kind]]
        else:
            out.append("  kinds: {}  # no code's name suggests a kind: see defaulted")
        rest = [r for r in d.codes if r.kind is None]
        if rest:
            out.append("  defaulted:  # no kind suggested by the name: these raise the default (DRIVER)")
            out += [f"    - {r.name:<{width}}  # review ({r.value})" for r in rest]
    if d.device_rule is not None or d.array_rules:
        out += ["", "rules:"]
    if d.device_rule is not None:
        types, names, count = d.device_rule
        out += [f"  # {count} pointer parameters come with a leading dimension or an increment (A with lda, x with "
                "incx):", "  # the matrices and vectors of a BLAS-like library, which it keeps in device memory",
                f"  - functions: {_flow(d.include)}", f"    types: {_flow(types)}",
                f"    names: {_flow(names)}", "    device: true  # review: device memory, not host storage"]
    for array, count_param, functions, count in d.array_rules:
        out += [f"  # review: {count} function(s) take a const pointer {array} after an integer {count_param}: an input "
                "array and its length",
                f"  - {{functions: {_flow(functions or d.include)}, names: {_flow([array])}, direction: in, "
                f"len: {count_param}, nullable: true}}"]
    if d.params:
        out += ["", "# what the header's comments say of pointer parameters (their [in]/[out]/[in,out], [optional],",
                "# [range(0, count)] or @param[out]): review each",
                "functions:"]
        for fn, ps in d.params:
            out += [f"  {fn}:", "    params:"]
            out += [f"      {p}: {flow}  # review: {tags}" for p, flow, tags in ps]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------ directions from comments

_TRAILING = re.compile(r"^(?P<code>[^/]*?)(?P<name>[A-Za-z_]\w*)\s*(\[[^\]]*\])?\s*,?\s*///<\s*(?P<tags>(\[[^\]]*\])+)")
_DOXYGEN = re.compile(r"[@\\]param\s*\[\s*(?P<dir>in\s*,\s*out|inout|input|output|in|out)\s*\]\s+"
                      r"(?P<name>[A-Za-z_]\w*)")


def comment_tags(lines: Sequence[str], line: int, names: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """What a declaration's comments say of its parameters ``names``, each as its tags (``in``, ``out``,
    ``in,out``, ``optional``, ``range(0, numWaitEvents)``): Level Zero's trailing ``///< [in][optional]`` after
    each parameter, and Doxygen ``@param[out] name`` / ``\\param [in] name`` in the comment block above it.
    ``line``: the declaration's (1-based, its name's line)."""
    out: dict[str, tuple[str, ...]] = {}
    wanted = set(names)
    # trailing ///< comments, from the name's line to the end of the parameter list
    for text in lines[max(0, line - 1):line + 200]:
        m = _TRAILING.match(text)
        if m and m.group("name") in wanted and m.group("name") not in out:
            out[m.group("name")] = tuple(t.replace(" ", "") if t.strip().startswith("range")
                                         else t.strip().lower().replace(" ", "")
                                         for t in re.findall(r"\[([^\]]*)\]", m.group("tags")))
        if ");" in text.split("//")[0]:
            break
    # a Doxygen block above: up to 3 lines of return type and attributes, then */
    i = line - 2
    for _ in range(4):
        if i < 0 or lines[i].rstrip().endswith("*/"):
            break
        if lines[i].rstrip().endswith((";", "}", "{")):
            i = -1
            break
        i -= 1
    if i >= 0 and lines[i].rstrip().endswith("*/"):
        block: list[str] = []
        while i >= 0:
            block.append(lines[i])
            if "/*" in lines[i]:
                break
            i -= 1
        for m in _DOXYGEN.finditer("\n".join(reversed(block))):
            if m.group("name") in wanted and m.group("name") not in out:
                out[m.group("name")] = ({"inout": "in,out", "input": "in", "output": "out"}.get(
                    re.sub(r"\s", "", m.group("dir")), re.sub(r"\s", "", m.group("dir"))),)
    return out


def _pointer(t: CType, typedefs: dict[str, CType]) -> Pointer | None:
    r = _resolve(t, typedefs)
    return r if isinstance(r, Pointer) and not isinstance(_resolve(r.pointee, typedefs), FunctionProto) else None


def stated_params(h: Header, include_dir: Path, functions: dict[str, Function],
                  selected: Sequence[str]) -> tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...]:
    """The ``functions: <name>: params:`` entries the header's comments give for the pointer parameters of
    ``selected``: ``direction`` where it is not what the binder infers from the type alone (a pointer to const is
    in), ``nullable`` for ``[optional]``, ``len`` for ``[range(0, count)]`` whose count is a parameter.  A struct
    whose first field is ``stype`` (Level Zero's, Vulkan's ``sType``) that the function fills is out with ``fill:``
    its type tag where the tag's enum names it (``_type_tag``), else in-out: the caller sets its type first."""
    typedefs = {t.name: t.type for t in h.typedefs}
    records = {(r.kind, r.tag): r for r in h.records if r.tag}
    texts: dict[str, list[str]] = {}
    out = []
    for name in selected:
        f = functions[name]
        file = f.location.file
        if file not in texts:
            try:
                texts[file] = (include_dir / file).read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                texts[file] = []
        pnames = [p.name for p in f.params if p.name]
        tags = comment_tags(texts[file], f.location.line, pnames) if texts[file] else {}
        rows = []
        for p in f.params:
            if not p.name or p.name not in tags:
                continue
            ptr = _pointer(p.type, typedefs)
            if ptr is None:
                continue
            t = tags[p.name]
            pointee = _resolve(ptr.pointee, typedefs)
            const = ptr.pointee.const or pointee.const
            record = records.get((pointee.kind, pointee.tag)) if isinstance(pointee, RecordRef) else \
                pointee.record if isinstance(pointee, InlineRecord) else None
            fields = record.fields if record is not None and record.fields else ()
            stype = bool(fields) and (fields[0].name or "").lower() == "stype"
            opaque = record is not None and getattr(record, "fields", None) is None or \
                isinstance(pointee, RecordRef) and record is None
            if opaque:  # a handle: in by its type; only [optional] says more
                if "optional" in t:
                    rows.append((p.name, "{nullable: true}", "".join(f"[{x}]" for x in t)))
                continue
            # a struct the function fills ([out], or Level Zero's [in,out] property structs) whose type tag the
            # enum names: returned, the wrapper setting the tag (fill:)
            tag = _type_tag(h, ptr.pointee, fields[0], typedefs) if stype and ("out" in t or "in,out" in t) \
                else None
            direction = "out" if tag is not None else "inout" if "in,out" in t or (stype and "out" in t) else \
                "out" if "out" in t else "in" if "in" in t else None
            void = isinstance(pointee, Builtin) and pointee.name == "void"
            if direction == "in" and const or direction in ("out", "inout") and (void or const):
                # what the binder infers; an untyped buffer is the caller's (it cannot be out); a comment that
                # says a pointer to const is written contradicts the type
                direction = None
            entry: list[str] = []
            if direction is not None:
                entry.append(f"direction: {direction}")
            rng = next((m.group(1) for x in t if (m := re.fullmatch(r"range\(0,(\w+)\)", x))), None)
            if rng is not None and rng in pnames and direction in ("in", None):
                entry.append(f"len: {rng}")
            if "optional" in t:
                entry.append("nullable: true")
            if tag is not None:
                entry.append(f"fill: {{{fields[0].name}: {tag}}}")
            if entry:
                why = "".join(f"[{x}]" for x in t) + (" (a struct whose stype the caller sets)"
                                                      if stype and direction == "inout" and "in,out" not in t else
                                                      " (the wrapper sets its type tag)" if tag is not None else "")
                rows.append((p.name, "{" + ", ".join(entry) + "}", why))
        if rows:
            out.append((name, tuple(rows)))
    return tuple(out)


def strided_arrays(h: Header, functions: dict[str, Function],
                   selected: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...], int] | None:
    """The pointer parameters of ``selected`` that come with an integer ``ld<name>`` or ``inc<name>`` parameter
    (cuBLAS's ``const float *A, int lda``, ``float *y, int incy``): a matrix or a vector addressed with a stride,
    which BLAS-like GPU libraries take in device memory.  Their type spellings and names (a rule's ``types`` and
    ``names``) and how many there are; None if there are none."""
    typedefs = {t.name: t.type for t in h.typedefs}
    types: dict[str, None] = {}
    names: dict[str, None] = {}
    count = 0
    for name in selected:
        params = functions[name].params
        ints = {p.name for p in params if p.name and isinstance(_resolve(p.type, typedefs), (Builtin, EnumRef))}
        for p in params:
            if not p.name or _pointer(p.type, typedefs) is None:
                continue
            if f"ld{p.name.lower()}" in ints or f"inc{p.name.lower()}" in ints:
                types.setdefault(spelling(declare(p.type)), None)
                names.setdefault(p.name, None)
                count += 1
    return (tuple(types), tuple(names), count) if count else None


def counted_arrays(h: Header, functions: dict[str, Function], selected: Sequence[str],
                   prefixes: Sequence[str]) -> tuple[tuple[str, str, tuple[str, ...], int], ...]:
    """Input arrays that follow their count: a pointer to const right after an integer parameter named ``num...``
    (OpenCL's ``cl_uint num_events_in_wait_list, const cl_event *event_wait_list``), found in two functions or
    more under the same names: a rule each, over the bound prefix where every function with such an array has its
    count before it, else over the functions named."""
    typedefs = {t.name: t.type for t in h.typedefs}
    found: dict[tuple[str, str], list[str]] = {}
    having: dict[str, set[str]] = {}  # a parameter name -> the functions that have one
    for name in selected:
        params = functions[name].params
        for p in params:
            if p.name:
                having.setdefault(p.name, set()).add(name)
        for cp, ap in zip(params, params[1:]):
            if not cp.name or not ap.name or not cp.name.lower().startswith("num"):
                continue
            if not isinstance(_resolve(cp.type, typedefs), (Builtin, EnumRef)):
                continue
            ptr = _pointer(ap.type, typedefs)
            if ptr is not None and (ptr.pointee.const or _resolve(ptr.pointee, typedefs).const):
                found.setdefault((ap.name, cp.name), []).append(name)
    out = []
    for (array, count_param), names in sorted(found.items()):
        if len(names) < 2:
            continue
        everywhere = having[array] == set(names) and all(
            any(fnmatch.fnmatchcase(n, p) for p in prefixes) for n in names)
        out.append((array, count_param, () if everywhere else tuple(names), len(names)))
    return tuple(out)


def _type_tag(h: Header, struct: CType, first: Field, typedefs: dict[str, CType]) -> str | None:
    """The constant of the type-tag enum (``first``, the struct's ``stype`` member) that names ``struct``, by the
    convention Level Zero and Vulkan share: ``ze_device_properties_t`` is ``ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES``,
    ``VkPhysicalDeviceProperties2`` ``VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2``; None unless exactly one
    constant matches (the draft then leaves the struct in-out, the caller setting the tag)."""
    name = struct.name if isinstance(struct, TypedefRef) else struct.tag if isinstance(struct, RecordRef) else ""
    name = name.lstrip("_")
    if "_" in name:  # snake_case: the vendor prefix and _t off
        key = name.split("_", 1)[1].removesuffix("_t").upper()
    else:  # CamelCase: the vendor prefix (its first word) off, words and numbers split by _
        words = re.findall(r"[A-Z][a-z]*|[0-9]+", name)[1:]
        key = "_".join(w.upper() for w in words)
    et = _resolve(first.type, typedefs)
    enum = et.enum if isinstance(et, InlineEnum) else next(
        (e for e in h.enums if isinstance(et, EnumRef) and e.tag == et.tag), None)
    if not key or enum is None:
        return None
    found = [c.name for c in enum.constants if c.name.endswith("_STRUCTURE_TYPE_" + key)]
    return found[0] if len(found) == 1 else None


# ------------------------------------------------------------------------------ reading the header


def _fail(message: str, where: str = "scaffold") -> UserError:
    return UserError([Diagnostic(location=Location(file=where, line=1, col=1), message=message)])


def split_name(name: str) -> tuple[str, str]:
    """``vendor.library`` -> (vendor, library); each a Python module name."""
    parts = name.split(".")
    bad = len(parts) != 2 or not all(IDENT.match(p) and not keyword.iskeyword(p) and not p.startswith("_")
                                     for p in parts)
    if bad:
        raise _fail(f"{name!r} is not VENDOR.LIBRARY (two Python module names, ex. opencl.cl)", "ironaccel-gen")
    if parts[1] in ("core", "backend"):  # generate reads <vendor>/core.yaml and backend.yaml as other specs
        raise _fail(f"library '{parts[1]}': its spec would be {parts[0]}/{parts[1]}.yaml, a name generate does not "
                    "read as a library spec; choose another name", "ironaccel-gen")
    return parts[0], parts[1]


def locate_header(header: Path, sdk_path: Path | None) -> tuple[Path, str]:
    """(include directory, header path relative to it): under ``sdk_path`` (a root or include directory) when
    given, else below the nearest ancestor called ``include`` (``/usr/include/CL/cl.h`` -> CL/cl.h), else the
    header's own directory."""
    if not header.is_file():
        raise _fail(f"{'no such file' if not header.exists() else 'not a regular file'}: {header}", str(header))
    absolute = Path(os.path.abspath(header))
    if sdk_path is not None:
        for inc in (sdk_path, sdk_path / "include"):
            try:
                return Path(os.path.abspath(inc)), absolute.relative_to(os.path.abspath(inc)).as_posix()
            except ValueError:
                continue
        raise _fail(f"--sdk: {header} is not under {sdk_path} (nor {sdk_path / 'include'})", "--sdk")
    for parent in absolute.parents:
        if parent.name == "include":
            return parent, absolute.relative_to(parent).as_posix()
    return absolute.parent, absolute.name


def _macro_candidates(include_dir: Path, d: Diagnostic) -> list[str]:
    """Macros an ``#error`` asks for: those its message names, then those of the ``#if``/``#elif`` conditions
    above it, nearest first.  ex) hip_runtime_api.h: __HIP_PLATFORM_AMD__, __HIP_PLATFORM_NVIDIA__"""
    names = re.findall(r"\b(_*[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+_*)\b", d.message)
    try:
        lines = (include_dir / d.location.file).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    for line in reversed(lines[:max(0, d.location.line - 1)]):
        if re.match(r"\s*#\s*(el)?if", line):
            names += re.findall(r"defined\s*\(?\s*([A-Za-z_]\w*)", line)
    return list(dict.fromkeys(names))


@dataclass(frozen=True, slots=True, kw_only=True)
class Parsed:
    """The header parsed, and what it took: the defines and undefines found to be needed."""

    header: Header
    defines: tuple[tuple[str, str], ...]
    undefines: tuple[str, ...]
    define_note: str = ""
    undefine_note: str = ""


def parse_header(include_dir: Path, rel: str, defines: tuple[tuple[str, str], ...],
                 undefines: tuple[str, ...], extra: tuple[Path, ...] = ()) -> Parsed:
    """Parse with clang; where it fails at an ``#error``, try each macro the error asks for (one at a time), and
    where it fails inside a compiler's SIMD intrinsics, drop the predefined SIMD macros."""
    where = Location(file=rel, line=1, col=1)
    define_note = undefine_note = ""
    tried: set[str] = set()
    for _ in range(8):
        request = ParseRequest(headers=(rel,), include_dirs=(include_dir, *extra), defines=defines,
                               undefines=undefines, where=where)
        try:
            return Parsed(header=parse(request), defines=defines, undefines=undefines, define_note=define_note,
                          undefine_note=undefine_note)
        except UserError as e:
            first = e.diagnostics[0]
            if any(Path(d.location.file).name.endswith("intrin.h") for d in e.diagnostics) \
                    and not set(SIMD_MACROS) <= set(undefines):
                undefines = tuple(dict.fromkeys(undefines + SIMD_MACROS))
                undefine_note = "review: predefined, they add SIMD types the IR (plain C) cannot model"
                continue
            if "#error" in _line(include_dir, first.location) and not any(n for n, _ in defines if n in tried):
                candidates = [c for c in _macro_candidates(include_dir, first) if c not in tried]
                if candidates:
                    tried.add(candidates[0])
                    defines = tuple(x for x in defines if x[0] not in tried) + ((candidates[0], "1"),)
                    define_note = f"review: detected: the header's #error ({first.location}) asks for it"
                    continue
            m = re.search(r"'([^']+)' file not found", first.message)
            if m is not None:  # a header of another directory (cuBLAS's include the CUDA runtime's)
                raise UserError([replace(first, message=f"{first.message}: give the directory that has it with "
                                         "--include-dir DIR (the draft writes it as the sdk: declaration's "
                                         "extra_includes:, as sdk:KIND where a declared SDK is found there)"),
                                 *e.diagnostics[1:]]) from None
            raise
    raise _fail(f"could not parse {rel} (tried defining {', '.join(sorted(tried))}); give --define NAME")


def _line(include_dir: Path, loc: Location) -> str:
    try:
        lines = (include_dir / loc.file).read_text(encoding="utf-8", errors="replace").splitlines()
        return lines[loc.line - 1] if 0 < loc.line <= len(lines) else ""
    except OSError:
        return ""


def public_names(h: Header) -> dict[str, Function]:
    """public name -> declaration (``#define cuMemAlloc cuMemAlloc_v2``: cuMemAlloc), as the binder names them."""
    by_target: dict[str, str] = {}
    for r in h.renames:
        by_target.setdefault(r.target, r.name)
    out: dict[str, Function] = {}
    for f in h.functions:
        out.setdefault(by_target.get(f.name, f.name), f)
    return out


def prefixes(names: Iterable[str]) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...]]:
    """(the prefixes to bind: the most common first word, all of them if tied; the others with their counts)."""
    counts = Counter(first_word(n) for n in names)
    if not counts:
        return (), ()
    top = max(counts.values())
    chosen = tuple(sorted(p for p, n in counts.items() if n == top))
    others = tuple(sorted(((p, n) for p, n in counts.items() if n != top), key=lambda x: (-x[1], x[0])))
    return chosen, others


def _resolve(t: CType, typedefs: dict[str, CType]) -> CType:
    seen = 0
    while isinstance(t, TypedefRef) and t.name in typedefs and seen < 64:
        t, seen = typedefs[t.name], seen + 1
    return t


def _result_name(t: CType) -> str | None:
    return t.name if isinstance(t, TypedefRef) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorsFound:
    """The status type and codes the header suggests."""

    type: str | None
    note: str
    success: tuple[str, ...] = ()
    macros: tuple[str, ...] = ()
    out_param: str | None = None
    codes: tuple[tuple[str, int], ...] = ()


def find_version(h: Header, marker: str, include_dir: Path | None = None) -> tuple[tuple[str, str], ...]:
    """How the SDK's version is read (``sdk.version``), from its macros: ``<P>_VERSION_MAJOR``/``_MINOR``
    (/``_PATCH``) or ``<P>_VER_MAJOR``/... (cuBLAS) joined; else the newest ``<P>_VERSION_<major>_<minor>``
    (OpenCL, Vulkan); else one ``<P>_VERSION`` integer (its encoding is left to review).  ``header:`` where they
    are not in the marker.  With ``include_dir``, only a way that :func:`sdk.header_version` (what ``generate``
    runs) reads a version with is returned (a macro defined as an expression of others is not one)."""
    from . import sdk as sdks
    from .spec import SdkVersion

    ints = {c.name: c for c in h.constants if isinstance(c.value, int) and not isinstance(c.value, bool)}

    def where(name: str) -> tuple[tuple[str, str], ...]:
        f = ints[name].location.file
        return () if f == marker else (("header", _scalar(f)),)

    def reads(way: tuple[tuple[str, str], ...], v: SdkVersion) -> bool:
        return include_dir is None or sdks.header_version(v, marker, include_dir) is not None

    for name in sorted(ints):
        for major in ("_VERSION_MAJOR", "_VER_MAJOR"):
            stem = name[:-len("MAJOR")]
            if name.endswith(major) and stem + "MINOR" in ints:
                parts = [name, stem + "MINOR"] + ([stem + "PATCH"] if stem + "PATCH" in ints else [])
                way = where(name) + (("macros", _flow(parts)),)
                if reads(way, SdkVersion(header=dict(way).get("header", "").strip('"') or None, macros=tuple(parts))):
                    return way
    pairs = sorted(n for n in ints if re.fullmatch(r"[A-Z][A-Z0-9]*_VERSION_\d+_\d+", n))
    if pairs:
        prefix = pairs[0].split("_VERSION_")[0]
        if all(n.startswith(prefix + "_VERSION_") for n in pairs):
            way = where(pairs[0]) + (("newest", _scalar(f"{prefix}_VERSION_*_*")),)
            if reads(way, SdkVersion(header=dict(way).get("header", "").strip('"') or None,
                                     newest=f"{prefix}_VERSION_*_*")):
                return way
    single = sorted(n for n in ints if re.fullmatch(r"[A-Z][A-Z0-9]*_VERSION", n))
    if len(single) == 1:
        way = where(single[0]) + (("macro", single[0]),)
        if reads(way, SdkVersion(header=dict(way).get("header", "").strip('"') or None, macro=single[0])):
            return way
    return ()


def version_note(h: Header) -> str:
    """The version the header states where no ``version:`` way reads it (an enum constant, as Level Zero's
    ``ZE_API_VERSION_CURRENT``): for the review comment, or ''."""
    for e in h.enums:
        for c in e.constants:
            if c.name.endswith("_VERSION_CURRENT") and isinstance(c.value, int) and c.value > 0xFFFF:
                return (f"review: the header's {c.name} is {c.value >> 16}.{c.value & 0xFFFF} (an enum constant: "
                        "no version: way reads it; generate reports the version as unknown)")
    return ""


def find_errors(h: Header, bound: Sequence[Function]) -> ErrorsFound:
    """The typedef most of ``bound`` return: an enum (its constants are the codes) or an integer whose codes are
    negative ``#define``s (the run of them after the success code, as OpenCL's CL_SUCCESS, CL_DEVICE_NOT_FOUND,
    ...); else None (``errors: none``)."""
    typedefs = {t.name: t.type for t in h.typedefs}
    counts = Counter(n for n in (_result_name(f.result) for f in bound) if n is not None)
    if not counts:
        return ErrorsFound(type=None, note="review: no function returns a typedef'd status")
    name, n = min(counts.items(), key=lambda x: (-x[1], x[0]))
    note = f"review: returned by {n} of the {len(bound)} functions"
    rt = _resolve(TypedefRef(name=name), typedefs)
    enum = rt.enum if isinstance(rt, InlineEnum) else next(
        (e for e in h.enums if e.tag == rt.tag), None) if isinstance(rt, EnumRef) else None
    if enum is not None:
        codes = tuple((c.name, c.value) for c in enum.constants)
        zero = [c for c, v in codes if v == 0]
        success = [c for c in zero if "SUCCESS" in words(c)] or zero[:1]
        return ErrorsFound(type=name, note=note, success=tuple(success[:1]), codes=codes)
    if not (isinstance(rt, Builtin) and rt.name not in ("void", "float", "double", "long double")):
        return ErrorsFound(type=None, note=f"review: the most common result, {name}, is neither an enum nor an "
                                           "integer: no status found")
    # negative #define codes: after a zero *SUCCESS* macro, the run of negative ones that follows it
    ints = [c for c in h.constants if isinstance(c.value, int) and not isinstance(c.value, bool)]
    best: tuple[int, str, list[tuple[str, int]]] | None = None
    for i, c in enumerate(ints):
        if c.value != 0 or "_SUCCESS_" not in words(c.name):
            continue
        run = []
        for d in ints[i + 1:]:
            if d.location.file != c.location.file or not isinstance(d.value, int) or d.value >= 0:
                break
            run.append((d.name, d.value))
        if run and (best is None or len(run) > best[0]):
            best = (len(run), c.name, run)
    if best is None:
        return ErrorsFound(type=None, note=f"review: functions return {name}, an integer, but no run of negative "
                                           "#define codes after a *SUCCESS macro was found")
    _, ok, run = best
    prefix = first_word(ok)
    pattern = prefix + ("_*" if ok.startswith(prefix + "_") else "*")
    members = {c for c, _ in run} | {ok}
    excluded = sorted(c.name for c in ints if fnmatch.fnmatchcase(c.name, pattern) and c.value < 0  # type: ignore[operator]
                      and c.name not in members)
    out_param = _out_param(h, bound, name)
    return ErrorsFound(type=name, note=note + "; its codes are negative #defines", success=(ok,),
                       macros=(pattern, *(f"!{x}" for x in excluded)), out_param=out_param,
                       codes=tuple(run))


def _out_param(h: Header, bound: Sequence[Function], status: str) -> str | None:
    """The parameter through which functions that return something else report their status: a ``status *``
    named like ``*err*``, the most common such name.  ex) OpenCL's errcode_ret"""
    names = Counter(p.name for f in bound if _result_name(f.result) != status for p in f.params
                    if p.name and "err" in p.name.lower() and isinstance(p.type, Pointer)
                    and _result_name(p.type.pointee) == status)
    return min(names.items(), key=lambda x: (-x[1], x[0]))[0] if names else None


# ------------------------------------------------------------------------------ the system


def _ldconfig() -> list[Path]:
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [Path(m) for m in re.findall(r"=>\s*(\S+)", out)]


def find_libraries(stems: Sequence[str], dirs: Sequence[Path], listed: Sequence[Path]) -> list[Path]:
    """Library files ``lib<stem>.so*`` (the first stem: also ``lib<stem>_<word>.so*``) for the first stem that has any, searched in ``dirs`` and the files
    ``listed`` (ldconfig -p).  The first stem (the function prefix) of 3 letters or more may also follow a vendor's
    own prefix and take a number (libamdhip64 for hip); the others (header, library and vendor names: 'api' is
    in libglapi) must match whole."""
    files: set[Path] = set(p for p in listed)
    for d in dirs:
        try:
            files |= {p for p in d.iterdir() if ".so" in p.name}
        except OSError:
            continue
    for i, stem in enumerate(stems):
        s = re.escape(stem)
        # the function prefix may also take a word after an underscore: Level Zero's ze* are libze_loader.so.1's
        # (its layers, libze_validation_layer & co., match too: the exports decide, see exporting)
        suffix = r"(_[A-Za-z0-9]+)*" if i == 0 else ""
        pat = re.compile(rf"lib{s}{suffix}\.so(\.\d+)*\Z" if i or len(stem) < 3 else
                         rf"lib[A-Za-z0-9]*?{s}\d*{suffix}\.so(\.\d+)*\Z", re.IGNORECASE)
        hits = sorted(p for p in files if pat.match(p.name))
        if hits:
            return hits
    return []


def elf_exports(path: Path) -> frozenset[str] | None:
    """The functions an ELF shared library defines in its dynamic symbol table (``.dynsym``: what ``dlsym`` finds),
    or None when ``path`` is not a readable ELF file (another platform's format, a linker script, a stub).  Only the
    headers and the two tables are read (libnvrtc is 140 MB)."""
    import struct

    try:
        with open(path, "rb") as f:
            def read(at: int, n: int) -> bytes:
                f.seek(at)
                got = f.read(n)
                if len(got) != n:
                    raise ValueError("truncated")
                return got

            ident = read(0, 64)
            if ident[:4] != b"\x7fELF" or ident[4] not in (1, 2) or ident[5] not in (1, 2):
                return None
            wide, end = ident[4] == 2, "<" if ident[5] == 1 else ">"
            shoff, = struct.unpack_from(end + ("Q" if wide else "I"), ident, 0x28 if wide else 0x20)
            shentsize, shnum = struct.unpack_from(end + "HH", ident, 0x3A if wide else 0x2E)
            if not shoff or shnum > 65280 or shentsize < (64 if wide else 40):
                return None
            table = read(shoff, shentsize * shnum)
            sections = []  # (type, offset, size, link, entry size)
            for i in range(shnum):
                fields = struct.unpack_from(end + ("IIQQQQIIQQ" if wide else "IIIIIIIIII"), table, i * shentsize)
                sections.append((fields[1], fields[4], fields[5], fields[6], fields[9]))
            out: set[str] = set()
            for kind, off, size, link, entsize in sections:
                if kind != 11 or entsize < (24 if wide else 16) or size > 1 << 28:  # SHT_DYNSYM
                    continue
                _, stroff, strsize, _, _ = sections[link]
                strtab, syms = read(stroff, min(strsize, 1 << 28)), read(off, size)
                for at in range(entsize, size - entsize + 1, entsize):  # (entry 0 is the null symbol)
                    if wide:
                        name, info, _, shndx = struct.unpack_from(end + "IBBH", syms, at)
                    else:
                        name, _, _, info, _, shndx = struct.unpack_from(end + "IIIBBH", syms, at)
                    # defined (not SHN_UNDEF), global or weak, a function or an indirect function
                    if shndx != 0 and info >> 4 in (1, 2) and info & 0xF in (2, 10):
                        out.add(strtab[name:strtab.index(b"\0", name)].decode("utf-8", "replace"))
            return frozenset(out)
    except (OSError, struct.error, IndexError, ValueError):
        return None


def exporting(functions: Iterable[str], files: Iterable[Path]) -> list[Path]:
    """The files of the library (a name before ``.so``) that exports the most of ``functions``, or [] when no
    readable file exports any.  ex) cuda_runtime_api.h's cuda* functions: libcudart.so.13, not libcuda.so.1"""
    wanted = frozenset(functions)
    by_base: dict[str, list[Path]] = {}
    for p in sorted(set(files)):
        by_base.setdefault(p.name.partition(".so")[0], []).append(p)
    best: tuple[int, str] | None = None
    for base, paths in sorted(by_base.items()):
        counts = [len(wanted & e) for e in map(elf_exports, paths) if e is not None]
        n = max(counts, default=0)
        if n and (best is None or n > best[0]):
            best = (n, base)
    return by_base[best[1]] if best is not None else []


def loader_names(found: Sequence[Path]) -> tuple[str, ...]:
    """The names a loader tries, per library: each major soname (newest first), then the unversioned name.
    ex) libOpenCL.so.1.0.0, libOpenCL.so.1, libOpenCL.so -> libOpenCL.so.1, libOpenCL.so"""
    by_base: dict[str, set[tuple[int, ...]]] = {}
    for p in found:
        base, _, ver = p.name.partition(".so")
        nums = tuple(int(x) for x in ver.split(".") if x)
        by_base.setdefault(base, set()).add(nums[:1])
    out: list[str] = []
    for base in sorted(by_base):
        majors = sorted((v for v in by_base[base] if v), reverse=True)
        out += [f"{base}.so.{v[0]}" for v in majors] + ([f"{base}.so"] if () in by_base[base] else [])
    return tuple(dict.fromkeys(out))


def _site_packages(path: Path) -> Path | None:
    for parent in path.parents:
        if parent.name in ("site-packages", "dist-packages"):
            return parent
    return None


def _wheel_dist(site: Path, rel: str) -> str | None:
    """The pip distribution that installed ``site/rel``."""
    for dist in sorted(importlib.metadata.distributions(path=[str(site)]), key=lambda d: str(d.metadata["Name"])):
        if any(str(f) == rel for f in dist.files or ()):
            return str(dist.metadata["Name"]) or None
    return None


# ------------------------------------------------------------------------------ the scaffold


@dataclass
class Options:
    """The command's arguments."""

    name: str
    header: Path
    sdk: tuple[str, Path] | None = None  # (kind, root or include directory)
    defines: tuple[tuple[str, str], ...] = ()
    undefines: tuple[str, ...] = ()
    backend: str | None = None
    lib_dirs: tuple[Path, ...] = ()
    system_libs: bool = True  # also search the usual library directories and ldconfig -p
    specs: Path = DEFAULT_SPECS
    include_dirs: tuple[Path, ...] = ()  # further include directories the header needs (--include-dir)
    replacing: Path | None = None  # the spec the draft overwrites (--force): not one of the existing specs
    notes: list[str] = field(default_factory=list)  # warnings for stderr


def _core(specs: Path) -> CoreSpec:
    path = specs / "core.yaml" if (specs / "core.yaml").is_file() else DEFAULT_SPECS / "core.yaml"
    return load_core(path)


def _existing(specs: Path, replacing: Path | None = None) -> list[LibrarySpec]:
    """The library specs of ``specs`` that load, but ``replacing``; each named as ``<specs dir's name>/...``
    (specs/cuda/nvrtc.yaml: a draft's comment never names the maintainer's absolute path)."""
    from .pipeline import spec_paths

    out = []
    for p in spec_paths(specs) if specs.is_dir() else []:
        if _same_file(p, replacing):
            continue
        try:
            out.append(load_library(p, (Path(Path(os.path.abspath(specs)).name) / p.relative_to(specs)).as_posix()))
        except UserError:
            continue
    return out


# how a new backend kind is added, for the errors that list the kinds
ADD_KIND = ("a new kind is added first: append it to backend_kinds: in specs/core.yaml (NAME: {dlpack_device: N, "
            "doc: ...}), then run generate; docs/maintainer/adding-a-backend.md lists every step")


def _same_file(a: Path, b: Path | None) -> bool:
    try:
        return b is not None and os.path.samefile(a, b)
    except OSError:
        return False


def _backend(vendor: str, prefix: str, core: CoreSpec, specs: Sequence[LibrarySpec], given: str | None) -> tuple[str, str]:
    kinds = core.backend_kinds
    if given is not None:
        if kinds and given not in kinds:
            raise _fail(f"--backend {given}: not a backend kind of {_shown(Path(core.path))} (one of "
                        f"{', '.join(kinds)}); {ADD_KIND}", "--backend")
        return given, ""
    same = sorted({s.backend.value for s in specs if s.vendor.value == vendor})
    if len(same) == 1:
        return same[0], f"as the other {vendor} specs"
    docs = _backend_docs(core)
    for key in (vendor, prefix):
        hits = [k for k in kinds if key and (key.upper() == k or re.search(rf"\b{re.escape(key)}\b", docs.get(k, ""),
                                                                           re.IGNORECASE))]
        if len(hits) == 1:
            return hits[0], f"review: guessed from '{key}'"
    raise _fail(f"cannot tell the backend of vendor '{vendor}': give --backend (one of {', '.join(kinds)}); "
                f"{ADD_KIND}", "--backend")


def _backend_docs(core: CoreSpec) -> dict[str, str]:
    import yaml

    try:
        data = yaml.safe_load(Path(core.path).read_text(encoding="utf-8"))
        return {k: str(v.get("doc", "")) for k, v in (data.get("backend_kinds") or {}).items() if isinstance(v, dict)}
    except (OSError, yaml.YAMLError, AttributeError):
        return {}


def _personal(path: Path) -> bool:
    """``path`` is the maintainer's own (under $HOME, the working directory, or this interpreter's prefix: a
    virtual environment), not a place another machine has."""
    p = Path(os.path.abspath(path))
    for base in (os.environ.get("HOME"), os.getcwd(), sys.prefix):
        if base and os.path.abspath(base) != "/" and p.is_relative_to(os.path.abspath(base)):
            return True
    return False


def _shown(path: Path) -> str:
    """``path`` as the draft may print it: never the maintainer's absolute path (a draft is committed): under a
    site-packages ``site-packages/...``, under $HOME ``~/...``, under the working directory relative to it; a
    system directory (/usr/lib/...) as it is."""
    p = Path(os.path.abspath(path))
    site = _site_packages(p / "x")
    if site is not None:
        return (Path("site-packages") / p.relative_to(site)).as_posix()
    home = os.environ.get("HOME")
    if home and os.path.abspath(home) != "/" and p.is_relative_to(os.path.abspath(home)):
        return (Path("~") / p.relative_to(os.path.abspath(home))).as_posix()
    if p.is_relative_to(os.getcwd()) and os.getcwd() != "/":
        return p.relative_to(os.getcwd()).as_posix() or "."
    if _personal(p):
        return p.name
    return p.as_posix()


def _apt_package(path: Path) -> str | None:
    """The Debian package that installed ``path`` (``dpkg -S``), or None."""
    try:
        out = subprocess.run(["dpkg", "-S", str(path)], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.match(r"([a-z0-9][a-z0-9+.\-]*)(:[a-z0-9]+)?: ", out.stdout) if out.returncode == 0 else None
    return m.group(1) if m else None


def _sdk_block(d: Draft, include_dir: Path, kind: str, existing: Sequence[LibrarySpec]) -> Draft:
    """Where ``generate`` will find the header: a root (``<root>/include``), an include directory, or a wheel."""
    from . import sdk as sdks

    declared = {s.sdk_spec.kind.value: s.sdk_spec for s in existing if s.sdk_spec is not None}
    if kind in declared:
        found = sdks.find(kind, None, d.header, declared)
        if found is not None and (found.include_dir / d.header).is_file() \
                and os.path.samefile(found.include_dir / d.header, include_dir / d.header):
            return replace(d, sdk_ref=True, sdk_note=f"declared by {declared[kind].path}")
        raise _fail(f"sdk kind '{kind}' is already declared by {declared[kind].path} for other headers; choose "
                    "another kind with --sdk KIND=PATH", "--sdk")
    env = (f"{kind.upper()}_HOME", f"{kind.upper()}_PATH")
    site = _site_packages(include_dir)
    if site is not None:
        inc = include_dir.relative_to(site).as_posix()
        dist = _wheel_dist(site, f"{inc}/{d.header}")
        if dist is not None and _REL_DIR.match(inc):
            return replace(d, sdk_wheels=((inc, dist),), sdk_note=f"pip {dist}", sdk_install=(("pip", dist),))
    root = include_dir.parent
    if _personal(include_dir):  # the maintainer's own directory is no place for the spec to name
        return replace(d, sdk_env=env, sdk_note=f"TODO: the headers are in {_shown(include_dir)}, a directory of "
                                                f"this machine's user: set ${env[0]} to its root, or give it with "
                                                f"`generate --sdk {kind}=PATH`")
    if include_dir.name == "include" and root.as_posix() in ("/usr", "/usr/local"):
        package = _apt_package(include_dir / d.header)
        return replace(d, sdk_env=env, sdk_include_dirs=("/usr/include", "/usr/local/include"),
                       sdk_install=(("apt", package),) if package else ())
    if include_dir.name == "include" and _ABS_DIR.match(root.as_posix()):
        roots = [root.as_posix()]
        m = re.fullmatch(r"(.*?)-\d+(\.\d+)*", root.name)
        if m:  # a versioned install: every version, newest first
            roots = [(root.parent / (m.group(1) + "-*")).as_posix()]
            if (root.parent / m.group(1)).is_dir():
                roots.insert(0, (root.parent / m.group(1)).as_posix())
        return replace(d, sdk_env=env, sdk_roots=tuple(roots))
    if _ABS_DIR.match(include_dir.as_posix()):
        return replace(d, sdk_env=env, sdk_include_dirs=(include_dir.as_posix(),))
    return replace(d, sdk_env=env, sdk_note=f"TODO: {_shown(include_dir)} cannot be written here: give it with "
                                            f"`generate --sdk {kind}=PATH`")


def _extra_includes(d: Draft, include_dir: Path, dirs: Sequence[Path], existing: Sequence[LibrarySpec]) -> Draft:
    """``extra_includes:`` for the --include-dir directories: ``sdk:KIND`` where a declared SDK is found there (the
    CUDA toolkit's include directory: sdk:cuda), a directory under the SDK's include directory relative to it, a
    system one as it is; the maintainer's own (under $HOME, the checkout, the venv) is a TODO."""
    from . import sdk as sdks

    if d.sdk_ref:
        return replace(d, sdk_note=d.sdk_note + "; review: the headers need --include-dir directories: the "
                       "declaration's extra_includes: must name them")
    declared = {s.sdk_spec.kind.value: s.sdk_spec for s in existing if s.sdk_spec is not None}
    out: list[str] = []
    todo: list[str] = []
    for given in dirs:
        p = Path(os.path.abspath(given))
        kinds = [k for k in sorted(declared) if (f := sdks.find(k, None, descs=declared)) is not None
                 and _same_file(f.include_dir, p)]
        if kinds:
            out.append(f"sdk:{kinds[0]}")
        elif p.is_relative_to(include_dir):
            out.append(p.relative_to(include_dir).as_posix())
        elif not _personal(p) and _ABS_DIR.match(p.as_posix()):
            out.append(p.as_posix())
        else:
            todo.append(_shown(p))
    note = "review" + (f"; TODO: {', '.join(todo)}: a directory of this machine's user, not written: name the SDK "
                       "that provides it (sdk:KIND, declared by its spec)" if todo else "")
    return replace(d, sdk_extra_includes=tuple(dict.fromkeys(out)), sdk_extra_note=note)


def _loader(d: Draft, o: Options, include_dir: Path, stems: Sequence[str], functions: Iterable[str],
            existing: Sequence[LibrarySpec]) -> Draft:
    site = _site_packages(include_dir)
    wheel_lib = include_dir.parent / "lib" if site is not None else None
    root = include_dir.parent if include_dir.name == "include" else None
    sdk_lib_dirs = [root / x for x in ("lib64", "lib")] if root is not None and site is None else []
    local = list(o.lib_dirs) + ([wheel_lib] if wheel_lib else []) + sdk_lib_dirs
    dirs = local + ([Path(x) for x in LIB_DIRS] if o.system_libs else [])
    found = find_libraries(stems, dirs, _ldconfig() if o.system_libs else [])
    # the names guess; the exports decide: a library of the SDK (or a name match) that defines the functions wins
    # over a name match that does not (cuda_runtime_api.h: libcudart.so.13, never the driver's libcuda.so.1)
    nearby = [p for d_ in local if d_.is_dir() for p in sorted(d_.iterdir()) if ".so" in p.name and p.is_file()]
    exporters = exporting(functions, [*found, *nearby])
    if exporters:
        found = exporters
    names = loader_names(found)
    if not names:
        guess = f"lib{stems[0]}.so" if stems else "lib.so"
        return replace(d, loader=(guess,), loader_note=f"TODO: no lib{'|'.join(stems)}*.so found on this system, "
                                                       "nor a library exporting the functions beside the header: "
                                                       "name the library file (or give --lib-dir DIR)")
    where = sorted({_shown(p.parent) for p in found})
    d = replace(d, loader=names, loader_note=f"review: found in {', '.join(where)}"
                                             f"{', exports the functions' if exporters else ''}")
    if wheel_lib is not None and site is not None and any(p.parent == wheel_lib for p in found):
        d = replace(d, loader_wheel_dirs=(wheel_lib.relative_to(site).as_posix(),))
    elif root is not None and any(p.parent in sdk_lib_dirs for p in found):
        env, roots = d.sdk_env, d.sdk_roots
        if d.sdk_ref:  # `sdk: <kind>` another spec declares: its roots (cuda.runtime: the toolkit's, /usr/local/cuda)
            ref = next((s.sdk_spec for s in existing if s.sdk_spec is not None
                        and s.sdk_spec.kind.value == d.sdk_kind), None)
            env, roots = (ref.env, ref.roots) if ref is not None else ((), ())
        if env or roots:
            d = replace(d, loader_sdk_dirs=tuple(sorted({p.parent.name for p in found if p.parent in sdk_lib_dirs})),
                        loader_sdk_env=tuple(env), loader_sdk_roots=tuple(roots))
    return d


def _culprits(diags: Sequence[Diagnostic], functions: dict[str, Function], selected: set[str]) -> dict[str, str]:
    """The functions the binder's diagnostics are about: located at the declaration, or named in the message."""
    at = {(f.location.file, f.location.line, f.location.col): n for n, f in functions.items() if n in selected}
    out: dict[str, str] = {}
    for dg in diags:
        name = at.get((dg.location.file, dg.location.line, dg.location.col))
        if name is None:
            named = [n for n in re.findall(r"'(\w+)'", dg.message) if n in selected]
            name = named[0] if named else None
        if name is None:
            return {}
        out.setdefault(name, dg.message)
    return out


def _bind(text: str, display: str, core: CoreSpec, header: Header) -> BoundLibrary:
    return bind(load_library(Path(display), display, text), core, header)


def scaffold(o: Options) -> str:
    """The spec's text for ``o``; raise :class:`UserError` on bad input or a draft that does not bind."""
    vendor, library = split_name(o.name)
    if o.sdk is not None and not o.sdk[1].is_dir():
        raise _fail(f"--sdk {o.sdk[0]}={o.sdk[1]}: not a directory", "--sdk")
    include_dir, rel = locate_header(o.header, o.sdk[1] if o.sdk else None)
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_./\-]*\.h", rel):
        raise _fail(f"header path '{rel}' is not one a spec can name (letters, digits, _ . / -, ending in .h)",
                    str(o.header))
    for extra in o.include_dirs:
        if not extra.is_dir():
            raise _fail(f"--include-dir {extra}: not a directory", "--include-dir")
    parsed = parse_header(include_dir, rel, o.defines, o.undefines, tuple(Path(os.path.abspath(x))
                                                                       for x in o.include_dirs))
    h = parsed.header
    publics = public_names(h)
    chosen, others = prefixes(publics)
    if not chosen:
        raise _fail(f"{rel} declares no function to bind", str(o.header))
    include = tuple(p + "*" for p in chosen)
    selected = sorted(n for n in publics if any(fnmatch.fnmatchcase(n, p) for p in include))
    core = _core(o.specs)
    # the spec being overwritten is not another spec: its sdk: declaration is the draft's own (else the draft named
    # its own kind, `sdk: <kind>`, and dropped the block: generate then found no declaration)
    existing = _existing(o.specs, o.replacing)
    backend, backend_note = _backend(vendor, chosen[0].strip("_"), core, existing, o.backend)
    kind = o.sdk[0] if o.sdk else vendor
    if not IDENT.match(kind):
        raise _fail(f"--sdk {kind}: the kind must be an identifier", "--sdk")
    errs = find_errors(h, [publics[n] for n in selected])
    codes = tuple(CodeRow(name=c, value=v, **({"kind": k[0], "rule": k[1]} if (k := suggest_kind(c)) else
                                              {"kind": None}))
                  for c, v in errs.codes if c not in errs.success)
    d = Draft(vendor=vendor, library=library, backend=backend, backend_note=backend_note, source=str(o.header),
              header=rel, sdk_kind=kind, defines=parsed.defines, define_note=parsed.define_note,
              undefines=parsed.undefines, undefine_note=parsed.undefine_note, include=include,
              include_note=f"review: the prefix of {len(selected)} of the {len(publics)} functions", others=others,
              error_type=errs.type, error_note=errs.note, success=errs.success, macros=errs.macros,
              out_param=errs.out_param, codes=codes)
    last: UserError | None = None
    same = sorted(s.sdk_spec.kind.value for s in existing if s.sdk_spec is not None and s.sdk_spec.marker == rel)
    for sk in [kind] if o.sdk else list(dict.fromkeys([*same, vendor, library])):
        try:  # a kind declared for this header; the vendor's name; else (declared for other headers) the library's
            d = _sdk_block(replace(d, sdk_kind=sk), include_dir, sk, existing)
            break
        except UserError as e:
            last = e
    else:
        assert last is not None
        raise last
    if o.include_dirs:
        d = _extra_includes(d, include_dir, o.include_dirs, existing)
    if not d.sdk_ref:
        d = replace(d, sdk_version=find_version(h, rel, include_dir),
                    sdk_version_note="" if find_version(h, rel, include_dir) else version_note(h))
    stems = list(dict.fromkeys(s for s in (chosen[0].strip("_").lower(), Path(rel).stem.lower(),
                                           Path(rel).stem.split("_")[0].lower(), library.lower(), vendor.lower())
                               if s))
    d = _loader(d, o, include_dir, stems, {publics[n].name for n in selected} | set(selected),
                existing)
    d = replace(d, params=stated_params(h, include_dir, publics, selected),
                device_rule=strided_arrays(h, publics, selected),
                array_rules=counted_arrays(h, publics, selected, d.include))
    # bind the draft as generate will; exclude what the binder refuses, with its reason
    display = f"{vendor}/{library}.yaml"
    lib = None
    for _ in range(8):
        try:
            lib = _bind(render(d), display, core, h)
            break
        except UserError as e:
            ruled = [x.message for x in e.diagnostics if x.message.startswith(("rule", "len:"))]
            if (d.device_rule is not None or d.array_rules) and ruled:
                # (a function the binder refuses took part of a rule's match with it): no rule drafted
                o.notes.append(f"the drafted rules were left out (the binder refused them): {ruled[0][:200]}")
                d = replace(d, device_rule=None, array_rules=())
                continue
            bad = _culprits(e.diagnostics, publics, set(selected) - {p for p, _ in d.exclude})
            stated = {fn for fn, _ in d.params}
            if d.params and (not bad or set(bad) & stated):
                # what a comment said that the binder refuses (a count it cannot pair): the type's inference
                # stays, the function is kept
                drop = set(bad) & stated or stated
                o.notes.append(f"the header's comments on {', '.join(sorted(drop))} were not taken (the binder "
                               f"refused them): {next(iter(bad.values()), e.diagnostics[0].message)[:200]}")
                d = replace(d, params=tuple((fn, ps) for fn, ps in d.params if fn not in drop))
                continue
            if not bad:
                raise UserError([Diagnostic(location=Location(file="scaffold", line=1, col=1),
                                            message="the draft spec does not bind (a scaffold bug, or a header it "
                                                    "cannot read); the binder said:"), *e.diagnostics]) from None
            d = replace(d, exclude=tuple(sorted(d.exclude + tuple((n, "review: " + why[:100])
                                                                  for n, why in bad.items()))))
    if lib is None:
        raise _fail("the draft spec still does not bind after excluding the functions the binder refused")
    bound = {f.public: f for f in lib.functions}
    d = replace(d, name_function=_name_function(lib, d.error_type), inferred=len(inferred_params(lib)),
                params=tuple((fn, ps) for fn, ps in d.params if fn in bound))
    text = render(d)
    _bind(text, display, core, h)  # (the final text, as generate reads it)
    skipped = sorted(set(selected) - set(bound) - {p for p, _ in d.exclude})
    if skipped:
        o.notes.append(f"not bound by the binder (variadic): {', '.join(skipped)}")
    if d.sdk_note.startswith("TODO"):
        o.notes.append(d.sdk_note)
    return text


def _name_function(lib: BoundLibrary, status: str | None) -> str | None:
    """A bound function that turns a code into its name: one parameter of the status type in, a string out (the
    result, or a ``const char **``).  Names with *Name* come before *String*."""
    if status is None:
        return None
    fits = []
    for f in lib.functions:
        ins = [p for p in f.params if p.role == "in"]
        outs = [p for p in f.params if p.role not in ("in",)]
        returns_str = f.result_kind == "str" and not outs
        out_str = len(outs) == 1 and outs[0].role == "out_str" and f.returns_status
        if len(ins) == 1 and isinstance(ins[0].type, TypedefRef) and ins[0].type.name == status \
                and (returns_str or out_str):
            fits.append(f.public)
    fits.sort(key=lambda n: ("Name" not in n, "String" not in n, n))
    return fits[0] if fits else None


# ------------------------------------------------------------------------------ --missing


@dataclass(frozen=True, slots=True, kw_only=True)
class Inferred:
    """A pointer parameter whose direction the spec does not state.  ex) cuMemAlloc(dptr: CUdeviceptr *) -> out"""

    function: str
    param: str
    decl: str  # ex) CUdeviceptr *dptr
    role: str  # ex) out
    location: Location


def inferred_params(lib: BoundLibrary) -> list[Inferred]:
    """The pointer parameters whose direction is the binder's guess: no ``direction:``, ``len:`` or ``string:`` in
    the spec, and a pointer the function could write (not to const, not a handle to an opaque struct, not a
    function pointer).  ex) cuMemAlloc's ``CUdeviceptr *dptr`` (inferred out), OpenCL's ``void *param_value``
    (inferred in)."""
    fspecs = apply_rules(lib.spec.rules, {f.public: f.c for f in lib.functions},  # (rules: the spec's word too)
                         {f.name.value: f for f in lib.spec.functions}, Collector(), lib.header.name)
    stated = {(f.name.value, p.name.value) for f in fspecs.values() for p in f.params
              if p.direction is not None or p.len is not None or p.terminated or p.string is not None or p.device}
    typedefs = {t.name: t for t in lib.header.typedefs}
    records = {(r.kind, r.tag): r for r in lib.header.records if r.tag}
    out = []
    for f in lib.functions:
        for p in f.params:
            if p.role in ("len", "capacity", "errcode") or (f.public, p.c_name) in stated:
                continue
            t = resolve(p.type, typedefs)
            if not isinstance(t, Pointer):
                continue
            pointee = resolve(t.pointee, typedefs)
            opaque = isinstance(pointee, RecordRef) and getattr(records.get((pointee.kind, pointee.tag)), "fields",
                                                                None) is None
            if t.pointee.const or pointee.const or opaque or isinstance(pointee, FunctionProto):
                continue
            out.append(Inferred(function=f.public, param=p.c_name, decl=p.decl, role=p.role, location=f.c.location))
    return out


def missing(name: str, specs: Path, overrides: dict[str, str]) -> str:
    """The report of ``--missing``: declared functions neither bound nor excluded, and the pointer parameters
    whose direction is inferred."""
    from . import sdk as sdks
    from .pipeline import parse_declared
    from .spec import sdk_declarations

    vendor, library = split_name(name)
    path = specs / vendor / f"{library}.yaml"
    if not path.is_file():
        raise _fail(f"no spec {path} to report on (scaffold one first)", "--missing")
    spec = load_library(path, path.as_posix())
    if spec.objc is not None:
        raise _fail(f"{name}: an Objective-C library (its classes are listed, not bound by prefix)", "--missing")
    core = _core(specs)
    if spec.declarations is not None:
        header = parse_declared(spec, spec.frontend if spec.frontend in ("clang", "pycparser") else "clang")
    else:
        descs, _ = sdk_declarations(_existing(specs))
        found = sdks.find(spec.sdk.value, overrides.get(spec.sdk.value), spec.headers[0].value, descs)
        if found is None:
            raise _fail(f"{name}: no {spec.sdk} SDK headers found ({spec.headers[0]}); give --sdk "
                        f"{spec.sdk}=PATH", "--missing")
        header = parse(ParseRequest(headers=tuple(h.value for h in spec.headers + spec.version_headers),
                                    include_dirs=sdks.include_path(descs.get(spec.sdk.value), found, overrides,
                                                                   descs)[0], defines=spec.defines,
                                    undefines=spec.undefines, where=spec.location))
    lib = bind(spec, core, header)
    versions = {h.value for h in spec.version_headers}
    publics = {n: f for n, f in public_names(header).items() if f.location.file not in versions}
    excluded = {n for n in publics if any(fnmatch.fnmatchcase(n, p.value) for p in spec.exclude)}
    skipped = {f.name.value for f in spec.functions if f.skip}
    bound = {f.public for f in lib.functions}
    unbound = sorted(n for n in publics if n not in bound and n not in excluded and n not in skipped)
    lines = [f"{name} ({path.as_posix()}, {header.name}):"]
    lines.append(f"{len(unbound)} declared function(s) neither bound nor excluded (bind.include / bind.exclude):")
    for n in unbound:
        why = " (variadic: not bindable)" if publics[n].variadic else ""
        lines.append(f"  {n}  {publics[n].location}{why}")
    inf = inferred_params(lib)
    lines.append(f"{len(inf)} pointer parameter(s) whose direction is inferred, not stated (functions: <name>: "
                 "params:):")
    for i in inf:
        lines.append(f"  {i.function}({i.decl}) -> {i.role}  {i.location}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ the command


def run(args: argparse.Namespace) -> int:
    sdk_pairs = []
    for item in args.sdk:
        kind, sep, path = item.partition("=")
        if not sep or not kind or not path:
            print(f"ironaccel-gen: --sdk expects KIND=PATH, got {item!r}", file=sys.stderr)
            return EXIT_USER_ERROR
        sdk_pairs.append((kind, path))
    if args.missing:
        sys.stdout.write(missing(args.library, args.specs, dict(sdk_pairs)))
        return 0
    if args.header is None:
        print("ironaccel-gen: scaffold needs --header PATH (or --missing for an existing spec)", file=sys.stderr)
        return EXIT_USER_ERROR
    if len(sdk_pairs) > 1:
        print("ironaccel-gen: scaffold takes one --sdk KIND=PATH", file=sys.stderr)
        return EXIT_USER_ERROR
    defines = []
    for item in args.define:
        name, _, value = item.partition("=")
        if not IDENT.match(name) or not re.fullmatch(r"[A-Za-z0-9_]*", value):
            print(f"ironaccel-gen: --define expects NAME or NAME=VALUE (a number or identifier), got {item!r}",
                  file=sys.stderr)
            return EXIT_USER_ERROR
        defines.append((name, value or "1"))
    for name in args.undefine:
        if not IDENT.match(name):
            print(f"ironaccel-gen: --undefine expects a macro name, got {name!r}", file=sys.stderr)
            return EXIT_USER_ERROR
    vendor, library = split_name(args.library)
    out = args.out or str(args.specs / vendor / f"{library}.yaml")
    if out != "-" and os.path.lexists(out) and not args.force:
        print(f"ironaccel-gen: {out} exists; give --force to overwrite it (or --missing to report on it)",
              file=sys.stderr)
        return EXIT_USER_ERROR
    o = Options(name=args.library, header=args.header,
                sdk=(sdk_pairs[0][0], Path(sdk_pairs[0][1])) if sdk_pairs else None, defines=tuple(defines),
                undefines=tuple(args.undefine), backend=args.backend, lib_dirs=tuple(args.lib_dir),
                specs=args.specs, include_dirs=tuple(args.include_dir), replacing=Path(out) if out != "-" and os.path.isfile(out) else None)
    text = scaffold(o)
    for note in o.notes:
        print(f"scaffold: {note}", file=sys.stderr)
    if out == "-":
        sys.stdout.write(text)
        return 0
    try:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"ironaccel-gen: cannot write {out}: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    print(f"scaffold: wrote {out}; review the lines marked 'review' and TODO, then `ironaccel-gen generate`")
    return 0


__all__ = ["scaffold", "missing", "render", "suggest_kind", "first_word", "words", "Draft", "CodeRow", "Options",
           "run", "find_errors", "inferred_params", "loader_names", "find_libraries", "prefixes", "elf_exports",
           "exporting"]
