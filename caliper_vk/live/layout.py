"""Where each panel goes: a grid of near-square cells above the status line.

The cells come from the canvas's own grid (:func:`caliper_vk.engine.canvas.grid_rects`),
so a session and a hand-built :class:`~caliper_vk.engine.Canvas` lay panels out
alike. Each cell holds the panel's title bar (when the cell is tall enough to
share) and, below it, the view — or, once the panel has stopped, the notice
that says why.
"""

from __future__ import annotations

import math

from .. import chrome
from ..engine import Canvas, Rect
from ..engine.canvas import grid_rects

GAP = 2


def grid_shape(n: int, width: int, height: int) -> tuple[int, int]:
    """(rows, cols) for ``n`` panels in ``width x height`` px, cells as square as possible."""
    cols = max(1, min(n, math.ceil(math.sqrt(n * width / max(height, 1)))))
    return math.ceil(n / cols), cols


def lay_out(device, width: int, height: int, panels, status_bar) -> Canvas:
    """A new canvas of ``width x height`` with ``panels`` in a grid and the status bar below."""
    canvas = Canvas(width, height, device=device)
    status_h = chrome.line_height()
    area_h = height - status_h
    cells = []
    if panels:
        rows, cols = grid_shape(len(panels), width, area_h)
        try:
            cells = [r for row in grid_rects(width, area_h, rows, cols, GAP) for r in row]
        except ValueError:  # the window is too small to show them: draw only the status line
            cells = []
    for panel, slot in zip(panels, cells, strict=False):
        # the title bar above the view, unless the slot is too small to share
        head = chrome.line_height() if slot.height >= 2 * chrome.line_height() else 0
        body = Rect(slot.x, slot.y + head, slot.width, slot.height - head)
        panel.slot = slot
        stopped = panel.error or getattr(panel.view, "failed", False)
        if stopped:  # the view draws nothing more; the notice says why, in full
            panel.notice.set_items([(panel.error or "", chrome.ERROR)])
        canvas.place(panel.notice if stopped else panel.view, body)
        if head:
            canvas.place(panel.label, Rect(slot.x, slot.y, slot.width, head))
    canvas.place(status_bar, Rect(0, height - status_h, width, status_h))
    return canvas
