"""Code objects and kernels: :class:`GpuModule` and :class:`GpuKernel` (parameter info, attributes, argument plans)."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from ironaccelerator._core import ErrorKind
from ironaccelerator_runtime.backends.gpu.api import GpuApi, _address
from ironaccelerator_runtime.backends.gpu.args import _ArgPlan, _MAX_PLANS, _arg_plan, _c_string
from ironaccelerator_runtime.backends.gpu.context import _destroy
from ironaccelerator_runtime.errors import fail
from ironaccelerator_runtime.traits import Kernel, KernelAttributes, Module, check_size

if TYPE_CHECKING:  # (and bound at run time by __init__.py: the module defining it imports this one)
    from ironaccelerator_runtime.backends.gpu.device import GpuDevice


_MAX_PARAMS = 4096
_NOT_FOUND = 500  # CUDA_ERROR_NOT_FOUND, hipErrorNotFound: what cuModuleGetFunction / hipModuleGetFunction answer to an
# unknown kernel name


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
            if code == _NOT_FOUND:  # no such symbol: a bad name, INVALID_VALUE named Module.kernel (the operation
                # called) as on every backend, the driver's code kept; not the spec's INVALID_HANDLE of
                # CUDA_ERROR_NOT_FOUND, which names a handle that was not found
                raise fail(ErrorKind.INVALID_VALUE, "Module.kernel", f"no kernel {name!r} in this module ({err}); "
                           "a C++ kernel needs extern \"C\" or its name expression in "
                           "load_module(name_expressions=)", api, code=code)
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
            raise fail(ErrorKind.INVALID_VALUE, what, f"block_threads={threads} is not an int", api)
        shared = check_size(dynamic_shared_mem, "dynamic_shared_mem", what, api.name, minimum=0)
        self.module.device._check_open(what)  # (INVALID_HANDLE, as every operation on a closed device's kernel)
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
