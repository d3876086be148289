"""The overhead budget, side by side: three training loops with and without Caliper.

For each loop and each budget (2%, 5%, 10%) fresh processes alternate short
blocks of training steps without Caliper (the loop exactly as it would be:
no ``due()``, no ``step()``, no probe) and blocks with it (the loop as the
demo or the callback runs it: ``due()``, the probe forward and the writes
when a frame is due, ``step()`` every step), in ABBA order, many times.
Alternating in one process removes the difference between processes (up to
1.5x on a loaded 2-core VM) from the comparison, and short blocks many times
over average out the box's wandering speed. A block with Caliper ends by
waiting for the frame it drew last; the wait is the block's. The figure is
the budget's own: Caliper's share of the loop's wall time, 1 - plain / with.
The session is open during the plain blocks too (nothing of it runs then).

Loops: the digits demo's (MLP, batch 128, the bottleneck of all 1,797 digits
drawn as a point cloud); the GPT demo's (its default model, batch 32,
attention of every layer and the logit lens drawn); a Hugging Face GPT-2 built
from a config (2 layers, 64-dim, batch 8 x 64 tokens) drawn through
``caliper_vk.integrations.hf``'s probes (attention of both layers from the
model's own outputs) — the per-step work of ``CaliperCallback``.

    .venv/bin/python bench/overhead.py [--quick | --scale S] [--json out.json]
    .venv/bin/python bench/overhead.py --child digits --budget 0.1 --pairs 300 --block 0.1

Not a test: nothing asserts a duration.
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
BUDGETS = (0.02, 0.05, 0.10)
LOOPS = ("digits", "gpt", "hf-gpt2")
# Block length and seconds of blocks per process, per loop: blocks a few steps long, so that the
# two variants alternate many times (the box's speed wanders by 10-15% between any two blocks, at
# every block length tried from 0.1 s to 1.5 s: more, shorter pairs average it out).
BLOCK_S = {"digits": 0.1, "gpt": 0.6, "hf-gpt2": 0.3}
SECONDS = {"digits": 60.0, "gpt": 30.0, "hf-gpt2": 30.0}


# -- the loops: each returns (train_step(), caliper_step(step), session) ---------------------------
def digits_loop(budget):
    import torch

    import caliper_vk as cv
    from caliper_vk.demos.digits import _data, _model

    x_np, y_np = _data()
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    embed, head = _model(torch, 0)
    opt = torch.optim.Adam([*embed.parameters(), *head.parameters()], lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    s = cv.Session(window=False, size=(800, 600), budget=budget)
    pts = cv.empty((len(x), 3))
    panel = s.attach(pts, "pointcloud", labels=y_np)

    def train():
        idx = torch.randint(0, len(x), (128,), generator=gen)
        loss = torch.nn.functional.cross_entropy(head(embed(x[idx])), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()

    def caliper(step):
        if s.due(step):  # the demo's loop: the embedding forward only when it will be drawn
            with torch.no_grad(), panel.writing():
                pts.copy_(embed(x))
        s.step(step)

    return train, caliper, s


def gpt_loop(budget):
    import torch

    import caliper_vk as cv
    from caliper_vk.demos import shakespeare
    from caliper_vk.demos.chargpt import CharData, CharGPT, Config
    from caliper_vk.demos.gpt import probe_window, write_probes
    from caliper_vk.views import Curve

    cached = shakespeare.cache_dir() / shakespeare.CACHE_NAME
    text = (cached if cached.exists() else ROOT / "tests" / "data" / "sonnets.txt").read_text(encoding="utf-8")
    torch.manual_seed(0)
    data = CharData(text)
    cfg = Config(vocab_size=len(data.vocab))
    net = CharGPT(cfg)
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=0.01)
    gen = torch.Generator().manual_seed(0)
    probe = probe_window(text, cfg.context)
    probe_ids = data.encode(probe)[None]
    n_lens = min(32, cfg.context)
    s = cv.Session(window=False, size=(1200, 860), budget=budget)
    attn = [cv.empty((cfg.n_head, cfg.context, cfg.context)) for _ in range(cfg.n_layer)]
    attn_panels = [s.attach(a, "images", normalize="tile", colormap="magma", name=f"attention L{i + 1}")
                   for i, a in enumerate(attn)]
    lens = cv.empty((cfg.n_layer + 1, n_lens))
    lens_panel = s.attach(lens, "textgrid", name="logit lens",
                          ids=np.zeros((cfg.n_layer + 1, n_lens), np.int64), vocab=data.vocab,
                          row_labels=[f"L{i}" for i in range(cfg.n_layer + 1)], col_labels=probe[:n_lens])
    loss_view = Curve(smoothing=0.95)
    s.add(loss_view, name="loss (raw + EMA)")
    losses = []

    def train():
        net.train()
        xb, yb = data.batch(32, cfg.context, gen)
        loss = net.loss(xb, yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.item()))

    def caliper(step):
        if s.due(step):  # as the demo: the probe forward only when it is drawn
            write_probes(net, probe_ids, attn_panels, attn, lens_panel, lens, data.vocab)
            loss_view.set_data(np.asarray(losses, np.float32))
        s.step(step)

    return train, caliper, s


def hf_loop(budget):
    import torch
    import transformers

    import caliper_vk as cv
    from caliper_vk.integrations.hf import _HFProbes

    transformers.logging.set_verbosity_error()
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=64,
                                  bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    s = cv.Session(window=False, size=(960, 640), budget=budget)
    probes = _HFProbes(attention=True, session=s, loss_curve=False, record_every=0)
    probes.start(model, opt)

    def batch():
        return torch.randint(0, 512, (8, 64), generator=gen)

    probes.saw_batch({"input_ids": batch()})

    def train():
        ids = batch()
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return train, probes.after_step, s


def child(loop: str, budget: float, pairs: int, block_s: float, warmup: int) -> dict:
    train, caliper, s = {"digits": digits_loop, "gpt": gpt_loop, "hf-gpt2": hf_loop}[loop](budget)
    clock = time.perf_counter
    step = 0
    for _ in range(warmup):  # pipelines, first frames, allocator
        step += 1
        caliper(step)
        train()
    s.flush()
    blocks = {"plain": [], "caliper": []}  # (seconds, steps) of each block
    frames0, held0 = s.frames, s.held
    # The budget's clock stops during the plain blocks: to the session they did not happen (else
    # each block would earn a frame of credit, spent in the Caliper block that follows). It stops
    # too while a Caliper block's last frame is waited for: the block pays for that wait, the
    # session sees its frame as one that ran beside the next steps (its timestamps still count).
    paused = 0.0
    s.budget.clock = lambda: clock() - paused
    for i in range(pairs):
        # ABBA: plain first in even pairs, Caliper first in odd ones (a drift cancels in each four)
        for variant in ("plain", "caliper") if i % 2 == 0 else ("caliper", "plain"):
            began = clock()
            end = began + block_s
            n = 0
            if variant == "caliper":
                while n == 0 or clock() < end:  # a step at least
                    step += 1
                    caliper(step)
                    train()
                    n += 1
                waiting = clock()
                # the frame drawn in this block is this block's cost; the next step collects it,
                # as in a loop (not flush(), which would also read the whole canvas back)
                s.device.wait()
                paused += clock() - waiting
            else:
                while n == 0 or clock() < end:  # a step at least
                    step += 1
                    train()
                    n += 1
                paused += clock() - began
            blocks[variant].append((clock() - began, n))
    out = {k: sum(t for t, _ in v) / sum(n for _, n in v) for k, v in blocks.items()}
    out.update(steps={k: sum(n for _, n in v) for k, v in blocks.items()}, frames=s.frames - frames0,
               held=s.held - held0, measured=s.budget.measured, status=s.status().line(),
               pairs=[[p[0] / p[1], c[0] / c[1]]
                      for p, c in zip(blocks["plain"], blocks["caliper"], strict=True)])
    s.close()
    return out


STALL = 3.0  # a pair whose block ran this many times its variant's median is left out


def _pool(runs: list[dict]) -> dict:
    """One figure from several processes' blocks: the mean step time of each variant over the pairs
    kept, the frames and held steps added up, each process's own share kept beside. The share is the
    budget's own definition: the part of the loop's wall time that was Caliper's, 1 - plain / with.

    A pair is left out when either of its blocks ran ``STALL`` times its variant's median block
    (the box stalled the process: 0.1-s blocks of 2-ms steps were seen at 190 ms a step while other
    work had the cores; a frame adds a few ms to a block); how many is reported."""
    kept, per_process = [], []
    for r in runs:
        pairs = np.asarray(r["pairs"], float)
        med = np.median(pairs, axis=0)
        ok = (pairs <= STALL * med).all(axis=1)
        kept.append(pairs[ok])
        per_process.append(1 - pairs[ok, 0].mean() / pairs[ok, 1].mean())
    pairs = np.concatenate(kept)
    plain, caliper = pairs[:, 0].mean(), pairs[:, 1].mean()
    d = pairs[:, 1] - pairs[:, 0]
    return {"plain": float(plain), "caliper": float(caliper), "share": float(1 - plain / caliper),
            "slowdown": float(caliper / plain - 1),
            # the share's standard error, from the pairs' differences (delta method)
            "share_se": float(d.std() / np.sqrt(len(d)) / caliper),
            "pairs": len(pairs), "left_out": sum(len(r["pairs"]) for r in runs) - len(pairs),
            "steps": {k: sum(r["steps"][k] for r in runs) for k in ("plain", "caliper")},
            "frames": sum(r["frames"] for r in runs), "held": sum(r["held"] for r in runs),
            "measured": float(np.mean([r["measured"] or 0.0 for r in runs])), "status": runs[-1]["status"],
            "per_process": [float(x) for x in per_process]}


def measure(scale: float = 1.0, warmup: int = 20, log=print, processes: int = 2) -> dict:
    """Each loop and budget in ``processes`` fresh processes of ``SECONDS[loop] * scale`` seconds of
    blocks each."""
    res = {"block_s": BLOCK_S, "seconds": {k: v * scale for k, v in SECONDS.items()}, "warmup": warmup,
           "processes": processes, "load_before": os.getloadavg()[0], "loops": {}}
    for loop in LOOPS:
        res["loops"][loop] = {}
        pairs = max(2, round(SECONDS[loop] * scale / (2 * BLOCK_S[loop])))
        for budget in BUDGETS:
            cmd = [sys.executable, __file__, "--child", loop, "--budget", str(budget), "--pairs", str(pairs),
                   "--block", str(BLOCK_S[loop]), "--warmup", str(warmup)]
            runs, error = [], None
            for _ in range(processes):  # a process's plain steps differ from the next one's
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800,
                                      env={**os.environ, "CALIPER_VK_VALIDATION": "0"})
                if proc.returncode != 0:
                    error = (proc.stderr.strip().splitlines() or ["failed"])[-1]
                    break
                runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            r = {"error": error} if error else _pool(runs)
            res["loops"][loop][str(budget)] = r
            log(f"{loop} budget {budget:.0%}: " + (
                f"share {100 * r['share']:.1f}% ± {100 * r['share_se']:.1f} (processes: "
                + ", ".join(f"{100 * o:.1f}%" for o in r["per_process"]) + f"), slowdown "
                f"{100 * r['slowdown']:+.1f}%, Caliper's own measure {100 * r['measured']:.1f}%, "
                f"{r['frames']} frames in {r['steps']['caliper']} steps, {r['left_out']} of "
                f"{r['pairs'] + r['left_out']} pairs left out" if "share" in r else r["error"]))
    res["load_after"] = os.getloadavg()[0]
    return res


LOOP_SHORT = {"digits": "digits", "gpt": "GPT demo", "hf-gpt2": "GPT-2"}
LOOP_NAMES = {"digits": "digits demo (MLP, batch 128; 1,797-point cloud)",
              "gpt": "GPT demo (default model, batch 32; attention of every layer, logit lens, loss curve)",
              "hf-gpt2": "Hugging Face GPT-2 from a config (2 layers, 64-dim, batch 8 × 64; attention of both "
                         "layers through the HF callback's probes)"}


def lines(res: dict) -> list[str]:
    out = ["## Overhead budget", ""]
    if not res.get("loops") or "block_s" not in res or not isinstance(res["block_s"], dict):
        return [*out, "Not measured.", ""]
    blocks = "; ".join(f"{LOOP_SHORT[k]} {res['block_s'][k]:g} s blocks, {res['seconds'][k]:g} s of them"
                       for k in LOOPS)
    out += [
        "`Session(budget=B)` against the same loop without Caliper (bench/overhead.py). For each loop "
        f"and budget, {res.get('processes', 1)} fresh process(es), each alternating short blocks of "
        "steps without Caliper and with it (`due()`, the probe and writes when a frame is due, `step()` "
        f"every step), in ABBA order, after {res['warmup']} warm-up steps with Caliper ({blocks}). A "
        "block with Caliper ends by waiting for its last frame, and that wait is the block's. "
        "**Share**: Caliper's part of the loop's wall time, 1 − (mean plain step) / (mean step with "
        "Caliper), each mean taken over the blocks of the pairs kept, all processes together; this is "
        "what the budget bounds. ± is its standard error from the pairs' spread; each process's own "
        "share is in brackets. **Slowdown**: mean step with Caliper over mean plain step, minus one; a "
        "share of 10% is a slowdown of 11.1%. **Caliper's own measure**: the share `status()` shows. "
        f"A pair is left out when either block ran {STALL:g}× its variant's median (the box stalled the "
        "process). 1-minute load average before the runs "
        f"{res['load_before']:.2f}, after {res['load_after']:.2f}"
        + (f"; measured {res['measured']}" if res.get("measured") else "") + ".",
        "",
        "| loop | budget | plain ms/step | with Caliper ms/step | share | slowdown | Caliper's own measure "
        "| frames (steps with Caliper) | pairs (left out) | share within budget + 1 point |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for loop, by_budget in res["loops"].items():
        for budget, r in by_budget.items():
            b = float(budget)
            if "share" not in r:
                out.append(f"| {LOOP_NAMES.get(loop, loop)} | {b:.0%} | failed: {r.get('error', '?')} "
                           "| | | | | | | |")
                continue
            out.append(f"| {LOOP_NAMES.get(loop, loop)} | {b:.0%} | {1e3 * r['plain']:.2f} | "
                       f"{1e3 * r['caliper']:.2f} | {100 * r['share']:.1f}% ± {100 * r['share_se']:.1f} ("
                       + ", ".join(f"{100 * o:.1f}%" for o in r["per_process"]) + ") | "
                       f"{100 * r['slowdown']:+.1f}% | {100 * (r['measured'] or 0):.1f}% | "
                       f"{r['frames']} ({r['steps']['caliper']}) | {r['pairs']} ({r['left_out']}) | "
                       f"{'yes' if within(r, b) else 'no'} |")
    out += ["", "Caliper's own measure counts the training thread's time in Caliper (`due()`, writes, "
            "`step()`, the probe forward of a drawn frame) and, on a CPU device such as lavapipe, each "
            "frame's execution (Vulkan timestamps, or what the training measurably lost while it ran when "
            "that is more), since the driver draws on the cores the training runs on. The budget's clock "
            "stops during the plain blocks, so that to the session they did not happen: otherwise each one "
            "would earn a frame of credit, spent at the start of the block with Caliper that follows. The "
            "budget yields to the minimum frame rate (`min_fps=0.2`, a frame at least every 5 s): a loop "
            "whose frame costs more than 5 s × the budget gets one every 5 s instead. This box's speed "
            "wanders by 10-15% between any two blocks, whatever their length (0.1 to 1.5 s tried): hence "
            "many short pairs, and the standard error beside each share.",
            ""]
    if res.get("note"):  # what the person who ran it read in these figures (kept in results.json)
        out += [res["note"], ""]
    return out


def within(r: dict, budget: float) -> bool:
    """The target: Caliper's share of the loop's time at most the budget plus one point."""
    return r["share"] <= budget + 0.01


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", choices=LOOPS)
    ap.add_argument("--budget", type=float, default=0.05)
    ap.add_argument("--pairs", type=int, default=100, help="with --child: pairs of blocks")
    ap.add_argument("--block", type=float, default=0.1, help="with --child: seconds a block")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--scale", type=float, default=1.0, help="the seconds of blocks a process runs, scaled")
    ap.add_argument("--quick", action="store_true", help="a quarter of the seconds")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    if a.child:
        print(json.dumps(child(a.child, a.budget, a.pairs, a.block, a.warmup)))
        return
    res = measure(0.25 if a.quick else a.scale, a.warmup, log=lambda m: print(m, file=sys.stderr))
    print("\n".join(lines(res)))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
