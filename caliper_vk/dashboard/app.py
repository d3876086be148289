"""``caliper view``: the training dashboard for recorded runs.

Dear ImGui and ImPlot (rendered by the engine's overlay pipeline, see
:mod:`.imgui_backend`) draw the widgets and the plot chrome — axes, ticks,
legends, zoom, pan and the linked cursor. Arrays (histograms over time,
confusion matrices, kernels, feature maps, attention) are drawn by the
engine's own views into a canvas and shown inside the UI as textures. The
rules (raw values under the cursor, no extrapolation, the step of every
sparse frame stated) live in :mod:`.model`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from imgui_bundle import imgui, implot

from ..record import Run
from . import model
from .imgui_backend import ImGuiRenderer

PALETTE = [(0.35, 0.65, 1.0), (1.0, 0.55, 0.2), (0.45, 0.85, 0.4), (0.95, 0.35, 0.45), (0.75, 0.55, 1.0),
           (0.95, 0.85, 0.3), (0.4, 0.9, 0.9), (0.9, 0.6, 0.8)]
PANEL_HEIGHT = 270
SIDEBAR = 330
ARRAY_PX = 220
TRACE_PX = 90  # the least height of a cell's trace beside an array panel's image
TRACE_W = 320  # its width


NEUTRAL = (0.85, 0.85, 0.85)  # legend swatches of series drawn in every run's own colour


def _series_shade(rgb, j: int) -> tuple:
    """Series ``j`` of a panel shown for several runs: the run's colour, darker and greyer with j."""
    return tuple(min(1.0, c * (1.0 - 0.18 * j) + 0.1 * j) for c in rgb)


def _col(rgb, a=1.0) -> imgui.ImVec4:
    return imgui.ImVec4(rgb[0], rgb[1], rgb[2], a)


def _spec(rgb, alpha=1.0, weight=1.5, fill=None, marker=None):
    s = implot.Spec()
    s.line_color = _col(rgb, alpha)
    s.line_weight = weight
    if fill is not None:
        s.fill_color = _col(rgb, fill)
        s.fill_alpha = 1.0
    if marker is not None:
        s.marker = marker
        s.marker_size = 5
        s.marker_fill_color = _col(rgb, alpha)
        s.marker_line_color = _col(rgb, alpha)
    return s


def _implot_color(col, auto) -> int:
    """ImPlot's colour ``col`` as an ImU32: its own, or the ImGui colour ``auto`` it follows."""
    v = implot.get_style().color_(col)
    return imgui.get_color_u32(auto) if v.w < 0 else imgui.get_color_u32(v)


