"""The dashboard's colours: the runs', their series' shades, the best-so-far stairs and the marks.

Colours are chosen and checked in Oklab (Björn Ottosson's perceptual space, 2020: a Euclidean
distance there is a perceived difference, about 0.02 a just-noticeable one) as drawn on the
plot's background with their alpha: two thin lines distinct in RGB can still read as one (the
events' spring green was 0.10 from the green run's colour and looked the same on screen).

What one scalar panel holds, and how each is told apart (``tests/test_palettes.py``):

- a run's colour: :func:`run_colour`, at least 0.09 from every other of the first twelve runs'
  and 0.06 from every other of the first twenty-four, never equal for any number of runs;
- with one run, a run colour per series (series ``j`` has run ``j``'s colour); with several,
  run ``k``'s series are SHADES shades of its colour (darker with each, the hue kept), each
  0.09 from the run's other shades, 0.05 from every shade of any other run;
- the raw trace faded under its smoothed line (which has the series' colour), drawn at alpha
  RAW_UNDER_EMA: never another series' line in one run, never another run's in several;
- the best-so-far stairs: the run's colour made pale, 0.1 from each of the run's lines;
- the marks (MARKS: events, snapshots, best, NaN/Inf, placeholders), 0.1 from each other;
  MARK_DISTANCE from every run colour, and 0.07 (the events 0.12) from every shade, raw trace
  and stairs: the candidates a run may take are those that keep these distances.
"""

from __future__ import annotations

import functools

import numpy as np

BACKGROUND = (0.056, 0.056, 0.056)  # a plot's background (ImGui's dark window colour over black)
NEUTRAL = (0.85, 0.85, 0.85)  # legend swatches of series drawn in every run's own colour

MARKS = {
    "snapshot": (0.95, 0.95, 0.95),  # saved-snapshot lines: dim grey (drawn at alpha 0.45)
    "best_saved": (1.0, 0.75, 0.0),  # the best point, saved: amber
    "best_unsaved": (1.0, 0.0, 0.0),  # the best point, no snapshot at its step: red
    "event": (1.0, 1.0, 0.0),  # event lines, in every run: yellow, lighter and purer than any run
    "nan": (1.0, 0.2, 0.8),  # NaN/Inf gaps: magenta
    "placeholder": (0.6, 0.6, 0.6),  # a step-0 placeholder: a grey square
}
MARK_ALPHA = {"snapshot": 0.45, "event": 0.9, "nan": 0.7}  # as drawn; the others opaque
MARK_DISTANCE = 0.15  # the least Oklab distance of a run's colour from every mark as drawn
SHADE_MARK_DISTANCE = 0.07  # and of its shades, its faded raw trace and its best-so-far stairs
EVENT_SHADE_DISTANCE = 0.12  # from the events' lines, the marks most often on screen

SHADES = 4  # shades of a run's colour, cycled over a panel's series when several runs are shown
SHADE_STEP = 0.15  # each shade's Oklab lightness, a share of the run colour's less
CHROMA_STEP = 0.05  # and its chroma: a deep shade stays coloured, never one of the marks' greys
RAW_UNDER_EMA = 0.4  # the raw trace's alpha while its smoothed line is drawn in its colour over it

RUN_SEEDS = ((0.35, 0.65, 1.0), (0.867, 0.5, 0.067))  # the first two runs' colours: blue, orange
RUN_LIGHTNESS = (0.64, 0.88)  # run colours' Oklab lightness: bright on the dark plot, room to darken
RUN_CHROMA = (0.09, 0.19)  # and chroma: coloured (never a grey), never garish
GRID = 31  # candidate colours: every sRGB channel in steps of 1/30

# The first twenty-four of the sequence run_colour() defines (a test makes it again and compares),
# kept here so that opening the dashboard does not compute them (more than a second here).
RUN_COLOURS = (
    (0.35, 0.65, 1.0), (0.867, 0.5, 0.067), (0.867, 0.433, 0.833), (0.367, 0.967, 0.667),
    (1.0, 0.633, 0.7), (0.767, 0.667, 1.0), (0.567, 0.733, 0.233), (0.233, 0.867, 1.0),
    (1.0, 0.433, 0.6), (0.467, 0.5, 1.0), (1.0, 0.533, 0.4), (0.2, 0.667, 0.2),
    (0.667, 0.433, 0.933), (0.9, 0.567, 0.833), (0.567, 0.733, 1.0), (0.0, 0.8, 0.7),
    (0.767, 0.533, 0.933), (0.467, 0.8, 0.533), (0.933, 0.7, 0.9), (0.567, 0.6, 1.0),
    (0.067, 0.6, 0.9), (0.5, 0.9, 0.833), (0.867, 0.433, 0.667), (0.0, 0.733, 0.967))


