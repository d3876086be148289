"""The digits demo: a 3-D cloud of handwritten digits split into ten lobes as an MLP learns.

An MLP with a 3-unit bottleneck trains on scikit-learn's 1,797 8x8 digits.
Every few optimizer steps the bottleneck activations of all digits (the
network's own representation) are drawn as a point cloud coloured by the true
digit, while the camera turns slowly. Frames are written as PNG files, plus a
contact sheet of six moments of training in one canvas.

Until the live window lands, the demo always renders offscreen and says so.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from ..engine import Canvas
from ..views import PointCloud


def _data():
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return (x / 16.0).astype(np.float32), y.astype(np.int64)


def _model(torch, seed: int):
    torch.manual_seed(seed)
    nn = torch.nn
    embed = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                          nn.Linear(64, 3))
    head = nn.Linear(3, 10)
    return embed, head


def run(out_dir: str | os.PathLike = "out/digits", steps: int = 400, every: int = 4,
        width: int = 800, height: int = 600, seed: int = 0, log=print) -> dict:
    """Train, render a frame every ``every`` steps into ``out_dir``; return a summary."""
    import torch

    if steps < 1 or every < 1:
        raise ValueError("--steps and --every must be positive")
    out = Path(out_dir)
    frames_dir = out / "frames"
    frames_dir.mkdir(parents=True, exist_ok=True)
    for old in frames_dir.glob("frame_*.png"):
        old.unlink()
    x_np, y_np = _data()
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    embed, head = _model(torch, seed)
    params = [*embed.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=3e-3)
    gen = torch.Generator().manual_seed(seed)

    canvas = Canvas(width, height)
    view = PointCloud(point_size_px=4, pitch_deg=18.0)
    canvas.add(view)
    dev = canvas.device.info
    log(f"caliper: device {dev.name} ({dev.kind}), Vulkan {dev.api_version}")
    display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    log("caliper: rendering offscreen to PNG "
        + ("(no display found)" if not display else "(the live window is not built yet)")
        + "; path: host staging (positions copied from the tensor each frame)")

    snapshots: list[tuple[int, np.ndarray]] = []
    frame_times: list[float] = []
    n_frames = 0
    t_start = time.perf_counter()
    for step in range(steps + 1):
        if step % every == 0 or step == steps:
            with torch.no_grad():
                emb = embed(x).numpy()
            view.set_data(emb, labels=y_np)
            view.set_camera(yaw_deg=35.0 + 0.5 * step)
            t0 = time.perf_counter()
            rgba = canvas.render()
            frame_times.append(time.perf_counter() - t0)
            canvas.save_png(frames_dir / f"frame_{n_frames:04d}.png", rgba)
            n_frames += 1
            snapshots.append((step, emb.copy()))
        if step == steps:
            break
        idx = torch.randint(0, len(x), (128,), generator=gen)
        loss = torch.nn.functional.cross_entropy(head(embed(x[idx])), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            log(f"caliper: step {step:4d}  loss {loss.item():.3f}")
    with torch.no_grad():
        acc = float((head(embed(x)).argmax(1) == y).float().mean())
    canvas.close()

    sheet = out / "contact_sheet.png"
    picks = [snapshots[round(i * (len(snapshots) - 1) / 5)] for i in range(6)]
    with Canvas(1200, 800, rows=2, cols=3, gap=4) as grid:
        for k, (step, emb) in enumerate(picks):
            grid.add(PointCloud(emb, labels=y_np, point_size_px=3, pitch_deg=18.0,
                                yaw_deg=35.0 + 0.5 * step), row=k // 3, col=k % 3)
        grid.save_png(sheet)
    elapsed = time.perf_counter() - t_start
    summary = {
        "frames": n_frames, "frames_dir": str(frames_dir), "contact_sheet": str(sheet),
        "accuracy": acc, "steps": steps, "seconds": elapsed,
        "median_render_ms": 1000 * float(np.median(frame_times)),
        "sheet_steps": [s for s, _ in picks],
    }
    log(f"caliper: trained {steps} steps in {elapsed:.1f} s, train accuracy {acc:.1%}")
    log(f"caliper: wrote {n_frames} frames ({width}x{height}) to {frames_dir}/ "
        f"(median render {summary['median_render_ms']:.1f} ms)")
    log(f"caliper: contact sheet of steps {summary['sheet_steps']} (left to right, top to bottom): "
        f"{sheet}")
    return summary
