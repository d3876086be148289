"""Live sessions: tensors attached to panels, drawn every training step.

A :class:`Session` owns a canvas (and optionally a window), the panels
attached to it, and the frame loop. ``attach`` exports the tensor under the
v1 contract (:mod:`caliper_vk.exporters`) and gives the view a
:class:`~caliper_vk.views._source.Source` over the tensor's own memory
(zero-copy) or over a staging copy (with the reason). ``step`` is the only
call on the training hot path:

1. if the previous frame is still in flight, it skips drawing and counts the
   skip — training never waits for the display;
2. otherwise it collects the finished frame, runs the write/read protocol for
   every panel, and submits the next frame without waiting for it.

The write/read protocol (docs/contract.md) orders the producer's writes and
the renderer's reads with one timeline semaphore per attached tensor: the
producer's write *k* is signalled as ``2k+1`` (``panel.writing()`` on exit, or
``step()`` on behalf of a loop that writes without it); frame *k* waits for
``2k+1`` on the GPU, reads, and signals ``2k+2``; ``panel.writing()`` waits for
``2k+2`` before letting the producer overwrite. On CPU tensors the producer's
wait is on the host, and the status line says so.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import exporters
from .engine import Canvas, Rect, TimelineSemaphore, default_device
from .engine.external import HostImportError, import_host_pointer
from . import chrome
from .chrome import LABEL_BACKGROUND, StatusBar, TextStrip
from .views import make_view
from .views._source import Source

PATH_ZERO_COPY = "zero-copy"
PATH_DEVICE_COPY = "on-device copy"
PATH_STAGING = "host staging"
PATH_HOST = "host data"
GAP = 2


def _numpy_alias(tensor) -> tuple[np.ndarray, str]:
    """A numpy array sharing ``tensor``'s memory, and the contract dtype name."""
    import torch

    dtype = exporters.dtype_name(tensor)
    if dtype == "bfloat16":
        return tensor.detach().view(torch.int16).numpy().view(np.uint16), dtype
    return tensor.detach().numpy(), dtype


def _window_size(window) -> tuple[int, int]:
    import glfw

    return glfw.get_window_size(window.handle)


