"""The dashboard's rules, apart from any drawing: panels, the cursor, comparisons, markers.

Everything here is plain numpy over :class:`~caliper_vk.record.Run` and is
tested without a GPU. The rules it enforces:

- the cursor reports **raw** recorded values (never smoothed), each with the
  step it was recorded at;
- a cursor outside a run's own range is reported as outside, never
  extrapolated; each run is read on its own coordinates;
- a sparse array panel shows the latest frame at or before the cursor and
  states that frame's step;
- best-so-far and saved snapshots are separate marks; a best with no
  snapshot at its step is flagged as having no saved parameters;
- a missing measurement stays missing: NaN/Inf samples are gaps, placeholders
  are marked, a metric a run does not have is "not recorded".
"""

from __future__ import annotations

import bisect

import math
from dataclasses import dataclass, field

import numpy as np

from ..record import Run, pyramid
from ..record.mapped import item, search
from .scales import (OUTLIER_SPANS, ROBUST_SAMPLE, all_finite, flat_limits, log_limits, measured_extremes,  # noqa: F401
                     robust_limits, spans_decades, zero_based)

AXES = ("step", "epoch", "time", "samples")
AXIS_LABELS = {"step": "step (optimizer updates)", "epoch": "epoch (fractional)", "time": "elapsed time (s)",
               "samples": "recorded samples (steps with a record)"}


@dataclass
class Panel:
    """One panel: ``kind`` is "scalar" (metrics overlaid), "histogram", "array" or "confusion"."""

    title: str
    kind: str
    keys: list[str]
    note: str = ""
    options: dict = field(default_factory=dict)


# Panel groups in the order a reader needs them (the chapter's order: losses, task metric, recipe,
# then inside the update, then the machine).
_GROUPS = [
    ("loss", "Loss", lambda k: k in ("train/loss", "val/loss", "train/loss_epoch_mean")),
    ("metrics", "Task metrics", lambda k: (k.startswith(("val/", "train/", "test/")) and not k.endswith("loss")
                                           and "loss_epoch_mean" not in k)),
    ("lr", "Learning rate per group", lambda k: k.startswith("lr/")),
    ("grad", "Gradient norm (global)", lambda k: k in ("grad_norm/global", "grad_norm/global_preclip")),
    ("grad_params", "Gradient norm per parameter", lambda k: k.startswith("grad_norm/") and "global" not in k),
    ("weight", "Weight norm per parameter", lambda k: k.startswith("weight_norm/")),
    ("ratio", "Update / weight ratio", lambda k: k.startswith("update_ratio/")),
    ("act_std", "Activation std (validation forward)", lambda k: k.startswith("act/std/")),
    ("act_zero", "Activation zero fraction", lambda k: k.startswith("act/zero_frac/")),
    ("dead", "Dead units (zero for every inspected example)", lambda k: k.startswith("act/dead_frac/")),
    ("throughput", "Throughput", lambda k: k.startswith("throughput/")),
    ("time", "Step time split", lambda k: k.startswith("time/")),
    ("memory", "Memory", lambda k: k.startswith("memory/")),
    ("plateau", "Plateau counter", lambda k: k.startswith("plateau/")),
]
_SKIP = ("clip/", "act/dead_units/")


def default_panels(runs: list[Run]) -> list[Panel]:
    """Every recorded quantity of ``runs`` as a panel, grouped; the first three (loss, task
    metrics, learning rate) are the ones a dashboard opens with."""
    keys = sorted({k for r in runs for k in r.metrics})
    used: set[str] = set()
    panels = []
    for gid, title, match in _GROUPS:
        ks = [k for k in keys if k not in used and not k.startswith(_SKIP) and match(k)]
        if not ks:
            continue
        used.update(ks)
        note = ""
        if "train/loss_epoch_mean" in ks:
            note = "epoch train loss = mean of the recorded step losses"
        for part in _by_unit(runs, ks):
            panels.append(Panel(title, "scalar", part, note, {"group": gid}))
    rest = [k for k in keys if k not in used and not k.startswith(_SKIP)]
    for k in rest:
        panels.append(Panel(k, "scalar", [k], "", {"group": "other"}))
    for name in sorted({k for r in runs for k in r.histograms}):
        panels.append(Panel(f"Histogram {name}", "histogram", [name]))
    for name in sorted({k for r in runs for k in r.arrays}):
        panels.append(Panel(f"Array {name}", "array", [name]))
    for name in sorted({k for r in runs for k in r.confusions}):
        panels.append(Panel(f"Confusion {name}", "confusion", [name]))
    return panels


