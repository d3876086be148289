"""The confusion view: a class x class count matrix, optionally row-normalised.

Row ``i`` is the true class, column ``j`` the predicted one; cell ``(i, j)``
counts examples of class ``i`` predicted as ``j``. With ``normalize="row"``
each row is divided by its total on the host (float32 reciprocal, then one
multiply, the same for the GPU and the twin), so a cell reads as the share of
class ``i`` predicted as ``j`` — per-class recall on the diagonal. Rows with no
examples stay empty (drawn as NaN, and counted), never 0/0 = 0. It is drawn by
the heatmap's passes, so it inherits their byte-exact twin.
"""

from __future__ import annotations

import numpy as np

from .. import chrome
from .._arrays import to_host
from ._source import Source
from .heatmap import Heatmap

F32 = np.float32


class Confusion(Heatmap):
    """A confusion matrix panel.

    Parameters
    ----------
    counts : array-like (C, C), optional
        Integer (or float) counts; a live tensor through ``caliper_vk.attach``.
    normalize : "none" | "row"
    colormap : str
    """

    def __init__(self, counts=None, *, normalize: str = "none", colormap: str = "viridis"):
        if normalize not in ("none", "row"):
            raise ValueError(f"normalize {normalize!r} is not one of 'none', 'row'")
        self.normalize = normalize
        self.counts_source = None
        super().__init__(colormap=colormap, value_range=(0.0, 1.0))
        if counts is not None:
            self.set_data(counts)

    def set_data(self, counts) -> None:
        a = to_host(counts, "confusion counts")
        if a.dtype.kind not in "fiu":
            raise TypeError(f"confusion counts have dtype {a.dtype}; give integer (or float) counts")
        self.set_source(Source(np.ascontiguousarray(a, dtype=F32)))
        self.data_version += 1

    def set_source(self, source: Source) -> None:
        shape = source.shape
        if len(shape) != 2 or shape[0] != shape[1]:
            raise ValueError(f"confusion counts have shape {shape}; expected a square (classes, classes) "
                             "matrix: rows are true classes, columns predicted ones")
        if self.counts_source is not None and self.counts_source is not source:
            self.counts_source.close()
        self.counts_source = source
        self._refresh_display()

    def _refresh_display(self) -> None:
        counts = self.counts_source.float32()
        if self.normalize == "row":
            totals = counts.astype(np.float64).sum(axis=1)
            with np.errstate(divide="ignore"):
                recip = np.where(totals > 0, 1.0 / totals, np.nan).astype(F32)
            shown = (counts * recip[:, None]).astype(F32)
            self.value_range = (0.0, 1.0)
            # the heatmap's own source is the host array being shown (staged every frame)
            self.source = Source(np.ascontiguousarray(shown, dtype=F32))
        else:
            top = float(np.nanmax(counts)) if counts.size and np.isfinite(counts).any() else 1.0
            self.value_range = (0.0, max(top, 1.0))
            self.source = self.counts_source  # drawn straight from the counts (zero-copy when live)
        self._range_cache = None
        self._dirty.add("data")

    @property
    def gpu_reads_source(self) -> bool:
        """False when the panel shows a host-computed transform of the tensor (row shares)."""
        return self.normalize != "row"

    host_reason = "row shares are computed on the host each frame"

    def legend(self) -> list:
        lo, hi = self.range
        label = "share of row" if self.normalize == "row" else "count"
        return chrome.range_legend(lo, hi, self._lut, label)

    def prepare(self) -> None:
        if self.counts_source is not None and self.counts_source.live:
            self._refresh_display()
        super().prepare()

    def close(self) -> None:
        if self.counts_source is not None:
            self.counts_source.close()
            self.counts_source = None
        super().close()
