"""What the sidebar and the panels read out: only runs with a value at the cursor (the rest on one
line), reveal mode's axes from what is revealed, snapshots that say they hold parameters only,
and a cut that falls between tokens."""

from __future__ import annotations

import numpy as np

from caliper_vk.dashboard import app, model
from caliper_vk.dashboard.style import fit_text
from caliper_vk.record import Recorder, load_run


def _run(tmp_path, name, steps, decades=False):
    rec = Recorder(tmp_path / name, steps_per_epoch=10)
    for s in range(1, steps + 1):
        rec.advance()
        rec.log({"train/loss": 10.0 ** (-3 * s / steps) if decades else 1.0 / s})
        if s % 10 == 0:
            rec.log({"val/loss": 1.0 / s})
    rec.snapshot("epoch1.pt", step=10)
    rec.close()
    return load_run(tmp_path / name)


def _texts(monkeypatch):
    out = []
    for name in ("text", "text_disabled", "text_wrapped"):
        real = getattr(app.imgui, name)
        monkeypatch.setattr(app.imgui, name, lambda t, *a, real=real: (out.append(t), real(t, *a))[1])
    real_c = app.imgui.text_colored
    monkeypatch.setattr(app.imgui, "text_colored", lambda c, t: (out.append(t), real_c(c, t))[1])
    return out


def test_readouts_list_runs_with_a_value_and_fold_the_rest_into_one_line(tmp_path, monkeypatch):
    runs = [_run(tmp_path, "long", 100)] + [_run(tmp_path, f"short{k}", 20) for k in range(5)]
    texts = _texts(monkeypatch)
    dash = app.Dashboard(runs, size=(1200, 800), panels=["loss"], cursor=60)
    try:
        dash.render()
    finally:
        dash.close()
    values = [t for t in texts if t.startswith("  long: ")]
    assert values and all("at step 60" in t or "at step 50" in t for t in values)
    assert not [t for t in texts if t.startswith("  short")]  # no line of its own
    folded = [t for t in texts if t.startswith("  outside this run: ")]
    assert folded and all(t.startswith("  outside this run: short0, short1") for t in folded)


def test_reveal_fits_the_axes_and_the_log_choice_to_what_is_revealed(tmp_path):
    run = _run(tmp_path, "falls", 100, decades=True)  # the loss falls three decades over the run
    dash = app.Dashboard([run], size=(1000, 700), panels=["loss"], reveal=True, columns=1)
    try:
        loss = next(i for i, p in enumerate(dash.panels) if p.title == "Loss")
        assert loss in dash.log_y  # the whole run spans three decades ...
        dash.render()  # ... what is revealed at the first evaluation (step 10) does not
        assert dash.cursor == 10 and loss not in dash.log_y
        lo, hi = dash._limits[loss]
        assert hi <= 10.5, (lo, hi)  # the x axis does not show how long the run is
        dash.cursor = 100.0
        dash.render()
        assert loss in dash.log_y and dash._limits[loss][1] >= 99.5
        dash.toggle_log(loss, False)  # the reader's choice is kept as the cursor moves
        dash.cursor = 90.0
        dash.render()
        assert loss not in dash.log_y
    finally:
        dash.close()


def test_snapshots_say_they_hold_parameters_only(tmp_path, monkeypatch):
    run = _run(tmp_path, "snap", 20)
    assert "parameters only, not the optimizer state" in model.snapshot_text(run)
    texts = _texts(monkeypatch)
    dash = app.Dashboard([run], size=(1000, 700), panels=["loss"], columns=1)
    try:
        dash.render()
    finally:
        dash.close()
    assert any("1 snapshot (steps 10): parameters only" in t for t in texts)
    assert "saved snapshots (parameters only)" in texts  # the legend of its mark


