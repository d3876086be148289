"""Colours in one dashboard panel never repeat: every series of every run, the best-so-far
stairs and the marks (best, snapshots, events, NaN, placeholders) are told apart."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from caliper_vk.dashboard.style import MARKS, PALETTE, SHADES, panel_colours


def closest(colours: dict) -> tuple:
    return min((float(np.linalg.norm(np.subtract(a, b))), ka, kb)
               for (ka, a), (kb, b) in itertools.combinations(colours.items(), 2))


def test_one_run_every_series_and_mark_far_apart():
    """One run: a palette colour per series (its smoothed line in the same colour), and marks
    that no series has: val/loss and the snapshots were one green, train/loss and the
    best-so-far stairs one blue, the best marker the yellow series'."""
    d, a, b = closest(panel_colours(1, len(PALETTE)))
    assert d >= 0.25, (a, b, d)


@pytest.mark.parametrize("runs", range(2, len(PALETTE) + 1))
def test_several_runs_their_colours_stairs_and_marks_far_apart(runs):
    """Several runs: each run's colour, its best-so-far stairs and the marks differ; the series of
    one run are the run's shades, each unlike every other run's colour."""
    d, a, b = closest(panel_colours(runs, 1))
    assert d >= 0.12, (a, b, d)
    shades = panel_colours(runs, SHADES)
    for k in range(runs):
        own = {n: v for n, v in shades.items() if n.startswith(f"run {k} series")}
        others = {n: v for n, v in shades.items() if (n not in own and "series 0" in n) or n in MARKS}
        for (na, va), (nb, vb) in itertools.product(own.items(), others.items()):
            assert np.linalg.norm(np.subtract(va, vb)) >= 0.1, (na, nb)
        assert len(set(own.values())) == SHADES  # no two series of a run share a shade
