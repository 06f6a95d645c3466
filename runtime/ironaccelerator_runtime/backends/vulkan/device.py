"""The Vulkan backend and its devices: the instance (with the Khronos validation layer when asked), physical-device
enumeration, ``Backend.open`` (a ``VkDevice`` with one compute queue), allocation, module loading and deferred
release of memory still used by submitted work."""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Mapping, Sequence

from ironaccelerator._core import BackendKind, CapabilityFlags, ErrorKind, MemoryKind
from ironaccelerator_runtime.errors import Error, as_operation, fail
from ironaccelerator_runtime.traits import (
    _SIZE_MAX, Backend, Device, DeviceDescriptor, DeviceId, DeviceLimits, Event, Result, compile_options,
)
from ironaccelerator_runtime.traits.device import enqueue_tracked_fence

from .tables import API_VERSION, VALIDATION_LAYER, VulkanTables, _Api, _KIND, vendor_key

_DEVICE = MemoryKind.DEVICE
# VkMemoryPropertyFlagBits
_DEVICE_LOCAL, _HOST_VISIBLE, _HOST_COHERENT, _HOST_CACHED = 0x1, 0x2, 0x4, 0x8
# VkBufferUsageFlagBits: TRANSFER_SRC | TRANSFER_DST | STORAGE_BUFFER
_BUFFER_USAGE = 0x1 | 0x2 | 0x20
_QUEUE_COMPUTE = 0x2
_ENV_VALIDATION = "IRONACCEL_VULKAN_VALIDATION"


def _validation_wanted() -> bool:
    return os.environ.get(_ENV_VALIDATION, "") not in ("", "0")


