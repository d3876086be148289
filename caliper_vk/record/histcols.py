"""Histograms as columns: how ``run.json`` (schema ``caliper-run/3``) stores a histogram's frames.

One object per histogram instead of one per frame: its frames' steps, bin counts and
out-of-range counts as columns, and every frame's counts and edges end to end. A run with
thousands of histogram frames then parses and checks in a few numpy calls instead of a JSON
object, a decode and a dozen checks per frame (a million-step run with three histograms of a
thousand frames each spent a third of its open there). The format: ``docs/run-format.md``.
"""

from __future__ import annotations

import numpy as np

from .log import RunFileError, decode_array
from .run import HistFrame

_EXTRA = ("below", "above", "nan", "inf")


def to_columns(frames: list[HistFrame], encode_array) -> dict:
    """A histogram's frames as the columns ``run.json`` stores (through ``encode_array``)."""
    def column(values, dtype) -> dict:
        return encode_array(np.array(values, dtype=dtype))

    def end_to_end(arrays, dtype) -> dict:
        return encode_array(np.concatenate([np.asarray(a, dtype) for a in arrays]) if arrays
                            else np.zeros(0, dtype))

    return {"step": column([f.step for f in frames], np.int64),
            "bins": column([len(f.counts) for f in frames], np.int64),
            "counts": end_to_end([f.counts for f in frames], np.int64),
            "edges": end_to_end([f.edges for f in frames], np.float64),
            **{k: column([getattr(f, k) for f in frames], np.int64) for k in _EXTRA}}


def from_columns(cols, where: str) -> list[HistFrame]:
    """The frames of one histogram stored as columns, checked and sorted by step; RunFileError
    naming the column at fault (the histogram is then left out, the rest of the run loads).
    Counts and edges are views of the stored columns (the sidecar's mapping: nothing copied)."""
    if not isinstance(cols, dict):
        raise RunFileError(f"{where}: expected an object of columns")

    def column(key: str, required: bool = True) -> np.ndarray | None:
        if key not in cols and not required:
            return None
        a = decode_array(cols.get(key), f"{where}.{key}")
        if a.ndim != 1:
            raise RunFileError(f"{where}.{key}: expected a 1-D column, got shape {a.shape}")
        return a

    def counts_of(a: np.ndarray, what: str) -> np.ndarray:
        if len(a) and (a.min() < 0 if a.dtype.kind in "iub" else (
                not np.all(np.isfinite(a)) or a.min() < 0 or np.any(a != np.floor(a)))):
            raise RunFileError(f"{where}.{what}: expected non-negative integers (found NaN, a negative or a "
                               "fraction)")
        return a.astype(np.int64, copy=False)

    step = counts_of(column("step"), "step")
    n = len(step)
    bins = counts_of(column("bins"), "bins")
    if len(bins) != n or (n and bins.min() < 1):
        raise RunFileError(f"{where}.bins: expected one bin count (at least 1) per step ({n})")
    counts = counts_of(column("counts"), "counts")
    if len(counts) != int(bins.sum()):
        raise RunFileError(f"{where}.counts: {len(counts)} values for {int(bins.sum())} bins")
    edges = column("edges").astype(np.float64, copy=False)
    ends = np.cumsum(bins + 1)
    if len(edges) != (int(ends[-1]) if n else 0):
        raise RunFileError(f"{where}.edges: {len(edges)} values; {int(ends[-1]) if n else 0} expected "
                           "(bins + 1 per frame)")
    rising = np.diff(edges) > 0
    rising[ends[:-1] - 1] = True  # where one frame's edges end and the next one's begin
    if not np.all(np.isfinite(edges)) or not rising.all():
        raise RunFileError(f"{where}.edges: each frame's edges must be finite and increasing")
    extra = {}
    for k in _EXTRA:
        a = column(k, required=False)
        extra[k] = np.zeros(n, np.int64) if a is None else counts_of(a, k)
        if len(extra[k]) != n:
            raise RunFileError(f"{where}.{k}: {len(extra[k])} values for {n} frames")
    at = np.concatenate([[0], np.cumsum(bins)]).tolist()
    edge_at = np.concatenate([[0], ends]).tolist()
    order = np.argsort(step, kind="stable").tolist() if n > 1 and np.any(step[1:] < step[:-1]) else range(n)
    steps, below, above, nan, inf = (step.tolist(), *(extra[k].tolist() for k in _EXTRA))
    return [HistFrame(steps[i], edges[edge_at[i]:edge_at[i + 1]], counts[at[i]:at[i + 1]], below[i], above[i],
                      nan[i], inf[i]) for i in order]
