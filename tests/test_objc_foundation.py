"""The generated Foundation binding (specs/foundation/foundation.yaml, resolver kind objc) against the real GNU
Objective-C runtime and GNUstep Foundation, in both binding modes: API (the compiled trampolines, ia_objc.h) and
ABI (the same contract in Python, ironaccelerator_runtime.objc).  The checks are tests/objc_foundation_child.py,
run once per mode in a child process (a crash fails them instead of ending pytest)."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import GENERATED, ROOT, RUNTIME

PACKAGE = GENERATED / "ironaccelerator" / "backends" / "foundation" / "foundation"
CHILD = ROOT / "tests" / "objc_foundation_child.py"
CHECKS = ["mode", "utf8_round_trips", "counts", "nsrange_by_value", "nserror_out", "class_and_instance_methods",
          "retain_counts_balance", "init_consumes_receiver", "nil_receivers", "unknown_selector_refused",
          "bad_python_values", "nullable_arguments", "compiled_methods", "exceptions_become_errors",
          "pool_and_unchecked", "c_functions"]


def _gnustep() -> bool:
    try:
        ctypes.CDLL("libobjc.so.4", mode=os.RTLD_GLOBAL)
        ctypes.CDLL("libgnustep-base.so.1.28", mode=os.RTLD_GLOBAL)
    except OSError:
        return False
    return True


pytestmark = pytest.mark.skipif(not _gnustep() or not PACKAGE.is_dir(),
                                reason="the GNU Objective-C runtime and GNUstep Foundation (gobjc, "
                                       "libgnustep-base-dev: scripts/install-system-sdks.sh) are not installed")

_results: dict[str, dict[str, str]] = {}


def results(mode: str, tmp_root: Path) -> dict[str, str]:
    if mode in _results:
        return _results[mode]
    root = GENERATED
    if mode == "abi":  # the package without its compiled module
        root = tmp_root / "abi"
        if not root.exists():
            shutil.copytree(GENERATED / "ironaccelerator", root / "ironaccelerator",
                            ignore=shutil.ignore_patterns("_cffi.*.so", "__pycache__"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(RUNTIME), str(ROOT / "tests")]))
    proc = subprocess.run([sys.executable, str(CHILD), mode], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, f"the child ended with {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    # GNUstep logs "autorelease called without pool" when a call autoreleases outside a pool: none may
    assert "without pool" not in proc.stderr, proc.stderr
    data: dict[str, str] = json.loads(proc.stdout)
    _results[mode] = data
    return data


@pytest.fixture(scope="module")
def tmp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("objc")


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("mode", ["api", "abi"])
def test_foundation(mode: str, check: str, tmp_root: Path) -> None:
    r = results(mode, tmp_root)
    assert r.get(check) == "ok", r.get(check, f"{check} did not run")


def test_every_check_is_listed() -> None:
    text = CHILD.read_text(encoding="utf-8")
    listed = [line.split("def ", 1)[1].split("(")[0] for line in text.splitlines() if line.startswith("def ")
              and text.splitlines()[text.splitlines().index(line) - 1] == "@check"]
    assert listed == CHECKS


