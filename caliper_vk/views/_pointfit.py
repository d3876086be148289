"""The point cloud's host-side fit and camera: the bounding box and sphere of the finite
points (exact float64 values of float32 extremes, read in place and block by block for a large
live cloud) and the view rotation. Shader and twin both take their results, rounded once to
float32, from the parameter block.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np


def _ftz32(v: float) -> float:
    """``_exact.ftz`` of one float32 value held as a Python float: zero and subnormals become +0."""
    return 0.0 if abs(v) < 1.1754943508222875e-38 else v  # below the smallest normal float32


# The live fit of a large cloud reads the (N, dim) positions in place, in blocks that stay in
# cache, instead of making a transposed copy first (half its time at 1M points).
FIT_LARGE = 50_000  # points from which the blocked path runs (below it, the column path is faster)
FIT_ROW = 4096  # points per row of the extremes' reduction: one long contiguous inner loop
FIT_BLOCK = 1 << 15  # points per block of the distance screen (its temporaries: 384 KiB)
FIT_TILE = 256  # the screen subtracts the centre repeated this many times: a contiguous inner loop
# A live cloud of up to this many bytes keeps a copy of the bytes it was last fitted to: a frame
# whose positions did not change (a redraw, a paused producer) reuses the fit after one memcmp
# (2 us for 2,000 points) instead of the fit's dozen numpy passes (30 us). The check copies the
# bytes on the training thread every frame, so it stops at 1 MiB (87k 3-D points): a larger
# cloud's copy and compare would cost as much as the blocked fit they could save.
FIT_SNAPSHOT_MAX = 1 << 20


def snapshot(source) -> tuple | None:
    """What the fit of ``source`` (a view ``Source``) depends on: its stored dtype, shape and
    bytes; None for a cloud over :data:`FIT_SNAPSHOT_MAX` bytes (always fitted anew)."""
    a = source.array
    return (source.dtype, a.shape, a.tobytes()) if a.nbytes <= FIT_SNAPSHOT_MAX else None


def unchanged(snap: tuple | None, source) -> bool:
    """True when ``source`` holds exactly the bytes of ``snap`` (see :func:`snapshot`)."""
    a = source.array
    return snap is not None and snap[0] == source.dtype and snap[1] == a.shape and a.tobytes() == snap[2]


def _extremes(pts: np.ndarray, rows: bool) -> tuple[list, list]:
    """Per-coordinate min and max of the points as float lists (min and max propagate NaN).

    ``rows``: ``pts`` is the C-contiguous (N, dim) array itself, reduced as rows of FIT_ROW
    points, then each row's points folded (no transposing copy); else ``pts`` holds the
    coordinates as contiguous columns (dim, N)."""
    if not rows:
        return pts.min(axis=1).tolist(), pts.max(axis=1).tolist()
    n, dim = pts.shape
    pos = pts
    flat = pos.reshape(-1)
    m = n // FIT_ROW * FIT_ROW * dim
    rows = flat[:m].reshape(-1, FIT_ROW * dim)
    lo = [np.minimum.reduce(rows, axis=0).reshape(-1, dim).min(axis=0)]
    hi = [np.maximum.reduce(rows, axis=0).reshape(-1, dim).max(axis=0)]
    if m < flat.size:
        rest = flat[m:].reshape(-1, dim)
        lo.append(rest.min(axis=0))
        hi.append(rest.max(axis=0))
    return np.min(lo, axis=0).tolist(), np.max(hi, axis=0).tolist()


def _screen(block: np.ndarray, tile: np.ndarray, buf: np.ndarray, out: np.ndarray) -> np.ndarray:
    """float32 ``sum_k (block[:, k] - c[k]) ** 2`` for each point of a block, into ``out``
    (``tile``: the centre c repeated FIT_TILE times; ``buf``: scratch for the block)."""
    k, dim = block.shape
    d = buf[:k * dim]
    full = k // FIT_TILE * FIT_TILE * dim
    np.subtract(block.reshape(-1)[:full].reshape(-1, tile.size), tile, out=d[:full].reshape(-1, tile.size))
    np.subtract(block[full // dim:], tile[:dim], out=d[full:].reshape(-1, dim))
    np.multiply(d, d, out=d)
    d = d.reshape(k, dim)
    s = out[:k]
    np.add(d[:, 0], d[:, 1], out=s)
    for j in range(2, dim):
        s += d[:, j]
    return s


def _max_square_distance(pts: np.ndarray, c: np.ndarray, rows: bool) -> float:
    """``max over points of sum_k float64(x_k - c[k]) ** 2``, exactly: the fit's radius
    (``pts`` and ``rows`` as for :func:`_extremes`).

    A large cloud (``rows``) first takes the sums in float32, block by block (a fraction of
    the float64 passes' time), then evaluates the float64 sums only for the points within
    1e-5 of the float32 maximum: float32 rounding moves a sum by under 1e-6 relative, so the
    float64 maximum is among them. Sums that could overflow or lose precision in float32 take
    the plain float64 path."""
    if not rows:  # a small cloud: straight float64 over the columns
        sq = (pts - c.reshape(-1, 1)).astype(np.float64)  # float32 diffs: the terms squared
        np.square(sq, out=sq)
        total = sq[0]  # summed in coordinate order, as the float64 formula does
        for row in sq[1:]:
            total = total + row
        return float(total.max())
    pos = pts
    n, dim = pos.shape
    if n > FIT_LARGE:
        tile = np.tile(c, FIT_TILE)
        buf, out = np.empty(FIT_BLOCK * dim, np.float32), np.empty(FIT_BLOCK, np.float32)
        starts = range(0, n, FIT_BLOCK)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            tops = [float(_screen(pos[i:i + FIT_BLOCK], tile, buf, out).max()) for i in starts]
            top = max(tops)
            if 1e-30 < top < 1e30:
                cut = np.float32(top * (1 - 1e-5))
                pos = np.concatenate([  # the few blocks that hold a candidate, screened again
                    pos[i:i + FIT_BLOCK][_screen(pos[i:i + FIT_BLOCK], tile, buf, out) >= cut]
                    for i, t in zip(starts, tops, strict=True) if t >= cut])
    sq = (pos - c).astype(np.float64)  # float32 differences: the very terms the float64 sum squares
    np.square(sq, out=sq)
    total = sq[:, 0]  # summed in coordinate order, as the float64 formula does
    for j in range(1, dim):
        total = total + sq[:, j]
    return float(total.max())


@lru_cache(maxsize=256)
def rotation(yaw_deg: float, pitch_deg: float) -> np.ndarray:
    """View rotation: yaw about +y, then pitch about +x (float64, 3x3)."""
    y, p = math.radians(yaw_deg), math.radians(pitch_deg)
    ry = np.array([[math.cos(y), 0, math.sin(y)], [0, 1, 0], [-math.sin(y), 0, math.cos(y)]])
    rx = np.array([[1, 0, 0], [0, math.cos(p), -math.sin(p)], [0, math.sin(p), math.cos(p)]])
    r = rx @ ry
    r.flags.writeable = False  # cached: shared between callers
    return r
