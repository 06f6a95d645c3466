"""Bounded, seeded fuzzing of every generator input: core, library and backend specs, and headers.

Each case copies a working spec set (the golden and parameter test libraries over small headers; the real
OpenCL, CUDA and HIP spec sets over this machine's SDK headers), damages one input (a text edit, random
bytes, a truncation, a YAML-tree edit: a key deleted or renamed, a value of another type or nesting, a name
moved to another place; a C fragment in a header; a directory, FIFO or symlink loop in a spec's place, a
spec duplicated) and runs the compiler in process.  The outcome must be either

* a :class:`UserError` whose every diagnostic is located (``file:line:col``, one line), or
* success with a package that is whole: nothing skipped, one module per library, and every generated
  Python file compiles and uses no name it does not define (``X = inf``, a wrapper passing an argument it
  does not have) and no wrapper calls itself;

never another exception, a hang or a broken package.  A subset runs through the CLI in a subprocess:
exit 0 or 2, no traceback, the same outcome as in process.

The default run is a few hundred cases; the long form (``IA_SLOW=1``) runs ten times as many, with other seeds.  Parsed
headers and the Jinja environment are cached across cases (keyed by the header bytes), so that a case
costs what its own damage costs.
"""

from __future__ import annotations

import builtins
import functools
import os
import random
import re
import shutil
import subprocess
import symtable
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml

from ironaccelerator_gen import pipeline, sdk
from ironaccelerator_gen import spec as spec_module
from ironaccelerator_gen import surface as surface_module
from ironaccelerator_gen.diagnostics import UserError
from ironaccelerator_gen.frontend import ParseRequest
from ironaccelerator_gen.ir import Header

from conftest import core_text, long_form, within
from test_bind import PARAMS_SPEC, POOL_SPEC

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SPECS = ROOT / "specs"
HEADERS = HERE / "headers"
GOLDEN = HERE / "headers" / "golden"  # golden.yaml, include/golden.h: the former monolithic golden case
LOCATED = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+):(?P<col>\d+): (?P<message>.+)$")
CASE_SECONDS = 60  # one case taking longer than this is a hang


# ----------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """A working spec set: files (case-relative path -> text), ``--sdk`` kinds, the files a case damages."""

    name: str
    files: dict[str, bytes]
    sdk: dict[str, str]  # kind -> include directory, relative to the case directory
    mutable: tuple[str, ...]


def _spec_tree(vendor: str) -> dict[str, bytes]:
    out = {"specs/core.yaml": (SPECS / "core.yaml").read_bytes()}
    for p in sorted((SPECS / vendor).glob("*.yaml")):
        out[f"specs/{vendor}/{p.name}"] = p.read_bytes()
    return out


def _targets() -> dict[str, Target]:
    test_files = {
        "specs/core.yaml": core_text().encode(),
        "specs/test/golden.yaml": (GOLDEN / "golden.yaml").read_bytes(),
        "specs/test/params.yaml": PARAMS_SPEC.encode(),
        "specs/test/pool.yaml": POOL_SPEC.replace("ALLOC", "poolAlloc").replace("FREE", "poolFree").encode(),
        "include/golden.h": (GOLDEN / "include" / "golden.h").read_bytes(),
        "include/params.h": (HEADERS / "params.h").read_bytes(),
        "include/pool.h": (HEADERS / "pool.h").read_bytes(),
    }
    targets = {"test": Target(name="test", files=test_files, sdk={"golden": "include", "test": "include"},
                              mutable=tuple(sorted(test_files)))}
    for vendor, kind in (("opencl", "opencl"), ("cuda", "cuda"), ("hip", "hip")):
        if sdk.find(kind) is None or (vendor == "cuda" and sdk.find("nvrtc") is None):
            continue
        files = _spec_tree(vendor)
        targets[vendor] = Target(name=vendor, files=files, sdk={}, mutable=tuple(sorted(files)))
    return targets


TARGETS = _targets()
# cases per target in the default run (the full sets cost more per case than the test libraries)
COUNTS = {"test": 220, "opencl": 30, "cuda": 12, "hip": 12}


# -------------------------------------------------------------------- mutations

