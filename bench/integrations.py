"""The callbacks' budget beside their cost: the Hugging Face and Lightning ``Trainer`` with
``CaliperCallback``, the status line's share next to the measured slowdown, at 2% and 5%.

One ``trainer.train()`` / ``trainer.fit()`` per process runs many optimizer steps; a
callback placed around ``CaliperCallback`` alternates blocks of steps in which the
callback does nothing (plain: the ``Trainer`` exactly as without Caliper, its session
open but idle, the budget's clock stopped) and blocks in which every hook of the callback
runs (Caliper: ``due()``, the probe forward with its hooks and the eager-attention switch,
the writes, ``step()``, the logging), in ABBA order. A block's time is the wall time from
the end of the optimizer step before it to the end of its last one: the whole loop of the
``Trainer`` (data loading, forward, backward, the optimizer, its own callbacks), so that
whatever the callback adds to the training thread is in it. Caliper blocks end by waiting
for the frame they drew last (the block pays for it).

Reported per framework and budget: the measured share of the loop that was Caliper's
(``1 - plain / with``, the budget's own definition) and the slowdown (``with / plain - 1``)
beside what the budget counted: ``counted``, the seconds the budget charged during the
Caliper blocks (its ``host_total`` and ``device_total``: the callback's time on the training
thread, and the frames' device time or what training lost to them) over those blocks' time,
and ``status``, the share the status line says (``session.budget.measured``) read at the end
of every Caliper block. The target: each within one point of the measured share.

The warm-up runs Caliper for at least ``--warm-s`` seconds (20 s: four of the status line's
5-second windows) before the first block: the first frames build pipelines and JIT their
shaders (a one-off of a few hundred milliseconds on lavapipe), which the status line rightly
shows while they are in its window; read during the blocks of a short run they made it read
2–4 points above the measured share (the first figures in docs/benchmarks.md).

    .venv/bin/python bench/integrations.py [--seconds 60] [--json out.json]
    .venv/bin/python bench/integrations.py --tiny      # checks that it runs: figures meaningless

Not a test: nothing asserts a duration. Run it on a quiet machine (the figures of a box
shared with other work wander by more than the effect).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BUDGETS = (0.02, 0.05)
FRAMEWORKS = ("hf", "lightning")
BLOCK_S = {"hf": 0.4, "lightning": 0.2}
WARM_S = 20.0  # four of the status line's 5-s windows: the first frames' one-off has left it


class Blocks:
    """Alternates plain and Caliper blocks (ABBA) at the end of each optimizer step; keeps each
    block's (seconds, steps) and the status line's share at the end of each Caliper block."""

    def __init__(self, session, block_s: float, pairs: int, warmup: int, warm_s: float = WARM_S):
        self.s, self.block_s, self.pairs, self.warmup, self.warm_s = session, block_s, pairs, warmup, warm_s
        self.clock = time.perf_counter
        self.started: float | None = None
        self.counted: list[float] = []  # seconds the budget charged in each Caliper block
        self._charged = 0.0
        self.paused = 0.0
        session.budget.clock = lambda: self.clock() - self.paused  # stopped in plain blocks
        self.blocks: dict = {"plain": [], "caliper": []}
        self.status_shares: list[float] = []
        self.steps = 0
        self.pair = 0
        self.order: list[str] = []
        self.variant = "caliper"  # the warm-up steps: pipelines, first frames
        self.began = self.last = None
        self.n = 0

    @property
    def caliper(self) -> bool:
        return self.variant == "caliper"

    @property
    def done(self) -> bool:
        return self.pair >= self.pairs

    def stepped(self) -> None:
        """An optimizer step (and, in a Caliper block, the callback's work after it) ended."""
        now = self.clock()
        self.steps += 1
        if self.started is None:
            self.started = now
        if self.began is None:  # warming up: at least `warmup` steps and `warm_s` seconds
            self.last = now
            if self.steps >= self.warmup and now - self.started >= self.warm_s:
                self.s.flush()
                self._next(self.clock())
            return
        self.n += 1
        if now - self.began < self.block_s:
            return
        if self.caliper:
            waiting = self.clock()
            self.s.device.wait()  # the frame drawn in this block is this block's cost
            self.paused += self.clock() - waiting
            self.status_shares.append(self.s.budget.measured or 0.0)
            self.counted.append(self._total() - self._charged)
            now = self.clock()
        else:
            self.paused += now - self.began
        self.blocks[self.variant].append((now - self.began, self.n))
        self._next(now)

    def _next(self, now: float) -> None:
        if not self.order:
            if self.blocks["plain"]:
                self.pair += 1
            self.order = ["plain", "caliper"] if self.pair % 2 == 0 else ["caliper", "plain"]
        self.variant = self.order.pop(0)
        self.began, self.n = now, 0
        self._charged = self._total()

    def _total(self) -> float:
        b = self.s.budget
        return b.host_total + b.device_total

    def result(self) -> dict:
        pairs = np.asarray([[p[0] / p[1], c[0] / c[1]] for p, c in zip(self.blocks["plain"],
                                                                         self.blocks["caliper"], strict=False)])
        plain, caliper = pairs[:, 0].mean(), pairs[:, 1].mean()
        caliper_s = sum(b[0] for b in self.blocks["caliper"])
        return {"plain_s": float(plain), "caliper_s": float(caliper), "share": float(1 - plain / caliper),
                "slowdown": float(caliper / plain - 1), "pairs": len(pairs),
                "counted_share": float(sum(self.counted) / caliper_s) if caliper_s else None,
                "status_share": float(np.mean(self.status_shares)) if self.status_shares else None,
                "frames": self.s.frames, "status": self.s.status().line()}


def hf_child(budget: float, pairs: int, warmup: int, tiny: bool, warm_s: float = WARM_S) -> dict:
    import torch
    import transformers

    import caliper_vk as cv
    from caliper_vk.integrations.hf import CaliperCallback

    transformers.logging.set_verbosity_error()
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=64,
                                  bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg)

    class Tokens(torch.utils.data.Dataset):
        def __len__(self):
            return 10**6

        def __getitem__(self, i):
            ids = torch.randint(0, 512, (64,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids}

    s = cv.Session(window=False, size=(960, 640), budget=budget)
    cb = CaliperCallback(session=s)
    blocks = Blocks(s, 0.02 if tiny else BLOCK_S["hf"], pairs, warmup, warm_s)

    class Alternate(transformers.TrainerCallback):
        """``cb``'s hooks in Caliper blocks only (its first ones always: the session's panels)."""

        def on_train_begin(self, args, state, control, **kw):
            cb.on_train_begin(args, state, control, **kw)

        def on_log(self, args, state, control, **kw):
            if blocks.caliper:
                cb.on_log(args, state, control, **kw)

        def on_step_end(self, args, state, control, **kw):
            if blocks.caliper:
                cb.on_step_end(args, state, control, **kw)
            blocks.stepped()
            if blocks.done:
                control.should_training_stop = True

        def on_train_end(self, args, state, control, **kw):
            cb.on_train_end(args, state, control, **kw)

    args = transformers.TrainingArguments(
        output_dir=os.environ.get("TMPDIR", "/tmp") + "/caliper-bench-hf", max_steps=10**6,
        per_device_train_batch_size=8, logging_steps=10, save_strategy="no", report_to=[], use_cpu=True,
        disable_tqdm=True, dataloader_num_workers=0, learning_rate=1e-3)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[Alternate()])
    trainer.train()
    out = blocks.result()
    s.close()
    return out


