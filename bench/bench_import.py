#!/usr/bin/env python
"""Import time: what ``import ironaccelerator`` and a raw binding cost a fresh interpreter.

Run from the repository root::

    .venv/bin/python bench/bench_import.py [--repeats N] [--tree DIR ...]

Each command runs in a fresh child interpreter, its wall time measured from this process; every repeat runs each
command once per tree, in a rotated order, and the medians are reported, with ``python -c pass`` (the interpreter's
own start) as the floor.  ``--tree DIR`` (repeatable) times another checkout's ``generated/`` and ``runtime/``
(put first on ``sys.path``) beside this one, e.g. a worktree of the commit before a change: "before / after" is
the ratio of its medians to this tree's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {
    "python -c pass": "pass",
    "import ironaccelerator": "import ironaccelerator",
    "import ironaccelerator; ironaccelerator.Device": "import ironaccelerator; ironaccelerator.Device",
    "import ironaccelerator.backends.opencl.cl": "import ironaccelerator.backends.opencl.cl",
    "import ironaccelerator.backends.cuda.driver": "import ironaccelerator.backends.cuda.driver",
}


def _env(tree: Path) -> dict[str, str]:
    paths = [str(tree / "generated"), str(tree / "runtime"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--tree", type=Path, action="append", default=[], help="another checkout to time beside this")
    args = ap.parse_args()
    trees = [ROOT, *(t.resolve() for t in args.tree)]
    runs = [(tree, name) for tree in trees for name in COMMANDS]
    times: dict[tuple[Path, str], list[float]] = {run: [] for run in runs}
    for i in range(args.repeats):
        for tree, name in runs[i % len(runs):] + runs[:i % len(runs)]:
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", COMMANDS[name]], cwd=tree, env=_env(tree), check=True)
            times[tree, name].append(time.perf_counter() - t)
    for tree in trees:
        print(f"{tree}  ({args.repeats} repeats, median wall time of a fresh interpreter)")
        for name in COMMANDS:
            median = statistics.median(times[tree, name]) * 1e3
            ratio = ""
            if tree != ROOT:
                ratio = f"   this tree / it: {statistics.median(times[ROOT, name]) * 1e3 / median:.2f}"
            print(f"  {name:50s} {median:7.1f} ms{ratio}")


if __name__ == "__main__":
    main()
