"""The point-cloud view: N x 3 (or N x 2) positions as round points.

GPU passes (engine/shaders/pointcloud_*.comp): clear a 32-bit key buffer, splat
every point's footprint with ``atomicMin(level << 9 | colour)``, where ``level``
is the point's depth quantised to 2**23 levels over the fitted depth range (0 =
nearest) and ``colour`` its index in the colour table (palette entry of its
label, colormap entry of its value, or a fixed colour), then colour each won
pixel from its key alone, darkened with distance. Only 32-bit atomics: MoltenVK
cannot expose 64-bit ones (MoltenVK issue 1692), and the splat is the frame's
cost, which a 32-bit atomic halves on lavapipe.

Order independence and occlusion: the smallest key wins whatever order the
invocations run in; a nearer point hides a farther one whenever their depths
differ by more than one level (1/8,388,607 of the fitted depth range); points
whose depths fall in one level resolve to the lower colour index, and since the
colour is a function of the key, any point of such a tie gives the same pixel.

The colour pass runs one of two ways with the same bytes: per pixel over the whole panel
(``pointcloud_resolve``), or, when the points cover well under the panel's pixels, per point
(``pointcloud_paint``: each point stores its colour where its key won, over a background copied
in by a transfer), so a small cloud does not pay for every pixel of a large panel.
:meth:`PointCloud.reference` is the numpy twin that produces the same bytes.
Camera: orthographic; ``yaw_deg`` turns about the vertical axis, ``pitch_deg`` tilts toward the viewer,
``zoom`` scales the auto-fit (the sphere about the centre of the finite points' box through its
corners fills 90% of the shorter panel side at ``zoom=1``). The fit is computed on the device in the
frame that draws (``pointcloud_bounds``, then ``pointcloud_fit``, which writes the centre, scale and
depth range into the parameter block the splat reads: see :mod:`._pointfit`), so it follows a tensor
read in place wherever it lives, and the host reads no element of the positions per frame. The
rotation is computed on the host in float64 and passed as float32. Labels and values attached as
tensors (``caliper_vk.attach(..., labels=t)``) are read in place too: ``pointcloud_labels`` and
``pointcloud_values_color`` make the per-point colour indices on the device each frame, an
``"auto"``/``"symmetric"`` value range comes from ``pointcloud_values`` and the fit pass, and the
legend shows the classes or range the frame used (read back with its counters).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .. import colormaps
from ..engine import ComputePipeline
from .._arrays import as_float32, as_labels
from . import _exact
from ..engine.shaders.params import ParamValues
from ._pointcolor import PointColors
from ._pointfit import (POINTCLOUD as PC, POINTCLOUD_PASSES, device_box, device_fit, device_value_keys,
                        device_value_range, rotation)
from ._pointtwin import PointCloudTwin
from ._source import DTYPE_CODES, Source
from ._base import ViewBase, groups_1d, lut_scale, pipeline, resolve_range
from ._registry import Sample, register_view

F32 = np.float32
# The shaders' constants, from the block's one declaration (_pointfit.py: POINTCLOUD).
MODE_UNIFORM, MODE_LABELS, MODE_VALUES = PC.MODE_UNIFORM, PC.MODE_LABELS, PC.MODE_VALUES
KEY_COLOR_BITS, KEY_DEPTH_BITS, DEPTH_MAX = PC.KEY_COLOR_BITS, PC.KEY_DEPTH_BITS, PC.DEPTH_MAX
KEY_COLOR_MASK = np.uint32(PC.KEY_COLOR_MASK)
EMPTY = np.uint32(PC.EMPTY_KEY)
PALETTE_BASE, PALETTE_MAX = PC.PALETTE_BASE, PC.PALETTE_MAX
COLOR_NAN, COLOR_UNLABELLED, COLOR_UNIFORM = PC.COLOR_NAN, PC.COLOR_UNLABELLED, PC.COLOR_UNIFORM
COLOR_TABLE_SIZE = PC.COLOR_TABLE_SIZE

BACKGROUND = (22, 22, 26, 255)
POINT_COLOR = (236, 236, 236, 255)
NAN_COLOR = (255, 0, 255, 255)
UNLABELLED = (128, 128, 128, 255)
MAX_POINT_SIZE = 64
BOX_PER_INVOCATION = 16  # points per invocation of pointcloud_bounds.comp (PER_INVOCATION there)


def footprint(size_px: int) -> np.ndarray:
    """Pixel offsets (dx, dy) of a round point ``size_px`` pixels across."""
    if not isinstance(size_px, (int, np.integer)) or not 1 <= size_px <= MAX_POINT_SIZE:
        raise ValueError(f"point_size_px must be an integer in 1..{MAX_POINT_SIZE}, got {size_px!r}")
    k = int(size_px)
    odd = k % 2
    rng = range(-(k - 1) // 2, k // 2 + 1)
    offs = [(dx, dy) for dy in rng for dx in rng
            if (2 * dx - (1 - odd)) ** 2 + (2 * dy - (1 - odd)) ** 2 <= k * k]
    return np.array(offs, dtype=np.int32).reshape(-1, 2)


@lru_cache(maxsize=64)
def _packed(background: tuple) -> int:
    """The ``bg`` field's word (the parameters are rebuilt every frame)."""
    return _exact.pack_rgba(background)


