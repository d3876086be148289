"""watch() on wrapped models: DistributedDataParallel (gloo, world size 1, in process) and
torch.compile (backend "eager": dynamo traces the module and its hooks without needing a C++
compiler for inductor). Hooks go on the original module; names are the original's."""

import pytest
import torch
import torch.distributed as dist

import caliper_vk as cv
from caliper_vk.record import load_run
from caliper_vk.record.watch import unwrap


def net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def train(model, params, run_dir, steps=4):
    opt = torch.optim.SGD(params, lr=0.1)
    rec = cv.Recorder(run_dir)
    w = cv.watch(model, opt, rec, activations=["1"], histograms_every=2)
    x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.log(train_loss=loss)
    with w.validation():
        model(x)
    rec.close()
    return load_run(run_dir)


def check(run, steps=4):
    assert list(run.metrics["train/loss"].step) == list(range(1, steps + 1))
    assert "grad_norm/0.weight" in run.metrics and "weight_norm/2.bias" in run.metrics
    assert not any("module." in k or "_orig_mod" in k for k in run.metrics)
    assert run.metrics["time/compute_ms"].value.size == steps  # the forward pre-hook ran each step
    assert "act/dead_frac/1" in run.metrics  # the activation hook ran in the validation forward
    assert "weights/0.weight" in run.histograms


@pytest.fixture
def process_group(tmp_path):
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available in this build")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_watch_on_distributed_data_parallel(tmp_path, process_group):
    model = torch.nn.parallel.DistributedDataParallel(net())
    assert unwrap(model) is model.module
    check(train(model, model.parameters(), tmp_path / "run"))


def test_watch_on_a_compiled_model(tmp_path):
    base = net()
    model = torch.compile(base, backend="eager")
    assert unwrap(model) is base
    check(train(model, base.parameters(), tmp_path / "run"))


def test_watch_wrapped_negative_control_names_the_wrapper(tmp_path, process_group):
    model = torch.nn.parallel.DistributedDataParallel(net())
    # what unwrapping avoids: the wrapper's own parameter names
    assert all(n.startswith("module.") for n, _ in model.named_parameters())