def _by_unit(runs: list[Run], keys: list[str]) -> list[list[str]]:
    """``keys`` split into one list per recorded unit (in order of first appearance), so a panel
    never puts decibels and an SSIM index on one axis; series without a unit join the first."""
    units: dict[str | None, list[str]] = {}
    for k in keys:
        unit = next((s.unit for r in runs if (s := r.metrics.get(k)) is not None and s.unit), None)
        units.setdefault(unit, []).append(k)
    loose = units.pop(None, [])
    if not units:
        return [loose]
    parts = list(units.values())
    parts[0] = sorted(parts[0] + loose, key=keys.index)
    return parts


@dataclass
class Reading:
    """What the cursor reports for one run in one series."""

    run: str
    key: str
    state: str  # "value", "outside", "before-first", "not-recorded"
    step: int | None = None
    value: float | None = None
    placeholder: bool = False
    text: str = ""


def _fmt(v: float) -> str:
    if v is None:
        return "—"
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "−Inf"
    if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
        return f"{v:.4e}"
    return f"{v:.6g}"


_FIND = object()


def read_cursor(run: Run, key: str, axis: str, x: float, step=_FIND) -> Reading:
    """The raw value of ``key`` in ``run`` at cursor coordinate ``x`` on ``axis``: the last
    sample at or before the cursor's step, with that sample's step. ``step``: the cursor's step
    in ``run`` (``run.to_step(axis, x)``) when the caller found it once for many keys."""
    s = run.metrics.get(key)
    if s is None:
        return Reading(run.name, key, "not-recorded", text="not recorded")
    step = run.to_step(axis, x) if step is _FIND else step
    if step is None:
        r = run.step_range
        off = run.step_offset if axis == "step" else 0
        span = (f"steps {r[0]}–{r[1]}" + (f", {r[0] + off}–{r[1] + off} of {run.parent['name']}" if off else "")
                if r else "no steps")
        lo_hi = run.coordinate(axis, np.array(r, dtype=float)) if r else None
        where = (f"{axis} {lo_hi[0]:.4g}–{lo_hi[1]:.4g}" if lo_hi is not None and axis != "step"
                 and np.all(np.isfinite(lo_hi)) else span)
        return Reading(run.name, key, "outside", text=f"outside this run ({where})")
    i = s.at(step)
    if i is None:
        first = f" (step {int(s.step[0])})" if len(s) else ""
        return Reading(run.name, key, "before-first", text=f"before its first sample{first}")
    # read, not mapped: a touch would map a whole folio of each column (record/mapped.py)
    v, ph, at = float(item(s.value, i)), bool(item(s.placeholder, i)), int(item(s.step, i))
    text = f"{_fmt(v)} at step {at}" + (" (placeholder, not a measurement)" if ph else "")
    if run.step_offset and axis == "step":  # drawn on its parent's step axis: say both
        text += f" (step {at + run.step_offset} of {run.parent['name']})"
    return Reading(run.name, key, "value", at, v, ph, text)


def frame_reading(run: Run, frames: list, axis: str, x: float) -> tuple[object | None, str]:
    """The latest frame at or before the cursor, and the sentence that states its step."""
    if not frames:
        return None, "not recorded"
    step = run.to_step(axis, x)
    if step is None:
        return None, "cursor outside this run"
    f = run.frame_at(frames, step)
    if f is None:
        return None, f"no frame yet (first at step {frames[0].step})"
    cursor = math.floor(step)
    same = "" if f.step == cursor else f" (latest at or before cursor step {cursor})"
    return f, f"frame from step {f.step}{same}"


