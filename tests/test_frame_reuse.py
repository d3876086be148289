"""Cheaper frames: what a frame reuses (the point cloud's parameter block, the history's recorded
ring copies) draws and keeps exactly what doing it all again would."""

import numpy as np
import pytest
import torch

import caliper_vk
from caliper_vk.live import Session
from caliper_vk.live import history_copy
from caliper_vk.live.history_copy import RingCopies
from caliper_vk.views import PointCloud
from images import assert_same_image

pytestmark = pytest.mark.trimmed  # in the hardware scripts' trimmed suite (pyproject.toml)

SIZE = (480, 200)


def region(frame, view):
    r = view.rect
    return frame[r.y:r.y + r.height, r.x:r.x + r.width]


def counting_params(monkeypatch) -> list:
    calls = []
    params = PointCloud.params

    def counted(self, *args, **kw):
        calls.append(self)
        return params(self, *args, **kw)

    monkeypatch.setattr(PointCloud, "params", counted)
    return calls


def test_the_parameter_block_is_reused_while_the_camera_stays_and_moved_points_are_fitted_on_the_device(
        monkeypatch, artifacts):
    calls = counting_params(monkeypatch)
    rng = np.random.default_rng(3)
    pts = caliper_vk.empty((500, 3))
    with Session(window=False, size=SIZE, budget=None, history=None) as s:
        panel = s.attach(pts, "pointcloud", name="cloud", labels=rng.integers(0, 10, 500))
        view = panel.view
        with panel.writing():
            pts.copy_(torch.from_numpy(rng.normal(size=(500, 3)).astype(np.float32)))
        s.render()
        calls.clear()
        assert s.step() and s.flush() is not None
        assert calls == []  # nothing changed: last frame's block is this frame's
        for write in ("writing", "in place", "camera"):  # only the camera makes a new block
            if write == "writing":
                with panel.writing():
                    pts.mul_(3.0)  # a new fit: every point moves on screen unless refitted
            elif write == "in place":  # no writing(): the device's fit sees the new bytes
                pts.numpy()[:100] += np.float32(5.0)
            else:
                view.set_camera(yaw_deg=75.0)
            frame = s.render()
            assert calls == ([view] if write == "camera" else []), write
            twin = view.reference(view.rect.width, view.rect.height)
            assert_same_image(region(frame, view), twin, artifacts / write)
            calls.clear()


def test_a_new_layout_records_the_frame_again_and_matches_the_twins(artifacts):
    rng = np.random.default_rng(4)
    a, b = caliper_vk.empty((300, 3)), caliper_vk.empty((300, 3))
    a.copy_(torch.from_numpy(rng.normal(size=(300, 3)).astype(np.float32)))
    b.copy_(torch.from_numpy(rng.normal(size=(300, 3)).astype(np.float32)))
    with Session(window=False, size=SIZE, budget=None, history=None) as s:
        first = s.attach(a, "pointcloud", name="a").view
        s.render()
        rect = first.rect
        second = s.attach(b, "pointcloud", name="b").view  # the grid changes: both rectangles move
        frame = s.render()
        assert first.rect != rect
        for v in (first, second):
            assert_same_image(region(frame, v), v.reference(v.rect.width, v.rect.height),
                              artifacts / str(id(v)))


def _keep_and_read_back(s, panels, tensors, steps, rng):
    written = {}
    for step in steps:
        for p, t in zip(panels, tensors, strict=True):
            with p.writing():
                t.copy_(torch.from_numpy(rng.integers(0, 250, size=tuple(t.shape))).to(t.dtype))
        assert s.step(step)
        s.flush()
        written[step] = [t.clone() for t in tensors]
    for step in steps:
        kept = s.history.arrays(s.history.frame(step))
        for p, t in zip(panels, written[step], strict=True):
            assert np.array_equal(kept[(p.name, 0)], t.numpy()), (step, p.name)


def test_recorded_ring_copies_and_per_frame_copies_keep_the_same_bytes(monkeypatch):
    """Aligned inputs go through the word copies recorded once per chunk; an imported input at
    an odd byte offset (a uint8 view one byte into its storage) falls back to vkCmdCopyBuffer
    per frame, as does every input when the word copies are refused; chunks that hold few frames
    (here one each) take transfers recorded per chunk and place, odd offsets included. Each
    keeps exactly the bytes drawn, frame after frame, across chunk changes."""
    rng = np.random.default_rng(5)
    for case in ("aligned", "odd", "refused", "transfers", "transfers odd"):
        pts = caliper_vk.empty((301, 3))
        heat = torch.zeros(1 + 35, dtype=torch.uint8)[1:].view(5, 7) if "odd" in case else \
            torch.zeros(5, 7, dtype=torch.uint8)
        transfers = case.startswith("transfers")
        # the word copies, unless the chunks' few places take transfers (the default here)
        monkeypatch.setattr(history_copy, "TRANSFER_PLACES", 16 if transfers else 0)
        if case == "refused":
            monkeypatch.setattr(RingCopies, "usable", staticmethod(lambda *a: False))
        with Session(window=False, size=SIZE, budget=None, history=40_000) as s:
            panels = [s.attach(pts, "pointcloud", name="cloud"), s.attach(heat, "heatmap", name="u8")]
            _keep_and_read_back(s, panels, [pts, heat], range(1, 4), rng)  # 3 frames: chunks 0, 1, 2
            ring = s.history._copies[2]
            # an odd offset can only stay odd where the tensor is imported (not staged)
            per_frame = not transfers and (
                case == "refused" or (case == "odd" and panels[1].path == "zero-copy"))
            assert (ring is None) == per_frame, case
            if not per_frame:
                assert isinstance(ring, RingCopies) and len(ring._chunks) == 3
                assert ring.transfers == transfers, case

def test_transfers_recorded_per_place_keep_every_frame_of_a_chunk():
    """A chunk that holds three frames: one transfer command buffer per place, recorded at its
    first use and submitted again when the ring comes round; every kept frame reads back as
    written."""
    rng = np.random.default_rng(6)
    pts = caliper_vk.empty((301, 3))
    heat = torch.zeros(5, 7, dtype=torch.uint8)
    frame_bytes = 3616 + 48  # each input on a 16-byte boundary
    with Session(window=False, size=SIZE, budget=None, history=16 * 3 * frame_bytes) as s:
        panels = [s.attach(pts, "pointcloud", name="cloud"), s.attach(heat, "heatmap", name="u8")]
        _keep_and_read_back(s, panels, [pts, heat], range(1, 8), rng)  # chunks 0, 0, 0, 1, 1, 1, 2
        ring = s.history._copies[2]
        assert ring.transfers and s.history.chunk_size == 3 * frame_bytes
        assert sorted(len(held[1]) for held in ring._chunks.values()) == [1, 3, 3]
