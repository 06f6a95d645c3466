"""Run by test_kernel_cache.py in a subprocess whose libcuda.so.1 is bench/stub_cuda: NVRTC (on the CPU, no
GPU) compiles through ``Device.load_module`` with options, defines, include directories and name expressions,
and the kernel cache serves the second load.  The cache directory is IRONACCEL_CACHE_DIR (set by the parent).
Usage: kernel_cache_stub_child.py STUB PART (PART: options, cache, deps).  Prints "ok <n>" (checks).
deps (issue 23 item 7): a header found through -I in options or include_dirs, edited, recompiles; a warm
load lists no include directory."""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, cast

import ironaccelerator as ia
from ironaccelerator import Error, ErrorKind
from ironaccelerator.backends.cuda import _backend as cb

PART = sys.argv[2]
checked = 0

TEMPLATE = """
#include "scale.h"
template <typename T> __global__ void axpy(T a, T *x, T *y) { y[threadIdx.x] += a * x[threadIdx.x] * SCALE; }
extern "C" __global__ void plain(float *x) { x[threadIdx.x] = SCALE + EXTRA; }
"""


def raises(fn: Callable[[], Any], kind: ErrorKind, *words: str) -> None:
    global checked
    try:
        fn()
    except Error as e:
        assert e.kind is kind, repr(e)
        for w in words:
            assert w in str(e), (w, str(e))
        checked += 1
        return
    raise AssertionError(f"{fn} did not raise {kind.name}")


dev = cast(cb.CudaDevice, ia.BackendRegistry.default().get(ia.BackendKind.CUDA).open(0))
inc = os.environ["KC_INCLUDE"]

if PART == "options":
    m = dev.load_module(TEMPLATE, defines={"EXTRA": 1}, include_dirs=[inc],
                        name_expressions=["axpy<float>", "axpy<double>"], options=["-default-device"], cache=False)
    assert m.from_cache is False
    assert set(m.lowered_names) == {"axpy<float>", "axpy<double>"}, m.lowered_names
    assert m.lowered_names["axpy<float>"].startswith("_Z"), m.lowered_names
    k = m.kernel("axpy<float>")  # the stub looks the lowered name up in the PTX
    assert k.num_args == 3, k.num_args
    assert m.kernel("plain").num_args == 1
    checked += 3
    # without the define the source does not compile: the define reached NVRTC
    raises(lambda: dev.load_module(TEMPLATE, include_dirs=[inc], cache=False), ErrorKind.COMPILE_FAILED, "EXTRA")
    # without the include directory neither
    raises(lambda: dev.load_module(TEMPLATE, defines={"EXTRA": 1}, cache=False), ErrorKind.COMPILE_FAILED, "scale.h")
    # an option NVRTC refuses: COMPILE_FAILED with the option in the message
    raises(lambda: dev.load_module(TEMPLATE, defines={"EXTRA": 1}, include_dirs=[inc], options=["--no-such-flag"],
                                   cache=False), ErrorKind.COMPILE_FAILED, "--no-such-flag")
    # bad types: INVALID_VALUE before any call
    raises(lambda: dev.load_module(TEMPLATE, options="-w"), ErrorKind.INVALID_VALUE, "options")
    raises(lambda: dev.load_module(TEMPLATE, options=[3]), ErrorKind.INVALID_VALUE, "options")  # type: ignore[list-item]
    raises(lambda: dev.load_module(TEMPLATE, defines={"1x": 1}), ErrorKind.INVALID_VALUE, "macro")
    raises(lambda: dev.load_module(TEMPLATE, defines={"X": [1]}), ErrorKind.INVALID_VALUE, "X")
    raises(lambda: dev.load_module(TEMPLATE, include_dirs=inc), ErrorKind.INVALID_VALUE, "include_dirs")
    raises(lambda: dev.load_module(TEMPLATE, name_expressions=[b"f"]), ErrorKind.INVALID_VALUE,  # type: ignore[list-item]
           "name_expressions")
    # a name expression that names nothing: NVRTC's error, not a crash
    try:
        dev.load_module(TEMPLATE, defines={"EXTRA": 1}, include_dirs=[inc], name_expressions=["nothing<int>"],
                        cache=False)
    except Error:
        checked += 1
    else:
        raise AssertionError("an unknown name expression was accepted")
    # options with a code object: nothing to compile
    ptx = cb.CudaBackend.compile_source("extern \"C\" __global__ void f() {}", "compute_75")
    raises(lambda: dev.load_module(ptx, defines={"X": 1}), ErrorKind.UNSUPPORTED, "options")
