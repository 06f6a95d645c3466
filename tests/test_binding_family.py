"""One binding family (issue 26, item 5): Objective-C libraries are built and loaded through the same build
description and loader as C libraries, and the backends whose runtime holds every class render from one template.

- Every generated library's ``_cffi_build.py`` is the same data-only description (``MODULE``, ``ABI_MODULE``,
  ``BUILD_ID``, ``OPTIMIZE``), rendered from ``templates/library/_cffi_build.py.j2`` for both families, which
  ``generator/build.py``'s ``ffibuilders`` compiles; no Objective-C build script of its own.
- ``ironaccelerator_runtime.loader.load_module`` loads both families' cffi modules: a built module made from other
  generated sources is refused the same way (an Objective-C ``_cffi_abi.py`` was accepted unchecked before).
- No template of the Objective-C family is a copy of the C family's.
- No backend template serves one backend only: OpenCL, Metal and QNN share ``backends/tables.py.j2``, CUDA and HIP
  ``backends/gpu.py.j2``."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import GENERATED, ROOT, SPECS

TEMPLATES = ROOT / "templates"
LIBRARIES = sorted(p.parent for p in (GENERATED / "ironaccelerator" / "backends").glob("*/*/_cffi_build.py"))
OBJC = [d for d in LIBRARIES if "ia_objc.h" in (d / "_cffi_build.py").read_text(encoding="utf-8")]


def test_both_families_are_generated() -> None:
    assert OBJC and set(OBJC) < set(LIBRARIES), (OBJC, LIBRARIES)


@pytest.mark.parametrize("lib_dir", LIBRARIES, ids=lambda d: f"{d.parent.name}.{d.name}")
def test_every_build_description_is_the_same_data(lib_dir: Path) -> None:
    """A build description assigns its four names and does nothing else: no function, no import (the
    Objective-C one was a script of its own, with ffibuilder() and abi_ffibuilder(), special-cased by build.py)."""
    tree = ast.parse((lib_dir / "_cffi_build.py").read_text(encoding="utf-8"))
    body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    assigned = [t.id for n in body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)]
    assert len(body) == len(assigned) and sorted(assigned) == ["ABI_MODULE", "BUILD_ID", "MODULE", "OPTIMIZE"], \
        [ast.dump(n)[:80] for n in body]


def test_no_objc_template_copies_the_c_one() -> None:
    same = [p.name for p in sorted((TEMPLATES / "objc").glob("*.j2"))
            if (TEMPLATES / "library" / p.name).is_file()
            and (TEMPLATES / "library" / p.name).read_text(encoding="utf-8") == p.read_text(encoding="utf-8")]
    assert same == []
    assert not (TEMPLATES / "objc" / "_cffi_build.py.j2").exists()


def test_every_backend_template_is_shared() -> None:
    """Each template under templates/backends/ renders at least two backend specs, and each is named by one."""
    used: dict[str, list[str]] = {}
    for spec in sorted(SPECS.glob("*/backend.yaml")):
        used.setdefault(yaml.safe_load(spec.read_text(encoding="utf-8"))["template"], []).append(spec.parent.name)
    templates = sorted(f"backends/{p.name}" for p in (TEMPLATES / "backends").glob("*.py.j2"))
    assert sorted(used) == templates
    assert {t: v for t, v in used.items() if len(v) < 2} == {}


_CHILD = r"""
import sys
from ironaccelerator import ErrorKind
from ironaccelerator_runtime.loader import Binding
from ironaccelerator_runtime.objc import ObjcBinding

family, package, build_id = sys.argv[1:4]
__import__(package)
common = dict(package=package, build_id=build_id, backend="TEST", library="stale")
try:
    if family == "c":
        b = Binding(**common, functions=(), names={}, errors={}, sentinel=-1, sdk_version="")
    else:
        b = ObjcBinding(**common, runtime={}, frameworks={}, classes=(), methods=(), errors={},
                        error_default=ErrorKind.UNKNOWN)
except ImportError as e:
    print("refused:", e)
else:
    print("loaded:", b.mode)
"""


@pytest.mark.parametrize("family", ["c", "objc"])
def test_a_stale_abi_module_is_refused_in_either_family(family: str, tmp_path: Path) -> None:
    """The same loader checks the build id of the pre-parsed ABI module for both families."""
    package = f"ia_stale_{family}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "_cffi_abi.py").write_text("import cffi\nffi = cffi.FFI()\nBUILD_ID = 'built-before'\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "IRONACCEL_REQUIRE_API": "0"}

    def run(build_id: str) -> str:
        r = subprocess.run([sys.executable, "-c", _CHILD, family, package, build_id], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout.strip()

    out = run("generated-after")
    assert out.startswith("refused:") and "_cffi_abi.py was built from other generated sources" in out \
        and "built-before" in out and "ironaccelerator_gen build" in out, out
    assert run("built-before") == "loaded: abi"
