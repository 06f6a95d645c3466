"""``ironaccel-gen drift`` (generator/drift.py): API drift between two SDKs, two generated trees, or a tree and an SDK.

Two sets of tests: the real CUDA 12.9 ``cuda.h`` (the pip ``nvidia-cuda-runtime-cu12`` wheel, whose include
directory also holds its ``cudaTypedefs.h``) against 13.0 (``/usr/local/cuda``), each expected row read off
both headers by hand; and a small hand-written header in two versions, with a spec, where every kind of change
is present once and every row is asserted exactly — in SDK, tree-vs-SDK and tree-vs-tree modes alike.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ironaccelerator_gen import drift, output, pipeline
from ironaccelerator_gen.cli import main
from ironaccelerator_gen.diagnostics import UserError
from ironaccelerator_gen.spec import load_core, load_library
from ironaccelerator_gen.surface import load_backend, load_surface

from conftest import CUDA_INCLUDE, SPECS, core_text, site_file

CUDA129 = site_file("nvidia/cuda_runtime/include/cuda.h")
needs_cuda = pytest.mark.skipif(CUDA129 is None or not (CUDA_INCLUDE / "cuda.h").is_file(),
                                reason="needs CUDA 12.9's cuda.h (nvidia-cuda-runtime-cu12) and CUDA 13.0's")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(["drift", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


# ------------------------------------------------------------------------------ CUDA 12.9 -> 13.0


@pytest.fixture(scope="module")
def cuda_drift() -> dict[str, Any]:
    """The JSON report of cuda.driver, CUDA 12.9 -> 13.0, with the real specs."""
    import argparse
    assert CUDA129 is not None
    args = argparse.Namespace(specs=SPECS, sdk=[f"cuda={CUDA129.parent}", f"cuda={CUDA_INCLUDE.parent}"],
                              old_tree=None, new_tree=None, only=["cuda.driver"], frontend=None, json=True)
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = drift.run(args)
    report: dict[str, Any] = json.loads(buf.getvalue())
    report["rc"] = rc
    return report


@needs_cuda
def test_cuda_129_to_130_rows_checked_by_hand(cuda_drift: dict[str, Any]) -> None:
    assert cuda_drift["rc"] == 0 and cuda_drift["spec_breaks"] == 0  # the spec binds both (since: where needed)
    d = cuda_drift["libraries"]["cuda.driver"]
    assert "12.9" in d["old"] and "nvidia/cuda_runtime/include" in d["old"] and "13.0" in d["new"]
    # cuMemGetDefaultMemPool is declared only by 13.0's cuda.h; 12.9 declares cuCtxCreate_v3 and _v4 as functions
    # of their own, 13.0 makes cuCtxCreate itself the _v4 ABI (#define cuCtxCreate cuCtxCreate_v4)
    assert "cuMemGetDefaultMemPool" in d["functions"]["added"]
    assert {"cuCtxCreate_v3", "cuCtxCreate_v4"} <= set(d["functions"]["removed"])
    assert "cuMemGetDefaultMemPool" not in d["functions"]["removed"]
    # the symbol each #define names, and the PFN_ typedef whose prototype it has: 12.9's cudaTypedefs.h (from the
    # same wheel) gives PFN_cuCtxCreate_v3020 for cuCtxCreate_v2, 13.0's PFN_cuCtxCreate_v12050 for _v4
    assert {"function": "cuCtxCreate", "old": "cuCtxCreate_v2", "new": "cuCtxCreate_v4"} in d["symbols"]
    assert {"function": "cuCtxCreate", "old": 3020, "new": 12050} in d["pins"]
    assert {"function": "cuMemcpyBatchAsync", "old": "cuMemcpyBatchAsync", "new": "cuMemcpyBatchAsync_v2"} in d["symbols"]
    sigs = {s["function"]: s["changes"] for s in d["signatures"]}
    assert sigs["cuCtxCreate"] == ["parameter ctxCreateParams added (CUctxCreateParams *)"]
    assert sigs["cuMemcpyBatchAsync"] == ["parameter failIdx removed (size_t *)"]  # 13.0 dropped size_t *failIdx
    assert sigs["cuMemPrefetchAsync"] == ["parameter dstDevice removed (CUdevice)",
                                          "parameter location added (CUmemLocation)",
                                          "parameter flags added (unsigned int)"]
    values = {(v["enum"], v["name"]): v["change"] for v in d["enums"]["values"]}
    assert values[("CUresult", "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER")] == "added = 36"
    assert values[("CUjit_target", "CU_TARGET_COMPUTE_101")] == "removed (was 101)"  # 13.0: compute 11.0 instead
    assert values[("CUjit_target", "CU_TARGET_COMPUTE_110")] == "added = 110"
    assert values[("CUdevice_attribute", "CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED")] == "added = 144"
    assert values[("CUdevice_attribute", "CU_DEVICE_ATTRIBUTE_MAX")] == "renumbered 144 -> 148"
    assert "CUatomicOperation" in d["enums"]["added"]
    # CUdevSmResource: { unsigned int smCount; } in 12.9, two more unsigned ints in 13.0
    structs = {s["struct"]: s["changes"] for s in d["structs"]["changed"]}
    assert structs["CUdevSmResource"] == ["size 4 -> 12", "field minSmPartitionSize added (unsigned int, offset 4)",
                                          "field smCoscheduledAlignment added (unsigned int, offset 8)"]
    assert "CUcheckpointGpuPair" in d["structs"]["added"]
    assert {"name": "CUDA_VERSION", "change": "12090 -> 13000"} in d["constants"]
    # functions, enums and constants that did not change are not listed
    assert "cuInit" not in sigs and ("CUresult", "CUDA_SUCCESS") not in values
    assert not any(c["name"] == "CU_IPC_HANDLE_SIZE" for c in d["constants"])


@needs_cuda
def test_cuda_spec_naming_a_function_13_removed_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The real specs plus one entry for cuCtxCreate_v3 (a function of 12.9's cuda.h, gone in 13.0)."""
    assert CUDA129 is not None
    specs = tmp_path / "specs"
    shutil.copytree(SPECS, specs)
    driver = specs / "cuda" / "driver.yaml"
    text = driver.read_text(encoding="utf-8")
    assert "\nfunctions:\n" in text
    driver.write_text(text.replace("\nfunctions:\n", "\nfunctions:\n  cuCtxCreate_v3: {status: [CUDA_ERROR_NOT_READY]}\n", 1),
                      encoding="utf-8")
    line = text[:text.index("\nfunctions:\n")].count("\n") + 3
    rc, out, _ = run(["--specs", str(specs), "--only", "cuda.driver", "--sdk", f"cuda={CUDA129.parent}",
                      "--sdk", f"cuda={CUDA_INCLUDE}"], capsys)
    assert rc == 1
    breaks = [ln for ln in out.splitlines() if ln.startswith("  ! ")]
    assert breaks == [f"  ! {specs}/cuda/driver.yaml:{line}:3: functions: names function 'cuCtxCreate_v3', "
                      "which the new side does not declare"]
    assert out.splitlines()[-1] == "drift: 1 library compared; 1 spec entry would stop matching"


