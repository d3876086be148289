"""The curve view: a 1-D trace (a loss, a norm, one unit's activation over time).

The raw trace is always drawn. With more samples than pixel columns each
column shows the min..max band of its samples, so no spike disappears in the
downsampling; with fewer, the line between values interpolated at each column.
``smoothing=alpha`` adds an exponential moving average as a second line on
top, debiased as Adam's moments are (``1 / (1 - alpha^t)``, so it starts at the
first sample and does not lag above a falling loss): the raw trace stays
visible around it and its values are untouched. NaN
and Inf samples are not drawn (a column of only missing samples is an honest
gap) and are counted. ``log_y=True`` draws every value at its log2 (a loss falling
from 3 to 2e-4 stays readable); values <= 0 are not drawn and are counted. With room
for them, a gutter carries the axes: tick marks and labels at "nice" values on y and
at sample indices on x. :meth:`Curve.reference` is the numpy twin.

Everything that depends on the values is computed on the device in the frame
that draws them: the value range (the heatmap's stats pass, or on a log axis
curve_logstats.comp, then the resolve pass), the EMA and the last finite sample
(curve_smooth.comp, a scan of the recurrence's maps), the ticks and their labels (curve_ticks.comp,
from the range the frame resolved; curve_axes.comp draws them); the title shows
what the frame read back.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .. import chrome, glyphs
from .._arrays import as_float32
from . import _curveaxes as axes_, _exact
from ..engine.shaders.params import RANGE as RG, ParamValues
from ._curveaxes import CURVE as CV, CURVE_PASSES
from ._base import RangedView, groups_1d, pipeline, range_mode, record_range_pass, resolve_range
from ._registry import Sample, register_view
from ._curvescan import ema32, ema_weights, scan_tiles  # the twin's EMA (scan), used here
from ._source import Source
from .heatmap import HEATMAP as HM, record_stats_pass

F32 = np.float32
NO_ROWS = 0xFFFFFFFF

BACKGROUND = (22, 22, 26, 255)
RAW_COLOR = (120, 160, 200, 255)
SMOOTH_COLOR = (255, 127, 14, 255)
TEXT_COLOR = chrome.DIM  # tick labels
AXIS_COLOR = (90, 90, 100, 255)  # axis lines and tick marks
GRID_COLOR = (38, 38, 45, 255)  # grid lines across the plot at the ticks, under the trace
Y_CHARS = 7  # the y gutter's width in glyph cells: the longest y label drawn
MIN_PLOT_W = 64  # a panel narrower than its gutter and this draws no axes


@lru_cache(maxsize=1)
def _label_glyphs() -> tuple[int, int, int, int]:
    """The atlas's glyph indices of '0' (the digits follow it), '.', the minus sign and 'e'."""
    return tuple(int(g) for g in glyphs.encode("0.−e"))


@register_view("curve", block=CV, passes=("heatmap_stats", "range_resolve", *CURVE_PASSES),
               inputs=("data",), tests=("tests/test_curve_exact.py", "tests/test_ranges_on_device.py",
                                        "tests/test_ranges_discrete.py"), cli=True,
               sample=Sample((500,), (200, 100)))
