"""The front-end is chosen per spec (issue 11 item 5): ``frontend: clang | pycparser | declared``.  A declared
spec carries its own C declarations (an API with no usable header: Metal, or QNN's, which may not be
redistributed); both C front-ends parse them alike, the library is generated, built, imported and called
against a real shared library, and a mistake in the declarations is located in the spec."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ironaccelerator_gen import frontend, pipeline
from ironaccelerator_gen.build import build_library
from ironaccelerator_gen.diagnostics import UserError

from conftest import SPECS
from test_spec import assert_user_error, run_cli

DECLARED = """\
vendor: decl
library: toy
backend: CUDA
frontend: declared
# written from the vendor's documentation, not copied from a header
declarations: |
  #include <stddef.h>
  typedef enum { TOY_OK = 0, TOY_BAD_ARG = 2, TOY_NO_MEMORY = 3 } ToyStatus;
  typedef struct ToyContext_t *ToyContext;
  typedef struct { unsigned int major; unsigned int minor; } ToyVersion;
  #define TOY_API_MAJOR 2
  ToyStatus toyGetVersion(ToyVersion *version);
  ToyStatus toyScale(int value, int factor, long long *result);
  ToyStatus toyCreate(ToyContext *context);
loader:
  linux: [libtoydecl.so]
  sdk_env: [TOY_DECL_HOME]
  sdk_dirs: [lib]
errors:
  type: ToyStatus
  success: [TOY_OK]
  default: DRIVER
  kinds:
    INVALID_VALUE: [TOY_BAD_ARG]
    OUT_OF_MEMORY: [TOY_NO_MEMORY]
"""
IMPL = r"""
#include <stdlib.h>
typedef enum { TOY_OK = 0, TOY_BAD_ARG = 2, TOY_NO_MEMORY = 3 } ToyStatus;
typedef struct { unsigned int major; unsigned int minor; } ToyVersion;
ToyStatus toyGetVersion(ToyVersion *v) { v->major = 2; v->minor = 7; return TOY_OK; }
ToyStatus toyScale(int value, int factor, long long *r) {
    if (factor == 0) return TOY_BAD_ARG;
    *r = (long long)value * factor; return TOY_OK;
}
ToyStatus toyCreate(void **c) { *c = malloc(1); return *c ? TOY_OK : TOY_NO_MEMORY; }
"""


def spec_dir(tmp_path: Path, text: str = DECLARED) -> Path:
    d = tmp_path / "specs"
    (d / "decl").mkdir(parents=True)
    shutil.copy(SPECS / "core.yaml", d / "core.yaml")
    (d / "decl" / "toy.yaml").write_text(text, encoding="utf-8")
    return d


def test_declared_library_is_generated_built_and_called(tmp_path: Path) -> None:
    specs = spec_dir(tmp_path)
    files = {fe: pipeline.compile_specs(specs, frontend=fe, base=tmp_path).files for fe in ("clang", "pycparser")}
    assert files["clang"] == files["pycparser"]  # the two front-ends agree on the declarations
    lib_files = {k: v for k, v in files["clang"].items() if "/decl/toy/" in k}
    assert "TOY_API_MAJOR = 2" in lib_files["ironaccelerator/backends/decl/toy/__init__.py"]
    assert str(tmp_path) not in "".join(files["clang"].values())  # no temporary path leaks into the output
    out = tmp_path / "out"
    pipeline.write(files["clang"], out)
    build_library(out / "ironaccelerator" / "backends" / "decl" / "toy", api=True)
    home = tmp_path / "home"
    (home / "lib").mkdir(parents=True)
    (tmp_path / "impl.c").write_text(IMPL)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(home / "lib" / "libtoydecl.so"), str(tmp_path / "impl.c")],
                   check=True)
    code = """
from ironaccelerator import Error, ErrorKind
from ironaccelerator.backends.decl import toy
v = toy.toyGetVersion()
assert (v.major, v.minor) == (2, 7), v
assert toy.toyScale(21, 2) == 42
try:
    toy.toyScale(1, 0)
