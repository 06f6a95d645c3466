"""Every public name of ``ironaccelerator`` has a docstring (issue 25: the API reference is generated from them),
and every method of the trait classes documents its parameters, its result, its errors and its backends.

The public names walked: everything in ``ironaccelerator.__all__``; the public members (methods, class and static
methods, properties) of those classes, inherited ones included; the public functions of the ``nvtx`` module; and
``ironaccelerator.backends.<vendor>.__all__`` (and the members of those classes) for every vendor.  A member's
docstring is ``inspect.getdoc``'s, so an override without one inherits the trait's (as the rendered reference
shows it).  Members that a class inherits from Python itself (``int``, ``tuple``, ``enum``, ``object``) are the
standard library's to document and are not walked.

The trait methods (public methods, not properties, defined on Backend, BackendRegistry, Device, Allocation,
MemoryPool, Stream, Event, Module, Kernel and Graph) must have the Google-style sections of the docstring style
(docs: ISSUE25 plan, rendered by napoleon): ``Args:`` naming every parameter of the signature, ``Returns:`` unless
the return annotation is None, ``Raises:`` and ``Backends:``.

An override of such a method (of Backend, BackendRegistry, Device, Allocation, MemoryPool) in a backend's class
that has a docstring of its own replaces the trait's in the reference, so it must have the same sections.

Each name is a test of its own (the id is the dotted name), so a failure says which name lacks what.
"""

from __future__ import annotations

import importlib
import inspect
import re
import types
from typing import Any, Iterator

import pytest

import ironaccelerator as ia

VENDORS = ("cuda", "hip", "opencl", "metal", "qnn")
TRAITS = ("Backend", "BackendRegistry", "Device", "Allocation", "MemoryPool", "Stream", "Event", "Module", "Kernel",
          "Graph")
SECTIONS_REQUIRED = ("Raises:", "Backends:")

# name -> why it has no docstring / lacks the sections (a handful at most: test_exemptions_are_few)
EXEMPT: dict[str, str] = {}


def _own_code(owner: type) -> bool:
    """Whether a class is this project's (not Python's: int, tuple, Enum, object, ...)."""
    return owner.__module__.split(".")[0] in ("ironaccelerator", "ironaccelerator_runtime")


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    """The public methods and properties of ``cls`` (inherited included) that this project defines."""
    names = {n for k in cls.__mro__ for n in vars(k)}  # (not dir(): an Enum's dir() leaves out its properties)
    for name in sorted(names):
        if name.startswith("_"):
            continue
        owner = next((k for k in cls.__mro__ if name in vars(k)), None)
        if owner is None or not _own_code(owner):
            continue
        raw = vars(owner)[name]
        if isinstance(raw, (staticmethod, classmethod, property, types.FunctionType)):
            yield name, raw


def _doc_of(cls: type, name: str, raw: Any) -> str | None:
    """``inspect.getdoc`` of a member as the reference renders it (an override inherits the base's docstring)."""
    if isinstance(raw, property):
        for k in cls.__mro__:  # the first property of that name with a docstring (getdoc does the same for methods)
            p = vars(k).get(name)
            if isinstance(p, property) and p.__doc__ and p.__doc__.strip():
                return inspect.cleandoc(p.__doc__)
        return None
    return inspect.getdoc(getattr(cls, name))


def _own_doc(obj: Any) -> str | None:
    """A module-level name's docstring: its own, not its type's (a typing alias or an instance would otherwise show
    its class's)."""
    doc: str | None = getattr(obj, "__doc__", None)
    if not doc or not doc.strip():
        return None
    if not isinstance(obj, (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                            types.MethodType)) and doc is getattr(type(obj), "__doc__", None):
        return None
    return doc


def _public_names() -> dict[str, str | None]:
    """Dotted name -> its docstring (None: none) of every public name (see the module docstring)."""
    found: dict[str, str | None] = {}

    def walk_class(qual: str, cls: type) -> None:
        found[qual] = _own_doc(cls)
        for name, raw in _members(cls):
            found[f"{qual}.{name}"] = _doc_of(cls, name, raw)

    def walk(modname: str, names: list[str]) -> None:
        mod = importlib.import_module(modname)
        for n in names:
            obj = getattr(mod, n)
            qual = f"{modname}.{n}"
            if isinstance(obj, type):
                walk_class(qual, obj)
            elif isinstance(obj, types.ModuleType):
                found[qual] = _own_doc(obj)
                for m in getattr(obj, "__all__", [k for k in vars(obj) if not k.startswith("_")]):
                    o = getattr(obj, m)
                    if isinstance(o, type) and _own_code(o):
                        walk_class(f"{qual}.{m}", o)
                    elif isinstance(o, types.FunctionType) and o.__module__ == obj.__name__:
                        found[f"{qual}.{m}"] = _own_doc(o)
            else:
                if not callable(obj) and not hasattr(obj, "__origin__"):
                    continue  # data (a backend's TABLES): its class documents it
                found[qual] = inspect.getdoc(obj) if isinstance(obj, types.MethodType) else _own_doc(obj)

    walk("ironaccelerator", list(ia.__all__))
    for v in VENDORS:
        mod = importlib.import_module(f"ironaccelerator.backends.{v}")
        walk(mod.__name__, list(mod.__all__))
    return found


PUBLIC = _public_names()


