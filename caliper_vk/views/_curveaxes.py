"""The curve's axes: tick values, their labels and the gutter they are drawn in, as the device
draws them (``engine/shaders/curve_ticks.comp`` chooses the ticks from the range the frame
resolved, ``curve_axes.comp`` draws the gutter), in numpy, bit for bit.

Y ticks are "nice" values ``k × m × 10^e`` (``m`` in 1, 2, 5) chosen from the (lo, hi) the
frame's resolve pass wrote, so the labels always state the range the trace was drawn with; on a
log axis (values drawn as their ``log2``) they sit at ``m × 10^k`` for ``m`` in 1..9, in 1, 2, 5,
or at every ``d``-th decade, whichever fits. X ticks are sample indices (``k × m × 10^e``, whole
numbers). A label is made from the integers ``(N, E)`` of ``N × 10^E`` (never from a float), so
shader and twin spell it alike: plain digits for ``10^-3 <= |value| < 10^5``, else ``2.5e−4``;
a label longer than its gutter allows is not drawn.
"""

from __future__ import annotations

import numpy as np

from ..engine.shaders.params import ParamBlock
from ..engine.shaders.passes import Pass, buffer, image, params, ro, wo
from . import _exact
from ._exact import F32, ftz

# The curve view's block and passes live here, the lowest of its modules (curve.py and
# _curvescan.py import this one).
# -- the declaration: read by the build from this file (docs/architecture.md, "A view is one unit") --
CURVE = ParamBlock("curve_params", "CV", [
    # W, H, RECT_X, RECT_Y: the plot area (the trace's columns and rows), inside the panel
    "N", "BASE", "DTYPE", "W", "H", "RECT_X", "RECT_Y",
    ("STEP", "float"), "SERIES", "BG", "COLOR0", "COLOR1",
    ("ALPHA", "float"), ("BETA", "float"),  # the EMA's weights: alpha and 1 - alpha (curve_smooth.comp)
    # The axes (curve_ticks.comp, curve_axes.comp): AXES 1 when the panel has room for them; the
    # panel is FULL_W x FULL_H with the plot at (GUTTER_W, 0); at most YTICKS / XTICKS intervals
    # between ticks, labels of at most YCHARS / XCHARS characters; glyph cells CELL_W x CELL_H;
    # the glyph indices of '0' (then '1' .. '9'), '.', the minus sign and 'e'.
    "AXES", "FULL_W", "FULL_H", "GUTTER_W", "GUTTER_H", "YTICKS", "XTICKS", "YCHARS", "XCHARS",
    "CELL_W", "CELL_H", "TEXT", "AXIS", "G_ZERO", "G_DOT", "G_MINUS", "G_E",
    "GRID",  # the grid lines across the plot at the ticks (curve_raster.comp), under the trace
    # The EMA's scan (curve_smooth.comp): TILES tiles of SC_TILE samples
    "TILES",
], constants={  # stats words after the heatmap stats pass's (HEATMAP.ST_WORDS) and its range
    "CS_NAN": "10", "CS_INF": "11", "CS_LAST_INDEX": "12", "CS_LAST": "13",
    "CS_NONPOS": "14",  # log-y: finite values <= 0 (not drawn)
    "CS_WORDS": "15",
    "NO_ROWS": "0xFFFFFFFFu",
    # curve_columns.comp: from this many samples a column (n >= COLUMN_GROUP_MIN * w) a workgroup
    # reduces each column, its lanes on adjacent samples; below, an invocation per column
    "COLUMN_GROUP_MIN": "64",
    # The tick buffer (curve_ticks.comp writes it, curve_axes.comp reads it): the y tick count, the
    # x tick count, then AX_TICKS y labels from word AX_Y and AX_TICKS x labels from word AX_X, each
    # AX_WORDS words: the tick's row (y) or column (x), its label's length (0: not drawn) and up to
    # AX_CHARS glyph indices.
    "AX_TICKS": "16u", "AX_CHARS": "8u", "AX_WORDS": "10u", "AX_Y": "2u", "AX_X": "162u", "AX_SIZE": "322u",
    "TICK_LEN": "3u",
    # then a word per panel row (from AX_SIZE) and per panel column: the label whose band holds it
    # (index + 1, 0: none), the offset into that band, and AX_MARK where a tick mark is
    "AX_OWNER": "0xFFu", "AX_MARK": "0x100u", "AX_OFFSET_SHIFT": "16u",
    # log2 of a mantissa (curve_log.glsl): log2(1 + u) = u * (C0 + C1 u + ... + C8 u^8) for u in
    # [-1/4, 1/2), a least-squares fit (about 2e-8 off before float32 rounding); log2(10), 1/log2(10)
    "LOG2_DEGREE": "8", "LOG2_C0": "0x3FB8AA3Bu", "LOG2_C1": "0xBF38AA5Cu", "LOG2_C2": "0x3EF63863u",
    "LOG2_C3": "0xBEB8964Fu", "LOG2_C4": "0x3E939451u", "LOG2_C5": "0xBE7975BEu", "LOG2_C6": "0x3E5DDBADu",
    "LOG2_C7": "0xBE2DA2CCu", "LOG2_C8": "0x3D941B9Au",
    "LOG2_10_BITS": "0x40549A78u", "INV_LOG2_10_BITS": "0x3E9A209Bu",
    # 2^u = 1 + u * (E0 + E1 u + ... + E5 u^5) for u in [0, 1) (curve_ticks.comp: a log range's
    # values, to choose ticks within a decade; about 5e-9 off before float32 rounding)
    "EXP2_E0": "0x3F317215u", "EXP2_E1": "0x3E75FED5u", "EXP2_E2": "0x3D634186u",
    "EXP2_E3": "0x3C1E9E34u", "EXP2_E4": "0x3AA2B764u", "EXP2_E5": "0x39648C8Eu",
    # the EMA's scan (curve_smooth.comp): a tile is SC_LANES lanes (the workgroup) of SC_PER_LANE
    # samples each; per tile SC_WORDS words: its map (alpha^t, then its EMA from zero), 1 + its
    # last finite index, and the carry into it (the map of every sample before it: alpha^t, m)
    "SC_LANES": "64", "SC_PER_LANE": "16", "SC_TILE": "1024",
    "SC_WORDS": "5",
}, specialization=[
    # 1: values drawn as their log2 (log2e in curve_log.glsl), those <= 0 not drawn. A constant,
    # not a word: a CPU implementation such as lavapipe runs both sides of a branch, so a word
    # would cost every sample the log2 on a linear axis too.
    ("SPEC_LOGY", 0),
    ("SPEC_STAGE", 0),  # curve_smooth.comp: which stage of the EMA's scan
])
CURVE_PASSES = (
    Pass("curve_axes", CURVE, [params(), ro("ticks"), ro("atlas", note="coverage per texel"), image()]),
    Pass("curve_columns", CURVE, [params(), ro("data"), ro("smoothed", "float"),
                                  buffer("columns", note="[series * width + column]"), buffer("stats")]),
    Pass("curve_logstats", CURVE, [params(), ro("data"), buffer("stats")]),
    Pass("curve_raster", CURVE, [params(), ro("columns"), ro("ticks"), image()]),
    Pass("curve_smooth", CURVE, [params(), ro("data"), wo("smoothed", "float"), buffer("stats"),
                                 buffer("scan", note="SC_WORDS per chunk")]),
    Pass("curve_ticks", CURVE, [params(), ro("stats"), buffer("ticks")]),
)
CV = CURVE

