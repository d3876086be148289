"""Dashboard benchmarks: a 1,000,000-step run opened by ``caliper view``, cursor moves, peak RSS.

``make_run(dir)`` writes the run's ``run.json`` once (bench/suite.py keeps it in a
temporary directory for all the dashboard cases): built in memory and written by
``Run.save``, the code ``Recorder.close()`` writes it with (a million ``log()``
calls would only make the suite slower). Each measurement then runs in a fresh
process (``python bench/cases.py dashboard_open --run DIR`` and
``dashboard_cursor``), drawing offscreen as ``caliper view --png`` does.

The run: 1,000,000 optimizer steps (steps_per_epoch 1,000) with ten scalars
recorded at every step, plus validation every 1,000 steps. With ``--all``
the dashboard shows 20 panels:

- 10 dense panels, one 1,000,000-point series each: Loss (train/loss, with
  the sparse val/loss and its best-so-far marks), Task metrics (train/acc
  with the sparse val/acc), Learning rate, Gradient norm (global), Gradient
  norm per parameter, Weight norm, Update / weight ratio, Throughput, Step
  time split, Memory;
- 4 sparse scalar panels (1,000 points each): activation std, zero fraction,
  dead units, the plateau counter;
- 3 histogram panels (weights of three layers, 12 bins, 1,000 frames each);
- 2 array panels (a 16x32 hidden state and a 4-head 16x16 attention probe,
  100 frames each, drawn by the engine into textures);
- 1 confusion panel (10 classes, 100 frames, with recall/precision over time).
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

STEPS = 1_000_000
SPE = 1_000
VAL_EVERY = 1_000
PROBE_EVERY = 10_000
SIZE = (2400, 1400)  # five columns of panels x four rows: all 20 on screen at once
COLUMNS = 5
WARMUP = 5

DENSE = ("train/loss", "train/acc", "lr/group0", "grad_norm/global", "grad_norm/fc1.weight",
         "weight_norm/global", "update_ratio/global", "throughput/examples_per_s", "time/compute_ms",
         "memory/rss_bytes")
SPARSE = ("val/loss", "val/acc", "act/std/relu1", "act/zero_frac/relu1", "act/dead_frac/relu1",
          "plateau/count")
HISTS = ("weights/fc1.weight", "weights/fc2.weight", "weights/fc3.weight")


def make_run(path) -> dict:
    """Write the benchmark run's ``run.json`` into ``path``; returns its size and the time it took."""
    from caliper_vk.record.run import RUN_SCHEMA, ArrayFrame, ConfusionFrame, HistFrame, Run, Series

    t0 = time.perf_counter()
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    steps = np.arange(STEPS, dtype=np.int64)
    s = steps.astype(np.float64)
    decay = np.exp(-s / 200_000.0)
    noise = rng.standard_normal(STEPS)
    loss = 2.3 * decay + 0.15 + 0.05 * noise * (0.3 + decay)
    loss[[123_457, 654_321]] += 4.0  # spikes the column reduction must keep
    dense = {
        "train/loss": loss,
        "train/acc": np.clip(1.0 - loss / 2.5 + 0.02 * rng.standard_normal(STEPS), 0, 1),
        "lr/group0": 3e-3 * 0.5 * (1 + np.cos(np.pi * s / STEPS)),
        "grad_norm/global": np.abs(1.0 + decay + 0.3 * rng.standard_normal(STEPS)),
        "grad_norm/fc1.weight": np.abs(0.5 + 0.5 * decay + 0.1 * rng.standard_normal(STEPS)),
        "weight_norm/global": 20.0 + 5.0 * (1 - decay) + 0.01 * rng.standard_normal(STEPS),
        "update_ratio/global": np.abs(1e-3 * decay + 1e-4 * rng.standard_normal(STEPS)),
        "throughput/examples_per_s": 9_000 + 300 * rng.standard_normal(STEPS),
        "time/compute_ms": np.abs(12.0 + 0.8 * rng.standard_normal(STEPS)),
        "memory/rss_bytes": 1.2e9 + 1e3 * s,
    }
    run = Run(name="bench-1M", config={"bench": "1M steps x 10 scalars"},
              meta={"started": 0.0, "steps_per_epoch": SPE, "best": {"metric": "val/loss", "goal": "min"}},
              status="complete", finite=True, ended=True, progress_step=steps,
              progress_epoch=s / SPE, progress_time=s * 0.013)
    for k in DENSE:
        run.metrics[k] = Series(k, steps, dense[k], np.zeros(STEPS, bool))
    vs = steps[VAL_EVERY - 1::VAL_EVERY]
    n = len(vs)
    vdecay = np.exp(-vs / 200_000.0)
    sparse = {"val/loss": 2.3 * vdecay + 0.2 + 0.02 * rng.standard_normal(n),
              "val/acc": np.clip(1 - (2.3 * vdecay + 0.2) / 2.5, 0, 1),
              "act/std/relu1": 0.8 + 0.2 * vdecay, "act/zero_frac/relu1": 0.5 - 0.1 * vdecay,
              "act/dead_frac/relu1": 0.02 * (1 - vdecay), "plateau/count": (np.arange(n) % 17).astype(float)}
    for k in SPARSE:
        run.metrics[k] = Series(k, vs, np.asarray(sparse[k], np.float64), np.zeros(n, bool),
                                goal="min" if k == "val/loss" else None)
    for j, k in enumerate(HISTS):
        run.histograms[k] = [HistFrame(int(st), np.linspace(-3, 3, 13),
                                       rng.multinomial(1000 * (j + 1), np.full(12, 1 / 12)).astype(np.int64))
                             for st in vs]
    ps = steps[PROBE_EVERY - 1::PROBE_EVERY]
    run.arrays["hidden/relu1"] = [ArrayFrame(int(st), rng.standard_normal((16, 32)).astype(np.float32),
                                             "relu1", "val[0]", "features") for st in ps]
    run.arrays["attention/L1"] = [ArrayFrame(int(st), rng.random((4, 16, 16)).astype(np.float32),
                                             "block1.attn", "val[0]", "attention") for st in ps]
    run.confusions["val/confusion"] = [ConfusionFrame(int(st), rng.integers(0, 50, (10, 10)))
                                       for st in ps]
    run.snapshots = [(int(st), f"step{int(st)}.pt") for st in ps[::10]]
    out = run.save(path / "run.json")
    sidecar = sum(p.stat().st_size for p in path.glob("run-*.bin"))
    return {"run_json_bytes": out.stat().st_size, "sidecar_bytes": sidecar, "write_s": time.perf_counter() - t0,
            "panels": 20, "dense_points": STEPS * len(DENSE), "schema": RUN_SCHEMA}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _current_rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _open(run_dir):
    t0 = time.perf_counter()
    from caliper_vk.dashboard.app import Dashboard, open_runs

    t_import = time.perf_counter()
    runs = open_runs([run_dir])
    t_load = time.perf_counter()
    rss_loaded = _current_rss_mb()
    dash = Dashboard(runs, size=SIZE, panels=["*"], columns=COLUMNS)
    t_ctx = time.perf_counter()
    return dash, {"import_s": t_import - t0, "load_s": t_load - t_import, "setup_s": t_ctx - t_load,
                  "rss_loaded_mb": rss_loaded, "panels": sum(dash.enabled)}


