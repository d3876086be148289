"""A recorded run in memory (``Run``), read from a log, a ``run.json`` or TensorBoard events.

``load_run(path)`` takes a run directory, a ``log.jsonl``, a ``run.json`` or a
directory of TensorBoard event files. Reading never executes anything: JSON
only, arrays as raw little-endian bytes of a whitelisted dtype — in a
``run.json`` of schema ``caliper-run/3`` they live in a binary sidecar that is
memory-mapped on open (pages are read when a column is first touched), in a
``caliper-run/1`` file and in the log they are base64. A record or entry
that is malformed is skipped and described in ``run.problems`` (the rest of
the run loads); a file that cannot be a run at all raises ``RunFileError``
naming the file and field. The schema is in ``docs/run-format.md``.
"""

from __future__ import annotations

import bisect
import math
import operator
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .log import encode_array
from . import pyramid
from .mapped import item, search

_STEP = operator.attrgetter("step")
_EMPTY_I = np.zeros(0, np.int64)
_EMPTY_F = np.zeros(0, np.float64)


@dataclass
class Series:
    """One scalar metric over steps; ``placeholder`` marks values that are not measurements.

    ``step`` is shared with the other series recorded at the same steps (and with
    ``Run.progress_step`` when equal): read it, do not write into it."""

    name: str
    step: np.ndarray
    value: np.ndarray
    placeholder: np.ndarray
    unit: str | None = None
    description: str | None = None
    goal: str | None = None
    # the min/max pyramid its run file stores (record/pyramid.py), or None: built when drawn
    pyramid: object = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.step)

    def at(self, step: float):
        """Index of the last sample at or before ``step``, or None (before the first sample)."""
        try:  # steps are integers: search with floor(step) in their own dtype (a float key would
            key = np.int64(math.floor(step))  # convert the whole step column on every call)
        except (OverflowError, ValueError):
            key = step
        i = search(self.step, key, side="right") - 1  # in a run file: read, not mapped (mapped.py)
        return i if i >= 0 else None

    def measured(self) -> tuple[np.ndarray, np.ndarray]:
        keep = ~self.placeholder
        return self.step[keep], self.value[keep]


@dataclass
class HistFrame:
    step: int
    edges: np.ndarray
    counts: np.ndarray
    below: int = 0
    above: int = 0
    nan: int = 0
    inf: int = 0


@dataclass
class ArrayFrame:
    step: int
    array: np.ndarray
    module: str | None = None
    example: str | None = None
    kind: str | None = None


@dataclass
class ConfusionFrame:
    step: int
    matrix: np.ndarray
    classes: list | None = None


