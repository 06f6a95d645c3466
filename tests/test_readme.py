"""The README as the front door (issue 25): short, its quick start runnable right after `make generate`, its links
alive.  Its code blocks themselves run in tests/test_doc_examples.py, with every block of docs/."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from conftest import ROOT
from test_doc_examples import PYTHON, blocks_of

README = (ROOT / "README.md").read_text(encoding="utf-8")
# the README's python blocks as the executed-examples test and the site read them (markdown-it-py)
BLOCKS: list[str] = [b.text for b in blocks_of(ROOT / "README.md") if b.lang in PYTHON]


def _block(containing: str) -> str:
    found = [b for b in BLOCKS if containing in b]
    assert len(found) == 1, f"{len(found)} README python blocks contain {containing!r}"
    return found[0]


def test_readme_is_a_front_door() -> None:
    """At most ~300 lines (issue 25 item 1): the guide, the reference and the benchmark history live in docs/."""
    assert len(README.splitlines()) <= 300


def test_readme_links_resolve() -> None:
    """Every relative link of the README names a file or directory of the checkout (the docs site checks its own
    pages' links in its strict build; the README is not one of them)."""
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    assert links
    broken = [link for link in links
              if not re.match(r"[a-z]+:", link) and not (ROOT / link.split("#")[0]).exists()]
    assert not broken, broken


def test_make_generate_installs_what_the_quick_start_imports() -> None:
    """Issue 24 item 6: the quick start runs right after `make generate`: every module it imports besides the
    package itself (numpy) is installed by the venv step of `make generate` (make -n shows its commands)."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    block = _block("registry.get(ia.BackendKind.OPENCL)")
    imported = {m.split(".")[0] for m in re.findall(r"^\s*(?:import|from)\s+([\w.]+)", block, re.M)}
    third_party = sorted(imported - {"ironaccelerator", "__future__", "os", "sys", "math", "struct", "array"})
    assert third_party, imported  # (numpy today; the test must look at something)
    proc = subprocess.run(["make", "-n", "-B", ".venv/.deps-installed"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    installs = [line for line in proc.stdout.splitlines() if " pip install " in line and "--upgrade pip" not in line]
    assert installs, proc.stdout
    for module in third_party:
        assert any(module in line for line in installs), (module, installs)
