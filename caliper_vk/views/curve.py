"""The curve view: a 1-D trace (a loss, a norm, one unit's activation over time).

The raw trace is always drawn. With more samples than pixel columns each
column shows the min..max band of its samples, so no spike disappears in the
downsampling; with fewer, the line between values interpolated at each column.
``smoothing=alpha`` adds an exponential moving average as a second line on
top, debiased as Adam's moments are (``1 / (1 - alpha^t)``, so it starts at the
first sample and does not lag above a falling loss): the raw trace stays
visible around it and its values are untouched. NaN
and Inf samples are not drawn (a column of only missing samples is an honest
gap) and are counted. :meth:`Curve.reference` is the numpy twin.

Everything that depends on the values is computed on the device in the frame
that draws them: the value range (the heatmap's stats pass, then the resolve
pass), the EMA and the last finite sample (curve_smooth.comp, one invocation in
sample order); the title shows what the frame read back.
"""

from __future__ import annotations

import numpy as np

from .. import chrome
from .._arrays import as_float32
from . import _exact
from ..engine.shaders.params import CURVE as CV, HEATMAP as HM, ParamValues
from ._base import RangedView, pipeline, record_range_pass, resolve_range
from ._registry import register_view
from ._source import Source
from .heatmap import record_stats_pass

F32 = np.float32
NO_ROWS = 0xFFFFFFFF

BACKGROUND = (22, 22, 26, 255)
RAW_COLOR = (120, 160, 200, 255)
SMOOTH_COLOR = (255, 127, 14, 255)


def ema_weights(alpha: float) -> tuple:
    """(alpha, 1 - alpha) as the float32 words the smoothing pass multiplies by."""
    return F32(alpha), F32(1.0 - float(F32(alpha)))


def ema32(values: np.ndarray, alpha: float) -> np.ndarray:
    """The debiased EMA curve_smooth.comp computes, bit for bit: ``m_k = alpha * m_(k-1) +
    (1 - alpha) * x_k`` from ``m_0 = 0`` and ``y_k = m_k * (1 / (1 - alpha^k))`` over the finite
    samples in float32, each product and sum flushed, the reciprocal by
    :func:`~caliper_vk.views._exact.recip_unit`; NaN at non-finite samples."""
    a, b = ema_weights(alpha)
    v = np.asarray(values, F32).reshape(-1)
    finite = _exact.classify(v) == _exact.FINITE
    x = _exact.ftz(np.where(finite, v, F32(0)))
    out = np.full(v.shape, np.nan, F32)
    idx = np.flatnonzero(finite)
    ftz, recip, one = _exact.ftz, _exact.recip_unit, F32(1.0)
    m, p = F32(0.0), F32(1.0)
    ys = []
    for i in idx.tolist():
        m = ftz(F32(ftz(F32(a * m)) + ftz(F32(b * x[i]))))
        p = ftz(F32(a * p))
        ys.append(ftz(F32(m * recip(ftz(F32(one - p))))))
    out[idx] = ys
    return out


@register_view("curve", block=CV, passes=("heatmap_stats", "range_resolve", "curve_smooth", "curve_columns",
                                         "curve_raster"), inputs=("data",),
               tests=("tests/test_curve_exact.py", "tests/test_ranges_on_device.py",
                      "tests/test_ranges_discrete.py"), cli=True)
