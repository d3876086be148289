"""Min/max pyramids of a scalar column: the exact envelope of any range of steps, read from a few
hundred values instead of the whole column.

A series of ten million steps drawn in a 450-pixel plot needs, per pixel column, the least and
the greatest value of some 22,000 samples. Scanning the column (80 MB) for every zoom is too slow
and would make the whole memory-mapped column resident. A pyramid keeps, for every block of
:data:`FANOUT` samples, their least and greatest *measured finite* value (placeholders, NaN and
infinities left out; a block with none holds NaN), then the same over blocks of ``FANOUT`` of
those, and so on: level ``k`` has one ``(min, max)`` row per ``FANOUT**k`` samples, about an
eighth of the column's size in all.

:func:`envelope` answers "min and max of samples ``[a_j, a_{j+1})`` for every pixel column ``j``"
exactly, whatever the edges: the whole blocks inside a column come from the coarsest level that
still has about one row per column (the level that matches the pixels), and the ragged ends at
each edge from the finer levels, at most ``FANOUT - 1`` rows per edge and level. At the samples
themselves (level 0) it reads only the block of ``FANOUT`` values around each edge, with
``os.pread`` when the column lies in a run file (nothing mapped, see :mod:`.mapped`), or the
visible span in one read when that is small. The answer equals a brute-force ``np.min``/``np.max``
per column over the finite measured samples (``tests/test_pyramid.py`` checks it bit for bit).

``run.json`` keeps a pyramid per long series (``metrics[k]["pyramid"]``, docs/run-format.md), so
that a run opens without scanning its columns; a run written before pyramids existed or read from
its log gets one built on first use (:func:`of_series`, one chunked scan, kept on the series), and
a run revealed to a step keeps its run's for the prefix (:func:`prefix`).
"""

from __future__ import annotations

import math
import os

import numpy as np

from .mapped import _in_file, read_range, release_pages

FANOUT = 16  # samples per block of level 1, and blocks per block of each level above
MIN_LENGTH = 4096  # series shorter than this get no stored pyramid (a scan of them is cheap)
TOP_ROWS = FANOUT  # levels are added until the coarsest has at most this many rows
SCAN = 1 << 18  # samples per chunk of a scan that builds a pyramid (2 MB of float64)
RAW_READ = 1 << 16  # a visible span of at most this many samples is read whole, at level 0
DIRECT = 1 << 18  # ... and one of at most this many is reduced from the samples alone (2 MB of float64)


class Pyramid:
    """``levels[k - 1]``: the ``(rows, 2)`` float64 array of level ``k`` (min, max per block of
    ``FANOUT**k`` samples); ``nonfinite``: how many values of the column (placeholders included)
    are NaN or infinite; ``n``: the column's length."""

    __slots__ = ("levels", "n", "nonfinite", "source", "whole")

    def __init__(self, levels: list, n: int, nonfinite: int | None, source=None, whole: bool = True):
        self.levels, self.n, self.nonfinite = levels, int(n), nonfinite
        self.source = source  # the value column it was read beside (a run file's), if any
        # False: the levels are a longer column's, of which this one is the first n values (a run
        # revealed to a step): right for any envelope inside it, not for its extremes or its count
        # of NaN values (None unless the longer column had none)
        self.whole = whole

    def extremes(self) -> tuple[float | None, float | None]:
        """(min, max) of the finite measured values, or (None, None) when there are none."""
        if not self.levels:
            return None, None
        top = self.levels[-1]  # (from a run file: read, not mapped; a touch maps a whole folio)
        top = read_range(top.reshape(-1), 0, top.size).reshape(-1, 2) if top.flags.c_contiguous else top
        lo, hi = np.fmin.reduce(top[:, 0]) if len(top) else math.nan, \
            np.fmax.reduce(top[:, 1]) if len(top) else math.nan
        return (None, None) if math.isnan(lo) else (float(lo), float(hi))


