"""The kernel cache (runtime/ironaccelerator_runtime/kernel_cache.py) and load_module's compile options.

Pure parts first (key, entries, concurrency, corruption, eviction, location), then OpenCL on PoCL (cold and
warm loads in this process and in another, defines reaching the compiler, refused options), then NVRTC on the
CPU through the stub CUDA driver (tests/kernel_cache_stub_child.py), then the backends that take no options.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable, Iterator, cast

import numpy as np
import pytest

from ironaccelerator import BackendKind, BackendRegistry, Error, ErrorKind, KernelLaunch, LaunchDims
from ironaccelerator_runtime import kernel_cache as kc
from ironaccelerator_runtime.traits import CompileOptions, compile_options

from conftest import ROOT

KEY_ARGS: dict[str, Any] = {
    "backend": "OPENCL", "source": b"__kernel void k() {}", "options": ["-w"], "defines": {"N": "4"},
    "include_dirs": [], "name_expressions": [], "compiler": "nvrtc 13.0", "device": "sm_90 H200 driver 13000",
    "extra": "",
}


# ------------------------------------------------------------------------------------------------ keys


def test_key_is_stable_and_hex() -> None:
    k = kc.cache_key(**KEY_ARGS)
    assert k == kc.cache_key(**KEY_ARGS) and len(k) == 64 and int(k, 16) >= 0
    # the same defines in another order: the same key
    assert kc.cache_key(**{**KEY_ARGS, "defines": {"N": "4", "M": None}}) == \
        kc.cache_key(**{**KEY_ARGS, "defines": {"M": None, "N": "4"}})


@pytest.mark.parametrize("field,value", [
    ("backend", "CUDA"), ("source", b"__kernel void k() { }"), ("options", ["-w", "-O0"]), ("options", []),
    ("defines", {"N": "5"}), ("defines", {"N": None}), ("defines", {}), ("include_dirs", ["/nonexistent/inc"]),
    ("name_expressions", ["f<int>"]), ("compiler", "nvrtc 13.1"), ("device", "sm_90 H200 driver 13010"),
    ("device", "sm_80 H200 driver 13000"), ("extra", "-cl-kernel-arg-info"),
])
def test_every_input_changes_the_key(field: str, value: Any) -> None:
    assert kc.cache_key(**{**KEY_ARGS, field: value}) != kc.cache_key(**KEY_ARGS)


def test_the_search_path_is_in_the_key_not_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 23 item 7: the key holds the search directories (absolute) and, when the source may include a file
    by a relative name, the current directory (NVRTC and PoCL search it); the headers are checked per entry."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    inc = {**KEY_ARGS, "source": b'#include "x.h"\n__kernel void k() {}', "options": ["-Iinc"]}
    monkeypatch.chdir(tmp_path / "a")
    k_a, plain_a = kc.cache_key(**inc), kc.cache_key(**KEY_ARGS)
    monkeypatch.chdir(tmp_path / "b")
    assert kc.cache_key(**inc) != k_a  # -Iinc is another directory, and "x.h" may be found in the cwd
    assert kc.cache_key(**KEY_ARGS) == plain_a  # includes nothing: the cwd does not matter
    assert kc.cache_key(**{**inc, "options": ["-I", "inc"]}) != kc.cache_key(**{**inc, "options": ["-I", "other"]})


@pytest.mark.parametrize("options,include_dirs", [
    (["-I/x"], []), (["-I", "/x"], []), (["-I /x"], []), (["-I=/x"], []), (["--include-path=/x"], []),
    (["--include-path", "/x"], []), (["-isystem/x"], []), (["-isystem", "/x"], []), (["-iquote", "/x"], []),
    (["-idirafter/x"], []), (["--system-include=/x"], []), (["-w -I /x -DN=1"], []), (['-I"/x"'], []),
    ([], ["/x"]), (["--use-bundled-headers=/x"], []),
])
def test_every_spelling_of_an_include_directory(options: list[str], include_dirs: list[str]) -> None:
    """``-I`` in options and ``include_dirs`` alike, in every spelling a compiler takes."""
    assert "/x" in kc.include_search(options, include_dirs).dirs


def test_pre_included_files_are_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "pre.h").write_text('#include "more.h"\n')
    (tmp_path / "inc" / "more.h").write_text("#define M 1\n")
    for opts in (["-include", "pre.h", "-Iinc"], ["--pre-include=pre.h", "-Iinc"]):
        deps = kc.scan_dependencies(b"__kernel void k() {}", opts)
        assert deps is not None
        assert {Path(f[0]).name for f in deps["files"]} == {"pre.h", "more.h"}, deps


def _stat_ns(p: Path) -> tuple[int, int]:
    st = p.stat()
    return st.st_atime_ns, st.st_mtime_ns


def test_dependencies_are_what_the_compile_may_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """scan_dependencies follows includes transitively through every candidate directory (the includer's, the
    cwd, each search directory); dependencies_unchanged notices an edit (even one that keeps size and mtime), a
    removed file, and a new file that would shadow another; a touch or an unrelated file is no change."""
    work, one, two = tmp_path / "work", tmp_path / "one", tmp_path / "two"
    for d in (work, one, two, one / "sub"):
        d.mkdir()
    monkeypatch.chdir(work)
    (one / "top.h").write_text('#include "sub/mid.h"\n#if 0\n#include "never.h"\n#endif\n')
    (one / "sub" / "mid.h").write_text('#include "near.h"\n#include <far.h>\n')  # near.h: beside mid.h
    (one / "sub" / "near.h").write_text("#define NEAR 1\n")
    (two / "far.h").write_text("#define FAR 1\n")
    (two / "unrelated.h").write_text("")
    src = b'#include "top.h"\n__kernel void k() {}'
    deps = kc.scan_dependencies(src, ["-I", str(one)], [str(two)])
    assert deps is not None
    assert sorted(Path(f[0]).name for f in deps["files"]) == ["far.h", "mid.h", "near.h", "top.h"]
    assert str(one / "far.h") in deps["absent"]  # searched before two/far.h: must stay absent
    assert str(work / "never.h") in deps["absent"]  # in an #if 0: conservative, followed anyway
    assert kc.dependencies_unchanged(deps)
    os.utime(two / "far.h")  # a touch: rehashed, unchanged
    (two / "unrelated.h").write_text("#define X 1\n")
    assert kc.dependencies_unchanged(deps)

    def edited(path: Path, text: str) -> bool:
        before = path.read_text(), _stat_ns(path)
        path.write_text(text)
        os.utime(path, ns=before[1])  # the same size and mtime: only the content (and ctime) tell
        result = kc.dependencies_unchanged(deps)
        path.write_text(before[0])
        os.utime(path, ns=before[1])
        return result

    assert not edited(one / "sub" / "near.h", "#define NEAR 2\n")
    assert not edited(two / "far.h", "#define FAR 3\n")
    assert not edited(one / "top.h", (one / "top.h").read_text().replace("sub", "SUB"))
    assert kc.dependencies_unchanged(deps)
    (one / "far.h").write_text("#define FAR 9\n")  # now found first: shadows two/far.h
    assert not kc.dependencies_unchanged(deps)
    (one / "far.h").unlink()
    (work / "top.h").write_text("")  # the cwd comes before -I for "top.h"
    assert not kc.dependencies_unchanged(deps)
    (work / "top.h").unlink()
    (one / "sub" / "near.h").unlink()
    assert not kc.dependencies_unchanged(deps)
    assert not kc.dependencies_unchanged(None) and not kc.dependencies_unchanged({"files": 3})


def test_an_old_file_is_trusted_by_its_stat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file last changed well before the scan is not read at a hit: one stat per file."""
    monkeypatch.chdir(tmp_path)
    h = tmp_path / "old.h"
    h.write_text("#define OLD 1\n")
    os.utime(h, ns=(10**18, 10**18))  # mtime long ago (the ctime is now: stat-trusted only when both are old)
    deps = kc.scan_dependencies(b'#include "old.h"\n')
    assert deps is not None
    deps["at"] += 10 * 10**9  # as if scanned 10 s later
    opened: list[str] = []
    real_open = open

    def spy(path: Any, *a: Any, **k: Any) -> Any:
        opened.append(str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", spy)
    assert kc.dependencies_unchanged(deps) and opened == []


@pytest.mark.parametrize("text", ["#include MACRO_HEADER\n", "#  include\n", "#if __has_include(MACRO)\n#endif\n"])
def test_a_computed_include_is_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """What a computed #include reads cannot be known here: no dependencies (the backend does not cache it),
    also when the computed include is in a header."""
    monkeypatch.chdir(tmp_path)
    assert kc.scan_dependencies(text.encode()) is None
    (tmp_path / "h.h").write_text(text)
    assert kc.scan_dependencies(b'#include "h.h"\n') is None
    c = kc.KernelCache(tmp_path / "c")
    key = "ef" * 32
    assert c.put_entry(key, {}, b"old", {"at": 0, "files": [], "absent": []})
    assert not c.put_entry(key, {}, b"new", None) and c.get(key) is None  # the older entry is removed too


def test_the_key_and_the_scan_walk_no_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """include_dirs=['/usr'] used to be walked and stat'ed file by file at every load, hit or miss."""
    calls: list[str] = []

    def refuse(*a: Any, **k: Any) -> list[Any]:
        calls.append(str(a[:1]))
        return []

    for name in ("walk", "scandir", "listdir"):
        monkeypatch.setattr(os, name, refuse)
    monkeypatch.chdir(tmp_path)
    args = {**KEY_ARGS, "source": b'#include <stdio.h>\n', "include_dirs": ["/usr", "/usr/include"]}
    kc.cache_key(**args)
    kc.scan_dependencies(args["source"], args["options"], args["include_dirs"])
    assert calls == []


# ------------------------------------------------------------------------------------------------ entries


def test_put_get_roundtrip_and_miss(tmp_path: Path) -> None:
    c = kc.KernelCache(tmp_path / "c")
    key = kc.cache_key(**KEY_ARGS)
    assert c.get(key) is None and c.stats.misses == 1
    assert c.put(key, b"binary\0data")
    assert c.get(key) == b"binary\0data" and c.stats.hits == 1
    assert [p.name for p, _, _ in c.entries()] == [key + ".bin"]
    assert not [p for p in (tmp_path / "c").iterdir() if p.name.startswith(".tmp")]  # no temp file left
    with pytest.raises(ValueError):
        c.get("../../etc/passwd")


@pytest.mark.parametrize("damage", ["truncate", "flip", "magic", "empty", "extend"])
def test_a_damaged_entry_is_a_miss_and_is_deleted(tmp_path: Path, damage: str) -> None:
    c = kc.KernelCache(tmp_path)
    key = "ab" * 32
    payload = bytes(range(256)) * 8
    c.put(key, payload)
    p = c.path(key)
    data = bytearray(p.read_bytes())
    if damage == "truncate":
        data = data[:-100]
    elif damage == "flip":
        data[-1] ^= 0xFF
    elif damage == "magic":
        data[0] ^= 1
    elif damage == "empty":
        data = bytearray()
    else:
        data += b"x"
    p.write_bytes(bytes(data))
    assert c.get(key) is None
    assert c.stats.corrupt == 1 and not p.exists()
    c.put(key, payload)
    assert c.get(key) == payload


def test_eviction_removes_the_least_recently_used(tmp_path: Path) -> None:
    c = kc.KernelCache(tmp_path, max_bytes=10_000)
    keys = [f"{i:064x}" for i in range(5)]
    for i, k in enumerate(keys):
        assert c.put(k, bytes(3000))
        os.utime(c.path(k), ns=(10**18 + i * 10**9, 10**18 + i * 10**9))  # strictly ordered ages
    assert c.size() <= 10_000
    left = {p.name[:64] for p, _, _ in c.entries()}
    assert left == set(keys[-3:]), left  # 3 x (3000 + header) fit in 10000
    # a hit makes an entry the most recent: the next put evicts another
    assert c.get(keys[2]) is not None
    assert c.put(f"{9:064x}", bytes(3000))
    left = {p.name[:64] for p, _, _ in c.entries()}
    assert keys[2] in left and keys[3] not in left, left
    assert not c.put(f"{10:064x}", bytes(20_000))  # larger than the bound: not stored, nothing evicted for it
    assert c.stats.evicted == 3


def _writer(directory: str, key: str, seed: int, n: int) -> None:
    c = kc.KernelCache(directory)
    payload = bytes([seed]) * (200_000 + seed)
    for _ in range(n):
        assert c.put(key, payload)
        got = c.get(key)
        assert got is not None and len(set(got)) == 1 and len(got) == 200_000 + got[0], "a torn entry was read"


def test_concurrent_processes_writing_the_same_key(tmp_path: Path) -> None:
    key = "cd" * 32
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), key, seed, 20)) for seed in range(1, 7)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * len(procs)
    got = kc.KernelCache(tmp_path).get(key)
    assert got is not None and len(got) == 200_000 + got[0]  # one whole writer's entry
    assert [p.name for p in tmp_path.iterdir()] == [key + ".bin"]  # no temp files left behind


