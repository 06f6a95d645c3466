#!/usr/bin/env python
"""Per-call overhead of NVRTC ``nvrtcVersion`` / ``nvrtcGetErrorString`` and HIP ``hipRuntimeGetVersion``
across binding styles (calls that run without a GPU).

Run from the repository root::

    .venv/bin/python bench/bench_calls.py [--repeats N] [--quick]

Every variant is measured in this one process; each repeat times every variant
once (in a rotated order), a repeat of one variant being ``timeit`` of enough
calls to last ~``--target-ms``.  The tables show the median per-call time and
ratios; a ratio is the median over repeats of the paired per-repeat ratio, which
is robust to the machine getting slower or faster between repeats.

Variants (all call the same libnvrtc.so.13, checked via /proc/self/maps):

* generated checked    ``nvrtc.nvrtcVersion()`` -> (major, minor); ``nvrtc.nvrtcGetErrorString(6)`` -> str
                       (API mode: the compiled C fast path in the cffi module, see trampolines.c)
* checked, Python      the Python wrapper the fast path replaced (``nvrtc._python[name]``): what ABI mode
                       and the functions without a fast path run
* generated unchecked  ``nvrtc.unchecked.nvrtcVersion(maj_p, min_p)`` (pointers preallocated once)
* raw cffi API         a hand-written out-of-line API-mode module (built once, cached under
                       build/bench/) that dlopens libnvrtc and calls through a function pointer,
                       declared with the header's types (``nvrtcResult`` is an enum)
* raw cffi API (int)   the same module with ``int`` in place of the enum
* raw cffi ABI         ``ffi.dlopen(path)``
* ctypes               ``CDLL(path).nvrtcVersion`` with argtypes/restype and preallocated byref args
* cuda-bindings        ``cuda.bindings.nvrtc.nvrtcVersion()`` / ``nvrtcGetErrorString(nvrtcResult(6))``

HIP ``hipRuntimeGetVersion`` (one ``int *`` out-param) and ``hipGetErrorString`` (returns ``const char *``),
on Debian's libamdhip64 5.2, which needs no device for either,
when the generated hip.runtime binding and the library are present: generated checked / Python wrapper /
unchecked, a hand-written cffi API module (as above), raw cffi ABI, ctypes, and hip-python
(``hip.hip.hipRuntimeGetVersion()``, AMD's Cython bindings: the HIP counterpart of cuda-bindings) if
installed (``make bench-deps``).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import os
import platform
import statistics
import sys
import time
import timeit
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "generated"))
if str(ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(ROOT / "bench"))

from _harness import libs_mapped, spread  # noqa: E402
from _harness import ratio as paired_ratio  # noqa: E402
BUILD = ROOT / "build" / "bench"

TARGET_UNCHECKED_OVER_RAW = 1.1
TARGET_CHECKED_OVER_CUDA_BINDINGS = 1.5


# ----------------------------------------------------------------------------- the raw cffi API module

RAW_CDEF = """
typedef enum { NVRTC_SUCCESS = 0, NVRTC_ERROR_COMPILATION = 6 } nvrtcResult;
int bench_init(const char *path);
nvrtcResult nvrtcVersion(int *major, int *minor);
const char *nvrtcGetErrorString(nvrtcResult result);
int nvrtcVersion_int(int *major, int *minor);
const char *nvrtcGetErrorString_int(int result);
int bench_noop(int *major, int *minor);
int bench_c_loop_version(int n, int *major, int *minor);
int bench_c_loop_errstr(int n);
"""

RAW_SOURCE = r"""
#include <stddef.h>
#include <dlfcn.h>
typedef enum { NVRTC_SUCCESS = 0, NVRTC_ERROR_COMPILATION = 6 } nvrtcResult;
typedef nvrtcResult (*pfn_version)(int *, int *);
typedef const char *(*pfn_errstr)(nvrtcResult);
static pfn_version p_version;
static pfn_errstr p_errstr;

static int bench_init(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return -1;
    p_version = (pfn_version)dlsym(h, "nvrtcVersion");
    p_errstr = (pfn_errstr)dlsym(h, "nvrtcGetErrorString");
    return (p_version != NULL && p_errstr != NULL) ? 0 : -2;
}
static nvrtcResult nvrtcVersion(int *major, int *minor) { return p_version(major, minor); }
static const char *nvrtcGetErrorString(nvrtcResult result) { return p_errstr(result); }
static int nvrtcVersion_int(int *major, int *minor) { return (int)p_version(major, minor); }
static const char *nvrtcGetErrorString_int(int result) { return p_errstr((nvrtcResult)result); }
/* context: the cost of cffi's calling convention alone, and of the C function alone */
static int bench_noop(int *major, int *minor) { (void)major; (void)minor; return 0; }
static int bench_c_loop_version(int n, int *major, int *minor)
{
    int acc = 0;
    for (int i = 0; i < n; i++)
        acc |= (int)p_version(major, minor);
    return acc;
}
static int bench_c_loop_errstr(int n)
{
    int acc = 0;
    for (int i = 0; i < n; i++)
        acc += p_errstr(NVRTC_ERROR_COMPILATION) != NULL;
    return acc;
}
"""

RAW_COMPILE_ARGS = ["-O2", "-w"]


RAW_HIP_CDEF = """
typedef enum hipError_t { hipSuccess = 0, hipErrorNoDevice = 100 } hipError_t;
int bench_init(const char *path);
hipError_t hipRuntimeGetVersion(int *version);
const char *hipGetErrorString(hipError_t error);
"""

RAW_HIP_SOURCE = r"""
#include <stddef.h>
#include <dlfcn.h>
typedef enum hipError_t { hipSuccess = 0, hipErrorNoDevice = 100 } hipError_t;  /* the header's enum type */
typedef hipError_t (*pfn_runtime_version)(int *);
typedef const char *(*pfn_hip_errstr)(hipError_t);
static pfn_runtime_version p_runtime_version;
static pfn_hip_errstr p_hip_errstr;

