"""Frame sinks: where a live session's drawn frames go besides a window.

A session reads a frame back to host memory only when some sink wants it
(:meth:`Sinks.wants_frame` at submit time): a browser tab is connected
(:class:`.web.WebSink`), a video is being written (:class:`.video.VideoSink`),
or a notebook widget is showing (:class:`.notebook.NotebookSink`). The copy
rides in the frame's own submission, and the frame is handed to the sinks
when the session collects it (:meth:`Sinks.deliver`), with its step number
and the status line. Sinks never make training wait, except a video, which
keeps every drawn frame (its writer thread encodes behind a short queue).

Input from interactive sinks (a page's drag, wheel and keys) comes back as
:class:`~caliper_vk.engine.window.Event` records and goes through the same
handling as a window's (:mod:`caliper_vk.live.input`). A sink that fails is
dropped with a message on the status line; training goes on.
"""

from __future__ import annotations

import time

from .. import input as window_input
from ..._log import logger

WINDOW_KINDS = ("web", "notebook")
LIVE_FPS = 30.0  # max_fps="auto" for a page or a widget: frames cross a network and get compressed


class Sinks:
    """The sinks of one session (possibly none)."""

    def __init__(self, items=()):
        self.items = list(items)
        self._status_time = 0.0

    def __bool__(self) -> bool:
        return bool(self.items)

    @property
    def live(self) -> bool:
        """True when a sink shows frames as they come (a page, a widget), not a recording."""
        return any(getattr(s, "live", False) for s in self.items)

    @property
    def live_fps(self) -> float:
        """``max_fps="auto"`` for these sinks: the lowest rate a live sink takes (a page 30 a second,
        a notebook widget :data:`~.notebook.MAX_FPS`); frames drawn faster would never be shown."""
        return min((getattr(s, "max_fps", LIVE_FPS) for s in self.items if getattr(s, "live", False)),
                   default=LIVE_FPS)

    def get(self, kind: str):
        return next((s for s in self.items if s.kind == kind), None)

    def wants_frame(self) -> bool:
        return any(s.wants_frame() for s in self.items)

    def idle(self, session) -> bool:
        """True when a frame drawn now would be seen by nobody: the session has sinks and no
        window, and no sink wants a frame (no tab connected, the widget not ready). Such a
        step draws nothing (it counts as ``held``) and ``due()`` is False, so a loop also
        skips what it computes only to draw."""
        return bool(self.items) and session.window is None and not self.wants_frame()

    def deliver(self, session, rgba, step: int) -> None:
        """Hand a collected frame to every sink that wants it (``rgba`` is the caller's copy)."""
        report = session.status()
        report.step = step  # the frame's own step (the session may have moved on)
        status = report.line()
        for sink in list(self.items):
            if not sink.wants_frame():
                continue
            try:
                sink.deliver(rgba, step, status)
            except Exception as exc:  # a sink must never stop training
                self._drop(session, sink, exc)

    def poll(self, session) -> None:
        """Apply input from interactive sinks; while no frame is drawn, keep their status line fresh."""
        events = []
        for sink in self.items:
            events += sink.events()
        if events:
            window_input.handle(session, events)
        now = time.perf_counter()
        if (events or session.paused) and now - self._status_time > 0.25:
            self._status_time = now
            line = session.status().line()
            for sink in self.items:
                sink.set_status(line)

    def _drop(self, session, sink, exc: Exception) -> None:
        self.items.remove(sink)
        session.message = f"{sink.kind} stopped: {type(exc).__name__}"
        logger.warning(f"the {sink.kind} output failed ({type(exc).__name__}: {exc}); training goes on "
                       f"without it")
        try:
            sink.close()
        except Exception as close_exc:  # already failing: say so, keep going
            logger.warning(f"closing the {sink.kind} output failed too ({close_exc})")

    def close(self) -> None:
        """Close every sink (a video is finished and its file completed here)."""
        items, self.items = self.items, []
        for sink in items:
            sink.close()


def open_sinks(window, *, session=None, title: str, size, video=None, fps: float = 30.0,
               host: str = "127.0.0.1", port: int = 8765):
    """The sinks a session's arguments ask for, and whether it still wants a GLFW window.

    ``window`` is a session's ``window`` argument: ``"web"`` or ``"notebook"`` serve
    frames there instead of a window; ``None`` picks the notebook inside a Jupyter kernel
    (and otherwise leaves the choice to the session). ``video`` is a path to write.
    ``session`` is borrowed by the notebook widget for its closing snapshot.
    """
    if isinstance(window, str) and window not in WINDOW_KINDS:
        raise ValueError(f"window must be True, False, None, 'web' or 'notebook', got {window!r}")
    items = []
    if window is None:
        from .notebook import in_notebook, rfb_available

        if in_notebook():
            if rfb_available():
                window = "notebook"
            else:
                logger.info("in Jupyter, pip install 'caliper-vk[notebook]' shows the session live "
                            "under the cell")
    try:
        if window == "web":
            from .web import WebSink

            items.append(WebSink(title=title, host=host, port=port))
        elif window == "notebook":
            from .notebook import NotebookSink

            items.append(NotebookSink(size, session=session))
        if video is not None:
            from .video import VideoSink

            items.append(VideoSink(video, fps=fps, size=size))
    except BaseException:
        for sink in items:
            sink.close()
        raise
    return Sinks(items), (False if window in WINDOW_KINDS else window)