class Curve(RangedView):
    """A trace of values over their index (a step axis).

    Parameters
    ----------
    data : array-like, 1-D (any shape is flattened)
    value_range : "auto" | "symmetric" | (lo, hi)
        With ``log_y``: ``"auto"`` (over the values > 0) or ``(lo, hi)`` with ``0 < lo``.
    smoothing : float, optional
        EMA weight in (0, 1) for a smoothed line drawn over the raw trace.
    log_y : bool
        Draw the values on a log axis (the dashboard's name); values <= 0 are not drawn and
        are counted (``stats["nonpositive"]``, on the title).
    axes : bool
        Draw the axes (ticks and labels in a gutter left of and below the trace) when the
        panel has room for them.
    """

    def __init__(self, data=None, *, value_range="auto", smoothing: float | None = None,
                 log_y: bool = False, axes: bool = True):
        super().__init__()
        resolve_range(np.zeros(1, F32), value_range)
        if smoothing is not None and not 0.0 < smoothing < 1.0:
            raise ValueError(f"smoothing must be in (0, 1) (an EMA weight), got {smoothing!r}")
        if log_y:
            mode, lo, _ = range_mode(value_range)
            if mode == RG.MODE_SYMMETRIC or (mode == RG.MODE_FIXED and not lo > 0):
                raise ValueError(f"a log axis draws values > 0: value_range {value_range!r} must be "
                                 "'auto' or (lo, hi) with lo > 0 (or leave log_y off)")
        self.log_y, self.axes = bool(log_y), bool(axes)
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
        return ema32(self.data, self.smoothing, self.log_y)

    def gutter(self, width: int, height: int) -> tuple[int, int]:
        """(width of the y gutter, height of the x gutter) in a ``width x height`` panel: (0, 0)
        without axes, or when the plot would be narrower than ``MIN_PLOT_W`` or lower than two
        glyph cells."""
        cw, ch = chrome.cell()
        gw, gh = Y_CHARS * cw + CV.TICK_LEN + 2, ch + CV.TICK_LEN + 1
        if not self.axes or width - gw < MIN_PLOT_W or height - gh < 2 * ch:
            return 0, 0
        return gw, gh

    def range_last(self) -> int:
        if self.rect is None:
            return 1
        return max(self.rect.height - self.gutter(self.rect.width, self.rect.height)[1] - 1, 1)

    def range_spec(self) -> tuple[int, float, float]:
        """(mode, fixed lo, fixed hi) of the range in axis units: a fixed range on a log axis
        is resolved from the log2 of its ends (the twin's :func:`_curveaxes.log2_exact`)."""
        mode, lo, hi = range_mode(self.value_range)
        if self.log_y and mode == RG.MODE_FIXED:
            lo, hi = float(axes_.log2_exact(F32(lo))), float(axes_.log2_exact(F32(hi)))
        return mode, lo, hi

    def on_axis(self, values) -> np.ndarray:
        """The values as the trace draws them: themselves, or on a log axis their log2 (NaN
        for a value <= 0)."""
        return axes_.log2_values(values) if self.log_y else np.asarray(values, F32).reshape(-1)

    def reference_range(self, values=None, last=None) -> tuple:
        mode, flo, fhi = self.range_spec()
        kmin, kmax = (_exact.NO_KEY, 0) if mode == RG.MODE_FIXED else _exact.finite_keys(
            self.on_axis(self.data if values is None else values))
        return _exact.device_range(mode, kmin, kmax, flo, fhi, self.range_last() if last is None else last)

    def params(self, width: int, height: int, rect_x: int = 0, rect_y: int = 0, base: int = 0,
               dtype: int = 0) -> ParamValues:
        n = self.source.array.size
        gw, gh = self.gutter(width, height)
        pw, ph = width - gw, height - gh
        cw, ch = chrome.cell()
        widest = min(CV.AX_CHARS, len(str(max(n - 1, 0))))  # no x label is longer
        g_zero, g_dot, g_minus, g_e = _label_glyphs()
        rgba = _exact.pack_rgba
        p = CV.values(
            n=n, base=base, dtype=dtype, w=pw, h=ph, rect_x=rect_x + gw, rect_y=rect_y,
            step=(n - 1) / (pw - 1) if pw > 1 and n > 1 else 0.0,
            series=0 if n == 0 else (2 if self.smoothing is not None else 1),
            bg=rgba(BACKGROUND), color0=rgba(RAW_COLOR), color1=rgba(SMOOTH_COLOR),
            axes=int(gw > 0), full_w=width, full_h=height, gutter_w=gw, gutter_h=gh,
            yticks=max(1, min(CV.AX_TICKS - 1, ph // (3 * ch // 2))),
            xticks=max(1, min(CV.AX_TICKS - 1, pw // ((widest + 2) * cw))),
            ychars=Y_CHARS, xchars=CV.AX_CHARS, cell_w=cw, cell_h=ch, text=rgba(TEXT_COLOR),
            axis=rgba(AXIS_COLOR), grid=rgba(GRID_COLOR), g_zero=g_zero, g_dot=g_dot, g_minus=g_minus,
            g_e=g_e, tiles=scan_tiles(n))
        if self.smoothing is not None:
            alpha, beta = ema_weights(self.smoothing)
            p.set(alpha=alpha, beta=beta)
        return p

    # -- drawable protocol ----------------------------------------------------------------------------
    def legend(self) -> list:
        n = self.source.array.size
        last = self.last_value if self.shown_range is not None else self._reference_last()
        nonpos = self.stats.get("nonpositive", 0)
        warn = [(f"{nonpos} ≤ 0 not drawn (log y)  ", chrome.WARNING)] if nonpos else []
        if last is None:
            return [*warn, (f"{n} samples, none finite" if n else "no samples", chrome.DIM)]
        lo, hi = self.range
        if self.log_y:  # the range is in log2 units: state it in values
            lo, hi = 2.0 ** lo, 2.0 ** hi
        items = [*warn, (f"last {chrome.number(last)} · "
                         f"y {chrome.number(lo)} … {chrome.number(hi)}{' log' if self.log_y else ''}",
                         chrome.DIM)]
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
        """The heatmap stats pass's parameters (a linear axis): the values' finite min/max."""
        lo, hi = self.count_bounds()
        return HM.values(n=self.source.array.size, base=base, dtype=dtype, lo=lo, hi=hi)

    def prepare(self) -> None:
        r = self.rect
        _, base, dtype = self._data_binding()
        self._upload("params", self.params(r.width, r.height, r.x, r.y, base, dtype))
        if not self.log_y:
            self._upload("stats_params", self._stats_params(base, dtype))
        self._upload("range_params", self._range_params())
        n = self.source.array.size
        self._buffer("smooth", 4 * n if self.smoothing is not None and n else 16, host_visible=False)
        self._buffer("scan", 4 * CV.SC_WORDS * max(1, scan_tiles(n)), host_visible=False)
        self._buffer("columns", 2 * self.rect.width * 4, host_visible=False)
        self._buffer("ticks", 4 * (CV.AX_SIZE + r.width + r.height), host_visible=False)
        if "atlas" not in self._buffers:
            self._upload("atlas", glyphs.atlas()[0].astype(np.uint32))
        self._buffer("stats", 4 * CV.CS_WORDS)
        self._dirty.clear()
        if getattr(self, "_recorded", None) != (n, self.rect.width, self.rect.height):
            self.stale = True

    def _specialization(self, stage: int = 0) -> dict:
        """The constants folded into the curve's pipelines: the log axis, the scan's stage."""
        return CV.specialize(SPEC_LOGY=int(self.log_y), SPEC_STAGE=stage)

    def record_reads(self, rec) -> None:
        """The value range, the EMA, the columns and the ticks read the values: the first
        submission."""
        b = self._buffers
        self._drop_sets()
        data = self._bound["data"]
        r = self.rect
        n = self.source.array.size
        gw, gh = self.gutter(r.width, r.height)
        pw, ph = r.width - gw, r.height - gh
        spec = self._specialization
        if self.log_y:
            stats = pipeline(self.device, "curve_logstats", spec()).bind(params=b["params"], data=data,
                                                                         stats=b["stats"])
        else:
            stats = pipeline(self.device, "heatmap_stats").bind(params=b["stats_params"], data=data,
                                                                stats=b["stats"])
        resolve = pipeline(self.device, "range_resolve").bind(params=b["range_params"], stats=b["stats"])
        scan = [pipeline(self.device, "curve_smooth", spec(stage)).bind(
            params=b["params"], data=data, smoothed=b["smooth"], stats=b["stats"], scan=b["scan"])
            for stage in range(3)]
        cols = pipeline(self.device, "curve_columns", spec()).bind(
            params=b["params"], data=data, smoothed=b["smooth"], columns=b["columns"], stats=b["stats"])
        raster = pipeline(self.device, "curve_raster").bind(params=b["params"], columns=b["columns"],
                                                            ticks=b["ticks"], target=self.target)
        ticks = pipeline(self.device, "curve_ticks", spec()).bind(params=b["params"], stats=b["stats"],
                                                                  ticks=b["ticks"])
        axes = pipeline(self.device, "curve_axes").bind(params=b["params"], ticks=b["ticks"], atlas=b["atlas"],
                                                        target=self.target)
        self._sets = [raster, axes, cols, stats, resolve, ticks, *scan]
        tiles = scan_tiles(n)
        rec.fill(b["columns"], NO_ROWS)
        record_stats_pass(rec, stats, b["stats"], n)
        rec.mark("curve stats")
        if tiles:  # the EMA's scan and the last finite sample (curve_smooth.comp): a workgroup per tile
            rec.dispatch(scan[0], tiles)
            rec.barrier()
            rec.dispatch(scan[1], 1)
            if self.smoothing is not None:
                rec.barrier()
                rec.dispatch(scan[2], tiles)
            rec.mark("curve smoothing")
        record_range_pass(rec, resolve)
        # COLUMN_GROUP_MIN samples a column or more: a workgroup per column; fewer: an invocation
        rec.dispatch(cols, pw if n >= CV.COLUMN_GROUP_MIN * pw else -(-pw // 64), 2)
        rec.mark("curve columns")
        if gw:
            rec.dispatch(ticks, 1)
            rec.mark("curve ticks")
        self._recorded = (n, r.width, r.height)
        self._axes = (gw, gh, pw, ph)

    def record(self, rec) -> None:
        gw, _, pw, ph = self._axes
        rec.dispatch(self._sets[0], -(-pw // 16), -(-ph // 16))
        if gw:  # the gutters' pixels, numbered (curve_axes.comp)
            rec.dispatch(self._sets[1], *groups_1d(gw * self.rect.height + pw * self._axes[1], 64))
        self.stale = False

    def finish(self) -> None:
        s = self._stat_words(CV.CS_WORDS)
        self.stats = {"nan": s[CV.CS_NAN], "inf": s[CV.CS_INF]}
        if self.log_y:
            self.stats["nonpositive"] = s[CV.CS_NONPOS]
        self._read_range(s)
        # the last finite sample the frame read (the title's readout); None when there is none
        self.last_value = (float(np.uint32(s[CV.CS_LAST]).view(F32)) if s[CV.CS_LAST_INDEX] else None)

    # -- the numpy twin -----------------------------------------------------------------------------------
    def reference(self, width: int, height: int) -> np.ndarray:
        rgba, _ = self.reference_with_stats(width, height)
        return rgba

    def reference_ticks(self, width: int, height: int) -> tuple[list, list]:
        """The ticks curve_ticks.comp chooses for the current values in a ``width x height``
        panel: ([(row, label)], [(column, label)]), a label None when it is not drawn."""
        p = self.params(width, height)
        pw, ph = p["w"], p["h"]
        lo, hi, scale = self.reference_range(self.data, last=max(ph - 1, 1))
        ticks = axes_.log_ticks if self.log_y else axes_.linear_ticks
        return (ticks(lo, hi, scale, ph - 1, p["yticks"], Y_CHARS),
                axes_.sample_ticks(p["n"], pw, p["xticks"], CV.AX_CHARS))

    def reference_with_stats(self, width: int, height: int):
        p = self.params(width, height)
        gw, pw, ph = p["gutter_w"], p["w"], p["h"]
        ticks = self.reference_ticks(width, height) if gw else ([], [])
        plot, stats = self._reference_plot(p, pw, ph, ticks)
        out = np.full((height, width), p["bg"], np.uint32)
        if gw:
            self._reference_axes(out, p, *ticks)
        out[:ph, gw:] = plot
        if self.log_y:
            stats["nonpositive"] = int(((_exact.classify(self.data) == _exact.FINITE)
                                        & ~(_exact.ftz(self.data) > 0)).sum())
        return _exact.unpack_rgba(out.astype(np.uint32)), stats

    def _reference_axes(self, out: np.ndarray, p, yticks: list, xticks: list) -> None:
        """Draw the gutter into ``out`` (packed colours) as curve_axes.comp does: in reverse of
        the shader's order of precedence, so that the first it finds is painted last."""
        gw, ph, width = p["gutter_w"], p["h"], p["full_w"]
        cw, ch, tick = p["cell_w"], p["cell_h"], CV.TICK_LEN
        atlas = glyphs.atlas()[0].astype(np.uint32)
        bg, fg, axis = (np.uint32(p[k]) for k in ("bg", "text", "axis"))

        def label(text, x0, y0):
            if text is None:
                return
            cov = atlas[glyphs.encode(text)].transpose(1, 0, 2).reshape(ch, len(text) * cw)
            w = cov + (cov >> 7)
            chans = [((bg >> sh & 255) * (256 - w) + (fg >> sh & 255) * w) >> 8 for sh in (0, 8, 16)]
            out[y0:y0 + ch, x0:x0 + len(text) * cw] = (chans[0] | chans[1] << 8 | chans[2] << 16
                                                       | np.uint32(0xFF000000))

        for col, text in reversed(xticks):
            xx = gw + col
            if text is not None:
                lw = len(text) * cw
                label(text, min(max(xx - lw // 2, 0), width - lw), ph + 1 + tick)
            out[ph + 1:ph + 1 + tick, xx] = axis
        for row, text in reversed(yticks):  # a label owns its rows left of the tick marks
            yy = ph - 1 - row
            y0 = min(max(yy - ch // 2, 0), ph - ch)
            out[y0:y0 + ch, :gw - 1 - tick] = bg
            if text is not None:
                label(text, gw - 2 - tick - len(text) * cw, y0)
        for row, _ in yticks:
            out[ph - 1 - row, gw - 1 - tick:gw - 1] = axis
        out[:ph + 1, gw - 1] = axis
        out[ph, gw - 1:] = axis

    def _reference_plot(self, p, width: int, height: int, ticks=([], [])):
        """The plot area (packed colours) and the NaN/Inf counts, as curve_columns.comp and
        curve_raster.comp make them; grid lines at ``ticks`` (:meth:`reference_ticks`)."""
        step = F32(p["step"])
        lo, _hi, scale = self.reference_range(self.data, last=max(height - 1, 1))
        n = p["n"]
        series = [self.on_axis(self.data)] + ([self._smooth()] if self.smoothing is not None and n else [])
        raw = _exact.classify(self.data)
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
                        stats["nan"] += int((own & ~ok & (raw[idx] == _exact.NAN)).sum())
                        stats["inf"] += int((own & ~ok & (raw[idx] != _exact.NAN)
                                             & (raw[idx] != _exact.FINITE)).sum())
                    if ok.any():
                        lo_row, hi_row = int(rows[idx][ok].min()), int(rows[idx][ok].max())
                else:
                    if k == 0 and c < n:  # fewer samples than columns: column c counts sample c
                        stats["nan"] += int(raw[c] == _exact.NAN)
                        stats["inf"] += int(raw[c] in (_exact.POSINF, _exact.NEGINF))
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
        out[[height - 1 - row for row, _ in ticks[0]], :] = np.uint32(p["grid"])
        out[:, [col for col, _ in ticks[1]]] = np.uint32(p["grid"])
        colors = (np.uint32(p["color0"]), np.uint32(p["color1"]))
        for k, span in enumerate(spans):
            valid = span != NO_ROWS
            lo_r = (span & np.uint64(0xFFFF)).astype(np.int64)[None, :]
            hi_r = (span >> np.uint64(16)).astype(np.int64)[None, :]
            out = np.where(valid[None, :] & (up >= lo_r) & (up <= hi_r), colors[k], out)
        return out, stats


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
