"""The images view: grids of small arrays, per-tile or shared normalisation, byte-exact."""

import numpy as np
import pytest

import caliper_vk as cv
from caliper_vk.engine import Canvas
from caliper_vk.views import Images
from images import assert_same_image, assert_view_matches_twin
from device_paths import cpu_path

pytestmark = pytest.mark.trimmed  # in the hardware scripts' trimmed suite (pyproject.toml)

RNG = np.random.default_rng(9)


def kernels(out=8, inp=3, k=5):
    return RNG.normal(size=(out, inp, k, k)).astype(np.float32)


CASES = {
    "conv-kernels-per-tile": (kernels(), {}, (240, 160)),
    "conv-kernels-shared-symmetric": (kernels(), {"normalize": "shared", "value_range": "symmetric",
                                                  "colormap": "coolwarm"}, (240, 160)),
    "feature-maps": (RNG.random((6, 28, 28)), {}, (300, 200)),
    "one-tile": (RNG.normal(size=(12, 20)), {}, (100, 60)),
    "wide-tiles": (RNG.normal(size=(5, 3, 17)), {"value_range": (-1, 1)}, (200, 90)),
    "specials": (np.array([[[np.nan, np.inf], [-np.inf, 1.0]], [[0.0, 2.0], [1e-40, -1.0]]],
                          np.float32), {}, (80, 40)),
    "too-small-panel": (RNG.normal(size=(64, 4, 4)), {}, (20, 10)),
    "empty": (np.zeros((0, 3, 3), np.float32), {}, (30, 30)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_images_match_twin(name, artifacts):
    data, options, (w, h) = CASES[name]
    assert_view_matches_twin(Images(data, **options), w, h, artifacts)


def test_per_tile_normalisation_shows_each_tile_full_range():
    small = np.linspace(0, 0.01, 16, dtype=np.float32).reshape(1, 4, 4)
    big = np.linspace(0, 100, 16, dtype=np.float32).reshape(1, 4, 4)
    data = np.concatenate([small, big])
    per_tile = Images(data, normalize="tile", colormap="gray")
    shared = Images(data, normalize="shared", colormap="gray")
    with Canvas(100, 50) as canvas:
        canvas.add(per_tile)
        a = canvas.render()
    with Canvas(100, 50) as canvas:
        canvas.add(shared)
        b = canvas.render()
    inside_small_tile = (slice(2, 48), slice(2, 48))
    assert a[inside_small_tile][..., 0].max() > 200  # alone it spans the whole colormap
    assert b[inside_small_tile][..., 0].max() < 5  # next to the big tile it is nearly black


def test_attached_kernels_are_zero_copy():
    w = cv.empty((16, 1, 3, 3))
    w.normal_()
    with cv.Session(window=False, size=(200, 140)) as s:
        panel = s.attach(w, "images", name="conv1.weight")
        assert panel.path == cpu_path()
        assert np.array_equal(s.render(), s.canvas.reference())


def test_bad_shape_is_clear():
    with pytest.raises(ValueError, match=r"takes \(tiles, h, w\)"):
        Images(np.zeros(5))


def test_a_tile_too_long_for_32_bit_pixel_mapping_takes_the_64_bit_path(artifacts):
    # (pw - 1) * tile width passes 2^32: the pipeline is specialised to muldiv.glsl's 64-bit path
    data = np.linspace(-1, 1, 2 ** 23, dtype=np.float32).reshape(1, 1, -1)
    view = Images(data)
    _cols, _rows, pw, _ph = view.layout(700, 20)
    assert (pw - 1) * 2 ** 23 >= 2 ** 32
    with Canvas(700, 20) as canvas:
        canvas.add(view)
        got = canvas.render()
        assert ("pipeline", "images", ((0, 1),)) in canvas.device.cache
    want, _ = view.reference_with_stats(700, 20)
    assert_same_image(got, want, artifacts)


@pytest.mark.parametrize("name", ["conv-kernels-per-tile", "wide-tiles", "specials"])
def test_the_64_bit_path_draws_the_same_pixels(name, artifacts, monkeypatch):
    from caliper_vk.views import images

    monkeypatch.setattr(images, "wide", lambda *products: 1)  # force the 64-bit division path
    data, options, (w, h) = CASES[name]
    assert_view_matches_twin(Images(data, **options), w, h, artifacts)
