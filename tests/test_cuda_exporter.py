"""CUDA exporter: what runs without a GPU against a fake driver (handle types, fd ownership,
the UUID refusal, the semaphore sequence on a stream), and the hardware tests (skipped
without CUDA) that ci/linux-cuda and ci/windows run: zero-copy and mirror renders, the
protocol against a racing CUDA producer (and its negative control), 1,000 attach/detach
cycles without an fd leak."""

import os
import sys
from types import SimpleNamespace

import pytest
import torch

from caliper_vk.exporters import cuda

HAS_CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (runs in ci/linux-cuda, ci/windows)")


class Struct:
    """A cuda-python struct stand-in: any attribute path can be set."""

    def __getattr__(self, name):
        value = Struct()
        setattr(self, name, value)
        return value


def fake_driver(log, results=None):
    results = results or {}
    enum = SimpleNamespace
    drv = SimpleNamespace(
        CUexternalMemoryHandleType=enum(CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD=1,
                                        CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32=2),
        CUexternalSemaphoreHandleType=enum(CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD=9,
                                           CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_WIN32=10),
        CUDA_EXTERNAL_MEMORY_DEDICATED=1, CUstream=int,
        CUDA_EXTERNAL_MEMORY_HANDLE_DESC=Struct, CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC=Struct,
        CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS=Struct, CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS=Struct)

    def fn(name):
        def f(*args):
            log.append((name, *args))
            return results.get(name, (0, f"{name}-result"))
        return f

    for name in ("cuImportExternalMemory", "cuImportExternalSemaphore", "cuCtxPushCurrent",
                 "cuCtxPopCurrent", "cuCtxSynchronize", "cuDestroyExternalSemaphore",
                 "cuWaitExternalSemaphoresAsync", "cuSignalExternalSemaphoresAsync"):
        setattr(drv, name, fn(name))
    return drv


def is_open(fd):
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_handle_types_per_platform():
    drv = fake_driver([])
    assert cuda.handle_types(drv, "opaque-fd") == (1, 9)
    assert cuda.handle_types(drv, "opaque-win32") == (2, 10)
    with pytest.raises(ValueError):
        cuda.handle_types(drv, "metal-buffer")


@pytest.mark.parametrize("importer", [cuda.import_memory, cuda.import_semaphore])
def test_an_fd_is_cudas_after_a_successful_import_and_closed_after_a_failed_one(importer):
    log = []
    args = ((4096, True) if importer is cuda.import_memory else ())
    r, w = os.pipe()
    ok = fake_driver(log)
    assert importer(ok, "opaque-fd", r, *args).endswith("-result")
    assert is_open(r)  # the (fake) driver owns it now: we must not close it
    desc = log[0][1]
    assert desc.handle.fd == r and desc.type in (1, 9)
    os.close(r)
    name = "cuImportExternalMemory" if importer is cuda.import_memory else "cuImportExternalSemaphore"
    bad_result = type("Err", (), {"__int__": lambda self: 1, "name": "CUDA_ERROR_INVALID_VALUE"})()
    bad = fake_driver(log, {name: (bad_result, None)})
    with pytest.raises(cuda.CudaInteropError, match=f"{name} failed: CUDA_ERROR_INVALID_VALUE"):
        importer(bad, "opaque-fd", w, *args)
    assert not is_open(w)  # still ours after the failure: closed


@pytest.mark.parametrize("fails", [False, True])
def test_win32_handles_are_closed_by_us_after_import_either_way(monkeypatch, fails):
    closed = []
    monkeypatch.setattr(cuda, "close_os_handle", lambda kind, h: closed.append((kind, h)))
    err = type("Err", (), {"__int__": lambda self: 1, "name": "CUDA_ERROR_OPERATING_SYSTEM"})()
    drv = fake_driver([], {"cuImportExternalMemory": (err, None)} if fails else {})
    if fails:
        with pytest.raises(cuda.CudaInteropError):
            cuda.import_memory(drv, "opaque-win32", 0x1234, 4096, True)
    else:
        cuda.import_memory(drv, "opaque-win32", 0x1234, 4096, True)
    assert closed == [("opaque-win32", 0x1234)]


