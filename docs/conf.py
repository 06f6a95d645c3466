"""Sphinx configuration of the documentation site (``make docs``: docs/_build/html).

Why Sphinx (issue 25): autodoc documents the *live* objects, and our public namespace is a generated package that
re-exports the hand-written runtime's classes (``ironaccelerator.Device`` is
``ironaccelerator_runtime.traits.device.Device``) and exports each vendor's backend classes lazily through a module
``__getattr__`` (``ironaccelerator.backends.cuda.CudaBackend``), which static analysers do not see.  Pages are
Markdown (myst-parser), the two reference pages reStructuredText (docs/reference/api.rst says why); docstrings are
Google style (napoleon, adapted below to our prose) with one section of our own, ``Backends:``.

The build is strict (Makefile ``docs``: ``-E -a -W --keep-going -n``): any warning fails it, among them a page in no
toctree, a Markdown link to a missing page or heading, and (nitpicky) a cross-reference to a Python name that is
not documented.  Nothing here reaches the network (no intersphinx): the build works offline.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# A checkout's venv has these on its path already (the .pth that `make` writes); named here too so that the docs
# build imports this tree's package and runtime whatever the environment.
for _p in (ROOT / "runtime", ROOT / "generated"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

# The API reference imports the backends; where a library has no compiled module (a fresh clone before
# `ironaccel-gen build`), it loads in ABI mode and warns so, which says nothing about the documentation.
warnings.filterwarnings("ignore", message=r".* runs in cffi ABI mode", category=RuntimeWarning)

project = "IronAccelerator"
author = "IronAccelerator contributors"
copyright = "IronAccelerator contributors, Apache-2.0"
try:
    release = importlib.import_module("ironaccelerator").__version__
except Exception:  # the site still builds its pages; autodoc reports the import failure itself
    release = ""
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinxarg.ext",
]

# Pages are Markdown (myst-parser), except the two reference pages, reStructuredText (docs/reference/api.rst says
# why).  Everything under docs/ that is not a page stays out: the build output, this file, and any stray notes (a
# page must be reached from a toctree, else the build fails).
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "**/_build", "Thumbs.db", ".DS_Store", "**/.ipynb_checkpoints"]

# MyST: `[text](page.md#a-heading)` links resolve against generated heading anchors (levels 1-3); a link to a
# missing page or anchor is a warning, so an error here.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]
# A Markdown link that resolves nowhere is reported (myst.xref_missing); while looking, myst also asks every domain,
# and sphinx-argparse's has no "any" lookup: that second message says nothing more, and is left out.
suppress_warnings = ["myst.domains"]

# autodoc: members in source order (the order the classes are written in, concept by concept), type hints in
# the signature (our annotations are short; "description" repeats each one beside Google-style Args).
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_inherit_docstrings = True
autodoc_class_signature = "mixed"
autodoc_preserve_defaults = True
python_use_unqualified_type_names = True
add_module_names = False

# napoleon: Google style only; "Backends:" (which backends support a call, and how each differs) renders as its
# own headed section, like "Notes:".
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True
napoleon_custom_sections = ["Backends"]

# Nitpicky (-n): every cross-reference must resolve.  _missing_reference (below) first maps a name to the public
# name it is documented under; a name that exists but that no page documents (a standard-library or third-party
# type in an annotation, an internal helper class of the runtime, a type variable) renders as plain text; a name
# that names nothing (a typo, a removed method) is an error.  Nothing else is ignored.
nitpick_ignore_regex: list[tuple[str, str]] = []

html_theme = "furo"
html_title = "IronAccelerator"
html_static_path: list[str] = []
html_show_sourcelink = False
html_copy_source = False

# Public names: the runtime's classes are documented under the names users import them by
# (``ironaccelerator.Device``, ``ironaccelerator.backends.cuda.CudaDevice``), while annotations and docstrings name
# them by their defining module (``ironaccelerator_runtime.traits.device.Device``) or unqualified (``Device.load_module``
# in a backend's docstring).  _missing_reference finds the object a reference names and links it to the entry
# that documents it.
_VENDORS = ("cuda", "hip", "opencl", "metal", "qnn")
_MISSING = object()
_PUBLIC: dict[int, str] | None = None


def _public() -> dict[int, str]:
    """id(object) -> its public dotted name, for every name the reference documents."""
    global _PUBLIC
    if _PUBLIC is None:
        _PUBLIC = {}
        ia = importlib.import_module("ironaccelerator")
        for n in ia.__all__:
            _PUBLIC.setdefault(id(getattr(ia, n)), f"ironaccelerator.{n}")
        for v in _VENDORS:
            m = importlib.import_module(f"ironaccelerator.backends.{v}")
            for n in m.__all__:
                _PUBLIC.setdefault(id(getattr(m, n)), f"ironaccelerator.backends.{v}.{n}")
    return _PUBLIC


def _lookup(dotted: str) -> tuple[Any, Any]:
    """(parent, object) that ``dotted`` names (the longest importable module, then attributes); _MISSING if none."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except Exception:
            continue
        parent: Any = None
        for a in parts[i:]:
            parent, obj = obj, getattr(obj, a, _MISSING)
            if obj is _MISSING:
                return None, _MISSING
        return parent, obj
    return None, _MISSING


