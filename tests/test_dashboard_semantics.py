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
    dash = app.Dashboard([run], size=(800, 500), panels=["loss"], columns=1)
    try:
        loss = next(i for i, p in enumerate(dash.panels) if p.title == "Loss")
        assert loss in dash.log_y  # and the toggle still turns it off
    finally:
        dash.close()
