"""The generator as a distribution (issue 24 item 1): its sdist and wheel carry everything ``generate`` and ``build``
read (the templates, the default specs, the hand-written runtime's Python and C headers), and the installed
``ironaccel-gen``, run from a directory outside the checkout, lists the SDKs, regenerates the checked-in tree byte for
byte, and writes a self-contained tree (``ironaccelerator`` beside ``ironaccelerator_runtime``) that builds and
imports in API mode.

Offline and quick (about 10 s): the sdist is built with setuptools' PEP 517 hooks from this checkout, the wheel
from the unpacked sdist (``pip wheel --no-build-isolation``: this venv's setuptools), and it is installed with
``--no-deps --no-index`` into a fresh venv (no pip in it) whose dependencies come from this venv's site-packages by a
plain path entry (its ``.pth`` files are not read from there: neither the editable install of the generator nor the
checkout's generated/ and runtime/ are visible to the installed one, which the test checks)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from conftest import GENERATED, ROOT, RUNTIME

DATA_DIRS = ("templates", "specs", "runtime/ironaccelerator_runtime")


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def _data_files() -> list[str]:
    """The checkout's data files, relative to its root (as they lie under ironaccelerator_gen/_data/)."""
    out = []
    for d in DATA_DIRS:
        for p in sorted((ROOT / d).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
                out.append(p.relative_to(ROOT).as_posix())
    return out


class Installed:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        dist = tmp / "dist"
        dist.mkdir()
        hook = "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))"
        proc = _run([sys.executable, "-c", hook, str(dist)], cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
        self.sdist = dist / proc.stdout.strip().splitlines()[-1]
        with tarfile.open(self.sdist) as tf:
            self.sdist_names = tf.getnames()
            tf.extractall(tmp / "src", filter="data")
        (src,) = (tmp / "src").iterdir()
        proc = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                     "-w", str(dist), str(src)], cwd=tmp)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (self.wheel,) = dist.glob("ironaccelerator_gen-*.whl")
        self.build_log = proc.stdout + proc.stderr
        venv = tmp / "venv"
        proc = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp)
        assert proc.returncode == 0, proc.stderr
        self.python = venv / "bin" / "python"
        self.gen = venv / "bin" / "ironaccel-gen"
        purelib = _run([str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp)
        # the dependencies (jinja2, libclang, cffi, PyYAML, pycparser, setuptools) and the SDK wheels (nvrtc) of
        # this venv, as a path entry after the fresh venv's own site-packages
        Path(purelib.stdout.strip(), "ia-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        proc = _run([sys.executable, "-m", "pip", "--python", str(self.python), "install", "-q", "--no-deps",
                     "--no-index", str(self.wheel)], cwd=tmp)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        self.cwd = tmp / "elsewhere"
        self.cwd.mkdir()
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        metal_cpp = ROOT / ".venv" / "sdk" / "metal-cpp"  # `make metal-cpp`: so that metal.metal is generated too
        if (metal_cpp / "Metal" / "Metal.hpp").is_file():
            self.env.setdefault("IRONACCEL_METAL_CPP", str(metal_cpp))

    def gen_run(self, *args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
        return _run([str(self.gen), *args], cwd=self.cwd, env=self.env, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return Installed(tmp_path_factory.mktemp("install"))


def test_wheel_and_sdist_carry_the_data(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    files = _data_files()
    assert len(files) > 40
    missing = [f for f in files if f"ironaccelerator_gen/_data/{f}" not in names]
    assert not missing, f"the wheel lacks {missing}"
    for lic in ("LICENSE", "NOTICE", "docs/THIRD_PARTY.md"):
        assert any(n.endswith(f".dist-info/licenses/{lic}") for n in names), lic
    prefix = installed.sdist_names[0].split("/")[0]
    missing = [f for f in [*files, "LICENSE", "NOTICE", "docs/THIRD_PARTY.md", "pyproject.toml"]
               if f"{prefix}/{f}" not in installed.sdist_names]
    assert not missing, f"the sdist lacks {missing}"
    # no setuptools warning about the data directories (each is listed in pyproject.toml)
    assert "absent from the `packages` configuration" not in installed.build_log
    metadata = zipfile.ZipFile(installed.wheel).read(
        next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata


def test_installed_generator_reads_its_package_data(installed: Installed) -> None:
    probe = ("import ironaccelerator_gen.data as d, importlib.util as u; "
             "print(d.INSTALLED, d.ROOT, u.find_spec('ironaccelerator') is None, "
             "u.find_spec('ironaccelerator_runtime') is None)")
    proc = _run([str(installed.python), "-c", probe], cwd=installed.cwd, env=installed.env)
    assert proc.returncode == 0, proc.stderr
    flag, root, no_pkg, no_runtime = proc.stdout.split()
    assert flag == "True" and Path(root).is_relative_to(installed.tmp / "venv"), proc.stdout
    assert no_pkg == "True" and no_runtime == "True", "the checkout's packages leak into the fresh venv"


def test_installed_sdks_says_what_it_found(installed: Installed) -> None:
    proc = installed.gen_run("sdks")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip(), "sdks printed nothing"
    assert "opencl" in proc.stdout  # found (/usr/include/CL) or listed as not found
    (installed.cwd / "empty").mkdir(exist_ok=True)
    proc = installed.gen_run("sdks", "--specs", "empty")
    assert proc.returncode == 0 and "no SDK" in proc.stdout, proc.stdout + proc.stderr
    proc = installed.gen_run("sdks", "--specs", "no-such-dir")
    assert proc.returncode == 2 and "no-such-dir" in proc.stderr


def test_installed_generate_reproduces_the_tree(installed: Installed) -> None:
    """The default specs, templates and runtime of the wheel give the checked-in tree byte for byte (the libraries
    whose SDK is found here), with the runtime copied beside it; --check then finds nothing to change."""
    proc = installed.gen_run("generate", "--out", "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = installed.cwd / "out"
    produced = sorted(p.relative_to(out).as_posix() for p in out.rglob("*")
                      if p.is_file() and not p.name.startswith(".ironaccel-gen"))
    assert produced
    runtime = [r for r in produced if r.startswith("ironaccelerator_runtime/")]
    assert sorted(runtime) == sorted(f"ironaccelerator_runtime/{p.relative_to(RUNTIME / 'ironaccelerator_runtime').as_posix()}"
                                     for p in (RUNTIME / "ironaccelerator_runtime").rglob("*")
                                     if p.is_file() and "__pycache__" not in p.parts)
    for rel in produced:
        ref = (RUNTIME if rel.startswith("ironaccelerator_runtime/") else GENERATED) / rel
        assert (out / rel).read_bytes() == ref.read_bytes(), f"{rel} differs from the checkout's"
    proc = installed.gen_run("generate", "--out", "out", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_installed_generate_build_import(installed: Installed) -> None:
    """A tree generated and built by the installed generator imports in API mode from itself alone, and runs a kernel
    on OpenCL where a device is found (PoCL here)."""
    proc = installed.gen_run("generate", "--only", "opencl.cl", "--only", "foundation.foundation", "--out", "tree")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = installed.gen_run("build", "--out", "tree")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # every module compiled, the Objective-C ones too (whose build script finds ia_objc.h through the runtime package)
    assert "ABI mode" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert list((installed.cwd / "tree" / "ironaccelerator" / "backends" / "foundation" / "foundation").glob("_cffi.*.so"))
    script = textwrap.dedent("""
        import array, sys
        import ironaccelerator as ia, ironaccelerator_runtime
        from ironaccelerator.backends.opencl import cl
        here = sys.argv[1]
        assert ia.__file__.startswith(here) and ironaccelerator_runtime.__file__.startswith(here), \\
            (ia.__file__, ironaccelerator_runtime.__file__)
        print("mode", cl.BINDING_MODE)
        try:
            backend = ia.BackendRegistry.default().get(ia.BackendKind.OPENCL)
            dev = backend.open(0)
        except ia.Error as e:
            print("no device", e)
            raise SystemExit(0)
        with dev:
            s = dev.create_stream()
            a = array.array("f", range(256))
            buf_a, buf_c = dev.alloc(len(a) * 4), dev.alloc(len(a) * 4)
            s.copy_from_host(buf_a, a)
            k = dev.load_module("__kernel void twice(__global const float *a, __global float *c)"
                                "{ int i = get_global_id(0); c[i] = 2 * a[i]; }").kernel("twice")
            s.launch(ia.KernelLaunch(k, ia.LaunchDims(grid=4, block=64), (buf_a, buf_c)))
            c = array.array("f", bytes(len(a) * 4))
            s.copy_to_host(c, buf_c)
            s.synchronize()
            assert list(c) == [2 * x for x in a], list(c)[:8]
            print("ran")
    """)
    tree = installed.cwd / "tree"
    env = dict(installed.env, PYTHONPATH=str(tree))
    proc = _run([str(installed.python), "-c", script, str(tree)], cwd=installed.cwd, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mode api" in proc.stdout, proc.stdout
    assert "ran" in proc.stdout or "no device" in proc.stdout, proc.stdout


def test_generate_runtime_option_in_the_checkout(tmp_path: Path) -> None:
    """In a checkout, ``generate`` leaves the runtime out of --out (the checkout's .pth puts runtime/ on the path);
    ``--runtime copy`` writes it beside the package (its C headers too, owned like the rest: a second run changes
    nothing), and a later run without it removes the copy."""
    def gen(*args: str) -> subprocess.CompletedProcess[str]:
        return _run([sys.executable, "-m", "ironaccelerator_gen", "generate", "--only", "opencl.cl", "--out", "out",
                     *args], cwd=tmp_path)
    proc = gen()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (tmp_path / "out" / "ironaccelerator_runtime").exists()
    proc = gen("--runtime", "copy")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    copied = tmp_path / "out" / "ironaccelerator_runtime"
    assert (copied / "include" / "ia_runtime.h").read_bytes() == \
        (RUNTIME / "ironaccelerator_runtime" / "include" / "ia_runtime.h").read_bytes()
    assert (copied / "traits" / "__init__.py").is_file() and (copied / "traits" / "device.py").is_file() and (copied / "py.typed").is_file()
    proc = gen("--runtime", "copy", "--force")
    assert proc.returncode == 0 and "generate: 0 file(s) changed" in proc.stdout, proc.stdout + proc.stderr
    proc = gen("--runtime", "copy", "--check")
    assert proc.returncode == 0, proc.stdout
    proc = gen("--force")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not any(p.is_file() for p in copied.rglob("*") if "__pycache__" not in p.parts)
