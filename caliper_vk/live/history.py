"""Rewind: the input bytes of recently drawn frames, kept in device memory.

A live view shows only the present; :class:`History` keeps the past. Every
frame a session draws also copies each attached panel's input — the bytes the
view read, in their stored dtype — into a ring of device buffers, with one
``vkCmdCopyBuffer`` per input recorded into a command buffer that runs in the
frame's *reads* batch (:meth:`caliper_vk.engine.Canvas.submit`,
``reads_extra``). That batch waits for the producer's write and signals the
frame's read value, so the copy sees exactly the bytes the view drew and the
producer may overwrite the tensor as soon as the copy is done: no host round
trip on the GPU paths, no CPU wait. An input the renderer stages (its bytes
are on the host every frame anyway) is copied from the view's own staging
buffer, which the canvas writes before the history keeps the frame
(``Canvas.prepare``), in the same command buffer: its bytes cross to the
device once.

The ring is a list of equal *chunks* (device-local buffers, made as they are
first needed) that together hold the byte budget; a frame's inputs are packed
into one chunk. When the ring is full the oldest chunk is reused and the
frames in it are dropped, so between 15/16 and all of the budget is kept.

Showing a kept step (:meth:`History.redraw`) reads its bytes back to the host
once (a rewind is not on the training path), puts them in place of each
panel's source — the same :class:`~caliper_vk.views._source.Source` objects the
views read, so every view redraws through its ordinary staging path — draws
one frame without touching the live tensors (no read is booked; training goes
on writing them), and puts the live sources back. The views are byte-exact
functions of their input, so the kept frame equals the live frame of that
step; what a view drew with that is not a function of its input (a histogram's
overlay of older steps, a point cloud's camera and host labels/values) is kept
with the step when the view ``keeps_state`` (``kept_state()``, a reference) and
handed back for the rewound frame (``show_kept``).

:mod:`caliper_vk.live.input` maps space, ←/→, Home and End here; the status
line's place shows a timeline scrubber while a kept step is shown.
"""

from __future__ import annotations

import re
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .. import chrome
from ..engine import Buffer
from ..engine.commands import Recorder
from . import history_copy
from .history_copy import Layout, RingCopies, layout_key, make_layout
from .memory import megabytes
from .panels import Panel
from .status import title_items

DEFAULT_BUDGET = "64MB"
CHUNKS = 16  # the ring's chunks; reusing the oldest drops at most 1/16 of the budget
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20,
          "gib": 2**30}
_SCRUB_WIDTH = 240


def parse_budget(value, name: str = "history") -> int:
    """Bytes from a budget: an int, ``"256MB"``, ``"1.5GiB"``, ``"0"``; None or 0 is off.
    ``name``: the parameter, for the error message."""
    if value is None or value is False:
        return 0
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{name} budget must be >= 0 bytes, got {value}")
        return int(value)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmg]i?b|b)?\s*", str(value), re.IGNORECASE)
    if m is None:
        raise ValueError(f"{name}={value!r} is not a byte budget; give bytes (an int) or a string "
                         "such as '256MB', '1GiB' (0 or None: "
                         + ("no history)" if name == "history" else "no limit)"))
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])




@dataclass
class Frame:
    """One kept frame: its step, the chunk holding it, where it starts there, and its inputs."""

    step: int
    chunk: int
    nbytes: int
    inputs: tuple = ()
    versions: dict = field(default_factory=dict)  # panel name -> the view's data_version
    base: int = 0  # the frame's first byte in its chunk
    states: dict = field(default_factory=dict)  # panel name -> the view's kept_state() (if any)


