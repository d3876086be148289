"""What every built-in view shares: host-visible input buffers, the parameter
and counter buffers, built-in pipelines, and value-range handling.

A view is a *drawable* for :class:`caliper_vk.engine.Canvas` (see its module
docstring for the protocol). It describes its inputs and passes; only the
engine calls Vulkan. Input buffers are host-visible: ``set_data`` writes the
caller's values straight into them (the host staging path); the live-attach
path swaps in imported buffers instead.
"""

from __future__ import annotations

import math

import numpy as np

from ..engine import Buffer, ComputePipeline, shaders
from . import _exact

MAX_GROUPS = 65535


def pipeline(device, name: str, bindings, specialization: dict | None = None) -> ComputePipeline:
    """The built-in pipeline ``name`` on ``device``, specialised to ``{constant_id: value}``
    (made once per device and specialisation, closed with it)."""
    spec = dict(specialization or {})
    key = ("pipeline", name, tuple(sorted(spec.items())))
    p = device.cache.get(key)
    if p is None or p.handle is None:
        p = ComputePipeline(device, shaders.load(name), bindings, name=name, specialization=spec)
        device.cache[key] = p
    return p


def wide(*largest: int) -> int:
    """1 when one of a shader's pixel-to-cell products (its ``largest`` values of ``a * b`` or
    ``a * b + c - 1`` in muldiv.glsl) reaches 2^32 and needs the 64-bit path, else 0."""
    return int(max(largest, default=0) >= 2 ** 32)


