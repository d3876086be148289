"""A cursor move in the dashboard's epochs mode against the same move over progress, in one
process (the two dashboards take turns, so a shared machine's load falls on both alike).

The run: ``--steps`` optimizer steps in epochs of ``--epoch-steps`` (``Recorder.end_epoch``), three
scalars logged every step (a loss, a learning rate, a gradient norm), one event a third of the
way in; ``caliper view --all`` on it shows three scalar panels, each with its "epochs" toggle.
One dashboard draws them over progress, the other with ``--epochs`` (every one overlaid: the
last six epochs begun at the cursor, the newest cut at it). Each takes ``--moves`` cursor moves
across the run (WARMUP moves first, not counted), and each frame is split as bench/dashboard.py
splits it: the Dear ImGui + ImPlot build, the draw lists handed to the overlay, the GPU until
the frame is readable. Prints the medians as JSON:
``python bench/dashboard_epochs.py --steps 20000 --epoch-steps 2000``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

WARMUP = 5


def make_run(path: Path, steps: int, epoch_steps: int) -> None:
    import caliper_vk

    rec = caliper_vk.Recorder(path, steps_per_epoch=epoch_steps, host_info=False)
    rng = np.random.default_rng(0)
    for s in range(1, steps + 1):
        rec.advance()
        rec.log({"train/loss": float(2.0 - s / steps + 0.05 * rng.normal()), "lr/group0": 0.1,
                 "grad_norm/global": float(rng.random())})
        if s % epoch_steps == 0:
            rec.end_epoch()
        if s == steps // 3:
            rec.event("loss switched")
    rec.close()


def _frame(dash) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    dash.frame(events=[])
    t1 = time.perf_counter()
    dash.ui._end_frame()
    t2 = time.perf_counter()
    dash.ui.overlay.render(copy=False)
    return t1 - t0, t2 - t1, time.perf_counter() - t2


def measure(run_dir: Path, steps: int, moves: int, size: tuple[int, int]) -> dict:
    from caliper_vk.dashboard.app import Dashboard
    from caliper_vk.record import load_run

    run = load_run(run_dir)
    dashes = {mode: Dashboard([run], size=size, panels=["*"], epochs=mode == "epochs", columns=2)
              for mode in ("progress", "epochs")}
    rows: dict = {mode: [] for mode in dashes}
    try:
        for dash in dashes.values():
            _frame(dash), _frame(dash)
        for i, x in enumerate(np.linspace(0.1, 0.9, moves + WARMUP) * steps):
            for mode, dash in dashes.items():
                dash.cursor = float(x)
                frame = _frame(dash)
                if i >= WARMUP:
                    rows[mode].append(frame)
    finally:
        for dash in dashes.values():
            dash.close()
    out = {"steps": steps, "moves": moves, "size": list(size)}
    for mode, r in rows.items():
        ms = np.array(r) * 1e3
        out[mode] = {"build_ms": float(np.median(ms[:, 0])), "draw_lists_ms": float(np.median(ms[:, 1])),
                     "gpu_ms": float(np.median(ms[:, 2])), "total_ms": float(np.median(ms.sum(1)))}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--epoch-steps", type=int, default=2_000)
    ap.add_argument("--moves", type=int, default=40)
    ap.add_argument("--size", default="1000x700")
    a = ap.parse_args()
    w, h = (int(v) for v in a.size.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        make_run(Path(tmp) / "run", a.steps, a.epoch_steps)
        print(json.dumps(measure(Path(tmp) / "run", a.steps, a.moves, (w, h))))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
