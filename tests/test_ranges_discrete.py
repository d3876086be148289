"""On the emulated discrete device (caliper_vk.exporters.discrete), every ranged view draws data
written after attach byte for byte as its twin made from a ``.cpu()`` copy taken after
``flush()``: tensors attached at zeros, then filled with values whose range moves and changes
sign each step. Where the device imports the tensor in place, a step and its frame make no
device-to-host transfer: the ranges, the smoothing and the titles come from the device."""

import numpy as np
import pytest
import torch

import caliper_vk as cv
from caliper_vk.exporters import discrete
from caliper_vk.views import Curve, Heatmap, Histogram, Images, TextGrid
from images import assert_same_image

CASES = {  # name: (shape, view, options, twin class)
    "heatmap-auto": ((12, 20), "heatmap", {}, Heatmap),
    "heatmap-symmetric": ((12, 20), "heatmap", {"value_range": "symmetric", "colormap": "coolwarm"}, Heatmap),
    "histogram-auto": ((600,), "histogram", {"bins": 24}, Histogram),
    "histogram-auto-bins-overlay": ((600,), "histogram", {"bins": "auto", "history": 2}, Histogram),
    "curve-auto": ((240,), "curve", {}, Curve),
    "curve-smoothed-fixed-range": ((240,), "curve", {"smoothing": 0.9, "value_range": (-30.0, 30.0)}, Curve),
    "curve-log-smoothed": ((240,), "curve", {"smoothing": 0.9, "log_y": True}, Curve),
    "textgrid-auto": ((4, 6), "textgrid", {"value_range": "auto"}, TextGrid),
    "images-per-tile": ((6, 5, 7), "images", {}, Images),
    "images-shared-symmetric": ((6, 5, 7), "images", {"normalize": "shared", "value_range": "symmetric"},
                                Images),
}


def region(frame, panel):
    r = panel.view.rect
    return frame[r.y:r.y + r.height, r.x:r.x + r.width]


def values(shape, step, rng):
    """Values whose range moves and changes sign with the step; a NaN from step 2 on."""
    a = rng.normal(size=shape).astype(np.float32) * np.float32(3.0 ** step * (-1) ** step) + np.float32(step)
    if step >= 2:
        a.reshape(-1)[step] = np.nan
    return a


@pytest.mark.parametrize("name", sorted(CASES))
def test_discrete_view_written_after_attach_matches_twin(name, device, artifacts):
    shape, kind, options, twin_class = CASES[name]
    t = discrete.empty(shape)  # attached all zero, as a panel is before the first step
    rng = np.random.default_rng(len(name))
    importable = device.info.has("VK_EXT_external_memory_host")
    with cv.Session(window=False, size=(200, 120), budget=None) as s:
        panel = s.attach(t, kind, name=name, **options)
        s.step(0)
        s.flush()
        for step in range(1, 4):
            with panel.writing():
                t.copy_(torch.from_numpy(values(shape, step, rng)))
            with discrete.transfers() as moved:
                s.step(step)
                frame = s.flush()
            assert moved.to_host == (0 if importable else 1)  # staged: the one copy of the frame
            copy = t.cpu().numpy()  # the twin's values: a snapshot taken after flush()
            twin = twin_class(copy, **options)
            if kind == "histogram" and options.get("history"):
                twin._candidates = panel.view._candidates  # the older steps the frame was offered
            r = panel.view.rect
            assert_same_image(region(frame, panel), twin.reference(r.width, r.height),
                              artifacts / f"{name}-{step}")
            if kind != "images" or panel.view.shared:
                lo, hi, _ = twin.reference_range(last=None if kind != "curve" else max(r.height - 1, 1))
                assert panel.view.range == (float(lo), float(hi))  # the title's range is the frame's
