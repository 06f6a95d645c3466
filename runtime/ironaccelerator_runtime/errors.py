"""The one exception of the substrate: :class:`Error` (its kinds, :class:`ErrorKind`, are generated from
``specs/core.yaml`` into ``ironaccelerator._core``)."""

from __future__ import annotations

from typing import Any

from ironaccelerator._core import ErrorKind


class Error(Exception):
    """A failed vendor call: ``.kind`` (ErrorKind), ``.code`` (the vendor's int or None),
    ``.function`` (the C function's public name, or the operation's: ``Stream.launch``) and ``.backend`` (e.g.
    ``'CUDA'``)."""

    __slots__ = ("kind", "code", "function", "backend")

    def __init__(self, kind: ErrorKind, message: str, *, code: int | None = None, function: str | None = None,
                 backend: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.code = code
        # a name, never a sentence: a message prefix passed as the function ("Stream.launch: argument 1 (...)")
        # names its operation (the message keeps the rest)
        self.function = function.partition(": ")[0] if function is not None and ": " in function else function
        self.backend = backend

    def __reduce__(self) -> tuple[Any, ...]:
        # every field, so that an Error survives pickle (a ProcessPoolExecutor worker's failure reaches the
        # parent as itself, not as BrokenProcessPool) and copy.copy/deepcopy; the state dict carries any
        # attribute set later (exception notes, __traceback__ is not pickled)
        return (_rebuild, (self.kind, str(self), self.code, self.function, self.backend), self.__dict__ or None)

    def __repr__(self) -> str:
        return (f"Error(kind={self.kind.name}, code={self.code!r}, function={self.function!r}, "
                f"backend={self.backend!r}, message={str(self)!r})")


class CompilerWarning(UserWarning):
    """A device-code compiler's output for a module that built (``#warning``, an unused variable with ``-Wall``):
    issued by ``Device.load_module`` with the log, which ``Module.build_log`` keeps (as pyopencl's
    ``CompilerWarning``).  Silence it with ``warnings.simplefilter("ignore", ironaccelerator.CompilerWarning)``."""


def _rebuild(kind: ErrorKind, message: str, code: int | None, function: str | None, backend: str | None) -> Error:
    """Error.__reduce__'s constructor (module level: pickle finds it by name)."""
    return Error(kind, message, code=code, function=function, backend=backend)
