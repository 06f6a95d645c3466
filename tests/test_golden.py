"""Expectation (golden) tests, bindgen style: one directory per behaviour under ``tests/golden/<case>/``.

A case is a small header (``include/<case>.h``; none for a ``frontend: declared`` spec) and its spec
(``<case>.yaml``: vendor ``test``, library ``<case>``), ``expected/`` (only the case's library output,
``ironaccelerator/backends/test/<case>/``), ``impl.c`` (a real implementation, built into ``libia_<case>.so``)
and ``check_<case>.py`` (the behaviour, exercised through the generated wrappers).

Each case's output must equal ``expected/`` with either C front-end (a failure prints a unified diff;
``UPDATE_GOLDEN=1``, ``make golden``, accepts the new output).  Golden files alone would keep passing while
codegen is broken, so the *expected* files of every case are also built (cffi API mode), imported and run
against the real library in API mode, in ABI mode, and in ABI mode without the pre-parsed ``_cffi_abi.py``.
A case whose spec has ``resolver: {kind: proc_address}`` also runs against its library built without the
resolver (``-DGOLDEN_NO_RESOLVER``; the check script gets ``no-resolver``), and one with ``resolver: {kind: table}``
against its library built without a matching provider (``-DGOLDEN_NO_MATCH``; ``no-match``), and one with
``loader: {abi_major: ...}`` against its library built as another major version (``-DGOLDEN_OTHER_MAJOR``;
``other-major``).  The cases share the work: their
libraries and modules are built in parallel, and one interpreter per (mode, variant) runs every case's check.
"""

from __future__ import annotations

import concurrent.futures
import difflib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from ironaccelerator_gen import pipeline
from ironaccelerator_gen.build import build_library

from conftest import GENERATED, ROOT, SPECS, core_text

GOLDEN = ROOT / "tests" / "golden"
CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / f"{p.name}.yaml").is_file())
FRONTENDS = ("clang", "pycparser")
MODES = ("api", "abi", "abi-cdef")  # compiled; pre-parsed ABI module; the cdef parsed at import time
HOME_ENV = "IA_GOLDEN_HOME"  # every case's loader: sdk_env [IA_GOLDEN_HOME], sdk_dirs [lib]


def library_dir(case: str) -> str:
    """Where a case's library output lives in the package (all that its expected/ holds)."""
    return f"ironaccelerator/backends/test/{case}/"


def spec(case: str) -> dict[str, object]:
    loaded: dict[str, object] = yaml.safe_load((GOLDEN / case / f"{case}.yaml").read_text(encoding="utf-8"))
    return loaded


def variants(case: str) -> dict[str, list[str]]:
    """The builds of a case's impl.c that its check runs against: name -> compiler defines."""
    resolver, loader = spec(case).get("resolver"), spec(case).get("loader")
    if isinstance(loader, dict) and "abi_major" in loader:
        return {"": [], "other-major": ["-DGOLDEN_OTHER_MAJOR"]}
    if isinstance(resolver, dict) and resolver.get("kind") == "proc_address":
        return {"": [], "no-resolver": ["-DGOLDEN_NO_RESOLVER"]}
    if isinstance(resolver, dict) and resolver.get("kind") == "table":
        return {"": [], "no-match": ["-DGOLDEN_NO_MATCH"]}
    return {"": []}


def generate(cases: list[str], tmp_path: Path, frontend: str | None = None) -> dict[str, str]:
    """Every file the compiler generates from core.yaml and the cases' specs (the package's included)."""
    spec_dir = tmp_path / "specs"
    spec_dir.mkdir(parents=True)
    (spec_dir / "core.yaml").write_text(core_text(), encoding="utf-8")
    kinds = {}
    for case in cases:
        shutil.copy(GOLDEN / case / f"{case}.yaml", spec_dir / f"{case}.yaml")
        sdk = spec(case).get("sdk")
        if sdk:
            kinds[str(sdk)] = str(GOLDEN / case / "include")
    result = pipeline.compile_specs(spec_dir, kinds, frontend=frontend, base=tmp_path)
    assert not result.skipped, result.skipped
    files: dict[str, str] = result.files
    return files


def package_files(files: dict[str, str]) -> dict[str, str]:
    """The package-level files among generated ones: never compared here (generate --check keeps the real ones
    fresh), but the cases' libraries need them to be imported."""
    return {rel: text for rel, text in files.items()
            if not rel.startswith("ironaccelerator/backends/test/") or rel.count("/") == 3}  # (test/__init__.py)


def library_files(case: str, files: dict[str, str]) -> dict[str, str]:
    return {rel: text for rel, text in files.items() if rel.startswith(library_dir(case))}


