"""Scalar panels of the dashboard: traces (per-pixel columns for long series), the legend
under the plot, definitions, scales (log for wide spans, robust for outliers, zero-based for
memory, +-10% for a constant), and the best-so-far and snapshot marks.

A mixin of :class:`~caliper_vk.dashboard.app.Dashboard`; the rules live in :mod:`.model`.
"""

from __future__ import annotations

import numpy as np
from imgui_bundle import imgui, implot

from ..record import Run
from . import model, summary
from .scales import panel_series
from .series_data import SeriesData
from .style import (LEGEND_ROWS, MARKS, NEUTRAL, RAW_UNDER_EMA, _col, _series_shade, _spec, best_so_far_rgb,
                    dim, fit_text, fitted_text, series_rgb)


LAYOUT_COLUMNS = 16  # pixel columns of a long trace in the dashboard's undrawn layout pass
WIDE_TRACES = 16  # a panel of more traces than this draws each long one as a single band


class ScalarPanels(SeriesData):
    """Drawing of the scalar panels (state lives on the Dashboard)."""

    def _scalar_panel(self, panel: model.Panel, index: int) -> None:
        self._inputs = self._panel_inputs(panel, index) if self.RETAIN and self.REUSE else None
        if self._reuse_panel(index, self._inputs):  # nothing changed but the cursor (reuse.py)
            self._inputs = None
            return
        if not any(len(run.metrics.get(k) or ()) for run in self.runs for k in panel.keys):
            return self._not_recorded_panel(panel, index)
        units = {s.unit for run in self.runs for k in panel.keys if (s := run.metrics.get(k)) and s.unit}
        epochable = bool(self._overlayable(panel))  # a per-step series, in runs with epochs (epochs.py)
        by_epoch = epochable and index in self.epochs_overlaid
        toggles = ("log y", "table", "epochs") if epochable else ("log y", "table")
        style = imgui.get_style()  # the title cut to leave the toggles their room on the line
        toggle = sum(imgui.calc_text_size(t).x + imgui.get_frame_height() + style.item_inner_spacing.x
                     + style.item_spacing.x for t in toggles)
        fitted_text(panel.title + (f"  [{', '.join(sorted(units))}]" if units else ""), reserve=toggle)
        imgui.same_line()
        changed, log = imgui.checkbox(f"log y##log{index}", index in self.log_y)
        if changed:
            self.toggle_log(index, log)
        imgui.same_line()
        changed, table = imgui.checkbox(f"table##table{index}", index in self.tables)
        if changed:
            (self.tables.add if table else self.tables.discard)(index)
        if epochable:  # its epochs over one within-epoch axis, older fainter (epochs.py)
            imgui.same_line()
            changed, on = imgui.checkbox(f"epochs##epochs{index}", by_epoch)
            if imgui.is_item_hovered():
                imgui.set_tooltip("lay the epochs over each other, steps into the epoch across, older fainter")
            if changed:
                self.overlay_epochs(index, on)
        self._definitions(panel)
        span = None
        if index not in self._limits and not by_epoch:  # a new plot, or a new x axis: show every sample
            span = self._x_span(panel)
            if span is None:
                implot.set_next_axis_to_fit(implot.ImAxis_.x1)
            else:  # set, not fitted: a fit would come from this frame's columns, and differ
                implot.set_next_axis_limits(implot.ImAxis_.x1, *span, imgui.Cond_.always)
        count = sum(1 for run in self.runs for k in panel.keys if len(run.metrics.get(k) or ()))
        # hundreds of series (per-parameter norms): their envelope and the few highest (summary.py)
        few = (self._cached("top series", panel, summary.top_series)
               if count > summary.SUMMARY_TRACES and not by_epoch else None)
        notes = [panel.note] if panel.note else []
        if few is not None:
            notes.append(summary.rule_text(count, len(self.runs), len(few)))
        if panel.options.get("group") == "grad":
            notes += [f"{run.name}: {t}" for run in self.runs if (t := model.clipping_text(run))]
        if by_epoch:
            notes += self._epoch_notes(panel)
        # the plot takes what the title, the definitions and the notes below it leave
        rows = self._legend_rows.get(index, 1)  # as many as the legend took last frame
        height = max(80.0, imgui.get_content_region_avail().y
                     - imgui.get_text_line_height_with_spacing() * (len(notes) + rows) - 4
                     - (self._table_height(panel) if index in self.tables else 0.0))
        self._items = {}
        self._tags: list[float] = []  # pixel columns of this plot's x-axis tags (never overlapped)
        if by_epoch:  # epoch over epoch: no cursor line on this axis (the newest epoch ends at it)
            self._epoch_plot(panel, index, height)
            self._legend_rows[index] = self._draw_legend()
        elif self._begin_plot(f"##plot{index}", imgui.ImVec2(-1, height), implot.Flags_.no_legend):
            linear = index not in self.log_y
            if linear:  # an auto-fitted y axis leaves a margin: a series at its extreme (one step of a
                # learning-rate schedule) is drawn inside the plot, not under its frame. Not on a log
                # axis: ImPlot pads it linearly, down to 1e-300
                implot.push_style_var(implot.StyleVar_.fit_padding, imgui.ImVec2(0.0, 0.08))
            zero = model.zero_based(panel) and linear
            robust = (self._robust(panel) or self._flat(panel)) if linear and not zero else None
            logged = None if linear else self._cached("log", panel, model.log_limits)
            fixed = zero or robust is not None or logged is not None
            implot.setup_axes(model.AXIS_LABELS[self.axis], "", 0, 0 if fixed else implot.AxisFlags_.auto_fit)
            if not linear:  # values <= 0 have no place on it and are left out by ImPlot
                implot.setup_axis_scale(implot.ImAxis_.y1, implot.Scale_.log10)
                if logged is not None:  # padded by a share of its decades, not linearly
                    implot.setup_axis_limits(implot.ImAxis_.y1, *logged, imgui.Cond_.always)
            elif zero:  # memory reads from zero: a 1% change must not fill the panel
                top = self._y_max(panel)
                implot.setup_axis_limits(implot.ImAxis_.y1, 0.0, top * 1.05 if top > 0 else 1.0,
                                         imgui.Cond_.always)
            elif robust is not None:  # outliers do not set the scale; they are marked at the edge
                implot.setup_axis_limits(implot.ImAxis_.y1, *robust, imgui.Cond_.always)
            self._clip = robust if robust is not None and robust != self._flat(panel) else None
            # (a run whose epoch counts examples, train_size=, has no fixed steps per epoch)
            spes = {None if (r.meta or {}).get("train_size") else (r.meta or {}).get("steps_per_epoch")
                    for r in self.runs}
            # an upper epoch axis only when every run maps steps to epochs the same way; otherwise it
            # would mislabel some run (switch the x axis to "epoch" to compare by epoch)
            if self.axis == "step" and len(spes) == 1 and None not in spes:
                implot.setup_axis(implot.ImAxis_.x2, "epoch",  # on top, where the step axis is not
                                  implot.AxisFlags_.no_grid_lines | implot.AxisFlags_.opposite)
                lim = self._limits.get(index)  # the step axis of the last frame (x2 is set up first)
                if lim is not None and lim[1] > lim[0]:
                    spe = float(spes.pop())
                    implot.setup_axis_limits(implot.ImAxis_.x2, lim[0] / spe, lim[1] / spe, imgui.Cond_.always)
            plot_w = max(50, int(imgui.get_content_region_avail().x))
            lim = self._view(index, fitting=index not in self._limits and span is None)
            # a panel of many long traces (a thousand per-parameter norms) draws each as one band:
            # three items a trace made millions of vertices (hundreds of MB of draw lists)
            wide = sum(1 for run in self.runs for k in panel.keys if k in run.metrics) > WIDE_TRACES
            # (its pixel in data units from the panel's extremes: the same every frame, where the
            # limits ImPlot fitted last frame would move the fit of the next)
            self._wide = self._cached("extent", panel, _extent) if wide else None
            self._log_axis = not linear
            if few is not None:
                self._envelopes(panel, plot_w, lim)
                rank = {pair: n for n, pair in enumerate(few)}
            for run in self.runs:
                rgb = self._rgb(run)
                for j, key in enumerate(panel.keys):
                    s = run.metrics.get(key)
                    if s is None or not len(s) or (few is not None and (run.name, key) not in rank):
                        continue
                    # one run: a colour per series; several runs: a colour per run, lighter per series
                    # (a summary's few: a colour each by rank)
                    shade = series_rgb(rgb, j if few is None else rank[(run.name, key)], len(self.runs))
                    label = key if len(self.runs) == 1 else f"{key} · {run.name}"
                    # the legend names series once: with several runs the colour is the run's
                    # (keyed in the sidebar) and the shade the series'; a summary's few by run too
                    if few is not None and len(self.runs) > 1:
                        self._item(label, shade)
                    else:
                        self._item(key, shade if len(self.runs) == 1 else _series_shade(NEUTRAL, j))
                    self._trace(label, run, s, shade, plot_w, lim)
                if model.best_panel(self.panels, run) == index:  # the best metric's own panel
                    self._best_marks(run, rgb)
            self._run_marks()  # events and branch points (marks.py)
            self._cursor_line(index, deferred=True)
            self._end_plot()
            if linear:
                implot.pop_style_var()
            self._legend_rows[index] = self._draw_legend()
        for n in notes:  # each on one line, cut between tokens with "…", whole on hover
            fitted_text(n, dim())
        self._draw_cursor(index)
        if index in self.tables:  # after the static part: it follows the cursor (table.py)
            self._value_table(panel, index)

    def _envelopes(self, panel: model.Panel, plot_w: int, lim) -> None:
        """A summarised panel's band per run: the least and the greatest measured value of all its
        series over the view (or the run's whole range when fitting), per pyramid block narrower
        than a pixel column (summary.block_band) or, zoomed in, per pixel column; kept per run,
        view and width (summary.py)."""
        cols = LAYOUT_COLUMNS if self._layout_pass else plot_w
        for run in self.runs:
            series = [self._series(run, s) for k in panel.keys if len(s := run.metrics.get(k) or ())]
            ends = [t["ends"] for t in series if t["ends"] is not None]
            if not ends:
                continue
            x0, x1 = (min(e[0] for e in ends), max(e[1] for e in ends)) if lim is None else lim
            key = ("summary", id(run), panel.title, self.axis, x0, x1, cols)
            hit = self._cache.get(key)
            if hit is None and self._layout_pass and self._wide:
                # the undrawn pass: the bands reach the panel's extremes and no further (_pixel_tall),
                # so one band over them fits the plot as the envelope will, for no reads
                hit = [(np.array([x0, x1], np.float64), np.full(2, self._wide[0]), np.full(2, self._wide[1]))]
            if hit is None:
                # series that share their x column: one band from their pyramids' blocks (exact per
                # block, each narrower than a pixel column); the rest reduced per pixel column
                shared: dict = {}
                for t in series:
                    if t["series"] is not None:
                        shared.setdefault(id(t["x"]), (t["x"], []))[1].append(t["series"])
                parts, rest = [], [t for t in series if t["series"] is None]
                for x, group in shared.values():
                    band = summary.block_band(x, group, x0, x1, cols)
                    if band is None:  # zoomed in: few samples per pixel column, reduced exactly
                        rest += [t for t in series if t["x"] is x]
                    else:
                        parts.append(band)
                lo = hi = c = None
                for t in rest:
                    if t["series"] is not None:
                        c, a, b = model.envelope_columns(t["x"], t["series"], x0, x1, cols, self._edges)
                    else:
                        c, a, b = model.reduce_columns(t["x"], self._measured(t), x0, x1, cols)
                    lo, hi = summary.fold(lo, hi, a, b)
                if c is not None:
                    parts.append((c, lo, hi))
                hit = parts
                if not self._layout_pass:
                    for old in [k for k in self._cache if k[:3] == key[:3]]:  # views gone by
                        del self._cache[old]
                    self._cache[key] = hit
            one = len(self.runs) == 1
            rgb = NEUTRAL if one else self._rgb(run)
            label = self._item(f"all {len(series)} series" + ("" if one else f" · {run.name}"), rgb)
            for c, lo, hi in hit:  # (one part unless the series have different x columns: one item)
                if self._wide:
                    lo, hi = _pixel_tall(lo, hi, self._log_axis, self._wide)
                implot.plot_shaded(label, c, lo, hi, _spec(rgb, fill=0.35))

    def _not_recorded_panel(self, panel: model.Panel, index: int) -> None:
        """A panel none of the runs shown has a sample of (another run's metric, a run hidden):
        its title and unit, and a line saying so, instead of empty axes."""
        units = sorted({s.unit for run in self.all_runs for k in panel.keys
                        if (s := run.metrics.get(k)) is not None and s.unit})
        unit = f"  [{', '.join(units)}]" if units else ""
        fitted_text(panel.title + unit)
        having = [run.name for run in self.all_runs if any(len(run.metrics.get(k) or ()) for k in panel.keys)]
        fitted_text(f"not recorded in the run{'s' if len(self.runs) > 1 else ''} shown: "
                    f"{', '.join(panel.keys)}{unit}", dim())
        if having:
            fitted_text(f"recorded in: {', '.join(having)} (show it in the sidebar's run list)", dim())
        self._inputs = None
        self._draw_cursor(index)

    def _item(self, label: str, rgb) -> str:
        """Note a plotted item for the panel's legend (drawn under the plot, never over the data)."""
        self._items.setdefault(label, rgb)
        return label

    def _draw_legend(self, most: int = LEGEND_ROWS) -> int:
        """This panel's legend, under the plot: a swatch and a name per item, wrapped to the
        panel's width, in at most ``most`` rows: the items that do not fit are folded into
        "and N more", which lists them on hover. Returns the rows it took."""
        avail = imgui.get_content_region_avail().x
        x, rows = 0.0, 0
        gap = imgui.get_style().item_spacing.x
        if len(self.runs) > 1 and self._items:  # the run colours are keyed once, in the sidebar
            imgui.text_disabled("colour = run, shade = series:")
            x, rows = imgui.calc_text_size("colour = run, shade = series:").x, 1
        items = list(self._items.items())
        more_w = imgui.calc_text_size(f"and {len(items)} more").x
        swatch = imgui.calc_text_size("■ ").x
        for n, (label, rgb) in enumerate(items):
            w = swatch + imgui.calc_text_size(label).x
            tail = 0.0 if n == len(items) - 1 else gap + more_w  # room for "and N more" on the last row
            if x > 0 and x + gap + w + (tail if rows == most else 0.0) <= avail:
                imgui.same_line()
                x += gap + w
            elif rows < most and (x == 0 or rows + 1 < most or min(w, avail) + tail <= avail):
                rows += 1
                if w > avail:  # one name wider than the panel: cut, whole on hover
                    label, w = fit_text(label, avail - swatch), avail
                x = w
            else:
                rest = [name for name, _ in items[n:]]
                if x > 0 and x + gap + more_w <= avail:
                    imgui.same_line()
                else:
                    rows += 1
                imgui.text_disabled(f"and {len(rest)} more")
                if imgui.is_item_hovered():
                    imgui.set_tooltip("\n".join(rest))
                break
            imgui.text_colored(_col(rgb), "■")
            imgui.same_line(0, 4)
            imgui.text(label)
            if imgui.is_item_hovered() and label != items[n][0]:
                imgui.set_tooltip(items[n][0])
        return rows

    def _definitions(self, panel: model.Panel) -> int:
        """Under the title, what the series are (``Recorder.define``, and what ``watch``
        records): one dim line, ending in … when the panel is too narrow; every definition in
        full on hover. Returns the lines it took."""
        defs = model.definitions(self.runs, panel)
        if not defs:
            return 0
        imgui.text_disabled(fit_text("; ".join(defs), imgui.get_content_region_avail().x))
        if imgui.is_item_hovered():
            imgui.set_tooltip("\n".join(defs))
        return 1

    def _clipped(self, x: np.ndarray, top: np.ndarray, bottom: np.ndarray, rgb) -> None:
        """Samples outside a robust y range, drawn as triangles on the plot's edge (the cursor
        still reads their raw values): ``top`` and ``bottom`` are the samples themselves, or a
        long trace's per-column maxima and minima (at most a mark per pixel column)."""
        lo, hi = self._clip
        with np.errstate(invalid="ignore"):  # NaN columns have no mark
            sides = ((top > hi, hi, implot.Marker_.up), (bottom < lo, lo, implot.Marker_.down))
        for sel, edge, marker in sides:
            if sel.any():
                implot.plot_scatter(f"clipped##{id(top)}{marker}", x[sel], np.full(int(sel.sum()), edge),
                                    _spec(rgb, marker=marker))
                self._item("outside the scale: at the edge (the cursor reads them)", (0.85, 0.85, 0.85))

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

    def _trace(self, label, run, s, rgb, plot_w, lim) -> None:
        t = self._series(run, s)
        x = t["x"]
        if not len(x):
            return
        first, last = t["ends"]
        if lim is None:  # fitting: the whole series
            i0, i1, x0, x1 = 0, len(x), first, last
        else:  # the visible samples and one either side, so lines reach the plot's edges
            i0 = max(0, model.search_x(x, lim[0], "left") - 1)
            i1 = min(len(x), model.search_x(x, lim[1], "right") + 1)
            x0, x1 = max(lim[0], first), min(lim[1], last)
        reduce = i1 - i0 > 3 * plot_w and x1 > x0
        raw_a = RAW_UNDER_EMA if self.smoothing > 0 else 1.0  # the smoothed line has the colour
        # the samples themselves, when drawn: as floats, as ImPlot takes them with y
        xs = None if reduce else x[i0:i1].astype(np.float64, copy=False)
        ys = None if reduce else self._measured(t, i0, i1)
        if reduce:  # a million-step trace: per-column min..max of every sample, so no spike vanishes
            # (the undrawn layout pass takes a few wide columns: the same extremes, so the same y
            # fit and legend, for a fraction of the reads; its plot may be a few pixels wider)
            c, lo, hi = self._columns(run, s.name, "raw", t, None, x0, x1,
                                      LAYOUT_COLUMNS if self._layout_pass else plot_w)
            if self._wide:  # many traces: one band each, at least a pixel tall (no outlines)
                blo, bhi = _pixel_tall(lo, hi, self._log_axis, self._wide)
                implot.plot_shaded(label, c, blo, bhi, _spec(rgb, fill=0.85 * raw_a))
            else:
                implot.plot_shaded(label, c, lo, hi, _spec(rgb, fill=0.55 * raw_a))
                implot.plot_line(label, c, hi, _spec(rgb, alpha=raw_a, weight=1.0))
                implot.plot_line(label, c, lo, _spec(rgb, alpha=raw_a, weight=1.0))
        else:  # a placeholder is not part of the measured trace
            implot.plot_line(label, xs, ys,
                             _spec(rgb, alpha=raw_a, marker=implot.Marker_.circle if len(x) <= 25 else None))
        if self._clip is not None:  # a long trace: one mark per pixel column, not per sample
            self._clipped(c, hi, lo, rgb) if reduce else self._clipped(xs, ys, ys, rgb)
        if len(t["ph_x"]):
            grey = MARKS["placeholder"]
            implot.plot_scatter(self._item("placeholder (not a measurement)", grey), t["ph_x"], t["ph_y"],
                                _spec(grey, marker=implot.Marker_.square))
        if len(t["bad_x"]):
            implot.plot_inf_lines(self._item("NaN/Inf (gap)", MARKS["nan"]), t["bad_x"],
                                  _spec(MARKS["nan"], alpha=0.7))
        if self.smoothing > 0:
            sm = self._smoothed(run, s, t)
            spec = _spec(rgb, weight=2.5)  # the series' own colour: never another run's or series
            if reduce:  # a smoothed line is thinner than a column: its midpoint
                c, lo, hi = self._columns(run, s.name, ("smooth", self.smoothing), t, sm, x0, x1, plot_w)
                implot.plot_line(f"{label} smoothed", c, (lo + hi) / 2, spec)
            else:
                implot.plot_line(f"{label} smoothed", xs, sm[i0:i1], spec)
            self._item("smoothed (EMA; the raw trace faded beside it)", (0.85, 0.85, 0.85))

    def _best_marks(self, run: Run, rgb) -> None:
        steps, acc = run.best_so_far()
        if len(steps):
            x = run.coordinate(self.axis, steps)
            best_rgb = best_so_far_rgb(rgb)
            implot.plot_stairs(f"best so far · {run.name}", x, acc, _spec(best_rgb, weight=1.5))
            one = len(self.runs) == 1
            self._item(f"best {model.best_metric(run)} so far (stairs)", best_rgb if one else NEUTRAL)
            marks = model.best_marks(run)
            bx = run.coordinate(self.axis, np.array([marks.best_step]))
            mark = MARKS["best_saved"] if marks.best_saved else MARKS["best_unsaved"]
            saved = " (saved)" if marks.best_saved else " (NOT saved)"
            implot.plot_scatter(self._item(f"best{saved}", mark),
                                bx, np.array([marks.best_value]),
                                _spec(mark,
                                      marker=implot.Marker_.diamond))
        if run.snapshots:
            sx = run.coordinate(self.axis, np.array([s for s, _ in run.snapshots], dtype=float))
            snap = MARKS["snapshot"]
            implot.plot_inf_lines(self._item("saved snapshots (parameters only)", snap), sx[np.isfinite(sx)],
                                  _spec(snap, alpha=0.45))
        r = run.step_range
        if r:  # the run's last step on the x axis, unless another run's tag is already there
            x = float(run.coordinate(self.axis, np.array([r[1]]))[0])
            px = implot.plot_to_pixels(x, 1.0).x
            width = imgui.calc_text_size(f"{x:g}").x + 10
            if all(abs(px - other) > width for other in self._tags):
                self._tags.append(px)
                implot.tag_x(x, _col(rgb, 0.8))


