"""Caliper in a PyTorch Lightning Trainer: one callback, no change to the LightningModule.

A tiny transformer layer learns to predict the next token of a synthetic
sequence task (each token is the previous one plus one, modulo the vocabulary:
no downloads). ``CaliperCallback`` draws its attention weights (per head), the
hidden layer of its MLP and its token embedding along fixed principal axes
after every optimizer step, within the session's overhead budget (5% of the
training loop by default), and records the run with the loss, the validation
loss and the probes:

    .venv/bin/python examples/lightning_attention.py --out out/lightning
    caliper view out/lightning/run

Needs ``pip install 'caliper-vk[lightning]'``. With a display it opens a window;
without one it writes the last frame to ``--out``/final.png.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytorch_lightning as pl
import torch

import caliper_vk as cv
from caliper_vk.integrations.lightning import CaliperCallback

VOCAB, LENGTH = 24, 16


class NextToken(pl.LightningModule):
    def __init__(self, d: int = 32, heads: int = 4, lr: float = 3e-3):
        super().__init__()
        self.save_hyperparameters()
        self.embed = torch.nn.Embedding(VOCAB, d)
        self.attn = torch.nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(),
                                       torch.nn.Linear(4 * d, VOCAB))
        self.register_buffer("causal", torch.triu(torch.ones(LENGTH, LENGTH, dtype=torch.bool), 1))

    def forward(self, x):
        h = self.embed(x)
        a, _ = self.attn(h, h, h, attn_mask=self.causal[:x.shape[1], :x.shape[1]], average_attn_weights=False)
        return self.mlp(h + a)

    def _loss(self, batch):
        x, y = batch
        return torch.nn.functional.cross_entropy(self(x).flatten(0, 1), y.flatten())

    def training_step(self, batch, idx):
        loss = self._loss(batch)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, idx):
        self.log("val_loss", self._loss(batch))

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)


def data(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(0, VOCAB, (n, 1), generator=g)
    seq = (start + torch.arange(LENGTH + 1)) % VOCAB
    ds = torch.utils.data.TensorDataset(seq[:, :-1], seq[:, 1:])
    return torch.utils.data.DataLoader(ds, batch_size=32, shuffle=seed == 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/lightning")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--budget", type=float, default=0.05)
    a = ap.parse_args()
    out = Path(a.out)
    session = cv.Session(size=(1200, 800), budget=a.budget, title="Caliper · Lightning")
    cb = CaliperCallback(outputs=["mlp.1"], attention=["attn"], embeddings="embed", run_dir=out / "run",
                         session=session, overwrite=True, record_every=25)
    trainer = pl.Trainer(callbacks=[cb], max_steps=a.steps, val_check_interval=50, limit_val_batches=4,
                         accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False)
    trainer.fit(NextToken(), data(4096, 0), data(256, 1))
    print(f"caliper: {session.status().line()}")
    if session.window is None:
        print(f"caliper: final frame {session.save_png(out / 'final.png')}")
    session.close()
    print(f"caliper: run recorded in {out / 'run'} (caliper view {out / 'run'})")


if __name__ == "__main__":
    main()
