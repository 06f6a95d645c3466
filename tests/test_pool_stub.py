"""The CUDA backend's stream-ordered pool against a driver that records what it receives.

bench/stub_cuda is a libcuda.so.1 built from the real cuda.h (see bench/bench_launch_cpu.py); with
STUB_CUDA_RECORD=1 its cuMemAllocFromPoolAsync and cuMemFreeAsync keep their arguments and the context
current at the call, and fail on request.  pool_stub_child.py allocates and frees through the backend in a
subprocess that loads it, with the compiled pool allocation (``_fast._pool_alloc``, API mode) and with the
Python one, and checks the driver's view, release on drop, errors, threads and reference counts.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_pool_allocations_reach_the_driver_as_asked(stub_cuda: tuple[Path, dict[str, str]]) -> None:
    stub, env = stub_cuda
    proc = subprocess.run([sys.executable, str(HERE / "pool_stub_child.py"), str(stub)], capture_output=True,
                          text=True, timeout=300, env={**env, "STUB_CUDA_RECORD": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok "), proc.stdout
    assert int(proc.stdout.split()[1]) >= 30, proc.stdout
