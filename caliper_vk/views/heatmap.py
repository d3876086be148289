"""The heatmap view: a 2-D array as coloured cells.

GPU passes (engine/shaders/heatmap*.comp): a per-element pass counts NaN,
+Inf, -Inf and out-of-range values and keeps the finite min/max; the resolve
pass (range_resolve.comp) makes the frame's value range from them on the
device; a per-pixel pass picks each pixel's cell
by integer nearest-neighbour indexing (``row = y * rows // height``) and looks
its colour up in a 256-entry table from matplotlib's colormap data.
:meth:`Heatmap.reference` is the numpy twin that produces the same bytes.

Value ranges: ``"auto"`` (finite min..max), ``"symmetric"`` (-m..m with m the
largest finite magnitude; for diverging maps) or a fixed ``(lo, hi)``, where
values outside are drawn in the end colours and counted.
"""

from __future__ import annotations

import numpy as np

from .. import chrome, colormaps
from .._arrays import as_float32
from . import _exact
from ..engine.shaders.params import ParamBlock, ParamValues
from ..engine.shaders.passes import Pass, buffer, image, params, ro
from ._source import Source
from ._base import RangedView, groups_1d, pipeline, record_range_pass, resolve_range
from ._registry import Sample, register_view

# -- the declaration: read by the build from this file (docs/architecture.md, "A view is one unit") --
HEATMAP = ParamBlock("heatmap_params", "HM", [
    "ROWS", "COLS", "W", "H", "RECT_X", "RECT_Y", "N",
    ("LO", "float"), ("HI", "float"),  # the stats pass counts finite values below LO / above HI
    "NAN_COLOR", "POSINF_COLOR", "NEGINF_COLOR", "BG", "BASE", "DTYPE",
], constants={"ST_NAN": "0", "ST_POSINF": "1", "ST_NEGINF": "2", "ST_BELOW": "3", "ST_ABOVE": "4",
              "ST_MIN": "5", "ST_MAX": "6", "ST_LO": "7", "ST_HI": "8", "ST_SCALE": "9", "ST_WORDS": "10"})
# the value statistics (also the histogram's, curve's and textgrid's first pass), and the drawing
STATS_PASS = Pass("heatmap_stats", HEATMAP, [params(), ro("data"), buffer("stats")])
HEATMAP_PASS = Pass("heatmap", HEATMAP, [params(), ro("data"), ro("colors"), ro("stats"), image()])
HM = HEATMAP

F32 = np.float32
STAT_NAMES = ("nan", "posinf", "neginf", "below", "above")
STATS_PER_INVOCATION = 16  # elements per stats-pass invocation (heatmap_stats.comp)
STATS_BYTES = 4 * HM.ST_WORDS
BACKGROUND = (22, 22, 26, 255)

NAN_COLOR = (255, 0, 255, 255)
POSINF_COLOR = (255, 255, 255, 255)
NEGINF_COLOR = (0, 255, 255, 255)



