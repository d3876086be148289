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
