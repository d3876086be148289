"""The frame plan (caliper_vk/live/plan.py) never goes stale silently: every input of the steady
frame it planned is changed here, and the next frame is compared whole with the canvas's numpy
twin (every view's reference, the title bars and the status line), or the change is seen to
send the step down the general path (a storage replaced, a shape changed, a panel stopped)."""

import numpy as np
import pytest
import torch

import caliper_vk
from caliper_vk._arrays import as_labels
from caliper_vk.live import Session
from caliper_vk.live.plan import FramePlan
from images import assert_same_image

SIZE = (480, 240)
N = 400


@pytest.fixture
def planned(monkeypatch):
    """The steps the plan drew (it returns None when the general path must draw)."""
    drawn = []
    step = FramePlan.step

    def counted(self, index):
        result = step(self, index)
        drawn.append(result)
        return result

    monkeypatch.setattr(FramePlan, "step", counted)
    return drawn


def points(seed: int, n: int = N) -> torch.Tensor:
    t = caliper_vk.empty((n, 3))
    t.copy_(torch.from_numpy(np.random.default_rng(seed).normal(size=(n, 3)).astype(np.float32)))
    return t


def session(**kw) -> Session:
    return Session(window=False, size=SIZE, budget=None, **kw)


def steady(s, planned, by_plan=True) -> np.ndarray:
    """One step as a training loop meets it (the last frame done, not collected); its pixels.
    ``by_plan``: whether the plan must draw it (True), must not (False), or either (None)."""
    s.device.wait()
    planned.clear()
    assert s.step()
    if by_plan is not None:
        assert (planned == [True]) == by_plan, planned
    return s.flush()


def check(s, frame, folder) -> None:
    assert_same_image(frame, s.canvas.reference(), folder)


def test_steady_frames_are_the_plans_and_match_the_twin(planned, artifacts):
    t = points(1)
    with session() as s:
        s.attach(t, "pointcloud", name="cloud", labels=np.arange(N) % 7)
        s.render()  # the general path (it reads back), which plans the next frames
        for _ in range(3):
            check(s, steady(s, planned), artifacts / "steady")
        frames = s.frames
        steady(s, planned)
        assert s.frames == frames + 1 and s.drawn_step == s.step_count


def test_points_written_in_place_and_through_writing_are_fitted_again(planned, artifacts):
    t = points(2)
    with session() as s:
        panel = s.attach(t, "pointcloud", name="cloud")
        s.render()
        t.numpy()[:50] += np.float32(4.0)  # no writing(): only the bytes say so
        check(s, steady(s, planned), artifacts / "in-place")
        with panel.writing():
            t.mul_(2.5)
        check(s, steady(s, planned), artifacts / "writing")
        assert panel.view.data_version == (panel.protocol.writes, s.step_count)


@pytest.mark.parametrize("change", ["zoom", "camera", "bounds set", "bounds in place", "labels",
                                    "values", "background in place", "colour"])
def test_a_view_parameter_changed_directly_is_drawn(planned, artifacts, change):
    t = points(3)
    with session() as s:
        kw = {"bounds": [[-3.0, -3.0, -3.0], [3.0, 3.0, 3.0]]} if change == "bounds in place" else {}
        if change == "background in place":
            kw = {"background": [10, 20, 30, 255]}
        view = s.attach(t, "pointcloud", name="cloud", **kw).view
        s.render()
        before = steady(s, planned)
        if change == "zoom":
            view.zoom = 2.5
        elif change == "camera":
            view.set_camera(yaw_deg=80.0, pitch_deg=-30.0)
        elif change == "bounds set":
            view.bounds = np.array([[-1.0, -1.0, -1.0], [1.0, 1.0, 1.0]])
        elif change == "bounds in place":
            view.bounds[1] *= 4.0
        elif change == "labels":
            view.labels = as_labels(np.arange(N) % 5, N)
        elif change == "values":
            view.values = np.linspace(-1, 1, N, dtype=np.float32)
        elif change == "colour":
            view.color = (250, 120, 20, 255)  # the uniform colour of unlabelled clouds
        else:
            view.background[0] = 200
        frame = steady(s, planned)
        assert not np.array_equal(frame, before), "the change must show"
        check(s, frame, artifacts / change)


