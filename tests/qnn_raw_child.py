"""Checks of the raw QNN bindings (ironaccelerator.backends.qnn.interface / .system / .saver) against Qualcomm's
real libraries, run in a child interpreter by test_qnn_raw.py so that each binding mode gets a process of its own
(a QNN library is bound once per process, and ``use_library`` only before the first call).

``qnn_raw_child.py MODE GROUP [ARG]``: MODE is ``api`` (the compiled cffi modules) or ``abi`` (the compiled modules
hidden: ``sys.modules[<lib>._cffi] = None`` makes their import fail, so the pre-parsed ABI modules are used, as on a
machine without a compiler).  GROUP names the checks (``CHECKS``); ARG is a file the group reads or writes.  Prints
each check's name before running it (a crash names it), then one line of JSON: check -> null (passed) or the
traceback.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any, Callable

MODE = sys.argv[1]
LIBS = ("interface", "system", "saver")
if MODE == "abi":
    for _lib in LIBS:
        sys.modules[f"ironaccelerator.backends.qnn.{_lib}._cffi"] = None  # type: ignore[assignment]

import numpy as np  # noqa: E402

import ironaccelerator.backends.qnn.interface as q  # noqa: E402
import ironaccelerator.backends.qnn.saver as sv  # noqa: E402
import ironaccelerator.backends.qnn.system as sy  # noqa: E402
from ironaccelerator import Error, ErrorKind  # noqa: E402
from ironaccelerator.backends.qnn.interface._binding import BINDING as QB  # noqa: E402
from ironaccelerator.backends.qnn.saver._binding import BINDING as SVB  # noqa: E402
from ironaccelerator.backends.qnn.system._binding import BINDING as SYB  # noqa: E402

import qnn_graphs as G  # noqa: E402

ffi, NULL = q.ffi, q.ffi.NULL
for _m in (q, sy, sv):
    assert _m.BINDING_MODE == MODE, (_m.__name__, _m.BINDING_MODE, MODE)


def error(call: Callable[[], object]) -> Error:
    try:
        call()
    except Error as e:
        return e
    raise AssertionError("no ironaccelerator.Error")


def run_graph(g: G.Graph, seed: int) -> None:
    """Execute ``g`` on fresh inputs and compare with numpy."""
    a, b = G.inputs(g.dtype, seed)
    c = np.zeros_like(a)
    ins, outs = G.bind(g, [a, b, c])
    q.QnnGraph_execute(g.handle, ins, 2, outs, 1, NULL, NULL)
    assert c.any(), "the output buffer was not written"
    G.check(g.dtype, a, b, c)


# ------------------------------------------------------------------------------------------- HTP, one process


def check_providers() -> None:
    lst, n = q.QnnInterface_getProviders()
    assert n == 1, n
    p = lst[0]
    assert p.backendId == q.QNN_BACKEND_ID_HTP == 6, p.backendId
    assert ffi.string(p.providerName) == b"HTP_QTI_AISW", ffi.string(p.providerName)
    core = p.apiVersion.coreApiVersion
    assert (core.major, core.minor) == (q.QNN_API_VERSION_MAJOR, q.QNN_API_VERSION_MINOR) == (2, 40), (core.major, core.minor)
    # the table the binding calls is this provider's: its entry is the function getApiVersion reached
    assert p.v2_40.backendGetApiVersion != NULL and p.v2_40.contextGetBinarySectionSize != NULL


def check_versions() -> None:
    v = q.QnnBackend_getApiVersion()
    assert (v.coreApiVersion.major, v.coreApiVersion.minor) == (2, 40), v
    assert (v.backendApiVersion.major, v.backendApiVersion.minor) == (5, 51)
    build = q.QnnBackend_getBuildId()
    assert isinstance(build, str) and build.startswith("v2.51."), build
    # the same through the unchecked fast path: status 0 and the same values
    p = ffi.new("Qnn_ApiVersion_t *")
    assert q.unchecked.QnnBackend_getApiVersion(p) == 0 and p.backendApiVersion.minor == 51
    assert q.has("QnnBackend_getApiVersion") and q.has("QnnInterface_getProviders") and not q.has("nope")


def check_lifecycle() -> None:
    info = q.QnnDevice_getPlatformInfo(NULL)
    try:
        assert info.version == 1 and info.v1.numHwDevices == 1, info.v1.numHwDevices
        hw = info.v1.hwDevices[0].v1
        ext = ffi.cast("QnnHtpDevice_DeviceInfoExtension_t *", hw.deviceInfoExtension).onChipDevice
        assert (ext.socModel, int(ext.arch), ext.vtcmSize) == (30, 68, 4), (ext.socModel, ext.arch, ext.vtcmSize)
    finally:
        q.QnnDevice_freePlatformInfo(NULL, info)
    for _ in range(2):  # a full lifecycle twice: free really frees, create works again
        s = G.open_session()
        assert NULL not in (s.backend, s.device, s.context)
        s.close()


SESSION: dict[str, Any] = {}


def session() -> G.Session:
    if "s" not in SESSION:
        s = G.open_session()
        for dt in ("f32", "f16", "u8"):
            G.add_graph(s, f"add_{dt}", dt)
        SESSION["s"] = s
    found: G.Session = SESSION["s"]
    return found


def check_execute() -> None:
    s = session()
    for g in s.graphs:
        for seed in (1, 2):
            run_graph(g, seed)


def check_binary_roundtrip() -> None:
    s = session()
    size = q.QnnContext_getBinarySize(s.context)
    blob = s.binary()
    assert 16 << 10 < len(blob) <= size < 4 << 20, (len(blob), size)
    if len(sys.argv) > 3:
        Path(sys.argv[3]).write_bytes(blob)  # for the next process (check_from_binary)
    ctx = q.QnnContext_createFromBinary(s.backend, s.device, NULL, blob, len(blob), NULL)
    try:
        for g in s.graphs:
            h = q.QnnGraph_retrieve(ctx, g.name)
            assert h != NULL
            run_graph(G.Graph(g.name, g.dtype, h, g.inputs, g.outputs), 7)
    finally:
        q.QnnContext_free(ctx, NULL)


def tensor_v1(t: Any) -> Any:
    assert t.version in (1, 2), t.version
    return t.v1  # Qnn_TensorV2_t begins with Qnn_TensorV1_t's fields


def check_system_info() -> None:
    s = session()
    blob = s.binary()
    assert sy.QnnSystemInterface_getProviders()[1] >= 1
    h = sy.QnnSystemContext_create()
    try:
        buf = ffi.from_buffer(bytearray(blob))
        info, info_size = sy.QnnSystemContext_getBinaryInfo(h, buf, len(blob))
        assert info.version == 3, info.version
        v3 = info.contextBinaryInfoV3
        assert v3.backendId == 6 and (v3.coreApiVersion.major, v3.coreApiVersion.minor) == (2, 40)
        assert v3.numGraphs == len(s.graphs), v3.numGraphs
        seen = {}
        for i in range(v3.numGraphs):
            gi = v3.graphs[i]
            assert gi.version == 3, gi.version
            g3 = gi.graphInfoV3
            seen[sy.ffi.string(g3.graphName).decode()] = g3
        assert set(seen) == {g.name for g in s.graphs}, set(seen)
        for g in s.graphs:
            g3 = seen[g.name]
            assert (g3.numGraphInputs, g3.numGraphOutputs) == (2, 1)
            got = [tensor_v1(g3.graphInputs[k]) for k in range(2)] + [tensor_v1(g3.graphOutputs[0])]
            built = [t.v1 for t in g.inputs + g.outputs]
            for gt, bt in zip(got, built):
                assert sy.ffi.string(gt.name) == ffi.string(bt.name), (sy.ffi.string(gt.name), ffi.string(bt.name))
                assert gt.id == bt.id, (gt.id, bt.id)
                assert gt.dataType == bt.dataType == G.DTYPES[g.dtype][0], (gt.dataType, bt.dataType)
                assert gt.type == bt.type
                assert [gt.dimensions[k] for k in range(gt.rank)] == [1, G.N]
                if g.dtype == "u8":
                    so, want = gt.quantizeParams.scaleOffsetEncoding, bt.quantizeParams.scaleOffsetEncoding
                    assert gt.quantizeParams.quantizationEncoding == 0  # scale/offset
                    assert (so.scale, so.offset) == (want.scale, want.offset), (so.scale, so.offset)
                    assert abs(so.scale - (G.QA if gt.type == G.APP_WRITE else G.QC)[0]) < 1e-7
        # a malformed binary: the System library's own code, INVALID_VALUE
        junk = ffi.from_buffer(bytearray(b"\x5a" * 4096))
        e = error(lambda: sy.QnnSystemContext_getBinaryInfo(h, junk, 4096))
        assert (e.kind, e.code, e.function) == (ErrorKind.INVALID_VALUE, 30010, "QnnSystemContext_getBinaryInfo"), e
    finally:
        sy.QnnSystemContext_free(h)


def check_errors() -> None:
    s = session()
    g = s.graphs[0]
    a, b = G.inputs(g.dtype, 3)
    c = np.zeros_like(a)
    ins, outs = G.bind(g, [a, b, c])
    # wrong input count
    e = error(lambda: q.QnnGraph_execute(g.handle, ins, 1, outs, 1, NULL, NULL))
    assert (e.kind, e.code, e.function) == (ErrorKind.INVALID_VALUE, 6004, "QnnGraph_execute"), e
    # the library's own message (QnnError_getMessage), which begins with the name: said once
    assert str(e).startswith("QnnGraph_execute failed with QNN_GRAPH_ERROR_INVALID_TENSOR: ") and str(e).endswith(
        " (6004)") and str(e).count("QNN_GRAPH_ERROR_INVALID_TENSOR") == 1, str(e)
    # asynchronous execution: not supported by HTP here
    e = error(lambda: q.QnnGraph_executeAsync(g.handle, ins, 2, outs, 1, NULL, NULL, NULL, NULL))
    assert (e.kind, e.code) == (ErrorKind.UNSUPPORTED, 1000), e
    # unknown graph name
    e = error(lambda: q.QnnGraph_retrieve(s.context, "no_such_graph"))
    assert (e.kind, e.code, e.function) == (ErrorKind.INVALID_VALUE, 6003, "QnnGraph_retrieve"), e
    # registering memory: not supported (RAW client buffers only)
    for mem_type in (q.Qnn_MemType_t.QNN_MEM_TYPE_ION, q.Qnn_MemType_t.QNN_MEM_TYPE_CUSTOM,
                     q.Qnn_MemType_t.QNN_MEM_TYPE_DMA_BUF):
        md = ffi.new("Qnn_MemDescriptor_t[1]")
        md[0].memType = mem_type
        e = error(lambda: q.QnnMem_register(s.context, md, 1, ffi.new("Qnn_MemHandle_t[1]")))
        assert (e.kind, e.code) == (ErrorKind.UNSUPPORTED, 1000), e
    # a garbage context binary
    junk = b"\x00garbage" * 512
    e = error(lambda: q.QnnContext_createFromBinary(s.backend, s.device, NULL, junk, len(junk), NULL))
    assert (e.kind, e.code) == (ErrorKind.INVALID_VALUE, 30001), e
    # the session still works after every failure above
    run_graph(g, 4)


def check_masked_codes() -> None:
    """A status with bits set above the code's 16 maps by its low 16 bits; Error.code keeps the whole status."""
    b = QB
    i = b.index["QnnGraph_execute"]
    for code, kind in ((6004, ErrorKind.INVALID_VALUE), (1000, ErrorKind.UNSUPPORTED), (1002, ErrorKind.OUT_OF_MEMORY),
                       (6003, ErrorKind.INVALID_VALUE), (14002, ErrorKind.NO_DEVICE)):
        for upper in (0, 1 << 16, 0xABCD << 32, 0xFFFF << 48):
            status = upper | code
            e = b.error(status, i)
            assert (e.kind, e.code) == (kind, status), (status, e)
            assert q.Qnn_ErrorCode_t(code).name in str(e) and f"({status})" in str(e), str(e)
    # upper bits over a code the table lacks: UNKNOWN, still the whole status
    e = b.error((7 << 40) | 65000, i)
    assert (e.kind, e.code) == (ErrorKind.UNKNOWN, (7 << 40) | 65000), e
    # the System and Saver bindings mask too
    for m, code, kind in ((SYB, 30010, ErrorKind.INVALID_VALUE), (SVB, 1004, ErrorKind.INVALID_VALUE)):
        e = m.error((3 << 56) | code, 0)
        assert (e.kind, e.code) == (kind, (3 << 56) | code), e