def test_location_and_switches(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("IRONACCEL_CACHE_DIR", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kc.default_directory() == tmp_path / "xdg" / "ironaccelerator"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert kc.default_directory() == Path.home() / ".cache" / "ironaccelerator"
    monkeypatch.setattr(sys, "platform", "darwin")
    assert kc.default_directory() == Path.home() / "Library" / "Caches" / "ironaccelerator"
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "local"))
    assert kc.default_directory() == tmp_path / "local" / "ironaccelerator" / "Cache"
    monkeypatch.setenv("IRONACCEL_CACHE_DIR", str(tmp_path / "mine"))
    assert kc.default_directory() == tmp_path / "mine"
    monkeypatch.setenv("IRONACCEL_CACHE_MAX_BYTES", "12345")
    c = kc.default_cache()
    assert c is not None and c.directory == tmp_path / "mine" and c.max_bytes == 12345
    monkeypatch.setenv("IRONACCEL_CACHE", "0")
    assert kc.default_cache() is None


def test_pack_unpack() -> None:
    data = kc.pack({"lowered": {"f<int>": "_Z1fIiEvv"}}, b"\x7fELF...")
    assert kc.unpack(data) == ({"lowered": {"f<int>": "_Z1fIiEvv"}}, b"\x7fELF...")
    assert kc.unpack(b"\xff\xff\xff\xff{}") is None and kc.unpack(b"") is None


