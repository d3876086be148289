"""Live-attach benchmarks, side by side in one run (ratios, not timed tests).

1. Training overhead: the digits demo's loop (MLP, batch 128) with
   ``panel.writing()`` + ``step()`` every optimizer step vs the same loop
   without Caliper; each variant in a fresh process; ratio of median step times.
   The same for the GPT demo's loop (``gpt_overhead``).
2. Python CPU time per frame per panel (the calling thread's CPU time inside
   ``step()``, which is what the training loop pays) with 1, 10 and 50 panels.
3. Latency from "the tensor has new values" to "an RGBA frame of them exists in
   host memory", for 2,000 and 1,000,000 points (positions + labels, 800 x 600):
   Caliper zero-copy (``caliper_vk.empty``) vs a matplotlib scatter -> PNG ->
   file -> PNG decode round trip of the same data.

Run: .venv/bin/python bench/live.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("CALIPER_VK_VALIDATION", "0")

TRAIN_CHILD = r"""
import json, sys, time, numpy as np, torch
sys.path.insert(0, {root!r})
from caliper_vk.demos.digits import _data, _model
use = {use!r}
forward = {forward!r}
max_fps = {max_fps!r}
steps = {steps}
x_np, y_np = _data()
x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
embed, head = _model(torch, 0)
opt = torch.optim.Adam([*embed.parameters(), *head.parameters()], lr=3e-3)
gen = torch.Generator().manual_seed(0)
if use:
    import caliper_vk as cv
    s = cv.Session(window=False, size=(800, 600), max_fps=max_fps, budget=None)  # every frame it can
    pts = cv.empty((len(x), 3))
    panel = s.attach(pts, "pointcloud", labels=y_np)
times = []
for step in range(steps):
    t0 = time.perf_counter()
    if use:
        if s.due():  # the demo's loop: the embedding forward only when it will be drawn
            with torch.no_grad(), panel.writing():
                pts.copy_(embed(x))
        s.step()
    elif forward:
        with torch.no_grad():
            embed(x)  # what the demo computes to have something to draw
    idx = torch.randint(0, len(x), (128,), generator=gen)
    loss = torch.nn.functional.cross_entropy(head(embed(x[idx])), y[idx])
    opt.zero_grad(); loss.backward(); opt.step()
    times.append(time.perf_counter() - t0)
out = dict(times=times[20:])
if use:
    st = s.status()
    out.update(frames=st.frames, skipped=st.skipped, held=st.held, wait_ms=st.producer_wait_ms)
    s.close()
print(json.dumps(out))
"""


GPT_CHILD = r"""
import json, sys, time
from pathlib import Path
import numpy as np, torch
sys.path.insert(0, {root!r})
from caliper_vk.demos import shakespeare
from caliper_vk.demos.chargpt import CharData, CharGPT, Config, logit_lens
from caliper_vk.demos.gpt import probe_window
variant, steps, warmup = {variant!r}, {steps}, {warmup}
cached = shakespeare.cache_dir() / shakespeare.CACHE_NAME
text_path = cached if cached.exists() else Path({root!r}) / "tests" / "data" / "sonnets.txt"
text = text_path.read_text(encoding="utf-8")
torch.manual_seed(0)
data = CharData(text)
cfg = Config(vocab_size=len(data.vocab))  # the demo's default model
net = CharGPT(cfg)
opt = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=0.01)
gen = torch.Generator().manual_seed(0)
probe = probe_window(text, cfg.context)
probe_ids = data.encode(probe)[None]
n_lens = min(32, cfg.context)
if variant.startswith("caliper"):  # what caliper_vk.demos.gpt.run attaches (offscreen, nothing saved)
    import caliper_vk as cv
    from caliper_vk.views import Curve
    s = cv.Session(window=False, size=(1200, 860), max_fps=60 if variant == "caliper60" else None,
                   budget=None)  # every frame it can (bench/overhead.py measures the budget)
    attn = [cv.empty((cfg.n_head, cfg.context, cfg.context)) for _ in range(cfg.n_layer)]
    attn_panels = [s.attach(a, "images", normalize="tile", colormap="magma", name=f"attention L{{i + 1}}")
                   for i, a in enumerate(attn)]
    lens = cv.empty((cfg.n_layer + 1, n_lens))
    lens_panel = s.attach(lens, "textgrid", name="logit lens",
                          ids=np.zeros((cfg.n_layer + 1, n_lens), np.int64), vocab=data.vocab,
                          row_labels=[f"L{{i}}" for i in range(cfg.n_layer + 1)],
                          col_labels=probe[:n_lens])
    loss_view = Curve(smoothing=0.95)
    s.add(loss_view, name="loss (raw + EMA)")
