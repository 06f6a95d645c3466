"""A content-addressed, size-bounded on-disk cache of compiled device code (``Device.load_module``'s).

The key is the sha256 of what the compile is given: the backend, the source, the compile options, the
include search path (``include_dirs`` and the ``-I``/``-isystem``/... directories found in ``options``, made
absolute; the current directory too when the source may include files: NVRTC and PoCL search it), the
compiler's version and the device (architecture, name, driver version).  The key walks no directory.

What the compiler *read* besides the source (headers) is recorded with each entry instead, and checked on
each hit: :func:`scan_dependencies` follows the ``#include``/``#include_next``/``#import``/``#embed``
directives and ``__has_include`` tests of the source (and of ``-include``/``--pre-include`` files),
transitively, through every candidate a compiler could open: the including file's directory, the current
directory and each search directory.  It records each file found (path, size, mtime, ctime, inode and sha256)
and each candidate that does not exist.  A hit stats only those paths: an entry whose file changed (its
sha256 differs; a changed stat alone only makes it rehash that file) or whose missing candidate now exists
(a header that would now shadow another) is stale: a miss, compiled afresh and rewritten.  Neither NVRTC
(13.x has no dependency output) nor OpenCL report what they read, so the scan is conservative: it follows
every directive, including those in ``#if`` branches the compiler skips and in comments (more files than
needed, never fewer).  A source (or header) with a computed ``#include MACRO`` cannot be scanned: it is
compiled every time, not cached.  Headers not found in those directories (the compiler's own: NVRTC's
builtins, OpenCL's) are part of the compiler, keyed by its version.

The value is the backend's artifact (NVRTC: the PTX or cubin that loaded, with the lowered names of the
name expressions; OpenCL: the program binary of ``CL_PROGRAM_BINARIES``), behind a small JSON record
(:func:`pack`) that holds the dependencies.  Each entry is one file
``<key>.bin``: a header (magic, payload length, payload sha256) and the payload.  A reader verifies the
header; a truncated or corrupt entry is deleted and reported as a miss (so recompiled), never trusted.
Writers write a temporary file in the same directory, ``fsync`` it and ``os.replace`` it into place, so
concurrent processes writing the same key each leave a whole entry and readers never see a partial one.
Size-bounded: after a write, the oldest entries (by modification time; a hit touches its entry) are
removed until the directory holds at most ``max_bytes``.

Location: ``$IRONACCEL_CACHE_DIR`` if set; else the platform's cache directory (Linux
``$XDG_CACHE_HOME/ironaccelerator`` or ``~/.cache/ironaccelerator``; macOS ``~/Library/Caches/ironaccelerator``;
Windows ``%LOCALAPPDATA%\\ironaccelerator\\Cache``).  ``IRONACCEL_CACHE=0`` disables it; bound:
``IRONACCEL_CACHE_MAX_BYTES`` (default 256 MiB).  Metal and QNN keep no cache (Metal compiles in the
framework; QNN takes only binaries).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import stat
import struct
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

DEFAULT_MAX_BYTES = 256 << 20
_MAGIC = b"IAKC\x01\0\0\0"  # ironaccelerator kernel cache, format 1
_HEADER = struct.Struct("<8sQ32s")  # magic, payload length, payload sha256
_SUFFIX = ".bin"


def default_directory() -> Path:
    """The cache directory by the platform's conventions (``IRONACCEL_CACHE_DIR`` wins)."""
    env = os.environ.get("IRONACCEL_CACHE_DIR")
    if env:
        return Path(env)
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "ironaccelerator"
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA")
        return (Path(base) if base else Path.home() / "AppData" / "Local") / "ironaccelerator" / "Cache"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache") / "ironaccelerator"


def enabled() -> bool:
    """False when ``IRONACCEL_CACHE`` is ``0`` (or ``false``/``off``/``no``)."""
    return os.environ.get("IRONACCEL_CACHE", "1").strip().lower() not in ("0", "false", "off", "no")


def _max_bytes_from_env() -> int:
    raw = os.environ.get("IRONACCEL_CACHE_MAX_BYTES")
    if not raw:
        return DEFAULT_MAX_BYTES
    try:
        return max(0, int(raw))
    except ValueError:
        return DEFAULT_MAX_BYTES


# ------------------------------------------------------------------------------------------ include search path

# flags that add a directory to the search path (each as -Xdir, -X dir, -X=dir; the long ones as --x=dir, --x dir):
# clang's/PoCL's and NVRTC's (--include-path, --system-include, --use-bundled-headers: dir and dir/cccl)
_DIR_FLAGS = ("-I", "-isystem", "-iquote", "-idirafter", "--include-path", "--system-include", "--use-bundled-headers")
# flags that name a file read before the source
_FILE_FLAGS = ("-include", "-imacros", "--pre-include")


