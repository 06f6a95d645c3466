"""Located diagnostics: every user error is ``file:line:col: message``.

The compiler collects as many errors as it can in one run and then raises
:class:`UserError`; the CLI prints them and exits with status 2.  Nothing that
a bad spec or header can trigger may escape as a Python traceback.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

from .ir import Location


@dataclass(frozen=True, slots=True, kw_only=True)
class Diagnostic:
    """One error or warning at a location."""

    location: Location
    message: str
    severity: str = "error"

    def __post_init__(self) -> None:
        # a tool that knows only the line (gcc: col 0) or nothing (libclang: 0:0) still gives a location
        # that editors and `file:line:col` parsers accept: line and column count from 1
        loc = self.location
        if loc.line < 1 or loc.col < 1:
            object.__setattr__(self, "location", replace(loc, line=max(1, loc.line), col=max(1, loc.col)))

    def __str__(self) -> str:
        prefix = "" if self.severity == "error" else f"{self.severity}: "
        if self.location.file.startswith("--"):  # a command-line option, not a file: no line and column to give
            return f"ironaccel-gen: {self.location.file}: {prefix}{self.message}"
        return f"{self.location}: {prefix}{self.message}"


class UserError(Exception):
    """A batch of diagnostics caused by the user's input (exit status 2)."""

    def __init__(self, diagnostics: Iterable[Diagnostic]):
        self.diagnostics = tuple(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))


# More errors than this in one collection (one spec, one library) are cut short: past the first hundred they
# are almost always the same mistake repeated, and collecting them all costs time and memory without bound.
MAX_ERRORS = 100


class Collector:
    """Accumulates diagnostics; :meth:`check` raises if any error was added, and :meth:`error` raises
    once :data:`MAX_ERRORS` have been added (with a last diagnostic saying so)."""

    def __init__(self) -> None:
        self.items: list[Diagnostic] = []

    def error(self, location: Location, message: str) -> None:
        if len(self.items) >= MAX_ERRORS:
            self.items.append(Diagnostic(location=location,
                                         message=f"too many errors (more than {MAX_ERRORS}); stopping here"))
            raise UserError(self.items)
        self.items.append(Diagnostic(location=location, message=message))

    def check(self) -> None:
        if self.items:
            raise UserError(self.items)


def suggest(name: str, candidates: Iterable[str]) -> str:
    """A `` (did you mean 'x'?)`` suffix naming the closest candidate, or ``''``."""
    close = difflib.get_close_matches(name, [c for c in candidates if c != name], n=1, cutoff=0.75)  # (not itself)
    return f" (did you mean '{close[0]}'?)" if close else ""


def as_given(loc: Location, spec_dir: Path) -> Location:
    """``loc`` naming its spec as the user named the spec directory (``--specs /tmp/x`` -> ``/tmp/x/cuda/a.yaml``):
    the generator names specs relative to the directory's parent (``x/cuda/a.yaml``), which is what the generated
    files print, but a message must name a file one can open from here."""
    prefix = Path(os.path.abspath(spec_dir)).name + "/"
    given = spec_dir.as_posix().rstrip("/") + "/"
    if given == prefix or not loc.file.startswith(prefix):
        return loc
    return replace(loc, file=given + loc.file[len(prefix):])
