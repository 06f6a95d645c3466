"""Spec errors: every problem is reported as ``<spec>:<line>:<col>: message``, never as a traceback.

Most cases run the compiler in process (:func:`ironaccelerator_gen.pipeline.compile_specs`) on copies
of the real specs edited in ``tmp_path``; a few run the CLI to check the exit status (2), stderr and
that a failed run writes nothing.  The loader is also fuzzed with hypothesis.
"""

from __future__ import annotations

import copy
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ironaccelerator_gen import sdk
from ironaccelerator_gen.diagnostics import Diagnostic, UserError
from ironaccelerator_gen.pipeline import compile_specs
from ironaccelerator_gen.spec import LibrarySpec, load_core, load_library

from conftest import core_text, within

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
CORE_TEXT = core_text()  # with the test backend kinds (GOLDEN, TEST)
NVRTC_TEXT = (SPECS / "cuda" / "nvrtc.yaml").read_text(encoding="utf-8")
DRIVER_TEXT = (SPECS / "cuda" / "driver.yaml").read_text(encoding="utf-8")

NVRTC = "specs/cuda/nvrtc.yaml"  # how diagnostics name the copies made by make_specs
DRIVER = "specs/cuda/driver.yaml"
CORE = "specs/core.yaml"

needs_cuda = pytest.mark.skipif(sdk.find("cuda") is None, reason="no CUDA toolkit headers (cuda.h)")
needs_nvrtc = pytest.mark.skipif(sdk.find("nvrtc") is None, reason="no NVRTC headers (nvrtc.h)")
LOCATED = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+):(?P<col>\d+): (?P<message>.+)$")


# ----------------------------------------------------------------------- helpers


def edit(text: str, old: str, new: str) -> str:
    """``text`` with the one occurrence of ``old`` replaced (the test fails if the spec changed)."""
    assert text.count(old) == 1, f"expected exactly one {old!r} in the spec"
    return text.replace(old, new)


def pos(text: str, needle: str, offset: int = 0) -> tuple[int, int]:
    """1-based (line, col) of the unique ``needle`` in ``text``, plus ``offset`` characters."""
    assert text.count(needle) == 1, f"expected exactly one {needle!r}"
    i = text.index(needle) + offset
    return text.count("\n", 0, i) + 1, i - (text.rfind("\n", 0, i) + 1) + 1


def make_specs(tmp_path: Path, nvrtc: str | None = NVRTC_TEXT, driver: str | None = None,
               core: str = CORE_TEXT) -> Path:
    """A spec directory ``tmp_path/specs`` with the given texts (None: that spec is left out)."""
    d = tmp_path / "specs"
    (d / "cuda").mkdir(parents=True)
    (d / "core.yaml").write_text(core, encoding="utf-8")
    if nvrtc is not None:
        (d / "cuda" / "nvrtc.yaml").write_text(nvrtc, encoding="utf-8")
    if driver is not None:
        (d / "cuda" / "driver.yaml").write_text(driver, encoding="utf-8")
    return d


def errors_of(spec_dir: Path) -> list[Diagnostic]:
    with pytest.raises(UserError) as info:
        compile_specs(spec_dir)
    assert info.value.diagnostics, "a UserError must carry at least one diagnostic"
    return list(info.value.diagnostics)


def the_error(diags: list[Diagnostic], contains: str) -> Diagnostic:
    found = [d for d in diags if contains in d.message]
    assert len(found) == 1, f"expected one diagnostic containing {contains!r}, got:\n" + "\n".join(map(str, diags))
    return found[0]


def assert_at(d: Diagnostic, file: str, line_col: tuple[int, int]) -> None:
    assert (d.location.file, d.location.line, d.location.col) == (file, *line_col), str(d)
    assert str(d).startswith(f"{file}:{line_col[0]}:{line_col[1]}: ")


