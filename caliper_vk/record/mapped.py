"""Memory-mapped run sidecars and their resident pages.

A ``run.json``'s arrays are views of its sidecar, mapped read-only (:func:`map_file`): nothing
is read until it is touched. But a page once touched stays in the process's resident set, so a
scan over every column of a 1M-step run (a scale decision, the per-pixel columns of a trace)
would leave the whole file resident: 88 MB of a 10-scalar run, counted in the dashboard's peak
memory though the kernel's page cache holds it anyway. :func:`release_pages` hands those pages
back (``madvise(MADV_DONTNEED)``: a read-only file mapping loses nothing; the next touch maps the
page again from the page cache, a minor fault). The dashboard calls it after each piece of work
that scanned columns, so its resident set holds one column's scan at a time, not the run.

A touch maps more than a page: the kernel maps a whole page-cache folio (up to 2 MB here) on a
fault. A cursor readout reads one value of each series and searches a step column: through the
mapping that maps a folio per value and a few per search, 6 MB for a 10-scalar run, held until
released. :func:`item` and :func:`search` read those few values with ``pread`` instead (the
page cache's pages, nothing mapped); arrays in no sidecar are indexed as usual.
"""

from __future__ import annotations

import itertools
import mmap
import os
import weakref

import numpy as np

# (first address, end address, the mapping, a descriptor of its file, its serial) of every
# sidecar mapped and not yet collected
_MAPPINGS: list[tuple[int, int, weakref.ref, int, int]] = []
_serials = itertools.count()
_SEARCH_BLOCK = 512  # elements: a search reads single values until its range fits one read of these
_searched: dict = {}  # (mapping, offset, length, stride, dtype, key, side) -> index (files never change)


def map_file(f, size: int) -> np.ndarray:
    """The open file ``f`` (``size`` bytes, > 0) mapped read-only, as a uint8 array."""
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    a = np.frombuffer(m, np.uint8)
    start = a.ctypes.data
    fd = os.dup(f.fileno())  # for item() and search(): closed with the mapping
    weakref.finalize(m, os.close, fd)
    _MAPPINGS[:] = [e for e in _MAPPINGS if e[2]() is not None]
    _MAPPINGS.append((start, start + size, weakref.ref(m), fd, next(_serials)))
    return a


def _in_file(a: np.ndarray):
    """``(descriptor, file offset of a[0], the mapping's serial)`` when the 1-D array ``a`` lies
    in a live sidecar mapping, else None (also where there is no ``os.pread``: Windows reads
    through the mapping)."""
    if not _MAPPINGS or not hasattr(os, "pread") or not isinstance(a, np.ndarray) or a.ndim != 1 \
            or not a.size:
        return None
    lo = a.ctypes.data
    hi = lo + (a.size - 1) * a.strides[0]
    for start, end, ref, fd, serial in _MAPPINGS:
        m = ref()
        if m is not None and not m.closed and start <= min(lo, hi) and max(lo, hi) + a.itemsize <= end:
            return fd, lo - start, serial
    return None


def item(a: np.ndarray, i: int):
    """``a[i]`` of a 1-D array; read from the file (nothing mapped) when ``a`` lies in a sidecar."""
    where = _in_file(a)
    if where is None:
        return a[i]
    i = int(i)
    if not -len(a) <= i < len(a):
        raise IndexError(f"index {i} is out of bounds for a column of {len(a)}")
    i %= len(a)
    fd, at, _ = where
    return np.frombuffer(os.pread(fd, a.itemsize, at + i * a.strides[0]), a.dtype)[0]


def read_range(a: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """``a[lo:hi]`` of a 1-D array, read-only; in a sidecar, read with one ``pread`` into memory of
    its own (nothing mapped), else a view."""
    where = _in_file(a)
    if where is None or a.strides[0] != a.itemsize:
        out = a[lo:hi].view()
        out.flags.writeable = False
        return out
    lo, hi = max(0, lo), min(len(a), hi)
    fd, at, _ = where
    return np.frombuffer(os.pread(fd, max(hi - lo, 0) * a.itemsize, at + lo * a.itemsize), a.dtype)


def search(a: np.ndarray, key, side: str = "left") -> int:
    """``np.searchsorted(a, key, side)`` of a sorted 1-D array; in a sidecar, by reading a few
    values and then one block with ``pread`` (nothing mapped; the answer is kept, as the file
    never changes: the columns of a run share one step column, searched once per cursor)."""
    where = _in_file(a)
    if where is None:
        return int(np.searchsorted(a, key, side=side))
    fd, at, serial = where
    memo = (serial, at, len(a), a.strides[0], a.dtype.str, key, side)
    hit = _searched.get(memo)
    if hit is not None:
        return hit
    lo, hi = 0, len(a)
    while hi - lo > _SEARCH_BLOCK:
        mid = (lo + hi) // 2
        v = np.frombuffer(os.pread(fd, a.itemsize, at + mid * a.strides[0]), a.dtype)[0]
        if v < key or (side == "right" and v == key):
            lo = mid + 1
        else:
            hi = mid
    if a.strides[0] == a.itemsize:
        block = np.frombuffer(os.pread(fd, (hi - lo) * a.itemsize, at + lo * a.itemsize), a.dtype)
    else:
        block = np.array([item(a, k) for k in range(lo, hi)], a.dtype)
    out = lo + int(np.searchsorted(block, key, side=side))
    if len(_searched) > 256:
        _searched.clear()
    _searched[memo] = out
    return out


def release_pages(*arrays: np.ndarray) -> int:
    """Drop the resident pages of ``arrays`` that lie in a mapped sidecar (all sidecars' pages
    when none are given). Arrays elsewhere are left alone. Returns the bytes advised."""
    dropped = 0
    for start, end, ref, *_ in list(_MAPPINGS):
        m = ref()
        if m is None or m.closed:
            continue
        spans = [(0, end - start)] if not arrays else []
        for a in arrays:
            if not isinstance(a, np.ndarray) or not a.size:
                continue
            lo = a.ctypes.data
            hi = lo + a.nbytes if a.flags.c_contiguous else lo + (a.size - 1) * abs(a.strides[0]) + a.itemsize
            lo, hi = max(lo, start), min(hi, end)
            if lo < hi:
                spans.append((lo - start, hi - start))
        for lo, hi in spans:
            lo -= lo % mmap.PAGESIZE  # whole pages: a neighbour's page comes back on its next touch
            if hasattr(m, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
                m.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
                dropped += hi - lo
    return dropped
