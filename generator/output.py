"""Switching the output tree from one generation to the next, all or nothing.

Each file used to be replaced atomically, but the tree was not: a ``generate`` killed while writing left
files of two generations side by side (a new ``_core.py`` beside an old backend module), which then failed
to import.  The switch is now a journal, as a database commits a transaction:

1. every new or changed file is written complete under ``<out>/.ironaccel-gen.staging/`` (and fsynced);
2. the journal ``<out>/.ironaccel-gen.journal`` names each file to move into place and each to remove;
   writing it (to a temporary name, fsynced, then renamed) is the commit point;
3. the moves and removals are made, then the journal is removed, then the staging directory.

A kill before step 2 leaves the old tree as it was (the next run discards the staging directory); a kill
after it leaves a journal that the next ``generate`` rolls forward (:func:`recover`) and that ``import
ironaccelerator`` refuses with a message saying what to run (``templates/package/__init__.py.j2``).  No
state in between is ever mixed without a journal to say so.

Only files that generation owns are touched: build outputs (``_cffi*.so``, ``_cffi_abi.py``),
``__pycache__`` and the generator's own state files stay as they are.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

# The generator's own files in the output directory (not part of the package; .gitignore'd)
STATE_PREFIX = ".ironaccel-gen"
JOURNAL = STATE_PREFIX + ".journal"
STAGING = STATE_PREFIX + ".staging"
JOURNAL_FORMAT = 1

GENERATED_SUFFIXES = (".py", ".cdef", ".c", ".typed")
RUNTIME = "ironaccelerator_runtime/"  # a copy of the hand-written runtime (generate --runtime copy): its C headers too


class OutputError(Exception):
    """The output directory cannot be switched (``str(e)`` says why and what to do); nothing was changed,
    or a committed journal is left for the next run to finish."""


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def existing_files(out: Path) -> dict[str, Path]:
    """Files under ``out`` that generation owns (build outputs such as .so and _cffi_abi.py are not, nor are
    the generator's state files and staging directory)."""
    found: dict[str, Path] = {}
    if not out.is_dir():
        return found
    for p in out.rglob("*"):
        rel = p.relative_to(out).as_posix()
        if rel.startswith(STATE_PREFIX) or "__pycache__" in rel:
            continue
        owned = p.suffix in GENERATED_SUFFIXES or p.name == "py.typed" or (p.suffix == ".h" and rel.startswith(RUNTIME))
        if owned and not p.name.startswith("_cffi_abi") and p.suffix != ".so" and p.is_file():
            found[rel] = p
    return found


def diff(files: dict[str, str], out: Path, keep: tuple[str, ...] = ()) -> list[str]:
    """What would change: ``+ path`` (new), ``M path`` (modified), ``- path`` (stale, unless under ``keep``).

    Files are compared as bytes: one that is not UTF-8 (damaged, or written by something else) is simply
    different, so the next ``generate`` replaces it."""
    have = {k: v for k, v in existing_files(out).items() if not keep or not k.startswith(keep)}
    changes = []
    for rel, text in sorted(files.items()):
        if rel not in have:
            changes.append(f"+ {rel}")
        else:
            try:
                same = have[rel].read_bytes() == text.encode("utf-8")
            except OSError:
                same = False
            if not same:
                changes.append(f"M {rel}")
    for rel in sorted(set(have) - set(files)):
        changes.append(f"- {rel}")
    return changes


def pending(out: Path) -> bool:
    """Whether ``out`` holds a committed switch that has not finished (a killed ``generate``)."""
    return os.path.lexists(out / JOURNAL)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_file(path: Path, data: bytes, mode: int = 0o666) -> None:
    """Write ``data`` to a new file at ``path``, ``mode`` less the umask (0644 as usual), and fsync it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, mode: int = 0o666) -> None:
    """Replace one file atomically: a temporary file of this process beside it (``<name>.<pid>.tmp``, ``mode``
    less the umask), then a rename.  A reader (or a process that has the old file mapped) sees the old file or
    the new one whole, never a part; a writer killed half-way leaves only its temporary file."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        _write_file(tmp, data, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _remove_staging(out: Path) -> None:
    staging = out / STAGING
    if os.path.lexists(staging):
        if staging.is_dir() and not staging.is_symlink():
            shutil.rmtree(staging)
        else:
            staging.unlink()


def _read_journal(out: Path) -> dict[str, Any]:
    path = out / JOURNAL
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > 64 << 20:
            raise ValueError("not a regular file of bounded size")
        data = json.loads(path.read_bytes())
        if not (isinstance(data, dict) and data.get("format") == JOURNAL_FORMAT
                and isinstance(data.get("replace"), list) and isinstance(data.get("remove"), list)):
            raise ValueError("not a journal of this generator")
        for entry in data["replace"]:
            if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(x, str) for x in entry)):
                raise ValueError("a damaged entry")
        if not all(isinstance(x, str) for x in data["remove"]):
            raise ValueError("a damaged entry")
        for rel in [e[0] for e in data["replace"]] + data["remove"]:
            if rel.startswith("/") or ".." in rel.split("/") or not rel:
                raise ValueError(f"an entry outside the output directory: {rel!r}")
        return data
    except (OSError, ValueError, RecursionError) as exc:
        raise OutputError(f"{path}: an interrupted generation left a journal that cannot be read ({exc}); "
                          f"remove {path} and {out / STAGING} and run `make generate` again") from None


