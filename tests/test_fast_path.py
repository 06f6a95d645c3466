"""The checked fast path: C functions compiled into the cffi API module in place of Python wrappers.

They must be indistinguishable from the Python wrappers they replace (which stay reachable as
``<library>._python[name]``): same results with the same types, the same exceptions (kind, code,
function, message for :class:`ironaccelerator.Error`; the type for argument errors), positional and
keyword calls alike.  Checked here on the golden library (a real shared library built from ``impl.c``),
on NVRTC (real), and on the CUDA driver (whatever this machine has: usually no driver at all).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ironaccelerator_gen import pipeline
from ironaccelerator_gen.bind import BoundLibrary
from ironaccelerator_gen.build import build_library
from ironaccelerator_gen.wrappers import FastPath, c_string, fast_paths, lower, out_types

from conftest import GENERATED, ROOT, SPECS
from test_golden import build_case, compile_impl, generate

GOLDEN = ROOT / "tests" / "golden" / "fast_path"  # the golden case of the fast path

# The comparison, run inside an interpreter that has imported the library as ``lib``: every call is made
# through the compiled function and through the Python wrapper it replaced, and the outcomes compared.
COMPARE = r'''
import decimal
from ironaccelerator import Error


def norm(lib, x, addresses=True):
    """A result as compared: C data by its class, C type and address (or only whether it is NULL, for objects a
    library makes anew on each call), or the bytes it owns (a struct)."""
    ffi = lib.ffi
    if isinstance(x, tuple):
        return tuple(norm(lib, y, addresses) for y in x)
    if not isinstance(x, ffi.CData):
        return (type(x).__name__, repr(x))
    t = ffi.typeof(x)
    if "owning" in repr(x):
        return (type(x).__name__, t.cname, bytes(ffi.buffer(x if t.kind == "pointer" else ffi.addressof(x))))
    return (type(x).__name__, t.cname, int(ffi.cast("uintptr_t", x)) if addresses else x == ffi.NULL)


def outcome(lib, fn, args, kwargs, addresses=True):
    try:
        r = fn(*args, **kwargs)
    except Error as e:
        return ("Error", e.kind, e.code, e.function, e.backend, str(e))
    except Exception as e:
        return (type(e).__name__,)
    return ("ok", norm(lib, r, addresses))


def compare(lib, cases, addresses=True):
    assert lib.BINDING_MODE == "api" and lib._fast is not None
    assert sorted(lib._python) == sorted(n for n in vars(lib._fast) if not n.startswith("_"))
    checked = 0
    for name, args, kwargs in cases:
        fast, slow = getattr(lib, name), lib._python[name]
        assert type(fast).__name__ == "builtin_function_or_method" and type(slow).__name__ == "function", name
        a, b = outcome(lib, fast, args, kwargs, addresses), outcome(lib, slow, args, kwargs, addresses)
        assert a == b, f"{name}{args}{kwargs}: fast {a} != python {b}"
        checked += 1
    return checked
'''

GOLDEN_CASES = r'''
D = decimal.Decimal
cases = []
for a in [(5,), (0,), (-1,), (1 << 64,), (1 << 31,), (1.5,), ("5",), (None,), (True,), (D(3),), (lib.GOLDEN_MODE_SAFE,)]:
    cases.append(("goldenAlloc", a, {}))
cases += [("goldenAlloc", (), {"bytes": 3}), ("goldenAlloc", (), {"size": 3}), ("goldenAlloc", (), {}),
          ("goldenAlloc", (1, 2), {}), ("goldenAlloc", (1,), {"bytes": 2})]
for a in [(0,), (7,), (99,), (1 << 32,), (-1,), (2.0,)]:
    cases.append(("goldenInit", a, {}))
cases += [("goldenGetVersion", (), {}), ("goldenGetVersion", (1,), {}), ("goldenGetVersion", (), {"x": 1})]
for a in [(3,), (0,), (-1,), ((1 << 31) - 1,), (1 << 31,), (-(1 << 31) - 1,), ("3",)]:
    cases.append(("goldenGetName", a, {}))
cases.append(("goldenGetName", (), {"index": 4}))
for a in [(0,), (1,), (4,), (999,), (3,), (-1,), (1 << 32,)]:
    cases.append(("goldenGetErrorName", a, {}))
for a in [(1.5, 2.0), (1, 2), (True, 2), (D("1.5"), 2), (1e308, 1e30), (float("nan"), 1.0), ("a", 1.0), (1.0, None),
          (1.0,)]:
    cases.append(("goldenScale", a, {}))
cases.append(("goldenScale", (), {"factor": 0.5, "x": 3}))
for a in [(0,), (1,), (-1,), (lib.GOLDEN_ERROR_COMPILE,)]:
    cases.append(("goldenStatusString", a, {}))
for a in [(1,), ("x",), (1 << 40,)]:
    cases.append(("goldenNotExported", a, {}))
cases += [("goldenCalls", (), {}), ("goldenCalls", (1,), {})]
for a in [(0, 8), (15, 1), (16, 1), (-1, 4), (2, 9), (1, -1), (1 << 31, 1)]:
    cases.append(("goldenSetValue", a, {}))
for a in [(0,), (11,), (15,), (16,), (-1,), (None,)]:
    cases.append(("goldenGetValue", a, {}))
for a in [(0, 0), (lib.GOLDEN_ERROR_INVALID_VALUE, 0), (lib.GOLDEN_ERROR_INVALID_VALUE, 1), (999, 1), (12345, 1),
          (1, -1), ("x", 1), (0, 1 << 31), (0,)]:
    cases.append(("goldenFail", a, {}))

# C data: handles, pointers, structs, arrays, strings in, nullable and function pointers, errcode_ret, sized strings
ffi = lib.ffi
ctx = lib._python["goldenCtxCreate"](5)
ctx2 = lib._python["goldenCtxCreate"](2)
pa, pb = lib._python["goldenCtxPair"]()
buf = ffi.new("char[]", 16)
cb = ffi.callback("goldenCallback", lambda user, value: None)
desc_value = lib._python["goldenGetDesc"](ctx)  # a struct out comes by value; desc: a pointer to it
desc = ffi.addressof(desc_value)
bad = [None, 5, 1.5, "x", b"x", ffi.new("int *"), ffi.NULL, [], [ctx], object(), ffi.cast("void *", ctx),
       ffi.cast("goldenCtx", 0), cb, desc]
for a in [(0,), (5,), (8,), (-1,), (None,), ("1",)]:
    cases.append(("goldenCtxCreate", a, {}))
for a in [(ctx,)] + [(x,) for x in bad]:
    cases.append(("goldenCtxGetFlags", a, {}))
cases += [("goldenCtxGetFlags", (), {"ctx": ctx}), ("goldenCtxGetFlags", (), {}), ("goldenCtxGetFlags", (ctx, 1), {}),
          ("goldenCtxPair", (), {}), ("goldenCtxPair", (1,), {}), ("goldenCtxCurrent", (), {}),
          ("goldenCtxCurrent", (1,), {})]
for a in [(pa,), (pb,), (ctx,)] + [(x,) for x in bad]:
    cases.append(("goldenCtxSwap", a, {}))
for a in [(0,), (3,), (8,), (99,), (-1,), (None,), (1 << 32,)]:
    cases.append(("goldenCtxOpen", a, {}))
labels = ["abc", b"xyz", None, "é", "日本語", "a\0b", "\ud800", 5, bytearray(b"a"), [b"a", b"\0"], buf, "x" * 100, ffi.NULL, desc]
for a in [(ctx, x) for x in labels] + [(ctx,), (ffi.NULL, "a"), (None, "a")]:
    cases += [("goldenCtxSetLabel", a, {}), ("goldenCtxLabel", (ctx,), {})]
cases += [("goldenCtxSetLabel", (), {"ctx": ctx, "label": "kw"}), ("goldenCtxSetLabel", (), {"label": "kw"}),
          ("goldenCtxSetLabel", (ctx,), {"label": None}), ("goldenCtxLabel", (ffi.NULL,), {}),
          ("goldenCtxLabel", (None,), {})]
for a in [(ctx, cb, buf), (ctx, cb), (ctx,), (ctx, None, None), (ctx, ffi.NULL, ffi.NULL), (ctx, lambda u, v: None),
          (ctx, cb, 5), (ctx, buf, buf), (ctx, cb, "str"), (ctx, cb, b"bytes"), (ctx, cb, [1, 2]), (ctx, 0),
          (ffi.NULL, cb), (ctx, ffi.cast("void *", 0)), (ctx, cb, desc), (ctx, cb, ctx2)]:
    cases += [("goldenCtxNotify", a, {}), ("goldenCtxUser", (ctx,), {})]
cases += [("goldenCtxNotify", (ctx,), {"user": buf}), ("goldenCtxNotify", (), {"ctx": ctx, "cb": None}),
          ("goldenCtxNotify", (ctx, cb, buf, 1), {}), ("goldenCtxNotify", (ctx,), {"cb": cb, "ctx": ctx}),
          ("goldenCtxUser", (ffi.NULL,), {}), ("goldenCtxUser", (None,), {})]
for a in [(ctx,), (ffi.NULL,), (None,), (5,)]:
    cases += [("goldenGetDesc", a, {}), ("goldenLogSize", a, {}), ("goldenLog", a, {}), ("goldenBlobSize", a, {}),
              ("goldenBlob", a, {})]
for a in [(desc[0],), (desc,), ([1, 2],), ({"width": 2, "height": 3},), (None,), (ffi.new("goldenDesc *")[0],), (5,),
          ({"nope": 1},), ([1, 2, 3, 4],)]:
    cases.append(("goldenDescArea", a, {}))
# (not an empty list: cffi passes a 1-byte array, which the function reads past)
for a in [(desc,), (None,), (), ([{"width": -1}],), ([[3, 4]],), ({"width": 1},), (ffi.NULL,), (desc[0],),
          ((desc[0],),), ([[1, 2], [-1, 0]],), (ffi.cast("void *", desc),), (b"abcd",)]:
    cases.append(("goldenDescCheck", a, {}))
for a in [(desc[0], 1), ({"width": 1, "height": 2}, 3), ([5, 6], 1), (None, 2), (desc, 1), (5, 1), ({"nope": 1}, 1),
          (desc[0], "1")]:
    cases.append(("goldenDescGrow", a, {}))
for a in [(3, 4), (-1, 1 << 31), (1.5, 2), (0,)]:
    cases.append(("goldenMakeDesc", a, {}))
for a in [(40, 2), (None, 2), ("1", 2), (1.0, 1), (1 << 31, 0), (True, 1), (D(3), 1)]:
    cases.append(("goldenBump", a, {}))
for a in [([1, 2, 3],), ((),), (None,), (range(4),), ([1, "2"],), ([1 << 40],), ([None],), ((x for x in (1,)),),
          (5,), ({1: 2, 3: 4},), ("12",), (b"12",), ([1.5],), ([True],), ([lib.GOLDEN_MODE_SAFE],), ([D(2)],),
          (list(range(1000)),)]:
    cases.append(("goldenSumInts", a, {}))
for a in [([1.0, 2.0], [3.0, 4.0]), ([1.0], [1.0, 2.0]), (None, None), ([1.0], None), (None, [1.0]), ([1], [2]),
          (["a"], [1.0]), ([1.0, 2.0], "ab"), ([], []), ([1.0], 5), (5, [1.0])]:
    cases.append(("goldenDot", a, {}))
cases += [("goldenDot", (), {"a": [1.0], "b_": [2.0]}), ("goldenDot", (), {"a": [1.0], "b": [2.0]})]
for a in [([ctx, ctx2],), ([ctx, ffi.NULL],), ([ctx, None],), ([],), (None,), ([5],), ((ctx,),),
          ([ffi.cast("void *", ctx)],), ([desc],), ([ctx] * 100,)]:
    cases.append(("goldenSumFlags", a, {}))
for a in [(["a", b"bc", "dé"],), ([],), (None,), (["x" * 200],), ([None],), ([1],), (["\ud800"],), (["a", "\ud800"],),
          ([ffi.new("char[]", b"cd")],), ([b"a\0b"],), ("abc",), ([ffi.NULL],), ([buf, "z"],), ([bytearray(b"x")],)]:
    cases.append(("goldenJoin", a, {}))
for a in [([5, 6, 7],), ([],), (None,), ([1, 0, 2],), (["a"],), ([1 << 70],), (7,)]:
    cases.append(("goldenCountTerminated", a, {}))
for a in [(ctx, "fine"), (ctx, "an error"), (ffi.NULL, "error"), (ctx, None), (ctx, b"error2"), (None, "x"),
          (ctx, "\ud800"), (ctx, 5)]:
    cases += [("goldenBuild", a, {}), ("goldenLog", (ctx,), {})]
for a in [(buf, 66, 4), (None, 1, 1), (ffi.NULL, 1, 0), (buf, 1.5, 1), (bytearray(4), 1, 1), ([0, 0], 1, 1),
          (buf, 1, -1), (b"abcd", 0, 0)]:
    cases.append(("goldenFillBytes", a, {}))
for a in [([1, 2],), ([None],), (None,), ("x",), (5,), ()]:
    cases.append(("goldenMissing", a, {}))
for a in [(ctx,), (ffi.NULL,), (None,), (5,)]:
    cases.append(("goldenCtxReset", a, {}))
n = compare(lib, cases)
names = sorted(name for name, *_ in lib._b.functions)
assert sorted(lib._python) == names and len(names) == 41, sorted(lib._python)
assert {c[0] for c in cases} == set(names), sorted(set(names) - {c[0] for c in cases})  # every function compared
print("compared", n)
'''


@pytest.fixture(scope="module")
def golden_pkg(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The golden case's expected package, built in API mode, and the environment that finds its library."""
    env = build_case(GOLDEN.name, tmp_path_factory.mktemp("fast"))
    return Path(env["PYTHONPATH"]), env


