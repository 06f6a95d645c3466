"""The CUDA backend's launch path against a driver that records what it receives.

bench/stub_cuda is a libcuda.so.1 built from the real cuda.h (see bench/bench_launch_cpu.py); with
STUB_CUDA_RECORD=1 its cuLaunchKernel keeps each parameter's bytes.  launch_stub_child.py launches through
the backend in a subprocess that loads it, in API mode with the compiled launch (``_fast._launch``) and with
the Python packer, and checks every launch's bytes against pack_args, the reference.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable


def test_every_launch_delivers_the_bytes_pack_args_makes(stub_child: Callable[[str], int]) -> None:
    assert stub_child("launch_stub_child.py") > 150  # launches checked


def test_graphs_record_the_compiled_launches_and_refuse_a_replay_after_a_free(stub_child: Callable[[str], int]) -> None:
    """graph_stub_child.py: a capturing stream's prepared launchers (one kept from before the capture too) are
    paused so that their launches record their allocations, and resumed after; a replay after an allocation of
    a launch, a slice, a host or rect copy was freed is INVALID_HANDLE and reaches no driver; a graph keeps what
    it uses from being freed when dropped."""
    assert stub_child("graph_stub_child.py") == 3 + 4 + 4 + 2


def test_the_stub_finds_a_kernel_once_per_module(stub_cuda: tuple[Path, dict[str, str]]) -> None:
    """bench/stub_cuda returns at once: cuModuleGetFunction / cuLibraryGetKernel give the handle found before for a
    name (as the driver does: one per kernel of a module), not a new allocation with the PTX parsed again on every
    call (~850 ns, which was most of bench_checked_calls.py's cuModuleGetFunction row on either side); a name the
    image lacks is still CUDA_ERROR_NOT_FOUND, and each module keeps its own kernels."""
    import cffi

    stub, _ = stub_cuda
    ffi = cffi.FFI()
    ffi.cdef("int cuModuleLoadData(void **m, const void *image); int cuModuleUnload(void *m);"
             "int cuModuleGetFunction(void **f, void *m, const char *name);"
             "int cuLibraryLoadData(void **lib, const void *code, void *a, void *b, unsigned int n, void *c, void *d,"
             "                      unsigned int m);"
             "int cuLibraryGetKernel(void **k, void *lib, const char *name);")
    lib = ffi.dlopen(str(stub))
    ptx = (b".version 8.0\n.target sm_90\n.address_size 64\n"
           b".visible .entry one(.param .u64 a)\n{\n ret;\n}\n.visible .entry two(.param .u32 b)\n{\n ret;\n}\n\0")
    mods, libs = ffi.new("void *[2]"), ffi.new("void *[1]")
    for i in range(2):
        assert lib.cuModuleLoadData(mods + i, ptx) == 0
    assert lib.cuLibraryLoadData(libs, ptx, ffi.NULL, ffi.NULL, 0, ffi.NULL, ffi.NULL, 0) == 0
    out = ffi.new("void *[1]")

    def find(get: Callable[..., int], owner: object, name: bytes) -> object:
        assert get(out, owner, name) == 0, name
        return out[0]

    one = find(lib.cuModuleGetFunction, mods[0], b"one")
    assert find(lib.cuModuleGetFunction, mods[0], b"two") != one
    assert [find(lib.cuModuleGetFunction, mods[0], b"one") for _ in range(3)] == [one] * 3
    assert find(lib.cuModuleGetFunction, mods[1], b"one") != one  # (another module's kernel)
    k = find(lib.cuLibraryGetKernel, libs[0], b"two")
    assert find(lib.cuLibraryGetKernel, libs[0], b"two") == k
    assert lib.cuModuleGetFunction(out, mods[0], b"three") == 500  # CUDA_ERROR_NOT_FOUND
    for i in range(2):
        assert lib.cuModuleUnload(mods[i]) == 0
