"""The objc trampolines of the golden case objc_messages (its generated trampolines.c)
in the Apple flavour, which this Linux machine cannot run against Apple's runtime: compiled with
``-DIA_OBJC_APPLE=1`` against declarations of objc_msgSend & co. written here, and run against a fake runtime
(written here too) that records which entry point each message went through: objc_msgSend_stret for the 24-byte
GoldenSize on x86-64 (never for the 8-byte GoldenPoint), objc_msgSend_fpret for long double only, objc_msgSend
otherwise.  The GNU flavour is what tests/test_golden.py runs against the real GNU runtime."""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT

CASE_NAME = "objc_messages"
INCLUDE = ROOT / "runtime" / "ironaccelerator_runtime" / "include"
WARNINGS = ["-Wall", "-Werror=incompatible-pointer-types", "-Werror=implicit-function-declaration",
            "-Werror=int-conversion", "-Wno-unused-function", "-Wno-unused-variable"]

# the Apple runtime's entry points as its headers declare them (written here: no Apple header is used)
APPLE_DECLARATIONS = """
typedef struct objc_object *id;
typedef struct objc_selector *SEL;
typedef struct objc_class *Class;
void objc_msgSend(void);
void objc_msgSend_stret(void);
void objc_msgSend_fpret(void);
Class object_getClass(id obj);
SEL sel_registerName(const char *name);
Class objc_getClass(const char *name);
signed char class_respondsToSelector(Class cls, SEL sel);
const char *class_getName(Class cls);
Class class_getSuperclass(Class cls);
"""

FAKE_RUNTIME = r"""
#include <stdio.h>
#include <string.h>
#include "trampolines.c"

static int ia_open_library(void) { return 0; }  /* (the Python loader's part: nothing to open here) */

static int entry;  /* 1: objc_msgSend, 2: objc_msgSend_stret, 3: objc_msgSend_fpret */
static struct { Class isa; } instance, klass;

/* exported (-rdynamic): ia_objc_setup() finds them with dlsym(RTLD_DEFAULT, ...) as it finds Apple's */
long objc_msgSend(id self, SEL sel) { (void)self; (void)sel; entry = 1; return 7; }
void objc_msgSend_stret(GoldenSize *out, id self, SEL sel)
{
    (void)self; (void)sel;
    entry = 2;
    out->width = 11; out->height = 22; out->depth = 33;
}
long double objc_msgSend_fpret(id self, SEL sel) { (void)self; (void)sel; entry = 3; return 1.25L; }
Class object_getClass(id obj) { return obj == (id)&klass ? (Class)&klass : (Class)&klass; }
SEL sel_registerName(const char *name) { return (SEL)name; }
Class objc_getClass(const char *name) { (void)name; return (Class)&klass; }
unsigned char class_respondsToSelector(Class cls, SEL sel) { (void)cls; (void)sel; return 1; }
const char *class_getName(Class cls) { (void)cls; return "Fake"; }
Class class_getSuperclass(Class cls) { (void)cls; return NULL; }

int main(void)
{
    id obj = (id)&instance;
    GoldenSize s;
    long double ld;
    s = GoldenShape_size(obj);
    printf("size %d %lu %lu %lu\n", entry, s.width, s.height, s.depth);
    entry = 0;
    s = ia_checked_%(size)d(obj);
    printf("checked-size %d %lu\n", entry, s.width);
    entry = 0;
    (void)GoldenShape_origin(obj);
    printf("origin %d\n", entry);
    entry = 0;
    ld = GoldenShape_preciseArea(obj);
    printf("preciseArea %d %.2Lf\n", entry, ld);
    entry = 0;
    (void)GoldenShape_area(obj);
    printf("area %d\n", entry);
    entry = 0;
    printf("retainCount %d %lu\n", (int)GoldenObject_retainCount(obj), (unsigned long)0);
    entry = 0;
    (void)GoldenShape_scaledBy_(obj, 3);
    printf("scaledBy %d\n", entry);
    entry = 0;
    printf("nil %lu %d\n", GoldenShape_size(NULL).width, entry);
    return 0;
}
"""


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The golden case's library output, generated now (its expected/ holds only the files it compares)."""
    from test_golden import generate, library_dir

    out = tmp_path_factory.mktemp(CASE_NAME)
    prefix = library_dir(CASE_NAME)
    directory = out / "case"
    for rel, text in generate([CASE_NAME], out / "gen").items():
        if rel.startswith(prefix):
            (directory / rel[len(prefix):]).parent.mkdir(parents=True, exist_ok=True)
            (directory / rel[len(prefix):]).write_text(text, encoding="utf-8")
    assert (directory / "trampolines.c").is_file()
    return directory


def _gcc() -> str:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler")
    return gcc


@pytest.mark.parametrize("flavour", ["apple", "gnu"])
def test_trampolines_compile_in_both_flavours(flavour: str, tmp_path: Path, case: Path) -> None:
    decls = tmp_path / "apple_runtime.h"
    decls.write_text(APPLE_DECLARATIONS if flavour == "apple" else "", encoding="utf-8")
    # the declarations come first as an Apple build's <objc/message.h> would; types.cdef then repeats the
    # typedefs of id, SEL and Class identically (allowed in C11)
    r = subprocess.run([_gcc(), "-std=c11", "-fsyntax-only", *WARNINGS, f"-DIA_OBJC_APPLE={int(flavour == 'apple')}",
                        "-include", str(decls), "-I", str(INCLUDE), "-I", str(case), str(case / "trampolines.c")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_each_selector_uses_its_flavour_macro(case: Path) -> None:
    text = (case / "trampolines.c").read_text(encoding="utf-8")
    assert "IA_SEND_STRUCT(ia_send_" in text and "GoldenSize, self" in text  # struct results: stret candidates
    assert "IA_SEND_FP(ia_send_" in text and ", 1, self" in text and ", 0, self" in text  # long double / double
    assert "typedef GoldenSize (*ia_send_" in text and "(id, SEL, GoldenUInteger)" in text  # exact prototypes


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="the x86-64 stret/fpret rules")
def test_apple_flavour_picks_stret_and_fpret_on_x86_64(tmp_path: Path, case: Path) -> None:
    text = (case / "trampolines.c").read_text(encoding="utf-8")
    size_index = int(text.split("-[GoldenShape size] */")[1].split("ia_send_")[1].split("_t")[0])
    src = tmp_path / "fake_apple.c"
    src.write_text(FAKE_RUNTIME.replace("%(size)d", str(size_index)), encoding="utf-8")
    exe = tmp_path / "fake_apple"
    r = subprocess.run([_gcc(), "-std=gnu11", "-O1", "-w", "-DIA_OBJC_APPLE=1", "-rdynamic", "-I", str(INCLUDE),
                        "-I", str(case), str(src), "-o", str(exe), "-ldl"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert lines["size"] == "2 11 22 33"  # 24 bytes > 16: objc_msgSend_stret, the result through the hidden pointer
    assert lines["checked-size"] == "2 11"
    assert lines["origin"] == "1"  # 8 bytes: objc_msgSend
    assert lines["preciseArea"] == "3 1.25"  # long double: objc_msgSend_fpret
    assert lines["area"] == "1"  # double on x86-64: objc_msgSend
    assert lines["retainCount"].split()[0] == "7"
    assert lines["scaledBy"] == "2"
    assert lines["nil"] == "0 0"  # a nil receiver: nothing sent, zero returned