def level_rows(n: int) -> list[int]:
    """The number of rows of each level of a pyramid of ``n`` samples (none below MIN_LENGTH is
    stored, but any length can have one)."""
    rows, m = [], n
    while True:
        m = -(-m // FANOUT)
        rows.append(m)
        if m <= TOP_ROWS:
            return rows


def _blocks(v: np.ndarray) -> np.ndarray:
    """``(ceil(len / FANOUT), 2)`` min/max rows of ``v`` (NaN for gaps) per block of FANOUT (the
    last block may be shorter)."""
    at = np.arange(0, len(v), FANOUT)
    out = np.empty((len(at), 2))
    if len(at):
        out[:, 0], out[:, 1] = np.fmin.reduceat(v, at), np.fmax.reduceat(v, at)
    return out


def _up(rows: np.ndarray) -> np.ndarray:
    """The next level of ``rows`` (one row per FANOUT of them)."""
    at = np.arange(0, len(rows), FANOUT)
    out = np.empty((len(at), 2))
    if len(at):
        out[:, 0], out[:, 1] = np.fmin.reduceat(rows[:, 0], at), np.fmax.reduceat(rows[:, 1], at)
    return out


def build(chunks, n: int, spill=None) -> Pyramid:
    """The pyramid of a column given as ``chunks``: an iterable of ``(values, placeholder mask or
    None)`` pieces in order, ``n`` values in all, each piece's length a multiple of FANOUT but the
    last. Memory: level 1 (``n / FANOUT`` rows) and one piece at a time; with ``spill``, a callable
    given each piece of level 1 in order (to write it out, as the recorder does at ``close()``),
    level 1 is not kept (``levels[0]`` is None) and the memory is one piece and level 2
    (``n / FANOUT**2`` rows)."""
    first, second, pending, nonfinite, seen = [], [], np.zeros((0, 2)), 0, 0
    for values, mask in chunks:
        v = np.asarray(values, np.float64)
        ok = np.isfinite(v)
        bad = len(v) - int(np.count_nonzero(ok))
        nonfinite += bad
        if bad or (mask is not None and mask.any()):
            v = np.where(ok if mask is None else ok & ~mask, v, np.nan)
        rows = _blocks(v)
        seen += len(v)
        if spill is None:
            first.append(rows)
            continue
        spill(rows)
        pending = np.concatenate([pending, rows])  # level 2 from whole blocks of FANOUT rows
        whole = len(pending) // FANOUT * FANOUT if seen < n else len(pending)
        second.append(_up(pending[:whole]))
        pending = pending[whole:]
    if seen != n:
        raise ValueError(f"a pyramid of {n} values was given {seen}")
    rows = level_rows(n)
    if spill is None:
        levels = [np.concatenate(first) if first else np.zeros((0, 2))]
    else:
        levels = [None]
        if len(rows) > 1:
            levels.append(np.concatenate(second) if second else np.zeros((0, 2)))
    for _ in rows[len(levels):]:
        levels.append(_up(levels[-1]))
    return Pyramid(levels, n, nonfinite)


def of_array(values: np.ndarray, placeholder=None) -> Pyramid:
    """The pyramid of a whole column (scanned in chunks whose mapped pages are handed back)."""
    n = len(values)

    def chunks():
        for at in range(0, n, SCAN):
            part = values[at:at + SCAN]
            mask = None if placeholder is None else np.asarray(placeholder[at:at + SCAN])
            yield np.array(part, np.float64), mask
            release_pages(part)

    return build(chunks(), n)


def of_series(s) -> Pyramid:
    """The pyramid of a :class:`~caliper_vk.record.run.Series`: the one its run file stores, else
    one built now from its columns and kept on it (while its value column is the same object)."""
    stored = _stored(s)
    if stored is not None:
        return stored
    memo = s.__dict__.get("_pyramid")
    if memo is not None and memo[0] is s.value and memo[1] is s.placeholder:
        return memo[2]
    ph = s.placeholder if _has_placeholders(s) else None
    p = of_array(s.value, ph)
    s.__dict__["_pyramid"] = (s.value, s.placeholder, p)
    return p


def _stored(s) -> Pyramid | None:
    """The pyramid a series was given (its run file's), while its value column is that one."""
    p = getattr(s, "pyramid", None)
    if isinstance(p, Pyramid) and p.n == len(s.value) and (p.source is None or p.source is s.value):
        return p
    return None


def prefix(s, n: int, values: np.ndarray) -> Pyramid | None:
    """For ``values``, the first ``n`` values of series ``s``'s column: ``s``'s pyramid (stored or
    already built) standing for them, or None when ``s`` has none yet (built when needed)."""
    p = _stored(s)
    memo = s.__dict__.get("_pyramid")
    if p is None and memo is not None and memo[0] is s.value and memo[1] is s.placeholder:
        p = memo[2]
    if p is None:
        return None
    return Pyramid(p.levels, n, 0 if p.nonfinite == 0 else None, values, whole=n == p.n and p.whole)


def extremes_of(s) -> tuple[float | None, float | None]:
    """(min, max) of a series' finite measured values from its pyramid: its top level, or for a
    prefix of a longer column the envelope of all of it (a few hundred values read)."""
    p = of_series(s)
    if p.whole:
        return p.extremes()
    lo, hi = envelope(s.value, p, np.array([0, len(s.value)]), placeholder_index(s))
    return (None, None) if math.isnan(lo[0]) else (float(lo[0]), float(hi[0]))


def placeholder_index(s) -> np.ndarray | None:
    """The sorted indices of a series' placeholder samples, or None when it has none (kept on it)."""
    memo = s.__dict__.get("_ph_index")
    if memo is not None and memo[0] is s.placeholder:
        return memo[1]
    out = np.flatnonzero(s.placeholder) if _has_placeholders(s) else None
    s.__dict__["_ph_index"] = (s.placeholder, out)
    return out


def _has_placeholders(s) -> bool:
    ph = s.placeholder
    if not ph.strides or ph.strides[0] == 0:  # the broadcast column of a series without any
        return bool(ph.size and ph.flat[0])
    return bool(ph.any())


# -- reading ------------------------------------------------------------------------------


def _raw_pieces(values: np.ndarray, starts: np.ndarray, span: tuple[int, int]):
    """``FANOUT`` samples from each of ``starts`` (clipped at the column's end) as a
    ``(len(starts), FANOUT)`` array, NaN past the end. Read with ``pread`` from a run file (no
    page mapped): the visible ``span`` in one read when it is short, else one read per block."""
    n = len(values)
    out = np.full((len(starts), FANOUT), np.nan)
    if not len(starts):
        return out
    where = _in_file(values)
    lo, hi = span[0] // FANOUT * FANOUT, span[1]
    if where is None:
        idx = starts[:, None] + np.arange(FANOUT)
        ok = idx < n
        out[ok] = values[idx[ok]]
        return out
    fd, at, _ = where
    stride, dt = values.strides[0], values.dtype
    if hi - lo <= RAW_READ and stride == dt.itemsize:
        hi = min(n, hi + FANOUT)
        block = np.frombuffer(os.pread(fd, (hi - lo) * stride, at + lo * stride), dt)
        idx = starts[:, None] + np.arange(FANOUT)
        ok = idx < hi
        out[ok] = block[idx[ok] - lo]
        return out
    for r, s in enumerate(starts.tolist()):
        count = min(FANOUT, n - s)
        if stride == dt.itemsize:
            out[r, :count] = np.frombuffer(os.pread(fd, count * stride, at + s * stride), dt)
        else:
            out[r, :count] = [values[s + k] for k in range(count)]
    return out


def envelope(values: np.ndarray, pyramid: Pyramid, edges: np.ndarray, placeholder_index=None):
    """Exact ``(min, max)`` of the finite measured values in each range ``[edges[j], edges[j+1])``
    of sample indices (``edges`` non-decreasing, within ``0..len(values)``): two float64 arrays of
    ``len(edges) - 1``, NaN for a range without any. ``placeholder_index``: the sorted indices of
    the samples that are placeholders (left out, as the pyramid leaves them out)."""
    edges = np.asarray(edges, np.int64)
    cols = len(edges) - 1
    lo, hi = np.full(cols, np.nan), np.full(cols, np.nan)
    if cols <= 0:
        return lo, hi
    s, e = edges[:-1].copy(), edges[1:].copy()
    first, last = int(edges[0]), int(edges[-1])
    width = (last - first) / cols  # samples per column
    levels = pyramid.levels
    top = 0  # the coarsest level with at least about one row per column (a short span: the samples,
    # read in one piece: fewer steps than the levels' ragged ends take)
    while last - first > DIRECT and top < len(levels) and width / FANOUT ** (top + 1) >= 1.0:
        top += 1
    ph = np.asarray(placeholder_index if placeholder_index is not None else (), np.int64)
    for k in range(top + 1):
        if k == top:  # what is left: whole rows of level k, reduced per column
            _reduce_rows(values if k == 0 else levels[k - 1], k, s, e, lo, hi, ph, pyramid.nonfinite == 0)
            break
        s_up = np.minimum(-(-s // FANOUT) * FANOUT, e)  # the ragged ends below the next level
        e_dn = np.maximum(e // FANOUT * FANOUT, s_up)
        # the block of FANOUT rows around each edge holds a column's tail and the next one's head
        blocks = np.unique(np.concatenate([s[s < s_up] // FANOUT, (e_dn[e_dn < e]) // FANOUT]))
        if len(blocks):
            if k == 0:
                rows = _raw_pieces(values, blocks * FANOUT, (first, last))
                if len(ph):
                    _mask_placeholders(rows, blocks, ph)
                rmin = rmax = np.where(np.isfinite(rows), rows, np.nan)
            else:
                lvl = levels[k - 1]
                idx = blocks[:, None] * FANOUT + np.arange(FANOUT)
                ok = idx < len(lvl)
                rmin, rmax = np.full(idx.shape, np.nan), np.full(idx.shape, np.nan)
                got = np.asarray(lvl[idx[ok]])
                rmin[ok], rmax[ok] = got[:, 0], got[:, 1]
                release_pages(lvl)
            _take_pieces(blocks, rmin, rmax, s, s_up, lo, hi)
            _take_pieces(blocks, rmin, rmax, e_dn, e, lo, hi)
        s, e = s_up // FANOUT, e_dn // FANOUT
    return lo, hi


def _mask_placeholders(rows: np.ndarray, blocks: np.ndarray, ph: np.ndarray) -> None:
    b = ph // FANOUT
    at = np.searchsorted(blocks, b)
    ok = (at < len(blocks)) & (blocks[np.minimum(at, len(blocks) - 1)] == b)
    rows[at[ok], (ph % FANOUT)[ok]] = np.nan


def _take_pieces(blocks, rmin, rmax, a, b, lo, hi) -> None:
    """Fold rows ``[a_j, b_j)`` (each within one block of ``blocks``) into column ``j``."""
    live = np.flatnonzero(a < b)
    if not len(live):
        return
    row = np.searchsorted(blocks, a[live] // FANOUT)
    k = np.arange(FANOUT)
    inside = (k >= (a[live] % FANOUT)[:, None]) & (k < (b[live] - a[live] // FANOUT * FANOUT)[:, None])
    m = np.fmin.reduce(np.where(inside, rmin[row], np.nan), axis=1)
    x = np.fmax.reduce(np.where(inside, rmax[row], np.nan), axis=1)
    lo[live] = np.fmin(lo[live], m)
    hi[live] = np.fmax(hi[live], x)


def _reduce_rows(rows, k: int, s, e, lo, hi, ph, finite: bool) -> None:
    """Fold whole rows ``[s_j, e_j)`` of level ``k`` (0: the samples; ``finite``: all of them are)
    into each column."""
    live = s < e
    if not live.any():
        return
    a, b = int(s[live].min()), int(e[live].max())
    if k == 0:
        part = read_range(rows, a, b)  # (in a run file: read, not mapped)
        if not finite:
            part = np.where(np.isfinite(part), part, np.nan)
        if len(ph):
            inside = ph[(ph >= a) & (ph < b)] - a
            if len(inside):
                part = part if not finite else part.copy()
                part[inside] = np.nan
        mins = maxs = part
    else:
        part = np.array(rows[a:b])  # (a copy: the mapped rows are handed back at once)
        release_pages(rows)
        mins, maxs = part[:, 0], part[:, 1]
    starts, ends = s[live] - a, e[live] - a
    fmin, fmax = (np.minimum, np.maximum) if k == 0 and finite and not len(ph) else (np.fmin, np.fmax)
    if np.array_equal(ends[:-1], starts[1:]):  # columns end to end (always so at the samples)
        m, x = fmin.reduceat(mins, starts), fmax.reduceat(maxs, starts)
    else:  # reduceat over the interleaved (start, end) of every column: the even results are the columns
        bounds = np.stack([starts, ends], axis=1).ravel()
        nan = np.full(1, np.nan)  # (an end may be the last index + 1)
        m = fmin.reduceat(np.concatenate([mins, nan]), bounds)[::2]
        x = fmax.reduceat(np.concatenate([maxs, nan]), bounds)[::2]
    lo[live] = np.fmin(lo[live], m)
    hi[live] = np.fmax(hi[live], x)


# -- in run.json ----------------------------------------------------------------------------


def to_doc(p: Pyramid, add, first: dict | None = None) -> dict:
    """A pyramid as ``run.json`` stores it beside its series (``add``: the sidecar writer's;
    ``first``: the reference to level 1 where :func:`build` spilled it)."""
    return {"fanout": FANOUT, "nonfinite": p.nonfinite,
            "levels": [first if lv is None else add(np.ascontiguousarray(lv)) for lv in p.levels]}


def from_doc(obj, values: np.ndarray, where: str) -> Pyramid:
    """The stored pyramid of the series whose value column is ``values``; RunFileError naming
    ``where`` when it is not one (the caller leaves it out: it is built again when drawn)."""
    n = len(values)
    from .log import RunFileError, decode_array

    if not isinstance(obj, dict) or obj.get("fanout") != FANOUT or not isinstance(obj.get("levels"), list):
        raise RunFileError(f"{where}: expected {{'fanout': {FANOUT}, 'nonfinite', 'levels'}}")
    nonfinite = obj.get("nonfinite")
    if not isinstance(nonfinite, int) or isinstance(nonfinite, bool) or not 0 <= nonfinite <= n:
        raise RunFileError(f"{where}.nonfinite: expected a count of values from 0 to {n}")
    rows = level_rows(n)
    if len(obj["levels"]) != len(rows):
        raise RunFileError(f"{where}.levels: {len(obj['levels'])} levels, where a series of {n} values "
                           f"has {len(rows)}")
    levels = []
    for k, (ref, m) in enumerate(zip(obj["levels"], rows, strict=True)):
        a = decode_array(ref, f"{where}.levels[{k}]")
        if a.shape != (m, 2) or a.dtype != np.float64:
            raise RunFileError(f"{where}.levels[{k}]: expected float64 of shape ({m}, 2), "
                               f"got {a.dtype} {a.shape}")
        levels.append(a)
    return Pyramid(levels, n, nonfinite, values)
