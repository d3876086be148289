"""The device memory Caliper holds is on the status line (on a GPU) and in `caliper doctor`."""

import re
from dataclasses import replace

import caliper_vk as cv
from caliper_vk import doctor
from caliper_vk.engine import canvas


def test_the_status_line_shows_the_device_memory_held_on_a_gpu(device, monkeypatch):
    t = cv.empty((64, 64))
    with cv.Session(window=False, size=(320, 200), device=device) as s:
        s.attach(t, "heatmap", name="x")
        s.render()
        assert "device memory" not in s.status().line()  # lavapipe: host memory, not shown
        monkeypatch.setattr(device, "info", replace(device.info, kind="discrete"))
        line = s.status().line()
        held = device.memory_stats["allocated_bytes"]
        assert held > 320 * 200 * 4  # at least the canvas
        assert f"holds {held / 1e6:.0f} MB of device memory" in line, line


def test_doctor_says_what_this_process_holds(monkeypatch):
    monkeypatch.setattr(canvas, "_default_device", None)
    assert "none yet" in doctor.held_memory()
    device = canvas.default_device()
    try:
        text = doctor.held_memory()
        mb = float(re.search(r"holds in this process: ([0-9.]+) MB", text).group(1))
        assert mb == round(device.memory_stats["allocated_bytes"] / 1e6, 1)
    finally:
        device.close()