# ------------------------------------------------------------------------------------------------ options


def test_compile_options_flags() -> None:
    o = compile_options(["-w"], {"N": 4, "FAST": None, "ON": True, "X": 1.5, "S": "a b"}, ["inc"], ["f<int>"])
    assert o.flags() == ["-w", "-DN=4", "-DFAST", "-DON=1", "-DX=1.5", "-DS=a b", f"-I{os.path.abspath('inc')}"]
    assert o.name_expressions == ("f<int>",) and bool(o) and not CompileOptions()


@pytest.mark.parametrize("kwargs,word", [
    ({"options": "-w"}, "options"), ({"options": [b"-w"]}, "options"), ({"options": [""]}, "empty"),
    ({"options": ["-D\0"]}, "NUL"), ({"options": None}, "options"), ({"defines": ["N"]}, "mapping"),
    ({"defines": {"1N": 1}}, "macro"), ({"defines": {"N": [1]}}, "N"), ({"defines": {"N": "a\nb"}}, "newline"),
    ({"defines": {3: 1}}, "macro"), ({"include_dirs": "inc"}, "include_dirs"), ({"include_dirs": [3]}, "include_dirs"),
    ({"include_dirs": [""]}, "path"), ({"name_expressions": "f"}, "name_expressions"),
    ({"name_expressions": [1]}, "name_expressions"),
])
def test_bad_option_types_are_invalid_value(kwargs: dict[str, Any], word: str) -> None:
    with pytest.raises(Error) as info:
        compile_options(**kwargs)
    assert info.value.kind is ErrorKind.INVALID_VALUE and word in str(info.value), str(info.value)


