"""Parameter blocks: each declared once, here, for both the shader and the Python that fills it.

A compute pass reads its per-frame parameters as 32-bit words (uints, ints, and
floats by their bits). Every block is declared once as a :class:`ParamBlock`;
from that one declaration

- the build writes the GLSL header the shaders include (``<name>_params.glsl``:
  a ``#define PREFIX_FIELD k`` word offset per field, the block's size, the
  block's constants and the word-access macros), into a generated include
  folder (:func:`caliper_vk.engine.shaders.generated_headers`), so there is no
  hand-kept mirror to drift;
- the views (``caliper_vk/views/*.py``) set their blocks by field name
  (``POINTCLOUD.values(cx=..., r=rotation)``, :class:`ParamValues`) and read the
  constants as attributes (``POINTCLOUD.MODE_LABELS``); no view slices words by offset;
- each built-in pass names its bindings in ``passes.py``, whose headers include these;
- custom panels (``caliper_vk/shader_module.py``) build their block with the
  same class at run time, from the user's parameters, and declare it with named
  members (:meth:`ParamBlock.members`) instead of word offsets.

Two layouts. ``"uniform"``: a std140 uniform block ``uvec4 PV[VEC4S]`` read
through ``P(k)`` (one scalar load per invocation on CPU implementations such
as lavapipe, which run a storage-buffer load once per lane: every built-in
view's passes run per point or per pixel, so all of them use it; moving the
images and text-grid blocks here cut their passes on lavapipe by 2-7x).
``"buffer"``: a storage buffer ``uint P[]`` read as ``P[k]`` (custom panels,
whose shaders users write against it). Both read floats as ``f(k)``.

This module imports nothing but the standard library: ``setup.py`` loads it by
path to build the shaders before the package exists.
"""

from __future__ import annotations

KINDS = ("uint", "int", "float")


