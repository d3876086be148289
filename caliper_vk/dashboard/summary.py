"""The summary a scalar panel of hundreds of series draws instead of each of them.

``watch`` records a norm and an update ratio per parameter tensor: a 7B-parameter model gives about
a thousand series per panel. Drawn one by one they are a thousand plot items (a band each, see
:mod:`.scalars`), hundreds of megabytes of draw lists over a few panels, and no reader can tell a
thousand colours apart. A panel of more than :data:`SUMMARY_TRACES` series therefore draws, per
run, one band over all its series (the exact least and greatest measured value of any of them
over each block of their pyramids no wider than a pixel column, :func:`block_band`: every sample
of every series is inside it, no spike vanishes, and a thousand series cost a thousand reads of a
few kilobytes) and, named and
coloured, the :data:`TOP` series with the highest last measured value (the ones a reader of
per-parameter norms looks for first); a line under the plot states that rule. The cursor readout
and the value table still read every series.
"""

from __future__ import annotations

import math

import numpy as np

from ..record import pyramid
from ..record.mapped import read_range
from . import model

SUMMARY_TRACES = 64  # a panel of more series than this (over the runs shown) draws the summary
TOP = 8  # series drawn and named by the summary
TAIL = 4096  # values read from a series' end to find its last measured one


def last_measured(s) -> float:
    """The last finite value of series ``s`` that is not a placeholder (from its last
    :data:`TAIL` values, read, not mapped); -inf when there is none there."""
    n = len(s.value)
    lo = max(0, n - TAIL)
    v = np.asarray(read_range(s.value, lo, n), np.float64)
    ok = np.isfinite(v) & ~np.asarray(s.placeholder[lo:n], bool)
    at = np.flatnonzero(ok)
    return float(v[at[-1]]) if len(at) else -math.inf


def top_series(runs, panel, k: int = TOP) -> list[tuple[str, str]]:
    """``(run name, key)`` of the ``k`` series of ``panel`` with the highest last measured value
    over ``runs`` (ties: in panel order, run by run), highest first."""
    ranked = []
    for r, run in enumerate(runs):
        for j, key in enumerate(panel.keys):
            s = run.metrics.get(key)
            if s is not None and len(s):
                ranked.append((-last_measured(s), j, r, run.name, key))
    ranked.sort()
    return [(name, key) for _, _, _, name, key in ranked[:k]]


def rule_text(count: int, runs: int, shown: int) -> str:
    """The line under a summarised plot that says what it draws."""
    band = "a band per run, in its colour," if runs > 1 else "the grey band"
    return (f"{count} series: {band} = all of them (min to max, every sample); "
            f"named: the {shown} highest at their last step")


def block_band(x: np.ndarray, series: list, x0: float, x1: float, columns: int):
    """``(x, lo, hi)`` of the band over ``series`` (all sampled at the same x column ``x``, each a
    :class:`~caliper_vk.record.run.Series` whose samples are ``x``'s) in ``[x0, x1]`` drawn
    ``columns`` pixel columns wide, or None when a column holds fewer than FANOUT samples (the
    caller reduces pixel columns exactly: few samples). Each point is a block of the pyramids'
    finest level whose blocks are no wider than a pixel column (``FANOUT**k`` samples), at the
    middle of its steps, with the exact least and greatest measured value of every series over
    it: read as one slice of that level per series, never the samples."""
    n = len(x)
    i0 = max(0, model.search_x(x, x0, "left") - 1)
    i1 = min(n, model.search_x(x, x1, "right") + 1)
    per_column = (i1 - i0) / max(columns, 1)
    levels = len(pyramid.level_rows(n))
    k = 0
    while k < levels and pyramid.FANOUT ** (k + 1) <= per_column:
        k += 1
    if k == 0:
        return None
    b = pyramid.FANOUT ** k
    r0, r1 = i0 // b, -(-i1 // b)
    steps = read_range(x, r0 * b, min(n, r1 * b))  # (in a run file: read once, nothing mapped)
    first = np.arange(r1 - r0) * b
    last = np.minimum(first + b, len(steps)) - 1
    xc = (steps[first].astype(np.float64) + steps[last].astype(np.float64)) * 0.5
    lo = hi = None
    for s in series:
        rows = pyramid.of_series(s).levels[k - 1]
        part = read_range(rows.reshape(-1), 2 * r0, 2 * r1).reshape(-1, 2) if rows.flags.c_contiguous \
            else np.asarray(rows[r0:r1])
        lo, hi = fold(lo, hi, part[:, 0], part[:, 1])
    return xc, lo, hi


def fold(lo: np.ndarray | None, hi: np.ndarray | None, a: np.ndarray, b: np.ndarray):
    """The running envelope ``(lo, hi)`` widened by one series' columns ``(a, b)`` (NaN: no sample)."""
    if lo is None:
        return np.array(a, np.float64), np.array(b, np.float64)
    return np.fmin(lo, a), np.fmax(hi, b)
