"""The digits demo: the cloud the renderer read really separates into lobes.

The silhouette score of the attached positions against the digit labels is
about 0 for the untrained network (-0.003 with seed 0: one blob) and 0.49
after 300 steps (train accuracy 97%). The threshold 0.35 sits well above what
any unseparated cloud scores and below what 300 steps reach, so the test fails
if training, the attach, or the tensor the renderer reads break.
"""

import numpy as np
from PIL import Image

from caliper_vk.chrome import LABEL_BACKGROUND, line_height
from caliper_vk.demos import digits
from caliper_vk.engine.canvas import grid_rects
from device_paths import cpu_path
from images import read_strip


def test_digits_lobes_separate_on_the_drawn_tensor(tmp_path):
    lines = []
    summary = digits.run(out_dir=tmp_path, steps=300, every=100, width=320, height=240,
                         window=False, progress=False, log=lines.append)
    assert summary["path"] == cpu_path()
    assert summary["silhouette"] > 0.35
    frames = sorted((tmp_path / "frames").glob("frame_*.png"))
    assert [f.name for f in frames] == [f"frame_{s:06d}.png" for s in (0, 100, 200, 300)]
    first = np.asarray(Image.open(frames[0]))
    assert first.shape == (240, 320, 4)
    assert len({tuple(c) for c in first.reshape(-1, 4)}) > 20  # ten digit colours, shaded
    sheet = np.asarray(Image.open(summary["contact_sheet"]))
    assert sheet.shape == (800, 1200, 4)
    assert any(str(tmp_path / "frames") in line for line in lines)
    assert any("contact sheet (steps [0, 100, 200, 300]," in line for line in lines), lines  # no moment twice
    cells = [c for row in grid_rects(1200, 800, 2, 3, 4) for c in row]
    bars = [read_strip(sheet[c.y:c.y + line_height(), c.x:c.x + c.width], background=LABEL_BACKGROUND)
            for c in cells[:4]]
    assert bars == ["step 0", "step 100", "step 200", "step 300"], bars  # each tile says its step
    # the final frame's status line names the run's last step, not one from a quarter second earlier
    final = np.asarray(Image.open(summary["final"]).convert("RGBA"))
    assert "step 300" in read_strip(final[-line_height():, :]), read_strip(final[-line_height():, :])


def test_untrained_cloud_is_one_blob(tmp_path):
    summary = digits.run(out_dir=tmp_path, steps=1, every=1, width=64, height=48, window=False,
                         progress=False, log=lambda *_: None)
    assert summary["silhouette"] < 0.1
