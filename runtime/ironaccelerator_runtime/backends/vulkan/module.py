"""Vulkan modules (SPIR-V, given or compiled from GLSL by glslangValidator through the kernel cache) and their
kernels: a compute pipeline per entry point and block size, whose descriptor-set layout and push-constant range
come from the SPIR-V reflection (:mod:`.spirv`).

A launch's arguments: positions ``0 .. B+P-1`` for a kernel of ``B`` storage buffers and ``P`` push-constant
members; a storage buffer of ``binding = b`` takes position ``b``, and the push-constant members fill the remaining
positions in declaration order.  Buffers bound ``0 .. B-1`` therefore come first, then the push constants; a
shader that binds its buffers from 1 takes a scalar first (``saxpy(a, x, y, n)``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
import weakref
from typing import Any

from ironaccelerator._core import ErrorKind
from ironaccelerator_runtime.errors import Error, fail
from ironaccelerator_runtime.kernel_args import param_of
from ironaccelerator_runtime.traits import CompileOptions, Kernel, KernelAttributes, Module, compiler_log

from . import spirv
from .device import VulkanDevice

MODULE_FORMATS: tuple[str, ...] = ("source", "spirv")
GLSLANG = "glslangValidator"
_TARGET = "vulkan1.2"
# push-constant member (kind, size) -> the C type kernel_args checks values against
_C_TYPES = {("float", 4): "float", ("float", 8): "double", ("uint", 4): "unsigned int", ("int", 4): "int",
            ("uint", 8): "unsigned long", ("int", 8): "long"}
_NO_DIMS = object()  # a kernel's launch-dims cache key before its first launch (dims None must not match it)


def glslang() -> str | None:
    """The glslangValidator executable (``IRONACCEL_GLSLANG`` or on PATH), or None."""
    return os.environ.get("IRONACCEL_GLSLANG") or shutil.which(GLSLANG)


def compile_glsl(source: bytes, opts: CompileOptions, entry: str | None = None) -> tuple[bytes, str]:
    """GLSL compute source -> (SPIR-V, log), by glslangValidator in a temporary directory; ``entry``: a
    parameterless function of the source compiled as the entry point of that name."""
    exe = glslang()
    if exe is None:
        raise fail(ErrorKind.LIBRARY_NOT_FOUND, "Device.load_module", "glslangValidator was not found (Debian "
                   "glslang-tools; or set IRONACCEL_GLSLANG): GLSL cannot be compiled (SPIR-V bytes can be loaded)",
                   "VULKAN")
    with tempfile.TemporaryDirectory(prefix="ia-glsl-") as tmp:
        src, out = os.path.join(tmp, "kernel.comp"), os.path.join(tmp, "kernel.spv")
        with open(src, "wb") as f:
            f.write(source)
        cmd = [exe, "-V", "--target-env", _TARGET, "-S", "comp", *opts.flags()]
        if entry is not None:
            cmd += ["-e", entry, "--source-entrypoint", entry]
        cmd += ["-o", "kernel.spv", "kernel.comp"]  # (relative: the log names kernel.comp, not the directory)
        p = subprocess.run(cmd, capture_output=True, cwd=tmp)
        log = "\n".join(line for line in (p.stdout + p.stderr).decode("utf-8", "replace").splitlines()
                        if line.strip() and line.strip() != "kernel.comp")
        if p.returncode != 0 or not os.path.exists(out):
            raise fail(ErrorKind.COMPILE_FAILED, "Device.load_module", "glslangValidator refused the GLSL source; "
                       f"build log (exit status {p.returncode}):\n{log}", "VULKAN")
        with open(out, "rb") as f:
            return f.read(), log


class VulkanKernel(Kernel):
    """A GLCompute entry point: its descriptor-set layout (one storage buffer per binding of set 0), pipeline
    layout (with the push-constant block) and a compute pipeline per block size (the shader's own local size; any
    other block only where the local size is specialization constants: ``layout(local_size_x_id = 0, ...)``).

    ``signature`` says what a launch passes, in order (see the module's doc for the rule)."""

    def __init__(self, module: VulkanModule, name: str, code: bytes, info: spirv.Reflection) -> None:
        device = module.device
        api, ffi, raw = device.api, device.api.ffi, device.api.raw
        S = api.vk.VkStructureType
        self.module = module
        self.name = name
        self.entry = info.entry_points[name]
        if any(b.set != 0 for b in info.buffers):
            raise fail(ErrorKind.UNSUPPORTED, "Module.kernel", f"kernel {name!r} uses descriptor sets other than 0: "
                       "bind every storage buffer in set 0", "VULKAN")
        for m in info.push:
            if m.kind == "other":
                raise fail(ErrorKind.UNSUPPORTED, "Module.kernel", f"push-constant member {m.name!r} of kernel "
                           f"{name!r} is not a 32/64-bit int, uint or float scalar", "VULKAN")
        n = len(info.buffers) + len(info.push)
        positions: list[Any] = [None] * n
        for b in info.buffers:
            if b.binding >= n or positions[b.binding] is not None:
                raise fail(ErrorKind.UNSUPPORTED, "Module.kernel", f"storage buffer {b.name!r} of kernel {name!r} has "
                           f"binding {b.binding}: a kernel of {n} arguments binds its buffers below {n}, once each "
                           "(the binding is the argument's position)", "VULKAN")
            positions[b.binding] = ("buffer", b.name or f"binding {b.binding}")
        members = iter(info.push)
        for i in range(n):
            if positions[i] is None:
                m = next(members)
                positions[i] = ("value", param_of(_C_TYPES[(m.kind, m.size)], f"{_C_TYPES[(m.kind, m.size)]} {m.name}"),
                                m.offset)
        self.slots: tuple[Any, ...] = tuple(positions)
        self.num_args = n
        self.bindings = [b.binding for b in info.buffers]
        self.push_size = info.push_size if info.push else 0
        # push constants: packed when the members lie one after the other from 0 in declaration order (then a
        # launch joins the values' bytes); else each value goes at its member's offset
        self._offsets = [m.offset for m in info.push]
        at = 0
        packed = True
        for m in info.push:
            packed = packed and m.offset == at
            at = m.offset + m.size
        self._packed = packed and at == self.push_size
        buffer_positions = [i for i, s in enumerate(positions) if s[0] == "buffer"]
        self._buffer_positions = buffer_positions
        self._last: tuple[Any, Any] = (_NO_DIMS, None)  # (the last LaunchDims seen, its pipeline)
        self.signature = ", ".join(s[1] if s[0] == "buffer" else s[1].text for s in positions)
        h = device.handle
        self._device = device
        sci = ffi.new("VkShaderModuleCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                                     "codeSize": len(code),
                                                     "pCode": ffi.cast("uint32_t *", ffi.from_buffer(code))})
        self._code = code
        out = ffi.new("VkShaderModule *")
        api.check(raw.vkCreateShaderModule(h, sci, ffi.NULL, out), "vkCreateShaderModule", f"kernel {name!r}")
        self.shader = out[0]
        binds = ffi.new("VkDescriptorSetLayoutBinding[]", [
            {"binding": b, "descriptorType": 7, "descriptorCount": 1, "stageFlags": 0x20} for b in self.bindings] or 1)
        lci = ffi.new("VkDescriptorSetLayoutCreateInfo *", {
            "sType": S.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, "bindingCount": len(self.bindings),
            "pBindings": binds})
        lout = ffi.new("VkDescriptorSetLayout *")
        api.check(raw.vkCreateDescriptorSetLayout(h, lci, ffi.NULL, lout), "vkCreateDescriptorSetLayout")
        self.set_layout = lout[0]
        rng = ffi.new("VkPushConstantRange *", {"stageFlags": 0x20, "offset": 0, "size": self.push_size})
        layouts = ffi.new("VkDescriptorSetLayout[1]", [self.set_layout])
        pli = ffi.new("VkPipelineLayoutCreateInfo *", {
            "sType": S.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, "setLayoutCount": 1, "pSetLayouts": layouts,
            "pushConstantRangeCount": 1 if self.push_size else 0, "pPushConstantRanges": rng})
        pout = ffi.new("VkPipelineLayout *")
        api.check(raw.vkCreatePipelineLayout(h, pli, ffi.NULL, pout), "vkCreatePipelineLayout")
        self.layout = pout[0]
        self._pipelines: dict[tuple[int, int, int], Any] = {}
        self._lock = threading.Lock()
        device._owner.retain()
        self._finalizer = weakref.finalize(self, _drop_kernel, weakref.ref(device), device._owner, self.shader,
                                           self.set_layout, self.layout, self._pipelines)
        self._finalizer.atexit = False  # (as the device's)

    def _buffers_of(self, args: Any, keys: list[Any]) -> list[tuple[Any, int, int]]:
        """(VkBuffer, offset, range) of each storage-buffer argument (already checked), in binding order."""
        max_range = self._device.max_storage_range
        out = []
        for i in self._buffer_positions:
            a = args[i]
            base = int(getattr(a, "offset", 0) or 0)
            root = a
            while not hasattr(root, "memory"):
                root = getattr(root, "block", None) or getattr(root, "parent", None) or getattr(root, "_parent")
            out.append((root.buffer, base, min(a.nbytes, max_range)))
        return out

    @property
    def attributes(self) -> KernelAttributes:
        lim = self._device.descriptor.limits
        return KernelAttributes(max_threads_per_block=lim.max_threads_per_block, preferred_multiple=1,
                                static_shared_mem=0, local_mem=0)

    def _pipeline(self, block: tuple[int, int, int], what: str) -> Any:
        p = self._pipelines.get(block)
        if p is not None:
            return p
        e = self.entry
        if block != e.local_size and not e.specializable:
            raise fail(ErrorKind.INVALID_VALUE, what, f"kernel {self.name!r} has a fixed local size {e.local_size} "
                       f"(layout(local_size_x = ...)), so its block must be that, not {block}: declare "
                       "layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in the shader to "
                       "launch other blocks", "VULKAN")
        with self._lock:
            p = self._pipelines.get(block)
            if p is None:
                p = self._create_pipeline(block)
                self._pipelines[block] = p
        return p

    def _create_pipeline(self, block: tuple[int, int, int]) -> Any:
        device = self._device
        api, ffi, raw = device.api, device.api.ffi, device.api.raw
        S = api.vk.VkStructureType
        e = self.entry
        name = ffi.new("char[]", e.name.encode())
        spec = ffi.NULL
        keep = []
        if e.specializable:
            entries = ffi.new("VkSpecializationMapEntry[3]", [
                {"constantID": e.spec_ids[i], "offset": 4 * i, "size": 4} for i in range(3)])
            data = ffi.new("uint32_t[3]", list(block))
            spec = ffi.new("VkSpecializationInfo *", {"mapEntryCount": 3, "pMapEntries": entries, "dataSize": 12,
                                                      "pData": data})
            keep += [entries, data]
        ci = ffi.new("VkComputePipelineCreateInfo *", {
            "sType": S.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            "stage": {"sType": S.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, "stage": 0x20,
                      "module": self.shader, "pName": name, "pSpecializationInfo": spec},
            "layout": self.layout})
        out = ffi.new("VkPipeline *")
        api.check(raw.vkCreateComputePipelines(device.handle, ffi.NULL, 1, ci, ffi.NULL, out),
                  "vkCreateComputePipelines", f"kernel {self.name!r}, block {block}")
        return out[0]