def test_golden_fast_path_matches_python_wrappers(golden_pkg: tuple[Path, dict[str, str]]) -> None:
    _, env = golden_pkg
    code = "from ironaccelerator.backends.test import fast_path as lib\n" + COMPARE + GOLDEN_CASES
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("compared"), r.stdout + r.stderr


def test_golden_fast_path_with_heap_buffers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """String buffers above FAST_STACK_BUFFER_MAX are PyMem_Calloc'ed (and freed on every path)."""
    from ironaccelerator_gen import wrappers

    monkeypatch.setattr(wrappers, "FAST_STACK_BUFFER_MAX", 16)  # goldenGetName's 64-byte buffer: heap
    files = generate([GOLDEN.name], tmp_path)
    tramp = files["ironaccelerator/backends/test/fast_path/trampolines.c"]
    assert "PyMem_Calloc(64, 1)" in tramp and "PyMem_Free(ia_buf0);" in tramp
    pkg = tmp_path / "pkg"
    pipeline.write(files, pkg)
    assert compile_impl(GOLDEN.name, tmp_path / "home", []).wait() == 0
    build_library(pkg / "ironaccelerator" / "backends" / "test" / "fast_path", api=True)
    env = {**os.environ, "PYTHONPATH": str(pkg), "IA_GOLDEN_HOME": str(tmp_path / "home")}
    code = "from ironaccelerator.backends.test import fast_path as lib\n" + COMPARE + GOLDEN_CASES
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("compared"), r.stdout + r.stderr


