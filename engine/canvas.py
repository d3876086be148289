"""Canvas: an RGBA8 offscreen target holding a grid of panels.

A panel is a rectangle of the canvas image and a *drawable* that fills it.
Drawables (the views in ``caliper_vk.views``) follow a small protocol:

``bind(device, target, rect)``
    allocate GPU resources for drawing into ``rect`` of ``target``;
``prepare()``
    host-side updates (parameters, data) before a frame is submitted;
``record_reads(recorder)`` (optional)
    record the passes that read the drawable's inputs; they run in the frame's
    first submission, after which producers may overwrite those inputs;
``record(recorder)``
    record the drawable's other passes (called only when the canvas re-records);
``finish()``
    read results back (counters) once the frame has completed; None for a drawable
    with nothing to read back (the canvas calls it every frame: no empty call);
``stale``
    True when the recorded commands no longer match its resources;
``reference(width, height)``
    the numpy twin's RGBA pixels for a panel of that size;
``close()``.

The canvas records one command buffer (clear, every panel, copy to a
host-cached readback buffer) and re-submits it until a drawable is stale.
"""

from __future__ import annotations

import atexit
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .commands import Recorder
from .device import Device
from .image import StorageImage, write_png
from .memory import Buffer

GAP_COLOR = (10, 10, 12, 255)


@dataclass(frozen=True)
class Rect:
    x: int
    y: int
    width: int
    height: int


@dataclass
class Panel:
    """A drawable placed in a grid cell span of a canvas."""

    drawable: object
    rect: Rect
    row: int
    col: int


_default_lock = threading.Lock()
_default_device: Device | None = None


def default_device() -> Device:
    """The process-wide device (made on first use, closed at exit)."""
    global _default_device
    with _default_lock:
        if _default_device is None or _default_device.handle is None:
            _default_device = Device()
            atexit.register(_default_device.close)
        return _default_device