def _extent(runs, panel) -> tuple[float, float] | None:
    """The least and the greatest finite measured value of a panel's series (None: none)."""
    ends = [e for s in panel_series(runs, panel) if (e := model.measured_extremes(s))[0] is not None]
    return (min(e[0] for e in ends), max(e[1] for e in ends)) if ends else None


def _pixel_tall(lo: np.ndarray, hi: np.ndarray, log: bool, extent) -> tuple[np.ndarray, np.ndarray]:
    """A band from ``lo`` to ``hi`` per column widened, where it is less than a pixel tall, to one
    pixel around its middle (on a log axis, in decades), so that a flat stretch stays visible
    without an outline; it still covers every sample's value. A pixel is the panel's ``extent``
    (its values' range) over the plot's height. A widened band is moved inside the extent, so
    that the y axis fitted to the bands is the extent's whatever the plot's height (the undrawn
    layout pass's plot is not as tall as the first drawn one: the first frame must fit as the
    next one does). Call inside the plot."""
    size = implot.get_plot_size()
    y0, y1 = extent
    if not size.y > 0 or not y1 > y0:
        return lo, hi
    if log and y0 > 0:
        half = 0.5 * (np.log10(y1) - np.log10(y0)) / size.y
        with np.errstate(invalid="ignore", divide="ignore"):
            mid = np.sqrt(lo * hi)
            blo, bhi = np.fmin(lo, mid * 10.0 ** -half), np.fmax(hi, mid * 10.0 ** half)
            up, down = np.fmax(y0 / blo, 1.0), np.fmax(bhi / y1, 1.0)  # (NaN for a gap: stays NaN)
            return np.fmax(blo * up / down, y0), np.fmin(bhi * up / down, y1)  # (not an ulp outside)
    half = 0.5 * (y1 - y0) / size.y
    mid = (lo + hi) * 0.5
    blo, bhi = np.fmin(lo, mid - half), np.fmax(hi, mid + half)
    shift = np.fmax(y0 - blo, 0.0) - np.fmax(bhi - y1, 0.0)
    return np.fmax(blo + shift, y0), np.fmin(bhi + shift, y1)  # (not an ulp outside)