def _drop_kernel(device_ref: Any, owner: Any, shader: Any, set_layout: Any, layout: Any,
                 pipelines: dict[Any, Any]) -> None:
    """A dropped kernel: its pipelines and layouts are destroyed once the work submitted so far (and the batches
    being recorded) completed, as a freed allocation's memory is (``VulkanDevice._defer``); a stream's batch may
    still bind them (vkDestroyPipeline on a pipeline in use: lavapipe runs it destroyed).  With the device object
    gone, so are its streams: at once."""
    device = device_ref()
    if device is None:
        _destroy_kernel(owner, shader, set_layout, layout, pipelines)
    else:
        device._defer(lambda: _destroy_kernel(owner, shader, set_layout, layout, pipelines))


def _destroy_kernel(owner: Any, shader: Any, set_layout: Any, layout: Any, pipelines: dict[Any, Any]) -> None:
    api, h = owner.api, owner.handle
    raw, null = api.raw, api.ffi.NULL
    for p in pipelines.values():
        raw.vkDestroyPipeline(h, p, null)
    raw.vkDestroyPipelineLayout(h, layout, null)
    raw.vkDestroyDescriptorSetLayout(h, set_layout, null)
    raw.vkDestroyShaderModule(h, shader, null)
    owner.release()


class VulkanModule(Module):
    """SPIR-V (given, or compiled from GLSL: ``from_cache`` says whether the kernel cache had it), reflected
    (``reflection``).  Its kernels are its GLCompute entry points; a GLSL module's are also its parameterless
    ``void`` functions, each compiled as the entry point of its name on first use (``--source-entrypoint``)."""

    def __init__(self, device: VulkanDevice, source: str | bytes, opts: CompileOptions, cache: bool) -> None:
        self.device = device
        self._opts = opts
        self._cache = cache
        self._source: bytes | None = None
        self._codes: dict[str, tuple[bytes, spirv.Reflection]] = {}
        if isinstance(source, (bytes, bytearray, memoryview)) and spirv.is_spirv(bytes(source[:4])):
            if opts:
                raise fail(ErrorKind.UNSUPPORTED, "Device.load_module", "compile options, defines and include_dirs "
                           "apply to GLSL source, not to a SPIR-V module", "VULKAN")
            code = bytes(source)
            self.reflection = spirv.reflect(code)
            for name in self.reflection.entry_points:
                self._codes[name] = (code, self.reflection)
            self.build_log = ""
            return
        if isinstance(source, str):
            src = source.encode("utf-8", "surrogateescape")
        elif isinstance(source, (bytes, bytearray, memoryview)):
            src = bytes(source)
            try:
                src.decode("utf-8")
            except UnicodeDecodeError:
                raise fail(ErrorKind.INVALID_VALUE, "Device.load_module", "the bytes are neither a SPIR-V module "
                           "(magic number 0x07230203) nor UTF-8 GLSL source", "VULKAN") from None
        else:
            raise TypeError(f"Device.load_module: source must be str or bytes, not {type(source).__name__}")
        if b"\0" in src.rstrip(b"\0"):
            raise fail(ErrorKind.INVALID_VALUE, "Device.load_module", "the source holds a NUL character before its "
                       "end", "VULKAN")
        self._source = src.rstrip(b"\0")
        code, log, cached = self._compile(None)
        self.from_cache = cached
        self.reflection = spirv.reflect(code)
        compiler_log(self, log, "VULKAN", cached=cached)
        for name in self.reflection.entry_points:
            self._codes[name] = (code, self.reflection)

    def _compile(self, entry: str | None) -> tuple[bytes, str, bool]:
        """The SPIR-V of the GLSL source (with ``entry`` as the entry point), from the kernel cache if it has it."""
        assert self._source is not None
        from ironaccelerator_runtime import kernel_cache

        opts = self._opts
        store = kernel_cache.default_cache() if self._cache else None
        key = None
        if store is not None:
            key = kernel_cache.cache_key(backend="VULKAN", source=self._source, options=opts.options,
                                         defines=dict(opts.defines), include_dirs=opts.include_dirs,
                                         device=f"glslang {_TARGET}", extra=f"entry={entry}")
            entry_ = store.get_entry(key)
            if entry_ is not None and spirv.is_spirv(entry_[1]):
                log = entry_[0].get("log")
                return entry_[1], log if isinstance(log, str) else "", True
        deps = kernel_cache.scan_dependencies(self._source, opts.options, opts.include_dirs) if key else None
        code, log = compile_glsl(self._source, opts, entry)
        if store is not None and key is not None:
            store.put_entry(key, {"log": log} if log else {}, code, deps)
        return code, log, False

    def kernel(self, name: str) -> VulkanKernel:
        what = "Module.kernel"
        self.device._check_open(what)
        if not isinstance(name, str):
            raise TypeError(f"{what}: name must be a str, not {type(name).__name__} ({name!r})")
        got = self._codes.get(name)
        if got is None and self._source is not None and re.match(r"^[A-Za-z_]\w*$", name) and re.search(
                rb"\bvoid\s+" + name.encode() + rb"\s*\(\s*(void)?\s*\)\s*\{", self._source):
            code, _, _ = self._compile(name)
            got = self._codes[name] = (code, spirv.reflect(code))
        if got is None or name not in got[1].entry_points:
            raise fail(ErrorKind.INVALID_VALUE, what, f"the module has no kernel {name!r} (its entry points: "
                       f"{', '.join(sorted(self._codes)) or 'none'}; in GLSL, a kernel is a parameterless void "
                       "function)", "VULKAN")
        return VulkanKernel(self, name, got[0], got[1])
