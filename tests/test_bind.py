"""Hostile identifiers: nothing a spec or a header names may reach the generated Python unchecked.

* spec names (vendor, library, functions, parameters, wrapper macros, ...) with quotes, newlines,
  ``__import__('os')``, ``; import os``, triple quotes or backslashes are rejected by the loader with
  a located error, and the CLI exits 2 without writing anything;
* C identifiers that are legal C but dangerous in Python (tests/headers/hostile.h: dunders, keywords,
  the generated module's own names) are rejected with ``hostile.h:LINE:COL``;
* C parameter names that are Python keywords, or would shadow what a wrapper uses, are renamed
  (tests/headers/pykeywords.h) and the renamed wrappers work.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ironaccelerator_gen import sdk
from ironaccelerator_gen.diagnostics import Diagnostic, UserError
from ironaccelerator_gen.pipeline import compile_specs
from ironaccelerator_gen.spec import load_library

from conftest import core_text, within

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HEADERS = HERE / "headers"
CORE_TEXT = core_text()  # with the TEST backend kind
NVRTC_TEXT = (ROOT / "specs" / "cuda" / "nvrtc.yaml").read_text(encoding="utf-8")
NVRTC = "specs/cuda/nvrtc.yaml"
LOCATED = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+):(?P<col>\d+): (?P<message>.+)$")

HOSTILE_VALUES = [
    "a'b", 'a"b', "a\nb", "__import__('os')", "; import os", '"""', "a\\b", "x y", "\u00e9t\u00e9", "a\u2028b",
    "{x}", "", "os.system", "a)\nimport os\n(",
]


def pos(text: str, needle: str) -> tuple[int, int]:
    assert text.count(needle) == 1, f"expected exactly one {needle!r}"
    i = text.index(needle)
    return text.count("\n", 0, i) + 1, i - (text.rfind("\n", 0, i) + 1) + 1


def run_cli(spec_dir: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ironaccelerator_gen", "generate", "--specs", spec_dir.name,
                           "--out", str(out), *extra], capture_output=True, text=True, timeout=120,
                          cwd=spec_dir.parent)


