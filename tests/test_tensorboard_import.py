"""TensorBoard import: event files written by torch's SummaryWriter, read by tensorboard's own reader."""

from __future__ import annotations

import numpy as np
import pytest

from caliper_vk.record import RunFileError, find_runs, load_run

pytest.importorskip("tensorboard", reason="the TensorBoard importer needs the tensorboard package")
from torch.utils.tensorboard import SummaryWriter


def _write(path, steps=20):
    rng = np.random.default_rng(0)
    w = SummaryWriter(log_dir=str(path))
    for s in range(steps):
        w.add_scalar("train/loss", 2.0 / (s + 1), s)
        w.add_scalar("grad_norm/global", 0.0 if s == 0 else 1.0 + s, s)
        if s % 5 == 0:
            w.add_scalar("val/loss", 3.0 - 0.1 * s, s)
            w.add_histogram("weights/fc", rng.normal(0, 1 + s / 10, 500), s)
    w.close()


def test_scalars_histograms_and_placeholder(tmp_path):
    _write(tmp_path / "tb" / "runA")
    runs = find_runs(tmp_path / "tb")
    assert [p.name for p in runs] == ["runA"]
    run = load_run(runs[0])
    loss = run.metrics["train/loss"]
    np.testing.assert_array_equal(loss.step, np.arange(20))
    np.testing.assert_allclose(loss.value, 2.0 / (np.arange(20) + 1), rtol=1e-6)
    np.testing.assert_array_equal(run.metrics["val/loss"].step, [0, 5, 10, 15])
    g = run.metrics["grad_norm/global"]
    assert g.placeholder.tolist() == [True] + [False] * 19  # step-0 zero: no gradient existed yet
    assert "placeholder" in g.description
    frames = run.histograms["weights/fc"]
    assert [f.step for f in frames] == [0, 5, 10, 15]
    for f in frames:
        assert f.counts.sum() == 500 and np.all(np.diff(f.edges) > 0)
    # the spread grows, so the histogram edges widen: the import kept real bucket limits
    assert frames[-1].edges[-1] - frames[-1].edges[0] > frames[0].edges[-1] - frames[0].edges[0]
    assert np.all(np.diff(run.progress_time) >= 0)
    assert run.best_step() == 15


def test_garbage_event_file_is_a_clear_error(tmp_path):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "events.out.tfevents.123.host").write_bytes(b"\x00" * 7 + b"not a record")
    with pytest.raises(RunFileError, match="event"):
        load_run(d)
