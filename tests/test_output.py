"""Writing the output (generator/output.py, issue 10 items 12 and 13).

- The switch from one generation to the next is all or nothing: a process killed at *every* file-system
  step of a switch (forked children, SIGKILL before the step) leaves either the old tree, the new one, or a
  committed journal that the next run finishes; and the CLI killed at random moments while it switches
  the golden package leaves a tree that imports as one generation, or refuses to import saying what to run.
- A damaged cache or output (nested JSON, a directory or FIFO as the cache, a generated file that is not
  UTF-8) never stops `generate`; files are written with the usual mode (0644 under umask 022).
- A built module older than the generated sources is refused at import, naming the command to run.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest
import yaml

from ironaccelerator_gen import output, pipeline
from ironaccelerator_gen.build import build_library

from conftest import LONG, ROOT, SPECS, core_text, within
from test_spec import run_cli, snapshot

GOLDEN = ROOT / "tests" / "headers" / "golden"  # golden.yaml, include/golden.h: the former monolithic golden case

# ----------------------------------------------------------- every step of a switch, killed

OLD = {
    "ironaccelerator/__init__.py": "old init\n",
    "ironaccelerator/_errors.py": "old errors\n",
    "ironaccelerator/py.typed": "",
    "ironaccelerator/backends/a/lib/__init__.py": "old a\n",
    "ironaccelerator/backends/a/lib/trampolines.c": "old c\n",
    "ironaccelerator/backends/gone/lib/__init__.py": "removed in the new generation\n",
}
NEW = {
    "ironaccelerator/__init__.py": "new init\n",
    "ironaccelerator/_errors.py": "new errors: \u00e9\n",  # not ASCII
    "ironaccelerator/py.typed": "",
    "ironaccelerator/backends/a/lib/__init__.py": "new a\n" * 1000,
    "ironaccelerator/backends/a/lib/trampolines.c": "old c\n",  # unchanged
    "ironaccelerator/backends/b/lib/__init__.py": "added in the new generation\n",
}
# build outputs and caches that generation does not own: never touched
FOREIGN = {
    "ironaccelerator/backends/a/lib/_cffi.cpython-311-x86_64-linux-gnu.so": b"\x7fELF built",
    "ironaccelerator/backends/a/lib/_cffi_abi.py": b"built abi\n",
    "ironaccelerator/__pycache__/_errors.cpython-311.pyc": b"bytecode",
}
GATED = ("write", "replace", "unlink", "fsync", "mkdir", "rmdir")  # the os calls a switch is made of


def owned(out: Path) -> dict[str, bytes]:
    return {rel: p.read_bytes() for rel, p in output.existing_files(out).items()}


def as_bytes(files: dict[str, str]) -> dict[str, bytes]:
    return {rel: text.encode("utf-8") for rel, text in files.items()}


def make_old_tree(out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    output.write(OLD, out)
    for rel, data in FOREIGN.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)


def foreign(out: Path) -> dict[str, bytes]:
    return {rel: (out / rel).read_bytes() for rel in FOREIGN if (out / rel).exists()}


def run_killed(step: int, action: Callable[[], object]) -> int:
    """Run ``action`` in a forked child that SIGKILLs itself before its ``step``-th gated os call (never, if
    the action makes fewer); returns the number of gated calls made (the exit status of a child not killed)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            calls = [0]

            def gate(fn: Callable[..., object]) -> Callable[..., object]:
                def gated(*args: object, **kwargs: object) -> object:
                    if calls[0] == step:
                        os.kill(os.getpid(), signal.SIGKILL)
                    calls[0] += 1
                    return fn(*args, **kwargs)
                return gated

            for name in GATED:
                setattr(os, name, gate(getattr(os, name)))
            action()
            code = min(calls[0], 250)
        except BaseException:
            code = 251
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        assert os.WTERMSIG(status) == signal.SIGKILL
        return -1
    code = os.WEXITSTATUS(status)
    assert code != 251, "the action raised"
    return code