class VulkanBackend(Backend):
    """The Vulkan backend (``BackendKind.VULKAN``): every physical device the Khronos loader (``libvulkan.so.1``)
    lists that has a compute queue; on this project's test machine, Mesa's lavapipe (``llvmpipe``, on the CPU).

    ``tables``: the spec's capability tables (``TABLES`` of ``specs/vulkan/backend.yaml``).  With the environment
    variable ``IRONACCEL_VULKAN_VALIDATION=1`` the instance enables the Khronos validation layer and a debug
    messenger; its warnings and errors are kept in ``validation_messages`` (a list of str).  Adds over
    :class:`~ironaccelerator.Backend`: ``versions()`` (the instance version), ``instance`` (the ``VkInstance``).
    """

    kind = BackendKind.VULKAN
    tables = VulkanTables(flags={}, tiers={}, vendors=())

    def __init__(self, validation: bool | None = None) -> None:
        self.api = _Api()
        self.validation = _validation_wanted() if validation is None else validation
        self.validation_messages: list[str] = []
        self._devices: list[tuple[Any, DeviceDescriptor, int, Any]] | None = None
        self._lock = threading.Lock()
        self.instance: Any = None
        self._keep: list[Any] = []

    def versions(self) -> dict[str, Any]:
        """``{"instance": "1.3.x"}``: the loader's instance version (``vkEnumerateInstanceVersion``)."""
        v = self.api.vk.vkEnumerateInstanceVersion()
        return {"instance": f"{v >> 22 & 0x7F}.{v >> 12 & 0x3FF}.{v & 0xFFF}"}

    def _create_instance(self) -> None:
        api, ffi, vk = self.api, self.api.ffi, self.api.vk
        S = vk.VkStructureType
        app = ffi.new("VkApplicationInfo *", {"sType": S.VK_STRUCTURE_TYPE_APPLICATION_INFO,
                                              "apiVersion": API_VERSION})
        self._keep.append(app)
        info: dict[str, Any] = {"sType": S.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, "pApplicationInfo": app}
        if self.validation:
            names = [ffi.new("char[]", VALIDATION_LAYER.encode())]
            exts = [ffi.new("char[]", b"VK_EXT_debug_utils")]
            layers, extensions = ffi.new("char *[]", names), ffi.new("char *[]", exts)
            self._keep += [names, exts, layers, extensions]
            info.update(enabledLayerCount=1, ppEnabledLayerNames=layers, enabledExtensionCount=1,
                        ppEnabledExtensionNames=extensions)
        ci = ffi.new("VkInstanceCreateInfo *", info)
        self.instance = vk.vkCreateInstance(ci)
        if self.validation:
            from ironaccelerator.backends.vulkan.vulkan import _binding

            messages = self.validation_messages

            def record(severity: int, types: int, data: Any, user: Any) -> int:
                messages.append(ffi.string(data.pMessage).decode("utf-8", "replace"))
                return 0

            cb = ffi.callback("PFN_vkDebugUtilsMessengerCallbackEXT", record)
            self._keep.append(cb)
            mci = ffi.new("VkDebugUtilsMessengerCreateInfoEXT *", {
                "sType": S.VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
                "messageSeverity": 0x100 | 0x1000, "messageType": 0x1 | 0x2 | 0x4, "pfnUserCallback": cb})
            out = ffi.new("VkDebugUtilsMessengerEXT *")
            scope = _binding.RESOLVER.scope(_binding.BINDING, self.instance)
            scope.vkCreateDebugUtilsMessengerEXT(self.instance, mci, ffi.NULL, out)
            self._keep.append((scope, out))

    def _enumerate(self) -> list[tuple[Any, DeviceDescriptor, int, Any]]:
        with self._lock:
            if self._devices is not None:
                return self._devices
            if self.instance is None:
                self._create_instance()
            vk, ffi = self.api.vk, self.api.ffi
            _, n = vk.vkEnumeratePhysicalDevices(self.instance, 0)
            found: list[tuple[Any, DeviceDescriptor, int, Any]] = []
            if n:
                arr = ffi.new("VkPhysicalDevice[]", n)
                _, n = vk.vkEnumeratePhysicalDevices(self.instance, n, arr)
                for i in range(n):
                    pd = arr[i]
                    family = _compute_family(self.api, pd)
                    if family is None:
                        continue
                    props = vk.vkGetPhysicalDeviceProperties(pd)
                    found.append((pd, self._describe(len(found), pd, props), family, props))
            self._devices = found
            return found

    def _describe(self, index: int, pd: Any, props: Any) -> DeviceDescriptor:
        api, ffi, vk = self.api, self.api.ffi, self.api.vk
        name = ffi.string(props.deviceName).decode("utf-8", "replace")
        vendor = self.tables.vendor(name, implementation=vendor_key(int(props.vendorID)))
        names = set(_features(self.api, pd)[0])
        sub = ffi.new("VkPhysicalDeviceSubgroupProperties *",
                      {"sType": vk.VkStructureType.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES})
        sp2 = ffi.new("VkPhysicalDeviceProperties2 *",
                      {"sType": vk.VkStructureType.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": sub})
        vk.vkGetPhysicalDeviceProperties2(pd, sp2)
        if sub.supportedStages & 0x20 and sub.supportedOperations & 0x1:  # COMPUTE stage, BASIC operations
            names.add("subgroups")
        v = int(props.apiVersion)
        version = f"Vulkan {v >> 22 & 0x7F}.{v >> 12 & 0x3FF}.{v & 0xFFF}"
        capability = self.tables.capability(frozenset(names), int(props.deviceType), version)
        mem = vk.vkGetPhysicalDeviceMemoryProperties(pd)
        if _unified_type(mem) is not None:
            capability = type(capability)(flags=capability.flags | CapabilityFlags.UNIFIED_MEMORY,
                                          tier=capability.tier, vendor_version=capability.vendor_version)
        heaps = [int(mem.memoryHeaps[i].size) for i in range(mem.memoryHeapCount)
                 if mem.memoryHeaps[i].flags & 0x1] or [int(mem.memoryHeaps[0].size)]
        lim = props.limits
        p11 = ffi.new("VkPhysicalDeviceMaintenance3Properties *",
                      {"sType": vk.VkStructureType.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES})
        p2 = ffi.new("VkPhysicalDeviceProperties2 *",
                     {"sType": vk.VkStructureType.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": p11})
        vk.vkGetPhysicalDeviceProperties2(pd, p2)
        limits = DeviceLimits(
            max_block=(int(lim.maxComputeWorkGroupSize[0]), int(lim.maxComputeWorkGroupSize[1]),
                       int(lim.maxComputeWorkGroupSize[2])),
            max_threads_per_block=int(lim.maxComputeWorkGroupInvocations),
            max_grid=(int(lim.maxComputeWorkGroupCount[0]), int(lim.maxComputeWorkGroupCount[1]),
                      int(lim.maxComputeWorkGroupCount[2])),
            max_shared_mem=int(lim.maxComputeSharedMemorySize),
            max_alloc=min(int(p11.maxMemoryAllocationSize), max(heaps)),
        )
        return DeviceDescriptor(
            id=DeviceId(BackendKind.VULKAN, index), name=name, vendor=vendor, backend=BackendKind.VULKAN,
            total_memory=max(heaps), compute_units=max(1, os.cpu_count() or 1) if int(props.deviceType) == 4 else 1,
            capability=capability, limits=limits,
        )

    def devices(self) -> list[DeviceDescriptor]:
        return [d[1] for d in self._enumerate()]

    def open(self, device_id: DeviceId | int = 0) -> VulkanDevice:
        index = self._index(device_id)
        devs = self._enumerate()
        if not devs:
            raise fail(ErrorKind.NO_DEVICE, "Backend.open", "no Vulkan device with a compute queue found", "VULKAN")
        if not 0 <= index < len(devs):
            raise fail(ErrorKind.INVALID_VALUE, "Backend.open",
                       f"Vulkan device {index} does not exist ({len(devs)} found)", "VULKAN")
        pd, desc, family, props = devs[index]
        return VulkanDevice(self, pd, desc, family, props)


_CORE_FEATURES = ("shaderFloat64", "shaderInt64", "shaderInt16")
_V12_FEATURES = ("shaderFloat16", "shaderInt8", "shaderBufferInt64Atomics")


def _features(api: _Api, pd: Any) -> tuple[frozenset[str], frozenset[str]]:
    """The shader features a physical device has (VkPhysicalDeviceFeatures / Vulkan12Features names, and
    ``shaderIntegerDotProduct`` where VK_KHR_shader_integer_dot_product is there), and its extensions."""
    vk, ffi = api.vk, api.ffi
    S = vk.VkStructureType
    _, n = vk.vkEnumerateDeviceExtensionProperties(pd, ffi.NULL, 0)
    exts: set[str] = set()
    if n:
        arr = ffi.new("VkExtensionProperties[]", n)
        _, n = vk.vkEnumerateDeviceExtensionProperties(pd, ffi.NULL, n, arr)
        exts = {ffi.string(arr[i].extensionName).decode() for i in range(n)}
    f12 = ffi.new("VkPhysicalDeviceVulkan12Features *",
                  {"sType": S.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES})
    chain: Any = f12
    dot = None
    if "VK_KHR_shader_integer_dot_product" in exts:
        dot = chain = ffi.new("VkPhysicalDeviceShaderIntegerDotProductFeatures *", {
            "sType": S.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES, "pNext": f12})
    f2 = ffi.new("VkPhysicalDeviceFeatures2 *", {"sType": S.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                                 "pNext": chain})
    vk.vkGetPhysicalDeviceFeatures2(pd, f2)
    names = {f for f in _CORE_FEATURES if getattr(f2.features, f)} | {f for f in _V12_FEATURES if getattr(f12, f)}
    if dot is not None and dot.shaderIntegerDotProduct:
        names.add("shaderIntegerDotProduct")
    return frozenset(names), frozenset(exts)


def _compute_family(api: _Api, pd: Any) -> int | None:
    """The first queue family with compute (and timestamps where one has them)."""
    vk, ffi = api.vk, api.ffi
    n = vk.vkGetPhysicalDeviceQueueFamilyProperties(pd, 0)
    fams = ffi.new("VkQueueFamilyProperties[]", n)
    vk.vkGetPhysicalDeviceQueueFamilyProperties(pd, n, fams)
    compute = [i for i in range(n) if fams[i].queueFlags & _QUEUE_COMPUTE]
    timed = [i for i in compute if fams[i].timestampValidBits]
    found = timed or compute
    return found[0] if found else None


def _unified_type(mem: Any) -> int | None:
    want = _DEVICE_LOCAL | _HOST_VISIBLE | _HOST_COHERENT
    for t in range(mem.memoryTypeCount):
        if mem.memoryTypes[t].propertyFlags & want == want:
            return t
    return None


class VulkanDevice(Device):
    """An opened Vulkan device: a ``VkDevice`` with one queue of a compute family (``timelineSemaphore`` and
    ``hostQueryReset`` enabled), shared by the device's streams (submissions under a lock).

    Memory: ``DEVICE`` is a ``VkBuffer`` bound to device-local memory; ``HOST_PINNED`` and ``HOST`` host-visible,
    host-coherent memory (mapped: ``host_view()``); ``UNIFIED`` memory that is both (where the device has such a
    type: ``CapabilityFlags.UNIFIED_MEMORY``).  Freeing memory that submitted work still uses defers its release
    until that work completes.  ``load_module`` takes SPIR-V bytes or GLSL compute source (glslangValidator,
    through the kernel cache).  Foreign memory (``from_dlpack``) and IPC are ``UNSUPPORTED``.
    """

    def __init__(self, backend: VulkanBackend, physical: Any, descriptor: DeviceDescriptor, family: int,
                 props: Any) -> None:
        self.backend = backend
        self.api = api = backend.api
        vk, ffi = api.vk, api.ffi
        S = vk.VkStructureType
        self.physical = physical
        self.descriptor = descriptor
        self.family = family
        self.timestamp_period = float(props.limits.timestampPeriod)
        nf = vk.vkGetPhysicalDeviceQueueFamilyProperties(physical, 0)
        fams = ffi.new("VkQueueFamilyProperties[]", nf)
        vk.vkGetPhysicalDeviceQueueFamilyProperties(physical, nf, fams)
        # whether the queue writes timestamps (Event.elapsed_ms); a family without them: UNSUPPORTED there
        self.timestamps = bool(fams[family].timestampValidBits) and bool(props.limits.timestampComputeAndGraphics)
        self.min_storage_offset = max(1, int(props.limits.minStorageBufferOffsetAlignment))
        self.max_storage_range = int(props.limits.maxStorageBufferRange)
        self.max_push_constants = int(props.limits.maxPushConstantsSize)
        self.memory = vk.vkGetPhysicalDeviceMemoryProperties(physical)
        prio = ffi.new("float[]", [1.0])
        qci = ffi.new("VkDeviceQueueCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                                    "queueFamilyIndex": family, "queueCount": 1,
                                                    "pQueuePriorities": prio})
        # every shader feature the capability flags report is enabled (a flag means its operation works)
        have, exts = _features(api, physical)
        f12 = ffi.new("VkPhysicalDeviceVulkan12Features *", {
            "sType": S.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, "timelineSemaphore": 1,
            "hostQueryReset": 1, **{f: 1 for f in _V12_FEATURES if f in have}})
        chain: Any = f12
        ext_names: list[Any] = []
        if "shaderIntegerDotProduct" in have:
            chain = ffi.new("VkPhysicalDeviceShaderIntegerDotProductFeatures *", {
                "sType": S.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES, "pNext": f12,
                "shaderIntegerDotProduct": 1})
            ext_names.append(ffi.new("char[]", b"VK_KHR_shader_integer_dot_product"))
        enabled = ffi.new("VkPhysicalDeviceFeatures *", {f: 1 for f in _CORE_FEATURES if f in have})
        ext_array = ffi.new("char *[]", ext_names) if ext_names else ffi.NULL
        dci = ffi.new("VkDeviceCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, "pNext": chain,
                                               "queueCreateInfoCount": 1, "pQueueCreateInfos": qci,
                                               "enabledExtensionCount": len(ext_names),
                                               "ppEnabledExtensionNames": ext_array, "pEnabledFeatures": enabled})
        self.handle = vk.vkCreateDevice(physical, dci)
        self.queue = vk.vkGetDeviceQueue(self.handle, family, 0)
        self.queue_lock = threading.Lock()
        self._release_lock = threading.Lock()
        self._pool_fast = getattr(api.vk, "_fast", None)  # (MemoryPool's compiled free list, API mode)
        self._fence_lock = threading.RLock()  # the pool's fences: see _pool_fence
        self._graveyard: list[tuple[list[tuple[Any, int]], Any]] = []  # (waits, release()) deferred frees
        self._streams: weakref.WeakSet[VulkanStream] = weakref.WeakSet()
        self._types = {
            MemoryKind.DEVICE: self._memory_type(_DEVICE_LOCAL, 0),
            MemoryKind.HOST_PINNED: self._memory_type(_HOST_VISIBLE | _HOST_COHERENT, _HOST_CACHED),
            MemoryKind.HOST: self._memory_type(_HOST_VISIBLE | _HOST_COHERENT, _HOST_CACHED),
            MemoryKind.UNIFIED: _unified_type(self.memory),
        }
        if self._types[MemoryKind.DEVICE] is None:
            self._types[MemoryKind.DEVICE] = 0
        self._maker: _BufferMaker | None = None  # (make_buffer's scratch, made on first use)
        # the VkDevice is destroyed when this object, and every stream, kernel and allocation made from it, is gone
        # (each holds the owner: in a garbage cycle their finalizers run in any order)
        self._owner = owner = _DeviceOwner(api, self.handle)
        self._finalizer = weakref.finalize(self, owner.release)
        # not at interpreter exit: allocations still alive then are released later, by their __del__ while
        # modules are torn down, and must find the VkDevice (the process's exit frees it)
        self._finalizer.atexit = False

    # MemoryPool's fences: every recorded command sets _dirty (VulkanStream._recorded) after it is recorded
    _dirty = False
    _fence_events: list[Event] = []  # (replaced, never appended to)

    def _pool_fence(self) -> list[Event]:
        """The events a pool block freed now waits for
        (:func:`~ironaccelerator_runtime.traits.device.enqueue_tracked_fence`: none on an idle device, else an
        event after each stream's work since (``VulkanStream._pool_fence``), under ``_fence_lock``)."""
        return enqueue_tracked_fence(self)

    def _memory_type(self, want: int, prefer: int) -> int | None:
        best = None
        for t in range(self.memory.memoryTypeCount):
            flags = self.memory.memoryTypes[t].propertyFlags
            if flags & want == want:
                if flags & prefer == prefer:
                    return t
                if best is None:
                    best = t
        return best

    def alloc(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> VulkanAllocation:
        return self._checked_alloc(nbytes, kind, self._alloc)

    def alloc_unchecked(self, nbytes: int, kind: MemoryKind = MemoryKind.DEVICE) -> Result[VulkanAllocation]:
        if self._closed:
            return self._closed_error("Device.alloc_unchecked")
        if type(nbytes) is not int or not 0 < nbytes <= _SIZE_MAX or type(kind) is not MemoryKind:
            checked = self._alloc_args_unchecked(nbytes, kind, "Device.alloc_unchecked")
            if isinstance(checked, Error):
                return checked
            nbytes = checked
        r = self._alloc(nbytes, kind, False)
        return as_operation(r, "Device.alloc", "Device.alloc_unchecked") if r.__class__ is Error else r

    def _alloc(self, nbytes: int, kind: MemoryKind, tracked: bool) -> Result[VulkanAllocation]:
        what = "Device.alloc"
        mtype = self._types.get(kind)
        if mtype is None:
            return fail(ErrorKind.UNSUPPORTED, what, f"{kind.name} memory is not supported by this Vulkan device "
                        "(no memory type that is both device-local and host-visible)", "VULKAN")
        limit = self.descriptor.limits.max_alloc
        if limit is not None and nbytes > limit:
            return fail(ErrorKind.INVALID_VALUE, what, f"nbytes={nbytes} is more than the device's largest "
                        f"allocation ({limit} bytes, DeviceLimits.max_alloc)", "VULKAN")
        self._sweep()
        try:
            buf, mem, ptr = make_buffer(self, nbytes, mtype, kind is not _DEVICE)
        except Error as e:
            return e.with_traceback(None)
        self._owner.retain()  # (released by the allocation's release: memory.release_buffer)
        return VulkanAllocation(self, buf, mem, nbytes, kind, ptr, tracked)

    def _defer(self, release: Any) -> None:
        """Run ``release()`` once every stream's submitted work so far is complete (now, where none is pending)."""
        waits: list[tuple[Any, int]] = []
        for s in self._live_streams():
            v = s._flush_for_release()  # type: ignore[attr-defined]
            if v:
                waits.append((s, v))
        if not waits:
            release()
            return
        with self._release_lock:
            self._graveyard.append((waits, release))

    def _sweep(self, wait: bool = False) -> None:
        """Release the deferred frees whose work has completed (all of them, waiting, with ``wait``: after every
        stream was synchronized, so each value waited for was submitted)."""
        if not self._graveyard:
            return
        # the entries are taken out under the lock and released without it: a release, a retired batch, or a
        # garbage collection running meanwhile may drop another allocation, whose release comes back to _defer
        # (under the lock, this thread waited for itself: a hang)
        with self._release_lock:
            graves, self._graveyard = self._graveyard, []
        keep = []
        i = 0
        try:
            while i < len(graves):
                waits, release = graves[i]
                if all(s._reached(v, wait) for s, v in waits):
                    i += 1
                    release()
                else:
                    keep.append(graves[i])
                    i += 1
        finally:
            keep += graves[i:]  # (what an exception left, kept)
            if keep:
                with self._release_lock:
                    self._graveyard[:0] = keep

    def create_stream(self) -> VulkanStream:
        self._check_open("Device.create_stream")
        return VulkanStream(self)

    def load_module(self, source_or_binary: str | bytes, *, options: Sequence[str] = (),
                    defines: Mapping[str, Any] | None = None, include_dirs: Sequence[str | os.PathLike[str]] = (),
                    name_expressions: Sequence[str] = (), cache: bool = True) -> VulkanModule:
        """SPIR-V bytes, or GLSL compute source compiled by glslangValidator (kept in the kernel cache).

        Args:
            source_or_binary: a SPIR-V module (``bytes`` starting with the magic number 0x07230203) or GLSL
                compute-shader source (``str``, or UTF-8 ``bytes``).
            options: glslangValidator flags (``"-g"``); ``defines`` (``-D``) and ``include_dirs`` (``-I``) too.
            name_expressions: must be empty (GLSL has no templates).
            cache: use the kernel cache for compiled GLSL (default True).

        Returns:
            The ``VulkanModule``; its kernels are the SPIR-V's GLCompute entry points (GLSL: ``main``, and any
            parameterless ``void`` function of the source, compiled as the entry point on first use).

        Raises:
            Error: ``ErrorKind.COMPILE_FAILED`` with glslang's log; ``ErrorKind.INVALID_VALUE`` for bytes that
                are not a well-formed SPIR-V module (or GLSL text), bad option types; ``ErrorKind.UNSUPPORTED`` for
                ``name_expressions``, or options given with SPIR-V; ``ErrorKind.INVALID_HANDLE`` after ``close``.

        Backends:
            Vulkan (see :meth:`Device.load_module` for the others).
        """
        opts = compile_options(options, defines, include_dirs, name_expressions, _KIND)
        if opts.name_expressions:
            raise fail(ErrorKind.UNSUPPORTED, "Device.load_module", "name_expressions are not supported by the "
                       "Vulkan backend (GLSL has no templates)", "VULKAN")
        self._check_open("Device.load_module")
        return VulkanModule(self, source_or_binary, opts, cache)

    def _cache_identity(self) -> str:
        d = self.descriptor
        return f"{d.name}\n{d.capability.vendor_version}"

    def synchronize(self) -> None:
        self._check_open("Device.synchronize")
        for s in self._live_streams():
            s.synchronize()
        self._sweep(wait=True)

    def _close(self) -> None:
        # the VkDevice itself is destroyed when this object is collected: every allocation, stream and module
        # made from it holds it, so their handles stay valid until they are released
        self._sweep(wait=True)


class _DeviceOwner:
    """A ``VkDevice`` with a count of what still uses it: the device object, its streams, kernels and allocations
    each hold one reference (``retain``/``release``); the last release destroys it."""

    def __init__(self, api: _Api, handle: Any) -> None:
        self.api = api
        self.handle = handle
        self.refs = 1
        self.lock = threading.Lock()

    def retain(self) -> None:
        with self.lock:
            self.refs += 1

    def release(self) -> None:
        with self.lock:
            self.refs -= 1
            last = self.refs == 0
        if last:
            api = self.api
            api.raw.vkDeviceWaitIdle(self.handle)
            api.raw.vkDestroyDevice(self.handle, api.ffi.NULL)


class _BufferMaker:
    """A device's scratch structures for ``make_buffer`` (the allocation hot path: no struct built, no enum looked
    up per call), used under its lock."""

    def __init__(self, device: VulkanDevice) -> None:
        api, ffi = device.api, device.api.ffi
        S = api.vk.VkStructureType
        self.lock = threading.Lock()
        self.info = ffi.new("VkBufferCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                                                     "usage": _BUFFER_USAGE})
        self.alloc = ffi.new("VkMemoryAllocateInfo *", {"sType": S.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO})
        self.req = ffi.new("VkMemoryRequirements *")
        self.buf = ffi.new("VkBuffer *")
        self.mem = ffi.new("VkDeviceMemory *")
        self.ptr = ffi.new("void **")
        raw = api.raw
        self.create, self.destroy = raw.vkCreateBuffer, raw.vkDestroyBuffer
        self.requirements, self.allocate, self.free = raw.vkGetBufferMemoryRequirements, raw.vkAllocateMemory, \
            raw.vkFreeMemory
        self.bind, self.map = raw.vkBindBufferMemory, raw.vkMapMemory
        self.null = ffi.NULL
        coherent = _HOST_VISIBLE | _HOST_COHERENT
        self.coherent = [device.memory.memoryTypes[t].propertyFlags & coherent == coherent
                         for t in range(device.memory.memoryTypeCount)]


def make_buffer(device: VulkanDevice, nbytes: int, mtype: int, mapped: bool) -> tuple[Any, Any, Any]:
    """A ``VkBuffer`` of ``nbytes`` bound to new memory of type ``mtype``, and its host pointer where the memory is
    mapped: asked (``mapped``), or host-visible and host-coherent anyway (then copies to and from the host may use
    the mapping; lavapipe's DEVICE memory is)."""
    m = device._maker
    if m is None:
        m = device._maker = _BufferMaker(device)
    api, h, null = device.api, device.handle, m.null
    with m.lock:
        m.info.size = nbytes
        code = m.create(h, m.info, null, m.buf)
        if code < 0:
            raise api.error(code, "vkCreateBuffer", f"{nbytes} bytes")
        buf = m.buf[0]
        req = m.req
        m.requirements(h, buf, req)
        if not req.memoryTypeBits & (1 << mtype):
            flags = device.memory.memoryTypes[mtype].propertyFlags
            mtype = next((t for t in range(32) if req.memoryTypeBits & (1 << t)
                          and device.memory.memoryTypes[t].propertyFlags & flags == flags), mtype)
        m.alloc.allocationSize = req.size
        m.alloc.memoryTypeIndex = mtype
        code = m.allocate(h, m.alloc, null, m.mem)
        if code < 0:
            m.destroy(h, buf, null)
            raise api.error(code, "vkAllocateMemory", f"{nbytes} bytes")
        mem = m.mem[0]
        code = m.bind(h, buf, mem, 0)
        ptr = None
        if code >= 0 and (mapped or m.coherent[mtype]):
            code = m.map(h, mem, 0, req.size, 0, m.ptr)
            ptr = m.ptr[0]
        if code < 0:
            m.destroy(h, buf, null)
            m.free(h, mem, null)
            raise api.error(code, "vkMapMemory" if ptr is not None else "vkBindBufferMemory")
    return buf, mem, ptr


# Imported last: these modules import this one.
from .memory import VulkanAllocation
from .module import VulkanModule
from .stream import VulkanStream