static int bench_init(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return -1;
    p_runtime_version = (pfn_runtime_version)dlsym(h, "hipRuntimeGetVersion");
    p_hip_errstr = (pfn_hip_errstr)dlsym(h, "hipGetErrorString");
    return (p_runtime_version != NULL && p_hip_errstr != NULL) ? 0 : -2;
}
static hipError_t hipRuntimeGetVersion(int *version) { return p_runtime_version(version); }
static const char *hipGetErrorString(hipError_t error) { return p_hip_errstr(error); }
"""


def build_raw_module(tag: str = "nvrtc", cdef: str = RAW_CDEF, source: str = RAW_SOURCE) -> tuple[Any, bool]:
    """Compile (once; cached by source hash under build/bench/) and import a hand-written API module
    (a cffi extension module, its ``ffi`` and ``lib`` untyped); whether it was built now."""
    import importlib

    import cffi

    digest = hashlib.sha256((cdef + source + repr(RAW_COMPILE_ARGS) + sys.version).encode()).hexdigest()[:10]
    name = f"_bench_raw_{tag}_{digest}"
    BUILD.mkdir(parents=True, exist_ok=True)
    if str(BUILD) not in sys.path:
        sys.path.insert(0, str(BUILD))
    built = False
    if not list(BUILD.glob(name + ".*.so")) and not list(BUILD.glob(name + ".*.pyd")):
        ffi = cffi.FFI()
        ffi.cdef(cdef)
        ffi.set_source(name, source, libraries=["dl"], extra_compile_args=RAW_COMPILE_ARGS)
        ffi.compile(tmpdir=str(BUILD), verbose=False)
        built = True
    return importlib.import_module(name), built


# ----------------------------------------------------------------------------- helpers


def calibrate(timer: timeit.Timer, target_s: float) -> int:
    """Smallest 'number' (1, 2, 5, 10, ...) for which one timeit lasts >= target_s / 4, scaled to target_s."""
    n = 1
    while True:
        for m in (1, 2, 5):
            number = n * m
            t = timer.timeit(number)
            if t >= target_s / 4:
                number = max(1, int(number * target_s / t))
                t = min(timer.repeat(3, number))  # re-check at full size: short runs are noisy
                return max(1, int(number * target_s / t))
        n *= 10


class Variant:
    """One row, timed with ``timeit`` on a statement rather than _harness.Variant's ``body(n)``: the calls
    measured here take ~50-100 ns, and a statement compiled into timeit's own loop adds nothing per call
    (the ratios, spreads and library check are _harness's)."""

    def __init__(self, group: str, key: str, label: str, stmt: str, setup: str, env: dict[str, Any],
                 scale: int = 1) -> None:
        self.group, self.key, self.label = group, key, label
        self.scale = scale  # C calls per statement (the C-loop rows)
        self.timer = timeit.Timer(stmt, setup, globals=env)
        self.number = 0
        self.samples: list[float] = []  # seconds per call, one per repeat


def run(variants: list[Variant], repeats: int, target_s: float) -> None:
    for v in variants:
        v.timer.timeit(200)  # warm up (first-call symbol resolution, caches)
        v.number = calibrate(v.timer, target_s)
    for r in range(repeats):
        k = r % len(variants)
        order = variants[k:] + variants[:k]  # rotate so no variant is always first/last
        if r % 2:
            order.reverse()
        for v in order:
            v.samples.append(v.timer.timeit(v.number) / (v.number * v.scale))


def make_alternatives(nvrtc: ModuleType) -> dict[str, Callable[..., Any]]:
    """Hand-written variants of the checked wrappers' bodies, same contract (raise on failure)."""
    import threading

    ffi, lib = nvrtc.ffi, nvrtc._b.lib
    string: Callable[[Any], bytes]
    new, NULL, string = ffi.new, ffi.NULL, ffi.string
    T2 = ffi.typeof("int[2]")
    error = nvrtc._b.error
    version_fn, errstr_fn = lib.nvrtcVersion, lib.nvrtcGetErrorString

    def alt_version_arr2() -> tuple[int, int]:
        a = new(T2)
        r = lib.nvrtcVersion(a, a + 1)
        if r:
            raise error(r, 28)
        return a[0], a[1]

    tl = threading.local()

    def alt_version_tls() -> tuple[int, ...]:
        try:
            a, b = tl.v
        except AttributeError:
            a = new(T2)
            b = a + 1
            tl.v = (a, b)
        r = version_fn(a, b)
        if r:
            raise error(r, 28)
        return tuple(a)

    scratch = new(T2)
    scratch1 = scratch + 1

    def alt_version_scratch() -> tuple[int, ...]:
        r = version_fn(scratch, scratch1)
        if r:
            raise error(r, 28)
        return tuple(scratch)

    def alt_errstr_lean(result: int) -> str:
        r = errstr_fn(result)
        if not r:
            nvrtc._require(7)
            return ""
        return string(r).decode("utf-8", "replace")

    memo: dict[int, str] = {}

    def alt_errstr_memo(result: int) -> str:
        s = memo.get(result)
        if s is None:
            s = memo[result] = alt_errstr_lean(result)
        return s

    for f in (alt_version_arr2, alt_version_tls, alt_version_scratch):
        assert f() == nvrtc.nvrtcVersion()
    for g in (alt_errstr_lean, alt_errstr_memo):
        assert g(6) == nvrtc.nvrtcGetErrorString(6)
    return dict(alt_version_arr2=alt_version_arr2, alt_version_tls=alt_version_tls,
                alt_version_scratch=alt_version_scratch, alt_errstr_lean=alt_errstr_lean,
                alt_errstr_memo=alt_errstr_memo)


HIP_NO_DEVICE = 100  # hipErrorNoDevice: the status whose string the errstr variants fetch


def hip_setup(env: dict[str, Any]) -> str | None:
    """Load the HIP variants' objects into ``env``; the reason they are skipped, or None."""
    try:
        from ironaccelerator.backends.hip import runtime as hip
        from ironaccelerator.backends.hip.runtime._binding import BINDING as hip_binding  # hip._b
    except ImportError as exc:
        return f"the generated hip.runtime binding is not importable ({exc})"
    try:
        version = hip.hipRuntimeGetVersion()
    except Exception as exc:  # noqa: BLE001 - an Error (LIBRARY_NOT_FOUND) or anything else: report it
        return f"hipRuntimeGetVersion() failed: {exc}"
    path = hip_binding.path
    if path is None:
        return "the generated hip.runtime binding did not record which libamdhip64 it loaded"
    raw, built = build_raw_module("hip", RAW_HIP_CDEF, RAW_HIP_SOURCE)
    if raw.lib.bench_init(path.encode()) != 0:
        return f"the raw module could not dlopen/dlsym {path}"
    import cffi

    abi_ffi = cffi.FFI()
    abi_ffi.cdef("typedef enum hipError_t { hipSuccess = 0 } hipError_t;\n"
                 "hipError_t hipRuntimeGetVersion(int *version);\n"
                 "const char *hipGetErrorString(hipError_t error);")
    abi_lib = abi_ffi.dlopen(path)
    cdll = ctypes.CDLL(path)
    ct = cdll.hipRuntimeGetVersion
    ct.argtypes = [ctypes.POINTER(ctypes.c_int)]
    ct.restype = ctypes.c_int
    ct_err = cdll.hipGetErrorString
    ct_err.argtypes = [ctypes.c_int]
    ct_err.restype = ctypes.c_char_p
    cv = ctypes.c_int()
    p, rp, ap = hip.ffi.new("int *"), raw.ffi.new("int *"), abi_ffi.new("int *")
    got = {"unchecked": (hip.unchecked.hipRuntimeGetVersion(p), p[0]),
           "raw": (raw.lib.hipRuntimeGetVersion(rp), rp[0]),
           "abi": (abi_lib.hipRuntimeGetVersion(ap), ap[0]),
           "ctypes": (ct(ctypes.byref(cv)), cv.value)}
    for what, answer in got.items():
        if answer != (0, version):
            raise SystemExit(f"error: HIP {what}: {answer!r} != (0, {version})")
    msg = hip.hipGetErrorString(HIP_NO_DEVICE)
    got_msg = {"unchecked": hip.ffi.string(hip.unchecked.hipGetErrorString(HIP_NO_DEVICE)).decode(),
               "raw": raw.ffi.string(raw.lib.hipGetErrorString(HIP_NO_DEVICE)).decode(),
               "abi": abi_ffi.string(abi_lib.hipGetErrorString(HIP_NO_DEVICE)).decode(),
               "ctypes": ct_err(HIP_NO_DEVICE).decode()}
    for what, answer in got_msg.items():
        if answer != msg:
            raise SystemExit(f"error: HIP {what} error string: {answer!r} != {msg!r}")
    hp: Any = None  # hip-python's hip module, once it answers as the others do
    try:
        from hip import hip as hip_python
        hp = hip_python
        status, hv = hp.hipRuntimeGetVersion()
        if int(status) != 0 or hv != version:
            raise RuntimeError(f"answered {(status, hv)!r}, not (0, {version})")
        hp_err = hp.hipError_t(HIP_NO_DEVICE)
        status, hmsg = hp.hipGetErrorString(hp_err)
        if str(hmsg) != msg:  # hip-python answers (hipSuccess, CStr)
            raise RuntimeError(f"hipGetErrorString answered {hmsg!r}, not {msg!r}")
        env["hp_err"] = hp_err
        import importlib.metadata as md
        print(f"hip-python {md.version('hip-python')}")
    except Exception as exc:  # noqa: BLE001
        hp = None
        print(f"note: hip-python unavailable ({exc.__class__.__name__}: {exc}); `make bench-deps` installs it")
    mapped = libs_mapped("/libamdhip64.so")
    one = len(mapped) == 1
    print(f"libamdhip64: {path} (HIP runtime {version}, {hip.BINDING_MODE} mode, raw cffi module "
          f"{'built now' if built else 'cached'}); "
          + ("one copy mapped in this process" if one else f"WARNING: copies mapped: {sorted(mapped) or 'unknown'}"))
    env.update(hip=hip, hraw=raw, habi=abi_lib, hct=ct, hct_err=ct_err, hcv=ctypes.byref(cv), hp_=p, hrp=rp,
               hap=ap, hp=hp, HIP_NO_DEVICE=HIP_NO_DEVICE)
    return None


# ----------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=None, help="repeats per variant (default 25; 15 with --quick)")
    ap.add_argument("--quick", action="store_true", help="15 repeats of ~10 ms, no breakdown section")
    ap.add_argument("--target-ms", type=float, default=None, help="duration of one repeat of one variant (default 25)")
    args = ap.parse_args()
    repeats = args.repeats or (15 if args.quick else 25)
    target_s = (args.target_ms or (10.0 if args.quick else 25.0)) / 1000.0
    if repeats < 3:
        ap.error("--repeats must be >= 3")
    t_start = time.perf_counter()

    from ironaccelerator.backends.cuda import nvrtc
    from ironaccelerator.backends.cuda.nvrtc._binding import BINDING as nvrtc_binding  # nvrtc._b

    print(f"bench_calls: Python {platform.python_version()} on {platform.machine()}, "
          f"{os.cpu_count()} CPUs; {repeats} repeats x ~{target_s * 1000:.0f} ms per variant")
    print(f"nvrtc.BINDING_MODE = {nvrtc.BINDING_MODE!r}")
    if nvrtc.BINDING_MODE != "api":
        bar = "!" * 78
        print(f"{bar}\n!! WARNING: the generated nvrtc binding is in {nvrtc.BINDING_MODE!r} mode, not 'api'.\n"
              "!! The compiled cffi module is missing or failed to import, so the 'generated'\n"
              "!! numbers below measure the ABI fallback and mean nothing for the targets.\n"
              "!! Run: .venv/bin/python -m ironaccelerator_gen build\n" + bar)

    from ironaccelerator.backends.cuda import driver

    for lib in (nvrtc, driver):
        py = getattr(lib, "_python", {})
        print(f"checked fast path (C): {lib.__name__.rpartition('.')[2]} {len(py)} of {len(lib._b.functions)} functions"
              + (f" (nvrtcVersion is a {type(nvrtc.nvrtcVersion).__name__})" if lib is nvrtc else ""))
    py_wrappers = getattr(nvrtc, "_python", {})

    # ---- load everything, and make sure it is one and the same libnvrtc
    ver = nvrtc.nvrtcVersion()
    path = nvrtc_binding.path
    if path is None:
        print("error: the generated binding did not record which libnvrtc it loaded", file=sys.stderr)
        return 1
    print(f"libnvrtc: {path} (NVRTC {ver[0]}.{ver[1]})")

    raw, built = build_raw_module()
    if raw.lib.bench_init(path.encode()) != 0:
        print(f"error: raw module could not dlopen/dlsym {path}", file=sys.stderr)
        return 1
    print(f"raw cffi API module: {Path(raw.__file__).relative_to(ROOT)} ({'built now' if built else 'cached'}, "
          f"{' '.join(RAW_COMPILE_ARGS)})")

    import cffi

    abi_ffi = cffi.FFI()
    abi_ffi.cdef("typedef enum { NVRTC_SUCCESS = 0 } nvrtcResult;\n"
                 "nvrtcResult nvrtcVersion(int *major, int *minor);\n"
                 "const char *nvrtcGetErrorString(nvrtcResult result);")
    abi_lib = abi_ffi.dlopen(path)

    cdll = ctypes.CDLL(path)
    ct_version = cdll.nvrtcVersion
    ct_version.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
    ct_version.restype = ctypes.c_int
    ct_errstr = cdll.nvrtcGetErrorString
    ct_errstr.argtypes = [ctypes.c_int]
    ct_errstr.restype = ctypes.c_char_p

    try:
        from cuda.bindings import nvrtc as cb
        import cuda.bindings
        cb_version = getattr(cuda.bindings, "__version__", "?")
        assert cb.nvrtcVersion()[0] == cb.nvrtcResult.NVRTC_SUCCESS
        assert cb.nvrtcGetErrorString(cb.nvrtcResult(6))[1] == b"NVRTC_ERROR_COMPILATION"
    except Exception as exc:  # noqa: BLE001
        cb = None
        print(f"warning: cuda.bindings.nvrtc unavailable ({exc.__class__.__name__}: {exc}); skipping it")
    else:
        print(f"cuda-bindings {cb_version}")

    mapped = libs_mapped("/libnvrtc.so")
    if len(mapped) == 1 and os.path.realpath(path) in mapped:
        print("all variants use the same libnvrtc (one copy mapped in this process)")
    else:
        print(f"WARNING: libnvrtc copies mapped in this process: {sorted(mapped) or 'unknown'}; "
              "the variants may not call the same library")

    # ---- sanity: every variant computes the same answer
    def same(a: object, b: object, what: str) -> None:
        if a != b:
            raise SystemExit(f"error: {what}: {a!r} != {b!r}")

    maj, mnr = nvrtc.ffi.new("int *"), nvrtc.ffi.new("int *")
    same(nvrtc.unchecked.nvrtcVersion(maj, mnr), 0, "unchecked status")
    same((maj[0], mnr[0]), ver, "unchecked version")
    rmaj, rmin = raw.ffi.new("int *"), raw.ffi.new("int *")
    same((raw.lib.nvrtcVersion(rmaj, rmin), rmaj[0], rmin[0]), (0, *ver), "raw API")
    amaj, amin = abi_ffi.new("int *"), abi_ffi.new("int *")
    same((abi_lib.nvrtcVersion(amaj, amin), amaj[0], amin[0]), (0, *ver), "raw ABI")
    cmaj, cmin = ctypes.c_int(), ctypes.c_int()
    bmaj, bmin = ctypes.byref(cmaj), ctypes.byref(cmin)
    same((ct_version(bmaj, bmin), cmaj.value, cmin.value), (0, *ver), "ctypes")
    msg = "NVRTC_ERROR_COMPILATION"
    same(nvrtc.nvrtcGetErrorString(6), msg, "checked error string")
    same(nvrtc.ffi.string(nvrtc.unchecked.nvrtcGetErrorString(6)).decode(), msg, "unchecked error string")
    same(raw.ffi.string(raw.lib.nvrtcGetErrorString(6)).decode(), msg, "raw error string")
    same(ct_errstr(6), msg.encode(), "ctypes error string")
    if cb is not None:
        same(tuple(cb.nvrtcVersion()[1:]), ver, "cuda-bindings version")

    # ---- variants; setup binds everything to locals of timeit's inner function
    env = dict(nvrtc=nvrtc, raw=raw, abi_lib=abi_lib, abi_ffi=abi_ffi, ct_version=ct_version, ct_errstr=ct_errstr,
               bmaj=bmaj, bmin=bmin, cb=cb, maj=maj, mnr=mnr, rmaj=rmaj, rmin=rmin, amaj=amaj, amin=amin)
    V: list[Variant] = []

    def add(group: str, key: str, label: str, stmt: str, setup: str, scale: int = 1) -> None:
        V.append(Variant(group, key, label, stmt, setup, env, scale))

    add("version", "checked", "generated checked   nvrtc.nvrtcVersion()",
        "f()", "f = nvrtc.nvrtcVersion")
    if "nvrtcVersion" in py_wrappers:
        add("version", "checked_py", "checked (Python)    nvrtc._python['nvrtcVersion']()",
            "f()", "f = nvrtc._python['nvrtcVersion']")
    add("version", "unchecked", "generated unchecked nvrtc.unchecked.nvrtcVersion(p, q)",
        "f(a, b)", "f = nvrtc.unchecked.nvrtcVersion; a = maj; b = mnr")
    add("version", "raw", "raw cffi API        lib.nvrtcVersion(p, q)",
        "f(a, b)", "f = raw.lib.nvrtcVersion; a = rmaj; b = rmin")
    add("version", "raw_int", "raw cffi API (int)  lib.nvrtcVersion_int(p, q)",
        "f(a, b)", "f = raw.lib.nvrtcVersion_int; a = rmaj; b = rmin")
    add("version", "abi", "raw cffi ABI        dlopen lib.nvrtcVersion(p, q)",
        "f(a, b)", "f = abi_lib.nvrtcVersion; a = amaj; b = amin")
    add("version", "ctypes", "ctypes              nvrtcVersion(byref, byref)",
        "f(a, b)", "f = ct_version; a = bmaj; b = bmin")
    if cb is not None:
        add("version", "cuda_bindings", "cuda-bindings       nvrtc.nvrtcVersion()",
            "f()", "f = cb.nvrtcVersion")

    add("errstr", "checked", "generated checked   nvrtc.nvrtcGetErrorString(6) -> str",
        "f(6)", "f = nvrtc.nvrtcGetErrorString")
    if "nvrtcGetErrorString" in py_wrappers:
        add("errstr", "checked_py", "checked (Python)    nvrtc._python['nvrtcGetErrorString'](6)",
            "f(6)", "f = nvrtc._python['nvrtcGetErrorString']")
    add("errstr", "unchecked", "generated unchecked nvrtc.unchecked.nvrtcGetErrorString(6)",
        "f(6)", "f = nvrtc.unchecked.nvrtcGetErrorString")
    add("errstr", "raw", "raw cffi API        lib.nvrtcGetErrorString(6)",
        "f(6)", "f = raw.lib.nvrtcGetErrorString")
    add("errstr", "raw_int", "raw cffi API (int)  lib.nvrtcGetErrorString_int(6)",
        "f(6)", "f = raw.lib.nvrtcGetErrorString_int")
    add("errstr", "abi", "raw cffi ABI        dlopen lib.nvrtcGetErrorString(6)",
        "f(6)", "f = abi_lib.nvrtcGetErrorString")
    add("errstr", "ctypes", "ctypes              nvrtcGetErrorString(6) -> bytes",
        "f(6)", "f = ct_errstr")
    if cb is not None:
        add("errstr", "cuda_bindings", "cuda-bindings       nvrtcGetErrorString(nvrtcResult(6))",
            "f(r)", "f = cb.nvrtcGetErrorString; r = cb.nvrtcResult(6)")

    hip_skipped = hip_setup(env)
    if hip_skipped:
        print(f"note: HIP skipped: {hip_skipped}")
    else:
        add("hipver", "checked", "generated checked   hip.hipRuntimeGetVersion()", "f()", "f = hip.hipRuntimeGetVersion")
        if "hipRuntimeGetVersion" in getattr(env["hip"], "_python", {}):
            add("hipver", "checked_py", "checked (Python)    hip._python['hipRuntimeGetVersion']()", "f()",
                "f = hip._python['hipRuntimeGetVersion']")
        add("hipver", "unchecked", "generated unchecked hip.unchecked.hipRuntimeGetVersion(p)", "f(a)",
            "f = hip.unchecked.hipRuntimeGetVersion; a = hp_")
        add("hipver", "raw", "raw cffi API        lib.hipRuntimeGetVersion(p)", "f(a)",
            "f = hraw.lib.hipRuntimeGetVersion; a = hrp")
        add("hipver", "abi", "raw cffi ABI        dlopen lib.hipRuntimeGetVersion(p)", "f(a)",
            "f = habi.hipRuntimeGetVersion; a = hap")
        add("hipver", "ctypes", "ctypes              hipRuntimeGetVersion(byref)", "f(a)", "f = hct; a = hcv")
        if env["hp"] is not None:
            add("hipver", "hip_python", "hip-python          hip.hipRuntimeGetVersion()", "f()",
                "f = hp.hipRuntimeGetVersion")
        add("hiperr", "checked", "generated checked   hip.hipGetErrorString(100) -> str", "f(c)",
            "f = hip.hipGetErrorString; c = HIP_NO_DEVICE")
        if "hipGetErrorString" in getattr(env["hip"], "_python", {}):
            add("hiperr", "checked_py", "checked (Python)    hip._python['hipGetErrorString'](100)", "f(c)",
                "f = hip._python['hipGetErrorString']; c = HIP_NO_DEVICE")
        add("hiperr", "unchecked", "generated unchecked hip.unchecked.hipGetErrorString(100)", "f(c)",
            "f = hip.unchecked.hipGetErrorString; c = HIP_NO_DEVICE")
        add("hiperr", "raw", "raw cffi API        lib.hipGetErrorString(100)", "f(c)",
            "f = hraw.lib.hipGetErrorString; c = HIP_NO_DEVICE")
        add("hiperr", "abi", "raw cffi ABI        dlopen lib.hipGetErrorString(100)", "f(c)",
            "f = habi.hipGetErrorString; c = HIP_NO_DEVICE")
        add("hiperr", "ctypes", "ctypes              hipGetErrorString(100) -> bytes", "f(c)",
            "f = hct_err; c = HIP_NO_DEVICE")
        if env["hp"] is not None:
            add("hiperr", "hip_python", "hip-python          hip.hipGetErrorString(hipError_t(100))", "f(e)",
                "f = hp.hipGetErrorString; e = hp_err")

    # ---- breakdown of the checked wrappers: their bodies inlined, piece by piece
    C_LOOP = 10000
    if not args.quick:
        ffi = nvrtc.ffi
        env.update(py_version=py_wrappers.get("nvrtcVersion", nvrtc.nvrtcVersion),
                   py_errstr=py_wrappers.get("nvrtcGetErrorString", nvrtc.nvrtcGetErrorString))
        env.update(ffi=ffi, T=ffi.typeof("int *"), NULL=ffi.NULL, p6=nvrtc.unchecked.nvrtcGetErrorString(6),
                   empty=lambda: None, blib=nvrtc_binding.lib, C_LOOP=C_LOOP)
        add("parts_v", "loop", "empty timeit loop (pass)", "pass", "")
        add("parts_v", "c_only", "nvrtcVersion alone (loop in C, no Python)", "f(n, a, b)",
            "f = raw.lib.bench_c_loop_version; n = C_LOOP; a = rmaj; b = rmin", scale=C_LOOP)
        add("parts_v", "noop", "cffi API call of a C no-op(p, q)", "f(a, b)", "f = raw.lib.bench_noop; a = rmaj; b = rmin")
        add("parts_v", "pycall", "call of an empty Python function  g()", "g()", "g = empty")
        add("parts_v", "getattr", "attribute lookup _lib.nvrtcVersion", "lib.nvrtcVersion", "lib = blib")
        add("parts_v", "new", "1x ffi.new(int_ptr_ctype)", "new(T)", "new = ffi.new")
        add("parts_v", "new2", "2x ffi.new(int_ptr_ctype)", "new(T); new(T)", "new = ffi.new")
        add("parts_v", "call", "unchecked call f(p, q)", "f(a, b)", "f = nvrtc.unchecked.nvrtcVersion; a = maj; b = mnr")
        add("parts_v", "tuple", "(p[0], q[0]) tuple of two derefs", "(a[0], b[0])", "a = maj; b = mnr")
        add("parts_v", "inline", "body inlined: 2 new + call + test + tuple",
            "x = new(T); y = new(T); r = f(x, y)\nif r: raise RuntimeError\n(x[0], y[0])",
            "new = ffi.new; f = nvrtc.unchecked.nvrtcVersion")
        add("parts_v", "checked", "Python wrapper nvrtc._python['nvrtcVersion']()", "f()", "f = py_version")
        add("parts_v", "fast", "compiled fast path nvrtc.nvrtcVersion()", "f()", "f = nvrtc.nvrtcVersion")
        add("parts_e", "c_only", "nvrtcGetErrorString alone (loop in C)", "f(n)",
            "f = raw.lib.bench_c_loop_errstr; n = C_LOOP", scale=C_LOOP)
        add("parts_e", "call", "unchecked call f(6)", "f(6)", "f = nvrtc.unchecked.nvrtcGetErrorString")
        add("parts_e", "null", "p == ffi.NULL", "p == N", "p = p6; N = NULL")
        add("parts_e", "string", "ffi.string(p)", "s(p)", "s = ffi.string; p = p6")
        add("parts_e", "decode", "bytes.decode('utf-8', 'replace')", "b.decode('utf-8', 'replace')",
            "b = b'NVRTC_ERROR_COMPILATION'")
        add("parts_e", "inline", "body inlined: call + NULL test + string + decode",
            "r = f(6)\nif r == N: raise RuntimeError\n'' if r == N else s(r).decode('utf-8', 'replace')",
            "f = nvrtc.unchecked.nvrtcGetErrorString; N = NULL; s = ffi.string")
        add("parts_e", "checked", "Python wrapper nvrtc._python['nvrtcGetErrorString'](6)", "f(6)",
            "f = py_errstr")
        add("parts_e", "fast", "compiled fast path nvrtc.nvrtcGetErrorString(6)", "f(6)",
            "f = nvrtc.nvrtcGetErrorString")

        # hypothetical wrapper bodies (defined here, not generated) to size what a template change could win
        alt = make_alternatives(nvrtc)
        env.update(alt)
        add("alt_v", "current", "Python wrapper as generated: 2x new(int *), (a[0], b[0])", "f()", "f = py_version")
        add("alt_v", "arr2", "one new(int[2]), pass (a, a + 1), (a[0], a[1])", "f()", "f = alt_version_arr2")
        add("alt_v", "tls", "per-thread scratch int[2] (threading.local), tuple(a)", "f()", "f = alt_version_tls")
        add("alt_v", "scratch", "module-level scratch (NOT thread-safe; a bound)", "f()", "f = alt_version_scratch")
        if cb is not None:
            add("alt_v", "cuda_bindings", "cuda-bindings nvrtc.nvrtcVersion()", "f()", "f = cb.nvrtcVersion")
        add("alt_v", "fast", "compiled C fast path (as generated, API mode)", "f()", "f = nvrtc.nvrtcVersion")
        add("alt_e", "current", "Python wrapper as generated (one truth test, no _str())", "f(6)", "f = py_errstr")
        add("alt_e", "lean", "hand-written: one truth test, locals for ffi.string", "f(6)", "f = alt_errstr_lean")
        add("alt_e", "memo", "memoised per status code (dict hit)", "f(6)", "f = alt_errstr_memo")
        if cb is not None:
            add("alt_e", "cuda_bindings", "cuda-bindings nvrtcGetErrorString(nvrtcResult(6))", "f(r)",
                "f = cb.nvrtcGetErrorString; r = cb.nvrtcResult(6)")
        add("alt_e", "fast", "compiled C fast path (as generated, API mode)", "f(6)", "f = nvrtc.nvrtcGetErrorString")

    print(f"measuring {len(V)} variants ...", flush=True)
    run(V, repeats, target_s)

    by = {(v.group, v.key): v for v in V}
    width = max(len(v.label) for v in V)

    def table(group: str, title: str) -> None:
        rows = [v for v in V if v.group == group]
        base = by[(group, "raw")]
        print(f"\n{title}")
        print(f"  {'variant'.ljust(width)}  {'ns/call':>8}  {'IQR%':>5}  {'x raw API':>9}  {'calls/rep':>9}")
        for v in rows:
            print(f"  {v.label.ljust(width)}  {statistics.median(v.samples) * 1e9:8.1f}  {spread(v):5.1f}  "
                  f"{paired_ratio(v, base):9.2f}  {v.number:9d}")

    table("version", "nvrtcVersion (two int out-params)")
    table("errstr", "nvrtcGetErrorString (returns const char *)")
    if not hip_skipped:
        table("hipver", "hipRuntimeGetVersion (one int out-param; libamdhip64 5.2: the call itself costs ~15 us)")
        table("hiperr", "hipGetErrorString (returns const char *; libamdhip64 5.2)")

    def verdict(ok: bool) -> str:
        return "OK" if ok else "MISS"

    print("\nTarget ratios (median of paired per-repeat ratios)")
    fails = 0
    for group, name in (("version", "nvrtcVersion"), ("errstr", "nvrtcGetErrorString")):
        r = paired_ratio(by[(group, "unchecked")], by[(group, "raw")])
        ok = r <= TARGET_UNCHECKED_OVER_RAW
        fails += not ok
        print(f"  {name:20s} unchecked / raw cffi API      = {r:5.2f}  (target <= {TARGET_UNCHECKED_OVER_RAW})  "
              f"{verdict(ok)}")
        r = paired_ratio(by[(group, "unchecked")], by[(group, "raw_int")])
        print(f"  {name:20s} unchecked / raw cffi API(int) = {r:5.2f}  (context: enum vs int conversion)")
        if cb is not None:
            r = paired_ratio(by[(group, "checked")], by[(group, "cuda_bindings")])
            ok = r <= TARGET_CHECKED_OVER_CUDA_BINDINGS
            fails += not ok
            print(f"  {name:20s} checked / cuda-bindings       = {r:5.2f}  "
                  f"(target <= {TARGET_CHECKED_OVER_CUDA_BINDINGS})  {verdict(ok)}")
        r = paired_ratio(by[(group, "checked")], by[(group, "unchecked")])
        print(f"  {name:20s} checked / unchecked           = {r:5.2f}  (context: cost of the checked wrapper)")
        if (group, "checked_py") in by and cb is not None:
            r = paired_ratio(by[(group, "checked_py")], by[(group, "cuda_bindings")])
            print(f"  {name:20s} Python wrapper / cuda-b.      = {r:5.2f}  (context: ABI mode, functions without "
                  "a fast path)")

    for group, name in (("hipver", "hipRuntimeGetVersion"), ("hiperr", "hipGetErrorString")):
        if hip_skipped:
            break
        r = paired_ratio(by[(group, "unchecked")], by[(group, "raw")])
        ok = r <= TARGET_UNCHECKED_OVER_RAW
        fails += not ok
        print(f"  {name:20s} unchecked / raw cffi API      = {r:5.2f}  (target <= {TARGET_UNCHECKED_OVER_RAW})  "
              f"{verdict(ok)}")
        if (group, "hip_python") in by:
            r = paired_ratio(by[(group, "checked")], by[(group, "hip_python")])
            ok = r <= TARGET_CHECKED_OVER_CUDA_BINDINGS
            fails += not ok
            print(f"  {name:20s} checked / hip-python         = {r:5.2f}  "
                  f"(target <= {TARGET_CHECKED_OVER_CUDA_BINDINGS}, as for cuda-bindings)  {verdict(ok)}")
        r = paired_ratio(by[(group, "checked")], by[(group, "raw")])
        print(f"  {name:20s} checked / raw cffi API        = {r:5.2f}  (context: the checked wrapper against a "
              "bare call)")

    if not args.quick:
        for group, title in (("parts_v", "Where the Python wrapper of nvrtcVersion() spends its time (pieces timed alone)"),
                             ("parts_e", "Where the Python wrapper of nvrtcGetErrorString(6) spends its time "
                                         "(pieces timed alone)")):
            rows = [v for v in V if v.group == group]
            checked = by[(group, "checked")]
            print(f"\n{title}")
            print(f"  {'piece'.ljust(width)}  {'ns':>8}  {'% of Python':>12}")
            for v in rows:
                print(f"  {v.label.ljust(width)}  {statistics.median(v.samples) * 1e9:8.1f}  "
                      f"{100 * paired_ratio(v, checked):11.0f}%")
        loop = statistics.median(by[("parts_v", "loop")].samples) * 1e9
        print(f"  (timeit's own loop costs ~{loop:.1f} ns per statement and is included in every number above"
              f" except the C-loop rows)")
        for group, title in (("alt_v", "What-if: other bodies for the checked nvrtcVersion() (x current: x the Python wrapper)"),
                             ("alt_e", "What-if: other bodies for the checked nvrtcGetErrorString()")):
            rows = [v for v in V if v.group == group]
            base = by[(group, "current")]
            ref = by.get((group, "cuda_bindings"))
            print(f"\n{title}")
            print(f"  {'body'.ljust(width)}  {'ns/call':>8}  {'x current':>9}  {'x cuda-b.':>9}")
            for v in rows:
                vs_cb = f"{paired_ratio(v, ref):9.2f}" if ref is not None else f"{'-':>9}"
                print(f"  {v.label.ljust(width)}  {statistics.median(v.samples) * 1e9:8.1f}  {paired_ratio(v, base):9.2f}  {vs_cb}")

    if nvrtc.BINDING_MODE != "api":
        print("\n!! WARNING: BINDING_MODE is not 'api': the generated-binding numbers are for the ABI fallback !!")
    print(f"\n{fails} target(s) missed; total time {time.perf_counter() - t_start:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
