"""Events and lineage: ``Recorder.event`` and ``Recorder(parent=, parent_step=)`` are read back
from the log and from run.json, and the dashboard draws them: an event's line at its step on
every plot over progress (checked in the drawn pixels), a child run on its parent's step axis."""

from __future__ import annotations

import numpy as np
import pytest

from caliper_vk.dashboard import app, model
from caliper_vk.dashboard.marks import EVENT_RGB
from caliper_vk.engine.window import Event
from caliper_vk.record import Recorder, load_run


def _run(path, steps=60, event_at=30, **kw):
    rec = Recorder(path, steps_per_epoch=10, **kw)
    for s in range(1, steps + 1):
        rec.advance()
        rec.log({"train/loss": 1.0 / s, "lr/group0": 1e-3})
        if s == event_at:
            rec.event("loss switched: cross-entropy -> label-smoothed (0.1)")
        if s % 10 == 0:
            rec.log({"val/loss": 1.2 / s})
            rec.histogram("weights/w", np.linspace(-1, 1, 50) * s / steps)
            rec.confusion(matrix=np.array([[s, 2], [3, s]]), classes=["a", "b"])
    rec.close()
    return load_run(path)


def test_events_and_the_parent_read_back_from_the_log_and_run_json(tmp_path):
    parent = _run(tmp_path / "pretrain", steps=40)
    child = _run(tmp_path / "finetune", steps=20, event_at=5, parent=tmp_path / "pretrain", parent_step=40)
    assert parent.events == [(30, "loss switched: cross-entropy -> label-smoothed (0.1)")]
    assert child.events[0][0] == 5 and parent.parent is None and parent.step_offset == 0
    assert child.parent == {"run": (tmp_path / "pretrain").resolve(), "name": "pretrain", "step": 40}
    assert child.meta["parent"]["run"] == "../pretrain"  # relative: runs copied together stay linked
    (tmp_path / "finetune" / "run.json").unlink()
    from_log = load_run(tmp_path / "finetune" / "log.jsonl")
    assert (from_log.events, from_log.parent) == (child.events, child.parent)
    # on the step axis the child continues from the parent's step 40; its own steps are unchanged
    assert child.coordinate("step", np.array([0, 5])).tolist() == [40.0, 45.0]
    assert child.to_step("step", 45) == 5 and child.to_step("step", 30) is None
    assert child.metrics["train/loss"].step[0] == 1
    r = model.read_cursor(child, "train/loss", "step", 45)
    assert r.text == "0.2 at step 5 (step 45 of pretrain)"
    with pytest.raises(ValueError, match="parent_step="):
        Recorder(tmp_path / "bad", parent=tmp_path / "pretrain")
    with pytest.raises(ValueError, match="needs a text"):
        Recorder(tmp_path / "bad2").event("  ")


def _marks(monkeypatch):
    """Per plot (by its rectangle on the screen) the pixel columns its event lines were put at."""
    seen = {}
    real = app.implot.plot_inf_lines

    def spy(label, xs, *rest):
        if label.startswith("events"):
            p0, size = app.implot.get_plot_pos(), app.implot.get_plot_size()
            seen[(p0.x, p0.y, p0.x + size.x, p0.y + size.y)] = [
                app.implot.plot_to_pixels(float(x), 0.0).x for x in xs]
        return real(label, xs, *rest)

    monkeypatch.setattr(app.implot, "plot_inf_lines", spy)
    return seen


@pytest.mark.parametrize("hist_mode", ["time", "overlay"])
def test_an_event_is_drawn_at_its_step_on_every_plot_over_progress(tmp_path, monkeypatch, hist_mode):
    run = _run(tmp_path / "switch")
    seen = _marks(monkeypatch)
    dash = app.Dashboard([run], size=(1300, 1800), panels=["*"], hist_mode=hist_mode, columns=2, cursor=20)
    try:
        dash.render()
        seen.clear()
        dash.REUSE = False  # this frame builds every panel (their marks noted), laid out as the last
        dash.frame(events=[])
        rgba = dash.ui.render()
    finally:
        dash.close()
    # every scalar panel, the recall/precision plot and (over time) the histogram
    want_plots = sum(p.kind in ("scalar", "confusion") or (p.kind == "histogram" and hist_mode == "time")
                     for p in dash.panels)
    assert len(seen) == want_plots
    assert EVENT_RGB == (1.0, 1.0, 0.0)  # a light, pure yellow: no series or run colour is that
    event_coloured = _event_coloured

    for (x0, y0, x1, y1), cols in seen.items():
        (c,) = cols
        assert x0 <= c <= x1
        px = int(np.floor(c))
        strip = rgba[int(y0) + 2:int(y1) - 2, px - 1:px + 2, :3].astype(float)  # rows x 3 columns x rgb
        on_line = event_coloured(strip).any(axis=1)
        assert on_line.mean() > 0.6, ((x0, y0, x1, y1), c, on_line.mean())  # data may cross it here and there
        beside = rgba[int(y0) + 2:int(y1) - 2, px + 6, :3].astype(float)  # and it is a line, not a fill
        assert event_coloured(beside).mean() < 0.2


