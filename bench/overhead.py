"""The overhead budget, side by side: three training loops with and without Caliper.

For each loop and each budget (2%, 5%, 10%) one fresh process alternates
blocks of training steps without Caliper (the loop exactly as it would be:
no ``due()``, no ``step()``, no probe) and blocks with it (the loop as the
demo or the callback runs it: ``due()``, the probe forward and the writes
when a frame is due, ``step()`` every step), ``--pairs`` times, each block
``--block`` seconds of steps. Alternating in one process removes the
difference between processes (up to 1.5x on a loaded 2-core VM) from the
comparison; the overhead is the mean step time with Caliper over the mean
without, minus one. The session is open during the plain blocks too (nothing
of it runs then); the frame still drawing at the end of a Caliper block is
waited for outside the timed steps.

Loops: the digits demo's (MLP, batch 128, the bottleneck of all 1,797 digits
drawn as a point cloud); the GPT demo's (its default model, batch 32,
attention of every layer and the logit lens drawn); a Hugging Face GPT-2 built
from a config (2 layers, 64-dim, batch 8 x 64 tokens) drawn through
``caliper_vk.integrations.hf``'s probes (attention of both layers from the
model's own outputs) — the per-step work of ``CaliperCallback``.

    .venv/bin/python bench/overhead.py [--quick] [--json out.json]

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
    step = 0
    for _ in range(warmup):  # pipelines, first frames, allocator
        step += 1
        caliper(step)
        train()
    s.flush()
    times = {"plain": [], "caliper": []}
    frames0, held0 = s.frames, s.held
    # The budget's clock stops during the plain blocks: to the session they did not happen (else
    # each 1.5-s block would look like a validation pass, a frame's credit would be earned in it
    # and spent in the timed Caliper block, and the minimum frame rate would fire as it starts).
    paused = 0.0
    s.budget.clock = lambda: time.perf_counter() - paused
    for _ in range(pairs):
        for variant in ("plain", "caliper"):
            began = time.perf_counter()
            end = began + block_s
            while time.perf_counter() < end:
                t0 = time.perf_counter()
                if variant == "caliper":
                    step += 1
                    caliper(step)
                else:
                    step += 1
                train()
                times[variant].append(time.perf_counter() - t0)
            s.flush()  # the frame in flight, outside the timed steps
            if variant == "plain":
                paused += time.perf_counter() - began
    out = {k: float(np.mean(v)) for k, v in times.items()}
    out.update(steps={k: len(v) for k, v in times.items()}, frames=s.frames - frames0,
               held=s.held - held0, measured=s.budget.measured, status=s.status().line())
    s.close()
    return out


def _pool(runs: list[dict]) -> dict:
    """One figure from several processes' blocks: the step times pooled (weighted by steps), the
    frames and held steps added up, each process's own overhead kept beside."""
    steps = {k: sum(r["steps"][k] for r in runs) for k in ("plain", "caliper")}
    out = {k: sum(r[k] * r["steps"][k] for r in runs) / steps[k] for k in ("plain", "caliper")}
    out.update(steps=steps, frames=sum(r["frames"] for r in runs), held=sum(r["held"] for r in runs),
               measured=float(np.mean([r["measured"] or 0.0 for r in runs])), status=runs[-1]["status"],
               per_process=[r["caliper"] / r["plain"] - 1 for r in runs])
    out["overhead"] = out["caliper"] / out["plain"] - 1
    return out


def measure(pairs: int = 6, block_s: float = 1.5, warmup: int = 20, log=print, processes: int = 2) -> dict:
    res = {"pairs": pairs, "block_s": block_s, "warmup": warmup, "processes": processes,
           "load_before": os.getloadavg()[0], "loops": {}}
    for loop in LOOPS:
        res["loops"][loop] = {}
        for budget in BUDGETS:
            cmd = [sys.executable, __file__, "--child", loop, "--budget", str(budget), "--pairs", str(pairs),
                   "--block", str(block_s), "--warmup", str(warmup)]
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
            log(f"{loop} budget {budget:.0%}: " + (f"overhead {100 * r['overhead']:+.1f}% (processes: "
                + ", ".join(f"{100 * o:+.1f}%" for o in r["per_process"]) + f"), Caliper's own measure "
                f"{100 * r['measured']:.1f}%, {r['frames']} frames in {r['steps']['caliper']} steps"
                if "overhead" in r else r["error"]))
    res["load_after"] = os.getloadavg()[0]
    return res


