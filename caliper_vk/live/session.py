"""Live sessions: tensors attached to panels, drawn every training step.

A :class:`Session` owns a canvas (and optionally a window), the panels
attached to it, and the frame loop. ``attach`` exports the tensor under the
v1 contract (:mod:`caliper_vk.exporters`) and gives the view the live input
over the tensor's own memory (zero-copy) or over a staging copy (with the
reason). ``step`` is the only call on the training hot path:

1. if the previous frame is still in flight, it skips drawing and counts the
   skip — training never waits for the display;
2. otherwise it collects the finished frame, books a read of every panel's
   tensor under the write/read protocol (:mod:`.protocol`), and submits the
   next frame without waiting for it.

Pacing (:mod:`.pacing`), layout (:mod:`.layout`), input (:mod:`.input`) and the
status line (:mod:`.status`) are modules of their own. The helpers touch the session only
through :mod:`.frame_state`: the loop's flags (``frame``) and the calls it names.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .. import exporters
from ..chrome import StatusBar
from ..engine import Canvas
from ..engine.window import display_available as display_available  # re-exported by caliper_vk.live
from ..views import make_view
from . import opened
from .attach import attach_panel, build
from .budget import DEFAULT_BUDGET, DEFAULT_MIN_FPS, Budget
from .history import DEFAULT_BUDGET as DEFAULT_HISTORY
from .history import History, Rewind
from .history import parse_budget as parse_history
from .frame_state import FrameState
from .layout import lay_out
from .memory import DeviceMemoryError, fit_device_memory
from .pacing import Pacing, check_max_fps
from .panels import HostPanel, Panel
from .plan import acquire_image, make_plan
from .protocol import book_reads
from .sinks import open_sinks
from .status import Status, refresh_chrome, session_status
from .windowing import open_window, pump_window
from .._log import logger


class Session(Rewind):
    """A set of live panels drawn every training step, in a window or offscreen.

    Parameters
    ----------
    window : bool, None, "web" or "notebook"
        ``True`` opens a window (GLFW + Vulkan swapchain), ``False`` renders
        offscreen, ``"web"`` serves the frames to browser tabs (``host``, ``port``;
        the URL with its token is printed and is :attr:`url`), ``"notebook"``
        shows them in a Jupyter widget; ``None`` picks the notebook inside a
        Jupyter kernel, else a window when a display is available.
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
        more), 30 in a browser, 15 in a notebook, no limit offscreen. Frames due to be
        saved are never held. A browser session with no tab connected draws nothing.
    budget : float or None
        The share of the training loop's wall time Caliper may take (0.05: 5%), kept by
        drawing fewer frames (:mod:`.budget`); None draws every frame it can.
    min_fps : float
        However tight the budget, a frame at least this often (0.2: one every 5 s; the display
        is never starved). Input in the window or the page draws the next step at once.
    history : int, str or None
        Device memory for the input bytes of recent frames (``"256MB"``; 0 or None: off),
        so that :meth:`rewind` (or pause and ←/→ in the window) shows any kept step exactly
        as drawn. See :mod:`caliper_vk.live.history`.
    video : path, optional
        Write every drawn frame to this video (``.mp4``: H.264; ``.mkv``: lossless
        FFV1) at ``fps`` frames a second, and its steps to ``PATH.steps.json``.

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, window: bool | None = None, size=(1280, 800), out_dir=None, save_every: int = 0,
                 sync: bool = True, title: str = "Caliper", device=None, max_fps="auto",
                 budget: float | str | None = DEFAULT_BUDGET, min_fps: float = DEFAULT_MIN_FPS,
                 history=DEFAULT_HISTORY, video=None, fps: float = 30.0, host: str = "127.0.0.1",
                 port: int = 8765, device_memory=None):
        check_max_fps(max_fps)
        self.budget = Budget(budget, min_fps)
        history_bytes = parse_history(history)
        # frame sinks (a browser, a notebook widget, a video): see .sinks
        self.sinks, window = open_sinks(window, session=self, title=title, size=size, video=video,
                                        fps=fps, host=host, port=port)
        max_fps = self.sinks.live_fps if max_fps == "auto" and self.sinks.live else max_fps
        self.frame = FrameState()  # the loop's flags, shared with the helpers (.frame_state)
        self.drawn_step: int | None = None  # the step of the last frame submitted
        self.sync = sync
        self.size = (int(size[0]), int(size[1]))
        self.title = title
        self.out_dir = Path(out_dir) if out_dir is not None else None
        # no window where the platform refuses one and none was asked for: offscreen, saying why
        self.window, self.window_refused, self.device = open_window(window, self.size, title, device,
                                                                    self.sinks)
        self.pacing = Pacing(max_fps, self.window is not None, save_every, self.out_dir is not None)
        self.panels: list[Panel | HostPanel] = []
        self.status_bar = StatusBar()
        self.canvas: Canvas | None = None
        self.frames = 0
        self.skipped = 0
        self.step_count = 0
        self.paused = False
        self.message = ""
        self.failed: str | None = None  # the renderer error that stopped drawing for good
        self.saved: list[Path] = []
        self._save_pending: Path | None = None
        # a cap on the device memory Caliper holds ("512MB"; history first: fit_device_memory)
        self.device_memory = parse_history(device_memory, "device_memory") or None
        self.history = History(self.device, history_bytes, self.device_memory) if history_bytes else None
        self._plan = None  # the steady frame (.plan), made by the general path's frames
        self.relayout()
        opened.join(self)

    # pacing, as attributes people read
    max_fps = property(lambda self: self.pacing.max_fps)
    held = property(lambda self: self.pacing.held)
    save_every = property(lambda self: self.pacing.save_every)

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
        panel = attach_panel(self, name, tensors, v, view, named, extra, zero_copy)
        panel.error = self._build(v, name)
        self.wait_idle()
        self.panels.append(panel)
        self.relayout()
        try:
            fit_device_memory(self.device, self.history, self.device_memory, f"attaching {name}")
        except DeviceMemoryError:
            panel.close()
            raise
        return panel

    def _build(self, view, name: str) -> str | None:
        error, message = build(view, name)
        self.message = message or self.message
        return error

    def add(self, view, name: str | None = None) -> HostPanel:
        """Show a view fed from the host (``Text`` samples, any view driven by ``set_data``)."""
        panel = HostPanel(name or f"{type(view).__name__.lower()}{len(self.panels)}", view, session=self)
        panel.error = self._build(view, panel.name)
        self.wait_idle()
        self.panels.append(panel)
        self.relayout()
        return panel

    # -- what the helpers may call (.frame_state.LoopHost; not for training code) -----------
    def detach(self, panel) -> None:
        """Take ``panel`` out and release it (``panel.close()``)."""
        self.wait_idle()
        self.panels.remove(panel)
        panel._release()
        self.relayout()

    def wait_idle(self) -> None:
        """Wait for the device, then collect the frame in flight if any."""
        self.device.wait()  # always: a Ctrl-C mid-submit leaves a frame that frame.inflight misses
        if self.frame.inflight:
            self.collect()

    def relayout(self) -> None:
        """Lay the canvas out again (a new canvas) from the panels and the window's size."""
        width, height = self.window.framebuffer_size() if self.window else self.size
        if self.canvas is not None:
            self.canvas.close(close_panels=False)
        if self.history is not None:
            self.history.drop_layout()  # made again from the panels at the next frame
        self.canvas = lay_out(self.device, width, height, self.panels, self.status_bar)
        self._protocols = [p.protocol for p in self.panels if p.protocol is not None]  # per frame
        self._plan = None
        if self.budget.share is not None and self.device.timestamps:
            self.canvas.profile()  # a frame's device time is training's too: the budget counts it
        self.frame.layout_due = False
        if self.window:
            self.window.bind_canvas(self.canvas)

    # -- the frame loop ----------------------------------------------------------------------
    def step(self, step: int | None = None) -> bool:
        """Draw a frame unless the previous one is still in flight; never waits for it.

        Returns True when a frame was submitted, False when drawing was skipped
        (the skip is counted), held (``max_fps``, the budget), the session is paused, the
        window is gone, or drawing stopped after a renderer error (:attr:`failed`; training
        is never interrupted).
        """
        if self.canvas is None:
            return opened.closed_step(self)
        entered = self.budget.enter()
        drew = False
        try:
            plan = self._plan  # the steady frame (.plan); None when a check failed: the full loop
            drew = None if plan is None else plan.step(step)
            if drew is None:
                drew = self._step(step)
        finally:
            self.budget.leave(entered, drew, self.frame.inflight)
        return drew

    def _step(self, step: int | None) -> bool:
        self.step_count = self.step_count + 1 if step is None else int(step)
        if self.sinks.items:
            self.sinks.poll(self)  # a page's drag, wheel and keys, as a window's
        if self.failed:
            if self.window is not None and self.window.alive:
                with contextlib.suppress(Exception):
                    self.window.poll()  # stays responsive (and closable) showing its last frame
            return False
        if self.window is not None and not pump_window(self):
            return False  # closed, lost or minimised: training goes on (.windowing)
        save = self.pacing.save_due(self.step_count)
        if self.frame.inflight:
            if not self.canvas.done():
                if not save:
                    self.skipped += 1
                    return False
                self.device.wait()  # offscreen recording: every Kth step gets its frame
            self.collect()
        if self.paused:
            return self.history is not None and self.history.redraw(self)
        if self.frame.layout_due:  # a panel stopped: show its notice in its place
            self.relayout()
        if not (self.frame.read_back_next or save) and (
                (self.pacing.max_fps and self.pacing.within_interval())
                or (self.sinks.items and self.sinks.idle(self)) or not self.budget.allows()):
            self.pacing.held += 1  # drawn recently enough, over budget, or nobody watches
            return False
        protocols = self._protocols
        if protocols:
            render_thread = threading.get_ident()
            writing = False
            for protocol in protocols:
                protocol.render_thread = render_thread
                writing = writing or protocol.depth > 0
            if writing and self.sync:
                for protocol in protocols:
                    protocol.ask_for_gap()
                self.skipped += 1  # a producer is mid-write: drawing now would tear
                return False
        if self.window is not None and not acquire_image(self):
            return False
        reading = []
        for panel in self.panels:
            if panel.error:
                continue
            try:
                panel._refresh()  # a replaced storage raises here: the panel stops in this frame
            except Exception as exc:  # stops this panel; training and the other panels go on
                why = str(exc) if isinstance(exc, exporters.ContractError) else f"{type(exc).__name__}: {exc}"
                self._stop_panel(panel, why)
                continue
            if panel.protocol is not None:
                reading.append(panel)
        if self.frame.layout_due:  # never draw a stopped panel's view (its old storage) again
            self.relayout()
        booked = book_reads(reading) if reading else []
        if booked is None:  # a write began after the check above (an acquired image is kept)
            self.skipped += 1
            return False
        waits, signals = [], []
        for panel, (wait, signal) in zip(reading, booked, strict=True):
            panel.view.data_version = (panel.protocol.writes, self.step_count)
            waits.append(wait)
            signals.append(signal)
        now = time.perf_counter()
        to_sinks = bool(self.sinks.items) and self.sinks.wants_frame()  # read back only for a taker
        # the status line and titles: a few times a second, and for every frame that leaves the process
        refresh_chrome(self, now, force=save or to_sinks or self.frame.read_back_next)
        extra, binary_wait, binary_signal = [], [], []
        if self.window is not None:
            extra = [self.window.present_commands()]
            acquired, done = self.window.frame_semaphores
            binary_wait, binary_signal = [(acquired, 0)], [(done, 0)]
        self.pacing.submitted(now)
        try:
            kept = ()
            if self.history:
                self.canvas.prepare()  # first: the history copies staged inputs from what it writes
                kept = self.history.keep(self.step_count, reading)
            self.canvas.submit(wait=waits, signal=signals, extra=extra, extra_wait=binary_wait,
                               extra_signal=binary_signal, reads_extra=kept,
                               readback=save or self.frame.read_back_next or to_sinks)
            if self.window is not None:
                self.window.present()
        except Exception as exc:  # a Vulkan error must not stop training
            self.fault(exc)
            for panel, signal in zip(reading, signals, strict=True):
                panel.protocol.abandon(signal)  # no producer may wait for it forever
            return False
        self.frame.inflight = True
        self.frame.sink_step = self.step_count if to_sinks else None
        self.drawn_step = self.step_count
        if save:
            self._save_pending = self.out_dir / f"frame_{self.step_count:06d}.png"
        self._plan = make_plan(self, self._protocols)  # the next frames, planned from this one
        return True

    def due(self, step: int | None = None) -> bool:
        """Whether ``step(step)`` would draw a frame now. A loop can skip computing what it
        only draws (a probe forward, a projection) when it would not be drawn:

        >>> if session.due(step):           # doctest: +SKIP
        ...     with panel.writing():
        ...         emb.copy_(model.embed(x))
        >>> session.step(step)              # doctest: +SKIP

        False while the previous frame is still in flight, within ``1/max_fps`` of the
        last frame, when a frame would not fit the budget, paused, after the window closed
        or drawing stopped; frames due to be saved are always due. From a True answer to
        ``step()`` the time counts as Caliper's (the probe forward it lets the loop skip).
        """
        started = self.budget.clock()
        try:
            return self._due(step)
        finally:
            self.budget.charge(started)  # asking is Caliper's time too (a True answer's span begins)

    def _due(self, step: int | None) -> bool:
        step = self.step_count + 1 if step is None else int(step)
        if self.failed or self.canvas is None or self.paused:
            return False
        if self.window is not None and (not self.window.alive or self.frame.window_gone
                                        or (self.window.resized and self.window.minimised())):
            return False
        if self.pacing.save_due(step):
            return self.budget.due(forced=True)  # its probe still counts as Caliper's time
        if self.frame.inflight and not self.canvas.done():
            return False
        return not self.pacing.within_interval() and not self.sinks.idle(self) and self.budget.due()

    def collect(self) -> None:
        """Collect the finished frame in flight: its counters, its PNG, its sinks' pixels."""
        self.canvas.finish()
        if self.canvas.profiler is not None and self.budget.share is not None:
            self.budget.executed(self.canvas.gpu_ms() / 1000)
        self.frame.inflight = False
        self.frames += 1
        self.pacing.completed()
        if self._save_pending is not None:
            path, self._save_pending = self._save_pending, None
            self.canvas.save_png(path, self.canvas.pixels())
            self.saved.append(path)
        if self.frame.sink_step is not None:
            step, self.frame.sink_step = self.frame.sink_step, None
            self.sinks.deliver(self, self.canvas.pixels(), step)

    def _stop_panel(self, panel, why: str) -> None:
        panel.error = why
        self.frame.layout_due = True  # its notice replaces it from the next frame
        self.message = f"{panel.name} stopped"
        logger.warning(why)

    def fault(self, exc: Exception) -> None:
        """Drawing failed (a Vulkan error, a view raising): stop drawing for good, keep training.
        Producers no longer wait for frames (``panel.writing()`` returns at once)."""
        self.failed = f"{type(exc).__name__}: {exc}"
        for p in self.panels:
            if p.protocol is not None:
                p.protocol.stop()  # and every value a CUDA stream may wait on is reached
        self.message = f"renderer error: {type(exc).__name__}; drawing stopped"
        logger.warning(f"drawing failed ({type(exc).__name__}: {exc}); training continues, "
                       "drawing stops")

    # -- reporting ---------------------------------------------------------------------------
    def status(self) -> Status:
        return session_status(self)

    def flush(self) -> np.ndarray:
        """Wait for the frame in flight (if any) and return the last frame's pixels."""
        self.wait_idle()
        if self.canvas.read_back_serial is None:
            return self.canvas.read_back()
        return self.canvas.pixels()

    def render(self) -> np.ndarray:
        """Draw one frame now and wait for it (tests, screenshots, `S`)."""
        self.wait_idle()
        self.frame.read_back_next = True  # the copy rides in the frame's own submission
        try:
            drawn = self.step(self.step_count)
        finally:
            self.frame.read_back_next = False
        if not drawn:
            why = (f"drawing stopped by a renderer error: {self.failed}" if self.failed
                   else "paused, window closed, or a producer mid-write")
            raise RuntimeError(f"could not draw a frame ({why})")
        return self.flush()

    def save_png(self, path) -> Path:
        return self.canvas.save_png(path, self.flush())

    @property
    def url(self) -> str | None:
        """The page of a ``window="web"`` session (with its token), else None."""
        web = self.sinks.get("web")
        return web.url if web is not None else None

    def close(self) -> None:
        opened.leave(self)
        if self.canvas is None:
            return
        self.wait_idle()
        self.sinks.close()  # after the last frame was delivered: a video is completed here
        for panel in list(self.panels):
            panel._release()
        self.panels.clear()
        if self.history is not None:
            self.history.close()
        self.canvas.close()
        self.canvas = None
        if self.window is not None:
            self.window.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