@needs_cuda
def test_backend_role_naming_a_removed_function_is_a_break() -> None:
    """backend.yaml's role tables are spec entries too: a role whose function the new side lacks is listed."""
    core = load_core(SPECS / "core.yaml", "specs/core.yaml")
    spec = load_library(SPECS / "cuda" / "driver.yaml", "specs/cuda/driver.yaml")
    backend = load_backend(SPECS / "cuda" / "backend.yaml", "specs/cuda/backend.yaml",
                           load_surface(SPECS / "core.yaml", "specs/core.yaml"))
    descs, _ = pipeline.sdk_declarations([spec])
    old = drift.snapshot_sdk(spec, core, str(CUDA_INCLUDE), descs)
    assert isinstance(old, drift.Snapshot)
    assert drift.spec_breaks(spec, [backend], old, old) == []
    new = dataclasses.replace(old, declared=old.declared - {"cuMemsetD16Async"},
                              enums={**old.enums, "CUmemorytype": {}})
    rows = [(str(b.location).split(":")[0], b.kind, b.name, b.entry) for b in drift.spec_breaks(spec, [backend], old, new)]
    roles = [r for r in rows if r[0] == "specs/cuda/backend.yaml"]
    assert ("specs/cuda/backend.yaml", "function", "cuMemsetD16Async", "functions: memset_d16: (specs/cuda/backend.yaml)") in roles
    assert any(r[1] == "enum constant" and r[2].startswith("CU_MEMORYTYPE_") for r in roles), roles


