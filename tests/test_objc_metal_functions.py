"""functions: of an objc spec over the IA Simulated Metal Device (tests/metal_sim: a test fixture, not Apple
Metal): tests/metal_sim/functions.yaml generated into a temporary directory, built, and run in API and ABI mode
against the real GNU Objective-C runtime and GNUstep Foundation.  MTLCreateSystemDefaultDevice and
MTLCopyAllDevices return +1 (the Create/Copy rule): the simulator's live-object counter returns to 0 once the
handles are closed or dropped, over 1,000 rounds, with no message to a deallocated object; a declared function
no library exports is SYMBOL_NOT_FOUND.  The checks are tests/metal_sim/functions_child.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ironaccelerator_gen import pipeline
from ironaccelerator_gen.build import build_library

from conftest import ROOT, RUNTIME, SPECS

SPEC = ROOT / "tests" / "metal_sim" / "functions.yaml"
CHILD = ROOT / "tests" / "metal_sim" / "functions_child.py"
LIBRARY = "ironaccelerator/backends/test/metal_sim"


@pytest.fixture(scope="module")
def packages(metal_sim: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The spec generated and built (API), a copy without the compiled module (ABI), and the simulator's home."""
    tmp = tmp_path_factory.mktemp("metal_functions")
    specs = tmp / "specs"
    specs.mkdir()
    shutil.copy(SPECS / "core.yaml", specs / "core.yaml")
    shutil.copy(SPEC, specs / "metal_sim.yaml")
    result = pipeline.compile_specs(specs, base=tmp)
    assert not result.skipped, result.skipped
    api = tmp / "api"
    pipeline.write(result.files, api)
    build_library(api / LIBRARY, api=True)
    shutil.copytree(api, tmp / "abi", ignore=shutil.ignore_patterns("_cffi.*.so", "__pycache__"))
    home = tmp / "home"
    (home / "lib").mkdir(parents=True)
    (home / "lib" / metal_sim.name).symlink_to(metal_sim)
    return {"api": api, "abi": tmp / "abi", "home": home}


@pytest.mark.parametrize("mode", ["api", "abi"])
def test_create_and_copy_are_plus_one_and_balance(mode: str, packages: dict[str, Path]) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(packages[mode]), str(RUNTIME)]),
               IA_METAL_SIM_HOME=str(packages["home"]))
    proc = subprocess.run([sys.executable, str(CHILD), mode], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == f"ok {mode}", proc.stdout + proc.stderr
    assert "without pool" not in proc.stderr, proc.stderr  # every +0 result was retained inside a pool


def test_the_generated_module_names_the_functions(packages: dict[str, Path]) -> None:
    init = (packages["api"] / LIBRARY / "__init__.py").read_text(encoding="utf-8")
    assert "def MTLCreateSystemDefaultDevice() -> Any:" in init and "def MTLCopyAllDevices() -> Any:" in init
    assert "+1 from the function" in init
    trampolines = (packages["api"] / LIBRARY / "trampolines.c").read_text(encoding="utf-8")
    assert '"MTLCreateSystemDefaultDevice",' in trampolines and "id ia_fn_checked_0(void)" in trampolines
