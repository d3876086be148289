"""The overhead budget: Caliper's share of the loop's time stays under ``budget``.

The controller is driven by a fake clock through the calls a session makes
(``due()`` → probe → ``step()`` → training), with the Caliper time added up
independently by the simulation (the oracle); then one real short loop.
"""

import itertools
import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import caliper_vk as cv
from caliper_vk.live.budget import DEFAULT_MIN_FPS, Budget


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def simulate(share, steps, train_s, frame_s, probe_s=0.0, write_s=0.0, save_every=0, min_fps=1.0,
             first_frame_s=None, use_due=True, device_s=0.0, interfere_s=0.0):
    """A loop ``if due(): probe; [write]; step(); train`` on a fake clock. Returns the budget,
    the steps drawn, and the Caliper seconds and wall seconds the simulation itself added up.
    ``interfere_s``: the training step right after a drawn frame takes that much longer (the
    frame runs on its cores): that stall is the frame's cost to training, whatever its
    timestamps (``device_s``) say."""
    clock = Clock()
    b = Budget(share, min_fps, clock=clock)
    drawn, caliper = [], 0.0
    start = clock.t
    b.trace = []  # (wall so far, Caliper time so far) after every step
    for i in range(1, steps + 1):
        forced = bool(save_every) and i % save_every == 0
        if use_due and b.due(forced):
            clock.t += probe_s
            caliper += probe_s
        if write_s:
            started = clock()
            clock.t += write_s
            caliper += write_s
            b.wrote(started)
        entered = b.enter()
        if device_s and drawn and drawn[-1][0] == i - 1:
            b.executed(device_s)  # the last frame ran on the CPU device meanwhile (seen complete now)
            if not interfere_s:
                caliper += device_s  # it took the training's cores for its timestamps' time
            # (with interfere_s, what the training lost is that stall instead: added below)
        drew = forced or b.allows()
        took = (first_frame_s if first_frame_s and not drawn else frame_s) if drew else 2e-6
        clock.t += took
        caliper += took
        b.leave(entered, drew)
        if drew:
            drawn.append((i, entered))
        clock.t += train_s
        if interfere_s and drew:
            clock.t += interfere_s
            caliper += interfere_s
        b.trace.append((clock.t - start, caliper))
    return SimpleNamespace(b=b, drawn=drawn, caliper=caliper, wall=clock.t - start)


@pytest.mark.parametrize("share", [0.02, 0.05, 0.10])
def test_budget_share_converges_under_the_budget(share):
    # unlimited, a frame every step would take (3 + 2) / (10 + 5) = 33% of the loop
    r = simulate(share, 3000, train_s=0.010, frame_s=0.002, probe_s=0.003)
    got = r.caliper / r.wall
    assert got <= share * 1.02, f"{got:.4f} of the loop in Caliper, budget {share}"
    assert got >= share * 0.8, "the budget should be used, not left idle"
    assert r.b.measured == pytest.approx(got, rel=0.1)  # what the status line shows
    assert 10 < len(r.drawn) < 3000


def test_budget_none_draws_every_frame_negative_control():
    r = simulate(None, 500, train_s=0.010, frame_s=0.002, probe_s=0.003)
    assert len(r.drawn) == 500 and r.caliper / r.wall > 0.3
    assert r.b.label() is None


def test_budget_holds_after_every_prefix_not_only_on_average():
    frame = 0.001 + 0.002
    r = simulate(0.05, 2000, train_s=0.004, frame_s=0.001, probe_s=0.002)
    # pay first, draw after: at no step does Caliper's time run ahead of the budget by more than
    # the two frames drawn before there was an estimate of a frame's cost
    over = max(c - 0.05 * w for w, c in r.b.trace)
    assert over <= 2 * frame + 1e-9, f"{over * 1e3:.2f} ms over the budget at some step"


def test_budget_min_fps_holds_when_frames_cost_more_than_the_budget():
    # a frame costs 60 ms against 10 ms steps: at 2% one would fit every 3 s
    r = simulate(0.02, 800, train_s=0.010, frame_s=0.060, min_fps=2.0)
    gaps = [b - a for (_, a), (_, b) in itertools.pairwise(r.drawn)]
    assert max(gaps) <= 0.5 + 0.011, f"longest time without a frame {max(gaps):.3f} s at min_fps=2"
    assert len(r.drawn) >= r.wall * 2 * 0.9


