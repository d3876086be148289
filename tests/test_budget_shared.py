"""One budget for recording and frames (issue 30): ``watch``'s thinning takes its share of the
session's budget after everything else Caliper does and after the frames the display is never
starved of, so recording and frames together stay inside the share; and every charge of the
training thread's time (the callbacks', ``watch``'s, the loop's own ``rec.log``) counts once.
Costs are deterministic, on a fake clock: no wall-clock assertion."""

import threading

import pytest
import torch

import caliper_vk as cv
from caliper_vk.live.budget import Budget
from caliper_vk.record.thinning import RecordBudget


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _run(shared: bool, steps=3000, train=0.100, scalars=0.001, extra=0.030, frame=0.150, share=0.05):
    """A loop of ``steps`` steps of ``train`` seconds, recorded by hooks costing ``scalars``
    seconds a step plus ``extra`` on the steps the expensive records are due, drawing frames of
    ``frame`` seconds when the session's budget allows. Returns (share counted over the second
    half, the recording interval, the record budget)."""
    clock = _Clock()
    budget = Budget(share, clock=clock)
    rec = RecordBudget(share, clock=clock, frames=budget if shared else None)
    half = None
    for step in range(1, steps + 1):
        clock.t += train
        started = clock()
        expensive = rec.due(step)
        clock.t += scalars + (extra if expensive else 0.0)
        rec.spent(scalars, extra if expensive else None)
        budget.charge(started)  # watch's hooks, counted by the session
        rec.stepped()
        entered = budget.enter()
        drew = budget.allows()
        if drew:
            clock.t += frame
        budget.leave(entered, drew)
        if step == steps // 2:
            half = (budget.host_total, clock())
    counted, wall = budget.host_total - half[0], clock() - half[1]
    return counted / wall, rec.every, rec


def test_recording_and_frames_together_stay_inside_one_budget():
    got, every, rec = _run(shared=True)
    # the frames' floor (150 ms every 5 s: 3%) and 1 ms of scalars leave 1 ms a step: 30 ms / 1 ms = 30 -> 50
    assert every == 50
    assert got <= 0.05 * 1.02, got
    assert got >= 0.04, got  # and the frames use what recording leaves
    assert "every 50 steps (≤5% with the frames)" in rec.label()


def test_two_separate_budgets_overrun_the_share():
    # the thinning that saw only its own share left the frames their forced floor on top of it
    got, every, _ = _run(shared=False)
    assert every == 10
    assert got > 0.06, got


def test_the_other_charges_leave_less_to_recording():
    clock = _Clock()
    budget = Budget(0.05, clock=clock)
    rec = RecordBudget(0.05, clock=clock, frames=budget)
    for step in range(1, 101):
        clock.t += 0.100
        started = clock()
        clock.t += 0.002  # the loop's own rec.log and a callback: 2 ms a step
        budget.charge(started)
        expensive = rec.due(step)
        started = clock()
        clock.t += 0.001 + (0.010 if expensive else 0.0)
        rec.spent(0.001, 0.010 if expensive else None)
        budget.charge(started)
        rec.stepped()
    assert rec.other == pytest.approx(0.002)
    # 5 ms - 1 ms - 2 ms (no frame drawn yet: no floor) = 2 ms a step for 10 ms: every 5 steps
    assert rec.every == 5


def test_charging_blocks_nest_and_count_once():
    clock = _Clock()
    b = Budget(0.05, clock=clock)
    b.enter()
    with b.charging():
        clock.t += 1.0
        with b.charging():  # a rec.log inside a callback's block
            clock.t += 2.0
        started = clock()
        clock.t += 0.5
        b.wrote(started)  # a panel write inside it
    assert b.host_total == pytest.approx(3.5) and b.charged == pytest.approx(3.5)
    with b.charging(count=False):  # a watch hook, which counts its own time
        with b.charging():
            clock.t += 1.0
    assert b.host_total == pytest.approx(3.5)
    b.charge(clock() - 1.0, clock())
    assert b.host_total == pytest.approx(4.5)
    b.due()  # a True answer opens the span counted at step(): a block inside it adds nothing
    with b.charging():
        clock.t += 1.0
    assert b.host_total == pytest.approx(4.5)
    b.enter()
    assert b.host_total == pytest.approx(5.5)  # the span

    def elsewhere():  # another thread's work is not the training thread's time
        with b.charging():
            clock.t += 1.0

    worker = threading.Thread(target=elsewhere)
    worker.start()
    worker.join()
    assert b.host_total == pytest.approx(5.5) and b._depth == 0


def test_a_manual_loops_own_log_calls_are_charged_once(tmp_path, monkeypatch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with cv.Session(window=False, size=(320, 200), budget=0.05) as s:
        rec = cv.Recorder(tmp_path / "run")
        w = cv.watch(model, opt, rec, session=s, histograms_every=None)
        assert rec.budget is s.budget and w.budget.frames is s.budget
        clock = _Clock()
        s.budget.clock = clock
        logged = rec._log_values

        def slow_log(*args):  # each log takes 1 s on the fake clock
            clock.t += 1.0
            logged(*args)

        monkeypatch.setattr(rec, "_log_values", slow_log)
        s.budget.enter()
        x, y = torch.randn(4, 8), torch.randn(4, 2)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        before = s.budget.charged
        rec.log(train_loss=loss)  # the loop's own call: Caliper's time
        assert s.budget.charged - before == pytest.approx(1.0)
        before = s.budget.charged
        clock_at = clock()
        opt.step()  # watch's hooks log inside themselves: those logs are in the hooks' time only
        hooks = s.budget.charged - before
        logs_inside = clock() - clock_at
        assert logs_inside >= 1.0  # the hooks logged (the step's values, arrived at once on the CPU) ...
        assert 0 < hooks < 1.0  # ... counted in the hooks' own time, not charged the fake second again
        rec.close()
