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
from .arrays import ArrayPanels
from .imgui_backend import ImGuiRenderer
from .scalars import ScalarPanels
from .style import PALETTE, PANEL_HEIGHT, SIDEBAR, color, implot_color


class Dashboard(ScalarPanels, ArrayPanels):
    """The dashboard over ``runs`` in a window (``window=``) or offscreen (``size=``)."""

    def __init__(self, runs: list[Run], size=(1600, 1000), window=None, axis: str = "step",
                 cursor: float | None = None, panels: list[str] | None = None, smoothing: float = 0.0,
                 columns: int = 2, history: int = 6, hist_mode: str = "overlay", log_y: bool = False):
        if not runs:
            raise ValueError("the dashboard needs at least one run")
        if axis not in model.AXES:
            raise ValueError(f"axis must be one of {', '.join(model.AXES)}, got {axis!r}")
        if hist_mode not in ("overlay", "offset", "time"):
            raise ValueError(f"histogram mode must be overlay, offset or time, got {hist_mode!r}")
        if not 0.0 <= float(smoothing) < 1.0:
            raise ValueError(f"smoothing is an EMA weight in [0, 1), got {smoothing}")
        self.runs = runs
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
        self.panels = model.default_panels(runs)
        # scalar panels with a logarithmic y axis (toggled per panel); log_y starts the loss panels so
        self.log_y = {i for i, p in enumerate(self.panels)
                      if log_y and p.kind == "scalar" and p.options.get("group") == "loss"}
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
            ends = [run.coordinate(axis, np.array([run.step_range[1]]))[0] for run in runs if run.step_range]
            cursor = np.nanmax(ends) if ends and not np.all(np.isnan(ends)) else 0.0
        self.cursor = float(cursor)
        self._textures: dict = {}
        self._canvases: dict = {}  # texture key -> (data shape, canvas, view) of arrays drawn by the engine
        self._limits: dict = {}
        self._cache: dict = {}
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
        shown = [p for p, on in zip(self.panels, self.enabled, strict=True) if on]
        width = (imgui.get_content_region_avail().x - (self.columns - 1) * 8) / self.columns
        for i, panel in enumerate(shown):
            if i % self.columns:
                imgui.same_line()
            imgui.begin_child(f"panel{i}", imgui.ImVec2(width, PANEL_HEIGHT + 60), imgui.ChildFlags_.borders)
            self._panel(panel, i)
            imgui.end_child()
        imgui.end_child()
        imgui.end()
        return events

    def _sidebar(self) -> None:
        imgui.text("Runs")
        for k, run in enumerate(self.runs):
            imgui.text_colored(color(PALETTE[k % len(PALETTE)]), f"■ {run.name}")
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
        for key in keys[:24]:
            imgui.text(key)
            for k, run in enumerate(self.runs):
                r = model.read_cursor(run, key, self.axis, self.cursor)
                if r.state == "not-recorded" and len(self.runs) > 1:
                    continue
                imgui.text_colored(color(PALETTE[k % len(PALETTE)], 0.9 if r.state == "value" else 0.55),
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
            colors = [implot_color(implot.Col_.frame_bg, imgui.Col_.frame_bg),
                      implot_color(implot.Col_.plot_bg, imgui.Col_.window_bg)]
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
