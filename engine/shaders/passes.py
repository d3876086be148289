"""The built-in views' compute passes: each pass's bindings declared once, by name.

A :class:`Pass` names its shader (the file stem: ``heatmap`` is ``heatmap.comp``), its
parameter block (``params.py``) and its bindings in order. From that one declaration

- the build writes ``<stem>_bindings.glsl`` into the generated include folder (with the
  parameter headers, :func:`caliper_vk.engine.shaders.generated_headers`): the block's header,
  then one ``layout(..., binding = k)`` line per binding. The shader includes it instead of
  declaring its bindings, so its binding numbers and kinds cannot drift from Python's;
- the views bind by name (``pipeline(device, "heatmap").bind(params=..., data=..., ...)``):
  :func:`caliper_vk.views._base.pipeline` makes the pipeline with these names and kinds, and
  a missing or unknown name is an error that lists the pass's bindings.

A binding's name is the GLSL variable the shader reads (``data``, ``stats``, ``target``);
the parameter block's binding is always ``params`` (read through ``P(k)`` / ``f(k)``).

Like ``params.py``, this module imports only the standard library (and ``params.py``):
``setup.py`` loads the shader package by path to build the shaders before the package exists.
"""

from __future__ import annotations

try:
    from . import params as _params
except ImportError:  # loaded by path (setup.py): load params.py beside this file by path too
    import importlib.util
    import sys
    from pathlib import Path

    _spec = importlib.util.spec_from_file_location(
        "_caliper_shader_params", Path(__file__).resolve().parent / "params.py")
    _params = sys.modules.get("_caliper_shader_params") or importlib.util.module_from_spec(_spec)
    if "_caliper_shader_params" not in sys.modules:
        sys.modules["_caliper_shader_params"] = _params
        _spec.loader.exec_module(_params)

ACCESS = ("", "readonly", "writeonly")


class Binding:
    """One binding of a pass: its name, its descriptor kind and how GLSL declares it.

    Use the constructors :func:`params`, :func:`buffer` and :func:`image`.
    """

    __slots__ = ("access", "element", "kind", "name", "note")

    def __init__(self, name: str, kind: str, element: str = "uint", access: str = "", note: str = ""):
        if kind not in ("uniform", "buffer", "image"):
            raise ValueError(f"binding {name!r}: kind {kind!r} is not 'uniform', 'buffer' or 'image'")
        if access not in ACCESS:
            raise ValueError(f"binding {name!r}: access {access!r} is not one of {ACCESS}")
        if not name.isidentifier():
            raise ValueError(f"binding {name!r} is not a GLSL identifier")
        self.name, self.kind, self.element, self.access, self.note = name, kind, element, access, note

    def glsl(self, k: int, block) -> str:
        """The ``layout(...)`` line that declares this binding as binding ``k``."""
        access = f"{self.access} " if self.access else ""
        note = f"  // {self.note}" if self.note else ""
        if self.name == "params":
            if block is None:
                raise ValueError("a pass without a parameter block has no 'params' binding")
            if block.layout == "buffer":
                return f"layout(std430, binding = {k}) {access}buffer Params {{ uint P[]; }};{note}"
            vectors = f"{{ uvec4 PV[{block.prefix}_VEC4S]; }};{note}"
            if self.kind == "uniform":
                return f"layout(std140, binding = {k}) uniform Params {vectors}"
            # a pass that writes its own parameters (the point cloud's fit) binds them as storage
            return f"layout(std430, binding = {k}) {access}buffer Params {vectors}"
        if self.kind == "image":
            return f"layout({self.element}, binding = {k}) uniform {access}uimage2D {self.name};{note}"
        struct = "".join(part.capitalize() for part in self.name.split("_"))
        return (f"layout(std430, binding = {k}) {access}buffer {struct} "
                f"{{ {self.element} {self.name}[]; }};{note}")

    def __repr__(self) -> str:
        return f"Binding({self.name!r}, {self.kind!r})"


def params(kind: str = "uniform", access: str = "") -> Binding:
    """The pass's parameter block: a uniform block (``"uniform"``, the default: one scalar load
    per invocation group on CPU implementations) or a storage buffer (``"buffer"``: a pass that
    writes parameters for the passes after it)."""
    return Binding("params", kind, access=access)


def buffer(name: str, element: str = "uint", access: str = "", note: str = "") -> Binding:
    """A storage buffer read as ``element name[]`` (``access``: ``""``, ``"readonly"`` or
    ``"writeonly"``)."""
    return Binding(name, "buffer", element, access, note)


def image(name: str = "target", access: str = "writeonly", fmt: str = "rgba8ui", note: str = "") -> Binding:
    """A storage image (the panel's canvas target by default), as ``uimage2D``."""
    return Binding(name, "image", fmt, access, note)


