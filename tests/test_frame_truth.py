"""A frame that leaves the process states its own truth: the status line of every saved frame is
made for that frame (its step), fitted to the canvas without cutting an item, and the budget's share
never reads above 100%."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from PIL import Image

import caliper_vk as cv
from caliper_vk.live.budget import Budget
from caliper_vk.live.status import Status

from images import read_strip


def _status_text(png, bar) -> str:
    rgba = np.asarray(Image.open(png).convert("RGBA"))
    r = bar.rect
    return read_strip(rgba[r.y:r.y + r.height, r.x:r.x + r.width])


def test_every_saved_frame_states_its_own_step(tmp_path):
    x, h = torch.zeros(64, 3), torch.zeros(8, 8)
    with cv.Session(window=False, size=(640, 360), out_dir=tmp_path, save_every=5, budget=None) as s:
        s.attach(x, "pointcloud", name="cloud")
        s.attach(h, "heatmap", name="heat")
        for step in range(1, 61):
            x.normal_()
            s.step(step)
        s.flush()
        saved = sorted(tmp_path.glob("frame_*.png"))
        assert len(saved) == 12
        for png in saved:
            step = int(png.stem.split("_")[1])
            text = _status_text(png, s.status_bar)
            assert re.search(rf"(^| · )step {step}( · |$)", text), (png.name, text)
            assert text.startswith("cloud: zero-copy · heat: zero-copy") or "host staging" in text, text


def test_a_long_status_line_is_fitted_by_importance_never_cut_inside_an_item():
    st = Status(device="llvmpipe (LLVM 15.0.6, 256 bits) (cpu)",
                panels=[("bottleneck", "zero-copy", "in place"),
                        ("attn", "host staging", "llvmpipe lacks VK_EXT_external_memory_host")],
                skipped=3, step=120, max_fps=60, frame_ms=8.9, budget="≤5% of training: 4.1%",
                history="history: steps 760–1000, 96 MB")
    full = st.line()
    assert full.startswith("bottleneck: zero-copy · attn: host staging (llvmpipe lacks")
    items = set(full.split(" · "))
    for columns in (200, 120, 80, 60, 40):
        line = st.line(columns)
        assert len(line) <= columns, (columns, line)
        assert line.startswith("bottleneck: zero-copy · attn: host staging" if columns >= 60
                               else "bottleneck: zero-copy · "), line
        if columns >= 60:
            assert "step 120" in line, line
        shown = [p for p in line.split(" · ") if p != "…"]
        shorter = {"attn: host staging"}
        assert all(p in items or p in shorter for p in shown), (columns, line)


@pytest.mark.parametrize("measured", [0.041, 0.934, 1.94])
def test_the_budget_share_never_reads_above_all_of_the_loop(measured):
    b = Budget(0.05)
    b.measured_value = measured
    label = Budget.label.__get__(type("B", (), {"share": 0.05, "measured": measured})())(save_every=5)
    share = float(re.search(r"training: ([\d.]+)%", label).group(1))
    assert share <= 100.0 and share == pytest.approx(min(measured, 1.0) * 100, abs=0.05), label
    if measured > 0.05:
        assert label.endswith("(saving every 5 steps)"), label


def test_a_narrow_line_keeps_the_step_before_the_ellipsis():
    """The demo at 320 px under a profile without host import: a long staging reason and a budget
    with its note; the step stays, the marker goes where both do not fit."""
    st = Status(device="llvmpipe (LLVM 15.0.6, 256 bits) (cpu)",
                panels=[("bottleneck", "host staging", "the device cannot import host memory")], step=300,
                budget="≤5% of training: 85.8% (saving every 5 steps)")
    for columns in (35, 38, 44, 60):
        line = st.line(columns)
        assert len(line) <= columns and line.startswith("bottleneck: host staging · step 300"), (columns, line)
    assert st.line(60) == "bottleneck: host staging · step 300 · ≤5% of training: 85.8%"