def revealed(run: Run, step: float) -> Run:
    """``run`` as it stood at ``step``: every series, frame, snapshot, epoch and progress point
    after it left out, the status not yet known. The reveal mode draws this, so the best and
    later epochs are not seen before the reader moves past them. Arrays are views (no copies)."""
    from dataclasses import replace

    from ..record.run import Series

    upto = math.floor(step)
    n = int(np.searchsorted(run.progress_step, upto, side="right"))
    metrics = {}
    for k, s in run.metrics.items():
        i = int(np.searchsorted(s.step, upto, side="right"))
        v = s.value[:i]  # (its pyramid stands for the prefix: any envelope inside it is the run's)
        metrics[k] = Series(s.name, s.step[:i], v, s.placeholder[:i], s.unit, s.description, s.goal,
                            pyramid.prefix(s, i, v))

    def frames(section: dict) -> dict:
        return {k: [f for f in v if f.step <= upto] for k, v in section.items()}

    last = run.step_range[1] if run.step_range else None
    done = last is not None and upto >= last
    finite = all(bool(np.all(np.isfinite(m.value))) for m in metrics.values())
    return replace(run, metrics=metrics, histograms=frames(run.histograms), arrays=frames(run.arrays),
                   confusions=frames(run.confusions), snapshots=[s for s in run.snapshots if s[0] <= upto],
                   epochs=[e for e in run.epochs if e.get("step", 0) <= upto],
                   events=[e for e in run.events if e[0] <= upto],
                   progress_step=run.progress_step[:n], progress_time=run.progress_time[:n],
                   progress_epoch=None if run.progress_epoch is None else run.progress_epoch[:n],
                   status=run.status if done else "running", ended=run.ended and done, finite=finite)


def evaluation_steps(run: Run) -> np.ndarray:
    """The steps at which the run's best metric was measured (the reveal mode's stops)."""
    s = run.metrics.get(best_metric(run))
    return s.measured()[0] if s is not None else np.zeros(0, np.int64)


def raw_pairs(a) -> bool:
    """True for an (examples, 2) array with more than two rows: a two-unit hidden state, which
    the dashboard can draw as the raw scatter of its two coordinates (seed 002: "not a computed
    projection")."""
    shape = np.shape(a)
    return len(shape) == 2 and shape[1] == 2 and shape[0] > 2


