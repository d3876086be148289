"""Kept panels (engine/retained.py): a frame in which only the cursor moved copies each scalar
panel's pixels and draws the cursor over them; any change to a panel draws it again. The pixels
are those of a full redraw, byte for byte."""

from __future__ import annotations

import numpy as np
import pytest

from caliper_vk.engine.window import Event


def _runs():
    from caliper_vk.record.run import Run, Series

    n = 20_000
    steps = np.arange(n, dtype=np.int64)
    run = Run(name="long", meta={"steps_per_epoch": 100}, status="complete", ended=True,
              progress_step=steps, progress_epoch=steps / 100, progress_time=steps * 0.01)
    y = np.sin(steps / 500.0) + 2.0
    y[n // 3] = 40.0  # a far outlier: marked at the plot's edge
    run.metrics["train/loss"] = Series("train/loss", steps, y, np.zeros(n, bool))
    lr = 1e-3 * (1 + np.cos(steps / n * np.pi))
    run.metrics["lr/group0"] = Series("lr/group0", steps, lr, np.zeros(n, bool))
    vs = steps[99::100]
    run.metrics["val/loss"] = Series("val/loss", vs, 1.0 / (1 + vs / 1000.0), np.zeros(len(vs), bool))
    return [run]


def _frames(retain: bool, monkeypatch, steps):
    """Each of ``steps`` (cursor, events) drawn in one dashboard: the RGBA frames and the hits."""
    from caliper_vk.dashboard.app import Dashboard

    monkeypatch.setattr(Dashboard, "RETAIN", retain)
    dash = Dashboard(_runs(), size=(1100, 700), panels=["*"], columns=2, cursor=500.0)
    try:
        out = []
        for cursor, events in steps:
            if callable(cursor):  # a change made between frames (a toggle)
                cursor(dash)
            elif cursor is not None:
                dash.cursor = cursor
            dash.frame(events=events)
            out.append(dash.ui.render())
        r = dash.ui.overlay.retained
        _frames.restored = (r.restored_pixels, r.kept_pixels)
        assert np.array_equal(dash.ui.overlay.render(), out[-1])  # the same recording submitted again
        return out, (r.hits, r.misses, r.reused)
    finally:
        dash.close()


def test_kept_frames_equal_full_redraws_through_cursor_moves_hover_and_zoom(monkeypatch):
    hover = [Event("move", x=400.0, y=200.0)]  # over the first plot: ImPlot shows the mouse's position
    away = [Event("move", x=5.0, y=690.0)]
    zoom = [Event("move", x=400.0, y=200.0), Event("scroll", dx=0.0, dy=1.0)]
    steps = [(None, []), (None, []), (700.0, []), (15_000.0, []), (15_000.0, hover), (9000.0, away),
             (9000.0, zoom), (9000.0, away), (3000.0, away)]
    kept, (hits, misses, _) = _frames(True, monkeypatch, steps)
    full, (none, _, _) = _frames(False, monkeypatch, steps)
    assert none == 0 and hits >= 3 * 3 and misses >= 3  # panels were kept, and redrawn when changed
    for k, (a, b) in enumerate(zip(kept, full, strict=True)):
        assert np.array_equal(a, b), f"frame {k} ({steps[k]}) differs from a full redraw"
    assert not np.array_equal(kept[2], kept[3])  # the cursor moved
    assert not np.array_equal(kept[5], kept[7])  # the zoom changed the plot
    assert len(np.unique(kept[3].reshape(-1, 4), axis=0)) > 50


def test_unbuilt_panels_equal_full_redraws_through_moves_hover_drag_zoom_and_toggles(monkeypatch):
    """Panels whose inputs are those of their kept pixels are not built (reuse.py): the space is
    reserved, the pixels copied, the cursor line drawn from the plot's x transform. Whole frames
    equal full redraws byte for byte, through cursor moves (many columns), a hover, a click and a
    drag of the cursor line, a zoom and a log toggle."""
    away = [Event("move", x=5.0, y=690.0)]
    at = (400.0, 200.0)  # inside the first plot
    click = [Event("move", x=at[0], y=at[1]), Event("button", x=at[0], y=at[1], button=0, down=True)]
    release = [Event("button", x=at[0], y=at[1], button=0, down=False)]
    drag = [Event("button", x=at[0], y=at[1], button=0, down=True), Event("move", x=at[0] + 60, y=at[1])]
    drop = [Event("button", x=at[0] + 60, y=at[1], button=0, down=False), Event("move", x=5.0, y=690.0)]
    zoom = [Event("move", x=at[0], y=at[1]), Event("scroll", dx=0.0, dy=1.0)]

    def log(dash):
        dash.log_y ^= {0}

    moves = [(float(c), away) for c in np.linspace(300.0, 19_000.0, 7)]
    steps = [(None, away), (None, away), *moves, (None, click), (None, release), (None, drag), (None, drop),
             *moves[:3], (None, zoom), (None, away), *moves[3:], (log, away), *moves[:4]]
    kept, (_, misses, reused) = _frames(True, monkeypatch, steps)
    restored, held = _frames.restored
    full, _ = _frames(False, monkeypatch, steps)
    assert reused >= 3 * 10 and misses >= 3  # panels were reused unbuilt, and built when changed
    # a kept panel still in the target is restored only under the old and new cursor lines
    assert 0 < restored < held / 5, (restored, held)
    for k, (a, b) in enumerate(zip(kept, full, strict=True)):
        assert np.array_equal(a, b), f"frame {k} ({steps[k]}) differs from a full redraw"
    for k in range(3, 9):  # each move moved the cursor
        assert not np.array_equal(kept[k - 1], kept[k])


def test_a_value_table_follows_the_cursor_under_a_reused_chart(monkeypatch):
    """With its value table on (table.py), a reused chart's table is drawn after its kept pixels
    and reads the cursor: whole frames still equal full redraws."""
    away = [Event("move", x=5.0, y=690.0)]

    def table(dash):
        dash.tables |= {0, 1}

    moves = [(float(c), away) for c in np.linspace(300.0, 19_000.0, 5)]
    steps = [(None, away), (table, away), (None, away), (None, away), *moves]
    kept, (_, _, reused) = _frames(True, monkeypatch, steps)
    full, _ = _frames(False, monkeypatch, steps)
    assert reused >= 5
    for k, (a, b) in enumerate(zip(kept, full, strict=True)):
        assert np.array_equal(a, b), f"frame {k} differs from a full redraw"
    assert not np.array_equal(kept[-2], kept[-1])


def test_a_change_in_a_kept_panel_draws_it_again(monkeypatch):
    """The panels are kept while nothing but the cursor changes; toggling a panel's log axis (an
    interaction) changes its static part, which is drawn again."""
    from caliper_vk.dashboard.app import Dashboard

    monkeypatch.setattr(Dashboard, "RETAIN", True)
    dash = Dashboard(_runs(), size=(1100, 700), panels=["*"], columns=2, cursor=500.0)
    try:
        dash.render()
        for _ in range(2):  # the log axis's glyphs rasterized once (a new glyph changes the font atlas)
            dash.log_y ^= {0}
            dash.render()
        r = dash.ui.overlay.retained
        before = (r.hits, r.misses)
        dash.cursor = 800.0
        dash.frame(events=[])
        dash.ui.render()
        assert r.misses == before[1] and r.hits > before[0]
        dash.log_y ^= {0}
        dash.frame(events=[])
        dash.ui.render()
        assert r.misses == before[1] + 1
    finally:
        dash.close()


@pytest.mark.parametrize("change", ["vertex", "texture"])
def test_overlay_keeps_a_region_only_while_its_inputs_are_the_same(change):
    from caliper_vk.engine.overlay import VERTEX_DTYPE, DrawCommand, DrawList, Overlay, Retain
    from caliper_vk.engine.texture import Texture

    with Overlay(64, 32) as ov, Texture(ov.device, 1, 1, pixels=np.full((1, 1, 4), 255, np.uint8)) as tex:
        quads = np.zeros(8, VERTEX_DTYPE)
        quads["position"] = [(8, 8), (24, 8), (24, 24), (8, 24), (12, 2), (14, 2), (14, 30), (12, 30)]
        quads["color"] = [(255, 0, 0, 255)] * 4 + [(0, 255, 0, 200)] * 4
        idx = np.array([0, 1, 2, 0, 2, 3, 4, 5, 6, 4, 6, 7], np.uint32)

        def frame(v):
            cmds = [DrawCommand(tex, (0, 0, 32, 32), 0, 6), DrawCommand(tex, (0, 0, 32, 32), 6, 6)]
            ov.draw([DrawList(v, idx, cmds, Retain("a", 1, 4, (0, 0, 32, 32)))])
            return ov.render()

        first = frame(quads)
        assert np.array_equal(frame(quads), first) and ov.retained.hits == 1
        if change == "vertex":
            quads["color"][0] = (0, 0, 255, 255)
        else:
            tex.update(np.array([[[0, 0, 255, 255]]], np.uint8))
        changed = frame(quads)
        assert ov.retained.misses == 2 and not np.array_equal(changed, first)
        ov.draw([DrawList(quads, idx, [DrawCommand(tex, (0, 0, 32, 32), 0, 12)])])
        assert np.array_equal(ov.render(), changed)  # the same frame drawn without keeping


def test_a_kept_region_stores_only_the_pixels_drawn_over_it():
    """The kept static pixels are those under what the frames draw over the region (a bar moving
    as a cursor line does), saved and copied back in turn, not the region's whole image; each
    frame, and a frame submitted again, equals the plain drawing."""
    from caliper_vk.engine.overlay import VERTEX_DTYPE, DrawCommand, DrawList, Overlay, Retain
    from caliper_vk.engine.texture import Texture

    with Overlay(64, 48) as ov, Texture(ov.device, 1, 1, pixels=np.full((1, 1, 4), 255, np.uint8)) as tex:
        idx = np.array([0, 1, 2, 0, 2, 3, 4, 5, 6, 4, 6, 7], np.uint32)

        def frame(bar: float, retain: bool, square=(255, 0, 0, 255), submit=True):
            v = np.zeros(8, VERTEX_DTYPE)
            v["position"] = [(4, 4), (40, 4), (40, 40), (4, 40), (bar, 2), (bar + 1.5, 2), (bar + 1.5, 44),
                             (bar, 44)]
            v["color"] = [square] * 4 + [(0, 255, 0, 130)] * 4  # a blended bar
            cmds = [DrawCommand(tex, (0, 0, 48, 48), 0, 6), DrawCommand(tex, (0, 0, 48, 48), 6, 6)]
            ov.draw([DrawList(v, idx, cmds, Retain("a", 1, 4, (0, 0, 48, 48)) if retain else None)])
            return ov.render() if submit else None

        bars = [10.0, 10.0, 20.3, 33.0, 6.6]
        kept = [frame(b, True) for b in bars]
        assert np.array_equal(ov.render(), kept[-1])  # the same recording submitted again
        assert np.array_equal(ov.render(), kept[-1])  # and again
        r = ov.retained
        assert r.hits == len(bars) - 1 and r.misses == 1
        stored = sum(s.width * s.height for e in r._kept.values() for s in e.stores if s is not None)
        assert 0 < stored < 48 * 48 / 4  # two thin strips, not the 48x48 region
        plain = [frame(b, False) for b in bars]
        for a, b in zip(kept, plain, strict=True):
            assert np.array_equal(a, b)
        # a signature names the bytes in the overlay's buffers, not a copy of them: a frame drawn
        # and never submitted writes other bytes there, which the next frame must not take for
        # the kept ones (the target holds the red square, not the blue)
        frame(20.0, True), frame(20.0, True)
        misses, blue = r.misses, (0, 0, 255, 255)
        frame(20.0, True, blue, submit=False)
        drawn = frame(20.0, True, blue)
        assert r.misses == misses + 1 and np.array_equal(drawn, frame(20.0, False, blue))


def test_the_target_outside_the_kept_regions_is_covered_once():
    """A frame that keeps regions clears only the rest of the target (engine/regions.py
    ``outside``): every pixel outside the regions exactly once, none inside."""
    from caliper_vk.engine.regions import outside

    rng = np.random.default_rng(1)
    for _ in range(300):
        w, h = int(rng.integers(1, 40)), int(rng.integers(1, 40))
        rects = []
        for _ in range(int(rng.integers(0, 7))):
            x, y = int(rng.integers(0, w)), int(rng.integers(0, h))
            rects.append((x, y, int(rng.integers(1, w - x + 1)), int(rng.integers(1, h - y + 1))))
        inside = np.zeros((h, w), int)
        for x, y, rw, rh in rects:
            inside[y:y + rh, x:x + rw] = 1
        covered = np.zeros((h, w), int)
        for x, y, rw, rh in outside(rects, w, h):
            assert rw > 0 and rh > 0
            covered[y:y + rh, x:x + rw] += 1
        assert np.array_equal(covered, 1 - inside), rects
    assert outside([(0, 0, 10, 5), (0, 5, 10, 5)], 10, 10) == []
    assert outside([(2, 0, 6, 10)], 10, 10) == [(0, 0, 2, 10), (8, 0, 2, 10)]  # bands merged


def test_the_confusion_panels_kept_plot_equals_full_redraws(monkeypatch):
    """The confusion panel draws its recall/precision plot first and keeps it (with the title) as
    its static part; the matrix at the cursor and the cursor line are drawn over it. Frames equal
    full redraws as the cursor moves onto other matrices, and the panel is kept."""
    from caliper_vk.dashboard.app import Dashboard
    from caliper_vk.record.run import ConfusionFrame

    rng = np.random.default_rng(4)
    runs = _runs()
    runs[0].confusions["val/confusion"] = [ConfusionFrame(int(s), rng.integers(0, 40, (6, 6)))
                                           for s in range(99, 20_000, 400)]
    steps = [(None, []), (None, []), *((float(c), []) for c in (900.0, 5_000.0, 12_345.0, 19_000.0))]

    def frames(retain):
        monkeypatch.setattr(Dashboard, "RETAIN", retain)
        dash = Dashboard(runs, size=(1100, 1000), panels=["*"], columns=2, cursor=500.0)
        try:
            out = []
            for cursor, events in steps:
                if cursor is not None:
                    dash.cursor = cursor
                dash.frame(events=events)
                out.append(dash.ui.render())
            confusion = [i for i, p in enumerate(dash.panels) if p.kind == "confusion"]
            assert len(confusion) == 1
            kept_keys = set(dash.ui.overlay.retained._kept)
            return out, dash.ui.overlay.retained.hits, ("panel", confusion[0]) in kept_keys
        finally:
            dash.close()

    kept, hits, confusion_kept = frames(True)
    assert confusion_kept
    full, none, _ = frames(False)
    assert none == 0 and hits > 0
    for k, (a, b) in enumerate(zip(kept, full, strict=True)):
        assert np.array_equal(a, b), f"frame {k} ({steps[k]}) differs from a full redraw"
    assert not np.array_equal(kept[3], kept[4])  # another matrix, another cursor