TICK = CV.TICK_LEN
LOG2_10 = np.uint32(CV.LOG2_10_BITS).view(F32)
INV_LOG2_10 = np.uint32(CV.INV_LOG2_10_BITS).view(F32)
LOG2_COEFFS = tuple(np.uint32(getattr(CV, f"LOG2_C{k}")).view(F32) for k in range(CV.LOG2_DEGREE + 1))
EXP2_COEFFS = tuple(np.uint32(getattr(CV, f"EXP2_E{k}")).view(F32) for k in range(6))


def f(x) -> np.float32:
    """One float32 result, flushed (a ``precise ... = ftz(...)`` in the shaders)."""
    return F32(ftz(F32(x)))


def log2_exact(v) -> np.float32:
    """``log2e`` in curve_ticks.glsl: log2 of a positive normal float32 without a transcendental:
    its exponent plus a polynomial in ``u = m - 1`` for the mantissa ``m`` in [0.75, 1.5), by
    Horner steps of flushed multiplies and adds (about 1e-6 off)."""
    b = int(np.asarray(F32(v)).view(np.uint32))
    e = (b >> 23) - 127
    mb = (b & 0x007FFFFF) | 0x3F800000
    if mb >= 0x3FC00000:  # m >= 1.5: take m / 2 (exact), one more in the exponent
        mb -= 0x00800000
        e += 1
    u = f(np.uint32(mb).view(F32) - F32(1.0))
    acc = LOG2_COEFFS[-1]
    for c in LOG2_COEFFS[-2::-1]:
        acc = f(f(acc * u) + c)
    return f(F32(e) + f(acc * u))


