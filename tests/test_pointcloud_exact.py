"""The point-cloud view on the GPU equals its numpy twin, byte for byte."""

import numpy as np
import pytest

from caliper_vk.engine import Canvas
from caliper_vk.views import PointCloud
from images import assert_same_image, assert_view_matches_twin

pytestmark = pytest.mark.trimmed  # in the hardware scripts' trimmed suite (pyproject.toml)

RNG = np.random.default_rng(1234)


def cloud(n, dim=3, scale=1.0):
    return (RNG.normal(size=(n, dim)) * scale).astype(np.float32)


def special_points():
    p = cloud(400)
    p[::7, 0] = np.nan
    p[3::11, 1] = np.inf
    p[5::13, 2] = -np.inf
    p[1::17] = np.float32(1e-40)  # subnormal coordinates flush to zero
    p[2::19, 0] = np.float32(-1e-42)
    return p


def duplicates():
    p = np.repeat(cloud(20), 5, axis=0)  # ties resolve to the lowest index
    return p


CASES = {
    # name: (positions, view options, (width, height))
    "uniform-small": (cloud(300), {}, (64, 48)),
    "labels-size1": (cloud(2000), {"labels": RNG.integers(0, 10, 2000), "point_size_px": 1},
                     (160, 120)),
    "labels-size2": (cloud(2000), {"labels": RNG.integers(0, 10, 2000), "point_size_px": 2},
                     (160, 120)),
    "labels-size7-odd-canvas": (cloud(500), {"labels": RNG.integers(-2, 25, 500),
                                             "point_size_px": 7}, (257, 131)),
    "size16": (cloud(60), {"point_size_px": 16}, (200, 150)),
    "values-auto": (cloud(1500), {"values": RNG.normal(size=1500), "point_size_px": 3},
                    (200, 200)),
    "values-symmetric-magma": (cloud(800), {"values": RNG.normal(size=800),
                                            "value_range": "symmetric", "colormap": "magma"},
                               (150, 100)),
    "values-fixed-nan": (cloud(800), {"values": np.where(RNG.random(800) < 0.1, np.nan,
                                                         RNG.normal(size=800)),
                                      "value_range": (-0.5, 0.5), "colormap": "coolwarm"},
                         (150, 100)),
    "camera-front": (cloud(700), {"yaw_deg": 0.0, "pitch_deg": 0.0}, (120, 90)),
    "camera-side": (cloud(700), {"yaw_deg": 90.0, "pitch_deg": 0.0}, (120, 90)),
    "camera-odd": (cloud(700), {"yaw_deg": -135.0, "pitch_deg": 75.0}, (120, 90)),
    "camera-top": (cloud(700), {"yaw_deg": 180.0, "pitch_deg": -90.0}, (120, 90)),
    "zoom-offscreen": (cloud(1000), {"zoom": 6.0, "point_size_px": 5}, (100, 80)),
    "fixed-bounds": (cloud(600, scale=3.0), {"bounds": ((-1, -1, -1), (1, 1, 1))}, (100, 80)),
    "nan-inf-subnormal": (special_points(), {"point_size_px": 3}, (128, 96)),
    "ties": (duplicates(), {"labels": np.arange(100) % 10, "point_size_px": 4}, (96, 96)),
    "all-same-point": (np.ones((50, 3), np.float32), {"labels": np.arange(50)}, (40, 40)),
    "empty": (np.zeros((0, 3), np.float32), {}, (64, 48)),
    "one-point": (np.array([[0.3, -0.2, 0.1]], np.float32), {"point_size_px": 5}, (33, 17)),
    "two-d": (cloud(900, dim=2), {"labels": RNG.integers(0, 10, 900)}, (128, 128)),
    "huge-coordinates": (np.array([[1e30, 0, 0], [-1e30, 1e30, 0], [0, 0, 3e38], [1, 2, 3]],
                                  np.float32), {"point_size_px": 3}, (64, 64)),
    "float64-input": (cloud(300).astype(np.float64), {}, (64, 48)),
    "one-pixel-panel": (cloud(50), {}, (1, 1)),
    "large-100k": (cloud(100_000), {"labels": RNG.integers(0, 10, 100_000), "point_size_px": 2},
                   (400, 300)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pointcloud_matches_twin(name, artifacts):
    positions, options, (w, h) = CASES[name]
    assert_view_matches_twin(PointCloud(positions, **options), w, h, artifacts)


@pytest.mark.parametrize("color_pass", ["points", "pixels"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_both_color_passes_match_twin(name, color_pass, artifacts):
    """The per-point paint and the per-pixel resolve each give the twin's bytes (auto picks
    one of them per frame; this runs every case through both)."""
    positions, options, (w, h) = CASES[name]
    view = PointCloud(positions, **options)
    view.color_pass = color_pass
    assert_view_matches_twin(view, w, h, artifacts)


@pytest.mark.parametrize("size", [1, 2, 6, 8, 9, 31, 32, 63, 64])
def test_shader_footprint_equals_the_host_footprint(size, artifacts):
    """The shaders derive a point's footprint from its size with integer math; it must be
    footprint(size), the twin's offset list, for every size (edges of the panel included)."""
    p = np.array([[0, 0, 0], [0.9, 0.7, 0], [-0.95, -0.9, 0], [0.2, -0.99, 0]], np.float32)
    for color_pass in ("points", "pixels"):
        view = PointCloud(p, point_size_px=size, yaw_deg=0.0, pitch_deg=0.0)
        view.color_pass = color_pass
        assert_view_matches_twin(view, 150, 110, artifacts / color_pass)


def test_color_pass_follows_the_point_count(artifacts):
    """auto: per point while the footprints cover fewer pixels than the panel, per pixel
    beyond; switching between them re-records and stays exact."""
    view = PointCloud(cloud(100), point_size_px=2)
    with Canvas(80, 60) as canvas:
        canvas.add(view)
        canvas.render()
        assert view.per_point()
        view.set_data(cloud(5000))
        assert_same_image(canvas.render(), canvas.reference(), artifacts / "pixels")
        assert not view.per_point()
        view.set_data(cloud(200))
        assert_same_image(canvas.render(), canvas.reference(), artifacts / "points")
        assert view.per_point()


def test_counts_nonfinite_and_offscreen():
    p = np.array([[0, 0, 0], [np.nan, 0, 0], [0, np.inf, 0], [1e6, 0, 0]], np.float32)
    view = PointCloud(p, bounds=((-1, -1, -1), (1, 1, 1)))
    with Canvas(50, 50) as canvas:
        canvas.add(view)
        canvas.render()
    assert view.stats == {"points": 4, "nonfinite": 2, "offscreen": 1, "nonfinite_values": 0,
                          "drawn": 1}


def test_grid_of_panels_matches_composed_twin(artifacts):
    with Canvas(300, 200, rows=2, cols=3, gap=3) as canvas:
        for k in range(5):
            canvas.add(PointCloud(cloud(300), labels=RNG.integers(0, 10, 300),
                                  yaw_deg=30.0 * k), row=k // 3, col=k % 3)
        assert_same_image(canvas.render(), canvas.reference(), artifacts)


def test_update_between_frames(artifacts):
    view = PointCloud(cloud(100))
    with Canvas(80, 60) as canvas:
        canvas.add(view)
        first = canvas.render()
        view.set_data(cloud(5000), labels=RNG.integers(0, 10, 5000))  # grows the buffers
        view.set_camera(yaw_deg=10.0, zoom=1.5)
        second = canvas.render()
        assert_same_image(second, canvas.reference(), artifacts)
        assert not np.array_equal(first, second)


def test_labels_use_ten_distinct_colours():
    p = np.zeros((10, 3), np.float32)
    p[:, 0] = np.linspace(-1, 1, 10)
    view = PointCloud(p, labels=np.arange(10), point_size_px=3, yaw_deg=0.0, pitch_deg=0.0)
    with Canvas(200, 20) as canvas:
        canvas.add(view)
        img = canvas.render()
    colours = {tuple(c) for c in img.reshape(-1, 4)} - {(22, 22, 26, 255)}
    assert len(colours) == 10


def test_bounds_must_be_finite_in_float32():
    with pytest.raises(ValueError, match="must be finite float32 numbers"):
        PointCloud(bounds=((0, 0, 0), (1e39, 1, 1)))


def test_the_device_fit_writes_its_twins_words_and_is_the_float64_fit_to_float32_precision():
    """pointcloud_fit writes into the parameter block exactly the words of its twin
    (_pointfit.device_fit), at every scale float32 holds; and those are the box centre and half
    diagonal of the float64 formula to float32 precision (the Newton reciprocal's error)."""
    from caliper_vk.engine.shaders.params import ParamValues
    from caliper_vk.views._pointfit import POINTCLOUD as PC
    from caliper_vk.views import _exact

    rng = np.random.default_rng(7)
    with Canvas(64, 48) as canvas:
        for trial in range(10):
            n, dim = (20_000, 3) if trial % 2 else (3000, 2 + trial % 3 // 2)
            pos = (rng.normal(size=(n, dim)) * 10.0 ** rng.uniform(-30, 30)).astype(np.float32)
            if trial % 4 == 1:
                pos[rng.integers(0, n, 5), 0] = [np.nan, np.inf, -np.inf, np.nan, np.inf]
            view = PointCloud(pos, zoom=1.5)
            panel = canvas.add(view)
            canvas.render()
            got = ParamValues(PC, view._buffers["params"].view(np.uint32, PC.words))
            want = view.params_fitted(64, 48)
            assert got == want, trial
            canvas.remove(panel)
            fin = pos[np.isfinite(pos).all(axis=1)]
            lo, hi = (_exact.ftz(v).astype(np.float64) for v in (fin.min(axis=0), fin.max(axis=0)))
            radius = float(np.sqrt((((hi - lo) / 2) ** 2).sum()))
            centre = [want[c] for c in ("cx", "cy", "cz")[:dim]]
            assert np.allclose(centre, (lo + hi) / 2, rtol=2e-7, atol=0)
            assert abs(-want["zmin"] / radius - 1) < 1e-6
            assert abs(want["scale"] * radius / (1.5 * 0.45 * 48) - 1) < 1e-6
