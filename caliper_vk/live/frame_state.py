"""What a session's helpers may touch of it: the frame loop's flags and a few named calls.

The :class:`~caliper_vk.live.Session` owns the frame loop (``Session.step``). Its helpers — the
frame plan (:mod:`.plan`), the window's part of a step (:mod:`.windowing`), the history's redraw
(:mod:`.history`), the status line (:mod:`.status`), the panels (:mod:`.panels`), the history's
save (:mod:`.history_save`) and the frame sinks — never reach into its private attributes. They
read and write the loop's flags through one :class:`FrameState` (``session.frame``, made with the
session and never replaced, so a helper may hold it), and call the session only through what
:class:`LoopHost` names. tests/test_boundaries.py fails on any use of the session's underscore
names in another module of :mod:`caliper_vk.live`, so this module is the whole of the seam.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(slots=True)
class FrameState:
    """The frame loop's flags, shared by the session and its helpers (``session.frame``)."""

    inflight: bool = False  # a frame submitted and not yet collected (Session.collect)
    layout_due: bool = False  # a panel stopped: lay the canvas out again before the next frame
    read_back_next: bool = False  # render(): copy the next frame to host memory in its submission
    window_gone: bool = False  # the window closed or its display was lost (said once)
    sink_step: int | None = None  # the step of the frame in flight that the frame sinks get
    status_time: float = -1.0  # perf_counter() when the status line was last made (-1: next frame)
    status_message: str = ""  # the session's message the status line was last made with


class LoopHost(Protocol):
    """The calls a session's helpers make on it (besides its public attributes and ``frame``).

    Each acts on the session's own state, so that a helper returns to the loop with the session
    consistent; none waits for anything but the frame in flight."""

    frame: FrameState

    def wait_idle(self) -> None:
        """Wait for the device, then collect the frame in flight if any."""

    def collect(self) -> None:
        """Collect the finished frame in flight: its counters, its PNG, its sinks' pixels."""

    def relayout(self) -> None:
        """Lay the canvas out again from the panels and the window's size (a new canvas)."""

    def fault(self, exc: Exception) -> None:
        """Drawing failed: stop drawing for good (``failed``), keep training."""

    def detach(self, panel) -> None:
        """Take ``panel`` out of the session and release it (``panel.close()``)."""