def test_the_walk_finds_the_public_surface() -> None:
    """The walk is not vacuous: it reaches the trait methods, the vendor classes and nvtx."""
    for name in ("ironaccelerator.Device.alloc", "ironaccelerator.Stream.launch", "ironaccelerator.DType.size",
                 "ironaccelerator.MemoryPool.stats", "ironaccelerator.nvtx.range", "ironaccelerator.trace",
                 "ironaccelerator.backends.opencl.OpenCLDevice.alloc", "ironaccelerator.backends.cuda.CudaBackend",
                 "ironaccelerator.backends.qnn.QnnModule.graph_names"):
        assert name in PUBLIC, name
    assert len(PUBLIC) > 300, len(PUBLIC)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_name_has_a_docstring(name: str) -> None:
    if name in EXEMPT:
        pytest.skip(EXEMPT[name])
    assert PUBLIC[name], f"{name} has no docstring (what it does, its parameters, returns, raises, backends)"


def _trait_methods() -> dict[str, tuple[inspect.Signature, str | None]]:
    """``Trait.method`` -> (its signature, its docstring) for the public methods each trait class defines."""
    out = {}
    for t in TRAITS:
        cls = getattr(ia, t)
        for name, raw in vars(cls).items():
            if name.startswith("_") or isinstance(raw, property):
                continue
            if not isinstance(raw, (staticmethod, classmethod, types.FunctionType)):
                continue
            fn = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
            out[f"{t}.{name}"] = (inspect.signature(fn), inspect.getdoc(getattr(cls, name)))
    return out


TRAIT_METHODS = _trait_methods()
_ARG_LINE = re.compile(r"^\s+\**([A-Za-z_]\w*)\s*(\([^)]*\))?:")


def _section(doc: str, title: str) -> list[str] | None:
    """The lines of a Google-style section (``Args:``) up to the next section heading; None if absent."""
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == title and not line.startswith(" "):
            body = []
            for rest in lines[i + 1:]:
                if rest and not rest.startswith(" "):
                    break
                body.append(rest)
            return body
    return None


def _problems(sig: inspect.Signature, doc: str | None) -> list[str]:
    if not doc:
        return ["no docstring"]
    problems = []
    params = [p for i, p in enumerate(sig.parameters) if not (i == 0 and p in ("self", "cls"))]
    if params:
        body = _section(doc, "Args:")
        if body is None:
            problems.append(f"no Args: section (parameters: {', '.join(params)})")
        else:
            named = {m.group(1) for line in body if (m := _ARG_LINE.match(line)) and line.startswith("    ")
                     and not line.startswith("     ")}
            missing = [p for p in params if p not in named]
            if missing:
                problems.append(f"Args: does not name {', '.join(missing)}")
    if sig.return_annotation not in ("None", None) and _section(doc, "Returns:") is None:
        problems.append(f"no Returns: section (returns {sig.return_annotation})")
    problems += [f"no {s} section" for s in SECTIONS_REQUIRED if _section(doc, s) is None]
    return problems


@pytest.mark.parametrize("name", sorted(TRAIT_METHODS))
def test_trait_method_documents_args_returns_raises_backends(name: str) -> None:
    if name in EXEMPT:
        pytest.skip(EXEMPT[name])
    sig, doc = TRAIT_METHODS[name]
    problems = _problems(sig, doc)
    assert not problems, f"ironaccelerator.{name}: " + "; ".join(problems)


# the trait classes whose methods' overrides are checked too (test_override_documents_args_returns_raises_backends)
OVERRIDES_OF = ("Backend", "BackendRegistry", "Device", "Allocation", "MemoryPool")


def _overrides() -> dict[str, tuple[inspect.Signature, str]]:
    """``module.Class.method`` -> (signature, docstring) of every override of a trait method (of
    :data:`OVERRIDES_OF`) that a public vendor class reaches and that has a docstring of its own: the reference
    shows that docstring instead of the trait's, so it must say as much."""
    out: dict[str, tuple[inspect.Signature, str]] = {}
    for v in VENDORS:
        mod = importlib.import_module(f"ironaccelerator.backends.{v}")
        for n in mod.__all__:
            cls = getattr(mod, n)
            if not isinstance(cls, type):
                continue
            for t in OVERRIDES_OF:
                base = getattr(ia, t)
                if not issubclass(cls, base):
                    continue
                for name in TRAIT_METHODS.keys() & {f"{t}.{m}" for m in vars(base)}:
                    meth = name.partition(".")[2]
                    owner = next(k for k in cls.__mro__ if meth in vars(k))
                    raw = vars(owner)[meth]
                    fn = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
                    doc: str | None = getattr(fn, "__doc__", None)
                    if owner is base or not doc:
                        continue
                    out[f"{owner.__module__}.{owner.__qualname__}.{meth}"] = (inspect.signature(fn),
                                                                             inspect.cleandoc(doc))
    return out


OVERRIDES = _overrides()


@pytest.mark.parametrize("name", sorted(OVERRIDES))
def test_override_documents_args_returns_raises_backends(name: str) -> None:
    if name in EXEMPT:
        pytest.skip(EXEMPT[name])
    sig, doc = OVERRIDES[name]
    problems = _problems(sig, doc)
    assert not problems, f"{name}: " + "; ".join(problems)


def test_the_section_check_can_fail() -> None:
    """``_problems`` finds what a docstring lacks (the check itself is tested, not only the docstrings)."""

    def f(self: Any, nbytes: int, kind: int = 0) -> int:
        """Do it.

        Args:
            nbytes: bytes.

        Raises:
            Error: never.
        """
        return 0

    found = _problems(inspect.signature(f), inspect.getdoc(f))
    assert found == ["Args: does not name kind", "no Returns: section (returns int)", "no Backends: section"], found
    assert _problems(inspect.signature(f), None) == ["no docstring"]


def test_exemptions_are_few() -> None:
    """The issue allows an exemption list of a handful of names, each with its reason, each still a public name."""
    assert len(EXEMPT) <= 5, EXEMPT
    for name, why in EXEMPT.items():
        assert why.strip(), name
        assert name in PUBLIC or name in TRAIT_METHODS or name in OVERRIDES, f"exempted {name} is not a public name"
