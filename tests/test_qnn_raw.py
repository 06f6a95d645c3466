"""The raw QNN bindings (ironaccelerator.backends.qnn.interface / .system / .saver) against Qualcomm's real
libraries (libQnnHtp.so, libQnnSystem.so, libQnnSaver.so from the onnxruntime-qnn wheel; HTP executes graphs in
x86 emulation), in both binding modes: the compiled cffi modules (``api``) and the ABI-mode fallback (``abi``,
the compiled modules hidden from the import).  The checks themselves are in qnn_raw_child.py; each group runs in
an interpreter of its own per mode (a process binds one library file per module), all of them at once.

Also here: every QNN error code maps to a deliberate ErrorKind (as test_opencl / test_cuda check theirs), and the
declared subset against Qualcomm's real headers when an SDK is installed (``QNN_SDK_ROOT``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from ironaccelerator import ErrorKind

from conftest import ROOT, SPECS, site_file

HERE = Path(__file__).resolve().parent
WHEEL = site_file("onnxruntime_qnn/libQnnHtp.so")
needs_qnn = pytest.mark.skipif(WHEEL is None, reason="Qualcomm's QNN libraries not installed "
                               "(pip install --no-deps onnxruntime-qnn==2.7.0; `make test` does)")
MODES = ("api", "abi")
GROUPS = {  # group -> its checks (qnn_raw_child.GROUPS), in order
    "htp": ["check_providers", "check_versions", "check_lifecycle", "check_execute", "check_binary_roundtrip",
            "check_system_info", "check_errors", "check_masked_codes", "check_use_library_after_load"],
    "saver": ["check_saver_null_entries"],
    "use_library_missing": ["check_use_library_missing"],
    "from_binary": ["check_from_binary"],  # after htp: reads the binary htp wrote
}
CHECKS = [(group, check) for group, checks in GROUPS.items() for check in checks]


def _start(mode: str, group: str, arg: Path | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, str(HERE / "qnn_raw_child.py"), mode, group, *([str(arg)] if arg else [])],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen[str]) -> tuple[dict[str, str | None], str]:
    try:
        out, _ = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return {}, "timed out after 300 s\n" + out
    try:
        got: dict[str, str | None] = json.loads(out.rstrip().rpartition("\n")[2])
    except ValueError:
        got = {}
    return got, out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], tuple[dict[str, str | None], str]]:
    """Every group in every mode: (mode, group) -> (check -> None or the failure, the interpreter's output).
    The context binary the htp group serializes is loaded by the from_binary group, a new process."""
    tmp = tmp_path_factory.mktemp("qnn")
    blobs = {mode: tmp / f"context-{mode}.bin" for mode in MODES}
    first = {(mode, group): _start(mode, group, blobs[mode] if group == "htp" else None)
             for mode in MODES for group in GROUPS if group != "from_binary"}
    done = {key: _finish(proc) for key, proc in first.items()}
    later = {(mode, "from_binary"): _start(mode, "from_binary", blobs[mode]) for mode in MODES
             if blobs[mode].is_file()}
    done.update({key: _finish(proc) for key, proc in later.items()})
    return done


@needs_qnn
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("group,check", CHECKS, ids=[c for _, c in CHECKS])
def test_qnn_raw(group: str, check: str, mode: str,
                 runs: dict[tuple[str, str], tuple[dict[str, str | None], str]]) -> None:
    got, output = runs.get((mode, group), ({}, "not run (the htp group wrote no context binary)"))
    assert check in got, f"{mode} {group}: {check} did not report; its interpreter said:\n{output}"
    assert got[check] is None, f"{mode}:\n{got[check]}"


# ------------------------------------------------------------------------------------------ error codes


def _modules() -> list[tuple[str, Any, Any]]:
    import ironaccelerator.backends.qnn.interface as qi
    import ironaccelerator.backends.qnn.saver as qs
    import ironaccelerator.backends.qnn.system as qy
    return [("interface", qi, qi.Qnn_ErrorCode_t), ("system", qy, qy.QnnSystem_ErrorCode_t),
            ("saver", qs, qs.QnnSaver_ErrorCode_t)]


@pytest.mark.parametrize("library", ["interface", "system", "saver"])
def test_every_qnn_error_code_maps_to_a_deliberate_kind(library: str) -> None:
    """Each code of the spec's errors.codes enum is in the table with the kind its spec gives it: mapped in
    errors.kinds, or listed in errors.defaulted (the default kind); none is left to the default silently."""
    name, module, enum = next(m for m in _modules() if m[0] == library)
    spec = yaml.safe_load((SPECS / "qnn" / f"{library}.yaml").read_text())["errors"]
    errors = module._b.errors
    assert enum.__name__ == spec["codes"]
    assert module._b.error_mask == spec["mask"] == 0xFFFF
    success = set(spec["success"])
    kinds = {code: kind for kind, codes in spec["kinds"].items() for code in codes}
    defaulted = set(spec.get("defaulted", []))
    assert not set(kinds) & defaulted, set(kinds) & defaulted
    codes = {c.name: int(c) for c in enum}
    assert set(codes) == success | set(kinds) | defaulted, (set(codes) ^ (success | set(kinds) | defaulted))
    assert set(errors) == {v for n, v in codes.items() if n not in success}
    for code_name, value in codes.items():
        assert value <= spec["mask"], (code_name, value)  # a code is what the mask keeps
        if code_name in success:
            assert value == 0 and value not in errors
        elif code_name in defaulted:
            assert errors[value] == (code_name, ErrorKind[spec["default"]]), (code_name, errors[value])
        else:
            assert errors[value] == (code_name, ErrorKind[kinds[code_name]]), (code_name, errors[value])
    # what the QNN tests observe
    if library == "interface":
        assert errors[6004] == ("QNN_GRAPH_ERROR_INVALID_TENSOR", ErrorKind.INVALID_VALUE)
        assert errors[6003] == ("QNN_GRAPH_ERROR_INVALID_NAME", ErrorKind.INVALID_VALUE)
        assert errors[1000] == ("QNN_COMMON_ERROR_NOT_SUPPORTED", ErrorKind.UNSUPPORTED)
        assert errors[4003] == ("QNN_BACKEND_ERROR_NOT_SUPPORTED", ErrorKind.UNSUPPORTED)
        assert errors[30001][1] is errors[30010][1] is ErrorKind.INVALID_VALUE
        assert module._b.sentinel & 0xFFFF not in errors  # the loader's status is no code, masked or not


# ------------------------------------------------------------------------------- the real SDK headers

SDK = os.environ.get("QNN_SDK_ROOT", "")
SDK_INCLUDE = Path(SDK) / "include" / "QNN" if SDK else None
needs_sdk = pytest.mark.skipif(SDK_INCLUDE is None or not (SDK_INCLUDE / "QnnInterface.h").is_file(),
                               reason="no QNN SDK on this machine (set QNN_SDK_ROOT to a QAIRT/QNN SDK with "
                               "include/QNN/QnnInterface.h to compare the declared subset with its headers)")
# the structs whose layout the bindings depend on: size and every member's offset are compared
STRUCTS = ("Qnn_Version_t", "Qnn_ApiVersion_t", "Qnn_ScaleOffset_t", "Qnn_QuantizeParams_t", "Qnn_ClientBuffer_t",
           "Qnn_TensorV1_t", "Qnn_TensorV2_t", "Qnn_Tensor_t", "Qnn_OpConfigV1_t", "Qnn_Param_t", "Qnn_Scalar_t",
           "QnnInterface_t", "QnnInterface_ImplementationV2_40_t", "QnnDevice_PlatformInfo_t",
           "QnnDevice_HardwareDeviceInfoV1_t", "QnnHtpDevice_OnChipDeviceInfoExtension_t",
           "QnnHtpDevice_CustomConfig_t", "QnnDevice_Config_t", "Qnn_MemDescriptor_t")
SYSTEM_STRUCTS = ("QnnSystemInterface_t", "QnnSystemContext_GraphInfoV3_t", "QnnSystemContext_BinaryInfoV3_t",
                  "QnnSystemContext_BinaryInfo_t", "QnnSystemContext_GraphInfo_t")
# what each library's declarations are compared with: (headers, structs)
GROUPS_SDK = {"interface": (("QnnInterface.h", "HTP/QnnHtpDevice.h"), STRUCTS),
              "system": (("System/QnnSystemInterface.h",), SYSTEM_STRUCTS)}


def _declared_layout(ffi: Any, names: tuple[str, ...]) -> dict[str, int]:
    """name -> size, name.member -> offset (the named members, anonymous unions' members included)."""
    out: dict[str, int] = {}
    for name in names:
        t = ffi.typeof(name)
        out[name] = ffi.sizeof(t)
        for member, _ in t.fields or ():
            if member:
                out[f"{name}.{member}"] = ffi.offsetof(t, member)
    return out


def _declared_values(module: Any) -> dict[str, int]:
    """The enum constants and integer macros the module declares (module attributes named QNN_*)."""
    return {k: int(v) for k, v in vars(module).items() if k.startswith("QNN_") and isinstance(v, int)}


def _compare_with_headers(include: Path, tmp_path: Path) -> list[str]:
    """For each library: a C program including ``include``'s headers prints sizeof/offsetof of every declared
    struct member and the value of every declared constant; returns the differences from the declarations."""
    import ironaccelerator.backends.qnn.interface as qi
    import ironaccelerator.backends.qnn.system as qy

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    problems = []
    for library, module in (("interface", qi), ("system", qy)):
        headers, structs = GROUPS_SDK[library]
        want = _declared_layout(module.ffi, structs)
        values = _declared_values(module)
        lines = []
        for key in want:
            if "." in key:
                struct, member = key.split(".", 1)
                lines.append(f'  printf("%s %zu\\n", "{key}", offsetof({struct}, {member}));')
            else:
                lines.append(f'  printf("%s %zu\\n", "{key}", sizeof({key}));')
        lines += [f'  printf("%s %lld\\n", "{name}", (long long)({name}));' for name in values]
        src = tmp_path / f"{library}.c"
        src.write_text("#include <stddef.h>\n#include <stdio.h>\n" + "".join(f'#include "{h}"\n' for h in headers)
                       + "int main(void) {\n" + "\n".join(lines) + "\n  return 0;\n}\n")
        exe = tmp_path / library
        r = subprocess.run([cc, "-std=c11", "-I", str(include), str(src), "-o", str(exe)], capture_output=True,
                           text=True)
        if r.returncode != 0:  # a declared name the headers lack: the compiler's errors name it
            problems.append(f"{library}: does not compile against {include}:\n"
                            + "\n".join(re.findall(r"error: .*", r.stderr)[:40]))
            continue
        run = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
        got = {k: int(v) for k, v in (line.rsplit(" ", 1) for line in run)}
        problems += [f"{library}: {k}: declared {v}, headers {got[k]}" for k, v in {**want, **values}.items()
                     if got[k] != v]
    return problems


@needs_sdk
def test_declared_subset_matches_the_sdk_headers(tmp_path: Path) -> None:
    """Every declared struct's size and member offsets, and every declared constant, equal the SDK's."""
    assert SDK_INCLUDE is not None
    problems = _compare_with_headers(SDK_INCLUDE, tmp_path)
    assert not problems, "\n".join(problems)


def test_header_comparison_finds_a_difference(tmp_path: Path) -> None:
    """The comparison above, run here on headers written from the specs' own declarations (so it is exercised
    without an SDK): they agree with themselves, and one changed member or value is reported."""
    include = tmp_path / "include"
    (include / "HTP").mkdir(parents=True)
    (include / "System").mkdir()
    decl = {lib: yaml.safe_load((SPECS / "qnn" / f"{lib}.yaml").read_text())["declarations"]
            for lib in ("interface", "system")}
    (include / "QnnInterface.h").write_text(decl["interface"])
    (include / "HTP" / "QnnHtpDevice.h").write_text("")
    (include / "System" / "QnnSystemInterface.h").write_text(decl["system"])
    assert _compare_with_headers(include, tmp_path) == []
    (include / "QnnInterface.h").write_text(
        decl["interface"].replace("QNN_GRAPH_ERROR_INVALID_TENSOR = 6004", "QNN_GRAPH_ERROR_INVALID_TENSOR = 6044")
        .replace("typedef struct { float scale; int32_t offset; }", "typedef struct { double scale; int32_t offset; }"))
    problems = _compare_with_headers(include, tmp_path)
    assert "interface: QNN_GRAPH_ERROR_INVALID_TENSOR: declared 6004, headers 6044" in problems, problems
    assert "interface: Qnn_ScaleOffset_t: declared 8, headers 16" in problems, problems
    assert "interface: Qnn_ScaleOffset_t.offset: declared 4, headers 8" in problems, problems
