"""The kernel-launch fast path (kernel_launch: klLaunch): kernel_launch._fast._launch packs the arguments as a
layout says and calls klLaunch; only API mode has it (ABI mode: the backend packs in Python)."""

from __future__ import annotations

import sys

from golden_check import load, mode, raises

g = load("kernel_launch")
launch_fast = getattr(sys.modules.get(g.__name__ + "._fast"), "_launch", None)
assert (launch_fast is not None) is (mode() == "api"), launch_fast
if launch_fast is not None:
    import struct

    class Mem:  # what the backend's allocations look like to it: .ptr, ._freed
        def __init__(self, ptr: object, freed: bool = False) -> None:
            self.ptr, self._freed = ptr, freed

    def layout(total: int, *records: tuple[int, int, int]) -> bytes:  # (kind, size, offset) per argument
        return struct.pack("<I" + "BxHI" * len(records), total, *[v for r in records for v in r])

    def last() -> list[int]:
        return [g.klLastLaunchValue(i) for i in range(12)]

    def params(n: int) -> list[int]:
        return [g.klLastLaunchParam(i) for i in range(n)]

    for i, size in enumerate((8, 4, 2, 8)):
        g.klLaunchParamSize(i, size)
    dims = (2, 3, 4, 32, 2, 1, 256)
    mem = Mem(0x7F00DEADBEE0)
    args = (mem, struct.pack("<i", -5), struct.pack("<e", 1.5), struct.pack("<d", 2.25))
    layouts = {(Mem, bytes, bytes, bytes): layout(24, (0, 8, 0), (1, 4, 8), (1, 2, 12), (1, 8, 16))}
    before = last()[11]
    assert launch_fast(layouts, args, True, 0x1234, dims, 0x5678) == 0
    v = last()
    assert v == [0x1234, *dims, 0x5678, 0, 1, before + 1], v
    assert params(4) == [mem.ptr, 2**32 - 5, struct.unpack("<H", args[2])[0], struct.unpack("<Q", args[3])[0]]
    # no layout for these types, or values it cannot pack: None, nothing launched (the backend packs)
    for a, check in (((mem, b"1234", b"12"), True), ((mem, b"123", b"12", b"12345678"), True),
                     ((Mem(-1), *args[1:]), False), ((Mem("x"), *args[1:]), False),
                     ((Mem(1, freed=True), *args[1:]), True)):
        assert launch_fast(layouts, a, check, 1, dims, 2) is None, a
    assert last()[11] == before + 1
    # unchecked too: a freed allocation is not launched (its address may be other memory by now)
    assert launch_fast(layouts, (Mem(9, freed=True), *args[1:]), False, 1, dims, 2) is None
    assert last()[11] == before + 1
    assert launch_fast(layouts, (Mem(9), *args[1:]), False, 1, dims, 2) == 0
    assert params(1) == [9] and last()[11] == before + 2
    # an argument whose attribute changes the layouts while the launch reads it (the layout is held)
    class Sneaky:
        _freed = False

        @property
        def ptr(self) -> int:
            sneaky.clear()
            return 0x42

    sneaky = {(Sneaky, bytes): layout(12, (0, 8, 0), (1, 4, 8))}
    assert launch_fast(sneaky, (Sneaky(), b"abcd"), True, 1, dims, 2) == 0 and not sneaky
    assert params(2) == [0x42, int.from_bytes(b"abcd", "little")] and last()[11] == before + 3
    # the vendor's status comes back as is
    assert launch_fast(layouts, args, True, 1, (1, 1, 1, 1024, 2, 1, 0), 2) == g.KL_ERROR_INVALID_VALUE
    # no arguments: params NULL
    assert launch_fast({(): layout(0)}, (), True, 7, dims, 0) == 0
    assert last()[8:11] == [0, 1, 1], last()
    # bad calls and malformed layouts are errors, not launches
    for bad, exc in ((lambda: launch_fast(layouts, args, True, 1, dims[:6], 2), TypeError),
                     (lambda: launch_fast(layouts, list(args), True, 1, dims, 2), TypeError),
                     (lambda: launch_fast(layouts, args, True, 1, (-1, *dims[1:]), 2), OverflowError),
                     (lambda: launch_fast(layouts, args, True, 1, (2**32, *dims[1:]), 2), OverflowError),
                     (lambda: launch_fast({(): b"\0"}, (), True, 1, dims, 2), ValueError),
                     (lambda: launch_fast({(): layout(5000)}, (), True, 1, dims, 2), ValueError),
                     (lambda: launch_fast({(Mem,): layout(8, (0, 8, 4))}, (mem,), True, 1, dims, 2), ValueError),
                     (lambda: launch_fast({(Mem,): layout(8, (0, 4, 0))}, (mem,), True, 1, dims, 2), ValueError),
                     (lambda: launch_fast({(Mem,): layout(8, (7, 8, 0))}, (mem,), True, 1, dims, 2), ValueError)):
        raises(exc, bad)
    assert last()[11] == before + 5
