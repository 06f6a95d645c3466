"""Shared fixtures: paths, and the generated package on sys.path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "generated"
SPECS = ROOT / "specs"
CUDA_INCLUDE = Path("/usr/local/cuda/include")

if str(GENERATED) not in sys.path:
    sys.path.insert(0, str(GENERATED))


def site_file(rel: str) -> Path | None:
    """A file under one of this interpreter's site-packages (pip wheels), or None."""
    for p in sys.path:
        cand = Path(p) / rel
        if p and cand.exists():
            return cand
    return None


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
