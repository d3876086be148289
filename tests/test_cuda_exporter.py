"""CUDA exporter against the real cuda-bindings types, on lavapipe.

Every driver call goes through ``checked_cuda.CheckedDriver``: the real
``cuda.bindings.driver`` with its entry points intercepted, each checking its arguments
against the real bindings and returning real result types, over memory that lavapipe
exported (so what "CUDA" writes, Vulkan reads). ``SharedMemory``, ``VmmMemory``,
``StreamSync``, ``export`` and ``empty(device="cuda")`` run here for real; the negative
controls mutate one field name / argument order / struct type in the exporter's own
source and show the check catches it. On a machine with a real CUDA driver these skip
(the real calls would reach it); the hardware tests in tests/hardware/ run there.
"""

import gc
import inspect
import os
import sys
import types

import numpy as np
import pytest
import torch
import vulkan as vk

import caliper_vk as cv
from caliper_vk import exporters
from caliper_vk.engine import Buffer, Recorder
from caliper_vk.engine.external import ExportableBuffer, import_external_memory
from caliper_vk.exporters import cuda, cuda_driver
from checked_cuda import (
    ArgumentError,
    CheckedDriver,
    CudaStandIn,
    driver_installed,
    install,
    stand_in,
)
from cuda.bindings import driver as real
from handles import CAN_COUNT, NO_COUNT, open_handles
from images import assert_panel_matches_twin, assert_same_image

pytestmark = pytest.mark.trimmed  # in the hardware scripts' trimmed suite (pyproject.toml)

def open_fds() -> int:
    """File descriptors (Linux, macOS) or NT handles (Windows) open in this process."""
    return open_handles()


@pytest.fixture
def fd_device(device):
    if "VK_KHR_external_memory_fd" not in device.extensions:
        pytest.skip(f"n/a on this device: {device.info.name} lacks VK_KHR_external_memory_fd")
    if driver_installed():
        pytest.skip("n/a on this machine: a CUDA driver is installed, the checked calls would reach it "
                    "(tests/hardware runs here)")
    return device


@pytest.fixture
def drv(fd_device, monkeypatch):
    d = install(monkeypatch, CheckedDriver(fd_device), fd_device)
    yield d
    gc.collect()
    fd_device.wait()
    assert d.balanced(), "a cuCtxPushCurrent without its cuCtxPopCurrent"


def read_back(device, shared, nbytes) -> np.ndarray:
    """The bytes Vulkan sees through a fresh import of ``shared``'s exported handle."""
    fd, memory = shared.export()
    with import_external_memory(device, fd, memory) as imported, Buffer(device, nbytes, readback=True) as down:
        rec = Recorder(device).begin()
        rec.copy_buffer(imported, down, nbytes)
        rec.end()
        device.wait(device.submit([rec.handle]))
        rec.close()
        return down.view(np.uint8, nbytes).copy()


# -- the bindings' types ----------------------------------------------------------------------

def test_handle_types_are_the_real_enums():
    mem, sem = cuda.handle_types(real, "opaque-fd")
    assert mem is real.CUexternalMemoryHandleType.CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD
    assert sem is real.CUexternalSemaphoreHandleType.CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD
    mem, sem = cuda.handle_types(real, "opaque-win32")
    assert mem is real.CUexternalMemoryHandleType.CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32
    assert sem is real.CUexternalSemaphoreHandleType.CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_WIN32
    with pytest.raises(ValueError):
        cuda.handle_types(real, "metal-buffer")


def test_missing_cuda_bindings_names_the_install(monkeypatch):
    monkeypatch.setattr(cuda_driver, "_driver", None)
    for mod in ("cuda", "cuda.bindings", "cuda.bindings.driver", "cuda.cuda"):
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(cuda.CudaInteropError, match=r"caliper-vk\[cuda\]"):
        cuda.driver()


# -- handle ownership ---------------------------------------------------------------------------

