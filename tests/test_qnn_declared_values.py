"""The values declared in specs/qnn/*.yaml (``frontend: declared``: written from Qualcomm's public documentation,
not from headers) against what Qualcomm's real libraries themselves record or answer (onnxruntime-qnn wheel:
libQnnSaver.so, libQnnHtp.so of QNN 2.51, core API 2.40).

* The Saver writes every config it receives as C source with the *names* of the option values (its own table of
  names), so an option set here by its declared name must come back under that name, in the declared union member:
  QnnBackend_ConfigOption_t (issue 29: option 1 is ERROR_REPORTING, with an errorConfig member, not PLATFORM), the
  context options the 2.51 Saver records, the graph priority.
* QnnSaver_Config_t: each declared option changes what the Saver writes (APPEND_TIMESTAMP: time-stamped file names;
  FILE_CONFIG: the file names given in fileConfig; BACKEND_ID: custom configs recorded as the named backend's;
  WRITE_OUTPUT_HEADER / _FOOTER: the program's header / footer left out when 0).
* QNN_PROPERTY_* keys: libQnnHtp.so answers each declared key with 0 (supported) or 1000 (not supported), the
  core groups and a key in no group with QNN_PROPERTY_ERROR_UNKNOWN_KEY (2000).  Qnn_MemType_t cannot be checked by
  registering memory here (the x86 HTP and the Saver answer 1000 for every memory type, and the Saver records no
  QnnMem_register): its values are checked against the memory-type keys HTP knows (key = group + type).
* Error codes: QnnError_getMessage of libQnnHtp.so names each declared code (its message contains the name).
* Table slot 71 (QnnContext_addToDlc, declared from API 2.40's 75 slots): HTP answers it as a context call; the
  Saver leaves it NULL.
* QnnSystemInterface_t.v1_15 slots 8-15: libQnnSystem.so's DLC loaders name what they failed to load (a file, a
  binary buffer), the handle-taking entries answer a NULL handle with the System invalid handle.

The children (tests/qnn_values_child.py) run in subprocesses: one interface library per process.  The Saver's
output goes to temporary directories deleted by pytest; only names are read from it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, site_file

HERE = Path(__file__).resolve().parent
CHILD = HERE / "qnn_values_child.py"
pytestmark = pytest.mark.skipif(site_file("onnxruntime_qnn/libQnnHtp.so") is None,
                                reason="Qualcomm's QNN libraries (pip onnxruntime-qnn) are not installed")

# A config as the Saver writes it: `<Struct> <variable> = {<OPTION NAME>, .<member>=<value>};`
_CONFIG = re.compile(r"\b(Qnn\w+_Config_t) \w+ = \{(QNN_\w+), \.(\w+)=(.*)\};$", re.M)

# Keys of the public QnnProperty list that libQnnHtp.so 2.51 does not know (it answers 2000 for them): the tensor
# quantization-encoding keys and RETRIEVE_RAW (QNN_PROPERTY_GROUP_TENSOR + 8 .. + 15).  Measured, kept as data: a
# library that learns them makes this test say so.
HTP_UNKNOWN = frozenset(f"QNN_PROPERTY_TENSOR_SUPPORT_{k}" for k in (
    "QUANTIZATION_ENCODING_SCALE_OFFSET", "QUANTIZATION_ENCODING_AXIS_SCALE_OFFSET",
    "QUANTIZATION_ENCODING_BW_SCALE_OFFSET", "QUANTIZATION_ENCODING_BW_AXIS_SCALE_OFFSET",
    "QUANTIZATION_ENCODING_BLOCK", "QUANTIZATION_ENCODING_BLOCKWISE_EXPANSION", "QUANTIZATION_ENCODING_VECTOR",
    "RETRIEVE_RAW"))
CORE_GROUPS = frozenset(f"QNN_PROPERTY_GROUP_{g}" for g in ("CORE", "BACKEND", "CONTEXT", "GRAPH", "TENSOR"))
# codes no backend library's errorGetMessage names: the Saver's own (HTP does not know them; the Saver answers 1000
# for errorGetMessage) and the System library's, which backends pass through
NOT_HTP_CODES = frozenset({"QNN_SAVER_ERROR_DUMMY_RETVALUE", "QNN_SAVER_ERROR_ALREADY_INSTANTIATED",
                           "QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE", "QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT",
                           "QNN_SYSTEM_CONTEXT_ERROR_OPERATION_FAILED", "QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY"})


def _start(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    env.pop("IA_QNN_TRACE_DIR", None)
    return subprocess.Popen([sys.executable, str(CHILD), *args], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen[str]) -> dict[str, Any] | str:
    """The child's JSON line, or (a failed child) its output, for the test that reads it to report."""
    try:
        out, _ = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return f"{proc.args!r} timed out:\n{out[-3000:]}"
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return f"{proc.args!r} failed ({proc.returncode}):\n{out[-3000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    return result


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every child at once (each its own library, its own Saver output directory)."""
    files = ("plain", "timestamp", "fileconfig", "header", "footer")
    dirs = {w: tmp_path_factory.mktemp(f"saver_{w}") for w in ("configs", *files)}
    procs = {"configs": _start("configs", str(dirs["configs"])), "htp": _start("htp"), "system": _start("system")}
    for what in files:
        procs[what] = _start("files", str(dirs[what]), what)
    out: dict[str, Any] = {name: _finish(p) for name, p in procs.items()}
    for what in files:  # the model file, read once its child has exited (the Saver writes the end at exit): only
        model = dirs[what] / "declared_model.c"  # whether it has the program's header (includes), footer (main's return)
        text = model.read_text(errors="replace") if model.exists() else ""
        if isinstance(out[what], dict):
            out[what].update(header="#include" in text, footer="return error == 0" in text)
    saver_c = dirs["configs"] / "saver_output.c"
    out["saver_output"] = saver_c.read_text(errors="replace") if saver_c.exists() else ""
    return out


def run(runs: dict[str, Any], name: str, complete: bool = True) -> dict[str, Any]:
    """One child's result; its failure fails the test, and (``complete``) so does a declared name it needed and the
    bindings lack."""
    result = runs[name]
    if isinstance(result, str):
        pytest.fail(result)
    assert not (complete and result.get("missing")), f"names the declarations lack: {result['missing']}"
    return result  # type: ignore[no-any-return]


def test_each_config_option_is_recorded_under_its_declared_name_and_member(runs: dict[str, Any]) -> None:
    """The Saver names each option value it receives: the declared name of the value set must be that name, and
    the union member written the declared member (QnnBackend_ConfigOption_t, context options, graph priority)."""
    recorded = [(m.group(1), m.group(2), m.group(3)) for m in _CONFIG.finditer(runs["saver_output"])]
    configs = run(runs, "configs", complete=False)
    expected = [tuple(x) for x in configs["set"]]
    assert recorded == expected, (recorded, expected)
    assert not configs["missing"], f"names the declarations lack: {configs['missing']}"


def test_the_recorded_config_values_read_back(runs: dict[str, Any]) -> None:
    """The union members' layouts: what was stored through the declared member is what the Saver read."""
    run(runs, "configs")
    values = {(m.group(1), m.group(2)): m.group(4) for m in _CONFIG.finditer(runs["saver_output"])}
    backend, context = "QnnBackend_Config_t", "QnnContext_Config_t"
    # errorConfig: {reportingLevel, storageLimit} (DETAILED = 1, 77)
    assert values[backend, "QNN_BACKEND_CONFIG_OPTION_ERROR_REPORTING"] == "{(Qnn_ErrorReportingLevel_t)1, 77}"
    assert values[backend, "QNN_BACKEND_CONFIG_OPTION_PLATFORM"] == '"key:value"'
    assert values[context, "QNN_CONTEXT_CONFIG_OPTION_ERROR_REPORTING"] == "{(Qnn_ErrorReportingLevel_t)0, 5}"
    assert values[context, "QNN_CONTEXT_CONFIG_OPTION_PRIORITY"] == "(Qnn_Priority_t)150"  # NORMAL_HIGH
    assert values[context, "QNN_CONTEXT_CONFIG_ASYNC_EXECUTION_QUEUE_DEPTH"] == (
        "{QNN_CONTEXT_ASYNC_EXECUTION_QUEUE_DEPTH_TYPE_NUMERIC, .depth=3}")
    assert values[context, "QNN_CONTEXT_CONFIG_MEMORY_LIMIT_HINT"] == "123456"
    assert values[context, "QNN_CONTEXT_CONFIG_OPTION_OEM_STRING"] == '"oem"'
    assert values["QnnGraph_Config_t", "QNN_GRAPH_CONFIG_OPTION_PRIORITY"] == "(Qnn_Priority_t)200"  # HIGH
    # QNN_SAVER_CONFIG_OPTION_BACKEND_ID (backendId = QNN_BACKEND_ID_DSP): the CUSTOM backend config was recorded
    # as DSP's own custom config, which the Saver leaves out when it is not told the backend
    assert re.search(r"\bQnnDspBackend_CustomConfig_t \w+ = \{QNN_DSP_BACKEND_CONFIG_OPTION_\w+",
                     runs["saver_output"]), "BACKEND_ID did not reach the Saver"


