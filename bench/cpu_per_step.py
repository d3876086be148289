"""CPU per drawing step of a point cloud at 2k and 1M points, side by side in one run (issue 25).

The steady frame should do no host work that grows with the data: the fit, the colours and the
counters are the device's, the history's copies are recorded once. This measures it. A live
zero-copy cloud (``caliper_vk.empty((N, 3))``, labels 0-9, the fit automatic, 800 x 600, the
default history), changed in place before every step as a training loop would (``with
panel.writing(): t.copy_(...)``, not timed); per step two figures:

- **training thread**: the calling thread's CPU time inside ``session.step()``
  (``time.thread_time``), the previous frame complete but not yet collected (the step collects
  it: each panel reads its counters back, then draws), as in a loop whose step outlasts a frame;
- **process less GPU**: the process's CPU time, every thread, from the start of ``step()`` to
  the frame's completion (``device.wait()``), less the frame's GPU timestamps
  (``Canvas.gpu_ms()``). On a CPU device (lavapipe) the passes run on the host's cores, so the
  process time holds them; what remains is the host's own work on any thread. Where lavapipe
  runs the passes on one thread (the usual case on a small machine: check with ``top -H``) the
  subtraction is like for like; other load on the machine stretches the timestamps and biases
  this figure low (below zero on a busy box);
- **process less driver threads** (Linux): the same window's process CPU time less the CPU time
  of the threads the session's Vulkan driver started (those that appeared, not Python's, while
  the session was made and drew its first frame; ``/proc/self/task/*/schedstat``, in ns) and less
  the calling thread's own time in the benchmark's wait for the frame. This is the host's work
  on any thread, measured without the timestamps, so load on the machine does not bias it.

The children run with ``OMP_WAIT_POLICY=PASSIVE`` unless it is set. Otherwise torch's OpenMP
workers spin for a while after the loop's own ``copy_``; that copy runs in parallel at 1M points
but not at 2k, so the spin would land in the process's time at 1M only.

Steps start every ``--interval-ms`` (300 ms; sooner never: a step waits for the last frame), as
a training loop's own work paces them. The status line is redrawn on the host when 0.25 s have
passed since the last redraw, by the clock. At 300 ms every step redraws it at both sizes, so
the two pay for it alike. A frame slower than the interval (1M points on a loaded machine) runs
the steps back to back; the table's "steps/s" row shows it.

Each size runs in its own fresh process, ``--rounds`` times, interleaved (2k, 1M, 2k, ...), so
that a burst of load from elsewhere falls on both; a figure is the median of the rounds'
medians, and the ratio 1M / 2k the median of the rounds' ratios. The goal (issue 25): at most
1.2x from 2k to 1M for both figures.

Run: .venv/bin/python bench/cpu_per_step.py [--steps 40] [--rounds 3] [--json out.json]
     .venv/bin/python bench/cpu_per_step.py --tiny  (two small sizes, a few steps: checks that it runs)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recording import cpu_model  # (the one CPU-model reader of bench/)

HERE = Path(__file__).resolve().parent
WARMUP = 10  # past the history ring's first round at 1M points (its chunks made, its copies recorded)
W, H = 800, 600


# -- the child process: one size ----------------------------------------------------------------
def _tasks() -> set[int]:
    """This process's thread ids (Linux; empty elsewhere)."""
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def _run_ns(tids) -> int:
    """Nanoseconds the threads ``tids`` have run on a CPU (a thread gone counts 0)."""
    total = 0
    for tid in tids:
        try:
            total += int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def child(n: int, steps: int, size_px: int, interval_s: float) -> dict:
    import torch

    import caliper_vk as cv

    rng = np.random.default_rng(0)
    a = rng.normal(size=(n, 3)).astype(np.float32)
    sources = [torch.from_numpy(a), torch.from_numpy((a * np.float32(1.01) + np.float32(0.01)))]
    labels = rng.integers(0, 10, n)
    torch.empty(n, 3).copy_(sources[0])  # torch's own threads start now, before the snapshot
    before = _tasks()
    thread_ms, process_ms, gpu_ms, host_ms = [], [], [], []
    with cv.Session(window=False, size=(W, H + 20), budget=None) as s:  # every step draws
        t = cv.empty((n, 3))
        panel = s.attach(t, "pointcloud", labels=labels, point_size_px=size_px)
        s.canvas.profile()
        s.render()
        driver = _tasks() - before - {th.native_id for th in threading.enumerate()}
        start = None
        for i in range(WARMUP + steps):
            if i == WARMUP:
                start = time.perf_counter()
            if start is not None:  # the pace of the loop's own work
                time.sleep(max(0.0, start + (i - WARMUP) * interval_s - time.perf_counter()))
            with panel.writing():
                t.copy_(sources[i % 2])  # the training's own work: not timed
            d0 = _run_ns(driver)
            p0, t0 = time.process_time(), time.thread_time()
            drew = s.step()
            t1 = time.thread_time()
            s.device.wait()  # the frame completes: lavapipe runs its passes now
            p1, t2 = time.process_time(), time.thread_time()
            d1 = _run_ns(driver)
            if not drew:
                raise RuntimeError(f"step {i} did not draw ({s.skipped} skipped): nothing to measure")
            if i >= WARMUP:
                gpu = s.canvas.gpu_ms()
                thread_ms.append((t1 - t0) * 1e3)
                process_ms.append((p1 - p0) * 1e3 - gpu)
                gpu_ms.append(gpu)
                if driver:
                    host_ms.append((p1 - p0 - (t2 - t1)) * 1e3 - (d1 - d0) / 1e6)
        rate = steps / (time.perf_counter() - start)
        path = panel.path
    return {"n": n, "path": path, "thread_ms": thread_ms, "process_less_gpu_ms": process_ms,
            "process_less_driver_ms": host_ms or [float("nan")],
            "gpu_ms": gpu_ms, "steps_per_s": rate}


