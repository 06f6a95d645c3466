# The two commands: `make generate` and `make test` (each works on a fresh machine).
PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
PIP    := $(VPY) -m pip
STAMP  := $(VENV)/.deps-installed
TESTDEPS := $(VENV)/.test-deps-installed
DOCSDEPS := $(VENV)/.docs-deps-installed
SDKS   := $(VENV)/.test-sdks-installed
# Test SDKs (pip wheels): NVRTC 13.x (nvrtc.h + libnvrtc, compiles on the CPU) and the CUDA 12.9
# runtime wheel (a second cuda.h); cuda-bindings is the reference in bench/. Pinned so that
# `generate --check` compares against the same headers everywhere.
GEN_SDKS  := nvidia-cuda-nvrtc==13.5.37
TEST_SDKS := $(GEN_SDKS) nvidia-cuda-runtime-cu12==12.9.79 cuda-bindings==13.5.0 pyopencl
GENSDK    := $(VENV)/.gen-sdks-installed
# Qualcomm's real QNN libraries (libQnnHtp/Saver/System.so; QNN 2.51, core API 2.40): only their .so files are
# used, so without the wheel's dependencies (onnxruntime itself is not needed).  cp311 manylinux x86-64.
QNN_SDKS  := onnxruntime-qnn==2.7.0
# cuBLAS's real headers (nvidia-cublas: cublas_api.h; its libraries are not loaded here, there is no GPU), which
# tests/test_cublas.py and the scaffold's cuBLAS draft test read (issue 29: device-pointer rules).  ~400 MB,
# without its dependencies (the CUDA runtime's headers come from the toolkit).
CUBLAS_SDK := nvidia-cublas==13.5.1.27
# Apple's metal-cpp headers (Apache-2.0; the pymetal-cpp sdist carries them), read by the C++-wrappers front-end
# (generator/frontend/objc_cpp.py, with specs/metal/metal.yaml's prototypes: data) for Metal's selectors.  Fetched, never vendored; pinned with its sha256 in
# the script.  Offline, the script says so and the tests that need it skip.
METALCPP  := $(VENV)/sdk/metal-cpp

.PHONY: generate test build check clean venv golden wheelhouse bench-deps metal-cpp wheel test-wheel docs

$(VPY):
	$(PYTHON) -m venv $(VENV)

# `make generate` needs the generator's dependencies, plus numpy: the README's quick start (run right after
# `make generate`) reads its results through numpy, the host-array interop every example uses.  The test tools
# (pytest, hypothesis, mypy: ~5 s of a fresh `make generate`) come with `make test`.
QUICKSTART_DEPS := numpy>=1.24
$(STAMP): pyproject.toml Makefile | $(VPY)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e . '$(QUICKSTART_DEPS)'
	# the generated package and the hand-written runtime it imports, both on the venv's path (a .pth file, which
	# mypy reads too)
	$(VPY) -c "import sysconfig, pathlib; pathlib.Path(sysconfig.get_paths()['purelib'], 'ironaccelerator-generated.pth').write_text('$(CURDIR)/generated\n$(CURDIR)/runtime\n')"
	touch $@

$(GENSDK): $(STAMP) Makefile scripts/install-system-sdks.sh
	bash scripts/install-system-sdks.sh
	$(PIP) install -q $(GEN_SDKS)
	touch $@

$(TESTDEPS): $(STAMP) pyproject.toml Makefile
	$(PIP) install -q -e '.[test]'
	touch $@

# The documentation site's tools (pyproject's `docs` extra: Sphinx, myst-parser, furo, sphinx-argparse): `make docs`,
# and tests/test_docs_build.py, which builds the site as `make docs` does.
$(DOCSDEPS): $(STAMP) pyproject.toml Makefile
	$(PIP) install -q -e '.[docs]'
	touch $@

$(SDKS): $(GENSDK) $(TESTDEPS) $(DOCSDEPS) Makefile
	$(PIP) install -q $(TEST_SDKS)
	$(PIP) install -q --no-deps $(QNN_SDKS)
	$(PIP) install -q --no-deps $(CUBLAS_SDK)
	touch $@

venv: $(STAMP)

metal-cpp: $(STAMP)
	bash scripts/fetch-metal-cpp.sh $(VPY) $(METALCPP)

# Generate every backend whose SDK headers are found (others are skipped, with the reason), then
# build the cffi modules.  NVRTC's headers come from its pip wheel, installed here.
generate: $(GENSDK) metal-cpp
	$(VPY) -m ironaccelerator_gen sdks
	$(VPY) -m ironaccelerator_gen generate
	$(VPY) -m ironaccelerator_gen build

