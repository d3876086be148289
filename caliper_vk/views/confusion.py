"""The confusion view: a class x class count matrix, optionally row-normalised.

Row ``i`` is the true class, column ``j`` the predicted one; cell ``(i, j)``
counts examples of class ``i`` predicted as ``j``. With ``normalize="row"``
each row is divided by its total on the host (float32 reciprocal, then one
multiply, the same for the GPU and the twin), so a cell's colour reads as the
share of class ``i`` predicted as ``j`` — per-class recall on the diagonal.
Rows with no examples stay empty (drawn as NaN, and counted), never 0/0 = 0.
Counts are coloured over ``(0, 1)`` grown to hold every finite count (so
``(0, max(1, largest))`` for counts of 0 or more), resolved on the device in the
frame that draws them (the range pass's ``MODE_GROW``): a tensor read in place is
coloured by the counts that frame read, with no host read. Shares span ``(0, 1)``.
Each cell carries its count as text (up to ``MAX_TEXT_CLASSES`` classes, when
the cells are big enough for glyphs), and the rows and columns their class
names. The text is laid out on the host from the host's view of the counts, so a
GPU tensor read in place (whose host view is the copy made at attach) is drawn
without it: colours only, never stale numbers. It is drawn by the textgrid's
passes, so it inherits their byte-exact twin.
"""

from __future__ import annotations

import numpy as np

from .. import chrome
from .._arrays import to_host
from ..engine.shaders.params import RANGE as RG
from ._source import Source
from .textgrid import TextGrid

F32 = np.float32
MAX_TEXT_CLASSES = 64  # beyond this the cells are too small for numbers on any screen


def count_text(counts: np.ndarray) -> np.ndarray:
    """Each cell's count as a string: whole numbers as integers, others to 3 digits,
    non-finite ones empty."""
    finite = np.isfinite(counts)
    whole = finite & (counts == np.round(counts))
    out = np.empty(counts.shape, dtype=object)
    for idx in np.ndindex(counts.shape):
        v = float(counts[idx])
        out[idx] = (str(int(v)) if whole[idx] else f"{v:.3g}") if finite[idx] else ""
    return out


class Confusion(TextGrid):
    """A confusion matrix panel.

    Parameters
    ----------
    counts : array-like (C, C), optional
        Integer (or float) counts; a live tensor through ``caliper_vk.attach``.
    normalize : "none" | "row"
        Colour by the count, or by the share of the row (the count stays the text).
    colormap : str
    classes : sequence of str, optional
        Class names for the row and column labels (default ``0 .. C-1``).
    counts_in_cells : bool
        Write each cell's count in it (when the glyphs fit).
    """

    def __init__(self, counts=None, *, normalize: str = "none", colormap: str = "viridis",
                 classes=None, counts_in_cells: bool = True):
        if normalize not in ("none", "row"):
            raise ValueError(f"normalize {normalize!r} is not one of 'none', 'row'")
        self.normalize = normalize
        self.counts_source = None
        self.classes = None if classes is None else [str(c) for c in classes]
        self.counts_in_cells = bool(counts_in_cells)
        self._texted = None  # the counts whose text the cells carry
        # counts: (0, 1) grown on the device to the largest count (range_spec); shares: (0, 1)
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
        if self.classes is not None and len(self.classes) != shape[0]:
            raise ValueError(f"classes has {len(self.classes)} names for {shape[0]} classes; "
                             "pass one name per row of the counts")
        if self.counts_source is not None and self.counts_source is not source:
            self.counts_source.close()
        self.counts_source = source
        self._texted = None
        self._refresh_display()
        names = self.classes or [str(i) for i in range(shape[0])]
        self.set_labels(names, names)

    def _refresh_display(self) -> None:
        if self.normalize == "row":
            counts = self.counts_source.float32()
            totals = counts.astype(np.float64).sum(axis=1)
            with np.errstate(divide="ignore"):
                recip = np.where(totals > 0, 1.0 / totals, np.nan).astype(F32)
            shown = (counts * recip[:, None]).astype(F32)
            # the grid's own source is the host array being shown (staged every frame)
            self.source = Source(np.ascontiguousarray(shown, dtype=F32))
        else:
            self.source = self.counts_source  # drawn straight from the counts (zero-copy when live)
        self._dirty.add("data")
        self._update_text()

    def _update_text(self) -> None:
        """The cells' text follows the counts (re-laid out only when they change). A GPU tensor
        read in place has no text: the host holds only the copy made at attach, and its counts
        would be stale numbers beside current colours."""
        source = self.counts_source
        if not self.counts_in_cells or source.shape[0] > MAX_TEXT_CLASSES or not source.current:
            if self._ids is not None:
                self.set_tokens(None)
            return
        counts = source.float32()
        if self._texted is not None and np.array_equal(self._texted, counts, equal_nan=True):
            return
        self._texted = counts.copy()
        self.set_tokens(count_text(counts))

    def range_spec(self) -> tuple[int, float, float]:
        """Counts: ``(0, 1)`` grown to the largest finite count, by the frame's own stats pass
        (so a live tensor's colours follow its counts with no host read); shares: ``(0, 1)``."""
        return (RG.MODE_FIXED if self.normalize == "row" else RG.MODE_GROW), 0.0, 1.0

    @property
    def gpu_reads_source(self) -> bool:
        """False when the panel shows a host-computed transform of the tensor (row shares)."""
        return self.normalize != "row"

    host_reason = "row shares are computed on the host each frame"

    def legend(self) -> list:
        lo, hi = self.range
        label = "share of row" if self.normalize == "row" else "count"
        return [*chrome.range_legend(lo, hi, self._lut, label), ("  rows true, cols predicted", chrome.DIM)]

    def prepare(self) -> None:
        if self.counts_source is not None and self.counts_source.live:
            self._refresh_display()
        super().prepare()

    def close(self) -> None:
        if self.counts_source is not None:
            self.counts_source.close()
            self.counts_source = None
        super().close()
