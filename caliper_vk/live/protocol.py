"""The write/read protocol of one attached tensor (docs/contract.md).

One :class:`WriteRead` per attached tensor orders the producer's writes and
the renderer's reads on one timeline semaphore whose values only ever rise.
Values are handed out from one counter, in the order the events are issued:

- **every write's exit** takes a fresh value and signals it when the write is
  complete (``sync.after_write``: from the host for CPU tensors, after
  ``torch.mps.synchronize()`` on MPS, on torch's stream for CUDA — where the
  write may finish long after ``writing()`` returned);
- **a frame** takes a fresh value ``r``, waits on the GPU for ``r - 1`` (the
  latest value handed out before it, so the latest write it saw), reads, and
  signals ``r``. A frame with no write's exit since the last one first signals
  a fresh value for the memory as it is (``after_write`` again: on CUDA it is
  ordered after the work queued so far; a mirrored tensor is copied there) —
  except where writes are complete when the producer's code returns (host
  memory: ``complete_on_return``), where ``r - 1`` is simply the last frame's
  read value;
- **a producer about to overwrite** waits for the latest value handed out,
  which covers every frame still reading (host wait, or a stream wait on CUDA).

Every signal is issued after the signal of the value below it (the producer
holds ``writing_now`` while its exit is issued, and the frame books under the
lock), and each waits for that value, so the timeline never moves backwards —
also when frames are skipped mid-write or several writes fall between two
frames. The object knows nothing of the session: the session books reads
(:func:`book_reads`) and sets :attr:`stopped` when drawing stopped for good.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time

ABANDON_TIMEOUT_NS = 1_000_000_000


class WriteRead:
    """Writes and reads of one attached tensor, ordered on ``timeline``.

    Parameters
    ----------
    timeline : engine.TimelineSemaphore
        The semaphore the frames wait on and signal.
    sync : object
        The exporter's producer-side sync: ``before_write(v)`` (wait until the timeline reaches
        ``v``) and ``after_write(read_v, v)`` (the write is complete: signal ``v``; a mirror is
        first refreshed after ``read_v``). See :mod:`caliper_vk.exporters.live_input`.
    ordered : bool
        False turns the protocol off (the negative control that shows torn frames).
    mirrored : bool
        The renderer reads a copy refreshed in ``sync.after_write`` (CUDA on-device copy).
    """

    def __init__(self, timeline, sync, ordered: bool = True, mirrored: bool = False):
        self.timeline, self.sync, self.ordered, self.mirrored = timeline, sync, ordered, mirrored
        self._complete_on_return = getattr(sync, "complete_on_return", False) and not mirrored
        self.stopped = False  # drawing stopped for good: producers never wait again
        self.render_thread: int | None = None  # the thread that books reads (step())
        self.lock = threading.Lock()
        self._turn = threading.Condition(self.lock)
        self._producer = threading.RLock()  # one write at a time (nested writing() is fine)
        self.depth = 0  # writing() blocks entered and not yet left (the frame loop reads it)
        self.want_read = False  # the renderer (on another thread) is waiting for a gap
        self.value = 0  # the latest value handed out; the timeline reaches each in order
        self.written = False  # a write's exit was signalled since the latest read was booked
        self.read_value = 0  # the value the latest booked read signals (a frame's, the renderer's)
        self.wait_s = 0.0  # the producer's total wait
        self.writes = 0  # writes through writing()
        # CUDA: raises when a frame would be booked during graph capture (else None)
        # MPS: signals a frame's own value with no device sync (only for producers that write
        # through writing(), whose exits synchronise); else None
        self._unchanged = getattr(sync, "unchanged", None)
        self.refuse_capture = getattr(sync, "refuse_capture", None)

    @property
    def writing_now(self) -> bool:
        return self.depth > 0

    def signals_exit(self) -> bool:
        """Whether this write's exit signals a fresh value: always. (Signalling only the first
        write after a read — the old ``2k+1`` rule — lets a frame read while a later write's
        queued work still runs; the asynchronous-producer tests show it tearing.)"""
        return True

    @contextlib.contextmanager
    def writing(self):
        """The producer's side: wait until no frame reads the tensor, write, signal the write."""
        if not self.ordered or self.stopped:
            yield  # no frame will read it (after a renderer fault none ever will): no wait
            return
        with self._producer:
            with self.lock:
                if self.want_read and threading.get_ident() != self.render_thread:
                    # a renderer thread found us mid-write last time: let it book its read
                    # first (bounded, so a renderer that stopped calling step() costs little)
                    self._turn.wait_for(lambda: not self.want_read, timeout=0.05)
                target = self.value  # every frame booked so far has finished reading here
                self.depth += 1
            t0 = time.perf_counter()
            try:
                self.sync.before_write(target)  # CUDA: queued on the stream, no CPU wait
            except BaseException:  # refused (CUDA graph capture) or failed: no write, no value
                with self.lock:
                    self.depth -= 1
                raise
            self.wait_s += time.perf_counter() - t0
            try:
                self.writes += 1  # writes through writing(): new values, unlike a redraw
                yield
            finally:
                self._exit()

    def _exit(self) -> None:
        with self.lock:
            value = None
            if self.signals_exit():
                self.value += 1
                value = self.value
                self.written = True
        try:
            if value is not None:
                # outside the lock (MPS synchronizes here), still flagged as writing: no frame
                # books a value meanwhile, so the signals are issued in the order of their values
                self.sync.after_write(value - 1, value)
        finally:
            with self.lock:
                self.depth -= 1

    def book_read(self) -> tuple:
        """(wait, signal) of this frame's read; call with :attr:`lock` held and no write open."""
        if not self.written and not (self.ordered and self._complete_on_return):
            # no write's exit since the last read: draw the memory as it is now, ordered after
            # the work queued so far (a loop writing without writing(); CUDA mirror: the copy).
            # Host memory needs no such value: its writes are complete when the producer's code
            # returns, so the frame waits for the latest value handed out (its last read's).
            self.value += 1
            if self.ordered and self.writes and self._unchanged is not None and not self.mirrored:
                self._unchanged(self.value)  # MPS: the writes were synchronised at their exits
            elif self.ordered or self.mirrored:
                self.sync.after_write(self.value - 1, self.value)
            else:
                self.timeline.signal(self.value)  # the negative control: from the host, unordered
        self.value += 1
        self.read_value = self.value
        self.written = False
        if self.want_read:  # a producer may be waiting for this read (none waits otherwise)
            self.want_read = False
            self._turn.notify_all()
        return (self.timeline, self.value - 1), (self.timeline, self.value)

    def abandon(self, read: tuple) -> None:
        """A booked read whose frame was never submitted (the submit failed): signal its value
        once the one below it is reached, so no producer waits for it forever."""
        timeline, value = read
        with contextlib.suppress(Exception):
            if timeline.wait(value - 1, ABANDON_TIMEOUT_NS) and timeline.value < value:
                timeline.signal(value)

    def stop(self) -> None:
        """Drawing stopped for good (a renderer fault, a lost device): producers never wait
        again, and every value a producer's stream may already wait on (the latest booked
        read's; the producer signals its own exits itself) is reached. The frames booked so far
        get :data:`ABANDON_TIMEOUT_NS` to signal it; otherwise (the device is lost, or a frame
        was never submitted) an exporter that can (CUDA: ``sync.release``) signals it from its
        own side, so training never hangs on a renderer that is gone."""
        self.stopped = True
        release = getattr(self.sync, "release", None)
        with self.lock:
            value = self.read_value  # what the renderer owes; the producer signals its own values
        if release is None or value == 0:
            return
        with contextlib.suppress(Exception):  # a lost device raises here
            if self.timeline.value >= value or self.timeline.wait(value, ABANDON_TIMEOUT_NS):
                return
        try:
            release(value)
        except Exception as exc:  # nothing more can be done; say so rather than hang silently
            print(f"caliper: could not release the producer's stream after the fault ({exc})",
                  file=sys.stderr)

    def ask_for_gap(self) -> None:
        """The renderer found the producer mid-write: ask it to leave a gap next time."""
        if self.writing_now:
            self.want_read = True


def book_reads(panels) -> list | None:
    """Book one frame's reads of every panel's protocol at once, or None (and book nothing)
    when a producer is inside ``writing()`` of any of them: drawing now would tear. The locks
    are taken in the given order (producers only ever hold one), so nothing is booked and then
    cancelled — a cancelled value could not be signalled without moving a timeline backwards.

    Per frame and panel: plain loops (a comprehension is a call of its own).

    A CUDA panel refuses a frame booked while torch's stream captures a CUDA graph
    (``CudaGraphCaptureError``, raised before anything is booked)."""
    for panel in panels:
        refuse = panel.protocol.refuse_capture
        if refuse is not None:
            refuse()
    held = []
    try:
        open_write = False
        for panel in panels:
            p = panel.protocol
            p.lock.acquire()
            held.append(p.lock)
            if p.ordered and p.depth:
                open_write = True
        if open_write:
            for panel in panels:
                p = panel.protocol
                if p.ordered and p.depth:
                    p.ask_for_gap()
            return None
        booked = []
        for panel in panels:
            booked.append(panel.protocol.book_read())
        return booked
    finally:
        for lock in reversed(held):
            lock.release()
