#!/usr/bin/env python
"""Where an OpenCL host copy's time goes on PoCL: ours against pyopencl and raw cffi call sequences, all on OUR
queue and buffer (so buffer placement and the queue are out of the comparison), in one process.

Run from the repository root (after ``generate`` and ``build``)::

    .venv/bin/python bench/bench_opencl_copy_paths.py [--nbytes N] [--repeats N] [--target-ms MS]

Variants, each a copy + wait, H2D and D2H (bench_opencl.py section 3's method: ``run_interleaved``, the variants
alternating op by op, a repeat's sample being its median op):

  ours          ``copy_from_host`` / ``copy_to_host`` + ``synchronize``
  pyopencl      ``cl.enqueue_copy`` (blocking, asks for an event) + ``queue.finish()`` on our queue and buffer
  raw blocking  ``ffi.from_buffer`` + our raw ``clEnqueueWriteBuffer/ReadBuffer`` (blocking) + ``clFinish``
  raw + event   the same asking for an event (as pyopencl), released before the ``clFinish``
  raw non-blocking  the same non-blocking (the call sequence before issue 27) + ``clFinish``

Then the main thread's CPU time per op (``time.thread_time``: the host work, PoCL's own included, the waits not)
for ours, pyopencl and raw blocking, H2D.  Prints throughput ratios to pyopencl (higher is faster); no targets
(bench_opencl.py holds them).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "generated"))

import numpy as np  # noqa: E402

from _harness import Variant, ratio, run_interleaved, spread, us  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nbytes", type=int, default=4096, help="bytes per copy (default 4096)")
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--target-ms", type=float, default=25.0, help="duration of one sample")
    args = ap.parse_args()

    import pyopencl as pcl

    import ironaccelerator as ia

    dev: Any = ia.BackendRegistry.default().get(ia.BackendKind.OPENCL).open(0)
    s = dev.create_stream()
    ffi, raw = dev.api.ffi, dev.api.raw
    nb = args.nbytes
    host = (np.arange(nb // 4, dtype=np.int32) * 3) % 1000
    out = np.empty_like(host)
    a = dev.alloc(nb)
    buf, q, null = a.buffer, s.queue, ffi.NULL
    pq = pcl.CommandQueue.from_int_ptr(int(ffi.cast("uintptr_t", q)), retain=True)
    pb: Any = pcl.Buffer.from_int_ptr(int(ffi.cast("uintptr_t", buf)), retain=True)  # (typed object)
    write, read, finish, fb, release = (raw.clEnqueueWriteBuffer, raw.clEnqueueReadBuffer, raw.clFinish,
                                        ffi.from_buffer, raw.clReleaseEvent)
    ev = ffi.new("cl_event *")
    print(f"device: {dev.descriptor.name}; {nb} B per copy, {args.repeats} repeats, sample ~{args.target_ms:.0f} ms\n")

    def variants(h2d: bool) -> list[Variant]:
        def ours(n: int) -> None:
            if h2d:
                for _ in range(n):
                    s.copy_from_host(a, host)
                    s.synchronize()
            else:
                for _ in range(n):
                    s.copy_to_host(out, a)
                    s.synchronize()

        def pyopencl(n: int) -> None:
            for _ in range(n):
                pcl.enqueue_copy(pq, pb, host) if h2d else pcl.enqueue_copy(pq, out, pb)
                pq.finish()

        def raw_seq(blocking: int, event: Any) -> Callable[[int], None]:
            def f(n: int) -> None:
                for _ in range(n):
                    if h2d:
                        p = fb(host)
                        write(q, buf, blocking, 0, nb, p, 0, null, event)
                    else:
                        p = fb("char[]", out, True)
                        read(q, buf, blocking, 0, nb, p, 0, null, event)
                    if event is not null:
                        release(event[0])
                    finish(q)
            return f

        return [Variant("ours", "ours", ours, nbytes=nb), Variant("pyopencl", "pyopencl", pyopencl, nbytes=nb),
                Variant("raw_b", "raw blocking", raw_seq(1, null), nbytes=nb),
                Variant("raw_b_ev", "raw blocking + event", raw_seq(1, ev), nbytes=nb),
                Variant("raw_nb", "raw non-blocking", raw_seq(0, null), nbytes=nb)]

    for h2d in (True, False):
        vs = variants(h2d)
        run_interleaved([vs], args.repeats, args.target_ms / 1e3)
        p = vs[1]
        print(f"== {'H2D' if h2d else 'D2H'}: copy + wait on our queue and buffer")
        print(f"  {'variant':<22} {'median us':>10} {'thr / pyopencl':>15} {'IQR%':>6}")
        for v in vs:
            print(f"  {v.label:<22} {us(v.median):>10} {1 / ratio(v, p):15.3f} {spread(v):6.1f}")
        print()

    h2d_vs = variants(True)[:3]
    cpu: dict[str, list[float]] = {v.label: [] for v in h2d_vs}
    n = 300
    for _ in range(args.repeats):
        for v in h2d_vs:
            c0 = time.thread_time()
            v.body(n)
            cpu[v.label].append((time.thread_time() - c0) / n)
    base = cpu["pyopencl"]
    print("== H2D: the main thread's CPU time per copy + wait (time.thread_time)")
    for label, xs in cpu.items():
        print(f"  {label:<22} {us(statistics.median(xs)):>10} us  / pyopencl "
              f"{statistics.median(x / y for x, y in zip(xs, base)):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
