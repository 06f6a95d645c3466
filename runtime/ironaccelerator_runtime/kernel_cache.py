"""A content-addressed, size-bounded on-disk cache of compiled device code (``Device.load_module``'s).

The key is the sha256 of everything the compiled artifact depends on that the runtime can see: the backend,
the source, the compile options (``-D`` and ``-I`` included), the include directories' files (each file's
path, size and modification time: an edited header changes the key), the compiler's version and the device
(architecture, name, driver version).  Headers reached outside ``include_dirs`` (system headers, paths
given inside raw ``options``) are not hashed: change the source or the options to see their edits.

The value is the backend's artifact (NVRTC: the PTX or cubin that loaded, with the lowered names of the
name expressions; OpenCL: the program binary of ``CL_PROGRAM_BINARIES``).  Each entry is one file
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
import struct
import sys
import tempfile
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


def include_signature(include_dirs: Iterable[str]) -> list[list[Any]]:
    """What the key takes of each include directory: its path and, per file under it (sorted), the relative
    path, size and modification time (ns).  A missing directory counts by its path alone."""
    out: list[list[Any]] = []
    for d in include_dirs:
        files: list[list[Any]] = []
        for root, dirs, names in os.walk(d):
            dirs.sort()
            for n in sorted(names):
                p = os.path.join(root, n)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                files.append([os.path.relpath(p, d), st.st_size, st.st_mtime_ns])
        out.append([os.path.abspath(d), files])
    return out


def cache_key(*, backend: str, source: bytes, options: Iterable[str] = (), defines: Mapping[str, str | None]
              | None = None, include_dirs: Iterable[str] = (), name_expressions: Iterable[str] = (),
              compiler: str = "", device: str = "", extra: str = "") -> str:
    """The sha256 (hex) of everything a compiled artifact depends on.  ``compiler``: the compiler's version;
    ``device``: architecture, name and driver version, as one string; ``extra``: anything else the backend
    adds (its fixed options)."""
    doc = {
        "backend": backend,
        "source": hashlib.sha256(source).hexdigest(),
        "options": list(options),
        "defines": sorted((defines or {}).items()),
        "include": include_signature(include_dirs),
        "names": list(name_expressions),
        "compiler": compiler,
        "device": device,
        "extra": extra,
        "format": 1,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


@dataclass
class CacheStats:
    """What one :class:`KernelCache` object did (this process only)."""

    hits: int = 0
    misses: int = 0
    corrupt: int = 0  # entries found damaged (deleted, counted as misses too)
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
