"""Run by test_launch_stub.py in a subprocess whose libcuda.so.1 is bench/stub_cuda (STUB_CUDA_RECORD=1):
launches through the CUDA backend and compares the bytes the driver received with pack_args (the reference
packer), for the compiled launch (_fast._launch) and the Python one.  Prints "ok <n>" (launches checked)."""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any, cast

import numpy as np

import ironaccelerator as ia
from ironaccelerator import DType, Error, ErrorKind, KernelLaunch, LaunchDims, Scalar
from ironaccelerator.backends.cuda import _backend as cb

STUB = sys.argv[1]
MAX = 64


class Launch(ctypes.Structure):  # stub_launch_t in bench/stub_cuda/stub_cuda.c
    _fields_ = [("launches", ctypes.c_ulonglong), ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared", ctypes.c_uint), ("nparams", ctypes.c_int), ("size", ctypes.c_size_t * MAX),
                ("data", ctypes.c_ubyte * 4096),
                ("ex_launches", ctypes.c_ulonglong), ("ex_stream", ctypes.c_void_p), ("ex_num_attrs", ctypes.c_uint),
                ("ex_cooperative", ctypes.c_int), ("ex_cluster", ctypes.c_uint * 3),
                ("ipc_gets", ctypes.c_ulonglong), ("ipc_opens", ctypes.c_ulonglong), ("ipc_closes", ctypes.c_ulonglong),
                ("ipc_opened", ctypes.c_ulonglong), ("ipc_closed", ctypes.c_ulonglong), ("ipc_flags", ctypes.c_uint)]


get = ctypes.CDLL(STUB).stub_cuda_last_launch
get.restype = ctypes.POINTER(Launch)
seen = get().contents

SOURCE = r"""
extern "C" __global__ void mixed(const float *a, int i, double d, char c, short s, long long q, unsigned u,
                                 float f, bool b, float2 z, unsigned short h, float *out) {}
extern "C" __global__ void none() {}
"""
dev = cast(cb.CudaDevice, ia.BackendRegistry.default().get(ia.BackendKind.CUDA).open(0))
stream = dev.create_stream()
mod = dev.load_module(cb.compile_source(SOURCE, "compute_90"))
mixed, none = mod.kernel("mixed"), mod.kernel("none")
a, out = dev.alloc(256), dev.alloc(256)
fast = stream._launch_packed
assert (fast is not None) is (cb.CudaBackend.vendor_api().modules["driver"].BINDING_MODE == "api"), fast


def received() -> bytes:
    assert seen.nparams >= 0, seen.nparams
    return bytes(seen.data[:sum(seen.size[:seen.nparams])])


def reference(args: tuple[Any, ...]) -> bytes:
    packed = cb.pack_args(args, cb.CudaBackend.vendor_api().ffi, mixed.param_sizes)
    return b"".join(cb.CudaBackend.vendor_api().ffi.buffer(packed.storage + off, n) for off, n in zip(packed.offsets, packed.sizes))


checked = 0


def launch(kl: KernelLaunch, unchecked: bool = False) -> None:
    global checked
    before = seen.launches
    if unchecked:
        assert stream.launch_unchecked(kl) is None
    else:
        stream.launch(kl)
    assert seen.launches == before + 1
    checked += 1


def args_of(k: int) -> tuple[Any, ...]:
    """Arguments for `mixed` that differ with k (all numpy scalars: the compiled launch packs them)."""
    return (a, np.int32(-k), np.float64(k / 3), np.int8(k % 100), np.int16(-k), np.int64(k << 40), np.uint32(k),
            np.float32(k * 1.5), np.bool_(k % 2), np.complex64(k + 2j), np.float16(k / 7), out)


