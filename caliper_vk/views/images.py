"""The images view: a grid of small 2-D arrays (conv kernels, feature maps, hidden states).

The input is ``(tiles, h, w)`` or ``(a, b, h, w)`` (leading dimensions are
flattened into the tile index, e.g. out_channels x in_channels kernels). Tiles
are laid out row by row in a near-square grid with a one-pixel gap; each pixel
finds its tile and cell with integer arithmetic (engine/shaders/images.comp).
``normalize="tile"`` maps each tile's own finite range onto the colormap (shapes
within a tile are comparable, magnitudes across tiles are not);
``"shared"`` uses one range for all tiles (magnitudes comparable). NaN, +Inf
and -Inf get their own colours and are counted. The ranges are made on the
device in the frame that draws them: a stats pass keeps each tile's (or the
one shared) finite min/max (engine/shaders/images_stats.comp), the resolve
pass turns them into (lo, scale) (range_resolve.comp). :meth:`Images.reference`
is the numpy twin.
"""

from __future__ import annotations

import math

import numpy as np

from .. import chrome, colormaps
from .._arrays import as_float32
from . import _exact
from ..engine.shaders.params import ParamBlock, ParamValues
from ..engine.shaders.passes import Pass, buffer, image, params, ro
from ._base import RangedView, groups_1d, pipeline, record_range_pass, resolve_range, wide
from ._registry import Sample, register_view
from ._source import Source
from .heatmap import BACKGROUND, NAN_COLOR, NEGINF_COLOR, POSINF_COLOR

# -- the declaration: read by the build from this file (docs/architecture.md, "A view is one unit") --
IMAGES = ParamBlock("images_params", "IM", [
    "N_TILES", "COLS", "TILE_H", "TILE_W", "PX_H", "PX_W", "GAP", "W", "H", "RECT_X", "RECT_Y",
    "BASE", "DTYPE", "BG", "NAN", "POSINF", "NEGINF",
    "SHARED",  # 1: one range for all tiles (normalize="shared" or a fixed range); 0: one per tile
    "GROUPS",  # ranges: 1 when SHARED, else one per tile
    "NORMS",  # the stats word of the first group's (lo, hi, scale): IS_KEYS + 2 * GROUPS
], constants={  # stats words: NaN, +Inf, -Inf counts, then GROUPS min keys and GROUPS max keys, then
    # (lo, hi, scale) per group
    "IS_NAN": "0", "IS_POSINF": "1", "IS_NEGINF": "2", "IS_KEYS": "4",
}, specialization=[("SPEC_WIDE", 0)])  # 1: a pixel-to-cell product may pass 2^32 (muldiv.glsl)
IMAGES_PASSES = (
    Pass("images_stats", IMAGES, [params(), ro("data"), buffer("stats")]),
    Pass("images", IMAGES, [params(), ro("data"), ro("stats", note="lo, hi, scale per group"), ro("colors"),
                            image()]),
)
IM = IMAGES

F32 = np.float32
GAP = 1
STATS_PER_INVOCATION = 16  # elements per stats-pass invocation (images_stats.comp)


@register_view("images", block=IM, passes=(IMAGES_PASSES[0], "range_resolve", IMAGES_PASSES[1]),
               inputs=("data",),
               tests=("tests/test_images_view.py", "tests/test_ranges_on_device.py",
                      "tests/test_ranges_discrete.py"), sample=Sample((6, 12, 12), (160, 120)))
