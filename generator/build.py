"""Building the generated cffi modules: API mode (C compiler) and the pre-parsed ABI module."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def library_dirs(out: Path) -> list[Path]:
    return sorted(p.parent for p in (out / "ironaccelerator" / "backends").glob("*/*/_cffi_build.py"))


RUNTIME_INCLUDE = Path(__file__).resolve().parent.parent / "runtime" / "ironaccelerator_runtime" / "include"


def _load(path: Path):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(f"_ia_build_{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ffibuilders(lib_dir: Path, optimize: str | None = None) -> tuple[Any, Any]:
    """The cffi builders of a generated library: (API mode, ABI mode); ``optimize`` overrides the build
    description's optimisation flag (bench/bench_generate.py compares them).  The API module's C is trampolines.c
    (its tables and per-function code) with types.cdef inlined, compiled against the runtime's ia_runtime.h;
    both modules carry the library's build id (``ia_build_id()``, ``BUILD_ID``)."""
    import cffi

    mod = _load(lib_dir / "_cffi_build.py")
    types = (lib_dir / "types.cdef").read_text(encoding="utf-8")
    source = (lib_dir / "trampolines.c").read_text(encoding="utf-8").replace('#include "types.cdef"', types)
    source += '\nconst char *ia_build_id(void) { return "' + mod.BUILD_ID + '"; }\n'
    api = cffi.FFI()
    api.cdef(types + (lib_dir / "api.cdef").read_text(encoding="utf-8") + "const char *ia_build_id(void);\n")
    # trampolines.c also holds the checked fast path, CPython METH_FASTCALL functions: not in the stable ABI that
    # cffi selects by default (Py_LIMITED_API), and the module is built per interpreter anyway
    api.set_source(mod.MODULE, source, libraries=["dl"] if sys.platform.startswith("linux") else [],
                   extra_compile_args=[optimize or mod.OPTIMIZE, "-w"] if os.name != "nt" else ["/O2"],
                   define_macros=[("_CFFI_NO_LIMITED_API", None)], include_dirs=[str(RUNTIME_INCLUDE)])
    abi = cffi.FFI()
    abi.cdef(types + (lib_dir / "abi.cdef").read_text(encoding="utf-8"))
    abi.set_source(mod.ABI_MODULE, None)
    return api, abi


def build_library(lib_dir: Path, api: bool = True) -> dict[str, float]:
    """Build ``lib_dir``'s ``_cffi_abi.py`` and (if ``api``) its compiled ``_cffi`` extension in place."""
    mod = _load(lib_dir / "_cffi_build.py")
    if hasattr(mod, "ffibuilder"):  # a self-contained build script, generated before the runtime held the C
        api_ffi, abi_ffi = mod.ffibuilder, mod.abi_ffibuilder()
    else:
        builders = ffibuilders(lib_dir)
        api_ffi, abi_ffi = (lambda: builders[0]), builders[1]
    times = {}
    t = time.perf_counter()
    abi_ffi.emit_python_code(str(lib_dir / "_cffi_abi.py"))
    if hasattr(mod, "BUILD_ID"):
        with open(lib_dir / "_cffi_abi.py", "a", encoding="utf-8") as fh:
            fh.write(f"BUILD_ID = {mod.BUILD_ID!r}\n")
    times["abi"] = time.perf_counter() - t
    if api:
        t = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="ia-cffi-") as tmp:
            so = Path(api_ffi().compile(tmpdir=tmp, verbose=False))
            for old in lib_dir.glob("_cffi.*.so"):
                old.unlink()
            for old in lib_dir.glob("_cffi.*.pyd"):
                old.unlink()
            shutil.copy2(so, lib_dir / so.name)
        times["api"] = time.perf_counter() - t
    return times


def fast_path_counts(lib_dir: Path) -> tuple[int, int] | None:
    """(functions with a compiled checked fast path, bound functions) of a generated library, from its trampolines.c."""
    try:
        text = (lib_dir / "trampolines.c").read_text()
    except OSError:
        return None
    fast = re.search(r"^#define IA_FAST_COUNT (\d+)$", text, re.M)
    total = re.search(r"^#define IA_COUNT (\d+)$", text, re.M)
    return (int(fast.group(1)), int(total.group(1))) if fast and total else None


def build_all(out: Path, api: bool = True, log=print) -> None:  # type: ignore[no-untyped-def]
    for d in library_dirs(out):
        rel = d.relative_to(out).as_posix().replace("/", ".")
        try:
            times = build_library(d, api)
        except Exception as exc:  # a missing compiler leaves the ABI fallback usable
            log(f"build {rel}: API module not built ({exc.__class__.__name__}: {exc}); ABI mode will be used")
            continue
        counts = fast_path_counts(d) if "api" in times else None
        fast = f"; checked fast path (C) for {counts[0]} of {counts[1]} functions" if counts else ""
        log(f"built {rel}: " + ", ".join(f"{k} {v:.1f}s" for k, v in times.items()) + fast)
    sys.stdout.flush()
