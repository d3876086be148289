"""Colours in one dashboard panel never repeat: every series of every run, its raw trace faded
under its smoothed line, the best-so-far stairs and the marks (best, snapshots, events, NaN,
placeholders) are told apart. Distances are perceived ones (Oklab, as drawn on the plot's
background with the alpha they are drawn at): about 0.02 is just noticeable; the events' old
green was 0.10 from the green run's colour and looked the same on screen."""

from __future__ import annotations

import itertools
import re

import pytest

from caliper_vk.dashboard.colours import (MARKS, RUN_COLOURS, SHADES, _sequence, best_so_far_rgb, distance,
                                          drawn, oklab, panel_colours, run_colour, series_rgb)


def closest(colours: dict, pairs=None) -> tuple:
    pairs = pairs or itertools.combinations(colours, 2)
    return min((distance(colours[a], colours[b]), a, b) for a, b in pairs)


def owner(name: str) -> tuple[int, str] | None:
    """(run, what) of a run's colour in panel_colours, None for a mark."""
    m = re.match(r"run (\d+) (.*)", name)
    return (int(m.group(1)), m.group(2)) if m else None


def test_oklab_is_oklab():
    """The reference values of Ottosson's post: white, and the sRGB primaries."""
    for rgb, lab in (((1, 1, 1), (1.0, 0.0, 0.0)), ((1, 0, 0), (0.62796, 0.22486, 0.12585)),
                     ((0, 1, 0), (0.86644, -0.23389, 0.17950)), ((0, 0, 1), (0.45201, -0.03246, -0.31153))):
        assert oklab(rgb) == pytest.approx(lab, abs=2e-4)


def test_run_colours_never_repeat_and_a_dozen_are_far_apart():
    """The bundled eleven runs each have their own colour (the ninth no longer wraps to the
    first's blue: a fine-tune and its parent read as one run); far past any palette's length no
    two runs share one. The kept head is the sequence the rule makes."""
    assert RUN_COLOURS == _sequence(len(RUN_COLOURS))
    d, a, b = closest({k: run_colour(k) for k in range(12)})
    assert d >= 0.09, (a, b, d)
    d, a, b = closest({k: run_colour(k) for k in range(24)})
    assert d >= 0.06, (a, b, d)
    many = [run_colour(k) for k in range(100)]
    assert len(set(many)) == len(many)
    assert all(0.0 <= c <= 1.0 for rgb in many for c in rgb)


def test_marks_are_far_from_each_other():
    d, a, b = closest({k: drawn(v, 1.0) for k, v in panel_colours(0, 0).items()})
    assert d >= 0.1, (a, b, d)


@pytest.mark.parametrize("runs", [1, 2, 5, 12, 24])
def test_marks_are_far_from_every_colour_of_every_run(runs):
    """Every mark is far from every run's colour, and the event lines (the marks most often on
    screen) far from anything a run draws: a perceptual distance, not only unequal numbers (the
    event green was 0.10 from a run's green and looked the same)."""
    colours = panel_colours(runs, SHADES if runs > 1 else 12, smoothing=True)
    for mark in MARKS:
        for name, rgb in colours.items():
            if owner(name) is None:
                continue
            line = name == f"run {owner(name)[0]} series 0"  # the run's own colour
            least = 0.15 if line else 0.12 if mark == "event" else 0.07
            assert distance(colours[mark], rgb) >= least, (mark, name)


def test_one_run_its_series_smoothed_and_raw_and_stairs_apart():
    """One run: a colour per series, its smoothed line in that colour and its raw trace faded
    under it; the raw trace of one series is never another's line, the stairs are no series'."""
    colours = panel_colours(1, 12, smoothing=True)
    lines = [n for n in colours if re.fullmatch(r"run 0 series \d+", n)]
    assert closest(colours, itertools.combinations(lines, 2))[0] >= 0.09
    raw = [n for n in colours if n.endswith(" raw")]
    d, a, b = closest(colours, [(r, ln) for r, ln in itertools.product(raw, lines) if not ln + " raw" == r])
    assert d >= 0.1, (a, b, d)
    d, a, b = closest(colours, [("run 0 best so far", n) for n in lines + raw])
    assert d >= 0.1, (a, b, d)
    # the run shown alone may be any loaded run: its stairs are its own colour made pale
    d, k, j = min((distance(best_so_far_rgb(run_colour(k)), run_colour(j)), k, j)
                  for k in range(24) for j in range(12))
    assert d >= 0.08, (k, j, d)


@pytest.mark.parametrize("runs", range(2, 13))
def test_several_runs_their_shades_stairs_and_raw_traces_apart(runs):
    """Several runs: a run's series are shades of its colour, told apart from each other and
    from its stairs; nothing of one run repeats a line of another. A raw trace lies under its own
    smoothed line and may be as dark as a deeper shade of its own run; it never takes another
    run's line."""
    colours = panel_colours(runs, SHADES, smoothing=True)
    names = [n for n in colours if owner(n) is not None]
    lines = [n for n in names if "series" in n and "raw" not in n]
    for k in range(runs):
        own = [n for n in lines if owner(n)[0] == k]
        assert closest(colours, itertools.combinations(own, 2))[0] >= 0.09
        assert closest(colours, [(f"run {k} best so far", n) for n in own])[0] >= 0.1
    across = [(a, b) for a, b in itertools.product(names, lines) if owner(a)[0] != owner(b)[0]]
    d, a, b = closest(colours, [(a, b) for a, b in across if a in lines])
    assert d >= 0.05, (a, b, d)
    d, a, b = closest(colours, across)
    assert d >= 0.03, (a, b, d)


def test_a_series_shade_and_the_stairs_keep_the_runs_hue():
    """A shade darkens the run's colour in Oklab lightness and chroma together: its hue is the
    run's (a panel of forty series turned a blue run red); every shade stays in [0, 1]."""
    import numpy as np

    for k in range(24):
        rgb = run_colour(k)
        hue = np.arctan2(*oklab(rgb)[2:0:-1])
        for j in range(40):
            shade = series_rgb(rgb, j, 2)
            assert all(0.0 <= c <= 1.0 for c in shade)
            assert abs(np.angle(np.exp(1j * (np.arctan2(*oklab(shade)[2:0:-1]) - hue)))) < 0.2, (k, j)
        assert abs(np.angle(np.exp(1j * (np.arctan2(*oklab(best_so_far_rgb(rgb))[2:0:-1]) - hue)))) < 0.2
