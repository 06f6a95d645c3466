"""generator/rules.py: a spec's ``rules:`` state a library's convention once (issue 29 item 2).  A rule's effect is
checked in tests/golden/device_pointers (device pointers from a rule, nullable from another, a parameter's own
entry overriding them) and tests/test_cublas.py; here, that every way a rule can be wrong is a located error
(``file:line:col``, exit 2, no traceback), never a rule that silently matches nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ironaccelerator_gen import pipeline
from ironaccelerator_gen.diagnostics import UserError
from ironaccelerator_gen.roles import Role
from ironaccelerator_gen.rules import spelling

from conftest import ROOT, SPECS
from test_spec import assert_user_error, run_cli

BASE = (ROOT / "tests" / "golden" / "device_pointers" / "device_pointers.yaml").read_text(encoding="utf-8")
BASE = BASE.replace("backend: GOLDEN", "backend: CUDA")  # (the real core.yaml's kinds)
RULES = BASE[BASE.index("rules:"):BASE.index("functions:\n")]


def spec_dir(tmp_path: Path, rules: str, functions: str = "") -> Path:
    d = tmp_path / "specs"
    (d / "test").mkdir(parents=True)
    shutil.copy(SPECS / "core.yaml", d / "core.yaml")
    text = BASE[:BASE.index("rules:")] + rules + (functions or BASE[BASE.index("functions:\n"):])
    (d / "test" / "device_pointers.yaml").write_text(text, encoding="utf-8")
    return d


def errors(tmp_path: Path, rules: str, functions: str = "") -> list[str]:
    """The diagnostics of generating with these rules (each 'line:col: message', line within the spec)."""
    with pytest.raises(UserError) as info:
        pipeline.compile_specs(spec_dir(tmp_path, rules, functions))
    return [f"{d.location.line}:{d.location.col}: {d.message}" for d in info.value.diagnostics]


def roles(tmp_path: Path, rules: str, functions: str = "") -> dict[str, dict[str, Role]]:
    (lib,) = [b for b in pipeline.compile_specs(spec_dir(tmp_path, rules, functions)).libraries
              if b.spec.library.value == "device_pointers"]
    return {f.public: {p.c_name: p.role for p in f.params} for f in lib.functions}


def line_of(tmp_path: Path, needle: str) -> int:
    text = (tmp_path / "specs" / "test" / "device_pointers.yaml").read_text(encoding="utf-8")
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_spelling_normalises_spaces_only() -> None:
    assert spelling("float*") == spelling("float  *") == "float *"
    assert spelling("const float *") != spelling("float *")
    assert spelling("const  void*const *") == "const void * const *"


def test_the_base_rules_give_device_pointers(tmp_path: Path) -> None:
    r = roles(tmp_path, RULES)
    assert r["dpScale"]["x"] is r["dpScale"]["y"] is r["dpScaleD"]["y"] is Role.DEVICE
    assert r["dpSum"]["result"] is Role.OUT  # its own entry overrides the rule
    assert r["dpCreate"]["handle"] is Role.OUT and r["dpLast"]["address"] is Role.OUT  # not matched


def test_without_the_rule_the_same_parameters_are_host_outputs(tmp_path: Path) -> None:
    """The failure the issue reports (cuBLAS's C a returned host float): what the rule changes."""
    r = roles(tmp_path, "", "functions:\n  dpFill: {params: {dst: {device: true}}}\n")
    assert r["dpScale"]["y"] is Role.OUT and r["dpScale"]["x"] is Role.IN


def test_a_function_pattern_matching_no_bound_function(tmp_path: Path) -> None:
    got = errors(tmp_path, RULES.replace('["dp*"]', '["dpScal", "dp*"]'))
    line = line_of(tmp_path, "dpScal\"")
    assert any(g.startswith(f"{line}:") and "function pattern 'dpScal' takes part in no match" in g for g in got), got
    got = errors(tmp_path / "b", RULES.replace('["dp*"]', '["dpScael"]'))
    assert any("function pattern 'dpScael' matches no bound function" in g and "did you mean 'dpScale'" in g
               for g in got), got


def test_a_misspelt_type_is_an_error_with_a_suggestion(tmp_path: Path) -> None:
    rule = '  - {functions: [dpScale], types: ["flaot *"], names: [y], device: true}\n'
    got = errors(tmp_path, "rules:\n" + rule)
    line = line_of(tmp_path, "flaot")
    assert got == [f"{line}:5: rule matches no parameter of the functions its patterns match (dpScale): no "
                   "parameter there is 'flaot *' (did you mean 'float *'?)"], got


def test_a_type_or_name_that_takes_part_in_no_match(tmp_path: Path) -> None:
    got = errors(tmp_path, RULES.replace('"double *"]', '"double *", "int *"]').replace("[x, y, result]",
                                                                                            "[x, y, result, z]"))
    assert any("type 'int *' takes part in no match" in g for g in got), got
    assert any("parameter pattern 'z' takes part in no match" in g for g in got), got
    assert len(got) == 2, got


def test_two_rules_giving_one_key_to_a_parameter(tmp_path: Path) -> None:
    got = errors(tmp_path, RULES + "  - {functions: [dpScale], names: [x], direction: in, device: true}\n")
    assert len(got) == 1 and "parameter 'x' of 'dpScale' already takes device from the rule at" in got[0], got


def test_a_rule_that_says_nothing_or_has_an_unknown_key(tmp_path: Path) -> None:
    got = errors(tmp_path, "rules:\n  - {functions: [dpScale], names: [x]}\n")
    assert len(got) == 1 and "a rule says nothing of the parameters it matches" in got[0], got
    got = errors(tmp_path / "b", "rules:\n  - {functions: [dpScale], name: [x], device: true}\n")
    assert any("name" in g and "names" in g for g in got), got  # the schema's unknown key, with the right one
    got = errors(tmp_path / "c", "rules:\n  - {names: [x], device: true}\n")
    assert any("missing required key 'functions'" in g for g in got), got
    got = errors(tmp_path / "d", "rules:\n  - {functions: [dpScale], names: [x], direction: sideways}\n")
    assert any("bad direction 'sideways'" in g for g in got), got


@pytest.mark.parametrize("rule, message", [
    ("{functions: [dpScale], names: [x], device: true, direction: out}",
     "'x' of 'dpScale' is a device pointer (device: true, an address passed through); it cannot also be direction:"),
    ("{functions: [dpScale], names: [alpha], device: true}",
     "'alpha' of 'dpScale' is float, neither a pointer nor an integer"),
    ("{functions: [dpScale], names: [y], direction: out, nullable: true}", None),
])
def test_what_a_rule_gives_is_checked_as_a_parameters_own_entry(tmp_path: Path, rule: str, message: str | None) -> None:
    if message is None:  # a valid rule: y a host float returned (and, nullable, defaulting to None)
        assert roles(tmp_path, f"rules:\n  - {rule}\n")["dpScale"]["y"] is Role.OUT
        return
    got = errors(tmp_path, f"rules:\n  - {rule}\n")
    assert any(message in g for g in got), got


def test_the_cli_reports_a_bad_rule_located_exit_2(tmp_path: Path) -> None:
    d = spec_dir(tmp_path, RULES.replace('"float *"', '"flaot *"'))
    proc = run_cli(d, tmp_path / "out")
    assert_user_error(proc, "specs/test/device_pointers.yaml")
    assert "did you mean 'float *'" in proc.stderr or "takes part in no match" in proc.stderr, proc.stderr


def test_scaffold_missing_counts_what_rules_state(tmp_path: Path) -> None:
    """``scaffold --missing`` lists the parameters whose direction is the binder's guess: not those a rule states."""
    from ironaccelerator_gen.scaffold import missing

    with_rules = missing("test.device_pointers", spec_dir(tmp_path, RULES), {})
    without = missing("test.device_pointers", spec_dir(tmp_path / "b", ""), {})
    assert "dpScale(float *y) -> out" in without and "dpScale(float *y)" not in with_rules, with_rules
    assert "dpLast(uintptr_t *address) -> out" in with_rules  # no rule speaks of it


def test_a_rule_gives_len(tmp_path: Path) -> None:
    """``len:`` in a rule: each matched array's count (OpenCL's event_wait_list and num_events_in_wait_list)."""
    rule = "rules:\n  - {functions: [dpScale*], names: [x], direction: in, len: n}\n"
    r = roles(tmp_path, rule)
    assert r["dpScale"]["x"] is r["dpScaleD"]["x"] is Role.IN_ARRAY and r["dpScale"]["n"] is Role.LEN
    got = errors(tmp_path / "b", rule.replace("len: n", "len: count"))
    text = (tmp_path / "b" / "specs" / "test" / "device_pointers.yaml").read_text(encoding="utf-8").splitlines()
    line = line_of(tmp_path / "b", "len: count")
    col = text[line - 1].index("count") + 1  # (located at the rule's len: value)
    assert f"{line}:{col}: len: function 'dpScale' has no parameter 'count'" in got, got
