"""Dashboard semantics: the best-so-far of a run sits on its own metric's panel whatever the
goal, memory reads from zero, definitions are on the panels, the epoch axis is on top."""

from __future__ import annotations

import numpy as np
import pytest

from caliper_vk.dashboard import app, model
from caliper_vk.record import Recorder, load_run


def _score_run(tmp_path):
    """val/loss keeps falling while the task score peaks at step 20: the chapter's reading."""
    rec = Recorder(tmp_path / "score", steps_per_epoch=10, best="val/score", best_goal="max")
    rec.define("val/score", unit="fraction", description="exact-match rate on the 200 validation strings",
               goal="max")
    rec.define("memory/rss_bytes", unit="bytes", description="process resident set (RAM), not device memory")
    for s in range(1, 51):
        rec.advance()
        rec.log({"train/loss": 1.0 / s, "memory/rss_bytes": 4.28e8 + 4e6 * (s % 2)})
        if s % 10 == 0:
            rec.log({"val/loss": 1.0 / s, "val/score": [0.5, 0.9, 0.8, 0.7, 0.6][s // 10 - 1]})
    rec.close()
    return load_run(tmp_path / "score")


def test_best_so_far_belongs_to_the_best_metrics_panel(tmp_path):
    run = _score_run(tmp_path)
    panels = model.default_panels([run])
    i = model.best_panel(panels, run)
    assert "val/score" in panels[i].keys and "val/loss" not in panels[i].keys
    marks = model.best_marks(run)
    assert (marks.best_step, marks.best_value) == (20, 0.9)
    assert marks.text.startswith("best val/score (highest) 0.9 at step 20")


def test_dashboard_draws_the_best_on_that_panel_only(tmp_path, monkeypatch):
    run = _score_run(tmp_path)
    drawn = []
    scalar, best = app.Dashboard._scalar_panel, app.Dashboard._best_marks

    def scalar_spy(self, panel, index):
        self._now = index
        scalar(self, panel, index)

    def best_spy(self, r, rgb):
        drawn.append(self._now)
        best(self, r, rgb)

    monkeypatch.setattr(app.Dashboard, "_scalar_panel", scalar_spy)
    monkeypatch.setattr(app.Dashboard, "_best_marks", best_spy)
    dash = app.Dashboard([run], size=(1000, 700), panels=["loss", "metrics"], columns=1)
    try:
        dash.render()
    finally:
        dash.close()
    want = model.best_panel(dash.panels, run)
    assert drawn and set(drawn) == {want} and dash.panels[want].title == "Task metrics"


def test_memory_reads_from_zero_and_epoch_axis_is_on_top(tmp_path, monkeypatch):
    run = _score_run(tmp_path)
    limits, axes = [], []
    real_limits, real_axis = app.implot.setup_axis_limits, app.implot.setup_axis
    monkeypatch.setattr(app.implot, "setup_axis_limits", lambda *a: (limits.append(a), real_limits(*a))[1])
    monkeypatch.setattr(app.implot, "setup_axis", lambda *a: (axes.append(a), real_axis(*a))[1])
    dash = app.Dashboard([run], size=(900, 500), panels=["memory"], columns=1)
    try:
        assert model.zero_based(dash.panels[dash.enabled.index(True)])
        dash.render()
    finally:
        dash.close()
    y = [a for a in limits if a[0] == app.implot.ImAxis_.y1]
    assert y and y[-1][1] == 0.0 and y[-1][2] == pytest.approx(4.32e8 * 1.05)
    top = [a for a in axes if a[0] == app.implot.ImAxis_.x2]
    assert top and all(a[2] & app.implot.AxisFlags_.opposite for a in top)


def test_definitions_are_on_the_panels(tmp_path):
    run = _score_run(tmp_path)
    panels = {p.title: p for p in model.default_panels([run])}
    mem = model.definitions([run], panels["Memory"])
    assert mem == ["memory/rss_bytes: process resident set (RAM), not device memory [bytes]"]
    metrics = model.definitions([run], panels["Task metrics"])
    assert "val/score: exact-match rate on the 200 validation strings [fraction]" in metrics
    assert np.all([": " in d for d in metrics])


def test_a_panel_spanning_more_than_two_decades_opens_on_a_log_axis(tmp_path):
    rec = Recorder(tmp_path / "spike", steps_per_epoch=10)
    for s in range(1, 41):
        rec.advance()
        rec.log({"train/loss": 700.0 if s == 3 else 0.05 + 1.0 / s, "act/zero_frac/relu": 0.0 if s < 5 else 0.5,
                 "lr/all": 1e-3})
    rec.close()
    run = load_run(tmp_path / "spike")
    panels = {p.title: p for p in model.default_panels([run])}
    assert model.spans_decades([run], panels["Loss"])
    assert not model.spans_decades([run], panels["Activation zero fraction"])  # zeros have no log place
    assert not model.spans_decades([run], panels["Learning rate per group"])  # one value: no span
    # the log axis is padded by a share of its decades: the spike and the floor lie inside it
    lo, hi = model.log_limits([run], panels["Loss"])
    low, high = 0.05 + 1.0 / 40, 700.0
    assert lo < low and hi > high
    assert (low / lo) == pytest.approx(hi / high) and hi / high == pytest.approx((high / low) ** 0.05)
    assert model.log_limits([run], panels["Activation zero fraction"])[0] < 0.5  # zeros left out
    limits = []
    real = app.implot.setup_axis_limits

    def spy(axis, lo, hi, *rest):
        limits.append((axis, lo, hi))
        return real(axis, lo, hi, *rest)

    dash = app.Dashboard([run], size=(800, 500), panels=["loss"], columns=1)
    try:
        loss = next(i for i, p in enumerate(dash.panels) if p.title == "Loss")
        assert loss in dash.log_y  # and the toggle still turns it off
        app.implot.setup_axis_limits = spy
        dash.render()
    finally:
        app.implot.setup_axis_limits = real
        dash.close()
    assert (app.implot.ImAxis_.y1, lo, hi) in limits


def _spiky(tmp_path, name="spiky", spike=250.0, zeros=True):
    rec = Recorder(tmp_path / name, steps_per_epoch=10)
    rng = np.random.default_rng(1)
    for s in range(1, 201):
        rec.advance()
        g = 0.0 if zeros and s % 50 == 0 else 0.5 + 0.1 * rng.random()
        rec.log({"grad_norm/fc1.weight": spike if s == 4 else g, "lr/all": 3e-3})
    rec.close()
    return load_run(tmp_path / name)


def test_outliers_do_not_set_the_scale_and_are_marked_at_the_edge(tmp_path, monkeypatch):
    run = _spiky(tmp_path)
    panels = {p.title: p for p in model.default_panels([run])}
    grad = panels["Gradient norm per parameter"]
    assert not model.spans_decades([run], grad)  # the zeros keep it linear
    lo, hi = model.robust_limits([run], grad)
    assert 0.3 < lo < 0.5 and 0.6 < hi < 0.7  # the 2% of zeros and the 250 spike lie outside
    assert model.flat_limits([run], panels["Learning rate per group"]) == pytest.approx((2.7e-3, 3.3e-3))
    assert model.robust_limits([run], panels["Learning rate per group"]) is None
    marked = []
    real = app.implot.plot_scatter

    def spy(label, x, y, *rest):
        if label.startswith("clipped"):
            marked.append((np.asarray(x).copy(), np.asarray(y).copy()))
        return real(label, x, y, *rest)

    monkeypatch.setattr(app.implot, "plot_scatter", spy)
    dash = app.Dashboard([run], size=(900, 500), panels=["Gradient norm per parameter"], columns=1)
    try:
        dash.render()
        r = model.read_cursor(run, "grad_norm/fc1.weight", "step", 4)
        assert r.value == 250.0  # the cursor still reads the raw value
    finally:
        dash.close()
    up, down = marked[-2:]  # above the scale, then below it: each at its edge
    assert up[0].tolist() == [4.0] and up[1].tolist() == [hi]
    assert down[0].tolist() == [50.0, 100.0, 150.0, 200.0] and set(down[1].tolist()) == {lo}


def test_run_selector_shows_hides_and_filters_with_stable_colours(tmp_path):
    runs = [_spiky(tmp_path, f"run{k}") for k in range(3)]
    with pytest.raises(ValueError, match="no run named nope; the runs are: run0, run1, run2"):
        app.Dashboard(runs, size=(600, 400), shown=["nope"])
    dash = app.Dashboard(runs, size=(900, 500), shown=["run1"])
    try:
        assert [r.name for r in dash.runs] == ["run1"]
        colour = dash._rgb(runs[1])
        dash.hidden.clear()
        dash.run_filter = "RUN2"
        dash._set_shown()
        assert [r.name for r in dash.runs] == ["run2"]
        dash.run_filter = ""
        dash._set_shown()
        assert [r.name for r in dash.runs] == ["run0", "run1", "run2"] and dash._rgb(runs[1]) == colour
        assert dash.render().shape == (500, 900, 4)
    finally:
        dash.close()


def test_view_without_runs_opens_on_the_first_example(capsys, monkeypatch):
    from caliper_vk import cli

    seen = {}
    real = app.Dashboard.__init__

    def spy(self, runs, **kw):
        seen["shown"], seen["runs"] = kw.get("shown"), len(runs)
        real(self, runs, **kw)

    monkeypatch.setattr(app.Dashboard, "__init__", spy)
    monkeypatch.setattr(app.Dashboard, "save_png", lambda self, out, frames=3: out)
    assert cli.main(["view", "--png", "unused.png"]) == 0
    from caliper_vk.runs import EXAMPLES

    assert seen["shown"] == ["digits_mlp"] and seen["runs"] == len(EXAMPLES) == 11


def _probe_run(tmp_path):
    rec = Recorder(tmp_path / "probe", steps_per_epoch=10)
    for s in range(1, 41):
        rec.advance()
        rec.log({"train/loss": 1.0 / s})
        if s % 10 == 0:
            a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) * s
            rec.probe("attn", a if s != 30 else a[:1], module="blocks.0.attn", example="probe string 'abc'")
            hidden = np.arange(6, dtype=np.float32).reshape(2, 3) + s
            rec.probe("hidden", hidden, module="relu1", example="val[0]")
    rec.close()
    return load_run(tmp_path / "probe")


def test_cell_index_follows_the_views_own_pixel_mapping():
    from caliper_vk.views import Heatmap, Images

    h = Heatmap(np.zeros((3, 5), np.float32))
    assert h.cell_at(0, 0, 50, 30) == (0, 0) and h.cell_at(49, 29, 50, 30) == (2, 4)
    assert h.cell_at(50, 0, 50, 30) is None
    im = Images(np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4))
    rgba, _ = im.reference_with_stats(60, 40)
    seen = {im.cell_at(x, y, 60, 40) for y in range(40) for x in range(60)} - {None}
    assert {(t, r, c) for t in range(2) for r in range(3) for c in range(4)} == seen
    for y in range(40):  # a pixel maps to a cell exactly where the twin draws a tile's colour
        for x in range(60):
            bg = tuple(rgba[y, x]) == (22, 22, 26, 255)
            assert (im.cell_at(x, y, 60, 40) is None) == bg


def test_cell_trace_reads_every_frame_with_gaps_where_there_is_no_cell(tmp_path):
    run = _probe_run(tmp_path)
    steps, values = model.cell_trace(run.arrays["attn"], (1, 2, 3))
    assert steps.tolist() == [10, 20, 30, 40]
    assert values[[0, 1, 3]].tolist() == [23 * 10, 23 * 20, 23 * 40] and np.isnan(values[2])  # step 30: 1 head
    f = run.frame_at(run.arrays["attn"], 20)
    assert model.cell_text(f, (1, 2, 3)) == ("460 at [1, 2, 3] of shape (2, 3, 4); module blocks.0.attn, "
                                             "example probe string 'abc'; frame from step 20")


def test_a_pinned_cell_is_shown_under_its_panel(tmp_path, monkeypatch):
    run = _probe_run(tmp_path)
    texts, traces = [], []
    real_text, real_scatter = app.imgui.text, app.implot.plot_scatter
    monkeypatch.setattr(app.imgui, "text", lambda t, *a: (texts.append(t), real_text(t, *a))[1])
    monkeypatch.setattr(app.implot, "plot_scatter", lambda label, x, y, *a: (
        traces.append((label, np.array(y))), real_scatter(label, x, y, *a))[1])
    dash = app.Dashboard([run], size=(1200, 800), panels=["Array hidden"], columns=1, cursor=25)
    try:
        dash.pin_cell("hidden", (1, 2))
        dash.render()
    finally:
        dash.close()
    # each part of the readout on a line of its own (cut with "…" where the column is narrow)
    assert {"25 at [1, 2] of shape (2, 3)", "module relu1, example val[0]", "frame from step 20"} <= set(texts)
    cell = [y for label, y in traces if label.startswith("cell##pin")]
    assert cell and cell[-1].tolist() == [15.0, 25.0, 35.0, 45.0]


def test_a_two_unit_hidden_state_is_drawn_as_its_raw_coordinates(monkeypatch):
    from caliper_vk.runs import example_paths

    run = load_run(next(p for p in example_paths() if p.parent.name == "sweep_width2"))
    frame = run.arrays["hidden/relu1"][-1]
    assert model.raw_pairs(frame.array) and not model.raw_pairs(np.zeros((20, 3)))
    drawn, texts = [], []
    real_scatter, real_text = app.implot.plot_scatter, app.imgui.text_disabled
    monkeypatch.setattr(app.implot, "plot_scatter", lambda label, x, y, *a: (
        drawn.append((label, np.array(x), np.array(y))), real_scatter(label, x, y, *a))[1])
    real_coloured = app.imgui.text_colored
    monkeypatch.setattr(app.imgui, "text_disabled", lambda t, *a: (texts.append(t), real_text(t, *a))[1])
    monkeypatch.setattr(app.imgui, "text_colored", lambda c, t: (texts.append(t), real_coloured(c, t))[1])
    dash = app.Dashboard([run], size=(1300, 800), panels=["Array hidden/relu1"], columns=1)
    try:
        dash.render()
        points = [d for d in drawn if d[0].startswith("points")]
        assert points and np.array_equal(points[-1][1], frame.array[:, 0])
        assert np.array_equal(points[-1][2], frame.array[:, 1])
        assert "raw coordinates of the 2 units (not a projection)" in texts
        dash.as_cells.add("hidden/relu1")  # the toggle: back to cells
        drawn.clear()
        dash.render()
        assert not [d for d in drawn if d[0].startswith("points")]
    finally:
        dash.close()


def test_reveal_shows_each_run_only_up_to_the_cursor(tmp_path):
    run = _score_run(tmp_path)  # val/score peaks at step 20; validation every 10 steps
    early = model.revealed(run, 15)
    assert early.metrics["train/loss"].step[-1] == 15 and early.metrics["val/score"].step.tolist() == [10]
    assert early.status == "running" and not early.ended and early.step_range == (1, 15)
    assert model.best_marks(early).best_step == 10  # the step-20 best is not seen yet
    assert model.revealed(run, 50).status == "complete"
    dash = app.Dashboard([run], size=(1000, 700), panels=["loss", "metrics"], reveal=True)
    try:
        assert dash.cursor == 10.0 and not dash.settings_shown  # starts at the first evaluation
        dash.render()
        assert dash.runs[0].metrics["val/score"].step.tolist() == [10]
        dash.cursor = 35.0
        dash.render()
        assert dash.runs[0].metrics["val/score"].step.tolist() == [10, 20, 30]
        assert dash.full_runs[0] is run and len(run.metrics["val/score"].step) == 5  # nothing lost
    finally:
        dash.close()


def test_many_runs_fold_their_status_so_the_cursor_readouts_stay_in_view(tmp_path, monkeypatch):
    """With more than FOLD_RUNS runs shown, each run's status and best sit under one closed node
    (the best stays marked on its panel); with fewer they are listed as before."""
    runs = [_spiky(tmp_path, f"run{k}") for k in range(app.FOLD_RUNS + 1)]
    drawn = []
    real = app.imgui.text_wrapped

    def spy(text, *rest):
        drawn.append(text)
        return real(text, *rest)

    monkeypatch.setattr(app.imgui, "text_wrapped", spy)
    for shown, folded in ((runs, True), (runs[:app.FOLD_RUNS], False)):
        drawn.clear()
        dash = app.Dashboard(shown, size=(900, 500), panels=["Gradient norm per parameter"], columns=1)
        try:
            dash.render()
        finally:
            dash.close()
        best = [t for t in drawn if model.best_marks(shown[0]).text in t]
        assert (best == []) is folded, (folded, best)


@pytest.mark.parametrize("n", [20, 21, 101, 32768])
def test_robust_percentiles_agree_with_numpy(n):
    from caliper_vk.dashboard.scales import percentiles

    v = np.random.default_rng(n).standard_normal(n) ** 3
    got = percentiles(v, (2.0, 98.0))
    assert np.allclose(got, np.percentile(v, [2.0, 98.0]), rtol=1e-12, atol=0)


def test_a_narrow_plot_gets_a_few_round_compact_ticks():
    """The confusion panel's recall/precision plot is ~160 px wide: ImPlot's own ticks of a
    million-step axis ran into each other ("200000400000..."); it gets two or three round
    values with short labels, inside the data's range."""
    from caliper_vk.dashboard.ticks import sparse_ticks

    assert sparse_ticks(99, 999_999) == [(250_000.0, "250k"), (500_000.0, "500k"), (750_000.0, "750k")]
    assert sparse_ticks(0, 1000) == [(0.0, "0"), (500.0, "500"), (1000.0, "1k")]
    assert sparse_ticks(0.0, 1.0) == [(0.0, "0"), (0.5, "0.5"), (1.0, "1")]
    assert sparse_ticks(1000, 1003)[1] == (1002.0, "1002")  # "1.002k" is no shorter
    for lo, hi in ((0, 7), (3, 3.5), (12, 2_000_000_000), (0.001, 0.0042)):
        ticks = sparse_ticks(lo, hi)
        assert 1 <= len(ticks) <= 3 and all(lo <= v <= hi and len(label) <= 5 for v, label in ticks), ticks
    assert sparse_ticks(5, 5) == [] and sparse_ticks(0, float("nan")) == []
