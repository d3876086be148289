"""The curve view on the GPU equals its numpy twin, byte for byte."""

import numpy as np
import pytest

import caliper_vk as cv
from caliper_vk.engine import Canvas
from caliper_vk.views import Curve
from images import assert_view_matches_twin
from device_paths import cpu_path

pytestmark = pytest.mark.trimmed  # in the hardware scripts' trimmed suite (pyproject.toml)

RNG = np.random.default_rng(11)


def loss_like(n):
    steps = np.arange(n)
    return (2.5 * np.exp(-steps / (n / 5)) + 0.1 * RNG.normal(size=n)).astype(np.float32)


def with_gaps(n):
    a = loss_like(n)
    a[n // 3: n // 3 + n // 10] = np.nan  # a stretch with no measurement
    a[7] = np.inf
    return a


CASES = {
    "more-samples-than-columns": (loss_like(5000), {}, (200, 80)),
    "fewer-samples-than-columns": (loss_like(37), {}, (300, 90)),
    "smoothing": (loss_like(3000), {"smoothing": 0.95}, (250, 100)),
    "smoothing-few": (loss_like(60), {"smoothing": 0.8}, (240, 80)),
    "gaps-and-inf": (with_gaps(2000), {"smoothing": 0.9}, (180, 70)),
    "gaps-few": (with_gaps(90), {}, (200, 60)),
    "fixed-range-clips": (loss_like(800) * 3, {"value_range": (0, 2)}, (160, 60)),
    "one-sample": (np.array([1.5], np.float32), {}, (50, 20)),
    "two-samples": (np.array([0.0, 1.0], np.float32), {}, (64, 64)),
    "empty": (np.zeros(0, np.float32), {}, (40, 20)),
    "constant": (np.full(100, 2.0), {}, (80, 30)),
    "exact-fit": (loss_like(128), {}, (128, 50)),
    "one-pixel": (loss_like(10), {}, (1, 1)),
    # the axes: a gutter with ticks and labels from the range the frame resolved
    "axes-wide": (loss_like(900) * 1000, {"smoothing": 0.9}, (420, 200)),
    "axes-negative": (np.linspace(-0.0042, 0.0031, 300), {}, (300, 160)),
    "axes-fine-steps": (1.2345 + 1e-4 * RNG.normal(size=500), {}, (300, 120)),
    "axes-off": (loss_like(500), {"axes": False}, (300, 120)),
    "axes-tiny-values": (loss_like(400) * 1e-20, {}, (300, 140)),
    "axes-huge-values": (loss_like(400) * -3e25, {}, (300, 140)),
    "axes-offset-too-fine": (1e6 + loss_like(400) * 0.1, {}, (300, 140)),
    "axes-x-scientific": (loss_like(300_000), {}, (200, 100)),
    # log y: the log2 of each value (exact, + - * only); values <= 0 not drawn, counted
    "log-y": (np.abs(loss_like(2000)) + 2e-4, {"log_y": True, "smoothing": 0.95}, (360, 180)),
    "log-y-few": (np.geomspace(3.0, 2e-4, 40), {"log_y": True}, (300, 150)),
    "log-y-nonpositive": (loss_like(1200) - 0.5, {"log_y": True, "smoothing": 0.9}, (300, 150)),
    "log-y-fixed": (with_gaps(800) ** 2, {"log_y": True, "value_range": (1e-3, 10.0)}, (300, 150)),
    "log-y-narrow": (np.linspace(1.2, 1.7, 300), {"log_y": True}, (300, 200)),
    # 64+ samples a column: a workgroup reduces each column (curve_columns.comp), gaps counted
    "column-groups-gaps": (with_gaps(40_000), {"smoothing": 0.9}, (200, 90)),
    # the EMA's scan over many tiles (70,000 samples: 69 tiles of 1,024)
    "scan-many-chunks": (loss_like(70_000), {"smoothing": 0.999}, (200, 100)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_curve_matches_twin(name, artifacts):
    data, options, (w, h) = CASES[name]
    assert_view_matches_twin(Curve(data, **options), w, h, artifacts)


def test_band_keeps_every_spike():
    data = np.zeros(100_000, np.float32)
    data[54_321] = 10.0  # one spike among 500 samples per column
    view = Curve(data)
    with Canvas(200, 50) as canvas:
        canvas.add(view)
        img = canvas.render()
    assert (img[0] != (22, 22, 26, 255)).any(axis=1).sum() >= 1  # the top row still shows it


def test_missing_values_are_counted_and_left_blank():
    data = with_gaps(2000)
    view = Curve(data)
    with Canvas(200, 40) as canvas:
        canvas.add(view)
        img = canvas.render()
    assert view.stats == {"nan": int(np.isnan(data).sum()), "inf": 1}
    gap_columns = range(200 * (2000 // 3 + 1) // 2000 + 1, 200 * (2000 // 3 + 200) // 2000 - 1)
    assert all((img[:, c] == (22, 22, 26, 255)).all() for c in gap_columns)


def test_attached_loss_history_is_live():
    t = cv.empty((500,))
    with cv.Session(window=False, size=(200, 100)) as s:
        panel = s.attach(t, "curve", smoothing=0.9, name="loss")
        assert panel.path == cpu_path()
        with panel.writing():
            t.copy_(__import__("torch").from_numpy(loss_like(500)))
        img = s.render()
        assert np.array_equal(img, s.canvas.reference())


def test_bad_smoothing_is_clear():
    with pytest.raises(ValueError, match="smoothing must be in"):
        Curve(smoothing=1.5)


def test_the_ema_is_debiased_as_adams_moments_are():
    from caliper_vk.views import _exact
    from caliper_vk.views.curve import ema32

    x = with_gaps(400).astype(np.float64)
    alpha = 0.95
    got = ema32(x, alpha).astype(np.float64)
    m, t, want = 0.0, 0, np.full(x.shape, np.nan)
    for i in np.flatnonzero(np.isfinite(x)):
        m, t = alpha * m + (1 - alpha) * x[i], t + 1
        want[i] = m / (1 - alpha ** t)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6, equal_nan=True)  # float32 near 0
    assert got[0] == pytest.approx(x[0], rel=1e-6)  # starts at the first sample, not at 0 or above
    falling = 10.0 * np.exp(-np.arange(300) / 20.0)  # a loss falling from 10: the EMA follows it
    assert ema32(falling, 0.9)[-1] < 2 * falling[-1]
    d = np.float32(1.0) - np.float32(0.9) ** np.arange(1, 200, dtype=np.float32)
    for v in [*d.tolist(), 6e-8, 0.5, 1.0]:
        r = float(_exact.recip_unit(v))
        assert abs(r * float(np.float32(v)) - 1.0) < 3e-7
    many = _exact.recip_unit(d)  # elementwise, the same bits as one at a time
    one_by_one = np.array([_exact.recip_unit(v) for v in d], np.float32)
    assert np.array_equal(many.view(np.uint32), one_by_one.view(np.uint32))


@pytest.mark.parametrize("n, options", [
    (1024 * 1024 + 2500, {"smoothing": 0.999}),  # 1,027 tiles: the carries' scan takes two segments
    (5000, {"smoothing": 0.9, "log_y": True}),
])
def test_the_smoothed_trace_is_the_twins_bit_for_bit(n, options, monkeypatch):
    """curve_smooth.comp's output equals ema32's bits, NaN gaps and all (the images compare rows,
    which can hide a last-bit difference): the tiles, the lanes' Hillis-Steele scan and the
    carries build the twin's combination tree."""
    from caliper_vk.views._base import ViewBase
    from caliper_vk.views.curve import ema32

    real = ViewBase._buffer
    monkeypatch.setattr(ViewBase, "_buffer", lambda self, name, nbytes, host_visible=True:
                        real(self, name, nbytes, True if name == "smooth" else host_visible))
    x = np.abs(with_gaps(n)) + 1e-3
    x[n - 700:n - 600] = np.nan  # a gap across a tile's lanes near the end
    view = Curve(x, **options)
    with Canvas(300, 120) as canvas:
        canvas.add(view)
        canvas.render()
        got = view._buffers["smooth"].view(np.uint32, n).copy()
    want = ema32(x, options["smoothing"], options.get("log_y", False)).view(np.uint32)
    assert np.array_equal(got, want), np.flatnonzero(got != want)[:10]
