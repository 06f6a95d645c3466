"""The :class:`Device` trait base: an open device, which allocates, loads modules, creates streams and events."""

from __future__ import annotations

import os
import weakref
from typing import Any, Callable, Mapping, Sequence, TYPE_CHECKING, TypeVar

from ironaccelerator._core import BackendKind, ErrorKind, MemoryKind

from ..errors import Error, fail
from ..integers import _integer
from .values import _SIZE_MAX
from .checks import _not_picklable, check_size, unsupported

if TYPE_CHECKING:
    from .values import DeviceDescriptor, IpcHandle, Result
    from .module import Module
    from .event import Event
    from .memory import Allocation
    from .pool import MemoryPool
    from .stream import Stream
    from .backend import Backend


A = TypeVar("A", bound="Allocation")


class Device:
    """An opened device: allocates memory, creates streams, loads modules.  A context manager.

    Lifetime: :meth:`close` (or leaving ``with``) waits for the device's streams, returns the memory
    pool's cached blocks and gives up the device's own reference to its native context.  From then on
    every checked operation on the device, and on the streams, events, modules, kernels and allocations
    made from it, raises ``Error(INVALID_HANDLE)`` saying the device is closed (``_unchecked`` twins return
    that Error where a flag test is all it costs).  Objects still alive keep the native handles they hold
    valid until they are freed or dropped (the context lives while anything made from it does), so no
    call on them can touch a released handle; ``Allocation.free()`` after ``close()`` still releases the
    memory.  ``close()`` is idempotent.

    A device does not pickle (``TypeError`` saying to send its ``descriptor`` and open it there).  ``descriptor``
    is its :class:`DeviceDescriptor`, ``backend`` the :class:`Backend` that opened it.

    Backends:
        All: ``OpenCLDevice`` (a ``cl_context``), ``CudaDevice``/``HipDevice`` (the primary context / the
        selected device), ``MetalDevice`` (an ``MTLDevice``), ``QnnDevice`` (a ``QnnDevice_create`` handle).
    """

    def __reduce__(self) -> Any:  # (a driver handle of this process: no pickle, no copy.copy)
        raise _not_picklable(self, "Device")

    descriptor: DeviceDescriptor
    backend: Backend
    _closed: bool = False
    # MemoryPool's device-wide fence (frees naming no stream): a backend that tracks enqueues keeps _dirty (work
    # enqueued since its last fence) and _fence_events (that fence's events until seen complete) and defines
    # _pool_fence(); the defaults send the pool to each stream's _pool_fence
    _dirty: bool = True
    _fence_events: Sequence[Event] = ()
    # the backend's compiled module (its generated library's _fast, whose _pool_cache_setup is the MemoryPool free
    # list in C, ia_runtime.h) or None: the pool's Python paths
    _pool_fast: Any = None

    @property
    def kind(self) -> BackendKind:
        """The :class:`BackendKind` of this device (``descriptor.backend``)."""
        return self.descriptor.backend

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (checked operations then raise ``INVALID_HANDLE``)."""
        return self._closed

    def _closed_error(self, what: str) -> Error:
        return fail(ErrorKind.INVALID_HANDLE, what, f"device {self.descriptor.id} was closed", self)

    def _check_open(self, what: str) -> None:
        """Raise INVALID_HANDLE if the device was closed (checked paths call this)."""
        if self._closed:
            raise self._closed_error(what)

    def __repr__(self) -> str:
        d = getattr(self, "descriptor", None)
        if d is None:
            return f"<{type(self).__name__} (not opened)>"
        return f"<{type(self).__name__} {d.id} {d.name!r}{' closed' if self._closed else ''}>"

    def alloc(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> Allocation:
        """Allocate ``nbytes`` of memory of ``kind`` on this device.

        The allocation is released when it is freed (:meth:`Allocation.free`, or leaving ``with``) or, unfreed,
        when it is dropped.  Its contents are uninitialised.

        Args:
            nbytes: size in bytes, an integer (``int`` or anything with ``__index__``) from 1 to ``2**64 - 1``.
            kind: where the memory lives (:class:`MemoryKind`): ``DEVICE`` (default), ``HOST_PINNED`` (page-locked
                host memory the device reads), ``UNIFIED`` (one address for host and device), ``HOST``.

        Returns:
            The new :class:`Allocation` (the backend's subclass), with ``nbytes``, ``kind`` and ``device``.

        Raises:
            TypeError: ``nbytes`` is not an integer (``1.5``, ``"8"``), or ``kind`` is not a :class:`MemoryKind`.
            Error: ``ErrorKind.INVALID_VALUE`` for ``nbytes`` < 1 or past ``size_t``, or past what the device
                allocates at once (OpenCL ``CL_DEVICE_MAX_MEM_ALLOC_SIZE``, Metal ``maxBufferLength``);
                ``ErrorKind.OUT_OF_MEMORY`` when the memory is not there; ``ErrorKind.UNSUPPORTED`` when the
                backend lacks ``kind`` (see Backends); ``ErrorKind.INVALID_HANDLE`` after :meth:`close`.

        Backends:
            OpenCL: every kind (``HOST_PINNED``/``HOST``: ``CL_MEM_ALLOC_HOST_PTR`` buffers; ``UNIFIED``: fine-grained
            SVM, where the device has it (``CapabilityFlags.UNIFIED_MEMORY``), else ``UNSUPPORTED``).
            CUDA/HIP: every kind (``cuMemAlloc``/``hipMalloc``, ``cuMemHostAlloc``/``hipHostMalloc``,
            ``cuMemAllocManaged``/``hipMallocManaged``).  Metal: ``DEVICE`` (private storage) and ``UNIFIED``
            (shared storage, on a unified-memory device); ``HOST_PINNED`` and ``HOST`` are ``UNSUPPORTED``.
            QNN: ``DEVICE``, ``HOST_PINNED`` and ``HOST`` are all host memory bound to graph tensors as client
            buffers; ``UNIFIED`` (registered shared memory, ``QnnMem_register``) is ``UNSUPPORTED`` (the
            message gives the library's reason).
        """
        raise unsupported(self.kind, "Device.alloc")

    def alloc_unchecked(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> Result[Allocation]:
        """:meth:`alloc` that returns the :class:`Error` instead of raising it, for the hot path.

        The allocation is not tracked: it is released only by :meth:`Allocation.free` / ``free_unchecked``
        (Metal's are tracked).  One fast test of the arguments (``type(nbytes) is int``, ``type(kind) is
        MemoryKind``); see docs/UNCHECKED.md.

        Args:
            nbytes: size in bytes, as for :meth:`alloc`.
            kind: the :class:`MemoryKind`, as for :meth:`alloc`.

        Returns:
            The new :class:`Allocation`, or the :class:`Error` it did not raise (``INVALID_VALUE`` for a bad
            ``nbytes`` or ``kind``, where :meth:`alloc` raises ``TypeError`` too; ``OUT_OF_MEMORY``,
            ``UNSUPPORTED`` and ``INVALID_HANDLE`` for a closed device, as for :meth:`alloc`).

        Raises:
            Error: never for a bad value (the Error is returned); see docs/UNCHECKED.md.

        Backends:
            All, with the memory kinds of :meth:`alloc`.
        """
        raise unsupported(self.kind, "Device.alloc_unchecked")

    def _alloc_args_unchecked(self, nbytes: Any, kind: Any, function: str) -> int | Error:
        """``alloc_unchecked``'s arguments where its one fast test (``type(nbytes) is int``, ``0 < nbytes <=
        SIZE_MAX``, ``type(kind) is MemoryKind``) failed: the size as an int (numpy integers convert, as for
        ``alloc``), or the INVALID_VALUE naming the bad one (returned: an unchecked call never raises for a bad
        value: ``alloc`` raises TypeError for a non-integer size or a kind that is not a MemoryKind, and the same
        INVALID_VALUE for a size out of range)."""
        n = _integer(nbytes)
        if n is None:
            why = f"nbytes must be an integer, not {type(nbytes).__name__} ({nbytes!r:.80})"
        elif n < 1 or n > _SIZE_MAX:
            why = f"nbytes={n} is out of range (1..{_SIZE_MAX})"
        elif not isinstance(kind, MemoryKind):
            why = f"kind must be a MemoryKind, not {type(kind).__name__} ({kind!r:.80})"
        else:
            return n
        return fail(ErrorKind.INVALID_VALUE, function, why, self)

    def _checked_alloc(self, nbytes: int, kind: MemoryKind, alloc: Callable[[int, MemoryKind, bool], Result[A]]) -> A:
        """``alloc`` for a backend whose ``_alloc(nbytes, kind, tracked)`` does the work: the size, the device
        and the kind checked first; the allocation tracked (released on drop)."""
        if type(nbytes) is not int or nbytes <= 0 or nbytes > _SIZE_MAX:
            nbytes = check_size(nbytes, "nbytes", "Device.alloc", self.kind)
        if self._closed:
            raise self._closed_error("Device.alloc")
        if not isinstance(kind, MemoryKind):
            raise TypeError(f"Device.alloc: kind must be a MemoryKind, not {type(kind).__name__} ({kind!r})")
        r = alloc(nbytes, kind, True)
        if isinstance(r, Error):
            raise r
        return r

    def memory_pool(self) -> MemoryPool:
        """The device's memory pool: one per device, made on first use, trimmed by :meth:`close`.

        Returns:
            The device's :class:`MemoryPool` (DEVICE memory, stream-ordered; see the class).

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` after :meth:`close` (as the pool's ``alloc`` does then).

        Backends:
            All.  CUDA/HIP: on the driver's stream-ordered allocator (``cuMemPoolCreate``/``hipMemPoolCreate``)
            where the device supports memory pools, else the core's caching pool; OpenCL, Metal, QNN: the core's
            caching pool over :meth:`alloc`.
        """
        if self._closed:
            raise self._closed_error("Device.memory_pool")
        pool = getattr(self, "_pool", None)
        if pool is None:
            from .pool import MemoryPool  # (the pool module builds on streams, which name devices)

            pool = MemoryPool(self)
            self._pool = pool
        return pool

    def create_stream(self) -> Stream:
        """Create a stream: an in-order queue of copies, fills and launches on this device.

        Returns:
            The new :class:`Stream` (released when dropped).

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` after :meth:`close`; the vendor's error where creating the queue
                fails (``OUT_OF_MEMORY`` ...).

        Backends:
            All.  OpenCL: a command queue; CUDA/HIP: ``cuStreamCreate``/``hipStreamCreate``; Metal: an
            ``MTLCommandQueue``; QNN: a graph executor (synchronous where the library has no asynchronous
            execution, as on the x86 HTP emulator).
        """
        raise unsupported(self.kind, "Device.create_stream")

    def _live_streams(self) -> list[Stream]:
        """The streams of this device still alive (what a device-wide fence waits for); backends keep them in
        ``_streams``, a WeakSet."""
        return _alive(getattr(self, "_streams", None))

    def load_module(self, source_or_binary: str | bytes, *, options: Sequence[str] = (),
                    defines: Mapping[str, Any] | None = None, include_dirs: Sequence[str | os.PathLike[str]] = (),
                    name_expressions: Sequence[str] = (), cache: bool = True) -> Module:
        """Load device code (source to compile, or a compiled image) as a :class:`Module`.

        Where the backend keeps one (NVRTC, OpenCL), the compiled artifact comes from the on-disk kernel cache
        (``kernel_cache``; ``cache=False`` or ``IRONACCEL_CACHE=0`` skips it) and ``Module.from_cache`` says so.
        A compiler's output on success (NVRTC, OpenCL) is issued as a :class:`CompilerWarning` and kept in
        ``Module.build_log``.

        Args:
            source_or_binary: source text (``str``, or ``bytes`` of source) or a compiled image (``bytes``), as
                the backend takes them (see Backends).
            options: the compiler's own flags (``["-cl-fast-relaxed-math"]``, ``["-use_fast_math"]``).
            defines: macros: ``{"N": 4, "FAST": None}`` -> ``-DN=4 -DFAST``.
            include_dirs: directories for ``#include`` (``-I``), paths or path-like objects.
            name_expressions: NVRTC/hiprtc template instantiations (``"axpy<float>"``), looked up after compiling
                so that ``module.kernel("axpy<float>")`` finds the lowered name.
            cache: use the kernel cache (default True).

        Returns:
            The loaded :class:`Module`; :meth:`Module.kernel` gets its kernels.

        Raises:
            TypeError: ``source_or_binary`` is neither source nor a binary (``None``, an int), on every backend.
            Error: ``ErrorKind.INVALID_VALUE`` for bad option types (before any vendor call) or a NUL character
                inside the source; ``ErrorKind.COMPILE_FAILED`` when the compiler refuses the source or an option
                (the message holds its log); ``ErrorKind.UNSUPPORTED`` for input or options the backend cannot
                take (see Backends); ``ErrorKind.INVALID_HANDLE`` after :meth:`close`.

        Backends:
            OpenCL: OpenCL C source, cached as the program binary; ``name_expressions`` ``UNSUPPORTED``.
            CUDA: CUDA C++ source (NVRTC, cached), PTX, cubin (ELF) or fatbin; options with an image
            ``UNSUPPORTED``.  HIP: code objects (ELF, offload bundles).  Metal: Metal Shading Language source
            (``str``) only; any compile option, and metallib bytes, ``UNSUPPORTED``; no kernel cache.  QNN: a
            context binary (bytes); any compile option ``UNSUPPORTED``; nothing is compiled.
        """
        raise unsupported(self.kind, "Device.load_module")

    def from_dlpack(self, obj: Any, *, stream: Any = None) -> Allocation:
        """Import ``obj``'s memory as an allocation of this device, without a copy.

        The producer is kept alive until the allocation is freed or dropped (then its deleter runs, once).

        Args:
            obj: anything with ``__dlpack__`` and ``__dlpack_device__``: a numpy array, a view of ours, a
                CuPy/PyTorch tensor.
            stream: (CUDA/HIP) the stream of this device that will use the memory: a :class:`Stream`, an object
                with ``__cuda_stream__`` or a handle, per the DLPack protocol; the producer orders its work
                before it.  None: the producer synchronises.

        Returns:
            An :class:`Allocation` over the tensor's memory; ``.dtype`` and ``.shape`` say what it holds.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for an object without DLPack, memory of another device, a
                read-only or non-contiguous tensor; ``ErrorKind.UNSUPPORTED`` where the backend cannot use
                foreign memory of that kind; ``ErrorKind.INVALID_HANDLE`` after :meth:`close`.

        Backends:
            CUDA: device memory of this device, pinned (``kDLCUDAHost``) and managed memory; HIP: device and
            pinned memory; pageable host memory (``kDLCPU``) is ``UNSUPPORTED`` on both (copy it in).  QNN:
            host memory (a numpy array), bound as client buffers.  OpenCL and Metal: ``UNSUPPORTED`` (a buffer
            over foreign memory is not wrapped: copy it in with :meth:`Stream.copy_from_host`).
        """
        from .. import dlpack

        what = "Device.from_dlpack"
        self._check_open(what)
        probe = getattr(obj, "__dlpack_device__", None)
        if probe is None:
            raise fail(ErrorKind.INVALID_VALUE, what, f"{type(obj).__name__} does not export DLPack", self)
        dev = tuple(probe())
        kind = self._import_kind((int(dev[0]), int(dev[1])), what)
        imp = dlpack.dlpack_of(obj, self._consumer_stream(stream, what), what, self.kind.name)
        return self._adopt(imp, kind, what)

    def from_cuda_array_interface(self, obj: Any, *, stream: Any = None) -> Allocation:
        """Import ``obj.__cuda_array_interface__`` (v2/v3) memory as a DEVICE allocation, without a copy.

        The memory is trusted to be this device's (the interface does not say which device it is on).

        Args:
            obj: an object with ``__cuda_array_interface__`` (a CuPy array, a Numba device array, a torch CUDA
                tensor).
            stream: this device's stream that will use the memory: the producer's stream (v3) is ordered
                before it with an event; None: the producer's stream is synchronised.

        Returns:
            A DEVICE :class:`Allocation` over the memory; ``.dtype`` and ``.shape`` say what it holds.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for a missing, malformed, masked or non-contiguous interface;
                ``ErrorKind.UNSUPPORTED`` on a backend without the interface; ``ErrorKind.INVALID_HANDLE``
                after :meth:`close`.

        Backends:
            CUDA only; HIP, OpenCL, Metal, QNN: ``UNSUPPORTED`` (use :meth:`from_dlpack`).
        """
        raise unsupported(self.kind, "Device.from_cuda_array_interface")

    def import_ipc(self, handle: IpcHandle) -> Allocation:
        """Open device memory another process exported (:meth:`Allocation.export_ipc`) as a DEVICE allocation.

        ``free()`` (or dropping it) closes the mapping, never the memory, which stays the exporter's.

        Args:
            handle: the :class:`IpcHandle` the exporting process sent.

        Returns:
            A DEVICE :class:`Allocation` of this device over the exporter's memory (its ``.ipc_handle`` is
            ``handle``).

        Raises:
            TypeError: ``handle`` is not an :class:`IpcHandle`.
            Error: ``ErrorKind.INVALID_VALUE`` for a handle of another backend, of the wrong size, or made by
                this very process (the vendors refuse it: use the allocation); ``ErrorKind.UNSUPPORTED`` on a
                backend without IPC; the vendor's error where opening fails; ``ErrorKind.INVALID_HANDLE`` after
                :meth:`close`.

        Backends:
            CUDA (``cuIpcOpenMemHandle``), HIP (``hipIpcOpenMemHandle``); OpenCL, Metal, QNN: ``UNSUPPORTED``.
        """
        raise unsupported(self.kind, "Device.import_ipc")

    def _import_kind(self, device: tuple[int, int], what: str) -> MemoryKind:
        """The MemoryKind an imported tensor on DLPack ``device`` becomes here, or raise (backends override)."""
        raise fail(ErrorKind.UNSUPPORTED, what, f"the {self.kind.name} backend cannot use foreign memory", self)

    def _consumer_stream(self, stream: Any, what: str) -> Any:
        """The ``stream`` argument passed to a producer's ``__dlpack__`` (backends with streams override)."""
        return None

    def _import_memory(self, imp: Any, kind: MemoryKind) -> Allocation:
        raise unsupported(self.kind, "Device.from_dlpack")

    def _adopt(self, imp: Any, kind: MemoryKind, what: str) -> Allocation:
        """An allocation over an imported tensor (its deleter run on free or drop); INVALID_VALUE (the deleter
        run now) for read-only memory."""
        try:
            if imp.read_only:
                raise fail(ErrorKind.INVALID_VALUE, what, "the tensor is read-only (kernels would write it)", self)
            a = self._import_memory(imp, kind)
        except BaseException:
            imp.release()
            raise
        a.dtype = imp.dtype
        a.shape = imp.shape
        return a

    def synchronize(self) -> None:
        """Wait until all work enqueued on every stream of this device has completed.

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` after :meth:`close`; the error of failed work (CUDA/HIP:
                ``LAUNCH_FAILED`` for a kernel that faulted, the vendor's error otherwise).

        Backends:
            All.  CUDA/HIP: ``cuCtxSynchronize``/``hipDeviceSynchronize``; OpenCL, Metal, QNN: each live stream
            synchronised.
        """
        raise unsupported(self.kind, "Device.synchronize")

    def close(self) -> None:
        """Wait for the device's work, release its pooled memory and its context reference.

        Later use of the device or anything made from it raises ``INVALID_HANDLE`` (see the class docstring).
        Idempotent; leaving ``with device:`` calls it.

        Raises:
            Error: the error of the device's failed work (as :meth:`synchronize`); the device is closed all the
                same.

        Backends:
            All.
        """
        if self._closed:
            return
        try:
            try:
                self.synchronize()
            except Error as e:
                if e.kind is not ErrorKind.UNSUPPORTED:
                    raise
            pool = getattr(self, "_pool", None)
            if pool is not None:
                pool.trim()
        finally:
            self._closed = True
            self._close()

    def _close(self) -> None:
        """Backends: give up the device's own native references (called once, by ``close``)."""

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _alive(streams: weakref.WeakSet[Any] | None) -> list[Any]:
    """The live members of a WeakSet, read through its references (``list(weakset)`` costs ~5x as much)."""
    if streams is None:
        return []
    refs: set[weakref.ref[Any]] = streams.data  # type: ignore[attr-defined]
    return [s for r in list(refs) if (s := r()) is not None]


