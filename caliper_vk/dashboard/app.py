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

import math
from pathlib import Path

import numpy as np
from imgui_bundle import imgui, implot

from ..record import Run
from ..record.mapped import release_pages
from . import model
from .imgui_backend import ImGuiRenderer
from .arrays import ArrayPanels
from .marks import MarkedPanels
from .reuse import ReusedPanels
from .epochs import EpochOverlays
from .folded import FoldedPanels
from .scalars import ScalarPanels
from .sidebar import FOLD_RUNS, Sidebar  # noqa: F401 (FOLD_RUNS: app.FOLD_RUNS, as before)
from .table import ValueTables
from .style import PANEL_HEIGHT, SIDEBAR, _col, _implot_color, dim, fitted_text, run_colour


class Dashboard(ScalarPanels, ReusedPanels, ArrayPanels, MarkedPanels, ValueTables, EpochOverlays,
                FoldedPanels, Sidebar):
    """The dashboard over ``runs`` in a window (``window=``) or offscreen (``size=``)."""

    def __init__(self, runs: list[Run], size=(1600, 1000), window=None, axis: str = "step",
                 cursor: float | None = None, panels: list[str] | None = None, smoothing: float = 0.0,
                 columns: int = 2, history: int = 6, hist_mode: str = "overlay", log_y: bool = False,
                 shown: list[str] | None = None, reveal: bool = False, pinned: list[str] | None = None,
                 tables: bool = False, epochs: bool = False):
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
        self._colours = {r.name: run_colour(k) for k, r in enumerate(self.all_runs)}  # never repeated
        # reveal: each run drawn as it stood at the cursor (see model.revealed); settings hidden
        # until the reader has named a symptom
        self.reveal = bool(reveal)
        self.symptom = ""
        self.settings_shown = not self.reveal
        self._revealed: tuple | None = None
        self.hidden = {r.name for r in runs if shown and r.name not in shown}
        self.run_filter = ""
        self._limits: dict = {}
        self._cache: dict = {}
        self._edges: dict = {}  # (x column, view, columns) -> each pixel column's first sample (model.py)
        self._series_count = sum(len(r.metrics) for r in self.all_runs)  # (bounds the caches)
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
        self.folded: list[int] = []  # the panels shown folded into one "not recorded" line (folded.py)
        self.axis = axis
        self.smoothing = float(smoothing)
        self.columns = max(1, int(columns))
        self.history = max(1, int(history))
        self.hist_mode = hist_mode
        self.panels = model.default_panels(self.all_runs)
        # scalar panels with a logarithmic y axis (toggled per panel): those whose positive values
        # span more than two decades, and with log_y the loss panels
        self._log_losses = bool(log_y)
        self._log_flipped: set = set()  # panels whose log toggle the reader flipped
        self.log_y = self._auto_log()
        release_pages()  # those scans touched every column of the run files: none stays resident
        if panels == ["*"]:
            self.enabled = [True] * len(self.panels)
        elif panels:
            self.enabled = [any(matches(w, p) for w in panels) for p in self.panels]
            if not any(self.enabled):
                titles = "; ".join(p.title for p in self.panels)
                raise ValueError(f"no panel matches {panels}; the panels are: {titles}")
        else:  # a dashboard opens with loss, the task metric and the learning rate; add the rest as wanted
            # (a panel only runs hidden at first have, such as another task's metric, waits in the list)
            self.enabled = [p.options.get("group") in ("loss", "metrics", "lr")
                            and any(k in r.metrics for r in self.runs for k in p.keys) for p in self.panels]
            if not any(self.enabled):
                self.enabled = [i < 4 for i in range(len(self.panels))]
        # pinned panels are drawn first, in the order pinned (TensorBoard's "pin to top")
        self.pinned_panels: list[int] = []
        for w in pinned or ():
            hits = [i for i, p in enumerate(self.panels) if matches(w, p)]
            if not hits:
                raise ValueError(f"no panel matches {w!r} to pin; the panels are: "
                                 f"{'; '.join(p.title for p in self.panels)}")
            for i in hits:
                self.pin_panel(i)
        self.panel_filter = ""  # the sidebar's filter box: a regular expression over the panels shown
        # scalar panels drawn epoch over epoch (epochs.py; each has a toggle where it has a per-step
        # series and the runs have epochs): with ``epochs``, every one
        self.epochs_overlaid = {i for i, p in enumerate(self.panels) if p.kind == "scalar"} if epochs else set()
        # scalar panels showing the value table under the chart (table.py; each has a toggle)
        self.tables = {i for i, p in enumerate(self.panels) if p.kind == "scalar"} if tables else set()
        if cursor is None and self.reveal:  # reveal starts at the first evaluation
            firsts = [run.coordinate(axis, e[:1])[0] for run in self.runs
                      if len(e := model.evaluation_steps(run))]
            cursor = min(firsts) if firsts else 0.0
        if cursor is None:  # the latest recorded progress of any run, on the chosen axis
            ends = [run.coordinate(axis, np.array([run.step_range[1]]))[0]
                    for run in self.runs if run.step_range]
            cursor = np.nanmax(ends) if ends and not np.all(np.isnan(ends)) else 0.0
        self.cursor = float(cursor)
        self._textures: dict = {}
        self._items: dict = {}  # the legend of the panel being drawn: label -> colour
        self.as_cells: set = set()  # array keys drawn as cells though they could be a raw scatter
        self.pinned: dict = {}  # (run name, array key) -> the probe index whose readout is shown
        self._clip = None  # the robust y range of the panel being drawn, when one clips
        self._legend_rows: dict = {}  # panel index -> rows its legend took (the plot leaves room)
        self._laid_out = False  # the first frame() lays out once before it draws
        self._layout_pass = False  # True while it does
        self._wide = None  # the scalar panel being drawn has many traces (one band each): its extent
        self._log_axis = False  # ... and its y axis is logarithmic
        self._cursor_at = None  # the cursor line of the scalar plot being drawn (see _draw_cursor)
        self._cursor_axis = None  # its x axis's transform, when checked (see reuse.py)
        self._inputs = None  # what the scalar panel being drawn is drawn from (see reuse.py)
        self._reusable: dict = {}  # panel index -> how to stand in for it unbuilt (see reuse.py)
        self._canvases: dict = {}  # texture key -> (data shape, canvas, view) of arrays drawn by the engine
        self._prefetch: dict = {}  # texture key -> (run, w, h) the panels drew last frame (arrays.py)
        self.closed = False

    # -- one frame ---------------------------------------------------------------------------
    def frame(self, events=None) -> list:
        """Build one frame (Dear ImGui + ImPlot calls) for ``events``; the caller draws it
        (``ui.render()`` or ``ui.present()``). Dear ImGui sizes windows on the first frame and
        the plots take their layout from the frame before (legend rows, the epoch axis): the
        first call lays the frame out once undrawn, so the first frame drawn is complete and the
        next one finds its panels unchanged (kept: engine/retained.py)."""
        if not self._laid_out:
            self._laid_out = True
            self.ui.new_frame([])
            self._layout_pass = True  # (long traces reduced coarsely: this frame is not drawn)
            try:
                self._build()
            finally:
                self._layout_pass = False
            self.ui.discard_frame()
        events = self.ui.new_frame(events)
        self._build()
        return events

    def _build(self) -> None:
        if self.reveal:
            self._reveal_to_cursor()
        self._prefetch_textures()  # their GPU work overlaps the build (arrays.py)
        io = imgui.get_io()
        imgui.set_next_window_pos(imgui.ImVec2(0, 0))
        imgui.set_next_window_size(io.display_size)
        flags = (imgui.WindowFlags_.no_title_bar | imgui.WindowFlags_.no_resize | imgui.WindowFlags_.no_move
                 | imgui.WindowFlags_.no_collapse | imgui.WindowFlags_.no_bring_to_front_on_focus
                 | imgui.WindowFlags_.no_background)  # the overlay's clear colour is the background
        imgui.begin("caliper view", None, flags)
        # its scrollbar always there: one that appeared when the readouts overflow would narrow
        # the wrapped lines under it after the first frame (Dear ImGui decides it from the frame
        # before), and the first frame drawn would not be the settled one
        imgui.begin_child("sidebar", imgui.ImVec2(SIDEBAR, 0), imgui.ChildFlags_.borders,
                          imgui.WindowFlags_.always_vertical_scrollbar)
        self._sidebar()
        imgui.end_child()
        imgui.same_line()
        imgui.begin_child("panels", imgui.ImVec2(0, 0))
        shown = self._panels_shown()
        shown = self._fold_unrecorded(shown)  # one line for the panels no run shown has (folded.py)
        width = (imgui.get_content_region_avail().x - (self.columns - 1) * 8) / self.columns
        for n, (i, panel) in enumerate(shown):  # i: the panel's index in self.panels (its state's key)
            if n % self.columns:
                imgui.same_line()
            # no scrollbar: one appearing for a frame would narrow the plot and redo its columns
            # a value table under the chart makes its panel taller by the table's height (table.py)
            height = PANEL_HEIGHT + 60 + (self._table_height(panel) if i in self.tables else 0.0)
            imgui.begin_child(f"panel{i}", imgui.ImVec2(width, height), imgui.ChildFlags_.borders,
                              imgui.WindowFlags_.no_scrollbar)
            cached = len(self._cache)
            self._panel(panel, i)
            if len(self._cache) != cached:  # it scanned columns (a scale, a trace's pixel columns)
                release_pages()
            imgui.end_child()
        imgui.end_child()
        imgui.end()

    def _panels_shown(self) -> list[tuple[int, model.Panel]]:
        """The panels drawn, pinned ones first: those enabled that the filter box matches."""
        order = self.pinned_panels + [i for i in range(len(self.panels)) if i not in self.pinned_panels]
        return [(i, self.panels[i]) for i in order
                if self.enabled[i] and (not self.panel_filter or matches(self.panel_filter, self.panels[i]))]

    def pin_panel(self, index: int, on: bool = True) -> None:
        """Pin panel ``index`` to the top (shown, before every other), or unpin it."""
        if index in self.pinned_panels:
            self.pinned_panels.remove(index)
        if on:
            self.pinned_panels.append(index)
            self.enabled[index] = True

    def _rgb(self, run: Run) -> tuple:
        return self._colours[run.name]

    def _set_shown(self) -> None:
        """The runs drawn: those not hidden whose name contains the filter (case-insensitive).
        Each keeps its colour whichever others are shown."""
        f = self.run_filter.lower()
        self.full_runs = [r for r in self.all_runs if r.name not in self.hidden and f in r.name.lower()]
        self.runs = self.full_runs
        self._revealed = None
        self._limits.clear()  # refit the plots to the runs now shown
        self._cache.clear()

    def _auto_log(self) -> set:
        """The scalar panels that open on a log axis for the runs drawn: those whose positive
        values span more than two decades, and with ``log_y`` the loss panels."""
        return {i for i, p in enumerate(self.panels)
                if (self._log_losses and p.kind == "scalar" and p.options.get("group") == "loss")
                or model.spans_decades(self.runs, p)}

    def toggle_log(self, index: int, on: bool) -> None:
        """Panel ``index``'s log y toggle (kept when reveal mode chooses the axes again)."""
        if on != (index in self.log_y):
            self._log_flipped ^= {index}
        (self.log_y.add if on else self.log_y.discard)(index)

    def _reveal_to_cursor(self) -> None:
        """Reveal mode: draw each shown run as it stood at the cursor's step (recomputed when
        the cursor reaches another step). The axes are those of what is revealed: the x range
        and the log/linear choice are made again from it (a reader at step 0 must not see from
        the axes how long the run is, or that its loss will fall two decades); a log toggle the
        reader flipped stays flipped."""
        steps = [r.to_step(self.axis, self.cursor) for r in self.full_runs]
        key = tuple(None if s is None else int(s) for s in steps)
        if self._revealed is not None and self._revealed[0] == key:
            return
        ahead = [r.step_range is not None and self.cursor < r.coordinate(self.axis, np.array(
            [r.step_range[0]]))[0] for r in self.full_runs]
        self.runs = [r if s is None and not before else model.revealed(r, -1 if s is None else s)
                     for r, s, before in zip(self.full_runs, steps, ahead, strict=True)]
        self._revealed = (key, self.runs)
        self._cache = {k: v for k, v in self._cache.items() if k[0] in ("x",)}  # series changed
        self._limits.clear()  # fit every plot to what is revealed now
        self.log_y = self._auto_log() ^ self._log_flipped
        release_pages()

    def _readout(self) -> None:
        keys = []
        for p, on in zip(self.panels, self.enabled, strict=True):
            if on and p.kind == "scalar":
                keys.extend(p.keys)
        keys = [k for k in keys if any(k in run.metrics for run in self.runs)]  # not only hidden runs
        at = [run.to_step(self.axis, self.cursor) for run in self.runs]  # (once, not per key)
        for key in keys[:24]:
            imgui.text(key)
            others: dict[str, list[str]] = {}  # runs without a value here: one line, not one each
            for run, step in zip(self.runs, at, strict=True):
                r = model.read_cursor(run, key, self.axis, self.cursor, step)
                if r.state != "value":
                    if len(self.runs) == 1:  # its own range said in full
                        others.setdefault(r.text, []).append(run.name)
                    elif r.state != "not-recorded":
                        others.setdefault(r.text.split(" (")[0], []).append(run.name)
                    continue
                imgui.push_style_color(imgui.Col_.text, _col(self._rgb(run), 0.9))
                imgui.text_wrapped(f"  {run.name}: {r.text}")  # wrapped, never cut at the sidebar's edge
                imgui.pop_style_color()
            if others:  # cut with "…" when long, every run on hover
                fitted_text("  " + "; ".join(f"{why}: {', '.join(names)}" if len(self.runs) > 1 else why
                                             for why, names in others.items()), dim())
        # a search touches a few pages of the step and value columns, and the kernel maps a run
        # file's pages in large folios (2 MB each here): hand them back after the readout (key by
        # key cost 1.5 ms a frame in refaults of the shared step column; the readout holds at most
        # a folio or two per key meanwhile)
        release_pages()

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

    def _cursor_line(self, index: int, deferred: bool = False) -> None:
        """The cursor in the current plot: dragged, or set by a click. ``deferred``: ImPlot only
        handles the drag (its line is drawn transparent) and :meth:`_draw_cursor` draws the line
        after the rest of the panel, the last thing in its draw list."""
        changed, x, *_ = implot.drag_line_x(index, self.cursor, imgui.ImVec4(1, 1, 1, 0 if deferred else 0.8),
                                            1.5)
        if changed:
            self.cursor = float(x)
        elif implot.is_plot_hovered() and imgui.is_mouse_clicked(0):
            self.cursor = float(implot.get_plot_mouse_pos().x)
        if deferred:  # where the line goes, as ImPlot places a drag line: a rounded pixel column
            p0, size = implot.get_plot_pos(), implot.get_plot_size()
            px = math.floor(implot.plot_to_pixels(self.cursor, 1.0).x + 0.5)
            self._cursor_at = (px, p0.x, p0.y, p0.x + size.x, p0.y + size.y)
            self._note_axis(px)

    # Everything a scalar panel draws but its cursor is its *static part*: the overlay keeps its
    # pixels while it stays byte-for-byte the same (engine/retained.py), so a frame in which only
    # the cursor moved copies each such panel and draws one line over it. Any change (data, a
    # zoom, a hover, a resize) is a difference in the static part, which is then drawn again.
    RETAIN = True
    # ... and a panel whose inputs are those of its kept pixels is not built at all (reuse.py)
    REUSE = True

    def _draw_cursor(self, index: int) -> None:
        """The end of a scalar panel: mark what it drew as its static part, then draw the
        cursor line (and ImPlot's drag grips, 3x as thick, at both ends) over it."""
        at, self._cursor_at = self._cursor_at, None
        tag = self._kept_tag(index, at)
        if self.RETAIN:
            self.ui.retain(("panel", index), tag)
        if at is not None:
            self._cursor_strokes(at)

    def _cursor_strokes(self, at) -> None:
        """The cursor line at pixel column ``at[0]`` of plot area ``at[1:]``, with its grips."""
        x, x0, y0, x1, y1 = at
        v, dl = imgui.ImVec2, imgui.get_window_draw_list()
        col = imgui.color_convert_float4_to_u32(imgui.ImVec4(1, 1, 1, 0.8))
        tick = implot.get_style().major_tick_len.x
        dl.push_clip_rect(v(x0, y0), v(x1, y1), True)
        dl.add_line(v(x, y0), v(x, y1), col, 1.5)
        dl.add_line(v(x, y0), v(x, y0 + tick), col, 4.5)
        dl.add_line(v(x, y1), v(x, y1 - tick), col, 4.5)
        dl.pop_clip_rect()

    # -- driving it ----------------------------------------------------------------------------
    def render(self, frames: int = 3, copy: bool = True) -> np.ndarray:
        """Draw offscreen (``frames`` frames: Dear ImGui lays windows out on the first) and
        return the last as ``(h, w, 4)`` uint8 RGBA (``copy=False``: a read-only view valid
        until the next frame, see ``Overlay.pixels``)."""
        rgba = None
        for _ in range(max(2, frames)):
            self.frame(events=[])
            rgba = self.ui.render(copy=False)
        return rgba.copy() if copy else rgba

    def save_png(self, path, frames: int = 3) -> Path:
        from ..engine.image import write_png

        return write_png(path, self.render(frames, copy=False))  # written at once: no copy

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


def matches(pattern: str, panel: model.Panel) -> bool:
    """Whether ``pattern`` (a regular expression, case-insensitive; one that does not compile is
    taken literally) is found in the panel's title or in one of its metrics' names."""
    import re

    try:
        rx = re.compile(pattern, re.IGNORECASE)
    except re.error:
        rx = re.compile(re.escape(pattern), re.IGNORECASE)
    return bool(rx.search(panel.title)) or any(rx.search(k) for k in panel.keys)


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