losses, times = [], []
for step in range(steps + warmup):
    t0 = time.perf_counter()
    drawing = variant.startswith("caliper") and s.due(step)  # as the demo: probe only what is drawn
    if variant == "plain+forward" or drawing:  # the probe forward: attention and the logit lens
        net.eval()
        with torch.no_grad():
            _, residuals, attentions = net(probe_ids, trace=True)
            top, ids = logit_lens(net, residuals)
    if drawing:
        for panel, buf, a in zip(attn_panels, attn, attentions):
            with panel.writing():
                buf.copy_(a[0])
        with lens_panel.writing():
            lens.copy_(top[:, :n_lens])
        lens_panel.view.set_tokens(ids=ids[:, :n_lens], vocab=data.vocab)
        if losses:
            loss_view.set_data(np.asarray(losses, np.float32))
    if variant.startswith("caliper"):
        s.step(step)
    net.train()
    x, y = data.batch(32, cfg.context, gen)
    loss = net.loss(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
    opt.step()
    losses.append(float(loss.item()))
    times.append(time.perf_counter() - t0)
out = dict(times=times[warmup:], text=text_path.name, vocab=len(data.vocab),
           params=sum(p.numel() for p in net.parameters()))
if variant.startswith("caliper"):
    s.flush()
    st = s.status()
    out.update(frames=st.frames, skipped=st.skipped, held=st.held, wait_ms=st.producer_wait_ms)
    s.close()
print(json.dumps(out))
"""


def stats(xs) -> dict:
    xs = np.asarray(xs)
    q1, med, q3 = np.percentile(xs, [25, 50, 75])
    return {"median_ms": med * 1e3, "iqr_ms": (q3 - q1) * 1e3, "n": int(xs.size)}


def training_overhead(steps: int) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    res = {}
    for name, use, forward, max_fps in (("plain", False, False, None), ("plain+forward", False, True, None),
                                        ("caliper", True, True, None), ("caliper60", True, True, 60)):
        code = TRAIN_CHILD.format(root=root, use=use, forward=forward, steps=steps, max_fps=max_fps)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        res[name] = json.loads(out.stdout.strip().splitlines()[-1])
    return _overhead(res)


def _overhead(res: dict) -> dict:
    """Medians, ratios and frame counts of the plain / plain+forward / caliper / caliper60 runs."""
    plain, fwd = stats(res["plain"]["times"]), stats(res["plain+forward"]["times"])
    out = {"plain": plain, "plain+forward": fwd}
    for v, suffix in (("caliper", ""), ("caliper60", "_60fps")):
        s = stats(res[v]["times"])
        out[v] = s
        out["ratio" + suffix] = s["median_ms"] / plain["median_ms"]
        out["ratio_vs_forward" + suffix] = s["median_ms"] / fwd["median_ms"]
        out["frames" + suffix], out["skipped" + suffix] = res[v]["frames"], res[v]["skipped"]
        out["held" + suffix], out["writer_wait_ms" + suffix] = res[v]["held"], res[v]["wait_ms"]
    return out


def gpt_overhead(steps: int, warmup: int = 20) -> dict:
    """The GPT demo's loop (its default model, batch 32) three ways, each in a fresh process:
    the training step alone; plus the probe forward the demo draws (attention, logit lens);
    plus Caliper (the demo's panels written under ``panel.writing()`` and ``step()`` every
    step). The demo's text samples (every 100 steps) are left out of all three."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    res = {}
    for variant in ("plain", "plain+forward", "caliper", "caliper60"):
        code = GPT_CHILD.format(root=root, variant=variant, steps=steps, warmup=warmup)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        res[variant] = json.loads(out.stdout.strip().splitlines()[-1])
    return {**_overhead(res), "text": res["plain"]["text"], "vocab": res["plain"]["vocab"],
            "params": res["plain"]["params"], "warmup": warmup}


def cpu_per_panel(counts, frames: int) -> dict:
    import torch

    import caliper_vk as cv

    out = {}
    for n in counts:
        with cv.Session(window=False, size=(1280, 800), budget=None) as s:  # every step draws
            for i in range(n):
                t = cv.empty((2000, 3))
                t.copy_(torch.randn(2000, 3))
                s.attach(t, "pointcloud", name=f"p{i}")
            s.render()
            cpu = []
            for _ in range(frames):
                # the previous frame has completed and is not collected yet, as in a training
                # loop: the step collects it (each panel reads its counters back), then draws
                s.device.wait()
                t0 = time.thread_time()
                s.step()
                cpu.append(time.thread_time() - t0)
            s.flush()
            floor = submit_floor(s, frames)
        st = stats(cpu)
        out[n] = {"cpu_ms_per_frame": st["median_ms"], "cpu_ms_per_panel": st["median_ms"] / n,
                  "floor_ms": stats(floor)["median_ms"]}
    return out


def submit_floor(s, frames: int) -> list[float]:
    """The floor of a frame on the calling thread: a fence reset and one ``vkQueueSubmit`` of the
    same frame's two command buffers (no semaphores, no Python around it), timed as the frames
    are, right after the previous one completed."""
    import vulkan as vk

    ffi, lib, dev = vk.ffi, vk.lib, s.device
    canvas = s.canvas
    cbs = ffi.new("VkCommandBuffer[]", [canvas._reads_recorder.handle, canvas._recorder.handle])
    info = ffi.new("VkSubmitInfo *", {"sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, "commandBufferCount": 2,
                                      "pCommandBuffers": cbs})
    fence = vk.vkCreateFence(dev.handle, vk.VkFenceCreateInfo(flags=vk.VK_FENCE_CREATE_SIGNALED_BIT), None)
    fences = ffi.new("VkFence[1]", [fence])
    out = []
    try:
        for _ in range(frames):
            lib.vkWaitForFences(dev.handle, 1, fences, vk.VK_TRUE, 10**10)
            t0 = time.thread_time()
            lib.vkResetFences(dev.handle, 1, fences)
            lib.vkQueueSubmit(dev.queue, 1, info, fence)
            out.append(time.thread_time() - t0)
        lib.vkWaitForFences(dev.handle, 1, fences, vk.VK_TRUE, 10**10)
    finally:
        vk.vkDestroyFence(dev.handle, fence, None)
    return out


def latency(n: int, repeats: int) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch
    from PIL import Image

    import caliper_vk as cv

    rng = np.random.default_rng(0)
    data = [torch.from_numpy(rng.normal(size=(n, 3)).astype(np.float32)) for _ in range(2)]
    labels = rng.integers(0, 10, n)
    res = {}
    with cv.Session(window=False, size=(800, 600)) as s:
        pts = cv.empty((n, 3))
        panel = s.attach(pts, "pointcloud", labels=labels, point_size_px=2)
        times = []
        for i in range(repeats + 3):
            t0 = time.perf_counter()
            with panel.writing():
                pts.copy_(data[i % 2])  # "the tensor has new values"
            s.render()  # ... an RGBA frame of them in host memory
            times.append(time.perf_counter() - t0)
        res["caliper zero-copy"] = stats(times[3:])
    times = []
    reps = repeats if n <= 100_000 else max(5, repeats // 5)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "frame.png")
        fig = plt.figure(figsize=(8, 6), dpi=100)
        ax = fig.add_axes((0, 0, 1, 1), projection="3d")
        for i in range(reps + 1):
            t0 = time.perf_counter()
            ax.cla()
            p = data[i % 2].numpy()
            ax.scatter(p[:, 0], p[:, 1], p[:, 2], c=labels, cmap="tab10", s=2)
            fig.savefig(path)
            rgba = np.asarray(Image.open(path).convert("RGBA"))
            times.append(time.perf_counter() - t0)
        plt.close(fig)
        assert rgba.shape[:2] == (600, 800)
    res["matplotlib round trip"] = stats(times[1:])
    res["ratio"] = res["matplotlib round trip"]["median_ms"] / res["caliper zero-copy"]["median_ms"]
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", help="write raw figures here")
    args = ap.parse_args()
    steps = 200 if args.quick else 600
    figures = {"training": training_overhead(steps),
               "cpu_per_panel": cpu_per_panel((1, 10, 50), 15 if args.quick else 30),
               "latency_2k": latency(2_000, 15 if args.quick else 25),
               "latency_1m": latency(1_000_000, 15)}
    from caliper_vk.engine import default_device

    info = default_device().info
    print(f"device: {info.name} ({info.kind}), {info.driver_info}")
    t = figures["training"]
    print(f"training step (digits, batch 128): plain {t['plain']['median_ms']:.2f} ms, plain + the "
          f"embedding forward of all 1,797 digits {t['plain+forward']['median_ms']:.2f} ms, with "
          f"Caliper {t['caliper']['median_ms']:.2f} ms -> ratio {t['ratio']:.2f} "
          f"({t['ratio_vs_forward']:.2f} vs plain+forward) "
          f"({t['frames']} frames drawn, {t['skipped']} skipped, writer waited "
          f"{t['writer_wait_ms']:.2f} ms/write)")
    for n, r in figures["cpu_per_panel"].items():
        print(f"python CPU per frame, {n:2d} panels: {r['cpu_ms_per_frame']:.2f} ms "
              f"({r['cpu_ms_per_panel']:.3f} ms per panel)")
    for key in ("latency_2k", "latency_1m"):
        r = figures[key]
        print(f"{key}: caliper {r['caliper zero-copy']['median_ms']:.1f} ms "
              f"(IQR {r['caliper zero-copy']['iqr_ms']:.1f}), matplotlib round trip "
              f"{r['matplotlib round trip']['median_ms']:.1f} ms "
              f"(n={r['matplotlib round trip']['n']}) -> matplotlib/caliper {r['ratio']:.1f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2, default=float)


if __name__ == "__main__":
    main()
