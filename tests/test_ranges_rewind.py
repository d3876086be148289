"""Rewind redraws a kept step over the range it was shown with: the range is remade on the
device from the kept bytes, and the title shows it (not today's)."""

import numpy as np
import torch

import caliper_vk
from caliper_vk.live import Session
from images import assert_same_image


def test_rewound_step_shows_its_own_range(artifacts):
    heat = caliper_vk.empty((16, 24))
    trace = caliper_vk.empty((200,))
    rng = np.random.default_rng(5)
    with Session(window=False, size=(400, 160), history="1MB", budget=None) as s:
        panels = [s.attach(heat, "heatmap", name="heat"), s.attach(trace, "curve", name="trace", smoothing=0.9),
                  s.attach(heat, "histogram", name="hist", bins=16)]
        frames, ranges = {}, {}
        for step in range(1, 5):
            scale = 10.0 ** step * (-1) ** step  # a range that moves and changes sign every step
            with panels[0].writing():
                heat.copy_(torch.from_numpy(rng.normal(size=(16, 24)).astype(np.float32) * scale))
            with panels[1].writing():
                trace.copy_(torch.from_numpy(np.cumsum(rng.normal(size=200)).astype(np.float32) * scale))
            assert s.step(step)
            frames[step] = s.flush().copy()
            ranges[step] = [p.view.range for p in panels]
            assert ranges[step][0] == (float(heat.min()), float(heat.max()))
        for k in (2, 1, 4):
            s.rewind(k)
            again = s.render()
            for p, shown in zip(panels, ranges[k], strict=True):
                r = p.view.rect
                assert_same_image(again[r.y:r.y + r.height, r.x:r.x + r.width],
                                  frames[k][r.y:r.y + r.height, r.x:r.x + r.width], artifacts / f"{p.name}-{k}")
                assert p.view.range == shown
