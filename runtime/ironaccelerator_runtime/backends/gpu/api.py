"""The bound functions: :class:`GpuApi`, each function role of a vendor's tables bound to its raw (unchecked) vendor
function, plus the error factory."""

from __future__ import annotations

import importlib
from typing import Any, Callable

from ironaccelerator_runtime import tracing
from ironaccelerator_runtime.backends.gpu.context import _TLS
from ironaccelerator_runtime.backends.gpu.tables import GpuTables, SPEC_ROLES
from ironaccelerator_runtime.errors import Error
from ironaccelerator_runtime.loader import require_function


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
        # its prepared form (_fast._launcher): what a stream binds as its launch and launch_unchecked (see GpuStream)
        self.launcher: Callable[..., Any] | None = getattr(fast, "_launcher", None)
        # the compiled pool allocation (_fast._pool_alloc and the _PoolMemory type in trampolines.c; API mode):
        # pool_alloc and pool_free called in C, the memory a C object: (the allocator, the type) or None
        pool_fast: Any = getattr(self.of("pool_alloc"), "_fast", None) if tables.compiled_pool and \
            not tracing.ENABLED else None
        setup = getattr(pool_fast, "_pool_setup", None)
        self.pool_memory: tuple[Callable[..., Any], type] | None = None if setup is None else (
            pool_fast._pool_alloc, setup(_TLS, Error))
        # the compiled device memory (_fast._devmem_allocator and the _DeviceMemory type in trampolines.c; API mode):
        # alloc and free called in C, the memory a C object: (the allocator maker, the type) or None
        dm_fast: Any = getattr(self.of("alloc"), "_fast", None) if tables.compiled_device_memory and \
            not tracing.ENABLED else None
        dm_setup = getattr(dm_fast, "_devmem_setup", None)
        self.device_memory: tuple[Callable[..., Any], type] | None = None if dm_setup is None else (
            dm_fast._devmem_allocator, dm_setup(_TLS, Error))
        self.device_types: dict[type, type] = {}  # a device allocation class -> its compiled twin
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
        entry = self.tables.functions[role]
        assert entry is not None, role
        require_function(self.where[role][0], entry[1], f"the {self.name} library could not be loaded")


_FFI = importlib.import_module("cffi").FFI()  # casts any cffi pointer to its address


def _address(handle: Any) -> int:
    return handle if isinstance(handle, int) else int(_FFI.cast("uintptr_t", handle))
