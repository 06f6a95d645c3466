"""The Vulkan binding (specs/vulkan/vulkan.yaml) driven through its checked wrappers on Mesa's lavapipe: an instance,
the physical device and its properties, a device, a buffer with host-visible memory whose bytes round-trip; statuses
that are not errors (VK_INCOMPLETE); bad input refused with ironaccelerator.Error under the Khronos validation layer
(whose messages are counted: none on the good path); and the ``lookup`` resolver kind (global functions through
vkGetInstanceProcAddr(NULL, name), a VkInstance's and a VkDevice's own functions through RESOLVER.scope).

Skips, with the reason, where libvulkan.so.1, lavapipe or the validation layer is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import ironaccelerator
from ironaccelerator import ErrorKind

vk = pytest.importorskip("ironaccelerator.backends.vulkan.vulkan")
from ironaccelerator.backends.vulkan.vulkan import _binding  # noqa: E402

ffi = vk.ffi
S = vk.VkStructureType
VK_API_1_3 = (1 << 22) | (3 << 12)
VALIDATION = "VK_LAYER_KHRONOS_validation"
LAYER_JSON = Path("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json")



def _need_loader() -> None:
    if not vk.has("vkCreateInstance"):
        pytest.skip("libvulkan.so.1 (Debian libvulkan1, with libvulkan-dev) is not installed: "
                    f"{_binding.BINDING.load_error(_binding.BINDING.index['vkCreateInstance'])}")


def _strings(*names: str) -> tuple[Any, list[Any]]:
    keep = [ffi.new("char[]", n.encode()) for n in names]
    return ffi.new("char *[]", keep), keep


class Instance:
    """A VkInstance (optionally with the validation layer and a debug messenger counting its messages), its first
    physical device, and a device with one queue of family 0."""

    def __init__(self, validation: bool = False) -> None:
        _need_loader()
        self.messages: list[str] = []
        self._keep: list[Any] = []
        app = ffi.new("VkApplicationInfo *", {"sType": S.VK_STRUCTURE_TYPE_APPLICATION_INFO,
                                              "apiVersion": VK_API_1_3})
        layers, k1 = _strings(VALIDATION) if validation else (ffi.NULL, [])
        exts, k2 = _strings("VK_EXT_debug_utils") if validation else (ffi.NULL, [])
        self._keep += [app, layers, exts, k1, k2]
        ci = ffi.new("VkInstanceCreateInfo *", {
            "sType": S.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, "pApplicationInfo": app,
            "enabledLayerCount": 1 if validation else 0, "ppEnabledLayerNames": layers,
            "enabledExtensionCount": 1 if validation else 0, "ppEnabledExtensionNames": exts})
        self.instance = vk.vkCreateInstance(ci)
        self.scope = _binding.RESOLVER.scope(_binding.BINDING, self.instance)
        self.messenger = None
        if validation:
            def record(severity: int, types: int, data: Any, user: Any) -> int:
                self.messages.append(ffi.string(data.pMessage).decode(errors="replace"))
                return 1  # VK_TRUE: the layer aborts the call with VK_ERROR_VALIDATION_FAILED_EXT
            on_message = ffi.callback("PFN_vkDebugUtilsMessengerCallbackEXT", record)
            self._keep.append(on_message)
            mci = ffi.new("VkDebugUtilsMessengerCreateInfoEXT *", {
                "sType": S.VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
                "messageSeverity": 0x100 | 0x1000,  # WARNING | ERROR
                "messageType": 0x1 | 0x2 | 0x4, "pfnUserCallback": on_message})
            pm = ffi.new("VkDebugUtilsMessengerEXT *")
            # an extension function: not exported by the loader, only the instance's lookup has it
            self.scope.vkCreateDebugUtilsMessengerEXT(self.instance, mci, ffi.NULL, pm)
            self.messenger = pm[0]
        status, n = vk.vkEnumeratePhysicalDevices(self.instance, 0)
        if n == 0:
            self.close()
            pytest.skip("no Vulkan physical device (Debian mesa-vulkan-drivers provides lavapipe)")
        devices = ffi.new("VkPhysicalDevice[]", n)
        status, n = vk.vkEnumeratePhysicalDevices(self.instance, n, devices)
        self.physical = next((devices[i] for i in range(n) if b"llvmpipe" in
                              ffi.string(vk.vkGetPhysicalDeviceProperties(devices[i]).deviceName)), None)
        if self.physical is None:
            self.close()
            pytest.skip("lavapipe (llvmpipe) is not among the Vulkan devices: install mesa-vulkan-drivers")
        prio = ffi.new("float[]", [1.0])
        qci = ffi.new("VkDeviceQueueCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                                    "queueFamilyIndex": 0, "queueCount": 1,
                                                    "pQueuePriorities": prio})
        dci = ffi.new("VkDeviceCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                                               "queueCreateInfoCount": 1, "pQueueCreateInfos": qci})
        self.device = vk.vkCreateDevice(self.physical, dci)

    def close(self) -> None:
        if getattr(self, "device", None) is not None:
            vk.vkDestroyDevice(self.device)
            self.device = None
        if self.messenger is not None:
            self.scope.vkDestroyDebugUtilsMessengerEXT(self.instance, self.messenger, ffi.NULL)
            self.messenger = None
        vk.vkDestroyInstance(self.instance)


@pytest.fixture
def inst() -> Iterator[Instance]:
    i = Instance()
    yield i
    i.close()


@pytest.fixture
def validated() -> Iterator[Instance]:
    if not LAYER_JSON.exists():
        pytest.skip(f"the Khronos validation layer is not installed ({LAYER_JSON}: Debian vulkan-validationlayers)")
    i = Instance(validation=True)
    yield i
    i.close()


def _buffer_info(size: int) -> Any:
    return ffi.new("VkBufferCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "size": size,
                                            "usage": 0x1 | 0x2 | 0x20,  # TRANSFER_SRC | TRANSFER_DST | STORAGE
                                            "sharingMode": 0})


def _round_trip(i: Instance, payload: bytes) -> bytes:
    """A buffer bound to host-visible, host-coherent memory; ``payload`` written through one mapping, read back
    through another."""
    buf = vk.vkCreateBuffer(i.device, _buffer_info(len(payload)))
    try:
        req = vk.vkGetBufferMemoryRequirements(i.device, buf)
        props = vk.vkGetPhysicalDeviceMemoryProperties(i.physical)
        want = 0x2 | 0x4  # HOST_VISIBLE | HOST_COHERENT
        kind = next(t for t in range(props.memoryTypeCount)
                    if req.memoryTypeBits & (1 << t) and props.memoryTypes[t].propertyFlags & want == want)
        ai = ffi.new("VkMemoryAllocateInfo *", {"sType": S.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                                "allocationSize": req.size, "memoryTypeIndex": kind})
        mem = vk.vkAllocateMemory(i.device, ai)
        try:
            vk.vkBindBufferMemory(i.device, buf, mem, 0)
            p = vk.vkMapMemory(i.device, mem, 0, len(payload), 0)
            ffi.memmove(p, payload, len(payload))
            vk.vkUnmapMemory(i.device, mem)
            p = vk.vkMapMemory(i.device, mem, 0, len(payload), 0)
            out = bytes(ffi.buffer(p, len(payload)))
            vk.vkUnmapMemory(i.device, mem)
            return out
        finally:
            vk.vkFreeMemory(i.device, mem)
    finally:
        vk.vkDestroyBuffer(i.device, buf)


def test_lavapipe_through_the_checked_wrappers(inst: Instance) -> None:
    assert vk.vkEnumerateInstanceVersion() >= VK_API_1_3
    props = vk.vkGetPhysicalDeviceProperties(inst.physical)
    assert "llvmpipe" in ffi.string(props.deviceName).decode()
    assert props.apiVersion >= VK_API_1_3
    # an sType/pNext chain built by the caller: VkPhysicalDeviceProperties2 -> VkPhysicalDeviceVulkan12Properties
    v12 = ffi.new("VkPhysicalDeviceVulkan12Properties *",
                  {"sType": S.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES})
    p2 = ffi.new("VkPhysicalDeviceProperties2 *", {"sType": S.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                                   "pNext": v12})
    vk.vkGetPhysicalDeviceProperties2(inst.physical, p2)
    assert ffi.string(p2.properties.deviceName) == ffi.string(props.deviceName)
    assert v12.maxTimelineSemaphoreValueDifference > 0
    families = vk.vkGetPhysicalDeviceQueueFamilyProperties(inst.physical, 0)
    assert families >= 1
    fam = ffi.new("VkQueueFamilyProperties[]", families)
    vk.vkGetPhysicalDeviceQueueFamilyProperties(inst.physical, families, fam)
    assert fam[0].queueFlags & 0x2  # VK_QUEUE_COMPUTE_BIT
    queue = vk.vkGetDeviceQueue(inst.device, 0, 0)
    assert queue != ffi.NULL
    payload = bytes(range(256)) * 16
    assert _round_trip(inst, payload) == payload
    vk.vkDeviceWaitIdle(inst.device)


def test_incomplete_is_a_status_not_an_error(inst: Instance) -> None:
    """VK_INCOMPLETE from a two-call enumeration (count in, count out) is returned, not raised."""
    status, n = vk.vkEnumerateDeviceExtensionProperties(inst.physical, None, 0)
    assert status == vk.VkResult.VK_SUCCESS and n > 1
    arr = ffi.new("VkExtensionProperties[]", 1)
    status, got = vk.vkEnumerateDeviceExtensionProperties(inst.physical, None, 1, arr)
    assert status == vk.VkResult.VK_INCOMPLETE and got == 1
    assert ffi.string(arr[0].extensionName).startswith(b"VK_")


def test_a_missing_layer_is_unsupported() -> None:
    _need_loader()
    layers, keep = _strings("VK_LAYER_no_such_layer")
    ci = ffi.new("VkInstanceCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                            "enabledLayerCount": 1, "ppEnabledLayerNames": layers})
    with pytest.raises(ironaccelerator.Error) as e:
        vk.vkCreateInstance(ci)
    assert e.value.kind is ErrorKind.UNSUPPORTED and e.value.function == "vkCreateInstance"
    assert "VK_ERROR_LAYER_NOT_PRESENT" in str(e.value)
    err = vk.unchecked.vkCreateInstance(ci, ffi.NULL, ffi.new("VkInstance *"))
    assert err == vk.VkResult.VK_ERROR_LAYER_NOT_PRESENT


def test_the_good_path_under_the_validation_layer_says_nothing(validated: Instance) -> None:
    payload = b"ironaccelerator" * 100
    assert _round_trip(validated, payload) == payload
    assert validated.messages == []


def test_bad_input_under_the_validation_layer_is_an_error(validated: Instance) -> None:
    """A VkBufferCreateInfo of size 0 (VUID-VkBufferCreateInfo-size-00912): the layer reports it, the messenger
    returns VK_TRUE, the call is aborted with VK_ERROR_VALIDATION_FAILED_EXT: INVALID_VALUE, and nothing is created.
    (Without the layer, Vulkan does not check: the same call is undefined behaviour in the driver.)"""
    with pytest.raises(ironaccelerator.Error) as e:
        vk.vkCreateBuffer(validated.device, _buffer_info(0))
    assert e.value.kind is ErrorKind.INVALID_VALUE and e.value.function == "vkCreateBuffer"
    assert "VK_ERROR_VALIDATION_FAILED_EXT" in str(e.value)
    assert any("size" in m for m in validated.messages), validated.messages


def test_lookup_resolver_scopes(inst: Instance) -> None:
    """The ``lookup`` kind: the binding's RESOLVER asks vkGetInstanceProcAddr(NULL, name); a scope bound to the
    device gives the device's own entry points (no loader dispatch), which work like the exported ones; an
    extension function the loader does not export is reachable only through a scope that has it."""
    assert _binding.RESOLVER.kind == "lookup" and _binding.RESOLVER.function == "vkGetInstanceProcAddr"
    assert _binding.RESOLVER.scoped == ("vkGetDeviceProcAddr",)
    dev = _binding.RESOLVER.scope(_binding.BINDING, inst.device, "vkGetDeviceProcAddr")
    exported = ffi.cast("void *", vk.vkGetInstanceProcAddr(None, b"vkCreateBuffer"))
    assert ffi.cast("void *", dev.raw("vkCreateBuffer")) != ffi.NULL
    pb = ffi.new("VkBuffer *")
    assert dev.vkCreateBuffer(inst.device, _buffer_info(64), ffi.NULL, pb) == 0 and pb[0] != ffi.NULL
    req = ffi.new("VkMemoryRequirements *")
    dev.vkGetBufferMemoryRequirements(inst.device, pb[0], req)
    assert req.size >= 64
    dev.vkDestroyBuffer(inst.device, pb[0], ffi.NULL)
    assert exported == ffi.NULL  # a device function is not global: the NULL scope has none (dlsym serves it)
    assert not vk.has("vkCreateDebugUtilsMessengerEXT")  # not exported by libvulkan.so.1
    with pytest.raises(ironaccelerator.Error) as e:
        dev.vkCreateDebugUtilsMessengerEXT  # an instance function, and its extension is not enabled
    assert e.value.kind is ErrorKind.SYMBOL_NOT_FOUND and "vkGetDeviceProcAddr returned NULL" in str(e.value)
    # a status through a scope: every code of the error table raises (the checked wrapper returns its statuses)
    fci = ffi.new("VkFenceCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO})
    fence = vk.vkCreateFence(inst.device, fci)
    try:
        assert vk.vkGetFenceStatus(inst.device, fence) == vk.VkResult.VK_NOT_READY
        with pytest.raises(ironaccelerator.Error) as e:
            dev.vkGetFenceStatus(inst.device, fence)
        assert e.value.kind is ErrorKind.NOT_READY and e.value.code == vk.VkResult.VK_NOT_READY
        assert vk.unchecked.vkGetFenceStatus(inst.device, fence) == dev.raw("vkGetFenceStatus")(inst.device, fence)
    finally:
        vk.vkDestroyFence(inst.device, fence)
    with pytest.raises(ironaccelerator.Error) as e:
        _binding.RESOLVER.scope(_binding.BINDING, ffi.NULL)
    assert e.value.kind is ErrorKind.INVALID_HANDLE
    with pytest.raises(ironaccelerator.Error) as e:
        _binding.RESOLVER.scope(_binding.BINDING, inst.device, "vkCreateBuffer")
    assert e.value.kind is ErrorKind.INVALID_VALUE


def test_a_null_handle_is_refused_before_the_call(inst: Instance) -> None:
    """errors.null_handle: the loader dereferences a dispatchable handle (a NULL VkDevice would crash the process
    before any layer sees it), so the checked wrapper refuses NULL for a handle that is not `nullable`, in the
    compiled fast path and in the Python wrapper alike; the destroys take VK_NULL_HANDLE (declared nullable)."""
    calls: list[Callable[[], Any]] = [
                 lambda: vk.vkCreateBuffer(ffi.NULL, _buffer_info(64)),
                 lambda: vk.vkGetDeviceQueue(ffi.NULL, 0, 0),
                 lambda: vk.vkGetPhysicalDeviceProperties(ffi.NULL),
                 lambda: vk.vkBindBufferMemory(inst.device, ffi.NULL, ffi.NULL, 0)]
    for call in calls:
        with pytest.raises(ironaccelerator.Error) as e:
            call()
        assert e.value.kind is ErrorKind.INVALID_HANDLE and "is NULL: pass a valid handle" in str(e.value)
    with pytest.raises(ironaccelerator.Error) as e:
        vk.vkCreateBuffer(ffi.NULL, _buffer_info(64))
    assert e.value.function == "vkCreateBuffer" and str(e.value).startswith("vkCreateBuffer: device is NULL")
    # API mode: the compiled fast path raised above; the Python wrapper it replaced (ABI mode's) raises the same
    python = vk._python.get("vkCreateBuffer", vk.vkCreateBuffer)
    with pytest.raises(ironaccelerator.Error) as e:
        python(ffi.NULL, _buffer_info(64))
    assert e.value.kind is ErrorKind.INVALID_HANDLE and str(e.value).startswith("vkCreateBuffer: device is NULL")
    vk.vkDestroyBuffer(inst.device, ffi.NULL)  # VK_NULL_HANDLE: valid, nothing to destroy
    vk.vkFreeMemory(inst.device, None)


# ---------------------------------------------------------------- the spec language Vulkan needed, vendor-neutral
# (a declared toy library: no Vulkan header involved)

TOY = """\
vendor: decl
library: toy
backend: CUDA
frontend: declared
declarations: |
  typedef enum { TOY_OK = 0, TOY_BAD_ARG = 2 } ToyStatus;
  typedef struct ToyContext_t *ToyContext;
  typedef void (*ToyVoidFunction)(void);
  ToyVoidFunction toyGetProc(ToyContext context, const char *name);
  ToyStatus toyUse(ToyContext context, int value);
  ToyStatus toyFree(ToyContext context);