def run_cli(spec_dir: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``generate --specs <name> --out <out>`` run beside the spec directory (so messages name ``<name>/...``)."""
    return subprocess.run([sys.executable, "-m", "ironaccelerator_gen", "generate", "--specs", spec_dir.name,
                           "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=120, cwd=spec_dir.parent)


def assert_user_error(proc: subprocess.CompletedProcess[str], file: str) -> list[re.Match[str]]:
    """Exit status 2, no traceback, and every diagnostic line located in ``file``; returns the matches."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert lines and re.fullmatch(r"ironaccel-gen: \d+ error\(s\)", lines[-1]), proc.stderr
    matches = [LOCATED.match(line) for line in lines[:-1]]
    assert all(matches), f"unlocated diagnostic line in:\n{proc.stderr}"
    assert {m["file"] for m in matches if m} == {file}, proc.stderr
    assert all(int(m["line"]) >= 1 and int(m["col"]) >= 1 for m in matches if m)
    return [m for m in matches if m]


def snapshot(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


# ------------------------------------------------------------- spec-shape errors
# (found by the loader; no header is parsed)


def test_yaml_syntax_error(tmp_path: Path) -> None:
    text = edit(NVRTC_TEXT, "\nlibrary: nvrtc\n", "\n  library: nvrtc\n")
    d = the_error(errors_of(make_specs(tmp_path, text)), "YAML syntax error")
    assert d.message == "YAML syntax error: mapping values are not allowed here"
    assert_at(d, NVRTC, pos(text, "  library: nvrtc", len("  library")))  # at the ':'


def test_yaml_syntax_error_in_core(tmp_path: Path) -> None:
    core = edit(CORE_TEXT, "    doc: No device", "    doc: [No device")
    d = the_error(errors_of(make_specs(tmp_path, core=core)), "YAML syntax error")
    assert d.message == "YAML syntax error: while parsing a flow sequence expected ',' or ']', but got ':'"
    assert_at(d, CORE, pos(core, "  NOT_READY:", len("  NOT_READY")))  # the list runs on to the next ':'


def test_disallowed_character_is_located(tmp_path: Path) -> None:
    text = edit(NVRTC_TEXT, "backend: CUDA", "backend: CU\x07DA")
    d = the_error(errors_of(make_specs(tmp_path, text)), "YAML error")
    assert d.message == "YAML error: character U+0007 is not allowed"
    assert_at(d, NVRTC, pos(text, "\x07"))


def test_unknown_top_level_key_suggests(tmp_path: Path) -> None:
    text = edit(NVRTC_TEXT, "headers: [nvrtc.h]", "header: [nvrtc.h]")
    diags = errors_of(make_specs(tmp_path, text))
    d = the_error(diags, "unknown key")
    assert d.message == "unknown key 'header' in library spec (did you mean 'headers'?)"
    assert_at(d, NVRTC, pos(text, "header: [nvrtc.h]"))
    assert_at(the_error(diags, "missing required key 'headers'"), NVRTC, (2, 1))  # the mapping's start


def test_unknown_nested_key_suggests(tmp_path: Path) -> None:
    text = edit(NVRTC_TEXT, "name: {direction: in, nullable: true}", "name: {direction: in, nulable: true}")
    d = the_error(errors_of(make_specs(tmp_path, text)), "unknown key")
    assert d.message == ("unknown key 'nulable' in parameter 'name' of nvrtcCreateProgram "
                         "(did you mean 'nullable'?)")
    assert_at(d, NVRTC, pos(text, "nulable"))


def test_unknown_key_without_close_match_lists_the_keys(tmp_path: Path) -> None:
    text = NVRTC_TEXT + "frobnicate: 1\n"
    d = the_error(errors_of(make_specs(tmp_path, text)), "unknown key")
    assert d.message.startswith("unknown key 'frobnicate' in library spec; expected one of: vendor, library,")
    assert_at(d, NVRTC, pos(text, "frobnicate"))


@pytest.mark.parametrize("old, new, needle, message", [
    ("headers: [nvrtc.h]", "headers: 5", "5\n",
     "header '5' is not valid: expected a header file name like 'cuda.h'"),
    ("headers: [nvrtc.h]", "headers: {nvrtc.h: 1}", "{nvrtc.h",
     "headers must be a list, got a mapping"),
    ("vendor: cuda", "vendor: [cuda]", "[cuda]", "vendor must be a string, got a list"),
    ("vendor: cuda", "vendor:", ("vendor:", 7), "vendor must be a string, got nothing (null)"),  # the empty value
    ("nullable: true}\n      includeNames", "nullable: maybe}\n      includeNames", "maybe",
     "nullable must be true or false, got str 'maybe'"),
    ("functions:\n", "functions: [nvrtcVersion]\nfunctionz:\n", "[nvrtcVersion]",
     "expected a mapping of function, got a list"),
    ("prog: inout", "prog: {string: {capacity: lots}}", "lots", "capacity must be an integer, got str 'lots'"),
    ("prog: inout", "prog: {string: {capacity: 0}}", "0}}", "capacity 0 must be between 1 and 16777216"),
    ("  nvrtcGetSupportedArchs:\n", "  nvrtcGetSupportedArchs:\n    since: soon\n", "soon",
     "since 'soon' is not a version like '12.0'"),
], ids=["headers-int", "headers-mapping", "vendor-list", "vendor-null", "bool", "functions-list", "capacity-str",
        "capacity-range", "since"])
def test_wrong_type(tmp_path: Path, old: str, new: str, needle: str | tuple[str, int], message: str) -> None:
    text = edit(NVRTC_TEXT, old, new)
    diags = errors_of(make_specs(tmp_path, text))
    d = the_error(diags, message)
    assert d.message == message
    assert_at(d, NVRTC, pos(text, needle) if isinstance(needle, str) else pos(text, *needle))
    if old.startswith("headers"):  # one problem, one message
        assert len(diags) == 1, "\n".join(map(str, diags))


def test_bad_direction_suggests(tmp_path: Path) -> None:
    text = edit(DRIVER_TEXT, "\nfunctions:\n", "\nfunctions:\n  cuMemAlloc:\n    params:\n      dptr: outt\n")
    d = the_error(errors_of(make_specs(tmp_path, nvrtc=None, driver=text)), "bad direction")
    assert d.message == ("bad direction 'outt' for parameter 'dptr' (did you mean 'out'?); "
                         "expected one of: in, out, inout")
    assert_at(d, DRIVER, pos(text, "outt"))


def test_bad_direction_long_form(tmp_path: Path) -> None:
    text = edit(NVRTC_TEXT, "name: {direction: in,", "name: {direction: sideways,")
    d = the_error(errors_of(make_specs(tmp_path, text)), "bad direction")
    assert d.message == "bad direction 'sideways' for parameter 'name'; expected one of: in, out, inout"
    assert_at(d, NVRTC, pos(text, "sideways"))


def test_hostile_text_in_a_message_stays_on_one_line(tmp_path: Path) -> None:
    """A key or value with a newline is quoted (repr) in the message: one diagnostic, one line."""
    text = NVRTC_TEXT.replace("prog: inout", 'prog: "out\\nspecs/core.yaml:1:1: forged"') \
        + '"x\\nspecs/core.yaml:1:1: forged": 1\n'
    diags = errors_of(make_specs(tmp_path, text))
    assert len(diags) == 2
    assert all("\n" not in str(d) for d in diags), diags


def with_sdk(text: str, value: str) -> str:
    """``text`` with its ``sdk:`` block replaced by ``sdk: <value>`` (a reference to a kind, or a bad value)."""
    new, n = re.subn(r"^sdk:\n(?:[ #].*\n|\n)*?(?=^[a-z])", f"sdk: {value}\n", text, count=1, flags=re.M)
    assert n == 1 and f"sdk: {value}\n" in new
    return new


def test_several_problems_in_one_spec_are_all_reported(tmp_path: Path) -> None:
    text = edit(NVRTC_TEXT, "headers: [nvrtc.h]", "headers: [nvrtc.h]\nheaderz: 1")
    text = edit(text, "prog: inout", "prog: outt")
    text = with_sdk(text, "5x")
    diags = errors_of(make_specs(tmp_path, text))
    assert len(diags) == 3, diags
    assert_at(the_error(diags, "headerz"), NVRTC, pos(text, "headerz"))
    assert_at(the_error(diags, "outt"), NVRTC, pos(text, "outt"))
    assert_at(the_error(diags, "sdk '5x'"), NVRTC, pos(text, "5x"))


def test_problems_in_several_specs_are_all_reported(tmp_path: Path) -> None:
    nvrtc = edit(NVRTC_TEXT, "prog: inout", "prog: outt")
    driver = edit(DRIVER_TEXT, "version_macro: CUDA_VERSION", "version_macro: CUDA_VERSION\nversion_macrp: 1")
    diags = errors_of(make_specs(tmp_path, nvrtc, driver))
    assert {d.location.file for d in diags} == {NVRTC, DRIVER}
    assert_at(the_error(diags, "outt"), NVRTC, pos(nvrtc, "outt"))
    assert_at(the_error(diags, "version_macrp"), DRIVER, pos(driver, "version_macrp"))


def test_empty_and_non_mapping_specs(tmp_path: Path) -> None:
    for text, message in (("", "the spec is empty"), ("# only a comment\n", "the spec is empty"),
                          ("- a\n- b\n", "expected a library spec (key: value), got a list")):
        with pytest.raises(UserError) as info:
            load_library(Path("x.yaml"), NVRTC, text=text)
        assert message in str(info.value)
        assert all(d.location.line >= 1 for d in info.value.diagnostics)


def test_deep_nesting_is_a_located_error_not_a_recursion_error() -> None:
    for text in ("[" * 20000, "a: " + "{a: " * 5000, "- " * 5000 + "x"):
        with pytest.raises(UserError) as info:
            load_library(Path("x.yaml"), NVRTC, text=text)
        assert str(info.value).startswith(f"{NVRTC}:")


def test_core_errors(tmp_path: Path) -> None:
    core = edit(CORE_TEXT, "  OUT_OF_MEMORY:", "  out_of_memory:")
    core = edit(core, "  UNKNOWN:\n", "  LIBRARY_NOT_FOUNDD: {value: 99, doc: x}\n  UNKNOWN:\n")
    core = edit(core, "  LIBRARY_NOT_FOUND:\n", "  LIBRARY_NOT_FOUND_:\n")
    diags = errors_of(make_specs(tmp_path, core=core))
    assert {d.location.file for d in diags} == {CORE}
    assert_at(the_error(diags, "'out_of_memory' must be UPPER_CASE"), CORE, pos(core, "out_of_memory"))
    # the generated run-time raises LIBRARY_NOT_FOUND: a core spec without it is an error
    assert_at(the_error(diags, "must define LIBRARY_NOT_FOUND"), CORE, pos(core, "  out_of_memory", 2))


# ErrorKind is public: its integers are part of the API (pickles, logs, other processes' Errors)
PUBLISHED_ERROR_KINDS = {"OUT_OF_MEMORY": 1, "INVALID_VALUE": 2, "INVALID_HANDLE": 3, "NOT_INITIALIZED": 4,
                         "NO_DEVICE": 5, "NOT_READY": 6, "UNSUPPORTED": 7, "LAUNCH_FAILED": 8, "COMPILE_FAILED": 9,
                         "LIBRARY_NOT_FOUND": 10, "SYMBOL_NOT_FOUND": 11, "DRIVER": 12, "UNKNOWN": 13}


def test_error_kind_values_are_the_specs_and_never_change() -> None:
    """Issue 11: the values came from the template's loop order, so inserting a kind renumbered the enum."""
    import ironaccelerator as ia

    core = load_core(SPECS / "core.yaml", "specs/core.yaml")
    declared = {k.name.value: k.value for k in core.error_kinds}
    assert {k: v for k, v in declared.items() if k in PUBLISHED_ERROR_KINDS} == PUBLISHED_ERROR_KINDS
    assert {k.name: k.value for k in ia.ErrorKind} == declared  # the generated enum is the spec's


def test_a_kind_inserted_first_renumbers_nothing(tmp_path: Path) -> None:
    core = edit(CORE_TEXT, "\nerror_kinds:\n", "\nerror_kinds:\n  ALPHA:\n    value: 14\n    doc: New.\n")
    spec = load_core(tmp_path / "unused.yaml", CORE, text=core)
    values = {k.name.value: k.value for k in spec.error_kinds}
    assert values["ALPHA"] == 14 and {k: values[k] for k in PUBLISHED_ERROR_KINDS} == PUBLISHED_ERROR_KINDS


def test_error_kind_values_must_be_given_and_distinct(tmp_path: Path) -> None:
    core = edit(CORE_TEXT, "  NO_DEVICE:\n    value: 5\n", "  NO_DEVICE:\n    value: 3\n")
    core = edit(core, "  NOT_READY:\n    value: 6\n", "  NOT_READY:\n")
    core = edit(core, "\nerror_kinds:\n", "\nerror_kinds:\n  OLD_STYLE: A plain description.\n")
    diags = errors_of(make_specs(tmp_path, core=core))
    assert {d.location.file for d in diags} == {CORE}
    d = the_error(diags, "value 3 of NO_DEVICE is already INVALID_HANDLE's")
    assert d.message.endswith("the next free value is 14") and "(declared at " in d.message
    assert_at(d, CORE, pos(core, "3\n    doc: No device"))
    d = the_error(diags, "NOT_READY")
    assert "value" in d.message
    d = the_error(diags, "error kind OLD_STYLE needs 'value'")
    assert_at(d, CORE, pos(core, "A plain description."))


def loader_errors(text: str, display: str = DRIVER) -> list[Diagnostic]:
    """Every diagnostic the spec loader gives for ``text`` (no header parsed)."""
    with pytest.raises(UserError) as info:
        load_library(Path("driver.yaml"), display, text=text)
    return list(info.value.diagnostics)


def test_resolver_kind_unknown_suggests() -> None:
    text = edit(DRIVER_TEXT, "kind: proc_address", "kind: proc_adress")
    d = the_error(loader_errors(text), "resolver kind")
    assert d.message == ("'proc_adress' is not a resolver kind (did you mean 'proc_address'?); "
                         "expected one of: dlsym, proc_address, lookup, table, objc")
    assert_at(d, DRIVER, pos(text, "proc_adress"))


def test_resolver_dlsym_takes_no_proc_address_keys() -> None:
    text = edit(DRIVER_TEXT, "kind: proc_address", "kind: dlsym")
    diags = loader_errors(text)
    d = the_error(diags, "'function' goes with")
    assert d.message == "'function' goes with resolver kind proc_address, not dlsym"
    assert_at(d, DRIVER, pos(text, "function: cuGetProcAddress", len("function: ")))
    assert len([x for x in diags if "goes with resolver kind" in x.message]) == 3  # function and both flags


def test_resolver_proc_address_needs_function_and_default_flag() -> None:
    text = edit(DRIVER_TEXT, "  function: cuGetProcAddress\n", "")
    d = the_error(loader_errors(text), "needs 'function'")
    assert d.message == "resolver kind proc_address needs 'function'"
    assert_at(d, DRIVER, pos(text, "  kind: proc_address", 2))  # the resolver mapping's start


TABLE_CASE = ROOT / "tests" / "golden" / "resolver_table"
TABLE_TEXT = (TABLE_CASE / "resolver_table.yaml").read_text(encoding="utf-8")
TABLE = "specs/resolver_table.yaml"


def table_specs(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "specs"
    d.mkdir(parents=True)
    (d / "core.yaml").write_text(CORE_TEXT, encoding="utf-8")
    (d / "resolver_table.yaml").write_text(text, encoding="utf-8")
    return d


def table_errors(tmp_path: Path, text: str) -> list[Diagnostic]:
    """The diagnostics of the golden resolver_table case's spec, edited, against its header."""
    with pytest.raises(UserError) as info:
        compile_specs(table_specs(tmp_path, text), {"resolver_table": str(TABLE_CASE / "include")}, base=tmp_path)
    return list(info.value.diagnostics)


def table_file(tmp_path: Path, text: str, name: str) -> str:
    """One generated file of the golden resolver_table case's library, its spec edited."""
    result = compile_specs(table_specs(tmp_path, text), {"resolver_table": str(TABLE_CASE / "include")},
                           base=tmp_path)
    out: str = result.files[f"ironaccelerator/backends/test/resolver_table/{name}"]
    return out


def test_resolver_table_is_implemented_and_loads() -> None:
    spec = load_lib(TABLE_TEXT)
    assert spec.table is not None and spec.resolver is None
    t = spec.table
    assert (t.provider.value, t.interface.value, t.table.value, t.version.value, t.major, t.minor) == (
        "tbGetProviders", "TbInterface_t", "v1", "apiVersion", 2, 1)
    assert [(f.value, x.value) for f, x in t.entries] == [("tbCallCount", "calls")]
    assert [(m.value, v) for m, v in t.match] == [("backendId", 23)]
    assert [(f.value, v) for f, v in t.since] == [("deviceScale", 4)]


def test_resolver_table_unknown_key_suggests() -> None:
    text = edit(TABLE_TEXT, "  interface: TbInterface_t", "  interfase: TbInterface_t")
    diags = loader_errors(text, TABLE)
    d = the_error(diags, "unknown key 'interfase'")
    assert "did you mean 'interface'?" in d.message
    assert_at(d, TABLE, pos(text, "interfase"))
    d = the_error(diags, "needs 'interface'")
    assert d.message == "resolver kind table needs 'interface'"


def test_resolver_table_keys_belong_to_their_kind() -> None:
    text = edit(TABLE_TEXT, "  kind: table", "  kind: proc_address")
    d = the_error(loader_errors(text, TABLE), "'provider' goes with")
    assert d.message == "'provider' goes with resolver kind table, not proc_address"
    assert_at(d, TABLE, pos(text, "provider: tbGetProviders", len("provider: ")))


def test_resolver_table_require_needs_major_and_minor() -> None:
    text = edit(TABLE_TEXT, "require: {major: 2, minor: 1}", "require: {major: 2}")
    d = the_error(loader_errors(text, TABLE), "'minor'")
    assert d.message == "missing required key 'minor' in require"


def test_resolver_table_missing_provider_suggests(tmp_path: Path) -> None:
    text = edit(TABLE_TEXT, "provider: tbGetProviders", "provider: tbGetProvider")
    d = the_error(table_errors(tmp_path, text), "provider")
    assert d.message.startswith("provider 'tbGetProvider' is not a bound function of resolver_table.h")
    assert "did you mean 'tbGetProviders'?" in d.message
    assert_at(d, TABLE, pos(text, "provider: tbGetProvider", len("provider: ")))


def test_resolver_table_provider_shape(tmp_path: Path) -> None:
    text = edit(TABLE_TEXT, "provider: tbGetProviders", "provider: TbDevice_add")
    d = the_error(table_errors(tmp_path, text), "does not look like a provider")
    assert_at(d, TABLE, pos(text, "provider: TbDevice_add", len("provider: ")))


def test_resolver_table_unknown_members_suggest(tmp_path: Path) -> None:
    text = edit(TABLE_TEXT, "table: v1", "table: v2")
    text = edit(text, "version: apiVersion", "version: apiVersoin")
    diags = table_errors(tmp_path, text)
    d = the_error(diags, "table 'v2'")
    assert d.message.startswith("table 'v2': 'TbInterface_t' has no member 'v2'")
    assert_at(d, TABLE, pos(text, "table: v2", len("table: ")))
    d = the_error(diags, "version 'apiVersoin'")
    assert "did you mean 'apiVersion'?" in d.message
    text = edit(TABLE_TEXT, "version: apiVersion", "version: backendId")
    d = the_error(table_errors(tmp_path / "2", text), "version 'backendId'")
    assert "not a struct with integer members 'major' and 'minor'" in d.message


def test_resolver_table_function_without_a_field(tmp_path: Path) -> None:
    """tbCallCount has no default field (tbCallCount has no '_'); an explicit entry naming no field."""
    text = edit(TABLE_TEXT, "  entries: {tbCallCount: calls}    # where the default rule does not fit\n", "")
    d = the_error(table_errors(tmp_path, text), "tbCallCount")
    assert d.message.startswith("table 'v1' (TbTable_t) has no default field (its name has no '_') for tbCallCount")
    assert "resolver_table.h:" in d.message and "resolver.entries" in d.message
    assert_at(d, TABLE, pos(text, "table: v1", len("table: ")))
    text = edit(TABLE_TEXT, "{tbCallCount: calls}", "{tbCallCount: cals}")
    d = the_error(table_errors(tmp_path / "2", text), "entry 'cals'")
    assert "did you mean 'calls'?" in d.message
    assert_at(d, TABLE, pos(text, "cals"))
    text = edit(TABLE_TEXT, "prefix: Tb", "prefix: Xx")  # TbDevice_add -> tbDeviceAdd: no such field
    d = the_error(table_errors(tmp_path / "3", text), "'tbDeviceAdd'")
    assert "for TbDevice_add" in d.message and "did you mean 'deviceAdd'?" in d.message


def test_resolver_table_signature_mismatch(tmp_path: Path) -> None:
    text = edit(TABLE_TEXT, "{tbCallCount: calls}", "{tbCallCount: calls, TbDevice_reset: deviceGetVersion}")
    d = the_error(table_errors(tmp_path, text), "does not match")
    assert d.message.startswith("table field 'deviceGetVersion' does not match TbDevice_reset")
    assert "tbStatus TbDevice_reset(void)" in d.message
    assert_at(d, TABLE, pos(text, "TbDevice_reset: deviceGetVersion", len("TbDevice_reset: ")))
    text = edit(TABLE_TEXT, "{tbCallCount: calls}", "{tbCallCount: calls, tbGetProvider: calls}")
    d = the_error(table_errors(tmp_path / "2", text), "entries:")
    assert "did you mean 'tbGetProviders'?" in d.message


def test_resolver_table_match_members(tmp_path: Path) -> None:
    """match: integer members of the provider (paths checked, suggested), values their type holds."""
    text = edit(TABLE_TEXT, "match: {backendId: 23}", "match: {backendID: 23, apiVersion.patch: 1}")
    diags = table_errors(tmp_path, text)
    d = the_error(diags, "match 'backendID'")
    assert d.message.startswith("match 'backendID': 'TbInterface_t' has no member 'backendID'")
    assert "did you mean 'backendId'?" in d.message
    assert_at(d, TABLE, pos(text, "backendID"))
    assert not [x for x in diags if "apiVersion.patch" in x.message], diags  # a path to a nested integer: fine
    text = edit(TABLE_TEXT, "match: {backendId: 23}", "match: {providerName: 23}")
    d = the_error(table_errors(tmp_path / "2", text), "match 'providerName'")
    assert d.message == "match 'providerName' is a 'const char *', not an integer member"
    text = edit(TABLE_TEXT, "match: {backendId: 23}", "match: {backendId: -1}")
    d = the_error(table_errors(tmp_path / "3", text), "match 'backendId'")
    assert d.message == "match 'backendId': -1 is not a value of its type 'uint32_t' (0..4294967295)"
    text = edit(TABLE_TEXT, "match: {backendId: 23}", "match: {backendId: high}")
    d = the_error(loader_errors(text, TABLE), "match value")
    assert d.message.startswith("match value of backendId must be an integer")
    assert_at(d, TABLE, pos(text, "high"))


def test_resolver_table_since_names_table_fields(tmp_path: Path) -> None:
    text = edit(TABLE_TEXT, "since: {deviceScale: 4}", "since: {deviceScal: 4}")
    d = the_error(table_errors(tmp_path, text), "since:")
    assert d.message == "since: table 'v1' (TbTable_t) has no field 'deviceScal' (did you mean 'deviceScale'?)"
    assert_at(d, TABLE, pos(text, "deviceScal"))
    text = edit(TABLE_TEXT, "since: {deviceScale: 4}", "since: {deviceScale: -4}")
    d = the_error(loader_errors(text, TABLE), "since minor")
    assert d.message == "since minor of deviceScale must not be negative"


def test_resolver_table_since_holds_for_every_later_field(tmp_path: Path) -> None:
    """A table grows by appending: a field declared after one added in minor N is in no older table either
    (deviceReset in 2.3 makes calls 2.3, deviceScale stays 2.4); fields before it are in every table."""
    text = edit(TABLE_TEXT, "since: {deviceScale: 4}", "since: {deviceReset: 3, deviceScale: 4}")
    binding = table_file(tmp_path, text, "_binding.py")
    since = binding[binding.index("    since={"):]
    since = since[:since.index("    },") + 6]
    assert since.splitlines()[1:] == ["        'deviceReset': 3,", "        'deviceScale': 4,", "        'calls': 3,",
                                      "    },"], since  # by function: TbDevice_reset, TbDevice_scale, tbCallCount
    trampolines = table_file(tmp_path / "2", text, "trampolines.c")
    since = trampolines[trampolines.index("ia_table_since["):]
    # by function: TbDevice_add, _getVersion, _reset, _scale, tbCallCount, tbGetProviders (the provider)
    assert [int(x.strip(" ,")) for x in since[:since.index("};")].splitlines()[1:]] == [0, 0, 3, 4, 3, 0], since


def test_resolver_kind_is_required() -> None:
    text = edit(DRIVER_TEXT, "  kind: proc_address\n", "")
    d = the_error(loader_errors(text), "'kind'")
    assert "missing required key 'kind'" in d.message


def test_resolver_function_must_be_a_bound_resolver(tmp_path: Path) -> None:
    """Checked against the header: a bound function of the resolver's shape (needs cuda.h)."""
    if sdk.find("cuda") is None:
        pytest.skip("no CUDA toolkit headers (cuda.h)")
    text = edit(DRIVER_TEXT, "function: cuGetProcAddress", "function: cuGetProcAdress")
    d = the_error(errors_of(make_specs(tmp_path, driver=text)), "resolver function")
    assert d.message.startswith("resolver function 'cuGetProcAdress' is not a bound function of cuda.h")
    assert "did you mean 'cuGetProcAddress'" in d.message
    assert_at(d, DRIVER, pos(text, "cuGetProcAdress"))
    text = edit(DRIVER_TEXT, "function: cuGetProcAddress", "function: cuInit")
    d = the_error(errors_of(make_specs(tmp_path / "2", driver=text)), "does not look like a resolver")
    assert_at(d, DRIVER, pos(text, "function: cuInit", len("function: ")))


def test_core_description_must_be_printable(tmp_path: Path) -> None:
    core = edit(CORE_TEXT, "    doc: No device of this backend is present.", '    doc: "No\\0device"')
    d = the_error(errors_of(make_specs(tmp_path, core=core)), "printable")
    assert_at(d, CORE, pos(core, '"No\\0device"'))


def test_spec_file_name_that_would_break_generated_comments(tmp_path: Path) -> None:
    d = make_specs(tmp_path, nvrtc=None)
    (d / "cuda" / 'evil"""\nimport os.yaml').write_text(NVRTC_TEXT, encoding="utf-8")
    diags = errors_of(d)
    assert len(diags) == 1 and "spec's path may only contain" in diags[0].message
    assert "\n" not in str(diags[0])


# ----------------------------------------------------------- header-level errors
# (found by the binder against the real CUDA 13.0 headers)


@needs_cuda
def test_misspelled_function(tmp_path: Path) -> None:
    text = edit(DRIVER_TEXT, "\nfunctions:\n", "\nfunctions:\n  cuMemAloc:\n    params:\n      dptr: out\n")
    d = the_error(errors_of(make_specs(tmp_path, nvrtc=None, driver=text)), "cuMemAloc")
    assert d.message == "function 'cuMemAloc' is not declared in cuda.h (did you mean 'cuMemAlloc'?)"
    assert_at(d, DRIVER, pos(text, "cuMemAloc"))


@needs_cuda
def test_misspelled_parameter(tmp_path: Path) -> None:
    text = edit(DRIVER_TEXT, "      kernelParams: {direction: in, nullable: true}\n      extra:",
                "      kernelParam: {direction: in, nullable: true}\n      extra:")
    d = the_error(errors_of(make_specs(tmp_path, nvrtc=None, driver=text)), "kernelParam'")
    assert d.message == "function 'cuLaunchKernel' has no parameter 'kernelParam' (did you mean 'kernelParams'?)"
    assert_at(d, DRIVER, pos(text, "kernelParam:"))


@needs_cuda
def test_len_names_a_missing_parameter(tmp_path: Path) -> None:
    old = "  cuModuleLoadDataEx:\n    params:\n      options: {direction: in, len: numOptions,"
    text = edit(DRIVER_TEXT, old, old.replace("len: numOptions", "len: numOpts"))
    d = the_error(errors_of(make_specs(tmp_path, nvrtc=None, driver=text)), "numOpts")
    assert d.message == "len: function 'cuModuleLoadDataEx' has no parameter 'numOpts' (did you mean 'numOptions'?)"
    assert_at(d, DRIVER, pos(text, "numOpts"))


@needs_cuda
@pytest.mark.parametrize("code, old, new", [
    ("CUDA_ERROR_KEY_ROTATION", ", CUDA_ERROR_KEY_ROTATION]", "]"),  # from errors.defaulted
    ("CUDA_ERROR_ASSERT", " CUDA_ERROR_ASSERT,", ""),  # from errors.kinds.LAUNCH_FAILED
])
def test_unmapped_error_code(tmp_path: Path, code: str, old: str, new: str) -> None:
    text = edit(DRIVER_TEXT, old, new)
    diags = errors_of(make_specs(tmp_path, nvrtc=None, driver=text))
    assert len(diags) == 1, diags
    d = diags[0]
    assert re.fullmatch(rf"error code '{code}' \(\d+\) of CUresult is neither mapped in errors.kinds nor listed "
                        r"in errors.defaulted or errors.success", d.message), d.message
    assert_at(d, DRIVER, pos(text, "type: CUresult", len("type: ")))


@needs_cuda
def test_error_kind_not_in_core(tmp_path: Path) -> None:
    text = edit(DRIVER_TEXT, "    UNKNOWN: [CUDA_ERROR_UNKNOWN]", "    UNKNWON: [CUDA_ERROR_UNKNOWN]")
    text = edit(text, "default: DRIVER", "default: DRIVERS")
    diags = errors_of(make_specs(tmp_path, nvrtc=None, driver=text))
    d = the_error(diags, "UNKNWON")
    assert d.message == "'UNKNWON' is not an error kind of specs/core.yaml (did you mean 'UNKNOWN'?)"
    assert_at(d, DRIVER, pos(text, "UNKNWON"))
    d = the_error(diags, "DRIVERS")
    assert d.message == "'DRIVERS' is not an error kind of specs/core.yaml (did you mean 'DRIVER'?)"
    assert_at(d, DRIVER, pos(text, "DRIVERS"))


@needs_cuda
def test_error_kind_removed_from_core(tmp_path: Path) -> None:
    core = edit(CORE_TEXT, "  NOT_READY:\n    value: 6\n    doc: Asynchronous work has not completed yet (a status, "
                "not a failure, where a query expects it).\n", "")
    diags = errors_of(make_specs(tmp_path, nvrtc=None, driver=DRIVER_TEXT, core=core))
    d = the_error(diags, "NOT_READY")
    assert d.message == "'NOT_READY' is not an error kind of specs/core.yaml"
    assert_at(d, DRIVER, pos(DRIVER_TEXT, "    NOT_READY:", 4))


@needs_cuda
def test_several_header_level_errors_in_one_run(tmp_path: Path) -> None:
    text = edit(DRIVER_TEXT, "\nfunctions:\n", "\nfunctions:\n  cuMemAloc: {}\n  cuCtxCreat: {}\n")
    text = edit(text, "      kernelParams: {direction: in, nullable: true}\n      extra:",
                "      kernelParam: {direction: in, nullable: true}\n      extra:")
    text = edit(text, ", CUDA_ERROR_KEY_ROTATION]", "]")
    diags = errors_of(make_specs(tmp_path, nvrtc=None, driver=text))
    assert len(diags) >= 4, diags
    assert all(d.location.file == DRIVER for d in diags)
    assert_at(the_error(diags, "'cuMemAloc'"), DRIVER, pos(text, "cuMemAloc"))
    assert_at(the_error(diags, "'cuCtxCreat'"), DRIVER, pos(text, "cuCtxCreat"))
    assert_at(the_error(diags, "'kernelParam'"), DRIVER, pos(text, "kernelParam:"))
    the_error(diags, "CUDA_ERROR_KEY_ROTATION")


@needs_nvrtc
def test_nvrtc_misspellings(tmp_path: Path) -> None:
    text = edit(NVRTC_TEXT, "      prog: inout", "      progg: inout")
    text = edit(text, "size_function: nvrtcGetPTXSize", "size_function: nvrtcGetPTXSiz")
    text = edit(text, "error_log: nvrtcGetProgramLog\n", "error_log: nvrtcGetProgramLogg\n")
    text = edit(text, '  include: ["nvrtc*"]', '  include: ["nvrtc*", "nvrtcNope*"]')
    diags = errors_of(make_specs(tmp_path, text))
    assert_at(the_error(diags, "'progg'"), NVRTC, pos(text, "progg"))
    assert the_error(diags, "'progg'").message == \
        "function 'nvrtcDestroyProgram' has no parameter 'progg' (did you mean 'prog'?)"
    assert_at(the_error(diags, "nvrtcGetPTXSiz'"), NVRTC, pos(text, "nvrtcGetPTXSiz}"))
    assert_at(the_error(diags, "nvrtcGetProgramLogg"), NVRTC, pos(text, "nvrtcGetProgramLogg"))
    assert_at(the_error(diags, "nvrtcNope*"), NVRTC, pos(text, '"nvrtcNope*"'))


# ------------------------------------------------ status handles: errors.codes and errors.mask

MASK_TEXT = (ROOT / "tests" / "golden" / "status_mask" / "status_mask.yaml").read_text(encoding="utf-8")
MASK = "specs/status_mask.yaml"


def mask_specs(tmp_path: Path, text: str) -> Path:
    """The golden status_mask case's spec (declared: no header), edited, beside core.yaml."""
    d = tmp_path / "specs"
    d.mkdir(parents=True, exist_ok=True)
    (d / "core.yaml").write_text(CORE_TEXT, encoding="utf-8")
    (d / "status_mask.yaml").write_text(text, encoding="utf-8")
    return d


def mask_errors(tmp_path: Path, text: str) -> list[Diagnostic]:
    with pytest.raises(UserError) as info:
        compile_specs(mask_specs(tmp_path, text), base=tmp_path)
    return list(info.value.diagnostics)


def test_status_mask_spec_compiles() -> None:
    spec = load_lib(MASK_TEXT)
    assert (spec.errors.type.value, spec.errors.codes and spec.errors.codes.value, spec.errors.mask) == (
        "SmStatus", "SmCode", 0xFFFF)


@pytest.mark.parametrize("new,message", [
    ("mask: 0", "mask must be a positive integer of at most 64 bits (ex: 0xffff)"),
    ("mask: -1", "mask must be a positive integer of at most 64 bits (ex: 0xffff)"),
    ("mask: 0x10000000000000000", "mask must be a positive integer of at most 64 bits (ex: 0xffff)"),
    ("mask: ffff", "mask must be an integer, got str 'ffff'"),
    ("mask: true", "mask must be an integer, got bool 'true'"),
    ("mask: 1.5", "mask must be an integer, got float '1.5'"),
    ("mask: [0xffff]", "mask must be an integer, got a list"),
])
def test_bad_mask_value(tmp_path: Path, new: str, message: str) -> None:
    text = edit(MASK_TEXT, "mask: 0xffff", new)
    d = the_error(mask_errors(tmp_path, text), "mask must")
    assert d.message == message
    assert_at(d, MASK, pos(text, new, len("mask: ")))


@pytest.mark.parametrize("new,message", [
    # an integer typedef, a struct, nothing: said what it is, or a close name; never the name itself
    ("SmStatus", "error codes 'SmStatus' is not an enum typedef declared in status_mask.declared.h: "
                 "it is a typedef of uint64_t"),
    ("SmVersion", "error codes 'SmVersion' is not an enum typedef declared in status_mask.declared.h: "
                  "it is a struct typedef"),
    ("SmCodes", "error codes 'SmCodes' is not an enum typedef declared in status_mask.declared.h "
                "(did you mean 'SmCode'?)"),
])
def test_codes_that_are_not_an_enum(tmp_path: Path, new: str, message: str) -> None:
    text = edit(MASK_TEXT, "codes: SmCode", f"codes: {new}")
    d = the_error(mask_errors(tmp_path, text), "error codes")
    assert d.message == message
    assert_at(d, MASK, pos(text, f"codes: {new}", len("codes: ")))


@pytest.mark.parametrize("old,new,message", [
    ("type: SmStatus", "type: SmVersion", "error type 'SmVersion' must be an integer typedef declared in "
     "status_mask.declared.h when errors.codes is given: it is a struct typedef"),
    ("type: SmStatus", "type: SmCode", "error type 'SmCode' must be an integer typedef declared in "
     "status_mask.declared.h when errors.codes is given: it is an enum typedef"),
    ("type: SmStatus", "type: SmStatu", "error type 'SmStatu' must be an integer typedef declared in "
     "status_mask.declared.h when errors.codes is given (did you mean 'SmStatus'?)"),
    # a float is no status handle (it was accepted: any builtin passed)
    ("typedef uint64_t SmStatus;", "typedef double SmStatus;", "error type 'SmStatus' must be an integer typedef "
     "declared in status_mask.declared.h when errors.codes is given: it is a typedef of double"),
])
def test_type_must_be_an_integer_typedef_when_codes_are_given(tmp_path: Path, old: str, new: str,
                                                               message: str) -> None:
    text = edit(MASK_TEXT, old, new)
    d = the_error(mask_errors(tmp_path, text), "must be an integer typedef")
    assert d.message == message
    assert_at(d, MASK, pos(text, "  type: Sm", len("  type: ")))


def test_codes_outside_the_mask(tmp_path: Path) -> None:
    """A code with bits outside the mask can never equal a masked status: refused, each named (it compiled)."""
    text = edit(MASK_TEXT, "mask: 0xffff", "mask: 0x3ff")
    diags = mask_errors(tmp_path, text)
    assert sorted(d.message for d in diags) == sorted(
        f"error code '{name}' ({value}) of SmCode has bits outside errors.mask (0x3ff): no masked status can "
        "equal it" for name, value in (("SM_ERROR_BUSY", 5000), ("SM_ERROR_LAST", 65535)))
    for d in diags:
        assert_at(d, MASK, pos(text, "codes: SmCode", len("codes: ")))
    text = edit(MASK_TEXT, "    SM_ERROR_LAST = 65535\n", "    SM_ERROR_LAST = 65535,\n    SM_ERROR_NEG = -5\n")
    text = edit(text, "defaulted: [SM_ERROR_BUSY, SM_ERROR_LAST]", "defaulted: [SM_ERROR_BUSY, SM_ERROR_LAST, SM_ERROR_NEG]")
    d = the_error(mask_errors(tmp_path / "neg", text), "bits outside")
    assert d.message.startswith("error code 'SM_ERROR_NEG' (-5) of SmCode has bits outside errors.mask (0xffff)")


def test_unmapped_code_names_the_codes_enum(tmp_path: Path) -> None:
    text = edit(MASK_TEXT, "defaulted: [SM_ERROR_BUSY, SM_ERROR_LAST]", "defaulted: [SM_ERROR_BUSY]")
    d = the_error(mask_errors(tmp_path, text), "neither mapped")
    assert d.message == ("error code 'SM_ERROR_LAST' (65535) of SmCode is neither mapped in errors.kinds nor "
                         "listed in errors.defaulted or errors.success")


def test_cli_status_mask_errors_exit_2_located(tmp_path: Path) -> None:
    """Several errors of the kind above in one run: exit 2, no traceback, each `file:line:col: message`."""
    text = edit(MASK_TEXT, "mask: 0xffff", "mask: 0xff")
    text = edit(text, "typedef uint64_t SmStatus;", "typedef float SmStatus;")
    proc = run_cli(mask_specs(tmp_path, text), tmp_path / "out")
    found = assert_user_error(proc, MASK)
    messages = [m["message"] for m in found]
    assert any("must be an integer typedef" in m and "typedef of float" in m for m in messages), messages
    assert sum("bits outside errors.mask (0xff)" in m for m in messages) == 5, messages
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------- loader: {major} and abi_major
# (the golden abi_major case: headers of version 3.1, loader names "libia_abi_major.so.{major}", libia_abi_major.so)

ABI_CASE = ROOT / "tests" / "golden" / "abi_major"
ABI_TEXT = (ABI_CASE / "abi_major.yaml").read_text(encoding="utf-8")
ABI = "specs/abi_major.yaml"


def abi_compile(tmp_path: Path, text: str) -> Any:
    d = tmp_path / "specs"
    d.mkdir(parents=True)
    (d / "core.yaml").write_text(CORE_TEXT, encoding="utf-8")
    (d / "abi_major.yaml").write_text(text, encoding="utf-8")
    return compile_specs(d, {"abi_major": str(ABI_CASE / "include")}, base=tmp_path)


def abi_errors(tmp_path: Path, text: str) -> list[Diagnostic]:
    with pytest.raises(UserError) as info:
        abi_compile(tmp_path, text)
    return list(info.value.diagnostics)


def test_loader_major_is_filled_from_the_headers_version(tmp_path: Path) -> None:
    spec = load_lib(ABI_TEXT)
    assert dict(spec.loader.names)["linux"] == ("libia_abi_major.so.{major}", "libia_abi_major.so")
    assert spec.loader.abi_major is not None and spec.loader.abi_major.encoding == (1000, 10)
    (lib,) = abi_compile(tmp_path / "3", ABI_TEXT).libraries
    assert dict(lib.library_names)["linux"] == ("libia_abi_major.so.3", "libia_abi_major.so")
    assert lib.abi_major is not None and (lib.abi_major.public, lib.abi_major.major) == ("amRuntimeGetVersion", 3)
    # the number comes from the headers: another SDK's headers, another name tried first (and major checked)
    inc = tmp_path / "inc12"
    inc.mkdir()
    header = (ABI_CASE / "include" / "abi_major.h").read_text(encoding="utf-8")
    (inc / "abi_major.h").write_text(edit(header, "#define AM_VERSION_MAJOR 3", "#define AM_VERSION_MAJOR 12"))
    d = tmp_path / "12" / "specs"
    d.mkdir(parents=True)
    (d / "core.yaml").write_text(CORE_TEXT, encoding="utf-8")
    (d / "abi_major.yaml").write_text(ABI_TEXT, encoding="utf-8")
    result = compile_specs(d, {"abi_major": str(inc)}, base=d.parent)
    binding = result.files["ironaccelerator/backends/test/abi_major/_binding.py"]
    assert "'linux': ('libia_abi_major.so.12', 'libia_abi_major.so')," in binding
    assert "abi_major=AbiMajor(function='amRuntimeGetVersion', encoding=(1000, 10), major=12)," in binding


@pytest.mark.parametrize("name", ["libia_abi_major.so.{minor}", "libia_abi_major.so.{major", "lib{}.so",
                                  "libia_abi_major.so.{MAJOR}"])
def test_loader_name_placeholder_other_than_major_is_located(name: str) -> None:
    text = edit(ABI_TEXT, '"libia_abi_major.so.{major}"', f'"{name}"')
    d = the_error(loader_errors(text, ABI), "the only placeholder")
    assert d.message == (f"library name {name!r}: the only placeholder is {{major}} (the major version of the SDK "
                         "the bindings are generated from)")
    assert_at(d, ABI, pos(text, f'"{name}"'))


@pytest.mark.parametrize("name", ["{major}", "lib ia.so.{major}"])
def test_loader_name_with_major_is_still_a_file_name(name: str) -> None:
    text = edit(ABI_TEXT, '"libia_abi_major.so.{major}"', f'"{name}"')
    d = the_error(loader_errors(text, ABI), "library name")
    assert d.message == f"library name {name!r} is not valid"
    assert_at(d, ABI, pos(text, f'"{name}"'))


def test_loader_major_needs_a_known_sdk_version(tmp_path: Path) -> None:
    text = edit(ABI_TEXT, "version_macro: [AM_VERSION_MAJOR, AM_VERSION_MINOR]\n", "")
    diags = abi_errors(tmp_path, text)
    d = the_error(diags, "needs the major version")
    assert d.message == ("{major} needs the major version of the SDK the bindings are generated from, and it is "
                         "'unknown' here: give the spec's sdk: a version: (or version_macro:)")
    assert_at(d, ABI, pos(text, '"libia_abi_major.so.{major}"'))
    text = edit(text, '"libia_abi_major.so.{major}", ', "")
    d = the_error(abi_errors(tmp_path / "2", text), "needs the major version")
    assert d.message.startswith("abi_major needs the major version")
    assert_at(d, ABI, pos(text, "{function: amRuntimeGetVersion"))


def test_abi_major_function_must_be_bound_and_give_a_version(tmp_path: Path) -> None:
    text = edit(ABI_TEXT, "function: amRuntimeGetVersion", "function: amRuntimeGetVersoin")
    d = the_error(abi_errors(tmp_path, text), "abi_major function")
    assert d.message == ("abi_major function 'amRuntimeGetVersoin' is not a bound function of abi_major.h (did you "
                         "mean 'amRuntimeGetVersion'?)")
    assert_at(d, ABI, pos(text, "amRuntimeGetVersoin"))
    for wrong in ("amAdd", "amPointerType"):
        text = edit(ABI_TEXT, "function: amRuntimeGetVersion", f"function: {wrong}")
        d = the_error(abi_errors(tmp_path / wrong, text), "cannot give")
        assert d.message == (f"'{wrong}' cannot give the library's version: expected the shape status "
                             "(integer *version)")
        assert_at(d, ABI, pos(text, f"function: {wrong}", len("function: ")))


@pytest.mark.parametrize("old, new, needle, message", [
    ("encoding: [1000, 10]", "encoding: [1000]", "[1000]", "encoding must be two positive divisors, ex. [1000, 10]"),
    ("encoding: [1000, 10]", "encoding: [0, 10]", "[0, 10]", "encoding must be two positive divisors, ex. [1000, 10]"),
    ("encoding: [1000, 10]", "encodeing: [1000, 10]", "encodeing",
     "unknown key 'encodeing' in abi_major (did you mean 'encoding'?)"),
    ("function: amRuntimeGetVersion, ", "", "{encoding", "missing required key 'function' in abi_major"),
])
def test_abi_major_shape_errors_are_located(old: str, new: str, needle: str, message: str) -> None:
    text = edit(ABI_TEXT, old, new)
    d = the_error(loader_errors(text, ABI), message.split(" (")[0].split(",")[0])
    assert d.message == message
    assert_at(d, ABI, pos(text, needle))


def test_cli_bad_loader_placeholder_exits_2_located(tmp_path: Path) -> None:
    text = edit(ABI_TEXT, '"libia_abi_major.so.{major}"', '"libia_abi_major.so.{minor}"')
    d = tmp_path / "specs"
    d.mkdir()
    (d / "core.yaml").write_text(CORE_TEXT, encoding="utf-8")
    (d / "abi_major.yaml").write_text(text, encoding="utf-8")
    proc = run_cli(d, tmp_path / "out", "--sdk", f"abi_major={ABI_CASE / 'include'}")
    (m,) = assert_user_error(proc, ABI)
    assert (int(m["line"]), int(m["col"])) == pos(text, '"libia_abi_major.so.{minor}"')
    assert "the only placeholder is {major}" in m["message"]
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------- CLI


@needs_nvrtc
def test_cli_spec_error_exit_status_and_stderr(tmp_path: Path) -> None:
    text = edit(NVRTC_TEXT, "headers: [nvrtc.h]", "header: [nvrtc.h]")
    spec_dir = make_specs(tmp_path, text)
    out = tmp_path / "out"
    proc = run_cli(spec_dir, out)
    matches = assert_user_error(proc, NVRTC)
    line, col = pos(text, "header: [nvrtc.h]")
    assert any(m.group(0) == f"{NVRTC}:{line}:{col}: unknown key 'header' in library spec (did you mean 'headers'?)"
               for m in matches), proc.stderr
    assert not out.exists() or not any(out.rglob("*")), "a failed generate wrote output"


@needs_nvrtc
def test_cli_reports_several_errors(tmp_path: Path) -> None:
    text = edit(NVRTC_TEXT, "      prog: inout", "      progg: inout")  # header-level
    text = edit(text, "size_function: nvrtcGetPTXSize", "size_function: nvrtcGetPTXSiz")
    spec_dir = make_specs(tmp_path, text)
    proc = run_cli(spec_dir, tmp_path / "out")
    matches = assert_user_error(proc, NVRTC)
    assert len(matches) >= 2
    assert proc.stderr.splitlines()[-1] == f"ironaccel-gen: {len(matches)} error(s)"
    assert {(int(m["line"]), int(m["col"])) for m in matches} >= {pos(text, "progg"), pos(text, "nvrtcGetPTXSiz}")}


@needs_nvrtc
def test_cli_yaml_error_in_core(tmp_path: Path) -> None:
    spec_dir = make_specs(tmp_path, core="error_kinds: {UNKNOWN: [x\n")
    assert_user_error(run_cli(spec_dir, tmp_path / "out"), CORE)


@needs_nvrtc
def test_failed_generate_leaves_previous_output_untouched(tmp_path: Path) -> None:
    spec_dir = make_specs(tmp_path)
    out = tmp_path / "out"
    good = run_cli(spec_dir, out)
    assert good.returncode == 0, good.stdout + good.stderr
    before = snapshot(out)
    assert any(k.endswith("nvrtc/__init__.py") for k in before)
    nvrtc = spec_dir / "cuda" / "nvrtc.yaml"
    # a header-level error: found only after the header is parsed, when rendering is one step away
    nvrtc.write_text(edit(NVRTC_TEXT, "      prog: inout", "      progg: inout"), encoding="utf-8")
    assert_user_error(run_cli(spec_dir, out), NVRTC)
    assert snapshot(out) == before
    # a spec-shape error, and a YAML error in the core spec
    nvrtc.write_text(edit(NVRTC_TEXT, "vendor: cuda", "vendor: [cuda"), encoding="utf-8")
    assert_user_error(run_cli(spec_dir, out, "--force"), NVRTC)
    assert snapshot(out) == before


def test_cli_bad_arguments_are_user_errors(tmp_path: Path) -> None:
    spec_dir = make_specs(tmp_path)
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("keep me", encoding="utf-8")
    for out, extra, message in ((a_file, (), "exists and is not a directory"),
                                (a_file / "sub", (), "cannot write the output"),
                                (tmp_path / "out", ("--sdk", "nvrtc"), "--sdk expects KIND=PATH"),
                                (tmp_path / "out", (), "cannot read spec")):
        if message == "cannot read spec":
            (spec_dir / "core.yaml").unlink()
        proc = run_cli(spec_dir, out, *extra)
        if message == "cannot write the output" and sdk.find("nvrtc") is None:
            continue  # nothing to write without the NVRTC headers
        assert proc.returncode == 2, (message, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr and message in proc.stderr, proc.stderr
    assert a_file.read_text(encoding="utf-8") == "keep me"


# ---------------------------------------------------------------------- fuzzing

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
FUZZ_FILE = "specs/fuzz/fuzz.yaml"


def check_load(loader: Any, text: str) -> None:
    """``loader`` must succeed or raise UserError whose every diagnostic is located in the file."""
    try:
        loader(text)
    except UserError as e:
        assert e.diagnostics
        for d in e.diagnostics:
            assert d.location.file == FUZZ_FILE, d
            assert d.location.line >= 1 and d.location.col >= 1, d
            assert isinstance(d.message, str) and d.message and "\n" not in d.message, repr(d.message)


def load_lib(text: str) -> LibrarySpec:
    return load_library(Path("fuzz.yaml"), FUZZ_FILE, text=text)


def load_core_text(text: str) -> object:
    return load_core(Path("core.yaml"), FUZZ_FILE, text=text)


KEYS = ["vendor", "library", "backend", "sdk", "headers", "version_headers", "defines", "version_macro", "bind",
        "symbols", "loader", "errors", "functions", "include", "exclude", "per_thread", "version_typedef",
        "linux", "windows", "wheel_dirs", "type", "success", "kinds", "defaulted", "default", "since",
        "name_function", "params", "status", "symbol", "error_log", "skip", "direction", "len", "nullable",
        "string", "capacity", "length_param", "size_function", "binary", "error_kinds", "OUT_OF_MEMORY",
        "nvrtcGetPTX", "prog", "in", "out", "inout"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                    st.text(max_size=12), st.sampled_from(KEYS + ["nvrtc.h", "12.4", "{}_ptds", "*", "0x10"]))
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=8), st.integers(), st.booleans())
trees = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(keys, inner, max_size=5)), max_leaves=20)