YAML_FRAGMENTS = [":", "- ", "[", "]", "{", "}", "&a ", "*a", "!!str ", "!!python/object:os.system ", "\t", "'",
                  '"', "#", "? ", "|\n", ">", "---\n", "...\n", "%YAML 1.1\n", "\\", "\x00", "\ufeff", "  ", "\n  - x\n",
                  "\n  x: y\n", ": :", "null", "~", "0x1F", "1e999", "-.inf", ".nan", "yes", "<<: *a\n", "\u2028"]
C_FRAGMENTS = [
    "#define FZ_INF 1e999", "#define FZ_NAN (1e999 - 1e999)", "#define FZ_LATIN \"caf\xe9\"",
    "#define FZ_DIGITS " + "9" * 5000, "#define FZ_HEX 0x" + "F" * 40, "#define FZ_SHIFT (1 << 100000000000)",
    "#define FZ_NEG (-9223372036854775807 - 1)", "#define FZ_STR \"a\" \"b\"", "#define FZ_SELF FZ_SELF",
    "#define FZ_FN(x) (x)", "#define FZ_PAREN " + "(" * 300 + "1" + ")" * 300, "#define FZ_CHAR '\\x41'",
    "#define FZ_BAD \"unterminated", "#define mInit mInit", "#define FZ_DIV (1 / 0)", "#undef GOLDEN_VERSION",
    "#error fuzz", "#include \"fz_missing.h\"", "enum { FZ_BIG = 1u << 31, FZ_WIDE = 0x7FFFFFFFFFFFFFFF };",
    "enum fz_e { FZ_A = -1, FZ_B = FZ_A + 2 };", "typedef struct fz_s fzS;", "typedef struct fz_s { int x; } fzT;",
    "struct fz_anon { struct { int a; } inner; union { int b; float c; } u; };",
    "int fzPointers(int " + "*" * 200 + "p);", "int fzArray(int a[4][4]);", "int fzVariadic(int n, ...);",
    "typedef int (*fzCallback)(void *user, const char *name);", "int fzCall(fzCallback cb, void *user);",
    "void fzVoid(void);", "const char *fzName(int code);", "int fzKeyword(int lambda, int from, int None);",
    "int __fz_private(int x);", "int fzDup(int a, int a);", "typedef int fzT;", "int", ";", "}", "{",
    "static inline int fzInline(int x) { return x; }", "extern int fzData;", "__attribute__((deprecated)) int fzOld(void);",
    "\x00", "\xff\xfe",
]
OTHER_VALUES: list[object] = [None, True, False, 0, -1, 2**70, 1.5, float("inf"), "", "x", "CUDA", "*", "{}_ptds",
                              [], {}, ["x"], {"x": 1}, [[1]], {"a": {"b": None}}]


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True) or [b""]


def text_mutation(rng: random.Random, data: bytes, header: bool) -> bytes:
    """One random edit of the file's bytes."""
    lines = _lines(data)
    i = rng.randrange(len(lines))
    op = rng.randrange(9)
    if op == 0:
        del lines[i]
    elif op == 1:
        lines.insert(i, lines[i])
    elif op == 2:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif op in (3, 4):
        frag = rng.choice(C_FRAGMENTS if header else YAML_FRAGMENTS)
        if header:
            lines.insert(i, frag.encode("utf-8", "surrogateescape").replace(b"\xc3\xa9", b"\xe9") + b"\n")
        else:
            at = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:at] + frag.encode() + lines[i][at:]
    elif op == 5:
        return data[:rng.randrange(len(data) + 1)]
    elif op == 6:
        at = rng.randrange(len(data) + 1)
        return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8))) + data[at + 1:]
    elif op == 7:
        lines[i] = lines[i][2:] if lines[i].startswith(b"  ") and rng.random() < 0.5 else b"  " + lines[i]
    else:
        return b"" if rng.random() < 0.5 else b"# nothing\n"
    return b"".join(lines)


