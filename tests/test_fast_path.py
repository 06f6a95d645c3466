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


def outcome(fn, args, kwargs):
    try:
        r = fn(*args, **kwargs)
    except Error as e:
        return ("Error", e.kind, e.code, e.function, e.backend, str(e))
    except Exception as e:
        return (type(e).__name__,)
    return ("ok", type(r).__name__, repr(r), [type(x).__name__ for x in r] if isinstance(r, tuple) else None)


def compare(lib, cases):
    assert lib.BINDING_MODE == "api" and lib._fast is not None
    assert sorted(lib._python) == sorted(n for n in vars(lib._fast) if not n.startswith("_"))
    checked = 0
    for name, args, kwargs in cases:
        fast, slow = getattr(lib, name), lib._python[name]
        assert type(fast).__name__ == "builtin_function_or_method" and type(slow).__name__ == "function", name
        a, b = outcome(fast, args, kwargs), outcome(slow, args, kwargs)
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
n = compare(lib, cases)
assert sorted(lib._python) == ["goldenAlloc", "goldenCalls", "goldenFail", "goldenGetErrorName", "goldenGetName",
                               "goldenGetValue", "goldenGetVersion", "goldenInit", "goldenNotExported",
                               "goldenScale", "goldenSetValue", "goldenStatusString"], \
    sorted(lib._python)
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

def work():
    try:
        for i in range(2000):  # goldenAlloc: 0x1000 + bytes
            assert g.goldenGetVersion() == (2, 1) and g.goldenAlloc(i) == 0x1000 + i, (g.goldenAlloc(i), i)
            assert g.goldenGetName(i) == f"golden-device-{i}" and g.goldenStatusString(0) == "no error"
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

for fn in (lambda: g.goldenGetVersion(), lambda: g.goldenGetName(5), lambda: g.goldenScale(1.5, 2.0),
           lambda: g.goldenAlloc(bytes=1 << 20), failing, bad_arg):
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
    if "cuda.nvrtc" in libraries:
        fast = _fast(libraries["cuda.nvrtc"])
        assert {"nvrtcVersion", "nvrtcGetErrorString", "nvrtcGetNumSupportedArchs"} <= set(fast)
        # pointers, handles, arrays, error logs: Python
        assert not {"nvrtcCreateProgram", "nvrtcCompileProgram", "nvrtcGetPTX", "nvrtcGetSupportedArchs"} & set(fast)
    if "cuda.driver" in libraries:
        fast = _fast(libraries["cuda.driver"])
        assert {"cuInit", "cuDeviceGet", "cuDeviceGetCount", "cuDeviceGetAttribute", "cuDeviceGetName",
                "cuMemAlloc", "cuMemFree", "cuGetErrorName", "cuCtxSynchronize"} <= set(fast)
        assert not {"cuStreamQuery", "cuCtxCreate", "cuMemcpyHtoD", "cuLaunchKernel"} & set(fast)


def test_c_string_literals() -> None:
    assert c_string('a"b\\c?\n') == '"a\\"b\\\\c\\?\\n"'
    assert c_string("é\t") == '"\\303\\251\\011"'