def oklab(rgb) -> np.ndarray:
    """sRGB colours in [0, 1] (..., 3) as Oklab (L, a, b)."""
    c = np.asarray(rgb, dtype=float)
    c = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    lms = np.cbrt(c @ np.array([[0.4122214708, 0.2119034982, 0.0883024619],
                                [0.5363325363, 0.6806995451, 0.2817188376],
                                [0.0514459929, 0.1073969566, 0.6299787005]]))
    return lms @ np.array([[0.2104542553, 1.9779984951, 0.0259040371],
                           [0.7936177850, -2.4285922050, 0.7827717662],
                           [-0.0040720468, 0.4505937099, -0.8086757660]])


def _linear(lab: np.ndarray) -> np.ndarray:
    """Oklab (..., 3) as linear sRGB, unclipped."""
    lms = lab @ np.array([[1.0, 1.0, 1.0],
                          [0.3963377774, -0.1055613458, -0.0894841775],
                          [0.2158037573, -0.0638541728, -1.2914855480]])
    return (lms ** 3) @ np.array([[4.0767416621, -1.2684380046, -0.0041960863],
                                  [-3.3077115913, 2.6097574011, -0.7034186147],
                                  [0.2309699292, -0.3413193965, 1.7076147010]])


def from_oklab(lab) -> np.ndarray:
    """Oklab colours (..., 3) back in sRGB. One outside the sRGB gamut keeps its lightness and
    hue and loses chroma until it fits (clipping each channel turned the hue)."""
    lab = np.asarray(lab, dtype=float)

    def fits(keep):
        c = _linear(lab * np.stack([np.ones_like(keep), keep, keep], -1))
        return np.all((c >= -1e-9) & (c <= 1.0 + 1e-9), axis=-1)

    keep = np.ones(lab.shape[:-1])
    if not fits(keep).all():  # bisect the share of the chroma kept, for those outside
        lo, hi = np.zeros_like(keep), keep.copy()
        inside = fits(keep)
        for _ in range(24):
            mid = (lo + hi) / 2
            ok = fits(mid)
            lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
        keep = np.where(inside, 1.0, lo)
    c = np.clip(_linear(lab * np.stack([np.ones_like(keep), keep, keep], -1)), 0.0, 1.0)
    return np.where(c <= 0.0031308, 12.92 * c, 1.055 * c ** (1 / 2.4) - 0.055)


def distance(a, b) -> float:
    """The perceived difference of two sRGB colours: their Euclidean distance in Oklab."""
    return float(np.linalg.norm(oklab(a) - oklab(b)))


def drawn(rgb, alpha: float = 1.0) -> tuple:
    """``rgb`` drawn at ``alpha`` over a plot's background: the colour the eye gets."""
    return tuple(float(alpha * c + (1.0 - alpha) * g) for c, g in zip(rgb, BACKGROUND, strict=True))


def _tuple(c: np.ndarray) -> tuple:
    return tuple(float(v) for v in c)


def _shades(lab: np.ndarray, t: int) -> np.ndarray:
    """Shade ``t`` of Oklab colours (..., 3), in sRGB: lightness and chroma scaled in Oklab."""
    return from_oklab(lab * (1.0 - SHADE_STEP * t, 1.0 - CHROMA_STEP * t, 1.0 - CHROMA_STEP * t))


def _pale(lab: np.ndarray) -> np.ndarray:
    """The best-so-far colour of Oklab colours (..., 3), in sRGB: 60% of the way to white in
    lightness, half the chroma, the hue kept."""
    return from_oklab(lab * (0.4, 0.5, 0.5) + (0.6, 0.0, 0.0))


def _series_shade(rgb, j: int) -> tuple:
    """Series ``j`` of a panel shown for several runs: the run's colour, darker with ``j`` over
    SHADES shades cycled (series 4 has series 0's shade). Lightness and chroma scale together
    in Oklab, so the hue is the run's at every shade (a panel of forty series went past black
    and turned a blue run red; shades mixed toward grey were 0.02 apart for a grey-green run)."""
    return _tuple(_shades(oklab(rgb), j % SHADES))


def series_rgb(run_rgb, j: int, runs: int) -> tuple:
    """Series ``j``'s colour: with one run the ``j``-th run colour, with several the run's colour
    in the series' shade. Its smoothed line has the same colour (the raw trace is faded under
    it, as TensorBoard does): a smoothed line made lighter took another run's colour."""
    return run_colour(j) if runs == 1 else _series_shade(run_rgb, j)


def best_so_far_rgb(run_rgb) -> tuple:
    """The best-so-far stairs of a run: its colour made pale (its own colour was its first
    series'; darkened, it was one of its shades and its raw trace faded under a smoothed line)."""
    return _tuple(_pale(oklab(run_rgb)))


def _footprint(lab: np.ndarray) -> np.ndarray:
    """What a run of each Oklab colour (n, 3) draws, as Oklab (n, 2 * SHADES + 1, 3): its
    shades, each faded as a raw trace under its smoothed line, and its best-so-far stairs."""
    shades = [from_oklab(lab)] + [_shades(lab, t) for t in range(1, SHADES)]
    raw = [RAW_UNDER_EMA * c + (1.0 - RAW_UNDER_EMA) * np.array(BACKGROUND) for c in shades]
    return np.stack([oklab(c) for c in shades + raw + [_pale(lab)]], axis=1)


