"""Dashboard benchmarks: a 1,000,000-step run opened by ``caliper view``, cursor moves, peak RSS;
and the scale runs (``scale``): 10,000,000 steps × 10 series, 100,000 steps × 1,000 series.

``make DIR --steps N --series N`` makes a run of any shape (see :func:`make_run`); ``open DIR``
and ``cursor DIR`` measure it (``--shown default``: with the panels ``caliper view`` opens with,
else all of them); ``scale --shapes 10000000x10,100000x1000`` does the three for each shape, each
case in a fresh process, and prints a row each with the CPU model (try ``--shapes
20000x10,2000x50`` first: the default shapes write 1.1 GB and 0.8 GB).

``make_run(dir)`` writes the run's ``run.json`` once (bench/suite.py keeps it in a
temporary directory for all the dashboard cases), through ``save_run``, the code
``Recorder.close()`` writes it with: the per-step columns and their min/max pyramids
generated a chunk at a time and copied in as the recorder copies its spooled columns
(a million ``log()`` calls would only make the suite slower). Each measurement then runs in a fresh
process (``python bench/cases.py dashboard_open --run DIR`` and
``dashboard_cursor``), drawing offscreen as ``caliper view --png`` does.

The run: 1,000,000 optimizer steps (steps_per_epoch 1,000) with ten scalars
recorded at every step, plus validation every 1,000 steps. With ``--all``
the dashboard shows 21 panels (the 20 below and the epochs overlay):

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


PER_PARAMETER = ("grad_norm", "weight_norm", "update_ratio")  # where series beyond the ten go, as watch's
GEN_CHUNK = 1 << 20  # steps generated (and written) at a time: memory stays flat whatever the run's size


def dense_names(series: int) -> list[str]:
    """The run's per-step series: the ten of DENSE (the first ``series`` of them when fewer), then
    one per parameter tensor in turn under grad_norm/, weight_norm/ and update_ratio/ (a model
    watched with ``caliper_vk.watch`` records a norm and an update ratio per tensor)."""
    names = list(DENSE[:series])
    for i in range(max(0, series - len(DENSE))):
        names.append(f"{PER_PARAMETER[i % 3]}/layer{i // 3}.weight")
    return names


def _dense_chunk(name: str, s: np.ndarray, steps: int, rng) -> np.ndarray:
    """Values of series ``name`` at steps ``s`` (float64) of a run of ``steps`` steps."""
    n = len(s)
    decay = np.exp(-s / (steps / 5.0))
    noise = rng.standard_normal(n)
    if name == "train/loss":
        return 2.3 * decay + 0.15 + 0.05 * noise * (0.3 + decay)
    if name == "train/acc":
        return np.clip(1.0 - (2.3 * decay + 0.15) / 2.5 + 0.02 * noise, 0, 1)
    if name == "lr/group0":
        return 3e-3 * 0.5 * (1 + np.cos(np.pi * s / steps))
    if name == "weight_norm/global" or name.startswith("weight_norm/"):
        return 20.0 + 5.0 * (1 - decay) + 0.01 * noise
    if name.startswith("update_ratio/"):
        return np.abs(1e-3 * decay + 1e-4 * noise)
    if name == "throughput/examples_per_s":
        return 9_000 + 300 * noise
    if name == "time/compute_ms":
        return np.abs(12.0 + 0.8 * noise)
    if name == "memory/rss_bytes":
        return 1.2e9 + 1e3 * s
    return np.abs(0.5 + 0.5 * decay + 0.1 * noise)  # gradient norms


def make_run(path, steps: int = STEPS, series: int = len(DENSE)) -> dict:
    """Write the benchmark run (``steps`` steps, ``series`` series recorded at every step, the
    sparse series, histograms, arrays and confusion matrices as described above) into ``path`` as
    ``run.json`` and its sidecar; returns its size and the time it took.

    The per-step columns and their min/max pyramids are generated GEN_CHUNK steps at a time into
    a scratch file and copied into the sidecar from there, as ``Recorder.close()`` copies its
    spooled columns, so a run of ten million steps or a thousand series is made in flat memory;
    the rest is a :class:`Run` saved by ``save_run``, the code ``Recorder.close()`` writes with."""
    from caliper_vk.record import pyramid
    from caliper_vk.record.run import RUN_SCHEMA, ArrayFrame, ConfusionFrame, HistFrame, Run, Series
    from caliper_vk.record.runfile import save_run

    t0 = time.perf_counter()
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    val_every, probe_every = min(VAL_EVERY, max(1, steps // 100)), min(PROBE_EVERY, max(1, steps // 10))
    rng = np.random.default_rng(0)
    names = dense_names(series)
    spikes = {steps * 123_457 // STEPS, steps * 654_321 // STEPS}  # the column reduction must keep them
    scratch = open(path / ".make-scratch", "w+b")  # closed below, once the sidecar has copied from it
    fd = scratch.fileno()

    def spill(a: np.ndarray) -> tuple:
        at = scratch.seek(0, os.SEEK_END)
        scratch.write(np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
        scratch.flush()
        return fd, at, a.nbytes

    def column(make, dtype) -> list:
        return [spill(make(lo, min(lo + GEN_CHUNK, steps)).astype(dtype)) for lo in range(0, steps, GEN_CHUNK)]

    step_pieces = column(lambda lo, hi: np.arange(lo, hi, dtype=np.int64), np.int64)
    epoch_pieces = column(lambda lo, hi: np.arange(lo, hi) / SPE, np.float64)
    time_pieces = column(lambda lo, hi: np.arange(lo, hi) * 0.013, np.float64)
    dense = {}
    def generate(name: str, parts: list):
        for lo in range(0, steps, GEN_CHUNK):
            v = _dense_chunk(name, np.arange(lo, min(lo + GEN_CHUNK, steps), dtype=np.float64), steps, rng)
            if name == "train/loss":
                for k in spikes:
                    if lo <= k < lo + len(v):
                        v[k - lo] += 4.0
            parts.append(spill(v))
            yield v, None

    for name in names:
        parts: list = []
        if steps >= pyramid.MIN_LENGTH:
            dense[name] = (parts, pyramid.build(generate(name, parts), steps))
        else:
            dense[name] = (parts, None)
            for _ in generate(name, parts):
                pass

    def columns(doc, sidecar) -> None:
        shared = sidecar.add_pieces(np.int64, steps, step_pieces)
        doc["progress"] = {"step": dict(shared), "epoch": sidecar.add_pieces(np.float64, steps, epoch_pieces),
                           "time": sidecar.add_pieces(np.float64, steps, time_pieces)}
        for name, (parts, pyr) in dense.items():
            m = {"unit": None, "description": None, "goal": None, "step": dict(shared),
                 "value": sidecar.add_pieces(np.float64, steps, parts), "placeholder_steps": []}
            if pyr is not None:
                m["pyramid"] = pyramid.to_doc(pyr, lambda a: sidecar.add_pieces(
                    np.float64, a.size, [spill(a)], shape=a.shape))
            doc["metrics"][name] = m

    run = Run(name=f"bench-{steps}x{series}", config={"bench": f"{steps} steps x {series} series"},
              meta={"started": 0.0, "steps_per_epoch": SPE, "best": {"metric": "val/loss", "goal": "min"}},
              status="complete", finite=True, ended=True)
    vs = np.arange(val_every - 1, steps, val_every, dtype=np.int64)
    n = len(vs)
    vdecay = np.exp(-vs / (steps / 5.0))
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
    ps = np.arange(probe_every - 1, steps, probe_every, dtype=np.int64)
    run.arrays["hidden/relu1"] = [ArrayFrame(int(st), rng.standard_normal((16, 32)).astype(np.float32),
                                             "relu1", "val[0]", "features") for st in ps]
    run.arrays["attention/L1"] = [ArrayFrame(int(st), rng.random((4, 16, 16)).astype(np.float32),
                                             "block1.attn", "val[0]", "attention") for st in ps]
    run.confusions["val/confusion"] = [ConfusionFrame(int(st), rng.integers(0, 50, (10, 10)))
                                       for st in ps]
    run.snapshots = [(int(st), f"step{int(st)}.pt") for st in ps[::10]]
    try:
        out = save_run(run, path / "run.json", columns)
    finally:
        scratch.close()
        (path / ".make-scratch").unlink(missing_ok=True)
    sidecar = sum(p.stat().st_size for p in path.glob("run-*.bin"))
    panels = len(_panels(out))
    return {"run_json_bytes": out.stat().st_size, "sidecar_bytes": sidecar, "write_s": time.perf_counter() - t0,
            "steps": steps, "series": series, "panels": panels, "dense_points": steps * len(names),
            "schema": RUN_SCHEMA}


def _panels(run_json) -> list:
    from caliper_vk.dashboard import model
    from caliper_vk.record import load_run

    return model.default_panels([load_run(run_json)])


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _current_rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _open(run_dir, shown: str = "all"):
    t0 = time.perf_counter()
    from caliper_vk.dashboard.app import Dashboard, open_runs

    t_import = time.perf_counter()
    runs = open_runs([run_dir])
    t_load = time.perf_counter()
    rss_loaded = _current_rss_mb()
    # "all": every panel on screen (--all); "default": the panels `caliper view RUN` opens with
    dash = Dashboard(runs, size=SIZE, panels=["*"] if shown == "all" else None, columns=COLUMNS)
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


def open_case(run_dir, shown: str = "all") -> dict:
    """Time to open: imports, load, contexts, and frames until the first complete one. The
    dashboard lays its first frame out once undrawn (Dear ImGui sizes windows on a first pass),
    so the first frame drawn should be complete: it counts as such only when the second frame,
    with nothing changed, is byte for byte the same picture; else the second is counted too."""
    dash, out = _open(run_dir, shown)
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
    first, last = dash.runs[0].step_range
    xs = first + np.linspace(0.1, 0.9, repeats + WARMUP) * (last - first)
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


def scale_rows(shapes, repeats: int, keep=None) -> dict:
    """The scale rows: for each ``(steps, series)`` a run made into a temporary directory (or
    under ``keep``), then opened and cursor-moved, each in a fresh process as ``open`` and
    ``cursor`` do: open time to the first complete frame, peak RSS, cursor-move time."""
    import subprocess
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from recording import cpu_model

    rows = []
    for steps, series in shapes:
        with tempfile.TemporaryDirectory(dir=keep) as tmp:
            run_dir = Path(tmp) / f"run-{steps}x{series}"

            def case(*args):
                out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True,
                                     text=True, timeout=1800)
                return json.loads(out.stdout.strip().splitlines()[-1])

            made = case("make", str(run_dir), "--steps", str(steps), "--series", str(series))
            opened = case("open", str(run_dir))
            first = case("open", str(run_dir), "--shown", "default")
            moved = case("cursor", str(run_dir), "--repeats", str(repeats))
        move_ms = [1e3 * x for x in moved["times"]]
        rows.append({"steps": steps, "series": series, "panels": opened["panels"],
                     "sidecar_mb": made["sidecar_bytes"] / 2**20, "make_s": made["write_s"],
                     "open_s": opened["open_s"], "load_s": opened["load_s"],
                     "first_frame_s": opened["first_frame_s"],
                     "first_frame_complete": opened["first_frame_complete"],
                     "open_peak_rss_mb": opened["peak_rss_mb"], "default_panels": first["panels"],
                     "default_open_s": first["open_s"],
                     "default_first_frame_complete": first["first_frame_complete"],
                     "default_peak_rss_mb": first["peak_rss_mb"], "cursor_median_ms": float(np.median(move_ms)),
                     "cursor_max_ms": float(np.max(move_ms)), "cursor_peak_rss_mb": moved["peak_rss_mb"]})
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "rows": rows}


def _shape(text: str) -> tuple[int, int]:
    steps, _, series = text.lower().partition("x")
    return int(steps.replace("_", "")), int(series.replace("_", ""))


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description="The dashboard benchmarks: make a run (any shape), open it, move "
                                             "its cursor; 'scale' does all three for each shape given")
    ap.add_argument("what", choices=["make", "open", "cursor", "scale"])
    ap.add_argument("run", nargs="?", help="the run directory (make, open, cursor)")
    ap.add_argument("--steps", type=int, default=STEPS, help="make: optimizer steps (default 1,000,000)")
    ap.add_argument("--series", type=int, default=len(DENSE),
                    help="make: series recorded at every step (default 10; beyond ten, per-parameter norms "
                         "and update ratios, as watch records them)")
    ap.add_argument("--shapes", default="10000000x10,100000x1000",
                    help="scale: STEPSxSERIES,... (default: the two scale targets; try 20000x10,2000x50 first)")
    ap.add_argument("--shown", choices=["all", "default"], default="all",
                    help="open: every panel (--all, the default here) or those caliper view opens with")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--profile")
    a = ap.parse_args()
    if a.what != "scale" and not a.run:
        ap.error(f"{a.what} needs the run directory")
    if a.what == "make":
        out = make_run(a.run, a.steps, a.series)
    elif a.what == "open":
        out = open_case(a.run, a.shown)
    elif a.what == "cursor":
        out = cursor_case(a.run, a.repeats, a.profile)
    else:
        out = scale_rows([_shape(s) for s in a.shapes.split(",")], a.repeats)
        print(f"CPU: {out['cpu']} ({out['cores']} cores)", file=sys.stderr)
        for r in out["rows"]:
            print(f"{r['steps']:>10,} steps x {r['series']:>5,} series: open with all {r['panels']} panels "
                  f"{r['open_s']:.3f} s (first frame complete: {r['first_frame_complete']}), peak RSS "
                  f"{r['open_peak_rss_mb']:.0f} MB; with the {r['default_panels']} it opens with "
                  f"{r['default_open_s']:.3f} s, {r['default_peak_rss_mb']:.0f} MB; cursor move (all panels) "
                  f"median {r['cursor_median_ms']:.1f} ms (max {r['cursor_max_ms']:.1f})", file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
