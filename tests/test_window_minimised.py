"""A minimised window (GLFW on Win32 reports a 0x0 framebuffer) and a suboptimal swapchain, under Xvfb.

X11 never reports 0x0, so the test gives the window what Win32 gives it: the framebuffer-size
event with 0x0 and a framebuffer size of 0x0 until it is restored. GLFW's event wait is made to
fail the test: a training step must never sleep in it.
"""

import shutil
import time

import numpy as np
import pytest
import torch

import caliper_vk as cv
from images import assert_same_image
from test_window import rgb, screenshot
from xvfb import xvfb

pytestmark = pytest.mark.skipif(shutil.which("Xvfb") is None,
                                reason="Xvfb is not installed (apt-get install xvfb)")


@pytest.fixture(scope="module")
def display():
    with xvfb() as name:
        yield name


def never_wait():
    raise AssertionError("a training step waited in glfw.wait_events() for the window")


def session():
    s = cv.Session(window=True, size=(480, 320), max_fps=None, budget=None)
    t = cv.empty((1500, 3))
    t.copy_(torch.randn(1500, 3))
    panel = s.attach(t, "pointcloud", name="emb", labels=np.arange(1500) % 10)
    return s, t, panel


def test_minimised_window_skips_steps_without_waiting_then_draws_again(display, monkeypatch, artifacts):
    import glfw

    monkeypatch.setattr(glfw, "wait_events", never_wait)
    s, t, panel = session()
    with s:
        s.render()
        assert s.step() is True  # a frame in flight when the window is minimised
        real_size = glfw.get_framebuffer_size
        handle = s.window.handle
        monkeypatch.setattr(glfw, "get_framebuffer_size",
                            lambda win: (0, 0) if win == handle else real_size(win))
        on_size = s.window._callbacks[-1]
        on_size(handle, 0, 0)  # what GLFW's Win32 backend sends when the window is minimised
        assert s.window.minimised() and not s.due()
        drawn, skipped = s.frames, s.skipped
        for k in range(20):
            with panel.writing():  # the producer is never held up by the frame in flight either
                t.copy_(torch.randn(1500, 3) * (k + 1))
            assert s.step() is False
        assert s.skipped == skipped + 20
        assert s.frames == drawn + 1  # the frame in flight when it was minimised, collected
        assert s.window.recreate() is False and s.window.resized  # nothing built, asked again later

        monkeypatch.setattr(glfw, "get_framebuffer_size", real_size)
        on_size(handle, *real_size(handle))  # restored
        assert s.step() is True  # the swapchain rebuilt and the frame drawn in the same step
        assert not s.window.resized
        frame = s.render()
        assert frame.shape[:2] == (320, 480)
        assert_same_image(rgb(screenshot(display, s)), frame, artifacts)
        assert s.device.instance.validation_errors == []


def test_suboptimal_acquire_draws_and_presents_then_recreates(display, artifacts):
    import vulkan as vk

    s, _, _ = session()
    with s:
        s.render()
        acquire = s.window._acquire
        suboptimal = []

        def moltenvk_on_resize(*args):  # MoltenVK: the image is acquired and the result is SUBOPTIMAL
            acquire(*args)
            suboptimal.append(args[-1][0])
            raise vk.VkSuboptimalKhr()

        s.window._acquire = moltenvk_on_resize
        s.device.wait()
        time.sleep(0.02)
        assert s.step() is True  # the acquired image is drawn and presented, not dropped
        assert suboptimal and s.window.resized
        s.window._acquire = acquire
        s.device.wait()
        swapchain = s.window.swapchain
        assert s.step() is True and s.window.swapchain != swapchain  # rebuilt after the present
        frame = s.render()
        assert_same_image(rgb(screenshot(display, s)), frame, artifacts)
        assert s.device.instance.validation_errors == []
