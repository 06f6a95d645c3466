"""SDK discovery: where the vendor headers are, and which version they are.

CUDA and NVRTC are looked for in ``CUDA_HOME``/``CUDA_PATH``, the toolkit's
standard prefixes (versioned ones too), the directory of ``nvcc`` on ``PATH``,
and the NVIDIA pip wheels of the running interpreter.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

STANDARD_PREFIXES = ("/usr/local/cuda", "/usr/local/cuda-*", "/opt/cuda", "/opt/nvidia/cuda")
# wheel include directories, relative to site-packages: (sdk kind, directory, distribution prefix)
WHEELS = (
    ("cuda", "nvidia/cu13/include", "nvidia_cuda_runtime"),
    ("cuda", "nvidia/cuda_runtime/include", "nvidia_cuda_runtime_cu12"),
    ("nvrtc", "nvidia/cu13/include", "nvidia_cuda_nvrtc"),
    ("nvrtc", "nvidia/cuda_nvrtc/include", "nvidia_cuda_nvrtc_cu12"),
)
MARKER = {"cuda": "cuda.h", "nvrtc": "nvrtc.h", "opencl": "CL/cl.h", "hip": "hip/hip_runtime_api.h"}
# HIP: ROCm's prefix (ROCM_PATH, HIP_PATH, /opt/rocm*) or Debian's libamdhip64-dev in /usr/include
HIP_ENV = ("ROCM_PATH", "HIP_PATH")
HIP_PREFIXES = ("/opt/rocm", "/opt/rocm-*")
# OpenCL headers (Debian's opencl-headers) live in the system include directories
OPENCL_ENV = ("OPENCL_HOME", "OCL_ROOT")
OPENCL_DIRS = ("/usr/include", "/usr/local/include")


@dataclass(frozen=True, slots=True, kw_only=True)
class SDK:
    """One installation providing a header set.  ex) cuda 13.0 at /usr/local/cuda-13.0/include"""

    kind: str  # cuda | nvrtc
    version: str
    include_dir: Path
    source: str  # ex) CUDA_HOME | /usr/local/cuda | nvcc on PATH | pip nvidia-cuda-nvrtc 13.5.37

    def __str__(self) -> str:
        return f"{self.kind:6} {self.version:10} {self.include_dir}  ({self.source})"


MAX_HEADER_BYTES = 16 << 20  # what is read of a header for its version macros (cuda.h is 1 MB)


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


def _cuda_version(include: Path) -> str | None:
    text = _read_header((include / "cuda.h"))
    if text is None:
        return None
    m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", text)
    if not m:
        return None
    v = int(m.group(1))
    return f"{v // 1000}.{(v % 1000) // 10}"


def _hip_version(include: Path) -> str | None:
    text = _read_header((include / "hip" / "hip_version.h"))
    if text is None:
        return None
    parts = [re.search(rf"#define\s+HIP_VERSION_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts if m) or None


def _opencl_version(include: Path) -> str | None:
    """The newest ``CL_VERSION_X_Y`` the headers know (CL/cl_version.h)."""
    text = _read_header((include / "CL" / "cl_version.h"))
    if text is None:
        return None
    found = [(int(a), int(b)) for a, b in re.findall(r"#define\s+CL_VERSION_(\d+)_(\d+)\b", text)]
    return "%d.%d" % max(found) if found else None


def _toolkit_version(root: Path) -> str | None:
    v = _cuda_version(root / "include")
    if v:
        return v
    m = re.search(r"cuda-(\d+\.\d+)", root.resolve().as_posix())
    return m.group(1) if m else None


def _dist_version(site: Path, prefix: str) -> str | None:
    for d in sorted(site.glob("*.dist-info")):
        name, _, rest = d.name[: -len(".dist-info")].partition("-")
        if name.lower() == prefix:
            # it is printed into generated banners and docstrings: a plain version string only
            return rest if re.match(r"[A-Za-z0-9_.+\-]+\Z", rest) else None
    return None


def _roots() -> list[tuple[Path, str]]:
    roots: list[tuple[Path, str]] = []
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            roots.append((Path(os.environ[env]), env))
    for pattern in STANDARD_PREFIXES:
        for p in sorted(glob.glob(pattern), reverse=True):
            roots.append((Path(p), p if "*" not in pattern else pattern.replace("*", Path(p).name.split("-", 1)[-1])))
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append((Path(nvcc).resolve().parent.parent, "nvcc on PATH"))
    return roots


def discover(site_dirs: list[str] | None = None) -> list[SDK]:
    """Every SDK found, most preferred first within each kind; no duplicates by include directory."""
    found: list[SDK] = []
    seen: set[tuple[str, Path]] = set()

    def add(kind: str, include: Path, version: str | None, source: str) -> None:
        key = (kind, include.resolve())
        if key in seen or not (include / MARKER[kind]).is_file():
            return
        seen.add(key)
        found.append(SDK(kind=kind, version=version or "unknown", include_dir=include, source=source))

    for root, source in _roots():
        v = _toolkit_version(root)
        add("cuda", root / "include", v, source)
        add("nvrtc", root / "include", v, source)
    for env in OPENCL_ENV:
        if os.environ.get(env):
            inc = Path(os.environ[env]) / "include"
            add("opencl", inc, _opencl_version(inc), env)
    for d in OPENCL_DIRS:
        add("opencl", Path(d), _opencl_version(Path(d)), d)
    hip_roots = [(Path(os.environ[e]), e) for e in HIP_ENV if os.environ.get(e)]
    for pattern in HIP_PREFIXES:
        hip_roots += [(Path(p), p) for p in sorted(glob.glob(pattern), reverse=True)]
    for root, source in hip_roots:
        add("hip", root / "include", _hip_version(root / "include"), source)
    for d in OPENCL_DIRS:
        add("hip", Path(d), _hip_version(Path(d)), d)
    for site in site_dirs if site_dirs is not None else sys.path:
        sp = Path(site)
        if not site or not sp.is_dir():
            continue
        for kind, rel, dist in WHEELS:
            inc = sp / rel
            if (inc / MARKER[kind]).is_file():
                dv = _dist_version(sp, dist)
                version = _cuda_version(inc) if kind == "cuda" else dv
                add(kind, inc, version, f"pip {dist.replace('_', '-')} {dv or ''}".rstrip())
    return found


def find(kind: str, override: str | None = None, marker: str | None = None) -> SDK | None:
    """The SDK to generate ``kind`` from: ``override`` (an include directory or SDK root) or the first found.

    Any kind (e.g. a test's) may be given by ``override``; it must contain ``marker``
    (the spec's first header) or, for known kinds, the kind's own marker header.
    """
    marker = marker or MARKER.get(kind)
    if override:
        p = Path(override)
        for inc in (p, p / "include"):
            if marker and (inc / marker).is_file():
                version = _cuda_version(inc) if (inc / "cuda.h").is_file() else _opencl_version(inc)
                return SDK(kind=kind, version=version or "unknown", include_dir=inc, source="--sdk")
        return None
    for sdk in discover():
        if sdk.kind == kind:
            return sdk
    return None
