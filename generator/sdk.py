"""SDK discovery: where a library's headers are, and which version they are.

The mechanism only: what to look for comes from each library spec's ``sdk:`` block (:class:`SdkSpec`: the
marker header, environment variables, install roots, programs on PATH, include directories, pip wheels and
how the version is read), so a library bound by a new spec alone is found by ``generate`` and listed by
``ironaccel-gen sdks`` without a change here.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from . import data
from .spec import SdkSpec, SdkVersion

DEFAULT_SPECS = data.SPECS


@dataclass(frozen=True, slots=True, kw_only=True)
class SDK:
    """One installation providing a header set (the SDK kind a library spec's ``sdk:`` names)."""

    kind: str
    version: str  # "unknown" when the description's way of reading it finds nothing
    include_dir: Path
    source: str  # where it was found: an environment variable, a root, "<tool> on PATH", "pip <dist> <version>"

    def __str__(self) -> str:
        return f"{self.kind:6} {self.version:10} {self.include_dir}  ({self.source})"


MAX_HEADER_BYTES = 16 << 20  # what is read of a header for its version macros (the largest known is ~1 MB)


def _read_header(path: Path) -> str | None:
    """A header's text, or None if it cannot be read: only a regular file (a FIFO in an --sdk directory
    would block, /dev/zero never end), and only its first MAX_HEADER_BYTES."""
    try:
        if not path.is_file():
            return None
        with open(path, "rb") as fh:
            return fh.read(MAX_HEADER_BYTES).decode("utf-8", "replace")
    except OSError:
        return None


MAX_NOTICE_LINES = 200


def header_notice(path: Path) -> str | None:
    """The license notice a vendor header opens with: its first comment (``/* ... */`` or a run of ``//`` lines), as
    plain lines without the comment markers and decoration, where it names a copyright; else None.  Generated files
    that reproduce the header's declarations carry it (docs/THIRD_PARTY.md: NVIDIA's notice asks for its disclaimer in
    the internal comments of code using its headers; the Apache-2.0 and MIT headers for their copyright notices)."""
    text = _read_header(path)
    if text is None:
        return None
    s = text.lstrip()
    if s.startswith("/*"):
        end = s.find("*/")
        if end < 0:
            return None
        lines = [re.sub(r"^\s*\*+ ?", "", line) for line in s[2:end].splitlines()]
    elif s.startswith("//"):
        lines = []
        for line in s.splitlines():
            if not line.startswith("//"):
                break
            lines.append(line[2:].removeprefix(" "))
    else:
        return None
    lines = ["" if re.fullmatch(r"[\s*/=\-]*", line) else line.rstrip() for line in lines]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    if not lines or len(lines) > MAX_NOTICE_LINES or not any("copyright" in line.lower() for line in lines):
        return None
    return "\n".join(lines)


def header_version(v: SdkVersion, marker: str, include: Path) -> str | None:
    """The version the SDK's header says (``v``: how to read it), or None."""
    if not (v.macro or v.macros or v.newest):
        return None
    text = _read_header(include / (v.header or marker))
    if text is None:
        return None

    def define(name: str) -> int | None:
        m = re.search(rf"#\s*define\s+{re.escape(name)}\s+\(?(\d+)", text)
        return int(m.group(1)) if m else None

    if v.macro:
        n = define(v.macro)
        if n is None:
            return None
        if len(v.encoding) == 2:
            return f"{n // v.encoding[0]}.{n % v.encoding[0] // v.encoding[1]}"
        return str(n)
    if v.macros:
        parts = [define(name) for name in v.macros]
        return ".".join(str(p) for p in parts if p is not None) or None
    assert v.newest is not None
    prefix, middle, suffix = v.newest.split("*")
    found = [(int(a), int(b)) for a, b in re.findall(
        rf"#\s*define\s+{re.escape(prefix)}(\d+){re.escape(middle)}(\d+){re.escape(suffix)}\b", text)]
    return "%d.%d" % max(found) if found else None


def _dist_version(site: Path, dist: str) -> str | None:
    want = dist.replace("-", "_").lower()
    for d in sorted(site.glob("*.dist-info")):
        name, _, rest = d.name[: -len(".dist-info")].partition("-")
        if name.lower() == want:
            # it is printed into generated banners and docstrings: a plain version string only
            return rest if re.match(r"[A-Za-z0-9_.+\-]+\Z", rest) else None
    return None


def version_key(path: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key that orders paths by the numbers in them as numbers: ``cuda-12.9`` after ``cuda-9.2``
    (lexically ``cuda-9.2`` sorts last and a newest-first glob picked it)."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.findall(r"\d+|\D+", path))


def _roots(desc: SdkSpec) -> list[tuple[Path, str]]:
    """SDK roots in order of preference: environment variables, install prefixes (newest version first, by
    number), tools on PATH."""
    roots: list[tuple[Path, str]] = []
    for env in desc.env:
        if os.environ.get(env):
            roots.append((Path(os.environ[env]), env))
    for pattern in desc.roots:
        for p in sorted(glob.glob(pattern), key=version_key, reverse=True):
            roots.append((Path(p), p if "*" not in pattern else pattern.replace("*", Path(p).name.split("-", 1)[-1])))
    for tool in desc.tools:
        found = shutil.which(tool)
        if found:
            roots.append((Path(found).resolve().parent.parent, f"{tool} on PATH"))
    return roots


def _version(desc: SdkSpec, include: Path, root: Path | None = None) -> str | None:
    v = header_version(desc.version, desc.marker, include)
    if v is None and root is not None and desc.version.root_pattern:
        m = re.search(desc.version.root_pattern, root.resolve().as_posix())
        v = m.group(1) if m else None
    return v


def discover_one(desc: SdkSpec, site_dirs: Iterable[str] | None = None) -> list[SDK]:
    """Every installation of one SDK, most preferred first; no duplicates by include directory."""
    found: list[SDK] = []
    seen: set[Path] = set()
    kind = desc.kind.value

    def add(include: Path, version: str | None, source: str) -> None:
        try:
            key = include.resolve()
        except (OSError, RuntimeError):
            return
        if key in seen or not (include / desc.marker).is_file():
            return
        seen.add(key)
        found.append(SDK(kind=kind, version=version or "unknown", include_dir=include, source=source))

    for root, source in _roots(desc):
        add(root / "include", _version(desc, root / "include", root), source)
    for d in desc.include_dirs:
        add(Path(d), _version(desc, Path(d)), d)
    for site in site_dirs if site_dirs is not None else sys.path:
        sp = Path(site)
        if not site or not sp.is_dir():
            continue
        for wheel in desc.wheels:
            inc = sp / wheel.include
            if (inc / desc.marker).is_file():
                dv = _dist_version(sp, wheel.dist)
                version = dv if desc.version.wheel_dist else _version(desc, inc)
                add(inc, version, f"pip {wheel.dist} {dv or ''}".rstrip())
    return found


_DESCRIPTIONS: dict[Path, dict[str, SdkSpec]] = {}


def descriptions(spec_dir: Path | None = None) -> dict[str, SdkSpec]:
    """The SDK descriptions declared by the library specs of ``spec_dir`` (default: this checkout's specs/), by
    kind.  A spec that does not load is passed over here (``generate`` reports it)."""
    from .diagnostics import UserError
    from .pipeline import spec_paths
    from .spec import load_library

    spec_dir = (spec_dir or DEFAULT_SPECS).resolve()
    if spec_dir not in _DESCRIPTIONS:
        out: dict[str, SdkSpec] = {}
        for p in spec_paths(spec_dir) if spec_dir.is_dir() else []:
            try:
                sp = load_library(p, p.name)
            except UserError:
                continue
            if sp.sdk_spec is not None:
                out.setdefault(sp.sdk_spec.kind.value, sp.sdk_spec)
        _DESCRIPTIONS[spec_dir] = out
    return _DESCRIPTIONS[spec_dir]


def discover(descs: Mapping[str, SdkSpec] | None = None, site_dirs: list[str] | None = None) -> list[SDK]:
    """Every SDK found, kind by kind (in name order), most preferred first within each kind."""
    descs = descriptions() if descs is None else descs
    return [sdk for kind in sorted(descs) for sdk in discover_one(descs[kind], site_dirs)]


def find(kind: str, override: str | None = None, marker: str | None = None,
         descs: Mapping[str, SdkSpec] | None = None) -> SDK | None:
    """The SDK to generate ``kind`` from: ``override`` (an include directory or SDK root) or the first found.

    Any kind (e.g. a test's) may be given by ``override``; it must contain ``marker`` (the spec's first header)
    or the marker of the kind's description.
    """
    descs = descriptions() if descs is None else descs
    desc = descs.get(kind)
    marker = marker or (desc.marker if desc else None)
    if override:
        p = Path(override)
        for inc in (p, p / "include"):
            if marker and (inc / marker).is_file():
                version = _version(desc, inc, p) if desc else None
                return SDK(kind=kind, version=version or "unknown", include_dir=inc, source="--sdk")
        return None
    if desc is None:
        return None
    found = discover_one(desc)
    return found[0] if found else None


def include_path(desc: SdkSpec | None, found: SDK, overrides: Mapping[str, str] | None = None,
                 descs: Mapping[str, SdkSpec] | None = None) -> tuple[tuple[Path, ...], list[str]]:
    """The include directories to parse a library's headers with: its SDK's (``found``), then the declaration's
    ``extra_includes``; and the ``sdk:KIND`` entries whose SDK is not found (the library cannot be parsed)."""
    dirs = [found.include_dir]
    missing: list[str] = []
    for entry in desc.extra_includes if desc is not None else ():
        if entry.startswith("sdk:"):
            kind = entry[len("sdk:"):]
            other = find(kind, (overrides or {}).get(kind), descs=descs)
            if other is None:
                missing.append(kind)
            elif other.include_dir not in dirs:
                dirs.append(other.include_dir)
        else:
            p = Path(entry) if entry.startswith("/") else found.include_dir / entry
            if p not in dirs:
                dirs.append(p)
    return tuple(dirs), missing


__all__ = ["SDK", "include_path", "descriptions", "discover", "discover_one", "find", "header_notice", "header_version", "version_key"]
