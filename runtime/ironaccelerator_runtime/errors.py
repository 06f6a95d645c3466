"""The one exception of the substrate: :class:`Error` (its kinds, :class:`ErrorKind`, are generated from
``specs/core.yaml`` into ``ironaccelerator._core``), and :func:`fail`, the one way the runtime builds one.

The convention: every ``Error`` the hand-written runtime makes comes from ``fail(kind, function, message,
backend)`` (``tests/test_errors_built_one_way.py`` parses the runtime and refuses an ``Error(...)`` built
anywhere else, but for its allow-list, each entry with its reason), so that the same mistake reads the same on
every backend:

- ``function`` is a name, never a sentence: the operation (``"Stream.launch"``, ``"Device.alloc"``) or the vendor
  function (``"clEnqueueNDRangeKernel"``).  It becomes ``Error.function``.
- ``message`` says what went wrong and what to do, naming the parameter or argument.  ``fail`` prefixes it with
  ``"function: "`` exactly once: a message that already starts with the function's name followed by ``":"``,
  ``"("`` or a space (``"Module.kernel('k'): ..."``, ``"Stream.capture is not supported ..."``) is kept as it is;
  write the message without the prefix.
- ``backend`` is whatever the site has at hand: a ``BackendKind``, its name (``"OPENCL"``), a device or backend
  (anything with a ``BackendKind`` ``.kind``), a backend's tables or API object (anything with a ``.name``), or
  None where no backend is involved.  ``Error.backend`` is always the ``BackendKind`` name (or None).
- ``code``: keyword-only, the vendor's status code where a vendor call failed.

``fail`` builds the Error and returns it; the caller raises it (``raise fail(...)``), or returns it from an
``_unchecked`` operation.  It runs only on the failure path: a checked call's success path builds no message
(write ``if bad: raise fail(..., f"...")``, never a message computed before the test).
"""

from __future__ import annotations

from typing import Any, Protocol

from ironaccelerator._core import BackendKind, ErrorKind


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


class _Kinded(Protocol):
    """A device or backend: its ``.kind`` is the BackendKind."""

    @property
    def kind(self) -> BackendKind: ...


class _Named(Protocol):
    """A backend's tables or API object: its ``.name`` is the BackendKind name (``"CUDA"``)."""

    @property
    def name(self) -> str: ...


Backendish = BackendKind | str | _Kinded | _Named | None
"""What :func:`fail` takes as the backend (see the module's docstring)."""


def backend_name(backend: Backendish) -> str | None:
    """The ``Error.backend`` of ``backend``: the BackendKind's name, a str as it is, a device's or backend's
    ``.kind`` name, a tables or API object's ``.name``; None for None."""
    if backend is None or type(backend) is str:
        return backend
    if isinstance(backend, BackendKind):
        return backend.name
    kind = getattr(backend, "kind", None)
    if isinstance(kind, BackendKind):  # a Device or a Backend (an Allocation's .kind is a MemoryKind: not this)
        return kind.name
    name = getattr(backend, "name", None)
    if isinstance(name, str):
        return name
    raise TypeError(f"fail: backend must be a BackendKind, its name, a device or a backend's tables, not "
                    f"{type(backend).__name__}")


def prefixed(function: str, message: str) -> str:
    """``message`` prefixed with ``"function: "``, unless it already starts with the function's name followed by
    ``":"``, ``"("`` or a space."""
    if message.startswith(function) and message[len(function):len(function) + 1] in (":", "(", " "):
        return message
    return f"{function}: {message}"


def fail(kind: ErrorKind, function: str, message: str, backend: Backendish, *, code: int | None = None) -> Error:
    """The :class:`Error` of a failed operation, built the one way (the module's docstring says the convention).

    ex) ``raise fail(ErrorKind.INVALID_VALUE, "Device.alloc", f"nbytes={n} is out of range", self)``

    Args:
        kind: what kind of failure.
        function: the operation's name (``"Stream.launch"``) or the vendor function's; ``Error.function``.
        message: what went wrong and what to do, without the ``"function: "`` prefix (added here, once).
        backend: a BackendKind, its name, a device or backend, a tables or API object, or None;
            ``Error.backend`` is its BackendKind name.
        code: keyword-only; the vendor's status code, where a vendor call failed.
    """
    return Error(kind, prefixed(function, message), code=code, function=function, backend=backend_name(backend))


def as_operation(error: Error, twin: str, function: str) -> Error:
    """``error`` as the Error of the public operation ``function`` where it names ``twin``, the other operation
    that did the work (a checked call raising what its ``_unchecked`` twin returned, or an ``_unchecked`` call
    returning what its checked twin raised): the same kind, code, backend and message, under the name of the
    operation the caller called.  Any other ``error`` (a vendor function's, another operation's) is returned as it
    is.  The failure path only: ``Error.function`` names the operation called, on every backend."""
    if error.function != twin:
        return error
    return fail(error.kind, function, function + str(error)[len(twin):] if str(error).startswith(twin) else str(error),
                error.backend, code=error.code)
