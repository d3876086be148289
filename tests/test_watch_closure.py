"""The gradient norms ``watch`` records are those of the gradients the optimizer step uses,
whatever the shape of the call: ``opt.step()`` after ``backward()``, ``opt.step(closure)``
(the closure runs forward and backward inside the step: Lightning does this every step),
an optimizer that calls its closure several times (L-BFGS), and gradient accumulation in the
Lightning and Hugging Face trainers. Each test measures the norm the step used itself (after
the closure, or in the framework's own hook) and compares it with the recorded one, step 1
included."""

import math

import pytest
import torch

import caliper_vk as cv
from caliper_vk.record import load_run


def global_norm(params) -> float:
    return math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in params if p.grad is not None))


def net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def data(seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(32, 8, generator=g), torch.randint(0, 4, (32,), generator=g)


def recorded(run_dir) -> dict[int, float]:
    m = load_run(run_dir).metrics["grad_norm/global"]
    return dict(zip(m.step.tolist(), m.value.tolist(), strict=True))


def assert_same(got: dict, used: dict):
    assert sorted(got) == sorted(used), (sorted(got), sorted(used))
    for step, norm in used.items():
        assert got[step] == pytest.approx(norm, rel=1e-4), (step, got[step], norm)


@pytest.mark.parametrize("positional", [False, True])
def test_a_step_with_a_closure_records_the_gradients_the_closure_made(tmp_path, positional):
    model, (x, y) = net(), data()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    rec = cv.Recorder(tmp_path / "run")
    cv.watch(model, opt, rec, histograms_every=None)
    used, losses = {}, []
    for step in range(1, 6):
        def closure(step=step):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            used[step] = global_norm(model.parameters())
            return loss
        out = opt.step(closure) if positional else opt.step(closure=closure)
        losses.append(out)
    rec.close()
    assert all(isinstance(v, torch.Tensor) for v in losses)  # the closure's loss comes back from step()
    assert_same(recorded(tmp_path / "run"), used)
    assert len(set(used.values())) == 5  # the gradients change every step: a late norm would differ


def test_an_optimizer_that_calls_its_closure_several_times_gets_every_call_once(tmp_path):
    """L-BFGS evaluates its closure once at the start of a step and again in its iterations:
    the recorded norm is the first evaluation's (the gradient the step starts from), and the
    closure runs exactly as often as it does without watch."""
    def run(watched: bool):
        model, (x, y) = net(), data()
        opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=3)
        rec = cv.Recorder(tmp_path / f"run{watched}")
        if watched:
            cv.watch(model, opt, rec, histograms_every=None)
        calls, first, returned = [], {}, []
        for step in range(1, 4):
            def closure(step=step):
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                calls.append(step)
                first.setdefault(step, global_norm(model.parameters()))
                return loss
            returned.append(float(opt.step(closure)))
        rec.close()
        return calls, first, returned

    calls, first, returned = run(watched=True)
    plain_calls, _, plain_returned = run(watched=False)
    assert calls == plain_calls and len(calls) > 3  # several evaluations per step, none added or lost
    assert returned == plain_returned  # the loss the optimizer returns is the closure's
    assert_same(recorded(tmp_path / "runTrue"), first)


def test_the_negative_control_measuring_before_the_closure_is_one_step_late(tmp_path):
    """What the tests above catch: norms read in a pre-step hook, before the step runs the
    closure, are the previous step's gradients (and step 1 has none)."""
    model, (x, y) = net(), data()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    seen, used = {}, {}

    def early(optimizer, args, kwargs):
        if any(p.grad is not None for p in model.parameters()):
            seen[len(used) + 1] = global_norm(model.parameters())

    opt.register_step_pre_hook(early)
    for step in range(1, 4):
        def closure(step=step):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            used[step] = global_norm(model.parameters())
            return loss
        opt.step(closure)
    assert 1 not in seen and seen[2] == pytest.approx(used[1]) and seen[2] != pytest.approx(used[2])


