"""The text view: a panel of generated samples (or any text), newest last.

Text is laid out on the host into a grid of character cells (lines wrapped at
the panel width; when the panel is full the oldest lines scroll away) and
drawn by ``engine/shaders/text.comp`` from the glyph atlas baked from a real
font (:mod:`caliper_vk.glyphs`), with integer blending, so it is byte-exact
against :meth:`Text.reference`. Each entry may carry a header (for example
``"step 1200"``) drawn dimmer above it.
"""

from __future__ import annotations

import textwrap

import numpy as np

from .. import glyphs
from . import _exact
from ..engine.shaders.params import ParamBlock, ParamValues
from ..engine.shaders.passes import Pass, image, params, ro
from ._base import ViewBase, pipeline
from ._registry import Sample, register_view

# -- the declaration: read by the build from this file (docs/architecture.md, "A view is one unit") --
TEXT = ParamBlock("text_params", "TX", [
    "W", "H", "RECT_X", "RECT_Y", "COLS", "ROWS", "CELL_W", "CELL_H", "PAD_X", "PAD_Y", "BG",
], constants={"EMPTY": "0xFFFFFFFFu"})
TEXT_PASS = Pass("text", TEXT, [params(), ro("grid", note="glyph per cell"), ro("rowcolor"),
                                ro("atlas", note="coverage per texel"), image()])
TX = TEXT

BACKGROUND = (22, 22, 26, 255)
FOREGROUND = (225, 225, 230, 255)
HEADER = (130, 130, 140, 255)
PAD = 4
EMPTY = 0xFFFFFFFF


@register_view("text", block=TX, passes=(TEXT_PASS,), inputs=("text",), tests=("tests/test_text_view.py",),
               sample=Sample((), (240, 120), values="caliper self-test: naïve café — ok … Ωλ ≤ 3 → ∞"))
class Text(ViewBase):
    """Lines of text in a panel.

    Parameters
    ----------
    text : str, optional
        Initial content.
    max_entries : int
        How many entries :meth:`append` keeps (older ones are dropped).
    """

    def __init__(self, text: str | None = None, *, max_entries: int = 50):
        super().__init__()
        self.entries: list[tuple[str | None, str]] = []
        self.max_entries = max_entries
        if text is not None:
            self.set_text(text)

    def set_text(self, text: str) -> None:
        """Replace everything with ``text``."""
        self.entries = [(None, str(text))]
        self.data_version += 1

    def append(self, text: str, header: str | None = None) -> None:
        """Add an entry (e.g. a new sample, with ``header="step 1200"``)."""
        self.entries.append((header, str(text)))
        del self.entries[: -self.max_entries]
        self.data_version += 1

    def set_data(self, data) -> None:
        self.set_text(data if isinstance(data, str) else "\n".join(map(str, data)))

    # -- layout shared by the shader and the twin -----------------------------------------------------
    def layout(self, width: int, height: int):
        """(glyph grid (rows, cols) uint32, row colours uint32, cols, rows)."""
        atlas, _ = glyphs.atlas()
        _, ch, cw = atlas.shape
        cols = max(0, (width - 2 * PAD) // cw)
        rows = max(0, (height - 2 * PAD) // ch)
        lines: list[tuple[str, tuple]] = []
        for header, text in self.entries:
            if header:
                lines.append((header, HEADER))
            for para in text.split("\n"):
                wrapped = textwrap.wrap(para, cols, replace_whitespace=False, drop_whitespace=False) \
                    if cols else []
                lines += [(w, FOREGROUND) for w in (wrapped or [""])]
        lines = lines[-rows:] if rows else []  # the newest lines stay in view
        grid = np.full((max(rows, 1), max(cols, 1)), EMPTY, np.uint32)
        colors = np.full(max(rows, 1), _exact.pack_rgba(FOREGROUND), np.uint32)
        for r, (line, colour) in enumerate(lines):
            codes = glyphs.encode(line[:cols])
            grid[r, : len(codes)] = codes
            colors[r] = _exact.pack_rgba(colour)
        return grid, colors, cols, rows

    def params(self, width, height, rect_x=0, rect_y=0, cols=0, rows=0) -> ParamValues:
        atlas, _ = glyphs.atlas()
        return TX.values(w=width, h=height, rect_x=rect_x, rect_y=rect_y, cols=cols, rows=rows,
                         cell_h=atlas.shape[1], cell_w=atlas.shape[2], pad_x=PAD, pad_y=PAD,
                         bg=_exact.pack_rgba(BACKGROUND))

    # -- drawable protocol --------------------------------------------------------------------------------
    def prepare(self) -> None:
        r = self.rect
        grid, colors, cols, rows = self.layout(r.width, r.height)
        self._upload("params", self.params(r.width, r.height, r.x, r.y, cols, rows))
        self._upload("grid", grid)
        self._upload("rowcolor", colors)
        if "atlas" not in self._buffers:
            self._upload("atlas", glyphs.atlas()[0].astype(np.uint32))
        self._dirty.clear()

    def record_reads(self, rec) -> None:
        b = self._buffers
        self._drop_sets()
        draw = pipeline(self.device, "text").bind(params=b["params"], grid=b["grid"], rowcolor=b["rowcolor"],
                                                  atlas=b["atlas"], target=self.target)
        self._sets = [draw]
        rec.dispatch(draw, -(-self.rect.width // 16), -(-self.rect.height // 16))

    def record(self, rec) -> None:
        self.stale = False

    def finish(self) -> None:
        self.stats = {"entries": len(self.entries)}

    # -- the numpy twin --------------------------------------------------------------------------------------
    def reference(self, width: int, height: int) -> np.ndarray:
        rgba, _ = self.reference_with_stats(width, height)
        return rgba

    def reference_with_stats(self, width: int, height: int):
        atlas, _ = glyphs.atlas()
        _, ch, cw = atlas.shape
        grid, colors, cols, rows = self.layout(width, height)
        bg = _exact.pack_rgba(BACKGROUND)
        out = np.full((height, width), bg, np.uint32)
        if cols and rows:
            y = np.arange(height)[:, None]
            x = np.arange(width)[None, :]
            ly, lx = y - PAD, x - PAD
            row, col = np.where(ly >= 0, ly // ch, -1), np.where(lx >= 0, lx // cw, -1)
            inside = (row >= 0) & (col >= 0) & (row < rows) & (col < cols)
            r_, c_ = np.broadcast_to(np.where(inside, row, 0), out.shape), np.broadcast_to(
                np.where(inside, col, 0), out.shape)
            g = grid[r_, c_]
            has = inside & (g != EMPTY)
            gy = np.broadcast_to(np.where(inside, ly - row * ch, 0), out.shape)
            gx = np.broadcast_to(np.where(inside, lx - col * cw, 0), out.shape)
            a = atlas[np.where(has, g, 0).astype(np.int64), gy, gx].astype(np.uint32)
            w = a + (a >> 7)
            fg = colors[r_]
            blended = np.zeros(out.shape, np.uint32)
            for shift in (0, 8, 16):
                chan = (((bg >> shift) & 255) * (256 - w) + ((fg >> shift) & 255) * w) >> 8
                blended |= (chan.astype(np.uint32) << np.uint32(shift))
            blended |= np.uint32(0xFF000000)
            out = np.where(has, blended, out).astype(np.uint32)
        return _exact.unpack_rgba(out), {"entries": len(self.entries)}
