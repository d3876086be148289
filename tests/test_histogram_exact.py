"""The histogram view on the GPU equals its numpy twin, byte for byte, counts included."""

import math

import numpy as np
import pytest

import caliper_vk as cv
from caliper_vk.engine import Canvas
from caliper_vk.views import Histogram
from caliper_vk.views.histogram import auto_bins
from images import assert_same_image, assert_view_matches_twin
from device_paths import cpu_path

pytestmark = pytest.mark.trimmed  # in the hardware scripts' trimmed suite (pyproject.toml)

RNG = np.random.default_rng(7)


def specials(n):
    a = RNG.normal(size=n).astype(np.float32)
    a[::11] = np.nan
    a[3::17] = np.inf
    a[5::19] = -np.inf
    a[7::23] = np.float32(1e-41)
    return a


CASES = {
    "auto-64": (RNG.normal(size=5000), {}, (200, 100)),
    "fixed-range-counts-outside": (RNG.normal(size=5000) * 3, {"value_range": (-1, 1), "bins": 12},
                                   (120, 80)),
    "symmetric": (RNG.normal(size=3000) + 1, {"value_range": "symmetric", "bins": 30}, (90, 60)),
    "nan-inf-subnormal": (specials(4000), {"bins": 20}, (100, 50)),
    "one-bin": (RNG.random(100), {"bins": 1}, (20, 20)),
    "more-bins-than-pixels": (RNG.normal(size=20000), {"bins": 1000}, (150, 40)),
    "uint8": (RNG.integers(0, 256, 3000, dtype=np.uint8), {"bins": 16}, (64, 64)),
    "constant": (np.full(50, 3.0), {}, (40, 30)),
    "huge-values": (np.array([3e38, -3e38, 0, 1], np.float32), {"bins": 8}, (32, 16)),
    "2-d-input": (RNG.normal(size=(40, 50)), {"bins": 25}, (100, 50)),
    "empty": (np.zeros(0, np.float32), {}, (30, 20)),
    "one-pixel": (RNG.normal(size=10), {}, (1, 1)),
    "auto-bins": (RNG.normal(size=5000), {"bins": "auto"}, (200, 100)),
    "auto-bins-constant": (np.full(50, 3.0), {"bins": "auto"}, (40, 30)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_histogram_matches_twin(name, artifacts):
    data, options, (w, h) = CASES[name]
    assert_view_matches_twin(Histogram(data, **options), w, h, artifacts)


def test_counts_equal_numpy_and_nothing_is_dropped():
    data = RNG.normal(size=10_000).astype(np.float32) * 2
    view = Histogram(data, bins=12, value_range=(-3, 3))
    with Canvas(60, 30) as canvas:
        canvas.add(view)
        canvas.render()
    want, _ = np.histogram(data, bins=12, range=(-3, 3))
    assert np.abs(view.counts.astype(int) - want).sum() <= 2  # float32 vs float64 bin edges
    outside = view.stats["below"] + view.stats["above"]
    assert view.counts.sum() + outside == data.size
    assert outside == int(((data < -3) | (data > 3)).sum())


def test_history_overlays_older_steps_exactly(artifacts):
    view = Histogram(RNG.normal(size=2000), bins=20, value_range=(-4, 4), history=3)
    with Canvas(120, 80) as canvas:
        canvas.add(view)
        for step in range(5):
            view.set_data(RNG.normal(size=2000) * (1 + step * 0.3))
            got = canvas.render()
            assert_same_image(got, canvas.reference(), artifacts / f"step{step}")
        assert len(view._frame_history) == 3
        older = {tuple(c) for c in got.reshape(-1, 4)}
        assert len(older) > 4  # bars, background and fading edges


@pytest.mark.parametrize("size", [(120, 80), (40, 6), (7, 3)])
def test_offset_layout_stacks_older_steps_exactly(size, artifacts):
    view = Histogram(RNG.normal(size=2000), bins=20, value_range=(-4, 4), history=4, layout="offset")
    with Canvas(*size) as canvas:
        canvas.add(view)
        for step in range(6):
            view.set_data(RNG.normal(size=2000) * (1 + step * 0.3) + step * 0.2)
            got = canvas.render()
            assert_same_image(got, canvas.reference(), artifacts / f"step{step}")
    if size == (120, 80):
        assert view.offset_px(80, 4) == 10
        baseline = got[80 - 1 - 10 * 4]  # the farthest step's baseline row: filled, faint
        assert len({tuple(c) for c in baseline}) >= 2
        assert "display offset" in "".join(i[0] for i in view.legend() if isinstance(i, tuple))


@pytest.mark.parametrize("n, want", [(0, 1), (1, 1), (2, 3), (8, 4), (100, 10), (1000, 20),
                                     (5000, 35), (10**6, 200), (10**9, 2000), (10**12, 4096)])
def test_auto_bins_rule(n, want):
    """max(Sturges, Rice) of the element count: ceil(log2 n) + 1 against ceil(2 n^(1/3))."""
    assert auto_bins(n) == want
    if n >= 2:
        assert want == min(max(math.ceil(math.log2(n)) + 1, math.ceil(2 * n ** (1 / 3) - 1e-9)), 4096)


def test_auto_bins_come_from_the_count_and_stay():
    view = Histogram(RNG.normal(size=5000), bins="auto", value_range=(-4, 4))
    assert view.bins == 35
    view.set_data(RNG.normal(size=5000) * 9)  # other values, the same count: the same bins
    assert view.bins == 35
    view.set_data(RNG.normal(size=1000))  # another count: its own bins
    assert view.bins == 20


def test_live_auto_bins_are_known_at_attach():
    t = cv.empty((3000,))
    t.zero_()
    with cv.Session(window=False, size=(160, 120)) as s:
        panel = s.attach(t, "histogram", bins="auto", history=2, layout="offset")
        s.render()
        assert panel.view.bins == auto_bins(3000) == 29
        with panel.writing():
            t.normal_()
        frame = s.render()
        assert panel.view.bins == 29
        assert np.array_equal(frame, s.canvas.reference())


def test_attached_tensor_histogram_is_live():
    t = cv.empty((4000,))
    t.normal_()
    with cv.Session(window=False, size=(160, 120)) as s:
        panel = s.attach(t, "histogram", bins=32, value_range=(-4, 4))
        assert panel.path == cpu_path()
        s.render()
        first = panel.view.counts.copy()
        with panel.writing():
            t.mul_(0.5)
        s.render()
        assert not np.array_equal(first, panel.view.counts)
        assert panel.view.counts.sum() + panel.view.stats["below"] + panel.view.stats["above"] == 4000


def test_bad_options_are_clear():
    with pytest.raises(ValueError, match=r"bins must be an integer in 1\.\.4096"):
        Histogram(bins=0)
    with pytest.raises(ValueError, match=r"history must be an integer in 0\.\.16"):
        Histogram(history=99)
    with pytest.raises(ValueError, match="layout must be 'overlay' or 'offset'"):
        Histogram(layout="ridge")
    with pytest.raises(ValueError, match="or 'auto'"):
        Histogram(bins="fd")
    with pytest.raises(ValueError, match="value_range"):
        Histogram(value_range="wide")


def test_redrawing_the_same_step_does_not_age_the_overlay():
    t = cv.empty((3000,))
    t.normal_()
    with cv.Session(window=False, size=(120, 80), budget=None) as s:  # every step draws
        panel = s.attach(t, "histogram", bins=16, value_range=(-4, 4), history=3)
        for step in range(3):
            with panel.writing():
                t.mul_(1.2)
            s.step(step)
            s.flush()
        before = panel.view._frame_history.copy()
        s.render()
        s.render()  # redraws of step 2: the overlay still shows steps 1 and 0
        assert np.array_equal(panel.view._frame_history, before)
        assert len(before) == 2


def test_history_overlays_only_steps_on_the_current_bin_grid(artifacts):
    """An auto range moves with the data: counts binned over an older range are not comparable
    bin for bin, so they leave the overlay and the title bar says how many were left out."""
    view = Histogram(RNG.normal(size=2000), bins=20, history=3)  # value_range="auto"
    with Canvas(120, 80) as canvas:
        canvas.add(view)
        data = np.clip(RNG.normal(size=2000), -2, 2)
        for step in range(3):  # the same range every step: the overlay grows
            view.set_data(np.where(np.arange(2000) == step, 0.5, data))
            canvas.render()
        assert len(view._frame_history) == 2 and view.history_note == ""
        view.set_data(data * 3)  # the auto range triples: the older steps were on another grid
        assert_same_image(canvas.render(), canvas.reference(), artifacts / "moved")
        assert len(view._frame_history) == 0
        assert view.history_note.startswith("3 older steps not overlaid")
        assert view.legend()[0][0] == view.history_note
        view.set_data(data * 3 + 0.0)  # same grid again: the overlay restarts from here
        canvas.render()
        assert len(view._frame_history) == 1 and view.history_note.startswith("2 older steps not")
