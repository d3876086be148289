"""Mouse and keys in a live window.

Drag rotates and the wheel zooms the point cloud under the cursor; ``R``
resets its camera, space pauses drawing, ``S`` saves a PNG of the last frame.
With a history (:mod:`caliper_vk.live.history`), ← and → pause and show the
kept frame before or after the one shown, Home the oldest kept frame, and End
(or space while paused) goes back to live.
Events come from :meth:`caliper_vk.engine.window.Window.poll` in window
coordinates; panels are found in framebuffer pixels (they differ on HiDPI
displays).
"""

from __future__ import annotations

import time
from pathlib import Path
from .._log import logger


def _window_size(window) -> tuple[int, int]:
    import glfw

    return glfw.get_window_size(window.handle)


def panel_at(panels, window, x: float, y: float):
    """The panel under window point ``(x, y)``; the only panel when there is one."""
    if window is not None:
        ww, wh = _window_size(window)
        fw, fh = window.framebuffer_size()
        x, y = x * fw / max(ww, 1), y * fh / max(wh, 1)
    for p in panels:
        r = p.view.rect
        if r is not None and r.x <= x < r.x + r.width and r.y <= y < r.y + r.height:
            return p
    return panels[0] if len(panels) == 1 else None


def _history_key(code: int) -> str:
    """``"left"``, ``"right"``, ``"home"``, ``"end"`` for those keys' GLFW codes (GLFW names
    only printable keys), else ``""``."""
    import glfw

    return {glfw.KEY_LEFT: "left", glfw.KEY_RIGHT: "right", glfw.KEY_HOME: "home",
            glfw.KEY_END: "end"}.get(code, "")


def rewind_key(session, key: str) -> bool:
    """Apply a history key to ``session``; False when ``key`` is not one or there is no history."""
    history = session.history
    if history is None or key not in ("left", "right", "home", "end"):
        return False
    if key == "end":
        session.live()
    elif history.frames:
        if key == "home":
            history.show(history.steps()[0])
        else:
            history.move(-1 if key == "left" else 1)
        session.paused = True
    return True


def handle(session, events) -> None:
    """Apply window ``events`` to ``session``'s panels, pause state and saved frames."""
    if events:
        session.budget.interacted()  # the person at the view sees the answer to their hand at once
    for ev in events:
        target = panel_at(session.panels, session.window, ev.x, ev.y)
        view = target.view if target is not None else None
        if ev.kind == "drag" and hasattr(view, "set_camera"):
            yaw, pitch, _ = view.camera
            view.set_camera(yaw_deg=yaw + 0.4 * ev.dx,
                            pitch_deg=max(-90.0, min(90.0, pitch + 0.4 * ev.dy)))
        elif ev.kind == "scroll" and hasattr(view, "set_camera"):
            view.set_camera(zoom=max(0.05, min(50.0, view.camera[2] * 1.1 ** ev.dy)))
        elif ev.kind == "key" and ev.key == "r" and hasattr(view, "reset_camera"):
            view.reset_camera()
        elif ev.kind == "key" and session.history is not None and _history_key(ev.code):
            rewind_key(session, _history_key(ev.code))
        elif ev.kind == "key" and ev.key == "space":
            if session.paused:
                session.live()  # back to the live view (from a kept step, too)
            else:
                session.paused = True
            session.status_bar.set_text(session.status().line())
        elif ev.kind == "key" and ev.key == "s":
            folder = session.out_dir or Path.cwd()
            path = session.save_png(folder / f"caliper_{time.strftime('%Y%m%d_%H%M%S')}.png")
            session.message = f"saved {path}"
            logger.info(f"saved {path}")
