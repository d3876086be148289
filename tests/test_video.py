"""Session(video=...) and `caliper render RUN -o VIDEO`: the file decodes to the frames drawn, in order."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from caliper_vk.cli import main
from caliper_vk.live import Session
from caliper_vk.live.sinks.video import steps_path
from caliper_vk.runs import example_paths

av = pytest.importorskip("av", reason="needs PyAV (the [video] extra)")


def decode(path):
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


def train_and_record(path, size, steps=14):
    """Step a session with moving points; returns (step, rgb) of every frame it drew."""
    torch.manual_seed(1)
    points = torch.randn(300, 3)
    c, s_ = np.cos(0.3), np.sin(0.3)
    turn = torch.tensor([[c, -s_, 0.0], [s_, c, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float32)
    drawn = []
    with Session(window=False, size=size, video=path, fps=12, max_fps=None, budget=None) as s:
        s.attach(points, view="pointcloud", labels=torch.arange(300) % 10)
        for k in range(1, steps + 1):
            points.copy_(points @ turn)  # the cloud turns: every frame differs from the one before
            if k % 5 == 0:
                continue  # a step that draws nothing: not in the video
            if s.step(k):
                drawn.append((k, s.flush()[..., :3].copy()))
    return drawn


def test_video_lossless_mkv_holds_every_drawn_frame_in_order(tmp_path):
    path = tmp_path / "run.mkv"
    drawn = train_and_record(path, (160, 120))
    frames = decode(path)
    assert len(frames) == len(drawn) >= 10
    for (_, want), got in zip(drawn, frames, strict=True):
        assert np.array_equal(got, want)  # FFV1 is lossless: the drawn bytes, in order
    assert not np.array_equal(frames[0], frames[1])
    meta = json.loads(steps_path(path).read_text())
    assert meta["steps"] == [k for k, _ in drawn] and meta["fps"] == 12


def test_video_mp4_h264_decodes_to_the_drawn_frames_within_codec_loss(tmp_path):
    path = tmp_path / "run.mp4"
    drawn = train_and_record(path, (161, 121), steps=8)  # odd sides: padded by a repeated edge
    frames = decode(path)
    assert len(frames) == len(drawn)
    with av.open(str(path)) as c:
        assert c.streams.video[0].codec_context.name in ("h264", "libx264", "mpeg4", "libopenh264")
    for k, ((_, want), got) in enumerate(zip(drawn, frames, strict=True)):
        assert got.shape == (122, 162, 3)
        got = got[:121, :161].astype(int)
        err = np.abs(got - want).mean()
        assert err < 6.0, err  # yuv420p halves colour resolution: 3 px points lose most
        if k:  # where it differs from the frame before, it holds its own pixels: the order is right
            before = drawn[k - 1][1].astype(int)
            moved = np.any(before != want, axis=-1)
            assert moved.sum() > 100
            assert np.abs(got - want)[moved].mean() * 2 < np.abs(got - before)[moved].mean()


def test_video_refuses_an_unknown_container(tmp_path):
    with pytest.raises(ValueError, match=r"unknown container '\.avi'.*\.mkv"):
        Session(window=False, size=(64, 48), video=tmp_path / "run.avi")


def test_video_caliper_render_makes_a_video_of_a_runs_array_probes(tmp_path, capsys):
    from caliper_vk.record import find_runs, load_run
    from caliper_vk.render import choose, frames

    run_dir = next(p.parent for p in example_paths() if p.parent.name == "digits_cnn")
    out = tmp_path / "probes.mkv"
    assert main(["render", str(run_dir), "-o", str(out), "--size", "320x240", "--fps", "5",
                 "--array", "kernels/conv1", "--array", "input"]) == 0
    assert "wrote" in capsys.readouterr().out
    run = load_run(find_runs(run_dir)[0])
    keys = choose(run, ["kernels/conv1", "input"])
    steps = sorted({f.step for k in keys for f in run.arrays[k]})
    got = decode(out)
    assert json.loads(steps_path(out).read_text())["steps"] == steps and len(got) == len(steps)
    for (step, want), frame in zip(frames(run, keys, (320, 240)), got, strict=True):
        assert np.array_equal(frame, want[..., :3]), step
    assert not np.array_equal(got[0], got[-1])  # the kernels change as the run trains
    assert main(["render", str(run_dir), "-o", str(tmp_path / "x.mkv"), "--array", "nope"]) == 2
    assert "nope" in capsys.readouterr().err


def test_video_keeps_the_frames_the_budget_draws_and_every_step_with_no_budget(tmp_path):
    """docs/remote.md: a tight loop under the 5% budget keeps a few of its 60 steps' frames;
    budget=None with a flush() after each drawn step keeps one per step."""
    kept = {}
    for budget in (0.05, None):
        path = tmp_path / f"run-{budget}.mkv"
        points = torch.randn(200, 3)
        with Session(window=False, size=(96, 64), video=path, max_fps=None, budget=budget) as s:
            s.attach(points, view="pointcloud")
            for k in range(1, 61):
                points.mul_(1.001)  # a step of training that costs next to nothing
                if s.step(k) and budget is None:
                    s.flush()  # waits for the frame: the next step is not skipped for it
        kept[budget] = json.loads(steps_path(path).read_text())["steps"]
        assert len(decode(path)) == len(kept[budget])
    assert 1 <= len(kept[0.05]) < 60
    assert kept[None] == list(range(1, 61))
