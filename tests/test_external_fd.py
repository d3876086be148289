"""Exportable device memory and opaque-fd import, for real on the test device (lavapipe has
VK_KHR_external_memory_fd): what one buffer writes, a buffer over an exported fd reads; fds
never leak; refusals name the reason."""

import os

import numpy as np
import pytest

from caliper_vk.engine import Buffer, Recorder, TimelineSemaphore
from caliper_vk.engine.external import (
    ExportableBuffer,
    ExternalMemoryError,
    MemoryExport,
    import_external_memory,
    platform_handle_kind,
)
from caliper_vk.engine.sync import SemaphoreExportError, timeline_export_supported

pytestmark = [pytest.mark.trimmed,  # in the hardware scripts' trimmed suite (pyproject.toml)
              pytest.mark.skipif(not hasattr(os, "listdir") or not os.path.isdir("/proc/self/fd"),
                                 reason="n/a on this platform: counts fds through /proc/self/fd (Linux)")]


@pytest.fixture
def fd_device(device):
    if "VK_KHR_external_memory_fd" not in device.extensions:
        pytest.skip(f"{device.info.name} lacks VK_KHR_external_memory_fd")
    return device


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def copy(device, src, dst, nbytes, src_offset=0, dst_offset=0):
    rec = Recorder(device).begin()
    rec.copy_buffer(src, dst, nbytes, src_offset, dst_offset)
    rec.end()
    device.wait(device.submit([rec.handle]))
    rec.close()


def test_handle_kind_follows_the_platform():
    assert platform_handle_kind("linux") == "opaque-fd"
    assert platform_handle_kind("win32") == "opaque-win32"
    assert platform_handle_kind("darwin") == "opaque-fd"


def test_bytes_written_to_exported_memory_are_read_through_the_fd(fd_device):
    device = fd_device
    data = np.arange(1000, dtype=np.float32) * 1.5 - 7.0
    with ExportableBuffer(device, data.nbytes) as shared, \
            Buffer(device, data.nbytes) as up, Buffer(device, 400, readback=True) as down:
        fd, memory = shared.export()
        assert fd >= 0 and memory.dedicated and memory.allocation_size >= data.nbytes
        assert memory.device_uuid == device.info.device_uuid
        up.write(data)
        copy(device, up, shared, data.nbytes)
        with import_external_memory(device, fd, memory, offset=400) as other:
            assert other.offset == 400 and other.handle != shared.handle
            copy(device, other, down, 400, src_offset=400)  # elements 100..199 through the import
            assert np.array_equal(down.view(np.float32, 100), data[100:200])
            # and the other way: written through the import, seen by the original
            up.write(np.full(100, 42.0, np.float32))
            copy(device, up, other, 400, dst_offset=0)
            copy(device, shared, down, 400)
            assert np.array_equal(down.view(np.float32, 100), np.full(100, 42.0, np.float32))
    device.wait()


def test_no_fd_leaks_over_many_export_import_cycles(fd_device):
    device = fd_device
    before = open_fds()
    for _ in range(300):
        with ExportableBuffer(device, 4096) as shared:
            fd, memory = shared.export()
            import_external_memory(device, fd, memory).close()
            spare, _ = shared.export()  # an export nobody imports is closed by its owner
            os.close(spare)
    device.wait()
    assert open_fds() == before
    assert device.pending_releases == 0


def test_a_refused_import_closes_the_fd(fd_device):
    device = fd_device
    with ExportableBuffer(device, 4096) as shared:
        fd, memory = shared.export()
        foreign = MemoryExport(memory.kind, memory.allocation_size, memory.buffer_size,
                               memory.memory_type_index, True, b"\x01" * 16)
        with pytest.raises(ExternalMemoryError, match="only be shared on one GPU"):
            import_external_memory(device, fd, foreign)
        with pytest.raises(OSError):
            os.fstat(fd)  # closed by the refusal: it was still ours
    device.wait()


def test_unknown_or_unsupported_handle_kinds_are_refused_clearly(fd_device):
    with pytest.raises(ExternalMemoryError, match="lacks VK_KHR_external_memory_win32"):
        ExportableBuffer(fd_device, 64, kind="opaque-win32")
    with pytest.raises(ExternalMemoryError, match="unknown handle kind"):
        ExportableBuffer(fd_device, 64, kind="dma-buf")


def test_timeline_semaphore_export_is_refused_without_the_extension(device):
    why = timeline_export_supported(device, "opaque-fd")
    if why is None:
        with TimelineSemaphore(device, export="opaque-fd") as sem:
            fd = sem.export_handle()
            assert fd >= 0
            os.close(fd)
        return
    assert "VK_KHR_external_semaphore_fd" in why or "cannot export" in why
    with pytest.raises(SemaphoreExportError, match="cannot share a timeline semaphore"):
        TimelineSemaphore(device, export="opaque-fd")
    with TimelineSemaphore(device) as plain, pytest.raises(SemaphoreExportError, match="not created"):
        plain.export_handle()
