"""OpenCL modules (programs built from OpenCL C source, or loaded from a binary) and their kernels, with the
kernels' argument metadata (``clGetKernelArgInfo``)."""

from __future__ import annotations

import threading
import weakref
from typing import Any

from ironaccelerator._core import ErrorKind
from ironaccelerator_runtime.errors import Error, fail
from ironaccelerator_runtime.kernel_args import Param, arg_error, param_of
from ironaccelerator_runtime.traits import CompileOptions, Kernel, KernelAttributes, Module, compiler_log

from .device import OpenCLDevice
from .tables import _Api, _BUILD_OPTIONS


# What this runtime can load (OpenCL C source): specs/opencl/backend.yaml's module_formats are chosen from these (the
# generator reads this literal)
MODULE_FORMATS: tuple[str, ...] = ("source",)
_UNSET: Any = object()  # OpenCLKernel._objs of a slot with no cached argument object (never `is` an argument)


class OpenCLKernel(Kernel):
    """A ``cl_kernel``.  Its argument state lives in the driver; ``_keys``/``_objs`` mirror what was last set
    (per index: an allocation's serial or a by-value argument's bytes, and the immutable argument object
    itself) so a launch only calls ``clSetKernelArg`` for arguments that changed.  Call :meth:`forget_args`
    after setting arguments on ``handle`` directly."""

    def __init__(self, module: OpenCLModule, name: str) -> None:
        api = module.device.api
        module.device._check_open("Module.kernel")
        if not isinstance(name, str):
            raise TypeError(f"Module.kernel: name must be a str, not {type(name).__name__} ({name!r})")
        try:
            cname = name.encode("utf-8")
        except UnicodeEncodeError as e:
            raise fail(ErrorKind.INVALID_VALUE, "Module.kernel", f"kernel name {name!r} is not valid UTF-8 ({e})",
                       "OPENCL") from None
        if b"\0" in cname:
            raise fail(ErrorKind.INVALID_VALUE, "Module.kernel", f"kernel name {name!r} contains a NUL character",
                       "OPENCL")
        self.module: OpenCLModule = module
        self.name = name
        err = api.ffi.new("cl_int *")
        self.handle: Any = api.raw.clCreateKernel(module.program, cname, err)
        if err[0] == api.cl.CL_INVALID_KERNEL_NAME:  # no such kernel: named Module.kernel (the operation called) as
            # on every backend, the driver's code kept
            raise fail(ErrorKind.INVALID_VALUE, "Module.kernel", f"no kernel {name!r} in this program (clCreateKernel: "
                       "CL_INVALID_KERNEL_NAME)", "OPENCL", code=int(err[0]))
        if err[0] != 0:
            raise api.error(err[0], "clCreateKernel", f"kernel {name!r}")
        self._finalizer = weakref.finalize(self, api.raw.clReleaseKernel, self.handle)
        self.num_args: int = api.info_int("clGetKernelInfo", self.handle, api.cl.CL_KERNEL_NUM_ARGS, "cl_uint")
        self._lock: threading.Lock = threading.Lock()  # clSetKernelArg + enqueue must not interleave between threads
        self._api = api
        self._set_arg = api.raw.clSetKernelArg
        self._mem = api.ffi.new("cl_mem *")  # scratch for buffer arguments (used under _lock)
        self._sizeof_mem = api.ffi.sizeof("cl_mem")
        self._null = api.ffi.NULL
        self._keys: list[Any] = [None] * self.num_args
        self._objs: list[Any] = [_UNSET] * self.num_args
        self._slots = _arg_slots(api, self.handle, self.num_args)
        # the by-value parameters' types (clGetKernelArgInfo CL_KERNEL_ARG_TYPE_NAME): what a Python number
        # converts to and which numpy scalars fit (kernel_args); None where the runtime keeps no argument info
        self._params = _arg_params(api, self.handle, self.num_args) if self._slots is not None else None

    @property
    def attributes(self) -> KernelAttributes:
        # ``clGetKernelWorkGroupInfo`` on the module's device (OpenCL reports no register count or constant use).
        api, cl = self._api, self._api.cl
        dev = self.module.device.handle
        wg = "clGetKernelWorkGroupInfo"
        return KernelAttributes(
            max_threads_per_block=api.info_int(wg, self.handle, cl.CL_KERNEL_WORK_GROUP_SIZE, "size_t", dev),
            preferred_multiple=api.info_int(wg, self.handle, cl.CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                                            "size_t", dev),
            static_shared_mem=api.info_int(wg, self.handle, cl.CL_KERNEL_LOCAL_MEM_SIZE, "cl_ulong", dev),
            local_mem=api.info_int(wg, self.handle, cl.CL_KERNEL_PRIVATE_MEM_SIZE, "cl_ulong", dev))

    def _slot_error(self, i: int, a: Any, function: str) -> Error:
        """INVALID_VALUE: argument ``i`` is not what its parameter (by its address qualifier) takes."""
        slot = self._slots[i] if self._slots is not None else 0
        what = {_POINTER_SLOT: "a buffer (an Allocation of this device)",
                _LOCAL_SLOT: "__local memory: pass LocalMemory(nbytes), the bytes per work-group",
                _VALUE_SLOT: "a value (a numpy scalar, a Scalar, bytes or a Python number)"}.get(slot, "?")
        return arg_error(f"argument {i} of kernel {self.name!r}", f"the parameter takes {what}, not "
                         f"{type(a).__name__} ({a!r:.60})", "OPENCL", function)

    def forget_args(self) -> None:
        """Drop the kernel's cached argument state, so that the next launch sets every argument again.

        A launch sets (``clSetKernelArg``) only the arguments that changed since this kernel's last launch; call
        this after changing the ``cl_kernel``'s arguments outside this runtime (through the raw binding).

        Raises:
            Error: never.

        Backends:
            OpenCL only.
        """
        with self._lock:
            self._keys = [None] * self.num_args
            self._objs = [_UNSET] * self.num_args