def test_a_switch_killed_at_every_step_is_never_mixed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    make_old_tree(out)
    steps = run_killed(10**6, lambda: output.write(NEW, out))
    assert 20 < steps < 250, steps  # the switch was counted: every step below is a real kill point
    assert owned(out) == as_bytes(NEW)
    seen = {"old": 0, "new": 0, "journal": 0}
    for step in range(steps + 1):
        make_old_tree(out)
        killed = run_killed(step, lambda: output.write(NEW, out))
        assert killed == -1 or step == steps
        assert foreign(out) == FOREIGN
        if output.pending(out):
            seen["journal"] += 1
            if step % 3 == 0:  # recovery itself killed at each of its steps, then run again, still finishes
                backup = tmp_path / "pending"
                shutil.rmtree(backup, ignore_errors=True)
                shutil.copytree(out, backup)
                n = run_killed(10**6, lambda: output.recover(out))
                assert n > 3 and owned(out) == as_bytes(NEW)
                for rstep in range(n):
                    shutil.rmtree(out)
                    shutil.copytree(backup, out)
                    assert run_killed(rstep, lambda: output.recover(out)) == -1
                    output.recover(out)
                    assert owned(out) == as_bytes(NEW), f"step {step}, recovery killed at {rstep}"
            else:
                assert output.recover(out) is True
        else:
            state = owned(out)
            assert state in (as_bytes(OLD), as_bytes(NEW)), f"step {step}: a mixed tree without a journal"
            seen["old" if state == as_bytes(OLD) else "new"] += 1
            output.write(NEW, out)
        assert owned(out) == as_bytes(NEW), f"step {step}"
        assert foreign(out) == FOREIGN
        assert sorted(p.name for p in out.iterdir()) == ["ironaccelerator"], f"step {step}: state left behind"
    assert min(seen.values()) > 0, seen  # kills landed before, during and after the commit point


def test_files_have_the_usual_mode(tmp_path: Path) -> None:
    """They were 0600 (mkstemp's mode); now 0666 less the umask: 0644 as usual, and the umask respected."""
    for umask, want in ((0o022, 0o644), (0o077, 0o600)):
        old = os.umask(umask)
        try:
            output.write(NEW, tmp_path / oct(umask))
        finally:
            os.umask(old)
        modes = {stat.S_IMODE(p.stat().st_mode) for p in output.existing_files(tmp_path / oct(umask)).values()}
        assert modes == {want}, [oct(m) for m in modes]


def test_a_damaged_journal_is_a_clear_error(tmp_path: Path) -> None:
    out = tmp_path / "out"
    make_old_tree(out)
    (out / output.JOURNAL).write_text('{"format": 1, "replace": [["../../etc/passwd", "x"]], "remove": []}')
    with pytest.raises(output.OutputError, match="outside the output directory"):
        output.recover(out)
    (out / output.JOURNAL).write_bytes(b"\xff" * 10)
    with pytest.raises(output.OutputError, match=r"cannot be read.*remove"):
        output.write(NEW, out)
    assert owned(out) == as_bytes(OLD)


# ----------------------------------------------------------- the CLI on the golden package


def golden_specs(root: Path, variant: str) -> tuple[Path, list[str]]:
    """A spec directory for the golden case: ``old``, or ``new`` with a new ErrorKind (so a mixed tree fails
    to import, as the issue saw) and a function less in the library (its files change too)."""
    spec_dir = root / f"specs-{variant}"
    spec_dir.mkdir(parents=True, exist_ok=True)
    core = core_text()
    lib = (GOLDEN / "golden.yaml").read_text(encoding="utf-8")
    if variant == "new":
        core = core.replace("\nerror_kinds:\n", "\nerror_kinds:\n  AARDVARK: {value: 100, doc: A kind only the new one has.}\n")
        lib = lib.replace('include: ["golden*"]', 'include: ["golden*"]\n  exclude: [goldenSum]')
        assert "AARDVARK" in core and "goldenSum" in lib
    (spec_dir / "core.yaml").write_text(core, encoding="utf-8")
    (spec_dir / "golden.yaml").write_text(lib, encoding="utf-8")
    return spec_dir, ["--sdk", f"golden={GOLDEN / 'include'}"]


IMPORT = ("import ironaccelerator as ia\nfrom ironaccelerator.backends.test import golden\n"
          "print('imported', hasattr(ia.ErrorKind, 'AARDVARK'), hasattr(golden, 'goldenSum'))\n")