# ------------------------------------------------------------------------- a hand-written library


OLD_H = """\
#ifndef DRIFT_H
#define DRIFT_H
#include <stddef.h>
#define DR_VERSION 1000
#define DR_MAX_NAME 64
#define DR_LIMIT 10
typedef enum { DR_SUCCESS = 0, DR_ERROR_INVALID_VALUE = 1, DR_ERROR_GONE = 2 } drStatus;
typedef enum drMode_enum { DR_MODE_A = 0, DR_MODE_B = 1, DR_MODE_C = 2 } drMode;
typedef struct drDesc_st { int width; int height; } drDesc;
typedef struct drGone_st { int x; } drGone;
typedef struct drHandle_st *drHandle;
typedef enum { DR_PROC_DEFAULT = 0 } drProcFlags;
#define drCreate drCreate_v2
drStatus drCreate_v2(drHandle *out, const drDesc *desc);
drStatus drCopy(drHandle dst, drHandle src, size_t count);
drStatus drFill(drHandle h, int value);
drStatus drRename(drHandle h, int a);
drStatus drGoneFn(int x);
drStatus drInternalDebug(void);
drStatus drSame(drMode mode);
drStatus drGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags);
#endif
"""
OLD_TYPEDEFS = """\
#include "drift.h"
typedef drStatus (*PFN_drCreate_v1000)(drHandle *out, const drDesc *desc);
"""
NEW_H = """\
#ifndef DRIFT_H
#define DRIFT_H
#include <stddef.h>
#define DR_VERSION 2000
#define DR_MAX_NAME 128
#define DR_NEW_FLAG 4
typedef enum { DR_SUCCESS = 0, DR_ERROR_INVALID_VALUE = 1, DR_ERROR_NEW = 3 } drStatus;
typedef enum drMode_enum { DR_MODE_A = 0, DR_MODE_C = 3, DR_MODE_D = 4 } drMode;
typedef enum { DR_FLAG_X = 1 } drFlags;
typedef struct drDesc_st { int width; int height; int depth; } drDesc;
typedef struct drNew_st { long y; } drNew;
typedef struct drHandle_st *drHandle;
typedef enum { DR_PROC_DEFAULT = 0 } drProcFlags;
#define drCreate drCreate_v3
drStatus drCreate_v3(drHandle *out, const drDesc *desc, unsigned int flags);
drStatus drCopy(drHandle dst, drHandle src, unsigned long long count);
drStatus drFill(drHandle h);
drStatus drRename(drHandle h, int b);
drStatus drNewFn(int y);
drStatus drSame(drMode mode);
drStatus drGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags);
#endif
"""
NEW_TYPEDEFS = """\
#include "drift.h"
typedef drStatus (*PFN_drCreate_v1000)(drHandle *out, const drDesc *desc);
typedef drStatus (*PFN_drCreate_v2000)(drHandle *out, const drDesc *desc, unsigned int flags);
"""
SPEC = """\
vendor: test
library: drift
backend: TEST
sdk: drift
headers: [drift.h]
version_headers: [drift_typedefs.h]
version_macro: DR_VERSION
bind:
  include: ["dr*"]
  exclude: ["drInternal*"]
symbols:
  version_typedef: "PFN_{name}_v{version}"
resolver: {kind: proc_address, function: drGetProcAddress, default_flag: DR_PROC_DEFAULT}
loader:
  linux: [libia_drift.so]
errors:
  type: drStatus
  success: [DR_SUCCESS]
  default: DRIVER
  kinds:
    INVALID_VALUE: [DR_ERROR_INVALID_VALUE]
  defaulted: [DR_ERROR_GONE]
functions:
  drCopy: {status: [DR_ERROR_GONE]}
  drFill:
    params:
      value: in
  drRename:
    params:
      a: in
  drGoneFn: {status: [DR_ERROR_INVALID_VALUE]}
"""
# every spec entry that names something only the old header declares: (line, col, kind, name, entry)
BREAKS = [
    (10, 13, "pattern", "drInternal*", "bind: exclude:"),
    (22, 15, "error code", "DR_ERROR_GONE", "errors:"),
    (24, 21, "error code", "DR_ERROR_GONE", "functions: drCopy status:"),
    (27, 7, "parameter", "value", "functions: drFill params:"),
    (30, 7, "parameter", "a", "functions: drRename params:"),
    (31, 3, "function", "drGoneFn", "functions:"),
]
# the new spec: what a maintainer makes of it (the entries that broke, dropped), so that a new tree generates
NEW_SPEC = (SPEC.replace('  exclude: ["drInternal*"]\n', "").replace("  defaulted: [DR_ERROR_GONE]", "  defaulted: [DR_ERROR_NEW]")
            .replace("  drCopy: {status: [DR_ERROR_GONE]}\n", "")
            .split("  drFill:\n")[0] + "  drSame: {status: [DR_ERROR_INVALID_VALUE]}\n")

