"""Expectation (golden) tests, bindgen style: one directory per behaviour under ``tests/golden/<case>/``.

A case is a small header (``include/<case>.h``; none for a ``frontend: declared`` spec) and its spec
(``<case>.yaml``: vendor ``test``, library ``<case>``), ``expected/``, ``impl.c`` (a real implementation, built
into ``libia_<case>.so``) and ``check_<case>.py`` (the behaviour, exercised through the generated wrappers).

What a case compares is what its ``expected/`` holds: the files of its library output
(``ironaccelerator/backends/test/<case>/``) that show its behaviour, not all 8, so that a change elsewhere in
the templates re-blesses only the cases whose behaviour it touches.  Each declared file must be generated and
equal, with either C front-end (a failure prints a unified diff); files a case does not declare are not
compared; a case declares at least one, and every kind of file is declared by some case.  Build ids and the
generator's version are masked (:func:`mask`: ``BUILD_ID = "<build id>"``, ``ironaccel-gen <version>``, in
expected/ too): the id digests the runtime's ia_runtime.h / ia_objc.h, so an edit of those headers, or a version
bump, changes no comparison.  ``UPDATE_GOLDEN=1`` (``make golden``) rewrites
the declared files that differ and nothing else (:func:`accept`; a new case without expected/ gets all its
files, to prune).  What each case declares, and why:

========================  ==========================================================================
case                      declared files (what in them is the case's behaviour)
========================  ==========================================================================
abi_major                 _binding.py (loader names with {major} filled, the AbiMajor check)
arrays                    __init__.py, trampolines.c (sequences converted, in Python and in C)
constants                 __init__.py, types.cdef (values, IntEnums, SDK_VERSION; the enums' cdef)
declared                  types.cdef, api.cdef, abi.cdef (the spec's declarations, as both front-ends parse them)
device_memory             trampolines.c (_fast._devmem_allocator and _DeviceMemory)
device_memory_create      trampolines.c (the same, over a creator returning its handle: IA_DEVMEM_ALLOCATE)
host_copy                 trampolines.c (_fast._host_copier: the write and read macros IA_HOSTCOPY_WRITE/READ)
device_pointers           __init__.py (device: true from rules: and a parameter's own entry; the wrapper asks the
                          runtime for an Allocation's, a slice's or an int's address)
errors                    _binding.py, __init__.py, unchecked.py, trampolines.c (the error table, status:
                          results in both wrappers, raw codes unchecked)
fast_path                 trampolines.c, __init__.py, _cffi_build.py (the compiled wrapper of every shape and
                          its Python twin; the build script)
kernel_launch             trampolines.c (_fast._launch)
objc_messages             trampolines.c, _binding.py, __init__.py, _cffi_build.py (message trampolines, the
                          runtime and error domains, the classes, the Objective-C build script)
out_params                __init__.py, trampolines.c (out/inout parameters as results, in Python and in C; an
                          out struct's type tag set by fill:)
per_thread                _binding.py, abi.cdef, trampolines.c (the _ptds symbols of each binding mode)
pool_memory               trampolines.c (_fast._pool_alloc and _PoolMemory)
resolver_dlsym            _binding.py, unchecked.py (symbols, versions, bind.exclude; raw out-pointers)
resolver_proc_address     _binding.py, trampolines.c (pins and flags; the resolver in C)
resolver_table            _binding.py, trampolines.c (the provider table and its entries)
status_mask               _binding.py, __init__.py, trampolines.c (the masked code, in both wrappers)
strings                   __init__.py, trampolines.c (buffers, size functions, the compile log)
structs                   types.cdef, __init__.py (nested structs, new_struct)
========================  ==========================================================================

Golden files alone would keep passing while codegen is broken, so every case's *whole* generated library
output (all 8 files, declared or not) is also built (cffi API mode), imported and run against the real library
in API mode, in ABI mode, and in ABI mode without the pre-parsed ``_cffi_abi.py``.
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
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from ironaccelerator_gen import pipeline, render
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
    """The files the case declares (those its expected/ holds), as stored: build ids masked."""
    return read_expected(GOLDEN / case / "expected")


def read_expected(exp: Path) -> dict[str, str]:
    return {p.relative_to(exp).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(exp.rglob("*")) if p.is_file()}


# What changes with edits that say nothing about a case, compared (and stored) masked:
# - _binding.py's and _cffi_build.py's ``BUILD_ID = "<24 hex digits>"``, the digest of the library's build inputs
#   *and* of the runtime's ia_runtime.h (ia_objc.h for an Objective-C library): generator/render.py build_id;
# - the generator's version in every file's banner (``Generated by ironaccel-gen 0.1.0 from ...``).
BUILD_ID = re.compile(r"^(BUILD_ID = )([\"'])([0-9a-f]{24})\2$", re.MULTILINE)
MASKED_BUILD_ID = "<build id>"
VERSION = re.compile(r"^(\W{0,3}Generated by ironaccel-gen )(\S+)( from )", re.MULTILINE)
MASKED_VERSION = "<version>"


def mask(text: str) -> str:
    """``text`` with its build id and generator version masked (:data:`MASKED_BUILD_ID`, :data:`MASKED_VERSION`):
    what a case's expected/ stores."""
    text = BUILD_ID.sub(lambda m: f"{m[1]}{m[2]}{MASKED_BUILD_ID}{m[2]}", text)
    return VERSION.sub(lambda m: f"{m[1]}{MASKED_VERSION}{m[3]}", text, count=1)