@pytest.mark.parametrize("what", ["memory", "semaphore"])
@pytest.mark.parametrize("fails", [False, True])
def test_an_fd_is_cudas_after_a_successful_import_and_closed_after_a_failed_one(
        fd_device, monkeypatch, what, fails):
    name = "cuImportExternalMemory" if what == "memory" else "cuImportExternalSemaphore"
    d = install(monkeypatch, CheckedDriver(
        fd_device, fail={name: real.CUresult.CUDA_ERROR_INVALID_VALUE} if fails else None), fd_device)
    gpu = cuda.Gpu.get(d, 0)
    owner = ExportableBuffer(fd_device, 4096) if what == "memory" else d.timeline(fd_device, export="opaque-fd")
    fd = owner.export()[0] if what == "memory" else owner.export_handle()
    with gpu.current():
        if fails:
            with pytest.raises(cuda.CudaInteropError, match=f"{name} failed: CUDA_ERROR_INVALID_VALUE"):
                (cuda.import_memory(d, "opaque-fd", fd, 4096, True) if what == "memory"
                 else cuda.import_semaphore(d, "opaque-fd", fd))
            with pytest.raises(OSError):
                os.fstat(fd)  # still ours after the failure: closed
        else:
            ext = (cuda.import_memory(d, "opaque-fd", fd, 4096, True) if what == "memory"
                   else cuda.import_semaphore(d, "opaque-fd", fd))
            assert type(ext) is (real.CUexternalMemory if what == "memory" else real.CUexternalSemaphore)
            os.fstat(fd)  # the driver's now: we did not close it
            destroy = "cuDestroyExternalMemory" if what == "memory" else "cuDestroyExternalSemaphore"
            cuda.call(d, destroy, ext)
    desc = next(e[1] for e in d.log if e[0] == name)
    assert type(desc) is (real.CUDA_EXTERNAL_MEMORY_HANDLE_DESC if what == "memory"
                          else real.CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC)
    assert desc.handle.fd == fd
    owner.close()
    assert d.leaks() == {}


def test_the_memory_descriptor_names_size_and_dedication(drv, fd_device):
    with ExportableBuffer(fd_device, 1 << 16) as shared, cuda.Gpu.get(drv, 0).current():
        fd, memory = shared.export()
        ext = cuda.import_memory(drv, "opaque-fd", fd, memory.allocation_size, memory.dedicated)
        cuda.call(drv, "cuDestroyExternalMemory", ext)
    desc = next(e[1] for e in drv.log if e[0] == "cuImportExternalMemory")
    assert desc.size == memory.allocation_size and desc.flags == real.CUDA_EXTERNAL_MEMORY_DEDICATED


@pytest.mark.parametrize("fails", [False, True])
def test_win32_handles_are_closed_by_us_after_import_either_way(drv, monkeypatch, fails):
    closed = []
    monkeypatch.setattr(cuda_driver, "close_os_handle", lambda kind, h: closed.append((kind, h)))
    if fails:
        drv.fail["cuImportExternalMemory"] = real.CUresult.CUDA_ERROR_OPERATING_SYSTEM
    with cuda.Gpu.get(drv, 0).current():
        if fails:
            with pytest.raises(cuda.CudaInteropError, match="CUDA_ERROR_OPERATING_SYSTEM"):
                cuda.import_memory(drv, "opaque-win32", 0x1234, 4096, True)
        else:
            ext = cuda.import_memory(drv, "opaque-win32", 0x1234, 4096, True)
            cuda.call(drv, "cuDestroyExternalMemory", ext)
    assert closed == [("opaque-win32", 0x1234)]
    desc = next(e[1] for e in drv.log if e[0] == "cuImportExternalMemory")
    assert desc.handle.win32.handle == 0x1234
    assert desc.type is real.CUexternalMemoryHandleType.CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32


# -- the allocations, for real on lavapipe's memory ----------------------------------------------

