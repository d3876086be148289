"""Rewind: a step kept in the session's history redraws exactly as it was drawn live."""

import numpy as np
import pytest
import torch

import caliper_vk
from caliper_vk.live import Session
from caliper_vk.live.history import parse_budget
from caliper_vk.record import load_run
from images import assert_same_image

SIZE = (600, 200)


def region(frame, panel):
    r = panel.view.rect
    return frame[r.y:r.y + r.height, r.x:r.x + r.width]


def title_text(panel) -> str:
    return "".join(i[0] for i in panel.label.left + panel.label.right if isinstance(i, tuple))


def drive(session, steps, tensors, panels, seed=0):
    """Write new values each step, draw, and keep each live frame and the values drawn."""
    rng = np.random.default_rng(seed)
    frames, values = {}, {}
    for step in steps:
        for t, p in zip(tensors, panels, strict=True):
            with p.writing():
                t.copy_(torch.from_numpy(rng.normal(size=tuple(t.shape)).astype(np.float32)).to(t.dtype))
        assert session.step(step)
        frames[step] = session.flush().copy()
        values[step] = [t.clone() for t in tensors]
    return frames, values


def test_rewind_redraws_each_kept_step_byte_identical(artifacts):
    pts = caliper_vk.empty((300, 3))
    heat = caliper_vk.empty((24, 32), dtype=torch.bfloat16)
    staged = torch.zeros(40, 40)
    with Session(window=False, size=SIZE, history="1MB", budget=None) as s:
        panels = [s.attach(pts, "pointcloud", name="cloud"), s.attach(heat, "heatmap", name="attn"),
                  s.attach(staged, "heatmap", name="staged", zero_copy=False)]
        assert panels[2].path == "host staging"
        frames, _ = drive(s, range(1, 9), [pts, heat, staged], panels)
        assert s.history.steps() == list(range(1, 9))
        assert s.status().history.startswith("history: steps 1–8, ")
        for k in (3, 1, 8):
            s.rewind(k)
            again = s.render()
            for p in panels:
                assert_same_image(region(again, p), region(frames[k], p), artifacts / f"{p.name}-{k}")
                assert f"step {k} (kept)" in title_text(p)
            assert any(f"step {k}" in str(i) for i in s.status_bar.left)  # the scrubber
        s.save_png(artifacts / "rewound.png")
        # training goes on while a kept step is shown: writes never wait for a frame
        with panels[0].writing():
            pts.zero_()
        assert not s.step(9) or s.history.position is not None
        s.live()
        assert s.step(10)
        s.flush()
        assert s.history.steps()[-1] == 10 and "(kept)" not in title_text(panels[0])


def test_rewind_keys_move_one_kept_frame_and_end_returns_live():
    from caliper_vk.live.input import rewind_key

    pts = caliper_vk.empty((50, 3))
    with Session(window=False, size=(160, 120), history=1 << 20, budget=None) as s:
        p = s.attach(pts, "pointcloud")
        drive(s, range(10, 15), [pts], [p])
        rewind_key(s, "left")
        assert s.paused and s.history.steps()[s.history.position] == 13
        rewind_key(s, "home")
        rewind_key(s, "left")
        assert s.history.position == 0
        rewind_key(s, "right")
        assert s.history.steps()[s.history.position] == 11
        assert s.render() is not None
        rewind_key(s, "end")
        assert not s.paused and s.history.position is None


def test_the_oldest_frames_are_dropped_at_the_budget():
    pts = caliper_vk.empty((256, 3))  # 3,072 bytes a frame
    with Session(window=False, size=(160, 120), history=8 * 3072, budget=None) as s:
        p = s.attach(pts, "pointcloud")
        drive(s, range(1, 21), [pts], [p])
        kept = s.history.steps()
        assert kept == list(range(kept[0], 21)) and 7 <= len(kept) <= 8
        assert s.history.nbytes <= 8 * 3072
        memory = dict(s.device.memory_stats)
        drive(s, range(21, 41), [pts], [p])  # the ring is full: it reuses its chunks, allocates nothing
        assert s.device.memory_stats == memory and s.history.steps()[-1] == 40
        with pytest.raises(KeyError, match="step 1 is not kept"):
            s.rewind(1)


def test_save_history_writes_array_probes_a_run_loads(tmp_path):
    pts = caliper_vk.empty((64, 3))
    heat = caliper_vk.empty((8, 8), dtype=torch.bfloat16)
    with Session(window=False, size=(200, 120), history="1MB", budget=None) as s:
        panels = [s.attach(pts, "pointcloud", name="cloud"), s.attach(heat, "heatmap", name="attn")]
        _, values = drive(s, range(5, 9), [pts, heat], panels)
        out = s.save_history(tmp_path / "run")
    run = load_run(out)
    frames = run.arrays["live/cloud"]
    assert [f.step for f in frames] == [5, 6, 7, 8]
    assert frames[0].module == "pointcloud" and frames[0].kind == "live frame"
    for f in frames:
        np.testing.assert_array_equal(f.array, values[f.step][0].numpy())
    attn = run.arrays["live/attn"]
    np.testing.assert_array_equal(attn[-1].array, values[8][1].float().numpy())


def test_save_history_into_a_run_being_recorded(tmp_path):
    pts = caliper_vk.empty((16, 3))
    rec = caliper_vk.Recorder(tmp_path / "training")
    with Session(window=False, size=(120, 80), history="1MB") as s:
        p = s.attach(pts, "pointcloud", name="cloud")
        for step in range(1, 4):
            rec.log(train_loss=1.0 / step, step=step)
        drive(s, range(1, 4), [pts], [p])
        assert s.save_history(rec) == rec.dir
    run = load_run(rec.close())
    assert [f.step for f in run.arrays["live/cloud"]] == [1, 2, 3] and len(run.metrics["train/loss"]) == 3


def test_history_budget_strings_and_off():
    assert parse_budget("256MB") == 256_000_000 and parse_budget("1GiB") == 1 << 30
    assert parse_budget(None) == 0 and parse_budget(0) == 0 and parse_budget(4096) == 4096
    with pytest.raises(ValueError, match="not a byte budget"):
        parse_budget("lots")
    with Session(window=False, size=(120, 80), history=None) as s:
        assert s.history is None and "history" not in s.status().line()
        with pytest.raises(RuntimeError, match="history="):
            s.rewind(1)
