"""What the example training scripts share: determinism, the digits split, evaluation, and scrubbing.

Determinism. Every script runs inside :func:`deterministic`: one intra-op
thread (a parallel reduction may add in a different order with a different
thread count), ``torch.use_deterministic_algorithms(True)``, and explicit
``torch.Generator`` objects for initialisation and shuffling, so two runs of a
script in the same environment give bit-identical training values. Another
CPU, BLAS build or torch version may round differently; the values then agree
to float32 precision at first and may drift apart over many updates.

What of a run is *not* reproducible: ``time/*``, ``throughput/*``,
``memory/rss_bytes`` and the elapsed-time coordinate are measurements of the
machine that generated the run, and :func:`scrub` leaves them as they were.

Scrubbing. A ``Recorder`` stores the host name, the platform string, the
process id and ``argv`` (which holds an absolute path when a script runs with
``python -m``). Bundled runs are published files, so :func:`scrub` replaces
``meta.host`` with the Python and torch versions, torch's CPU capability
(the instruction set its kernels use, e.g. ``AVX2``) and a relative command line,
and deletes ``log.jsonl`` (``run.json`` is the complete export of it).
"""

from __future__ import annotations

import contextlib
import json
import math
import platform
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional

DIGIT_CLASSES = [str(i) for i in range(10)]


@contextlib.contextmanager
def deterministic():
    """One thread and deterministic kernels for the block; the previous settings come back after."""
    threads = torch.get_num_threads()
    was = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was)
        torch.set_num_threads(threads)


@dataclass(frozen=True)
class Split:
    """A labelled data split as float32 inputs and int64 targets."""

    x: torch.Tensor
    y: torch.Tensor

    def __len__(self) -> int:
        return len(self.y)


def digits_split(val_size: int = 360, seed: int = 0) -> tuple[Split, Split]:
    """scikit-learn's 1,797 8x8 digits (pixels scaled to [0, 1]), shuffled by ``seed`` and split
    into a training split and a validation split of ``val_size`` examples."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(y))
    x = torch.from_numpy((x[order] / 16.0).astype(np.float32))
    y = torch.from_numpy(y[order].astype(np.int64))
    return Split(x[val_size:], y[val_size:]), Split(x[:val_size], y[:val_size])


def per_class(split: Split, k: int) -> Split:
    """The first ``k`` examples of each class of ``split``, in class order."""
    idx = torch.cat([torch.nonzero(split.y == c).flatten()[:k] for c in range(int(split.y.max()) + 1)])
    return Split(split.x[idx], split.y[idx])


def batches(n: int, size: int, generator: torch.Generator):
    """The index batches of one epoch over ``n`` examples in a shuffled order (the last may be short)."""
    order = torch.randperm(n, generator=generator)
    return [order[i:i + size] for i in range(0, n, size)]


def steps_per_epoch(n: int, size: int) -> int:
    return math.ceil(n / size)


def train_loop(rec, watcher, model, opt, *, seed: int, epochs: int, stop_after: int | None, n: int,
               batch: int, loss_of, validate, on_step=None, sched=None, clip: bool = False,
               snapshot_epochs=(), out_dir: Path | None = None) -> Path:
    """The example runs' training loop: validate at step 0, then per epoch shuffled batches of
    ``n`` examples (``loss_of(idx)`` gives the loss; clipping through the watcher when ``clip``;
    ``sched`` stepped per update), the training loss logged after each update, validation and
    the epoch's end recorded, snapshots saved at ``snapshot_epochs``. Returns ``run.json``."""
    validate()
    gen = torch.Generator().manual_seed(seed + 1)
    last = epochs if stop_after is None else min(epochs, stop_after)
    for epoch in range(1, last + 1):
        for idx in batches(n, batch, gen):
            loss = loss_of(idx)
            opt.zero_grad()
            loss.backward()
            if clip:
                watcher.clip_grad_norm_()
            opt.step()
            if sched is not None:
                sched.step()
            rec.log({"train/loss": loss})
            if on_step:
                on_step(rec.steps_per_epoch * last)
        validate()
        rec.end_epoch()
        if epoch in snapshot_epochs:
            rec.save(model, Path(out_dir) / "snapshots" / f"epoch{epoch:03d}.pt")
    watcher.remove()
    return rec.close()


def evaluate(model, split: Split, watcher, batch: int = 512) -> tuple[float, float, torch.Tensor]:
    """Mean cross-entropy, accuracy and predictions on ``split`` in one validation pass
    (``watcher.validation()``: eval mode, no gradients, activation statistics recorded)."""
    total, correct, preds = 0.0, 0, []
    with watcher.validation():
        for i in range(0, len(split), batch):
            x, y = split.x[i:i + batch], split.y[i:i + batch]
            logits = model(x)
            logits = logits.reshape(-1, logits.shape[-1])
            y = y.reshape(-1)
            total += float(functional.cross_entropy(logits, y, reduction="sum"))
            p = logits.argmax(-1)
            correct += int((p == y).sum())
            preds.append(p)
    count = split.y.numel()
    return total / count, correct / count, torch.cat(preds)


def define_common(rec, loss_unit: str = "nats") -> None:
    """Units and meanings of the metrics every example script logs itself."""
    rec.define("train/loss", unit=loss_unit, goal="min",
               description="cross-entropy of the training mini-batch (mean over its examples), "
                           "before the update of that step")
    rec.define("val/loss", unit=loss_unit, goal="min",
               description="mean cross-entropy over the whole validation split, after the step's update")
    rec.define("val/accuracy", unit="fraction", goal="max",
               description="correct predictions / evaluated validation examples")


def scrub(run_dir: Path, command: str) -> Path:
    """Make a finished run's files publishable: ``meta.host`` without host name, pid or absolute
    paths; ``log.jsonl`` removed. Returns the ``run.json`` path."""
    path = Path(run_dir) / "run.json"
    doc = json.loads(path.read_text())
    host = doc.get("meta", {}).get("host", {})
    doc["meta"]["host"] = {"python": host.get("python", platform.python_version()),
                           "torch": torch.__version__,
                           "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                           "argv": command.split(),
                           "scrubbed": "hostname, platform, pid and argv paths removed by "
                                       "caliper_vk.runs.common.scrub"}
    text = json.dumps(doc, separators=(",", ":"), allow_nan=False)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    (Path(run_dir) / "log.jsonl").unlink(missing_ok=True)
    return path
