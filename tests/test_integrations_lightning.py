"""CaliperCallback for PyTorch Lightning: a tiny attention model trained a few steps on CPU;
the run directory opens with caliper's loader with the loss, the probes and watch's norms."""

import pytest
import torch

pl = pytest.importorskip("pytorch_lightning", reason="pytorch-lightning is in requirements-dev.txt")

import caliper_vk as cv  # noqa: E402
from caliper_vk.integrations.lightning import CaliperCallback  # noqa: E402
from caliper_vk.record import load_run  # noqa: E402


QUIET = dict(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
             enable_model_summary=False)


class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.save_hyperparameters({"d": 16, "lr": 0.01})
        self.embed = torch.nn.Embedding(20, 16)
        self.attn = torch.nn.MultiheadAttention(16, 2, batch_first=True)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 20))

    def forward(self, x):
        h = self.embed(x)
        a, _ = self.attn(h, h, h, average_attn_weights=False)
        return self.mlp(h + a)

    def training_step(self, batch, idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self(x).flatten(0, 1), y.flatten())
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self(x).flatten(0, 1), y.flatten()))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.01)


def loader(n=64):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 20, (n, 12), generator=g)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, (x + 1) % 20), batch_size=8)


def test_lightning_callback_draws_and_records_a_run(tmp_path):
    torch.manual_seed(0)
    with cv.Session(window=False, size=(480, 320), budget=None) as session:
        cb = CaliperCallback(outputs=["mlp.1"], attention=["attn"], embeddings="embed",
                             run_dir=tmp_path / "run", session=session, record_every=2)
        trainer = pl.Trainer(callbacks=[cb], max_steps=6, val_check_interval=4, limit_val_batches=2,
                             num_sanity_val_steps=0, **QUIET)
        trainer.fit(Tiny(), loader(), loader(16))
        names = {p.name for p in session.panels}
        assert {"mlp.1", "attn", "embed (principal axes)", "train/loss (raw + EMA)"} <= names
        assert session.frames >= 1  # steps while a frame is still in flight skip drawing
        pixels = session.render()
        assert pixels[..., :3].std() > 0  # something was drawn
    run = load_run(tmp_path / "run")
    loss = run.metrics["train/loss"]
    assert list(loss.step) == [1, 2, 3, 4, 5, 6]
    assert "val/loss" in run.metrics and "grad_norm/global" in run.metrics
    assert [f.step for f in run.arrays["outputs/mlp.1"]] == [2, 4, 6]
    assert run.arrays["attention/attn"][0].array.shape == (2, 12, 12)  # per head, first example
    assert run.arrays["outputs/mlp.1"][0].array.shape == (12, 32)
    assert run.config["lr"] == 0.01


def test_lightning_callback_names_a_missing_module(tmp_path):
    cb = CaliperCallback(outputs=["nope"], session=None, window=False)
    trainer = pl.Trainer(callbacks=[cb], max_steps=1, **QUIET)
    with pytest.raises(KeyError, match=r"no module.*nope.*its modules are embed, attn"):
        trainer.fit(Tiny(), loader(8))
    assert cb.session is None


class Side(torch.nn.Module):
    """A module whose output is no tensor: its probe fails, alone."""

    def forward(self, h):
        return None


class Fast(Tiny):
    """The usual fast path (need_weights=False), a module with no tensor output, and a probe
    forward that runs out of memory above 8 tokens (training batches are never cut)."""

    def __init__(self):
        super().__init__()
        self.side = Side()

    def forward(self, x):
        if x.shape[0] == 1 and x.shape[1] > 8:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        h = self.embed(x)
        self.side(h)
        a, _ = self.attn(h, h, h, need_weights=False)
        return self.mlp(h + a)


def test_probes_fail_alone_retry_smaller_and_stay_in_caliper_memory(tmp_path, capsys, monkeypatch):
    from caliper_vk.exporters import cpu

    torch.manual_seed(0)
    with cv.Session(window=False, size=(480, 320), budget=None) as session:
        cb = CaliperCallback(outputs=["mlp.1", "side"], attention=["attn"], embeddings="embed", session=session,
                             record_every=0, limits={"tokens": 12})
        host = {"cpu": 0, "numpy": 0}
        after_step, counting, drew = cb.probes.after_step, [], []

        def counted(step):  # the callback's whole per-step work, host copies counted once panels exist
            counting.append({"mlp.1", "attn", "embed"} <= set(cb.probes.panels))
            try:
                after_step(step)
            finally:
                counting_was = counting.pop()
            drew.append(counting_was and session.drawn_step == step)

        cb.probes.after_step = counted
        for method in host:
            def wrap(original, method=method):
                def call(self, *a, **k):
                    if counting and counting[-1]:
                        host[method] += 1
                    return original(self, *a, **k)
                return call
            monkeypatch.setattr(torch.Tensor, method, wrap(getattr(torch.Tensor, method)))
        trainer = pl.Trainer(callbacks=[cb], max_steps=8, **QUIET)
        trainer.fit(Fast(), loader())
        assert any(drew)  # frames were drawn while the host copies were counted
        panels = {p.name: p for p in session.panels}
        assert "out of memory at 12 tokens; trying 8 next" in capsys.readouterr().err
        p = cb.probes
        assert p.tokens == 8 and p.buffers["mlp.1"].shape == (8, 32)  # retried smaller, and drawn
        assert panels["mlp.1"].note == "example tokens 0–7 of 12"
        assert p.buffers["attn"].shape == (2, 8, 8)  # weights asked for in the probe forward, per head
        assert abs(p.buffers["attn"].sum(-1) - 1).max() < 1e-5
        assert p.buffers["embed"].shape == (20, 3)
        # the panels read caliper_vk.empty memory: in place where the device imports host memory
        path = "zero-copy" if session.device.info.has("VK_EXT_external_memory_host") else "host staging"
        for name in ("mlp.1", "attn", "embed"):
            title = name if name != "embed" else "embed (principal axes)"
            assert cpu.is_shared(p.buffers[name]) and panels[title].path == path
        if path == "zero-copy":  # no host copy of probe data per frame (staging is one, and says so)
            assert host == {"cpu": 0, "numpy": 0}
        assert "produced no tensor" in panels["side"].view.entries[0][1]  # its own panel says why
        assert session.message == "probe side failed"
