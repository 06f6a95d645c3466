#!/usr/bin/env python
"""How long generating the CUDA driver + NVRTC bindings takes: in memory, as a no-op CLI run, and the C compile.

Run from the repository root::

    .venv/bin/python bench/bench_generate.py [--repeats N] [--quick] [--no-compile] [--opt-compare]

1. ``pipeline.compile_specs(Path("specs"))`` in this process (parse + bind + render; nothing written, no
   C compile): the first (cold) call, then the median of ``--repeats`` calls, with a per-stage breakdown
   (spec loading, libclang parse and macro pass per library, bind, render) timed in the same repeats.
2. The CLI as a subprocess, interleaved in each repeat: ``python -c pass`` (interpreter start-up),
   ``python -c "import ironaccelerator_gen.pipeline"`` (start-up + the generator's imports), the no-op
   ``python -m ironaccelerator_gen generate`` and ``generate --force`` (full regeneration, nothing to write).
   These write to build/bench/gen-out, never to generated/, so the package in use is not touched.
3. The C compile of each API-mode module: ``ironaccelerator_gen.build.build_library(dir)`` run once on a copy
   of every generated/ironaccelerator/backends/*/* library dir (under build/bench/compile/), with the
   optimisation flags the generated ``_cffi_build.py`` asks for.  ``--opt-compare`` also compiles the
   largest module at -O0/-O1/-O2 to show what the optimisation level costs.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "bench"
GEN_OUT = BUILD / "gen-out"
COMPILE_DIR = BUILD / "compile"
PYTHON = sys.executable

TARGET_GENERATION_S = 1.0
TARGET_NOOP_S = 0.2


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def fmt_s(x: float) -> str:
    return f"{x * 1000:8.1f} ms" if x < 10 else f"{x:8.2f} s "


def ok(b: bool) -> str:
    return "OK" if b else "MISS"


# ----------------------------------------------------------------------------- 1. in-process generation


# the target covers these two libraries; every other library is timed too, without a target
TARGET_LIBS = ["cuda.driver", "cuda.nvrtc"]


def staged_compile(spec_dir: Path) -> dict[str, float]:
    """The stages of pipeline.compile_specs, called one by one (same functions, same order), timed."""
    from ironaccelerator_gen import sdk as sdks
    from ironaccelerator_gen.bind import bind
    from ironaccelerator_gen.frontend import ParseRequest, macros
    from ironaccelerator_gen.frontend import clang as fe
    from ironaccelerator_gen.pipeline import _display, spec_paths
    from ironaccelerator_gen.render import environment, render_library, render_package
    from ironaccelerator_gen.spec import load_core, load_library

    t: dict[str, float] = {}
    base = spec_dir.parent
    c = time.perf_counter()
    core = load_core(spec_dir / "core.yaml", _display(spec_dir / "core.yaml", base))
    specs = [sp for sp in (load_library(p, _display(p, base)) for p in spec_paths(spec_dir))
             if f"{sp.vendor}.{sp.library}" in TARGET_LIBS]
    t["load specs (YAML)"] = time.perf_counter() - c
    libraries = []
    for spec in specs:
        name = f"{spec.vendor}.{spec.library}"
        c = time.perf_counter()
        found = sdks.find(spec.sdk.value, None)
        t[f"{name}: find SDK"] = time.perf_counter() - c
        if found is None:
            continue
        headers = tuple(h.value for h in spec.headers + spec.version_headers)
        request = ParseRequest(headers=headers, include_dirs=(found.include_dir,), defines=spec.defines,
                               undefines=spec.undefines, where=spec.location)
        c = time.perf_counter()
        raw = fe.parse(request)
        t[f"{name}: libclang parse ({' + '.join(headers)})"] = time.perf_counter() - c
        c = time.perf_counter()
        header = macros.interpret(raw)
        t[f"{name}: macro pass"] = time.perf_counter() - c
        c = time.perf_counter()
        libraries.append(bind(spec, core, header, sdk_version=None if spec.version_macro else found.version))
        t[f"{name}: bind"] = time.perf_counter() - c
    c = time.perf_counter()
    env = environment()
    files = render_package(env, core, (lib.spec.vendor.value for lib in libraries))
    t["render: package files"] = time.perf_counter() - c
    for lib in libraries:
        c = time.perf_counter()
        files.update(render_library(env, lib))
        t[f"render: {lib.module}"] = time.perf_counter() - c
    return t


def bench_in_process(repeats: int) -> tuple[float, bool]:
    print(f"\n[1] In-process generation: pipeline.compile_specs(Path('specs'), only={TARGET_LIBS})  "
          "(parse + bind + render, no writes)")
    c = time.perf_counter()
    from ironaccelerator_gen import pipeline
    t_import = time.perf_counter() - c

    c = time.perf_counter()
    result = pipeline.compile_specs(Path("specs"), only=TARGET_LIBS)
    t_cold = time.perf_counter() - c
    for s in result.skipped:
        print(f"  skipped {s}")
    libs = ", ".join(f"{lib.module} ({len(lib.functions)} functions)" for lib in result.libraries)
    print(f"  {len(result.files)} files, {sum(len(v) for v in result.files.values()) / 1e6:.1f} MB of text: {libs}")

    totals: list[float] = []
    everything: list[float] = []
    stages: dict[str, list[float]] = {}
    breakdown_error = None
    for r in range(repeats):
        gc.collect()
        order = ("full", "staged") if r % 2 == 0 else ("staged", "full")
        for what in order:
            if what == "full":
                c = time.perf_counter()
                pipeline.compile_specs(Path("specs"), only=TARGET_LIBS)
                totals.append(time.perf_counter() - c)
                c = time.perf_counter()
                pipeline.compile_specs(Path("specs"))
                everything.append(time.perf_counter() - c)
            elif breakdown_error is None:
                try:
                    for k, v in staged_compile(Path("specs")).items():
                        stages.setdefault(k, []).append(v)
                except Exception as exc:  # noqa: BLE001 - the pipeline's internals may move under us
                    breakdown_error = f"{exc.__class__.__name__}: {exc}"
    t = med(totals)
    print(f"  import ironaccelerator_gen.pipeline (this process)   {fmt_s(t_import)}")
    print(f"  first call (cold: libclang load, gcc include probe)   {fmt_s(t_cold)}")
    print(f"  median of {repeats} warm calls                          {fmt_s(t)}   "
          f"(min {min(totals) * 1000:.1f} ms, max {max(totals) * 1000:.1f} ms)")
    print(f"  every spec (all libraries + core surface + backends), median  {fmt_s(med(everything))}   (no target)")
    if breakdown_error:
        print(f"  breakdown unavailable ({breakdown_error})")
    elif stages:
        staged_sum = sum(med(v) for v in stages.values())
        print(f"\n  breakdown (median over {repeats} repeats of the stages called one by one; sum "
              f"{staged_sum * 1000:.1f} ms):")
        for k, samples in stages.items():
            m = med(samples)
            print(f"    {k:70s} {m * 1000:8.1f} ms  {100 * m / staged_sum:5.1f}%")
    return t, t <= TARGET_GENERATION_S


# ----------------------------------------------------------------------------- 2. subprocesses


def run_cmd(argv: list[str]) -> tuple[float, str]:
    c = time.perf_counter()
    p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    dt = time.perf_counter() - c
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return dt, p.stdout + p.stderr


def bench_subprocess(repeats: int) -> tuple[float, bool]:
    rel_out = GEN_OUT.relative_to(ROOT).as_posix()
    gen = [PYTHON, "-m", "ironaccelerator_gen", "generate", "--out", rel_out]
    print(f"\n[2] CLI as a subprocess (cwd = repo root; output to {rel_out}/, not generated/)")
    # prime: a real generation into our private output dir, so the next runs are no-ops
    dt, out = run_cmd(gen)
    print(f"  priming run: {dt * 1000:.0f} ms: {out.strip().splitlines()[-1] if out.strip() else ''}")
    variants = {
        "python -c pass  (interpreter start-up)": [PYTHON, "-c", "pass"],
        "python -c 'import ironaccelerator_gen.cli'": [PYTHON, "-c", "import ironaccelerator_gen.cli"],
        "python -c 'import ironaccelerator_gen.pipeline'": [PYTHON, "-c", "import ironaccelerator_gen.pipeline"],
        "generate  (no-op: nothing changed)": gen,
        "generate --force  (full regeneration, nothing to write)": gen + ["--force"],
    }
    keys = list(variants)
    samples: dict[str, list[float]] = {k: [] for k in keys}
    not_noop = 0
    for r in range(repeats):
        k0 = r % len(keys)
        for k in keys[k0:] + keys[:k0]:
            dt, out = run_cmd(variants[k])
            if variants[k] is gen and "up to date" not in out:
                not_noop += 1  # an input (e.g. a generator source being edited) changed: not a no-op
                continue
            samples[k].append(dt)
    start, noop = med(samples[keys[0]]), med(samples[keys[3]]) if samples[keys[3]] else float("nan")
    print(f"  {'command':58s} {'median':>11}  {'- start-up':>11}")
    for k in keys:
        if samples[k]:
            m = med(samples[k])
            print(f"  {k:58s} {fmt_s(m)}  {fmt_s(m - start)}   (n={len(samples[k])})")
        else:
            print(f"  {k:58s} {'n/a':>11}")
    if not_noop:
        print(f"  note: {not_noop} 'no-op' run(s) regenerated (an input changed while measuring) and were dropped")
    # where the no-op's time goes: the imports it does before it can say "up to date"
    p = subprocess.run([PYTHON, "-X", "importtime", "-m", "ironaccelerator_gen", "generate", "--out", rel_out],
                       cwd=ROOT, capture_output=True, text=True)
    rows = []
    for line in p.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            parts = line[len("import time:"):].split("|")
            try:
                rows.append((int(parts[0]), int(parts[1]), parts[2].rstrip()))
            except ValueError:
                pass
    if rows:
        total_us = sum(s for s, _, _ in rows)
        ours = sum(s for s, _, n in rows if "ironaccelerator_gen" in n)
        print(f"\n  imports done by the no-op run (python -X importtime, one run): {total_us / 1000:.0f} ms in all, "
              f"{ours / 1000:.0f} ms in ironaccelerator_gen's own modules")
        print("  largest cumulative imports (name as printed by -X importtime; indentation = nesting):")
        for self_us, cum_us, name in sorted(rows, key=lambda x: -x[1])[:12]:
            print(f"    {cum_us / 1000:7.1f} ms cumulative  {self_us / 1000:6.1f} ms self  {name}")
    return noop, noop <= TARGET_NOOP_S


# ----------------------------------------------------------------------------- 3. C compile


def copy_library(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    for p in src.iterdir():
        if p.is_file() and not p.name.startswith("_cffi.") and p.name != "_cffi_abi.py":
            shutil.copy2(p, dst / p.name)


def bench_compile(quick: bool, opt_compare: bool) -> None:
    from ironaccelerator_gen import build

    print("\n[3] C compile of the API-mode modules: build.build_library(dir) once per library "
          "(on a copy under build/bench/compile/)")
    dirs = build.library_dirs(ROOT / "generated")
    if not dirs:
        print("  no generated library dirs found (run: .venv/bin/python -m ironaccelerator_gen generate)")
        return
    biggest = max(dirs, key=lambda d: (d / "trampolines.c").stat().st_size if (d / "trampolines.c").exists() else 0)
    for d in dirs:
        rel = d.relative_to(ROOT / "generated").as_posix()
        mod = build._load(d / "_cffi_build.py")
        flags = getattr(mod, "OPTIMIZE", "?")
        n_fn = sum(1 for line in (d / "api.cdef").read_text().splitlines() if line.rstrip().endswith(");")) \
            if (d / "api.cdef").exists() else 0
        size = sum((d / f).stat().st_size for f in ("trampolines.c", "types.cdef") if (d / f).exists())
        if quick and d == biggest and len(dirs) > 1:
            print(f"  {rel}: skipped with --quick (the largest module; flags {flags})")
            continue
        dst = COMPILE_DIR / rel.replace("/", "_")
        copy_library(d, dst)
        c = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # cffi prints "generating ..."
            times = build.build_library(dst)
        total = time.perf_counter() - c
        print(f"  {rel:40s} {total:6.2f} s total: API compile {times.get('api', float('nan')):6.2f} s, "
              f"ABI module {times.get('abi', float('nan')):5.2f} s  [flags: {flags}; {n_fn} C function declarations, "
              f"{size / 1e3:.0f} kB of C source before cffi]")
    if opt_compare:
        import cffi  # noqa: F401

        rel = biggest.relative_to(ROOT / "generated").as_posix()
        print(f"\n  optimisation level vs compile time, API module of {rel} (ffibuilders()[0].compile, one run each):")
        for level in ("-O0", "-O1", "-O2"):
            tmp = COMPILE_DIR / f"opt{level}"
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir(parents=True)
            c = time.perf_counter()
            build.ffibuilders(biggest, optimize=level)[0].compile(tmpdir=str(tmp), verbose=False)
            print(f"    {level}: {time.perf_counter() - c:6.2f} s")


# ----------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=None, help="repeats for [1] and [2] (default 7; 5 with --quick)")
    ap.add_argument("--quick", action="store_true", help="5 repeats; skip compiling the largest module (the driver)")
    ap.add_argument("--no-compile", action="store_true", help="skip [3], the C compile")
    ap.add_argument("--opt-compare", action="store_true", help="also compile the largest module at -O0/-O1/-O2")
    args = ap.parse_args()
    repeats = args.repeats or (5 if args.quick else 7)
    if repeats < 3:
        ap.error("--repeats must be >= 3")
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    t0 = time.perf_counter()
    print(f"bench_generate: Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; "
          f"{repeats} repeats")
    BUILD.mkdir(parents=True, exist_ok=True)

    gen_t, gen_ok = bench_in_process(repeats)
    noop_t, noop_ok = bench_subprocess(repeats)
    if not args.no_compile:
        bench_compile(args.quick, args.opt_compare)

    print("\nTargets")
    print(f"  generation (compile_specs, warm, median)  {gen_t * 1000:7.1f} ms  (target <= {TARGET_GENERATION_S:.1f} s)"
          f"   {ok(gen_ok)}")
    print(f"  no-op regeneration (subprocess, median)   {noop_t * 1000:7.1f} ms  (target <= {TARGET_NOOP_S:.1f} s)"
          f"   {ok(noop_ok)}")
    print(f"\ntotal time {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