def _candidates(node: Any, target: str) -> list[str]:
    """The dotted names ``target`` may mean where it is written: as given, in its class and module (the
    documented ones, then the defining ones), and in the public namespace."""
    mod, cls = node.get("py:module"), node.get("py:class")
    names = [target]
    if mod and cls:
        names.append(f"{mod}.{cls}.{target}")
    if mod:
        names.append(f"{mod}.{target}")
    if mod and cls:
        _, ctx = _lookup(f"{mod}.{cls}")
        if isinstance(ctx, type):
            names += [f"{k.__module__}.{k.__qualname__}.{target}" for k in ctx.__mro__ if k is not object]
            names.append(f"{ctx.__module__}.{target}")
    names.append(f"ironaccelerator.{target}")
    return names


def _spellings(parent: Any, obj: Any, name: str) -> list[str]:
    """The public names under which ``obj`` (``parent``'s attribute ``name``) may be documented."""
    pub = _public()
    out = [pub[id(obj)]] if id(obj) in pub else []
    if isinstance(parent, type):  # a member: on the class, or on the public class of the MRO that defines it
        out += [f"{pub[id(k)]}.{name}" for k in parent.__mro__ if id(k) in pub and name in vars(k)]
        if id(parent) in pub:
            out.append(f"{pub[id(parent)]}.{name}")
    return out


def _missing_reference(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "").lstrip("~.")
    domain = env.get_domain("py")
    fromdoc = node.get("refdoc", env.docname)
    found = False
    for dotted in _candidates(node, target):
        parent, obj = _lookup(dotted)
        if obj is _MISSING:
            continue
        found = True
        for public in _spellings(parent, obj, dotted.rsplit(".", 1)[-1]):
            for role in (node.get("reftype"), "obj"):
                ref = domain.resolve_xref(env, fromdoc, app.builder, role, public, node, contnode)
                if ref is not None:
                    return ref
    if found or target.split(".")[0] in sys.stdlib_module_names:
        return contnode  # exists, but no page documents it: plain text
    return None  # names nothing: Sphinx warns (an error under -W)


def _process_bases(app: Any, name: str, obj: Any, options: Any, bases: list[Any]) -> None:
    """Show a class's public bases: an internal base (``_IntEnum``, ``GpuDevice``, the runtime's
    ``OpenCLBackend``) is replaced by the first public or standard-library class of its MRO."""
    pub = _public()
    shown: list[Any] = []
    for b in bases:
        for k in getattr(b, "__mro__", (b,)):
            if id(k) in pub or k.__module__.split(".")[0] in sys.stdlib_module_names or k.__module__ == "builtins":
                if k not in shown:
                    shown.append(k)
                break
    bases[:] = [b for b in shown if b is not object] or [object]


# Vendor backend classes (ironaccelerator.backends.<vendor>.CudaDevice, ...) subclass the trait classes
# documented once under Backends & devices, Memory, ...: their entries show what the vendor class adds or
# documents differently, not a second copy of every trait member.  The trait classes are defined in the modules of
# the ironaccelerator_runtime.traits package (traits.device, traits.stream, ...).
_TRAIT_PACKAGE = "ironaccelerator_runtime.traits"


def _is_trait(cls: type) -> bool:
    """Whether ``cls`` is one of the trait classes (defined in a module of the traits package)."""
    return cls.__module__.startswith(_TRAIT_PACKAGE + ".")


def _own_doc(obj: Any) -> str | None:
    """The docstring ``obj`` (a function, property, class- or staticmethod) has itself, not inherited."""
    fn = obj.fget if isinstance(obj, property) else getattr(obj, "__func__", obj)
    doc = getattr(fn, "__doc__", None)
    return inspect.cleandoc(doc) if isinstance(doc, str) and doc else None


