"""Compiled code: compile options, :class:`Module` (a loaded program), :class:`Kernel`, its
:class:`KernelAttributes`, captured :class:`Graph` s, and the compiler log a build leaves."""

from __future__ import annotations

import os
import re
from typing import Any, Mapping, TYPE_CHECKING

from ironaccelerator._core import BackendKind, ErrorKind

from ..errors import CompilerWarning, Error, as_operation, fail
from ..records import record
from .checks import _kind_of, _not_picklable, _owner, unsupported

if TYPE_CHECKING:
    from .stream import Stream
    from .values import Result


_MACRO = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@record(kw_only=True)
class CompileOptions:
    """``load_module``'s compile options, checked.  ex) ``CompileOptions(options=("-w",), defines=(("N", "4"),))``

    ``defines``: (name, value or None) pairs in the caller's order; ``include_dirs``: absolute paths."""

    __slots__ = ("options", "defines", "include_dirs", "name_expressions")
    options: tuple[str, ...]
    defines: tuple[tuple[str, str | None], ...]
    include_dirs: tuple[str, ...]
    name_expressions: tuple[str, ...]

    def __init__(self, *, options: tuple[str, ...] = (), defines: tuple[tuple[str, str | None], ...] = (),
                 include_dirs: tuple[str, ...] = (), name_expressions: tuple[str, ...] = ()) -> None:
        _set = object.__setattr__
        _set(self, "options", options)
        _set(self, "defines", defines)
        _set(self, "include_dirs", include_dirs)
        _set(self, "name_expressions", name_expressions)

    def __bool__(self) -> bool:
        return bool(self.options or self.defines or self.include_dirs or self.name_expressions)

    def flags(self) -> list[str]:
        """The compiler flags: ``options``, then ``-DNAME[=VALUE]`` per define, then ``-I<dir>`` per directory."""
        out = list(self.options)
        out += [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in self.defines]
        out += [f"-I{d}" for d in self.include_dirs]
        return out


def compile_options(options: Any = (), defines: Any = None, include_dirs: Any = (), name_expressions: Any = (),
                    backend: BackendKind | str | None = None,
                    function: str = "Device.load_module") -> CompileOptions:
    """Check ``load_module``'s option arguments (no vendor call): ``INVALID_VALUE`` naming the bad one.
    ``options``/``name_expressions``: sequences of str (a single str is refused: it would be its characters);
    ``defines``: a mapping of macro names to str, int, float, bool or None; ``include_dirs``: str or path-like."""
    name = backend.name if isinstance(backend, BackendKind) else backend

    def bad(what: str) -> Error:
        return fail(ErrorKind.INVALID_VALUE, function, what, name)

    def strings(v: Any, what: str) -> tuple[str, ...]:
        if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)):
            raise bad(f"{what} must be a list or tuple of str, not {type(v).__name__} ({v!r:.80})")
        for x in v:
            if not isinstance(x, str):
                raise bad(f"{what} must hold str, not {type(x).__name__} ({x!r:.80})")
            if "\0" in x:
                raise bad(f"{what}: {x!r} contains a NUL character")
        return tuple(v)

    opts = strings(options, "options")
    if any(not o for o in opts):
        raise bad("options: an empty option")
    names = strings(name_expressions, "name_expressions")
    defs: list[tuple[str, str | None]] = []
    if defines is not None:
        if not isinstance(defines, Mapping):
            raise bad(f"defines must be a mapping (dict) of macro names to values, not {type(defines).__name__}")
        for k, v in defines.items():
            if not isinstance(k, str) or not _MACRO.match(k):
                raise bad(f"defines: {k!r} is not a macro name")
            if v is None:
                defs.append((k, None))
            elif isinstance(v, bool):
                defs.append((k, "1" if v else "0"))
            elif isinstance(v, (int, float, str)):
                text = str(v)
                if "\0" in text or "\n" in text:
                    raise bad(f"defines: the value of {k} contains a NUL or newline")
                defs.append((k, text))
            else:
                raise bad(f"defines: the value of {k} must be str, int, float, bool or None, not {type(v).__name__}")
    if isinstance(include_dirs, (str, bytes, os.PathLike)) or not isinstance(include_dirs, (list, tuple)):
        raise bad(f"include_dirs must be a list or tuple of paths, not {type(include_dirs).__name__}")
    dirs = []
    for d in include_dirs:
        if not isinstance(d, (str, os.PathLike)) or isinstance(d, bytes):
            raise bad(f"include_dirs must hold str or path-like objects, not {type(d).__name__} ({d!r:.80})")
        p = os.fspath(d)
        if not isinstance(p, str) or not p or "\0" in p:
            raise bad(f"include_dirs: {d!r} is not a path")
        dirs.append(os.path.abspath(p))
    return CompileOptions(options=opts, defines=tuple(defs), include_dirs=tuple(dirs), name_expressions=names)


