"""Build the IA Simulated Metal Device (metal_sim.m: a test fixture implementing Metal's selectors on the CPU, not
Apple Metal) into a shared library, with gcc's Objective-C front-end (Debian: gobjc) against the GNU runtime and
GNUstep Foundation (libgnustep-base-dev).  Nothing built here is checked in: callers give a build directory.

The libraries a process needs, in order, all loaded RTLD_GLOBAL (Debian's linker drops -lgnustep-base under
--as-needed, so classes reached only through objc_getClass would come back nil): RUNTIME, FOUNDATION, then the
simulator itself.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "metal_sim.m"
LIBRARY_NAME = "libia_metal_sim.so"
RUNTIME = "libobjc.so.4"  # the GNU Objective-C runtime (objc_msg_lookup; no objc_msgSend)
FOUNDATION = "libgnustep-base.so.1.28"
DEVICE_NAME = "IA Simulated Metal Device"


def missing_toolchain() -> str | None:
    """Why the simulator cannot be built here (a sentence naming the Debian package), or None."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return "no gcc"
    cc1obj = subprocess.run([gcc, "-print-prog-name=cc1obj"], capture_output=True, text=True).stdout.strip()
    if not Path(cc1obj).is_file():
        return "gcc has no Objective-C front-end (cc1obj): install Debian's gobjc"
    if shutil.which("gnustep-config") is None:
        return "no gnustep-config: install Debian's libgnustep-base-dev (GNUstep Foundation)"
    return None


def _gnustep(flag: str) -> list[str]:
    out = subprocess.run(["gnustep-config", flag], capture_output=True, text=True, check=True).stdout
    # -MMD/-MP would write dependency files next to the output: not wanted for a one-off build
    return [f for f in shlex.split(out) if f not in ("-MMD", "-MP")]


def build(out_dir: Path) -> Path:
    """Compile metal_sim.m into ``out_dir``/libia_metal_sim.so (warnings are errors) and return its path.

    Raises RuntimeError with the reason when the toolchain is missing, or with the compiler's output when the
    build fails."""
    why = missing_toolchain()
    if why is not None:
        raise RuntimeError(why)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / LIBRARY_NAME
    cmd = [
        "gcc", "-x", "objective-c", "-std=gnu11", *_gnustep("--objc-flags"), "-Werror", "-shared", "-fPIC",
        "-o", str(out), str(SOURCE), *_gnustep("--base-libs"), "-lpthread",
    ]
    r = subprocess.run(cmd, cwd=out_dir, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"building the simulated Metal device failed:\n{shlex.join(cmd)}\n{r.stdout}{r.stderr}")
    return out


CHECK_SOURCE = Path(__file__).resolve().parent / "check_sim.m"


def build_check(out_dir: Path, library: Path) -> Path:
    """Compile check_sim.m (the simulator driven from Objective-C, from several threads) against ``library`` (as
    built by build()) into ``out_dir``/check_sim, and return its path."""
    out = out_dir / "check_sim"
    cmd = [
        "gcc", "-x", "objective-c", "-std=gnu11", *_gnustep("--objc-flags"), "-Werror", "-o", str(out),
        str(CHECK_SOURCE), f"-L{library.parent}", "-l:" + library.name, f"-Wl,-rpath,{library.parent}",
        "-Wl,--no-as-needed", *_gnustep("--base-libs"), "-lpthread",
    ]
    r = subprocess.run(cmd, cwd=out_dir, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"building check_sim failed:\n{shlex.join(cmd)}\n{r.stdout}{r.stderr}")
    return out


if __name__ == "__main__":
    import sys

    print(build(Path(sys.argv[1] if len(sys.argv) > 1 else "build/metal_sim")))
