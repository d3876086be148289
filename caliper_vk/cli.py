"""The ``caliper`` command: doctor, render, demo, view.

User errors (bad files, shapes, dtypes, names) print one ``caliper: error:``
line naming the problem and the accepted values, and exit with status 2; no
traceback. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

EXIT_USER_ERROR = 2


class UserError(Exception):
    """A problem with what the user asked for; printed without a traceback."""


def _user_errors():
    from .colormaps import UnknownColormapError
    from .engine import NoDeviceError, ShaderCompileError
    from .views import UnknownViewError

    return (UserError, UnknownColormapError, UnknownViewError, NoDeviceError, ShaderCompileError,
            ValueError, TypeError, FileNotFoundError, IsADirectoryError, PermissionError)


# -- input files ------------------------------------------------------------------------------
def load_arrays(path: str) -> dict[str, np.ndarray]:
    """Arrays from ``.npy`` (one array), ``.npz`` or ``.pt`` (a tensor or a dict of tensors)."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"input file {path!r} does not exist")
    suffix = p.suffix.lower()
    try:
        if suffix == ".npy":
            return {"data": np.load(p, allow_pickle=False)}
        if suffix == ".npz":
            with np.load(p, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        if suffix in (".pt", ".pth"):
            import torch

            obj = torch.load(p, map_location="cpu", weights_only=True)
            if isinstance(obj, torch.Tensor):
                return {"data": obj}
            if isinstance(obj, dict) and all(isinstance(v, torch.Tensor) for v in obj.values()):
                return dict(obj)
            raise UserError(f"{path}: expected a tensor or a dict of tensors, found "
                            f"{type(obj).__name__}")
    except UserError:
        raise
    except Exception as exc:
        raise UserError(f"cannot read {path!r} as {suffix} ({type(exc).__name__}: {exc})") from exc
    raise UserError(f"input file {path!r} has an unknown type {suffix!r}; "
                    "accepted: .npy, .npz, .pt/.pth")


def _pick(arrays: dict, *names):
    for n in names:
        if n in arrays:
            return arrays[n]
    return None


def _range(text: str):
    if text in ("auto", "symmetric"):
        return text
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise UserError(f"--range {text!r}: use auto, symmetric or LO,HI (e.g. -1,1)") from None
    return (lo, hi)


def _bins(text: str):
    if text.strip().lower() == "auto":
        return "auto"
    try:
        bins = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a number of bins nor auto") from None
    if bins < 1:
        raise argparse.ArgumentTypeError(f"{bins} bins: give at least 1, or auto")
    return bins


# The optional packages behind the CLI's features, by the top-level module a missing one raises for:
# a missing one is a one-line error naming the extra that installs it.
EXTRAS = {"websockets": "web", "av": "video", "jupyter_rfb": "notebook", "tensorboard": "tensorboard",
          "sklearn": "demo", "transformers": "hf", "pytorch_lightning": "lightning", "lightning": "lightning",
          "cuda": "cuda"}


def _missing_package(exc: ModuleNotFoundError) -> str | None:
    """The one-line error for a missing optional package, or None when ``exc`` is not about one."""
    top = (exc.name or "").split(".")[0]
    if top == "torch":
        return ("this needs PyTorch, which is not installed: install the build for your machine first "
                "(https://pytorch.org/get-started/locally/), then run this again")
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return f"this needs the optional package {top!r}: pip install 'caliper-vk[{extra}]'"


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UserError(f"--size {text!r}: use WIDTHxHEIGHT, e.g. 800x600") from None
    return w, h


# -- commands -------------------------------------------------------------------------------------
def cmd_doctor(args) -> int:
    from .doctor import report

    if not args.selftest:
        if args.quick or args.require or args.report != "caliper-selftest.json":
            raise UserError("--quick, --require and --report are options of --selftest")
        print(report())
        return 0
    from . import selftest

    text = report()
    print(text)
    kind = "smoke test" if args.quick else "self-test"
    try:
        result = selftest.run(quick=args.quick, require=args.require)
    except RuntimeError as exc:  # the backend asked for is absent: the one line says so
        print(f"caliper {kind}: FAILED | {exc}")
        return 1
    result.doctor = text
    json_path, txt_path = result.write(args.report)
    print(f"caliper: report written to {json_path} and {txt_path} (no user or host names in it: "
          "attach both to a bug report)")
    print(result.summary_line())
    return 0 if result.passed else 1


def cmd_render(args) -> int:
    if args.run is not None:
        return cmd_render_run(args)
    if not args.view or not args.input or not args.out:
        raise UserError("render needs --view, --input and --out (a PNG of one array), or a run "
                        "directory and -o VIDEO (a video of its array probes)")
    from .engine import Canvas
    from .views import make_view

    arrays = load_arrays(args.input)
    extra = {}
    for flag, key in ((args.labels, "labels"), (args.values, "values")):
        if flag:
            extra[key] = next(iter(load_arrays(flag).values()))
    width, height = _size(args.size)
    if args.view == "pointcloud":
        positions = _pick(arrays, "positions", "data")
        if positions is None:
            raise UserError(f"{args.input} holds {sorted(arrays)}; the pointcloud view needs "
                            "'positions' (or a single array)")
        labels = extra.get("labels", _pick(arrays, "labels"))
        values = extra.get("values", _pick(arrays, "values"))
        view = make_view("pointcloud", positions=positions, labels=labels, values=values,
                         yaw_deg=args.yaw, pitch_deg=args.pitch, zoom=args.zoom,
                         point_size_px=args.point_size, colormap=args.colormap,
                         palette=args.palette, value_range=_range(args.range))
    elif args.view == "heatmap":
        data = _pick(arrays, "data", "heatmap", "values")
        if data is None:
            raise UserError(f"{args.input} holds {sorted(arrays)}; the heatmap view needs "
                            "'data' (or a single array)")
        view = make_view("heatmap", data=data, colormap=args.colormap,
                         value_range=_range(args.range))
    elif args.view == "histogram":
        data = _pick(arrays, "data", "values")
        if data is None:
            raise UserError(f"{args.input} holds {sorted(arrays)}; the histogram view needs "
                            "'data' (or a single array)")
        view = make_view("histogram", data=data, bins=args.bins, value_range=_range(args.range))
    elif args.view == "curve":
        data = _pick(arrays, "data", "values")
        if data is None:
            raise UserError(f"{args.input} holds {sorted(arrays)}; the curve view needs "
                            "'data' (or a single array)")
        view = make_view("curve", data=data, value_range=_range(args.range), smoothing=args.smoothing,
                         log_y=args.log_y)
    else:
        make_view(args.view)  # raises with the list of views
        raise UserError(f"the view {args.view!r} cannot be rendered from the command line yet")
    with Canvas(width, height) as canvas:
        canvas.add(view)
        path = canvas.save_png(args.out)
        stats = ", ".join(f"{k} {v}" for k, v in view.stats.items())
        print(f"caliper: wrote {path} ({width}x{height}, {args.view}; {stats}) "
              f"on {canvas.device.info.name}")
    return 0


def cmd_render_run(args) -> int:
    from .render import render_run

    if args.view or args.input:
        raise UserError("--view and --input render one array to a PNG; a run directory renders its "
                        "array probes (choose them with --array)")
    if not args.out:
        raise UserError("give the video to write: -o out.mp4 (or .mkv for lossless, .webm)")
    if not Path(args.run).exists():
        raise UserError(f"run {args.run!r} does not exist")
    size = _size(args.size)
    done = render_run(args.run, args.out, keys=args.array, size=size, fps=args.fps)
    print(f"caliper: wrote {done['path']} ({done['frames']} frames at {args.fps:g} fps, {size[0]}x{size[1]}, "
          f"{done['codec']}; probes {', '.join(done['probes'])} of run {done['run']}; the step of each "
          f"frame: {done['steps']})")
    return 0


def cmd_demo(args) -> int:
    steps = args.steps
    if args.name == "digits":
        from .demos import digits

        if args.text or args.sample_every is not None:
            raise UserError("--text and --sample-every are options of the gpt demo")
        width, height = _size(args.size or "1000x720")
        summary = digits.run(out_dir=args.out or "out/digits", steps=600 if steps is None else steps,
                             every=args.every, width=width, height=height,
                             window=False if args.headless else None, device=args.device)
        return 130 if summary["interrupted"] else 0
    if args.name == "gpt":
        from .demos import gpt, shakespeare

        width, height = _size(args.size or "1200x860")
        try:
            summary = gpt.run(out_dir=args.out or "out/gpt", steps=1500 if steps is None else steps,
                              every=args.every, width=width, height=height, text_path=args.text,
                              sample_every=100 if args.sample_every is None else args.sample_every,
                              window=False if args.headless else None, device=args.device)
        except shakespeare.TextUnavailableError as exc:
            raise UserError(str(exc)) from None
        return 130 if summary["interrupted"] else 0
    raise UserError(f"unknown demo {args.name!r}; available: digits, gpt")


def cmd_view(args) -> int:
    from .dashboard.app import Dashboard, open_runs
    from .engine.window import why_no_window

    paths = args.runs
    shown = args.show
    if not paths:
        from .runs import EXAMPLES, example_paths

        paths = example_paths()
        # the examples differ in model, task and scale (one's loss spikes to 700): open on the
        # first and keep the others a tick away in the sidebar
        shown = shown or [next(iter(EXAMPLES))]
        if not paths:
            raise UserError("no run given and no example runs installed; pass a run directory, "
                            "or make the examples with: python -m caliper_vk.runs")
    runs = open_runs(paths)
    for r in runs:
        if r.problems:
            print(f"caliper: {r.name}: {len(r.problems)} note(s): {r.problems[0]}", file=sys.stderr)
    options = dict(axis=args.axis, cursor=args.cursor, smoothing=args.smoothing, columns=args.columns,
                   hist_mode=args.histograms, panels=["*"] if args.all else args.panel, log_y=args.log_y,
                   shown=shown, reveal=args.reveal, pinned=args.pin, tables=args.tables, epochs=args.epochs)
    if args.web:
        return _serve_view(runs, options, args)
    refused = None if args.png else why_no_window()  # macOS: also off the main thread or over SSH
    if args.png or refused:
        out = args.png or "out/dashboard.png"
        dash = Dashboard(runs, size=_size(args.size), **options)
        try:
            path = dash.save_png(out)
        finally:
            dash.close()
        why = "" if args.png else f" (no window: {refused}; rendered offscreen)"
        print(f"caliper: dashboard of {len(runs)} run(s) written to {path}{why}")
        return 0
    from .engine.window import Window

    window = Window(_size(args.size), title="caliper view — " + ", ".join(r.name for r in runs)[:120])
    dash = Dashboard(runs, window=window, **options)
    try:
        dash.loop()
    finally:
        dash.close()
        window.close()
    return 0


def _serve_view(runs, options, args) -> int:
    from .dashboard.app import Dashboard
    from .dashboard.serve import serve
    from .web import FrameServer

    if args.png:
        raise UserError("--web serves the dashboard to a browser; --png writes one image: pick one")
    dash = Dashboard(runs, size=_size(args.size), **options)
    try:
        server = FrameServer(title="caliper view — " + ", ".join(r.name for r in runs)[:120],
                             host=args.host, port=args.port)
    except OSError as exc:
        dash.close()
        raise UserError(str(exc)) from None
    try:
        print("caliper: serving the dashboard; Ctrl-C stops", file=sys.stderr)
        serve(dash, server)
    except KeyboardInterrupt:
        print("caliper: stopped serving", file=sys.stderr)
    finally:
        server.close()
        dash.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="caliper", description=(
        "Caliper: watch a network's internal state in the same frame it was computed."))
    from . import __version__

    parser.add_argument("--version", action="version", version=f"caliper {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("doctor", help="list Vulkan devices and the transfer paths they support; "
                       "--selftest checks every view byte for byte on this machine's GPU")
    p.add_argument("--selftest", action="store_true",
                   help="run the self-test (every view in every dtype against its numpy twin on this "
                   "device, a writer racing the renderer, a timing of each transfer path) and write a "
                   "report to attach to a bug report")
    p.add_argument("--quick", action="store_true",
                   help="--selftest: only the smoke test (one frame of each view, under a minute)")
    p.add_argument("--require", choices=["cuda", "mps"],
                   help="--selftest: fail unless this backend is used (the hardware scripts)")
    p.add_argument("--report", default="caliper-selftest.json",
                   help="--selftest: the report's JSON path; a .txt summary is written beside it "
                   "(default caliper-selftest.json)")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("render", help="render a .npy/.npz/.pt file to a PNG, or a run's array probes "
                       "to a video, headless")
    p.add_argument("run", nargs="?", help="a run directory: make a video of its array probes (-o VIDEO)")
    p.add_argument("--view", help="pointcloud, heatmap, histogram or curve")
    p.add_argument("--input", help="FILE.npy | FILE.npz | FILE.pt")
    p.add_argument("-o", "--out", help="output PNG path; with a run, the video (.mp4, .mkv lossless, .webm)")
    p.add_argument("--array", action="append", help="with a run: the probes to show (repeatable; a name "
                   "or a unique part of one; default every probe)")
    p.add_argument("--fps", type=float, default=10.0, help="with a run: video frames per second (default 10)")
    p.add_argument("--size", default="800x600", help="WIDTHxHEIGHT (default 800x600)")
    p.add_argument("--labels", help="pointcloud: a file of integer labels, one per point")
    p.add_argument("--values", help="pointcloud: a file of values, one per point")
    p.add_argument("--yaw", type=float, default=None, help="pointcloud: yaw in degrees")
    p.add_argument("--pitch", type=float, default=None, help="pointcloud: pitch in degrees")
    p.add_argument("--zoom", type=float, default=1.0, help="pointcloud: zoom factor")
    p.add_argument("--point-size", type=int, default=3, help="pointcloud: point diameter in px")
    p.add_argument("--colormap", default="viridis",
                   help="matplotlib colormap: viridis, magma, coolwarm, RdBu_r, ...")
    p.add_argument("--palette", default="tab10", help="pointcloud labels: tab10, tab20, ...")
    p.add_argument("--range", default="auto", help="auto, symmetric, or LO,HI")
    p.add_argument("--bins", type=_bins, default=64,
                   help="histogram: number of bins, or auto (the rule of docs/views.md; default 64)")
    p.add_argument("--smoothing", type=float, default=None,
                   help="curve: EMA weight in (0, 1) for a smoothed line over the raw trace")
    p.add_argument("--log-y", action="store_true",
                   help="curve: a log y axis (values <= 0 are not drawn and are counted)")
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("demo", help="run a demo")
    p.add_argument("name", help="digits or gpt")
    p.add_argument("--out", help="output folder (default out/NAME)")
    p.add_argument("--steps", type=int, help="optimizer steps (default: digits 600, gpt 1500)")
    p.add_argument("--every", type=int, default=5,
                   help="offscreen: write a frame every N steps (default 5)")
    p.add_argument("--size", help="window or frame size WIDTHxHEIGHT (default: digits 1000x720, "
                   "gpt 1200x860)")
    p.add_argument("--headless", action="store_true", help="render offscreen even with a display")
    p.add_argument("--device", default="auto", choices=["auto", "cuda", "mps", "cpu"],
                   help="train and draw on this torch device (default auto: cuda, else mps, else cpu); "
                   "on cuda the drawn tensors are VRAM shared with Vulkan, on mps MTLBuffers")
    p.add_argument("--text", help="gpt: train on this text file instead of Shakespeare's plays")
    p.add_argument("--sample-every", type=int, help="gpt: new samples every N steps (default 100)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("view", help="the training dashboard for recorded runs (a window, a browser with "
                       "--web, or --png)")
    p.add_argument("runs", nargs="*", help="run directories, run.json / log.jsonl files, TensorBoard "
                   "event directories, or directories of runs (default: the bundled example runs)")
    p.add_argument("--png", help="render offscreen to this PNG instead of opening a window")
    p.add_argument("--size", default="1600x1000", help="WIDTHxHEIGHT (default 1600x1000)")
    p.add_argument("--axis", default="step", choices=["step", "epoch", "time", "samples"],
                   help="x axis (default step; samples: the count of steps with a record)")
    p.add_argument("--cursor", type=float, help="cursor position on the x axis (default: the last step)")
    p.add_argument("--panel", action="append", help="show panels whose title or a metric's name matches "
                   "this regular expression, case-insensitive (repeatable; default: loss, task metrics, "
                   "learning rate)")
    p.add_argument("--tables", action="store_true",
                   help="a value table under each chart: run, series, raw, smoothed, step, time at the cursor")
    p.add_argument("--epochs", action="store_true",
                   help="scalar panels epoch over epoch: each per-step series' epochs on one within-epoch "
                   "axis, older fainter (each scalar panel also has an 'epochs' toggle)")
    p.add_argument("--pin", action="append", metavar="PANEL",
                   help="pin the panels this regular expression matches to the top (repeatable)")
    p.add_argument("--all", action="store_true", help="show every panel")
    p.add_argument("--show", action="append", metavar="RUN",
                   help="draw only these runs at first (repeatable; the others stay in the sidebar's run "
                   "selector, hidden; default: every run given, or the first bundled example)")
    p.add_argument("--reveal", action="store_true",
                   help="show each run only up to the cursor, starting at the first evaluation, with its "
                   "settings hidden until you name a symptom (for reading a run as it unfolded)")
    p.add_argument("--smoothing", type=float, default=0.0,
                   help="EMA weight in [0, 1) for a smoothed line beside each raw trace")
    p.add_argument("--columns", type=int, default=2, help="panels per row (default 2)")
    p.add_argument("--log-y", action="store_true",
                   help="loss panels on a logarithmic y axis (each panel also has a 'log y' toggle)")
    p.add_argument("--histograms", default="overlay", choices=["overlay", "offset", "time"],
                   help="histogram panels: overlay (fading by age), offset, or over time")
    p.add_argument("--web", action="store_true",
                   help="serve the dashboard to a browser (prints a URL with a token) instead of a window")
    p.add_argument("--host", default="127.0.0.1",
                   help="--web: the interface to bind (default 127.0.0.1: this machine only; use ssh -L)")
    p.add_argument("--port", type=int, default=8765, help="--web: the TCP port (default 8765; 0: any free one)")
    p.set_defaults(func=cmd_view)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except _user_errors() as exc:
        print(f"caliper: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except ImportError as exc:
        from ._optional import MissingExtraError

        message = str(exc) if isinstance(exc, MissingExtraError) else (
            _missing_package(exc) if isinstance(exc, ModuleNotFoundError) else None)
        if message is None:
            raise
        print(f"caliper: error: {message}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("caliper: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
