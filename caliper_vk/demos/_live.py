"""What the demos share: their session (window, or PNG frames without a display), the progress
bar, and keeping the window open after training."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ..live import Session, display_available


def demo_session(name: str, out_dir, width: int, height: int, every: int, window: bool | None):
    """A session for demo ``name``: in a window when there is a display (or ``window=True``),
    else writing a frame every ``every`` steps to ``out_dir/frames/`` (old frames removed).
    Returns ``(session, frames_dir, windowed)``."""
    frames_dir = Path(out_dir) / "frames"
    frames_dir.mkdir(parents=True, exist_ok=True)
    for old in frames_dir.glob("frame_*.png"):
        old.unlink()
    windowed = display_available() if window is None else window
    session = Session(window=windowed, size=(width, height), out_dir=None if windowed else frames_dir,
                      save_every=0 if windowed else every, title=f"Caliper · {name}")
    return session, frames_dir, windowed


def progress_bar(progress: bool, steps: int, desc: str):
    """A tqdm bar on stderr, or None when ``progress`` is off."""
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=steps, desc=desc, unit="step", file=sys.stderr, leave=False)


def hold_window(session: Session, windowed: bool, interrupted: bool, step: int, log) -> None:
    """After training in a window, keep drawing until the user closes it."""
    if windowed and not interrupted and session.window is not None and session.window.alive:
        log("caliper: training finished; close the window to exit")
        while session.window.alive:
            session.step(step)
            time.sleep(1 / 60)
