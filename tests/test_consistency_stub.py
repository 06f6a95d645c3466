"""Issue 23 item 9 (one behaviour for one mistake) on the CUDA backend, over the stub driver (bench/stub_cuda) in a
subprocess: tests/consistency_stub_child.py.  The other backends: tests/test_conformance.py."""

from __future__ import annotations

from typing import Callable


def test_one_behaviour_for_one_mistake_on_cuda(stub_child: Callable[[str], int]) -> None:
    assert stub_child("consistency_stub_child.py") == 34


def test_the_table_of_mistakes_on_cuda(stub_child: Callable[[str], int]) -> None:
    """tests/mistakes.py's table (docs/guide/concepts.md) on CUDA: a copy given a non-allocation, dims that are not
    LaunchDims, an unknown kernel name, allocations past max_alloc, what another open device made (refused, taken),
    what a closed device made on a live stream (refused, launched), a graph replayed after an allocation it uses was
    freed (Graph.launch and Graph.launch_unchecked, 7 each), everything after Device.close() (refused, allowed);
    each Error's kind and function (the operation called) asserted as on every backend."""
    assert stub_child("mistakes_stub_child.py") == (2 + 20 + 10 + 1 + 4 + (4 + 10) + (8 + 4) + 5 + (7 + 7) + 25
                                                    + 4)