def dump(value: object) -> str:
    text: str = yaml.safe_dump(value, allow_unicode=True, default_flow_style=None)
    return text


def mutate_lines(text: str, seed: int, inserts: list[str]) -> str:
    """Delete, duplicate, swap lines and insert text at random points."""
    rng = random.Random(seed)
    lines = text.splitlines(keepends=True)
    for ins in inserts:
        op = rng.randrange(4)
        i = rng.randrange(len(lines)) if lines else 0
        if not lines:
            lines = [ins]
        elif op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[i])
        elif op == 2:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        else:
            at = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:at] + ins + lines[i][at:]
    return "".join(lines)


def replace_at(tree: Any, path_seed: int, value: object) -> Any:
    """``tree`` with the value at one (seed-chosen) path replaced by ``value``."""
    paths: list[tuple[Any, ...]] = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, path + (k,))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, path + (i,))

    walk(tree, ())
    path = paths[path_seed % len(paths)]
    if not path:
        return value
    out = copy.deepcopy(tree)
    node = out
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return out


NVRTC_TREE = yaml.safe_load(NVRTC_TEXT)
CORE_TREE = yaml.safe_load(CORE_TEXT)
FRAGMENTS = st.one_of(st.text(max_size=6), st.sampled_from([":", "- ", "[", "]", "{", "}", "&a ", "*a", "!!str ",
                                                          "\t", "'", '"', "#", "? ", "|\n", ">", "---\n", "%YAML 1.1\n",
                                                          "\\", "\x00", "\ufeff", "  ", "\n  - x\n"]))


