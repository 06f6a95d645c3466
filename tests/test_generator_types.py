"""The compiler itself is type-clean: ``mypy --strict generator``, run as test_bench_types.py runs it on bench/
(from the repository root, so that pyproject.toml's [tool.mypy] applies, with this interpreter).  PyYAML and
libclang's bindings ship no type information: they are Any there (see the overrides in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT


def test_mypy_strict_on_generator() -> None:
    pytest.importorskip("mypy")
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "generator"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
