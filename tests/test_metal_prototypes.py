"""An objc spec that lists selectors only (``methods: [name, "newBufferWithLength:options:"]``) with the resolver's
``prototypes:`` section (here the metal-cpp one of specs/metal/metal.yaml): the prototypes come from Apple's metal-cpp
headers (the C++-wrappers front-end generator/frontend/objc_cpp.py, generator/prototypes.py's fill_spec), located at
the selector in the spec; a selector metal-cpp lacks is a located error with the closest one, and a method the spec
declares itself must agree with metal-cpp where metal-cpp has it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ironaccelerator_gen.diagnostics import Diagnostic, UserError
from ironaccelerator_gen.frontend import objc_cpp as mc
from ironaccelerator_gen.prototypes import fill_spec
from ironaccelerator_gen.objc import bind_objc
from ironaccelerator_gen.pipeline import compile_specs, parse_declared
from ironaccelerator_gen.spec import load_core, load_library

from conftest import SPECS

ROOT = Path(__file__).resolve().parent.parent
FILE = "specs/metal/metal.yaml"


def _prototypes_block() -> str:
    """The resolver's ``prototypes:`` section of specs/metal/metal.yaml, as written there (metal-cpp's data)."""
    lines = (ROOT / FILE).read_text(encoding="utf-8").splitlines(keepends=True)
    start = lines.index("  prototypes:\n")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() and not lines[i].startswith("   ")
               and not lines[i].lstrip().startswith("#"))
    return "".join(lines[start:end])


PROTOTYPES = _prototypes_block()
VERSION = "367.4.2"  # the pinned copy's (scripts/fetch-metal-cpp.sh: pymetal-cpp 0.1.5)
TEXT = """\
vendor: metal
library: metal
backend: METAL
frontend: declared
declarations: |
  typedef struct objc_object *id;
  typedef struct objc_selector *SEL;
  typedef struct objc_class *Class;
  typedef signed char BOOL;
  typedef unsigned long NSUInteger;
  typedef long NSInteger;
  typedef struct objc_object NSError;
  typedef NSUInteger MTLResourceOptions;
  typedef NSInteger MTLGPUFamily;
  typedef struct { NSUInteger width; NSUInteger height; NSUInteger depth; } MTLSize;
resolver:
  kind: objc
  runtime: {linux: [libobjc.so.4]}
  frameworks: {linux: [libgnustep-base.so.1.28]}
""" + PROTOTYPES + """\
classes:
  NSObject:
    methods: ["+alloc", retainCount]
  MTLDevice:
    base: NSObject
    methods:
      - maxThreadsPerThreadgroup
      - "supportsFamily:"
      - "newBufferWithLength:options:"
      - {newCommandQueue: {ownership: "+1"}}
      - "newLibraryWithSource:options:error:"
      - {"simulatedOnly:": {returns: NSUInteger, args: [NSUInteger]}}
