"""Building the generated cffi modules: API mode (C compiler) and the pre-parsed ABI module."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path


def library_dirs(out: Path) -> list[Path]:
    return sorted(p.parent for p in (out / "ironaccelerator" / "backends").glob("*/*/_cffi_build.py"))


def _load(path: Path):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(f"_ia_build_{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build_library(lib_dir: Path, api: bool = True) -> dict[str, float]:
    """Build ``lib_dir``'s ``_cffi_abi.py`` and (if ``api``) its compiled ``_cffi`` extension in place."""
    mod = _load(lib_dir / "_cffi_build.py")
    times = {}
    t = time.perf_counter()
    if hasattr(mod, "emit_abi"):
        mod.emit_abi(str(lib_dir / "_cffi_abi.py"))
    else:  # a build script generated before build ids (its modules then carry none)
        mod.abi_ffibuilder().emit_python_code(str(lib_dir / "_cffi_abi.py"))
    times["abi"] = time.perf_counter() - t
    if api:
        t = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="ia-cffi-") as tmp:
            so = Path(mod.ffibuilder().compile(tmpdir=tmp, verbose=False))
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
