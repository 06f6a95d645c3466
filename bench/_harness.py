"""The timing harness shared by the side-by-side benchmarks (bench_opencl.py, bench_gpu.py, bench_launch_cpu.py;
bench_calls.py times statements with timeit but pairs and reports with ratio() and spread()).

Every variant of a section is timed once per repeat, in an order rotated from one repeat to the next; a
ratio is the median over repeats of the *paired* per-repeat ratio, which stays honest when a shared
machine gets slower or faster partway through a run.  ``run_interleaved`` pairs more finely (op by op)
for operations long enough to time one at a time (copies).
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Any, Callable, Protocol


class Sampled(Protocol):
    """What ratio() and spread() read: seconds per op, one sample per repeat."""

    samples: list[float]


class Variant:
    """One way of doing a section's operation: ``body(n)`` runs it ``n`` times (each call doing
    ``ops_per_call`` operations of ``nbytes`` bytes); ``samples`` holds seconds per op, one per repeat."""

    def __init__(self, key: str, label: str, body: Callable[[int], None], ops_per_call: int = 1,
                 nbytes: int = 0) -> None:
        self.key = key
        self.label = label
        self.body = body  # body(n): run n calls
        self.ops_per_call = ops_per_call  # ops (launches, copies) per call
        self.nbytes = nbytes
        self.n = 1
        self.samples: list[float] = []  # seconds per op, one per repeat

    def calibrate(self, target_s: float) -> None:
        self.body(2)  # warm up
        n = 1
        while True:
            t = self._time(n)
            if t >= target_s / 4 or n >= 1 << 22:
                break
            n *= 4
        self.n = max(1, round(n * target_s / max(t, 1e-9)))

    def _time(self, n: int) -> float:
        gcold = gc.isenabled()
        gc.disable()
        try:
            t0 = time.perf_counter()
            self.body(n)
            return time.perf_counter() - t0
        finally:
            if gcold:
                gc.enable()

    def sample(self) -> None:
        self.samples.append(self._time(self.n) / (self.n * self.ops_per_call))

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


def run(variants: list[Variant], repeats: int, target_s: float,
        before_repeat: Callable[[], None] | None = None) -> None:
    """Calibrate every variant to ~``target_s`` per sample, then take ``repeats`` samples of each, in a
    rotated order (no variant always first or last)."""
    for v in variants:
        v.calibrate(target_s)
    for k in range(repeats):
        if before_repeat is not None:
            before_repeat()  # untimed
        r = k % len(variants)
        for v in variants[r:] + variants[:r]:
            v.sample()
        gc.collect()


def run_interleaved(groups: list[list[Variant]], repeats: int, target_s: float,
                    before_repeat: Callable[[], None] | None = None) -> None:
    """Finer pairing for ops long enough to time one by one (copies): in every repeat each group's variants
    alternate op by op (ABBA...), each op timed on its own; a variant's sample is the median of its ops in
    that repeat.  Neighbouring ops see the same machine, which a noisy host needs at the 1-10 ms scale."""
    ops: dict[int, int] = {}
    for g in groups:
        for v in g:
            v.body(2)  # warm up
        t0 = time.perf_counter()
        for v in g:
            v.body(1)
        per_round = time.perf_counter() - t0
        ops[id(g)] = max(3, round(target_s / max(per_round, 1e-9)))
    pc = time.perf_counter
    for k in range(repeats):
        if before_repeat is not None:
            before_repeat()  # untimed
        r = k % len(groups)
        for g in groups[r:] + groups[:r]:
            times: list[list[float]] = [[] for _ in g]
            order = list(range(len(g)))
            gcold = gc.isenabled()
            gc.disable()
            try:
                for j in range(ops[id(g)]):
                    for i in (order if (j + k) % 2 == 0 else order[::-1]):
                        body = g[i].body
                        t0 = pc()
                        body(1)
                        times[i].append(pc() - t0)
            finally:
                if gcold:
                    gc.enable()
            for v, ts in zip(g, times):
                v.samples.append(statistics.median(ts))


def ratio(a: Sampled, b: Sampled) -> float:
    """Median of per-repeat a/b (time ratio)."""
    return statistics.median(x / y for x, y in zip(a.samples, b.samples))


def spread(v: Sampled) -> float:
    """The interquartile range of a variant's samples, in % of their median (0 with fewer than 4)."""
    s = sorted(v.samples)
    q = len(s) // 4
    return (s[-1 - q] - s[q]) / statistics.median(s) * 100 if len(s) >= 4 else 0.0


def us(x: float) -> str:
    return f"{x * 1e6:9.2f}"


class Targets:
    """The ratios a benchmark is judged by (``add``: with a target, OK / MISS) and those it only reports
    (``note``)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, float, str, float, bool]] = []
        self.info: list[tuple[str, float]] = []

    def add(self, what: str, value: float, op: str, target: float) -> None:
        ok = value <= target if op == "<=" else value >= target
        self.rows.append((what, value, op, target, ok))

    def note(self, what: str, value: float) -> None:
        """A ratio reported next to the targets, without one."""
        self.info.append((what, value))

    @property
    def missed(self) -> int:
        return sum(not r[4] for r in self.rows)

    def print(self) -> None:
        print("\n== targets")
        w = max([len(r[0]) for r in self.rows] + [len(i[0]) for i in self.info], default=0)
        for what, value, op, target, ok in self.rows:
            print(f"  {what:<{w}}  {value:6.3f}x  (target {op} {target:.2f}x)  {'OK' if ok else 'MISS'}")
        for what, value in self.info:
            print(f"  {what:<{w}}  {value:6.3f}x  (no target: for context)")
        print(f"  {len(self.rows) - self.missed}/{len(self.rows)} met")

    def as_json(self) -> dict[str, Any]:
        return {"targets": [{"what": w, "value": v, "op": op, "target": t, "ok": ok} for w, v, op, t, ok in self.rows],
                "context": [{"what": w, "value": v} for w, v in self.info]}


def libs_mapped(needle: str) -> set[str]:
    """The files mapped into this process whose path contains ``needle`` (Linux; empty elsewhere)."""
    try:
        with open("/proc/self/maps") as f:
            return {line.split()[-1] for line in f if needle in line and "/" in line}
    except OSError:
        return set()
