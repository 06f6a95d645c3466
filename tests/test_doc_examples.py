"""Every code block of the README and the docs runs, or is checked, in ``make test`` (issue 25 item 5).

The blocks are found with markdown-it-py (the CommonMark parser the docs build itself uses, through myst-parser),
so what is tested is what the site renders.  What each fence means (docs/maintainer/docs.md says it for writers):

- ``python``: RUN.  The python blocks of one page run in order in one namespace, as a notebook does (a later block
  may use the names an earlier one made), in a temporary working directory.  ``python needs=TAG`` is a block that
  needs what this machine may lack (an NVIDIA or AMD GPU, real Apple hardware, torch, CuPy, the simulated Metal
  device's toolchain): it runs where the need is met and is reported as SKIPPED with the reason where it is not.
- ``console`` / ``bash`` / ``sh`` / ``shell``: commands (in ``console``, the lines after a ``$ ``; the other lines are
  their output).  ``make TARGET`` is checked with ``make -n TARGET``; an ``ironaccel-gen`` command is parsed by the
  command line's own parser, and with ``run`` in the info string it RUNS in a temporary directory, must exit 0 (or
  the ``exit=N`` the info string names), and every output line the block shows (lines with ``...`` excepted) must
  appear in what it printed.  Other commands (pip, git, cd) are checked by ``bash -n``.
- ``yaml`` parses; ``yaml spec`` is a whole library spec and ``yaml core`` the core spec: each also passes the spec
  loader (the schema, with located errors).  ``json`` and ``toml`` parse.
- ``text``, ``c``, ``cpp``, ``objc``, ``metal``, ``opencl``, ``cuda``: shown, not run (headers, kernel sources,
  output).  A fence with no language, or one not named here, fails :func:`test_every_fence_has_a_known_language`.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from conftest import METAL_SIM, ROOT

markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py (installed by make test) reads the docs")

PYTHON = {"python", "py", "python3"}
SHELL = {"console", "bash", "sh", "shell"}
DATA = {"yaml", "json", "toml"}
SHOWN = {"text", "c", "cpp", "objc", "metal", "opencl", "cuda"}
KNOWN = PYTHON | SHELL | DATA | SHOWN
GEN = ("ironaccel-gen", "ironaccelerator_gen")


def doc_pages() -> list[Path]:
    """README.md and every Markdown page under docs/ (not the built site)."""
    docs = ROOT / "docs"
    return [ROOT / "README.md", *sorted(p for p in docs.rglob("*.md") if "_build" not in p.relative_to(docs).parts)]


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    attrs: tuple[str, ...]
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def attr(self, key: str) -> str | None:
        for a in self.attrs:
            k, eq, v = a.partition("=")
            if k == key:
                return v if eq else ""
        return None


def blocks_of(page: Path) -> list[Block]:
    md = markdown_it.MarkdownIt("commonmark")
    out = []
    for tok in md.parse(page.read_text(encoding="utf-8")):
        if tok.type == "fence" and tok.map is not None:
            info = tok.info.split()
            out.append(Block(page, tok.map[0] + 1, info[0].lower() if info else "", tuple(info[1:]), tok.content))
    return out


ALL = [b for p in doc_pages() for b in blocks_of(p)]


def _ids(b: Block) -> str:
    return f"{b.where}:{b.lang}"


# ---- needs=TAG: what a block needs beyond this machine's default (OpenCL on PoCL, QNN's emulator, NVRTC) ----

def _backend_devices(kind_name: str, what: str) -> str | None:
    import ironaccelerator as ia

    try:
        backend = ia.BackendRegistry.default().get(getattr(ia.BackendKind, kind_name))
        if backend.devices():
            return None
        return f"needs {what}: the {kind_name} backend loads but enumerates no device here"
    except ia.Error as e:
        return f"needs {what} (none here: {e.kind.name}: {e})"


def _module(name: str) -> str | None:
    return None if importlib.util.find_spec(name) is not None else f"needs {name} (not installed here)"


NEEDS: dict[str, Callable[[], str | None]] = {
    "cuda": lambda: _backend_devices("CUDA", "an NVIDIA GPU and its driver"),
    "hip": lambda: _backend_devices("ROCM", "an AMD GPU and ROCm"),
    "apple": lambda: None if sys.platform == "darwin" and _backend_devices("METAL", "Metal") is None
    else "needs real Apple hardware (Metal.framework); this machine has the simulated device only",
    "torch": lambda: _module("torch"),
    "cupy": lambda: _module("cupy"),
    "metal-sim": lambda: METAL_SIM if isinstance(METAL_SIM, str) else None,
}


def _unmet(block: Block) -> str | None:
    need = block.attr("needs")
    if need is None:
        return None
    reasons = []
    for tag in need.split(","):
        if tag not in NEEDS:
            pytest.fail(f"{block.where}: unknown needs={tag!r}; known: {', '.join(sorted(NEEDS))}")
        why = NEEDS[tag]()
        if why:
            reasons.append(why)
    return "; ".join(reasons) or None


# ---- python: one namespace per page, blocks in order ----

@dataclass
class _Page:
    ns: dict[str, Any] = field(default_factory=dict)
    done: set[int] = field(default_factory=set)
    cwd: Path | None = None


_PAGES: dict[Path, _Page] = {}


def _exec(block: Block, page: _Page) -> None:
    # leading newlines put the block's lines at their place in the page: a traceback names the Markdown line
    code = compile("\n" * block.line + block.text, str(block.page.relative_to(ROOT)), "exec")
    old = os.getcwd()
    assert page.cwd is not None
    os.chdir(page.cwd)
    try:
        exec(code, page.ns)
    finally:
        os.chdir(old)
        page.done.add(block.line)


PY_BLOCKS = [b for b in ALL if b.lang in PYTHON]


@pytest.mark.parametrize("block", PY_BLOCKS, ids=_ids)
def test_python_block_runs(block: Block, tmp_path_factory: pytest.TempPathFactory) -> None:
    page = _PAGES.setdefault(block.page, _Page())
    mine = [b for b in PY_BLOCKS if b.page == block.page]
    try:
        why = _unmet(block)
        if why:
            pytest.skip(why)
        if page.cwd is None:
            page.cwd = tmp_path_factory.mktemp("doc-page")
            page.ns["__name__"] = "__doc_example__"
        # a block selected alone (pytest -k) gets the names its page's earlier blocks make
        for earlier in mine:
            if earlier.line >= block.line:
                break
            if earlier.line not in page.done and _unmet(earlier) is None:
                _exec(earlier, page)
        _exec(block, page)
    finally:
        # the page is done (its last block ran, failed or was skipped): drop what it made, so that devices close
        # and no simulator object outlives the page (the Metal simulator's tests count them)
        if block is mine[-1]:
            _PAGES.pop(block.page, None)
            page.ns.clear()
            gc.collect()


# ---- shell commands ----

def _commands(block: Block) -> list[tuple[str, list[str]]]:
    """(command, the output lines shown after it) for each command of the block."""
    out: list[tuple[str, list[str]]] = []
    pending = ""
    for raw in block.text.splitlines():
        if pending:
            line, pending = pending + raw.strip(), ""
        elif block.lang == "console":
            if not raw.startswith("$ "):
                if out and raw.strip():
                    out[-1][1].append(raw)
                continue
            line = raw[2:].strip()
        else:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        out.append((line, []))
    return out


def _simple_commands(command: str) -> list[list[str]]:
    """The simple commands of a `a && b; c` line, with leading VAR=value assignments dropped."""
    result = []
    for part in re.split(r"\s*(?:&&|\|\|?|;)\s*", command):  # (a pipe's reader is a command of its own)
        words = shlex.split(part, comments=True)
        # redirections are the shell's, not the command's: `spec-keys > docs/SPEC_KEYS.md` is `spec-keys`
        words = [w for i, w in enumerate(words)
                 if not re.fullmatch(r"\d*[<>]{1,2}(&\d+)?", w)
                 and not (i and re.fullmatch(r"\d*[<>]{1,2}", words[i - 1]))]
        while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
            words.pop(0)
        if words:
            result.append(words)
    return result


def _gen_args(words: list[str]) -> list[str] | None:
    """The arguments of an ironaccel-gen command (any of its spellings), or None when it is not one."""
    if Path(words[0]).name == "ironaccel-gen":
        return words[1:]
    if Path(words[0]).name.startswith("python") and words[1:3] == ["-m", "ironaccelerator_gen"]:
        return words[3:]
    return None


def _parser() -> Any:
    from ironaccelerator_gen import cli

    build = getattr(cli, "build_parser", None) or getattr(cli, "_parser")
    return build()


SHELL_BLOCKS = [b for b in ALL if b.lang in SHELL]


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=_ids)
def test_shell_block_is_checked(block: Block, tmp_path: Path) -> None:
    why = _unmet(block)
    if why:
        pytest.skip(why)
    commands = _commands(block)
    assert commands, f"{block.where}: a {block.lang} block with no command"
    run = block.attr("run") is not None
    want_rc = int(block.attr("exit") or 0)
    for command, shown in commands:
        syntax = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True)
        assert syntax.returncode == 0, f"{block.where}: `{command}`: {syntax.stderr}"
        for words in _simple_commands(command):
            args = _gen_args(words)
            if words[0] == "make":
                targets = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
                makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
                for t in targets:  # a rule of the Makefile, not a file or directory that merely exists (docs/)
                    assert re.search(rf"^{re.escape(t)}\s*:", makefile, re.M), f"{block.where}: no Makefile rule {t!r}"
                proc = subprocess.run(["make", "-n", "-C", str(ROOT), *targets], capture_output=True, text=True,
                                      timeout=120)
                assert proc.returncode == 0, f"{block.where}: `make -n {' '.join(targets)}`: {proc.stderr[-2000:]}"
            elif args is not None and run:
                env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
                proc = subprocess.run([sys.executable, "-m", "ironaccelerator_gen", *args], cwd=tmp_path,
                                      capture_output=True, text=True, timeout=300, env=env)
                printed = proc.stdout + proc.stderr
                assert proc.returncode == want_rc, (
                    f"{block.where}: `{command}` exited {proc.returncode}, the block says {want_rc}:\n{printed[-3000:]}")
                for line in shown:
                    if "..." in line or "…" in line:
                        continue
                    assert line.strip() in printed, (
                        f"{block.where}: `{command}` did not print the line the block shows:\n  {line.strip()}\n"
                        f"it printed:\n{printed[-3000:]}")
            elif args is not None:
                try:
                    _parser().parse_args(args)
                except SystemExit as e:
                    pytest.fail(f"{block.where}: `{command}`: the command line's parser refuses it (exit {e.code})")


# ---- data ----

DATA_BLOCKS = [b for b in ALL if b.lang in DATA]


@pytest.mark.parametrize("block", DATA_BLOCKS, ids=_ids)
def test_data_block_parses(block: Block, tmp_path: Path) -> None:
    if block.lang == "json":
        json.loads(block.text)
        return
    if block.lang == "toml":
        tomllib.loads(block.text)
        return
    yaml.safe_load(block.text)
    if block.attr("spec") is not None or block.attr("core") is not None:
        from ironaccelerator_gen import spec as specmod
        from ironaccelerator_gen.diagnostics import UserError

        path = tmp_path / "spec.yaml"
        path.write_text(block.text, encoding="utf-8")
        load = specmod.load_core if block.attr("core") is not None else specmod.load_library
        try:
            load(path, block.where.replace(":", " line "), text=block.text)  # a spec path holds no ":"
        except UserError as e:
            pytest.fail(f"{block.where}: the spec loader refuses the block: {e}")


# ---- every fence is one of the above ----

def test_every_fence_has_a_known_language() -> None:
    bad = [f"{b.where}: {'no language' if not b.lang else repr(b.lang)}" for b in ALL if b.lang not in KNOWN]
    assert not bad, ("fences this test cannot run or check (give each a language of: "
                     + ", ".join(sorted(KNOWN)) + "):\n" + "\n".join(bad))


def test_the_collector_sees_every_page_and_block() -> None:
    """The parser finds what a plain count of fence openings finds (a fence markdown-it does not see would be a
    block nobody runs)."""
    for page in doc_pages():
        text = page.read_text(encoding="utf-8")
        in_fence = False
        openings = 0
        for line in text.splitlines():
            stripped = line.strip()
            if not in_fence and stripped.startswith("```"):
                openings += 1
                in_fence = True
            elif in_fence and len(stripped) >= 3 and set(stripped) == {"`"}:
                in_fence = False
        assert openings == len(blocks_of(page)), f"{page.relative_to(ROOT)}: {openings} fences, parsed {len(blocks_of(page))}"