def test_golden_fast_path_threads_and_refcounts(golden_pkg: tuple[Path, dict[str, str]]) -> None:
    """Many threads calling (the GIL is released around each C call), then no reference leak per call."""
    _, env = golden_pkg
    code = r'''
import sys, threading
from ironaccelerator import Error
from ironaccelerator.backends.test import fast_path as g

failures = []
ctx = g.goldenCtxCreate(6)

def work():
    try:
        for i in range(2000):  # goldenAlloc: 0x1000 + bytes
            assert g.goldenGetVersion() == (2, 1) and g.goldenAlloc(i) == 0x1000 + i, (g.goldenAlloc(i), i)
            assert g.goldenGetName(i) == f"golden-device-{i}" and g.goldenStatusString(0) == "no error"
            # first calls race to load their C types (ia_ct_load)
            assert g.goldenSumInts([i, 1]) == i + 1 and g.goldenCtxGetFlags(ctx) == 6 and g.goldenBlob(ctx) == bytes(range(9))
            assert g.goldenJoin([str(i), b"x"]) == f"{i},x" and g.goldenGetDesc(ctx).height == 12
    except BaseException as e:  # an exception in a thread does not fail the process: report it
        failures.append(repr(e))
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
assert not failures, failures

def count(fn, n=20000):
    before = sys.getallocatedblocks()
    for _ in range(n):
        fn()
    return sys.getallocatedblocks() - before

def failing():
    try:
        g.goldenInit(99)
    except Error:
        pass

def bad_arg():
    try:
        g.goldenAlloc(-1)
    except OverflowError:
        pass

def catch(fn, exc):
    def call():
        try:
            fn()
        except exc:
            pass
    return call

desc_value = g.goldenGetDesc(ctx)
desc = g.ffi.addressof(desc_value)
cb = g.ffi.callback("goldenCallback", lambda user, value: None)
for fn in (lambda: g.goldenGetVersion(), lambda: g.goldenGetName(5), lambda: g.goldenScale(1.5, 2.0),
           lambda: g.goldenAlloc(bytes=1 << 20), failing, bad_arg,
           # C data: objects made (handles, structs, strings), arrays and encoded strings released, on every path
           lambda: g.goldenCtxCreate(1), lambda: g.goldenCtxGetFlags(ctx), lambda: g.goldenCtxPair(),
           lambda: g.goldenCtxSwap(None), lambda: g.goldenCtxCurrent(), lambda: g.goldenGetDesc(ctx),
           lambda: g.goldenDescGrow(desc[0], 1), lambda: g.goldenDescArea({"width": 2}), lambda: g.goldenMakeDesc(1, 2),
           lambda: g.goldenDescCheck([[1, 2]]), lambda: g.goldenCtxSetLabel(ctx, "abc"), lambda: g.goldenCtxLabel(ctx),
           lambda: g.goldenCtxNotify(ctx, cb, desc), lambda: g.goldenCtxUser(ctx), lambda: g.goldenBump(None, 1),
           lambda: g.goldenSumInts([1, 2, 3]), lambda: g.goldenDot([1.0], [2.0]), lambda: g.goldenSumFlags([ctx, ctx]),
           lambda: g.goldenJoin(["a", b"b", "c"]), lambda: g.goldenCountTerminated([1, 2]), lambda: g.goldenLog(ctx),
           lambda: g.goldenBlob(ctx), lambda: g.goldenFillBytes(desc, 0, 4), lambda: g.goldenCtxOpen(2),
           catch(lambda: g.goldenCtxOpen(8), Error), catch(lambda: g.goldenBuild(ctx, "error"), Error),
           catch(lambda: g.goldenDot([1.0], [1.0, 2.0]), Error), catch(lambda: g.goldenJoin(["a", None]), TypeError),
           catch(lambda: g.goldenSumInts([1, "x"]), TypeError), catch(lambda: g.goldenCtxSetLabel(None, "abc"), TypeError),
           catch(lambda: g.goldenGetDesc(g.ffi.NULL), Error), catch(lambda: g.goldenMissing([1]), Error),
           catch(lambda: g.goldenDescCheck([[1, 2], "x"]), TypeError)):
    count(fn, 2000)  # warm-up: caches, interned strings, the error path's import
    grown = count(fn)
    assert grown < 200, grown  # a leak would be >= 20000
print("ok")
'''
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_nvrtc_fast_path_matches_python_wrappers() -> None:
    code = r'''
from ironaccelerator.backends.cuda import nvrtc as lib
if not lib.has("nvrtcVersion"):
    print("skip: no libnvrtc")
    raise SystemExit(0)
''' + COMPARE + r'''
cases = [("nvrtcVersion", (), {}), ("nvrtcVersion", (1,), {}), ("nvrtcGetNumSupportedArchs", (), {})]
cases += [("nvrtcGetErrorString", (c,), {}) for c in list(range(-1, 16)) + [1 << 31, 1 << 32, 2.0, "1", None]]
cases += [("nvrtcGetErrorString", (), {"result": lib.NVRTC_ERROR_COMPILATION})]
assert {"nvrtcVersion", "nvrtcGetErrorString"} <= set(lib._python), sorted(lib._python)
print("compared", compare(lib, cases))
'''
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(GENERATED)},
                       capture_output=True, text=True)
    if r.stdout.startswith("skip"):
        pytest.skip(r.stdout.strip())
    assert r.returncode == 0 and r.stdout.startswith("compared"), r.stdout + r.stderr


