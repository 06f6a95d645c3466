"""A kernel launch's configuration: :class:`LaunchDims`, typed :class:`Scalar` arguments and the
:class:`KernelLaunch` that ``Kernel.launch_config`` builds and ``Stream.launch`` takes."""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Sequence, SupportsIndex, TYPE_CHECKING

from ironaccelerator._core import BackendKind, DType, ErrorKind

from ..errors import Error, fail
from ..integers import _integer
from ..records import record
from .values import _SIZE_MAX

if TYPE_CHECKING:
    from .values import DeviceLimits
    from .module import Kernel


def _dims(v: SupportsIndex | Sequence[SupportsIndex], what: str) -> tuple[int, int, int]:
    if isinstance(v, (str, bytes, bytearray, memoryview)):  # iterable, but not dimensions (b"x" is not (120,))
        t: tuple[Any, ...] = ()
    else:
        try:
            t = (v,) if _integer(v) is not None else tuple(v)  # type: ignore[arg-type]
        except TypeError:  # not an int nor iterable (a float, None): the same INVALID_VALUE as a bad sequence
            t = ()
    ints = tuple(_integer(x) for x in t)
    if not 1 <= len(t) <= 3 or None in ints:
        raise fail(ErrorKind.INVALID_VALUE, "LaunchDims", f"{what} must be an int or 1-3 ints, got {v!r}", None)
    return (ints + (1, 1))[:3]  # type: ignore[return-value]