@functools.cache
def _candidates() -> tuple[np.ndarray, np.ndarray]:
    """The colours a run may take, sRGB (n, 3) and their footprints in Oklab: those in
    the lightness and chroma bands, MARK_DISTANCE from every mark as drawn, whose shades, faded
    raw trace and stairs keep SHADE_MARK_DISTANCE (EVENT_SHADE_DISTANCE from the events), and
    0.1 from the first run's stairs (one run's series take the run colours)."""
    g = np.linspace(0.0, 1.0, GRID)
    rgb = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    lab = oklab(rgb)
    chroma = np.hypot(lab[:, 1], lab[:, 2])
    marks = oklab(np.array([drawn(v, MARK_ALPHA.get(k, 1.0)) for k, v in MARKS.items()]))
    least = np.array([EVENT_SHADE_DISTANCE if k == "event" else SHADE_MARK_DISTANCE for k in MARKS])

    def far(colours, d):
        return np.all(np.linalg.norm(oklab(colours)[:, None] - marks[None], axis=-1) >= d, axis=1)

    ok = ((lab[:, 0] >= RUN_LIGHTNESS[0]) & (lab[:, 0] <= RUN_LIGHTNESS[1])
          & (chroma >= RUN_CHROMA[0]) & (chroma <= RUN_CHROMA[1]) & far(rgb, MARK_DISTANCE))
    ok &= np.linalg.norm(lab - oklab(best_so_far_rgb(RUN_SEEDS[0])), axis=-1) >= 0.1
    for t in range(1, SHADES):
        ok[ok] &= far(_shades(lab[ok], t), least)
    ok[ok] &= far(_pale(lab[ok]), least)
    ok[ok] &= far(RAW_UNDER_EMA * rgb[ok] + (1.0 - RAW_UNDER_EMA) * np.array(BACKGROUND), least)
    return rgb[ok], _footprint(lab[ok])


@functools.cache
def _sequence(n: int) -> tuple:
    """The first ``n`` run colours by farthest-point sampling: the seeds, then each time the
    candidate whose footprint (its shades, their raw traces, its stairs) is farthest in Oklab
    from every colour taken's (a run is told by its colour at each shade, so a darker run must
    not be another's shade, nor its faded raw trace). Past
    every candidate (a few thousand) the sequence starts over."""
    rgb, prints = _candidates()
    flat = prints.reshape(-1, 3)
    norms = np.einsum("ij,ij->i", flat, flat)
    nearest = np.full(len(rgb), np.inf)  # squared distance of each candidate to the colours taken
    out = []
    for k in range(n):
        if k < len(RUN_SEEDS):
            pick, at = RUN_SEEDS[k], _footprint(oklab(np.array([RUN_SEEDS[k]])))[0]
        else:
            if nearest.max() <= 0.0:
                nearest[:] = np.inf
            i = int(np.argmax(nearest))
            pick, at = tuple(round(float(c), 3) for c in rgb[i]), prints[i]
        d2 = norms[:, None] + np.einsum("ij,ij->i", at, at)[None] - 2.0 * flat @ at.T
        np.minimum(nearest, d2.min(axis=1).reshape(len(rgb), -1).min(axis=1), out=nearest)
        out.append(pick)
    return tuple(out)


def run_colour(k: int) -> tuple:
    """Run ``k``'s colour (``k`` from 0), distinct from every run before it for any ``k``: the
    ``k``-th of the farthest-point sequence (see the module's notes). Beyond a dozen runs the
    colours draw closer (0.06 apart at twenty-four) and the run selector's filter reads better;
    run colours are the same in every panel and whichever runs are shown."""
    if k < len(RUN_COLOURS):
        return RUN_COLOURS[k]
    return _sequence(max(2 * len(RUN_COLOURS), 1 << k.bit_length()))[k]  # a few lengths cached


def panel_colours(runs: int, series: int, smoothing: bool = False) -> dict:
    """Every colour one scalar panel can hold with ``runs`` runs of ``series`` series each (the
    runs' colours are the first ``runs`` of :func:`run_colour`), as drawn on the plot's
    background: ``{what: rgb}``. With ``smoothing`` each series' raw trace is faded under its
    smoothed line (which has the series' colour) and listed as "... raw"."""
    out = {k: drawn(v, MARK_ALPHA.get(k, 1.0)) for k, v in MARKS.items()}
    for k in range(runs):
        rgb = run_colour(k)
        out[f"run {k} best so far"] = best_so_far_rgb(rgb)
        for j in range(series):
            out[f"run {k} series {j}"] = series_rgb(rgb, j, runs)
            if smoothing:
                out[f"run {k} series {j} raw"] = drawn(series_rgb(rgb, j, runs), RAW_UNDER_EMA)
    return out
