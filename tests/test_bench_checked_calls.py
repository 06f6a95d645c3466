"""bench/bench_checked_calls.py's rows, each variant called once (ours, its Python wrapper, the reference), so a
reference call that no longer matches its library's signature fails here rather than in the middle of a bench run
(issue 27 item 5: hip-python's ``hipGetErrorString`` takes a ``hipError_t``, not an int).  Timing is the bench's
business, not this test's."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from conftest import ROOT

BENCH = ROOT / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import bench_checked_calls  # noqa: E402


@pytest.mark.parametrize("make", ["opencl_rows", "hip_rows"])
def test_every_variant_of_every_row_runs_once(make: str) -> None:
    rows: Any = getattr(bench_checked_calls, make)()
    if isinstance(rows, str):
        pytest.skip(f"{make}: {rows}")
    assert rows, f"{make} gave no rows"
    for row in rows:
        for variant, fn in row.calls.items():
            if fn is not None:
                fn()  # raises if the call's arguments do not fit the library (the reference's included)
        assert row.calls["ours"] is not None and row.calls["ref"] is not None, row.name


def test_hip_rows_use_hip_python_where_it_is_installed() -> None:
    """With hip-python present (``make bench-deps``), its calls are the reference, not the raw cffi fallback."""
    pytest.importorskip("hip.hip", reason="hip-python is not installed (make bench-deps)")
    rows = bench_checked_calls.hip_rows()
    if isinstance(rows, str):
        pytest.skip(rows)
    assert {r.ref_name for r in rows} == {"hip-python"}