def test_a_cut_falls_between_tokens(monkeypatch):
    dash = app.Dashboard([load_run_dummy()], size=(400, 300))
    try:
        dash.frame(events=[])
        line = "53 of 160 recorded norms at the cap 0.25 (33%), minimum 0.0163281"
        width = app.imgui.calc_text_size(line).x
        for room in np.linspace(width * 0.3, width - 1, 12):
            cut = fit_text(line, room)
            assert cut.endswith("…") and app.imgui.calc_text_size(cut).x <= room
            assert line.startswith(cut[:-1]) and line[len(cut) - 1] in " ,;", cut  # a whole token
        assert fit_text("x" * 200, 50).endswith("…")  # one token too long: cut inside it
        dash.ui.discard_frame()
    finally:
        dash.close()


def load_run_dummy():
    from caliper_vk.record.run import Run, Series

    steps = np.arange(1, 5)
    run = Run(name="dummy", status="complete", ended=True, progress_step=steps,
              progress_time=steps * 1.0)
    run.metrics["train/loss"] = Series("train/loss", steps, 1.0 / steps, np.zeros(4, bool))
    return run


def _multi(tmp_path):
    rec = Recorder(tmp_path / "multi", steps_per_epoch=10)
    for s in range(1, 21):
        rec.advance()
        rec.log({"train/loss": 1.0 / s, "lr/head": 1e-3, "grad_norm/fc1.weight": 0.5, "memory/rss_bytes": 1e8})
    rec.close()
    return load_run(tmp_path / "multi")


def test_panels_by_regular_expression_filtered_and_pinned(tmp_path):
    run = _multi(tmp_path)
    drawn = []
    dash = app.Dashboard([run], size=(1000, 900), panels=[r"^(loss|memory)$", "lr/h.ad"], pinned=["Memory"])
    real = dash._panel
    dash._panel = lambda panel, index: (drawn.append(panel.title), real(panel, index))[1]
    try:
        assert [p.title for p, on in zip(dash.panels, dash.enabled, strict=True) if on] == [
            "Loss", "Learning rate per group", "Memory"]
        dash.render(frames=2)
        assert drawn[:3] == ["Memory", "Loss", "Learning rate per group"]  # the pinned one first
        drawn.clear()
        dash.panel_filter = "rate|rss"  # the sidebar's filter box: a regular expression too
        dash.render(frames=2)
        assert set(drawn) == {"Memory", "Learning rate per group"}
        dash.panel_filter = "loss ("  # does not compile: taken literally (nothing matches)
        drawn.clear()
        dash.render(frames=2)
        assert drawn == []
    finally:
        dash.close()
    assert app.matches("grad_norm/fc1", dash.panels[next(i for i, p in enumerate(dash.panels)
                                                          if p.title.startswith("Gradient norm per"))])


def test_the_value_table_reads_raw_smoothed_step_and_time_at_the_cursor(tmp_path, monkeypatch):
    runs = [_run(tmp_path, "long", 100), _run(tmp_path, "short", 20)]
    texts = _texts(monkeypatch)
    dash = app.Dashboard(runs, size=(1300, 900), panels=["loss"], columns=1, cursor=60, smoothing=0.5,
                         tables=True)
    try:
        dash.render()
    finally:
        dash.close()
    s = runs[0].metrics["train/loss"]
    i = s.at(60)
    raw, smoothed = s.value[i], model.smooth(s.value, 0.5)[i]
    t = runs[0].coordinate("time", np.array([60.0]))[0]
    row = [model._fmt(raw), model._fmt(smoothed), "60", f"{t:.4g}"]
    assert any(texts[k:k + 6] == ["long", "train/loss", *row] for k in range(len(texts)))
    # the short run's row says why it has no value (cut to its column with "…", whole on hover)
    assert any(t.startswith("outside this run") and t.endswith("…") for t in texts)


