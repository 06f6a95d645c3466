"""QNN modules (context binaries, read through libQnnSystem for their graphs and tensors) and their kernels (the
graphs, with their input and output tensors)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

from ironaccelerator._core import DType, ErrorKind
from ironaccelerator_runtime.errors import Error, fail
from ironaccelerator_runtime.kernel_args import LocalMemory, buffer_error, local_error, where
from ironaccelerator_runtime.traits import AllocationSlice, Kernel, Module, PooledAllocation, host_view

from .device import QnnDevice
from .memory import _live
from .tables import _DTYPES, _KIND, _NAME, _Owned, _RAW, _bits

# What this runtime can load (serialized QNN contexts): specs/qnn/backend.yaml's module_formats are chosen from these
# (the generator reads this literal)
MODULE_FORMATS: tuple[str, ...] = ("qnn_context_binary",)


# ---------------------------------------------------------------------------------------------------- modules


@dataclass(frozen=True)
class TensorInfo:
    """A graph input or output, as the context binary describes it."""

    name: str
    id: int
    qnn_dtype: int  # Qnn_DataType_t  ex) 0x0232 (QNN_DATATYPE_FLOAT_32)
    dtype: DType | None  # the element type of its buffer (fixed point: the storage integer); None if not mapped
    dims: tuple[int, ...]
    nbytes: int
    quantization: tuple[float, int] | None  # (scale, offset): real = (q + offset) * scale; None: not quantized
    is_input: bool


@dataclass(frozen=True)
class GraphInfo:
    """A graph of a context binary, as libQnnSystem reads it (``QnnSystemContext_getBinaryInfo``): its name and
    its input and output tensors (:class:`TensorInfo`), in the order a launch binds them."""

    name: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]


class QnnModule(Module):
    """A context (``QnnContext_createFromBinary``) and the binary's description (libQnnSystem), whose graphs
    are kernels.  The context is freed when the module is dropped or :meth:`close` d, after its kernels."""

    _system: _Owned | None  # libQnnSystem's context that read the binary (None: a graph builder's module)
    _binary: bytes | None  # the binary loaded (None: a graph builder's module)

    def __init__(self, device: QnnDevice, binary: Any) -> None:
        api = device.api
        self.device = device
        if isinstance(binary, str):
            raise fail(ErrorKind.INVALID_VALUE, "Device.load_module", "the QNN backend loads context binaries "
                       "(bytes), not source text", _NAME)
        mv = host_view(binary, backend=_KIND, function="Device.load_module")
        if mv.nbytes == 0:
            raise fail(ErrorKind.INVALID_VALUE, "Device.load_module", "the context binary is empty", _NAME)
        data = bytes(mv)
        self.nbytes = len(data)
        s = api.system
        sys_handle = s.QnnSystemContext_create()
        self._system = _Owned(sys_handle, s.unchecked.QnnSystemContext_free)
        sbuf = s.ffi.from_buffer(data)
        try:
            info, _ = s.QnnSystemContext_getBinaryInfo(sys_handle, sbuf, len(data))
        except Error as e:
            raise Error(e.kind, f"Device.load_module: not a QNN context binary this library can read ({len(data)} "
                        f"bytes): {e}", backend=_NAME, function=e.function, code=e.code) from None
        self.graphs: dict[str, tuple[tuple[TensorInfo, ...], tuple[TensorInfo, ...], int, int]] = _graphs(s, info)
        # what the binary was built for: its SoC model, and the HTP architecture (the platform info's HTP
        # extension where the binary has one, else the SoC table's)
        self.soc_model, self.platform_arch = _binary_platform(s, info)
        if self.platform_arch is None and self.soc_model:
            self.platform_arch = device.backend.tables.soc_arch(self.soc_model)
        self._binary = data  # (the description's memory belongs to the system context; the binary is ours)
        ctx = api.ffi.new("Qnn_ContextHandle_t *")
        q = api.q
        code = api.raw.QnnContext_createFromBinary(device._backend_owner.handle, device.handle, api.null,
                                                    api.ffi.from_buffer(data), len(data), ctx, api.null)
        if code:
            raise api.error(code, "QnnContext_createFromBinary", f"{len(data)}-byte context binary holding "
                            f"graphs {', '.join(self.graphs) or '(none)'}")
        owner = device._owner
        if owner is None:  # closed meanwhile
            api.raw.QnnContext_free(ctx[0], api.null)
            raise device._closed_error("Device.load_module")
        self.handle = ctx[0]
        self._owner: _Owned | None = _Owned(ctx[0], _context_free(q), owner, self._system)

    @staticmethod
    def _context_owner(device: QnnDevice, handle: Any, keep: list[Any]) -> _Owned:
        """The owner of a context made on ``device`` (``QnnContext_create``: a graph builder's), freed after every
        module and kernel of it; ``keep``: the cffi buffers the library was given for it, held until then."""
        return _Owned(handle, _context_free(device.api.q), device._owner, keep)

    @classmethod
    def _from_context(cls, device: QnnDevice, owner: _Owned,
                      graphs: dict[str, tuple[tuple[TensorInfo, ...], tuple[TensorInfo, ...], Any, Any]]) -> QnnModule:
        """The module of a context whose graphs were built and finalized in this process (:mod:`.graph`):
        ``graphs`` is what :func:`_graphs` reads from a binary, the tensor arrays as cffi arrays."""
        m = cls.__new__(cls)
        m.device = device
        m.nbytes = 0  # (not loaded from a binary)
        m._system = None
        ffi = device.api.ffi
        m.graphs = {name: (ins, outs, int(ffi.cast("uintptr_t", a)), int(ffi.cast("uintptr_t", b)))
                    for name, (ins, outs, a, b) in graphs.items()}
        m.soc_model = m.platform_arch = None
        m._binary = None
        m.handle = owner.handle
        m._owner = owner
        return m

    @property
    def graph_names(self) -> list[str]:
        """The names of the context binary's graphs, in its order (what :meth:`kernel` takes; QNN only)."""
        return list(self.graphs)

    def graph_info(self, name: str) -> GraphInfo:
        """The graph ``name`` as the context binary describes it: a :class:`GraphInfo` (names, dtypes, shapes and
        quantization of its tensors, read through libQnnSystem when the module was loaded).

        Raises:
            TypeError: ``name`` is not a str.
            Error: ``ErrorKind.INVALID_VALUE`` when the binary has no such graph (the message lists them).

        Backends:
            QNN only.
        """
        if not isinstance(name, str):
            raise TypeError(f"Module.graph_info: name must be a str, not {type(name).__name__} ({name!r})")
        entry = self.graphs.get(name)
        if entry is None:
            raise self._no_graph(name, "Module.graph_info")
        return GraphInfo(name, entry[0], entry[1])

    def save(self) -> bytes:
        # The context binary (what Device.load_module takes, in this process or another).  libQnnHtp refuses
        # QnnContext_getBinarySize on a context made from a binary ("Querying binary size after de-serializing
        # binary is illegal", 1005), so a module loaded from one returns the bytes it was loaded from; a context
        # made in this process is serialized (QnnContext_getBinarySize, QnnContext_getBinary).
        self.device._check_open("Module.save")
        if self._owner is None:
            raise fail(ErrorKind.INVALID_HANDLE, "Module.save", "the module was closed", _NAME)
        if self._binary is not None:
            return self._binary
        return context_binary(self.device.api, self.handle)

    def kernel(self, name: str) -> QnnKernel:
        self.device._check_open("Module.kernel")
        if self._owner is None:
            raise fail(ErrorKind.INVALID_HANDLE, "Module.kernel", "the module was closed", _NAME)
        if not isinstance(name, str):
            raise TypeError(f"Module.kernel: name must be a str, not {type(name).__name__} ({name!r})")
        entry = self.graphs.get(name)
        if entry is None:
            raise self._no_graph(name, "Module.kernel")
        return QnnKernel(self, name, entry)

    def _no_graph(self, name: str, function: str) -> Error:
        return fail(ErrorKind.INVALID_VALUE, function, f"no graph {name!r} in this context binary; it "
                    f"holds: {', '.join(repr(g) for g in self.graphs) or 'no graphs'}", _NAME)

    def close(self) -> None:
        """Give up the module's reference to its context now, instead of when the module is dropped.

        The context (``QnnContext_free``) is freed once no kernel of it is alive: kernels already made keep
        working; a later :meth:`kernel` raises ``INVALID_HANDLE``.  Idempotent.

        Raises:
            Error: never.

        Backends:
            QNN only (other modules are released when dropped).
        """
        self._owner = None


def context_binary(api: Any, context: Any) -> bytes:
    """Serialize a context made in this process (``QnnContext_getBinarySize``, then ``QnnContext_getBinary``):
    what :meth:`QnnModule.save` returns for one.  The library's error where it refuses (a context made from a
    binary: 1005, DRIVER)."""
    q = api.q
    size = q.QnnContext_getBinarySize(context)
    buf = api.ffi.new("uint8_t[]", size)
    written = q.QnnContext_getBinary(context, buf, size)
    return bytes(api.ffi.buffer(buf, written))


def _context_free(q: Any) -> Callable[[Any], object]:
    raw, null = q.unchecked, q.ffi.NULL
    return lambda ctx: raw.QnnContext_free(ctx, null)


def _tensor_info(s: Any, t: Any, is_input: bool) -> TensorInfo:
    v = t.v1 if t.version == 1 else t.v2  # (v2 begins with v1's fields)
    name = s.ffi.string(v.name).decode("utf-8", "replace") if v.name else ""
    dims = tuple(int(v.dimensions[i]) for i in range(v.rank)) if v.dimensions else ()
    qdt = int(v.dataType)
    n = 1
    for d in dims:
        n *= d
    nbytes = (n * _bits(qdt) + 7) // 8
    qp = v.quantizeParams
    quant = None
    if qp.encodingDefinition == 1 and qp.quantizationEncoding == 0:  # DEFINED, SCALE_OFFSET
        quant = (float(qp.scaleOffsetEncoding.scale), int(qp.scaleOffsetEncoding.offset))
    return TensorInfo(name=name, id=int(v.id), qnn_dtype=qdt, dtype=_DTYPES.get(qdt), dims=dims, nbytes=nbytes,
                      quantization=quant, is_input=is_input)


def _graphs(s: Any, info: Any) -> dict[str, tuple[tuple[TensorInfo, ...], tuple[TensorInfo, ...], int, int]]:
    """name -> (inputs, outputs, address of the inputs' Qnn_Tensor_t array, of the outputs')."""
    version = int(info.version)
    body = {1: "contextBinaryInfoV1", 2: "contextBinaryInfoV2", 3: "contextBinaryInfoV3"}.get(version)
    if body is None:
        raise fail(ErrorKind.UNSUPPORTED, "QnnSystemContext_getBinaryInfo",
                   f"context binary info version {version} is not one of 1-3", _NAME)
    b = getattr(info, body)
    out = {}
    for i in range(b.numGraphs):
        g = b.graphs[i]
        gi = {1: g.graphInfoV1, 2: g.graphInfoV2, 3: g.graphInfoV3}.get(int(g.version))
        if gi is None:
            continue
        name = s.ffi.string(gi.graphName).decode("utf-8", "replace")
        ins = tuple(_tensor_info(s, gi.graphInputs[k], True) for k in range(gi.numGraphInputs))
        outs = tuple(_tensor_info(s, gi.graphOutputs[k], False) for k in range(gi.numGraphOutputs))
        out[name] = (ins, outs, int(s.ffi.cast("uintptr_t", gi.graphInputs)),
                     int(s.ffi.cast("uintptr_t", gi.graphOutputs)))
    return out


def _binary_platform(s: Any, info: Any) -> tuple[int | None, int | None]:
    """(SoC model, HTP arch) a version-3 binary info reports (socModel; the platform info's HTP extension)."""
    if int(info.version) != 3:
        return None, None
    b = info.contextBinaryInfoV3
    soc = int(b.socModel) or None
    arch = None
    pi = b.platformInfo
    if pi and pi.version == 1 and pi.v1.numHwDevices and pi.v1.hwDevices:
        hw = pi.v1.hwDevices[0]
        if hw.version == 1 and hw.v1.deviceInfoExtension:
            ext = s.ffi.cast("QnnHtpDevice_DeviceInfoExtension_t *", hw.v1.deviceInfoExtension)
            if ext.devType == 0:
                arch = int(ext.onChipDevice.arch) or None
    return soc, arch


class QnnKernel(Kernel):
    """A graph of a module (``QnnGraph_retrieve``): ``inputs``/``outputs`` (:class:`TensorInfo`) and the
    ``Qnn_Tensor_t`` arrays a launch binds (copies of the binary's tensors, memType RAW), cached with the
    arguments last bound."""

    def __init__(self, module: QnnModule, name: str,
                 entry: tuple[tuple[TensorInfo, ...], tuple[TensorInfo, ...], int, int]) -> None:
        api = module.device.api
        self.module = module
        self.name = name
        self.inputs, self.outputs, in_addr, out_addr = entry
        self.handle = api.q.QnnGraph_retrieve(module.handle, name)
        self._owner = module._owner  # the context lives while a kernel of it does
        ffi = api.ffi
        nin, nout = len(self.inputs), len(self.outputs)
        self.num_args = nin + nout
        self._nin, self._nout = nin, nout
        self._ins = ffi.new("Qnn_Tensor_t[]", max(nin, 1))
        self._outs = ffi.new("Qnn_Tensor_t[]", max(nout, 1))
        src_in = ffi.cast("Qnn_Tensor_t *", in_addr)
        src_out = ffi.cast("Qnn_Tensor_t *", out_addr)
        for i in range(nin):
            self._ins[i] = src_in[i]
        for i in range(nout):
            self._outs[i] = src_out[i]
        self._slots = [self._ins[i].v1 for i in range(nin)] + [self._outs[i].v1 for i in range(nout)]
        for slot, t in zip(self._slots, self.inputs + self.outputs):
            slot.memType = _RAW
            slot.clientBuf.data = api.null
            slot.clientBuf.dataSize = t.nbytes
        self._bound: tuple[Any, ...] | None = None  # the argument tuple last bound (its objects, by identity)
        self._blocks: tuple[Any, ...] = ()  # ... and the allocations behind them (pooled: both), for freed tests
        self._keep: list[Any] = []  # the cffi buffers bound
        self._lock = threading.Lock()
        self._execute = api.raw.QnnGraph_execute
        self._null = api.null
        # QnnGraph_execute's arguments but the function: the tensor arrays are rebound in place
        self._call = (self.handle, self._ins, nin, self._outs, nout, api.null, api.null)

    def signature(self) -> str:
        """The graph's signature: its name, then each input and output tensor's name, element type and shape.

        ex) ``add_f32(a: f32[1, 1024], b: f32[1, 1024]) -> (c: f32[1, 1024])`` (a quantized tensor adds its
        quantization; an element type without a :class:`DType` shows as the QNN data type's hex value).

        Returns:
            The signature, a str: the arguments a launch passes are the inputs then the outputs, in this order.

        Raises:
            Error: never (it reads what the binary described).

        Backends:
            QNN only.
        """
        def one(t: TensorInfo) -> str:
            dt = t.dtype.info.name if t.dtype is not None else hex(t.qnn_dtype)
            q = f" q{t.quantization}" if t.quantization else ""
            return f"{t.name}: {dt}{list(t.dims)}{q}"
        return (f"{self.name}({', '.join(one(t) for t in self.inputs)}) -> "
                f"({', '.join(one(t) for t in self.outputs)})")

    def _bind(self, args: tuple[Any, ...], device: QnnDevice, function: str) -> Error | None:
        """Check ``args`` against the graph's tensors and bind them as client buffers (under ``_lock``)."""
        if len(args) != self.num_args:
            return fail(ErrorKind.INVALID_VALUE, function, f"graph {self.name!r} takes {self.num_args} "
                        f"allocations ({self._nin} inputs, then {self._nout} outputs: "
                        f"{', '.join(t.name for t in self.inputs + self.outputs)}), {len(args)} given", _NAME)
        keep, blocks = [], []
        tensors = self.inputs + self.outputs
        for i, (a, t) in enumerate(zip(args, tensors)):
            what = f"{function}: argument {i} ({'input' if t.is_input else 'output'} {t.name!r})"
            try:
                buf = _live(a, what, device)
            except TypeError:  # not an allocation of this backend: the kernel-argument policy's refusal
                if type(a) is LocalMemory:
                    return local_error(_NAME, function, where(i, self.name))
                return buffer_error(f"{where(i, self.name)} ({'input' if t.is_input else 'output'} {t.name!r})", a,
                                    _NAME, function)
            except Error as e:
                return e
            if a.nbytes < t.nbytes:
                dt = t.dtype.info.name if t.dtype is not None else hex(t.qnn_dtype)
                return fail(ErrorKind.INVALID_VALUE, function, f"{what} holds {a.nbytes} bytes; the tensor is "
                            f"{dt}{list(t.dims)}, {t.nbytes} bytes", _NAME)
            # element types: a typed argument (an imported tensor, Device.from_dlpack, or a slice of one) must hold
            # the tensor's type; raw memory (Device.alloc, pool blocks: dtype None) is bytes and binds by size
            typed = (a.parent if type(a) is AllocationSlice else a).dtype
            if typed is not None and t.dtype is not None and typed is not t.dtype:
                dt = t.dtype.info.name
                return fail(ErrorKind.INVALID_VALUE, function,
                            f"{what} holds {typed.info.name} elements; the tensor is "
                            f"{dt}{list(t.dims)}: pass {dt} data (convert it on the host first)", _NAME)
            keep.append(buf)
            blocks.append(a)
            if type(a) is PooledAllocation:
                blocks.append(a.block)
        for slot, buf in zip(self._slots, keep):
            slot.clientBuf.data = buf
        self._keep = keep
        self._blocks = tuple(blocks)
        self._bound = args
        return None
