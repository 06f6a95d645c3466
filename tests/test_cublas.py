"""cuBLAS's level-3 GEMMs bound from a spec whose device pointers are one rule line (issue 29 items 1 and 3):
tests/cublas/gemm.yaml (a test-only, declared spec) is generated, built and called over a recording libcublas
(tests/cublas/recorder.c) with the CUDA backend's allocations (the stub driver): the checked ``cublasSgemm_v2``
takes allocations, slices, views and ints for A, B and C and passes their device addresses."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ironaccelerator_gen import pipeline
from ironaccelerator_gen.bind import BoundLibrary
from ironaccelerator_gen.build import build_library
from ironaccelerator_gen.roles import Role

from conftest import ROOT, SPECS

CUBLAS = ROOT / "tests" / "cublas"


def spec_dir(tmp_path: Path) -> Path:
    d = tmp_path / "specs"
    (d / "cublas").mkdir(parents=True)
    shutil.copy(SPECS / "core.yaml", d / "core.yaml")
    shutil.copy(CUBLAS / "gemm.yaml", d / "cublas" / "gemm.yaml")
    return d


def bound(tmp_path: Path) -> BoundLibrary:
    result = pipeline.compile_specs(spec_dir(tmp_path), base=tmp_path)
    (lib,) = [b for b in result.libraries if b.spec.library.value == "gemm"]
    return lib


def test_the_rule_makes_the_matrices_device_pointers(tmp_path: Path) -> None:
    lib = bound(tmp_path)
    roles = {f.public: {p.c_name: p.role for p in f.params} for f in lib.functions}
    for gemm in ("cublasSgemm_v2", "cublasDgemm_v2", "cublasGemmEx"):
        assert [p for p, r in roles[gemm].items() if r is Role.DEVICE] == ["A", "B", "C"], roles[gemm]
        assert roles[gemm]["alpha"] is Role.IN and roles[gemm]["beta"] is Role.IN  # host scalars: untouched
    assert Role.DEVICE not in roles["cublasCreate_v2"].values()
    assert roles["cublasCreate_v2"]["handle"] is Role.OUT


def test_cublas_sgemm_takes_allocations(tmp_path: Path, stub_cuda: tuple[Path, dict[str, str]]) -> None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the recording library")
    _, env = stub_cuda
    files = pipeline.compile_specs(spec_dir(tmp_path), base=tmp_path).files
    out = tmp_path / "out"
    pipeline.write({k: v for k, v in files.items() if "/backends/cublas/" in k}, out)
    build_library(out / "ironaccelerator" / "backends" / "cublas" / "gemm", api=True)
    recorder = tmp_path / "libcublas_recorder.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(recorder), str(CUBLAS / "recorder.c")], check=True)
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "cublas_child.py"), str(out), str(recorder)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split() == ["ok", "16"], proc.stdout


def _cublas_include() -> Path:
    for site in sys.path:
        p = Path(site) / "nvidia" / "cu13" / "include"
        if (p / "cublas_api.h").is_file():
            if not Path("/usr/local/cuda/include/driver_types.h").is_file():
                pytest.skip("no CUDA toolkit headers (/usr/local/cuda) for cuBLAS's includes")
            return p
    pytest.skip("no cuBLAS headers: .venv/bin/python -m pip install --no-deps nvidia-cublas==13.5.1.27")


def test_the_declarations_are_cublas_api_h(tmp_path: Path) -> None:
    """The spec's declarations, written from NVIDIA's documentation, bind as the real cublas_api.h does: the same
    parameters (names, C types, roles: the rule matches the same A, B, C) and the same enum values."""
    include = _cublas_include()
    text = (CUBLAS / "gemm.yaml").read_text(encoding="utf-8")
    names = [f.split("(")[0].split()[-1] for f in text.split("declarations: |")[1].split("loader:")[0].split(";")
             if "(" in f]
    real = text.split("frontend: declared")[0] + (
        "sdk:\n  kind: cublas\n  marker: cublas_api.h\n"
        f"  include_dirs: [{include}]\n  extra_includes: [/usr/local/cuda/include]\n"
        f"headers: [cublas_api.h]\nbind:\n  include: [{', '.join(names)}]\n") + "loader:" + text.split("loader:")[1]
    d = spec_dir(tmp_path / "real")
    (d / "cublas" / "gemm.yaml").write_text(real, encoding="utf-8")
    result = pipeline.compile_specs(d, base=tmp_path)
    assert not result.skipped, result.skipped
    (header_lib,) = [b for b in result.libraries if b.spec.library.value == "gemm"]
    declared_lib = bound(tmp_path / "declared")

    def shape(lib: BoundLibrary) -> dict[str, list[tuple[str, str, Role]]]:
        return {f.public: [(p.c_name, p.decl, p.role) for p in f.params] for f in lib.functions}

    assert shape(declared_lib) == shape(header_lib)
    assert len(declared_lib.functions) == len(names) == 7
    real_values = {c.name: c.value for e in header_lib.enums for c in e.constants}
    for e in declared_lib.enums:
        for c in e.constants:
            assert real_values.get(c.name) == c.value, (e.name, c.name, c.value, real_values.get(c.name))
