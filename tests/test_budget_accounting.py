"""The budget counts what the callbacks take on the training thread: every callback hook and
``watch`` hook is timed from outside, and what the session's budget counted (``host_total``)
lies within that time (nothing counted twice) and covers nearly all of it (nothing left out:
the probe forward, the writes, ``step()``, the recorder's logging); each frame's device time is
counted too (``device_total``). Bounds are shares of the time measured, not durations: they
hold on a fast CPU and a slow one."""

import time

import pytest
import torch

import caliper_vk as cv
from caliper_vk.live.budget import Budget
from caliper_vk.record.watch import Watcher


def _timed(fn, spent: list, depth: list):
    """``fn`` timed from outside; a call inside another timed call (``watch`` measuring from its
    pre-step hook) is part of that call's time, not a span of its own."""
    def hook(*args, **kwargs):
        started = time.perf_counter()
        depth.append(fn)
        try:
            return fn(*args, **kwargs)
        finally:
            depth.pop()
            if not depth:
                spent.append(time.perf_counter() - started)
    return hook


def _check(train, callback, hooks, steps, monkeypatch):
    """Train with every hook of ``callback`` (``hooks``: its method names) and of ``watch`` timed,
    then compare with what the session's budget counted."""
    spent: list[float] = []
    depth: list = []
    # (watch measures the gradients from its pre-step hook, or, for opt.step(closure) as Lightning
    # calls it, after the closure has returned inside the step: _measure is timed where it runs alone)
    for cls, names in ((callback, hooks), (Watcher, ("_pre_step", "_post_step", "_measure"))):
        for name in names:
            monkeypatch.setattr(cls, name, _timed(getattr(cls, name), spent, depth))
    timestamps: list[float] = []
    executed = Budget.executed
    monkeypatch.setattr(Budget, "executed", lambda self, s: (timestamps.append(s), executed(self, s))[1])
    torch.manual_seed(0)
    with cv.Session(window=False, size=(320, 200), budget=0.5) as session:
        train(session)
        budget = session.budget
        assert session.frames >= 2 and len(timestamps) >= 2  # frames were drawn and their work timed
    hooks = sum(spent)
    assert len(spent) >= 3 * steps  # every step: the callback's hook(s) and watch's two
    # nothing counted twice: every span the budget counts lies inside one of the hooks
    assert budget.host_total <= hooks + 1e-6 * len(spent)
    # nothing left out: what is not counted is the few statements around the counted spans
    assert budget.host_total >= 0.9 * hooks, (budget.host_total, hooks)
    # each frame's device work counts, at least its timestamps
    assert budget.device_total >= sum(timestamps) - 1e-9


def test_the_lightning_callbacks_time_is_counted_once_and_whole(tmp_path, monkeypatch):
    pl = pytest.importorskip("pytorch_lightning", reason="pytorch-lightning is in requirements-dev.txt")
    from caliper_vk.integrations import lightning
    from test_integrations_lightning import QUIET, Tiny, loader

    def train(session):
        cb = lightning.CaliperCallback(outputs=["mlp.1"], attention=["attn"], embeddings="embed",
                                       run_dir=tmp_path / "run", session=session, record_every=2)
        trainer = pl.Trainer(callbacks=[cb], max_steps=12, val_check_interval=6, limit_val_batches=2,
                             num_sanity_val_steps=0, **QUIET)
        trainer.fit(Tiny(), loader(), loader(16))

    hooks = ("on_train_batch_start", "on_train_batch_end", "on_validation_end")
    _check(train, lightning.CaliperCallback, hooks, 12, monkeypatch)


def test_the_hugging_face_callbacks_time_is_counted_once_and_whole(tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers", reason="transformers is in requirements-dev.txt")
    from caliper_vk.integrations import hf
    from test_integrations_hf import Tokens, args, tiny_gpt2

    def train(session):
        cb = hf.CaliperCallback(outputs=["transformer.h.1.mlp"], embeddings="transformer.wte",
                                run_dir=tmp_path / "run", session=session, record_every=3)
        transformers.Trainer(model=tiny_gpt2(), args=args(tmp_path), train_dataset=Tokens(),
                             callbacks=[cb]).train()

    _check(train, hf.CaliperCallback, ("on_step_end", "on_log"), 6, monkeypatch)