# ------------------------------------------------------------------------------------------------ OpenCL (PoCL)


def _opencl() -> Any:
    try:
        b = BackendRegistry.default().get(BackendKind.OPENCL)
        return b if b.devices() else None
    except Error:
        return None


needs_opencl = pytest.mark.skipif(_opencl() is None, reason="no OpenCL platform with a device (clinfo -l)")

SCALED = "__kernel void scaled(__global int *o) { int i = get_global_id(0); o[i] = SCALE * i + OFFSET; }"


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "kcache"
    monkeypatch.setenv("IRONACCEL_CACHE_DIR", str(d))
    monkeypatch.delenv("IRONACCEL_CACHE", raising=False)
    return d


@pytest.fixture
def cl_dev() -> Iterator[Any]:
    with BackendRegistry.default().get(BackendKind.OPENCL).open(0) as d:
        yield d


def _run_scaled(dev: Any, module: Any, n: int = 32) -> np.ndarray:
    s = dev.create_stream()
    a = dev.alloc(4 * n)
    s.launch(KernelLaunch(module.kernel("scaled"), LaunchDims(n), (a,)))
    out = np.zeros(n, np.int32)
    s.copy_to_host(out, a)
    s.synchronize()
    return out


@needs_opencl
def test_opencl_cold_then_warm_with_defines(cache_dir: Path, cl_dev: Any) -> None:
    defines = {"SCALE": 3, "OFFSET": 7}
    cold = cl_dev.load_module(SCALED, defines=defines)
    assert cold.from_cache is False
    assert len(list(cache_dir.glob("*.bin"))) == 1
    warm = cl_dev.load_module(SCALED, defines=defines)
    assert warm.from_cache is True
    want = 3 * np.arange(32, dtype=np.int32) + 7
    assert (_run_scaled(cl_dev, cold) == want).all() and (_run_scaled(cl_dev, warm) == want).all()
    assert warm.kernel("scaled")._slots == cold.kernel("scaled")._slots  # argument checks survive the binary
    # another define: another key, compiled, and the define reached the compiler
    other = cl_dev.load_module(SCALED, defines={"SCALE": 5, "OFFSET": 0})
    assert other.from_cache is False and (_run_scaled(cl_dev, other) == 5 * np.arange(32)).all()
    assert cl_dev.load_module(SCALED, defines=defines, cache=False).from_cache is False


