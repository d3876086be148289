"""Session(device_memory=...) caps the device memory Caliper holds, the history giving way first."""

import numpy as np
import pytest

import caliper_vk as cv
from caliper_vk.live import DeviceMemoryError


def _held(s) -> int:
    s.device.collect()
    return s.device.memory_stats["allocated_bytes"]


def test_the_history_ring_stops_growing_at_the_cap(device):
    t = cv.empty((64, 64))  # 16 kB a frame; the ring's chunks are 8 MB / 16 = 500 kB: 30 frames each

    def run(s, frames, cap=None):
        for _ in range(frames):
            t.fill_(float(s.step_count))
            assert s.step(s.step_count + 1)
            s.flush()
            assert cap is None or _held(s) <= cap

    with cv.Session(window=False, size=(160, 120), device=device, history="8MB", budget=None) as free:
        free.attach(t, "heatmap", name="x")
        run(free, 100)
        assert sum(c is not None for c in free.history.chunks) == 4  # uncapped: it grows
    with cv.Session(window=False, size=(160, 120), device=device, history="8MB", budget=None) as s:
        s.attach(t, "heatmap", name="x")
        run(s, 1)
        chunk = s.history.chunk_size
        cap = _held(s) - chunk + 2 * chunk + 1  # what the session holds without its ring, and 2 chunks
        s.device_memory = s.history.cap = cap
        run(s, 100, cap)
        assert sum(c is not None for c in s.history.chunks) == len(s.history.chunks) == 2
        assert s.history.frames[-1].step == s.step_count and len(s.history.frames) > 30  # still keeping
        assert "holds" in s.status().line() or device.info.kind == "cpu"


def test_the_history_gives_way_first_then_a_panel_over_the_cap_is_refused(device):
    a, b, c = cv.empty((64, 64)), cv.empty((32, 32)), cv.empty((32, 32))
    with cv.Session(window=False, size=(160, 120), device=device, history="8MB", budget=None) as s:
        s.attach(a, "heatmap", name="a")
        s.render()
        ring = sum(ch is not None for ch in s.history.chunks) * s.history.chunk_size
        assert ring
        s.device_memory = s.history.cap = _held(s) - 1000  # room for b only once the ring is gone
        s.attach(b, "heatmap", name="b")
        assert not any(ch is not None for ch in s.history.chunks) and _held(s) <= s.device_memory
        s.device_memory = s.history.cap = _held(s) - 1000  # no ring left to give: c cannot fit
        with pytest.raises(DeviceMemoryError, match=r"attaching c makes Caliper hold .* over device_memory="):
            s.attach(c, "heatmap", name="c")
        assert [p.name for p in s.panels] == ["a", "b"]
        assert isinstance(s.render(), np.ndarray)  # drawing goes on
        assert s.history.refused.startswith("no room for a 500 kB chunk under device_memory=")


def test_device_memory_takes_the_history_budget_strings(device):
    with cv.Session(window=False, size=(64, 64), device=device, device_memory="512MB") as s:
        assert s.device_memory == 512_000_000 and s.history.cap == 512_000_000
    with pytest.raises(ValueError, match="device_memory='lots' is not a byte budget"):
        cv.Session(window=False, size=(64, 64), device=device, device_memory="lots")
