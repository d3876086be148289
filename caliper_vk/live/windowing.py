"""A live session's window: opening it (or saying why not), and each step's look at it.

:func:`open_window` opens the window a session asks for, or none when the platform refuses one
(no display, no window server, or not the main thread on macOS: :mod:`caliper_vk.engine.display`)
and the session asked for no window in particular, saying why; the session then renders offscreen.
:func:`pump_window` is the window's part of ``Session.step``: its events, a close or a lost
display (said once, training goes on), a resize (the swapchain rebuilt and the canvas laid out
again) and a minimised window (the step skipped at once: GLFW's Win32 backend reports 0x0 until
the window is restored, and the training thread never waits for that).
"""

from __future__ import annotations

from .._log import logger
from ..engine import cpu_raster_threads, default_device
from ..engine.window import why_no_window
from . import input as window_input
from .budget import TRAINING_RASTER_THREADS


def open_window(window, size, title: str, device, sinks):
    """``(window or None, why none was opened or None, device)`` for a session asked for
    ``window`` (True, False, or None: whatever the platform allows)."""
    refused = why_no_window() if window is None else None
    if refused:
        logger.info(f"no window ({refused}); rendering offscreen")
    if not (not refused if window is None else bool(window)):
        with cpu_raster_threads(TRAINING_RASTER_THREADS):  # when this makes the first device
            return None, refused, device or default_device()
    from ..engine.window import Window

    try:
        with cpu_raster_threads(TRAINING_RASTER_THREADS):
            win = Window(size, title, device=device)
    except BaseException:
        sinks.close()  # no server or half-written video left behind
        raise
    return win, None, win.device


def pump_window(session) -> bool:
    """The window's part of a step: False when the step draws nothing (closed, lost, minimised)."""
    window = session.window
    if not window.alive:
        window_closed(session)  # says so once (the surface may have gone while presenting)
        return False
    window_input.handle(session, window.poll())
    if not window.alive:
        window_closed(session)
        return False
    if window.resized:
        if window.minimised():
            return minimised(session)
        session.wait_idle()
        window.recreate()
        session.relayout()
    return True


def minimised(session) -> bool:
    """A step while the window has no area (minimised on Windows, sized to nothing): the frame is
    skipped at once, a finished frame collected without waiting, and the swapchain rebuilt at the
    first step after the window has a size again. Never waits for the window."""
    if session.frame.inflight and session.canvas.done():
        session.collect()
    session.skipped += 1
    return False


def window_closed(session) -> None:
    """The window was closed or its display lost: said once; training goes on without drawing."""
    if session.frame.window_gone:
        return
    session.frame.window_gone = True
    if getattr(session.window, "lost", False):
        session.message = "display lost; drawing stopped"
        logger.warning("the display was lost; training continues without drawing")
    else:
        session.message = "window closed; drawing stopped"
        logger.info("the window was closed; training continues without drawing")
    session.wait_idle()
