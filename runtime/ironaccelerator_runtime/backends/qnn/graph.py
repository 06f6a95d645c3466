"""Building QNN graphs from ops on the trait surface: what compiling source is for CUDA or OpenCL.

``builder = device.graph_builder()`` makes a context (``QnnContext_create``); ``g = builder.graph("name")`` a graph
in it (``QnnGraph_create``).  Tensors are made in the graph when they are declared (``QnnTensor_createGraphTensor``):
:meth:`Graph.input` (APP_WRITE: a launch argument), :meth:`Graph.output` (APP_READ: a launch argument after the
inputs), :meth:`Graph.tensor` (NATIVE: between nodes) and :meth:`Graph.constant` (STATIC: data copied in now).  Each
is a :class:`DType` (fixed point: an integer DType with ``quantization=(scale, offset)``, real = (q + offset) *
scale), and dims.  :meth:`Graph.node` adds a node of package ``qti.aisw`` (the ops of :mod:`.ops`) after checking it
against the op table and then with ``QnnBackend_validateOpConfig``: an invalid node is ``INVALID_VALUE`` naming the
node and, where one is to blame, the parameter, when it is added, not at finalize.  ``builder.finalize()`` (or
``device.load_module(builder)``) finalizes each graph (``QnnGraph_finalize``) and gives a :class:`QnnModule` of the
context, whose graphs are kernels like a context binary's.

Ownership: QNN keeps pointers into what it is given (tensor names, dims, static data, parameter tensors) at least
until the graph is finalized; the builder keeps every cffi buffer it passed, and hands them to the module, which
keeps them until the context is freed.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ironaccelerator._core import DType, ErrorKind
from ironaccelerator_runtime.backends import qnn_log
from ironaccelerator_runtime.errors import Error, fail
from ironaccelerator_runtime.traits import host_view

from .device import QnnDevice
from .module import QnnModule, TensorInfo
from .ops import OPS, PACKAGE, OpDef, ParamDef
from .tables import _APP_READ, _APP_WRITE, _NAME, _bits

_NATIVE, _STATIC = 3, 4  # Qnn_TensorType_t
_SCALAR, _TENSOR = 0, 1  # Qnn_ParamType_t
_UNDEFINED = 0x7FFFFFFF
_DEFINED, _SCALE_OFFSET = 1, 0  # Qnn_Definition_t, Qnn_QuantizationEncoding_t

# DType -> Qnn_DataType_t, plain and fixed point (quantized: the storage integer with a scale and offset)
_PLAIN = {DType.F32: 0x0232, DType.F16: 0x0216, DType.F64: 0x0264, DType.I8: 0x0008, DType.I16: 0x0016,
          DType.I32: 0x0032, DType.I64: 0x0064, DType.U8: 0x0108, DType.U16: 0x0116, DType.U32: 0x0132,
          DType.U64: 0x0164, DType.BOOL: 0x0508}
_FIXED = {DType.I8: 0x0308, DType.I16: 0x0316, DType.I32: 0x0332, DType.U8: 0x0408, DType.U16: 0x0416,
          DType.U32: 0x0432}
# a parameter's type in the op table -> (Qnn_DataType_t, the Qnn_Scalar_t member, numpy dtype of a tensor's data)
_PARAM_TYPES: dict[str, tuple[int, str, Any]] = {"bool": (0x0508, "bool8Value", np.uint8), "uint32": (0x0132, "uint32Value", np.uint32),
                "int32": (0x0032, "int32Value", np.int32), "float32": (0x0232, "floatValue", np.float32)}
_FROM_NUMPY = {np.dtype(d.info.numpy): d for d in DType if d.info.numpy}
_PARAM_INDEX = re.compile(r"\bParam\[(\d+)\]")  # how HTP's validation log names a parameter: by its index
_ROLES = {_APP_WRITE: "input", _APP_READ: "output", _NATIVE: "tensor", _STATIC: "constant"}


@dataclass(frozen=True, eq=False)
class GraphTensor:
    """A tensor of a graph being built: what :meth:`Graph.input`, :meth:`~Graph.output`, :meth:`~Graph.tensor`
    and :meth:`~Graph.constant` return and :meth:`Graph.node` takes."""

    graph: Graph
    name: str  # ex) x
    dtype: DType
    dims: tuple[int, ...]  # ex) (1, 64)
    quantization: tuple[float, int] | None  # (scale, offset): real = (q + offset) * scale
    role: str  # input, output, tensor (between nodes) or constant
    value: Any  # the Qnn_Tensor_t QnnTensor_createGraphTensor gave back (its id filled in)

    def __repr__(self) -> str:
        q = f", quantization={self.quantization}" if self.quantization else ""
        return f"GraphTensor({self.role} {self.name!r}: {self.dtype.info.name}{list(self.dims)}{q})"


class GraphBuilder:
    """A QNN context being filled with graphs (``QnnContext_create``): :meth:`graph` adds one, :meth:`finalize`
    finalizes them all and gives the module.  Made by :meth:`QnnDevice.graph_builder`."""

    def __init__(self, device: QnnDevice) -> None:
        device._check_open("Device.graph_builder")
        api = device.api
        self.device = device
        self.api = api
        self._keep: list[Any] = []  # every cffi buffer given to the library, until the context is freed
        self.graphs: dict[str, Graph] = {}
        self._module: QnnModule | None = None
        self._lock = threading.Lock()
        self.handle = api.q.QnnContext_create(device._backend_owner.handle, device.handle, api.null)
        self._context = QnnModule._context_owner(device, self.handle, self._keep)

    def _cstr(self, s: str) -> Any:
        p = self.api.ffi.new("char[]", s.encode())
        self._keep.append(p)
        return p

    def _check_building(self, function: str) -> None:
        self.device._check_open(function)
        if self._module is not None:
            raise fail(ErrorKind.INVALID_VALUE, function, "the builder was finalized; build further graphs with a "
                       "new Device.graph_builder()", _NAME)

    def graph(self, name: str) -> Graph:
        """Add a graph to the context (``QnnGraph_create``).

        Args:
            name: the graph's name, unique in the builder: the name ``Module.kernel`` takes.

        Returns:
            The :class:`Graph`, to declare tensors and add nodes to.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for a name already used or empty, or after :meth:`finalize`; the
                library's error where ``QnnGraph_create`` fails.

        Backends:
            QNN only.
        """
        self._check_building("GraphBuilder.graph")
        _check_name(name, "graph", "GraphBuilder.graph")
        if name in self.graphs:
            raise fail(ErrorKind.INVALID_VALUE, "GraphBuilder.graph", f"there is already a graph {name!r} in this "
                       "builder", _NAME)
        handle = self.api.q.QnnGraph_create(self.handle, name, self.api.null)
        g = Graph(self, name, handle)
        self.graphs[name] = g
        return g

    def finalize(self) -> QnnModule:
        """Finalize every graph (``QnnGraph_finalize``) and give the context as a module, whose graphs are its
        kernels (``module.kernel(name)``; a launch passes the graph's inputs, then its outputs, in the order
        they were declared).  A second call returns the same module; ``Device.load_module(builder)`` calls this.

        Returns:
            The :class:`QnnModule`.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for a builder without graphs or a graph without outputs (naming
                it); the library's error where ``QnnGraph_finalize`` fails, naming the graph.

        Backends:
            QNN only.
        """
        with self._lock:
            if self._module is not None:
                return self._module
            self.device._check_open("GraphBuilder.finalize")
            if not self.graphs:
                raise fail(ErrorKind.INVALID_VALUE, "GraphBuilder.finalize", "the builder has no graphs "
                           "(GraphBuilder.graph adds one)", _NAME)
            for g in self.graphs.values():
                if not g.outputs:
                    raise fail(ErrorKind.INVALID_VALUE, "GraphBuilder.finalize", f"graph {g.name!r} has no outputs "
                               "(Graph.output declares one)", _NAME)
            api = self.api
            entries = {}
            for g in self.graphs.values():
                code = api.raw.QnnGraph_finalize(g.handle, api.null, api.null)
                if code:
                    raise api.error(code, "QnnGraph_finalize", f"graph {g.name!r} "
                                    f"({len(g.nodes)} nodes: {', '.join(g.nodes) or 'none'})")
                entries[g.name] = g._entry()
            self._module = QnnModule._from_context(self.device, self._context, entries)
            return self._module


class Graph:
    """One graph of a :class:`GraphBuilder` (``QnnGraph_create``): its tensors and nodes."""

    def __init__(self, builder: GraphBuilder, name: str, handle: Any) -> None:
        self.builder = builder
        self.name = name
        self.handle = handle
        self.tensors: dict[str, GraphTensor] = {}
        self.inputs: list[GraphTensor] = []
        self.outputs: list[GraphTensor] = []
        self.nodes: list[str] = []
        self._produced: set[str] = set()  # tensors a node writes
        self._param_tensors: set[str] = set()  # the static tensors of nodes' tensor parameters: "<node>.<param>"

    # tensors
    def input(self, name: str, dtype: DType, dims: Sequence[int], *,
              quantization: tuple[float, int] | None = None) -> GraphTensor:
        """Declare a graph input (APP_WRITE; ``QnnTensor_createGraphTensor``): a launch argument, in the order
        inputs are declared.

        Args:
            name: unique in the graph.
            dtype: its element type; an integer DType with ``quantization`` is QNN fixed point.
            dims: its shape, each dimension >= 1.
            quantization: ``(scale, offset)``, real = (q + offset) * scale; None: not quantized.

        Returns:
            The :class:`GraphTensor`.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for a name already used, a DType QNN has no type for, bad dims or
                quantization; the library's error where it refuses the tensor.

        Backends:
            QNN only.
        """
        return self._tensor("Graph.input", name, dtype, dims, quantization, _APP_WRITE)

    def output(self, name: str, dtype: DType, dims: Sequence[int], *,
               quantization: tuple[float, int] | None = None) -> GraphTensor:
        """Declare a graph output (APP_READ): a launch argument after the inputs, in the order outputs are
        declared.  Arguments, result and errors as :meth:`input`'s.

        Args:
            name: unique in the graph.
            dtype: its element type (with ``quantization``: fixed point).
            dims: its shape.
            quantization: ``(scale, offset)`` or None.

        Returns:
            The :class:`GraphTensor`.

        Raises:
            Error: as :meth:`input`.

        Backends:
            QNN only.
        """
        return self._tensor("Graph.output", name, dtype, dims, quantization, _APP_READ)

    def tensor(self, name: str, dtype: DType, dims: Sequence[int], *,
               quantization: tuple[float, int] | None = None) -> GraphTensor:
        """Declare a tensor between nodes (NATIVE): one node writes it, later nodes read it.  Arguments, result
        and errors as :meth:`input`'s.

        Args:
            name: unique in the graph.
            dtype: its element type (with ``quantization``: fixed point).
            dims: its shape.
            quantization: ``(scale, offset)`` or None.

        Returns:
            The :class:`GraphTensor`.

        Raises:
            Error: as :meth:`input`.

        Backends:
            QNN only.
        """
        return self._tensor("Graph.tensor", name, dtype, dims, quantization, _NATIVE)

    def constant(self, name: str, data: Any, *, dtype: DType | None = None, dims: Sequence[int] | None = None,
                 quantization: tuple[float, int] | None = None) -> GraphTensor:
        """Declare a tensor of fixed data (STATIC): weights, a bias.  The data is copied now.

        Args:
            name: unique in the graph.
            data: a numpy array or any C-contiguous buffer-protocol object.
            dtype: its element type; None: the array's (a plain buffer needs one).
            dims: its shape; None: the array's.
            quantization: ``(scale, offset)`` for fixed-point data (``data`` holds the stored integers).

        Returns:
            The :class:`GraphTensor`.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` where the data's size is not ``dims`` x the element size, for data
                without the buffer protocol, or as :meth:`input`.

        Backends:
            QNN only.
        """
        function = "Graph.constant"
        if dtype is None or dims is None:
            arr = np.asarray(data) if hasattr(data, "__array_interface__") or hasattr(data, "dtype") else None
            if arr is None:
                raise fail(ErrorKind.INVALID_VALUE, function, f"constant {name!r}: a {type(data).__name__} has no "
                           "element type or shape: pass dtype= and dims=, or a numpy array", _NAME)
            if dtype is None:
                dtype = _FROM_NUMPY.get(arr.dtype)
                if dtype is None:
                    raise fail(ErrorKind.INVALID_VALUE, function, f"constant {name!r}: numpy dtype {arr.dtype} has "
                               "no DType", _NAME)
            if dims is None:
                dims = arr.shape
        view = host_view(data, backend=_NAME, function=function)
        dims = _check_dims(dims, name, function)
        want = math.prod(dims) * dtype.info.size if isinstance(dtype, DType) else -1
        if isinstance(dtype, DType) and view.nbytes != want:
            raise fail(ErrorKind.INVALID_VALUE, function, f"constant {name!r}: {view.nbytes} bytes of data for "
                       f"{dtype.info.name}{list(dims)}, which is {want} bytes", _NAME)
        return self._tensor(function, name, dtype, dims, quantization, _STATIC, view)

    def _tensor(self, function: str, name: str, dtype: Any, dims: Any, quantization: Any, ttype: int,
                data: memoryview | None = None) -> GraphTensor:
        b = self.builder
        b._check_building(function)
        _check_name(name, "tensor", function)
        if name in self.tensors or name in self._param_tensors:
            role = self.tensors[name].role if name in self.tensors else "a node's tensor parameter"
            raise fail(ErrorKind.INVALID_VALUE, function, f"graph {self.name!r} already has a tensor {name!r} "
                       f"({role})", _NAME)
        dims = _check_dims(dims, name, function)
        qdt = _qnn_dtype(dtype, quantization, name, function)
        ffi = b.api.ffi
        t = ffi.new("Qnn_Tensor_t *")
        t.version = 1
        v = t.v1
        v.name = b._cstr(name)
        v.type = ttype
        v.dataType = qdt
        _set_quantization(v.quantizeParams, quantization)
        d = ffi.new("uint32_t[]", list(dims))
        v.rank = len(dims)
        v.dimensions = d
        b._keep += [d, t]
        if data is not None:
            buf = ffi.new("uint8_t[]", max(data.nbytes, 1))
            ffi.memmove(buf, data, data.nbytes)
            b._keep.append(buf)
            v.clientBuf.data = buf
            v.clientBuf.dataSize = data.nbytes
        value = b.api.q.QnnTensor_createGraphTensor(self.handle, t[0])
        gt = GraphTensor(self, name, dtype, dims, quantization, _ROLES[ttype], value)
        self.tensors[name] = gt
        if ttype == _APP_WRITE:
            self.inputs.append(gt)
        elif ttype == _APP_READ:
            self.outputs.append(gt)
        if ttype in (_APP_WRITE, _STATIC):
            self._produced.add(name)
        return gt

    # nodes
    def node(self, op: str, inputs: GraphTensor | Sequence[GraphTensor], outputs: GraphTensor | Sequence[GraphTensor], *,
             name: str | None = None, **params: Any) -> None:
        """Add a node of package ``qti.aisw`` (``QnnGraph_addNode``), checked first against the op table
        (:data:`.ops.OPS`) and by the library (``QnnBackend_validateOpConfig``).

        ex) ``g.node("MatMul", [x, w], [y], transpose_in1=True)``; ``g.node("Conv2d", [x, f, bias], [y],
        stride=[1, 1], pad_amount=[[0, 0], [0, 0]])``

        Args:
            op: the op's type name: ElementWiseAdd, ElementWiseMultiply, MatMul, Conv2d, FullyConnected, Relu,
                Softmax, Reshape, Transpose.
            inputs: the tensors it reads (inputs, constants, or tensors an earlier node wrote), in the op's order
                (one tensor: itself or a list of one).
            outputs: the tensor it writes (a graph output or a tensor from :meth:`tensor`), or a list of one.
            name: the node's name, unique in the graph; None: ``<op>_<n>``.
            **params: the op's parameters by their QNN names: scalars as bool, int or float, tensors as nested
                sequences or arrays of ints (``stride=[1, 1]``).

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` naming the node (and the parameter or input where one is to blame)
                for an unknown op, a wrong number of inputs, a tensor of another graph or one nothing wrote yet,
                an output already written, an unknown, missing or mistyped parameter, or a node the library
                refuses (its log messages added); the library's error where ``QnnGraph_addNode`` fails.

        Backends:
            QNN only.
        """
        function = "Graph.node"
        b = self.builder
        b._check_building(function)
        opdef = OPS.get(op) if isinstance(op, str) else None
        if opdef is None:
            raise fail(ErrorKind.INVALID_VALUE, function, f"unknown op {op!r}; the builder knows: "
                       f"{', '.join(OPS)} (package {PACKAGE})", _NAME)
        name = f"{op}_{len(self.nodes)}" if name is None else name
        _check_name(name, "node", function)
        where = f"node {name!r} ({op})"
        if name in self.nodes:
            raise fail(ErrorKind.INVALID_VALUE, function, f"{where}: graph {self.name!r} already has a node of "
                       "that name", _NAME)
        outs = [outputs] if isinstance(outputs, GraphTensor) else list(outputs)
        ins = [inputs] if isinstance(inputs, GraphTensor) else list(inputs)
        self._check_tensors(where, opdef, ins, outs)
        qparams = [self._param(where, name, opdef, k, v, ins) for k, v in params.items()]
        missing = [p.name for p in opdef.params if p.required and p.name not in params]
        if missing:
            raise fail(ErrorKind.INVALID_VALUE, function, f"{where}: parameter {missing[0]!r} is required "
                       f"({_param_text(opdef.param(missing[0]))})", _NAME)
        api = b.api
        op_cfg = self._op_config(name, opdef, ins, outs, qparams)
        code, said = _validate(api, b.device._backend_owner.handle, op_cfg[0])
        if code:
            raise self._refusal(where, opdef, ins, outs, qparams, code, said)
        # tensor parameters are static tensors of the graph: created now, the op config given their ids
        for i, (pname, kind, value, _) in enumerate(qparams):
            if kind == _TENSOR:
                made = api.q.QnnTensor_createGraphTensor(self.handle, value[0])
                op_cfg[0].v1.params[i].tensorParam = made
        code = api.raw.QnnGraph_addNode(self.handle, op_cfg[0])
        if code:
            raise api.error(code, "QnnGraph_addNode", f"{where} of graph {self.name!r}")
        self.nodes.append(name)
        self._param_tensors.update(f"{name}.{p[0]}" for p in qparams if p[1] == _TENSOR)
        for t in outs:
            self._produced.add(t.name)

    def _check_tensors(self, where: str, opdef: OpDef, ins: list[Any], outs: list[Any]) -> None:
        function = "Graph.node"
        lo, hi = len(opdef.inputs), len(opdef.inputs) + len(opdef.optional_inputs)
        if not lo <= len(ins) <= hi:
            names = list(opdef.inputs) + [f"{n} (optional)" for n in opdef.optional_inputs]
            raise fail(ErrorKind.INVALID_VALUE, function, f"{where} takes {lo if lo == hi else f'{lo} to {hi}'} "
                       f"inputs ({', '.join(names)}), {len(ins)} given", _NAME)
        if len(outs) != 1:
            raise fail(ErrorKind.INVALID_VALUE, function, f"{where} writes one output, {len(outs)} given", _NAME)
        labels = list(opdef.inputs) + list(opdef.optional_inputs)
        for label, t in zip(labels, ins):
            self._own(where, f"input {label}", t)
            if t.name not in self._produced:
                raise fail(ErrorKind.INVALID_VALUE, function, f"{where}: input {label} is {t.role} {t.name!r}, which "
                           "no earlier node writes", _NAME)
        t = outs[0]
        self._own(where, "the output", t)
        if t.role not in ("output", "tensor"):
            raise fail(ErrorKind.INVALID_VALUE, function, f"{where}: the output must be a graph output or a tensor "
                       f"(Graph.output, Graph.tensor), not {t.role} {t.name!r}", _NAME)
        if t.name in self._produced:
            raise fail(ErrorKind.INVALID_VALUE, function, f"{where}: {t.role} {t.name!r} is already written by "
                       "another node", _NAME)

    def _own(self, where: str, what: str, t: Any) -> None:
        if not isinstance(t, GraphTensor):
            raise fail(ErrorKind.INVALID_VALUE, "Graph.node", f"{where}: {what} must be a GraphTensor (from "
                       f"Graph.input/output/tensor/constant), not {type(t).__name__}", _NAME)
        if t.graph is not self:
            raise fail(ErrorKind.INVALID_VALUE, "Graph.node", f"{where}: {what} {t.name!r} belongs to graph "
                       f"{t.graph.name!r}, not {self.name!r}", _NAME)

    def _param(self, where: str, node: str, opdef: OpDef, pname: str, value: Any, ins: list[GraphTensor]) -> tuple[Any, ...]:
        """(name, Qnn_ParamType_t, the Qnn_Scalar_t or Qnn_Tensor_t pointer, the text of the value)."""
        function = "Graph.node"
        p = opdef.param(pname)
        if p is None:
            known = ", ".join(q.name for q in opdef.params) or "no parameters"
            raise fail(ErrorKind.INVALID_VALUE, function, f"{where}: parameter {pname!r} is not a parameter of "
                       f"{opdef.type_name}, which takes: {known}", _NAME)
        b = self.builder
        ffi = b.api.ffi
        qdt, member, npdt = _PARAM_TYPES[p.dtype]
        bad = fail(ErrorKind.INVALID_VALUE, function, f"{where}: parameter {pname!r} is {_param_text(p)}, not "
                   f"{value!r}", _NAME)
        if p.kind == "scalar":
            s = ffi.new("Qnn_Scalar_t *")
            s.dataType = qdt
            if p.dtype == "bool":
                if type(value) not in (bool, np.bool_):
                    raise bad
                setattr(s, member, int(bool(value)))
            elif p.dtype == "float32":
                if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
                    raise bad
                setattr(s, member, float(value))
            else:
                if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                    raise bad
                info = np.iinfo(npdt)
                if not info.min <= int(value) <= info.max:
                    raise bad
                setattr(s, member, int(value))
            b._keep.append(s)
            return (pname, _SCALAR, s, repr(value))
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError):
            raise bad from None
        if arr.dtype.kind not in "iu" or (arr.size and (arr.min() < 0 or arr.max() > np.iinfo(npdt).max)):
            raise bad
        shape = tuple(len(ins[0].dims) if d == "rank" else d for d in p.shape)
        if arr.shape != shape:
            raise fail(ErrorKind.INVALID_VALUE, function, f"{where}: parameter {pname!r} must have shape "
                       f"{list(shape)} ({_param_text(p)}), not {list(arr.shape)}", _NAME)
        tname = f"{node}.{pname}"  # (the static tensor the parameter is passed as)
        if tname in self.tensors:
            raise fail(ErrorKind.INVALID_VALUE, function, f"{where}: parameter {pname!r} is passed as a static "
                       f"tensor named {tname!r}, the name of {self.tensors[tname].role} {tname!r}: rename one",
                       _NAME)
        data = np.ascontiguousarray(arr, npdt)
        t = ffi.new("Qnn_Tensor_t *")
        t.version = 1
        v = t.v1
        v.name = b._cstr(tname)
        v.type = _STATIC
        v.dataType = qdt
        _set_quantization(v.quantizeParams, None)
        d = ffi.new("uint32_t[]", list(shape) or [1])
        buf = ffi.new("uint8_t[]", max(data.nbytes, 1))
        ffi.memmove(buf, ffi.from_buffer(data), data.nbytes)
        v.rank = len(shape)
        v.dimensions = d
        v.clientBuf.data = buf
        v.clientBuf.dataSize = data.nbytes
        b._keep += [t, d, buf]
        return (pname, _TENSOR, t, repr(arr.tolist()))

    def _op_config(self, name: str, opdef: OpDef, ins: list[GraphTensor], outs: list[GraphTensor],
                   qparams: list[tuple[Any, ...]]) -> Any:
        b = self.builder
        ffi = b.api.ffi
        tin = ffi.new("Qnn_Tensor_t[]", [t.value for t in ins])
        tout = ffi.new("Qnn_Tensor_t[]", [t.value for t in outs])
        ps = ffi.new("Qnn_Param_t[]", max(len(qparams), 1))
        for i, (pname, kind, value, _) in enumerate(qparams):
            ps[i].paramType = kind
            ps[i].name = b._cstr(pname)
            if kind == _SCALAR:
                ps[i].scalarParam = value[0]
            else:
                ps[i].tensorParam = value[0]
        op = ffi.new("Qnn_OpConfig_t *")
        op.version = 1
        op.v1.name = b._cstr(name)
        op.v1.packageName = b._cstr(PACKAGE)
        op.v1.typeName = b._cstr(opdef.type_name)
        op.v1.numOfParams = len(qparams)
        op.v1.params = ps if qparams else ffi.NULL
        op.v1.numOfInputs = len(ins)
        op.v1.inputTensors = tin
        op.v1.numOfOutputs = len(outs)
        op.v1.outputTensors = tout
        b._keep += [tin, tout, ps, op]
        return op

    def _refusal(self, where: str, opdef: OpDef, ins: list[GraphTensor], outs: list[GraphTensor],
                 qparams: list[tuple[Any, ...]], code: int, said: list[str]) -> Error:
        """The library refused the node: name the parameter to blame where the library's log names one (HTP logs
        ``Param[i] has incorrect Value v``) or where leaving one optional parameter out makes the node valid,
        else describe the tensors."""
        api = self.builder.api
        backend = self.builder.device._backend_owner.handle
        said = list(dict.fromkeys(line for line in said if line.strip("<EW> ")))  # (HTP says each line twice)
        blame = ""
        named = [int(m.group(1)) for line in said for m in [_PARAM_INDEX.search(line)] if m]
        if named and named[0] < len(qparams):
            pname, _, _, text = qparams[named[0]]
            blame = f"parameter {pname!r} = {text} is not accepted ({_param_text(opdef.param(pname))}); "
        for i, (pname, _, _, text) in enumerate(qparams):
            p = opdef.param(pname)
            if blame or p is None or p.required:
                continue
            rest = qparams[:i] + qparams[i + 1:]
            trial = self._op_config("probe", opdef, ins, outs, rest)
            if _validate(api, backend, trial[0])[0] == 0:
                blame = f"parameter {pname!r} = {text} is not accepted ({_param_text(p)}); "
                break
        if not blame:
            tensors = ", ".join(f"{t.name}: {_type_text(t)}" for t in ins) + " -> " + \
                ", ".join(f"{t.name}: {_type_text(t)}" for t in outs)
            params = ", ".join(f"{p[0]}={p[3]}" for p in qparams)
            blame = f"its tensors ({tensors}){f' or parameters ({params})' if params else ''} are not accepted; "
        library = api.error(code, "QnnBackend_validateOpConfig")
        log = f"; the library logged: {' | '.join(said)}" if said else ""
        return fail(ErrorKind.INVALID_VALUE, "Graph.node", f"{where} of graph {self.name!r}: {blame}"
                    f"QnnBackend_validateOpConfig refused it ({library}){log}", _NAME, code=code)

    def _entry(self) -> tuple[tuple[TensorInfo, ...], tuple[TensorInfo, ...], Any, Any]:
        """The graph as QnnModule keeps a context binary's: its tensors' descriptions, and the Qnn_Tensor_t
        arrays of its inputs and outputs."""
        ffi = self.builder.api.ffi

        def info(t: GraphTensor, is_input: bool) -> TensorInfo:
            qdt = int(t.value.v1.dataType)
            return TensorInfo(name=t.name, id=int(t.value.v1.id), qnn_dtype=qdt, dtype=t.dtype, dims=t.dims,
                              nbytes=(math.prod(t.dims) * _bits(qdt) + 7) // 8, quantization=t.quantization,
                              is_input=is_input)
        ins = ffi.new("Qnn_Tensor_t[]", [t.value for t in self.inputs] or 1)
        outs = ffi.new("Qnn_Tensor_t[]", [t.value for t in self.outputs])
        self.builder._keep += [ins, outs]
        return (tuple(info(t, True) for t in self.inputs), tuple(info(t, False) for t in self.outputs), ins, outs)


# ---------------------------------------------------------------------------------------------------- helpers


class _Said(logging.Handler):
    """The library's warnings and errors while one call runs (its log handle reaches logging)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage().strip())