def test_driver_fast_path_matches_python_wrappers() -> None:
    """Whatever the machine has (usually no libcuda: the loader error), fast and Python agree."""
    code = r'''
from ironaccelerator.backends.cuda import driver as lib
''' + COMPARE + r'''
cases = [("cuInit", (0,), {}), ("cuInit", (-1,), {}), ("cuDriverGetVersion", (), {}), ("cuDeviceGetCount", (), {}),
         ("cuDeviceGet", (0,), {}), ("cuDeviceGet", (1 << 40,), {}), ("cuDeviceGetName", (0,), {}),
         ("cuGetErrorName", (0,), {}), ("cuGetErrorString", (lib.CUDA_ERROR_OUT_OF_MEMORY,), {}),
         ("cuMemAlloc", (1024,), {}), ("cuMemFree", (0,), {}), ("cuCtxSynchronize", (), {})]
assert {c[0] for c in cases} <= set(lib._python), sorted({c[0] for c in cases} - set(lib._python))
print("compared", compare(lib, cases))
'''
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(GENERATED)},
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("compared"), r.stdout + r.stderr


STUB_CASES = r"""
ffi = lib.ffi
PTX = b".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 p0, .param .u32 p1)\n{\n ret;\n}\n"
lib.cuInit(0)
dev = lib.cuDeviceGet(0)
ctx = lib.cuDevicePrimaryCtxRetain(dev)
lib.cuCtxSetCurrent(ctx)
s = lib.cuStreamCreate(0)
e = lib.cuEventCreate(0)
lib.cuEventRecord(e, s)
mod = lib.cuModuleLoadData(PTX)
fn = lib.cuModuleGetFunction(mod, "k")
dptr = lib.cuMemAlloc(64)
host = ffi.new("char[]", 64)
params = ffi.new("void *[]", [ffi.new("unsigned long long *"), ffi.new("unsigned int *")])
values = ffi.new("void *[]", [ffi.cast("void *", 32)])
assert lib.cuCtxGetCurrent() == ctx and lib.cuStreamGetPriority(s) == lib._python["cuStreamGetPriority"](s)
assert lib.cuCtxGetCurrent() == lib._python["cuCtxGetCurrent"]() and lib.ffi.typeof(ctx) is lib.ffi.typeof("CUcontext")
assert ffi.typeof(lib.cuDeviceGetUuid(dev)) is ffi.typeof(lib._python["cuDeviceGetUuid"](dev)) is ffi.typeof("CUuuid")
bad = [None, 0, 1.5, "x", ffi.NULL, ffi.new("int *"), object(), ctx, [s], e]
cases = [("cuCtxGetCurrent", (), {}), ("cuCtxGetStreamPriorityRange", (), {}), ("cuMemGetInfo", (), {}),
         ("cuDeviceGetName", (dev,), {}), ("cuDeviceGetUuid", (dev,), {}), ("cuDeviceGetUuid", (None,), {}),
         ("cuFuncGetName", (fn,), {}), ("cuFuncGetParamInfo", (fn, 0), {}), ("cuFuncGetParamInfo", (fn, 1), {}),
         ("cuFuncGetParamInfo", (fn, 7), {}), ("cuStreamCreate", (0,), {}), ("cuEventCreate", (0,), {}),
         ("cuMemHostAlloc", (64, 0), {}), ("cuCtxSetCurrent", (ctx,), {})]
for x in [s] + bad:
    cases += [("cuStreamGetPriority", (x,), {}), ("cuStreamQuery", (x,), {}), ("cuStreamGetFlags", (x,), {}),
              ("cuEventElapsedTime", (e, x), {}), ("cuStreamWaitEvent", (s, x, 0), {}), ("cuCtxSetCurrent", (x,), {}),
              ("cuModuleGetFunction", (x, "k"), {}), ("cuLaunchKernel", (fn, 1, 1, 1, 1, 1, 1, 0, x), {}),
              ("cuLaunchKernel", (fn, 1, 1, 1, 1, 1, 1, 0, s, x), {}), ("cuMemcpyHtoDAsync", (dptr, x, 1, s), {})]
cases.append(("cuCtxSetCurrent", (ctx,), {}))
for name in ["k", b"k", "nope", None, 5, "k" * 300, "\ud800"]:
    cases.append(("cuModuleGetFunction", (mod, name), {}))
for a in [(PTX, [lib.CU_JIT_MAX_REGISTERS], values), (PTX, None, None), (PTX, [1, "x"], None), (PTX, [], values),
          (PTX, [lib.CU_JIT_MAX_REGISTERS]), (None, None, None), (PTX, [1 << 40], None), (PTX, 5, None)]:
    cases.append(("cuModuleLoadDataEx", a, {}))
for a in [([lib.CU_JIT_MAX_REGISTERS], values), (None, None), ([1, None], None), ()]:
    cases.append(("cuLinkCreate", a, {}))  # not in the stub: its placeholder's CUDA_ERROR_NOT_SUPPORTED
cases += [("cuLaunchKernel", (fn, 1, 1, 1, 1, 1, 1, 0, s, params, None), {}),
          ("cuLaunchKernel", (fn, 1, 1, 1, 1, 1, 1, 0, s), {"extra": None, "kernelParams": params}),
          ("cuMemcpyHtoDAsync", (dptr, host, 64, s), {}), ("cuMemcpyHtoDAsync", (dptr, b"abc", 3, s), {}),
          ("cuMemcpyHtoDAsync", (dptr, [1, 2], 2, s), {})]
print("compared", compare(lib, cases, addresses=False))
"""