ROWS: dict[str, Any] = {
    "functions": {"added": ["drNewFn"], "removed": ["drGoneFn"]},
    "symbols": [{"function": "drCreate", "old": "drCreate_v2", "new": "drCreate_v3"}],
    "pins": [{"function": "drCreate", "old": 1000, "new": 2000}],
    "signatures": [
        {"function": "drCopy", "changes": ["parameter count type size_t -> unsigned long long"]},
        {"function": "drCreate", "changes": ["parameter flags added (unsigned int)"]},
        {"function": "drFill", "changes": ["parameter value removed (int)"]},
        {"function": "drRename", "changes": ["parameter a renamed b"]},
    ],
    "enums": {"added": ["drFlags"], "removed": [], "values": [
        {"enum": "drMode", "name": "DR_MODE_B", "change": "removed (was 1)"},
        {"enum": "drMode", "name": "DR_MODE_C", "change": "renumbered 2 -> 3"},
        {"enum": "drMode", "name": "DR_MODE_D", "change": "added = 4"},
        {"enum": "drStatus", "name": "DR_ERROR_GONE", "change": "removed (was 2)"},
        {"enum": "drStatus", "name": "DR_ERROR_NEW", "change": "added = 3"},
    ]},
    "structs": {"added": ["drNew"], "removed": ["drGone"], "changed": [
        {"struct": "drDesc", "changes": ["size 8 -> 12", "field depth added (int, offset 8)"]},
    ]},
    "constants": [
        {"name": "DR_LIMIT", "change": "removed (was 10)"},
        {"name": "DR_MAX_NAME", "change": "64 -> 128"},
        {"name": "DR_NEW_FLAG", "change": "added = 4"},
        {"name": "DR_VERSION", "change": "1000 -> 2000"},
    ],
}


@pytest.fixture
def case(tmp_path: Path) -> Path:
    """tmp/specs (core.yaml and drift.yaml), tmp/old/include and tmp/new/include (drift.h, drift_typedefs.h)."""
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "core.yaml").write_text(core_text(), encoding="utf-8")
    (specs / "drift.yaml").write_text(SPEC, encoding="utf-8")
    for side, h, t in (("old", OLD_H, OLD_TYPEDEFS), ("new", NEW_H, NEW_TYPEDEFS)):
        inc = tmp_path / side / "include"
        inc.mkdir(parents=True)
        (inc / "drift.h").write_text(h, encoding="utf-8")
        (inc / "drift_typedefs.h").write_text(t, encoding="utf-8")
    return tmp_path


def expected_breaks(specs: Path, tree: bool = False) -> list[dict[str, str]]:
    """(``tree``: the old side is a generated tree, which holds only what was bound: a bind: exclude: pattern's
    functions are not in it, so whether the new side still declares them is not known)"""
    return [{"location": f"{specs}/drift.yaml:{line}:{col}", "kind": kind, "name": name, "entry": entry}
            for line, col, kind, name, entry in BREAKS if not (tree and entry == "bind: exclude:")]


def drift_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    rc, out, _ = run([*argv, "--json"], capsys)
    return rc, json.loads(out), out


