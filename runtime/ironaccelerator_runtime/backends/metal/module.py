"""Metal modules (``MTLLibrary`` from Metal Shading Language source) and their kernels (compute pipelines), with
the kernels' argument slots read from the MSL source (:func:`kernel_signature`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ironaccelerator._core import ErrorKind
from ironaccelerator_runtime.errors import fail
from ironaccelerator_runtime.kernel_args import Param, arg_error, value_bytes, where
from ironaccelerator_runtime.traits import Kernel, KernelAttributes, Module

from .device import MetalDevice
from .tables import _MAX_SET_BYTES, _NAME


# ------------------------------------------------------------------ kernel signatures (from the MSL source)

# the by-value scalar types of Metal Shading Language and their numpy types
_MSL_SCALARS = {
    "bool": "bool", "char": "int8", "uchar": "uint8", "int8_t": "int8", "uint8_t": "uint8", "short": "int16",
    "ushort": "uint16", "int16_t": "int16", "uint16_t": "uint16", "half": "float16", "int": "int32",
    "uint": "uint32", "int32_t": "int32", "uint32_t": "uint32", "float": "float32", "long": "int64",
    "ulong": "uint64", "int64_t": "int64", "uint64_t": "uint64", "size_t": "uint64",
}
_BUFFER_ATTR = re.compile(r"\[\[\s*buffer\s*\(\s*(\d+)\s*\)\s*\]\]")
# What this runtime can load (Metal Shading Language source): specs/metal/backend.yaml's module_formats are chosen
# from these (the generator reads this literal)
MODULE_FORMATS: tuple[str, ...] = ("source",)


@dataclass(frozen=True)
class ArgSlot:
    """One ``[[buffer(index)]]`` parameter of a kernel: a buffer (``device T *``/``constant T *``) or a value
    (``constant T &`` or ``T``) of numpy type ``dtype`` (None: a type this reader does not know; bytes only)."""

    index: int
    buffer: bool
    dtype: str | None
    text: str


def kernel_signature(source: str, name: str) -> tuple[ArgSlot, ...] | None:
    """The ``[[buffer(i)]]`` parameters of ``kernel void name(...)`` in Metal Shading Language source, in parameter
    order; None when the source has no such kernel (or its parameter list is not balanced)."""
    for m in re.finditer(r"(?:\[\[\s*kernel\s*\]\]|\bkernel)\s+void\s+" + re.escape(name) + r"\s*\(", source):
        depth, i = 1, m.end()
        while i < len(source) and depth:
            depth += {"(": 1, ")": -1}.get(source[i], 0)
            i += 1
        if depth:
            return None
        params, part, level = [], "", 0
        for ch in source[m.end():i - 1]:
            if ch in "([<":
                level += 1
            elif ch in ")]>":
                level -= 1
            if ch == "," and level == 0:
                params.append(part)
                part = ""
            else:
                part += ch
        params.append(part)
        slots = []
        for p in params:
            a = _BUFFER_ATTR.search(p)
            if a is None:
                continue
            decl = p[:a.start()]
            buffer = "*" in decl
            words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", decl.replace("&", " "))
            types = [w for w in words[:-1] if w not in ("device", "constant", "const", "volatile", "thread")]
            dtype = _MSL_SCALARS.get(types[-1]) if types and not buffer else None
            slots.append(ArgSlot(index=int(a.group(1)), buffer=buffer, dtype=dtype, text=" ".join(p.split())))
        return tuple(slots)
    return None


class MetalModule(Module):
    """An ``MTLLibrary`` and the source it was made from (for the kernels' signatures)."""

    def __init__(self, device: MetalDevice, library: Any, source: str) -> None:
        self.device = device
        self.library = library
        self.source = source

    def kernel(self, name: str) -> MetalKernel:
        dev = self.device
        dev._check_open("Module.kernel")
        if not isinstance(name, str):
            raise TypeError(f"Module.kernel: name must be str, not {type(name).__name__}")
        a = dev.api
        from ironaccelerator_runtime.objc import NSErrorError

        n = a.nsstring(name)
        try:
            fn = self.library.newFunctionWithName_(n)
        finally:
            n.close()
        if fn is None:
            raise fail(ErrorKind.INVALID_VALUE, "Module.kernel", f"the Metal library has no function {name!r}", _NAME)
        try:
            pipeline = dev.handle.newComputePipelineStateWithFunction_error_(fn)
        except NSErrorError as e:
            raise fail(e.kind, "Module.kernel",
                       f"Module.kernel({name!r}): newComputePipelineStateWithFunction:error: failed: "
                       f"{e.localized_description}", _NAME, code=e.code) from None
        finally:
            fn.close()
        pipeline = a.cast(pipeline, a.M.MTLComputePipelineState)
        sig = kernel_signature(self.source, name)
        return MetalKernel(self, name, pipeline, sig)


class MetalKernel(Kernel):
    """A compute pipeline state: ``max_threads`` (maxTotalThreadsPerThreadgroup), ``execution_width``
    (threadExecutionWidth), ``slots`` (the ``[[buffer(i)]]`` parameters of its signature; None: unknown, then
    arguments are taken in order, allocations as buffers and values as bytes)."""

    def __init__(self, module: MetalModule, name: str, pipeline: Any, slots: tuple[ArgSlot, ...] | None) -> None:
        self.module = module
        self.device = module.device
        self.name = name
        self.pipeline = pipeline
        self._pid = pipeline.handle
        self.max_threads = int(pipeline.maxTotalThreadsPerThreadgroup())
        self.execution_width = int(pipeline.threadExecutionWidth())
        self.slots = slots
        self.num_args = len(slots) if slots is not None else None
        # the value parameters' types for the kernel-argument policy (kernel_args); None for buffers
        self._params = None if slots is None else tuple(None if s.buffer else _param(s) for s in slots)

    @property
    def attributes(self) -> KernelAttributes:
        # The pipeline's ``maxTotalThreadsPerThreadgroup`` and ``threadExecutionWidth`` (the SIMD width); Metal
        # reports no registers, and ``staticThreadgroupMemoryLength`` is not bound.
        return KernelAttributes(max_threads_per_block=self.max_threads, preferred_multiple=self.execution_width)


def _param(slot: ArgSlot) -> Param:
    """A value slot as a kernel_args.Param: kind and size from its MSL scalar type (None: a type not known)."""
    if slot.dtype is None:
        return Param(None, None, slot.text)
    import numpy as np

    dt = np.dtype(slot.dtype)
    return Param("b" if dt.kind == "b" else dt.kind, dt.itemsize, slot.text)


def _value(x: Any, slot: ArgSlot | None, param: Param | None, i: int, kernel: str, what: str) -> bytes:
    """The bytes of a by-value argument (the kernel-argument policy, kernel_args.value_bytes), at most the 4 KiB
    ``setBytes:length:atIndex:`` takes."""
    data = value_bytes(x, param, i, kernel, _NAME, what)
    if len(data) > _MAX_SET_BYTES:
        raise arg_error(where(i, kernel), f"a value of {len(data)} bytes (setBytes takes 1..{_MAX_SET_BYTES}): "
                        "pass a buffer", _NAME, what)
    return data
