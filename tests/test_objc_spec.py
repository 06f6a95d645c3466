"""The objc resolver kind's spec form (generator/spec.py's classes: section and resolver: {kind: objc}) and its
binding (generator/objc.py): every mistake a located error, misspellings with a suggestion."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ironaccelerator_gen.diagnostics import Diagnostic, UserError
from ironaccelerator_gen.objc import bind_objc
from ironaccelerator_gen.pipeline import compile_specs, parse_declared
from ironaccelerator_gen.spec import cf_ownership, load_core, load_library, objc_ownership

from conftest import SPECS

FILE = "specs/demo/demo.yaml"
TEXT = """\
vendor: demo
library: demo
backend: METAL
frontend: declared
declarations: |
  typedef struct objc_object *id;
  typedef struct objc_selector *SEL;
  typedef struct objc_class *Class;
  typedef unsigned long NSUInteger;
  typedef struct { NSUInteger location, length; } NSRange;
resolver:
  kind: objc
  runtime: {linux: [libobjc.so.4]}
  frameworks: {linux: [libgnustep-base.so.1.28]}
  errors:
    INVALID_VALUE: [NSPOSIXErrorDomain]
classes:
  NSObject:
    methods:
      "+alloc": {returns: id}
      "retainCount": {returns: NSUInteger}
  NSString:
    base: NSObject
    methods:
      "length": {returns: NSUInteger}
      "rangeOfString:": {returns: NSRange, args: [id]}
      "initWithBytes:length:": {returns: id, args: [const void *, NSUInteger]}
