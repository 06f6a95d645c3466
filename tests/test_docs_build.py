"""The documentation site builds strictly (issue 25 item 4): ``make docs``' command (Makefile ``docs``) on docs/
succeeds with no warning, its API reference documents every public name and its CLI reference every sub-command;
and the same configuration fails on what strictness is for: a page in no toctree, a Markdown link to a missing
page or heading, a cross-reference to a Python name that nothing documents."""

from __future__ import annotations

import importlib
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import INSTALLED, ROOT

DOCS = ROOT / "docs"
VENDORS = ("cuda", "hip", "opencl", "metal", "qnn")

if sys.version_info < (3, 11):
    pytest.skip("the docs toolchain (Sphinx 9, myst-parser 5: pyproject's docs extra) needs Python 3.11",
                allow_module_level=True)
if INSTALLED:
    pytest.skip("the site documents the checkout's package, not an installed wheel", allow_module_level=True)


def sphinx_build(src: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``make docs``' build of ``src`` into ``out`` (the Makefile's flags: from scratch, every warning an error,
    nitpicky), as a child process (autodoc imports the package; Sphinx keeps process-wide state)."""
    try:
        importlib.import_module("sphinx")
    except ImportError:  # make test installs it (the docs extra); a missing toolchain is a failure, not a skip
        pytest.fail("Sphinx is not installed: pip install -e '.[docs]' (make test does)")
    return subprocess.run([sys.executable, "-m", "sphinx", "-E", "-a", "-W", "--keep-going", "-n", "-q",
                           "-b", "html", str(src), str(out)], cwd=ROOT, capture_output=True, text=True)


def test_make_docs_runs_this_build() -> None:
    """The test builds with the flags `make docs` uses (else it would prove nothing about `make docs`)."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "-m sphinx -E -a -W --keep-going -n -q -b html docs docs/_build/html" in makefile


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    r = sphinx_build(DOCS, out)
    assert r.returncode == 0, f"the docs build failed (make docs):\n{r.stdout}\n{r.stderr}"
    return out


def test_site_builds_strictly(site: Path) -> None:
    for page in ("index.html", "reference/api.html", "reference/cli.html", "UNCHECKED.html", "SPEC_KEYS.html"):
        assert (site / page).is_file(), page


def test_api_reference_documents_every_public_name(site: Path) -> None:
    """Every name of ``ironaccelerator.__all__`` and of each vendor's ``backends.<vendor>.__all__`` has its entry
    (an anchor under its public name), and each enum shows its members."""
    html = (site / "reference" / "api.html").read_text(encoding="utf-8")
    ids = set(re.findall(r'id="([^"]+)"', html))
    ia = importlib.import_module("ironaccelerator")
    expected = [f"ironaccelerator.{n}" for n in ia.__all__ if n != "nvtx"]
    expected += [f"ironaccelerator.nvtx.{n}" for n in ia.nvtx.__all__ if callable(getattr(ia.nvtx, n))]
    for v in VENDORS:
        m = importlib.import_module(f"ironaccelerator.backends.{v}")
        expected += [f"ironaccelerator.backends.{v}.{n}" for n in m.__all__]
    for enum_name in ("BackendKind", "ErrorKind", "DType", "MemoryKind", "Vendor", "ComputeTier", "NumericClass",
                      "CapabilityFlags"):
        expected += [f"ironaccelerator.{enum_name}.{m}" for m in getattr(ia, enum_name).__members__]
    missing = [n for n in expected if n not in ids]
    assert not missing, f"not in docs/reference/api.rst's page: {missing}"


def test_cli_reference_documents_every_subcommand(site: Path) -> None:
    from ironaccelerator_gen.cli import _parser

    parser = _parser()
    subs = next(a for a in parser._actions if a.dest == "command").choices
    assert subs
    html = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    missing = [name for name in subs if f'id="ironaccel-gen-{name}"' not in html]
    assert not missing, f"sub-commands not in docs/reference/cli.rst's page: {missing}"


