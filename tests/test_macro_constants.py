"""Every macro constant the generator binds has the value C gives it.

A C program that includes the headers (with the spec's defines) prints each integer or floating macro
constant as gcc evaluates it -- its type decides how (``_Generic``: unsigned, signed or floating) -- and the
values must equal what the macro pass computed (generator/frontend/macros.py evaluates the token lists
itself, with C's integer types from frontend/cint.py, for both front-ends).  Checked on every library whose
SDK headers are installed, and on tests/headers/frontend_features.h, whose macros are the hard cases
(unsigned wraparound, conversions, promotions, truncating division).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import SPECS
from ironaccelerator_gen import sdk
from ironaccelerator_gen.frontend import ParseRequest, parse
from ironaccelerator_gen.ir import Location, MacroConstant
from ironaccelerator_gen.pipeline import compile_specs

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc")

HERE = Path(__file__).resolve().parent
PRINT = (
    '#define IA_P(x) _Generic((x), float: printf("%s f %.17g\\n", #x, (double)(x)), '
    'double: printf("%s f %.17g\\n", #x, (double)(x)), long double: printf("%s f %.17Lg\\n", #x, (long double)(x)), '
    'unsigned int: printf("%s u %llu\\n", #x, (unsigned long long)(x)), '
    'unsigned long: printf("%s u %llu\\n", #x, (unsigned long long)(x)), '
    'unsigned long long: printf("%s u %llu\\n", #x, (unsigned long long)(x)), '
    'default: printf("%s i %lld\\n", #x, (long long)(x)))\n'
)


def mismatches(constants: tuple[MacroConstant, ...], headers: list[str], include: Path,
               defines: tuple[tuple[str, str], ...], work: Path) -> tuple[int, list[str]]:
    """How many numeric constants were compared with gcc's values, and those that differ."""
    numbers = [c for c in constants if isinstance(c.value, (int, float)) and not isinstance(c.value, bool)]
    src = "".join(f"#define {name} {value}\n" for name, value in defines)
    src += "".join(f"#include <{h}>\n" for h in headers) + "#include <stdio.h>\n" + PRINT
    src += "int main(void) {\n" + "".join(f"    IA_P({c.name});\n" for c in numbers) + "    return 0;\n}\n"
    (work / "m.c").write_text(src)
    cc = subprocess.run(["gcc", "-w", "-I", str(include), "-o", str(work / "m"), str(work / "m.c")],
                        capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr[-3000:]
    out = subprocess.run([str(work / "m")], capture_output=True, text=True, check=True).stdout
    printed = dict(line.split(" ", 1) for line in out.splitlines())
    wrong = []
    for c in numbers:
        kind, text = printed[c.name].split(" ")
        if kind == "f":
            ok = isinstance(c.value, float) and abs(c.value - float(text)) <= 1e-6 * max(1.0, abs(float(text)))
        else:
            ok = isinstance(c.value, int) and c.value == int(text)
        if not ok:
            wrong.append(f"{c.name}: bound {c.value!r}, C {kind} {text}")
    return len(numbers), wrong


def test_bound_macro_constants_have_the_values_c_gives_them(tmp_path: Path) -> None:
    result = compile_specs(SPECS, frontend="clang")
    checked = 0
    for lib in result.libraries:
        work = tmp_path / f"{lib.spec.vendor}.{lib.spec.library}"
        work.mkdir()
        if lib.spec.declarations is not None:  # frontend: declared: the spec's own text is the header gcc reads
            include = work / "include"
            include.mkdir()
            (include / lib.spec.headers[0].value).write_text(lib.spec.declarations.text)
        else:
            found = sdk.find(lib.spec.sdk.value, None, lib.spec.headers[0].value)
            assert found is not None
            include = found.include_dir
        n, wrong = mismatches(lib.constants, [h.value for h in lib.spec.headers], include, lib.spec.defines, work)
        assert not wrong, f"{lib.spec.vendor}.{lib.spec.library}: " + "; ".join(wrong[:10])
        checked += n
    assert checked > 100 or not result.libraries, checked


@pytest.mark.parametrize("frontend", ["clang", "pycparser"])
def test_hard_macro_constants_have_the_values_c_gives_them(tmp_path: Path, frontend: str) -> None:
    req = ParseRequest(headers=("frontend_features.h",), include_dirs=(HERE / "headers",),
                       where=Location(file="test", line=1, col=1))
    header = parse(req, frontend=frontend)
    names = {c.name for c in header.constants}
    assert {"FF_ALL_ONES", "FF_WRAPS", "FF_BYTE", "FF_SIGNED_CMP", "FF_HEX_NEG", "FF_QUOTIENT"} <= names, names
    n, wrong = mismatches(header.constants, ["frontend_features.h"], HERE / "headers", (), tmp_path)
    assert not wrong, "; ".join(wrong)
    assert n >= 20, n
