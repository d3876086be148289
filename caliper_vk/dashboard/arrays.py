"""Array panels of the dashboard: histograms (overlay, offset, over time), array probes with
their cell readout and trace, confusion matrices with recall and precision over progress.
Arrays are drawn by the engine's own views into canvases shown as textures.

A mixin of :class:`~caliper_vk.dashboard.app.Dashboard`; the rules live in :mod:`.model`.
"""

from __future__ import annotations

import numpy as np
from imgui_bundle import imgui, implot

from ..record import Run
from . import model
from .style import ARRAY_PX, PANEL_HEIGHT, TRACE_PX, TRACE_W, _col, _spec, dim, fitted_text, run_colour
from .ticks import sparse_ticks


class ArrayPanels:
    """Drawing of the array panels and the engine-drawn textures (state lives on the Dashboard)."""

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
        cursor moved onto another frame) goes to the view's ``set_data`` and is drawn again. The
        canvas's frame is submitted and never waited for: the texture is linked to its image,
        which the overlay's frame copies on the GPU (no read back, no upload)."""
        from ..engine import Canvas

        entry = self._textures.get(key)
        if entry is not None and entry[0] == signature:
            return entry[1]
        kind = (data.shape, data.dtype, w, h)
        held = self._canvases.get(key)
        if held is not None and held[0] == kind:
            if not held[1].done():  # its parameters and inputs are about to be rewritten
                held[1].device.wait()
            held[2].set_data(data)
        else:
            if entry is not None:
                entry[1].close()
                entry = None
            if held is not None:
                held[1].close()
            view = make_view(data)
            canvas = Canvas(w, h, device=self.ui.device)
            canvas.add(view)
            held = self._canvases[key] = (kind, canvas, view)
        held[1].submit(readback=False)
        tex = entry[1] if entry is not None else self.ui.add_canvas_texture(held[1])
        self._textures[key] = (signature, tex)
        return tex

    def _frame_texture(self, key, run: Run, frame, w: int, h: int):
        """The engine-drawn texture of an array probe's (``key[0] == "a"``) or a confusion
        matrix's (``"c"``) frame at ``w`` x ``h``. Noted for :meth:`_prefetch_textures`."""
        from ..views import Confusion

        self._prefetch[key] = (run, w, h)
        if key[0] == "a":
            a = frame.array
            return self._view_texture(key, (frame.step, w, h),
                                      lambda d, n=a.ndim, kind=frame.kind: self._array_view(d, n, kind),
                                      self._array_data(a), w, h)
        return self._view_texture(key, (frame.step, w, h), lambda d: Confusion(d, normalize="row"),
                                  frame.matrix.astype(np.float32), w, h)

    def _prefetch_textures(self) -> None:
        """At the start of a frame: draw the engine textures the panels drew last frame, for the
        frame at the cursor now (same keys, runs and sizes), so their GPU work runs while the
        rest of the frame is built; a panel then finds its texture drawn (any other size or
        run draws it again there)."""
        noted, self._prefetch = self._prefetch, {}
        for key, (run, w, h) in noted.items():
            if not any(r is run for r in self.runs):
                continue
            frames = (run.arrays if key[0] == "a" else run.confusions).get(key[2], [])
            f, _ = model.frame_reading(run, frames, self.axis, self.cursor)
            if f is not None:
                self._frame_texture(key, run, f, w, h)
        self._prefetch = {}  # noted again by the panels drawn this frame

    @staticmethod
    def _array_data(a: np.ndarray) -> np.ndarray:
        """An array probe as the array view draws it: float32, a row, a matrix or a stack of tiles."""
        a = np.asarray(a, dtype=np.float32)
        if a.ndim <= 1:
            return a.reshape(1, -1)
        return a if a.ndim == 2 else a.reshape(-1, a.shape[-2], a.shape[-1])

    @staticmethod
    def _array_view(a: np.ndarray, ndim: int, kind: str | None = None):
        """The view of ``_array_data(x)`` for an ``ndim``-dimensional probe ``x``. A probe recorded
        with ``kind="image"`` is drawn in grey, on [0, 1] when its values lie there (so an input,
        an upscale and its target read on one scale), else from its own extremes."""
        from ..views import Heatmap, Images

        if kind == "image":
            fin = a[np.isfinite(a)]
            unit = fin.size and fin.min() >= 0.0 and fin.max() <= 1.0
            span = (0.0, 1.0) if unit else "auto"
            if ndim <= 2:
                return Heatmap(a, colormap="gray", value_range=span)
            return Images(a, normalize="shared", colormap="gray", value_range=span)
        if ndim <= 1:
            return Heatmap(a, colormap="viridis")
        if ndim == 2:
            return Heatmap(a, colormap="RdBu_r", value_range="symmetric")
        return Images(a, normalize="tile", colormap="RdBu_r", value_range="symmetric")

    def _histogram_panel(self, panel: model.Panel, index: int) -> None:
        """Each run's latest frames at the cursor (overlaid or offset, fading by age), or its frames
        over time; a plot per run, sharing the height the lines above them leave. With more than
        two runs each run's lines are joined into one (cut with "…", whole on hover)."""
        key = panel.keys[0]
        fitted_text(panel.title + ("   (vertical offset is a display choice, not extra counts)"
                                   if self.hist_mode == "offset" else ""))
        stacks = {}  # id(run) -> the frames drawn, oldest first (overlay and offset)
        shown = {}  # run name -> the step of the frame drawn at the cursor
        joined = len(self.runs) > 2
        for run in self.runs:
            frames = run.histograms.get(key, [])
            f, text = model.frame_reading(run, frames, self.axis, self.cursor)
            lines = [f"{run.name}: {text}"]
            if f is not None:
                shown[run.name] = f.step
                step = run.to_step(self.axis, self.cursor)
                stack = model.histogram_stack(frames, step, self.history) if step is not None else []
                stacks[id(run)] = stack
                # what each line is, said here (a legend over the plot covered the bins)
                fading = (f"; {len(stack) - 1} earlier fading (steps {stack[0].step}–{stack[-2].step})"
                          if len(stack) > 1 and self.hist_mode != "time" else "")
                lines.append(f"outside [{f.edges[0]:g}, {f.edges[-1]:g}]: below {f.below}, above {f.above}"
                             + (f", NaN {f.nan}, Inf {f.inf}" if f.nan or f.inf else "") + fading)
            fitted_text(lines[0] if not joined else "; ".join(lines), _col(self._rgb(run)))
            if len(lines) > 1 and not joined:
                fitted_text(lines[1])
        if self.hist_mode == "time":  # over progress: the events are lines at their steps there
            return self._histogram_time(panel, index)
        self._event_note(shown)  # frames at the cursor: the events so far named (marks.py)
        live = [(k, run) for k, run in enumerate(self.runs) if stacks.get(id(run))]
        grids = {id(run): model.histogram_grid(stacks[id(run)]) for _, run in live}
        rule = next((r for _, r in grids.values() if r), None)
        if rule:  # the heights are counts in equal bins: say how unequal buckets became them
            fitted_text(f"height: count per equal bin; {rule}", dim())
        h = self._plot_height(len(live))
        for k, run in live:
            stack = stacks[id(run)]
            if self._begin_plot(f"##h{index}_{k}", imgui.ImVec2(-1, h), implot.Flags_.no_legend):
                implot.setup_axes("value" if h > 60 else "", "" if h <= 60 else
                                  "count (offset)" if self.hist_mode == "offset" else "count",
                                  implot.AxisFlags_.auto_fit, implot.AxisFlags_.auto_fit)
                edges = grids[id(run)][0]
                heights = [model.rebin(f, edges) for f in stack]
                peak = max(float(c.max(initial=0)) for c in heights) or 1.0
                for i, (f, c) in enumerate(zip(stack, heights, strict=True)):
                    age = len(stack) - 1 - i
                    alpha = 1.0 if age == 0 else 0.15 + 0.6 * (1 - age / max(1, len(stack)))
                    off = (i * 0.35 * peak) if self.hist_mode == "offset" else 0.0
                    ys = np.concatenate([c, c[-1:]]) + off
                    implot.plot_stairs(f"step {f.step}", edges, ys,
                                       _spec(self._rgb(run), alpha=alpha,
                                             weight=2.0 if age == 0 else 1.0))
                self._end_plot()

    @staticmethod
    def _plot_height(plots: int) -> float:
        """The height of each of ``plots`` plots stacked in what is left of the panel."""
        spacing = imgui.get_style().item_spacing.y
        return max(24.0, (imgui.get_content_region_avail().y - 4 - spacing * max(0, plots - 1))
                   / max(1, plots))

    def _histogram_time(self, panel: model.Panel, index: int) -> None:
        """Each run's frames over time as an image (bins up, frames across), its colour the count:
        what the colour is is said above the plots, never in a legend over them."""
        from ..views import Heatmap

        key = panel.keys[0]
        live = []
        for k, run in enumerate(self.runs):
            frames = run.histograms.get(key, [])
            if frames:
                live.append((k, run, frames, *model.histogram_grid(frames)))
        if live:
            fitted_text("colour: log(1 + count) of each bin (brighter: more values), one column a frame", dim())
            rule = next((r for *_, r in live if r), None)
            if rule:  # rows are equal steps of value: say how unequal buckets became them
                fitted_text(rule, dim())
        h = self._plot_height(len(live))
        for k, run, frames, edges, _ in live:
            def draw(frames=frames, edges=edges):  # bins (highest value at the top) x frames
                c = np.stack([model.rebin(f, edges) for f in frames]).T[::-1].astype(np.float32)
                return self._draw_view(Heatmap(np.log1p(c), colormap="magma"),
                                       max(64, min(600, 8 * c.shape[1])), 200)

            tex = self._texture(("ht", k, key), (len(frames), frames[-1].step), draw)
            if self._begin_plot(f"##ht{index}_{k}", imgui.ImVec2(-1, h), implot.Flags_.no_legend):
                implot.setup_axes(model.AXIS_LABELS[self.axis] if h > 60 else "", "value" if h > 60 else "",
                                  implot.AxisFlags_.auto_fit, implot.AxisFlags_.auto_fit)
                xs = run.coordinate(self.axis, np.array([f.step for f in frames], dtype=float))
                e0, e1 = float(edges[0]), float(edges[-1])
                implot.plot_image(f"{run.name} log(1+count)", tex, implot.Point(float(xs[0]), e0),
                                  implot.Point(float(xs[-1]) + 1e-9, e1))
                self._run_marks()
                self._cursor_line(1000 + index * 16 + k)
                self._end_plot()

    def _runs_with(self, section: str, key: str) -> list[tuple[int, Run]]:
        """The runs (with their colour index) that recorded ``key``; one line (cut to the panel,
        whole on hover) names the others, or says that none of the runs shown has it."""
        having = [(k, run) for k, run in enumerate(self.runs) if getattr(run, section).get(key)]
        missing = [run.name for run in self.runs if not getattr(run, section).get(key)]
        if not having:
            fitted_text(f"not recorded in the run{'s' if len(self.runs) > 1 else ''} shown", dim())
        elif missing:
            fitted_text(f"not recorded in: {', '.join(missing)}", dim())
        return having

    def _array_panel(self, panel: model.Panel, index: int) -> None:
        """Each run's frame at the cursor in a column of its own, laid out whole: the columns share
        the panel's width, and each image is as large as its column and the panel's height leave
        it (a pinned cell's readout and trace take part of the column beside it)."""
        key = panel.keys[0]
        having = [(k, run) for k, run in enumerate(self.runs) if run.arrays.get(key)]
        two = [run for _, run in having if self._has_raw_pairs(run, key)]
        fitted_text(panel.title, reserve=imgui.calc_text_size("raw scatter").x + 40 if two else 0.0)
        if two:  # a two-unit hidden state: its own two coordinates can be drawn as they are
            imgui.same_line()
            changed, on = imgui.checkbox(f"raw scatter##sc{index}", key not in self.as_cells)
            if changed:
                (self.as_cells.discard if on else self.as_cells.add)(key)
        having = self._runs_with("arrays", key)
        if not having:
            return
        frames = {run.name: f.step for _, run in having
                  if (f := model.frame_reading(run, run.arrays[key], self.axis, self.cursor)[0]) is not None}
        self._event_note(frames)  # the events so far, and whether each frame predates them (marks.py)
        spacing = imgui.get_style().item_spacing.x
        line = imgui.get_text_line_height_with_spacing()
        col_w = (imgui.get_content_region_avail().x - spacing * (len(having) - 1)) / len(having)
        room_h = imgui.get_content_region_avail().y - 3 * line - 4  # under the column's three lines
        for i, (k, run) in enumerate(having):
            if i:
                imgui.same_line()
            imgui.begin_group()
            f, text = model.frame_reading(run, run.arrays.get(key, []), self.axis, self.cursor)
            fitted_text(f"{run.name}: {text}", _col(self._rgb(run)), width=col_w)
            if f is None:
                imgui.dummy(imgui.ImVec2(col_w, 1))
                imgui.end_group()
                continue
            ident = ", ".join(x for x in (f"module {f.module}" if f.module else "",
                                          f"example {f.example}" if f.example else "",
                                          f"shape {tuple(f.array.shape)}") if x)
            fitted_text(ident, dim(), width=col_w)  # a long example name ends in "…", whole on hover
            a = f.array
            fin = np.isfinite(a)
            fitted_text(f"range {a[fin].min():.4g} .. {a[fin].max():.4g}"
                        + ("" if fin.all() else f", {int((~fin).sum())} NaN/Inf") if fin.any()
                        else "no finite value", dim(), width=col_w)
            pinned = self.pinned.get((run.name, key)) is not None
            beside = min(TRACE_W, max(140.0, col_w / 2)) if pinned else 0.0  # the pinned cell's readout
            most = ARRAY_PX if len(self.runs) > 1 else 2 * ARRAY_PX
            size = int(max(32, min(most, room_h, col_w - (beside + spacing if pinned else 0.0))))
            if model.raw_pairs(a) and key not in self.as_cells:
                self._raw_scatter(f"##raw{index}_{k}", run, a, size, col_w)
                imgui.end_group()
                continue
            tex = self._frame_texture(("a", k, key), run, f, size, size)
            imgui.image(tex, imgui.ImVec2(*tex.size))
            self._cell_readout(("a", k, key), run, key, f, tex.size, col_w - size - spacing)
            imgui.end_group()

    def _has_raw_pairs(self, run: Run, key: str) -> bool:
        """Whether any frame of probe ``key`` is a two-unit hidden state (once per run shown)."""
        ck = ("raw pairs", id(run), key)
        if ck not in self._cache:
            self._cache[ck] = any(model.raw_pairs(f.array) for f in run.arrays[key])
        return self._cache[ck]

    def _raw_scatter(self, plot_id: str, run: Run, a: np.ndarray, size: int, width: float) -> None:
        """An (examples, 2) hidden state as its raw coordinates: one point per example, unit 0
        across and unit 1 up, on equal scales; no projection is computed, and the axes say so."""
        fitted_text("raw coordinates of the 2 units (not a projection)", dim(), width=width)
        height = max(60.0, imgui.get_content_region_avail().y - 4)
        if self._begin_plot(plot_id, imgui.ImVec2(min(height + 60, width), height), implot.Flags_.no_legend
                            | implot.Flags_.equal):
            implot.setup_axes("unit 0 (raw)", "unit 1 (raw)", implot.AxisFlags_.auto_fit,
                              implot.AxisFlags_.auto_fit)
            xy = np.ascontiguousarray(np.asarray(a, np.float64).T)
            dots = _spec(self._rgb(run), marker=implot.Marker_.circle)
            implot.plot_scatter(f"points{plot_id}", xy[0], xy[1], dots)
            self._end_plot()

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

    def _cell_readout(self, tex_key, run: Run, key: str, frame, size, width: float) -> None:
        """Hovering a cell shows its value, index, the probe's identity and the frame's step, and
        its trace over every frame; a click pins it beside the image, in the ``width`` pixels
        the column leaves there (each part of the readout on a line of its own, cut with "…"
        and whole on hover)."""
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
        if pinned is not None:  # beside the image: the column is wider than the square image
            inside = len(pinned) == len(shape) and all(0 <= i < n for i, n in zip(pinned, shape, strict=True))
            imgui.same_line()
            imgui.begin_group()
            text = (model.cell_text(frame, pinned) if inside else
                    f"cell [{', '.join(map(str, pinned))}]: not in this frame (shape {shape})")
            parts = text.split("; ")
            for part in parts:
                fitted_text(part, width=width)
            line = imgui.get_text_line_height_with_spacing()
            self._cell_trace(f"##pin{run.name}{key}", run, key, pinned,
                             max(40.0, size[1] - len(parts) * line - 4), width)
            imgui.end_group()

    def _cell_trace(self, plot_id: str, run: Run, key: str, index: tuple, height: float = TRACE_PX,
                    width: float = TRACE_W) -> None:
        """One cell over every frame of the probe: a marker per frame (the steps between frames
        have no value and stay empty), the cursor's frame highlighted."""
        steps, values = model.cell_trace(run.arrays[key], index)
        x = run.coordinate(self.axis, steps)
        if self._begin_plot(plot_id, imgui.ImVec2(min(TRACE_W, width), height), implot.Flags_.no_legend):
            implot.setup_axes("", "", 0, implot.AxisFlags_.auto_fit)
            known = x[np.isfinite(x)]
            if len(known):
                implot.setup_axis_limits(implot.ImAxis_.x1, float(known.min()) - 0.5, float(known.max()) + 0.5,
                                         imgui.Cond_.always)
            # markers only: a frame is a sample, and between two frames nothing was recorded
            implot.plot_scatter(f"cell{plot_id}", x, values,
                                _spec(self._rgb(run), marker=implot.Marker_.circle))
            implot.tag_x(self.cursor, _col((1, 1, 1), 0.6))
            self._run_marks()
            self._end_plot()

    def _confusion_panel(self, panel: model.Panel, index: int) -> None:
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
        self._event_note({run.name: f.step for _, run, f, _ in framed})  # (marks.py)
        # the matrices share 60% of the row (the recall/precision plot keeps the rest); each as
        # wide as three-digit counts need, when there is room (the view writes them when they fit)
        avail = imgui.get_content_region_avail().x  # the plot keeps at least 200 px of it
        share = min(0.6 * avail, avail - 200) / max(1, len(framed)) - 8
        widths = [int(min(420, 30 * f.matrix.shape[0] + 20, max(64, share))) for _, _, f, _ in framed]
        # The plot is drawn first, beside where the matrices go: its lines span every frame and
        # stay the same as the cursor moves, so with the title they are the panel's static part
        # (kept, engine/retained.py); the matrices at the cursor and the cursor line are drawn
        # over them (each cursor move re-rasterised thousands of line triangles before)
        row = imgui.get_cursor_pos()
        spacing = imgui.get_style().item_spacing.x
        imgui.set_cursor_pos(imgui.ImVec2(row.x + sum(w + spacing for w in widths), row.y))
        at = self._recall_precision_plot(key, index)
        if self.RETAIN:
            self.ui.retain(("panel", index))
        imgui.set_cursor_pos(row)
        room = imgui.get_content_region_avail().y - imgui.get_text_line_height_with_spacing() - 4
        for (k, run, f, text), w in zip(framed, widths, strict=True):
            imgui.begin_group()
            fitted_text(f"{run.name}: {text}", _col(self._rgb(run)), width=w)
            h = int(max(24, min(PANEL_HEIGHT - 60, w, room)))
            tex = self._frame_texture(("c", k, key), run, f, w, h)
            imgui.image(tex, imgui.ImVec2(*tex.size))
            imgui.end_group()
            imgui.same_line()
        if at is not None:
            self._cursor_strokes(at)

    def _recall_precision_plot(self, key: str, index: int):
        """Recall and precision of every class over every frame; returns where its cursor line
        goes (drawn later, over the panel's static part), or None when the plot is not shown."""
        steps_axis = model.AXIS_LABELS[self.axis]
        # one line per class and run: a legend of them all would cover the plot; the colours are
        # the classes' (as in the matrix's order), and the axis label says which line is which
        room = imgui.get_content_region_avail().x - 70  # the plot area, beside its y axis's labels
        height = max(60.0, imgui.get_content_region_avail().y - 4)  # what the lines above it leave
        if not self._begin_plot(f"##rp{index}", imgui.ImVec2(-1, height), implot.Flags_.no_legend):
            return None
        if imgui.calc_text_size(steps_axis).x > room:  # "step", not "step (optimizer updates)" cut off
            steps_axis = steps_axis.split(" (")[0]
        implot.setup_axes(steps_axis, "recall — / precision - -", 0, 0)
        implot.setup_axis_limits(implot.ImAxis_.y1, 0.0, 1.05)
        shown = []
        for run in self.runs:
            rp = ("recall/precision", id(run), key)  # over every frame: once per run shown
            if rp not in self._cache:
                self._cache[rp] = run.recall_precision(key)
            steps, recall, precision, names = self._cache[rp]
            if len(steps):
                shown.append((run, run.coordinate(self.axis, steps), recall, precision, names))
        xs = [x[np.isfinite(x)] for _, x, *_ in shown]
        xs = [x for x in xs if len(x)]
        if xs:  # round ticks, as many as the width holds, compactly labelled ("500k", not "500000"):
            # this plot is often ~100 px wide, where ImPlot's own labels ran into each other
            ticks = sparse_ticks(min(float(x.min()) for x in xs), max(float(x.max()) for x in xs),
                                 most=max(2, min(5, int(room // 55))))  # a label per 55 px at most
            if ticks:
                implot.setup_axis_ticks(implot.ImAxis_.x1, [t for t, _ in ticks], [label for _, label in ticks])
        for run, x, recall, precision, names in shown:
            recall, precision = np.ascontiguousarray(recall.T), np.ascontiguousarray(precision.T)
            for c, name in enumerate(names):
                rgb = run_colour(c)
                suffix = "" if len(self.runs) == 1 else f" · {run.name}"
                implot.plot_line(f"recall {name}{suffix}", x, recall[c], _spec(rgb, weight=1.2))
                implot.plot_line(f"precision {name}{suffix}", x, precision[c], _spec(rgb, 0.5, 1.0))
        self._run_marks()
        self._cursor_line(2000 + index, deferred=True)
        self._end_plot()
        at, self._cursor_at, self._cursor_axis = self._cursor_at, None, None
        return at
