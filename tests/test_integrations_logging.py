"""The callbacks log a trainer's loss tensor without reading it on the training step: the recorder
and the loss curve take its value when it has arrived (record.stage), not with ``.item()``."""

import math

import torch

from caliper_vk.integrations._probes import Probes
from caliper_vk.record import Recorder, load_run


def test_a_logged_loss_tensor_is_not_read_on_the_step(tmp_path, monkeypatch):
    probes = Probes(run_dir=tmp_path / "run")
    probes.rec = Recorder(tmp_path / "run")
    probes._started = True
    reads = []
    for name in ("item", "tolist", "__float__"):  # a host read of a device value: a wait on a GPU
        original = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name, lambda self, *a, _o=original, _n=name, **k: (
            reads.append(_n), _o(self, *a, **k))[1])
    losses = [torch.tensor(2.5, requires_grad=True) * 1.0, torch.tensor(float("nan")),
              torch.tensor(1.5, dtype=torch.bfloat16)]
    for loss in losses:
        probes.rec.advance()
        probes.log({"train_loss": loss, "val_acc": torch.tensor([0.75]), "lr": 0.1, "tokens": torch.ones(3)})
    monkeypatch.undo()
    assert reads == [], f"host reads on the step: {reads}"
    probes._arriving.poll()
    assert probes.losses == [2.5, 1.5]  # the curve: the finite values, when they arrived
    probes.rec.close()
    run = load_run(tmp_path / "run")
    loss = run.metrics["train/loss"]
    assert loss.step.tolist() == [1, 2, 3] and loss.value[0] == 2.5 and math.isnan(loss.value[1])
    assert run.metrics["val/acc"].value.tolist() == [0.75] * 3
    assert run.metrics["train/lr"].value.tolist() == [0.1] * 3
    assert "train/tokens" not in run.metrics  # not one number: left out
