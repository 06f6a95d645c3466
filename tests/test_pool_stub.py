"""The CUDA backend's stream-ordered pool against a driver that records what it receives.

bench/stub_cuda is a libcuda.so.1 built from the real cuda.h (see bench/bench_launch_cpu.py); with
STUB_CUDA_RECORD=1 its cuMemAllocFromPoolAsync and cuMemFreeAsync keep their arguments and the context
current at the call, and fail on request.  pool_stub_child.py allocates and frees through the backend in a
subprocess that loads it, with the compiled pool allocation (``_fast._pool_alloc``, API mode) and with the
Python one, and checks the driver's view, release on drop, errors, threads and reference counts.
"""

from __future__ import annotations

from typing import Callable


def test_pool_allocations_reach_the_driver_as_asked(stub_child: Callable[[str], int]) -> None:
    assert stub_child("pool_stub_child.py") >= 30  # allocations checked (15 per path in API mode)
