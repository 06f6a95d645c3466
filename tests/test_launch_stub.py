"""The CUDA backend's launch path against a driver that records what it receives.

bench/stub_cuda is a libcuda.so.1 built from the real cuda.h (see bench/bench_launch_cpu.py); with
STUB_CUDA_RECORD=1 its cuLaunchKernel keeps each parameter's bytes.  launch_stub_child.py launches through
the backend in a subprocess that loads it, in API mode with the compiled launch (``_fast._launch``) and with
the Python packer, and checks every launch's bytes against pack_args, the reference.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_every_launch_delivers_the_bytes_pack_args_makes(stub_cuda: tuple[Path, dict[str, str]]) -> None:
    stub, env = stub_cuda
    proc = subprocess.run([sys.executable, str(HERE / "launch_stub_child.py"), str(stub)], capture_output=True,
                          text=True, timeout=300, env={**env, "STUB_CUDA_RECORD": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok "), proc.stdout
    assert int(proc.stdout.split()[1]) > 150, proc.stdout