def exp2_exact(x) -> np.float32:
    """``exp2e`` in curve_ticks.comp: 2^x for a finite float32 x with + - * only (the values of a
    log range, to choose its ticks within a decade): 0 below the normal floats, the largest float
    above them."""
    x = F32(x)
    fl = np.floor(x)
    if fl < -126:
        return F32(0.0)
    if fl > 127:
        return _exact.FLT_MAX
    u = f(x - fl)
    acc = EXP2_COEFFS[-1]
    for c in EXP2_COEFFS[-2::-1]:
        acc = f(f(acc * u) + c)
    m = f(F32(1.0) + f(acc * u))
    mb = int(np.asarray(m).view(np.uint32))
    biased = (mb >> 23) + int(fl)
    if biased <= 0:
        return F32(0.0)
    if biased >= 255:
        return _exact.FLT_MAX
    return np.uint32((mb & 0x007FFFFF) | (biased << 23)).view(F32)


def log2_values(values: np.ndarray) -> np.ndarray:
    """:func:`log2_exact` of every finite positive value (flushed first); NaN elsewhere."""
    v = np.asarray(values, F32).reshape(-1)
    out = np.full(v.shape, np.nan, F32)
    pos = (_exact.classify(v) == _exact.FINITE) & (ftz(v) > 0)
    out[pos] = [log2_exact(x) for x in ftz(v[pos]).tolist()]
    return out


def spell(n: int, e: int, room: int) -> str | None:
    """The label of ``n × 10^e`` (integers), or None when it needs more than ``room`` characters."""
    if n == 0:
        return "0" if room >= 1 else None
    a = abs(n)
    while a % 10 == 0:
        a //= 10
        e += 1
    digits = str(a)
    d = len(digits)
    x = e + d - 1  # the decimal exponent of the leading digit
    if -3 <= x < 5:
        if e >= 0:
            text = digits + "0" * e
        elif d + e > 0:
            text = digits[:d + e] + "." + digits[d + e:]
        else:
            text = "0." + "0" * (-(d + e)) + digits
    else:
        text = digits[0] + ("." + digits[1:] if d > 1 else "") + "e" + ("−" if x < 0 else "") + str(abs(x))
    text = ("−" if n < 0 else "") + text
    return text if len(text) <= min(room, CV.AX_CHARS) else None


