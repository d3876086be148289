"""numpy mirrors of ``engine/shaders/common.glsl`` (the exact-path helpers).

Every function here performs the same float32 operations, in the same order,
with the same flushes, as its GLSL namesake, so a view's numpy twin produces
the bytes its shader produces. Change both sides together.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32
EXP_MASK = np.uint32(0x7F800000)
MANT_MASK = np.uint32(0x007FFFFF)
SIGN_MASK = np.uint32(0x80000000)

FINITE, NAN, POSINF, NEGINF = 0, 1, 2, 3


def bits(v) -> np.ndarray:
    return np.asarray(v, dtype=F32).view(np.uint32)


def classify(v) -> np.ndarray:
    b = bits(v)
    special = (b & EXP_MASK) == EXP_MASK
    nan = special & ((b & MANT_MASK) != 0)
    out = np.zeros(b.shape, np.uint8)
    out[special] = np.where((b[special] & SIGN_MASK) != 0, NEGINF, POSINF)
    out[nan] = NAN
    return out


def ftz(v) -> np.ndarray:
    """Subnormals and -0 become +0 (``ftz`` in common.glsl)."""
    v = np.asarray(v, dtype=F32)
    return np.where((bits(v) & EXP_MASK) == 0, F32(0.0), v).astype(F32)


def orderable(v) -> np.ndarray:
    b = bits(v)
    return np.where((b & SIGN_MASK) != 0, ~b, b | SIGN_MASK).astype(np.uint32)


def from_orderable(k) -> np.ndarray:
    k = np.asarray(k, dtype=np.uint32)
    b = np.where((k & SIGN_MASK) != 0, k & np.uint32(0x7FFFFFFF), ~k).astype(np.uint32)
    return b.view(F32)


def lut_index(v, lo, scale, last: int) -> np.ndarray:
    """``round((v - lo) * scale)`` clamped to ``[0, last]`` for finite ``v``."""
    with np.errstate(all="ignore"):
        d = ftz(np.asarray(v, F32) - F32(lo))
        t = ftz(d * F32(scale))
        r = ftz(t + F32(0.5))
        mid = (t > 0) & (t < F32(last))
        idx = np.where(mid, r, F32(0)).astype(np.uint32)
    return np.where(t >= F32(last), np.uint32(last), idx).astype(np.uint32)


def unpack_rgba(c) -> np.ndarray:
    c = np.asarray(c, dtype=np.uint32)
    return np.stack([c & 255, (c >> 8) & 255, (c >> 16) & 255, c >> 24], axis=-1).astype(np.uint8)


def shade_rgba(c, shade) -> np.ndarray:
    c = np.asarray(c, dtype=np.uint32)
    shade = np.asarray(shade, dtype=np.uint32)
    r = ((c & 255) * shade) >> 8
    g = (((c >> 8) & 255) * shade) >> 8
    b = (((c >> 16) & 255) * shade) >> 8
    return (r | (g << 8) | (b << 16) | (c & np.uint32(0xFF000000))).astype(np.uint32)


def pack_rgba(rgba) -> int:
    r, g, b, *a = (int(x) for x in rgba)
    alpha = a[0] if a else 255
    return r | (g << 8) | (b << 16) | (alpha << 24)


def f32_bits(x) -> int:
    return int(np.asarray(x, dtype=F32).view(np.uint32))


# -- value ranges resolved on the device (engine/shaders/range.glsl) ----------------------------------

NO_KEY = 0xFFFFFFFF  # the min key of a reduction that saw no finite value
TINY = np.uint32(0x0D800000).view(F32)  # 2^-100: narrower ranges are widened
FLT_MAX = np.uint32(0x7F7FFFFF).view(F32)
HALF = F32(0.5)


def finite_keys(values) -> tuple[int, int]:
    """The stats pass's (min key, max key) over the finite values, flushed (``NO_KEY, 0`` when
    there is none): the same extremes in whatever order the atomics ran."""
    v = np.asarray(values, F32).reshape(-1)
    fin = ftz(v[classify(v) == FINITE])
    if not fin.size:
        return NO_KEY, 0
    return int(orderable(fin.min())), int(orderable(fin.max()))


def recip_mantissa(m):
    """``recip_mantissa`` in range.glsl: 1/m for m in [1, 2), four Newton steps in float32."""
    m = F32(m)
    r = F32(np.uint32(0x3FB4B4B5).view(F32) - F32(np.uint32(0x3EF0F0F1).view(F32) * m))
    one = F32(1.0)
    for _ in range(4):
        e = F32(one - F32(m * r))
        r = F32(r + F32(r * e))
    return r


def recip_unit(d):
    """``recip_unit`` in common.glsl: 1/d for a normal d in (0, 1], no division, bit for bit
    (elementwise over an array)."""
    db = bits(np.asarray(d, F32)).astype(np.int64)
    e = (db >> 23) - 127
    r = recip_mantissa(((db & 0x007FFFFF) | 0x3F800000).astype(np.uint32).view(F32))
    rb = bits(r).astype(np.int64)
    out = (((rb & 0x807FFFFF) | (((rb >> 23) - e) << 23)) & 0xFFFFFFFF).astype(np.uint32).view(F32)
    return out[()] if out.ndim == 0 else out


def range_scale(lo, hi, last) -> np.float32:
    """``range_scale`` in range.glsl: ``last / (hi - lo)`` with no division, bit for bit."""
    with np.errstate(all="ignore"):
        dh = ftz(F32(ftz(F32(hi) * HALF) - ftz(F32(lo) * HALF)))
        db = int(bits(dh))
        e = (db >> 23) - 127
        m = np.uint32((db & 0x007FFFFF) | 0x3F800000).view(F32)
        s = ftz(F32(F32(last) * recip_mantissa(m)))
    sb = int(bits(s))
    biased = (sb >> 23) - (e + 1)
    if biased <= 0:
        return F32(0.0)
    return np.uint32((sb & 0x807FFFFF) | (biased << 23)).view(F32)


def device_range(mode: int, kmin: int, kmax: int, fixed_lo, fixed_hi, last) -> tuple:
    """``resolve_range`` in range.glsl: (lo, hi, scale) as float32, bit for bit. ``mode`` is
    RANGE.MODE_FIXED / MODE_AUTO / MODE_SYMMETRIC / MODE_GROW (engine/shaders/params.py)."""
    lo, hi = F32(fixed_lo), F32(fixed_hi)
    if mode == 3:  # GROW: the fixed pair, widened to the finite extremes
        if kmin != NO_KEY:
            lo = min(lo, F32(from_orderable(kmin)))
            hi = max(hi, F32(from_orderable(kmax)))
    elif mode != 0:
        if kmin == NO_KEY:
            lo, hi = F32(0.0), F32(1.0)
        else:
            lo, hi = F32(from_orderable(kmin)), F32(from_orderable(kmax))
            if mode == 2:
                hi = max(abs(lo), abs(hi))
                lo = -hi
    with np.errstate(all="ignore"):
        dh = ftz(F32(ftz(F32(hi * HALF)) - ftz(F32(lo * HALF))))
        if not dh >= TINY:
            pad = max(ftz(F32(abs(lo) * HALF)), HALF)
            lo = max(F32(ftz(F32(lo - pad))), -FLT_MAX)
            hi = min(F32(ftz(F32(hi + pad))), FLT_MAX)
    return F32(lo), F32(hi), range_scale(lo, hi, last)
