"""Where a vendor library is looked for: the candidate paths of a binding's loader data, in order.

Its own module, importable without the rest of the loader: the OpenCL backend's early start
(``early_start.py``) finds the ICD loader with it before anything else of the backend is imported."""

from __future__ import annotations

import os
import sys
from typing import Sequence


def _site_dirs() -> list[str]:
    seen: list[str] = []
    for p in sys.path:
        if p and os.path.isdir(p) and p not in seen:
            seen.append(p)
    return seen


def _version_key(path: str) -> tuple[tuple[int, int | str], ...]:
    """Orders paths by the numbers in them as numbers (``cuda-12.9`` after ``cuda-9.2``, ``libx.so.13`` after
    ``libx.so.9``), so that a newest-first sort picks the newest version, not the lexically last."""
    import re  # (only where a pattern is searched)

    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.findall(r"\d+|\D+", path))


def library_candidates(names: dict[str, tuple[str, ...]], wheel_dirs: Sequence[str], sdk_dirs: Sequence[str],
                       sdk_env: Sequence[str], sdk_roots: Sequence[str]) -> list[str]:
    """Paths to try, in order: the SDK roots the environment names (``sdk_env``: the user's explicit choice, ex:
    QNN_SDK_ROOT), pip wheels of the active environment, standard SDK prefixes (``sdk_roots``), then bare names
    for the system loader."""
    plat = "windows" if sys.platform == "win32" else "darwin" if sys.platform == "darwin" else "linux"
    files = names.get(plat, ())
    out: list[str] = []
    dirs: list[str] = []
    for root in (os.environ[e] for e in sdk_env if os.environ.get(e)):
        dirs += [os.path.join(root, d) for d in sdk_dirs]
    for site in _site_dirs():
        dirs += [os.path.join(site, d) for d in wheel_dirs]
    if sdk_roots or any(c in f for f in files for c in "*?["):
        import glob  # (only where a pattern is searched: not on the path of a backend that names its files)
    for pattern in sdk_roots:
        for root in sorted(glob.glob(pattern), key=_version_key, reverse=True):
            dirs += [os.path.join(root, d) for d in sdk_dirs]
    for d in dirs:
        if not os.path.isdir(d):
            continue
        for f in files:
            if any(c in f for c in "*?["):
                out += sorted(glob.glob(os.path.join(d, f)), key=_version_key, reverse=True)
            elif os.path.exists(os.path.join(d, f)):
                out.append(os.path.join(d, f))
    out += [f for f in files if not any(c in f for c in "*?[")]
    return list(dict.fromkeys(out))
