"""The libclang and pycparser front-ends must produce the same IR for the same headers."""

from __future__ import annotations

import importlib.util
from dataclasses import fields, is_dataclass, replace
from pathlib import Path

import pytest

from ironaccelerator_gen.diagnostics import UserError
from ironaccelerator_gen.frontend import ParseRequest, parse
from ironaccelerator_gen.ir import (
    Array, Builtin, EnumRef, FunctionProto, Header, InlineEnum, InlineRecord, Location, Param, Pointer, RecordRef,
    TypedefRef,
)

from conftest import core_text

HERE = Path(__file__).parent
CUDA_INCLUDE = Path("/usr/local/cuda/include")
WHERE = Location(file="test", line=1, col=1)


# ----------------------------------------------------------------------- helpers


def normalise(h: Header) -> Header:
    """Order-independent form: declarations sorted by name/tag (locations never compare)."""
    def enum_key(e):  # type: ignore[no-untyped-def]
        return (e.tag is None, e.tag or "", tuple(c.name for c in e.constants))

    return replace(
        h,
        functions=tuple(sorted(h.functions, key=lambda f: f.name)),
        typedefs=tuple(sorted(h.typedefs, key=lambda t: t.name)),
        enums=tuple(sorted(h.enums, key=enum_key)),
        records=tuple(sorted(h.records, key=lambda r: (r.kind, r.tag or ""))),
        macros=tuple(sorted(h.macros, key=lambda m: m.name)),
        constants=tuple(sorted(h.constants, key=lambda c: c.name)),
        renames=tuple(sorted(h.renames, key=lambda r: r.name)),
    )


def _key(item: object) -> str:
    for attr in ("name", "tag"):
        v = getattr(item, attr, None)
        if v is not None:
            return str(v)
    if hasattr(item, "constants"):
        return "<unnamed enum " + ",".join(c.name for c in item.constants[:3]) + ">"
    return repr(item)[:60]


def _short(obj: object, limit: int = 600) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[:limit] + " ..."


