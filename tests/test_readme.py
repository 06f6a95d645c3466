"""The README's quick-start examples run as written (issue 23 item 10: the copy/fill example failed with
INVALID_VALUE).  The documentation issue makes every example executable; these are the ones for the OpenCL device
this machine has (PoCL)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from conftest import ROOT

BLOCKS: list[str] = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)


def _block(containing: str) -> str:
    found = [b for b in BLOCKS if containing in b]
    assert len(found) == 1, f"{len(found)} README python blocks contain {containing!r}"
    return found[0]


def _opencl() -> Any:
    import ironaccelerator as ia

    try:
        return ia.BackendRegistry.default().get(ia.BackendKind.OPENCL)
    except ia.Error as e:
        pytest.skip(f"no OpenCL: {e}")


def test_quick_start_runs() -> None:
    _opencl()
    exec(compile(_block("backend.open(0) as dev"), "README.md (quick start)", "exec"), {})


def test_copy_and_fill_example_runs_and_does_what_its_comments_say() -> None:
    """The copies-and-fills block, in the quick start's setting (its names: s, buf_a, buf_c, a, out)."""
    with _opencl().open(0) as dev:
        s = dev.create_stream()
        a = np.random.default_rng(1).random(1 << 20).astype(np.float32)
        buf_a, buf_c = dev.alloc(a.nbytes), dev.alloc(a.nbytes)
        s.fill(buf_a, 0, width=1)
        s.fill(buf_c, 0, width=1)
        out = np.empty_like(a)
        ns = dict(s=s, buf_a=buf_a, buf_c=buf_c, a=a, out=out, np=np)
        exec(compile(_block("s.fill(buf_c, 0xDEADBEEF"), "README.md (copies)", "exec"), ns)
        s.synchronize()
        raw = a.view(np.uint8)
        expect_a = np.zeros(a.nbytes, np.uint8)
        expect_a[1024:5120] = raw[512:4608]
        expect_c = np.zeros(a.nbytes, np.uint8)
        expect_c[0:4096] = expect_a[1024:5120]
        got_out = out.view(np.uint8)[:a.nbytes - 8].copy()  # buf_c[8:] as it was when copied
        np.testing.assert_array_equal(got_out, expect_c[8:])
        back = np.zeros(a.nbytes, np.uint8)
        s.copy_to_host(back, buf_c)
        s.synchronize()
        expect_c[4096:8192] = np.frombuffer(np.full(1024, 0xDEADBEEF, np.uint32).tobytes(), np.uint8)
        np.testing.assert_array_equal(back, expect_c)


def test_make_generate_installs_what_the_quick_start_imports() -> None:
    """Issue 24 item 6: the quick start runs right after `make generate`: every module it imports besides the
    package itself (numpy) is installed by the venv step of `make generate` (make -n shows its commands)."""
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("no make")
    block = _block("backend.open(0) as dev")
    imported = {m.split(".")[0] for m in re.findall(r"^\s*(?:import|from)\s+([\w.]+)", block, re.M)}
    third_party = sorted(imported - {"ironaccelerator", "__future__", "os", "sys", "math", "struct", "array"})
    assert third_party, imported  # (numpy today; the test must look at something)
    proc = subprocess.run(["make", "-n", "-B", ".venv/.deps-installed"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    installs = [line for line in proc.stdout.splitlines() if " pip install " in line and "--upgrade pip" not in line]
    assert installs, proc.stdout
    for module in third_party:
        assert any(module in line for line in installs), (module, installs)
