"""The binding mode you can see (issue 24 item 4): ``python -m ironaccelerator`` shows each library module's mode
("api": the compiled cffi module; "abi": the fallback, with the reason); a module that falls back to ABI mode
because its compiled module is missing or was built for another interpreter warns once (a RuntimeWarning naming
the module, the reason and the fix); ``IRONACCEL_REQUIRE_API=1`` makes that an ImportError; an ABI-only build
(``ironaccel-gen build --abi-only``) or an import blocked on purpose is expected and does not warn."""

from __future__ import annotations

import importlib.machinery
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import GENERATED, RUNTIME

LIB = Path("ironaccelerator") / "backends" / "opencl" / "cl"
MODULE = "ironaccelerator.backends.opencl.cl"
OURS = "_cffi" + importlib.machinery.EXTENSION_SUFFIXES[0]  # ex: _cffi.cpython-311-x86_64-linux-gnu.so


def _other_interpreter(name: str) -> str:
    """The same file name with another CPython's ABI tag (3.11 <-> 3.12)."""
    m = re.search(r"cpython-3(\d+)", name)
    if m is None:
        pytest.skip(f"not a CPython extension suffix: {name}")
    other = "12" if m.group(1) != "12" else "11"
    return name.replace(f"cpython-3{m.group(1)}", f"cpython-3{other}")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the generated package whose OpenCL module is built only for another interpreter."""
    if not (GENERATED / LIB / OURS).is_file():
        pytest.skip(f"{LIB / OURS} not built (ironaccel-gen build)")
    tmp = tmp_path_factory.mktemp("binding_mode")
    shutil.copytree(GENERATED / "ironaccelerator", tmp / "ironaccelerator",
                    ignore=shutil.ignore_patterns("__pycache__"))
    so = tmp / LIB / OURS
    so.rename(so.with_name(_other_interpreter(OURS)))
    return tmp


def _run(tree: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if k not in ("IRONACCEL_REQUIRE_API", "PYTHONWARNINGS")}
    e.update(PYTHONPATH=os.pathsep.join([str(tree), str(RUNTIME)]), **(env or {}))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=e, cwd=tree, timeout=120)


IMPORT = ("import ironaccelerator.backends.opencl.cl as cl, ironaccelerator.backends.opencl.cl.unchecked\n"
          "import importlib; importlib.reload(cl)\n"  # a second look at the module: still one warning
          "print(cl.BINDING_MODE)\n")


def test_a_module_built_for_another_interpreter_warns_once_and_runs_in_abi_mode(tree: Path) -> None:
    proc = _run(tree, "-c", IMPORT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "abi"
    warned = [line for line in proc.stderr.splitlines() if "RuntimeWarning" in line]
    assert len(warned) == 1, proc.stderr
    assert MODULE in warned[0] and "built for another interpreter" in warned[0], warned[0]
    assert _other_interpreter(OURS) in warned[0] and "ironaccel-gen build" in warned[0], warned[0]
    assert "IRONACCEL_REQUIRE_API=1" in warned[0], warned[0]


def test_python_dash_m_ironaccelerator_shows_each_modules_mode(tree: Path) -> None:
    proc = _run(tree, "-m", "ironaccelerator", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    ocl = next(e for e in data if e["backend"] == "OPENCL")
    (mod,) = ocl["modules"]
    assert (mod["module"], mod["library"], mod["mode"], mod["expected"]) == (MODULE, "cl", "abi", False), mod
    assert "built for another interpreter" in mod["reason"], mod
    cuda = next(e for e in data if e["backend"] == "CUDA")
    assert {m["module"]: m["mode"] for m in cuda["modules"]} == {
        f"ironaccelerator.backends.cuda.{lib}": "api" for lib in ("driver", "nvrtc", "nvtx")}, cuda["modules"]
    assert sum("RuntimeWarning" in line for line in proc.stderr.splitlines()) == 1, proc.stderr
    text = _run(tree, "-m", "ironaccelerator")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("OPENCL: "))
    assert "  binding: opencl.cl abi" in lines[at:], text.stdout
    assert any(line.startswith(f"    {MODULE}: abi: its compiled module") for line in lines[at:]), text.stdout
    cuda_at = next(i for i, line in enumerate(lines) if line.startswith("CUDA: "))
    if lines[cuda_at].startswith("CUDA: library loaded"):
        assert "  binding: cuda.driver api, cuda.nvrtc api, cuda.nvtx api" in lines, text.stdout
    else:  # unavailable, every module in API mode: its one line only
        assert not lines[cuda_at + 1].startswith("  "), text.stdout


def test_require_api_makes_the_fallback_an_error(tree: Path) -> None:
    proc = _run(tree, "-c", IMPORT, env={"IRONACCEL_REQUIRE_API": "1"})
    assert proc.returncode != 0
    assert "ImportError" in proc.stderr and MODULE in proc.stderr, proc.stderr
    assert "API mode required" in proc.stderr and "built for another interpreter" in proc.stderr, proc.stderr
    assert "ironaccel-gen build" in proc.stderr, proc.stderr
    # the inventory still runs, and says so
    inv = _run(tree, "-m", "ironaccelerator", "--json", env={"IRONACCEL_REQUIRE_API": "1"})
    assert inv.returncode == 0, inv.stderr
    (mod,) = next(e for e in json.loads(inv.stdout) if e["backend"] == "OPENCL")["modules"]
    assert mod["mode"] == "error" and "API mode required" in mod["reason"], mod
    # a module in API mode is untouched by the variable
    ok = _run(tree, "-c", "import ironaccelerator.backends.cuda.nvrtc as m; print(m.BINDING_MODE)",
              env={"IRONACCEL_REQUIRE_API": "1"})
    assert ok.returncode == 0 and ok.stdout.strip() == "api", ok.stderr


def test_a_missing_compiled_module_warns(tmp_path: Path) -> None:
    shutil.copytree(GENERATED / "ironaccelerator", tmp_path / "ironaccelerator",
                    ignore=shutil.ignore_patterns("__pycache__", "_cffi.*.so"))
    proc = _run(tmp_path, "-c", IMPORT)
    assert proc.returncode == 0 and proc.stdout.strip() == "abi", proc.stderr
    warned = [line for line in proc.stderr.splitlines() if "RuntimeWarning" in line]
    assert len(warned) == 1 and MODULE in warned[0] and "compiled module is missing" in warned[0], proc.stderr


def test_expected_abi_mode_does_not_warn(tmp_path: Path) -> None:
    """An ABI-only build (its stamp names no compiled module), IRONACCEL_REQUIRE_API=0 and an import blocked on
    purpose (sys.modules entry None, as tests/qnn_raw_child.py does) are ABI mode by choice: no warning."""
    shutil.copytree(GENERATED / "ironaccelerator", tmp_path / "ironaccelerator",
                    ignore=shutil.ignore_patterns("__pycache__", "_cffi.*.so"))
    (tmp_path / LIB / ".ironaccel-build").write_text("0123abcd\n", encoding="utf-8")
    proc = _run(tmp_path, "-c", IMPORT + "from ironaccelerator_runtime.loader import MODES\n"
                "print(MODES['ironaccelerator.backends.opencl.cl']['reason'])\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["abi", "it was built ABI-only (ironaccel-gen build --abi-only)"], proc.stdout
    assert "RuntimeWarning" not in proc.stderr, proc.stderr
    (tmp_path / LIB / ".ironaccel-build").unlink()
    accepted = _run(tmp_path, "-c", IMPORT, env={"IRONACCEL_REQUIRE_API": "0"})
    assert accepted.returncode == 0 and accepted.stdout.strip() == "abi", accepted.stderr
    assert "RuntimeWarning" not in accepted.stderr, accepted.stderr
    blocked = _run(GENERATED, "-c", f"import sys; sys.modules['{MODULE}._cffi'] = None\n" + IMPORT)
    assert blocked.returncode == 0 and blocked.stdout.strip() == "abi", blocked.stderr
    assert "RuntimeWarning" not in blocked.stderr, blocked.stderr
