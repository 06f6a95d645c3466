"""Spec files that are not what a spec should be (issue 10 item 13): each is a located error and exit 2
through the CLI, never a traceback, a hang or an unbounded read, and nothing is written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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


@pytest.mark.parametrize("how", ["absolute", "relative", "dot"])
def test_messages_name_specs_as_the_specs_option_gave_them(tmp_path: Path, how: str) -> None:
    """``--specs DIR`` names its files DIR/... in messages, as given (issue 15 item 3): before, a spec directory
    given by an absolute path was still printed as ``<its name>/...``, a file that does not exist from here."""
    spec_dir = tmp_path / "work" / "myspecs"
    shutil.copytree(SPECS, spec_dir)
    _break_backend_empty(spec_dir / "opencl" / "cl.yaml")
    given, cwd = {"absolute": (str(spec_dir), tmp_path), "relative": ("work/myspecs", tmp_path),
                  "dot": (".", spec_dir)}[how]
    proc = subprocess.run([sys.executable, "-m", "ironaccelerator_gen", "generate", "--specs", given,
                           "--out", str(tmp_path / "out"), "--only", "opencl.cl"],
                          capture_output=True, text=True, timeout=120, cwd=cwd)
    want = {"absolute": f"{spec_dir.as_posix()}/opencl/cl.yaml", "relative": "work/myspecs/opencl/cl.yaml",
            "dot": "opencl/cl.yaml"}[how]
    assert_user_error(proc, want)
    assert (cwd / want).is_file()


def test_a_backend_that_is_not_a_backend_kind_is_a_located_error(tmp_path: Path) -> None:
    """``backend:`` names the backend in ``Error.backend``; before, any identifier was accepted (issue 15 item 3)."""
    spec_dir = tmp_path / "specs"
    shutil.copytree(SPECS, spec_dir)
    spec = spec_dir / "opencl" / "cl.yaml"
    text = spec.read_text(encoding="utf-8")
    assert text.count("\nbackend: OPENCL\n") == 1
    spec.write_text(text.replace("\nbackend: OPENCL\n", "\nbackend: OPENLC\n"), encoding="utf-8")
    line = text[:text.index("\nbackend: OPENCL\n")].count("\n") + 2
    proc = run_cli(spec_dir, tmp_path / "out", "--only", "opencl.cl")
    assert_user_error(proc, "specs/opencl/cl.yaml")
    assert (f"specs/opencl/cl.yaml:{line}:10: backend 'OPENLC' is not a backend kind of specs/core.yaml (did you "
            "mean 'OPENCL'?) (one of CUDA, ROCM, METAL, QNN, OPENCL, VULKAN: it names the backend in Error.backend); "
            "a new kind is appended to backend_kinds: of the core spec first (docs/maintainer/adding-a-backend.md)") \
        in proc.stderr, proc.stderr  # (issue 29 item 4: and how a kind is added)
    assert not (tmp_path / "out").exists()


def test_a_library_spec_named_core_yaml_is_refused_not_passed_over(tmp_path: Path) -> None:
    """specs/<vendor>/core.yaml used to be skipped without a word (only the top-level core.yaml is read)."""
    spec_dir = tmp_path / "specs"
    shutil.copytree(SPECS, spec_dir)
    shutil.copy(spec_dir / "cuda" / "nvrtc.yaml", spec_dir / "cuda" / "core.yaml")
    proc = run_cli(spec_dir, tmp_path / "out", "--only", "cuda.nvrtc")
    assert_user_error(proc, "specs/cuda/core.yaml")
    assert "specs/cuda/core.yaml:1:1: only specs/core.yaml is a core spec, and a library spec cannot be named " \
           "core.yaml" in proc.stderr, proc.stderr