@FUZZ
@given(st.text())
def test_fuzz_library_arbitrary_text(text: str) -> None:
    check_load(load_lib, text)


@FUZZ
@given(trees)
def test_fuzz_library_random_yaml(tree: object) -> None:
    check_load(load_lib, dump(tree))


@FUZZ
@given(st.integers(min_value=0), trees)
def test_fuzz_library_structural_mutations_of_nvrtc(path_seed: int, value: object) -> None:
    check_load(load_lib, dump(replace_at(NVRTC_TREE, path_seed, value)))


@FUZZ
@given(st.integers(), st.lists(FRAGMENTS, min_size=1, max_size=6))
def test_fuzz_library_text_mutations_of_nvrtc(seed: int, inserts: list[str]) -> None:
    check_load(load_lib, mutate_lines(NVRTC_TEXT, seed, inserts))


@FUZZ
@given(st.one_of(st.text(), trees.map(dump)))
def test_fuzz_core_random(text: str) -> None:
    check_load(load_core_text, text)


@FUZZ
@given(st.integers(), st.lists(FRAGMENTS, min_size=1, max_size=6), st.integers(min_value=0), trees)
def test_fuzz_core_mutations(seed: int, inserts: list[str], path_seed: int, value: object) -> None:
    check_load(load_core_text, mutate_lines(CORE_TEXT, seed, inserts))
    check_load(load_core_text, dump(replace_at(CORE_TREE, path_seed, value)))


