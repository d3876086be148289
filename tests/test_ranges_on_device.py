"""Value ranges are resolved on the device in the frame that draws them: values written where
the GPU reads them after the first frame (the host copy left stale, as for a GPU tensor read in
place) are drawn over their own range, byte for byte as the twin made from a copy of them, and
the title shows the range the frame used."""

import numpy as np
import pytest

from caliper_vk import chrome
from caliper_vk.views import _exact
from caliper_vk.views import Curve, Heatmap, Histogram, Images, TextGrid
from device_written import render_written_after_first_frame
from images import assert_same_image

RNG = np.random.default_rng(25)
LATER = (RNG.normal(size=(12, 16)) * 40 - 25).astype(np.float32)  # both signs, far from (0, 1)


@pytest.mark.parametrize("value_range", ["auto", "symmetric", (-10.0, 30.0)])
def test_heatmap_attached_at_zeros_then_filled(value_range, artifacts):
    zeros = np.zeros_like(LATER)
    view = Heatmap(zeros, value_range=value_range, colormap="coolwarm")
    image, expected, twin = render_written_after_first_frame(
        view, zeros, LATER, 64, 48, lambda a: Heatmap(a, value_range=value_range, colormap="coolwarm"))
    assert_same_image(image, expected, artifacts)
    assert view.range == twin.range
    if value_range == "auto":
        assert view.range == (float(LATER.min()), float(LATER.max()))


def test_heatmap_range_that_changes_sign(artifacts):
    first = np.abs(LATER) + 1.0
    view = Heatmap(first)
    image, expected, _ = render_written_after_first_frame(view, first, -first, 50, 40, Heatmap)
    assert_same_image(image, expected, artifacts)
    assert view.range == (float(-first.max()), float(-first.min()))


@pytest.mark.parametrize("value_range", ["auto", "symmetric"])
def test_textgrid_attached_at_zeros_then_filled(value_range, artifacts):
    zeros = np.zeros((3, 4), np.float32)
    later = np.array([[-3, 0.5, 9, 2], [1, -1, 4, 4], [0, 0, 7, -8]], np.float32)
    tokens = [["a", "bb", "c", "d"]] * 3

    def make(values):
        return TextGrid(values, tokens=tokens, value_range=value_range)

    view = make(zeros)
    image, expected, twin = render_written_after_first_frame(view, zeros, later, 96, 60, make)
    assert_same_image(image, expected, artifacts)
    assert view.range == twin.range


@pytest.mark.parametrize("options", [{}, {"smoothing": 0.9}, {"smoothing": 0.8, "value_range": (-5.0, 5.0)},
                                     {"value_range": "symmetric"}])
def test_curve_attached_at_zeros_then_filled(options, artifacts):
    zeros = np.zeros(300, np.float32)
    later = (np.cumsum(RNG.normal(size=300)) - 4).astype(np.float32)
    later[40:47] = np.nan
    view = Curve(zeros, **options)
    image, expected, twin = render_written_after_first_frame(view, zeros, later, 120, 50,
                                                             lambda a: Curve(a, **options))
    assert_same_image(image, expected, artifacts)
    assert view.range == twin.range
    assert view.last_value == float(later[-1])
    assert view.legend()[0][0].startswith(f"last {chrome.number(float(later[-1]))}")


def test_scale_without_division_is_within_two_ulps_of_the_quotient():
    """The resolve pass's scale (and its twin) against float64 division: an oracle, not the twin."""
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(4000):
        lo, hi = sorted(np.float32(rng.normal(size=2) * 10.0 ** rng.integers(-25, 35)))
        if not hi > lo or not np.isfinite(float(hi) - float(lo)):
            continue
        last = int(rng.integers(1, 4097))
        got = float(_exact.range_scale(lo, hi, last))
        want = last / (float(hi) - float(lo))
        assert got > 0 and abs(got - want) <= 2 * 2.0 ** -23 * want, (lo, hi, last, got, want)
        checked += 1
    assert checked > 3000
    assert _exact.device_range(1, _exact.NO_KEY, 0, 0, 0, 255)[:2] == (0.0, 1.0)  # no finite value
    lo, hi, _ = _exact.device_range(1, *_exact.finite_keys(np.full(3, 7.0, np.float32)), 0, 0, 255)
    assert (lo, hi) == (3.5, 10.5)  # a constant widened by half its magnitude on each side


@pytest.mark.parametrize("options", [{"bins": 24}, {"bins": "auto", "value_range": "symmetric"},
                                     {"bins": 10, "value_range": (-50.0, 0.0)}])
def test_histogram_attached_at_zeros_then_filled(options, artifacts):
    zeros = np.zeros(LATER.size, np.float32)
    view = Histogram(zeros, **options)
    image, expected, twin = render_written_after_first_frame(view, zeros, LATER.reshape(-1), 90, 60,
                                                             lambda a: Histogram(a, **options))
    assert_same_image(image, expected, artifacts)
    assert view.range == twin.range
    counts, stats = twin.count()
    assert np.array_equal(view.counts, counts) and view.stats == stats
    assert view.counts.sum() + stats["below"] + stats["above"] == LATER.size


@pytest.mark.parametrize("options", [{}, {"normalize": "shared"}, {"value_range": "symmetric"},
                                     {"value_range": (-20.0, 20.0)}])
def test_images_attached_at_zeros_then_filled(options, artifacts):
    later = (RNG.normal(size=(6, 5, 7)) * np.array([1, 50, -3, 1e-3, 7, 0])[:, None, None]).astype(np.float32)
    later[0, 0, 0] = np.nan
    later[2, 1, 1] = -np.inf
    zeros = np.zeros_like(later)
    view = Images(zeros, **options)
    image, expected, twin = render_written_after_first_frame(view, zeros, later, 120, 90,
                                                             lambda a: Images(a, **options))
    assert_same_image(image, expected, artifacts)
    assert view.stats == {"nan": 1, "posinf": 0, "neginf": 1}
    if view.shared:
        assert view.range == twin.range