def cell_trace(frames: list, index: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The value of one cell (``index`` into a probe's array) in every recorded frame: (steps,
    values), NaN where a frame has no such cell (another shape). The dashboard draws it with a
    marker per frame, so the steps between frames, where nothing was recorded, stay gaps."""
    steps = np.array([f.step for f in frames], dtype=np.float64)
    values = np.full(len(frames), np.nan)
    for i, f in enumerate(frames):
        a = np.asarray(f.array)
        if a.ndim == len(index) and all(0 <= j < n for j, n in zip(index, a.shape, strict=True)):
            values[i] = float(a[index])
    return steps, values


def cell_text(frame, index: tuple) -> str:
    """What a cell readout says: the value, the index, the probe's identity, the frame's step."""
    a = np.asarray(frame.array)
    ident = ", ".join(x for x in (f"module {frame.module}" if frame.module else "",
                                  f"example {frame.example}" if frame.example else "") if x)
    return (f"{_fmt(float(a[index]))} at [{', '.join(map(str, index))}] of shape {tuple(a.shape)}"
            f"{'; ' + ident if ident else ''}; frame from step {frame.step}")


def smooth(values: np.ndarray, alpha: float) -> np.ndarray:
    """Exponential moving average drawn *beside* the raw trace (alpha: weight of the history,
    0 = none). NaN samples are skipped, not propagated; they stay gaps in the raw trace."""
    from ..smoothing import ema

    return ema(values, alpha, gaps="hold")


def _int_keys(keys, side: str) -> np.ndarray:
    """Float search keys as int64 ones that find the same places in an integer column: a sample
    ``x < k`` exactly when ``x < ceil(k)`` (side "left"), ``x <= k`` when ``x <= floor(k)``
    ("right"). NaN sorts last, as in numpy's float search; keys are clamped to +-2**62 (no
    step is that large)."""
    k = np.asarray(keys, np.float64)
    k = np.where(np.isnan(k), np.inf, np.ceil(k) if side == "left" else np.floor(k))
    return np.clip(k, -(2.0 ** 62), 2.0 ** 62).astype(np.int64)


def search_x(x: np.ndarray, key: float, side: str = "left") -> int:
    """``np.searchsorted(x, key, side)`` of a sorted x column. The step axis's x is the run's own
    int64 step column (no float copy of it is made, see ScalarPanels._series): searched with an
    integer key, so numpy converts no column to float, and in a run file by reading a few values
    (record/mapped.py: nothing mapped)."""
    return search(x, _int_keys(key, side)[()] if x.dtype.kind in "iu" else key, side)


def reduce_columns(x: np.ndarray, y: np.ndarray, x0: float, x1: float, columns: int):
    """Per-column min / max of the samples in [x0, x1] over ``columns`` columns (a million-step
    trace drawn without losing a spike). ``x`` is sorted (steps are): floats, or an integer step
    column (searched with integer keys: the same places, no float copy of it). Columns without
    finite samples are NaN."""
    lo_i, hi_i = search_x(x, x0, "left"), search_x(x, x1, "right")
    xs, ys = x[lo_i:hi_i], y[lo_i:hi_i]
    edges = x0 + np.arange(columns + 1) * ((x1 - x0) / columns)
    starts = np.searchsorted(xs, _int_keys(edges[:-1], "left") if xs.dtype.kind in "iu" else edges[:-1],
                             side="left")
    ends = np.append(starts[1:], len(xs))
    lo = np.full(columns, np.nan)
    hi = np.full(columns, np.nan)
    full = starts < ends
    if full.any() and len(ys):
        mins = np.minimum.reduceat(ys, starts[full])
        maxs = np.maximum.reduceat(ys, starts[full])
        if not (np.isfinite(mins).all() and np.isfinite(maxs).all()):
            # a NaN or an infinity in some column: reduce that series again over its finite
            # samples only (a column of none stays NaN: a gap)
            finite = np.isfinite(ys)
            mins = np.minimum.reduceat(np.where(finite, ys, np.inf), starts[full])
            maxs = np.maximum.reduceat(np.where(finite, ys, -np.inf), starts[full])
        lo[full] = np.where(np.isfinite(mins), mins, np.nan)
        hi[full] = np.where(np.isfinite(maxs), maxs, np.nan)
    centers = (edges[:-1] + edges[1:]) / 2
    return centers, lo, hi


def envelope_columns(x: np.ndarray, s, x0: float, x1: float, columns: int, edges_memo: dict | None = None):
    """What :func:`reduce_columns` gives for series ``s`` over its x column ``x`` (the same
    centers, the same per-column min and max of its finite measured samples, bit for bit), read
    from the series' min/max pyramid (record/pyramid.py): a few hundred values per column set
    instead of every sample in [x0, x1], and in a run file nothing mapped. ``edges_memo``: where
    the column edges' sample indices are kept (series logged together share their x column)."""
    from ..record import pyramid

    edges = x0 + np.arange(columns + 1) * ((x1 - x0) / columns)
    key = (id(x), len(x), x0, x1, columns)
    idx = None if edges_memo is None else edges_memo.get(key)
    if idx is None or idx[0] is not x:
        keys = _int_keys(edges[:-1], "left") if x.dtype.kind in "iu" else edges[:-1]
        at = [search(x, k, "left") for k in keys.tolist()] + [search_x(x, x1, "right")]
        idx = (x, np.maximum.accumulate(np.array(at, np.int64)))
        if edges_memo is not None:
            if len(edges_memo) > 256:
                edges_memo.clear()
            edges_memo[key] = idx
    lo, hi = pyramid.envelope(s.value, pyramid.of_series(s), idx[1], pyramid.placeholder_index(s))
    return (edges[:-1] + edges[1:]) / 2, lo, hi


