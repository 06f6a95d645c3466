#!/usr/bin/env python
"""Per-call overhead of a QNN function-table call: ``QnnBackend_getApiVersion`` of libQnnHtp.so (Qualcomm's real
library from the onnxruntime-qnn wheel; the call needs no device), across binding styles.

Run from the repository root::

    .venv/bin/python bench/bench_qnn_calls.py [--repeats N] [--quick] [--mode api|abi|both]

QNN exports one function, ``QnnInterface_getProviders``; every other call is an entry of the provider's function
table.  Every variant below calls the same table entry (the same function pointer), of the same loaded library:

* generated checked      ``interface.QnnBackend_getApiVersion()``: allocates the ``Qnn_ApiVersion_t``, calls the
                         entry, checks the status, returns the struct (a Python wrapper: the struct out-parameter
                         keeps it off the compiled fast path)
* hand-written cffi      the same work written by hand: the entry read from the provider table with a small cffi
                         ABI cdef of its own (written from the spec's declarations), ``ffi.new`` of a ctype looked
                         up once, call through the cdata function pointer (libffi), ``if r:``
* ctypes                 the same work with ctypes: ``CFUNCTYPE`` over the entry's address, ``byref`` of a new
                         ``Structure``, status checked
* generated unchecked    ``interface.unchecked.QnnBackend_getApiVersion(p)``, ``p`` preallocated; vs the bare
                         hand-written cffi call ``fp(p)`` and ctypes ``fn(byref(s))``, both preallocated

``--mode``: ``api`` (the compiled cffi module: its trampoline reads the table), ``abi`` (the compiled module hidden:
the ABI-mode fallback calls the table entry's cdata pointer), ``both`` (default: ``api`` here, ``abi`` in a child
process: a process binds one mode).  Each repeat times every variant once, in a rotated order; ratios are medians
of paired per-repeat ratios (bench/_harness.py).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
MODE_ARG = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--mode=")), None)
if MODE_ARG is None and "--mode" in sys.argv[:-1]:
    MODE_ARG = sys.argv[sys.argv.index("--mode") + 1]
if MODE_ARG == "abi":  # before the binding is imported: hide the compiled module (as a machine without a compiler)
    sys.modules["ironaccelerator.backends.qnn.interface._cffi"] = None  # type: ignore[assignment]
for _p in (ROOT / "generated", ROOT / "runtime", ROOT / "bench"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import cffi  # noqa: E402

from _harness import Targets, Variant, libs_mapped, ratio, run, spread, us  # noqa: E402

TARGET_CHECKED_OVER_HAND = 1.1
TARGET_UNCHECKED_OVER_RAW = 1.1

# the provider, written from specs/qnn/interface.yaml's declarations: the table (75 entries in 2.40) at offset 40
HAND_CDEF = """
typedef struct { uint32_t major; uint32_t minor; uint32_t patch; } Qnn_Version_t;
typedef struct { Qnn_Version_t coreApiVersion; Qnn_Version_t backendApiVersion; } Qnn_ApiVersion_t;
typedef struct {
  uint32_t backendId;
  const char *providerName;
  Qnn_ApiVersion_t apiVersion;
  void *table[75];
} QnnInterface_t;
uint64_t QnnInterface_getProviders(const QnnInterface_t ***providerList, uint32_t *numProviders);
"""


class CVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("patch", ctypes.c_uint32)]


class CApiVersion(ctypes.Structure):
    _fields_ = [("coreApiVersion", CVersion), ("backendApiVersion", CVersion)]


def measure(repeats: int, target_ms: float) -> dict[str, Any]:
    import ironaccelerator.backends.qnn.interface as q
    from ironaccelerator.backends.qnn.interface._binding import BINDING

    assert q.QnnBackend_getApiVersion().coreApiVersion.minor >= 40  # loads libQnnHtp.so and selects the provider
    path = BINDING.path
    assert path is not None
    # the hand-written binding: its own FFI, its own dlopen (the same file: the loader returns the same handle)
    hffi = cffi.FFI()
    hffi.cdef(HAND_CDEF)
    hlib = hffi.dlopen(path)
    lst, n = hffi.new("const QnnInterface_t ***"), hffi.new("uint32_t *")
    assert hlib.QnnInterface_getProviders(lst, n) == 0 and n[0] >= 1
    prov = lst[0][0]
    slot = q.ffi.offsetof("QnnInterface_ImplementationV2_40_t", "backendGetApiVersion") // q.ffi.sizeof("void *")
    assert hffi.offsetof("QnnInterface_t", "table") == q.ffi.offsetof("QnnInterface_t", "v2_40") == 40
    fp = hffi.cast("uint64_t (*)(Qnn_ApiVersion_t *)", prov.table[slot])
    addr = int(hffi.cast("uintptr_t", fp))
    fn = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.POINTER(CApiVersion))(addr)
    # all three reach the same entry of the same library
    gen_p = q.ffi.new("Qnn_ApiVersion_t *")
    assert q.unchecked.QnnBackend_getApiVersion(gen_p) == 0
    hp = hffi.new("Qnn_ApiVersion_t *")
    cs = CApiVersion()
    assert fp(hp) == 0 and fn(ctypes.byref(cs)) == 0
    assert (hp.backendApiVersion.major, hp.backendApiVersion.minor) == (cs.backendApiVersion.major,
                                                                        cs.backendApiVersion.minor) == (
        gen_p.backendApiVersion.major, gen_p.backendApiVersion.minor)
    mapped = libs_mapped("libQnnHtp")
    assert len(mapped) == 1, mapped

    new, byref = hffi.new, ctypes.byref
    T = hffi.typeof("Qnn_ApiVersion_t *")  # looked up once, as the generated wrapper does (its _T1)

    def hand_checked() -> Any:
        p = new(T)
        r = fp(p)
        if r:
            raise RuntimeError(r)
        return p

    def ctypes_checked() -> Any:
        s = CApiVersion()
        r = fn(byref(s))
        if r:
            raise RuntimeError(r)
        return s

    gen_checked = q.QnnBackend_getApiVersion
    gen_unchecked = q.unchecked.QnnBackend_getApiVersion
    cs_ref = byref(cs)

    def loop(f: Callable[[], Any]) -> Callable[[int], None]:
        def body(k: int) -> None:
            for _ in range(k):
                f()
        return body

    def loop1(f: Callable[[Any], Any], arg: Any) -> Callable[[int], None]:
        def body(k: int) -> None:
            for _ in range(k):
                f(arg)
        return body

    variants = [
        Variant("gen", "generated checked", loop(gen_checked)),
        Variant("hand", "hand-written cffi (checked)", loop(hand_checked)),
        Variant("ct", "ctypes (checked)", loop(ctypes_checked)),
        Variant("genu", "generated unchecked", loop1(gen_unchecked, gen_p)),
        Variant("raw", "hand-written cffi, bare call", loop1(fp, hp)),
        Variant("ctu", "ctypes, bare call", loop1(fn, cs_ref)),
    ]
    run(variants, repeats, target_ms / 1000)
    by = {v.key: v for v in variants}
    return {
        "mode": q.BINDING_MODE, "library": path,
        "variants": {v.key: {"label": v.label, "median_s": v.median, "spread_pct": spread(v)} for v in variants},
        "ratios": {
            "checked: generated / hand-written cffi": ratio(by["gen"], by["hand"]),
            "checked: generated / ctypes": ratio(by["gen"], by["ct"]),
            "unchecked: generated / bare cffi call": ratio(by["genu"], by["raw"]),
            "unchecked: generated / bare ctypes call": ratio(by["genu"], by["ctu"]),
        },
    }


def report(res: dict[str, Any], targets: Targets) -> None:
    print(f"\n== {res['mode']} mode  ({res['library']})")
    print(f"  {'variant':34s} {'median us':>9s}  spread")
    for v in res["variants"].values():
        print(f"  {v['label']:34s} {us(v['median_s'])}  {v['spread_pct']:5.1f}%")
    r = res["ratios"]
    m = res["mode"]
    targets.add(f"{m}: checked, generated / hand-written cffi", r["checked: generated / hand-written cffi"], "<=",
                TARGET_CHECKED_OVER_HAND)
    targets.add(f"{m}: unchecked, generated / bare cffi call", r["unchecked: generated / bare cffi call"], "<=",
                TARGET_UNCHECKED_OVER_RAW)
    targets.note(f"{m}: checked, generated / ctypes", r["checked: generated / ctypes"])
    targets.note(f"{m}: unchecked, generated / bare ctypes call", r["unchecked: generated / bare ctypes call"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--target-ms", type=float, default=20.0, help="time per sample of one variant")
    ap.add_argument("--quick", action="store_true", help="5 repeats of 5 ms: a smoke run")
    ap.add_argument("--mode", choices=("api", "abi", "both"), default="both")
    ap.add_argument("--json", action="store_true", help="print the results as JSON (one line) and nothing else")
    args = ap.parse_args()
    repeats, target_ms = (5, 5.0) if args.quick else (args.repeats, args.target_ms)
    here = measure(repeats, target_ms) if args.mode != "abi" or MODE_ARG == "abi" else None
    if args.json:
        print(json.dumps(here))
        return 0
    results = [here] if here is not None else []
    if args.mode == "both":
        child = subprocess.run([sys.executable, __file__, "--mode", "abi", "--json", "--repeats", str(repeats),
                                "--target-ms", str(target_ms)], capture_output=True, text=True,
                               env={**os.environ}, check=True)
        results.append(json.loads(child.stdout.strip().splitlines()[-1]))
    targets = Targets()
    for res in results:
        report(res, targets)
    targets.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
