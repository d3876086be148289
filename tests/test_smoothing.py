"""The block-evaluated EMA equals the sequential recurrence it replaces (to a few ulps)."""

import numpy as np
import pytest

from caliper_vk.smoothing import ema


def sequential(values, alpha, hold):
    out, acc = np.empty(len(values)), None
    for i, v in enumerate(values.astype(np.float64)):
        if np.isfinite(v):
            acc = v if acc is None else alpha * acc + (1 - alpha) * v
            out[i] = acc
        else:
            out[i] = acc if hold and acc is not None else np.nan
    return out


@pytest.mark.parametrize("alpha", [0.0, 1e-6, 0.1, 0.5, 0.9, 0.99, 0.999, 0.99999])
@pytest.mark.parametrize("gaps", ["nan", "hold"])
def test_equals_the_sequential_recurrence(alpha, gaps):
    rng = np.random.default_rng(0)
    x = rng.normal(size=12_000) * 10 + 3  # several blocks for every alpha
    x[::97] = np.nan
    x[5::131] = np.inf
    x[:3] = np.nan  # nothing to average yet: NaN in both modes
    got, want = ema(x, alpha, gaps), sequential(x, alpha, gaps == "hold")
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert np.isnan(got[:3]).all()


def test_edges():
    assert ema(np.zeros(0), 0.9).shape == (0,)
    assert np.isnan(ema(np.full(4, np.nan), 0.9, "hold")).all()
    np.testing.assert_array_equal(ema(np.array([2.0]), 0.5), [2.0])
    np.testing.assert_allclose(ema(np.full(5000, 7.0), 0.9), 7.0, rtol=1e-14)  # no drift across blocks
