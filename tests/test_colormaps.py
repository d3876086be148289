"""Colour tables come from matplotlib's data, not from hand-typed numbers."""

import matplotlib
import numpy as np
import pytest

from caliper_vk import colormaps
from caliper_vk.views._exact import unpack_rgba


@pytest.mark.parametrize("name", ["viridis", "magma", "coolwarm"])
def test_lut_is_matplotlib_sampled(name):
    rgba = unpack_rgba(colormaps.lut(name))
    want = np.round(matplotlib.colormaps[name](np.linspace(0, 1, 256)) * 255).astype(np.uint8)
    assert np.array_equal(rgba, want)


def test_tab10_has_ten_distinct_colours():
    pal = unpack_rgba(colormaps.palette("tab10"))[:, :3].astype(int)
    assert len(pal) == 10
    distances = [np.abs(a - b).sum() for i, a in enumerate(pal) for b in pal[i + 1:]]
    assert min(distances) > 60


def test_unknown_names_list_the_accepted_ones():
    with pytest.raises(colormaps.UnknownColormapError, match="viridis, magma"):
        colormaps.lut("nope")
    with pytest.raises(colormaps.UnknownColormapError, match="tab10"):
        colormaps.palette("viridis")