def test_strict_build_fails_on_broken_navigation_and_references(tmp_path: Path) -> None:
    """A copy of docs/ with one fault of each kind: the build fails, and it reports each of them (and nothing
    else: docs/ itself builds clean, test_site_builds_strictly)."""
    src = tmp_path / "docs"
    shutil.copytree(DOCS, src, ignore=shutil.ignore_patterns("_build"))
    (src / "orphan.md").write_text("# A page in no toctree\n", encoding="utf-8")
    (src / "reference" / "broken.md").write_text(
        "# Broken references\n\n"
        "[a missing page](no-such-page.md), [a missing heading](../UNCHECKED.md#no-such-heading), "
        "{class}`ironaccelerator.NoSuchClass`, {meth}`ironaccelerator.Device.no_such_method`.\n",
        encoding="utf-8")
    index = src / "index.md"
    text = index.read_text(encoding="utf-8")
    assert "\nreference/cli\n" in text
    index.write_text(text.replace("\nreference/cli\n", "\nreference/cli\nreference/broken\n", 1), encoding="utf-8")
    r = sphinx_build(src, tmp_path / "out")
    assert r.returncode != 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if "WARNING" in line]
    expected = {
        "orphan.md: WARNING: document isn't included in any toctree": "a page in no toctree",
        "'myst' cross-reference target not found: 'no-such-page.md'": "a link to a missing page",
        "local id not found in doc 'UNCHECKED': 'no-such-heading'": "a link to a missing heading",
        "py:class reference target not found: ironaccelerator.NoSuchClass": "a missing class",
        "py:meth reference target not found: ironaccelerator.Device.no_such_method": "a missing method",
    }
    for text_, what in expected.items():
        assert any(text_ in w for w in warnings), f"{what} did not fail the build:\n{r.stderr}"
    unexpected = [w for w in warnings if not any(t in w for t in expected)
                  and "no command xref target" not in w]  # sphinx-argparse's echo of the missing page
    assert not unexpected, unexpected


def test_cli_options_say_what_they_do_and_their_default() -> None:
    """The CLI reference shows each option's help and no default of its own (cli.rst: ``:nodefault:``; argparse's
    defaults read wrong there: ``-q``'s is the verbosity, 1), so every option has help text, and the help of an
    option whose default is a value says what it is."""
    import argparse

    from ironaccelerator_gen.cli import _parser

    subs = next(a for a in _parser()._actions if a.dest == "command").choices
    bad = []
    for name, sub in subs.items():
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            flag = "/".join(action.option_strings) or action.dest
            valued = not isinstance(action, (argparse._StoreConstAction, argparse._StoreTrueAction)) and \
                action.default not in (None, [])
            if not action.help:
                bad.append(f"{name} {flag}: no help")
            elif valued and "default" not in action.help:
                bad.append(f"{name} {flag}: its default ({action.default!r}) not in its help")
    assert not bad, bad


def load_conf() -> Any:
    """docs/conf.py as a module."""
    spec = importlib.util.spec_from_file_location("ironaccelerator_docs_conf", DOCS / "conf.py")
    assert spec is not None and spec.loader is not None
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    return conf


@pytest.mark.parametrize(("what", "doc", "rendered", "absent"), [
    # a property's summary with a colon: prose, not "type: description"
    ("property", "Whether it was freed (a slice: whether its allocation was).",
     "Whether it was freed (a slice: whether its allocation was).", ":type:"),
    # Returns: a phrase before a colon stays the sentence; a type expression is the type
    ("method", "Sum.\n\nReturns:\n    The signature, a str: the inputs, then the outputs.\n",
     ":returns: The signature, a str: the inputs, then the outputs.", "*The signature"),
    ("method", "Sum.\n\nReturns:\n    list[str]: the names.\n", ":returns: *list[str]* -- the names.", None),
    # Raises: the _unchecked contract's sentence is not an exception type; an exception is
    ("method", "Sum.\n\nRaises:\n    Error: when x.\n    Never raises for a bad value; see docs/UNCHECKED.md.\n",
     ":raises: Never raises for a bad value; see docs/UNCHECKED.md.", ":raises Never"),
    ("method", "Sum.\n\nRaises:\n    Error: when x.\n", ":raises Error: when x.", None),
    # the Backends: section is a headed section of its own
    ("method", "Sum.\n\nBackends:\n    All. QNN: none.\n", ".. rubric:: Backends", None),
])
def test_napoleon_reads_our_docstrings(what: str, doc: str, rendered: str, absent: str | None,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/conf.py's napoleon adaptations (the prose our Google-style docstrings write where napoleon looks for
    a type before a colon)."""
    from sphinx.ext.napoleon import Config
    from sphinx.ext.napoleon.docstring import GoogleDocstring
    from sphinx.util.docstrings import prepare_docstring

    for method in ("_consume_returns_section", "_partition_field_on_colon"):  # napoleon as it was, after the test
        monkeypatch.setattr(GoogleDocstring, method, getattr(GoogleDocstring, method))
    conf = load_conf()
    conf._patch_napoleon_returns()
    config = Config(**{k: getattr(conf, k) for k in dir(conf) if k.startswith("napoleon_")})

    class App:
        pass

    app = App()
    app.config = config  # type: ignore[attr-defined]
    lines = prepare_docstring(doc)
    conf._napoleon(app, what, "x.y", None, None, lines)
    text = "\n".join(lines)
    assert rendered in text, text
    assert absent is None or absent not in text, text
