"""The generated package imports the hand-written runtime lazily (issue 26, item 5), as ``cuda.bindings`` never
imports ``cuda.core``: importing a raw binding module (``ironaccelerator.backends.opencl.cl``) loads its loader, the
error type and the tracing switch, not the runtime's trait surface (``ironaccelerator_runtime.traits``) nor its
kernel arguments; ``import ironaccelerator`` then gives the whole core surface on first use of a name.

Each check runs in a child interpreter: this process has long imported everything."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT

# what a raw binding must not pull in: the trait surface and the kernel arguments (its loader, its error type and
# the tracing switch its raw functions are wrapped by are its own)
HEAVY = ("ironaccelerator_runtime.traits", "ironaccelerator_runtime.kernel_args")

# one C library per family that every checkout generates (OpenCL, QNN, the CUDA driver), and an Objective-C one
RAW = ("ironaccelerator.backends.opencl.cl", "ironaccelerator.backends.qnn.interface",
       "ironaccelerator.backends.cuda.driver", "ironaccelerator.backends.foundation.foundation")


def _child(code: str) -> dict[str, object]:
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    out: dict[str, object] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("module", RAW)
def test_a_raw_binding_does_not_import_the_trait_surface(module: str) -> None:
    got = _child(f"import importlib, json, sys\n"
                 f"m = importlib.import_module({module!r})\n"
                 f"print(json.dumps({{'loaded': sorted(n for n in {HEAVY!r} if n in sys.modules), "
                 f"'mode': getattr(m, 'BINDING_MODE', None)}}))")
    assert got["loaded"] == [], f"importing {module} imported {got['loaded']}"
    assert got["mode"] in ("api", "abi")


def test_a_raw_binding_raises_the_public_error_type() -> None:
    """The lazily imported package still has one ``Error``: the binding's is ``ironaccelerator.Error``."""
    got = _child("import json, sys\n"
                 "import ironaccelerator.backends.opencl.cl as cl\n"
                 "import ironaccelerator as ia\n"
                 "print(json.dumps({'same': cl.Error is ia.Error and cl.ErrorKind is ia.ErrorKind, "
                 "'traits': 'ironaccelerator_runtime.traits' in sys.modules}))")
    assert got == {"same": True, "traits": False}


def test_the_core_surface_is_there_on_first_use() -> None:
    """Every name of ``ironaccelerator.__all__`` resolves (the trait classes imported on first use), ``dir()`` lists
    them, ``from ironaccelerator import *`` binds them, and an unknown name is an AttributeError."""
    got = _child("import json, sys\n"
                 "import ironaccelerator as ia\n"
                 "before = 'ironaccelerator_runtime.traits' in sys.modules\n"
                 "from ironaccelerator_runtime.traits import Device\n"
                 "ns = {}\n"
                 "exec('from ironaccelerator import *', ns)\n"
                 "try:\n"
                 "    ia.NoSuchName\n"
                 "    missing = False\n"
                 "except AttributeError as e:\n"
                 "    missing = 'NoSuchName' in str(e)\n"
                 "print(json.dumps({'before': before, 'device': ia.Device is Device, "
                 "'all': sorted(n for n in ia.__all__ if n not in ns), "
                 "'dir': sorted(set(ia.__all__) - set(dir(ia))), 'missing': missing, "
                 "'nvtx': ia.nvtx.__name__}))")
    assert got == {"before": False, "device": True, "all": [], "dir": [], "missing": True,
                   "nvtx": "ironaccelerator_runtime.nvtx"}


def test_opening_an_opencl_device_leaves_the_kernel_cache_and_entry_point_metadata_unimported() -> None:
    """Issue 27 (registry + first device): opening a device and making a stream imports neither the kernel cache
    (loaded by the first ``load_module``: with it go hashlib, json, tempfile, shutil...) nor ``importlib.metadata``
    (no distribution here declares an ``ironaccelerator.backends`` entry point); ``load_module`` still caches."""
    got = _child("import json, sys\n"
                 "import ironaccelerator as ia\n"
                 "from ironaccelerator import BackendKind, BackendRegistry, Error\n"
                 "try:\n"
                 "    d = BackendRegistry.default().get(BackendKind.OPENCL).open(0)\n"
                 "except Error:\n"
                 "    print(json.dumps({'skip': True})); sys.exit(0)\n"
                 "d.create_stream()\n"
                 "before = [n for n in ('ironaccelerator_runtime.kernel_cache', 'importlib.metadata')"
                 " if n in sys.modules]\n"
                 "d.load_module('__kernel void k(__global int *a) { a[0] = 1; }').kernel('k')\n"
                 "after = 'ironaccelerator_runtime.kernel_cache' in sys.modules\n"
                 "print(json.dumps({'before': before, 'after': after}))")
    if got.get("skip"):
        pytest.skip("no OpenCL device")
    assert got == {"before": [], "after": True}


