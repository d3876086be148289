"""Frame times of the engine-core views on the current Vulkan device.

Measures, side by side in one process:
  * pointcloud, 2,000 and 1,000,000 points (positions + labels, 800 x 600),
  * heatmap, 1024 x 1024 cells into a 1024 x 1024 panel,
each as (a) "update": new values written + one frame rendered and read back
into host memory, and (b) "redraw": the same frame again with unchanged data;
plus the floor, a plain memcpy of the same input bytes. Medians of >= 15
timed frames after warm-ups; spreads are the interquartile range.

Run: .venv/bin/python bench/engine_frames.py [--repeats 25] [--json out.json]
This is a benchmark, not a test: nothing here asserts a duration.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from caliper_vk import Canvas, Heatmap, PointCloud


def timed(fn, repeats: int, warmup: int = 3) -> np.ndarray:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return np.array(out)


def summary(name: str, seconds: np.ndarray, items: int, floor: float | None = None) -> dict:
    med = float(np.median(seconds))
    q1, q3 = np.percentile(seconds, [25, 75])
    row = {"case": name, "median_ms": med * 1e3, "iqr_ms": float(q3 - q1) * 1e3,
           "n": len(seconds), "items_per_s": items / med}
    if floor is not None:
        row["vs_memcpy"] = med / floor
    return row


def bench_pointcloud(n: int, repeats: int, rng) -> list[dict]:
    pos = rng.normal(size=(n, 3)).astype(np.float32)
    labels = rng.integers(0, 10, n).astype(np.int64)
    alt = pos * np.float32(1.01)
    view = PointCloud(pos, labels=labels, point_size_px=2)
    canvas = Canvas(800, 600)
    canvas.add(view)
    dst = np.empty_like(pos)
    floor = float(np.median(timed(lambda: np.copyto(dst, pos), repeats)))
    flip = [pos, alt]

    def update():
        flip.reverse()
        view.set_data(flip[0], labels=labels)
        canvas.render()

    rows = [summary(f"pointcloud {n:,} pts: update + frame", timed(update, repeats), n, floor),
            summary(f"pointcloud {n:,} pts: redraw", timed(canvas.render, repeats), n, floor),
            summary(f"memcpy of {n:,} positions (floor)", np.array([floor]), n)]
    canvas.close()
    return rows


def bench_heatmap(side: int, repeats: int, rng) -> list[dict]:
    data = rng.normal(size=(side, side)).astype(np.float32)
    alt = data * np.float32(1.01)
    view = Heatmap(data)
    canvas = Canvas(side, side)
    canvas.add(view)
    dst = np.empty_like(data)
    floor = float(np.median(timed(lambda: np.copyto(dst, data), repeats)))
    flip = [data, alt]

    def update():
        flip.reverse()
        view.set_data(flip[0])
        canvas.render()

    rows = [summary(f"heatmap {side}x{side}: update + frame", timed(update, repeats), side * side, floor),
            summary(f"heatmap {side}x{side}: redraw", timed(canvas.render, repeats), side * side, floor)]
    canvas.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--json", help="write the raw figures here")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    rows += bench_pointcloud(2_000, args.repeats, rng)
    rows += bench_pointcloud(1_000_000, max(15, args.repeats // 2), rng)
    rows += bench_heatmap(1024, args.repeats, rng)
    from caliper_vk.engine import default_device

    info = default_device().info
    print(f"device: {info.name} ({info.kind}), driver {info.driver_info}, Vulkan {info.api_version}; "
          f"{platform.machine()}, Python {platform.python_version()}, numpy {np.__version__}")
    print(f"{'case':45s} {'median ms':>10s} {'IQR ms':>8s} {'n':>4s} {'items/s':>12s} {'x memcpy':>9s}")
    for r in rows:
        ratio = f"{r['vs_memcpy']:.1f}" if "vs_memcpy" in r else ""
        print(f"{r['case']:45s} {r['median_ms']:10.2f} {r['iqr_ms']:8.2f} {r['n']:4d} "
              f"{r['items_per_s']:12.3g} {ratio:>9s}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": info.name, "driver": info.driver_info, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
