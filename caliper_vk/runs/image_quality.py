"""PSNR and SSIM in torch, as the super-resolution example run measures them.

Both take batches of single-channel images, shape ``(N, 1, H, W)`` (or ``(N, H, W)``), with
values on a known scale (``peak``: 1.0 for images in [0, 1]), and return one value per image;
the caller averages over the images (the mean of per-image values, the usual reporting rule in
super-resolution papers, is not the PSNR of the pooled error).

- :func:`psnr`: ``10·log10(peak² / MSE)`` in dB, the MSE over every pixel of the image;
  ``+inf`` for a perfect reconstruction.
- :func:`ssim`: the mean of the SSIM map of Wang, Bovik, Sheikh and Simoncelli (2004) over
  the window positions that lie wholly inside the image: a Gaussian window (``sigma`` 1.5,
  truncated at 3.5 sigma: 11x11), ``C1 = (0.01·peak)²``, ``C2 = (0.03·peak)²``, population
  (not sample) covariances. These are the settings of scikit-image's
  ``structural_similarity(..., gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
  data_range=peak)``, which tests/test_super_resolution_metrics.py checks them against.

:func:`crop_border` removes the ``border`` outer pixels first, as SR evaluations do with the
scale factor (the border of an upscaled image depends on how each method pads).
"""

from __future__ import annotations

import torch
from torch.nn import functional

SSIM_SIGMA = 1.5
SSIM_TRUNCATE = 3.5  # window radius in sigmas (scipy's gaussian_filter, as scikit-image uses it)
SSIM_K1, SSIM_K2 = 0.01, 0.03


def _batch(x: torch.Tensor, name: str) -> torch.Tensor:
    if x.ndim == 3:
        x = x.unsqueeze(1)
    if x.ndim != 4 or x.shape[1] != 1:
        raise ValueError(f"{name}: expected single-channel images (N, 1, H, W) or (N, H, W), got shape "
                         f"{tuple(x.shape)}; convert to one channel (e.g. luminance) first")
    return x.double()


def crop_border(x: torch.Tensor, border: int) -> torch.Tensor:
    """``x[..., border:-border, border:-border]`` (``x`` itself when ``border`` is 0)."""
    if border < 0 or 2 * border >= min(x.shape[-2:]):
        raise ValueError(f"border {border} does not fit images of {tuple(x.shape[-2:])} pixels")
    return x[..., border:x.shape[-2] - border, border:x.shape[-1] - border]


def psnr(output: torch.Tensor, target: torch.Tensor, peak: float = 1.0) -> torch.Tensor:
    """Per-image PSNR in dB, ``10·log10(peak² / MSE)``, computed in float64; shape ``(N,)``."""
    a, b = _batch(output, "output"), _batch(target, "target")
    if a.shape != b.shape:
        raise ValueError(f"output {tuple(a.shape)} and target {tuple(b.shape)} differ in shape")
    mse = ((a - b) ** 2).mean(dim=(1, 2, 3))
    return 10.0 * torch.log10(peak * peak / mse)


def gaussian_window(sigma: float = SSIM_SIGMA, truncate: float = SSIM_TRUNCATE) -> torch.Tensor:
    """The normalised 1-D Gaussian of SSIM's window (float64), radius ``int(truncate·sigma + 0.5)``."""
    radius = int(truncate * sigma + 0.5)
    x = torch.arange(-radius, radius + 1, dtype=torch.float64)
    w = torch.exp(-0.5 * (x / sigma) ** 2)
    return w / w.sum()


def ssim(output: torch.Tensor, target: torch.Tensor, peak: float = 1.0,
         sigma: float = SSIM_SIGMA) -> torch.Tensor:
    """Per-image mean SSIM (Wang et al. 2004, Gaussian window), computed in float64; shape ``(N,)``.

    The local means, variances and covariance are Gaussian-weighted averages over each window
    position wholly inside the image (a "valid" convolution: no padding enters the mean).
    """
    a, b = _batch(output, "output"), _batch(target, "target")
    if a.shape != b.shape:
        raise ValueError(f"output {tuple(a.shape)} and target {tuple(b.shape)} differ in shape")
    g = gaussian_window(sigma).to(a.device)
    if min(a.shape[-2:]) < len(g):
        raise ValueError(f"SSIM's {len(g)}x{len(g)} window does not fit images of {tuple(a.shape[-2:])} pixels")

    def blur(x):  # separable: rows, then columns
        x = functional.conv2d(x, g.view(1, 1, 1, -1))
        return functional.conv2d(x, g.view(1, 1, -1, 1))

    mu_a, mu_b = blur(a), blur(b)
    var_a = blur(a * a) - mu_a * mu_a
    var_b = blur(b * b) - mu_b * mu_b
    cov = blur(a * b) - mu_a * mu_b
    c1, c2 = (SSIM_K1 * peak) ** 2, (SSIM_K2 * peak) ** 2
    s = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a ** 2 + mu_b ** 2 + c1) * (var_a + var_b + c2))
    return s.mean(dim=(1, 2, 3))


def window_size(sigma: float = SSIM_SIGMA) -> int:
    """The side of SSIM's square window for ``sigma`` (11 for 1.5)."""
    return 2 * int(SSIM_TRUNCATE * sigma + 0.5) + 1


__all__ = ["crop_border", "gaussian_window", "psnr", "ssim", "window_size"]
