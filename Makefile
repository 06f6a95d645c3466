# The two commands: `make generate` and `make test` (each works on a fresh machine).
PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
PIP    := $(VPY) -m pip
STAMP  := $(VENV)/.deps-installed
SDKS   := $(VENV)/.test-sdks-installed
# Test SDKs (pip wheels): NVRTC 13.x (nvrtc.h + libnvrtc, compiles on the CPU) and the CUDA 12.9
# runtime wheel (a second cuda.h); cuda-bindings is the reference in bench/. Pinned so that
# `generate --check` compares against the same headers everywhere.
GEN_SDKS  := nvidia-cuda-nvrtc==13.5.37
TEST_SDKS := $(GEN_SDKS) nvidia-cuda-runtime-cu12==12.9.79 cuda-bindings==13.5.0
GENSDK    := $(VENV)/.gen-sdks-installed

.PHONY: generate test build check clean venv golden

$(VPY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(VPY)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test]'
	$(VPY) -c "import sysconfig, pathlib; pathlib.Path(sysconfig.get_paths()['purelib'], 'ironaccelerator-generated.pth').write_text('$(CURDIR)/generated\n')"
	touch $@

$(GENSDK): $(STAMP) Makefile
	$(PIP) install -q $(GEN_SDKS)
	touch $@

$(SDKS): $(STAMP) Makefile
	$(PIP) install -q $(TEST_SDKS)
	touch $@

venv: $(STAMP)

# Generate every backend whose SDK headers are found (others are skipped, with the reason), then
# build the cffi modules.  NVRTC's headers come from its pip wheel, installed here.
generate: $(GENSDK)
	$(VPY) -m ironaccelerator_gen sdks
	$(VPY) -m ironaccelerator_gen generate
	$(VPY) -m ironaccelerator_gen build

test: $(SDKS)
	$(VPY) -m ironaccelerator_gen sdks
	$(VPY) -m ironaccelerator_gen generate --check
	$(VPY) -m ironaccelerator_gen build
	$(VPY) -m pytest -q

# Accept new golden expectations (tests/golden/*/expected).
golden: $(STAMP)
	UPDATE_GOLDEN=1 $(VPY) -m pytest -q tests/test_golden.py

clean:
	rm -rf build $(VENV) generated/.ironaccel-gen.json
	find generated -name '_cffi*.so' -o -name '_cffi_abi.py' | xargs rm -f
