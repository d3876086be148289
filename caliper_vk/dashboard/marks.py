"""Marks of what happened to a run rather than what it measured: its events (``Recorder.event``:
a loss switched, a schedule edited, the data changed) and where it branched from its parent
(``Recorder(parent=, parent_step=)``).

Every plot over progress (scalar panels, histograms over time, recall/precision, a cell's trace)
draws each shown run's events as vertical lines at their step, in one colour kept for events,
with the event's text in a tooltip when the mouse is within a few pixels of the line; a scalar
panel with its epochs overlaid draws each event at its place in its epoch, fainter in an
older epoch. A panel drawn at the cursor's step instead (array probes, confusion matrices, histograms
overlaid or offset) has a line in the events' colour naming the latest event at or before the
cursor's step in each run and whether the frame shown predates it, every event so far on hover.
The sidebar's cursor readout names the latest event at or before the cursor in each run. A child
run is drawn on its parent's step axis (``Run.step_offset``), and its first step is marked with
a line in the run's colour and a tag naming the parent and the step it started from.

A mixin of :class:`~caliper_vk.dashboard.app.Dashboard`; it draws nothing per sample (a run's
events are a handful of lines), so a cursor move costs what it did.
"""

from __future__ import annotations

import numpy as np
from imgui_bundle import imgui, implot

from .style import MARKS, _col, _spec, fit_text

EVENT_RGB = MARKS["event"]  # the events' lines, in every run: no run or series has this colour
HOVER_PX = 4  # how near the mouse must be to a line for its text to show


class MarkedPanels:
    """Events and branch points in the plots and the readout (state lives on the Dashboard)."""

    def _event_xs(self, run) -> np.ndarray:
        """The x of each of ``run``'s events on the current axis (NaN where it has none)."""
        key = ("events", id(run), self.axis)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = run.coordinate(self.axis, np.array([s for s, _ in run.events], float))
        return hit

    def _run_marks(self) -> None:
        """Inside a plot, after its data: each shown run's events and its branch point."""
        near = []
        hovered = implot.is_plot_hovered()
        mouse_px = imgui.get_mouse_pos().x
        for run in self.runs:
            if run.events:
                xs = self._event_xs(run)
                ok = np.isfinite(xs)
                if ok.any():
                    implot.plot_inf_lines(self._item("events (hover a line: what changed)", EVENT_RGB),
                                          xs[ok], _spec(EVENT_RGB, alpha=0.9, weight=1.5))
                if hovered:
                    for x, (step, text) in zip(xs, run.events, strict=True):
                        px = implot.plot_to_pixels(float(x), 0.0).x if np.isfinite(x) else np.inf
                        if abs(px - mouse_px) <= HOVER_PX:
                            near.append(f"{run.name}, step {step}: {text}")
            parent = run.parent
            if parent is not None:  # where it started from: its step 0 is the parent's state there
                x = float(run.coordinate(self.axis, np.array([0.0]))[0])
                if np.isfinite(x):
                    rgb = self._rgb(run)
                    implot.plot_inf_lines(self._item("branch point (started from its parent's state)", rgb),
                                          np.array([x]), _spec(rgb, alpha=0.8, weight=2.5))
                    implot.tag_x(x, _col(rgb, 0.8), f"from {parent['name']} @{parent['step']}")
        if near:
            imgui.set_tooltip("\n".join(near))

    def _events_so_far(self, run) -> list[tuple[int, str]]:
        """``run``'s events at or before the cursor's step (none when the cursor is outside it)."""
        step = run.to_step(self.axis, self.cursor)
        return [] if step is None or not run.events else [(s, t) for s, t in run.events if s <= step]

    def _event_note(self, frames: dict | None = None) -> bool:
        """In a panel drawn at the cursor's step (the step of the frame drawn, by run name, in
        ``frames``; a run with none drawn there is left out): one line in the events' colour
        naming each shown run's latest event at or before the cursor's step, and whether the
        frame shown predates it; cut with "…" to the panel, every event so far in full on
        hover. Nothing when no run had one yet. Returns whether it drew the line."""
        parts, full = [], []
        several = len(self.runs) > 1
        for run in self.runs:
            before = self._events_so_far(run)
            if not before or (frames is not None and run.name not in frames):  # (no frame drawn)
                continue
            s, t = before[-1]
            more = f", {len(before)} so far" if len(before) > 1 else ""
            fs = None if frames is None else frames[run.name]
            # the frame shown is the latest at or before the cursor: it may come from before the change
            when = "" if fs is None else (f", the frame shown (step {fs}) predates it" if fs < s
                                          else f", before the frame shown (step {fs})")
            parts.append(f"{run.name}: event at step {s}{more}{when}: {t}" if several
                         else f"event at step {s}{more}{when}: {t}")
            full += [f"{run.name}, step {at}: {text}" for at, text in before]
        if not parts:
            return False
        line = "; ".join(parts)
        imgui.text_colored(_col(EVENT_RGB, 0.9), fit_text(line, imgui.get_content_region_avail().x))
        if imgui.is_item_hovered():
            imgui.set_tooltip("events at or before the cursor:\n" + "\n".join(full))
        return True

    def _event_readout(self) -> None:
        """In the sidebar, under the cursor: each run's latest event at or before the cursor, and
        where a child run started from."""
        for run in self.runs:
            step = run.to_step(self.axis, self.cursor)
            if run.events and step is not None:
                before = [(s, t) for s, t in run.events if s <= step]
                if before:
                    s, t = before[-1]
                    more = f" ({len(before)} so far)" if len(before) > 1 else ""
                    imgui.push_style_color(imgui.Col_.text, _col(EVENT_RGB, 0.9))
                    imgui.text_wrapped(f"  {run.name}: event at step {s}{more}: {t}")
                    imgui.pop_style_color()
            parent = run.parent
            if parent is not None:
                imgui.push_style_color(imgui.Col_.text, _col(self._rgb(run), 0.9))
                imgui.text_wrapped(f"  {run.name}: started from {parent['name']} at its step {parent['step']} "
                                   f"(drawn on {parent['name']}'s step axis)")
                imgui.pop_style_color()
