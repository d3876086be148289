"""The live window under Xvfb: what is on screen equals the rendered canvas, byte for byte."""

import shutil
import time

import numpy as np
import pytest
import torch

import caliper_vk as cv
from caliper_vk.engine.window import Event
from images import assert_same_image
from xvfb import xvfb

pytestmark = pytest.mark.skipif(shutil.which("Xvfb") is None,
                                reason="Xvfb is not installed (apt-get install xvfb)")


@pytest.fixture(scope="module")
def display():
    with xvfb() as name:
        yield name


def screenshot(display, session):
    from PIL import ImageGrab

    time.sleep(0.2)  # let the X server finish the presentation
    shot = np.asarray(ImageGrab.grab(xdisplay=display))
    x, y = session.window.position()
    h, w = session.canvas.height, session.canvas.width
    return shot[y:y + h, x:x + w]


def make_session(tmp_path):
    s = cv.Session(window=True, size=(480, 320), out_dir=tmp_path, budget=None)  # steps draw (max_fps aside)
    t = cv.empty((1500, 3))
    t.copy_(torch.randn(1500, 3))
    s.attach(t, "pointcloud", name="emb", labels=np.arange(1500) % 10)
    s.attach(torch.randn(16, 16), "heatmap", name="attn", colormap="magma")
    return s


def resize(s, width: int, height: int) -> None:
    """Resize the window and wait until the session's window has seen it (or 0.4 s passed)."""
    import glfw

    glfw.set_window_size(s.window.handle, width, height)
    for _ in range(20):
        glfw.poll_events()
        time.sleep(0.02)
        if s.window.resized:
            break


def rgb(a):
    return np.concatenate([a[..., :3], np.full((*a.shape[:2], 1), 255, np.uint8)], axis=2)


def test_screenshot_equals_canvas(display, tmp_path, artifacts):
    with make_session(tmp_path) as s:
        frame = s.render()
        assert_same_image(rgb(screenshot(display, s)), frame, artifacts)
        assert_same_image(frame, s.canvas.reference(), artifacts / "twin")
        assert s.status().window == "window" and s.max_fps == 60  # a display shows no more
        assert s.device.instance.validation_errors == []


def test_resize_relayouts_and_still_matches(display, tmp_path, artifacts):
    with make_session(tmp_path) as s:
        s.render()
        resize(s, 600, 420)
        s.step()
        frame = s.render()
        assert frame.shape[:2] == (420, 600)
        assert_same_image(rgb(screenshot(display, s)), frame, artifacts)
        assert s.device.instance.validation_errors == []


def test_mouse_and_keys(display, tmp_path):
    with make_session(tmp_path) as s:
        s.render()
        cloud = s.panels[0].view
        r = cloud.rect
        x, y = r.x + r.width / 2, r.y + r.height / 2
        yaw0, pitch0, zoom0 = cloud.camera
        s.window.events += [Event("drag", x=x, y=y, dx=50, dy=10), Event("scroll", x=x, y=y, dy=2)]
        s.render()
        yaw1, pitch1, zoom1 = cloud.camera
        assert yaw1 == pytest.approx(yaw0 + 20) and pitch1 == pytest.approx(pitch0 + 4)
        assert zoom1 == pytest.approx(zoom0 * 1.21)
        s.window.events.append(Event("key", x=x, y=y, key="r"))
        s.render()
        assert cloud.camera == (yaw0, pitch0, zoom0)
        s.window.events.append(Event("key", key="s"))
        s.step()
        assert list(tmp_path.glob("caliper_*.png")), "S saves a PNG into the session folder"
        s.window.events.append(Event("key", key="space"))
        assert s.step() is False and s.status().paused
        s.window.events.append(Event("key", key="space"))
        s.flush()
        time.sleep(1 / 30)  # past the 60 fps interval a window keeps
        assert s.step() is True


def test_closing_the_window_lets_training_continue(display, tmp_path, capsys):
    import glfw

    with make_session(tmp_path) as s:
        s.render()
        glfw.set_window_should_close(s.window.handle, True)
        assert s.step() is False
        assert s.step() is False  # and again, quietly
        err = capsys.readouterr().err
        assert err.count("the window was closed; training continues without drawing") == 1
        assert s.status().window == "window closed"


def test_planned_frames_are_shown_and_input_or_a_resize_go_the_general_way(display, tmp_path, artifacts,
                                                                          monkeypatch):
    """The frame plan (caliper_vk/live/plan.py) draws a window's steady frames; a step with input
    or after a resize runs the general path (Session._step), then the plan again."""
    from caliper_vk.live import Session

    general = []
    step = Session._step
    monkeypatch.setattr(Session, "_step", lambda self, i: general.append(i) or step(self, i))

    def steady(s):
        s.device.wait()
        general.clear()
        assert s.step()
        return list(general)

    with cv.Session(window=True, size=(480, 320), max_fps=None, budget=None) as s:
        t = cv.empty((1500, 3))
        panel = s.attach(t, "pointcloud", name="emb", labels=np.arange(1500) % 10)
        s.render()
        for k in range(3):
            with panel.writing():
                t.copy_(torch.randn(1500, 3) * (k + 1))
            assert steady(s) == []  # the plan's
        frame = s.flush()
        assert_same_image(rgb(screenshot(display, s)), frame, artifacts / "planned")
        assert_same_image(frame, s.canvas.reference(), artifacts / "planned-twin")
        r = panel.view.rect
        s.window.events.append(Event("scroll", x=r.x + r.width / 2, y=r.y + r.height / 2, dy=2))
        zoom = panel.view.camera[2]
        assert steady(s) == [None] and panel.view.camera[2] == pytest.approx(zoom * 1.21)
        assert steady(s) == []
        resize(s, 600, 420)
        assert steady(s) == [None]  # the general path lays out the new size
        assert steady(s) == []
        frame = s.flush()
        assert frame.shape[:2] == (420, 600)
        assert_same_image(rgb(screenshot(display, s)), frame, artifacts / "resized")
        assert_same_image(frame, s.canvas.reference(), artifacts / "resized-twin")
        assert s.device.instance.validation_errors == []
