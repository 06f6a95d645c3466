"""The wheel of the generated package: ``ironaccelerator`` (generated/) and ``ironaccelerator_runtime`` (runtime/).

Built by ``make wheel`` (``pip wheel --no-build-isolation --no-deps -w dist packaging/ironaccelerator``) after
``ironaccel-gen generate`` and ``ironaccel-gen build``: the compiled API-mode modules are *that* build's output
(incremental, and the same ``.so`` files the tree's tests ran), packed as package data, never compiled again here.

Tags.  The API modules are built per interpreter: their C (runtime/ironaccelerator_runtime/include/ia_runtime.h)
uses CPython outside the limited API (a static ``PyTypeObject``, ``tp_name``, ``PyDescr_NewMethod``, the
``PyTuple_GET_ITEM`` macros; built with ``_CFFI_NO_LIMITED_API``), so the wheel is ``cpXY-cpXY-<platform>`` for
the interpreter that built them, never ``abi3`` or ``py3-none-any``.  The platform tag is the one the modules
honestly meet: they link only the C library (vendor libraries are dlopen'ed at run time), so the tag is
``manylinux_2_<N>_<arch>``, N the newest glibc symbol version they reference (2.34 where glibc >= 2.34 built
them: ``dlopen@GLIBC_2.34``); anything else linked, or no ``readelf``, gives ``linux_<arch>``.

The inputs' locations: ``IRONACCEL_GENERATED`` (default: the checkout's generated/) and ``IRONACCEL_RUNTIME``
(default: the checkout's runtime/).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
GENERATED = Path(os.environ.get("IRONACCEL_GENERATED") or ROOT / "generated")
RUNTIME = Path(os.environ.get("IRONACCEL_RUNTIME") or ROOT / "runtime")
PACKAGE = GENERATED / "ironaccelerator"
# What the modules may link and still be manylinux (PEP 600: the libraries every glibc system has).
SYSTEM_LIBS = {"libc.so.6", "libdl.so.2", "libpthread.so.0", "libm.so.6", "librt.so.1", "libgcc_s.so.1",
               "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}


def fail(message: str) -> None:
    sys.exit(f"packaging/ironaccelerator: {message}")


def version() -> str:
    """``ironaccelerator.__version__`` as generated (the generator's version): the one source of the wheel's."""
    text = (PACKAGE / "__init__.py").read_text(encoding="utf-8")
    m = re.search(r'^__version__ = "([^"]+)"$', text, re.M)
    if m is None:
        fail(f"{PACKAGE / '__init__.py'} has no __version__ line: run `ironaccel-gen generate`")
    return m.group(1)


def packages(top: Path, name: str) -> dict[str, str]:
    """Every package (a directory with ``__init__.py``) under ``top/name``, dotted name -> directory."""
    return {".".join(d.relative_to(top).parts): str(d) for d in sorted((top / name).rglob("*"))
            if d.is_dir() and (d / "__init__.py").is_file() and "__pycache__" not in d.parts} | \
        {name: str(top / name)}


def compiled_modules() -> list[Path]:
    """The compiled API module of every generated library, checked: one per library, for this interpreter."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    libs = sorted(p.parent for p in (PACKAGE / "backends").glob("*/*/_cffi_build.py"))
    if not libs:
        fail(f"no generated library under {PACKAGE / 'backends'}: run `ironaccel-gen generate`")
    out, problems = [], []
    for lib in libs:
        mods = sorted(lib.glob("_cffi.*.so")) + sorted(lib.glob("_cffi.*.pyd"))
        mine = [m for m in mods if m.name == "_cffi" + suffix]
        if not mine:
            why = f"built for {', '.join(m.name for m in mods)}" if mods else "no compiled module"
            problems.append(f"{lib.relative_to(GENERATED)}: {why}, not _cffi{suffix}")
        elif not (lib / "_cffi_abi.py").is_file():
            problems.append(f"{lib.relative_to(GENERATED)}: no _cffi_abi.py")
        else:
            out += mine
        for other in set(mods) - set(mine):
            problems.append(f"{lib.relative_to(GENERATED)}: {other.name} is another interpreter's build")
    if problems:
        fail("the wheel holds API-mode modules built by this interpreter only; run `ironaccel-gen build` with "
             f"{sys.executable}:\n  " + "\n  ".join(problems))
    return out


def platform_tag(modules: list[Path]) -> str:
    """``manylinux_2_<N>_<arch>`` where the modules link only system libraries (N: the newest glibc symbol
    version they reference), else the plain platform tag."""
    plain = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    if not sys.platform.startswith("linux") or shutil.which("readelf") is None:
        return plain
    newest = (2, 5)
    for m in modules:
        dyn = subprocess.run(["readelf", "-dW", str(m)], capture_output=True, text=True, check=True).stdout
        needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn))
        if needed - SYSTEM_LIBS:
            print(f"{m.name} links {sorted(needed - SYSTEM_LIBS)}: tagged {plain}", file=sys.stderr)
            return plain
        ver = subprocess.run(["readelf", "-VW", str(m)], capture_output=True, text=True, check=True).stdout
        for major, minor in re.findall(r"GLIBC_(\d+)\.(\d+)", ver):
            newest = max(newest, (int(major), int(minor)))
    arch = plain.split("_", 1)[1]
    return f"manylinux_{newest[0]}_{newest[1]}_{arch}"


MODULES = compiled_modules()
PACKAGES = packages(GENERATED, "ironaccelerator") | packages(RUNTIME, "ironaccelerator_runtime")


class BuildPy(build_py):
    """The packages' Python modules, less the build's own inputs (``_cffi_build.py``: it is run by
    ``ironaccel-gen build``, never imported)."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        return [m for m in super().find_package_modules(package, package_dir) if m[1] != "_cffi_build"]


class BinaryDistribution(Distribution):
    """A distribution with extension modules (built beforehand, by ``ironaccel-gen build``): installed to platlib,
    its wheel not pure."""

    def has_ext_modules(self) -> bool:
        return True


class BdistWheel(bdist_wheel):
    """A platform wheel for this interpreter: ``cpXY-cpXY-<platform>`` (see the module's docstring)."""

    def get_tag(self) -> tuple[str, str, str]:
        interp = f"{sys.implementation.name[:2]}{sys.version_info.major}{sys.version_info.minor}"
        if sys.implementation.name == "cpython":
            interp = f"cp{sys.version_info.major}{sys.version_info.minor}"
        return interp, interp, platform_tag(MODULES)


setup(
    version=version(),
    packages=sorted(PACKAGES),
    package_dir={name: os.path.relpath(path, HERE) for name, path in PACKAGES.items()},
    # the compiled modules, the ABI fallback's declarations (loader.py reads *.cdef where _cffi_abi.py is absent)
    package_data={name: ["_cffi.*.so", "_cffi.*.pyd", "*.cdef", "py.typed"] for name in PACKAGES},
    include_package_data=False,
    zip_safe=False,
    distclass=BinaryDistribution,
    cmdclass={"build_py": BuildPy, "bdist_wheel": BdistWheel},
)
