"""The epochs mode keeps what a cursor move does not change (each whole epoch's arrays and
pixel columns): what it draws after any sequence of moves is what it computes afresh."""

from __future__ import annotations

import numpy as np

from caliper_vk.dashboard import app
from caliper_vk.dashboard.epochs import epoch_segments
from caliper_vk.record import Recorder, load_run


def test_kept_epochs_equal_fresh_ones_after_every_cursor_move(tmp_path):
    rec = Recorder(tmp_path / "ep", steps_per_epoch=40)
    for s in range(1, 151):
        rec.advance()
        rec.log({"train/loss": 3.0 - s / 100 + (s % 7) / 50})
        if s % 40 == 0:
            rec.end_epoch()
    rec.close()
    run = load_run(tmp_path / "ep")
    dash = app.Dashboard([run], size=(700, 500), panels=["^loss$"], epochs=True, columns=1)
    try:
        for cursor in (150, 20, 95, 41, 40, 120, 121, 150, 3):  # back and forth, across epoch ends
            dash.cursor = float(cursor)
            dash.render()
            kept = dash._epoch_segments(run, "train/loss")
            fresh = epoch_segments(run, "train/loss", cursor, dash.history)
            assert [(k, w) for k, _, _, w in kept] == [(k, w) for k, _, _, w in fresh]
            for (_, x, y, _), (_, fx, fy, _) in zip(kept, fresh, strict=True):
                assert np.array_equal(x, fx) and np.array_equal(y, fy)
            for k, x, y, whole in kept:
                cols = dash._epoch_columns(run, "train/loss", k, x, y, whole, 30)
                fresh_cols = app.model.reduce_columns(x, y, float(x[0]), float(x[-1]), 30)
                assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(cols, fresh_cols, strict=True))
    finally:
        dash.close()