def located_lines(proc: subprocess.CompletedProcess[str]) -> list[re.Match[str]]:
    """Exit status 2, no traceback, every stderr line but the summary located; nothing else printed."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.splitlines()
    assert lines and re.fullmatch(r"ironaccel-gen: \d+ error\(s\)", lines[-1]), proc.stderr
    matches = [LOCATED.match(line) for line in lines[:-1]]
    assert matches and all(matches), proc.stderr
    return [m for m in matches if m]


def nothing_written(out: Path) -> bool:
    return not out.exists() or not any(out.rglob("*"))


# ------------------------------------------------------------- hostile spec names

# (field, old text in the nvrtc spec, replacement with {} where the JSON-quoted hostile value goes)
SPEC_FIELDS = [
    ("vendor", "vendor: cuda", "vendor: {}"),
    ("library", "library: nvrtc", "library: {}"),
    ("backend", "backend: CUDA", "backend: {}"),
    ("sdk", "  kind: nvrtc", "  kind: {}"),
    ("header", "headers: [nvrtc.h]", "headers: [{}]"),
    ("function", "  nvrtcDestroyProgram:\n", "  {}: {{}}\n  nvrtcDestroyProgram:\n"),
    ("parameter", "      prog: inout", "      {}: inout"),
    ("wrapper macro", "\nloader:\n", '\nsymbols:\n  per_thread:\n    {}: "{{}}_ptds"\nloader:\n'),
    ("per-thread format", "\nloader:\n", "\nsymbols:\n  per_thread:\n    __X: {}\nloader:\n"),
    ("version_typedef", "\nloader:\n", "\nsymbols:\n  version_typedef: {}\nloader:\n"),
    ("symbol", "  nvrtcDestroyProgram:\n", "  nvrtcDestroyProgram:\n    symbol: {}\n"),
    ("status code", "  nvrtcDestroyProgram:\n", "  nvrtcDestroyProgram:\n    status: [{}]\n"),
    ("since", "  nvrtcGetSupportedArchs:\n", "  nvrtcGetSupportedArchs:\n    since: {}\n"),
    ("error_log", "error_log: nvrtcGetProgramLog\n", "error_log: {}\n"),
    ("len", "len: numHeaders, nullable: true}\n      includeNames", "len: {}, nullable: true}}\n      includeNames"),
    ("size_function", "size_function: nvrtcGetPTXSize}", "size_function: {}}}"),
    ("length_param", "size_function: nvrtcGetPTXSize}", "size_function: nvrtcGetPTXSize, length_param: {}}}"),
    ("error type", "type: nvrtcResult", "type: {}"),
    ("success code", "success: [NVRTC_SUCCESS]", "success: [{}]"),
    ("error kind", "    NOT_READY: [NVRTC_ERROR_BUSY]", "    {}: [NVRTC_ERROR_BUSY]"),
    ("error code", "    NOT_READY: [NVRTC_ERROR_BUSY]", "    NOT_READY: [{}]"),
    ("default kind", "default: DRIVER", "default: {}"),
    ("name_function", "name_function: nvrtcGetErrorString", "name_function: {}"),
    ("since code", "\nfunctions:\n", "\n  since: {{{}: '1.0'}}\nfunctions:\n"),
    ("include pattern", 'include: ["nvrtc*"]', "include: [{}]"),
    ("loader library", "linux: [libnvrtc.so.13,", "linux: [{},"),
    ("wheel dir", "wheel_dirs: [nvidia/cu13/lib,", "wheel_dirs: [{},"),
    ("sdk dir", "sdk_dirs: [lib64,", "sdk_dirs: [{},"),
    ("sdk_env", "sdk_env: [CUDA_HOME,", "sdk_env: [{},"),
    ("define name", "headers: [nvrtc.h]\n", "headers: [nvrtc.h]\ndefines: {{{}: 1}}\n"),
    ("define value", "headers: [nvrtc.h]\n", "headers: [nvrtc.h]\ndefines: {{X: {}}}\n"),
    ("version_macro", "headers: [nvrtc.h]\n", "headers: [nvrtc.h]\nversion_macro: {}\n"),
    ("version_headers", "headers: [nvrtc.h]\n", "headers: [nvrtc.h]\nversion_headers: [{}]\n"),
]


# values that are legitimate for a field (rendered with repr): a library file or directory name with a
# dot, and an empty macro value (-DX=)
LEGITIMATE = {"loader library": {"os.system"}, "wheel dir": {"os.system"}, "sdk dir": {"os.system"},
              "define value": {""}}


def hostile_spec(old: str, new: str, value: str) -> tuple[str, str]:
    """The nvrtc spec with ``value`` (as a YAML double-quoted scalar) in one place; also that scalar."""
    quoted = json.dumps(value)
    assert NVRTC_TEXT.count(old) == 1
    return NVRTC_TEXT.replace(old, new.format(quoted)), quoted


@pytest.mark.parametrize("field, old, new", SPEC_FIELDS, ids=[f[0] for f in SPEC_FIELDS])
def test_hostile_spec_name_is_rejected_where_it_is_written(field: str, old: str, new: str) -> None:
    for value in HOSTILE_VALUES:
        if value in LEGITIMATE.get(field, ()):
            continue
        text, quoted = hostile_spec(old, new, value)
        with pytest.raises(UserError) as info:
            load_library(Path("nvrtc.yaml"), NVRTC, text=text)
        diags: tuple[Diagnostic, ...] = info.value.diagnostics
        at = pos(text, quoted)
        assert any((d.location.line, d.location.col) == at for d in diags), \
            f"{field} = {value!r}: no diagnostic at {at}:\n" + "\n".join(map(str, diags))
        for d in diags:
            assert d.location.file == NVRTC and "\n" not in str(d) and "\u2028" not in str(d), repr(str(d))


@pytest.mark.parametrize("field, value, message", [
    ("vendor", "lambda", "vendor 'lambda' cannot be used as a Python module name"),
    ("vendor", "__import__", "vendor '__import__' cannot be used as a Python module name"),
    ("library", "None", "library 'None' cannot be used as a Python module name"),
    ("library", "_private", "library '_private' cannot be used as a Python module name"),
])
def test_python_unsafe_module_names(field: str, value: str, message: str) -> None:
    old, new = next((o, n) for f, o, n in SPEC_FIELDS if f == field)
    text = NVRTC_TEXT.replace(old, new.format(value))
    with pytest.raises(UserError) as info:
        load_library(Path("nvrtc.yaml"), NVRTC, text=text)
    (d,) = info.value.diagnostics
    assert d.message == message
    assert (d.location.line, d.location.col) == pos(text, f"{field}: {value}\n")[0:1] + (len(field) + 3,)


def make_nvrtc_dir(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "specs"
    (d / "cuda").mkdir(parents=True)
    (d / "core.yaml").write_text(CORE_TEXT, encoding="utf-8")
    (d / "cuda" / "nvrtc.yaml").write_text(text, encoding="utf-8")
    return d


@pytest.mark.parametrize("field, value", [("vendor", "cuda\nimport os"), ("function", "__import__('os')"),
                                          ("parameter", '"""; import os; """')])
def test_cli_rejects_hostile_spec_names_and_writes_nothing(tmp_path: Path, field: str, value: str) -> None:
    old, new = next((o, n) for f, o, n in SPEC_FIELDS if f == field)
    text, quoted = hostile_spec(old, new, value)
    spec_dir = make_nvrtc_dir(tmp_path, text)
    out = tmp_path / "out"
    matches = located_lines(run_cli(spec_dir, out))
    line, col = pos(text, quoted)
    assert any((m["file"], int(m["line"]), int(m["col"])) == (NVRTC, line, col) for m in matches)
    assert nothing_written(out)


@pytest.mark.skipif(sdk.find("nvrtc") is None, reason="no NVRTC headers")
def test_spec_names_that_are_identifiers_but_not_declared(tmp_path: Path) -> None:
    """Identifier-shaped but Python-dangerous names in a spec reach the binder, which finds no such C name."""
    text = NVRTC_TEXT.replace("  nvrtcDestroyProgram:\n", "  __import__: {}\n  nvrtcDestroyProgram:\n")
    text = text.replace("      prog: inout", "      __class__: inout")
    with pytest.raises(UserError) as info:
        compile_specs(make_nvrtc_dir(tmp_path, text))
    got = {(d.location.line, d.location.col): d.message for d in info.value.diagnostics}
    assert got[pos(text, "__import__")] == "function '__import__' is not declared in nvrtc.h"
    assert got[pos(text, "__class__")].startswith("function 'nvrtcDestroyProgram' has no parameter '__class__'")



@pytest.mark.parametrize("value, message", [
    ("nvrtcVersoin", "kernel_launch function 'nvrtcVersoin' is not a bound function of nvrtc.h (did you mean "
                     "'nvrtcVersion'?)"),
    ("nvrtcVersion", "'nvrtcVersion' does not look like a kernel launch: expected status (function, grid x, y, z, "
                     "block x, y, z, shared bytes, stream, void **params, void **extra)"),
])
def test_kernel_launch_must_be_a_bound_function_of_the_launch_shape(tmp_path: Path, value: str,
                                                                    message: str) -> None:
    """``kernel_launch`` names the function the compiled launch calls with a packed ``void *[]``: anything
    else would be called with the wrong arguments, so it is a located error, and nothing is written."""
    text = NVRTC_TEXT.replace("\nloader:", f"\nkernel_launch: {value}\nloader:", 1)
    with pytest.raises(UserError) as info:
        compile_specs(make_nvrtc_dir(tmp_path, text))
    (d,) = info.value.diagnostics
    assert d.message == message
    assert (d.location.line, d.location.col) == pos(text, value + "\n")
    out = tmp_path / "out"
    located = located_lines(run_cli(make_nvrtc_dir(tmp_path / "cli", text), out))
    assert [m["message"] for m in located] == [message] and nothing_written(out)


POOL_SPEC = """\
vendor: test
library: pool
backend: TEST
sdk: test
headers: [pool.h]
pool_memory: {alloc: ALLOC, free: FREE}
loader:
  linux: [libpool.so]
errors:
  type: poolResult
  success: [POOL_SUCCESS]
  default: DRIVER
  defaulted: [POOL_ERROR]
"""


def spec_dir(tmp_path: Path, text: str) -> tuple[Path, str]:
    """``tmp_path/specs`` with the core spec and ``text`` as the test library's spec (``test/pool.yaml``)."""
    d = tmp_path / "specs"
    (d / "test").mkdir(parents=True)
    (d / "core.yaml").write_text(CORE_TEXT, encoding="utf-8")
    (d / "test" / "pool.yaml").write_text(text, encoding="utf-8")
    return d, text


def refused(tmp_path: Path, d: Path, text: str, at: str, message: str) -> None:
    """The spec directory ``d`` (its library spec ``text``) is refused with the one error ``message``, located at
    ``at`` in ``test/pool.yaml``, and the CLI prints that located line and writes nothing."""
    with pytest.raises(UserError) as info:
        compile_specs(d, {"test": str(HEADERS)})
    (diag,) = info.value.diagnostics
    assert diag.message == message
    assert (diag.location.file, diag.location.line, diag.location.col) == ("specs/test/pool.yaml", *pos(text, at))
    out = tmp_path / "out"
    located = located_lines(run_cli(d, out, "--sdk", f"test={HEADERS}"))
    assert [m["message"] for m in located] == [message] and nothing_written(out)


