"""The exponential moving average drawn beside raw traces (the curve view, the dashboard).

``y_0 = x_0``, ``y_k = alpha * y_(k-1) + (1 - alpha) * x_k`` over the finite samples
(non-finite ones are skipped, not propagated), in float64. Evaluated in blocks: within a
block the recurrence is a scaled cumulative sum, so a million samples take a few numpy
calls per block instead of a Python step per sample; blocks are short enough that
``alpha ** -len`` stays far from overflow. The result equals the sequential recurrence to
a few ulps.
"""

from __future__ import annotations

import math

import numpy as np

MAX_BLOCK = 4096


def ema_of(x: np.ndarray, alpha: float) -> np.ndarray:
    """The EMA of ``x`` (all finite), float64."""
    x = np.asarray(x, np.float64)
    out = np.empty(len(x))
    if not len(x):
        return out
    if alpha <= 0.0:
        out[:] = x
        return out
    # alpha ** -(block - 1) below ~1e200: no overflow, and plenty of headroom for the sums
    block = int(min(MAX_BLOCK, max(1, 1 + 460.0 / -math.log(alpha)))) if alpha < 1.0 else MAX_BLOCK
    out[0] = prev = x[0]
    start = 1
    while start < len(x):
        seg = x[start:start + block]
        k = np.arange(len(seg), dtype=np.float64)
        up = alpha ** -k  # alpha^-(j - start)
        down = alpha ** k  # alpha^(k - start)
        y = down * (alpha * prev + (1.0 - alpha) * np.cumsum(seg * up))
        out[start:start + len(seg)] = y
        prev = y[-1]
        start += len(seg)
    return out


def ema(values: np.ndarray, alpha: float, gaps: str = "nan") -> np.ndarray:
    """EMA over the finite samples of ``values`` (float64). At non-finite samples the result
    is NaN (``gaps="nan"``: the gap stays visible) or the last average (``gaps="hold"``);
    before the first finite sample it is NaN either way."""
    v = np.asarray(values, np.float64)
    finite = np.isfinite(v)
    out = np.full(len(v), np.nan)
    out[finite] = ema_of(v[finite], alpha)
    if gaps == "hold" and not finite.all():
        idx = np.where(finite, np.arange(len(v)), -1)
        np.maximum.accumulate(idx, out=idx)
        held = idx >= 0
        out[held] = out[idx[held]]
    return out
