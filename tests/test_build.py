"""``ironaccel-gen build`` (generator/build.py) builds only what changed, several modules at a time (issue 15 item 4).

Each test builds copies of three golden cases' library output (tests/golden/<case>, generated once per module:
small libraries that compile in about a second each) in a temporary package.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, core_text
from test_golden import generate, library_files

from ironaccelerator_gen import build, pipeline

GOLDEN = ROOT / "tests" / "golden"
CASES = ("constants", "errors", "strings")


@pytest.fixture(scope="module")
def case_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The three cases' whole library output (their expected/ holds only the files each case compares)."""
    files = generate(list(CASES), tmp_path_factory.mktemp("cases"))
    return {rel: text for case in CASES for rel, text in library_files(case, files).items()}


@pytest.fixture
def out(tmp_path: Path, case_files: dict[str, str]) -> Path:
    pipeline.write(case_files, tmp_path / "gen")
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


@pytest.mark.parametrize("jobs", [1, 2])
def test_progress_lines_as_it_goes_and_none_with_quiet(out: Path, jobs: int) -> None:
    """Issue 24 item 6: a line as each module starts and as it finishes (its times); verbosity 0 (-q) keeps the
    summary only."""
    n, lines = run(out, jobs=jobs, force=True)
    assert n == len(CASES)
    assert lines[0] == f"build: {len(CASES)} module(s) to build, 0 up to date, {jobs} job(s)", lines
    for case in CASES:
        name = f"ironaccelerator.backends.test.{case}"
        begin = [i for i, line in enumerate(lines) if line.startswith(f"building {name} [")]
        end = [i for i, line in enumerate(lines) if line.startswith(f"built {name}: abi ")]
        assert len(begin) == 1 and len(end) == 1 and begin[0] < end[0], lines
        assert re.search(r"api \d+\.\ds", lines[end[0]]), lines[end[0]]
    n, lines = run(out, jobs=jobs, force=True, verbosity=0)
    assert n == len(CASES) and len(lines) == 1 and lines[0].startswith("build: 3 module(s) built"), lines


