"""The vendor's tables (pure: no device, no library): what the GPU backend reads from a vendor's spec
(:data:`SPEC_ROLES`), and the :class:`GpuTables` the generated backend renders them into."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ironaccelerator._core import BackendKind, CapabilityFlags, ComputeTier, Vendor
from ironaccelerator_runtime.capability_match import MATCHERS
from ironaccelerator_runtime.traits import Capability
from ironaccelerator_runtime.vendors import VendorTable


# What this module reads from a GPU backend spec (specs/<vendor>/backend.yaml), by section: role -> when it is
# needed ("": always; "f": when the function role f is bound; "!f": when f is null, the vendor has none).  The
# generator (generator/surface.py) reads this literal, refuses a spec that lacks a needed role or declares one
# that is never read, and renders each needed role's value into the vendor's GpuTables.
SPEC_ROLES: dict[str, dict[str, str]] = {
    "functions": {
        "init": "", "driver_version": "", "runtime_version": "", "device_count": "", "device_get": "",
        "device_name": "", "device_total_mem": "", "device_attribute": "", "device_properties": "",
        "device_synchronize": "", "alloc": "", "free": "", "host_alloc": "", "host_free": "", "managed_alloc": "",
        "memcpy_htod": "", "memcpy_dtoh": "", "memcpy_dtod": "", "memset_d8": "", "memset_d16": "", "memset_d32": "",
        "memcpy_2d": "", "memcpy_3d": "", "prefetch": "", "prefetch_location": "",
        "stream_create": "", "stream_destroy": "", "stream_synchronize": "", "stream_query": "",
        "stream_wait_event": "", "event_create": "", "event_destroy": "", "event_record": "",
        "event_synchronize": "", "event_query": "", "event_elapsed": "",
        "module_load": "", "module_unload": "", "module_function": "", "launch": "", "param_info": "",
        "context_retain": "", "context_release": "context_retain", "context_set_current": "context_retain",
        "set_device": "!context_retain",
        "program_create": "", "program_compile": "program_create", "program_destroy": "program_create",
        "program_log_size": "program_create", "program_log": "program_create",
        "program_code_size": "program_create", "program_code": "program_create",
        "program_binary_size": "program_create", "program_binary": "program_create",
        "program_add_name": "program_create", "program_lowered_name": "program_create",
        "compiler_version": "program_create",
        "func_attribute": "", "occupancy": "",
        "capture_begin": "", "capture_end": "", "graph_instantiate": "", "graph_launch": "", "graph_destroy": "",
        "graph_exec_destroy": "",
        "pool_create": "", "pool_destroy": "pool_create", "pool_alloc": "pool_create", "pool_free": "pool_create",
        "pool_trim": "pool_create", "pool_get_attribute": "pool_create", "pool_set_attribute": "pool_create",
        "launch_ex": "", "ipc_get": "", "ipc_open": "ipc_get", "ipc_close": "ipc_get",
    },
    "constants": {
        "stream_flags": "", "event_flags": "", "host_alloc_flags": "", "managed_flags": "",
        "status_not_ready": "", "status_no_device": "", "status_invalid_value": "param_info",
        "status_unsupported_ptx": "program_create", "compile_success": "program_create",
        "attr_compute_units": "", "attr_max_block_x": "", "attr_max_block_y": "", "attr_max_block_z": "",
        "attr_max_grid_x": "", "attr_max_grid_y": "", "attr_max_grid_z": "", "attr_max_threads_per_block": "",
        "attr_max_shared_mem": "", "attr_integrated": "", "attr_warp_size": "",
        "func_max_threads": "", "func_shared": "", "func_const": "", "func_local": "", "func_regs": "",
        "func_max_dynamic_shared": "", "capture_mode": "",
        "attr_compute_major": "!device_properties", "attr_compute_minor": "!device_properties",
        "attr_memory_pools_supported": "pool_create",
        "pool_alloc_type": "pool_create", "pool_location_device": "pool_create",
        "pool_attr_release_threshold": "pool_create", "pool_attr_reserved": "pool_create",
        "pool_attr_used": "pool_create",
        "memory_type_host": "memcpy_2d", "memory_type_device": "memcpy_2d",
        "location_host": "prefetch_location", "location_device": "prefetch_location", "cpu_device_id": "prefetch",
        "attr_cooperative_launch": "launch_ex", "attr_cluster_launch": "launch_ex",
        "launch_attr_cooperative": "launch_ex", "launch_attr_cluster": "launch_ex",
        "status_cooperative_too_large": "launch_ex", "ipc_open_flags": "ipc_get",
    },
    "types": {
        "deviceptr": "", "device": "", "stream": "", "event": "", "module": "", "function": "",
        "context": "context_retain", "properties": "device_properties", "program": "program_create",
        "mempool": "pool_create", "mempool_props": "pool_create", "graph": "", "graph_exec": "",
        "memcpy_2d_params": "memcpy_2d", "memcpy_3d_params": "memcpy_3d", "mem_location": "prefetch_location",
        "launch_config": "launch_ex", "launch_attribute": "launch_ex", "ipc_handle": "ipc_get",
    },
}


def _name_tokens(name: str) -> set[str]:
    return {t for t in re.split(r"[\s\-_/()]+", name) if t}


@dataclass(frozen=True, kw_only=True)
class GpuTables(VendorTable):
    """A GPU vendor's spec data (``specs/<vendor>/backend.yaml``), as the generated ``_backend`` module renders it.

    ``functions``: role -> (library, vendor function), None where the vendor has none; ``constants``: role -> value
    (a list in the spec is OR'd); ``types``: role -> C type; each holds exactly the roles of :data:`SPEC_ROLES` that
    the vendor needs.  ``match`` names the matcher (:data:`ironaccelerator_runtime.capability_match.MATCHERS`) that
    says how the capability tables are keyed, ex. ``compute_capability`` or ``arch_prefix`` (whose architecture
    name is read from the properties struct's ``arch_field``).  ``launch_max_args`` / ``launch_max_bytes``: what
    the compiled launch (``_fast._launch``) can pack, 0 where the spec names no ``kernel_launch``;
    ``compiled_pool``: the library's ``pool_memory`` is this backend's pool allocator and free;
    ``compiled_device_memory``: its ``device_memory`` is this backend's ``alloc`` and ``free``.  ``vendors``:
    (substring of the device name, vendor) pairs and the spec's ``default`` (:meth:`VendorTable.vendor`)."""

    kind: BackendKind  # ex) BackendKind.CUDA
    package: str  # ex) ironaccelerator.backends.cuda
    functions: dict[str, tuple[str, str] | None]
    constants: dict[str, int | None]
    types: dict[str, str]
    module_formats: tuple[str, ...]  # what load_module accepts, ex) ("ptx", "elf", "fatbin", "source")
    interop: tuple[str, ...]  # ex) ("dlpack", "cuda_array_interface")
    match: str
    arch_field: str | None = None  # ex) gcnArchName
    flags: dict[str, CapabilityFlags]
    tiers: dict[str, ComputeTier]
    vendors: tuple[tuple[str, Vendor], ...]
    launch_max_args: int = 0
    launch_max_bytes: int = 0
    compiled_pool: bool = False
    compiled_device_memory: bool = False

    @property
    def name(self) -> str:
        """The backend's name in errors, ex. ``CUDA``, ``ROCM``."""
        return self.kind.name

    def const(self, role: str) -> int:
        value = self.constants[role]
        if value is None:
            raise KeyError(f"the {self.name} spec has no constant for {role!r}")
        return value

    def capability(self, arch: str, name: str = "", integrated: bool = False) -> Capability:
        """The device's architecture (compute capability ``"X.Y"``, or a name such as
        ``"gfx90a:sramecc+:xnack-"``), name and integrated attribute -> Capability, by the tables."""
        flags = self.flags.get("always", CapabilityFlags.NONE)
        if integrated:
            flags |= self.flags.get("integrated", CapabilityFlags.NONE)
        tiers = self.tiers
        tokens = _name_tokens(name)
        named = [t for k, t in tiers.items() if k.startswith("name ") and k[5:] in tokens]
        match = MATCHERS[self.match]
        fact = match.fact(arch)
        flags = match.flags(self.flags, fact, flags)
        found = match.tier(tiers, fact)
        version = match.version(arch)
        if integrated and "integrated" in tiers:
            tier = tiers["integrated"]
        elif named:
            tier = named[0]
        elif found is not None:
            tier = found
        else:
            tier = tiers.get("default", ComputeTier.DISCRETE)
        return Capability(flags=flags, tier=tier, vendor_version=version)
