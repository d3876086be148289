"""Panels none of the runs shown has a sample of (another run's histograms, a hidden run's PSNR),
folded into one line above the others: "not recorded in the run shown (48 panels): Task metrics
[dB], Histogram weights/..." (cut with "…"; each panel, with the runs that have it, on hover),
instead of a "not recorded" panel each, which took most of a tall ``caliper view --all`` PNG.

The rule: a panel is folded when no run shown has a sample of any of its metrics, unless it is
pinned (drawn anyway, saying "not recorded" with its unit) or every panel shown would fold (then
each is drawn and says so, so that the view is never blank).

A mixin of :class:`~caliper_vk.dashboard.app.Dashboard` (state: ``folded``, the indices folded in
the last frame).
"""

from __future__ import annotations

from imgui_bundle import imgui

from . import model
from .style import dim, fitted_text

SECTIONS = {"scalar": "metrics", "histogram": "histograms", "array": "arrays", "confusion": "confusions"}


class FoldedPanels:
    """The fold of the panels with nothing for the runs shown (state lives on the Dashboard)."""

    def _fold_unrecorded(self, shown: list[tuple[int, model.Panel]]) -> list[tuple[int, model.Panel]]:
        """The panels of ``shown`` to draw; the others (``self.folded``) get one line, drawn here."""
        self.folded = [i for i, panel in shown if i not in self.pinned_panels and not self._recorded(panel)]
        if len(self.folded) == len(shown):  # nothing else to show: each says so in a panel of its own
            self.folded = []
        if not self.folded:
            return shown
        self._folded_line()
        return [(i, panel) for i, panel in shown if i not in self.folded]

    def _recorded(self, panel: model.Panel) -> bool:
        """Whether any run shown has a sample of any of ``panel``'s metrics."""
        section = SECTIONS[panel.kind]
        return any(len(getattr(run, section).get(k) or ()) for run in self.runs for k in panel.keys)

    def _unit_title(self, panel: model.Panel) -> str:
        """``panel``'s title with its units, as recorded in any run loaded ("Task metrics [dB]")."""
        units = sorted({s.unit for r in self.all_runs for k in panel.keys
                        if panel.kind == "scalar" and (s := r.metrics.get(k)) is not None and s.unit})
        return panel.title + (f" [{', '.join(units)}]" if units else "")

    def _folded_line(self) -> None:
        """The panels none of the runs shown has a sample of (another run's histograms, a run
        hidden), folded into one line above the others instead of a "not recorded" panel each
        (they took most of a tall PNG); each, with the runs that have it, on hover. A pinned
        panel is drawn anyway, and so is every panel when none of them has data."""
        shown = "the runs shown" if len(self.runs) > 1 else "the run shown"
        titles = [self._unit_title(self.panels[i]) for i in self.folded]
        fitted_text(f"not recorded in {shown} ({len(titles)} panel{'s' if len(titles) > 1 else ''}): "
                    + ", ".join(titles), dim())
        if imgui.is_item_hovered():
            lines = []
            for i, title in zip(self.folded, titles, strict=True):
                panel = self.panels[i]
                section = SECTIONS[panel.kind]
                having = [r.name for r in self.all_runs
                          if any(len(getattr(r, section).get(k) or ()) for k in panel.keys)]
                lines.append(f"{title}: " + (f"recorded in {', '.join(having)}" if having else "in no run"))
            lines.append("(show a run in the sidebar's run list, or pin a panel to draw it anyway)")
            imgui.set_tooltip("\n".join(lines))
