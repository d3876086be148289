"""MPS exporter: the Metal struct declaration, the torch-version gate, the MTLBuffer checks with a
fake Objective-C runtime, host sync through a real session, and (on Apple Silicon) the import."""

import threading

import numpy as np
import pytest
import torch

from caliper_vk.engine.external import METAL_FFI, ExternalMemoryError, MetalBuffer, metal_buffer_info
from caliper_vk.exporters import mps

HAS_MPS = torch.backends.mps.is_available()


def test_metal_struct_declaration_has_the_header_layout():
    assert METAL_FFI.sizeof("VkImportMetalBufferInfoEXT") == 3 * METAL_FFI.sizeof("void *")
    assert METAL_FFI.offsetof("VkImportMetalBufferInfoEXT", "mtlBuffer") == 2 * METAL_FFI.sizeof("void *")
    info, pnext = metal_buffer_info(0xABC000)
    assert info.sType == 1000311005  # VK_STRUCTURE_TYPE_IMPORT_METAL_BUFFER_INFO_EXT
    assert int(METAL_FFI.cast("uintptr_t", info.mtlBuffer)) == 0xABC000
    from caliper_vk.engine._vk import ffi

    assert int(ffi.cast("uintptr_t", pnext)) == int(METAL_FFI.cast("uintptr_t", info))  # chained by address


def test_devices_without_metal_objects_refuse_clearly(device):
    if "VK_EXT_metal_objects" in device.extensions:
        pytest.skip("this device has VK_EXT_metal_objects")
    with pytest.raises(ExternalMemoryError, match="lacks VK_EXT_metal_objects"):
        MetalBuffer(device, 0x1000, 4096)


@pytest.mark.parametrize("version, ok", [("2.0.1", False), ("1.13.1", False), ("2.1.0", True),
                                         ("2.13.0+cpu", True), ("nightly", None)])
def test_torch_version_gate(version, ok):
    why = mps.torch_supported(version)
    if ok is None:
        assert why and "cannot read" in why
    else:
        assert (why is None) == ok


class FakeObjC:
    def __init__(self, length, is_buffer=True):
        self._length, self._is = length, is_buffer

    def is_buffer(self, ptr):
        return self._is

    def length(self, ptr):
        return self._length


def test_buffer_offset_is_the_storage_offset_in_bytes():
    base = torch.zeros(64, 16)
    part = base[8:]
    ptr, offset, length = mps.buffer_of(part, FakeObjC(64 * 16 * 4))
    assert ptr == base.untyped_storage().data_ptr() and offset == 8 * 16 * 4 and length == 4096


def test_a_pointer_that_is_not_an_mtlbuffer_or_too_short_is_refused():
    t = torch.zeros(10)
    with pytest.raises(mps.MetalInteropError, match="not an MTLBuffer"):
        mps.buffer_of(t, FakeObjC(40, is_buffer=False))
    with pytest.raises(mps.MetalInteropError, match="holds 39 bytes"):
        mps.buffer_of(t, FakeObjC(39))


def test_host_sync_flushes_before_it_signals(device):
    from caliper_vk.engine import TimelineSemaphore

    seen = []
    timeline = TimelineSemaphore(device)
    sync = mps.HostSync(timeline, lambda: seen.append(timeline.value))
    sync.before_write(0)
    sync.after_write(0, 1)
    assert seen == [0] and timeline.value == 1  # flushed while still at 0, then signalled
    sync.close()


def test_session_drives_a_host_sync_and_states_it(monkeypatch):
    """The session's producer-sync branch, on lavapipe: a CPU tensor's record carrying a HostSync
    (what an MPS record carries) — frames untorn, flushes counted, the status line says so."""
    import caliper_vk as cv
    from caliper_vk import exporters

    flushes = []
    real_export = exporters.export

    def export(tensor, info, name="tensor", device=None):
        record = real_export(tensor, info, name, device)
        from caliper_vk.engine import TimelineSemaphore

        record.semaphore = mps.HostSync(TimelineSemaphore(device), lambda: flushes.append(1))
        record.reason += f"; {mps.SYNC_NOTE}"
        return record

    monkeypatch.setattr(exporters, "export", export)
    t = cv.empty((64, 128))
    seen = []
    with cv.Session(window=False, size=(64, 64)) as s:
        panel = s.attach(t, "heatmap", name="gen")
        assert panel.path == "zero-copy" and isinstance(panel.protocol.sync, mps.HostSync)
        assert "gen: zero-copy (" in s.status().line() and "torch.mps.synchronize" in panel.status
        done = threading.Event()

        def produce():
            gen = 0
            while not done.is_set():
                gen += 1
                with panel.writing():
                    for row in range(0, 64, 8):
                        t[row:row + 8].fill_(float(gen))

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        last = s.frames
        try:
            while len(seen) < 300:
                s.step()
                if s.frames != last:
                    last = s.frames
                    seen.append(panel.view.seen_range)
        finally:
            done.set()
            producer.join(timeout=10)
        s.flush()
    assert [r for r in seen if r[0] != r[1]] == []
    assert len(flushes) >= len({r[0] for r in seen}) - 1 > 10


def test_every_write_exit_synchronizes_even_between_two_frames(monkeypatch):
    """The write-exit hook runs at every write's exit: three writes between two frames flush three
    times (under the old 2k+1 rule only the first did, and the frame could read the others' work
    unfinished); a frame with no write since the last flushes once for a loop that writes
    without writing()."""
    import caliper_vk as cv
    from caliper_vk import exporters
    from caliper_vk.engine import TimelineSemaphore

    flushes = []
    real_export = exporters.export

    def export(tensor, info, name="tensor", device=None):
        record = real_export(tensor, info, name, device)
        record.semaphore = mps.HostSync(TimelineSemaphore(device), lambda: flushes.append(1))
        return record

    monkeypatch.setattr(exporters, "export", export)
    t = cv.empty((8, 8))
    with cv.Session(window=False, size=(64, 64)) as s:
        panel = s.attach(t, "heatmap", name="gen")
        s.render()
        before = len(flushes)
        for k in range(3):
            with panel.writing():
                t.fill_(float(k))
        assert len(flushes) == before + 3
        s.render()
        assert len(flushes) == before + 3 and panel.view.seen_range == (2.0, 2.0)
        s.render()  # nothing written through writing() since the last frame
        assert len(flushes) == before + 4


@pytest.mark.skipif(not HAS_MPS, reason="needs Apple Silicon with MPS (runs in ci/macos)")
def test_mps_tensor_is_imported_in_place_and_renders_exactly(artifacts):
    import caliper_vk as cv
    from images import assert_same_image

    t = torch.randn(40, 64, device="mps")
    with cv.Session(window=False, size=(160, 120)) as s:
        panel = s.attach(t, "heatmap", name="x")
        assert panel.path == "zero-copy" and panel.record.kind == "metal-buffer", panel.reason
        assert "torch.mps.synchronize" in s.status().line()
        with panel.writing():
            t.mul_(2.0)
        image = s.render()
        host = t.cpu()
    with cv.Session(window=False, size=(160, 120)) as s:
        s.attach(host, "heatmap", name="x")
        assert_same_image(image[:-20], s.render()[:-20], artifacts)
    assert np.isfinite(host.numpy()).all()
