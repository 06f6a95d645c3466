"""Shared fixtures: paths, and the generated package on sys.path."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import pytest

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "generated"
RUNTIME = ROOT / "runtime"  # the hand-written runtime package, ironaccelerator_runtime
SPECS = ROOT / "specs"
# The test suites' own backend kinds: a library spec's backend: must be one of core.yaml's (issue 15 item 3), and
# the golden cases (tests/golden) and the generator tests' inline specs name theirs GOLDEN and TEST.
TEST_BACKEND_KINDS = ("  GOLDEN: {dlpack_device: 1, doc: the golden test cases (tests/golden)}\n"
                      "  TEST: {dlpack_device: 1, doc: the generator tests' own libraries}\n")


def core_text() -> str:
    """specs/core.yaml with :data:`TEST_BACKEND_KINDS`, for spec directories built by tests."""
    text = (SPECS / "core.yaml").read_text(encoding="utf-8")
    assert "\nbackend_kinds:\n" in text
    return text.replace("\nbackend_kinds:\n", "\nbackend_kinds:\n" + TEST_BACKEND_KINDS, 1)

CUDA_INCLUDE = Path("/usr/local/cuda/include")

# CI=true (.ci/run's environment) makes `generate` fail on a library whose SDK is not found (issue 29 item 5): that is
# `make test`'s own `generate --check`, before pytest.  The tests' toy spec directories, whose SDKs are missing on
# purpose, run `generate` as a maintainer's machine does; tests/test_sdk.py sets CI where it tests the CI rule.
os.environ.pop("CI", None)

# IRONACCEL_TEST_INSTALLED=1 (make test-wheel: scripts/test-wheel.sh): the tests run against the installed
# ironaccelerator wheel, never the checkout's generated/ and runtime/.  PACKAGE_PATHS: what a test's subprocess
# puts on its PYTHONPATH to import the package under test.
INSTALLED = bool(os.environ.get("IRONACCEL_TEST_INSTALLED"))
PACKAGE_PATHS: list[str] = [] if INSTALLED else [str(GENERATED), str(RUNTIME)]
for _path in PACKAGE_PATHS[::-1]:
    if _path not in sys.path:
        sys.path.insert(0, _path)
if INSTALLED:
    import ironaccelerator as _ia
    import ironaccelerator_runtime as _iar

    for _mod in (_ia, _iar):
        _file = Path(str(_mod.__file__)).resolve()
        if _file.is_relative_to(ROOT.resolve()):
            raise ImportError(f"IRONACCEL_TEST_INSTALLED is set but {_mod.__name__} was imported from the checkout "
                              f"({_file}), not an installed wheel: a .pth or PYTHONPATH names {ROOT}")

# The kernel cache (Device.load_module) of every test and of the subprocesses they start: a fresh directory per
# run, never the user's ~/.cache/ironaccelerator (a test then sees only entries this run wrote).
if not os.environ.get("IRONACCEL_CACHE_DIR"):
    import atexit
    import shutil
    import tempfile

    os.environ["IRONACCEL_CACHE_DIR"] = tempfile.mkdtemp(prefix="ia-kernel-cache-")
    atexit.register(shutil.rmtree, os.environ["IRONACCEL_CACHE_DIR"], True)


# Long forms.  A test that has a long form runs a shortened form in every run (make test: seconds), and its
# long form (minutes: more cases, more iterations, longer) only when IA_SLOW is set: `IA_SLOW=1 pytest -m slow`
# runs just the long forms, `IA_SLOW=1 pytest` everything.  The one convention for every test file.
LONG = bool(os.environ.get("IA_SLOW"))
_Test = TypeVar("_Test", bound=Callable[..., object])


def long_form(test: _Test) -> _Test:
    """Mark ``test`` as a long form: ``slow``, and skipped unless ``IA_SLOW`` is set."""
    skip = pytest.mark.skipif(not LONG, reason="a long form: run with IA_SLOW=1")
    marked: _Test = pytest.mark.slow(skip(test))
    return marked


@contextlib.contextmanager
def within(seconds: int, what: object = None) -> Iterator[None]:
    """Fail (instead of hanging) if the block takes longer than ``seconds`` (SIGALRM; main thread only)."""

    def expired(signum: int, frame: object) -> None:
        raise AssertionError(f"{what}: took more than {seconds} s (a hang)" if what is not None
                             else f"took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def site_file(rel: str) -> Path | None:
    """A file under one of this interpreter's site-packages (pip wheels), or None."""
    for p in sys.path:
        cand = Path(p) / rel
        if p and cand.exists():
            return cand
    return None


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def _build_metal_sim() -> Path | str:
    """The IA Simulated Metal Device (tests/metal_sim: a test fixture, not Metal) built once per test process into a
    temporary directory (removed at exit), or why it cannot be.  ``IA_METAL_SIM_DIR`` is set to that directory
    (unless the environment already names one): it is where the generated Metal binding finds its Linux
    "framework" (specs/metal/metal.yaml), so the Metal backend has the simulated device for the whole session --
    test_conformance.py enumerates the backends when it is collected, before any fixture runs."""
    import atexit
    import shutil
    import tempfile

    from metal_sim import build as metal_sim_build

    why = metal_sim_build.missing_toolchain()
    if why is not None:
        return f"the simulated Metal device cannot be built: {why}"
    preset = os.environ.get("IA_METAL_SIM_DIR")
    if preset and (Path(preset) / metal_sim_build.LIBRARY_NAME).is_file():
        return Path(preset) / metal_sim_build.LIBRARY_NAME
    out = Path(tempfile.mkdtemp(prefix="ia_metal_sim_"))
    atexit.register(shutil.rmtree, out, True)
    try:
        lib = metal_sim_build.build(out)
    except Exception as e:  # a failed build fails the tests that need it, not the collection
        return f"the simulated Metal device did not build: {e}"
    os.environ["IA_METAL_SIM_DIR"] = str(out)
    return lib


