"""The point cloud on the emulated discrete GPU (caliper_vk.exporters.discrete): attached empty,
then written; each frame's fit is computed on the device from what the frame reads, so the
frame equals the twin of a ``.cpu()`` copy taken after ``flush()``, and the host copies nothing
per frame. Rewind redraws a kept step as it was shown."""

import numpy as np
import pytest
import torch

from caliper_vk.exporters import discrete
from caliper_vk.live import Session
from caliper_vk.views import PointCloud
from images import assert_same_image

SIZE = (360, 160)


def region(frame, view):
    r = view.rect
    return frame[r.y:r.y + r.height, r.x:r.x + r.width]


def moving(step: int, n: int, dim: int = 3) -> torch.Tensor:
    """Points that grow, drift and change sign from step to step (a fit made once is wrong later)."""
    rng = np.random.default_rng(step)
    pts = rng.normal(size=(n, dim)) * (0.5 + step ** 2) + (-1) ** step * 3.0 * step
    if step % 2:
        pts[::17, 1] = np.nan  # counted, left out of the fit
    return torch.from_numpy(pts.astype(np.float32))


def twin_of(view, host, **options):
    """The twin of ``view``'s panel from host copies (its camera, labels and values)."""
    twin = PointCloud(host, yaw_deg=view._yaw, pitch_deg=view._pitch, zoom=view.zoom,
                      point_size_px=view.point_size_px, **options)
    return twin.reference_with_stats(view.rect.width, view.rect.height)


@pytest.mark.parametrize("dim", [3, 2])
def test_a_cloud_attached_empty_then_moving_is_fitted_in_each_frame_on_a_discrete_device(dim, artifacts):
    pts = discrete.empty((300, dim))  # all zeros at attach: a fit from this copy puts the rest off screen
    with Session(window=False, size=SIZE, budget=None) as s:
        panel = s.attach(pts, "pointcloud", name="emb", point_size_px=2)
        view = panel.view
        for step in range(1, 5):
            with panel.writing():
                pts.copy_(moving(step, 300, dim))
            with discrete.transfers() as t:
                assert s.step(step)
                frame = s.flush()
            if panel.path == "zero-copy":
                assert t.to_host == 0 and t.blocking == 0, t  # the frame reads the device's memory
            want, stats = twin_of(view, pts.cpu())
            assert_same_image(region(frame, view), want, artifacts / f"dim{dim}-step{step}")
            assert view.stats == stats
            assert stats["drawn"] > 250, stats  # on screen: fitted to this step's points


def test_a_fixed_box_and_labels_draw_the_points_written_after_attach(artifacts):
    pts = discrete.empty((400, 3))
    labels = np.arange(400) % 7
    bounds = ((-20, -20, -20), (20, 20, 20))
    with Session(window=False, size=SIZE, budget=None) as s:
        panel = s.attach(pts, "pointcloud", name="emb", labels=labels, bounds=bounds)
        view = panel.view
        for step in (1, 2):
            with panel.writing():
                pts.copy_(moving(step, 400))
            s.step(step)
            frame = s.flush()
            want, stats = twin_of(view, pts.cpu(), labels=labels, bounds=bounds)
            assert_same_image(region(frame, view), want, artifacts / f"step{step}")
            assert view.stats == stats


def test_rewind_redraws_a_kept_step_as_it_was_shown_on_a_discrete_device(artifacts):
    pts = discrete.empty((250, 3))
    with Session(window=False, size=SIZE, budget=None, history="1MB") as s:
        panel = s.attach(pts, "pointcloud", name="emb")
        view = panel.view
        frames, copies = {}, {}
        for step in range(1, 6):
            with panel.writing():
                pts.copy_(moving(step, 250))
            if step == 4:
                view.set_camera(yaw_deg=100.0, pitch_deg=-30.0, zoom=2.0)  # turned after step 3
            assert s.step(step)
            frames[step] = s.flush().copy()
            copies[step] = pts.cpu()
        for step in (2, 5, 1):
            s.rewind(step)
            shown = s.render()
            assert_same_image(region(shown, view), region(frames[step], view), artifacts / f"rewound{step}")
        s.live()
        assert view.camera == (100.0, -30.0, 2.0)  # the live camera is back
        assert s.step(6)
        want, _ = twin_of(view, copies[5])
        assert_same_image(region(s.flush(), view), want, artifacts / "live")


