"""The dashboard's colours, sizes and ImPlot styling helpers, shared by its panel modules."""

from __future__ import annotations

from imgui_bundle import imgui, implot

PALETTE = [(0.35, 0.65, 1.0), (1.0, 0.55, 0.2), (0.45, 0.85, 0.4), (0.95, 0.35, 0.45), (0.75, 0.55, 1.0),
           (0.95, 0.85, 0.3), (0.4, 0.9, 0.9), (0.9, 0.6, 0.8)]
PANEL_HEIGHT = 270
LEGEND_ROWS = 3  # a legend longer than this folds its last series into "and N more" (all on hover)
SIDEBAR = 330
ARRAY_PX = 220
TRACE_PX = 90  # the least height of a cell's trace beside an array panel's image
TRACE_W = 320  # its width


NEUTRAL = (0.85, 0.85, 0.85)  # legend swatches of series drawn in every run's own colour


SHADES = 4  # shades of a run's colour, cycled over a panel's series


def _series_shade(rgb, j: int) -> tuple:
    """Series ``j`` of a panel shown for several runs: the run's colour, darker and greyer with j,
    over four shades cycled (a panel of forty series kept the run's hue: the shade of series 20
    went past black and turned a blue run red), each channel in [0, 1]."""
    t = j % SHADES
    return tuple(max(0.0, min(1.0, c * (1.0 - 0.18 * t) + 0.1 * t)) for c in rgb)


# The marks' colours: no run, series or other mark of a panel has them (the best marker was the
# yellow run's colour, the snapshots the green series', the best-so-far stairs the first series';
# panel_colours() lists what one panel can hold and tests/test_palettes.py checks every pair).
MARKS = {
    "snapshot": (0.95, 0.95, 0.95),  # saved-snapshot lines (drawn at alpha 0.45)
    "best_saved": (1.0, 0.75, 0.0),  # the best point, saved
    "best_unsaved": (1.0, 0.0, 0.0),  # the best point, no snapshot at its step
    "event": (0.0, 1.0, 0.5),  # event lines, in every run
    "nan": (1.0, 0.2, 0.8),  # NaN/Inf gaps
    "placeholder": (0.6, 0.6, 0.6),  # a step-0 placeholder
}
RAW_UNDER_EMA = 0.4  # the raw trace's alpha while its smoothed line is drawn in its colour over it


def series_rgb(run_rgb, j: int, runs: int) -> tuple:
    """Series ``j``'s colour: with one run a palette colour per series, with several the run's
    colour in the series' shade. Its smoothed line has the same colour (the raw trace is faded
    beside it, as TensorBoard does): a smoothed line made lighter took another run's colour."""
    return PALETTE[j % len(PALETTE)] if runs == 1 else _series_shade(run_rgb, j)


def best_so_far_rgb(run_rgb) -> tuple:
    """The best-so-far stairs of a run: its colour darkened (its own colour was its first series')."""
    return tuple(0.55 * c for c in run_rgb)


def panel_colours(runs: int, series: int) -> dict:
    """Every colour one scalar panel can hold with ``runs`` runs of ``series`` series each
    (the runs' colours are the palette's first ``runs``): ``{what: rgb}``."""
    out = dict(MARKS)
    for k in range(runs):
        rgb = PALETTE[k % len(PALETTE)]
        out[f"run {k} best so far"] = best_so_far_rgb(rgb)
        for j in range(series):
            out[f"run {k} series {j}"] = series_rgb(rgb, j, runs)
    return out


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