def test_a_child_is_drawn_from_the_branch_point_on_its_parents_axis(tmp_path, monkeypatch):
    parent = _run(tmp_path / "pretrain", steps=40, event_at=None)
    child = _run(tmp_path / "finetune", steps=20, event_at=None, parent=tmp_path / "pretrain", parent_step=30)
    lines, tags = [], []
    real_lines, real_tag = app.implot.plot_line, app.implot.tag_x
    monkeypatch.setattr(app.implot, "plot_line", lambda label, x, y, *a: (
        lines.append((label, np.array(x))), real_lines(label, x, y, *a))[1])
    monkeypatch.setattr(app.implot, "tag_x", lambda x, col, *a: (tags.append((x, *a)), real_tag(x, col, *a))[1])
    dash = app.Dashboard([parent, child], size=(1200, 800), panels=["loss"], columns=1)
    try:
        dash.render()
        # epochs overlaid: nothing of the child before its branch point, all of it after its end
        dash.cursor = 20
        assert dash._epoch_segments(child, "train/loss") == [] and dash._epoch_segments(parent, "train/loss")
        dash.cursor = 100
        assert [k for k, *_ in dash._epoch_segments(child, "train/loss")] == [1, 2]
    finally:
        dash.close()
    xs = [x for label, x in lines if label == "train/loss · finetune"]
    assert xs and xs[-1][0] == 31 and xs[-1][-1] == 50  # its step 1 is the parent's step 31
    assert (30.0, "from pretrain @30") in tags


def _noted(monkeypatch):
    """The event notes drawn (text, rectangle on the screen) in a frame."""
    notes = []
    real = app.imgui.text_colored

    def spy(col, text, *rest):
        out = real(col, text, *rest)
        if (col.x, col.y, col.z) == EVENT_RGB:
            lo, hi = app.imgui.get_item_rect_min(), app.imgui.get_item_rect_max()
            notes.append((text, (lo.x, lo.y, hi.x, hi.y)))
        return out

    monkeypatch.setattr(app.imgui, "text_colored", spy)
    return notes


def _tooltips(monkeypatch) -> list[str]:
    """The tooltips set in the frames that follow."""
    tips = []
    real = app.imgui.set_tooltip
    monkeypatch.setattr(app.imgui, "set_tooltip", lambda text, *a: (tips.append(text), real(text, *a))[1])
    return tips


def _event_coloured(px):  # (anti-aliased, blended: the hue, not the exact value): a light yellow
    r, g, b = px[..., 0], px[..., 1], px[..., 2]
    return (r > 190) & (g > 190) & (b < 90)


