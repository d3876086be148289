"""Min/max pyramids (record/pyramid.py): a zoomed range of a long series shows the exact min/max of
every step in each pixel column, checked against a brute-force numpy min/max per column; runs
written without pyramids (an older recorder) still open and draw the same envelope."""

from __future__ import annotations

import json

import numpy as np
import pytest

from caliper_vk.dashboard import model
from caliper_vk.record import Recorder, load_run, pyramid
from caliper_vk.record.run import Run, Series

N = 300_000  # longer than pyramid.RAW_READ: the wide views read the edges' blocks one by one


def _brute(x, y, ph, x0, x1, columns):
    """Per pixel column [x0 + j w, x0 + (j + 1) w): numpy's min and max of the finite measured
    samples whose step lies in it (the last column closed at x1), NaN where there are none."""
    w = (x1 - x0) / columns
    edges = x0 + np.arange(columns + 1) * w
    y = np.where(np.isfinite(y) & ~ph, y, np.nan)
    lo, hi = np.full(columns, np.nan), np.full(columns, np.nan)
    for j in range(columns):
        a, b = edges[j], edges[j + 1]
        inside = (x >= a) & ((x < b) if j < columns - 1 else (x <= x1))
        v = y[inside]
        v = v[np.isfinite(v)]
        if len(v):
            lo[j], hi[j] = v.min(), v.max()
    return lo, hi


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    rng = np.random.default_rng(7)
    steps = np.cumsum(rng.integers(1, 4, N)).astype(np.int64)  # irregular: a column is 1 to 3 steps wide
    y = np.cumsum(rng.standard_normal(N))
    y[[17, 50_001, 123_456]] = [np.nan, np.inf, -np.inf]
    y[200_000:200_100] = np.nan  # a gap
    y[77_777] = 1e6  # a spike one sample wide
    ph = np.zeros(N, bool)
    ph[[0, 99_999]] = True  # placeholders are not measurements: left out of the envelope
    run = Run(name="long", status="complete", ended=True, progress_step=steps, progress_time=steps * 0.01)
    run.metrics["train/loss"] = Series("train/loss", steps, y, ph)
    path = tmp_path_factory.mktemp("pyr") / "run.json"
    run.save(path)
    return path, steps, y, ph


def _views(steps):
    first, last = float(steps[0]), float(steps[-1])
    return [(first, last, 450), (first, last, 1), (1000.5, 2000.25, 300), (155_000.0, 466_000.0, 97),
            (230_000.3, 231_000.9, 700), (599_000.0, last + 50.0, 37), (150_000.0, 150_010.0, 4)]


def test_zoomed_envelopes_are_exact_per_pixel_column(long_run):
    path, steps, y, ph = long_run
    run = load_run(path)
    s = run.metrics["train/loss"]
    assert isinstance(s.pyramid, pyramid.Pyramid) and s.pyramid.nonfinite == 103  # stored, not built
    for x0, x1, columns in _views(steps):
        c, lo, hi = model.envelope_columns(s.step, s, x0, x1, columns)
        want_lo, want_hi = _brute(steps, y, ph, x0, x1, columns)
        assert np.array_equal(lo, want_lo, equal_nan=True), (x0, x1, columns)
        assert np.array_equal(hi, want_hi, equal_nan=True), (x0, x1, columns)
        # the same as the dashboard's scan of every sample (model.reduce_columns)
        ref = model.reduce_columns(steps, np.where(ph, np.nan, y), x0, x1, columns)
        assert np.array_equal(c, ref[0]) and np.array_equal(lo, ref[1], equal_nan=True)
    whole = model.envelope_columns(s.step, s, float(steps[0]), float(steps[-1]), 450)[2]
    assert np.nanmax(whole) == 1e6  # the one-sample spike is in its column at any zoom


