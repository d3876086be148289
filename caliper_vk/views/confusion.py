"""The confusion view: a class x class count matrix, optionally row-normalised.

Row ``i`` is the true class, column ``j`` the predicted one; cell ``(i, j)``
counts examples of class ``i`` predicted as ``j``. Everything that depends on the
counts is made on the device, in the frame that draws them, by the cells pass
(``engine/shaders/confusion_cells.comp``), which reads the counts where they live:

- with ``normalize="row"`` each row is summed in a fixed order (an exact integer
  sum for int32/uint8 counts, a left-to-right float32 sum for float counts) and
  divided by its total without a division: the share is count x 1/total, the
  reciprocal a power of two through the exponent bits times a Newton reciprocal of
  the mantissa (:func:`recip_positive`), so a cell's colour reads as the share of
  class ``i`` predicted as ``j`` (per-class recall on the diagonal). Rows with no
  examples stay empty (drawn as NaN, and counted), never 0/0 = 0. Shares span
  ``(0, 1)``;
- counts are coloured over ``(0, 1)`` grown to hold every finite count (so
  ``(0, max(1, largest))`` for counts of 0 or more), by the range pass's
  ``MODE_GROW``;
- each cell carries its count as text (up to ``MAX_TEXT_CLASSES`` classes, when
  the cells are big enough for glyphs): :func:`count_text`'s rule, formatted into
  glyph indices on the device, clipped as :func:`caliper_vk.views.textgrid.encode`
  clips.

So a tensor read in place shows its counts, shares and colours of the frame, with
no host read. The values and text are then drawn by the textgrid's passes; the
numpy twin is :func:`count_text`, :func:`row_shares` and the textgrid's twin.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .. import chrome
from .._arrays import to_host
from ..engine.shaders.params import RANGE as RG, ParamBlock
from ..engine.shaders.passes import Pass, params, ro, wo
from . import _exact
from ._base import pipeline
from ._registry import Sample, register_view
from ._source import Source
from .textgrid import TEXTGRID, TextGrid, _string_table, glyph_table

# -- the declaration: read by the build from this file (docs/architecture.md, "A view is one unit") --
# The confusion view's cells pass (confusion_cells.comp): one invocation per row of the N x N counts
# (at BASE, in DTYPE) writes the values the text grid draws (the counts as float32, or with
# NORMALIZE the row shares) and, with TEXT, each cell's count as a string of the strings buffer
# (STRIDE words a string: its length, then glyph indices, clipped to FIT glyphs and ended by the
# ELLIPSIS glyph when clipped; the glyph of ASCII character c is c - ASCII_BASE).
CONFUSION = ParamBlock("confusion_params", "CF", [
    "N", "BASE", "DTYPE", "NORMALIZE", "TEXT", "FIT", "STRIDE", "ASCII_BASE", "ELLIPSIS",
])
# the cells pass: row shares and the cells' count text, before the textgrid's passes
CELLS_PASS = Pass("confusion_cells", CONFUSION, [
    params(), ro("data"), wo("shown", "float"),
    wo("strings", note="cell i's string at i * STRIDE: length, glyphs")])
CF = CONFUSION

F32 = np.float32
MAX_TEXT_CLASSES = 64  # beyond this the cells are too small for numbers on any screen
TINY = Fraction(1, 10 ** 10)  # non-whole counts smaller than this show as "~0"


def count_string(v) -> str:
    """One count as text (the rule the cells pass formats on the device, bit for bit): whole
    numbers as integers, others as ``f"{v:.3g}"``, non-finite ones empty; the two ends no
    64-bit integer holds: non-whole ones below 1e-10 in magnitude ``"~0"``, whole ones of
    2^64 or more ``">2^64"`` / ``"<-2^64"``."""
    v = float(F32(v))
    if not math.isfinite(v):
        return ""
    if v.is_integer():
        if abs(v) >= 2.0 ** 64:
            return "<-2^64" if v < 0 else ">2^64"
        return str(int(v))
    if Fraction(abs(v)) < TINY:
        return "~0"
    return f"{v:.3g}"


def count_text(counts: np.ndarray) -> np.ndarray:
    """Each cell's count as a string (:func:`count_string`)."""
    counts = np.asarray(counts, F32)
    out = np.empty(counts.shape, dtype=object)
    for idx in np.ndindex(counts.shape):
        out[idx] = count_string(counts[idx])
    return out