_FENCING: list[Any] = [None]  # _fence_events while a fence is computed: truthy, so a reader waits on the lock


def enqueue_tracked_fence(device: Any) -> list[Any]:
    """The MemoryPool fence of a device that tracks its enqueues (OpenCL, Metal): every launch, copy and fill
    sets ``device._dirty`` after its enqueue.  The events a pool block freed now waits for: none when nothing was
    enqueued since the last fence and that fence completed (two flag tests, no call: the pool's hot path); else
    each live stream's ``_pool_fence()`` (an event after its work, None when it has none pending).

    Threads: the pool's hot path reads ``_dirty`` and then ``_fence_events`` without a lock, so a fence in
    progress publishes :data:`_FENCING` (truthy: the reader comes here and waits on ``device._fence_lock``)
    *before* it clears ``_dirty``, and the computed events after.  (Cleared first, a thread freeing a block its
    own queued work still used could read ``_dirty`` False and the previous, completed fence, and free the block
    at once.)"""
    with device._fence_lock:
        if not device._dirty:
            events = device._fence_events
            if events:
                for e in events:
                    if not e.query():
                        return events  # type: ignore[no-any-return]
                device._fence_events = events = []
            return events  # type: ignore[no-any-return]
        previous = device._fence_events
        device._fence_events = _FENCING
        device._dirty = False  # (an enqueue sets it after its call: one racing with this sets it again)
        try:
            events = [fence for s in device._live_streams() if (fence := s._pool_fence()) is not None]
        except BaseException:
            device._fence_events, device._dirty = previous, True
            raise
        device._fence_events = events
        return events