def test_a_run_without_pyramids_opens_and_draws_the_same_envelope(long_run, tmp_path):
    path, steps, y, ph = long_run
    doc = json.loads(path.read_text())
    del doc["metrics"]["train/loss"]["pyramid"]  # as an older recorder wrote it
    old = tmp_path / "old"
    old.mkdir()
    (old / "run.json").write_text(json.dumps(doc))
    (old / doc["data"]["file"]).write_bytes((path.parent / doc["data"]["file"]).read_bytes())
    s = load_run(old / "run.json").metrics["train/loss"]
    assert s.pyramid is None and not load_run(old / "run.json").problems
    for x0, x1, columns in _views(steps)[:4]:
        _, lo, hi = model.envelope_columns(s.step, s, x0, x1, columns)  # built on first use, kept
        assert np.array_equal((lo, hi), _brute(steps, y, ph, x0, x1, columns), equal_nan=True)
    assert pyramid.of_series(s) is pyramid.of_series(s)
    assert model.measured_extremes(s) == (float(np.nanmin(np.where(ph | ~np.isfinite(y), np.nan, y))), 1e6)
    assert not model.all_finite(s)


def test_a_malformed_pyramid_is_left_out_and_said(long_run, tmp_path):
    path = long_run[0]
    doc = json.loads(path.read_text())
    doc["metrics"]["train/loss"]["pyramid"]["levels"].pop()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "run.json").write_text(json.dumps(doc))
    (bad / doc["data"]["file"]).write_bytes((path.parent / doc["data"]["file"]).read_bytes())
    run = load_run(bad / "run.json")
    assert run.metrics["train/loss"].pyramid is None
    assert any("pyramid.levels" in p and "built again" in p for p in run.problems)


def test_the_recorder_writes_the_pyramid_of_its_spooled_columns(tmp_path):
    rec = Recorder(tmp_path / "r")
    rng = np.random.default_rng(3)
    values = rng.standard_normal((9000, 2))
    values[4321, 0] = np.nan
    for step in range(9000):
        rec.log({"a": values[step, 0], "b": values[step, 1]}, step=step,
                placeholder=("a",) if step == 0 else ())
    rec.close()
    run = load_run(tmp_path / "r")
    for j, k in enumerate("ab"):
        s = run.metrics[k]
        assert s.pyramid is not None
        ph = np.zeros(9000, bool)
        ph[0] = k == "a"
        want = pyramid.of_array(values[:, j], ph)
        assert s.pyramid.nonfinite == want.nonfinite == (1 if k == "a" else 0)
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(s.pyramid.levels, want.levels,
                                                                         strict=True))


def test_the_dashboard_draws_the_exact_envelope_of_a_zoomed_range(long_run, monkeypatch):
    from imgui_bundle import imgui, implot

    import caliper_vk.dashboard.app as app

    path, steps, y, ph = long_run
    dash = app.Dashboard([load_run(path)], size=(800, 500), panels=["^Loss$"], columns=1)
    try:
        dash.render()
        begin, shaded = implot.begin_plot, implot.plot_shaded
        drawn = []

        def zoomed(*a):  # the reader zoomed in to steps 155,000..466,000
            implot.set_next_axis_limits(implot.ImAxis_.x1, 155_000.0, 466_000.0, imgui.Cond_.always)
            return begin(*a)

        def spy(label, x, lo, hi, *a):
            drawn.append((np.array(x), np.array(lo), np.array(hi)))
            return shaded(label, x, lo, hi, *a)

        monkeypatch.setattr(app.implot, "begin_plot", zoomed)
        monkeypatch.setattr(app.implot, "plot_shaded", spy)
        dash._reusable.clear()  # (a zoom around the dashboard's inputs: build the panel again)
        dash.frame(events=[])
        dash.ui.render()
        monkeypatch.undo()
    finally:
        dash.close()
    c, lo, hi = drawn[-1]
    x0, x1 = max(155_000.0, float(steps[0])), min(466_000.0, float(steps[-1]))
    assert len(c) > 100 and c[0] > x0 and c[-1] < x1
    want_lo, want_hi = _brute(steps, y, ph, x0, x1, len(c))
    assert np.array_equal(lo, want_lo, equal_nan=True) and np.array_equal(hi, want_hi, equal_nan=True)


