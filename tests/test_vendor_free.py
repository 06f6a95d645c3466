"""Generic code names no vendor: ``generator/`` (the binding compiler, its frontends) holds no vendor name and no
vendor grammar in its code; vendors are data (``specs/``) and hand-written runtime (``runtime/``: the backends,
the capability matchers of ``ironaccelerator_runtime.capability_match``, each backend's ``MODULE_FORMATS``; a
source of Objective-C prototypes, such as Apple's metal-cpp, is the ``prototypes:`` section of its spec, read by the
generic C++-wrappers front-end).

Read: identifiers and string literals, less docstrings, comments, and help strings citing a real spec as an
example (a string with ``ex.`` / ``e.g.``).  What remains is listed in ``ALLOWED`` with its reason; anything else
fails the test, listing each place."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GENERATOR = ROOT / "generator"

VENDOR = re.compile(r"cuda|nvidia|nvrtc|nvtx|\bhip|rocm|\bamd\b|metal|mtl|qnn|qualcomm|hexagon|htp\b|opencl|\bcl_|"
                    r"apple|gfx\d|\bsm_?\d|ptx|fatbin|offload_bundle|"
                    r"compute_capability|arch_prefix|gpu_family|gcnarch", re.I)

# (file, the word as written) -> why it may stay.  Keep this short: each entry is a vendor in generic code.
ALLOWED: dict[tuple[str, str], str] = {
    # documentation citing the spec that uses a key, without an "ex.": SPEC_KEYS.md and an error message
    ("schema.py", "QNN"): "the doc of `resolver: table` cites QNN's provider table",
    ("schema.py", "Qnn"): "the doc of `resolver: table` cites QnnInterface_getProviders",
    ("schema.py", "NVTX"): "the doc of `errors: none` cites NVTX",
    ("spec.py", "cuda"): "the example header name of an error message ('cuda.h')",
    # scaffold's ErrorKind suggestions for a new library's error codes: name fragments, one of them a vendor's
    # (CUDA_ERROR_INVALID_PTX); a suggestion the scaffold prints for review, not a grammar the generator applies
    ("scaffold.py", "PTX"): "a name fragment of scaffold's ErrorKind suggestions (printed for review)",
    # the name of a Python array-exchange protocol (__cuda_array_interface__, which CuPy, Numba and torch use), an
    # interop key of a backend spec, not a vendor's grammar
    ("surface.py", "cuda"): "the cuda_array_interface protocol's name (spec key interop)",
}


def _docstring_nodes(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def _words(path: Path) -> list[tuple[int, str, str]]:
    """(line, the vendor word, the text it is in) of each identifier and string literal of the code."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstring_nodes(tree)
    found = []
    for node in ast.walk(tree):
        texts: list[str] = []
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if not re.search(r"\b(ex\.|e\.g\.|ex:)", node.value):
                texts.append(node.value)
        elif isinstance(node, ast.Name):
            texts.append(node.id)
        elif isinstance(node, ast.Attribute):
            texts.append(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            texts.append(node.name)
        elif isinstance(node, ast.arg):
            texts.append(node.arg)
        elif isinstance(node, ast.alias):
            texts.append(node.asname or node.name)
        for text in texts:
            for m in VENDOR.finditer(text):
                found.append((getattr(node, "lineno", 0), m.group(0), text))
    return sorted(found)


def vendor_words(root: Path = GENERATOR) -> list[str]:
    """Every vendor word in ``root``'s code that ALLOWED does not name, as ``file:line: 'word' in 'text'``."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for line, word, text in _words(path):
            if (rel, word) not in ALLOWED:
                out.append(f"generator/{rel}:{line}: {word!r} in {text[:90]!r}")
    return out


def test_generator_names_no_vendor() -> None:
    found = vendor_words()
    assert not found, "vendor names / grammars in generic code (move them to specs/ or runtime/):\n" + \
        "\n".join(found)


def test_the_check_sees_a_vendor_grammar(tmp_path: Path) -> None:
    """The scan is not blind: a capability grammar written into a generator module is found, and a mention in a
    docstring or comment is not."""
    (tmp_path / "surface.py").write_text('"""Capability keys, ex. CUDA\'s."""\n'
                                         '# the gpu_family keys\n'
                                         'MATCHES = ("exact", "compute_capability")\n'
                                         'PREFIX = "MTLGPUFamily"\n', encoding="utf-8")
    found = vendor_words(tmp_path)
    assert found == ["generator/surface.py:3: 'compute_capability' in 'compute_capability'",
                     "generator/surface.py:4: 'MTL' in 'MTLGPUFamily'"], found


