"""The write/read protocol: frames never show a half-written tensor.

A producer thread rewrites an attached tensor without pause, stamping a
generation number into every element; the renderer draws at least 2,000
frames, and the heatmap's stats pass reports the min and max value it read in
each frame. With the protocol every frame is untorn (min == max). The negative
control turns the protocol off and must see torn frames, so this test can fail.
"""

import threading
import time

import pytest
import torch

import caliper_vk as cv

pytestmark = pytest.mark.trimmed  # in the hardware scripts' trimmed suite (pyproject.toml)

FRAMES = 2000


def run(sync: bool, frames: int, stop_at_first_tear: bool = False):
    t = cv.empty((128, 256), dtype=torch.float32)
    seen = []
    with cv.Session(window=False, size=(64, 64), sync=sync, budget=None) as s:  # every frame it can
        panel = s.attach(t, "heatmap", name="gen")
        done = threading.Event()

        def produce():
            gen = 0
            while not done.is_set():
                gen += 1
                with panel.writing():
                    for row in range(0, 128, 16):  # a write that takes a while
                        t[row:row + 16].fill_(float(gen))

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        try:
            last = s.frames
            while len(seen) < frames:
                if not s.step():
                    time.sleep(0.0001)  # a display-paced renderer: let the producer run
                if s.frames != last:
                    last = s.frames
                    seen.append(panel.view.seen_range)
                    if stop_at_first_tear and seen[-1][0] != seen[-1][1]:
                        break
        finally:
            done.set()
            producer.join(timeout=10)
        s.flush()
    return seen


def test_every_frame_is_untorn_with_the_protocol():
    seen = run(sync=True, frames=FRAMES)
    assert len(seen) >= FRAMES
    torn = [r for r in seen if r[0] != r[1]]
    assert torn == [], f"{len(torn)} torn frames, first {torn[:3]}"
    generations = {r[0] for r in seen}
    assert len(generations) > FRAMES // 4, "the renderer kept showing stale data"


def test_negative_control_without_the_protocol_tears():
    seen = run(sync=False, frames=FRAMES, stop_at_first_tear=True)
    torn = [r for r in seen if r[0] != r[1]]
    if not torn:
        pytest.fail(f"no torn frame in {len(seen)} frames without the protocol: the test cannot "
                    "tell the protocol works")
