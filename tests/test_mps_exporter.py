"""MPS exporter: the Metal struct declaration, the torch-version gate, the MTLBuffer checks with a
fake Objective-C runtime, host sync through a real session, MoltenVK's MTLHeap bug (staged, with the
reason). The import itself, on Apple Silicon, is in tests/hardware/test_gpu_paths.py (ci/macos)."""

import threading

import pytest
import torch

from caliper_vk.engine.external import METAL_FFI, ExternalMemoryError, MetalBuffer, metal_buffer_info
from caliper_vk.exporters import mps



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
    with cv.Session(window=False, size=(64, 64), budget=None) as s:  # every frame it can
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
    unfinished). A frame with no write since the last does not flush when the producer writes
    through writing() (each exit flushed: a flush per frame would drain the training's GPU for
    nothing); for a loop that writes without writing() it flushes once."""
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
        s.render()  # nothing written since the last frame: no flush
        s.render()
        assert len(flushes) == before + 3
    flushes.clear()
    t = cv.empty((8, 8))
    with cv.Session(window=False, size=(64, 64)) as s:
        s.attach(t, "heatmap", name="gen")
        for k in range(3):  # a loop that writes without writing(): each frame flushes first
            t.fill_(float(k))
            s.render()
        assert len(flushes) == 3


# -- MoltenVK's MTLHeap bug (1.3.0-1.4.1): staged, with the reason, while the heap is on --------

def moltenvk_info(version: int, driver_name: str = "MoltenVK"):
    from types import SimpleNamespace

    return SimpleNamespace(name="Apple M2", driver_name=driver_name, driver_info="", driver_version=version,
                           max_storage_buffer_range=1 << 30,
                           has=lambda ext: ext == "VK_EXT_metal_objects")


@pytest.mark.parametrize("version, env, staged", [
    (10300, None, True), (10401, None, True), (10401, "1", True),   # the bug's range, heap on
    (10401, "0", False), (10350, "false", False),                    # heap off: the import is real
    (10402, None, False), (10210, None, False),                      # before and after the bug
])
def test_moltenvk_heap_bug_stages_mps_tensors_with_the_reason(version, env, staged):
    from types import SimpleNamespace

    environ = {} if env is None else {"MVK_CONFIG_USE_MTLHEAP": env}
    info = moltenvk_info(version)
    why = mps.heap_hazard(info, environ)
    assert (why is not None) == staged
    if staged:
        assert f"MoltenVK {version // 10000}.{version // 100 % 100}.{version % 100}" in why
        assert "MVK_CONFIG_USE_MTLHEAP=0" in why and "1.4.2" in why
    # through export: a staging record with that reason, before any Objective-C call is made
    device = SimpleNamespace(info=info, extensions={"VK_EXT_metal_objects"})

    class NoObjC:
        def is_buffer(self, ptr):
            raise AssertionError("the MTLBuffer must not be read when the import cannot be trusted")

        length = is_buffer

    import os

    saved = os.environ.get("MVK_CONFIG_USE_MTLHEAP")
    os.environ.pop("MVK_CONFIG_USE_MTLHEAP", None)
    os.environ.update(environ)
    try:
        if staged:
            record = mps.export(torch.zeros(4, 4), device, "x", objc=NoObjC())
            assert record.kind == "staging" and "placement-heap" in record.reason
        else:
            assert mps.heap_hazard(info) is None
    finally:
        os.environ.pop("MVK_CONFIG_USE_MTLHEAP", None)
        if saved is not None:
            os.environ["MVK_CONFIG_USE_MTLHEAP"] = saved


def test_other_drivers_are_not_taken_for_moltenvk():
    assert mps.moltenvk_version(moltenvk_info(10401, driver_name="llvmpipe")) is None
    assert mps.heap_hazard(moltenvk_info(10401, driver_name="NVIDIA"), {}) is None


def test_doctor_reports_the_heap_bug(monkeypatch):
    from caliper_vk import doctor

    monkeypatch.setattr(doctor.platform, "system", lambda: "Darwin")
    monkeypatch.delenv("MVK_CONFIG_USE_MTLHEAP", raising=False)
    cap = doctor._metal_interop(moltenvk_info(10400))
    assert not cap.ok and "MoltenVK 1.4.0" in cap.detail and "host staging" in cap.detail
    monkeypatch.setenv("MVK_CONFIG_USE_MTLHEAP", "0")
    assert "MTLHEAP" not in doctor._metal_interop(moltenvk_info(10400)).detail


def test_the_engine_turns_the_heap_off_on_macos_before_vulkan_loads_unless_set():
    """engine/instance.py sets it at import, as it does fast math (checked in a fresh process)."""
    import subprocess
    import sys

    code = ("import os, sys; sys.platform = 'darwin'; os.environ.pop('MVK_CONFIG_USE_MTLHEAP', None); "
            "import caliper_vk.engine.instance; print(os.environ['MVK_CONFIG_USE_MTLHEAP'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"
    kept = subprocess.run([sys.executable, "-c", code.replace("os.environ.pop('MVK_CONFIG_USE_MTLHEAP', None)",
                                                             "os.environ['MVK_CONFIG_USE_MTLHEAP'] = '1'")],
                          capture_output=True, text=True, check=True)
    assert kept.stdout.strip() == "1"