def check_use_library_after_load() -> None:
    """use_library once the library is loaded: another file is refused, the loaded one accepted; bad arguments."""
    q.QnnBackend_getApiVersion()  # loaded
    loaded = QB.path
    assert loaded and loaded.endswith("libQnnHtp.so"), loaded
    saver = str(Path(loaded).with_name("libQnnSaver.so"))
    e = error(lambda: q.use_library(saver))
    assert e.kind is ErrorKind.INVALID_VALUE and "already loaded from" in str(e) and loaded in str(e), e
    q.use_library(loaded)  # the file already bound: nothing to change
    q.use_library(Path(loaded))  # ... also as an os.PathLike
    e = error(lambda: q.use_library(Path(saver)))
    assert e.kind is ErrorKind.INVALID_VALUE and "already loaded from" in str(e), e
    for bad in ((), ("",), (3,), (None,), (b"libQnnHtp.so",)):
        e = error(lambda: q.use_library(*bad))
        assert e.kind is ErrorKind.INVALID_VALUE and "use_library" in str(e), (bad, e)
    assert QB.path == loaded
    assert q.QnnBackend_getBuildId().startswith("v2.51.")  # still bound to HTP


# ------------------------------------------------------------------------------------------ other processes


def check_from_binary() -> None:
    """A context binary written by another process: loaded, its graphs retrieved and executed here."""
    blob = Path(sys.argv[3]).read_bytes()
    backend = q.QnnBackend_create(NULL, NULL)
    device = q.QnnDevice_create(NULL, NULL)
    ctx = q.QnnContext_createFromBinary(backend, device, NULL, blob, len(blob), NULL)
    try:
        h = sy.QnnSystemContext_create()
        info, _ = sy.QnnSystemContext_getBinaryInfo(h, ffi.from_buffer(bytearray(blob)), len(blob))
        v3 = info.contextBinaryInfoV3
        names = {}
        for k in range(v3.numGraphs):
            g3 = v3.graphs[k].graphInfoV3
            # the tensors as the binary describes them: built into Qnn_Tensor_t values of this process
            gin = ffi.cast("Qnn_Tensor_t *", int(sy.ffi.cast("uintptr_t", g3.graphInputs)))
            gout = ffi.cast("Qnn_Tensor_t *", int(sy.ffi.cast("uintptr_t", g3.graphOutputs)))
            ins, outs = [ffi.new("Qnn_Tensor_t *", gin[j])[0] for j in range(2)], [ffi.new("Qnn_Tensor_t *", gout[0])[0]]
            names[sy.ffi.string(g3.graphName).decode()] = (ins, outs)
        assert set(names) == {"add_f32", "add_f16", "add_u8"}, names
        for name, (ins, outs) in names.items():
            g = G.Graph(name, name[4:], q.QnnGraph_retrieve(ctx, name), ins, outs)
            run_graph(g, 11)
        sy.QnnSystemContext_free(h)
    finally:
        q.QnnContext_free(ctx, NULL)
        q.QnnDevice_free(device)
        q.QnnBackend_free(backend)


