"""A tiny transformer that learns to reverse a string: attention probes, clipping, a warm-up schedule.

The task. Inputs are strings of 8 letters drawn uniformly from ``a``..``h``;
the target at position ``i`` is the letter at position ``7 - i`` (the string
reversed). A fixed training set of 4,096 strings and a validation set of 512
are generated from a seed. The task is synthetic on purpose: it needs no
bundled text, and its answer is known — to reverse, each output position must
look at its mirror position, so a working model's attention shows an
anti-diagonal that a reader can check by eye, and position, not content,
decides where to look.

The model. An encoder (no causal mask: every position sees every position)
with two pre-norm blocks of two heads (``d_model`` 32, a ReLU feed-forward
``ff`` of 64 units, ``ff.1`` being the ReLU), learned token and position
embeddings, a final layer norm and a linear head over the 8 letters. Attention
probabilities pass through an ``nn.Softmax`` module (``blocks.<i>.attn.softmax``)
so that ``watcher.capture`` can record them.

Training. AdamW with the usual two named groups, ``decay`` (matrices, weight
decay 0.01) and ``no_decay`` (embeddings, layer norms, biases); a linear
warm-up over the first epoch, then cosine decay to 10%; the global gradient
norm clipped at ``clip`` through ``watcher.clip_grad_norm_``.

Recorded beyond the common set (see :mod:`.digits_mlp`): after every epoch and
at step 0, ``attention/blocks.<i>.attn.softmax`` of the fixed probe string,
shape (1, heads, 8, 8), each row a distribution over the positions attended
to; activation statistics of ``blocks.<i>.ff.1``; a per-letter confusion
matrix over all validation positions. Losses and accuracy are per token.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional

from ..record import Recorder, watch
from .common import Split, define_common, deterministic, evaluate, train_loop
from .common import steps_per_epoch as count_steps

LETTERS = "abcdefgh"


@dataclass(frozen=True)
class TransformerConfig:
    length: int = 8
    d_model: int = 32
    heads: int = 2
    layers: int = 2
    lr: float = 3e-3
    weight_decay: float = 0.01
    clip: float = 0.25
    epochs: int = 5
    batch: int = 128
    train_size: int = 4096
    val_size: int = 512
    seed: int = 0
    probe: str = "cabhdgef"


class Attention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.softmax = nn.Softmax(dim=-1)
        self.proj = nn.Linear(d, d, bias=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in self.qkv(x).split(c, 2))
        att = self.softmax((q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads))  # (b, heads, t, t)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(d), Attention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d, bias=False), nn.ReLU(), nn.Linear(2 * d, d, bias=False))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ff(self.ln2(x))


class Reverser(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.tok = nn.Embedding(len(LETTERS), cfg.d_model)
        self.pos = nn.Embedding(cfg.length, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg.d_model, cfg.heads) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, len(LETTERS))

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def reverse_data(n: int, length: int, generator: torch.Generator) -> Split:
    x = torch.randint(0, len(LETTERS), (n, length), generator=generator)
    return Split(x, x.flip(1))


def encode(s: str) -> torch.Tensor:
    return torch.tensor([[LETTERS.index(c) for c in s]])


def train(out_dir, cfg: TransformerConfig = TransformerConfig(), name: str = "reverse_transformer",
          stop_after: int | None = None, on_step=None) -> Path:
    """Train and record the transformer into ``out_dir``; returns its ``run.json`` (``stop_after``
    and ``on_step`` as in :func:`.digits_mlp.train`)."""
    out_dir = Path(out_dir)
    with deterministic():
        data_gen = torch.Generator().manual_seed(cfg.seed)
        train_split = reverse_data(cfg.train_size, cfg.length, data_gen)
        val = reverse_data(cfg.val_size, cfg.length, data_gen)
        torch.manual_seed(cfg.seed)
        model = Reverser(cfg)
        matrix = {n for n, p in model.named_parameters() if p.ndim == 2 and not n.startswith(("tok.", "pos."))}
        decay = [p for n, p in model.named_parameters() if n in matrix]
        rest = [p for n, p in model.named_parameters() if n not in matrix]
        opt = torch.optim.AdamW([{"name": "decay", "params": decay, "weight_decay": cfg.weight_decay},
                                 {"name": "no_decay", "params": rest, "weight_decay": 0.0}], lr=cfg.lr)
        spe = count_steps(cfg.train_size, cfg.batch)
        total = spe * cfg.epochs

        def schedule(step: int) -> float:  # the factor for update step + 1
            if step < spe:
                return (step + 1) / spe
            return 0.1 + 0.45 * (1 + math.cos(math.pi * (step - spe) / max(total - spe, 1)))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
        config = {**asdict(cfg), "task": f"reverse strings of {cfg.length} letters from {LETTERS!r}",
                  "model": f"encoder, {cfg.layers} blocks, {cfg.heads} heads, d_model {cfg.d_model}, ReLU ff",
                  "optimizer": "AdamW, groups decay/no_decay, warm-up 1 epoch then cosine to 10%",
                  "parameters": sum(p.numel() for p in model.parameters())}
        rec = Recorder(out_dir, name=name, config=config, steps_per_epoch=spe, overwrite=True)
        define_common(rec, loss_unit="nats/token")
        rec.define("val/accuracy", unit="fraction", goal="max",
                   description="correctly predicted letters / evaluated letters (8 per validation string)")
        w = watch(model, opt, rec, clip=cfg.clip, histograms_every=spe, budget=None,
                  activations=[f"blocks.{i}.ff.1" for i in range(cfg.layers)])
        probe = encode(cfg.probe)
        softmaxes = [f"blocks.{i}.attn.softmax" for i in range(cfg.layers)]

        def validate():
            loss, acc, pred = evaluate(model, val, w)
            rec.log({"val/loss": loss, "val/accuracy": acc})
            rec.confusion("val/confusion", targets=val.y, predictions=pred, num_classes=len(LETTERS),
                          classes=list(LETTERS))
            w.capture(probe, softmaxes, name="attention", example_name=f"probe string {cfg.probe!r}")

        def loss_of(idx):
            logits = model(train_split.x[idx])
            return functional.cross_entropy(logits.reshape(-1, len(LETTERS)), train_split.y[idx].reshape(-1))

        return train_loop(rec, w, model, opt, seed=cfg.seed, epochs=cfg.epochs, stop_after=stop_after,
                          n=cfg.train_size, batch=cfg.batch, loss_of=loss_of, validate=validate,
                          on_step=on_step, sched=sched, clip=True)