class Dashboard:
    """The dashboard over ``runs`` in a window (``window=``) or offscreen (``size=``)."""

    def __init__(self, runs: list[Run], size=(1600, 1000), window=None, axis: str = "step",
                 cursor: float | None = None, panels: list[str] | None = None, smoothing: float = 0.0,
                 columns: int = 2, history: int = 6, hist_mode: str = "overlay", log_y: bool = False,
                 shown: list[str] | None = None):
        if not runs:
            raise ValueError("the dashboard needs at least one run")
        unknown = sorted(set(shown or ()) - {r.name for r in runs})
        if unknown:
            names = ", ".join(r.name for r in runs)
            raise ValueError(f"no run named {', '.join(unknown)}; the runs are: {names}")
        if axis not in model.AXES:
            raise ValueError(f"axis must be one of {', '.join(model.AXES)}, got {axis!r}")
        if hist_mode not in ("overlay", "offset", "time"):
            raise ValueError(f"histogram mode must be overlay, offset or time, got {hist_mode!r}")
        if not 0.0 <= float(smoothing) < 1.0:
            raise ValueError(f"smoothing is an EMA weight in [0, 1), got {smoothing}")
        # every loaded run keeps its colour; the sidebar shows, hides and filters them
        self.all_runs = list(runs)
        self._colours = {id(r): PALETTE[k % len(PALETTE)] for k, r in enumerate(self.all_runs)}
        self.hidden = {r.name for r in runs if shown and r.name not in shown}
        self.run_filter = ""
        self._limits: dict = {}
        self._cache: dict = {}
        self._set_shown()
        self.ui = ImGuiRenderer(size=size, window=window)
        # The main window covers the display: the overlay clears to its background colour and imgui
        # draws none (on lavapipe a full-screen layer of blended fragments costs ~7 ms per megapixel)
        self.ui._activate()
        bg = imgui.get_style().color_(imgui.Col_.window_bg)
        alpha = int(bg.w * 255 + 0.5)
        under = self.ui.overlay.clear
        self.ui.overlay.clear = (*(int(c * 255 + 0.5) * alpha // 255 + under[i] * (255 - alpha) // 255
                                   for i, c in enumerate((bg.x, bg.y, bg.z))), 255)
        r, g, b, _ = self.ui.overlay.clear
        self._background = 0xFF000000 | b << 16 | g << 8 | r  # as an ImU32 (ABGR)
        self._plots: list = []
        self.axis = axis
        self.smoothing = float(smoothing)
        self.columns = max(1, int(columns))
        self.history = max(1, int(history))
        self.hist_mode = hist_mode
        self.panels = model.default_panels(self.all_runs)
        # scalar panels with a logarithmic y axis (toggled per panel): those whose positive values
        # span more than two decades, and with log_y the loss panels
        self.log_y = {i for i, p in enumerate(self.panels)
                      if (log_y and p.kind == "scalar" and p.options.get("group") == "loss")
                      or model.spans_decades(self.runs, p)}
        if panels == ["*"]:
            self.enabled = [True] * len(self.panels)
        elif panels:
            wanted = [p.lower() for p in panels]
            self.enabled = [any(w in p.title.lower() or any(w == k.lower() for k in p.keys) for w in wanted)
                            for p in self.panels]
            if not any(self.enabled):
                titles = "; ".join(p.title for p in self.panels)
                raise ValueError(f"no panel matches {panels}; the panels are: {titles}")
        else:  # a dashboard opens with loss, the task metric and the learning rate; add the rest as wanted
            self.enabled = [p.options.get("group") in ("loss", "metrics", "lr") for p in self.panels]
            if not any(self.enabled):
                self.enabled = [i < 4 for i in range(len(self.panels))]
        if cursor is None:  # the latest recorded progress of any run, on the chosen axis
            ends = [run.coordinate(axis, np.array([run.step_range[1]]))[0]
                    for run in self.runs if run.step_range]
            cursor = np.nanmax(ends) if ends and not np.all(np.isnan(ends)) else 0.0
        self.cursor = float(cursor)
        self._textures: dict = {}
        self._items: dict = {}  # the legend of the panel being drawn: label -> colour
        self.pinned: dict = {}  # (run name, array key) -> the probe index whose readout is shown
        self._clip = None  # the robust y range of the panel being drawn, when one clips
        self._legend_rows: dict = {}  # panel index -> rows its legend took (the plot leaves room)
        self._canvases: dict = {}  # texture key -> (data shape, canvas, view) of arrays drawn by the engine
        self.closed = False

    # -- engine-drawn arrays -----------------------------------------------------------------
    def _texture(self, key, signature, make_rgba):
        entry = self._textures.get(key)
        if entry is not None and entry[0] == signature:
            return entry[1]
        rgba = make_rgba()
        if entry is not None and entry[1].size == (rgba.shape[1], rgba.shape[0]):
            entry[1].update(rgba)
            tex = entry[1]
        else:
            if entry is not None:
                entry[1].close()
            tex = self.ui.add_texture(rgba)
        self._textures[key] = (signature, tex)
        return tex

    @staticmethod
    def _draw_view(view, w: int, h: int) -> np.ndarray:
        from ..engine import Canvas

        with Canvas(w, h) as c:
            c.add(view)
            return c.render()

    def _view_texture(self, key, signature, make_view, data: np.ndarray, w: int, h: int):
        """The texture ``key``: ``make_view(data)`` drawn by the engine at ``w`` x ``h``, redrawn
        when ``signature`` changes. The view and its canvas are kept: data of the same shape (the
        cursor moved onto another frame) goes to the view's ``set_data`` and is drawn again."""
        def draw():
            from ..engine import Canvas

            kind = (data.shape, data.dtype, w, h)
            held = self._canvases.get(key)
            if held is not None and held[0] == kind:
                held[2].set_data(data)
            else:
                if held is not None:
                    held[1].close()
                view = make_view(data)
                canvas = Canvas(w, h)
                canvas.add(view)
                held = self._canvases[key] = (kind, canvas, view)
            return held[1].render()

        return self._texture(key, signature, draw)

    @staticmethod
    def _array_data(a: np.ndarray) -> np.ndarray:
        """An array probe as the array view draws it: float32, a row, a matrix or a stack of tiles."""
        a = np.asarray(a, dtype=np.float32)
        if a.ndim <= 1:
            return a.reshape(1, -1)
        return a if a.ndim == 2 else a.reshape(-1, a.shape[-2], a.shape[-1])

    @staticmethod
    def _array_view(a: np.ndarray, ndim: int):
        """The view of ``_array_data(x)`` for an ``ndim``-dimensional probe ``x``."""
        from ..views import Heatmap, Images

        if ndim <= 1:
            return Heatmap(a, colormap="viridis")
        if ndim == 2:
            return Heatmap(a, colormap="RdBu_r", value_range="symmetric")
        return Images(a, normalize="tile", colormap="RdBu_r", value_range="symmetric")

    # -- one frame ---------------------------------------------------------------------------
    def frame(self, events=None) -> list:
        events = self.ui.new_frame(events)
        io = imgui.get_io()
        imgui.set_next_window_pos(imgui.ImVec2(0, 0))
        imgui.set_next_window_size(io.display_size)
        flags = (imgui.WindowFlags_.no_title_bar | imgui.WindowFlags_.no_resize | imgui.WindowFlags_.no_move
                 | imgui.WindowFlags_.no_collapse | imgui.WindowFlags_.no_bring_to_front_on_focus
                 | imgui.WindowFlags_.no_background)  # the overlay's clear colour is the background
        imgui.begin("caliper view", None, flags)
        imgui.begin_child("sidebar", imgui.ImVec2(SIDEBAR, 0), imgui.ChildFlags_.borders)
        self._sidebar()
        imgui.end_child()
        imgui.same_line()
        imgui.begin_child("panels", imgui.ImVec2(0, 0))
        shown = [(i, p) for i, (p, on) in enumerate(zip(self.panels, self.enabled, strict=True)) if on]
        width = (imgui.get_content_region_avail().x - (self.columns - 1) * 8) / self.columns
        for n, (i, panel) in enumerate(shown):  # i: the panel's index in self.panels (its state's key)
            if n % self.columns:
                imgui.same_line()
            # no scrollbar: one appearing for a frame would narrow the plot and redo its columns
            imgui.begin_child(f"panel{i}", imgui.ImVec2(width, PANEL_HEIGHT + 60), imgui.ChildFlags_.borders,
                              imgui.WindowFlags_.no_scrollbar)
            self._panel(panel, i)
            imgui.end_child()
        imgui.end_child()
        imgui.end()
        return events

    def _rgb(self, run: Run) -> tuple:
        return self._colours[id(run)]

    def _set_shown(self) -> None:
        """The runs drawn: those not hidden whose name contains the filter (case-insensitive).
        Each keeps its colour whichever others are shown."""
        f = self.run_filter.lower()
        self.runs = [r for r in self.all_runs if r.name not in self.hidden and f in r.name.lower()]
        self._limits.clear()  # refit the plots to the runs now shown
        self._cache.clear()

    def _run_selector(self) -> None:
        """Show or hide each run, and filter them by name."""
        if len(self.all_runs) > 1:
            changed, self.run_filter = imgui.input_text_with_hint("##runfilter", "filter runs by name",
                                                                   self.run_filter)
            if changed:
                self._set_shown()
            imgui.same_line()
            imgui.text_disabled(f"{len(self.runs)} of {len(self.all_runs)} shown")
        for k, run in enumerate(self.all_runs):
            if len(self.all_runs) > 1:
                changed, on = imgui.checkbox(f"##show{k}", run.name not in self.hidden)
                if changed:
                    (self.hidden.discard if on else self.hidden.add)(run.name)
                    self._set_shown()
                imgui.same_line()
            imgui.text_colored(_col(self._rgb(run), 1.0 if run in self.runs else 0.4), f"■ {run.name}")

    def _sidebar(self) -> None:
        imgui.text("Runs")
        self._run_selector()
        imgui.separator()
        for k, run in enumerate(self.runs):
            imgui.text_colored(_col(self._rgb(run)), f"■ {run.name}")
            r = run.step_range
            imgui.text(f"  {run.status}, {'finite' if run.finite else 'NON-FINITE values'}, "
                       f"steps {r[0]}–{r[1]}" if r else f"  {run.status}, no steps")
            marks = model.best_marks(run)
            imgui.text_wrapped(f"  {marks.text}")
            if run.problems and imgui.tree_node(f"  {len(run.problems)} note(s)##p{k}"):
                for p in run.problems[:50]:
                    imgui.text_wrapped(p)
                imgui.tree_pop()
        imgui.separator()
        imgui.text("x axis")
        for a in model.AXES:
            imgui.same_line()
            if imgui.radio_button(a, self.axis == a) and a != self.axis:
                self._change_axis(a)
        _, self.smoothing = imgui.slider_float("smoothing", self.smoothing, 0.0, 0.99, "%.2f")
        imgui.text_disabled("smoothing is drawn beside the raw trace;\nthe cursor always reads raw values")
        imgui.text("histograms")
        for m in ("overlay", "offset", "time"):
            imgui.same_line()
            if imgui.radio_button(f"{m}##h", self.hist_mode == m):
                self.hist_mode = m
        imgui.separator()
        imgui.text(f"cursor: {self.axis} {self.cursor:.6g}")
        self._readout()
        imgui.separator()
        if imgui.tree_node("Panels"):
            for i, p in enumerate(self.panels):
                _, self.enabled[i] = imgui.checkbox(f"{p.title}##en{i}", self.enabled[i])
            imgui.tree_pop()

    def _change_axis(self, axis: str) -> None:
        # keep the cursor on the same progress point, read through the first run that has it
        for run in self.runs:
            step = run.to_step(self.axis, self.cursor)
            if step is not None:
                x = run.coordinate(axis, np.array([step]))[0]
                if np.isfinite(x):
                    self.cursor = float(x)
                    break
        self.axis = axis
        self._limits.clear()  # the x ranges were in the old axis's units: fit every plot again

    def _readout(self) -> None:
        keys = []
        for p, on in zip(self.panels, self.enabled, strict=True):
            if on and p.kind == "scalar":
                keys.extend(p.keys)
        keys = [k for k in keys if any(k in run.metrics for run in self.runs)]  # not only hidden runs
        for key in keys[:24]:
            imgui.text(key)
            for run in self.runs:
                r = model.read_cursor(run, key, self.axis, self.cursor)
                if r.state == "not-recorded" and len(self.runs) > 1:
                    continue
                imgui.text_colored(_col(self._rgb(run), 0.9 if r.state == "value" else 0.55),
                                   f"  {run.name}: {r.text}")

    # -- plots -------------------------------------------------------------------------------
    # ImPlot fills a plot's whole frame with FrameBg and then its plot area with PlotBg: two opaque
    # layers over most of the screen. On lavapipe blended fragments are the frame's largest cost
    # (a full-screen layer is ~7 ms per megapixel), so the frame is drawn here as four bands around
    # the plot area, under the plot (a draw-list channel), and the plot area not at all when its
    # colour is the background's: the same pixels, one layer instead of two or three.
    BAND_FRAMES = True

    def _begin_plot(self, name: str, size, flags: int = 0) -> bool:
        band = self.BAND_FRAMES and imgui.get_style().frame_rounding == 0
        if band:
            dl = imgui.get_window_draw_list()
            dl.channels_split(2)
            dl.channels_set_current(1)
            clear = imgui.ImVec4(0, 0, 0, 0)
            colors = [_implot_color(implot.Col_.frame_bg, imgui.Col_.frame_bg),
                      _implot_color(implot.Col_.plot_bg, imgui.Col_.window_bg)]
            implot.push_style_color(implot.Col_.frame_bg, clear)
            implot.push_style_color(implot.Col_.plot_bg, clear)
        opened = implot.begin_plot(name, size, flags)
        if band and not opened:
            implot.pop_style_color(2)
            dl.channels_merge()
        elif opened:  # the frame is the item begin_plot added
            frame = (imgui.get_item_rect_min(), imgui.get_item_rect_max())
            self._plots.append((dl, frame, colors) if band else None)
        return opened

    def _end_plot(self) -> None:
        band = self._plots.pop()
        if band is None:
            implot.end_plot()
            return
        dl, (f0, f1), (frame_col, plot_col) = band
        p0, size = implot.get_plot_pos(), implot.get_plot_size()
        p1 = imgui.ImVec2(p0.x + size.x, p0.y + size.y)
        implot.end_plot()
        implot.pop_style_color(2)
        dl.channels_set_current(0)
        v = imgui.ImVec2
        for a, b in ((v(f0.x, f0.y), v(f1.x, p0.y)), (v(f0.x, p1.y), v(f1.x, f1.y)),
                     (v(f0.x, p0.y), v(p0.x, p1.y)), (v(p1.x, p0.y), v(f1.x, p1.y))):
            dl.add_rect_filled(a, b, frame_col)
        if plot_col != self._background:
            dl.add_rect_filled(p0, p1, plot_col)
        dl.channels_merge()

    # -- panels ------------------------------------------------------------------------------
    def _panel(self, panel: model.Panel, index: int) -> None:
        if panel.kind == "scalar":
            self._scalar_panel(panel, index)
        elif panel.kind == "histogram":
            self._histogram_panel(panel, index)
        elif panel.kind == "array":
            self._array_panel(panel, index)
        elif panel.kind == "confusion":
            self._confusion_panel(panel, index)

    def _cursor_line(self, index: int) -> None:
        changed, x, *_ = implot.drag_line_x(index, self.cursor, imgui.ImVec4(1, 1, 1, 0.8), 1.5)
        if changed:
            self.cursor = float(x)
        elif implot.is_plot_hovered() and imgui.is_mouse_clicked(0):
            self.cursor = float(implot.get_plot_mouse_pos().x)

    def _scalar_panel(self, panel: model.Panel, index: int) -> None:
        units = {s.unit for run in self.runs for k in panel.keys if (s := run.metrics.get(k)) and s.unit}
        imgui.text(panel.title + (f"  [{', '.join(sorted(units))}]" if units else ""))
        imgui.same_line()
        changed, log = imgui.checkbox(f"log y##log{index}", index in self.log_y)
        if changed:
            (self.log_y.add if log else self.log_y.discard)(index)
        self._definitions(panel)
        span = None
        if index not in self._limits:  # a new plot, or a new x axis: show every sample
            span = self._x_span(panel)
            if span is None:
                implot.set_next_axis_to_fit(implot.ImAxis_.x1)
            else:  # set, not fitted: a fit would come from this frame's columns, and differ
                implot.set_next_axis_limits(implot.ImAxis_.x1, *span, imgui.Cond_.always)
        notes = [panel.note] if panel.note else []
        if panel.options.get("group") == "grad":
            notes += [f"{run.name}: {t}" for run in self.runs if (t := model.clipping_text(run))]
        # the plot takes what the title, the definitions and the notes below it leave
        rows = self._legend_rows.get(index, 1)  # as many as the legend took last frame
        height = max(80.0, imgui.get_content_region_avail().y
                     - imgui.get_text_line_height_with_spacing() * (len(notes) + rows) - 4)
        self._items = {}
        if self._begin_plot(f"##plot{index}", imgui.ImVec2(-1, height), implot.Flags_.no_legend):
            linear = index not in self.log_y
            zero = model.zero_based(panel) and linear
            robust = (self._robust(panel) or self._flat(panel)) if linear and not zero else None
            fixed = zero or robust is not None
            implot.setup_axes(model.AXIS_LABELS[self.axis], "", 0, 0 if fixed else implot.AxisFlags_.auto_fit)
            if not linear:  # values <= 0 have no place on it and are left out by ImPlot
                implot.setup_axis_scale(implot.ImAxis_.y1, implot.Scale_.log10)
            elif zero:  # memory reads from zero: a 1% change must not fill the panel
                top = self._y_max(panel)
                implot.setup_axis_limits(implot.ImAxis_.y1, 0.0, top * 1.05 if top > 0 else 1.0,
                                         imgui.Cond_.always)
            elif robust is not None:  # outliers do not set the scale; they are marked at the edge
                implot.setup_axis_limits(implot.ImAxis_.y1, *robust, imgui.Cond_.always)
            self._clip = robust if robust is not None and robust != self._flat(panel) else None
            spes = {(r.meta or {}).get("steps_per_epoch") for r in self.runs}
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
            for run in self.runs:
                rgb = self._rgb(run)
                for j, key in enumerate(panel.keys):
                    s = run.metrics.get(key)
                    if s is None or not len(s):
                        continue
                    # one run: a colour per series; several runs: a colour per run, lighter per series
                    shade = PALETTE[j % len(PALETTE)] if len(self.runs) == 1 else _series_shade(rgb, j)
                    label = key if len(self.runs) == 1 else f"{key} · {run.name}"
                    # the legend names series once: with several runs the colour is the run's
                    # (keyed in the sidebar) and the shade the series'
                    self._item(key, shade if len(self.runs) == 1 else _series_shade(NEUTRAL, j))
                    self._trace(label, run, s, shade, plot_w, lim)
                if model.best_panel(self.panels, run) == index:  # the best metric's own panel
                    self._best_marks(run, rgb)
            self._cursor_line(index)
            self._end_plot()
            self._legend_rows[index] = self._draw_legend()
        for n in notes:
            imgui.text_disabled(n)

    def _item(self, label: str, rgb) -> str:
        """Note a plotted item for the panel's legend (drawn under the plot, never over the data)."""
        self._items.setdefault(label, rgb)
        return label

    def _draw_legend(self) -> int:
        """This panel's legend, under the plot: a swatch and a name per item, wrapped to the
        panel's width. Returns the rows it took."""
        avail = imgui.get_content_region_avail().x
        x, rows = 0.0, 0
        gap = imgui.get_style().item_spacing.x
        if len(self.runs) > 1 and self._items:  # the run colours are keyed once, in the sidebar
            imgui.text_disabled("colour = run, shade = series:")
            x, rows = imgui.calc_text_size("colour = run, shade = series:").x, 1
        for label, rgb in self._items.items():
            w = imgui.calc_text_size("■ " + label).x
            if x > 0 and x + gap + w <= avail:
                imgui.same_line()
                x += gap + w
            else:
                rows += 1
                x = w
            imgui.text_colored(_col(rgb), "■")
            imgui.same_line(0, 4)
            imgui.text(label)
        return rows

    def _definitions(self, panel: model.Panel) -> int:
        """Under the title, what the series are (``Recorder.define``, and what ``watch``
        records): one dim line, ending in … when the panel is too narrow; every definition in
        full on hover. Returns the lines it took."""
        defs = model.definitions(self.runs, panel)
        if not defs:
            return 0
        line = "; ".join(defs)
        avail = imgui.get_content_region_avail().x
        shown = line
        if imgui.calc_text_size(line).x > avail:
            lo, hi = 0, len(line)
            while lo < hi:  # the longest prefix that fits with its ellipsis
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if imgui.calc_text_size(line[:mid] + "…").x <= avail else (lo, mid - 1)
            shown = line[:lo] + "…"
        imgui.text_disabled(shown)
        if imgui.is_item_hovered():
            imgui.set_tooltip("\n".join(defs))
        return 1

    def _robust(self, panel: model.Panel) -> tuple[float, float] | None:
        key = ("robust", panel.title, tuple(panel.keys))
        if key not in self._cache:
            self._cache[key] = model.robust_limits(self.runs, panel)
        return self._cache[key]

    def _flat(self, panel: model.Panel) -> tuple[float, float] | None:
        key = ("flat", panel.title, tuple(panel.keys))
        if key not in self._cache:
            self._cache[key] = model.flat_limits(self.runs, panel)
        return self._cache[key]

    def _clipped(self, x: np.ndarray, y: np.ndarray, rgb) -> None:
        """Samples outside a robust y range, drawn as triangles on the plot's edge (the cursor
        still reads their raw values)."""
        lo, hi = self._clip
        for sel, edge, marker in ((y > hi, hi, implot.Marker_.up), (y < lo, lo, implot.Marker_.down)):
            if sel.any():
                implot.plot_scatter(f"clipped##{id(y)}{marker}", x[sel], np.full(int(sel.sum()), edge),
                                    _spec(rgb, marker=marker))
                self._item("outside the scale: at the edge (the cursor reads them)", (0.85, 0.85, 0.85))

    def _y_max(self, panel: model.Panel) -> float:
        """The largest finite value of a panel's series in every run (for zero-based panels)."""
        key = ("ymax", panel.title, tuple(panel.keys))
        hit = self._cache.get(key)
        if hit is None:
            tops = [float(np.nanmax(v)) for run in self.runs for k in panel.keys
                    if (s := run.metrics.get(k)) is not None and len(v := s.value[np.isfinite(s.value)])]
            hit = self._cache[key] = max(tops) if tops else 0.0
        return hit

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
            implot.plot_shaded(label, c, lo, hi, _spec(rgb, fill=0.55))
            implot.plot_line(label, c, hi, _spec(rgb, weight=1.0))
            implot.plot_line(label, c, lo, _spec(rgb, weight=1.0))
        else:  # a placeholder is not part of the measured trace
            implot.plot_line(label, x[i0:i1], t["measured"][i0:i1],
                             _spec(rgb, marker=implot.Marker_.circle if len(x) <= 25 else None))
        if self._clip is not None:
            self._clipped(x[i0:i1], t["measured"][i0:i1], rgb)
        if len(t["ph_x"]):
            grey = (0.6, 0.6, 0.6)
            implot.plot_scatter(self._item("placeholder (not a measurement)", grey), t["ph_x"], t["ph_y"],
                                _spec(grey, marker=implot.Marker_.square))
        if len(t["bad_x"]):
            implot.plot_inf_lines(self._item("NaN/Inf (gap)", (1.0, 0.2, 0.8)), t["bad_x"],
                                  _spec((1.0, 0.2, 0.8), alpha=0.7))
        if self.smoothing > 0:
            sm = self._smoothed(run, s, t)
            spec_rgb = tuple(min(1.0, c + 0.35) for c in rgb)
            spec = _spec(spec_rgb, alpha=0.9, weight=2.5)
            if reduce:  # a smoothed line is thinner than a column: its midpoint
                c, lo, hi = self._columns(run, s.name, ("smooth", self.smoothing), x, sm, x0, x1, plot_w)
                implot.plot_line(f"{label} smoothed", c, (lo + hi) / 2, spec)
            else:
                implot.plot_line(f"{label} smoothed", x[i0:i1], sm[i0:i1], spec)
            self._item("smoothed (EMA, beside the raw trace)", (0.85, 0.85, 0.85))

    def _best_marks(self, run: Run, rgb) -> None:
        steps, acc = run.best_so_far()
        if len(steps):
            x = run.coordinate(self.axis, steps)
            implot.plot_stairs(f"best so far · {run.name}", x, acc, _spec(rgb, alpha=0.6, weight=1.0))
            one = len(self.runs) == 1
            self._item(f"best {model.best_metric(run)} so far (stairs)", rgb if one else NEUTRAL)
            marks = model.best_marks(run)
            bx = run.coordinate(self.axis, np.array([marks.best_step]))
            mark = (1, 0.85, 0.2) if marks.best_saved else (1, 0.3, 0.3)
            saved = " (saved)" if marks.best_saved else " (NOT saved)"
            implot.plot_scatter(self._item(f"best{saved}", mark),
                                bx, np.array([marks.best_value]),
                                _spec((1, 0.85, 0.2) if marks.best_saved else (1, 0.3, 0.3),
                                      marker=implot.Marker_.diamond))
        if run.snapshots:
            sx = run.coordinate(self.axis, np.array([s for s, _ in run.snapshots], dtype=float))
            green = (0.5, 0.9, 0.5)
            implot.plot_inf_lines(self._item("saved snapshots", green), sx[np.isfinite(sx)],
                                  _spec(green, alpha=0.45))
        r = run.step_range
        if r:
            implot.tag_x(float(run.coordinate(self.axis, np.array([r[1]]))[0]), _col(rgb, 0.8))

    def _histogram_panel(self, panel: model.Panel, index: int) -> None:
        key = panel.keys[0]
        imgui.text(panel.title + ("   (vertical offset is a display choice, not extra counts)"
                                  if self.hist_mode == "offset" else ""))
        for run in self.runs:
            frames = run.histograms.get(key, [])
            f, text = model.frame_reading(run, frames, self.axis, self.cursor)
            imgui.text_colored(_col(self._rgb(run)), f"{run.name}: {text}")
            if f is not None:
                imgui.same_line()
                imgui.text(f"  outside [{f.edges[0]:g}, {f.edges[-1]:g}]: below {f.below}, above {f.above}"
                           + (f", NaN {f.nan}, Inf {f.inf}" if f.nan or f.inf else ""))
        if self.hist_mode == "time":
            return self._histogram_time(panel, index)
        live = [run for run in self.runs
                if run.histograms.get(key) and run.to_step(self.axis, self.cursor) is not None]
        h = (PANEL_HEIGHT - 20 * len(self.runs)) // max(1, len(live))
        for k, run in enumerate(self.runs):
            if run not in live:
                continue
            frames = run.histograms[key]
            step = run.to_step(self.axis, self.cursor)
            stack = model.histogram_stack(frames, step, self.history)
            if self._begin_plot(f"##h{index}_{k}", imgui.ImVec2(-1, max(80, h))):
                implot.setup_axes("value", "count (offset)" if self.hist_mode == "offset" else "count",
                                  implot.AxisFlags_.auto_fit, implot.AxisFlags_.auto_fit)
                peak = max(float(f.counts.max(initial=0)) for f in stack) or 1.0
                for i, f in enumerate(stack):
                    age = len(stack) - 1 - i
                    alpha = 1.0 if age == 0 else 0.15 + 0.6 * (1 - age / max(1, len(stack)))
                    off = (i * 0.35 * peak) if self.hist_mode == "offset" else 0.0
                    ys = np.concatenate([f.counts, f.counts[-1:]]).astype(np.float64) + off
                    implot.plot_stairs(f"step {f.step}{' (newest)' if age == 0 else ''}",
                                       f.edges.astype(np.float64), ys,
                                       _spec(self._rgb(run), alpha=alpha,
                                             weight=2.0 if age == 0 else 1.0))
                self._end_plot()

    def _histogram_time(self, panel: model.Panel, index: int) -> None:
        from ..views import Heatmap

        key = panel.keys[0]
        for k, run in enumerate(self.runs):
            frames = run.histograms.get(key, [])
            frames = [f for f in frames if len(f.counts) == len(frames[0].counts)]
            if not frames:
                continue
            def draw(frames=frames):  # bins (highest value at the top) x frames
                c = np.stack([f.counts for f in frames]).T[::-1].astype(np.float32)
                return self._draw_view(Heatmap(np.log1p(c), colormap="magma"),
                                       max(64, min(600, 8 * c.shape[1])), 200)

            tex = self._texture(("ht", k, key), (len(frames), frames[-1].step), draw)
            if self._begin_plot(f"##ht{index}_{k}", imgui.ImVec2(-1, PANEL_HEIGHT // max(1, len(self.runs)))):
                implot.setup_axes(model.AXIS_LABELS[self.axis], "value", implot.AxisFlags_.auto_fit,
                                  implot.AxisFlags_.auto_fit)
                xs = run.coordinate(self.axis, np.array([f.step for f in frames], dtype=float))
                e0, e1 = float(frames[0].edges[0]), float(frames[0].edges[-1])
                implot.plot_image(f"{run.name} log(1+count)", tex, implot.Point(float(xs[0]), e0),
                                  implot.Point(float(xs[-1]) + 1e-9, e1))
                self._cursor_line(1000 + index * 16 + k)
                self._end_plot()

    def _runs_with(self, section: str, key: str) -> list[tuple[int, Run]]:
        """The runs (with their colour index) that recorded ``key``; one line names the others."""
        having = [(k, run) for k, run in enumerate(self.runs) if getattr(run, section).get(key)]
        missing = [run.name for run in self.runs if not getattr(run, section).get(key)]
        if missing and len(self.runs) > 1:
            imgui.text_disabled(f"not recorded in: {', '.join(missing)}")
        return having

    def _array_panel(self, panel: model.Panel, index: int) -> None:
        key = panel.keys[0]
        imgui.text(panel.title)
        for i, (k, run) in enumerate(self._runs_with("arrays", key)):
            if i:
                imgui.same_line()
            imgui.begin_group()
            f, text = model.frame_reading(run, run.arrays.get(key, []), self.axis, self.cursor)
            imgui.text_colored(_col(self._rgb(run)), f"{run.name}: {text}")
            if f is not None:
                ident = ", ".join(x for x in (f"module {f.module}" if f.module else "",
                                              f"example {f.example}" if f.example else "",
                                              f"shape {tuple(f.array.shape)}") if x)
                imgui.text_disabled(ident)
                a = f.array
                fin = np.isfinite(a)
                if fin.any():
                    imgui.text_disabled(f"range {a[fin].min():.4g} .. {a[fin].max():.4g}"
                                        + ("" if fin.all() else f", {int((~fin).sum())} NaN/Inf"))
                size = ARRAY_PX if len(self.runs) > 1 else min(2 * ARRAY_PX, PANEL_HEIGHT - 40)
                tex = self._view_texture(("a", k, key), f.step, lambda d, n=a.ndim: self._array_view(d, n),
                                         self._array_data(a), size, size)
                imgui.image(tex, imgui.ImVec2(*tex.size))
                self._cell_readout(("a", k, key), run, key, f, tex.size)
            imgui.end_group()

    def pin_cell(self, key: str, index, run: str | None = None) -> None:
        """Show cell ``index`` of array probe ``key`` (of run ``run``, default every run that has
        it) under its panel: its value at the cursor's frame and its trace over every frame, as
        a click on the cell does. ``index=None`` unpins."""
        for r in self.all_runs:
            if run in (None, r.name) and key in r.arrays:
                if index is None:
                    self.pinned.pop((r.name, key), None)
                else:
                    self.pinned[(r.name, key)] = tuple(int(i) for i in np.atleast_1d(index))

    def _hovered_cell(self, tex_key, shape: tuple, size) -> tuple | None:
        """The probe index under the mouse on the image just drawn, by its view's own mapping."""
        held = self._canvases.get(tex_key)
        if held is None or not imgui.is_item_hovered():
            return None
        p0, m = imgui.get_item_rect_min(), imgui.get_mouse_pos()
        cell = held[2].cell_at(int(m.x - p0.x), int(m.y - p0.y), *size)
        if cell is None:
            return None
        if len(shape) <= 1:
            return (cell[1],)
        if len(shape) == 2:
            return tuple(cell)
        tile, row, col = cell
        return (*np.unravel_index(tile, shape[:-2]), row, col)

    def _cell_readout(self, tex_key, run: Run, key: str, frame, size) -> None:
        """Hovering a cell shows its value, index, the probe's identity and the frame's step, and
        its trace over every frame; a click pins it under the panel."""
        shape = tuple(np.shape(frame.array))
        hovered = self._hovered_cell(tex_key, shape, size)
        if hovered is not None:
            if imgui.is_mouse_clicked(0):
                self.pinned[(run.name, key)] = hovered
            imgui.begin_tooltip()
            imgui.text(model.cell_text(frame, hovered))
            self._cell_trace(f"##hover{key}", run, key, hovered)
            imgui.text_disabled("click to pin it under the panel")
            imgui.end_tooltip()
        pinned = self.pinned.get((run.name, key))
        if pinned is not None:  # beside the image: the panel is wider than the square image
            inside = len(pinned) == len(shape) and all(0 <= i < n for i, n in zip(pinned, shape, strict=True))
            imgui.same_line()
            imgui.begin_group()
            imgui.push_text_wrap_pos(imgui.get_cursor_pos_x() + TRACE_W)
            imgui.text(model.cell_text(frame, pinned) if inside else
                       f"cell [{', '.join(map(str, pinned))}]: not in this frame (shape {shape})")
            imgui.pop_text_wrap_pos()
            self._cell_trace(f"##pin{run.name}{key}", run, key, pinned,
                             max(TRACE_PX, size[1] - 3 * imgui.get_text_line_height_with_spacing()))
            imgui.end_group()

    def _cell_trace(self, plot_id: str, run: Run, key: str, index: tuple, height: float = TRACE_PX) -> None:
        """One cell over every frame of the probe: a marker per frame (the steps between frames
        have no value and stay empty), the cursor's frame highlighted."""
        steps, values = model.cell_trace(run.arrays[key], index)
        x = run.coordinate(self.axis, steps)
        if self._begin_plot(plot_id, imgui.ImVec2(TRACE_W, height), implot.Flags_.no_legend):
            implot.setup_axes("", "", 0, implot.AxisFlags_.auto_fit)
            known = x[np.isfinite(x)]
            if len(known):
                implot.setup_axis_limits(implot.ImAxis_.x1, float(known.min()) - 0.5, float(known.max()) + 0.5,
                                         imgui.Cond_.always)
            # markers only: a frame is a sample, and between two frames nothing was recorded
            implot.plot_scatter(f"cell{plot_id}", x, values,
                                _spec(self._rgb(run), marker=implot.Marker_.circle))
            implot.tag_x(self.cursor, _col((1, 1, 1), 0.6))
            self._end_plot()

    def _confusion_panel(self, panel: model.Panel, index: int) -> None:
        from ..views import Confusion

        key = panel.keys[0]
        imgui.text_wrapped(panel.title + " — colour: share of the row, text: count; rows: true class, "
                           "columns: predicted; the lines' colours are the classes")
        readings = [(k, run, *model.frame_reading(run, run.confusions.get(key, []), self.axis, self.cursor))
                    for k, run in self._runs_with("confusions", key)]
        framed = [r for r in readings if r[2] is not None]
        missing: dict[str, list[str]] = {}
        for _, run, f, text in readings:
            if f is None:
                missing.setdefault(text.split(" (")[0], []).append(run.name)
        if missing:  # runs with no matrix at the cursor take one line, not a column each
            imgui.push_style_color(imgui.Col_.text, imgui.get_style_color_vec4(imgui.Col_.text_disabled))
            imgui.text_wrapped("; ".join(f"{why}: {', '.join(names)}" for why, names in missing.items()))
            imgui.pop_style_color()
        # the matrices share 60% of the row (the recall/precision plot keeps the rest); each as
        # wide as three-digit counts need, when there is room (the view writes them when they fit)
        share = 0.6 * imgui.get_content_region_avail().x / max(1, len(framed)) - 8
        for k, run, f, text in framed:
            imgui.begin_group()
            w = int(min(420, 30 * f.matrix.shape[0] + 20, max(120, share)))
            imgui.push_text_wrap_pos(imgui.get_cursor_pos_x() + w)
            imgui.text_colored(_col(self._rgb(run)), f"{run.name}: {text}")
            imgui.pop_text_wrap_pos()
            h = min(PANEL_HEIGHT - 60, w)
            tex = self._view_texture(("c", k, key), f.step, lambda d: Confusion(d, normalize="row"),
                                     f.matrix.astype(np.float32), w, h)
            imgui.image(tex, imgui.ImVec2(*tex.size))
            imgui.end_group()
            imgui.same_line()
        steps_axis = model.AXIS_LABELS[self.axis]
        # one line per class and run: a legend of them all would cover the plot; the colours are
        # the classes' (as in the matrix's order), and the axis label says which line is which
        if self._begin_plot(f"##rp{index}", imgui.ImVec2(-1, PANEL_HEIGHT - 20), implot.Flags_.no_legend):
            implot.setup_axes(steps_axis, "recall — / precision - -", 0, 0)
            implot.setup_axis_limits(implot.ImAxis_.y1, 0.0, 1.05)
            for run in self.runs:
                steps, recall, precision, names = run.recall_precision(key)
                if not len(steps):
                    continue
                x = run.coordinate(self.axis, steps)
                recall, precision = np.ascontiguousarray(recall.T), np.ascontiguousarray(precision.T)
                for c, name in enumerate(names):
                    rgb = PALETTE[c % len(PALETTE)]
                    suffix = "" if len(self.runs) == 1 else f" · {run.name}"
                    implot.plot_line(f"recall {name}{suffix}", x, recall[c], _spec(rgb, weight=1.2))
                    implot.plot_line(f"precision {name}{suffix}", x, precision[c], _spec(rgb, 0.5, 1.0))
            self._cursor_line(2000 + index)
            self._end_plot()

    # -- driving it ----------------------------------------------------------------------------
    def render(self, frames: int = 3) -> np.ndarray:
        """Draw offscreen (``frames`` frames: Dear ImGui lays windows out on the first) and
        return the last as ``(h, w, 4)`` uint8 RGBA."""
        rgba = None
        for _ in range(max(2, frames)):
            self.frame(events=[])
            rgba = self.ui.render()
        return rgba

    def save_png(self, path, frames: int = 3) -> Path:
        from ..engine.image import write_png

        return write_png(path, self.render(frames))

    def loop(self) -> None:
        """Run in the window until it is closed."""
        window = self.ui.window
        while window.alive:
            self.frame()
            self.ui.present()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for _, tex in self._textures.values():
            tex.close()
        self._textures.clear()
        for _, canvas, _ in self._canvases.values():
            canvas.close()
        self._canvases.clear()
        self.ui.close()


def open_runs(paths) -> list[Run]:
    """Load every run at ``paths`` (run directories, files, or directories of runs)."""
    from ..record import find_runs, load_run

    runs = []
    for p in paths:
        found = find_runs(p)
        if not found:
            from ..record import RunFileError

            raise RunFileError(f"{p}: no run here (expected a run directory, a run.json, a log.jsonl, "
                               f"TensorBoard event files, or a directory of runs)")
        runs.extend(load_run(f) for f in found)
    names = [r.name for r in runs]
    for r in runs:  # two runs called "run" side by side need telling apart
        if names.count(r.name) > 1 and r.source is not None:
            r.name = f"{r.name} ({Path(r.source).parent.name if r.source.is_file() else r.source.name})"
    return runs
