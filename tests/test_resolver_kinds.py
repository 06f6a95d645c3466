"""Resolver kinds are runtime data (issue 28 item 5, completing issue 26's "vendors as data"): each kind is declared
once, in ``ironaccelerator_runtime.resolver_kinds`` (its spec keys and their C shapes, the C defines, the Python
class of ABI mode), and the generator and templates read that declaration.  Binding Vulkan needed a new kind
(``lookup``) and, with it, edits of generator/spec.py, schema.py, bind.py, render.py and three templates; here a
new kind is declared in this test module, registered in the same registry, and a library using it is generated,
built and called in both binding modes, with no edit under generator/ or templates/."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from ironaccelerator_gen import pipeline, resolvers, schema
from ironaccelerator_gen.build import build_library
from ironaccelerator_gen.diagnostics import UserError
from ironaccelerator_runtime import resolver_kinds

from test_declared import spec_dir
from test_spec import assert_user_error, run_cli

# ------------------------------------------------------------------------------------------- the declarations


def test_the_generator_reads_the_runtimes_declarations() -> None:
    """One registry: the generator's kinds are the runtime module's (loaded from its file), each consistent, each
    naming a Python class whose ``kind`` is its name; the table and objc kinds are the declared exceptions."""
    assert resolvers.module() is resolver_kinds  # one registry: a kind registered through either is in both
    gen = resolvers.declared()
    assert list(gen) == list(resolver_kinds.KINDS) == ["dlsym", "proc_address", "lookup"]
    assert resolvers.exceptions() == resolver_kinds.EXCEPTIONS == ("table", "objc")
    for name, kind in gen.items():
        assert kind.problems() == [], name
        assert repr(kind) == repr(resolver_kinds.KINDS[name]), name  # (two loads of one file: equal, not the same)
        if kind.python:
            module, _, cls = kind.python.rpartition(".")
            assert getattr(importlib.import_module(module), cls).kind == name


def test_one_registry_whichever_is_imported_first() -> None:
    """The generator loaded before the runtime package: the runtime's import finds the generator's module."""
    code = ("from ironaccelerator_gen import resolvers\n"
            "gen = resolvers.module()\n"
            "from ironaccelerator_runtime import resolver_kinds\n"
            "assert gen is resolver_kinds, (gen, resolver_kinds)\n"
            "import ironaccelerator_runtime.resolvers as r\n"
            "assert r.Lookup.kind in resolver_kinds.KINDS\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_the_spec_key_reference_is_the_declarations() -> None:
    """docs/SPEC_KEYS.md's resolver sections are rendered from the declarations (their docs and keys)."""
    for name, kind in resolvers.declared().items():
        if not kind.keys:
            continue
        section = schema.SECTIONS[f"library > resolver ({name})"]
        assert section.doc == kind.doc
        assert [(k.name, k.doc, k.required) for k in section.keys] == [(k.name, k.doc, k.required) for k in kind.keys]
    assert schema.keys("library > resolver") == ("kind",)
    assert "`dlsym` (the default), `proc_address`, `lookup`, `table` or `objc`" in \
        schema.SECTIONS["library > resolver"].doc


def test_a_declaration_outside_the_vocabulary_is_refused() -> None:
    K = resolver_kinds
    bad = K.ResolverKind(name="bad", doc="x", keys=(
        K.Key(name="function", type="function", doc="x", shape=K.Shape(result="int", params=("handle",), noun="x",
                                                                       what="x"), c=(("IA_X", "address"),)),
        K.Key(name="flag", type="constant", doc="x", default="nope")), py_library=(("x", "version"),), via="some")
    problems = bad.problems()
    assert len(problems) == 5, problems
    with pytest.raises(ValueError, match="already declared"):
        K.register(K.ResolverKind(name="lookup", doc="again"))


# ------------------------------------------------------------------------------------------- a new kind