@record()
class LaunchDims:
    """The size of a launch: a grid of blocks, each a block of threads, each 3-D (an int means ``(n, 1, 1)``),
    plus dynamic shared memory and launch options.  Immutable, hashable and picklable; checked when made.

    ex) ``LaunchDims(grid=(n + 255) // 256, block=256)``

    CUDA/HIP: ``grid`` and ``block`` are the launch's grid and block dimensions.  OpenCL: every launch is 3-D
    (``get_work_dim()`` is 3) with, per dimension, global size = grid x block and local size = block, always
    passed explicitly (the runtime never picks the local size), so ``get_num_groups`` = grid and the global
    size is a multiple of the local size by construction.  For a work size ``n`` that is not a multiple of
    a chosen block, launch ``grid = ceil(n / block)`` and test ``i < n`` in the kernel, or pass ``block=1``
    and ``grid=n`` (work-groups of one item).  Metal: ``dispatchThreadgroups`` of ``grid`` threadgroups of
    ``block`` threads.  QNN: graphs have no geometry: only ``LaunchDims()``.

    Args:
        grid: blocks per dimension: an int or 1-3 ints (missing dimensions are 1).
        block: threads per block per dimension, likewise.
        shared_mem: bytes of dynamic shared memory per block, CUDA/HIP's ``sharedMemBytes`` (the kernel's
            ``extern __shared__`` array).  Every other backend refuses a nonzero ``shared_mem`` with
            ``UNSUPPORTED``, never ignoring it: OpenCL sizes each ``__local`` parameter with a
            ``LocalMemory(nbytes)`` argument instead; Metal and QNN have no dynamic local memory here
            (``ironaccelerator_runtime.kernel_args``).
        cooperative: keyword-only; launch a cooperative grid (``CU_LAUNCH_ATTRIBUTE_COOPERATIVE``:
            ``cooperative_groups::this_grid().sync()`` works; every block must be resident at once, so the grid
            is at most ``Kernel.max_active_blocks(threads) x compute units`` blocks, else ``INVALID_VALUE`` at
            launch; ``CapabilityFlags.COOPERATIVE_LAUNCH``).
        cluster: keyword-only; 1-3 ints grouping blocks into thread-block clusters of that shape
            (``CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION``, compute capability 9.0+,
            ``CapabilityFlags.THREAD_BLOCK_CLUSTERS``); the grid must be a multiple of it in every dimension.

    Raises:
        Error: ``ErrorKind.INVALID_VALUE`` when ``grid``, ``block`` or ``cluster`` is not an int or 1-3 ints
            (floats, strings, bools, None), ``shared_mem`` is not an int, ``cooperative`` is not a bool, or
            ``cluster`` has a size < 1 or does not divide the grid.  Sizes against the device's limits are
            checked at launch (:meth:`validate`).

    Backends:
        All take grid and block (QNN: only ``LaunchDims()``).  ``shared_mem``: CUDA/HIP only.  Launch options
        (``cooperative``, ``cluster``): CUDA only, where the device's :class:`Capability` has the flag
        (``cuLaunchKernelEx``; dims without options take ``cuLaunchKernel``, the compiled fast path);
        ``UNSUPPORTED`` at launch on every other backend.
    """

    __slots__ = ("grid", "block", "shared_mem", "cooperative", "cluster")
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int
    cooperative: bool
    cluster: tuple[int, int, int] | None

    def __init__(self, grid: SupportsIndex | Sequence[SupportsIndex] = 1, block: SupportsIndex | Sequence[SupportsIndex] = 1,
                 shared_mem: SupportsIndex = 0, *, cooperative: bool = False,
                 cluster: SupportsIndex | Sequence[SupportsIndex] | None = None) -> None:
        object.__setattr__(self, "grid", g := _dims(grid, "grid"))
        object.__setattr__(self, "block", _dims(block, "block"))
        sm = _integer(shared_mem)
        if sm is None:
            raise fail(ErrorKind.INVALID_VALUE, "LaunchDims", f"shared_mem must be an int, got {shared_mem!r}", None)
        object.__setattr__(self, "shared_mem", sm)
        if not isinstance(cooperative, bool):
            raise fail(ErrorKind.INVALID_VALUE, "LaunchDims", f"cooperative must be a bool, got {cooperative!r}", None)
        object.__setattr__(self, "cooperative", cooperative)
        c = None
        if cluster is not None:
            c = _dims(cluster, "cluster")
            if min(c) < 1 or min(g) < 1 or any(g[i] % c[i] for i in range(3)):
                raise fail(ErrorKind.INVALID_VALUE, "LaunchDims", f"cluster={c} must be >= 1 and divide grid={g} in "
                           "every dimension", None)
        object.__setattr__(self, "cluster", c)

    def __repr__(self) -> str:
        opts = (", cooperative=True" if self.cooperative else "") + \
            (f", cluster={self.cluster}" if self.cluster is not None else "")
        return f"LaunchDims(grid={self.grid}, block={self.block}, shared_mem={self.shared_mem}{opts})"

    @property
    def has_options(self) -> bool:
        """Whether a launch option (``cooperative``, ``cluster``) is set: such dims take the vendor's extended
        launch, where it has one."""
        return self.cooperative or self.cluster is not None

    def options_error(self, backend: BackendKind | str | None, function: str = "Stream.launch") -> Error:
        """The Error a backend without launch options raises (or returns) for these dims: used by backends.

        Args:
            backend: the backend refusing, a :class:`BackendKind` or its name (None: unknown).
            function: the operation named in the Error (default ``"Stream.launch"``).

        Returns:
            An ``ErrorKind.UNSUPPORTED`` :class:`Error` naming the options set (cooperative launch,
            thread-block clusters); it is returned, not raised.

        Raises:
            Error: never (it builds the Error only).

        Backends:
            OpenCL, Metal and QNN use it; CUDA honours the options.
        """
        name = backend.name if isinstance(backend, BackendKind) else backend
        what = " and ".join(w for w, on in (("cooperative launch", self.cooperative),
                                            ("thread-block clusters", self.cluster is not None)) if on)
        return fail(ErrorKind.UNSUPPORTED, function, f"{what} (LaunchDims options) are not supported by the "
                    f"{name or '?'} backend", name)

    @property
    def threads(self) -> int:
        """The launch's total number of threads (work-items), the product of every grid and block dimension."""
        g, b = self.grid, self.block
        return g[0] * g[1] * g[2] * b[0] * b[1] * b[2]

    def validate(self, limits: DeviceLimits, backend: BackendKind | None = None, function: str = "Stream.launch") -> None:
        """Check these dimensions against a device's limits (the checked :meth:`Stream.launch` calls it).

        Args:
            limits: the device's :class:`DeviceLimits` (``device.descriptor.limits``).
            backend: the backend named in the Error (None: none).
            function: the operation named in the Error (default ``"Stream.launch"``).

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` listing every problem: a dimension < 1; more threads in all than
                ``max_work_items``; a global size (grid x block) past ``size_t`` or ``max_global``; a block or
                grid dimension past ``max_block``/``max_grid``; more threads per block than
                ``max_threads_per_block``; ``shared_mem`` < 0 or past ``max_shared_mem``.

        Backends:
            All (the limits are each device's).
        """
        problems = []
        if min(self.grid + self.block) < 1:
            problems.append(f"dimensions must be >= 1 (grid={self.grid}, block={self.block})")
        else:
            total = self.threads
            if total > limits.max_work_items:
                problems.append(f"{total} threads (grid x block) exceed the device's {limits.max_work_items}")
            for i in range(3):
                if self.grid[i] * self.block[i] > _SIZE_MAX:
                    problems.append(f"global size grid[{i}] x block[{i}] overflows size_t")
                elif limits.max_global is not None and self.grid[i] * self.block[i] > limits.max_global[i]:
                    problems.append(f"grid[{i}] x block[{i}] = {self.grid[i] * self.block[i]} threads exceed the "
                                    f"device's {limits.max_global[i]} per dimension")
        for i in range(3):
            if self.block[i] > limits.max_block[i]:
                problems.append(f"block[{i}]={self.block[i]} exceeds {limits.max_block[i]}")
            if self.grid[i] > limits.max_grid[i]:
                problems.append(f"grid[{i}]={self.grid[i]} exceeds {limits.max_grid[i]}")
        if self.block[0] * self.block[1] * self.block[2] > limits.max_threads_per_block:
            problems.append(f"block of {self.block} has more than {limits.max_threads_per_block} threads")
        if self.shared_mem < 0 or self.shared_mem > limits.max_shared_mem:
            problems.append(f"shared_mem={self.shared_mem} exceeds {limits.max_shared_mem}")
        if problems:
            raise fail(ErrorKind.INVALID_VALUE, function, "bad launch dimensions: " + "; ".join(problems), backend)


