"""Scalar panels of the dashboard: every run's raw series, its smoothed trace beside it (never
instead of it), best-so-far marks and saved snapshots, reduced to the plot's pixel columns
(:func:`.model.reduce_columns`) so a million-step run draws as fast as a short one.

A mixin of :class:`~caliper_vk.dashboard.app.Dashboard`: it reads the dashboard's runs, axis,
cursor, smoothing and caches.
"""

from __future__ import annotations

import numpy as np
from imgui_bundle import imgui, implot

from ..record import Run
from . import model
from .style import PALETTE, PANEL_HEIGHT, color, line_spec


class ScalarPanels:
    def _scalar_panel(self, panel: model.Panel, index: int) -> None:
        units = {s.unit for run in self.runs for k in panel.keys if (s := run.metrics.get(k)) and s.unit}
        imgui.text(panel.title + (f"  [{', '.join(sorted(units))}]" if units else ""))
        imgui.same_line()
        changed, log = imgui.checkbox(f"log y##log{index}", index in self.log_y)
        if changed:
            (self.log_y.add if log else self.log_y.discard)(index)
        span = None
        if index not in self._limits:  # a new plot, or a new x axis: show every sample
            span = self._x_span(panel)
            if span is None:
                implot.set_next_axis_to_fit(implot.ImAxis_.x1)
            else:  # set, not fitted: a fit would come from this frame's columns, and differ
                implot.set_next_axis_limits(implot.ImAxis_.x1, *span, imgui.Cond_.always)
        if self._begin_plot(f"##plot{index}", imgui.ImVec2(-1, PANEL_HEIGHT)):
            implot.setup_axes(model.AXIS_LABELS[self.axis], "", 0, implot.AxisFlags_.auto_fit)
            if index in self.log_y:  # values <= 0 have no place on it and are left out by ImPlot
                implot.setup_axis_scale(implot.ImAxis_.y1, implot.Scale_.log10)
            implot.setup_legend(implot.Location_.north_east)
            spes = {(r.meta or {}).get("steps_per_epoch") for r in self.runs}
            # an upper epoch axis only when every run maps steps to epochs the same way; otherwise it
            # would mislabel some run (switch the x axis to "epoch" to compare by epoch)
            if self.axis == "step" and len(spes) == 1 and None not in spes:
                implot.setup_axis(implot.ImAxis_.x2, "epoch", implot.AxisFlags_.no_grid_lines)
                lim = self._limits.get(index)  # the step axis of the last frame (x2 is set up first)
                if lim is not None and lim[1] > lim[0]:
                    spe = float(spes.pop())
                    implot.setup_axis_limits(implot.ImAxis_.x2, lim[0] / spe, lim[1] / spe, imgui.Cond_.always)
            plot_w = max(50, int(imgui.get_content_region_avail().x))
            lim = self._view(index, fitting=index not in self._limits and span is None)
            for k, run in enumerate(self.runs):
                rgb = PALETTE[k % len(PALETTE)]
                for j, key in enumerate(panel.keys):
                    s = run.metrics.get(key)
                    if s is None or not len(s):
                        continue
                    # one run: a colour per series; several runs: a colour per run, lighter per series
                    shade = (PALETTE[j % len(PALETTE)] if len(self.runs) == 1
                             else tuple(min(1.0, c * (1.0 - 0.18 * j) + 0.1 * j) for c in rgb))
                    label = key if len(self.runs) == 1 else f"{key} · {run.name}"
                    self._trace(label, run, s, shade, plot_w, lim)
                if "val/loss" in panel.keys:
                    self._best_marks(run, rgb)
            self._cursor_line(index)
            self._end_plot()
        notes = [panel.note] if panel.note else []
        if panel.options.get("group") == "grad":
            notes += [f"{run.name}: {t}" for run in self.runs if (t := model.clipping_text(run))]
        for n in notes:
            imgui.text_wrapped(n)

    def _x_span(self, panel: model.Panel) -> tuple[float, float] | None:
        """The x range of every sample of a scalar panel's series, or None (no range to show)."""
        ends = [(float(x[0]), float(x[-1])) for run in self.runs for k in panel.keys
                if (s := run.metrics.get(k)) is not None and len(x := self._series(run, s)["x"])]
        if not ends:
            return None
        lo, hi = min(e[0] for e in ends), max(e[1] for e in ends)
        return (lo, hi) if hi > lo else None

    def _view(self, index: int, fitting: bool) -> tuple[float, float] | None:
        """This frame's x range of plot ``index`` (call after its setup), or None when ImPlot fits
        the x axis to the data this frame (``fitting``, or a double click on the plot): a fit
        frame plots every series whole (ImPlot fits to what is plotted); other frames plot only
        the visible range."""
        lim = implot.get_plot_limits()
        view = (float(lim.x.min), float(lim.x.max))
        fit = fitting or (
            imgui.is_mouse_double_clicked(0)
            and (implot.is_plot_hovered() or implot.is_axis_hovered(implot.ImAxis_.x1)))
        self._limits[index] = view
        return None if fit else view

    def _series(self, run, s) -> dict:
        """A series on the current axis, finite x only, with its placeholder and NaN/Inf samples
        picked out once; cached per axis (a frame only slices it)."""
        key = ("xy", id(run), s.name, self.axis)
        hit = self._cache.get(key)
        if hit is None:
            # series logged together share their step column (see Series): convert it once, and
            # copy nothing that needs no change (a million-step series is 8 MB a column)
            xkey = ("x", id(run), id(s.step), self.axis)
            x = self._cache.get(xkey)
            if x is None:
                x = self._cache[xkey] = run.coordinate(self.axis, s.step).astype(np.float64, copy=False)
            y, ph = s.value.astype(np.float64, copy=False), s.placeholder
            ok = np.isfinite(x)
            if not ok.all():
                x, y, ph = x[ok], y[ok], ph[ok]
            bad = ~np.isfinite(y)
            hit = self._cache[key] = {
                "x": x, "y": y, "measured": np.where(ph, np.nan, y) if ph.any() else y,
                "ph_x": x[ph], "ph_y": y[ph], "bad_x": x[bad]}
        return hit

    def _smoothed(self, run, s, series: dict) -> np.ndarray:
        key = ("smooth", id(run), s.name, self.axis, self.smoothing)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = model.smooth(series["measured"], self.smoothing)
        return hit

    def _columns(self, run, name, tag, x, y, x0, x1, plot_w):
        key = ("cols", tag, id(run), name, self.axis, x0, x1, plot_w)
        hit = self._cache.get(key)
        if hit is None:
            if len(self._cache) > 512:
                self._cache.clear()
            hit = self._cache[key] = model.reduce_columns(x, y, x0, x1, plot_w)
        return hit

    def _trace(self, label, run, s, rgb, plot_w, lim) -> None:
        t = self._series(run, s)
        x = t["x"]
        if not len(x):
            return
        if lim is None:  # fitting: the whole series
            i0, i1, x0, x1 = 0, len(x), float(x[0]), float(x[-1])
        else:  # the visible samples and one either side, so lines reach the plot's edges
            i0 = max(0, int(np.searchsorted(x, lim[0], side="left")) - 1)
            i1 = min(len(x), int(np.searchsorted(x, lim[1], side="right")) + 1)
            x0, x1 = max(lim[0], float(x[0])), min(lim[1], float(x[-1]))
        reduce = i1 - i0 > 3 * plot_w and x1 > x0
        if reduce:  # a million-step trace: per-column min..max, so no spike vanishes
            c, lo, hi = self._columns(run, s.name, "raw", x, t["measured"], x0, x1, plot_w)
            implot.plot_shaded(label, c, lo, hi, line_spec(rgb, fill=0.55))
            implot.plot_line(label, c, hi, line_spec(rgb, weight=1.0))
            implot.plot_line(label, c, lo, line_spec(rgb, weight=1.0))
        else:  # a placeholder is not part of the measured trace
            implot.plot_line(label, x[i0:i1], t["measured"][i0:i1],
                             line_spec(rgb, marker=implot.Marker_.circle if len(x) <= 25 else None))
        if len(t["ph_x"]):
            implot.plot_scatter(f"{label} placeholder (not a measurement)", t["ph_x"], t["ph_y"],
                                line_spec((0.6, 0.6, 0.6), marker=implot.Marker_.square))
        if len(t["bad_x"]):
            implot.plot_inf_lines(f"{label} NaN/Inf (gap)", t["bad_x"], line_spec((1.0, 0.2, 0.8), alpha=0.7))
        if self.smoothing > 0:
            sm = self._smoothed(run, s, t)
            spec = line_spec(tuple(min(1.0, c + 0.35) for c in rgb), alpha=0.9, weight=2.5)
            if reduce:  # a smoothed line is thinner than a column: its midpoint
                c, lo, hi = self._columns(run, s.name, ("smooth", self.smoothing), x, sm, x0, x1, plot_w)
                implot.plot_line(f"{label} smoothed", c, (lo + hi) / 2, spec)
            else:
                implot.plot_line(f"{label} smoothed", x[i0:i1], sm[i0:i1], spec)

    def _best_marks(self, run: Run, rgb) -> None:
        steps, acc = run.best_so_far()
        if len(steps):
            x = run.coordinate(self.axis, steps)
            implot.plot_stairs(f"best so far · {run.name}", x, acc, line_spec(rgb, alpha=0.6, weight=1.0))
            marks = model.best_marks(run)
            bx = run.coordinate(self.axis, np.array([marks.best_step]))
            implot.plot_scatter(f"best{' (saved)' if marks.best_saved else ' (NOT saved)'} · {run.name}",
                                bx, np.array([marks.best_value]),
                                line_spec((1, 0.85, 0.2) if marks.best_saved else (1, 0.3, 0.3),
                                      marker=implot.Marker_.diamond))
        if run.snapshots:
            sx = run.coordinate(self.axis, np.array([s for s, _ in run.snapshots], dtype=float))
            implot.plot_inf_lines(f"saved snapshots · {run.name}", sx[np.isfinite(sx)],
                                  line_spec((0.5, 0.9, 0.5), alpha=0.45))
        r = run.step_range
        if r:
            implot.tag_x(float(run.coordinate(self.axis, np.array([r[1]]))[0]), color(rgb, 0.8))
