"""``python -m caliper_vk.runs``: regenerate the bundled example runs (see :mod:`caliper_vk.runs`).

    python -m caliper_vk.runs                        # all of them, into the package's examples/
    python -m caliper_vk.runs --only digits_mlp      # one (the option repeats)
    python -m caliper_vk.runs --out /tmp/ex --epochs 1   # the first epoch of each, elsewhere

Each run directory is replaced whole (its ``run.json``, its sidecar ``run-*.bin``,
``log.jsonl`` and ``snapshots/``); a directory holding anything else is left alone and the
command stops, so a mistyped ``--out`` cannot delete someone's files.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from tqdm import tqdm

from ..record import load_run
from . import EXAMPLES, EXAMPLES_DIR
from .common import scrub

RUN_FILES = {"run.json", "log.jsonl", "snapshots"}


def _clear(run_dir: Path) -> None:
    if not run_dir.exists():
        return
    foreign = sorted(p.name for p in run_dir.iterdir() if p.name not in RUN_FILES and not _sidecar(p))
    if foreign:
        raise SystemExit(f"caliper: {run_dir} holds files that are not a recorded run "
                         f"({', '.join(foreign[:5])}); not replacing it — choose another --out")
    (run_dir / "run.json").unlink(missing_ok=True)
    (run_dir / "log.jsonl").unlink(missing_ok=True)
    shutil.rmtree(run_dir / "snapshots", ignore_errors=True)
    for p in run_dir.iterdir():
        if _sidecar(p):
            p.unlink()


def _sidecar(p: Path) -> bool:
    """A ``run.json``'s array sidecar (``run-<token>.bin``, see ``record.runfile``)."""
    return p.is_file() and p.name.startswith("run-") and p.suffix == ".bin"


def _size(run_dir: Path) -> int:
    return sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())


def _last(run, name: str) -> float:
    s = run.metrics.get(name)
    return float(s.value[-1]) if s is not None and len(s) else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m caliper_vk.runs", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=EXAMPLES_DIR, help="directory for the runs (default: the "
                    "package's examples/)")
    ap.add_argument("--only", action="append", choices=list(EXAMPLES), metavar="NAME",
                    help=f"regenerate only this run (repeatable): {', '.join(EXAMPLES)}")
    ap.add_argument("--epochs", type=int, default=None, metavar="N",
                    help="stop each run after N epochs (a prefix of the full run: same seeds and schedule)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)
    if args.epochs is not None and args.epochs < 1:
        ap.error("--epochs must be at least 1")
    names = args.only or list(EXAMPLES)
    rows = []
    for name in names:
        run_dir = args.out / name
        _clear(run_dir)
        bar = tqdm(desc=f"{name:<20}", unit="step", file=sys.stderr, disable=args.no_progress, leave=True)

        def on_step(total, bar=bar):
            if bar.total != total:
                bar.total = total
                bar.refresh()
            bar.update(1)

        try:
            EXAMPLES[name].train(run_dir, name=name, stop_after=args.epochs, on_step=on_step)
        finally:
            bar.close()
        command = f"python -m caliper_vk.runs --only {name}"
        if args.epochs:
            command += f" --epochs {args.epochs}"
        run = load_run(scrub(run_dir, command))
        rows.append((name, int(run.progress_step[-1]), run.status, _last(run, "train/loss"),
                     _last(run, "val/loss"), run.best_step(), _size(run_dir)))
    print(f"\n{'run':<20} {'steps':>5} {'status':<9} {'train/loss':>10} {'val/loss':>9} {'best':>5} "
          f"{'size':>9}")
    for name, steps, status, tl, vl, best, size in rows:
        print(f"{name:<20} {steps:>5} {status:<9} {tl:>10.4f} {vl:>9.4f} {best!s:>5} {size / 1024:>7.0f}KB")
    print(f"{'total':<20} {'':>5} {'':<9} {'':>10} {'':>9} {'':>5} {sum(r[-1] for r in rows) / 1024:>7.0f}KB")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
