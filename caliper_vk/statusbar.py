"""Chrome drawn with text: the status line and the panel labels.

Both are outside the byte-exact contract: text is drawn on the host with
Pillow's bundled font into an opaque RGBA strip, uploaded when it changes, and
copied into the canvas image (``vkCmdCopyBufferToImage``) after the views have
drawn. Because they are part of the canvas, offscreen PNG frames carry the same
chrome a window shows.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .engine import Buffer, Rect

HEIGHT = 20
BACKGROUND = (10, 10, 12, 255)
FOREGROUND = (210, 210, 215, 255)
WARNING = (255, 190, 70, 255)
LABEL_BACKGROUND = (30, 30, 36, 255)
PAD = 6


@lru_cache(maxsize=4)
def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has only the fixed bitmap font
        return ImageFont.load_default()


@lru_cache(maxsize=4096)
def _measure(text: str) -> float:
    from PIL import Image, ImageDraw

    return ImageDraw.Draw(Image.new("RGBA", (1, 1))).textlength(text, font=_font(13))


def render_segments(segments, width: int, height: int = HEIGHT, background=BACKGROUND) -> np.ndarray:
    """Coloured text runs ``[(text, rgba), ...]`` drawn left to right into a
    ``(height, width, 4)`` strip; text that does not fit ends in an ellipsis."""
    from PIL import Image, ImageDraw

    font = _font(13)
    img = Image.new("RGBA", (width, height), background)
    draw = ImageDraw.Draw(img)
    x = PAD
    for text, color in segments:
        room = width - PAD - x
        shown = text
        if draw.textlength(text, font=font) > room:  # the longest prefix that fits
            lo, hi = 0, len(text)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if draw.textlength(text[:mid].rstrip() + "…", font=font) <= room:
                    lo = mid
                else:
                    hi = mid - 1
            shown = text[:lo].rstrip() + "…" if lo else ""
        draw.text((x, height // 2), shown, font=font, fill=tuple(color), anchor="lm")
        x += draw.textlength(shown, font=font)
        if shown != text:
            break
    return np.asarray(img, dtype=np.uint8)


def render_text(text: str, width: int, height: int = HEIGHT, warn: bool = False) -> np.ndarray:
    return render_segments([(text, WARNING if warn else FOREGROUND)], width, height)


class TextStrip:
    """A canvas drawable showing coloured text in a rectangle (see the canvas drawable protocol).

    ``fit=True`` shrinks the rectangle to the text (a label in a panel's corner);
    the rectangle given to ``bind`` is then the room available.
    """

    def __init__(self, segments=(), background=BACKGROUND, fit: bool = False):
        self.segments = list(segments)
        self.background = background
        self.fit = fit
        self.device = self.target = self.rect = self.room = None
        self._buffer = None
        self._drawn = None
        self.stale = True

    def set_segments(self, segments) -> None:
        self.segments = list(segments)

    def bind(self, device, target, rect) -> None:
        self.device, self.target, self.room = device, target, rect
        self.rect = rect
        self._drawn = None
        self.stale = True

    def unbind(self) -> None:
        self.target = self.rect = self.room = None
        self.stale = True

    def _size(self) -> tuple[int, int]:
        r = self.room
        if not self.fit:
            return r.width, r.height
        key = (tuple(t for t, _ in self.segments), r.width, r.height)
        if key != getattr(self, "_size_key", None):
            width = int(sum(_measure(t) for t, _ in self.segments)) + 2 * PAD
            self._size_key, self._size_value = key, (max(1, min(r.width, width)), min(r.height, HEIGHT))
        return self._size_value

    def prepare(self) -> None:
        w, h = self._size()
        rect = Rect(self.room.x, self.room.y, w, h)
        if rect != self.rect:
            self.rect = rect
            self.stale = True
        key = (tuple(self.segments), w, h)
        if self._buffer is None or self._buffer.size < w * h * 4:
            if self._buffer is not None:
                self._buffer.close()
            self._buffer = Buffer(self.device, w * h * 4)
            self._drawn = None
            self.stale = True
        if key != self._drawn:
            # the canvas submits only after the previous frame finished reading this buffer
            self._buffer.write(render_segments(self.segments, w, h, self.background))
            self._drawn = key

    def record(self, rec) -> None:
        r = self.rect
        rec.copy_buffer_to_image(self._buffer, self.target, r.x, r.y, r.width, r.height)
        self.stale = False

    def finish(self) -> None:
        pass

    def reference(self, width: int, height: int) -> np.ndarray:
        return render_segments(self.segments, width, height, self.background)

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
        self.set_segments([(text, WARNING if warn else FOREGROUND)])
