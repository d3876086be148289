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

from ..engine.shaders.params import RANGE, ParamBlock
from ..engine.shaders.passes import Pass, buffer, image, params, ro, wo
from . import _exact

# The point cloud's block and passes live here, the lowest of its modules (pointcloud.py,
# _pointcolor.py and _pointtwin.py import this one).
# -- the declaration: read by the build from this file (docs/architecture.md, "A view is one unit") --
POINTCLOUD = ParamBlock("pointcloud_params", "PC", [
    "N", "DIM", "W", "H", "SIZE", "MODE", "NPAL", "MARGIN",
    ("CX", "float"), ("CY", "float"), ("CZ", "float"),
    ("R", "float", 9),  # the rotation, row-major
    ("SCALE", "float"), ("NSCALE", "float"), ("OX", "float"), ("OY", "float"),
    ("ZMIN", "float"),    # the nearest depth of the fit, as -depth (the quantisation origin)
    ("DSCALE", "float"),  # depth levels per unit of depth: DEPTH_MAX / (2 radius)
    ("VLO", "float"), ("VSCALE", "float"),
    "RECT_X", "RECT_Y", "BG", "BASE", "DTYPE",
    # The fit (pointcloud_fit.comp) writes CX..CZ, SCALE, NSCALE, ZMIN and DSCALE above, on the
    # device, in the frame, from the box of the finite points (pointcloud_bounds.comp) or from
    # the fixed box FLO..FHI when FIXED is 1; FITK is the scale at radius 1 (zoom * 0.45 * the
    # shorter panel side), from the host.
    # Labels read in place (a tensor given as labels=): their byte offset and dtype code in the
    # labels buffer; pointcloud_labels.comp turns them into point_colors[] in the frame.
    "LBASE", "LDTYPE",
    # Values read in place (a float tensor given as values=): their byte offset and dtype code,
    # and how VLO/VSCALE are made: VRANGE_HOST (fixed, from the host), VRANGE_AUTO or
    # VRANGE_SYMMETRIC (pointcloud_fit.comp, from the finite values' extremes: words BOX_VMIN,
    # BOX_VNOT_MAX, which pointcloud_values.comp reduces; the codes are RANGE's MODE_*).
    "VBASE", "VDTYPE", "VRANGE",
    "FIXED", ("FLO", "float", 3), ("FHI", "float", 3), ("FITK", "float"),
], constants={
    "MODE_UNIFORM": "0u", "MODE_LABELS": "1u", "MODE_VALUES": "2u",
    # The depth key (pointcloud_color.glsl): level << KEY_COLOR_BITS | colour index.
    "KEY_COLOR_BITS": "9u", "KEY_COLOR_MASK": "511u", "KEY_DEPTH_BITS": "23u",
    "DEPTH_MAX": "8388607u", "EMPTY_KEY": "0xFFFFFFFFu",
    # The colour table: 256 colormap entries, the palette, then three fixed colours.
    "LUT_SIZE": "256u", "PALETTE_BASE": "256u", "PALETTE_MAX": "252u",
    "COLOR_NAN": "508u", "COLOR_UNLABELLED": "509u", "COLOR_UNIFORM": "510u", "COLOR_TABLE_SIZE": "512u",
    "ST_NONFINITE": "0", "ST_OFFSCREEN": "1", "ST_NONFINITE_VALUES": "2",
    # labels read in place: which of the labels 0..63 occur (two bit words), and how many points
    # have a label of 64 or more (the legend's classes, read back with the frame's counters)
    "ST_CLASSES_LO": "3", "ST_CLASSES_HI": "4", "ST_CLASSES_MORE": "5",
    # values read in place with a device range: the (lo, hi) the frame coloured by (float bits)
    "ST_VLO": "6", "ST_VHI": "7", "STATS_WORDS": "8",
    "CLASS_BITS": "64u",
    # The box keys (pointcloud_bounds.comp): per axis the orderable key of the least finite
    # coordinate, then the complement of the greatest one's (so all six start at 0xFFFFFFFF and
    # fall by atomicMin), one fill clearing them.
    "BOX_MIN": "0", "BOX_NOT_MAX": "3", "BOX_VMIN": "6", "BOX_VNOT_MAX": "7", "BOX_WORDS": "8",
    "VRANGE_HOST": "0u", "VRANGE_AUTO": "1u", "VRANGE_SYMMETRIC": "2u",
    # The radius when the box has none (one point, none finite, a box too small or too large):
    # the fit then takes radius 1. Its square must lie in [2^-100, 2^100].
    "FIT_RSQUARED_MIN": "0x0D800000u", "FIT_RSQUARED_MAX": "0x71800000u",
    "NEWTON_STEPS": "3u",
}, specialization=[  # the words DTYPE, SIZE, MODE and DIM, folded into the splat and paint pipelines
    ("SPEC_DTYPE", 0), ("SPEC_SIZE", 1), ("SPEC_MODE", 0), ("SPEC_DIM", 3),
])
# the point cloud: the fit (bounds, then fit, which writes the block's fit words), labels and
# values read in place, the splat, and one of the two colour passes (resolve or paint)
POINTCLOUD_PASSES = (
    Pass("pointcloud_bounds", POINTCLOUD, [params(), ro("pos"), buffer("box")]),
    Pass("pointcloud_fit", POINTCLOUD, [params("buffer"), ro("box"), buffer("stats")]),
    Pass("pointcloud_labels", POINTCLOUD, [params(), ro("labels"), wo("point_colors"), buffer("stats")]),
    Pass("pointcloud_values", POINTCLOUD, [params(), ro("vals"), buffer("box")]),
    Pass("pointcloud_values_color", POINTCLOUD, [params(), ro("vals"), wo("point_colors")]),
    Pass("pointcloud_splat", POINTCLOUD, [params(), ro("pos"), buffer("depth"), buffer("stats"),
                                          ro("point_colors")]),
    Pass("pointcloud_resolve", POINTCLOUD, [params(), buffer("depth"), ro("colors")]),
    Pass("pointcloud_paint", POINTCLOUD, [params(), ro("pos"), ro("depth"), ro("point_colors"), ro("colors"),
                                          image()]),
)
PC = POINTCLOUD

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