"""

_spec = load_library(Path("metal.yaml"), FILE, text=TEXT)
assert _spec.objc is not None and _spec.objc.prototypes is not None
SOURCE = _spec.objc.prototypes

if mc.find_root(SOURCE) is None:
    pytest.skip(f"metal-cpp is not fetched ({SOURCE.cache}: `make metal-cpp` downloads it)", allow_module_level=True)


@pytest.fixture(scope="module")
def model() -> mc.Model:
    return mc.parse(SOURCE)


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def pos(text: str, needle: str) -> tuple[int, int]:
    assert text.count(needle) == 1, needle
    i = text.index(needle)
    return text.count("\n", 0, i) + 1, i - (text.rfind("\n", 0, i) + 1) + 1


def problems(model: mc.Model, text: str) -> list[Diagnostic]:
    try:
        spec = fill_spec(load_library(Path("metal.yaml"), FILE, text=text), model)
        bind_objc(spec, load_core(SPECS / "core.yaml", "specs/core.yaml"), parse_declared(spec, "pycparser"))
    except UserError as e:
        return list(e.diagnostics)
    return []


def test_listed_selectors_take_metal_cpps_prototypes(model: mc.Model) -> None:
    spec = fill_spec(load_library(Path("metal.yaml"), FILE, text=TEXT), model)
    lib = bind_objc(spec, load_core(SPECS / "core.yaml", "specs/core.yaml"), parse_declared(spec, "clang"))
    m = {x.public: x for x in lib.methods}
    assert m["MTLDevice_maxThreadsPerThreadgroup"].send_type == "MTLSize (*)(id, SEL)"
    assert m["MTLDevice_supportsFamily_"].send_type == "BOOL (*)(id, SEL, MTLGPUFamily)"
    buf = m["MTLDevice_newBufferWithLength_options_"]
    assert buf.send_type == "id (*)(id, SEL, NSUInteger, MTLResourceOptions)" and buf.ownership == "+1"
    lib_src = m["MTLDevice_newLibraryWithSource_options_error_"]
    assert lib_src.error_param == 2 and lib_src.ownership == "+1"
    assert m["MTLDevice_newCommandQueue"].ownership == "+1"
    assert m["NSObject_alloc"].class_method and m["NSObject_retainCount"].result_decl == "NSUInteger"
    # declared in the spec (metal-cpp has no such selector): taken as written
    assert m["MTLDevice_simulatedOnly_"].send_type == "NSUInteger (*)(id, SEL, NSUInteger)"
    # located at the selector in the spec
    assert spec.objc is not None
    filled = next(x for c in spec.objc.classes for x in c.methods if x.selector.value == "supportsFamily:")
    assert (filled.returns.location.line, filled.returns.location.col) == pos(TEXT, '"supportsFamily:"')


def test_a_misspelled_selector_is_located_with_a_suggestion(model: mc.Model) -> None:
    text = edit(TEXT, '"supportsFamily:"', '"supportFamily:"')
    (d,) = problems(model, text)
    assert (d.location.file, d.location.line, d.location.col) == (FILE, *pos(text, '"supportFamily:"'))
    assert "MTLDevice has no method 'supportFamily:' in metal-cpp" in d.message
    assert "did you mean 'supportsFamily:'" in d.message


def test_a_class_method_listed_as_instance_method_says_so(model: mc.Model) -> None:
    text = edit(TEXT, '["+alloc", retainCount]', '[alloc, retainCount]')
    (d,) = problems(model, text)
    assert "NSObject has no method 'alloc'" in d.message and "did you mean '+alloc'" in d.message


def test_an_unknown_class_suggests(model: mc.Model) -> None:
    text = edit(TEXT, "  MTLDevice:\n", "  MTLDevic:\n")
    diags = problems(model, text)
    assert diags and all("metal-cpp has no class 'MTLDevic'" in d.message and "MTLDevice" in d.message
                         for d in diags[:5])


def test_a_declared_method_must_agree_with_metal_cpp(model: mc.Model) -> None:
    text = edit(TEXT, "      - maxThreadsPerThreadgroup\n",
                "      - {maxThreadsPerThreadgroup: {returns: NSUInteger}}\n")
    (d,) = problems(model, text)
    assert (d.location.line, d.location.col) == pos(text, "maxThreadsPerThreadgroup")
    assert "declared here as NSUInteger ()" in d.message and "metal-cpp" in d.message and "MTLSize ()" in d.message
    agreeing = edit(TEXT, "      - maxThreadsPerThreadgroup\n", "      - {maxThreadsPerThreadgroup: {returns: MTLSize}}\n")
    assert problems(model, agreeing) == []


def test_a_type_metal_cpp_uses_must_be_declared(model: mc.Model) -> None:
    text = edit(TEXT, "  typedef NSInteger MTLGPUFamily;\n", "")
    diags = problems(model, text)
    assert diags and any("MTLGPUFamily" in d.message and d.location.line == pos(text, '"supportsFamily:"')[0]
                         for d in diags), "\n".join(map(str, diags))


def test_selector_only_needs_the_prototypes_source() -> None:
    text = edit(TEXT, PROTOTYPES, "")
    with pytest.raises(UserError) as e:
        load_library(Path("metal.yaml"), FILE, text=text)
    (d,) = e.value.diagnostics
    assert (d.location.line, d.location.col) == pos(text, '"+alloc"')
    assert "the resolver's 'prototypes:' section" in d.message and "7 selectors listed without one" in d.message
    with pytest.raises(UserError) as e:
        load_library(Path("metal.yaml"), FILE, text=edit(TEXT, "kind: cpp-wrappers", "kind: cpp-wrapper"))
    assert "did you mean 'cpp-wrappers'" in str(e.value)
    with pytest.raises(UserError) as e:
        load_library(Path("metal.yaml"), FILE, text=edit(TEXT, "{newCommandQueue: {ownership: \"+1\"}}",
                                                         "{newCommandQueue: {}, commit: {}}"))
    assert "one-key mapping" in str(e.value) and "got 2 keys" in str(e.value)


def test_the_generator_fills_generates_and_refuses_a_typo_with_exit_2(tmp_path: Path) -> None:
    d = tmp_path / "specs"
    (d / "metal").mkdir(parents=True)
    (d / "core.yaml").write_text((SPECS / "core.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    (d / "metal" / "metal.yaml").write_text(TEXT, encoding="utf-8")
    result = compile_specs(d)
    (lib,) = result.objc
    assert lib.sdk_version == f"metal-cpp {VERSION}"
    assert "def maxThreadsPerThreadgroup(self)" in result.files["ironaccelerator/backends/metal/metal/__init__.py"]
    assert any(p.name == "MTLDevice.hpp" for p in result.inputs)  # a changed header regenerates
    assert compile_specs(d).files == result.files  # deterministic
    (d / "metal" / "metal.yaml").write_text(edit(TEXT, '"supportsFamily:"', '"supportFamily:"'), encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "ironaccelerator_gen", "generate", "--specs", str(d), "--out",
                        str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    line, col = pos(TEXT, '"supportsFamily:"')
    assert f"specs/metal/metal.yaml:{line}:{col}: MTLDevice has no method 'supportFamily:'" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_without_metal_cpp_the_library_is_skipped_with_the_reason(tmp_path: Path) -> None:
    d = tmp_path / "specs"
    (d / "metal").mkdir(parents=True)
    (d / "core.yaml").write_text((SPECS / "core.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    (d / "metal" / "metal.yaml").write_text(TEXT, encoding="utf-8")
    (tmp_path / "empty").mkdir()
    result = compile_specs(d, sdk_overrides={"metal-cpp": str(tmp_path / "empty")})
    assert result.objc == [] and any("no metal-cpp headers found" in s for s in result.skipped)


def test_sdks_lists_metal_cpp_for_the_specs_that_take_prototypes_from_it(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from ironaccelerator_gen import cli

    d = tmp_path / "specs"
    (d / "metal").mkdir(parents=True)
    (d / "core.yaml").write_text((SPECS / "core.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    (d / "metal" / "metal.yaml").write_text(TEXT, encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "ironaccelerator_gen", "sdks", "--specs", str(d)], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 0 and f"metal-cpp {VERSION}" in r.stdout, r.stdout + r.stderr
    assert "(prototypes of metal/metal.yaml)" in r.stdout
    monkeypatch.delenv("IRONACCEL_METAL_CPP", raising=False)
    monkeypatch.setattr(mc, "CACHE_BASE", tmp_path / "none")
    (line,) = cli._prototype_lines(d)
    assert line == ("not found: metal-cpp (Metal/Metal.hpp; `make metal-cpp`, $IRONACCEL_METAL_CPP; prototypes of "
                    "metal/metal.yaml)"), line
    (d / "metal" / "metal.yaml").write_text(edit(TEXT, PROTOTYPES, "").replace(
        "methods: [\"+alloc\", retainCount]", "methods: {\"+alloc\": {returns: id}}").split("  MTLDevice:")[0],
        encoding="utf-8")
    load_library(d / "metal" / "metal.yaml", FILE)  # (it loads: passed over for not taking prototypes, not for errors)
    assert cli._prototype_lines(d) == []  # no spec takes prototypes from it: not listed
