"""Rewind survives every panel kind (a view that draws a host transform of its input: a
row-normalised confusion matrix), and a run written by save_history reads with its steps."""

import numpy as np
import torch

import caliper_vk
from caliper_vk.dashboard import app, model
from caliper_vk.live import Session
from caliper_vk.record import load_run
from images import assert_same_image
from test_rewind import drive, region


def test_a_row_normalised_confusion_keeps_rewind_on_for_every_panel(artifacts, tmp_path):
    counts = torch.zeros(5, 5)  # counts the view reads on the host: it draws their row shares
    pts = caliper_vk.empty((40, 3))
    with Session(window=False, size=(480, 200), history="1MB", budget=None) as s:
        panels = [s.attach(counts, "confusion", normalize="row", name="cm"),
                  s.attach(pts, "pointcloud", name="cloud")]
        frames, values = drive(s, range(1, 6), [counts, pts], panels)
        assert s.history.refused == "" and s.history.steps() == [1, 2, 3, 4, 5]
        assert s.status().history.startswith("history: steps 1–5")
        for k in (2, 5, 1):
            s.rewind(k)
            again = s.render()
            for p in panels:
                assert_same_image(region(again, p), region(frames[k], p), artifacts / f"{p.name}-{k}")
        s.live()
        out = s.save_history(tmp_path / "run")
    np.testing.assert_array_equal(load_run(out).arrays["live/cm"][2].array, values[3][0].numpy())


def test_a_save_history_run_reads_with_its_steps_in_the_dashboard(tmp_path, monkeypatch):
    pts = caliper_vk.empty((30, 3))
    with Session(window=False, size=(200, 120), history="1MB", budget=None) as s:
        p = s.attach(pts, "pointcloud", name="cloud")
        drive(s, range(10, 60, 10), [pts], [p])
        out = s.save_history(tmp_path / "run")
    run = load_run(out)
    assert run.progress_step.tolist() == [10, 20, 30, 40, 50] and run.step_range == (10, 50)
    frame, text = model.frame_reading(run, run.arrays["live/cloud"], "step", 35)
    assert frame.step == 30 and "30" in text
    texts = []
    real = app.imgui.text_colored
    monkeypatch.setattr(app.imgui, "text_colored", lambda c, t: (texts.append(t), real(c, t))[1])
    for name in ("text", "text_disabled"):
        r = getattr(app.imgui, name)
        monkeypatch.setattr(app.imgui, name, lambda t, *a, r=r: (texts.append(t), r(t, *a))[1])
    dash = app.Dashboard([run], size=(800, 500), panels=["*"])
    try:
        dash.render()
    finally:
        dash.close()
    assert dash.cursor == 50 and any("steps 10–50" in t for t in texts), texts
    assert not any("outside this run" in t or "no steps" in t for t in texts), texts