class Images(RangedView):
    """A grid of 2-D arrays.

    Parameters
    ----------
    data : array-like (tiles, h, w) or (a, b, h, w), optional
    normalize : "tile" | "shared"
    value_range : "auto" | "symmetric" | (lo, hi)
        How a range is found (per tile or shared); a fixed range applies to all tiles.
    colormap : str
    """

    def __init__(self, data=None, *, normalize: str = "tile", value_range="auto",
                 colormap: str = "viridis"):
        super().__init__()
        if normalize not in ("tile", "shared"):
            raise ValueError(f"normalize {normalize!r} is not one of 'tile', 'shared'")
        resolve_range(np.zeros(1, F32), value_range)
        self.normalize, self.value_range = normalize, value_range
        self._lut = colormaps.lut(colormap)
        self.source = Source(np.zeros((0, 1, 1), F32))
        if data is not None:
            self.set_data(data)

    def set_data(self, data) -> None:
        self.data_version += 1
        self.set_source(Source(np.ascontiguousarray(as_float32(data, "images data"))))

    def set_source(self, source: Source) -> None:
        shape = source.shape
        if len(shape) not in (2, 3, 4):
            raise ValueError(f"images data has shape {shape}; the images view takes (tiles, h, w) or "
                             "(a, b, h, w) (or one 2-D array)")
        h, w = shape[-2:]
        source.array = source.array.reshape(-1, h, w)
        self._set_source(source)

    def layout(self, width: int, height: int) -> tuple[int, int, int, int]:
        """(cols, rows, tile pixel width, tile pixel height) for a panel of this size."""
        n, th, tw = self.source.shape
        if n == 0:
            return 1, 1, 0, 0
        # the column count that makes the largest square-ish cells
        best = None
        for cols in range(1, n + 1):
            rows = math.ceil(n / cols)
            pw, ph = (width - GAP * (cols + 1)) // cols, (height - GAP * (rows + 1)) // rows
            if pw < 1 or ph < 1:
                continue
            cell = min(pw / tw, ph / th)
            if best is None or cell > best[0]:
                best = (cell, cols, rows, pw, ph)
        if best is None:
            return 1, 1, 0, 0
        _, cols, rows, pw, ph = best
        # keep the arrays' aspect ratio inside each tile
        scale = min(pw / tw, ph / th)
        return cols, rows, max(1, int(tw * scale)), max(1, int(th * scale))

    @property
    def shared(self) -> bool:
        """One range for all tiles: ``normalize="shared"`` or a fixed ``value_range``."""
        return self.normalize == "shared" or not isinstance(self.value_range, str)

    def groups(self) -> int:
        """How many ranges the device resolves: one per tile, or one shared."""
        return 1 if self.shared else max(1, self.source.shape[0])

    def norms(self) -> np.ndarray:
        """(lo, scale) per tile as float32, as the stats and resolve passes make them (the twin)."""
        data = self.data
        out = np.zeros((max(1, len(data)), 2), F32)
        if self.shared:
            lo, _hi, scale = self.reference_range(data)
            out[:] = (lo, scale)
        else:
            for t, tile in enumerate(data):
                lo, _hi, scale = self.reference_range(tile)
                out[t] = (lo, scale)
        return out

    def params(self, width, height, rect_x=0, rect_y=0, base=0, dtype=0) -> ParamValues:
        n, th, tw = self.source.shape
        cols, _rows, pw, ph = self.layout(width, height)
        return IM.values(n_tiles=n, cols=cols, tile_h=th, tile_w=tw, px_h=ph, px_w=pw, gap=GAP,
                         w=width, h=height, rect_x=rect_x, rect_y=rect_y, base=base, dtype=dtype,
                         bg=_exact.pack_rgba(BACKGROUND), nan=_exact.pack_rgba(NAN_COLOR),
                         posinf=_exact.pack_rgba(POSINF_COLOR), neginf=_exact.pack_rgba(NEGINF_COLOR),
                         shared=int(self.shared), groups=self.groups(),
                         norms=IM.IS_KEYS + 2 * self.groups())

    def cell_at(self, x: int, y: int, width: int, height: int) -> tuple[int, int, int] | None:
        """The (tile, row, col) drawn at pixel (x, y) of a ``width`` x ``height`` panel, by the
        shader's integer mapping; None on a gap, the background or outside."""
        n, th, tw = self.source.shape
        cols, _rows, pw, ph = self.layout(width, height)
        if not (0 <= x < width and 0 <= y < height) or pw == 0 or ph == 0 or n == 0:
            return None
        col, row = x // (pw + GAP), y // (ph + GAP)
        xin, yin = x - col * (pw + GAP), y - row * (ph + GAP)
        t = row * cols + col
        if col >= cols or xin < GAP or yin < GAP or t >= n:
            return None
        return t, (yin - GAP) * th // ph, (xin - GAP) * tw // pw

    # -- drawable protocol -------------------------------------------------------------------------
    def legend(self) -> list:
        if self.shared:
            lo, hi = self.range
            return chrome.range_legend(lo, hi, self._lut)
        return [("per tile ", chrome.DIM), chrome.Ramp.of(self._lut, 48)]

    def prepare(self) -> None:
        groups = self.groups()
        self.range_words = (IM.IS_KEYS, IM.IS_KEYS + 2 * groups)
        self._upload_data_and_params()
        self._upload("range_params", self._range_params(count=groups))
        self._buffer("stats", 4 * (IM.IS_KEYS + 5 * groups))
        if "all" in self._dirty or not self._buffers.get("colors"):
            self._upload("colors", self._lut)
        self._dirty.clear()
        if getattr(self, "_recorded_groups", None) != (groups, self.source.array.size):
            self.stale = True

    def record_reads(self, rec) -> None:
        b = self._buffers
        self._drop_sets()
        _n, th, tw = self.source.shape
        _cols, _rows, pw, ph = self.layout(self.rect.width, self.rect.height)
        spec = IM.specialize(SPEC_WIDE=wide((ph - 1) * th, (pw - 1) * tw))
        data = self._bound["data"]
        stats = pipeline(self.device, "images_stats", spec).bind(params=b["params"], data=data,
                                                                 stats=b["stats"])
        resolve = pipeline(self.device, "range_resolve").bind(params=b["range_params"], stats=b["stats"])
        draw = pipeline(self.device, "images", spec).bind(params=b["params"], data=data, stats=b["stats"],
                                                          colors=b["colors"], target=self.target)
        self._sets = [stats, resolve, draw]
        groups = self.groups()
        rec.fill(b["stats"], 0)
        rec.fill(b["stats"], 0xFFFFFFFF, offset=4 * IM.IS_KEYS, size=4 * groups)  # min keys start at the top
        rec.barrier()
        rec.dispatch(stats, *groups_1d(-(-self.source.array.size // STATS_PER_INVOCATION)))
        record_range_pass(rec, resolve, groups)
        rec.dispatch(draw, -(-self.rect.width // 16), -(-self.rect.height // 16))
        self._recorded_groups = (groups, self.source.array.size)

    def record(self, rec) -> None:
        self.stale = False

    def finish(self) -> None:
        s = self._stat_words(IM.IS_KEYS + 2 * self.groups() + 3)  # counts, keys, the first group's range
        self.stats = {"nan": s[IM.IS_NAN], "posinf": s[IM.IS_POSINF], "neginf": s[IM.IS_NEGINF]}
        self._read_range(s)  # the shared range (per tile: the first tile's)

    # -- the numpy twin --------------------------------------------------------------------------------
    def reference(self, width: int, height: int) -> np.ndarray:
        rgba, _ = self.reference_with_stats(width, height)
        return rgba

    def reference_with_stats(self, width: int, height: int):
        p = self.params(width, height)
        data = self.data
        n, th, tw = data.shape
        norms = self.norms()
        cls_all = _exact.classify(data)
        stats = {"nan": int((cls_all == _exact.NAN).sum()), "posinf": int((cls_all == _exact.POSINF).sum()),
                 "neginf": int((cls_all == _exact.NEGINF).sum())}
        out = np.full((height, width), p["bg"], np.uint32)
        pw, ph, cols = p["px_w"], p["px_h"], p["cols"]
        if pw == 0 or ph == 0 or n == 0:
            return _exact.unpack_rgba(out), stats
        x = np.arange(width)[None, :]
        y = np.arange(height)[:, None]
        col, row = x // (pw + GAP), y // (ph + GAP)
        xin, yin = x - col * (pw + GAP), y - row * (ph + GAP)
        t = row * cols + col
        inside = (col < cols) & (xin >= GAP) & (yin >= GAP) & (t < n)
        tt = np.where(inside, t, 0)
        cy = np.where(inside, (np.maximum(yin - GAP, 0) * th) // ph, 0)
        cx = np.where(inside, (np.maximum(xin - GAP, 0) * tw) // pw, 0)
        cy, cx = np.broadcast_to(cy, tt.shape), np.broadcast_to(cx, tt.shape)
        v = data[tt, cy, cx]
        cls = _exact.classify(v)
        lo, scale = norms[tt, 0], norms[tt, 1]
        with np.errstate(all="ignore"):
            idx = np.empty(v.shape, np.uint32)
            for t_id in np.unique(tt):  # lut_index takes scalar lo/scale: one call per tile
                m = tt == t_id
                idx[m] = _exact.lut_index(_exact.ftz(np.where(cls[m] == 0, v[m], F32(0))),
                                          lo[m][0], scale[m][0], 255)
        colour = self._lut[idx]
        colour = np.where(cls == _exact.NAN, np.uint32(p["nan"]), colour)
        colour = np.where(cls == _exact.POSINF, np.uint32(p["posinf"]), colour)
        colour = np.where(cls == _exact.NEGINF, np.uint32(p["neginf"]), colour)
        out = np.where(inside, colour, out).astype(np.uint32)
        return _exact.unpack_rgba(out), stats
