"""Threads' first use of a library module's C types (loader.realize_types).

cffi builds a module's C types lazily, on first use, and that is not thread-safe: when a garbage collection runs
while one thread builds an enum, a struct's fields or a function's type, a finalizer (Python code) can hand the GIL
to another thread that builds the same type, and cffi then aborts the process on an assertion about the type's slot
(``realize_c_type_or_func_now``).  Four threads' first launches on one Vulkan device did that in CI.  Every
generated module now builds its types when it is imported.

Each test is a child process that makes the race happen where it can: a collection at every allocation (threshold
1); the first thread touches every typedef, struct, union and function of the module, and each collection it makes
while it builds one sleeps 1 ms with the GIL released, while the second thread builds the same one.  Before the
change, the first enum, struct or function type built that way aborted the child."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PACKAGE_PATHS

import ironaccelerator

BACKENDS = Path(ironaccelerator.__file__).parent / "backends"
LIBRARIES = sorted(".".join(("ironaccelerator", "backends", p.parent.parent.name, p.parent.name))
                   for p in BACKENDS.glob("*/*/_binding.py"))

CHILD = r"""
import gc, importlib, sys, threading, time
from ironaccelerator import Error
package, mode = sys.argv[1], sys.argv[2]
if mode == "abi":
    sys.modules[package + "._cffi"] = None  # (ABI mode on purpose: the pre-parsed _cffi_abi)
importlib.import_module(package)
binding = importlib.import_module(package + "._binding").BINDING
if binding.mode != mode:
    print("SKIP", binding.mode)
    sys.exit(0)
ffi = binding.ffi
typedefs, structs, unions = ffi.list_types()
work = [("typeof", name) for name in typedefs]  # (nothing built here: the threads build it all)
work += [("new", tag + name) for tag, names in (("struct ", structs), ("union ", unions)) for name in names]
if mode == "api":
    work += [("lib", name) for name in dir(binding.lib)]
else:  # (each function resolved in the library, where it is found: the ABI-mode lib builds its type then)
    work += [("lib", f[0]) for f in binding.functions]
collections = [0]
inside = threading.Event()  # set by the first thread's collections in the middle of building work[current[0]]
current = [-1]
done = [False]
failed = []


def build(what, name):
    if what == "typeof":
        ffi.typeof(name)
    elif what == "new":
        try:
            ffi.new(name + " *")  # (the struct's fields built by the allocation)
        except (ffi.error, TypeError, ValueError):
            ffi.typeof(name)  # (an opaque one: no fields, no size)
    else:
        try:
            getattr(binding.lib, name)
        except (AttributeError, Error):
            pass  # (an ABI-mode library or function that is not found here)


def slow_collection(phase, info):
    collections[0] += 1
    if phase == "start" and threading.current_thread() is threads[0] and current[0] >= 0:
        inside.set()
        time.sleep(0.001)  # (the GIL released: the second thread builds the same type meanwhile)


def touch(first):
    try:
        if first:
            for i, item in enumerate(work):
                current[0] = i
                build(*item)
            current[0] = -1
        else:
            while inside.wait(60) and not done[0]:
                inside.clear()
                if current[0] >= 0:
                    build(*work[current[0]])
    except BaseException as e:
        failed.append(repr(e))
    finally:
        if first:
            done[0] = True
            inside.set()


threads = [threading.Thread(target=touch, args=(i == 0,)) for i in range(2)]
gc.callbacks.append(slow_collection)
gc.set_threshold(1)
for t in threads:
    t.start()
for t in threads:
    t.join()
gc.set_threshold(700)
print("OK" if not failed else failed, len(work), collections[0])
"""


@pytest.mark.parametrize("mode", ["api", "abi"])
@pytest.mark.parametrize("package", LIBRARIES)
def test_threads_first_use_of_every_type_is_safe(package: str, mode: str, tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(PACKAGE_PATHS))
    proc = subprocess.run([sys.executable, "-X", "faulthandler", str(script), package, mode], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    last = proc.stdout.splitlines()[-1].split()  # (a vendor library may print before)
    if last[:1] == ["SKIP"]:
        pytest.skip(f"{package} is in {last[1]} mode here, not {mode}")
    assert last[0] == "OK" and int(last[1]) > 0, proc.stdout
