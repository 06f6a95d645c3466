"""Streams: :class:`GpuStream` (copies, fills, launches through the compiled fast path, events, capture)."""

from __future__ import annotations

import contextlib
import functools
import struct
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator, cast

from ironaccelerator._core import BackendKind, CapabilityFlags, ErrorKind
from ironaccelerator_runtime.backends.gpu.api import GpuApi, _address
from ironaccelerator_runtime.backends.gpu.args import _ArgPlan, _EMPTY_LAYOUT, _MAX_PLANS, _count_error, pack_args
from ironaccelerator_runtime.backends.gpu.context import _TLS, _destroy
from ironaccelerator_runtime.backends.gpu.event import GpuEvent
from ironaccelerator_runtime.backends.gpu.graph import GpuGraph
from ironaccelerator_runtime.backends.gpu.memory import _offset_ptr
from ironaccelerator_runtime.backends.gpu.module import GpuKernel
from ironaccelerator_runtime.errors import Error, as_operation, fail
from ironaccelerator_runtime.traits import (
    Allocation, CopyRegion, Event, InFlight, Kernel, KernelLaunch, LaunchDims, Result, Scalar, Stream, check_span,
    device_span, fill_pattern, host_span, host_view, not_a_launch, unsupported,
)

if TYPE_CHECKING:  # (and bound at run time by __init__.py: the module defining it imports this one)
    from ironaccelerator_runtime.backends.gpu.device import GpuDevice


_UINT_MAX = 2**32 - 1  # the launch function's grid, block and shared memory parameters are unsigned int


def _stream_gone(backend: str, check: bool) -> Error:
    """The Error of a prepared launcher called after its stream was dropped (and destroyed)."""
    return fail(ErrorKind.INVALID_HANDLE, "Stream.launch" if check else "Stream.launch_unchecked", "the stream of "
                "this launch method was dropped (and destroyed): keep the Stream while you launch on it", backend)


