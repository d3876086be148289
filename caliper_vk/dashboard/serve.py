"""``caliper view --web``: the dashboard drawn offscreen and served to browser tabs.

The dashboard runs as it does offscreen (:meth:`Dashboard.frame` then
``ui.render()``), fed the page's mouse, wheel and keys as window events
(:meth:`caliper_vk.web.FrameServer.events`), and each drawn frame goes to the
:class:`~caliper_vk.web.FrameServer`. It draws only while a tab is connected,
and then only when something can have changed: input arrived, a tab joined,
or Dear ImGui may still be settling after input (:data:`SETTLE_S`).
"""

from __future__ import annotations

import threading
import time

SETTLE_S = 0.5  # keep drawing this long after the last input (hover highlights, a released drag)


PRESSES = ("button", "key", "key_up")


def one_press(events: list) -> tuple[list, list]:
    """(this frame's events, the rest): a button or key change gets a frame of its own, after the
    moves before it, so that the pointer has arrived before a press, and a press and its release
    never land in one frame (Dear ImGui would see no click)."""
    for i, ev in enumerate(events):
        if ev.kind in PRESSES:
            return (events[:i], events[i:]) if i else (events[:1], events[1:])
    return events, []


def serve(dash, server, fps: float = 20.0, stop: threading.Event | None = None) -> int:
    """Serve ``dash`` through ``server`` until ``stop`` is set (or Ctrl-C); returns frames drawn."""
    stop = stop or threading.Event()
    drawn = 0
    viewers = 0
    last_input = -1e9
    interval = 1.0 / fps
    pending: list = []
    while not stop.is_set():
        start = time.perf_counter()
        pending += server.events()
        events, pending = one_press(pending)
        if events:
            last_input = start
        joined = server.viewers > viewers
        viewers = server.viewers
        if viewers and (events or pending or joined or start - last_input < SETTLE_S or drawn < 2):
            dash.frame(events)
            rgba = dash.ui.render()
            status = f"caliper view · {len(dash.runs)} run(s) · cursor at {dash.axis} {dash.cursor:g}"
            server.publish(rgba, step=drawn, status=status)
            drawn += 1
        stop.wait(max(0.0, interval - (time.perf_counter() - start)))
    return drawn
