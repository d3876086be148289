"""A digits MLP with named ReLUs (``relu1``, ``relu2``), and the sweep of four variants built on it.

The model is ``fc1 → relu1 → fc2 → relu2 → out`` on scikit-learn's 8x8 digits
(64 inputs, 10 classes), trained with Adam on mini-batches of 64. Each run
records, through ``Recorder`` and ``watch``:

- the training loss at every step; the validation loss, accuracy and a
  confusion matrix (classes "0".."9") after every epoch and at step 0;
- per-parameter and global gradient and weight norms, update ratios, the
  learning rate, timing and memory at every step (``watch``);
- weight histograms (12 bins over [-3, 3]) at step 0 and after every epoch;
- activation statistics and dead units of ``relu1`` and ``relu2`` from each
  validation forward;
- with ``hidden_probe``, the ``relu1``/``relu2`` activations of a fixed probe
  batch (the first two validation examples of each class) after every epoch;
- parameter snapshots (``rec.save``) at the epochs in ``snapshot_epochs``.

The sweep varies one setting each: a learning rate of 1e-5, a width of 2, a
width of 256 trained on 40 examples (4 per class), and a learning rate of 1.
The later examples: a fine-tune that starts from ``digits_mlp``'s epoch-5
snapshot (``Recorder(parent=, parent_step=)``), the same rate from scratch,
and a run whose loss switches to label smoothing after epoch 5
(``Recorder.event``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional

from ..record import Recorder, watch
from .common import DIGIT_CLASSES, define_common, deterministic, digits_split, evaluate, per_class, train_loop
from .common import steps_per_epoch as count_steps


@dataclass(frozen=True)
class MLPConfig:
    width: int = 32
    lr: float = 3e-3
    epochs: int = 20
    batch: int = 64
    train_per_class: int | None = None  # None: the whole training split (1,437 examples)
    seed: int = 0
    hidden_probe: bool = True
    snapshot_epochs: tuple[int, ...] = ()
    # a loss switch partway through: label smoothing from the end of this epoch on (an event)
    smoothing_after_epoch: int | None = None
    label_smoothing: float = 0.0
    # a fine-tune: start from this example run's snapshot of that epoch (lineage: parent=)
    parent: str | None = None
    parent_epoch: int | None = None


# settings of the later examples, recorded in a run's config only when set (the earlier runs'
# configs stay as they were recorded)
_OPTIONAL = {"smoothing_after_epoch": None, "label_smoothing": 0.0, "parent": None, "parent_epoch": None}


def make_mlp(width: int, seed: int) -> nn.Sequential:
    """``fc1 → relu1 → fc2 → relu2 → out``: named modules, so their records carry those names."""
    torch.manual_seed(seed)
    return nn.Sequential(OrderedDict([
        ("fc1", nn.Linear(64, width)), ("relu1", nn.ReLU()),
        ("fc2", nn.Linear(width, width)), ("relu2", nn.ReLU()),
        ("out", nn.Linear(width, 10)),
    ]))


def train(out_dir, cfg: MLPConfig, name: str, stop_after: int | None = None, on_step=None) -> Path:
    """Train and record one run into ``out_dir``; returns its ``run.json``.

    ``stop_after`` ends the run after that many epochs (everything recorded is
    then a prefix of the full run: same seeds, same schedule). ``on_step`` is
    called after every optimizer step with the number of steps the run will
    take (for a progress bar).
    """
    out_dir = Path(out_dir)
    with deterministic():
        train_split, val = digits_split()
        if cfg.train_per_class:
            train_split = per_class(train_split, cfg.train_per_class)
        probe = per_class(val, 2)
        model = make_mlp(cfg.width, cfg.seed)
        spe = count_steps(len(train_split), cfg.batch)
        lineage = {}
        if cfg.parent is not None:  # the parent's saved parameters at the end of parent_epoch
            parent_dir = out_dir.parent / cfg.parent
            snapshot = parent_dir / "snapshots" / f"epoch{cfg.parent_epoch:03d}.pt"
            if not snapshot.is_file():
                raise FileNotFoundError(f"{snapshot}: the parent run's snapshot is missing; regenerate the "
                                        f"parent first: python -m caliper_vk.runs --only {cfg.parent}")
            model.load_state_dict(torch.load(snapshot, weights_only=True))
            lineage = {"parent": parent_dir, "parent_step": cfg.parent_epoch * spe}
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        settings = {k: v for k, v in asdict(cfg).items() if k not in _OPTIONAL or v != _OPTIONAL[k]}
        config = {**settings, "model": "mlp 64-w-w-10 (fc1, relu1, fc2, relu2, out)", "optimizer": "Adam",
                  "data": f"sklearn digits: {len(train_split)} training, {len(val)} validation examples",
                  "parameters": sum(p.numel() for p in model.parameters())}
        rec = Recorder(out_dir, name=name, config=config, steps_per_epoch=spe, overwrite=True, **lineage)
        define_common(rec)
        w = watch(model, opt, rec, histograms_every=spe, activations=["relu1", "relu2"])

        def validate():
            loss, acc, pred = evaluate(model, val, w)
            rec.log({"val/loss": loss, "val/accuracy": acc})
            rec.confusion("val/confusion", targets=val.y, predictions=pred, num_classes=10,
                          classes=DIGIT_CLASSES)
            if cfg.hidden_probe:
                w.capture(probe.x, ["relu1", "relu2"], name="hidden",
                          example_name="validation examples 2 per class (classes 0,0,1,1,...,9,9)")

        switch = None if cfg.smoothing_after_epoch is None else cfg.smoothing_after_epoch * spe

        def loss_of(idx):
            smoothing = 0.0
            if switch is not None and rec.step >= switch:
                if rec.step == switch:  # the first update of the new loss: said where it happens
                    rec.event(f"loss switched: cross-entropy -> cross-entropy with label smoothing "
                              f"{cfg.label_smoothing:g} (train/loss is the smoothed loss from here on; "
                              f"val/loss stays plain cross-entropy)")
                smoothing = cfg.label_smoothing
            return functional.cross_entropy(model(train_split.x[idx]), train_split.y[idx],
                                            label_smoothing=smoothing)

        return train_loop(
            rec, w, model, opt, seed=cfg.seed, epochs=cfg.epochs, stop_after=stop_after, n=len(train_split),
            batch=cfg.batch, loss_of=loss_of,
            validate=validate, on_step=on_step, snapshot_epochs=cfg.snapshot_epochs, out_dir=out_dir)


MAIN = MLPConfig(epochs=15, snapshot_epochs=(1, 5, 10, 15))
SWEEP = {  # hidden-state probes only where they are small: the 2-unit run's are points in a plane
    "sweep_lr1e-5": MLPConfig(lr=1e-5, epochs=10, batch=128, hidden_probe=False),
    "sweep_width2": MLPConfig(width=2, epochs=10, batch=128),
    "sweep_width256_n40": MLPConfig(width=256, train_per_class=4, batch=8, epochs=25, hidden_probe=False),
    "sweep_lr1": MLPConfig(lr=1.0, epochs=10, batch=128, hidden_probe=False),
}
# lineage and events (docs/dashboard.md): a fine-tune of digits_mlp from its epoch-5 snapshot at a
# lower rate, the same rate from scratch, and a run whose loss switches to label smoothing
LATER = {
    "finetune_from_mlp": MLPConfig(lr=1e-3, epochs=5, hidden_probe=False, parent="digits_mlp", parent_epoch=5),
    "scratch_lr1e-3": MLPConfig(lr=1e-3, epochs=10, hidden_probe=False),
    "loss_switch": MLPConfig(epochs=10, hidden_probe=False, smoothing_after_epoch=5, label_smoothing=0.2),
}
