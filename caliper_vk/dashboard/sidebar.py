"""The dashboard's sidebar: the runs shown (a filter, each run's colour, status and problems), the
panels shown (a regular-expression filter, pins), the settings (x axis, smoothing, histogram mode)
and each run's details (best marks, snapshots, evaluation steps). A mixin of
:class:`~caliper_vk.dashboard.app.Dashboard`, which owns the state it reads."""

from __future__ import annotations

import numpy as np
from imgui_bundle import imgui

from . import model
from .style import _col

FOLD_RUNS = 3  # with more runs shown, their status and best fold under one sidebar node


class Sidebar:
    """The sidebar's widgets (see the module docstring)."""

    def _run_selector(self) -> None:
        """Show or hide each run, and filter them by name."""
        if len(self.all_runs) > 1:
            count = f"{len(self.runs)} of {len(self.all_runs)} shown"
            # the filter takes what the count leaves of the row (the count is never clipped)
            room = imgui.get_content_region_avail().x - imgui.get_style().item_spacing.x
            imgui.set_next_item_width(max(60.0, room - imgui.calc_text_size(count).x))
            changed, self.run_filter = imgui.input_text_with_hint("##runfilter", "filter runs by name",
                                                                   self.run_filter)
            if changed:
                self._set_shown()
            imgui.same_line()
            imgui.text_disabled(count)
        for k, run in enumerate(self.all_runs):
            if len(self.all_runs) > 1:
                changed, on = imgui.checkbox(f"##show{k}", run.name not in self.hidden)
                if changed:
                    (self.hidden.discard if on else self.hidden.add)(run.name)
                    self._set_shown()
                imgui.same_line()
            drawn = run.name in {r.name for r in self.runs}
            imgui.text_colored(_col(self._rgb(run), 1.0 if drawn else 0.4), f"■ {run.name}")

    def _sidebar(self) -> None:
        imgui.text("Runs")
        self._run_selector()
        imgui.separator()
        # with several runs their status and best take the sidebar's height: they fold under one
        # node (open on a click), so that the cursor's readouts below stay in view
        folded = len(self.runs) > FOLD_RUNS
        if not folded or imgui.tree_node(f"Status and best of the {len(self.runs)} runs##runinfo"):
            self._run_details()
            if folded:
                imgui.tree_pop()
        self._settings()
        imgui.separator()
        imgui.text("x axis")  # the choices on a line of their own: four do not fit beside the label
        for k, a in enumerate(model.AXES):
            if k:
                imgui.same_line()
            if imgui.radio_button(a, self.axis == a) and a != self.axis:
                self._change_axis(a)
        _, self.smoothing = imgui.slider_float("smoothing", self.smoothing, 0.0, 0.99, "%.2f")
        imgui.text_disabled("smoothing is drawn beside the raw trace;\nthe cursor always reads raw values")
        imgui.text("histograms")
        for m in ("overlay", "offset", "time"):
            imgui.same_line()
            if imgui.radio_button(f"{m}##h", self.hist_mode == m):
                self.hist_mode = m
        imgui.separator()
        if self.RETAIN:  # what is above the cursor's readout is kept while it stays the same
            self.ui.retain(("sidebar",))
        imgui.text(f"cursor: {self.axis} {self.cursor:.6g}")
        self._event_readout()
        self._readout()
        imgui.separator()
        imgui.set_next_item_width(imgui.get_content_region_avail().x)
        _, self.panel_filter = imgui.input_text_with_hint("##panelfilter", "filter panels (regular expression)",
                                                          self.panel_filter)
        if imgui.tree_node("Panels"):
            for i, p in enumerate(self.panels):
                changed, pin = imgui.checkbox(f"pin##pin{i}", i in self.pinned_panels)
                if changed:
                    self.pin_panel(i, pin)
                imgui.same_line()
                _, self.enabled[i] = imgui.checkbox(f"{p.title}##en{i}", self.enabled[i])
            imgui.tree_pop()

    def _run_details(self) -> None:
        for k, run in enumerate(self.runs):
            imgui.text_colored(_col(self._rgb(run)), f"■ {run.name}")
            r = run.step_range
            imgui.text(f"  {run.status}, {'finite' if run.finite else 'NON-FINITE values'}, "
                       f"steps {r[0]}–{r[1]}" if r else f"  {run.status}, no steps")
            imgui.text_wrapped(f"  {model.best_marks(run).text}")
            if (snaps := model.snapshot_text(run)) is not None:
                imgui.text_wrapped(f"  {snaps}")
            if run.problems and imgui.tree_node(f"  {len(run.problems)} note(s)##p{k}"):
                for p in run.problems[:50]:
                    imgui.text_wrapped(p)
                imgui.tree_pop()

    def _settings(self) -> None:
        """The runs' settings (config); in reveal mode behind a symptom the reader names first,
        and a button to the next evaluation (where to stop and read)."""
        if self.reveal:
            imgui.separator()
            imgui.text_wrapped("Reveal: each run is shown only up to the cursor.")
            if imgui.button("next evaluation ▶"):
                stops = [run.coordinate(self.axis, model.evaluation_steps(run)) for run in self.full_runs]
                nxt = [x for xs in stops for x in xs if x > self.cursor + 1e-9]
                if nxt:
                    self.cursor = float(min(nxt))
            if not self.settings_shown:
                _, self.symptom = imgui.input_text_with_hint("##symptom", "name a symptom you see",
                                                             self.symptom)
                imgui.begin_disabled(not self.symptom.strip())
                if imgui.button("show the run settings"):
                    self.settings_shown = True
                imgui.end_disabled()
                return
        if imgui.tree_node("Run settings"):
            for run in self.full_runs:
                imgui.text_colored(_col(self._rgb(run)), run.name)
                for k, v in list(run.config.items())[:40]:
                    imgui.text_wrapped(f"  {k}: {v}")
            imgui.tree_pop()

    def _change_axis(self, axis: str) -> None:
        # keep the cursor on the same progress point, read through the first run that has it
        for run in self.runs:
            step = run.to_step(self.axis, self.cursor)
            if step is not None:
                x = run.coordinate(axis, np.array([step]))[0]
                if np.isfinite(x):
                    self.cursor = float(x)
                    break
        self.axis = axis
        self._limits.clear()  # the x ranges were in the old axis's units: fit every plot again
