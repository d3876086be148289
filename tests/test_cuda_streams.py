"""CUDA streams, graph capture, faults and the WDDM flush, on the checked stand-in.

- A write's wait and its exit's signal go on the stream current at ``writing()`` entry,
  whatever stream the body switched to (else the signal is ordered after nothing: torn
  writes, a timeline that can move backwards).
- Under CUDA graph capture ``writing()`` and a frame refuse with a sentence that says why
  and what to do; nothing is queued on the capturing stream (the stand-in fails the test if
  a semaphore operation is).
- A renderer fault with the device lost reaches every value a CUDA stream already waits on
  (from a stream of Caliper's own), so the producer's stream does not wait forever.
- Every queued wait and signal is followed by ``cuStreamQuery`` of its stream (what submits
  it under Windows' WDDM), counted.
"""

import threading

import pytest
import torch

import caliper_vk as cv
from caliper_vk.exporters import cuda
from checked_cuda import CheckedDriver, driver_installed, install, stand_in
from images import assert_panel_matches_twin


@pytest.fixture
def drv(device, monkeypatch):
    if "VK_KHR_external_memory_fd" not in device.extensions:
        pytest.skip(f"{device.info.name} lacks VK_KHR_external_memory_fd")
    if driver_installed():
        pytest.skip("a CUDA driver is installed: the checked calls would reach it (tests/hardware runs here)")
    return install(monkeypatch, CheckedDriver(device), device)


def _semaphore_ops(drv, start=0):
    """(Wait|Sign, value, stream) of every semaphore operation logged from ``start`` on."""
    return [(e[0][2:6], int(e[2][0].params.fence.value), int(e[4])) for e in drv.log[start:]
            if e[0].endswith("SemaphoresAsync")]


def test_wait_and_signal_stay_on_the_stream_of_writing_entry(drv, monkeypatch, artifacts):
    with cuda.Gpu.get(drv, 0).current():
        other = int(cuda.call(drv, "cuStreamCreate", 0))
    current = [drv.stream]
    monkeypatch.setattr(cuda, "current_stream", lambda torch_device: current[0])
    t = cv.empty((16, 16), device="cuda")
    with cv.Session(window=False, size=(64, 64)) as s:
        panel = s.attach(t, "heatmap", name="x")
        s.render()
        start = len(drv.log)
        with panel.writing():
            current[0] = other  # the body switches streams (with torch.cuda.stream(s): ...)
            t.copy_(torch.arange(256, dtype=torch.float32).reshape(16, 16))
        ops = _semaphore_ops(drv, start)
        assert [(op, stream) for op, _, stream in ops] == [("Wait", drv.stream), ("Sign", drv.stream)]
        current[0] = drv.stream
        assert_panel_matches_twin(s.render(), panel, t, artifacts)
    with cuda.Gpu.get(drv, 0).current():
        cuda.call(drv, "cuStreamDestroy", cuda.driver().CUstream(other))


def test_graph_capture_is_refused_with_the_fix_and_queues_nothing(drv, artifacts):
    t = cv.empty((16, 16), device="cuda")
    with cv.Session(window=False, size=(64, 64)) as s:
        panel = s.attach(t, "heatmap", name="x")
        s.render()
        start, value = len(drv.log), panel.protocol.value
        drv.capturing = True
        with pytest.raises(cuda.CudaGraphCaptureError, match=r"panel\.writing\(\) ran while .* capturing"):
            with panel.writing():
                pass
        with pytest.raises(cuda.CudaGraphCaptureError, match=r"graph\.replay\(\)"):
            s.render()  # the frame would signal a value on the capturing stream
        assert _semaphore_ops(drv, start) == [] and panel.protocol.value == value
        assert panel.protocol.depth == 0 and not s.failed  # nothing half done; drawing goes on
        drv.capturing = False
        with panel.writing():
            t.copy_(torch.arange(256, dtype=torch.float32).reshape(16, 16) - 100)
        assert_panel_matches_twin(s.render(), panel, t, artifacts)


def test_every_wait_and_signal_is_flushed(drv):
    t = cv.empty((8, 8), device="cuda")
    with cv.Session(window=False, size=(32, 32)) as s:
        panel = s.attach(t, "heatmap", name="x")
        for k in range(3):
            with panel.writing():
                t.fill_(float(k))
            s.render()
        s.render()  # no write since the last frame: the frame's own signal, flushed too
        ops = _semaphore_ops(drv)
        assert len(ops) == 3 * 2 + 1
        assert drv.flushes() == len(ops)


class _LostTimeline:
    """The panel's timeline as the renderer sees it once the device is lost: host waits and
    signals fail (CUDA's imported copy, held by the stand-in, still works)."""

    def __init__(self, timeline):
        self.timeline, self.lost = timeline, False

    def __getattr__(self, name):
        return getattr(self.timeline, name)

    def wait(self, value, timeout_ns=None):
        if self.lost:
            raise RuntimeError("VK_ERROR_DEVICE_LOST")
        return self.timeline.wait(value, timeout_ns)

    def signal(self, value):
        if self.lost:
            raise RuntimeError("VK_ERROR_DEVICE_LOST")
        self.timeline.signal(value)


@pytest.mark.parametrize("mirrored", [False, True])
def test_a_lost_device_releases_the_values_cuda_waits_on(drv, monkeypatch, mirrored):
    # zero-copy: the write's entry waits for the frame's read; mirrored: its exit does
    t = stand_in(torch.zeros(8, 8)) if mirrored else cv.empty((8, 8), device="cuda")
    with cv.Session(window=False, size=(32, 32)) as s:
        panel = s.attach(t, "heatmap", name="x")
        assert panel.record.mirrored == mirrored
        s.render()
        lost = _LostTimeline(panel.protocol.timeline)
        panel.protocol.timeline = lost
        errors, threads, mark = [], [], len(drv.log)

        def producer():
            try:
                with panel.writing():
                    t.fill_(1.0)
            except BaseException as exc:
                errors.append(exc)

        def submit_then_lose(*args, **kwargs):
            threads.append(threading.Thread(target=producer))
            threads[0].start()
            for _ in range(500):  # until the producer's stream waits on the booked read
                if any(e[0] == "cuWaitExternalSemaphoresAsync" for e in drv.log[mark:]):
                    break
                threading.Event().wait(0.01)
            lost.lost = True
            raise RuntimeError("VK_ERROR_DEVICE_LOST")

        monkeypatch.setattr(s.device, "submit_built", submit_then_lose)
        monkeypatch.setattr(s.device, "submit_batches", submit_then_lose)
        assert not s.step()  # the frame fails: drawing stops, training goes on
        threads[0].join(10)
        assert not threads[0].is_alive() and errors == []  # the wait was released: no deadlock
        assert s.failed and "VK_ERROR_DEVICE_LOST" in s.failed
        assert drv.streams  # released from a stream of Caliper's own
        with panel.writing():  # stopped: no wait any more
            t.fill_(2.0)
        monkeypatch.undo()
        install(monkeypatch, drv, s.device)
        lost.lost = False
        panel.protocol.timeline = lost.timeline
    assert not drv.streams  # its stream was destroyed with the panel