@dataclass
class BestMarks:
    best_step: int | None
    best_value: float | None
    best_saved: bool
    latest_step: int | None
    snapshots: list[int]
    text: str


def best_metric(run: Run) -> str:
    """The metric ``run`` names its best by (``Recorder(best=..., best_goal=...)``; default
    ``val/loss``)."""
    return (run.meta.get("best") or {}).get("metric", "val/loss")


def best_goal(run: Run) -> str:
    """Whether the best is the lowest (``"min"``) or the highest (``"max"``) value."""
    s = run.metrics.get(best_metric(run))
    return (s.goal if s is not None and s.goal else None) or (run.meta.get("best") or {}).get("goal", "min")


def best_panel(panels: list[Panel], run: Run) -> int | None:
    """The scalar panel that plots ``run``'s best metric: its best-so-far marks go there, on the
    metric's own axis, whatever the goal."""
    metric = best_metric(run)
    return next((i for i, p in enumerate(panels) if p.kind == "scalar" and metric in p.keys), None)


def best_marks(run: Run, metric: str | None = None) -> BestMarks:
    """Best-so-far and saved-state marks for ``run``: where the best is, whether parameters were
    saved there, and where the latest state is; the text names the metric and its goal."""
    snaps = [s for s, _ in run.snapshots]
    r = run.step_range
    latest = r[1] if r else None
    metric = metric or best_metric(run)
    steps, acc = run.best_so_far(metric)
    if not len(steps):
        return BestMarks(None, None, False, latest, snaps, f"no {metric} measurements: no best-so-far")
    b = run.best_step(metric)
    saved = b in snaps
    before = [s for s in snaps if s < b]
    after = [s for s in snaps if s > b]
    goal = "highest" if best_goal(run) == "max" else "lowest"
    text = f"best {metric} ({goal}) {_fmt(float(acc[-1]))} at step {b}"
    if saved:
        text += " (saved)"
    else:
        near = ", ".join(f"step {s}" for s in (before[-1:] + after[:1]))
        text += " — no saved parameters at the best" + (f" (nearest snapshots: {near})" if near else "")
    if latest is not None and latest != b:
        text += f"; latest state: step {latest}"
    return BestMarks(b, float(acc[-1]), saved, latest, snaps, text)


def snapshot_text(run: Run) -> str | None:
    """What the run's snapshots hold, said where they are listed: ``Recorder.save`` writes the
    parameters (a ``state_dict``), not the optimizer's state (moments, step counts) or the
    scheduler's and data order that resuming training needs."""
    if not run.snapshots:
        return None
    n = len(run.snapshots)
    return (f"{n} snapshot{'s' if n > 1 else ''} (steps {', '.join(str(s) for s, _ in run.snapshots[:6])}"
            f"{', …' if n > 6 else ''}): parameters only, not the optimizer state a resume needs")


def definitions(runs: list[Run], panel: Panel) -> list[str]:
    """What the panel's series are, as recorded with ``Recorder.define`` (and the built-in
    definitions of what ``watch`` records): one line per series that has one."""
    out = []
    for key in panel.keys:
        if not any(key in run.metrics for run in runs):
            continue  # a series only other (hidden) runs have
        desc, unit = None, None
        for run in runs:
            s = run.metrics.get(key)
            if s is not None:
                desc, unit = desc or s.description, unit or s.unit
        desc = desc or BUILTIN_DEFINITIONS.get(key) or next(
            (d for prefix, d in BUILTIN_PREFIXES if key.startswith(prefix)), None)
        if desc or unit:
            out.append(f"{key}: {desc or ''}{f' [{unit}]' if unit else ''}".replace(":  [", ": ["))
    return out