def test_a_panel_of_many_long_traces_draws_each_as_one_band_covering_its_envelope(tmp_path, monkeypatch):
    import caliper_vk.dashboard.app as app
    from caliper_vk.dashboard.scalars import WIDE_TRACES

    n, count = 6000, WIDE_TRACES + 4
    steps = np.arange(n, dtype=np.int64)
    rng = np.random.default_rng(5)
    run = Run(name="wide", status="complete", ended=True, progress_step=steps, progress_time=steps * 0.1)
    values = {}
    for i in range(count):
        v = np.abs(1.0 + 0.1 * rng.standard_normal(n)) if i else np.full(n, 2.0)  # one flat: a zero-height band
        key = f"grad_norm/layer{i}.weight"
        values[key] = v
        run.metrics[key] = Series(key, steps, v, np.zeros(n, bool))
    run.save(tmp_path / "run.json")
    drawn, lines = [], []
    shaded, line = app.implot.plot_shaded, app.implot.plot_line

    def spy_shaded(label, x, lo, hi, *a):
        drawn.append((label, np.array(x), np.array(lo), np.array(hi)))
        return shaded(label, x, lo, hi, *a)

    def spy_line(label, *a):
        lines.append(label)
        return line(label, *a)

    dash = app.Dashboard([load_run(tmp_path / "run.json")], size=(900, 600), panels=["per parameter"],
                         columns=1)
    try:
        monkeypatch.setattr(app.implot, "plot_shaded", spy_shaded)
        monkeypatch.setattr(app.implot, "plot_line", spy_line)
        dash.render(frames=2)
        monkeypatch.undo()
    finally:
        dash.close()
    last = {label: (x, lo, hi) for label, x, lo, hi in drawn}  # the last frame's band of each trace
    assert sorted(last) == sorted(values) and not set(lines) & set(values)  # one band each, no outlines
    for key, (x, blo, bhi) in last.items():
        want_lo, want_hi = _brute(steps, values[key], np.zeros(n, bool), 0.0, float(n - 1), len(x))
        assert np.all(blo <= want_lo) and np.all(bhi >= want_hi)  # every sample's value is covered
        grown = np.maximum(want_lo - blo, bhi - want_hi)
        assert np.all((grown == 0) | (bhi - blo < 0.05))  # widened only where under a pixel tall
    flat = last["grad_norm/layer0.weight"]
    assert np.all(flat[2] - flat[1] > 0)  # the flat trace is still a visible band


def test_a_revealed_prefix_draws_and_scales_from_its_own_values_only(long_run):
    path, steps, y, ph = long_run
    run = load_run(path)
    upto = int(steps[150_000])  # the run as it stood there: its spike at 77,777 is in, later values not
    s = model.revealed(run, upto).metrics["train/loss"]
    m = len(s)
    assert m == 150_001 and s.pyramid is not None and not s.pyramid.whole  # the run's levels, not rebuilt
    measured = np.where(np.isfinite(y[:m]) & ~ph[:m], y[:m], np.nan)
    assert model.measured_extremes(s) == (float(np.nanmin(measured)), float(np.nanmax(measured)))
    assert not model.all_finite(s)  # (the prefix holds two of the infinities: counted by a scan)
    for x0, x1, columns in ((float(steps[0]), float(upto), 450), (1000.5, float(upto) - 3.5, 211)):
        _, lo, hi = model.envelope_columns(s.step, s, x0, x1, columns)
        assert np.array_equal((lo, hi), _brute(steps[:m], y[:m], ph[:m], x0, x1, columns), equal_nan=True)


def test_a_stored_pyramid_describes_only_the_column_it_was_read_with(long_run):
    path, _, y, ph = long_run
    s = load_run(path).metrics["train/loss"]
    assert pyramid.of_series(s) is s.pyramid
    s.value = -np.array(s.value)  # another column of the same length: its own pyramid, built
    p = pyramid.of_series(s)
    measured = np.where(ph | ~np.isfinite(y), np.nan, y)
    assert p is not s.pyramid and p.extremes() == (-1e6, float(-np.nanmin(measured)))
