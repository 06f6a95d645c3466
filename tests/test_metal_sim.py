"""The IA Simulated Metal Device (tests/metal_sim: an Objective-C library implementing Metal's selectors on the
CPU; a test fixture, not Apple Metal), driven from Python the way the generated binding will drive Metal on the GNU
Objective-C runtime: cffi in ABI mode, ``sel_registerName`` + ``objc_msg_lookup``, then the IMP cast to the
selector's exact prototype (structs such as MTLSize and NSRange by value, BOOL, uint64_t, double, NSError **).

The GNU runtime, GNUstep Foundation and gcc's Objective-C front-end are real and as installed; the library is built
into a temporary directory for the session.  Every test starts and ends with no live object of the simulator
(``live`` fixture), so a leak or an over-release fails the test that made it.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

cffi = pytest.importorskip("cffi")

from metal_sim import build as metal_sim_build  # noqa: E402

# Values from Apple's documentation of Metal
MTLResourceStorageModeShared = 0 << 4
MTLResourceStorageModePrivate = 2 << 4
MTLResourceStorageModeMemoryless = 3 << 4
MTLCommandBufferStatusNotEnqueued, MTLCommandBufferStatusCommitted = 0, 2
MTLCommandBufferStatusCompleted, MTLCommandBufferStatusError = 4, 5
MTLLibraryErrorCompileFailure = 3
MTLCommandBufferErrorInternal, MTLCommandBufferErrorTimeout, MTLCommandBufferErrorPageFault = 1, 2, 3
MTLGPUFamilyApple7, MTLGPUFamilyCommon1, MTLGPUFamilyCommon3, MTLGPUFamilyMetal3 = 1007, 3001, 3003, 5001
NSNotFound = (1 << 63) - 1  # GNUstep: NSIntegerMax

WAIT_TIMEOUT_S = 1  # how long an unsatisfied event wait lasts in these tests (ia_metal_sim_set_wait_timeout)

CDEF = """
typedef struct objc_object *id;
typedef struct objc_selector *SEL;
typedef void (*IMP)(void);
typedef unsigned char BOOL;
typedef unsigned long NSUInteger;
typedef long NSInteger;
typedef struct { NSUInteger width, height, depth; } MTLSize;
typedef struct { NSUInteger location, length; } NSRange;
id objc_getClass(const char *name);
SEL sel_registerName(const char *name);
IMP objc_msg_lookup(id receiver, SEL op);
BOOL class_respondsToSelector(id cls, SEL op);
const char *object_getClassName(id obj);
"""
SIM_CDEF = """
id MTLCreateSystemDefaultDevice(void);
id MTLCopyAllDevices(void);
long ia_metal_sim_live_objects(const char *class_name);
int ia_metal_sim_class_count(void);
const char *ia_metal_sim_class_name(int i);
long ia_metal_sim_zombie_messages(void);
long ia_metal_sim_validation_errors(void);
void ia_metal_sim_set_wait_timeout(double seconds);
size_t ia_metal_sim_last_validation_error(char *buf, size_t size);
typedef struct {
    void *isa; int flags; int reserved;
    void (*invoke)(void *block, void *pointer, NSUInteger length);
    void *descriptor;
} ia_block_literal;
"""

VECTOR_ADD = """
#include <metal_stdlib>
using namespace metal;
kernel void vector_add(device const float *a [[buffer(0)]], device const float *b [[buffer(1)]],
                       device float *c [[buffer(2)]], constant uint &n [[buffer(3)]],
                       uint i [[thread_position_in_grid]]) {
    if (i < n) c[i] = a[i] + b[i];
}
"""
ALL_KERNELS = VECTOR_ADD + """
kernel void saxpy(constant float &a [[buffer(0)]], device const float *x [[buffer(1)]], device float *y [[buffer(2)]],
                  constant uint &n [[buffer(3)]], uint i [[thread_position_in_grid]]) {
    if (i < n) y[i] = a * x[i] + y[i];
}
[[kernel]] void lcg(device uint *x [[buffer(0)]], constant uint &n [[buffer(1)]], constant uint &rounds [[buffer(2)]],
                    uint i [[thread_position_in_grid]]) {
    if (i >= n) return;
    uint v = x[i];
    for (uint r = 0; r < rounds; ++r) v = v * 1664525u + 1013904223u;
    x[i] = v;
}
"""
BROKEN = """#include <metal_stdlib>
kernel void broken(device float *x [[buffer(0)]]) {
    x[0] = ;
}
"""


class ObjC:
    """The GNU runtime, GNUstep Foundation and the simulator, loaded RTLD_GLOBAL, and messages sent as the
    generated binding sends them: the IMP from objc_msg_lookup cast to the selector's exact prototype."""

    def __init__(self, library: Path) -> None:
        self.ffi = cffi.FFI()
        self.ffi.cdef(CDEF + SIM_CDEF)
        flags = self.ffi.RTLD_GLOBAL | self.ffi.RTLD_NOW
        self.rt = self.ffi.dlopen(metal_sim_build.RUNTIME, flags)
        self.foundation = self.ffi.dlopen(metal_sim_build.FOUNDATION, flags)
        self.sim = self.ffi.dlopen(str(library), flags)
        self.nil = self.ffi.NULL
        self._sels: dict[str, Any] = {}
        self._types: dict[tuple[str, tuple[str, ...]], Any] = {}

    def sel(self, name: str) -> Any:
        s = self._sels.get(name)
        if s is None:
            s = self._sels[name] = self.rt.sel_registerName(name.encode())
        return s

    def send(self, obj: Any, selector: str, returns: str = "void", argtypes: tuple[str, ...] = (), *args: Any) -> Any:
        """``[obj selector...]`` with the prototype ``returns (*)(id, SEL, argtypes...)``."""
        t = self._types.get((returns, argtypes))
        if t is None:
            params = ", ".join(("id", "SEL") + argtypes)
            t = self._types[(returns, argtypes)] = self.ffi.typeof(f"{returns}(*)({params})")
        s = self.sel(selector)
        return self.ffi.cast(t, self.rt.objc_msg_lookup(obj, s))(obj, s, *args)

    def cls(self, name: str) -> Any:
        c = self.rt.objc_getClass(name.encode())
        assert c != self.nil, f"no class {name}"
        return c

    def release(self, *objs: Any) -> None:
        for o in objs:
            self.send(o, "release")

    def retain_count(self, obj: Any) -> int:
        return int(self.send(obj, "retainCount", "NSUInteger"))

    def string(self, s: str) -> Any:
        """An NSString, +1."""
        alloc = self.send(self.cls("NSString"), "alloc", "id")
        return self.send(alloc, "initWithUTF8String:", "id", ("const char *",), s.encode())

    def text(self, nsstring: Any) -> str:
        """An NSString's text (needs a pool: UTF8String autoreleases)."""
        assert nsstring != self.nil
        return str(self.ffi.string(self.send(nsstring, "UTF8String", "const char *")).decode())

    def class_name(self, obj: Any) -> str:
        return str(self.ffi.string(self.rt.object_getClassName(obj)).decode())

    @contextlib.contextmanager
    def pool(self) -> Iterator[None]:
        p = self.send(self.send(self.cls("NSAutoreleasePool"), "alloc", "id"), "init", "id")
        try:
            yield
        finally:
            self.send(p, "release")

    def live(self, class_name: str | None = None) -> int:
        return int(self.sim.ia_metal_sim_live_objects(self.nil if class_name is None else class_name.encode()))

    def live_by_class(self) -> dict[str, int]:
        names = [self.ffi.string(self.sim.ia_metal_sim_class_name(i)).decode()
                 for i in range(self.sim.ia_metal_sim_class_count())]
        return {n: self.live(n) for n in names if self.live(n)}

    def last_validation_error(self) -> str:
        buf = self.ffi.new("char[600]")
        self.sim.ia_metal_sim_last_validation_error(buf, len(buf))
        return str(self.ffi.string(buf).decode())

    # ---- the Metal calls the tests use, each the selector with its prototype from Apple's documentation

    def device(self) -> Any:
        d = self.sim.MTLCreateSystemDefaultDevice()
        assert d != self.nil
        return d

    def buffer(self, device: Any, length: int, options: int = MTLResourceStorageModeShared) -> Any:
        return self.send(device, "newBufferWithLength:options:", "id", ("NSUInteger", "NSUInteger"), length, options)

    def array(self, buf: Any, dtype: Any, count: int) -> Any:
        """A numpy view of a shared buffer's contents (no copy)."""
        p = self.send(buf, "contents", "void *")
        assert p != self.nil
        return np.frombuffer(self.ffi.buffer(p, count * np.dtype(dtype).itemsize), dtype=dtype)

    def library(self, device: Any, source: str, error: Any = None) -> Any:
        src = self.string(source)
        lib = self.send(device, "newLibraryWithSource:options:error:", "id", ("id", "id", "id *"),
                        src, self.nil, self.nil if error is None else error)
        self.release(src)
        return lib

    def pipeline(self, device: Any, library: Any, name: str) -> Any:
        n = self.string(name)
        fn = self.send(library, "newFunctionWithName:", "id", ("id",), n)
        self.release(n)
        assert fn != self.nil, name
        err = self.ffi.new("id *")
        pso = self.send(device, "newComputePipelineStateWithFunction:error:", "id", ("id", "id *"), fn, err)
        self.release(fn)
        assert pso != self.nil and err[0] == self.nil
        return pso

    def set_buffer(self, enc: Any, buf: Any, offset: int, index: int) -> None:
        self.send(enc, "setBuffer:offset:atIndex:", "void", ("id", "NSUInteger", "NSUInteger"), buf, offset, index)

    def set_bytes(self, enc: Any, ctype: str, value: object, index: int) -> None:
        p = self.ffi.new(f"{ctype} *", value)
        self.send(enc, "setBytes:length:atIndex:", "void", ("const void *", "NSUInteger", "NSUInteger"),
                  p, self.ffi.sizeof(ctype), index)

    def size(self, w: int, h: int = 1, d: int = 1) -> Any:
        return self.ffi.new("MTLSize *", (w, h, d))[0]

    def dispatch_threads(self, enc: Any, grid: tuple[int, int, int], group: tuple[int, int, int]) -> None:
        self.send(enc, "dispatchThreads:threadsPerThreadgroup:", "void", ("MTLSize", "MTLSize"),
                  self.size(*grid), self.size(*group))

    def dispatch_groups(self, enc: Any, groups: tuple[int, int, int], group: tuple[int, int, int]) -> None:
        self.send(enc, "dispatchThreadgroups:threadsPerThreadgroup:", "void", ("MTLSize", "MTLSize"),
                  self.size(*groups), self.size(*group))

    def status(self, cb: Any) -> int:
        return int(self.send(cb, "status", "NSUInteger"))

    def error_of(self, err: Any) -> tuple[str, int, str]:
        """An NSError's (domain, code, localizedDescription); needs a pool."""
        domain = self.text(self.send(err, "domain", "id"))
        code = int(self.send(err, "code", "NSInteger"))
        return domain, code, self.text(self.send(err, "localizedDescription", "id"))