class Pass:
    """One compute pass of a built-in view: shader stem, parameter block, named bindings.

    Parameters
    ----------
    stem : str
        The shader's file stem (``engine/shaders/<stem>.comp``); it includes
        ``<stem>_bindings.glsl``.
    block : ParamBlock or None
        The parameter block behind the ``params`` binding (and the specialisation constants).
    bindings : sequence of Binding
        In binding order (binding 0 first).
    """

    def __init__(self, stem: str, block, bindings):
        self.stem, self.block = stem, block
        self.bindings: tuple[Binding, ...] = tuple(bindings)
        names = [b.name for b in self.bindings]
        if len(set(names)) != len(names):
            raise ValueError(f"pass {stem}: a binding name is declared twice: {names}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.bindings)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(b.kind for b in self.bindings)

    @property
    def header_name(self) -> str:
        return f"{self.stem}_bindings.glsl"

    def header(self) -> str:
        """The GLSL the shader includes: its block's header and its binding declarations."""
        guard = f"{self.stem.upper()}_BINDINGS_GLSL"
        out = [f"// {self.header_name}: generated from engine/shaders/passes.py; do not edit.",
               f"#ifndef {guard}", f"#define {guard}"]
        if self.block is not None:
            out.append(f'#include "{self.block.name}.glsl"')
        out += [b.glsl(k, self.block) for k, b in enumerate(self.bindings)]
        out.append(f"#endif  // {guard}")
        return "\n".join(out) + "\n"

    def __repr__(self) -> str:
        return f"Pass({self.stem!r}, {', '.join(self.names)})"


def ro(name: str, element: str = "uint", note: str = "") -> Binding:
    """A read-only storage buffer (:func:`buffer` with ``access="readonly"``)."""
    return buffer(name, element, "readonly", note)


def wo(name: str, element: str = "uint", note: str = "") -> Binding:
    """A write-only storage buffer."""
    return buffer(name, element, "writeonly", note)


# -- the built-in passes --------------------------------------------------------------------------
_HM, _HG, _CV, _IM = _params.HEATMAP, _params.HISTOGRAM, _params.CURVE, _params.IMAGES
_PC, _TX, _TG, _RG = _params.POINTCLOUD, _params.TEXT, _params.TEXTGRID, _params.RANGE
_CF = _params.CONFUSION

BUILTIN = (
    # the value statistics and the value-range resolve of the ranged views (heatmap, histogram,
    # curve, textgrid, confusion)
    Pass("heatmap_stats", _HM, [params(), ro("data"), buffer("stats")]),
    Pass("range_resolve", _RG, [params(), buffer("stats")]),
    Pass("heatmap", _HM, [params(), ro("data"), ro("colors"), ro("stats"), image()]),
    Pass("histogram_count", _HG, [params(), ro("data"), buffer("counts"), ro("stats")]),
    Pass("histogram_max", _HG, [params(), ro("counts"), buffer("stats"), ro("history")]),
    Pass("histogram_raster", _HG, [params(), ro("counts"), ro("stats"),
                                   ro("history", note="[2 K + k * bins + b]"), image()]),
    # the curve's passes
    Pass("curve_axes", _CV, [params(), ro("ticks"), ro("atlas", note="coverage per texel"), image()]),
    Pass("curve_columns", _CV, [params(), ro("data"), ro("smoothed", "float"),
                                buffer("columns", note="[series * width + column]"), buffer("stats")]),
    Pass("curve_logstats", _CV, [params(), ro("data"), buffer("stats")]),
    Pass("curve_raster", _CV, [params(), ro("columns"), ro("ticks"), image()]),
    Pass("curve_smooth", _CV, [params(), ro("data"), wo("smoothed", "float"), buffer("stats"),
                               buffer("scan", note="SC_WORDS per chunk")]),
    Pass("curve_ticks", _CV, [params(), ro("stats"), buffer("ticks")]),
    Pass("images_stats", _IM, [params(), ro("data"), buffer("stats")]),
    Pass("images", _IM, [params(), ro("data"), ro("stats", note="lo, hi, scale per group"), ro("colors"),
                         image()]),
    Pass("text", _TX, [params(), ro("grid", note="glyph per cell"), ro("rowcolor"),
                       ro("atlas", note="coverage per texel"), image()]),
    Pass("textgrid", _TG, [params(), ro("data"), ro("colors"), ro("strings"),
                           ro("atlas", note="coverage per texel"),
                           ro("stats", note="the heatmap stats words"), image()]),
    # the confusion view's cells pass: row shares and the cells' count text, before the textgrid's passes
    Pass("confusion_cells", _CF, [params(), ro("data"), wo("shown", "float"),
                                  wo("strings", note="cell i's string at i * STRIDE: length, glyphs")]),
    # the point cloud: the fit (bounds, then fit, which writes the block's fit words), labels and
    # values read in place, the splat, and one of the two colour passes (resolve or paint)
    Pass("pointcloud_bounds", _PC, [params(), ro("pos"), buffer("box")]),
    Pass("pointcloud_fit", _PC, [params("buffer"), ro("box"), buffer("stats")]),
    Pass("pointcloud_labels", _PC, [params(), ro("labels"), wo("point_colors"), buffer("stats")]),
    Pass("pointcloud_values", _PC, [params(), ro("vals"), buffer("box")]),
    Pass("pointcloud_values_color", _PC, [params(), ro("vals"), wo("point_colors")]),
    Pass("pointcloud_splat", _PC, [params(), ro("pos"), buffer("depth"), buffer("stats"), ro("point_colors")]),
    Pass("pointcloud_resolve", _PC, [params(), buffer("depth"), ro("colors")]),
    Pass("pointcloud_paint", _PC, [params(), ro("pos"), ro("depth"), ro("point_colors"), ro("colors"),
                                   image()]),
)

PASSES: dict[str, Pass] = {p.stem: p for p in BUILTIN}


def get(stem: str) -> Pass:
    """The built-in pass ``stem``; an unknown one is a KeyError that lists them."""
    try:
        return PASSES[stem]
    except KeyError:
        raise KeyError(f"no built-in pass {stem!r} is declared in engine/shaders/passes.py; "
                       f"declared: {', '.join(sorted(PASSES))}") from None
