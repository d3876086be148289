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


def test_rewound_histogram_overlays_the_steps_it_overlaid_then(artifacts):
    t = caliper_vk.empty((2000,))
    rng = np.random.default_rng(8)
    base = np.clip(rng.normal(size=2000), -2, 2).astype(np.float32)
    with Session(window=False, size=(200, 120), history="1MB", budget=None) as s:
        panel = s.attach(t, "histogram", name="h", bins=20, history=3)  # auto range
        frames, overlaid, counts = {}, {}, {}
        for step in range(1, 6):
            with panel.writing():  # steps 1-3 on one grid, then the range triples
                t.copy_(torch.from_numpy(base * (1 if step <= 3 else 3) + np.float32(step == 5) * base))
            assert s.step(step)
            frames[step] = s.flush().copy()
            overlaid[step] = (len(panel.view._frame_history), panel.view.history_note)
            counts[step] = panel.view.counts.copy()
        assert overlaid[3] == (2, "") and overlaid[4][0] == 0 and overlaid[4][1].startswith("3 older")
        r = panel.view.rect
        for k in (3, 2, 4):
            s.rewind(k)
            again = s.render()
            assert_same_image(again[r.y:r.y + r.height, r.x:r.x + r.width],
                              frames[k][r.y:r.y + r.height, r.x:r.x + r.width], artifacts / f"h-{k}")
            assert (len(panel.view._frame_history), panel.view.history_note) == overlaid[k]
        s.live()
        with panel.writing():
            t.copy_(torch.from_numpy(base * 3))
        assert s.step(6)
        s.flush()
        # live again: the overlay goes on from step 5, untouched by the rewound frames
        assert [c.tolist() for c, _ in panel.view._candidates] == [counts[k].tolist() for k in (5, 4, 3)]
