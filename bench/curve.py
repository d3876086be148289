"""GPU milliseconds per pass of a curve frame (Vulkan timestamps), at a loss history of N samples:
the stats pass, the EMA's scan (curve_smooth.comp, three stages), the columns and the ticks,
with and without smoothing, on a linear and a log axis.

Run: .venv/bin/python bench/curve.py [--n 1000000] [--repeats 15] [--json out.json]
This is a benchmark, not a test: nothing here asserts a duration. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import platform

import numpy as np

from caliper_vk.engine import Canvas
from caliper_vk.views import Curve

WARMUP = 3


def frame_passes(n: int, repeats: int, **options) -> dict:
    """Median GPU ms per marked pass of ``repeats`` frames of a 1200 x 300 curve panel."""
    steps = np.arange(n, dtype=np.float32)
    loss = (3.0 * np.exp(-steps / (n / 8)) + 2e-4).astype(np.float32)
    view = Curve(loss, **options)
    rows = []
    with Canvas(1200, 300) as canvas:
        canvas.add(view)
        canvas.profile()
        for _ in range(repeats + WARMUP):
            view.data_version += 1
            canvas.render()
            rows.append(dict(canvas.timings()))
    rows = rows[WARMUP:]
    return {k: float(np.median([r[k] for r in rows])) for k in rows[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--json")
    a = ap.parse_args()
    out = {"cpu": platform.processor() or platform.machine(), "n": a.n}
    for name, options in {"raw": {}, "smoothed": {"smoothing": 0.95},
                          "smoothed-log": {"smoothing": 0.95, "log_y": True}}.items():
        out[name] = frame_passes(a.n, a.repeats, **options)
        print(name, json.dumps({k: round(v, 3) for k, v in out[name].items()}))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
