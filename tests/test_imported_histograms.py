"""Imported histograms read true: TensorBoard's unequal buckets are re-binned to equal bins (the
rule said on the panel) in every histogram mode, so a Gaussian reads unimodal with its peak at 0."""

from __future__ import annotations

import numpy as np
import pytest

from caliper_vk.dashboard import app, arrays, model
from caliper_vk.record import load_run

pytest.importorskip("tensorboard", reason="the TensorBoard importer needs the tensorboard package")
torch = pytest.importorskip("torch")
from torch.utils.tensorboard import SummaryWriter  # noqa: E402


def _gaussian_run(path, steps=(0, 10)):
    """A weight histogram whose values are the 4000 quantiles of N(0, s): no sampling noise."""
    u = (np.arange(4000) + 0.5) / 4000
    x = np.sqrt(2.0) * torch.erfinv(torch.tensor(2 * u - 1, dtype=torch.float64)).numpy()
    w = SummaryWriter(log_dir=str(path))
    for s in steps:
        w.add_scalar("train/loss", 1.0 / (s + 1), s)
        w.add_histogram("weights/fc", x * (1 + s / 10), s)
    w.close()
    return load_run(path)


def _unimodal_at_zero(edges, counts):
    k = int(np.argmax(counts))
    d = np.diff(counts)
    return edges[k] <= 0.0 <= edges[k + 1] and np.all(d[:k] >= -1e-9) and np.all(d[k:] <= 1e-9)


def test_an_imported_gaussian_reads_unimodal_with_its_peak_at_zero(tmp_path):
    frame = _gaussian_run(tmp_path / "tb").histograms["weights/fc"][0]
    assert not model._equal_widths(frame.edges)  # TensorBoard's exponential buckets
    # raw counts over unequal widths dip at 0: the narrow buckets there hold almost nothing
    assert not _unimodal_at_zero(frame.edges, frame.counts)
    edges, rule = model.histogram_grid([frame])
    assert rule and "re-binned" in rule and len(edges) == model.REBIN_BINS + 1
    counts = model.rebin(frame, edges)
    assert counts.sum() == pytest.approx(frame.counts.sum())
    assert _unimodal_at_zero(edges, counts)


def test_recorded_equal_bins_are_drawn_as_they_are():
    from caliper_vk.record.run import HistFrame

    frames = [HistFrame(s, np.linspace(-3, 3, 13), np.arange(12) + s) for s in (1, 2)]
    edges, rule = model.histogram_grid(frames)
    assert rule is None and np.array_equal(edges, frames[0].edges)
    assert np.array_equal(model.rebin(frames[1], edges), frames[1].counts)


@pytest.mark.parametrize("hist_mode", ["overlay", "offset", "time"])
def test_every_histogram_mode_draws_the_re_binned_frames_and_says_so(tmp_path, monkeypatch, hist_mode):
    run = _gaussian_run(tmp_path / "tb")
    texts, stairs, images = [], [], []
    real = app.imgui.text_colored
    monkeypatch.setattr(app.imgui, "text_colored", lambda c, t: (texts.append(t), real(c, t))[1])
    for name in ("text", "text_disabled"):
        r = getattr(app.imgui, name)
        monkeypatch.setattr(app.imgui, name, lambda t, *a, r=r: (texts.append(t), r(t, *a))[1])
    r_st, r_im = arrays.implot.plot_stairs, arrays.implot.plot_image

    def plot_stairs(label, xs, ys, *a):
        stairs.append((np.array(xs), np.array(ys)))
        return r_st(label, xs, ys, *a)

    def plot_image(label, tex, p0, p1, *a):
        images.append((p0.y, p1.y))
        return r_im(label, tex, p0, p1, *a)

    monkeypatch.setattr(arrays.implot, "plot_stairs", plot_stairs)
    monkeypatch.setattr(arrays.implot, "plot_image", plot_image)
    dash = app.Dashboard([run], size=(1000, 700), panels=["weights"], hist_mode=hist_mode, cursor=10, columns=1)
    try:
        dash.render()
    finally:
        dash.close()
    assert any("re-binned to 64 equal bins" in t for t in texts), texts
    frames = run.histograms["weights/fc"]
    lo, hi = min(f.edges[0] for f in frames), max(f.edges[-1] for f in frames)
    if hist_mode == "time":  # rows are equal steps of value spanning every frame
        assert images and images[0] == pytest.approx((lo, hi))
        return
    assert len(stairs) % 2 == 0 and stairs  # two frames, in each ImGui frame drawn
    for xs, ys in stairs:  # an offset adds a constant: the shape is the same
        assert np.allclose(np.diff(xs), (hi - lo) / 64) and xs[0] == pytest.approx(lo)
        assert _unimodal_at_zero(xs, ys[:-1])