def _frame(dash) -> tuple[float, float, float]:
    """One frame as ``caliper view --png`` draws it: (ImGui/ImPlot build, ImGui render and the
    draw lists handed to the overlay, GPU until done and the RGBA read back), in seconds."""
    t0 = time.perf_counter()
    dash.frame(events=[])  # the sidebar, readouts and every panel: Dear ImGui + ImPlot calls
    t1 = time.perf_counter()
    dash.ui._end_frame()  # imgui.render(), texture requests, vertices copied into the overlay
    t2 = time.perf_counter()
    dash.ui.overlay.render(copy=False)  # submit, wait for the fence, read the frame back (as
    # save_png: the PNG is written from the readback buffer, no copy of it returned)
    return t1 - t0, t2 - t1, time.perf_counter() - t2


def open_case(run_dir) -> dict:
    """Time to open: imports, load, contexts, and frames until the first complete one. The
    dashboard lays its first frame out once undrawn (Dear ImGui sizes windows on a first pass),
    so the first frame drawn should be complete: it counts as such only when the second frame,
    with nothing changed, is byte for byte the same picture; else the second is counted too."""
    dash, out = _open(run_dir)
    times, pictures = [], []
    for _ in range(2):
        times.append(sum(_frame(dash)))
        pictures.append(hashlib.blake2b(dash.ui.overlay.pixels(copy=False)).digest())  # no copy:
        # the peak RSS is measured here too
    complete_first = pictures[0] == pictures[1]
    to_complete = times[0] if complete_first else sum(times)
    out.update(first_frame_s=times[0], second_frame_s=times[1], first_frame_complete=complete_first,
               open_s=out["import_s"] + out["load_s"] + out["setup_s"] + to_complete, peak_rss_mb=_rss_mb())
    dash.close()
    return out


def cursor_case(run_dir, repeats: int, profile: str | None = None) -> dict:
    """Frame times of cursor moves across the run (WARMUP moves first, each onto another array
    frame), split into build / draw lists / GPU, the panels kept (copied, not drawn), reused (of
    those, not even built) and redrawn per move, and the process's peak RSS."""
    from imgui_bundle import imgui

    dash, out = _open(run_dir)
    _frame(dash)
    _frame(dash)
    xs = np.linspace(0.1, 0.9, repeats + WARMUP) * STEPS
    rows = []
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
    kept = dash.ui.overlay.retained  # panels whose pixels were copied, not drawn (engine/retained.py)
    for i, x in enumerate(xs):
        dash.cursor = float(x)  # what a click or a drag on a cursor line sets
        if i == WARMUP:
            counts = (kept.hits, kept.misses, kept.reused)
            if prof is not None:
                prof.enable()
        rows.append(_frame(dash))
    if prof is not None:
        prof.disable()
        prof.dump_stats(profile)
    data = imgui.get_draw_data()
    triangles = data.total_idx_count // 3
    dash.close()
    rows = np.array(rows[WARMUP:])
    out.update(times=rows.sum(1).tolist(), build_ms=float(np.median(rows[:, 0]) * 1e3),
               draw_lists_ms=float(np.median(rows[:, 1]) * 1e3), gpu_ms=float(np.median(rows[:, 2]) * 1e3),
               triangles=int(triangles), size=list(SIZE), peak_rss_mb=_rss_mb(), rss_end_mb=_current_rss_mb(),
               kept_per_move=(kept.hits - counts[0]) / repeats,
               redrawn_per_move=(kept.misses - counts[1]) / repeats,
               reused_per_move=(kept.reused - counts[2]) / repeats)
    return out


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["make", "open", "cursor"])
    ap.add_argument("run")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--profile")
    a = ap.parse_args()
    if a.what == "make":
        out = make_run(a.run)
    elif a.what == "open":
        out = open_case(a.run)
    else:
        out = cursor_case(a.run, a.repeats, a.profile)
    print(json.dumps(out))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
