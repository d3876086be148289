"""watch() at scale: update norms from the optimizer's state (checked against the realised update), no
model copy or float64 copy per step, no host read-back on the step, and the recording budget thinning
the expensive records out loudly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from caliper_vk.record import Recorder, load_run, watch
from caliper_vk.record.watch import RecordBudget

OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1),
    "sgd-momentum-wd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01),
    "sgd-nesterov-wd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.05),
    "sgd-wd-maximize": lambda p: torch.optim.SGD(p, lr=0.05, weight_decay=0.1, maximize=True),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.01),
    "adamw-amsgrad": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1, amsgrad=True),
    "rmsprop (snapshots)": lambda p: torch.optim.RMSprop(p, lr=0.01),
}


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def _batch():
    g = torch.Generator().manual_seed(1)
    return torch.randn(64, 6, generator=g), torch.randint(0, 3, (64,), generator=g)


@pytest.mark.parametrize("kind", list(OPTIMIZERS))
def test_update_ratio_from_the_optimizer_state_matches_the_realised_update(tmp_path, kind):
    model, twin = _model(), _model()
    opt, twin_opt = OPTIMIZERS[kind](model.parameters()), OPTIMIZERS[kind](twin.parameters())
    rec = Recorder(tmp_path / "run")
    watch(model, opt, rec, histograms_every=None, update_ratio_every=3, budget=None)
    x, y = _batch()
    truth = {}
    for step in range(1, 10):
        twin_opt.zero_grad()
        torch.nn.functional.cross_entropy(twin(x), y).backward()
        twin_opt.step()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        before = [p.detach().double().clone() for p in model.parameters()]
        opt.step()
        after = [p.detach().double() for p in model.parameters()]
        num = sum(float(((a - b) ** 2).sum()) for a, b in zip(after, before, strict=True)) ** 0.5
        truth[step] = num / sum(float((a ** 2).sum()) for a in after) ** 0.5
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):  # watching changed nothing
        assert torch.equal(a, b)
    rec.close()
    s = load_run(tmp_path / "run").metrics["update_ratio/global"]
    expected_steps = [3, 6, 9] if "snapshots" in kind else list(range(1, 10))
    assert s.step.tolist() == expected_steps
    np.testing.assert_allclose(s.value, [truth[k] for k in expected_steps], rtol=2e-4)


class _Allocations(TorchDispatchMode):
    """Every op's outputs: (op, dtype, elements) of each tensor an op makes."""

    def __init__(self):
        super().__init__()
        self.made: list[tuple[str, torch.dtype, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor):
                self.made.append((str(func), t.dtype, t.numel()))
        return out


@pytest.mark.parametrize(("kind", "closure"), [("sgd-momentum-wd", False), ("adamw-amsgrad", False),
                                               ("adamw-amsgrad", True)])
def test_a_watched_step_makes_no_model_copy_no_float64_copy_and_reads_nothing_back(tmp_path, kind, closure,
                                                                                   monkeypatch):
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
    opt = OPTIMIZERS[kind](model.parameters())
    rec = Recorder(tmp_path / "run")
    watch(model, opt, rec, histograms_every=2, budget=None)
    x = torch.randn(8, 64)
    smallest = min(p.numel() for p in model.parameters() if p.ndim == 2)
    reads = []
    for _ in range(2):  # the first steps make the optimizer's state
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    # Adam's step counters are host tensors by design (torch reads them itself): not device values
    counters = {id(s["step"]) for s in opt.state.values() if "step" in s}
    for name in ("item", "tolist", "cpu", "__float__"):  # a host read of a device value: a wait
        original = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name, lambda self, *a, _o=original, _n=name, **k: (
            id(self) in counters or reads.append(_n), _o(self, *a, **k))[1])
    def forward_backward():
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        return loss

    with _Allocations() as seen:
        for _ in range(2):
            if closure:  # (watch measures after the closure, inside the step)
                loss = opt.step(forward_backward)
            else:
                loss = forward_backward()
                opt.step()
            rec.log(train_loss=loss)
    monkeypatch.undo()
    wide = [m for m in seen.made if m[1] == torch.float64 and m[2] >= smallest]
    clones = [m for m in seen.made if ("clone" in m[0] or "copy" in m[0]) and m[2] >= smallest]
    assert not wide, f"parameter-sized float64 tensors made on the step: {wide[:5]}"
    assert not clones, f"parameter-sized copies made on the step: {clones[:5]}"
    assert reads == [], f"host reads of tensors on the step: {reads}"
    assert len(seen.made) > 20  # the mode saw the step's ops
    rec.close()
    run = load_run(tmp_path / "run")
    assert run.metrics["train/loss"].step.tolist() == [3, 4]  # logged tensors arrive, at their step
    assert run.metrics["update_ratio/global"].step.tolist() == [1, 2, 3, 4]
    assert [f.step for f in run.histograms["weights/0.weight"]] == [0, 2, 4]


