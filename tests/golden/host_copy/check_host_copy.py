"""The host-copy fast path (host_copy: {write: hcWriteBuffer, read: hcReadBuffer}): host_copy._fast._host_copier
makes a stream's copy_from_host (to_device true) or copy_to_host, which, for an allocation of the compiled class of
its device (unfreed) and a host object of one of its types whose buffer fits, calls hcWriteBuffer or hcReadBuffer
in C (blocking, offset 0, no wait list, no event), sets the stream's _dirty and _pending and the device's _dirty,
and raises error(status) when the copy failed; everything else is slow(stream, *args, **kwargs); a copier kept
after its stream was dropped raises gone(); only API mode has it."""

from __future__ import annotations

import gc
import sys
import weakref
from typing import Any

from golden_check import load, mode, raises

g = load("host_copy")
fast = sys.modules.get(g.__name__ + "._fast")
make = getattr(fast, "_host_copier", None)
assert (make is not None) is (mode() == "api"), make
if make is not None:
    class Err(Exception):
        pass

    Base: type[Any] = fast._devmem_setup(None, Err)  # type: ignore[union-attr]

    class Memory(Base):  # type: ignore[misc]
        _drop = None

        def _views_error(self, what: str) -> Err | None:
            return Err("views", what)

    class Device:
        _dirty = False

        def _memory_error(self, memory: Any, code: int | None, function: str) -> Err:
            return Err(memory.ptr, code, function)

    class Stream:
        _dirty: object = False
        _pending = False

    DEVICE, QUEUE = object(), 0x7F00BEEF0000
    dev, other = Device(), Device()
    slow_calls: list[tuple[Any, ...]] = []

    def slow(stream: Any, *args: Any, **kwargs: Any) -> str:
        slow_calls.append((stream, args, kwargs))
        return "slow"

    def error(code: int) -> Err:
        return Err("copy", code)

    def gone() -> Err:
        return Err("gone")

    def allocator(device: Any) -> Any:
        return fast._devmem_allocator(Memory, weakref.ref(device), slow, None, DEVICE, None, None,  # type: ignore
                                      None, True, (0, 0, 0))

    alloc, alloc_other = allocator(dev), allocator(other)
    stream = Stream()
    ref = weakref.ref(stream)
    types = (bytes, bytearray, memoryview)
    write = make(True, ref, Memory, dev, QUEUE, types, slow, error, gone)
    read = make(False, ref, Memory, dev, QUEUE, (bytearray, memoryview), slow, error, gone)

    def hv(i: int) -> Any:
        return g.hcValue(i)

    a = alloc(64)
    # a write: the call's arguments, the bytes, the flags
    writes = hv(0)
    data = bytes(range(48))
    assert write(a, data) is None
    assert [hv(i) for i in range(11)] == [writes + 1, hv(1), QUEUE, a.ptr, 1, 0, 48, hv(7), 0, 0, 0]
    assert hv(11) == sum(data) and stream._dirty is True and stream._pending is True and dev._dirty is True
    for src in (bytearray(data), memoryview(data)):
        assert write(a, src) is None and hv(6) == 48 and hv(11) == sum(data), type(src)
    # a read: into the host buffer, _pending False
    reads = hv(1)
    dst = bytearray(64)
    assert read(dst, a) is None
    assert (hv(1), hv(3), hv(4), hv(5), hv(6)) == (reads + 1, a.ptr, 1, 0, 64) and stream._pending is False
    assert dst == bytes((i * 7 + 1) & 0xFF for i in range(64))
    mv = memoryview(bytearray(16))
    assert read(mv, a) is None and hv(6) == 16 and mv[3] == 22
    # what it does not take: the slow path, with no copy
    freed = alloc(64)
    freed.free()
    theirs = alloc_other(64)
    for fn, args, kwargs in (
            (write, (a, data), {"nbytes": 8}), (write, (a,), {}), (write, (a, data, 8), {}),
            (write, (a, bytes(65)), {}),  # larger than the allocation
            (write, (a, b""), {}),  # nothing to copy
            (write, (freed, data), {}), (write, (theirs, data), {}),
            (write, (data, a), {}),  # swapped
            (write, (a, [1, 2]), {}), (write, (a, 7), {}),  # not one of its types
            (write, (a, memoryview(bytes(64))[::2]), {}),  # not contiguous
            (read, (bytes(8), a), {}),  # not one of its types (read-only)
            (read, (memoryview(bytes(8)), a), {}),  # read-only
            (read, (bytearray(65), a), {})):
        counts = (hv(0), hv(1))
        assert fn(*args, **kwargs) == "slow" and slow_calls.pop() == (stream, args, kwargs), (args, kwargs)
        assert (hv(0), hv(1)) == counts
    # a failed copy: error(status) raised; a failed read leaves _pending True
    g.hcFail(g.HC_ERROR_INVALID_VALUE, 1)
    try:
        write(a, data)
    except Err as e:
        assert e.args == ("copy", g.HC_ERROR_INVALID_VALUE), e.args
    else:
        raise AssertionError("write did not raise")
    g.hcFail(g.HC_ERROR_OUT_OF_MEMORY, 1)
    stream._pending = False
    raises(Err, lambda: read(dst, a))
    assert stream._pending is True
    # shut (the device was closed): the slow path
    shut = make(True, ref, Memory, dev, QUEUE, types, slow, error, gone)
    shut._shut()
    assert shut(a, data) == "slow" and slow_calls.pop() == (stream, (a, data), {})
    # its arguments
    for bad in ((True, ref, Memory, dev, QUEUE, types, slow, error), (True, stream, Memory, dev, QUEUE, types, slow,
                error, gone), (True, ref, object, dev, QUEUE, types, slow, error, gone),
                (True, ref, Memory, dev, QUEUE, [bytes], slow, error, gone),
                (True, ref, Memory, dev, QUEUE, (b"",), slow, error, gone),
                (True, ref, Memory, dev, "queue", types, slow, error, gone)):
        raises(TypeError, lambda: make(*bad))
    # no reference leaks: copies, slow paths, failures
    gc.collect()
    refs = (sys.getrefcount(stream), sys.getrefcount(dev), sys.getrefcount(a))
    for i in range(200):
        write(a, data)
        read(dst, a)
        write(a, data, nbytes=1)
        slow_calls.clear()
        g.hcFail(g.HC_ERROR_INVALID_VALUE, i % 2)
        try:
            read(dst, a)
        except Err:
            pass
    gc.collect()
    assert (sys.getrefcount(stream), sys.getrefcount(dev), sys.getrefcount(a)) == refs, refs
    # the stream dropped: gone()
    del stream
    gc.collect()
    assert ref() is None
    raises(Err, lambda: write(a, data))
    try:
        read(dst, a)
    except Err as e:
        assert e.args == ("gone",), e.args
    a.free()
    theirs.free()
