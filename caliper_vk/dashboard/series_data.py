"""The series behind the dashboard's scalar panels, on the axis shown: x and y with their
placeholders and NaN/Inf samples picked out once, the smoothed trace, per-pixel-column envelopes
(from the series' min/max pyramid where the samples are its own), and the scale decisions each
panel caches (robust, flat, zero-based maxima, x span).

A mixin of :class:`~caliper_vk.dashboard.scalars.ScalarPanels` (state lives on the Dashboard).
"""

from __future__ import annotations

import numpy as np

from ..record import pyramid
from ..record.mapped import item
from . import model


class SeriesData:
    """What the scalar panels read of their series (cached per axis, run and panel)."""

    def _robust(self, panel: model.Panel) -> tuple[float, float] | None:
        return self._cached("robust", panel, model.robust_limits)

    def _cached(self, what: str, panel: model.Panel, compute):
        """``compute(runs, panel)``, once per panel and set of runs shown."""
        key = (what, panel.title, tuple(panel.keys))
        if key not in self._cache:
            self._cache[key] = compute(self.runs, panel)
        return self._cache[key]

    def _flat(self, panel: model.Panel) -> tuple[float, float] | None:
        key = ("flat", panel.title, tuple(panel.keys))
        if key not in self._cache:
            self._cache[key] = model.flat_limits(self.runs, panel)
        return self._cache[key]

    def _y_max(self, panel: model.Panel) -> float:
        """The largest finite value of a panel's series in every run (for zero-based panels)."""
        key = ("ymax", panel.title, tuple(panel.keys))
        hit = self._cache.get(key)
        if hit is None:
            tops = [top for run in self.runs for k in panel.keys if (s := run.metrics.get(k)) is not None
                    and (top := _finite_max(s)) is not None]
            hit = self._cache[key] = max(tops) if tops else 0.0
        return hit

    def _x_span(self, panel: model.Panel) -> tuple[float, float] | None:
        """The x range of every sample of a scalar panel's series, or None (no range to show)."""
        ends = [t["ends"] for run in self.runs for k in panel.keys  # as drawn (reveal: as revealed)
                if (s := run.metrics.get(k)) is not None and len((t := self._series(run, s))["x"])]
        if not ends:
            return None
        lo, hi = min(e[0] for e in ends), max(e[1] for e in ends)
        return (lo, hi) if hi > lo else None

    def _series(self, run, s) -> dict:
        """A series on the current axis, finite x only, with its placeholder and NaN/Inf samples
        picked out once; cached per axis (a frame only slices it)."""
        key = ("xy", id(run), s.name, self.axis)
        hit = self._cache.get(key)
        if hit is None:
            # series logged together share their step column (see Series): convert it once, and
            # copy nothing that needs no change (a million-step series is 8 MB a column). On the
            # step axis x is the step column itself (integers: model.search_x searches it exactly)
            xkey = ("x", id(run), id(s.step), self.axis)
            x = self._cache.get(xkey)
            if x is None:
                # (a run started from another's state: its steps moved to the parent's step axis)
                x = self._cache[xkey] = (s.step if not run.step_offset else s.step + run.step_offset) \
                    if self.axis == "step" else run.coordinate(self.axis, s.step).astype(np.float64, copy=False)
            y, ph = s.value.astype(np.float64, copy=False), s.placeholder
            okkey = ("finite x", id(x))  # a shared step column is checked once, not per series
            ok = self._cache.get(okkey)
            if ok is None:
                finite_x = x.dtype.kind in "iu" or np.isfinite(x).all()  # (integers are)
                ok = self._cache[okkey] = True if finite_x else np.isfinite(x)
            ph_idx = pyramid.placeholder_index(s)  # (None for most: no full-length mask is built)
            if ok is not True:
                x, y, ph = x[ok], y[ok], ph[ok]
                ph_idx = np.flatnonzero(ph) if ph_idx is not None else None
            # no NaN/Inf sample when the column's extremes are finite (known from the scale
            # decisions): no full-length mask to build
            finite = ok is True and model.all_finite(s)
            bad = np.zeros(0, np.intp) if finite else np.flatnonzero(~np.isfinite(y))
            ph_idx = np.zeros(0, np.intp) if ph_idx is None else ph_idx
            # "whole": the samples are the series' own, so its min/max pyramid (record/pyramid.py)
            # draws its pixel columns; else (an axis that leaves samples out) they are scanned
            hit = self._cache[key] = {
                "x": x, "y": y, "ph": ph_idx, "series": s if ok is True else None,
                "ph_x": x[ph_idx].astype(np.float64), "ph_y": y[ph_idx], "bad_x": x[bad].astype(np.float64),
                "ends": _ends(x) if len(x) else None}
        return hit

    @staticmethod
    def _measured(t: dict, i0: int = 0, i1: int | None = None) -> np.ndarray:
        """The samples ``i0:i1`` of a series as drawn: its values with the placeholders as gaps
        (a copy only where a placeholder lies in the range)."""
        i1 = len(t["y"]) if i1 is None else i1
        y, ph = t["y"][i0:i1], t["ph"]
        inside = ph[(ph >= i0) & (ph < i1)] if len(ph) else ph
        if not len(inside):
            return y
        y = y.copy()
        y[inside - i0] = np.nan
        return y

    def _smoothed(self, run, s, series: dict) -> np.ndarray:
        key = ("smooth", id(run), s.name, self.axis, self.smoothing)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = model.smooth(self._measured(series), self.smoothing)
        return hit

    def _columns(self, run, name, tag, t, y, x0, x1, plot_w):
        """Per-pixel-column min and max of ``y`` (the smoothed trace), or with ``y=None`` of the
        series' measured samples: from its pyramid when the samples are the series' own."""
        key = ("cols", tag, id(run), name, self.axis, x0, x1, plot_w)
        hit = self._cache.get(key)
        if hit is None:
            if len(self._cache) > 512 + 4 * self._series_count:  # pixel columns of zooms gone by
                for k in [k for k in self._cache if k[0] == "cols"]:
                    del self._cache[k]
            if y is None and t["series"] is not None:
                hit = model.envelope_columns(t["x"], t["series"], x0, x1, plot_w, self._edges)
            else:
                hit = model.reduce_columns(t["x"], self._measured(t) if y is None else y, x0, x1, plot_w)
            if not self._layout_pass:  # (that pass's few wide columns are not drawn: not kept)
                self._cache[key] = hit
        return hit


def _ends(x: np.ndarray) -> tuple[float, float]:
    """The first and last x of a column, as floats (a run file's step column: read, not mapped)."""
    return float(item(x, 0)), float(item(x, -1))


def _finite_max(s) -> float | None:
    """The largest finite value of a series (placeholders too), from its pyramid when it has no
    placeholders (the pyramid leaves them out)."""
    if pyramid.placeholder_index(s) is None:
        return model.measured_extremes(s)[1]
    v = s.value[np.isfinite(s.value)]
    return float(v.max()) if len(v) else None