@dataclass(frozen=True)
class IncludeSearch:
    """Where a compile may look for files: ``dirs`` (absolute, in order, no repeats: ``-I``-style directories of
    ``options``, then ``include_dirs``) and ``pre_includes`` (files named by ``-include``/``--pre-include``)."""

    dirs: tuple[str, ...] = ()
    pre_includes: tuple[str, ...] = ()


def _flag_values(tokens: list[str], flags: tuple[str, ...]) -> list[tuple[str, str]]:
    out = []
    for i, t in enumerate(tokens):
        for f in flags:
            if t == f:
                if i + 1 < len(tokens):
                    out.append((f, tokens[i + 1]))
            elif t.startswith(f + "="):
                out.append((f, t[len(f) + 1:]))
            elif not f.startswith("--") and t.startswith(f) and not any(
                    t.startswith(g) for g in (*_DIR_FLAGS, *_FILE_FLAGS) if len(g) > len(f)):
                out.append((f, t[len(f):]))
    return out


def include_search(options: Iterable[str] = (), include_dirs: Iterable[str] = ()) -> IncludeSearch:
    """The search path of a compile with ``options`` and ``include_dirs``.  ``-I dir`` as one option or two, with
    ``=``, quoted or not, and ``-isystem``/``-iquote``/``-idirafter``/``--include-path``/``--system-include``
    alike (every reading of an option is taken: a superset).  Relative directories are made absolute against
    the current directory, as the compiler sees them."""
    opts = list(options)
    readings = [opts, [t for o in opts for t in o.split()]]
    try:
        readings.append([t for o in opts for t in shlex.split(o)])
    except ValueError:  # an unbalanced quote: the other readings stand
        pass
    dirs: list[str] = []
    pre: list[str] = []
    for tokens in readings:
        for flag, value in _flag_values(tokens, _DIR_FLAGS):
            if value:
                dirs.append(os.path.abspath(value))
                if flag == "--use-bundled-headers":
                    dirs.append(os.path.join(os.path.abspath(value), "cccl"))
        pre += [value for _, value in _flag_values(tokens, _FILE_FLAGS) if value]
    dirs += [os.path.abspath(d) for d in include_dirs]
    return IncludeSearch(tuple(dict.fromkeys(dirs)), tuple(dict.fromkeys(pre)))


def _may_read_files(source: bytes, search: IncludeSearch) -> bool:
    """Whether the compile may open a file by a relative name (then the current directory is part of the key)."""
    return bool(search.pre_includes) or b"include" in source or b"import" in source or b"embed" in source


# ------------------------------------------------------------------------------------------ dependencies

_DIRECTIVE = re.compile(rb"^[ \t]*#[ \t]*(?:include_next|include|import|embed)\b[ \t]*([^\r\n]*)", re.M)
_HAS_INCLUDE = re.compile(rb"__has_(?:include_next|include|embed)\s*\(\s*([^\r\n]*)")
_MAX_FILES = 20_000
_MAX_BYTES = 256 << 20
# a file whose mtime or ctime is this close to the scan may be written again within the same timestamp tick
# without its stat changing (FAT: 2 s): its stat is not trusted, it is rehashed at each hit
_RACY_NS = 3_000_000_000


class _Unscannable(Exception):
    """A computed #include (or too many files): what the compiler reads cannot be known here."""


def _referenced(text: bytes) -> list[bytes]:
    """The names ``text`` includes (``"x"`` and ``<x>`` alike, as written); raises :class:`_Unscannable` for a
    computed one."""
    names = []
    for rx in (_DIRECTIVE, _HAS_INCLUDE):
        for m in rx.finditer(text):
            arg = m.group(1)
            close = {b'"'[0]: b'"', b"<"[0]: b">"}.get(arg[0]) if arg else None
            end = arg.find(close, 1) if close else -1
            if end < 1:
                raise _Unscannable(arg[:80].decode("utf-8", "replace"))
            names.append(arg[1:end])
    return names


