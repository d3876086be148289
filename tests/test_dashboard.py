"""The dashboard: its rules (cursor, comparison, markers) without a GPU, and the headless PNG."""

from __future__ import annotations

import numpy as np
import pytest

from caliper_vk.dashboard import model
from caliper_vk.record import Recorder, load_run


def _run(tmp_path, name, steps, spe=10, val_every=10, snaps=(), val=None, nan_at=None):
    rec = Recorder(tmp_path / name, steps_per_epoch=spe)
    rec.log({"grad_norm/global": 0.0}, placeholder=("grad_norm/global",))
    for s in range(1, steps + 1):
        rec.advance()
        loss = float("nan") if s == nan_at else 10.0 / s + (5.0 if s == 37 else 0.0)
        rec.log({"train/loss": loss, "grad_norm/global": 1.0 + s % 3})
        if s % val_every == 0:
            v = val[s // val_every - 1] if val else 1.0 / s
            rec.log(val_loss=v)
            if s in snaps:
                rec.snapshot(f"s{s}.pt")
            rec.histogram("weights/w", np.linspace(-1, 1, 50) * s / steps)
            rec.probe("act", np.full((2, 3), float(s)), module="relu1", example="val[0]")
    rec.close()
    return load_run(tmp_path / name)


def test_cursor_reads_raw_values_never_smoothed(tmp_path):
    run = _run(tmp_path, "a", 50)
    r = model.read_cursor(run, "train/loss", "step", 37.6)
    assert (r.state, r.step) == ("value", 37) and r.value == pytest.approx(10 / 37 + 5)  # the spike, raw
    sm = model.smooth(run.metrics["train/loss"].value, 0.9)
    assert sm[36] != pytest.approx(r.value)  # the smoothed line differs; the cursor does not use it
    r0 = model.read_cursor(run, "grad_norm/global", "step", 0)
    assert r0.placeholder and "placeholder" in r0.text
    assert model.read_cursor(run, "val/loss", "step", 5).state == "before-first"
    assert model.read_cursor(run, "nope", "step", 5).text == "not recorded"


def test_comparison_never_extrapolates(tmp_path):
    long, short = _run(tmp_path, "long", 100), _run(tmp_path, "short", 40)
    a = model.read_cursor(long, "train/loss", "step", 80)
    b = model.read_cursor(short, "train/loss", "step", 80)
    assert a.state == "value" and a.step == 80
    assert b.state == "outside" and b.value is None and "steps 0–40" in b.text
    # each run on its own coordinates: epoch 3 is step 30 in both (10 steps per epoch)
    assert model.read_cursor(short, "train/loss", "epoch", 3.0).step == 30
    assert model.read_cursor(short, "train/loss", "epoch", 4.5).state == "outside"
    f, text = model.frame_reading(short, short.arrays["act"], "step", 80)
    assert f is None and "outside" in text


def test_sparse_frames_state_their_step(tmp_path):
    run = _run(tmp_path, "a", 50)
    f, text = model.frame_reading(run, run.arrays["act"], "step", 27)
    assert f.step == 20 and text == "frame from step 20 (latest at or before cursor step 27)"
    f, text = model.frame_reading(run, run.arrays["act"], "step", 30)
    assert f.step == 30 and text == "frame from step 30"
    f, text = model.frame_reading(run, run.arrays["act"], "step", 5)
    assert f is None and "first at step 10" in text
    stack = model.histogram_stack(run.histograms["weights/w"], 35, 2)
    assert [h.step for h in stack] == [20, 30]


def test_best_between_snapshots_is_flagged(tmp_path):
    run = _run(tmp_path, "a", 60, snaps=(20, 50), val=[1.0, 0.8, 0.5, 0.7, 0.6, 0.9])
    marks = model.best_marks(run)
    assert (marks.best_step, marks.best_value, marks.best_saved) == (30, 0.5, False)
    assert "no saved parameters" in marks.text and "step 20" in marks.text and "step 50" in marks.text
    assert "latest state: step 60" in marks.text
    run2 = _run(tmp_path, "b", 60, snaps=(30,), val=[1.0, 0.8, 0.5, 0.7, 0.6, 0.9])
    assert model.best_marks(run2).best_saved


def test_missing_measurements_stay_missing(tmp_path):
    run = _run(tmp_path, "a", 20, nan_at=7)
    r = model.read_cursor(run, "train/loss", "step", 7)
    assert r.state == "value" and np.isnan(r.value) and "NaN" in r.text
    sm = model.smooth(run.metrics["train/loss"].value, 0.5)
    assert np.isfinite(sm[6])  # the smoothed line skips it; the raw trace keeps the gap
    assert not run.finite


def test_column_reduction_keeps_spikes():
    x = np.arange(1_000_000, dtype=np.float64)
    y = np.zeros_like(x)
    y[123_457] = 50.0
    y[999_999] = -3.0
    c, lo, hi = model.reduce_columns(x, y, 0, 999_999, 500)
    assert len(c) == 500 and hi.max() == 50.0 and lo.min() == -3.0
    assert int(np.argmax(hi)) == 123_457 * 500 // 1_000_000


def test_default_panels_group_and_label(tmp_path):
    run = _run(tmp_path, "a", 20)
    titles = [p.title for p in model.default_panels([run])]
    assert titles[0] == "Loss" and "Histogram weights/w" in titles and "Array act" in titles


def test_headless_dashboard_png(tmp_path, capsys):
    from PIL import Image

    from caliper_vk.cli import main

    _run(tmp_path, "a", 60, snaps=(20,))
    _run(tmp_path, "b", 30)
    out = tmp_path / "dash.png"
    assert main(["view", str(tmp_path / "a"), str(tmp_path / "b"), "--png", str(out), "--size", "1200x800",
                 "--all", "--cursor", "45"]) == 0
    assert "2 run(s)" in capsys.readouterr().out
    img = np.asarray(Image.open(out))
    assert img.shape == (800, 1200, 4)
    assert len(np.unique(img.reshape(-1, 4), axis=0)) > 50  # plots, text and arrays, not a blank frame


def test_view_errors_are_one_line(tmp_path, capsys):
    from caliper_vk.cli import main

    assert main(["view", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("caliper: error:") and "no such file" in err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "run.json").write_text('{"schema": "caliper-run/9"}')
    assert main(["view", str(tmp_path / "bad"), "--png", str(tmp_path / "x.png")]) == 2
    assert "caliper-run/1" in capsys.readouterr().err


def test_confusion_and_array_panels_over_several_frames(tmp_path):
    """Recall and precision per class over several matrices (a column of a frames x classes
    table, which ImPlot needs contiguous; the panel was only ever drawn clipped before), and the
    engine-drawn textures of a cursor moving across frames: one canvas per texture, kept."""
    from caliper_vk.dashboard.app import Dashboard

    rec = Recorder(tmp_path / "c", steps_per_epoch=10)
    rng = np.random.default_rng(0)
    for s in range(1, 31):
        rec.advance()
        rec.log({"train/loss": 1.0 / s})
        if s % 10 == 0:
            rec.confusion(matrix=rng.integers(0, 20, (4, 4)))
            rec.probe("act", rng.normal(size=(3, 5, 6)), module="m")
    rec.close()
    run = load_run(tmp_path / "c")
    dash = Dashboard([run], size=(1400, 600), panels=["confusion", "act"], cursor=10)
    drawn, submits = [], []
    try:
        for cursor in (10, 25, 30):  # onto other frames: the same canvases draw the new data
            dash.cursor = cursor
            frame = dash.render()  # several frames: a canvas is drawn again only for new data
            if cursor == 10:
                rgba, canvases = frame, {k: v[1] for k, v in dash._canvases.items()}
                for c in canvases.values():
                    submit = c.submit
                    c.submit = lambda *a, submit=submit, **k: submits.append(1) or submit(*a, **k)
            for key in sorted(dash._canvases):
                drawn.append((key, dash._canvases[key][1].read_back()))
        assert {k: v[1] for k, v in dash._canvases.items()} == canvases and len(canvases) == 2
    finally:
        dash.close()
    assert rgba.shape == (600, 1400, 4) and len(np.unique(rgba.reshape(-1, 4), axis=0)) > 20
    assert [k[0] for k, _ in drawn] == ["a", "c"] * 3 and len(submits) == 4  # once per new frame
    from caliper_vk.views import Confusion, Images

    for (kind, _, _), image, step in zip([k for k, _ in drawn], [r for _, r in drawn], (10, 10, 20, 20, 30, 30),
                                         strict=True):
        i = step // 10 - 1
        fresh = (Dashboard._draw_view(Confusion(run.confusions["val/confusion"][i].matrix.astype(np.float32),
                                                normalize="row"), image.shape[1], image.shape[0])
                 if kind == "c" else
                 Dashboard._draw_view(Images(run.arrays["act"][i].array.astype(np.float32), normalize="tile",
                                             colormap="RdBu_r", value_range="symmetric"), *image.shape[:2]))
        assert np.array_equal(image, fresh)  # a kept canvas draws what a new one would


def _long_run(n: int, spe: int = 100):
    from caliper_vk.record.run import Run, Series

    steps = np.arange(n, dtype=np.int64)
    y = np.sin(steps / 500.0)
    y[n // 3] = 9.0  # a spike the columns keep
    run = Run(name="long", meta={"steps_per_epoch": spe}, status="complete", ended=True,
              progress_step=steps, progress_epoch=steps / spe, progress_time=steps * 0.01)
    run.metrics["train/loss"] = Series("train/loss", steps, y, np.zeros(n, bool))
    return run


def test_long_trace_is_drawn_as_columns_every_frame():
    """A 200,000-step trace is handed to ImPlot as per-pixel columns on every frame (the second
    frame once drew the whole series as one line, from the first frame's unfitted limits); the
    plot opens on every sample and the columns are computed once, not per frame or cursor move."""
    from imgui_bundle import imgui

    from caliper_vk.dashboard.app import Dashboard

    dash = Dashboard([_long_run(200_000)], size=(800, 500), panels=["loss"], columns=1)
    try:
        counts = []
        for cursor in (None, None, 1000.0, 150_000.0):
            if cursor is not None:
                dash.cursor = cursor
            dash.frame(events=[])
            rgba = dash.ui.render()
            counts.append(imgui.get_draw_data().total_vtx_count)
            assert dash._limits[0] == (0.0, 199_999.0)  # every sample, from the first frame on
            assert len([k for k in dash._cache if k[0] == "cols"]) == 1
        assert max(counts) < 40_000, counts  # one line through 200,000 points is 800,000 vertices
        assert len(np.unique(rgba.reshape(-1, 4), axis=0)) > 20
    finally:
        dash.close()


def test_zoomed_in_trace_plots_the_visible_samples_and_axis_change_refits(monkeypatch):
    from imgui_bundle import imgui, implot

    import caliper_vk.dashboard.app as app

    dash = app.Dashboard([_long_run(200_000)], size=(800, 500), panels=["loss"], columns=1)
    try:
        dash.render()
        seen = []
        begin, line = implot.begin_plot, implot.plot_line

        def zoomed(*a):  # the user zoomed in to steps 1000..1100
            implot.set_next_axis_limits(implot.ImAxis_.x1, 1000.0, 1100.0, imgui.Cond_.always)
            return begin(*a)

        def spy(label, x, y, *a):
            seen.append((float(x[0]), float(x[-1]), len(x)))
            return line(label, x, y, *a)

        monkeypatch.setattr(app.implot, "begin_plot", zoomed)
        monkeypatch.setattr(app.implot, "plot_line", spy)
        # this zoom goes around the dashboard's inputs (a real one is the mouse over the plot):
        # build the panel rather than reuse its kept pixels (reuse.py)
        dash._reusable.clear()
        dash.frame(events=[])
        dash.ui.render()
        monkeypatch.undo()
        assert seen == [(999.0, 1101.0, 103)]  # the visible samples and one either side, raw
        dash._change_axis("epoch")
        dash.render()
        lo, hi = dash._limits[0]
        assert (lo, hi) == (0.0, 1999.99)  # epochs 0..1999.99 (the limits were in steps)
    finally:
        dash.close()


def test_cursor_search_and_progress_tables():
    run = _long_run(1000, spe=10)
    s = run.metrics["train/loss"]
    assert s.at(41.9) == 41 and s.at(41) == 41 and s.at(-0.5) is None and s.at(1e30) == 999
    assert s.at(float("inf")) == 999 and s.at(float("nan")) in (None, 999)
    assert run.to_step("epoch", 4.2) == 42.0 and run.coordinate("epoch", [42])[0] == 4.2
    run.progress_epoch = run.progress_step / 20.0  # a new table is read, not the cached one
    assert run.to_step("epoch", 4.2) == 84.0
    run.progress_time = np.full(1000, np.nan)
    assert run.to_step("time", 1.0) is None and np.isnan(run.coordinate("time", [5])[0])


def test_background_is_the_overlay_clear_colour():
    """The main window covers the display: the overlay clears to its background colour and imgui
    draws none (one full-screen layer of blended fragments fewer per frame)."""
    from imgui_bundle import imgui

    from caliper_vk.dashboard.app import Dashboard

    dash = Dashboard([_long_run(100)], size=(600, 900), panels=["loss"], columns=1)
    try:
        rgba = dash.render()
        bg = imgui.get_style().color_(imgui.Col_.window_bg)
        assert bg.w == 1.0 and dash.ui.overlay.clear == (*(int(c * 255 + 0.5) for c in (bg.x, bg.y, bg.z)), 255)
        assert tuple(rgba[-3, -3]) == dash.ui.overlay.clear  # below the panel: the window's background
    finally:
        dash.close()


@pytest.mark.parametrize("hist_mode", ["overlay", "time"])
def test_plot_frames_drawn_as_bands_give_the_same_pixels(tmp_path, monkeypatch, hist_mode):
    """ImPlot's frame and plot-area fills replaced by four bands around the plot area (one layer
    of fragments instead of two or three): not one pixel differs."""
    from caliper_vk.dashboard.app import Dashboard

    run = _run(tmp_path, "a", 60, snaps=(20,))
    images = []
    for band in (False, True):
        monkeypatch.setattr(Dashboard, "BAND_FRAMES", band)
        dash = Dashboard([run], size=(1300, 1000), panels=["*"], columns=3, hist_mode=hist_mode, cursor=33)
        try:
            images.append(dash.render())
        finally:
            dash.close()
    assert np.array_equal(images[0], images[1])
    assert len(np.unique(images[1].reshape(-1, 4), axis=0)) > 50


def test_log_y_starts_on_the_loss_panels_and_changes_the_drawing(tmp_path):
    from caliper_vk.dashboard.app import Dashboard

    run = _long_run(5000)
    frames, chosen = [], []
    for log_y in (False, True):
        dash = Dashboard([run], size=(800, 500), panels=["loss"], columns=1, log_y=log_y)
        try:
            loss = {i for i, p in enumerate(dash.panels) if p.options.get("group") == "loss"}
            chosen.append((dash.log_y, loss))
            frames.append(dash.render())
        finally:
            dash.close()
    assert chosen[0][0] == set() and chosen[1][0] == chosen[1][1] and chosen[1][1]
    assert not np.array_equal(*frames)  # the y axis is another one