@pytest.fixture(scope="session")
def objc(metal_sim: Path) -> ObjC:
    return ObjC(metal_sim)


@pytest.fixture()
def o(objc: ObjC) -> Iterator[ObjC]:
    """The runtime, with no live object of the simulator before and after the test, and no message to a
    deallocated one (an over-release) during it."""
    assert objc.live_by_class() == {}, "an earlier test leaked"
    zombies = objc.sim.ia_metal_sim_zombie_messages()
    yield objc
    assert objc.live_by_class() == {}, "objects of the simulator still live after the test released everything"
    assert objc.sim.ia_metal_sim_zombie_messages() == zombies, "a message to a deallocated object (over-release)"


# ------------------------------------------------------------------ the device


def test_device_properties_and_struct_return(o: ObjC) -> None:
    with o.pool():
        dev = o.device()
        assert o.class_name(dev) == "IASimDevice"
        assert o.text(o.send(dev, "name", "id")) == metal_sim_build.DEVICE_NAME
        assert o.send(dev, "registryID", "uint64_t") == 0x1A51A0000001
        assert o.send(dev, "recommendedMaxWorkingSetSize", "uint64_t") == 4 << 30
        assert o.send(dev, "hasUnifiedMemory", "BOOL") == 1
        assert o.send(dev, "maxBufferLength", "NSUInteger") == 1 << 30
        # MTLSize is 24 bytes, returned by value (memory on x86-64: the hidden pointer of the SysV ABI)
        m = o.send(dev, "maxThreadsPerThreadgroup", "MTLSize")
        assert (m.width, m.height, m.depth) == (1024, 1024, 1024)
        assert o.ffi.sizeof(m) == 24
        fam = ("NSInteger",)
        assert o.send(dev, "supportsFamily:", "BOOL", fam, MTLGPUFamilyCommon1) == 1
        assert o.send(dev, "supportsFamily:", "BOOL", fam, MTLGPUFamilyCommon3) == 1
        assert o.send(dev, "supportsFamily:", "BOOL", fam, MTLGPUFamilyApple7) == 0
        assert o.send(dev, "supportsFamily:", "BOOL", fam, MTLGPUFamilyMetal3) == 0
        # the same device while it lives, +1 each time
        again = o.device()
        assert again == dev and o.retain_count(dev) == 2
        all_devices = o.sim.MTLCopyAllDevices()
        assert o.send(all_devices, "count", "NSUInteger") == 1
        assert o.send(all_devices, "objectAtIndex:", "id", ("NSUInteger",), 0) == dev
        o.release(all_devices, again)
        assert o.live("IASimDevice") == 1
        o.release(dev)
        assert o.live("IASimDevice") == 0