def test_allowed_entries_are_still_needed() -> None:
    """An ALLOWED entry whose word is gone from its file is stale: remove it."""
    used = {(path.relative_to(GENERATOR).as_posix(), word) for path in GENERATOR.rglob("*.py")
            for _, word, _ in _words(path)}
    assert not sorted(set(ALLOWED) - used), sorted(set(ALLOWED) - used)


TEMPLATES = ROOT / "templates"
_JINJA = re.compile(r"\{%.*?%\}|\{\{.*?\}\}", re.S)


def matcher_names_in_templates(root: Path = TEMPLATES) -> list[str]:
    """Each Jinja statement or expression of ``root``'s templates that names a capability matcher in quotes
    (``spec.match == "gpu_family"``): a template asks the chosen matcher's fields (``matcher.numbered``,
    ``matcher.ordered_tiers``, ``matcher.constant_table``, ``matcher.sections``), so a new matcher needs no
    template edit."""
    from ironaccelerator_runtime.capability_match import MATCHERS

    quoted = re.compile("|".join(rf"[\"']{re.escape(name)}[\"']" for name in MATCHERS))
    out = []
    for path in sorted(root.rglob("*.j2")):
        for m in _JINJA.finditer(path.read_text(encoding="utf-8")):
            if quoted.search(m.group(0)):
                out.append(f"{path.relative_to(root.parent).as_posix()}: {m.group(0)[:90]}")
    return out


def test_templates_ask_the_matcher_not_its_name() -> None:
    found = matcher_names_in_templates()
    assert not found, "templates branching on a matcher's name (ask its fields instead):\n" + "\n".join(found)


def test_the_template_check_sees_a_matcher_name(tmp_path: Path) -> None:
    (tmp_path / "t.py.j2").write_text('{# "gpu_family" in a comment is fine #}\n'
                                      '{% if spec.match == "hexagon_arch" %}x{% endif %}\n', encoding="utf-8")
    assert matcher_names_in_templates(tmp_path) == [f"{tmp_path.name}/t.py.j2: "
                                                    '{% if spec.match == "hexagon_arch" %}']


def resolver_kind_names_in(root: Path = TEMPLATES, generator: Path = GENERATOR) -> list[str]:
    """Each Jinja statement or expression of ``root``'s templates, and each string literal of ``generator``'s code,
    that names a resolver kind the runtime declares (``lib.resolver.kind == "lookup"``): templates emit what the
    kind's declaration says (``rk.defines``, ``rk.args``, ``rk.via``, ... from generator/render.py resolver_view)
    and the generator reads its keys and shapes, so a new kind needs no edit of either (tests/test_resolver_kinds.py
    adds one).  ``dlsym``, the kind of a spec that names none, may be the generator's default."""
    from ironaccelerator_runtime.resolver_kinds import KINDS

    names = [name for name in KINDS if name != "dlsym"]
    quoted = re.compile("|".join(rf"[\"']{re.escape(name)}[\"']" for name in names))
    out = []
    for path in sorted(root.rglob("*.j2")):
        for m in _JINJA.finditer(path.read_text(encoding="utf-8")):
            if quoted.search(m.group(0)):
                out.append(f"{path.relative_to(root.parent).as_posix()}: {m.group(0)[:90]}")
    for path in sorted(generator.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstring_nodes(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in names and id(node) not in docs:
                out.append(f"{path.relative_to(generator.parent).as_posix()}:{node.lineno}: {node.value!r}")
    return out


def test_templates_and_generator_ask_the_resolver_kind_not_its_name() -> None:
    found = resolver_kind_names_in()
    assert not found, ("templates or generator code branching on a resolver kind's name (ask its declaration, "
                       "runtime/ironaccelerator_runtime/resolver_kinds.py, instead):\n" + "\n".join(found))


def test_the_resolver_kind_check_sees_a_kind_name(tmp_path: Path) -> None:
    (tmp_path / "t.py.j2").write_text('{# "lookup" in a comment is fine #}\n'
                                      '{% if lib.resolver.kind == "proc_address" %}x{% endif %}\n', encoding="utf-8")
    gen = tmp_path / "gen"
    gen.mkdir()
    (gen / "x.py").write_text('"""lookup"""\nif kind == "lookup":\n    pass\n', encoding="utf-8")
    assert resolver_kind_names_in(tmp_path, gen) == [f"{tmp_path.name}/t.py.j2: "
                                                     '{% if lib.resolver.kind == "proc_address" %}',
                                                     "gen/x.py:2: 'lookup'"]
