"""On the emulated discrete device (caliper_vk.exporters.discrete), every ranged view (the confusion
view too) draws data written after attach byte for byte as its twin made from a ``.cpu()`` copy
taken after ``flush()``: tensors attached at zeros, then filled with values whose range moves and changes
sign each step. Where the device imports the tensor in place, a step and its frame make no
device-to-host transfer: the ranges, the smoothing and the titles come from the device."""

import numpy as np
import pytest
import torch

import caliper_vk as cv
from caliper_vk.exporters import discrete
from caliper_vk.views import Confusion, Curve, Heatmap, Histogram, Images, TextGrid
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
    # (0, 1) grown to the values on the device; the cells' text and row shares made there too
    "confusion-counts": ((6, 6), "confusion", {}, Confusion),
    "confusion-row-shares": ((6, 6), "confusion", {"normalize": "row"}, Confusion),
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


@pytest.mark.parametrize("normalize", ["none", "row"])
def test_discrete_confusion_counts_written_after_attach_colour_by_the_frames_largest(normalize, device,
                                                                                    artifacts):
    """int32 counts read in place, attached at zero: the colour range is (0, max(1, largest count))
    of the counts each frame read (or the row shares, made on the device), and the cells carry that
    frame's counts as text, as the twin from a ``.cpu()`` copy after ``flush()`` has them, with no
    device-to-host transfer (the host sees only the attach-time copy)."""
    t = discrete.empty((5, 5), torch.int32)
    rng = np.random.default_rng(25)
    importable = device.info.has("VK_EXT_external_memory_host")
    with cv.Session(window=False, size=(320, 280), budget=None) as s:
        panel = s.attach(t, "confusion", name="val", normalize=normalize)
        r = panel.view.rect
        assert panel.view.layout(r.width, r.height)["fit"] >= 3  # cells big enough for counts
        s.step(0)
        s.flush()
        assert panel.view.range == (0.0, 1.0)  # all zero: the range's floor
        for step, top in ((1, 9), (2, 700), (3, 40)):
            with panel.writing():
                counts = rng.integers(0, top, (5, 5), dtype=np.int32)
                counts[step] = 0  # a class with no examples: an empty row of shares
                t.copy_(torch.from_numpy(counts))
            with discrete.transfers() as moved:
                s.step(step)
                frame = s.flush()
            assert moved.to_host == (0 if importable else 1)
            copy = t.cpu().numpy()
            twin = Confusion(copy, normalize=normalize)
            assert twin.layout(r.width, r.height)["fit"] >= 3
            # the host's view of counts read in place is the attach-time copy: it offers no text
            assert panel.view.tokens == (None if importable else twin.tokens)
            r = panel.view.rect
            assert_same_image(region(frame, panel), twin.reference(r.width, r.height),
                              artifacts / f"confusion-{normalize}-{step}")
            top = float(max(copy.max(), 1)) if normalize == "none" else 1.0
            assert panel.view.range == (0.0, top)


@pytest.mark.parametrize("normalize", ["none", "row"])
def test_discrete_confusion_rewound_step_shows_its_own_range(normalize, artifacts):
    """Rewind redraws a kept step of in-place counts over the range, shares and text remade on the
    device from its kept bytes: as that step's frame showed it, as its twin draws it."""
    t = discrete.empty((4, 4), torch.int32)
    rng = np.random.default_rng(7)
    with cv.Session(window=False, size=(200, 160), history="1MB", budget=None) as s:
        panel = s.attach(t, "confusion", name="val", normalize=normalize)
        frames, ranges, copies = {}, {}, {}
        for step, top in ((1, 5), (2, 900), (3, 60)):
            with panel.writing():
                t.copy_(torch.from_numpy(rng.integers(0, top, (4, 4), dtype=np.int32)))
            assert s.step(step)
            frames[step] = s.flush().copy()
            ranges[step], copies[step] = panel.view.range, t.cpu().numpy()
        assert len(set(ranges.values())) == (3 if normalize == "none" else 1)
        r = panel.view.rect
        for k in (2, 1, 3):
            s.rewind(k)
            again = s.render()[r.y:r.y + r.height, r.x:r.x + r.width]
            assert_same_image(again, frames[k][r.y:r.y + r.height, r.x:r.x + r.width],
                              artifacts / f"cm-{normalize}-{k}")
            assert_same_image(again, Confusion(copies[k], normalize=normalize).reference(r.width, r.height),
                              artifacts / f"cm-twin-{normalize}-{k}")
            assert panel.view.range == ranges[k]