except Error as e:
    assert e.kind is ErrorKind.INVALID_VALUE and e.code == 2, e
else:
    raise SystemExit("no error")
assert toy.toyCreate() != toy.ffi.NULL
print("ok", toy.BINDING_MODE, toy.SDK_VERSION)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(out), "TOY_DECL_HOME": str(home)})
    assert r.returncode == 0 and r.stdout.split() == ["ok", "api", "declared"], r.stdout + r.stderr


@pytest.mark.parametrize("fe", ["clang", "pycparser"])
def test_a_mistake_in_the_declarations_is_located_in_the_spec(tmp_path: Path, fe: str) -> None:
    text = DECLARED.replace("  ToyStatus toyScale(int value, int factor, long long *result);",
                            "  ToyStatus toyScale(int value, int factor long long *result);")
    with pytest.raises(UserError) as info:
        pipeline.compile_specs(spec_dir(tmp_path, text), frontend=fe)
    lines = text.splitlines()
    bad = next(i for i, line in enumerate(lines, 1) if "factor long long" in line)
    located = [d for d in info.value.diagnostics if d.location.file == "specs/decl/toy.yaml"]
    assert located and all(d.location.line == bad for d in located), [str(d) for d in info.value.diagnostics]
    assert all(3 <= d.location.col <= len(lines[bad - 1]) for d in located)
    assert_user_error(run_cli(spec_dir(tmp_path / "cli", text), tmp_path / "out", "--frontend", fe),
                      "specs/decl/toy.yaml")


DECLARED_ERRORS = {
    "headers beside declarations": ("frontend: declared\n", "frontend: declared\nheaders: [toy.h]\n",
                                    "'headers' does not go with frontend: declared"),
    "declarations without declared": ("frontend: declared\n", "",
                                      "missing required key 'sdk' in library spec"),
    "an unknown front-end": ("frontend: declared\n", "frontend: gcc\nsdk: toy\nheaders: [toy.h]\n",
                             "frontend 'gcc' is not valid: expected clang, pycparser or declared"),
    "empty declarations": ("declarations: |\n", "declarations: ' '\nunused: |\n", "declarations must declare"),
}


@pytest.mark.parametrize("case", sorted(DECLARED_ERRORS))
def test_declared_spec_errors(tmp_path: Path, case: str) -> None:
    old, new, message = DECLARED_ERRORS[case]
    assert DECLARED.count(old) == 1
    with pytest.raises(UserError) as info:
        pipeline.compile_specs(spec_dir(tmp_path, DECLARED.replace(old, new)))
    assert any(message in d.message for d in info.value.diagnostics), [str(d) for d in info.value.diagnostics]


def test_a_specs_frontend_is_used_unless_the_command_line_names_one(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[str] = []
    real = frontend.parse

    def recording(request: frontend.ParseRequest, fe: str = "clang") -> object:
        used.append(fe)
        return real(request, fe)

    monkeypatch.setattr(pipeline, "parse", recording)
    specs = spec_dir(tmp_path, DECLARED)
    pipeline.compile_specs(specs)
    assert used == ["clang"]  # declared: the C parser is the default one
    nvrtc = (SPECS / "cuda" / "nvrtc.yaml").read_text(encoding="utf-8")
    (specs / "cuda").mkdir()
    (specs / "cuda" / "nvrtc.yaml").write_text(nvrtc.replace("\nheaders:", "\nfrontend: pycparser\nheaders:", 1))
    used.clear()
    result = pipeline.compile_specs(specs, only=["cuda.nvrtc"])
    if result.skipped:
        pytest.skip("no NVRTC headers")
    assert used == ["pycparser"]  # the spec's choice
    used.clear()
    pipeline.compile_specs(specs, frontend="clang", only=["cuda.nvrtc"])
    assert used == ["clang"]  # the command line's
