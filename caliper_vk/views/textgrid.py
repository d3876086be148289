"""The textgrid view: a grid of short strings, each cell coloured by a value.

Made for the logit lens (rows = layers, columns = positions; each cell shows
the top token's text and is coloured by its probability), it draws any
``rows x cols`` array of values with one string per cell: row labels on the
left, column labels above, cells by integer nearest-neighbour indexing (the
heatmap's rule), colours from a matplotlib colormap over a fixed range
(``(0, 1)`` by default, for probabilities) or ``"auto"``/``"symmetric"``.
NaN, +Inf and -Inf cells get their own colours and are counted, as are values
outside a fixed range (drawn in the end colours).

Strings are laid out on the host into glyph indices (clipped to what fits a
cell; a clipped string ends in an ellipsis) and drawn by
``engine/shaders/textgrid.comp`` from the glyph atlas baked at build time,
blended with integers only. The text colour (dark or light) is chosen in the
shader from an integer luminance of the cell's colour, so it stays readable
on every colour, live. A space shows as a middle dot and a newline as a return
arrow (both derived from the atlas), other non-ASCII characters as ``?``.
Cells too small for a glyph still show their colour; labels give way to the
cells on a small panel. Counting uses the heatmap's stats pass.
:meth:`TextGrid.reference` is the numpy twin.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .. import chrome, colormaps, glyphs
from .._arrays import as_float32, to_host
from . import _exact
from ..engine.shaders.params import ParamBlock, ParamValues
from ..engine.shaders.passes import Pass, image, params, ro
from ._base import RangedView, pipeline, record_range_pass, resolve_range, wide
from ._registry import Sample, register_view
from ._source import Source
from .heatmap import (HEATMAP as HM, NAN_COLOR, NEGINF_COLOR, POSINF_COLOR, STAT_NAMES, STATS_BYTES,
                      record_stats_pass, reference_stats)

# -- the declaration: read by the build from this file (docs/architecture.md, "A view is one unit") --
TEXTGRID = ParamBlock("textgrid_params", "TG", [
    "ROWS", "COLS", "W", "H", "RECT_X", "RECT_Y", "BASE", "DTYPE",
    "GX", "GY", "GW", "GH", "GLYPH_W", "GLYPH_H", "STRIDE", "AVAIL_W", "TEXT_DY", "LINE", "TOP",
    "LABEL_PAD", "ROW_LABELS", "COL_LABELS", "BG", "NAN", "POSINF", "NEGINF", "DARK", "LIGHT", "LABEL",
    "LUM_SPLIT",
], specialization=[("SPEC_WIDE", 0)])  # 1: a pixel-to-cell product may pass 2^32 (muldiv.glsl)
TEXTGRID_PASS = Pass("textgrid", TEXTGRID, [params(), ro("data"), ro("colors"), ro("strings"),
                                            ro("atlas", note="coverage per texel"),
                                            ro("stats", note="the heatmap stats words"), image()])
TG = TEXTGRID

F32 = np.float32

BACKGROUND = (22, 22, 26, 255)
DARK_TEXT = (16, 16, 20, 255)
LIGHT_TEXT = (245, 245, 245, 255)
LABEL_COLOR = (170, 170, 180, 255)
# light text on colours darker than this (54 r + 183 g + 19 b, i.e. 256 x luma): the point where
# white and black text have equal contrast (relative luminance ~0.18, gamma-encoded luma ~117)
LUM_SPLIT = 117 * 256
LABEL_PAD = 4  # pixels between a row label and the grid
MAX_LABEL_CHARS = 8
CELL_PAD = 1  # at least this many pixels between a cell's text and its edges
LINE_MIN_CELL = 6  # cells at least this big (both ways) get a one-pixel separating line


@lru_cache(maxsize=1)
def glyph_table() -> tuple[np.ndarray, dict[str, int]]:
    """The baked atlas, and the indices of the glyphs shown in place of whitespace and
    for clipping: ``{"middot": "·" (a space), "newline": "↵", "ellipsis": "…"}``."""
    atlas, _ = glyphs.atlas()
    return atlas, {name: int(glyphs.encode(ch)[0])
                   for name, ch in (("middot", "·"), ("newline", "↵"), ("ellipsis", "…"))}


def encode(text: str, fit: int) -> np.ndarray:
    """Glyph indices for ``text`` as drawn in room for ``fit`` glyphs (clipped with an ellipsis)."""
    _, extra = glyph_table()
    codes = []
    for ch in text:
        if ch == " ":
            codes.append(extra["middot"])
        elif ch == "\n":
            codes.append(extra["newline"])
        else:  # anything outside the atlas becomes '?'
            codes.append(int(glyphs.encode(ch)[0]))
    if len(codes) > fit:
        codes = [*codes[:fit - 1], extra["ellipsis"]] if fit >= 2 else codes[:fit]
    return np.asarray(codes, np.uint32)


_ENCODED: dict = {}  # (text, fit) -> encode(text, fit): a grid's counts and labels repeat


def _string_table(strings, fit: int) -> np.ndarray:
    """(len(strings), 1 + fit) words: a length, then the glyph indices."""
    out = np.zeros((len(strings), 1 + fit), np.uint32)
    for i, s in enumerate(strings):
        codes = _ENCODED.get((s, fit))
        if codes is None:
            if len(_ENCODED) >= 8192:
                _ENCODED.clear()
            codes = _ENCODED[(s, fit)] = encode(s, fit)
        out[i, 0] = len(codes)
        out[i, 1: 1 + len(codes)] = codes
    return out


def _span_start(i, n: int, size: int):
    """The first pixel of cell(s) ``i`` of ``n`` over ``size`` pixels (ceil(i * size / n))."""
    return (np.asarray(i, np.int64) * size + n - 1) // n


@register_view("textgrid", block=TG, passes=("heatmap_stats", "range_resolve", TEXTGRID_PASS), inputs=("data",),
               tests=("tests/test_textgrid_exact.py", "tests/test_ranges_on_device.py",
                      "tests/test_ranges_discrete.py"),
               # its model training costs minutes and draws nothing a profile changes (the other
               # text-grid tests cover its drawing)
               profile_skip=("tests/test_textgrid_exact.py::test_logit_lens_of_a_trained_tiny_model",),
               sample=Sample((6, 8), (320, 160), nan_every=11))
class TextGrid(RangedView):
    """A grid of strings (tokens), each cell coloured by a value.

    Parameters
    ----------
    data : array-like (rows, cols), optional
        The values (1-D is one row). Any numeric dtype; drawn as float32.
    tokens : (rows, cols) strings, optional
        The text of each cell (nested lists or an array of str).
    ids, vocab : optional
        Instead of ``tokens``: integer token ids (rows, cols) and the vocabulary
        (a sequence of strings indexed by id).
    row_labels, col_labels : sequences of str, optional
        One per row / column (a plain string for ``col_labels`` gives one
        character per column, e.g. the input text of a logit lens).
    colormap : str
        A matplotlib colormap.
    value_range : (lo, hi) | "auto" | "symmetric"
        ``(0, 1)`` by default (probabilities); values outside are drawn in the
        end colours and counted.
    margin_top : int
        Pixels kept free at the top (sessions draw titles in a bar above the view,
        so only a view drawn on a canvas of your own needs it).
    """

    def __init__(self, data=None, *, tokens=None, ids=None, vocab=None, row_labels=None,
                 col_labels=None, colormap: str = "viridis", value_range=(0.0, 1.0),
                 margin_top: int = 0):
        super().__init__()
        self._lut = colormaps.lut(colormap)
        self.colormap = colormap
        resolve_range(np.zeros(1, F32), value_range)  # a bad spec fails here, not at draw time
        self.value_range = value_range
        if int(margin_top) < 0:
            raise ValueError(f"margin_top must be >= 0 pixels, got {margin_top!r}")
        self.margin_top = int(margin_top)
        self.source = Source(np.zeros((0, 0), F32))
        self._ids: np.ndarray | None = None  # (rows, cols) indices into self._vocab
        self._vocab: list[str] = []
        self.row_labels: list[str] | None = None
        self.col_labels: list[str] | None = None
        self._text_version = 0
        self._strings_key = None
        if data is not None:
            self.set_data(data)
        if tokens is not None or ids is not None:
            self.set_tokens(tokens, ids=ids, vocab=vocab)
        elif vocab is not None:
            raise ValueError("vocab is given without ids; pass ids= (token ids per cell) with it")
        self.set_labels(row_labels, col_labels)

    # -- inputs ---------------------------------------------------------------------------------
    def set_data(self, data, tokens=None, *, ids=None, vocab=None) -> None:
        """New values (host path), optionally with their tokens."""
        a = as_float32(data, "textgrid data")
        if a.ndim == 1:
            a = a.reshape(1, -1)
        if a.ndim != 2:
            raise ValueError(f"textgrid data has shape {tuple(a.shape)}; the textgrid view takes "
                             "(rows, cols) values (or 1-D for one row)")
        self.data_version += 1
        self._set_grid_source(Source(np.ascontiguousarray(a)), tokens is not None or ids is not None)
        if tokens is not None or ids is not None:
            self.set_tokens(tokens, ids=ids, vocab=vocab)

    def set_source(self, source: Source) -> None:
        """Draw values straight from ``source`` (a live tensor; see ``caliper_vk.attach``)."""
        if len(source.shape) == 1:
            source.array = source.array.reshape(1, -1)
        elif len(source.shape) != 2:
            raise ValueError(f"textgrid data has shape {source.shape}; the textgrid view takes "
                             "(rows, cols) values (or 1-D for one row); index or reshape it")
        self._set_grid_source(source, False)

    def _set_grid_source(self, source: Source, tokens_follow: bool) -> None:
        self._check_shape(source.shape, tokens=not tokens_follow)
        self._set_source(source)

    def _check_shape(self, shape, tokens: bool = True) -> None:
        if tokens and self._ids is not None and self._ids.shape != tuple(shape):
            raise ValueError(f"textgrid values have shape {tuple(shape)} but the tokens have shape "
                             f"{self._ids.shape}; pass tokens of the values' shape (set_tokens)")
        for labels, n, what in ((self.row_labels, shape[0], "row_labels"),
                                (self.col_labels, shape[1], "col_labels")):
            if labels is not None and len(labels) != n:
                raise ValueError(f"{what} has {len(labels)} entries but the values have {n} "
                                 f"{what[:3]}s; pass one label per {what[:3]} (set_labels)")

    def set_tokens(self, tokens=None, *, ids=None, vocab=None) -> None:
        """The text of every cell: ``tokens`` (rows, cols) strings, or ``ids`` + ``vocab``.

        Call it whenever the tokens change (e.g. every step of a logit lens); the
        next frame draws them. ``None`` for both clears the text.
        """
        if tokens is not None and ids is not None:
            raise ValueError("pass either tokens (strings) or ids with vocab, not both")
        if tokens is not None:
            arr = np.asarray(tokens, dtype=object)
            if arr.ndim == 1:
                arr = arr.reshape(1, -1)
            if arr.ndim != 2:
                raise ValueError(f"tokens has shape {arr.shape}; pass one string per cell, "
                                 "(rows, cols)")
            bad = [t for t in arr.reshape(-1) if not isinstance(t, str)]
            if bad:
                raise TypeError(f"tokens must be strings; found {type(bad[0]).__name__} "
                                f"{bad[0]!r} (for token ids pass ids= and vocab=)")
            vocab_arr, inverse = np.unique(arr.astype(str), return_inverse=True)
            new_ids, new_vocab = inverse.reshape(arr.shape), [str(v) for v in vocab_arr]
        elif ids is not None:
            if vocab is None:
                raise ValueError("ids need a vocab (a sequence of strings, one per token id)")
            new_vocab = [str(v) for v in vocab]
            a = to_host(ids, "ids")
            if a.dtype.kind not in "iu":
                raise TypeError(f"ids has dtype {a.dtype}; token ids must be integers")
            a = a.astype(np.int64)
            if a.ndim == 1:
                a = a.reshape(1, -1)
            if a.ndim != 2:
                raise ValueError(f"ids has shape {a.shape}; pass one token id per cell, (rows, cols)")
            if a.size and (a.min() < 0 or a.max() >= len(new_vocab)):
                wrong = int(a.min() if a.min() < 0 else a.max())
                raise ValueError(f"token id {wrong} is outside the vocab of {len(new_vocab)} "
                                 f"entries (0..{len(new_vocab) - 1})")
            new_ids = a
        else:
            self._ids, self._vocab = None, []
            self._text_version += 1
            return
        shape = self.source.shape
        if self.source.array.size or shape != (0, 0):
            if new_ids.shape != shape:
                raise ValueError(f"tokens have shape {new_ids.shape} but the values have shape "
                                 f"{shape}; pass one token per value")
        self._ids, self._vocab = np.ascontiguousarray(new_ids), new_vocab
        self._text_version += 1

    def set_labels(self, rows=None, cols=None) -> None:
        """Row labels (left) and column labels (above); ``None`` leaves that side bare."""
        def as_list(labels, what):
            if labels is None:
                return None
            if isinstance(labels, str):
                return list(labels)
            out = list(labels)
            if not all(isinstance(v, str) for v in out):
                raise TypeError(f"{what} must be strings (or one string, a character per label)")
            return out

        self.row_labels, self.col_labels = as_list(rows, "row_labels"), as_list(cols, "col_labels")
        if self.source.array.size or self.source.shape != (0, 0):
            self._check_shape(self.source.shape)
        self._text_version += 1

    @property
    def tokens(self) -> list[list[str]] | None:
        """The cells' strings as given (rows of lists), or None."""
        if self._ids is None:
            return None
        return [[self._vocab[i] for i in row] for row in self._ids.tolist()]

    # -- layout shared by the shader and the twin ---------------------------------------------------
    def layout(self, width: int, height: int) -> dict:
        """Geometry of a ``width x height`` panel (pixels, in the panel's frame)."""
        table, _ = glyph_table()
        _, glyph_h, glyph_w = table.shape
        rows, cols = self.source.shape
        top = min(self.margin_top, height)
        lab_chars = 0
        if self.row_labels:
            lab_chars = min(MAX_LABEL_CHARS, max(len(s) for s in self.row_labels))
        label_w = lab_chars * glyph_w + 2 * LABEL_PAD if lab_chars else 0
        header_h = glyph_h + 2 if self.col_labels else 0
        if width - label_w < max(width // 2, 1):
            label_w = 0  # labels give way to the cells on a small panel
        if height - top - header_h < max((height - top) // 2, 1):
            header_h = 0
        gx, gy = label_w, top + header_h
        gw, gh = max(0, width - gx), max(0, height - gy)
        empty = rows == 0 or cols == 0 or gw == 0 or gh == 0
        cell_w, cell_h = (gw // cols, gh // rows) if not empty else (0, 0)
        line = int(cell_w >= LINE_MIN_CELL and cell_h >= LINE_MIN_CELL)
        avail_w, avail_h = max(0, cell_w - line), max(0, cell_h - line)
        text_rows = avail_h >= glyph_h
        fit = max(0, (avail_w - 2 * CELL_PAD) // glyph_w) if text_rows else 0
        col_fit = avail_w // glyph_w if header_h else 0
        return {"rows": rows, "cols": cols, "top": top, "gx": gx, "gy": gy, "gw": gw, "gh": gh,
                "line": line, "avail_w": avail_w, "dy": max(0, (avail_h - glyph_h) // 2),
                "fit": fit, "col_fit": col_fit, "label_fit": lab_chars if (label_w and text_rows) else 0,
                "row_labels": int(bool(label_w and text_rows)), "col_labels": int(col_fit > 0),
                "empty": empty, "glyph_w": glyph_w, "glyph_h": glyph_h}

    def strings(self, lay: dict) -> np.ndarray:
        """(rows * cols + rows + cols, stride) words: cells, row labels, column labels."""
        rows, cols = lay["rows"], lay["cols"]
        stride = 1 + max(lay["fit"], lay["label_fit"], lay["col_fit"])
        out = np.zeros((rows * cols + rows + cols, stride), np.uint32)
        if lay["empty"]:
            return out
        if self._ids is not None and lay["fit"]:
            table = _string_table(self._vocab, lay["fit"])
            out[: rows * cols, : table.shape[1]] = table[self._ids.reshape(-1)]
        if self.row_labels and lay["row_labels"]:
            t = _string_table(self.row_labels, lay["label_fit"])
            out[rows * cols: rows * cols + rows, : t.shape[1]] = t
        if self.col_labels and lay["col_labels"]:
            t = _string_table(self.col_labels, lay["col_fit"])
            out[rows * cols + rows:, : t.shape[1]] = t
        return out

    def params(self, width, height, rect_x=0, rect_y=0, base=0, dtype=0, lay=None) -> ParamValues:
        lay = lay or self.layout(width, height)
        rgba = _exact.pack_rgba
        return TG.values(
            rows=lay["rows"], cols=lay["cols"], w=width, h=height, rect_x=rect_x, rect_y=rect_y, base=base,
            dtype=dtype, gx=lay["gx"], gy=lay["gy"], gw=lay["gw"], gh=lay["gh"], glyph_w=lay["glyph_w"],
            glyph_h=lay["glyph_h"], stride=1 + max(lay["fit"], lay["label_fit"], lay["col_fit"]),
            avail_w=lay["avail_w"], text_dy=lay["dy"], line=lay["line"], top=lay["top"], label_pad=LABEL_PAD,
            row_labels=lay["row_labels"], col_labels=lay["col_labels"], bg=rgba(BACKGROUND),
            nan=rgba(NAN_COLOR), posinf=rgba(POSINF_COLOR), neginf=rgba(NEGINF_COLOR), dark=rgba(DARK_TEXT),
            light=rgba(LIGHT_TEXT), label=rgba(LABEL_COLOR), lum_split=LUM_SPLIT)

    def _stats_params(self, base: int, dtype: int) -> ParamValues:
        """The heatmap stats pass's parameters (it counts NaN/Inf and out-of-range values and
        keeps the finite min/max for the resolve pass)."""
        lo, hi = self.count_bounds()
        return HM.values(n=self.source.array.size, base=base, dtype=dtype, lo=lo, hi=hi)

    # -- drawable protocol ------------------------------------------------------------------------
    def legend(self) -> list:
        lo, hi = self.range
        return chrome.range_legend(lo, hi, self._lut)

    def _drawn_input(self, lay: dict) -> tuple[int, int]:
        """Bind the input and return the (byte offset, dtype code) the stats and drawing passes
        read it at; a view that draws values made on the device from its input (the confusion
        view's row shares) binds its own buffer here (:meth:`_record_drawn`)."""
        _, base, dtype = self._data_binding()
        return base, dtype

    def _uploaded_strings(self, lay: dict) -> np.ndarray:
        """The strings the host uploads (:meth:`strings`; the confusion view's cells pass writes
        its cells' own on the device)."""
        return self.strings(lay)

    def _record_drawn(self, rec) -> tuple:
        """Record the passes that make what the stats and drawing passes read, before them: the
        buffer they read and those passes' descriptor sets. The text grid reads its input."""
        return self._bound["data"], []

    def prepare(self) -> None:
        r = self.rect
        lay = self.layout(r.width, r.height)
        base, dtype = self._drawn_input(lay)
        self._upload("params", self.params(r.width, r.height, r.x, r.y, base, dtype, lay))
        self._upload("stats_params", self._stats_params(base, dtype))
        self._upload("range_params", self._range_params())
        key = (self._text_version, tuple(sorted(lay.items())))
        if key != self._strings_key or "strings" not in self._buffers:
            self._upload("strings", self._uploaded_strings(lay))
            self._strings_key = key
        if "all" in self._dirty or "colors" not in self._buffers:
            self._upload("colors", self._lut)
            self._upload("atlas", glyph_table()[0].astype(np.uint32))
        self._dirty.clear()
        self._buffer("stats", STATS_BYTES)
        if getattr(self, "_recorded_n", None) != self.source.array.size:
            self.stale = True

    def record_reads(self, rec) -> None:
        """The passes read the values: they run in the frame's first submission."""
        b = self._buffers
        self._drop_sets()
        data, made = self._record_drawn(rec)
        stats = pipeline(self.device, "heatmap_stats").bind(params=b["stats_params"], data=data,
                                                            stats=b["stats"])
        lay = self.layout(self.rect.width, self.rect.height)
        rows, cols, gw, gh = lay["rows"], lay["cols"], lay["gw"], lay["gh"]
        spec = TG.specialize(SPEC_WIDE=wide(cols * gw + cols - 1, rows * gh + rows - 1))
        draw = pipeline(self.device, "textgrid", spec).bind(
            params=b["params"], data=data, colors=b["colors"], strings=b["strings"], atlas=b["atlas"],
            stats=b["stats"], target=self.target)
        resolve = pipeline(self.device, "range_resolve").bind(params=b["range_params"], stats=b["stats"])
        self._sets = [*made, stats, resolve, draw]
        record_stats_pass(rec, stats, b["stats"], self.source.array.size)
        record_range_pass(rec, resolve)
        rec.dispatch(draw, -(-self.rect.width // 16), -(-self.rect.height // 16))
        self._recorded_n = self.source.array.size

    def record(self, rec) -> None:
        self.stale = False

    def finish(self) -> None:
        s = self._stat_words(HM.ST_WORDS)
        self.stats = dict(zip(STAT_NAMES, s[:5], strict=True))
        self._read_range(s)

    # -- the numpy twin ---------------------------------------------------------------------------
    def reference(self, width: int, height: int) -> np.ndarray:
        rgba, _ = self.reference_with_stats(width, height)
        return rgba

    def reference_with_stats(self, width: int, height: int):
        lay = self.layout(width, height)
        p = self.params(width, height, lay=lay)
        flat = self.data.reshape(-1)
        lo, _hi, scale = self.reference_range(flat)
        cls = _exact.classify(flat)
        stats = reference_stats(flat, *(F32(v) for v in self.count_bounds()))
        out = np.full((height, width), p["bg"], np.uint32)
        if lay["empty"]:
            return _exact.unpack_rgba(out), stats
        table = glyph_table()[0].astype(np.uint32)
        strings = self.strings(lay)
        rows, cols, gx, gy, gw, gh = (lay[k] for k in ("rows", "cols", "gx", "gy", "gw", "gh"))
        y = np.arange(height, dtype=np.int64)[:, None]
        x = np.arange(width, dtype=np.int64)[None, :]
        shape = (height, width)

        def coverage(s, tx, ty):
            """The shader's coverage(): glyph texels of string(s) s at (tx, ty)."""
            s, tx, ty = (np.broadcast_to(v, shape) for v in (s, tx, ty))
            gw_, gh_ = lay["glyph_w"], lay["glyph_h"]
            k = np.where(tx >= 0, tx // gw_, 0)
            n = strings[s, 0].astype(np.int64)
            ok = (tx >= 0) & (ty >= 0) & (ty < gh_) & (k < n)
            g = strings[s, 1 + np.minimum(k, strings.shape[1] - 2)].astype(np.int64)
            return np.where(ok, table[np.where(ok, g, 0), np.where(ok, ty, 0),
                                      np.where(ok, tx - k * gw_, 0)], 0).astype(np.uint32)

        def blend(bg, fg, a):
            w = a + (a >> 7)
            res = np.zeros(shape, np.uint32)
            for shift in (0, 8, 16):
                chan = (((bg >> shift) & 255) * (256 - w) + ((fg >> shift) & 255) * w) >> 8
                res |= chan.astype(np.uint32) << np.uint32(shift)
            return res | np.uint32(0xFF000000)

        ly, lx = y - gy, x - gx
        row = np.clip(np.where(ly >= 0, ly, 0) * rows // gh, 0, rows - 1)
        col = np.clip(np.where(lx >= 0, lx, 0) * cols // gw, 0, cols - 1)
        y0, x0 = _span_start(row, rows, gh), _span_start(col, cols, gw)
        dy, avail, glyph_w = lay["dy"], lay["avail_w"], lay["glyph_w"]
        # cells
        in_grid = (ly >= 0) & (lx >= 0) & (ly < gh) & (lx < gw)
        edge = (lay["line"] != 0) & ((lx + 1 == _span_start(col + 1, cols, gw))
                                     | (ly + 1 == _span_start(row + 1, rows, gh)))
        cell = np.broadcast_to(row * cols + col, shape)
        v, vc = flat[cell], cls[cell]
        colour = self._lut[_exact.lut_index(_exact.ftz(np.where(vc == 0, v, F32(0))), lo, scale, 255)]
        colour = np.where(vc == _exact.NAN, np.uint32(p["nan"]), colour)
        colour = np.where(vc == _exact.POSINF, np.uint32(p["posinf"]), colour)
        colour = np.where(vc == _exact.NEGINF, np.uint32(p["neginf"]), colour).astype(np.uint32)
        n = strings[cell, 0].astype(np.int64)
        a = coverage(cell, x - gx - (x0 + ((avail - n * glyph_w) >> 1)), ly - y0 - dy)
        lum = 54 * (colour & 255) + 183 * ((colour >> 8) & 255) + 19 * ((colour >> 16) & 255)
        fg = np.where(lum < p["lum_split"], np.uint32(p["light"]), np.uint32(p["dark"])).astype(np.uint32)
        colour = np.where(a != 0, blend(colour, fg, a), colour)
        out = np.where(in_grid & ~edge, colour, out)
        label = np.uint32(p["label"])
        # row labels
        if lay["row_labels"]:
            s = np.broadcast_to(rows * cols + row, shape)
            left = gx - LABEL_PAD - strings[s, 0].astype(np.int64) * glyph_w
            a = coverage(s, x - left, ly - y0 - dy)
            where = (x < gx) & (ly >= 0) & (ly < gh) & (a != 0)
            out = np.where(where, blend(np.uint32(p["bg"]), label, a), out)
        # column labels
        if lay["col_labels"]:
            s = np.broadcast_to(rows * cols + rows + col, shape)
            left = x0 + ((avail - strings[s, 0].astype(np.int64) * glyph_w) >> 1)
            a = coverage(s, lx - left, y - lay["top"] - 1)
            where = (y >= lay["top"]) & (y < gy) & (lx >= 0) & (lx < gw) & (a != 0)
            out = np.where(where, blend(np.uint32(p["bg"]), label, a), out)
        return _exact.unpack_rgba(out.astype(np.uint32)), stats
