"""Every macro constant the generator binds has the value C gives it.

For each library whose SDK headers are installed, a C program that includes the spec's headers (with its
defines) prints each bound integer or floating macro constant as gcc evaluates it -- its type decides how
(``_Generic``: unsigned, signed or floating) -- and the values must equal what the macro pass computed
(generator/frontend/macros.py evaluates the token lists itself, for both front-ends).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import SPECS
from ironaccelerator_gen import sdk
from ironaccelerator_gen.pipeline import compile_specs

PRINT = (
    '#define IA_P(x) _Generic((x), float: printf("%s f %.17g\\n", #x, (double)(x)), '
    'double: printf("%s f %.17g\\n", #x, (double)(x)), long double: printf("%s f %.17Lg\\n", #x, (long double)(x)), '
    'unsigned int: printf("%s u %llu\\n", #x, (unsigned long long)(x)), '
    'unsigned long: printf("%s u %llu\\n", #x, (unsigned long long)(x)), '
    'unsigned long long: printf("%s u %llu\\n", #x, (unsigned long long)(x)), '
    'default: printf("%s i %lld\\n", #x, (long long)(x)))\n'
)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc")
def test_bound_macro_constants_have_the_values_c_gives_them(tmp_path: Path) -> None:
    result = compile_specs(SPECS, frontend="clang")
    checked = 0
    for lib in result.libraries:
        numbers = [c for c in lib.constants if isinstance(c.value, (int, float)) and not isinstance(c.value, bool)]
        found = sdk.find(lib.spec.sdk.value, None, lib.spec.headers[0].value)
        assert found is not None
        src = "".join(f"#define {name} {value}\n" for name, value in lib.spec.defines)
        src += "".join(f"#include <{h.value}>\n" for h in lib.spec.headers) + "#include <stdio.h>\n" + PRINT
        src += "int main(void) {\n" + "".join(f"    IA_P({c.name});\n" for c in numbers) + "    return 0;\n}\n"
        c_file, exe = tmp_path / f"{lib.spec.library}.c", tmp_path / str(lib.spec.library)
        c_file.write_text(src)
        cc = subprocess.run(["gcc", "-w", "-I", str(found.include_dir), "-o", str(exe), str(c_file)],
                            capture_output=True, text=True)
        assert cc.returncode == 0, cc.stderr[-3000:]
        printed = dict(line.split(" ", 1) for line in subprocess.run(
            [str(exe)], capture_output=True, text=True, check=True).stdout.splitlines())
        wrong = []
        for c in numbers:
            kind, text = printed[c.name].split(" ")
            if kind == "f":
                ok = isinstance(c.value, float) and abs(c.value - float(text)) <= 1e-6 * max(1.0, abs(float(text)))
            else:
                ok = isinstance(c.value, int) and c.value == int(text)
            if not ok:
                wrong.append(f"{c.name}: bound {c.value!r}, C {kind} {text}")
        assert not wrong, f"{lib.spec.vendor}.{lib.spec.library}: " + "; ".join(wrong[:10])
        checked += len(numbers)
    assert checked > 100 or not result.libraries, checked