@needs_opencl
def test_opencl_a_second_process_loads_from_the_cache(cache_dir: Path, cl_dev: Any) -> None:
    child = textwrap.dedent(f"""
        import json, sys
        import numpy as np
        import ironaccelerator as ia
        d = ia.BackendRegistry.default().get(ia.BackendKind.OPENCL).open(0)
        m = d.load_module({SCALED!r}, defines={{"SCALE": 2, "OFFSET": 1}}, options=["-cl-fast-relaxed-math"])
        s = d.create_stream(); a = d.alloc(64)
        s.launch(ia.KernelLaunch(m.kernel("scaled"), ia.LaunchDims(16), (a,)))
        out = np.zeros(16, np.int32); s.copy_to_host(out, a); s.synchronize()
        print(json.dumps([m.from_cache, out.tolist()]))
    """)
    env = {**os.environ, "IRONACCEL_CACHE_DIR": str(cache_dir)}
    runs = [subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=env, timeout=120)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    import json

    got = [json.loads(r.stdout.strip().splitlines()[-1]) for r in runs]
    want = (2 * np.arange(16) + 1).tolist()
    assert got == [[False, want], [True, want]]
    # and this process, another Device, finds the same entry
    m = cl_dev.load_module(SCALED, defines={"SCALE": 2, "OFFSET": 1}, options=["-cl-fast-relaxed-math"])
    assert m.from_cache is True and (_run_scaled(cl_dev, m, 16) == want).all()


@needs_opencl
def test_opencl_a_corrupt_entry_is_recompiled(cache_dir: Path, cl_dev: Any) -> None:
    defines = {"SCALE": 1, "OFFSET": 2}
    cl_dev.load_module(SCALED, defines=defines)
    (entry,) = cache_dir.glob("*.bin")
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0x55
    entry.write_bytes(bytes(data))
    m = cl_dev.load_module(SCALED, defines=defines)
    assert m.from_cache is False and (_run_scaled(cl_dev, m) == np.arange(32) + 2).all()
    assert cl_dev.load_module(SCALED, defines=defines).from_cache is True  # rewritten whole


