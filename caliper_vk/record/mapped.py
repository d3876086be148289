"""Memory-mapped run sidecars and their resident pages.

A ``run.json``'s arrays are views of its sidecar, mapped read-only (:func:`map_file`): nothing
is read until it is touched. But a page once touched stays in the process's resident set, so a
scan over every column of a 1M-step run (a scale decision, the per-pixel columns of a trace)
would leave the whole file resident: 88 MB of a 10-scalar run, counted in the dashboard's peak
memory though the kernel's page cache holds it anyway. :func:`release_pages` hands those pages
back (``madvise(MADV_DONTNEED)``: a read-only file mapping loses nothing; the next touch maps the
page again from the page cache, a minor fault). The dashboard calls it after each piece of work
that scanned columns, so its resident set holds one column's scan at a time, not the run.
"""

from __future__ import annotations

import mmap
import weakref

import numpy as np

# (first address, end address, the mapping) of every sidecar mapped and not yet collected
_MAPPINGS: list[tuple[int, int, weakref.ref]] = []


def map_file(f, size: int) -> np.ndarray:
    """The open file ``f`` (``size`` bytes, > 0) mapped read-only, as a uint8 array."""
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    a = np.frombuffer(m, np.uint8)
    start = a.ctypes.data
    _MAPPINGS[:] = [e for e in _MAPPINGS if e[2]() is not None]
    _MAPPINGS.append((start, start + size, weakref.ref(m)))
    return a


def release_pages(*arrays: np.ndarray) -> int:
    """Drop the resident pages of ``arrays`` that lie in a mapped sidecar (all sidecars' pages
    when none are given). Arrays elsewhere are left alone. Returns the bytes advised."""
    dropped = 0
    for start, end, ref in list(_MAPPINGS):
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