@pytest.mark.parametrize(("accumulate", "clip"), [(1, None), (2, None), (1, 0.05)])
def test_lightning_records_the_gradients_each_step_uses(tmp_path, accumulate, clip):
    """Lightning calls ``on_before_optimizer_step`` inside the closure, then clips
    (``gradient_clip_val``): the update uses the clipped gradients, and so do the norms."""
    pl = pytest.importorskip("pytorch_lightning", reason="pytorch-lightning is in requirements-dev.txt")
    from caliper_vk.integrations.lightning import CaliperCallback

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = net()

        def training_step(self, batch, idx):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=0.05)

    used = {}

    class Used(pl.Callback):  # Lightning calls it inside the closure, just before the update
        def on_before_optimizer_step(self, trainer, module, optimizer):
            used[trainer.global_step + 1] = global_norm(module.parameters())

    x, y = data()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    cb = CaliperCallback(outputs=(), attention=False, run_dir=tmp_path / "run", session=None, window=False,
                         budget=None)
    trainer = pl.Trainer(callbacks=[cb, Used()], max_steps=5, accumulate_grad_batches=accumulate,
                         gradient_clip_val=clip,
                         accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(Module(), loader)
    assert sorted(used) == [1, 2, 3, 4, 5]
    if clip is not None:
        assert all(v > clip for v in used.values())  # every step clipped
        used = {k: clip for k in used}  # (torch's clip_grad_norm_ scales to clip / (norm + 1e-6))
    assert_same(recorded(tmp_path / "run"), used)


def test_hf_trainer_with_gradient_accumulation_records_the_accumulated_gradient(tmp_path):
    """The Trainer clips (with a cap no norm reaches here) and reports ``grad_norm`` of the
    accumulated gradient the step uses: watch's global norm is the same number at every step."""
    transformers = pytest.importorskip("transformers", reason="transformers is in requirements-dev.txt")
    from caliper_vk.integrations.hf import CaliperCallback

    cfg = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=32, n_positions=8,
                                  bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 32, (32, 8), generator=g)
    dataset = [{"input_ids": t, "labels": t} for t in tokens]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=4, per_device_train_batch_size=4,
        gradient_accumulation_steps=2, max_grad_norm=1e6, logging_steps=1, save_strategy="no", report_to=[],
        use_cpu=True, disable_tqdm=True, dataloader_num_workers=0, learning_rate=1e-2)
    cb = CaliperCallback(attention=False, run_dir=tmp_path / "run", session=None, window=False, budget=None)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=dataset, callbacks=[cb])
    trainer.train()
    theirs = {h["step"]: float(h["grad_norm"]) for h in trainer.state.log_history if "grad_norm" in h}
    assert sorted(theirs) == [1, 2, 3, 4]
    assert_same(recorded(tmp_path / "run"), theirs)


def test_an_optimizer_that_never_calls_the_closure_is_measured_after_its_step(tmp_path):
    """A step given a closure it does not call (an optimizer of its own making): the gradients the
    caller made before the step are the ones it used, and the post-step hook measures them."""
    class Ignores(torch.optim.Optimizer):  # (not calling SGD.step: torch hooks a parent's step too)
        def __init__(self, params, lr):
            super().__init__(params, {"lr": lr})

        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    p.add_(p.grad, alpha=-group["lr"])

    model, (x, y) = net(), data()
    opt = Ignores(model.parameters(), lr=0.5)
    rec = cv.Recorder(tmp_path / "run")
    cv.watch(model, opt, rec, histograms_every=None)
    used, called = {}, []
    for step in range(1, 4):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        used[step] = global_norm(model.parameters())
        opt.step(lambda: called.append(1))
    rec.close()
    assert called == []
    assert_same(recorded(tmp_path / "run"), used)


def test_the_measurement_inside_the_step_is_counted_by_the_budget_and_the_closure_is_not(tmp_path,
                                                                                          monkeypatch):
    """The hooks' time is what the recording budget counts: with a closure, the measurement taken
    after it is the hooks' time, the closure's own forward and backward is the training's. A
    virtual clock: each norm computation takes 30 ms, each closure 400 ms."""
    import importlib
    import types

    watch_module = importlib.import_module("caliper_vk.record.watch")  # (the module, not the function)

    now = [0.0]
    monkeypatch.setattr(watch_module, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    norms = watch_module.devstats.norms

    def slow_norms(tensors):
        now[0] += 0.03
        return norms(tensors)

    monkeypatch.setattr(watch_module.devstats, "norms", slow_norms)
    model, (x, y) = net(), data()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    rec = cv.Recorder(tmp_path / "run")
    w = cv.watch(model, opt, rec, histograms_every=None, update_ratio=False, memory=False)
    for _ in range(3):
        def closure():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            now[0] += 0.4
        opt.step(closure)
    rec.close()
    assert w.budget.cheap == pytest.approx(0.06)  # the gradients' and the weights' norms; not the closure
