"""The QNN ops the graph builder knows (package ``qti.aisw``), as data: each op's inputs and its parameters, with
their names and types as Qualcomm's public op documentation (the "QNN Operation Definitions" page of the QNN SDK
reference) states them.  Written for this project from that documentation; nothing here is copied from a header.

The builder (:mod:`.graph`) checks a node against its op's row (input count, each parameter's name, kind, type
and shape) before it asks the library (``QnnBackend_validateOpConfig``), so a misspelt or mistyped parameter is
named by this table; what only the backend knows (an unsupported value or shape) is the library's answer.
"""

from __future__ import annotations

from dataclasses import dataclass

PACKAGE = "qti.aisw"  # the op package of QNN's built-in ops


@dataclass(frozen=True, slots=True, kw_only=True)
class ParamDef:
    """One parameter of an op.  ``kind``: ``"scalar"`` (a ``Qnn_Scalar_t``) or ``"tensor"`` (a static
    ``Qnn_Tensor_t``).  ``dtype``: the QNN type the parameter is passed as: ``"bool"`` (BOOL_8), ``"uint32"``
    (UINT_32), ``"int32"`` (INT_32) or ``"float32"`` (FLOAT_32).  ``shape`` (tensors): the dims, each an int or
    ``"rank"`` (the rank of the node's first input)."""

    name: str  # ex) transpose_in1
    kind: str  # ex) scalar
    dtype: str  # ex) bool
    shape: tuple[int | str, ...] = ()  # ex) (2, 2) for Conv2d's pad_amount
    required: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class OpDef:
    """One op of package ``qti.aisw``: its type name, how many inputs it takes (``inputs``: the required ones,
    ``optional_inputs``: the optional ones after them, a bias say), its one output and its parameters."""

    type_name: str  # ex) MatMul
    inputs: tuple[str, ...]  # ex) ("in[0]", "in[1]")
    optional_inputs: tuple[str, ...] = ()  # ex) ("bias",)
    params: tuple[ParamDef, ...] = ()

    def param(self, name: str) -> ParamDef | None:
        for p in self.params:
            if p.name == name:
                return p
        return None


def _scalar(name: str, dtype: str, required: bool = False) -> ParamDef:
    return ParamDef(name=name, kind="scalar", dtype=dtype, required=required)


def _tensor(name: str, shape: tuple[int | str, ...], required: bool = False) -> ParamDef:
    return ParamDef(name=name, kind="tensor", dtype="uint32", shape=shape, required=required)


OPS: dict[str, OpDef] = {op.type_name: op for op in (
    OpDef(type_name="ElementWiseAdd", inputs=("in[0]", "in[1]")),
    OpDef(type_name="ElementWiseMultiply", inputs=("in[0]", "in[1]")),
    # in[0] [..., M, K], in[1] [..., K, N] (each transposed first where its flag says so), bias [N]
    OpDef(type_name="MatMul", inputs=("in[0]", "in[1]"), optional_inputs=("bias",),
          params=(_scalar("transpose_in0", "bool"), _scalar("transpose_in1", "bool"))),
    # NHWC activation, filter [height, width, in channels / group, out channels], bias [out channels]
    OpDef(type_name="Conv2d", inputs=("in[0]", "filter"), optional_inputs=("bias",),
          params=(_tensor("stride", (2,), required=True), _tensor("pad_amount", (2, 2), required=True),
                  _tensor("dilation", (2,)), _scalar("group", "uint32"))),
    # in[0] [..., K] (flattened to [M, K]), weights [N, K], bias [N]
    OpDef(type_name="FullyConnected", inputs=("in[0]", "weights"), optional_inputs=("bias",),
          params=(_scalar("keep_dims", "bool"),)),
    OpDef(type_name="Relu", inputs=("in[0]",)),
    OpDef(type_name="Softmax", inputs=("in[0]",), params=(_scalar("axis", "uint32"), _scalar("beta", "float32"))),
    OpDef(type_name="Reshape", inputs=("in[0]",)),  # the output tensor's dims are the new shape
    OpDef(type_name="Transpose", inputs=("in[0]",), params=(_tensor("perm", ("rank",), required=True),)),
)}
