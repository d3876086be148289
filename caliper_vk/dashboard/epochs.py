"""Epochs overlaid: a scalar panel's per-step series drawn epoch over epoch on one within-epoch
axis, older fainter (the reading of a run epoch against epoch: does the loss fall within each
epoch, does the next start where the last ended, where in the epoch does a spike come).

Every scalar panel with a per-step series has an "epochs" toggle (``Dashboard.overlay_epochs``,
``caliper view --epochs`` for all of them). In that mode the panel draws, for each shown run and
series, the last ``history`` epochs that began at or before the cursor: each epoch's samples at
``step - (the epoch's first step - 1)``, so every epoch starts at 1; the newest in full colour,
each older one fainter. The epochs are the run's own (``Recorder.end_epoch``), or
``steps_per_epoch`` multiples when it recorded none; the epoch still running at the cursor is
drawn up to the cursor, so moving the cursor replays the epochs. A series with about one sample
per epoch (a validation loss) has nothing to overlay: the panel names it and leaves it out.
The run's events are drawn at their place in their epoch, fainter in an older one.

A mixin of :class:`~caliper_vk.dashboard.app.Dashboard`.
"""

from __future__ import annotations

import numpy as np
from imgui_bundle import imgui, implot

from . import model
from .marks import EVENT_RGB, HOVER_PX
from .style import NEUTRAL, _series_shade, _spec, series_rgb


def epoch_bounds(run) -> list[int]:
    """The last step of each epoch of ``run``, in order, with the run's last step after them
    when an epoch was still running; empty when it has none."""
    ends = sorted({int(e["step"]) for e in run.epochs if isinstance(e.get("step"), int)})
    spe = (run.meta or {}).get("steps_per_epoch")
    r = run.step_range
    if not ends and spe and r and not (run.meta or {}).get("train_size"):
        ends = [round(k * spe) for k in range(1, int(r[1] / spe) + 1)]
    if r and ends and r[1] > ends[-1]:
        ends.append(r[1])
    return ends


def epoch_segments(run, key: str, upto: float, count: int, ends: list[int] | None = None,
                   whole: dict | None = None) -> list[tuple[int, np.ndarray, np.ndarray, bool]]:
    """The last ``count`` epochs of series ``key`` that began at or before step ``upto``, oldest
    first: (epoch number from 1, x = steps into the epoch from 1, values, whether the epoch is
    whole), each cut at ``upto``. ``ends``: :func:`epoch_bounds` of the run, when known;
    ``whole``: a dict keeping each whole epoch's arrays (they do not depend on ``upto``)."""
    s = run.metrics.get(key)
    ends = epoch_bounds(run) if ends is None else ends
    if s is None or not len(s) or not ends:
        return []
    starts = [0, *ends[:-1]]  # epoch k holds the steps (starts[k], ends[k]]
    live = [k for k in range(len(ends)) if starts[k] < upto]
    out = []
    for k in live[-count:]:
        done = ends[k] <= upto
        if done and whole is not None and k in whole:
            x, y = whole[k]
        else:
            lo = model.search_x(s.step, starts[k], "right")
            hi = model.search_x(s.step, min(ends[k], upto), "right")
            x = s.step[lo:hi].astype(np.float64) - starts[k]
            y = s.value[lo:hi].astype(np.float64)
            if done and whole is not None:
                whole[k] = (x, y)
        if len(x):
            out.append((k + 1, x, y, done))
    return out


def epoch_alpha(age: int, count: int) -> float:
    """The opacity of an epoch ``age`` epochs older than the newest of ``count`` drawn."""
    return 1.0 if age == 0 else max(0.12, 0.75 * (1 - age / count))


def per_step(run, key: str) -> bool:
    """Whether series ``key`` of ``run`` has samples to lay over each other within its epochs
    (more than about one per epoch: a per-epoch validation loss has not)."""
    return _per_step(run.metrics.get(key), len(epoch_bounds(run)))


def _per_step(s, epochs: int) -> bool:
    return s is not None and epochs > 0 and len(s) >= 2 * epochs