def run_child(n: int, steps: int, size_px: int, interval_s: float) -> dict:
    env = dict(os.environ)
    env.setdefault("CALIPER_VK_VALIDATION", "0")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see the module docstring
    env.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    out = subprocess.run([sys.executable, __file__, "--child", str(n), str(steps), str(size_px),
                          str(interval_s)],
                         capture_output=True, text=True, env=env, timeout=1800, check=False)
    if out.returncode != 0:
        return {"n": n, "error": (out.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the parent: rounds, medians, the table ----------------------------------------------------
FIGURES = (("thread_ms", "training thread"), ("process_less_gpu_ms", "process less GPU"),
           ("process_less_driver_ms", "process less driver threads"))


def measure(sizes, steps: int, rounds: int, size_px: int, interval_s: float, log=print) -> dict:
    runs: dict[int, list] = {n: [] for n in sizes}
    for r in range(rounds):
        for n in sizes:
            res = run_child(n, steps, size_px, interval_s)
            runs[n].append(res)
            log(f"round {r + 1}, {n:,} points: " + (res["error"] if "error" in res else ", ".join(
                f"{label} {np.median(res[key]):.3f} ms" for key, label in FIGURES)
                + f", GPU {np.median(res['gpu_ms']):.1f} ms"))
    out = {"cpu": cpu_model(), "cores": os.cpu_count(),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "steps": steps, "rounds": rounds, "point_size_px": size_px, "interval_ms": interval_s * 1e3,
           "sizes": {}}
    for n in sizes:
        ok = [r for r in runs[n] if "error" not in r]
        row = {"path": ok[0]["path"] if ok else None, "errors": [r["error"] for r in runs[n] if "error" in r]}
        for key, _ in (*FIGURES, ("gpu_ms", "GPU"), ("steps_per_s", "steps/s")):
            row[key] = float(np.median([np.median(r[key]) for r in ok])) if ok else float("nan")
        out["sizes"][n] = row
    small, large = sizes[0], sizes[-1]
    for key, _ in FIGURES:
        ratios = [np.median(b[key]) / np.median(a[key]) for a, b in zip(runs[small], runs[large], strict=True)
                  if "error" not in a and "error" not in b]
        out[f"ratio_{key}"] = float(np.median(ratios)) if ratios else float("nan")
    return out


def table(res: dict) -> str:
    sizes = list(res["sizes"])
    small, large = sizes[0], sizes[-1]
    lines = [f"CPU: {res['cpu']} ({res['cores']} cores); {res['date']}; {res['steps']} steps x "
             f"{res['rounds']} rounds, a step every {res['interval_ms']:.0f} ms; {res['point_size_px']} px "
             "points, 800 x 600",
             "",
             "| CPU ms per drawing step | " + " | ".join(f"{int(n):,} points" for n in sizes)
             + f" | {int(large):,} / {int(small):,} |",
             "|---|" + "---|" * (len(sizes) + 1)]
    for key, label in FIGURES:
        cells = [f"{res['sizes'][n][key]:.3f}" for n in sizes]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {res[f'ratio_{key}']:.2f}x |")
    lines.append("| (GPU timestamps, subtracted) | " + " | ".join(
        f"{res['sizes'][n]['gpu_ms']:.1f}" for n in sizes) + " | |")
    lines.append("| (steps/s) | " + " | ".join(f"{res['sizes'][n]['steps_per_s']:.1f}" for n in sizes) + " | |")
    for n in sizes:
        if res["sizes"][n]["errors"]:
            lines.append(f"{int(n):,} points failed: {res['sizes'][n]['errors'][0]}")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        n, steps, size_px = (int(v) for v in sys.argv[2:5])
        print(json.dumps(child(n, steps, size_px, float(sys.argv[5]))))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 1_000_000])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--point-size", type=int, default=2)
    ap.add_argument("--interval-ms", type=float, default=300.0, help="a step starts this often (at most)")
    ap.add_argument("--tiny", action="store_true", help="two small sizes, a few steps: checks that it runs")
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()
    if a.tiny:
        a.sizes, a.steps, a.rounds = [2000, 20_000], 3, 1
    print(f"CPU: {cpu_model()}")
    res = measure(a.sizes, a.steps, a.rounds, a.point_size, a.interval_ms / 1e3)
    print(table(res))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
