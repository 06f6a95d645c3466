"""Every tree is type-clean: ``mypy --strict <tree>`` for the generated package, its hand-written runtime
(runtime/ironaccelerator_runtime), the compiler (generator/),
the benchmarks (bench/) and these tests, each run from the repository root, so that pyproject.toml's
[tool.mypy] applies, with this interpreter, whose site-packages put generated/ on the path.  What ships no
type information is Any there (PyYAML and libclang's bindings for the generator; the reference libraries
the benchmarks call; the golden package, which exists only at test time): see the overrides in
pyproject.toml, so that the result does not depend on which of them are installed."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

TREES = ["generated/ironaccelerator", "runtime/ironaccelerator_runtime", "generator", "bench", "tests"]


@pytest.mark.parametrize("tree", TREES)
def test_mypy_strict(tree: str) -> None:
    pytest.importorskip("mypy")
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", tree], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr



ROLES = ROOT / "generator" / "roles.py"
ENUMS = [n.name for n in ast.parse(ROLES.read_text(encoding="utf-8")).body if isinstance(n, ast.ClassDef)]


@pytest.mark.parametrize("enum", ENUMS)
def test_a_new_member_of_a_binder_enum_is_a_mypy_error_at_every_match(tmp_path: Path, enum: str) -> None:
    """The binder's closed vocabularies (generator/roles.py) are dispatched with ``match`` ending in
    ``assert_never``: in a copy of generator/ whose enum has one member more, ``mypy --strict`` fails, naming each
    dispatch the member must reach, and nothing else."""
    pytest.importorskip("mypy")
    shutil.copytree(ROOT / "generator", tmp_path / "generator", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    roles = ROLES.read_text(encoding="utf-8")
    anchor = f"class {enum}(StrEnum):\n"
    first = next(line for line in roles.split(anchor, 1)[1].splitlines() if re.match(r"    [A-Z_]+ = ", line))
    (tmp_path / "generator" / "roles.py").write_text(
        roles.replace(anchor + roles.split(anchor, 1)[1].split(first, 1)[0] + first,
                      anchor + roles.split(anchor, 1)[1].split(first, 1)[0] + first + '\n    ADDED = "added"', 1),
        encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / ".mypy_cache"),
                        "generator"], cwd=tmp_path, capture_output=True, text=True)
    errors = [line for line in r.stdout.splitlines() if ": error: " in line]
    assert r.returncode == 1 and errors, f"mypy did not notice {enum}.ADDED:\n" + r.stdout + r.stderr
    assert all(f'"Literal[{enum}.ADDED]"' in line and "assert_never" in line for line in errors), r.stdout