def record_stats_pass(rec, stats_set, stats_buffer, n: int) -> None:
    """Record the value-statistics pass (heatmap_stats.comp) over ``n`` elements: clear the
    counters, start the min key at the top, and dispatch. Shared by heatmap and textgrid."""
    rec.fill(stats_buffer, 0)
    rec.fill(stats_buffer, 0xFFFFFFFF, offset=20, size=4)  # the min key starts at the top
    rec.barrier()
    rec.dispatch(stats_set, *groups_1d(-(-n // STATS_PER_INVOCATION)))


def reference_stats(flat: np.ndarray, lo, hi) -> dict:
    """The stats pass's counts, in numpy: NaN, ±Inf, and finite values below ``lo`` / above ``hi``."""
    cls = _exact.classify(flat)
    fin = _exact.ftz(np.where(cls == _exact.FINITE, flat, F32(0)))
    finite = cls == _exact.FINITE
    return {"nan": int((cls == _exact.NAN).sum()), "posinf": int((cls == _exact.POSINF).sum()),
            "neginf": int((cls == _exact.NEGINF).sum()),
            "below": int((finite & (fin < lo)).sum()),
            "above": int((finite & ~(fin < lo) & (fin > hi)).sum())}

@register_view("heatmap", block=HM, passes=(STATS_PASS, "range_resolve", HEATMAP_PASS), inputs=("data",),
               tests=("tests/test_heatmap_exact.py", "tests/test_ranges_on_device.py",
                      "tests/test_ranges_discrete.py"), cli=True,
               sample=Sample((24, 40), (160, 120), nan_every=11))
class Heatmap(RangedView):
    """A 2-D array drawn as a grid of coloured cells.

    Parameters
    ----------
    data : array-like, 2-D (or 1-D, drawn as one row, or reshaped by ``shape``)
        Any numeric dtype; drawn as float32.
    colormap : str
        A matplotlib colormap name: viridis, magma, ... or a diverging one (coolwarm, RdBu_r).
    value_range : "auto" | "symmetric" | (lo, hi)
    shape : (rows, cols), optional
        Reshape 1-D input to this grid.
    """

    def __init__(self, data=None, *, colormap: str = "viridis", value_range="auto", shape=None):
        super().__init__()
        self._lut = colormaps.lut(colormap)
        self.colormap = colormap
        resolve_range(np.zeros(1, F32), value_range)  # a bad spec fails here, not at draw time
        self.value_range = value_range
        self.shape = shape
        self.source = Source(np.zeros((1, 1), F32))
        self.seen_range = None
        if data is not None:
            self.set_data(data)

    def set_data(self, data) -> None:
        a = as_float32(data, "heatmap data")
        if self.shape is not None:
            if a.size != int(np.prod(self.shape)):
                raise ValueError(f"heatmap data has {a.size} values; shape {self.shape} needs "
                                 f"{int(np.prod(self.shape))}")
            a = a.reshape(self.shape)
        elif a.ndim == 1:
            a = a.reshape(1, -1)
        if a.ndim != 2:
            raise ValueError(f"heatmap data has shape {tuple(a.shape)}; the heatmap view takes a "
                             "2-D array (or 1-D); index or reshape higher-dimensional input")
        self._set_source(Source(np.ascontiguousarray(a)))

    def set_source(self, source: Source) -> None:
        """Draw values straight from ``source`` (a live tensor; see ``caliper_vk.attach``)."""
        shape = source.shape
        if self.shape is not None:
            if int(np.prod(shape)) != int(np.prod(self.shape)):
                raise ValueError(f"heatmap data has {int(np.prod(shape))} values; shape {self.shape} "
                                 f"needs {int(np.prod(self.shape))}")
            source.array = source.array.reshape(self.shape)
        elif len(shape) == 1:
            source.array = source.array.reshape(1, -1)
        elif len(shape) != 2:
            raise ValueError(f"heatmap data has shape {shape}; the heatmap view takes a 2-D array "
                             "(or 1-D); index or reshape higher-dimensional input")
        self._set_source(source)

    def params(self, width: int, height: int, rect_x: int = 0, rect_y: int = 0, base: int = 0,
               dtype: int = 0) -> ParamValues:
        rows, cols = self.source.shape
        lo, hi = self.count_bounds()
        return HM.values(rows=rows, cols=cols, w=width, h=height, rect_x=rect_x, rect_y=rect_y,
                         n=rows * cols, base=base, dtype=dtype, lo=lo, hi=hi,
                         nan_color=_exact.pack_rgba(NAN_COLOR), posinf_color=_exact.pack_rgba(POSINF_COLOR),
                         neginf_color=_exact.pack_rgba(NEGINF_COLOR), bg=_exact.pack_rgba(BACKGROUND))

    def cell_at(self, x: int, y: int, width: int, height: int) -> tuple[int, int] | None:
        """The (row, col) drawn at pixel (x, y) of a ``width`` x ``height`` panel, by the
        shader's own integer mapping (``row = y * rows // height``); None outside."""
        rows, cols = self.source.shape
        if not (0 <= x < width and 0 <= y < height) or rows * cols == 0:
            return None
        return y * rows // height, x * cols // width

    # -- drawable protocol ----------------------------------------------------------------
    def legend(self) -> list:
        lo, hi = self.range
        return chrome.range_legend(lo, hi, self._lut)

    def prepare(self) -> None:
        self._upload_data_and_params()
        self._upload("range_params", self._range_params())
        if self._dirty:
            self._upload("colors", self._lut)
            self._dirty.clear()
        self._buffer("stats", STATS_BYTES)
        if getattr(self, "_recorded_n", None) != self.source.array.size:
            self.stale = True

    def record_reads(self, rec) -> None:
        """The passes read the values: they all run in the frame's first submission."""
        b = self._buffers
        self._drop_sets()
        data = self._bound["data"]
        stats = pipeline(self.device, "heatmap_stats").bind(params=b["params"], data=data, stats=b["stats"])
        resolve = pipeline(self.device, "range_resolve").bind(params=b["range_params"], stats=b["stats"])
        raster = pipeline(self.device, "heatmap").bind(params=b["params"], data=data, colors=b["colors"],
                                                       stats=b["stats"], target=self.target)
        self._sets = [stats, resolve, raster]
        record_stats_pass(rec, stats, b["stats"], self.source.array.size)
        record_range_pass(rec, resolve)
        rec.mark("heatmap stats")
        rec.dispatch(raster, -(-self.rect.width // 16), -(-self.rect.height // 16))
        self._recorded_n = self.source.array.size

    def record(self, rec) -> None:
        self.stale = False

    def finish(self) -> None:
        s = self._stat_words(HM.ST_WORDS)
        self.stats = dict(zip(STAT_NAMES, s[:5], strict=True))
        self._read_range(s)
        # the finite extremes this frame read (None when it read no finite value)
        self.seen_range = ((float(_exact.from_orderable(s[5])), float(_exact.from_orderable(s[6])))
                           if s[5] != 0xFFFFFFFF else None)

    # -- the numpy twin --------------------------------------------------------------------
    def reference(self, width: int, height: int) -> np.ndarray:
        rgba, _ = self.reference_with_stats(width, height)
        return rgba

    def reference_with_stats(self, width: int, height: int):
        p = self.params(width, height)
        rows, cols = self.data.shape
        flat = self.data.reshape(-1)
        lo, _hi, scale = self.reference_range(flat)
        cls = _exact.classify(flat)
        stats = reference_stats(flat, F32(p["lo"]), F32(p["hi"]))
        if flat.size == 0:
            rgba = np.empty((height, width, 4), np.uint8)
            rgba[:] = BACKGROUND
            return rgba, stats
        r = (np.arange(height, dtype=np.uint64) * np.uint64(rows)) // np.uint64(height)
        c = (np.arange(width, dtype=np.uint64) * np.uint64(cols)) // np.uint64(width)
        cell = (r[:, None] * np.uint64(cols) + c[None, :]).astype(np.int64)
        v = flat[cell]
        vc = cls[cell]
        colors = self._lut[_exact.lut_index(_exact.ftz(np.where(vc == 0, v, F32(0))), lo, scale, 255)]
        colors = np.where(vc == _exact.NAN, np.uint32(p["nan_color"]), colors)
        colors = np.where(vc == _exact.POSINF, np.uint32(p["posinf_color"]), colors)
        colors = np.where(vc == _exact.NEGINF, np.uint32(p["neginf_color"]), colors)
        return _exact.unpack_rgba(colors.astype(np.uint32)), stats
