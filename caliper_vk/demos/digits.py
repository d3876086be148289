"""The digits demo: a 3-D cloud of handwritten digits splitting into ten lobes as an MLP learns.

An MLP with a 3-unit bottleneck trains on scikit-learn's 1,797 8x8 digits.
After every optimizer step the bottleneck activations of all digits — the
network's own representation, not a post-hoc projection — are written into a
tensor attached to a point-cloud panel (``caliper_vk.empty``, read in place by
the renderer), and ``step()`` draws it unless the previous frame is still in
flight. With a display the cloud turns in a window (drag to rotate, wheel to
zoom, R, space, S); without one, frames are written every ``every`` steps and a
contact sheet of six moments closes the run.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..engine import Canvas
from ..views import PointCloud
from ._live import demo_session, hold_window, progress_bar, train_device


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


def separation(points: np.ndarray, labels: np.ndarray) -> float:
    """Silhouette score of the points against the digit labels (-1..1; > 0.5 is well separated)."""
    from sklearn.metrics import silhouette_score

    ok = np.isfinite(points).all(axis=1)
    return float(silhouette_score(points[ok], labels[ok]))


def contact_sheet(snapshots, labels, path: Path) -> list[int]:
    """Six moments of training side by side in one canvas (fewer when fewer were drawn: no moment
    twice); returns their steps."""
    from ..chrome import FOREGROUND, LABEL_BACKGROUND, TextStrip, line_height
    from ..engine.canvas import Rect

    picks = [snapshots[i] for i in sorted({round(i * (len(snapshots) - 1) / 5) for i in range(6)})]
    with Canvas(1200, 800, rows=2, cols=3, gap=4) as grid:
        for k, (step, emb) in enumerate(picks):
            cell = grid.cell(k // 3, k % 3)
            bar = line_height()  # each tile states its step in a bar above its points
            grid.place(TextStrip([(f"step {step}", FOREGROUND)], background=LABEL_BACKGROUND),
                       Rect(cell.x, cell.y, cell.width, bar), k // 3, k % 3)
            cloud = PointCloud(emb, labels=labels, point_size_px=3, pitch_deg=18.0, yaw_deg=35.0 + 0.5 * step)
            grid.place(cloud, Rect(cell.x, cell.y + bar, cell.width, cell.height - bar), k // 3, k % 3)
        grid.save_png(path)
    return [s for s, _ in picks]


def run(out_dir="out/digits", steps: int = 600, every: int = 5, width: int = 1000, height: int = 720,
        seed: int = 0, window: bool | None = None, progress: bool = True, log=print,
        device: str = "auto") -> dict:
    """Train and draw on ``device`` (auto, cuda, mps, cpu: :func:`train_device`); returns a
    summary (frames, paths, accuracy, separation)."""
    import torch

    from .. import empty

    if steps < 1 or every < 1:
        raise ValueError("--steps and --every must be positive")
    dev = train_device(device)
    out = Path(out_dir)
    x_np, y_np = _data()
    x, y = torch.from_numpy(x_np).to(dev), torch.from_numpy(y_np).to(dev)
    embed, head = _model(torch, seed)
    embed, head = embed.to(dev), head.to(dev)
    opt = torch.optim.Adam([*embed.parameters(), *head.parameters()], lr=3e-3)
    gen = torch.Generator().manual_seed(seed)

    session, frames_dir, windowed = demo_session("digits", out, width, height, every, window)
    points = empty((len(x), 3), device=dev)  # the renderer reads this memory in place
    panel = session.attach(points, "pointcloud", name="bottleneck", labels=y_np, point_size_px=4,
                           pitch_deg=18.0, yaw_deg=35.0)
    st = session.status()
    log(f"caliper: training on {dev}; drawing on {st.device_line}; panel {panel.status}")
    log("caliper: " + ("drawing in a window (drag rotates, wheel zooms, R resets, space pauses, "
                       "S saves a PNG)" if windowed else
                       f"no display: writing a frame every {every} steps to {frames_dir}/"))

    snapshots: list[tuple[int, np.ndarray]] = []
    bar = progress_bar(progress, steps, "digits")
    interrupted = False
    loss = torch.tensor(float("nan"))
    t_start = time.perf_counter()
    try:
        for step in range(steps + 1):
            snapshot_due = step % every == 0 or step == steps
            if session.due(step) or snapshot_due:  # the forward is only for drawing: skip it otherwise
                with torch.no_grad(), panel.writing():
                    points.copy_(embed(x))
            if not windowed:
                panel.view.set_camera(yaw_deg=35.0 + 0.5 * step)
            session.step(step)
            if snapshot_due:
                snapshots.append((step, points.cpu().numpy().copy()))
            if step == steps:
                break
            idx = torch.randint(0, len(x), (128,), generator=gen).to(dev)
            loss = torch.nn.functional.cross_entropy(head(embed(x[idx])), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if bar is not None:
                bar.update(1)
                if step % 20 == 0:
                    bar.set_postfix(loss=f"{loss.item():.3f}", skipped=session.skipped)
    except KeyboardInterrupt:
        interrupted = True
        log("caliper: interrupted; keeping what was drawn so far")
    finally:
        if bar is not None:
            bar.close()
    session.flush()  # the frame in flight, if any
    elapsed = time.perf_counter() - t_start
    with torch.no_grad():
        acc = float((head(embed(x)).argmax(1) == y).float().mean())
    seen = points.cpu().numpy().copy()  # exactly the memory the renderer read
    score = separation(seen, y_np)
    hold_window(session, windowed, interrupted, steps, log)
    status = session.status()
    final = out / "final.png"
    session.save_png(final)
    session.close()
    sheet = out / "contact_sheet.png"
    sheet_steps = contact_sheet(snapshots, y_np, sheet) if snapshots else []
    frames = sorted(frames_dir.glob("frame_*.png"))
    summary = {"frames_written": len(frames), "frames_drawn": status.frames, "skipped": status.skipped,
               "frames_dir": str(frames_dir), "contact_sheet": str(sheet), "final": str(final),
               "accuracy": acc, "silhouette": score, "steps": steps, "seconds": elapsed,
               "sheet_steps": sheet_steps, "interrupted": interrupted, "path": panel.path,
               "device": dev}
    log(f"caliper: {steps} steps in {elapsed:.1f} s; train accuracy {acc:.1%}; silhouette of the "
        f"drawn points vs labels {score:.2f}; {status.frames} frames drawn, {status.skipped} skipped")
    if frames:
        log(f"caliper: wrote {len(frames)} frames to {frames_dir}/")
    log(f"caliper: final frame {final}")
    log(f"caliper: contact sheet (steps {sheet_steps}, left to right, top to bottom): {sheet}")
    return summary
