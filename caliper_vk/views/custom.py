"""Custom panels: a view whose pixels come from the user's own GLSL function.

A :class:`CustomPanel` composes a :class:`~caliper_vk.shader_module.ShaderModule`
with Caliper's built-in modules into one compute shader (see
:mod:`caliper_vk.shader_module`) and draws it like any built-in view: on a
:class:`~caliper_vk.engine.Canvas`, or live in a session
(``caliper_vk.attach(t, view=CustomPanel(...))``). Two modes:

``color=module``
    one input drawn as a grid of cells like the heatmap view (integer
    nearest-neighbour indexing); the module's ``vec4 color(float v, uint i)``
    colours each cell (RGBA in [0, 1], rounded to bytes by Caliper);
``raster=module``
    any number of inputs; the module's ``uvec4 shade(uvec2 px, uvec2 size)``
    returns each pixel's RGBA bytes and reads the inputs through generated
    accessors (``a_at(i)``, ``a_at(row, col)``, ``a_len()``, ...).

Scalar parameters (``params={"gain": 2.0}``) are named members of the
parameter block in GLSL and change per frame with :meth:`CustomPanel.set`.
Inputs keep their stored dtype (float32, float16, bfloat16, int32, uint8) and
are decoded exactly by the shader; anything else is refused.

Supplying ``reference=`` — the numpy twin of the user's function — opts the
panel into the byte-exact check (:meth:`CustomPanel.check`,
:func:`check_panel`). The shader is compiled by :meth:`CustomPanel.build`,
which ``Canvas.add`` calls; a live session calls it when the panel is attached
and shows a failure in the status line instead of raising.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .. import chrome
from .. import shader_module as sm
from .._arrays import host_array, is_torch_tensor, to_host
from ..engine import ComputePipeline
from . import _exact
from ._base import ViewBase, lut_scale, resolve_range
from ._source import DTYPE_CODES, Source

F32 = np.float32
BACKGROUND = (22, 22, 26, 255)
PARAM_TYPES = {"float": np.float32, "int": np.int32, "uint": np.uint32}
ACCEPTED = "float32, float16, bfloat16, int32, uint8"


def unorm8(c) -> np.ndarray:
    """numpy twin of ``cv_unorm8`` (custom_frame.glsl): RGBA in [0, 1] to bytes."""
    c = np.asarray(c, F32)
    with np.errstate(all="ignore"):
        t = _exact.ftz(c * F32(255.0))
        r = _exact.ftz(t + F32(0.5))
        out = np.where(c > 0, r, F32(0)).astype(np.uint32)  # NaN compares false: 0
    out = np.where(_exact.classify(c) == _exact.NAN, 0, out)
    return np.where(c >= 1, 255, out).astype(np.uint8)


def to_unit(v, params) -> np.ndarray:
    """numpy twin of GLSL ``to_unit(v)``: ``(v - range_lo) * range_scale``, flushed like the shader."""
    with np.errstate(all="ignore"):
        d = _exact.ftz(np.asarray(v, F32) - F32(params["range_lo"]))
        return _exact.ftz(d * F32(params["range_scale"]))


def param_type(name: str, value) -> str:
    """``"float"``, ``"int"`` or ``"uint"`` for a parameter's initial value."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"parameter {name!r} is a bool; pass 0 or 1 (an int parameter)")
    if isinstance(value, (np.floating, float)):
        return "float"
    if isinstance(value, np.unsignedinteger):
        return "uint"
    if isinstance(value, (np.integer, int)):
        return "int"
    raise TypeError(f"parameter {name!r} is {type(value).__name__}; parameters are float, int or "
                    "uint scalars (use np.uint32(...) for uint)")


