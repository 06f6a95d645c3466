"""The CUDA and ROCm/HIP backends: the core surface over a GPU vendor's generated bindings.

One hand-written backend for every GPU vendor whose API has the CUDA driver's shape.  What differs between
vendors is data, rendered from the vendor's ``specs/<vendor>/backend.yaml`` (by
``templates/backends/gpu.py.j2``) into its ``ironaccelerator.backends.<vendor>._backend``: a :class:`GpuTables`
(role -> vendor function, constants, C types, capability tables, what the compiled paths take) and small
subclasses of the classes here named after the vendor (``CudaDevice``, ``HipStream``, ...), which say which of
them play which part.  A role the vendor lacks is ``None`` in the tables, and the code here branches on that
(``context_retain``: primary contexts, else ``set_device``; ``program_create``: source compilation;
``param_info``: argument checks; ``device_properties``: the architecture's name).  Importing this module loads no
vendor library; constructing a backend does, and raises ``Error(LIBRARY_NOT_FOUND)`` (listing the files tried)
when it cannot.

Streams are non-blocking; copies are asynchronous (host buffers are kept alive until an event recorded after
them, the stream or the device is seen complete: :class:`InFlight`); events record timing.  Kernel arguments
are packed by :func:`pack_args` into a ``void *[]`` of pointers to the values, and checked against the
kernel's parameter info where the vendor has it (``param_info``).  Hot paths call the raw (unchecked)
functions, bound once per object (``Device._alloc``, ``Stream._launch``, ...).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import itertools
import os
import re
import struct
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterator, Mapping, Sequence

from ironaccelerator._core import BackendKind, CapabilityFlags, ComputeTier, DType, ErrorKind, MemoryKind, Vendor
from ironaccelerator_runtime import dlpack, kernel_cache, tracing
from ironaccelerator_runtime.errors import Error
from ironaccelerator_runtime.traits import _SIZE_MAX  # (alloc_unchecked's one range test)
from ironaccelerator_runtime.kernel_args import LocalMemory, local_error, value_bytes, where
from ironaccelerator_runtime.traits import (
    Allocation, AllocationSlice, Backend, Capability, CompileOptions, CopyRegion, Device, DeviceDescriptor, DeviceId,
    DeviceLimits, Event, Graph,
    InFlight, IpcHandle, Kernel, KernelAttributes, KernelLaunch, LaunchDims, MemoryPool, Module, PoolStats, Result, Scalar,
    Stream, check_size, check_span, compile_options, compiler_log, device_span, host_span, fill_pattern, host_view, not_a_launch,
    unsupported,
)

_UINT_MAX = 2**32 - 1  # the launch function's grid, block and shared memory parameters are unsigned int

# What this module reads from a GPU backend spec (specs/<vendor>/backend.yaml), by section: role -> when it is
# needed ("": always; "f": when the function role f is bound; "!f": when f is null, the vendor has none).  The
# generator (generator/surface.py) reads this literal, refuses a spec that lacks a needed role or declares one
# that is never read, and renders each needed role's value into the vendor's GpuTables.
SPEC_ROLES: dict[str, dict[str, str]] = {
    "functions": {
        "init": "", "driver_version": "", "runtime_version": "", "device_count": "", "device_get": "",
        "device_name": "", "device_total_mem": "", "device_attribute": "", "device_properties": "",
        "device_synchronize": "", "alloc": "", "free": "", "host_alloc": "", "host_free": "", "managed_alloc": "",
        "memcpy_htod": "", "memcpy_dtoh": "", "memcpy_dtod": "", "memset_d8": "", "memset_d16": "", "memset_d32": "",
        "memcpy_2d": "", "memcpy_3d": "", "prefetch": "", "prefetch_location": "",
        "stream_create": "", "stream_destroy": "", "stream_synchronize": "", "stream_query": "",
        "stream_wait_event": "", "event_create": "", "event_destroy": "", "event_record": "",
        "event_synchronize": "", "event_query": "", "event_elapsed": "",
        "module_load": "", "module_unload": "", "module_function": "", "launch": "", "param_info": "",
        "context_retain": "", "context_release": "context_retain", "context_set_current": "context_retain",
        "set_device": "!context_retain",
        "program_create": "", "program_compile": "program_create", "program_destroy": "program_create",
        "program_log_size": "program_create", "program_log": "program_create",
        "program_code_size": "program_create", "program_code": "program_create",
        "program_binary_size": "program_create", "program_binary": "program_create",
        "program_add_name": "program_create", "program_lowered_name": "program_create",
        "compiler_version": "program_create",
        "func_attribute": "", "occupancy": "",
        "capture_begin": "", "capture_end": "", "graph_instantiate": "", "graph_launch": "", "graph_destroy": "",
        "graph_exec_destroy": "",
        "pool_create": "", "pool_destroy": "pool_create", "pool_alloc": "pool_create", "pool_free": "pool_create",
        "pool_trim": "pool_create", "pool_get_attribute": "pool_create", "pool_set_attribute": "pool_create",
        "launch_ex": "", "ipc_get": "", "ipc_open": "ipc_get", "ipc_close": "ipc_get",
    },
    "constants": {
        "stream_flags": "", "event_flags": "", "host_alloc_flags": "", "managed_flags": "",
        "status_not_ready": "", "status_no_device": "", "status_invalid_value": "param_info",
        "status_unsupported_ptx": "program_create", "compile_success": "program_create",
        "attr_compute_units": "", "attr_max_block_x": "", "attr_max_block_y": "", "attr_max_block_z": "",
        "attr_max_grid_x": "", "attr_max_grid_y": "", "attr_max_grid_z": "", "attr_max_threads_per_block": "",
        "attr_max_shared_mem": "", "attr_integrated": "", "attr_warp_size": "",
        "func_max_threads": "", "func_shared": "", "func_const": "", "func_local": "", "func_regs": "",
        "func_max_dynamic_shared": "", "capture_mode": "",
        "attr_compute_major": "!device_properties", "attr_compute_minor": "!device_properties",
        "attr_memory_pools_supported": "pool_create",
        "pool_alloc_type": "pool_create", "pool_location_device": "pool_create",
        "pool_attr_release_threshold": "pool_create", "pool_attr_reserved": "pool_create",
        "pool_attr_used": "pool_create",
        "memory_type_host": "memcpy_2d", "memory_type_device": "memcpy_2d",
        "location_host": "prefetch_location", "location_device": "prefetch_location", "cpu_device_id": "prefetch",
        "attr_cooperative_launch": "launch_ex", "attr_cluster_launch": "launch_ex",
        "launch_attr_cooperative": "launch_ex", "launch_attr_cluster": "launch_ex",
        "status_cooperative_too_large": "launch_ex", "ipc_open_flags": "ipc_get",
    },
    "types": {
        "deviceptr": "", "device": "", "stream": "", "event": "", "module": "", "function": "",
        "context": "context_retain", "properties": "device_properties", "program": "program_create",
        "mempool": "pool_create", "mempool_props": "pool_create", "graph": "", "graph_exec": "",
        "memcpy_2d_params": "memcpy_2d", "memcpy_3d_params": "memcpy_3d", "mem_location": "prefetch_location",
        "launch_config": "launch_ex", "launch_attribute": "launch_ex", "ipc_handle": "ipc_get",
    },
}

_MAX_PARAMS = 4096
_NOT_FOUND = 500  # CUDA_ERROR_NOT_FOUND, hipErrorNotFound: what cuModuleGetFunction / hipModuleGetFunction answer to an
# unknown kernel name
# .key: the context / device current on this thread.  One for every GPU backend: the keys of a vendor's devices
# differ from every other vendor's (("context", address, retain) / ("device", index)), so a thread that uses two
# vendors makes each current again when it switches, and never trusts the other vendor's state.
_TLS = threading.local()
_RETAINS = itertools.count()  # numbers the devices' context retains (in the keys of _TLS)
_POOL_LOCK = threading.Lock()  # Device.memory_pool: one pool per device
_API_LOCK = threading.Lock()  # GpuBackend.vendor_api: one GpuApi per backend class


# ------------------------------------------------------------------ the vendor's tables (pure: no device, no library)


def _name_tokens(name: str) -> set[str]:
    return {t for t in re.split(r"[\s\-_/()]+", name) if t}


def _cc(key: str) -> tuple[int, int]:
    major, _, minor = key.partition(".")
    return int(major), int(minor or 0)


@dataclass(frozen=True, kw_only=True)
class GpuTables:
    """A GPU vendor's spec data (``specs/<vendor>/backend.yaml``), as the generated ``_backend`` module renders it.

    ``functions``: role -> (library, vendor function), None where the vendor has none; ``constants``: role -> value
    (a list in the spec is OR'd); ``types``: role -> C type; each holds exactly the roles of :data:`SPEC_ROLES` that
    the vendor needs.  ``match`` says how the capability tables are keyed: ``compute_capability`` (flag and tier keys
    are ``X.Y``; a device has the flags of every key <= its compute capability) or ``arch_prefix`` (keys are
    prefixes of the architecture name, read from the properties struct's ``arch_field``; the longest matching
    tier key wins).  ``launch_max_args`` / ``launch_max_bytes``: what the compiled launch (``_fast._launch``) can
    pack, 0 where the spec names no ``kernel_launch``; ``compiled_pool``: the library's ``pool_memory`` is this
    backend's pool allocator and free."""

    kind: BackendKind  # ex) BackendKind.CUDA
    package: str  # ex) ironaccelerator.backends.cuda
    functions: dict[str, tuple[str, str] | None]
    constants: dict[str, int | None]
    types: dict[str, str]
    module_formats: tuple[str, ...]  # what load_module accepts, ex) ("ptx", "elf", "fatbin", "source")
    interop: tuple[str, ...]  # ex) ("dlpack", "cuda_array_interface")
    match: str
    arch_field: str | None = None  # ex) gcnArchName
    flags: dict[str, CapabilityFlags]
    tiers: dict[str, ComputeTier]
    vendors: tuple[tuple[str, Vendor], ...]
    launch_max_args: int = 0
    launch_max_bytes: int = 0
    compiled_pool: bool = False

    @property
    def name(self) -> str:
        """The backend's name in errors, ex. ``CUDA``, ``ROCM``."""
        return self.kind.name

    def const(self, role: str) -> int:
        value = self.constants[role]
        if value is None:
            raise KeyError(f"the {self.name} spec has no constant for {role!r}")
        return value

    def capability(self, arch: str, name: str = "", integrated: bool = False) -> Capability:
        """The device's architecture (compute capability ``"X.Y"``, or a name such as
        ``"gfx90a:sramecc+:xnack-"``), name and integrated attribute -> Capability, by the tables."""
        flags = self.flags.get("always", CapabilityFlags.NONE)
        if integrated:
            flags |= self.flags.get("integrated", CapabilityFlags.NONE)
        tiers = self.tiers
        tokens = _name_tokens(name)
        named = [t for k, t in tiers.items() if k.startswith("name ") and k[5:] in tokens]
        if self.match == "compute_capability":
            cc = _cc(arch)
            for key, f in self.flags.items():
                if key[:1].isdigit() and _cc(key) <= cc:
                    flags |= f
            found = tiers.get(f"{cc[0]}.{cc[1]}")
            version = f"sm_{cc[0]}{cc[1]}"
        else:
            base = arch.split(":")[0].strip().lower()
            for key, f in self.flags.items():
                if key not in ("always", "integrated") and base.startswith(key):
                    flags |= f
            prefixes = sorted((k for k in tiers if k not in ("default", "integrated") and not k.startswith("name ")
                               and base.startswith(k)), key=len, reverse=True)
            found = tiers[prefixes[0]] if prefixes else None
            version = arch or "unknown"
        if integrated and "integrated" in tiers:
            tier = tiers["integrated"]
        elif named:
            tier = named[0]
        elif found is not None:
            tier = found
        else:
            tier = tiers.get("default", ComputeTier.DISCRETE)
        return Capability(flags=flags, tier=tier, vendor_version=version)

    def vendor(self, name: str) -> Vendor:
        """The device's vendor, from its name (else the tables' ``default``)."""
        for needle, vendor in self.vendors:
            if needle != "default" and needle.lower() in name.lower():
                return vendor
        return dict(self.vendors).get("default", Vendor.OTHER)


_PTX = re.compile(rb"^\s*\.(version\s+\d|target\s|(visible\s+|weak\s+)?entry\s)", re.M)
_FATBIN_MAGIC = b"\x50\xed\x55\xba"  # 0xBA55ED50, little-endian
_BUNDLE_MAGICS = (b"__CLANG_OFFLOAD_BUNDLE__", b"CCOB")


def classify_image(data: str | bytes, backend: str = "") -> str:
    """What ``load_module`` was given: ``ptx``, ``elf``, ``fatbin``, ``offload_bundle`` or ``source``
    (``backend``: the backend named in the error for an empty image)."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    if not raw.strip(b"\0 \t\r\n"):
        raise Error(ErrorKind.INVALID_VALUE, "load_module needs source or a binary, got nothing", backend=backend,
                    function="Device.load_module")
    if raw.startswith(b"\x7fELF"):
        return "elf"
    if raw.startswith(_FATBIN_MAGIC):
        return "fatbin"
    if raw.startswith(_BUNDLE_MAGICS):
        return "offload_bundle"
    return "ptx" if _PTX.search(raw) else "source"


def _image_bytes(v: Any, backend: str, function: str = "Device.load_module") -> bytes:
    """What ``load_module`` was given, as bytes: ``str`` (UTF-8) or a bytes-like object; ``TypeError`` otherwise
    (an int is not an image: ``bytes(n)`` would make n zero bytes)."""
    if isinstance(v, str):
        try:
            return v.encode()
        except UnicodeEncodeError as e:
            raise Error(ErrorKind.INVALID_VALUE, f"{function}: the source is not valid UTF-8 text ({e})",
                        backend=backend, function=function) from None
    if isinstance(v, (bytes, bytearray, memoryview)):
        if type(v) is memoryview and "O" in v.format:
            raise TypeError(f"{function}: a buffer of Python objects is not a code image")
        return bytes(v)
    raise TypeError(f"{function}: source_or_binary must be str or bytes, not {type(v).__name__}")


def _c_string(v: Any, what: str, function: str, backend: str) -> bytes:
    """A ``str`` parameter passed to the vendor as a NUL-terminated UTF-8 string: ``TypeError`` unless a str,
    ``INVALID_VALUE`` if it holds a NUL (C would see only the part before it) or cannot be encoded."""
    if not isinstance(v, str):
        raise TypeError(f"{function}: {what} must be a str, not {type(v).__name__} ({v!r})")
    if "\0" in v:
        raise Error(ErrorKind.INVALID_VALUE, f"{function}: {what} {v!r} contains a NUL character", backend=backend,
                    function=function)
    try:
        return v.encode()
    except UnicodeEncodeError:
        raise Error(ErrorKind.INVALID_VALUE, f"{function}: {what} {v!r} is not valid UTF-8", backend=backend,
                    function=function) from None


# ----------------------------------------------------------------------------- kernel arguments

_SCALAR_FORMATS = {DType.F64: "d", DType.F32: "f", DType.F16: "e", DType.I8: "b", DType.I16: "h", DType.I32: "i",
                   DType.I64: "q", DType.U8: "B", DType.U16: "H", DType.U32: "I", DType.U64: "Q", DType.BOOL: "?"}


def _bf16_bits(value: float) -> int:
    """float -> bfloat16 bits, rounding to nearest even (NaN stays NaN)."""
    (bits,) = struct.unpack("<I", struct.pack("<f", float(value)))
    if bits & 0x7F800000 == 0x7F800000 and bits & 0x007FFFFF:
        return 0x7FC0
    return int(((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF)


def _scalar_bytes(s: Scalar, backend: str) -> tuple[bytes, int]:
    dt, v = s.dtype, s.value
    if dt is DType.C64 or dt is DType.C128:
        c = complex(v)
        fmt = "<ff" if dt is DType.C64 else "<dd"
        return struct.pack(fmt, c.real, c.imag), dt.size
    if dt is DType.BF16:
        if isinstance(v, complex):
            raise Error(ErrorKind.INVALID_VALUE, f"Scalar({v!r}, BF16): not a real number", backend=backend,
                        function="Stream.launch")
        return struct.pack("<H", _bf16_bits(v)), 2
    if dt is DType.F8E4M3 or dt is DType.F8E5M2:
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 256:
            raise Error(ErrorKind.INVALID_VALUE, f"Scalar({v!r}, {dt.name}): pass an fp8 value as its raw bits "
                        "(an int 0..255)", backend=backend, function="Stream.launch")
        return bytes([v]), 1
    return struct.pack("<" + _SCALAR_FORMATS[dt], v), dt.size


class PackedArgs:
    """Kernel arguments packed for the vendor's ``launch``: ``params`` is the ``void *[]`` (NULL when there
    are none) whose i-th pointer points at argument i's bytes in ``storage``."""

    __slots__ = ("params", "storage", "offsets", "sizes", "keep")

    def __init__(self, params: Any, storage: Any, offsets: tuple[int, ...], sizes: tuple[int, ...],
                 keep: tuple[Any, ...]) -> None:
        self.params = params
        self.storage = storage
        self.offsets = offsets
        self.sizes = sizes
        self.keep = keep  # the allocations passed: alive at least as long as the launch's arguments


