#!/usr/bin/env python
"""Checked raw Vulkan calls (issue 28 item 4): ours (ironaccelerator.backends.vulkan.vulkan's checked wrappers) vs
the PyPI ``vulkan`` package (a cffi ABI-mode binding of the same API, ``make bench-deps``), on the same lavapipe
device, side by side in one process.

Run from the repository root::

    .venv/bin/python bench/bench_vulkan_calls.py [--repeats N] [--target-ms T] [--quick]

Each row's variants are timed by bench/_harness.py (each repeat times every variant once, in a rotated order; a
ratio is the median of the per-repeat ratios), as bench/bench_checked_calls.py does.  Per row:

* ours       the checked wrapper as users call it (the compiled fast path in API mode)
* Python     the Python wrapper of the same function (what ABI mode runs)
* vulkan     the ``vulkan`` package's function of the same name, called as its documentation shows (it returns
             structs as Python objects where ours returns the cffi struct: each does its whole job)

The target: ours / vulkan <= 0.5 (the median over the rows of each row's ratio; every row is printed).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for sub in ("runtime", "generated"):
    sys.path.insert(0, str(ROOT / sub))
sys.path.insert(0, str(ROOT / "bench"))

from bench_checked_calls import PythonWrappers, Row, compiled, measure  # noqa: E402

TARGET = 0.5


def _args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--target-ms", type=float, default=15.0, help="time per sample of one variant")
    ap.add_argument("--quick", action="store_true", help="5 repeats of 5 ms")
    a = ap.parse_args(argv)
    if a.quick:
        a.repeats, a.target_ms = 5, 5.0
    return a


def rows() -> list[Row] | str:
    try:
        import vulkan as pv
    except (ImportError, OSError) as exc:
        return f"the vulkan package is not usable ({exc}): `make bench-deps`"
    from ironaccelerator.backends.vulkan import vulkan as vk

    ffi, S = vk.ffi, vk.VkStructureType
    api13 = (1 << 22) | (3 << 12)
    # ours: one instance and device on lavapipe
    app = ffi.new("VkApplicationInfo *", {"sType": S.VK_STRUCTURE_TYPE_APPLICATION_INFO, "apiVersion": api13})
    inst = vk.vkCreateInstance(ffi.new("VkInstanceCreateInfo *", {
        "sType": S.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, "pApplicationInfo": app}))
    _, n = vk.vkEnumeratePhysicalDevices(inst, 0)
    pds = ffi.new("VkPhysicalDevice[]", n)
    vk.vkEnumeratePhysicalDevices(inst, n, pds)
    pd = next((pds[i] for i in range(n)
               if b"llvmpipe" in ffi.string(vk.vkGetPhysicalDeviceProperties(pds[i]).deviceName)), None)
    if pd is None:
        return "no lavapipe device (mesa-vulkan-drivers)"
    prio = ffi.new("float[]", [1.0])
    qci = ffi.new("VkDeviceQueueCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                                "queueFamilyIndex": 0, "queueCount": 1, "pQueuePriorities": prio})
    tl = ffi.new("VkPhysicalDeviceVulkan12Features *", {"sType": S.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                                        "timelineSemaphore": 1})
    dev = vk.vkCreateDevice(pd, ffi.new("VkDeviceCreateInfo *", {
        "sType": S.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, "pNext": tl, "queueCreateInfoCount": 1,
        "pQueueCreateInfos": qci}))
    fence = vk.vkCreateFence(dev, ffi.new("VkFenceCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO,
                                                                  "flags": 1}))  # signaled
    sti = ffi.new("VkSemaphoreTypeCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                                  "semaphoreType": 1, "initialValue": 7})  # TIMELINE
    sem = vk.vkCreateSemaphore(dev, ffi.new("VkSemaphoreCreateInfo *", {
        "sType": S.VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, "pNext": sti}))
    bci = ffi.new("VkBufferCreateInfo *", {"sType": S.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "size": 4096,
                                           "usage": 0x20, "sharingMode": 0})
    buf = vk.vkCreateBuffer(dev, bci)
    req = vk.vkGetBufferMemoryRequirements(dev, buf)
    props = vk.vkGetPhysicalDeviceMemoryProperties(pd)
    kind = next(t for t in range(props.memoryTypeCount)
                if req.memoryTypeBits & (1 << t) and props.memoryTypes[t].propertyFlags & 0x6 == 0x6)
    mem = vk.vkAllocateMemory(dev, ffi.new("VkMemoryAllocateInfo *", {
        "sType": S.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, "allocationSize": req.size, "memoryTypeIndex": kind}))
    vk.vkBindBufferMemory(dev, buf, mem, 0)

    # the vulkan package: its own instance and device on the same driver
    papp = pv.VkApplicationInfo(sType=pv.VK_STRUCTURE_TYPE_APPLICATION_INFO, apiVersion=api13)
    pinst = pv.vkCreateInstance(pv.VkInstanceCreateInfo(sType=pv.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                                        pApplicationInfo=papp), None)
    ppd = next(p for p in pv.vkEnumeratePhysicalDevices(pinst)
               if "llvmpipe" in pv.vkGetPhysicalDeviceProperties(p).deviceName)
    ptl = pv.VkPhysicalDeviceVulkan12Features(sType=pv.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                              timelineSemaphore=1)
    pq = pv.VkDeviceQueueCreateInfo(sType=pv.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, queueFamilyIndex=0,
                                    queueCount=1, pQueuePriorities=[1.0])
    pdev = pv.vkCreateDevice(ppd, pv.VkDeviceCreateInfo(sType=pv.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, pNext=ptl,
                                                        queueCreateInfoCount=1, pQueueCreateInfos=[pq]), None)
    pfence = pv.vkCreateFence(pdev, pv.VkFenceCreateInfo(sType=pv.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, flags=1),
                              None)
    psti = pv.VkSemaphoreTypeCreateInfo(sType=pv.VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO, semaphoreType=1,
                                        initialValue=7)
    psem = pv.vkCreateSemaphore(pdev, pv.VkSemaphoreCreateInfo(sType=pv.VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO,
                                                               pNext=psti), None)
    pbci = pv.VkBufferCreateInfo(sType=pv.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=4096, usage=0x20, sharingMode=0)
    pbuf = pv.vkCreateBuffer(pdev, pbci, None)
    preq = pv.vkGetBufferMemoryRequirements(pdev, pbuf)
    pmem = pv.vkAllocateMemory(pdev, pv.VkMemoryAllocateInfo(sType=pv.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                                             allocationSize=preq.size, memoryTypeIndex=kind), None)
    pv.vkBindBufferMemory(pdev, pbuf, pmem, 0)

    # same results from both before timing
    assert vk.vkGetSemaphoreCounterValue(dev, sem) == pv.vkGetSemaphoreCounterValue(pdev, psem) == 7
    assert vk.vkGetFenceStatus(dev, fence) == 0 and pv.vkGetFenceStatus(pdev, pfence) in (None, 0)
    assert vk.vkGetBufferMemoryRequirements(dev, buf).size == preq.size

    P = PythonWrappers(vk)
    fences, pfences = [fence], [pfence]

    def create_destroy() -> None:
        vk.vkDestroyBuffer(dev, vk.vkCreateBuffer(dev, bci))

    def create_destroy_py() -> None:
        P["vkDestroyBuffer"](dev, P["vkCreateBuffer"](dev, bci))

    def create_destroy_pv() -> None:
        pv.vkDestroyBuffer(pdev, pv.vkCreateBuffer(pdev, pbci, None), None)

    def map_unmap() -> None:
        vk.vkMapMemory(dev, mem, 0, 4096, 0)
        vk.vkUnmapMemory(dev, mem)

    def map_unmap_py() -> None:
        P["vkMapMemory"](dev, mem, 0, 4096, 0)
        P["vkUnmapMemory"](dev, mem)

    def map_unmap_pv() -> None:
        pv.vkMapMemory(pdev, pmem, 0, 4096, 0)
        pv.vkUnmapMemory(pdev, pmem)

    ref = "vulkan " + getattr(pv, "__version__", "(PyPI)")
    out = [
        Row("vkEnumerateInstanceVersion", "int out", vk.vkEnumerateInstanceVersion, P["vkEnumerateInstanceVersion"],
            pv.vkEnumerateInstanceVersion, ref),
        Row("vkGetDeviceQueue", "handle + 2 ints in, handle out", lambda: vk.vkGetDeviceQueue(dev, 0, 0),
            lambda: P["vkGetDeviceQueue"](dev, 0, 0), lambda: pv.vkGetDeviceQueue(pdev, 0, 0), ref),
        Row("vkGetFenceStatus", "2 handles in, status", lambda: vk.vkGetFenceStatus(dev, fence),
            lambda: P["vkGetFenceStatus"](dev, fence), lambda: pv.vkGetFenceStatus(pdev, pfence), ref),
        Row("vkGetSemaphoreCounterValue", "2 handles in, uint64 out", lambda: vk.vkGetSemaphoreCounterValue(dev, sem),
            lambda: P["vkGetSemaphoreCounterValue"](dev, sem), lambda: pv.vkGetSemaphoreCounterValue(pdev, psem), ref),
        Row("vkWaitForFences", "handle array in (signaled)", lambda: vk.vkWaitForFences(dev, fences, 1, 0),
            lambda: P["vkWaitForFences"](dev, fences, 1, 0), lambda: pv.vkWaitForFences(pdev, 1, pfences, 1, 0), ref),
        Row("vkGetBufferMemoryRequirements", "struct out", lambda: vk.vkGetBufferMemoryRequirements(dev, buf),
            lambda: P["vkGetBufferMemoryRequirements"](dev, buf),
            lambda: pv.vkGetBufferMemoryRequirements(pdev, pbuf), ref),
        Row("vkGetPhysicalDeviceProperties", "struct out (824 bytes)", lambda: vk.vkGetPhysicalDeviceProperties(pd),
            lambda: P["vkGetPhysicalDeviceProperties"](pd), lambda: pv.vkGetPhysicalDeviceProperties(ppd), ref),
        Row("vkCreateBuffer + vkDestroyBuffer", "struct in, handle out; destroy", create_destroy, create_destroy_py,
            create_destroy_pv, ref),
        Row("vkMapMemory + vkUnmapMemory", "pointer out; 2 handles in", map_unmap, map_unmap_py, map_unmap_pv, ref),
    ]
    print(f"ours: {vk.BINDING_MODE} mode; fast paths: "
          + ", ".join(f"{r.name.split(' ')[0]} {compiled(getattr(vk, r.name.split(' ')[0]))}" for r in out))
    return out


def main(argv: list[str]) -> int:
    from _harness import Targets

    args = _args(argv)
    rs = rows()
    if isinstance(rs, str):
        print(f"bench_vulkan_calls: skipped: {rs}")
        return 0
    measured = measure("Vulkan on lavapipe: checked raw calls vs the vulkan package (PyPI)", rs, args)
    targets = Targets()
    ours = [r["ours"] for _, _, r in measured if "ours" in r]
    targets.add("ours / vulkan, median of the rows", statistics.median(ours), "<=", TARGET)
    targets.note("ours / vulkan, worst row", max(ours))
    targets.note("Python wrapper / vulkan, median of the rows",
                 statistics.median(r["python"] for _, _, r in measured if "python" in r))
    targets.print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

