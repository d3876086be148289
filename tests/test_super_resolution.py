"""The super-resolution example: PSNR and SSIM against scikit-image, and the bundled run.

Oracles: ``skimage.metrics`` (a well-kept implementation, pinned in requirements-dev.txt)
for the two metrics; the generated validation images and torch's bicubic upscale, recomputed
here, for the baseline the run recorded; the dashboard's own drawing calls for "the baseline
is drawn on the learned metric's panel".
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from caliper_vk.dashboard import app, model
from caliper_vk.record import load_run
from caliper_vk.runs import EXAMPLES_DIR
from caliper_vk.runs.image_quality import crop_border, psnr, ssim, window_size
from caliper_vk.runs.super_resolution import SCALE, SRConfig, bicubic, downscale, make_images, quality


def _pairs():
    """Image pairs a metric must get right: noise, blur, a shift in level, a clamped overshoot,
    on odd sizes and on the generated images themselves."""
    rng = np.random.default_rng(0)
    a = rng.random((2, 40, 37))
    yield "noise", a, np.clip(a + rng.normal(0, 0.1, a.shape), 0, 1)
    yield "offset", a, np.clip(a + 0.05, 0, 1)
    hr = make_images(3, 48, seed=5)
    up = bicubic(downscale(hr))
    yield "bicubic", hr[:, 0].double().numpy(), up[:, 0].double().numpy()
    flat = np.full((1, 16, 16), 0.5)
    yield "almost-flat", flat, flat + rng.normal(0, 1e-3, flat.shape)


@pytest.mark.parametrize(("name", "ref", "out"), list(_pairs()), ids=[p[0] for p in _pairs()])
def test_psnr_and_ssim_agree_with_scikit_image(name, ref, out):
    mine_p = psnr(torch.from_numpy(out), torch.from_numpy(ref)).numpy()
    mine_s = ssim(torch.from_numpy(out), torch.from_numpy(ref)).numpy()
    for i in range(len(ref)):
        assert mine_p[i] == pytest.approx(peak_signal_noise_ratio(ref[i], out[i], data_range=1.0), abs=1e-9)
        assert mine_s[i] == pytest.approx(structural_similarity(
            ref[i], out[i], data_range=1.0, gaussian_weights=True, sigma=1.5, use_sample_covariance=False),
            abs=1e-9)


def test_metric_edge_cases_and_errors():
    a = torch.rand(1, 1, 20, 20, generator=torch.Generator().manual_seed(1))
    assert psnr(a, a).item() == float("inf") and ssim(a, a).item() == pytest.approx(1.0)
    assert window_size() == 11
    with pytest.raises(ValueError, match="single-channel"):
        psnr(torch.zeros(1, 3, 8, 8), torch.zeros(1, 3, 8, 8))
    with pytest.raises(ValueError, match="differ in shape"):
        ssim(torch.zeros(1, 12, 12), torch.zeros(1, 12, 13))
    with pytest.raises(ValueError, match="window does not fit"):
        ssim(torch.zeros(1, 8, 8), torch.zeros(1, 8, 8))
    with pytest.raises(ValueError, match="border 4 does not fit"):
        crop_border(torch.zeros(1, 8, 8), 4)


@pytest.fixture(scope="module")
def run():
    return load_run(EXAMPLES_DIR / "super_resolution")


def test_bundled_run_records_the_baseline_it_defines(run):
    assert (run.problems, run.status, run.finite) == ([], "complete", True)
    cfg = SRConfig(**{k: v for k, v in run.config.items() if k in SRConfig.__dataclass_fields__})
    hr = make_images(cfg.val_size, cfg.val_px, cfg.seed + 1000)
    base_p, base_s = quality(bicubic(downscale(hr)), hr)
    steps = run.metrics["val/psnr"].step
    spe = run.meta["steps_per_epoch"]
    np.testing.assert_array_equal(steps, np.arange(0, cfg.epochs * spe + 1, spe))  # every epoch and step 0
    for key, want in (("val/psnr_bicubic", base_p), ("val/ssim_bicubic", base_s)):
        s = run.metrics[key]
        np.testing.assert_array_equal(s.step, steps)  # compared at each recorded epoch
        np.testing.assert_allclose(s.value, want, rtol=1e-6)  # generated on another CPU
    learned_p, learned_s = run.metrics["val/psnr"].value, run.metrics["val/ssim"].value
    assert learned_p[0] < base_p < learned_p[-1] - 1.0  # starts below bicubic, ends > 1 dB above it
    assert learned_s[-1] > base_s
    assert run.best_step() == int(steps[learned_p.argmax()])  # best is the highest PSNR
    assert run.metrics["val/psnr"].unit == "dB" and "10·log10(peak²/MSE)" in run.metrics["val/psnr"].description
    for text in ("11x11 Gaussian window", "K1 0.01", "K2 0.03", "2-pixel border cropped", "mean over the 32"):
        assert text in run.metrics["val/ssim"].description
    target = run.arrays["sr/target"][0]
    np.testing.assert_allclose(target.array, hr[cfg.probe_index, 0].numpy(), atol=1e-6)
    out = run.arrays["sr/output"][-1].array
    np.testing.assert_allclose(run.arrays["sr/error"][-1].array, out - target.array, atol=1e-6)
    assert run.arrays["sr/input"][0].array.shape == (cfg.val_px // SCALE,) * 2
    assert run.arrays["kernels/conv1"][-1].array.shape == (32, 1, 5, 5)
    assert {"throughput/examples_per_s", "lr/group0", "train/loss"} <= run.metrics.keys()
    size = sum(p.stat().st_size for p in run.source.parent.iterdir())
    assert size < 2 << 20


def test_dashboard_draws_baseline_beside_learned_metric(run, monkeypatch):
    panels = [p for p in model.default_panels([run]) if "val/psnr" in p.keys or "val/ssim" in p.keys]
    assert [p.keys for p in panels] == [["val/psnr", "val/psnr_bicubic"], ["val/ssim", "val/ssim_bicubic"]]
    assert model.best_panel(model.default_panels([run]), run) is not None
    drawn, plot = [], [None]
    real_begin, real_line = app.implot.begin_plot, app.implot.plot_line

    def begin(name, *a):
        plot[0] = name
        return real_begin(name, *a)

    def line(label, *a):
        drawn.append((plot[0], label.split("##")[0]))
        return real_line(label, *a)

    monkeypatch.setattr(app.implot, "begin_plot", begin)
    monkeypatch.setattr(app.implot, "plot_line", line)
    dash = app.Dashboard([run], size=(1200, 700), panels=["Task metrics"], columns=2)
    try:
        rgba = dash.render()
    finally:
        dash.close()
    assert rgba.shape == (700, 1200, 4) and len(np.unique(rgba.reshape(-1, 4), axis=0)) > 50
    plots = {}
    for name, label in drawn:
        plots.setdefault(name, set()).add(label)
    assert any({"val/psnr", "val/psnr_bicubic"} <= labels and "val/ssim" not in labels
               for labels in plots.values()), plots
    assert any({"val/ssim", "val/ssim_bicubic"} <= labels for labels in plots.values()), plots


def test_panels_of_hidden_runs_wait_in_the_list():
    """With every bundled run loaded and only the digits MLP shown (what ``caliper view`` opens
    on), the super-resolution run's dB and SSIM panels are not opened empty."""
    from caliper_vk.runs import example_paths

    runs = [load_run(p) for p in example_paths()]
    sr = [["val/psnr", "val/psnr_bicubic"], ["val/ssim", "val/ssim_bicubic"]]
    for shown, want in ((["digits_mlp"], [["val/accuracy"]]), (["super_resolution"], sr)):
        dash = app.Dashboard(runs, size=(400, 300), shown=shown)
        try:
            opened = [p.keys for p, on in zip(dash.panels, dash.enabled, strict=True) if on]
        finally:
            dash.close()
        assert [k for k in opened if k[0].startswith("val/") and "loss" not in k[0]] == want
