"""The CUDA backend's device memory (Device.alloc of DEVICE memory) against a driver that records what it receives.

bench/stub_cuda is a libcuda.so.1 built from the real cuda.h (see bench/bench_launch_cpu.py); with
STUB_CUDA_RECORD=1 its cuMemAlloc and cuMemFree keep their arguments and the context current at the call, and
fail on request.  devmem_stub_child.py allocates and frees through the backend in a subprocess that loads it,
with the compiled device memory (``_fast._devmem_allocator``, API mode) and with the Python path, and checks
the driver's view, double frees, exported views, release on drop, errors, threads, close and reference counts.
"""

from __future__ import annotations

from typing import Callable


def test_device_memory_reaches_the_driver_as_asked(stub_child: Callable[[str], int]) -> None:
    assert stub_child("devmem_stub_child.py") >= 24  # allocations checked (12 per path in API mode)
