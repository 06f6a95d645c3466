#!/usr/bin/env python
"""Which C optimisation level the generated cffi modules are compiled at: compile time against call speed.

Run from the repository root::

    .venv/bin/python bench/bench_optimize.py [--levels -O0 -O1 -O2] [--repeats N] [--rounds R]

For each level, the API-mode modules of cuda.driver (the largest: what a fresh ``make generate`` waits for),
cuda.nvrtc and opencl.cl are compiled into a copy of generated/ under build/bench/opt/<level>/ (the flag the
generated ``_cffi_build.py`` asks for is overridden, nothing in generated/ is touched), timed, ``--repeats`` times
per level, the levels interleaved.  Then, per level, a child interpreter imports that copy and times what the level
changes -- the compiled trampolines and the checked fast path -- on calls that need no GPU:

* ``nvrtcVersion()``                      checked fast path (C): two int out-parameters -> tuple
* ``nvrtcGetErrorString(6)``              checked fast path (C): returns a C string -> str
* ``unchecked.clGetPlatformIDs(0, NULL, &n)`` the raw trampoline into PoCL's ICD loader

in ``--rounds`` rounds, the levels in a rotated order each round; medians.  Ratios are against the last level.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "generated"), str(ROOT / "runtime")]
OUT = ROOT / "build" / "bench" / "opt"
LIBS = ("cuda/driver", "cuda/nvrtc", "opencl/cl")

CHILD = r"""
import json, sys, timeit
from ironaccelerator.backends.cuda import nvrtc
from ironaccelerator.backends.opencl.cl import _binding as clb, unchecked as cl
assert nvrtc._binding.BINDING.mode == "api" and clb.BINDING.mode == "api", "API modules not used"
ffi = clb.BINDING.ffi
n, null = ffi.new("cl_uint *"), ffi.NULL
cases = {
    "nvrtcVersion()": lambda: nvrtc.nvrtcVersion(),
    "nvrtcGetErrorString(6)": lambda: nvrtc.nvrtcGetErrorString(6),
    "clGetPlatformIDs(0, NULL, &n) raw": lambda: cl.clGetPlatformIDs(0, null, n),
}
out = {}
for name, fn in cases.items():
    fn()
    t = timeit.Timer(fn)
    k, _ = t.autorange()
    out[name] = min(t.repeat(5, k)) / k
print(json.dumps(out))
"""


def build(level: str) -> float:
    """Compile the API modules of LIBS at ``level`` into OUT/<level>; returns cuda.driver's compile seconds."""
    from ironaccelerator_gen import build as gb

    dest = OUT / level.lstrip("-")
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(ROOT / "generated" / "ironaccelerator", dest / "ironaccelerator",
                    ignore=shutil.ignore_patterns("_cffi.*.so", ".ironaccel-build*", "__pycache__"))
    driver_s = 0.0
    for rel in LIBS:
        lib_dir = dest / "ironaccelerator" / "backends" / rel
        api, abi = gb.ffibuilders(lib_dir, optimize=level)
        abi.emit_python_code(str(lib_dir / "_cffi_abi.py"))
        mod = gb._load(lib_dir / "_cffi_build.py")
        with open(lib_dir / "_cffi_abi.py", "a", encoding="utf-8") as fh:
            fh.write(f"BUILD_ID = {mod.BUILD_ID!r}\n")
        tmp = OUT / "tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        t0 = time.perf_counter()
        so = Path(api.compile(tmpdir=str(tmp), verbose=False))
        if rel == "cuda/driver":
            driver_s = time.perf_counter() - t0
        shutil.copy2(so, lib_dir / so.name)
    return driver_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", nargs="+", default=["-O0", "-O1", "-O2"])
    ap.add_argument("--repeats", type=int, default=2, help="compiles per level (interleaved)")
    ap.add_argument("--rounds", type=int, default=7, help="call-timing rounds (each runs every level once)")
    args = ap.parse_args()
    compile_s: dict[str, list[float]] = {lv: [] for lv in args.levels}
    for _ in range(args.repeats):
        for lv in args.levels:
            compile_s[lv].append(build(lv))
    calls: dict[str, dict[str, list[float]]] = {lv: {} for lv in args.levels}
    for r in range(args.rounds):
        order = args.levels[r % len(args.levels):] + args.levels[:r % len(args.levels)]
        for lv in order:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(OUT / lv.lstrip("-")), str(ROOT / "runtime")])}
            proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300)
            if proc.returncode != 0:
                print(proc.stderr, file=sys.stderr)
                return 1
            for name, s in json.loads(proc.stdout).items():
                calls[lv].setdefault(name, []).append(s)
    ref = args.levels[-1]
    print(f"cuda.driver API module compile (median of {args.repeats}), and per-call ns (median of {args.rounds} "
          f"rounds); ratios / {ref}")
    print(f"{'':38}" + "".join(f"{lv:>16}" for lv in args.levels))
    med = {lv: statistics.median(v) for lv, v in compile_s.items()}
    print(f"{'compile cuda.driver (s)':38}" + "".join(f"{med[lv]:9.1f} ({med[lv] / med[ref]:4.2f})"
                                                       for lv in args.levels))
    for name in calls[ref]:
        m = {lv: statistics.median(calls[lv][name]) * 1e9 for lv in args.levels}
        print(f"{name:38}" + "".join(f"{m[lv]:9.1f} ({m[lv] / m[ref]:4.2f})" for lv in args.levels))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
