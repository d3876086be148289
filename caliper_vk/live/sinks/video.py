"""Drawn frames to a video file with PyAV (FFmpeg's encoders): :class:`VideoWriter`, :class:`VideoSink`.

``Session(video="run.mp4", fps=30)`` writes every frame the session draws, in
order, and beside the video ``run.mp4.steps.json`` with the training step of
each frame (the frame's own status line shows it too). Frames are encoded by
a writer thread behind a short queue: the training thread hands a frame over
and goes on, and waits only when the encoder has fallen :data:`QUEUE` frames
behind — a recording keeps every drawn frame, so it is the one sink that may
slow training (lower ``max_fps`` to draw fewer).

The container follows the file's extension: ``.mp4`` H.264 (libx264, CRF 18,
yuv420p: what every player opens), ``.mkv`` FFV1 (lossless: the decoded
frames are the drawn bytes), ``.webm`` VP9. yuv420p needs even sides; an odd
frame gets its last row or column repeated.
"""

from __future__ import annotations

import json
import queue
import threading
from fractions import Fraction
from pathlib import Path

import numpy as np
from ..._log import logger

QUEUE = 8  # frames waiting for the encoder before the training thread waits for it
# extension -> (encoders to try, pixel format, options)
FORMATS = {
    ".mp4": (("libx264", "libopenh264", "h264", "mpeg4"), "yuv420p", {"crf": "18", "preset": "veryfast"}),
    ".mkv": (("ffv1",), "bgr0", {}),
    ".webm": (("libvpx-vp9",), "yuv420p", {"crf": "30", "b": "0", "deadline": "realtime"}),
}


def _av():
    try:
        import av
    except ImportError:
        from ..._optional import MissingExtraError

        raise MissingExtraError("writing video", "PyAV", "video") from None
    return av


def steps_path(path) -> Path:
    """Where the steps of ``path``'s frames are written: ``PATH.steps.json``."""
    path = Path(path)
    return path.with_name(path.name + ".steps.json")


class VideoWriter:
    """Write RGBA frames to ``path`` at ``fps`` frames a second (the size comes from the first frame).

    Parameters
    ----------
    path : path
        ``.mp4`` (H.264), ``.mkv`` (lossless FFV1) or ``.webm`` (VP9).
    fps : float
        Playback frames per second.
    codec : str, optional
        An FFmpeg encoder name instead of the extension's choice.
    threaded : bool
        Encode on a writer thread (``write`` returns at once unless :data:`QUEUE`
        frames wait); ``False`` encodes in ``write``.
    """

    def __init__(self, path, fps: float = 30.0, codec: str | None = None, threaded: bool = True):
        av = _av()
        self.path = Path(path)
        suffix = self.path.suffix.lower()
        if suffix not in FORMATS:
            raise ValueError(f"video {self.path}: unknown container {suffix!r}; use "
                             f"{', '.join(FORMATS)} (lossless: .mkv)")
        if not (isinstance(fps, (int, float)) and 0 < fps <= 1000):
            raise ValueError(f"fps must be a number in (0, 1000], got {fps!r}")
        candidates, self.pix_fmt, self.options = FORMATS[suffix]
        if codec is not None:
            candidates = (codec,)
        found = [c for c in candidates if c in av.codecs_available]
        if not found:
            raise ValueError(f"this FFmpeg has none of the encoders {', '.join(candidates)} for {suffix}; "
                             f"try .mkv (FFV1)")
        self.codec = found[0]
        if suffix == ".mp4" and self.codec != "libx264":
            self.options = {}  # CRF and presets are libx264's
        self.fps = Fraction(fps).limit_denominator(1001)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._container = av.open(str(self.path), "w")
        self._stream = None
        self.size: tuple[int, int] | None = None
        self.steps: list[int] = []
        self.error: BaseException | None = None
        self._queue: queue.Queue | None = None
        self._thread = None
        if threaded:
            self._queue = queue.Queue(maxsize=QUEUE)
            self._thread = threading.Thread(target=self._work, name="caliper-video", daemon=True)
            self._thread.start()

    def write(self, rgba: np.ndarray, step: int) -> None:
        """Add ``rgba`` (``(h, w, 4)`` or ``(h, w, 3)`` uint8; owned by the writer now) as the next frame."""
        if self.error is not None:
            raise RuntimeError(f"writing {self.path} failed: {self.error}") from self.error
        if self._container is None:
            raise ValueError(f"{self.path} is closed")
        if self._queue is None:
            self._encode(rgba, step)
        else:
            self._queue.put((rgba, int(step)))

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self.error is None:
                try:
                    self._encode(*item)
                except Exception as exc:  # reported by the next write() or close()
                    self.error = exc

    def _encode(self, rgba: np.ndarray, step: int) -> None:
        av = _av()
        h, w = rgba.shape[:2]
        if self._stream is None:
            self.size = (w, h)
            stream = self._container.add_stream(self.codec, rate=self.fps, options=dict(self.options))
            stream.width, stream.height = w + w % 2, h + h % 2
            stream.pix_fmt = self.pix_fmt
            self._stream = stream
        elif (w, h) != self.size:
            raise ValueError(f"frame {len(self.steps)} is {w}x{h}, the video is {self.size[0]}x{self.size[1]}")
        rgb = np.ascontiguousarray(rgba[..., :3])
        if w % 2 or h % 2:
            rgb = np.pad(rgb, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
        frame.pts = len(self.steps)
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
        self.steps.append(int(step))

    def close(self) -> Path:
        """Flush the encoder, complete the file and write the steps beside it; returns the path."""
        if self._container is None:
            return self.path
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
        container, self._container = self._container, None
        try:
            if self._stream is not None and self.error is None:
                for packet in self._stream.encode():
                    container.mux(packet)
        finally:
            container.close()
        steps_path(self.path).write_text(json.dumps(
            {"video": self.path.name, "fps": float(self.fps), "frames": len(self.steps), "steps": self.steps}))
        if self.error is not None:
            raise RuntimeError(f"writing {self.path} failed: {self.error}") from self.error
        return self.path


class VideoSink:
    """Every frame a session draws → a :class:`VideoWriter`."""

    kind = "video"
    live = False

    def __init__(self, path, fps: float = 30.0, size=None):
        self.writer = VideoWriter(path, fps=fps)

    def wants_frame(self) -> bool:
        return True

    def deliver(self, rgba, step: int, status: str) -> None:
        self.writer.write(rgba, step)

    def events(self) -> list:
        return []

    def set_status(self, text: str) -> None:
        """A video has no live status line (each frame carries its own)."""

    def close(self) -> None:
        path = self.writer.close()
        logger.info(f"wrote {len(self.writer.steps)} frames to {path} (their steps: "
                    f"{steps_path(path).name})")