# The toy library exports one function, toyFind(name, version), returning the others' addresses: toyScale and
# toyAnswer are not exported at all, so only the new kind's resolver finds them (dlsym cannot).
TOY = """\
vendor: decl
library: toy
backend: CUDA
frontend: declared
declarations: |
  typedef enum { TOY_OK = 0, TOY_BAD_ARG = 2 } ToyStatus;
  typedef void (*ToyFunction)(void);
  #define TOY_FIND_V1 1
  #define TOY_FIND_V2 2
  ToyFunction toyFind(const char *name, int version);
  ToyStatus toyScale(int value, int factor, long long *result);
  int toyAnswer(void);
resolver:
  kind: by_name
  function: toyFind
  version: TOY_FIND_V2
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
"""
IMPL = r"""
#include <string.h>
typedef enum { TOY_OK = 0, TOY_BAD_ARG = 2 } ToyStatus;
typedef void (*ToyFunction)(void);
static ToyStatus scale(int value, int factor, long long *r) {
    if (factor == 0) return TOY_BAD_ARG;
    *r = (long long)value * factor; return TOY_OK;
}
static int answer(void) { return 42; }
ToyFunction toyFind(const char *name, int version) {
    if (version != 2) return NULL;
    if (strcmp(name, "toyScale") == 0) return (ToyFunction)scale;
    if (strcmp(name, "toyAnswer") == 0) return (ToyFunction)answer;
    return NULL;
}
"""
# ABI mode's resolver: the class the declaration names (a module of the test's package, not of the runtime)
TOY_RESOLVER = '''\
from typing import Any

from ironaccelerator_runtime.resolvers import Resolver


class ByName(Resolver):
    kind = "by_name"

    def __init__(self, *, function: str, version: int) -> None:
        self.function, self.version = function, version

    def resolve(self, lib: Any, index: int) -> Any:
        b = lib._binding
        public = b.functions[index][0]
        if public == self.function:
            return None
        proc = self.finder(lib, self.function)
        if proc is None:
            return None
        fp = proc(public.encode(), self.version)
        return None if fp == lib._ffi.NULL else lib._ffi.cast(f"ia_pfn_{index}", fp)
'''
TOY_C = r"""typedef void (*(*ia_toy_find_t)(const char *, int))(void);
static void *ia_toy_find = NULL;
static int ia_toy_state = 0;

static void *ia_via_toy(int i)
{
    if (i == IA_TOY_INDEX)
        return NULL;
    if (ia_toy_state == 0) {
        ia_toy_find = ia_dlsym(IA_TOY_SYMBOL);
        ia_toy_state = 1;
    }
    if (ia_toy_find == NULL)
        return NULL;
    return (void *)((ia_toy_find_t)ia_toy_find)(ia_public[i], (int)IA_TOY_VERSION);
}

static void ia_forget_toy(void)
{
    ia_toy_find = NULL;
    ia_toy_state = 0;
}"""


def toy_kind() -> Any:
    K = resolvers.module()  # the registry the generator reads (the runtime's resolver_kinds, from its file)
    shape = K.Shape(result="function pointer", params=("string", "any"), noun="finder",
                    what="function pointer (const char *name, int version)")
    return K.ResolverKind(
        name="by_name",
        doc="Through the library's finder, `fn find(const char *name, int version)`.",
        keys=(K.Key(name="function", type="function", required=True, what="finder", shape=shape, py="function",
                    doc="The finder, a bound function.", c=(("IA_TOY_SYMBOL", "symbol"), ("IA_TOY_INDEX", "index"))),
              K.Key(name="version", type="constant", required=True, py="version", doc="The version asked for.",
                    c=(("IA_TOY_VERSION", "value"),))),
        via="all", python="toy_resolver.ByName",
        py_comment="ABI mode asks {symbol}(public name, version) first.",
        c_via="ia_via_toy", c_forget="ia_forget_toy", c_tables=("public",), c_code=TOY_C,
        c_comment="Symbols resolve through {symbol}(public name, version), then the exported symbol.",
        abi_comment="The pointer types of the functions {symbol} finds.")


@pytest.fixture
def by_name() -> Iterator[Any]:
    kind = resolvers.register(toy_kind())
    try:
        yield kind
    finally:
        del resolvers.declared()["by_name"]


def _generate(tmp_path: Path, text: str = TOY) -> dict[str, str]:
    files: dict[str, str] = pipeline.compile_specs(spec_dir(tmp_path, text), base=tmp_path).files
    return files