def test_budget_never_drops_a_frame_due_to_be_saved():
    r = simulate(0.02, 700, train_s=0.002, frame_s=0.004, probe_s=0.004, save_every=7)
    saved = {i for i, _ in r.drawn if i % 7 == 0}
    assert saved == set(range(7, 701, 7))
    assert r.b.held > 0  # the others were held back


def test_budget_draws_at_once_for_input_then_pays_it_back():
    clock = Clock()
    b = Budget(0.02, 0.2, clock=clock)

    def step(took, drew_if_allowed=True):
        entered = b.enter()
        drew = drew_if_allowed and b.allows()
        clock.t += took if drew else 1e-6
        b.leave(entered, drew)
        clock.t += 0.010  # training
        return drew

    for _ in range(3):  # the first frames set the cost estimate: 50 ms against 0.2 ms a step
        b.interacted()
        assert step(0.050)
    assert not b.due()  # the credit is spent: the budget holds the next frames back ...
    assert not step(0.050)
    b.interacted()  # ... but a drag in the window draws at once, even after due() said no
    assert step(0.050)
    held = sum(not step(0.050) for _ in range(100))
    assert held == 100, "after the input's frame the budget pays its cost back before drawing again"


def test_window_input_makes_the_next_step_draw(monkeypatch):
    from caliper_vk.live import input as window_input

    with cv.Session(window=False, size=(64, 48), budget=0.01) as s:
        t = cv.empty((16, 3))
        s.attach(t, "pointcloud")
        s.step()
        s.flush()
        s.budget.cost, s.budget.credit = 10.0, -10.0  # a frame far over the budget
        s.budget.last_frame = s.budget.clock()
        assert not s.step()
        monkeypatch.setattr(window_input, "panel_at", lambda *a: None)
        window_input.handle(s, [SimpleNamespace(kind="scroll", x=1, y=1, dy=1)])
        assert s.step(), "input should draw the next step whatever the budget"
        s.flush()
        assert not s.step()  # and only that one


def test_the_default_minimum_frame_rate_is_a_frame_every_five_seconds():
    # a 200 ms frame at 2% would come every 10 s; the floor draws one every 5 s
    r = simulate(0.02, 4000, train_s=0.010, frame_s=0.2, min_fps=DEFAULT_MIN_FPS)
    gaps = np.diff([t for _, t in r.drawn])[1:]
    assert len(gaps) >= 6 and max(gaps) <= 5.02 and min(gaps) >= 5.0, gaps


def test_budget_forgives_a_one_off_first_frame():
    # the first frame builds pipelines (300 ms); drawing resumes within about FORGIVE_S
    r = simulate(0.05, 600, train_s=0.010, frame_s=0.001, first_frame_s=0.3)
    first, second = r.drawn[0][1], r.drawn[1][1]
    assert second - first <= 1.0 + 0.011  # min_fps, at worst
    later = [t for _, t in r.drawn if t - first < 3.5]
    assert len(later) > 20, "frames should flow again a couple of seconds after the first one"


def test_budget_counts_writes_made_without_due():
    # a loop that writes 1 ms every step without asking due(): the writes are Caliper's time
    r = simulate(0.10, 1000, train_s=0.009, frame_s=0.001, write_s=0.001, use_due=False)
    assert r.b.measured == pytest.approx(r.caliper / r.wall, rel=0.1)
    assert r.caliper / r.wall <= 0.10 * 1.03


def test_budget_totals_are_everything_it_counted_once():
    # the undecayed totals: each span once (a write inside a due() span is the span's), and
    # every frame's device time; the oracle adds the same time up on its own
    r = simulate(0.05, 800, train_s=0.010, frame_s=0.001, probe_s=0.001, write_s=0.0005, device_s=0.004)
    frames_run = sum(1 for i, _ in r.drawn if i < 800)  # (a frame runs during the step after it)
    assert r.b.device_total == pytest.approx(0.004 * frames_run)
    assert r.b.host_total + r.b.device_total == pytest.approx(r.caliper, rel=1e-9)


def test_budget_counts_frames_executed_on_a_cpu_device():
    # lavapipe: each frame also runs 4 ms on the training's cores, beside 1 ms on the training thread
    r = simulate(0.05, 3000, train_s=0.010, frame_s=0.001, probe_s=0.001, device_s=0.004)
    assert r.caliper / r.wall <= 0.05 * 1.03, f"{r.caliper / r.wall:.4f} with the device's time"
    assert r.caliper / r.wall >= 0.05 * 0.8, "frames should fill the budget, not only the minimum rate"
    assert r.b.device_cost == pytest.approx(0.004)


