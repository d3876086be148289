"""A live point cloud's steady frame does no host work over its points (issue 25): a drawing
step runs the same calls at 500 points as at 100,000, counted rather than timed (as
tests/test_frame_cost.py counts them). The fit, the colours and the counters are the device's;
the history copies the input with command buffers recorded once (a word-copy dispatch per chunk
for small frames, transfers per chunk and place for large ones: caliper_vk/live/history_copy.py).

The one difference allowed: a 100,000-point frame fills a history chunk by itself, so each step
moves on to the next chunk (``History._place``: a few calls, none over the data).
"""

import math
import sys
from collections import Counter

import numpy as np
import torch

import caliper_vk as cv

HISTORY = "12MB"  # 1.2 MB frames: one to a chunk, ten chunks, a first round of ten frames
NEXT_CHUNK = {"History._place", "C max", "C len", "C deque.popleft"}


def _steady_step_calls(n: int) -> tuple[bool, Counter, bool]:
    gen = torch.Generator().manual_seed(n)
    with cv.Session(window=False, size=(640, 400), budget=None, history=HISTORY) as s:
        t = cv.empty((n, 3))
        t.copy_(torch.randn(n, 3, generator=gen))
        panel = s.attach(t, "pointcloud", labels=np.arange(n) % 10)
        s.render()
        for _ in range(12):  # past the history ring's first round (its chunks, its recorded copies)
            with panel.writing():
                t.mul_(1.01)
            s.device.wait()
            s.step()
        with panel.writing():
            t.mul_(1.01)  # the training's write, as every step has one
        s.device.wait()
        s.frame.status_time = math.inf  # not a status-line refresh (a few times a second, by the clock)
        calls = Counter()

        def profile(frame, event, arg):
            if event == "call":
                calls[frame.f_code.co_qualname] += 1
            elif event == "c_call":
                calls["C " + getattr(arg, "__qualname__", repr(arg))] += 1

        sys.setprofile(profile)
        try:
            drew = s.step()
        finally:
            sys.setprofile(None)
        transfers = s.history._copies[2].transfers
        s.flush()
    return drew, calls, transfers


def test_a_steady_step_makes_the_same_calls_at_500_and_100000_points():
    drew_small, small, small_transfers = _steady_step_calls(500)
    drew_large, large, large_transfers = _steady_step_calls(100_000)
    assert drew_small and drew_large, "the measured steps must draw"
    # the two ways the history copies: word copies for the small frames, transfers for the large
    assert (small_transfers, large_transfers) == (False, True)
    assert {"FramePlan.step", "PointCloud.prepare", "RingCopies.commands"} <= set(large), sorted(large)
    assert not small - large, sorted((small - large).items())
    assert set(large - small) <= NEXT_CHUNK, sorted((large - small).items())