def test_a_new_kind_is_generated_built_and_called_in_both_modes(tmp_path: Path, by_name: Any) -> None:
    files = _generate(tmp_path)
    lib = "ironaccelerator/backends/decl/toy/"
    binding, c = files[lib + "_binding.py"], files[lib + "trampolines.c"]
    assert "from toy_resolver import ByName\n" in binding
    assert "RESOLVER = ByName(\n    function='toyFind',\n    version=2,\n)\n" in binding
    assert "    resolver=RESOLVER,\n" in binding
    assert '#define IA_RESOLVER_VIA ia_via_toy\n#define IA_RESOLVER_FORGET ia_forget_toy\n' in c
    assert '#define IA_TOY_SYMBOL "toyFind"\n' in c and "#define IA_TOY_VERSION 2ULL\n" in c
    assert "static const char *const ia_public[" in c and TOY_C in c
    assert re.search(r"^typedef int \(\*ia_pfn_\d+\)\(void\);$", files[lib + "abi.cdef"], re.M)
    out, home = tmp_path / "out", tmp_path / "home"
    pipeline.write(files, out)
    (out / "toy_resolver.py").write_text(TOY_RESOLVER, encoding="utf-8")
    (home / "lib").mkdir(parents=True)
    (tmp_path / "impl.c").write_text(IMPL, encoding="utf-8")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(home / "lib" / "libtoydecl.so"), str(tmp_path / "impl.c")],
                   check=True)
    build_library(out / "ironaccelerator" / "backends" / "decl" / "toy", api=True)
    code = """
import sys
if sys.argv[1] == "abi":
    sys.modules["ironaccelerator.backends.decl.toy._cffi"] = None
from ironaccelerator import Error, ErrorKind
from ironaccelerator.backends.decl import toy
assert toy.BINDING_MODE == sys.argv[1], toy.BINDING_MODE
assert toy.toyAnswer() == 42
assert toy.toyScale(21, 2) == 42
try:
    toy.toyScale(1, 0)
except Error as e:
    assert e.kind is ErrorKind.INVALID_VALUE, e
else:
    raise SystemExit("no error")
print("ok", toy.BINDING_MODE)
"""
    for mode in ("api", "abi"):
        r = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(out), "TOY_DECL_HOME": str(home),
                                "IRONACCEL_REQUIRE_API": "0"})
        assert r.returncode == 0 and r.stdout.split() == ["ok", mode], r.stdout + r.stderr


def test_a_new_kinds_keys_are_checked_and_located(tmp_path: Path, by_name: Any) -> None:
    cases = {
        "function: toyFind": ("function: toyScale", "'toyScale' does not look like a finder (function pointer "
                                                    "(const char *name, int version))"),
        "  function: toyFind\n": ("  function: toyFnid\n", "finder 'toyFnid' is not a bound function of "
                                                           "toy.declared.h (did you mean 'toyFind'?)"),
        "version: TOY_FIND_V2": ("version: TOY_FIND_V3", "'TOY_FIND_V3' is not a constant of toy.declared.h (did "
                                                        "you mean 'TOY_FIND_V2'"),
        "  version: TOY_FIND_V2\n": ("", "resolver kind by_name needs 'version'"),
        "  kind: by_name\n": ("  kind: by_name\n  scoped: [toyFind]\n", "'scoped' goes with resolver kind lookup, "
                                                                       "not by_name"),
    }
    for i, (old, (new, message)) in enumerate(cases.items()):
        with pytest.raises(UserError) as e:
            _generate(tmp_path / str(i), TOY.replace(old, new, 1))
        found = [str(d) for d in e.value.diagnostics]
        assert any(message in d and d.startswith("specs/decl/toy.yaml:") for d in found), (message, found)
    with pytest.raises(UserError) as e:
        _generate(tmp_path / "kind", TOY.replace("kind: by_name", "kind: by_nmae"))
    assert any("'by_nmae' is not a resolver kind (did you mean 'by_name'?); expected one of: dlsym, proc_address, "
               "lookup, by_name, table, objc" in str(d) for d in e.value.diagnostics)


def test_a_declared_kinds_mistake_exits_2_located(tmp_path: Path) -> None:
    """Through the command line: a declared kind's (here lookup's) key checked against the header, exit status 2."""
    specs = spec_dir(tmp_path, TOY.replace("  kind: by_name\n  function: toyFind\n  version: TOY_FIND_V2\n",
                                           "  kind: lookup\n  function: toyScale\n"))
    proc = run_cli(specs, tmp_path / "out")
    matches = assert_user_error(proc, "specs/decl/toy.yaml")
    assert [m["message"] for m in matches] == ["'toyScale' does not look like a lookup (function pointer (handle "
                                               "scope, const char *name))"]
