"""``caliper render RUN -o out.mp4``: a video of a recorded run's array probes.

One frame per step at which any chosen probe was recorded, in step order.
Each probe gets a panel drawn by the engine's views exactly as the
dashboard's array panels draw it (:class:`~caliper_vk.dashboard.arrays.ArrayPanels`),
under a title bar that names the probe and the step of the frame it shows:
a probe recorded more sparsely than another keeps showing its latest frame
at or before the video's step, and its title says which step that is (a
sparse panel always states its frame's step). The bottom line names the run
and the video frame's step. Frames go through :class:`~caliper_vk.live.sinks.video.VideoWriter`,
which also writes the steps beside the video.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from . import chrome
from .chrome import LABEL_BACKGROUND, TextStrip
from .engine import Canvas, Rect
from .engine.canvas import grid_rects
from .live.layout import GAP, grid_shape


def choose(run, keys: list[str] | None) -> list[str]:
    """The probes to show: ``keys`` (each must match a recorded probe name, or a unique part of
    one), or every recorded one."""
    recorded = [k for k, frames in run.arrays.items() if frames]
    if not recorded:
        raise ValueError(f"run {run.name} recorded no array probes; nothing to render "
                         "(record some with Recorder.probe or Watch.capture)")
    if not keys:
        return recorded
    out = []
    for want in keys:
        exact = [k for k in recorded if k == want]
        found = exact or [k for k in recorded if want in k]
        if len(found) != 1:
            raise ValueError(f"--array {want!r} matches {len(found)} probes; the run's probes are: "
                             f"{', '.join(recorded)}")
        out.append(found[0])
    return out


def frames(run, keys: list[str], size=(800, 600)) -> Iterator[tuple[int, np.ndarray]]:
    """``(step, rgba)`` for every step at which one of ``keys`` was recorded, in step order."""
    from .dashboard.arrays import ArrayPanels

    width, height = int(size[0]), int(size[1])
    series = {k: sorted(run.arrays[k], key=lambda f: f.step) for k in keys}
    steps = sorted({f.step for fs in series.values() for f in fs})
    line = chrome.line_height()
    rows, cols = grid_shape(len(keys), width, height - line)
    cells = [r for row in grid_rects(width, height - line, rows, cols, GAP) for r in row]
    canvas = Canvas(width, height)
    status = TextStrip()
    canvas.place(status, Rect(0, height - line, width, line))
    shown = {}  # key -> (title strip, view, data signature)
    try:
        for n, step in enumerate(steps):
            for key, cell in zip(keys, cells, strict=False):
                fs = series[key]
                i = bisect.bisect_right([f.step for f in fs], step) - 1
                title = shown.get(key, (None,))[0]
                if title is None:
                    title = TextStrip(background=LABEL_BACKGROUND)
                    canvas.place(title, Rect(cell.x, cell.y, cell.width, line))
                    shown[key] = (title, None, None)
                if i < 0:
                    title.set_items([(key, chrome.FOREGROUND)], [(f"not recorded before step {fs[0].step}",
                                                                  chrome.DIM)])
                    continue
                frame = fs[i]
                data = ArrayPanels._array_data(frame.array)
                _, view, signature = shown[key]
                kind = (data.shape, frame.array.ndim)
                if view is not None and signature == kind:
                    view.set_data(data)
                else:
                    if view is not None:
                        canvas.remove(next(p for p in canvas.panels if p.drawable is view))
                    view = ArrayPanels._array_view(data, frame.array.ndim)
                    canvas.place(view, Rect(cell.x, cell.y + line, cell.width, cell.height - line))
                shown[key] = (title, view, kind)
                age = "" if frame.step == step else " (no newer frame)"
                title.set_items([(key, chrome.FOREGROUND)],
                                [(f"step {frame.step}{age}  ", chrome.DIM), *view.legend()])
            status.set_items([(f"{run.name} · step {step} · frame {n + 1} of {len(steps)}",
                               chrome.FOREGROUND)])
            yield step, canvas.render()
    finally:
        canvas.close()


def render_run(path, out, keys: list[str] | None = None, size=(800, 600), fps: float = 10.0) -> dict:
    """Write the video ``out`` of the run at ``path``; returns what was written."""
    from .dashboard.app import open_runs
    from .live.sinks.video import VideoWriter, steps_path

    runs = open_runs([path])
    if len(runs) != 1:
        raise ValueError(f"{path} holds {len(runs)} runs ({', '.join(r.name for r in runs)}); "
                         "give one run directory")
    run = runs[0]
    keys = choose(run, keys)
    writer = VideoWriter(out, fps=fps)
    try:
        for step, rgba in frames(run, keys, size):
            writer.write(rgba, step)
    finally:
        path_out = writer.close()
    return {"run": run.name, "probes": keys, "frames": len(writer.steps), "path": Path(path_out),
            "steps": steps_path(path_out), "codec": writer.codec}
