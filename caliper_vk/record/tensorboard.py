"""Import TensorBoard event files (scalars and histograms) into a ``Run``.

Read with the tensorboard package's own ``EventAccumulator`` (install it with
``pip install caliper-vk[tensorboard]``), so ``caliper view runs/`` works on
logs written by torch's ``SummaryWriter`` or TensorFlow. What is imported:

- scalars → metrics of the same tag name, with their steps and wall times
  (elapsed time is counted from the first event);
- histograms → histogram frames with TensorBoard's own bucket edges (its
  buckets are not uniform; the left edge of the first bucket is the recorded
  minimum).

A gradient-norm tag (its name holds "grad" and "norm") whose step-0 value is
exactly 0 is marked a placeholder: no gradient exists before the first update.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .log import RunFileError
from .run import HistFrame, Run, Series

_PATTERN = "events.out.tfevents"


def event_files(path) -> list[Path]:
    path = Path(path)
    if path.is_file():
        return [path] if path.name.startswith(_PATTERN) else []
    return sorted(p for p in path.glob(f"{_PATTERN}*") if p.is_file())


def _accumulator(path):
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        raise RunFileError(f"{path}: reading TensorBoard event files needs the tensorboard package: "
                           f"pip install 'caliper-vk[tensorboard]' (or pip install tensorboard)") from None
    acc = event_accumulator.EventAccumulator(
        str(path), size_guidance={event_accumulator.SCALARS: 0, event_accumulator.HISTOGRAMS: 0,
                                  event_accumulator.TENSORS: 0})
    try:
        acc.Reload()
    except Exception as exc:  # the reader raises its own types (DataLossError, protobuf DecodeError)
        raise RunFileError(f"{path}: not a readable TensorBoard event file ({type(exc).__name__}: "
                           f"{str(exc)[:120]})") from None
    return acc


def _is_grad_norm(tag: str) -> bool:
    t = tag.lower()
    return "grad" in t and "norm" in t


def _hist_frame(event, tag: str, problems: list) -> HistFrame | None:
    h = event.histogram_value
    limits = np.asarray(h.bucket_limit, dtype=np.float64)
    counts = np.asarray(h.bucket, dtype=np.float64)
    if not len(limits) or len(limits) != len(counts):
        problems.append(f"histogram {tag!r} step {event.step}: {len(counts)} buckets for {len(limits)} "
                        f"limits; frame skipped")
        return None
    if not np.all(np.isfinite(counts)) or np.any(counts < 0):
        problems.append(f"histogram {tag!r} step {event.step}: a bucket count is negative or not finite; "
                        f"frame skipped")
        return None
    hi = float(h.max)
    limits = np.where(limits > 1e300, max(hi, limits[:-1].max(initial=hi)), limits)
    left = min(float(h.min), float(limits[0]))
    edges = np.concatenate([[left], limits])
    if not np.all(np.diff(edges) > 0):
        # TensorBoard lets the first bucket end exactly at the minimum: widen it by one ulp-scale step.
        edges[0] = np.nextafter(edges[1], -np.inf) if edges[0] >= edges[1] else edges[0]
    if not np.all(np.diff(edges) > 0) or not np.all(np.isfinite(edges)):
        problems.append(f"histogram {tag!r} step {event.step}: bucket edges are not increasing; frame skipped")
        return None
    return HistFrame(int(event.step), edges, np.rint(counts).astype(np.int64))


def run_from_tensorboard(path) -> Run:
    """One run from a TensorBoard event file or a directory of them."""
    path = Path(path)
    files = event_files(path)
    if not files:
        raise RunFileError(f"{path}: no TensorBoard event files ({_PATTERN}*)")
    acc = _accumulator(path if path.is_dir() else files[0])
    tags = acc.Tags()
    run = Run(name=path.name if path.is_dir() else path.parent.name, source=path)
    run.meta = {"imported_from": "tensorboard", "files": [f.name for f in files]}
    run.status, run.ended = "complete", False
    run.problems.append(f"{path.name}: imported from TensorBoard: the event files do not record whether "
                        f"the run finished; status shown as complete")
    times: dict[int, float] = {}
    t0 = None
    for tag in tags.get("scalars", []):
        events = acc.Scalars(tag)
        if not events:
            continue
        steps = np.array([e.step for e in events], dtype=np.int64)
        values = np.array([e.value for e in events], dtype=np.float64)
        order = np.argsort(steps, kind="stable")
        steps, values = steps[order], values[order]
        placeholder = np.zeros(len(steps), dtype=bool)
        if _is_grad_norm(tag):
            placeholder = (steps == 0) & (values == 0.0)
        run.metrics[tag] = Series(tag, steps, values, placeholder,
                                  description="imported from TensorBoard" +
                                  (" (the step-0 zero is a placeholder)" if placeholder.any() else ""))
        for e in events:
            t0 = e.wall_time if t0 is None else min(t0, e.wall_time)
            times.setdefault(int(e.step), e.wall_time)
    for tag in tags.get("histograms", []):
        frames = [f for f in (_hist_frame(e, tag, run.problems) for e in acc.Histograms(tag)) if f]
        if frames:
            run.histograms[tag] = sorted(frames, key=lambda f: f.step)
    if not run.metrics and not run.histograms:
        raise RunFileError(f"{path}: the event files hold no scalars or histograms to show")
    run.finite = all(bool(np.all(np.isfinite(s.value))) for s in run.metrics.values())
    steps = sorted(times)
    run.progress_step = np.array(steps, dtype=np.int64)
    run.progress_time = np.array([times[s] - (t0 or 0.0) for s in steps], dtype=np.float64)
    return run