dims = LaunchDims((3, 2), 128, shared_mem=64)
for mode in ("compiled", "python"):
    stream._launch_packed = fast if mode == "compiled" else None
    for k in range(1, 40):  # new launches, the same launch twice and more (the re-issue), every value new
        args = args_of(k)
        kl = KernelLaunch(mixed, dims, args)
        for _ in range(1 + k % 3):
            launch(kl, unchecked=k % 5 == 0)
            assert received() == reference(args), (mode, k)
            assert (list(seen.grid), list(seen.block), seen.shared) == ([3, 2, 1], [128, 1, 1], 64)
    launch(KernelLaunch(none, dims))
    assert seen.nparams == -1  # no arguments: params NULL
    # launch(kernel, dims, *args) (cuda.core's order): the same launch, its KernelLaunch built in C when compiled
    for k in range(40, 46):
        args = args_of(k)
        before = seen.launches
        if k % 2:
            assert stream.launch_unchecked(mixed, dims, *args) is None
        else:
            stream.launch(mixed, dims, *args)
        assert seen.launches == before + 1 and received() == reference(args), (mode, k)
        assert (list(seen.grid), list(seen.block), seen.shared) == ([3, 2, 1], [128, 1, 1], 64)
        checked += 1
    before = seen.launches
    stream.launch(none, dims)
    assert seen.launches == before + 1 and seen.nparams == -1
    for parts, kind in (((mixed, dims, *args_of(1)[:-1]), ErrorKind.INVALID_VALUE),  # a wrong count
                        ((none, LaunchDims(1, 1 << 20)), ErrorKind.INVALID_VALUE)):  # past the device's limits
        before = seen.launches
        try:
            stream.launch(*parts)
        except Error as e:
            assert e.kind is kind, (mode, e)
        else:
            raise AssertionError(f"launch{parts!r:.60} did not raise")
        assert seen.launches == before  # (refused before the driver)
        got = stream.launch_unchecked(*parts)  # (unchecked: the driver refuses the block, not the runtime)
        assert isinstance(got, Error) and got.kind is kind, (mode, got)
    # Scalars (packed by Python either way) and a mix with numpy scalars
    args = (a, Scalar(-7, DType.I32), Scalar(0.1, DType.F64), np.int8(3), Scalar(2, DType.I16), np.int64(-1),
            Scalar(9, DType.U32), np.float32(2), Scalar(True, DType.BOOL), np.complex64(1j), np.float16(3), out)
    launch(KernelLaunch(mixed, dims, args))
    assert received() == reference(args)
if fast is not None:
    stream._launch_packed = fast
    assert (type(a), np.int32) + (np.float64,) in {k[:3] for k in mixed._layouts}, mixed._layouts.keys()

# pool memory (the compiled _PoolMemory in API mode) is an argument like any allocation, freed or not
pool = cast(cb.CudaStreamOrderedPool, dev.memory_pool())  # the stub supports stream-ordered allocation
for k in range(3):  # the first launch of these types takes the Python path, the next ones the compiled one
    pm = pool.alloc(256, stream)
    args = (pm, *args_of(k + 5)[1:])
    launch(KernelLaunch(mixed, dims, args))
    assert received() == reference(args) and received()[:8] == pm.ptr.to_bytes(8, "little"), k
    pm.free()
    try:
        stream.launch(KernelLaunch(mixed, dims, args))
    except Error as e:
        assert e.kind is ErrorKind.INVALID_HANDLE, e
    else:
        raise AssertionError("launched with freed pool memory")
if fast is not None:
    assert type(pm) in {key[0] for key in mixed._layouts}, "pool memory got a compiled layout"

# errors are the same with the compiled launch: a freed allocation, a wrong count, a wrong size
gone = dev.alloc(64)
bad = KernelLaunch(mixed, dims, (gone, *args_of(1)[1:]))
launch(bad)
gone.free()
for kl, kind in ((bad, ErrorKind.INVALID_HANDLE), (KernelLaunch(mixed, dims, args_of(2)[:-1]), ErrorKind.INVALID_VALUE),
                 (KernelLaunch(mixed, dims, (a, np.int64(1), *args_of(2)[2:])), ErrorKind.INVALID_VALUE),
                 (KernelLaunch(none, dims, (np.int32(1),)), ErrorKind.INVALID_VALUE),
                 (KernelLaunch(mixed, dims), ErrorKind.INVALID_VALUE)):
    before = seen.launches
    try:
        stream.launch(kl)
    except Error as e:
        assert e.kind is kind, (e, kind)
    else:
        raise AssertionError(f"{kl} launched")
    assert seen.launches == before
