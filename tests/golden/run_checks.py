"""Runs golden cases' check scripts in this one interpreter (test_golden.py starts one per mode and variant).

``run_checks.py MODE VARIANT CASE...``: MODE is the binding mode each case's library must be in (``api`` or
``abi``), VARIANT the build of the libraries (``''``, ``no-resolver``, ``no-match`` or ``other-major``); each
check gets them as its arguments.  Prints each case's name before its check (so a crash names it), then one line of JSON: for
each case, null if its check passed, else the traceback.
"""

from __future__ import annotations

import contextlib
import io
import json
import runpy
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(mode: str, variant: str, cases: list[str]) -> dict[str, str | None]:
    results: dict[str, str | None] = {}
    for case in cases:
        print(f"--- {case}", flush=True)
        script = HERE / case / f"check_{case}.py"
        sys.argv = [str(script), mode, *([variant] if variant else [])]
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                runpy.run_path(str(script), run_name="__main__")
        except BaseException:  # SystemExit too: a check that exits has not passed
            results[case] = out.getvalue() + traceback.format_exc()
        else:
            results[case] = None
    return results


if __name__ == "__main__":
    report = main(sys.argv[1], sys.argv[2], sys.argv[3:])
    print(json.dumps(report))
