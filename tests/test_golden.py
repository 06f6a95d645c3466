"""Expectation (golden) tests: small header + spec in, generated files checked in beside them.

A failure prints a unified diff; ``UPDATE_GOLDEN=1`` (``make golden``) accepts the new output.
The expected files are also *built* (cffi API and ABI mode) and *imported*, and exercised
against a real shared library compiled from the case's ``impl.c``: golden files alone would
keep passing while codegen is broken.
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ironaccelerator_gen import pipeline
from ironaccelerator_gen.build import build_library

from conftest import ROOT, SPECS

GOLDEN = ROOT / "tests" / "golden"
CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "include").is_dir())


def _generate(case: str, tmp_path: Path) -> dict[str, str]:
    spec_dir = tmp_path / "specs"
    spec_dir.mkdir()
    shutil.copy(SPECS / "core.yaml", spec_dir / "core.yaml")
    kinds = {}
    for y in (GOLDEN / case).glob("*.yaml"):
        shutil.copy(y, spec_dir / y.name)
        kinds[yaml.safe_load(y.read_text())["sdk"]] = str(GOLDEN / case / "include")
    result = pipeline.compile_specs(spec_dir, kinds, base=spec_dir.parent)
    assert not result.skipped, result.skipped
    files: dict[str, str] = result.files
    return files


def _expected(case: str) -> dict[str, str]:
    exp = GOLDEN / case / "expected"
    return {p.relative_to(exp).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(exp.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", CASES)
def test_expected_output(case: str, tmp_path: Path) -> None:
    got = _generate(case, tmp_path)
    exp_dir = GOLDEN / case / "expected"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        shutil.rmtree(exp_dir, ignore_errors=True)
        pipeline.write(got, exp_dir)
        return
    expected = _expected(case)
    problems = []
    for rel in sorted(set(got) | set(expected)):
        if rel not in expected:
            problems.append(f"new file {rel} (not in expectations)")
        elif rel not in got:
            problems.append(f"file {rel} is no longer generated")
        elif got[rel] != expected[rel]:
            problems.append("".join(difflib.unified_diff(
                expected[rel].splitlines(True), got[rel].splitlines(True),
                f"expected/{rel}", f"generated/{rel}", n=2)))
    assert not problems, ("generated output differs from tests/golden/" + case +
                          "/expected (run `make golden` to accept):\n" + "\n".join(problems))


@pytest.mark.parametrize("case", CASES)
def test_expected_output_builds_and_runs(case: str, tmp_path: Path) -> None:
    """Compile the *expected* files, load them in API and ABI mode, and call the real library.

    Each mode runs against the library as ``impl.c`` builds it and, where the case has a resolver
    (``resolver: {kind: proc_address}``), built without it (``-DGOLDEN_NO_RESOLVER``): both modes must resolve
    through the resolver with each function's pin, and fall back to dlsym when it refuses or is absent.
    """
    pkg = tmp_path / "pkg"
    shutil.copytree(GOLDEN / case / "expected", pkg)
    variants: dict[str, list[str]] = {"": []}
    if (yaml.safe_load((GOLDEN / case / "golden.yaml").read_text()).get("resolver") or {}).get("kind") == "proc_address":
        variants["no-resolver"] = ["-DGOLDEN_NO_RESOLVER"]
    homes = {}
    for variant, defines in variants.items():
        home = tmp_path / (variant or "sdk")
        (home / "lib").mkdir(parents=True)
        subprocess.run(["gcc", "-shared", "-fPIC", "-O1", *defines, "-I", str(GOLDEN / case / "include"),
                        str(GOLDEN / case / "impl.c"), "-o", str(home / "lib" / "libiagolden.so")], check=True)
        homes[variant] = home
    lib_dirs = sorted(p.parent for p in pkg.glob("ironaccelerator/backends/*/*/_cffi_build.py"))
    assert lib_dirs
    for d in lib_dirs:
        build_library(d, api=True)
    script = str(GOLDEN / case / "check_runtime.py")

    def check(mode: str) -> None:
        for variant, home in homes.items():
            env = {**os.environ, "PYTHONPATH": str(pkg), "IA_GOLDEN_HOME": str(home)}
            r = subprocess.run([sys.executable, script, mode, *([variant] if variant else [])], env=env,
                               capture_output=True, text=True)
            assert r.returncode == 0 and r.stdout.startswith("golden runtime ok"), \
                f"{mode} {variant or 'with resolver'}:\n{r.stdout}{r.stderr}"

    check("api")
    # ABI mode: without the compiled module the pre-parsed ABI module takes over ...
    for d in lib_dirs:
        for so in d.glob("_cffi.*.so"):
            so.unlink()
    check("abi")
    # ... and without that, the cdef parsed at import time.
    for d in lib_dirs:
        (d / "_cffi_abi.py").unlink()
    check("abi")


def test_missing_library_is_reported_at_first_call(tmp_path: Path) -> None:
    """Import never needs the vendor library; the first call raises LIBRARY_NOT_FOUND naming what was tried."""
    pkg = tmp_path / "pkg"
    shutil.copytree(GOLDEN / "basic" / "expected", pkg)
    code = (
        "from ironaccelerator import Error, ErrorKind\n"
        "from ironaccelerator.backends.test import golden as g\n"
        "assert not g.has('goldenInit')\n"
        "try:\n    g.goldenInit(0)\nexcept Error as e:\n"
        "    assert e.kind is ErrorKind.LIBRARY_NOT_FOUND and 'libiagolden.so' in str(e), e\n"
        "    print('ok', g.BINDING_MODE)\n"
        "else:\n    raise SystemExit('no error')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "IA_GOLDEN_HOME"}
    env["PYTHONPATH"] = str(pkg)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr
