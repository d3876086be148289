"""The write/read protocol against an asynchronous producer, on lavapipe.

A CUDA producer's ``writing()`` returns as soon as its kernels are *queued*;
the write finishes later on the stream, and the stream signals the Vulkan
timeline from the GPU (``cuSignalExternalSemaphoresAsync``) and waits on it
(``cuWaitExternalSemaphoresAsync``). Here a worker thread stands in for that
stream: :class:`SimulatedStream` is the producer-side sync the exporter hands
out (the interface of ``cuda.StreamSync``), and its queue runs waits, slow
fills and signals in order, late, signalling the timeline from the host.

The training loop writes several times between steps (each write fills the
whole tensor with one value) and calls ``step()``, which skips while a frame is
in flight; the heatmap's stats pass reports the min and max each frame read.
With the protocol every frame is untorn (min == max). The negative control
restores the old rule — only the first write after a frame signals (``2k+1``)
— and must tear, so these tests can fail.
"""

import queue
import random
import threading
import time

import pytest
import torch

import caliper_vk as cv
from caliper_vk.exporters import cpu
from caliper_vk.live.protocol import WriteRead

FRAMES = 2000
NEGATIVE_FRAMES = 500
ROWS, COLS = 32, 64
DEPTH = 12  # operations a stream holds queued before the producer's next launch blocks


class SimulatedStream:
    """A device stream on a worker thread: queued waits, fills and timeline signals run in order."""

    host_sync = False

    def __init__(self, timeline):
        self.timeline = timeline
        self.ops = queue.Queue(maxsize=DEPTH)  # a full launch queue blocks the producer, as CUDA's does
        self.signals = 0
        self.stuck = []
        self.backwards = []
        self.worker = threading.Thread(target=self._run, daemon=True)
        self.worker.start()

    def _run(self):
        while (op := self.ops.get()) is not None:
            kind, arg = op
            if kind == "wait":  # cuWaitExternalSemaphoresAsync: later work waits for the renderer
                self._wait(arg)
            elif kind == "signal":  # cuSignalExternalSemaphoresAsync: from the host, when reached
                if self.timeline.value >= arg:
                    self.backwards.append((self.timeline.value, arg))
                    continue  # (Vulkan forbids it; a CUDA stream would hang on its next wait)
                self.timeline.signal(arg)
                self.signals += 1
            else:  # a kernel that writes the tensor in pieces, finishing late
                tensor, value = arg
                for row in range(0, tensor.shape[0], 4):
                    tensor[row:row + 4].fill_(value)
                    time.sleep(0)  # let the renderer run mid-write

    def _wait(self, value):
        """Wait for the timeline to reach ``value``, as a device does: polling, not blocking in
        the driver (lavapipe's emulated timeline holds its lock through a host wait, so a frame
        that waits on the same timeline could not start until the host wait ends)."""
        deadline = time.monotonic() + 10
        while self.timeline.value < value:
            if time.monotonic() > deadline:
                self.stuck.append(value)  # a value nobody signals: the protocol would hang a stream
                return
            time.sleep(0.0001)

    # the producer-side sync interface the protocol drives (as cuda.StreamSync)
    def before_write(self, value):
        self.ops.put(("wait", value))

    def after_write(self, read_value, value):
        self.ops.put(("signal", value))

    def fill(self, tensor, value):
        self.ops.put(("fill", (tensor, float(value))))

    def close(self):
        self.ops.put(None)
        self.worker.join(timeout=10)
        self.timeline.close()


@pytest.fixture
def simulated_streams(monkeypatch):
    """The exporters hand out a SimulatedStream where they would hand out a host sync."""
    made = []

    def stream(timeline):
        made.append(SimulatedStream(timeline))
        return made[-1]

    monkeypatch.setattr(cpu, "HostSync", stream)
    yield made
    for s in made:
        s.close()


def write(panel, stream, t, gen):
    """One write: two launches (each half of the tensor) queued under ``writing()``; it returns
    once they are queued, long before the stream has run them."""
    with panel.writing():
        stream.fill(t[: ROWS // 2], gen)
        time.sleep(0)  # the host between two launches: a renderer thread may find us mid-write
        stream.fill(t[ROWS // 2 :], gen)


def run_async(frames: int, threaded: bool, seed: int = 0):
    """Draw ``frames`` frames of a tensor an asynchronous producer keeps rewriting.

    ``threaded=False``: the training loop writes 0-4 times, then calls ``step()`` (which skips
    while a frame is in flight). ``threaded=True``: a producer thread writes without pause
    while the renderer thread steps (skips also fall mid-write)."""
    rng = random.Random(seed)
    t = cv.empty((ROWS, COLS), dtype=torch.float32)
    seen, writes = [], [0]
    with cv.Session(window=False, size=(32, 32), budget=None) as s:  # every frame it can
        panel = s.attach(t, "heatmap", name="gen")
        stream = panel.protocol.sync
        assert isinstance(stream, SimulatedStream)
        done = threading.Event()

        def produce():
            while not done.is_set():
                writes[0] += 1
                write(panel, stream, t, writes[0])

        producer = threading.Thread(target=produce, daemon=True) if threaded else None
        if producer:
            producer.start()
        last = s.frames
        try:
            while len(seen) < frames:
                for _ in range(0 if threaded else rng.choice((0, 1, 2, 3, 4))):  # several, or none
                    writes[0] += 1
                    write(panel, stream, t, writes[0])
                if not s.step() and threaded:
                    time.sleep(0.0001)  # a display-paced renderer: let the producer run
                if s.frames != last:
                    last = s.frames
                    seen.append(panel.view.seen_range)
        finally:
            done.set()
            if producer:
                producer.join(timeout=10)
        s.flush()
        counts = {"frames": len(seen), "writes": writes[0], "skipped": s.skipped,
                  "signals": stream.signals, "timeline": panel.semaphore.value,
                  "torn": sum(r[0] != r[1] for r in seen)}
        assert stream.stuck == [], f"the stream waited in vain for {stream.stuck}"
        assert stream.backwards == [], f"the timeline would have moved backwards: {stream.backwards[:5]}"
    return seen, counts


@pytest.mark.parametrize("threaded", [False, True], ids=["loop", "thread"])
def test_async_producer_never_tears_with_the_protocol(simulated_streams, threaded):
    seen, counts = run_async(FRAMES, threaded)
    print("async producer:", counts)
    assert counts["frames"] >= FRAMES and counts["writes"] >= 2 * FRAMES, counts
    assert counts["skipped"] > 0, "no step was skipped: the test did not exercise skips"
    torn = [r for r in seen if r[0] != r[1]]
    assert torn == [], f"{len(torn)} torn frames of {len(seen)}, first {torn[:3]}"
    assert len({r[0] for r in seen}) > FRAMES // 4, "the renderer kept showing stale data"


@pytest.mark.parametrize("threaded", [False, True], ids=["loop", "thread"])
def test_async_negative_control_tears_under_the_old_rule(simulated_streams, monkeypatch, threaded):
    # the old rule: a write's exit signals only when no write was signalled since the last frame
    monkeypatch.setattr(WriteRead, "signals_exit", lambda self: not self.written)
    _, counts = run_async(NEGATIVE_FRAMES, threaded)
    print("async producer, old rule:", counts)
    assert counts["torn"] > 0, (f"no torn frame in {counts['frames']} frames under the old rule: the test "
                                "cannot tell the protocol works")


class RecordingStream:
    """What a stream sync is asked to queue, in order: ("wait", v), ("copy",), ("signal", v).
    ``mirror``: a CUDA on-device copy (the producer's own tensor is never waited for)."""

    def __init__(self, mirror=False):
        self.timeline, self.mirror, self.log = "timeline", mirror, []

    def before_write(self, value):
        if not self.mirror:
            self.log.append(("wait", value))

    def after_write(self, read_value, value):
        if self.mirror:
            self.log += [("wait", read_value), ("copy",)]
        self.log.append(("signal", value))


def test_async_stream_sync_gets_every_write_signalled_in_order():
    """Two writes between frames each queue a wait for everything handed out and a fresh signal
    (as cuda.StreamSync queues them on torch's stream); the frame waits for the second write's
    value; a write after it waits for the frame's read value."""
    stream = RecordingStream()
    protocol = WriteRead(stream.timeline, stream)
    for _ in range(2):
        with protocol.writing():
            pass
    with protocol.lock:
        (_, wait), (_, signal) = protocol.book_read()
    with protocol.writing():
        pass
    assert (wait, signal) == (2, 3)
    assert stream.log == [("wait", 0), ("signal", 1), ("wait", 1), ("signal", 2), ("wait", 3), ("signal", 4)]


def test_async_mirror_is_copied_after_the_last_read_and_at_a_frame_without_writes():
    stream = RecordingStream(mirror=True)
    protocol = WriteRead(stream.timeline, stream, mirrored=True)
    with protocol.lock:
        (_, wait), (_, signal) = protocol.book_read()  # no write yet: the frame refreshes the copy
    with protocol.writing():  # the producer's own tensor: its entry waits for nothing
        pass
    assert (wait, signal) == (1, 2)
    assert stream.log == [("wait", 0), ("copy",), ("signal", 1), ("wait", 2), ("copy",), ("signal", 3)]
