"""The heatmap view on the GPU equals its numpy twin, byte for byte."""

import numpy as np
import pytest

from caliper_vk.engine import Canvas
from caliper_vk.views import Heatmap
from images import assert_same_image, assert_view_matches_twin

pytestmark = pytest.mark.trimmed  # in the hardware scripts' trimmed suite (pyproject.toml)

RNG = np.random.default_rng(99)


def specials(shape):
    a = RNG.normal(size=shape).astype(np.float32)
    flat = a.reshape(-1)
    flat[::9] = np.nan
    flat[4::13] = np.inf
    flat[6::17] = -np.inf
    flat[2::23] = np.float32(1e-41)
    flat[3::29] = np.float32(-3e-39)
    return a


CASES = {
    "auto-viridis": (RNG.normal(size=(20, 30)), {}, (120, 80)),
    "magma-upsample": (RNG.random((7, 5)), {"colormap": "magma"}, (101, 67)),
    "symmetric-diverging": (RNG.normal(size=(16, 16)), {"colormap": "coolwarm",
                                                        "value_range": "symmetric"}, (64, 64)),
    "fixed-range-clamps": (RNG.normal(size=(32, 8)) * 3, {"value_range": (-1.0, 1.0)}, (80, 120)),
    "nan-inf-subnormal": (specials((24, 24)), {"colormap": "RdBu_r"}, (96, 96)),
    "downsample-1024": (RNG.normal(size=(1024, 1024)).astype(np.float32), {}, (256, 256)),
    "one-d": (np.linspace(-5, 5, 37), {}, (111, 20)),
    "one-d-shaped": (np.arange(64, dtype=np.float32), {"shape": (8, 8)}, (64, 64)),
    "single-cell": (np.array([[3.5]]), {}, (10, 10)),
    "constant": (np.full((4, 4), 7.0), {}, (16, 16)),
    "all-nan": (np.full((3, 3), np.nan), {}, (9, 9)),
    "int-input": (RNG.integers(0, 255, (12, 12), dtype=np.uint8), {"colormap": "gray"}, (48, 48)),
    "huge-values": (np.array([[3e38, -3e38], [1e-30, 0]], np.float32), {}, (20, 20)),
    "tiny-range": (np.array([[1e-35, 2e-35], [3e-35, 4e-35]], np.float32), {}, (20, 20)),
    "one-pixel-panel": (RNG.normal(size=(5, 5)), {}, (1, 1)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_heatmap_matches_twin(name, artifacts):
    data, options, (w, h) = CASES[name]
    assert_view_matches_twin(Heatmap(data, **options), w, h, artifacts)


def test_counts_special_values():
    a = np.array([[np.nan, np.inf, -np.inf], [0.0, 5.0, -5.0]], np.float32)
    view = Heatmap(a, value_range=(-1, 1))
    with Canvas(30, 20) as canvas:
        canvas.add(view)
        img = canvas.render()
    assert view.stats == {"nan": 1, "posinf": 1, "neginf": 1, "below": 1, "above": 1}
    # NaN, +Inf and -Inf each have their own colour
    assert len({tuple(img[5, x]) for x in (5, 15, 25)}) == 3


@pytest.mark.parametrize("shape", [(0,), (0, 5), (3, 0)])
def test_empty_tensor_renders_as_no_data(shape, artifacts):
    view = Heatmap(np.zeros(shape, np.float32))
    with Canvas(8, 8) as canvas:
        canvas.add(view)
        img = canvas.render()
        assert_same_image(img, canvas.reference(), artifacts)
    assert (img == (22, 22, 26, 255)).all()
    assert view.stats == {"nan": 0, "posinf": 0, "neginf": 0, "below": 0, "above": 0}