elif PART == "cache":
    kw: dict[str, Any] = {"defines": {"EXTRA": 2}, "include_dirs": [inc], "name_expressions": ["axpy<float>"]}
    first = sys.argv[3] == "cold"
    m = dev.load_module(TEMPLATE, **kw)
    assert m.from_cache is (not first), (m.from_cache, sys.argv[3])
    assert m.kernel("axpy<float>").num_args == 3
    checked += 2
    if not first:
        assert dev.load_module(TEMPLATE, **kw, cache=False).from_cache is False
        assert dev.load_module(TEMPLATE, defines={"EXTRA": 3}, include_dirs=[inc],
                               name_expressions=["axpy<float>"]).from_cache is False  # another define: another key
        checked += 2
elif PART == "deps":
    from pathlib import Path

    root = Path(inc).parent / "deps"
    scale = Path(inc) / "scale.h"

    def edit(path: Path, old: str, new: str) -> str:
        """Replace ``old`` by ``new`` (as long) in ``path``, keeping its size and mtime: only the content tells."""
        assert len(old) == len(new)
        st = path.stat()
        text = path.read_text()
        path.write_text(text.replace(old, new))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        return text

    for n, spelling in enumerate([["-I{}"], ["--include-path={}"], ["-I", "{}"]]):  # the last: two options
        extra = root / f"extra{n}"
        extra.mkdir(parents=True)
        (extra / "extra.h").write_text("#define EXTRA 1\n")
        src = '#include "extra.h"\n' + TEMPLATE
        kw = {"options": [o.format(extra) for o in spelling], "include_dirs": [inc], "name_expressions": ["axpy<float>"]}
        assert dev.load_module(src, **kw).from_cache is False
        assert dev.load_module(src, **kw).from_cache is True
        # the header under -I now fails to compile: the load must compile it (not return the stale image)
        text = edit(extra / "extra.h", "#define EXTRA 1", "#error EXTRA_Q1")
        raises(lambda: dev.load_module(src, **kw), ErrorKind.COMPILE_FAILED, "EXTRA_Q1")
        (extra / "extra.h").write_text(text)
        assert dev.load_module(src, **kw).kernel("axpy<float>").num_args == 3
        # the same for the header under include_dirs
        text = edit(scale, "#define SCALE 2", "#error SCALE_Q2")
        raises(lambda: dev.load_module(src, **kw), ErrorKind.COMPILE_FAILED, "SCALE_Q2")
        scale.write_text(text)
        m = dev.load_module(src, **kw)
        assert m.kernel("axpy<float>").num_args == 3 and dev.load_module(src, **kw).from_cache is True
        checked += 4
    # a warm load with a large tree in include_dirs lists no directory
    big = root / "big"
    for i in range(3000):
        d = big / f"d{i % 30}" / f"e{i % 7}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.h").write_bytes(b"")
    kw = {"include_dirs": [inc, big, "/usr"], "defines": {"EXTRA": 4}}
    listed: list[str] = []
    for name in ("walk", "scandir", "listdir"):
        def spy(path: Any = ".", *a: Any, _real: Any = getattr(os, name), **k: Any) -> Any:
            listed.append(str(path))
            return _real(path, *a, **k)
        setattr(os, name, spy)
    assert dev.load_module(TEMPLATE, **kw).from_cache is False
    assert dev.load_module(TEMPLATE, **kw).from_cache is True
    cache_dir = os.environ["IRONACCEL_CACHE_DIR"]
    walked = [p for p in listed if not p.startswith(cache_dir)]
    assert walked == [], walked[:10]
    checked += 2
elif PART == "warnings":
    # issue 24 item 7: a compile that succeeds with a log gives Module.build_log and a CompilerWarning at the
    # caller's line; a warm load (the kernel cache) keeps the log with the entry and warns the same
    import warnings

    first = sys.argv[3] == "cold"
    src = '#warning nvrtc_says_hi\nextern "C" __global__ void w(float *x) { x[threadIdx.x] = 1.0f; }\n'
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = dev.load_module(src)
    assert m.from_cache is (not first), (m.from_cache, sys.argv[3])
    assert "nvrtc_says_hi" in m.build_log, repr(m.build_log)
    (w,) = [w for w in caught if issubclass(w.category, ia.CompilerWarning)]
    assert "nvrtc_says_hi" in str(w.message) and w.filename == __file__, (str(w.message), w.filename)
    assert ("loaded from the kernel cache" in str(w.message)) is (not first), str(w.message)
    assert m.kernel("w").num_args == 1
    checked += 4
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clean = dev.load_module('extern "C" __global__ void c(float *x) { x[0] = 2.0f; }\n')
    assert clean.build_log == "" and not [w for w in caught if issubclass(w.category, ia.CompilerWarning)], (
        clean.build_log, [str(w.message) for w in caught])
    checked += 1
else:
    raise SystemExit(f"unknown part {PART}")
print(f"ok {checked}")
