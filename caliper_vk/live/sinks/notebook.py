"""A live session inline in Jupyter: a jupyter_rfb ``RemoteFrameBuffer`` widget, as fastplotlib uses.

``Session(window="notebook")`` (and any session made inside a Jupyter kernel
without an explicit ``window``) displays a widget under the cell and pushes
frames to it while the cell trains, at most :data:`MAX_FPS` a second (JPEG,
encoded by jupyter_rfb on the training thread; that cost is why the rate is
capped). The frontend cannot tell the kernel anything while a cell runs (its
messages wait until the cell is done), so frames are pushed without the
widget's own flow control, and the widget's mouse and keys reach the
session between cells, or while the loop gives the kernel a turn.

When a cell that drew finishes (and when the session closes), the cell's
output is updated with a lossless PNG snapshot of the last drawn frame, so a
saved or exported notebook shows it without a live kernel.
"""

from __future__ import annotations

import base64
import contextlib
import io
import sys
import time

import numpy as np

from ...engine.window import Event
from ..._log import logger

MAX_FPS = 15.0
_MODS = {"Shift": 1, "Control": 2, "Alt": 4, "Meta": 8}
_BUTTONS = {1: 0, 2: 1, 3: 2}  # jupyter_rfb (1 left, 2 right, 3 middle) → GLFW's


