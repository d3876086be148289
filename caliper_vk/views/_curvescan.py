"""The curve view's EMA as curve_smooth.comp computes it, bit for bit: a scan of the
recurrence's affine maps in tiles of ``SC_TILE`` samples (lanes of ``SC_PER_LANE`` composed in
order, a Hillis-Steele scan over the lanes, the tiles' carries by the same scan), then each
lane's samples in order from its carry, debiased. The numpy twin of :mod:`.curve`'s smoothing.
"""

from __future__ import annotations

import numpy as np

from . import _curveaxes as axes_, _exact
from ._curveaxes import CURVE as CV

F32 = np.float32


def scan_tiles(n: int) -> int:
    """Tiles of ``CV.SC_TILE`` samples of the EMA's scan (curve_smooth.comp) over ``n`` samples."""
    return -(-n // CV.SC_TILE)


def _compose(a, b, a2, b2) -> tuple:
    """``compose`` in curve_smooth.comp, elementwise: the map ``(a, b)`` then ``(a2, b2)``, i.e.
    ``(a2 * a, a2 * b + b2)``, each product and sum flushed."""
    ftz = _exact.ftz
    return ftz(a2 * a), ftz(ftz(a2 * b) + b2)


def _lane_maps(ea, eb) -> tuple:
    """Per tile (rows of ``ea``/``eb``, ``SC_TILE`` maps each): the map of each lane's
    ``SC_PER_LANE`` maps composed in order, then the inclusive Hillis-Steele scan over the lanes
    (``lane_scan``): arrays of shape (tiles, SC_LANES)."""
    lanes, per = CV.SC_LANES, CV.SC_PER_LANE
    ea, eb = ea.reshape(-1, lanes, per), eb.reshape(-1, lanes, per)
    a, b = np.ones(ea.shape[:2], F32), np.zeros(ea.shape[:2], F32)
    for k in range(per):
        a, b = _compose(a, b, ea[:, :, k], eb[:, :, k])
    d = 1
    while d < lanes:
        na, nb = _compose(a[:, :-d], b[:, :-d], a[:, d:], b[:, d:])
        a, b = a.copy(), b.copy()
        a[:, d:], b[:, d:] = na, nb
        d *= 2
    return a, b


def _lane_carries(ka, kb, ha, hb) -> tuple:
    """The map before each lane's first element: the carry ``(ka, kb)`` (per tile), then the
    lanes before it (the scanned ``ha``/``hb``; the identity before lane 0)."""
    ca = np.concatenate([np.ones((ha.shape[0], 1), F32), ha[:, :-1]], axis=1)
    cb = np.concatenate([np.zeros((hb.shape[0], 1), F32), hb[:, :-1]], axis=1)
    return _compose(np.asarray(ka, F32).reshape(-1, 1), np.asarray(kb, F32).reshape(-1, 1), ca, cb)


def _tile_carries(ta, tb) -> tuple:
    """Stage 1 of curve_smooth.comp (``carries``): the map of every tile before each tile, from
    the tiles' maps, scanned ``SC_TILE`` at a time as the tiles' samples are, with a carry from one
    segment to the next."""
    tiles, tile, per = ta.size, CV.SC_TILE, CV.SC_PER_LANE
    segs = -(-tiles // tile)
    sa = np.ones(segs * tile, F32)
    sb = np.zeros(segs * tile, F32)
    sa[:tiles], sb[:tiles] = ta, tb
    ha, hb = _lane_maps(sa, sb)
    outa, outb = np.empty(segs * tile, F32), np.empty(segs * tile, F32)
    ka, kb = F32(1.0), F32(0.0)
    for s in range(segs):
        ca, cb = _lane_carries(ka, kb, ha[s:s + 1], hb[s:s + 1])
        ca, cb = ca[0], cb[0]
        ea = sa[s * tile:(s + 1) * tile].reshape(CV.SC_LANES, per)
        eb = sb[s * tile:(s + 1) * tile].reshape(CV.SC_LANES, per)
        for k in range(per):
            outa[s * tile + k:(s + 1) * tile:per], outb[s * tile + k:(s + 1) * tile:per] = ca, cb
            ca, cb = _compose(ca, cb, ea[:, k], eb[:, k])
        ka, kb = (F32(x[0]) for x in _compose(np.array([ka]), np.array([kb]), ha[s, -1:], hb[s, -1:]))
    return outa[:tiles], outb[:tiles]


def ema_weights(alpha: float) -> tuple:
    """(alpha, 1 - alpha) as the float32 words the smoothing pass multiplies by."""
    return F32(alpha), F32(1.0 - float(F32(alpha)))


def ema32(values: np.ndarray, alpha: float, log_y: bool = False) -> np.ndarray:
    """The debiased EMA curve_smooth.comp computes, bit for bit: ``m_k = alpha * m_(k-1) +
    (1 - alpha) * x_k`` from ``m_0 = 0`` and ``y_k = m_k * (1 / (1 - alpha^k))`` over the finite
    samples in float32, each product and sum flushed, the reciprocal by
    :func:`~caliper_vk.views._exact.recip_unit`; NaN at non-finite samples. As the shader, a scan
    of the maps ``(alpha, (1 - alpha) * x)`` with its combination tree: tiles of ``SC_TILE``
    samples, ``SC_PER_LANE`` per lane composed in order, a Hillis-Steele scan over the lanes, the
    tiles' carries by the same scan (:func:`_tile_carries`), then each lane's samples in order from
    its carry. ``log_y``: the log2 of each y (:func:`_curveaxes.log2_values`), NaN where y <= 0."""
    a, b = ema_weights(alpha)
    v = np.asarray(values, F32).reshape(-1)
    n = v.size
    out = np.full(v.shape, np.nan, F32)
    if not n:
        return out
    tiles = scan_tiles(n)
    x = np.full(tiles * CV.SC_TILE, np.nan, F32)
    x[:n] = v
    finite = _exact.classify(x) == _exact.FINITE
    ftz = _exact.ftz
    with np.errstate(all="ignore"):
        ea = np.where(finite, a, F32(1.0)).astype(F32)
        eb = np.where(finite, ftz(b * ftz(np.where(finite, x, F32(0.0)))), F32(0.0)).astype(F32)
        ha, hb = _lane_maps(ea, eb)  # stage 0: each tile's map is its last lane's
        ka, kb = _tile_carries(ha[:, -1], hb[:, -1])  # stage 1
        p, m = _lane_carries(ka, kb, ha, hb)  # stage 2
        lanes, per = CV.SC_LANES, CV.SC_PER_LANE
        ea, eb, fin = (z.reshape(tiles, lanes, per) for z in (ea, eb, finite))
        y = np.full((tiles, lanes, per), np.nan, F32)
        for k in range(per):
            p, m = _compose(p, m, ea[:, :, k], eb[:, :, k])
            ok = fin[:, :, k]
            d = ftz(F32(1.0) - p[ok])
            y[:, :, k][ok] = ftz(m[ok] * _exact.recip_unit(d))
    y = y.reshape(-1)[:n]
    out[:] = axes_.log2_values(y) if log_y else y
    return out