def test_driver_fast_path_on_the_stub_driver(stub_cuda: tuple[Path, dict[str, str]]) -> None:
    """Handles in and out, structs, strings, arrays and nullable pointers, over the stub driver (a libcuda.so.1
    built from the real cuda.h whose functions return at once): fast and Python agree, call by call."""
    _, env = stub_cuda
    code = "from ironaccelerator.backends.cuda import driver as lib\n" + COMPARE + STUB_CASES
    r = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": str(GENERATED)}, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("compared"), r.stdout + r.stderr


NVRTC_CASES = r"""
ffi = lib.ffi
src = 'extern "C" __global__ void k(float *x) { x[0] = 1.0f; }'
prog = lib.nvrtcCreateProgram(src, "k.cu")
lib.nvrtcCompileProgram(prog, ["--gpu-architecture=compute_80"])
broken = lib.nvrtcCreateProgram("this is not C++", "bad.cu")
cases = []
for a in [(src,), (src, "k.cu"), (src.encode(), b"k.cu"), (src, None, ["a.h"], ["#define A 1"]), (src, None, [], []),
          (src, None, ["a.h"], []), (src, None, ["a.h"], None), (None,), (5,), (src, "k.cu", [None], [None]),
          (src, "k.cu", "ab", ["x", "y"]), ("\ud800",)]:
    cases.append(("nvrtcCreateProgram", a, {}))
for a in [(prog, ["--gpu-architecture=compute_80"]), (prog,), (prog, None), (prog, ["--no-such-option"]),
          (broken, []), (broken, ["-default-device"]), (None, []), (prog, [5]), (prog, "ab")]:
    cases.append(("nvrtcCompileProgram", a, {}))
for x in [prog, broken, None, ffi.NULL, 5]:
    cases += [("nvrtcGetPTXSize", (x,), {}), ("nvrtcGetPTX", (x,), {}), ("nvrtcGetProgramLog", (x,), {}),
              ("nvrtcGetProgramLogSize", (x,), {}), ("nvrtcGetCUBIN", (x,), {}), ("nvrtcGetLTOIR", (x,), {})]
cases += [("nvrtcAddNameExpression", (prog, None), {}), ("nvrtcDestroyProgram", (None,), {}),
          ("nvrtcDestroyProgram", (5,), {}), ("nvrtcGetNumSupportedArchs", (), {}), ("nvrtcGetSupportedArchs", (), {})]
n = compare(lib, cases, addresses=False)
# in-out: the destroyed handle comes back as NULL (one program each: destroying is not repeatable)
p1, p2 = lib.nvrtcCreateProgram(src), lib.nvrtcCreateProgram(src)
assert norm(lib, lib.nvrtcDestroyProgram(p1)) == norm(lib, lib._python["nvrtcDestroyProgram"](p2))
assert lib.nvrtcDestroyProgram(lib.nvrtcCreateProgram(src)) == ffi.NULL
try:
    lib.nvrtcCompileProgram(broken, [])
except Error as e:
    assert "bad.cu" in str(e) and e.kind.name == "COMPILE_FAILED", str(e)  # the log, read by the C fast path
else:
    raise AssertionError("compiled")
fresh = lib.nvrtcCreateProgram(src, "k.cu")
lib.nvrtcCompileProgram(fresh, ["--gpu-architecture=compute_80"])
ptx = lib.nvrtcGetPTX(fresh)
assert ptx.startswith("//") and ".entry k" in ptx and ptx == lib._python["nvrtcGetPTX"](fresh)
assert len(ptx) + 1 == lib.nvrtcGetPTXSize(fresh) and type(lib.nvrtcGetPTX).__name__ == "builtin_function_or_method"
print("compared", n)
"""


