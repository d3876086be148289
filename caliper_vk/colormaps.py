"""Colour tables for the views, taken from matplotlib's colormap data.

Nothing is hand-typed: continuous maps are matplotlib colormaps sampled at
256 points and rounded to RGBA8 once on the host; categorical palettes are
matplotlib's qualitative maps (``tab10`` is the default: ten clearly distinct
colours). The GPU and the numpy twins index the same packed tables.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .views._exact import pack_rgba

LUT_SIZE = 256
SEQUENTIAL = ("viridis", "magma", "inferno", "plasma", "cividis", "gray", "turbo")
DIVERGING = ("coolwarm", "RdBu_r", "bwr", "seismic", "PiYG")
PALETTES = ("tab10", "tab20", "Set1", "Dark2")


class UnknownColormapError(ValueError):
    """An unknown colormap or palette name; the message lists the accepted ones."""


def _registry():
    import matplotlib

    return matplotlib.colormaps


@lru_cache(maxsize=None)
def lut(name: str) -> np.ndarray:
    """A continuous colormap as 256 packed RGBA8 words (``r | g<<8 | b<<16 | a<<24``)."""
    registry = _registry()
    if name not in registry or name in PALETTES:
        raise UnknownColormapError(
            f"unknown colormap {name!r}; use a matplotlib colormap such as "
            f"{', '.join(SEQUENTIAL)} (sequential) or {', '.join(DIVERGING)} (diverging)"
        )
    rgba = registry[name](np.linspace(0.0, 1.0, LUT_SIZE))
    return _pack(rgba)


@lru_cache(maxsize=None)
def palette(name: str = "tab10") -> np.ndarray:
    """A categorical palette as packed RGBA8 words."""
    if name not in PALETTES:
        raise UnknownColormapError(f"unknown palette {name!r}; use one of {', '.join(PALETTES)}")
    cmap = _registry()[name]
    return _pack(cmap(np.arange(cmap.N)))


def _pack(rgba: np.ndarray) -> np.ndarray:
    u8 = np.clip(np.round(np.asarray(rgba) * 255.0), 0, 255).astype(np.uint32)
    out = np.array([pack_rgba(c) for c in u8], dtype=np.uint32)
    out.flags.writeable = False
    return out
