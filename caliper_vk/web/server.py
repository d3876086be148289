"""A frame server: the latest frame of a live session (or the dashboard) to browser tabs.

One HTTP + WebSocket server (``websockets``' threaded server) runs in
background threads beside the training loop. The loop hands it frames with
:meth:`FrameServer.publish`, which only swaps a reference into a one-frame
slot and wakes the encoder: it never waits for a browser. An encoder thread
compresses the latest frame once (JPEG by default, through Pillow, which
releases the GIL while it encodes), and each open tab has a sender thread
that sends the newest encoded frame once the tab has acknowledged the one
before. A slow tab therefore receives fewer frames, never older ones, and
nothing queues: the slot holds one raw and one encoded frame whatever the
number of tabs. Input from the page (drag, wheel, keys, buttons) comes back
as :class:`~caliper_vk.engine.window.Event` records in a bounded queue that the
training thread drains (:meth:`FrameServer.events`), so it is handled exactly
like a window's input.

Secure by default: the server binds 127.0.0.1 unless told otherwise, and
every request must carry the random token in the URL it prints (HTTP 403 and
a refused WebSocket handshake without it). It sends no CORS headers, and the
WebSocket handshake is refused when its ``Origin`` is not the page's own.
"""

from __future__ import annotations

import io
import json
import secrets
import socket
import threading
from collections import deque
from dataclasses import dataclass
from functools import partial
from importlib import resources
from urllib.parse import parse_qs, urlsplit

import numpy as np

from ..engine.window import Event
from .keys import event_from_message
from .._log import logger

EVENT_QUEUE = 512  # input events waiting for the training thread; older ones are dropped beyond this
FORMATS = ("jpeg", "png")
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _websockets():
    try:
        from websockets.datastructures import Headers
        from websockets.http11 import Response
        from websockets.sync.server import serve
    except ImportError:
        from .._optional import MissingExtraError

        raise MissingExtraError("serving frames to a browser", "the websockets package", "web") from None
    return serve, Response, Headers


def encode(rgba: np.ndarray, image_format: str = "jpeg", quality: int = 90) -> bytes:
    """``(h, w, 4)`` uint8 RGBA → JPEG (RGB, ``quality``, 4:4:4) or PNG bytes, through Pillow."""
    from PIL import Image

    buf = io.BytesIO()
    image = Image.fromarray(np.ascontiguousarray(rgba[..., :3]))
    if image_format == "jpeg":
        image.save(buf, "JPEG", quality=quality, subsampling=0)  # 4:4:4: coloured points stay sharp
    else:
        image.save(buf, "PNG", compress_level=1)
    return buf.getvalue()


@dataclass
class Frame:
    seq: int
    meta: dict
    data: bytes | None = None  # encoded (None: not yet)
    rgba: np.ndarray | None = None  # raw (dropped once encoded)


class _Viewer:
    def __init__(self, ws):
        self.ws = ws
        self.acked = 0  # seq of the last frame the page has drawn
        self.sent = 0
        self.status_sent = 0
        self.closed = False


