"""The :class:`Allocation` trait base (device memory and its host and DLPack views) and
:class:`AllocationSlice`, a byte range of one."""

from __future__ import annotations

import functools
import weakref
from typing import Any, Callable, TYPE_CHECKING

from ironaccelerator._core import DType, ErrorKind, MemoryKind

from ..errors import Error, fail
from ..integers import _integer
from .checks import _not_picklable, _owner, unsupported

if TYPE_CHECKING:
    from .values import IpcHandle, Result
    from .device import Device
    from .stream import Stream


class Allocation:
    """Memory on a device.  Checked ``free`` detects double frees; a dropped allocation is released.

    Release-on-drop costs nothing when allocating: a *tracked* allocation (``_track()``, or a backend
    constructor setting ``_tracked``) that is dropped unfreed is released by ``__del__`` (through the
    callable given to ``_track``, else ``_release``).  ``_finalizer`` is a ``weakref.finalize``-like view of
    that (``alive``, ``detach()``, calling it), made on demand; ``None`` for an untracked allocation.

    DLPack is a backend's to export: one that does defines ``__dlpack__`` and ``__dlpack_device__`` together
    (CUDA, ROCm: a 1-D uint8 legacy capsule); this base class defines neither, so a consumer that probes
    ``__dlpack_device__`` never finds it on an allocation that cannot export (OpenCL, pooled blocks of the
    caching pool).  Typed, strided exports (versioned DLPack 1.x capsules) are made by :meth:`view`, on every
    backend whose memory a consumer can address.

    Made by :meth:`Device.alloc` (or ``alloc_unchecked``, :meth:`MemoryPool.alloc`, :meth:`Device.from_dlpack`,
    :meth:`Device.import_ipc`); ``nbytes``, ``kind`` (:class:`MemoryKind`) and ``device`` say what it is.
    ``alloc[start:stop]`` is a slice sharing its memory.  A context manager that frees it on exit.  It does not
    pickle (``TypeError`` saying how to share it).

    Backends:
        All: ``OpenCLAllocation`` (a ``cl_mem``), ``CudaAllocation``/``HipAllocation`` (``.ptr``, ``.dptr``),
        ``MetalAllocation`` (an ``MTLBuffer``), ``QnnAllocation`` (host memory bound as a client buffer).
    """

    def __reduce__(self) -> Any:  # (a driver handle of this process: no pickle, no copy.copy)
        raise _not_picklable(self, "Allocation")

    nbytes: int
    kind: MemoryKind
    device: Device
    dtype: DType | None = None  # what an imported tensor holds (Device.from_dlpack); None for raw memory
    shape: tuple[int, ...] | None = None
    _freed: bool = False
    _tracked: bool = False  # release on drop (``__del__``) unless freed
    _drop: Callable[[], object] | None = None  # what releases it on drop; None: ``_release``

    def _release(self) -> Error | None:
        """Free the vendor object; return the Error instead of raising (backends override)."""
        raise unsupported(self.device.kind, "Allocation.free")

    def _track(self, release: Callable[[], object] | None = None) -> None:
        """Release the memory (``release()``, or ``_release()``) if the allocation is dropped unfreed."""
        if release is not None:
            self._drop = release
        self._tracked = True

    def __del__(self) -> None:
        if self._tracked and not self._freed:
            self._freed = True
            drop = self._drop
            if drop is not None:
                drop()
            else:
                self._release()

    @property
    def _finalizer(self) -> _DropFinalizer | None:
        return _DropFinalizer(self) if self._tracked else None

    @_finalizer.setter
    def _finalizer(self, fin: weakref.finalize | None) -> None:  # type: ignore[type-arg]
        """Compatibility: ``None`` untracks; a ``weakref.finalize`` is adopted (detached, run by ``__del__``)."""
        if fin is None:
            self._tracked = False
            return
        info = fin.detach()
        if info is not None:
            _, func, args, kwargs = info
            self._track(lambda: func(*args, **kwargs))

    # host views: host-visible memory (pinned, unified/shared) read and written by Python without a copy
    _views: list[weakref.ref[Any]] | None = None  # the exported views still alive (free() refuses while any is)

    def _host_address(self) -> int | None:
        """The host address of the bytes where this allocation's kind is host-visible; None: device memory
        (backends override)."""
        return None

    def host_view(self) -> memoryview:
        """A writable byte view of host-visible memory, without a copy.

        ``np.asarray(view)`` or ``np.frombuffer(view, dtype)`` is a numpy view of it.  The view keeps the
        allocation alive, and :meth:`free` refuses (``INVALID_VALUE``) while one is exported
        (``memoryview.release()`` or dropping it ends that).  Access it only when no queued work uses the memory
        (:meth:`Stream.synchronize` first).

        Returns:
            A writable ``memoryview`` of format ``"B"`` over the allocation's ``nbytes``.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for memory that is not host-visible (DEVICE memory);
                ``ErrorKind.INVALID_HANDLE`` once freed or after ``Device.close``.

        Backends:
            OpenCL: ``UNIFIED`` (the SVM memory itself), ``HOST_PINNED`` and ``HOST`` (mapped with
            ``clEnqueueMapBuffer`` until the view is released: release it before a stream uses the buffer).
            CUDA/HIP: ``HOST_PINNED``, ``HOST``, ``UNIFIED``.  Metal: ``UNIFIED`` (shared storage).  QNN: every
            kind (client buffers are host memory).
        """
        what = "Allocation.host_view"
        self._check_live(what)
        if self.device._closed:  # (before whether it is host-visible: what a closed device made is refused so)
            raise self.device._closed_error(what)
        addr = self._host_address()
        if addr is None:
            raise fail(ErrorKind.INVALID_VALUE, what, f"{self!r} is device memory ({self.kind.name}), not "
                       "host-visible: allocate MemoryKind.HOST_PINNED or UNIFIED for a host view", self.device)
        if self.nbytes == 0:
            return memoryview(b"").cast("B")[:0]
        import ctypes  # (here, not at import: ~1.4 ms of the first device's start)

        arr = (ctypes.c_char * self.nbytes).from_address(addr)
        arr._allocation = self  # type: ignore[attr-defined]  # (the view keeps the memory's owner alive)
        views = [r for r in (self._views or ()) if r() is not None]
        views.append(weakref.ref(arr))
        self._views = views
        return memoryview(arr).cast("B")

    def _device_address(self) -> int | None:
        """The address a vendor library of this backend takes for the memory's first byte (a spec's ``device:
        true`` parameter, ironaccelerator_runtime.device_pointers); None where the memory has none, only a handle
        (backends override): CUDA/HIP every kind (unified addressing), OpenCL fine-grained SVM, QNN's host
        memory."""
        return None

    # typed views and DLPack (ironaccelerator_runtime.dlpack)
    def _dlpack_device(self) -> tuple[int, int] | None:
        """The DLPack device of this allocation's memory for a view's export, or None where no consumer could
        address it (backends override): host-visible memory is ``kDLCPU``."""
        from ..dlpack import KDL_CPU

        return (KDL_CPU, 0) if self._host_address() is not None else None

    def _dlpack_address(self) -> int:
        """The address a DLPack tensor's ``data`` holds (the view's offset goes in ``byte_offset``)."""
        addr = self._host_address()
        assert addr is not None
        return addr

    def _dlpack_sync(self, view: Any, stream: Any) -> None:
        """Order the consumer's ``stream`` after the producer's work (backends with streams override): host
        memory has nothing to order (the caller synchronises before touching it, as for ``host_view``)."""

    def _view_class(self) -> type[Any]:
        from ..dlpack import ArrayView, DLPackView

        return DLPackView if self._dlpack_device() is not None else ArrayView

    def view(self, dtype: Any, shape: Any, strides: Any = None, offset: int = 0, *, stream: Stream | None = None) -> Any:
        """A typed, strided view of the allocation, zero copy.

        The view keeps the allocation alive and is bounds-checked.  Where the memory has a DLPack device a
        consumer can use it exports ``__dlpack__`` (``np.from_dlpack(view)``, ``torch.from_dlpack(view)``), and on
        CUDA ``__cuda_array_interface__``.

        Args:
            dtype: the element type: a :class:`DType`, or a numpy dtype or its name (``"float32"``).
            shape: the extents, an int or a tuple of ints (>= 0).
            strides: the strides in elements, one per extent (>= 0); None: C-contiguous.
            offset: where the view starts, in bytes: a multiple of the element size.
            stream: (CUDA/HIP) the stream that produces the data, so a consumer's ``__dlpack__(stream=...)`` waits
                on an event of it rather than on the whole device.

        Returns:
            A ``DLPackView`` (exports DLPack) where the memory has a DLPack device, else an ``ArrayView``
            (``dtype``, ``shape``, ``strides``, ``offset``, ``allocation``).

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for a dtype with no :class:`DType`, a shape or strides that are
                not ints, negative, of different lengths, an offset not a multiple of the element size, or a
                view past the allocation's end; ``ErrorKind.INVALID_HANDLE`` once freed or after ``Device.close``.

        Backends:
            All.  DLPack export: host-visible memory (OpenCL ``UNIFIED``, Metal ``UNIFIED``, every QNN
            allocation: ``kDLCPU``; CUDA/HIP pinned and managed memory: ``kDLCUDAHost``/``kDLROCMHost``,
            ``kDLCUDAManaged``) and CUDA/HIP device memory (``kDLCUDA``/``kDLROCM``).  OpenCL buffers and private
            Metal buffers get a plain ``ArrayView`` (no DLPack device type numpy or others accept).
        """
        from ..dlpack import make_view

        self._check_live("Allocation.view")  # (before asking the freed memory's kind for a view class)
        self.device._check_open("Allocation.view")
        view: Any = make_view(self, dtype, shape, strides, offset, stream, self._view_class())
        return view

    def _views_error(self, what: str) -> Error | None:
        """The refusal of freeing while host views are exported (a view would then read freed memory), or None."""
        from ..dlpack import EXPORTER

        EXPORTER.sweep()  # (capsules dropped unconsumed, e.g. refused by their consumer, release their views)
        n = sum(1 for r in self._views or () if r() is not None)
        if not n:
            return None
        return fail(ErrorKind.INVALID_VALUE, what, f"{n} host view(s) of {self!r} are still exported; release "
                    "them first (memoryview.release(), or drop them and the arrays made from them)", self.device)

    def free(self) -> None:
        """Release the memory now (a dropped allocation is released too: freeing is for when it matters).

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` when it was already freed (a double free is detected, never
                passed to the driver); ``ErrorKind.INVALID_VALUE`` while host views of it are exported
                (:meth:`host_view`, a numpy view of it) or for a slice (free the allocation it was cut from);
                the vendor's error where the release fails.

        Backends:
            All.  The memory is released once the work queued on it is done: CUDA/HIP ``cuMemFree`` orders after
            the device's work, OpenCL and Metal command buffers hold their own references.  A pool allocation
            (:meth:`MemoryPool.alloc`) goes back to its pool, and takes ``stream=`` (free in that stream's
            order).  An imported allocation (:meth:`Device.from_dlpack`, :meth:`Device.import_ipc`) gives the
            memory back to its producer (runs the DLPack deleter / closes the IPC mapping).
        """
        if self._freed:
            raise fail(ErrorKind.INVALID_HANDLE, "Allocation.free", f"{self!r} was already freed", self.device)
        if self._views and (e := self._views_error("Allocation.free")) is not None:
            raise e
        self._freed = True
        err = self._release()
        if err is not None:
            raise err

    def free_unchecked(self) -> Result[None]:
        """:meth:`free` that returns the :class:`Error` instead of raising it.

        Returns:
            None, or the :class:`Error` :meth:`free` would raise (``INVALID_HANDLE`` for a second free, found by
            one flag test so the vendor's handle is never released twice; ``INVALID_VALUE`` while host views are
            exported or for a slice; the vendor's error).

        Raises:
            Error: never for a bad value (the Error is returned); see docs/UNCHECKED.md.

        Backends:
            All, as :meth:`free`.
        """
        if self._freed:  # one flag test: releasing the vendor handle twice is undefined behaviour (a crash)
            return fail(ErrorKind.INVALID_HANDLE, "Allocation.free_unchecked", f"{self!r} was already freed",
                        self.device)
        if self._views and (e := self._views_error("Allocation.free_unchecked")) is not None:
            return e
        self._freed = True
        return self._release()

    @property
    def freed(self) -> bool:
        """Whether the allocation was freed (for a slice, whether its allocation was); using it then is
        ``INVALID_HANDLE``."""
        return self._freed

    def _check_live(self, what: str) -> None:
        if self._freed:
            raise fail(ErrorKind.INVALID_HANDLE, what, f"{self!r} was freed", self.device)

    def __enter__(self) -> Allocation:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._freed:
            self.free()

    def __repr__(self) -> str:
        state = " freed" if self._freed else ""
        return f"<{type(self).__name__} {self.nbytes} bytes {self.kind.name} on {self.device.descriptor.id}{state}>"

    def export_ipc(self) -> IpcHandle:
        """A handle another process opens with :meth:`Device.import_ipc` to use this DEVICE memory without a copy.

        Keep this allocation alive while importers use it.

        Returns:
            The :class:`IpcHandle` (picklable; send it through a pipe, a queue or a file).

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for a slice or a caching-pool block (export the whole allocation);
                ``ErrorKind.UNSUPPORTED`` for other memory kinds than DEVICE, stream-ordered pool allocations,
                imported memory, and on backends without IPC; ``ErrorKind.INVALID_HANDLE`` once freed or after
                ``Device.close``.

        Backends:
            CUDA (``cuIpcGetMemHandle``), HIP (``hipIpcGetMemHandle``); OpenCL, Metal, QNN: ``UNSUPPORTED``.
        """
        raise unsupported(self.device.kind, "Allocation.export_ipc")

    def __getitem__(self, key: slice) -> Allocation:
        """``alloc[start:stop]``: bytes ``start`` to ``stop`` of the allocation (step 1, Python's slice rules),
        sharing its memory: usable as a kernel argument and in copies, fills and views.  The slice keeps the
        allocation alive; once the allocation is freed the slice is INVALID_HANDLE, and a slice's own ``free()`` is
        refused (free the allocation).  An empty slice is INVALID_VALUE; UNSUPPORTED where the backend cannot (see
        the README)."""
        what = "Allocation.__getitem__"
        if not isinstance(key, slice):
            raise TypeError(f"{what}: an allocation is sliced by bytes (alloc[start:stop]), not indexed by "
                            f"{type(key).__name__}")
        for part in (key.start, key.stop, key.step):
            if part is not None and _integer(part) is None:
                raise TypeError(f"{what}: slice bounds must be integers, not {type(part).__name__} ({part!r})")
        start, stop, step = key.indices(self.nbytes)
        if step != 1 or stop <= start:
            raise fail(ErrorKind.INVALID_VALUE, what, f"[{key.start}:{key.stop}:{key.step}] of {self.nbytes} bytes "
                       "is not a non-empty range of step 1", self.device)
        self._check_live(what)
        return self._slice(start, stop - start)

    def _slice(self, offset: int, nbytes: int) -> Allocation:
        raise unsupported(self.device.kind, "Allocation slices (alloc[start:stop])", "Allocation.__getitem__")