def _apply(out: Path, journal: dict[str, Any]) -> None:
    """Make the switch a committed journal describes (again: each step is idempotent)."""
    staging = out / STAGING
    parents = {out}
    for rel, digest in journal["replace"]:
        src, dst = staging / rel, out / rel
        parents.add(dst.parent)
        if os.path.lexists(src):
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
        else:  # moved by the run that was killed: it must be the journal's file
            try:
                ok = _digest(dst.read_bytes()) == digest
            except OSError:
                ok = False
            if not ok:
                raise OutputError(f"{dst}: an interrupted generation's file is missing from {staging} and "
                                  f"{dst} is not it; remove {out / JOURNAL} and {staging} and run "
                                  "`make generate` again")
    for rel in journal["remove"]:
        parents.add((out / rel).parent)
        try:
            (out / rel).unlink()
        except FileNotFoundError:
            pass
    for d in sorted(parents):  # the renames are durable before the journal that would redo them goes
        _fsync_dir(d)
    os.unlink(out / JOURNAL)
    _fsync_dir(out)
    _remove_staging(out)


def recover(out: Path) -> bool:
    """Finish a switch that a killed run committed (True if there was one); discard an uncommitted one."""
    if pending(out):
        _apply(out, _read_journal(out))
        return True
    _remove_staging(out)
    try:  # a journal killed while being written (before its rename: not committed)
        os.unlink(out / (JOURNAL + ".tmp"))
    except (FileNotFoundError, NotADirectoryError):
        pass
    return False


def write(files: dict[str, str], out: Path, keep: tuple[str, ...] = ()) -> list[str]:
    """Switch ``out`` to ``files`` (all or nothing): new and changed files are written, stale ones removed
    (except under ``keep``).  Returns the changes, as :func:`diff` lists them."""
    recover(out)
    changes = diff(files, out, keep)
    if not changes:
        return changes
    staging = out / STAGING
    replace: list[list[str]] = []
    remove: list[str] = []
    tmp = out / (JOURNAL + ".tmp")
    try:
        for change in changes:
            kind, rel = change.split(" ", 1)
            if kind == "-":
                remove.append(rel)
                continue
            data = files[rel].encode("utf-8")
            _write_file(staging / rel, data)
            replace.append([rel, _digest(data)])
        _write_file(tmp, json.dumps({"format": JOURNAL_FORMAT, "replace": replace, "remove": remove},
                                    sort_keys=True).encode("utf-8"))
        # the commit point: the journal appears complete, under its name, or not at all
        os.replace(tmp, out / JOURNAL)
    except BaseException:  # not committed: the old tree is untouched; leave nothing of this run behind
        recover(out)
        raise
    _fsync_dir(out)
    _apply(out, {"replace": replace, "remove": remove})
    return changes


# what `ironaccel-gen build` writes beside a library's generated files (generator/build.py), and Python's caches
BUILD_OUTPUTS = ("_cffi.*.so", "_cffi.*.pyd", "_cffi_abi.py", ".ironaccel-build", ".ironaccel-build*.tmp",
                 "_cffi*.tmp")  # the last: a killed build's temporary files (write_atomic's <name>.<pid>.tmp)


def prune(files: dict[str, str], out: Path, keep: tuple[str, ...] = ()) -> list[str]:
    """Remove the directories under ``out/ironaccelerator`` that no generated file lives in any more (a library
    renamed or removed from the specs), with the build outputs and caches left in them; a directory holding
    anything else is left.  Directories under ``keep`` (skipped libraries) are not touched.  Returns the removed
    directories, relative to ``out``, deepest first."""
    live = {"ironaccelerator"}
    for rel in files:
        parts = rel.split("/")[:-1]
        live.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    root = out / "ironaccelerator"
    if not root.is_dir():
        return []
    removed = []
    dirs = [p for p in root.rglob("*") if p.is_dir() and "__pycache__" not in p.parts]
    for d in sorted(dirs, key=lambda p: (-len(p.parts), p.as_posix())):
        rel = d.relative_to(out).as_posix()
        if rel in live or (rel + "/").startswith(keep) or any(k.startswith(rel + "/") for k in keep):
            continue
        for pattern in BUILD_OUTPUTS:
            for f in d.glob(pattern):
                f.unlink()
        shutil.rmtree(d / "__pycache__", ignore_errors=True)
        try:
            d.rmdir()
        except OSError:  # something generation does not own is there: leave it
            continue
        removed.append(rel)
    return removed


__all__ = ["BUILD_OUTPUTS", "JOURNAL", "STAGING", "OutputError", "diff", "existing_files", "pending", "prune",
           "recover", "write", "write_atomic"]