def test_gpu_families_from_the_environment(o: ObjC, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IA_METAL_SIM_FAMILIES", f"{MTLGPUFamilyApple7},{MTLGPUFamilyMetal3}")
    dev = o.device()  # a new device (none lives): it reads the variable
    fam = ("NSInteger",)
    assert o.send(dev, "supportsFamily:", "BOOL", fam, MTLGPUFamilyApple7) == 1
    assert o.send(dev, "supportsFamily:", "BOOL", fam, MTLGPUFamilyMetal3) == 1
    assert o.send(dev, "supportsFamily:", "BOOL", fam, MTLGPUFamilyCommon1) == 0
    o.release(dev)


def test_nil_receiver_and_unknown_selector(o: ObjC) -> None:
    # The GNU runtime answers a message to nil with an IMP that returns zero
    assert o.send(o.nil, "length", "NSUInteger") == 0
    dev = o.device()
    # A selector the simulator does not implement: the binding must ask before sending (sending it would raise an
    # Objective-C exception that ends the process)
    rt = o.rt
    dev_class = o.cls("IASimDevice")
    assert rt.class_respondsToSelector(dev_class, o.sel("newBufferWithLength:options:")) == 1
    assert rt.class_respondsToSelector(dev_class, o.sel("newBufferWithLenght:options:")) == 0
    o.release(dev)


# ------------------------------------------------------------------ compute


def _vector_add(o: ObjC, n: int) -> tuple[Any, Any, Any]:
    """vector_add over n elements on a fresh device; returns (a, b, c) as numpy copies, everything released."""
    with o.pool():
        dev = o.device()
        nbytes = n * 4
        bufs = [o.buffer(dev, nbytes) for _ in range(3)]
        assert all(b != o.nil for b in bufs)
        a, b = o.array(bufs[0], np.float32, n), o.array(bufs[1], np.float32, n)
        a[:] = np.arange(n, dtype=np.float32)
        b[:] = np.arange(n, dtype=np.float32) * 0.5 + 3
        queue = o.send(dev, "newCommandQueue", "id")
        err = o.ffi.new("id *")
        lib = o.library(dev, VECTOR_ADD, err)
        assert lib != o.nil and err[0] == o.nil
        pso = o.pipeline(dev, lib, "vector_add")
        assert o.send(pso, "maxTotalThreadsPerThreadgroup", "NSUInteger") == 1024
        assert o.send(pso, "threadExecutionWidth", "NSUInteger") == 32

        cb = o.send(queue, "commandBuffer", "id")  # +0, autoreleased
        assert o.status(cb) == MTLCommandBufferStatusNotEnqueued
        enc = o.send(cb, "computeCommandEncoder", "id")  # +0, autoreleased
        o.send(enc, "setComputePipelineState:", "void", ("id",), pso)
        for i, buf in enumerate(bufs):
            o.set_buffer(enc, buf, 0, i)
        o.set_bytes(enc, "uint32_t", n, 3)
        o.dispatch_threads(enc, (n, 1, 1), (64, 1, 1))
        o.send(enc, "endEncoding")
        t0 = time.monotonic()
        o.send(cb, "commit")
        assert o.status(cb) >= MTLCommandBufferStatusCommitted
        o.send(cb, "waitUntilCompleted")
        t1 = time.monotonic()
        assert o.status(cb) == MTLCommandBufferStatusCompleted
        assert o.send(cb, "error", "id") == o.nil
        start, end = o.send(cb, "GPUStartTime", "double"), o.send(cb, "GPUEndTime", "double")
        assert t0 <= start <= end <= t1  # the host's CLOCK_MONOTONIC, as Python's time.monotonic on Linux
        result = o.array(bufs[2], np.float32, n).copy()
        ins = a.copy(), b.copy()
        o.release(*bufs, queue, lib, pso, dev)
    return ins[0], ins[1], result


def test_vector_add_1000(o: ObjC) -> None:
    a, b, c = _vector_add(o, 1000)
    np.testing.assert_array_equal(c, a + b)


def test_saxpy_and_lcg_by_threadgroups(o: ObjC) -> None:
    n = 1000
    with o.pool():
        dev = o.device()
        queue = o.send(dev, "newCommandQueue", "id")
        lib = o.library(dev, ALL_KERNELS)
        assert lib != o.nil
        names = o.send(lib, "functionNames", "id")
        assert sorted(o.text(o.send(names, "objectAtIndex:", "id", ("NSUInteger",), i))
                      for i in range(o.send(names, "count", "NSUInteger"))) == ["lcg", "saxpy", "vector_add"]
        saxpy, lcg = o.pipeline(dev, lib, "saxpy"), o.pipeline(dev, lib, "lcg")
        x, y, z = (o.buffer(dev, n * 4) for _ in range(3))
        xv, yv, zv = o.array(x, np.float32, n), o.array(y, np.float32, n), o.array(z, np.uint32, n)
        xv[:] = np.linspace(-1, 1, n, dtype=np.float32)
        yv[:] = 2.0
        zv[:] = np.arange(n, dtype=np.uint32)
        y0, z0 = yv.copy(), zv.copy()

        cb = o.send(queue, "commandBuffer", "id")
        enc = o.send(cb, "computeCommandEncoder", "id")
        o.send(enc, "setComputePipelineState:", "void", ("id",), saxpy)
        o.set_bytes(enc, "float", 1.5, 0)
        o.set_buffer(enc, x, 0, 1)
        o.set_buffer(enc, y, 0, 2)
        o.set_bytes(enc, "uint32_t", n, 3)
        o.dispatch_groups(enc, ((n + 63) // 64, 1, 1), (64, 1, 1))  # 1024 threads for 1000 elements
        o.send(enc, "setComputePipelineState:", "void", ("id",), lcg)
        o.set_buffer(enc, z, 0, 0)
        o.set_bytes(enc, "uint32_t", n, 1)
        o.set_bytes(enc, "uint32_t", 7, 2)
        o.dispatch_groups(enc, (8, 2, 1), (8, 8, 1))  # a 64x16 grid: only gid.x < n counts, rows repeat the work
        o.send(enc, "endEncoding")
        o.send(cb, "commit")
        o.send(cb, "waitUntilCompleted")
        assert o.status(cb) == MTLCommandBufferStatusCompleted
        np.testing.assert_array_equal(yv, np.float32(1.5) * xv + y0)
        want = z0.copy()
        for _ in range(7 * 16):  # 16 rows of the grid each ran lcg over x < 64
            want[:64] = want[:64] * np.uint32(1664525) + np.uint32(1013904223)  # wraps modulo 2**32
        np.testing.assert_array_equal(zv, want)
        o.release(x, y, z, saxpy, lcg, lib, queue, dev)


def test_blit_copy_fill_and_nsrange_argument(o: ObjC) -> None:
    with o.pool():
        dev = o.device()
        queue = o.send(dev, "newCommandQueue", "id")
        src, dst = o.buffer(dev, 256), o.buffer(dev, 256)
        o.array(src, np.uint8, 256)[:] = np.arange(256, dtype=np.uint8)
        cb = o.send(queue, "commandBuffer", "id")
        blit = o.send(cb, "blitCommandEncoder", "id")
        o.send(blit, "copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:", "void",
               ("id", "NSUInteger", "id", "NSUInteger", "NSUInteger"), src, 16, dst, 100, 50)
        rng = o.ffi.new("NSRange *", (200, 30))[0]
        o.send(blit, "fillBuffer:range:value:", "void", ("id", "NSRange", "uint8_t"), dst, rng, 0xAB)
        o.send(blit, "endEncoding")
        o.send(cb, "commit")
        o.send(cb, "waitUntilCompleted")
        assert o.status(cb) == MTLCommandBufferStatusCompleted
        want = np.zeros(256, np.uint8)
        want[100:150] = np.arange(16, 66)
        want[200:230] = 0xAB
        np.testing.assert_array_equal(o.array(dst, np.uint8, 256), want)
        # didModifyRange: takes an NSRange by value; the simulator keeps it (iaSimLastModifiedRange, not Metal)
        last = o.send(dst, "iaSimLastModifiedRange", "NSRange")
        assert (last.location, last.length) == (NSNotFound, 0)
        o.send(dst, "didModifyRange:", "void", ("NSRange",), o.ffi.new("NSRange *", (8, 24))[0])
        last = o.send(dst, "iaSimLastModifiedRange", "NSRange")
        assert (last.location, last.length) == (8, 24)
        assert o.send(dst, "length", "NSUInteger") == 256
        o.release(src, dst, queue, dev)


def test_buffer_storage_modes_and_limits(o: ObjC) -> None:
    dev = o.device()
    private = o.buffer(dev, 64, MTLResourceStorageModePrivate)
    assert private != o.nil and o.send(private, "contents", "void *") == o.nil  # as in Metal
    assert o.send(private, "storageMode", "NSUInteger") == 2
    assert o.buffer(dev, 64, MTLResourceStorageModeMemoryless) == o.nil
    assert o.buffer(dev, 0) == o.nil
    assert o.buffer(dev, (1 << 30) + 1) == o.nil
    data = o.ffi.new("float[4]", [1, 2, 3, 4])
    copy = o.send(dev, "newBufferWithBytes:length:options:", "id", ("const void *", "NSUInteger", "NSUInteger"),
                  data, 16, 0)
    assert list(o.array(copy, np.float32, 4)) == [1, 2, 3, 4]
    o.release(private, copy, dev)


def test_buffer_without_copy_calls_its_deallocator_once(o: ObjC) -> None:
    dev = o.device()
    page = 4096
    raw = o.ffi.new("char[]", 3 * page)
    base = (int(o.ffi.cast("uintptr_t", raw)) + page - 1) // page * page
    aligned = o.ffi.cast("void *", base)
    calls: list[tuple[int, int]] = []

    def deallocate(block: Any, pointer: Any, length: int) -> None:
        calls.append((int(o.ffi.cast("uintptr_t", pointer)), length))

    invoke = o.ffi.callback("void(void *, void *, NSUInteger)", deallocate)
    block = o.ffi.new("ia_block_literal *", {"invoke": invoke})  # the Block ABI's literal, as a caller builds it
    sig = ("void *", "NSUInteger", "NSUInteger", "void *")
    sel = "newBufferWithBytesNoCopy:length:options:deallocator:"
    assert o.send(dev, sel, "id", sig, o.ffi.cast("void *", base + 8), page, 0, o.nil) == o.nil  # not page-aligned
    assert o.send(dev, sel, "id", sig, aligned, page + 1, 0, o.nil) == o.nil  # not whole pages
    without = o.send(dev, sel, "id", sig, aligned, page, 0, o.nil)  # no deallocator
    buf = o.send(dev, sel, "id", sig, aligned, 2 * page, 0, block)
    assert o.send(buf, "contents", "void *") == aligned
    o.ffi.cast("float *", aligned)[0] = 42.0
    assert o.array(without, np.float32, 1)[0] == 42.0  # the caller's memory, no copy
    o.release(without)
    assert calls == []
    o.release(buf)
    assert calls == [(base, 2 * page)]
    o.release(dev)


# ------------------------------------------------------------------ errors


def test_bad_source_sets_nserror_and_returns_nil(o: ObjC) -> None:
    dev = o.device()
    with o.pool():
        err = o.ffi.new("id *")
        lib = o.library(dev, BROKEN, err)
        assert lib == o.nil and err[0] != o.nil
        domain, code, message = o.error_of(err[0])
        assert (domain, code) == ("MTLLibraryErrorDomain", MTLLibraryErrorCompileFailure)
        assert message.startswith("program_source:2:13: error: kernel 'broken'"), message
        assert o.live("IASimError") == 1  # autoreleased (+0), as Metal's NSError ** outputs
    assert o.live("IASimError") == 0  # gone with the pool
    with o.pool():
        assert o.library(dev, "float f(float x) { return x; }", o.ffi.new("id *")) == o.nil  # no kernel
        assert o.library(dev, BROKEN) == o.nil  # a NULL NSError ** is allowed
        lib = o.library(dev, VECTOR_ADD)
        n = o.string("no_such_kernel")
        assert o.send(lib, "newFunctionWithName:", "id", ("id",), n) == o.nil
        err = o.ffi.new("id *")
        assert o.send(dev, "newComputePipelineStateWithFunction:error:", "id", ("id", "id *"), o.nil, err) == o.nil
        assert o.error_of(err[0])[0] == "MTLLibraryErrorDomain"
        o.release(n, lib)
    o.release(dev)


def test_validation_errors_fail_the_command_buffer_without_crashing(o: ObjC) -> None:
    with o.pool():
        dev = o.device()
        queue = o.send(dev, "newCommandQueue", "id")
        lib = o.library(dev, VECTOR_ADD)
        pso = o.pipeline(dev, lib, "vector_add")
        small = o.buffer(dev, 16)  # 4 floats

        def run(encode: Any) -> tuple[int, tuple[str, int, str] | None]:
            cb = o.send(queue, "commandBuffer", "id")
            enc = o.send(cb, "computeCommandEncoder", "id")
            encode(enc)
            o.send(enc, "endEncoding")
            o.send(cb, "commit")
            o.send(cb, "waitUntilCompleted")
            err = o.send(cb, "error", "id")
            return o.status(cb), None if err == o.nil else o.error_of(err)

        before = o.sim.ia_metal_sim_validation_errors()
        def no_pipeline(enc: Any) -> None:
            o.dispatch_threads(enc, (4, 1, 1), (4, 1, 1))

        def bind(enc: Any, n: int) -> None:
            o.send(enc, "setComputePipelineState:", "void", ("id",), pso)
            for i in range(3):
                o.set_buffer(enc, small, 0, i)
            o.set_bytes(enc, "uint32_t", n, 3)

        def unbound(enc: Any) -> None:
            o.send(enc, "setComputePipelineState:", "void", ("id",), pso)
            o.dispatch_threads(enc, (4, 1, 1), (4, 1, 1))

        def group_too_large(enc: Any) -> None:
            bind(enc, 4)
            o.dispatch_threads(enc, (4096, 1, 1), (64, 32, 1))

        def past_the_end(enc: Any) -> None:  # n = 1000 over 4-float buffers
            bind(enc, 1000)
            o.dispatch_threads(enc, (1000, 1, 1), (64, 1, 1))

        def fine(enc: Any) -> None:
            bind(enc, 4)
            o.dispatch_threads(enc, (4, 1, 1), (4, 1, 1))

        status, error = run(no_pipeline)
        assert status == MTLCommandBufferStatusError and error is not None
        assert error[:2] == ("MTLCommandBufferErrorDomain", MTLCommandBufferErrorInternal)
        assert "without a compute pipeline state" in error[2]
        assert o.sim.ia_metal_sim_validation_errors() == before + 1
        status, error = run(unbound)
        assert status == MTLCommandBufferStatusError and error is not None and "[[buffer(0)]]" in error[2]
        status, error = run(group_too_large)
        assert status == MTLCommandBufferStatusError and error is not None and "2048 threads" in error[2]
        # the kernel stops at the end of the buffer: a page fault, not a write past it
        status, error = run(past_the_end)
        assert status == MTLCommandBufferStatusError and error is not None
        assert error[:2] == ("MTLCommandBufferErrorDomain", MTLCommandBufferErrorPageFault)
        assert "vector_add" in error[2]
        # and the same pipeline still works
        assert run(fine) == (MTLCommandBufferStatusCompleted, None)
        # misuse outside a command: counted and described, nothing else
        before = o.sim.ia_metal_sim_validation_errors()
        cb = o.send(queue, "commandBuffer", "id")
        o.send(cb, "waitUntilCompleted")
        assert "not committed" in o.last_validation_error()
        o.send(cb, "commit")
        o.send(cb, "commit")
        assert "already committed" in o.last_validation_error()
        o.send(cb, "waitUntilCompleted")
        assert o.sim.ia_metal_sim_validation_errors() == before + 2
        o.release(small, pso, lib, queue, dev)


# ------------------------------------------------------------------ events and queues


def test_shared_event_orders_two_queues(o: ObjC) -> None:
    n, rounds = 4096, 2000
    with o.pool():
        dev = o.device()
        producer, consumer = o.send(dev, "newCommandQueue", "id"), o.send(dev, "newCommandQueue", "id")
        event = o.send(dev, "newSharedEvent", "id")
        assert o.send(event, "signaledValue", "uint64_t") == 0
        lib = o.library(dev, ALL_KERNELS)
        lcg = o.pipeline(dev, lib, "lcg")
        x, out = o.buffer(dev, n * 4), o.buffer(dev, n * 4)
        o.array(x, np.uint32, n)[:] = np.arange(n, dtype=np.uint32)

        # committed first, on its own queue: copies x to out once the event reaches 1
        waiting = o.send(consumer, "commandBuffer", "id")
        o.send(waiting, "encodeWaitForEvent:value:", "void", ("id", "uint64_t"), event, 1)
        blit = o.send(waiting, "blitCommandEncoder", "id")
        o.send(blit, "copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:", "void",
               ("id", "NSUInteger", "id", "NSUInteger", "NSUInteger"), x, 0, out, 0, n * 4)
        o.send(blit, "endEncoding")
        o.send(waiting, "commit")

        work = o.send(producer, "commandBuffer", "id")
        enc = o.send(work, "computeCommandEncoder", "id")
        o.send(enc, "setComputePipelineState:", "void", ("id",), lcg)
        o.set_buffer(enc, x, 0, 0)
        o.set_bytes(enc, "uint32_t", n, 1)
        o.set_bytes(enc, "uint32_t", rounds, 2)
        o.dispatch_threads(enc, (n, 1, 1), (256, 1, 1))
        o.send(enc, "endEncoding")
        o.send(work, "encodeSignalEvent:value:", "void", ("id", "uint64_t"), event, 1)
        assert o.status(waiting) < MTLCommandBufferStatusCompleted  # it cannot have run: nothing signalled yet
        o.send(work, "commit")
        o.send(waiting, "waitUntilCompleted")
        assert o.status(waiting) == MTLCommandBufferStatusCompleted
        o.send(work, "waitUntilCompleted")  # its signal may come before its own completion
        assert o.status(work) == MTLCommandBufferStatusCompleted
        assert o.send(event, "signaledValue", "uint64_t") == 1
        # the copy saw lcg's results: it ran after the signal
        want = np.arange(n, dtype=np.uint32)
        for _ in range(rounds):
            want = want * np.uint32(1664525) + np.uint32(1013904223)  # wraps modulo 2**32
        np.testing.assert_array_equal(o.array(out, np.uint32, n), want)
        o.release(x, out, lcg, lib, event, producer, consumer, dev)


def test_event_wait_released_by_the_host_or_timed_out(o: ObjC) -> None:
    o.sim.ia_metal_sim_set_wait_timeout(WAIT_TIMEOUT_S)
    with o.pool():
        dev = o.device()
        queue = o.send(dev, "newCommandQueue", "id")
        event = o.send(dev, "newSharedEvent", "id")
        cb = o.send(queue, "commandBuffer", "id")
        o.send(cb, "encodeWaitForEvent:value:", "void", ("id", "uint64_t"), event, 5)
        o.send(cb, "commit")
        time.sleep(0.05)
        assert o.status(cb) < MTLCommandBufferStatusCompleted
        o.send(event, "setSignaledValue:", "void", ("uint64_t",), 5)  # the host signals
        o.send(cb, "waitUntilCompleted")
        assert o.status(cb) == MTLCommandBufferStatusCompleted

        never = o.send(queue, "commandBuffer", "id")
        o.send(never, "encodeWaitForEvent:value:", "void", ("id", "uint64_t"), event, 6)
        t0 = time.monotonic()
        o.send(never, "commit")
        o.send(never, "waitUntilCompleted")
        assert WAIT_TIMEOUT_S * 0.9 <= time.monotonic() - t0 < WAIT_TIMEOUT_S + 5
        assert o.status(never) == MTLCommandBufferStatusError
        assert o.error_of(o.send(never, "error", "id"))[:2] == ("MTLCommandBufferErrorDomain",
                                                                MTLCommandBufferErrorTimeout)
        o.release(event, queue, dev)
    o.sim.ia_metal_sim_set_wait_timeout(10)


def test_queue_released_with_work_in_flight_finishes_it(o: ObjC) -> None:
    with o.pool():
        dev = o.device()
        queue = o.send(dev, "newCommandQueue", "id")
        lib = o.library(dev, ALL_KERNELS)
        lcg = o.pipeline(dev, lib, "lcg")
        x = o.buffer(dev, 1024 * 4)
        cb = o.send(queue, "commandBuffer", "id")
        enc = o.send(cb, "computeCommandEncoder", "id")
        o.send(enc, "setComputePipelineState:", "void", ("id",), lcg)
        o.set_buffer(enc, x, 0, 0)
        o.set_bytes(enc, "uint32_t", 1024, 1)
        o.set_bytes(enc, "uint32_t", 1, 2)
        o.dispatch_threads(enc, (1024, 1, 1), (64, 1, 1))
        o.send(enc, "endEncoding")
        o.send(cb, "commit")
        o.release(queue)  # the queue's dealloc lets committed work complete first
        assert o.status(cb) == MTLCommandBufferStatusCompleted
        assert o.array(x, np.uint32, 1)[0] == 1013904223
        o.release(x, lcg, lib, dev)


# ------------------------------------------------------------------ reference counts


def test_counts_see_a_leak_and_an_over_release(objc: ObjC) -> None:
    """The counters the other tests rely on can fail: a leaked object is live, an extra release is counted.
    (Not the ``o`` fixture: this test over-releases on purpose.)"""
    o = objc
    assert o.live_by_class() == {}
    dev = o.device()
    buf = o.buffer(dev, 64)
    assert o.live_by_class() == {"IASimDevice": 1, "IASimBuffer": 1}
    assert o.retain_count(buf) == 1
    o.send(buf, "retain", "id")
    o.release(buf)
    assert o.live("IASimBuffer") == 1
    zombies = o.sim.ia_metal_sim_zombie_messages()
    o.release(buf)
    assert o.live("IASimBuffer") == 0
    o.release(buf)  # over-release: a message to a zombie, counted instead of touching freed memory
    assert o.sim.ia_metal_sim_zombie_messages() == zombies + 1
    assert o.class_name(buf) == "IASimZombie"
    o.send(buf, "retain", "id")
    assert o.sim.ia_metal_sim_zombie_messages() == zombies + 2
    o.release(dev)
    assert o.live_by_class() == {}


def test_ten_thousand_rounds_leak_nothing(o: ObjC) -> None:
    """10,000 rounds of the whole sequence (device, buffers, queue, event, library, function, pipeline, command
    buffer, encoder, dispatch, signal, commit, wait), everything released each round: nothing stays live and
    nothing is released once too often."""
    rounds = 10_000
    zombies = o.sim.ia_metal_sim_zombie_messages()
    for r in range(rounds):
        with o.pool():
            dev = o.device()
            bufs = [o.buffer(dev, 64) for _ in range(3)]
            o.array(bufs[0], np.float32, 16)[:] = r
            queue = o.send(dev, "newCommandQueue", "id")
            event = o.send(dev, "newSharedEvent", "id")
            lib = o.library(dev, VECTOR_ADD)
            pso = o.pipeline(dev, lib, "vector_add")
            cb = o.send(queue, "commandBuffer", "id")
            enc = o.send(cb, "computeCommandEncoder", "id")
            o.send(enc, "setComputePipelineState:", "void", ("id",), pso)
            for i, b in enumerate(bufs):
                o.set_buffer(enc, b, 0, i)
            o.set_bytes(enc, "uint32_t", 16, 3)
            o.dispatch_threads(enc, (16, 1, 1), (16, 1, 1))
            o.send(enc, "endEncoding")
            o.send(cb, "encodeSignalEvent:value:", "void", ("id", "uint64_t"), event, r + 1)
            o.send(cb, "commit")
            o.send(cb, "waitUntilCompleted")
            assert o.status(cb) == MTLCommandBufferStatusCompleted
            assert o.send(event, "signaledValue", "uint64_t") == r + 1
            assert (o.array(bufs[2], np.float32, 16) == r).all()
            o.release(*bufs, queue, event, lib, pso, dev)
        if r % 1000 == 0:
            assert o.live_by_class() == {}, f"round {r}"
    assert o.live_by_class() == {}
    assert o.sim.ia_metal_sim_zombie_messages() == zombies


def test_from_objective_c_on_several_threads(metal_sim: Path, tmp_path: Path) -> None:
    """check_sim.m: the same calls sent by gcc's own Objective-C code, from 8 threads at once (pairs ordered by
    shared events across their queues), in its own process; no object live and no over-release at the end."""
    exe = metal_sim_build.build_check(tmp_path, metal_sim)
    r = subprocess.run([str(exe), "8", "300"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("ok threads=8 rounds=300 live=0 zombie_messages=0"), r.stdout
