"""The point cloud's colours: where each point's colour-table index comes from.

Three sources, one rule (the twin's, :meth:`PointColors.color_index`): host labels or values
(the host makes the per-point indices once per labels, values and value range, and uploads
them); labels read in place (an int32/uint8 tensor attached as ``labels=``:
``pointcloud_labels.comp`` makes the indices on the device every frame and notes which classes
occur); values read in place (a float tensor attached as ``values=``: ``pointcloud_values.comp``
reduces their finite extremes, the fit pass turns them into the frame's range, and
``pointcloud_values_color.comp`` makes the indices). The legend shows what the frame used.
:class:`PointColors` is mixed into :class:`~caliper_vk.views.pointcloud.PointCloud`.
"""

from __future__ import annotations

import numpy as np

from .. import chrome
from .._arrays import as_labels
from . import _exact
from ._base import resolve_range
from ._pointfit import POINTCLOUD as PC
from ._source import DTYPE_CODES, Source

F32 = np.float32
NO_LABEL = 0xFFFFFFFF  # a negative label: drawn grey
PALETTE_BASE, COLOR_NAN, COLOR_UNLABELLED, COLOR_UNIFORM = (
    PC.PALETTE_BASE, PC.COLOR_NAN, PC.COLOR_UNLABELLED, PC.COLOR_UNIFORM)


class PointColors:
    """The point cloud's labels and values, host or read in place, and its legend (a mixin of
    ``PointCloud``, whose ``labels``, ``values``, ``label_source``, ``value_source``,
    ``value_range``, ``_palette``, ``_lut`` and buffers it reads)."""

    def _set_label_source(self, source: Source | None) -> None:
        old, self.label_source = self.label_source, source
        if old is not None and old is not source:
            old.close()
        self._classes_seen = (0, 0, 0)
        self._dirty.add("labels")

    def _set_value_source(self, source: Source | None) -> None:
        old, self.value_source = self.value_source, source
        if old is not None and old is not source:
            old.close()
        self._vrange_seen = None
        self._dirty.add("values")

    @property
    def valued(self) -> bool:
        """Coloured by values (host values, or values read in place)."""
        return self.values is not None or self.value_source is not None

    def _host_values(self) -> np.ndarray:
        """The values as float32: the host values, or the host array of the values read in place
        (the twin's; for a GPU tensor, its attach-time copy)."""
        return self.values if self.values is not None else self.value_source.float32().reshape(-1)

    @property
    def device_range(self) -> bool:
        """The colour range is computed on the device each frame (values read in place with an
        ``"auto"`` or ``"symmetric"`` value_range)."""
        return self.value_source is not None and isinstance(self.value_range, str)

    @property
    def labelled(self) -> bool:
        """Coloured by labels (host labels, or labels read in place)."""
        return self.labels is not None or self.label_source is not None

    def color_index(self, idx: np.ndarray, p) -> np.ndarray:
        """The colour-table indices of the points ``idx`` under the parameter block ``p``: the
        twin's rule, and what the shaders read per point (``point_colors[]``, uploaded by
        :meth:`prepare` when the labels, values or value range change)."""
        if self.labelled:
            lab = self._host_labels()[idx]
            return np.where(lab == NO_LABEL, np.uint32(COLOR_UNLABELLED),
                            np.uint32(PALETTE_BASE) + lab % np.uint32(len(self._palette))).astype(np.uint32)
        if self.valued:
            v = self._host_values()[idx]
            ok = _exact.classify(v) == _exact.FINITE
            lo, scale = F32(p["vlo"]), F32(p["vscale"])
            li = _exact.lut_index(_exact.ftz(np.where(ok, v, F32(0))), lo, scale, 255)
            return np.where(ok, li, np.uint32(COLOR_NAN)).astype(np.uint32)
        return np.full(len(idx), COLOR_UNIFORM, np.uint32)

    def _host_labels(self) -> np.ndarray:
        """The labels as uint32 (NO_LABEL for a negative one): the host labels, or the host
        array of the labels read in place (the twin's; for a GPU tensor, its attach-time copy)."""
        if self.labels is not None:
            return self.labels
        return as_labels(self.label_source.array.reshape(-1), self.source.shape[0])

    def legend(self) -> list:
        if self.label_source is not None:  # the classes the last frame read, from its counters
            lo, hi, more = self._classes_seen
            mask = lo | hi << 32
            classes = [c for c in range(PC.CLASS_BITS) if mask >> c & 1]
            if more or not 0 < len(classes) <= 20:
                return [(f"{len(classes)}{'+' if more else ''} classes", chrome.DIM)] if mask or more else []
            items = []
            for c in classes:
                items += [chrome.Swatch(int(self._palette[c % len(self._palette)])), (f"{c} ", chrome.DIM)]
            return items
        if self.labels is not None:
            if self._classes is None or self._classes[0] is not self.labels:  # once per label set
                self._classes = (self.labels, np.unique(self.labels[self.labels != NO_LABEL]))
            classes = self._classes[1]
            if not 0 < len(classes) <= 20:
                return [(f"{len(classes)} classes", chrome.DIM)] if len(classes) else []
            items = []
            for c in classes:
                items += [chrome.Swatch(int(self._palette[c % len(self._palette)])), (f"{c} ", chrome.DIM)]
            return items
        if self.device_range:  # the range the last frame coloured by, from its counters
            return [] if self._vrange_seen is None else chrome.range_legend(*self._vrange_seen, self._lut)
        if self.valued:
            lo, hi = resolve_range(self.values if self.values is not None else np.zeros(0, F32),
                                   self.value_range)
            return chrome.range_legend(lo, hi, self._lut)
        return []

    def _place(self, name: str, source: Source) -> tuple:
        """(byte offset, dtype code) of a further input read in place (labels, values), bound
        (staged if need be) under ``name``."""
        if source.imported is not None and self._bound.get(name) is source.imported:
            return source.imported.offset, DTYPE_CODES[source.dtype]
        return self._input(name, source)[1:]
