"""The Vulkan backend on Mesa's lavapipe: GLSL and SPIR-V vadd of 1M float32 elements against numpy, under the
Khronos validation layer (IRONACCEL_VULKAN_VALIDATION=1: zero messages); bad input refused with the ErrorKind the
other backends use; the SPIR-V reflector (spirv.reflect) against shaders compiled by glslangValidator; a fixed local
size refuses another block, a specialisable one launches it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from ironaccelerator import Error, ErrorKind, KernelLaunch, LaunchDims

LAYER_JSON = Path("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json")

VADD = """#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform Args { uint n; };
void main() { uint i = gl_GlobalInvocationID.x; if (i < n) c[i] = a[i] + b[i]; }
"""

SAXPY_SPEC = """#version 450
#extension GL_ARB_gpu_shader_int64 : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(push_constant) uniform Args { float a; uint n; double d; int64_t q; };
void main() { uint i = gl_GlobalInvocationID.x; if (i < n) y[i] = a * x[i] + y[i]; }
"""


# a kernel that runs long enough to be pending when the next command comes (n: its loop count)
SLOW = ("#version 450\n"
        "layout(local_size_x = 64) in;\n"
        "layout(push_constant) uniform Args { uint n; };\n"
        "void main() { uint x = gl_GlobalInvocationID.x; for (uint i = 0u; i < n; i++) x = x * 1664525u + 1u;\n"
        "              if (x == 7u) barrier(); }\n")


def _run_validated(script: Path, expect: str) -> None:
    """Run ``script`` in a child process, against the package under test, under the Khronos validation layer
    (``IRONACCEL_VULKAN_VALIDATION=1``; a crash prints its traceback): it must exit 0 having printed ``expect``."""
    import os
    import sys

    from conftest import PACKAGE_PATHS

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(PACKAGE_PATHS), IRONACCEL_VULKAN_VALIDATION="1")
    proc = subprocess.run([sys.executable, "-X", "faulthandler", str(script)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0 and expect in proc.stdout, (proc.returncode, proc.stderr[-2000:])


def _spirv(tmp: Path, source: str) -> bytes:
    exe = shutil.which("glslangValidator")
    if exe is None:
        pytest.skip("glslangValidator is not installed (Debian glslang-tools)")
    (tmp / "in.comp").write_text(source)
    subprocess.run([exe, "-V", "--target-env", "vulkan1.2", "-S", "comp", "-o", str(tmp / "out.spv"),
                    str(tmp / "in.comp")], check=True, capture_output=True)
    return (tmp / "out.spv").read_bytes()


@pytest.fixture(scope="module")
def backend() -> Any:
    from ironaccelerator.backends.vulkan import VulkanBackend

    try:
        b = VulkanBackend(validation=LAYER_JSON.exists())
        if not b.devices():
            pytest.skip("no Vulkan device (Debian mesa-vulkan-drivers provides lavapipe)")
    except Error as e:
        pytest.skip(f"Vulkan is not available: {e}")
    return b


@pytest.fixture(scope="module")
def device(backend: Any) -> Iterator[Any]:
    dev = backend.open(0)
    yield dev
    dev.close()
    assert backend.validation_messages == []


def _vadd(device: Any, kernel: Any, block: int) -> None:
    n = 1 << 20
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = np.zeros(n, np.float32)
    s = device.create_stream()
    with device.alloc(a.nbytes) as da, device.alloc(b.nbytes) as db, device.alloc(c.nbytes) as dc:
        s.copy_from_host(da, a)
        s.copy_from_host(db, b)
        s.launch(KernelLaunch(kernel, LaunchDims(grid=n // block, block=block), [da, db, dc, np.uint32(n)]))
        s.copy_to_host(c, dc)
        s.synchronize()
    np.testing.assert_array_equal(c, a + b)


def test_glsl_vadd_of_1m_elements_matches_numpy(device: Any) -> None:
    k = device.load_module(VADD).kernel("main")
    assert k.num_args == 4 and k.signature == "A, B, C, unsigned int n"
    _vadd(device, k, 64)


def test_spirv_vadd_of_1m_elements_matches_numpy(device: Any, tmp_path: Path) -> None:
    k = device.load_module(_spirv(tmp_path, VADD)).kernel("main")
    _vadd(device, k, 64)


def test_a_fixed_local_size_refuses_another_block(device: Any) -> None:
    k = device.load_module(VADD).kernel("main")
    s = device.create_stream()
    with device.alloc(256) as x, pytest.raises(Error) as ei:
        s.launch(KernelLaunch(k, LaunchDims(grid=1, block=32), [x, x, x, np.uint32(1)]))
    assert ei.value.kind is ErrorKind.INVALID_VALUE and "local_size_x_id" in str(ei.value)


def test_bad_input_gets_the_same_error_kinds(device: Any) -> None:
    with pytest.raises(Error) as ei:
        device.load_module(b"\x03\x02\x23\x07" + b"\0" * 7)
    assert ei.value.kind is ErrorKind.INVALID_VALUE and ei.value.backend == "VULKAN"
    with pytest.raises(Error) as ei:
        device.load_module(b"\xff\xfe not text")
    assert ei.value.kind is ErrorKind.INVALID_VALUE
    with pytest.raises(Error) as ei:
        device.load_module("#version 450\nvoid main() { x = ; }\n")
    assert ei.value.kind is ErrorKind.COMPILE_FAILED and "log" in str(ei.value)
    with pytest.raises(Error) as ei:
        device.load_module(VADD).kernel("no_such_kernel")
    assert ei.value.kind is ErrorKind.INVALID_VALUE


def test_reflection_of_glslang_output(tmp_path: Path) -> None:
    from ironaccelerator_runtime.backends.vulkan import spirv

    r = spirv.reflect(_spirv(tmp_path, VADD))
    assert r.entry_points["main"].local_size == (64, 1, 1) and not r.entry_points["main"].specializable
    assert [(b.set, b.binding, b.name) for b in r.buffers] == [(0, 0, "A"), (0, 1, "B"), (0, 2, "C")]
    assert [(m.name, m.offset, m.kind, m.size) for m in r.push] == [("n", 0, "uint", 4)]
    r = spirv.reflect(_spirv(tmp_path, SAXPY_SPEC))
    assert r.entry_points["main"].spec_ids == (0, 1, 2)
    assert [(m.name, m.offset, m.kind, m.size) for m in r.push] == [
        ("a", 0, "float", 4), ("n", 4, "uint", 4), ("d", 8, "float", 8), ("q", 16, "int", 8)]
    assert r.push_size == 24


@pytest.mark.parametrize("data", [b"", b"\x03\x02\x23\x07" * 3, b"\0" * 20, b"\x03\x02\x23\x07" + b"\0" * 17])
def test_reflection_refuses_malformed_bytes(data: bytes) -> None:
    from ironaccelerator_runtime.backends.vulkan import spirv

    with pytest.raises(Error) as ei:
        spirv.reflect(data)
    assert ei.value.kind is ErrorKind.INVALID_VALUE


def test_buffers_take_the_positions_of_their_bindings(device: Any) -> None:
    k = device.load_module(SAXPY_SPEC).kernel("main")
    assert k.signature == "float a, X, Y, unsigned int n, double d, long q"
    n = 1000
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, np.float32)
    s = device.create_stream()
    with device.alloc(x.nbytes) as dx, device.alloc(y.nbytes) as dy:
        s.copy_from_host(dx, x)
        s.copy_from_host(dy, y)
        s.launch(KernelLaunch(k, LaunchDims(grid=(n + 127) // 128, block=128),
                              [np.float32(2), dx, dy, np.uint32(n), np.float64(0), np.int64(0)]))
        s.copy_to_host(y, dy)
        s.synchronize()
    np.testing.assert_array_equal(y, 2 * x + 1)


def test_exit_with_live_allocations_under_validation(backend: Any, tmp_path: Path) -> None:
    """A process that exits with an allocation, a stream and a kernel still alive exits cleanly under the
    validation layer (the device was destroyed at exit before the allocations' release: the loader aborted)."""
    script = tmp_path / "child.py"
    script.write_text(
        "from ironaccelerator import BackendRegistry\n"
        "d = BackendRegistry.default().get('vulkan').open(0)\n"
        f"k = d.load_module({VADD!r}).kernel('main')\n"
        "s = d.create_stream()\n"
        "a = d.alloc(64)\n"
        "s.fill(a, 1)\n"
        "print('exiting')\n")
    _run_validated(script, "exiting")


def test_descriptor_sets_follow_reallocated_buffers(device: Any) -> None:
    """A launch's descriptor set is cached by its buffers' serials: 300 output allocations in turn (each freed after
    its launch, so the driver may hand out the same VkBuffer handle again; past the stream's 256 cached sets) each
    receive their own result."""
    n = 256
    k = device.load_module(VADD).kernel("main")
    s = device.create_stream()
    a = np.arange(n, dtype=np.float32)
    out = np.empty(n, np.float32)
    with device.alloc(a.nbytes) as da:
        s.copy_from_host(da, a)
        for i in range(300):
            dc = device.alloc(a.nbytes)
            s.fill(dc, 0)
            s.launch(KernelLaunch(k, LaunchDims(grid=n // 64, block=64), [da, da, dc, np.uint32(n - i % 7)]))
            s.copy_to_host(out, dc)
            s.synchronize()
            want = np.where(np.arange(n) < n - i % 7, 2 * a, 0)
            np.testing.assert_array_equal(out, want)
            dc.free()


def test_glsl_goes_through_the_kernel_cache(device: Any) -> None:
    """GLSL compiled once is SPIR-V from the kernel cache the next time (per source, options and entry point);
    cache=False compiles again."""
    src = VADD.replace("void main()", "// cache probe\nvoid main()")
    first = device.load_module(src)
    again = device.load_module(src)
    fresh = device.load_module(src, cache=False)
    assert (first.from_cache, again.from_cache, fresh.from_cache) == (False, True, False)
    assert again.kernel("main").signature == first.kernel("main").signature
    other = device.load_module(src, defines={"UNUSED": 1})
    assert not other.from_cache


def test_host_copies_stay_in_stream_order(device: Any) -> None:
    """A copy from the host into memory a queued kernel still reads waits for it (staged while the stream has
    work pending; written through the mapping only when it has none), and a copy to the host waits for the work
    before it, on both paths."""
    n = 1 << 16
    k = device.load_module(VADD).kernel("main")
    s = device.create_stream()
    old, new = np.full(n, 1, np.float32), np.full(n, 5, np.float32)
    out = np.empty(n, np.float32)
    dims = LaunchDims(grid=n // 64, block=64)
    with device.alloc(4 * n) as da, device.alloc(4 * n) as dc:
        s.copy_from_host(da, old)  # (an idle stream: through the mapping, on lavapipe)
        for _ in range(20):
            s.launch(KernelLaunch(k, dims, [da, da, dc, np.uint32(n)]))
        s.copy_from_host(da, new)  # after the launches, which read `old`
        s.copy_to_host(out, dc)
        np.testing.assert_array_equal(out, 2 * old)
        s.launch(KernelLaunch(k, dims, [da, da, dc, np.uint32(n)]))
        s.copy_to_host(out, dc)
        np.testing.assert_array_equal(out, 2 * new)


def test_a_queue_without_timestamps_orders_events_but_cannot_time_them(backend: Any) -> None:
    """Where the compute queue writes no timestamps (timestampValidBits 0; lavapipe's does: the flag is forced
    here), events still order and wait; elapsed_ms is UNSUPPORTED rather than a timestamp never written."""
    with backend.open(0) as dev:
        dev.timestamps = False
        s = dev.create_stream()
        with dev.alloc(64) as a:
            e0 = s.record_event()
            s.fill(a, 3)
            e1 = s.record_event()
            e1.synchronize()
            assert e0.query() and e1.query()
            with pytest.raises(Error) as ei:
                e0.elapsed_ms(e1)
            assert ei.value.kind is ErrorKind.UNSUPPORTED


def test_a_garbage_cycle_of_device_stream_kernel_and_allocation(tmp_path: Path) -> None:
    """A device, a stream with work pending, a kernel and an allocation dropped together in a reference cycle are
    released in any order the collector picks: the VkDevice goes last (the device's finalizer ran first, then an
    allocation's release used the destroyed device: the loader aborted under the validation layer)."""
    script = tmp_path / "child.py"
    script.write_text(
        "import gc\n"
        "from ironaccelerator import BackendRegistry\n"
        "def make():\n"
        "    d = BackendRegistry.default().get('vulkan').open(0)\n"
        f"    k = d.load_module({VADD!r}).kernel('main')\n"
        "    s = d.create_stream()\n"
        "    a = d.alloc(1 << 20)\n"
        "    s.fill(a, 1)\n"
        "    cycle = [d, s, k, a]\n"
        "    cycle.append(cycle)\n"
        "for _ in range(3):\n"
        "    make()\n"
        "    gc.collect()\n"
        "print('collected')\n")
    _run_validated(script, "collected")


def test_capture_records_dispatches_copies_and_fills_for_replay(device: Any) -> None:
    """Stream.capture: a fill, a dispatch and a device copy recorded once (nothing runs inside the block) and
    replayed three times, on the capturing stream and another, each replay in that stream's order; host copies and
    events inside the block are UNSUPPORTED; an exception inside it discards the graph; a closed graph is
    INVALID_HANDLE."""
    n = 1024
    k = device.load_module(SAXPY_SPEC).kernel("main")
    s, other = device.create_stream(), device.create_stream()
    x = np.arange(n, dtype=np.float32)
    out = np.empty(n, np.float32)
    dims = LaunchDims(grid=n // 64, block=64)
    with device.alloc(4 * n) as dx, device.alloc(4 * n) as dy, device.alloc(4 * n) as dz:
        s.copy_from_host(dx, x)
        s.fill(dz, 0)
        s.synchronize()
        with s.capture() as graph:
            s.fill(dy, 0)
            s.launch(KernelLaunch(k, dims, [np.float32(3), dx, dy, np.uint32(n), np.float64(0), np.int64(0)]))
            s.copy(dz, dy)
            for refused in (lambda: s.copy_to_host(out, dy), lambda: s.copy_from_host(dy, x), s.record_event,
                            s.synchronize):
                with pytest.raises(Error) as ei:
                    refused()
                assert ei.value.kind is ErrorKind.UNSUPPORTED
        s.copy_to_host(out, dz)
        np.testing.assert_array_equal(out, 0)  # nothing ran while capturing
        for stream in (s, other, s):
            stream.copy_from_host(dz, np.full(n, 7, np.float32))
            graph.launch(stream)
            stream.copy_to_host(out, dz)
            np.testing.assert_array_equal(out, 3 * x)
        other.copy_from_host(dz, np.full(n, 7, np.float32))
        assert graph.launch_unchecked(other) is None  # the same replay, its Error returned (there is none)
        other.copy_to_host(out, dz)
        np.testing.assert_array_equal(out, 3 * x)
        e = graph.launch_unchecked(object())  # not a stream of the graph's device
        assert isinstance(e, Error) and e.kind is ErrorKind.INVALID_VALUE and e.function == "Graph.launch_unchecked"
        graph.close()
        with pytest.raises(Error) as ei:
            graph.launch(s)
        assert ei.value.kind is ErrorKind.INVALID_HANDLE
        e = graph.launch_unchecked(s)
        assert isinstance(e, Error) and e.kind is ErrorKind.INVALID_HANDLE and e.function == "Graph.launch_unchecked"
        with pytest.raises(ZeroDivisionError), s.capture():
            s.fill(dz, 1)
            1 / 0
        s.synchronize()
        s.copy_to_host(out, dz)
        np.testing.assert_array_equal(out, 3 * x)  # the discarded capture's fill never ran
    assert s.supports("Stream.capture") if hasattr(s, "supports") else device.backend.supports("Stream.capture")


def test_a_graph_replay_after_its_allocation_was_freed_is_refused(tmp_path: Path) -> None:
    """Issue 28 item 3: a graph replayed after an allocation its dispatch, copy or fill uses was freed is refused
    (INVALID_HANDLE), checked before anything is submitted; one that was dropped instead stays alive with the
    graph, which replays correctly.  Before, the replay ran on the destroyed VkBuffer and lavapipe crashed the
    process (a segmentation fault), so this runs in a child process."""
    script = tmp_path / "child.py"
    script.write_text(
        "import gc\n"
        "import numpy as np\n"
        "from ironaccelerator import BackendRegistry, Error, ErrorKind, KernelLaunch, LaunchDims\n"
        "backend = BackendRegistry.default().get('vulkan')\n"
        "d = backend.open(0)\n"
        f"k = d.load_module({ACCUMULATE!r}).kernel('main')\n"
        "s = d.create_stream()\n"
        "n = 1 << 16\n"
        "for freed in ('launch', 'copy', 'fill', 'dropped'):\n"
        "    a, c, t = d.alloc(4 * n), d.alloc(4 * n), d.alloc(4 * n)\n"
        "    s.copy_from_host(a, np.ones(n, np.float32))\n"
        "    s.fill(c, 0)\n"
        "    s.synchronize()\n"
        "    with s.capture() as g:\n"
        "        s.launch(KernelLaunch(k, LaunchDims(grid=n // 64, block=64), [a, c, np.float32(1), np.uint32(n)]))\n"
        "        s.copy(t, c)\n"
        "        s.fill(t, 0, 64)\n"
        "    g.launch(s)\n"
        "    if freed == 'dropped':\n"
        "        del a, t\n"
        "        gc.collect()\n"
        "    else:\n"
        "        {'launch': a, 'copy': c, 'fill': t}[freed].free()\n"
        "    try:\n"
        "        g.launch(s)\n"
        "    except Error as e:\n"
        "        assert freed != 'dropped' and e.kind is ErrorKind.INVALID_HANDLE, e\n"
        "        out = np.empty(n, np.float32)\n"
        "        if freed != 'copy':\n"
        "            s.copy_to_host(out, c)\n"
        "            assert (out == 1).all(), out[:4]  # the refused replay ran nothing\n"
        "    else:\n"
        "        assert freed == 'dropped', f'a graph replayed after its allocation was freed ({freed})'\n"
        "        out = np.empty(n, np.float32)\n"
        "        s.copy_to_host(out, c)\n"
        "        assert (out == 2).all(), out[:4]\n"
        "    s.synchronize()\n"
        "    g.close()\n"
        "assert backend.validation_messages == [], backend.validation_messages[:3]\n"
        "print('refused')\n")
    _run_validated(script, "refused")


def test_an_allocation_dropped_while_deferred_frees_are_swept(tmp_path: Path) -> None:
    """Issue 28 item 3: the device's sweep of deferred frees (on every alloc) may see another allocation dropped
    meanwhile: by a garbage collection, or by a retired batch letting go of a graph that held it.  Its release comes
    back to the deferred-free queue; before, the sweep held the queue's lock through it and the thread waited for
    itself forever.  The drop is made to happen inside the sweep; a child process, with faulthandler's dump after
    60 s (a hang before)."""
    script = tmp_path / "child.py"
    script.write_text(
        "import faulthandler\n"
        "faulthandler.dump_traceback_later(60, exit=True)\n"
        "from ironaccelerator import BackendRegistry\n"
        "dev = BackendRegistry.default().get('vulkan').open(0)\n"
        "s, s2 = dev.create_stream(), dev.create_stream()\n"
        "y, w, victim = dev.alloc(64), dev.alloc(64), [dev.alloc(64)]  # (no alloc below sweeps before z's)\n"
        "s.fill(y, 0)\n"
        "s.record_event()  # submitted: s has work pending\n"
        "y.free()  # deferred until it completes\n"
        "s2.fill(w, 0)  # s2 has a batch open: a release now is deferred too\n"
        "reached = s._reached\n"
        "def dropping(v, wait):  # the sweep asks whether s reached a value: meanwhile an allocation goes\n"
        "    victim.clear()\n"
        "    return reached(v, wait)\n"
        "s._reached = dropping\n"
        "z = dev.alloc(64)  # the sweep\n"
        "assert not victim and dev._graveyard\n"
        "s2.synchronize()\n"
        "dev.synchronize()\n"
        "assert not dev._graveyard, dev._graveyard\n"
        "for a in (w, z):\n"
        "    a.free()\n"
        "dev.close()\n"
        "print('swept')\n")
    _run_validated(script, "swept")


def test_a_free_while_its_batch_is_being_submitted_waits_for_it(tmp_path: Path) -> None:
    """Issue 28 item 3: an allocation freed (by another thread, or by a garbage collection) while the stream is
    inside the submission of a batch that uses it is released once that batch completed.  Before, the stream had
    marked its batch closed before its submission counted, so the free found nothing pending and destroyed the
    buffer under the batch being submitted.  The free is made to happen inside vkQueueSubmit's call; a child
    process (a use of a destroyed buffer may crash lavapipe)."""
    script = tmp_path / "child.py"
    script.write_text(
        "import numpy as np\n"
        "from ironaccelerator import BackendRegistry\n"
        "backend = BackendRegistry.default().get('vulkan')\n"
        "dev = backend.open(0)\n"
        "s = dev.create_stream()\n"
        "a, b = dev.alloc(1 << 20), dev.alloc(1 << 20)\n"
        "s.fill(a, 3, width=4)\n"
        "s.synchronize()\n"
        "s.copy(b, a)  # the open batch uses a and b\n"
        "submit = s._queue_submit\n"
        "seen = []\n"
        "def freeing(*args):\n"
        "    if not seen:\n"
        "        b.free()  # as another thread could, while this one submits\n"
        "        seen.append(len(dev._graveyard))\n"
        "    return submit(*args)\n"
        "s._queue_submit = freeing\n"
        "s.synchronize()\n"
        "assert seen == [1], seen  # b's release was deferred until the batch completed\n"
        "dev.synchronize()\n"
        "assert not dev._graveyard\n"
        "out = np.empty(1 << 18, np.uint32)\n"
        "s.copy_to_host(out, a)\n"
        "assert (out == 3).all()\n"
        "a.free()\n"
        "dev.close()\n"
        "assert backend.validation_messages == [], backend.validation_messages[:3]\n"
        "print('deferred')\n")
    _run_validated(script, "deferred")


def test_a_kernel_dropped_while_its_dispatch_is_pending(tmp_path: Path) -> None:
    """Issue 28 item 3: a kernel whose last reference goes while a stream's batch still binds its pipeline (recorded,
    or submitted and running) is destroyed once that work completed, as freed memory is.  Before, its finalizer
    destroyed the pipeline at once: the validation layer reported VUID-vkDestroyPipeline-pipeline-00765 (in use by
    a command buffer) and lavapipe ran the destroyed pipeline.  Both launch paths: the prepared one (the stream
    lets the launch go at synchronize, after submitting) and one with a bytearray value (not kept).  A child
    process."""
    script = tmp_path / "child.py"
    script.write_text(
        "import gc\n"
        "import numpy as np\n"
        "from ironaccelerator import BackendRegistry, KernelLaunch, LaunchDims\n"
        "backend = BackendRegistry.default().get('vulkan')\n"
        "dev = backend.open(0)\n"
        "s = dev.create_stream()\n"
        "for value in (np.uint32(64), bytearray(np.uint32(64).tobytes())):\n"
        f"    k = dev.load_module({SLOW!r}, cache=False).kernel('main')\n"
        "    s.launch(KernelLaunch(k, LaunchDims(grid=16, block=64), [value]))\n"
        "    del k\n"
        "    gc.collect()\n"
        "    s.synchronize()\n"
        "dev.synchronize()\n"
        "assert not dev._graveyard\n"
        "dev.close()\n"
        "assert backend.validation_messages == [], backend.validation_messages[:2]\n"
        "print('deferred')\n")
    _run_validated(script, "deferred")


def test_a_stream_dropped_while_another_waits_for_its_event(tmp_path: Path) -> None:
    """A stream whose last reference goes while another stream's next batch waits for one of its events (the wait
    recorded, not yet submitted; or submitted, with work behind it still running) keeps its timeline semaphore until
    that batch completed.  Before, the dropped stream's finalizer destroyed the semaphore once its own work was
    done: the waiting stream then submitted a wait on a destroyed semaphore, or a semaphore its pending batch used
    was destroyed (lavapipe crashed under four threads sharing a memory pool: the conformance thread test, in CI).
    Under the validation layer, which reports either use; a child process."""
    script = tmp_path / "child.py"
    script.write_text(
        "import gc\n"
        "import numpy as np\n"
        "from ironaccelerator import BackendRegistry, KernelLaunch, LaunchDims\n"
        "backend = BackendRegistry.default().get('vulkan')\n"
        "dev = backend.open(0)\n"
        f"k = dev.load_module({SLOW!r}, cache=False).kernel('main')\n"
        "slow = KernelLaunch(k, LaunchDims(grid=64, block=64), [np.uint32(200000)])\n"
        "b = dev.create_stream()\n"
        "for submitted in (False, True):\n"
        "    a = dev.create_stream()\n"
        "    a.launch(slow)\n"
        "    e = a.record_event()\n"
        "    b.wait_event(e)\n"
        "    if submitted:\n"
        "        b.launch(slow)\n"
        "        b.record_event()  # (submits the wait, and the work behind it)\n"
        "    del a, e\n"
        "    gc.collect()\n"
        "    b.launch(slow)\n"
        "    b.synchronize()\n"
        "dev.synchronize()\n"
        "dev.close()\n"
        "assert backend.validation_messages == [], backend.validation_messages[:2]\n"
        "print('kept')\n")
    _run_validated(script, "kept")


def test_a_free_defers_without_submitting_the_open_batch(device: Any) -> None:
    """Freeing memory while a stream has a batch open submits nothing (a free may come from an allocation's
    __del__ in the middle of recording a command on that stream): the release waits for the value that batch
    will signal, and happens once it completed."""
    s = device.create_stream()
    a, b = device.alloc(1 << 16), device.alloc(1 << 16)
    s.fill(a, 1)
    s.copy(b, a)  # b used by the open batch
    submitted = s.value
    b.free()
    assert s.value == submitted and s._cb is not None  # still open, nothing submitted
    assert device._graveyard  # b's release waits for that batch
    s.synchronize()
    device.synchronize()
    assert not device._graveyard
    a.free()


FEATURE_SHADERS = {
    "FP64": ("#extension GL_ARB_gpu_shader_fp64 : require\n", "double v = double(x[i]) * 2.0lf; x[i] = float(v);"),
    "FP16": ("#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n",
             "float16_t h = float16_t(x[i]); x[i] = float(h + h);"),
    "ATOMICS_64": ("#extension GL_EXT_shader_atomic_int64 : require\n"
                   "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n"
                   "layout(std430, binding = 1) buffer C { uint64_t count; };\n",
                   "atomicAdd(count, uint64_t(1)); x[i] = x[i] * 2.0;"),
}


@pytest.mark.parametrize("flag", sorted(FEATURE_SHADERS))
def test_a_capability_flag_means_its_shaders_run(device: Any, flag: str) -> None:
    """FP64, FP16 and ATOMICS_64 are reported from the device's shader features, which opening the device enables:
    a shader using each compiles, runs and doubles its input, with no validation message (the module's device
    fixture asserts none)."""
    from ironaccelerator import CapabilityFlags

    if CapabilityFlags[flag] not in device.descriptor.capability.flags:
        pytest.skip(f"{device.descriptor.name} does not report {flag}")
    head, body = FEATURE_SHADERS[flag]
    src = ("#version 450\n" + head + "layout(local_size_x = 64) in;\n"
           "layout(std430, binding = 0) buffer X { float x[]; };\n"
           "void main() { uint i = gl_GlobalInvocationID.x; " + body + " }\n")
    k = device.load_module(src).kernel("main")
    n = 256
    x = np.arange(n, dtype=np.float32)
    s = device.create_stream()
    with device.alloc(x.nbytes) as dx, device.alloc(64) as dc:
        s.copy_from_host(dx, x)
        s.fill(dc, 0)
        args = [dx] + ([dc] if k.num_args == 2 else [])
        s.launch(KernelLaunch(k, LaunchDims(grid=n // 64, block=64), args))
        s.copy_to_host(x, dx)
        s.synchronize()
        if flag == "ATOMICS_64":
            count = np.zeros(8, np.uint8)
            s.copy_to_host(count, dc, 8)
            assert int.from_bytes(count.tobytes(), "little") == n
    np.testing.assert_array_equal(x, 2 * np.arange(n, dtype=np.float32))


ACCUMULATE = """#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) buffer C { float c[]; };
layout(push_constant) uniform Args { float w; uint n; };
void main() { uint i = gl_GlobalInvocationID.x; if (i < n) c[i] += w * a[i]; }
"""


def _accumulator(device: Any, n: int) -> tuple[Any, Any, LaunchDims, np.ndarray]:
    """The ACCUMULATE kernel, a stream, the dims for ``n`` elements and the ``a`` they add (1, 2, 3, ...)."""
    return (device.load_module(ACCUMULATE).kernel("main"), device.create_stream(), LaunchDims(grid=n // 64, block=64),
            np.arange(1, n + 1, dtype=np.float32))


def _read(s: Any, alloc: Any, n: int) -> np.ndarray:
    out = np.empty(n, np.float32)
    s.copy_to_host(out, alloc)
    s.synchronize()
    return out


def test_a_repeated_launch_rechecks_what_can_change(device: Any, backend: Any) -> None:
    """Issue 28: launching the same KernelLaunch object again records what its first launch prepared (no checks,
    no conversions), so what can change between two launches is checked each time: a bytearray push constant's
    bytes are read again; a storage buffer freed since is refused (INVALID_HANDLE, checked or not) with nothing
    recorded; a launch inside a capture goes to the graph, not the stream."""
    n = 256
    k, s, dims, a = _accumulator(device, n)
    with device.alloc(4 * n) as da, device.alloc(4 * n) as dc:
        s.copy_from_host(da, a)
        s.fill(dc, 0)
        w = bytearray(np.float32(1).tobytes())
        mutable = KernelLaunch(k, dims, [da, dc, w, np.uint32(n)])
        s.launch(mutable)
        w[:] = np.float32(10).tobytes()
        s.launch(mutable)
        np.testing.assert_array_equal(_read(s, dc, n), 11 * a)

        fixed = KernelLaunch(k, dims, [da, dc, np.float32(1), np.uint32(n)])
        s.fill(dc, 0)
        s.launch(fixed)
        s.launch(fixed)  # (no synchronize since: the second launch was the prepared one)
        with s.capture() as graph:
            s.launch(fixed)
        np.testing.assert_array_equal(_read(s, dc, n), 2 * a)  # the captured launch did not run on the stream
        graph.launch(s)
        np.testing.assert_array_equal(_read(s, dc, n), 3 * a)
        graph.close()

        dx = device.alloc(4 * n)
        s.fill(dx, 0)
        gone = KernelLaunch(k, dims, [da, dx, np.float32(1), np.uint32(n)])
        s.launch(gone)
        s.launch(gone)
        dx.free()  # (deferred: the stream's open batch uses it)
        count = s._count
        err = s.launch_unchecked(gone)
        assert isinstance(err, Error) and err.kind is ErrorKind.INVALID_HANDLE, err
        with pytest.raises(Error) as ei:
            s.launch(gone)
        assert ei.value.kind is ErrorKind.INVALID_HANDLE
        assert s._count == count  # nothing recorded
        s.synchronize()
    assert backend.validation_messages == []


def test_a_repeated_launch_after_the_descriptor_set_cache_emptied(device: Any, backend: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28: a prepared launch's descriptor set belongs to the stream's cache, which frees its sets once the
    cache is full (after the batch being recorded completes).  A prepared launch captured into a graph must give
    the graph a set of its own: replayed after the cache emptied, the graph would bind a freed set (the
    validation layer reports it)."""
    from ironaccelerator_runtime.backends.vulkan import stream as vk_stream

    monkeypatch.setattr(vk_stream, "_SETS", 2)
    n = 256
    k, s, dims, a = _accumulator(device, n)
    allocs = [device.alloc(4 * n) for _ in range(4)]
    da, dc, dy, dz = allocs
    s.copy_from_host(da, a)
    for d in (dc, dy, dz):
        s.fill(d, 0)
    first = KernelLaunch(k, dims, [da, dc, np.float32(1), np.uint32(n)])
    s.launch(first)
    s.launch(first)  # (prepared)
    with s.capture() as graph:
        s.launch(first)
    s.launch(KernelLaunch(k, dims, [da, dy, np.float32(1), np.uint32(n)]))
    s.launch(KernelLaunch(k, dims, [da, dz, np.float32(1), np.uint32(n)]))  # the cache full: emptied
    s.record_event().synchronize()  # the batch completed: the emptied cache's sets freed
    s.launch(first)
    graph.launch(s)
    np.testing.assert_array_equal(_read(s, dc, n), 4 * a)
    graph.close()
    for d in allocs:
        d.free()
    assert backend.validation_messages == []


def test_a_repeated_launch_makes_no_python_object(device: Any) -> None:
    """Issue 28 item 2 (issue 27's rule): launching the same KernelLaunch again, checked or not, calls none of
    CPython's allocators (bench/count_alloc.c counts them) while it records into the stream's open batch: 60
    launches after the first of a batch (a batch's submission, every 64 launches, makes its timeline value and its
    entry in the stream's pending list)."""
    import ctypes
    import itertools
    import sys
    import sysconfig

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    try:
        import bench_launch_cpu
    finally:
        sys.path.pop(0)
    if not Path(sysconfig.get_paths()["include"], "Python.h").exists():
        pytest.skip("no Python.h to build bench/count_alloc.c against")
    counter_path = bench_launch_cpu.build_counter()
    if isinstance(counter_path, str):
        pytest.skip(counter_path)
    counter = ctypes.PyDLL(str(counter_path))
    counter.count_calls.restype = ctypes.c_ulonglong
    n = 256
    k, s, dims, a = _accumulator(device, n)
    with device.alloc(4 * n) as da, device.alloc(4 * n) as dc:
        s.copy_from_host(da, a)
        s.fill(dc, 0)
        launch = KernelLaunch(k, dims, [da, dc, np.float32(0), np.uint32(n)])
        for f in (s.launch_unchecked, s.launch, s.launch_unchecked, s.launch):  # (the first two warm up)
            s.record_event()  # (the open batch submitted: the next launch begins one)
            f(launch)
            calls = []
            for times in (0, 60):  # (0: what counting itself costs: count_calls's int)
                counter.count_start()
                try:
                    before = counter.count_calls()
                    for _ in itertools.repeat(None, times):
                        f(launch)
                    calls.append(counter.count_calls() - before)
                finally:
                    counter.count_stop()
        assert s._count == 61 and calls[1] == calls[0], (s._count, calls)
        s.synchronize()