def test_real_specs_load() -> None:
    """The fuzz targets' seeds are valid: the unmodified specs load without errors."""
    load_lib(NVRTC_TEXT)
    load_lib(DRIVER_TEXT)
    load_core_text(CORE_TEXT)



def test_only_naming_no_library_is_an_error(tmp_path: Path) -> None:
    """`generate --only` with a typo must fail with a suggestion, not quietly generate nothing."""
    r = subprocess.run([sys.executable, "-m", "ironaccelerator_gen", "generate", "--only", "cuda.drivr",
                        "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "no library spec 'cuda.drivr'" in r.stderr and "did you mean 'cuda.driver'" in r.stderr
    assert not (tmp_path / "out").exists()


# ------------------------------------------------ spec files that cannot be read as specs
# (every kind of spec: core, library and backend specs go through the same reader)

CUDA_BACKEND_TEXT = (SPECS / "cuda" / "backend.yaml").read_text(encoding="utf-8")
BACKEND = "specs/cuda/backend.yaml"



def backend_only(tmp_path: Path) -> Path:
    """A spec directory with core.yaml and specs/cuda/ but no library spec: no SDK header is needed."""
    d = make_specs(tmp_path, nvrtc=None)
    return d


@pytest.mark.parametrize("text, message", [
    ("", "the backend spec is empty"),
    ("# nothing but a comment\n", "the backend spec is empty"),
    ("- a list\n", "expected a backend spec (key: value), got a list"),
    ("just text\n", "expected a backend spec (key: value), got str 'just text'"),
])
def test_empty_or_non_mapping_backend_spec(tmp_path: Path, text: str, message: str) -> None:
    d = backend_only(tmp_path)
    (d / "cuda" / "backend.yaml").write_text(text, encoding="utf-8")
    (diag,) = errors_of(d)
    assert diag.message == message
    assert_at(diag, BACKEND, (1, 1))


def test_backend_spec_that_is_not_utf8_is_located_at_the_byte(tmp_path: Path) -> None:
    d = backend_only(tmp_path)
    text = edit(CUDA_BACKEND_TEXT, "class_prefix: Cuda", "class_prefix: Cu\udce9da")
    (d / "cuda" / "backend.yaml").write_bytes(text.encode("utf-8", "surrogateescape"))
    (diag,) = errors_of(d)
    assert diag.message == "the spec is not UTF-8 text: byte 0xe9 is not valid here"
    assert_at(diag, BACKEND, pos(text, "\udce9"))


@pytest.mark.parametrize("spec", ["core.yaml", "cuda/backend.yaml", "cuda/nvrtc.yaml"])
def test_spec_that_is_not_utf8(tmp_path: Path, spec: str) -> None:
    d = make_specs(tmp_path)
    (d / "cuda" / "backend.yaml").write_text(CUDA_BACKEND_TEXT, encoding="utf-8")
    path = d / spec
    path.write_bytes(path.read_bytes() + b"\n# caf\xe9 \xff\n")
    diags = errors_of(d)
    assert [x.message for x in diags] == ["the spec is not UTF-8 text: byte 0xe9 is not valid here"]
    assert diags[0].location.file == f"specs/{spec}" and diags[0].location.col == 6


@pytest.mark.parametrize("spec", ["core.yaml", "cuda/backend.yaml", "cuda/nvrtc.yaml", "cuda/other.yaml"])
def test_directory_where_a_spec_should_be(tmp_path: Path, spec: str) -> None:
    d = make_specs(tmp_path)
    (d / spec).unlink(missing_ok=True)
    (d / spec).mkdir()
    (diag,) = errors_of(d)
    assert diag.message == "cannot read spec: it is a directory, not a regular file"
    assert_at(diag, f"specs/{spec}", (1, 1))


@pytest.mark.parametrize("name", ["loop.yaml", "backend.yaml", "core.yaml"])
def test_spec_symlinked_to_itself(tmp_path: Path, name: str) -> None:
    """A library spec raised RuntimeError('Symlink loop'); a backend.yaml was silently passed over."""
    d = backend_only(tmp_path)
    (d / "cuda" / name if name != "core.yaml" else d / name).unlink(missing_ok=True)
    (d / "cuda" / name if name != "core.yaml" else d / name).symlink_to(name)
    (diag,) = errors_of(d)
    assert diag.message.startswith("cannot read spec: ") and "symbolic links" in diag.message
    assert_at(diag, f"specs/cuda/{name}" if name != "core.yaml" else CORE, (1, 1))


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "/dev/null"])
def test_spec_that_is_not_a_regular_file_is_refused_without_reading(tmp_path: Path, kind: str) -> None:
    """A FIFO blocked generate forever and /dev/zero read without bound: neither is opened for reading now."""
    d = backend_only(tmp_path)
    target = d / "cuda" / "special.yaml"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to(kind)
    with within(20):
        (diag,) = errors_of(d)
    what = "a FIFO (named pipe)" if kind == "fifo" else "a character device"
    assert diag.message == f"cannot read spec: it is {what}, not a regular file"
    assert_at(diag, "specs/cuda/special.yaml", (1, 1))