LOOP_NAMES = {"digits": "digits demo (MLP, batch 128; 1,797-point cloud)",
              "gpt": "GPT demo (default model, batch 32; attention of every layer, logit lens, loss curve)",
              "hf-gpt2": "Hugging Face GPT-2 from a config (2 layers, 64-dim, batch 8 × 64; attention of both "
                         "layers through the HF callback's probes)"}


def lines(res: dict) -> list[str]:
    out = ["## Overhead budget", ""]
    if not res.get("loops"):
        return [*out, "Not measured.", ""]
    out += [
        "`Session(budget=B)` against the same loop without Caliper, in "
        f"{res.get('processes', 1)} fresh process(es) per loop and budget, each running "
        f"{res['pairs']} alternating pairs of {res['block_s']:g}-second blocks (plain, then with Caliper: "
        f"`due()`, the probe and writes when a frame is due, `step()` every step) after {res['warmup']} "
        "warm-up steps with Caliper (bench/overhead.py). Overhead: mean step time with Caliper over the mean "
        "without (the processes' steps pooled), minus one; each process's own figure in brackets. "
        "Caliper's own measure is the share `status()` shows (the training thread's "
        "time in Caliper). 1-minute load average before the runs "
        f"{res['load_before']:.2f}, after {res['load_after']:.2f}"
        + (f"; measured {res['measured']}" if res.get("measured") else "") + ".",
        "",
        "| loop | budget | plain ms/step | with Caliper ms/step | overhead | Caliper's own measure | frames "
        "(steps with Caliper) | within budget + 1 point |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for loop, by_budget in res["loops"].items():
        for budget, r in by_budget.items():
            b = float(budget)
            if "overhead" not in r:
                out.append(f"| {LOOP_NAMES.get(loop, loop)} | {b:.0%} | failed: {r.get('error', '?')} "
                           "| | | | | |")
                continue
            ok = r["overhead"] <= b + 0.01
            out.append(f"| {LOOP_NAMES.get(loop, loop)} | {b:.0%} | {1e3 * r['plain']:.2f} | "
                       f"{1e3 * r['caliper']:.2f} | {100 * r['overhead']:+.1f}%"
                       + (" (" + ", ".join(f"{100 * o:+.1f}%" for o in r["per_process"]) + ")"
                          if r.get("per_process") else "") + " | "
                       f"{100 * (r['measured'] or 0):.1f}% | {r['frames']} ({r['steps']['caliper']}) | "
                       f"{'yes' if ok else 'no'} |")
    out += ["", "Caliper's own measure counts the training thread's time in Caliper (`due()`, writes, "
            "`step()`, the probe forward of a drawn frame) and, on a CPU device such as lavapipe, each "
            "frame's execution (Vulkan timestamps), since the driver draws on the cores the training runs "
            "on. The budget's clock stops during the plain blocks, so that to the session they did not "
            "happen: otherwise each one would earn a frame of credit, spent at the start of the timed block "
            "that follows. The budget yields to the minimum frame rate (`min_fps=0.2`, a frame at least "
            "every 5 s): a loop whose frame costs more than 5 s × the budget gets one every 5 s instead.",
            ""]
    if res.get("note"):  # what the person who ran it read in these figures (kept in results.json)
        out += [res["note"], ""]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", choices=LOOPS)
    ap.add_argument("--budget", type=float, default=0.05)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--block", type=float, default=1.5)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    if a.child:
        print(json.dumps(child(a.child, a.budget, a.pairs, a.block, a.warmup)))
        return
    pairs, block = (3, 1.0) if a.quick else (a.pairs, a.block)
    res = measure(pairs, block, a.warmup, log=lambda m: print(m, file=sys.stderr))
    print("\n".join(lines(res)))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
