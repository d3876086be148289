"""Rewind history and the distributed gather: what they cost (figures, not timed tests).

1. History: a point cloud of N points (float32 CPU tensor, imported in place) drawn
   offscreen at 800 x 600, ``Session.render()`` per step, with ``history=None`` and
   with ``history="256MB"`` — two sessions on one device, frames interleaved, so both
   see the same machine load. Reported: median ms per frame each way, the difference
   (the copy into the ring: one ``vkCmdCopyBuffer`` per input, in the frame's own
   submission), the host time spent recording the copies, and the ring's bytes and
   steps kept.
2. Gather: 2 processes on gloo/CPU started by torchrun; each trains the digits MLP
   (batch 128) and, every step, writes a (1797, 3) embedding probe and calls
   ``caliper_vk.step()``; rank 0 draws (offscreen 800 x 600). Reported per rank:
   the training step's median and the median time inside ``caliper_vk.step()``
   (rank 1: pack + hand-off to the sender thread; rank 0: wait for rank 1's message,
   write both ranks' bytes, submit the frame), and the same loop without Caliper.

Run: .venv/bin/python bench/history_gather.py [--quick]
Figures go into bench/results.json ("history_gather") and docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
os.environ.setdefault("CALIPER_VK_VALIDATION", "0")


def history_case(n: int, frames: int) -> dict:
    import torch

    import caliper_vk as cv

    rng = np.random.default_rng(0)
    data = [torch.from_numpy(rng.normal(size=(n, 3)).astype(np.float32)) for _ in range(2)]
    labels = rng.integers(0, 10, n)
    sessions = {name: cv.Session(window=False, size=(800, 600), history=h)
                for name, h in (("off", None), ("on", "256MB"))}
    tensors, panels, times = {}, {}, {"off": [], "on": []}
    for name, s in sessions.items():
        tensors[name] = torch.zeros(n, 3)
        panels[name] = s.attach(tensors[name], "pointcloud", labels=labels)
    for i in range(frames + 3):
        for name in (("off", "on") if i % 2 else ("on", "off")):
            s = sessions[name]
            with panels[name].writing():
                tensors[name].copy_(data[i % 2])
            t0 = time.perf_counter()
            s.render()
            if i >= 3:
                times[name].append(time.perf_counter() - t0)
    h = sessions["on"].history
    # the copy alone: the same command buffer as in a frame, submitted by itself and waited for
    s, copy = sessions["on"], []
    reading = [p for p in s.panels if p.protocol is not None]
    for i in range(frames):
        t0 = time.perf_counter()
        s.device.wait(s.device.submit(h.keep(10_000 + i, reading)))
        copy.append(time.perf_counter() - t0)
    out = {"n": n, "frame_bytes": n * 12, "frames": frames, "copy_ms": 1000 * float(np.median(copy)),
           "off_ms": 1000 * float(np.median(times["off"])), "on_ms": 1000 * float(np.median(times["on"])),
           "record_ms": 1000 * h.copy_s / len(h.frames) if h.frames else 0.0,
           "kept_steps": len(h.frames), "kept_bytes": h.nbytes,
           "ring_allocated": sum(b.size for b in h.chunks if b is not None),
           "summary": h.summary()}
    for s in sessions.values():
        s.close()
    return out


def gather_worker(out: Path, steps: int, use: bool) -> None:
    """One rank of the gather case (run by torchrun)."""
    import torch
    import torch.distributed as dist

    sys.path.insert(0, str(ROOT))
    from caliper_vk.demos.digits import _data, _model

    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo")
    x_np, y_np = _data()
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    embed, head = _model(torch, rank)
    opt = torch.optim.Adam([*embed.parameters(), *head.parameters()], lr=3e-3)
    gen = torch.Generator().manual_seed(rank)
    if use:
        import caliper_vk as cv
        from caliper_vk.live import distributed

        session = cv.Session(window=False, size=(800, 600), max_fps=None) if rank == 0 else None
        distributed.gather(session=session, timeout_s=60)
        pts = torch.zeros(len(x), 3)
        cv.attach(pts, "pointcloud", name="embedding")
    train, inside = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        idx = torch.randint(0, len(x), (128,), generator=gen)
        loss = torch.nn.functional.cross_entropy(head(embed(x[idx])), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        if use:
            with torch.no_grad():
                pts.copy_(embed(x))
            t2 = time.perf_counter()
            cv.step()
            inside.append(time.perf_counter() - t2)
        train.append(t1 - t0)
    if use:
        distributed.gather().close()
    skip = steps // 10
    res = {"rank": rank, "train_ms": 1000 * float(np.median(train[skip:])),
           "step_ms": 1000 * float(np.median(inside[skip:])) if inside else 0.0,
           "step_p90_ms": 1000 * float(np.percentile(inside[skip:], 90)) if inside else 0.0}
    if use and rank == 0:
        g = distributed.gather()
        res.update(frames=g.session.frames, wait_ms=1000 * g.waited_s / steps,
                   write_ms=1000 * g.written_s / steps)
    (out / f"rank{rank}-{'on' if use else 'off'}.json").write_text(json.dumps(res))
    sys.stdout.flush()
    os._exit(0)


def gather_case(steps: int) -> dict:
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for use in ("off", "on", "off", "on"):
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                   str(Path(__file__).resolve()), "--worker", tmp, str(steps), use]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800,
                                  env=dict(os.environ, OMP_NUM_THREADS="1"))
            if done.returncode:
                return {"error": done.stderr[-2000:]}
            for r in (0, 1):
                one = json.loads((Path(tmp) / f"rank{r}-{use}.json").read_text())
                res.setdefault(f"rank{r}-{use}", []).append(one)
    merged = {}
    for key, runs in res.items():
        merged[key] = {k: float(np.median([r[k] for r in runs])) for k in runs[0] if k != "rank"}
    return merged


def report(r: dict) -> list[str]:
    """The docs/benchmarks.md section (bench/suite.py appends it when results.json has it)."""
    lines = ["", "## Rewind history and the distributed gather", "",
             f"Measured {r['measured']} by `bench/history_gather.py`"
             + (" with `--quick`" if r.get("quick") else "")
             + f"; 1-minute load average {r['load_before']:.2f} before and {r['load_after']:.2f} after "
             "(2 cores shared with other work: read the side-by-side differences, not the absolute figures).",
             "", "**History** (`Session(history=\"256MB\")` against `history=None`, the frames of both "
             "sessions interleaved; a point cloud drawn offscreen at 800×600 by `render()`):", "",
             "| points | bytes a frame | ms a frame, off | ms a frame, on | the copy alone | host: recording "
             "the copies | kept (256 MB budget) | ring allocated |", "|---|---|---|---|---|---|---|---|"]
    for h in r["history"]:
        lines.append(f"| {h['n']:,} | {h['frame_bytes'] / 1e6:.3g} MB | {h['off_ms']:.2f} | {h['on_ms']:.2f} | "
                     f"{h['copy_ms']:.3f} ms | {h['record_ms']:.3f} ms | {h['kept_steps']} steps, "
                     f"{h['kept_bytes'] / 1e6:.1f} MB | {h['ring_allocated'] / 1e6:.1f} MB |")
    lines += ["", "*The copy alone*: the frame's history command buffer (one `vkCmdCopyBuffer` per input "
              "into the ring) submitted by itself and waited for, submission included. The ring is "
              "allocated as frames arrive, in 16 chunks of 1/16 of the budget (a frame larger than "
              "that gets chunks of its own size); on lavapipe it is host memory.", ""]
    g = r["gather"]
    if "error" in g:
        return [*lines, f"**Gather**: failed: {g['error'][:300]}", ""]
    lines += ["**Gather** (2 processes, gloo on CPU, torchrun; the digits MLP, batch 128; a (1797, 3) "
              "embedding probe gathered to rank 0 every step, which draws it; medians over "
              f"{int(r['gather_steps'])} steps, 2 runs each way):", "",
              "| rank | training step without Caliper | training step with | inside `caliper_vk.step()` "
              "(p90) | × training step |", "|---|---|---|---|---|"]
    for rank, what in ((0, "0 (renders)"), (1, "1 (sends)")):
        off, on = g[f"rank{rank}-off"], g[f"rank{rank}-on"]
        lines.append(f"| {what} | {off['train_ms']:.2f} ms | {on['train_ms']:.2f} ms | {on['step_ms']:.3f} ms "
                     f"({on['step_p90_ms']:.3f}) | {on['step_ms'] / on['train_ms']:.2f}× |")
    if r["load_before"] > 2 or r["load_after"] > 2:
        lines += ["", "The machine was busy (load above its 2 cores): the training-step medians with and "
                  "without Caliper, taken in separate processes, differ by more than Caliper's own cost and "
                  "in either direction; the time inside `caliper_vk.step()` is the figure to read."]
    r0 = g["rank0-on"]
    lines += ["", "Rank 1 pays for copying its probe into a message and handing it to its sender thread. "
              f"Rank 0's time inside `step()` splits into waiting for rank 1's message of the same step "
              f"({r0.get('wait_ms', float('nan')):.3f} ms a step on average: the ranks' own pace, which the "
              "wait aligns), writing both ranks' bytes into the combined tensor "
              f"({r0.get('write_ms', float('nan')):.3f} ms) and submitting the frame (not waited for).", ""]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        gather_worker(Path(a.worker[0]), int(a.worker[1]), a.worker[2] == "on")
        return
    load_before = os.getloadavg()[0]
    frames = 10 if a.quick else 30
    steps = 100 if a.quick else 300
    res = {"history": [history_case(n, frames) for n in (2_000, 1_000_000)],
           "gather": gather_case(steps), "gather_steps": steps, "quick": a.quick,
           "measured": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "load_before": load_before, "load_after": os.getloadavg()[0]}
    print(json.dumps(res, indent=2), file=sys.stderr)
    path = HERE / "results.json"
    allres = json.loads(path.read_text()) if path.exists() else {}
    allres["history_gather"] = res
    path.write_text(json.dumps(allres, indent=2, default=float))
    sys.path.insert(0, str(HERE))
    import suite

    (ROOT / "docs" / "benchmarks.md").write_text(suite.render(allres))
    print("wrote docs/benchmarks.md and bench/results.json (history_gather)")


if __name__ == "__main__":
    main()