def _first_difference(a: object, b: object, path: str = "") -> str | None:
    """The path to, and the two values at, the first place where a and b differ."""
    if a == b:
        return None
    if type(a) is not type(b):
        return f"{path}: {_short(a, 300)}  !=  {_short(b, 300)}"
    if is_dataclass(a):
        for f in fields(a):
            if not f.compare:
                continue
            d = _first_difference(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
            if d:
                return d
    if isinstance(a, tuple) and isinstance(b, tuple):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = _first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
    return f"{path}: {_short(a, 300)}  !=  {_short(b, 300)}"


def describe_diff(clang: Header, pyc: Header, max_items: int = 5) -> str:
    """A readable account of how two normalised headers differ, declaration by declaration."""
    out = []
    for kind in ("functions", "typedefs", "enums", "records", "macros", "constants", "renames"):
        a = {_key(x): x for x in getattr(clang, kind)}
        b = {_key(x): x for x in getattr(pyc, kind)}
        only_a = sorted(set(a) - set(b))
        only_b = sorted(set(b) - set(a))
        changed = [k for k in a if k in b and a[k] != b[k]]
        if not (only_a or only_b or changed):
            continue
        out.append(f"== {kind}: {len(only_a)} only in clang, {len(only_b)} only in pycparser, {len(changed)} differ")
        for k in only_a[:max_items]:
            out.append(f"  only clang:     {_short(a[k])}")
        for k in only_b[:max_items]:
            out.append(f"  only pycparser: {_short(b[k])}")
        for k in changed[:max_items]:
            out.append(f"  {k}: {_first_difference(a[k], b[k], k)}")
    return "\n".join(out) or "(headers differ only in name)"


def parse_both(request: ParseRequest) -> tuple[Header, Header]:
    clang = normalise(parse(request, frontend="clang"))
    pyc = normalise(parse(request, frontend="pycparser"))
    return clang, pyc


def assert_agree(request: ParseRequest) -> tuple[Header, Header]:
    clang, pyc = parse_both(request)
    if clang != pyc:
        pytest.fail("front-ends disagree:\n" + describe_diff(clang, pyc), pytrace=False)
    return clang, pyc


def wheel_include(*parts: str) -> Path | None:
    """A directory inside the ``nvidia`` namespace package of the pip wheels, if installed."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or spec.submodule_search_locations is None:
        return None
    for loc in spec.submodule_search_locations:
        p = Path(loc).joinpath(*parts)
        if p.exists():
            return p
    return None


# ------------------------------------------------------------------------- tests


@pytest.mark.skipif(not (CUDA_INCLUDE / "cuda.h").is_file(), reason="CUDA toolkit headers not in /usr/local/cuda/include")
def test_cuda_toolkit_headers_agree() -> None:
    req = ParseRequest(headers=("cuda.h", "cudaTypedefs.h"), include_dirs=(CUDA_INCLUDE,), where=WHERE)
    clang, pyc = assert_agree(req)
    assert len(clang.functions) > 400 and len(clang.typedefs) > 500
    assert any(r.name == "cuMemAlloc" and r.target == "cuMemAlloc_v2" for r in clang.renames)


def test_nvrtc_wheel_header_agrees() -> None:
    inc = wheel_include("cu13", "include")
    if inc is None or not (inc / "nvrtc.h").is_file():
        pytest.skip("nvrtc.h not found in an installed nvidia-cuda-nvrtc wheel (nvidia/cu13/include)")
    req = ParseRequest(headers=("nvrtc.h",), include_dirs=(inc,), where=WHERE)
    clang, _ = assert_agree(req)
    result = next(t for t in clang.typedefs if t.name == "nvrtcResult")
    assert isinstance(result.type, InlineEnum)
    assert result.type.enum.constants[0].name == "NVRTC_SUCCESS"


def test_cuda_12_wheel_header_agrees() -> None:
    inc = wheel_include("cuda_runtime", "include")
    if inc is None or not (inc / "cuda.h").is_file():
        pytest.skip("cuda.h not found in an installed nvidia-cuda-runtime-cu12 wheel (nvidia/cuda_runtime/include)")
    req = ParseRequest(headers=("cuda.h",), include_dirs=(inc,), where=WHERE)
    clang, _ = assert_agree(req)
    version = next(c for c in clang.constants if c.name == "CUDA_VERSION")
    assert isinstance(version.value, int) and 12000 <= version.value < 13000


def _features() -> ParseRequest:
    return ParseRequest(headers=("frontend_features.h",), include_dirs=(HERE / "headers",), where=WHERE)


def test_feature_header_agrees() -> None:
    clang, pyc = assert_agree(_features())
    h = pyc
    typedefs = {t.name: t.type for t in h.typedefs}
    records = {(r.kind, r.tag): r for r in h.records}
    functions = {f.name: f for f in h.functions}
    enums = {e.tag: e for e in h.enums}

    # an unnamed typedef enum with negatives, shifts, references and C division
    result = typedefs["ffResult"]
    assert isinstance(result, InlineEnum) and result.enum.tag is None
    values = {c.name: c.value for c in result.enum.constants}
    assert values["FF_ERR_B"] == -2 and values["FF_NEXT"] == -1
    assert values["FF_HIGH"] == 1 << 31 and values["FF_NOT"] == -16
    assert values["FF_DIV"] == -3 and values["FF_MOD"] == -1 and values["FF_CHAR"] == 65
    assert {c.name: c.value for c in enums["ffFlags_enum"].constants}["FF_FLAG_BIG"] == 0x80000000
    assert [c.value for c in enums[None].constants] == [1, 2]  # the unnamed top-level enum

    # the spellings of the arithmetic types, and standard typedefs as builtins
    assert typedefs["ffUnsigned"] == Builtin(name="unsigned int")
    assert typedefs["ffSigned"] == Builtin(name="int")
    assert typedefs["ffLongUnsigned"] == Builtin(name="unsigned long")
    assert typedefs["ffLongLong"] == Builtin(name="long long")
    assert typedefs["ffSize"] == Builtin(name="size_t")
    assert typedefs["ffDeviceptr"] == Builtin(name="uint64_t")

    # opaque records through a pointer; forward declaration then definition
    assert typedefs["ffContext"] == Pointer(pointee=RecordRef(kind="struct", tag="ffCtx_st"))
    assert records[("struct", "ffCtx_st")].fields is None
    assert records[("struct", "ffStream_st")].fields is not None
    assert records[("struct", "ffUnknown_st")].fields is None

    # nested named struct registered at top level; anonymous members; bit-fields; arrays
    outer = {f.name: f for f in records[("struct", "ffOuter_st")].fields or () if f.name}
    anonymous = [f for f in records[("struct", "ffOuter_st")].fields or () if f.name is None]
    assert records[("struct", "ffInner_st")].fields is not None
    assert outer["inner"].type == RecordRef(kind="struct", tag="ffInner_st")
    assert isinstance(anonymous[0].type, InlineRecord) and anonymous[0].type.record.kind == "union"
    assert anonymous[1].bit_width == 0
    assert outer["bitB"].bit_width == 3 and outer["bitC"].bit_width == 4
    assert outer["name"].type == Pointer(pointee=Builtin(name="char", const=True), const=True)
    assert outer["label"].type == Array(element=Builtin(name="char"), size=16)
    assert outer["grid"].type == Array(element=Array(element=Builtin(name="int"), size=3), size=2)
    assert outer["pad"].type == Array(element=Builtin(name="char"), size=12)
    assert outer["pad2"].type == Array(element=Builtin(name="char"), size=8)
    assert outer["data"].type == Array(element=Builtin(name="unsigned char"), size=None)
    assert outer["ctx"].type == TypedefRef(name="ffContext", const=True)
    assert outer["color"].type == EnumRef(tag="ffColor")

    # functions: (void), (), variadic, unnamed parameters, function-pointer parameters
    assert functions["ffVoid"].params == () and not functions["ffVoid"].variadic
    assert functions["ffNoArgs"].params == () and not functions["ffNoArgs"].variadic
    assert functions["ffPrintf"].variadic and len(functions["ffPrintf"].params) == 1
    assert [p.name for p in functions["ffUnnamed"].params] == [None, None, None]
    assert functions["ffDeclaredByTypedef"].params == (Param(name=None, type=Builtin(name="int")),)
    assert typedefs["ffBitsSize"] == Array(element=Builtin(name="char"), size=24)
    raw = functions["ffSetCallback"].params[1].type
    assert isinstance(raw, Pointer) and isinstance(raw.pointee, FunctionProto)
    assert [p.name for p in raw.pointee.params] == [None, None]

    # macros (before interpretation they are token lists; the last definition wins)
    m = {x.name: x for x in h.macros}
    assert m["FF_PAIR"].params == ("a", "b")
    assert m["FF_REDEFINED"].tokens == ("2",)
    assert m["FF_NAME_LEN"].tokens == ("(", "8", "*", "2", ")")
    assert m["FF_CONTINUED"].tokens == ("{", "a", ",", "b", "}")  # line continuations spliced
    consts = {c.name: c.value for c in h.constants}
    assert consts["FF_VERSION"] == 1203 and consts["FF_NAME"] == "features" and consts["FF_NAME_LEN"] == 16
    # integer division and remainder as C computes them (truncation toward zero), not Python's floor
    assert (consts["FF_QUOTIENT"], consts["FF_REMAINDER"], consts["FF_REMAINDER_B"]) == (-3, -1, 1)
    renames = {r.name: r for r in h.renames}
    assert renames["ff_open"].target == "ff_open_v2"
    assert renames["ff_close"].target == "ff_close_v2" and renames["ff_close"].wrapper == "FF_API"


def test_pycparser_syntax_error_is_located(tmp_path: Path) -> None:
    (tmp_path / "broken.h").write_text("typedef int good_t;\n\nint broken(good_t x y);\n")
    req = ParseRequest(headers=("broken.h",), include_dirs=(tmp_path,), where=WHERE)
    with pytest.raises(UserError) as info:
        parse(req, frontend="pycparser")
    (diag,) = info.value.diagnostics
    assert diag.location.file == "broken.h" and diag.location.line == 3


def test_pycparser_preprocessor_error_is_located(tmp_path: Path) -> None:
    (tmp_path / "pp.h").write_text("#define OK 1\n#error this SDK is not configured\n")
    req = ParseRequest(headers=("pp.h",), include_dirs=(tmp_path,), where=WHERE)
    with pytest.raises(UserError) as info:
        parse(req, frontend="pycparser")
    diag = info.value.diagnostics[0]
    assert diag.location.file == "pp.h" and diag.location.line == 2
    assert "not configured" in diag.message


def test_missing_header_is_reported_at_the_spec() -> None:
    req = ParseRequest(headers=("no_such_header.h",), include_dirs=(HERE / "headers",), where=WHERE)
    with pytest.raises(UserError) as info:
        parse(req, frontend="pycparser")
    assert info.value.diagnostics[0].location == WHERE


def test_both_front_ends_generate_the_same_package() -> None:
    """End to end, the second front-end must agree to the byte: every file generated from the real specs
    and this machine's SDK headers is the same with pycparser as with libclang (declaration order and
    locations included, which the IR comparison above normalises away)."""
    from conftest import SPECS
    from ironaccelerator_gen.pipeline import compile_specs

    clang = compile_specs(SPECS, frontend="clang")
    pyc = compile_specs(SPECS, frontend="pycparser")
    assert clang.skipped == pyc.skipped and sorted(clang.files) == sorted(pyc.files)
    assert len(clang.libraries) >= 3, clang.skipped  # cuda.driver, cuda.nvrtc, hip.runtime, opencl.cl here
    differ = sorted(path for path in clang.files if clang.files[path] != pyc.files[path])
    assert not differ, differ


# ------------------------------------------------------------- macros a binding cannot carry

MACRO_SPEC = """\
vendor: test
library: macros
backend: TEST
sdk: test
headers: [macros.h]
loader:
  linux: [libiamacros.so]