@pytest.mark.parametrize("allocator", ["vulkan", "vmm"])
def test_shared_memory_written_through_cuda_is_what_vulkan_reads(drv, fd_device, allocator):
    cls = cuda.VmmMemory if allocator == "vmm" else cuda.SharedMemory
    memory = cls(fd_device, 1000 * 4, 0)
    t = memory.tensor((10, 100), torch.float32)
    assert isinstance(t, CudaStandIn) and t.shape == (10, 100) and t.data_ptr() == memory.ptr
    values = torch.arange(1000, dtype=torch.float32).reshape(10, 100) * 0.5 - 3
    t.copy_(values)
    seen = read_back(fd_device, memory, 4000).view(np.float32).reshape(10, 100)
    assert np.array_equal(seen, values.numpy())
    expected = (["cuMemCreate", "cuMemAddressReserve", "cuMemMap", "cuMemSetAccess"] if allocator == "vmm"
                else ["cuImportExternalMemory", "cuExternalMemoryGetMappedBuffer"])
    assert [c for c in drv.calls() if c in expected] == expected
    del t, memory
    gc.collect()
    assert drv.leaks() == {}  # freed in the driver's order: unmap, free the range, release
    if allocator == "vmm":
        assert drv.calls()[-3:] == ["cuMemUnmap", "cuMemAddressFree", "cuMemRelease"]
    else:
        assert drv.calls()[-2:] == ["cuMemFree", "cuDestroyExternalMemory"]


def test_vmm_allocation_is_rounded_to_the_granularity_and_exported_as_an_fd(drv, fd_device):
    memory = cuda.VmmMemory(fd_device, 1000, 0)
    assert memory.size == 1 << 16
    fd, record = memory.export()
    assert type(fd) is int and record.allocation_size == memory.size and not record.dedicated
    os.close(fd)
    export = next(e for e in drv.log if e[0] == "cuMemExportToShareableHandle")
    assert export[2] is real.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    granularity = next(e for e in drv.log if e[0] == "cuMemGetAllocationGranularity")
    assert granularity[2] is real.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_RECOMMENDED


def test_stream_sync_waits_and_signals_the_shared_timeline_on_torchs_stream(drv, fd_device):
    t = cv.empty((4, 4), device="cuda")
    record = cuda.export(t, fd_device, "t")
    sync = record.semaphore
    try:
        assert record.kind == "opaque-fd" and record.offset == 0 and not record.mirrored
        for k in range(3):
            if k:
                sync.timeline.signal(2 * k)  # the renderer finished reading write k - 1
            sync.before_write(2 * k)
            sync.after_write(2 * k, 2 * k + 1)
            assert sync.timeline.value == 2 * k + 1
        ops = [(e[0][2:6], e[2][0].params.fence.value) for e in drv.log if e[0].endswith("SemaphoresAsync")]
        assert ops == [("Wait", 0), ("Sign", 1), ("Wait", 2), ("Sign", 3), ("Wait", 4), ("Sign", 5)]
        for e in drv.log:
            if e[0].endswith("SemaphoresAsync"):
                assert type(e[4]) is real.CUstream and int(e[4]) == drv.stream
    finally:
        exporters.release(record)
    assert drv.calls()[-2:] == ["cuCtxSynchronize", "cuDestroyExternalSemaphore"]
    sync.close()  # twice: nothing more
    assert drv.calls()[-1] == "cuDestroyExternalSemaphore"


def test_a_timeline_signal_that_moves_backwards_is_caught(drv, fd_device):
    t = cv.empty((4, 4), device="cuda")
    record = cuda.export(t, fd_device, "t")
    try:
        record.semaphore.signal(5)
        with pytest.raises(ArgumentError, match="never moves backwards"):
            record.semaphore.signal(3)
    finally:
        exporters.release(record)


# -- export, empty(device="cuda") and attach -----------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.uint8])
def test_empty_cuda_is_zero_copy_and_renders_like_its_twin(drv, dtype, artifacts):
    t = cv.empty((24, 40), dtype=dtype, device="cuda")
    assert isinstance(t, CudaStandIn) and t.device.type == "cuda"
    with cv.Session(window=False, size=(160, 120)) as s:
        panel = s.attach(t, "heatmap", name="x")
        assert panel.path == "zero-copy" and panel.record.kind == "opaque-fd", panel.reason
        with panel.writing():
            t.copy_((torch.randn(24, 40, generator=torch.Generator().manual_seed(5)) * 50).to(dtype))
        assert_panel_matches_twin(s.render(), panel, t, artifacts)  # the twin of a .cpu() copy


def test_a_view_with_a_storage_offset_reads_its_own_elements(drv):
    base = cv.empty((64, 64), device="cuda")
    base.copy_(torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64))
    part = base[32:]
    with cv.Session(window=False, size=(64, 64)) as s:
        panel = s.attach(part, "heatmap")
        assert panel.path == "zero-copy" and panel.record.offset == 32 * 64 * 4
        s.render()
        assert panel.view.seen_range == (2048.0, 4095.0)


