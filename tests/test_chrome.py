"""Chrome: title bars, legends, the status line and stopped-panel notices, drawn from the
glyph atlas with the text views' integer blend, placed so they never cover a view."""

import numpy as np
import pytest
import torch

import caliper_vk as cv
from caliper_vk import chrome, glyphs
from caliper_vk.engine import Canvas, Rect
from caliper_vk.live import title_items
from caliper_vk.views import Confusion, Curve, Heatmap, Histogram, Images, PointCloud, Text
from caliper_vk.views import text as text_view


def texts(items) -> str:
    return "".join(i[0] for i in items if isinstance(i, tuple))


def test_chrome_text_is_the_text_views_glyphs_and_blend():
    """The same string drawn by the Text view's shader and by the chrome, pixel for pixel."""
    sample = "Loss 3.14 — naïve … ≤ → ∞"
    cw, ch = chrome.cell()
    width = 2 * text_view.PAD + cw * len(sample)
    with Canvas(width, ch + 2 * text_view.PAD) as canvas:
        canvas.add(Text(sample))
        gpu = canvas.render()
    bar = chrome.render_bar([(sample, text_view.FOREGROUND)], (), width + 2 * chrome.PAD, ch + 2,
                            background=text_view.BACKGROUND)
    p = text_view.PAD
    assert np.array_equal(gpu[p:p + ch, p:p + cw * len(sample)],
                          bar[1:1 + ch, chrome.PAD:chrome.PAD + cw * len(sample)])