def _trait_doc(cls: type, name: str) -> str | None | bool:
    """The docstring of ``name`` on the first trait class of ``cls``'s MRO that has it (False: none has it)."""
    for base in cls.__mro__:
        if _is_trait(base) and name in vars(base):
            return _own_doc(vars(base)[name])
    return False


def _defining_class(obj: Any) -> type | None:
    fn = obj.fget if isinstance(obj, property) else getattr(obj, "__func__", obj)
    qual = getattr(fn, "__qualname__", "")
    mod = sys.modules.get(getattr(fn, "__module__", "") or "")
    if "." not in qual or mod is None:
        return None
    cls = getattr(mod, qual.split(".")[0], None)
    return cls if isinstance(cls, type) else None


def _skip_member(app: Any, what: str, name: str, obj: Any, skip: bool, options: Any) -> bool | None:
    if what != "class" or skip:
        return None
    cls = _defining_class(obj)
    if cls is None or _is_trait(cls):
        return None
    trait = _trait_doc(cls, name)
    if trait is False:
        return None  # the vendor's own member
    own = _own_doc(obj)
    return own is None or own == trait  # an override that says nothing the trait's entry does not


# Napoleon, adapted to our docstrings (it runs through _napoleon below, in place of its own listener), which are
# prose where napoleon looks for a type before a colon:
# - a property's (or attribute's) summary: its type is the annotation autodoc shows, and napoleon would read the
#   text before a first colon as the type ("Whether it was freed (a slice: ..." -> type "Whether it was freed (a
#   slice"), so those are parsed as a method's docstring is (sections, no inline type);
# - a ``Returns:`` whose first line has a colon after a phrase ("The signature, a str: the inputs, then ...") keeps
#   its sentence; only a type expression before the colon ("list[str]: the names") is taken as the type;
# - a ``Raises:`` entry that names no exception ("Never raises for a bad value; see docs/UNCHECKED.md", the
#   _unchecked contract's) stays a sentence, not an exception type that links nowhere.
_TYPE = r"[~`:A-Za-z_][\w.\[\]`~:]*(?<!\.)"
_TYPES = re.compile(rf"{_TYPE}(?:\s*(?:,|\||\bor\b)\s*{_TYPE})*")
_RAISES = re.compile(r"(\s*):raises (.+?):(.*)")


def _napoleon(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    from sphinx.ext.napoleon import _process_docstring

    as_what: Any = "method" if what in ("property", "attribute", "data") else what
    _process_docstring(app, as_what, name, obj, options, lines)
    for i, line in enumerate(lines):
        m = _RAISES.fullmatch(line)
        if m and not _TYPES.fullmatch(m.group(2).strip()):
            lines[i] = f"{m.group(1)}:raises: {m.group(2)}{m.group(3)}"


def _patch_napoleon_returns() -> None:
    """GoogleDocstring's Returns: section takes a type only when the text before the first colon is one."""
    from sphinx.ext.napoleon.docstring import GoogleDocstring

    consume, partition = GoogleDocstring._consume_returns_section, GoogleDocstring._partition_field_on_colon
    if getattr(consume, "_ironaccelerator", False):
        return

    def consume_returns(self: Any, preprocess_types: bool = False) -> Any:
        self._in_returns = True
        try:
            return consume(self, preprocess_types)
        finally:
            self._in_returns = False

    def partition_field(self: Any, line: str) -> Any:
        before, colon, after = partition(self, line)
        if colon and getattr(self, "_in_returns", False) and not _TYPES.fullmatch(before.strip()):
            return line, "", ""
        return before, colon, after

    consume_returns._ironaccelerator = True  # type: ignore[attr-defined]
    GoogleDocstring._consume_returns_section = consume_returns  # type: ignore[method-assign]
    GoogleDocstring._partition_field_on_colon = partition_field  # type: ignore[method-assign]


def setup(app: Any) -> dict[str, Any]:
    from sphinx.ext.napoleon import _process_docstring

    for listener in list(app.events.listeners.get("autodoc-process-docstring", ())):
        if listener.handler is _process_docstring:
            app.disconnect(listener.id)
    app.connect("autodoc-process-docstring", _napoleon)
    _patch_napoleon_returns()
    app.connect("missing-reference", _missing_reference)
    app.connect("autodoc-skip-member", _skip_member)
    app.connect("autodoc-process-bases", _process_bases)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