"""


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def pos(text: str, needle: str, offset: int = 0) -> tuple[int, int]:
    assert text.count(needle) == 1, needle
    i = text.index(needle) + offset
    return text.count("\n", 0, i) + 1, i - (text.rfind("\n", 0, i) + 1) + 1


def diagnostics(text: str) -> list[Diagnostic]:
    """Every problem loading and binding ``text`` (empty when it binds)."""
    try:
        spec = load_library(Path("demo.yaml"), FILE, text=text)
        core = load_core(SPECS / "core.yaml", "specs/core.yaml")
        bind_objc(spec, core, parse_declared(spec, "pycparser"))
    except UserError as e:
        return list(e.diagnostics)
    return []


def the_error(text: str, contains: str) -> Diagnostic:
    diags = diagnostics(text)
    found = [d for d in diags if contains in d.message]
    assert len(found) == 1, f"no one diagnostic with {contains!r}:\n" + "\n".join(map(str, diags))
    return found[0]


def at(d: Diagnostic, line_col: tuple[int, int]) -> None:
    assert (d.location.file, d.location.line, d.location.col) == (FILE, *line_col), str(d)


def test_the_example_binds() -> None:
    assert diagnostics(TEXT) == []
    spec = load_library(Path("demo.yaml"), FILE, text=TEXT)
    lib = bind_objc(spec, load_core(SPECS / "core.yaml", "specs/core.yaml"), parse_declared(spec, "pycparser"))
    by_name = {m.public: m for m in lib.methods}
    r = by_name["NSString_rangeOfString_"]
    assert (r.receiver, r.result_decl, r.result_kind, r.send_type) == ("id", "NSRange", "struct",
                                                                       "NSRange (*)(id, SEL, id)")
    a = by_name["NSObject_alloc"]
    assert a.class_method and a.receiver == "Class" and a.ownership == "+1" and a.send_type == "id (*)(Class, SEL)"
    init = by_name["NSString_initWithBytes_length_"]
    assert init.consumes_self and init.ownership == "+1" and [p.decl for p in init.params] == ["const void *",
                                                                                             "NSUInteger"]
    assert [c.name for c in lib.classes] == ["NSObject", "NSString"]


def test_misspelled_method_key_suggests() -> None:
    text = edit(TEXT, '"length": {returns: NSUInteger}', '"length": {retuns: NSUInteger}')
    d = the_error(text, "unknown key 'retuns'")
    assert "did you mean 'returns'" in d.message
    at(d, pos(text, "retuns"))


def test_misspelled_type_suggests() -> None:
    text = edit(TEXT, '"retainCount": {returns: NSUInteger}', '"retainCount": {returns: NSUInterger}')
    d = the_error(text, "NSUInterger")
    assert "the declarations do not declare" in d.message and "did you mean 'NSUInteger'" in d.message
    at(d, pos(text, "NSUInterger"))


def test_misspelled_argument_type_suggests() -> None:
    text = edit(TEXT, "args: [const void *, NSUInteger]", "args: [const void *, NSUinteger]")
    d = the_error(text, "NSUinteger")
    assert "did you mean 'NSUInteger'" in d.message
    at(d, pos(text, "NSUinteger"))


@pytest.mark.parametrize("selector", ["length:foo", "range Of:", "+-length", "a::b", "9lives"])
def test_bad_selector_syntax(selector: str) -> None:
    text = edit(TEXT, '"length": {', f'"{selector}": {{')
    d = the_error(text, "is not valid: expected a selector")
    at(d, pos(text, f'"{selector}"'))


def test_argument_count_must_match_the_colons() -> None:
    text = edit(TEXT, '"rangeOfString:": {returns: NSRange, args: [id]}', '"rangeOfString:": {returns: NSRange}')
    d = the_error(text, "takes 1 argument")
    assert d.message == "selector 'rangeOfString:' takes 1 argument (one per ':'); args lists 0"
    text = edit(TEXT, "args: [const void *, NSUInteger]", "args: [const void *]")
    assert "takes 2 arguments" in the_error(text, "takes 2").message


def test_python_name_collisions_are_refused() -> None:
    text = edit(TEXT, '"+alloc": {returns: id}', '"+retainCount": {returns: NSUInteger}')
    d = the_error(text, "would be bound as 'retainCount'")
    assert "share the Python class's namespace" in d.message
    text = edit(TEXT, '"length": {returns: NSUInteger}', '"close": {}')
    d = the_error(text, "would be bound as 'close'")
    assert "every Objective-C handle already has" in d.message


def test_unchecked_name_collisions_are_refused() -> None:
    # class A's method B_c and class A_B's method c would both be the unchecked function A_B_c
    text = TEXT + '  A:\n    methods:\n      "B_c": {}\n  A_B:\n    methods:\n      "c": {}\n'
    d = the_error(text, "would be the unchecked function 'A_B_c'")
    at(d, pos(text, '"c": {}'))


def test_nullable_names_object_arguments_by_keyword() -> None:
    text = edit(TEXT, '"rangeOfString:": {returns: NSRange, args: [id]}',
                '"rangeOfString:": {returns: NSRange, args: [id], nullable: [rangeOfString]}')
    assert diagnostics(text) == []
    spec = load_library(Path("demo.yaml"), FILE, text=text)
    lib = bind_objc(spec, load_core(SPECS / "core.yaml", "specs/core.yaml"), parse_declared(spec, "pycparser"))
    (m,) = [x for x in lib.methods if x.selector == "rangeOfString:"]
    assert m.params[0].nullable
    typo = edit(TEXT, '"rangeOfString:": {returns: NSRange, args: [id]}',
                '"rangeOfString:": {returns: NSRange, args: [id], nullable: [rangeOfStrin]}')
    d = the_error(typo, "is not a keyword of selector 'rangeOfString:'")
    at(d, pos(typo, "rangeOfStrin]"))
    assert "did you mean 'rangeOfString'" in d.message
    number = edit(TEXT, '"initWithBytes:length:": {returns: id, args: [const void *, NSUInteger]}',
                  '"initWithBytes:length:": {returns: id, args: [const void *, NSUInteger], nullable: [length]}')
    d = the_error(number, "only an object argument may be nil")
    at(d, pos(number, "length]"))


def test_a_standard_type_is_not_declared_again() -> None:
    """typedef unsigned long long uint64_t; in the declarations broke the compiled module (conflicting types with
    stdint.h's), and the build fell back to ABI mode: now a located error at generate time."""
    text = edit(TEXT, "  typedef unsigned long NSUInteger;\n",
                "  typedef unsigned long NSUInteger;\n  typedef unsigned long long uint64_t;\n")
    d = the_error(text, "'uint64_t' is a standard C type")
    at(d, pos(text, "uint64_t;"))


def test_ownership_values() -> None:
    text = edit(TEXT, '"+alloc": {returns: id}', '"+alloc": {returns: id, ownership: "+2"}')
    d = the_error(text, "ownership '+2' is not valid")
    at(d, pos(text, '"+2"'))
    text = edit(TEXT, '"length": {returns: NSUInteger}', '"length": {returns: NSUInteger, ownership: "+1"}')
    assert "goes with methods returning an object" in the_error(text, "ownership goes with").message


def test_unknown_base_suggests_and_cycles_are_refused() -> None:
    text = edit(TEXT, "base: NSObject", "base: NSObjet")
    d = the_error(text, "base class 'NSObjet'")
    assert "did you mean 'NSObject'" in d.message
    at(d, pos(text, "NSObjet"))
    text = edit(TEXT, "  NSObject:\n    methods:", "  NSObject:\n    base: NSString\n    methods:")
    assert "form a cycle" in the_error(text, "bases form a cycle (NSObject").message


def test_resolver_needs_its_libraries_and_refuses_c_keys() -> None:
    text = edit(TEXT, "  frameworks: {linux: [libgnustep-base.so.1.28]}\n", "")
    assert the_error(text, "needs 'frameworks'").message == "resolver kind objc needs 'frameworks'"
    text = TEXT + "loader:\n  linux: [libfoo.so]\n"
    assert "does not go with resolver kind objc" in the_error(text, "loader: 'linux'").message
    text = TEXT + "bind:\n  include: [foo*]\n"
    assert "'bind' does not go with resolver kind objc" in the_error(text, "'bind'").message
    text = TEXT + "loader:\n  sdk_env: [GNUSTEP_ROOT]\n  sdk_dirs: [lib]\n"
    assert diagnostics(text) == []  # where to search is fine


def test_classes_need_the_objc_resolver() -> None:
    text = edit(TEXT, "  kind: objc\n", "  kind: dlsym\n")
    assert any("classes: go with resolver: {kind: objc}" in d.message for d in diagnostics(text))


def test_error_kinds_are_checked() -> None:
    text = edit(TEXT, "INVALID_VALUE: [NSPOSIXErrorDomain]", "INVALID_VALU: [NSPOSIXErrorDomain]")
    d = the_error(text, "'INVALID_VALU' is not an ErrorKind")
    assert "did you mean 'INVALID_VALUE'" in d.message
    text = edit(TEXT, "[NSPOSIXErrorDomain]", '["NSPOSIXErrorDomain:x"]')
    assert "expected a domain or domain:code" in the_error(text, "NSError domain").message


def test_declarations_must_give_id_sel_and_class() -> None:
    text = edit(TEXT, "  typedef struct objc_selector *SEL;\n", "")
    assert "must declare 'SEL'" in the_error(text, "must declare 'SEL'").message


def test_error_out_parameter() -> None:
    text = edit(TEXT, '"length": {returns: NSUInteger}', '"writeTo:error:": {returns: BOOL, args: [id, NSError **]}')
    text = edit(text, "  typedef unsigned long NSUInteger;\n", "  typedef unsigned long NSUInteger;\n"
                "  typedef unsigned char BOOL;\n")
    spec = load_library(Path("demo.yaml"), FILE, text=text)
    lib = bind_objc(spec, load_core(SPECS / "core.yaml", "specs/core.yaml"), parse_declared(spec, "pycparser"))
    m = next(m for m in lib.methods if m.selector == "writeTo:error:")
    assert m.error_param == 1 and m.params[1].decl == "id *" and m.autoreleases and m.result_kind == "bool"
    text = edit(TEXT, '"length": {returns: NSUInteger}', '"bad": {returns: NSError **}')
    assert "is an argument type" in the_error(text, "NSError **").message


@pytest.mark.parametrize("selector, returns, expected", [
    ("alloc", "id", "+1"), ("allocWithZone:", "id", "+1"), ("new", "id", "+1"), ("newBufferWithLength:", "id", "+1"),
    ("copy", "id", "+1"), ("copyWithZone:", "id", "+1"), ("mutableCopy", "id", "+1"), ("initWithBytes:", "id", "+1"),
    ("newline", "id", "+0"), ("copyright", "id", "+0"), ("allocated", "id", "+0"), ("description", "id", "+0"),
    ("newValue", "NSUInteger", "+0"), ("copy", "const char *", "+0"), ("stringWithUTF8String:", "id", "+0"),
])
def test_ownership_rule(selector: str, returns: str, expected: str) -> None:
    assert objc_ownership(selector, returns) == expected


def test_the_foundation_spec_generates(tmp_path: Path) -> None:
    d = tmp_path / "specs"
    (d / "foundation").mkdir(parents=True)
    (d / "core.yaml").write_text((SPECS / "core.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    (d / "foundation" / "foundation.yaml").write_text(
        (SPECS / "foundation" / "foundation.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    result = compile_specs(d)
    names = set(result.files)
    base = "ironaccelerator/backends/foundation/foundation/"
    assert {base + f for f in ("__init__.py", "_binding.py", "trampolines.c", "unchecked.py")} <= names
    assert [lib.module for lib in result.objc] == ["ironaccelerator.backends.foundation.foundation"]


# ---------------------------------------------------------------- functions: plain C entry points
FUNCTIONS = edit(TEXT, "  typedef struct { NSUInteger location, length; } NSRange;\n",
                 "  typedef struct { NSUInteger location, length; } NSRange;\n"
                 "  id MTLCreateSystemDefaultDevice(void);\n"
                 "  id MTLCopyAllDevices(void);\n"
                 "  id NSStringFromClass(Class aClass);\n"
                 "  NSUInteger NSPageSize(void);\n"
                 "  int printf(const char *format, ...);\n") + """\
functions:
  MTLCreateSystemDefaultDevice:
  MTLCopyAllDevices: {ownership: "+1"}
  NSStringFromClass:
  NSPageSize: {}
"""


def bound(text: str) -> dict[str, object]:
    spec = load_library(Path("demo.yaml"), FILE, text=text)
    lib = bind_objc(spec, load_core(SPECS / "core.yaml", "specs/core.yaml"), parse_declared(spec, "pycparser"))
    return {f.name: f for f in lib.functions}


def test_functions_bind_with_their_prototypes_and_ownership() -> None:
    assert diagnostics(FUNCTIONS) == []
    fns: dict[str, Any] = bound(FUNCTIONS)
    assert list(fns) == ["MTLCreateSystemDefaultDevice", "MTLCopyAllDevices", "NSStringFromClass", "NSPageSize"]
    create = fns["MTLCreateSystemDefaultDevice"]
    assert (create.result_kind, create.ownership, create.pointer_type, create.autoreleases) == \
        ("object", "+1", "id (*)(void)", False)
    assert fns["MTLCopyAllDevices"].ownership == "+1"
    name = fns["NSStringFromClass"]  # +0 by the rule: retained inside a pool
    assert (name.ownership, name.autoreleases, [p.decl for p in name.params]) == ("+0", True, ["Class"])
    assert fns["NSPageSize"].result_kind == "int"


def test_function_ownership_overrides_the_rule() -> None:
    text = edit(FUNCTIONS, "  NSStringFromClass:\n", '  NSStringFromClass: {ownership: "+1"}\n')
    fns: dict[str, Any] = bound(text)
    assert fns["NSStringFromClass"].ownership == "+1" and not fns["NSStringFromClass"].autoreleases
    text = edit(FUNCTIONS, "  MTLCreateSystemDefaultDevice:\n", '  MTLCreateSystemDefaultDevice: {ownership: "+0"}\n')
    assert bound(text)["MTLCreateSystemDefaultDevice"].ownership == "+0"  # type: ignore[attr-defined]


def test_undeclared_function_is_a_located_error_with_a_suggestion() -> None:
    text = edit(FUNCTIONS, "  MTLCopyAllDevices: {", "  MTLCopyAllDevice: {")
    d = the_error(text, "'MTLCopyAllDevice' is not declared")
    at(d, pos(text, "MTLCopyAllDevice: {"))
    assert "did you mean 'MTLCopyAllDevices'" in d.message


def test_bad_function_ownership_is_a_located_error() -> None:
    text = edit(FUNCTIONS, '{ownership: "+1"}', '{ownership: "+2"}')
    d = the_error(text, "ownership '+2'")
    at(d, pos(text, '"+2"'))
    text = edit(FUNCTIONS, "  NSPageSize: {}\n", '  NSPageSize: {ownership: "+1"}\n')
    d = the_error(text, "ownership goes with functions returning an object")
    at(d, pos(text, 'NSPageSize: {ownership: "+1"}', 24))
    assert "NSPageSize returns NSUInteger" in d.message
    text = edit(FUNCTIONS, "  NSPageSize: {}\n", "  NSPageSize: {ownrship: '+0'}\n")
    assert "did you mean 'ownership'" in the_error(text, "unknown key 'ownrship'").message


def test_variadic_and_clashing_functions_are_refused() -> None:
    text = FUNCTIONS + "  printf:\n"
    at(the_error(text, "is variadic"), pos(text, "printf:\n"))
    text = edit(FUNCTIONS, "  id NSStringFromClass(Class aClass);\n", "  id NSString(void);\n")
    text = edit(text, "  NSStringFromClass:\n", "  NSString:\n")
    d = the_error(text, "cannot be bound as a module-level function")
    assert "already has that name" in d.message
    text = edit(FUNCTIONS, "  NSUInteger NSPageSize(void);\n", "  NSUInteger ffi(void);\n")
    text = edit(text, "  NSPageSize: {}\n", "  ffi:\n")
    assert "shadow the generated module's own 'ffi'" in the_error(text, "'ffi' cannot be bound").message
    text = edit(FUNCTIONS, "  NSUInteger NSPageSize(void);\n", "  NSUInteger NSString_length(void);\n")
    text = edit(text, "  NSPageSize: {}\n", "  NSString_length:\n")  # unchecked.NSString_length is the method's
    assert "already has that name" in the_error(text, "'NSString_length' cannot be bound").message


def test_functions_section_goes_with_the_objc_resolver_only_in_its_form() -> None:
    text = FUNCTIONS + "  MTLCreateSystemDefaultDevice:\n"
    assert "duplicate function" in the_error(text, "duplicate function").message
    text = edit(FUNCTIONS, "  NSPageSize: {}\n", "  NSPageSize: [1]\n")
    assert diagnostics(text)  # not a mapping: refused


@pytest.mark.parametrize("name, expected", [
    ("MTLCreateSystemDefaultDevice", "+1"), ("MTLCopyAllDevices", "+1"), ("CFStringCreateCopy", "+1"),
    ("NSTemporaryDirectory", "+0"), ("NSStringFromClass", "+0"), ("MTLCreated", "+1"),
])
def test_create_copy_rule(name: str, expected: str) -> None:
    assert cf_ownership(name) == expected


def test_function_errors_exit_2_located(tmp_path: Path) -> None:
    """From the command line: every functions: mistake a file:line:col line, exit 2, no traceback."""
    import subprocess
    import sys

    specs = tmp_path / "specs"
    (specs / "demo").mkdir(parents=True)
    (specs / "core.yaml").write_text((SPECS / "core.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    text = edit(FUNCTIONS, "  MTLCopyAllDevices: {", "  MTLCopyAllDevice: {")
    text = edit(text, "  NSPageSize: {}\n", '  NSPageSize: {ownership: "+1"}\n')
    (specs / "demo" / "demo.yaml").write_text(text, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "ironaccelerator_gen", "generate", "--specs", str(specs), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    line, col = pos(text, "MTLCopyAllDevice: {")
    assert f"demo/demo.yaml:{line}:{col}: function 'MTLCopyAllDevice' is not declared" in proc.stderr, proc.stderr
    line, col = pos(text, 'NSPageSize: {ownership: "+1"}', 24)
    assert f"demo/demo.yaml:{line}:{col}: ownership goes with functions returning an object" in proc.stderr


# ---------------------------------------------------------------------------------------- resolver: prototypes:
# A source of prototypes is data of the spec (section `library > resolver (objc) > prototypes`): the generic
# C++-wrappers front-end names no SDK.  A made-up SDK here: nothing is parsed, the section is only read.
PROTOTYPES = """\
  prototypes:
    kind: cpp-wrappers
    sdk: demo-cpp
    marker: Demo/Demo.hpp
    env: DEMO_CPP
    version: {header: Demo/Version.hpp, macros: [DEMO_MAJOR, DEMO_MINOR]}
    headers: [Foundation/Foundation.hpp, Demo/Demo.hpp]
    defines: [DEMO_PRIVATE_IMPLEMENTATION]
    namespaces: {NS: NS, DM: DM}
    renamed: {NSunichar: unichar}
    root_class: {name: NSObject, cxx: NS::Object, templates: [Object, Referencing]}
    selector_symbols: Private::Selector::s_k
    class_symbols: Private::Class::s_k
    sends: [sendMessage]
    shims:
      objc/runtime.h: |
        #pragma once
        typedef struct objc_object *id;
"""
WITH_PROTOTYPES = edit(TEXT, "    INVALID_VALUE: [NSPOSIXErrorDomain]\n",
                       "    INVALID_VALUE: [NSPOSIXErrorDomain]\n" + PROTOTYPES)


def test_a_prototype_source_is_the_specs_data() -> None:
    assert diagnostics(WITH_PROTOTYPES) == []
    spec = load_library(Path("demo.yaml"), FILE, text=WITH_PROTOTYPES)
    assert spec.objc is not None and spec.objc.prototypes is not None
    src = spec.objc.prototypes
    assert (src.kind, src.sdk.value, src.marker, src.env) == ("cpp-wrappers", "demo-cpp", "Demo/Demo.hpp", "DEMO_CPP")
    assert src.headers == ("Foundation/Foundation.hpp", "Demo/Demo.hpp")
    assert (src.version_header, src.version_macros) == ("Demo/Version.hpp", ("DEMO_MAJOR", "DEMO_MINOR"))
    assert src.namespaces == (("NS", "NS"), ("DM", "DM")) and src.renamed == (("NSunichar", "unichar"),)
    assert (src.root_name, src.root_cxx, src.root_templates) == ("NSObject", "NS::Object", ("Object", "Referencing"))
    assert (src.selector_symbols, src.class_symbols, src.sends) == ("Private::Selector::s_k", "Private::Class::s_k",
                                                                     ("sendMessage",))
    assert src.shims == (("objc/runtime.h", "#pragma once\ntypedef struct objc_object *id;\n"),)
    assert src.sdk.location.line == pos(WITH_PROTOTYPES, "demo-cpp")[0]


def test_a_misspelled_prototype_kind_or_key_suggests() -> None:
    text = edit(WITH_PROTOTYPES, "kind: cpp-wrappers", "kind: cpp-wrapper")
    d = the_error(text, "kind 'cpp-wrapper'")
    at(d, pos(text, "cpp-wrapper\n"))
    assert "is not a source of prototypes (did you mean 'cpp-wrappers'?)" in d.message
    text = edit(WITH_PROTOTYPES, "    namespaces: {", "    namespace: {")
    d = the_error(text, "'namespace'")
    at(d, pos(text, "namespace: {"))
    assert d.message == "unknown key 'namespace' in prototypes (did you mean 'namespaces'?)"
    # a key the source needs, missing: said at the section
    text = edit(WITH_PROTOTYPES, "    sends: [sendMessage]\n", "")
    at(the_error(text, "missing required key 'sends' in prototypes"), pos(text, "kind: cpp-wrappers"))


def test_the_old_prototypes_name_alone_is_refused_with_what_to_write() -> None:
    text = edit(WITH_PROTOTYPES, PROTOTYPES, "  prototypes: demo-cpp\n")
    d = the_error(text, "expected a mapping saying how the prototypes are read")
    at(d, pos(text, "demo-cpp"))
    assert "kind: cpp-wrappers" in d.message and "library > resolver (objc) > prototypes" in d.message


def test_prototype_source_values_are_checked() -> None:
    text = edit(WITH_PROTOTYPES, "cxx: NS::Object", "cxx: NX::Object")
    d = the_error(text, "'NX::Object' is not in one of the namespaces read")
    at(d, pos(text, "NX::Object"))
    assert "'NX' is not a key of namespaces:" in d.message and d.message.endswith("known: NS, DM")
    text = edit(WITH_PROTOTYPES, "      objc/runtime.h: |", "      ../objc/runtime.h: |")
    at(the_error(text, "shim '../objc/runtime.h' is not valid"), pos(text, "../objc"))
    text = edit(WITH_PROTOTYPES, "marker: Demo/Demo.hpp", "marker: /usr/include/Demo.hpp")
    at(the_error(text, "marker '/usr/include/Demo.hpp' is not valid"), pos(text, "/usr/include/Demo.hpp"))
    text = edit(WITH_PROTOTYPES, "selector_symbols: Private::Selector::s_k", "selector_symbols: s_k")
    assert "ex. 'Private::Selector::s_k'" in the_error(text, "selector_symbols 's_k' is not valid").message
