"""Parameter blocks: each declared once, for both the shader and the Python that fills it.

A compute pass reads its per-frame parameters as 32-bit words (uints, ints, and
floats by their bits). Every block is declared once as a :class:`ParamBlock`, a view's
in the view's own module (``caliper_vk/views/heatmap.py``: ``HEATMAP``), the common ones
here (:data:`RANGE`, :data:`COMMON`); from that one declaration

- the build writes the GLSL header the shaders include (``<name>_params.glsl``:
  a ``#define PREFIX_FIELD k`` word offset per field, the block's size, the
  block's constants and the word-access macros), into a generated include
  folder (:func:`caliper_vk.engine.shaders.generated_headers`), so there is no
  hand-kept mirror to drift;
- the views (``caliper_vk/views/*.py``) set their blocks by field name
  (``POINTCLOUD.values(cx=..., r=rotation)``, :class:`ParamValues`) and read the
  constants as attributes (``POINTCLOUD.MODE_LABELS``); no view slices words by offset;
- each pass names its block and its bindings in its ``Pass`` (``passes.py``), whose
  header includes the block's;
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
path to build the shaders before the package exists (and reads the views'
declarations with it: ``passes.read_declarations``).
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
        out = [f"// {self.name}.glsl: generated from the declaration of ParamBlock {self.name!r}; do not edit.",
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


# -- the common blocks: shared by several views (a view's own block is declared in its module) ----

# The value-range resolve pass (range_resolve.comp, shared by the ranged views): COUNT ranges whose
# finite min keys sit at stats words KEYS + i, max keys at KEYS + COUNT + i, and whose
# (lo, hi, scale) go to OUT + 3i.
RANGE = ParamBlock("range_params", "RG", [
    "MODE", "COUNT", "KEYS", "OUT", ("LAST", "float"), ("LO", "float"), ("HI", "float"),
], constants={"MODE_FIXED": "0u", "MODE_AUTO": "1u", "MODE_SYMMETRIC": "2u",
              # (LO, HI) grown to hold every finite value: a count matrix's (0, max(1, largest))
              "MODE_GROW": "3u"})


COMMON = (RANGE,)