def test_oversized_spec_is_refused_before_parsing(tmp_path: Path) -> None:
    """A 4 MB spec with a 2M-item list took 93 s and 1.25 GB before its error: the size is checked first."""
    d = backend_only(tmp_path)
    (d / "cuda" / "big.yaml").write_text("headers: [" + "a.h, " * 800_000 + "a.h]\n", encoding="utf-8")
    with within(10):
        (diag,) = errors_of(d)
    assert diag.message == (f"the spec is {(d / 'cuda' / 'big.yaml').stat().st_size} bytes; a spec may be at "
                            "most 1048576 bytes (1 MiB)")
    assert_at(diag, "specs/cuda/big.yaml", (1, 1))


def test_spec_with_too_many_values_stops_early(tmp_path: Path) -> None:
    """Under the size limit, a list of 300,000 items is still refused in bounded time, where it passes the
    node limit, with one diagnostic rather than one per item."""
    d = backend_only(tmp_path)
    text = "vendor: x\nheaders: [" + "a, " * 300_000 + "a]\n"
    (d / "cuda" / "big.yaml").write_text(text, encoding="utf-8")
    t0 = time.perf_counter()
    with within(20):
        (diag,) = errors_of(d)
    assert time.perf_counter() - t0 < 10
    assert diag.message == "the spec has more than 50000 values (lists, mappings and scalars); stopping here"
    assert diag.location.file == "specs/cuda/big.yaml" and diag.location.line == 2


