"""Series whose steps are the run's progress steps store the progress step column itself, so that the
loader shares it by reference (no element-by-element comparison, record/columns.py); a run.json that
stores them apart (written before, or rebuilt from the log) is still shared after one comparison."""

from __future__ import annotations

import json

import numpy as np
import pytest

from caliper_vk.record import Recorder, builder, load_run
from caliper_vk.record import runfile as runfile_module


def _record(path, histogram_at=None):
    rec = Recorder(path)
    for step in range(1, 31):
        rec.advance()
        rec.log(loss=1.0 / step, lr=0.1)
        if step == histogram_at:
            rec.histogram("w", np.linspace(-1, 1, 9))  # a progress entry of its own (same step)
    rec.log({"val/loss": 0.5})  # the last step only: a stream of one, not the progress column
    return rec.close()


def _refuse_comparison(monkeypatch):
    """numpy's array_equal (one module for all its users), refusing a comparison of two 30-step columns."""
    plain = np.array_equal

    def refuse(a, b, *args, **kwargs):
        if np.shape(a) == np.shape(b) == (30,):
            raise AssertionError("the step columns were compared element by element")
        return plain(a, b, *args, **kwargs)
    monkeypatch.setattr(np, "array_equal", refuse)


def test_series_logged_at_every_progress_step_share_its_stored_column(tmp_path, monkeypatch):
    path = _record(tmp_path / "r", histogram_at=7)
    doc = json.loads(path.read_text())
    assert doc["metrics"]["loss"]["step"]["at"] == doc["progress"]["step"]["at"]
    assert doc["metrics"]["lr"]["step"] == doc["metrics"]["loss"]["step"]
    assert doc["metrics"]["val/loss"]["step"]["at"] != doc["progress"]["step"]["at"]
    _refuse_comparison(monkeypatch)  # the fast path: one stored column, one array
    with pytest.raises(AssertionError):  # (the guard works)
        np.array_equal(np.arange(30), np.arange(30))
    run = load_run(tmp_path / "r")
    assert run.metrics["loss"].step is run.progress_step
    assert run.metrics["lr"].step is run.progress_step
    assert run.metrics["loss"].step.tolist() == list(range(1, 31))


def test_a_progress_step_no_series_logged_keeps_them_apart(tmp_path):
    rec = Recorder(tmp_path / "r")
    for step in range(1, 11):
        rec.advance()
        if step == 4:
            rec.histogram("w", np.linspace(-1, 1, 9))  # step 4 has a histogram and no scalars
            continue
        rec.log(loss=1.0 / step)
    doc = json.loads(rec.close().read_text())
    assert doc["metrics"]["loss"]["step"]["at"] != doc["progress"]["step"]["at"]
    run = load_run(tmp_path / "r")
    assert 4 in run.progress_step.tolist() and 4 not in run.metrics["loss"].step.tolist()


@pytest.mark.parametrize("source", ["old run.json", "log"])
def test_step_columns_stored_apart_are_compared_once_and_shared(tmp_path, monkeypatch, source):
    path = _record(tmp_path / "r")
    if source == "old run.json":  # as written before: the series' steps a column of their own
        doc = json.loads(path.read_text())
        side = path.parent / doc["data"]["file"]
        data = side.read_bytes()
        ref = doc["progress"]["step"]
        own = dict(ref, at=len(data) + (-len(data) % 64))
        nbytes = 8 * ref["shape"][0]
        side.write_bytes(data + b"\0" * (own["at"] - len(data)) + data[ref["at"]:ref["at"] + nbytes])
        doc["data"]["bytes"] = side.stat().st_size
        for k in ("loss", "lr"):
            doc["metrics"][k]["step"] = dict(own)
        path.write_text(json.dumps(doc))
        run = runfile_module.run_from_json(path)
    else:
        run = builder.run_from_log(path.parent / "log.jsonl")
    assert run.metrics["loss"].step is run.progress_step  # the fallback: compared, then shared
    assert run.metrics["lr"].step is run.progress_step
    assert run.metrics["val/loss"].step is not run.progress_step


def test_the_fallback_compares_every_step(tmp_path):
    a = np.arange(10, dtype=np.int64)
    b = a.copy()
    b[5] = 4  # same length and ends, one step differs
    columns = [a]
    assert builder._same_steps(b, columns) is b and len(columns) == 2
    assert builder._same_steps(a.copy(), columns) is a


def test_step_range_follows_a_replaced_added_or_removed_series():
    from caliper_vk.record.run import Run, Series

    steps = np.arange(5, dtype=np.int64)
    run = Run(name="r", status="complete", ended=True, progress_step=steps, progress_time=steps * 1.0)
    run.metrics["a"] = Series("a", steps, np.ones(5), np.zeros(5, bool))
    assert run.step_range == (0, 4)
    run.metrics["a"].step = steps + 3  # the column replaced
    assert run.step_range == (0, 7)
    run.metrics["b"] = Series("b", steps + 10, np.ones(5), np.zeros(5, bool))  # one added
    assert run.step_range == (0, 14)
    del run.metrics["b"]
    assert run.step_range == (0, 7)
    run.progress_step = steps[:0]
    assert run.step_range == (3, 7)
