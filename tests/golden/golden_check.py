"""What the golden cases' check scripts share (they run under run_checks.py: ``check_<case>.py MODE [VARIANT]``)."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable

from ironaccelerator import Error


def mode() -> str:
    """The binding mode the case's library must be in: ``api`` (compiled) or ``abi``."""
    return sys.argv[1]


def variant() -> str:
    """The build of the case's impl.c: ``''``, ``no-resolver`` (built with -DGOLDEN_NO_RESOLVER), ``no-match``
    (-DGOLDEN_NO_MATCH) or ``other-major`` (-DGOLDEN_OTHER_MAJOR)."""
    return sys.argv[2] if len(sys.argv) > 2 else ""


def load(case: str) -> Any:
    """The case's generated library (``ironaccelerator.backends.test.<case>``), in the expected mode.  Any:
    the package exists only at test time, and the checks call it with wrong arguments on purpose."""
    lib = importlib.import_module(f"ironaccelerator.backends.test.{case}")
    assert lib.BINDING_MODE == mode(), (lib.BINDING_MODE, mode())
    return lib


def compiled(fn: object) -> bool:
    """``fn`` is a compiled checked wrapper (the fast path in trampolines.c), not the Python one."""
    assert type(fn).__name__ in ("builtin_function_or_method", "function"), type(fn)
    return type(fn).__name__ == "builtin_function_or_method"


def raises(exc: type[BaseException], call: Callable[[], object]) -> None:
    """call() raises exc (or a subclass)."""
    try:
        call()
    except exc:
        return
    raise AssertionError(f"no {exc.__name__}")


def error(call: Callable[[], object]) -> Error:
    """The ironaccelerator.Error that call() raises."""
    try:
        call()
    except Error as e:
        return e
    raise AssertionError("no ironaccelerator.Error")
