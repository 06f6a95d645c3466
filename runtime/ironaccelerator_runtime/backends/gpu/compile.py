"""Code images and runtime compilation: what ``load_module`` was given (:func:`classify_image`), and the vendor's
runtime compiler (NVRTC, hipRTC: :func:`compile_program`)."""

from __future__ import annotations

import re
from typing import Any, Sequence

from ironaccelerator._core import ErrorKind
from ironaccelerator_runtime.backends.gpu.api import GpuApi
from ironaccelerator_runtime.backends.gpu.args import _c_string
from ironaccelerator_runtime.backends.gpu.tables import GpuTables
from ironaccelerator_runtime.errors import Error, fail


_PTX = re.compile(rb"^\s*\.(version\s+\d|target\s|(visible\s+|weak\s+)?entry\s)", re.M)
_FATBIN_MAGIC = b"\x50\xed\x55\xba"  # 0xBA55ED50, little-endian
_BUNDLE_MAGICS = (b"__CLANG_OFFLOAD_BUNDLE__", b"CCOB")
# What this runtime can load (classify_image's answers): a GPU backend spec's module_formats are chosen from these
# (the generator reads this literal), and its generated MODULE_FORMATS are what that vendor's Device.load_module takes.
MODULE_FORMATS: tuple[str, ...] = ("ptx", "elf", "fatbin", "offload_bundle", "source")


