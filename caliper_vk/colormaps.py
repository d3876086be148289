"""Colour tables for the views, taken from matplotlib's colormap data.

Nothing is hand-typed: continuous maps are matplotlib colormaps sampled at
256 points and rounded to RGBA8 once on the host; categorical palettes are
matplotlib's qualitative maps (``tab10`` is the default: ten clearly distinct
colours). The GPU and the numpy twins index the same packed tables.

The named maps below ship prebuilt in ``caliper_vk/assets/colormaps.npz`` (kept
in the repository; ``bake()`` rewrites it from matplotlib, and a test checks it
still equals matplotlib's sampling), so neither the build nor opening a view or
the dashboard needs matplotlib (about 0.3 s and 30 MB). matplotlib is optional:
any other of its colormap names is sampled from it at first use when it is
installed (``pip install matplotlib``).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

LUT_SIZE = 256
SEQUENTIAL = ("viridis", "magma", "inferno", "plasma", "cividis", "gray", "turbo")
DIVERGING = ("coolwarm", "RdBu_r", "bwr", "seismic", "PiYG")
PALETTES = ("tab10", "tab20", "Set1", "Dark2")
ASSET = Path(__file__).resolve().parent / "assets" / "colormaps.npz"


class UnknownColormapError(ValueError):
    """An unknown colormap or palette name; the message lists the accepted ones."""


def _registry():
    try:
        import matplotlib
    except ImportError:
        raise UnknownColormapError(
            f"colormaps beyond the built-in ones ({', '.join(SEQUENTIAL + DIVERGING)}) come from "
            "matplotlib, which is not installed: pip install matplotlib") from None
    return matplotlib.colormaps


def _sample(name: str) -> np.ndarray:
    """A named map's packed table, sampled from matplotlib."""
    cmap = _registry()[name]
    if name in PALETTES:
        return _pack(cmap(np.arange(cmap.N)))
    return _pack(cmap(np.linspace(0.0, 1.0, LUT_SIZE)))


def bake(path: Path = ASSET) -> Path:
    """Sample every named map from matplotlib and write the packed tables to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **{name: _sample(name) for name in SEQUENTIAL + DIVERGING + PALETTES})
    tmp.replace(path)
    return path


@lru_cache(maxsize=1)
def _baked() -> dict[str, np.ndarray]:
    """The baked tables by name, baking them if the package has none or an older set."""
    names = set(SEQUENTIAL + DIVERGING + PALETTES)
    for attempt in (0, 1):
        if ASSET.exists():
            with np.load(ASSET) as z:
                if set(z.files) == names:
                    tables = {k: z[k].astype(np.uint32) for k in z.files}
                    for t in tables.values():
                        t.flags.writeable = False
                    return tables
        if attempt == 0:
            try:
                bake(ASSET)
            except (OSError, UnknownColormapError):  # read-only, or no matplotlib: sample as needed
                break
    return {}


@lru_cache(maxsize=None)
def lut(name: str) -> np.ndarray:
    """A continuous colormap as 256 packed RGBA8 words (``r | g<<8 | b<<16 | a<<24``)."""
    if name not in PALETTES and name in (baked := _baked()):
        return baked[name]
    registry = _registry()
    if name not in registry or name in PALETTES:
        raise UnknownColormapError(
            f"unknown colormap {name!r}; use a matplotlib colormap such as "
            f"{', '.join(SEQUENTIAL)} (sequential) or {', '.join(DIVERGING)} (diverging)"
        )
    return _sample(name)


@lru_cache(maxsize=None)
def palette(name: str = "tab10") -> np.ndarray:
    """A categorical palette as packed RGBA8 words."""
    if name not in PALETTES:
        raise UnknownColormapError(f"unknown palette {name!r}; use one of {', '.join(PALETTES)}")
    return _baked().get(name) if name in _baked() else _sample(name)


def _pack(rgba: np.ndarray) -> np.ndarray:
    u8 = np.clip(np.round(np.asarray(rgba) * 255.0), 0, 255).astype(np.uint32)
    # r | g<<8 | b<<16 | a<<24, as views._exact.pack_rgba packs one colour (this module is also
    # loaded on its own by setup.py, so it imports nothing of the package)
    out = u8[:, 0] | u8[:, 1] << 8 | u8[:, 2] << 16 | u8[:, 3] << 24
    out.flags.writeable = False
    return out