def _paths(tree: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    yield path, tree
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _paths(v, path + (k,))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _paths(v, path + (i,))


def _set(tree: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    node = tree
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return tree


def tree_mutation(rng: random.Random, data: bytes) -> bytes:
    """One random edit of the YAML tree: a key deleted or renamed, a value of another type or nesting, a
    scalar replaced by another scalar of the same spec (a function name where another is expected ...)."""
    tree = yaml.safe_load(data.decode("utf-8"))
    paths = list(_paths(tree))
    scalars = [v for _, v in paths if isinstance(v, (str, int, float, bool)) and v is not None]
    keys = [k for p, _ in paths for k in p[-1:] if isinstance(k, str)]
    path, value = rng.choice(paths)
    op = rng.randrange(7)
    parent = functools.reduce(lambda n, k: n[k], path[:-1], tree) if path else None
    if op == 0 and isinstance(parent, dict):
        del parent[path[-1]]
    elif op == 1 and isinstance(parent, dict) and keys:
        new = rng.choice(keys) if rng.random() < 0.7 else path[-1][:-1] + "x"
        parent[new] = parent.pop(path[-1])
    elif op == 2:
        tree = _set(tree, path, rng.choice(OTHER_VALUES))
    elif op == 3:
        tree = _set(tree, path, [value] if rng.random() < 0.5 else {"x": value})
    elif op == 4 and scalars:
        tree = _set(tree, path, rng.choice(scalars))
    elif op == 5 and isinstance(value, list):
        tree = _set(tree, path, (value or ["x"]) * rng.randrange(100, 2000))
    elif op == 6 and isinstance(parent, (dict, list)) and path:
        sibling = rng.choice(paths)[1]
        tree = _set(tree, path, sibling if not isinstance(sibling, (dict, list)) else yaml.safe_load(yaml.safe_dump(sibling)))
    else:
        tree = _set(tree, path, None)
    text: str = yaml.safe_dump(tree, allow_unicode=True, default_flow_style=None, sort_keys=False)
    return text.encode("utf-8")


# what a file-level mutation does to the file: these are set up on disk (not bytes)
FILE_KINDS = ("directory", "symlink loop", "fifo", "duplicate", "remove")


@dataclass(frozen=True)
class Case:
    target: str
    index: int
    seed: str
    file: str
    how: str  # text | tree | header | one of FILE_KINDS
    frontend: str

    def __str__(self) -> str:
        return f"{self.target}#{self.index} ({self.how} on {self.file}, {self.frontend}, seed {self.seed!r})"


def make_case(target: Target, index: int, salt: str) -> tuple[Case, dict[str, bytes | str]]:
    """The case's files: bytes, or a FILE_KINDS word for a file set up specially."""
    seed = f"{salt}:{target.name}:{index}"
    rng = random.Random(seed)
    file = rng.choice(target.mutable)
    header = file.endswith(".h")
    r = rng.random()
    if r < 0.04 and not header:
        how = rng.choice(FILE_KINDS)
    elif header:
        how = "header"
    elif r < 0.55:
        how = "text"
    else:
        how = "tree"
    files: dict[str, bytes | str] = dict(target.files)
    if how in FILE_KINDS:
        files[file] = how
    else:
        data = target.files[file]
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            if how == "tree":
                try:
                    data = tree_mutation(rng, data)
                except (yaml.YAMLError, UnicodeDecodeError):  # an earlier edit broke it: damage the text instead
                    data = text_mutation(rng, data, False)
            else:
                data = text_mutation(rng, data, header)
        files[file] = data
    frontend = "pycparser" if header and rng.random() < 0.5 else "clang"
    return Case(target=target.name, index=index, seed=seed, file=file, how=how, frontend=frontend), files


def write_case(root: Path, files: dict[str, bytes | str], originals: dict[str, bytes]) -> None:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        elif content == "directory":
            p.mkdir()
        elif content == "symlink loop":
            p.symlink_to(p.name)
        elif content == "fifo":
            os.mkfifo(p)
        elif content == "duplicate":  # the file stays as it was, and a copy appears beside it
            p.write_bytes(originals[rel])
            p.with_name("copy_" + p.name).write_bytes(originals[rel])
        # "remove": nothing is written


# --------------------------------------------------------------------- running



@pytest.fixture(scope="module")
def cached_compiler() -> Iterator[Callable[..., pipeline.Result]]:
    """``compile_specs`` with the header parse and the Jinja environment cached across cases."""
    real_parse = pipeline.parse
    real_env = pipeline.environment
    parsed: dict[object, Header] = {}

    def parse(request: ParseRequest, frontend: str = "clang") -> Header:
        contents = tuple(sorted((h, (d / h).read_bytes()) for d in request.include_dirs for h in request.headers
                                if (d / h).is_file())) if all("fuzz-" in str(d) for d in request.include_dirs) \
            else tuple(str(d) for d in request.include_dirs)
        key = (request.headers, request.defines, request.undefines, frontend, contents)
        if key not in parsed:
            parsed[key] = real_parse(request, frontend)
        return parsed[key]

    # the YAML of the files a case leaves alone: composed once (the readers only read the node trees)
    real_compose = spec_module.compose
    composed: dict[tuple[str, str], yaml.Node | None] = {}
    originals = {t.decode("utf-8") for target in TARGETS.values() for t in target.files.values()}

    def compose(path: str, text: str) -> yaml.Node | None:
        if text not in originals:
            return real_compose(path, text)
        if (path, text) not in composed:
            composed[(path, text)] = real_compose(path, text)
        return composed[(path, text)]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pipeline, "parse", parse)
        mp.setattr(pipeline, "environment", functools.cache(real_env))
        mp.setattr(spec_module, "compose", compose)
        mp.setattr(surface_module, "compose", compose)
        yield pipeline.compile_specs


MODULE_NAMES = {"__file__", "__name__", "__spec__", "__doc__", "__package__", "__path__", "__loader__",
                "__builtins__"}
BUILTINS = set(dir(builtins))


def undefined_names(source: str, filename: str) -> set[str]:
    """Names a module uses but never binds (as Python would raise NameError for), by scope."""
    top = symtable.symtable(source, filename, "exec")
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    missing: set[str] = set()

    def walk(table: symtable.SymbolTable) -> None:
        module = table.get_type() == "module"
        for s in table.get_symbols():
            if not s.is_referenced():
                continue
            unbound = not (s.is_assigned() or s.is_imported() or s.is_namespace()) if module else s.is_global()
            if unbound and s.get_name() not in bound | BUILTINS | MODULE_NAMES:
                missing.add(f"{table.get_name()}: {s.get_name()}")
        for child in table.get_children():
            walk(child)

    walk(top)
    return missing


def self_calls(source: str) -> list[str]:
    """Module-level functions whose body calls the function itself by name (a size query that is the
    function it sizes recursed without end)."""
    import ast

    out = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == node.name:
                    out.append(node.name)
                    break
    return out


def check_outcome(case: Case, run: Callable[[], pipeline.Result]) -> str:
    """Run the case; 'ok' or 'error' if the outcome is acceptable, else fail the test naming the case."""
    try:
        with within(CASE_SECONDS, case):
            result = run()
    except UserError as e:
        assert e.diagnostics, f"{case}: a UserError without diagnostics"
        for d in e.diagnostics:
            text = str(d)
            assert "\n" not in text and "\r" not in text, f"{case}: a diagnostic of several lines: {text!r}"
            assert LOCATED.match(text), f"{case}: an unlocated diagnostic: {text!r}"
            assert d.location.file and d.location.line >= 1 and d.location.col >= 1, f"{case}: {text!r}"
        return "error"
    except Exception as e:  # noqa: BLE001 - anything else is the finding
        import traceback

        raise AssertionError(f"{case}: {type(e).__name__}: {e}\n{traceback.format_exc()}") from None
    assert not result.skipped, f"{case}: exit 0 with libraries skipped: {result.skipped}"
    modules = [lib.module for lib in result.libraries]
    assert len(set(modules)) == len(modules), f"{case}: two libraries generate one module: {sorted(modules)}"
    for rel, text in result.files.items():
        if rel.endswith(".py"):
            problem = python_problem(rel, text)
            assert problem is None, f"{case}: {problem}"
    return "ok"


@functools.lru_cache(maxsize=512)
def python_problem(rel: str, text: str) -> str | None:
    """What is wrong with a generated Python file, or None (cached: most cases leave most files alone)."""
    try:
        compile(text, rel, "exec")
    except SyntaxError as e:
        return f"{rel} does not compile: {e}"
    missing = undefined_names(text, rel)
    if missing:
        return f"{rel} uses names it never defines: {sorted(missing)}"
    recursive = self_calls(text)
    if recursive:
        return f"{rel}: functions that call themselves: {recursive}"
    return None


def run_cases(tmp_path: Path, compiler: Callable[..., pipeline.Result], counts: dict[str, int], salt: str) -> dict[str, int]:
    outcomes = {"ok": 0, "error": 0}
    for name, target in TARGETS.items():
        for i in range(counts.get(name, 0)):
            case, files = make_case(target, i, salt)
            root = tmp_path / f"fuzz-{name}-{i}"
            write_case(root, files, target.files)
            overrides = {k: str(root / v) for k, v in target.sdk.items()}
            outcomes[check_outcome(case, lambda: compiler(root / "specs", overrides, case.frontend,
                                                          base=root))] += 1
            shutil.rmtree(root, ignore_errors=True)
    return outcomes


def test_targets_compile_unchanged(cached_compiler: Callable[..., pipeline.Result], tmp_path: Path) -> None:
    """The fuzz seeds are valid: every target compiles as it is, and passes the success checks."""
    assert "test" in TARGETS
    for name, target in TARGETS.items():
        root = tmp_path / f"fuzz-{name}"
        write_case(root, dict(target.files), target.files)
        case = Case(target=name, index=-1, seed="", file="", how="none", frontend="clang")
        overrides = {k: str(root / v) for k, v in target.sdk.items()}
        assert check_outcome(case, lambda: cached_compiler(root / "specs", overrides, base=root)) == "ok"


def test_fuzz_in_process(cached_compiler: Callable[..., pipeline.Result], tmp_path: Path) -> None:
    outcomes = run_cases(tmp_path, cached_compiler, COUNTS, "default")
    total = sum(outcomes.values())
    # the mutations must reach both outcomes, or the fuzzer tests nothing: damaged specs that still generate
    # (the checks on a whole package), and errors (the checks on diagnostics)
    assert outcomes["ok"] >= total // 20 and outcomes["error"] >= total // 4, outcomes


@long_form  # (minutes)
def test_fuzz_in_process_long(cached_compiler: Callable[..., pipeline.Result], tmp_path: Path) -> None:
    outcomes = run_cases(tmp_path, cached_compiler, {k: v * 10 for k, v in COUNTS.items()}, "long")
    assert outcomes["ok"] and outcomes["error"], outcomes


def run_cli_case(tmp_path: Path, name: str, index: int, salt: str) -> None:
    target = TARGETS[name]
    case, files = make_case(target, index, salt)
    root = tmp_path / f"fuzz-{name}-{index}"
    write_case(root, files, target.files)
    expected = check_outcome(case, lambda: pipeline.compile_specs(
        root / "specs", {k: str(root / v) for k, v in target.sdk.items()}, case.frontend, base=root))
    args = [sys.executable, "-m", "ironaccelerator_gen", "generate", "--specs", "specs", "--out", "out",
            "--frontend", case.frontend]
    for k, v in target.sdk.items():
        args += ["--sdk", f"{k}={root / v}"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=root,
                          errors="backslashreplace")
    assert "Traceback" not in proc.stderr + proc.stdout, f"{case}:\n{proc.stderr}"
    assert proc.returncode in (0, 2), f"{case}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}"
    assert proc.returncode == (0 if expected == "ok" else 2), f"{case}: in process {expected}, CLI exit " \
        f"{proc.returncode}\n{proc.stderr}"
    if proc.returncode == 2:
        lines = proc.stderr.splitlines()
        assert re.fullmatch(r"ironaccel-gen: \d+ error\(s\)", lines[-1]), f"{case}:\n{proc.stderr}"
        assert all(LOCATED.match(line) for line in lines[:-1]), f"{case}:\n{proc.stderr}"
        assert not (root / "out").exists(), f"{case}: a failed generate wrote output"
    else:
        assert (root / "out" / "ironaccelerator" / "__init__.py").is_file(), case


# the CLI subset: cases of the test libraries (the cheapest) and of OpenCL where its headers are installed
CLI_CASES = [("test", i) for i in range(0, 220, 55)] + [("opencl", 3)]


@pytest.mark.parametrize("name, index", CLI_CASES, ids=[f"{n}-{i}" for n, i in CLI_CASES])
def test_fuzz_cli(tmp_path: Path, name: str, index: int) -> None:
    if name not in TARGETS:
        pytest.skip(f"no {name} SDK headers here")
    run_cli_case(tmp_path, name, index, "default")


@long_form
@pytest.mark.parametrize("index", range(40))
def test_fuzz_cli_long(tmp_path: Path, index: int) -> None:
    name = sorted(TARGETS)[index % len(TARGETS)]
    run_cli_case(tmp_path, name, index, "cli-long")
