"""A x2 super-resolution CNN on generated images, measured against a bicubic baseline.

The data. Greyscale images in [0, 1] drawn from a seed (:func:`make_images`): a linear
gradient background, a few discs, rectangles and half-planes of random grey levels with hard
edges, and sine-stripe textures inside some of them. No file is read or downloaded. A
low-resolution input is the high-resolution image averaged over 2x2 blocks
(``avg_pool2d``); the task is to get the high-resolution image back. 1,024 training images
of 32x32 (inputs 16x16); the fixed validation set is 32 images of 48x48 (inputs 24x24) from
another seed.

The model (ESPCN-style, Shi et al. 2016, with a bicubic skip): three convolutions on the
low-resolution input (5x5 to 32 channels, ReLU; 3x3 to 16, ReLU; 3x3 to 4) and a pixel
shuffle that turns the 4 channels into a 2x larger image; this is added to the bicubic
upscale of the input, so the network learns the detail bicubic misses. Adam on the MSE,
its rate cut to 0.3x after two thirds of the epochs. The last convolution
starts at a tenth of its random initialisation: at step 0 the model is a little worse than
bicubic (about 0.8 dB here), and training has to earn the difference (about 2.6 dB after 24
epochs of 32 steps, some 20 s on one CPU thread).

Recorded beyond the common set of every example run (``watch``: gradient and weight norms,
update ratios, learning rate, throughput, timing, memory, weight histograms):

- ``train/loss`` (MSE of the mini-batch) at every step; ``val/loss`` (MSE over the
  validation set) at step 0 and after every epoch;
- ``val/psnr`` and ``val/ssim`` of the model, and ``val/psnr_bicubic`` and
  ``val/ssim_bicubic`` of the baseline (``torch.nn.functional.interpolate``, bicubic,
  ``align_corners=False``) on the same images, at the same steps: the baseline is a series
  of its own, drawn on the same panel, so every epoch reads against it; the definitions
  (peak, channel, crop, SSIM window and constants, averaging) are recorded with ``define``;
- the best is the highest ``val/psnr`` (``Recorder(best="val/psnr", best_goal="max")``);
- array probes of validation image 6 (stripes, a disc, edges): ``sr/input`` (24x24), ``sr/bicubic`` and
  ``sr/target`` (48x48) once, ``sr/output`` and ``sr/error`` (output - target) after every
  epoch; the first layer's kernels ``kernels/conv1`` (32, 1, 5, 5).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional

from ..record import Recorder, watch
from .common import deterministic, train_loop
from .common import steps_per_epoch as count_steps
from .image_quality import SSIM_K1, SSIM_K2, SSIM_SIGMA, crop_border, psnr, ssim, window_size

SCALE = 2


@dataclass(frozen=True)
class SRConfig:
    train_size: int = 1024
    train_px: int = 32
    val_size: int = 32
    val_px: int = 48
    epochs: int = 24
    batch: int = 32
    lr: float = 3e-3
    residual_init: float = 0.1  # the last convolution's initial weights and bias, scaled by this
    seed: int = 0
    probe_index: int = 6  # the validation image whose input, output and error are recorded (stripes,
    # a disc and three edges: detail that bicubic blurs)


# -- generated images ---------------------------------------------------------------------
def _uniform(g: torch.Generator, lo: float, hi: float) -> float:
    return lo + (hi - lo) * float(torch.rand((), generator=g))


def _shape(yy: torch.Tensor, xx: torch.Tensor, g: torch.Generator, px: int) -> torch.Tensor:
    """The mask of one random disc, rectangle or half-plane (hard edges)."""
    kind = int(torch.randint(3, (), generator=g))
    cy, cx = _uniform(g, 0, px), _uniform(g, 0, px)
    if kind == 0:
        r = _uniform(g, 3, px / 3)
        return (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
    if kind == 1:
        h, w = _uniform(g, 4, px / 2), _uniform(g, 4, px / 2)
        return ((yy - cy).abs() <= h / 2) & ((xx - cx).abs() <= w / 2)
    angle = _uniform(g, 0, 2 * math.pi)
    return (yy - cy) * math.cos(angle) + (xx - cx) * math.sin(angle) > 0


def make_images(n: int, px: int, seed: int) -> torch.Tensor:
    """``n`` generated greyscale images of ``px`` x ``px`` in [0, 1], shape (n, 1, px, px), float32.

    Each: a linear gradient, then 2-5 shapes (disc, rectangle, half-plane) painted over it in
    random grey levels, a third of them filled with sine stripes (0.04-0.2 cycles per pixel,
    below the 0.25 the 2x2-averaged input can carry). The same ``seed`` gives the same images.
    """
    g = torch.Generator().manual_seed(seed)
    c = torch.arange(px, dtype=torch.float64) + 0.5
    yy, xx = torch.meshgrid(c, c, indexing="ij")
    out = torch.empty(n, 1, px, px)
    for i in range(n):
        t = _uniform(g, 0, 2 * math.pi)
        img = _uniform(g, 0.2, 0.8) + _uniform(g, -0.4, 0.4) * (math.cos(t) * xx + math.sin(t) * yy) / px
        for _ in range(int(torch.randint(2, 6, (), generator=g))):
            mask = _shape(yy, xx, g, px)
            fill = torch.full_like(img, _uniform(g, 0, 1))
            if _uniform(g, 0, 1) < 1 / 3:
                f, a = _uniform(g, 0.04, 0.2), _uniform(g, 0, 2 * math.pi)
                phase = 2 * math.pi * f * (math.cos(a) * xx + math.sin(a) * yy) + _uniform(g, 0, 2 * math.pi)
                fill = fill + _uniform(g, 0.1, 0.35) * torch.sin(phase)
            img = torch.where(mask, fill, img)
        out[i, 0] = img.clamp(0, 1).float()
    return out


def downscale(hr: torch.Tensor) -> torch.Tensor:
    """The low-resolution input: the mean of each 2x2 block."""
    return functional.avg_pool2d(hr, SCALE)


def bicubic(lr: torch.Tensor) -> torch.Tensor:
    """The baseline: torch's bicubic upscale (``align_corners=False``), clamped to [0, 1]."""
    return functional.interpolate(lr, scale_factor=SCALE, mode="bicubic", align_corners=False).clamp(0, 1)


