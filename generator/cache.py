"""No-op detection for ``generate``: a digest of every input's and output's path, size and mtime.

Kept free of heavy imports (jinja2, yaml, libclang) so that an up-to-date
``ironaccel-gen generate`` costs little more than interpreter start-up.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from . import __version__, data
from .output import write_atomic

GENERATOR = Path(__file__).resolve().parent
TEMPLATES = data.TEMPLATES
RUNTIME = data.RUNTIME  # read by the surface checks (and its C, by the build)


def fingerprint(spec_dir: Path, extra: list[Path], argv: list[object]) -> str:
    """Inputs (specs, generator sources, templates, headers) and outputs (``extra``), by stat only."""
    h = hashlib.sha256(f"{__version__}\0{argv}".encode("utf-8", "surrogateescape"))
    paths = [*sorted(spec_dir.rglob("*.yaml")), *sorted(GENERATOR.rglob("*.py")), *sorted(TEMPLATES.rglob("*.j2")),
             *sorted(RUNTIME.rglob("*.py")), *sorted(RUNTIME.rglob("*.h")), *extra]
    for p in paths:
        try:
            st = p.stat()
            line = f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n"
        except (OSError, ValueError):
            line = f"{p}\0missing\n"
        h.update(line.encode("utf-8", "surrogateescape"))  # a file name need not be UTF-8
    return h.hexdigest()


MAX_BYTES = 16 << 20  # a real cache is a few KiB


def load(path: Path) -> dict[str, object]:
    """The saved state, or ``{}`` (stale) when it is missing, not a regular file of bounded size, or damaged
    (not UTF-8, not JSON, nested past the parser's depth, not an object)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:  # never block on a FIFO or read /dev/zero
            return {}
        data = json.loads(path.read_bytes())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError, RecursionError):
        return {}


def save(path: Path, data: dict[str, object]) -> None:
    """Replace ``path`` atomically, as generated files are written (mode 0644 under the usual umask)."""
    write_atomic(path, json.dumps(data, sort_keys=True).encode("utf-8"))
