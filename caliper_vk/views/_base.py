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
from ..engine.shaders import passes
from ..engine.shaders.params import RANGE as RG
from . import _exact

MAX_GROUPS = 65535


def pipeline(device, name: str, specialization: dict | None = None) -> ComputePipeline:
    """The declared pass ``name`` (its ``Pass``, in its view's module) on ``device``,
    specialised to ``{constant_id: value}`` (made once per device and specialisation, closed
    with it). Its :meth:`~caliper_vk.engine.ComputePipeline.bind` takes the resources by the
    declared binding names."""
    spec = dict(specialization or {})
    key = ("pipeline", name, tuple(sorted(spec.items())))
    p = device.cache.get(key)
    if p is None or p.handle is None:
        declared = passes.get(name)
        p = ComputePipeline(device, shaders.load(name), declared.kinds, name=name, specialization=spec,
                            names=declared.names)
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


def range_mode(spec) -> tuple[int, float, float]:
    """(mode, fixed lo, fixed hi) of a valid ``value_range`` for the device's resolve pass
    (engine/shaders/range_resolve.comp): the mode is ``RANGE.MODE_AUTO``, ``MODE_SYMMETRIC`` or
    ``MODE_FIXED`` (then with the pair as float32)."""
    if isinstance(spec, str) and spec in ("auto", "symmetric"):
        return (RG.MODE_AUTO if spec == "auto" else RG.MODE_SYMMETRIC), 0.0, 0.0
    resolve_range(np.zeros(1, np.float32), spec)  # names the problem of a bad string or pair
    lo, hi = (float(np.float32(v)) for v in spec)
    return RG.MODE_FIXED, lo, hi


def record_range_pass(rec, range_set, count: int = 1) -> None:
    """Record the resolve pass (range_resolve.comp) for ``count`` ranges, between barriers: it
    reads what the stats pass wrote and the drawing passes read what it writes."""
    rec.barrier()
    rec.dispatch(range_set, -(-count // 64))
    rec.barrier()


def lut_scale(lo: float, hi: float, last: int = 255) -> float:
    """The float32 factor mapping [lo, hi] onto [0, last] (computed on the host)."""
    return float(np.float32(last / (float(np.float32(hi)) - float(np.float32(lo)))))


def _nothing() -> None:
    return None


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

    def _upload(self, name: str, array) -> Buffer:
        """Write ``array`` (an array, or a parameter block's :class:`ParamValues`) into the
        named buffer, growing it when needed."""
        array = np.asarray(array)
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

    # True when a rewound frame needs more than the step's input bytes (kept_state)
    keeps_state = False

    def kept_state(self):
        """What a rewound frame of this step needs besides its inputs' bytes (when
        :attr:`keeps_state`). A live session's history keeps it with the step (every frame,
        after ``prepare``: keep it cheap, a reference rather than a copy) and hands it to
        :meth:`show_kept`."""
        return None

    def show_kept(self, state):
        """Draw the next frame as the kept step was drawn (``state``: its :meth:`kept_state`,
        None when it kept none); returns the function that puts the live state back."""
        return _nothing

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
    """An array view whose colours or axis span one value range (``value_range``).

    The range is resolved on the device, in the frame that draws it: the view's stats pass
    keeps the finite min/max of the values where they live (orderable keys at stats words
    ``range_words[0]``, ``+1``; with several ranges, all the min keys then all the max keys),
    the resolve pass (range_resolve.comp, parameters from
    :meth:`_range_params`) writes (lo, hi, scale) at ``range_words[1]`` for the drawing
    passes, and :meth:`_read_range` takes them back with the frame's counters: what titles
    and legends show. The host reads no value for it. :meth:`reference_range` is the twin.
    """

    range_words = (5, 7)  # stats words of the (min, max) keys and of (lo, hi, scale)
    shown_range: tuple[float, float] | None = None

    def range_last(self) -> int:
        """The top of the scale's target interval: ``scale = last / (hi - lo)``."""
        return 255

    def _set_source(self, source) -> None:
        super()._set_source(source)
        self.shown_range = None

    @property
    def range(self) -> tuple[float, float]:
        """The (lo, hi) the last frame drew with (read back with its counters); before a frame
        has drawn the current source, the twin's range of its host values."""
        if self.shown_range is not None:
            return self.shown_range
        lo, hi, _ = self.reference_range()
        return float(lo), float(hi)

    def range_spec(self) -> tuple[int, float, float]:
        """(mode, fixed lo, fixed hi) of the resolve pass: :func:`range_mode` of ``value_range``
        (a view whose range follows its own rule, such as the confusion view's, says so here)."""
        return range_mode(self.value_range)

    def reference_range(self, values=None, last=None) -> tuple:
        """(lo, hi, scale) as float32, computed from ``values`` (default: :attr:`data`) as the
        stats and resolve passes compute them on the device, bit for bit."""
        mode, flo, fhi = self.range_spec()
        kmin, kmax = (_exact.NO_KEY, 0) if mode == RG.MODE_FIXED else _exact.finite_keys(
            self.data if values is None else values)
        return _exact.device_range(mode, kmin, kmax, flo, fhi, self.range_last() if last is None else last)

    def count_bounds(self) -> tuple[float, float]:
        """The (lo, hi) the stats pass counts values below / above: a fixed range's own; none
        (-inf, inf) for a range made from the values, which holds them all."""
        mode, flo, fhi = self.range_spec()
        if mode != RG.MODE_FIXED:
            return float("-inf"), float("inf")
        lo, hi, _ = _exact.device_range(mode, 0, 0, flo, fhi, 1)
        return float(lo), float(hi)

    def _range_params(self, count: int = 1, last=None):
        mode, flo, fhi = self.range_spec()
        return RG.values(mode=mode, count=count, keys=self.range_words[0], out=self.range_words[1],
                         last=self.range_last() if last is None else last, lo=flo, hi=fhi)

    def _read_range(self, words: list[int]) -> None:
        """Keep the frame's (lo, hi) from its stats words (read back by ``finish``)."""
        at = self.range_words[1]
        lo, hi = np.asarray(words[at: at + 2], np.uint32).view(np.float32)
        self.shown_range = (float(lo), float(hi))
