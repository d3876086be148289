"""Ctrl-C at the worst moment: a KeyboardInterrupt raised just after a frame was submitted,
before the session (or the device) wrote down that it was in flight. Whatever is waited for
and destroyed afterwards (flush, save_png, close) must still wait for that frame: the suite's
validation layer fails the test if a buffer or descriptor pool is destroyed while in use.

(The digits demo's Ctrl-C test hit this by chance on a CI run: 11 "currently in use by a
command buffer" errors in its process.)
"""

import types

import numpy as np
import pytest
import torch

import caliper_vk
from caliper_vk.engine import device as device_module
from caliper_vk.live import Session

SIZE = (320, 200)


def _session_with_a_cloud():
    s = Session(window=False, size=SIZE, budget=None, history=None)
    pts = caliper_vk.empty((400, 3))
    panel = s.attach(pts, "pointcloud", name="cloud", labels=np.arange(400) % 10)
    with panel.writing():
        pts.copy_(torch.randn(400, 3, generator=torch.Generator().manual_seed(0)))
    s.render()
    return s


def test_interrupt_after_the_frames_submit_is_waited_for_before_close(tmp_path, monkeypatch):
    s = _session_with_a_cloud()
    real = s.device.submit_batches
    submitted = []

    def interrupted(batches):
        submitted.append(real(batches))
        raise KeyboardInterrupt  # as if Ctrl-C arrived as the submit returned

    monkeypatch.setattr(s.device, "submit_batches", interrupted)
    with pytest.raises(KeyboardInterrupt):
        s.render()  # a frame that reads back (a demo's saved frame): flush then trusts it
    monkeypatch.undo()
    assert submitted and not s.frame.inflight  # the session never learnt the frame was in flight
    frame = s.flush()  # what the demo does after Ctrl-C: flush, save, close
    assert frame.shape == (SIZE[1], SIZE[0], 4)
    s.save_png(tmp_path / "final.png")
    s.close()
    assert (tmp_path / "final.png").stat().st_size > 0


def test_interrupt_inside_the_devices_submit_leaves_no_untracked_work(monkeypatch):
    """The narrower window: vkQueueSubmit returned, the fence was not yet recorded."""
    s = _session_with_a_cloud()
    lost = []
    real_vk = device_module.vk

    class Lib:
        def __getattr__(self, name):
            return getattr(real_vk.lib, name)

        @staticmethod
        def vkQueueSubmit(*args):
            lost.append(real_vk.lib.vkQueueSubmit(*args))
            raise KeyboardInterrupt

    proxy = types.SimpleNamespace(**{k: getattr(real_vk, k) for k in dir(real_vk) if not k.startswith("__")})
    proxy.lib = Lib()
    monkeypatch.setattr(device_module, "vk", proxy)
    serial = s.device._serial
    with pytest.raises(KeyboardInterrupt):
        s.render()
    monkeypatch.undo()
    assert lost == [0] and s.device._serial == serial  # submitted, yet no serial or fence names it
    s.flush()
    s.close()  # destroys the panel's buffers and pools: must not be in use (validation layer)