@pytest.mark.parametrize("memory", ["discrete", "cpu"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8])
def test_labels_that_change_are_read_in_place_each_frame(memory, dtype, artifacts):
    import caliper_vk

    empty = discrete.empty if memory == "discrete" else caliper_vk.empty
    n = 301
    pts, labels = empty((n, 3)), empty((n,), dtype)
    with Session(window=False, size=SIZE, budget=None, history="1MB") as s:
        panel = s.attach(pts, "pointcloud", name="emb", labels=labels, point_size_px=3)
        view = panel.view
        assert view.label_source is not None and len(panel.inputs) == 2
        frames, copies = {}, {}
        for step in range(1, 4):
            rng = np.random.default_rng(step)
            with panel.writing():
                pts.copy_(moving(step, n))
                classes = rng.integers(-1 if dtype == torch.int32 else 0, 3 + 2 * step, n)
                labels.copy_(torch.from_numpy(classes).to(dtype))
            with discrete.transfers() as t:
                assert s.step(step)
                frames[step] = s.flush().copy()
            if panel.path == "zero-copy":
                assert t.to_host == 0, t
            copies[step] = (pts.cpu(), labels.cpu().numpy())
            want, stats = twin_of(view, copies[step][0], labels=copies[step][1])
            assert_same_image(region(frames[step], view), want, artifacts / f"step{step}")
            assert view.stats == stats
            seen = sorted({int(c) for c in copies[step][1] if c >= 0})
            assert [i[0] for i in view.legend() if isinstance(i, tuple)] == [f"{c} " for c in seen]
        s.rewind(2)
        shown = s.render()
        assert_same_image(region(shown, view), region(frames[2], view), artifacts / "rewound")
        s.live()


@pytest.mark.parametrize("memory", ["discrete", "cpu"])
@pytest.mark.parametrize("value_range", ["auto", "symmetric", (-2.0, 5.0)])
def test_values_that_change_are_read_in_place_and_coloured_by_the_frames_range(memory, value_range, artifacts):
    import caliper_vk
    from caliper_vk.views._source import Source

    empty = discrete.empty if memory == "discrete" else caliper_vk.empty
    n = 500
    pts, values = empty((n, 3)), empty((n,))
    with Session(window=False, size=SIZE, budget=None, history="1MB") as s:
        panel = s.attach(pts, "pointcloud", name="emb", values=values, value_range=value_range,
                         colormap="magma")
        view = panel.view
        assert view.value_source is not None and len(panel.inputs) == 2
        frames = {}
        for step in range(1, 4):
            rng = np.random.default_rng(10 + step)
            vals = (rng.normal(size=n) * 10.0 ** step + (-1) ** step * 5 * step).astype(np.float32)
            if step == 1:
                vals[::13] = np.nan  # coloured and counted as NaN, left out of the range
            if step == 3:
                vals[:] = 7.0  # a constant field: the range is widened about it
            with panel.writing():
                pts.copy_(moving(step, n))
                values.copy_(torch.from_numpy(vals))
            with discrete.transfers() as t:
                assert s.step(step)
                frames[step] = s.flush().copy()
            if panel.path == "zero-copy":
                assert t.to_host == 0, t
            twin = PointCloud(yaw_deg=view._yaw, pitch_deg=view._pitch, value_range=value_range,
                              colormap="magma")
            twin.set_source(Source(pts.cpu().numpy()), values=Source(values.cpu().numpy()))
            want, stats = twin.reference_with_stats(view.rect.width, view.rect.height)
            assert_same_image(region(frames[step], view), want, artifacts / f"step{step}")
            assert view.stats == stats
            if isinstance(value_range, str):
                lo, hi = view._vrange_seen  # the range this frame used, read back with its counters
                finite = vals[np.isfinite(vals)]
                m = np.abs(finite).max()
                want = (finite.min(), finite.max()) if value_range == "auto" else (-m, m)
                if value_range == "auto" and step == 3:
                    want = (3.5, 10.5)  # 7 widened by half its magnitude each way
                assert (lo, hi) == want
                assert view.legend()  # drawn from those counters
        s.rewind(2)
        assert_same_image(region(s.render(), view), region(frames[2], view), artifacts / "rewound")
        s.live()