class ParamBlock:
    """One parameter block: ordered 32-bit fields, constants, and a layout.

    Parameters
    ----------
    name : str
        The header's stem (``"pointcloud_params"`` is included as
        ``#include "pointcloud_params.glsl"``); custom panels use any name.
    prefix : str
        The GLSL prefix of the word offsets (``"PC"`` gives ``PC_CX``); empty for
        blocks declared with named members only.
    fields : sequence of ``name``, ``(name, kind)`` or ``(name, kind, count)``
        In word order; ``kind`` is ``"uint"`` (default), ``"int"`` or ``"float"``; a ``count``
        above 1 makes an array field of that many consecutive words.
    layout : ``"uniform"`` or ``"buffer"``
    constants : mapping of name to GLSL literal (``"0u"``, ``"0xFFFFFFFFu"``, ``"3"``)
        Shared constants: emitted as ``#define`` and readable from Python as ints.
    specialization : sequence of ``(name, default)``
        Specialisation constants (``layout(constant_id = k) const uint NAME``, k in order):
        folded into a pipeline when it is made (:meth:`specialize` gives the
        ``{constant_id: value}`` a ``ComputePipeline`` takes).
    """

    def __init__(self, name: str, prefix: str, fields, layout: str = "uniform", constants=None,
                 specialization=()):
        if layout not in ("uniform", "buffer"):
            raise ValueError(f"layout must be 'uniform' or 'buffer', got {layout!r}")
        self.name, self.prefix, self.layout = name, prefix, layout
        # An array field (name, kind, count) takes count consecutive words: GLSL gets NAME0 ..
        # NAME<count-1> (and NAME, the first), Python sets it from a sequence of count values.
        declared = [(f, "uint", 1) if isinstance(f, str) else (f[0], f[1], int(f[2]) if len(f) > 2 else 1)
                    for f in fields]
        self.arrays: dict[str, tuple[int, int]] = {}  # array field -> (first word, count)
        self.fields: tuple[tuple[str, str], ...] = ()  # one (word name, kind) per word, in order
        self.kinds: dict[str, str] = {}  # settable field (scalar or array) -> kind
        self.constants: dict[str, str] = dict(constants or {})
        self.specialization: tuple[tuple[str, int], ...] = tuple((n, int(d)) for n, d in specialization)
        words: list[tuple[str, str]] = []
        for field, kind, count in declared:
            if kind not in KINDS:
                raise ValueError(f"{name}.{field}: kind {kind!r} is not one of {KINDS}")
            if field in self.kinds or hasattr(type(self), field) or count < 1:
                raise ValueError(f"{name}: field {field!r} is declared twice, shadows an attribute or "
                                 f"has no words ({count})")
            self.kinds[field] = kind
            setattr(self, field, len(words))
            if count > 1:
                self.arrays[field] = (len(words), count)
                words += [(f"{field}{i}", kind) for i in range(count)]
            else:
                words.append((field, kind))
        self.fields = tuple(words)
        # field name (as declared and in lower case) -> (first word, count, kind): set()'s lookup
        self._lookup: dict[str, tuple[int, int, str]] = {}
        for field, kind in self.kinds.items():
            first, count = self.arrays.get(field, (getattr(self, field), 1))
            self._lookup[field] = self._lookup[field.lower()] = (first, count, kind)
        seen = {w for w, _ in words} | set(self.kinds)
        if len(seen) != len(words) + len(self.arrays):
            raise ValueError(f"{name}: an array field's element names clash with another field")
        for const, literal in self.constants.items():
            if const in seen or hasattr(type(self), const):
                raise ValueError(f"{name}: constant {const!r} clashes with a field or attribute")
            setattr(self, const, int(literal.rstrip("uU"), 0))

    # -- sizes -------------------------------------------------------------------------------
    @property
    def vec4s(self) -> int:
        """The block's size in uvec4s (a std140 array of uvec4 rounds up to whole vectors)."""
        return -(-len(self.fields) // 4)

    @property
    def words(self) -> int:
        """Words to upload: whole uvec4s for a uniform block, the fields for a storage buffer."""
        return 4 * self.vec4s if self.layout == "uniform" else len(self.fields)

    @property
    def nbytes(self) -> int:
        return 4 * self.words

    # -- Python side --------------------------------------------------------------------------
    def new(self):
        """A zeroed uint32 array of :attr:`words` (for code that fills a block by offset: custom
        panels' run-time blocks; the built-in views set theirs by name through :meth:`values`)."""
        import numpy as np

        return np.zeros(self.words, np.uint32)

    def values(self, **fields) -> ParamValues:
        """The block's words, zeroed, then ``fields`` set by name (:meth:`ParamValues.set`)."""
        return ParamValues(self).set(**fields)

    def field(self, name: str) -> tuple[int, int, str]:
        """(first word, count, kind) of the field ``name`` (case-insensitive: ``cx`` is ``CX``);
        an unknown name is a KeyError that lists the block's fields."""
        found = self._lookup.get(name) or self._lookup.get(name.upper())
        if found is None:
            raise KeyError(f"{self.name} has no field {name!r}; its fields: "
                           f"{', '.join(f.lower() for f in self.kinds)}")
        return found

    def pack(self, values: dict):
        """The block's words from ``{field: value}``: every field must be given; floats are
        rounded to float32 once, ints wrap to their 32-bit pattern."""
        import numpy as np

        missing = [f for f, _ in self.fields if f not in values]
        extra = sorted(set(values) - {f for f, _ in self.fields})
        if missing or extra:
            raise KeyError(f"{self.name}: " + "; ".join(
                s for s in (f"missing {missing}" if missing else "",
                            f"not fields of this block: {extra}" if extra else "") if s))
        p = self.new()
        for k, (field, kind) in enumerate(self.fields):
            v = values[field]
            if kind == "float":
                p[k] = np.asarray(v, np.float32).view(np.uint32)
            elif kind == "int":
                p[k] = np.asarray(v, np.int64).astype(np.int32).view(np.uint32)
            else:
                p[k] = int(v) & 0xFFFFFFFF
        return p

    def specialize(self, **values) -> dict[int, int]:
        """``{constant_id: value}`` for the block's specialisation constants, by name; every one
        must be given (a pipeline compiled with a default would draw something else)."""
        names = [n for n, _ in self.specialization]
        if sorted(values) != sorted(names):
            raise KeyError(f"{self.name}: specialisation constants are {names}, got {sorted(values)}")
        return {k: int(values[n]) for k, n in enumerate(names)}

    # -- GLSL side ----------------------------------------------------------------------------
    def header(self) -> str:
        """The GLSL header: word offsets, size, constants and the access macros."""
        guard = self.name.upper() + "_GLSL"
        out = [f"// {self.name}.glsl: generated from engine/shaders/params.py; do not edit.",
               "// Word offsets (uint words; floats by bits), the block's size, its constants.",
               f"#ifndef {guard}", f"#define {guard}"]
        out += [f"#define {self.prefix}_{field} {k}" for k, (field, _) in enumerate(self.fields)]
        out += [f"#define {self.prefix}_{field} {first}" for field, (first, _) in self.arrays.items()]
        out.append(f"#define {self.prefix}_VEC4S {self.vec4s}")
        out += [f"#define {c} {literal}" for c, literal in self.constants.items()]
        out += [f"layout(constant_id = {k}) const uint {n} = {d}u;"
                for k, (n, d) in enumerate(self.specialization)]
        if self.layout == "uniform":
            out += ["// declared as: layout(std140, binding = 0) uniform Params { uvec4 PV[" +
                    f"{self.prefix}_VEC4S]; }};",
                    "#define P(k) PV[(k) >> 2][(k) & 3]", "#define f(k) uintBitsToFloat(P(k))"]
        else:
            out += ["// declared as: layout(std430, binding = 0) readonly buffer Params { uint P[]; };",
                    "#define f(k) uintBitsToFloat(P[k])"]
        out.append(f"#endif  // {guard}")
        return "\n".join(out) + "\n"

    def members(self) -> list[str]:
        """The fields as named block members (``"    float gain;"``), for a block that the
        shader reads by name (custom panels)."""
        return [f"    {kind} {field};" for field, kind in self.fields]

    def __repr__(self) -> str:
        return f"ParamBlock({self.name!r}, {len(self.fields)} fields, {self.layout})"


class ParamValues:
    """One parameter block's words, set and read by field name (never by word offset).

    ``HEATMAP.values(rows=3, cols=4)`` or ``p.set(cx=0.5, r=rotation)``: names are the block's
    fields in any case; a float field is rounded to float32 once, an int wraps to its 32-bit
    pattern, an array field takes a sequence of its count. ``p.get("lo")`` (or ``p["lo"]``)
    reads a field back as the shader sees it (a float32 as a Python float; an array as a
    list). ``np.asarray(p)`` (or :attr:`words`) is what is uploaded.
    """

    __slots__ = ("_floats", "block", "words")

    def __init__(self, block: ParamBlock, words=None):
        import numpy as np

        self.block = block
        if words is None:
            self.words = np.zeros(block.words, np.uint32)
        else:
            self.words = np.array(words, np.uint32)
            if self.words.shape != (block.words,):
                raise ValueError(f"{block.name} has {block.words} words, got {self.words.shape}")
        # the same words as float32: a float field is stored through it, so numpy rounds the
        # value to float32 once (a view's parameters are made every frame: this is the fast path)
        self._floats = self.words.view(np.float32)

    @staticmethod
    def _encode(kind: str, v) -> int:
        import numpy as np

        if kind == "float":
            return int(np.asarray(v, np.float32).view(np.uint32))
        if kind == "int":
            return int(np.asarray(v, np.int64).astype(np.int32).view(np.uint32))
        return int(v) & 0xFFFFFFFF

    def set(self, **fields) -> ParamValues:
        """Set fields by name; returns ``self`` (so a block is made in one expression)."""
        import numpy as np

        lookup, words, floats = self.block._lookup, self.words, self._floats
        for name, value in fields.items():
            first, count, kind = lookup.get(name) or self.block.field(name)
            if count == 1:
                if kind == "uint":
                    words[first] = (value if value.__class__ is int else int(value)) & 0xFFFFFFFF
                elif kind == "float":
                    floats[first] = value  # stored as float32: numpy rounds it once
                else:
                    words[first] = self._encode(kind, value)
                continue
            items = np.asarray(value).reshape(-1)
            if items.size != count:
                raise ValueError(f"{self.block.name}.{name} takes {count} values, got {items.size}")
            if kind == "float":
                self._floats[first:first + count] = items
            elif kind == "int":
                self.words[first:first + count] = items.astype(np.int64).astype(np.int32).view(np.uint32)
            else:
                self.words[first:first + count] = items.astype(np.int64) & 0xFFFFFFFF
        return self

    def get(self, name: str):
        """A field's value as the shader reads it (an array field: a list)."""
        import numpy as np

        first, count, kind = self.block.field(name)
        words = self.words[first:first + count]
        if kind == "float":
            out = [float(v) for v in words.view(np.float32)]
        elif kind == "int":
            out = [int(v) for v in words.view(np.int32)]
        else:
            out = [int(v) for v in words]
        return out[0] if count == 1 else out

    __getitem__ = get

    def __array__(self, dtype=None, copy=None):
        return self.words if dtype is None else self.words.astype(dtype)

    @property
    def nbytes(self) -> int:
        return self.words.nbytes

    def copy(self) -> ParamValues:
        return ParamValues(self.block, self.words)

    def __eq__(self, other) -> bool:
        return (isinstance(other, ParamValues) and other.block is self.block
                and bool((other.words == self.words).all()))

    __hash__ = None

    def __repr__(self) -> str:
        return f"ParamValues({self.block.name}, " + ", ".join(
            f"{f.lower()}={self.get(f)!r}" for f in self.block.kinds) + ")"


# -- the built-in views' blocks ---------------------------------------------------------------------

POINTCLOUD = ParamBlock("pointcloud_params", "PC", [
    "N", "DIM", "W", "H", "SIZE", "MODE", "NPAL", "MARGIN",
    ("CX", "float"), ("CY", "float"), ("CZ", "float"),
    ("R", "float", 9),  # the rotation, row-major
    ("SCALE", "float"), ("NSCALE", "float"), ("OX", "float"), ("OY", "float"),
    ("ZMIN", "float"),    # the nearest depth of the fit, as -depth (the quantisation origin)
    ("DSCALE", "float"),  # depth levels per unit of depth: DEPTH_MAX / (2 radius)
    ("VLO", "float"), ("VSCALE", "float"),
    "RECT_X", "RECT_Y", "BG", "BASE", "DTYPE",
    # The fit (pointcloud_fit.comp) writes CX..CZ, SCALE, NSCALE, ZMIN and DSCALE above, on the
    # device, in the frame, from the box of the finite points (pointcloud_bounds.comp) or from
    # the fixed box FLO..FHI when FIXED is 1; FITK is the scale at radius 1 (zoom * 0.45 * the
    # shorter panel side), from the host.
    # Labels read in place (a tensor given as labels=): their byte offset and dtype code in the
    # labels buffer; pointcloud_labels.comp turns them into point_colors[] in the frame.
    "LBASE", "LDTYPE",
    # Values read in place (a float tensor given as values=): their byte offset and dtype code,
    # and how VLO/VSCALE are made: VRANGE_HOST (fixed, from the host), VRANGE_AUTO or
    # VRANGE_SYMMETRIC (pointcloud_fit.comp, from the finite values' extremes: words BOX_VMIN,
    # BOX_VNOT_MAX, which pointcloud_values.comp reduces; the codes are RANGE's MODE_*).
    "VBASE", "VDTYPE", "VRANGE",
    "FIXED", ("FLO", "float", 3), ("FHI", "float", 3), ("FITK", "float"),
], constants={
    "MODE_UNIFORM": "0u", "MODE_LABELS": "1u", "MODE_VALUES": "2u",
    # The depth key (pointcloud_color.glsl): level << KEY_COLOR_BITS | colour index.
    "KEY_COLOR_BITS": "9u", "KEY_COLOR_MASK": "511u", "KEY_DEPTH_BITS": "23u",
    "DEPTH_MAX": "8388607u", "EMPTY_KEY": "0xFFFFFFFFu",
    # The colour table: 256 colormap entries, the palette, then three fixed colours.
    "LUT_SIZE": "256u", "PALETTE_BASE": "256u", "PALETTE_MAX": "252u",
    "COLOR_NAN": "508u", "COLOR_UNLABELLED": "509u", "COLOR_UNIFORM": "510u", "COLOR_TABLE_SIZE": "512u",
    "ST_NONFINITE": "0", "ST_OFFSCREEN": "1", "ST_NONFINITE_VALUES": "2",
    # labels read in place: which of the labels 0..63 occur (two bit words), and how many points
    # have a label of 64 or more (the legend's classes, read back with the frame's counters)
    "ST_CLASSES_LO": "3", "ST_CLASSES_HI": "4", "ST_CLASSES_MORE": "5",
    # values read in place with a device range: the (lo, hi) the frame coloured by (float bits)
    "ST_VLO": "6", "ST_VHI": "7", "STATS_WORDS": "8",
    "CLASS_BITS": "64u",
    # The box keys (pointcloud_bounds.comp): per axis the orderable key of the least finite
    # coordinate, then the complement of the greatest one's (so all six start at 0xFFFFFFFF and
    # fall by atomicMin), one fill clearing them.
    "BOX_MIN": "0", "BOX_NOT_MAX": "3", "BOX_VMIN": "6", "BOX_VNOT_MAX": "7", "BOX_WORDS": "8",
    "VRANGE_HOST": "0u", "VRANGE_AUTO": "1u", "VRANGE_SYMMETRIC": "2u",
    # The radius when the box has none (one point, none finite, a box too small or too large):
    # the fit then takes radius 1. Its square must lie in [2^-100, 2^100].
    "FIT_RSQUARED_MIN": "0x0D800000u", "FIT_RSQUARED_MAX": "0x71800000u",
    "NEWTON_STEPS": "3u",
}, specialization=[  # the words DTYPE, SIZE, MODE and DIM, folded into the splat and paint pipelines
    ("SPEC_DTYPE", 0), ("SPEC_SIZE", 1), ("SPEC_MODE", 0), ("SPEC_DIM", 3),
])

HEATMAP = ParamBlock("heatmap_params", "HM", [
    "ROWS", "COLS", "W", "H", "RECT_X", "RECT_Y", "N",
    ("LO", "float"), ("HI", "float"),  # the stats pass counts finite values below LO / above HI
    "NAN_COLOR", "POSINF_COLOR", "NEGINF_COLOR", "BG", "BASE", "DTYPE",
], constants={"ST_NAN": "0", "ST_POSINF": "1", "ST_NEGINF": "2", "ST_BELOW": "3", "ST_ABOVE": "4",
              "ST_MIN": "5", "ST_MAX": "6", "ST_LO": "7", "ST_HI": "8", "ST_SCALE": "9", "ST_WORDS": "10"})

HISTOGRAM = ParamBlock("histogram_params", "HG", [
    "N", "BASE", "DTYPE", "BINS",
    "W", "H", "RECT_X", "RECT_Y",
    "HISTORY",  # older steps uploaded (each with the grid it was counted on), newest first
    "BG", "COLOR", "OLD_COLOR",
    "OFFSET",  # 0: overlay layout; 1: offset layout (older steps raised, histogram_raster.comp)
], constants={  # stats words after the heatmap stats pass's (HEATMAP.ST_WORDS) and its range
    "HS_MAX": "10", "HS_KEPT": "11", "HS_WORDS": "12"})

CURVE = ParamBlock("curve_params", "CV", [
    # W, H, RECT_X, RECT_Y: the plot area (the trace's columns and rows), inside the panel
    "N", "BASE", "DTYPE", "W", "H", "RECT_X", "RECT_Y",
    ("STEP", "float"), "SERIES", "BG", "COLOR0", "COLOR1",
    ("ALPHA", "float"), ("BETA", "float"),  # the EMA's weights: alpha and 1 - alpha (curve_smooth.comp)
    # The axes (curve_ticks.comp, curve_axes.comp): AXES 1 when the panel has room for them; the
    # panel is FULL_W x FULL_H with the plot at (GUTTER_W, 0); at most YTICKS / XTICKS intervals
    # between ticks, labels of at most YCHARS / XCHARS characters; glyph cells CELL_W x CELL_H;
    # the glyph indices of '0' (then '1' .. '9'), '.', the minus sign and 'e'.
    "AXES", "FULL_W", "FULL_H", "GUTTER_W", "GUTTER_H", "YTICKS", "XTICKS", "YCHARS", "XCHARS",
    "CELL_W", "CELL_H", "TEXT", "AXIS", "G_ZERO", "G_DOT", "G_MINUS", "G_E",
    "GRID",  # the grid lines across the plot at the ticks (curve_raster.comp), under the trace
    # The EMA's blocked scan (curve_smooth.comp): CHUNKS chunks of CHUNK samples
    "CHUNK", "CHUNKS",
], constants={  # stats words after the heatmap stats pass's (HEATMAP.ST_WORDS) and its range
    "CS_NAN": "10", "CS_INF": "11", "CS_LAST_INDEX": "12", "CS_LAST": "13",
    "CS_NONPOS": "14",  # log-y: finite values <= 0 (not drawn)
    "CS_WORDS": "15",
    "NO_ROWS": "0xFFFFFFFFu",
    # The tick buffer (curve_ticks.comp writes it, curve_axes.comp reads it): the y tick count, the
    # x tick count, then AX_TICKS y labels from word AX_Y and AX_TICKS x labels from word AX_X, each
    # AX_WORDS words: the tick's row (y) or column (x), its label's length (0: not drawn) and up to
    # AX_CHARS glyph indices.
    "AX_TICKS": "16u", "AX_CHARS": "8u", "AX_WORDS": "10u", "AX_Y": "2u", "AX_X": "162u", "AX_SIZE": "322u",
    "TICK_LEN": "3u",
    # then a word per panel row (from AX_SIZE) and per panel column: the label whose band holds it
    # (index + 1, 0: none), the offset into that band, and AX_MARK where a tick mark is
    "AX_OWNER": "0xFFu", "AX_MARK": "0x100u", "AX_OFFSET_SHIFT": "16u",
    # log2 of a mantissa (curve_log.glsl): log2(1 + u) = u * (C0 + C1 u + ... + C8 u^8) for u in
    # [-1/4, 1/2), a least-squares fit (about 2e-8 off before float32 rounding); log2(10), 1/log2(10)
    "LOG2_DEGREE": "8", "LOG2_C0": "0x3FB8AA3Bu", "LOG2_C1": "0xBF38AA5Cu", "LOG2_C2": "0x3EF63863u",
    "LOG2_C3": "0xBEB8964Fu", "LOG2_C4": "0x3E939451u", "LOG2_C5": "0xBE7975BEu", "LOG2_C6": "0x3E5DDBADu",
    "LOG2_C7": "0xBE2DA2CCu", "LOG2_C8": "0x3D941B9Au",
    "LOG2_10_BITS": "0x40549A78u", "INV_LOG2_10_BITS": "0x3E9A209Bu",
    # 2^u = 1 + u * (E0 + E1 u + ... + E5 u^5) for u in [0, 1) (curve_ticks.comp: a log range's
    # values, to choose ticks within a decade; about 5e-9 off before float32 rounding)
    "EXP2_E0": "0x3F317215u", "EXP2_E1": "0x3E75FED5u", "EXP2_E2": "0x3D634186u",
    "EXP2_E3": "0x3C1E9E34u", "EXP2_E4": "0x3AA2B764u", "EXP2_E5": "0x39648C8Eu",
    # the EMA's carries: per chunk its local sum, its finite count, 1 + its last finite index,
    # and the carry into it (m, then alpha^t)
    "SC_WORDS": "5",
}, specialization=[
    # 1: values drawn as their log2 (log2e in curve_log.glsl), those <= 0 not drawn. A constant,
    # not a word: a CPU implementation such as lavapipe runs both sides of a branch, so a word
    # would cost every sample the log2 on a linear axis too.
    ("SPEC_LOGY", 0),
    ("SPEC_STAGE", 0),  # curve_smooth.comp: which stage of the EMA's scan
])

IMAGES = ParamBlock("images_params", "IM", [
    "N_TILES", "COLS", "TILE_H", "TILE_W", "PX_H", "PX_W", "GAP", "W", "H", "RECT_X", "RECT_Y",
    "BASE", "DTYPE", "BG", "NAN", "POSINF", "NEGINF",
    "SHARED",  # 1: one range for all tiles (normalize="shared" or a fixed range); 0: one per tile
    "GROUPS",  # ranges: 1 when SHARED, else one per tile
    "NORMS",  # the stats word of the first group's (lo, hi, scale): IS_KEYS + 2 * GROUPS
], constants={  # stats words: NaN, +Inf, -Inf counts, then GROUPS min keys and GROUPS max keys, then
    # (lo, hi, scale) per group
    "IS_NAN": "0", "IS_POSINF": "1", "IS_NEGINF": "2", "IS_KEYS": "4",
}, specialization=[("SPEC_WIDE", 0)])  # 1: a pixel-to-cell product may pass 2^32 (muldiv.glsl)

TEXT = ParamBlock("text_params", "TX", [
    "W", "H", "RECT_X", "RECT_Y", "COLS", "ROWS", "CELL_W", "CELL_H", "PAD_X", "PAD_Y", "BG",
], constants={"EMPTY": "0xFFFFFFFFu"})

TEXTGRID = ParamBlock("textgrid_params", "TG", [
    "ROWS", "COLS", "W", "H", "RECT_X", "RECT_Y", "BASE", "DTYPE",
    "GX", "GY", "GW", "GH", "GLYPH_W", "GLYPH_H", "STRIDE", "AVAIL_W", "TEXT_DY", "LINE", "TOP",
    "LABEL_PAD", "ROW_LABELS", "COL_LABELS", "BG", "NAN", "POSINF", "NEGINF", "DARK", "LIGHT", "LABEL",
    "LUM_SPLIT",
], specialization=[("SPEC_WIDE", 0)])  # 1: a pixel-to-cell product may pass 2^32 (muldiv.glsl)

# The value-range resolve pass (range_resolve.comp, shared by the ranged views): COUNT ranges whose
# finite min keys sit at stats words KEYS + i, max keys at KEYS + COUNT + i, and whose
# (lo, hi, scale) go to OUT + 3i.
RANGE = ParamBlock("range_params", "RG", [
    "MODE", "COUNT", "KEYS", "OUT", ("LAST", "float"), ("LO", "float"), ("HI", "float"),
], constants={"MODE_FIXED": "0u", "MODE_AUTO": "1u", "MODE_SYMMETRIC": "2u",
              # (LO, HI) grown to hold every finite value: a count matrix's (0, max(1, largest))
              "MODE_GROW": "3u"})

# The confusion view's cells pass (confusion_cells.comp): one invocation per row of the N x N counts
# (at BASE, in DTYPE) writes the values the text grid draws (the counts as float32, or with
# NORMALIZE the row shares) and, with TEXT, each cell's count as a string of the strings buffer
# (STRIDE words a string: its length, then glyph indices, clipped to FIT glyphs and ended by the
# ELLIPSIS glyph when clipped; the glyph of ASCII character c is c - ASCII_BASE).
CONFUSION = ParamBlock("confusion_params", "CF", [
    "N", "BASE", "DTYPE", "NORMALIZE", "TEXT", "FIT", "STRIDE", "ASCII_BASE", "ELLIPSIS",
])

BUILTIN = (POINTCLOUD, HEATMAP, HISTOGRAM, CURVE, IMAGES, TEXT, TEXTGRID, RANGE, CONFUSION)
