"""The resolver kinds a library spec may name: the runtime's declarations
(``ironaccelerator_runtime.resolver_kinds``), loaded from its file, and the kinds the generator still implements
itself (``table``, ``objc``: ``resolver_kinds.EXCEPTIONS``).  The generator names no declared kind: it reads each
one's keys, shapes, C defines and Python class from its declaration."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from . import data

RESOLVER_KINDS_FILE = data.RUNTIME_PACKAGE / "resolver_kinds.py"
_NAME = "_ironaccel_gen_resolver_kinds"  # one module for every copy of the generator (generator, ironaccelerator_gen)
RUNTIME_NAME = "ironaccelerator_runtime.resolver_kinds"


def _is_this_file(m: ModuleType | None) -> bool:
    where = getattr(m, "__file__", None)
    return where is not None and Path(where).resolve() == RESOLVER_KINDS_FILE.resolve()


def module() -> ModuleType:
    """The runtime's resolver_kinds module, loaded once from its file (not by importing the runtime package, which
    imports the generated one); its ``KINDS`` is the registry a new kind is :func:`register` ed in.  One registry
    per process: where the runtime package imported (or will import) that same file as
    ``ironaccelerator_runtime.resolver_kinds``, that module is this one, so a kind registered through either is
    seen by both."""
    found = sys.modules.get(_NAME)
    if found is not None:
        return found
    found = sys.modules.get(RUNTIME_NAME)
    if not _is_this_file(found):
        spec = importlib.util.spec_from_file_location(_NAME, RESOLVER_KINDS_FILE)
        assert spec is not None and spec.loader is not None
        found = importlib.util.module_from_spec(spec)
        sys.modules[_NAME] = found  # (dataclasses resolve the module's annotations through sys.modules)
        spec.loader.exec_module(found)
        runtime = importlib.util.find_spec("ironaccelerator_runtime") if RUNTIME_NAME not in sys.modules else None
        if runtime is not None and runtime.origin and \
                (Path(runtime.origin).parent / "resolver_kinds.py").resolve() == RESOLVER_KINDS_FILE.resolve():
            sys.modules[RUNTIME_NAME] = found  # the runtime package, imported later, finds it there
    assert found is not None
    sys.modules[_NAME] = found
    return found


def declared() -> dict[str, Any]:
    """name -> ResolverKind, in declaration order (``dlsym`` first)."""
    kinds: dict[str, Any] = module().KINDS
    return kinds


def exceptions() -> tuple[str, ...]:
    names: tuple[str, ...] = module().EXCEPTIONS
    return names


def names() -> tuple[str, ...]:
    """Every kind a spec may name: the declared ones, then the generator's own."""
    return (*declared(), *exceptions())


def register(kind: Any) -> Any:
    """Declare ``kind`` (a ``resolver_kinds.ResolverKind``) in the registry the generator reads."""
    return module().register(kind)


__all__ = ["RESOLVER_KINDS_FILE", "declared", "exceptions", "module", "names", "register"]