def expected(case: str) -> dict[str, str]:
    exp = GOLDEN / case / "expected"
    return {p.relative_to(exp).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(exp.rglob("*")) if p.is_file()}


def compile_impl(case: str, home: Path, defines: list[str]) -> subprocess.Popen[bytes]:
    """Start building the case's impl.c into ``home/lib/libia_<case>.so`` (what its spec's loader finds)."""
    (home / "lib").mkdir(parents=True, exist_ok=True)
    include = GOLDEN / case / "include"
    return subprocess.Popen(["gcc", "-shared", "-fPIC", "-O1", "-Wall", "-Werror", *defines,
                             *(["-I", str(include)] if include.is_dir() else []), str(GOLDEN / case / "impl.c"),
                             "-o", str(home / "lib" / f"libia_{case}.so")])


def write_package(cases: list[str], pkg: Path, files: dict[str, str]) -> None:
    """A package of the package-level files among ``files`` and each case's *expected* library output."""
    pipeline.write(package_files(files), pkg)
    for case in cases:
        shutil.copytree(GOLDEN / case / "expected", pkg, dirs_exist_ok=True)


def build_case(case: str, tmp_path: Path) -> dict[str, str]:
    """One case built alone in API mode (for other tests): the environment that imports and runs it."""
    pkg, home = tmp_path / "pkg", tmp_path / "home"
    write_package([case], pkg, generate([case], tmp_path / "gen"))
    proc = compile_impl(case, home, [])
    build_library(pkg / library_dir(case), api=True)
    assert proc.wait() == 0
    return {**os.environ, "PYTHONPATH": str(pkg), HOME_ENV: str(home)}


# ------------------------------------------------------------------------------------------ expectations

@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str] | None]:
    """Every case generated in one run per front-end (a run's fixed cost, core.yaml and the templates, is most
    of a small case's); None where that run failed: then each case is generated alone, to say which failed."""
    out: dict[str, dict[str, str] | None] = {}
    for frontend in FRONTENDS:
        try:
            out[frontend] = generate(CASES, tmp_path_factory.mktemp(frontend), frontend)
        except Exception:
            out[frontend] = None
    return out


@pytest.mark.parametrize("frontend", FRONTENDS)
@pytest.mark.parametrize("case", CASES)
def test_expected_output(case: str, frontend: str, generated: dict[str, dict[str, str] | None],
                         tmp_path: Path) -> None:
    together = generated[frontend]
    got = library_files(case, together if together is not None else generate([case], tmp_path, frontend))
    exp_dir = GOLDEN / case / "expected"
    if os.environ.get("UPDATE_GOLDEN") == "1" and frontend == FRONTENDS[0]:
        shutil.rmtree(exp_dir, ignore_errors=True)
        pipeline.write(got, exp_dir)
        return
    want = expected(case)
    problems = []
    for rel in sorted(set(got) | set(want)):
        if rel not in want:
            problems.append(f"new file {rel} (not in expectations)")
        elif rel not in got:
            problems.append(f"file {rel} is no longer generated")
        elif got[rel] != want[rel]:
            problems.append("".join(difflib.unified_diff(
                want[rel].splitlines(True), got[rel].splitlines(True), f"expected/{rel}", f"{frontend}/{rel}", n=2)))
    assert not problems, (f"{frontend} output differs from tests/golden/{case}/expected (run `make golden` to "
                          "accept):\n" + "\n".join(problems))


def test_every_directory_is_a_case() -> None:
    """A case whose spec is misnamed would be skipped silently: every directory here must be one."""
    dirs = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert dirs == CASES, f"not cases (no <case>/<case>.yaml): {sorted(set(dirs) - set(CASES))}"
    for case in CASES:
        assert (GOLDEN / case / "impl.c").is_file() and (GOLDEN / case / f"check_{case}.py").is_file(), case


def test_a_case_alone_generates_what_it_does_among_the_others(tmp_path: Path) -> None:
    """The cases are generated together (above): a library's output must not depend on the other specs."""
    alone = generate([CASES[0]], tmp_path)
    assert library_files(CASES[0], alone) == expected(CASES[0])


def test_package_level_files_are_the_packages(generated: dict[str, dict[str, str] | None]) -> None:
    """expected/ keeps only each case's library output: the package-level files generated beside the cases are
    the checked-in package's (which `generate --check` keeps fresh), but for _core.py's table of the real
    backends and the test vendor's __init__."""
    files = generated[FRONTENDS[0]]
    assert files is not None
    package = sorted(rel for rel in package_files(files) if rel != "ironaccelerator/backends/test/__init__.py")
    assert "ironaccelerator/_core.py" in package and "ironaccelerator/__init__.py" in package, package
    for rel in package:
        if rel != "ironaccelerator/_core.py":
            assert files[rel] == (GENERATED / rel).read_text(encoding="utf-8"), rel