class AllocationSlice(Allocation):
    """Bytes ``[offset, offset + nbytes)`` of ``parent`` (``Allocation.__getitem__``); a backend sets what its
    calls read (``ptr``/``dptr`` on CUDA/HIP, ``buffer`` on OpenCL)."""

    def __init__(self, parent: Allocation, offset: int, nbytes: int) -> None:
        self.parent = parent
        self.offset = offset
        self.nbytes = nbytes
        self.device = parent.device
        self.kind = parent.kind

    _owner: Allocation | None = None  # a pool block's slice: the PooledAllocation it was cut from (it lives, and the
    # slice is live, while that allocation is not freed: the block goes to a new owner once it is)

    @property
    def _freed(self) -> bool:  # the allocation's: a slice is live while its allocation is
        owner = self._owner
        return self.parent._freed or (owner is not None and owner._freed)

    @_freed.setter
    def _freed(self, value: bool) -> None:
        raise AttributeError("a slice is freed with its allocation")

    def free(self) -> None:
        self._check_live("Allocation.free")
        raise fail(ErrorKind.INVALID_VALUE, "Allocation.free", f"{self!r} shares its allocation's memory: free the "
                   "allocation", self.device)

    def free_unchecked(self) -> Result[None]:
        return fail(ErrorKind.INVALID_VALUE, "Allocation.free_unchecked", f"{self!r} shares its allocation's memory",
                    self.device)

    def _release(self) -> Error | None:
        return None

    def export_ipc(self) -> IpcHandle:
        self._check_live("Allocation.export_ipc")
        if type(self.parent).export_ipc is Allocation.export_ipc:  # the backend exports nothing: UNSUPPORTED
            return Allocation.export_ipc(self)
        raise fail(ErrorKind.INVALID_VALUE, "Allocation.export_ipc",
                   f"{self!r} is a slice; an IPC handle names a whole "
                   "allocation: export the allocation and slice it after import", self.device)

    def _host_address(self) -> int | None:
        a = self.parent._host_address()
        return None if a is None else a + self.offset

    def _device_address(self) -> int | None:
        a = self.parent._device_address()
        return None if a is None else a + self.offset

    def _slice(self, offset: int, nbytes: int) -> Allocation:
        s = self.parent._slice(self.offset + offset, nbytes)  # a slice of a slice: of the allocation
        if self._owner is not None:
            s._owner = self._owner  # type: ignore[attr-defined]
        return s

    def __exit__(self, *exc: object) -> None:
        pass  # (the allocation's to free)

    def __repr__(self) -> str:
        return f"<slice [{self.offset}:{self.offset + self.nbytes}] of {self.parent!r}>"