def classify_image(data: str | bytes, backend: str = "") -> str:
    """What ``load_module`` was given: ``ptx``, ``elf``, ``fatbin``, ``offload_bundle`` or ``source``
    (``backend``: the backend named in the error for an empty image)."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    if not raw.strip(b"\0 \t\r\n"):
        raise fail(ErrorKind.INVALID_VALUE, "Device.load_module",
                   "Device.load_module needs source or a binary, got nothing",
                   backend)
    if raw.startswith(b"\x7fELF"):
        return "elf"
    if raw.startswith(_FATBIN_MAGIC):
        return "fatbin"
    if raw.startswith(_BUNDLE_MAGICS):
        return "offload_bundle"
    return "ptx" if _PTX.search(raw) else "source"


def _image_bytes(v: Any, backend: str, function: str = "Device.load_module") -> bytes:
    """What ``load_module`` was given, as bytes: ``str`` (UTF-8) or a bytes-like object; ``TypeError`` otherwise
    (an int is not an image: ``bytes(n)`` would make n zero bytes)."""
    if isinstance(v, str):
        try:
            return v.encode()
        except UnicodeEncodeError as e:
            raise fail(ErrorKind.INVALID_VALUE, function, f"the source is not valid UTF-8 text ({e})",
                       backend) from None
    if isinstance(v, (bytes, bytearray, memoryview)):
        if type(v) is memoryview and "O" in v.format:
            raise TypeError(f"{function}: a buffer of Python objects is not a code image")
        return bytes(v)
    raise TypeError(f"{function}: source_or_binary must be str or bytes, not {type(v).__name__}")


def compiler_version(api: GpuApi) -> tuple[int, int]:
    """The runtime compiler's (major, minor) version (the vendor's ``compiler_version``)."""
    if api.program_create is None:
        raise _no_compiler(api.tables, "compiler_version")
    api.require("compiler_version")
    major, minor = api.compiler_ffi.new("int *"), api.compiler_ffi.new("int *")
    api.check(api.compiler_version(major, minor), "compiler_version")
    return int(major[0]), int(minor[0])


def _no_compiler(tables: GpuTables, function: str) -> Error:
    return fail(ErrorKind.UNSUPPORTED, function,
                f"{tables.name} has no runtime compiler bound: compile offline and pass "
                f"load_module a code object ({', '.join(tables.module_formats)})", tables)


def _program_text(api: GpuApi, prog: Any, size_role: str, text_role: str) -> bytes:
    ffi = api.compiler_ffi
    n = ffi.new("size_t *")
    api.check(getattr(api, size_role)(prog, n), size_role)
    buf = ffi.new("char[]", max(int(n[0]), 1))
    api.check(getattr(api, text_role)(prog, buf), text_role)
    return bytes(ffi.buffer(buf, int(n[0])))


def compile_source(api: GpuApi, source: str | bytes, arch: str, options: Sequence[str] = (), *,
                   binary: bool = False, name: str = "ironaccelerator.cu") -> bytes:
    """Compile device source with the vendor's runtime compiler (``program_create`` & co.) for ``arch``
    (``--gpu-architecture=<arch>``, ex. ``compute_90``): the code text (PTX), or with ``binary`` (and a real
    architecture, ex. ``sm_90``) the ``program_binary`` image.  A compile error (or an option the compiler
    refuses) raises ``COMPILE_FAILED`` carrying the build log; a vendor without a compiler bound raises
    ``UNSUPPORTED``.  Needs the compiler library only (no driver, no device)."""
    return compile_program(api, source, arch, options, binary=binary, name=name)[0]


def compile_program(api: GpuApi, source: str | bytes, arch: str, options: Sequence[str] = (), *,
                    binary: bool = False, name: str = "ironaccelerator.cu",
                    name_expressions: Sequence[str] = (), build_log: list[str] | None = None) -> tuple[bytes, dict[str, str]]:
    """:func:`compile_source`, plus each of ``name_expressions`` (ex. ``"axpy<float>"``) added before compiling
    (``program_add_name``) and looked up after (``program_lowered_name``): ``(image, {expression: lowered
    name})``.  ``build_log``: a list the compiler's log of a compile that succeeded is appended to (its warnings)."""
    backend = api.name
    if api.program_create is None:
        raise _no_compiler(api.tables, "compile_source")
    src = _image_bytes(source, backend, "compile_source")
    if b"\0" in src.rstrip(b"\0"):
        raise fail(ErrorKind.INVALID_VALUE, "compile_source", "the source contains a NUL byte", backend)
    if isinstance(options, (str, bytes)):
        raise TypeError("compile_source: options must be a sequence of str, not a single "
                        f"{type(options).__name__}")
    if isinstance(name_expressions, (str, bytes)):
        raise TypeError("compile_source: name_expressions must be a sequence of str, not a single "
                        f"{type(name_expressions).__name__}")
    owned = [_c_string(arch, "arch", "compile_source", backend),
             *(_c_string(o, "option", "compile_source", backend) for o in options)]
    exprs = [_c_string(x, "name expression", "compile_source", backend) for x in name_expressions]
    if exprs and api.program_add_name is None:
        raise fail(ErrorKind.UNSUPPORTED, "compile_source", f"{backend}'s compiler has no name expressions bound",
                   backend)
    prog_name = _c_string(name, "name", "compile_source", backend)
    api.require("program_create")
    ffi = api.compiler_ffi
    prog = ffi.new(api.tables.types["program"] + " *")
    api.check(api.program_create(prog, src, prog_name, 0, ffi.NULL, ffi.NULL), "program_create")
    try:
        held = [ffi.new("char[]", x) for x in exprs]  # alive until the program is destroyed
        for x, text in zip(name_expressions, held):
            code = api.program_add_name(prog[0], text)
            if code:
                raise api.error(code, "program_add_name", f"name expression {x!r}")
        # every string the compiler reads is held by a name that lives until the call returns (`strings`, and
        # `option_array` of their pointers): never a char[] made inside another ffi.new, which would be freed
        # at once (the use-after-free of issue 10 item 1)
        strings = [ffi.new("char[]", b"--gpu-architecture=" + owned[0]), *(ffi.new("char[]", o) for o in owned[1:])]
        option_array = ffi.new("char *[]", strings)
        code = api.program_compile(prog[0], len(strings), option_array)
        if code != api.tables.const("compile_success"):
            try:
                log = _program_text(api, prog[0], "program_log_size", "program_log").rstrip(b"\0").decode(
                    "utf-8", "replace")
            except Error as e:
                log = f"(no log: {e})"
            opts = " ".join(o.decode("utf-8", "replace") for o in owned[1:])
            err = api.error(code, "program_compile", f"build log ({name}, {arch}, options: {opts or '-'}):\n{log}")
            err.kind = ErrorKind.COMPILE_FAILED  # a refused option too: the compiler's verdict on this input
            raise err
        if build_log is not None:  # what it said about a compile that succeeded (#warning, -Wall's findings)
            try:
                text = _program_text(api, prog[0], "program_log_size", "program_log").rstrip(b"\0").decode(
                    "utf-8", "replace")
            except Error:
                text = ""
            if text.strip():
                build_log.append(text)
        lowered: dict[str, str] = {}
        for x, text in zip(name_expressions, held):
            out = ffi.new("char **")
            code = api.program_lowered_name(prog[0], text, out)
            if code:
                raise api.error(code, "program_lowered_name", f"name expression {x!r}")
            lowered[x] = ffi.string(out[0]).decode()
        if binary:
            return _program_text(api, prog[0], "program_binary_size", "program_binary"), lowered
        return _program_text(api, prog[0], "program_code_size", "program_code").rstrip(b"\0"), lowered
    finally:
        api.program_destroy(prog)
