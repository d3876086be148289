"""max_fps: steps sooner than 1/max_fps after the last frame draw nothing and are counted;
render() and frames due to be saved are never held back."""

import time

import pytest
import torch

import caliper_vk as cv


def test_offscreen_sessions_without_a_budget_draw_every_step():
    with cv.Session(window=False, size=(64, 48), budget=None) as s:
        assert s.max_fps is None
        s.attach(torch.randn(8, 8), "heatmap")
        drawn = 0
        for _ in range(20):
            drawn += s.step()
            s.flush()
        assert drawn == 20 and s.held == 0
        assert "fps" not in s.status().line()


def test_steps_within_the_frame_interval_are_held():
    with cv.Session(window=False, size=(64, 48), max_fps=5, budget=None) as s:  # max_fps alone
        panel = s.attach(torch.randn(8, 8), "heatmap")
        assert s.step() is True
        s.flush()
        for _ in range(10):  # well inside 200 ms: nothing is drawn, nothing waits
            with panel.writing():
                pass
            assert s.step() is False
        assert s.held == 10 and s.frames == 1 and s.skipped == 0
        assert "≤5 fps" in s.status().line()
        s.render()  # an explicit frame is never held
        assert s.frames == 2
        time.sleep(0.25)
        assert s.step() is True


def test_frames_due_to_be_saved_are_never_held(tmp_path):
    with cv.Session(window=False, size=(64, 48), out_dir=tmp_path, save_every=1, max_fps=1) as s:
        s.attach(torch.randn(8, 8), "heatmap")
        for step in range(1, 6):
            s.step(step)
        s.flush()
        assert s.held == 0 and len(s.saved) >= 4


@pytest.mark.parametrize("bad", [0, -5, "fast", True])
def test_a_bad_max_fps_is_refused(bad):
    with pytest.raises(ValueError, match="max_fps must be a positive number, None"):
        cv.Session(window=False, size=(32, 32), max_fps=bad)


def test_due_says_whether_the_next_step_draws(tmp_path):
    with cv.Session(window=False, size=(64, 48), max_fps=5, out_dir=tmp_path, save_every=10, budget=None) as s:
        s.attach(torch.randn(8, 8), "heatmap")
        assert s.due(1)
        assert s.step(1) is True
        assert not s.due(2)  # in flight, or within the 200 ms interval
        assert s.step(2) is False
        assert s.due(10)  # a frame to save is always due
        s.paused = True
        assert not s.due(11)
        s.paused = False
        time.sleep(0.25)
        s.flush()
        assert s.due(11) and s.step(11) is True
