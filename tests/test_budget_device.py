"""The budget counts a frame's device time on any device whose queue writes timestamps, not only
on a CPU Vulkan device: on a GPU the frame runs beside the training's kernels."""

from dataclasses import replace

import caliper_vk as cv


def _frames_timed(device) -> tuple:
    t = cv.empty((8, 8))
    with cv.Session(window=False, size=(32, 32), device=device, budget=0.5) as s:
        s.attach(t, "heatmap", name="x")
        for k in range(4):
            t.fill_(float(k))
            s.render()
        return s.canvas.profiler is not None, s.budget._executed


def test_a_gpus_frames_are_timed_and_counted(device, monkeypatch):
    monkeypatch.setattr(device, "info", replace(device.info, kind="discrete"))
    profiled, executed = _frames_timed(device)
    assert profiled and executed >= 3  # every frame's timestamps went to Budget.executed


def test_a_queue_without_timestamps_is_not_profiled(device, monkeypatch):
    monkeypatch.setattr(device, "timestamps", False)  # timestampValidBits == 0
    assert _frames_timed(device) == (False, 0)
