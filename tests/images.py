"""Whole-image comparison that leaves evidence behind when it fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def save_evidence(actual: np.ndarray, expected: np.ndarray, folder: Path, zoom: int = 4) -> Path:
    """Write actual.png, expected.png and a magnified diff.png (differing pixels red)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    Image.fromarray(actual, "RGBA").save(folder / "actual.png")
    Image.fromarray(expected, "RGBA").save(folder / "expected.png")
    differ = (actual != expected).any(axis=2)
    diff = (expected[..., :3] // 4).astype(np.uint8)
    diff[differ] = (255, 0, 0)
    big = np.repeat(np.repeat(diff, zoom, axis=0), zoom, axis=1)
    Image.fromarray(big, "RGB").save(folder / "diff.png")
    return folder


def assert_same_image(actual: np.ndarray, expected: np.ndarray, folder: Path) -> None:
    """``np.array_equal`` on whole images; on failure save the pair and a diff, then fail."""
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    if np.array_equal(actual, expected):
        return
    differ = (actual != expected).any(axis=2)
    ys, xs = np.nonzero(differ)
    where = save_evidence(actual, expected, folder)
    first = ", ".join(f"({y},{x}) {tuple(actual[y, x])}!={tuple(expected[y, x])}"
                      for y, x in list(zip(ys, xs, strict=False))[:3])
    raise AssertionError(f"{differ.sum()} of {differ.size} pixels differ (first: {first}); "
                         f"images and diff saved in {where}")


def assert_view_matches_twin(view, width: int, height: int, folder: Path) -> None:
    """Render ``view`` alone on a ``width x height`` canvas; pixels and counters must equal its twin's."""
    from caliper_vk.engine import Canvas

    with Canvas(width, height) as canvas:
        canvas.add(view)
        got = canvas.render()
        want, stats = view.reference_with_stats(width, height)
        assert_same_image(got, want, folder)
        assert view.stats == stats


def assert_panel_matches_twin(frame: np.ndarray, panel, tensor, folder: Path, **options) -> None:
    """The panel's pixels in ``frame`` and its counters equal those of a twin of its view made
    from a ``.cpu()`` copy of ``tensor`` taken now (call it after ``flush()`` or ``render()``):
    the values the device read, never the host copy a GPU tensor read in place got at attach
    (``canvas.reference()`` draws from that copy). ``options``: the view's, as given to
    ``attach``; a point cloud's twin takes the panel's camera."""
    v, r = panel.view, panel.view.rect
    if hasattr(v, "_yaw"):  # a point cloud: the camera the session may have turned
        options = {"yaw_deg": v._yaw, "pitch_deg": v._pitch, "zoom": v.zoom, **options}
    twin = type(v)(**options)
    twin.set_data(tensor.cpu())
    want, stats = twin.reference_with_stats(r.width, r.height)
    assert_same_image(frame[r.y:r.y + r.height, r.x:r.x + r.width], want, folder)
    assert v.stats == stats


def read_strip(strip: np.ndarray, colour=None, background=None) -> str:
    """The text of a one-line strip drawn by :func:`caliper_vk.chrome.render_bar` from the left edge,
    read back exactly: each glyph cell is matched against the atlas's own rendering of every
    character in ``colour`` on ``background`` (the status line's by default); a cell that matches none is
    ``?``; reading stops at the first blank cell after the text."""
    from caliper_vk import chrome

    colour = chrome.FOREGROUND if colour is None else colour
    background = chrome.BACKGROUND if background is None else background
    cw, ch = chrome.cell()
    height = strip.shape[0]
    y = (height - ch) // 2
    bank = {}
    for c in [chr(k) for k in range(32, 127)] + list("·≤≥…–−∞µ×→←"):
        cell = chrome.render_bar([(c, colour)], (), 2 * chrome.PAD + cw, height, background)
        bank.setdefault(cell[y:y + ch, chrome.PAD:chrome.PAD + cw].tobytes(), c)
    blank = chrome.render_bar([], (), 2 * chrome.PAD + cw, height, background)
    blank = blank[y:y + ch, chrome.PAD:chrome.PAD + cw].tobytes()
    text, x, blanks = [], chrome.PAD, 0
    while x + cw <= strip.shape[1]:
        cell = np.ascontiguousarray(strip[y:y + ch, x:x + cw]).tobytes()
        if cell == blank:
            blanks += 1
            if blanks > 2:
                break
        else:
            blanks = 0
        text.append(bank.get(cell, "?"))
        x += cw
    return "".join(text).rstrip()


def read_labels(region: np.ndarray, colour, background, chars: str = "0123456789.e−") -> list:
    """Every run of ``chars`` drawn in ``colour`` on ``background`` anywhere in ``region``, glyph
    cells at any pixel position (as the curve's tick labels are placed): ``[(x, y, text)]``, top
    to bottom, then left to right. Each cell is matched exactly against the atlas's own rendering
    of each character (:func:`caliper_vk.chrome.render_bar`); a run ends at the first cell that
    matches none."""
    from caliper_vk import chrome

    cw, ch = chrome.cell()
    bank = {}
    for c in chars:
        cell = chrome.render_bar([(c, colour)], (), 2 * chrome.PAD + cw, ch, background)
        bank.setdefault(np.ascontiguousarray(cell[:, chrome.PAD:chrome.PAD + cw]).tobytes(), c)
    height, width = region.shape[:2]
    found = []
    for y in range(height - ch + 1):
        x = 0
        while x + cw <= width:
            text, x0 = "", x
            while x + cw <= width:
                c = bank.get(np.ascontiguousarray(region[y:y + ch, x:x + cw]).tobytes())
                if c is None:
                    break
                text, x = text + c, x + cw
            if text:
                found.append((x0, y, text))
            else:
                x += 1
    return found