def test_the_saver_options_change_what_the_saver_writes(runs: dict[str, Any]) -> None:
    """QnnSaver_ConfigOption_t / QnnSaver_Config_t: APPEND_TIMESTAMP (appendTimestamp) time-stamps the file names,
    FILE_CONFIG (fileConfig: model, data file name) names them, WRITE_OUTPUT_HEADER / _FOOTER leave the program's
    header / footer out."""
    plain = run(runs, "plain")["files"]
    assert plain == ["params.bin", "saver_output.c"]
    stamped = run(runs, "timestamp")["files"]
    assert len(stamped) == 2 and all(re.fullmatch(r"(params|saver_output)_.+\.(bin|c)", f) for f in stamped), stamped
    assert stamped != plain
    named = run(runs, "fileconfig")
    assert named["files"] == ["declared_data.bin", "declared_model.c"] and named["header"] and named["footer"]
    # WRITE_OUTPUT_HEADER (4) / WRITE_OUTPUT_FOOTER (5) = 0, with FILE_CONFIG: that part of the program is left out
    no_header, no_footer = run(runs, "header"), run(runs, "footer")
    assert (no_header["header"], no_header["footer"]) == (False, True), no_header
    assert (no_footer["header"], no_footer["footer"]) == (True, False), no_footer