def scan_dependencies(source: bytes, options: Iterable[str] = (), include_dirs: Iterable[str] = ()
                      ) -> dict[str, Any] | None:
    """What a compile of ``source`` with ``options`` and ``include_dirs`` may read, for :func:`dependencies_unchanged`
    (see the module's doc): ``{"at": ns, "files": [[path, size, mtime_ns, ctime_ns, ino, sha256], ...],
    "absent": [path, ...]}``; None when it cannot be known (a computed ``#include``: do not cache).  Run it
    *before* compiling: a header edited in between then reads as changed at the next hit (a recompile), never
    as current."""
    search = include_search(options, include_dirs)
    cwd = os.getcwd()
    at = time.time_ns()
    files: dict[str, list[Any]] = {}
    absent: set[str] = set()
    total = 0
    todo: list[tuple[str, str]] = [(cwd, n) for n in search.pre_includes]
    try:
        todo += [(cwd, n.decode("utf-8", "surrogateescape")) for n in _referenced(source)]
        while todo:
            here, name = todo.pop()
            for cand in dict.fromkeys(os.path.join(d, name) for d in (here, cwd, *search.dirs)):
                if cand in files or cand in absent:
                    continue
                try:
                    if not stat.S_ISREG(os.stat(cand).st_mode):  # a directory (or a FIFO: open would block)
                        raise IsADirectoryError(cand)
                    with open(cand, "rb") as f:
                        st = os.fstat(f.fileno())
                        data = f.read()
                except OSError:
                    absent.add(cand)
                    continue
                total += len(data)
                if len(files) >= _MAX_FILES or total > _MAX_BYTES:
                    raise _Unscannable("too many included files")
                files[cand] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, hashlib.sha256(data).hexdigest()]
                todo += [(os.path.dirname(cand), n.decode("utf-8", "surrogateescape")) for n in _referenced(data)]
    except _Unscannable:
        return None
    return {"at": at, "files": [[p, *v] for p, v in sorted(files.items())], "absent": sorted(absent)}


def dependencies_unchanged(deps: Any) -> bool:
    """Whether every file of ``deps`` (:func:`scan_dependencies`) holds what it held, and every absent candidate
    is still absent.  Stats each path; reads a file only when its stat differs or is too recent to trust."""
    try:
        at = int(deps["at"])
        for p in deps["absent"]:
            if os.path.isfile(p):
                return False
        for p, size, mtime, ctime, ino, digest in deps["files"]:
            try:
                st = os.stat(p)
            except OSError:
                return False
            if (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) == (size, mtime, ctime, ino) and \
                    max(mtime, ctime) < at - _RACY_NS:
                continue
            if st.st_size != size or not stat.S_ISREG(st.st_mode):
                return False
            try:
                with open(p, "rb") as f:
                    if hashlib.sha256(f.read()).hexdigest() != digest:
                        return False
            except OSError:
                return False
    except (KeyError, TypeError, ValueError):  # not a record of this format
        return False
    return True


