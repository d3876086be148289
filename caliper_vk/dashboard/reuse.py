"""Scalar panels not built at all in a frame where nothing but the cursor changed.

A kept panel's pixels are copied back by the overlay when its draw commands are byte-for-byte
those of the frame before (engine/retained.py), but building those commands (the ImPlot calls,
Dear ImGui's render, the copy and comparison of every vertex) is most of a cursor move's time.
So each scalar panel's static part is tagged with its *inputs*: the runs and series drawn (and
their lengths), the x axis, smoothing, log toggle, x view, legend rows, the panel's place and
size, the display and target sizes. The overlay trusts a tag once two submitted frames in a row
drew the same bytes from it (``RetainedRegions.holds``). A later frame with the same inputs,
the mouse not over the panel and no press that began on it, skips the panel's widgets: it
reserves the space they took (so the layout is the same), tells the overlay to copy the pixels
kept under that tag, and draws the cursor line where ImPlot would put it, from the x axis's
transform as ImPlot computes it. Any hover, click, drag, zoom, resize, data or toggle change
builds the panel in full that frame (tests/test_dashboard_retained.py compares whole frames
with full redraws, byte for byte).

A mixin of :class:`~caliper_vk.dashboard.app.Dashboard`.
"""

from __future__ import annotations

import math

import numpy as np
from imgui_bundle import imgui, implot

from . import model


class ReusedPanels:
    """Skipping a scalar panel's build (state lives on the Dashboard: ``_reusable``)."""

    def _panel_inputs(self, panel: model.Panel, index: int):
        """Everything the current scalar panel's static part is drawn from, or None while the
        mouse is over it or a press that began on it is held (its widgets react)."""
        io = imgui.get_io()
        p, s = imgui.get_window_pos(), imgui.get_window_size()

        def inside(x, y) -> bool:
            return p.x <= x < p.x + s.x and p.y <= y < p.y + s.y

        m = io.mouse_pos
        if inside(m.x, m.y):
            return None
        for b in range(len(io.mouse_down)):
            if io.mouse_down[b]:
                d = imgui.get_mouse_drag_delta(b, 0.0)  # from where the press began
                if inside(m.x - d.x, m.y - d.y):
                    return None
        data = tuple((id(run), len(run.snapshots), tuple(
            None if (sr := run.metrics.get(k)) is None else (id(sr), len(sr)) for k in panel.keys))
            for run in self.runs)
        ds, ov = io.display_size, self.ui.overlay
        return (id(panel), data, self.axis, self.smoothing, index in self.log_y, index in self.tables,
                index in self.epochs_overlaid,
                self._limits.get(index),
                self._legend_rows.get(index, 1), (p.x, p.y, s.x, s.y), (ds.x, ds.y), (ov.width, ov.height))

    def _note_axis(self, px: int) -> None:
        """In the current plot: keep its x axis's transform when it gives ImPlot's own pixel
        column ``px`` for the cursor (what :meth:`_cursor_column` computes)."""
        ax = implot.internal.get_current_plot().x_axis(0)
        axis = (float(ax.pixel_min), float(ax.scale_to_pixel), float(ax.range.min))
        self._cursor_axis = axis if _column(axis, self.cursor) == px else None

    def _kept_tag(self, index: int, at):
        """At the end of a panel built in full: remember how to stand in for it (its inputs,
        the space it took, its x axis and plot area) and return the tag for its static part."""
        axis, self._cursor_axis = self._cursor_axis, None
        inputs, self._inputs = self._inputs, None
        if inputs is None or axis is None or at is None:
            self._reusable.pop(index, None)
            return None
        end = imgui.internal.get_current_window().dc.cursor_max_pos
        self._reusable[index] = (inputs, (end.x, end.y), axis, at[1:])
        return inputs

    def _reuse_panel(self, index: int, inputs) -> bool:
        """Stand in for the current scalar panel when its inputs are those of the pixels the
        overlay keeps: the space reserved, the pixels reused, the cursor line drawn."""
        kept = self._reusable.get(index)
        if inputs is None or kept is None or kept[0] != inputs or not self.ui.holds(("panel", index), inputs):
            return False
        _, end, axis, area = kept
        start = imgui.get_cursor_screen_pos()
        imgui.dummy(imgui.ImVec2(end[0] - start.x, end[1] - start.y))
        self.ui.retain(("panel", index), inputs, reuse=True)
        self._cursor_strokes((_column(axis, self.cursor), *area))
        if index in self.tables:  # drawn after the static part, as a full build draws it
            self._value_table(self.panels[index], index)
        return True


def _column(axis, x: float) -> int:
    """The pixel column ImPlot draws a drag line at ``x`` in: ``PlotToPixels`` (the plot's
    float pixel origin plus a double scale times the offset, rounded to float) then rounded."""
    pixel_min, scale, lo = axis
    return math.floor(float(np.float32(pixel_min + scale * (x - lo))) + 0.5)
