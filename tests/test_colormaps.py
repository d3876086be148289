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


def test_baked_tables_are_matplotlibs_and_opening_a_view_imports_no_matplotlib(tmp_path, monkeypatch):
    """The named tables ship baked (setup.py); each equals matplotlib's sampling, a stale or
    missing file is baked again, and a view or the dashboard's colour lookups leave matplotlib
    unimported (0.3 s and 30 MB at open)."""
    import subprocess
    import sys

    for name in colormaps.SEQUENTIAL + colormaps.DIVERGING:
        want = np.round(matplotlib.colormaps[name](np.linspace(0, 1, 256)) * 255).astype(np.uint8)
        assert np.array_equal(unpack_rgba(colormaps.lut(name)), want), name
    for name in colormaps.PALETTES:
        cmap = matplotlib.colormaps[name]
        want = np.round(cmap(np.arange(cmap.N)) * 255).astype(np.uint8)
        assert np.array_equal(unpack_rgba(colormaps.palette(name)), want), name
    stale = tmp_path / "colormaps.npz"
    np.savez(stale, viridis=np.zeros(256, np.uint32))  # an older set of names
    monkeypatch.setattr(colormaps, "ASSET", stale)
    colormaps._baked.cache_clear()
    try:
        assert np.array_equal(colormaps._baked()["magma"], colormaps._sample("magma"))
    finally:
        colormaps._baked.cache_clear()
    code = ("import sys; from caliper_vk import colormaps; from caliper_vk.views import Heatmap; "
            "colormaps.lut('viridis'); colormaps.lut('coolwarm'); colormaps.palette('tab10'); "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr
