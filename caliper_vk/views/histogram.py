"""The histogram view: the distribution of a tensor's values in fixed bins.

GPU passes (engine/shaders/histogram_*.comp): count every finite value into
``bins`` equal bins over ``[lo, hi]`` (``bin = floor((v - lo) * scale)`` in
float32, the last bin closed), counting NaN, +Inf, -Inf and values outside the
range apart; find the tallest bin; draw the bars with integer math. With
``history=K`` the K previous frames' histograms are overlaid as their top
edges, fainter with age (fading means age, not confidence), on one shared
vertical scale. :meth:`Histogram.reference` is the numpy twin.

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
from ..engine.shaders.params import HISTOGRAM as HG
from ._base import RangedView, groups_1d, pipeline, resolve_range
from ._source import Source

F32 = np.float32
STAT_NAMES = ("nan", "posinf", "neginf", "below", "above")
PER_INVOCATION = 16  # values per counting invocation (histogram_count.comp)
MAX_HISTORY = 16
MAX_BINS = 4096
PROVISIONAL_BINS = 64  # bins="auto" before any values with a spread have arrived

BACKGROUND = (22, 22, 26, 255)
BAR_COLOR = (31, 119, 180, 255)  # tab10 blue
OLD_COLOR = (255, 127, 14, 255)  # tab10 orange: the older steps' edges


class Histogram(RangedView):
    """A histogram of a tensor's values (any shape; all elements count).

    Parameters
    ----------
    data : array-like, optional
    bins : int | "auto"
        Number of equal-width bins (1..4096), or ``"auto"``: numpy's ``"auto"``
        rule (the larger of Sturges and Freedman–Diaconis) over the first
        values drawn, then kept, so the bars of later steps stay comparable.
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
        # "auto": PROVISIONAL_BINS until values with a spread arrive, then numpy's rule, kept
        self.bins = PROVISIONAL_BINS if self.auto_bins else int(bins)
        self._bins_chosen = not self.auto_bins
        self.value_range, self.history, self.layout = value_range, int(history), layout
        self.source = Source(np.zeros(0, F32))
        self._range_cache = None
        self.counts = np.zeros(self.bins, np.uint32)
        self._past: deque = deque(maxlen=max(1, self.history))  # newest first
        self._frame_history = np.zeros((0, self.bins), np.uint32)
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
        """bins="auto": numpy's rule over the first values with a spread, then fixed."""
        if self._bins_chosen:
            return
        v = self.data
        v = v[np.isfinite(v)]
        if v.size < 2 or v.min() == v.max():
            return  # nothing to size bins by yet (an empty or constant tensor)
        lo, hi = self.range
        n = len(np.histogram_bin_edges(v.astype(np.float64), bins="auto", range=(lo, hi))) - 1
        self.bins = int(min(max(n, 1), MAX_BINS))
        self._bins_chosen = True
        self.counts = np.zeros(self.bins, np.uint32)
        self._past.clear()
        self._pending = None
        self._frame_history = np.zeros((0, self.bins), np.uint32)

    def params(self, width: int, height: int, rect_x: int = 0, rect_y: int = 0, base: int = 0,
               dtype: int = 0, history: np.ndarray | None = None) -> np.ndarray:
        lo, hi = self.range
        history = self._frame_history if history is None else history
        p = HG.new()
        p[HG.N], p[HG.BASE], p[HG.DTYPE], p[HG.BINS] = self.source.array.size, base, dtype, self.bins
        f = p.view(F32)
        f[HG.LO], f[HG.HI] = lo, hi
        f[HG.SCALE] = self.bins / (float(F32(hi)) - float(F32(lo)))
        p[HG.W], p[HG.H], p[HG.RECT_X], p[HG.RECT_Y] = width, height, rect_x, rect_y
        p[HG.HISTORY] = len(history)
        p[HG.HISTORY_MAX] = int(history.max()) if history.size else 0
        p[HG.BG] = _exact.pack_rgba(BACKGROUND)
        p[HG.COLOR] = _exact.pack_rgba(BAR_COLOR)
        p[HG.OLD_COLOR] = _exact.pack_rgba(OLD_COLOR)
        p[HG.OFFSET] = self.offset_px(height, len(history))
        return p

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
        if not self._bins_chosen and self.source.live:
            self._choose_bins()
        _, base, dtype = self._data_binding()
        # an older step enters the overlay once newer data is drawn (not when a frame repeats)
        if self._pending is not None and self._pending[0] != self.data_version:
            self._past.appendleft(self._pending[1:])
            self._pending = None
        self._frame_version = self.data_version
        self._frame_history = self._shared_grid_history()
        p = self.params(r.width, r.height, r.x, r.y, base, dtype, self._frame_history)
        if not self.source.array.size:
            p[HG.N] = 0
        self._upload("params", p)
        self._upload("history", self._frame_history if self._frame_history.size
                     else np.zeros(1, np.uint32))
        self._buffer("counts", self.bins * 4)
        self._buffer("stats", 32)
        self._dirty.clear()
        if getattr(self, "_recorded_n", None) != self.source.array.size:
            self.stale = True

    def record_reads(self, rec) -> None:
        b = self._buffers
        self._drop_sets()
        count = pipeline(self.device, "histogram_count", ["uniform"] + ["buffer"] * 3).bind(
            [b["params"], self._bound["data"], b["counts"], b["stats"]])
        top = pipeline(self.device, "histogram_max", ["uniform"] + ["buffer"] * 2).bind(
            [b["params"], b["counts"], b["stats"]])
        raster = pipeline(self.device, "histogram_raster", ["uniform"] + ["buffer"] * 3 + ["image"]).bind(
            [b["params"], b["counts"], b["stats"], b["history"], self.target])
        self._sets = [count, top, raster]
        rec.fill(b["counts"], 0)
        rec.fill(b["stats"], 0)
        rec.barrier()
        rec.dispatch(count, *groups_1d(-(-self.source.array.size // PER_INVOCATION)))
        self._recorded_n = self.source.array.size

    def record(self, rec) -> None:
        """The tallest-bin and raster passes read only the counts, not the live tensor."""
        rec.dispatch(self._sets[1], 1)
        rec.barrier()
        rec.dispatch(self._sets[2], -(-self.rect.width // 16), -(-self.rect.height // 16))
        self.stale = False

    def finish(self) -> None:
        self.stats = dict(zip(STAT_NAMES, self._stat_words(5), strict=True))
        self.counts = self._buffers["counts"].view(np.uint32, self.bins).copy()
        if self.history:
            self._pending = (self._frame_version, self.counts, self._frame_grid)

    def _grid(self) -> tuple:
        """The bin grid counts are made on: (lo, hi, bins) as the shader receives them."""
        lo, hi = self.range
        return float(F32(lo)), float(F32(hi)), self.bins

    def _shared_grid_history(self) -> np.ndarray:
        """The older steps to overlay: the newest ones binned on the current grid, up to the
        first that was binned on another (an auto range that moved, or bins chosen later). Counts
        from another grid are not comparable bin for bin and the raw values are gone, so they
        are not drawn; :attr:`history_note` says how many were left out, in the title bar."""
        self.history_note = ""
        grid = self._frame_grid = self._grid()  # the grid this frame counts on
        if not (self.history and self._past):
            return np.zeros((0, self.bins), np.uint32)
        kept = []
        for counts, g in list(self._past)[: self.history]:
            if g != grid:
                break
            kept.append(counts)
        dropped = min(self.history, len(self._past)) - len(kept)
        if dropped:
            self.history_note = (f"{dropped} older step{'s' if dropped > 1 else ''} not overlaid: "
                                 "binned over another range  ")
        return np.stack(kept) if kept else np.zeros((0, self.bins), np.uint32)

    # -- the numpy twin ---------------------------------------------------------------------------------
    def reference(self, width: int, height: int) -> np.ndarray:
        rgba, _ = self.reference_with_stats(width, height)
        return rgba

    def count(self) -> tuple[np.ndarray, dict]:
        """Bin counts and special-value counts of the current values, as the GPU computes them."""
        p = self.params(1, 1)
        lo, scale, hi = (np.uint32(p[k]).view(F32) for k in (HG.LO, HG.SCALE, HG.HI))
        v = self.data
        cls = _exact.classify(v)
        finite = cls == _exact.FINITE
        u = _exact.ftz(np.where(finite, v, F32(0)))
        below, above = finite & (u < lo), finite & ~(u < lo) & (u > hi)
        inside = finite & ~below & ~above
        with np.errstate(all="ignore"):
            t = _exact.ftz(_exact.ftz(u[inside] - lo) * scale)
        b = np.where(t >= F32(self.bins), F32(self.bins - 1), t).astype(np.int64)
        counts = np.bincount(b, minlength=self.bins).astype(np.uint32)
        stats = {"nan": int((cls == _exact.NAN).sum()), "posinf": int((cls == _exact.POSINF).sum()),
                 "neginf": int((cls == _exact.NEGINF).sum()), "below": int(below.sum()),
                 "above": int(above.sum())}
        return counts, stats

    def reference_with_stats(self, width: int, height: int):
        counts, stats = self.count()
        history = self._frame_history
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