class GpuStream(Stream):
    """A non-blocking stream (``stream_flags``).  A vendor's subclass (generated) names the classes of its kernels
    and events: ``kernel_class``, ``event_class``.

    Launches: where the launch function's module is compiled (API mode), a stream's ``launch`` and
    ``launch_unchecked`` are prepared launchers (``_fast._launcher``, ia_runtime.h), bound as instance
    attributes over the methods below: each keeps the last KernelLaunch it launched, its arguments packed
    (an Allocation as its ``.ptr``, a numpy scalar as its bytes, by the kernel's layout for their types), so
    launching that same KernelLaunch again is one C call that makes no Python object: the device current,
    none of its allocations freed, then the vendor's ``launch``.  A new KernelLaunch is prepared first (its
    dims through :meth:`_dim_args`, once per LaunchDims).  What a launcher cannot prepare or launch (the first
    launch of each tuple of argument types, Scalars, a count or size the kernel's parameter info rejects, a
    freed allocation, another device current on this thread, launch options, every launch while the stream
    captures: see :meth:`_record_into`) takes the methods below, which launch or raise (return) their own Error.
    A launcher holds its stream weakly (the stream holds it): one kept after its stream was dropped refuses,
    INVALID_HANDLE.  The methods themselves use ``_fast._launch``,
    which packs on the C stack with the same layouts.

    The Python path packs without building anything per call where possible (the driver copies the
    arguments before the launch function returns, so their memory need only live until then):

    - the kernel keeps one :class:`_ArgPlan` per tuple of argument types;
    - the stream keeps one buffer per plan, rewritten by each launch with that plan.  The buffer is
      shared state, so it is used under a lock taken without waiting: a thread that finds it taken
      (another thread launching on this stream right now) packs into a buffer of its own instead;
    - a ``KernelLaunch`` launched twice in a row gets a private, immutable packed copy, and from then on
      is re-issued without packing (the checked path still tests that its allocations are live).  The
      stream (and each of its launchers) holds that last launch (and so its allocations) until the next
      launch with another one (through the same method), ``synchronize()``, or a ``query()`` that finds the
      stream idle, as it holds the host buffers of copies;
    - the last ``LaunchDims`` validated is remembered (by identity: LaunchDims are immutable).
    """

    device: GpuDevice
    kernel_class: ClassVar[type[GpuKernel]]
    event_class: ClassVar[type[GpuEvent]]

    def __init__(self, device: GpuDevice) -> None:
        api = device.api
        self.device = device
        self.api: GpuApi = api  # (typed for graph.py: the two import each other)
        device.activate()
        out = api.ffi.new(api.tables.types["stream"] + " *")
        api.check(api.stream_create(out, api.tables.const("stream_flags")), "stream_create")
        self.handle = out[0]
        self._finalizer = weakref.finalize(self, _destroy, api.stream_destroy, self.handle, device._ctx)
        self._inflight = InFlight()  # host buffers of copies in flight, until work after them is seen complete
        self._ffi = api.ffi
        self._htod: Callable[..., int] = api.memcpy_htod
        self._dtoh: Callable[..., int] = api.memcpy_dtoh
        self._dtod: Callable[..., int] = api.memcpy_dtod
        self._launch: Callable[..., int] = api.launch
        self._kernel_type = self.kernel_class  # (instance attributes: the launch and copy paths read them)
        self._kind = device.backend.kind
        self._address = _address(self.handle)
        self._device_key = device._key
        self._pack_lock = threading.Lock()  # guards the buffers of _slots
        self._slots: dict[_ArgPlan, tuple[Any, Any, Any]] = {}  # plan -> (storage, view, params)
        # the last launch: (KernelLaunch, the launch function's arguments or None, allocations, storage, checked)
        self._last: tuple[Any, ...] | None = None
        # (LaunchDims, its 7 launch arguments, validated); first a key no dims are (None must not match it)
        self._dims: tuple[Any, ...] = (object(), (), False)
        self._launchers: tuple[Any, ...] = ()
        self._launch_packed = api.launch_packed  # (binds the prepared launchers: see the property)
        device._streams.add(self)

    @property
    def _launch_packed(self) -> Callable[..., int | None] | None:
        """The compiled launch (``_fast._launch``), or None: the Python path (tests set None to compare the two).
        Setting it binds this stream's prepared launchers (``_fast._launcher``, API mode) as its ``launch`` and
        ``launch_unchecked``, instance attributes over the methods below, or (None) unbinds them."""
        return self._packed

    @_launch_packed.setter
    def _launch_packed(self, fast: Callable[..., int | None] | None) -> None:
        self._packed = fast
        if self._launchers:
            for launcher in self._launchers:
                launcher._shut()  # (a launcher kept by a caller takes the methods from now on)
            del self.launch, self.launch_unchecked  # (not through __dict__: that would slow every attribute)
            self._launchers = ()
        cls = type(self)
        make = self.api.launcher
        if fast is None or make is None:
            return
        ref, gone = weakref.ref(self), functools.partial(_stream_gone, self.api.name)
        launchers = tuple(make(ref, getattr(cls, name), error, cls._dim_args, gone, self._kernel_type, KernelLaunch,
                               _TLS, self._device_key, self._address, check)
                          for name, check, error in (("launch", True, cls._compiled_error),
                                                     ("launch_unchecked", False, cls._launch_error)))
        setattr(self, "launch", launchers[0])
        setattr(self, "launch_unchecked", launchers[1])
        self._launchers = launchers

    def _forget_launches(self) -> None:
        """Drop the last launch this stream holds (see the class's doc): the Python path's and the launchers'."""
        self._last = None
        for launcher in self._launchers:
            launcher._forget()

    # copies (asynchronous; host buffers are held in _inflight until work after them is seen complete)
    def _memory(self, a: Any, what: str, param: str) -> Any:
        """The device pointer of allocation ``a`` (parameter ``param``) for a copy on this stream: ``TypeError``
        if ``a`` is not an allocation of this backend, INVALID_HANDLE if it was freed or its device or this
        stream's was closed (another open device's memory is taken: unified addressing)."""
        if not isinstance(a, Allocation) or not hasattr(a, "dptr"):
            raise TypeError(f"{what}: {param} must be a {self.api.name} Allocation, not {type(a).__name__} ({a!r})")
        if a._freed:
            a._check_live(what)
        device = self.device
        if device._closed:
            raise device._closed_error(what)
        owner = a.device
        if owner is not device and owner._closed:  # (another device's memory is taken: not a closed one's)
            raise owner._closed_error(what)
        return a.dptr

    def _at(self, dptr: Any, offset: int) -> Any:
        return _offset_ptr(self._ffi, dptr, offset)

    def copy_from_host(self, dst: Allocation, src: Any, nbytes: int | None = None, *, dst_offset: int = 0,
                       src_offset: int = 0) -> None:
        dptr = self._memory(dst, "Stream.copy_from_host", "dst")
        view = host_view(src, False, backend=self._kind, function="Stream.copy_from_host")
        n, so = view.nbytes, 0
        if nbytes is not None or dst_offset or src_offset:
            so, at, n = host_span(n, dst.nbytes, nbytes, src_offset, dst_offset, "Stream.copy_from_host",
                                  self._kind, to_device=True)
            dptr = self._at(dptr, at)
        elif n > dst.nbytes:
            raise fail(ErrorKind.INVALID_VALUE, "Stream.copy_from_host", f"{view.nbytes} bytes do not fit in {dst!r}",
                       self.api)
        self.device.activate()
        ptr = self._ffi.from_buffer(view)
        code = self._htod(dptr, ptr + so if so else ptr, n, self.handle)
        if code:
            raise self.api.error(code, "memcpy_htod")
        self._inflight.items.append((view, ptr))  # (the cdata holds the exporter's buffer)

    def copy_to_host(self, dst: Any, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
                     src_offset: int = 0) -> None:
        dptr = self._memory(src, "Stream.copy_to_host", "src")
        view = host_view(dst, True, backend=self._kind, function="Stream.copy_to_host")
        n, do = view.nbytes, 0
        if nbytes is not None or dst_offset or src_offset:
            do, at, n = host_span(n, src.nbytes, nbytes, dst_offset, src_offset, "Stream.copy_to_host", self._kind,
                                  to_device=False)
            dptr = self._at(dptr, at)
        elif n > src.nbytes:
            raise fail(ErrorKind.INVALID_VALUE, "Stream.copy_to_host", f"{view.nbytes} bytes is more than {src!r} "
                       "holds", self.api)
        self.device.activate()
        ptr = self._ffi.from_buffer(view, require_writable=True)
        code = self._dtoh(ptr + do if do else ptr, dptr, n, self.handle)
        if code:
            raise self.api.error(code, "memcpy_dtoh")
        self._inflight.items.append((view, ptr))

    def copy(self, dst: Allocation, src: Allocation, nbytes: int | None = None, *, dst_offset: int = 0,
             src_offset: int = 0) -> None:
        d = self._memory(dst, "Stream.copy", "dst")
        s = self._memory(src, "Stream.copy", "src")
        so, do, n = device_span(dst, src, nbytes, dst_offset, src_offset, self._kind)
        if not n:
            return
        self.device.activate()
        code = self._dtod(self._at(d, do), self._at(s, so), n, self.handle)
        if code:
            raise self.api.error(code, "memcpy_dtod")

    def fill(self, dst: Allocation, value: int, nbytes: int | None = None, offset: int = 0, *,
             width: int = 1) -> None:
        # ``cuMemsetD8/D16/D32Async`` (HIP: ``hipMemsetD8/D16/D32Async``) on ``nbytes // width`` elements.
        d = self._memory(dst, "Stream.fill", "dst")
        v, w = fill_pattern(value, width, "Stream.fill", self._kind)
        o, n = check_span(dst.nbytes, offset, nbytes, "dst", "Stream.fill", self._kind, width=w)
        if not n:
            return
        role = {1: "memset_d8", 2: "memset_d16", 4: "memset_d32"}[w]
        fn = getattr(self.api, role)
        self.device.activate()
        try:
            code = fn(self._at(d, o), v, n // w, self.handle)
        except OverflowError:  # hipMemsetD32Async takes an int: the same 32 bits, signed
            code = fn(self._at(d, o), v - (1 << 32), n // w, self.handle)
        if code:
            raise self.api.error(code, role)

    def _copy_rect(self, dst: Allocation | memoryview, src: Allocation | memoryview, region: CopyRegion,
                   function: str) -> None:
        """``memcpy_2d``/``memcpy_3d`` (``cuMemcpy2DAsync``/``cuMemcpy3DAsync``; HIP: ``hipMemcpyParam2DAsync``/
        ``hipDrvMemcpy3DAsync``) with one parameter struct of the vendor's (``memcpy_2d_params``/
        ``memcpy_3d_params``: the same field names on both): per side its memory type, the host or device pointer
        moved to its offset, its pitch and (3-D) rows per slice."""
        api, ffi = self.api, self._ffi
        role = "memcpy_2d" if region.dims == 2 else "memcpy_3d"
        fn = getattr(api, role)
        if fn is None:
            raise unsupported(self._kind, function)
        host_type, device_type = api.tables.const("memory_type_host"), api.tables.const("memory_type_device")
        p = ffi.new(api.tables.types[f"{role}_params"] + " *")
        keep = []
        try:
            for side, obj, offset, pitch, slab in (
                    ("src", src, region.src_offset, region.src_pitch, region.src_slice_pitch),
                    ("dst", dst, region.dst_offset, region.dst_pitch, region.dst_slice_pitch)):
                if isinstance(obj, memoryview):
                    ptr = ffi.from_buffer(obj, require_writable=side == "dst")
                    keep.append((obj, ptr))
                    setattr(p, side + "MemoryType", host_type)
                    setattr(p, side + "Host", ptr + offset)
                else:
                    setattr(p, side + "MemoryType", device_type)
                    setattr(p, side + "Device", self._at(self._memory(obj, function, side), offset))
                setattr(p, side + "Pitch", pitch)
                if region.dims == 3:
                    setattr(p, side + "Height", slab // pitch)
            p.WidthInBytes, p.Height = region.width, region.height
            if region.dims == 3:
                p.Depth = region.depth
        except OverflowError:  # a field narrower than size_t (HIP 5.2's HIP_MEMCPY3D: unsigned int)
            raise fail(ErrorKind.INVALID_VALUE, function, "a size, pitch or offset does not fit the "
                       f"{api.tables.types[role + '_params']} fields of the {api.name} backend", api) from None
        self.device.activate()
        code = fn(p, self.handle)
        if code:
            raise api.error(code, role, f"{region.width} x {region.height} x {region.depth} bytes")
        if keep:
            self._inflight.items.append(keep)  # (the cdata hold the exporters' buffers)

    def prefetch(self, alloc: Allocation, to: Any = None, nbytes: int | None = None, offset: int = 0) -> None:
        # ``prefetch_location`` (CUDA: ``cuMemPrefetchAsync``, a ``CUmemLocation`` of the host or a device) or
        # ``prefetch`` (HIP: ``hipMemPrefetchAsync``, a device ordinal or ``hipCpuDeviceId``).
        function, api = "Stream.prefetch", self.api
        dptr = self._memory(alloc, function, "alloc")
        o, n = self._prefetch_span(alloc, nbytes, offset)
        host = self._prefetch_to_host(to)
        index = self.device.index
        if to is not None and not host:
            if not isinstance(to, GpuDevice) or to.api is not api:
                raise fail(ErrorKind.INVALID_VALUE, function, f"to={to!r} is not a {api.name} device", api)
            to._check_open(function)
            index = to.index
        if not n:
            return
        self.device.activate()
        if api.prefetch_location is not None:
            role = "prefetch_location"
            loc = api.ffi.new(api.tables.types["mem_location"] + " *")
            loc.type = api.tables.const("location_host" if host else "location_device")
            loc.id = 0 if host else index
            code = api.prefetch_location(self._at(dptr, o), n, loc[0], 0, self.handle)
        elif api.prefetch is not None:
            role = "prefetch"
            code = api.prefetch(self._at(dptr, o), n, api.tables.const("cpu_device_id") if host else index,
                                self.handle)
        else:
            raise unsupported(self._kind, function)
        if code:
            raise api.error(code, role, f"{n} bytes of {alloc!r} to {'the host' if host else f'device {index}'}")

    # launches
    def _dim_args(self, dims: Any, check: bool) -> tuple[int, ...] | None:
        """The 7 launch arguments of ``dims`` (validated if ``check``), cached by identity; None for dims with
        launch options (``cooperative``, ``cluster``), which the callers hand to :meth:`_launch_options`."""
        cached = self._dims
        if cached[0] is dims and (cached[2] or not check):
            return cached[1]  # type: ignore[no-any-return]
        if type(dims) is not LaunchDims:  # (not cached: checked once per LaunchDims object)
            raise fail(ErrorKind.INVALID_VALUE, "Stream.launch" if check else "Stream.launch_unchecked",
                       f"the launch's dims must be a LaunchDims, not {type(dims).__name__}", self.api)
        if dims.cooperative or dims.cluster is not None:  # never cached: launch options take _launch_options
            return None
        g, b = dims.grid, dims.block
        if check:
            dims.validate(self.device.descriptor.limits, self._kind, "Stream.launch")
        elif max(g + b) > _UINT_MAX or min(g + b) < 0 or not 0 <= dims.shared_mem <= _UINT_MAX:
            # unchecked: what the launch function's unsigned int parameters cannot hold is still an Error (cffi
            # would raise OverflowError), never a truncated size
            raise fail(ErrorKind.INVALID_VALUE, "Stream.launch_unchecked", f"{dims} does not fit the launch's "
                       "unsigned int dimensions", self.api)
        out = (g[0], g[1], g[2], b[0], b[1], b[2], dims.shared_mem)
        self._dims = (dims, out, check)
        return out

    def _issue(self, launch: KernelLaunch, kernel: GpuKernel, check: bool) -> int:
        """Pack and launch (everything but the re-issue of the last launch); returns the vendor's status."""
        dims = self._dim_args(launch[1], check)
        if dims is None:
            return self._launch_options(launch, kernel, check)
        args = launch[2]
        if getattr(_TLS, "key", None) != self._device_key:
            self.device.activate()
        last = self._last
        null = self._ffi.NULL
        sizes = kernel.param_sizes
        if sizes is not None and len(args) != len(sizes):  # never launched, checked or not: a missing argument
            raise _count_error(self.api.name, len(sizes), len(args), kernel.name,  # would be read from stale memory
                               "Stream.launch" if check else "Stream.launch_unchecked")
        if not args:
            kernel._layouts[()] = _EMPTY_LAYOUT
            call = (kernel.handle, *dims, self.handle, null, null)
            self._last = (launch, call, (), None, check)
            return int(self._launch(*call))
        key: tuple[Any, ...] = tuple(map(type, args))  # the plan's key (see Kernel._plan)
        if Scalar in key:
            key += tuple([a.dtype for a in args if type(a) is Scalar])
        plan = kernel._plans.get(key)
        if plan is None:
            plan = kernel._plan(args, key)
        if plan is None or not plan.checked:  # pack_args: the reference layout and its errors
            # (sizes checked unchecked too, where the kernel's parameter info gives them: a value of another size
            # would be read with bytes that are not its own; the kernel-argument policy, kernel_args)
            packed = pack_args(args, self._ffi, kernel.param_sizes, check=True, backend=self.api.name)
            self._last = None
            return int(self._launch(kernel.handle, *dims, self.handle, packed.params, null))
        for i in plan.allocs:  # checked or not: a freed allocation's address may be other memory by now
            if args[i]._freed:
                args[i]._check_live("Stream.launch" if check else "Stream.launch_unchecked")
        values = plan.values(args)
        if last is not None and last[0] is launch:  # the second launch in a row: give it an immutable copy
            storage, view, params = plan.buffer(self._ffi)
            struct.pack_into(plan.fmt, view, plan.data_offset, *values)
            call = (kernel.handle, *dims, self.handle, params, null)
            self._last = (launch, call, tuple(args[i] for i in plan.allocs), storage, check)
            return int(self._launch(*call))
        self._last = (launch, None, (), None, False)
        lock = self._pack_lock
        if not lock.acquire(False):  # another thread is launching on this stream: a buffer of our own
            storage, view, params = plan.buffer(self._ffi)
            struct.pack_into(plan.fmt, view, plan.data_offset, *values)
            return int(self._launch(kernel.handle, *dims, self.handle, params, null))
        try:
            slot = self._slots.get(plan)
            if slot is None:
                if len(self._slots) >= _MAX_PLANS:
                    self._slots.clear()
                slot = self._slots[plan] = plan.buffer(self._ffi)
            struct.pack_into(plan.fmt, slot[1], plan.data_offset, *values)
            return int(self._launch(kernel.handle, *dims, self.handle, slot[2], null))
        finally:
            lock.release()

    def launch(self, launch: KernelLaunch | Kernel, *parts: Any) -> None:
        """:meth:`Stream.launch`; also ``launch(kernel, dims, *args)``, cuda.core's ``launch(stream, config,
        kernel, *args)`` order of a :class:`KernelLaunch` built per call (in C on the compiled path)."""
        if parts:
            launch = KernelLaunch(cast(GpuKernel, launch), parts[0], parts[1:])
        if TYPE_CHECKING:  # (a one-argument call is a KernelLaunch, else refused below as not a launch)
            assert isinstance(launch, KernelLaunch)
        try:
            kernel, launch_dims, args = launch  # (cheaper than its three properties)
        except (TypeError, ValueError):
            raise not_a_launch(launch, "Stream.launch") from None
        fast = self._packed
        if fast is not None and type(kernel) is self._kernel_type:  # the compiled launch (see Stream)
            cached = self._dims
            if cached[0] is launch_dims and cached[2]:
                dims = cached[1]
            else:
                dims = self._dim_args(launch_dims, True)
                if dims is None:  # launch options: the extended launch (not the compiled path)
                    self._raise_launch(self._launch_options(launch, kernel, True), kernel, launch_dims)
                    return
            if getattr(_TLS, "key", None) != self._device_key:
                self.device.activate()
            code = fast(kernel._layouts, args, True, kernel._address, dims, self._address)
            if code is not None:
                if code:
                    raise self.api.error(code, "launch", f"kernel {kernel.name!r}")
                return
        last = self._last
        if last is not None and last[0] is launch and last[1] is not None and last[4]:  # re-issue, packed
            for a in last[2]:
                if a._freed:
                    a._check_live("Stream.launch")
            if getattr(_TLS, "key", None) != self._device_key:
                self.device.activate()
            code = self._launch(*last[1])
        else:
            if not isinstance(kernel, self._kernel_type):
                raise fail(ErrorKind.INVALID_VALUE, "Stream.launch", f"not a {self.api.name} kernel", self.api)
            code = self._issue(launch, kernel, True)
        if code:
            self._raise_launch(code, kernel, launch_dims)

    def launch_unchecked(self, launch: KernelLaunch | Kernel, *parts: Any) -> Result[None]:
        # The launch without LaunchDims validation against the device's limits, returning the Error (see
        # docs/UNCHECKED.md): still refused a kernel of another backend, a wrong argument count or size, a freed
        # allocation, dimensions the launch function cannot take, a closed device.  A non-KernelLaunch raises
        # TypeError.  launch_unchecked(kernel, dims, *args): as launch's.
        if parts:
            launch = KernelLaunch(cast(GpuKernel, launch), parts[0], parts[1:])
        if TYPE_CHECKING:  # (a one-argument call is a KernelLaunch, else refused below as not a launch)
            assert isinstance(launch, KernelLaunch)
        try:
            kernel, launch_dims, args = launch  # (cheaper than its three properties)
        except (TypeError, ValueError):
            raise not_a_launch(launch, "Stream.launch_unchecked") from None
        if type(kernel) is not self._kernel_type and not isinstance(kernel, self._kernel_type):
            return fail(ErrorKind.INVALID_VALUE, "Stream.launch_unchecked", f"{kernel!r:.80} is not a {self.api.name} "
                        "kernel", self.api)
        fast = self._packed
        try:
            code = None
            if fast is not None:  # the compiled launch (see Stream)
                cached = self._dims
                dims = cached[1] if cached[0] is launch_dims else self._dim_args(launch_dims, False)
                if getattr(_TLS, "key", None) != self._device_key:
                    self.device.activate()
                code = fast(kernel._layouts, args, False, kernel._address, dims, self._address) if dims is not None \
                    else self._launch_options(launch, kernel, False)
            if code is None:
                last = self._last
                if last is not None and last[0] is launch and last[1] is not None:  # re-issue, packed
                    for a in last[2]:
                        if a._freed:
                            a._check_live("Stream.launch_unchecked")
                    if getattr(_TLS, "key", None) != self._device_key:
                        self.device.activate()
                    code = self._launch(*last[1])
                else:
                    code = self._issue(launch, kernel, False)
        except Error as e:  # (a value: its frames would hold their objects; named as the operation called)
            return as_operation(e.with_traceback(None), "Stream.launch", "Stream.launch_unchecked")
        if code:
            return self._launch_error(code, kernel, launch_dims)
        return None

    # launches with options (LaunchDims(cooperative=..., cluster=...)): the vendor's launch_ex, never the compiled path
    def _launch_options(self, launch: KernelLaunch, kernel: Any, check: bool) -> int:
        """Launch with ``launch_ex`` (``cuLaunchKernelEx``): the config and its attributes (cooperative, cluster
        dimensions) built per call, the arguments packed by :func:`pack_args`.  Returns the vendor's status.
        ``UNSUPPORTED`` where the vendor has no ``launch_ex`` (HIP) or, checked, where the device's capability
        lacks the flag of an option set."""
        what = "Stream.launch" if check else "Stream.launch_unchecked"
        dims: LaunchDims = launch[1]
        api = self.api
        if api.launch_ex is None:
            raise dims.options_error(self._kind, what)
        if not isinstance(kernel, self._kernel_type):
            raise fail(ErrorKind.INVALID_VALUE, what, f"not a {api.name} kernel", api)
        device = self.device
        if device._closed:
            raise device._closed_error(what)
        if check:
            dims.validate(device.descriptor.limits, self._kind, what)
            flags = device.descriptor.capability.flags
            for on, flag, name in ((dims.cooperative, CapabilityFlags.COOPERATIVE_LAUNCH, "cooperative launch"),
                                   (dims.cluster is not None, CapabilityFlags.THREAD_BLOCK_CLUSTERS,
                                    "thread-block clusters")):
                if on and flag not in flags:
                    raise fail(ErrorKind.UNSUPPORTED, what, f"{name} is not supported by {device.descriptor.name} "
                               f"({device.descriptor.id}: its Capability lacks {flag.name})", api)
        args, sizes = launch[2], kernel.param_sizes
        if sizes is not None and len(args) != len(sizes):  # checked or not (a missing argument: stale memory)
            raise _count_error(api.name, len(sizes), len(args), kernel.name, what)
        packed = pack_args(args, self._ffi, sizes, check=True, backend=api.name)  # (sizes: as _issue)
        ffi, tables = self._ffi, api.tables
        attrs = ffi.new(tables.types["launch_attribute"] + "[2]")
        n = 0
        if dims.cooperative:
            attrs[n].id = tables.const("launch_attr_cooperative")
            attrs[n].value.cooperative = 1
            n += 1
        if dims.cluster is not None:
            attrs[n].id = tables.const("launch_attr_cluster")
            c = attrs[n].value.clusterDim
            c.x, c.y, c.z = dims.cluster
            n += 1
        config = ffi.new(tables.types["launch_config"] + " *")
        g, b = dims.grid, dims.block
        config.gridDimX, config.gridDimY, config.gridDimZ = g
        config.blockDimX, config.blockDimY, config.blockDimZ = b
        config.sharedMemBytes = dims.shared_mem
        config.hStream = self.handle
        config.attrs = attrs
        config.numAttrs = n
        if getattr(_TLS, "key", None) != self._device_key:
            device.activate()
        self._last = None
        return int(api.launch_ex(config, kernel.handle, packed.params, ffi.NULL))

    def _launch_error(self, code: int, kernel: Any, dims: Any) -> Error:
        """The Error of a failed launch; for a cooperative grid too large to be resident at once, what fits."""
        detail = f"kernel {kernel.name!r}"
        api = self.api
        if api.launch_ex is not None and code == api.tables.const("status_cooperative_too_large"):
            b = dims.block
            try:
                per_sm = kernel.max_active_blocks(b[0] * b[1] * b[2], dims.shared_mem)
                fits = f"at most {per_sm * self.device.descriptor.compute_units} blocks"
            except Error:
                fits = "at most Kernel.max_active_blocks(threads) x compute units blocks"
            g = dims.grid
            detail += (f": a cooperative grid must be resident all at once; {g[0] * g[1] * g[2]} blocks of {b} "
                       f"requested, {fits} fit on {self.device.descriptor.id}")
        return api.error(code, "launch_ex" if getattr(dims, "has_options", False) else "launch", detail)

    def _compiled_error(self, code: int, kernel: Any, dims: Any) -> None:
        """Raise the Error of a failed compiled launch (a prepared launcher's, checked)."""
        raise self.api.error(code, "launch", f"kernel {kernel.name!r}")

    def _raise_launch(self, code: int, kernel: Any, dims: Any) -> None:
        if code:
            raise self._launch_error(code, kernel, dims)

    def _shut(self) -> None:
        """The device was closed: launches on this stream are refused from now on, checked or not, at no cost
        to the launch paths (the compiled launch is dropped and the launch function replaced by one that
        raises the closed-device Error, which ``launch_unchecked`` returns)."""
        error = self.device._closed_error

        def refuse(*_: Any) -> int:
            raise error("Stream.launch")

        self._launch_packed = None  # (and the prepared launchers)
        self._launch = refuse
        self._last = None
        self._slots = {}

    # events and ordering
    def record_event(self) -> GpuEvent:
        api = self.api
        device = self.device
        if device._closed:
            raise device._closed_error("Stream.record_event")
        device.activate()
        out = api.ffi.new(api.tables.types["event"] + " *")
        api.check(api.event_create(out, api.tables.const("event_flags")), "event_create")
        inflight = self._inflight
        event = self.event_class(device, out[0], inflight, inflight.mark())
        api.check(api.event_record(event.handle, self.handle), "event_record")
        return event

    @property
    def __cuda_stream__(self) -> Callable[[], tuple[int, int]]:
        """The CUDA stream protocol (CUDA streams only: AttributeError elsewhere, so ``hasattr`` is False):
        ``stream.__cuda_stream__()`` is ``(0, handle as int)``, what cuda.core, CuPy and others accept."""
        if self._kind is not BackendKind.CUDA:
            raise AttributeError(f"{type(self).__name__} has no __cuda_stream__ ({self._kind.name} streams are not "
                                 "CUDA streams)")
        address = self._address
        return lambda: (0, address)

    def _pool_fence(self) -> GpuEvent | None:
        """None if the stream's work is complete (``stream_query``, without ``query``'s bookkeeping), else an event."""
        if self.api.stream_query(self.handle) == 0:
            return None
        return self.record_event()

    def wait_event(self, event: Event) -> None:
        if not (isinstance(event, GpuEvent) and event.api is self.api):  # (the same api: the same vendor)
            raise fail(ErrorKind.INVALID_VALUE, "Stream.wait_event", f"Stream.wait_event needs a {self.api.name} event",
                       self.api)
        if self.device._closed or event.device._closed:
            raise (self.device if self.device._closed else event.device)._closed_error("Stream.wait_event")
        self.api.check(self.api.stream_wait_event(self.handle, event.handle, 0), "stream_wait_event")

    def synchronize(self) -> None:
        if self.device._closed:
            raise self.device._closed_error("Stream.synchronize")
        mark = self._inflight.mark()
        self.api.check(self.api.stream_synchronize(self.handle), "stream_synchronize")
        self._inflight.release(mark)
        self._forget_launches()
        self._check_callback_waits("Stream.synchronize")

    _capture: GpuGraph | None = None  # the graph being captured (between capture()'s enter and exit)

    @contextlib.contextmanager
    def capture(self) -> Iterator[GpuGraph]:
        # Stream capture (``capture_begin`` in this thread's mode, ``capture_end``, ``graph_instantiate``): the
        # graph is usable after the block; an exception inside it ends the capture and discards what was recorded.
        # The allocations the captured work uses are recorded into the graph (see _record_into).
        if self.device._closed:
            raise self.device._closed_error("Stream.capture")
        if self._capture is not None:
            raise fail(ErrorKind.INVALID_VALUE, "Stream.capture", f"{self!r} is already capturing", self.api)
        api = self.api
        self.device.activate()
        api.check(api.capture_begin(self.handle, api.tables.const("capture_mode")), "capture_begin")
        graph = GpuGraph(self)
        out = api.ffi.new(api.tables.types["graph"] + " *")
        stop = self._record_into(graph)
        try:
            yield graph
        except BaseException:
            stop()
            if api.capture_end(self.handle, out) == 0 and out[0] != api.ffi.NULL:
                api.graph_destroy(out[0])
            graph.close()  # (lets go of what was recorded)
            raise
        stop()
        api.check(api.capture_end(self.handle, out), "capture_end")
        graph._adopt(out[0])

    def _record_into(self, graph: GpuGraph) -> Callable[[], None]:
        """Make every way work reaches this stream record the allocations it uses into ``graph`` (``_hold``) until
        the returned function is called, at no cost to the paths outside a capture: the device side of copies,
        fills and prefetches (``_memory``, bound over the method), the launches' allocation arguments (``_issue``,
        bound over the method, which every launch then takes: the compiled launch is off and the prepared
        launchers paused, so that they call the methods; the last launch is forgotten, so that none is re-issued
        without ``_issue``), and the host buffers of host copies (kept by the graph, which reads or writes them at
        each replay)."""
        cls = type(self)
        packed, launchers = self._packed, self._launchers
        self._forget_launches()
        for launcher in launchers:
            launcher._pause(True)
        self._packed = None  # (not the property: the launchers stay bound, paused)
        inflight = self._inflight
        start = inflight.mark()
        hold = graph._hold

        def memory(a: Any, what: str, param: str) -> Any:
            dptr = cls._memory(self, a, what, param)
            hold(a)
            return dptr

        def issue(launch: KernelLaunch, kernel: GpuKernel, check: bool) -> int:
            code = cls._issue(self, launch, kernel, check)
            if not code:
                hold(*[a for a in launch[2] if isinstance(a, Allocation)])
            return code

        setattr(self, "_memory", memory)  # (instance attributes over the methods, deleted by stop)
        setattr(self, "_issue", issue)
        self._capture = graph

        def stop() -> None:
            del self._memory, self._issue, self._capture
            with inflight._lock:  # the host buffers of the copies enqueued during the capture
                graph._host = inflight.items[max(start - inflight.base, 0):]
            self._forget_launches()
            if self._launchers is launchers and not self.device._closed:  # (a closed device's stream: shut)
                self._packed = packed
                for launcher in launchers:
                    launcher._pause(False)

        return stop

    def query(self) -> bool:
        if self.device._closed:
            raise self.device._closed_error("Stream.query")
        mark = self._inflight.mark()
        code = self.api.stream_query(self.handle)
        if code == self.api.status_not_ready:
            return False
        self.api.check(code, "stream_query")
        self._inflight.release(mark)
        self._forget_launches()
        return True
