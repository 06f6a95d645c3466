"""What ``python -m ironaccelerator`` prints (as clinfo or ``nvidia-smi -L`` do): every backend, available or why
not, its driver/runtime/platform versions, and per device the memory, the largest allocation, the compute units,
the launch limits, the capability flags and tier, and the vendor's own version string; per backend, the operations
of the trait surface it implements (JSON ``operations``: ``Backend.operations()``), each of its library modules' binding mode (``binding:``; JSON ``modules``: "api", the compiled cffi module, or "abi", the
slower fallback, with the reason: see docs/INSTALLING.md); ``--json`` for machines.

Vendor libraries may write to the process's standard output while they load (libQnnHtp's "LIBNATIVE" line): the
enumeration runs with file descriptor 1 pointed at standard error, so that stdout holds only the report.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Any, Iterator

from .traits.registry import BackendRegistry
from .traits.report import binding_modes, device_entry, generated_from, operations, text
from .traits.report import describe as _describe

__all__ = ["binding_modes", "describe", "device_entry", "generated_from", "operations", "text", "main"]


def describe(registry: BackendRegistry | None = None) -> list[dict[str, Any]]:
    """Every backend kind, in order: ``{"backend", "dlpack_device", "available", "error" (why not, or why no
    devices), "error_kind", "versions", "devices": [device_entry, ...], "operations": [the trait operations it
    implements (:func:`operations`), "generated_from": generated_from(...), "modules": [its library modules and their
    binding modes (:func:`binding_modes`)]}``, of ``registry`` (default: ``BackendRegistry.default()``).  The
    report itself is ``traits/report.py``'s, which the registry's :meth:`~BackendRegistry.report` prints: this
    module is the command, above the registry, and the registry never imports it."""
    return _describe(registry or BackendRegistry.default())


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """File descriptor 1 pointed at 2 for the block (what native libraries print while loading)."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # no real stdout (an embedding host): nothing to protect
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ironaccelerator", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the inventory as JSON")
    args = parser.parse_args(argv)
    with _stdout_to_stderr():
        entries = describe()
    if args.json:
        print(json.dumps(entries, indent=2))
    else:
        print("\n".join(text(entries)))
    return 0