resolver:
  kind: lookup
  function: toyGetProc
loader:
  linux: [libtoydecl.so]
errors:
  type: ToyStatus
  success: [TOY_OK]
  default: DRIVER
  null_handle: INVALID_HANDLE
  kinds:
    INVALID_VALUE: [TOY_BAD_ARG]
functions:
  toyFree:
    params:
      context: {direction: in, nullable: true}
  toyGetProc:
    params:
      context: {direction: in, nullable: true}
"""


def _compile_toy(tmp_path: Path, text: str) -> dict[str, str]:
    from ironaccelerator_gen import pipeline
    from test_declared import spec_dir
    return {k: v for k, v in pipeline.compile_specs(spec_dir(tmp_path, text), base=tmp_path).files.items()
            if "/decl/toy/" in k}


def test_lookup_and_null_handle_generate(tmp_path: Path) -> None:
    files = _compile_toy(tmp_path, TOY)
    binding = files["ironaccelerator/backends/decl/toy/_binding.py"]
    assert "RESOLVER = Lookup(" in binding and "function='toyGetProc'" in binding
    assert "null_handle=ErrorKind.INVALID_HANDLE" in binding
    assert "#define IA_RESOLVER IA_RESOLVER_LOOKUP" in files["ironaccelerator/backends/decl/toy/trampolines.c"]
    init = files["ironaccelerator/backends/decl/toy/__init__.py"]
    use = init[init.index("def toyUse("):init.index("def toyUse(") + 900]
    assert "if context == _NULL:" in use  # refused: a handle, not nullable
    free = init[init.index("def toyFree("):init.index("def toyUse(")]
    assert "_NULL if context is None else context" in free and "null_handle" not in free  # nullable: passed on


def test_lookup_and_null_handle_errors_are_located(tmp_path: Path) -> None:
    from ironaccelerator_gen.diagnostics import UserError
    bad_shape = TOY.replace("function: toyGetProc", "function: toyUse")
    with pytest.raises(UserError) as e:
        _compile_toy(tmp_path / "a", bad_shape)
    assert any("'toyUse' does not look like a lookup" in str(d) for d in e.value.diagnostics)
    not_nullable = TOY.replace("  toyGetProc:\n    params:\n      context: {direction: in, nullable: true}\n", "")
    with pytest.raises(UserError) as e:
        _compile_toy(tmp_path / "c", not_nullable)
    assert any("lookup 'toyGetProc' is asked with a NULL scope" in str(d) for d in e.value.diagnostics)
    bad_kind = TOY.replace("null_handle: INVALID_HANDLE", "null_handle: INVALID_HANDEL")
    with pytest.raises(UserError) as e:
        _compile_toy(tmp_path / "b", bad_kind)
    assert any("null_handle 'INVALID_HANDEL' is not an error kind" in str(d) and "INVALID_HANDLE" in str(d)
               for d in e.value.diagnostics)


def test_abi_mode_resolves_alike() -> None:
    """ABI mode (no compiled module: resolvers.Lookup in Python, abi.cdef's ia_pfn_<index> casts) runs the same
    tests as the compiled module (ia_runtime.h's ia_via_lookup)."""
    _need_loader()
    here = Path(__file__).resolve()
    code = ("import sys; sys.modules['ironaccelerator.backends.vulkan.vulkan._cffi'] = None\n"
            "import ironaccelerator.backends.vulkan.vulkan as vk; assert vk.BINDING_MODE == 'abi', vk.BINDING_MODE\n"
            "import pytest\n"
            f"sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-k', 'not abi_mode', {str(here)!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=here.parent,
                          env={**os.environ, "IRONACCEL_REQUIRE_API": "0"}, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout, proc.stdout[-2000:]
