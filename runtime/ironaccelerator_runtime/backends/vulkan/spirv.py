"""A small SPIR-V reflector (our own, written from the SPIR-V specification's instruction layouts): what the
Vulkan backend needs of a compute shader to build its pipeline and take a launch's arguments.

It reads the word stream (header magic ``0x07230203``, either byte order) and collects, for the module:

* the GLCompute entry points (``OpEntryPoint``) and each one's local size: ``OpExecutionMode LocalSize`` (literal),
  ``OpExecutionModeId LocalSizeId`` (constant ids) or the ``BuiltIn WorkgroupSize`` constant (which overrides both),
  and, per dimension, the ``SpecId`` of the specialization constant that sets it where there is one (a block that
  differs from the shader's local size can then be specialised; a literal size cannot change);
* the storage buffers: variables of storage class ``StorageBuffer``, or ``Uniform`` over a ``BufferBlock`` struct,
  with their ``DescriptorSet``/``Binding`` decorations and names;
* the push-constant block's members, in declaration order, with their ``Offset`` and scalar type (int / uint /
  float of 32 or 64 bits; anything else is kept as ``kind="other"`` and refused by the kernel that would take it).

Malformed input raises ``Error(INVALID_VALUE)`` (as a module image the backend cannot load, on every backend).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from ironaccelerator._core import ErrorKind
from ironaccelerator_runtime.errors import Error, fail

__all__ = ["MAGIC", "Buffer", "EntryPoint", "PushMember", "Reflection", "is_spirv", "reflect"]

MAGIC = 0x07230203
_MAGIC_LE = MAGIC.to_bytes(4, "little")
_MAGIC_BE = MAGIC.to_bytes(4, "big")

# opcodes
_OP_NAME, _OP_MEMBER_NAME = 5, 6
_OP_ENTRY_POINT, _OP_EXECUTION_MODE, _OP_EXECUTION_MODE_ID = 15, 16, 331
_OP_TYPE_BOOL, _OP_TYPE_INT, _OP_TYPE_FLOAT = 20, 21, 22
_OP_TYPE_ARRAY, _OP_TYPE_RUNTIME_ARRAY, _OP_TYPE_STRUCT, _OP_TYPE_POINTER = 28, 29, 30, 32
_OP_CONSTANT, _OP_CONSTANT_COMPOSITE = 43, 44
_OP_SPEC_CONSTANT, _OP_SPEC_CONSTANT_COMPOSITE = 50, 51
_OP_VARIABLE, _OP_DECORATE, _OP_MEMBER_DECORATE = 59, 71, 72
# enumerants
_GL_COMPUTE = 5
_LOCAL_SIZE, _LOCAL_SIZE_ID = 17, 38
_SPEC_ID, _BLOCK, _BUFFER_BLOCK, _BUILT_IN, _NON_WRITABLE = 1, 2, 3, 11, 24
_BINDING, _DESCRIPTOR_SET, _OFFSET = 33, 34, 35
_WORKGROUP_SIZE = 25
_UNIFORM, _PUSH_CONSTANT, _STORAGE_BUFFER = 2, 9, 12


@dataclass(frozen=True)
class Buffer:
    """A storage buffer the shader reads or writes: its descriptor set, binding and name ("" when stripped)."""

    set: int
    binding: int
    name: str
    readonly: bool = False


@dataclass(frozen=True)
class PushMember:
    """A push-constant block member: name, byte offset, ``kind`` (``"int"``, ``"uint"``, ``"float"`` or
    ``"other"``) and ``size`` in bytes (4 or 8 for scalars; 0 for ``"other"``)."""

    name: str
    offset: int
    kind: str
    size: int


@dataclass(frozen=True)
class EntryPoint:
    """A GLCompute entry point: its name, local size, and per dimension the SpecId that sets it (None: fixed)."""

    name: str
    local_size: tuple[int, int, int]
    spec_ids: tuple[int | None, int | None, int | None]

    @property
    def specializable(self) -> bool:
        """Whether every dimension of the local size is a specialization constant."""
        return all(s is not None for s in self.spec_ids)


@dataclass(frozen=True)
class Reflection:
    """What :func:`reflect` found: entry points by name, storage buffers (by set then binding) and the
    push-constant members in declaration order, with the block's size in bytes."""

    entry_points: dict[str, EntryPoint]
    buffers: tuple[Buffer, ...]
    push: tuple[PushMember, ...]
    push_size: int = 0
    words: int = 0
    spec_ids: frozenset[int] = field(default_factory=frozenset)


