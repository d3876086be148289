"""The emulated discrete GPU (caliper_vk.exporters.discrete): device memory reachable only through
its import, host views that are counted snapshots, and a panel that reads the device's writes."""

import numpy as np
import pytest
import torch

import caliper_vk as cv
from caliper_vk._arrays import host_array
from caliper_vk.exporters import discrete
from caliper_vk.views import PointCloud
from images import assert_same_image


def region(frame, panel):
    r = panel.view.rect
    return frame[r.y:r.y + r.height, r.x:r.x + r.width]


def test_host_views_are_snapshots_and_each_is_counted():
    x = discrete.to_device(torch.arange(6, dtype=torch.float32).reshape(2, 3))
    assert x.device.type == "cuda" and isinstance(x * 2, discrete.DeviceTensor) and x.cuda() is x
    with discrete.transfers() as t:
        copy = x.cpu()
        array, dtype = host_array(x)
        x.add_(10)  # the device moves on; the host copies do not
        assert copy.tolist() == [[0, 1, 2], [3, 4, 5]] and array[1, 2] == 5 and dtype == "float32"
        assert x.sum().item() == 75.0
        late = x.to("cpu", non_blocking=True)
    assert type(copy) is torch.Tensor and late[0, 0] == 10
    assert [e.what for e in t.events] == [".cpu()", ".to()", ".item()", ".to()"]
    assert (t.to_host, t.blocking, t.asynchronous, t.nbytes) == (4, 3, 1, 24 + 24 + 4 + 24)
    with pytest.raises(TypeError, match=r"Use Tensor.cpu\(\)"):
        x.numpy()
    with pytest.raises(TypeError, match=r"Use Tensor.cpu\(\)"):
        np.asarray(x)


def test_torch_cuda_calls_are_counted_by_whether_the_host_waits():
    with discrete.emulate(), discrete.transfers() as t:
        ready = torch.cuda.Event()
        ready.record()
        torch.cuda.current_stream().wait_event(ready)
        torch.cuda.synchronize()
    assert (t.blocking, t.asynchronous, len(t.syncs)) == (1, 2, 3)
    assert torch.cuda.synchronize is not discrete.synchronize  # put back


def test_writes_after_attach_land_in_the_memory_the_renderer_reads(device, artifacts):
    pts = discrete.empty((300, 3))  # attached all zero, as a cloud is before its first step
    bounds = ((-3, -3, -3), (3, 3, 3))
    rng = np.random.default_rng(5)
    with cv.Session(window=False, size=(160, 120), budget=None) as s:
        panel = s.attach(pts, "pointcloud", name="emb", bounds=bounds)
        importable = device.info.has("VK_EXT_external_memory_host")
        assert panel.path == ("zero-copy" if importable else "host staging"), panel.reason
        assert "emulated discrete device" in panel.reason
        for step in range(1, 4):
            with discrete.transfers() as t, panel.writing():
                pts.copy_(torch.from_numpy(rng.normal(size=(300, 3)).astype(np.float32)))
            assert t.to_host == 0 and t.blocking == 0
            with discrete.transfers() as t:
                s.step(step)
                frame = s.flush()
            assert t.to_host == (0 if importable else 1)  # a staged device tensor crosses every frame
            twin = PointCloud(pts.cpu(), bounds=bounds).reference(panel.view.rect.width,
                                                                  panel.view.rect.height)
            assert_same_image(region(frame, panel), twin, artifacts / f"step{step}")


def test_the_environment_makes_caliper_empty_cuda_emulated_device_memory(monkeypatch):
    monkeypatch.setenv(discrete.EMULATE_ENV, "discrete")
    t = cv.empty((4, 3), device="cuda")
    assert isinstance(t, discrete.EmulatedTensor) and t.device.type == "cuda" and not t.cpu().any()
    monkeypatch.setenv(discrete.EMULATE_ENV, "nvidia")
    with pytest.raises(ValueError, match="CALIPER_VK_EMULATE='nvidia': the one emulated device is 'discrete'"):
        cv.empty((4, 3), device="cuda")