def test_each_kind_of_change_between_two_sdks(case: Path, capsys: pytest.CaptureFixture[str]) -> None:
    specs = case / "specs"
    rc, report, text = drift_json(["--specs", str(specs), "--sdk", f"drift={case / 'old'}",
                                   "--sdk", f"drift={case / 'new' / 'include'}"], capsys)
    assert rc == 1
    lib = report["libraries"]["test.drift"]
    assert lib.pop("old") == f"drift unknown ({case / 'old' / 'include'})"  # an SDK root or an include directory
    assert lib.pop("new") == f"drift unknown ({case / 'new' / 'include'})"
    assert lib.pop("spec") == expected_breaks(specs)
    assert lib == ROWS
    assert report["spec_breaks"] == len(BREAKS) and report["skipped"] == []
    # stable: the same run prints the same bytes, keys sorted
    _, _, again = drift_json(["--specs", str(specs), "--sdk", f"drift={case / 'old'}",
                              "--sdk", f"drift={case / 'new' / 'include'}"], capsys)
    assert again == text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"


def test_the_breaks_are_what_generate_refuses(case: Path) -> None:
    """Each entry drift lists is one generate reports against the new headers (and none against the old)."""
    specs = case / "specs"
    pipeline.compile_specs(specs, {"drift": str(case / "old")})
    with pytest.raises(UserError) as e:
        pipeline.compile_specs(specs, {"drift": str(case / "new")})
    refused = {(d.location.line, d.location.col) for d in e.value.diagnostics}
    assert {(line, col) for line, col, *_ in BREAKS} <= refused


def test_text_report(case: Path, capsys: pytest.CaptureFixture[str]) -> None:
    specs = case / "specs"
    rc, out, err = run(["--specs", str(specs), "--sdk", f"drift={case / 'old'}", "--sdk", f"drift={case / 'new'}"],
                       capsys)
    assert rc == 1 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"test.drift: drift unknown ({case / 'old' / 'include'}) -> drift unknown ({case / 'new' / 'include'})"
    assert lines[1:] == [
        "  + function drNewFn",
        "  - function drGoneFn",
        "  ~ symbol drCreate: drCreate_v2 -> drCreate_v3",
        "  ~ pin drCreate: 1000 -> 2000",
        "  ~ signature drCopy: parameter count type size_t -> unsigned long long",
        "  ~ signature drCreate: parameter flags added (unsigned int)",
        "  ~ signature drFill: parameter value removed (int)",
        "  ~ signature drRename: parameter a renamed b",
        "  + enum drFlags",
        "  - enum value drMode.DR_MODE_B: removed (was 1)",
        "  ~ enum value drMode.DR_MODE_C: renumbered 2 -> 3",
        "  + enum value drMode.DR_MODE_D: added = 4",
        "  - enum value drStatus.DR_ERROR_GONE: removed (was 2)",
        "  + enum value drStatus.DR_ERROR_NEW: added = 3",
        "  + struct drNew",
        "  - struct drGone",
        "  ~ struct drDesc: size 8 -> 12; field depth added (int, offset 8)",
        "  - constant DR_LIMIT: removed (was 10)",
        "  ~ constant DR_MAX_NAME: 64 -> 128",
        "  + constant DR_NEW_FLAG: added = 4",
        "  ~ constant DR_VERSION: 1000 -> 2000",
        *[f"  ! {specs}/drift.yaml:{line}:{col}: {entry} names {kind} '{name}', which "
          + ("matches nothing the new side declares" if kind == "pattern" else "the new side does not declare")
          for line, col, kind, name, entry in BREAKS],
        "drift: 1 library compared; 6 spec entries would stop matching",
    ]


def test_no_change_exits_0(case: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["--specs", str(case / "specs"), "--sdk", f"drift={case / 'old'}", "--sdk", f"drift={case / 'old'}"],
                     capsys)
    assert rc == 0
    assert out.splitlines()[1:] == ["  no changes", "drift: 1 library compared; 0 spec entries would stop matching"]


def generate_tree(case: Path, spec_text: str, side: str) -> Path:
    """generate's output for the spec (as ``spec_text``) over ``side``'s headers, in case/tree-<side>."""
    specs = case / f"specs-{side}"
    specs.mkdir()
    (specs / "core.yaml").write_text(core_text(), encoding="utf-8")
    (specs / "drift.yaml").write_text(spec_text, encoding="utf-8")
    result = pipeline.compile_specs(specs, {"drift": str(case / side)})
    out = case / f"tree-{side}"
    output.write(result.files, out, result.keep)
    return out


