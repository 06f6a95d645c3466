"""``ironaccel-gen build`` (generator/build.py) builds only what changed, several modules at a time (issue 15 item 4).

Each test builds copies of three golden cases' expected library output (tests/golden/<case>/expected: small
generated libraries that compile in about a second each) in a temporary package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, core_text

from ironaccelerator_gen import build

GOLDEN = ROOT / "tests" / "golden"
CASES = ("constants", "errors", "strings")


@pytest.fixture
def out(tmp_path: Path) -> Path:
    for case in CASES:
        shutil.copytree(GOLDEN / case / "expected", tmp_path / "gen", dirs_exist_ok=True)
    return tmp_path / "gen"


def lib(out: Path, case: str) -> Path:
    return out / "ironaccelerator" / "backends" / "test" / case


def built_so(d: Path) -> list[Path]:
    return sorted(d.glob("_cffi.*.so"))


def run(out: Path, **kw: object) -> tuple[int, list[str]]:
    lines: list[str] = []
    n: int = build.build_all(out, log=lines.append, **kw).built
    return n, lines


def test_a_second_build_builds_nothing(out: Path) -> None:
    n, lines = run(out, jobs=2)
    assert n == len(CASES) and all(len(built_so(lib(out, c))) == 1 for c in CASES), lines
    assert all((lib(out, c) / build.STAMP).is_file() for c in CASES)
    mtimes = {c: built_so(lib(out, c))[0].stat().st_mtime_ns for c in CASES}
    n, lines = run(out, jobs=2)
    assert n == 0 and lines[-1].startswith("build: 0 module(s) built, 3 up to date"), lines
    assert {c: built_so(lib(out, c))[0].stat().st_mtime_ns for c in CASES} == mtimes


@pytest.mark.parametrize("change", ["trampolines.c", "types.cdef", "_cffi_build.py", "so removed", "abi removed"])
def test_a_changed_input_or_a_missing_output_rebuilds_that_module_only(out: Path, change: str) -> None:
    run(out, jobs=2)
    d = lib(out, "errors")
    if change == "so removed":
        built_so(d)[0].unlink()
    elif change == "abi removed":
        (d / "_cffi_abi.py").unlink()
    else:
        with open(d / change, "a", encoding="utf-8") as fh:
            fh.write("\n/* changed */\n" if not change.endswith(".py") else "\n# changed\n")
    n, lines = run(out, jobs=2)
    assert n == 1 and any(line.startswith("built ironaccelerator.backends.test.errors:") for line in lines), lines
    assert len(built_so(d)) == 1 and (d / "_cffi_abi.py").is_file()


def test_the_compiler_flags_and_force_rebuild(out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run(out, jobs=1)
    monkeypatch.setenv("CFLAGS", "-DIA_TEST_FLAG=1")  # the environment's flags change the machine code
    assert run(out, jobs=1)[0] == len(CASES)
    assert run(out, jobs=1)[0] == 0
    assert run(out, jobs=1, force=True)[0] == len(CASES)
    assert run(out, jobs=1, api=False)[0] == len(CASES)  # ABI-only is a different build


def test_a_failed_build_is_retried_and_the_others_still_build(out: Path) -> None:
    run(out, jobs=2)
    d = lib(out, "strings")
    good = (d / "trampolines.c").read_text(encoding="utf-8")
    (d / "trampolines.c").write_text(good + "\nthis is not C;\n", encoding="utf-8")
    (lib(out, "constants") / "trampolines.c").write_text(
        (lib(out, "constants") / "trampolines.c").read_text(encoding="utf-8") + "\n/* changed */\n", encoding="utf-8")
    n, lines = run(out, jobs=2)
    assert n == 1  # constants; strings compiled no API module but has its ABI one
    assert any(line.startswith("build ironaccelerator.backends.test.strings: API module not built") for line in lines)
    assert any(line.startswith("built ironaccelerator.backends.test.constants:") for line in lines), lines
    assert "1 in ABI mode only" in lines[-1], lines[-1]
    assert not (d / build.STAMP).exists()  # not claimed current: the next build tries again
    report = build.build_all(out, log=lambda line: None, jobs=2)
    assert (report.built, report.api_failed, report.failed) == (0, ["ironaccelerator.backends.test.strings"], [])
    (d / "trampolines.c").write_text(good, encoding="utf-8")
    assert run(out, jobs=2)[0] == 1 and (d / build.STAMP).is_file()


def test_a_module_with_nothing_usable_fails_the_build(out: Path) -> None:
    """A cdef cffi cannot parse leaves neither module: ``build`` says FAILED and exits 1 (it used to count it as
    built, and the import then failed with cffi's traceback)."""
    d = lib(out, "errors")
    (d / "types.cdef").write_text((d / "types.cdef").read_text(encoding="utf-8") + "\ntypedef struct {;\n",
                                  encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "ironaccelerator_gen", "build", "--out", str(out), "-j", "2"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "build ironaccelerator.backends.test.errors: FAILED, no module built (CDefError" in proc.stdout, proc.stdout
    assert "built ironaccelerator.backends.test.constants:" in proc.stdout
    assert "ironaccel-gen build: no module built for ironaccelerator.backends.test.errors" in proc.stderr


def test_built_modules_import_in_api_mode(out: Path) -> None:
    run(out, jobs=2)
    # beside the checked-in package's own files (its built modules are not needed), as the golden tests do
    shutil.copytree(ROOT / "generated" / "ironaccelerator", out / "ironaccelerator", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("_cffi.*.so", "backends"))
    for pkg in ("backends", "backends/test"):
        (out / "ironaccelerator" / pkg / "__init__.py").touch()
    code = ("import importlib\nfor c in %r:\n    b = importlib.import_module('ironaccelerator.backends.test.' + c"
            " + '._binding').BINDING\n    assert b.mode == 'api', (c, b.mode)\nprint('ok')\n" % (CASES,))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(out), str(ROOT / "runtime")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_cli_jobs_must_be_positive(out: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "ironaccelerator_gen", "build", "--out", str(out), "-j", "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "ironaccel-gen: --jobs must be at least 1, got 0" in proc.stderr
    assert not list(out.rglob("_cffi.*.so"))


def test_libraries_of_the_same_name_under_two_vendors(tmp_path: Path) -> None:
    """``x/constants.yaml`` beside ``y/constants.yaml`` (as ``hip/runtime.yaml`` beside a ``cuda/runtime.yaml``):
    each generates, builds and imports as its own module (issue 15 item 3)."""
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "core.yaml").write_text(core_text(), encoding="utf-8")
    text = (GOLDEN / "constants" / "constants.yaml").read_text(encoding="utf-8")
    for vendor in ("x", "y"):
        (specs / vendor).mkdir()
        (specs / vendor / "constants.yaml").write_text(text.replace("vendor: test", f"vendor: {vendor}"),
                                                       encoding="utf-8")
    out = tmp_path / "gen"
    proc = subprocess.run([sys.executable, "-m", "ironaccelerator_gen", "generate", "--specs", str(specs),
                           "--out", str(out), "--sdk", f"constants={GOLDEN / 'constants' / 'include'}", "--build"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "built ironaccelerator.backends.x.constants" in proc.stdout
    assert "built ironaccelerator.backends.y.constants" in proc.stdout
    code = ("from ironaccelerator.backends.x.constants import _binding as a\n"
            "from ironaccelerator.backends.y.constants import _binding as b\n"
            "assert a.BINDING is not b.BINDING and a.BINDING.mode == b.BINDING.mode == 'api'\n"
            "assert a.BINDING.ffi is not b.BINDING.ffi\nprint('ok')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(out), str(ROOT / "runtime")])}
    run_ = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert run_.returncode == 0 and run_.stdout.strip() == "ok", run_.stderr