def test_a_failed_compile_shows_the_compilers_output(out: Path) -> None:
    """Issue 24 item 6: the compiler's errors are part of the report, under the module's failure line (they went
    to the process's stderr, apart from the report and mixed between parallel jobs); the CLI prints them on
    stdout with the rest, with -q too."""
    d = lib(out, "strings")
    (d / "trampolines.c").write_text((d / "trampolines.c").read_text(encoding="utf-8") + "\nthis is not C;\n",
                                     encoding="utf-8")
    for jobs in (1, 2):
        _, lines = run(out, jobs=jobs)
        at = next(i for i, line in enumerate(lines)
                  if line.startswith("build ironaccelerator.backends.test.strings: API module not built"))
        assert "gcc" not in lines[at] or "exited with status" in lines[at], lines[at]  # not the whole command line
        assert lines[at + 1] == "  the compiler said:", lines
        assert any("error:" in line and "this" in line for line in lines[at + 2:at + 8]), lines
    proc = subprocess.run([sys.executable, "-m", "ironaccelerator_gen", "build", "--out", str(out), "-j", "2", "-q"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the compiler said:" in proc.stdout and "this is not C;" in proc.stdout, proc.stdout
    assert "error:" not in proc.stderr, proc.stderr
    assert "building " not in proc.stdout, proc.stdout
    # --require-api (make test's build): the same failure is an error, naming the module, its output shown as before
    proc = subprocess.run([sys.executable, "-m", "ironaccelerator_gen", "build", "--out", str(out), "-q",
                           "--require-api"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "ironaccelerator.backends.test.strings" in proc.stderr and "--require-api" in proc.stderr, proc.stderr
    assert "the compiler said:" in proc.stdout and "this is not C;" in proc.stdout, proc.stdout


def test_the_cli_reports_as_it_goes(out: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "ironaccelerator_gen", "build", "--out", str(out), "-j", "2"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert sum(line.startswith("building ironaccelerator.backends.test.") for line in lines) == 3, lines
    assert sum(line.startswith("built ironaccelerator.backends.test.") for line in lines) == 3, lines
    assert not any(line.startswith("generating ") for line in lines), lines  # cffi's own chatter stays out
    quiet = subprocess.run([sys.executable, "-m", "ironaccelerator_gen", "build", "--out", str(out), "-q", "--force"],
                           capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 0 and len(quiet.stdout.splitlines()) == 1, quiet.stdout


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


# A child that builds one library with every writer of an output made to write half of it and then fail: by an
# exception (a full disk) or by SIGKILL (a killed build).  The writers: shutil's copy (how the .so used to be put in
# place), cffi's emit_python_code (how _cffi_abi.py used to be written, under its final name), and output's
# _write_file (what write_atomic writes its temporary file with).
_INTERRUPTED_CHILD = r'''
import errno, os, shutil, signal, sys
from pathlib import Path
import cffi
from ironaccelerator_gen import build, output

lib_dir, target, how = Path(sys.argv[1]), sys.argv[2], sys.argv[3]

def fail():
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise OSError(errno.ENOSPC, "No space left on device (simulated)")

def mine(name):
    return ".so" in name if target == "so" else name.startswith("_cffi_abi.py")

def write_half(path, data):
    with open(path, "wb") as fh:
        fh.write(data[: len(data) // 2])
        fh.flush()
        os.fsync(fh.fileno())

real_copyfile, real_write_file, real_emit = shutil.copyfile, output._write_file, cffi.FFI.emit_python_code

def copyfile(src, dst, *a, **k):
    if mine(os.path.basename(dst)):
        write_half(dst, Path(src).read_bytes())
        fail()
    return real_copyfile(src, dst, *a, **k)

def write_file(path, data, *a, **k):
    if mine(Path(path).name):
        write_half(path, data)
        fail()
    return real_write_file(path, data, *a, **k)

def emit(self, filename):
    if target == "abi":
        real_emit(self, filename + ".full")
        data = Path(filename + ".full").read_bytes()
        os.unlink(filename + ".full")
        write_half(filename, data)
        fail()
    return real_emit(self, filename)

shutil.copyfile, output._write_file, cffi.FFI.emit_python_code = copyfile, write_file, emit
build.build_library(lib_dir, True, "some key")
'''


@pytest.mark.parametrize("how", ["raise", "kill"])
@pytest.mark.parametrize("target", ["so", "abi"])
def test_an_interrupted_build_leaves_the_old_modules_whole(out: Path, target: str, how: str) -> None:
    """Issue 23 item 8: each output is written to a temporary name and renamed into place (the stamp last), so a
    build that fails or is killed while writing the .so or _cffi_abi.py leaves the previous build's file whole under
    the final name (not a truncated .so, which crashes the importer with SIGBUS, nor half a _cffi_abi.py), claims
    nothing in the stamp, and the next build finishes the job (and removes the temporary files)."""
    d = lib(out, "errors")
    run(out, jobs=1)
    (old_so,) = built_so(d)
    old = {p.name: p.read_bytes() for p in (old_so, d / "_cffi_abi.py")}
    with open(d / "trampolines.c", "a", encoding="utf-8") as fh:
        fh.write("\nint ia_test_changed(void) { return 1; }\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "runtime"), *sys.path])}
    proc = subprocess.run([sys.executable, "-c", _INTERRUPTED_CHILD, str(d), target, how], capture_output=True,
                          text=True, env=env, timeout=300)
    if how == "kill":
        assert proc.returncode == -9, proc.stdout + proc.stderr
    else:
        assert proc.returncode == 1 and "No space left on device (simulated)" in proc.stderr, proc.stderr
    assert {p.name for p in built_so(d)} == {old_so.name}, list(d.iterdir())
    for name, data in old.items():
        assert (d / name).read_bytes() == data, f"{name} under its final name is not the previous build's"
    compile((d / "_cffi_abi.py").read_text(encoding="utf-8"), "_cffi_abi.py", "exec")
    assert not (d / build.STAMP).exists()
    # the old module still imports (the extension module and its ABI twin), beside the package's own files
    shutil.copytree(ROOT / "generated" / "ironaccelerator", out / "ironaccelerator", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("_cffi.*.so", "backends"))
    for pkg in ("backends", "backends/test"):
        (out / "ironaccelerator" / pkg / "__init__.py").touch()
    code = ("import importlib\nb = importlib.import_module('ironaccelerator.backends.test.errors._binding').BINDING\n"
            "assert b.mode == 'api', b.mode\nimportlib.import_module('ironaccelerator.backends.test.errors._cffi_abi')"
            "\nprint('ok')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(out), str(ROOT / "runtime")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
    # the next build rebuilds it and leaves no temporary file behind
    n, lines = run(out, jobs=1)
    assert n == 1 and (d / build.STAMP).is_file(), lines
    assert not [p.name for p in d.iterdir() if p.name.endswith(".tmp")]
    assert built_so(d)[0].read_bytes() != old[old_so.name]