def test_nvrtc_fast_path_with_programs() -> None:
    """NVRTC (real): strings and arrays in, handles out and in-out, sized strings, a compile log in the error."""
    code = ("from ironaccelerator.backends.cuda import nvrtc as lib\n"
            "if not lib.has('nvrtcCreateProgram'):\n    print('skip: no libnvrtc')\n    raise SystemExit(0)\n"
            + COMPARE + NVRTC_CASES)
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(GENERATED)},
                       capture_output=True, text=True, timeout=300)
    if r.stdout.startswith("skip"):
        pytest.skip(r.stdout.strip())
    assert r.returncode == 0 and r.stdout.startswith("compared"), r.stdout + r.stderr


OPENCL_CASES = r"""
plats = ffi.new("cl_platform_id[]", n[0])
lib.clGetPlatformIDs(n[0], plats, None)
devs = ffi.new("cl_device_id[]", 1)
lib.clGetDeviceIDs(plats[0], lib.CL_DEVICE_TYPE_ALL, 1, devs, None)
dev = devs[0]
ctx = lib.clCreateContext(None, [dev])
q = lib.clCreateCommandQueueWithProperties(ctx, dev, None)
src = "__kernel void k(__global int *x) { x[0] = 7; }"
prog = lib.clCreateProgramWithSource(ctx, [src])
lib.clBuildProgram(prog, [dev], "")
kern = lib.clCreateKernel(prog, "k")
buf = lib.clCreateBuffer(ctx, lib.CL_MEM_READ_WRITE, 64)
value = ffi.new("cl_uint *")
props = [lib.CL_CONTEXT_PLATFORM, ffi.cast("cl_context_properties", plats[0])]
cases = []
for a in [(ctx, lib.CL_MEM_READ_WRITE, 64), (ctx, lib.CL_MEM_READ_WRITE, 0), (ctx, 1 << 40, 64), (ffi.NULL, 1, 64),
          (None, 1, 64), (ctx, 1, 64, None), (ctx, lib.CL_MEM_USE_HOST_PTR, 64, ffi.new("char[]", 64)),
          (ctx, 1, -1), (q, 1, 64)]:
    cases.append(("clCreateBuffer", a, {}))
for x in [ctx, ffi.NULL, None, q, 5]:
    cases += [("clCreateUserEvent", (x,), {}), ("clFlush", (x,), {})]
for a in [(None, [dev]), (props, [dev]), ([], [dev]), (None, []), (None, None), (None, [dev, dev]),
          (None, [None]), ([1, "x"], [dev]), (None, [dev], None, None)]:
    cases.append(("clCreateContext", a, {}))
for a in [(ctx, [src]), (ctx, [src, src.encode()]), (ctx, []), (ctx, None), (ctx, [None]), (ffi.NULL, [src]),
          (ctx, [src], ffi.new("size_t[]", [len(src)]))]:
    cases.append(("clCreateProgramWithSource", a, {}))
for a in [(prog, "k"), (prog, b"k"), (prog, "nope"), (prog, None), (ffi.NULL, "k")]:
    cases.append(("clCreateKernel", a, {}))
for a in [(dev, lib.CL_DEVICE_MAX_COMPUTE_UNITS, 4, value), (dev, lib.CL_DEVICE_MAX_COMPUTE_UNITS, 4, value, n),
          (dev, lib.CL_DEVICE_MAX_COMPUTE_UNITS, 0, None, n), (dev, 0, 4, value), (None, 0, 4, value),
          (dev, lib.CL_DEVICE_MAX_COMPUTE_UNITS, 4, b"abcd")]:
    cases.append(("clGetDeviceInfo", a, {}))
arg = (kern, 0, ffi.sizeof("cl_mem"), ffi.new("cl_mem *", buf))
for a in [arg, (kern, 0, 8, None), (kern, 5, 8, None), (None, 0, 8, None), arg]:  # (the buffer last: launched below)
    cases.append(("clSetKernelArg", a, {}))
for a in [(q, kern, 1, None, [1], None), (q, kern, 1, None, [1], [1], None, None), (q, kern, 1, None, [1], None, []),
          (q, kern, 1, None, None, None), (q, kern, 1, None, [1], None, [None]), (q, kern, 1, [0], [1], [1])]:
    cases.append(("clEnqueueNDRangeKernel", a, {}))
for a in [(prog, [dev], "-cl-std=CL1.2"), (prog, None, None), (prog,), (prog, [dev], b""), (prog, [dev], 5),
          (ffi.NULL, None, None)]:
    cases.append(("clBuildProgram", a, {}))
cases += [("clFinish", (q,), {}), ("clGetPlatformIDs", (0, None, n), {}), ("clGetPlatformIDs", (0, None, None), {})]
print("compared", compare(lib, cases, addresses=False))
"""


