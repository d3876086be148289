"""The frame plan: a session's steady frame, compiled once its layout has drawn a frame.

``Session.step()`` is the training loop's hot path, and on a CPU its cost follows the
distinct objects, attributes and functions it touches, cache-cold after the driver and
the training code ran (docs/benchmarks.md), not its bytecode. Most of what the general
path (``Session._step``) looks at is the same from one frame to the next: the sinks, the
layout, the command buffers, the semaphores, which panels read which tensor.
A :class:`FramePlan` holds those, found by the last frame the general path drew, and
draws the next frames from them alone:

1. it checks, before touching anything, what the plan assumed and what can change without
   the session hearing of it: the canvas is the one planned (every relayout makes a new one:
   a panel attached, detached or stopped, a window resized), the window is open, drawing is
   not stopped, paused or asked to read back, no producer is inside ``panel.writing()``, every
   tensor's storage is where it was (its ``data_ptr()`` and shape), and the frame in flight is
   done;
2. it then runs the frame as the general path does, in the same order and through the same
   objects, inside the budget's span that ``Session.step`` opens (the checks of 1. too): the
   window's events (a step with input, or whose poll finds the window closed or resized, is the
   general path's, inside the same span); the collection of the last frame (the views'
   counters; not read again from a view whose last ``prepare()`` found its input bytes and parameters unchanged,
   :attr:`ViewBase.unchanged`: the same inputs give the same counters); the budget's and the
   frame-rate cap's hold; the window's image (:func:`acquire_image`, shared with the general
   path); the reads booked under the write/read protocol; the status line and titles; every
   view's ``prepare()`` (each view keeps its own check of its parameters and inputs: a
   parameter set directly, an array mutated in place, new labels are seen there, re-recording
   when needed); the history's copies; one ``vkQueueSubmit`` of submit structs built once per
   plan (and history chunk, swapchain image and acquire semaphore); the presentation.

Sessions with frame sinks (a browser, a notebook, a video), saved frames or a staged GPU
tensor (copied every frame) draw every frame the general way (:func:`make_plan` gives no
plan). Any check in step 1 failing returns None: that step runs the general path, which
plans again after the next frame it draws. Nothing is cached that could go stale silently:
what step 1 does not check is either rebuilt with the canvas or checked again inside the
objects the plan calls.
"""

from __future__ import annotations

import threading
import time

from ..chrome import TextStrip
from ..engine.device import build_submit
from . import input as window_input
from .protocol import book_reads
from .status import refresh_chrome, update_titles
from .windowing import window_closed

# Submit structs kept per plan: one per history command buffer (a chunk's, or with transfers a
# chunk's place: up to 16 x history_copy.TRANSFER_PLACES), and swapchain image and semaphore. Past
# this the cache starts over, and a ring that cycles through more keys would build one every frame.
MAX_STRUCTS = 1024


def acquire_image(session) -> bool:
    """The window's next image for this frame (the general path's and the plan's): False when none
    is free (the frame is skipped and counted), the window or its display went away, or acquiring
    failed (drawing stops: ``Session.fault``; training goes on)."""
    window = session.window
    try:
        acquired = window.acquire()
    except Exception as exc:  # a Vulkan error must not stop training
        session.fault(exc)
        return False
    if not acquired:
        if not window.alive:  # the display or the window's surface went away
            window_closed(session)
        else:
            session.skipped += 1
    return acquired


def make_plan(session, protocols) -> FramePlan | None:
    """The plan of ``session``'s steady frame, or None when its frames must all be drawn the
    general way (frame sinks, saving, or a staged GPU tensor). ``protocols``: the write/read
    protocols of the layout's panels, booked every frame."""
    if session.sinks.items or session.pacing.saving:
        return None
    for panel in session.panels:
        if panel.error:
            continue
        for live, _ in getattr(panel, "inputs", ()):
            if live.copies:
                return None
    return FramePlan(session, protocols)