@record()
class KernelAttributes:
    """What the compiler made of a kernel, as its vendor reports it (:attr:`Kernel.attributes`); a field is None
    where this vendor does not report it.  A frozen value: equal each time it is read.

    Attributes:
        max_threads_per_block: the most threads one block (work-group, threadgroup) of this kernel may have.
        preferred_multiple: block sizes that are a multiple of it run best (warp size, OpenCL's preferred
            work-group size multiple, Metal's thread execution width).
        registers: registers per thread (CUDA/HIP).
        static_shared_mem: bytes of shared / local / threadgroup memory the code declares (CUDA/HIP, OpenCL).
        local_mem: bytes of private (local, spill) memory per thread (CUDA/HIP, OpenCL).
        const_mem: bytes of constant memory (CUDA/HIP).
        max_dynamic_shared_mem: the most dynamic shared memory a launch may add (CUDA/HIP).

    Backends:
        CUDA/HIP: every field (``cuFuncGetAttribute``/``hipFuncGetAttribute``; ``preferred_multiple`` the device's
        warp size).  OpenCL: ``clGetKernelWorkGroupInfo`` (no registers, constant memory or dynamic limit).
        Metal: ``maxTotalThreadsPerThreadgroup`` and ``threadExecutionWidth`` only.  QNN: none
        (:attr:`Kernel.attributes` is ``UNSUPPORTED``).
    """

    __slots__ = ("max_threads_per_block", "preferred_multiple", "registers", "static_shared_mem", "local_mem",
                 "const_mem", "max_dynamic_shared_mem")
    max_threads_per_block: int  # the most threads one block (work-group, threadgroup) of it may have
    preferred_multiple: int | None  # block sizes that are a multiple run best: warp, SIMD or execution width
    registers: int | None  # per thread
    static_shared_mem: int | None  # bytes of shared / local / threadgroup memory the code declares
    local_mem: int | None  # bytes of private (local, spill) memory per thread
    const_mem: int | None  # bytes of constant memory
    max_dynamic_shared_mem: int | None  # the most dynamic shared memory a launch may add

    def __init__(self, max_threads_per_block: int, preferred_multiple: int | None = None, registers: int | None = None,
                 static_shared_mem: int | None = None, local_mem: int | None = None, const_mem: int | None = None,
                 max_dynamic_shared_mem: int | None = None) -> None:
        _set = object.__setattr__
        _set(self, "max_threads_per_block", max_threads_per_block)
        _set(self, "preferred_multiple", preferred_multiple)
        _set(self, "registers", registers)
        _set(self, "static_shared_mem", static_shared_mem)
        _set(self, "local_mem", local_mem)
        _set(self, "const_mem", const_mem)
        _set(self, "max_dynamic_shared_mem", max_dynamic_shared_mem)