class EpochOverlays:
    """A scalar panel's "epochs" mode (state lives on the Dashboard: ``epochs_overlaid``)."""

    def overlay_epochs(self, index: int, on: bool = True) -> None:
        """Draw scalar panel ``index`` epoch over epoch (``on``), or over progress again."""
        (self.epochs_overlaid.add if on else self.epochs_overlaid.discard)(index)

    def _overlayable(self, panel: model.Panel) -> list[str]:
        """The series of ``panel`` that some shown run recorded per step within its epochs."""
        key = ("epoch keys", panel.title, tuple(panel.keys))
        if key not in self._cache:
            # (each run's epochs found once: a panel of a thousand series asked per series)
            epochs = [(run, len(epoch_bounds(run))) for run in self.runs]
            self._cache[key] = [k for k in panel.keys
                                if any(_per_step(run.metrics.get(k), n) for run, n in epochs)]
        return self._cache[key]

    def _epoch_notes(self, panel: model.Panel) -> list[str]:
        """The lines under an overlaid panel: which epochs are drawn, how, and what is left out."""
        keys = self._overlayable(panel)
        spans = []  # per run: the epochs drawn
        for run in self.runs:
            nums = [k for key in keys for k, *_ in self._epoch_segments(run, key)]
            if nums:
                first, last = min(nums), max(nums)
                spans.append((run.name, f"{first}" if first == last else f"{first}–{last}"))
        left = [k for k in panel.keys if k not in keys and any(k in run.metrics for run in self.runs)]
        out = "no epoch begun at the cursor in the run" + ("s shown" if len(self.runs) > 1 else " shown")
        if len(self.runs) == 1 and spans:
            out = f"epoch{'s' if '–' in spans[0][1] else ''} {spans[0][1]} to the cursor: the newest in full " \
                "colour, older ones fainter"
        elif spans:  # each run's own epochs (a fine-tune's epoch 1 is not its parent's)
            out = "epochs to the cursor, the newest in full colour, older ones fainter: " + \
                "; ".join(f"{name} {span}" for name, span in spans)
        return [out, *([f"not overlaid (about a sample an epoch): {', '.join(left)}"] if left else [])]

    def _epoch_segments(self, run, key: str) -> list:
        """``run``'s epochs of ``key`` to draw at the cursor: none before the run began (a child
        run on its parent's axis), every one up to its end after it ended. A cursor move costs
        only the epoch it cuts: the whole epochs' arrays are kept, and the segments of the last
        step asked (the panel's notes and its plot ask for the same)."""
        step = run.to_step(self.axis, self.cursor)
        if step is None:
            r = run.step_range
            first = run.coordinate(self.axis, np.array([r[0]], float))[0] if r else np.nan
            step = np.inf if np.isfinite(first) and self.cursor > first else -np.inf
        ck = ("epoch segments", id(run), key)
        last = self._cache.get(ck)
        if last is not None and last[0] == (step, self.history):
            return last[1]
        segs = epoch_segments(run, key, step, self.history, self._epoch_bounds(run),
                              self._cache.setdefault(("epochs whole", id(run), key), {}))
        self._cache[ck] = ((step, self.history), segs)
        return segs

    def _epoch_bounds(self, run) -> list[int]:
        key = ("epoch bounds", id(run))
        if key not in self._cache:
            self._cache[key] = epoch_bounds(run)
        return self._cache[key]

    def _epoch_columns(self, run, key: str, k: int, x, y, whole: bool, plot_w: int):
        """An epoch's per-column min..max (model.reduce_columns), kept for a whole epoch."""
        ck = ("epoch columns", id(run), key, k, plot_w)
        hit = self._cache.get(ck) if whole else None
        if hit is None:
            hit = model.reduce_columns(x, y, float(x[0]), float(x[-1]), plot_w)
            if whole:
                self._cache[ck] = hit
        return hit

    def _epoch_plot(self, panel: model.Panel, index: int, height: float) -> None:
        """Panel ``index``'s plot in its epochs mode (the title, toggles and notes are the
        scalar panel's): every overlaid series of every shown run, epoch over epoch."""
        if not self._begin_plot(f"##ep{index}", imgui.ImVec2(-1, height), implot.Flags_.no_legend):
            return
        linear = index not in self.log_y
        # a margin: an event at an epoch's last step is drawn inside the plot, not under its frame (and
        # on a linear y axis a curve at its extreme; ImPlot would pad a log axis linearly, to 1e-300)
        implot.push_style_var(implot.StyleVar_.fit_padding, imgui.ImVec2(0.03, 0.08 if linear else 0.0))
        # the y axis as over progress (scalars.py): memory from zero (a 1% change must not fill the
        # panel), a constant +-10% around it, far outliers at the edge of a robust range, log padded
        # by decades
        zero = model.zero_based(panel) and linear
        robust = (self._robust(panel) or self._flat(panel)) if linear and not zero else None
        logged = None if linear else self._cached("log", panel, model.log_limits)
        fixed = zero or robust is not None or logged is not None
        implot.setup_axes("steps into the epoch", "", implot.AxisFlags_.auto_fit,
                          0 if fixed else implot.AxisFlags_.auto_fit)
        if not linear:  # values <= 0 have no place on it and are left out by ImPlot
            implot.setup_axis_scale(implot.ImAxis_.y1, implot.Scale_.log10)
            if logged is not None:
                implot.setup_axis_limits(implot.ImAxis_.y1, *logged, imgui.Cond_.always)
        elif zero:
            top = self._y_max(panel)
            implot.setup_axis_limits(implot.ImAxis_.y1, 0.0, top * 1.05 if top > 0 else 1.0, imgui.Cond_.always)
        elif robust is not None:
            implot.setup_axis_limits(implot.ImAxis_.y1, *robust, imgui.Cond_.always)
        self._clip = robust if robust is not None and robust != self._flat(panel) else None
        keys = self._overlayable(panel)
        one = len(self.runs) == 1
        plot_w = max(50, int(implot.get_plot_size().x))
        for run in self.runs:
            rgb = self._rgb(run)
            drawn = {}  # epoch number -> its opacity (for the events in it)
            for j, key in enumerate(panel.keys):
                if key not in keys:
                    continue
                segs = self._epoch_segments(run, key)
                shade = series_rgb(rgb, j, len(self.runs))
                if segs:
                    self._item(key, shade if one else _series_shade(NEUTRAL, j))
                for age, (k, x, y, whole) in enumerate(reversed(segs)):
                    alpha = drawn[k] = epoch_alpha(age, len(segs))
                    label = f"{key} · epoch {k}" + ("" if one else f" · {run.name}")
                    spec = _spec(shade, alpha=alpha, weight=2.0 if age == 0 else 1.2)
                    if len(x) > 3 * plot_w and x[-1] > x[0]:  # a long epoch: per-column min..max, no spike lost
                        c, lo, hi = self._epoch_columns(run, key, k, x, y, whole, plot_w)
                        implot.plot_shaded(label, c, lo, hi, _spec(shade, fill=0.5 * alpha))
                        implot.plot_line(label, c, hi, spec)
                        implot.plot_line(label, c, lo, spec)
                    else:
                        implot.plot_line(label, x, y, spec)
                        c, lo, hi = x, y, y
                    if self._clip is not None:  # outliers as triangles on the plot's edge (scalars.py)
                        self._clipped(c, hi, lo, shade)
            self._epoch_events(run, drawn)
        self._end_plot()
        implot.pop_style_var()
        self._clip = None

    def _epoch_events(self, run, drawn: dict) -> None:
        """``run``'s events in the epochs drawn, at their place in their epoch (fainter in an older
        epoch, but never so faint as to be missed), with their text on hover."""
        if not run.events or not drawn:
            return
        ends = self._epoch_bounds(run)
        starts = [0, *ends[:-1]]
        step = run.to_step(self.axis, self.cursor)
        hovered, mouse = implot.is_plot_hovered(), imgui.get_mouse_pos().x
        near = []
        for s, text in run.events:
            k = int(np.searchsorted(ends, s, side="left"))  # epoch k + 1 holds (starts[k], ends[k]]
            if k >= len(ends) or (k + 1) not in drawn or (step is not None and s > step):
                continue
            x = float(s - starts[k])
            implot.plot_inf_lines(self._item("events (hover a line: what changed)", EVENT_RGB),
                                  np.array([x]), _spec(EVENT_RGB, alpha=0.35 + 0.55 * drawn[k + 1], weight=1.5))
            if hovered and abs(implot.plot_to_pixels(x, 0.0).x - mouse) <= HOVER_PX:
                near.append(f"{run.name}, step {s} (epoch {k + 1}): {text}")
        if near:
            imgui.set_tooltip("\n".join(near))
