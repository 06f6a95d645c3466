"""A session of the Metal backend over the IA Simulated Metal Device (a test fixture, not Metal), in a child process
of tests/test_metal_backend.py, in the binding mode the package it finds has (API: the compiled module; ABI: the
package copied without it).  Prints "ok <mode> <live objects> <zombie messages>" at the end."""

from __future__ import annotations

import gc
import sys
from typing import Any

import numpy as np

import ironaccelerator as ia
from ironaccelerator.backends.metal import metal as M

SRC = """
kernel void vector_add(device const float *a [[buffer(0)]], device const float *b [[buffer(1)]],
                       device float *c [[buffer(2)]], constant uint &n [[buffer(3)]],
                       uint i [[thread_position_in_grid]]) { if (i < n) c[i] = a[i] + b[i]; }
kernel void lcg(device uint *x [[buffer(0)]], constant uint &n [[buffer(1)]], constant uint &rounds [[buffer(2)]],
                uint i [[thread_position_in_grid]]) { }
"""


def main() -> int:
    mode = M.BINDING_MODE
    backend = ia.BackendRegistry.default().get(ia.BackendKind.METAL)
    d = backend.devices()[0]
    assert d.limits.max_block == (1024, 1024, 1024), d.limits  # MTLSize returned by value
    dev = backend.open(0)
    s, s2 = dev.create_stream(), dev.create_stream()
    n = 5000
    x = np.arange(n, dtype=np.float32)
    da = dev.alloc(x.nbytes)
    dc: Any = dev.alloc(x.nbytes, ia.MemoryKind.UNIFIED)  # (a MetalAllocation: host_view)
    s.copy_from_host(da, x)
    m = dev.load_module(SRC)
    k = m.kernel("vector_add")
    e0 = s.record_event()
    launch = ia.KernelLaunch(k, ia.LaunchDims((n + 127) // 128, 128), (da, da, dc, np.uint32(n)))
    for _ in range(50):
        s.launch(launch)
        assert s.launch_unchecked(launch) is None
    e1 = s.record_event()
    s2.wait_event(e1)
    out = np.zeros(n, np.float32)
    s2.copy_to_host(out, dc)
    assert (out == 2 * x).all()
    assert e0.elapsed_ms(e1) > 0
    assert bytes(dc.host_view()[:8]) == (2 * x[:2]).tobytes()
    try:
        dev.load_module("kernel void nope(device float *x [[buffer(0)]]) { }")
    except ia.Error as e:
        assert e.kind is ia.ErrorKind.COMPILE_FAILED and "program_source:" in str(e), e
    else:
        raise AssertionError("compiled")
    r = s.launch_unchecked(ia.KernelLaunch(k, ia.LaunchDims(1, 2048), (da, da, dc, np.uint32(n))))
    assert isinstance(r, ia.Error) and r.kind is ia.ErrorKind.INVALID_VALUE
    dev.synchronize()
    dev.close()
    del dev, s, s2, da, dc, m, k, e0, e1, launch
    gc.collect()
    import cffi

    ffi = cffi.FFI()
    ffi.cdef("long ia_metal_sim_live_objects(const char *); long ia_metal_sim_zombie_messages(void);")
    sim = ffi.dlopen(None)
    names = ("IASimDevice", "IASimBuffer", "IASimCommandQueue", "IASimCommandBuffer", "IASimComputeCommandEncoder",
             "IASimBlitCommandEncoder", "IASimLibrary", "IASimFunction", "IASimComputePipelineState",
             "IASimSharedEvent", "MTLCompileOptions", "IASimError")
    live = {c: sim.ia_metal_sim_live_objects(c.encode()) for c in names}
    print("ok", mode, sim.ia_metal_sim_live_objects(ffi.NULL), sim.ia_metal_sim_zombie_messages(),
          *(f"{c}={n}" for c, n in live.items() if n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