def lightning_child(budget: float, pairs: int, warmup: int, tiny: bool, warm_s: float = WARM_S) -> dict:
    import pytorch_lightning as pl
    import torch

    import caliper_vk as cv
    from caliper_vk.integrations.lightning import CaliperCallback

    class Model(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(64, 64)
            self.attn = torch.nn.MultiheadAttention(64, 4, batch_first=True)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))

        def forward(self, x):
            h = self.embed(x)
            a, _ = self.attn(h, h, h, need_weights=False)
            return self.mlp(h + a)

        def training_step(self, batch, idx):
            x, y = batch
            return torch.nn.functional.cross_entropy(self(x).flatten(0, 1), y.flatten())

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 64, (4096, 48), generator=g)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, (x + 1) % 64), batch_size=16)
    s = cv.Session(window=False, size=(960, 640), budget=budget)
    cb = CaliperCallback(outputs=["mlp.1"], attention=["attn"], embeddings="embed", session=s)
    blocks = Blocks(s, 0.02 if tiny else BLOCK_S["lightning"], pairs, warmup, warm_s)

    class Alternate(pl.Callback):
        def on_train_start(self, trainer, module):
            cb.on_train_start(trainer, module)

        def on_train_batch_start(self, trainer, module, batch, idx):
            if blocks.caliper:
                cb.on_train_batch_start(trainer, module, batch, idx)

        def on_train_batch_end(self, trainer, module, outputs, batch, idx):
            if blocks.caliper:
                cb.on_train_batch_end(trainer, module, outputs, batch, idx)
            else:
                cb._last_step = trainer.global_step  # the callback's step bookkeeping, as if it ran
            blocks.stepped()
            if blocks.done:
                trainer.should_stop = True

        def on_train_end(self, trainer, module):
            cb.on_train_end(trainer, module)

    trainer = pl.Trainer(callbacks=[Alternate()], max_steps=10**6, max_epochs=-1, accelerator="cpu",
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(Model(), data)
    out = blocks.result()
    s.close()
    return out


def measure(seconds: float, warmup: int, tiny: bool, warm_s: float = WARM_S, log=print) -> dict:
    res = {"seconds": seconds, "warmup": warmup, "warm_s": warm_s, "load_before": os.getloadavg()[0],
           "rows": {}}
    for fw in FRAMEWORKS:
        pairs = 2 if tiny else max(2, round(seconds / (2 * BLOCK_S[fw])))
        for budget in BUDGETS:
            cmd = [sys.executable, __file__, "--child", fw, "--budget", str(budget), "--pairs", str(pairs),
                   "--warmup", str(warmup), "--warm-s", str(warm_s)] + (["--tiny"] if tiny else [])
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600,
                                  env={**os.environ, "CALIPER_VK_VALIDATION": "0", "DISPLAY": ""})
            if proc.returncode != 0:
                r = {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
            else:
                r = json.loads(proc.stdout.strip().splitlines()[-1])
            res["rows"][f"{fw} {budget:g}"] = r
            log(f"{fw} budget {budget:.0%}: " + (r["error"] if "error" in r else (
                f"measured share {100 * r['share']:.1f}% (slowdown {100 * r['slowdown']:+.1f}%), counted "
                f"{100 * (r['counted_share'] or 0):.1f}%, status line {100 * (r['status_share'] or 0):.1f}%, "
                f"{r['frames']} frames, {r['pairs']} pairs")))
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", choices=FRAMEWORKS)
    ap.add_argument("--budget", type=float, default=0.05)
    ap.add_argument("--pairs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=60.0, help="seconds of blocks per row")
    ap.add_argument("--warm-s", type=float, default=WARM_S,
                    help="seconds of Caliper before the first block (the first frames' one-off leaves the "
                         "status line's window)")
    ap.add_argument("--tiny", action="store_true", help="a few short blocks: checks that it runs")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    if a.child:
        child = {"hf": hf_child, "lightning": lightning_child}[a.child]
        print(json.dumps(child(a.budget, a.pairs, 3 if a.tiny else a.warmup, a.tiny,
                               0.0 if a.tiny else a.warm_s)))
        return
    res = measure(a.seconds, 3 if a.tiny else a.warmup, a.tiny, 0.0 if a.tiny else a.warm_s,
                  log=lambda m: print(m, file=sys.stderr))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
