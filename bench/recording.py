"""Recording as users run it: the Hugging Face and Lightning Trainers with Caliper's callbacks, with and
without ``run_dir``, against the same Trainer without Caliper; and the memory ``watch`` adds to a large
model held in bf16.

Trainers: the Hugging Face ``Trainer`` on a GPT-2 built from a config (3 layers, 96 wide, batch 8 x 64
tokens, CPU) and the Lightning ``Trainer`` on a module of the same shape (embedding, 3 transformer
encoder layers, 96 wide, AdamW). Variants: ``plain`` (no callback), ``live`` (``CaliperCallback()``:
panels drawn within the budget, offscreen), ``record`` (``CaliperCallback(run_dir=...)``: the panels,
``Recorder`` and ``watch``), each at the budgets given (2% and 5%). Every measurement is a fresh process
timing ``trainer.train()`` / ``trainer.fit()`` over ``--steps`` steps (after a short warm-up fit that
is not timed); the variants run in ABBA order, ``--rounds`` times, and a row's figure is its wall time
over the plain one of the same round (the median over rounds). The CPU model is printed with the rows.

Memory: a model of ``--params`` parameters (square linear layers made in bf16) trained a few steps by
AdamW in a fresh process with and without ``watch`` (histograms and update ratios every step). The
figure is the peak of the bytes watch's hooks allocate and hold, counted at the source
(:class:`caliper_vk.record.footprint.HookFootprint`), beside 1% of the parameters' bytes plus the fixed
buffers (one piece of ``devstats.CHUNK`` elements: its float32 values, int32 bins and masks). Beside
it, the peak resident set above the one after two settling steps, watched minus plain (Linux: the
kernel's peak is reset after settling through ``/proc/self/clear_refs``); at 1% of 200 MB that
difference is within what the allocator moves on its own, which is why the hooks are counted.

    .venv/bin/python bench/recording.py [--steps 300] [--rounds 3] [--budgets 0.02 0.05] [--json out]
    .venv/bin/python bench/recording.py --tiny      # a check that it runs (seconds; no figures)
    .venv/bin/python bench/recording.py --close 200000 50   # Recorder.close() of a long run

``--close STEPS SERIES`` times ``Recorder.close()`` of a run of that many steps with that many scalars
logged at every step (issue 29: 17.5 s and +303 MB for 200k x 50 when ``run.json`` was rebuilt from
the log), and the process's peak resident set before and after it.

Not a test: nothing asserts a duration.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRAINERS = ("hf", "lightning")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# -- the child processes --------------------------------------------------------------------------
def _callback(kind: str, variant: str, budget: float, run_dir: Path):
    if variant == "plain":
        return []
    import caliper_vk as cv

    session = cv.Session(window=False, size=(640, 400), budget=budget)
    module = __import__(f"caliper_vk.integrations.{kind}", fromlist=["CaliperCallback"])
    options = {"run_dir": run_dir, "overwrite": True} if variant == "record" else {}
    return [module.CaliperCallback(session=session, **options)]


def hf_train(variant: str, budget: float, steps: int, width: int, layers: int) -> float:
    import torch
    import transformers

    cfg = transformers.GPT2Config(n_layer=layers, n_embd=width, n_head=4, vocab_size=256, n_positions=64,
                                  bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg)

    class Tokens(torch.utils.data.Dataset):
        def __len__(self):
            return 100_000

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            ids = torch.randint(0, 256, (64,), generator=g)
            return {"input_ids": ids, "labels": ids}

    with tempfile.TemporaryDirectory() as tmp:
        def trainer(n, callbacks):
            args = transformers.TrainingArguments(
                output_dir=str(Path(tmp) / "out"), max_steps=n, per_device_train_batch_size=8, logging_steps=1,
                save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, dataloader_num_workers=0,
                learning_rate=1e-3)
            return transformers.Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=callbacks)

        trainer(3, []).train()  # warm-up, not timed
        t = trainer(steps, _callback("hf", variant, budget, Path(tmp) / "run"))
        start = time.perf_counter()
        t.train()
        return time.perf_counter() - start


def lightning_train(variant: str, budget: float, steps: int, width: int, layers: int) -> float:
    import pytorch_lightning as pl
    import torch

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(256, width)
            layer = torch.nn.TransformerEncoderLayer(width, 4, 4 * width, batch_first=True, dropout=0.0)
            self.body = torch.nn.TransformerEncoder(layer, layers)
            self.head = torch.nn.Linear(width, 256)

        def forward(self, x):
            return self.head(self.body(self.embed(x)))

        def training_step(self, batch, idx):
            x = batch[0]
            loss = torch.nn.functional.cross_entropy(self(x).flatten(0, 1), x.flatten())
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    torch.manual_seed(0)
    tokens = torch.randint(0, 256, (8 * (steps + 8), 64))
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(tokens), batch_size=8)
    quiet = dict(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                 enable_model_summary=False)
    module = Module()
    pl.Trainer(max_steps=3, **quiet).fit(module, data)  # warm-up, not timed
    with tempfile.TemporaryDirectory() as tmp:
        callbacks = _callback("lightning", variant, budget, Path(tmp) / "run")
        trainer = pl.Trainer(max_steps=steps, callbacks=callbacks, **quiet)
        start = time.perf_counter()
        trainer.fit(module, data)
        return time.perf_counter() - start


def _peak_rss_reset() -> bool:
    """Reset the kernel's peak resident set (VmHWM) to the current one (Linux >= 4.0); False where
    that cannot be done (the peak is then the process's whole life's)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_rss() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0


