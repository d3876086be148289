"""The write/read protocol of one attached tensor (docs/contract.md).

One :class:`WriteRead` per attached tensor orders the producer's writes and
the renderer's reads with one timeline semaphore: the producer's write *k* is
signalled as ``2k+1`` (``panel.writing()`` on exit, or the frame on behalf of
a loop that writes without it); frame *k* waits for ``2k+1`` on the GPU,
reads, and signals ``2k+2``; ``panel.writing()`` waits for ``2k+2`` before
letting the producer overwrite. It knows nothing of the session: the session
books reads (:meth:`WriteRead.begin_read`) and tells it when drawing stopped.
"""

from __future__ import annotations

import contextlib
import threading
import time


class WriteRead:
    """Writes and reads of one attached tensor, ordered on ``timeline``.

    Parameters
    ----------
    timeline : engine.TimelineSemaphore
        The semaphore the frames wait on and signal.
    sync : object or None
        The exporter's producer-side sync (``before_write(v)``, ``after_write(read_v, v)``);
        None: the producer waits and signals on the host.
    ordered : bool
        False turns the protocol off (the negative control that shows torn frames).
    mirrored : bool
        The renderer reads a copy refreshed in ``sync.after_write`` (CUDA on-device copy).
    """

    def __init__(self, timeline, sync=None, ordered: bool = True, mirrored: bool = False):
        self.timeline, self.sync, self.ordered, self.mirrored = timeline, sync, ordered, mirrored
        self.stopped = False  # drawing stopped for good: producers never wait again
        self.render_thread: int | None = None  # the thread that books reads (step())
        self._lock = threading.Lock()
        self._turn = threading.Condition(self._lock)
        self.writing_now = False
        self.want_read = False  # the renderer (on another thread) is waiting for a gap
        self._writes = 0  # producer writes signalled (value 2k+1 for write k)
        self._reads = 0  # frames submitted that read this tensor (signal 2k+2 for read k)
        self.wait_s = 0.0  # the producer's total wait
        self.writes = 0  # writes through writing()

    @contextlib.contextmanager
    def writing(self):
        """The producer's side: wait until no frame reads the tensor, write, mark it ready."""
        if not self.ordered or self.stopped:
            yield  # no frame will read it (after a renderer fault none ever will): no wait
            return
        with self._lock:
            if self.want_read and threading.get_ident() != self.render_thread:
                # a renderer thread found us mid-write last time: let it book its read
                # first (bounded, so a renderer that stopped calling step() costs little)
                self._turn.wait_for(lambda: not self.want_read, timeout=0.05)
            target = 2 * self._reads  # every submitted read has finished at this value
            self.writing_now = True
        t0 = time.perf_counter()
        if self.sync is not None:
            self.sync.before_write(target)  # CUDA: queued on the stream, no CPU wait
        else:
            self.timeline.wait(target)
        self.wait_s += time.perf_counter() - t0
        self.writes += 1  # writes through writing(): new values, unlike a redraw
        try:
            yield
        finally:
            with self._lock:
                self.writing_now = False
                if self._writes == self._reads:  # the next read has no data signalled yet
                    self._signal_write()

    def begin_read(self) -> tuple | None:
        """Wait/signal values for this frame's read, or None to skip this frame."""
        with self._lock:
            if self.ordered and self.writing_now:
                return None  # the producer is writing: drawing now would tear
            if self._writes == self._reads:
                # no new write signalled since the last read: the memory is as it is now
                self._signal_write()
            k = self._reads
            self._reads += 1
            self.want_read = False
            self._turn.notify_all()
            return (self.timeline, 2 * k + 1), (self.timeline, 2 * k + 2)

    def cancel_read(self, wait: tuple) -> None:
        """A booked read that will not be submitted: mark it done."""
        sem, value = wait
        sem.signal(value + 1)

    def _signal_write(self) -> None:
        """Signal write k (``2k+1``): from the host, or after the producer's GPU work."""
        k2 = 2 * self._writes
        # unordered (the negative control) signals from the host, except that a CUDA
        # mirror's copy is always made on the stream
        if self.sync is not None and (self.ordered or self.mirrored):
            self.sync.after_write(k2, k2 + 1)  # CUDA mirror: the on-device copy happens here
        else:
            self.timeline.signal(k2 + 1)
        self._writes += 1

    def ask_for_gap(self) -> None:
        """The renderer found the producer mid-write: ask it to leave a gap next time."""
        if self.writing_now:
            self.want_read = True

    def close(self) -> None:
        """Close the producer-side sync (CUDA's import first), then the timeline."""
        if self.sync is not None:
            self.sync.close()
        self.timeline.close()
