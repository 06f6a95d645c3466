"""Spec files that are not what a spec should be (issue 10 item 13): each is a located error and exit 2
through the CLI, never a traceback, a hang or an unbounded read, and nothing is written."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

import pytest

from conftest import SPECS
from test_spec import assert_user_error, run_cli, snapshot


def _break_backend_empty(p: Path) -> None:
    p.write_text("")


def _break_backend_latin1(p: Path) -> None:
    p.write_bytes(p.read_bytes().replace(b"OpenCL", b"Open\xe9CL", 1))


def _break_backend_directory(p: Path) -> None:
    p.unlink()
    p.mkdir()


def _break_self_symlink(p: Path) -> None:
    p.unlink()
    os.symlink(p.name, p)


def _break_fifo(p: Path) -> None:
    p.unlink()
    os.mkfifo(p)


def _break_dev_zero(p: Path) -> None:
    p.unlink()
    os.symlink("/dev/zero", p)


def _break_huge(p: Path) -> None:
    p.write_text("functions:\n" + "".join(f"  - f{i}\n" for i in range(700_000)))


BREAKS: dict[str, tuple[str, Callable[[Path], None]]] = {
    "empty backend spec": ("opencl/backend.yaml", _break_backend_empty),
    "non-UTF-8 backend spec": ("opencl/backend.yaml", _break_backend_latin1),
    "directory as backend spec": ("opencl/backend.yaml", _break_backend_directory),
    "library spec symlinked to itself": ("opencl/cl.yaml", _break_self_symlink),
    "FIFO as library spec": ("opencl/cl.yaml", _break_fifo),
    "/dev/zero as library spec": ("opencl/cl.yaml", _break_dev_zero),
    "a 5 MB library spec": ("opencl/cl.yaml", _break_huge),
}


@pytest.mark.parametrize("case", sorted(BREAKS))
def test_unreadable_specs_are_located_errors(tmp_path: Path, case: str) -> None:
    rel, breaker = BREAKS[case]
    spec_dir = tmp_path / "specs"
    shutil.copytree(SPECS, spec_dir)
    breaker(spec_dir / rel)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("untouched")
    before = snapshot(out)
    proc = run_cli(spec_dir, out, "--only", "opencl.cl")  # run_cli's timeout catches a hang
    assert_user_error(proc, f"specs/{rel}")
    assert snapshot(out) == before
