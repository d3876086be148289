"""What the demos share: the device they train on, their session (window, or PNG frames without a
display), the progress bar, and keeping the window open after training."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ..live import Session, display_available


DEVICES = ("auto", "cuda", "mps", "cpu")


def train_device(asked: str = "auto") -> str:
    """The torch device a demo trains on and draws from: ``auto`` picks cuda, then mps, then cpu.

    On cuda the model and the drawn tensors live in VRAM (``caliper_vk.empty(device="cuda")``: the
    shared-memory path); on mps in MPS tensors whose MTLBuffers MoltenVK imports; on cpu in host
    memory. A device asked for that is absent is a ``ValueError`` naming why and what to use.
    """
    import torch

    if asked not in DEVICES:
        raise ValueError(f"--device {asked!r}: use one of {', '.join(DEVICES)}")
    cuda, mps = torch.cuda.is_available(), torch.backends.mps.is_available()
    if asked == "auto":
        return "cuda" if cuda else "mps" if mps else "cpu"
    if asked == "cuda" and not cuda:
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        raise ValueError(f"--device cuda: torch {torch.__version__} ({build}) sees no CUDA device; "
                         "install torch with CUDA on a machine with an NVIDIA GPU, or use --device auto/cpu")
    if asked == "mps" and not mps:
        raise ValueError(f"--device mps: torch {torch.__version__} sees no MPS device (Apple Silicon, "
                         "macOS 12.3 or later); use --device auto/cpu")
    return asked


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