# ------------------------------------------------------------------------------- built, imported, run

@dataclass
class Runs:
    """What each (mode, variant) interpreter said: per case, None (passed) or the failure; ``output``: the
    interpreter's whole output when it did not report (a crash)."""

    results: dict[tuple[str, str], dict[str, str | None]]
    output: dict[tuple[str, str], str]
    problems: dict[str, str]  # case -> a build failure


def _build(lib_dir: str) -> str | None:
    try:
        build_library(Path(lib_dir), api=True)
    except Exception as exc:  # reported by the case's test, not the fixture
        return f"{type(exc).__name__}: {exc}"
    return None


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, generated: dict[str, dict[str, str] | None]) -> Runs:
    """Build every case's expected files and library once, then run every case's check in every mode."""
    tmp = tmp_path_factory.mktemp("golden")
    pkg = tmp / "api"
    write_package(CASES, pkg, generated[FRONTENDS[0]] or generate([CASES[0]], tmp / "gen"))
    names = sorted({v for case in CASES for v in variants(case)})
    homes = {v: tmp / f"home{'-' + v if v else ''}" for v in names}
    compilers = {(case, v): compile_impl(case, homes[v], defines)
                 for case in CASES for v, defines in variants(case).items()}
    problems: dict[str, str] = {}
    with concurrent.futures.ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for case, failure in zip(CASES, pool.map(_build, [str(pkg / library_dir(c)) for c in CASES])):
            if failure:
                problems[case] = f"building its expected files: {failure}"
    for (case, v), proc in compilers.items():
        if proc.wait() != 0:
            problems[case] = f"building impl.c ({v or 'default'}) failed"
    # ABI mode: without the compiled modules the pre-parsed ABI modules take over ...
    shutil.copytree(pkg, tmp / "abi", ignore=shutil.ignore_patterns("_cffi.*.so"))
    # ... and without those, the cdef parsed at import time
    shutil.copytree(pkg, tmp / "abi-cdef", ignore=shutil.ignore_patterns("_cffi.*.so", "_cffi_abi.py"))
    started: dict[tuple[str, str], subprocess.Popen[str]] = {}
    for mode in MODES:
        for v in names:
            cases = [c for c in CASES if v in variants(c) and c not in problems]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp / mode), str(GOLDEN)]), HOME_ENV: str(homes[v])}
            if mode != "api":  # ABI mode on purpose: accepted, no fallback warning (loader.abi_fallback)
                env["IRONACCEL_REQUIRE_API"] = "0"
            started[mode, v] = subprocess.Popen(
                [sys.executable, str(GOLDEN / "run_checks.py"), mode.split("-")[0], v, *cases],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    results: dict[tuple[str, str], dict[str, str | None]] = {}
    output: dict[tuple[str, str], str] = {}
    for key, runner in started.items():
        out, _ = runner.communicate(timeout=300)
        last = out.rstrip().rpartition("\n")[2]
        try:
            results[key] = json.loads(last)
        except ValueError:
            results[key] = {}
        output[key] = out
    return Runs(results, output, problems)


@pytest.mark.parametrize("case", CASES)
def test_expected_output_builds_and_runs(case: str, runs: Runs) -> None:
    """The case's expected files compile and import, and its check passes in each mode (and variant)."""
    assert case not in runs.problems, runs.problems[case]
    failures = []
    for mode in MODES:
        for v in variants(case):
            got = runs.results[mode, v]
            if case not in got:
                failures.append(f"{mode} {v or ''}: did not report; its interpreter said:\n{runs.output[mode, v]}")
            elif got[case] is not None:
                failures.append(f"{mode} {v or ''}:\n{got[case]}")
    assert not failures, "\n".join(failures)


def test_missing_library_is_reported_at_first_call(tmp_path: Path, generated: dict[str, dict[str, str] | None]) -> None:
    """Import never needs the vendor library; the first call raises LIBRARY_NOT_FOUND naming what was tried."""
    pkg = tmp_path / "pkg"
    write_package(["resolver_dlsym"], pkg, generated[FRONTENDS[0]] or generate(["resolver_dlsym"], tmp_path))
    code = (
        "from ironaccelerator import Error, ErrorKind\n"
        "from ironaccelerator.backends.test import resolver_dlsym as g\n"
        "assert not g.has('dlInit')\n"
        "try:\n    g.dlInit(0)\nexcept Error as e:\n"
        "    assert e.kind is ErrorKind.LIBRARY_NOT_FOUND and 'libia_resolver_dlsym.so' in str(e), e\n"
        "    print('ok', g.BINDING_MODE)\n"
        "else:\n    raise SystemExit('no error')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != HOME_ENV}
    env["PYTHONPATH"] = str(pkg)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr
