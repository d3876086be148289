"""``Recorder``: writes a training run to an append-only log and exports ``run.json``.

A run lives in a directory: ``log.jsonl`` grows while training runs (see
:mod:`.log` for why a kill loses at most the record being written) and
``run.json`` is written from the log on ``close()`` or ``export()``. Nothing is
kept only in memory: ``run.json`` is always rebuilt by reading the log back,
so the file a killed run leaves and the file a finished run leaves are read by
the same code.

Step numbering: step ``k`` is the state after the ``k``-th optimizer update;
step 0 is the initial model. Values logged between update ``k`` and update
``k+1`` belong to step ``k`` (log the training loss after ``optimizer.step()``).
"""

from __future__ import annotations

import math
import os
import platform
import socket
import sys
import time
from pathlib import Path

import numpy as np

from .._arrays import to_host
from .log import LogWriter, RunFileError, encode_array

LOG_NAME = "log.jsonl"
RUN_NAME = "run.json"
STATUSES = ("running", "complete", "nonfinite", "interrupted", "failed")


def _value(v, name: str) -> float:
    if hasattr(v, "detach"):  # a torch tensor
        if v.numel() != 1:
            raise ValueError(f"{name}: a logged value must be one number, got a tensor of shape "
                             f"{tuple(v.shape)}; log v.mean() or a histogram instead")
        v = v.detach().float().cpu().item()
    if isinstance(v, np.ndarray):
        if v.size != 1:
            raise ValueError(f"{name}: a logged value must be one number, got an array of shape {v.shape}")
        v = v.item()
    if isinstance(v, bool | int | float | np.generic):
        return float(v)
    raise TypeError(f"{name}: a logged value must be a number or a one-element tensor, "
                    f"not {type(v).__name__}")


def _numpy(a) -> np.ndarray:
    return to_host(a, "value") if hasattr(a, "detach") else np.asarray(a)


def _lineage(run_dir: Path, parent, parent_step) -> dict | None:
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


