"""A small CNN on the 8x8 digits: kernels and feature maps as array probes, two named parameter groups.

``image → features(conv1 → relu1 → pool1 → conv2 → relu2 → pool2) → flatten → head``:
8 then 16 channels of 3x3 kernels, 2x2 max pooling (8x8 → 4x4 → 2x2), and a
linear head on the 64 pooled values. Adam with two named parameter groups,
``features`` and ``head``, the head's rate 5x the features' rate, both halved
after half of the epochs (a step schedule), so the ``lr/features`` and
``lr/head`` series differ and both step down.

Beyond what every example run records (see :mod:`.digits_mlp`), after every
epoch and at step 0 it records:

- ``kernels/conv1`` and ``kernels/conv2``: the kernels themselves (parameter
  arrays, (8, 1, 3, 3) and (16, 8, 3, 3)), identified by module;
- ``feature_map/features.relu1`` and ``feature_map/features.relu2``: the
  post-ReLU feature maps, (1, 8, 8, 8) and (1, 16, 4, 4), of one fixed
  validation digit, identified by module and example (``watcher.capture``);
- ``input``: that digit itself (8x8), once, so a viewer can show what the
  maps respond to.

Activation statistics count a channel as a unit: a dead channel is zero at
every position of every validation example.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional

from ..record import Recorder, watch
from .common import DIGIT_CLASSES, define_common, deterministic, digits_split, evaluate, train_loop
from .common import steps_per_epoch as count_steps


@dataclass(frozen=True)
class CNNConfig:
    lr: float = 2e-3
    head_lr_factor: float = 5.0
    epochs: int = 10
    batch: int = 64
    seed: int = 0
    probe_index: int = 0  # the validation example whose feature maps are recorded
    snapshot_epochs: tuple[int, ...] = (1, 5, 10)


def make_cnn(seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    features = nn.Sequential(OrderedDict([
        ("conv1", nn.Conv2d(1, 8, 3, padding=1)), ("relu1", nn.ReLU()), ("pool1", nn.MaxPool2d(2)),
        ("conv2", nn.Conv2d(8, 16, 3, padding=1)), ("relu2", nn.ReLU()), ("pool2", nn.MaxPool2d(2)),
    ]))
    return nn.Sequential(OrderedDict([
        ("image", nn.Unflatten(1, (1, 8, 8))), ("features", features), ("flatten", nn.Flatten()),
        ("head", nn.Linear(16 * 2 * 2, 10)),
    ]))


def train(out_dir, cfg: CNNConfig = CNNConfig(), name: str = "digits_cnn", stop_after: int | None = None,
          on_step=None) -> Path:
    """Train and record the CNN into ``out_dir``; returns its ``run.json`` (``stop_after`` and
    ``on_step`` as in :func:`.digits_mlp.train`)."""
    out_dir = Path(out_dir)
    with deterministic():
        train_split, val = digits_split()
        model = make_cnn(cfg.seed)
        groups = [{"name": "features", "params": list(model.features.parameters()), "lr": cfg.lr},
                  {"name": "head", "params": list(model.head.parameters()), "lr": cfg.lr * cfg.head_lr_factor}]
        opt = torch.optim.Adam(groups)
        spe = count_steps(len(train_split), cfg.batch)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=spe * (cfg.epochs // 2), gamma=0.5)
        label = int(val.y[cfg.probe_index])
        example = f"validation example {cfg.probe_index} (a {label})"
        config = {**asdict(cfg), "model": "cnn conv(1->8) pool conv(8->16) pool linear(64->10)",
                  "optimizer": "Adam, groups features/head, StepLR x0.5 at half the epochs",
                  "data": f"sklearn digits: {len(train_split)} training, {len(val)} validation examples",
                  "parameters": sum(p.numel() for p in model.parameters())}
        rec = Recorder(out_dir, name=name, config=config, steps_per_epoch=spe, overwrite=True)
        define_common(rec)
        w = watch(model, opt, rec, histograms_every=spe, budget=None,  # every step, on any machine
                  activations=["features.relu1", "features.relu2"])
        probe_x = val.x[cfg.probe_index:cfg.probe_index + 1]
        rec.probe("input", probe_x.reshape(8, 8), example=example, kind="input")

        def validate():
            loss, acc, pred = evaluate(model, val, w)
            rec.log({"val/loss": loss, "val/accuracy": acc})
            rec.confusion("val/confusion", targets=val.y, predictions=pred, num_classes=10,
                          classes=DIGIT_CLASSES)
            for conv in ("conv1", "conv2"):
                rec.probe(f"kernels/{conv}", getattr(model.features, conv).weight, module=f"features.{conv}",
                          kind="kernel")
            w.capture(probe_x, ["features.relu1", "features.relu2"], name="feature_map", example_name=example)

        return train_loop(
            rec, w, model, opt, seed=cfg.seed, epochs=cfg.epochs, stop_after=stop_after, n=len(train_split),
            batch=cfg.batch, loss_of=lambda idx: functional.cross_entropy(model(train_split.x[idx]),
                                                                          train_split.y[idx]),
            validate=validate, on_step=on_step, sched=sched, snapshot_epochs=cfg.snapshot_epochs,
            out_dir=out_dir)