class _DropFinalizer:
    """``Allocation._finalizer``: the ``weakref.finalize`` interface over an allocation's release-on-drop."""

    __slots__ = ("_ref",)

    def __init__(self, allocation: Allocation) -> None:
        self._ref = weakref.ref(allocation)

    @property
    def alive(self) -> bool:
        """Whether the allocation will still be released on drop (not dropped, freed or detached)."""
        a = self._ref()
        return a is not None and a._tracked and not a._freed

    def detach(self) -> tuple[Allocation, Callable[[], object], tuple[()], dict[str, Any]] | None:
        """Stop releasing on drop; returns ``(allocation, release, (), {})`` if it was alive, else None."""
        a = self._ref()
        if a is None or not a._tracked or a._freed:
            return None
        a._tracked = False
        return (a, a._drop or a._release, (), {})

    def __call__(self) -> object:
        """Release now (if alive); the allocation counts as freed."""
        a = self._ref()
        if a is None or not a._tracked or a._freed:
            return None
        a._freed = True
        a._tracked = False
        return (a._drop or a._release)()


def compiled_allocation_class(fast: Any, setup: str, like: type, cache: dict[Any, type | None],
                              make: Callable[[Any], type]) -> type | None:
    """A backend's allocation class compiled over the C type of ``fast`` (a library's ``_fast`` or
    ``_objc_fast``) that ``getattr(fast, setup)(Allocation.free, Allocation.free_unchecked, Allocation.__del__)``
    returns once (ia_memory_common.h: the Python paths the C hands everything but a plain free to): ``make(base)``,
    given ``like``'s name, module and docstring.  ``cache`` keeps it per ``fast``; None (cached too) where ``fast``
    has no such setup (ABI mode) or refuses it (NotImplementedError: a free-threaded build)."""
    if fast in cache:
        return cache[fast]
    base: Any = None
    if (set_up := getattr(fast, setup, None)) is not None:
        try:
            base = set_up(Allocation.free, Allocation.free_unchecked, Allocation.__del__)
        except NotImplementedError:
            base = None
    cls = None if base is None else make(base)
    if cls is not None:
        cls.__name__ = cls.__qualname__ = like.__name__
        cls.__module__ = like.__module__
        cls.__doc__ = like.__doc__
    cache[fast] = cls
    return cls


