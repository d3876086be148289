"""Chrome: the status line, each panel's title bar and a stopped panel's message.

Drawn with the same baked glyph atlas and the same integer blend as the text
views (:mod:`caliper_vk.glyphs`, ``engine/shaders/text.comp``:
``a' = a + (a >> 7)``, ``channel = (bg * (256 - a') + fg * a') >> 8``), on the
host into an opaque RGBA strip that is uploaded when its text changes and
copied into the canvas image (``vkCmdCopyBufferToImage``) after the views have
drawn. The strip is the same bytes whatever the device, so PNG frames and
windows carry identical chrome, and tests compare it exactly.

The host work is kept to what changed, because the status line is redrawn on the
training thread a few times a second. A strip is laid out into spans (one per
glyph cell, ramp or swatch); each colour pair's glyphs are blended once
(:func:`_cells`), so a run of text is one gather; and a :class:`TextStrip` keeps its
pixels and draws only the spans that are new since the last refresh, clearing the
ones that are gone (``TextStrip.glyphs_drawn`` counts the work): when only the
step moved, only the step's changed digits are drawn.

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
from functools import lru_cache
from itertools import pairwise

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
        return cls(tuple(np.asarray(lut, np.uint32).tolist()), int(width))  # one C call, not 256


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
    return np.array([*_rgb(rgba), 255], np.uint32)


def _rgb(rgba) -> tuple[int, int, int]:
    """An item's colour (a packed RGBA8 word or an ``(r, g, b[, a])`` tuple) as ``(r, g, b)``."""
    if isinstance(rgba, (int, np.integer)):
        v = int(rgba)
        return v & 255, (v >> 8) & 255, (v >> 16) & 255
    return int(rgba[0]), int(rgba[1]), int(rgba[2])


@lru_cache(maxsize=32)  # ~250 KB a pair; the chrome uses a handful of pairs
def _cells(fg: tuple, bg: tuple) -> np.ndarray:
    """Every glyph of the atlas blended from ``bg`` to ``fg`` with the text pass's integer blend:
    ``(glyphs, cell_h, cell_w, 4)`` uint8, made once per colour pair, so a run of text is one gather."""
    table, _ = glyphs.atlas()
    a = table.astype(np.uint32)[..., None]
    a = a + (a >> 7)
    out = np.empty((*table.shape, 4), np.uint8)
    out[..., :3] = (np.array(bg, np.uint32) * (256 - a) + np.array(fg, np.uint32) * a) >> 8
    out[..., 3] = 255
    out.flags.writeable = False
    return out


@lru_cache(maxsize=64)
def _ramp_pixels(ramp: Ramp) -> np.ndarray:
    n, w = len(ramp.colors), ramp.width
    i = (np.arange(w) * (n - 1)) // max(w - 1, 1)
    out = np.array([_unpack(ramp.colors[k]) for k in i], np.uint8)
    out.flags.writeable = False  # shared by every strip that shows this ramp
    return out


def _spans(items, x: int, y: int) -> list:
    """The cells of ``items`` laid out from pixel ``x`` on the glyph row at ``y``: ``(x, y, width,
    what)``, where ``what`` is a glyph ``(index, (r, g, b))``, a :class:`Ramp` or a :class:`Swatch`."""
    cw, _ = cell()
    out = []
    for item in items:
        if isinstance(item, (Ramp, Swatch)):
            out.append((x, y, item_width(item), item))
            x += item_width(item)
            continue
        text, rgba = item
        fg = _rgb(rgba)
        codes = glyphs.encode(text).tolist()
        out += [(x + i * cw, y, cw, (code, fg)) for i, code in enumerate(codes)]
        x += len(codes) * cw
    return out