def test_a_tensor_on_another_gpu_is_refused_with_the_fix():
    info = SimpleNamespace(name="NVIDIA RTX A", device_uuid=bytes(range(16)))
    cuda.check_same_gpu(info, bytes(range(16)), 0, "emb")  # same GPU: fine
    with pytest.raises(cuda.DeviceMismatchError) as exc:
        cuda.check_same_gpu(info, bytes(16), 1, "emb")
    text = str(exc.value)
    assert "emb is on cuda:1" in text and "NVIDIA RTX A" in text
    assert "CALIPER_VK_DEVICE" in text and "only be shared on one GPU" in text


def test_missing_cuda_python_names_the_install(monkeypatch):
    monkeypatch.setattr(cuda, "_driver", None)
    for mod in ("cuda", "cuda.bindings", "cuda.bindings.driver", "cuda.cuda"):
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(cuda.CudaInteropError, match="pip install cuda-python"):
        cuda.driver()


class FakeGpu:
    def __init__(self, drv):
        self.drv = drv

    def current(self):
        import contextlib

        return contextlib.nullcontext()


class FakeTimeline:
    closed = 0

    def close(self):
        self.closed += 1


def sync_with_log(mirror=None):
    log = []
    gpu = FakeGpu(fake_driver(log))
    sync = cuda.StreamSync(FakeTimeline(), "ext-sem", gpu, lambda: 77, mirror)
    return sync, log


def calls(log):
    out = []
    for entry in log:
        if entry[0].endswith("SemaphoresAsync"):
            name, sems, params, count, stream = entry
            assert sems == ["ext-sem"] and count == 1 and stream == 77  # torch's current stream
            out.append((name.replace("cu", "").replace("ExternalSemaphoresAsync", ""),
                        params[0].params.fence.value))
        else:
            out.append((entry[0],))
    return out


def test_zero_copy_protocol_sequence_on_the_stream():
    sync, log = sync_with_log()
    for k in range(3):  # producer write k, renderer read k
        sync.before_write(2 * k)
        sync.after_write(2 * k, 2 * k + 1)
    assert calls(log) == [("Wait", 0), ("Signal", 1), ("Wait", 2), ("Signal", 3), ("Wait", 4),
                          ("Signal", 5)]


def test_mirror_copies_after_the_read_and_before_the_signal():
    order = []

    class Copy:
        def copy_(self, source):
            order.append(("copy", source))

    sync, log = sync_with_log(mirror=("user-tensor", Copy()))
    sync.before_write(2)  # the producer's own tensor: nothing to wait for
    assert log == []
    sync.after_write(2, 3)
    assert calls(log) == [("Wait", 2), ("Signal", 3)]
    assert order == [("copy", "user-tensor")]


def test_close_waits_for_queued_work_then_destroys_once():
    sync, log = sync_with_log()
    timeline = sync.timeline
    sync.close()
    sync.close()
    assert [e[0] for e in log] == ["cuCtxSynchronize", "cuDestroyExternalSemaphore"]
    assert timeline.closed == 1


def test_descriptors_fit_the_real_cuda_bindings():
    drv = pytest.importorskip("cuda.bindings.driver", reason="cuda-python is not installed")
    log = []
    real = SimpleNamespace(**{k: getattr(drv, k) for k in dir(drv) if k.startswith(("CU", "CUDA"))})
    real.cuImportExternalMemory = lambda d: (log.append(d), (drv.CUresult.CUDA_SUCCESS, "m"))[1]
    real.cuImportExternalSemaphore = lambda d: (log.append(d), (drv.CUresult.CUDA_SUCCESS, "s"))[1]
    r, w = os.pipe()
    assert cuda.import_memory(real, "opaque-fd", r, 1 << 20, True) == "m"
    assert cuda.import_semaphore(real, "opaque-fd", w) == "s"
    mem, sem = log
    assert mem.handle.fd == r and mem.size == 1 << 20 and mem.flags == drv.CUDA_EXTERNAL_MEMORY_DEDICATED
    assert sem.type == drv.CUexternalSemaphoreHandleType.CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD
    params = drv.CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS()
    params.params.fence.value = 2**40 + 1
    assert params.params.fence.value == 2**40 + 1
    os.close(r)
    os.close(w)


# -- on hardware ---------------------------------------------------------------------------------