def _validate(api: Any, backend: Any, op: Any) -> tuple[int, list[str]]:
    said = _Said()
    qnn_log.LOGGER.addHandler(said)
    try:
        code = int(api.raw.QnnBackend_validateOpConfig(backend, op))
    finally:
        qnn_log.LOGGER.removeHandler(said)
    return code, said.lines


def _check_name(name: Any, what: str, function: str) -> None:
    if not isinstance(name, str) or not name or "\0" in name:
        raise fail(ErrorKind.INVALID_VALUE, function, f"a {what} name must be a non-empty str without NUL, not "
                   f"{name!r}", _NAME)


def _check_dims(dims: Any, name: str, function: str) -> tuple[int, ...]:
    try:
        out = tuple(dims)
    except TypeError:
        out = None
    if not out or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and 1 <= d < 2**32
                          for d in out):
        raise fail(ErrorKind.INVALID_VALUE, function, f"tensor {name!r}: dims must be a non-empty sequence of "
                   f"ints >= 1, not {dims!r}", _NAME)
    return tuple(int(d) for d in out)


def _qnn_dtype(dtype: Any, quantization: Any, name: str, function: str) -> int:
    if not isinstance(dtype, DType):
        raise fail(ErrorKind.INVALID_VALUE, function, f"tensor {name!r}: dtype must be an ironaccelerator.DType, "
                   f"not {dtype!r}", _NAME)
    if quantization is None:
        qdt = _PLAIN.get(dtype)
        if qdt is None:
            raise fail(ErrorKind.INVALID_VALUE, function, f"tensor {name!r}: QNN has no {dtype.info.name} type; "
                       f"it has: {', '.join(d.info.name for d in _PLAIN)}", _NAME)
        return qdt
    qdt = _FIXED.get(dtype)
    if qdt is None:
        raise fail(ErrorKind.INVALID_VALUE, function, f"tensor {name!r}: a quantized tensor stores integers "
                   f"({', '.join(d.info.name for d in _FIXED)}), not {dtype.info.name}", _NAME)
    ok = isinstance(quantization, tuple) and len(quantization) == 2
    if ok:
        scale, offset = quantization
        ok = (isinstance(scale, (int, float)) and not isinstance(scale, bool) and math.isfinite(scale)
              and scale > 0 and isinstance(offset, int) and not isinstance(offset, bool)
              and -2**31 <= offset < 2**31)
    if not ok:
        raise fail(ErrorKind.INVALID_VALUE, function, f"tensor {name!r}: quantization must be (scale > 0, int "
                   f"offset), real = (q + offset) * scale; not {quantization!r}", _NAME)
    return qdt


def _set_quantization(qp: Any, quantization: tuple[float, int] | None) -> None:
    if quantization is None:
        qp.encodingDefinition = _UNDEFINED
        qp.quantizationEncoding = _UNDEFINED
    else:
        qp.encodingDefinition = _DEFINED
        qp.quantizationEncoding = _SCALE_OFFSET
        qp.scaleOffsetEncoding.scale = float(quantization[0])
        qp.scaleOffsetEncoding.offset = int(quantization[1])


def _param_text(p: ParamDef | None) -> str:
    if p is None:
        return ""
    if p.kind == "scalar":
        return f"a {p.dtype} scalar"
    return f"a {p.dtype} tensor of shape [{', '.join(str(d) for d in p.shape)}]"


def _type_text(t: GraphTensor) -> str:
    q = f" q{t.quantization}" if t.quantization else ""
    return f"{t.dtype.info.name}{list(t.dims)}{q}"