def param_value(name: str, kind: str, value):
    """``value`` as the numpy scalar of parameter type ``kind``, refusing lossy conversions."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"parameter {name!r} ({kind}) got {value!r}; pass a number")
    if kind == "float":
        return F32(value)
    if not np.isfinite(float(value)) or float(value) != int(value):
        raise TypeError(f"parameter {name!r} is {kind}; got {value!r}, which is not an integer")
    info = np.iinfo(PARAM_TYPES[kind])
    if not info.min <= int(value) <= info.max:
        raise ValueError(f"parameter {name!r} ({kind}) must be in [{info.min}, {info.max}]; got {value}")
    return PARAM_TYPES[kind](int(value))


def as_input(x, name: str) -> Source:
    """A host array or tensor as a :class:`Source` in its own dtype (no silent conversion)."""
    if isinstance(x, Source):
        return x
    if is_torch_tensor(x) and str(getattr(x, "dtype", "")) == "torch.bfloat16":
        raw, _ = host_array(x)
        return Source(np.ascontiguousarray(raw).copy(), "bfloat16")
    a = to_host(x, f"input {name!r}")
    dtype = a.dtype.name
    if dtype not in DTYPE_CODES or dtype == "bfloat16":
        raise TypeError(f"input {name!r} has dtype {a.dtype}; custom panels read {ACCEPTED} in "
                        f"their own dtype; convert it first, e.g. x.astype(np.float32) or x.float()")
    return Source(np.ascontiguousarray(a).copy(), dtype)


def grid_shape(shape) -> tuple[int, int]:
    """(rows, cols) an input is seen as in GLSL: the last axis is the columns."""
    if len(shape) == 0:
        return 1, 1
    cols = int(shape[-1])
    rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
    return (rows, cols) if cols else (rows, 0)


class CustomPanel(ViewBase):
    """A panel drawn by the user's shader module.

    Parameters
    ----------
    color : ShaderModule or str, optional
        Defines ``vec4 color(float v, uint i)``; the panel draws its one input as cells.
    raster : ShaderModule or str, optional
        Defines ``uvec4 shade(uvec2 px, uvec2 size)``; exactly one of ``color`` / ``raster``.
    inputs : mapping of name -> array/tensor/None, or sequence of names, optional
        The tensors the shader reads. Default: one input called ``data``.
        ``None`` (or a bare name) declares an input supplied later by
        :meth:`set_data` or ``Session.attach``.
    params : mapping of name -> number, optional
        Scalar parameters; the type (float, int, uint) is fixed by the initial
        value (``2.0`` float, ``3`` int, ``np.uint32(3)`` uint).
    reference : callable, optional
        The numpy twin of the module's function, which opts the panel into the
        byte-exact check. Color: ``reference(v, i, params) -> (..., 4)`` floats
        (``v`` float32 and ``i`` uint32 arrays of one shape). Raster:
        ``reference(inputs, params, width, height) -> (height, width, 4)``
        integers 0..255. ``inputs`` maps names to float32 arrays (decoded as
        the shader decodes them); ``params`` maps names to numpy scalars, plus
        ``range_lo`` / ``range_scale``.
    value_range : "auto" | "symmetric" | (lo, hi)
        Color mode: the range ``to_unit(v)`` maps onto [0, 1].
    background : RGBA
        Color mode: the colour of a panel whose input is empty.
    """

    def __init__(self, *, color=None, raster=None, inputs=None, params=None, reference=None,
                 value_range="auto", background=BACKGROUND):
        super().__init__()
        if (color is None) == (raster is None):
            raise TypeError("CustomPanel takes exactly one of color=ShaderModule (per-element colour) "
                            "or raster=ShaderModule (per-pixel shade)")
        self.mode = "color" if color is not None else "raster"
        module = color if color is not None else raster
        self.module = module if isinstance(module, sm.ShaderModule) else sm.ShaderModule(module)
        if inputs is None:
            inputs = {"data": None}
        elif isinstance(inputs, str) or not isinstance(inputs, (Mapping, list, tuple)):
            raise TypeError("inputs is a mapping {name: array or None} or a sequence of names")
        elif not isinstance(inputs, Mapping):
            inputs = dict.fromkeys(inputs)
        if self.mode == "color" and len(inputs) != 1:
            raise ValueError(f"a color panel draws exactly one input; got {list(inputs)} "
                             "(use raster= to read several)")
        for name in inputs:
            sm.check_name(name, "input")
        self.input_names = tuple(inputs)
        self.params: dict[str, np.number] = {}
        self.param_types: dict[str, str] = {}
        taken = {f for n in self.input_names for f in sm.input_functions(n)}
        for name, value in (params or {}).items():
            sm.check_name(name, "parameter")
            if name in self.input_names or name in taken:
                raise ValueError(f"parameter {name!r} clashes with an input or its accessors; rename it")
            kind = param_type(name, value)
            self.param_types[name] = kind
            self.params[name] = param_value(name, kind, value)
        if reference is not None and not callable(reference):
            raise TypeError("reference must be a function (the numpy twin of the shader function)")
        self.reference_fn = reference
        resolve_range(np.zeros(1, F32), value_range)
        self.value_range = value_range
        self.background = tuple(int(c) for c in background)
        self.sources = {n: Source(np.zeros(0, F32)) for n in self.input_names}
        self._range_cache = None
        self.composition: sm.Composition | None = None
        self.spirv: bytes | None = None
        self.error: sm.ShaderError | None = None
        for name, value in inputs.items():
            if value is not None:
                self.sources[name] = as_input(value, name)

    # -- building ---------------------------------------------------------------------------------------
    @property
    def failed(self) -> bool:
        """True when :meth:`build` failed (the panel draws nothing; ``error`` says why)."""
        return self.error is not None

    def build(self) -> bytes:
        """Compose, check and compile the shader (once); returns the SPIR-V.

        Raises :class:`~caliper_vk.shader_module.ShaderSignatureError` or
        :class:`~caliper_vk.shader_module.ShaderCompileError` (again on every
        call after a failure).
        """
        if self.spirv is not None:
            return self.spirv
        if self.error is not None:
            raise self.error
        try:
            self.composition = sm.compose(self.module, self.mode, self.input_names,
                                          list(self.param_types.items()))
            self.spirv = sm.compile_composition(self.composition)
        except sm.ShaderError as exc:
            self.error = exc
            raise
        return self.spirv

    # -- data and parameters -------------------------------------------------------------------------------
    def set(self, **values) -> None:
        """Change parameters for the next frame: ``panel.set(gain=3.0)``."""
        for name, value in values.items():
            if name not in self.param_types:
                known = ", ".join(self.param_types) or "none"
                raise KeyError(f"unknown parameter {name!r}; this panel's parameters: {known}")
            self.params[name] = param_value(name, self.param_types[name], value)

    def set_data(self, data=None, **inputs) -> None:
        """New host values: ``set_data(array)`` for a one-input panel, or ``set_data(a=..., b=...)``."""
        if data is not None:
            if len(self.input_names) != 1 or inputs:
                raise TypeError(f"this panel reads inputs {', '.join(self.input_names)}; "
                                "pass them by name: set_data(a=..., b=...)")
            inputs = {self.input_names[0]: data}
        self.set_sources({name: as_input(value, name) for name, value in inputs.items()})
        self.data_version += 1

    def set_source(self, source: Source) -> None:
        """Read a live tensor (``caliper_vk.attach``) as the panel's only input."""
        if len(self.input_names) != 1:
            names = ", ".join(self.input_names)
            raise TypeError(f"this panel reads inputs {names}; attach a dict of tensors, "
                            f"e.g. attach({{{', '.join(f'{n!r}: t_{n}' for n in self.input_names)}}}, "
                            "view=panel)")
        self.set_sources({self.input_names[0]: source})

    def set_sources(self, sources: Mapping) -> None:
        """Replace inputs by name (host or live :class:`Source` objects)."""
        unknown = [n for n in sources if n not in self.sources]
        if unknown:
            raise KeyError(f"unknown input(s) {unknown}; this panel reads {list(self.input_names)}")
        for name, source in sources.items():
            old = self.sources[name]
            self.sources[name] = source
            if old is not source and old.imported is not None and old.imported is not source.imported:
                old.close()
            self._dirty.add("in:" + name)
        self._range_cache = None

    def inputs_float32(self) -> dict[str, np.ndarray]:
        """Every input decoded to float32 exactly as the shader decodes it (original shapes)."""
        return {n: s.float32() for n, s in self.sources.items()}

    @property
    def range(self) -> tuple[float, float]:
        """Color mode: the (lo, hi) ``to_unit`` maps onto [0, 1] for the current values."""
        if self.mode != "color":
            raise AttributeError("range: only color panels have a value range")
        source = self.sources[self.input_names[0]]
        if self._range_cache is None or source.live:
            self._range_cache = resolve_range(source.float32(), self.value_range)
        return self._range_cache

    def legend(self) -> list:
        items = []
        if self.mode == "color":
            lo, hi = self.range
            items += chrome.range_legend(lo, hi, label="to_unit 0…1 over")
        if self.params:
            shown = " ".join(f"{k}={float(v):.3g}" for k, v in self.params.items())
            items.append((("  " if items else "") + shown, chrome.DIM))
        return items

    def reference_params(self) -> dict[str, np.number]:
        """The parameter values as the shader sees them (plus ``range_lo``, ``range_scale``)."""
        lo, hi = self.range if self.mode == "color" else (0.0, 1.0)
        return {**self.params, "range_lo": F32(lo), "range_scale": F32(lut_scale(lo, hi, 1))}

    def param_words(self, width: int, height: int, rect_x: int = 0, rect_y: int = 0,
                    bases=None) -> np.ndarray:
        """The parameter block as uint32 words, packed by the composition's
        :class:`~caliper_vk.engine.shaders.params.ParamBlock` (the block the shader declares)."""
        ref = self.reference_params()
        values = {"cv_width": width, "cv_height": height, "cv_rect_x": rect_x, "cv_rect_y": rect_y,
                  "cv_background": _exact.pack_rgba(self.background), "range_lo": ref["range_lo"],
                  "range_scale": ref["range_scale"]}
        for name in self.input_names:
            s = self.sources[name]
            rows, cols = grid_shape(s.shape)
            for key, v in zip(sm.INPUT_FIELDS, ((bases or {}).get(name, 0), s.code, s.array.size, rows, cols),
                              strict=True):
                values[f"cv_{name}_{key}"] = v
        values.update(self.params)
        block = self.composition.block if self.composition is not None else sm.param_block(
            self.input_names, list(self.param_types.items()))
        return block.pack(values)

    # -- drawable protocol ------------------------------------------------------------------------------------
    def bind(self, device, target, rect) -> None:
        self.build()  # a broken module fails here, before the panel is placed or drawn
        super().bind(device, target, rect)

    def prepare(self) -> None:
        bases = {}
        for name in self.input_names:
            s = self.sources[name]
            src = s if s.nbytes else Source(np.zeros(1, F32))  # Vulkan needs a non-empty buffer
            _, bases[name], _ = self._input("in:" + name, src)
        r = self.rect
        self._upload("params", self.param_words(r.width, r.height, r.x, r.y, bases))
        self._dirty.clear()

    def _pipeline(self) -> ComputePipeline:
        comp = self.composition
        key = ("custom", comp.key)
        p = self.device.cache.get(key)
        if p is None or p.handle is None:
            p = ComputePipeline(self.device, self.spirv, comp.bindings, name=f"custom:{self.module.name}")
            self.device.cache[key] = p
        return p

    def record_reads(self, rec) -> None:
        """The one pass reads the inputs, so it runs in the frame's first submission."""
        self._drop_sets()
        resources = [self._buffers["params"], *(self._bound["in:" + n] for n in self.input_names),
                     self.target]
        pass_ = self._pipeline().bind(resources)
        self._sets = [pass_]
        rec.dispatch(pass_, -(-self.rect.width // sm.LOCAL_SIZE), -(-self.rect.height // sm.LOCAL_SIZE))

    def record(self, rec) -> None:
        self.stale = False

    def finish(self) -> None:
        pass

    def close(self) -> None:
        for s in self.sources.values():
            s.close()
        super().close()

    # -- the numpy twin ---------------------------------------------------------------------------------------
    def reference(self, width: int, height: int) -> np.ndarray:
        """The user's numpy twin composed the way the shader composes the user's function."""
        if self.reference_fn is None:
            raise ValueError("this panel has no numpy reference: pass reference=... (the numpy twin "
                             "of the shader function) to opt into the byte-exact check")
        params = self.reference_params()
        if self.mode == "raster":
            out = np.asarray(self.reference_fn(self.inputs_float32(), params, width, height))
            if out.shape != (height, width, 4):
                raise ValueError(f"the raster reference returned shape {out.shape}; expected "
                                 f"({height}, {width}, 4) RGBA")
            if out.dtype.kind not in "iu":
                raise TypeError(f"the raster reference returned {out.dtype}; return integers 0..255 "
                                "(the shader returns uvec4)")
            if (out < 0).any():
                raise ValueError("the raster reference returned negative values; shade() returns uvec4")
            return np.minimum(out, 255).astype(np.uint8)
        source = self.sources[self.input_names[0]]
        flat = source.float32().reshape(-1)
        rows, cols = grid_shape(source.shape)
        rgba = np.empty((height, width, 4), np.uint8)
        if rows == 0 or cols == 0:
            rgba[:] = self.background
            return rgba
        r = (np.arange(height, dtype=np.uint64) * np.uint64(rows)) // np.uint64(height)
        c = (np.arange(width, dtype=np.uint64) * np.uint64(cols)) // np.uint64(width)
        i = (r[:, None] * np.uint64(cols) + c[None, :]).astype(np.uint32)
        out = np.asarray(self.reference_fn(flat[i], i, params))
        if out.shape != (height, width, 4):
            raise ValueError(f"the color reference returned shape {out.shape} for inputs of shape "
                             f"{i.shape}; return one RGBA row per value: shape {(*i.shape, 4)}")
        return unorm8(out)

    def reference_with_stats(self, width: int, height: int):
        return self.reference(width, height), {}

    def check(self, width: int = 256, height: int = 192, save_to=None) -> np.ndarray:
        """Render the panel alone and compare with its numpy twin byte for byte; see :func:`check_panel`."""
        return check_panel(self, width, height, save_to=save_to)


class ExactMismatchError(AssertionError):
    """A view's pixels differ from its numpy twin's."""


def check_panel(view, width: int = 256, height: int = 192, save_to=None) -> np.ndarray:
    """Draw ``view`` alone on a ``width x height`` canvas and require the exact bytes of its
    numpy twin (``view.reference``); returns the image.

    On a mismatch raises :class:`ExactMismatchError` naming the number of differing
    pixels and the first few; with ``save_to`` (a folder) it also writes
    ``actual.png``, ``expected.png`` and a magnified ``diff.png`` there. The view
    must not be on another canvas.
    """
    from ..engine import Canvas

    if getattr(view, "target", None) is not None:
        raise RuntimeError("check_panel draws the view alone; check it before adding it to a canvas "
                           "or session, or make a second view")
    canvas = Canvas(width, height)
    try:
        canvas.add(view)
        got = canvas.render()
    finally:
        canvas.close(close_panels=False)
    want = view.reference(width, height)
    if np.array_equal(got, want):
        return got
    differ = (got != want).any(axis=2)
    ys, xs = np.nonzero(differ)
    first = ", ".join(f"({y},{x}) {tuple(int(v) for v in got[y, x])}!={tuple(int(v) for v in want[y, x])}"
                      for y, x in list(zip(ys, xs, strict=False))[:3])
    where = ""
    if save_to is not None:
        where = f"; images and diff saved in {save_evidence(got, want, Path(save_to))}"
    raise ExactMismatchError(f"{int(differ.sum())} of {differ.size} pixels differ from the numpy "
                             f"reference (first: {first}){where}")


def save_evidence(actual: np.ndarray, expected: np.ndarray, folder: Path, zoom: int = 4) -> Path:
    """Write actual.png, expected.png and a magnified diff.png (differing pixels red)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    Image.fromarray(actual, "RGBA").save(folder / "actual.png")
    Image.fromarray(expected, "RGBA").save(folder / "expected.png")
    diff = (expected[..., :3] // 4).astype(np.uint8)
    diff[(actual != expected).any(axis=2)] = (255, 0, 0)
    Image.fromarray(np.repeat(np.repeat(diff, zoom, axis=0), zoom, axis=1), "RGB").save(folder / "diff.png")
    return folder
