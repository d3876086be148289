"""The status line: one strip of text at the bottom of a live session's canvas.

It is chrome, outside the byte-exact contract: the text is drawn on the host
with Pillow's bundled font into an RGBA strip, uploaded when it changes, and
copied into the canvas image (``vkCmdCopyBufferToImage``). Because it is part
of the canvas, headless PNG frames carry the same line a window shows.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .engine import Buffer

HEIGHT = 20
BACKGROUND = (10, 10, 12, 255)
FOREGROUND = (210, 210, 215, 255)
WARNING = (255, 190, 70, 255)


@lru_cache(maxsize=4)
def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has only the fixed bitmap font
        return ImageFont.load_default()


def render_text(text: str, width: int, height: int = HEIGHT, warn: bool = False) -> np.ndarray:
    """``text`` drawn into a ``(height, width, 4)`` RGBA strip, clipped with an ellipsis."""
    from PIL import Image, ImageDraw

    font = _font(13)
    img = Image.new("RGBA", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(img)
    shown = text
    if draw.textlength(text, font=font) > width - 12:  # clip: the longest prefix that fits
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if draw.textlength(text[:mid].rstrip() + "…", font=font) <= width - 12:
                lo = mid
            else:
                hi = mid - 1
        shown = text[:lo].rstrip() + "…"
    draw.text((6, height // 2), shown, font=font, fill=WARNING if warn else FOREGROUND, anchor="lm")
    return np.asarray(img, dtype=np.uint8)


class StatusBar:
    """A canvas drawable showing one line of text (see the canvas drawable protocol)."""

    def __init__(self, text: str = ""):
        self.text = text
        self.warn = False
        self.device = self.target = self.rect = None
        self._buffer = None
        self._pixels = None
        self._drawn = None
        self.stale = True

    def set_text(self, text: str, warn: bool = False) -> None:
        self.text, self.warn = text, warn

    def bind(self, device, target, rect) -> None:
        self.device, self.target, self.rect = device, target, rect
        self._drawn = None
        self.stale = True

    def unbind(self) -> None:
        self.target = self.rect = None
        self.stale = True

    def prepare(self) -> None:
        r = self.rect
        key = (self.text, self.warn, r.width, r.height)
        if self._buffer is None or self._buffer.size < r.width * r.height * 4:
            if self._buffer is not None:
                self._buffer.close()
            self._buffer = Buffer(self.device, r.width * r.height * 4)
            self._drawn = None
            self.stale = True
        if key != self._drawn:
            # the GPU may still be copying the previous strip; the canvas only
            # submits once the previous frame has finished
            self._pixels = render_text(self.text, r.width, r.height, self.warn)
            self._buffer.write(self._pixels)
            self._drawn = key

    def record(self, rec) -> None:
        r = self.rect
        rec.copy_buffer_to_image(self._buffer, self.target, r.x, r.y, r.width, r.height)
        self.stale = False

    def finish(self) -> None:
        pass

    def reference(self, width: int, height: int) -> np.ndarray:
        return render_text(self.text, width, height, self.warn)

    def close(self) -> None:
        if self._buffer is not None:
            self._buffer.close()
            self._buffer = None
        self.device = self.target = None