def in_notebook() -> bool:
    """True inside a Jupyter kernel (IPython's ZMQ shell), where a widget can be shown."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    # subclasses too (Colab's shell is one)
    return shell is not None and any(c.__name__ == "ZMQInteractiveShell" for c in type(shell).__mro__)


def rfb_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("jupyter_rfb") is not None


def _rfb():
    try:
        from jupyter_rfb import RemoteFrameBuffer
    except ImportError:
        raise ImportError("a live session in a notebook needs jupyter_rfb: pip install 'caliper-vk[notebook]' "
                          "(or pass window=False for PNG frames)") from None
    return RemoteFrameBuffer


def event_from_rfb(event: dict, scale: tuple[float, float], dragging: list) -> list[Event]:
    """Window events for one jupyter_rfb event (CSS pixels × ``scale`` = frame pixels)."""
    kind = event.get("type") or event.get("event_type")
    x, y = float(event.get("x", 0.0)) * scale[0], float(event.get("y", 0.0)) * scale[1]
    mods = sum(_MODS.get(m, 0) for m in event.get("modifiers", ()))
    if kind in ("pointer_down", "pointer_up"):
        button = _BUTTONS.get(int(event.get("button", 1)), 3)
        if button == 0:
            dragging[:] = [(x, y)] if kind == "pointer_down" else []
        return [Event("button", x=x, y=y, button=button, down=kind == "pointer_down", mods=mods)]
    if kind == "pointer_move":
        out = [Event("move", x=x, y=y)]
        if dragging:
            px, py = dragging[0]
            out.append(Event("drag", x=x, y=y, dx=x - px, dy=y - py))
            dragging[:] = [(x, y)]
        return out
    if kind == "wheel":
        return [Event("scroll", x=x, y=y, dx=-float(event.get("dx", 0.0)) / 100,
                      dy=-float(event.get("dy", 0.0)) / 100)]
    if kind in ("key_down", "key_up"):
        key = str(event.get("key", ""))
        name = "space" if key in (" ", "Space") else "escape" if key == "Escape" else \
            key.lower() if len(key) == 1 else ""
        code = 32 if name == "space" else 256 if name == "escape" else \
            ord(name.upper()) if len(name) == 1 and 33 <= ord(name.upper()) < 127 else -1
        return [Event("key" if kind == "key_down" else "key_up", x=x, y=y, key=name, code=code, mods=mods)]
    return []


def png_bytes(rgba: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgba[..., :3])).save(buf, "PNG")
    return buf.getvalue()


class NotebookSink:
    """Frames to a jupyter_rfb widget under the cell; its input back to the session."""

    kind = "notebook"
    live = True
    max_fps = MAX_FPS  # the session's max_fps="auto": no frame is drawn that is never sent

    def __init__(self, size, session=None):
        from IPython import get_ipython
        from IPython.display import display

        sink = self

        class CaliperWidget(_rfb()):
            def get_frame(self):  # a redraw the frontend asked for (resize, reconnect): the last frame
                return sink.last

            def handle_event(self, event):
                sink._on_event(event)

        self.size = (int(size[0]), int(size[1]))
        self.session = session
        self.last: np.ndarray | None = None  # the last frame pushed
        self.last_step: int | None = None
        self._sent_time = 0.0
        self._events: list[Event] = []
        self._dragging: list = []
        self._css = self.size
        self._snap_step: int | None = None  # the step of the snapshot in the cell's output
        self.widget = CaliperWidget(css_width=f"{self.size[0]}px", css_height=f"{self.size[1]}px",
                                    resizable=False, has_titlebar=False, quality=85)
        self.handle = display(self.widget, display_id=True)
        self._shell = get_ipython()
        if self._shell is not None:
            self._shell.events.register("post_run_cell", self._cell_done)

    def wants_frame(self) -> bool:
        # no feedback reaches the kernel while a cell runs, so the widget counts as visible
        # until the frontend said it is not (between cells); frames at most MAX_FPS a second
        feedback = self.widget._frame_feedback  # the frontend's last report ({} before any)
        hidden = bool(feedback) and not self.widget._has_visible_views
        return not hidden and time.perf_counter() - self._sent_time >= 1.0 / MAX_FPS

    def deliver(self, rgba, step: int, status: str) -> None:
        self._sent_time = time.perf_counter()
        self.last, self.last_step = rgba, int(step)
        self.widget.send_frame(rgba[..., :3])

    def events(self) -> list[Event]:
        out, self._events = self._events, []
        return out

    def set_status(self, text: str) -> None:
        self.widget.title = text

    def _on_event(self, event: dict) -> None:
        kind = event.get("type") or event.get("event_type")
        if kind == "resize":
            self._css = (float(event.get("width") or self.size[0]), float(event.get("height") or self.size[1]))
            return
        scale = (self.size[0] / max(self._css[0], 1.0), self.size[1] / max(self._css[1], 1.0))
        self._events += event_from_rfb(event, scale, self._dragging)
        del self._events[:-512]  # bounded: nobody may be stepping the session

    def snapshot(self) -> None:
        """Put a lossless PNG of the last drawn frame into the cell's saved output."""
        frame, step = self.last, self.last_step
        session = self.session
        if session is not None and session.canvas is not None:
            session.wait_idle()
            if session.drawn_step is not None:
                frame, step = session.canvas.read_back(), session.drawn_step  # the latest frame drawn
        if frame is None:
            return
        self._snap_step = step
        png = png_bytes(frame)
        b64 = base64.b64encode(png).decode("ascii")
        bundle = self.widget._repr_mimebundle_() or {}
        data = dict(bundle[0] if isinstance(bundle, tuple) else bundle)
        data["image/png"] = b64
        data["text/html"] = (f"<img src='data:image/png;base64,{b64}' width={frame.shape[1]} "
                             f"height={frame.shape[0]} title='caliper: step {step}'/>")
        data["text/plain"] = f"caliper session, step {step}"
        self.handle.update(data, raw=True)

    def _drew_since_snapshot(self) -> bool:
        drawn = self.session.drawn_step if self.session is not None else self.last_step
        return drawn is not None and drawn != self._snap_step

    def _cell_done(self, result=None) -> None:
        if self._drew_since_snapshot():
            try:
                self.snapshot()
            except Exception as exc:  # the snapshot is a convenience; say why it is missing
                logger.warning(f"no snapshot in the notebook ({type(exc).__name__}: {exc})")

    def close(self) -> None:
        if self._shell is not None:
            with contextlib.suppress(ValueError):  # already unregistered
                self._shell.events.unregister("post_run_cell", self._cell_done)
        if self._drew_since_snapshot():
            self.snapshot()
        self.session = None
        self.widget.close()
