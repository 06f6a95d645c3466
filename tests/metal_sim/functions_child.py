"""Run by tests/test_objc_metal_functions.py in a child process (one simulator per process; a crash fails the
test instead of ending pytest): the binding generated from tests/metal_sim/functions.yaml over the IA Simulated
Metal Device (a test fixture, not Apple Metal).  Prints "ok <mode>" when every check passes."""

from __future__ import annotations

import ctypes
import gc
import os
import sys

from ironaccelerator import Error, ErrorKind
from ironaccelerator.backends.test import metal_sim as M

ROUNDS = 1000
mode = sys.argv[1]
assert M.BINDING_MODE == mode, (M.BINDING_MODE, mode)

device = M.MTLCreateSystemDefaultDevice()  # the first call opens the runtime and the frameworks
# the simulator's counters, in the copy the binding opened (RTLD_NOLOAD: it must be loaded already)
sim = ctypes.CDLL(os.path.join(os.environ["IA_METAL_SIM_HOME"], "lib", "libia_metal_sim.so"),
                  mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
sim.ia_metal_sim_live_objects.restype = ctypes.c_long
sim.ia_metal_sim_live_objects.argtypes = [ctypes.c_char_p]
sim.ia_metal_sim_zombie_messages.restype = ctypes.c_long


def live() -> int:
    return int(sim.ia_metal_sim_live_objects(None))


# +1 adopted: the handle holds the only reference; the device goes when it is closed
assert isinstance(device, M.NSObject) and M.retain_count(device) == 1, M.retain_count(device)
assert device.name().UTF8String() == "IA Simulated Metal Device"
assert live() == 1 and sim.ia_metal_sim_live_objects(b"IASimDevice") == 1
device.close()
assert live() == 0, live()

for _ in range(ROUNDS):
    d = M.MTLCreateSystemDefaultDevice()
    again = M.MTLCreateSystemDefaultDevice()  # the same device while anything holds it: +1 again
    assert d == again and M.retain_count(d) == 2
    devices = M.MTLCopyAllDevices()  # +1: an NSArray holding the device
    assert isinstance(devices, M.NSArray) and devices.count() == 1 and M.retain_count(devices) == 1
    first = devices.objectAtIndex_(0)  # +0: retained for its handle
    assert first == d and M.retain_count(d) == 4
    assert first.name().UTF8String() == "IA Simulated Metal Device"
    again.close()
    del first, devices  # dropped rather than closed: released all the same
    assert M.retain_count(d) == 1
    d.close()
    assert live() == 0, live()
gc.collect()
assert live() == 0 and sim.ia_metal_sim_zombie_messages() == 0, (live(), sim.ia_metal_sim_zombie_messages())

# a symbol no loaded library exports: an Error naming it and the libraries, not a crash
try:
    M.IASimNotExported()
except Error as e:
    assert e.kind == ErrorKind.SYMBOL_NOT_FOUND and "IASimNotExported" in str(e) and "libia_metal_sim.so" in str(e), e
else:
    raise AssertionError("no Error for a missing symbol")
assert M.unchecked.IASimNotExported() == M.ffi.NULL

# unchecked: the raw +1 id, ours to release
raw = M.unchecked.MTLCreateSystemDefaultDevice()
assert M.unchecked.NSObject_retainCount(raw) == 1
M.Object(raw).close()  # a handle adopts the reference
assert live() == 0 and sim.ia_metal_sim_zombie_messages() == 0
print("ok", mode)
