"""Chrome: the status line, each panel's title bar and a stopped panel's message.

Drawn with the same baked glyph atlas and the same integer blend as the text
views (:mod:`caliper_vk.glyphs`, ``engine/shaders/text.comp``:
``a' = a + (a >> 7)``, ``channel = (bg * (256 - a') + fg * a') >> 8``), on the
host into an opaque RGBA strip that is uploaded when its text changes and
copied into the canvas image (``vkCmdCopyBufferToImage``) after the views have
drawn. The strip is the same bytes whatever the device, so PNG frames and
windows carry identical chrome, and tests compare it exactly.

A line is a list of items drawn left to right:

- ``(text, rgba)`` — a run of text in one colour;
- :class:`Ramp` — a colour ramp (a colormap's legend), ``width`` pixels wide;
- :class:`Swatch` — a filled square of one colour (a class's legend entry).

A title bar has a left part (the panel's name) and a right-aligned part (its
legend, value range and warnings); when both do not fit, the name gives way
first down to half of the bar, and whatever is cut ends in ``…``.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import numpy as np

from . import glyphs
from .engine import Buffer

BACKGROUND = (10, 10, 12, 255)
LABEL_BACKGROUND = (30, 30, 36, 255)
FOREGROUND = (210, 210, 215, 255)
DIM = (150, 150, 158, 255)
WARNING = (255, 190, 70, 255)
NONFINITE = (255, 120, 255, 255)
ERROR = (255, 90, 90, 255)
PAD = 6  # pixels before the first and after the last item
GAP = 2  # glyph cells between the left and the right part of a bar


def cell() -> tuple[int, int]:
    """(width, height) of one glyph cell in pixels."""
    shape = glyphs.atlas()[0].shape
    return shape[2], shape[1]


def line_height() -> int:
    """The height of a one-line strip (a title bar, the status line)."""
    return cell()[1] + 2


HEIGHT = 20  # the status line's height; equals line_height() for the baked 13 px font


@dataclass(frozen=True)
class Ramp:
    """A horizontal colour ramp over ``colors`` (packed RGBA8 words, low to high)."""

    colors: tuple
    width: int = 64

    @classmethod
    def of(cls, lut: np.ndarray, width: int = 64) -> Ramp:
        return cls(tuple(int(c) for c in np.asarray(lut, np.uint32)), int(width))


@dataclass(frozen=True)
class Swatch:
    """A filled square of one colour, one glyph cell wide."""

    rgba: tuple


def item_width(item) -> int:
    cw, _ = cell()
    if isinstance(item, Ramp):
        return item.width
    if isinstance(item, Swatch):
        return cw
    return len(item[0]) * cw


def clip(items, room: int) -> list:
    """The items that fit in ``room`` pixels; a cut one ends in an ellipsis."""
    cw, _ = cell()
    out, used = [], 0
    for item in items:
        w = item_width(item)
        if used + w <= room:
            out.append(item)
            used += w
            continue
        if out and isinstance(out[-1], Swatch):  # a swatch without its label says nothing
            out.pop()
            out.append(("…", DIM))
        elif not isinstance(item, (Ramp, Swatch)):
            keep = (room - used) // cw - 1
            if keep > 0:
                out.append((item[0][:keep].rstrip() + "…", item[1]))
            elif room - used >= cw:
                out.append(("…", item[1]))
        elif room - used >= cw:
            out.append(("…", DIM))
        break
    return out


def _unpack(rgba) -> np.ndarray:
    if isinstance(rgba, (int, np.integer)):
        v = int(rgba)
        return np.array([v & 255, (v >> 8) & 255, (v >> 16) & 255, 255], np.uint32)
    return np.array([*rgba[:3], 255], np.uint32)


def _draw_items(out: np.ndarray, items, x: int, y: int, background) -> int:
    """Draw ``items`` into ``out`` (h, w, 4) from pixel ``x`` on the glyph row at ``y``."""
    table, _ = glyphs.atlas()
    _, ch, cw = table.shape
    height, width = out.shape[:2]
    bg = _unpack(background)
    inset = max(1, ch // 4)
    for item in items:
        w = item_width(item)
        x0, x1 = max(x, 0), min(x + w, width)
        if x1 <= x0:
            x += w
            continue
        if isinstance(item, Ramp):
            n = len(item.colors)
            i = (np.arange(w) * (n - 1)) // max(w - 1, 1)
            colors = np.array([_unpack(item.colors[k]) for k in i], np.uint8)
            out[max(y + inset, 0): min(y + ch - inset, height), x0:x1] = colors[x0 - x: x1 - x]
        elif isinstance(item, Swatch):
            out[max(y + inset, 0): min(y + ch - inset, height), x0 + 1: x1 - 1] = \
                _unpack(item.rgba).astype(np.uint8)
        else:
            text, rgba = item
            codes = glyphs.encode(text)
            cov = table[codes].transpose(1, 0, 2).reshape(ch, len(codes) * cw).astype(np.uint32)
            a = cov + (cov >> 7)
            fg = _unpack(rgba)
            rows = slice(max(y, 0), min(y + ch, height))
            cov_rows = slice(rows.start - y, rows.stop - y)
            blend = (bg[:3] * (256 - a[cov_rows, x0 - x: x1 - x, None])
                     + fg[:3] * a[cov_rows, x0 - x: x1 - x, None]) >> 8
            out[rows, x0:x1, :3] = blend.astype(np.uint8)
            out[rows, x0:x1, 3] = 255
        x += w
    return x


def render_bar(left, right=(), width: int = 100, height: int | None = None,
               background=BACKGROUND) -> np.ndarray:
    """A one-line strip ``(height, width, 4)``: ``left`` items from the left edge,
    ``right`` items against the right edge (see the module docstring for the fit)."""
    height = line_height() if height is None else height
    out = np.empty((height, width, 4), np.uint8)
    out[:] = _unpack(background).astype(np.uint8)
    room = max(0, width - 2 * PAD)
    cw, ch = cell()
    lw = sum(item_width(i) for i in left)
    rw = sum(item_width(i) for i in right)
    gap = GAP * cw if left and right else 0
    if lw + gap + rw > room:
        left_room = max(min(lw, room // 2), room - gap - rw)
        left = clip(left, left_room)
        lw = sum(item_width(i) for i in left)
        right = clip(right, max(0, room - lw - gap))
        rw = sum(item_width(i) for i in right)
    y = (height - ch) // 2
    _draw_items(out, left, PAD, y, background)
    _draw_items(out, right, width - PAD - rw, y, background)
    return out


def render_block(lines, width: int, height: int, background=BACKGROUND) -> np.ndarray:
    """Text wrapped into a ``(height, width, 4)`` block: ``lines`` is ``[(text, rgba), ...]``,
    each wrapped at the block's width; lines past the bottom are cut, the last one
    visible ending in an ellipsis."""
    out = np.empty((height, width, 4), np.uint8)
    out[:] = _unpack(background).astype(np.uint8)
    cw, ch = cell()
    cols = max(1, (width - 2 * PAD) // cw)
    rows = max(0, (height - 2 * PAD) // ch)
    wrapped = []
    for text, rgba in lines:
        for para in str(text).split("\n"):
            wrapped += [(w, rgba) for w in (textwrap.wrap(para, cols) or [""])]
    if len(wrapped) > rows and rows:
        text, rgba = wrapped[rows - 1]
        wrapped = [*wrapped[:rows - 1], (text[:cols - 1] + "…", rgba)]
    for r, item in enumerate(wrapped[:rows]):
        _draw_items(out, [item], PAD, PAD + r * ch, background)
    return out


class TextStrip:
    """A canvas drawable showing chrome in a rectangle (see the canvas drawable protocol):
    a one-line bar (``left``/``right`` items) or, with ``block=True``, wrapped lines."""

    def __init__(self, left=(), right=(), background=BACKGROUND, block: bool = False):
        self.left, self.right = list(left), list(right)
        self.background = background
        self.block = block
        self.device = self.target = self.rect = None
        self._buffer = None
        self._drawn = None
        self._version = 0  # bumped when the items change: prepare() compares a number per frame
        self.stale = True

    def set_items(self, left, right=()) -> None:
        left, right = list(left), list(right)
        if left != self.left or right != self.right:
            self.left, self.right = left, right
            self._version += 1

    def bind(self, device, target, rect) -> None:
        self.device, self.target, self.rect = device, target, rect
        self._drawn = None
        self.stale = True

    def unbind(self) -> None:
        self.target = self.rect = None
        self.stale = True

    def render(self, width: int, height: int) -> np.ndarray:
        if self.block:
            return render_block(self.left, width, height, self.background)
        return render_bar(self.left, self.right, width, height, self.background)

    def prepare(self) -> None:
        if self._drawn == self._version:
            return  # per frame, per panel: one compare (bind() forgets what was drawn)
        r = self.rect
        key = self._version
        if self._buffer is None or self._buffer.size < r.width * r.height * 4:
            if self._buffer is not None:
                self._buffer.close()
            self._buffer = Buffer(self.device, r.width * r.height * 4)
            self._drawn = None
            self.stale = True
        if key != self._drawn:
            # the canvas submits only after the previous frame finished reading this buffer
            self._buffer.write(self.render(r.width, r.height))
            self._drawn = key

    def record(self, rec) -> None:
        r = self.rect
        rec.copy_buffer_to_image(self._buffer, self.target, r.x, r.y, r.width, r.height)
        self.stale = False

    finish = None  # nothing to read back (the canvas drawable protocol)

    def reference(self, width: int, height: int) -> np.ndarray:
        return self.render(width, height)

    def close(self) -> None:
        if self._buffer is not None:
            self._buffer.close()
            self._buffer = None
        self.device = self.target = None


class StatusBar(TextStrip):
    """The status line at the bottom of a session's canvas."""

    def __init__(self, text: str = ""):
        super().__init__([(text, FOREGROUND)])

    def set_text(self, text: str, warn: bool = False) -> None:
        self.set_items([(text, WARNING if warn else FOREGROUND)])

    @property
    def columns(self) -> int | None:
        """Characters that fit on the bar as laid out (None before it has a place on a canvas)."""
        if self.rect is None:
            return None
        return max(1, (self.rect.width - 2 * PAD) // cell()[0])


def number(v: float) -> str:
    """A value for a legend: 3 significant digits, a true minus sign."""
    if np.isnan(v):
        return "NaN"
    if np.isinf(v):
        return "+∞" if v > 0 else "−∞"
    return f"{v:.3g}".replace("-", "−")


def range_legend(lo: float, hi: float, lut=None, label: str = "") -> list:
    """``label lo [ramp] hi`` (with a colormap) or ``label lo … hi`` (without)."""
    head = f"{label} " if label else ""
    if lut is None:
        return [(f"{head}{number(lo)} … {number(hi)}", DIM)]
    return [(f"{head}{number(lo)} ", DIM), Ramp.of(lut), (f" {number(hi)}", DIM)]