def frames_seen(sync: bool, frames: int, stop_at_first_tear: bool = False):
    """A CUDA producer (fill kernels, row block by row block) racing the renderer."""
    import caliper_vk as cv

    t = cv.empty((512, 1024), device="cuda")
    seen = []
    with cv.Session(window=False, size=(64, 64), sync=sync) as s:
        panel = s.attach(t, "heatmap", name="gen")
        assert panel.path == "zero-copy", panel.reason
        last = s.frames
        for gen in range(1, 100 * frames):
            with panel.writing():
                for row in range(0, 512, 32):
                    t[row:row + 32].fill_(float(gen))
            s.step()
            if s.frames != last:
                last = s.frames
                seen.append(panel.view.seen_range)
                if len(seen) >= frames or (stop_at_first_tear and seen[-1][0] != seen[-1][1]):
                    break
        s.flush()
    return seen


@needs_cuda
def test_zero_copy_cuda_write_renders_like_the_same_values_from_the_host(artifacts):
    import caliper_vk as cv
    from images import assert_same_image

    t = cv.empty((64, 96), device="cuda")
    with cv.Session(window=False, size=(160, 120)) as s:
        panel = s.attach(t, "heatmap", name="x")
        assert panel.path == "zero-copy" and panel.record.kind in ("opaque-fd", "opaque-win32")
        with panel.writing():
            t.copy_(torch.randn(64, 96, device="cuda") * 3)
        gpu_image = s.render()
        host = t.cpu()
    with cv.Session(window=False, size=(160, 120)) as s:
        s.attach(host, "heatmap", name="x")
        host_image = s.render()
    assert_same_image(gpu_image[:-20], host_image[:-20], artifacts)  # all but the status line


@needs_cuda
def test_other_cuda_tensors_are_mirrored_on_the_device(artifacts):
    import caliper_vk as cv
    from images import assert_same_image

    t = torch.randn(50, 3, device="cuda")
    with cv.Session(window=False, size=(160, 120)) as s:
        panel = s.attach(t, "pointcloud", name="emb")
        assert panel.path == "on-device copy" and panel.record.mirrored
        assert "emb: on-device copy (" in s.status().line()
        first = s.render()
        with panel.writing():
            t.mul_(-1.0)
        second = s.render()
        host = t.cpu()
    assert not (first == second).all()
    with cv.Session(window=False, size=(160, 120)) as s:
        s.attach(host, "pointcloud", name="emb")
        assert_same_image(second[:-20], s.render()[:-20], artifacts)


@needs_cuda
def test_no_torn_frames_with_the_semaphore_protocol():
    seen = frames_seen(sync=True, frames=500)
    torn = [r for r in seen if r[0] != r[1]]
    assert len(seen) >= 500 and torn == [], f"{len(torn)} torn frames, first {torn[:3]}"


@needs_cuda
def test_negative_control_tears_without_the_protocol():
    seen = frames_seen(sync=False, frames=2000, stop_at_first_tear=True)
    if not any(r[0] != r[1] for r in seen):
        pytest.fail(f"no torn frame in {len(seen)} frames without the protocol: the test cannot tell "
                    "the protocol works")


@needs_cuda
def test_a_renderer_on_another_device_refuses_the_tensor():
    import caliper_vk as cv
    from caliper_vk.engine import Device, Instance

    others = [d for d in Instance(validation=False).physical_devices() if d.vendor_id != 0x10DE]
    if not others:
        pytest.skip("no non-NVIDIA Vulkan device (e.g. lavapipe) to stand for another GPU")
    with Device(choice=str(others[0].index)) as dev, cv.Session(window=False, size=(64, 64), device=dev) as s:
        with pytest.raises(cuda.DeviceMismatchError, match="only be shared on one GPU"):
            s.attach(torch.zeros(8, 3, device="cuda"), "pointcloud", name="emb")


@needs_cuda
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts fds through /proc/self/fd")
def test_no_fd_leak_over_1000_attach_detach_cycles():
    import gc

    import caliper_vk as cv

    t = cv.empty((256, 3), device="cuda")
    other = torch.randn(256, 3, device="cuda")
    with cv.Session(window=False, size=(64, 64)) as s:
        s.attach(t, "pointcloud").close()  # first-use allocations out of the count
        s.device.wait()
        gc.collect()
        before = len(os.listdir("/proc/self/fd"))
        for i in range(1000):
            panel = s.attach(t if i % 2 else other, "pointcloud")
            s.step()
            panel.close()
        s.device.wait()
        gc.collect()
        assert len(os.listdir("/proc/self/fd")) == before