def _arg_bytes(a: Any, i: int, backend: str) -> tuple[bytes, int]:
    """(bytes, alignment) of argument ``i``.  A freed allocation is INVALID_HANDLE in both modes (a flag test:
    its address may already belong to other memory)."""
    if isinstance(a, Allocation):
        if a._freed:
            a._check_live("Stream.launch")
        try:
            ptr = a.ptr  # type: ignore[attr-defined]
        except AttributeError:
            raise Error(ErrorKind.INVALID_VALUE, f"kernel argument {i}: {a!r} is not {backend} memory",
                        backend=backend, function="Stream.launch") from None
        return struct.pack("<Q", ptr), 8
    if isinstance(a, Scalar):
        data, align = _scalar_bytes(a, backend)
        return data, min(align, 16)
    dtype = getattr(a, "dtype", None)
    if dtype is not None and getattr(a, "ndim", None) == 0:  # a numpy scalar (or 0-d array)
        if getattr(dtype, "hasobject", False):  # its bytes would be Python object pointers
            raise Error(ErrorKind.INVALID_VALUE, f"kernel argument {i}: a numpy value of dtype {dtype} holds Python "
                        "objects, not bytes a kernel can take", backend=backend, function="Stream.launch")
        data = a.tobytes()
        return data, int(getattr(dtype, "alignment", len(data)) or 1)
    if isinstance(a, (bytes, bytearray, memoryview)):
        if type(a) is memoryview and "O" in a.format:
            raise Error(ErrorKind.INVALID_VALUE, f"kernel argument {i}: a buffer of Python objects is not bytes a "
                        "kernel can take", backend=backend, function="Stream.launch")
        data = bytes(a)
        align = 8 if len(data) % 8 == 0 else 4 if len(data) % 4 == 0 else 2 if len(data) % 2 == 0 else 1
        return data, align
    if type(a) is LocalMemory:  # (dynamic shared memory is LaunchDims.shared_mem here)
        raise local_error(backend, "Stream.launch", where(i, None))
    # None, a Python number (only parameter sizes are known here), anything else: the policy's refusal
    value_bytes(a, None, i, None, backend, "Stream.launch")
    raise Error(ErrorKind.INVALID_VALUE, f"kernel argument {i} ({type(a).__name__} {a!r:.60}): pass an Allocation, "
                "a numpy scalar (np.int32(n)) or Scalar(value, DType)", backend=backend, function="Stream.launch")


def _count_error(backend: str, expected: int, given: int, name: str | None = None,
                 function: str = "Stream.launch") -> Error:
    kernel = f"kernel {name!r}" if name is not None else "the kernel"
    return Error(ErrorKind.INVALID_VALUE, f"{kernel} takes {expected} argument{'s' if expected != 1 else ''}, "
                 f"{given} given", backend=backend, function=function)


def pack_args(args: Sequence[Any], ffi: Any, expected: Sequence[int] | None = None, *,
              check: bool = True, backend: str = "") -> PackedArgs:
    """Pack kernel arguments: an Allocation as its device pointer (8 bytes), a numpy scalar as its bytes,
    ``Scalar(value, DType)`` as that type; each value at its natural alignment in one buffer.

    ``expected``: the kernel's parameter sizes (from the vendor's ``param_info``); with ``check``, a count or
    size mismatch is ``INVALID_VALUE``; a freed allocation is ``INVALID_HANDLE`` always.  ``backend``: the backend
    named in errors.  Pure: needs ``ffi`` (any cffi FFI) but no device and no vendor library.
    """
    if check and expected is not None and len(args) != len(expected):
        raise _count_error(backend, len(expected), len(args))
    chunks = []
    offsets = []
    sizes = []
    end = 0
    for i, a in enumerate(args):
        data, align = _arg_bytes(a, i, backend)
        if check and expected is not None and len(data) != expected[i]:
            raise Error(ErrorKind.INVALID_VALUE, f"kernel argument {i}: {len(data)} bytes given, the kernel's "
                        f"parameter is {expected[i]} bytes", backend=backend, function="Stream.launch")
        pad = -end % align
        if pad:
            chunks.append(b"\0" * pad)
            end += pad
        offsets.append(end)
        sizes.append(len(data))
        chunks.append(data)
        end += len(data)
    if not offsets:
        return PackedArgs(ffi.NULL, None, (), (), ())
    storage = ffi.new("char[]", b"".join(chunks))  # malloc'd: aligned for any type
    params = ffi.new("void *[]", [storage + off for off in offsets])
    keep = tuple(a for a in args if isinstance(a, Allocation))
    return PackedArgs(params, storage, tuple(offsets), tuple(sizes), keep)


# The launch fast path.  pack_args above is the reference; the Stream packs through an _ArgPlan instead:
# the layout pack_args would produce for one tuple of argument types (per kernel, built once), written by
# one struct.pack_into into a buffer that holds the void *[] and the values (the pointers fixed when the
# buffer is made).  Arguments whose bytes do not follow from their type (bytes, bytearray, memoryview,
# 0-d arrays, structured numpy scalars) and every failing check take pack_args, so errors are its own.
# how argument i becomes the value packed: its .ptr, itself (a numpy scalar struct packs as is), its
# .value (a Scalar of a plain type), its .tobytes(), or _scalar_bytes (BF16, FP8, complex)
_ALLOC, _ITSELF, _VALUE, _TOBYTES, _SCALAR_BYTES = 0, 1, 2, 3, 4
_NUMPY_KINDS = frozenset("biufcmM")  # numpy scalar kinds whose size follows from the type
_STRUCT_CODES = {("b", 1): "?", ("i", 1): "b", ("i", 2): "h", ("i", 4): "i", ("i", 8): "q", ("u", 1): "B",
                 ("u", 2): "H", ("u", 4): "I", ("u", 8): "Q", ("f", 2): "e", ("f", 4): "f", ("f", 8): "d"}
_MAX_PLANS = 64  # per kernel; past it, the cache is cleared
# what the compiled launch (_fast._launch) packs: an Allocation's .ptr (0), a numpy scalar's buffer (1);
# at most GpuTables.launch_max_args arguments and launch_max_bytes bytes (its buffer is on the C stack)
_LAYOUT_KINDS = {_ALLOC: 0, _ITSELF: 1, _TOBYTES: 1}
_EMPTY_LAYOUT = struct.pack("<I", 0)  # no arguments