@pytest.mark.parametrize("cursor", [25, 35])
def test_panels_drawn_at_the_cursor_name_the_events_so_far(tmp_path, monkeypatch, cursor):
    """Array, confusion and overlaid histogram panels show frames at the cursor's step: a line in
    the events' colour names the latest event at or before it and whether the frame predates it
    (drawn: its pixels are the events' colour); none before the first event."""
    rec = Recorder(tmp_path / "arr", steps_per_epoch=10)
    for s in range(1, 41):
        rec.advance()
        rec.log({"train/loss": 1.0 / s})
        if s == 22:
            rec.event("data: augmentation switched on")
        if s % 10 == 0:
            rec.histogram("weights/w", np.linspace(-1, 1, 50) * s / 40)
            rec.confusion(matrix=np.array([[s, 2], [3, s]]), classes=["a", "b"])
            rec.probe("hidden", np.arange(12.0).reshape(3, 4) * s, module="fc1", example="val[0]")
    rec.close()
    run = load_run(tmp_path / "arr")
    notes = _noted(monkeypatch)
    dash = app.Dashboard([run], size=(1300, 1400), panels=["Histogram", "Confusion", "Array"], columns=1,
                         cursor=cursor)
    try:
        dash.render()
        notes.clear()
        dash.frame(events=[])
        rgba = dash.ui.render()
        want = ("event at step 22, the frame shown (step 20) predates it" if cursor == 25
                else "event at step 22, before the frame shown (step 30)") + ": data: augmentation switched on"
        assert [t for t, _ in notes] == [want] * 3  # the histogram, the confusion and the array panel
        for _, (x0, y0, x1, y1) in notes:
            box = rgba[int(y0):int(np.ceil(y1)), int(x0):int(np.ceil(x1)), :3].astype(float)
            assert _event_coloured(box).sum() > 50  # the text is drawn, in the events' colour
        tips = _tooltips(monkeypatch)  # hovering the note shows every event so far in full
        _, (x0, y0, x1, y1) = notes[-1]
        for _ in range(2):  # (Dear ImGui takes the hover from the frame's mouse position)
            dash.frame(events=[Event("move", x=(x0 + x1) / 2, y=(y0 + y1) / 2)])
            dash.ui.render()
        assert "events at or before the cursor:\narr, step 22: data: augmentation switched on" in tips
        notes.clear()
        dash.cursor = 15  # before the event: no note
        dash.frame(events=[])
        dash.ui.render()
        assert notes == []
    finally:
        dash.close()


def test_an_event_is_drawn_in_its_epoch_when_epochs_are_overlaid(tmp_path, monkeypatch):
    run = _run(tmp_path / "switch", event_at=34)
    seen = _marks(monkeypatch)
    xs = []
    real = app.implot.plot_inf_lines
    monkeypatch.setattr(app.implot, "plot_inf_lines", lambda label, x, *rest: (
        xs.append((label, np.array(x).tolist())), real(label, x, *rest))[1])
    dash = app.Dashboard([run], size=(900, 600), panels=["^loss$"], columns=1, cursor=38, epochs=True)
    try:
        dash.render()
        seen.clear()
        dash.frame(events=[])
        rgba = dash.ui.render()
    finally:
        dash.close()
    ((x0, y0, x1, y1), cols), = seen.items()
    (c,) = cols
    assert x0 <= c <= x1
    assert xs[-1] == ("events (hover a line: what changed)", [4.0])  # step 34: step 4 of epoch 4
    tips = _tooltips(monkeypatch)  # hovering the line shows its text, with its epoch
    dash = app.Dashboard([run], size=(900, 600), panels=["^loss$"], columns=1, cursor=38, epochs=True)
    try:
        dash.render()
        for _ in range(2):
            dash.frame(events=[Event("move", x=c + 1, y=(y0 + y1) / 2)])
            dash.ui.render()
    finally:
        dash.close()
    assert "switch, step 34 (epoch 4): loss switched: cross-entropy -> label-smoothed (0.1)" in tips
    px = int(np.floor(c))
    strip = rgba[int(y0) + 2:int(y1) - 2, px - 1:px + 2, :3].astype(float)
    assert _event_coloured(strip).any(axis=1).mean() > 0.6


def test_caliper_view_epochs_overlays_every_per_step_panel(tmp_path, monkeypatch, capsys):
    from caliper_vk.cli import main

    _run(tmp_path / "switch")
    labels, limits = [], []
    real, real_limits = app.implot.plot_line, app.implot.setup_axis_limits
    monkeypatch.setattr(app.implot, "plot_line", lambda label, *a: (labels.append(label), real(label, *a))[1])
    monkeypatch.setattr(app.implot, "setup_axis_limits", lambda axis, lo, hi, *a: (
        limits.append((axis, lo, hi)), real_limits(axis, lo, hi, *a))[1])
    out = tmp_path / "epochs.png"
    assert main(["view", str(tmp_path / "switch"), "--epochs", "--panel", "loss|lr", "--png", str(out)]) == 0
    assert "written to" in capsys.readouterr().out and out.exists()
    assert {"train/loss · epoch 6", "lr/group0 · epoch 6"} <= set(labels)  # the newest epoch, in both panels
    assert not any(label.startswith("val/loss") for label in labels)  # a sample an epoch: not overlaid
    # a constant learning rate reads on +-10% around it, as over progress (not on ImPlot's +-0.5)
    assert (app.implot.ImAxis_.y1, pytest.approx(0.9e-3), pytest.approx(1.1e-3)) in limits
