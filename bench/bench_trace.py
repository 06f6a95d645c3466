#!/usr/bin/env python
"""The cost of IRONACCEL_TRACE (ironaccelerator_runtime.tracing) per raw driver call, side by side in one process.

Run from the repository root::

    .venv/bin/python bench/bench_trace.py [--repeats N] [--target-ms MS]

One cheap OpenCL call, ``clGetPlatformIDs(0, NULL, &n)`` on PoCL, three ways:

* off            the raw compiled cffi function, which is what the backends call when IRONACCEL_TRACE is unset:
                 the generated modules wrap nothing then (tests/test_tracing.py checks the identity), so "off"
                 costs exactly nothing next to a build without tracing
* wrapped, idle  its traced twin while not logging (IRONACCEL_TRACE=ondemand outside ``trace()``)
* tracing        the traced twin logging each call (to a handler that drops the records: the formatting of the
                 message is paid, not the writing)
* nvtx           its IRONACCEL_TRACE=nvtx twin, not logging: the call inside an NVTX range of the ironaccelerator
                 domain, with no profiler attached (NVTX's calls return at once); only where NVIDIA's NVTX library
                 (libnvtx3interop.so.1) is installed
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent / "generated"),
                str(Path(__file__).resolve().parent.parent / "runtime")]

from _harness import Variant, ratio, run, spread, us  # noqa: E402

from ironaccelerator.backends.opencl.cl._binding import BINDING  # noqa: E402
from ironaccelerator_runtime import nvtx, tracing  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--target-ms", type=float, default=20.0)
    args = ap.parse_args()
    BINDING.lib.clGetPlatformIDs(0, BINDING.ffi.NULL, BINDING.ffi.new("cl_uint *"))  # opens the library
    ffi, raw = BINDING.ffi, BINDING.lib.clGetPlatformIDs
    traced = tracing.traced(raw, "clGetPlatformIDs")
    n, null = ffi.new("cl_uint *"), ffi.NULL

    class Drop(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            record.getMessage()  # formatted, then dropped

    tracing.log.addHandler(Drop())
    tracing.log.setLevel(logging.DEBUG)
    tracing.log.propagate = False

    def off(k: int) -> None:
        for _ in range(k):
            raw(0, null, n)

    def idle(k: int) -> None:
        tracing._active = False
        for _ in range(k):
            traced(0, null, n)

    def on(k: int) -> None:
        tracing._active = True
        try:
            for _ in range(k):
                traced(0, null, n)
        finally:
            tracing._active = False

    variants = [Variant("off", "off: the raw function (IRONACCEL_TRACE unset)", off),
                Variant("idle", "wrapped, not logging (ondemand outside trace())", idle),
                Variant("on", "tracing: each call logged", on)]
    if nvtx.available():
        ranged = tracing._ranged(raw, "clGetPlatformIDs")

        def in_range(k: int) -> None:
            tracing._active = False
            for _ in range(k):
                ranged(0, null, n)

        variants.append(Variant("nvtx", "IRONACCEL_TRACE=nvtx: in an NVTX range, no profiler", in_range))
    else:
        print("nvtx: NVIDIA's NVTX library is not installed here; that row is left out")
    run(variants, args.repeats, args.target_ms / 1e3)
    base = variants[0]
    print(f"{'clGetPlatformIDs(0, NULL, &n), PoCL':60} {'per call':>10} {'IQR%':>6} {'/ off':>7}")
    for v in variants:
        print(f"  {v.label:58} {us(sorted(v.samples)[len(v.samples) // 2]):>10} {spread(v):6.1f} "
              f"{ratio(v, base):7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