_POINTER_SLOT, _VALUE_SLOT, _LOCAL_SLOT = 1, 2, 3


def _arg_slots(api: _Api, kernel: Any, n: int) -> tuple[int, ...] | None:
    """Per argument: a __global/__constant pointer (a buffer), a by-value argument, or __local memory; None
    where the runtime keeps no argument info (programs from binaries)."""
    cl = api.cl
    slots = []
    out = api.ffi.new("cl_kernel_arg_address_qualifier *")
    size = api.ffi.sizeof("cl_kernel_arg_address_qualifier")
    for i in range(n):
        if api.raw.clGetKernelArgInfo(kernel, i, cl.CL_KERNEL_ARG_ADDRESS_QUALIFIER, size, out, api.ffi.NULL):
            return None
        q = int(out[0])
        if q == cl.CL_KERNEL_ARG_ADDRESS_LOCAL:
            slots.append(_LOCAL_SLOT)
        elif q in (cl.CL_KERNEL_ARG_ADDRESS_GLOBAL, cl.CL_KERNEL_ARG_ADDRESS_CONSTANT):
            slots.append(_POINTER_SLOT)
        else:  # __private: a value, unless its type is a pointer (not legal for kernel arguments)
            slots.append(_VALUE_SLOT)
    return tuple(slots)


def _arg_params(api: _Api, kernel: Any, n: int) -> tuple[Param | None, ...] | None:
    """Per argument, its type as a kernel_args.Param (by-value arguments; None for the others): from the type
    name (``float``, ``uint``: known; ``float4``, a typedef: kind and size unknown), named "<type> <name>"."""
    cl, fn = api.cl, "clGetKernelArgInfo"
    out: list[Param | None] = []
    try:
        for i in range(n):
            type_name = api.info_str(fn, kernel, cl.CL_KERNEL_ARG_TYPE_NAME, i)
            arg_name = api.info_str(fn, kernel, cl.CL_KERNEL_ARG_NAME, i)
            out.append(None if type_name.endswith("*") else param_of(type_name, f"{type_name} {arg_name}".strip()))
    except Error:
        return None
    return tuple(out)


