"""A pyramid built with its level 1 spilled piece by piece (what Recorder.close() does, record/pyramid.py
and record/columns.py) equals one built whole, whatever the pieces, and level 1 is never kept."""

from __future__ import annotations

import numpy as np
import pytest

from caliper_vk.record import Recorder, load_run, pyramid


def _pieces(v, mask, size):
    for lo in range(0, len(v), size):
        yield v[lo:lo + size], None if mask is None else mask[lo:lo + size]


@pytest.mark.parametrize(("n", "size"), [(5000, 80), (70_001, 4096), (4096, 4096), (100, 32), (300, 16)])
def test_a_spilled_build_equals_a_whole_one(n, size):
    rng = np.random.default_rng(n)
    v = rng.standard_normal(n)
    v[rng.integers(0, n, 5)] = np.nan
    mask = rng.random(n) < 0.01
    whole = pyramid.build(_pieces(v, mask, size), n)
    spilled = []
    got = pyramid.build(_pieces(v, mask, size), n, spilled.append)
    assert got.levels[0] is None and got.nonfinite == whole.nonfinite
    assert all(len(p) <= size // pyramid.FANOUT + 1 for p in spilled)  # one piece at a time
    assert np.array_equal(np.concatenate(spilled), whole.levels[0], equal_nan=True)
    assert len(got.levels) == len(whole.levels)
    for a, b in zip(got.levels[1:], whole.levels[1:], strict=True):
        assert np.array_equal(a, b, equal_nan=True)


def test_the_recorder_spills_level_one_in_pieces(tmp_path, monkeypatch):
    monkeypatch.setattr(pyramid, "SCAN", 16 * 37)  # many pieces, not whole blocks of level 2
    rng = np.random.default_rng(5)
    values = rng.standard_normal(9000)
    values[[3, 4444]] = [np.inf, np.nan]
    rec = Recorder(tmp_path / "r")
    for step in range(9000):
        rec.log({"a": values[step]}, step=step, placeholder=("a",) if step == 8 else ())
    rec.close()
    s = load_run(tmp_path / "r").metrics["a"]
    ph = np.zeros(9000, bool)
    ph[8] = True
    want = pyramid.of_array(values, ph)
    assert s.pyramid is not None and s.pyramid.nonfinite == want.nonfinite == 2
    assert len(s.pyramid.levels) == len(want.levels)
    for a, b in zip(s.pyramid.levels, want.levels, strict=True):
        assert np.array_equal(a, b, equal_nan=True)
