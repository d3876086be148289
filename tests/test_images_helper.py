import numpy as np
import pytest

from images import assert_same_image


def test_identical_images_pass(tmp_path):
    a = np.zeros((4, 5, 4), np.uint8)
    assert_same_image(a, a.copy(), tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_one_byte_fails_and_saves_evidence(tmp_path):
    a = np.zeros((4, 5, 4), np.uint8)
    b = a.copy()
    b[2, 3, 1] = 1
    with pytest.raises(AssertionError, match="1 of 20 pixels differ"):
        assert_same_image(a, b, tmp_path / "x")
    assert {p.name for p in (tmp_path / "x").iterdir()} == {"actual.png", "expected.png", "diff.png"}
