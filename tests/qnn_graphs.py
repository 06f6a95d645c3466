"""ElementWiseAdd graphs built through the raw QNN bindings (ironaccelerator.backends.qnn.interface), for the QNN
tests and benchmarks: tensors, op config, finalize, then the context binary from ``QnnContext_getBinary``.

Nothing here is a stand-in: every call goes to Qualcomm's real library (libQnnHtp.so from the onnxruntime-qnn
wheel, whose HTP backend executes graphs in x86 emulation).  Tensors are ``Qnn_Tensor_t`` version 1 with RAW
client buffers; u8 tensors use QNN's scale/offset encoding, real = (q + offset) * scale.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

import ironaccelerator.backends.qnn.interface as q

ffi = q.ffi
NULL = ffi.NULL
N = 1024

# QNN data type codes (Qnn_DataType_t) and the numpy dtype of their buffers
DTYPES = {
    "f32": (q.Qnn_DataType_t.QNN_DATATYPE_FLOAT_32, np.float32),
    "f16": (q.Qnn_DataType_t.QNN_DATATYPE_FLOAT_16, np.float16),
    "u8": (q.Qnn_DataType_t.QNN_DATATYPE_UFIXED_POINT_8, np.uint8),
}
QA = (4.0 / 255, 0)  # u8 inputs: [0, 4)
QC = (8.0 / 255, 0)  # u8 output: [0, 8)
APP_WRITE, APP_READ, NATIVE = 0, 1, 3  # Qnn_TensorType_t: graph input, graph output, graph-internal
UNDEFINED = 0x7FFFFFFF


def quant(x: np.ndarray, scale: float, offset: int) -> np.ndarray:
    return np.clip(np.round(x / scale) - offset, 0, 255).astype(np.uint8)


def dequant(x: np.ndarray, scale: float, offset: int) -> np.ndarray:
    return (x.astype(np.float32) + offset) * scale


@dataclass
class Graph:
    """A finalized graph in an open context, with the tensors it was built from (ids filled in by QNN)."""

    name: str
    dtype: str
    handle: Any
    inputs: list[Any]  # Qnn_Tensor_t values
    outputs: list[Any]
    keep: list[Any] = field(default_factory=list)


@dataclass
class Session:
    """backend, device and context of libQnnHtp.so, freed in reverse order by :meth:`close`."""

    backend: Any
    device: Any
    context: Any
    graphs: list[Graph] = field(default_factory=list)
    keep: list[Any] = field(default_factory=list)

    def close(self) -> None:
        if self.context is not None:
            q.QnnContext_free(self.context, NULL)
            self.context = None
        if self.device is not None:
            q.QnnDevice_free(self.device)
            self.device = None
        if self.backend is not None:
            q.QnnBackend_free(self.backend)
            self.backend = None

    def binary(self) -> bytes:
        """The context serialized (``QnnContext_getBinarySize`` + ``QnnContext_getBinary``)."""
        size = q.QnnContext_getBinarySize(self.context)
        buf = ffi.new("uint8_t[]", size)
        written = q.QnnContext_getBinary(self.context, buf, size)
        return bytes(ffi.buffer(buf, written))


def open_session(device_config: Any = NULL) -> Session:
    backend = q.QnnBackend_create(NULL, NULL)
    device = q.QnnDevice_create(NULL, device_config)
    context = q.QnnContext_create(backend, device, NULL)
    return Session(backend, device, context)


def _cstr(keep: list[Any], s: str) -> Any:
    p = ffi.new("char[]", s.encode())
    keep.append(p)
    return p


def tensor(keep: list[Any], name: str, ttype: int, dt: str, dims: tuple[int, ...],
           quantization: tuple[float, int] | None = None) -> Any:
    t = ffi.new("Qnn_Tensor_t *")
    t.version = 1
    v = t.v1
    v.name = _cstr(keep, name)
    v.type = ttype
    v.dataType = DTYPES[dt][0]
    if quantization is None:
        v.quantizeParams.encodingDefinition = UNDEFINED
        v.quantizeParams.quantizationEncoding = UNDEFINED
    else:
        v.quantizeParams.encodingDefinition = 1  # QNN_DEFINITION_DEFINED
        v.quantizeParams.quantizationEncoding = 0  # QNN_QUANTIZATION_ENCODING_SCALE_OFFSET
        v.quantizeParams.scaleOffsetEncoding.scale, v.quantizeParams.scaleOffsetEncoding.offset = quantization
    d = ffi.new("uint32_t[]", list(dims))
    keep.append(d)
    v.rank = len(dims)
    v.dimensions = d
    keep.append(t)
    return t


def _node(s: Session, handle: Any, keep: list[Any], name: str, op_type: str, ins: list[Any], outs: list[Any]) -> None:
    """Validate and add one ``qti.aisw`` node without parameters."""
    tin = ffi.new("Qnn_Tensor_t[]", ins)
    tout = ffi.new("Qnn_Tensor_t[]", outs)
    op = ffi.new("Qnn_OpConfig_t *")
    op.version = 1
    op.v1.name = _cstr(keep, name)
    op.v1.packageName = _cstr(keep, "qti.aisw")
    op.v1.typeName = _cstr(keep, op_type)
    op.v1.numOfInputs = len(ins)
    op.v1.inputTensors = tin
    op.v1.numOfOutputs = len(outs)
    op.v1.outputTensors = tout
    keep += [tin, tout, op]
    q.QnnBackend_validateOpConfig(s.backend, op[0])
    q.QnnGraph_addNode(handle, op[0])


def add_graph(s: Session, name: str, dt: str = "f32", n: int = N) -> Graph:
    """c = a + b on 1 x n tensors of ``dt``, finalized."""
    keep: list[Any] = []
    handle = q.QnnGraph_create(s.context, name, NULL)
    qin = QA if dt == "u8" else None
    qout = QC if dt == "u8" else None
    made = []
    for tname, ttype, quantization in (("a", APP_WRITE, qin), ("b", APP_WRITE, qin), ("c", APP_READ, qout)):
        t = tensor(keep, f"{name}_{tname}", ttype, dt, (1, n), quantization)
        made.append(q.QnnTensor_createGraphTensor(handle, t[0]))  # inout: the value back, id filled in
    _node(s, handle, keep, f"{name}_add", "ElementWiseAdd", made[:2], made[2:])
    q.QnnGraph_finalize(handle, NULL, NULL)
    g = Graph(name, dt, handle, made[:2], made[2:], keep)
    s.graphs.append(g)
    return g


CHAIN_OPS = (("add", "ElementWiseAdd"), ("mul", "ElementWiseMultiply"), ("relu", "Relu"))


def chain_graph(s: Session, name: str, n: int = N) -> Graph:
    """f32 ``d = relu((a + b) * b)`` on 1 x n tensors: three nodes (``<name>_add``, ``<name>_mul``,
    ``<name>_relu``) joined by two graph-internal (NATIVE) tensors, finalized."""
    keep: list[Any] = []
    handle = q.QnnGraph_create(s.context, name, NULL)

    def make(tname: str, ttype: int) -> Any:
        return q.QnnTensor_createGraphTensor(handle, tensor(keep, f"{name}_{tname}", ttype, "f32", (1, n))[0])

    a, b = make("a", APP_WRITE), make("b", APP_WRITE)
    t1, t2 = make("sum", NATIVE), make("prod", NATIVE)
    d = make("d", APP_READ)
    _node(s, handle, keep, f"{name}_add", "ElementWiseAdd", [a, b], [t1])
    _node(s, handle, keep, f"{name}_mul", "ElementWiseMultiply", [t1, b], [t2])
    _node(s, handle, keep, f"{name}_relu", "Relu", [t2], [d])
    q.QnnGraph_finalize(handle, NULL, NULL)
    g = Graph(name, "f32", handle, [a, b], [d], keep)
    s.graphs.append(g)
    return g


def chain_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """What :func:`chain_graph` computes, in f32 (each step rounded as the graph's f32 tensors are)."""
    out: np.ndarray = np.maximum((a + b) * b, np.float32(0))
    return out


def bind(g: Graph, arrays: list[np.ndarray]) -> tuple[Any, Any]:
    """Qnn_Tensor_t input and output arrays for QnnGraph_execute, with RAW client buffers on ``arrays``
    (inputs then outputs)."""
    ins = ffi.new("Qnn_Tensor_t[]", g.inputs)
    outs = ffi.new("Qnn_Tensor_t[]", g.outputs)
    slots = [ins[i] for i in range(len(g.inputs))] + [outs[i] for i in range(len(g.outputs))]
    for slot, arr in zip(slots, arrays, strict=True):
        slot.v1.memType = 0  # QNN_TENSORMEMTYPE_RAW
        slot.v1.clientBuf.data = ffi.from_buffer(arr)
        slot.v1.clientBuf.dataSize = arr.nbytes
    return ins, outs


def inputs(dt: str, seed: int, n: int = N) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if dt == "u8":
        return (quant(rng.uniform(0, 4, (1, n)).astype(np.float32), *QA),
                quant(rng.uniform(0, 4, (1, n)).astype(np.float32), *QA))
    npdt = DTYPES[dt][1]
    return rng.standard_normal((1, n)).astype(npdt), rng.standard_normal((1, n)).astype(npdt)


def check(dt: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """Assert c == a + b: f32 exactly, f16 within one fp16 ulp, u8 within one output quantum."""
    if dt == "f32":
        np.testing.assert_array_equal(c, a + b)
    elif dt == "f16":
        ref = a.astype(np.float32) + b.astype(np.float32)
        tol = np.maximum(np.abs(ref), 1e-3) * 2.0 ** -10
        assert np.all(np.abs(c.astype(np.float32) - ref) <= tol), np.max(np.abs(c.astype(np.float32) - ref))
    else:
        err = np.abs(dequant(c, *QC) - (dequant(a, *QA) + dequant(b, *QA))) / QC[0]
        assert np.all(err <= 1.0 + 1e-6), err.max()


def build_binary(dtypes: tuple[str, ...] = ("f32",), n: int = N, chain: bool = False) -> bytes:
    """A context binary holding one add graph per dtype, named ``add_<dtype>`` (and with ``chain``, the three-node
    :func:`chain_graph` ``chain_f32`` after them)."""
    s = open_session()
    try:
        for dt in dtypes:
            add_graph(s, f"add_{dt}", dt, n)
        if chain:
            chain_graph(s, "chain_f32", n)
        return s.binary()
    finally:
        s.close()