def test_epoch_by_examples_consumed_and_the_recorded_samples_axis(tmp_path):
    rec = Recorder(tmp_path / "ex", train_size=100, steps_per_epoch=3)
    for batch in (40, 40, 20, 40, 40, 20, 30):  # a short last batch each epoch, then another size
        rec.advance(examples=batch)
        if rec.step % 2:
            rec.log({"train/loss": 1.0 / rec.step})
    rec.close()
    run = load_run(tmp_path / "ex")
    assert run.meta["train_size"] == 100
    assert run.coordinate("epoch", np.array([3.0, 5.0, 7.0])).tolist() == [1.0, 1.8, 2.3]  # not 7/3
    # the samples axis counts the steps with a record: steps 1, 3, 5, 7 are samples 0..3
    assert run.coordinate("samples", np.array([1.0, 5.0, 7.0])).tolist() == [0.0, 2.0, 3.0]
    assert run.to_step("samples", 1.0) == 3.0
    dash = app.Dashboard([run], size=(900, 600), panels=["loss"], axis="samples")
    try:
        dash.render()
        assert dash._limits  # drawn on it
    finally:
        dash.close()


def test_epochs_overlaid_on_one_within_epoch_axis_older_fainter(tmp_path, monkeypatch):
    from caliper_vk.dashboard.epochs import epoch_bounds, epoch_segments

    rec = Recorder(tmp_path / "ep", steps_per_epoch=10)
    for s in range(1, 36):
        rec.advance()
        rec.log({"train/loss": 10.0 - s / 10.0})
        if s % 10 == 0:
            rec.end_epoch()
    rec.close()
    run = load_run(tmp_path / "ep")
    assert epoch_bounds(run) == [10, 20, 30, 35]  # the fourth still running at the run's end
    segs = epoch_segments(run, "train/loss", 25, 6)  # up to the cursor's step
    assert [k for k, *_ in segs] == [1, 2, 3]
    assert [whole for *_, whole in segs] == [True, True, False]  # the third cut at the cursor
    assert segs[0][1].tolist() == list(range(1, 11)) and segs[2][1].tolist() == list(range(1, 6))
    assert segs[1][2][0] == 10.0 - 11 / 10.0  # epoch 2 starts at step 11, drawn at 1
    lines = []
    real = app.implot.plot_line
    monkeypatch.setattr(app.implot, "plot_line", lambda label, x, y, spec=None: (
        lines.append((label, np.array(x), spec.line_color.w if spec is not None else None)),
        real(label, x, y, spec))[1])
    # the loss panel in its epochs mode (caliper view --epochs; each scalar panel has the toggle)
    dash = app.Dashboard([run], size=(1000, 600), panels=["^loss$"], cursor=25, columns=1, epochs=True)
    try:
        dash.render()
        drawn = {label: (x, a) for label, x, a in lines if " · epoch " in label}
        assert list(drawn) == ["train/loss · epoch 3", "train/loss · epoch 2", "train/loss · epoch 1"]
        alphas = [a for _, a in drawn.values()]
        assert alphas[0] == 1.0 and alphas[0] > alphas[1] > alphas[2]  # older fainter
        assert drawn["train/loss · epoch 3"][0].tolist() == [1, 2, 3, 4, 5]  # up to the cursor's step 25
        lines.clear()
        (i,) = [i for i, on in enumerate(dash.enabled) if on]
        dash.overlay_epochs(i, False)  # back over progress: one trace of every step
        dash.render()
        labels = [label for label, *_ in lines]
        assert "train/loss" in labels and not any(" · epoch " in label for label in labels)
    finally:
        dash.close()


def test_a_series_shade_keeps_its_runs_hue_however_many_series():
    from caliper_vk.dashboard.colours import RUN_COLOURS, _series_shade

    for rgb in RUN_COLOURS:
        for j in range(64):
            shade = _series_shade(rgb, j)
            assert all(0.0 <= c <= 1.0 for c in shade)
            assert np.argmax(shade) == np.argmax(rgb) or max(rgb) - min(rgb) < 0.3, (rgb, j, shade)
