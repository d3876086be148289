"""The curve's axes: tick labels read back from the drawn frame state the range the frame drew
with (on a linear and a log axis, for values written after attach), and the labels and the
exact log2 behave as documented."""

import numpy as np
import pytest

import caliper_vk as cv
from caliper_vk.engine import Canvas
from caliper_vk.views import Curve, _curveaxes
from caliper_vk.views.curve import AXIS_COLOR, BACKGROUND, TEXT_COLOR
from images import read_labels


def labels(img, view):
    """(y labels top to bottom, x labels left to right) read from the frame's gutters."""
    r = view.rect
    gw, gh = view.gutter(r.width, r.height)
    panel = img[r.y:r.y + r.height, r.x:r.x + r.width]
    ys = read_labels(panel[:, :gw], TEXT_COLOR, BACKGROUND)
    xs = read_labels(panel[r.height - gh:], TEXT_COLOR, BACKGROUND)
    return [t for _, _, t in ys], [t for _, _, t in xs]


def draw(view, w=480, h=240):
    with Canvas(w, h) as canvas:
        canvas.add(view)
        img = canvas.render()
        assert np.array_equal(img, view.reference(w, h))
    return img


def test_tick_labels_read_from_the_frame():
    view = Curve(np.linspace(-3.5, 12000, 500).astype(np.float32))
    ys, xs = labels(draw(view), view)
    assert ys == ["12000", "10000", "8000", "6000", "4000", "2000", "0"]
    assert xs == ["0", "50", "100", "150", "200", "250", "300", "350", "400", "450"]


def test_a_falling_loss_on_a_log_axis_is_labelled_by_decades():
    steps = np.arange(3000)
    loss = (3.0 * np.exp(-steps / 300.0) + 2e-4).astype(np.float32)
    view = Curve(loss, log_y=True, smoothing=0.9)
    img = draw(view)
    ys, _ = labels(img, view)
    assert ys == ["1", "0.1", "0.01", "0.001"]
    lo, hi = view.range  # log2 units
    assert 2 ** lo == pytest.approx(loss.min(), rel=1e-4)
    assert 2 ** hi == pytest.approx(loss.max(), rel=1e-4)
    # the loss's last fifth lies in [2e-4, 2e-3]: a linear axis would flatten it into one row
    r = view.rect
    plot = img[:r.height - view.gutter(r.width, r.height)[1], view.gutter(r.width, r.height)[0]:]
    tail = plot[:, -plot.shape[1] // 5:]
    rows = np.nonzero((tail[..., :3] != BACKGROUND[:3]).any(axis=2).any(axis=1))[0]
    assert rows.max() - rows.min() > 20


def test_values_at_or_below_zero_are_counted_on_a_log_axis():
    data = np.array([1.0, 0.5, 0.0, -2.0, 0.25, np.nan, 0.125] * 20, np.float32)
    view = Curve(data, log_y=True)
    draw(view, 300, 120)
    assert view.stats == {"nan": 20, "inf": 0, "nonpositive": 40}
    assert "40 ≤ 0 not drawn" in "".join(item[0] for item in view.legend() if isinstance(item, tuple))


def test_labels_follow_values_written_after_attach():
    t = cv.empty((400,))
    with cv.Session(window=False, size=(480, 260), budget=None) as s:
        panel = s.attach(t, "curve", name="loss")
        s.step(0)
        s.flush()
        with panel.writing():
            t.copy_(__import__("torch").linspace(0.0, 0.05, 400))
        s.step(1)
        frame = s.flush()
        ys, xs = labels(frame, panel.view)
    assert ys == ["0.05", "0.04", "0.03", "0.02", "0.01", "0"][-len(ys):] and len(ys) >= 4
    assert xs[0] == "0" and xs[-1] in ("350", "300")


def test_axes_need_room_and_can_be_left_off():
    view = Curve(np.arange(10.0))
    assert view.gutter(100, 50) == (0, 0)
    assert view.gutter(300, 120) != (0, 0)
    assert Curve(axes=False).gutter(300, 120) == (0, 0)
    img = draw(Curve(np.arange(10.0), axes=False), 300, 120)
    assert not (img[..., :3] == AXIS_COLOR[:3]).all(axis=2).any()


def test_log_axis_ranges_must_be_positive():
    with pytest.raises(ValueError, match="log axis draws values > 0"):
        Curve(log_y=True, value_range="symmetric")
    with pytest.raises(ValueError, match="lo > 0"):
        Curve(log_y=True, value_range=(0.0, 1.0))


@pytest.mark.parametrize(("n", "e", "text"), [
    (0, 0, "0"), (25, -1, "2.5"), (-15, -1, "−1.5"), (12000, 0, "12000"), (100000, 0, "1e5"),
    (15, 4, "1.5e5"), (1, -3, "0.001"), (3, -4, "3e−4"), (25, -5, "2.5e−4"), (50, -2, "0.5"),
    (-2, 0, "−2"), (1, 38, "1e38"),
])
def test_labels_are_spelled_from_integers(n, e, text):
    assert _curveaxes.spell(n, e, 8) == text
    assert float(text.replace("−", "-")) == pytest.approx(n * 10.0 ** e)


def test_a_label_too_long_for_its_gutter_is_left_out():
    assert _curveaxes.spell(123456, -5, 6) is None and _curveaxes.spell(123456, -5, 7) == "1.23456"
    assert _curveaxes.spell(123456789, -8, 99) is None  # a label holds at most AX_CHARS (8)


def test_the_exact_log2():
    x = np.float32(2.0) ** np.arange(-126, 128, dtype=np.float32)
    assert [float(_curveaxes.log2_exact(v)) for v in x] == list(range(-126, 128))  # exact at 2^k
    v = np.random.default_rng(3).uniform(-120, 120, 4000)
    v = (2.0 ** v).astype(np.float32)
    got = np.array([_curveaxes.log2_exact(a) for a in v], np.float64)
    np.testing.assert_allclose(got, np.log2(v.astype(np.float64)), rtol=0, atol=2e-5)


def test_a_log_range_within_a_decade_gets_ticks_at_its_values():
    view = Curve(np.linspace(1.2, 1.7, 300).astype(np.float32), log_y=True)
    ys, _ = labels(draw(view, 300, 200), view)
    assert ys == ["1.7", "1.6", "1.5", "1.4", "1.3", "1.2"]
    x = np.random.default_rng(4).uniform(-100, 100, 2000).astype(np.float32)
    got = np.array([_curveaxes.exp2_exact(v) for v in x], np.float64)
    np.testing.assert_allclose(got, 2.0 ** x.astype(np.float64), rtol=3e-7)
