"""The digits demo trains, renders frames and a contact sheet a person can look at."""

import numpy as np
from PIL import Image

from caliper_vk.demos import digits


def test_digits_demo_writes_frames_and_sheet(tmp_path):
    lines = []
    summary = digits.run(out_dir=tmp_path, steps=30, every=10, width=200, height=150,
                         log=lines.append)
    frames = sorted((tmp_path / "frames").glob("frame_*.png"))
    assert len(frames) == summary["frames"] == 4
    first = np.asarray(Image.open(frames[0]))
    assert first.shape == (150, 200, 4)
    colours = {tuple(c) for c in first.reshape(-1, 4)}
    assert len(colours) > 20  # ten digit colours, shaded by depth, on the background
    sheet = np.asarray(Image.open(summary["contact_sheet"]))
    assert sheet.shape == (800, 1200, 4)
    assert any("rendering offscreen" in line for line in lines)
    assert any(str(tmp_path / "frames") in line for line in lines)