def import_tree(out: Path, code: str = IMPORT) -> subprocess.CompletedProcess[str]:
    """Import the package generated in ``out`` (ahead of the checkout's, which the venv's .pth adds)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(out)}, cwd=out)


def tree_state(out: Path) -> set[tuple[str, int, int]]:
    """Every entry under ``out`` with its size and mtime: any write changes it."""
    found = set()
    for root, dirs, files in os.walk(out):
        for name in dirs + files:
            try:
                st = os.lstat(os.path.join(root, name))
            except FileNotFoundError:
                continue
            found.add((os.path.join(root, name), st.st_size, st.st_mtime_ns))
    return found


def test_generate_killed_at_random_moments_leaves_one_generation_or_says_what_to_run(tmp_path: Path) -> None:
    """Issue 10 item 12: 25 kills (IA_SLOW=1; 6 by default) of `generate` while it switches between two
    generations; each kill lands a random time (0-30 ms) after the output tree began to change."""
    specs = {v: golden_specs(tmp_path, v) for v in ("old", "new")}
    want = {v: as_bytes(pipeline.compile_specs(d, {"golden": str(GOLDEN / "include")}, base=tmp_path).files)
            for v, (d, _) in specs.items()}
    out = tmp_path / "out"
    proc = run_cli(specs["old"][0], out, *specs["old"][1])
    assert proc.returncode == 0, proc.stderr
    rng = random.Random(int(os.environ.get("IA_SEED", "12")))
    landed = {"before": 0, "during": 0, "after": 0}
    current = "old"
    for trial in range(25 if LONG else 6):
        target = "new" if current == "old" else "old"
        spec_dir, extra = specs[target]
        child = subprocess.Popen([sys.executable, "-m", "ironaccelerator_gen", "generate", "--specs", str(spec_dir),
                                  "--out", str(out), *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 cwd=tmp_path)
        before = tree_state(out)
        with within(120, f"trial {trial}"):
            while child.poll() is None and tree_state(out) == before:  # until it starts to write
                time.sleep(0.0005)
            time.sleep(rng.uniform(0, 0.03))
            child.send_signal(signal.SIGKILL)
            child.wait()
        assert child.stderr is not None
        child.stderr.close()
        imported = import_tree(out)
        if output.pending(out):
            landed["during"] += 1
            assert imported.returncode != 0 and "half-switched" in imported.stderr \
                and "make generate" in imported.stderr, imported.stderr
            proc = run_cli(spec_dir, out, "--check", *extra)
            assert proc.returncode == 1 and "half-switched" in proc.stdout, proc.stdout + proc.stderr
        else:
            state = owned(out)
            assert state in (want["old"], want["new"]), f"trial {trial}: a mixed tree without a journal"
            landed["before" if state == want[current] else "after"] += 1
            assert imported.returncode == 0, imported.stderr
            assert imported.stdout.split() == ["imported", *(["True", "False"] if state == want["new"]
                                                             else ["False", "True"])]
        proc = run_cli(spec_dir, out, *extra)  # the next run finishes (or redoes) the switch
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        assert owned(out) == want[target]
        assert import_tree(out).returncode == 0
        current = target
    print("kills landed", landed)


# ----------------------------------------------------------- the cache and damaged outputs


@pytest.fixture
def golden_out(tmp_path: Path) -> tuple[Path, list[str], Path]:
    spec_dir, extra = golden_specs(tmp_path, "old")
    out = tmp_path / "out"
    proc = run_cli(spec_dir, out, *extra)
    assert proc.returncode == 0, proc.stderr
    return spec_dir, extra, out


def test_a_deeply_nested_cache_is_stale_not_a_crash(golden_out: tuple[Path, list[str], Path]) -> None:
    spec_dir, extra, out = golden_out
    (out / ".ironaccel-gen.json").write_text("[" * 100_000 + "]" * 100_000)
    proc = run_cli(spec_dir, out, *extra)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "up to date" not in proc.stdout  # a cache that cannot be read is stale
    assert run_cli(spec_dir, out, *extra).stdout.startswith("generate: up to date")  # and saved again


def test_a_fifo_as_the_cache_does_not_block(golden_out: tuple[Path, list[str], Path]) -> None:
    spec_dir, extra, out = golden_out
    (out / ".ironaccel-gen.json").unlink()
    os.mkfifo(out / ".ironaccel-gen.json")
    before = snapshot(out)
    proc = run_cli(spec_dir, out, *extra)  # run_cli's timeout catches a hang
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert ".ironaccel-gen.json: not a regular file" in proc.stderr
    assert snapshot(out) == before


def test_a_directory_as_the_cache_is_refused_before_anything_is_written(
        golden_out: tuple[Path, list[str], Path], tmp_path: Path) -> None:
    """It was: output written, then IsADirectoryError, exit 1, and a temporary file left."""
    _, extra, out = golden_out
    (out / ".ironaccel-gen.json").unlink()
    (out / ".ironaccel-gen.json").mkdir()
    spec_dir, extra = golden_specs(tmp_path, "new")
    before = snapshot(out)
    proc = run_cli(spec_dir, out, *extra)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{out / '.ironaccel-gen.json'}: not a regular file" in proc.stderr
    assert snapshot(out) == before and sorted(p.name for p in out.iterdir()) == [".ironaccel-gen.json",
                                                                                  "ironaccelerator"]


def test_a_generated_file_that_is_not_utf8_is_repaired(golden_out: tuple[Path, list[str], Path]) -> None:
    """It was: every later generate, even --force, crashed decoding it, so the tree could not repair itself."""
    spec_dir, extra, out = golden_out
    target = out / "ironaccelerator" / "_core.py"
    good = target.read_bytes()
    target.write_bytes(good + b"\xff\xfe garbage")
    proc = run_cli(spec_dir, out, "--check", *extra)
    assert proc.returncode == 1 and "M ironaccelerator/_core.py" in proc.stdout, proc.stdout + proc.stderr
    proc = run_cli(spec_dir, out, *extra)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert target.read_bytes() == good


def test_a_damaged_journal_through_the_cli(golden_out: tuple[Path, list[str], Path]) -> None:
    spec_dir, extra, out = golden_out
    (out / output.JOURNAL).write_text("{")
    proc = run_cli(spec_dir, out, *extra)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{out / output.JOURNAL}: an interrupted generation left a journal that cannot be read" in proc.stderr


# ----------------------------------------------------------- a stale build


def test_a_build_older_than_the_generated_sources_is_refused_at_import(tmp_path: Path) -> None:
    """Item 13: `generate` that changes a library, not followed by `build`, left a package whose import failed
    with cffi's "has no function named ..."; now the import says what ran out of order and what to run."""
    old, extra = golden_specs(tmp_path, "old")
    new, _ = golden_specs(tmp_path, "new")
    out = tmp_path / "out"
    assert run_cli(new, out, *extra).returncode == 0
    lib_dir = out / "ironaccelerator" / "backends" / "test" / "golden"
    build_library(lib_dir, api=True)
    assert import_tree(out).returncode == 0
    assert run_cli(old, out, *extra).returncode == 0  # the library gains goldenSum; its build does not
    r = import_tree(out)
    assert r.returncode != 0 and "ImportError" in r.stderr and "was built from other generated sources" in r.stderr \
        and "ironaccelerator_gen build" in r.stderr and "_cffi." in r.stderr, r.stderr
    for so in lib_dir.glob("_cffi.*.so"):  # the ABI module is checked the same way
        so.unlink()
    r = import_tree(out)
    assert r.returncode != 0 and "_cffi_abi.py was built from other generated sources" in r.stderr, r.stderr
    build_library(lib_dir, api=True)
    r = import_tree(out)
    assert r.returncode == 0 and r.stdout.split() == ["imported", "False", "True"], r.stderr
    mode = import_tree(out, "from ironaccelerator.backends.test import golden; print(golden.BINDING_MODE)")
    assert mode.stdout.strip() == "api", mode.stderr