errors:
  type: mResult
  success: [M_OK]
  default: DRIVER
  defaulted: [M_ERR]
"""
MACRO_HEADER = (b"#ifndef MACROS_H\n#define MACROS_H\n"
                b"typedef enum { M_OK = 0, M_ERR = 1 } mResult;\n"
                b"mResult mInit(int flags);\n"
                b"#define M_FINE 1.5\n"
                b"#define M_NAME \"plain\"\n"
                b"#define M_MAX 0xFFFFFFFFFFFFFFFFu\n"
                b"BODY"
                b"#endif\n")
# constants that are no value of any C type (an integer wider than 64 bits, a floating constant out of
# double's range, a shift past the width); they were exported as `X = inf`, or raised ValueError (Python's
# 4,300-digit limit) or MemoryError: a generated module must not carry them
UNREPRESENTABLE = {
    "M_DIGITS": b"1" * 5000,
    "M_HEX_DIGITS": b"0x" + b"F" * 5000,
    "M_WIDE": b"0x10000000000000000",
    "M_HUGE": b"1e999",
    "M_MINUS_HUGE": b"(-1e999)",
    "M_NAN": b"(1e999 - 1e999)",
    "M_PRODUCT": b"(1e300 * 1e300)",
    "M_SHIFT": b"(1 << 100000000000)",
    "M_SHIFT_BACK": b"(M_SHIFT >> 100000000000)",
}


def macro_specs(tmp_path: Path, body: bytes) -> tuple[Path, Path]:
    inc = tmp_path / "include"
    inc.mkdir()
    (inc / "macros.h").write_bytes(MACRO_HEADER.replace(b"BODY", body))
    d = tmp_path / "specs"
    (d / "test").mkdir(parents=True)
    (d / "core.yaml").write_text(core_text(), encoding="utf-8")
    (d / "test" / "macros.yaml").write_text(MACRO_SPEC, encoding="utf-8")
    return d, inc


@pytest.mark.parametrize("frontend", ["clang", "pycparser"])
def test_macro_with_bytes_that_are_not_utf8_is_located(tmp_path: Path, frontend: str) -> None:
    """A Latin-1 byte in a string macro raised UnicodeDecodeError (libclang's token spelling; gcc's output)."""
    from ironaccelerator_gen.pipeline import compile_specs

    d, inc = macro_specs(tmp_path, b"#define M_CAFE \"caf\xe9\"\n#define M_AFTER 2\n")
    with pytest.raises(UserError) as info:
        compile_specs(d, {"test": str(inc)}, frontend)
    assert [str(x) for x in info.value.diagnostics] == [
        "macros.h:8:9: macro 'M_CAFE' is not UTF-8 text: byte 0xe9 in its definition"]


@pytest.mark.parametrize("frontend", ["clang", "pycparser"])
def test_unrepresentable_macro_constants_are_left_out(tmp_path: Path, frontend: str) -> None:
    from ironaccelerator_gen.pipeline import compile_specs

    body = b"".join(b"#define %s %s\n" % (name.encode(), value) for name, value in UNREPRESENTABLE.items())
    d, inc = macro_specs(tmp_path, body)
    (lib,) = compile_specs(d, {"test": str(inc)}, frontend).libraries
    consts = {c.name: c.value for c in lib.constants}
    assert consts == {"M_FINE": 1.5, "M_NAME": "plain", "M_MAX": 2**64 - 1}


def test_module_with_unrepresentable_macros_imports(tmp_path: Path) -> None:
    """`#define X 1e999` generated `X = inf`, exit 0, and a module that raised NameError on import."""
    import os
    import subprocess
    import sys

    body = b"".join(b"#define %s %s\n" % (name.encode(), value) for name, value in UNREPRESENTABLE.items())
    d, inc = macro_specs(tmp_path, body)
    out = tmp_path / "out"
    cli = [sys.executable, "-m", "ironaccelerator_gen"]
    gen = subprocess.run([*cli, "generate", "--specs", str(d), "--out", str(out), "--sdk", f"test={inc}"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert gen.returncode == 0, gen.stdout + gen.stderr
    build = subprocess.run([*cli, "build", "--out", str(out), "--abi-only"], capture_output=True, text=True,
                           timeout=120, cwd=tmp_path)
    assert build.returncode == 0, build.stdout + build.stderr
    code = ("import ironaccelerator.backends.test.macros as m\n"
            "assert (m.M_FINE, m.M_NAME, m.M_MAX) == (1.5, 'plain', 2**64 - 1)\n"
            f"assert not any(hasattr(m, n) for n in {sorted(UNREPRESENTABLE)!r})\n"
            "print('ok')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(out)})
    assert run.returncode == 0 and run.stdout == "ok\n", run.stdout + run.stderr


@pytest.mark.parametrize("frontend", ["clang", "pycparser"])
@pytest.mark.parametrize("stars, error", [(64, False), (65, True), (3000, True)])
def test_declarations_nested_too_deeply(tmp_path: Path, frontend: str, stars: int, error: bool) -> None:
    """`int ***...p` 3,000 levels deep raised RecursionError (front-end, binder or renderer): a declaration
    may nest 64 levels; past that it is a located error (at the spec when the front-end itself gives up)."""
    from ironaccelerator_gen.pipeline import compile_specs

    d, inc = macro_specs(tmp_path, b"mResult mDeep(int " + b"*" * stars + b"p);\n")
    if not error:
        (lib,) = compile_specs(d, {"test": str(inc)}, frontend).libraries
        assert "mDeep" in {f.public for f in lib.functions}
        return
    with pytest.raises(UserError) as info:
        compile_specs(d, {"test": str(inc)}, frontend)
    (diag,) = info.value.diagnostics
    assert "nests more than 64 levels deep" in diag.message
    assert str(diag).startswith("macros.h:8:9: the type of 'mDeep' nests" if stars < 1000 else
                                "specs/test/macros.yaml:1:1: a declaration in macros.h nests")


def test_cli_rejects_a_non_utf8_macro(tmp_path: Path) -> None:
    import subprocess
    import sys

    d, inc = macro_specs(tmp_path, b"#define M_CAFE \"caf\xe9\"\n")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "ironaccelerator_gen", "generate", "--specs", str(d), "--out",
                           str(out), "--sdk", f"test={inc}", "--frontend", "pycparser"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.splitlines() == ["macros.h:8:9: macro 'M_CAFE' is not UTF-8 text: byte 0xe9 in its "
                                        "definition", "ironaccel-gen: 1 error(s)"]
    assert not out.exists()
