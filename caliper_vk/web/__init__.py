"""Frames to a browser: an HTTP + WebSocket server with a token (:mod:`.server`), the page
(``page.html``) and the mapping of its input to window events (:mod:`.keys`). Used by live
sessions (``Session(window="web")``) and by ``caliper view --web``."""

from .server import FrameServer, encode

__all__ = ["FrameServer", "encode"]
