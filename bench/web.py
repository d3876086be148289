"""A live session in a browser: what a connected tab costs training, and what reaches the page.

1. Training overhead: the digits demo's loop (MLP, batch 128; a 1280×800
   session drawing its 1,797-point cloud, ``max_fps`` "auto" = 30 for a page)
   three ways, each in a fresh process: without Caliper, with
   ``Session(window="web")`` and no tab, and with a headless Chromium tab
   connected. Median step time and ratios.
2. Delivered to the page in the run with a tab: frames the page drew per
   second (its own count), frames the session drew, bytes per frame sent.
3. Encoding one 1280×800 frame of the demo: JPEG (quality 90, 4:4:4, the
   default) and PNG (level 1, ``image_format="png"``): milliseconds and bytes.

The browser runs on the same machine (a remote viewer's decoding would not
cost the training machine anything; here it shares the cores).

Run: .venv/bin/python bench/web.py [--quick]; ./tools/bench --only web puts the
figures into docs/benchmarks.md.
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
os.environ.setdefault("CALIPER_VK_VALIDATION", "0")
SIZE = (1280, 800)


def child(variant: str, steps: int) -> dict:
    """One training run (in its own process): ``plain``, ``draw`` (an offscreen session drawing at
    30 frames a second, no sink: the cost of drawing itself), ``web`` (no tab) or ``web+tab``."""
    import torch

    sys.path.insert(0, str(ROOT))
    from caliper_vk.demos.digits import _data, _model

    x_np, y_np = _data()
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    embed, head = _model(torch, 0)
    opt = torch.optim.Adam([*embed.parameters(), *head.parameters()], lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    browser = tab = s = server = None
    if variant != "plain":
        import caliper_vk as cv

        if variant == "draw":
            s = cv.Session(window=False, size=SIZE, max_fps=30)
        else:
            s = cv.Session(window="web", size=SIZE, port=0)
        pts = cv.empty((len(x), 3))
        panel = s.attach(pts, "pointcloud", labels=y_np)
        server = s.sinks.get("web").server if variant != "draw" else None
        if variant == "web+tab":
            sys.path.insert(0, str(ROOT / "tests"))
            from chromium import Browser

            browser = Browser(width=SIZE[0] + 40, height=SIZE[1] + 80)
            tab = browser.open(s.url)
            deadline = time.monotonic() + 30
            while server.viewers < 1 and time.monotonic() < deadline:
                time.sleep(0.02)
    times, cpu = [], []
    page_frames0 = sent0 = bytes0 = frames0 = 0
    t_start = None
    warmup = 20
    for step in range(steps + warmup):
        if step == warmup:
            t_start = time.perf_counter()
            if server is not None:
                frames0, sent0, bytes0 = s.frames, server.sent, server.bytes_sent
            if tab is not None:
                page_frames0 = tab.eval("window.caliper.frames")
            proc0 = time.process_time()
        t0, c0 = time.perf_counter(), time.thread_time()
        if s is not None:
            if s.due():
                with torch.no_grad(), panel.writing():
                    pts.copy_(embed(x))
            s.step()
        idx = torch.randint(0, len(x), (128,), generator=gen)
        loss = torch.nn.functional.cross_entropy(head(embed(x[idx])), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    wall = time.perf_counter() - t_start
    out = {"times": times[warmup:], "cpu": cpu[warmup:], "wall_s": wall,
           "process_cpu_ms_per_step": 1e3 * (time.process_time() - proc0) / steps}
    if s is not None:
        out.update(frames=s.frames - frames0, sent=server.sent - sent0 if server else 0,
                   bytes_sent=server.bytes_sent - bytes0 if server else 0,
                   published=server.published if server else 0)
        if tab is not None:
            out["page_frames"] = tab.eval("window.caliper.frames") - page_frames0
            out["page_step"] = tab.eval("window.caliper.step")
        s.close()
    if browser is not None:
        browser.close()
    return out


def encoding(repeats: int) -> dict:
    """Milliseconds and bytes to compress one 1280×800 frame of the digits demo."""
    import torch

    import caliper_vk as cv
    from caliper_vk.demos.digits import _data, _model
    from caliper_vk.web import encode

    x_np, y_np = _data()
    embed, _ = _model(torch, 0)
    with cv.Session(window=False, size=SIZE) as s:
        s.attach(embed(torch.from_numpy(x_np)).detach().contiguous(), "pointcloud", labels=y_np)
        rgba = s.render()
    out = {}
    for fmt in ("jpeg", "png"):
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            data = encode(rgba, fmt)
            ts.append(time.perf_counter() - t0)
        out[fmt] = {"ms": 1e3 * float(np.median(ts)), "bytes": len(data)}
    return out


def screenshot(path, steps: int = 400) -> Path:
    """A headless Chromium screenshot of the page of the digits demo's session after ``steps``
    training steps (the picture in docs/remote.md)."""
    import torch

    import caliper_vk as cv
    from caliper_vk.demos.digits import _data, _model

    sys.path.insert(0, str(ROOT / "tests"))
    from chromium import Browser

    x_np, y_np = _data()
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    embed, head = _model(torch, 0)
    opt = torch.optim.Adam([*embed.parameters(), *head.parameters()], lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    width, height = 960, 600
    browser = Browser(width=width, height=height + 130)  # headless keeps ~90 px for its window
    with cv.Session(window="web", size=(width, height), port=0, title="caliper: digits") as s:
        pts = cv.empty((len(x), 3))
        panel = s.attach(pts, "pointcloud", name="bottleneck", labels=y_np)
        tab = browser.open(s.url)
        deadline = time.monotonic() + 30
        while s.sinks.get("web").server.viewers < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        for step in range(steps):
            idx = torch.randint(0, len(x), (128,), generator=gen)
            loss = torch.nn.functional.cross_entropy(head(embed(x[idx])), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if s.due(step) or step == steps - 1:
                with torch.no_grad(), panel.writing():
                    pts.copy_(embed(x))
            s.step(step)
        s.wait_idle()
        time.sleep(0.1)  # past 1/max_fps: the next step draws
        s.step(steps)  # one more frame, so the page's is the last step's
        s.flush()
        tab.wait_for(f"window.caliper.step === {steps}", timeout=60)
        png = tab.screenshot()
    browser.close()
    path = Path(path)
    path.write_bytes(png)
    return path


def stats(xs) -> dict:
    xs = np.asarray(xs)
    q1, med, q3 = np.percentile(xs, [25, 50, 75])
    return {"median_ms": med * 1e3, "iqr_ms": (q3 - q1) * 1e3, "n": int(xs.size)}


def measure(quick: bool = False, rounds: int | None = None) -> dict:
    """The three variants in ``rounds`` interleaved rounds, each run in a fresh process; figures are
    medians over the rounds, ratios the median of each round's ratio (other work on the machine
    shifts a whole round, which the ratio cancels)."""
    steps = 200 if quick else 600
    rounds = rounds or (3 if quick else 5)
    runs: dict = {"plain": [], "draw": [], "web": [], "web+tab": []}
    for _ in range(rounds):
        for variant in runs:
            proc = subprocess.run([sys.executable, __file__, "--child", variant, "--steps", str(steps)],
                                  capture_output=True, text=True, timeout=1800,
                                  env={**os.environ, "CALIPER_VK_VALIDATION": "0"})
            if proc.returncode != 0:
                return {"error": f"{variant}: " + (proc.stderr.strip().splitlines() or ["failed"])[-1]}
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            r["wall_ms"], r["cpu_ms"] = (stats(r[k])["median_ms"] for k in ("times", "cpu"))
            runs[variant].append(r)

    def med(variant, key):
        return float(np.median([r[key] for r in runs[variant]]))

    def ratio(variant, key):
        return float(np.median([r[key] / p[key] for r, p in zip(runs[variant], runs["plain"], strict=True)]))

    out = {"steps": steps, "rounds": rounds, "size": list(SIZE), "encoding": encoding(5 if quick else 15)}
    for v in runs:
        out[v] = {"median_ms": med(v, "wall_ms"), "cpu_ms": med(v, "cpu_ms"),
                  "process_cpu_ms": med(v, "process_cpu_ms_per_step"),
                  "ratio": ratio(v, "wall_ms"), "cpu_ratio": ratio(v, "cpu_ms"),
                  "process_cpu_ratio": ratio(v, "process_cpu_ms_per_step")}
        if v == "plain":
            continue
        last = runs[v][-1]
        sent = sum(r["sent"] for r in runs[v])
        out[v].update(frames_drawn=med(v, "frames"), published=sum(r["published"] for r in runs[v]),
                      bytes_per_frame=sum(r["bytes_sent"] for r in runs[v]) / sent if sent else 0.0,
                      sent=sent, wall_s=last["wall_s"])
        if "page_frames" in last:
            out[v].update(page_frames=med(v, "page_frames"),
                          page_fps=float(np.median([r["page_frames"] / r["wall_s"] for r in runs[v]])),
                          drawn_fps=float(np.median([r["frames"] / r["wall_s"] for r in runs[v]])))
    return out


def lines(w: dict) -> list[str]:
    """The docs/benchmarks.md section."""
    out = ["## A live session in a browser", ""]
    if not w or "error" in w:
        return [*out, f"Not measured: {w.get('error', 'no figures') if w else 'no figures'}", ""]
    tab, none, plain, draw = w["web+tab"], w["web"], w["plain"], w.get("draw")
    out += [
        f"bench/web.py: the digits demo's training loop ({w['steps']} steps after 20 warm-ups, MLP, batch "
        f"128) with a {w['size'][0]}×{w['size'][1]} `Session(window=\"web\")` drawing its 1,797-point "
        "cloud (`max_fps` \"auto\": 30 for a page), each variant in a fresh process, the three in "
        f"{w['rounds']} interleaved rounds: medians over the rounds, and × the median of each round's "
        "ratio to the run without Caliper. The tab is Debian's headless Chromium on the same machine, so "
        "its decoding shares the cores with training (a remote viewer's would not)."
        + (f" Measured {w['measured']}." if w.get("measured") else ""),
        "",
        "Wall time per step is at the mercy of other work on the machine; the CPU time of the training "
        "thread per step (what the loop itself pays) much less so; the process's CPU time per step adds "
        "its other threads (lavapipe's workers drawing, the server's encoder and senders, torch's own).",
        "",
        "| variant | wall ms per step | × | training thread CPU ms per step | × | process CPU ms per step "
        "| × | frames drawn | frames the page drew (per s) | bytes per frame sent |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| without Caliper | {plain['median_ms']:.2f} | 1.00× | {plain['cpu_ms']:.2f} | 1.00× | "
        f"{plain['process_cpu_ms']:.1f} | 1.00× | | | |",
        f"| web session, no tab | {none['median_ms']:.2f} | {none['ratio']:.2f}× | {none['cpu_ms']:.2f} | "
        f"{none['cpu_ratio']:.2f}× | {none['process_cpu_ms']:.1f} | {none['process_cpu_ratio']:.2f}× | "
        f"{none['frames_drawn']:.0f} | none ({none['published']} published: nothing drawn, read back or "
        "encoded) | |",
        f"| web session, a tab connected | {tab['median_ms']:.2f} | {tab['ratio']:.2f}× | "
        f"{tab['cpu_ms']:.2f} | {tab['cpu_ratio']:.2f}× | {tab['process_cpu_ms']:.1f} | "
        f"{tab['process_cpu_ratio']:.2f}× | "
        f"{tab['frames_drawn']:.0f} ({tab['drawn_fps']:.1f}/s) | {tab['page_frames']:.0f} "
        f"({tab['page_fps']:.1f}/s) | {tab['bytes_per_frame'] / 1e3:.0f} kB |",
    ]
    if draw:  # drawing alone, for what the browser adds to it
        out.insert(-2, f"| offscreen session drawing, ≤30 fps, no sink | {draw['median_ms']:.2f} | "
                       f"{draw['ratio']:.2f}× | {draw['cpu_ms']:.2f} | {draw['cpu_ratio']:.2f}× | "
                       f"{draw['process_cpu_ms']:.1f} | {draw['process_cpu_ratio']:.2f}× | "
                       f"{draw['frames_drawn']:.0f} | | |")
    out += ["", "Drawing itself costs the offscreen row (the demo's drawing-only forward, the frame on "
            "lavapipe); what a tab adds is the difference between that row and the tab's: the copy of each "
            "frame to host memory, its hand-over, the JPEG encoding on the server's thread and, on this "
            "machine, Chromium decoding it. On 2 cores shared by torch's two threads, lavapipe, the encoder "
            "and the browser, contention itself costs: torch's OpenMP threads spin while they wait for each "
            "other, so it shows even in the training thread's CPU time. A remote viewer's browser runs "
            "elsewhere.", ""]
    enc = w["encoding"]
    out += [f"Compressing one {w['size'][0]}×{w['size'][1]} frame of the demo (on the server's encoder "
            f"thread, not the training thread): JPEG quality 90, 4:4:4 (the default) "
            f"{enc['jpeg']['ms']:.1f} ms, {enc['jpeg']['bytes'] / 1e3:.0f} kB; PNG level 1 "
            f"(`image_format=\"png\"`, lossless) {enc['png']['ms']:.1f} ms, "
            f"{enc['png']['bytes'] / 1e3:.0f} kB.", ""]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--child", choices=("plain", "draw", "web", "web+tab"))
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--screenshot", help="write a screenshot of the page to this PNG and stop")
    a = ap.parse_args()
    if a.screenshot:
        print(f"wrote {screenshot(a.screenshot)}")
        return
    if a.child:
        print(json.dumps(child(a.child, a.steps)))
        return
    res = measure(a.quick)
    print(json.dumps(res, indent=2, default=float))
    print("\n".join(lines(res)), file=sys.stderr)


if __name__ == "__main__":
    main()
