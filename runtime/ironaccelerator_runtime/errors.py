"""The one exception of the substrate: :class:`Error` (its kinds, :class:`ErrorKind`, are generated from
``specs/core.yaml`` into ``ironaccelerator._core``)."""

from __future__ import annotations

from typing import Any

from ironaccelerator._core import ErrorKind


class Error(Exception):
    """The one exception of the substrate: a failed operation or vendor call, and what kind of failure it is.

    ex) ``except ironaccelerator.Error as e: if e.kind is ErrorKind.OUT_OF_MEMORY: ...``

    Every checked operation raises it (a wrong Python *type* for a parameter stays a ``TypeError``); every
    ``_unchecked`` twin returns it instead (:data:`Result`).  The same mistake has the same ``kind`` on every
    backend; the message names the parameter or argument and says what to do.  It pickles with every field (a
    worker process's failure reaches its parent as itself).

    Args:
        kind: what kind of failure, an :class:`ErrorKind`.
        message: what went wrong and what to do (``str(error)``).
        code: keyword-only; the vendor's status code (an int), or None where no vendor call failed.
        function: keyword-only; the C function's public name (``cuMemAlloc``) or the operation's
            (``Stream.launch``); a ``"name: rest"`` string keeps only the name.
        backend: keyword-only; the backend's name (``"CUDA"``, ``"OPENCL"``...), or None.

    Attributes:
        kind: the :class:`ErrorKind`.
        code: the vendor's status code, or None.
        function: the function or operation that failed, or None.
        backend: the backend's name, or None.

    Backends:
        All.  Each vendor spec maps its status codes onto :class:`ErrorKind` (``code`` keeps the vendor's value).
    """

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
    """A device-code compiler's output for a module that built (``#warning``, an unused variable with ``-Wall``).

    Issued (``warnings.warn``, at the line that called ``Device.load_module``) with the log, which
    ``Module.build_log`` keeps, as pyopencl's ``CompilerWarning``; a module loaded from the kernel cache warns
    with the log its compile wrote.  A build that fails raises ``Error(ErrorKind.COMPILE_FAILED)`` instead.
    Silence it with ``warnings.simplefilter("ignore", ironaccelerator.CompilerWarning)``.

    Backends:
        OpenCL (the program's build log) and CUDA (NVRTC's log).  Metal: never (real Metal reports warnings
        through the NSError of a successful ``newLibraryWithSource:options:error:``, which the generated binding
        releases; ``Module.build_log`` stays ""); HIP and QNN load compiled code only.
    """


def _rebuild(kind: ErrorKind, message: str, code: int | None, function: str | None, backend: str | None) -> Error:
    """Error.__reduce__'s constructor (module level: pickle finds it by name)."""
    return Error(kind, message, code=code, function=function, backend=backend)
