"""The dashboard's y scales, apart from any drawing: which panels open on a log axis, limits that
ignore far outliers (as TensorBoard's "ignore outliers in chart scaling"), a constant's ±10%, a
log axis padded by a share of its decades, memory read from zero. Re-exported by
:mod:`caliper_vk.dashboard.model`; plain numpy over :class:`~caliper_vk.record.Run`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..record import pyramid
from ..record.mapped import read_range, release_pages

if TYPE_CHECKING:
    from ..record import Run
    from .model import Panel

CHUNK = 1 << 18  # values per chunk of a long scan (2 MB of float64)
ROBUST_SAMPLE = 32_768  # values per series the robust scale is estimated from
SAMPLE_RUNS = 64  # runs of consecutive values that sample is read in (at most)
SAMPLE_TOTAL = 262_144  # values a panel's robust scale is estimated from at most (all its series)
OUTLIER_SPANS = 2.0  # how far beyond the 2nd-98th percentile range (in its spans) an outlier lies


def _finite_extremes(v: np.ndarray, raw: bool = False) -> tuple[float | None, float | None]:
    """(min, max) of the finite values of ``v`` (None, None when there are none), without a
    filtered copy unless a NaN or an infinity is present; ``raw``: of every value (NaN when
    there is one). A long column is scanned in chunks whose pages are handed back as it goes
    (a run file's column is memory-mapped: scanning it whole would make all of it resident)."""
    if len(v) > CHUNK:
        parts = []
        for at in range(0, len(v), CHUNK):
            part = v[at:at + CHUNK]
            parts.append(_finite_extremes(part, raw))
            release_pages(part)
        found = [p for p in parts if p[0] is not None]
        if not found:
            return None, None
        if raw and any(math.isnan(p[0]) or math.isnan(p[1]) for p in found):
            return math.nan, math.nan
        return min(p[0] for p in found), max(p[1] for p in found)
    if not len(v):
        return None, None
    lo, hi = float(np.min(v)), float(np.max(v))
    if raw:
        return lo, hi
    if not (math.isfinite(lo) and math.isfinite(hi)):
        f = v[np.isfinite(v)]
        if not len(f):
            return None, None
        lo, hi = float(f.min()), float(f.max())
    return lo, hi


def measured_extremes(s) -> tuple[float | None, float | None]:
    """(min, max) of a series' finite measured values (placeholders left out), computed once per
    value array: the scale decisions of every panel read them, and a million-step column costs
    milliseconds to scan."""
    memo = s.__dict__.get("_extremes")
    if memo is not None and memo[0] is s.value and memo[1] is s.placeholder:
        return memo[2]
    if s.pyramid is not None or len(s.value) >= pyramid.MIN_LENGTH:  # from its pyramid
        out = pyramid.extremes_of(s)
    else:
        v = s.value[~s.placeholder] if s.placeholder.any() else s.value
        out = _finite_extremes(v)
    s.__dict__["_extremes"] = (s.value, s.placeholder, out)
    return out


def all_finite(s) -> bool:
    """True when every value of a series is finite (no NaN or infinity), from the column's raw
    extremes (computed once per value array: a NaN or an infinity makes them non-finite)."""
    memo = s.__dict__.get("_raw_extremes")
    if memo is None or memo[0] is not s.value:
        known = pyramid.of_series(s).nonfinite if s.pyramid is not None or len(s.value) >= pyramid.MIN_LENGTH \
            else None  # the pyramid counts them (not a revealed prefix's, unless the run had none)
        if known is not None:
            ok = known == 0
        else:
            lo, hi = _finite_extremes(s.value, raw=True) if len(s.value) else (0.0, 0.0)
            ok = math.isfinite(lo) and math.isfinite(hi)
        memo = s.__dict__["_raw_extremes"] = (s.value, ok)
    return memo[1]


def panel_series(runs: list[Run], panel: Panel):
    """Every non-empty series a panel plots, run by run."""
    for run in runs:
        for k in panel.keys:
            s = run.metrics.get(k)
            if s is not None and len(s):
                yield s


def log_limits(runs: list[Run], panel: Panel, pad: float = 0.05) -> tuple[float, float] | None:
    """Y limits of a log axis: the positive finite values' extremes widened by ``pad`` of the
    span in decades on each side (at least 5% of a value), so a series at an extreme (a learning
    rate of 1 in a sweep down to 1e-5) is drawn inside the plot, not on its frame. None when no
    value is positive."""
    lo, hi = math.inf, 0.0
    for s in panel_series(runs, panel):
        vmin, vmax = measured_extremes(s)
        if vmin is None or vmax <= 0:
            continue
        if vmin <= 0:  # a log axis leaves those out: the smallest positive value sets the floor
            v = s.value[~s.placeholder] if s.placeholder.any() else s.value
            vmin = float(v[(v > 0) & np.isfinite(v)].min())
        lo, hi = min(lo, vmin), max(hi, vmax)
    if hi <= 0 or lo == math.inf:
        return None
    factor = max(1.05, (hi / lo) ** pad)
    return lo / factor, hi * factor


def spans_decades(runs: list[Run], panel: Panel, decades: float = 2.0) -> bool:
    """True when every finite value of a scalar panel's series is positive and they span more
    than ``decades`` powers of ten: such a panel opens on a logarithmic axis (a loss spike of
    700 over losses of 0.05 otherwise flattens every curve onto the floor)."""
    if panel.kind != "scalar" or zero_based(panel):
        return False
    lo, hi = math.inf, 0.0
    for s in panel_series(runs, panel):
        vmin, vmax = measured_extremes(s)
        if vmin is None:
            continue
        if vmin <= 0:
            return False
        lo, hi = min(lo, vmin), max(hi, vmax)
    return hi > 0 and lo < math.inf and hi / lo > 10.0 ** decades


def percentiles(v: np.ndarray, qs) -> list[float]:
    """``np.percentile(v, qs)`` (its default linear interpolation) from one ``np.partition``:
    np.percentile sorts more than it needs, and its first call imports numpy.ma (together
    about 60 ms of a 1M-step run's first frame)."""
    n = len(v)
    pos = [q / 100.0 * (n - 1) for q in qs]
    below = [min(math.floor(p), n - 1) for p in pos]
    part = np.partition(v, sorted({k for i in below for k in (i, min(i + 1, n - 1))}))
    return [float(part[i] + (part[min(i + 1, n - 1)] - part[i]) * (p - i))
            for i, p in zip(below, pos, strict=True)]


def robust_limits(runs: list[Run], panel: Panel) -> tuple[float, float] | None:
    """Y limits that ignore outliers, as TensorBoard's "ignore outliers in chart scaling" does:
    the 2nd..98th percentile of the panel's finite measured values, padded by a tenth of that
    span on each side, on each side where some value lies more than OUTLIER_SPANS spans beyond
    it (else that side keeps the true extreme); None when nothing lies that far, or there are
    too few values to call any an outlier. Clipped values are still read by the cursor and
    are marked at the plot's edge (see the app)."""
    vals = []
    series = list(panel_series(runs, panel))
    # the percentiles of an even sample: a scale, not a statistic (ROBUST_SAMPLE values a series, in
    # all at most SAMPLE_TOTAL: a panel of a thousand per-parameter norms is not read whole)
    each = max(min(ROBUST_SAMPLE, SAMPLE_TOTAL // max(len(series), 1)), SAMPLE_RUNS * 16)
    for s in series:
        if len(s.value) > each:
            v = _sample(s, each)
        else:
            v = read_range(s.value, 0, len(s.value))  # (from a run file: read, not mapped)
            ph = pyramid.placeholder_index(s)
            if ph is not None:
                v = np.delete(v, ph)
        vals.append(v[np.isfinite(v)])
    v = np.concatenate(vals) if vals else np.zeros(0)
    if len(v) < 20:
        return None
    lo, hi = percentiles(v, (2.0, 98.0))
    pad = (hi - lo) * 0.1 if hi > lo else max(abs(hi) * 0.1, 1e-12)
    lo, hi = lo - pad, hi + pad
    vmin, vmax = None, None
    for s in panel_series(runs, panel):  # the true extremes, every sample
        a, b = measured_extremes(s)
        if a is not None:
            vmin, vmax = (a, b) if vmin is None else (min(vmin, a), max(vmax, b))
    if vmin is None or (vmin >= lo and vmax <= hi):
        return None
    # keep the full range on a side whose extreme is within two spans of the robust edge: only
    # far outliers (a spike, a collapse to zero) are put at the edge, never a noisy trace's tails
    span = hi - lo
    if vmin >= lo - OUTLIER_SPANS * span:
        lo = min(lo, vmin)
    if vmax <= hi + OUTLIER_SPANS * span:
        hi = max(hi, vmax)
    return (lo, hi) if (vmin < lo or vmax > hi) else None


def _sample(s, count: int) -> np.ndarray:
    """About ``count`` measured values of a long series, evenly spread: up to SAMPLE_RUNS runs of
    consecutive samples, read with ``pread`` from a run file (a strided read of a mapped column
    would map all of it: a folio per touch, record/mapped.py)."""
    n = len(s.value)
    runs = min(max(count // 512, 1), SAMPLE_RUNS)  # (a small sample: a few reads, not 64 tiny ones)
    run = -(-count // runs)
    starts = np.linspace(0, n - run, runs).astype(np.int64)
    v = np.concatenate([read_range(s.value, a, a + run) for a in starts.tolist()])
    ph = pyramid.placeholder_index(s)
    if ph is not None:
        keep = ~np.isin(starts[:, None] + np.arange(run), ph).ravel()
        v = v[keep]
    return v


def flat_limits(runs: list[Run], panel: Panel) -> tuple[float, float] | None:
    """Y limits for a panel whose every finite value is one number (a constant learning rate):
    ±10% around it, so 0.003 does not sit on an axis from -0.5 to 0.5 that reads as zero."""
    seen = set()
    for s in panel_series(runs, panel):
        a, b = (measured_extremes(s) if pyramid.placeholder_index(s) is None
                else _finite_extremes(s.value))  # (every value: placeholders too)
        if a is not None:
            seen.update((a, b))
            if len(seen) > 1:
                return None
    if len(seen) != 1:
        return None
    v = seen.pop()
    pad = abs(v) * 0.1 if v != 0 else 1.0
    return v - pad, v + pad


def zero_based(panel: Panel) -> bool:
    """Panels read on a scale that starts at zero: memory (a 1% change must not look like a
    doubling: 4.28e8 to 4.32e8 bytes on an auto-fitted axis fills the panel)."""
    return panel.kind == "scalar" and panel.options.get("group") == "memory"
