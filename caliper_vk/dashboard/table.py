"""The value table under a scalar chart (TensorBoard's): for each run and series of the panel, the
raw value at the cursor, the smoothed one beside it, the step it was recorded at and the elapsed
time there.

A panel's table is toggled by its "table" box (``Dashboard.tables``, ``caliper view --tables``).
Its rows are every (run, series) the panel draws, in a stable order, so the layout does not move
with the cursor; a run without a value at the cursor says why in its raw column. It is drawn after
the panel's static part (reuse.py keeps the chart; the table follows the cursor), reading a few
values per row (``model.read_cursor``) and the smoothed trace the chart keeps cached.

A mixin of :class:`~caliper_vk.dashboard.app.Dashboard`.
"""

from __future__ import annotations

import numpy as np
from imgui_bundle import imgui

from . import model
from .style import _col, dim, fitted_text

TABLE_ROWS = 6  # at most this many rows; the others are counted on a line under them
COLUMNS = ("run", "series", "raw", "smoothed", "step", "time (s)")


class ValueTables:
    """Value tables under the scalar charts (state lives on the Dashboard: ``tables``)."""

    def _table_pairs(self, panel: model.Panel) -> list:
        return [(run, k) for run in self.runs for k in panel.keys if len(run.metrics.get(k) or ())]

    def _table_height(self, panel: model.Panel) -> float:
        """The height the table of ``panel`` takes (the chart leaves it room)."""
        n = len(self._table_pairs(panel))
        style = imgui.get_style()
        row = imgui.get_text_line_height() + 2 * style.cell_padding.y + 1
        more = imgui.get_text_line_height_with_spacing() if n > TABLE_ROWS else 0.0
        return (1 + min(n, TABLE_ROWS)) * row + style.item_spacing.y + more

    def _value_table(self, panel: model.Panel, index: int) -> None:
        pairs = self._table_pairs(panel)
        flags = (imgui.TableFlags_.borders_inner_h | imgui.TableFlags_.sizing_stretch_prop
                 | imgui.TableFlags_.no_host_extend_x)
        if not imgui.begin_table(f"##values{index}", len(COLUMNS), flags):
            return
        for name, weight in zip(COLUMNS, (1.2, 1.6, 1.3, 1.0, 0.6, 0.8), strict=True):
            imgui.table_setup_column(name, imgui.TableColumnFlags_.width_stretch, weight)
        imgui.table_headers_row()
        for run, key in pairs[:TABLE_ROWS]:
            r = model.read_cursor(run, key, self.axis, self.cursor)
            if r.state == "value":
                smoothed = self._smoothed_at(run, key, r) if self.smoothing > 0 else "—"
                t = float(run.coordinate("time", np.array([r.step]))[0])
                cells = [model._fmt(r.value) + (" (placeholder)" if r.placeholder else ""), smoothed,
                         str(r.step), f"{t:.4g}" if np.isfinite(t) else "—"]
            else:
                cells = [r.text, "", "", ""]
            imgui.table_next_row()
            for j, text in enumerate([run.name, key, *cells]):
                imgui.table_set_column_index(j)
                colour = _col(self._rgb(run), 0.9) if j == 0 else None if r.state == "value" else dim()
                fitted_text(text, colour)
        imgui.end_table()
        if len(pairs) > TABLE_ROWS:
            fitted_text(f"and {len(pairs) - TABLE_ROWS} more series (the sidebar lists every value)", dim())

    def _smoothed_at(self, run, key: str, reading) -> str:
        """The smoothed trace's value at the reading's sample, as the chart draws it."""
        s = run.metrics[key]
        series = self._series(run, s)
        if len(series["y"]) != len(s):  # samples without an x on this axis were left out
            return "—"
        i = s.at(reading.step)
        v = float(self._smoothed(run, s, series)[i]) if i is not None else float("nan")
        return model._fmt(v)
