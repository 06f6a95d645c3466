"""Building the generated cffi modules: API mode (C compiler) and the pre-parsed ABI module."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from . import data


def library_dirs(out: Path) -> list[Path]:
    return sorted(p.parent for p in (out / "ironaccelerator" / "backends").glob("*/*/_cffi_build.py"))


RUNTIME_INCLUDE = data.RUNTIME_INCLUDE


def _load(path: Path):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(f"_ia_build_{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ffibuilders(lib_dir: Path, optimize: str | None = None) -> tuple[Any, Any]:
    """The cffi builders of a generated library, C or Objective-C: (API mode, ABI mode); ``optimize`` overrides the
    build description's optimisation flag (bench/bench_generate.py compares them).  The API module's C is
    trampolines.c (its tables and per-function or per-selector code) with types.cdef inlined, compiled against the
    runtime's include directory (ia_runtime.h, or ia_objc.h for an Objective-C library), from the generator's
    runtime (what build_key and the build id read), never by importing ironaccelerator_runtime; both modules carry
    the library's build id (``ia_build_id()``, ``BUILD_ID``)."""
    import cffi

    mod = _load(lib_dir / "_cffi_build.py")
    types = (lib_dir / "types.cdef").read_text(encoding="utf-8")
    source = (lib_dir / "trampolines.c").read_text(encoding="utf-8").replace('#include "types.cdef"', types)
    source += '\nconst char *ia_build_id(void) { return "' + mod.BUILD_ID + '"; }\n'
    api = cffi.FFI()
    api.cdef(types + (lib_dir / "api.cdef").read_text(encoding="utf-8") + "const char *ia_build_id(void);\n")
    # trampolines.c also holds the checked fast path, CPython METH_FASTCALL functions: not in the stable ABI that
    # cffi selects by default (Py_LIMITED_API), and the module is built per interpreter anyway
    api.set_source(mod.MODULE, source, libraries=["dl"] if sys.platform.startswith("linux") else [],
                   extra_compile_args=[optimize or mod.OPTIMIZE, "-w"] if os.name != "nt" else ["/O2"],
                   define_macros=[("_CFFI_NO_LIMITED_API", None)], include_dirs=[str(RUNTIME_INCLUDE)])
    abi = cffi.FFI()
    abi.cdef(types + (lib_dir / "abi.cdef").read_text(encoding="utf-8"))
    abi.set_source(mod.ABI_MODULE, None)
    return api, abi


STAMP = ".ironaccel-build"  # beside the built modules: the key of the inputs they were built from (not checked in)
_INPUTS = ("_cffi_build.py", "types.cdef", "api.cdef", "abi.cdef", "trampolines.c")


def _compiler_identity() -> list[str]:
    """What chooses the machine code besides the sources: the C compiler cffi will run (``CC`` or the interpreter's),
    its version line, the flags the environment adds, the interpreter's ABI and cffi's version."""
    import subprocess
    import sysconfig

    import cffi

    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    try:
        version = subprocess.run([*cc.split()[:1], "--version"], capture_output=True, text=True, timeout=30,
                                 check=False).stdout.splitlines()[:1]
    except (OSError, subprocess.SubprocessError) as exc:
        version = [f"unavailable: {exc.__class__.__name__}"]
    env = [f"{k}={os.environ.get(k, '')}" for k in ("CFLAGS", "CPPFLAGS", "LDFLAGS", "LDSHARED", "ARCHFLAGS")]
    return [cc, *version, *env, sys.version, str(sysconfig.get_config_var("SOABI")), cffi.__version__]


