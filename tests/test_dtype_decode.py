"""Shaders decode every contract dtype exactly, special values included (staging path)."""

import numpy as np
import pytest

from caliper_vk.views import Heatmap, PointCloud
from caliper_vk.views._source import Source
from images import assert_view_matches_twin

pytestmark = pytest.mark.trimmed  # in the hardware scripts' trimmed suite (pyproject.toml)


def f16_specials():
    bits = np.array([0x0000, 0x8000, 0x0001, 0x03FF, 0x8200, 0x0400, 0x3C00, 0x7BFF, 0xFBFF,
                     0x7C00, 0xFC00, 0x7E00, 0x7C01, 0x3555, 0xC000, 0x1234], np.uint16)
    return bits.view(np.float16).reshape(4, 4)


def bf16_specials():
    f = np.array([0.0, -0.0, 1.0, -2.5, 3e38, -3e38, np.inf, -np.inf, np.nan, 1e-39, 7.0, 0.1,
                  123.0, -0.001, 65504.0, 1e-20], np.float32)
    return (f.view(np.uint32) >> 16).astype(np.uint16).reshape(4, 4)


SOURCES = {
    "float16-specials": (f16_specials(), "float16"),
    "bfloat16-specials": (bf16_specials(), "bfloat16"),
    "int32-extremes": (np.array([[2**31 - 1, -2**31, 2**24 + 1, -(2**24) - 3],
                                 [0, 1, -1, 16777217]], np.int32), "int32"),
    "uint8-all": (np.arange(256, dtype=np.uint8).reshape(16, 16), "uint8"),
    "float16-odd-length": (np.linspace(-3, 3, 15).astype(np.float16).reshape(3, 5), "float16"),
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_heatmap_decodes_stored_dtype(name, artifacts):
    array, dtype = SOURCES[name]
    view = Heatmap()
    view.set_source(Source(array, dtype, live=True))
    assert_view_matches_twin(view, 40, 30, artifacts)


def test_pointcloud_reads_float16_positions(artifacts):
    pos = np.random.default_rng(3).normal(size=(501, 3)).astype(np.float16)
    pos[7] = np.float16(np.nan)
    view = PointCloud()
    view.set_source(Source(pos, "float16", live=True), labels=np.arange(501) % 10)
    assert_view_matches_twin(view, 120, 90, artifacts)
    assert view.stats["nonfinite"] == 1
