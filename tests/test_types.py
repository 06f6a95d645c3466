"""Every tree is type-clean: ``mypy --strict <tree>`` for the generated package, its hand-written runtime
(runtime/ironaccelerator_runtime), the compiler (generator/),
the benchmarks (bench/) and these tests, each run from the repository root, so that pyproject.toml's
[tool.mypy] applies, with this interpreter, whose site-packages put generated/ on the path.  What ships no
type information is Any there (PyYAML and libclang's bindings for the generator; the reference libraries
the benchmarks call; the golden package, which exists only at test time): see the overrides in
pyproject.toml, so that the result does not depend on which of them are installed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT

TREES = ["generated/ironaccelerator", "runtime/ironaccelerator_runtime", "generator", "bench", "tests"]


@pytest.mark.parametrize("tree", TREES)
def test_mypy_strict(tree: str) -> None:
    pytest.importorskip("mypy")
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", tree], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
