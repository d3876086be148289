"""GPU timestamps per pass, for benchmarks and slow-frame diagnosis."""

import numpy as np
import pytest

from caliper_vk.engine import Canvas
from caliper_vk.views import Heatmap, PointCloud


def test_profiled_frame_reports_every_pass():
    rng = np.random.default_rng(0)
    with Canvas(200, 100, cols=2) as canvas:
        canvas.add(PointCloud(rng.normal(size=(5000, 3))), col=0)
        canvas.add(Heatmap(rng.normal(size=(64, 64))), col=1)
        canvas.profile()
        canvas.render()
        marks = canvas.timings()
        assert [m for m, _ in marks] == ["clear", "pointcloud clears", "pointcloud fit", "pointcloud splat",
                                         "PointCloud reads", "heatmap stats", "Heatmap reads",
                                         "reads extra",  # the first batch's extra buffers (history)
                                         "PointCloud", "Heatmap", "readback"]
        assert all(ms >= 0 for _, ms in marks)
        # the budget's per-frame figure: the same sum, from the first and last timestamps alone
        assert canvas.gpu_ms() == pytest.approx(sum(ms for _, ms in marks), rel=1e-9, abs=1e-9)
        assert np.array_equal(canvas.pixels(), canvas.reference())  # profiling changes no pixel
        # the readback submitted again on its own (Session.flush) rewrites its timestamp after a
        # reset of its own (the validation layer fails the test otherwise: query not reset)
        canvas.submit(readback=False)
        canvas.finish()
        assert np.array_equal(canvas.read_back(), canvas.reference())
        assert np.array_equal(canvas.read_back(), canvas.reference())
        canvas.submit(readback=False)  # a frame without its readback: that mark is left out
        canvas.device.wait()
        canvas.finish()
        assert [m for m, _ in canvas.timings()][-1] == "Heatmap"
        assert canvas.gpu_ms() == pytest.approx(sum(ms for _, ms in canvas.timings()), rel=1e-9, abs=1e-9)
        canvas.profile(False)
        canvas.render()
        assert canvas.timings() == [] and canvas.gpu_ms() == 0.0
