"""A panel of hundreds of series draws their envelope and the few highest, with the rule stated
(dashboard/summary.py); the first frame drawn is the settled one even when the sidebar's readout
overflows it (its scrollbar is always there, the many-trace bands fit the same in the layout pass)."""

from __future__ import annotations

import numpy as np

import caliper_vk.dashboard.app as app
from caliper_vk.dashboard import scalars, summary
from caliper_vk.record import load_run, pyramid
from caliper_vk.record.run import Run, Series

N, COUNT = 20_000, 120  # 120 series: over summary.SUMMARY_TRACES; 20k steps: blocks of 16 per point
SPIKE = (5, 10_001, 9.0)  # series 5 (not among the highest at the end) reaches 9 at step 1000


def _run(tmp_path, spike: bool):
    steps = np.arange(N, dtype=np.int64)
    rng = np.random.default_rng(11)
    run = Run(name="many", status="complete", ended=True, progress_step=steps, progress_time=steps * 0.1)
    values = {}
    for i in range(COUNT):
        v = 1.0 + 0.01 * i + 0.002 * rng.standard_normal(N)  # the last value grows with i
        if spike and i == SPIKE[0]:
            v[SPIKE[1]] = SPIKE[2]
        key = f"grad_norm/layer{i}.weight"
        values[key] = v
        run.metrics[key] = Series(key, steps, v, np.zeros(N, bool))
    d = tmp_path / ("spike" if spike else "plain")
    d.mkdir()
    run.save(d / "run.json")
    return load_run(d / "run.json"), values


def _dashboard(run):
    return app.Dashboard([run], size=(900, 600), panels=["per parameter"], columns=1)


def test_the_first_frame_drawn_is_complete_when_the_readout_overflows(tmp_path):
    run, _ = _run(tmp_path, spike=True)
    dash = _dashboard(run)
    try:  # the readout lists 24 series of two lines each: far taller than the 600-pixel sidebar
        frames = []
        for _ in range(3):
            dash.frame(events=[])
            frames.append(dash.ui.render(copy=True))
    finally:
        dash.close()
    assert np.array_equal(frames[0], frames[1]) and np.array_equal(frames[1], frames[2])


def test_many_series_draw_their_envelope_and_the_highest_named(tmp_path, monkeypatch):
    run, values = _run(tmp_path, spike=True)
    drawn, notes = [], []
    shaded, fitted = app.implot.plot_shaded, scalars.fitted_text

    def spy_shaded(label, x, lo, hi, *a):
        drawn.append((label, np.array(x), np.array(lo), np.array(hi)))
        return shaded(label, x, lo, hi, *a)

    def spy_fitted(text, *a, **k):
        notes.append(text)
        return fitted(text, *a, **k)

    dash = _dashboard(run)
    try:
        monkeypatch.setattr(app.implot, "plot_shaded", spy_shaded)
        monkeypatch.setattr(scalars, "fitted_text", spy_fitted)
        dash.render(frames=2)
        monkeypatch.undo()
    finally:
        dash.close()
    last = {label: (x, lo, hi) for label, x, lo, hi in drawn}
    highest = [f"grad_norm/layer{i}.weight" for i in range(COUNT - 1, COUNT - 1 - summary.TOP, -1)]
    assert sorted(last) == sorted([f"all {COUNT} series", *highest])  # no other series is an item
    x, lo, hi = last[f"all {COUNT} series"]
    everything = np.stack(list(values.values()))
    b = pyramid.FANOUT  # the whole run in a few hundred pixel columns: a point per block of 16 steps
    assert len(x) == -(-N // b)
    first = np.arange(len(x)) * b
    assert np.array_equal(x, (first + np.minimum(first + b, N) - 1) * 0.5)
    want_lo = np.minimum.reduceat(everything.min(0), first)
    want_hi = np.maximum.reduceat(everything.max(0), first)
    assert np.all(lo <= want_lo) and np.all(hi >= want_hi)  # every sample of every series is inside
    exact = (lo == want_lo) & (hi == want_hi)
    assert exact.mean() > 0.9 and np.all(exact | (hi - lo < 0.01))  # widened only where under a pixel
    assert np.nanmax(hi) >= SPIKE[2]  # the spike of a series not drawn on its own
    assert summary.rule_text(COUNT, 1, summary.TOP) in notes  # the rule, under the plot


def test_a_series_not_named_still_shows_in_the_drawn_envelope(tmp_path):
    """Pixels: the spike of a series outside the highest few changes the picture (only the
    envelope can draw it)."""
    pictures = []
    for with_spike in (False, True):
        run, _ = _run(tmp_path, spike=with_spike)
        dash = _dashboard(run)
        try:
            pictures.append(dash.render(frames=2))
        finally:
            dash.close()
    assert not np.array_equal(pictures[0], pictures[1])


def test_the_highest_are_ranked_by_their_last_measured_value():
    steps = np.arange(5, dtype=np.int64)
    run = Run(name="r", status="complete", ended=True, progress_step=steps, progress_time=steps * 1.0)
    for key, v, ph in (("a", [1, 2, 3, 4, 5.0], [0, 0, 0, 0, 0]), ("b", [9, 9, 9, 9, np.nan], [0] * 5),
                       ("c", [0, 0, 0, 7, 100.0], [0, 0, 0, 0, 1]), ("d", [np.nan] * 5, [0] * 5)):
        run.metrics[key] = Series(key, steps, np.array(v), np.array(ph, bool))
    panel = type("P", (), {"keys": ["a", "b", "c", "d"]})()
    # b's last is NaN: 9 before it; c's 100 is a placeholder: 7; d has none: last
    assert summary.top_series([run], panel, 3) == [("r", "b"), ("r", "c"), ("r", "a")]
    assert summary.top_series([run], panel, 9)[-1] == ("r", "d")


def test_a_block_band_is_exact_per_block_and_leaves_zoomed_in_views_to_pixel_columns():
    n = 9000
    steps = np.arange(n, dtype=np.int64) * 2
    rng = np.random.default_rng(2)
    series = []
    for i in range(3):
        v = rng.standard_normal(n)
        v[100 * (i + 1)] = np.nan
        ph = np.zeros(n, bool)
        ph[7 + i] = True  # a placeholder is not a measurement
        series.append(Series(f"s{i}", steps, v, ph))
    assert summary.block_band(steps, series, 0.0, float(steps[-1]), 2000) is None  # 4.5 samples a column
    x, lo, hi = summary.block_band(steps, series, 0.0, float(steps[-1]), 30)  # 300 a column: blocks of 256
    b = pyramid.FANOUT ** 2
    first = np.arange(-(-n // b)) * b
    assert np.array_equal(x, (steps[first] + steps[np.minimum(first + b, n) - 1]) * 0.5)
    measured = np.stack([np.where(s.placeholder | ~np.isfinite(s.value), np.nan, s.value) for s in series])
    assert np.array_equal(lo, np.fmin.reduceat(np.nanmin(measured, 0), first))
    assert np.array_equal(hi, np.fmax.reduceat(np.nanmax(measured, 0), first))