class _Painter:
    """A strip's pixels kept between refreshes. :meth:`paint` draws a new list of spans over the old
    one: spans that are gone are cleared to the background and only new ones are drawn, so a status
    line whose step alone moved redraws the step's digits. A laid-out strip's spans come row by row,
    left to right, and never overlap; if they do (or did), the whole strip is drawn again in order,
    which is what a fresh strip is."""

    def __init__(self, width: int, height: int, background):
        self.key = (width, height, background)
        self.bg = _unpack(background).astype(np.uint8)
        self.image = np.empty((height, width, 4), np.uint8)
        self.image[:] = self.bg
        self.spans: set = set()
        self.clean = True  # the spans drawn do not overlap
        self.glyphs_drawn = 0  # glyphs rasterised since this painter was made (what a test counts)

    def paint(self, spans: list) -> np.ndarray:
        ch = cell()[1]
        # laid out strips come in rows top to bottom, each left to right: check that, not sort
        clean = all(a[0] + a[2] <= b[0] if a[1] == b[1] else b[1] - a[1] >= ch for a, b in pairwise(spans))
        if clean and self.clean:
            for x, y, w, _ in self.spans.difference(spans):
                self.image[max(y, 0):max(y + ch, 0), max(x, 0):max(x + w, 0)] = self.bg
            self._draw([s for s in spans if s not in self.spans])
        else:
            self.image[:] = self.bg
            self._draw(spans)  # in the caller's order: a later span covers an earlier one
        self.spans, self.clean = set(spans), clean
        return self.image

    def _draw(self, spans) -> None:
        _, ch = cell()
        height, width = self.image.shape[:2]
        bg = _rgb(self.bg)
        inset = max(1, ch // 4)
        run: list = []
        for k, span in enumerate(spans):
            x, y, w, what = span
            if isinstance(what, tuple):
                run.append(span)
                nxt = spans[k + 1] if k + 1 < len(spans) else None
                if (nxt is not None and isinstance(nxt[3], tuple) and nxt[1] == y and nxt[0] == x + w
                        and nxt[3][1] == what[1]):
                    continue  # the next glyph continues this run: one gather draws them all
                x, fg = run[0][0], what[1]
                codes = [s[3][0] for s in run]
                w = len(codes) * w
                x0, x1 = max(x, 0), min(x + w, width)
                if x1 > x0:
                    px = _cells(fg, bg)[codes].transpose(1, 0, 2, 3).reshape(ch, w, 4)
                    self.image[max(y, 0):min(y + ch, height), x0:x1] = \
                        px[max(y, 0) - y:min(y + ch, height) - y, x0 - x:x1 - x]
                    self.glyphs_drawn += len(codes)
                run = []
                continue
            x0, x1 = max(x, 0), min(x + w, width)
            if x1 <= x0:
                continue
            rows = slice(max(y + inset, 0), max(min(y + ch - inset, height), 0))
            if isinstance(what, Ramp):
                self.image[rows, x0:x1] = _ramp_pixels(what)[x0 - x: x1 - x]
            else:
                self.image[rows, x0 + 1: x1 - 1] = _unpack(what.rgba).astype(np.uint8)


def bar_spans(left, right=(), width: int = 100, height: int | None = None) -> list:
    """The spans of a one-line strip: ``left`` items from the left edge, ``right`` items against the
    right edge (see the module docstring for the fit)."""
    height = line_height() if height is None else height
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
    return _spans(left, PAD, y) + _spans(right, width - PAD - rw, y)


def render_bar(left, right=(), width: int = 100, height: int | None = None,
               background=BACKGROUND) -> np.ndarray:
    """A one-line strip ``(height, width, 4)``: ``left`` items from the left edge,
    ``right`` items against the right edge (see the module docstring for the fit)."""
    height = line_height() if height is None else height
    return _Painter(width, height, background).paint(bar_spans(left, right, width, height))


def block_spans(lines, width: int, height: int) -> list:
    """The spans of ``lines`` (``[(text, rgba), ...]``) wrapped into a ``(height, width)`` block."""
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
    return [s for r, item in enumerate(wrapped[:rows]) for s in _spans([item], PAD, PAD + r * ch)]


def render_block(lines, width: int, height: int, background=BACKGROUND) -> np.ndarray:
    """Text wrapped into a ``(height, width, 4)`` block: ``lines`` is ``[(text, rgba), ...]``,
    each wrapped at the block's width; lines past the bottom are cut, the last one
    visible ending in an ellipsis."""
    return _Painter(width, height, background).paint(block_spans(lines, width, height))


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
        self._painter = None  # the pixels last drawn, which paint() draws over
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
        """The strip drawn afresh (what :meth:`paint` must equal)."""
        if self.block:
            return render_block(self.left, width, height, self.background)
        return render_bar(self.left, self.right, width, height, self.background)

    def spans(self, width: int, height: int) -> list:
        if self.block:
            return block_spans(self.left, width, height)
        return bar_spans(self.left, self.right, width, height)

    def paint(self, width: int, height: int) -> np.ndarray:
        """The strip now, drawn over what it showed last: only the cells whose glyph, colour or place
        changed are drawn, so a status line whose step alone moved redraws those digits (the same
        bytes as :meth:`render`). The array is the strip's own: copy it to keep it."""
        p = self._painter
        if p is None or p.key != (width, height, self.background):
            p = self._painter = _Painter(width, height, self.background)
        return p.paint(self.spans(width, height))

    @property
    def glyphs_drawn(self) -> int:
        """Glyphs rasterised into this strip since its size last changed (the work of a refresh)."""
        return self._painter.glyphs_drawn if self._painter is not None else 0

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
            self._buffer.write(self.paint(r.width, r.height))
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
