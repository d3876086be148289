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