if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))
METAL_SIM = _build_metal_sim()


@pytest.fixture(scope="session")
def metal_sim() -> Path:
    """The simulated Metal device's library (built once per process, see :func:`_build_metal_sim`: one library per
    process, since the GNU runtime cannot hold two copies of its classes); skips without gobjc or GNUstep
    Foundation."""
    if isinstance(METAL_SIM, str):
        pytest.skip(METAL_SIM)
    return METAL_SIM


@pytest.fixture(scope="session")
def stub_cuda() -> tuple[Path, dict[str, str]]:
    """bench/stub_cuda built (a libcuda.so.1 from the real cuda.h whose functions return at once), and the
    environment a subprocess needs to load it in place of a driver; skips without gcc, cuda.h or NVRTC."""
    import os

    bench = str(ROOT / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import bench_launch_cpu  # builds the stub

    stub = bench_launch_cpu.build_stub()
    if isinstance(stub, str):
        pytest.skip(stub)
    from ironaccelerator import Error
    from ironaccelerator.backends.cuda import _backend as cuda_backend

    try:
        major, minor = cuda_backend.compiler_version()
    except Error as e:
        pytest.skip(f"no NVRTC: {e}")
    # the stub reports a driver at least as new as NVRTC (PTX it cannot "load" otherwise)
    env = {**os.environ, "LD_LIBRARY_PATH": str(stub.parent),
           "STUB_CUDA_DRIVER_VERSION": str(max(13000, major * 1000 + minor * 10))}
    return stub, env


@pytest.fixture(scope="session")
def stub_child(stub_cuda: tuple[Path, dict[str, str]]) -> Callable[[str], int]:
    """Runs tests/<script> in a subprocess over the stub driver with recording on (STUB_CUDA_RECORD=1),
    the stub's path as its argument; returns the count it prints as "ok <n>" (a failure fails the test)."""
    stub, env = stub_cuda

    def run(script: str) -> int:
        proc = subprocess.run([sys.executable, str(ROOT / "tests" / script), str(stub)], capture_output=True,
                              text=True, timeout=300, env={**env, "STUB_CUDA_RECORD": "1"})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.startswith("ok "), proc.stdout
        return int(proc.stdout.split()[1])

    return run


def rect_reference(dst: Any, src: Any, extent: tuple[int, ...], dst_pitches: tuple[int, int],
                   src_pitches: tuple[int, int], dst_offset: int, src_offset: int) -> None:
    """What a strided copy (Stream.copy_2d/copy_3d) does, on flat uint8 numpy arrays: row y of slice z, ``width``
    bytes of ``extent = (width, height[, depth])``, from ``src_offset + z * src_pitches[1] + y * src_pitches[0]``
    to the same place in ``dst``."""
    w, h, depth = (*extent, 1)[:3]
    for z in range(depth):
        for y in range(h):
            d = dst_offset + z * dst_pitches[1] + y * dst_pitches[0]
            s = src_offset + z * src_pitches[1] + y * src_pitches[0]
            dst[d:d + w] = src[s:s + w]