def test_the_first_device_imports_neither_logging_nor_ctypes() -> None:
    """Issue 27 item 3 (registry + first device, against pyopencl's ``get_platforms`` + ``Context`` +
    ``CommandQueue``): with tracing off, ``logging`` is imported only when the trace logger is read, and ``ctypes``
    only by a host view (together ~3-4 ms of the first device's start, ``bench/bench_opencl.py`` section 5)."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "IRONACCEL_TRACE"}
    code = ("import json, sys\n"
            "import ironaccelerator as ia\n"
            "try:\n"
            "    ia.BackendRegistry.default().get(ia.BackendKind.OPENCL).open(0).create_stream()\n"
            "except ia.Error:\n"
            "    pass  # (no OpenCL here: the imports up to the failure still count)\n"
            "from ironaccelerator_runtime import tracing\n"
            "before = sorted(n for n in ('logging', 'ctypes') if n in sys.modules)\n"
            "print(json.dumps({'before': before, 'log': tracing.log.name, 'after': 'logging' in sys.modules}))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got == {"before": [], "log": "ironaccelerator.trace", "after": True}, got


def test_the_first_opencl_device_imports_no_dataclasses() -> None:
    """Issue 27 item 3 (registry + first device): the value classes on the way to a device and its stream
    (``DeviceId``, ``Capability``, ``DeviceLimits``, ``DeviceDescriptor``, ``LaunchDims``, ``Scalar``, ``CopyRegion``,
    ``CompileOptions``, ``KernelAttributes``, ``PoolStats``, ``LocalMemory``, ``Param``, ``Matcher``,
    ``OpenCLTables``) are ``records.record`` classes: ``dataclasses`` and the ``inspect`` it imports (~6 ms, and ~1 ms
    per class made) stay out until something asks for them, and ``dataclasses.replace`` / ``fields`` /
    ``is_dataclass`` / ``FrozenInstanceError`` then work on them as on the dataclasses they were."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "IRONACCEL_TRACE"}
    code = ("import json, sys\n"
            "import ironaccelerator as ia\n"
            "try:\n"
            "    d = ia.BackendRegistry.default().get(ia.BackendKind.OPENCL).open(0)\n"
            "    d.create_stream()\n"
            "    desc = d.descriptor\n"
            "except ia.Error:\n"
            "    desc = None  # (no OpenCL here: the imports up to the failure still count)\n"
            "ia.LaunchDims(4, 2), ia.Scalar(1, ia.DType.I32)\n"
            "before = sorted(n for n in ('dataclasses', 'inspect') if n in sys.modules)\n"
            "import dataclasses\n"
            "d0 = ia.DeviceId(ia.BackendKind.OPENCL, 0)\n"
            "ok = [dataclasses.is_dataclass(d0), dataclasses.replace(d0, index=1) == ia.DeviceId(ia.BackendKind.OPENCL, 1),\n"
            "      [f.name for f in dataclasses.fields(ia.DeviceLimits)][:2] == ['max_block', 'max_threads_per_block']]\n"
            "if desc is not None:\n"
            "    ok.append(dataclasses.replace(desc, name='x').name == 'x')\n"
            "try:\n"
            "    d0.index = 2\n"
            "    ok.append(False)\n"
            "except dataclasses.FrozenInstanceError:\n"
            "    ok.append(True)\n"
            "print(json.dumps({'before': before, 'ok': all(ok)}))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got == {"before": [], "ok": True}, got


def test_the_registry_imports_alone() -> None:
    """Issue 27 item 3 (registry + first device): ``ia.BackendRegistry`` imports the registry alone, not the rest
    of the trait surface, nor ``threading``: ``BackendRegistry.default().get(OPENCL)`` starts the OpenCL
    platform on a worker thread before those import (early_start.py), so that they import beside it.  The
    rest then comes on first use of any other name, each module's type-checking names bound as before."""
    got = _child("import json, sys\n"
                 "import ironaccelerator as ia\n"
                 "ia.BackendRegistry\n"
                 "loaded = sorted(n for n in sys.modules if n.startswith('ironaccelerator_runtime.traits.'))\n"
                 "threading = 'threading' in sys.modules\n"
                 "from ironaccelerator_runtime import traits\n"
                 "from ironaccelerator_runtime.traits import values\n"
                 "ok = traits.Device is ia.Device and traits.BackendRegistry is ia.BackendRegistry\n"
                 "print(json.dumps({'loaded': loaded, 'threading': threading, 'ok': ok, "
                 "'bound': values.__dict__.get('Stream') is traits.Stream, 'size_max': traits._SIZE_MAX}))")
    assert got == {"loaded": ["ironaccelerator_runtime.traits.registry"],
                   "threading": False, "ok": True, "bound": True, "size_max": 2**64 - 1}


# a child that reports on early_start.py's early start: whether one began, and whether it is over
_START = ("import json, sys\n"
          "import ironaccelerator as ia\n"
          "from ironaccelerator_runtime import early_start as start\n"
          "def state():\n"
          "    return None if start._done is None else ('running' if start._done.locked() else 'done')\n")


def _opencl_or_skip() -> None:
    import os

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: nothing is started early")
    got = _child("import json\nimport ironaccelerator as ia\n"
                 "try:\n    ia.BackendRegistry.default().get(ia.BackendKind.OPENCL).open(0)\n    ok = True\n"
                 "except ia.Error:\n    ok = False\nprint(json.dumps({'ok': ok}))")
    if not got["ok"]:
        pytest.skip("no OpenCL device")


def test_get_opencl_starts_the_platform_early_and_probes_do_not() -> None:
    """``get(OPENCL)`` begins the platform's start (the ICD loader opening the vendors' libraries) on a worker thread
    before it imports the backend; ``devices()`` joins it.  ``available()`` (a probe of every backend), a private
    registry, importing the backend's classes and a process bound to one CPU start nothing."""
    _opencl_or_skip()
    got = _child(_START +
                 "from ironaccelerator.backends.opencl import OpenCLBackend\n"
                 "private = ia.BackendRegistry({ia.BackendKind.OPENCL: lambda: OpenCLBackend()})\n"
                 "private.get(ia.BackendKind.OPENCL)\n"
                 "after_import = state()\n"
                 "ia.BackendRegistry.default().available()\n"
                 "print(json.dumps({'import': after_import, 'probe': state()}))")
    assert got == {"import": None, "probe": None}
    got = _child(_START +
                 "import os\n"
                 "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
                 "n = len(ia.BackendRegistry.default().get(ia.BackendKind.OPENCL).devices())\n"
                 "print(json.dumps({'one_cpu': state(), 'found': n > 0}))")
    assert got == {"one_cpu": None, "found": True}
    got = _child(_START +
                 "b = ia.BackendRegistry.default().get(ia.BackendKind.OPENCL)\n"
                 "after_get = state()\n"
                 "n = len(b.devices())\n"
                 "print(json.dumps({'get': after_get, 'devices': state(), 'found': n > 0}))")
    assert got["get"] in ("running", "done") and (got["devices"], got["found"]) == ("done", True), got


def test_the_early_start_has_begun_its_call_when_get_goes_on() -> None:
    """``start_opencl`` hands the new worker the GIL until the worker's call has begun: left to take it on its
    own, the worker waited for the interpreter's switch interval (5 ms) while ``get`` imported the backend, and the
    platform's ~20 ms start began that much later.  The handoff is bounded (``_HANDOFF_S``); widened here so that a
    loaded machine cannot make the test flaky, it must see the worker's running lock released."""
    _opencl_or_skip()
    got = _child(_START +
                 "start._HANDOFF_S = 30.0\n"
                 "seen = []\n"
                 "run = start._run\n"
                 "def spy(*args):\n"
                 "    seen.append('begun')\n"
                 "    run(*args)\n"
                 "start._run = spy\n"
                 "sys.setswitchinterval(1.0)\n"  # (without the handoff, the worker would wait a second for the GIL)
                 "start.start_opencl()\n"
                 "print(json.dumps({'begun': list(seen)}))")
    assert got == {"begun": ["begun"]}, got


def test_the_early_start_runs_nothing_of_the_library_package_before_its_call() -> None:
    """The worker's call begins before the library's package (``ironaccelerator.backends.opencl.cl``: its binding
    and wrappers, ~1.5 ms of Python) is imported: the early start opens the ICD loader itself, at the first of the
    spec's candidate paths that opens (the vendor package's ``_LIBRARIES``), and loads the package's compiled module
    alone, which the package then finds (as its attribute ``_cffi`` too, as an import makes it) and its binding
    uses.  Before, the package was imported first (the worker's call began ~2 ms later).  Where the package is
    imported already, its binding's function is called as before."""
    _opencl_or_skip()
    spy = ("PACKAGE = 'ironaccelerator.backends.opencl.cl'\n"
           "seen = []\n"
           "run = start._run\n"
           "def spy(*args):\n"
           "    seen.append([n in sys.modules for n in (PACKAGE, PACKAGE + '._cffi')])\n"
           "    run(*args)\n"
           "start._run = spy\n")
    got = _child(_START + spy +
                 "b = ia.BackendRegistry.default().get(ia.BackendKind.OPENCL)\n"
                 "n = len(b.devices())\n"
                 "from ironaccelerator.backends.opencl.cl._binding import BINDING\n"
                 "from ironaccelerator.backends.opencl import cl\n"
                 "ext = sys.modules[PACKAGE + '._cffi']\n"
                 "same = BINDING.lib is ext.lib and cl._cffi is ext\n"
                 "print(json.dumps({'seen': seen, 'devices': n, 'same': same, 'mode': BINDING.mode}))")
    assert got == {"seen": [[False, True]], "devices": got["devices"], "same": True, "mode": "api"}, got
    assert isinstance(got["devices"], int) and got["devices"] >= 1
    got = _child(_START + spy +
                 "from ironaccelerator.backends.opencl import cl\n"
                 "b = ia.BackendRegistry.default().get(ia.BackendKind.OPENCL)\n"
                 "print(json.dumps({'seen': seen, 'devices': len(b.devices())}))")
    assert got["seen"] == [[True, True]] and isinstance(got["devices"], int) and got["devices"] >= 1, got


def test_the_early_start_runs_before_the_backends_packages_and_no_extension_module_loads_beside_it() -> None:
    """What runs before the worker's call is the critical path, and an extension module loaded beside the worker
    waits for the worker's ``dlopen`` (the dynamic loader's lock), and so does everything the importing thread
    does after it.  So when the call begins: no package of the backend's runtime is imported yet (the early start
    lives at the runtime's top level: importing ``backends/opencl/`` first cost ~0.5 ms), and the extension modules
    loaded are cffi's backend and the library's compiled module alone; from then up to the first device's stream,
    no other one loads (before: ``math`` and ``struct`` loaded ahead of the call for the backend's modules)."""
    _opencl_or_skip()
    got = _child(_START +
                 "def extensions():\n"
                 "    return {n for n, m in list(sys.modules.items())\n"
                 "            if str(getattr(m, '__file__', None) or '').endswith(('.so', '.pyd'))}\n"
                 "before = extensions()\n"
                 "seen = []\n"
                 "run = start._run\n"
                 "def spy(*args):\n"
                 "    seen.append([sorted(extensions() - before),\n"
                 "                 sorted(n for n in sys.modules if n.startswith('ironaccelerator_runtime.backends'))])\n"
                 "    run(*args)\n"
                 "start._run = spy\n"
                 "d = ia.BackendRegistry.default().get(ia.BackendKind.OPENCL).open(0)\n"
                 "d.create_stream()\n"
                 "print(json.dumps({'at_call': seen, 'after': sorted(extensions() - before)}))")
    compiled = ["_cffi_backend", "ironaccelerator.backends.opencl.cl._cffi"]
    assert got == {"at_call": [[compiled, []]], "after": compiled}, got


def test_the_early_start_leaves_errors_and_forks_as_they_were() -> None:
    """A library that does not load: nothing is started, and ``get`` raises LIBRARY_NOT_FOUND as it did.  A fork
    right after ``get`` waits for the start to finish (never a child in the middle of ``dlopen``), and the child
    opens the device and runs a kernel."""
    _opencl_or_skip()
    got = _child(_START +
                 "from ironaccelerator.backends.opencl import cl\n"
                 "cl.use_library('/nonexistent/libOpenCL.so.1')\n"
                 "try:\n"
                 "    ia.BackendRegistry.default().get('opencl')\n"
                 "    kind = None\n"
                 "except ia.Error as e:\n"
                 "    kind = e.kind.name\n"
                 "print(json.dumps({'kind': kind, 'start': state()}))")
    assert got == {"kind": "LIBRARY_NOT_FOUND", "start": None}
    got = _child(_START +
                 "import os\n"
                 "import numpy as np\n"
                 "b = ia.BackendRegistry.default().get(ia.BackendKind.OPENCL)\n"
                 "pid = os.fork()\n"
                 "if pid == 0:\n"
                 "    code = 1\n"
                 "    try:\n"
                 "        seen = state()\n"
                 "        d = b.open(0)\n"
                 "        s = d.create_stream()\n"
                 "        k = d.load_module('__kernel void k(__global int *a) { a[0] = 7; }').kernel('k')\n"
                 "        buf = d.alloc(4)\n"
                 "        s.launch(ia.KernelLaunch(k, ia.LaunchDims(1, 1), (buf,)))\n"
                 "        out = np.zeros(1, np.int32)\n"
                 "        s.copy_to_host(out, buf)\n"
                 "        s.synchronize()\n"
                 "        code = 0 if (seen, int(out[0])) == ('done', 7) else 2\n"
                 "    finally:\n"
                 "        os._exit(code)\n"
                 "_, status = os.waitpid(pid, 0)\n"
                 "print(json.dumps({'child': os.waitstatus_to_exitcode(status)}))")
    assert got == {"child": 0}