class FramePlan:
    """The steady frame of one session's layout (see the module docstring)."""

    def __init__(self, session, protocols):
        canvas = session.canvas
        self.session, self.canvas, self.device, self.window = session, canvas, session.device, session.window
        self.budget, self.pacing, self.history = session.budget, session.pacing, session.history
        self.frame = session.frame  # the loop's flags (.frame_state), one object for the session's life
        self.protocols = list(protocols)
        self.panels = list(session.panels)
        live = [p for p in self.panels if not p.error]
        self.reading = [p for p in live if p.protocol is not None]
        # the user's tensors, held weakly: one no longer reachable (a panel gone stale) is left out
        self.tensors = [(inp.ref, inp.fingerprint) for p in live for inp, _ in getattr(p, "inputs", ())
                        if inp.ref() is not None]
        drawables = [p.drawable for p in canvas.panels]
        self.strips = [d for d in drawables if isinstance(d, TextStrip)]
        self.views = [d for d in drawables if not isinstance(d, TextStrip)]
        self.finishes = [(d, d.finish) for d in drawables if d.finish is not None]
        self.layout = None if self.history is None else self.history._layout
        self.reads = [canvas._reads_recorder.handle]
        self.rest = [canvas._recorder.handle]
        self.structs: dict = {}  # the history's copy command buffer (or None) -> submit structs

    def step(self, step: int | None) -> bool | None:
        """Draw the steady frame; None when a check failed or the window had input (the general path
        draws instead, from Session.step).
        One function: each call on this path costs microseconds cache-cold."""
        session = self.session
        frame = self.frame
        canvas = self.canvas
        window = self.window
        if (session.canvas is not canvas or session.failed or session.paused or frame.layout_due
                or frame.read_back_next or (window is not None and (not window.alive or window.resized))):
            return None
        protocols = self.protocols
        for protocol in protocols:
            if protocol.depth:
                return None  # a producer is mid-write: the general path skips and asks for a gap
        for ref, fingerprint in self.tensors:
            tensor = ref()
            if tensor is None or (tensor.data_ptr(), tensor.shape) != fingerprint:
                return None  # unreachable, or the storage moved: the general path says so
        inflight = frame.inflight
        if inflight and not self.device.is_done(canvas._serial):
            return None  # the general path counts the skip
        budget, pacing = self.budget, self.pacing  # Session.step has entered the budget's span
        if window is not None:
            events = window.poll()
            if events or not window.alive or window.resized:  # input, a closed or resized window
                window_input.handle(session, events)
                return None  # Session.step runs the general path (its poll finds nothing new)
        step = session.step_count = session.step_count + 1 if step is None else int(step)
        if inflight:  # Session._collect's steady case: no frame to save, no sinks
            for view, finish in self.finishes:
                if not getattr(view, "unchanged", False):
                    finish()  # its counters (a view's unchanged inputs give the last ones again)
            canvas.frames += 1
            if canvas.profiler is not None and budget.share is not None:
                budget.executed(canvas.gpu_ms() / 1000)
            frame.inflight = False
            session.frames += 1
            pacing.frame_times.append(time.perf_counter() - pacing.submit_time)  # Pacing.completed
        if (pacing.max_fps and pacing.within_interval()) or (
                budget.share is not None and not budget.allows()):
            pacing.held += 1  # as the general path: drawn recently enough, or over budget
            return False
        render_thread = threading.get_ident()
        for protocol in protocols:
            protocol.render_thread = render_thread
        if window is not None and not acquire_image(session):
            return False
        reading = self.reading
        booked = book_reads(reading) if reading else []
        if booked is None:  # a write began after the check (another thread's)
            session.skipped += 1
            return False
        now = time.perf_counter()
        if now - frame.status_time > 0.25 or session.message != frame.status_message:
            refresh_chrome(session, now)  # the status line and every title: a few times a second
        else:
            for panel in self.panels:  # update_titles' steady case: one compare a panel
                if getattr(panel.view, "stats", None) != panel.title_stats:
                    update_titles((panel,), False)  # its warning counts may have changed
        pacing.submit_time = now  # Pacing.submitted
        for panel in reading:  # before the views prepare and the history keeps (as _step)
            panel.view.data_version = (panel.protocol.writes, step)
        try:
            stale = not canvas._recorded  # Canvas.prepare; a strip's unchanged text seen without a call
            for view in self.views:
                view.prepare()
                stale = stale or view.stale
            for strip in self.strips:
                if strip._drawn != strip._version or strip.stale:
                    strip.prepare()
                    stale = stale or strip.stale
            if stale:
                self.device.wait()  # the command buffers may still be executing
                canvas._record()  # the same command buffers, recorded again
            kept = self.history.keep(step, reading, self.layout) if self.history else None
            kept = kept[0] if kept else None
            key = kept
            if window is not None:  # the presentation after the frame, with its binary semaphores
                present, (acquired, done) = window.present_commands(), window.frame_semaphores
                key = (kept, present, acquired, done)
            structs = self.structs.get(key)
            if structs is None:
                if len(self.structs) >= MAX_STRUCTS:
                    self.structs.clear()
                reads = self.reads if kept is None else [*self.reads, kept]
                rest = (self.rest, (), ()) if window is None else (
                    [*self.rest, present], [(acquired, 0)], [(done, 0)])
                structs = self.structs[key] = build_submit(
                    [(reads, [b[0] for b in booked], [b[1] for b in booked]), rest])
            wait_values, signal_values = structs[1][0]
            i = 0
            for wait, signal in booked:
                wait_values[i] = wait[1]
                signal_values[i] = signal[1]
                i += 1
            canvas._serial = self.device.submit_built(structs[0], 2)
            canvas.read_back_serial = None
            canvas._prepared = False
            if window is not None:
                window.present()
        except Exception as exc:  # a Vulkan error must not stop training
            session.fault(exc)
            for panel, (_, signal) in zip(reading, booked, strict=True):
                panel.protocol.abandon(signal)  # no producer may wait for it forever
            return False
        frame.inflight = True
        frame.sink_step = None
        session.drawn_step = step
        return True