class Curve(RangedView):
    """A trace of values over their index (a step axis).

    Parameters
    ----------
    data : array-like, 1-D (any shape is flattened)
    value_range : "auto" | "symmetric" | (lo, hi)
    smoothing : float, optional
        EMA weight in (0, 1) for a smoothed line drawn over the raw trace.
    """

    def __init__(self, data=None, *, value_range="auto", smoothing: float | None = None):
        super().__init__()
        resolve_range(np.zeros(1, F32), value_range)
        if smoothing is not None and not 0.0 < smoothing < 1.0:
            raise ValueError(f"smoothing must be in (0, 1) (an EMA weight), got {smoothing!r}")
        self.value_range, self.smoothing = value_range, smoothing
        self.source = Source(np.zeros(0, F32))
        self.last_value = None  # the last finite sample the last frame read (finish)
        if data is not None:
            self.set_data(data)

    def set_data(self, data) -> None:
        self.data_version += 1
        self._set_source(Source(np.ascontiguousarray(as_float32(data, "curve data").reshape(-1))))

    def set_source(self, source: Source) -> None:
        """Draw the trace straight from ``source`` (a live tensor; see ``caliper_vk.attach``)."""
        source.array = source.array.reshape(-1)
        self._set_source(source)

    def _smooth(self) -> np.ndarray:
        if self.smoothing is None:
            return np.zeros(0, F32)
        return ema32(self.data, self.smoothing)

    def range_last(self) -> int:
        return max(self.rect.height - 1, 1) if self.rect is not None else 1

    def params(self, width: int, height: int, rect_x: int = 0, rect_y: int = 0, base: int = 0,
               dtype: int = 0) -> ParamValues:
        n = self.source.array.size
        p = CV.values(n=n, base=base, dtype=dtype, w=width, h=height, rect_x=rect_x, rect_y=rect_y,
                      step=(n - 1) / (width - 1) if width > 1 and n > 1 else 0.0,
                      series=0 if n == 0 else (2 if self.smoothing is not None else 1),
                      bg=_exact.pack_rgba(BACKGROUND), color0=_exact.pack_rgba(RAW_COLOR),
                      color1=_exact.pack_rgba(SMOOTH_COLOR))
        if self.smoothing is not None:
            alpha, beta = ema_weights(self.smoothing)
            p.set(alpha=alpha, beta=beta)
        return p

    # -- drawable protocol ----------------------------------------------------------------------------
    def legend(self) -> list:
        n = self.source.array.size
        last = self.last_value if self.shown_range is not None else self._reference_last()
        if last is None:
            return [(f"{n} samples, none finite" if n else "no samples", chrome.DIM)]
        lo, hi = self.range
        items = [(f"last {chrome.number(last)} · "
                  f"y {chrome.number(lo)} … {chrome.number(hi)}", chrome.DIM)]
        if self.smoothing is not None:
            items += [("  ", chrome.DIM), chrome.Swatch(RAW_COLOR), (" raw ", chrome.DIM),
                      chrome.Swatch(SMOOTH_COLOR), (f" EMA {self.smoothing:g} (debiased)", chrome.DIM)]
        return items

    def _reference_last(self):
        """The last finite sample of the host values (before a frame has drawn them)."""
        data = self.data
        finite = np.flatnonzero(_exact.classify(data) == _exact.FINITE)
        return float(_exact.ftz(data[finite[-1]])) if finite.size else None

    def _stats_params(self, base: int, dtype: int) -> ParamValues:
        """The heatmap stats pass's parameters: the values' finite min/max for the range."""
        lo, hi = self.count_bounds()
        return HM.values(n=self.source.array.size, base=base, dtype=dtype, lo=lo, hi=hi)

    def prepare(self) -> None:
        r = self.rect
        _, base, dtype = self._data_binding()
        self._upload("params", self.params(r.width, r.height, r.x, r.y, base, dtype))
        self._upload("stats_params", self._stats_params(base, dtype))
        self._upload("range_params", self._range_params())
        n = self.source.array.size
        self._buffer("smooth", 4 * n if self.smoothing is not None and n else 16, host_visible=False)
        self._buffer("columns", 2 * self.rect.width * 4, host_visible=False)
        self._buffer("stats", 4 * CV.CS_WORDS)
        self._dirty.clear()
        if getattr(self, "_recorded_n", None) != n:
            self.stale = True

    def record_reads(self, rec) -> None:
        """The value range, the EMA and the columns read the values: the first submission."""
        b = self._buffers
        self._drop_sets()
        data = self._bound["data"]
        stats = pipeline(self.device, "heatmap_stats").bind(params=b["stats_params"], data=data,
                                                            stats=b["stats"])
        resolve = pipeline(self.device, "range_resolve").bind(params=b["range_params"], stats=b["stats"])
        smooth = pipeline(self.device, "curve_smooth").bind(params=b["params"], data=data,
                                                            smoothed=b["smooth"], stats=b["stats"])
        cols = pipeline(self.device, "curve_columns").bind(params=b["params"], data=data, smoothed=b["smooth"],
                                                           columns=b["columns"], stats=b["stats"])
        raster = pipeline(self.device, "curve_raster").bind(params=b["params"], columns=b["columns"],
                                                            target=self.target)
        self._sets = [cols, raster, stats, resolve, smooth]
        rec.fill(b["columns"], NO_ROWS)
        record_stats_pass(rec, stats, b["stats"], self.source.array.size)
        rec.dispatch(smooth, 1)
        record_range_pass(rec, resolve)
        rec.dispatch(cols, -(-self.rect.width // 64), 2)
        self._recorded_n = self.source.array.size

    def record(self, rec) -> None:
        rec.dispatch(self._sets[1], -(-self.rect.width // 16), -(-self.rect.height // 16))
        self.stale = False

    def finish(self) -> None:
        s = self._stat_words(CV.CS_WORDS)
        self.stats = {"nan": s[CV.CS_NAN], "inf": s[CV.CS_INF]}
        self._read_range(s)
        # the last finite sample the frame read (the title's readout); None when there is none
        self.last_value = (float(np.uint32(s[CV.CS_LAST]).view(F32)) if s[CV.CS_LAST_INDEX] else None)

    # -- the numpy twin -----------------------------------------------------------------------------------
    def reference(self, width: int, height: int) -> np.ndarray:
        rgba, _ = self.reference_with_stats(width, height)
        return rgba

    def reference_with_stats(self, width: int, height: int):
        p = self.params(width, height)
        step = F32(p["step"])
        lo, _hi, scale = self.reference_range(self.data, last=max(height - 1, 1))
        n = p["n"]
        series = [self.data] + ([self._smooth()] if self.smoothing is not None and n else [])
        stats = {"nan": 0, "inf": 0}
        ftz = _exact.ftz
        spans = []
        for k, values in enumerate(series if n else []):
            cls = _exact.classify(values)
            rows = np.where(cls == _exact.FINITE,
                            _exact.lut_index(ftz(np.where(cls == 0, values, F32(0))), lo, scale,
                                             height - 1), 0).astype(np.int64)
            span = np.full(width, NO_ROWS, np.uint64)
            for c in range(width):
                lo_row, hi_row = 0xFFFF, 0
                if n >= width:
                    a, b = c * n // width, (c + 1) * n // width
                    idx = np.arange(a, min(b, n - 1) + 1)
                    ok = cls[idx] == _exact.FINITE
                    if k == 0:
                        own = idx < b
                        stats["nan"] += int((own & (cls[idx] == _exact.NAN)).sum())
                        stats["inf"] += int((own & ~ok & (cls[idx] != _exact.NAN)).sum())
                    if ok.any():
                        lo_row, hi_row = int(rows[idx][ok].min()), int(rows[idx][ok].max())
                else:
                    if k == 0 and c < n:  # fewer samples than columns: column c counts sample c
                        stats["nan"] += int(cls[c] == _exact.NAN)
                        stats["inf"] += int(cls[c] in (_exact.POSINF, _exact.NEGINF))
                    v0 = _interp(values, cls, c, step, n)
                    v1 = _interp(values, cls, c + 1, step, n) if c + 1 < width else None
                    if v0 is not None:
                        lo_row = hi_row = int(_exact.lut_index(ftz(v0), lo, scale, height - 1))
                        if v1 is not None:
                            r1 = int(_exact.lut_index(ftz(v1), lo, scale, height - 1))
                            lo_row, hi_row = min(lo_row, r1), max(hi_row, r1)
                if lo_row != 0xFFFF:
                    span[c] = lo_row | (hi_row << 16)
            spans.append(span)
        up = (height - 1 - np.arange(height))[:, None]
        out = np.full((height, width), p["bg"], np.uint32)
        colors = (np.uint32(p["color0"]), np.uint32(p["color1"]))
        for k, span in enumerate(spans):
            valid = span != NO_ROWS
            lo_r = (span & np.uint64(0xFFFF)).astype(np.int64)[None, :]
            hi_r = (span >> np.uint64(16)).astype(np.int64)[None, :]
            out = np.where(valid[None, :] & (up >= lo_r) & (up <= hi_r), colors[k], out)
        return _exact.unpack_rgba(out.astype(np.uint32)), stats


def _interp(values, cls, c: int, step, n: int):
    """The value at column ``c`` interpolated as curve_columns.comp does, or None."""
    ftz = _exact.ftz
    x = ftz(F32(c) * step)
    i = min(int(x), n - 1)
    j = min(i + 1, n - 1)
    if cls[i] != _exact.FINITE or cls[j] != _exact.FINITE:
        return None
    a, b = ftz(values[i]), ftz(values[j])
    with np.errstate(all="ignore"):
        frac = ftz(x - F32(i))
        d = ftz(b - a)
        return ftz(a + ftz(d * frac))
