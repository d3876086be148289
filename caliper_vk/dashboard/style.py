"""The dashboard's sizes and ImPlot styling helpers, shared by its panel modules (its colours
are in :mod:`caliper_vk.dashboard.colours`)."""

from __future__ import annotations

from imgui_bundle import imgui, implot

# the colours the panel modules draw with, named here as before they had a module of their own
from .colours import (MARKS, NEUTRAL, RAW_UNDER_EMA, SHADES, _series_shade, best_so_far_rgb,  # noqa: F401
                      run_colour, series_rgb)

PANEL_HEIGHT = 270
LEGEND_ROWS = 3  # a legend longer than this folds its last series into "and N more" (all on hover)
SIDEBAR = 330
ARRAY_PX = 220
TRACE_PX = 90  # the least height of a cell's trace beside an array panel's image
TRACE_W = 320  # its width


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


def dim() -> imgui.ImVec4:
    """The colour of secondary text (ImGui's disabled text)."""
    return imgui.get_style().color_(imgui.Col_.text_disabled)


def _implot_color(col, auto) -> int:
    """ImPlot's colour ``col`` as an ImU32: its own, or the ImGui colour ``auto`` it follows."""
    v = implot.get_style().color_(col)
    return imgui.get_color_u32(auto) if v.w < 0 else imgui.get_color_u32(v)


def fit_text(line: str, avail: float) -> str:
    """``line``, or its longest prefix that fits ``avail`` pixels with an ellipsis ("…") after it
    (the caller shows the whole line on hover). The cut falls between tokens (at a space, or
    after a comma or semicolon) when any such prefix fits: "minimum 0.016…" would read as a
    wrong number where "minimum…" reads as cut. A single token too long for the room is cut
    inside it."""
    if imgui.calc_text_size(line).x <= avail:
        return line

    def fits(n: int) -> bool:
        return imgui.calc_text_size(line[:n].rstrip(" ,;:") + "…").x <= avail

    cuts = [i for i in range(1, len(line)) if line[i] == " " and line[i - 1] != " "]
    lo, hi = 0, len(cuts)
    while lo < hi:  # the most tokens that fit with the ellipsis
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(cuts[mid - 1]) else (lo, mid - 1)
    if lo:
        return line[:cuts[lo - 1]].rstrip(" ,;:") + "…"
    lo, hi = 0, len(line)
    while lo < hi:  # no whole token fits: the longest prefix of the first
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return line[:lo] + "…"


def fitted_text(line: str, color: imgui.ImVec4 | None = None, reserve: float = 0.0,
                width: float | None = None) -> None:
    """One line of text that never runs past the panel: cut with "…" to the width left (less
    ``reserve`` pixels for what follows it on the line), or to ``width`` pixels (a column of a
    panel), whole in a tooltip when cut."""
    room = imgui.get_content_region_avail().x if width is None else width
    shown = fit_text(line, room - reserve)
    if color is None:
        imgui.text(shown)
    else:
        imgui.text_colored(color, shown)
    if shown != line and imgui.is_item_hovered():
        imgui.set_tooltip(line)