# unchecked, too: never a freed allocation's address, never a launch with an argument missing or extra (the
# driver would read the missing one from stale memory; issue 10 items 9 and 13), on the compiled launch and the
# Python one, for a new launch and for the re-issue of the last one
for mode in ("compiled", "python"):
    stream._launch_packed = fast if mode == "compiled" else None
    live = dev.alloc(64)
    again = KernelLaunch(mixed, dims, (live, *args_of(4)[1:]))
    launch(again, unchecked=True)
    launch(again, unchecked=True)  # (now re-issued from a packed copy)
    live.free()
    for kl, kind in ((bad, ErrorKind.INVALID_HANDLE), (again, ErrorKind.INVALID_HANDLE),
                     (KernelLaunch(mixed, dims, args_of(2)[:-1]), ErrorKind.INVALID_VALUE),
                     (KernelLaunch(mixed, dims, (*args_of(2), np.int32(0))), ErrorKind.INVALID_VALUE),
                     (KernelLaunch(mixed, dims), ErrorKind.INVALID_VALUE),
                     (KernelLaunch(none, dims, (a,)), ErrorKind.INVALID_VALUE)):
        for _ in range(3):
            before = seen.launches
            err = stream.launch_unchecked(kl)
            assert isinstance(err, Error) and err.kind is kind, (mode, kl, err)
            assert seen.launches == before, (mode, kl)
    assert "takes 12 arguments, 11 given" in str(stream.launch_unchecked(KernelLaunch(mixed, dims, args_of(2)[:-1])))
# the kernel-argument policy (ironaccelerator_runtime.kernel_args), checked and unchecked, compiled and Python
# launch alike: None, a Python number (CUDA knows parameter sizes, not types: refused, with the hint), a value of
# another size than the parameter (3 bytes for `int i`; unchecked too), LocalMemory (UNSUPPORTED: dynamic shared
# memory is LaunchDims.shared_mem here), an allocation of another backend; and, unchecked, dimensions the launch
# function's unsigned ints cannot hold (an Error, not OverflowError) and a kernel of another backend
LocalMemory = ia.LocalMemory
from ironaccelerator_runtime.traits import Allocation  # noqa: E402


class Foreign(Allocation):  # another backend's allocation: no device pointer
    nbytes, kind, device = 64, ia.MemoryKind.DEVICE, dev