class Graph:
    """Work recorded by :meth:`Stream.capture`, instantiated: :meth:`launch` replays it; :meth:`close` releases
    it (also on drop, and at the end of a ``with graph:`` block).  Not picklable.

    Backends:
        CUDA/HIP (stream capture, ``cuGraphInstantiate``/``hipGraphInstantiateWithFlags``) and Vulkan (reusable
        command buffers recorded by the capture); every other backend's :meth:`Stream.capture` is ``UNSUPPORTED``,
        so no Graph exists there.
    """

    def __reduce__(self) -> Any:  # (a driver handle of this process: no pickle, no copy.copy)
        raise _not_picklable(self, "Graph")

    # The allocations the recorded work uses (id -> allocation; a slice or a pool block as given, whose _freed
    # follows its allocation's): held, so that dropping them does not free memory the graph writes, and tested
    # by launch, which refuses a replay once one was freed (its memory may be another allocation's by then).
    # A backend with graphs sets it to {} and records into it with _hold while capturing.
    _held: dict[int, Any]

    def _hold(self, *allocations: Any) -> None:
        held = self._held
        for a in allocations:
            held[id(a)] = a

    def _freed_error(self, what: str, backend: Any) -> Error | None:
        """The Error of a replay after an allocation the graph's work uses was freed (None: all are live)."""
        for a in self._held.values():
            if a._freed:
                return fail(ErrorKind.INVALID_HANDLE, what, f"{a!r:.80}, which the graph's work uses, was freed: "
                            "capture the work again with live allocations", backend)
        return None

    def launch(self, stream: Stream) -> None:
        """Replay the recorded work on ``stream``, in its order (asynchronous, as the recorded work was).

        Args:
            stream: a stream of the graph's device.  CUDA/HIP also take None (default there): the stream it was
                captured on.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` when ``stream`` is not a stream of the graph's device;
                ``ErrorKind.INVALID_HANDLE`` when the graph was closed (or its capture failed) or the device was
                closed, or when an allocation the graph's work uses (a kernel argument, a copy's or fill's
                device side, a slice's or pool block's allocation) was freed since the capture, inside it or
                after it (a pool block freed is its pool's to hand out again); the driver's status of
                ``cuGraphLaunch``/``hipGraphLaunch``; ``ErrorKind.UNSUPPORTED`` on a backend without graphs.

        Backends:
            CUDA/HIP (``cuGraphLaunch``/``hipGraphLaunch``), Vulkan (``vkQueueSubmit`` of the recorded command
            buffers).  Elsewhere ``UNSUPPORTED``.
        """
        raise unsupported(_kind_of(self), "Graph.launch")

    def launch_unchecked(self, stream: Stream | None = None) -> Result[None]:
        """Replay the recorded work on ``stream`` as :meth:`launch` does, returning the Error instead of raising
        it (the ``_unchecked`` contract: docs/UNCHECKED.md), for a loop that replays a graph many times.

        It skips nothing: every check of :meth:`launch` stands between a replay and memory the caller no longer
        owns (a freed allocation, a closed graph or device, another device's stream), so each is still refused,
        with the same ``ErrorKind``, under this operation's name.

        Args:
            stream: as for :meth:`launch`.

        Returns:
            None on success, else the :class:`Error` :meth:`launch` raises for the same mistake.

        Raises:
            Error: never.

        Backends:
            CUDA/HIP and Vulkan, as :meth:`launch`.  Elsewhere no Graph exists (``Stream.capture`` is
            ``UNSUPPORTED``); the base class returns ``UNSUPPORTED``.
        """
        try:
            self.launch(stream)  # type: ignore[arg-type]  # (CUDA/HIP take None: the capturing stream)
        except Error as e:
            return as_operation(e, "Graph.launch", "Graph.launch_unchecked")
        return None

    def close(self) -> None:
        """Release the graph and its instantiation now (idempotent; dropping the graph does the same).

        Raises:
            Error: never; a second close does nothing.

        Backends:
            CUDA/HIP (``cuGraphExecDestroy`` and ``cuGraphDestroy``, HIP's likewise), Vulkan (the command
            buffers, once no batch uses them); the base class does nothing.
        """

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{_owner(self)}>"