@needs_opencl
def test_opencl_valid_entry_the_runtime_refuses_is_recompiled(cache_dir: Path, cl_dev: Any) -> None:
    """A well-formed entry whose payload is not a program binary (ex. another driver's): rebuilt from source."""
    defines = {"SCALE": 1, "OFFSET": 3}
    cl_dev.load_module(SCALED, defines=defines)
    (entry,) = cache_dir.glob("*.bin")
    kc.KernelCache(cache_dir).put(entry.name[:64], b"not a program binary")
    m = cl_dev.load_module(SCALED, defines=defines)
    assert m.from_cache is False and (_run_scaled(cl_dev, m) == np.arange(32) + 3).all()


@needs_opencl
def test_opencl_disabled_cache_writes_nothing(cache_dir: Path, cl_dev: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IRONACCEL_CACHE", "0")
    for _ in range(2):
        assert cl_dev.load_module(SCALED, defines={"SCALE": 1, "OFFSET": 0}).from_cache is False
    assert not cache_dir.exists() or not list(cache_dir.iterdir())


@needs_opencl
def test_opencl_include_dirs_reach_the_compiler(cache_dir: Path, cl_dev: Any, tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "scale.h").write_text("#define SCALE 4\n#define OFFSET 1\n")
    src = '#include "scale.h"\n' + SCALED
    m = cl_dev.load_module(src, include_dirs=[inc])
    assert (_run_scaled(cl_dev, m) == 4 * np.arange(32) + 1).all()
    (inc / "scale.h").write_text("#define SCALE 6\n#define OFFSET 1\n")  # an edited header: another key
    m = cl_dev.load_module(src, include_dirs=[inc])
    assert m.from_cache is False and (_run_scaled(cl_dev, m) == 6 * np.arange(32) + 1).all()


@needs_opencl
@pytest.mark.parametrize("spelling", ["-I<dir>", "-I <dir>", "-I,<dir>", "include_dirs"])
def test_opencl_an_edited_header_is_recompiled(cache_dir: Path, cl_dev: Any, tmp_path: Path, spelling: str) -> None:
    """Issue 23 item 7: a header found through -I in options (one option or two) or include_dirs, also one it
    includes in turn, edited (same size and mtime: only the content tells): the next load compiles afresh and runs
    the new code, then the one after is a hit again."""
    inc = tmp_path / "inc"
    (inc / "sub").mkdir(parents=True)
    (inc / "scale.h").write_text('#include "sub/offset.h"\n#define SCALE 4\n')
    offset = inc / "sub" / "offset.h"
    offset.write_text("#define OFFSET 1\n")
    src = '#include "scale.h"\n' + SCALED
    kw: dict[str, Any] = ({"include_dirs": [inc]} if spelling == "include_dirs" else
                          {"options": spelling.replace("<dir>", str(inc)).split(",")})
    m = cl_dev.load_module(src, **kw)
    assert m.from_cache is False and (_run_scaled(cl_dev, m) == 4 * np.arange(32) + 1).all()
    assert cl_dev.load_module(src, **kw).from_cache is True
    for path, old, new, want in [(inc / "scale.h", "SCALE 4", "SCALE 6", 6 * np.arange(32) + 1),
                                 (offset, "OFFSET 1", "OFFSET 7", 6 * np.arange(32) + 7)]:
        times = _stat_ns(path)
        path.write_text(path.read_text().replace(old, new))
        os.utime(path, ns=times)
        m = cl_dev.load_module(src, **kw)
        assert m.from_cache is False, f"{path.name} edited: the stale binary was loaded"
        assert (_run_scaled(cl_dev, m) == want).all()
        m = cl_dev.load_module(src, **kw)
        assert m.from_cache is True and (_run_scaled(cl_dev, m) == want).all()


@needs_opencl
def test_opencl_a_header_that_now_shadows_another_is_recompiled(cache_dir: Path, cl_dev: Any, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (second / "scale.h").write_text("#define SCALE 2\n#define OFFSET 0\n")
    src = '#include "scale.h"\n' + SCALED
    kw: dict[str, Any] = {"options": [f"-I{first}"], "include_dirs": [second]}
    assert (_run_scaled(cl_dev, cl_dev.load_module(src, **kw)) == 2 * np.arange(32)).all()
    (first / "scale.h").write_text("#define SCALE 3\n#define OFFSET 0\n")  # found first from now on
    m = cl_dev.load_module(src, **kw)
    assert m.from_cache is False and (_run_scaled(cl_dev, m) == 3 * np.arange(32)).all()


def _big_tree(root: Path, n: int = 3000) -> Path:
    for i in range(n):
        d = root / f"d{i % 30}" / f"e{i % 7}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.h").write_bytes(b"")
    return root


@pytest.fixture
def no_walk(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """os.walk/scandir/listdir spied on: the paths they were called with (the cache directory's own scandir, for
    eviction, is allowed)."""
    calls: list[str] = []
    for name in ("walk", "scandir", "listdir"):
        real = getattr(os, name)

        def spy(path: Any = ".", *a: Any, _real: Any = real, **k: Any) -> Any:
            calls.append(os.fspath(path) if not isinstance(path, int) else str(path))
            return _real(path, *a, **k)

        monkeypatch.setattr(os, name, spy)
    return calls


@needs_opencl
def test_opencl_a_load_walks_no_include_directory(cache_dir: Path, cl_dev: Any, tmp_path: Path,
                                                  no_walk: list[str]) -> None:
    """Issue 23 item 7: include_dirs were walked and stat'ed file by file at every load (hit or miss: 1.5-2.7 s
    with /usr).  Now neither the key nor the hit's check lists a directory: the hit stats the recorded headers."""
    big = _big_tree(tmp_path / "big")
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "scale.h").write_text("#define SCALE 5\n#define OFFSET 2\n")
    src = '#include "scale.h"\n' + SCALED
    kw: dict[str, Any] = {"include_dirs": [big, "/usr"], "options": [f"-I{inc}"]}
    no_walk.clear()
    m = cl_dev.load_module(src, **kw)
    assert m.from_cache is False and (_run_scaled(cl_dev, m) == 5 * np.arange(32) + 2).all()
    warm = cl_dev.load_module(src, **kw)
    assert warm.from_cache is True and (_run_scaled(cl_dev, warm) == 5 * np.arange(32) + 2).all()
    walked = [p for p in no_walk if not p.startswith(str(cache_dir))]
    assert walked == [], walked[:10]


@needs_opencl
def test_opencl_refused_option_is_compile_failed_with_the_log(cache_dir: Path, cl_dev: Any) -> None:
    with pytest.raises(Error) as info:
        cl_dev.load_module(SCALED, defines={"SCALE": 1, "OFFSET": 0}, options=["-no-such-option-here"])
    e = info.value
    assert e.kind is ErrorKind.COMPILE_FAILED and e.function == "clBuildProgram"
    assert "-no-such-option-here" in str(e) and "build log" in str(e)
    with pytest.raises(Error) as info:  # a missing define: the compiler's own diagnostic
        cl_dev.load_module(SCALED, defines={"SCALE": 1})
    assert info.value.kind is ErrorKind.COMPILE_FAILED and "OFFSET" in str(info.value)


@needs_opencl
def test_opencl_build_log_is_kept_with_the_cache_entry(cl_dev: Any) -> None:
    """Issue 24 item 7: PoCL's CL_PROGRAM_BUILD_LOG of a build that succeeded (a #warning) is Module.build_log and
    a CompilerWarning; the log is stored with the entry, so the warm load (a program binary: no compile, no log of
    its own) has the same build_log and warns the same, saying it came from the cache."""
    import uuid
    import warnings

    import ironaccelerator as ia

    # unique after preprocessing too: PoCL keys its own program cache on the preprocessed source and returns the
    # build log stored with it (a #warning alone, gone after preprocessing, would get an earlier build's log)
    tag = uuid.uuid4().int % 1_000_000_007
    src = f"#warning cache_log_{tag}\n__kernel void k(__global int *o) {{ o[0] = {tag}; }}\n"
    logs = []
    for cached in (False, True):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m = cl_dev.load_module(src)
        assert m.from_cache is cached
        (w,) = [w for w in caught if w.category is ia.CompilerWarning]
        assert f"cache_log_{tag}" in m.build_log and f"cache_log_{tag}" in str(w.message), (m.build_log, w.message)
        assert ("loaded from the kernel cache" in str(w.message)) is cached, str(w.message)
        logs.append(m.build_log)
    assert logs[0] == logs[1]


@needs_opencl
def test_opencl_bad_types_and_name_expressions(cl_dev: Any) -> None:
    for kwargs in ({"options": "-w"}, {"defines": {"N": object()}}, {"include_dirs": [b"x"]}):
        with pytest.raises(Error) as info:
            cl_dev.load_module(SCALED, **kwargs)
        assert info.value.kind is ErrorKind.INVALID_VALUE
    with pytest.raises(Error) as info:
        cl_dev.load_module(SCALED, name_expressions=["f<int>"])
    assert info.value.kind is ErrorKind.UNSUPPORTED
    m = cl_dev.load_module("__kernel void k(__global int *o) { o[0] = 1; }")  # positional, as before
    assert m.kernel("k").num_args == 1


# ------------------------------------------------------------------------------------------------ NVRTC (stub driver)


@pytest.fixture
def stub_kc(stub_cuda: tuple[Path, dict[str, str]], tmp_path: Path) -> Callable[..., int]:
    stub, env = stub_cuda
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "scale.h").write_text("#define SCALE 2\n")
    env = {**env, "KC_INCLUDE": str(inc), "IRONACCEL_CACHE_DIR": str(tmp_path / "kcache")}

    def run(*args: str) -> int:
        proc = subprocess.run([sys.executable, str(ROOT / "tests" / "kernel_cache_stub_child.py"), str(stub), *args],
                              capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.startswith("ok "), proc.stdout
        return int(proc.stdout.split()[1])

    return run


def test_nvrtc_options_defines_includes_and_name_expressions(stub_kc: Callable[..., int]) -> None:
    assert stub_kc("options") >= 14


def test_nvrtc_cache_cold_then_warm_across_processes(stub_kc: Callable[..., int]) -> None:
    assert stub_kc("cache", "cold") == 2
    assert stub_kc("cache", "warm") == 4


def test_nvrtc_warnings_reach_the_user_cold_and_warm(stub_kc: Callable[..., int]) -> None:
    """Issue 24 item 7 on NVRTC: nvrtcGetProgramLog after a compile that succeeded is Module.build_log and a
    CompilerWarning; the log is kept with the cache entry, so a warm load in another process warns too."""
    assert stub_kc("warnings", "cold") == 5
    assert stub_kc("warnings", "warm") == 5


def test_nvrtc_an_edited_header_is_recompiled_and_a_warm_load_walks_nothing(stub_kc: Callable[..., int]) -> None:
    """Issue 23 item 7 on NVRTC (backends/gpu/compile.py, shared with hipRTC): headers under -I (three spellings) and include_dirs."""
    assert stub_kc("deps") == 3 * 6 + 2


# ------------------------------------------------------------------------------------------------ no options


def test_qnn_and_metal_refuse_compile_options() -> None:
    """Checked before the device is touched, so an unopened object stands in for the device."""
    from ironaccelerator_runtime.backends.metal import MetalDevice
    from ironaccelerator_runtime.backends.qnn import QnnDevice

    for cls in (QnnDevice, MetalDevice):
        load = cast(Any, cls).load_module
        for kwargs in ({"options": ["-O2"]}, {"defines": {"N": 1}}, {"include_dirs": ["/x"]},
                       {"name_expressions": ["f"]}):
            with pytest.raises(Error) as info:
                load(object(), b"x", **kwargs)
            assert info.value.kind is ErrorKind.UNSUPPORTED, (cls, kwargs)
        with pytest.raises(Error) as info:
            load(object(), b"x", options="-O2")
        assert info.value.kind is ErrorKind.INVALID_VALUE


def test_hip_has_no_compiler_so_source_with_options_is_unsupported() -> None:
    """HIP shares the CUDA code; hiprtc is not bound, so compiling (with or without options) is UNSUPPORTED."""
    from ironaccelerator.backends.hip import _backend as hip
    from ironaccelerator_runtime.backends import gpu

    api = hip.HipBackend.vendor_api()
    with pytest.raises(Error) as info:
        gpu.compile_program(api, "__global__ void f() {}", "gfx90a", ["-DN=1"], name_expressions=["f"])
    assert info.value.kind is ErrorKind.UNSUPPORTED and "code object" in str(info.value)