policy = [
    ((a, None, *args_of(2)[2:]), ErrorKind.INVALID_VALUE, "argument 1"),
    ((a, 5, *args_of(2)[2:]), ErrorKind.INVALID_VALUE, "np.int32"),
    ((a, *args_of(2)[1:7], 2.5, *args_of(2)[8:]), ErrorKind.INVALID_VALUE, "np.float32"),
    ((a, b"\1\0\0", *args_of(2)[2:]), ErrorKind.INVALID_VALUE, "3 bytes"),
    ((a, LocalMemory(64), *args_of(2)[2:]), ErrorKind.UNSUPPORTED, "shared_mem"),
    ((Foreign(), *args_of(2)[1:]), ErrorKind.INVALID_VALUE, "argument 0"),
    ((None, *args_of(2)[1:]), ErrorKind.INVALID_VALUE, "argument 0"),
]
for mode in ("compiled", "python"):
    stream._launch_packed = fast if mode == "compiled" else None
    for args, kind, text in policy:
        for unchecked in (False, True):
            before = seen.launches
            r: Any = None
            try:
                if unchecked:
                    r = stream.launch_unchecked(KernelLaunch(mixed, dims, args))
                else:
                    stream.launch(KernelLaunch(mixed, dims, args))
            except Error as e:
                assert not unchecked, (mode, args, e)
                r = e
            assert isinstance(r, Error) and r.kind is kind and text in str(r), (mode, unchecked, args, r)
            assert seen.launches == before, (mode, args)
    for bad_dims in (LaunchDims(2**40, 1), LaunchDims(1, 1, shared_mem=2**33)):
        r = stream.launch_unchecked(KernelLaunch(mixed, bad_dims, args_of(2)))
        assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_VALUE, (mode, bad_dims, r)
    r = stream.launch_unchecked(KernelLaunch(object(), dims, args_of(2)))  # type: ignore[arg-type]
    assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_VALUE, (mode, r)
    # a slice of a freed allocation: INVALID_HANDLE, unchecked too, after the slice's types got a layout
    parent = dev.alloc(256)
    piece = parent[0:128]
    launch(KernelLaunch(mixed, dims, (piece, *args_of(2)[1:])))
    launch(KernelLaunch(mixed, dims, (piece, *args_of(3)[1:])), unchecked=True)
    parent.free()
    for unchecked in (False, True):
        before = seen.launches
        r = None
        try:
            if unchecked:
                r = stream.launch_unchecked(KernelLaunch(mixed, dims, (piece, *args_of(4)[1:])))
            else:
                stream.launch(KernelLaunch(mixed, dims, (piece, *args_of(4)[1:])))
        except Error as e:
            r = e
        assert isinstance(r, Error) and r.kind is ErrorKind.INVALID_HANDLE, (mode, unchecked, r)
        assert seen.launches == before, mode
stream._launch_packed = fast
# the driver's status: the stub refuses more than 1024 threads per block (unchecked skips the dims check)
err = stream.launch_unchecked(KernelLaunch(mixed, LaunchDims(1, (64, 32)), args_of(3)))
assert isinstance(err, Error) and err.kind is ErrorKind.INVALID_VALUE, err

# launch options: cuLaunchKernelEx receives the dims, the stream, the attributes and the same argument bytes; plain
# dims never reach it (issue 14 item 5)
ex_before = seen.ex_launches
launch(KernelLaunch(mixed, dims, args_of(3)))
assert seen.ex_launches == ex_before
assert ia.CapabilityFlags.COOPERATIVE_LAUNCH in dev.descriptor.capability.flags  # (the stub: every attribute 1)
assert ia.CapabilityFlags.THREAD_BLOCK_CLUSTERS in dev.descriptor.capability.flags
for opts, attrs, cooperative, cluster in (({"cooperative": True}, 1, 1, [0, 0, 0]),
                                          ({"cluster": (3, 2)}, 1, -1, [3, 2, 1]),
                                          ({"cooperative": True, "cluster": 3}, 2, 1, [3, 1, 1])):
    ex = LaunchDims((3, 2), 128, shared_mem=64, **opts)
    for k, unchecked in ((7, False), (8, True)):
        args = args_of(k)
        before = seen.ex_launches
        launch(KernelLaunch(mixed, ex, args), unchecked=unchecked)
        assert seen.ex_launches == before + 1, opts
        assert received() == reference(args), opts
        assert (list(seen.grid), list(seen.block), seen.shared) == ([3, 2, 1], [128, 1, 1], 64)
        assert seen.ex_stream == stream._address and seen.ex_num_attrs == attrs, opts
        assert (seen.ex_cooperative, list(seen.ex_cluster)) == (cooperative, cluster), opts

# IPC: the handle's 64 bytes go to cuIpcOpenMemHandle by value; free closes (cuIpcCloseMemHandle), never frees
import dataclasses  # noqa: E402

src = dev.alloc(4096)
h = src.export_ipc()
assert seen.ipc_gets == 1 and h.data[:8] == b"stubipc\0" and h.data[8:16] == src.ptr.to_bytes(8, "little")
imp = dev.import_ipc(dataclasses.replace(h, pid=0))  # (as another process would: the stub does not mind)
assert seen.ipc_opens == 1 and seen.ipc_opened == src.ptr == imp.ptr and seen.ipc_flags == 1, seen.ipc_flags
imp.free()
assert seen.ipc_closes == 1 and seen.ipc_closed == src.ptr
src.free()
assert seen.ipc_closes == 1

