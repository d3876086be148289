"""A small character-level transformer, written to be read: the GPT demo's model.

Pre-norm decoder blocks (layer norm, causal multi-head self-attention, layer
norm, a 4x GELU MLP), learned position embeddings, a final layer norm and an
unembedding. Attention is computed explicitly (``softmax(q k^T / sqrt(d))``)
so its probabilities can be returned and drawn; :meth:`CharGPT.forward` with
``trace=True`` also returns the residual stream after the embedding and after
every block, which :func:`logit_lens` reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional


@dataclass(frozen=True)
class Config:
    vocab_size: int
    n_layer: int = 3
    n_head: int = 4
    d_model: int = 96
    context: int = 64


class CharData:
    """A text as character ids, with its vocabulary (the sorted set of its characters)."""

    def __init__(self, text: str):
        if len(text) < 2:
            raise ValueError(f"the training text has {len(text)} characters; give it at least a few "
                             "thousand (a plain text file)")
        self.text = text
        self.vocab = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.vocab)}
        self.ids = torch.tensor([self.index[c] for c in text], dtype=torch.long)

    def encode(self, s: str) -> torch.Tensor:
        unknown = sorted(set(s) - set(self.index))
        if unknown:
            raise ValueError(f"characters {unknown!r} are not in the training text's vocabulary")
        return torch.tensor([self.index[c] for c in s], dtype=torch.long)

    def decode(self, ids) -> str:
        return "".join(self.vocab[int(i)] for i in ids)

    def batch(self, size: int, context: int, generator: torch.Generator):
        """``size`` random windows: inputs (size, context) and next-character targets."""
        n = len(self.ids) - context - 1
        if n < 1:
            raise ValueError(f"the training text has {len(self.ids)} characters; the model's context "
                             f"needs at least {context + 2}")
        start = torch.randint(0, n, (size,), generator=generator)
        rows = start[:, None] + torch.arange(context + 1)[None, :]
        w = self.ids[rows]
        return w[:, :-1], w[:, 1:]


class Block(nn.Module):
    """One pre-norm transformer block; returns the new residual stream and the attention."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.n_head = cfg.n_head
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(),
                                 nn.Linear(4 * cfg.d_model, cfg.d_model))
        mask = torch.tril(torch.ones(cfg.context, cfg.context, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, t, c = x.shape
        hd = c // self.n_head
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, hd).transpose(1, 2) for z in (q, k, v))  # (b, h, t, hd)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = torch.softmax(scores.masked_fill(~self.mask[:t, :t], float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        x = x + self.mlp(self.ln2(x))
        return x, att


class CharGPT(nn.Module):
    """A character-level GPT (see the module docstring)."""

    def __init__(self, cfg: Config):
        super().__init__()
        if cfg.d_model % cfg.n_head:
            raise ValueError(f"d_model {cfg.d_model} must be a multiple of n_head {cfg.n_head}")
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.context, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.unembed = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor, trace: bool = False):
        """Logits (b, t, vocab); with ``trace`` also (residual streams, attentions):
        ``n_layer + 1`` tensors (b, t, d) — after the embedding, then after each block —
        and ``n_layer`` attention tensors (b, heads, t, t)."""
        t = idx.shape[1]
        if t > self.cfg.context:
            raise ValueError(f"sequence of {t} characters is longer than the context {self.cfg.context}")
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(t, device=idx.device))
        residuals, attentions = [x], []
        for block in self.blocks:
            x, att = block(x)
            residuals.append(x)
            attentions.append(att)
        logits = self.unembed(self.ln_f(x))
        return (logits, residuals, attentions) if trace else logits

    def loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self(idx)
        return functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, n: int, generator: torch.Generator,
                 temperature: float = 0.8) -> torch.Tensor:
        """Extend ``idx`` (1-D) by ``n`` sampled characters."""
        out = idx.clone()
        for _ in range(n):
            logits = self(out[-self.cfg.context:][None])[0, -1] / temperature
            nxt = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
            out = torch.cat([out, nxt])
        return out


@torch.no_grad()
def logit_lens(model: CharGPT, residuals) -> tuple[torch.Tensor, torch.Tensor]:
    """The logit lens of one sequence: for each residual stream (after the embedding and
    after every block) and each position, the final layer norm and the unembedding give a
    distribution over the next character. Returns (top probability, top id), each
    (n_layer + 1, t); the last row is the model's own prediction."""
    stacked = torch.stack([r[0] for r in residuals])  # (layers + 1, t, d)
    probs = torch.softmax(model.unembed(model.ln_f(stacked)), dim=-1)
    top, ids = probs.max(dim=-1)
    return top, ids
