"""Array panels of the dashboard: weight histograms (overlaid, offset, or over time), arrays
(kernels, feature maps, attention) and confusion matrices, drawn by the engine's own views and
shown as textures, each with the step of the frame it shows.

A mixin of :class:`~caliper_vk.dashboard.app.Dashboard`: it reads the dashboard's runs, axis,
cursor and texture cache.
"""

from __future__ import annotations

import numpy as np
from imgui_bundle import imgui, implot

from ..record import Run
from . import model
from .style import ARRAY_PX, PALETTE, PANEL_HEIGHT, color, line_spec


class ArrayPanels:
    def _histogram_panel(self, panel: model.Panel, index: int) -> None:
        key = panel.keys[0]
        imgui.text(panel.title + ("   (vertical offset is a display choice, not extra counts)"
                                  if self.hist_mode == "offset" else ""))
        for k, run in enumerate(self.runs):
            frames = run.histograms.get(key, [])
            f, text = model.frame_reading(run, frames, self.axis, self.cursor)
            imgui.text_colored(color(PALETTE[k % len(PALETTE)]), f"{run.name}: {text}")
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
                                       line_spec(PALETTE[k % len(PALETTE)], alpha=alpha,
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
            imgui.text_colored(color(PALETTE[k % len(PALETTE)]), f"{run.name}: {text}")
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
            imgui.end_group()

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
            imgui.text_colored(color(PALETTE[k % len(PALETTE)]), f"{run.name}: {text}")
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
                    implot.plot_line(f"recall {name}{suffix}", x, recall[c], line_spec(rgb, weight=1.2))
                    implot.plot_line(f"precision {name}{suffix}", x, precision[c], line_spec(rgb, 0.5, 1.0))
            self._cursor_line(2000 + index)
            self._end_plot()
