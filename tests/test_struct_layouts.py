"""Every struct the generated cdefs declare has the real headers' layout (issue 11 item 7): a C program built
against the vendor's own header prints ``sizeof`` of each struct and ``offsetof`` of each field, and cffi's
reading of our types.cdef must agree.  cffi's API mode cannot catch a wrong cdef: trampolines.c includes the
cdef, not the vendor's header, so the compiler agrees with whatever the cdef says.  A wrong layout would
pass wrong values to the driver (CUDA_MEMCPY2D, hipDeviceProp_t, cl_image_desc, ...)."""

from __future__ import annotations

import importlib
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ironaccelerator_gen import sdk
from ironaccelerator_gen.spec import LibrarySpec, load_library

from conftest import SPECS

LIBRARIES = {"cuda.driver": SPECS / "cuda" / "driver.yaml", "cuda.nvrtc": SPECS / "cuda" / "nvrtc.yaml",
             "hip.runtime": SPECS / "hip" / "runtime.yaml", "opencl.cl": SPECS / "opencl" / "cl.yaml",
             "vulkan.vulkan": SPECS / "vulkan" / "vulkan.yaml"}


def c_program(spec: LibrarySpec, module: Any) -> tuple[str, list[str]]:
    """The C program that prints the real layout, and the lines cffi says it should print."""
    ffi = module.ffi
    lines = ["#include <stddef.h>", "#include <stdio.h>"]
    lines += [f"#define {k} {v}" for k, v in spec.defines] + [f"#undef {u}" for u in spec.undefines]
    lines += [f"#include <{h.value}>" for h in spec.headers]
    lines.append("int main(void) {")
    want = []
    for name in module.STRUCTS:
        t = ffi.typeof(name)
        lines.append(f'    printf("{name} %zu\\n", sizeof({name}));')
        want.append(f"{name} {ffi.sizeof(t)}")
        for field, f in t.fields or ():
            if not field or f.bitsize != -1:  # offsetof cannot name a bit-field (its struct's size still counts)
                continue
            lines.append(f'    printf("{name}.{field} %zu\\n", offsetof({name}, {field}));')
            want.append(f"{name}.{field} {f.offset}")
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n", want


@pytest.mark.parametrize("name", sorted(LIBRARIES))
def test_struct_layouts_match_the_real_headers(name: str, tmp_path: Path) -> None:
    spec = load_library(LIBRARIES[name], f"specs/{name.replace('.', '/')}.yaml")
    found = sdk.find(spec.sdk.value)
    if found is None:
        pytest.skip(f"no {spec.sdk} headers here")
    module = importlib.import_module(f"ironaccelerator.backends.{name}")
    if not module.STRUCTS:
        pytest.skip(f"{name} declares no struct")
    source, want = c_program(spec, module)
    (tmp_path / "layout.c").write_text(source, encoding="utf-8")
    exe = tmp_path / "layout"
    build = subprocess.run(["gcc", "-w", "-I", str(found.include_dir), str(tmp_path / "layout.c"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    wrong = [f"{w}  (the header says {g.rsplit(' ', 1)[1]})" for w, g in zip(want, got) if w != g]
    assert len(got) == len(want) and not wrong, "\n".join(wrong[:40])
    assert len(want) > len(module.STRUCTS)  # fields were compared, not only sizes
