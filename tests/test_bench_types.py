"""bench/ is type-clean: ``mypy --strict bench``, run as test_cuda.py runs it on the generated package (from
the repository root, so that pyproject.toml's [tool.mypy] applies, with this interpreter, whose site-packages
put generated/ on the path).  The reference libraries the benchmarks call are Any there (see the overrides in
pyproject.toml), so the result does not depend on which of them are installed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT


def test_mypy_strict_on_bench() -> None:
    pytest.importorskip("mypy")
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "bench"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