class Kernel:
    """A device function ready to launch, from :meth:`Module.kernel`; launch it with
    ``stream.launch(KernelLaunch(kernel, LaunchDims(...), args))``.  Not picklable.

    Attributes:
        name: the name it was looked up by.
        num_args: how many arguments a launch must pass, or None where the backend cannot say (then the count
            is not checked): CUDA with a driver before 12.4 (no ``cuFuncGetParamInfo``), HIP always (no
            parameter introspection), Metal when the kernel's signature could not be read from its source.

    Backends:
        CUDA/HIP: a ``CUfunction``/``hipFunction_t``.  OpenCL: a ``cl_kernel`` (one per Kernel object, its
        arguments cached between launches).  Metal: an ``MTLComputePipelineState``.  QNN: a graph of a context
        binary (``QnnGraph_retrieve``; its tensors are the arguments).
    """

    def __reduce__(self) -> Any:  # (a driver handle of this process: no pickle, no copy.copy)
        raise _not_picklable(self, "Kernel")

    name: str
    num_args: int | None = None

    @property
    def attributes(self) -> KernelAttributes:
        """What the compiler made of the kernel, a :class:`KernelAttributes` (``UNSUPPORTED`` on QNN, whose graphs
        report none; see :class:`KernelAttributes` for the fields each vendor fills)."""
        raise unsupported(_kind_of(self), "Kernel.attributes")

    def max_active_blocks(self, block_threads: int, dynamic_shared_mem: int = 0) -> int:
        """Occupancy: how many blocks of ``block_threads`` threads can be resident on one multiprocessor at once.

        Args:
            block_threads: threads per block, an integer in 1..2**31-1.
            dynamic_shared_mem: bytes of dynamic shared memory per block (``LaunchDims.shared_mem``), >= 0.

        Returns:
            The number of resident blocks per multiprocessor.

        Raises:
            TypeError: ``block_threads`` or ``dynamic_shared_mem`` is not an integer.
            Error: ``ErrorKind.INVALID_VALUE`` when ``block_threads`` < 1 or > 2**31-1, or
                ``dynamic_shared_mem`` < 0; the driver's status of the occupancy call; ``ErrorKind.UNSUPPORTED``
                on a backend without an occupancy query.

        Backends:
            CUDA (``cuOccupancyMaxActiveBlocksPerMultiprocessor``) and HIP
            (``hipModuleOccupancyMaxActiveBlocksPerMultiprocessor``).  OpenCL, Metal, QNN: ``UNSUPPORTED``.
        """
        raise unsupported(_kind_of(self), "Kernel.max_active_blocks")

    def __repr__(self) -> str:
        n = getattr(self, "num_args", None)
        args = "" if n is None else f" ({n} argument{'s' if n != 1 else ''})"
        return f"<{type(self).__name__} {getattr(self, 'name', '?')!r}{args}{_owner(self)}>"