class _ArgPlan:
    """One layout of a kernel's arguments: ``fmt`` packs the values (after the ``void *[]``) at ``offsets``;
    ``kinds[i]`` says how argument ``i`` becomes a value; ``allocs`` the indices of Allocations;
    ``checked``: the count and sizes match the kernel's parameter info (or it has none); ``layout``: the
    same layout for the compiled launch (``_fast._launch``, see trampolines.c), or None where that cannot
    pack these arguments (Scalars, too many or too large, a count or size the kernel does not take);
    ``backend``: the backend named in errors."""

    __slots__ = ("kinds", "fmt", "offsets", "size", "data_offset", "allocs", "checked", "layout", "backend")

    def __init__(self, kinds: tuple[int, ...], fmt: str, offsets: tuple[int, ...], sizes: tuple[int, ...],
                 size: int, allocs: tuple[int, ...], checked: bool, tables: GpuTables) -> None:
        self.kinds = kinds
        self.fmt = fmt
        self.offsets = offsets
        self.size = size
        self.data_offset = -(-8 * len(kinds) // 16) * 16  # the values start 16-aligned after the pointers
        self.allocs = allocs
        self.checked = checked
        self.layout: bytes | None = None
        self.backend = tables.name
        if checked and size <= tables.launch_max_bytes and len(kinds) <= tables.launch_max_args and all(
                k in _LAYOUT_KINDS for k in kinds):
            self.layout = struct.pack(f"<I{len(kinds) * 'BxHI'}", size, *[
                v for k, n, off in zip(kinds, sizes, offsets) for v in (_LAYOUT_KINDS[k], n, off)])

    def values(self, args: Sequence[Any]) -> list[Any]:
        return [a.ptr if k == _ALLOC else a if k == _ITSELF else a.value if k == _VALUE else
                a.tobytes() if k == _TOBYTES else _scalar_bytes(a, self.backend)[0] for a, k in zip(args, self.kinds)]

    def buffer(self, ffi: Any) -> tuple[Any, Any, Any]:
        """A fresh (storage, writable view, params): the ``void *[]`` written, the values not yet."""
        storage = ffi.new("char[]", self.data_offset + max(self.size, 1))  # malloc'd: aligned for any type
        view = ffi.buffer(storage)
        base = int(ffi.cast("uintptr_t", storage)) + self.data_offset
        struct.pack_into(f"<{len(self.kinds)}Q", view, 0, *[base + off for off in self.offsets])
        return storage, view, ffi.cast("void **", storage)


def _arg_plan(args: Sequence[Any], expected: Sequence[int] | None,
              tables: GpuTables) -> tuple[_ArgPlan | None, bool]:
    """(the plan for ``args``' types, whether to cache it): None when their bytes do not follow from their
    types; None, not cached, when these values cannot be packed (pack_args will say why; other values of the
    same types may be fine)."""
    kinds: list[int] = []
    offsets: list[int] = []
    sizes: list[int] = []
    allocs: list[int] = []
    fmt = "<"
    end = 0
    checked = expected is None or len(expected) == len(args)
    for i, a in enumerate(args):
        try:
            data, align = _arg_bytes(a, i, tables.name)
        except Error:
            return None, False
        if isinstance(a, Allocation):
            kind, code = _ALLOC, "Q"
            allocs.append(i)
        elif type(a) is Scalar:
            code = _SCALAR_FORMATS.get(a.dtype, "")
            kind = _VALUE if code else _SCALAR_BYTES
        else:
            dtype = getattr(a, "dtype", None)
            if dtype is None or type(a) is not getattr(dtype, "type", None) or getattr(dtype, "kind", "") not in \
                    _NUMPY_KINDS:
                return None, True  # not a numpy scalar (a 0-d array is mutable; bytes vary in size)
            code = _STRUCT_CODES.get((dtype.kind, len(data)), "")
            kind = _ITSELF if code else _TOBYTES
        pad = -end % align
        if pad:
            fmt += f"{pad}x"
            end += pad
        offsets.append(end)
        sizes.append(len(data))
        fmt += code or f"{len(data)}s"
        end += len(data)
        kinds.append(kind)
        if expected is not None and checked and len(data) != expected[i]:
            checked = False
    return _ArgPlan(tuple(kinds), fmt, tuple(offsets), tuple(sizes), end, tuple(allocs), checked,
                    tables), True


# ----------------------------------------------------------------------------- the bound functions


class _Deferred:
    """ABI mode: the raw function, resolved on first call.  A missing library or symbol answers the
    binding's sentinel status (as API mode's trampolines do), which the error factory reports."""

    __slots__ = ("module", "binding", "name", "fn")

    def __init__(self, module: Any, binding: Any, name: str) -> None:
        self.module = module
        self.binding = binding
        self.name = name
        self.fn: Any = None

    def __call__(self, *args: Any) -> Any:
        fn = self.fn
        if fn is None:
            if not self.binding.has(self.name):
                return self.binding.sentinel
            fn = self.fn = getattr(self.module.unchecked, self.name)
        return fn(*args)


class GpuApi:
    """Each function role of a vendor's :class:`GpuTables` bound to its raw (unchecked) vendor function (None where
    the vendor has none), plus the error factory.  Binding loads no library."""

    # the function roles (SPEC_ROLES["functions"]); tests/test_gpu_backends.py checks that the two lists agree
    init: Any
    driver_version: Any
    runtime_version: Any
    device_count: Any
    device_get: Any
    device_name: Any
    device_total_mem: Any
    device_attribute: Any
    device_properties: Any
    device_synchronize: Any
    alloc: Any
    free: Any
    host_alloc: Any
    host_free: Any
    managed_alloc: Any
    memcpy_htod: Any
    memcpy_dtoh: Any
    memcpy_dtod: Any
    memset_d8: Any
    memset_d16: Any
    memset_d32: Any
    memcpy_2d: Any
    memcpy_3d: Any
    prefetch: Any
    prefetch_location: Any
    stream_create: Any
    stream_destroy: Any
    stream_synchronize: Any
    stream_query: Any
    stream_wait_event: Any
    event_create: Any
    event_destroy: Any
    event_record: Any
    event_synchronize: Any
    event_query: Any
    event_elapsed: Any
    module_load: Any
    module_unload: Any
    module_function: Any
    launch: Any
    param_info: Any
    context_retain: Any
    context_release: Any
    context_set_current: Any
    set_device: Any
    program_create: Any
    program_compile: Any
    program_destroy: Any
    program_log_size: Any
    program_log: Any
    program_code_size: Any
    program_code: Any
    program_binary_size: Any
    program_binary: Any
    program_add_name: Any
    program_lowered_name: Any
    compiler_version: Any
    func_attribute: Any
    occupancy: Any
    capture_begin: Any
    capture_end: Any
    graph_instantiate: Any
    graph_launch: Any
    graph_destroy: Any
    graph_exec_destroy: Any
    pool_create: Any
    pool_destroy: Any
    pool_alloc: Any
    pool_free: Any
    pool_trim: Any
    pool_get_attribute: Any
    pool_set_attribute: Any
    launch_ex: Any
    ipc_get: Any
    ipc_open: Any
    ipc_close: Any

    def __init__(self, tables: GpuTables) -> None:
        self.tables = tables
        self.name = tables.name  # the backend named in errors
        self.modules: dict[str, Any] = {}  # library (ex. driver) -> its generated module
        self.where: dict[str, tuple[Any, int]] = {}  # role -> (Binding, function index)
        for role in SPEC_ROLES["functions"]:
            setattr(self, role, None)  # (a role this vendor's spec need not declare, ex. set_device on CUDA)
        for role, entry in tables.functions.items():
            if entry is None:
                continue
            lib, name = entry
            module = self.modules.get(lib)
            if module is None:
                module = self.modules[lib] = importlib.import_module(f"{tables.package}.{lib}")
            binding = importlib.import_module(f"{tables.package}.{lib}._binding").BINDING
            self.where[role] = (binding, binding.index[name])
            setattr(self, role, getattr(module.unchecked, name) if binding.mode == "api"
                    else _Deferred(module, binding, name))
        self.ffi: Any = self.of("device_count").ffi
        self.status_not_ready = tables.const("status_not_ready")
        # the compiled launch (_fast._launch in trampolines.c; API mode): packs and calls the launch function
        # (not while IRONACCEL_TRACE wraps the raw functions: the C paths would call the driver unlogged)
        fast = getattr(self.of("launch"), "_fast", None) if tables.launch_max_args and not tracing.ENABLED else None
        self.launch_packed: Callable[..., int | None] | None = getattr(fast, "_launch", None)
        # the compiled pool allocation (_fast._pool_alloc and the _PoolMemory type in trampolines.c; API mode):
        # pool_alloc and pool_free called in C, the memory a C object: (the allocator, the type) or None
        pool_fast: Any = getattr(self.of("pool_alloc"), "_fast", None) if tables.compiled_pool and \
            not tracing.ENABLED else None
        setup = getattr(pool_fast, "_pool_setup", None)
        self.pool_memory: tuple[Callable[..., Any], type] | None = None if setup is None else (
            pool_fast._pool_alloc, setup(_TLS, Error))
        self.compiler_ffi: Any = None if self.program_create is None else self.of("program_create").ffi
        self.pool_types: dict[type, type] = {}  # a pool allocation class -> its compiled twin

    def of(self, role: str) -> Any:
        """The generated module of the library that exports ``role``'s function."""
        entry = self.tables.functions[role]
        assert entry is not None, role
        return self.modules[entry[0]]

    def error(self, code: int, role: str, detail: str = "") -> Error:
        binding, index = self.where[role]
        err: Error = binding.error(code, index, detail)
        return err

    def check(self, code: int, role: str) -> None:
        if code:
            raise self.error(code, role)

    def require(self, role: str) -> None:
        """Raise the loader's error (LIBRARY_NOT_FOUND / SYMBOL_NOT_FOUND) if ``role``'s function cannot be called."""
        binding, index = self.where[role]
        if not binding.has(self.tables.functions[role][1]):  # type: ignore[index]
            raise binding.load_error(index) or Error(ErrorKind.LIBRARY_NOT_FOUND, f"the {self.name} library "
                                                     "could not be loaded", backend=self.name,
                                                     function=self.tables.functions[role][1])  # type: ignore[index]


_FFI = importlib.import_module("cffi").FFI()  # casts any cffi pointer to its address


def _address(handle: Any) -> int:
    return handle if isinstance(handle, int) else int(_FFI.cast("uintptr_t", handle))


def _make_current(api: GpuApi, key: tuple[Any, ...], target: Any) -> None:
    """Make a device current on the calling thread, once per thread (the key is cached thread-locally): its
    primary context where the vendor has contexts (``context_retain``), else the device (``set_device``)."""
    if getattr(_TLS, "key", None) != key:
        if api.context_retain is not None:
            api.check(api.context_set_current(target), "context_set_current")
        else:
            api.check(api.set_device(target), "set_device")
        _TLS.key = key


# ----------------------------------------------------------------------------- runtime compilation


def compiler_version(api: GpuApi) -> tuple[int, int]:
    """The runtime compiler's (major, minor) version (the vendor's ``compiler_version``)."""
    if api.program_create is None:
        raise _no_compiler(api.tables, "compiler_version")
    api.require("compiler_version")
    major, minor = api.compiler_ffi.new("int *"), api.compiler_ffi.new("int *")
    api.check(api.compiler_version(major, minor), "compiler_version")
    return int(major[0]), int(minor[0])


def _no_compiler(tables: GpuTables, function: str) -> Error:
    return Error(ErrorKind.UNSUPPORTED, f"{tables.name} has no runtime compiler bound: compile offline and pass "
                 f"load_module a code object ({', '.join(tables.module_formats)})", backend=tables.name,
                 function=function)


def _program_text(api: GpuApi, prog: Any, size_role: str, text_role: str) -> bytes:
    ffi = api.compiler_ffi
    n = ffi.new("size_t *")
    api.check(getattr(api, size_role)(prog, n), size_role)
    buf = ffi.new("char[]", max(int(n[0]), 1))
    api.check(getattr(api, text_role)(prog, buf), text_role)
    return bytes(ffi.buffer(buf, int(n[0])))


def compile_source(api: GpuApi, source: str | bytes, arch: str, options: Sequence[str] = (), *,
                   binary: bool = False, name: str = "ironaccelerator.cu") -> bytes:
    """Compile device source with the vendor's runtime compiler (``program_create`` & co.) for ``arch``
    (``--gpu-architecture=<arch>``, ex. ``compute_90``): the code text (PTX), or with ``binary`` (and a real
    architecture, ex. ``sm_90``) the ``program_binary`` image.  A compile error (or an option the compiler
    refuses) raises ``COMPILE_FAILED`` carrying the build log; a vendor without a compiler bound raises
    ``UNSUPPORTED``.  Needs the compiler library only (no driver, no device)."""
    return compile_program(api, source, arch, options, binary=binary, name=name)[0]


def compile_program(api: GpuApi, source: str | bytes, arch: str, options: Sequence[str] = (), *,
                    binary: bool = False, name: str = "ironaccelerator.cu",
                    name_expressions: Sequence[str] = (), build_log: list[str] | None = None) -> tuple[bytes, dict[str, str]]:
    """:func:`compile_source`, plus each of ``name_expressions`` (ex. ``"axpy<float>"``) added before compiling
    (``program_add_name``) and looked up after (``program_lowered_name``): ``(image, {expression: lowered
    name})``.  ``build_log``: a list the compiler's log of a compile that succeeded is appended to (its warnings)."""
    backend = api.name
    if api.program_create is None:
        raise _no_compiler(api.tables, "compile_source")
    src = _image_bytes(source, backend, "compile_source")
    if b"\0" in src.rstrip(b"\0"):
        raise Error(ErrorKind.INVALID_VALUE, "compile_source: the source contains a NUL byte", backend=backend,
                    function="compile_source")
    if isinstance(options, (str, bytes)):
        raise TypeError("compile_source: options must be a sequence of str, not a single "
                        f"{type(options).__name__}")
    if isinstance(name_expressions, (str, bytes)):
        raise TypeError("compile_source: name_expressions must be a sequence of str, not a single "
                        f"{type(name_expressions).__name__}")
    owned = [_c_string(arch, "arch", "compile_source", backend),
             *(_c_string(o, "option", "compile_source", backend) for o in options)]
    exprs = [_c_string(x, "name expression", "compile_source", backend) for x in name_expressions]
    if exprs and api.program_add_name is None:
        raise Error(ErrorKind.UNSUPPORTED, f"compile_source: {backend}'s compiler has no name expressions bound",
                    backend=backend, function="compile_source")
    prog_name = _c_string(name, "name", "compile_source", backend)
    api.require("program_create")
    ffi = api.compiler_ffi
    prog = ffi.new(api.tables.types["program"] + " *")
    api.check(api.program_create(prog, src, prog_name, 0, ffi.NULL, ffi.NULL), "program_create")
    try:
        held = [ffi.new("char[]", x) for x in exprs]  # alive until the program is destroyed
        for x, text in zip(name_expressions, held):
            code = api.program_add_name(prog[0], text)
            if code:
                raise api.error(code, "program_add_name", f"name expression {x!r}")
        # every string the compiler reads is held by a name that lives until the call returns (`strings`, and
        # `option_array` of their pointers): never a char[] made inside another ffi.new, which would be freed
        # at once (the use-after-free of issue 10 item 1)
        strings = [ffi.new("char[]", b"--gpu-architecture=" + owned[0]), *(ffi.new("char[]", o) for o in owned[1:])]
        option_array = ffi.new("char *[]", strings)
        code = api.program_compile(prog[0], len(strings), option_array)
        if code != api.tables.const("compile_success"):
            try:
                log = _program_text(api, prog[0], "program_log_size", "program_log").rstrip(b"\0").decode(
                    "utf-8", "replace")
            except Error as e:
                log = f"(no log: {e})"
            opts = " ".join(o.decode("utf-8", "replace") for o in owned[1:])
            err = api.error(code, "program_compile", f"build log ({name}, {arch}, options: {opts or '-'}):\n{log}")
            err.kind = ErrorKind.COMPILE_FAILED  # a refused option too: the compiler's verdict on this input
            raise err
        if build_log is not None:  # what it said about a compile that succeeded (#warning, -Wall's findings)
            try:
                text = _program_text(api, prog[0], "program_log_size", "program_log").rstrip(b"\0").decode(
                    "utf-8", "replace")
            except Error:
                text = ""
            if text.strip():
                build_log.append(text)
        lowered: dict[str, str] = {}
        for x, text in zip(name_expressions, held):
            out = ffi.new("char **")
            code = api.program_lowered_name(prog[0], text, out)
            if code:
                raise api.error(code, "program_lowered_name", f"name expression {x!r}")
            lowered[x] = ffi.string(out[0]).decode()
        if binary:
            return _program_text(api, prog[0], "program_binary_size", "program_binary"), lowered
        return _program_text(api, prog[0], "program_code_size", "program_code").rstrip(b"\0"), lowered
    finally:
        api.program_destroy(prog)


# ----------------------------------------------------------------------------- the backend


class GpuBackend(Backend):
    """A GPU vendor's backend: every device, in the vendor's order.  A vendor's subclass (generated) sets
    ``tables`` (its spec's :class:`GpuTables`) and ``device_class``; ``kind`` follows from the tables."""

    tables: ClassVar[GpuTables]
    device_class: ClassVar[type[GpuDevice]]
    _API: ClassVar[GpuApi | None] = None  # per subclass: vendor_api()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "tables" in cls.__dict__:
            cls.kind = cls.tables.kind
            cls._API = None

    @classmethod
    def vendor_api(cls) -> GpuApi:
        """The vendor's bound functions, made once (binding loads no library)."""
        api = cls._API
        if api is None:
            with _API_LOCK:
                api = cls._API
                if api is None:
                    api = cls._API = GpuApi(cls.tables)
        return api

    @classmethod
    def _operations_lacking(cls) -> frozenset[str]:
        """The operations the Gpu classes implement that this vendor's spec leaves out, so that they raise
        ``UNSUPPORTED`` here: a null function role, an interop protocol the spec does not list (what
        ``Backend.supports`` subtracts; see :mod:`ironaccelerator_runtime.operations`)."""
        tables = getattr(cls, "tables", None)
        if tables is None:
            return frozenset()
        fn = tables.functions
        out = [op for op, roles in (("Device.import_ipc", ("ipc_open",)), ("Allocation.export_ipc", ("ipc_get",)),
                                    ("Stream.copy_2d", ("memcpy_2d",)), ("Stream.copy_3d", ("memcpy_3d",)),
                                    ("Stream.prefetch", ("prefetch", "prefetch_location")))
               if all(fn.get(r) is None for r in roles)]
        if "cuda_array_interface" not in tables.interop:
            out.append("Device.from_cuda_array_interface")
        return frozenset(out)

    @classmethod
    def compile_source(cls, source: str | bytes, arch: str, options: Sequence[str] = (), *, binary: bool = False,
                       name: str = "ironaccelerator.cu") -> bytes:
        """:func:`compile_source` with this vendor's compiler."""
        return compile_source(cls.vendor_api(), source, arch, options, binary=binary, name=name)

    @classmethod
    def compiler_version(cls) -> tuple[int, int]:
        """:func:`compiler_version` of this vendor's compiler."""
        return compiler_version(cls.vendor_api())

    def __init__(self) -> None:
        api = self.vendor_api()
        api.require("device_count")  # LIBRARY_NOT_FOUND (with the files tried) when the library does not load
        self.api = api
        self._devices: list[tuple[Any, DeviceDescriptor, str]] | None = None
        self._no_device: Error | None = None
        self._lock = threading.RLock()

    def versions(self) -> dict[str, Any]:
        """The driver (and runtime) versions as the vendor encodes them: ``{"driver": 13000, "runtime": ...}``.

        Returns:
            ``{"driver": int}`` plus ``"runtime"`` where the vendor has a separate runtime (HIP); CUDA encodes
            ``1000 * major + 10 * minor``.

        Raises:
            Error: the vendor's error where a version query fails.

        Backends:
            CUDA (``cuDriverGetVersion``), HIP (``hipDriverGetVersion``, ``hipRuntimeGetVersion``).
        """
        out: dict[str, Any] = {"driver": self.driver_version()}
        rt = self.runtime_version()
        if rt is not None:
            out["runtime"] = rt
        return out

    def driver_version(self) -> int:
        """The vendor's ``driver_version``."""
        out = self.api.ffi.new("int *")
        self.api.check(self.api.driver_version(out), "driver_version")
        return int(out[0])

    def runtime_version(self) -> int | None:
        """The vendor's ``runtime_version``; None where it has no separate runtime."""
        if self.api.runtime_version is None:
            return None
        out = self.api.ffi.new("int *")
        self.api.check(self.api.runtime_version(out), "runtime_version")
        return int(out[0])

    def _attr(self, attr: int, dev: Any) -> int:
        out = self.api.ffi.new("int *")
        self.api.check(self.api.device_attribute(out, attr, dev), "device_attribute")
        return int(out[0])

    def _enumerate(self) -> list[tuple[Any, DeviceDescriptor, str]]:
        with self._lock:
            if self._devices is not None:
                return self._devices
            api, ffi = self.api, self.api.ffi
            no_device = self.tables.const("status_no_device")
            if api.init is not None:
                code = api.init(0)
                if code == no_device:
                    self._no_device = api.error(code, "init")
                    self._devices = []
                    return self._devices
                api.check(code, "init")
            n = ffi.new("int *")
            code = api.device_count(n)
            if code == no_device:  # a loaded library with no device: zero devices, not a failure
                self._no_device = api.error(code, "device_count")
                self._devices = []
                return self._devices
            api.check(code, "device_count")
            found = []
            for i in range(int(n[0])):
                h = ffi.new(self.tables.types["device"] + " *")
                api.check(api.device_get(h, i), "device_get")
                found.append((h[0], *self._describe(i, h[0])))
            self._devices = found
            return found

    def _arch(self, index: int, dev: Any) -> str:
        """The device's architecture: the properties struct's ``arch_field`` where the vendor has
        ``device_properties``, else the compute capability ``"X.Y"`` from two attributes."""
        api, ffi, tables = self.api, self.api.ffi, self.tables
        if api.device_properties is None:
            return f"{self._attr(tables.const('attr_compute_major'), dev)}.{self._attr(tables.const('attr_compute_minor'), dev)}"
        properties = tables.types["properties"]
        # oversized: a runtime newer than the headers may write a larger struct
        buf = ffi.new("char[]", max(ffi.sizeof(properties), 1 << 13))
        props = ffi.cast(properties + " *", buf)
        code = api.device_properties(props, index)
        if code:
            return "unknown"  # ex) a runtime that no longer exports this layout: capabilities from the name only
        return str(ffi.string(getattr(props, tables.arch_field or "")).decode("utf-8", "replace"))

    def _describe(self, index: int, dev: Any) -> tuple[DeviceDescriptor, str]:
        api, ffi, tables = self.api, self.api.ffi, self.tables
        c = tables.const
        buf = ffi.new("char[256]")
        api.check(api.device_name(buf, 256, dev), "device_name")
        name = ffi.string(buf).decode("utf-8", "replace")
        total = ffi.new("size_t *")
        api.check(api.device_total_mem(total, dev), "device_total_mem")
        integrated = bool(self._attr(c("attr_integrated"), dev))
        arch = self._arch(index, dev)
        max_grid = (self._attr(c("attr_max_grid_x"), dev), self._attr(c("attr_max_grid_y"), dev),
                    self._attr(c("attr_max_grid_z"), dev))
        max_threads = self._attr(c("attr_max_threads_per_block"), dev)
        limits = DeviceLimits(
            max_block=(self._attr(c("attr_max_block_x"), dev), self._attr(c("attr_max_block_y"), dev),
                       self._attr(c("attr_max_block_z"), dev)),
            max_threads_per_block=max_threads,
            max_grid=max_grid,
            max_shared_mem=self._attr(c("attr_max_shared_mem"), dev),
            # the driver reports no largest single allocation: the device's memory bounds it
            max_alloc=int(total[0]) or None,
            max_work_items=min(max_grid[0] * max_grid[1] * max_grid[2] * max_threads, 2**64 - 1),
        )
        capability = tables.capability(arch, name, integrated)
        if api.launch_ex is not None:  # launch options: advertised where the device says it can (not by arch)
            extra = CapabilityFlags.NONE
            for role, flag in (("attr_cooperative_launch", CapabilityFlags.COOPERATIVE_LAUNCH),
                               ("attr_cluster_launch", CapabilityFlags.THREAD_BLOCK_CLUSTERS)):
                out = ffi.new("int *")
                if api.device_attribute(out, c(role), dev) == 0 and out[0]:  # (an older driver: unknown, so not)
                    extra |= flag
            capability = dataclasses.replace(capability, flags=capability.flags | extra)
        desc = DeviceDescriptor(
            id=DeviceId(self.kind, index), name=name, vendor=tables.vendor(name), backend=self.kind,
            total_memory=int(total[0]), compute_units=self._attr(c("attr_compute_units"), dev),
            capability=capability, limits=limits,
        )
        return desc, arch

    def devices(self) -> list[DeviceDescriptor]:
        return [desc for _, desc, _ in self._enumerate()]

    def open(self, device_id: DeviceId | int = 0) -> GpuDevice:
        index = self._index(device_id)
        devs = self._enumerate()
        backend = self.tables.name
        if not devs:
            why = f": {self._no_device}" if self._no_device is not None else ""
            raise Error(ErrorKind.NO_DEVICE, f"no {backend} device found{why}", backend=backend,
                        function="Backend.open")
        if not 0 <= index < len(devs):
            raise Error(ErrorKind.INVALID_VALUE, f"{backend} device {index} does not exist ({len(devs)} found)",
                        backend=backend, function="Backend.open")
        handle, desc, arch = devs[index]
        return self.device_class(self, index, handle, desc, arch)


# primary contexts (context_retain): released after the garbage collection that drops their last holder
_GC = {"running": False}  # a collection is in progress (gc.callbacks, from the first retain on)
_DEFERRED: list[Callable[[], object]] = []  # context releases due in it: run when it ends


def _gc_phase(phase: str, info: dict[str, int]) -> None:
    _GC["running"] = phase == "start"
    while phase == "stop" and _DEFERRED:
        _DEFERRED.pop()()


def _release_context(api: GpuApi, dev: Any) -> None:
    """Finalizer of a :class:`_ContextRef`.  Inside a garbage collection the release waits for its end: the
    collector clears weak references (this callback) before it calls ``__del__`` (an allocation's free), so
    an allocation collected in the same cycle as the last holder is freed first."""
    if _GC["running"]:
        _DEFERRED.append(lambda: api.context_release(dev))
    else:
        api.context_release(dev)


class _ContextRef:
    """What the objects of a device hold as ``_ctx``.  Where the vendor has primary contexts (``context_retain``):
    one retain of the device's, released (``context_release``) exactly once, when nothing holds this object any
    more: the :class:`GpuDevice` until it is closed, and every stream, event, module, pool and allocation made
    from it (each keeps it as ``_ctx``; the finalizers that destroy streams, events, modules and pools take it as
    an argument, so they run first).  Not released at interpreter exit (objects still alive then may be freed
    after the exit hooks; the process's end tears the context down).  Elsewhere (HIP: the device is selected
    per thread) there is no context to retain, and nothing is released."""

    __slots__ = ("context", "__weakref__")

    def __init__(self, api: GpuApi, dev: Any) -> None:
        self.context: Any = None
        if api.context_retain is None:
            return
        if _gc_phase not in gc.callbacks:
            gc.callbacks.append(_gc_phase)
        out = api.ffi.new(api.tables.types["context"] + " *")
        api.check(api.context_retain(out, dev), "context_retain")
        self.context = out[0]
        weakref.finalize(self, _release_context, api, dev).atexit = False


def _destroy(fn: Callable[[Any], int], handle: Any, ctx: _ContextRef | None) -> int:
    """Finalizer of a stream, event or module: ``ctx`` (its device's context) is held until this has run."""
    return int(fn(handle))


class GpuDevice(Device):
    """A GPU.  A vendor's subclass (generated) names the classes of what it makes: ``allocation_class``,
    ``stream_class``, ``module_class`` and ``pool_class``."""

    backend: GpuBackend
    allocation_class: ClassVar[type[GpuAllocation]]
    stream_class: ClassVar[type[GpuStream]]
    module_class: ClassVar[type[GpuModule]]
    pool_class: ClassVar[type[GpuStreamOrderedPool]]
    _ctx: _ContextRef | None = None  # the device's own context reference (see _ContextRef); None once closed

    def __init__(self, backend: GpuBackend, index: int, handle: Any, descriptor: DeviceDescriptor,
                 arch: str) -> None:
        self.backend = backend
        self.api = api = backend.api
        self.index = index
        self.handle = handle
        self.descriptor = descriptor
        self.arch = arch  # ex) "9.0" (compute capability) or "gfx90a:sramecc+:xnack-"
        self._ctx = ctx = _ContextRef(api, handle)
        if api.context_retain is not None:
            self.context = ctx.context
            self._target: Any = self.context
            # per retain: once a released primary context is retained again (the same handle, made anew), each
            # thread makes it current again instead of trusting what it cached for the old one
            self._key: tuple[Any, ...] = ("context", _address(self.context), next(_RETAINS))
        else:  # no contexts: the device is selected per thread
            self._target = index
            self._key = ("device", index)
        self._streams: weakref.WeakSet[GpuStream] = weakref.WeakSet()
        # alloc and free of DEVICE memory, inline (the hot path)
        self._new = api.ffi.new
        self._ptr_t = api.ffi.typeof(api.tables.types["deviceptr"] + " *")
        self._alloc: Callable[..., int] = api.alloc
        self._free: Callable[..., int] = api.free
        self._allocation = self.allocation_class  # (an instance attribute: the alloc path reads it)
        self.activate()

    def activate(self) -> None:
        """Make this device current on the calling thread (every operation does; cached per thread)."""
        if getattr(_TLS, "key", None) != self._key:
            _make_current(self.api, self._key, self._target)

    def _close(self) -> None:
        """Closed (``Device.close``): the streams launch no more (their launch functions refuse, so the launch
        paths pay nothing for the check), and the device gives up its context reference; what was made from
        it keeps its own until it is gone."""
        for s in list(self._streams):
            s._shut()
        self._ctx = None
        pool = self.__dict__.pop("_pool", None)  # (trimmed by close; whoever still holds it keeps the context)
        shut = getattr(pool, "_shut", None)
        if shut is not None:
            shut()

    # memory
    def alloc(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> GpuAllocation:
        if type(nbytes) is not int or nbytes <= 0:
            nbytes = check_size(nbytes, "nbytes", "Device.alloc", self.backend.kind)
        r = self.alloc_unchecked(nbytes, kind)
        if isinstance(r, Error):
            if not isinstance(kind, MemoryKind):
                raise TypeError(f"Device.alloc: kind must be a MemoryKind, not {type(kind).__name__} ({kind!r})")
            raise r
        r._tracked = True  # released on drop (Allocation.__del__ -> _release)
        return r

    def alloc_unchecked(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> Result[GpuAllocation]:
        api, ffi = self.api, self.api.ffi
        if self._closed:
            return self._closed_error("Device.alloc")
        if type(nbytes) is not int or not 0 < nbytes <= _SIZE_MAX or type(kind) is not MemoryKind:
            checked = self._alloc_args_unchecked(nbytes, kind, "Device.alloc_unchecked")
            if isinstance(checked, Error):
                return checked
            nbytes = checked
        try:
            if getattr(_TLS, "key", None) != self._key:
                self.activate()
            if kind is MemoryKind.DEVICE:  # (the hot path: the pointer type and the function kept by __init__)
                role, out = "alloc", self._new(self._ptr_t)
                code = self._alloc(out, nbytes)
            elif kind is MemoryKind.HOST_PINNED or kind is MemoryKind.HOST:
                if api.host_alloc is None:
                    return self._unsupported(kind)
                role, out = "host_alloc", ffi.new("void **")
                code = api.host_alloc(out, nbytes, api.tables.const("host_alloc_flags"))
            elif kind is MemoryKind.UNIFIED:
                if api.managed_alloc is None:
                    return self._unsupported(kind)
                role, out = "managed_alloc", ffi.new(api.tables.types["deviceptr"] + " *")
                code = api.managed_alloc(out, nbytes, api.tables.const("managed_flags"))
            else:
                return Error(ErrorKind.INVALID_VALUE, f"{kind!r} is not a MemoryKind", backend=api.name,
                             function="Device.alloc")
        except Error as e:
            return e.with_traceback(None)  # (a value: its frames would hold their objects)
        except (OverflowError, TypeError) as e:  # ex) a negative size: cffi refuses it before the call
            return Error(ErrorKind.INVALID_VALUE, f"cannot allocate {nbytes!r} bytes: {e}", backend=api.name,
                         function="Device.alloc")
        if code:
            return api.error(code, role, f"{nbytes} bytes of {kind.name} memory requested; the device has "
                             f"{self.descriptor.total_memory} bytes in all")
        return self._allocation(self, out[0], nbytes, kind)

    def _unsupported(self, kind: MemoryKind) -> Error:
        return Error(ErrorKind.UNSUPPORTED, f"{kind.name} memory is not supported by the {self.api.name} backend",
                     backend=self.api.name, function="Device.alloc")

    # interop: stream handles of other libraries, and foreign memory (Device.from_dlpack)
    def _stream_handle(self, stream: Any, what: str) -> int | None:
        """The native stream handle a DLPack ``stream`` argument names (None: the default stream): a Stream of
        this device, an object with ``__cuda_stream__`` (``(version, handle)``), or an int per the protocol
        (CUDA: 1 legacy default, 2 per-thread default, else a handle, 0 refused; HIP: 0 default, else a handle,
        1 and 2 refused).  BufferError for anything else, as a producer answers a bad consumer."""
        if stream is None:
            return None
        if isinstance(stream, GpuStream):
            if stream.device is not self:
                raise BufferError(f"{what}: {stream!r} is not a stream of {self!r}")
            return stream._address
        proto = getattr(stream, "__cuda_stream__", None)
        if proto is not None:
            pair = proto() if callable(proto) else proto
            try:
                _, handle = pair
                return int(handle)
            except (TypeError, ValueError):
                raise BufferError(f"{what}: __cuda_stream__ gave {pair!r}, not (version, handle)") from None
        if type(stream) is not int:
            raise BufferError(f"{what}: stream must be None, an int handle, a Stream or have __cuda_stream__, not "
                              f"{type(stream).__name__}")
        cuda = self.kind is BackendKind.CUDA
        if (cuda and stream == 0) or (not cuda and stream in (1, 2)) or stream < -1:
            raise BufferError(f"{what}: stream={stream} is not allowed for {self.kind.name} by the DLPack protocol")
        return stream

    def _consumer_stream(self, stream: Any, what: str) -> Any:
        if stream is None:
            return None
        handle = self._stream_handle(stream, what)
        return handle

    def _import_kind(self, device: tuple[int, int], what: str) -> MemoryKind:
        cuda = self.kind is BackendKind.CUDA
        kinds = {self.kind.dlpack_device: MemoryKind.DEVICE}
        kinds.update({dlpack.KDL_CUDA_HOST: MemoryKind.HOST_PINNED, dlpack.KDL_CUDA_MANAGED: MemoryKind.UNIFIED}
                     if cuda else {dlpack.KDL_ROCM_HOST: MemoryKind.HOST_PINNED})
        if device[0] == dlpack.KDL_CPU:
            raise Error(ErrorKind.UNSUPPORTED, f"{what}: pageable host memory (kDLCPU) cannot be used by a "
                        f"{self.kind.name} device without registering it, which this backend does not do: copy it "
                        "into an allocation (Stream.copy_from_host)", backend=self.kind.name, function=what)
        kind = kinds.get(device[0])
        if kind is None or device[1] != self.descriptor.id.index:
            raise dlpack.wrong_device(what, self.kind, device, f"{self.descriptor.id} (DLPack device "
                                      f"{(self.kind.dlpack_device, self.descriptor.id.index)})")
        return kind

    def _import_memory(self, imp: Any, kind: MemoryKind) -> GpuAllocation:
        cls = _with_mixin(_ImportedMemory, self.allocation_class)
        ptr_t = self.api.tables.types["deviceptr"]
        handle: Any = imp.address if "*" not in ptr_t else self.api.ffi.cast(ptr_t, imp.address)
        a: Any = cls(self, handle, imp.nbytes, kind)
        a._foreign = imp
        a._tracked = True
        imported: GpuAllocation = a
        return imported

    def from_cuda_array_interface(self, obj: Any, *, stream: Any = None) -> GpuAllocation:
        """Import ``__cuda_array_interface__`` memory (v2/v3) as a DEVICE allocation without a copy, where the
        vendor's ``interop`` lists it (CUDA).

        The producer's ``stream`` (v3) is ordered before ``stream`` (an event recorded there, waited on here) or,
        without one, synchronised.  The memory is trusted to be this device's (the interface does not say which
        device it is on).

        Args:
            obj: an object with ``__cuda_array_interface__`` (CuPy, Numba, torch CUDA tensors).
            stream: this device's consumer stream (a :class:`Stream`, ``__cuda_stream__`` or a handle); None: the
                producer's stream is synchronised.

        Returns:
            A DEVICE allocation over the memory (``.dtype``, ``.shape``); the producer stays alive with it.

        Raises:
            Error: ``ErrorKind.INVALID_VALUE`` for a missing, malformed, masked or non-contiguous interface;
                ``ErrorKind.UNSUPPORTED`` where the vendor's ``interop`` lacks it (HIP); the driver's error where
                ordering the streams fails; ``ErrorKind.INVALID_HANDLE`` after ``close``.

        Backends:
            CUDA; HIP: ``UNSUPPORTED``.
        """
        what = "Device.from_cuda_array_interface"
        self._check_open(what)
        if "cuda_array_interface" not in self.api.tables.interop:
            raise unsupported(self.kind, what)
        imp, producer = dlpack.cuda_array_interface_of(obj, what, self.kind.name)
        try:
            if producer is not None:
                self.activate()
                api = self.api
                native = api.ffi.cast(api.tables.types["stream"], producer)
                consumer = self._stream_handle(stream, what) if stream is not None else None
                if consumer is None:
                    api.check(api.stream_synchronize(native), "stream_synchronize")
                else:
                    out = api.ffi.new(api.tables.types["event"] + " *")
                    api.check(api.event_create(out, api.tables.const("event_flags")), "event_create")
                    try:
                        api.check(api.event_record(out[0], native), "event_record")
                        api.check(api.stream_wait_event(api.ffi.cast(api.tables.types["stream"], consumer), out[0],
                                                        0), "stream_wait_event")
                    finally:
                        api.event_destroy(out[0])
        except BaseException:
            imp.release()
            raise
        return self._adopt(imp, MemoryKind.DEVICE, what)  # type: ignore[return-value]

    def import_ipc(self, handle: IpcHandle) -> GpuAllocation:
        """Open a handle another process exported (``ipc_open``: ``cuIpcOpenMemHandle`` / ``hipIpcOpenMemHandle``,
        lazily enabling peer access) as a DEVICE allocation whose ``free()`` is ``ipc_close`` (see
        :meth:`Device.import_ipc`).

        Args:
            handle: the :class:`IpcHandle` the exporter sent.

        Returns:
            A DEVICE allocation over the exporter's memory; ``.ipc_handle`` is the handle it was opened from.

        Raises:
            TypeError: ``handle`` is not an :class:`IpcHandle`.
            Error: ``ErrorKind.INVALID_VALUE`` for a handle of another backend, of the wrong size, or exported by
                this process; ``ErrorKind.UNSUPPORTED`` where the vendor has no IPC; the driver's error where
                opening fails; ``ErrorKind.INVALID_HANDLE`` after ``close``.

        Backends:
            CUDA, HIP.
        """
        what = "Device.import_ipc"
        if not isinstance(handle, IpcHandle):
            raise TypeError(f"{what}: handle must be an IpcHandle (Allocation.export_ipc()), not {type(handle).__name__}")
        self._check_open(what)
        api, ffi = self.api, self.api.ffi
        if api.ipc_open is None:
            raise unsupported(self.kind, what)
        if handle.backend is not self.kind:
            raise Error(ErrorKind.INVALID_VALUE, f"{what}: {handle!r} is not a {self.kind.name} handle", backend=api.name,
                        function=what)
        ctype = api.tables.types["ipc_handle"]
        size = ffi.sizeof(ctype)
        if not isinstance(handle.data, bytes) or len(handle.data) != size:
            raise Error(ErrorKind.INVALID_VALUE, f"{what}: the handle's data must be the {size} bytes of a {ctype}",
                        backend=api.name, function=what)
        nbytes = check_size(handle.nbytes, "the handle's nbytes", what, self.kind)
        if handle.pid == os.getpid():
            raise Error(ErrorKind.INVALID_VALUE, f"{what}: {handle!r} was exported by this process; {api.name} opens "
                        "an IPC handle only in another process (use the allocation itself)", backend=api.name,
                        function=what)
        self.activate()
        native = ffi.new(ctype + " *")
        ffi.memmove(native, handle.data, size)
        out = ffi.new(api.tables.types["deviceptr"] + " *")
        code = api.ipc_open(out, native[0], api.tables.const("ipc_open_flags"))
        if code:
            raise api.error(code, "ipc_open", repr(handle))
        a: Any = _with_mixin(_IpcMemory, self.allocation_class)(self, out[0], nbytes, MemoryKind.DEVICE)
        a.ipc_handle = handle
        a._tracked = True  # closed on drop
        imported: GpuAllocation = a
        return imported

    def create_stream(self) -> GpuStream:
        self._check_open("Device.create_stream")
        return self.stream_class(self)

    def memory_pool(self) -> MemoryPool:
        """The device's pool (one per device), made on first use.

        Returns:
            A stream-ordered pool (``pool_class``, on ``cuMemPoolCreate``/``hipMemPoolCreate``) where the vendor has
            one and the device supports it (``attr_memory_pools_supported``), else the core's :class:`MemoryPool`.

        Raises:
            Error: ``ErrorKind.INVALID_HANDLE`` after ``close``; the driver's error where creating the pool fails.

        Backends:
            CUDA, HIP.
        """
        self._check_open("Device.memory_pool")
        pool = getattr(self, "_pool", None)
        if pool is None:
            with _POOL_LOCK:
                pool = getattr(self, "_pool", None)
                if pool is None:
                    if self.api.pool_create is not None and self.backend._attr(
                            self.api.tables.const("attr_memory_pools_supported"), self.handle):
                        pool = self.pool_class(self)
                    else:
                        pool = MemoryPool(self)
                    self._pool = pool
        return pool

    def load_module(self, source_or_binary: str | bytes, *, options: Sequence[str] = (),
                    defines: Mapping[str, Any] | None = None, include_dirs: Sequence[str | os.PathLike[str]] = (),
                    name_expressions: Sequence[str] = (), cache: bool = True) -> GpuModule:
        """A code object, or source compiled by the vendor's runtime compiler (NVRTC), from the kernel cache when it
        has it.

        Source is compiled with ``options`` + ``-D`` + ``-I`` flags, ``name_expressions`` lowered so
        ``kernel("f<float>")`` works; the image that loaded (PTX, else cubin) is kept in the kernel cache under the
        source, options, compiler version, architecture, device name and driver version, with the headers the
        compile read (checked at each hit: an edited header, found through ``include_dirs`` or a ``-I`` option,
        recompiles).

        Args:
            source_or_binary: source (``str``/bytes) or an image: PTX, cubin (ELF) or fatbin on CUDA; ELF or an
                offload bundle on HIP.
            options: the compiler's flags (``"-use_fast_math"``); only with source.
            defines: macros, ``{"N": 4}`` -> ``-DN=4``; only with source.
            include_dirs: ``-I`` directories; only with source.
            name_expressions: template instantiations to look up (``"axpy<float>"``); only with source.
            cache: use the kernel cache (default True).

        Returns:
            The loaded module (``CudaModule``/``HipModule``).

        Raises:
            Error: ``ErrorKind.COMPILE_FAILED`` with the compiler log; ``ErrorKind.INVALID_VALUE`` for bad option
                types or a NUL byte inside PTX or source; ``ErrorKind.UNSUPPORTED`` for an image format the vendor
                does not load, source where no compiler is bound (HIP), or options with an image; the driver's error
                where loading fails; ``ErrorKind.INVALID_HANDLE`` after ``close``.

        Backends:
            CUDA (source via NVRTC, PTX, cubin, fatbin), HIP (code objects: ELF, offload bundles).
        """
        backend, formats = self.api.name, self.api.tables.module_formats
        opts = compile_options(options, defines, include_dirs, name_expressions, backend)
        self._check_open("Device.load_module")
        data = _image_bytes(source_or_binary, backend)
        fmt = classify_image(data, backend)
        if fmt not in formats:
            raise Error(ErrorKind.UNSUPPORTED, f"the {backend} backend cannot load {fmt} (it takes: "
                        f"{', '.join(formats)})", backend=backend, function="Device.load_module")
        if fmt in ("ptx", "source") and b"\0" in data.rstrip(b"\0"):
            raise Error(ErrorKind.INVALID_VALUE, f"Device.load_module: {fmt} text contains a NUL byte (the driver "
                        "would read only the text before it)", backend=backend, function="Device.load_module")
        if fmt == "source":
            return self._compile(data, opts, cache)
        if opts:
            raise Error(ErrorKind.UNSUPPORTED, f"Device.load_module: compile options apply to source; a {fmt} image "
                        "is already compiled", backend=backend, function="Device.load_module")
        return self.module_class(self, data)

    def _cache_identity(self) -> str:
        """The device and compiler part of a cache key: architecture, name, driver and compiler versions."""
        ident = getattr(self, "_identity", None)
        if ident is None:
            ident = (f"{self.arch}\n{self.descriptor.name}\ndriver {self.backend.driver_version()}\n"
                     f"compiler {compiler_version(self.api)}")
            self._identity = ident
        return ident

    def _compile(self, source: bytes, opts: CompileOptions | None = None, cache: bool = False) -> GpuModule:
        """Source -> PTX for this device's virtual architecture; if the driver is older than the compiler's
        PTX, compile for the real architecture instead (no driver JIT needed).  With ``cache``, the image
        that loaded comes from (or goes to) the kernel cache."""
        opts = opts or CompileOptions()
        flags, names = opts.flags(), opts.name_expressions
        store = kernel_cache.default_cache() if cache and self.api.program_create is not None else None
        key = None
        if store is not None:
            key = kernel_cache.cache_key(backend=self.api.name, source=source, options=opts.options,
                                         defines=dict(opts.defines), include_dirs=opts.include_dirs,
                                         name_expressions=names, device=self._cache_identity())
            entry = store.get_entry(key)  # None too when a header it read changed since
            if entry is not None:
                meta, image = entry
                lowered = meta.get("lowered")
                if isinstance(lowered, dict) and set(lowered) == set(names):
                    try:
                        module = self.module_class(self, image)
                    except Error:  # the driver refuses it now: compile afresh
                        pass
                    else:
                        module.lowered_names = {str(k): str(v) for k, v in lowered.items()}
                        module.from_cache = True
                        cached_log = meta.get("log")  # the compile's own log, kept with the entry
                        if isinstance(cached_log, str) and cached_log:
                            compiler_log(module, cached_log, self.api.name, cached=True)
                        return module
        # what the compile may read besides the source, recorded before it compiles (kernel_cache.scan_dependencies)
        deps = kernel_cache.scan_dependencies(source, opts.options, opts.include_dirs) if key is not None else None
        arch = self.arch.replace(".", "")
        log: list[str] = []
        image, lowered = compile_program(self.api, source, f"compute_{arch}", flags, name_expressions=names, build_log=log)
        try:
            module = self.module_class(self, image)
        except Error as e:
            if e.code != self.api.tables.const("status_unsupported_ptx"):
                raise
            log.clear()
            image, lowered = compile_program(self.api, source, f"sm_{arch}", flags, binary=True,
                                             name_expressions=names, build_log=log)
            module = self.module_class(self, image)
        module.lowered_names = lowered
        compiler_log(module, "".join(log), self.api.name)
        if store is not None and key is not None:
            stored: dict[str, Any] = {"lowered": lowered}
            if module.build_log:
                stored["log"] = module.build_log
            store.put_entry(key, stored, image, deps)
        return module

    def synchronize(self) -> None:
        self._check_open("Device.synchronize")
        self.activate()
        marks = [(s, s._inflight.mark()) for s in list(self._streams)]  # what is enqueued before the wait
        self.api.check(self.api.device_synchronize(), "device_synchronize")
        for s, mark in marks:
            s._inflight.release(mark)
            s._last = None


def _free(api: GpuApi, kind: MemoryKind, handle: Any) -> tuple[int, str]:
    if kind is MemoryKind.HOST_PINNED or kind is MemoryKind.HOST:
        return int(api.host_free(handle)), "host_free"
    return int(api.free(handle)), "free"


def _offset_ptr(ffi: Any, dptr: Any, offset: int) -> Any:
    """``dptr`` + ``offset`` bytes, in the native device-pointer type (CUdeviceptr: an int; hipDeviceptr_t: a
    void * cdata)."""
    if not offset:
        return dptr
    if isinstance(dptr, int):
        return dptr + offset
    return ffi.cast(ffi.typeof(dptr), ffi.cast("char *", dptr) + offset)


class GpuAllocation(Allocation):
    """Device memory: ``.ptr`` (the address, an int), ``.dptr`` (the native device-pointer argument: what the
    allocator returned), ``.handle`` (the same).  Exports DLPack, and ``__cuda_array_interface__`` (v3) where the
    vendor's ``interop`` lists it."""

    device: GpuDevice

    def __init__(self, device: GpuDevice, handle: Any, nbytes: int, kind: MemoryKind) -> None:
        # (_freed and _tracked: False, the class defaults)
        self.device = device
        self._ctx = device._ctx  # the context lives while this does (Device.close gives up only the device's)
        self.handle = handle
        self.ptr = handle if type(handle) is int else _address(handle)
        self.dptr: Any = handle  # (an int where the device-pointer type is an integer, ex. CUdeviceptr)
        self.nbytes = nbytes
        self.kind = kind

    def _release(self) -> Error | None:
        device = self.device
        try:
            if getattr(_TLS, "key", None) != device._key:
                device.activate()
        except Error as e:
            return e.with_traceback(None)
        api = device.api
        code, role = _free(api, self.kind, self.handle)
        return api.error(code, role) if code else None

    # Allocation.free and free_unchecked, with _release inline for device memory of the current device
    def free(self) -> None:
        if self._freed:
            raise Error(ErrorKind.INVALID_HANDLE, f"{self!r} was already freed", backend=self.device.kind.name,
                        function="Allocation.free")
        device = self.device
        if self.kind is MemoryKind.DEVICE and getattr(_TLS, "key", None) == device._key:
            self._freed = True
            code = device._free(self.handle)
            if code:
                raise device.api.error(code, "free")
            return
        if self._views and (e := self._views_error("Allocation.free")) is not None:
            raise e
        self._freed = True
        err = self._release()
        if err is not None:
            raise err

    def free_unchecked(self) -> Result[None]:
        if self._freed:  # one flag test: releasing the vendor handle twice is undefined behaviour (a crash)
            return Error(ErrorKind.INVALID_HANDLE, f"{self!r} was already freed", backend=self.device.kind.name,
                         function="Allocation.free_unchecked")
        device = self.device
        if self.kind is MemoryKind.DEVICE and getattr(_TLS, "key", None) == device._key:
            self._freed = True
            code = device._free(self.handle)
            return device.api.error(code, "free") if code else None
        if self._views and (e := self._views_error("Allocation.free_unchecked")) is not None:
            return e
        self._freed = True
        return self._release()

    def export_ipc(self) -> IpcHandle:
        """An IPC handle of this DEVICE allocation (``ipc_get``: ``cuIpcGetMemHandle`` / ``hipIpcGetMemHandle``; see
        :meth:`Allocation.export_ipc`).

        Returns:
            The :class:`IpcHandle` another process opens with ``Device.import_ipc``.

        Raises:
            Error: ``ErrorKind.UNSUPPORTED`` for HOST_PINNED, HOST or UNIFIED memory, stream-ordered pool
                allocations and imported memory, or where the vendor has no IPC; ``ErrorKind.INVALID_VALUE`` for a
                slice or a caching-pool block; ``ErrorKind.INVALID_HANDLE`` once freed or after ``Device.close``;
                the driver's error.

        Backends:
            CUDA, HIP.
        """
        what = "Allocation.export_ipc"
        self._check_live(what)
        device = self.device
        device._check_open(what)
        api = device.api
        if api.ipc_get is None:
            raise unsupported(device.kind, what)
        if self.kind is not MemoryKind.DEVICE:
            raise Error(ErrorKind.UNSUPPORTED, f"{what}: {self.kind.name} memory has no {api.name} IPC handle; export "
                        "DEVICE memory (Device.alloc)", backend=api.name, function=what)
        device.activate()
        out = api.ffi.new(api.tables.types["ipc_handle"] + " *")
        api.check(api.ipc_get(out, self.dptr), "ipc_get")
        return IpcHandle(backend=device.kind, device=device.descriptor.id.index, nbytes=self.nbytes,
                         data=bytes(api.ffi.buffer(out)), pid=os.getpid())

    def _slice(self, offset: int, nbytes: int) -> Allocation:
        """A slice: ``ptr`` and ``dptr`` (the native device-pointer type) moved by ``offset`` bytes."""
        s: Any = AllocationSlice(self, offset, nbytes)
        s.ptr = self.ptr + offset
        s.dptr = s.handle = _offset_ptr(self.device.api.ffi, self.dptr, offset)
        return s  # type: ignore[no-any-return]

    def _host_address(self) -> int | None:
        """Pinned host memory and managed (unified) memory are host-addressable; device memory is not."""
        return self.ptr if self.kind in (MemoryKind.HOST_PINNED, MemoryKind.HOST, MemoryKind.UNIFIED) else None

    # typed views (Allocation.view): the DLPack device of each kind, and the consumer-stream handshake
    def _dlpack_device(self) -> tuple[int, int] | None:
        """Device memory: ``kDLCUDA``/``kDLROCM``; pinned host memory: ``kDLCUDAHost``/``kDLROCMHost``; managed
        memory: ``kDLCUDAManaged`` (HIP has no managed device type: ``kDLROCMHost``, host-addressable too)."""
        cuda = self.device.kind is BackendKind.CUDA
        index = self.device.descriptor.id.index
        if self.kind is MemoryKind.DEVICE:
            return (self.device.kind.dlpack_device, index)
        if self.kind is MemoryKind.UNIFIED and cuda:
            return (dlpack.KDL_CUDA_MANAGED, index)
        return (dlpack.KDL_CUDA_HOST if cuda else dlpack.KDL_ROCM_HOST, index)

    def _dlpack_address(self) -> int:
        return self.ptr

    def _view_class(self) -> type[Any]:
        return dlpack.CudaArrayView if "cuda_array_interface" in self.device.api.tables.interop else dlpack.DLPackView

    def _dlpack_sync(self, view: Any, stream: Any) -> None:
        """The DLPack stream handshake: ``stream`` is the consumer's (None: the legacy default stream; -1: the
        consumer orders itself, nothing is done).  With a producer stream (``view(..., stream=s)``) an event is
        recorded on it and the consumer's stream waits on that event (no host wait); without one the producer
        cannot know what to wait for, so the device is synchronised."""
        if stream == -1 and type(stream) is int:
            return
        device = self.device
        handle = device._stream_handle(stream, "__dlpack__")
        producer = view.stream
        if producer is None:
            device.synchronize()
            return
        if handle is not None and handle == producer._address:
            return  # the same stream: already in order
        event = producer.record_event()
        api = device.api
        target = api.ffi.cast(api.tables.types["stream"], handle or 0)
        api.check(api.stream_wait_event(target, event.handle, 0), "stream_wait_event")

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CUDA Array Interface v3: a 1-D uint8 view of the allocation (zero copy), where the vendor's ``interop``
        lists it (elsewhere AttributeError: ``hasattr`` is False)."""
        if "cuda_array_interface" not in self.device.api.tables.interop:
            raise AttributeError(f"{type(self).__name__} has no __cuda_array_interface__ ({self.device.kind.name} "
                                 "memory is not CUDA memory)")
        self._check_live("__cuda_array_interface__")
        self.device._check_open("__cuda_array_interface__")
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.ptr, False), "version": 3,
                "strides": None, "stream": None}

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.device.kind.dlpack_device, self.device.descriptor.id.index)

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """A DLPack capsule of a 1-D uint8 tensor over the allocation (zero copy): ``"dltensor_versioned"`` for a
        consumer passing ``max_version >= (1, 0)``, else ``"dltensor"`` (typed, strided exports: ``view()``).

        The producer's work is complete before the capsule is returned: unless ``stream == -1``, the device is
        synchronised (this backend does not track which stream last wrote an allocation; a view made with
        ``view(..., stream=s)`` orders the consumer's stream after ``s`` instead)."""
        self._check_live("__dlpack__")
        self.device._check_open("__dlpack__")
        if copy:
            raise BufferError(f"{self.device.kind.name} allocations export without copying (copy=True is not supported)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"cannot export {self!r} to device {tuple(dl_device)}")
        self._dlpack_sync(_NO_PRODUCER, stream)  # (the stream argument checked as the protocol says)
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return dlpack.EXPORTER.export(self, self.ptr, self.__dlpack_device__(), DType.U8, (self.nbytes,), None, 0,
                                      versioned)


class _NoProducer:
    stream = None  # an allocation's own export knows no producer stream


_NO_PRODUCER = _NoProducer()


class _ImportedMemory:
    """Memory imported from another library (``Device.from_dlpack``): never freed by this backend; ``free()``
    or dropping it calls the producer's deleter (``_foreign.release()``) once."""

    _foreign: Any = None

    def _release(self) -> Error | None:
        foreign, self._foreign = self._foreign, None
        if foreign is not None:
            foreign.release()
        return None

    free = Allocation.free  # (not GpuAllocation's fast path, which frees device memory)
    free_unchecked = Allocation.free_unchecked

    def export_ipc(self) -> IpcHandle:
        raise Error(ErrorKind.UNSUPPORTED, "Allocation.export_ipc: memory imported from another library is not this "
                    "backend's to export", backend=self.device.kind.name, function="Allocation.export_ipc")  # type: ignore[attr-defined]


class _IpcMemory:
    """Memory opened from another process's IPC handle (``Device.import_ipc``): ``free()`` or dropping it closes the
    mapping (``ipc_close``), never frees the memory (the exporter's)."""

    def _release(self) -> Error | None:
        device: GpuDevice = self.device  # type: ignore[attr-defined]
        try:
            if getattr(_TLS, "key", None) != device._key:
                device.activate()
        except Error as e:
            return e.with_traceback(None)
        code = device.api.ipc_close(self.handle)  # type: ignore[attr-defined]
        return device.api.error(code, "ipc_close") if code else None

    free = Allocation.free  # (not GpuAllocation's fast path, which frees device memory)
    free_unchecked = Allocation.free_unchecked

    def export_ipc(self) -> IpcHandle:
        raise Error(ErrorKind.UNSUPPORTED, "Allocation.export_ipc: memory opened from an IPC handle is the exporting "
                    "process's: pass its handle on instead", backend=self.device.kind.name,  # type: ignore[attr-defined]
                    function="Allocation.export_ipc")


_MIXED: dict[tuple[type, type], type] = {}


def _with_mixin(mixin: type, base: type[GpuAllocation]) -> type[GpuAllocation]:
    """``base`` (a vendor's allocation class) with ``mixin``'s release in front, made once per pair:
    ``ImportedCudaAllocation`` (memory of another framework), ``IpcCudaAllocation`` (another process's)."""
    cls = _MIXED.get((mixin, base))
    if cls is None:
        prefix = "Imported" if mixin is _ImportedMemory else "Ipc"
        cls = _MIXED[mixin, base] = type(prefix + base.__name__, (mixin, base), {})
    return cls


class GpuEvent(Event):
    """A point in a stream.  It knows the stream's in-flight host buffers enqueued before it (``InFlight`` and
    the mark at record time): once the event is seen complete (``synchronize``, a ``query`` that returns True)
    they are released."""

    def __init__(self, device: GpuDevice, handle: Any, inflight: InFlight | None = None, mark: int = 0) -> None:
        self.device = device
        self.api = device.api
        self.handle = handle
        self._finalizer = weakref.finalize(self, _destroy, self.api.event_destroy, handle, device._ctx)
        self._inflight = inflight
        self._mark = mark

    def _done(self) -> None:
        inflight = self._inflight
        if inflight is not None:
            inflight.release(self._mark)
            self._inflight = None

    def synchronize(self) -> None:
        if self.device._closed:
            raise self.device._closed_error("Event.synchronize")
        self.api.check(self.api.event_synchronize(self.handle), "event_synchronize")
        self._done()

    def query(self) -> bool:
        if self.device._closed:
            raise self.device._closed_error("Event.query")
        code = self.api.event_query(self.handle)
        if code == self.api.status_not_ready:
            return False
        self.api.check(code, "event_query")
        self._done()
        return True

    def elapsed_ms(self, end: Event) -> float:
        if not (isinstance(end, GpuEvent) and end.api is self.api):  # (the same api: the same vendor)
            raise Error(ErrorKind.INVALID_VALUE, f"elapsed_ms needs another {self.api.name} event",
                        backend=self.api.name, function="Event.elapsed_ms")
        self.synchronize()
        end.synchronize()
        out = self.api.ffi.new("float *")
        self.api.check(self.api.event_elapsed(out, self.handle, end.handle), "event_elapsed")
        return float(out[0])


class GpuModule(Module):
    """A loaded code object (the image is kept: the driver may read it lazily).  A vendor's subclass (generated)
    names the class of its kernels, ``kernel_class``.

    Attributes:
        lowered_names: each name expression given to ``load_module(name_expressions=...)`` (ex.
            ``"axpy<float>"``) -> its lowered (mangled) symbol, which :meth:`kernel` looks up; empty for a module
            loaded from a code object (always, on HIP: hipRTC is not bound, so it loads code objects only).
    """

    kernel_class: ClassVar[type[GpuKernel]]

    def __init__(self, device: GpuDevice, image: bytes) -> None:
        api = device.api
        self.device = device
        self.api = api
        device.activate()
        self._image = api.ffi.new("char[]", image)  # NUL-terminated (PTX needs it)
        out = api.ffi.new(api.tables.types["module"] + " *")
        code = api.module_load(out, self._image)
        if code:
            raise api.error(code, "module_load")
        self.handle = out[0]
        self._finalizer = weakref.finalize(self, _destroy, api.module_unload, self.handle, device._ctx)

    lowered_names: dict[str, str] = {}  # name expression (ex. "axpy<float>") -> its lowered (mangled) name

    def kernel(self, name: str) -> GpuKernel:
        # The kernel ``name``: a symbol, or a name expression given to ``load_module`` (its lowered name).
        if isinstance(name, str) and name in self.lowered_names:
            encoded = self.lowered_names[name].encode()
        else:
            encoded = _c_string(name, "the kernel name", "Module.kernel", self.api.name)
        self.device._check_open("Module.kernel")
        return self.kernel_class(self, name, encoded)


def _param_sizes(api: GpuApi, func: Any) -> tuple[int, ...] | None:
    """The kernel's parameter sizes, or None where the driver cannot say (or the vendor has no ``param_info``)."""
    if api.param_info is None:
        return None
    ffi = api.ffi
    past_the_last = api.tables.const("status_invalid_value")
    offset, size = ffi.new("size_t *"), ffi.new("size_t *")
    sizes: list[int] = []
    for i in range(_MAX_PARAMS):
        code = api.param_info(func, i, offset, size)
        if code == past_the_last:
            return tuple(sizes)
        if code:  # ex) a driver older than the param_info function: SYMBOL_NOT_FOUND's sentinel
            return None
        sizes.append(int(size[0]))
    return None


class GpuKernel(Kernel):
    def __init__(self, module: GpuModule, name: str, encoded: bytes | None = None) -> None:
        api = module.api
        self.module = module  # keeps the module loaded
        self.name = name
        module.device.activate()
        self.api = api
        out = api.ffi.new(api.tables.types["function"] + " *")
        code = api.module_function(out, module.handle, _c_string(name, "the kernel name", "Module.kernel", api.name)
                                   if encoded is None else encoded)
        if code:
            err = api.error(code, "module_function", f"kernel {name!r}")
            if code == _NOT_FOUND:  # no such symbol: a bad name, INVALID_VALUE as on every backend (not the spec's
                # INVALID_HANDLE of CUDA_ERROR_NOT_FOUND, which names a handle that was not found)
                raise Error(ErrorKind.INVALID_VALUE, f"Module.kernel: no kernel {name!r} in this module ({err}); a "
                            "C++ kernel needs extern \"C\" or its name expression in load_module(name_expressions=)",
                            code=code, backend=api.name, function=err.function)
            raise err
        self.handle = out[0]
        self._address = _address(self.handle)
        self.param_sizes = _param_sizes(api, self.handle)
        self.num_args = None if self.param_sizes is None else len(self.param_sizes)
        self._plans: dict[tuple[Any, ...], _ArgPlan | None] = {}  # argument types -> layout (see _ArgPlan)
        self._layouts: dict[tuple[type, ...], bytes] = {}  # the compiled launch's (see _ArgPlan.layout)

    @property
    def attributes(self) -> KernelAttributes:
        # ``cuFuncGetAttribute`` / ``hipFuncGetAttribute`` for each field; the warp size is the device's.
        api, tables = self.api, self.api.tables
        self.module.device.activate()
        out = api.ffi.new("int *")

        def attr(role: str) -> int:
            api.check(api.func_attribute(out, tables.const(role), self.handle), "func_attribute")
            return int(out[0])

        device = self.module.device
        warp = device.backend._attr(tables.const("attr_warp_size"), device.handle)
        return KernelAttributes(max_threads_per_block=attr("func_max_threads"), preferred_multiple=warp,
                                registers=attr("func_regs"), static_shared_mem=attr("func_shared"),
                                local_mem=attr("func_local"), const_mem=attr("func_const"),
                                max_dynamic_shared_mem=attr("func_max_dynamic_shared"))

    def max_active_blocks(self, block_threads: int, dynamic_shared_mem: int = 0) -> int:
        # ``cuOccupancyMaxActiveBlocksPerMultiprocessor`` / ``hipModuleOccupancyMaxActiveBlocksPerMultiprocessor``.
        what = "Kernel.max_active_blocks"
        api = self.api
        threads = check_size(block_threads, "block_threads", what, api.name)
        if threads > 2**31 - 1:
            raise Error(ErrorKind.INVALID_VALUE, f"{what}: block_threads={threads} is not an int", backend=api.name,
                        function=what)
        shared = check_size(dynamic_shared_mem, "dynamic_shared_mem", what, api.name, minimum=0)
        self.module.device.activate()
        out = api.ffi.new("int *")
        api.check(api.occupancy(out, self.handle, threads, shared), "occupancy")
        return int(out[0])

    def _plan(self, args: Sequence[Any], key: tuple[Any, ...]) -> _ArgPlan | None:
        """The plan for ``args``, whose key is the tuple of their types, followed by the DType of each
        Scalar among them (a Scalar's layout follows from its DType); computed by the Stream inline."""
        plans = self._plans
        if key in plans:
            return plans[key]
        plan, cache = _arg_plan(args, self.param_sizes, self.api.tables)
        if cache:
            if len(plans) >= _MAX_PLANS:
                plans.clear()
                self._layouts.clear()
            plans[key] = plan
            if plan is not None and plan.layout is not None:
                self._layouts[key] = plan.layout  # its key is the types alone (no Scalar has a layout)
        return plan


class GpuGraph(Graph):
    """A captured graph, instantiated (``graph_instantiate``): ``launch(stream)`` is ``graph_launch``."""

    def __init__(self, stream: GpuStream) -> None:
        self.stream = stream
        self.device = stream.device
        self.api = stream.api
        self.graph: Any = None
        self.exec: Any = None
        self._fin: Any = None

    def _adopt(self, graph: Any) -> None:
        api = self.api
        self.graph = graph
        out = api.ffi.new(api.tables.types["graph_exec"] + " *")
        code = api.graph_instantiate(out, graph, 0)
        if code:
            api.graph_destroy(graph)
            self.graph = None
            raise api.error(code, "graph_instantiate")
        self.exec = out[0]
        self._fin = weakref.finalize(self, _destroy_graph, api, graph, self.exec)

    def launch(self, stream: Stream | None = None) -> None:
        # Replay the recorded work on ``stream`` (default: the stream it was captured on).
        s = self.stream if stream is None else stream
        if not isinstance(s, GpuStream) or s.device is not self.device:
            raise Error(ErrorKind.INVALID_VALUE, f"Graph.launch: {s!r} is not a stream of {self.device.descriptor.id}",
                        backend=self.api.name, function="Graph.launch")
        if self.exec is None:
            raise Error(ErrorKind.INVALID_HANDLE, "Graph.launch: the graph is closed or was never captured",
                        backend=self.api.name, function="Graph.launch")
        if self.device._closed:
            raise self.device._closed_error("Graph.launch")
        self.device.activate()
        self.api.check(self.api.graph_launch(self.exec, s.handle), "graph_launch")

    def close(self) -> None:
        if self._fin is not None:
            self._fin()
            self._fin = None
        self.exec = self.graph = None


def _destroy_graph(api: GpuApi, graph: Any, exe: Any) -> None:
    api.graph_exec_destroy(exe)
    api.graph_destroy(graph)


class GpuStream(Stream):
    """A non-blocking stream (``stream_flags``).  A vendor's subclass (generated) names the classes of its kernels
    and events: ``kernel_class``, ``event_class``.

    Launches: where the launch function's module is compiled (API mode), ``_fast._launch`` (trampolines.c)
    packs the arguments in C, on its stack, from the kernel's layout for their types, and calls
    the vendor's ``launch``: an Allocation as its ``.ptr``, a numpy scalar as its bytes.  It does not launch
    (and this class takes the Python path below, which launches or raises) for the first launch of each tuple
    of argument types, Scalars, a count or size the kernel's parameter info rejects, or a freed allocation.

    The Python path packs without building anything per call where possible (the driver copies the
    arguments before the launch function returns, so their memory need only live until then):

    - the kernel keeps one :class:`_ArgPlan` per tuple of argument types;
    - the stream keeps one buffer per plan, rewritten by each launch with that plan.  The buffer is
      shared state, so it is used under a lock taken without waiting: a thread that finds it taken
      (another thread launching on this stream right now) packs into a buffer of its own instead;
    - a ``KernelLaunch`` launched twice in a row gets a private, immutable packed copy, and from then on
      is re-issued without packing (the checked path still tests that its allocations are live).  The
      stream holds that last launch (and so its allocations) until the next launch with another one,
      ``synchronize()``, or a ``query()`` that finds the stream idle, as it holds the host buffers of copies;
    - the last ``LaunchDims`` validated is remembered (by identity: LaunchDims are immutable).
    """

    device: GpuDevice
    kernel_class: ClassVar[type[GpuKernel]]
    event_class: ClassVar[type[GpuEvent]]

    def __init__(self, device: GpuDevice) -> None:
        api = device.api
        self.device = device
        self.api = api
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
        self._launch_packed = api.launch_packed
        self._kernel_type = self.kernel_class  # (instance attributes: the launch and copy paths read them)
        self._kind = device.backend.kind
        self._address = _address(self.handle)
        self._device_key = device._key
        self._pack_lock = threading.Lock()  # guards the buffers of _slots
        self._slots: dict[_ArgPlan, tuple[Any, Any, Any]] = {}  # plan -> (storage, view, params)
        # the last launch: (KernelLaunch, the launch function's arguments or None, allocations, storage, checked)
        self._last: tuple[Any, ...] | None = None
        self._dims: tuple[Any, ...] = (None, (), False)  # (LaunchDims, its 7 launch arguments, validated)
        device._streams.add(self)

    # copies (asynchronous; host buffers are held in _inflight until work after them is seen complete)
    def _memory(self, a: Any, what: str, param: str) -> Any:
        """The device pointer of allocation ``a`` (parameter ``param``) for a copy on this stream: ``TypeError``
        if ``a`` is not an allocation of this backend, INVALID_HANDLE if it was freed or this stream's device
        closed."""
        if not isinstance(a, Allocation) or not hasattr(a, "dptr"):
            raise TypeError(f"{what}: {param} must be a {self.api.name} Allocation, not {type(a).__name__} ({a!r})")
        if a._freed:
            a._check_live(what)
        device = self.device
        if device._closed:
            raise device._closed_error(what)
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
            raise Error(ErrorKind.INVALID_VALUE, f"Stream.copy_from_host: {view.nbytes} bytes do not fit in {dst!r}",
                        backend=self.api.name, function="Stream.copy_from_host")
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
            raise Error(ErrorKind.INVALID_VALUE, f"Stream.copy_to_host: {view.nbytes} bytes is more than {src!r} "
                        "holds", backend=self.api.name, function="Stream.copy_to_host")
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
            raise Error(ErrorKind.INVALID_VALUE, f"{function}: a size, pitch or offset does not fit the "
                        f"{api.tables.types[role + '_params']} fields of the {api.name} backend",
                        backend=api.name, function=function) from None
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
                raise Error(ErrorKind.INVALID_VALUE, f"{function}: to={to!r} is not a {api.name} device",
                            backend=api.name, function=function)
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
            raise TypeError(f"Stream.launch: the launch's dims must be a LaunchDims, not {type(dims).__name__}")
        if dims.cooperative or dims.cluster is not None:  # never cached: launch options take _launch_options
            return None
        g, b = dims.grid, dims.block
        if check:
            dims.validate(self.device.descriptor.limits, self._kind, "Stream.launch")
        elif max(g + b) > _UINT_MAX or min(g + b) < 0 or not 0 <= dims.shared_mem <= _UINT_MAX:
            # unchecked: what the launch function's unsigned int parameters cannot hold is still an Error (cffi
            # would raise OverflowError), never a truncated size
            raise Error(ErrorKind.INVALID_VALUE, f"Stream.launch_unchecked: {dims} does not fit the launch's "
                        "unsigned int dimensions", backend=self.api.name, function="Stream.launch_unchecked")
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

    def launch(self, launch: KernelLaunch) -> None:
        try:
            kernel, launch_dims, args = launch  # (cheaper than its three properties)
        except (TypeError, ValueError):
            raise not_a_launch(launch, "Stream.launch") from None
        fast = self._launch_packed
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
                raise Error(ErrorKind.INVALID_VALUE, f"not a {self.api.name} kernel", backend=self.api.name,
                            function="Stream.launch")
            code = self._issue(launch, kernel, True)
        if code:
            self._raise_launch(code, kernel, launch_dims)

    def launch_unchecked(self, launch: KernelLaunch) -> Result[None]:
        # The launch without LaunchDims validation against the device's limits, returning the Error (see
        # docs/UNCHECKED.md): still refused a kernel of another backend, a wrong argument count or size, a freed
        # allocation, dimensions the launch function cannot take, a closed device.  A non-KernelLaunch raises
        # TypeError.
        try:
            kernel, launch_dims, args = launch  # (cheaper than its three properties)
        except (TypeError, ValueError):
            raise not_a_launch(launch, "Stream.launch_unchecked") from None
        if type(kernel) is not self._kernel_type and not isinstance(kernel, self._kernel_type):
            return Error(ErrorKind.INVALID_VALUE, f"Stream.launch_unchecked: {kernel!r:.80} is not a {self.api.name} "
                         "kernel", backend=self.api.name, function="Stream.launch_unchecked")
        fast = self._launch_packed
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
        except Error as e:
            return e.with_traceback(None)  # (a value: its frames would hold their objects)
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
            raise Error(ErrorKind.INVALID_VALUE, f"not a {api.name} kernel", backend=api.name, function=what)
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
                    raise Error(ErrorKind.UNSUPPORTED, f"{what}: {name} is not supported by {device.descriptor.name} "
                                f"({device.descriptor.id}: its Capability lacks {flag.name})", backend=api.name,
                                function=what)
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

        self._launch_packed = None
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
            raise Error(ErrorKind.INVALID_VALUE, f"wait_event needs a {self.api.name} event", backend=self.api.name,
                        function="Stream.wait_event")
        if self.device._closed or event.device._closed:
            raise (self.device if self.device._closed else event.device)._closed_error("Stream.wait_event")
        self.api.check(self.api.stream_wait_event(self.handle, event.handle, 0), "stream_wait_event")

    def synchronize(self) -> None:
        if self.device._closed:
            raise self.device._closed_error("Stream.synchronize")
        mark = self._inflight.mark()
        self.api.check(self.api.stream_synchronize(self.handle), "stream_synchronize")
        self._inflight.release(mark)
        self._last = None
        self._check_callback_waits("Stream.synchronize")

    @contextlib.contextmanager
    def capture(self) -> Iterator[GpuGraph]:
        # Stream capture (``capture_begin`` in this thread's mode, ``capture_end``, ``graph_instantiate``): the
        # graph is usable after the block; an exception inside it ends the capture and discards what was recorded.
        if self.device._closed:
            raise self.device._closed_error("Stream.capture")
        api = self.api
        self.device.activate()
        api.check(api.capture_begin(self.handle, api.tables.const("capture_mode")), "capture_begin")
        graph = GpuGraph(self)
        out = api.ffi.new(api.tables.types["graph"] + " *")
        try:
            yield graph
        except BaseException:
            if api.capture_end(self.handle, out) == 0 and out[0] != api.ffi.NULL:
                api.graph_destroy(out[0])
            raise
        api.check(api.capture_end(self.handle, out), "capture_end")
        graph._adopt(out[0])

    def query(self) -> bool:
        if self.device._closed:
            raise self.device._closed_error("Stream.query")
        mark = self._inflight.mark()
        code = self.api.stream_query(self.handle)
        if code == self.api.status_not_ready:
            return False
        self.api.check(code, "stream_query")
        self._inflight.release(mark)
        self._last = None
        return True


# ----------------------------------------------------------------------------- the stream-ordered pool


def _destroy_pool(api: GpuApi, key: tuple[Any, ...], target: Any, handle: Any, ctx: _ContextRef | None) -> int:
    """Finalizer of a stream-ordered pool (the driver defers it while allocations are outstanding; ``ctx``,
    the device's context, is held until this has run)."""
    try:
        _make_current(api, key, target)
    except Error:
        pass
    return int(api.pool_destroy(handle))


class GpuPoolAllocation(GpuAllocation):
    """Memory from a :class:`GpuStreamOrderedPool`, freed (``pool_free``) in the order of the stream it
    was allocated on (``.stream``, the native handle)."""

    kind = MemoryKind.DEVICE
    _tracked = True  # dropped unfreed: freed in stream order by Allocation.__del__
    _unordered = False  # allocated with no stream: freed after the work of every stream of the device

    def __init__(self, pool: GpuStreamOrderedPool, handle: Any, nbytes: int, stream: Any) -> None:
        # the pool's hot path: the fewest attributes (.device and .dptr are read through the pool and .handle)
        self.pool = pool  # keeps the pool (and its stream) alive while this is
        self.handle = handle  # the allocator's answer: the native device-pointer argument
        self.ptr = handle if type(handle) is int else _address(handle)
        self.nbytes = nbytes
        self.stream = stream

    @property
    def device(self) -> GpuDevice:  # type: ignore[override]
        return self.pool.device

    @property
    def dptr(self) -> Any:
        return self.handle

    def _release(self) -> Error | None:
        pool = self.pool
        if getattr(_TLS, "key", None) != pool._device_key:
            try:
                pool.device.activate()
            except Error as e:
                return e
        if self._unordered:
            try:
                pool._order_after_device()
            except Error as e:
                return e
        code = pool._pool_free(self.handle, self.stream)
        return pool.api.error(code, "pool_free") if code else None

    free_unchecked = Allocation.free_unchecked  # through _release, not GpuAllocation's inline free

    def export_ipc(self) -> IpcHandle:
        self._check_live("Allocation.export_ipc")
        raise Error(ErrorKind.UNSUPPORTED, f"Allocation.export_ipc: {self!r} comes from a stream-ordered pool, whose "
                    "memory has no IPC handle (pool export is not bound): allocate with Device.alloc to export",
                    backend=self.pool.api.name, function="Allocation.export_ipc")

    def free(self) -> None:  # _release inline (the pool's hot path)
        if self._freed:
            raise Error(ErrorKind.INVALID_HANDLE, f"{self!r} was already freed", backend=self.pool.api.name,
                        function="Allocation.free")
        self._freed = True
        pool = self.pool
        if getattr(_TLS, "key", None) != pool._device_key:
            pool.device.activate()
        if self._unordered:
            pool._order_after_device()
        code = pool._pool_free(self.handle, self.stream)
        if code:
            raise pool.api.error(code, "pool_free")


def _compiled_pool_allocation(api: GpuApi, cls: type[GpuPoolAllocation]) -> type:
    """``cls`` (a vendor's :class:`GpuPoolAllocation`) on the compiled ``_PoolMemory`` (trampolines.c), which holds
    ``ptr``, ``nbytes``, ``pool``, the stream and the flags, and frees in C; made once per class and api, with the
    same name."""
    made = api.pool_types.get(cls)
    if made is not None:
        return made
    assert api.pool_memory is not None
    base: Any = api.pool_memory[1]
    ffi, stream_t, deviceptr_t = api.ffi, api.tables.types["stream"], api.tables.types["deviceptr"]
    pointer = "*" in deviceptr_t  # else the device-pointer type is the address itself (an integer)

    class Compiled(base, cls):  # type: ignore[misc,valid-type]
        __doc__ = cls.__doc__

        @property
        def handle(self) -> Any:  # the native device-pointer argument (also .dptr, as for every pool allocation)
            return ffi.cast(deviceptr_t, self.ptr) if pointer else self.ptr

        @property
        def stream(self) -> Any:  # the native stream handle
            return ffi.cast(stream_t, self._stream)

    Compiled.__name__ = Compiled.__qualname__ = cls.__name__
    Compiled.__module__ = cls.__module__
    api.pool_types[cls] = Compiled
    return Compiled


class GpuStreamOrderedPool(MemoryPool):
    """:class:`MemoryPool` on the driver's stream-ordered allocator: a pool of its own on this device
    (``pool_create``; its release threshold raised so that freed memory stays reserved for reuse instead of
    going back to the driver at each synchronisation), served by ``pool_alloc`` and returned by ``pool_free``.
    Other libraries' pools (the device's default pool) are left alone.  A vendor's subclass (generated) names
    the class of its allocations, ``allocation_class``.

    ``alloc(n, stream=s)`` allocates in the order of ``s`` and frees in that order, with no synchronisation
    (the fast path: use the memory on ``s``, or order other streams after it with events; the driver reuses
    the memory on another stream only after the free, as :class:`MemoryPool` does).  ``alloc(n)`` allocates on
    the pool's own stream and waits for it, so that the memory is usable on any stream at once, as
    :meth:`Device.alloc`'s is; its ``free()`` is ordered after the work then enqueued on every stream of the
    device (the pool's stream is made to wait for an event on each), so work still queued on any stream never
    sees the memory handed to a new owner.

    ``stats()`` reads the driver's counters: ``allocated_bytes`` is the memory the pool reserves,
    ``in_use_bytes`` what its allocations use; the driver keeps no hit or miss counts (0).
    """

    device: GpuDevice
    allocation_class: ClassVar[type[GpuPoolAllocation]]

    def __init__(self, device: GpuDevice) -> None:
        MemoryPool.__init__(self, device, MemoryKind.DEVICE)
        api = device.api
        self.api = api
        ffi, tables = api.ffi, api.tables
        device.activate()
        props = ffi.new(tables.types["mempool_props"] + " *")
        props.allocType = tables.const("pool_alloc_type")
        props.location.type = tables.const("pool_location_device")
        props.location.id = device.index
        out = ffi.new(tables.types["mempool"] + " *")
        api.check(api.pool_create(out, props), "pool_create")
        self.handle = out[0]
        self._ctx = device._ctx  # its allocations hold the pool, and so the context
        self._finalizer = weakref.finalize(self, _destroy_pool, api, device._key, device._target, self.handle,
                                           device._ctx)
        keep_all = ffi.new("uint64_t *", 2**64 - 1)
        api.check(api.pool_set_attribute(self.handle, tables.const("pool_attr_release_threshold"), keep_all),
                  "pool_set_attribute")
        self.stream = device.create_stream()  # alloc() without a stream: allocate here, then wait
        self._new = ffi.new
        self._ptr_t = ffi.typeof(tables.types["deviceptr"] + " *")
        self._device_key = device._key
        self._pool_alloc: Callable[..., int] = api.pool_alloc
        self._pool_free: Callable[..., int] = api.pool_free
        self._address = _address(self.handle)
        self._allocation = self.allocation_class  # (instance attributes: the allocation path reads them)
        self._stream_type = device.stream_class
        self._reserved, self._used = tables.const("pool_attr_reserved"), tables.const("pool_attr_used")
        compiled = api.pool_memory
        # (_fast._pool_alloc, the allocation class) or None
        self._compiled: tuple[Callable[..., GpuPoolAllocation | int], type] | None = None if compiled is None else (
            compiled[0], _compiled_pool_allocation(api, self.allocation_class))

    def _shut(self) -> None:
        """The device was closed: allocations are refused from now on (``_try``'s allocator replaced by one that
        raises the closed-device Error, which ``alloc_unchecked`` returns), at no cost to the allocation path;
        frees still work."""
        error = self.device._closed_error

        def refuse(*_: Any) -> int:
            raise error("MemoryPool.alloc")

        self._compiled = None
        self._pool_alloc = refuse

    def _memory_error(self, memory: Allocation, code: int | None, function: str) -> Error:
        """The Error of a compiled allocation's failed free (``code``), or of freeing it twice (None)."""
        if code is None:
            return Error(ErrorKind.INVALID_HANDLE, f"{memory!r} was already freed", backend=self.api.name,
                         function=function)
        return self.api.error(code, "pool_free")

    def alloc(self, nbytes: int, stream: Stream | None = None) -> GpuPoolAllocation:
        """At least ``nbytes`` (``check_size``: an integer >= 1), in the order of ``stream`` (see the class)."""
        if type(nbytes) is not int or nbytes <= 0:
            nbytes = check_size(nbytes, "nbytes", "MemoryPool.alloc", self.device.kind)
        if stream is not None and not ((type(stream) is self._stream_type or isinstance(stream, self._stream_type))
                                       and stream.device is self.device):
            raise Error(ErrorKind.INVALID_VALUE, f"MemoryPool.alloc needs a {self.api.name} stream of "
                        f"{self.device!r}, not {stream!r}", backend=self.api.name, function="MemoryPool.alloc")
        a = self.alloc_unchecked(nbytes, stream)
        if isinstance(a, Error):
            raise a
        return a

    def alloc_unchecked(self, nbytes: int, stream: Stream | None = None) -> Result[GpuPoolAllocation]:
        """``alloc`` without its checks (the size's type, the stream's backend and device), returning the
        Error instead of raising it."""
        if type(nbytes) is not int or not 0 < nbytes <= _SIZE_MAX:
            checked = self.device._alloc_args_unchecked(nbytes, MemoryKind.DEVICE, "MemoryPool.alloc_unchecked")
            if isinstance(checked, Error):
                return checked
            nbytes = checked
        st: Any = self.stream if stream is None else stream
        try:
            if getattr(_TLS, "key", None) != self._device_key:
                self.device.activate()
            compiled = self._compiled  # (_try, with its compiled case inline: the hot path)
            a = compiled[0](compiled[1], self, self._address, nbytes, st._address, self._device_key) \
                if compiled is not None and stream is not None else self._try(nbytes, st, stream is None)
            if isinstance(a, int):
                a = self._retry(a, nbytes, st, stream is None)
            if stream is None:
                code = self.api.stream_synchronize(st.handle)
                if code:
                    a.free_unchecked()
                    return self.api.error(code, "stream_synchronize")
            return a
        except Error as e:
            return e.with_traceback(None)  # (a value: its frames would hold their objects)
        except (OverflowError, TypeError) as e:  # not a size_t
            return Error(ErrorKind.INVALID_VALUE, f"cannot allocate {nbytes!r} bytes: {e}", backend=self.api.name,
                         function="MemoryPool.alloc")
        except AttributeError:
            if isinstance(stream, self._stream_type):
                raise
            return Error(ErrorKind.INVALID_VALUE, f"MemoryPool.alloc_unchecked: stream must be None or a "
                         f"{self.api.name} stream, not {stream!r:.80}", backend=self.api.name,
                         function="MemoryPool.alloc_unchecked")

    def _try(self, nbytes: int, st: GpuStream, unordered: bool = False) -> GpuPoolAllocation | int:
        """One allocation on ``st`` (the device current): the allocation, or the driver's status.  ``unordered``
        (``alloc(n)``, no stream): the Python allocation, whose free orders after every stream of the device."""
        compiled = self._compiled
        if compiled is not None and not unordered:  # in C: _fast._pool_alloc
            return compiled[0](compiled[1], self, self._address, nbytes, st._address, self._device_key)
        out = self._new(self._ptr_t)
        code = self._pool_alloc(out, nbytes, self.handle, st.handle)
        if code:
            return code
        a = self._allocation(self, out[0], nbytes, st.handle)
        if unordered:
            a._unordered = True
        return a

    def _order_after_device(self) -> None:
        """Make the pool's stream wait for the work enqueued so far on every other stream of the device (an
        event recorded on each): a free on it is then ordered after all of it (the device current)."""
        own = self.stream
        for s in self.device._live_streams():
            if s is not own:
                own.wait_event(s.record_event())

    def _retry(self, code: int, nbytes: int, st: GpuStream, unordered: bool = False) -> GpuPoolAllocation:
        """After a failed allocation (``code``): raise, or trim the pool and try once more if out of memory."""
        err = self.api.error(code, "pool_alloc", f"{nbytes} bytes requested")
        if err.kind is not ErrorKind.OUT_OF_MEMORY:
            raise err
        self.trim()  # unused reserved memory back to the driver (the device made current), then once more
        a = self._try(nbytes, st, unordered)
        if isinstance(a, int):
            raise self.api.error(a, "pool_alloc", f"{nbytes} bytes requested (after trimming the pool); the "
                                 f"device has {self.device.descriptor.total_memory} bytes in all")
        return a

    def _attribute(self, attr: int) -> int:
        value = self.api.ffi.new("uint64_t *")
        self.api.check(self.api.pool_get_attribute(self.handle, attr, value), "pool_get_attribute")
        return int(value[0])

    def trim(self) -> int:
        """Return the pool's unused reserved memory to the driver (``pool_trim``); the bytes released."""
        self.device.activate()
        self.api.check(self.api.stream_synchronize(self.stream.handle), "stream_synchronize")
        before = self._attribute(self._reserved)
        self.api.check(self.api.pool_trim(self.handle, 0), "pool_trim")
        return max(0, before - self._attribute(self._reserved))

    def stats(self) -> PoolStats:
        self.device.activate()
        reserved, used = self._attribute(self._reserved), self._attribute(self._used)
        return PoolStats(allocated_bytes=reserved, in_use_bytes=used, cached_bytes=max(0, reserved - used))
