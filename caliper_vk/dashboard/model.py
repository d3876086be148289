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

import math
from dataclasses import dataclass, field

import numpy as np

from ..record import Run

AXES = ("step", "epoch", "time")
AXIS_LABELS = {"step": "step (optimizer updates)", "epoch": "epoch (fractional)", "time": "elapsed time (s)"}


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


def read_cursor(run: Run, key: str, axis: str, x: float) -> Reading:
    """The raw value of ``key`` in ``run`` at cursor coordinate ``x`` on ``axis``: the last
    sample at or before the cursor's step, with that sample's step."""
    s = run.metrics.get(key)
    if s is None:
        return Reading(run.name, key, "not-recorded", text="not recorded")
    step = run.to_step(axis, x)
    if step is None:
        r = run.step_range
        span = f"steps {r[0]}–{r[1]}" if r else "no steps"
        lo_hi = run.coordinate(axis, np.array(r, dtype=float)) if r else None
        where = (f"{axis} {lo_hi[0]:.4g}–{lo_hi[1]:.4g}" if lo_hi is not None and axis != "step"
                 and np.all(np.isfinite(lo_hi)) else span)
        return Reading(run.name, key, "outside", text=f"outside this run ({where})")
    i = s.at(step)
    if i is None:
        first = f" (step {int(s.step[0])})" if len(s) else ""
        return Reading(run.name, key, "before-first", text=f"before its first sample{first}")
    v = float(s.value[i])
    ph = bool(s.placeholder[i])
    text = f"{_fmt(v)} at step {int(s.step[i])}" + (" (placeholder, not a measurement)" if ph else "")
    return Reading(run.name, key, "value", int(s.step[i]), v, ph, text)


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
        metrics[k] = Series(s.name, s.step[:i], s.value[:i], s.placeholder[:i], s.unit, s.description, s.goal)

    def frames(section: dict) -> dict:
        return {k: [f for f in v if f.step <= upto] for k, v in section.items()}

    last = run.step_range[1] if run.step_range else None
    done = last is not None and upto >= last
    finite = all(bool(np.all(np.isfinite(m.value))) for m in metrics.values())
    return replace(run, metrics=metrics, histograms=frames(run.histograms), arrays=frames(run.arrays),
                   confusions=frames(run.confusions), snapshots=[s for s in run.snapshots if s[0] <= upto],
                   epochs=[e for e in run.epochs if e.get("step", 0) <= upto],
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


def reduce_columns(x: np.ndarray, y: np.ndarray, x0: float, x1: float, columns: int):
    """Per-column min / max of the samples in [x0, x1] over ``columns`` columns (a million-step
    trace drawn without losing a spike). ``x`` is sorted (steps are). Columns without finite
    samples are NaN."""
    lo_i, hi_i = np.searchsorted(x, [x0, x1], side="left")[0], np.searchsorted(x, x1, side="right")
    xs, ys = x[lo_i:hi_i], y[lo_i:hi_i]
    edges = x0 + np.arange(columns + 1) * ((x1 - x0) / columns)
    starts = np.searchsorted(xs, edges[:-1], side="left")
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


ROBUST_SAMPLE = 32_768  # values per series the robust scale is estimated from
OUTLIER_SPANS = 2.0  # how far beyond the 2nd-98th percentile range (in its spans) an outlier lies


def _finite_extremes(v: np.ndarray) -> tuple[float | None, float | None]:
    """(min, max) of the finite values of ``v`` (None, None when there are none), without a
    filtered copy unless a NaN or an infinity is present."""
    if not len(v):
        return None, None
    lo, hi = float(np.min(v)), float(np.max(v))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        f = v[np.isfinite(v)]
        if not len(f):
            return None, None
        lo, hi = float(f.min()), float(f.max())
    return lo, hi


def measured_extremes(s) -> tuple[float | None, float | None]:
    """(min, max) of a series' finite measured values (placeholders left out), computed once per
    value array: the scale decisions of every panel read them, and a million-step column costs
    milliseconds to scan."""
    memo = s.__dict__.get("_extremes")
    if memo is not None and memo[0] is s.value and memo[1] is s.placeholder:
        return memo[2]
    v = s.value[~s.placeholder] if s.placeholder.any() else s.value
    out = _finite_extremes(v)
    s.__dict__["_extremes"] = (s.value, s.placeholder, out)
    return out


def log_limits(runs: list[Run], panel: Panel, pad: float = 0.05) -> tuple[float, float] | None:
    """Y limits of a log axis: the positive finite values' extremes widened by ``pad`` of the
    span in decades on each side (at least 5% of a value), so a series at an extreme (a learning
    rate of 1 in a sweep down to 1e-5) is drawn inside the plot, not on its frame. None when no
    value is positive."""
    lo, hi = math.inf, 0.0
    for run in runs:
        for k in panel.keys:
            s = run.metrics.get(k)
            if s is None or not len(s):
                continue
            vmin, vmax = measured_extremes(s)
            if vmin is None or vmax <= 0:
                continue
            if vmin <= 0:  # a log axis leaves those out: the smallest positive value sets the floor
                v = s.value[~s.placeholder] if s.placeholder.any() else s.value
                vmin = float(v[(v > 0) & np.isfinite(v)].min())
            lo, hi = min(lo, vmin), max(hi, vmax)
    if hi <= 0 or lo == math.inf:
        return None
    factor = max(1.05, (hi / lo) ** pad)
    return lo / factor, hi * factor


def spans_decades(runs: list[Run], panel: Panel, decades: float = 2.0) -> bool:
    """True when every finite value of a scalar panel's series is positive and they span more
    than ``decades`` powers of ten: such a panel opens on a logarithmic axis (a loss spike of
    700 over losses of 0.05 otherwise flattens every curve onto the floor)."""
    if panel.kind != "scalar" or zero_based(panel):
        return False
    lo, hi = math.inf, 0.0
    for run in runs:
        for k in panel.keys:
            s = run.metrics.get(k)
            if s is None or not len(s):
                continue
            vmin, vmax = measured_extremes(s)
            if vmin is None:
                continue
            if vmin <= 0:
                return False
            lo, hi = min(lo, vmin), max(hi, vmax)
    return hi > 0 and lo < math.inf and hi / lo > 10.0 ** decades


def robust_limits(runs: list[Run], panel: Panel) -> tuple[float, float] | None:
    """Y limits that ignore outliers, as TensorBoard's "ignore outliers in chart scaling" does:
    the 2nd..98th percentile of the panel's finite measured values, padded by a tenth of that
    span on each side, on each side where some value lies more than OUTLIER_SPANS spans beyond
    it (else that side keeps the true extreme); None when nothing lies that far, or there are
    too few values to call any an outlier. Clipped values are still read by the cursor and
    are marked at the plot's edge (see the app)."""
    vals = []
    for run in runs:
        for k in panel.keys:
            s = run.metrics.get(k)
            if s is not None and len(s):
                v = s.value[~s.placeholder] if s.placeholder.any() else s.value
                if len(v) > ROBUST_SAMPLE:  # the percentiles of an even sample: a scale, not a statistic
                    v = v[:: -(-len(v) // ROBUST_SAMPLE)]
                vals.append(v[np.isfinite(v)])
    v = np.concatenate(vals) if vals else np.zeros(0)
    if len(v) < 20:
        return None
    lo, hi = (float(q) for q in np.percentile(v, [2.0, 98.0]))
    pad = (hi - lo) * 0.1 if hi > lo else max(abs(hi) * 0.1, 1e-12)
    lo, hi = lo - pad, hi + pad
    vmin, vmax = None, None
    for run in runs:  # the true extremes, every sample
        for k in panel.keys:
            if (s := run.metrics.get(k)) is not None and len(s):
                a, b = measured_extremes(s)
                if a is not None:
                    vmin, vmax = (a, b) if vmin is None else (min(vmin, a), max(vmax, b))
    if vmin is None or (vmin >= lo and vmax <= hi):
        return None
    # keep the full range on a side whose extreme is within two spans of the robust edge: only
    # far outliers (a spike, a collapse to zero) are put at the edge, never a noisy trace's tails
    span = hi - lo
    if vmin >= lo - OUTLIER_SPANS * span:
        lo = min(lo, vmin)
    if vmax <= hi + OUTLIER_SPANS * span:
        hi = max(hi, vmax)
    return (lo, hi) if (vmin < lo or vmax > hi) else None


def flat_limits(runs: list[Run], panel: Panel) -> tuple[float, float] | None:
    """Y limits for a panel whose every finite value is one number (a constant learning rate):
    ±10% around it, so 0.003 does not sit on an axis from -0.5 to 0.5 that reads as zero."""
    seen = set()
    for run in runs:
        for k in panel.keys:
            s = run.metrics.get(k)
            if s is not None and len(s):
                a, b = _finite_extremes(s.value)
                if a is not None:
                    seen.update((a, b))
                    if len(seen) > 1:
                        return None
    if len(seen) != 1:
        return None
    v = seen.pop()
    pad = abs(v) * 0.1 if v != 0 else 1.0
    return v - pad, v + pad


def zero_based(panel: Panel) -> bool:
    """Panels read on a scale that starts at zero: memory (a 1% change must not look like a
    doubling: 4.28e8 to 4.32e8 bytes on an auto-fitted axis fills the panel)."""
    return panel.kind == "scalar" and panel.options.get("group") == "memory"


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
    chosen = [f for f in frames if f.step <= upto_step]
    return chosen[-count:]
