"""The confusion view: counts or row shares, drawn byte-exact by the heatmap passes."""

import numpy as np
import pytest
import torch

import caliper_vk as cv
from caliper_vk.views import Confusion
from images import assert_view_matches_twin

RNG = np.random.default_rng(5)


def counts(c=10):
    m = RNG.integers(0, 20, (c, c))
    m[np.arange(c), np.arange(c)] += 200
    return m


@pytest.mark.parametrize("normalize", ["none", "row"])
def test_matches_twin(normalize, artifacts):
    assert_view_matches_twin(Confusion(counts(), normalize=normalize), 200, 200, artifacts)


def test_row_normalised_cells_are_shares_and_empty_rows_stay_empty(artifacts):
    m = counts(4)
    m[2] = 0  # a class with no examples
    view = Confusion(m, normalize="row")
    shown = view.data
    assert np.allclose(np.nansum(shown, axis=1)[[0, 1, 3]], 1.0, atol=1e-6)
    assert np.isnan(shown[2]).all()
    assert_view_matches_twin(view, 80, 80, artifacts)
    assert view.stats["nan"] == 4


def test_live_counts_update_in_place():
    m = cv.empty((5, 5), dtype=torch.int32)
    with cv.Session(window=False, size=(120, 120)) as s:
        panel = s.attach(m, "confusion", normalize="row", name="val confusion")
        assert panel.path == "host staging"
        assert panel.reason == "row shares are computed on the host each frame"
        raw = s.attach(m, "confusion", name="val counts")
        assert raw.path == "zero-copy"
        first = s.render()
        with panel.writing():
            m.copy_(torch.from_numpy(counts(5)).int())
        second = s.render()
        assert not np.array_equal(first, second)
        assert np.array_equal(second, s.canvas.reference())


def test_not_square_is_refused():
    with pytest.raises(ValueError, match="expected a square"):
        Confusion(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="normalize"):
        Confusion(normalize="col")