def test_a_tree_against_an_sdk_and_two_trees_give_the_rows_of_the_sdks(case: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    specs = case / "specs"
    old_tree = generate_tree(case, SPEC, "old")
    rc, report, _ = drift_json(["--specs", str(specs), "--old-tree", str(old_tree), "--sdk", f"drift={case / 'new'}"],
                               capsys)
    lib = report["libraries"]["test.drift"]
    assert rc == 1 and lib.pop("old") == f"tree {old_tree}"
    lib.pop("new")
    assert lib.pop("spec") == expected_breaks(specs, tree=True)
    assert lib == ROWS
    # the new tree is generated with the spec a maintainer fixed; the old spec still names what went away
    new_tree = generate_tree(case, NEW_SPEC, "new")
    rc, report, _ = drift_json(["--specs", str(specs), "--old-tree", str(old_tree / "ironaccelerator"),
                                "--new-tree", str(new_tree)], capsys)
    lib = report["libraries"]["test.drift"]
    assert rc == 1 and lib.pop("old") == f"tree {old_tree / 'ironaccelerator'}" and lib.pop("new") == f"tree {new_tree}"
    assert lib.pop("spec") == expected_breaks(specs, tree=True)
    assert lib == ROWS
    # and against the fixed spec nothing is broken
    rc, report, _ = drift_json(["--specs", str(case / "specs-new"), "--old-tree", str(old_tree),
                                "--new-tree", str(new_tree)], capsys)
    assert rc == 0 and report["spec_breaks"] == 0 and report["libraries"]["test.drift"]["spec"] == []


def test_a_tree_against_its_own_headers_has_no_drift(case: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = generate_tree(case, SPEC, "old")
    rc, out, _ = run(["--specs", str(case / "specs"), "--old-tree", str(tree), "--sdk", f"drift={case / 'old'}"],
                     capsys)
    assert rc == 0 and out.splitlines()[1] == "  no changes"


@pytest.mark.parametrize("argv, where, message", [
    (["--sdk", "drift"], "ironaccel-gen: --sdk", "--sdk expects KIND=PATH, got 'drift'"),
    (["--sdk", "drift=a", "--sdk", "drift=b", "--sdk", "drift=c"], "ironaccel-gen: --sdk", "given 3 times"),
    ([], "ironaccel-gen: --sdk", "drift compares two sides"),
    (["--sdk", "drift=a"], "ironaccel-gen: --sdk", "drift compares two sides"),
    (["--sdk", "drift=a", "--sdk", "drift=b", "--old-tree", "."], "ironaccel-gen: --sdk", "give each kind once"),
    (["--old-tree", "/nonexistent/tree"], "ironaccel-gen: --old-tree", "is not a directory"),
    (["--sdk", "drift=a", "--sdk", "drift=b", "--only", "test.drfit"], "ironaccel-gen: --only", "did you mean 'test.drift'?"),
])
def test_user_errors_exit_2(case: Path, capsys: pytest.CaptureFixture[str], argv: list[str], where: str,
                            message: str) -> None:
    rc, out, err = run(["--specs", str(case / "specs"), *argv], capsys)
    assert rc == 2 and out == ""
    assert err.startswith(where + ": ") and message in err.splitlines()[0], err


def test_a_spec_error_is_located_exit_2(case: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (case / "specs" / "drift.yaml").write_text(SPEC.replace("vendor: test", "vendor: [test]"), encoding="utf-8")
    rc, _, err = run(["--specs", str(case / "specs"), "--sdk", f"drift={case / 'old'}", "--sdk", f"drift={case / 'new'}"],
                     capsys)
    assert rc == 2 and err.startswith(f"{case / 'specs'}/drift.yaml:1:"), err


def test_an_sdk_without_the_headers_is_skipped(case: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["--specs", str(case / "specs"), "--sdk", f"drift={case / 'old'}", "--sdk", f"drift={case}"],
                     capsys)
    assert rc == 0
    assert out.splitlines() == [f"skipped test.drift: no drift SDK headers found in {case} (drift.h)",
                                "drift: 0 libraries compared; 0 spec entries would stop matching"]
