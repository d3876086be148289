"""Compact axis ticks for plots too narrow for ImPlot's own (the confusion panel's recall and
precision plot is often ~100 px wide, where full numbers ran into each other)."""

from __future__ import annotations

import numpy as np


def sparse_ticks(lo: float, hi: float, most: int = 3) -> list[tuple[float, str]]:
    """Two to ``most`` round values in ``[lo, hi]`` (steps of 1, 2, 2.5 or 5 times a power of ten;
    one when no step gives two) with compact labels ("250k", "1M", "0.5"): for plots too narrow
    for ImPlot's own ticks, whose full numbers run into each other."""
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi <= lo:
        return []
    e = int(np.floor(np.log10(hi - lo)))
    single = None
    for step in sorted(m * 10.0 ** k for k in range(e - 1, e + 2) for m in (1, 2, 2.5, 5)):
        first = np.ceil(lo / step) * step
        values = [float(first + k * step) for k in range(int(np.floor((hi - first) / step)) + 1)]
        if 2 <= len(values) <= most:
            return [(v, _compact(v)) for v in values]
        if len(values) == 1 and single is None:
            single = values
    return [(v, _compact(v)) for v in single or []]


def _compact(v: float) -> str:
    """``v`` in at most a few characters: 250000 -> "250k", 1e6 -> "1M" (as written when shorter)."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            short = f"{v / scale:g}{suffix}"
            return short if len(short) <= 5 else f"{v:g}"
    return f"{v:g}"
