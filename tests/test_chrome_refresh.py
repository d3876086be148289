"""The chrome's host work is what changed: a strip keeps its pixels and draws only the glyphs,
ramps and swatches that are new since its last refresh, the same bytes as a strip drawn afresh."""

import random

import numpy as np
import torch

import caliper_vk as cv
from caliper_vk import chrome


def test_a_refresh_draws_only_the_changed_cells_and_an_unchanged_one_draws_none():
    bar = chrome.StatusBar()
    width, height = 640, chrome.line_height()
    line = "fc1: zero-copy · step {} · ≤5% of training: 1.2% · frame <=3.1 ms · skipped 0"
    bar.set_text(line.format(10))
    first = bar.paint(width, height).copy()
    assert bar.glyphs_drawn == len(line.format(10))
    assert np.array_equal(first, bar.render(width, height))

    bar.set_text(line.format(10))  # a refresh that says the same
    assert np.array_equal(bar.paint(width, height), first)
    assert bar.glyphs_drawn == len(line.format(10))  # no glyph laid out again

    bar.set_text(line.format(11))  # the step alone moved: one digit
    assert np.array_equal(bar.paint(width, height), bar.render(width, height))
    assert bar.glyphs_drawn == len(line.format(10)) + 1

    bar.set_text(line.format(11), warn=True)  # another colour: every glyph
    assert np.array_equal(bar.paint(width, height), bar.render(width, height))
    assert bar.glyphs_drawn == 2 * len(line.format(10)) + 1


def test_drawing_over_the_last_refresh_is_drawing_afresh():
    """Random titles, legends (ramps, swatches) and notices (wrapped lines), each drawn over the one
    before."""
    rng = random.Random(3)
    lut = np.arange(256, dtype=np.uint32) * 0x010203 | 0xFF000000
    words = ["loss", "step 12", "naïve … ≤ → ∞", "zero-copy", "Ωμέγα", "", "写", "−1.5"]
    colours = [chrome.FOREGROUND, chrome.DIM, chrome.WARNING, 0x336699]

    def items(n, text_only=False):
        out = []
        for _ in range(n):
            t = rng.random()
            if t < 0.7 or text_only:
                out.append((" ".join(rng.choice(words) for _ in range(rng.randint(1, 5))), rng.choice(colours)))
            elif t < 0.85:
                out.append(chrome.Ramp.of(lut[::rng.randint(1, 40)], rng.randint(1, 90)))
            else:
                out.append(chrome.Swatch(rng.choice(colours)))
        return out

    for block in (False, True):
        strip = chrome.TextStrip(block=block)
        for _ in range(60):
            width, height = rng.choice([(300, 20), (300, 20), (300, 20), (97, 45), (8, 3)])
            left, right = items(rng.randint(0, 4), text_only=block), items(rng.randint(0, 3))
            if strip.left and rng.random() < 0.5:  # most refreshes change one item of the last ones
                left = list(strip.left)
                left[rng.randrange(len(left))] = items(1, text_only=True)[0]
                right = strip.right
            strip.set_items(left, right)
            assert np.array_equal(strip.paint(width, height), strip.render(width, height))


def test_a_live_title_is_drawn_once_and_each_frame_carries_its_own_status_line():
    with cv.Session(window=False, size=(480, 300)) as s:
        panel = s.attach(torch.arange(64.0).reshape(8, 8), "heatmap", name="weights")
        lh = chrome.line_height()
        for _ in range(4):
            s.step()
            frame = s.render()  # a frame that leaves the process: its chrome is made for it
            assert np.array_equal(frame[300 - lh:], s.status_bar.reference(480, lh))
            assert f"step {s.step_count}" in s.status_bar.left[0][0]
        left, right = panel.label.left, panel.label.right
        glyphs = sum(len(i[0]) for i in (*left, *right) if isinstance(i, tuple))
        assert panel.label.glyphs_drawn == glyphs  # the data did not change: laid out once


def test_spans_that_overlapped_are_drawn_again_whole():
    """Clearing a gone span must never leave a kept one half drawn: after overlapping spans the
    strip is drawn afresh."""
    cw, ch = chrome.cell()

    def glyph(x, code):
        return (x, 0, cw, (code, (200, 40, 0)))

    painter = chrome._Painter(40, ch, chrome.BACKGROUND)
    painter.paint([glyph(0, 33), glyph(cw // 2, 34)])
    kept = [glyph(0, 33)]
    assert np.array_equal(painter.paint(kept), chrome._Painter(40, ch, chrome.BACKGROUND).paint(kept))