def recip_positive(t) -> np.float32:
    """``recip_positive`` in confusion_cells.comp: 1/t for a positive normal float32 t, no
    division (2^-e times ``recip_mantissa`` of the mantissa; 0 where that is subnormal)."""
    tb = int(_exact.bits(F32(t)))
    e = (tb >> 23) - 127
    r = _exact.recip_mantissa(np.uint32((tb & 0x007FFFFF) | 0x3F800000).view(F32))
    rb = int(_exact.bits(r))
    biased = (rb >> 23) - e
    if biased <= 0:
        return F32(0.0)
    return np.uint32((rb & 0x807FFFFF) | (biased << 23)).view(F32)


def total_reciprocal(total) -> np.float32:
    """``total_reciprocal`` in confusion_cells.comp: NaN for a NaN or non-positive total (a
    class with no examples), 0 for +Inf, else :func:`recip_positive`."""
    total = F32(total)
    cls = int(_exact.classify(total))
    if cls == _exact.POSINF:
        return F32(0.0)
    if cls != _exact.FINITE or not total > 0 or _exact.ftz(total) == 0:
        return F32(np.nan)
    return recip_positive(total)


def row_totals(source: Source) -> np.ndarray:
    """Each row's total as the cells pass sums it: int32/uint8 counts exactly (an int32 sum,
    wrapping as the shader's does, then rounded to float32); float counts left to right in
    float32 with subnormal partial sums flushed."""
    n = source.shape[0]
    if source.dtype in ("int32", "uint8"):
        sums = source.array.reshape(n, n).astype(np.int64).sum(axis=1)
        return ((sums + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(F32)
    counts = source.float32().reshape(n, n)
    out = np.empty(n, F32)
    with np.errstate(all="ignore"):
        for r in range(n):
            row = counts[r]
            small = (row != 0) & (np.abs(row) < F32(2.0 ** -100))
            if not small.any():  # no partial sum can be subnormal: a sequential float32 sum
                out[r] = np.add.accumulate(row, dtype=F32)[-1] if n else F32(0)
                continue
            s = F32(0.0)
            for v in row:
                s = _exact.ftz(F32(s + v))
            out[r] = s
    return out


def row_shares(source: Source) -> np.ndarray:
    """The shares the cells pass writes: count x :func:`total_reciprocal` of the row's total,
    flushed, in float32."""
    counts = source.float32()
    recips = np.array([total_reciprocal(t) for t in row_totals(source)], F32).reshape(-1, 1)
    with np.errstate(all="ignore"):
        return _exact.ftz(counts * recips)


@register_view("confusion", block=TEXTGRID,
               passes=(CELLS_PASS, "heatmap_stats", "range_resolve", "textgrid"), inputs=("counts",),
               tests=("tests/test_confusion.py",),
               sample=Sample((), (240, 120), values=((5, 1, 0), (2, 7, 1), (0, 0, 9))))
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
        self.classes = None if classes is None else [str(c) for c in classes]
        self.counts_in_cells = bool(counts_in_cells)
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
        """Draw the counts straight from ``source`` (a live tensor is read in place: the cells
        pass makes its shares and text on the device)."""
        shape = source.shape
        if len(shape) != 2 or shape[0] != shape[1]:
            raise ValueError(f"confusion counts have shape {shape}; expected a square (classes, classes) "
                             "matrix: rows are true classes, columns predicted ones")
        if self.classes is not None and len(self.classes) != shape[0]:
            raise ValueError(f"classes has {len(self.classes)} names for {shape[0]} classes; "
                             "pass one name per row of the counts")
        self._set_source(source)
        names = self.classes or [str(i) for i in range(shape[0])]
        self.set_labels(names, names)

    @property
    def data(self) -> np.ndarray:
        """The values the cells are coloured by, as the cells pass writes them (the twin): the
        counts as float32, or with ``normalize="row"`` the row shares (:func:`row_shares`)."""
        if self.normalize == "row":
            return row_shares(self.source)
        return self.source.float32()

    def _text_on(self, lay: dict) -> bool:
        return (self.counts_in_cells and self.source.shape[0] <= MAX_TEXT_CLASSES and lay["fit"] > 0
                and not lay["empty"])

    @property
    def tokens(self) -> list[list[str]] | None:
        """The cells' text as the host sees the counts (:func:`count_text`); None when the cells
        carry none, or when the host's view of the counts is not the frame's (a GPU tensor read in
        place: the device writes the frame's text, the host holds only the copy made at attach)."""
        if not self.counts_in_cells or self.source.shape[0] > MAX_TEXT_CLASSES or not self.source.current:
            return None
        return count_text(self.source.float32()).tolist()

    def strings(self, lay: dict) -> np.ndarray:
        """The labels, and each cell's count as the cells pass writes it (the twin's strings)."""
        out = super().strings(lay)
        if self._text_on(lay):
            n = self.source.shape[0]
            cells = _string_table(list(count_text(self.source.float32()).reshape(-1)), lay["fit"])
            out[: n * n, : cells.shape[1]] = cells
        return out

    def _uploaded_strings(self, lay: dict) -> np.ndarray:
        """The labels only: the cells pass writes the cells' text, from the counts the frame reads."""
        return super().strings(lay)

    def _cells_params(self, lay: dict, base: int, dtype: int):
        return CF.values(n=self.source.shape[0], base=base, dtype=dtype, normalize=int(self.normalize == "row"),
                         text=int(self._text_on(lay)), fit=lay["fit"],
                         stride=1 + max(lay["fit"], lay["label_fit"], lay["col_fit"]), ascii_base=ASCII_BASE,
                         ellipsis=glyph_table()[1]["ellipsis"])

    def _drawn_input(self, lay: dict) -> tuple[int, int]:
        """The cells pass reads the counts (bound here) and writes float32 values at ``shown``,
        which the stats and drawing passes read."""
        _, base, dtype = self._data_binding()
        self._upload("cells_params", self._cells_params(lay, base, dtype))
        n = self.source.shape[0]
        self._buffer("shown", 4 * n * n, host_visible=False)
        return 0, 0

    def _record_drawn(self, rec) -> tuple:
        b = self._buffers
        cells = pipeline(self.device, "confusion_cells").bind(
            params=b["cells_params"], data=self._bound["data"], shown=b["shown"], strings=b["strings"])
        rec.dispatch(cells, max(1, -(-self.source.shape[0] // 64)))
        rec.barrier()
        return b["shown"], [cells]

    def range_spec(self) -> tuple[int, float, float]:
        """Counts: ``(0, 1)`` grown to the largest finite count, by the frame's own stats pass
        (so a live tensor's colours follow its counts with no host read); shares: ``(0, 1)``."""
        return (RG.MODE_FIXED if self.normalize == "row" else RG.MODE_GROW), 0.0, 1.0

    def legend(self) -> list:
        lo, hi = self.range
        label = "share of row" if self.normalize == "row" else "count"
        return [*chrome.range_legend(lo, hi, self._lut, label), ("  rows true, cols predicted", chrome.DIM)]


def _ascii_base() -> int:
    """The glyph of ASCII character c is c - this (checked for every character the counts use)."""
    from .. import glyphs

    base = ord("0") - int(glyphs.encode("0")[0])
    for ch in "0123456789-.e+~<>^":
        if ord(ch) - int(glyphs.encode(ch)[0]) != base:
            raise RuntimeError(f"the glyph atlas does not hold {ch!r} at its ASCII place; the confusion "
                               "view's cells pass needs the digits and '-.e+~<>^' in ASCII order")
    return base


ASCII_BASE = _ascii_base()