def check_saver_null_entries() -> None:
    """libQnnSaver.so bound as the interface library: its table leaves slots 59-74 NULL; calling one is
    SYMBOL_NOT_FOUND naming the entry, the library and its provider, every time, never a crash."""
    out = tempfile.mkdtemp(prefix="ia-qnn-saver-")
    try:
        cfg = sv.ffi.new("QnnSaver_Config_t *")
        cfg.option = sv.QnnSaver_ConfigOption_t.QNN_SAVER_CONFIG_OPTION_OUTPUT_DIRECTORY
        where = sv.ffi.new("char[]", out.encode())
        cfg.outputDirectory = where
        sv.QnnSaver_initialize(sv.ffi.new("const QnnSaver_Config_t *[2]", [cfg, sv.ffi.NULL]))
        saver = SVB.path
        assert saver and saver.endswith("libQnnSaver.so"), saver
        q.use_library(saver)
        lst, n = q.QnnInterface_getProviders()
        assert n == 1 and lst[0].backendId == q.QNN_BACKEND_ID_SAVER, (n, lst[0].backendId)
        assert q.QnnBackend_getApiVersion().coreApiVersion.minor == 40
        assert QB.path == saver
        cases = {"QnnContext_getBinarySectionSize": ("contextGetBinarySectionSize", (NULL, NULL, 0)),
                 "QnnBackend_getProperty": ("backendGetProperty", (NULL, NULL)),
                 "QnnContext_getProperty": ("contextGetProperty", (NULL, NULL)),
                 "QnnGlobalConfig_Set": ("globalConfigSet", (NULL,))}
        for public, (field, args) in cases.items():
            assert not q.has(public), public
            for _ in range(2):
                e = error(lambda: getattr(q, public)(*args))
                msg = str(e)
                assert (e.kind, e.function, e.backend, e.code) == (ErrorKind.SYMBOL_NOT_FOUND, public, "QNN", None), e
                assert msg.startswith(f"{public}: ") and f"no entry {field} (NULL)" in msg and "libQnnSaver.so" in msg, msg
                assert "backendId=2" in msg and "providerName=SAVER_QTI_AISW" in msg and "2.40" in msg, msg
            # the unchecked path: API mode returns the loader's status (which the binding turns into the same
            # error), ABI mode raises it
            extra = (ffi.new("Qnn_ContextBinarySize_t *"),) if public.endswith("SectionSize") else ()
            if MODE == "api":
                st = getattr(q.unchecked, public)(*args, *extra)
                assert st == QB.sentinel, st
                e = QB.error(st, QB.index[public])
            else:  # the attribute itself cannot be resolved
                e = error(lambda: getattr(q.unchecked, public)(*args, *extra))
            assert e.kind is ErrorKind.SYMBOL_NOT_FOUND and field in str(e), e
        # an entry the Saver does have still works beside them
        b = q.QnnBackend_create(NULL, NULL)
        q.QnnBackend_free(b)
    finally:
        shutil.rmtree(out, ignore_errors=True)  # the Saver's output (Qualcomm's notice) is never kept
    assert not os.path.exists(out)


