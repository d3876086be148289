"""Epochs overlaid: a per-step scalar's retained epochs laid over one within-epoch axis, older
fainter (the reading of a run epoch against epoch: does the loss fall within each epoch, does
the next start where the last ended, where in the epoch does a spike come).

The panel ("Epochs overlaid") draws, for each shown run, the last ``history`` epochs that began at
or before the cursor: each epoch's samples of the chosen series at ``step - (the epoch's first
step - 1)``, so every epoch starts at 1; the newest in full colour, each older one fainter. The
epochs are the run's own (``Recorder.end_epoch``), or ``steps_per_epoch`` multiples when it
recorded none; the epoch still running at the cursor is drawn up to the cursor. Any scalar of
the shown runs can be chosen in the panel (default ``train/loss``).

A mixin of :class:`~caliper_vk.dashboard.app.Dashboard`.
"""

from __future__ import annotations

import numpy as np
from imgui_bundle import imgui, implot

from . import model
from .style import _spec, dim, fitted_text


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


def epoch_segments(run, key: str, upto: float, count: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """The last ``count`` epochs of series ``key`` that began at or before step ``upto``, oldest
    first: (epoch number from 1, x = steps into the epoch from 1, values), each cut at ``upto``."""
    s = run.metrics.get(key)
    ends = epoch_bounds(run)
    if s is None or not len(s) or not ends:
        return []
    starts = [0, *ends[:-1]]  # epoch k holds the steps (starts[k], ends[k]]
    live = [k for k in range(len(ends)) if starts[k] < upto]
    out = []
    for k in live[-count:]:
        lo = model.search_x(s.step, starts[k], "right")
        hi = model.search_x(s.step, min(ends[k], upto), "right")
        if hi > lo:
            x = s.step[lo:hi].astype(np.float64) - starts[k]
            out.append((k + 1, x, s.value[lo:hi].astype(np.float64)))
    return out


class EpochOverlays:
    """The "Epochs overlaid" panel (state lives on the Dashboard: ``epoch_keys``)."""

    def _epoch_panel(self, panel: model.Panel, index: int) -> None:
        keys = sorted({k for run in self.runs for k in run.metrics})
        key = self.epoch_keys.get(index, panel.keys[0])
        fitted_text(f"{panel.title}: {key}", reserve=190)
        imgui.same_line()
        imgui.set_next_item_width(180)
        if keys and imgui.begin_combo(f"##epochkey{index}", key):
            for k in keys:
                if imgui.selectable(k, k == key)[0]:
                    self.epoch_keys[index] = key = k
            imgui.end_combo()
        drawn = []
        for run in self.runs:
            step = run.to_step(self.axis, self.cursor)
            segs = epoch_segments(run, key, step if step is not None else np.inf, self.history)
            if segs:
                drawn.append((run, segs))
        if not drawn:
            fitted_text(f"{key}: not recorded over epochs in the runs shown (no epoch ends: "
                        f"Recorder.end_epoch or steps_per_epoch)", dim())
            return
        first, last = min(s[0][0] for _, s in drawn), max(s[-1][0] for _, s in drawn)
        fitted_text(f"epochs {first}–{last} up to the cursor: the newest in full colour, each older one "
                    f"fainter", dim())
        height = max(60.0, imgui.get_content_region_avail().y - 4)
        if not self._begin_plot(f"##ep{index}", imgui.ImVec2(-1, height), implot.Flags_.no_legend):
            return
        implot.setup_axes("steps into the epoch", key, implot.AxisFlags_.auto_fit, implot.AxisFlags_.auto_fit)
        for run, segs in drawn:
            for age, (k, x, y) in enumerate(reversed(segs)):
                alpha = 1.0 if age == 0 else max(0.12, 0.75 * (1 - age / len(segs)))
                implot.plot_line(f"epoch {k} · {run.name}", x, y,
                                 _spec(self._rgb(run), alpha=alpha, weight=2.0 if age == 0 else 1.2))
        self._end_plot()
