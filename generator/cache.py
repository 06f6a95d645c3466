"""No-op detection for ``generate``: a digest of every input's and output's path, size and mtime.

Kept free of heavy imports (jinja2, yaml, libclang) so that an up-to-date
``ironaccel-gen generate`` costs little more than interpreter start-up.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from . import __version__

GENERATOR = Path(__file__).resolve().parent
TEMPLATES = GENERATOR.parent / "templates"


def fingerprint(spec_dir: Path, extra: list[Path], argv: list[object]) -> str:
    """Inputs (specs, generator sources, templates, headers) and outputs (``extra``), by stat only."""
    h = hashlib.sha256(f"{__version__}\0{argv}".encode("utf-8", "surrogateescape"))
    paths = [*sorted(spec_dir.rglob("*.yaml")), *sorted(GENERATOR.rglob("*.py")), *sorted(TEMPLATES.rglob("*.j2")),
             *extra]
    for p in paths:
        try:
            st = p.stat()
            line = f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n"
        except (OSError, ValueError):
            line = f"{p}\0missing\n"
        h.update(line.encode("utf-8", "surrogateescape"))  # a file name need not be UTF-8
    return h.hexdigest()


def load(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def save(path: Path, data: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)
