"""Records to a :class:`~caliper_vk.record.run.Run`: the one place a log record or a
``run.json`` entry is checked and added (``_Builder``), and ``run_from_log``.

Every field is validated here; a malformed record raises :class:`RunFileError` naming its
place, which the callers turn into a note in ``run.problems`` and skip.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .log import RunFileError, decode_array, number, read_log
from .run import ArrayFrame, ConfusionFrame, HistFrame, Run, Series


def _step(v, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int | float) or (isinstance(v, float) and not v.is_integer()):
        raise RunFileError(f"{where}.step: expected a non-negative integer, got {str(v)[:40]!r}")
    if not 0 <= v < 1 << 53:
        raise RunFileError(f"{where}.step: {v} is out of range (0 .. 2^53)")
    return int(v)


def _count(v, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise RunFileError(f"{where}: expected a count (a non-negative integer), got {str(v)[:40]!r}")
    return v


def _text(v, where: str, optional: bool = True) -> str | None:
    if v is None and optional:
        return None
    if not isinstance(v, str) or len(v) > 4096:
        raise RunFileError(f"{where}: expected a string (at most 4096 characters)")
    return v


def _opt_number(v, where: str) -> float | None:
    return None if v is None else number(v, where)


# -- building a Run from log records ----------------------------------------------------
class _Builder:
    def __init__(self, name: str):
        self.run = Run(name=name)
        self.scalars: dict[str, list] = {}
        self.defs: dict[str, dict] = {}
        self.progress: dict[int, tuple] = {}
        self._edges: dict = {}  # (lo, hi, bins) -> the edges histogram frames share

    def add(self, rec: dict, where: str) -> None:
        t = rec["t"]
        handler = getattr(self, f"_{t}", None)
        if handler is None:
            self.run.problems.append(f"{where}: unknown record type {t!r}; skipped")
            return
        try:
            handler(rec, where)
        except RunFileError as exc:
            self.run.problems.append(f"{exc}; record skipped")

    def _note_progress(self, step: int, epoch, time_) -> None:
        old = self.progress.get(step, (None, None))
        self.progress[step] = (epoch if epoch is not None else old[0], time_ if time_ is not None else old[1])

    def _scalars(self, rec, where):
        step = _step(rec.get("step"), where)
        epoch = _opt_number(rec.get("epoch"), f"{where}.epoch")
        time_ = _opt_number(rec.get("time"), f"{where}.time")
        values = rec.get("values")
        if not isinstance(values, dict):
            raise RunFileError(f"{where}.values: expected an object of name: number")
        placeholder = rec.get("placeholder") or []
        if not isinstance(placeholder, list):
            raise RunFileError(f"{where}.placeholder: expected a list of metric names")
        for k, v in values.items():
            try:
                x = number(v, f"{where}.values[{k!r}]")
            except RunFileError as exc:
                self.run.problems.append(f"{exc}; that value is missing")
                continue
            self.scalars.setdefault(k, []).append((step, x, k in placeholder))
        self._note_progress(step, epoch, time_)

    def _define(self, rec, where):
        name = _text(rec.get("name"), f"{where}.name", optional=False)
        goal = rec.get("goal")
        if goal not in (None, "min", "max"):
            raise RunFileError(f"{where}.goal: expected 'min', 'max' or null, got {str(goal)[:20]!r}")
        self.defs[name] = {"unit": _text(rec.get("unit"), f"{where}.unit"),
                           "description": _text(rec.get("description"), f"{where}.description"), "goal": goal}

    def _hist(self, rec, where):
        name = _text(rec.get("name"), f"{where}.name", optional=False)
        step = _step(rec.get("step"), where)
        counts = decode_array(rec.get("counts"), f"{where}.counts")
        if counts.ndim != 1 or not len(counts):
            raise RunFileError(f"{where}.counts: expected a non-empty list of bin counts")
        if (counts.min() < 0) if counts.dtype.kind in "iub" else (
                not np.all(np.isfinite(counts)) or np.any(counts < 0) or np.any(counts != np.floor(counts))):
            raise RunFileError(f"{where}.counts: bin counts must be non-negative integers (found NaN, "
                               f"a negative or a fraction)")
        if "edges" in rec:
            edges = decode_array(rec["edges"], f"{where}.edges").astype(np.float64)
            if edges.shape != (len(counts) + 1,) or not np.all(np.diff(edges) > 0):
                raise RunFileError(f"{where}.edges: expected {len(counts) + 1} increasing bin edges")
        else:
            lo, hi = number(rec.get("lo"), f"{where}.lo"), number(rec.get("hi"), f"{where}.hi")
            if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
                raise RunFileError(f"{where}.lo/hi: expected a finite range with lo < hi, got [{lo}, {hi}]")
            key = (lo, hi, len(counts))
            edges = self._edges.get(key)
            if edges is None:  # frames of one histogram share their edges (read-only)
                edges = self._edges[key] = np.linspace(lo, hi, len(counts) + 1)
                edges.flags.writeable = False
        extra = {k: _count(rec.get(k, 0), f"{where}.{k}") for k in ("below", "above", "nan", "inf")}
        self.run.histograms.setdefault(name, []).append(
            HistFrame(step, edges, counts.astype(np.int64), **extra))
        self._note_progress(step, _opt_number(rec.get("epoch"), f"{where}.epoch"), None)

    def _array(self, rec, where):
        name = _text(rec.get("name"), f"{where}.name", optional=False)
        step = _step(rec.get("step"), where)
        array = decode_array(rec.get("array"), f"{where}.array")
        self.run.arrays.setdefault(name, []).append(ArrayFrame(
            step, array, _text(rec.get("module"), f"{where}.module"),
            _text(rec.get("example"), f"{where}.example"), _text(rec.get("kind"), f"{where}.kind")))
        # a run of arrays alone (Session.save_history's) has its steps from them, as histograms do
        self._note_progress(step, _opt_number(rec.get("epoch"), f"{where}.epoch"), None)

    def _confusion(self, rec, where):
        name = _text(rec.get("name"), f"{where}.name", optional=False)
        step = _step(rec.get("step"), where)
        m = decode_array(rec.get("matrix"), f"{where}.matrix")
        if m.ndim != 2 or m.shape[0] != m.shape[1]:
            raise RunFileError(f"{where}.matrix: a confusion matrix is square, got shape {m.shape}")
        if not np.all(np.isfinite(m)) or np.any(m < 0) or np.any(m != np.floor(m)):
            raise RunFileError(f"{where}.matrix: counts must be non-negative integers (found NaN, a negative "
                               f"or a fraction)")
        classes = rec.get("classes")
        if classes is not None and (not isinstance(classes, list) or len(classes) != m.shape[0]
                                    or not all(isinstance(c, str) for c in classes)):
            raise RunFileError(f"{where}.classes: expected {m.shape[0]} class names")
        self.run.confusions.setdefault(name, []).append(ConfusionFrame(step, m.astype(np.int64), classes))
        self._note_progress(step, _opt_number(rec.get("epoch"), f"{where}.epoch"), None)

    def _snapshot(self, rec, where):
        self.run.snapshots.append((_step(rec.get("step"), where), _text(rec.get("key"), f"{where}.key", False)))

    def _event(self, rec, where):
        self.run.events.append((_step(rec.get("step"), where), _text(rec.get("text"), f"{where}.text", False)))

    def _epoch(self, rec, where):
        self.run.epochs.append({"index": _count(rec.get("index"), f"{where}.index"),
                                "step": _step(rec.get("step"), where),
                                "recorded_steps": _count(rec.get("recorded_steps", 0),
                                                         f"{where}.recorded_steps")})

    def _end(self, rec, where):
        status = rec.get("status")
        if status not in ("complete", "nonfinite", "interrupted", "failed"):
            raise RunFileError(f"{where}.status: unknown status {str(status)[:20]!r}")
        if not isinstance(rec.get("finite"), bool):
            raise RunFileError(f"{where}.finite: expected true or false")
        self.run.status, self.run.finite, self.run.ended = status, rec["finite"], True

    def finish(self) -> Run:
        run = self.run
        steps = sorted(self.progress)
        run.progress_step = np.array(steps, dtype=np.int64)
        step_columns = [run.progress_step]
        finite = True
        for name, items in self.scalars.items():
            items.sort(key=lambda x: x[0])
            d = self.defs.get(name, {})
            values = np.array([x[1] for x in items], dtype=np.float64)
            finite &= bool(np.all(np.isfinite(values)))
            run.metrics[name] = Series(name, _same_steps(np.array([x[0] for x in items], dtype=np.int64),
                                                         step_columns), values,
                                       np.array([x[2] for x in items], dtype=bool), **d)
        if not run.ended:
            run.finite = finite
        for frames in (*run.histograms.values(), *run.arrays.values(), *run.confusions.values()):
            frames.sort(key=lambda f: f.step)
        run.snapshots.sort()
        run.events.sort(key=lambda e: e[0])
        epochs = [self.progress[s][0] for s in steps]
        run.progress_epoch = (np.array([np.nan if e is None else e for e in epochs], dtype=np.float64)
                              if any(e is not None for e in epochs) else None)
        run.progress_time = np.array([np.nan if self.progress[s][1] is None else self.progress[s][1]
                                      for s in steps], dtype=np.float64)
        return run


def builder_for(header: dict, path: Path) -> _Builder:
    """A builder for the run whose log header is ``header`` (the log at ``path``)."""
    name = header.get("name") if isinstance(header.get("name"), str) else path.parent.name
    b = _Builder(name)
    b.run.source = path
    b.run.config = header.get("config") if isinstance(header.get("config"), dict) else {}
    b.run.meta = {k: header[k] for k in ("started", "steps_per_epoch", "best", "host", "parent", "train_size")
                  if k in header}
    return b


NO_END = ("the log has no end record: the run is still going, or its process was stopped (killed, "
          "crashed) before close()")


def run_from_log(path) -> Run:
    path = Path(path)
    contents = read_log(path)
    b = builder_for(contents.header, path)
    b.run.problems.extend(contents.problems)
    for rec in contents.records:
        b.add(rec, f"{path.name} line {rec.pop('_line')}")
    run = b.finish()
    if not contents.ended_cleanly:
        run.status = "running"
        run.problems.append(f"{path.name}: {NO_END}")
    return run


def _same_steps(steps: np.ndarray, columns: list) -> np.ndarray:
    """``steps``, or an equal step column read before (metrics logged together share one array:
    ten scalars over a million steps hold one 8 MB step column, not ten)."""
    for c in columns:
        if c is steps or (c.shape == steps.shape and (not len(c) or (c[0] == steps[0] and c[-1] == steps[-1]))
                          and np.array_equal(c, steps)):
            return c
    columns.append(steps)
    return steps