@record()
class Scalar:
    """A kernel argument value tagged with its :class:`DType`, for a by-value kernel parameter.

    ex) ``Scalar(2.5, DType.F32)``

    Checked when made, so packing it into a launch cannot fail later.  Immutable, hashable and picklable.

    Args:
        value: a number the type can hold: an int in range for integer types, a real number for floating
            types (finite where the type has no infinity), a bool (or 0/1) for BOOL, a number for complex types.
        dtype: the parameter's :class:`DType`.

    Raises:
        TypeError: ``dtype`` is not a :class:`DType`.
        Error: ``ErrorKind.INVALID_VALUE`` when ``value`` is not a number of that type or is out of its range
            (an int past the integer type, a float that overflows F16/BF16/F32).

    Backends:
        All, for value parameters.  At launch it must match a parameter whose type the backend knows (OpenCL,
        Metal) in kind and size, else ``INVALID_VALUE``; CUDA/HIP check its size (``kernel_args``).
    """

    __slots__ = ("value", "dtype")
    value: int | float | complex | bool
    dtype: DType

    def __init__(self, value: int | float | complex | bool, dtype: DType) -> None:
        _set = object.__setattr__
        _set(self, "value", value)
        _set(self, "dtype", dtype)
        self.__post_init__()

    def __post_init__(self) -> None:
        _check_scalar(self.value, self.dtype)


# the smallest magnitude that rounds to infinity in each type: (2 - 2**-(mantissa bits + 1)) * 2**max_exponent
_INF = float("inf")  # (-_INF < f < _INF is math.isfinite(f): the OpenCL early start keeps math out of the import)
_FLOAT_OVERFLOW = {"f16": (2 - 2**-11) * 2.0**15, "bf16": (2 - 2**-8) * 2.0**127, "f32": (2 - 2**-24) * 2.0**127}


