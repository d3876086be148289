"""A glyph atlas baked from a real font, for text drawn with integer math.

``bake()`` renders a fixed character set — printable ASCII, Latin-1, Latin
Extended-A, Greek, and the punctuation and symbols the panels use (``… – —
≤ ≥ → × ± ■`` …) — with FreeType through Pillow into fixed cells of DejaVu Sans Mono,
which the repository ships (``assets/fonts/``, under its own licence,
``LICENSE-DejaVu.txt``), so every build makes the same atlas whatever fonts the
build machine has, as 8-bit coverage. Any other character shows as ``?``. The build
(``setup.py``) bakes it into ``caliper_vk/assets/glyphs.npz``, which the wheel
ships; a source checkout bakes it on first use, and again when the character
set changes. Shaders and the numpy twins blend with integers only
(``engine/shaders/text.comp``, :mod:`caliper_vk.chrome`), so text is part of
the byte-exact contract.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

ASSET = Path(__file__).resolve().parent / "assets" / "glyphs.npz"
FIRST, LAST = 32, 126  # printable ASCII: glyph index = code - FIRST
SIZE = 13
FONT = Path(__file__).resolve().parent / "assets" / "fonts" / "DejaVuSansMono.ttf"
SYMBOLS = "‐–—‘’‚“”„†‡•…‰′″‹›€™←↑→↓↔↵⇒∂∆∏∑−√∞∫≈≠≤≥⊙■□▪▬▲►▼◄●○◆█▌▐░▒▓"


def _charset() -> tuple[int, ...]:
    """The code points in the atlas, in glyph-index order (ASCII first, so its
    indices never move)."""
    codes = list(range(FIRST, LAST + 1))
    codes += range(0xA1, 0x100)  # Latin-1 supplement (no-break space draws as a space)
    codes += range(0x100, 0x180)  # Latin Extended-A
    codes += [c for c in range(0x391, 0x3CA) if c != 0x3A2]  # Greek capitals and small letters
    codes += [ord(c) for c in SYMBOLS]
    return tuple(codes)


CODES = _charset()
UNKNOWN = ord("?") - FIRST


@lru_cache(maxsize=1)
def _lookup() -> np.ndarray:
    """Code point -> glyph index for every code point up to the largest in the atlas."""
    table = np.full(max(CODES) + 2, UNKNOWN, np.uint32)
    table[np.asarray(CODES)] = np.arange(len(CODES), dtype=np.uint32)
    table[0xA0] = ord(" ") - FIRST
    table[-1] = UNKNOWN  # everything beyond the table lands here
    table.flags.writeable = False
    return table


def _font():
    from PIL import ImageFont

    if not FONT.is_file():
        raise FileNotFoundError(f"the glyph atlas's font {FONT} is missing: it ships in the source "
                                "tree and the sdist; restore it from the repository (git checkout -- "
                                f"{FONT.name}) or reinstall caliper-vk")
    return ImageFont.truetype(str(FONT), SIZE), FONT.name


def bake(path: Path = ASSET) -> Path:
    """Render the atlas and write it to ``path`` (coverage array, code points, font name)."""
    from PIL import Image, ImageDraw

    font, name = _font()
    ascent, descent = font.getmetrics()
    cell_w = int(np.ceil(max(font.getlength(chr(c)) for c in range(FIRST, LAST + 1))))
    cell_h = ascent + descent + 1
    atlas = np.zeros((len(CODES), cell_h, cell_w), np.uint8)
    for i, code in enumerate(CODES):
        img = Image.new("L", (cell_w, cell_h), 0)
        ImageDraw.Draw(img).text((0, 0), chr(code), font=font, fill=255)
        atlas[i] = np.asarray(img)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, atlas=atlas, codes=np.asarray(CODES, np.uint32), font=np.array(name))
    tmp.replace(path)  # another process reading the atlas never sees half a file
    return path


@lru_cache(maxsize=1)
def atlas() -> tuple[np.ndarray, str]:
    """(coverage array (glyphs, cell_h, cell_w), font name), baking it if the package has
    none or it was baked for another character set."""
    for attempt in (0, 1):
        if ASSET.exists():
            with np.load(ASSET) as z:
                if "codes" in z.files and tuple(int(c) for c in z["codes"]) == CODES:
                    return z["atlas"].copy(), str(z["font"])
        if attempt == 0:
            bake(ASSET)
    raise RuntimeError(f"the glyph atlas {ASSET} could not be baked for this character set")


def encode(text: str) -> np.ndarray:
    """Glyph indices for ``text`` (characters outside the atlas become '?')."""
    table = _lookup()
    points = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    return table[np.minimum(points, np.uint32(len(table) - 1))]


def covers(ch: str) -> bool:
    """Whether the one character ``ch`` has its own glyph (else it draws as '?')."""
    return ch == "?" or int(encode(ch)[0]) != UNKNOWN