def display_available() -> bool:
    """True when a window could be opened (an X11 or Wayland display is set)."""
    if sys.platform in ("win32", "darwin"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


class Panel:
    """A tensor attached to a view in a session. Made by :meth:`Session.attach`.

    Attributes
    ----------
    path : str
        ``"zero-copy"``, ``"on-device copy"`` or ``"host staging"``.
    reason : str
        How the path came about (why, when it is not zero-copy).
    record : ExternalBuffer
        The contract record of the tensor.
    """

    def __init__(self, session: Session, name: str, tensor, view, record, source: Source,
                 path: str, reason: str, more=()):
        self.session = session
        self.name = name
        self.view = view
        self.record = record
        self.source = source
        self.path = path
        self.reason = reason
        self._tensor = tensor  # the storage stays alive while attached (record.owner too)
        self._fingerprint = exporters.storage_fingerprint(tensor)
        self._on_host = tensor.device.type == "cpu"
        # further inputs of a view that reads several tensors: (tensor, fingerprint, on host, source);
        # one semaphore orders the writes to all of them (panel.writing() wraps any of them)
        self._more = [(t, exporters.storage_fingerprint(t), t.device.type == "cpu", s) for t, s in more]
        # GPU tensors: the exporter's producer-side sync (CUDA: on torch's stream; MPS: host)
        self._sync = record.semaphore if path != PATH_STAGING else None
        self.semaphore = self._sync.timeline if self._sync else TimelineSemaphore(session.device)
        self._lock = threading.Lock()
        self._turn = threading.Condition(self._lock)
        self._writing = False
        self._want_read = False  # the renderer (on another thread) is waiting for a gap
        self._writes = 0  # producer writes signalled (value 2k+1 for write k)
        self._reads = 0  # frames submitted that read this tensor (signal 2k+2 for read k)
        self.producer_wait_s = 0.0
        self.producer_writes = 0
        self.error: str | None = None
        self.closed = False
        self.label, self.notice = _chrome_for(self)
        self.title_warnings = (0, 0)
    # -- the producer's side -----------------------------------------------------------
    @contextlib.contextmanager
    def writing(self):
        """Wrap writes to the attached tensor: waits until no frame is reading it, then
        marks the new values ready for the next frame.

        >>> with panel.writing():          # doctest: +SKIP
        ...     emb.copy_(model.embed(x))
        """
        if not self.session.sync or self.closed or self.session.failed:
            yield  # no frame will read it (after a renderer fault none ever will): no wait
            return
        with self._lock:
            if self._want_read and threading.get_ident() != self.session._render_thread:
                # a renderer thread found us mid-write last time: let it book its read
                # first (bounded, so a renderer that stopped calling step() costs little)
                self._turn.wait_for(lambda: not self._want_read, timeout=0.05)
            target = 2 * self._reads  # every submitted read has finished at this value
            self._writing = True
        t0 = time.perf_counter()
        if self._sync is not None:
            self._sync.before_write(target)  # CUDA: queued on the stream, no CPU wait
        else:
            self.semaphore.wait(target)
        self.producer_wait_s += time.perf_counter() - t0
        self.producer_writes += 1  # writes through writing(): new values, unlike a redraw
        try:
            yield
        finally:
            with self._lock:
                self._writing = False
                if self._writes == self._reads:  # the next read has no data signalled yet
                    self._signal_write()

    # -- the renderer's side (called by Session.step) ----------------------------------
    def _begin_read(self) -> tuple | None:
        """Wait/signal values for this frame's read, or None to skip this frame."""
        with self._lock:
            if self.session.sync and self._writing:
                return None  # the producer is writing: drawing now would tear
            if self._writes == self._reads:
                # no new write signalled since the last read: the memory is as it is now
                self._signal_write()
            k = self._reads
            self._reads += 1
            self._want_read = False
            self._turn.notify_all()
            return (self.semaphore, 2 * k + 1), (self.semaphore, 2 * k + 2)

    def _signal_write(self) -> None:
        """Signal write k (``2k+1``): from the host, or after the producer's GPU work."""
        k2 = 2 * self._writes
        # sync=False (the negative control) signals from the host, unordered, except that a
        # CUDA mirror's copy is always made on the stream
        if self._sync is not None and (self.session.sync or self.record.mirrored):
            self._sync.after_write(k2, k2 + 1)  # CUDA mirror: the on-device copy happens here
        else:
            self.semaphore.signal(k2 + 1)
        self._writes += 1

    def _refresh(self) -> None:
        """Per-frame host work: storage checks, and the copy for non-CPU staging."""
        exporters.check_unchanged(self._tensor, self._fingerprint, self.name)
        if not self._on_host and self._sync is None:  # staged: imported GPU memory needs no copy
            host = self._tensor.detach().to("cpu")
            self.source.array, _ = _numpy_alias(host)
        for tensor, fingerprint, on_host, source in self._more:
            exporters.check_unchanged(tensor, fingerprint, self.name)
            if not on_host:
                source.array, _ = _numpy_alias(tensor.detach().to("cpu"))

    @property
    def status(self) -> str:
        if self.error:
            return f"{self.name}: stopped ({self.error})"
        if self.path == PATH_ZERO_COPY and "host sync" not in self.reason:
            return f"{self.name}: {self.path}"
        return f"{self.name}: {self.path} ({self.reason})"

    def close(self) -> None:
        """Detach: the panel leaves the session; its import is freed once the GPU is done."""
        if self.closed:
            return
        self.session._detach(self)


def _chrome_for(panel) -> tuple[TextStrip, TextStrip]:
    """A panel's title bar and the notice shown in its place once it has stopped."""
    return (TextStrip(*title_items(panel), background=LABEL_BACKGROUND),
            TextStrip([(panel.error or "", chrome.ERROR)], background=chrome.BACKGROUND, block=True))


def _warning_counts(view) -> tuple[int, int]:
    """(values not drawn as NaN/Inf, values outside the range) from the view's last frame."""
    stats = getattr(view, "stats", None) or {}
    return (sum(stats.get(k, 0) for k in ("nonfinite", "nan", "inf", "posinf", "neginf")),
            stats.get("below", 0) + stats.get("above", 0))


def title_items(panel) -> tuple[list, list]:
    """(left, right) items of a panel's title bar: its name; warnings, then the view's legend."""
    left = [(panel.name, chrome.FOREGROUND)]
    if panel.error:
        return left, [("stopped: " + panel.error.splitlines()[0], chrome.ERROR)]
    view = panel.view
    right = []
    bad, outside = _warning_counts(view)
    if bad:
        right.append((f"{bad} NaN/Inf  ", chrome.NONFINITE))
    if outside:
        right.append((f"{outside} outside range  ", chrome.WARNING))
    try:
        right += view.legend()
    except Exception as exc:  # a legend must never stop the drawing
        right.append((f"(no legend: {type(exc).__name__})", chrome.DIM))
    return left, right


class HostPanel:
    """A view fed from the host (``Session.add``): no tensor, no import, no sync."""

    path = PATH_HOST
    reason = "fed from the host with set_data / append"
    semaphore = None
    error = None
    producer_writes = 0
    producer_wait_s = 0.0
    _writing = False

    def __init__(self, session: Session, name: str, view):
        self.session, self.name, self.view = session, name, view
        self._tensor = None
        self.closed = False
        self.label, self.notice = _chrome_for(self)
        self.title_warnings = (0, 0)

    def _refresh(self) -> None:
        pass

    def _begin_read(self) -> tuple:
        return ()

    @property
    def status(self) -> str:
        if self.error:
            return f"{self.name}: stopped ({self.error})"
        return f"{self.name}: {self.path}"

    def close(self) -> None:
        if not self.closed:
            self.session._detach(self)


@dataclass
class Status:
    """What :func:`caliper_vk.status` reports."""

    device: str
    panels: list = field(default_factory=list)  # (name, path, reason)
    frames: int = 0
    skipped: int = 0
    held: int = 0  # steps not drawn because of max_fps
    max_fps: float | None = None
    step: int = 0
    frame_ms: float = 0.0  # submit → seen complete (an upper bound: completion is seen at a step)
    window: str = "headless"
    paused: bool = False
    message: str = ""
    producer_wait_ms: float = 0.0  # mean host wait per write for frames still reading

    def line(self) -> str:
        parts = [self.device]
        plain = [p for p in self.panels if p[1] == PATH_ZERO_COPY]
        if len(self.panels) > 3 and plain:
            parts.append(f"{len(plain)} panels: zero-copy")
        else:
            plain = []
        for name, path, reason in self.panels:
            if (name, path, reason) not in plain:
                quiet = path == PATH_HOST or (path == PATH_ZERO_COPY and "host sync" not in reason)
                parts.append(f"{name}: {path}" + ("" if quiet else f" ({reason})"))
        parts.append(f"frame <={self.frame_ms:.1f} ms")
        if self.producer_wait_ms >= 0.05:
            parts.append(f"writer waited {self.producer_wait_ms:.1f} ms/write (host sync)")
        parts.append(f"step {self.step}")
        parts.append(f"skipped {self.skipped}")
        if self.max_fps:
            parts.append(f"≤{self.max_fps:g} fps")
        if self.paused:
            parts.append("PAUSED (space)")
        if self.message:
            parts.append(self.message)
        return " · ".join(parts)

    def __str__(self) -> str:
        return self.line()


class Session:
    """A set of live panels drawn every training step, in a window or offscreen.

    Parameters
    ----------
    window : bool or None
        ``True`` opens a window (GLFW + Vulkan swapchain), ``False`` renders
        offscreen, ``None`` picks a window when a display is available.
    size : (width, height)
        Window or offscreen canvas size in pixels (the status line takes the bottom 20).
    out_dir : path, optional
        Offscreen sessions write PNG frames here every ``save_every`` steps.
    save_every : int
        0 writes no frames. On those steps an offscreen session waits for the
        frame in flight so that each of them gets its frame (a recording, not a
        live view); a windowed session never waits.
    sync : bool
        The write/read protocol (turn off only to see torn frames).
    title : str
        The window title.
    max_fps : float, None or "auto"
        Draw at most this many frames a second: a step() sooner than that after
        the last frame draws nothing (counted as ``held``) and costs the training
        loop next to nothing. ``"auto"``: 60 with a window (a display shows no
        more), no limit offscreen. Frames due to be saved are never held.

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, window: bool | None = None, size=(1280, 800), out_dir=None, save_every: int = 0,
                 sync: bool = True, title: str = "Caliper", device=None, max_fps="auto"):
        if not (max_fps is None or max_fps == "auto"
                or (isinstance(max_fps, (int, float)) and not isinstance(max_fps, bool) and max_fps > 0)):
            raise ValueError(f"max_fps must be a positive number, None (no limit) or 'auto', got {max_fps!r}")
        self.sync = sync
        self.size = (int(size[0]), int(size[1]))
        self.title = title
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.save_every = int(save_every)
        self.window = None
        want_window = display_available() if window is None else bool(window)
        if want_window:
            from .engine.window import Window

            self.window = Window(self.size, title, device=device)
            self.device = self.window.device
        else:
            self.device = device or default_device()
        self.max_fps = (60.0 if self.window is not None else None) if max_fps == "auto" else max_fps
        self.held = 0  # steps that drew nothing because the last frame was under 1/max_fps ago
        self.panels: list[Panel] = []
        self.status_bar = StatusBar()
        self.canvas: Canvas | None = None
        self.frames = 0
        self.skipped = 0
        self.step_count = 0
        self.paused = False
        self.message = ""
        self.failed: str | None = None  # the renderer error that stopped drawing for good
        self._window_gone = False  # the window closed or its display was lost (said once)
        self.saved: list[Path] = []
        self._frame_times: list[float] = []
        self._submit_time = 0.0
        self._inflight = False
        self._save_pending: Path | None = None
        self._render_thread = threading.get_ident()
        self._status_time = -1.0
        self._status_message = ""
        self._read_back_next = False  # render(): copy the next frame to host memory in its submission
        self._layout()

    # -- panels ---------------------------------------------------------------------------
    def attach(self, tensor, view="pointcloud", name: str | None = None,
               zero_copy: bool = True, **options) -> Panel:
        """Draw ``tensor`` with ``view`` from now on; returns the :class:`Panel`.

        The tensor's memory is read in place where possible (zero-copy); keep
        writing into it in place. ``zero_copy=False`` forces the host staging
        path (for comparisons and debugging). Non-contiguous views and
        unsupported dtypes are refused with the fix in the message.

        ``view`` is a view name or a view instance (a ``CustomPanel``);
        ``tensor`` may be a dict ``{input name: tensor}`` for a view that reads
        several inputs. A custom panel whose shader fails to build is shown
        stopped, with the error, and the other panels keep drawing.
        """
        view_name = view if isinstance(view, str) else type(view).__name__.lower()
        name = name or f"{view_name}{len(self.panels)}"
        named = isinstance(tensor, Mapping)
        tensors = dict(tensor) if named else {name: tensor}
        # the view first: a bad name or option must not leave exported handles behind
        extra = {k: options.pop(k) for k in ("labels", "values") if k in options}
        if not isinstance(view, str):
            if options or extra:
                raise TypeError(f"options {sorted({**options, **extra})} apply to views made by name; "
                                f"configure the {type(view).__name__} instance instead")
            v = view
        else:
            v = make_view(view, **options)
        records = {}
        try:
            if named and not hasattr(v, "set_sources"):
                raise TypeError(f"the {view_name} view reads one tensor; attach a tensor, not a dict")
            # GPU interop serves single-input panels (one semaphore orders one tensor's writes)
            for k, t in tensors.items():
                records[k] = exporters.export(t, self.device.info, f"{name}.{k}" if named else name,
                                              device=None if named else self.device)
        except Exception:
            for record in records.values():
                exporters.release(record)
            if isinstance(view, str):
                v.close()
            raise
        feeds = {k: self._live_source(tensors[k], records[k], v, zero_copy) for k in tensors}
        try:
            if named:
                v.set_sources({k: f[0] for k, f in feeds.items()})
            elif view == "pointcloud":
                v.set_source(feeds[name][0], **extra)
            elif extra:
                raise TypeError(f"{', '.join(extra)} only apply to the pointcloud view")
            else:
                v.set_source(feeds[name][0])
        except Exception:
            for source, _, _ in feeds.values():
                source.close()
            for record in records.values():
                exporters.release(record)
            if isinstance(view, str):
                v.close()
            raise
        first = next(iter(tensors))
        _, path, reason = feeds[first]
        slower = [(k, p, r) for k, (_, p, r) in feeds.items() if p != PATH_ZERO_COPY]
        if named and slower:  # the panel is as fast as its slowest input
            path, reason = slower[0][1], "; ".join(f"{k}: {r}" for k, _, r in slower)
        panel = Panel(self, name, tensors[first], v, records[first], feeds[first][0], path, reason,
                      more=[(tensors[k], feeds[k][0]) for k in tensors if k != first])
        panel.error = self._build(v, name)
        self._wait_idle()
        self.panels.append(panel)
        self._layout()
        return panel

    def _live_source(self, tensor, record, view, zero_copy: bool) -> tuple[Source, str, str]:
        """A live :class:`Source` over ``tensor`` (imported in place when possible), its path and why."""
        # a view of the tensor's memory (CPU), or of a host copy refreshed every frame
        alias, dtype = _numpy_alias(tensor if tensor.device.type == "cpu" else tensor.detach().to("cpu"))
        path, reason, imported = PATH_STAGING, record.reason, None
        if not view.gpu_reads_source:
            reason = view.host_reason  # the view draws a host-computed transform of the tensor
        elif record.kind != "staging" and not zero_copy:
            reason = "zero_copy=False was requested"
        elif record.kind == "host-pointer":
            try:
                imported = import_host_pointer(self.device, record.handle, record.nbytes,
                                               keepalive=record.owner)
                path = PATH_ZERO_COPY
            except HostImportError as exc:
                reason = f"the driver refused the import: {exc}"
        elif record.kind in exporters.GPU_KINDS:
            try:
                imported = exporters.import_external(self.device, record)
                path = PATH_DEVICE_COPY if record.mirrored else PATH_ZERO_COPY
            except exporters.ExternalMemoryError as exc:
                reason = f"the driver refused the import: {exc}"
        if imported is None:
            exporters.release(record)  # the tensor is staged: free its unused handle and GPU sync
        return Source(alias, dtype, imported=imported, live=True), path, reason

    def _build(self, view, name: str) -> str | None:
        """Compile a view's own shader now (custom panels). A failure stops only this panel:
        the error goes to stderr in full and to the status line in one line."""
        build = getattr(view, "build", None)
        if build is None:
            return None
        from .shader_module import ShaderError

        try:
            build()
        except ShaderError as exc:
            print(f"caliper: panel {name} stopped: {exc}", file=sys.stderr)
            self.message = f"{name} stopped"
            return exc.summary
        return None

    def add(self, view, name: str | None = None) -> HostPanel:
        """Show a view fed from the host (``Text`` samples, or any view driven by
        ``set_data``) in this session's layout; returns its panel."""
        panel = HostPanel(self, name or f"{type(view).__name__.lower()}{len(self.panels)}", view)
        panel.error = self._build(view, panel.name)
        self._wait_idle()
        self.panels.append(panel)
        self._layout()
        return panel

    def _detach(self, panel: Panel) -> None:
        self._wait_idle()
        self.panels.remove(panel)
        panel.closed = True
        panel.view.close()  # closes the source and its import (deferred until the GPU is done)
        panel.label.close()
        panel.notice.close()
        if getattr(panel, "_sync", None) is not None:
            panel._sync.close()  # CUDA's import of the semaphore first, then the semaphore
        if panel.semaphore is not None:
            panel.semaphore.close()
        panel._tensor = None
        panel._more = []
        self._layout()

    def _wait_idle(self) -> None:
        if self._inflight:
            self.device.wait()
            self._collect()

    def _layout(self) -> None:
        width, height = self.window.framebuffer_size() if self.window else self.size
        if self.canvas is not None:
            self.canvas.close(close_panels=False)
        self.canvas = Canvas(width, height, device=self.device)
        status_h = chrome.line_height()
        area_h = height - status_h
        n = len(self.panels)
        if n and area_h > 2 * GAP:
            cols = math.ceil(math.sqrt(n * width / max(area_h, 1)))
            cols = max(1, min(n, cols))
            rows = math.ceil(n / cols)
            for i, panel in enumerate(self.panels):
                r, c = divmod(i, cols)
                x0 = GAP + (width - GAP) * c // cols
                x1 = (width - GAP) * (c + 1) // cols
                y0 = GAP + (area_h - GAP) * r // rows
                y1 = (area_h - GAP) * (r + 1) // rows
                slot = Rect(x0, y0, max(1, x1 - x0), max(1, y1 - y0))
                # the title bar above the view, unless the slot is too small to share
                head = chrome.line_height() if slot.height >= 2 * chrome.line_height() else 0
                body = Rect(slot.x, slot.y + head, slot.width, slot.height - head)
                panel.slot = slot
                stopped = panel.error or getattr(panel.view, "failed", False)
                if stopped:  # the view draws nothing more; the notice says why, in full
                    panel.notice.set_items([(panel.error or "", chrome.ERROR)])
                self.canvas.place(panel.notice if stopped else panel.view, body)
                if head:
                    self.canvas.place(panel.label, Rect(slot.x, slot.y, slot.width, head))
        self._layout_due = False
        self.canvas.place(self.status_bar, Rect(0, height - status_h, width, status_h))
        if self.window:
            self.window.bind_canvas(self.canvas)

    # -- the frame loop ----------------------------------------------------------------------
    def step(self, step: int | None = None) -> bool:
        """Draw a frame unless the previous one is still in flight; never waits for it.

        Returns True when a frame was submitted, False when drawing was skipped
        (the skip is counted), the session is paused, the window is gone, or drawing
        stopped after a renderer error (:attr:`failed`; training is never interrupted).
        """
        self.step_count = self.step_count + 1 if step is None else int(step)
        if self.failed:
            if self.window is not None and self.window.alive:
                with contextlib.suppress(Exception):
                    self.window.poll()  # stays responsive (and closable) showing its last frame
            return False
        if self.window is not None:
            if not self.window.alive:
                self._window_closed()  # says so once (the surface may have gone while presenting)
                return False
            self._handle(self.window.poll())
            if not self.window.alive:
                self._window_closed()
                return False
            if self.window.resized:
                self._wait_idle()
                self.window.recreate()
                self._layout()
        if self._inflight:
            if self._save_due() and not self.canvas.done():
                self.device.wait()  # offscreen recording: every Kth step gets its frame
            if not self.canvas.done():
                self.skipped += 1
                return False
            self._collect()
        if self.paused:
            return False
        if self._layout_due:  # a panel stopped: show its notice in its place
            self._layout()
        if not self._read_back_next and not self._save_due() and self._within_frame_interval():
            self.held += 1  # drawn recently enough: this step costs training almost nothing
            return False
        self._render_thread = threading.get_ident()
        if self.sync and any(p._writing for p in self.panels):
            for p in self.panels:
                if p._writing:
                    p._want_read = True
            self.skipped += 1  # a producer is mid-write: drawing now would tear
            return False
        if self.window is not None:
            try:
                acquired = self.window.acquire()
            except Exception as exc:  # a Vulkan error must not stop training
                self._fault(exc)
                return False
            if not acquired:
                if not self.window.alive:  # the display or the window's surface went away
                    self._window_closed()
                else:
                    self.skipped += 1
                return False
        waits, signals = [], []
        for panel in self.panels:
            if panel.error:
                continue
            try:
                panel._refresh()
            except Exception as exc:  # stops this panel; training and the other panels go on
                why = str(exc) if isinstance(exc, exporters.ContractError) else f"{type(exc).__name__}: {exc}"
                self._stop_panel(panel, why)
                continue
            pair = panel._begin_read()
            if pair is None:  # a write began after the check above
                for sem, value in waits:  # reads booked but never run: mark them done
                    sem.signal(value + 1)
                self.skipped += 1
                return False
            if not pair:  # a host-fed panel: nothing to order
                continue
            waits.append(pair[0])
            signals.append(pair[1])
            panel.view.data_version = (panel.producer_writes, self.step_count)
        now = time.perf_counter()
        periodic = now - self._status_time > 0.25 or self.message != self._status_message
        if periodic:
            # text is drawn on the host: a few times a second is plenty
            self.status_bar.set_text(self.status().line(), warn=bool(self.message))
            self._status_time, self._status_message = now, self.message
        for panel in self.panels:
            # titles: a few times a second, and at once when a warning count changes
            warnings = _warning_counts(panel.view)
            if periodic or warnings != panel.title_warnings:
                panel.title_warnings = warnings
                panel.label.set_items(*title_items(panel))
        extra = []
        binary_wait, binary_signal = [], []
        if self.window is not None:
            extra = [self.window.present_commands()]
            acquired, done = self.window.frame_semaphores
            binary_wait, binary_signal = [(acquired, 0)], [(done, 0)]
        self._submit_time = time.perf_counter()
        try:
            self.canvas.submit(wait=waits, signal=signals, extra=extra, extra_wait=binary_wait,
                               extra_signal=binary_signal,
                               readback=self._save_due() or self._read_back_next)
            if self.window is not None:
                self.window.present()
        except Exception as exc:  # a Vulkan error must not stop training
            self._fault(exc)
            return False
        self._inflight = True
        if self._save_due():
            self._save_pending = self.out_dir / f"frame_{self.step_count:06d}.png"
        return True

    def _save_due(self, step: int | None = None) -> bool:
        step = self.step_count if step is None else step
        return (self.window is None and self.out_dir is not None and self.save_every > 0
                and step % self.save_every == 0)

    def due(self, step: int | None = None) -> bool:
        """Whether ``step(step)`` would draw a frame now. A loop can skip computing what it
        only draws (a probe forward, a projection) when it would not be drawn:

        >>> if session.due(step):           # doctest: +SKIP
        ...     with panel.writing():
        ...         emb.copy_(model.embed(x))
        >>> session.step(step)              # doctest: +SKIP

        False while the previous frame is still in flight, within ``1/max_fps`` of the
        last frame, paused, after the window closed or drawing stopped; frames due to be
        saved are always due.
        """
        step = self.step_count + 1 if step is None else int(step)
        if self.failed or self.canvas is None or self.paused:
            return False
        if self.window is not None and (not self.window.alive or self._window_gone):
            return False
        if self._save_due(step):
            return True
        if self._inflight and not self.canvas.done():
            return False
        return not self._within_frame_interval()

    def _within_frame_interval(self) -> bool:
        """True when the last frame was submitted less than ``1/max_fps`` ago."""
        return bool(self.max_fps) and time.perf_counter() - self._submit_time < 1.0 / self.max_fps

    def _handle(self, events) -> None:
        """Mouse and keys: drag rotates and the wheel zooms the point cloud under the
        cursor; R resets its view, space pauses drawing, S saves a PNG."""
        for ev in events:
            target = self._panel_at(ev.x, ev.y)
            view = target.view if target is not None else None
            if ev.kind == "drag" and hasattr(view, "set_camera"):
                yaw, pitch, _ = view.camera
                view.set_camera(yaw_deg=yaw + 0.4 * ev.dx,
                                pitch_deg=max(-90.0, min(90.0, pitch + 0.4 * ev.dy)))
            elif ev.kind == "scroll" and hasattr(view, "set_camera"):
                view.set_camera(zoom=max(0.05, min(50.0, view.camera[2] * 1.1 ** ev.dy)))
            elif ev.kind == "key" and ev.key == "r" and hasattr(view, "reset_camera"):
                view.reset_camera()
            elif ev.kind == "key" and ev.key == "space":
                self.paused = not self.paused
                self.status_bar.set_text(self.status().line())
            elif ev.kind == "key" and ev.key == "s":
                folder = self.out_dir or Path.cwd()
                path = self.save_png(folder / f"caliper_{time.strftime('%Y%m%d_%H%M%S')}.png")
                self.message = f"saved {path}"
                print(f"caliper: saved {path}", file=sys.stderr)

    def _panel_at(self, x: float, y: float) -> Panel | None:
        if self.window is not None:
            ww, wh = _window_size(self.window)
            fw, fh = self.window.framebuffer_size()
            x, y = x * fw / max(ww, 1), y * fh / max(wh, 1)
        for p in self.panels:
            r = p.view.rect
            if r is not None and r.x <= x < r.x + r.width and r.y <= y < r.y + r.height:
                return p
        return self.panels[0] if len(self.panels) == 1 else None

    def _collect(self) -> None:
        self.canvas.finish()
        self._inflight = False
        self.frames += 1
        self._frame_times.append(time.perf_counter() - self._submit_time)
        del self._frame_times[:-30]
        if self._save_pending is not None:
            path, self._save_pending = self._save_pending, None
            self.canvas.save_png(path, self.canvas.pixels())
            self.saved.append(path)

    def _stop_panel(self, panel: Panel, why: str) -> None:
        panel.error = why
        self._layout_due = True  # its notice replaces it from the next frame
        self.message = f"{panel.name} stopped"
        print(f"caliper: {why}", file=sys.stderr)

    def _fault(self, exc: Exception) -> None:
        """Drawing failed (a Vulkan error, a view raising): stop drawing for good, keep training.
        Producers no longer wait for frames (``panel.writing()`` returns at once)."""
        self.failed = f"{type(exc).__name__}: {exc}"
        self.message = f"renderer error: {type(exc).__name__}; drawing stopped"
        print(f"caliper: drawing failed ({type(exc).__name__}: {exc}); training continues, "
              "drawing stops", file=sys.stderr)

    def _window_closed(self) -> None:
        if self._window_gone:
            return
        self._window_gone = True
        if getattr(self.window, "lost", False):
            self.message = "display lost; drawing stopped"
            print("caliper: the display was lost; training continues without drawing", file=sys.stderr)
        else:
            self.message = "window closed; drawing stopped"
            print("caliper: the window was closed; training continues without drawing",
                  file=sys.stderr)
        self._wait_idle()

    # -- reporting ---------------------------------------------------------------------------
    def status(self) -> Status:
        info = self.device.info
        times = self._frame_times
        return Status(
            device=f"{info.name} ({info.kind})",
            panels=[(p.name, p.path if not p.error else "stopped", p.error or p.reason)
                    for p in self.panels],
            frames=self.frames, skipped=self.skipped, held=self.held, max_fps=self.max_fps,
            step=self.step_count,
            frame_ms=1000 * float(np.median(times)) if times else 0.0,
            window=("window" if self.window and self.window.alive else
                    "display lost" if getattr(self.window, "lost", False) else
                    "window closed" if self.window else "headless"),
            paused=self.paused, message=self.message,
            producer_wait_ms=1000 * sum(p.producer_wait_s for p in self.panels)
            / max(1, sum(p.producer_writes for p in self.panels)))

    def flush(self) -> np.ndarray:
        """Wait for the frame in flight (if any) and return the last frame's pixels."""
        self._wait_idle()
        if self.canvas.read_back_serial is None:
            return self.canvas.read_back()
        return self.canvas.pixels()

    def render(self) -> np.ndarray:
        """Draw one frame now and wait for it (tests, screenshots, `S`)."""
        self._wait_idle()
        self._read_back_next = True  # the copy rides in the frame's own submission
        try:
            drawn = self.step(self.step_count)
        finally:
            self._read_back_next = False
        if not drawn:
            why = (f"drawing stopped by a renderer error: {self.failed}" if self.failed
                   else "paused, window closed, or a producer mid-write")
            raise RuntimeError(f"could not draw a frame ({why})")
        return self.flush()

    def save_png(self, path) -> Path:
        return self.canvas.save_png(path, self.flush())

    def close(self) -> None:
        if self.canvas is None:
            return
        self._wait_idle()
        for panel in list(self.panels):
            panel.closed = True
            panel.view.close()
            panel.label.close()
            panel.notice.close()
            if getattr(panel, "_sync", None) is not None:
                panel._sync.close()
            if panel.semaphore is not None:
                panel.semaphore.close()
            panel._tensor = None
            panel._more = []
        self.panels.clear()
        self.canvas.close()
        self.canvas = None
        if self.window is not None:
            self.window.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
