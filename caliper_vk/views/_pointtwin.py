"""The point cloud's numpy twin: the exact RGBA pixels and counters the GPU produces, from the
same parameter words (the fit's as ``pointcloud_fit`` computes them: ``params_fitted``), the same
float32 projection with the same flushes, and the same 32-bit keys resolved by ``minimum.at``.
:class:`PointCloudTwin` is mixed into :class:`~caliper_vk.views.pointcloud.PointCloud`.
"""

from __future__ import annotations

import numpy as np

from . import _exact
from ._pointfit import POINTCLOUD as PC

F32 = np.float32
KEY_COLOR_BITS, KEY_DEPTH_BITS, DEPTH_MAX = PC.KEY_COLOR_BITS, PC.KEY_DEPTH_BITS, PC.DEPTH_MAX
KEY_COLOR_MASK = np.uint32(PC.KEY_COLOR_MASK)
EMPTY = np.uint32(PC.EMPTY_KEY)


def key_shade(keys: np.ndarray) -> np.ndarray:
    """256 (nearest) down to 156 (farthest) from the depth level in a key's high bits
    (``key_shade`` in pointcloud_color.glsl)."""
    level = np.asarray(keys, np.uint32) >> np.uint32(KEY_COLOR_BITS)
    return np.uint32(256) - ((level * np.uint32(101)) >> np.uint32(KEY_DEPTH_BITS))


class PointCloudTwin:
    """``reference`` and ``reference_with_stats`` of a ``PointCloud`` (a mixin: it reads the
    view's ``params_fitted``, ``positions``, ``color_index``, ``_foot`` and ``_colors``)."""

    def reference(self, width: int, height: int) -> np.ndarray:
        """The exact RGBA pixels the GPU produces for a ``width x height`` panel."""
        rgba, _ = self.reference_with_stats(width, height)
        return rgba

    def reference_with_stats(self, width: int, height: int):
        p = self.params_fitted(width, height)

        def f(field):
            return F32(p[field])

        rot = [F32(v) for v in p["r"]]

        pos = self.positions
        n, dim = pos.shape
        x, y = pos[:, 0], pos[:, 1]
        z = pos[:, 2] if dim == 3 else np.zeros(n, F32)
        finite = ((_exact.classify(x) == 0) & (_exact.classify(y) == 0)
                  & (_exact.classify(z) == 0))
        stats = {"points": n, "nonfinite": int((~finite).sum()), "offscreen": 0,
                 "nonfinite_values": 0, "drawn": 0}
        if self.valued:
            stats["nonfinite_values"] = int((finite & (_exact.classify(self._host_values()) != 0)).sum())
        idx = np.nonzero(finite)[0]
        x, y, z = x[finite], y[finite], z[finite]
        ftz = _exact.ftz
        with np.errstate(all="ignore"):
            dx, dy, dz = (ftz(ftz(a) - f(k)) for a, k in ((x, "cx"), (y, "cy"), (z, "cz")))
            q = [ftz(ftz(ftz(rot[3 * r] * dx) + ftz(rot[3 * r + 1] * dy))
                     + ftz(rot[3 * r + 2] * dz)) for r in range(3)]
            sx = ftz(ftz(q[0] * f("scale")) + f("ox"))
            sy = ftz(ftz(q[1] * f("nscale")) + f("oy"))
            m = F32(p["margin"])
            near = (sx >= -m) & (sx < F32(width) + m) & (sy >= -m) & (sy < F32(height) + m)
            ix = np.floor(np.where(near, sx, 0)).astype(np.int64)
            iy = np.floor(np.where(near, sy, 0)).astype(np.int64)
        inside = near & (ix >= 0) & (ix < width) & (iy >= 0) & (iy < height)
        stats["offscreen"] = int((~inside).sum())
        stats["drawn"] = int(inside.sum())
        level = _exact.lut_index(ftz(-q[2]), f("zmin"), f("dscale"), DEPTH_MAX)
        key = (level << np.uint32(KEY_COLOR_BITS)) | self.color_index(idx, p)
        key, ix, iy = key[near], ix[near], iy[near]
        depth = np.full(width * height, EMPTY, np.uint32)
        for dxo, dyo in self._foot:
            px, py = ix + dxo, iy + dyo
            ok = (px >= 0) & (px < width) & (py >= 0) & (py < height)
            np.minimum.at(depth, py[ok] * width + px[ok], key[ok])
        colors = np.full(width * height, p["bg"], np.uint32)
        hit = depth != EMPTY
        won = depth[hit]
        colors[hit] = _exact.shade_rgba(self._colors()[won & KEY_COLOR_MASK], key_shade(won))
        return _exact.unpack_rgba(colors).reshape(height, width, 4), stats