def check_use_library_missing() -> None:
    """use_library before the first call, naming a file that does not exist: LIBRARY_NOT_FOUND naming it at the
    first call; nothing else is tried."""
    missing = os.path.join(tempfile.gettempdir(), "ia-no-such-dir", "libQnnHtp.so")
    q.use_library(missing)
    assert not q.has("QnnBackend_getApiVersion")
    e = error(lambda: q.QnnBackend_getApiVersion())
    assert (e.kind, e.function) == (ErrorKind.LIBRARY_NOT_FOUND, "QnnBackend_getApiVersion"), e
    assert missing in str(e) and "onnxruntime_qnn" not in str(e), str(e)


GROUPS: dict[str, list[Callable[[], None]]] = {
    "htp": [check_providers, check_versions, check_lifecycle, check_execute, check_binary_roundtrip,
            check_system_info, check_errors, check_masked_codes, check_use_library_after_load],
    "from_binary": [check_from_binary],
    "saver": [check_saver_null_entries],
    "use_library_missing": [check_use_library_missing],
}


def main(group: str) -> dict[str, str | None]:
    results: dict[str, str | None] = {}
    for check in GROUPS[group]:
        print(f"--- {check.__name__}", flush=True)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                check()
        except BaseException:
            results[check.__name__] = out.getvalue() + traceback.format_exc()
        else:
            results[check.__name__] = None
    if "s" in SESSION:
        SESSION.pop("s").close()
    return results


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[2])))
