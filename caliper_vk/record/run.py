"""A recorded run in memory (``Run``), read from a log, a ``run.json`` or TensorBoard events.

``load_run(path)`` takes a run directory, a ``log.jsonl``, a ``run.json`` or a
directory of TensorBoard event files. Reading never executes anything: JSON
only, arrays as raw little-endian bytes of a whitelisted dtype — in a
``run.json`` of schema ``caliper-run/2`` they live in a binary sidecar that is
memory-mapped on open (pages are read when a column is first touched), in a
``caliper-run/1`` file and in the log they are base64. A record or entry
that is malformed is skipped and described in ``run.problems`` (the rest of
the run loads); a file that cannot be a run at all raises ``RunFileError``
naming the file and field. The schema is in ``docs/run-format.md``.
"""

from __future__ import annotations

import bisect
import json
import math
import mmap
import os
import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .log import Payload, RunFileError, decode_array, encode_array, number, read_log

RUN_SCHEMA = "caliper-run/2"  # what save() writes: arrays in a memory-mapped sidecar
READ_SCHEMAS = ("caliper-run/1", RUN_SCHEMA)  # what load_run reads (/1: arrays as base64 in the JSON)
SIDECAR_MAGIC = b"caliper-run-data/1\n"
SIDECAR_ALIGN = 64  # every array starts on a 64-byte boundary of the sidecar
MAX_RUN_BYTES = 4 << 30
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

    def __len__(self) -> int:
        return len(self.step)

    def at(self, step: float):
        """Index of the last sample at or before ``step``, or None (before the first sample)."""
        try:  # steps are integers: search with floor(step) in their own dtype (a float key would
            key = np.int64(math.floor(step))  # convert the whole step column on every call)
        except (OverflowError, ValueError):
            key = step
        i = int(np.searchsorted(self.step, key, side="right")) - 1
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
    problems: list[str] = field(default_factory=list)
    _tables: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    # -- coordinates -------------------------------------------------------------
    def _table(self, axis: str):
        """(steps, coordinates) of the progress table of ``axis`` ("epoch" or "time") where the
        coordinate is finite, or None; cached while the progress arrays stay the same objects."""
        table = self.progress_epoch if axis == "epoch" else self.progress_time
        hit = self._tables.get(axis)
        if hit is not None and hit[0] is self.progress_step and hit[1] is table:
            return hit[2]
        out = None
        if table is not None and len(self.progress_step):
            ok = np.isfinite(table)
            if ok.any():
                out = (self.progress_step[ok].astype(np.float64), table[ok])
        self._tables[axis] = (self.progress_step, table, out)
        return out

    @property
    def step_range(self) -> tuple[int, int] | None:
        steps = [a for a in [*(s.step for s in self.metrics.values()), self.progress_step] if len(a)]
        if not steps:
            return None
        return int(min(a[0] for a in steps)), int(max(a[-1] for a in steps))

    def coordinate(self, axis: str, steps: np.ndarray) -> np.ndarray:
        """``steps`` on ``axis`` ("step", "epoch" or "time"); NaN where the run has no such coordinate."""
        steps = np.asarray(steps, dtype=np.float64)
        if axis == "step":
            return steps
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
            r = self.step_range
            return float(x) if r and r[0] <= x <= r[1] else None
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
        i = bisect.bisect_right([f.step for f in frames], step) - 1
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

        def hist(f: HistFrame):
            d = {"step": f.step, "counts": encode_array(f.counts), "below": f.below, "above": f.above,
                 "nan": f.nan, "inf": f.inf}
            uniform = np.linspace(f.edges[0], f.edges[-1], len(f.edges))
            if np.array_equal(uniform, f.edges):
                d.update(lo=float(f.edges[0]), hi=float(f.edges[-1]))
            else:
                d["edges"] = encode_array(f.edges)
            return d

        return {
            "schema": schema, "name": self.name, "config": self.config, "meta": self.meta,
            "status": self.status, "finite": self.finite, "ended": self.ended,
            "progress": {"step": encode_array(self.progress_step),
                         "epoch": None if self.progress_epoch is None else encode_array(self.progress_epoch),
                         "time": encode_array(self.progress_time)},
            "metrics": {k: {"unit": s.unit, "description": s.description, "goal": s.goal,
                            "step": encode_array(s.step), "value": encode_array(s.value),
                            "placeholder_steps": [int(x) for x in s.step[s.placeholder]]}
                        for k, s in self.metrics.items()},
            "histograms": frames(self.histograms, hist),
            "arrays": frames(self.arrays, lambda f: {"step": f.step, "module": f.module, "example": f.example,
                                                      "kind": f.kind, "array": encode_array(f.array)}),
            "confusions": frames(self.confusions, lambda f: {"step": f.step, "classes": f.classes,
                                                              "matrix": encode_array(f.matrix)}),
            "snapshots": [{"step": s, "key": k} for s, k in self.snapshots],
            "epochs": self.epochs,
            "problems": self.problems,
        }

    def save(self, path) -> Path:
        """Write ``run.json`` (schema ``caliper-run/2``) and its sidecar of arrays, atomically.

        The arrays go to ``run-<token>.bin`` beside ``path`` (written, synced, then renamed into
        place), the document naming it goes to a temporary file renamed over ``path``, and only
        then are older sidecars removed: a crash at any point leaves the old pair or the new one.
        """
        path = Path(path)
        sidecar = _SidecarWriter()
        doc = self.to_json(sidecar.add, RUN_SCHEMA)
        data_name = f"{path.stem}-{secrets.token_hex(6)}.bin"
        doc["data"] = {"file": data_name, "bytes": sidecar.size}
        _write_atomically(path.parent / data_name, sidecar.chunks)
        text = json.dumps(_json_safe(doc), separators=(",", ":"), allow_nan=False).encode()
        _write_atomically(path, [text])
        for old in path.parent.glob(f"{path.stem}-*.bin"):  # sidecars of earlier saves
            if old.name != data_name:
                try:
                    old.unlink()
                except OSError:  # in use on a platform that cannot unlink an open file: left
                    pass
        return path