def cache_key(*, backend: str, source: bytes, options: Iterable[str] = (), defines: Mapping[str, str | None]
              | None = None, include_dirs: Iterable[str] = (), name_expressions: Iterable[str] = (),
              compiler: str = "", device: str = "", extra: str = "") -> str:
    """The sha256 (hex) of what a compile is given (see the module's doc: headers are not in it, they are checked
    at each hit).  ``compiler``: the compiler's version; ``device``: architecture, name and driver version, as
    one string; ``extra``: anything else the backend adds (its fixed options)."""
    options = list(options)
    search = include_search(options, include_dirs)
    doc = {
        "backend": backend,
        "source": hashlib.sha256(source).hexdigest(),
        "options": options,
        "defines": sorted((defines or {}).items()),
        "search": list(search.dirs),
        "cwd": os.getcwd() if _may_read_files(source, search) else None,
        "names": list(name_expressions),
        "compiler": compiler,
        "device": device,
        "extra": extra,
        "format": 2,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


@dataclass
class CacheStats:
    """What one :class:`KernelCache` object did (this process only)."""

    hits: int = 0
    misses: int = 0
    corrupt: int = 0  # entries found damaged (deleted, counted as misses too)
    stale: int = 0  # entries whose recorded headers changed (counted as misses too; rewritten by the compile)
    writes: int = 0
    evicted: int = 0


class KernelCache:
    """The on-disk cache at ``directory`` (default :func:`default_directory`), bounded to ``max_bytes``
    (default ``IRONACCEL_CACHE_MAX_BYTES`` or 256 MiB).  Errors of the file system (a read-only or full
    disk) never fail a load: a write that fails is dropped, a read that fails is a miss."""

    def __init__(self, directory: str | os.PathLike[str] | None = None, max_bytes: int | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_directory()
        self.max_bytes = _max_bytes_from_env() if max_bytes is None else max_bytes
        self.stats = CacheStats()

    def path(self, key: str) -> Path:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise ValueError(f"not a cache key (64 hex digits): {key!r}")
        return self.directory / (key + _SUFFIX)

    def get(self, key: str) -> bytes | None:
        """The payload stored under ``key``, or None (absent, unreadable, or corrupt: then deleted)."""
        p = self.path(key)
        try:
            with open(p, "rb") as f:
                data = f.read()
        except OSError:
            self.stats.misses += 1
            return None
        payload = _unwrap(data)
        if payload is None:
            self.stats.corrupt += 1
            self.stats.misses += 1
            try:
                p.unlink()
            except OSError:
                pass
            return None
        try:
            os.utime(p)  # recently used: the last to be evicted
        except OSError:
            pass
        self.stats.hits += 1
        return payload

    def put(self, key: str, payload: bytes) -> bool:
        """Store ``payload`` under ``key`` atomically (temp file, fsync, rename); then evict down to
        ``max_bytes``.  Returns whether it was stored (False: too big for the bound, or the disk refused)."""
        p = self.path(key)
        data = _wrap(payload)
        if len(data) > self.max_bytes:
            return False
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-" + key[:16] + "-", dir=self.directory)
        except OSError:
            return False
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, p)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False
        self.stats.writes += 1
        self.evict(keep=p)
        return True

    def get_entry(self, key: str) -> tuple[dict[str, Any], bytes] | None:
        """A :func:`pack`-ed entry whose recorded dependencies (``meta["deps"]``) are unchanged, as (meta, payload);
        None for a miss: absent, corrupt, not a packed entry, or stale (a header it read changed)."""
        data = self.get(key)
        entry = unpack(data) if data is not None else None
        if data is None:
            return None
        if entry is None or not dependencies_unchanged(entry[0].get("deps")):
            self.stats.hits -= 1
            self.stats.misses += 1
            self.stats.stale += 1
            return None
        return entry

    def put_entry(self, key: str, meta: Mapping[str, Any], payload: bytes, deps: dict[str, Any] | None) -> bool:
        """Store ``payload`` with ``meta`` and ``deps`` (:func:`scan_dependencies`, made before the compile); with
        ``deps`` None (what the compile reads cannot be known) nothing is stored and an older entry is removed."""
        if deps is None:
            self.discard(key)
            return False
        return self.put(key, pack({**meta, "deps": deps}, payload))

    def discard(self, key: str) -> None:
        try:
            self.path(key).unlink()
        except OSError:
            pass

    def entries(self) -> list[tuple[Path, int, int]]:
        """(path, size, mtime_ns) of every entry, oldest first."""
        out = []
        try:
            it = list(os.scandir(self.directory))
        except OSError:
            return []
        for e in it:
            if not e.name.endswith(_SUFFIX) or e.name.startswith("."):
                continue
            try:
                st = e.stat()
            except OSError:
                continue
            out.append((Path(e.path), st.st_size, st.st_mtime_ns))
        out.sort(key=lambda t: (t[2], t[0].name))
        return out

    def size(self) -> int:
        return sum(s for _, s, _ in self.entries())

    def evict(self, keep: Path | None = None) -> int:
        """Remove the least recently used entries until the cache holds at most ``max_bytes`` (never
        ``keep``, the entry just written); returns how many were removed."""
        entries = self.entries()
        total = sum(s for _, s, _ in entries)
        removed = 0
        for p, s, _ in entries:
            if total <= self.max_bytes:
                break
            if keep is not None and p == keep:
                continue
            try:
                p.unlink()
            except FileNotFoundError:  # another process evicted it first
                pass
            except OSError:
                continue
            total -= s
            removed += 1
        self.stats.evicted += removed
        return removed

    def clear(self) -> None:
        for p, _, _ in self.entries():
            try:
                p.unlink()
            except OSError:
                pass


def _wrap(payload: bytes) -> bytes:
    return _HEADER.pack(_MAGIC, len(payload), hashlib.sha256(payload).digest()) + payload


def _unwrap(data: bytes) -> bytes | None:
    if len(data) < _HEADER.size:
        return None
    magic, n, digest = _HEADER.unpack_from(data)
    payload = data[_HEADER.size:]
    if magic != _MAGIC or n != len(payload) or hashlib.sha256(payload).digest() != digest:
        return None
    return payload


def pack(meta: Mapping[str, Any], payload: bytes) -> bytes:
    """A payload with a small JSON record in front (ex. NVRTC's image format and lowered names)."""
    head = json.dumps(dict(meta), sort_keys=True).encode()
    return struct.pack("<I", len(head)) + head + payload


def unpack(data: bytes) -> tuple[dict[str, Any], bytes] | None:
    """:func:`pack`'s inverse; None if ``data`` is not one."""
    if len(data) < 4:
        return None
    (n,) = struct.unpack_from("<I", data)
    if 4 + n > len(data):
        return None
    try:
        meta = json.loads(data[4:4 + n])
    except ValueError:
        return None
    if not isinstance(meta, dict):
        return None
    return meta, data[4 + n:]


_DEFAULT: KernelCache | None = None
_DEFAULT_FOR: tuple[str, int] | None = None


def default_cache() -> KernelCache | None:
    """The process's cache, or None when ``IRONACCEL_CACHE=0`` (the environment is read at each call, so a
    test or a program may change it)."""
    global _DEFAULT, _DEFAULT_FOR
    if not enabled():
        return None
    where = (str(default_directory()), _max_bytes_from_env())
    if _DEFAULT is None or _DEFAULT_FOR != where:
        _DEFAULT, _DEFAULT_FOR = KernelCache(where[0], where[1]), where
    return _DEFAULT