def test_vmm_memory_attaches_zero_copy(drv, monkeypatch, artifacts):
    monkeypatch.setenv(cuda.ALLOCATOR_ENV, "vmm")
    t = cv.empty((50, 3), device="cuda")
    t.copy_(torch.randn(50, 3, generator=torch.Generator().manual_seed(1)))
    with cv.Session(window=False, size=(96, 96)) as s:
        panel = s.attach(t, "pointcloud", name="emb")
        assert panel.path == "zero-copy", panel.reason
        assert_panel_matches_twin(s.render(), panel, t, artifacts)
    assert "cuMemCreate" in drv.calls()


def test_other_cuda_tensors_are_mirrored_on_the_stream(drv, artifacts):
    t = stand_in(torch.randn(50, 3, generator=torch.Generator().manual_seed(2)))
    with cv.Session(window=False, size=(160, 120)) as s:
        panel = s.attach(t, "pointcloud", name="emb")
        assert panel.path == "on-device copy" and panel.record.mirrored
        assert "emb: on-device copy (" in s.status().line()
        with panel.writing():
            t.mul_(-1.0)
        assert_panel_matches_twin(s.render(), panel, t, artifacts)


def test_a_tensor_on_another_gpu_is_refused_with_the_fix(fd_device, monkeypatch):
    install(monkeypatch, CheckedDriver(fd_device, uuid=bytes(16)), fd_device)
    with cv.Session(window=False, size=(64, 64)) as s:
        with pytest.raises(cuda.DeviceMismatchError) as exc:
            s.attach(stand_in(torch.zeros(8, 3)), "pointcloud", name="emb")
    text = str(exc.value)
    assert "emb is on cuda:0" in text and fd_device.info.name in text and "CALIPER_VK_DEVICE" in text


# -- defect 7: error paths ---------------------------------------------------------------------

@pytest.mark.skipif(not CAN_COUNT, reason=NO_COUNT)
@pytest.mark.parametrize("where", ["memory", "semaphore"])
def test_no_fd_leaks_when_cuCtxPushCurrent_fails(fd_device, monkeypatch, where):
    d = install(monkeypatch, CheckedDriver(fd_device), fd_device)
    gpu = cuda.Gpu.get(d, 0)
    gc.collect()
    before = open_fds()
    d.fail["cuCtxPushCurrent"] = real.CUresult.CUDA_ERROR_INVALID_CONTEXT
    with pytest.raises(cuda.CudaInteropError, match="cuCtxPushCurrent failed: CUDA_ERROR_INVALID_CONTEXT"):
        if where == "memory":
            cuda.SharedMemory(fd_device, 4096, 0)
        else:
            cuda.StreamSync.create(fd_device, gpu, torch.device("cuda", 0), "opaque-fd")
    gc.collect()
    fd_device.wait()
    assert open_fds() == before and d.leaks() == {}


def test_a_failing_context_push_stages_the_tensor_with_the_reason(drv):
    t = stand_in(torch.randn(6, 6))
    with cv.Session(window=False, size=(64, 64)) as s:
        drv.fail["cuCtxPushCurrent"] = real.CUresult.CUDA_ERROR_INVALID_CONTEXT
        panel = s.attach(t, "heatmap", name="h")
        assert panel.path == "host staging"
        assert "cuCtxPushCurrent failed" in s.status().line()