def test_htp_knows_every_declared_property_key(runs: dict[str, Any]) -> None:
    import ironaccelerator.backends.qnn.interface as q

    htp = run(runs, "htp")
    answers: dict[str, int] = htp["answers"]
    unknown_key = int(q.Qnn_ErrorCode_t.QNN_PROPERTY_ERROR_UNKNOWN_KEY)
    assert htp["unknown"] == unknown_key  # a key in no group
    declared = {n for n in dir(q) if n.startswith("QNN_PROPERTY_") and n not in q.Qnn_ErrorCode_t.__members__}
    assert set(answers) == declared and len(declared) > 80, sorted(declared ^ set(answers))
    wrong = {n: a for n, a in answers.items()
             if a != (unknown_key if n in CORE_GROUPS | HTP_UNKNOWN else a if a in (0, 1000) else -1)}
    assert not wrong, wrong
    # each key is its group plus a small number; no two declared keys share a value
    values = [getattr(q, n) for n in declared]
    assert len(set(values)) == len(values)


def test_memory_types_are_the_memory_keys_htp_knows(runs: dict[str, Any]) -> None:
    """Qnn_MemType_t starts at 1 (ION, CUSTOM, DMA_BUF): each type's QNN_PROPERTY_MEMORY_SUPPORT_MEM_TYPE_* key is
    the memory group plus the type, and HTP knows those three keys (issue 29: the spec had 0, 1, 2, so
    MemoryKind.UNIFIED's DMA-BUF descriptor asked for what the library calls CUSTOM)."""
    import ironaccelerator.backends.qnn.interface as q

    answers: dict[str, int] = run(runs, "htp")["answers"]
    for t in ("ION", "CUSTOM", "DMA_BUF"):
        key = f"QNN_PROPERTY_MEMORY_SUPPORT_MEM_TYPE_{t}"
        assert int(q.Qnn_MemType_t[f"QNN_MEM_TYPE_{t}"]) == getattr(q, key) - q.QNN_PROPERTY_GROUP_MEMORY, t
        assert answers[key] in (0, 1000), (key, answers[key])
    assert answers["QNN_PROPERTY_GROUP_MEMORY"] in (0, 1000)  # an optional group: a key ("is QnnMem there")


def test_each_declared_error_code_is_named_by_the_library(runs: dict[str, Any]) -> None:
    """QnnError_getMessage of libQnnHtp.so: the message of each declared code contains the declared name."""
    messages: dict[str, str] = run(runs, "htp")["messages"]
    misnamed = {n: m for n, m in messages.items() if n not in NOT_HTP_CODES and n not in m}
    assert not misnamed, misnamed
    assert len(messages) - len(NOT_HTP_CODES) > 100


def test_slot_71_is_context_add_to_dlc(runs: dict[str, Any]) -> None:
    """QnnInterface_t.v2_40 slot 71, QnnContext_addToDlc(context, dlc): of slots 71-74 only this one answers a NULL
    context with the context API's invalid handle (HTP; 72 and 73 answer 1000, 74 a backend error); the Saver leaves
    it NULL, which the binding reports as a missing entry naming it."""
    htp = run(runs, "htp")["slot71"]
    assert (htp["kind"], htp["code"]) == ("INVALID_HANDLE", 5002), htp
    assert "QNN_CONTEXT_ERROR_INVALID_HANDLE" in htp["message"], htp
    saver = run(runs, "configs")["slot71"]
    assert saver["kind"] == "SYMBOL_NOT_FOUND" and "contextAddToDlc (NULL)" in saver["message"], saver


def test_system_slots_8_to_15_answer_as_declared(runs: dict[str, Any]) -> None:
    """QnnSystemInterface_t.v1_15 slots 8-15 (10 and 13 are kept unbound: they take structs by value): the DLC
    loaders log what they failed to load (answering 1002), the others answer a NULL handle with 30000."""
    calls: dict[str, Any] = run(runs, "system")["calls"]
    file, binary = calls["QnnSystemDlc_createFromFile"], calls["QnnSystemDlc_createFromBinary"]
    assert file["code"] == 1002 and any("DLC from file" in m and "/nonexistent/declared.dlc" in m
                                        for m in file["messages"]), file
    assert binary["code"] == 1002 and any("DLC from binary buffer" in m for m in binary["messages"]), binary
    for name in ("QnnSystemDlc_getOpMappings", "QnnSystemDlc_free", "QnnSystemProfile_serializeEventData",
                 "QnnSystemProfile_freeSerializationTarget"):
        assert (calls[name]["kind"], calls[name]["code"]) == ("INVALID_HANDLE", 30000), (name, calls[name])
        assert not calls[name]["messages"], (name, calls[name])