class Module:
    """Compiled device code, from :meth:`Device.load_module`; :meth:`kernel` looks up its kernels.  Not picklable.

    Attributes:
        from_cache: whether it was loaded from the on-disk kernel cache (no compile).
        build_log: what the compiler said about a build that succeeded ("" when nothing; a non-empty log is also
            issued as a :class:`CompilerWarning`).  A module loaded from the kernel cache has the log its
            compile wrote, kept with the cache entry, and warns the same (a warm load says what a cold one said).

    Backends:
        CUDA/HIP: a ``CUmodule``/``hipModule_t`` (CUDA: from PTX, a cubin or CUDA C source compiled by NVRTC;
        HIP: from a code object, hipRTC is not bound).  OpenCL: a ``cl_program`` built from source.  Metal: an ``MTLLibrary`` from Metal Shading
        Language source.  QNN: a context of a context binary (``QnnContext_createFromBinary``), its graphs the
        kernels.
    """

    def __reduce__(self) -> Any:  # (a driver handle of this process: no pickle, no copy.copy)
        raise _not_picklable(self, "Module")

    from_cache: bool = False
    build_log: str = ""

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{_owner(self)}>"

    def kernel(self, name: str) -> Kernel:
        """The kernel (device function, QNN graph) called ``name`` in this module.

        Args:
            name: the kernel's name: its symbol (an ``extern "C"`` name for C++), or on CUDA/HIP a name
                expression given to ``load_module(name_expressions=...)`` such as ``"axpy<float>"``; on QNN a
                graph name (``QnnModule.graph_names``).

        Returns:
            A new :class:`Kernel` (each call makes one; OpenCL kernels keep their own argument state).

        Raises:
            TypeError: ``name`` is not a str.
            Error: ``ErrorKind.INVALID_VALUE`` when the module has no kernel of that name, or the name holds a
                NUL character or is not valid UTF-8 (every backend alike); ``ErrorKind.INVALID_HANDLE`` when the
                device was closed (QNN: also when the module was closed); Metal: the kind of the pipeline
                compiler's ``NSError``; the vendor's status otherwise; ``ErrorKind.UNSUPPORTED`` on a backend
                without modules.

        Backends:
            All.  CUDA/HIP: ``cuModuleGetFunction``/``hipModuleGetFunction``.  OpenCL: ``clCreateKernel``.
            Metal: ``newFunctionWithName:`` and ``newComputePipelineStateWithFunction:error:``.  QNN:
            ``QnnGraph_retrieve``.
        """
        raise unsupported(_kind_of(self), "Module.kernel")

    def save(self) -> bytes:
        """The module as a binary that :meth:`Device.load_module` takes back, in this process or another.

        Returns:
            The binary, bytes.

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` when the module or its device was closed; the vendor's status
                where serializing fails; ``ErrorKind.UNSUPPORTED`` on a backend whose modules are not saved.

        Backends:
            QNN: the context binary (``QnnContext_getBinarySize``/``QnnContext_getBinary`` for a context made in
            this process; a module loaded from a binary returns those bytes, as libQnnHtp refuses to serialize a
            context it deserialized).  Elsewhere ``UNSUPPORTED`` (the kernel cache keeps compiled binaries).
        """
        raise unsupported(_kind_of(self), "Module.save")


_RUNTIME_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # ironaccelerator_runtime/


_LOG_LINES = 40  # of a long compiler log, what the warning shows (Module.build_log keeps all)


def compiler_log(module: Module, log: str | bytes, backend: str, *, cached: bool = False) -> None:
    """Keep a successful build's compiler output as ``module.build_log`` and, if there is any, issue it as a
    :class:`CompilerWarning` attributed to the caller of ``load_module`` (the first frame outside this package)."""
    if isinstance(log, bytes):
        log = log.decode("utf-8", "replace")
    log = log.rstrip("\0").strip("\n")
    module.build_log = log
    if not log.strip():
        return
    import sys
    import warnings

    import ironaccelerator._core as core

    ours = (_RUNTIME_DIR + os.sep, os.path.dirname(os.path.abspath(core.__file__)) + os.sep)
    level, frame = 2, sys._getframe(1)  # stacklevel 2: compiler_log's caller
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(ours):
        frame, level = frame.f_back, level + 1
    lines = log.splitlines()
    shown = "\n".join(lines[:_LOG_LINES]) + (f"\n[... {len(lines) - _LOG_LINES} more lines in Module.build_log]"
                                               if len(lines) > _LOG_LINES else "")
    where = " (loaded from the kernel cache; the log of its compile)" if cached else ""
    warnings.warn(f"{backend} compiler output for a module that built{where}:\n{shown}", CompilerWarning,
                  stacklevel=level)