class History:
    """The ring of kept frames of one session (see the module docstring).

    Parameters
    ----------
    device : engine Device
        Borrowed; the ring's buffers live on it.
    budget : int or str
        Bytes the ring may hold (:func:`parse_budget`).
    """

    def __init__(self, device, budget, cap: int | None = None):
        self.device = device
        self.budget = parse_budget(budget)
        # Session(device_memory=): the ring allocates a chunk only while all the device memory
        # Caliper holds stays within this (it stops growing at the chunks it has)
        self.cap = cap
        self.frames: deque[Frame] = deque()
        self.chunks: list[Buffer | None] = []
        self.chunk_size = 0
        self._chunk = -1  # the chunk being filled
        self._fill = 0  # bytes used in it
        self._total = 0  # the frame size _place() last placed
        self._recorder: Recorder | None = None
        self._layout: Layout | None = None  # the kept inputs' places, while the panels stay
        self._copies: tuple | None = None  # (layout, staging buffers, RingCopies or None, plan)
        self.position: int | None = None  # index into frames being shown; None: live
        self._shown: tuple | None = None  # (step, arrays) last read back
        self.redraw_due = False
        self._canvas = None  # the canvas the shown step was last drawn on
        self.refused = ""  # why the last frame was not kept
        self.copy_s = 0.0  # host time spent recording copies (bench)
        self._own: dict = {}  # Source -> the history's own buffer of an input no view stages

    # -- keeping -------------------------------------------------------------------------
    @property
    def nbytes(self) -> int:
        return sum(f.nbytes for f in self.frames)

    def keep(self, step: int, panels, planned=None) -> list:
        """Record the copies of ``panels``' inputs for the frame about to be submitted at
        ``step``; returns the command buffers for its reads batch (empty when nothing is
        kept). Call only when no earlier frame is still in flight. ``planned``: the layout
        a frame plan (:mod:`.plan`) found still holding, which spares its key.

        It runs every frame: the common case (the same layout, room left in the chunk being
        filled, copies recorded) stays in this one function."""
        if self.position is not None:
            return []  # a kept frame is being shown: nothing new is drawn from live memory
        try:
            t0 = time.perf_counter()
            layout = self._layout
            if layout is None or layout is not planned:
                key = layout_key(panels)
                if layout is None or layout.key != key:
                    layout = self._layout = make_layout(key, panels)
            total = layout.total
            if not total:
                return []
            if total > self.budget:
                self.refused = (f"a frame's inputs take {megabytes(total)}, over the "
                                f"{megabytes(self.budget)} budget; raise history=")
                return []
            if self.cap is not None and self.chunks and self.device.memory_stats["allocated_bytes"] > self.cap:
                self.clear()  # Caliper is over device_memory= (a panel's buffers): the ring gives way
                self.device.collect()  # no frame in flight: its chunks go now
            self.refused = ""
            frames = self.frames
            if frames and frames[-1].step == step:
                frames.pop()  # the step drawn again (render()): keep its latest frame
            if self._chunk >= 0 and total == self._total and self._fill + total <= self.chunk_size:
                self._fill += total  # room in the chunk being filled (what _place would find)
                chunk = self._chunk
            else:
                chunk = self._place(total)
                if chunk is None:
                    self.refused = (f"no room for a {megabytes(self.chunk_size)} chunk under "
                                    f"device_memory={megabytes(self.cap)}")
                    return []
            base = self._fill - total
            versions, states = {}, {}
            for p in panels:
                versions[p.name] = p.view.data_version
                if p.view.keeps_state:
                    states[p.name] = p.view.kept_state()
            frame = Frame(step, chunk, total, layout.inputs, versions, base, states)
            # staged inputs are copied from the views' own staging buffers, written this frame
            # (the canvas prepares before the history keeps): the copies hold while they are the same
            staged = self._staged(layout) if layout.staged else ()
            copies = self._copies  # (layout, staging buffers, RingCopies or None, plan)
            if copies is not None and copies[2] is not None and copies[0] is layout and copies[1] == staged:
                handle = copies[2].commands(chunk, self.chunks[chunk], base)  # recorded: the common case
            else:
                handle = self._commands(layout, staged, chunk, base)
            frames.append(frame)
            self.copy_s += time.perf_counter() - t0
            return [handle]
        except Exception as exc:  # the ring failed (out of device memory): drawing goes on
            self.refused = f"{type(exc).__name__}: {exc}"
            return []

    def _staged(self, layout: Layout) -> tuple:
        """The buffer each staged input of ``layout`` is copied from: the view's staging buffer,
        or, for an input the view does not stage as it is (it draws a host transform of it: a
        row-normalised confusion matrix draws the shares, not the counts), a host-visible buffer
        of the history's own that the input's bytes are written to now. Those bytes were read by
        the view's ``prepare`` this frame (on the training thread, before the history keeps), so
        the kept frame holds what was drawn; no earlier copy is in flight (see :meth:`keep`)."""
        out = []
        for _, source in layout.staged:
            buf = source.staged
            if buf is None:
                buf = self._own.get(source)
                if buf is None or buf.size < max(4, source.nbytes):
                    if buf is not None:
                        buf.close()
                    buf = self._own[source] = Buffer(self.device, max(4, source.nbytes))
                buf.write(source.raw())
            out.append(buf)
        if len(self._own) > len(out):  # inputs no longer in the layout: their buffers go
            for source in [x for x in self._own if all(x is not s for _, s in layout.staged)]:
                self._own.pop(source).close()
        return tuple(out)

    def _commands(self, layout: Layout, staged: tuple, chunk: int, base: int):
        """This frame's copies: the layout's recorded ones (:mod:`.history_copy`) where they can
        be, else ``vkCmdCopyBuffer``s recorded now. ``staged``: the staging buffers of the
        layout's staged inputs, in order."""
        dst = self.chunks[chunk]
        copies = self._copies
        if copies is None or copies[0] is not layout or copies[1] != staged:
            if copies is not None and copies[2] is not None:
                copies[2].close()
            plan = [(s.imported, s.imported.offset, k.nbytes, k.offset)
                    for k, s in zip(layout.inputs, layout.sources, strict=True) if s.imported is not None]
            plan += [(buf, 0, k.nbytes, k.offset) for (k, _), buf in zip(layout.staged, staged, strict=True)]
            if self.chunk_size // layout.total <= history_copy.TRANSFER_PLACES:  # few, large frames
                ring = RingCopies(self.device, plan, transfers=True)
            else:
                ring = RingCopies(self.device, plan) if RingCopies.usable(self.device, plan, self.chunk_size) \
                    else None
            copies = self._copies = (layout, staged, ring, plan)
        if copies[2] is not None:
            return copies[2].commands(chunk, dst, base)
        rec = (self._recorder or self._new_recorder()).begin()
        for src, offset, nbytes, at in copies[3]:
            rec.copy_buffer(src, dst, nbytes, offset, base + at)
        rec.end()
        return rec.handle

    def drop_layout(self) -> None:
        """Forget the kept inputs' layout and its recorded copies (the session's panels changed:
        the layout holds them, and a detached panel's memory must not outlive its close)."""
        if self._copies is not None and self._copies[2] is not None:
            self._copies[2].close()
        self._copies = self._layout = None
        for buf in self._own.values():
            buf.close()
        self._own = {}

    def _new_recorder(self) -> Recorder:
        self._recorder = Recorder(self.device)
        return self._recorder

    def _place(self, total: int) -> int | None:
        """The chunk that takes the next ``total`` bytes (dropping the oldest frames there);
        None when there is no chunk and no room under :attr:`cap` for one."""
        self._total = total  # keep() finds room in the same chunk without this call
        size = max(total, self.budget // CHUNKS)
        if size != self.chunk_size:  # the first frame, or frames grew past a chunk: start over
            self.clear()
            self.chunk_size = size
            self.chunks = [None] * max(1, self.budget // size)
        if self._chunk < 0 or self._fill + total > self.chunk_size:
            following = (self._chunk + 1) % len(self.chunks)
            if self.chunks[following] is None and not self._room():
                # chunks are made in ring order, so those made are the first ones: the ring
                # keeps to them (its oldest frames give way) instead of growing past the cap
                made = [c for c in self.chunks if c is not None]
                if not made:
                    return None
                self.chunks, following = made, 0
            self._chunk = following
            self._fill = 0
            while self.frames and self.frames[0].chunk == self._chunk:
                self.frames.popleft()  # the oldest frames give their chunk up
            if self.chunks[self._chunk] is None:
                self.chunks[self._chunk] = Buffer(self.device, self.chunk_size, host_visible=False)
        self._fill += total
        return self._chunk

    def _room(self) -> bool:
        return self.cap is None or self.device.memory_stats["allocated_bytes"] + self.chunk_size <= self.cap

    def clear(self) -> None:
        """Drop every kept frame and free the ring (deferred until the GPU is done)."""
        self.frames.clear()
        for b in self.chunks:
            if b is not None:
                b.close()
        self.chunks, self.chunk_size, self._chunk, self._fill = [], 0, -1, 0
        self.position, self._shown = None, None

    # -- reading back ----------------------------------------------------------------------
    def steps(self) -> list[int]:
        return [f.step for f in self.frames]

    def frame(self, step: int) -> Frame:
        for f in self.frames:
            if f.step == step:
                return f
        kept = self.steps()
        where = f"steps {kept[0]}–{kept[-1]}" if kept else "nothing yet"
        raise KeyError(f"step {step} is not kept (the history holds {where}); rewind to a kept step "
                       "or raise history= to keep more")

    def arrays(self, frame: Frame) -> dict:
        """``{(panel name, input index): array}`` of a kept frame (one read back, waits)."""
        if self._shown is not None and self._shown[0] is frame:
            return self._shown[1]
        self.device.wait()
        back = Buffer(self.device, frame.nbytes, readback=True)
        rec = Recorder(self.device)
        try:
            rec.begin()
            rec.barrier()
            rec.copy_buffer(self.chunks[frame.chunk], back, frame.nbytes, frame.base, 0)
            rec.host_barrier()
            rec.end()
            self.device.wait(self.device.submit([rec.handle]))
            out = {}
            for k in frame.inputs:
                raw = back.array[k.offset: k.offset + k.nbytes].copy()
                out[(k.panel, k.index)] = raw.view(np.dtype(k.np_dtype)).reshape(k.shape)
        finally:
            rec.close()
            back.close()
        self._shown = (frame, out)
        return out

    # -- showing a kept step -----------------------------------------------------------------
    def show(self, step: int | None) -> None:
        """Show kept ``step`` from the next frame on (None: back to live)."""
        if step is None:
            self.position, self._shown = None, None
        else:
            self.position = self.steps().index(self.frame(step).step)
        self.redraw_due = True

    def move(self, by: int) -> None:
        """One kept frame back (``by=-1``) or on; from live, ← shows the frame before the last."""
        if not self.frames:
            return
        last = len(self.frames) - 1
        at = last if self.position is None else self.position
        self.position = max(0, min(last, at + by))
        self.redraw_due = True

    def summary(self) -> str:
        """What is kept, for the status line: ``history: steps 760–1000, 96 MB``."""
        if self.refused:
            return f"history: nothing kept ({self.refused})"
        if not self.frames:
            return f"history: empty ({megabytes(self.budget)} budget)"
        return f"history: steps {self.frames[0].step}–{self.frames[-1].step}, {megabytes(self.nbytes)}"

    def scrubber(self) -> tuple[list, list]:
        """Status-bar items while a kept step is shown: the step, a timeline, the keys."""
        frame = self.frames[self.position]
        steps = np.array(self.steps(), np.int64)
        lo, hi = int(steps[0]), int(steps[-1])
        w = _SCRUB_WIDTH
        px = (steps - lo) * (w - 1) // max(hi - lo, 1)
        colors = np.full(w, 0x302A2A, np.int64)  # steps not kept: dark
        colors[px] = 0x8C8282  # kept steps: grey
        at = int((frame.step - lo) * (w - 1) // max(hi - lo, 1))
        colors[max(0, at - 1): at + 2] = 0x46BEFF  # the shown step (amber, packed ABGR)
        left = [(f"◄ step {frame.step} ► ", chrome.WARNING), (f"{lo} ", chrome.DIM),
                chrome.Ramp(tuple(int(c) for c in colors), w), (f" {hi}", chrome.DIM)]
        right = [(f"{self.position + 1}/{len(self.frames)} kept, {megabytes(self.nbytes)} · ←/→ · End: live",
                  chrome.DIM)]
        return left, right

    def redraw(self, session) -> bool:
        """Draw the shown kept step (once per change — :meth:`show`, :meth:`move` — or when
        the canvas was made anew: a resized window)."""
        if self.position is None or not self.frames:
            return False
        if not self.redraw_due and session.canvas is self._canvas and not session.frame.read_back_next:
            return False  # shown already (render() asks for a frame anyway)
        frame = self.frames[self.position]
        arrays = self.arrays(frame)
        swapped = []
        try:
            for panel in session.panels:
                if isinstance(panel, Panel) and not panel.error:
                    swapped.append(_swap_in(panel, arrays, frame))
            _title(session.panels, frame.step)
            session.status_bar.set_items(*self.scrubber())
            drawn = _submit(session)
        except Exception as exc:  # a Vulkan error must not stop training
            session.fault(exc)
            drawn = False
        finally:
            for restore in swapped:
                restore()
            session.frame.status_time = -1.0  # the live status line comes back at the next frame
        if drawn:
            self.redraw_due, self._canvas = False, session.canvas
        return drawn

    def close(self) -> None:
        self.clear()
        if self._recorder is not None:
            self._recorder.close()
            self._recorder = None
        self.drop_layout()


class Rewind:
    """The session's rewind controls (mixed into :class:`~caliper_vk.live.Session`, whose
    ``history`` is a :class:`History` or None)."""

    history: History | None
    paused: bool

    def rewind(self, step: int) -> None:
        """Pause and show kept ``step`` (drawn at the next ``step()``/``render()``)."""
        if self.history is None:
            raise RuntimeError("this session keeps no history; open it with Session(history='256MB')")
        self.history.show(step)
        self.paused = True

    def live(self) -> None:
        """Back to the live view (End in the window)."""
        if self.history is not None:
            self.history.show(None)
        self.paused = False

    def save_history(self, run):
        """Write the kept frames as array probes into a run (a ``Recorder`` or a new run folder);
        returns the run folder."""
        from .history_save import save_history

        return save_history(self, run)


def _swap_in(panel, arrays: dict, frame: Frame):
    """Put the kept bytes in place of ``panel``'s sources; returns what puts them back.
    A panel attached after the step has nothing kept: it shows zeros, and its title says so."""
    saved = [(s, s.array, s.imported, s.live) for _, s in panel.inputs]
    version = panel.view.data_version
    missing = False
    for i, (_, source) in enumerate(panel.inputs):
        a = arrays.get((panel.name, i))
        if a is None or a.shape != source.array.shape or a.dtype != source.array.dtype:
            a = np.zeros_like(source.array)
            missing = True
        source.array, source.imported, source.live = a, None, True
    panel.view.data_version = frame.versions.get(panel.name, version)
    panel._history_missing = missing
    restore_view = panel.view.show_kept(frame.states.get(panel.name))

    def restore():
        for source, array, imported, live in saved:
            source.array, source.imported, source.live = array, imported, live
        panel.view.data_version = version
        panel._history_missing = False
        restore_view()
    return restore


def _title(panels, step: int) -> None:
    """Every panel's title states the step it shows."""
    for panel in panels:
        left, right = title_items(panel)
        if isinstance(panel, Panel):
            note = (f"step {step}: not kept  ", chrome.ERROR) if getattr(panel, "_history_missing", False) \
                else (f"step {step} (kept)  ", chrome.WARNING)
        else:
            note = ("live (host-fed, not kept)  ", chrome.DIM)
        panel.label.set_items(left, [note, *right])  # first on the right: it is cut last


def _submit(session) -> bool:
    """One frame from the swapped sources: no read is booked (the live tensors are not read)."""
    window = session.window
    extra, binary_wait, binary_signal = [], [], []
    if window is not None:
        if not window.acquire():
            return False
        extra = [window.present_commands()]
        acquired, done = window.frame_semaphores
        binary_wait, binary_signal = [(acquired, 0)], [(done, 0)]
    session.canvas.submit(extra=extra, extra_wait=binary_wait, extra_signal=binary_signal,
                          readback=session.frame.read_back_next)
    if window is not None:
        window.present()
    session.frame.inflight = True
    return True