def test_many_errors_are_cut_short(tmp_path: Path) -> None:
    """10,000 bad items: the first 100 errors are reported, then one line saying the rest were not."""
    d = backend_only(tmp_path)
    text = "vendor: x\nheaders: [" + "'bad header', " * 10_000 + "a.h]\n"
    (d / "cuda" / "many.yaml").write_text(text, encoding="utf-8")
    diags = errors_of(d)
    assert len(diags) == 101
    assert sum("header 'bad header' is not valid" in x.message for x in diags) >= 90
    assert diags[100].message == "too many errors (more than 100); stopping here"


def test_spec_file_name_that_is_not_utf8(tmp_path: Path) -> None:
    """A name the file system holds but UTF-8 cannot spell: the cache's fingerprint raised
    UnicodeEncodeError; now the spec is refused by name, like any name unsafe in the generated files."""
    d = make_specs(tmp_path, nvrtc=None)
    name = os.fsdecode(b"caf\xe9.yaml")
    (d / "cuda" / name).write_text(NVRTC_TEXT, encoding="utf-8")
    (diag,) = errors_of(d)
    assert diag.location.file == "specs/cuda/caf\\udce9.yaml"
    assert "spec's path may only contain" in diag.message
    proc = run_cli(d, tmp_path / "out")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("specs/cuda/caf\\udce9.yaml:1:1: a spec's path may only contain"), proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", ["empty backend", "not utf-8", "directory", "symlink loop", "fifo", "oversized"])