def compare(got: dict[str, str], want: dict[str, str], label: str) -> list[str]:
    """The problems of generated library files ``got`` against a case's declared files ``want`` (masked): a
    declared file no longer generated, or a unified diff.  Generated files the case does not declare are not
    compared; a case that declares none is a problem (it would check nothing)."""
    if not want:
        return ["expected/ declares no file: a case compares at least one (see tests/golden/README.md)"]
    problems = []
    for rel in sorted(want):
        if rel not in got:
            problems.append(f"declared file {rel} is no longer generated (delete it from expected/ if that is right)")
        elif mask(got[rel]) != want[rel]:
            problems.append("".join(difflib.unified_diff(
                want[rel].splitlines(True), mask(got[rel]).splitlines(True), f"expected/{rel}", f"{label}/{rel}", n=2)))
    return problems


def accept(got: dict[str, str], exp: Path) -> list[str]:
    """``UPDATE_GOLDEN=1``: rewrite (masked) the declared files of ``exp`` whose generated text differs; returns
    the paths written.  A case with no expected/ yet gets every file of its library, to prune to those that show
    its behaviour.  Never adds an undeclared file nor deletes one (a declared file no longer generated stays
    a failure: deleting it is the author's call)."""
    want = read_expected(exp) if exp.is_dir() else {}
    written = []
    for rel in sorted(want or got):
        if rel in got and mask(got[rel]) != want.get(rel):
            (exp / rel).parent.mkdir(parents=True, exist_ok=True)
            (exp / rel).write_text(mask(got[rel]), encoding="utf-8")
            written.append(rel)
    return written


def compile_impl(case: str, home: Path, defines: list[str]) -> subprocess.Popen[bytes]:
    """Start building the case's impl.c into ``home/lib/libia_<case>.so`` (what its spec's loader finds)."""
    (home / "lib").mkdir(parents=True, exist_ok=True)
    include = GOLDEN / case / "include"
    return subprocess.Popen(["gcc", "-shared", "-fPIC", "-O1", "-Wall", "-Werror", *defines,
                             *(["-I", str(include)] if include.is_dir() else []), str(GOLDEN / case / "impl.c"),
                             "-o", str(home / "lib" / f"libia_{case}.so")])


