#!/usr/bin/env bash
# The device check, for a lent GPU machine (one H200; Python 3.12; CUDA 13.0 driver; cuda-bindings,
# cuda-core, CuPy and PyTorch installed; no network).  One run, well inside 10 minutes:
#   wheels (from wheelhouse/) -> generate -> build -> pytest -m gpu + the conformance suite -> GPU benchmarks.
# Prepare here with `make wheelhouse`, then carry it with the working tree, e.g.
#   run(carry=["wheelhouse"], command="bash scripts/gpu-check.sh", timeout_s=600)
# Logs and JUnit XML go to $OUT (the device tool's result folder) or build/gpu-check.
set -uo pipefail
cd "$(dirname "$0")/.."
START=$SECONDS
PY=${PYTHON:-python3}
OUT=${OUT:-build/gpu-check}
VENV=${GPU_VENV:-build/gpu-venv}
mkdir -p "$OUT"
log() { echo "== [$((SECONDS - START))s] $*"; }
status=0

log "machine: $($PY --version 2>&1); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"

# 1. a venv that still sees the machine's CuPy / PyTorch / numpy, plus the carried wheels
if [ ! -x "$VENV/bin/python" ]; then
    $PY -m venv --system-site-packages "$VENV" || { log "cannot create $VENV"; exit 1; }
fi
VPY="$VENV/bin/python"
if [ -d wheelhouse ]; then
    log "installing wheels from wheelhouse/"
    timeout 120 "$VPY" -m pip install -q --no-index --find-links wheelhouse \
        cffi pycparser jinja2 pyyaml setuptools pytest libclang || log "pip: some wheels did not install"
fi
for mod in cffi pycparser jinja2 yaml pytest numpy; do
    "$VPY" -c "import $mod" 2>/dev/null || { log "missing Python module: $mod (make wheelhouse, carry wheelhouse/)"; exit 1; }
done
# the generator as the package ironaccelerator_gen without installing it (pyproject maps generator/ to it),
# and the generated package: both on the path of everything below
mkdir -p build/gpu-path
ln -sfn "$PWD/generator" build/gpu-path/ironaccelerator_gen
export PYTHONPATH="$PWD/build/gpu-path:$PWD/generated:$PWD/runtime${PYTHONPATH:+:$PYTHONPATH}"

# 2. generate (whatever SDK headers this machine has; libraries without headers keep the checked-in files)
frontend=clang
"$VPY" -c "import clang.cindex; clang.cindex.Index.create()" 2>/dev/null || frontend=pycparser
log "generate (frontend: $frontend)"
timeout 120 "$VPY" -m ironaccelerator_gen generate --frontend "$frontend" 2>&1 | tee "$OUT/generate.log" | tail -8 \
    || log "generate failed: testing the checked-in package"

# 3. build the cffi API-mode modules (a failed build leaves ABI mode, still testable)
log "build"
timeout 180 "$VPY" -m ironaccelerator_gen build 2>&1 | tee "$OUT/build.log" | tail -8
timeout 60 "$VPY" -m ironaccelerator 2>&1 | tee "$OUT/report.txt"

# 4. tests: the gpu-marked ones, then the backend-agnostic conformance suite (it parameterises over
#    every backend with a device, so CUDA runs it here)
log "pytest -m gpu"
timeout 240 "$VPY" -m pytest -p no:cacheprovider -q -rs -m gpu tests/test_gpu_backends.py \
    --junitxml="$OUT/gpu.xml" 2>&1 | tee "$OUT/pytest-gpu.log" | tail -25
[ "${PIPESTATUS[0]}" = 0 ] || status=1
log "pytest tests/test_conformance.py"
timeout 180 "$VPY" -m pytest -p no:cacheprovider -q -rs tests/test_conformance.py \
    --junitxml="$OUT/conformance.xml" 2>&1 | tee "$OUT/pytest-conformance.log" | tail -25
[ "${PIPESTATUS[0]}" = 0 ] || status=1

# 5. GPU benchmarks, if any (bench/bench_gpu*.py; each takes --quick), within what is left of ~9 minutes
for b in bench/bench_gpu*.py bench/bench_cuda*.py; do
    [ -f "$b" ] || continue
    left=$((540 - (SECONDS - START)))
    [ "$left" -gt 30 ] || { log "skipping $b: out of time"; continue; }
    log "benchmark $b"
    extra=()
    if [ "$(basename "$b")" = bench_gpu.py ]; then
        # no device is a failure here (exit 2); the figures also go to JSON; its watchdog (at most 150 s)
        # dumps the stacks and exits before `timeout` would kill it without a word
        deadline=$((left - 10 < 150 ? left - 10 : 150))
        extra=(--require-device --json "$OUT/bench_gpu.json" --deadline-s "$deadline")
    fi
    timeout "$left" "$VPY" "$b" --quick ${extra[@]+"${extra[@]}"} 2>&1 | tee "$OUT/$(basename "$b" .py).log" | tail -30
    rc=${PIPESTATUS[0]}
    [ "$rc" = 0 ] || log "$b exited with status $rc"
done

log "done: status $status"
exit $status
