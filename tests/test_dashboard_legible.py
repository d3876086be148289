"""Nothing clipped, nothing blank: every bundled run drawn with every panel (``caliper view --all
--show RUN``), and all of them side by side, at two widths. The oracle is the layout Dear ImGui
itself made: each text item, plot and image drawn is checked against the window it is drawn in (a panel clips at
its edges, the sidebar at its right edge), so a text that runs past its window is cut mid-token
there and fails; a panel that plotted nothing and said nothing ("not recorded ...") fails.
"""

from __future__ import annotations

import numpy as np
import pytest

from caliper_vk.dashboard import app
from caliper_vk.dashboard.style import PANEL_HEIGHT
from caliper_vk.runs import EXAMPLES, example_paths

TEXTS = ("text", "text_disabled", "text_colored", "text_wrapped")
# what a panel with nothing drawn says (the last: epochs overlaid, the cursor before any run's start)
WHY = ("not recorded", "outside this run", "no frame yet", "no epoch begun at the cursor")
DRAWS = ("plot_line", "plot_shaded", "plot_scatter", "plot_stairs", "plot_image", "plot_inf_lines")


class Layout:
    """What one frame drew: each text with its rectangle and the window it sits in, and per panel
    whether it drew data (a plot item or an image) or a 'not recorded' line."""

    def __init__(self, monkeypatch):
        self.texts, self.drew, self.said, self.stack = [], set(), set(), []
        imgui, implot = app.imgui, app.implot
        for name in TEXTS:
            monkeypatch.setattr(imgui, name, self._text(getattr(imgui, name)))
        for name in DRAWS:
            monkeypatch.setattr(implot, name, self._draw(getattr(implot, name)))
        monkeypatch.setattr(imgui, "image", self._boxed(self._draw(imgui.image), "image"))
        monkeypatch.setattr(implot, "begin_plot", self._boxed(implot.begin_plot, "plot"))
        begin, end = imgui.begin_child, imgui.end_child

        def begin_child(name, *rest):
            self.stack.append(name)
            return begin(name, *rest)

        def end_child():
            self.stack.pop()
            return end()

        monkeypatch.setattr(imgui, "begin_child", begin_child)
        monkeypatch.setattr(imgui, "end_child", end_child)

    def reset(self):
        self.texts.clear(), self.drew.clear(), self.said.clear()

    def _where(self):
        return self.stack[-1] if self.stack else ""

    def _text(self, real):
        imgui = app.imgui

        def spy(*args):
            out = real(*args)
            text = next(a for a in args if isinstance(a, str))
            lo, hi = imgui.get_item_rect_min(), imgui.get_item_rect_max()
            pos, size = imgui.get_window_pos(), imgui.get_window_size()
            self.texts.append((self._where(), text, (lo.x, lo.y, hi.x, hi.y),
                               (pos.x, pos.y, pos.x + size.x, pos.y + size.y)))
            if any(why in text for why in WHY):
                self.said.add(self._where())
            return out
        return spy

    def _boxed(self, real, what):
        """An image or a plot, noted (as a text is) with its rectangle: laid out whole or not."""
        imgui = app.imgui

        def spy(*args, **kw):
            out = real(*args, **kw)
            lo, hi = imgui.get_item_rect_min(), imgui.get_item_rect_max()
            pos, size = imgui.get_window_pos(), imgui.get_window_size()
            self.texts.append((self._where(), f"<{what}>", (lo.x, lo.y, hi.x, hi.y),
                               (pos.x, pos.y, pos.x + size.x, pos.y + size.y)))
            return out
        return spy

    def _draw(self, real):
        def spy(*args, **kw):
            self.drew.add(self._where())
            return real(*args, **kw)
        return spy


def _frame(dash, layout):
    dash.frame(events=[])  # the layout pass and the frame
    dash.ui.discard_frame()
    build = dash._build
    dash._build = lambda: (layout.reset(), build())
    try:
        dash.frame(events=[])
    finally:
        del dash._build
    dash.ui.discard_frame()


def _problems(dash, layout) -> list[str]:
    out = []
    for where, text, (_x0, _y0, x1, y1), (_wx0, _wy0, wx1, wy1) in layout.texts:
        if where.startswith("panel"):
            if x1 > wx1 + 0.5 or y1 > wy1 + 0.5:
                out.append(f"{where}: {text!r} runs past its panel ({x1:.0f},{y1:.0f} > {wx1:.0f},{wy1:.0f})")
        elif where == "sidebar" and x1 > wx1 + 0.5:
            out.append(f"sidebar: {text!r} runs past it ({x1:.0f} > {wx1:.0f})")
    if dash.folded and not any(where == "panels" and text.startswith("not recorded in the run")
                               for where, text, *_ in layout.texts):
        out.append(f"{len(dash.folded)} panels folded away and no line says so")
    for i, (panel, on) in enumerate(zip(dash.panels, dash.enabled, strict=True)):
        name = f"panel{i}"
        if on and name not in layout.drew and name not in layout.said and i not in dash.folded:
            out.append(f"{panel.title!r} ({panel.keys[:3]}) is blank and does not say why")
    return out


HEIGHT = 4000  # within every device profile's largest image (4096 under "minimal")
ROW = PANEL_HEIGHT + 60 + 220  # a row of panels, with room for value tables


@pytest.mark.parametrize(("width", "epochs"), [(1600, False), (1100, False), (1100, True)])
def test_every_bundled_run_with_every_panel_is_legible(width, epochs, monkeypatch):
    """``epochs``: every scalar panel drawn epoch over epoch (``caliper view --epochs``)."""
    runs = app.open_runs(example_paths())
    layout = Layout(monkeypatch)
    dash = app.Dashboard(runs, size=(width, HEIGHT), panels=["*"], shown=[next(iter(EXAMPLES))], epochs=epochs)
    # the panels a few rows at a time, so that every one is laid out (none scrolled away)
    chunk = 2 * ((HEIGHT - 100) // ROW)
    problems = []
    try:
        for shown in [[name] for name in EXAMPLES] + [list(EXAMPLES)]:
            dash.hidden = {r.name for r in runs if r.name not in shown}
            dash._set_shown()
            # side by side, each chart with its value table (table.py): the panels grow to hold them
            charts = {i for i, p in enumerate(dash.panels) if p.kind == "scalar"}
            dash.tables = charts if len(shown) > 1 else set()
            dash.cursor = max(r.coordinate("step", np.array([r.step_range[1] / 2]))[0] for r in dash.runs)
            for first in range(0, len(dash.panels), chunk):
                dash.enabled = [first <= i < first + chunk for i in range(len(dash.panels))]
                _frame(dash, layout)
                assert layout.texts  # (a chunk of panels the run has none of draws only what says so)
                problems += [f"{'+'.join(shown) if len(shown) == 1 else 'all runs'}: {p}"
                             for p in _problems(dash, layout)]
    finally:
        dash.close()
    assert not problems, "\n".join(problems)
