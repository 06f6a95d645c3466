"""The CUDA backend's launch path against a driver that records what it receives.

bench/stub_cuda is a libcuda.so.1 built from the real cuda.h (see bench/bench_launch_cpu.py); with
STUB_CUDA_RECORD=1 its cuLaunchKernel keeps each parameter's bytes.  launch_stub_child.py launches through
the backend in a subprocess that loads it, in API mode with the compiled launch (``_fast._launch``) and with
the Python packer, and checks every launch's bytes against pack_args, the reference.
"""

from __future__ import annotations

from typing import Callable


def test_every_launch_delivers_the_bytes_pack_args_makes(stub_child: Callable[[str], int]) -> None:
    assert stub_child("launch_stub_child.py") > 150  # launches checked


def test_graphs_record_the_compiled_launches_and_refuse_a_replay_after_a_free(stub_child: Callable[[str], int]) -> None:
    """graph_stub_child.py: a capturing stream's prepared launchers (one kept from before the capture too) are
    paused so that their launches record their allocations, and resumed after; a replay after an allocation of
    a launch, a slice, a host or rect copy was freed is INVALID_HANDLE and reaches no driver; a graph keeps what
    it uses from being freed when dropped."""
    assert stub_child("graph_stub_child.py") == 3 + 4 + 4 + 2
