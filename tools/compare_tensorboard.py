"""Caliper's dashboard and TensorBoard side by side on the same runs (docs/tensorboard-comparison.md).

    .venv/bin/python tools/compare_tensorboard.py              # writes docs/img/compare-*.png
    .venv/bin/python tools/compare_tensorboard.py --out /tmp/cmp --keep

What it does, in order:

1. loads the bundled example runs (``caliper_vk.runs``) and writes each to TensorBoard event
   files with ``torch.utils.tensorboard.SummaryWriter``: every scalar at its step and wall
   time, the first sample of each carrying the run's recorded definition and unit as the
   summary description (TensorBoard shows it on the chart card), weight histograms from the
   recorded bins (``add_histogram_raw``; TensorBoard has no place for the out-of-range
   counts), and image probes (``kind="image"``) as greyscale images;
2. starts ``tensorboard --logdir ... --host 127.0.0.1`` (the dev requirements pin it) on a
   free port for each comparison, waits until it answers, and screenshots its Time Series
   page with headless Chromium (Debian: ``apt-get install chromium``), with
   ``--virtual-time-budget`` so the charts have drawn; TensorBoard runs with its defaults
   (smoothing 0.6, "ignore outliers in chart scaling" on, every run shown);
3. renders Caliper's dashboard on the same runs offscreen (``Dashboard.save_png``), with its
   defaults, at the same size;
4. writes the PNGs as 8-bit palette images (each must stay under 300 KB) into ``--out``.

The comparisons: the 7 classification runs overlaid (TensorBoard filtered to the tags Caliper
opens with); the super-resolution run alone (TensorBoard's Time Series, and its Custom Scalars
page with a layout that puts each metric and its bicubic baseline on one chart); and what
each opens on with all 8 bundled runs and no setting touched. Nothing here runs in CI: it is how the
documentation's figures are made. Every server it starts binds 127.0.0.1 and is stopped
before it exits.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MAX_PNG_BYTES = 300 * 1024


def write_events(run, logdir: Path) -> Path:
    """``run`` as TensorBoard event files in ``logdir/<run name>``; returns that directory."""
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from torch.utils.tensorboard import SummaryWriter

    out = logdir / run.name
    writer = SummaryWriter(str(out))
    started = float(run.meta.get("started") or 0.0)
    files = writer._get_file_writer()
    try:
        for key, s in run.metrics.items():
            steps, values = s.measured()
            wall = started + run.coordinate("time", steps.astype(np.float64))
            text = " ".join(x for x in (s.description or "", f"[{s.unit}]" if s.unit else "") if x)
            for i, (step, value) in enumerate(zip(steps.tolist(), values.tolist(), strict=True)):
                meta = SummaryMetadata(summary_description=text) if i == 0 and text else None
                summary = Summary(value=[Summary.Value(tag=key, simple_value=value, metadata=meta)])
                files.add_summary(summary, int(step), float(wall[i]) if np.isfinite(wall[i]) else None)
        for key, frames in run.histograms.items():
            for f in frames:
                counts = np.asarray(f.counts, dtype=np.float64)
                if counts.sum() == 0:
                    continue
                centres = (f.edges[:-1] + f.edges[1:]) / 2
                used = np.nonzero(counts)[0]
                writer.add_histogram_raw(key, float(f.edges[used[0]]), float(f.edges[used[-1] + 1]),
                                         int(counts.sum()), float((counts * centres).sum()),
                                         float((counts * centres ** 2).sum()), f.edges[1:].tolist(),
                                         counts.tolist(), global_step=int(f.step))
        for key, frames in run.arrays.items():
            for f in frames:
                a = np.asarray(f.array, dtype=np.float32)
                if f.kind == "image" and a.ndim == 2:
                    writer.add_image(key, np.clip(a, 0, 1), int(f.step), dataformats="HW")
        pairs = [(k[: -len("_bicubic")], k) for k in run.metrics if k.endswith("_bicubic")]
        if pairs:  # the baseline on its metric's chart: TensorBoard's Custom Scalars plugin, from a layout
            writer.add_custom_scalars({"against the baseline": {
                f"{a} and {b}": ["Multiline", [f"^{a}$", f"^{b}$"]] for a, b in pairs}})
    finally:
        writer.close()
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def tensorboard(logdir: Path, expect_runs: int, timeout_s: float = 90.0):
    """A TensorBoard server on 127.0.0.1 over ``logdir``; yields its URL once it serves the scalars
    of ``expect_runs`` runs."""
    port = _free_port()
    exe = Path(sys.executable).with_name("tensorboard")
    # --load_fast=false: the Python reader; the default Rust one drops the descriptions of scalars
    # written as simple values (SummaryWriter.add_scalar's format). The log directory is given
    # relative to the working directory: Custom Scalars prints it under the run list
    cmd = [str(exe) if exe.exists() else "tensorboard", "--logdir", logdir.name, "--host", "127.0.0.1",
           "--port", str(port), "--reload_interval", "0", "--load_fast=false"]
    log_path = logdir.with_name(f"{logdir.name}-tensorboard.log")
    log = open(log_path, "w")  # a file, not a pipe: a pipe nobody reads could fill and stall the server
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=logdir.parent)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"tensorboard exited ({proc.returncode}): {log_path.read_text()[-800:]}")
            try:  # every run's scalar tags loaded (the run list answers before the tags have)
                with urllib.request.urlopen(url + "data/plugin/scalars/tags", timeout=2) as r:
                    if r.status == 200 and len(json.loads(r.read() or b"{}")) >= expect_runs:
                        break
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"tensorboard did not answer on {url} within {timeout_s:.0f} s")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit("no Chromium found: install it (Debian: apt-get install chromium) and run this again")


def _drawn(path: Path) -> float:
    """The fraction of inked pixels (axes, ticks, lines, tables) in the cards' part of a
    TensorBoard screenshot, between the run list and the settings: 0 while the cards are empty."""
    from PIL import Image

    a = np.asarray(Image.open(path).convert("RGB"))
    h, w = a.shape[:2]
    mid = a[int(h * 0.14):, int(w * 0.24):int(w * 0.82)]
    return float((mid.min(axis=2) < 200).mean())


def screenshot(url: str, out: Path, size: tuple[int, int], budget_ms: int = 40000, tries: int = 5) -> Path:
    """A headless Chromium screenshot of ``url`` after ``budget_ms`` of virtual time. TensorBoard
    fetches each chart's data when its card appears, and some loads end with the cards still
    empty: the page is taken again (at most ``tries`` times) until charts show."""
    best = (-1.0, None)
    for attempt in range(tries):
        shot = out.with_name(f".{out.stem}-{attempt}.png")
        with tempfile.TemporaryDirectory(prefix="caliper-chromium-") as profile:
            cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                   f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}",
                   f"--virtual-time-budget={budget_ms}", f"--screenshot={shot}", url]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        if proc.returncode != 0 or not shot.is_file():
            raise SystemExit(f"chromium failed ({proc.returncode}): {proc.stderr[-800:]}")
        drawn = _drawn(shot)
        if drawn > best[0]:
            if best[1] is not None:
                best[1].unlink()
            best = (drawn, shot)
        else:
            shot.unlink()
        if drawn > 0.005:
            break
    else:
        print(f"caliper: warning: {out.name}: no charts drawn after {tries} loads; keeping the fullest",
              file=sys.stderr)
    best[1].replace(out)
    return out


def caliper_png(runs, out: Path, size: tuple[int, int], shown=None, panels=None, pins=()) -> Path:
    """Caliper's dashboard on ``runs`` offscreen: its defaults, or the ``panels`` named, with the
    array cells in ``pins`` ((probe, index) pairs) pinned as a click would."""
    from caliper_vk.dashboard.app import Dashboard

    dash = Dashboard(runs, size=size, shown=shown, panels=panels)
    try:
        for key, index in pins:
            dash.pin_cell(key, index)
        return Path(dash.save_png(str(out)))
    finally:
        dash.close()


def shrink(path: Path) -> int:
    """Rewrite ``path`` as an 8-bit palette PNG (both UIs use few colours); returns its size."""
    from PIL import Image

    img = Image.open(path).convert("RGB")
    img.quantize(colors=128, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
        path, optimize=True)
    size = path.stat().st_size
    if size > MAX_PNG_BYTES:
        raise SystemExit(f"{path} is {size // 1024} KB, over the {MAX_PNG_BYTES // 1024} KB the docs allow; "
                         f"use a smaller --size")
    return size


# (name, runs, TensorBoard pages as (suffix, URL query and fragment), Caliper's shown runs or None for all)
OVERLAY_TAGS = r"^(train/loss|val/loss|val/accuracy|lr/group0)$"  # what Caliper's dashboard opens with
SR_TAGS = r"^val/(psnr|ssim)"


def _page(tags: str | None, plugin: str = "timeseries") -> str:
    """A TensorBoard URL tail: SVG charts (headless Chromium has no WebGL for its default ones),
    the tag filter, the page."""
    query = "?forceSVG=true" + (f"&tagFilter={urllib.request.quote(tags, safe='')}" if tags else "")
    return f"{query}#{plugin}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img",
                    help="where the PNGs go (default docs/img)")
    ap.add_argument("--size", default="1600x1000",
                    help="every screenshot's size WIDTHxHEIGHT (default 1600x1000)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the event files (the folder is printed) instead of deleting them")
    args = ap.parse_args(argv)
    size = tuple(int(v) for v in args.size.lower().split("x"))
    sys.path.insert(0, str(ROOT))
    from caliper_vk.record import load_run
    from caliper_vk.runs import EXAMPLES, example_paths

    runs = {p.parent.name: load_run(p) for p in example_paths()}
    first = next(iter(EXAMPLES))
    comparisons = [
        ("overlay", [r for n, r in runs.items() if n != "super_resolution"],
         [("", _page(OVERLAY_TAGS))], None),
        ("single", [runs["super_resolution"]],
         [("", _page(SR_TAGS)), ("-custom-scalars", _page(None, "custom_scalars")),
          # the older Scalars page: it shows each tag's description (the (i) on a chart)
          ("-scalars", "?forceSVG=true#scalars&tagFilter=" + urllib.request.quote(SR_TAGS[1:], safe="")),
          ("-images", _page("^sr/"))], None),
        ("default", list(runs.values()), [("", _page(None))], [first]),  # what each opens on
    ]
    # the image probes, and one cell of the output pinned: its value, index, step and trace
    arrays = dict(panels=["sr/", "kernels"], pins=[("sr/output", (14, 20))])
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="caliper-tb-"))
    written = []
    try:
        for label, chosen, pages, shown in comparisons:
            logdir = work / label
            for run in chosen:
                write_events(run, logdir)
            print(f"caliper: {len(chosen)} run(s) written as TensorBoard events to {logdir}", flush=True)
            with tensorboard(logdir, len(chosen)) as url:
                for suffix, page in pages:
                    out = args.out / f"compare-{label}-tensorboard{suffix}.png"
                    written.append(screenshot(url + page, out, size))
                    print(f"caliper: {out.name}: {url + page}", flush=True)
            written.append(caliper_png(chosen, args.out / f"compare-{label}-caliper.png", size,
                                       shown=shown or [r.name for r in chosen]))
            if label == "single":
                written.append(caliper_png(chosen, args.out / "compare-single-caliper-arrays.png", size,
                                           **arrays))
        for path in written:
            print(f"caliper: {path} ({shrink(path) // 1024} KB)")
    finally:
        if args.keep:
            print(f"caliper: event files kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