@pytest.mark.skipif(not CAN_COUNT, reason=NO_COUNT)
@pytest.mark.parametrize("where", ["vkCreateBuffer", "vkGetSemaphoreFdKHR", "vkCreateBuffer on import"])
def test_a_vulkan_refusal_falls_back_to_staging_with_the_reason(fd_device, monkeypatch, where, artifacts):
    """The VkError is injected at the engine's Vulkan call; attach must stage, not raise."""
    d = install(monkeypatch, CheckedDriver(fd_device), fd_device,
                semaphore_fail=vk.VkErrorTooManyObjects if where == "vkGetSemaphoreFdKHR" else None)
    t = stand_in(torch.randn(12, 9, generator=torch.Generator().manual_seed(3)))
    with cv.Session(window=False, size=(96, 64)) as s:
        gc.collect()
        before = open_fds()
        create, shared_buffers = vk.vkCreateBuffer, []
        fail_at = {"vkCreateBuffer": 1, "vkCreateBuffer on import": 2}.get(where)

        def refuse_shared(dev, info, alloc):  # only buffers over shared memory (an external pNext)
            if info.pNext != vk.ffi.NULL:
                shared_buffers.append(1)
                if len(shared_buffers) == fail_at:  # 1: the exportable allocation, 2: Vulkan's import
                    raise vk.VkErrorOutOfDeviceMemory()
            return create(dev, info, alloc)

        monkeypatch.setattr(vk, "vkCreateBuffer", refuse_shared)
        panel = s.attach(t, "heatmap", name="h")
        vk.vkCreateBuffer = create
        assert panel.path == "host staging"
        line = s.status().line()
        if where == "vkGetSemaphoreFdKHR":
            assert "CUDA interop unavailable" in line
            assert "vkGetSemaphoreFdKHR failed (VkErrorTooManyObjects)" in line
        elif where == "vkCreateBuffer":
            assert "CUDA interop unavailable" in line and "vkCreateBuffer refused" in line
        else:
            assert "the driver refused the import" in line and "vkCreateBuffer refused" in line
        assert "VkError" in line
        assert_same_image(s.render(), s.canvas.reference(), artifacts)
        panel.close()
        del panel  # its record holds the mirror's shared allocation (lavapipe's memfd, CUDA's import)
        s.device.wait()
        gc.collect()
        assert open_fds() == before
    assert d.leaks() == {}


# -- negative controls: the checks catch a misspelt field, a swapped argument, a wrong struct -----

MUTATIONS = {
    "misspelt field": ("desc.offset, desc.size, desc.flags = 0, self.buffer.size, 0",
                       "desc.offset, desc.sise, desc.flags = 0, self.buffer.size, 0", AttributeError),
    "swapped arguments": ('call(drv, "cuMemMap", ptr, self.size, 0, self.handle, 0)',
                          'call(drv, "cuMemMap", ptr, self.size, self.handle, 0, 0)', ArgumentError),
    "wrong struct": ('self._issue("cuWaitExternalSemaphoresAsync", "CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS"',
                     'self._issue("cuWaitExternalSemaphoresAsync", "CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS"',
                     ArgumentError),
    "forgotten context": ("with gpu.current():  # cuCtxPushCurrent may fail: the handle is still ours",
                          "if True:  # mutated: no context pushed", ArgumentError),
}


def mutated_exporter(old: str, new: str):
    """The cuda exporter module with ``old`` replaced by ``new`` in its source (exactly once)."""
    source = inspect.getsource(cuda)
    assert source.count(old) == 1, f"the control's target vanished from cuda.py: {old!r}"
    module = types.ModuleType("caliper_vk.exporters._mutated_cuda")
    module.__package__ = "caliper_vk.exporters"
    exec(compile(source.replace(old, new), "mutated cuda.py", "exec"), module.__dict__)
    return module


def exercise(module, device):
    """What the controls run: a shared allocation, a VMM one, and a write under the protocol."""
    drv = module.driver()
    memory = module.SharedMemory(device, 4096, 0, drv)
    vmm = module.VmmMemory(device, 4096, 0, drv)
    sync = module.StreamSync.create(device, module.Gpu.get(drv, 0), torch.device("cuda", 0), "opaque-fd")
    try:
        sync.before_write(0)
        sync.after_write(0, 1)
    finally:
        sync.close()
    return memory, vmm


@pytest.mark.parametrize("control", ["unchanged", *MUTATIONS])
def test_negative_control_the_real_types_catch_a_wrong_name_order_or_struct(drv, fd_device, control):
    old, new, error = MUTATIONS.get(control, ("ALLOCATOR_ENV = ", "ALLOCATOR_ENV = ", None))
    module = mutated_exporter(old, new)
    for name in ("TimelineSemaphore", "as_cuda_tensor", "current_stream"):
        setattr(module, name, getattr(cuda, name))
    if error is None:
        exercise(module, fd_device)  # the same source, unmutated, passes every check
    else:
        with pytest.raises(error):
            exercise(module, fd_device)
    gc.collect()