class _SidecarWriter:
    """Arrays laid end to end, each on a SIDECAR_ALIGN boundary after the magic line; ``add``
    returns the reference the document stores (``{"dtype", "shape", "at"}``)."""

    def __init__(self):
        self.chunks = [SIDECAR_MAGIC]
        self.size = len(SIDECAR_MAGIC)
        self._seen: dict = {}  # id(array) -> (array, reference): a shared column is stored once

    def add(self, a) -> dict:
        hit = self._seen.get(id(a))
        if hit is not None and hit[0] is a:  # series logged together share one step column
            return dict(hit[1])
        ref = encode_array(a, raw=True)
        data = ref.pop("raw")
        pad = -self.size % SIDECAR_ALIGN
        if pad:
            self.chunks.append(b"\0" * pad)
            self.size += pad
        ref["at"] = self.size
        self.chunks.append(data)
        self.size += len(data)
        self._seen[id(a)] = (a, dict(ref))
        return ref


def _write_atomically(path: Path, chunks) -> None:
    """``chunks`` into ``path`` by a synced temporary file renamed over it, with an ordinary
    file's permissions (mkstemp makes 0600)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=path.suffix, dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            for c in chunks:
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process umask, read without setting it (os.umask would change it for every thread
    for a moment); 0o022 where /proc does not say."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def _json_safe(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_json_safe(x) for x in v]
    if isinstance(v, np.generic):
        return _json_safe(v.item())
    return v


# -- validation helpers ---------------------------------------------------------------
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

    def _snapshot(self, rec, where):
        self.run.snapshots.append((_step(rec.get("step"), where), _text(rec.get("key"), f"{where}.key", False)))

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
        epochs = [self.progress[s][0] for s in steps]
        run.progress_epoch = (np.array([np.nan if e is None else e for e in epochs], dtype=np.float64)
                              if any(e is not None for e in epochs) else None)
        run.progress_time = np.array([np.nan if self.progress[s][1] is None else self.progress[s][1]
                                      for s in steps], dtype=np.float64)
        return run


def run_from_log(path) -> Run:
    path = Path(path)
    contents = read_log(path)
    h = contents.header
    name = h.get("name") if isinstance(h.get("name"), str) else path.parent.name
    b = _Builder(name)
    b.run.source = path
    b.run.config = h.get("config") if isinstance(h.get("config"), dict) else {}
    b.run.meta = {k: h[k] for k in ("started", "steps_per_epoch", "best", "host") if k in h}
    b.run.problems.extend(contents.problems)
    for rec in contents.records:
        b.add(rec, f"{path.name} line {rec.pop('_line')}")
    run = b.finish()
    if not contents.ended_cleanly:
        run.status = "running"
        run.problems.append(f"{path.name}: the log has no end record: the run is still going, or its "
                            f"process was stopped (killed, crashed) before close()")
    return run


def run_from_json(path) -> Run:
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_RUN_BYTES:
        raise RunFileError(f"{path}: {size} bytes is more than the {MAX_RUN_BYTES} allowed for a run file")
    try:
        text = path.read_bytes()
        refs = _Refs()
        head = json.loads(text, object_hook=refs.hook) if b'"at"' in text else json.loads(text)
    except RecursionError:
        raise RunFileError(f"{path}: nested too deeply to be a run file") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RunFileError(f"{path}: not JSON ({str(exc)[:100]})") from None
    if isinstance(head, dict) and head.get("schema") == RUN_SCHEMA and "data" in head:
        refs.resolve(head, path)
    return run_from_doc(head, path)


class _Refs:
    """Sidecar references (``{"dtype", "shape", "at"}``) found while a ``caliper-run/2``
    document is parsed, given their bytes from the memory-mapped sidecar afterwards: each
    becomes an array object whose data is a view of the mapping (no copy, nothing read yet)."""

    def __init__(self):
        self.found: list = []

    def hook(self, d: dict) -> dict:
        if "at" in d and "dtype" in d and "shape" in d and "b64" not in d:
            self.found.append(d)
        return d

    def resolve(self, doc: dict, path: Path) -> None:
        refs = self.found
        data = doc.get("data")
        name = data.get("file") if isinstance(data, dict) else None
        if not isinstance(name, str) or "/" in name or "\\" in name or not name.endswith(".bin"):
            raise RunFileError(f"{path.name}.data.file: expected the name of a .bin file beside it")
        side = path.parent / name
        try:
            size = side.stat().st_size
        except OSError:
            raise RunFileError(f"{path.name}: its arrays' file {name} is missing (copy it along with "
                               "run.json, or open the run directory to read log.jsonl)") from None
        if size != data.get("bytes"):
            raise RunFileError(f"{path.name}.data: {name} has {size} bytes, the run says {data.get('bytes')}")
        # a plain read-only array over the mapping (np.memmap's subclass hooks cost ~20 us per
        # slice: a run with thousands of frames spent most of its open in them)
        with open(side, "rb") as f:
            mm = np.frombuffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), np.uint8) if size else \
                np.zeros(0, np.uint8)
        if bytes(mm[:len(SIDECAR_MAGIC)]) != SIDECAR_MAGIC:
            raise RunFileError(f"{path.name}: {name} is not a Caliper array file")
        views: dict = {}
        for d in refs:
            at = d.pop("at")
            if not isinstance(at, int) or isinstance(at, bool) or not len(SIDECAR_MAGIC) <= at <= size:
                d["b64"] = Payload(None, f"at: {str(at)[:20]!r} is not an offset into {name} "
                                         f"({len(SIDECAR_MAGIC)}..{size})")
                continue
            # one payload per offset: references to one stored column decode to one array
            d["b64"] = views.setdefault(at, Payload.view(mm[at:]))  # decode_array sizes it


def _checked_steps(stored: np.ndarray, where: str, columns: list) -> tuple:
    """A metric's step column, checked (non-negative integers), sorted if it was not (with the
    order to apply to its values, else None), and shared with an equal column read before."""
    if len(stored) and (stored.min() < 0 if stored.dtype.kind in "iub" else (
            not np.all(np.isfinite(stored)) or stored.min() < 0 or not np.all(stored == np.floor(stored)))):
        raise RunFileError(f"{where}.step: steps must be non-negative integers")
    steps = stored.astype(np.int64, copy=False)
    order = None
    if len(steps) > 1 and np.any(steps[1:] < steps[:-1]):  # recorded in order: nothing to do
        order = np.argsort(steps, kind="stable")
        steps = steps[order]
    return _same_steps(steps, columns), order


def _same_steps(steps: np.ndarray, columns: list) -> np.ndarray:
    """``steps``, or an equal step column read before (metrics logged together share one array:
    ten scalars over a million steps hold one 8 MB step column, not ten)."""
    for c in columns:
        if c is steps or (c.shape == steps.shape and (not len(c) or (c[0] == steps[0] and c[-1] == steps[-1]))
                          and np.array_equal(c, steps)):
            return c
    columns.append(steps)
    return steps


def _column(obj, where: str, dtype) -> np.ndarray:
    a = decode_array(obj, where)
    if a.ndim != 1:
        raise RunFileError(f"{where}: expected a 1-D column, got shape {a.shape}")
    if np.dtype(dtype).kind == "i" and a.dtype.kind == "f" and not (
            np.all(np.isfinite(a)) and np.all(a == np.floor(a))):
        raise RunFileError(f"{where}: steps must be integers")
    return a.astype(dtype, copy=False)


def _list(doc: dict, key: str, name: str) -> list:
    v = doc.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise RunFileError(f"{name}.{key}: expected a list, got {type(v).__name__}")
    return v


def run_from_doc(doc, path: Path) -> Run:
    name = path.name
    if not isinstance(doc, dict):
        raise RunFileError(f"{name}: expected a JSON object at the top level")
    schema = doc.get("schema")
    if schema not in READ_SCHEMAS:
        raise RunFileError(f"{name}.schema: {str(schema)[:40]!r} is not one of {', '.join(READ_SCHEMAS)}; "
                           "this caliper-vk reads those (a newer caliper-vk may read this one)")
    b = _Builder(doc["name"] if isinstance(doc.get("name"), str) else path.parent.name)
    run = b.run
    run.source = path
    run.config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    run.meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    status = doc.get("status", "running")
    if status not in ("running", "complete", "nonfinite", "interrupted", "failed"):
        raise RunFileError(f"{name}.status: unknown status {str(status)[:20]!r}")
    run.status = status
    run.ended = doc.get("ended") is True
    run.problems.extend(str(p)[:500] for p in _list(doc, "problems", name))
    progress = doc.get("progress") or {}
    if not isinstance(progress, dict):
        raise RunFileError(f"{name}.progress: expected an object")
    try:
        run.progress_step = _column(progress.get("step", []), f"{name}.progress.step", np.int64)
        run.progress_time = _column(progress.get("time", []), f"{name}.progress.time", np.float64)
        if progress.get("epoch") is not None:
            run.progress_epoch = _column(progress["epoch"], f"{name}.progress.epoch", np.float64)
        if len(run.progress_time) != len(run.progress_step) or (
                run.progress_epoch is not None and len(run.progress_epoch) != len(run.progress_step)):
            raise RunFileError(f"{name}.progress: step, epoch and time differ in length")
    except RunFileError as exc:
        run.problems.append(f"{exc}; progress coordinates are missing")
        run.progress_step, run.progress_time, run.progress_epoch = _EMPTY_I, _EMPTY_F, None
    metrics = doc.get("metrics") or {}
    if not isinstance(metrics, dict):
        raise RunFileError(f"{name}.metrics: expected an object of name: series")
    finite = True
    known_finite = isinstance(doc.get("finite"), bool)  # else found out from every value below
    step_columns = [run.progress_step]
    checked: dict = {}  # id(stored step column) -> (column, its order or None): checked once
    for k, m in metrics.items():
        where = f"{name}.metrics[{k!r}]"
        try:
            if not isinstance(m, dict):
                raise RunFileError(f"{where}: expected an object")
            stored = decode_array(m.get("step"), f"{where}.step")
            values = decode_array(m.get("value"), f"{where}.value").astype(np.float64, copy=False)
            if stored.shape != values.shape or stored.ndim != 1:
                raise RunFileError(f"{where}: step and value differ in length")
            hit = checked.get(id(stored))
            if hit is None or hit[0] is not stored:
                hit = checked[id(stored)] = (stored, *_checked_steps(stored, where, step_columns))
            _, steps, order = hit
            if order is not None:
                values = values[order]
            ph = m.get("placeholder_steps") or []
            if not isinstance(ph, list) or not all(isinstance(x, int) for x in ph):
                raise RunFileError(f"{where}.placeholder_steps: expected a list of steps")
            goal = m.get("goal")
            if goal not in (None, "min", "max"):
                raise RunFileError(f"{where}.goal: expected 'min', 'max' or null")
            if not known_finite:
                finite &= bool(np.all(np.isfinite(values)))
            run.metrics[k] = Series(k, steps, values, np.isin(steps, ph) if ph else np.zeros(len(steps), bool),
                                    _text(m.get("unit"), f"{where}.unit"),
                                    _text(m.get("description"), f"{where}.description"), goal)
        except RunFileError as exc:
            run.problems.append(f"{exc}; metric {k!r} is missing")
    run.finite = doc["finite"] if isinstance(doc.get("finite"), bool) else finite
    for section in ("histograms", "arrays", "confusions"):
        items = doc.get(section) or {}
        if not isinstance(items, dict):
            raise RunFileError(f"{name}.{section}: expected an object of name: [frames]")
        for k, frames in items.items():
            if not isinstance(frames, list):
                run.problems.append(f"{name}.{section}[{k!r}]: expected a list of frames; missing")
                continue
            for i, f in enumerate(frames):
                where = f"{name}.{section}[{k!r}][{i}]"
                if not isinstance(f, dict):
                    run.problems.append(f"{where}: expected an object; frame skipped")
                    continue
                b.add({**f, "t": {"histograms": "hist", "arrays": "array", "confusions": "confusion"}[section],
                       "name": k}, where)
    for i, s in enumerate(_list(doc, "snapshots", name)):
        if isinstance(s, dict):
            b.add({**s, "t": "snapshot"}, f"{name}.snapshots[{i}]")
        else:
            run.problems.append(f"{name}.snapshots[{i}]: expected an object; skipped")
    for i, e in enumerate(_list(doc, "epochs", name)):
        if isinstance(e, dict):
            b.add({**e, "t": "epoch"}, f"{name}.epochs[{i}]")
    for frames in (*run.histograms.values(), *run.arrays.values(), *run.confusions.values()):
        frames.sort(key=lambda f: f.step)
    run.snapshots.sort()
    return run


def load_run(path) -> Run:
    """Read a run from a directory, a ``log.jsonl``, a ``run.json`` or TensorBoard event files."""
    path = Path(path)
    if not path.exists():
        raise RunFileError(f"{path}: no such file or directory")
    if path.is_dir():
        log, doc = path / "log.jsonl", path / "run.json"
        if doc.exists() and (not log.exists() or doc.stat().st_mtime >= log.stat().st_mtime):
            return run_from_json(doc)
        if log.exists():
            return run_from_log(log)
        from .tensorboard import event_files, run_from_tensorboard

        if event_files(path):
            return run_from_tensorboard(path)
        raise RunFileError(f"{path}: no run here (expected log.jsonl, run.json or TensorBoard event files)")
    if path.name.startswith("events.out.tfevents"):
        from .tensorboard import run_from_tensorboard

        return run_from_tensorboard(path)
    with open(path, "rb") as f:
        head = f.read(64)
    if head.lstrip().startswith(b'{"t":"header"'):
        return run_from_log(path)
    return run_from_json(path)


def find_runs(path) -> list[Path]:
    """Run directories under ``path`` (itself, or its subdirectories holding runs), sorted."""
    path = Path(path)
    if not path.exists():
        raise RunFileError(f"{path}: no such file or directory")
    if path.is_file():
        return [path]

    def is_run(p: Path) -> bool:
        if (p / "log.jsonl").exists() or (p / "run.json").exists():
            return True
        from .tensorboard import event_files

        return bool(event_files(p))

    if is_run(path):
        return [path]
    return sorted(p for p in path.iterdir() if p.is_dir() and is_run(p))