def _check_scalar(value: Any, dtype: Any) -> None:
    if not isinstance(dtype, DType):
        raise TypeError(f"Scalar: dtype must be a DType, not {type(dtype).__name__} ({dtype!r})")
    cls, name = dtype.numeric_class.name, dtype.info.name
    problem = None
    if cls in ("SIGNED_INT", "UNSIGNED_INT"):
        n = _integer(value) if not isinstance(value, bool) else int(value)
        if n is None:
            problem = "is not an integer"
        else:
            bits = dtype.size * 8
            lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if cls == "SIGNED_INT" else (0, (1 << bits) - 1)
            if not lo <= n <= hi:
                problem = f"is out of range for {name} ({lo}..{hi})"
    elif cls == "BOOL":
        if not isinstance(value, bool) and _integer(value) not in (0, 1):
            problem = "is not a bool (or 0/1)"
    elif cls == "COMPLEX":
        if isinstance(value, (str, bytes)) or not isinstance(value, (int, float, complex)) and \
                not hasattr(value, "__complex__"):
            problem = "is not a number"
    else:  # floating
        if isinstance(value, (str, bytes, complex)) or not hasattr(value, "__float__"):
            problem = "is not a real number"
        else:
            f = float(value)
            top = _FLOAT_OVERFLOW.get(name)
            if top is not None and -_INF < f < _INF and abs(f) >= top:
                problem = f"overflows {name}"
            elif cls in ("FLOAT8_E4M3FN",) and not -_INF < f < _INF:
                problem = f"is not finite ({name} has no infinity)"
    if problem is not None:
        raise fail(ErrorKind.INVALID_VALUE, "Scalar", f"Scalar({value!r}, DType.{dtype.name}): the value {problem}",
                   None)


class KernelLaunch(tuple):  # type: ignore[type-arg]
    """One kernel launch: what, how big, with which arguments; pass it to :meth:`Stream.launch`.

    ex) ``KernelLaunch(kernel, LaunchDims(grid, 256), (a, b, c, np.uint32(n)))``

    What each parameter takes (Allocations, numpy scalars, :class:`Scalar`, bytes, Python numbers where the
    backend knows the parameter's type, :class:`LocalMemory`), and what every backend refuses, is the
    kernel-argument policy of ``ironaccelerator_runtime.kernel_args``; it is checked at launch, not here.

    An immutable record, built once per launch, so the cheapest one Python has: a tuple ``(kernel, dims,
    args)`` with named fields (a frozen dataclass costs ~2.5x as much to build).  Like a named tuple, it
    compares equal to a plain tuple of the same fields.  Launching the same KernelLaunch object again is the
    fast path.

    Args:
        kernel: the :class:`Kernel` to launch.
        dims: its :class:`LaunchDims`.
        args: one argument per kernel parameter, in order (any sequence; kept as a tuple).

    Raises:
        TypeError: ``args`` is not iterable.  Nothing else is checked here: a wrong kernel, dims or argument is
            refused by :meth:`Stream.launch` (``launch_unchecked`` returns it).

    Backends:
        All.
    """

    __slots__ = ()

    def __new__(cls, kernel: Kernel, dims: LaunchDims, args: Sequence[Any] = ()) -> KernelLaunch:
        return _new_tuple(cls, (kernel, dims, args if type(args) is tuple else tuple(args)))

    kernel: Kernel = property(itemgetter(0), doc="The :class:`Kernel` to launch.")  # type: ignore[assignment]
    dims: LaunchDims = property(itemgetter(1), doc="Its :class:`LaunchDims`.")  # type: ignore[assignment]
    args: tuple[Any, ...] = property(itemgetter(2),  # type: ignore[assignment]
                                     doc="Its arguments, a tuple (one per kernel parameter).")

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        return f"KernelLaunch(kernel={self[0]!r}, dims={self[1]!r}, args={self[2]!r})"


_new_tuple = tuple.__new__