def test_bar_places_the_legend_against_the_right_edge():
    lut = np.arange(256, dtype=np.uint32) * 0x010101 | 0xFF000000
    right = chrome.range_legend(-1.5, 2.0, lut)
    bar = chrome.render_bar([("title", chrome.FOREGROUND)], right, 400)
    assert texts(right) == "−1.5  2"
    ink = np.nonzero((bar[..., :3] != chrome.BACKGROUND[:3]).any(axis=(0, 2)))[0]
    assert ink[0] >= chrome.PAD and ink[-1] < 400 - chrome.PAD
    legend_w = sum(chrome.item_width(i) for i in right)
    ramp_x = 400 - chrome.PAD - legend_w + chrome.item_width(right[0])
    row = bar[bar.shape[0] // 2, ramp_x:ramp_x + 64, 0]
    assert row[0] == 0 and row[-1] == 255 and (np.diff(row.astype(int)) >= 0).all()


def test_when_both_do_not_fit_the_name_gives_way_to_half_then_both_end_in_ellipses():
    cw, _ = chrome.cell()
    room = 40 * cw
    left = [("a very long panel name that goes on and on", chrome.FOREGROUND)]
    right = [("a long legend text that also goes on", chrome.DIM)]
    bar = chrome.render_bar(left, right, room + 2 * chrome.PAD)
    assert bar.shape == (chrome.line_height(), room + 2 * chrome.PAD, 4)
    kept_left = chrome.clip(left, room // 2)
    assert texts(kept_left).endswith("…") and len(texts(kept_left)) <= 20
    short = [("loss", chrome.FOREGROUND)]
    assert chrome.clip(short, 4 * cw) == short  # an exact fit is not cut
    assert texts(chrome.clip(short, 3 * cw)) == "lo…"
    assert texts(chrome.clip([chrome.Ramp((1, 2), 64)], 10)) == "…"  # a ramp is whole or gone
    # a class swatch never stays without its label
    legend = [chrome.Swatch(1), ("0 ", chrome.DIM), chrome.Swatch(2), ("1 ", chrome.DIM)]
    assert chrome.clip(legend, 4 * cw) == [chrome.Swatch(1), ("0 ", chrome.DIM), ("…", chrome.DIM)]


def test_block_wraps_and_ends_in_an_ellipsis_when_cut():
    cw, ch = chrome.cell()
    block = chrome.render_block([("word " * 60, chrome.ERROR)], 20 * cw + 2 * chrome.PAD,
                                3 * ch + 2 * chrome.PAD)
    assert block.shape[1] == 20 * cw + 2 * chrome.PAD
    last_row = block[chrome.PAD + 2 * ch: chrome.PAD + 3 * ch]
    assert (last_row[..., 0] > 200).any()  # the third line is drawn (in red)
    assert texts([("x", 0)]) == "x"


def test_number_formatting():
    assert chrome.number(-0.000123) == "−0.000123"
    assert chrome.number(12345.0) == "1.23e+04"
    assert chrome.number(float("nan")) == "NaN"
    assert chrome.number(float("-inf")) == "−∞"


def test_every_character_in_the_legends_has_a_glyph():
    lut = np.zeros(256, np.uint32)
    for items in (chrome.range_legend(-1, 1, lut, "share of row"),
                  Histogram(np.random.randn(100), history=3).legend(),
                  Curve(np.arange(5.0), smoothing=0.9).legend(),
                  Images(np.random.randn(4, 3, 3)).legend()):
        for ch in texts(items):
            assert glyphs.covers(ch), repr(ch)


# -- legends of the views -------------------------------------------------------------------------

def test_heatmap_legend_is_its_colormap_over_its_range():
    view = Heatmap(np.array([[-2.0, 0.5], [1.0, 4.0]], np.float32), colormap="magma")
    items = view.legend()
    assert texts(items) == "−2  4"
    ramp = next(i for i in items if isinstance(i, chrome.Ramp))
    assert ramp.colors == tuple(int(c) for c in view._lut)


def test_confusion_legend_says_what_the_colours_count():
    counts = np.array([[5, 1], [2, 7]])
    assert texts(Confusion(counts).legend()) == "count 0  7  rows true, cols predicted"
    assert texts(Confusion(counts, normalize="row").legend()).startswith("share of row 0  1")


def test_pointcloud_legend_has_a_swatch_per_class():
    pos = np.random.randn(30, 3).astype(np.float32)
    view = PointCloud(pos, labels=np.arange(30) % 3)
    items = view.legend()
    swatches = [i for i in items if isinstance(i, chrome.Swatch)]
    assert [s.rgba for s in swatches] == [int(view._palette[c]) for c in range(3)]
    assert texts(items) == "0 1 2 "
    assert texts(PointCloud(pos, labels=np.arange(30)).legend()) == "30 classes"
    assert "−" in texts(PointCloud(pos, values=np.linspace(-1, 1, 30)).legend())
    assert PointCloud(pos).legend() == []


def test_curve_legend_gives_the_last_finite_value_and_the_lines():
    view = Curve(np.array([3.0, 2.0, 1.5, np.nan], np.float32), smoothing=0.9)
    items = view.legend()
    assert texts(items).startswith("last 1.5 · y ")
    assert "raw" in texts(items) and "EMA 0.9" in texts(items)
    assert texts(Curve(np.full(3, np.nan, np.float32)).legend()) == "3 samples, none finite"


def test_histogram_legend_gives_range_bins_and_peak():
    view = Histogram(np.array([0.0, 0.1, 0.2, 1.0], np.float32), bins=4, value_range=(0, 1))
    view.counts = np.array([3, 0, 0, 1], np.uint32)
    assert texts(view.legend()) == "0 … 1 · 4 bins · peak 3"


# -- in a session -----------------------------------------------------------------------------------

def test_title_bar_sits_above_the_view_and_carries_the_counts(artifacts):
    with cv.Session(window=False, size=(640, 400)) as s:
        h = torch.randn(16, 16)
        h[0, 0] = float("nan")
        h[1, 1] = float("inf")
        panel = s.attach(h, "heatmap", name="attention L0 H1")
        s.render()
        frame = s.render()  # the title carries the counts of the frame before
        slot, lh = panel.slot, chrome.line_height()
        assert panel.view.rect == Rect(slot.x, slot.y + lh, slot.width, slot.height - lh)
        left, right = title_items(panel)
        assert texts(left) == "attention L0 H1"
        assert texts(right).startswith("2 NaN/Inf  ")
        bar = frame[slot.y:slot.y + lh, slot.x:slot.x + slot.width]
        assert np.array_equal(bar, panel.label.reference(slot.width, lh))
        status = frame[400 - lh:]
        assert np.array_equal(status, s.status_bar.reference(640, lh))


def test_a_stopped_panel_shows_why_in_its_place():
    with cv.Session(window=False, size=(640, 400)) as s:
        t = torch.zeros(100, 3)
        panel = s.attach(t, "pointcloud", name="emb")
        other = s.attach(torch.randn(8, 8), "heatmap", name="ok")
        s.render()
        t.set_(torch.zeros(50, 3))  # the storage moves: the panel must stop reading it
        s.render()
        assert panel.error and "resized" in panel.error
        frame = s.render()  # the notice replaces the view from the next frame
        lh = chrome.line_height()
        body = Rect(panel.slot.x, panel.slot.y + lh, panel.slot.width, panel.slot.height - lh)
        assert panel.view.rect is None and panel.notice.rect == body
        got = frame[body.y:body.y + body.height, body.x:body.x + body.width]
        assert np.array_equal(got, panel.notice.reference(body.width, body.height))
        assert texts(title_items(panel)[1]).startswith("stopped: emb's storage was resized")
        assert other.view.rect is not None and not other.error


@pytest.mark.parametrize("size", [(120, 30), (40, 40), (1, 1)])
def test_tiny_slots_drop_the_title_bar_rather_than_the_view(size):
    with cv.Session(window=False, size=(size[0], size[1] + chrome.line_height())) as s:
        panel = s.attach(torch.randn(4, 4), "heatmap", name="h")
        s.render()  # draws, whatever is left for the panel
        slot = getattr(panel, "slot", None)  # no slot at all when the canvas has no room
        if slot is not None and slot.height < 2 * chrome.line_height():
            assert panel.view.rect == slot and panel.label.rect is None