@register_view("pointcloud", block=PC, passes=POINTCLOUD_PASSES, inputs=("positions", "labels", "values"),
    tests=("tests/test_pointcloud_exact.py", "tests/test_pointcloud_discrete.py", "tests/test_frame_reuse.py"),
    cli=True, sample=Sample((300, 3), (128, 128)))
class PointCloud(PointColors, PointCloudTwin, ViewBase):
    """A rotatable point cloud coloured by label, by value, or uniformly.

    Parameters
    ----------
    positions : array-like (N, 3) or (N, 2), optional
        Any numeric dtype; drawn as float32. NaN/Inf points are skipped and counted.
    labels : array-like (N,) of int, optional
        Class indices coloured by ``palette`` (wrapping past its length); negative = grey.
    values : array-like (N,), optional
        Continuous values coloured by ``colormap`` over ``value_range``.
    yaw_deg, pitch_deg, zoom : float
        The camera (2-D data ignores yaw and pitch unless given).
    point_size_px : int
        Point diameter in pixels, 1..64.
    bounds : ((x0, y0, z0), (x1, y1, z1)), optional
        Fixed fit box; by default the view fits the box of the finite points every frame, on
        the device.
    """

    def __init__(self, positions=None, labels=None, values=None, *, yaw_deg: float | None = None,
                 pitch_deg: float | None = None, zoom: float = 1.0, point_size_px: int = 3,
                 colormap: str = "viridis", palette: str = "tab10", value_range="auto",
                 bounds=None, background=BACKGROUND, color=POINT_COLOR):
        super().__init__()
        self._lut = colormaps.lut(colormap)
        self._palette = colormaps.palette(palette)
        if len(self._palette) > PALETTE_MAX:  # the key's colour bits hold the table index
            raise ValueError(f"palette {palette!r} has {len(self._palette)} colours; at most {PALETTE_MAX}")
        self._foot = footprint(point_size_px)
        self.point_size_px = int(point_size_px)
        resolve_range(np.zeros(1, F32), value_range)  # a bad spec fails here, not at draw time
        self.value_range = value_range
        self.background, self.color = background, color
        self.bounds = None if bounds is None else np.asarray(bounds, dtype=np.float64).reshape(2, -1)
        if self.bounds is not None and not (np.abs(self.bounds) <= np.finfo(np.float32).max).all():
            raise ValueError(f"bounds {bounds!r} must be finite float32 numbers (the fit is float32)")
        self._yaw, self._pitch = yaw_deg, pitch_deg
        self.zoom = float(zoom)
        self._initial_camera = (yaw_deg, pitch_deg, self.zoom)
        self.source = Source(np.zeros((0, 3), np.float32))
        self._drawn_with = None  # what prepare() last drew with (kept_state)
        self._params_of = None  # what the uploaded parameter block was computed from
        self.labels = self.values = None
        # labels read in place (a tensor attached as labels=): a Source the shaders read each frame
        self.label_source: Source | None = None
        # values read in place (a float tensor attached as values=); with a string value_range,
        # the frame's range is the device's (pointcloud_values, pointcloud_fit)
        self.value_source: Source | None = None
        self._vrange_seen = None  # the (lo, hi) the last frame coloured by, from its counters
        self._classes_seen = (0, 0, 0)  # its classes, as read back with the frame's counters
        self._classes = None  # (labels, their distinct classes) for the legend
        self.color_pass = "auto"  # see per_point()
        if positions is not None:
            self.set_data(positions, labels=labels, values=values)

    # -- data and camera --------------------------------------------------------------
    def set_data(self, positions, labels=None, values=None) -> None:
        """Replace the points (and their labels or values)."""
        pos = as_float32(positions, "positions")
        if pos.ndim != 2 or pos.shape[1] not in (2, 3):
            raise ValueError(
                f"positions has shape {tuple(pos.shape)}; the pointcloud view takes (N, 3) or (N, 2)")
        if labels is not None and values is not None:
            raise ValueError("give labels or values, not both (colour comes from one of them)")
        n = pos.shape[0]
        self._set_source(Source(pos))
        self._set_label_source(None)
        self._set_value_source(None)
        self.labels = None if labels is None else as_labels(labels, n)
        self.values = None
        if values is not None:
            v = as_float32(values, "values").reshape(-1)
            if v.shape[0] != n:
                raise ValueError(f"values has {v.shape[0]} entries for {n} points")
            self.values = v

    def set_source(self, source: Source, labels=None, values=None) -> None:
        """Draw positions straight from ``source`` (a live tensor; see ``caliper_vk.attach``)."""
        if len(source.shape) != 2 or source.shape[1] not in (2, 3):
            raise ValueError(
                f"positions have shape {source.shape}; the pointcloud view takes (N, 3) or (N, 2). "
                "Attach a tensor of that shape (t.view(-1, 3) for flat xyz triples; for wider data, "
                "copy a 3-D projection into caliper_vk.empty((N, 3)) and update it), or draw other "
                "shapes with the heatmap or histogram view")
        n = source.shape[0]
        self._set_source(source)
        self._set_label_source(None)
        if isinstance(labels, Source):  # read in place, every frame (pointcloud_labels.comp)
            if labels.dtype not in ("int32", "uint8") or labels.array.reshape(-1).shape[0] != n:
                raise ValueError(f"labels read in place must be int32 or uint8 with one per point ({n}); "
                                 f"got {labels.dtype} {labels.shape}")
            self._set_label_source(labels)
            labels = None
        self.labels = None if labels is None else as_labels(labels, n)
        self.values = None
        self._set_value_source(None)
        if isinstance(values, Source):  # read in place, every frame (pointcloud_values*.comp)
            if values.array.reshape(-1).shape[0] != n:
                raise ValueError(f"values has {values.array.size} entries for {n} points")
            self._set_value_source(values)
        elif values is not None:
            self.values = as_float32(values, "values").reshape(-1)
            if self.values.shape[0] != n:
                raise ValueError(f"values has {self.values.shape[0]} entries for {n} points")

    def close(self) -> None:
        self._set_label_source(None)
        self._set_value_source(None)
        super().close()

    def _set_source(self, source: Source) -> None:
        self._replace_source(source)
        self._dirty.update(("positions", "labels", "values"))

    @property
    def positions(self) -> np.ndarray:
        """The positions as float32 (decoded exactly as the GPU decodes them)."""
        return self.source.float32()

    # a rewound step is drawn with the camera, host labels and values it was drawn with (labels
    # and values read in place are inputs: the history keeps their bytes)
    keeps_state = True

    def kept_state(self):
        """The camera and host labels/values the last ``prepare()`` drew with (a reference)."""
        return self._drawn_with

    def show_kept(self, state):
        """Draw with a kept step's camera, labels and values; returns what puts the live ones back."""
        if state is None:
            return super().show_kept(state)
        now = (self._yaw, self._pitch, self.zoom, self.labels, self.values)
        self._yaw, self._pitch, self.zoom, self.labels, self.values = state

        def restore():
            self._yaw, self._pitch, self.zoom, self.labels, self.values = now
        return restore

    def reset_camera(self) -> None:
        """Back to the camera the view was made with."""
        self._yaw, self._pitch, self.zoom = self._initial_camera

    def set_camera(self, yaw_deg=None, pitch_deg=None, zoom=None) -> None:
        if yaw_deg is not None:
            self._yaw = float(yaw_deg)
        if pitch_deg is not None:
            self._pitch = float(pitch_deg)
        if zoom is not None:
            if not zoom > 0:
                raise ValueError(f"zoom must be positive, got {zoom}")
            self.zoom = float(zoom)

    @property
    def camera(self) -> tuple[float, float, float]:
        three_d = self.source.shape[1] == 3
        yaw = self._yaw if self._yaw is not None else (30.0 if three_d else 0.0)
        pitch = self._pitch if self._pitch is not None else (20.0 if three_d else 0.0)
        return yaw, pitch, self.zoom

    # -- parameters shared by the shader and the twin ----------------------------------
    def params(self, width: int, height: int, rect_x: int = 0, rect_y: int = 0, base: int = 0,
               dtype: int = 0) -> ParamValues:
        """The parameter block as the host fills it: the fit's fields (cx..cz, scale, nscale,
        zmin, dscale) are left 0 for ``pointcloud_fit`` to write on the device
        (:meth:`params_fitted` adds them as the twin computes them)."""
        n, dim = self.source.shape
        yaw, pitch, zoom = self.camera
        mode = MODE_LABELS if self.labelled else (
            MODE_VALUES if self.valued else MODE_UNIFORM)
        vlo, vscale, vrange = 0.0, 0.0, PC.VRANGE_HOST
        if mode == MODE_VALUES and self.device_range:  # pointcloud_fit writes VLO, VSCALE
            vrange = PC.VRANGE_SYMMETRIC if self.value_range == "symmetric" else PC.VRANGE_AUTO
        elif mode == MODE_VALUES:  # host values, or a fixed range
            vlo, vhi = resolve_range(self.values if self.values is not None else np.zeros(0, F32),
                                     self.value_range)
            vscale = lut_scale(vlo, vhi)
        # float fields: each value rounded once from float64 to float32
        p = PC.values(n=n, dim=dim, w=width, h=height, size=self.point_size_px, mode=mode,
                      npal=len(self._palette), margin=MAX_POINT_SIZE, vrange=vrange,
                      r=rotation(yaw, pitch).reshape(-1), ox=width / 2, oy=height / 2, vlo=vlo, vscale=vscale,
                      fitk=zoom * 0.45 * min(width, height),  # the scale at radius 1
                      rect_x=rect_x, rect_y=rect_y, bg=_packed(tuple(self.background)), base=base, dtype=dtype)
        if self.bounds is not None:
            box = self._fixed_box()
            p.set(fixed=1, flo=box[0], fhi=box[1])
        return p

    def _fixed_box(self) -> np.ndarray:
        """The fixed ``bounds`` as float32 (2, 3) (z 0 for a 2-D box)."""
        box = np.zeros((2, 3), np.float32)
        box[:, :min(3, self.bounds.shape[1])] = self.bounds[:, :3]
        return box

    def params_fitted(self, width: int, height: int, rect_x: int = 0, rect_y: int = 0, base: int = 0,
                      dtype: int = 0) -> ParamValues:
        """:meth:`params` with the fit's words as ``pointcloud_fit`` writes them on the device
        (the twin's; reads the positions)."""
        p = self.params(width, height, rect_x, rect_y, base, dtype)
        fixed = None if self.bounds is None else self._fixed_box()
        box = device_box(self.positions) if fixed is None else None
        p.set(**device_fit(box, fixed, F32(p["fitk"])))
        if p["vrange"] != PC.VRANGE_HOST:
            lo, _, vscale = device_value_range(device_value_keys(self._host_values()),
                                               p["vrange"] == PC.VRANGE_SYMMETRIC)
            p.set(vlo=lo, vscale=vscale)
        return p

    def _colors(self) -> np.ndarray:
        """The colour table a key's low bits index (layout: POINTCLOUD, _pointfit.py)."""
        table = np.zeros(COLOR_TABLE_SIZE, np.uint32)
        table[:256] = self._lut
        table[PALETTE_BASE:PALETTE_BASE + len(self._palette)] = self._palette
        table[[COLOR_NAN, COLOR_UNLABELLED, COLOR_UNIFORM]] = [
            _exact.pack_rgba(c) for c in (NAN_COLOR, UNLABELLED, self.color)]
        return table

    # -- drawable protocol ----------------------------------------------------------------
    def per_point(self, n: int | None = None) -> bool:
        """True when the colour pass runs per point (``pointcloud_paint``) rather than per
        pixel (``pointcloud_resolve``): the points' footprints cover well under the panel's
        pixels. Both give the same bytes; ``color_pass`` ("auto", "points" or "pixels")
        forces one. On lavapipe the per-point pass costs about twice as much per footprint
        pixel as the per-pixel pass per panel pixel (and far less in all for small clouds:
        2,000 points on 800 x 600, 0.3 ms against 4-8 ms), hence the factor."""
        if self.color_pass != "auto":
            return self.color_pass == "points"
        n = self.source.shape[0] if n is None else n
        return 2 * n * len(self._foot) <= self.rect.width * self.rect.height

    def prepare(self) -> None:
        # per frame and panel, so in one function: the input's place (_input()'s answer for an
        # imported source), then the key of everything params() and the rest read
        src = self.source
        imported = src.imported
        if imported is not None and self._bound.get("positions") is imported:
            base, dtype = imported.offset, DTYPE_CODES[src.dtype]
        else:
            _, base, dtype = self._input("positions", src)
        # a live input may hold new bytes each frame (the host does not look: the fit is the
        # device's); host data changes only through set_data, which marks the view dirty
        same = not src.live
        fit = None if self.bounds is None else self.bounds.tobytes()
        vr = self.value_range
        lsrc, vsrc = self.label_source, self.value_source
        ranged = None if self.values is None and vsrc is None else (
            id(self.values), id(vsrc), vr if isinstance(vr, str) else tuple(vr))
        # further inputs read in place (no call when there are none: this runs every frame)
        lplace = None if lsrc is None else self._place("labels", lsrc)
        vplace = None if vsrc is None else self._place("values", vsrc)
        # an equal key means an equal block, colour indices and buffers
        key = (fit, src.array.shape, self._yaw, self._pitch, self.zoom, self.rect, base, dtype,
               id(self.labels), ranged, self.point_size_px, len(self._palette),
               (tuple(self.background), tuple(self.color)), self.color_pass, lplace, vplace)
        self.unchanged = False
        if not self._dirty and key == self._params_of and "params" in self._buffers:
            self.unchanged = same and src.current  # the same bytes: the same counters (ViewBase.unchanged)
            return  # what the last frame uploaded and checked is this frame's too
        r = self.rect
        n = src.array.shape[0]
        self._drawn_with = (self._yaw, self._pitch, self.zoom, self.labels, self.values)
        p = self.params(r.width, r.height, r.x, r.y, base, dtype)
        if lplace is not None:
            p.set(lbase=lplace[0], ldtype=lplace[1])
        if vplace is not None:
            p.set(vbase=vplace[0], vdtype=vplace[1])
        self._upload("params", p)
        self._dtype_code = dtype  # the DTYPE word, for the pipelines' specialisation (record_reads)
        # the per-point colour indices: made again when the labels or values, the palette or
        # the value range (VLO, VSCALE) change, never per frame; labels read in place: by the
        # device, every frame (pointcloud_labels)
        on_device = lsrc is not None or vsrc is not None
        colors_of = (id(self.labels), id(self.values), id(self._palette), _exact.f32_bits(p["vlo"]),
                     _exact.f32_bits(p["vscale"]), on_device)
        if on_device:
            if colors_of != getattr(self, "_colors_of", None) and "point_colors" in self._buffers:
                self._buffers.pop("point_colors").close()  # the host's table: the device writes its own
            self._buffer("point_colors", 4 * max(1, n), host_visible=False)
            self._colors_of = colors_of
        elif self._dirty or colors_of != getattr(self, "_colors_of", None):
            uniform = self.labels is None and self.values is None
            cidx = np.zeros(1, np.uint32) if uniform else self.color_index(slice(None), p)
            self._upload("point_colors", cidx)
            self._colors_of = colors_of
        if self._dirty or not self._params_of or key[12] != self._params_of[12]:  # new background, colour
            self._upload("colors", self._colors())
            self._upload("background", np.full(r.width, _exact.pack_rgba(self.background), np.uint32))
            self._dirty.clear()
        self._buffer("depth", r.width * r.height * 4, host_visible=False)
        self._buffer("stats", 4 * PC.STATS_WORDS)
        self._buffer("box", 4 * PC.BOX_WORDS, host_visible=False)
        fixed = (self.bounds is not None, lsrc is not None, vsrc is not None, self.device_range)
        if getattr(self, "_recorded", None) != (n, self.per_point(n), self._spec(dtype), fixed):
            self.stale = True
        self._params_of = key

    def _spec(self, dtype: int) -> tuple:
        """The splat's and paint's specialisation constants (SPEC_DTYPE, SPEC_SIZE, SPEC_MODE,
        SPEC_DIM, declared with the POINTCLOUD block): the words DTYPE, SIZE, MODE and DIM,
        folded into the pipeline when it is made."""
        mode = MODE_LABELS if self.labelled else (
            MODE_VALUES if self.valued else MODE_UNIFORM)
        return int(dtype), self.point_size_px, mode, self.source.shape[1]

    def _pipeline(self, name: str, spec: tuple) -> ComputePipeline:
        """The built-in pipeline ``name`` specialised to ``spec`` (:meth:`_spec`)."""
        dtype, size, mode, dim = spec
        return pipeline(self.device, name, PC.specialize(SPEC_DTYPE=dtype, SPEC_SIZE=size,
                                                         SPEC_MODE=mode, SPEC_DIM=dim))

    def record_reads(self, rec) -> None:
        """Depth clear and splat, and the per-point colour pass: the passes that read the
        positions."""
        b = self._buffers
        self._drop_sets()
        n = self.source.shape[0]
        per_point = self.per_point(n)
        spec = self._spec(self._dtype_code)
        pos = self._bound["positions"]
        splat = self._pipeline("pointcloud_splat", spec).bind(
            params=b["params"], pos=pos, depth=b["depth"], stats=b["stats"], point_colors=b["point_colors"])
        if per_point:
            color = self._pipeline("pointcloud_paint", spec).bind(
                params=b["params"], pos=pos, depth=b["depth"], point_colors=b["point_colors"],
                colors=b["colors"], target=self.target)
        else:
            color = pipeline(self.device, "pointcloud_resolve").bind(params=b["params"], depth=b["depth"],
                                                                     colors=b["colors"])
        # the fit, on the device: the box of the finite points (unless fixed), then the words
        # of the parameter block that the splat and paint read (pointcloud_fit binds the block
        # as a storage buffer and writes them)
        fixed = (self.bounds is not None, self.label_source is not None, self.value_source is not None,
                 self.device_range)
        box = self._pipeline("pointcloud_bounds", spec).bind(params=b["params"], pos=pos, box=b["box"])
        fit = pipeline(self.device, "pointcloud_fit").bind(params=b["params"], box=b["box"], stats=b["stats"])
        self._sets = [splat, color, box, fit]
        # further inputs read in place: labels to colours; values' range, then values to colours
        labels = vrange = vcolors = None
        if fixed[1]:
            labels = pipeline(self.device, "pointcloud_labels").bind(
                params=b["params"], labels=self._bound["labels"], point_colors=b["point_colors"],
                stats=b["stats"])
            self._sets.append(labels)
        if fixed[2]:
            vcolors = pipeline(self.device, "pointcloud_values_color").bind(
                params=b["params"], vals=self._bound["values"], point_colors=b["point_colors"])
            self._sets.append(vcolors)
        if fixed[3]:
            vrange = pipeline(self.device, "pointcloud_values").bind(
                params=b["params"], vals=self._bound["values"], box=b["box"])
            self._sets.append(vrange)
        rec.fill(b["depth"], 0xFFFFFFFF)
        rec.fill(b["stats"], 0)
        rec.fill(b["box"], 0xFFFFFFFF)
        if per_point:
            r = self.rect
            rec.fill_rect(b["background"], self.target, r.x, r.y, r.width, r.height)
        rec.barrier()
        rec.mark("pointcloud clears")
        if n and not fixed[0]:
            rec.dispatch(box, *groups_1d(-(-n // BOX_PER_INVOCATION)))
        if n and labels is not None:
            rec.dispatch(labels, *groups_1d(-(-n // BOX_PER_INVOCATION)))
        if n and vrange is not None:
            rec.dispatch(vrange, *groups_1d(-(-n // BOX_PER_INVOCATION)))
        if n and (labels is not None or vrange is not None or not fixed[0]):
            rec.barrier()
        rec.dispatch(fit, 1)
        rec.barrier()
        if n and vcolors is not None:  # by this frame's range, which the fit pass wrote
            rec.dispatch(vcolors, *groups_1d(n))
            rec.barrier()
        rec.mark("pointcloud fit")
        if n:
            rec.dispatch(splat, *groups_1d(n))
        rec.mark("pointcloud splat")
        if per_point and n:
            rec.barrier()
            rec.dispatch(color, *groups_1d(n))
        self._recorded = (n, per_point, spec, fixed)

    def record(self, rec) -> None:
        """The per-pixel resolve pass, when it is the colour pass (it reads the keys and the
        colour table, not the live tensor): keys to colours in place, then a copy of those
        rows into the panel's rectangle of the target."""
        if not self._recorded[1]:
            r = self.rect
            rec.dispatch(self._sets[1], *groups_1d(r.width * r.height))
            rec.barrier()
            rec.copy_buffer_to_image(self._buffers["depth"], self.target, r.x, r.y, r.width, r.height)
        self.stale = False

    def finish(self) -> None:
        nonfinite, offscreen, bad_values, *classes = self._stat_words(PC.STATS_WORDS)
        if self.label_source is not None:
            self._classes_seen = tuple(classes[:3])
        if self.value_source is not None and isinstance(self.value_range, str):  # device_range, inline
            self._vrange_seen = tuple(float(v) for v in np.asarray(classes[3:5], np.uint32).view(F32))
        n = self.source.array.shape[0]
        self.stats = {"points": n, "nonfinite": nonfinite, "offscreen": offscreen,
                      "nonfinite_values": bad_values, "drawn": n - nonfinite - offscreen}
