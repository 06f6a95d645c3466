"""Issue 23 item 9 (one behaviour for one mistake) on the CUDA backend, over the stub driver (bench/stub_cuda) in a
subprocess: tests/consistency_stub_child.py.  The other backends: tests/test_conformance.py."""

from __future__ import annotations

from typing import Callable


def test_one_behaviour_for_one_mistake_on_cuda(stub_child: Callable[[str], int]) -> None:
    assert stub_child("consistency_stub_child.py") == 34