def test_cli_unreadable_specs_exit_2_without_traceback(tmp_path: Path, case: str) -> None:
    d = backend_only(tmp_path)
    target = d / "cuda" / ("backend.yaml" if case in ("empty backend", "not utf-8", "directory") else "x.yaml")
    if case == "empty backend":
        target.write_text("", encoding="utf-8")
    elif case == "not utf-8":
        target.write_bytes(CUDA_BACKEND_TEXT.encode() + b"\xff")
    elif case == "directory":
        target.mkdir()
    elif case == "symlink loop":
        target.symlink_to(target.name)
    elif case == "fifo":
        os.mkfifo(target)
    else:
        target.write_text("# padding\n" * 200_000, encoding="utf-8")
    out = tmp_path / "out"
    (m,) = assert_user_error(run_cli(d, out), f"specs/cuda/{target.name}")
    assert not out.exists()


@pytest.mark.parametrize("text, message", [
    # 5,000 functions aliasing one 1,000-item list: a reader walking it would visit 5 million values
    ("a: &a [" + "x, " * 1000 + "]\nfunctions: {" + ", ".join(f"f{i}: *a" for i in range(5000)) + "}\n",
     "the spec has more than 50000 values once its aliases are expanded; stopping here"),
    ("functions: &f {x: *f}\n", "YAML error: an alias refers to a node that contains it"),
])
def test_aliases_that_expand_without_bound(text: str, message: str) -> None:
    with within(20), pytest.raises(UserError) as info:
        load_library(Path("x.yaml"), NVRTC, text=text)
    assert [d.message for d in info.value.diagnostics] == [message]
    assert info.value.diagnostics[0].location.file == NVRTC


# --------------------------------------------- spec sets and SDK choices that generated a broken package

def test_two_specs_declaring_the_same_library(tmp_path: Path) -> None:
    """The last one silently won; now the second is an error at its `library:`, naming the first."""
    d = make_specs(tmp_path)
    copy_text = edit(NVRTC_TEXT, "functions:\n", "functions:\n  nvrtcVersion: {skip: true}\n")
    (d / "cuda" / "nvrtc_copy.yaml").write_text(copy_text, encoding="utf-8")
    (diag,) = errors_of(d)
    assert diag.message == "library 'cuda.nvrtc' is already declared by specs/cuda/nvrtc.yaml"
    assert_at(diag, "specs/cuda/nvrtc_copy.yaml", pos(copy_text, "nvrtc\nbackend", 0))
    (m,) = assert_user_error(run_cli(d, tmp_path / "out"), "specs/cuda/nvrtc_copy.yaml")
    assert m["message"] == diag.message and not (tmp_path / "out").exists()


def test_unknown_sdk_kind_is_an_error_with_a_suggestion(tmp_path: Path) -> None:
    """`sdk: cudaa` was "skipped" with exit 0: no spec declares that kind, and no --sdk gives it."""
    text = with_sdk(NVRTC_TEXT, "cudaa")
    d = make_specs(tmp_path, text, DRIVER_TEXT)
    (diag,) = errors_of(d)
    assert diag.message == ("sdk 'cudaa' is not an SDK kind that a spec declares (did you mean 'cuda'?); known: "
                            "cuda; declare how it is found (sdk: {kind: cudaa, marker: <header>, ...}) or give its "
                            "headers with --sdk cudaa=PATH")
    assert_at(diag, NVRTC, pos(text, "cudaa"))
    (m,) = assert_user_error(run_cli(d, tmp_path / "out"), NVRTC)
    assert m["message"] == diag.message and not (tmp_path / "out").exists()


def test_sdk_kind_of_its_own_is_fine_when_given_by_sdk(tmp_path: Path) -> None:
    d = make_specs(tmp_path, with_sdk(NVRTC_TEXT, "mine"))
    result = compile_specs(d, {"mine": str(tmp_path)})  # an empty directory: skipped, as for a known kind
    assert [s.split(":")[0] for s in result.skipped] == ["cuda.nvrtc"]


def test_sdk_path_that_does_not_exist(tmp_path: Path) -> None:
    """`--sdk nvrtc=/no/such/dir` was "skipped", exit 0: a path the user gave must exist."""
    d = make_specs(tmp_path)
    missing = tmp_path / "no" / "such"
    with pytest.raises(UserError) as info:
        compile_specs(d, {"nvrtc": str(missing)})
    (diag,) = info.value.diagnostics
    assert str(diag) == f"ironaccel-gen: --sdk: --sdk nvrtc={missing}: no such directory"
    proc = run_cli(d, tmp_path / "out", "--sdk", f"nvrtc={missing}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr  # an option, not a file: no line and column
    assert proc.stderr.splitlines() == [f"ironaccel-gen: --sdk: --sdk nvrtc={missing}: no such directory",
                                        "ironaccel-gen: 1 error(s)"]
    assert not (tmp_path / "out").exists()


def test_sdk_kind_that_no_spec_uses(tmp_path: Path) -> None:
    """`--sdk nvrt=PATH` (a typo) changed nothing, silently."""
    d = make_specs(tmp_path)
    with pytest.raises(UserError) as info:
        compile_specs(d, {"nvrt": str(tmp_path)})
    assert [str(x) for x in info.value.diagnostics] == [
        "ironaccel-gen: --sdk: --sdk nvrt: no library spec uses this SDK kind (did you mean 'nvrtc'?)"]