def build_key(lib_dir: Path, api: bool, identity: list[str]) -> str:
    """The digest of everything a build of ``lib_dir`` depends on: its generated inputs, the runtime's C headers
    (trampolines.c includes ia_runtime.h), the optimisation flag, API or ABI only, and the compiler identity."""
    h = hashlib.sha256()
    files = [lib_dir / n for n in _INPUTS] + sorted(RUNTIME_INCLUDE.glob("*.h"))
    for f in files:
        try:
            data = f.read_bytes()
        except FileNotFoundError:
            data = b"<missing>"
        h.update(f.name.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    for item in [f"api={api}", *identity]:
        h.update(item.encode() + b"\0")
    return h.hexdigest()


def up_to_date(lib_dir: Path, key: str) -> bool:
    """Whether ``lib_dir``'s modules were built from ``key`` and are still there."""
    try:
        lines = (lib_dir / STAMP).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return False
    if not lines or lines[0] != key:
        return False
    return all((lib_dir / name).is_file() for name in lines[1:]) and (lib_dir / "_cffi_abi.py").is_file()


def _remove_temporaries(lib_dir: Path) -> None:
    """The temporary files of a build that was killed before its rename (``write_atomic``'s ``<name>.<pid>.tmp``);
    not those of a build still running in another process."""
    for name in ("_cffi*.tmp", STAMP + "*.tmp"):
        for f in lib_dir.glob(name):
            pid = f.name.rsplit(".", 2)[-2] if f.name.count(".") >= 2 else ""
            if pid.isdigit() and int(pid) != os.getpid():
                try:
                    os.kill(int(pid), 0)
                except ProcessLookupError:
                    pass  # gone: its file is garbage
                except OSError:
                    continue  # alive (another user's): leave it
                else:
                    continue
            f.unlink(missing_ok=True)


class CompileFailed(Exception):
    """The C compile of a library's API module failed: the message, and the compiler's own output (its errors),
    which :func:`build_all` shows under the failure."""

    def __init__(self, message: str, output: str) -> None:
        super().__init__(message, output)
        self.output = output

    def __str__(self) -> str:
        return str(self.args[0])


@contextlib.contextmanager
def _captured_output() -> Iterator[list[str]]:
    """File descriptors 1 and 2 (what the compiler cffi runs writes) into a temporary file for the block; its text
    is appended to the yielded list afterwards.  Python-level prints (cffi's "generating ..." lines) go there too."""
    got: list[str] = []
    with tempfile.TemporaryFile() as f:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        saved = (os.dup(1), os.dup(2))
        try:
            os.dup2(f.fileno(), 1)
            os.dup2(f.fileno(), 2)
            with contextlib.redirect_stdout(io.StringIO()) as py_out, contextlib.redirect_stderr(py_out):
                try:
                    yield got
                finally:
                    text = py_out.getvalue()
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            f.seek(0)
            got.append(text + f.read().decode("utf-8", "replace"))


COMPILER_LINES = 30  # of a failed compile's output, what the report shows (-v: all)


def compiler_excerpt(output: str, limit: int | None = COMPILER_LINES) -> list[str]:
    """The lines of a compiler's output worth showing: cffi's own chatter dropped, at most ``limit`` (the first
    errors are the ones that matter; the count of the rest is said)."""
    lines = [line.rstrip() for line in output.splitlines()
             if line.strip() and not line.startswith(("generating ", "running ", "building ", "creating "))]
    if limit is not None and len(lines) > limit:
        return lines[:limit] + [f"[... {len(lines) - limit} more lines: `ironaccel-gen build -v` shows them all]"]
    return lines


def build_library(lib_dir: Path, api: bool = True, key: str | None = None,
                  compiler_output: list[str] | None = None) -> dict[str, float]:
    """Build ``lib_dir``'s ``_cffi_abi.py`` and (if ``api``) its compiled ``_cffi`` extension; with ``key``
    (:func:`build_key`), record it in the stamp once both are written, so that an unchanged library is skipped.

    Each output is made in a temporary directory and put in place by :func:`output.write_atomic` (a temporary
    file beside it, then a rename), the stamp last: an importer, or a process that has the old ``.so`` mapped,
    sees the old file or the new one whole, never a truncated ``.so`` (SIGBUS) or half a ``_cffi_abi.py``
    (SyntaxError), even if the build is killed or the disk fills."""
    from .output import write_atomic

    (lib_dir / STAMP).unlink(missing_ok=True)  # a build that fails half-way leaves no claim of being current
    _remove_temporaries(lib_dir)
    mod = _load(lib_dir / "_cffi_build.py")
    api_ffi, abi_ffi = ffibuilders(lib_dir)  # C and Objective-C libraries alike: one build description
    times = {}
    built: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ia-cffi-") as tmp:
        t = time.perf_counter()
        abi_py = Path(tmp) / "_cffi_abi.py"
        with contextlib.redirect_stdout(io.StringIO()):  # cffi's "generating ..." line: build_all reports instead
            abi_ffi.emit_python_code(str(abi_py))
        text = abi_py.read_bytes() + f"BUILD_ID = {mod.BUILD_ID!r}\n".encode()
        write_atomic(lib_dir / "_cffi_abi.py", text)
        times["abi"] = time.perf_counter() - t
        if api:
            t = time.perf_counter()
            with _captured_output() as output:
                try:
                    so = Path(api_ffi.compile(tmpdir=tmp, verbose=False))
                except Exception as exc:
                    failure: Exception | None = exc
                else:
                    failure = None
            if failure is not None:
                if "CompileError" in str(failure) or "LinkError" in str(failure):
                    raise CompileFailed(f"{failure.__class__.__name__}: the C compiler failed: {_short(failure)}",
                                        output[0]) from failure
                raise failure
            if compiler_output is not None:  # what the compiler said about a compile that succeeded (-v)
                compiler_output.append(output[0])
            write_atomic(lib_dir / so.name, so.read_bytes(), 0o777)  # rwx less the umask, as the linker made it
            for pattern in ("_cffi.*.so", "_cffi.*.pyd"):  # another interpreter's build, once the new one is there
                for old in lib_dir.glob(pattern):
                    if old.name != so.name:
                        old.unlink()
            built.append(so.name)
            times["api"] = time.perf_counter() - t
    if key is not None:
        write_atomic(lib_dir / STAMP, ("\n".join([key, *built]) + "\n").encode())
    return times


def _short(exc: BaseException) -> str:
    """cffi's CompileError without the compiler's whole command line (the output below says what went wrong)."""
    text = str(exc)
    m = re.search(r"Command '\[['\"]?([^'\",]+)['\"]?.*?\]' returned non-zero exit status (\d+)", text, re.S)
    return f"{m.group(1)} exited with status {m.group(2)}" if m else text


_STARTED: Any = None  # a worker's queue to the parent: the library it starts (set by _init_worker)


def _init_worker(queue: Any) -> None:
    global _STARTED
    _STARTED = queue


def _build_one(lib_dir: Path, api: bool, key: str) -> tuple[dict[str, float], str]:
    """A worker's job (a separate process: cffi's compile is not thread-safe, and it runs the compiler anyway):
    the times and the compiler's output."""
    if _STARTED is not None:
        _STARTED.put(str(lib_dir))
    output: list[str] = []
    with contextlib.redirect_stdout(io.StringIO()):  # cffi's "generating ..." lines: the parent reports instead
        return build_library(lib_dir, api, key, output), "".join(output)


def fast_path_counts(lib_dir: Path) -> tuple[int, int] | None:
    """(functions with a compiled checked fast path, bound functions) of a generated library, from its trampolines.c."""
    try:
        text = (lib_dir / "trampolines.c").read_text()
    except OSError:
        return None
    fast = re.search(r"^#define IA_FAST_COUNT (\d+)$", text, re.M)
    total = re.search(r"^#define IA_COUNT (\d+)$", text, re.M)
    return (int(fast.group(1)), int(total.group(1))) if fast and total else None


@dataclass
class BuildReport:
    """What :func:`build_all` did: ``built`` the modules (re)built; ``api_failed`` those whose C compile failed but
    whose ABI module was written (they import in ABI mode); ``failed`` those with no usable module at all (their
    import would fail: ``ironaccel-gen build`` exits 1)."""

    built: int = 0
    up_to_date: int = 0
    api_failed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def build_all(out: Path, api: bool = True, log=print, *, jobs: int | None = None,  # type: ignore[no-untyped-def]
              force: bool = False, verbosity: int = 1) -> BuildReport:
    """Build every generated library under ``out``: the ones whose inputs changed (:func:`build_key`; all with
    ``force``), ``jobs`` at a time (default: the CPU count), largest first.  ``log`` gets a line as each module
    starts and finishes (its times), a failure with the compiler's output, and the summary; ``verbosity`` 0
    keeps only failures and the summary, 2 adds the compiler's output of builds that succeed (and all of a
    failed one's)."""
    import concurrent.futures
    import multiprocessing

    t0 = time.perf_counter()
    started = time.time()
    dirs = library_dirs(out)
    identity = _compiler_identity()
    keys = {d: build_key(d, api, identity) for d in dirs}
    todo = [d for d in dirs if force or not up_to_date(d, keys[d])]
    todo.sort(key=lambda d: -(d / "trampolines.c").stat().st_size if (d / "trampolines.c").exists() else 0)
    result = BuildReport(up_to_date=len(dirs) - len(todo))

    def rel(d: Path) -> str:
        return d.relative_to(out).as_posix().replace("/", ".")

    number = {d: i for i, d in enumerate(todo, 1)}

    def start(d: Path) -> None:
        if verbosity:
            log(f"building {rel(d)} [{number[d]}/{len(todo)}]")

    def report(d: Path, times: dict[str, float] | None, exc: BaseException | None, output: str = "") -> None:
        compiler = getattr(exc, "output", None) if exc is not None else None
        if exc is not None:
            abi = d / "_cffi_abi.py"
            if abi.is_file() and abi.stat().st_mtime >= started - 1:  # a missing compiler: the ABI fallback works
                result.api_failed.append(rel(d))
                log(f"build {rel(d)}: API module not built ({exc.__class__.__name__}: {exc}); ABI mode will be used")
            else:  # nothing usable: its import would fail
                result.failed.append(rel(d))
                log(f"build {rel(d)}: FAILED, no module built ({exc.__class__.__name__}: {exc})")
            if isinstance(compiler, str):
                shown = compiler_excerpt(compiler, None if verbosity > 1 else COMPILER_LINES)
                log("  the compiler said:" if shown else "  the compiler printed nothing")
                for line in shown:
                    log(f"    {line}")
            return
        assert times is not None
        result.built += 1
        if not verbosity:
            return
        counts = fast_path_counts(d) if "api" in times else None
        fast = f"; checked fast path (C) for {counts[0]} of {counts[1]} functions" if counts else ""
        log(f"built {rel(d)}: " + ", ".join(f"{k} {v:.1f}s" for k, v in times.items()) + fast)
        if verbosity > 1:
            for line in compiler_excerpt(output, None):
                log(f"    {line}")

    n = max(1, min(jobs or os.cpu_count() or 1, len(todo)))
    if todo and verbosity:
        log(f"build: {len(todo)} module(s) to build, {len(dirs) - len(todo)} up to date, {n} job(s)")
    if n == 1:
        for d in todo:
            start(d)
            said: list[str] = []
            try:
                times = build_library(d, api, keys[d], said)
            except Exception as exc:
                report(d, None, exc)
            else:
                report(d, times, None, "".join(said))
    elif todo:
        ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        queue = ctx.SimpleQueue()  # the workers say which module they start
        with concurrent.futures.ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_init_worker,
                                                    initargs=(queue,)) as pool:
            futures = {pool.submit(_build_one, d, api, keys[d]): d for d in todo}
            pending = set(futures)
            while pending:
                done, pending = concurrent.futures.wait(pending, timeout=0.2,
                                                        return_when=concurrent.futures.FIRST_COMPLETED)
                while not queue.empty():
                    start(Path(queue.get()))
                for f in sorted(done, key=lambda f: number[futures[f]]):
                    failure = f.exception()
                    if failure is None:
                        done_times, done_output = f.result()
                        report(futures[f], done_times, None, done_output)
                    else:
                        report(futures[f], None, failure)
    problems = "".join(f", {len(x)} {what}" for x, what in ((result.api_failed, "in ABI mode only"),
                                                           (result.failed, "FAILED")) if x)
    log(f"build: {result.built} module(s) built{problems}, {result.up_to_date} up to date, {n} job(s), "
        f"{time.perf_counter() - t0:.2f}s")
    sys.stdout.flush()
    return result
