"""A glyph atlas baked from a real font, for text drawn with integer math.

``bake()`` renders printable ASCII (32..126; anything else shows as ``?``) with
FreeType through Pillow into fixed cells of a monospaced font — DejaVu Sans
Mono when installed, else Pillow's bundled font — as 8-bit coverage. The build
(``setup.py``) bakes it into ``caliper_vk/assets/glyphs.npz``, which the wheel
ships; a source checkout bakes it on first use. Shaders and the numpy twins
blend with integers only (``engine/shaders/text.comp``), so text is part of
the byte-exact contract.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

ASSET = Path(__file__).resolve().parent / "assets" / "glyphs.npz"
FIRST, LAST = 32, 126
SIZE = 13
FONT_CANDIDATES = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",
    "/usr/share/fonts/truetype/noto/NotoSansMono-Regular.ttf",
    "/System/Library/Fonts/Menlo.ttc",
    "C:/Windows/Fonts/consola.ttf",
)


def _font():
    from PIL import ImageFont

    for path in FONT_CANDIDATES:
        if Path(path).exists():
            return ImageFont.truetype(path, SIZE), Path(path).name
    return ImageFont.load_default(size=SIZE), "Pillow default font"


def bake(path: Path = ASSET) -> Path:
    """Render the atlas and write it to ``path`` (coverage array + cell size + font name)."""
    from PIL import Image, ImageDraw

    font, name = _font()
    ascent, descent = font.getmetrics()
    cell_w = int(np.ceil(max(font.getlength(chr(c)) for c in range(FIRST, LAST + 1))))
    cell_h = ascent + descent + 1
    atlas = np.zeros((LAST - FIRST + 1, cell_h, cell_w), np.uint8)
    for i, code in enumerate(range(FIRST, LAST + 1)):
        img = Image.new("L", (cell_w, cell_h), 0)
        ImageDraw.Draw(img).text((0, 0), chr(code), font=font, fill=255)
        atlas[i] = np.asarray(img)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, atlas=atlas, font=np.array(name))
    return path


@lru_cache(maxsize=1)
def atlas() -> tuple[np.ndarray, str]:
    """(coverage array (glyphs, cell_h, cell_w), font name), baking it if the package has none."""
    if not ASSET.exists():
        bake(ASSET)
    with np.load(ASSET) as z:
        return z["atlas"].copy(), str(z["font"])


def encode(text: str) -> np.ndarray:
    """Glyph indices for ``text`` (unknown characters become '?')."""
    codes = np.frombuffer(text.encode("ascii", "replace"), np.uint8).astype(np.int64)
    codes = np.where((codes < FIRST) | (codes > LAST), ord("?"), codes)
    return (codes - FIRST).astype(np.uint32)