# -- the model ---------------------------------------------------------------------------
class ESPCN(nn.Module):
    """Three convolutions on the input, a pixel shuffle to 2x, added to the bicubic upscale."""

    def __init__(self, seed: int, residual_init: float = 1.0):
        super().__init__()
        torch.manual_seed(seed)
        self.body = nn.Sequential(OrderedDict([
            ("conv1", nn.Conv2d(1, 32, 5, padding=2)), ("relu1", nn.ReLU()),
            ("conv2", nn.Conv2d(32, 16, 3, padding=1)), ("relu2", nn.ReLU()),
            ("conv3", nn.Conv2d(16, SCALE * SCALE, 3, padding=1)),
        ]))
        self.shuffle = nn.PixelShuffle(SCALE)
        with torch.no_grad():  # a small residual at first: step 0 starts near the baseline, not far below it
            self.body.conv3.weight.mul_(residual_init)
            self.body.conv3.bias.mul_(residual_init)

    def forward(self, lr: torch.Tensor) -> torch.Tensor:
        up = functional.interpolate(lr, scale_factor=SCALE, mode="bicubic", align_corners=False)
        return up + self.shuffle(self.body(lr))


# -- what is measured ----------------------------------------------------------------------
def define_metrics(rec, cfg: SRConfig) -> None:
    """The definitions the dashboard shows on the panels."""
    n, px, crop = cfg.val_size, cfg.val_px, SCALE
    side, win = px - 2 * crop, window_size()
    where = (f"one grey channel in [0, 1], images clamped to [0, 1], {crop}-pixel border cropped "
             f"({side}x{side} of {px}x{px}); mean over the {n} validation images of the per-image value")
    psnr_text = f"10·log10(peak²/MSE), peak 1.0, MSE over the cropped pixels; {where}"
    ssim_text = (f"mean SSIM map (Wang et al. 2004): {win}x{win} Gaussian window, σ {SSIM_SIGMA}, "
                 f"K1 {SSIM_K1}, K2 {SSIM_K2}, L 1, population covariances, valid positions only; {where}")
    rec.define("val/psnr", unit="dB", goal="max", description=f"the model's output: {psnr_text}")
    rec.define("val/psnr_bicubic", unit="dB", goal="max",
               description=f"baseline, bicubic upscale of the same inputs (torch interpolate, align_corners "
                           f"False): {psnr_text}")
    rec.define("val/ssim", unit="SSIM", goal="max", description=f"the model's output: {ssim_text}")
    rec.define("val/ssim_bicubic", unit="SSIM", goal="max",
               description=f"baseline, bicubic upscale of the same inputs: {ssim_text}")
    rec.define("train/loss", unit="MSE", goal="min",
               description=f"mean squared error of the training mini-batch ({cfg.train_px}x{cfg.train_px} "
                           f"targets, all pixels), before the update of that step")
    rec.define("val/loss", unit="MSE", goal="min",
               description=f"mean squared error over all pixels of the {n} validation images (uncropped, "
                           f"unclamped output)")


