"""GPU milliseconds per pass of a curve frame (Vulkan timestamps), at a loss history of N samples:
the stats pass, the EMA's blocked scan (curve_smooth.comp, three stages), the columns and the
ticks, with and without smoothing, on a linear and a log axis. ``--chunk K`` (repeatable) forces
the scan's chunk size to compare blockings side by side: ``--chunk 0`` is the default rule
(``curve.scan_chunk``), a chunk of N or more samples is one chunk, the plain sequential order.

Run: .venv/bin/python bench/curve.py [--n 1000000] [--repeats 15] [--chunk 0 --chunk 1048576] [--json out.json]
This is a benchmark, not a test: nothing here asserts a duration. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import platform

import numpy as np

from caliper_vk.engine import Canvas
from caliper_vk.views import Curve, curve

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
    ap.add_argument("--chunk", type=int, action="append",
                    help="the EMA scan's samples per chunk (0: the default rule); repeat to compare")
    ap.add_argument("--json")
    a = ap.parse_args()
    out = {"cpu": platform.processor() or platform.machine(), "n": a.n}
    default_rule = curve.scan_chunk
    for chunk in a.chunk or [0]:
        curve.scan_chunk = default_rule if chunk == 0 else (lambda n, c=chunk: c)
        for name, options in {"raw": {}, "smoothed": {"smoothing": 0.95},
                              "smoothed-log": {"smoothing": 0.95, "log_y": True}}.items():
            key = f"{name} chunk {curve.scan_chunk(a.n)}"
            out[key] = frame_passes(a.n, a.repeats, **options)
            print(key, json.dumps({k: round(v, 3) for k, v in out[key].items()}))
    curve.scan_chunk = default_rule
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
