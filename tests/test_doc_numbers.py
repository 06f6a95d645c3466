"""Every measured figure in the docs names the command that produced it (issue 25 item 5).

A figure is a time (``12 ns``, ``1.1 µs``, ``3 ms``, ``2.5 s``) or a ratio (``1.25×``, ``0.9x``) in the prose of a
page (code blocks are output, not claims).  The paragraph, list item or table that holds it, or the section it is
in (from its heading to the next), must name a command: a ``bench/`` script, a ``make`` target, a ``python``
command line, or say plainly that the command was not recorded."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT
from test_doc_examples import doc_pages

FIGURE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:[-–]\d+(?:\.\d+)?)?\s?(?:ns|µs|us|ms|s|×|x)(?![\w])(?!\s?\d)")
COMMAND = re.compile(r"bench/|bench_\w+\.py|`make \w|make \w+`|`python|python -|\.venv/bin/|ironaccel-gen|"
                     r"not recorded|no bench|scripts/\w", re.I)


def _sections(text: str) -> list[list[str]]:
    """The page's sections (heading to heading), each a list of its blocks (paragraphs, items, tables), with fenced
    code left out."""
    sections: list[list[str]] = [[]]
    block: list[str] = []
    fence = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if fence:
            continue
        if line.startswith("#"):
            if block:
                sections[-1].append("\n".join(block))
            block = []
            sections.append([line])
            continue
        if not line.strip() or re.match(r"\s*([-*]|\d+\.)\s", line):
            if block:
                sections[-1].append("\n".join(block))
            block = [line] if line.strip() else []
        else:
            block.append(line)
    if block:
        sections[-1].append("\n".join(block))
    return sections


def unsourced(page: Path) -> list[str]:
    out = []
    for section in _sections(page.read_text(encoding="utf-8")):
        whole = "\n".join(section)
        for block in section:
            if FIGURE.search(block) and not COMMAND.search(block) and not COMMAND.search(whole):
                out.append(f"{page.relative_to(ROOT)}: {block.strip()[:160]!r}")
    return out


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_figure_names_its_command(page: Path) -> None:
    bad = unsourced(page)
    assert not bad, "figures with no command that produced them:\n" + "\n".join(bad)


def test_the_check_finds_an_unsourced_figure(tmp_path: Path) -> None:
    page = ROOT / "docs" / "_probe.md"
    try:
        page.write_text("# T\n\nA launch costs 411 ns.\n\n## U\n\n`bench/bench_launch_cpu.py`: 1.25× cuda.core.\n",
                        encoding="utf-8")
        bad = unsourced(page)
    finally:
        page.unlink()
    assert len(bad) == 1 and "411 ns" in bad[0], bad