# Definitions of what caliper_vk.watch records per tensor or group, shown on the panels when
# the run did not define the series itself (watch() defines the global ones in the run).
BUILTIN_DEFINITIONS = {
    "grad_norm/global_preclip": "L2 norm of all gradient entries before clipping (clip_grad_norm_)",
}
BUILTIN_PREFIXES = (
    ("grad_norm/", "L2 norm of this parameter tensor's gradient"),
    ("weight_norm/", "L2 norm of this parameter tensor"),
    ("update_ratio/", "‖θ_k − θ_{k−1}‖ / max(‖θ_k‖, 1e-12) for this tensor"),
    ("lr/", "learning rate of this parameter group"),
    ("act/std/", "standard deviation of the activations in the last validation forward"),
    ("act/zero_frac/", "fraction of exact zeros in the last validation forward"),
    ("act/dead_frac/", "fraction of units that were zero for every inspected example"),
    ("memory/cuda", "bytes torch's CUDA caching allocator has allocated (device memory)"),
    ("memory/mps", "bytes torch's MPS allocator has allocated (device memory)"),
)


def clipping_text(run: Run) -> str | None:
    c = run.clipping()
    if c is None:
        return None
    return (f"{c['at_cap']} of {c['recorded']} recorded norms at the cap {c['cap']:g} "
            f"({100 * c['fraction']:.0f}%), minimum {_fmt(c['min'])}")


def histogram_stack(frames: list, upto_step: float, count: int) -> list:
    """The last ``count`` histogram frames at or before ``upto_step``, oldest first (for overlay and
    offset views: fading means age)."""
    end = bisect.bisect_right(frames, upto_step, key=lambda f: f.step)  # frames are sorted by step
    return frames[max(0, end - count):end]


REBIN_BINS = 64  # equal bins that unequal (imported) buckets are spread over


def _equal_widths(edges: np.ndarray) -> bool:
    w = np.diff(np.asarray(edges, dtype=np.float64))
    scale = max(abs(float(edges[0])), abs(float(edges[-1])), 1.0)
    return bool(len(w)) and float(w.max() - w.min()) <= 1e-9 * scale


def histogram_grid(frames: list) -> tuple[np.ndarray, str | None]:
    """The bin edges that ``frames`` are drawn on, and the rule that made them (``None`` when the
    frames are drawn as recorded).

    A bar's height reads as density only when every bar is as wide as the others: frames that
    share one set of equal-width edges (the recorder's fixed bins) are drawn as they are. Any other
    frames (TensorBoard's exponential buckets, ranges that differ from frame to frame) are re-binned
    onto :data:`REBIN_BINS` equal bins spanning all of them (the recorder's bin count when that is
    finer), so a bucket's count is never drawn taller for being wider, nor a narrow bucket by 0
    lower for being narrow; an over-time image's rows are then equal steps of value.
    """
    first = np.asarray(frames[0].edges, dtype=np.float64)
    same = all(len(f.edges) == len(first) and np.array_equal(f.edges, first) for f in frames)
    if same and _equal_widths(first):
        return first, None
    lo = min(float(f.edges[0]) for f in frames)
    hi = max(float(f.edges[-1]) for f in frames)
    uniform = all(_equal_widths(f.edges) for f in frames)
    bins = max(len(f.counts) for f in frames) if uniform else REBIN_BINS
    rule = (f"{'buckets of unequal width' if not uniform else 'frames with differing bins'} re-binned to "
            f"{bins} equal bins (a bucket's count spread over the bins it overlaps, in proportion)")
    return np.linspace(lo, hi, bins + 1), rule


def rebin(frame, edges: np.ndarray) -> np.ndarray:
    """``frame``'s counts on ``edges``: each recorded bucket's count spread evenly over its width
    (the cumulative count is linear inside a bucket), so the total is kept and the height of an
    equal-width bin is proportional to the density there."""
    fe = np.asarray(frame.edges, dtype=np.float64)
    if len(fe) == len(edges) and np.array_equal(fe, edges):
        return np.asarray(frame.counts, dtype=np.float64)
    cum = np.concatenate([[0.0], np.cumsum(np.asarray(frame.counts, dtype=np.float64))])
    return np.diff(np.interp(edges, fe, cum))