def test_budget_counts_what_training_loses_while_a_frame_runs():
    # each frame runs 1 ms by its timestamps but stalls the next training step by 5 ms (ops
    # waiting at a barrier for the core the frame took): the measured loss is what counts
    r = simulate(0.05, 3000, train_s=0.010, frame_s=0.001, probe_s=0.001, device_s=0.001,
                 interfere_s=0.005)
    assert r.caliper / r.wall <= 0.05 * 1.03, f"{r.caliper / r.wall:.4f} with the stalls counted"
    assert r.caliper / r.wall >= 0.05 * 0.8, "frames should fill the budget, not only the minimum rate"
    assert r.b.device_cost == pytest.approx(0.005, rel=0.02)
    # the negative control: counted by the timestamps alone, the same loop goes over its budget
    plain = simulate(0.05, 3000, train_s=0.010, frame_s=0.001, probe_s=0.001, device_s=0.001)
    stalls = sum(0.005 for _ in plain.drawn)
    assert (plain.caliper + stalls) / (plain.wall + stalls) > 0.05 * 1.3


def test_budget_leaves_an_outlier_step_out_of_the_loss():
    # a validation pass (2 s) right after a frame is not the frame's doing: the timestamps count
    r = simulate(0.05, 400, train_s=0.010, frame_s=0.001, probe_s=0.001, device_s=0.002)
    b = r.b
    b.leave(b.enter(), True)  # a frame in flight ...
    b.clock.t += 2.0  # ... across a long pause
    b.enter()
    b.executed(0.002)
    assert b.device_cost == pytest.approx(0.002, rel=0.05)


def test_budget_due_answers_once_per_step():
    clock = Clock()
    b = Budget(0.05, clock=clock)
    for _ in range(3):  # a cost estimate, then a credit that does not cover a frame
        b.due()
        clock.t += 0.01
        entered = b.enter()
        clock.t += 0.01
        b.leave(entered, True)
    first = b.due()
    clock.t += 5.0  # the probe ran long: a second question in the same step gets the same answer
    assert b.due() is first


def test_budget_ignores_writes_on_a_producer_thread():
    clock = Clock()
    b = Budget(0.05, clock=clock)
    b.leave(b.enter(), False)

    def produce():
        started = clock()
        clock.t += 0.5
        b.wrote(started)

    th = threading.Thread(target=produce)
    th.start()
    th.join()
    assert b.spent == 0.0


@pytest.mark.parametrize(("budget", "min_fps"), [(0, 1), (1.5, 1), ("5", 1), ("150%", 1), ("lots", 1),
                                                    (True, 1), (0.05, 0)])
def test_a_bad_budget_is_refused(budget, min_fps):
    with pytest.raises(ValueError, match=r"budget must be|budget is a share|min_fps must be"):
        cv.Session(window=False, size=(32, 32), budget=budget, min_fps=min_fps)


def test_budget_on_the_status_line(monkeypatch):
    with cv.Session(window=False, size=(64, 48), budget=0.05) as s:
        s.attach(torch.randn(8, 8), "heatmap")
        s.step()
        s.step()
        line = s.status().line()
        assert "≤5% of training: " in line
        share = line.split("≤5% of training: ")[1].split(" · ")[0]
        assert share == "…" or (share.endswith("%") and 0 <= float(share[:-1]) <= 100), line
    with cv.Session(window=False, size=(64, 48), budget=None) as s:
        assert "of training" not in s.status().line()
    monkeypatch.delenv("CALIPER_VK_BUDGET", raising=False)  # the suite turns it off (conftest.py)
    with cv.Session(window=False, size=(64, 48)) as s:
        assert s.budget.share == 0.05  # every session has one by default
    monkeypatch.setenv("CALIPER_VK_BUDGET", "0.1")
    with cv.Session(window=False, size=(64, 48)) as s:
        assert s.budget.share == 0.1
    monkeypatch.setenv("CALIPER_VK_BUDGET", "off")
    with cv.Session(window=False, size=(64, 48)) as s:
        assert s.budget.share is None and "of training" not in s.status().line()
    monkeypatch.setenv("CALIPER_VK_BUDGET", "10%")
    with cv.Session(window=False, size=(64, 48), budget="2%") as s:
        assert s.budget.share == 0.02  # a share written as a percentage, here and in the environment
    with cv.Session(window=False, size=(64, 48)) as s:
        assert s.budget.share == 0.1
    monkeypatch.setenv("CALIPER_VK_BUDGET", "lots")  # a typo never stops training: said, and 5% used
    with pytest.warns(UserWarning, match=r"CALIPER_VK_BUDGET='lots' is not a share .* using the default"):
        s = cv.Session(window=False, size=(32, 32))
    with s:
        assert s.budget.share == 0.05


