"""The CUDA backend's copy sizes, host-buffer release on event completion, Device.close() and bad-typed
input, over the stub driver (bench/stub_cuda) in a subprocess: tests/lifetime_stub_child.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(stub_cuda: tuple[Path, dict[str, str]], part: str) -> int:
    stub, env = stub_cuda
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "lifetime_stub_child.py"), str(stub), part],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok "), proc.stdout
    return int(proc.stdout.split()[1])


def test_copy_of_different_sizes_is_invalid_value(stub_cuda: tuple[Path, dict[str, str]]) -> None:
    assert _run(stub_cuda, "copy") == 3


def test_host_buffers_released_when_event_completes(stub_cuda: tuple[Path, dict[str, str]]) -> None:
    assert _run(stub_cuda, "inflight") == 100


def test_closed_device_refuses_checked_operations(stub_cuda: tuple[Path, dict[str, str]]) -> None:
    assert _run(stub_cuda, "close") == 9


def test_bad_typed_input_is_a_clear_error(stub_cuda: tuple[Path, dict[str, str]]) -> None:
    assert _run(stub_cuda, "input") == 13


def test_offsets_counts_and_fills_reach_the_driver(stub_cuda: tuple[Path, dict[str, str]]) -> None:
    """Stream.copy*/fill with offsets and byte counts, copy_2d/copy_3d (the CUDA_MEMCPY2D/3D fields) and prefetch (the
    CUmemLocation, by value): the stub records the last transfer's addresses, count and pitches."""
    assert _run(stub_cuda, "ranges") == 18


_ = pytest


def test_the_same_mistake_builds_its_error_one_way(stub_cuda: tuple[Path, dict[str, str]]) -> None:
    """Issue 26 item 7 (errors.fail) on CUDA: the conformance suite's mistakes (double free, a copy too big, a wait on
    or an elapsed time to a non-event) name the backend "CUDA" and their operation, the message starting with it."""
    assert _run(stub_cuda, "errors") == 6
