"""Where the generator's own data is: its templates, the default specs and the hand-written runtime.

Two layouts, one answer (:func:`data_root`):

- a checkout (``make generate``, the editable install): the repository root, whose ``templates/``, ``specs/``
  and ``runtime/ironaccelerator_runtime/`` are read in place, so an edit there is seen by the next run;
- an installed distribution (the sdist or wheel of ``ironaccelerator-gen``): the same three directories,
  carried as package data under ``ironaccelerator_gen/_data/`` (pyproject.toml maps them there).

Every path the generator computes from where it is installed goes through here; nothing else looks at
``__file__`` for data.  The layout below the root is the same in both, so the generated banners and messages,
which name files relative to the root (``specs/opencl/cl.yaml``, ``runtime/ironaccelerator_runtime/...``), are
the same byte for byte whichever generator wrote them.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent  # generator/ in a checkout, site-packages/ironaccelerator_gen installed
INSTALLED_DATA = PACKAGE / "_data"


def data_root() -> Path:
    """The directory holding ``templates/``, ``specs/`` and ``runtime/``: the installed package data where it
    exists (a wheel or sdist install), else the checkout this module lies in."""
    if (INSTALLED_DATA / "templates").is_dir():
        return INSTALLED_DATA
    return PACKAGE.parent


ROOT = data_root()
INSTALLED = ROOT == INSTALLED_DATA  # False in a checkout (editable install or run from the tree)
TEMPLATES = ROOT / "templates"
SPECS = ROOT / "specs"  # the default spec directory of generate, sdks and drift
RUNTIME = ROOT / "runtime"  # holds the hand-written package ironaccelerator_runtime (Python and its C headers)
RUNTIME_PACKAGE = RUNTIME / "ironaccelerator_runtime"
RUNTIME_INCLUDE = RUNTIME_PACKAGE / "include"  # ia_runtime.h, ia_objc.h: what the generated C includes

# the runtime's files that a self-contained output tree carries (generate --runtime copy), by suffix
RUNTIME_SUFFIXES = (".py", ".h", ".typed")


def runtime_files() -> dict[str, str]:
    """The hand-written runtime, as files of an output tree: ``ironaccelerator_runtime/<path>`` -> text."""
    files: dict[str, str] = {}
    for p in sorted(RUNTIME_PACKAGE.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix in RUNTIME_SUFFIXES:
            files[p.relative_to(RUNTIME).as_posix()] = p.read_text(encoding="utf-8")
    return files


def default_specs() -> Path:
    """The default ``--specs``: the generator's own specs/, named ``specs`` when it is the current directory's (a
    checkout's ``make generate``: messages then name ``specs/...`` as before)."""
    try:
        if (Path.cwd() / "specs").resolve() == SPECS.resolve():
            return Path("specs")
    except OSError:  # the current directory was removed
        pass
    return SPECS


__all__ = ["INSTALLED", "ROOT", "RUNTIME", "RUNTIME_INCLUDE", "RUNTIME_PACKAGE", "SPECS", "TEMPLATES", "data_root",
           "default_specs", "runtime_files"]
