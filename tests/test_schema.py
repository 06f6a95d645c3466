"""The spec-key reference (docs/SPEC_KEYS.md) is the loaders' own schema (generator/schema.py), so it cannot drift
(issue 15 item 3)."""

from __future__ import annotations

import subprocess
import sys
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
