"""The confusion view: counts or row shares, drawn byte-exact by the heatmap passes."""

import numpy as np
import pytest
import torch

import caliper_vk as cv
from caliper_vk.views import Confusion
from images import assert_view_matches_twin
from device_paths import cpu_path

pytestmark = pytest.mark.trimmed  # in the hardware scripts' trimmed suite (pyproject.toml)

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
        assert raw.path == cpu_path()
        first = s.render()
        with panel.writing():
            m.copy_(torch.from_numpy(counts(5)).int())
        second = s.render()
        assert not np.array_equal(first, second)
        assert np.array_equal(second, s.canvas.reference())


def test_cells_carry_their_counts_and_axes_their_class_names(artifacts):
    m = np.array([[50, 3, 0], [2, 41, 7], [0, 0, 0]])
    view = Confusion(m, normalize="row", classes=["cat", "dog", "eel"])
    assert view.tokens == [["50", "3", "0"], ["2", "41", "7"], ["0", "0", "0"]]
    assert view.row_labels == view.col_labels == ["cat", "dog", "eel"]
    assert view.layout(240, 200)["fit"] >= 2  # big enough cells: the counts are drawn
    assert_view_matches_twin(view, 240, 200, artifacts)
    floats = Confusion(np.array([[0.5, np.nan], [2.0, 1.25]]))
    assert floats.tokens == [["0.5", ""], ["2", "1.25"]]
    assert Confusion(np.ones((65, 65))).tokens is None  # too many classes for numbers
    assert Confusion(m, counts_in_cells=False).tokens is None
    with pytest.raises(ValueError, match="classes has 2 names for 3 classes"):
        Confusion(m, classes=["a", "b"])


def test_live_counts_rewrite_the_cells_text():
    m = cv.empty((3, 3), dtype=torch.int32)
    m.zero_()
    with cv.Session(window=False, size=(300, 260)) as s:
        panel = s.attach(m, "confusion", name="val")
        s.render()
        assert panel.view.tokens[0] == ["0", "0", "0"]
        with panel.writing():
            m[0, 0] = 17
        frame = s.render()
        assert panel.view.tokens[0] == ["17", "0", "0"]
        assert np.array_equal(frame, s.canvas.reference())


def test_counts_colour_over_zero_to_the_largest_finite_count_resolved_in_the_frame(artifacts):
    """(0, 1) grown to the finite counts on the device: specials and empty matrices keep (0, 1)."""
    for m, want in ((np.zeros((3, 3)), (0.0, 1.0)), (np.array([[0.5, np.inf], [np.nan, 0.25]]), (0.0, 1.0)),
                    (np.array([[3.0, np.inf], [np.nan, 250.0]]), (0.0, 250.0))):
        view = Confusion(m.astype(np.float32), counts_in_cells=False)
        assert view.range == want  # the twin's, before a frame
        assert_view_matches_twin(view, 80, 80, artifacts)
        assert view.range == want  # the frame's, read back with its counters
        assert view.stats["below"] == view.stats["above"] == 0


def test_not_square_is_refused():
    with pytest.raises(ValueError, match="expected a square"):
        Confusion(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="normalize"):
        Confusion(normalize="col")