def quality(output: torch.Tensor, target: torch.Tensor) -> tuple[float, float]:
    """Mean PSNR (dB) and mean SSIM over a batch, as :func:`define_metrics` states."""
    out = crop_border(output.clamp(0, 1), SCALE)
    ref = crop_border(target, SCALE)
    return float(psnr(out, ref).mean()), float(ssim(out, ref).mean())


def train(out_dir, cfg: SRConfig = SRConfig(), name: str = "super_resolution", stop_after: int | None = None,
          on_step=None) -> Path:
    """Train and record the x2 model into ``out_dir``; returns its ``run.json`` (``stop_after``
    and ``on_step`` as in :func:`.digits_mlp.train`)."""
    out_dir = Path(out_dir)
    with deterministic():
        hr_train = make_images(cfg.train_size, cfg.train_px, cfg.seed)
        hr_val = make_images(cfg.val_size, cfg.val_px, cfg.seed + 1000)
        lr_train, lr_val = downscale(hr_train), downscale(hr_val)
        base = bicubic(lr_val)
        base_psnr, base_ssim = quality(base, hr_val)
        model = ESPCN(cfg.seed, cfg.residual_init)
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        spe = count_steps(cfg.train_size, cfg.batch)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=spe * (2 * cfg.epochs // 3), gamma=0.3)
        config = {**asdict(cfg), "scale": SCALE,
                  "model": "ESPCN-style: conv5x5(1->32) relu conv3x3(32->16) relu conv3x3(16->4) pixel "
                           "shuffle x2, plus the bicubic upscale of the input",
                  "optimizer": "Adam, x0.3 after two thirds of the epochs",
                  "data": f"generated greyscale images (gradients, discs, rectangles, half-planes, stripes): "
                          f"{cfg.train_size} of {cfg.train_px}px for training, {cfg.val_size} of "
                          f"{cfg.val_px}px for validation; inputs are 2x2 block means",
                  "parameters": sum(p.numel() for p in model.parameters())}
        rec = Recorder(out_dir, name=name, config=config, steps_per_epoch=spe, best="val/psnr",
                       best_goal="max", overwrite=True)
        define_metrics(rec, cfg)
        w = watch(model, opt, rec, histograms_every=spe, budget=None,  # every step, on any machine
                  activations=["body.relu1", "body.relu2"])
        k = cfg.probe_index
        example = f"validation image {k}"
        rec.probe("sr/input", lr_val[k, 0], example=f"{example}, input ({cfg.val_px // SCALE}px)", kind="image")
        rec.probe("sr/bicubic", base[k, 0], example=f"{example}, bicubic baseline", kind="image")
        rec.probe("sr/target", hr_val[k, 0], example=f"{example}, target ({cfg.val_px}px)", kind="image")

        def validate():
            with w.validation():
                out = model(lr_val)
            p, s = quality(out, hr_val)
            rec.log({"val/loss": functional.mse_loss(out, hr_val), "val/psnr": p, "val/ssim": s,
                     "val/psnr_bicubic": base_psnr, "val/ssim_bicubic": base_ssim})
            rec.probe("sr/output", out[k, 0].clamp(0, 1), module="shuffle + bicubic", example=example,
                      kind="image")
            rec.probe("sr/error", out[k, 0].clamp(0, 1) - hr_val[k, 0], example=f"{example}: output - target",
                      kind="error")
            rec.probe("kernels/conv1", model.body.conv1.weight, module="body.conv1", kind="kernel")

        return train_loop(rec, w, model, opt, seed=cfg.seed, epochs=cfg.epochs, stop_after=stop_after,
                          n=cfg.train_size, batch=cfg.batch,
                          loss_of=lambda idx: functional.mse_loss(model(lr_train[idx]), hr_train[idx]),
                          validate=validate, on_step=on_step, sched=sched)