class FrameServer:
    """Serve the latest published frame to every tab that opens :attr:`url`.

    Parameters
    ----------
    title : str
        The page title.
    host : str
        The interface to bind; ``"127.0.0.1"`` (the default) is reachable only from
        this machine (use ``ssh -L`` from another one).
    port : int
        TCP port; 0 picks a free one.
    image_format : "jpeg" or "png"
        How frames are compressed (PNG is lossless, larger and slower).
    quality : int
        JPEG quality (1-95); chroma is not subsampled (4:4:4), points and text stay sharp.
    announce : bool
        Print the URL to stderr.
    """

    def __init__(self, title: str = "Caliper", host: str = "127.0.0.1", port: int = 8765,
                 image_format: str = "jpeg", quality: int = 90, announce: bool = True):
        if image_format not in FORMATS:
            raise ValueError(f"image_format must be one of {FORMATS}, got {image_format!r}")
        serve, self._Response, self._Headers = _websockets()
        self.title = title
        self.image_format = image_format
        self.quality = int(quality)
        self.token = secrets.token_urlsafe(18)
        try:
            sock = socket.create_server((host, int(port)))
        except OSError as exc:
            raise OSError(f"cannot serve frames on {host}:{port} ({exc.strerror or exc}); pass another "
                          f"port=, or port=0 for any free one") from None
        self.host = host
        self.port = sock.getsockname()[1]
        self._cond = threading.Condition()
        self._frame: Frame | None = None  # the latest frame (raw until encoded)
        self._status = (0, "")  # (seq, text): status updates while no frame is drawn (paused)
        self._seq = 0
        self._viewers: list[_Viewer] = []
        self._events: deque[Event] = deque(maxlen=EVENT_QUEUE)
        self._closing = False
        self.published = 0  # frames handed to publish()
        self.encoded = 0  # frames compressed (at most one per publish; fewer when tabs lag)
        self.sent = 0  # frames sent, over all tabs
        self.bytes_sent = 0
        self.refused = 0  # requests refused for a missing or wrong token or a foreign origin
        page = resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8")
        self._page = page.replace("{{title}}", _html_escape(title)).encode("utf-8")
        self._server = serve(self._handle, sock=sock, process_request=self._process_request,
                             compression=None, max_size=1 << 16, ping_interval=20, ping_timeout=20,
                             open_timeout=5)
        self._threads = [threading.Thread(target=self._server.serve_forever, name="caliper-web",
                                          daemon=True),
                         threading.Thread(target=self._encode_loop, name="caliper-web-encoder",
                                          daemon=True)]
        for t in self._threads:
            t.start()
        if announce:
            logger.info(f"watching in a browser: {self.url}")
            if host in LOOPBACK:
                logger.info(f"from another machine: ssh -L {self.port}:127.0.0.1:{self.port} "
                            f"{socket.gethostname()}, then open the URL there")
            else:
                logger.warning(f"serving on {host}: whoever reaches this port with the URL sees the run, "
                               "unencrypted (HTTP); ssh -L to 127.0.0.1 is the safer way")

    # -- what the training thread calls --------------------------------------------------------
    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        if self.host in ("0.0.0.0", "::"):
            host = socket.gethostname()
        return f"http://{host}:{self.port}/?token={self.token}"

    @property
    def viewers(self) -> int:
        """Tabs connected now."""
        return len(self._viewers)

    def wants_frame(self) -> bool:
        """True while a tab is connected (otherwise frames need not even be read back)."""
        return bool(self._viewers)

    def publish(self, rgba: np.ndarray, **meta) -> None:
        """Make ``rgba`` (``(h, w, 4)`` uint8, owned by the server from now on) the latest frame.

        Never waits: a frame not yet encoded is replaced.
        """
        with self._cond:
            self._seq += 1
            self.published += 1
            h, w = rgba.shape[:2]
            self._frame = Frame(self._seq, {"type": "frame", "seq": self._seq, "width": w, "height": h,
                                            **meta}, rgba=rgba)
            self._cond.notify_all()

    def set_status(self, text: str) -> None:
        """Show ``text`` on the page's status line now (frames carry their own)."""
        with self._cond:
            if text != self._status[1]:
                self._status = (self._status[0] + 1, text)
                self._cond.notify_all()

    def events(self) -> list[Event]:
        """Input events from the pages since the last call (canvas pixel coordinates)."""
        out = []
        while self._events:
            try:
                out.append(self._events.popleft())
            except IndexError:
                break
        return out

    def close(self) -> None:
        """Close every tab and stop the threads (a second call does nothing)."""
        if self._closing:
            return
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        # shutdown() also waits for connections still opening (a browser's idle preconnected
        # socket ends by open_timeout): wait a moment, never longer
        stopper = threading.Thread(target=self._server.shutdown, name="caliper-web-stop", daemon=True)
        stopper.start()
        for t in (*self._threads, stopper):
            t.join(timeout=1)

    # -- the server's threads -----------------------------------------------------------------
    def _encode_wanted(self, done: int) -> bool:
        # encode only when a tab can take a frame now (a slow tab costs no encoding)
        frame = self._frame
        return self._closing or (frame is not None and frame.seq > done
                                 and any(v.acked >= v.sent for v in self._viewers))

    def _encode_loop(self) -> None:
        done = 0
        while True:
            with self._cond:
                self._cond.wait_for(partial(self._encode_wanted, done))
                if self._closing:
                    return
                frame = self._frame
            data = encode(frame.rgba, self.image_format, self.quality)
            with self._cond:
                done = frame.seq
                self.encoded += 1
                frame.data, frame.rgba = data, None
                self._cond.notify_all()

    def _process_request(self, connection, request):
        url = urlsplit(request.path)
        token = parse_qs(url.query).get("token", [""])[0]
        if url.path not in ("/", "/ws"):
            return connection.respond(404, "not found\n")
        if not secrets.compare_digest(token, self.token):
            self.refused += 1
            return connection.respond(403, "caliper: this URL lacks the session's token; open the URL "
                                           "the training process printed\n")
        if url.path == "/ws":
            origin, host = request.headers.get("Origin"), request.headers.get("Host", "")
            if origin is not None and origin not in (f"http://{host}", f"https://{host}"):
                self.refused += 1
                return connection.respond(403, "caliper: cross-origin WebSocket refused\n")
            return None  # the WebSocket handshake goes on
        headers = self._Headers([("Content-Type", "text/html; charset=utf-8"),
                                 ("Content-Length", str(len(self._page))),
                                 ("Cache-Control", "no-store"), ("Referrer-Policy", "no-referrer"),
                                 ("X-Frame-Options", "DENY"), ("X-Content-Type-Options", "nosniff")])
        return self._Response(200, "OK", headers, self._page)

    def _handle(self, ws) -> None:
        if urlsplit(ws.request.path).path != "/ws":
            return
        viewer = _Viewer(ws)
        with self._cond:
            self._viewers.append(viewer)
            self._cond.notify_all()  # the encoder may skip frames while nobody watches
        sender = threading.Thread(target=self._send_loop, args=(viewer,), name="caliper-web-send",
                                  daemon=True)
        sender.start()
        try:
            for message in ws:
                self._receive(viewer, message)
        except Exception as exc:  # a broken connection ends this tab only
            if not self._closing:
                logger.warning(f"a browser tab's connection failed ({type(exc).__name__}: {exc})")
        finally:
            with self._cond:
                viewer.closed = True
                self._viewers.remove(viewer)
                self._cond.notify_all()
            sender.join(timeout=5)

    def _receive(self, viewer: _Viewer, message) -> None:
        if not isinstance(message, str):
            return
        try:
            msg = json.loads(message)
        except ValueError:
            return
        if not isinstance(msg, dict):
            return
        if msg.get("type") == "ack":
            with self._cond:
                viewer.acked = max(viewer.acked, int(msg.get("seq", 0)))
                self._cond.notify_all()
            return
        event = event_from_message(msg)
        if event is not None:
            self._events.append(event)

    def _send_loop(self, viewer: _Viewer) -> None:
        def ready():
            frame = self._frame
            return (self._closing or viewer.closed or self._status[0] > viewer.status_sent
                    or (frame is not None and frame.data is not None and frame.seq > viewer.sent
                        and viewer.acked >= viewer.sent))
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(ready)
                    if self._closing or viewer.closed:
                        return
                    frame, (status_seq, status) = self._frame, self._status
                if status_seq > viewer.status_sent:
                    viewer.status_sent = status_seq
                    viewer.ws.send(json.dumps({"type": "status", "status": status}))
                if (frame is not None and frame.data is not None and frame.seq > viewer.sent
                        and viewer.acked >= viewer.sent):
                    viewer.ws.send(json.dumps(frame.meta))
                    viewer.ws.send(frame.data)
                    viewer.sent = frame.seq
                    with self._cond:
                        self.sent += 1
                        self.bytes_sent += len(frame.data)
        except Exception:  # the tab went away mid-send: its receive loop ends the connection
            with self._cond:
                viewer.closed = True


def _html_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
