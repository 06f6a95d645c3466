"""The CUDA backend's launch path against a driver that records what it receives.

bench/stub_cuda is a libcuda.so.1 built from the real cuda.h (see bench/bench_launch_cpu.py); with
STUB_CUDA_RECORD=1 its cuLaunchKernel keeps each parameter's bytes.  launch_stub_child.py launches through
the backend in a subprocess that loads it, in API mode with the compiled launch (``_fast._launch``) and with
the Python packer, and checks every launch's bytes against pack_args, the reference.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))


def test_every_launch_delivers_the_bytes_pack_args_makes() -> None:
    import bench_launch_cpu  # builds the stub

    stub = bench_launch_cpu.build_stub()
    if isinstance(stub, str):
        pytest.skip(stub)
    from ironaccelerator import Error
    from ironaccelerator.backends.cuda import _backend as cuda_backend

    try:
        major, minor = cuda_backend.compiler_version()
    except Error as e:
        pytest.skip(f"no NVRTC: {e}")
    env = {**os.environ, "LD_LIBRARY_PATH": str(stub.parent), "STUB_CUDA_RECORD": "1",
           "STUB_CUDA_DRIVER_VERSION": str(max(13000, major * 1000 + minor * 10))}
    proc = subprocess.run([sys.executable, str(HERE / "launch_stub_child.py"), str(stub)], capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok "), proc.stdout
    assert int(proc.stdout.split()[1]) > 150, proc.stdout
