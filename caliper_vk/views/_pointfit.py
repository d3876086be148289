"""The point cloud's fit and camera. The fit is computed on the device, in the frame that draws
(``pointcloud_bounds.comp``: the box of the finite points by 32-bit atomics on orderable keys;
``pointcloud_fit.comp``: centre, scale and depth range from the box, without division): the host
reads no element of the positions for it. Values read in place get their colour range the same
way (``pointcloud_values.comp``, then the fit's invocation). :func:`device_box`,
:func:`device_fit`, :func:`device_value_keys` and :func:`device_value_range` are their numpy
twins, the same float32 operations in the same order with the same flushes, so the twin of the
view gets the very words the shaders wrote. :func:`rotation` is the host's camera.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ..engine.shaders.params import POINTCLOUD as PC
from ..engine.shaders.params import RANGE
from . import _exact

F32 = np.float32
U32 = np.uint32
EMPTY_BOX = (0xFFFFFFFF,) * PC.BOX_WORDS


def device_box(pos: np.ndarray) -> tuple[int, ...]:
    """``pointcloud_bounds.comp``'s six words for float32 positions ``(N, dim)``: per axis the
    least orderable key of the flushed finite coordinates, then the complement of the greatest
    (z is 0 for 2-D points); all 0xFFFFFFFF when no point is finite."""
    n, dim = pos.shape
    cols = [pos[:, 0], pos[:, 1], pos[:, 2] if dim == 3 else np.zeros(n, F32)]
    finite = np.ones(n, bool)
    for c in cols:
        finite &= _exact.classify(c) == _exact.FINITE
    if not finite.any():
        return EMPTY_BOX
    keys = [_exact.orderable(_exact.ftz(c[finite])) for c in cols]
    return (*(int(k.min()) for k in keys), *(int(~k.max()) for k in keys))


def _f(v) -> F32:
    """One float32 result flushed as ``ftz`` flushes it."""
    return F32(_exact.ftz(F32(v)))


def _pow2(k: int) -> F32:
    """2^k as float32, from its exponent bits (k in -126..127)."""
    return np.asarray((127 + k) << 23, U32).view(F32)[()]


def device_fit(box, fixed, fitk: float) -> dict[str, F32]:
    """``pointcloud_fit.comp``: the parameter fields it writes (``{"cx": float32, ...}``: cx, cy,
    cz, scale, nscale, zmin, dscale; set them with ``ParamValues.set(**fit)``) for the box words
    ``box`` (:func:`device_box`), or for the fixed box ``fixed`` (two float32 triples) when not
    None, and the host's ``fitk`` (float32 ``FITK``)."""
    if fixed is not None:
        lo = [_f(v) for v in fixed[0]]
        hi = [_f(v) for v in fixed[1]]
    elif box[PC.BOX_MIN] == 0xFFFFFFFF:
        lo = hi = [F32(0)] * 3
    else:
        lo = [F32(_exact.from_orderable(U32(box[PC.BOX_MIN + k]))) for k in range(3)]
        hi = [F32(_exact.from_orderable(~U32(box[PC.BOX_NOT_MAX + k]))) for k in range(3)]
    out, e = {}, []
    with np.errstate(all="ignore"):
        for k in range(3):
            a, b = _f(lo[k] * F32(0.5)), _f(hi[k] * F32(0.5))
            out["c" + "xyz"[k]] = _f(a + b)
            e.append(_f(b - a))
        emax, q, s = max(e), 0, F32(1)
        if emax > 0:
            q = min(max(((int(np.asarray(emax, F32).view(U32)) >> 23) & 0xFF) - 127, -126), 126)
            g, s = _pow2(-q), F32(0)
            for d in e:
                u = _f(d * g)
                s = _f(s + _f(u * u))
        h = _f(s * F32(0.5))
        y = np.asarray(0x5F3759DF - (int(np.asarray(s, F32).view(U32)) >> 1), U32).view(F32)[()]
        for _ in range(PC.NEWTON_STEPS):
            y = _f(y * _f(F32(1.5) - _f(h * _f(y * y))))
        inv = _f(y * _pow2(-q))
        r = _f(_f(s * y) * _pow2(q))
        scale = _f(F32(fitk) * inv)
        out["scale"], out["nscale"] = scale, -scale
        out["zmin"] = -r
        out["dscale"] = _f(F32(PC.DEPTH_MAX * 0.5) * inv)
    return {k: F32(v) for k, v in out.items()}


def device_value_keys(values: np.ndarray) -> tuple[int, int]:
    """``pointcloud_values.comp``'s two words for float32 values: the least orderable key of the
    flushed finite values and the complement of the greatest; both 0xFFFFFFFF when none is finite."""
    ok = _exact.classify(values) == _exact.FINITE
    if not ok.any():
        return 0xFFFFFFFF, 0xFFFFFFFF
    keys = _exact.orderable(_exact.ftz(values[ok]))
    return int(keys.min()), int(~keys.max())


def device_value_range(keys, symmetric: bool) -> tuple[F32, F32, F32]:
    """``pointcloud_fit.comp: value_range``: (lo, hi, VSCALE) for the value keys ``keys``
    (:func:`device_value_keys`), by every view's device range rule (``_exact.device_range``)."""
    mode = RANGE.MODE_SYMMETRIC if symmetric else RANGE.MODE_AUTO
    return _exact.device_range(mode, keys[0], int(~U32(keys[1])), 0.0, 1.0, F32(255))


def radius_of(fit: dict[str, F32]) -> float:
    """The fitted radius :func:`device_fit`'s fields hold (``-zmin``)."""
    return -float(fit["zmin"])


@lru_cache(maxsize=256)
def rotation(yaw_deg: float, pitch_deg: float) -> np.ndarray:
    """View rotation: yaw about +y, then pitch about +x (float64, 3x3)."""
    y, p = math.radians(yaw_deg), math.radians(pitch_deg)
    ry = np.array([[math.cos(y), 0, math.sin(y)], [0, 1, 0], [-math.sin(y), 0, math.cos(y)]])
    rx = np.array([[1, 0, 0], [0, math.cos(p), -math.sin(p)], [0, math.sin(p), math.cos(p)]])
    r = rx @ ry
    r.flags.writeable = False  # cached: shared between callers
    return r