def pool_dir(tmp_path: Path, alloc: str, free: str) -> tuple[Path, str]:
    return spec_dir(tmp_path, POOL_SPEC.replace("ALLOC", alloc).replace("FREE", free))


def test_pool_memory_binds_the_allocator_and_its_free(tmp_path: Path) -> None:
    d, _ = pool_dir(tmp_path, "poolAlloc", "poolFree")
    (lib,) = compile_specs(d, {"test": str(HEADERS)}).libraries
    pm = lib.pool_memory
    assert pm is not None and (pm.alloc, pm.free, pm.devptr) == ("poolAlloc", "poolFree", "unsigned long long")
    assert pm.alloc_casts == ("poolDevptr *", "size_t", "poolHandle", "poolStream")
    assert pm.free_casts == ("poolDevptr", "poolStream") and pm.alloc_result == pm.free_result == "poolResult"
    names = [f.public for f in lib.functions]
    assert (names[pm.alloc_index], names[pm.free_index]) == ("poolAlloc", "poolFree")


@pytest.mark.parametrize("alloc, free, at, message", [
    ("poolAlloc", "poolFre", "poolFre", "pool_memory free function 'poolFre' is not a bound function of pool.h (did "
                                        "you mean 'poolFree'?)"),
    ("poolAllocSwapped", "poolFree", "poolAllocSwapped", "'poolAllocSwapped' does not look like a stream-ordered pool "
                                                         "allocation: expected status (device pointer *out, size_t "
                                                         "bytes, pool, stream)"),
    ("poolCount", "poolFree", "poolCount", "'poolCount' does not look like a stream-ordered pool allocation: "
                                           "expected status (device pointer *out, size_t bytes, pool, stream)"),
    ("poolAlloc", "poolFreeLater", "poolFreeLater", "'poolFreeLater' does not look like a stream-ordered free: "
                                                    "expected status (device pointer, stream)"),
    ("poolAlloc", "poolFreePointer", "poolFreePointer", "'poolFreePointer' frees a 'void *', but 'poolAlloc' "
                                                        "allocates a 'poolDevptr' (unsigned long long)"),
])
def test_pool_memory_must_be_an_allocator_and_free_of_the_pool_shapes(tmp_path: Path, alloc: str, free: str,
                                                                      at: str, message: str) -> None:
    """``pool_memory`` names what the compiled pool calls with a device pointer it keeps as a number: anything
    else would be called with the wrong arguments, so it is a located error, and nothing is written."""
    d, text = pool_dir(tmp_path, alloc, free)
    refused(tmp_path, d, text, at + "," if at == alloc else at + "}", message)


