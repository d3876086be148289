"""The dashboard's look: the run palette, panel sizes and ImPlot line specs."""

from __future__ import annotations

from imgui_bundle import imgui, implot

PALETTE = [(0.35, 0.65, 1.0), (1.0, 0.55, 0.2), (0.45, 0.85, 0.4), (0.95, 0.35, 0.45), (0.75, 0.55, 1.0),
           (0.95, 0.85, 0.3), (0.4, 0.9, 0.9), (0.9, 0.6, 0.8)]
PANEL_HEIGHT = 270
SIDEBAR = 330
ARRAY_PX = 220


def color(rgb, a=1.0) -> imgui.ImVec4:
    """An ImGui colour from an RGB triple and an alpha."""
    return imgui.ImVec4(rgb[0], rgb[1], rgb[2], a)


def line_spec(rgb, alpha=1.0, weight=1.5, fill=None, marker=None):
    """An ImPlot line spec in ``rgb`` (optionally filled below, optionally with markers)."""
    s = implot.Spec()
    s.line_color = color(rgb, alpha)
    s.line_weight = weight
    if fill is not None:
        s.fill_color = color(rgb, fill)
        s.fill_alpha = 1.0
    if marker is not None:
        s.marker = marker
        s.marker_size = 5
        s.marker_fill_color = color(rgb, alpha)
        s.marker_line_color = color(rgb, alpha)
    return s


def implot_color(col, auto) -> int:
    """ImPlot's colour ``col`` as an ImU32: its own, or the ImGui colour ``auto`` it follows."""
    v = implot.get_style().color_(col)
    return imgui.get_color_u32(auto) if v.w < 0 else imgui.get_color_u32(v)
