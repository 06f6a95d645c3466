"""The spec-key reference (docs/SPEC_KEYS.md) is the loaders' own schema (generator/schema.py), so it cannot drift
(issue 15 item 3)."""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import ROOT, SPECS

from ironaccelerator_gen import schema
from ironaccelerator_gen.diagnostics import UserError
from ironaccelerator_gen.spec import load_library

DOC = ROOT / "docs" / "SPEC_KEYS.md"


def test_the_reference_is_what_spec_keys_prints() -> None:
    proc = subprocess.run([sys.executable, "-m", "ironaccelerator_gen", "spec-keys"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert DOC.read_text(encoding="utf-8") == proc.stdout, \
        "docs/SPEC_KEYS.md is stale: python -m ironaccelerator_gen spec-keys > docs/SPEC_KEYS.md"


@pytest.mark.parametrize("module", ["spec.py", "surface.py"])
def test_the_loaders_take_their_keys_from_the_schema(module: str) -> None:
    source = (ROOT / "generator" / module).read_text(encoding="utf-8")
    assert schema.literal_key_tuples(source) == [], f"generator/{module}: keys listed outside generator/schema.py"
    # (the check itself finds a literal)
    assert schema.literal_key_tuples("r.mapping(node, ('a', 'b'), (), 'x')\n") == [1]


def test_every_key_of_every_checked_in_spec_is_documented() -> None:
    import yaml

    documented = {k.name for s in schema.SECTIONS.values() for k in s.keys}
    seen = set()
    for p in sorted(SPECS.rglob("*.yaml")):
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
        seen |= set(data)
    assert seen <= documented, seen - documented


def test_an_unknown_key_is_refused_with_the_schemas_suggestion() -> None:
    text = (SPECS / "cuda" / "nvrtc.yaml").read_text(encoding="utf-8").replace("\nbind:\n", "\nbnid:\n", 1)
    with pytest.raises(UserError) as e:
        load_library(Path("specs/cuda/nvrtc.yaml"), "specs/cuda/nvrtc.yaml", text=text)
    assert "unknown key 'bnid' in library spec (did you mean 'bind'?)" in str(e.value)


def test_every_section_and_role_table_is_in_the_reference() -> None:
    doc = DOC.read_text(encoding="utf-8")
    for path, section in schema.SECTIONS.items():
        assert f"### `{path}`" in doc
        for key in section.keys:
            assert f"| `{key.name}` |" in doc
    roles = schema.runtime_roles(ROOT / "runtime" / "ironaccelerator_runtime" / "backends" / "gpu")
    assert roles and all(f"| `{role}` |" in doc for table in roles.values() for role in table)


def test_the_readme_links_the_reference() -> None:
    assert "docs/SPEC_KEYS.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_spec_reader_reads_every_section_through_the_schema() -> None:
    """generator/spec.py names a section by its schema path (SpecReader.section), never by passing the schema's
    key lists to SpecReader.mapping itself: the allowed, required, retired and refused keys come from one place."""
    tree = ast.parse((ROOT / "generator" / "spec.py").read_text(encoding="utf-8"))
    reader = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "section")
    inside = {id(n) for n in ast.walk(reader)}  # (SpecReader.section itself passes them on)
    bypassing = [n.lineno for n in ast.walk(tree)
                 if id(n) not in inside and isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr == "mapping" and any(
                     isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                     and c.func.attr in ("keys", "required")
                     for a in n.args[1:3] for c in ast.walk(a))]
    assert bypassing == [], f"generator/spec.py: SpecReader.mapping given the schema's keys at lines {bypassing}"


def test_every_form_names_keys_of_its_section() -> None:
    for path, forms in schema.FORMS.items():
        allowed = schema.keys(path)
        for form in forms.values():
            named = list(form.required or ()) + [k for k, _ in form.refused]
            assert named and set(named) <= set(allowed), (path, form.name, set(named) - set(allowed))


def test_a_forms_refused_and_required_keys_are_the_schemas(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key refused in a form, or required in it, is one edit of schema.FORMS: the loader follows it."""
    text = (ROOT / "tests" / "golden" / "declared" / "declared.yaml").read_text(encoding="utf-8")
    load_library(Path("declared.yaml"), "declared.yaml", text=text)  # as checked in: accepted
    declared = schema.FORMS["library"]["declared"]
    monkeypatch.setitem(schema.FORMS["library"], "declared", replace(
        declared, refused=declared.refused + (("loader", "a test's reason"),),
        required=(declared.required or ()) + ("defines",)))
    with pytest.raises(UserError) as e:
        load_library(Path("declared.yaml"), "declared.yaml", text=text)
    messages = [d.message for d in e.value.diagnostics]
    assert "'loader' does not go with frontend: declared (a test's reason)" in messages
    assert "missing required key 'defines' in library spec" in messages


def test_a_new_key_of_a_section_is_one_schema_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader allows what the schema's section lists: a key added there is read, not refused as unknown."""
    text = (SPECS / "cuda" / "nvrtc.yaml").read_text(encoding="utf-8")
    text = text.replace("\nbind:\n", "\nbind:\n  extra: [x]\n", 1)
    with pytest.raises(UserError) as e:
        load_library(Path("specs/cuda/nvrtc.yaml"), "specs/cuda/nvrtc.yaml", text=text)
    assert "unknown key 'extra' in bind" in str(e.value)
    section = schema.SECTIONS["library > bind"]
    monkeypatch.setitem(schema.SECTIONS, "library > bind",
                        replace(section, keys=section.keys + (schema.Key("extra", "a test's key"),)))
    load_library(Path("specs/cuda/nvrtc.yaml"), "specs/cuda/nvrtc.yaml", text=text)


def test_the_unknown_key_message_is_the_schemas() -> None:
    assert schema.unknown_key("bnid", schema.keys("library"), "library spec") == \
        "unknown key 'bnid' in library spec (did you mean 'bind'?)"
    assert schema.unknown_key("zzz", ("a", "b"), "x") == "unknown key 'zzz' in x; expected one of: a, b"
    assert schema.variants("library > resolver") == ("proc_address", "lookup", "table", "objc")