def write_package(cases: list[str], pkg: Path, files: dict[str, str]) -> None:
    """A package of the package-level files among ``files`` and each case's whole generated library output (all
    8 files, build ids as generated: expected/ holds only the declared ones, masked)."""
    libs = {case: library_files(case, files) for case in cases}
    assert all(libs.values()), f"no library output among the files for {[c for c, lib in libs.items() if not lib]}"
    pipeline.write({**package_files(files), **{rel: text for lib in libs.values() for rel, text in lib.items()}}, pkg)


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
        accept(got, exp_dir)
    problems = compare(got, expected(case), frontend)
    assert not problems, (f"{frontend} output differs from tests/golden/{case}/expected (run `make golden` to "
                          "accept):\n" + "\n".join(problems))


@pytest.mark.parametrize("case, header", [("errors", "RUNTIME_HEADER"), ("objc_messages", "OBJC_HEADER")])
def test_an_edit_of_the_runtime_header_changes_no_comparison(case: str, header: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The header's digest is in the build id that _binding.py and _cffi_build.py carry: generated against an
    edited header (a comment added), the case's build id differs but its declared files compare equal, and
    ``make golden`` rewrites nothing; a real change in a declared file still fails, with its diff."""
    before = library_files(case, generate([case], tmp_path / "before", FRONTENDS[0]))
    edited = tmp_path / getattr(render, header).name
    edited.write_text(getattr(render, header).read_text(encoding="utf-8") + "/* an unrelated comment */\n",
                      encoding="utf-8")
    monkeypatch.setattr(render, header, edited)
    after = library_files(case, generate([case], tmp_path / "after", FRONTENDS[0]))
    binding = library_dir(case) + "_binding.py"
    ids = [[m[3] for m in BUILD_ID.finditer(files[binding])] for files in (before, after)]
    assert ids[0] and ids[1] and ids[0] != ids[1], ids  # the header is in the digest ...
    assert {rel for rel in after if BUILD_ID.search(after[rel])} == {binding, library_dir(case) + "_cffi_build.py"}
    assert compare(after, expected(case), "edited") == []  # ... and masked out of the comparison
    exp = tmp_path / "expected"
    shutil.copytree(GOLDEN / case / "expected", exp)
    assert accept(after, exp) == [] and read_expected(exp) == expected(case)
    # a real change in a declared file fails, and says where
    declared = sorted(expected(case))[0]
    changed = {**after, declared: after[declared].replace("\n", "\n# a real change\n", 3)}
    (problem,) = compare(changed, expected(case), "edited")
    assert f"--- expected/{declared}" in problem and "\n+# a real change\n" in problem, problem
    # a build id that is not masked fails too (an expected/ file written by hand)
    unmasked = {declared: after[declared]} if BUILD_ID.search(after[declared]) else {binding: after[binding]}
    assert compare(after, unmasked, "edited") != []


def test_a_new_generator_version_changes_no_comparison(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       generated: dict[str, dict[str, str] | None]) -> None:
    """The version in every file's banner is masked: a version bump re-blesses nothing."""
    files = generated[FRONTENDS[0]]
    assert files is not None
    monkeypatch.setattr(render, "__version__", "9.8.7")
    case = "declared"
    bumped = library_files(case, generate([case], tmp_path, FRONTENDS[0]))
    assert all("ironaccel-gen 9.8.7 from " in text for text in bumped.values())
    assert all(bumped[rel] != text for rel, text in library_files(case, files).items())
    assert compare(bumped, expected(case), "bumped") == []


def test_golden_update_rewrites_only_the_declared_files(tmp_path: Path,
                                                         generated: dict[str, dict[str, str] | None]) -> None:
    """``UPDATE_GOLDEN=1`` (accept) writes the declared files that differ, masked, and nothing else; a case
    without expected/ gets all its files (to be pruned); a declared file no longer generated is left to fail."""
    files = generated[FRONTENDS[0]]
    assert files is not None
    case = "constants"
    got = library_files(case, files)
    exp = tmp_path / "expected"
    shutil.copytree(GOLDEN / case / "expected", exp)
    declared = sorted(read_expected(exp))
    assert 0 < len(declared) < len(got), declared
    (exp / declared[0]).write_text("stale\n", encoding="utf-8")
    assert accept(got, exp) == [declared[0]]
    assert read_expected(exp) == expected(case)  # no undeclared file added
    assert accept({rel: text for rel, text in got.items() if rel != declared[0]}, exp) == []
    assert (exp / declared[0]).is_file()
    new = tmp_path / "new-case" / "expected"
    assert accept(got, new) == sorted(got)
    assert read_expected(new) == {rel: mask(text) for rel, text in got.items()}


def test_every_generated_file_is_declared_by_some_case(generated: dict[str, dict[str, str] | None]) -> None:
    """Each case declares only the files that show its behaviour, but every kind of file the compiler writes
    for a library (a template's output) is compared by at least one case."""
    files = generated[FRONTENDS[0]]
    assert files is not None
    kinds = {rel.rpartition("/")[2] for case in CASES for rel in library_files(case, files)}
    declared = {rel.rpartition("/")[2] for case in CASES for rel in expected(case)}
    assert kinds - declared == set(), f"generated, compared by no case: {sorted(kinds - declared)}"


def test_the_docstring_says_what_each_case_declares() -> None:
    """The table above (this module's docstring) lists each case's declared files as its expected/ holds them."""
    doc = __doc__ or ""
    listed = {}
    for line in doc.split("\n========================  ")[2].splitlines()[1:]:
        if line[:1].strip():
            name, _, rest = line.partition(" ")
            listed[name] = sorted(f.strip() for f in rest.strip().partition(" (")[0].split(","))
    assert listed == {case: sorted(rel.rpartition("/")[2] for rel in expected(case)) for case in CASES}


def test_every_directory_is_a_case() -> None:
    """A case whose spec is misnamed would be skipped silently: every directory here must be one."""
    dirs = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert dirs == CASES, f"not cases (no <case>/<case>.yaml): {sorted(set(dirs) - set(CASES))}"
    for case in CASES:
        assert (GOLDEN / case / "impl.c").is_file() and (GOLDEN / case / f"check_{case}.py").is_file(), case
        assert expected(case), f"{case}: expected/ declares no file (a case compares at least one)"


def test_a_case_alone_generates_what_it_does_among_the_others(tmp_path: Path,
                                                             generated: dict[str, dict[str, str] | None]) -> None:
    """The cases are generated together (above): a library's output (all of it, build id included) must not
    depend on the other specs."""
    together = generated[FRONTENDS[0]]
    assert together is not None
    alone = generate([CASES[0]], tmp_path, FRONTENDS[0])
    assert library_files(CASES[0], alone) == library_files(CASES[0], together)


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
        # (a compile failure: with the compiler's own error lines, which say which line of which file)
        errors = [line.strip() for line in (getattr(exc, "output", "") or "").splitlines() if "error" in line]
        return f"{type(exc).__name__}: {exc}" + "".join(f"\n    {line}" for line in errors[:8])
    return None


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, generated: dict[str, dict[str, str] | None]) -> Runs:
    """Build every case's generated files (all of them, not only the declared ones) and library once, then run
    every case's check in every mode."""
    tmp = tmp_path_factory.mktemp("golden")
    pkg = tmp / "api"
    problems: dict[str, str] = {}
    files = generated[FRONTENDS[0]]
    if files is None:  # the cases generated together failed: each alone, those that generate are run
        files = {}
        for case in CASES:
            try:
                files.update(generate([case], tmp / "gen" / case, FRONTENDS[0]))
            except Exception as exc:
                problems[case] = f"generating it: {type(exc).__name__}: {exc}"
    write_package([c for c in CASES if c not in problems], pkg, files)
    names = sorted({v for case in CASES for v in variants(case)})
    homes = {v: tmp / f"home{'-' + v if v else ''}" for v in names}
    compilers = {(case, v): compile_impl(case, homes[v], defines)
                 for case in CASES for v, defines in variants(case).items()}
    with concurrent.futures.ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        built = [c for c in CASES if c not in problems]
        for case, failure in zip(built, pool.map(_build, [str(pkg / library_dir(c)) for c in built])):
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
    write_package(["resolver_dlsym"], pkg, generated[FRONTENDS[0]] or generate(["resolver_dlsym"], tmp_path / "gen"))
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
