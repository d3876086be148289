"""The summary a scalar panel of hundreds of series draws instead of each of them.

``watch`` records a norm and an update ratio per parameter tensor: a 7B-parameter model gives about
a thousand series per panel. Drawn one by one they are a thousand plot items (a band each, see
:mod:`.scalars`), hundreds of megabytes of draw lists over a few panels, and no reader can tell a
thousand colours apart. A panel of more than :data:`SUMMARY_TRACES` series therefore draws, per
run, one band over all its series (the least and the greatest measured value of any of them in
each pixel column: every sample of every series is inside it, no spike vanishes) and, named and
coloured, the :data:`TOP` series with the highest last measured value (the ones a reader of
per-parameter norms looks for first); a line under the plot states that rule. The cursor readout
and the value table still read every series.
"""

from __future__ import annotations

import math

import numpy as np

from ..record.mapped import read_range

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
    return (f"{count} series: {band} = all of them (min to max per pixel column); "
            f"named: the {shown} highest at their last step")


def fold(lo: np.ndarray | None, hi: np.ndarray | None, a: np.ndarray, b: np.ndarray):
    """The running envelope ``(lo, hi)`` widened by one series' columns ``(a, b)`` (NaN: no sample)."""
    if lo is None:
        return np.array(a, np.float64), np.array(b, np.float64)
    return np.fmin(lo, a), np.fmax(hi, b)