@dataclass
class Run:
    """Everything recorded about one run, read back; see the module docstring."""

    name: str
    source: Path | None = None
    config: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    status: str = "running"
    finite: bool = True
    ended: bool = False
    progress_step: np.ndarray = field(default_factory=lambda: _EMPTY_I)
    progress_epoch: np.ndarray | None = None
    progress_time: np.ndarray = field(default_factory=lambda: _EMPTY_F)
    metrics: dict[str, Series] = field(default_factory=dict)
    histograms: dict[str, list[HistFrame]] = field(default_factory=dict)
    arrays: dict[str, list[ArrayFrame]] = field(default_factory=dict)
    confusions: dict[str, list[ConfusionFrame]] = field(default_factory=dict)
    snapshots: list[tuple[int, str]] = field(default_factory=list)
    epochs: list[dict] = field(default_factory=list)
    events: list[tuple[int, str]] = field(default_factory=list)  # (step, what changed), by step
    problems: list[str] = field(default_factory=list)
    _tables: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    # -- coordinates -------------------------------------------------------------
    def _table(self, axis: str):
        """(steps, coordinates) of the progress table of ``axis`` ("epoch" or "time") where the
        coordinate is finite, or None; cached while the progress arrays stay the same objects."""
        table = (self.progress_epoch if axis == "epoch" else self.progress_time if axis == "time"
                 else np.arange(len(self.progress_step), dtype=np.float64))  # "samples": recorded points
        hit = self._tables.get(axis)
        if hit is not None and hit[0] is self.progress_step and (hit[1] is table or axis == "samples"):
            return hit[2]
        out = None
        if table is not None and len(self.progress_step):
            ok = np.isfinite(table)
            if ok.any():
                out = (self.progress_step[ok].astype(np.float64), table[ok])
        self._tables[axis] = (self.progress_step, table, out)
        return out

    @property
    def parent(self) -> dict | None:
        """Where this run started from (``Recorder(parent=, parent_step=)``): ``{"run": path of
        the parent's directory (resolved against this run's), "name": its directory's name,
        "step": the parent's step whose state this run starts from}``, or None."""
        p = self.meta.get("parent") if isinstance(self.meta, dict) else None
        if not isinstance(p, dict) or not isinstance(p.get("run"), str) or isinstance(p.get("step"), bool) \
                or not isinstance(p.get("step"), int) or p["step"] < 0:
            return None
        here = self.source.parent if self.source is not None else Path(".")
        return {"run": (here / p["run"]).resolve() if not Path(p["run"]).is_absolute() else Path(p["run"]),
                "name": str(p.get("name") or Path(p["run"]).name), "step": p["step"]}

    @property
    def step_offset(self) -> int:
        """Where step 0 of this run lies on the step axis: its parent's step for a run that
        started from another's state (drawn on the parent's step axis from the branch point),
        else 0. The run's own steps are unchanged (``Series.step``)."""
        p = self.parent
        return p["step"] if p is not None else 0

    @property
    def step_range(self) -> tuple[int, int] | None:
        """The first and last step of any series or progress point; cached while the step
        columns stay the same objects of the same lengths (a cursor move asks it per readout)."""
        hit = self._tables.get("step_range")
        # the same column objects (an array's length never changes; the cache holds them, so an
        # id is not reused): checked by identity at C level, a run of a thousand series in ~0.2 ms
        if (hit is not None and len(hit[1]) == len(self.metrics) + 1 and hit[1][-1] is self.progress_step
                and all(map(operator.is_, map(_STEP, self.metrics.values()), hit[1]))):
            return hit[2]
        columns = [*map(_STEP, self.metrics.values()), self.progress_step]
        steps = {id(a): a for a in columns if len(a)}.values()  # each shared column once, read
        out = (int(min(item(a, 0) for a in steps)), int(max(item(a, -1) for a in steps))) if steps else None
        self._tables["step_range"] = (None, columns, out)
        return out

    def coordinate(self, axis: str, steps: np.ndarray) -> np.ndarray:
        """``steps`` on ``axis`` ("step", "epoch", "time" or "samples": how many progress points,
        steps with any record, came before); NaN where the run has no such coordinate."""
        steps = np.asarray(steps, dtype=np.float64)
        if axis == "step":
            return steps + self.step_offset if self.step_offset else steps
        found = self._table(axis)
        if found is None:
            return np.full(steps.shape, np.nan)
        xs, ys = found
        out = np.interp(steps, xs, ys)
        out[(steps < xs[0]) | (steps > xs[-1])] = np.nan
        return out

    def to_step(self, axis: str, x: float) -> float | None:
        """The step at coordinate ``x`` on ``axis``, or None when ``x`` lies outside this run."""
        if axis == "step":
            r, x = self.step_range, float(x) - self.step_offset
            return x if r and r[0] <= x <= r[1] else None
        found = self._table(axis)
        if found is None:
            return None
        ys, xs = found
        if x < xs[0] or x > xs[-1]:
            return None
        return float(np.interp(x, xs, ys))

    # -- derived views (never stored, always recomputed from the raw record) ----------
    def best_so_far(self, metric: str | None = None, goal: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Cumulative best of ``metric`` (default: the run's best metric, e.g. ``val/loss``)
        over its measured, finite samples: (steps, best values)."""
        best = self.meta.get("best") or {}
        metric = metric or best.get("metric", "val/loss")
        s = self.metrics.get(metric)
        if s is None:
            return _EMPTY_I, _EMPTY_F
        goal = goal or s.goal or best.get("goal", "min")
        steps, values = s.measured()
        ok = np.isfinite(values)
        steps, values = steps[ok], values[ok]
        acc = np.minimum.accumulate(values) if goal == "min" else np.maximum.accumulate(values)
        return steps, acc

    def best_step(self, metric: str | None = None) -> int | None:
        steps, acc = self.best_so_far(metric)
        if not len(steps):
            return None
        first = int(np.argmax(acc == acc[-1]))
        return int(steps[first])

    def snapshot_at(self, step: int) -> str | None:
        for s, key in self.snapshots:
            if s == step:
                return key
        return None

    def frame_at(self, frames: list, step: float):
        """The latest frame at or before ``step`` (frames sorted by step), or None."""
        i = bisect.bisect_right(frames, step, key=lambda f: f.step) - 1
        return frames[i] if i >= 0 else None

    def clipping(self, metric: str = "grad_norm/global", cap: float | None = None) -> dict | None:
        """How many recorded norms equal the clipping cap (within 1e-5 relative: torch's
        ``clip_grad_norm_`` scales to ``cap / (norm + 1e-6)``) or exceed it, and the minimum norm."""
        s = self.metrics.get(metric)
        if cap is None:
            recorded = self.metrics.get("clip/threshold")
            if recorded is not None and len(recorded):
                cap = float(recorded.value[-1])
            elif isinstance(self.config, dict) and isinstance(self.config.get("clip"), int | float):
                cap = float(self.config["clip"])
        if s is None or cap is None:
            return None
        _, v = s.measured()
        v = v[np.isfinite(v)]
        if not len(v):
            return None
        at_cap = int(np.sum(np.isclose(v, float(cap), rtol=1e-5, atol=0.0) | (v > cap)))
        return {"cap": float(cap), "recorded": len(v), "at_cap": at_cap, "fraction": at_cap / len(v),
                "min": float(v.min())}

    def recall_precision(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
        """Per-class recall and precision at each recorded confusion matrix:
        (steps, recall[frames, classes], precision[frames, classes], class names).
        A class with no true (recall) or no predicted (precision) examples gives NaN."""
        frames = self.confusions.get(name, [])
        if not frames:
            return _EMPTY_I, np.zeros((0, 0)), np.zeros((0, 0)), []
        n = frames[-1].matrix.shape[0]
        frames = [f for f in frames if f.matrix.shape == (n, n)]
        m = np.stack([f.matrix for f in frames]).astype(np.float64)
        diag = np.diagonal(m, axis1=1, axis2=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            recall = np.where(m.sum(2) > 0, diag / m.sum(2), np.nan)
            precision = np.where(m.sum(1) > 0, diag / m.sum(1), np.nan)
        classes = frames[-1].classes or [str(i) for i in range(n)]
        return np.array([f.step for f in frames]), recall, precision, classes

    # -- writing -------------------------------------------------------------------
    def to_json(self, encode_array=encode_array, schema: str = "caliper-run/1") -> dict:
        """The run as a JSON document; arrays through ``encode_array`` (base64 in the document
        by default; :meth:`save` passes a sidecar writer)."""
        def frames(items, enc):
            return {k: [enc(f) for f in v] for k, v in items.items()}

        def histograms():
            if schema in ("caliper-run/1", "caliper-run/2"):
                return frames(self.histograms, hist)
            from .histcols import to_columns  # caliper-run/3: each histogram's frames as columns

            return {k: to_columns(v, encode_array) for k, v in self.histograms.items()}

        def hist(f: HistFrame):
            d = {"step": f.step, "counts": encode_array(f.counts), "below": f.below, "above": f.above,
                 "nan": f.nan, "inf": f.inf}
            uniform = np.linspace(f.edges[0], f.edges[-1], len(f.edges))
            if np.array_equal(uniform, f.edges):
                d.update(lo=float(f.edges[0]), hi=float(f.edges[-1]))
            else:
                d["edges"] = encode_array(f.edges)
            return d

        def metric(s: Series) -> dict:
            d = {"unit": s.unit, "description": s.description, "goal": s.goal,
                 "step": encode_array(s.step), "value": encode_array(s.value),
                 "placeholder_steps": [int(x) for x in s.step[s.placeholder]]}
            if schema not in ("caliper-run/1", "caliper-run/2") and len(s) >= pyramid.MIN_LENGTH:
                d["pyramid"] = pyramid.to_doc(pyramid.of_series(s), encode_array)  # (drawn from it)
            return d

        return {
            "schema": schema, "name": self.name, "config": self.config, "meta": self.meta,
            "status": self.status, "finite": self.finite, "ended": self.ended,
            "progress": {"step": encode_array(self.progress_step),
                         "epoch": None if self.progress_epoch is None else encode_array(self.progress_epoch),
                         "time": encode_array(self.progress_time)},
            "metrics": {k: metric(s) for k, s in self.metrics.items()},
            "histograms": histograms(),
            "arrays": frames(self.arrays, lambda f: {"step": f.step, "module": f.module, "example": f.example,
                                                      "kind": f.kind, "array": encode_array(f.array)}),
            "confusions": frames(self.confusions, lambda f: {"step": f.step, "classes": f.classes,
                                                              "matrix": encode_array(f.matrix)}),
            "snapshots": [{"step": s, "key": k} for s, k in self.snapshots],
            "epochs": self.epochs,
            "events": [{"step": s, "text": t} for s, t in self.events],
            "problems": self.problems,
        }

    def save(self, path) -> Path:
        """Write ``run.json`` (schema ``caliper-run/3``) and its sidecar of arrays, atomically
        (see :func:`caliper_vk.record.runfile.save_run`)."""
        from .runfile import save_run

        return save_run(self, path)


# reading and writing run files (runfile.py imports the classes above)
from .runfile import (  # noqa: E402
    MAX_RUN_BYTES, READ_SCHEMAS, RUN_SCHEMA, find_runs, load_run, run_from_doc, run_from_json, run_from_log,
)

__all__ = ["MAX_RUN_BYTES", "READ_SCHEMAS", "RUN_SCHEMA", "ArrayFrame", "ConfusionFrame", "HistFrame", "Run",
           "Series", "find_runs", "load_run", "run_from_doc", "run_from_json", "run_from_log"]


def lineage(run_dir: Path, parent, parent_step) -> dict | None:
    """The header's ``parent`` record: the parent run's directory, relative to this run's when it
    can be (runs copied together keep their link), and the parent's step this run starts from."""
    if parent is None:
        if parent_step is not None:
            raise ValueError("parent_step= needs parent= (the run directory whose state this run starts from)")
        return None
    if parent_step is None or isinstance(parent_step, bool) or int(parent_step) != parent_step \
            or parent_step < 0:
        raise ValueError(f"parent= needs parent_step=, the parent's step (a non-negative integer) whose "
                         f"state this run starts from; got {parent_step!r}")
    where = Path(parent)
    try:
        link = os.path.relpath(where.resolve(), run_dir.resolve())
    except ValueError:  # another drive (Windows): the absolute path
        link = str(where.resolve())
    return {"run": Path(link).as_posix(), "name": where.resolve().name, "step": int(parent_step)}
