"""Frame pacing: draw at most ``max_fps`` frames a second, save every Kth step, time frames.

Training never waits for the display: a step inside ``1/max_fps`` of the last
frame draws nothing (it is *held*, and costs the loop next to nothing), and
:meth:`Pacing.due` lets a loop skip computing what it would only draw. The
one exception is an offscreen recording (``save_every``): those steps always
get their frame.
"""

from __future__ import annotations

import statistics
import time
from collections import deque


def check_max_fps(max_fps) -> None:
    if not (max_fps is None or max_fps == "auto"
            or (isinstance(max_fps, (int, float)) and not isinstance(max_fps, bool) and max_fps > 0)):
        raise ValueError(f"max_fps must be a positive number, None (no limit) or 'auto', got {max_fps!r}")


class Pacing:
    """When a session draws, and how long its frames took.

    Parameters
    ----------
    max_fps : float, None or "auto"
        ``"auto"``: 60 with a window (a display shows no more), no limit offscreen.
    windowed : bool
        Whether the session draws into a window.
    save_every : int
        Offscreen sessions with an output folder save a frame every ``save_every`` steps.
    """

    def __init__(self, max_fps, windowed: bool, save_every: int = 0, saving: bool = False):
        check_max_fps(max_fps)
        self.max_fps = (60.0 if windowed else None) if max_fps == "auto" else max_fps
        self.save_every = int(save_every)
        self.saving = saving and not windowed  # offscreen, with an output folder
        self.held = 0  # steps that drew nothing because the last frame was under 1/max_fps ago
        self.submit_time = 0.0
        self.frame_times: deque[float] = deque(maxlen=30)  # the last 30 submit -> complete times

    def save_due(self, step: int) -> bool:
        return self.saving and self.save_every > 0 and step % self.save_every == 0

    def within_interval(self) -> bool:
        """True when the last frame was submitted less than ``1/max_fps`` ago."""
        return bool(self.max_fps) and time.perf_counter() - self.submit_time < 1.0 / self.max_fps

    def submitted(self, now: float) -> None:
        """A frame was submitted at ``now`` (``time.perf_counter()``)."""
        self.submit_time = now

    def completed(self) -> None:
        """The frame in flight was seen complete: keep the last 30 submit → complete times."""
        self.frame_times.append(time.perf_counter() - self.submit_time)

    @property
    def frame_ms(self) -> float:
        # statistics, not numpy: np.median of a deque imports numpy.ma (0.3 s) on the status line's
        # first refresh, inside a training step
        return 1000 * statistics.median(self.frame_times) if self.frame_times else 0.0