class OpenCLModule(Module):
    """A built ``cl_program``: from source, or from the kernel cache's program binary (``from_cache``)."""

    def __init__(self, device: OpenCLDevice, source: str | bytes, opts: CompileOptions | None = None,
                 cache: bool = True) -> None:
        api = device.api
        self.device = device
        if isinstance(source, str):
            src = source.encode("utf-8", "surrogateescape")
        elif isinstance(source, (bytes, bytearray, memoryview)):
            src = bytes(source)
        else:
            raise TypeError(f"Device.load_module: source must be str or bytes, not {type(source).__name__}")
        nul = src.rstrip(b"\0").find(b"\0")
        if nul >= 0:  # clCreateProgramWithSource would read up to it: the rest silently gone
            raise fail(ErrorKind.INVALID_VALUE, "Device.load_module",
                       f"the source holds a NUL character at byte {nul}, "
                       "before its end (the compiler would stop reading there)", "OPENCL")
        opts = opts or CompileOptions()
        # -cl-kernel-arg-info: each kernel's argument kinds, so a checked launch refuses a value in a buffer slot
        options = b" ".join([_BUILD_OPTIONS, *(f.encode("utf-8", "surrogateescape") for f in opts.flags())])
        from ironaccelerator_runtime import kernel_cache  # (on first use: opening a device need not import it)

        store = kernel_cache.default_cache() if cache else None
        key = None
        if store is not None:
            key = kernel_cache.cache_key(backend="OPENCL", source=src, options=opts.options,
                                         defines=dict(opts.defines), include_dirs=opts.include_dirs,
                                         device=device._cache_identity(), extra=_BUILD_OPTIONS.decode())
            entry = store.get_entry(key)  # None too when a header it read changed since
            if entry is not None and self._from_binary(entry[1], options):
                self.from_cache = True
                log = entry[0].get("log")  # the compile's own log, kept with the entry
                if isinstance(log, str) and log:
                    compiler_log(self, log, "OPENCL", cached=True)
                return
        # what the build may read besides the source, recorded before it builds (kernel_cache.scan_dependencies)
        deps = kernel_cache.scan_dependencies(src, opts.options, opts.include_dirs) if key is not None else None
        self._from_source(src, options)
        if store is not None and key is not None:
            binary = self._binary()
            if binary:
                store.put_entry(key, {"log": self.build_log} if self.build_log else {}, binary, deps)

    def _adopt(self, prog: Any) -> None:
        self.program = prog
        self._finalizer = weakref.finalize(self, self.device.api.raw.clReleaseProgram, prog)

    def _build(self, options: bytes) -> None:
        device, api, ffi = self.device, self.device.api, self.device.api.ffi
        devs = ffi.new("cl_device_id[1]", [device.handle])
        code = api.raw.clBuildProgram(self.program, 1, devs, options, ffi.NULL, ffi.NULL)
        if code != 0:
            log = api.info_str("clGetProgramBuildInfo", self.program, api.cl.CL_PROGRAM_BUILD_LOG, device.handle)
            e = api.error(code, "clBuildProgram", f"options {options.decode('utf-8', 'replace')!r}; build log:\n" + log)
            if code in (api.cl.CL_BUILD_PROGRAM_FAILURE, api.cl.CL_INVALID_BUILD_OPTIONS):
                e.kind = ErrorKind.COMPILE_FAILED
            raise e
        # a build that succeeded may still have said something (#warning, -Werror not given): the user sees it
        try:
            log = api.info_str("clGetProgramBuildInfo", self.program, api.cl.CL_PROGRAM_BUILD_LOG, device.handle)
        except Error:
            log = ""
        compiler_log(self, log, "OPENCL")

    def _from_source(self, src: bytes, options: bytes) -> None:
        device, api, ffi = self.device, self.device.api, self.device.api.ffi
        err = ffi.new("cl_int *")
        text = ffi.new("char[]", src)  # owned here until the call returns: the runtime copies the source
        strings = ffi.new("char *[1]", [text])
        lengths = ffi.new("size_t[1]", [len(src)])
        prog = api.raw.clCreateProgramWithSource(device.context, 1, strings, lengths, err)
        del text
        api.check(err[0], "clCreateProgramWithSource")
        self._adopt(prog)
        self._build(options)

    def _from_binary(self, binary: bytes, options: bytes) -> bool:
        """Build the program from a cached binary; False (and no program kept) if the runtime refuses it."""
        device, api, ffi = self.device, self.device.api, self.device.api.ffi
        err, status = ffi.new("cl_int *"), ffi.new("cl_int *")
        data = ffi.new("unsigned char[]", binary)
        ptrs = ffi.new("unsigned char *[1]", [data])
        lengths = ffi.new("size_t[1]", [len(binary)])
        devs = ffi.new("cl_device_id[1]", [device.handle])
        prog = api.raw.clCreateProgramWithBinary(device.context, 1, devs, lengths, ptrs, status, err)
        if err[0] != 0 or status[0] != 0 or not prog:
            if prog:
                api.raw.clReleaseProgram(prog)
            return False
        code = api.raw.clBuildProgram(prog, 1, devs, options, ffi.NULL, ffi.NULL)
        if code != 0:
            api.raw.clReleaseProgram(prog)
            return False
        self._adopt(prog)
        return True

    def _binary(self) -> bytes | None:
        """The built program's binary for the device (``CL_PROGRAM_BINARIES``), or None if it has none."""
        api, ffi, cl = self.device.api, self.device.api.ffi, self.device.api.cl
        size = ffi.new("size_t[1]")
        if api.raw.clGetProgramInfo(self.program, cl.CL_PROGRAM_BINARY_SIZES, ffi.sizeof("size_t"), size, ffi.NULL):
            return None
        n = int(size[0])
        if n == 0:
            return None
        buf = ffi.new("unsigned char[]", n)
        ptrs = ffi.new("unsigned char *[1]", [buf])
        if api.raw.clGetProgramInfo(self.program, cl.CL_PROGRAM_BINARIES, ffi.sizeof("unsigned char *"), ptrs,
                                    ffi.NULL):
            return None
        return bytes(ffi.buffer(buf, n))

    def kernel(self, name: str) -> OpenCLKernel:
        return OpenCLKernel(self, name)