test: $(SDKS) metal-cpp
	$(VPY) -m ironaccelerator_gen sdks
	$(VPY) -m ironaccelerator_gen generate --check
	$(VPY) -m ironaccelerator_gen build --require-api
	$(VPY) -m pytest -q
	$(MAKE) --no-print-directory test-wheel

# The documentation site, docs/_build/html (docs/conf.py), built strictly: any warning fails the build (-W; all of
# them listed: --keep-going), among them a page in no toctree, a Markdown link to a missing page or heading, and
# (-n, nitpicky) a reference to a Python name that nothing documents.  From scratch each time (-E -a): an
# incremental build would not repeat the warnings of the pages it does not re-read.  The API reference imports
# the checked-in generated package and the runtime (no compiled module is needed: the backends' classes import
# without their vendor libraries).  Tested by tests/test_docs_build.py (make test).
docs: $(DOCSDEPS)
	$(VPY) -m sphinx -E -a -W --keep-going -n -q -b html docs docs/_build/html
	@echo "docs/_build/html/index.html"

# The generated package as a wheel: dist/ironaccelerator-<version>-cpXY-cpXY-<platform>.whl, holding generated/
# ironaccelerator with the API-mode modules `ironaccel-gen build` compiled (incremental: only what changed) and the
# runtime it imports (packaging/ironaccelerator/setup.py: setuptools, which tags it for this interpreter and the
# glibc the modules need).  No build isolation: setuptools is the venv's, and nothing is fetched.
# The generator's own wheel (ironaccelerator_gen-<version>-py3-none-any.whl: templates, specs and the runtime as
# package data) is built beside it.  The license files are copied in for the build (setuptools takes them only
# from the project's own directory) and removed after.
LICENSE_FILES := LICENSE NOTICE docs/THIRD_PARTY.md
wheel: $(GENSDK) metal-cpp
	$(VPY) -m ironaccelerator_gen build
	rm -rf packaging/ironaccelerator/build packaging/ironaccelerator/ironaccelerator.egg-info dist/ironaccelerator-*.whl \
		dist/ironaccelerator_gen-*.whl
	cp $(LICENSE_FILES) packaging/ironaccelerator/
	$(PIP) wheel -q --no-build-isolation --no-deps -w dist packaging/ironaccelerator
	rm -rf packaging/ironaccelerator/build packaging/ironaccelerator/ironaccelerator.egg-info \
		$(addprefix packaging/ironaccelerator/,$(notdir $(LICENSE_FILES)))
	$(PIP) wheel -q --no-build-isolation --no-deps -w dist .
	rm -rf build/lib build/bdist.* ironaccelerator_gen.egg-info
	@ls dist/*.whl

# The wheel installed with pip alone into a fresh venv in a temporary directory; from another directory,
# `python -m ironaccelerator --json` and the conformance suite on PoCL and QNN against the installed package.
test-wheel: wheel
	bash scripts/test-wheel.sh $(VPY) $(QNN_SDKS)

# Accept new golden expectations (tests/golden/*/expected).
golden: $(TESTDEPS)
	UPDATE_GOLDEN=1 $(VPY) -m pytest -q tests/test_golden.py

clean:
	rm -rf build dist $(VENV) generated/.ironaccel-gen.json docs/_build
	find generated -name '_cffi*.so' -o -name '_cffi_abi.py' | xargs rm -f

# References that only bench/ uses, not the tests (hip-python alone is 320 MB): hip-python for bench_calls,
# cuda-core for bench_launch_cpu (on the stub driver) and bench_gpu, vulkan (the PyPI cffi binding) for
# bench_vulkan_calls.
BENCH_DEPS := hip-python==6.4.4.555.40 cuda-core==1.2.2 vulkan==1.3.275.1 wgpu==0.32.0
bench-deps: $(SDKS)
	$(PIP) install -q $(BENCH_DEPS)

# Wheels for the lent GPU machine (CPython 3.12, x86-64, no network), carried with the working tree
# and installed by scripts/gpu-check.sh: the generator's and the tests' pure dependencies.
WHEELHOUSE_PKGS := cffi pycparser jinja2 markupsafe pyyaml libclang setuptools pytest
wheelhouse: $(STAMP)
	rm -rf wheelhouse
	$(PIP) download -q --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --abi abi3 \
		--abi none --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
		--platform manylinux2010_x86_64 --platform any -d wheelhouse $(WHEELHOUSE_PKGS)
	@du -sh wheelhouse
