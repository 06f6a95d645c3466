"""Capability matchers and module formats are the runtime's: ``ironaccelerator_runtime.capability_match`` holds each
key grammar once (the generator's check and the runtime's matching), and each backend runtime's ``MODULE_FORMATS``
literal says what its specs may declare in ``module_formats``; the generator names neither."""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator import surface
from generator.diagnostics import UserError
from ironaccelerator import CapabilityFlags as F
from ironaccelerator import ComputeTier
from ironaccelerator_runtime import capability_match

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"


def _load(tmp_path: Path, text: str) -> surface.BackendSpec:
    core = surface.load_surface(SPECS / "core.yaml", "specs/core.yaml")
    p = tmp_path / "backend.yaml"
    p.write_text(text)
    return surface.load_backend(p, "specs/x/backend.yaml", core)


def _errors(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(UserError) as ei:
        _load(tmp_path, text)
    return [str(d) for d in ei.value.diagnostics]


BASE = """\
backend: OPENCL
vendor: opencl
class_prefix: OpenCL
template: backends/opencl.py.j2
runtime: opencl
libraries: [opencl.cl]
"""


def test_the_generator_asks_the_runtime_matchers() -> None:
    """One registry: the generator's matchers are the runtime module's (by name, with the same grammar)."""
    gen = surface.matchers()
    assert list(gen) == list(capability_match.MATCHERS)
    for name, m in gen.items():
        assert m.key_problem("flags", "always") is None, name
        assert m.doc == capability_match.MATCHERS[name].doc


def test_a_matcher_added_to_the_runtime_needs_no_generator_edit(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A new matcher (here: Vulkan-like API versions ``1.2``, with an option) is accepted by name, its key grammar
    and option checked by the generator, with no edit under generator/."""
    runtime_matcher = type(capability_match.MATCHERS["exact"])
    new = runtime_matcher(name="api_version", doc="keys are API versions X.Y", key=re.compile(r"[0-9]+\.[0-9]+\Z"),
                          what="an API version like '1.2'", special={"flags": ("always",), "tiers": ("default",)},
                          options={"arch_field": "the field naming the version"})
    monkeypatch.setitem(surface.matchers(), "api_version", new)
    spec = _load(tmp_path, BASE + "capabilities:\n  match: api_version\n  arch_field: apiVersion\n"
                 "  flags:\n    always: [FP16]\n    \"1.2\": [FP64]\n")
    assert spec.match == "api_version" and spec.arch_field is not None and spec.arch_field.value == "apiVersion"
    errors = _errors(tmp_path, BASE + "capabilities:\n  match: api_version\n  flags:\n    v1: [FP64]\n")
    assert any(e.startswith("specs/x/backend.yaml:10:5: flags key 'v1' is not an API version like '1.2' (or one "
                            "of always)") for e in errors), errors
    assert any(e.startswith("specs/x/backend.yaml:8:10: 'match: api_version' needs 'arch_field' (the field naming "
                            "the version)") for e in errors), errors


def test_options_and_sections_belong_to_their_matchers(tmp_path: Path) -> None:
    errors = _errors(tmp_path, BASE + "capabilities:\n  arch_field: gcnArchName\n"
                     "soc_models:\n  SM8350: {model: 30, arch: v68}\n")
    assert any("8:15: arch_field is only meaningful with 'match: arch_prefix'" in e for e in errors), errors
    assert any("10:3: soc_models is only meaningful with 'capabilities: {match: hexagon_arch}'" in e
               for e in errors), errors


def test_module_formats_are_the_runtimes(tmp_path: Path) -> None:
    """A spec's module_formats are chosen from its runtime's MODULE_FORMATS literal: OpenCL's runtime loads
    source, not a QNN context binary, nor (a typo) 'sorce'."""
    errors = _errors(tmp_path, BASE + "module_formats: [source, qnn_context_binary, sorce]\n")
    assert any(e.startswith("specs/x/backend.yaml:7:26: 'qnn_context_binary' is not a module format; expected one "
                            "of: source") for e in errors), errors
    assert any("'sorce' is not a module format (did you mean 'source'?)" in e for e in errors), errors
    assert _load(tmp_path, BASE + "module_formats: [source]\n").module_formats == ("source",)


@pytest.mark.parametrize("vendor", ["opencl", "metal", "qnn", "cuda", "hip"])
def test_every_backend_renders_its_module_formats(vendor: str) -> None:
    """Each generated backend module's MODULE_FORMATS is its spec's module_formats, rendered the same way, and
    each is a format its runtime loads; the GPU tables carry the same tuple."""
    declared = tuple(yaml.safe_load((SPECS / vendor / "backend.yaml").read_text())["module_formats"])
    module: Any = importlib.import_module(f"ironaccelerator.backends.{vendor}._backend")
    assert module.MODULE_FORMATS == declared
    runtime = surface.runtime_path(yaml.safe_load((SPECS / vendor / "backend.yaml").read_text())["runtime"])
    assert runtime is not None and set(declared) <= set(surface.runtime_literal(runtime, "MODULE_FORMATS"))
    if hasattr(module.TABLES, "module_formats"):
        assert module.TABLES.module_formats is module.MODULE_FORMATS


def test_the_runtime_matchers_select_keys() -> None:
    """The matching half, without a device: each matcher's flags (reserved keys left to the caller) and tier."""
    M = capability_match.MATCHERS
    cc = M["compute_capability"]
    table = {"always": F.FP16, "7.0": F.TENSOR_CORES, "8.9": F.FP8}
    assert cc.flags(table, cc.fact("8.6"), F.NONE) == F.TENSOR_CORES and cc.version("8.6") == "sm_86"
    assert cc.tier({"default": ComputeTier.DISCRETE, "9.0": ComputeTier.DATACENTER}, cc.fact("9.0")) \
        is ComputeTier.DATACENTER
    ap = M["arch_prefix"]
    fact = ap.fact("gfx90a:sramecc+:xnack-")
    assert ap.flags({"gfx9": F.INT8_DOT, "gfx90a": F.BF16, "gfx11": F.FP8}, fact, F.NONE) == F.INT8_DOT | F.BF16
    assert ap.tier({"gfx9": ComputeTier.INTEGRATED, "gfx90a": ComputeTier.DATACENTER, "name MI": ComputeTier.NPU},
                   fact) is ComputeTier.DATACENTER
    hx = M["hexagon_arch"]
    assert hx.flags({"always": F.INT8_DOT, 69: F.FP16, 75: F.BF16}, 73, F.NONE) == F.FP16
    assert hx.tier({"default": ComputeTier.NPU}, 73) is None
    gf = M["gpu_family"]
    assert gf.flags({"integrated": F.UNIFIED_MEMORY, "Apple7": F.BF16, "Apple9": F.FP8}, {"Apple7"}, F.NONE) == F.BF16
    assert gf.tier_key(["Mac2", "Apple7", "default"], {"Apple7", "default"}) == "Apple7"
    assert M["exact"].key_problem("flags", "cl_khr_fp16 anything") is None


def test_matchers_are_frozen_data() -> None:
    m = capability_match.matcher("gpu_family")
    assert m.constant_prefix == "MTLGPUFamily" and dataclasses.is_dataclass(m)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.name = "x"  # type: ignore[misc]