def histogram_counts(values, bins: int, lo: float, hi: float) -> dict:
    """Counts of ``values`` in ``bins`` equal bins over ``[lo, hi]`` and the counts left out.

    ``bin = floor((v - lo) * bins / (hi - lo))`` in float64, the last bin
    closed; values below ``lo``, above ``hi``, NaN and ±Inf are counted apart and
    are in no bin. Works on a torch tensor on its own device (only the counts
    travel to the host) or on anything numpy can read.
    """
    if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo) or bins < 1:
        raise ValueError(f"histogram range must be finite with lo < hi and bins >= 1, got [{lo}, {hi}], {bins}")
    if hasattr(values, "detach"):
        import torch

        x = values.detach().reshape(-1).double()
        nan = int(torch.isnan(x).sum())
        inf = int(torch.isinf(x).sum())
        x = x[torch.isfinite(x)]
        below, above = int((x < lo).sum()), int((x > hi).sum())
        x = x[(x >= lo) & (x <= hi)]
        idx = torch.clamp(torch.floor((x - lo) * (bins / (hi - lo))).long(), max=bins - 1)
        counts = torch.bincount(idx, minlength=bins).cpu().numpy()
    else:
        x = np.asarray(values, dtype=np.float64).reshape(-1)
        nan, inf = int(np.isnan(x).sum()), int(np.isinf(x).sum())
        x = x[np.isfinite(x)]
        below, above = int((x < lo).sum()), int((x > hi).sum())
        x = x[(x >= lo) & (x <= hi)]
        idx = np.minimum(np.floor((x - lo) * (bins / (hi - lo))).astype(np.int64), bins - 1)
        counts = np.bincount(idx, minlength=bins)
    return {"lo": float(lo), "hi": float(hi), "counts": counts.astype(np.int64),
            "below": below, "above": above, "nan": nan, "inf": inf}


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
        self._log.write({"t": "define", "name": name, "unit": unit, "description": description, "goal": goal})

    def log(self, values: dict | None = None, /, *, step: int | None = None, epoch: float | None = None,
            placeholder: tuple = (), **named) -> None:
        """Record scalars at ``step`` (default: the current step).

        ``rec.log(train_loss=loss)`` or ``rec.log({"val/psnr": psnr})``: keyword
        names have their first ``_`` turned into ``/`` (``train_loss`` →
        ``train/loss``). Tensors are read with ``.item()``. ``placeholder``
        names values that are not measurements (a step-0 gradient norm
        stored as 0 before any gradient existed); they are kept but marked.
        """
        merged = {}
        for k, v in (values or {}).items():
            merged[str(k)] = _value(v, str(k))
        for k, v in named.items():
            merged[k.replace("_", "/", 1) if "/" not in k else k] = _value(v, k)
        if not merged:
            return
        step, epoch = self._at(step, epoch)
        for k, v in merged.items():
            if not math.isfinite(v):
                self._finite = False
                if k.endswith("loss"):
                    self._nonfinite_loss = True
        if "train/loss" in merged and math.isfinite(merged["train/loss"]):
            self._epoch_losses.append(merged["train/loss"])
        record = {"t": "scalars", "step": step, "epoch": epoch, "time": time.time() - self._t0,
                  "values": merged}
        bad = [p for p in placeholder if p not in merged]
        if bad:
            raise ValueError(f"placeholder names {bad} are not among the logged values {sorted(merged)}")
        if placeholder:
            record["placeholder"] = list(placeholder)
        self._log.write(record)
        if self.best_metric in merged:
            self._track_best(merged[self.best_metric], step, epoch)

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
        self._log.write({"t": "scalars", "step": step, "epoch": epoch, "time": time.time() - self._t0,
                         "values": {"plateau/count": float(self._plateau)}})

    def end_epoch(self, epoch: int | None = None) -> None:
        """Close an epoch: records ``train/loss_epoch_mean``, the mean of the step losses
        recorded during it (labelled as such: it is not a whole-pass average unless
        every step's loss was logged)."""
        self._epoch_index = self._epoch_index + 1 if epoch is None else int(epoch)
        if self._epoch_losses:
            mean = float(np.mean(self._epoch_losses))
            if "train/loss_epoch_mean" not in self._defined:
                self.define("train/loss_epoch_mean", description="mean of the recorded step losses of "
                            "the epoch (not a whole-pass average unless every step was recorded)", goal="min")
            self.log({"train/loss_epoch_mean": mean})
            self._log.write({"t": "epoch", "index": self._epoch_index, "step": self._step,
                             "recorded_steps": len(self._epoch_losses)})
        self._epoch_losses = []

    # -- arrays -----------------------------------------------------------------
    def histogram(self, name: str, values, bins: int = 12, value_range=(-3.0, 3.0),
                  step: int | None = None) -> dict:
        """Record a histogram of ``values`` in fixed bins; out-of-range and non-finite values
        are counted, not dropped silently. Returns the counts."""
        h = histogram_counts(values, bins, float(value_range[0]), float(value_range[1]))
        step, epoch = self._at(step, None)
        self._log.write({"t": "hist", "step": step, "epoch": epoch, "name": name, "lo": h["lo"], "hi": h["hi"],
                         "counts": encode_array(h["counts"]), "below": h["below"], "above": h["above"],
                         "nan": h["nan"], "inf": h["inf"]})
        return h

    def probe(self, name: str, array, module: str | None = None, example: str | None = None,
              kind: str | None = None, step: int | None = None) -> None:
        """Record an array (a kernel, a feature map, a hidden state, attention weights) with its
        identity: the module it came from and the input example it was computed on."""
        a = _numpy(array)
        if a.size > 1 << 24:
            raise ValueError(f"probe {name!r}: {a.size} elements is too many to record each step "
                             f"(at most {1 << 24}); record a slice")
        step, epoch = self._at(step, None)
        self._log.write({"t": "array", "step": step, "epoch": epoch, "name": name, "module": module,
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
        self._log.write({"t": "confusion", "step": step, "epoch": epoch, "name": name,
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
        self._log.write({"t": "event", "step": step, "epoch": epoch, "text": text.strip()[:500]})

    # -- saved states and status ----------------------------------------------------
    def snapshot(self, key: str, step: int | None = None) -> None:
        """Record that the parameters at ``step`` were saved under ``key`` (a path or a name)."""
        step, epoch = self._at(step, None)
        self._log.write({"t": "snapshot", "step": step, "epoch": epoch, "key": str(key)})

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
        if status is None:
            status = "nonfinite" if self._nonfinite_loss else "complete"
        if status not in STATUSES[1:]:
            raise ValueError(f"status must be one of {', '.join(STATUSES[1:])}, got {status!r}")
        self._status = status
        self._log.write({"t": "end", "step": self._step, "status": status, "finite": self._finite,
                         "time": time.time() - self._t0})
        self._log.close()
        return self.export()

    def export(self, path=None) -> Path:
        """Write ``run.json`` from the log as it is now (also while the run goes on)."""
        from .run import load_run

        if not self._log.closed:
            self._log.sync()
        run = load_run(self.dir / LOG_NAME)
        return run.save(path or self.dir / RUN_NAME)

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