def linear_ticks(lo, hi, scale, last: int, intervals: int, room: int, at=None) -> list:
    """[(row, label)] of the y ticks over (lo, hi) (float32 words the resolve pass wrote). With
    ``at`` (a log axis whose range starts at ``at``): nice values over the range's values
    (lo, hi), each at the row of its log2, those <= 0 left out."""
    logv = at is not None
    lo, hi, scale = F32(lo), F32(hi), F32(scale)
    at = F32(at) if logv else lo
    with np.errstate(all="ignore"):
        span = f(hi - lo)
        if not (span > 0) or _exact.classify(span) != _exact.FINITE:
            return []
        nt = F32(intervals)
        p, ip, ex = F32(1.0), F32(1.0), 0
        for _ in range(80):
            if f(p * nt) >= span:
                break
            p, ip, ex = f(p * F32(10.0)), f(ip * F32(0.1)), ex + 1
        for _ in range(80):
            q = f(p * F32(0.1))
            if not f(q * nt) >= span:
                break
            p, ip, ex = q, f(ip * F32(10.0)), ex - 1
        q, iq = f(p * F32(0.1)), f(ip * F32(10.0))
        if f(f(q * F32(2.0)) * nt) >= span:
            s, inv, m, e = f(q * F32(2.0)), f(iq * F32(0.5)), 2, ex - 1
        elif f(f(q * F32(5.0)) * nt) >= span:
            s, inv, m, e = f(q * F32(5.0)), f(iq * F32(0.2)), 5, ex - 1
        else:
            s, inv, m, e = p, ip, 1, ex
        if not (s > 0) or _exact.classify(inv) != _exact.FINITE:
            return []
        est = f(lo * inv)
        if not abs(est) <= F32(4194304.0):  # 2^22: ticks this far from 0 need too many digits
            return []
        k = int(np.floor(est))
        for _ in range(4):
            if f(F32(k) * s) < lo:
                k += 1
        for _ in range(4):
            if f(F32(k - 1) * s) >= lo:
                k -= 1
        out = []
        for j in range(CV.AX_TICKS):
            v = f(F32(k + j) * s)
            if v > hi:
                break
            if not logv:
                out.append((int(_exact.lut_index(v, at, scale, last)), spell((k + j) * m, e, room)))
            elif v > 0:
                out.append((int(_exact.lut_index(log2_exact(v), at, scale, last)), spell((k + j) * m, e, room)))
    return out


def log_ticks(lo, hi, scale, last: int, intervals: int, room: int) -> list:
    """[(row, label)] of the y ticks over a log2 range (lo, hi): at ``m × 10^k``."""
    lo, hi, scale = F32(lo), F32(hi), F32(scale)
    with np.errstate(all="ignore"):
        span = f(hi - lo)
        if not (span > 0) or _exact.classify(span) != _exact.FINITE:
            return []
        decades = f(span * INV_LOG2_10)
        nt = F32(intervals)
        step, mantissas = 1, (1,)
        if f(decades * F32(9.0)) <= nt:
            mantissas = tuple(range(1, 10))
        elif f(decades * F32(3.0)) <= nt:
            mantissas = (1, 2, 5)
        else:
            for step in (1, 2, 5, 10, 20, 50, 100):
                if f(F32(step) * nt) >= decades:
                    break
        k = int(np.floor(f(lo * INV_LOG2_10))) - 1
        k -= k % step  # a multiple of the decade step (Python's floor modulo, as the shader's)
        out = []
        for _ in range(CV.AX_TICKS + 2):
            for m in mantissas:
                t = f(f(F32(k) * LOG2_10) + log2_exact(F32(m)))
                if lo <= t <= hi and len(out) < CV.AX_TICKS:
                    out.append((int(_exact.lut_index(t, lo, scale, last)), spell(m, k, room)))
            k += step
    if len(out) < 2:  # a range within a decade: nice values over its values
        return linear_ticks(exp2_exact(lo), exp2_exact(hi), scale, last, intervals, room, at=lo)
    return out


def sample_ticks(n: int, width: int, intervals: int, room: int) -> list:
    """[(column, label)] of the x ticks: whole sample indices ``j × m × 10^e`` in [0, n - 1]."""
    if n <= 0:
        return []
    span, p = n - 1, 1
    while p * intervals < span:
        p *= 10
    s, m, e = p, 1, len(str(p)) - 1
    if p >= 10:
        q = p // 10
        if 2 * q * intervals >= span:
            s, m, e = 2 * q, 2, e - 1
        elif 5 * q * intervals >= span:
            s, m, e = 5 * q, 5, e - 1
    out = []
    for j in range(CV.AX_TICKS):
        i = j * s
        if i > span:
            break
        out.append((sample_column(i, n, width), spell(j * m, e, room)))
    return out


def sample_column(i: int, n: int, width: int) -> int:
    """The plot column that draws sample ``i`` (curve_columns.comp's split of samples)."""
    if n >= width:
        return ((i + 1) * width - 1) // n
    return (2 * i * (width - 1) + (n - 1)) // (2 * (n - 1)) if n > 1 else 0