# threads launching on one stream at once: each launch gets its own bytes
problems: list[str] = []


def worker(t: int) -> None:
    for k in range(200):
        args = args_of(1000 * t + k)
        try:
            stream.launch(KernelLaunch(mixed, dims, args))
        except Exception as e:  # noqa: BLE001
            problems.append(repr(e))


threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
for th in threads:
    th.start()
for th in threads:
    th.join()
assert not problems, problems[:3]

# the prepared launchers (issue 27 items 1 and 2): in API mode a stream's launch and launch_unchecked are
# _fast._launcher objects, which launch their last KernelLaunch again with no Python object made (no call into
# CPython's allocators: bench/count_alloc.c), the bytes still those of pack_args
if fast is not None:
    import gc  # noqa: E402
    from pathlib import Path  # noqa: E402

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import bench_launch_cpu  # noqa: E402

    counter_path = bench_launch_cpu.build_counter()
    assert not isinstance(counter_path, str), counter_path
    counter = ctypes.PyDLL(str(counter_path))
    counter.count_calls.restype = ctypes.c_ulonglong
    live = dev.alloc(64)
    for k, f in ((10, stream.launch_unchecked), (11, stream.launch)):
        args = (live, *args_of(k)[1:])
        kl = KernelLaunch(mixed, dims, args)
        before = seen.launches
        calls, blocks, traced = bench_launch_cpu.allocations(f, kl, 10_000, counter)
        assert seen.launches > before + 30_000 and received() == reference(args), k
        assert (calls, blocks, traced) == (0, 0, 0), (f, calls, blocks, traced)
        checked += 1
    live.free()  # freed after its launch was prepared: refused, checked or not, and never launched
    before = seen.launches
    err = stream.launch_unchecked(kl)
    assert isinstance(err, Error) and err.kind is ErrorKind.INVALID_HANDLE, err
    try:
        stream.launch(kl)
    except Error as e:
        assert e.kind is ErrorKind.INVALID_HANDLE, e
    else:
        raise AssertionError("launched with a freed allocation")
    assert seen.launches == before
    def refused_by_both(kept_u: Any, kept: Any, launch: Any, word: str) -> None:
        """The kept launch methods refuse ``launch`` (INVALID_HANDLE naming ``word``), launching nothing."""
        before = seen.launches
        err = kept_u(launch)
        assert isinstance(err, Error) and err.kind is ErrorKind.INVALID_HANDLE and word in str(err), err
        try:
            kept(launch)
        except Error as e:
            assert e.kind is ErrorKind.INVALID_HANDLE and word in str(e), e
        else:
            raise AssertionError(f"launched although {word}")
        assert seen.launches == before

    # a launch method kept past its stream (the launcher holds the stream weakly: the stream's handle is destroyed
    # with it) refuses, INVALID_HANDLE; kept past its device's close, the closed-device Error, as the methods do
    other = dev.create_stream()
    kept_u, kept = other.launch_unchecked, other.launch
    launch_none = KernelLaunch(none, dims)
    assert kept_u(launch_none) is None and kept(launch_none) is None
    del other
    gc.collect()
    refused_by_both(kept_u, kept, launch_none, "dropped")
    dev2 = cast(cb.CudaDevice, ia.BackendRegistry.default().get(ia.BackendKind.CUDA).open(0))
    s2 = dev2.create_stream()
    k2 = dev2.load_module(cb.compile_source(SOURCE, "compute_90")).kernel("none")
    kept_u, kept = s2.launch_unchecked, s2.launch
    kl2 = KernelLaunch(k2, dims)
    assert kept_u(kl2) is None and kept(kl2) is None  # (prepared)
    dev2.close()
    refused_by_both(kept_u, kept, kl2, "closed")
print("ok", checked)
