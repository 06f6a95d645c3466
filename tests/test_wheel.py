"""The generated package's wheel (packaging/ironaccelerator, `make wheel`) and the installed-package test mode
(`make test-wheel`: scripts/test-wheel.sh installs the wheel into a fresh venv and runs the conformance suite
against it)."""

from __future__ import annotations

import email.parser
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conftest import GENERATED, ROOT

PACKAGING = ROOT / "packaging" / "ironaccelerator"
LIBRARIES = sorted(p.parent for p in (GENERATED / "ironaccelerator" / "backends").glob("*/*/_cffi_build.py"))


def _built() -> str | None:
    """Why the wheel cannot be built here (a library without this interpreter's compiled module), or None."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    missing = [str(lib.relative_to(GENERATED)) for lib in LIBRARIES if not (lib / ("_cffi" + suffix)).is_file()]
    return f"not built for this interpreter (run `ironaccel-gen build`): {missing}" if missing else None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    why = _built()
    if why is not None:
        pytest.skip(why)
    out = tmp_path_factory.mktemp("dist")
    work = tmp_path_factory.mktemp("src")  # a copy of packaging/: the build's own build/ and egg-info land there
    for name in ("pyproject.toml", "setup.py"):
        (work / name).write_bytes((PACKAGING / name).read_bytes())
    env = dict(os.environ, IRONACCEL_GENERATED=str(GENERATED), IRONACCEL_RUNTIME=str(ROOT / "runtime"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
                           "-w", str(out), str(work)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (whl,) = out.glob("*.whl")
    return whl


def test_wheel_tags(wheel: Path) -> None:
    """cpXY-cpXY (the modules use CPython outside the limited API: no abi3, never py3-none-any) and the
    platform the modules honestly meet: manylinux_2_N where they link only libc (vendor libraries are dlopen'ed)."""
    name, version, py, abi, plat = wheel.name[:-len(".whl")].split("-")
    import ironaccelerator

    assert (name, version) == ("ironaccelerator", ironaccelerator.__version__)
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert (py, abi) == (tag, tag)
    if sys.platform.startswith("linux"):
        assert plat.startswith("manylinux_2_") and plat.endswith(os.uname().machine), plat
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(f"ironaccelerator-{version}.dist-info/WHEEL").decode()
    assert "Root-Is-Purelib: false" in meta and f"Tag: {tag}-{tag}-{plat}" in meta, meta


def test_wheel_contents(wheel: Path) -> None:
    """Both packages; every library's compiled API module (for this interpreter), its _cffi_abi.py and the .cdef
    files the ABI fallback reads; not the build's inputs or stamps, nor anything of the checkout's."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = email.parser.Parser().parsestr(z.read("ironaccelerator-" + wheel.name.split("-")[1]
                                                     + ".dist-info/METADATA").decode())
    assert {"ironaccelerator/__init__.py", "ironaccelerator/_core.py", "ironaccelerator/__main__.py",
            "ironaccelerator/py.typed", "ironaccelerator_runtime/__init__.py", "ironaccelerator_runtime/loader.py",
            "ironaccelerator_runtime/py.typed", "ironaccelerator_runtime/backends/opencl/__init__.py",
            "ironaccelerator_runtime/backends/opencl/stream.py"} <= names
    for lib in LIBRARIES:
        rel = lib.relative_to(GENERATED).as_posix()
        for f in ("__init__.py", "_binding.py", "_cffi_abi.py", "_cffi" + suffix, "types.cdef", "abi.cdef"):
            assert f"{rel}/{f}" in names, (rel, f)
    for n in names:
        assert not n.endswith(("_cffi_build.py", "trampolines.c", ".ironaccel-build", ".h", ".pyc")), n
        assert not n.startswith(("generated/", "runtime/", "tests/", "generator/")), n
    assert meta["Name"] == "ironaccelerator" and meta["License-Expression"] == "Apache-2.0"
    assert any(r.startswith("cffi") for r in meta.get_all("Requires-Dist") or ())


def test_wheel_refuses_a_library_without_its_module(tmp_path: Path) -> None:
    """A library whose API module is missing (or built for another interpreter) makes the build fail, naming it:
    the wheel would import it in ABI mode."""
    why = _built()
    if why is not None:
        pytest.skip(why)
    import shutil

    gen = tmp_path / "generated"
    shutil.copytree(GENERATED / "ironaccelerator", gen / "ironaccelerator")
    lib = gen / LIBRARIES[0].relative_to(GENERATED)
    so = lib / ("_cffi" + sysconfig.get_config_var("EXT_SUFFIX"))
    so.rename(lib / "_cffi.cpython-399-x86_64-linux-gnu.so")
    work = tmp_path / "src"
    shutil.copytree(PACKAGING, work, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    env = dict(os.environ, IRONACCEL_GENERATED=str(gen), IRONACCEL_RUNTIME=str(ROOT / "runtime"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                           "-w", str(tmp_path / "dist"), str(work)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode != 0
    assert "cpython-399" in proc.stdout + proc.stderr and "ironaccel-gen build" in proc.stdout + proc.stderr
    assert not list(tmp_path.rglob("*.whl"))


def test_installed_mode_refuses_the_checkout() -> None:
    """IRONACCEL_TEST_INSTALLED (make test-wheel) fails loudly where the package under test would come from the
    checkout (here: this venv's .pth names generated/ and runtime/), instead of testing the tree again."""
    env = dict(os.environ, IRONACCEL_TEST_INSTALLED="1",
               PYTHONPATH=os.pathsep.join([str(GENERATED), str(ROOT / "runtime")]))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                           str(ROOT / "tests" / "test_conformance.py")], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert proc.returncode != 0
    assert "IRONACCEL_TEST_INSTALLED is set but ironaccelerator was imported from the checkout" in \
        proc.stdout + proc.stderr


def test_subprocesses_import_the_package_under_test() -> None:
    """The conformance suite's child processes put conftest.PACKAGE_PATHS on their path: the checkout's generated/
    and runtime/ normally, nothing under IRONACCEL_TEST_INSTALLED (the installed wheel's)."""
    import conftest

    assert conftest.PACKAGE_PATHS == [str(GENERATED), str(ROOT / "runtime")]
    text = (ROOT / "tests" / "test_conformance.py").read_text(encoding="utf-8")
    assert '"generated"' not in text and "'generated'" not in text


# ------------------------------------------------------------------ what the package was generated from


def test_generated_from_records_the_specs() -> None:
    """_core.GENERATED_FROM: the generator's version, the sha256 of every spec file that generate read (core,
    libraries, backends; named relative to specs/, no absolute path), each library's and backend's spec."""
    import hashlib

    import ironaccelerator
    from ironaccelerator._core import BUILTIN_BACKENDS, GENERATED_FROM

    specs = ROOT / "specs"
    assert GENERATED_FROM["generator"] == f"ironaccel-gen {ironaccelerator.__version__}"
    want = {p.relative_to(specs).as_posix(): "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest()
            for p in specs.rglob("*.yaml")}
    assert GENERATED_FROM["specs"] == want
    libs = {f"{lib.parent.name}.{lib.name}" for lib in LIBRARIES}
    assert set(GENERATED_FROM["libraries"]) == libs
    assert GENERATED_FROM["libraries"]["opencl.cl"] == {"backend": "OPENCL", "spec": "opencl/cl.yaml"}
    assert set(GENERATED_FROM["backends"]) == {k.name for k in BUILTIN_BACKENDS}
    assert GENERATED_FROM["backends"]["QNN"] == {"vendor": "qnn", "spec": "qnn/backend.yaml"}
    assert str(ROOT) not in repr(GENERATED_FROM)


def test_inventory_json_shows_generated_from() -> None:
    """`python -m ironaccelerator --json`: each backend's entry carries its "generated_from" (the spec digests and
    each library's SDK version), whether or not the backend is available here."""
    import json

    from ironaccelerator._core import GENERATED_FROM

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(GENERATED), str(ROOT / "runtime")]))
    proc = subprocess.run([sys.executable, "-m", "ironaccelerator", "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    by = {e["backend"]: e["generated_from"] for e in json.loads(proc.stdout)}
    specs = GENERATED_FROM["specs"]
    for kind, g in by.items():
        assert g["generator"] == GENERATED_FROM["generator"]
        assert g["core_spec"] == {"spec": "core.yaml", "digest": specs["core.yaml"]}
        spec = GENERATED_FROM["backends"][kind]["spec"]
        assert g["backend_spec"] == {"spec": spec, "digest": specs[spec]}, kind
        assert g["libraries"] and all(lib["digest"] == specs[lib["spec"]] for lib in g["libraries"].values())
    from ironaccelerator.backends.opencl import cl

    assert by["OPENCL"]["libraries"] == {"opencl.cl": {"spec": "opencl/cl.yaml", "digest": specs["opencl/cl.yaml"],
                                                        "sdk_version": cl.SDK_VERSION}}
    assert set(by["CUDA"]["libraries"]) == {"cuda.driver", "cuda.nvrtc", "cuda.nvtx"}