def is_spirv(data: bytes) -> bool:
    """Whether ``data`` starts with the SPIR-V magic number (either byte order)."""
    return data[:4] in (_MAGIC_LE, _MAGIC_BE)


def _bad(why: str) -> Error:
    return fail(ErrorKind.INVALID_VALUE, "Device.load_module", f"not a valid SPIR-V module: {why}", "VULKAN")


def _string(words: list[int] | tuple[int, ...], start: int) -> tuple[str, int]:
    """A literal string at ``words[start:]`` (UTF-8, NUL-terminated, padded to a word) and the index after it."""
    out = bytearray()
    i = start
    while i < len(words):
        w = words[i]
        i += 1
        chunk = w.to_bytes(4, "little")
        nul = chunk.find(b"\0")
        if nul >= 0:
            out += chunk[:nul]
            return out.decode("utf-8", "replace"), i
        out += chunk
    raise _bad("a literal string runs past its instruction")


def reflect(data: bytes) -> Reflection:
    """Reflect a SPIR-V module.

    Args:
        data: the module's bytes (a whole number of 32-bit words, either byte order).

    Returns:
        The :class:`Reflection`.

    Raises:
        Error: ``ErrorKind.INVALID_VALUE`` for bytes that are not a well-formed SPIR-V module (no magic number, a
            length that is not a whole number of words, an instruction that runs past the end, no GLCompute entry
            point).
    """
    if len(data) < 20:
        raise _bad(f"{len(data)} bytes is shorter than the 5-word header")
    if len(data) % 4:
        raise _bad(f"{len(data)} bytes is not a whole number of 32-bit words")
    if data[:4] == _MAGIC_LE:
        order = "little"
    elif data[:4] == _MAGIC_BE:
        order = "big"
    else:
        raise _bad(f"the magic number is 0x{int.from_bytes(data[:4], 'little'):08x}, not 0x{MAGIC:08x}")
    import array

    arr = array.array("I", data)
    if arr.itemsize != 4:  # (never on the platforms we run: array "I" is 32-bit)
        raise _bad("this Python has no 32-bit array type")
    if (order == "little") != (sys.byteorder == "little"):
        arr.byteswap()
    words = arr.tolist()
    names: dict[int, str] = {}
    member_names: dict[tuple[int, int], str] = {}
    decorations: dict[int, dict[int, list[int]]] = {}
    member_offsets: dict[tuple[int, int], int] = {}
    entries: list[tuple[int, str]] = []
    local_size: dict[int, tuple[int, int, int]] = {}
    local_size_ids: dict[int, tuple[int, int, int]] = {}
    scalars: dict[int, tuple[str, int]] = {}
    structs: dict[int, list[int]] = {}
    pointers: dict[int, tuple[int, int]] = {}
    constants: dict[int, int] = {}
    composites: dict[int, list[int]] = {}
    variables: list[tuple[int, int, int]] = []  # (pointer type, id, storage class)
    i, n = 5, len(words)
    while i < n:
        w = words[i]
        count, op = w >> 16, w & 0xFFFF
        if count == 0 or i + count > n:
            raise _bad(f"the instruction at word {i} (opcode {op}, {count} words) runs past the end ({n} words)")
        ops = words[i + 1:i + count]
        i += count
        if op == _OP_NAME and ops:
            names[ops[0]] = _string(ops, 1)[0]
        elif op == _OP_MEMBER_NAME and len(ops) >= 2:
            member_names[(ops[0], ops[1])] = _string(ops, 2)[0]
        elif op == _OP_ENTRY_POINT and len(ops) >= 3:
            if ops[0] == _GL_COMPUTE:
                entries.append((ops[1], _string(ops, 2)[0]))
        elif op == _OP_EXECUTION_MODE and len(ops) >= 5 and ops[1] == _LOCAL_SIZE:
            local_size[ops[0]] = (ops[2], ops[3], ops[4])
        elif op == _OP_EXECUTION_MODE_ID and len(ops) >= 5 and ops[1] == _LOCAL_SIZE_ID:
            local_size_ids[ops[0]] = (ops[2], ops[3], ops[4])
        elif op == _OP_DECORATE and len(ops) >= 2:
            decorations.setdefault(ops[0], {})[ops[1]] = ops[2:]
        elif op == _OP_MEMBER_DECORATE and len(ops) >= 4 and ops[2] == _OFFSET:
            member_offsets[(ops[0], ops[1])] = ops[3]
        elif op == _OP_TYPE_INT and len(ops) >= 3:
            scalars[ops[0]] = ("int" if ops[2] else "uint", ops[1] // 8)
        elif op == _OP_TYPE_FLOAT and len(ops) >= 2:
            scalars[ops[0]] = ("float", ops[1] // 8)
        elif op == _OP_TYPE_STRUCT and ops:
            structs[ops[0]] = ops[1:]
        elif op == _OP_TYPE_POINTER and len(ops) >= 3:
            pointers[ops[0]] = (ops[1], ops[2])
        elif op in (_OP_CONSTANT, _OP_SPEC_CONSTANT) and len(ops) >= 3:
            constants[ops[1]] = ops[2]
        elif op in (_OP_CONSTANT_COMPOSITE, _OP_SPEC_CONSTANT_COMPOSITE) and len(ops) >= 2:
            composites[ops[1]] = ops[2:]
        elif op == _OP_VARIABLE and len(ops) >= 3:
            variables.append((ops[0], ops[1], ops[2]))
    if not entries:
        raise _bad("it has no GLCompute entry point (OpEntryPoint GLCompute): a compute shader is needed")

    def spec_id(cid: int) -> int | None:
        d = decorations.get(cid, {}).get(_SPEC_ID)
        return d[0] if d else None

    builtin_size = next((cid for cid, d in decorations.items()
                         if d.get(_BUILT_IN) == [_WORKGROUP_SIZE] and cid in composites), None)
    points: dict[str, EntryPoint] = {}
    for eid, name in entries:
        ids: tuple[int, ...] | None = None
        if builtin_size is not None and len(composites[builtin_size]) == 3:
            ids = tuple(composites[builtin_size])
        elif eid in local_size_ids:
            ids = local_size_ids[eid]
        if ids is not None:
            size = tuple(constants.get(c, 1) for c in ids)
            specs = tuple(spec_id(c) for c in ids)
        else:
            size = local_size.get(eid, (1, 1, 1))
            specs = (None, None, None)
        points[name] = EntryPoint(name, (size[0], size[1], size[2]), (specs[0], specs[1], specs[2]))

    buffers: list[Buffer] = []
    push: list[PushMember] = []
    push_size = 0
    for ptype, vid, storage in variables:
        pointee = pointers.get(ptype, (storage, 0))[1]
        deco = decorations.get(vid, {})
        if storage == _STORAGE_BUFFER or (storage == _UNIFORM and _BUFFER_BLOCK in decorations.get(pointee, {})):
            s, b = deco.get(_DESCRIPTOR_SET, [0]), deco.get(_BINDING)
            if b is None:
                raise _bad(f"storage buffer {names.get(vid, vid)!r} has no Binding decoration")
            readonly = _NON_WRITABLE in deco  # (per-member NonWritable is not tracked: such buffers count as written)
            buffers.append(Buffer(s[0] if s else 0, b[0], names.get(vid) or names.get(pointee, ""), readonly))
        elif storage == _PUSH_CONSTANT:
            members = structs.get(pointee)
            if members is None:
                raise _bad("the push-constant variable is not a struct")
            for m, mtype in enumerate(members):
                kind, msize = scalars.get(mtype, ("other", 0))
                if kind != "other" and msize not in (4, 8):
                    kind, msize = "other", 0
                offset = member_offsets.get((pointee, m), 0)
                push.append(PushMember(member_names.get((pointee, m), f"member{m}"), offset, kind, msize))
                push_size = max(push_size, offset + (msize or 16))
    buffers.sort(key=lambda b: (b.set, b.binding))
    all_specs = frozenset(d[_SPEC_ID][0] for d in decorations.values() if d.get(_SPEC_ID))
    return Reflection(points, tuple(buffers), tuple(push), push_size, n, all_specs)
