"""The confusion view: counts or row shares, drawn byte-exact by the heatmap passes."""

import numpy as np
import pytest
import torch

import caliper_vk as cv
from caliper_vk.views import Confusion
from caliper_vk.views.confusion import count_text
from caliper_vk.views.textgrid import glyph_table
from images import assert_panel_matches_twin, assert_same_image, assert_view_matches_twin
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
        assert panel.path == cpu_path()  # the shares are made on the device from the tensor in place
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


EDGE_COUNTS = [0.0, -0.0, 1.0, -1.0, 7.0, 123456789.0, 16777217.0, 2.0 ** 40, 2.0 ** 63, 18446742974197923840.0,
               2.0 ** 64, -(2.0 ** 64), 3e38, -3e38, 0.5, -0.5, 0.125, 1.25, 2.675, 9.995, 99.95, 999.5, 998.5,
               0.0001, 0.00012345, 0.0000999, 1e-5, 1.5e-10, 1e-10, 9.9e-11, 1e-20, 1e-40, 1234.5, 8388607.5,
               4194303.75, 0.1, 0.3, 1 / 3, 2 / 3, 12.5, 0.015625, 1.005, 100.5, 10.05, 0.9995, 0.99949,
               -0.001234, -123.456, 5e-5, 3.14159, 2.5, 3.5, 99.5, 9.5, 0.00995, 999999.5, 1000.5, 65504.5,
               np.nan, np.inf, -np.inf, 2.0 ** -40, 2.0 ** -41, 250.0]


def render_strings(view, width, height):
    """Render ``view`` alone; the strings buffer the frame drew (cells pass and host labels) and the frame."""
    from caliper_vk.engine import Canvas

    with Canvas(width, height) as canvas:
        canvas.add(view)
        frame = canvas.render()
        lay = view.layout(width, height)
        want = view.strings(lay)
        got = view._buffers["strings"].view(np.uint32, want.size).reshape(want.shape).copy()
        return got, want, frame, lay


@pytest.mark.parametrize("case", ["edges", "random"])
def test_cells_text_is_formatted_on_the_device_as_count_text(case, artifacts):
    """The cells pass writes each count's text (count_text's rule) into the strings the grid draws:
    the same glyph words as the twin for whole numbers of every size, 3-digit roundings that tie,
    carry into the next decade or go scientific, tiny and huge ends, negatives and specials."""
    if case == "edges":
        values = np.array(EDGE_COUNTS, np.float32).reshape(8, 8)
    else:
        rng = np.random.default_rng(9)
        mag = 10.0 ** rng.uniform(-12, 8, 256)
        values = (mag * rng.choice([-1.0, 1.0], 256)).astype(np.float32).reshape(16, 16)
        values.reshape(-1)[::5] = np.round(values.reshape(-1)[::5])  # some whole ones
    view = Confusion(values)
    width = 200 * values.shape[1] + 40
    got, want, frame, lay = render_strings(view, width, 24 * values.shape[0] + 30)
    n = values.size
    assert lay["fit"] >= 22  # every string whole, none clipped
    texts = count_text(values).reshape(-1)
    assert [int(k) for k in want[:n, 0]] == [len(t) for t in texts]
    assert np.array_equal(got[:n], want[:n]), [
        (float(values.reshape(-1)[i]), texts[i]) for i in np.flatnonzero((got[:n] != want[:n]).any(axis=1))]
    assert_same_image(frame, view.reference(*frame.shape[1::-1]), artifacts / case)


def test_count_text_rule():
    """Python's own formatting, but for the two ends no 64-bit integer holds."""
    values = [0.5, np.nan, 2.0, -0.0, 1234.5, 0.000123456, 999.7, 1e-11, 3e20, -3e20, 2.0 ** 63]
    got = count_text(np.array(values, np.float32))
    assert got.tolist() == ["0.5", "", "2", "0", "1.23e+03", "0.000123", "1e+03", "~0", ">2^64", "<-2^64",
                            "9223372036854775808"]


def test_cells_text_is_clipped_as_encode_clips(artifacts):
    view = Confusion(np.array([[123456, 7], [0.123456, 12]], np.float32))
    got, want, frame, lay = render_strings(view, 72, 60)
    assert lay["fit"] == 3
    assert np.array_equal(got[:4], want[:4])
    assert want[0, 3] == glyph_table()[1]["ellipsis"] and want[1, 0] == 1  # "12…", "7"
    assert_same_image(frame, view.reference(72, 60), artifacts)


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8, torch.float32, torch.float16])
def test_row_shares_made_on_the_device_from_counts_in_place(dtype, artifacts):
    """normalize="row" reads the tensor in place: the cells pass sums each row (exactly for integer
    counts) and multiplies by a division-free reciprocal; the twin's shares are the same bits.
    Empty rows are NaN; float rows with an infinite total are 0 (NaN where the count is infinite)."""
    c = 6
    m = cv.empty((c, c), dtype=dtype)
    rng = np.random.default_rng(int(str(dtype)[-2:].strip("t") or 0))
    with cv.Session(window=False, size=(260, 220)) as s:
        panel = s.attach(m, "confusion", normalize="row", name="shares")
        assert panel.path == cpu_path()
        for step in range(3):
            a = rng.integers(0, 120 if dtype == torch.uint8 else 5000, (c, c)).astype(np.float32)
            a[step] = 0  # a class with no examples this step
            if dtype.is_floating_point:
                a[(step + 1) % c, 2] = 0.375
                if step == 2:
                    a[3, 1], a[4, 0] = np.inf, np.nan
            with panel.writing():
                m.copy_(torch.from_numpy(a).to(dtype))
            frame = s.render()
            assert_panel_matches_twin(frame, panel, m, artifacts / f"{step}", normalize="row")
            shares = panel.view.data
            assert np.isnan(shares[step]).all()
            if step < 2:
                rest = [r for r in range(c) if r != step]
                assert np.allclose(shares[rest].sum(axis=1), 1.0, atol=1e-5)