def handle_calls(fast: Any, ffi: Any, lib: Any, new: str, release: str) -> Any:
    """``fast._handle_calls`` (ia_handle_memory.h) over the API-mode functions ``new`` and ``release`` of ``lib``:
    their C addresses, and the wrap of an address into a cdata of ``new``'s result type (an allocation's
    ``_handle``, made on first read).  ``new`` must have the shape ``object = new(owner, nbytes, option)`` and
    ``release`` the shape ``release(object)``, each argument a pointer or an integer of pointer width (the header
    calls them as ``void *(*)(void *, size_t, uintptr_t)`` and ``void (*)(void *)``); TypeError otherwise, so a
    change of either function's prototype cannot reach the C as a wrong call."""
    word = ffi.sizeof("uintptr_t")

    def pointer(t: Any) -> bool:
        return bool(t.kind == "pointer")

    def integer(t: Any) -> bool:  # (cffi's primitive kinds hold the floating types too)
        return t.kind == "primitive" and "float" not in t.cname and "double" not in t.cname and \
            t.cname != "_Bool" and ffi.sizeof(t) == word

    tn, tr = ffi.typeof(getattr(lib, new)), ffi.typeof(getattr(lib, release))
    if tn.kind != "function" or tn.ellipsis or not pointer(tn.result) or len(tn.args) != 3 \
            or not pointer(tn.args[0]) or not integer(tn.args[1]) or not integer(tn.args[2]):
        raise TypeError(f"handle_calls: {new} is {tn.cname}, not object = new(owner, nbytes, option)")
    if tr.kind != "function" or tr.ellipsis or tr.result.kind != "void" or len(tr.args) != 1 \
            or not pointer(tr.args[0]):
        raise TypeError(f"handle_calls: {release} is {tr.cname}, not release(object)")

    def address(name: str) -> int:
        return int(ffi.cast("uintptr_t", ffi.addressof(lib, name)))

    return fast._handle_calls(address(new), address(release), functools.partial(ffi.cast, tn.result))
