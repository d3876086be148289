"""One benchmark case, run in a fresh process by bench/suite.py; prints one JSON line.

    python bench/cases.py CASE [--n N] [--repeats R]

Latency cases time "the tensor has new values" -> "an RGBA frame of them exists
in host memory" (for file-based paths: -> "a consumer has decoded it"), after
warm-ups, alternating between two data sets so every update really changes
the picture. 800 x 600 frames; point clouds carry positions + labels.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("CALIPER_VK_VALIDATION", "0")
os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
WARMUP = 3
W, H = 800, 600


def _points(n: int):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(n, 3)).astype(np.float32)
    return [a, (a * np.float32(1.01) + np.float32(0.01)).astype(np.float32)], rng.integers(0, 10, n)


def _grid(side: int):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(side, side)).astype(np.float32)
    return [a, a[::-1].copy()]


def _timed(update, repeats: int, cpu: list | None = None) -> list[float]:
    """Wall seconds of each update after the warm-ups; ``cpu`` collects the process's CPU
    seconds of each (every thread: lavapipe's workers too), which a loaded machine distorts
    less than the wall time."""
    out = []
    for i in range(repeats + WARMUP):
        c0, t0 = time.process_time(), time.perf_counter()
        update(i)
        out.append(time.perf_counter() - t0)
        if cpu is not None and i >= WARMUP:
            cpu.append(time.process_time() - c0)
    return out[WARMUP:]


# -- Caliper ----------------------------------------------------------------------------------
def caliper(view: str, n: int, repeats: int, mode: str, size_px: int = 2, fixed_bounds: bool = False) -> dict:
    """``fixed_bounds``: the point cloud's fit box given once, from the first data set (``bounds=``),
    as the floor fits its camera once at setup, instead of the device's fit of every frame."""
    import torch

    import caliper_vk as cv

    data, labels = _points(n) if view == "pointcloud" else (_grid(n), None)
    sources = [torch.from_numpy(d) for d in data]
    with cv.Session(window=False, size=(W, H + 20)) as s:
        t = cv.empty(sources[0].shape) if mode == "zero-copy" else sources[0].clone()
        opts = {"labels": labels, "point_size_px": size_px} if view == "pointcloud" else {}
        if fixed_bounds:
            opts["bounds"] = (data[0].min(axis=0).tolist(), data[0].max(axis=0).tolist())
        panel = s.attach(t, view, zero_copy=(mode != "staging"), **opts)

        def update(i):
            with panel.writing():
                t.copy_(sources[i % 2])  # the tensor has new values
            s.render()  # ... and an RGBA frame of them is in host memory

        cpu: list = []
        times = _timed(update, repeats, cpu)
        return {"times": times, "cpu": cpu, "path": panel.path, "reason": panel.reason}


def floor(n: int, repeats: int) -> dict:
    """The minimal hand-written Vulkan path (bench/floor.py), same protocol as ``caliper``."""
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from floor import Floor

    data, labels = _points(n)
    sources = [torch.from_numpy(d) for d in data]
    t = sources[0].clone()
    with Floor(t, labels, W, H) as f:
        drawn = int((f.render().view(np.uint32) != np.uint32(0xFF1A1616)).sum())

        def update(i):
            t.copy_(sources[i % 2])  # the tensor has new values
            f.render()  # ... and an RGBA frame of them is in host memory

        cpu: list = []
        times = _timed(update, repeats, cpu)
        return {"times": times, "cpu": cpu, "path": f.path, "drawn_px": drawn}


# -- peers ------------------------------------------------------------------------------------
def matplotlib_roundtrip(view: str, n: int, repeats: int, variant: str = "png") -> dict:
    """matplotlib as a competent user drives it: the figure and its artist are built once,
    each update sets the artist's data, draws the canvas (Agg) and either PNG-encodes and
    decodes the frame (``png``: the round trip a file or a notebook makes) or copies the
    canvas's RGBA buffer (``buffer``: the in-memory best case)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    fig = plt.figure(figsize=(W / 100, H / 100), dpi=100)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    if view == "pointcloud":
        data, labels = _points(n)
        # s=2 pt^2 at 100 dpi: ~2 px across, without edges (Caliper's 2-px points)
        art = ax.scatter(data[0][:, 0], data[0][:, 1], c=labels, cmap="tab10", s=2, linewidths=0)
        ax.set_xlim(-5, 5)
        ax.set_ylim(-5, 5)
    else:
        data = _grid(n)
        art = ax.imshow(data[0], cmap="viridis")
    canvas = fig.canvas

    def update(i):
        d = data[i % 2]
        if view == "pointcloud":
            art.set_offsets(d[:, :2])  # matplotlib's cheapest 2-D update of the same points
        else:
            art.set_data(d)
        canvas.draw()
        frame = np.asarray(canvas.buffer_rgba())
        if variant == "buffer":
            rgba = frame.copy()
        else:
            png = io.BytesIO()
            Image.fromarray(frame).save(png, format="png")
            rgba = np.asarray(Image.open(io.BytesIO(png.getvalue())).convert("RGBA"))
        assert rgba.shape == (H, W, 4)

    times = _timed(update, repeats)
    return {"times": times}


def tensorboard_roundtrip(n: int, repeats: int) -> dict:
    import torch
    from PIL import Image
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    data = [torch.from_numpy(d) for d in _grid(n)]
    with tempfile.TemporaryDirectory() as tmp:
        writer = SummaryWriter(tmp)  # default flush_secs=120: we flush explicitly
        acc = EventAccumulator(tmp, size_guidance={"images": 0})

        def update(i):
            d = data[i % 2]
            img = (d - d.min()) / (d.max() - d.min())
            writer.add_image("heatmap", img, global_step=i, dataformats="HW")
            writer.flush()
            acc.Reload()
            event = acc.Images("heatmap")[-1]
            rgba = np.asarray(Image.open(__import__("io").BytesIO(event.encoded_image_string)))
            assert rgba.shape[:2] == (n, n)

        times = _timed(update, repeats)
        writer.close()
    return {"times": times, "note": "SummaryWriter flush_secs defaults to 120 s; flushed each update"}


def fastplotlib_offscreen(view: str, n: int, repeats: int) -> dict:
    import fastplotlib as fpl

    fig = fpl.Figure(size=(W, H), canvas="offscreen")
    if view == "pointcloud":
        data, labels = _points(n)
        graphic = fig[0, 0].add_scatter(data[0], sizes=2, cmap="tab10", cmap_transform=labels)
    else:
        data = _grid(n)
        graphic = fig[0, 0].add_image(data[0], cmap="viridis")
    fig.show()

    def update(i):
        graphic.data = data[i % 2]
        rgba = np.asarray(fig.canvas.draw())
        assert rgba.shape[2] == 4

    times = _timed(update, repeats)
    import wgpu

    adapter = wgpu.gpu.request_adapter_sync()
    return {"times": times, "adapter": f"{adapter.info['device']} ({adapter.info['backend_type']})"}


def profile(n: int, repeats: int, size_px: int) -> dict:
    """GPU milliseconds per pass (Vulkan timestamps) of a live point-cloud frame, and the
    host side of the same frames: wall time of ``render()`` and the view's parameter block (the
    fit is computed on the device: its pass is among the timestamps)."""
    import torch

    import caliper_vk as cv

    data, labels = _points(n)
    sources = [torch.from_numpy(d) for d in data]
    with cv.Session(window=False, size=(W, H + 20)) as s:
        t = sources[0].clone()
        panel = s.attach(t, "pointcloud", labels=labels, point_size_px=size_px)
        view = panel.view
        s.canvas.profile()
        rows, host = [], []
        for i in range(repeats + WARMUP):
            with panel.writing():
                t.copy_(sources[i % 2])
            t0 = time.perf_counter()
            s.render()
            t1 = time.perf_counter()
            view.params(view.rect.width, view.rect.height)  # what prepare() pays per frame
            t2 = time.perf_counter()
            rows.append(dict(s.canvas.timings()))
            host.append((t1 - t0, t2 - t1))
    rows, host = rows[WARMUP:], np.array(host[WARMUP:]) * 1e3
    out = {k: float(np.median([r[k] for r in rows])) for k in rows[0]}
    gpu = float(np.median([sum(r.values()) for r in rows]))
    return {"passes": out, "gpu_ms": gpu, "render_ms": float(np.median(host[:, 0])),
            "fit_params_ms": float(np.median(host[:, 1]))}


def floor_profile(n: int, repeats: int) -> dict:
    """The floor's GPU milliseconds per pass, as ``profile`` measures Caliper's."""
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from floor import Floor

    data, labels = _points(n)
    t = torch.from_numpy(data[0]).clone()
    rows = []
    with Floor(t, labels, W, H, profile=True) as f:
        for _ in range(repeats + WARMUP):
            f.render()
            rows.append(f.timings())
    rows = rows[WARMUP:]
    return {"passes": {k: float(np.median([r[k] for r in rows])) for k in rows[0]},
            "gpu_ms": float(np.median([sum(r.values()) for r in rows]))}


def memory(n: int, mode: str) -> dict:
    """RSS and Vulkan allocations that attaching an n-point tensor adds."""
    import psutil
    import torch

    import caliper_vk as cv

    proc = psutil.Process()
    with cv.Session(window=False, size=(W, H + 20)) as s:
        t = cv.empty((n, 3))
        t.copy_(torch.randn(n, 3))
        s.render()
        stats0, rss0 = dict(s.device.memory_stats), proc.memory_info().rss
        s.attach(t, "pointcloud", zero_copy=(mode == "zero-copy"))
        s.render()
        s.render()
        stats1, rss1 = dict(s.device.memory_stats), proc.memory_info().rss
    return {"rss_delta": rss1 - rss0, "tensor_bytes": n * 12,
            "vk_allocated_delta": stats1["allocated_bytes"] - stats0["allocated_bytes"],
            "vk_imported_delta": stats1["imported_bytes"] - stats0["imported_bytes"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--view", default="pointcloud")
    ap.add_argument("--mode", default="zero-copy")
    ap.add_argument("--size", type=int, default=2, help="pointcloud: point size in pixels")
    ap.add_argument("--fixed-bounds", action="store_true",
                    help="pointcloud: the fit box given once (bounds=), as the floor's camera")
    ap.add_argument("--variant", default="png", choices=("png", "buffer"),
                    help="matplotlib: PNG round trip or the in-memory RGBA buffer")
    ap.add_argument("--run", help="dashboard cases: the run directory")
    a = ap.parse_args()
    if a.case == "caliper":
        out = caliper(a.view, a.n, a.repeats, a.mode, a.size, a.fixed_bounds)
    elif a.case == "floor":
        out = floor(a.n, a.repeats)
    elif a.case == "matplotlib":
        out = matplotlib_roundtrip(a.view, a.n, a.repeats, a.variant)
    elif a.case == "tensorboard":
        out = tensorboard_roundtrip(a.n, a.repeats)
    elif a.case == "fastplotlib":
        out = fastplotlib_offscreen(a.view, a.n, a.repeats)
    elif a.case == "memory":
        out = memory(a.n, a.mode)
    elif a.case == "profile":
        out = profile(a.n, a.repeats, a.size)
    elif a.case == "floor_profile":
        out = floor_profile(a.n, a.repeats)
    elif a.case == "memcpy":
        data, _ = _points(a.n)
        dst = np.empty_like(data[0])
        out = {"times": _timed(lambda i: np.copyto(dst, data[i % 2]), a.repeats)}
    elif a.case == "training":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from live import training_overhead

        out = training_overhead(a.repeats)
    elif a.case == "training_gpt":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from live import gpt_overhead

        out = gpt_overhead(a.repeats)
    elif a.case.startswith("dashboard_"):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import dashboard

        if a.case == "dashboard_make":
            out = dashboard.make_run(a.run)
        elif a.case == "dashboard_open":
            out = dashboard.open_case(a.run)
        else:
            out = dashboard.cursor_case(a.run, a.repeats)
    elif a.case == "cpu_per_panel":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from live import cpu_per_panel

        out = cpu_per_panel((a.n,), a.repeats)[a.n]
    else:
        sys.exit(f"unknown case {a.case!r}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