def test_opencl_fast_path_on_pocl() -> None:
    """OpenCL (PoCL): errcode_ret statuses, handles, null-terminated and counted arrays, strings, nullable ones."""
    code = ("from ironaccelerator.backends.opencl import cl as lib\nffi = lib.ffi\nn = ffi.new('cl_uint *')\n"
            "try:\n    lib.clGetPlatformIDs(0, None, n)\nexcept Exception as e:\n    print('skip:', e)\n"
            "    raise SystemExit(0)\nif n[0] == 0:\n    print('skip: no OpenCL platform')\n    raise SystemExit(0)\n"
            + COMPARE + OPENCL_CASES)
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(GENERATED)},
                       capture_output=True, text=True, timeout=300)
    if r.stdout.startswith("skip"):
        pytest.skip(r.stdout.strip())
    assert r.returncode == 0 and r.stdout.startswith("compared"), r.stdout + r.stderr


# ------------------------------------------------------------------ generator side


@pytest.fixture(scope="module")
def libraries() -> dict[str, BoundLibrary]:
    result = pipeline.compile_specs(SPECS)
    return {f"{lib.spec.vendor}.{lib.spec.library}": lib for lib in result.libraries}  # (hip.runtime beside a cuda.runtime)


def _fast(lib: BoundLibrary) -> dict[str, FastPath]:
    types = out_types(lib)
    index = {t: i for i, t in enumerate(types)}
    by_public = {f.public: f for f in lib.functions}
    wrappers = {f.public: lower(f, lib, index, by_public) for f in lib.functions}
    return {fp.public: fp for fp in fast_paths(lib, wrappers)}


