#!/usr/bin/env bash
# make test-wheel: the built wheel (dist/ironaccelerator-*.whl) installed with pip alone into a fresh venv in a
# temporary directory, then, from another working directory, `python -m ironaccelerator --json` and the
# conformance suite (PoCL and QNN) against the installed package -- never the checkout's generated/ or runtime/
# (tests/conftest.py: IRONACCEL_TEST_INSTALLED).  Usage: scripts/test-wheel.sh PYTHON QNN_REQUIREMENT
set -euo pipefail
py=$1
qnn=$2
root=$(pwd)
shopt -s nullglob
wheels=(dist/ironaccelerator-*.whl)
if [ ${#wheels[@]} -ne 1 ]; then
    echo "test-wheel: expected one dist/ironaccelerator-*.whl, found ${#wheels[@]} (run make wheel)" >&2
    exit 1
fi
wheel=$root/${wheels[0]}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ia-wheel-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# the interpreter the venv of the checkout was made from (not .venv itself: its .pth points into the checkout)
base=$("$py" -c 'import sys; print(getattr(sys, "_base_executable", sys.executable))')
unset PYTHONPATH PYTHONHOME
SECONDS=0
"$base" -m venv "$tmp/venv"
vpy=$tmp/venv/bin/python
# pip alone (no compiler: nothing in the wheel is built at install); numpy and pytest for the conformance suite;
# Qualcomm's libQnnHtp.so from the onnxruntime-qnn wheel, found in site-packages as in the checkout's venv
"$vpy" -m pip install -q --disable-pip-version-check --only-binary=:all: "$wheel" numpy pytest
"$vpy" -m pip install -q --disable-pip-version-check --only-binary=:all: --no-deps "$qnn"
installed=$SECONDS
mkdir "$tmp/work"
cd "$tmp/work"
"$vpy" -m ironaccelerator --json > inventory.json
"$vpy" - "$tmp/venv" inventory.json <<'EOF'
import importlib, importlib.metadata, json, os, sys
venv, inventory = os.path.realpath(sys.argv[1]), sys.argv[2]
import ironaccelerator, ironaccelerator_runtime
from ironaccelerator._core import BUILTIN_BACKENDS
for mod in (ironaccelerator, ironaccelerator_runtime):
    where = os.path.realpath(mod.__file__)
    assert where.startswith(venv + os.sep), f"{mod.__name__} imported from {where}, not from the test venv {venv}"
version = importlib.metadata.version("ironaccelerator")
assert ironaccelerator.__version__ == version, (ironaccelerator.__version__, version)
pkg = os.path.dirname(ironaccelerator.__file__)
libs = sorted(os.path.relpath(d, os.path.dirname(pkg)).replace(os.sep, ".") for d, _, files in os.walk(pkg)
              if "_cffi_abi.py" in files)
assert libs, f"no generated library in {pkg}"
modes = {name: importlib.import_module(name).BINDING_MODE for name in libs}
not_api = {k: v for k, v in modes.items() if v != "api"}
assert not not_api, f"not in API mode from the wheel: {not_api}"
data = json.load(open(inventory))
by = {e["backend"]: e for e in data}
for kind in ("OPENCL", "QNN"):
    assert by[kind]["available"] and by[kind]["devices"], f"{kind} has no device from the wheel: {by[kind]}"
from ironaccelerator._core import GENERATED_FROM
for kind, entry in by.items():  # what the package was generated from, as recorded (no path of the checkout)
    g = entry["generated_from"]
    assert g["generator"] == GENERATED_FROM["generator"] and g["libraries"], (kind, g)
    assert all(lib["digest"] == GENERATED_FROM["specs"][lib["spec"]] for lib in g["libraries"].values()), g
print(f"test-wheel: ironaccelerator {version} ({GENERATED_FROM['generator']}) from {pkg}: {len(libs)} libraries in API mode; "
      f"OpenCL {by['OPENCL']['devices'][0]['name']!r}, QNN {by['QNN']['devices'][0]['name']!r}")
EOF
IRONACCEL_TEST_INSTALLED=1 "$vpy" -m pytest -q -p no:cacheprovider "$root/tests/test_conformance.py" \
    -k "opencl or qnn"
echo "test-wheel: venv + install ${installed} s, checks and conformance $((SECONDS - installed)) s"