def groups_1d(n: int, local: int = 256) -> tuple[int, int]:
    """Workgroup counts (x, y) covering ``n`` invocations of a 1-D job."""
    total = max(1, -(-n // local))
    if total <= MAX_GROUPS:
        return total, 1
    return MAX_GROUPS, -(-total // MAX_GROUPS)


def resolve_range(data: np.ndarray, spec) -> tuple[float, float]:
    """The (lo, hi) a colormap spans: ``"auto"``, ``"symmetric"`` or ``(lo, hi)``.

    Only finite values count; with none, ``(0, 1)``. A zero-width range is
    widened so a constant field maps to the middle colour.
    """
    if isinstance(spec, str):
        if spec not in ("auto", "symmetric"):
            raise ValueError(f"value_range {spec!r} is not one of 'auto', 'symmetric' or (lo, hi)")
        extremes = (data.min(), data.max()) if data.size else ()
        if not all(map(math.isfinite, extremes)):
            # min and max propagate NaN and an Inf is an extreme: only now look per value
            finite = data[np.isfinite(data)]
            extremes = (finite.min(), finite.max()) if finite.size else ()
        if not extremes:
            lo, hi = 0.0, 1.0
        else:
            # ftz is monotone: flushing the extremes equals the extremes of the flushed data
            lo, hi = (float(_exact.ftz(v)) for v in extremes)
            if spec == "symmetric":
                m = max(abs(lo), abs(hi))
                lo, hi = -m, m
    else:
        try:
            lo, hi = (float(v) for v in spec)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"value_range {spec!r} is not one of 'auto', 'symmetric' or (lo, hi)") from exc
        if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
            raise ValueError(f"value_range ({lo}, {hi}) must be finite with lo <= hi")
    if hi <= lo or hi - lo < 1e-30:
        pad = max(abs(lo) * 0.5, 0.5)
        lo, hi = lo - pad, hi + pad
    return float(np.float32(lo)), float(np.float32(hi))


def lut_scale(lo: float, hi: float, last: int = 255) -> float:
    """The float32 factor mapping [lo, hi] onto [0, last] (computed on the host)."""
    return float(np.float32(last / (float(np.float32(hi)) - float(np.float32(lo)))))


class ViewBase:
    """Buffer bookkeeping shared by the views; not a view by itself."""

    # Views whose shaders read the attached tensor itself; a view that draws a
    # host-computed transform of it says so (the session reports host staging).
    gpu_reads_source = True
    host_reason = ""

    def __init__(self):
        self.device = None
        self.target = None
        self.rect = None
        self.stale = True
        self._buffers: dict[str, Buffer] = {}
        self._sets: list = []
        self.stats: dict[str, int] = {}
        self._dirty: set[str] = {"all"}  # inputs whose host copy changed since the last upload
        self._bound: dict = {}  # binding name -> the buffer the recorded commands use
        # Changes whenever the inputs hold new values (set_data; a live session sets it per
        # write and step), so views with memory of past frames can tell a new step from a redraw.
        self.data_version = 0
        # The last prepare() found every input byte and parameter as the frame before had them, so
        # that frame's counters (finish(): stats) are the last ones again; a live session's frame
        # plan then skips reading them. Only views that check all of that set it.
        self.unchanged = False
        # What the last prepare() drew with that the inputs do not hold (a point cloud's camera,
        # labels and values), or None: the live history keeps it with each frame and puts it
        # back with show(shown) while the frame's step is shown again (rewind).
        self.shown = None

    def _buffer(self, name: str, nbytes: int, host_visible: bool = True) -> Buffer:
        """A named buffer of at least ``nbytes``; growing it makes the view stale."""
        buf = self._buffers.get(name)
        if buf is None or buf.size < nbytes:
            if buf is not None:
                buf.close()
            buf = Buffer(self.device, max(nbytes, 16), host_visible=host_visible,
                         readback=(name == "stats"))
            self._buffers[name] = buf
            self.stale = True
        return buf

    def _stat_words(self, count: int) -> list[int]:
        """The first ``count`` uint32 words of the ``stats`` buffer as ints: read by
        ``finish()`` every frame, so the numpy view of the mapping is made once per buffer."""
        buf = self._buffers["stats"]
        held = getattr(self, "_stats_view", None)
        if held is None or held[0] is not buf or held[1] != count:
            held = self._stats_view = (buf, count, buf.view(np.uint32, count))
        return held[2].tolist()

    def _upload(self, name: str, array: np.ndarray) -> Buffer:
        buf = self._buffer(name, array.nbytes)
        if array.nbytes:
            buf.write(array)
        return buf

    def _input(self, name: str, source) -> tuple:
        """(buffer, byte offset, dtype code) to bind for ``source``; stages it when needed."""
        if source.imported is not None:
            if self._bound.get(name) is not source.imported:
                self._bound[name] = source.imported
                self.stale = True
            return source.imported, source.imported.offset, source.code
        if source.live or name in self._dirty or "all" in self._dirty:
            buf = self._upload(name, source.raw())
        else:
            buf = self._buffers[name]
        source.staged = buf
        if self._bound.get(name) is not buf:
            self._bound[name] = buf
            self.stale = True
        return buf, 0, source.code

    def _replace_source(self, source) -> None:
        """Make ``source`` the view's input, closing the old one's import unless shared."""
        old, self.source = self.source, source
        if old is not source and old.imported is not None and old.imported is not source.imported:
            old.close()

    def legend(self) -> list:
        """The right-hand part of the panel's title bar: items as in :mod:`caliper_vk.chrome`
        (a colour ramp with its value range, class swatches, a trace's last value)."""
        return []

    def bind(self, device, target, rect) -> None:
        if self.target is not None:
            raise RuntimeError("this view is already on a canvas; make a new view for another panel")
        if self.device is not None and device is not self.device:
            raise RuntimeError("this view's buffers live on another Vulkan device")
        self.device, self.target, self.rect = device, target, rect
        self.stale = True
        self._dirty.add("all")

    def unbind(self) -> None:
        """Leave the canvas but keep the buffers (to be placed on another canvas)."""
        self._drop_sets()
        self.target = self.rect = None
        self.stale = True

    def _drop_sets(self) -> None:
        for s in self._sets:
            s.close()
        self._sets = []

    def close(self) -> None:
        self._drop_sets()
        self._bound.clear()
        source = getattr(self, "source", None)
        if source is not None:
            source.close()
        for b in self._buffers.values():
            b.close()
        self._buffers.clear()
        self.device = self.target = None


class ArrayView(ViewBase):
    """A view of one array input (``self.source``) read as float32 values."""

    def _set_source(self, source) -> None:
        self._replace_source(source)
        self._range_cache = None
        self._dirty.add("data")

    @property
    def data(self) -> np.ndarray:
        """The values as float32 (decoded exactly as the GPU decodes them)."""
        return self.source.float32()

    def _data_binding(self) -> tuple:
        """Bind (staging if needed) the input; an empty one still needs a buffer for Vulkan."""
        from ._source import Source

        source = self.source if self.source.nbytes else Source(np.zeros(1, np.float32))
        return self._input("data", source)

    def _upload_data_and_params(self) -> None:
        """Bind the input and upload ``self.params(...)`` for the panel rectangle."""
        r = self.rect
        _, base, dtype = self._data_binding()
        self._upload("params", self.params(r.width, r.height, r.x, r.y, base, dtype))


class RangedView(ArrayView):
    """An array view whose colours or axis span one value range (``value_range``)."""

    @property
    def range(self) -> tuple[float, float]:
        """The (lo, hi) its colours or axes span for the current values (cached per data
        version; a live source is re-read every frame)."""
        if self._range_cache is None or self.source.live:
            self._range_cache = resolve_range(self.data, self.value_range)
        return self._range_cache
