#!/usr/bin/env python
"""Per-message cost of ``[NSString length]`` on the GNU Objective-C runtime (libobjc.so.4, GNUstep Foundation)
across binding styles.

Run from the repository root::

    .venv/bin/python bench/bench_objc.py [--repeats N] [--target-ms MS]

Variants (the same NSString, the same runtime, checked via /proc/self/maps):

* generated checked    ``s.length()``: in API mode a compiled method descriptor (ia_objc.h's fast path) over
                       ``ia_checked_<i>`` (nil receiver and class_respondsToSelector guarded, one class
                       remembered per selector), a refusal raised
* checked, Python      the Python method it replaced (``foundation._python["NSString.length"]``): what ABI mode
                       and the methods without a compiled twin run
* generated unchecked  ``foundation.unchecked.NSString_length(s.handle)``: the compiled trampoline
* bare trampoline      a hand-written cffi API-mode module: ``((NSUInteger (*)(id, SEL))objc_msg_lookup(s, sel))
                       (s, sel)`` with the selector registered once (the floor for a cffi call)
* cffi ABI per call    ``ffi.cast(proto, lib.objc_msg_lookup(s, sel))(s, sel)`` (what the ABI mode does)
* ctypes per call      ``CFUNCTYPE(c_ulong, c_void_p, c_void_p)(objc_msg_lookup(s, sel))(s, sel)``

Targets: generated unchecked <= 1.1x the bare trampoline; generated checked <= 1.3x the bare trampoline.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import sys
import timeit
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "generated"))
if str(ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(ROOT / "bench"))

from _harness import Targets, libs_mapped, spread  # noqa: E402
from _harness import ratio as paired_ratio  # noqa: E402
from bench_calls import Variant, build_raw_module, run  # noqa: E402

BARE_CDEF = """
typedef struct objc_object *id;
int bare_setup(void);
unsigned long bare_length(id s);
"""
BARE_SOURCE = r"""
#include <dlfcn.h>
typedef struct objc_object *id;
typedef struct objc_selector *SEL;
typedef void (*IMP)(void);
static IMP (*lookup)(id, SEL);
static SEL sel_length;
int bare_setup(void)
{
    SEL (*reg)(const char *) = (SEL (*)(const char *))dlsym(RTLD_DEFAULT, "sel_registerName");
    lookup = (IMP (*)(id, SEL))dlsym(RTLD_DEFAULT, "objc_msg_lookup");
    if (reg == NULL || lookup == NULL)
        return 1;
    sel_length = reg("length");
    return 0;
}
unsigned long bare_length(id s)
{
    return ((unsigned long (*)(id, SEL))lookup(s, sel_length))(s, sel_length);
}
"""


STATEMENTS = {"checked": "s.length()", "python": "py(s)", "unchecked": "u(h)", "bare": "bare(bh)",
              "abi": "cast(proto, look(ah, asel))(ah, asel)", "ctypes": "cproto(clook(ch, csel))(ch, csel)"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--target-ms", type=float, default=20.0)
    ap.add_argument("--json", help="write the numbers here")
    args = ap.parse_args()

    from ironaccelerator.backends.foundation import foundation as F

    if F.BINDING_MODE != "api":
        print("the Foundation binding is not built in API mode (make generate)", file=sys.stderr)
        return 2
    s = F.NSString.stringWithUTF8String_("a string of some length ✓")
    n = s.length()
    bare, _ = build_raw_module("objc", BARE_CDEF, BARE_SOURCE)
    if bare.lib.bare_setup() != 0:
        print("objc_msg_lookup not found (not the GNU runtime)", file=sys.stderr)
        return 2
    import cffi

    abi = cffi.FFI()
    abi.cdef("typedef struct objc_object *id; typedef struct objc_selector *SEL; typedef void (*IMP)(void);"
             "IMP objc_msg_lookup(id, SEL); SEL sel_registerName(const char *);")
    rt = abi.dlopen("libobjc.so.4", abi.RTLD_GLOBAL | abi.RTLD_NOW)
    ct = ctypes.CDLL("libobjc.so.4", mode=os.RTLD_GLOBAL)
    ct.objc_msg_lookup.restype = ctypes.c_void_p
    ct.objc_msg_lookup.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    ct.sel_registerName.restype = ctypes.c_void_p
    ct.sel_registerName.argtypes = [ctypes.c_char_p]
    h = s.handle
    env: dict[str, Any] = {
        "s": s, "py": F._python.get("NSString.length", type(s).length), "h": h, "u": F.unchecked.NSString_length, "bare": bare.lib.bare_length,
        "bh": bare.ffi.cast("id", F.ffi.cast("uintptr_t", h)),
        "look": rt.objc_msg_lookup, "cast": abi.cast, "proto": abi.typeof("unsigned long (*)(id, SEL)"),
        "ah": abi.cast("id", F.ffi.cast("uintptr_t", h)), "asel": rt.sel_registerName(b"length"),
        "clook": ct.objc_msg_lookup, "cproto": ctypes.CFUNCTYPE(ctypes.c_ulong, ctypes.c_void_p, ctypes.c_void_p),
        "ch": int(F.ffi.cast("uintptr_t", h)), "csel": ct.sel_registerName(b"length"),
    }
    rows = [
        Variant("length", "checked", "generated checked: s.length()", "s.length()", "", env),
        Variant("length", "python", "checked, Python wrapper (ABI mode's)", "py(s)", "", env),
        Variant("length", "unchecked", "generated unchecked: NSString_length(h)", "u(h)", "", env),
        Variant("length", "bare", "bare trampoline (hand-written cffi API)", "bare(bh)", "", env),
        Variant("length", "abi", "cffi ABI: cast(objc_msg_lookup) per call", "cast(proto, look(ah, asel))(ah, asel)",
                "", env),
        Variant("length", "ctypes", "ctypes: CFUNCTYPE(objc_msg_lookup) per call", "cproto(clook(ch, csel))(ch, csel)",
                "", env),
    ]
    for key, stmt in STATEMENTS.items():  # every variant gives the same answer
        got = eval(compile(stmt, "<check>", "eval"), env)
        assert got == n, (key, got, n)
    run(rows, args.repeats, args.target_ms / 1000)
    by = {v.key: v for v in rows}
    mapped = sorted(libs_mapped("libobjc") | libs_mapped("gnustep-base"))
    print(f"# {platform.python_implementation()} {platform.python_version()} on {platform.machine()}; "
          f"{args.repeats} repeats; mapped: {', '.join(mapped)}")
    print(f"{'variant':<48} {'ns/call':>9} {'spread':>7} {'x bare':>7}")
    for v in rows:
        med = sorted(v.samples)[len(v.samples) // 2]
        print(f"{v.label:<48} {med * 1e9:9.1f} {spread(v):6.1f}% {paired_ratio(v, by['bare']):7.3f}")
    t = Targets()
    t.add("generated unchecked / bare trampoline", paired_ratio(by["unchecked"], by["bare"]), "<=", 1.1)
    t.add("generated checked / bare trampoline", paired_ratio(by["checked"], by["bare"]), "<=", 1.3)
    t.note("generated checked / generated unchecked", paired_ratio(by["checked"], by["unchecked"]))
    t.note("checked, Python wrapper / bare trampoline", paired_ratio(by["python"], by["bare"]))
    t.note("ctypes per call / generated checked", paired_ratio(by["ctypes"], by["checked"]))
    t.note("cffi ABI per call / generated checked", paired_ratio(by["abi"], by["checked"]))
    t.print()
    if args.json:
        Path(args.json).write_text(json.dumps({
            "ns": {v.key: sorted(v.samples)[len(v.samples) // 2] * 1e9 for v in rows}, **t.as_json()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