def grid_rects(width: int, height: int, rows: int, cols: int, gap: int) -> list[list[Rect]]:
    """Integer cell rectangles of a ``rows x cols`` grid with ``gap`` pixels between and around."""
    def spans(total, n):
        inner = total - gap * (n + 1)
        if inner < n:
            raise ValueError(f"{total} px cannot hold {n} panels with {gap} px gaps")
        edges = [gap + (inner * k) // n + gap * k for k in range(n + 1)]
        return [(edges[k], edges[k + 1] - gap - edges[k]) for k in range(n)]

    xs, ys = spans(width, cols), spans(height, rows)
    return [[Rect(x, y, w, h) for (x, w) in xs] for (y, h) in ys]


class Canvas:
    """An offscreen RGBA8 target of ``width x height`` pixels holding a grid of panels.

    Parameters
    ----------
    width, height : int
        Pixels.
    rows, cols : int
        The panel grid.
    gap : int
        Pixels between and around panels (filled with the canvas colour).
    device : Device, optional
        Borrowed; defaults to :func:`default_device`.

    Examples
    --------
    >>> canvas = Canvas(800, 600)
    >>> canvas.add(view)                               # doctest: +SKIP
    >>> rgba = canvas.render()                         # (600, 800, 4) uint8
    >>> canvas.save_png("frame.png")                   # doctest: +SKIP
    """

    def __init__(self, width: int, height: int, rows: int = 1, cols: int = 1, gap: int = 0,
                 device: Device | None = None, color=GAP_COLOR):
        if width < 1 or height < 1 or width > 16384 or height > 16384:
            raise ValueError(f"canvas size must be 1..16384 px per side, got {width}x{height}")
        self.device = device or default_device()
        self.width, self.height = int(width), int(height)
        self.rows, self.cols, self.gap = rows, cols, gap
        self.color = tuple(int(c) for c in color)
        self._cells = grid_rects(self.width, self.height, rows, cols, gap)
        self.panels: list[Panel] = []
        self._prepared = False  # prepare() ran since the last submit()
        self.image = StorageImage(self.device, self.width, self.height)
        self._readback = Buffer(self.device, self.width * self.height * 4, readback=True)
        self._reads_recorder = Recorder(self.device)
        self._recorder = Recorder(self.device)
        self._readback_recorder = Recorder(self.device)
        self.read_back_serial = None
        self.profiler = None
        self._recorded = False
        self._serial = None
        self.frames = 0
        self._record_readback()

    def cell(self, row: int, col: int, rowspan: int = 1, colspan: int = 1) -> Rect:
        if not (0 <= row and row + rowspan <= self.rows and 0 <= col and col + colspan <= self.cols):
            raise IndexError(f"cell ({row}, {col}) span ({rowspan}, {colspan}) is outside the "
                             f"{self.rows}x{self.cols} grid")
        a, b = self._cells[row][col], self._cells[row + rowspan - 1][col + colspan - 1]
        return Rect(a.x, a.y, b.x + b.width - a.x, b.y + b.height - a.y)

    def add(self, drawable, row: int = 0, col: int = 0, rowspan: int = 1, colspan: int = 1):
        """Place ``drawable`` in a grid cell (span); returns the :class:`Panel`."""
        rect = self.cell(row, col, rowspan, colspan)
        for p in self.panels:
            if p.row == row and p.col == col:
                raise ValueError(f"cell ({row}, {col}) already holds a panel; remove it first")
        return self.place(drawable, rect, row, col)

    def place(self, drawable, rect: Rect, row: int = -1, col: int = -1) -> Panel:
        """Place ``drawable`` at an explicit rectangle (for layouts other than the grid)."""
        if rect.width < 1 or rect.height < 1 or rect.x < 0 or rect.y < 0 or \
                rect.x + rect.width > self.width or rect.y + rect.height > self.height:
            raise ValueError(f"{rect} does not fit a {self.width}x{self.height} canvas")
        drawable.bind(self.device, self.image, rect)
        panel = Panel(drawable, rect, row, col)
        self.panels.append(panel)
        self._recorded = False
        return panel

    def remove(self, panel: Panel, close: bool = True) -> None:
        """Take a panel off the canvas (closing its drawable unless ``close=False``)."""
        self.panels.remove(panel)
        if close:
            panel.drawable.close()
        self._recorded = False

    def _record(self) -> None:
        # Part 1: every pass that reads a drawable's inputs (live tensors); the
        # producers may overwrite them as soon as part 1 has completed.
        rec = self._reads_recorder.begin()
        if self.profiler is not None:
            self.profiler.begin(rec)
        rec.to_general(self.image)
        rec.clear(self.image, self.color)
        rec.barrier()
        rec.mark("clear")
        for p in self.panels:
            record_reads = getattr(p.drawable, "record_reads", None)
            if record_reads is not None:
                record_reads(rec)
                rec.mark(f"{type(p.drawable).__name__} reads")
        rec.end()
        # Part 2: the rest (resolve passes, chrome) and the copy to host memory. Its first
        # barrier orders it after part 1 (barriers reach back across submissions).
        rec = self._recorder.begin()
        rec.barrier()
        # what ran after the reads in the first batch (submit's reads_extra: a live session's
        # history copies), timed apart from the panels' own passes
        rec.mark("reads extra")
        for p in self.panels:
            p.drawable.record(rec)
            rec.mark(type(p.drawable).__name__)
        rec.end()
        self._recorded = True
        if self.profiler is not None:
            self._record_readback()  # its timestamp index follows this frame's marks

    def _record_readback(self) -> None:
        rec = self._readback_recorder.begin()
        rec.barrier()  # after every earlier frame's writes (barriers reach back across submissions)
        rec.copy_image_to_buffer(self.image, self._readback)
        rec.host_barrier()
        if self.profiler is not None:  # read_back() submits it again after the frame's own
            self.profiler.write(rec, "readback", reset=True)
        rec.end()

    def prepare(self) -> None:
        """Prepare every panel for the next frame (their host-side updates: parameters, staged
        inputs) and re-record if one went stale. :meth:`submit` calls it unless it was called
        since the last submission (a live session does, so that its history copies staged inputs
        from the buffers this frame wrote)."""
        stale = not self._recorded
        for p in self.panels:
            d = p.drawable
            d.prepare()
            stale = stale or d.stale
        if stale:
            self.device.wait()  # the command buffers may still be executing
            self._record()
        self._prepared = True

    def submit(self, wait=(), signal=(), extra=(), extra_wait=(), extra_signal=(),
               readback: bool = True, reads_extra=()) -> int:
        """Prepare every panel and submit one frame; returns its serial (no CPU wait).

        The frame is two batches of one submission. ``wait``/``signal`` (``(semaphore, value)``
        pairs) belong to the first, which holds every pass that reads the
        drawables' inputs, so a producer waiting on ``signal`` is released as
        soon as its tensor has been read, not when the frame is done.
        ``extra`` command buffers (presentation) run after the frame, with
        ``extra_wait``/``extra_signal``. Call :meth:`finish` once the frame has
        completed (:meth:`done`). ``readback=False`` skips the copy to host
        memory (a live window does not need it; :meth:`read_back` can fetch the
        frame later). ``reads_extra`` command buffers run in the first batch after
        the reads, inside its wait/signal (a live session's history copies there).
        """
        if not self._prepared:
            self.prepare()
        self._prepared = False
        reads = [self._reads_recorder.handle, *reads_extra]
        rest = [self._recorder.handle, self._readback_recorder.handle] if readback else [self._recorder.handle]
        if extra:
            rest += extra
        self._serial = self.device.submit_batches([(reads, wait, signal), (rest, extra_wait, extra_signal)])
        self.read_back_serial = self._serial if readback else None
        return self._serial

    def read_back(self) -> np.ndarray:
        """Copy the current image to host memory now (waits) and return it."""
        if self._serial is None:
            return self.pixels()  # nothing drawn yet: the image has no contents
        self.device.wait()
        self._serial = self.device.submit([self._readback_recorder.handle])
        self.read_back_serial = self._serial
        self.device.wait(self._serial)
        return self.pixels()

    def profile(self, on: bool = True) -> None:
        """Write GPU timestamps around every pass from the next frame on (see :meth:`timings`)."""
        from .timing import Profiler

        if on and self.profiler is None:
            self.profiler = Profiler(self.device)
        elif not on and self.profiler is not None:
            self.profiler.close()
            self.profiler = None
        for rec in (self._reads_recorder, self._recorder, self._readback_recorder):
            rec.profiler = self.profiler
        self._recorded = False
        if self.profiler is None:
            self._record_readback()

    def timings(self) -> list[tuple[str, float]]:
        """GPU milliseconds per pass of the last completed frame (after ``profile()``)."""
        if self.profiler is None:
            return []
        marks = self.profiler.read(len(self.profiler.labels) - (0 if self.read_back_serial else 1))
        return marks

    def gpu_ms(self) -> float:
        """The last completed frame's GPU milliseconds, the sum of :meth:`timings` (0.0 when not
        profiled): what the overhead budget counts per frame on a CPU device."""
        if self.profiler is None:
            return 0.0
        return self.profiler.total_ms(len(self.profiler.labels) - (0 if self.read_back_serial else 1))

    def done(self) -> bool:
        """True when the last submitted frame has completed (never blocks)."""
        return self._serial is None or self.device.is_done(self._serial)

    def finish(self) -> None:
        """Collect a completed frame: each panel reads its counters back."""
        for p in self.panels:
            finish = p.drawable.finish
            if finish is not None:
                finish()
        self.frames += 1

    def render(self) -> np.ndarray:
        """Draw one frame and return it as a ``(height, width, 4)`` uint8 RGBA array."""
        serial = self.submit()
        self.device.wait(serial)
        self.finish()
        return self.pixels()

    def pixels(self) -> np.ndarray:
        """A copy of the last completed frame."""
        return self._readback.view(np.uint8, self.width * self.height * 4).reshape(
            self.height, self.width, 4).copy()

    def reference(self) -> np.ndarray:
        """The numpy twin of :meth:`render`: every panel's reference composed the same way.

        Each view's twin reads its host values: for a GPU tensor read in place (CUDA, MPS, the
        emulated discrete GPU) those are the copy made at attach, not what the device drew from.
        Compare such a panel with its view's twin made from a ``.cpu()`` copy taken after the
        frame instead."""
        out = np.empty((self.height, self.width, 4), np.uint8)
        out[:] = self.color
        for p in self.panels:
            r = getattr(p.drawable, "rect", None) or p.rect  # a drawable may shrink its rect
            out[r.y : r.y + r.height, r.x : r.x + r.width] = p.drawable.reference(r.width, r.height)
        return out

    def save_png(self, path, rgba: np.ndarray | None = None) -> Path:
        """Render (unless ``rgba`` is given) and write a PNG; returns the path."""
        return write_png(path, self.render() if rgba is None else rgba)

    def close(self, close_panels: bool = True) -> None:
        """Release the canvas (and its drawables, unless ``close_panels=False``)."""
        if self.image is None:
            return
        for p in self.panels:
            if close_panels:
                p.drawable.close()
            else:
                p.drawable.unbind()
        self.panels.clear()
        self._reads_recorder.close()
        self._recorder.close()
        self._readback_recorder.close()
        if self.profiler is not None:
            self.profiler.close()
        self._readback.close()
        self.image.close()
        self.image = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