def test_the_runtime_header_is_part_of_the_build_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """trampolines.c includes the hand-written ia_runtime.h: a build made before it changed is stale too."""
    from ironaccelerator_gen import render

    spec_dir, _ = golden_specs(tmp_path, "old")

    def build_id() -> str:
        files = pipeline.compile_specs(spec_dir, {"golden": str(GOLDEN / "include")}, base=tmp_path).files
        binding = files["ironaccelerator/backends/test/golden/_binding.py"]
        ids = [line for line in binding.splitlines() if line.startswith("BUILD_ID = ")]
        assert len(ids) == 1
        value = ids[0].split(" = ")[1].strip("'")
        assert f'BUILD_ID = "{value}"' in files["ironaccelerator/backends/test/golden/_cffi_build.py"]
        return str(ids[0])

    before = build_id()
    header = tmp_path / "ia_runtime.h"
    header.write_text(render.RUNTIME_HEADER.read_text(encoding="utf-8") + "/* changed */\n", encoding="utf-8")
    monkeypatch.setattr(render, "RUNTIME_HEADER", header)
    assert build_id() != before


def test_every_header_the_runtime_header_includes_is_part_of_the_build_id(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime headers that ia_runtime.h and ia_objc.h include (ia_pool_cache.h, ia_host_memory.h, and what
    those include: ia_memory_common.h) are build inputs as much as they are: each is counted in the build id."""
    import re

    from ironaccelerator_gen import render

    def included(header: Path, seen: set[str]) -> set[str]:
        for name in re.findall(r'^#include "(ia_[a-z_]+\.h)"', header.read_text(encoding="utf-8"), re.MULTILINE):
            if name not in seen:
                seen.add(name)
                included(header.with_name(name), seen)
        return seen

    wanted = included(render.RUNTIME_HEADER, set()) | included(render.OBJC_HEADER, set())
    assert {"ia_pool_cache.h", "ia_host_memory.h", "ia_handle_memory.h", "ia_memory_common.h", "ia_gc.h",
            "ia_prepared_launch.h"} <= wanted
    counted: list[set[str]] = []
    real = render.build_id

    def build_id(sources: dict[str, str]) -> str:
        counted.append(set(sources))
        return str(real(sources))

    monkeypatch.setattr(render, "build_id", build_id)
    spec_dir, _ = golden_specs(tmp_path, "old")
    pipeline.compile_specs(spec_dir, {"golden": str(GOLDEN / "include")}, base=tmp_path)
    assert counted and all(wanted <= names for names in counted), (wanted, counted)


def test_a_renamed_library_leaves_nothing_of_its_old_name(golden_out: tuple[Path, list[str], Path]) -> None:
    """Renaming a library (or removing its spec) removes its old directory: the generated files, and the build
    outputs and caches beside them; a file generation does not own keeps its directory (issue 15 item 3)."""
    spec_dir, extra, out = golden_out
    old = out / "ironaccelerator" / "backends" / "test" / "golden"
    assert (old / "_binding.py").is_file()
    for name in ("_cffi.cpython-311-x86_64-linux-gnu.so", "_cffi_abi.py", ".ironaccel-build"):
        (old / name).write_text("a build output\n")
    (old / "__pycache__").mkdir()
    (old / "__pycache__" / "_binding.cpython-311.pyc").write_bytes(b"\0")
    lib = spec_dir / "golden.yaml"
    lib.write_text(lib.read_text(encoding="utf-8").replace("library: golden", "library: golden2"), encoding="utf-8")
    proc = run_cli(spec_dir, out, *extra)
    assert proc.returncode == 0, proc.stderr
    assert "removed ironaccelerator/backends/test/golden/: no spec generates it any more" in proc.stdout
    assert not old.exists() and (out / "ironaccelerator" / "backends" / "test" / "golden2" / "_binding.py").is_file()
    # a file of the user's in a directory no spec generates any more is left, and so is its directory
    lib.write_text(lib.read_text(encoding="utf-8").replace("library: golden2", "library: golden3"), encoding="utf-8")
    mine = out / "ironaccelerator" / "backends" / "test" / "golden2" / "notes.txt"
    mine.write_text("mine\n")
    proc = run_cli(spec_dir, out, *extra)
    assert proc.returncode == 0, proc.stderr
    assert mine.read_text() == "mine\n" and not (mine.parent / "_binding.py").exists()
    assert "golden2/: no spec" not in proc.stdout