def test_the_old_float64_copy_is_what_the_counting_catches():
    """Negative control: a float64 norm of a weight is a parameter-sized float64 tensor."""
    w = torch.randn(256, 64)
    with _Allocations() as seen:
        torch.linalg.vector_norm(w.double())
    assert [m for m in seen.made if m[1] == torch.float64 and m[2] >= w.numel()]


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_record_budget_thins_the_expensive_records_to_a_stated_interval():
    clock = _Clock()
    b = RecordBudget(0.05, clock=clock)
    changes = []
    for step in range(1, 201):
        clock.t += 0.100  # a 100 ms training step
        b.spent(0.001, 0.030 if b.due(step) else None)  # 1 ms of scalars, +30 ms for update ratios
        if b.stepped():
            changes.append((step, b.every))
    # 1 ms + 30 ms / k <= 5 ms: k >= 7.5, the next of 1, 2, 5, 10, ...: 10
    assert changes and changes[-1][1] == 10 and b.every == 10
    assert "every 10 steps (≤5%" in b.label()
    assert RecordBudget(None).label() is None


def test_watch_records_when_it_thins_out(tmp_path, capsys):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rec = Recorder(tmp_path / "run")
    w = watch(model, opt, rec, histograms_every=None, budget=0.05)
    clock = _Clock()
    w.budget.clock = clock
    x, y = _batch()
    for step in range(1, 61):
        clock.t += 0.001  # training steps of 1 ms: recording costs more than 5% of that
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        w.budget.spent(0.0, 0.05 if w.budget.due(step) else None)
    rec.close()
    run = load_run(tmp_path / "run")
    every = run.metrics["record/expensive_every"]
    assert len(every) >= 1 and every.value[-1] > 1
    assert "recorded as record/expensive_every" in capsys.readouterr().err
    assert "grad_norm/global" in run.metrics and len(run.metrics["grad_norm/global"]) == 60  # scalars kept
    assert len(run.metrics["update_ratio/global"]) < 60


def test_on_the_emulated_discrete_device_a_step_makes_no_blocking_transfer(tmp_path):
    """The counting seam of caliper_vk.exporters.discrete: the weights and the loss live on the emulated
    device; a watched step with rec.log(train_loss=loss) copies to the host only without waiting."""
    from caliper_vk.exporters import discrete

    torch.manual_seed(0)
    w1 = torch.nn.Parameter(discrete.to_device(torch.randn(6, 16) * 0.3))
    w2 = torch.nn.Parameter(discrete.to_device(torch.randn(16, 3) * 0.3))
    model = torch.nn.Module()
    model.w1, model.w2 = w1, w2
    x = discrete.to_device(torch.randn(32, 6))
    with discrete.emulate():
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        rec = Recorder(tmp_path / "run")
        watch(model, opt, rec, histograms_every=1, budget=None)
        for _ in range(3):
            with discrete.transfers() as t:
                opt.zero_grad()
                loss = (x @ w1).relu().matmul(w2).square().mean()
                loss.backward()
                opt.step()
                rec.log(train_loss=loss)
            assert t.blocking == 0, t.events  # nothing on the step waits for the device
            assert t.asynchronous >= 1  # the loss (and the weights' statistics) copied without waiting
        with discrete.transfers() as old:
            loss.item()  # negative control: what Recorder.log did before
        assert old.blocking == 1
        rec.close()
    run = load_run(tmp_path / "run")
    assert run.metrics["train/loss"].step.tolist() == [1, 2, 3]
    assert run.metrics["weight_norm/w1"].step.tolist() == [1, 2, 3] and len(run.histograms["weights/w2"]) == 4