def memory_child(params: int, variant: str, steps: int) -> dict:
    """``variant``: "plain", "watched" (the resident set), "counted" (watched, and its hooks' footprint:
    the counting's own overhead kept out of the other figure)."""
    import torch

    from caliper_vk.record import Recorder, watch
    from caliper_vk.record.footprint import HookFootprint

    side = 2048
    layers = max(1, round(params / (side * side)))
    # made in bf16 (a float32 model converted after would leave its own peak in both processes)
    model = torch.nn.Sequential(*(torch.nn.Linear(side, side, bias=False, dtype=torch.bfloat16)
                                  for _ in range(layers)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(4, side, dtype=torch.bfloat16)
    footprint = None
    with tempfile.TemporaryDirectory() as tmp:
        rec = Recorder(Path(tmp) / "run")
        if variant != "plain":
            watcher = watch(model, opt, rec, histograms_every=1, budget=None)
            footprint = HookFootprint(watcher) if variant == "counted" else None

        def step():
            opt.zero_grad()
            model(x).float().square().mean().backward()
            opt.step()

        step()  # the optimizer's state and torch's lazily loaded kernels: in both processes alike
        step()
        with open("/proc/self/statm") as f:
            settled = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        reset = _peak_rss_reset()
        for _ in range(steps):
            step()
        peak = _peak_rss()
        rec.close()
    # what the steps after the first two added at their peak (above the settled resident set)
    return {"rss_added": peak - settled, "peak_reset": reset,
            "hooks_peak": None if footprint is None else footprint.peak_bytes,
            "param_bytes": sum(p.numel() * p.element_size() for p in model.parameters())}


def close_case(steps: int, series: int, log=print) -> dict:
    from caliper_vk.record import Recorder, load_run

    with tempfile.TemporaryDirectory() as tmp:
        rec = Recorder(Path(tmp) / "run")
        names = [f"series/{i}" for i in range(series)]
        start = time.perf_counter()
        for step in range(steps):
            rec.log(dict.fromkeys(names, step * 0.5), step=step)
        logged = time.perf_counter() - start
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        start = time.perf_counter()
        rec.close()
        took = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        start = time.perf_counter()
        run = load_run(Path(tmp) / "run")
        opened = time.perf_counter() - start
        assert len(run.metrics) == series and len(run.metrics[names[-1]]) == steps
    out = {"steps": steps, "series": series, "log_ms_per_step": 1e3 * logged / steps, "close_s": took,
           "peak_rss_mb_before_close": before, "peak_rss_mb_after_close": after, "open_s": opened}
    log(f"Recorder.close() of {steps} steps x {series} series: {took:.3f} s, peak RSS {before:.0f} -> "
        f"{after:.0f} MB (log() {out['log_ms_per_step']:.3f} ms a step; load_run {opened:.3f} s)")
    return out


def child(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what")
    ap.add_argument("variant")
    ap.add_argument("--budget", type=float, default=0.05)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--width", type=int, default=96)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--params", type=int, default=100_000_000)
    a = ap.parse_args(argv)
    if a.what == "memory":
        out = memory_child(a.params, a.variant, a.steps)
    else:
        train = hf_train if a.what == "hf" else lightning_train
        out = train(a.variant, a.budget, a.steps, a.width, a.layers)
    print(json.dumps(out))


def run_child(*args):
    env = {**os.environ, "CALIPER_VK_BUDGET": os.environ.get("CALIPER_VK_BUDGET", "")}
    got = subprocess.run([sys.executable, __file__, "--child", *map(str, args)], capture_output=True, text=True,
                         env=env, cwd=ROOT, check=False)
    if got.returncode:
        raise RuntimeError(f"{args}: the child failed:\n{got.stderr[-3000:]}")
    return json.loads(got.stdout.strip().splitlines()[-1])


# -- the rows ---------------------------------------------------------------------------------------
def measure(steps: int, rounds: int, budgets, width: int, layers: int, params: int, mem_steps: int,
            log=print) -> dict:
    rows = {}
    for trainer in TRAINERS:
        for budget in budgets:
            for variant in ("live", "record"):
                ratios = []
                for r in range(rounds):
                    order = ("plain", variant) if r % 2 == 0 else (variant, "plain")  # ABBA
                    t = {v: run_child(trainer, v, "--budget", budget, "--steps", steps, "--width", width,
                                      "--layers", layers) for v in order}
                    ratios.append(float(t[variant]) / float(t["plain"]))
                key = f"{trainer} {variant} at {100 * budget:g}%"
                rows[key] = {"ratio": statistics.median(ratios), "rounds": ratios}
                log(f"{key}: {rows[key]['ratio']:.3f}x (rounds {', '.join(f'{x:.2f}' for x in ratios)})")
    from caliper_vk.record import devstats

    got = {v: run_child("memory", v, "--params", params, "--steps", mem_steps)
           for v in ("plain", "watched", "counted")}
    w = {**got["watched"], "hooks_peak": got["counted"]["hooks_peak"]}
    fixed = 16 * devstats.CHUNK  # one piece's temporaries: float32 values, int32 bins, masks
    rows["memory"] = {"params": params, "bf16_bytes": w["param_bytes"], "hooks_peak_bytes": w["hooks_peak"],
                      "one_percent": 0.01 * w["param_bytes"], "fixed_bytes": fixed,
                      "within": w["hooks_peak"] <= 0.01 * w["param_bytes"] + fixed,
                      "rss_added_bytes": w["rss_added"] - got["plain"]["rss_added"],
                      "rss_peak_reset": w["peak_reset"]}
    m = rows["memory"]
    mb = 2**20
    whole = "" if m["rss_peak_reset"] else " (peak not reset: the whole life's)"
    log(f"watch on {params / 1e6:.0f}M bf16 parameters: its hooks hold at most "
        f"{m['hooks_peak_bytes'] / mb:.1f} MB (1% of the parameters: {m['one_percent'] / mb:.1f} MB, plus one "
        f"piece's temporaries: {fixed / mb:.0f} MB): {'within' if m['within'] else 'OVER'}; peak RSS watched - "
        f"plain: {m['rss_added_bytes'] / mb:+.1f} MB{whole}")
    return {"cpu": cpu_model(), "steps": steps, "rows": rows}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budgets", type=float, nargs="+", default=[0.02, 0.05])
    ap.add_argument("--params", type=int, default=100_000_000)
    ap.add_argument("--tiny", action="store_true", help="a few steps of a small model: checks that it runs")
    ap.add_argument("--close", type=int, nargs=2, metavar=("STEPS", "SERIES"),
                    help="time Recorder.close() of a run this long and wide (nothing else)")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    if a.close:
        print(f"CPU: {cpu_model()}")
        res = {"cpu": cpu_model(), "close": close_case(*a.close)}
        if a.json:
            Path(a.json).write_text(json.dumps(res, indent=1))
        return
    width, layers, params, mem_steps = 96, 3, a.params, 3
    if a.tiny:
        a.steps, a.rounds, a.budgets, width, layers, params, mem_steps = 4, 1, [0.05], 32, 1, 1_000_000, 2
    print(f"CPU: {cpu_model()}")
    res = measure(a.steps, a.rounds, a.budgets, width, layers, params, mem_steps)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
