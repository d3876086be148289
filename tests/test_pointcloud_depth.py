"""What the point cloud's 32-bit depth key promises, checked on the GPU image itself (not
only against the twin): nearer points hide farther ones down to one depth level, ties
are order-independent, and no built-in shader needs 64-bit atomics."""

import re

import numpy as np
import pytest

from caliper_vk.engine import Canvas, shaders
from caliper_vk.views import PointCloud
from caliper_vk.views.pointcloud import DEPTH_MAX

pytestmark = pytest.mark.trimmed  # in the hardware scripts' trimmed suite (pyproject.toml)

BG = (22, 22, 26, 255)


def _render(view, w=40, h=40):
    with Canvas(w, h) as canvas:
        canvas.add(view)
        img = canvas.render()
        assert np.array_equal(img, view.reference(w, h))
        return img


def _front(labels, depths, order=None):
    """Points at the panel centre, at ``depths`` along the viewing axis (larger z is nearer
    with the front camera); two far anchors fix the fit so the depth range is [-1, 1]."""
    n = len(depths)
    p = np.zeros((n + 2, 3), np.float32)
    p[:n, 2] = depths
    p[n:] = [[0.9, 0.9, -1.0], [-0.9, -0.9, 1.0]]
    lab = np.concatenate([labels, [9, 9]])
    order = np.arange(n + 2) if order is None else order
    return PointCloud(p[order], labels=lab[order], yaw_deg=0.0, pitch_deg=0.0, point_size_px=3)


@pytest.mark.parametrize("color_pass", ["points", "pixels"])
def test_the_nearer_point_wins_whatever_the_order(color_pass):
    rng = np.random.default_rng(0)
    centre = None
    for _ in range(4):
        order = np.concatenate([rng.permutation(3), [3, 4]])
        view = _front(np.array([1, 2, 3]), np.array([0.2, 0.6, -0.4], np.float32), order=order)
        view.color_pass = color_pass
        img = _render(view)
        c = tuple(img[20, 20])
        assert c != BG
        centre = c if centre is None else centre
        assert c == centre  # the same pixel for every order of the points
    # the winner is label 2 (z = 0.6, nearest): its palette colour at the nearest shade
    alone = _front(np.array([2]), np.array([0.6], np.float32))
    alone.color_pass = color_pass
    assert tuple(_render(alone)[20, 20]) == centre


def test_depths_two_levels_apart_still_occlude():
    """The key keeps DEPTH_MAX + 1 levels over the fitted depth range (here the bounding
    sphere's diameter, 3.24): two points 4/DEPTH_MAX apart in depth (1.2 levels, 1.5e-7
    of the range) are still ordered, whichever of them carries which label."""
    step = np.float32(4.0 / DEPTH_MAX)
    for near_label, far_label in ((1, 2), (2, 1)):
        view = _front(np.array([far_label, near_label]), np.array([0.0, step], np.float32))
        img = _render(view)
        want = _render(_front(np.array([near_label]), np.array([step], np.float32)))
        assert tuple(img[20, 20]) == tuple(want[20, 20])


def test_no_builtin_shader_uses_64_bit_atomics():
    """MoltenVK cannot expose 64-bit buffer atomics: no built-in shader may enable them or
    declare a 64-bit atomic target (64-bit integer arithmetic, shaderInt64, is allowed)."""
    for src in sorted(shaders.HERE.glob("*.*")):
        if src.suffix not in (".comp", ".glsl", ".vert", ".frag"):
            continue
        text = src.read_text()
        assert "GL_EXT_shader_atomic_int64" not in text, src.name
        for line in text.splitlines():
            if re.search(r"\batomic\w*\s*\(", line):
                assert "uint64_t" not in line and "int64_t" not in line, f"{src.name}: {line}"
