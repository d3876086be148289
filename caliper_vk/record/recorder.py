"""``Recorder``: writes a training run to an append-only log and exports ``run.json``.

A run lives in a directory: ``log.jsonl`` grows while training runs (see
:mod:`.log` for why a kill loses at most the record being written), and so do
the scalar columns of ``run.json`` (:mod:`.columns`: every series' steps and
values appended as they are logged, a chunk at a time, to a spool file beside
the log). ``close()`` or ``export()`` writes ``run.json`` by copying those
columns into its sidecar and reading back from the log only its other records
(definitions, histograms, arrays, events, the end), through the same checks as a log
read from disk: a few calls per column, whatever the run's length, and no
memory that grows with it. A run killed before ``close()`` opens from its log.

Tensors are read without waiting for the device (:mod:`.stage`): a logged loss
tensor or ``watch``'s statistics are copied to host memory behind the work
that computes them and written to the log when they have arrived, normally
during the next step; ``close()``, ``export()``, ``end_epoch()`` and
``flush()`` wait for what is still on its way.

Step numbering: step ``k`` is the state after the ``k``-th optimizer update;
step 0 is the initial model. Values logged between update ``k`` and update
``k+1`` belong to step ``k`` (log the training loss after ``optimizer.step()``).
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import socket
import sys
import time
from pathlib import Path

import numpy as np

from .._arrays import to_host
from .columns import ColumnSpool
from .devstats import _counts, histogram_counts
from .run import lineage as _lineage
from .._log import logger
from .log import LogWriter, RunFileError, encode_array, logged_tensor, logged_value
from .stage import Staging

LOG_NAME = "log.jsonl"
RUN_NAME = "run.json"
STATUSES = ("running", "complete", "nonfinite", "interrupted", "failed")


def _numpy(a) -> np.ndarray:
    return to_host(a, "value") if hasattr(a, "detach") else np.asarray(a)


class Recorder:
    """Records one training run into ``path`` (a directory, created).

    ``config`` is any JSON-serialisable description of the run (hyper-parameters,
    data set, model size). ``steps_per_epoch`` (or ``epoch=`` on each ``log``)
    gives the fractional-epoch axis; ``best`` names the metric whose cumulative
    best marks best-so-far and drives the plateau counter, with ``best_goal``
    ``"min"`` (a loss) or ``"max"`` (a score). An existing run is never
    overwritten unless ``overwrite=True``. The header records the machine
    (hostname, platform, Python, the command line, the process id) so a run
    can be traced; ``host_info=False`` keeps only the platform and Python
    version, for runs that will be shared. ``parent=RUN_DIR, parent_step=STEP``
    records that this run starts from the state of that run at its step
    ``STEP`` (a fine-tune from a checkpoint): ``load_run(d).parent`` reads it and
    the dashboard draws this run on the parent's step axis from there.
    ``train_size=N`` (the training set's size) makes the epoch the examples consumed / N
    when the steps say how many they took (``advance(examples=)``; ``watch`` does).
    """

    def __init__(self, path, name: str | None = None, config: dict | None = None,
                 steps_per_epoch: float | None = None, best: str = "val/loss", best_goal: str = "min",
                 overwrite: bool = False, host_info: bool = True, parent=None, parent_step: int | None = None,
                 train_size: int | None = None):
        self.dir = Path(path)
        lineage = _lineage(self.dir, parent, parent_step)
        self.dir.mkdir(parents=True, exist_ok=True)
        log_path = self.dir / LOG_NAME
        if log_path.exists():
            if not overwrite:
                raise FileExistsError(f"{self.dir} already holds a recorded run ({LOG_NAME}); choose another "
                                      f"directory or pass overwrite=True to replace it")
            log_path.unlink()
            (self.dir / RUN_NAME).unlink(missing_ok=True)
        if best_goal not in ("min", "max"):
            raise ValueError(f"best_goal must be 'min' or 'max', got {best_goal!r}")
        self.name = name or self.dir.name
        self.steps_per_epoch = steps_per_epoch
        self.best_metric, self.best_goal = best, best_goal
        self._t0 = time.time()
        self._step = 0
        self.train_size = int(train_size) if train_size else None
        self._consumed = 0  # training examples consumed, when told (advance(examples=))
        self._epoch: float | None = 0.0 if steps_per_epoch or self.train_size else None
        self._epoch_losses: list[float] = []
        self._epoch_index = 0
        self._best: float | None = None
        self._plateau = 0
        self._finite = True
        self._nonfinite_loss = False
        self._status = "running"
        self._defined: set[str] = set()
        self.budget = None  # a live session's Budget, counting log() as Caliper's (watch(session=) sets it)
        self._stage = Staging()
        self._columns = ColumnSpool(self.dir)  # (replaces a spool a killed run left)
        self._log = LogWriter(log_path, {
            "name": self.name, "config": config or {}, "started": self._t0,
            "steps_per_epoch": steps_per_epoch, "best": {"metric": best, "goal": best_goal},
            "host": {"platform": platform.platform(), "python": sys.version.split()[0],
                     **({"hostname": socket.gethostname(), "argv": sys.argv[:20], "pid": os.getpid()}
                        if host_info else {})},
            **({"parent": lineage} if lineage else {}),
            **({"train_size": self.train_size} if self.train_size else {}),
        })

    # -- progress ---------------------------------------------------------------
    @property
    def step(self) -> int:
        """The current step: the number of optimizer updates recorded so far."""
        return self._step

    @property
    def epoch(self) -> float | None:
        return self._epoch

    @property
    def log_path(self) -> Path:
        return self._log.path

    def advance(self, steps: int = 1, examples: int | None = None) -> int:
        """Move to the next step (``watch`` calls this after each ``optimizer.step()``, with the
        examples the step's forwards took). With ``train_size=`` and ``examples`` the epoch is the
        examples consumed / the training set's size (a last short batch, or batches of another
        size, counted as they were); otherwise ``step / steps_per_epoch``."""
        self._step += int(steps)
        if examples is not None:
            self._consumed += int(examples)
        if self.train_size and self._consumed:
            self._epoch = self._consumed / float(self.train_size)
        elif self.steps_per_epoch:
            self._epoch = self._step / float(self.steps_per_epoch)
        return self._step

    def _at(self, step, epoch) -> tuple[int, float | None]:
        if step is None:
            return self._step, self._epoch if epoch is None else float(epoch)
        step = int(step)
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        if step > self._step:
            self._step = step
            if self.steps_per_epoch:
                self._epoch = step / float(self.steps_per_epoch)
        if epoch is None and self.steps_per_epoch:
            epoch = step / float(self.steps_per_epoch)
        return step, (None if epoch is None else float(epoch))

    # -- scalars ----------------------------------------------------------------
    def define(self, name: str, unit: str | None = None, description: str | None = None,
               goal: str | None = None) -> None:
        """Describe a metric: its unit ("dB", "bytes", "examples/s"), what it measures, and
        whether higher (``goal="max"``) or lower (``"min"``) is better."""
        if goal not in (None, "min", "max"):
            raise ValueError(f"goal must be 'min', 'max' or None, got {goal!r}")
        self._defined.add(name)
        self._write({"t": "define", "name": name, "unit": unit, "description": description, "goal": goal})

    def log(self, values: dict | None = None, /, *, step: int | None = None, epoch: float | None = None,
            placeholder: tuple = (), **named) -> None:
        """Record scalars at ``step`` (default: the current step).

        ``rec.log(train_loss=loss)`` or ``rec.log({"val/psnr": psnr})``: keyword
        names have their first ``_`` turned into ``/`` (``train_loss`` →
        ``train/loss``). A tensor is not read on the spot (no ``.item()``: the
        training stream does not wait): it is copied to host memory without waiting
        and the record is written when it has arrived (the module docstring).
        ``placeholder`` names values that are not measurements (a step-0 gradient
        norm stored as 0 before any gradient existed); they are kept but marked.
        """
        with contextlib.nullcontext() if self.budget is None else self.budget.charging():  # counted once
            self._log_values(values, step, epoch, placeholder, named)

    def _log_values(self, values, step, epoch, placeholder, named) -> None:
        merged: dict = {}
        tensors: dict = {}
        for k, v in [*((str(k), v) for k, v in (values or {}).items()),
                     *((k.replace("_", "/", 1) if "/" not in k else k, v) for k, v in named.items())]:
            if hasattr(v, "detach"):
                tensors[k] = logged_tensor(v, k)
                merged[k] = None  # (keeps the order the values were given in)
            else:
                merged[k] = logged_value(v, k)
        if not merged:
            return
        bad = [p for p in placeholder if p not in merged]
        if bad:
            raise ValueError(f"placeholder names {bad} are not among the logged values {sorted(merged)}")
        step, epoch = self._at(step, epoch)
        record = {"t": "scalars", "step": step, "epoch": epoch, "time": time.time() - self._t0,
                  "values": merged}
        if placeholder:
            record["placeholder"] = list(placeholder)
        vector = None
        if tensors:
            import torch

            from .devstats import on

            device = next(iter(tensors.values())).device
            vector = torch.stack([on(t, device) for t in tensors.values()])
        names = list(tensors)

        def write(arrived):
            if arrived is not None:
                merged.update(zip(names, arrived.tolist(), strict=True))
            self._scalars(record)

        self._stage.put(vector, write)

    def _scalars(self, record: dict) -> None:
        merged = record["values"]
        for k, v in merged.items():
            if not math.isfinite(v):
                self._finite = False
                if k.endswith("loss"):
                    self._nonfinite_loss = True
        if "train/loss" in merged and math.isfinite(merged["train/loss"]):
            self._epoch_losses.append(merged["train/loss"])
        self._write(record)
        if self.best_metric in merged:
            self._track_best(merged[self.best_metric], record["step"], record["epoch"])

    def _write(self, record: dict) -> None:
        at, length = self._log.write(record)
        self._columns.add(record, at, length)

    # -- values on their way from the device ----------------------------------------
    def stage(self, tensor, write, works=()) -> None:
        """Copy ``tensor`` to host memory without waiting and call ``write(numpy array)`` when it
        has arrived, in order with the other records (``watch`` sends its statistics this way);
        ``works``: collectives (``async_op``) that must complete before it is read."""
        self._stage.put(tensor, write, works)

    def poll(self) -> None:
        """Write the records whose values have arrived from the device (never waits)."""
        self._stage.poll()

    def flush(self) -> None:
        """Wait for every value still on its way from the device and write its record."""
        self._stage.drain()

    def _track_best(self, v: float, step: int, epoch) -> None:
        if not math.isfinite(v):
            better = False
        elif self._best is None:
            better = True
        else:
            better = v < self._best if self.best_goal == "min" else v > self._best
        if better:
            self._best, self._plateau = v, 0
        else:
            self._plateau += 1
        self._write({"t": "scalars", "step": step, "epoch": epoch, "time": time.time() - self._t0,
                     "values": {"plateau/count": float(self._plateau)}})

    def end_epoch(self, epoch: int | None = None) -> None:
        """Close an epoch: records ``train/loss_epoch_mean``, the mean of the step losses
        recorded during it (labelled as such: it is not a whole-pass average unless
        every step's loss was logged)."""
        self._epoch_index = self._epoch_index + 1 if epoch is None else int(epoch)
        self.flush()  # the epoch's losses, all of them
        if self._epoch_losses:
            mean = float(np.mean(self._epoch_losses))
            if "train/loss_epoch_mean" not in self._defined:
                self.define("train/loss_epoch_mean", description="mean of the recorded step losses of "
                            "the epoch (not a whole-pass average unless every step was recorded)", goal="min")
            self.log({"train/loss_epoch_mean": mean})
            self._write({"t": "epoch", "index": self._epoch_index, "step": self._step,
                             "recorded_steps": len(self._epoch_losses)})
        self._epoch_losses = []

    # -- arrays -----------------------------------------------------------------
    def histogram(self, name: str, values, bins: int = 12, value_range=(-3.0, 3.0),
                  step: int | None = None) -> dict | None:
        """Record a histogram of ``values`` in fixed bins; out-of-range and non-finite values
        are counted, not dropped silently. A tensor is binned on its own device and its counts
        written when they reach the host (no wait); returns the counts when they are already
        there (numpy values, CPU tensors), else None."""
        return self.histograms({name: values}, bins, value_range, step).get(name)

    def histograms(self, named: dict, bins: int = 12, value_range=(-3.0, 3.0),
                   step: int | None = None) -> dict:
        """:meth:`histogram` of several arrays or tensors at one step, their counts travelling
        together (``watch`` records every weight this way). Returns ``{name: counts}`` of those
        whose counts are already on the host."""
        lo, hi = float(value_range[0]), float(value_range[1])
        if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo) or bins < 1:
            raise ValueError(f"histogram range must be finite with lo < hi and bins >= 1, got [{lo}, {hi}], "
                             f"{bins}")
        step, epoch = self._at(step, None)
        done: dict = {}

        def write(name, h):
            self._histogram_record(name, h, step, epoch)
            done[name] = h

        tensors = {k: v for k, v in named.items() if hasattr(v, "detach")}
        for k, v in named.items():
            if k not in tensors:
                write(k, histogram_counts(v, bins, lo, hi))
        if tensors:
            import torch

            from .devstats import histogram_device, on

            first = next(iter(tensors.values())).device
            vector = torch.cat([on(histogram_device(v, bins, lo, hi), first) for v in tensors.values()])

            def arrived(values):
                for i, k in enumerate(tensors):
                    write(k, _counts(values[i * (bins + 4):(i + 1) * (bins + 4)], lo, hi))

            self._stage.put(vector, arrived)
        return done

    def histogram_counted(self, name: str, h: dict, step: int | None = None,
                          epoch: float | None = None) -> None:
        """Record a histogram counted already: ``h`` as :func:`histogram_counts` returns it (``watch``
        of a sharded model sums every rank's counts of its shards first)."""
        self._histogram_record(name, h, *self._at(step, epoch))

    def _histogram_record(self, name: str, h: dict, step: int, epoch) -> None:
        self._write({"t": "hist", "step": step, "epoch": epoch, "name": name, "lo": h["lo"], "hi": h["hi"],
                     "counts": encode_array(h["counts"]), "below": h["below"], "above": h["above"],
                     "nan": h["nan"], "inf": h["inf"]})

    def probe(self, name: str, array, module: str | None = None, example: str | None = None,
              kind: str | None = None, step: int | None = None) -> None:
        """Record an array (a kernel, a feature map, a hidden state, attention weights) with its
        identity: the module it came from and the input example it was computed on."""
        a = _numpy(array)
        if a.size > 1 << 24:
            raise ValueError(f"probe {name!r}: {a.size} elements is too many to record each step "
                             f"(at most {1 << 24}); record a slice")
        step, epoch = self._at(step, None)
        self._write({"t": "array", "step": step, "epoch": epoch, "name": name, "module": module,
                         "example": example, "kind": kind, "array": encode_array(a)})

    def confusion(self, name: str = "val/confusion", matrix=None, *, targets=None, predictions=None,
                  num_classes: int | None = None, classes: list | None = None, step: int | None = None):
        """Record a confusion matrix (rows: true class, columns: predicted), given as a matrix
        or computed from ``targets`` and ``predictions``. Returns the matrix."""
        if matrix is None:
            if targets is None or predictions is None:
                raise ValueError("confusion() needs a matrix, or targets= and predictions=")
            t = _numpy(targets).reshape(-1).astype(np.int64)
            p = _numpy(predictions).reshape(-1).astype(np.int64)
            if t.shape != p.shape:
                raise ValueError(f"targets ({t.size}) and predictions ({p.size}) differ in length")
            n = num_classes or int(max(t.max(initial=-1), p.max(initial=-1)) + 1)
            if t.size and (min(t.min(), p.min()) < 0 or max(t.max(), p.max()) >= n):
                raise ValueError(f"class indices must lie in [0, {n}); pass num_classes=")
            matrix = np.bincount(t * n + p, minlength=n * n).reshape(n, n)
        m = _numpy(matrix).astype(np.int64)
        if m.ndim != 2 or m.shape[0] != m.shape[1]:
            raise ValueError(f"a confusion matrix is square, got shape {m.shape}")
        if classes is not None and len(classes) != m.shape[0]:
            raise ValueError(f"{len(classes)} class names for a {m.shape[0]}-class matrix")
        step, epoch = self._at(step, None)
        self._write({"t": "confusion", "step": step, "epoch": epoch, "name": name,
                         "classes": [str(c) for c in classes] if classes is not None else None,
                         "matrix": encode_array(m)})
        return m

    def event(self, text: str, step: int | None = None) -> None:
        """Record a change made partway through the run (a loss switched, a schedule edited, the
        data changed) at ``step`` (default: the current step). The dashboard marks it on every
        panel at that step, with ``text`` on hover and in the cursor's readout."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"an event needs a text saying what changed, got {text!r}")
        step, epoch = self._at(step, None)
        self._write({"t": "event", "step": step, "epoch": epoch, "text": text.strip()[:500]})

    # -- saved states and status ----------------------------------------------------
    def snapshot(self, key: str, step: int | None = None) -> None:
        """Record that the parameters at ``step`` were saved under ``key`` (a path or a name)."""
        step, epoch = self._at(step, None)
        self._write({"t": "snapshot", "step": step, "epoch": epoch, "key": str(key)})

    def save(self, module, path) -> Path:
        """``torch.save(module.state_dict(), path)`` and record the snapshot."""
        import torch

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(module.state_dict(), path)
        try:
            key = str(path.resolve().relative_to(self.dir.resolve()))
        except ValueError:
            key = str(path)
        self.snapshot(key)
        return path

    @property
    def finite(self) -> bool:
        return self._finite

    @property
    def closed(self) -> bool:
        return self._log.closed

    def close(self, status: str | None = None) -> Path:
        """End the run (``status`` default: ``complete``, or ``nonfinite`` when a loss was
        NaN/Inf) and write ``run.json``. A second close returns the same path."""
        if self._log.closed:
            return self.dir / RUN_NAME
        self.flush()  # what is still on its way from the device belongs to the run
        if status is None:
            status = "nonfinite" if self._nonfinite_loss else "complete"
        if status not in STATUSES[1:]:
            raise ValueError(f"status must be one of {', '.join(STATUSES[1:])}, got {status!r}")
        self._status = status
        self._write({"t": "end", "step": self._step, "status": status, "finite": self._finite,
                         "time": time.time() - self._t0})
        self._log.close()
        try:
            return self.export()
        finally:
            self._columns.close()

    def export(self, path=None) -> Path:
        """Write ``run.json`` as the run is now (also while it goes on): from the columns written as
        it went, or, when those are gone (after ``close()``), rebuilt from the log."""
        from .run import load_run

        path = path or self.dir / RUN_NAME
        if not self._log.closed:
            self.flush()
            self._log.sync()
        if self._columns.fd is not None:
            try:
                return self._export_columns(path)
            except (OSError, ValueError) as exc:  # the log still holds everything: rebuilt from it
                logger.warning(f"{self.dir}: the run's columns could not be written ({exc}); rebuilding "
                               f"run.json from {LOG_NAME}")
        return load_run(self.dir / LOG_NAME).save(path)

    def _export_columns(self, path) -> Path:
        from .builder import NO_END, builder_for
        from .log import parse_line
        from .run import _EMPTY_F, _EMPTY_I
        from .runfile import save_run

        log = self.dir / LOG_NAME
        b = builder_for(self._log.header, log)
        for raw, at in self._columns.other_records(log):  # only the records that are not scalars
            where = f"{LOG_NAME} at byte {at}"
            record, problem = parse_line(raw, where)
            if record is None:
                b.run.problems.append(problem)
            else:
                b.add(record, where)
        run = b.finish()
        run.progress_step, run.progress_epoch, run.progress_time = _EMPTY_I, None, _EMPTY_F  # (the columns')
        if not run.ended:
            run.finite = self._finite
            run.status = "running"
            run.problems.append(f"{LOG_NAME}: {NO_END}")
        return save_run(run, path, lambda doc, sidecar: self._columns.write_columns(doc, sidecar, b.defs))

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        elif issubclass(exc_type, KeyboardInterrupt):
            self.close("interrupted")
        else:
            self.close("failed")
        return False


__all__ = ["Recorder", "RunFileError", "histogram_counts"]