def test_budget_holds_in_a_real_short_loop():
    """A real loop (a small MLP on CPU, a probe forward when due, a heatmap written under
    writing()); Caliper's time is measured here around every Caliper call and the probe."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x = torch.randn(256, 64)
    act = cv.empty((64, 128))
    with cv.Session(window=False, size=(160, 120), budget=0.10) as s:
        panel = s.attach(act, "heatmap")
        s.render()  # the first frames build pipelines (and llvmpipe compiles shaders): not timed
        s.render()
        ours = 0.0
        steps = 0
        start = time.perf_counter()
        while time.perf_counter() - start < 1.5:
            t0 = time.perf_counter()
            if s.due():
                with torch.no_grad(), panel.writing():
                    act.copy_(net[1](net[0](x[:64])))
            s.step()
            ours += time.perf_counter() - t0
            loss = net(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
        wall = time.perf_counter() - start
        s.flush()
        measured = s.budget.measured
        frames = s.frames
    assert 1 <= frames < steps
    assert ours / wall <= 0.10 + 0.04, f"Caliper took {ours / wall:.1%} of a 1.5 s loop at a 10% budget"
    # the session's own measure (decayed over 5 s, so it still holds the two frames above)
    assert measured is not None and measured < 0.25


def test_asking_due_counts_as_caliper_time(monkeypatch):
    with cv.Session(window=False, size=(32, 32), budget=0.05) as s:
        s.attach(cv.empty((4, 3)), "pointcloud")
        s.step()
        s.flush()
        s.step()  # the budget's step accounting starts

        def slow_no(step):
            time.sleep(0.003)
            return False

        monkeypatch.setattr(s, "_due", slow_no)
        before = s.budget.spent
        assert not s.due()
        assert s.budget.spent - before >= 0.003


RASTER_PROBE = """
import glob, os, sys
import caliper_vk as cv
s = cv.Session(window=False, size=(64, 48))
if s.device.info.kind != "cpu":
    print("not-cpu"); sys.exit()
names = [open(p).read().strip() for p in glob.glob("/proc/self/task/*/comm")]
print(sum(n.startswith("llvmpipe-") for n in names), os.environ.get("LP_NUM_THREADS", "unset"))
s.close()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads thread names from /proc")
@pytest.mark.parametrize(("given", "threads"), [(None, "1"), ("2", "2")])
def test_a_live_session_rasterises_on_one_cpu_thread_unless_told(given, threads):
    env = {k: v for k, v in os.environ.items() if k != "LP_NUM_THREADS"}
    if given is not None:
        env["LP_NUM_THREADS"] = given
    out = subprocess.run([sys.executable, "-c", RASTER_PROBE], env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    if out == ["not-cpu"]:
        pytest.skip("the device is not a CPU Vulkan device (lavapipe)")
    assert out == [threads, given or "unset"], out  # and the session left the environment as it was


def test_budget_on_the_status_line_says_when_saved_frames_take_it_over(tmp_path):
    """An offscreen recording saves every Kth frame whatever the budget: over the budget, the status
    line says why rather than leaving a user to read "≤5% of training: 85.8%" as a fault."""
    with cv.Session(window=False, size=(64, 48), budget=0.05, out_dir=tmp_path, save_every=2) as s:
        s.attach(torch.randn(8, 8), "heatmap")
        for _ in range(12):
            s.step()
            time.sleep(0.001)  # a little training: far under a saved frame's cost
        s.flush()
        assert s.budget.measured > 0.05, s.budget.measured
        assert "(saving every 2 steps)" in s.status().line(), s.status().line()
    fresh = Budget(0.05)  # nothing measured yet: nothing to explain
    assert fresh.measured is None and fresh.label(save_every=5) == "≤5% of training: …"