@pytest.mark.parametrize("change", ["storage replaced", "shape changed"])
def test_a_moved_storage_goes_down_the_general_path_and_stops_the_panel(planned, artifacts, change):
    t, other = points(4), points(5)
    with session() as s:
        stopped = s.attach(t, "pointcloud", name="moved")
        kept = s.attach(other, "pointcloud", name="kept")
        s.render()
        steady(s, planned)
        if change == "storage replaced":
            t.set_(torch.zeros(N, 3))
        else:
            t.resize_(N // 2, 3)  # the same storage, fewer rows
        check(s, steady(s, planned, by_plan=False), artifacts / "stopped")
        assert stopped.error and not kept.error
        assert "stopped" in s.message
        check(s, steady(s, planned), artifacts / "planned")  # the notice in its place


def test_panels_attached_and_closed_and_the_status_line_are_drawn(planned, artifacts):
    a, b = points(6), points(7)
    with session() as s:
        s.attach(a, "pointcloud", name="a")
        s.render()
        steady(s, planned)
        second = s.attach(b, "heatmap", name="b")  # a new layout: the general path, then a plan
        check(s, steady(s, planned, by_plan=False), artifacts / "attached")
        check(s, steady(s, planned), artifacts / "attached-planned")
        s.message = "a message"  # short: a 480-px line keeps the paths and the step first
        frame = steady(s, planned)
        assert "a message" in s.status_bar.left[0][0]
        check(s, frame, artifacts / "message")
        second.close()
        check(s, steady(s, planned, by_plan=False), artifacts / "closed")
        check(s, steady(s, planned), artifacts / "closed-planned")


@pytest.mark.parametrize("history", [None, "8MB"])
def test_planned_frames_are_kept_by_the_history_as_drawn(planned, artifacts, history):
    t = points(8)
    with session(history=history) as s:
        panel = s.attach(t, "pointcloud", name="cloud")
        s.render()
        drawn = {}
        for k in range(4):
            with panel.writing():
                t.add_(0.5 * k)
            frame = steady(s, planned)
            check(s, frame, artifacts / f"live-{k}")
            drawn[s.step_count] = frame
        if history is None:
            assert s.history is None
            return
        step = sorted(drawn)[1]
        s.rewind(step)
        assert s.step() is True  # paused: the history redraws (the general path)
        shown = s.flush()
        view = panel.view
        r = view.rect
        assert_same_image(shown[r.y:r.y + r.height, r.x:r.x + r.width],
                          drawn[step][r.y:r.y + r.height, r.x:r.x + r.width], artifacts / "rewound")
        s.live()
        check(s, steady(s, planned, by_plan=None), artifacts / "live-again")
        check(s, steady(s, planned), artifacts / "live-planned")


def test_sessions_that_save_frames_draw_every_frame_the_general_way(planned, tmp_path):
    with Session(window=False, size=SIZE, budget=None, out_dir=tmp_path, save_every=2) as s:
        s.attach(points(9), "pointcloud", name="cloud")
        for _ in range(4):
            s.device.wait()
            s.step()
        assert s._plan is None and planned == []
        assert len(s.saved) >= 1


def test_counters_follow_the_points_from_frame_to_frame(planned):
    t = points(10)
    with session() as s:
        view = s.attach(t, "pointcloud", name="cloud").view
        s.render()
        expected = []
        for bad in (7, 7, 7, 0, 0):  # each step collects the frame before, then draws
            s.device.wait()  # written between frames (no writing(): a CPU tensor's write is done on return)
            t.numpy()[:bad] = np.nan
            t.numpy()[bad:7] = 1.0
            planned.clear()
            assert s.step() and planned == [True]
            expected.append(bad)
            if len(expected) > 1:  # the counters of the frame drawn at the step before
                assert view.stats["nonfinite"] == expected[-2], (expected, view.stats)
                titled = [item[0] for item in s.panels[0].label.right if isinstance(item, tuple)]
                assert (f"{expected[-2]} NaN/Inf  " in titled) == (expected[-2] > 0), titled
        s.flush()
        assert view.stats == view.reference_with_stats(view.rect.width, view.rect.height)[1]


def test_a_gpu_tensor_read_in_place_has_its_counters_read_every_frame(planned):
    """A frame may skip reading its counters only where the host knows the input did not change
    (host data, set_data). A live cloud's bytes are not the host's to compare (a CUDA or MPS
    tensor read in place has only its attach-time copy there; the fit is the device's), so its
    counters are read every frame."""
    t = points(11)
    with session() as s:
        view = s.attach(t, "pointcloud", name="cloud").view
        s.render()
        steady(s, planned)
        steady(s, planned)
        assert not view.unchanged, "a live cloud is never known unchanged on the host"
        reads = []
        finish = view.finish

        def counted():
            reads.append(1)
            finish()

        view.finish = counted
        s._plan = None  # planned again from the next general frame, with the counting finish
        for _ in range(3):
            steady(s, planned, by_plan=None)
        assert len(reads) >= 2, reads


def test_attach_marks_a_gpu_tensor_read_in_place_as_not_current_on_the_host():
    from types import SimpleNamespace

    from caliper_vk.live.attach import view_source

    def live(device: str, imported):
        return SimpleNamespace(array=np.zeros((4, 3), np.float32), dtype="float32", imported=imported,
                               tensor=SimpleNamespace(device=SimpleNamespace(type=device)))

    assert view_source(live("cpu", object())).current  # the tensor's own pages
    assert view_source(live("cuda", None)).current  # staged: the host copy is refreshed each frame
    assert not view_source(live("cuda", object())).current  # imported VRAM: the attach-time copy
    assert not view_source(live("mps", object())).current
