"""Errors built one way (issue 26 item 7): the hand-written runtime builds every ``Error`` through
``errors.fail(kind, function, message, backend)``, which names the backend by its ``BackendKind`` name, sets the
function and prefixes the message with it once (``runtime/ironaccelerator_runtime/errors.py``'s docstring holds the
convention).  This module parses the runtime and refuses an ``Error(...)`` built anywhere else but the allow-list,
and checks ``fail`` itself; the same mistake's Error on every backend is checked in tests/test_conformance.py
(``test_the_same_mistake_builds_its_error_one_way``)."""

from __future__ import annotations

import ast
import pathlib

import pytest

from ironaccelerator import BackendKind, ErrorKind
from ironaccelerator_runtime.errors import Error, backend_name, fail, prefixed

RUNTIME = pathlib.Path(__file__).resolve().parents[1] / "runtime" / "ironaccelerator_runtime"

# (file relative to the runtime, the enclosing function's qualified name, or "*" for the whole file) -> why that
# site builds an Error itself
ALLOWED: dict[tuple[str, str], str] = {
    ("errors.py", "*"): "defines Error and fail (and unpickles an Error with its fields as they were)",
    ("loader.py", "Binding.invalid"):
        "the compiled fast path's INVALID_VALUE must equal the one the generated Python wrapper builds itself "
        "(templates/library/__init__.py.j2, a message naming the parameter, no prefix): test_fast_path compares them",
    ("backends/qnn/module.py", "QnnModule.__init__"):
        "re-raises the vendor's Error (QnnSystemContext_getBinaryInfo) keeping its kind, function and code, "
        "while the message names the operation (Device.load_module: ...)",
    ("objc.py", "ObjcBinding.open"):
        "a library that cannot be loaded, before any function: its Error names no function (Error.function None)",
    ("objc.py", "ObjcBinding.ready"):
        "the Objective-C runtime's load error, before any function: it names no function (Error.function None)",
}


def _direct_errors() -> dict[tuple[str, str], list[int]]:
    """Each (file, enclosing qualified name) that calls ``Error(...)`` (or ``errors.Error(...)``), with its lines."""
    found: dict[tuple[str, str], list[int]] = {}

    def visit(node: ast.AST, path: str, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, path, [*scope, child.name])
                continue
            if isinstance(child, ast.Call):
                f = child.func
                if isinstance(f, ast.Name) and f.id == "Error" or isinstance(f, ast.Attribute) and f.attr == "Error":
                    found.setdefault((path, ".".join(scope) or "<module>"), []).append(child.lineno)
            visit(child, path, scope)

    for p in sorted(RUNTIME.rglob("*.py")):
        visit(ast.parse(p.read_text(), str(p)), p.relative_to(RUNTIME).as_posix(), [])
    return found


def test_runtime_builds_no_error_but_through_fail() -> None:
    direct = {site: lines for site, lines in _direct_errors().items()
              if site not in ALLOWED and (site[0], "*") not in ALLOWED}
    assert not direct, ("build these Errors with errors.fail(kind, function, message, backend) (or allow-list the "
                        "site in ALLOWED with the reason): "
                        + "; ".join(f"{f}:{','.join(map(str, lines))} ({q})" for (f, q), lines in direct.items()))


def test_the_allow_list_names_only_sites_that_exist() -> None:
    """An entry whose site no longer builds an Error goes (a stale entry would allow a new site unseen)."""
    found = _direct_errors()
    stale = [site for site in ALLOWED
             if site not in found and not (site[1] == "*" and any(f == site[0] for f, _ in found))]
    assert not stale, f"allow-list entries with no direct Error(...) left: {stale}"


class _Device:
    kind = BackendKind.QNN


class _Tables:
    name = "CUDA"


@pytest.mark.parametrize(("given", "name"), [
    (BackendKind.OPENCL, "OPENCL"), ("METAL", "METAL"), (_Device(), "QNN"), (_Tables(), "CUDA"), (None, None)])
def test_fail_names_the_backend_by_its_backend_kind_name(given: object, name: str | None) -> None:
    e = fail(ErrorKind.INVALID_VALUE, "Device.alloc", "nbytes=0 is out of range", given)  # type: ignore[arg-type]
    assert isinstance(e, Error) and e.backend == name and e.function == "Device.alloc" and e.code is None


def test_fail_refuses_a_backend_it_cannot_name() -> None:
    with pytest.raises(TypeError, match="backend"):
        fail(ErrorKind.INVALID_VALUE, "Device.alloc", "x", 3.5)  # type: ignore[arg-type]


@pytest.mark.parametrize(("message", "shown"), [
    ("nbytes=0 is out of range", "Device.alloc: nbytes=0 is out of range"),
    ("Device.alloc: nbytes=0 is out of range", "Device.alloc: nbytes=0 is out of range"),
    ("Device.alloc(MemoryKind.UNIFIED): unsupported", "Device.alloc(MemoryKind.UNIFIED): unsupported"),
    ("Device.alloc is not supported", "Device.alloc is not supported"),
    ("Device.alloc_unchecked: x", "Device.alloc: Device.alloc_unchecked: x"),  # another name: not this one's prefix
])
def test_fail_prefixes_the_message_with_its_function_once(message: str, shown: str) -> None:
    assert prefixed("Device.alloc", message) == shown
    e = fail(ErrorKind.OUT_OF_MEMORY, "Device.alloc", message, "OPENCL", code=-4)
    assert str(e) == shown and e.code == -4 and e.kind is ErrorKind.OUT_OF_MEMORY


def test_backend_name_of_a_backend_kind_is_its_name() -> None:
    assert [backend_name(k) for k in BackendKind] == [k.name for k in BackendKind]