def test_pool_memory_needs_both_functions(tmp_path: Path) -> None:
    d, text = pool_dir(tmp_path, "poolAlloc", "poolFree")
    text = text.replace("pool_memory: {alloc: poolAlloc, free: poolFree}", "pool_memory: {alloc: poolAlloc}")
    (d / "test" / "pool.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as info:
        compile_specs(d, {"test": str(HEADERS)})
    (diag,) = info.value.diagnostics
    assert diag.message == "missing required key 'free' in pool_memory"
    assert (diag.location.line, diag.location.col) == pos(text, "{alloc")


def devmem_dir(tmp_path: Path, alloc: str, free: str) -> tuple[Path, str]:
    return spec_dir(tmp_path, POOL_SPEC.replace("pool_memory: {alloc: ALLOC, free: FREE}",
                                                f"device_memory: {{alloc: {alloc}, free: {free}}}"))


def test_device_memory_binds_the_allocator_and_its_free(tmp_path: Path) -> None:
    d, _ = devmem_dir(tmp_path, "poolMalloc", "poolRelease")
    (lib,) = compile_specs(d, {"test": str(HEADERS)}).libraries
    dm = lib.device_memory
    assert dm is not None and (dm.alloc, dm.free, dm.devptr) == ("poolMalloc", "poolRelease", "unsigned long long")
    assert dm.alloc_casts == ("poolDevptr *", "size_t") and dm.free_casts == ("poolDevptr",)
    assert dm.alloc_result == dm.free_result == "poolResult" and lib.pool_memory is None
    names = [f.public for f in lib.functions]
    assert (names[dm.alloc_index], names[dm.free_index]) == ("poolMalloc", "poolRelease")


@pytest.mark.parametrize("alloc, free, at, message", [
    ("poolMalloc", "poolRelese", "poolRelese", "device_memory free function 'poolRelese' is not a bound function of "
                                               "pool.h (did you mean 'poolRelease'?)"),
    ("poolMallocSwapped", "poolRelease", "poolMallocSwapped", "'poolMallocSwapped' does not look like a device-memory "
                                                              "allocation: expected status (device pointer *out, "
                                                              "size_t bytes)"),
    ("poolAlloc", "poolRelease", "poolAlloc", "'poolAlloc' does not look like a device-memory allocation: expected "
                                              "status (device pointer *out, size_t bytes)"),
    ("poolMalloc", "poolFree", "poolFree", "'poolFree' does not look like a device-memory free: expected status "
                                           "(device pointer)"),
    ("poolMalloc", "poolReleasePointer", "poolReleasePointer", "'poolReleasePointer' frees a 'void *', but "
                                                               "'poolMalloc' allocates a 'poolDevptr' (unsigned long "
                                                               "long)"),
])
def test_device_memory_must_be_an_allocator_and_free_of_their_shapes(tmp_path: Path, alloc: str, free: str,
                                                                     at: str, message: str) -> None:
    """``device_memory`` names what the compiled Device.alloc calls with a device pointer it keeps as a number:
    anything else would be called with the wrong arguments, so it is a located error, and nothing is written."""
    d, text = devmem_dir(tmp_path, alloc, free)
    refused(tmp_path, d, text, at + "," if at == alloc else at + "}", message)


def test_device_memory_needs_both_functions(tmp_path: Path) -> None:
    d, text = devmem_dir(tmp_path, "poolMalloc", "poolRelease")
    text = text.replace("device_memory: {alloc: poolMalloc, free: poolRelease}", "device_memory: {alloc: poolMalloc}")
    (d / "test" / "pool.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as info:
        compile_specs(d, {"test": str(HEADERS)})
    (diag,) = info.value.diagnostics
    assert diag.message == "missing required key 'free' in device_memory"
    assert (diag.location.line, diag.location.col) == pos(text, "{alloc")


# ----------------------------------------------------------- hostile C identifiers

HOSTILE_H = (HEADERS / "hostile.h").read_text(encoding="utf-8")
HOSTILE_SPEC = """\
vendor: test
library: hostile
backend: TEST
sdk: test
headers: [hostile.h]
loader:
  linux: [libhostile.so]
errors:
  type: hostileResult
  success: [HOSTILE_SUCCESS]
  default: DRIVER
  kinds:
    UNKNOWN: [HOSTILE_ERROR]
"""
# (C name, what the diagnostic calls it, a regex finding its declaration's line in hostile.h)
HOSTILE_NAMES = [
    ("__builtins__", "function", r"hostileResult __builtins__\("),
    ("ffi", "function", r"hostileResult ffi\("),
    ("has", "function", r"hostileResult has\("),
    ("_lib", "function", r"hostileResult _lib\("),
    ("import", "function", r"hostileResult import\("),
    ("isinstance", "function", r"hostileResult isinstance\("),
    ("__import__", "parameter", r"hostileResult hostileDunderParam\("),
    ("__class__", "enum constant", r"^    __class__ ="),
    ("None", "enum constant", r"^    None ="),
    ("mro", "enum constant", r"^    mro ="),
    ("STRUCTS", "enum constant", r"^    STRUCTS ="),
    ("lambda", "enum", r"\} lambda;"),
    ("True", "macro constant", r"#define True "),
    ("Error", "macro constant", r"#define Error "),
    ("hostileTwice", "enum", r"^enum hostileTwice "),
]
HARMLESS = ["hostileFine", "HOSTILE_MODE_OK", "HOSTILE_VERSION", "HOSTILE_K", "_HOSTILE_PRIVATE", "hostileMode"]


def expected_at(name: str, pattern: str) -> tuple[int, set[int]]:
    """hostile.h line of the declaration, and the acceptable columns (its name, or the declaration's start)."""
    for no, line in enumerate(HOSTILE_H.splitlines(), 1):
        if re.search(pattern, line):
            where = "hostileDunderParam" if name == "__import__" else name
            return no, {line.index(where) + 1, len(line) - len(line.lstrip()) + 1}
    raise AssertionError(f"{pattern!r} not in hostile.h")


def test_sdk_override_for_a_kind_of_its_own() -> None:
    """``--sdk test=tests/headers``: any kind is accepted when the spec's first header is there."""
    found = sdk.find("test", str(HEADERS), "hostile.h")
    assert found is not None and found.include_dir == HEADERS and found.kind == "test"
    assert sdk.find("test", str(HEADERS), "missing.h") is None
    assert sdk.find("test", str(HEADERS)) is None  # an unknown kind without a marker


@pytest.fixture
def hostile_dir(tmp_path: Path) -> Path:
    d = tmp_path / "specs"
    (d / "test").mkdir(parents=True)
    (d / "core.yaml").write_text(CORE_TEXT, encoding="utf-8")
    (d / "test" / "hostile.yaml").write_text(HOSTILE_SPEC, encoding="utf-8")
    return d


@pytest.mark.parametrize("frontend", ["clang", "pycparser"])
def test_hostile_header_names_are_rejected_with_their_location(hostile_dir: Path, frontend: str) -> None:
    with pytest.raises(UserError) as info:
        compile_specs(hostile_dir, {"test": str(HEADERS)}, frontend)
    diags = info.value.diagnostics
    assert all(d.location.file == "hostile.h" for d in diags), "\n".join(map(str, diags))
    for name, what, pattern in HOSTILE_NAMES:
        mine = [d for d in diags if f"{what} '{name}'" in d.message]
        assert len(mine) == 1, f"{what} {name!r}:\n" + "\n".join(map(str, diags))
        (d,) = mine
        assert "cannot be bound as a Python name" in d.message
        line, cols = expected_at(name, pattern)
        assert d.location.line == line and d.location.col in cols, f"{d} (expected line {line}, col in {cols})"
    text = "\n".join(map(str, diags))
    for ok in HARMLESS:
        assert f"'{ok}'" not in text, text
    assert len(diags) == len(HOSTILE_NAMES), text


def test_cli_rejects_hostile_header_and_writes_nothing(hostile_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    matches = located_lines(run_cli(hostile_dir, out, "--sdk", f"test={HEADERS}"))
    assert {m["file"] for m in matches} == {"hostile.h"}
    assert len(matches) == len(HOSTILE_NAMES)
    assert nothing_written(out)


# --------------------------------------------------- Python keywords as parameters

KW_SPEC = """\
vendor: test
library: pykeywords
backend: TEST
sdk: test
headers: [pykeywords.h]
loader:
  linux: [libpykeywords.so]
errors:
  type: kwResult
  success: [KW_SUCCESS]
  default: DRIVER
  kinds:
    UNKNOWN: [KW_ERROR]
functions:
  kwLen:
    params:
      items: {len: n}
"""
KW_SIGNATURES = {
    "kwFrom": ["lambda_", "from_"],  # keywords
    "kwPass": ["pass_"],  # 'yield' is an out parameter: returned, its local is _yield_
    "kwStr": ["str_", "isinstance_"],  # the in_str conversion calls isinstance(x, str)
    "kwLen": ["items", "len_"],  # the array length is len(items)
    "kwPrivate": ["_lib_", "_r_", "ffi_"],  # the wrapper's own globals and locals
    "kwPlain": ["bytes", "len", "str", "type", "match"],  # nothing in this wrapper uses them: kept
    # an in parameter has no local: 'new' is kept; the out parameters' locals (_lib, _error, _T0, _keep, _r)
    # would be the wrapper's helpers and its status local, so they are renamed
    "kwShadow": ["new"],
}
KW_IMPL = r"""
#include "pykeywords.h"
#include <string.h>
kwResult kwFrom(int lambda, int from) { return lambda == 1 && from == 2 ? KW_SUCCESS : KW_ERROR; }
kwResult kwPass(int pass, int *yield) { *yield = pass * 10; return KW_SUCCESS; }
kwResult kwStr(const char *str, int isinstance) { return !strcmp(str, "abc") && isinstance == 3 ? KW_SUCCESS : KW_ERROR; }
kwResult kwLen(const int *items, int n, int len) { return n == 3 && items[2] == 30 && len == 7 ? KW_SUCCESS : KW_ERROR; }
kwResult kwPrivate(int _lib, int _r, int ffi) { return _lib == 1 && _r == 2 && ffi == 3 ? KW_SUCCESS : KW_ERROR; }
kwResult kwPlain(int bytes, int len, int str, int type, int match) {
    return bytes == 1 && len == 2 && str == 3 && type == 4 && match == 5 ? KW_SUCCESS : KW_ERROR; }
kwResult kwShadow(int new, int *lib, int *error, int *T0, int *keep, int *r) {
    *lib = new + 1; *error = new + 2; *T0 = new + 3; *keep = new + 4; *r = new + 5;
    return new == 9 ? KW_ERROR : KW_SUCCESS; }
"""
KW_CALLS = """
import inspect
import ironaccelerator.backends.test.pykeywords as m
m.kwFrom(lambda_=1, from_=2)
assert m.kwPass(pass_=4) == 40
m.kwStr(str_="abc", isinstance_=3)
m.kwStr("abc", 3)
m.kwLen(items=[10, 20, 30], len_=7)
m.kwPrivate(_lib_=1, _r_=2, ffi_=3)
m.kwPlain(bytes=1, len=2, str=3, type=4, match=5)
assert m.kwShadow(new=10) == (11, 12, 13, 14, 15)
try:
    m.kwShadow(9)
except m.Error as e:
    assert e.code == m.KW_ERROR
else:
    raise AssertionError("kwShadow(9, ...) should fail")
try:
    m.kwFrom(lambda_=2, from_=1)
except m.Error as e:
    assert e.code == m.KW_ERROR
else:
    raise AssertionError("kwFrom(2, 1) should fail")
print("ok", m.BINDING_MODE)
"""


@pytest.fixture
def kw_dir(tmp_path: Path) -> Path:
    d = tmp_path / "specs"
    (d / "test").mkdir(parents=True)
    (d / "core.yaml").write_text(CORE_TEXT, encoding="utf-8")
    (d / "test" / "pykeywords.yaml").write_text(KW_SPEC, encoding="utf-8")
    return d


def functions_of(source: str) -> dict[str, list[str]]:
    return {n.name: [a.arg for a in n.args.posonlyargs + n.args.args] for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.FunctionDef)}


def test_python_keyword_parameters_are_renamed(kw_dir: Path) -> None:
    result = compile_specs(kw_dir, {"test": str(HEADERS)})
    for rel, text in result.files.items():
        if rel.endswith(".py"):
            compile(text, rel, "exec")  # every generated module is valid Python
    base = "ironaccelerator/backends/test/pykeywords/"
    checked = functions_of(result.files[base + "__init__.py"])
    unchecked = functions_of(result.files[base + "unchecked.py"])
    for name, params in KW_SIGNATURES.items():
        assert checked[name] == params, (name, checked[name])
    assert unchecked["kwFrom"] == ["lambda_", "from_"]
    (lib,) = result.libraries
    by_c = {(f.public, p.c_name): p.name for f in lib.functions for p in f.params}
    assert by_c[("kwPass", "yield")] == "yield_" and by_c[("kwLen", "n")] == "n"
    assert [by_c[("kwShadow", c)] for c in ("new", "lib", "error", "T0", "keep", "r")] == \
        ["new", "lib_", "error_", "T0_", "keep_", "r_"]


def test_renamed_parameters_reach_the_right_c_arguments(kw_dir: Path, tmp_path: Path) -> None:
    """Generate, build a small implementation library, import (ABI mode) and call with keyword arguments."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    (lib_dir / "impl.c").write_text(KW_IMPL, encoding="utf-8")
    subprocess.run([cc, "-shared", "-fPIC", "-I", str(HEADERS), "-o", str(lib_dir / "libpykeywords.so"),
                    str(lib_dir / "impl.c")], check=True, capture_output=True, timeout=60)
    out = tmp_path / "out"
    gen = run_cli(kw_dir, out, "--sdk", f"test={HEADERS}")
    assert gen.returncode == 0, gen.stdout + gen.stderr
    env = {**os.environ, "PYTHONPATH": str(out), "LD_LIBRARY_PATH": str(lib_dir)}
    proc = subprocess.run([sys.executable, "-c", KW_CALLS], capture_output=True, text=True, timeout=120,
                          env=env, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("ok"), proc.stdout + proc.stderr


def test_parameters_that_collide_after_renaming_are_rejected(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "pykeywords.h").write_text(
        "typedef enum { KW_SUCCESS = 0, KW_ERROR = 1 } kwResult;\n"
        "kwResult kwTwice(int from, int from_);\n"
        "kwResult kwLocal(const char *x, int _x);\n", encoding="utf-8")
    d = tmp_path / "specs"
    (d / "test").mkdir(parents=True)
    (d / "core.yaml").write_text(CORE_TEXT, encoding="utf-8")
    (d / "test" / "pykeywords.yaml").write_text(KW_SPEC.split("functions:")[0], encoding="utf-8")
    with pytest.raises(UserError) as info:
        compile_specs(d, {"test": str(inc)})
    got = sorted((d.location.line, d.message) for d in info.value.diagnostics)
    assert got == [
        (2, "parameter 'from_' of 'kwTwice' cannot be bound as a Python name: "
            "another parameter is already bound as 'from_'"),
        (3, "parameter '_x' of 'kwLocal' cannot be bound as a Python name: "
            "it collides with a local of the generated wrapper"),
    ]


# -------------------------------------------------------- hostile core descriptions


def test_core_descriptions_with_quotes_and_backslashes_stay_docstrings(kw_dir: Path) -> None:
    docs = {"UNKNOWN": 'ends in a quote"', "DRIVER": 'has """ three quotes and \\N{BULLET} \\x escapes\\',
            "NOT_READY": "'single' \"double\" `back` \\\\"}
    core = CORE_TEXT
    for kind, doc in docs.items():
        core, n = re.subn(rf"^(  {kind}:\n    value: \d+\n    doc: ).*$", lambda m: m.group(1) + json.dumps(doc), core,
                          count=1, flags=re.M)
        assert n == 1, kind
    (kw_dir / "core.yaml").write_text(core, encoding="utf-8")
    result = compile_specs(kw_dir, {"test": str(HEADERS)})
    source = result.files["ironaccelerator/_core.py"]
    tree = ast.parse(source)
    kind_class = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ErrorKind")
    found: dict[str, object] = {}
    for prev, node in zip(kind_class.body, kind_class.body[1:]):
        if isinstance(prev, ast.Assign) and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            target = prev.targets[0]
            assert isinstance(target, ast.Name), ast.dump(prev)
            found[target.id] = node.value.value
    for kind, doc in docs.items():
        assert found[kind] == doc


# ------------------------------------------- annotations that make no sense for their parameter

PARAMS_SPEC = """\
vendor: test
library: params
backend: TEST
sdk: test
headers: [params.h]
loader:
  linux: [libparams.so]
errors:
  type: paramsResult
  success: [PARAMS_SUCCESS]
  default: DRIVER
  defaulted: [PARAMS_ERROR]
functions:
  paramsGetLog:
    params:
      log: {direction: out, string: {size_function: paramsGetLogSize}}
  paramsGetName:
    params:
      name: {direction: out, string: {capacity: 64, length_param: capacity}}
  paramsSum:
    params:
      values: {len: count}
  paramsSumTerminated:
    params:
      values: {len: null-terminated}
"""


def params_dir(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "specs"
    (d / "test").mkdir(parents=True)
    (d / "core.yaml").write_text(CORE_TEXT, encoding="utf-8")
    (d / "test" / "params.yaml").write_text(text, encoding="utf-8")
    return d


def test_params_header_binds_as_written(tmp_path: Path) -> None:
    """The base of the cases below is valid: each case breaks exactly one thing."""
    (lib,) = compile_specs(params_dir(tmp_path, PARAMS_SPEC), {"test": str(HEADERS)}).libraries
    roles = {f.public: [(p.name, p.role) for p in f.params] for f in lib.functions}
    assert roles["paramsGetLog"] == [("handle", "in"), ("log", "out_buffer")]
    assert roles["paramsSum"] == [("values", "in_array"), ("count", "len"), ("sum", "out")]
    assert roles["paramsGetName"] == [("handle", "in"), ("name", "out_buffer"), ("capacity", "capacity")]
    assert roles["paramsSumTerminated"] == [("values", "in_array"), ("sum", "out")]
    (terminated,) = [p for f in lib.functions for p in f.params if p.terminated]
    assert terminated.name == "values"


# (old text of PARAMS_SPEC, its replacement, the text the diagnostic points at, the message's start)
MEANINGLESS = [
    # a size query must be another bound function returning one integer from the caller's own arguments
    ("size_function: paramsGetLogSize", "size_function: paramsGetLog", "paramsGetLog}",
     "size_function 'paramsGetLog' cannot size the output of paramsGetLog: it is that function itself"),
    ("size_function: paramsGetLogSize", "size_function: paramsGetLogSizes", "paramsGetLogSizes}",
     "size_function 'paramsGetLogSizes' cannot size the output of paramsGetLog: it must return one integer "
     "(it returns 2 values)"),
    ("size_function: paramsGetLogSize", "size_function: paramsGetLogName", "paramsGetLogName}",
     "size_function 'paramsGetLogName' cannot size the output of paramsGetLog: it must return one integer "
     "(it returns a str)"),
    ("size_function: paramsGetLogSize", "size_function: paramsGetLogSizeOf", "paramsGetLogSizeOf}",
     "size_function 'paramsGetLogSizeOf' cannot size the output of paramsGetLog: it takes 'program', "
     "which paramsGetLog has no input parameter of that name to pass"),
    ("size_function: paramsGetLogSize", "size_function: paramsSetPair", "paramsSetPair}",
     "size_function 'paramsSetPair' cannot size the output of paramsGetLog: it must return one integer "
     "(it returns nothing)"),
    ("functions:\n", "bind:\n  exclude: [paramsGetLogSize]\nfunctions:\n", "paramsGetLogSize}",
     "size_function 'paramsGetLogSize' is not a bound function (bind.include/exclude or skip leave it out)"),
    # len: names the element count: an integer parameter of the same function, not the array itself
    ("values: {len: count}", "values: {len: sum}", "sum}",
     "len: parameter 'sum' of 'paramsSum' is not an integer, so it cannot hold the length of 'values'"),
    ("values: {len: count}", "values: {len: values}", "values}",
     "len: parameter 'values' of 'paramsSum' cannot be its own length"),
    ("values: {len: count}", "values: {len: count}\n      count: out", "count: out",
     "parameter 'count' of 'paramsSum' is the length of 'values' (len:); it cannot also be 'out'"),
    ("values: {len: count}", "values: {len: count, direction: out}", "values: {len: count,",
     "parameter 'values' of 'paramsSum' has len: (an input array); it cannot also be 'out'"),
    ("values: {len: count}", "values: {len: count}\n      count: {nullable: true}", "count: {",
     "parameter 'count' of 'paramsSum' is not a pointer, so it cannot be nullable"),
    # len: null-terminated is an input array too (issue 11: direction: was silently dropped beside len:)
    ("values: {len: null-terminated}", "values: {len: null-terminated, direction: inout}", "values: {len: null",
     "parameter 'values' of 'paramsSumTerminated' has len: null-terminated (an input array); it cannot also be "
     "'inout'"),
    # string: is an output the function writes (issue 11: direction: in beside it was silently dropped)
    ("log: {direction: out,", "log: {direction: in,", "log: {",
     "parameter 'log' of 'paramsGetLog' has string: (an output string the function writes); it cannot also be "
     "'in' (an input string needs neither)"),
    # direction: out needs a pointer the function writes through, to a type Python can allocate
    ("functions:\n", "functions:\n  paramsSetName:\n    params:\n      name: out\n", "name: out",
     "parameter 'name' of 'paramsSetName' points to const, so the function cannot write it ('out')"),
    ("functions:\n", "functions:\n  paramsSetPair:\n    params:\n      pair: {direction: inout}\n", "pair: {",
     "parameter 'pair' of 'paramsSetPair' points to const, so the function cannot write it ('inout')"),
    ("functions:\n", "functions:\n  paramsSetName:\n    params:\n      handle: out\n", "handle: out",
     "parameter 'handle' of 'paramsSetName' points to an incomplete type (struct params_st), which cannot "
     "be allocated for an 'out' parameter"),
    # a string's length_param takes the fixed capacity: a size query leaves nothing to fill it with
    ("length_param: capacity}", "length_param: capacity, size_function: paramsGetLogSize}", "{capacity: 64",
     "string: parameter 'name' of 'paramsGetName' gives both 'capacity' and 'size_function'; give one"),
    ("{capacity: 64, length_param: capacity}", "{size_function: paramsGetLogSize, length_param: capacity}",
     "{size_function: paramsGetLogSize, length_param",
     "string: length_param of parameter 'name' of 'paramsGetName' needs a 'capacity' to pass"),
    ("length_param: capacity}", "length_param: handle}", "handle}",
     "length_param: parameter 'handle' of 'paramsGetName' is not an integer, so it cannot take the capacity "
     "of 'name'"),
]


@pytest.mark.parametrize("old, new, at, message", MEANINGLESS, ids=[m[3][:60] for m in MEANINGLESS])
def test_annotation_that_makes_no_sense_for_its_parameter(tmp_path: Path, old: str, new: str, at: str,
                                                         message: str) -> None:
    """Accepted before, these bound a wrapper that lost a parameter or failed when called (RecursionError,
    TypeError, NameError, KeyError while rendering): each is a located error now."""
    assert PARAMS_SPEC.count(old) == 1
    text = PARAMS_SPEC.replace(old, new)
    with pytest.raises(UserError) as info:
        compile_specs(params_dir(tmp_path, text), {"test": str(HEADERS)})
    diags = info.value.diagnostics
    assert [d.message for d in diags] == [message], "\n".join(map(str, diags))
    (d,) = diags
    assert d.location.file == "specs/test/params.yaml"
    assert (d.location.line, d.location.col) == pos(text, at), str(d)


@pytest.mark.parametrize("case", [0, 6, 11])
def test_cli_rejects_meaningless_annotations(tmp_path: Path, case: int) -> None:
    old, new, _, message = MEANINGLESS[case]
    out = tmp_path / "out"
    proc = run_cli(params_dir(tmp_path, PARAMS_SPEC.replace(old, new)), out, "--sdk", f"test={HEADERS}")
    assert [m["message"] for m in located_lines(proc)] == [message]
    assert {m["file"] for m in located_lines(proc)} == {"specs/test/params.yaml"}
    assert nothing_written(out)


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_sdk_version_headers_that_are_not_regular_files(tmp_path: Path, special: str) -> None:
    """An --sdk directory whose version header (CL/cl_version.h, cuda.h) is a FIFO blocked `find` forever,
    or /dev/zero read without end: such a header tells no version."""
    (tmp_path / "CL").mkdir()
    (tmp_path / "CL" / "cl.h").write_text("/* marker */\n", encoding="utf-8")
    for name in ("CL/cl_version.h", "cuda.h"):
        if special == "fifo":
            os.mkfifo(tmp_path / name)
        else:
            (tmp_path / name).symlink_to(special)
    with within(20):
        found = sdk.find("opencl", str(tmp_path))
    assert found is not None and found.version == "unknown" and found.include_dir == tmp_path



CREATE_SPEC = POOL_SPEC.replace("pool_memory: {alloc: ALLOC, free: FREE}", "device_memory: DM").replace(
    "  type: poolResult\n", "  type: poolResult\n  out_param: errcode_ret\n")


def create_dir(tmp_path: Path, device_memory: str) -> tuple[Path, str]:
    return spec_dir(tmp_path, CREATE_SPEC.replace("DM", device_memory))


def test_device_memory_binds_a_creator_that_returns_its_handle(tmp_path: Path) -> None:
    """``create:`` (the clCreateBuffer shape): the size and the errors' out-parameter found by name, every other
    parameter a value the device gives (bound), numbered in order, pointers apart from integers."""
    d, _ = create_dir(tmp_path, "{create: poolCreate, size: size, free: poolDestroy}")
    (lib,) = compile_specs(d, {"test": str(HEADERS)}).libraries
    dm = lib.device_memory
    assert dm is not None and dm.returns_handle and (dm.alloc, dm.free, dm.devptr) == ("poolCreate", "poolDestroy",
                                                                                       "struct mem_st *")
    assert dm.alloc_params == (("bound", "poolHandle", 0), ("bound", "unsigned long long", 1), ("size", "size_t", -1),
                               ("bound", "void *", 2), ("status", "poolResult *", -1))
    assert dm.bound_pointers == (True, False, True) and dm.alloc_result == dm.free_result == "poolResult"
    d2, _ = devmem_dir(tmp_path / "alloc", "poolMalloc", "poolRelease")
    (lib,) = compile_specs(d2, {"test": str(HEADERS)}).libraries
    assert lib.device_memory is not None and not lib.device_memory.returns_handle
    assert lib.device_memory.alloc_params == (("out", "poolDevptr *", -1), ("size", "size_t", -1))


HOST_COPY_SPEC = CREATE_SPEC.replace("device_memory: DM", "device_memory: {create: poolCreate, size: size, free: "
                                     "poolDestroy}\nhost_copy: HC")


def host_copy_dir(tmp_path: Path, host_copy: str, spec: str = HOST_COPY_SPEC) -> tuple[Path, str]:
    return spec_dir(tmp_path, spec.replace("HC", host_copy))


def test_host_copy_binds_the_write_and_the_read(tmp_path: Path) -> None:
    """``host_copy`` (the clEnqueueWriteBuffer / clEnqueueReadBuffer shape): the two functions and the C type of
    each parameter, which the compiled copier casts its arguments to (blocking, offset 0, no wait, no event)."""
    d, _ = host_copy_dir(tmp_path, "{write: poolWrite, read: poolRead}")
    (lib,) = compile_specs(d, {"test": str(HEADERS)}).libraries
    hc = lib.host_copy
    assert hc is not None and (hc.write, hc.read, hc.result) == ("poolWrite", "poolRead", "poolResult")
    assert hc.write_casts == ("poolQueue", "poolMem", "unsigned int", "size_t", "size_t", "const void *",
                              "unsigned int", "const poolEvent *", "poolEvent *")
    assert hc.read_casts[5] == "void *"
    names = [f.public for f in lib.functions]
    assert (names[hc.write_index], names[hc.read_index]) == ("poolWrite", "poolRead")


@pytest.mark.parametrize("host_copy, at, message", [
    ("{write: poolWrit, read: poolRead}", "poolWrit,",
     "host_copy write function 'poolWrit' is not a bound function of pool.h (did you mean 'poolWrite'?)"),
    ("{write: poolWriteShort, read: poolRead}", "poolWriteShort,",
     "'poolWriteShort' does not look like a host copy: expected status (queue, buffer, blocking, offset, size, host "
     "pointer, wait count, wait list, event *)"),
    ("{write: poolWrite, read: poolReadConst}", "poolReadConst}",
     "'poolReadConst' takes a const host pointer: a read writes the host buffer"),
    ("{write: poolWriteOther, read: poolRead}", "poolWriteOther,",
     "'poolWriteOther' copies a 'poolHandle' (struct pool_st *), but the device_memory allocates a "
     "'struct mem_st *'"),
    ("{write: poolWrite}", "{write", "missing required key 'read' in host_copy"),
])
def test_host_copy_must_be_a_write_and_a_read_of_their_shape(tmp_path: Path, host_copy: str, at: str,
                                                             message: str) -> None:
    """What the compiled copier would call with the wrong arguments, or with another kind of buffer than the
    device's allocations, is a located error, and nothing is written."""
    d, text = host_copy_dir(tmp_path, host_copy)
    refused(tmp_path, d, text, at, message)


def test_host_copy_needs_device_memory(tmp_path: Path) -> None:
    """The copier reads the device's compiled allocations: without ``device_memory`` there are none."""
    spec = POOL_SPEC.replace("pool_memory: {alloc: ALLOC, free: FREE}", "host_copy: HC")
    d, text = host_copy_dir(tmp_path, "{write: poolWrite, read: poolRead}", spec)
    with pytest.raises(UserError) as info:
        compile_specs(d, {"test": str(HEADERS)})
    (diag,) = info.value.diagnostics
    assert diag.message == ("host_copy copies to and from the library's device_memory allocations: add "
                            "device_memory (section 'library > device_memory')")
    assert (diag.location.line, diag.location.col) == pos(text, "poolWrite,")


@pytest.mark.parametrize("device_memory, at, message", [
    ("{alloc: poolMalloc, create: poolCreate, size: size, free: poolDestroy}", "poolCreate,",
     "device_memory takes one of 'alloc' (status (device pointer *out, size_t bytes)) and 'create' (a creator that "
     "returns the handle), not both"),
    ("{free: poolDestroy}", "{free", "device_memory takes one of 'alloc' (status (device pointer *out, size_t bytes)) "
                                     "and 'create' (a creator that returns the handle): add one"),
    ("{create: poolCreate, free: poolDestroy}", "poolCreate,",
     "'create' needs 'size': the name of its byte count's parameter (ex. size: size)"),
    ("{alloc: poolMalloc, size: bytes, free: poolRelease}", "bytes,",
     "'size' (the byte count's parameter) goes with 'create' only"),
    ("{create: poolCreate, size: sise, free: poolDestroy}", "sise,",
     "'sise' is not a parameter of 'poolCreate' (ctx, flags, size, host, errcode_ret) (did you mean 'size'?)"),
    ("{create: poolCreateNoStatus, size: size, free: poolDestroy}", "poolCreateNoStatus,",
     "'poolCreateNoStatus' does not look like a device-memory creator: expected handle (..., size_t size, ..., "
     "status *errcode) returning a pointer or an integer, its status through the errors' out_param, every other "
     "parameter an integer or a pointer"),
    ("{create: poolCreateFloat, size: size, free: poolDestroy}", "poolCreateFloat,",
     "'poolCreateFloat' does not look like a device-memory creator: expected handle (..., size_t size, ..., "
     "status *errcode) returning a pointer or an integer, its status through the errors' out_param, every other "
     "parameter an integer or a pointer"),
    ("{create: poolCreate, size: size, free: poolRelease}", "poolRelease}",
     "'poolRelease' frees a 'poolDevptr', but 'poolCreate' returns a 'poolMem' (struct mem_st *)"),
])
def test_device_memory_create_must_be_a_creator_of_its_shape(tmp_path: Path, device_memory: str, at: str,
                                                             message: str) -> None:
    """A ``create:`` that is not the creator shape, or a ``device_memory`` that names both shapes or neither, is a
    located error, and nothing is written."""
    d, text = create_dir(tmp_path, device_memory)
    refused(tmp_path, d, text, at, message)


FILL_SPEC = """\
vendor: tag
library: props
backend: TEST
frontend: declared
declarations: |
  typedef enum { TAG_OK = 0, TAG_BAD = 1 } tagStatus;
  typedef enum { TAG_STRUCTURE_TYPE_PROPS = 5, TAG_STRUCTURE_TYPE_OTHER = 6 } tagStructureType;
  typedef enum { TAG_COLOR_RED = 1 } tagColor;
  typedef struct { tagStructureType stype; void *pNext; int value; } tagProps;
  tagStatus tagGetProps(tagProps *props);
  tagStatus tagSetProps(const tagProps *props);
loader:
  linux: [libtagprops.so]
errors: {type: tagStatus, success: [TAG_OK], default: DRIVER, defaulted: [TAG_BAD]}
functions:
  tagGetProps:
    params:
      props: {direction: out, fill: {stype: TAG_STRUCTURE_TYPE_PROPS}}
"""


def fill_dir(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "specs"
    (d / "tag").mkdir(parents=True)
    (d / "core.yaml").write_text(CORE_TEXT, encoding="utf-8")
    (d / "tag" / "props.yaml").write_text(text, encoding="utf-8")
    return d


def test_fill_binds_the_members_values(tmp_path: Path) -> None:
    """``fill:`` (issue 29 item 4): an out struct's type tag, set by the wrapper; its value the enum constant's."""
    result = compile_specs(fill_dir(tmp_path, FILL_SPEC))
    (lib,) = [b for b in result.libraries if b.spec.vendor.value == "tag"]
    (props,) = [p for f in lib.functions if f.public == "tagGetProps" for p in f.params]
    assert (props.role.value, props.fill) == ("out_struct", (("stype", 5),))
    init = result.files["ironaccelerator/backends/tag/props/__init__.py"]
    assert "_props = _new(_T0, {'stype': 5})" in init, init


@pytest.mark.parametrize("old, new, message", [
    ("fill: {stype: TAG_STRUCTURE_TYPE_PROPS}", "fill: {stype: TAG_STRUCTURE_TYPE_PROP}",
     "fill: 'TAG_STRUCTURE_TYPE_PROP' is not a value of the enum of member 'stype' (did you mean "
     "'TAG_STRUCTURE_TYPE_PROPS'?)"),
    ("fill: {stype: TAG_STRUCTURE_TYPE_PROPS}", "fill: {stype: TAG_COLOR_RED}",
     "fill: 'TAG_COLOR_RED' is not a value of the enum of member 'stype'"),
    ("fill: {stype: TAG_STRUCTURE_TYPE_PROPS}", "fill: {sType: TAG_STRUCTURE_TYPE_PROPS}",
     "fill: 'tagProps' has no member 'sType' (did you mean 'stype'?)"),
    ("{direction: out, fill:", "{direction: inout, fill:",
     "fill: parameter 'props' of 'tagGetProps' is not a struct the function fills (tagProps *, bound as 'inout')"),
    ("  tagGetProps:\n", "  tagSetProps:\n",
     "fill: parameter 'props' of 'tagSetProps' is not a struct the function fills"),
])
def test_fill_mistakes_are_located_errors(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert FILL_SPEC.count(old) == 1
    text = FILL_SPEC.replace(old, new)
    if "tagSetProps" in new:
        text = text.replace("direction: out, ", "")
    with pytest.raises(UserError) as info:
        compile_specs(fill_dir(tmp_path, text))
    got = [f"{d.location.file}:{d.location.line}: {d.message}" for d in info.value.diagnostics]
    assert any(message in g and g.startswith("specs/tag/props.yaml:") for g in got), got
