"""Rewind in a live window under Xvfb: ← shows the kept frame on screen, End goes back to live."""

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


def screen(display, session):
    from PIL import ImageGrab

    time.sleep(0.2)  # let the X server finish the presentation
    shot = np.asarray(ImageGrab.grab(xdisplay=display))
    x, y = session.window.position()
    r = session.panels[0].view.rect
    return shot[y + r.y:y + r.y + r.height, x + r.x:x + r.x + r.width, :3]


def test_rewind_keys_show_the_kept_frame_in_the_window(artifacts):
    import glfw

    with xvfb() as display, cv.Session(window=True, size=(400, 260), max_fps=None, history="4MB",
                                       budget=None) as s:
        t = cv.empty((800, 3))
        p = s.attach(t, "pointcloud", name="emb")
        shots = {}
        for step in (1, 2, 3):
            with p.writing():
                t.copy_(torch.randn(800, 3) * step)
            assert s.step(step)
            s.flush()
            shots[step] = screen(display, s)
        assert not np.array_equal(shots[2], shots[3])
        s.window.events.append(Event("key", code=glfw.KEY_LEFT))
        assert s.step(4) and s.paused  # ← pauses and draws kept step 2
        s.flush()
        assert_same_image(screen(display, s), shots[2], artifacts / "step2")
        assert "step 2 (kept)" in "".join(i[0] for i in p.label.right if isinstance(i, tuple))
        s.window.events.append(Event("key", code=glfw.KEY_END))
        with p.writing():
            t.copy_(torch.randn(800, 3))
        assert s.step(5) and not s.paused and s.history.steps()[-1] == 5
        assert s.device.instance.validation_errors == []
