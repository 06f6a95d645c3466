"""Run by test_qnn_declared_values.py in a subprocess (one QNN interface library per process): the values declared
in specs/qnn/*.yaml, given to Qualcomm's real libraries, and what those libraries record or answer.

    qnn_values_child.py configs DIR         the Saver (BACKEND_ID = DSP), recording into DIR: a backend created with
                                            one config of each QnnBackend_ConfigOption_t, contexts with each context
                                            option the Saver records, a graph with its priority
    qnn_values_child.py files DIR WHAT      QnnSaver_initialize with OUTPUT_DIRECTORY = DIR and, by WHAT, nothing
                                            (plain), APPEND_TIMESTAMP (timestamp), FILE_CONFIG (fileconfig), or
                                            FILE_CONFIG with WRITE_OUTPUT_HEADER / _FOOTER = 0 (header, footer),
                                            then one backend created and freed: the files the Saver wrote
    qnn_values_child.py htp                 libQnnHtp.so: QnnProperty_hasCapability of each declared QNN_PROPERTY_*
                                            value, QnnError_getMessage of each declared error code, table slot 71
    qnn_values_child.py system              libQnnSystem.so: the System table's slots 8-15 by their declared names

Each mode prints one line of JSON: what it set (by the declared names) and what came back.  The parent reads the
Saver's output (saver_output.c, in a temporary directory it deletes) for the names the Saver wrote.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import ironaccelerator.backends.qnn.interface as q
import ironaccelerator.backends.qnn.saver as s
from ironaccelerator import Error

WHAT = sys.argv[1]
ffi = q.ffi
_keep: list[Any] = []


def keep(x: Any) -> Any:
    _keep.append(x)
    return x


def cstr(text: str) -> Any:
    return keep(ffi.new("char[]", text.encode()))


missing: list[str] = []  # declared names this run needed and the bindings lack (old declarations): reported
issued: list[tuple[str, str, str]] = []  # (struct, option name, union member) of each config given, in order


def config_list(ctype: str, configs: list[tuple[str, str, Any]]) -> Any:
    """A NULL-terminated list of ``ctype`` configs, each (option name, member name, fill); a config whose fill
    needs a name the declarations lack (KeyError: an enum value; AttributeError: a union member) is left out and
    named in ``missing``; the others are appended to ``issued``."""
    items = []
    for option, member, fill in configs:
        c = keep(ffi.new(f"{ctype} *"))
        try:
            fill(c)
        except (KeyError, AttributeError) as exc:
            missing.append(f"{ctype}: {exc}")
            continue
        items.append(c)
        issued.append((ctype, option, member))
    return keep(ffi.new(f"const {ctype} *[]", items + [ffi.NULL]))


def saver_init(directory: str, *extra: tuple[str, dict[str, Any]]) -> None:
    """QnnSaver_initialize(OUTPUT_DIRECTORY = directory, extra options by their declared names), then the interface
    bound to the same file."""
    from ironaccelerator_runtime.backends.qnn_saver import saver_candidates

    s.use_library(*saver_candidates())
    O = s.QnnSaver_ConfigOption_t  # noqa: E741
    items = [(O.QNN_SAVER_CONFIG_OPTION_OUTPUT_DIRECTORY, {"outputDirectory": directory})]
    for name, fields in extra:
        if name in O.__members__:
            items.append((O[name], fields))
        else:
            missing.append(f"QnnSaver_ConfigOption_t: {name!r}")
    configs = []
    for option, fields in items:
        c = keep(s.ffi.new("QnnSaver_Config_t *"))
        c.option = option
        try:
            for field, value in fields.items():
                if field == "fileConfig":
                    c.fileConfig.modelFileName = keep(s.ffi.new("char[]", value[0].encode()))
                    c.fileConfig.dataFileName = keep(s.ffi.new("char[]", value[1].encode()))
                elif isinstance(value, str):
                    setattr(c, field, keep(s.ffi.new("char[]", value.encode())))
                else:
                    setattr(c, field, value)
        except AttributeError as exc:
            missing.append(f"QnnSaver_Config_t: {exc}")
            continue
        configs.append(c)
    s.QnnSaver_initialize(keep(s.ffi.new("const QnnSaver_Config_t *[]", configs + [s.ffi.NULL])))
    from ironaccelerator.backends.qnn.saver._binding import BINDING

    assert BINDING.path is not None  # opened by QnnSaver_initialize
    q.use_library(BINDING.path)


def option(enum: Any, name: str, member: str, **fields: Any) -> tuple[str, str, Any]:
    """A config: ``option`` = the declared value ``name`` of ``enum``; ``member`` set to ``fields['value']``, or
    its sub-fields set from ``fields``."""
    def fill(c: Any) -> None:
        c.option = enum[name]
        if "value" in fields:
            setattr(c, member, fields["value"])
        else:
            for sub, value in fields.items():
                setattr(getattr(c, member), sub, value)
    return name, member, fill


def configs(directory: str) -> dict[str, Any]:
    # BACKEND_ID: custom configs are recorded as the named backend's (DSP: the Saver knows its option names)
    saver_init(directory, ("QNN_SAVER_CONFIG_OPTION_BACKEND_ID", {"backendId": q.QNN_BACKEND_ID_DSP}))
    B, C = q.QnnBackend_ConfigOption_t, q.QnnContext_ConfigOption_t
    level = q.Qnn_ErrorReportingLevel_t
    dsp_custom = keep(ffi.new("uint32_t[16]"))  # a DSP backend custom config: its option 0, value 0
    backend = q.QnnBackend_create(ffi.NULL, config_list("QnnBackend_Config_t", [
        option(B, "QNN_BACKEND_CONFIG_OPTION_CUSTOM", "customConfig", value=dsp_custom),
        option(B, "QNN_BACKEND_CONFIG_OPTION_ERROR_REPORTING", "errorConfig",
               reportingLevel=level.QNN_ERROR_REPORTING_LEVEL_DETAILED, storageLimit=77),
        option(B, "QNN_BACKEND_CONFIG_OPTION_PLATFORM", "platformOption", value=cstr("key:value"))]))
    device = q.QnnDevice_create(ffi.NULL, ffi.NULL)
    # one context per option: the options the 2.51 Saver records (later ones it refuses as invalid arguments)
    graphs = keep(ffi.new("const char *[2]", [cstr("g"), ffi.NULL]))
    depth = q.QnnContext_AsyncExecutionQueueDepthType_t.QNN_CONTEXT_ASYNC_EXECUTION_QUEUE_DEPTH_TYPE_NUMERIC
    context = None
    for config in (
            option(C, "QNN_CONTEXT_CONFIG_OPTION_PRIORITY", "priority", value=q.Qnn_Priority_t.QNN_PRIORITY_NORMAL_HIGH),
            option(C, "QNN_CONTEXT_CONFIG_OPTION_ERROR_REPORTING", "errorConfig",
                   reportingLevel=level.QNN_ERROR_REPORTING_LEVEL_BRIEF, storageLimit=5),
            option(C, "QNN_CONTEXT_CONFIG_OPTION_OEM_STRING", "oemString", value=cstr("oem")),
            option(C, "QNN_CONTEXT_CONFIG_ASYNC_EXECUTION_QUEUE_DEPTH", "asyncExeQueueDepth", type=depth, depth=3),
            option(C, "QNN_CONTEXT_CONFIG_ENABLE_GRAPHS", "enableGraphs", value=graphs),
            option(C, "QNN_CONTEXT_CONFIG_MEMORY_LIMIT_HINT", "memoryLimitHint", value=123456),
            option(C, "QNN_CONTEXT_CONFIG_PERSISTENT_BINARY", "isPersistentBinary", value=1)):
        context = q.QnnContext_create(backend, device, config_list("QnnContext_Config_t", [config]))
    q.QnnGraph_create(context, b"g", config_list("QnnGraph_Config_t", [
        option(q.QnnGraph_ConfigOption_t, "QNN_GRAPH_CONFIG_OPTION_PRIORITY", "priority",
               value=q.Qnn_Priority_t.QNN_PRIORITY_HIGH)]))
    # the Saver leaves slots 59-74 NULL: slot 71 too
    return {"set": issued, "missing": missing, "slot71": refused(lambda: q.QnnContext_addToDlc(ffi.NULL, ffi.NULL))}


def refused(call: Any) -> dict[str, Any]:
    """What a call that must fail raised: its kind, masked code and message (a missing name: in ``missing``)."""
    try:
        call()
    except Error as exc:
        return {"kind": exc.kind.name, "code": int(exc.code or 0) & 0xFFFF, "message": str(exc)}
    except AttributeError as exc:
        missing.append(str(exc))
        return {}
    return {"kind": None}


def message(code: int) -> str:
    try:
        text = q.QnnError_getMessage(code)
    except Error as exc:
        return f"refused: {exc}"
    return text if isinstance(text, str) else ffi.string(text).decode(errors="replace")


def files(directory: str, what: str) -> dict[str, Any]:
    extra: list[tuple[str, dict[str, Any]]] = []
    if what == "timestamp":
        extra = [("QNN_SAVER_CONFIG_OPTION_APPEND_TIMESTAMP", {"appendTimestamp": 1})]
    elif what != "plain":  # fileconfig, or fileconfig with WRITE_OUTPUT_<what> = 0 (header, footer)
        extra = [("QNN_SAVER_CONFIG_OPTION_FILE_CONFIG", {"fileConfig": ("declared_model.c", "declared_data.bin")})]
        if what in ("header", "footer"):
            # the flag is the union's first byte (see saver.yaml): set through appendTimestamp
            extra.append((f"QNN_SAVER_CONFIG_WRITE_OUTPUT_{what.upper()}", {"appendTimestamp": 0}))
    saver_init(directory, *extra)
    q.QnnBackend_free(q.QnnBackend_create(ffi.NULL, ffi.NULL))
    return {"files": sorted(os.listdir(directory)), "missing": missing}


def htp() -> dict[str, Any]:
    answers = {}
    for name in dir(q):
        if name.startswith("QNN_PROPERTY_") and name not in q.Qnn_ErrorCode_t.__members__:
            try:
                q.QnnProperty_hasCapability(getattr(q, name))
                answers[name] = 0
            except Error as exc:
                answers[name] = int(exc.code or 0) & 0xFFFF
    try:
        q.QnnProperty_hasCapability(99999)  # in no group
        unknown = 0
    except Error as exc:
        unknown = int(exc.code or 0) & 0xFFFF
    messages = {code.name: message(int(code)) for code in q.Qnn_ErrorCode_t}
    # slot 71 (QnnContext_addToDlc), with a backend up: a NULL context is the context API's invalid handle
    backend = q.QnnBackend_create(ffi.NULL, ffi.NULL)
    slot71 = refused(lambda: q.QnnContext_addToDlc(ffi.NULL, ffi.NULL))
    q.QnnBackend_free(backend)
    from ironaccelerator.backends.qnn.interface._binding import BINDING

    return {"answers": answers, "unknown": unknown, "messages": messages, "slot71": slot71, "path": BINDING.path,
            "missing": missing}


def system() -> dict[str, Any]:
    """libQnnSystem.so's table slots 8-15 (System API 1.15) called through their declared names: what each
    answers, and the messages its System log handle receives meanwhile."""
    import ironaccelerator.backends.qnn.system as sy
    from ironaccelerator_runtime.backends.qnn_log import format_message

    messages: list[str] = []
    callback = keep(sy.ffi.callback("QnnLog_Callback_t", lambda fmt, level, ts, args:
                                    messages.append(format_message(fmt, args))))
    log = sy.QnnSystemLog_create(callback, q.QnnLog_Level_t.QNN_LOG_LEVEL_DEBUG)
    calls = {
        "QnnSystemDlc_createFromFile": lambda: sy.QnnSystemDlc_createFromFile(log, b"/nonexistent/declared.dlc"),
        "QnnSystemDlc_createFromBinary": lambda: sy.QnnSystemDlc_createFromBinary(log, b"\0junk" * 64, 320),
        "QnnSystemDlc_getOpMappings": lambda: sy.QnnSystemDlc_getOpMappings(sy.ffi.NULL),
        "QnnSystemDlc_free": lambda: sy.QnnSystemDlc_free(sy.ffi.NULL),
        "QnnSystemProfile_serializeEventData": lambda: sy.QnnSystemProfile_serializeEventData(sy.ffi.NULL,
                                                                                              sy.ffi.NULL, 0),
        "QnnSystemProfile_freeSerializationTarget": lambda: sy.QnnSystemProfile_freeSerializationTarget(sy.ffi.NULL),
    }
    out: dict[str, Any] = {}
    for name, call in calls.items():
        messages.clear()
        answer = refused(call)
        answer["messages"] = list(messages)
        out[name] = answer
    sy.QnnSystemLog_free(log)
    return {"calls": out, "missing": missing}


if WHAT == "configs":
    out = configs(sys.argv[2])
elif WHAT == "files":
    out = files(sys.argv[2], sys.argv[3])
elif WHAT == "htp":
    out = htp()
elif WHAT == "system":
    out = system()
else:
    raise SystemExit(f"unknown mode {WHAT}")
print(json.dumps(out))
