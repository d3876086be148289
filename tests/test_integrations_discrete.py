"""The callbacks' probes on an emulated discrete GPU (caliper_vk.exporters.discrete): a model whose
parameters live in device memory is probed, its panels are allocated on that device
(``caliper_vk.empty(device="cuda")``, read in place), and the counting seam shows no
device-to-host transfer of probe data per frame."""

import pytest
import torch

pytest.importorskip("pytorch_lightning", reason="pytorch-lightning is in requirements-dev.txt")

import caliper_vk as cv
from caliper_vk.exporters import discrete
from caliper_vk.integrations.lightning import _LightningProbes


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(20, 16)
        self.attn = torch.nn.MultiheadAttention(16, 2, batch_first=True)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 20))

    def forward(self, x):
        h = self.embed(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        return self.mlp(h + a)


def on_device(model):
    swap = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        return model._apply(discrete.to_device)  # every parameter in emulated device memory
    finally:
        torch.__future__.set_swap_module_params_on_conversion(swap)


def test_probes_on_a_discrete_device_cross_nothing_to_the_host_per_frame(monkeypatch, device):
    monkeypatch.setenv(discrete.EMULATE_ENV, "discrete")  # caliper_vk.empty(device="cuda"): emulated
    torch.manual_seed(0)
    model = on_device(Tiny())
    assert next(model.parameters()).device.type == "cuda"
    example = torch.randint(0, 20, (1, 12)).as_subclass(discrete.DeviceTensor)
    importable = device.info.has("VK_EXT_external_memory_host")
    with discrete.emulate(), cv.Session(window=False, size=(480, 320), budget=None) as s:
        probes = _LightningProbes(attention=["attn"], outputs=["mlp.1"], embeddings="embed", session=s,
                                  record_every=0, loss_curve=False, example=example)
        probes.start(model, None)
        drawn = []
        for step in range(1, 9):
            with torch.no_grad():
                for p in model.parameters():
                    p.mul_(0.99)  # training, on the device
            s.device.wait()  # the last frame done (lavapipe is slow): this step's frame is drawn
            with discrete.transfers() as t:
                probes.after_step(step)
            if step > 1 and s.drawn_step == step:  # the panels exist (made at the first frame)
                drawn.append(t.to_host)
        assert drawn, "no frame was drawn after the panels were made"
        for name in ("mlp.1", "attn", "embed"):
            buf = probes.buffers[name]
            assert isinstance(buf, discrete.EmulatedTensor)  # the panel's memory is on the model's device
        paths = {p.name: p.path for p in s.panels}
        if importable:
            assert set(paths.values()) == {"zero-copy"}, paths
            assert drawn == [0] * len(drawn)  # probe, cut, project, write, draw: nothing to the host
            assert "zero-copy" in s.status().line()
        else:  # no host import: a device tensor is staged, one counted copy per panel and frame
            assert set(paths.values()) == {"host staging"}
        assert probes.buffers["attn"].shape == (2, 12, 12) and not probes.failures
        rows = probes.buffers["attn"].cpu().sum(-1)
        assert (rows - 1).abs().max() < 1e-5  # the weights the probe asked for: softmax rows


def test_recorded_probes_and_a_logged_loss_make_no_blocking_transfer(monkeypatch, device, tmp_path):
    """With a run, every step's probes recorded and the loss logged: copied to the host without
    waiting (record.stage), written when they have arrived."""
    from caliper_vk.record import Recorder, load_run

    monkeypatch.setenv(discrete.EMULATE_ENV, "discrete")
    torch.manual_seed(0)
    model = on_device(Tiny())
    example = torch.randint(0, 20, (1, 12)).as_subclass(discrete.DeviceTensor)
    with discrete.emulate(), cv.Session(window=False, size=(320, 200), budget=None) as s:
        probes = _LightningProbes(attention=["attn"], outputs=["mlp.1"], session=s, record_every=1,
                                  example=example)
        probes.start(model, None)
        probes.run_dir = tmp_path / "run"  # (start() would add watch, which needs an optimizer)
        probes.rec = Recorder(probes.run_dir)
        monkeypatch.setattr(s, "due", lambda step=None: False)  # recording alone (drawing: the test above)
        for step in range(1, 4):
            probes.rec.advance()
            loss = discrete.to_device(torch.tensor(2.0 / step))
            with discrete.transfers() as t:
                probes.log({"train_loss": loss})
                probes.after_step(step)
            assert t.blocking == 0, [e for e in t.events if e.blocking]  # nothing waits for the device
            assert t.asynchronous >= 3  # the loss and the two probes, copied without waiting
        with discrete.transfers() as old:
            probes._probe()["mlp.1"][1].cpu()  # negative control: the copy rec.probe made before
        assert old.blocking == 1
        probes.close()
        probes.rec.close()
    run = load_run(tmp_path / "run")
    assert run.metrics["train/loss"].step.tolist() == [1, 2, 3]
    assert [f.step for f in run.arrays["outputs/mlp.1"]] == [1, 2, 3]
    assert run.arrays["attention/attn"][0].array.shape == (2, 12, 12)
