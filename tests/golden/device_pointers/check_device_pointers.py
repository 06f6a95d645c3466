"""Device pointers (a spec's device: true, from a rules: line or a parameter's own entry): the checked wrapper takes
an Allocation of the library's backend (through the runtime's Allocation protocol, _device_address), a slice of
one, an int or (nullable) None, and passes the address; anything else is INVALID_VALUE, freed memory
INVALID_HANDLE; the C fast path leaves such functions to the Python wrapper."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from golden_check import compiled, error, load

from ironaccelerator import ErrorKind, MemoryKind
from ironaccelerator_runtime.traits import Allocation


class Toy(Allocation):
    """An allocation of a device of backend ``kind`` at ``address`` (None: memory with no address)."""

    def __init__(self, address: int | None, nbytes: int = 64, kind: str = "GOLDEN") -> None:
        self.address, self.nbytes, self.kind = address, nbytes, MemoryKind.DEVICE
        self.device: Any = SimpleNamespace(kind=SimpleNamespace(name=kind))

    def _device_address(self) -> int | None:
        return self.address

    def _release(self) -> None:
        return None

    def _slice(self, offset: int, nbytes: int) -> Allocation:
        from ironaccelerator_runtime.traits import AllocationSlice

        return AllocationSlice(self, offset, nbytes)

    def __repr__(self) -> str:
        return f"<Toy {self.address}>"


d = load("device_pointers")
h = d.dpCreate()


def last(which: int) -> int:
    v: int = d.dpLast(which)
    return v


# an int, an allocation, a slice of one (its address plus the offset), None where nullable (NULL)
a, b = Toy(0x5000), Toy(0x9000)
assert d.dpScale(h, 4, 2.0, 0x1000, 0x2000) is None and (last(0), last(1)) == (0x1000, 0x2000)
assert d.dpScale(h, 4, 2.0, a, b[16:32]) is None and (last(0), last(1)) == (0x5000, 0x9010)
assert d.dpScale(h, 4, 2.0, a[8:], None) is None and (last(0), last(1)) == (0x5008, 0)
assert d.dpScale(h, 4, 2.0, a) is None and last(1) == 0  # a trailing nullable device pointer defaults to None
assert d.dpScaleD(h, 2, 1.0, b, a) is None and (last(0), last(1)) == (0x9000, 0x5000)
assert d.dpFill(a[4:], 16, 0) is None and last(2) == 0x5004 + 16  # an integer device-pointer type
assert d.dpFill(2**64 - 17, 16, 0) is None and last(2) == 2**64 - 1
# the parameter's own entry overrides the rule: dpSum's result is a host float, returned
assert d.dpSum(h, 4, a) == 10.0 and last(0) == 0x5000
# wrong objects: the same kinds, checked before the call
for bad in (1.5, True, -1, 2**64, "0x1000", b"x", d.ffi.new("float[4]"), [0x1000]):
    e = error(lambda: d.dpScale(h, 4, 2.0, bad, a))
    assert e.kind is ErrorKind.INVALID_VALUE and e.function == "dpScale" and "x" in str(e), (bad, e)
e = error(lambda: d.dpScaleD(h, 4, 2.0, None, a))  # not nullable
assert e.kind is ErrorKind.INVALID_VALUE and "None" in str(e), e
e = error(lambda: d.dpScale(h, 4, 2.0, Toy(0x1000, kind="OPENCL"), a))  # another backend's memory
assert e.kind is ErrorKind.INVALID_VALUE and "OPENCL" in str(e), e
e = error(lambda: d.dpScale(h, 4, 2.0, Toy(None), a))  # memory with no address (a handle: an OpenCL cl_mem)
assert e.kind is ErrorKind.INVALID_VALUE and "no device address" in str(e), e
freed = Toy(0x7000)
s = freed[0:8]
freed.free()
for gone in (freed, s):
    e = error(lambda: d.dpFill(gone, 8, 0))
    assert e.kind is ErrorKind.INVALID_HANDLE and "freed" in str(e), e
assert last(2) == 2**64 - 1  # nothing was called
assert not compiled(d.dpScale) and not compiled(d.dpFill)  # the Python wrapper reads the Allocation protocol
assert compiled(d.dpCreate) is (d.BINDING_MODE == "api")
