"""The histogram view: the distribution of a tensor's values in fixed bins.

GPU passes: the heatmap's stats pass counts NaN, +Inf, -Inf and values outside
a fixed range and keeps the finite min/max, the resolve pass makes the frame's
range from them (range_resolve.comp), then engine/shaders/histogram_*.comp count
every finite value into ``bins`` equal bins over ``[lo, hi]`` (``bin = floor((v
- lo) * scale)`` in float32, the last bin closed), find the tallest bin and draw
the bars with integer math. With ``history=K`` the K previous frames'
histograms are overlaid as their top edges, fainter with age (fading means age,
not confidence), on one shared vertical scale: those binned on this frame's grid,
which the device decides. :meth:`Histogram.reference` is the numpy twin.

Range: ``"auto"`` (finite min..max of the current values), ``"symmetric"`` or a
fixed ``(lo, hi)``. With a fixed range, values outside it are counted and the
count is reported (``stats["below"]``, ``stats["above"]``), never silently dropped.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from .. import chrome
from .._arrays import as_float32
from . import _exact
from ..engine.shaders.params import ParamBlock, ParamValues
from ..engine.shaders.passes import Pass, buffer, image, params, ro
from ._base import RangedView, groups_1d, pipeline, record_range_pass, resolve_range
from ._registry import Sample, register_view
from ._source import Source
from .heatmap import HEATMAP as HM, record_stats_pass, reference_stats

# -- the declaration: read by the build from this file (docs/architecture.md, "A view is one unit") --
HISTOGRAM = ParamBlock("histogram_params", "HG", [
    "N", "BASE", "DTYPE", "BINS",
    "W", "H", "RECT_X", "RECT_Y",
    "HISTORY",  # older steps uploaded (each with the grid it was counted on), newest first
    "BG", "COLOR", "OLD_COLOR",
    "OFFSET",  # 0: overlay layout; 1: offset layout (older steps raised, histogram_raster.comp)
], constants={  # stats words after the heatmap stats pass's (HEATMAP.ST_WORDS) and its range
    "HS_MAX": "10", "HS_KEPT": "11", "HS_WORDS": "12"})
HISTOGRAM_PASSES = (
    Pass("histogram_count", HISTOGRAM, [params(), ro("data"), buffer("counts"), ro("stats")]),
    Pass("histogram_max", HISTOGRAM, [params(), ro("counts"), buffer("stats"), ro("history")]),
    Pass("histogram_raster", HISTOGRAM, [params(), ro("counts"), ro("stats"),
                                         ro("history", note="[2 K + k * bins + b]"), image()]),
)
HG = HISTOGRAM

F32 = np.float32
STAT_NAMES = ("nan", "posinf", "neginf", "below", "above")
PER_INVOCATION = 16  # values per counting invocation (histogram_count.comp)
MAX_HISTORY = 16
MAX_BINS = 4096


def auto_bins(n: int) -> int:
    """``bins="auto"`` for ``n`` values: the larger of Sturges' rule (ceil(log2 n) + 1) and the
    Rice rule (ceil(2 n^(1/3))), in integers, within 1..MAX_BINS. It needs only the count (the
    tensor's size, known without reading a value), so it is fixed when the tensor is attached
    and the bars of every step stay comparable; numpy's "auto" needs a quantile (the IQR),
    which no exact device reduction gives."""
    if n < 2:
        return 1
    sturges = (n - 1).bit_length() + 1
    rice = max(1, round(2 * n ** (1 / 3)))  # then exactly: the smallest k with k^3 >= 8 n
    while rice ** 3 < 8 * n:
        rice += 1
    while rice > 1 and (rice - 1) ** 3 >= 8 * n:
        rice -= 1
    return min(max(sturges, rice), MAX_BINS)


BACKGROUND = (22, 22, 26, 255)
BAR_COLOR = (31, 119, 180, 255)  # tab10 blue
OLD_COLOR = (255, 127, 14, 255)  # tab10 orange: the older steps' edges


@register_view("histogram", block=HG, passes=("heatmap_stats", "range_resolve", *HISTOGRAM_PASSES),
               inputs=("data",),
               tests=("tests/test_histogram_exact.py", "tests/test_ranges_on_device.py",
                      "tests/test_ranges_discrete.py"), cli=True, sample=Sample((1000,), (160, 120)))
class Histogram(RangedView):
    """A histogram of a tensor's values (any shape; all elements count).

    Parameters
    ----------
    data : array-like, optional
    bins : int | "auto"
        Number of equal-width bins (1..4096), or ``"auto"``: the larger of
        Sturges' and the Rice rule for the tensor's element count
        (:func:`auto_bins`), so the bars of every step stay comparable.
    value_range : "auto" | "symmetric" | (lo, hi)
    history : int
        How many previous steps to show besides the current one (0..16).
    layout : "overlay" | "offset"
        Older steps as fading outlines over the current bars, or stacked: each
        older step raised by a fixed number of pixels (a display offset, not
        counts; the title bar says so), nearer steps in front.
    """

    def __init__(self, data=None, *, bins: int | str = 64, value_range="auto", history: int = 0,
                 layout: str = "overlay"):
        super().__init__()
        if bins != "auto" and (not isinstance(bins, (int, np.integer)) or not 1 <= bins <= MAX_BINS):
            raise ValueError(f"bins must be an integer in 1..{MAX_BINS} or 'auto', got {bins!r}")
        if not isinstance(history, (int, np.integer)) or not 0 <= history <= MAX_HISTORY:
            raise ValueError(f"history must be an integer in 0..{MAX_HISTORY}, got {history!r}")
        if layout not in ("overlay", "offset"):
            raise ValueError(f"layout must be 'overlay' or 'offset', got {layout!r}")
        resolve_range(np.zeros(1, F32), value_range)  # a bad spec fails here
        self.auto_bins = bins == "auto"
        self.bins = auto_bins(0) if self.auto_bins else int(bins)  # "auto": chosen with the source
        self.value_range, self.history, self.layout = value_range, int(history), layout
        self.keeps_state = self.history > 0  # a rewound frame overlays the steps it overlaid then
        self.source = Source(np.zeros(0, F32))
        self.counts = np.zeros(self.bins, np.uint32)
        self._past: deque = deque(maxlen=max(1, self.history))  # newest first
        self._frame_history = np.zeros((0, self.bins), np.uint32)  # the older steps last overlaid
        self._candidates: list = []  # (counts, grid) of the older steps offered to the frame
        self._rewound = None  # the candidates of a kept step being redrawn (show_kept)
        self._frame_rewound = False
        self._pending = None  # (data version, counts, grid) of the last drawn frame
        self._frame_version = None
        self.history_note = ""  # older steps left out of the overlay (binned on another grid)
        if data is not None:
            self.set_data(data)

    # -- data ------------------------------------------------------------------------------------
    def set_data(self, data) -> None:
        self.data_version += 1
        self._set_source(Source(np.ascontiguousarray(as_float32(data, "histogram data").reshape(-1))))
        self._choose_bins()

    def set_source(self, source: Source) -> None:
        """Count values straight from ``source`` (a live tensor; see ``caliper_vk.attach``)."""
        source.array = source.array.reshape(-1)
        self._set_source(source)
        self._choose_bins()

    def _choose_bins(self) -> None:
        """bins="auto": :func:`auto_bins` of the element count (a new size starts a new grid)."""
        if not self.auto_bins or auto_bins(self.source.array.size) == self.bins:
            return
        self.bins = auto_bins(self.source.array.size)
        self.counts = np.zeros(self.bins, np.uint32)
        self._past.clear()
        self._pending = None
        self._frame_history = np.zeros((0, self.bins), np.uint32)

    def range_last(self) -> int:
        return self.bins

    def params(self, width: int, height: int, rect_x: int = 0, rect_y: int = 0, base: int = 0,
               dtype: int = 0) -> ParamValues:
        return HG.values(n=self.source.array.size, base=base, dtype=dtype, bins=self.bins, w=width, h=height,
                         rect_x=rect_x, rect_y=rect_y, history=len(self._candidates),
                         bg=_exact.pack_rgba(BACKGROUND), color=_exact.pack_rgba(BAR_COLOR),
                         old_color=_exact.pack_rgba(OLD_COLOR), offset=int(self.layout == "offset"))

    def _stats_params(self, base: int, dtype: int) -> ParamValues:
        """The heatmap stats pass's parameters: special values, values outside a fixed range,
        and the finite min/max the resolve pass makes the range from."""
        lo, hi = self.count_bounds()
        return HM.values(n=self.source.array.size, base=base, dtype=dtype, lo=lo, hi=hi)

    def offset_px(self, height: int, steps: int) -> int:
        """Offset layout: how far each older step is raised (its baselines span the upper
        half of the panel); 0 in the overlay layout."""
        if self.layout != "offset" or steps == 0:
            return 0
        return max(1, (height // 2) // steps) if height > 2 * steps else 0

    # -- drawable protocol --------------------------------------------------------------------------
    def legend(self) -> list:
        lo, hi = self.range
        items = [(f"{chrome.number(lo)} … {chrome.number(hi)} · {self.bins} bins · "
                  f"peak {int(self.counts.max()) if self.counts.size else 0}", chrome.DIM)]
        if self.history and self.layout == "offset":  # first: the one thing not to misread
            items = [("older steps raised ↑ (display offset)  ", chrome.WARNING), *items,
                     ("  ", chrome.DIM), chrome.Swatch(OLD_COLOR), (f" last {self.history} steps", chrome.DIM)]
        elif self.history:
            items += [("  ", chrome.DIM), chrome.Swatch(OLD_COLOR),
                      (f" last {self.history} steps (fainter = older)", chrome.DIM)]
        if self.history_note:  # first: older counts on another grid are not shown
            items = [(self.history_note, chrome.WARNING), *items]
        return items

    def prepare(self) -> None:
        r = self.rect
        _, base, dtype = self._data_binding()
        # an older step enters the overlay once newer data is drawn (not when a frame repeats,
        # nor when a kept step is redrawn: that frame overlays the steps it overlaid then)
        self._frame_rewound = self._rewound is not None
        if not self._frame_rewound and self._pending is not None and self._pending[0] != self.data_version:
            self._past.appendleft(self._pending[1:])
            self._pending = None
        self._frame_version = self.data_version
        if self._frame_rewound:
            self._candidates = list(self._rewound)
        else:
            self._candidates = list(self._past)[: self.history] if self.history else []
        p = self.params(r.width, r.height, r.x, r.y, base, dtype)
        if not self.source.array.size:
            p.set(n=0)
        self._upload("params", p)
        self._upload("stats_params", self._stats_params(base, dtype))
        self._upload("range_params", self._range_params())
        # the older steps with their grids: (lo, hi) words for each, then their counts
        grids = np.asarray([g for _, g in self._candidates], np.uint32).reshape(-1)
        rows = [c for c, _ in self._candidates]
        self._upload("history", np.concatenate([grids, *rows, np.zeros(1, np.uint32)]))
        self._buffer("counts", self.bins * 4)
        self._buffer("stats", 4 * HG.HS_WORDS)
        self._dirty.clear()
        if getattr(self, "_recorded_n", None) != self.source.array.size:
            self.stale = True

    def record_reads(self, rec) -> None:
        b = self._buffers
        self._drop_sets()
        data = self._bound["data"]
        stats = pipeline(self.device, "heatmap_stats").bind(params=b["stats_params"], data=data,
                                                            stats=b["stats"])
        resolve = pipeline(self.device, "range_resolve").bind(params=b["range_params"], stats=b["stats"])
        count = pipeline(self.device, "histogram_count").bind(params=b["params"], data=data,
                                                              counts=b["counts"], stats=b["stats"])
        top = pipeline(self.device, "histogram_max").bind(params=b["params"], counts=b["counts"],
                                                          stats=b["stats"], history=b["history"])
        raster = pipeline(self.device, "histogram_raster").bind(
            params=b["params"], counts=b["counts"], stats=b["stats"], history=b["history"], target=self.target)
        self._sets = [count, top, raster, stats, resolve]
        rec.fill(b["counts"], 0)
        record_stats_pass(rec, stats, b["stats"], self.source.array.size)
        record_range_pass(rec, resolve)
        rec.dispatch(count, *groups_1d(-(-self.source.array.size // PER_INVOCATION)))
        self._recorded_n = self.source.array.size

    def record(self, rec) -> None:
        """The tallest-bin and raster passes read only the counts, not the live tensor."""
        rec.dispatch(self._sets[1], 1)
        rec.barrier()
        rec.dispatch(self._sets[2], -(-self.rect.width // 16), -(-self.rect.height // 16))
        self.stale = False

    def finish(self) -> None:
        s = self._stat_words(HG.HS_WORDS)
        self.stats = dict(zip(STAT_NAMES, s[:5], strict=True))
        self._read_range(s)
        self.counts = self._buffers["counts"].view(np.uint32, self.bins).copy()
        self._overlaid(s[HG.HS_KEPT])
        if self.history and not self._frame_rewound:
            grid = (s[HM.ST_LO], s[HM.ST_HI])  # the grid this frame counted on, as words
            self._pending = (self._frame_version, self.counts, grid)

    def kept_state(self):
        """The older steps this frame was offered (a rewound frame overlays them again)."""
        return tuple(self._candidates)

    def show_kept(self, state):
        self._rewound = state or ()

        def restore():
            self._rewound = None
        return restore

    def _overlaid(self, kept: int) -> None:
        """The older steps the frame overlaid: the newest ones binned on its grid, up to the
        first that was binned on another (an auto range that moved). Counts from another grid
        are not comparable bin for bin and the raw values are gone, so they are not drawn;
        :attr:`history_note` says how many were left out, in the title bar."""
        rows = [c for c, _ in self._candidates[:kept]]
        self._frame_history = np.stack(rows) if rows else np.zeros((0, self.bins), np.uint32)
        dropped = len(self._candidates) - kept
        self.history_note = (f"{dropped} older step{'s' if dropped > 1 else ''} not overlaid: "
                             "binned over another range  ") if dropped else ""

    def _kept(self, grid: tuple) -> int:
        """How many of the offered older steps share ``grid`` (histogram_max.comp's rule)."""
        kept = 0
        while kept < len(self._candidates) and self._candidates[kept][1] == grid:
            kept += 1
        return kept

    # -- the numpy twin ---------------------------------------------------------------------------------
    def reference(self, width: int, height: int) -> np.ndarray:
        rgba, _ = self.reference_with_stats(width, height)
        return rgba

    def count(self) -> tuple[np.ndarray, dict]:
        """Bin counts and special-value counts of the current values, as the GPU computes them."""
        v = self.data.reshape(-1)
        lo, hi, scale = self.reference_range(v)
        cls = _exact.classify(v)
        finite = cls == _exact.FINITE
        u = _exact.ftz(np.where(finite, v, F32(0)))
        inside = finite & ~(u < lo) & ~(u > hi)
        with np.errstate(all="ignore"):
            t = _exact.ftz(_exact.ftz(u[inside] - lo) * scale)
        b = np.where(t >= F32(self.bins), F32(self.bins - 1), t).astype(np.int64)
        counts = np.bincount(b, minlength=self.bins).astype(np.uint32)
        return counts, reference_stats(v, *(F32(x) for x in self.count_bounds()))

    def reference_with_stats(self, width: int, height: int):
        counts, stats = self.count()
        lo, hi, _ = self.reference_range()
        kept = self._kept((_exact.f32_bits(lo), _exact.f32_bits(hi)))
        rows = [c for c, _ in self._candidates[:kept]]
        history = np.stack(rows) if rows else np.zeros((0, self.bins), np.uint32)
        maxc = int(max(counts.max(initial=0), history.max(initial=0)))

        def bar_height(c, h=height):
            c = np.asarray(c, np.uint64)
            return np.zeros(c.shape, np.uint64) if maxc == 0 else (c * h + maxc - 1) // maxc

        col = (np.arange(width, dtype=np.uint64) * self.bins // width).astype(np.int64)
        up = (height - 1 - np.arange(height, dtype=np.uint64))[:, None]
        bg = _exact.pack_rgba(BACKGROUND)
        k_count = len(history)
        d = self.offset_px(height, k_count)
        if d:  # offset layout: nearer steps in front, each on its own raised baseline
            hb = height - k_count * d
            out = np.full((height, width), bg, np.uint32)
            for k in range(k_count, 0, -1):
                base = np.uint64(k * d)
                top = bar_height(history[k - 1][col], hb)[None, :]
                rel = up - np.minimum(up, base)
                inside = (up >= base) & (rel < top)
                alpha = 256 - (k * 200) // (k_count + 1)
                old = _exact.pack_rgba(OLD_COLOR)
                colour = np.where(rel + 1 == top, np.uint32(_mix(bg, old, alpha)),
                                  np.uint32(_mix(bg, old, alpha >> 1)))
                out = np.where(inside, colour, out)
            out = np.where(up < bar_height(counts[col], hb)[None, :], np.uint32(_exact.pack_rgba(BAR_COLOR)),
                           out)
            return _exact.unpack_rgba(out.astype(np.uint32)), stats
        out = np.where(up < bar_height(counts[col])[None, :], np.uint32(_exact.pack_rgba(BAR_COLOR)),
                       np.uint32(bg)).astype(np.uint32)
        for k in range(k_count, 0, -1):
            bh = bar_height(history[k - 1][col])[None, :]
            alpha = 256 - (k * 200) // (k_count + 1)
            edge = (bh > 0) & (up == bh - 1)
            out = np.where(edge, np.uint32(_mix(bg, _exact.pack_rgba(OLD_COLOR), alpha)), out)
        return _exact.unpack_rgba(out.astype(np.uint32)), stats


def _mix(bg: int, fg: int, alpha: int) -> int:
    chans = [((((bg >> s) & 255) * (256 - alpha) + ((fg >> s) & 255) * alpha) >> 8) << s
             for s in (0, 8, 16)]
    return chans[0] | chans[1] | chans[2] | 0xFF000000