def test_which_functions_get_the_fast_path(libraries: dict[str, BoundLibrary]) -> None:
    """Every checked wrapper whose shape the fast path can express has one: handles, structs, strings, arrays,
    nullable pointers, errcode_ret, compile logs.  What stays in Python, and why."""
    python_only: dict[str, set[str]] = {}  # (clCreateProgramWithBinary was, until the spec said its binaries are in)
    for name, lib in libraries.items():
        fast = _fast(lib)
        rest = {f.public for f in lib.functions} - set(fast)
        assert rest == python_only.get(name, set()), (name, sorted(rest))
    if "cuda.driver" in libraries:  # the shapes of issue 15, by example
        fast = _fast(libraries["cuda.driver"])
        for public in ("cuCtxGetCurrent", "cuStreamGetPriority", "cuCtxGetStreamPriorityRange", "cuDeviceGetUuid",
                       "cuDeviceGetName", "cuLinkCreate", "cuLaunchKernel", "cuModuleGetFunction"):
            assert public in fast, public
        assert fast["cuCtxGetCurrent"].ctypes == ((0, True),)  # CUcontext, what CUcontext * points to
        assert "ia_arg_ptr(" in "\n".join(fast["cuStreamGetPriority"].body)
    if "opencl.cl" in libraries:
        body = "\n".join(_fast(libraries["opencl.cl"])["clCreateBuffer"].body)
        assert "ia_fast_fail(IA_FROM_INT(cl_int, o4), 3)" in body and "_cffi_from_c_pointer((char *)ia_r" in body


def test_c_string_literals() -> None:
    assert c_string('a"b\\c?\n') == '"a\\"b\\\\c\\?\\n"'
    assert c_string("é\t") == '"\\303\\251\\011"'
