"""Faults while a real training loop draws and records: the window closed, the display lost,
a view raising inside step(), a Vulkan error, Ctrl-C.

The loop is a small MLP whose 3-unit hidden layer is drawn live as a point cloud (through
``panel.writing()``) beside its first weight matrix (a parameter that requires grad, drawn in
place), recorded by ``Recorder`` + ``watch``. Whatever breaks in drawing, training must run every
step (or stop cleanly when the user asks), nothing may raise into the loop or make a producer
wait forever, the session must say what happened, and the run must load afterwards with every
step's loss.

The display-loss and Ctrl-C cases run the loop in a child process (this file run as a script):
killing an X server, or interrupting, must not reach the test process.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
import vulkan as vk

import caliper_vk as cv
from caliper_vk.record import load_run

STEPS = 80
FAULT_AT = 30
SIZE = (120, 90)
needs_xvfb = pytest.mark.skipif(shutil.which("Xvfb") is None,
                                reason="Xvfb is not installed (apt-get install xvfb)")


def train(session, run_dir, steps=STEPS, on_step=None, say=None):
    """A tiny classifier; its hidden 3-D representation drawn live, every step recorded."""
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = (x[:, 0] + x[:, 1] > 0).long() + (x[:, 2] > 1).long()
    nn = torch.nn
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3), nn.Tanh(), nn.Linear(3, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    emb = cv.empty((256, 3))
    cloud = session.attach(emb, "pointcloud", name="emb", labels=y)
    session.attach(model[0].weight, "heatmap", name="w0")  # read in place; the optimizer updates it
    with cv.Recorder(run_dir) as rec:
        cv.watch(model, opt, rec, histograms_every=None)
        for i in range(1, steps + 1):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.log(train_loss=loss)
            with torch.no_grad(), cloud.writing():
                emb.copy_(model[:4](x))
            session.step()
            if say:
                say(i)
            if on_step:
                on_step(i)
    return rec


def assert_every_step_recorded(run_dir, steps=STEPS, status="complete"):
    run = load_run(run_dir)
    assert run.status == status, run.status
    loss = run.metrics["train/loss"]
    np.testing.assert_array_equal(loss.step, np.arange(1, steps + 1))
    assert np.isfinite(loss.value).all() and loss.value[-1] < loss.value[0]  # it trained
    np.testing.assert_array_equal(run.metrics["grad_norm/global"].step, np.arange(1, steps + 1))
    return run


@pytest.fixture(autouse=True)
def no_hang():
    """A producer waiting forever for a frame that never comes would hang the suite: fail loudly."""
    faulthandler.dump_traceback_later(300, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


class Once:
    """Wraps ``real`` to raise ``error`` on call ``at`` (or on every call from ``at`` on)."""

    def __init__(self, real, error, at=1, always=False):
        self.real, self.error, self.at, self.always, self.calls = real, error, at, always, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.at or (self.always and self.calls > self.at):
            raise self.error
        return self.real(*args, **kwargs)


def inject_view_prepare(mp, session, always):
    view = session.panels[0].view
    mp.setattr(view, "prepare", Once(view.prepare, RuntimeError("view bug"), always=always))


def inject_view_record(mp, session, always):
    view = session.panels[0].view
    mp.setattr(view, "record", Once(view.record, RuntimeError("view bug"), always=always))
    view.stale = True  # record() runs when the canvas re-records


def inject_submit_error(which):
    """VK_ERROR_DEVICE_LOST from the frame's submission (one vkQueueSubmit of two batches:
    the reads of the tensors, then the rest of the frame), from call ``which`` on."""
    def inject(mp, session, always):
        # submit_built: what the frame plan and the general path's submit_batches both call
        mp.setattr(session.device, "submit_built",
                   Once(session.device.submit_built, vk.VkErrorDeviceLost(), at=which, always=always))
    return inject


@pytest.mark.parametrize("inject, what, always", [
    (inject_view_prepare, "RuntimeError", False),
    (inject_view_record, "RuntimeError", True),
    (inject_submit_error(1), "VkErrorDeviceLost", False),
    (inject_submit_error(1), "VkErrorDeviceLost", True),
], ids=["view-prepare-raises-once", "view-record-raises-always", "vulkan-error-submit-once",
        "vulkan-error-submit-always"])
def test_a_renderer_error_stops_drawing_not_training(tmp_path, capsys, monkeypatch, inject, what, always):
    with cv.Session(window=False, size=SIZE, budget=None) as s:  # every step draws: faults come at once
        seen = {}

        def on_step(i):
            if i == FAULT_AT:
                seen["frames"] = s.frames
                inject(monkeypatch, s, always)
            elif i > FAULT_AT:
                assert s.step() is False  # further calls neither raise nor draw

        train(s, tmp_path / "run", on_step=on_step)
        assert s.failed and what in s.failed
        line = s.status().line()
        assert f"renderer error: {what}; drawing stopped" in line, line
        assert s.frames <= seen["frames"] + 1
    assert capsys.readouterr().err.count("drawing failed") == 1
    assert_every_step_recorded(tmp_path / "run")


def test_a_panel_whose_refresh_raises_stops_alone(tmp_path, capsys):
    with cv.Session(window=False, size=SIZE, budget=None) as s:  # every frame it can: counts frames
        seen = {}

        def on_step(i):
            if i == FAULT_AT:
                weight = s.panels[1].inputs[0][0].ref()  # the attached parameter itself
                with torch.no_grad():
                    weight.set_(weight.clone())  # the weights moved: the panel's refresh raises
                seen["frames"] = s.frames

        train(s, tmp_path / "run", on_step=on_step)
        moved = "w0's storage was resized, replaced or reshaped while attached"
        assert s.panels[1].error.startswith(moved) and s.panels[0].error is None
        assert f"w0: stopped ({moved}" in s.status().line()
        assert s.failed is None and s.frames > seen["frames"] + 10  # the other panel keeps drawing
    assert capsys.readouterr().err.count(f"caliper: {moved}") == 1
    assert_every_step_recorded(tmp_path / "run")


# -- windows ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def display():
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed (apt-get install xvfb)")
    from xvfb import xvfb  # tests/ (pytest puts it on the path)

    with xvfb() as name:
        yield name


def close_window(mp, session):
    import glfw

    glfw.set_window_should_close(session.window.handle, True)


def lose_surface(mp, session):
    window = session.window
    mp.setattr(window, "_queue_present", Once(window._queue_present, vk.VkErrorSurfaceLostKhr(), always=True))


def acquire_fails(mp, session):
    mp.setattr(session.window, "acquire", Once(session.window.acquire, vk.VkErrorDeviceLost(), always=True))


@pytest.mark.parametrize("inject, message, window", [
    (close_window, "window closed; drawing stopped", "window closed"),
    (lose_surface, "display lost; drawing stopped", "display lost"),
    (acquire_fails, "renderer error: VkErrorDeviceLost; drawing stopped", "window"),
], ids=["window-closed", "surface-lost", "vulkan-error-on-acquire"])
def test_window_faults_let_training_finish(display, tmp_path, capsys, monkeypatch, inject, message, window):
    with cv.Session(window=True, size=SIZE, budget=None) as s:  # every step draws: faults come at once
        seen = {}

        def on_step(i):
            if i == FAULT_AT:
                seen["frames"] = s.frames
                inject(monkeypatch, s)

        train(s, tmp_path / "run", on_step=on_step)
        st = s.status()
        assert message in st.line() and st.window == window, (st.line(), st.window)
        assert s.frames <= seen["frames"] + 2
    err = capsys.readouterr().err
    assert err.count("training continues") == 1, err
    assert_every_step_recorded(tmp_path / "run")


# -- in a child process: the X server killed, Ctrl-C ------------------------------------------------------
def child(mode, run_dir, *more):
    return subprocess.Popen([sys.executable, "-X", "faulthandler", __file__, mode, str(run_dir), *more],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_step(proc, step, timeout=120):
    deadline = time.time() + timeout
    acked = 0
    while acked < step and time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("step "):
            acked = int(line.split()[1])
    return acked


@needs_xvfb
def test_display_lost_mid_run_training_finishes(tmp_path):
    from xvfb import xvfb

    with xvfb() as name:
        proc = child("window", tmp_path / "run")
        assert wait_for_step(proc, FAULT_AT) >= FAULT_AT, proc.stderr.read()[-2000:]
        name.server.kill()  # the X server dies; the child keeps training
        name.server.wait()
        out, err = proc.communicate("go\n", timeout=120)  # the child waits for this at step FAULT_AT
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err
    assert "caliper: the display was lost; training continues without drawing" in err
    assert "display lost; drawing stopped" in out and "window: display lost" in out, out[-2000:]
    assert_every_step_recorded(tmp_path / "run")


def test_ctrl_c_stops_cleanly_and_keeps_every_completed_step(tmp_path):
    proc = child("headless", tmp_path / "run", "100000")
    acked = wait_for_step(proc, FAULT_AT)
    assert acked >= FAULT_AT, proc.stderr.read()[-2000:]
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err
    stopped = int(out.split("stopped at step ")[1].split()[0])
    assert stopped >= acked
    run = load_run(tmp_path / "run")
    assert run.status == "interrupted"
    loss = run.metrics["train/loss"]
    # every loss logged before the interrupt: steps 1..k with no gap (the step under way when
    # Ctrl-C came may have its optimizer update recorded but not yet its loss)
    np.testing.assert_array_equal(loss.step, np.arange(1, len(loss.step) + 1))
    assert len(loss.step) >= acked and len(loss.step) >= stopped - 1
    assert len(run.metrics["grad_norm/global"].step) in (len(loss.step), len(loss.step) + 1)


def main(mode, run_dir, steps=STEPS):
    """The child: train with a window (``window``) or offscreen (``headless``); Ctrl-C stops it
    cleanly (the recorder marks the run interrupted) with exit status 130."""
    def say(i):
        print(f"step {i}", flush=True)
        if mode == "window" and i == FAULT_AT:
            sys.stdin.readline()  # the parent kills the X server, then lets training go on

    session = cv.Session(window=mode == "window", size=SIZE, budget=None)
    try:
        train(session, run_dir, steps=int(steps), say=say)
    except KeyboardInterrupt:
        print(f"stopped at step {session.step_count} at the user's request", flush=True)
        session.close()
        return 130
    st = session.status()
    print(f"status: {st.line()}\nwindow: {st.window}", flush=True)
    session.close()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("CALIPER_VK_VALIDATION", "1")
    sys.exit(main(*sys.argv[1:]))
